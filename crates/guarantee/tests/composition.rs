//! Composition checks of flawed and correct hierarchies (§5.1.2, §5.3.1),
//! with the explanations checked.

mod common;

use common::{g, ms};
use hsched_guarantee::compose::{
    compose, Diagnostic, Hierarchy, ParentSpec, SchedulerSpec, Status, ThreadSpec,
};
use hsched_guarantee::mapping::{InstanceParams, MappingError};
use hsched_guarantee::Guarantee;

fn top(name: &str, policy: &str) -> SchedulerSpec {
    SchedulerSpec::new(name, policy).under(ParentSpec::top())
}
fn under(name: &str, policy: &str, parent: &str) -> SchedulerSpec {
    SchedulerSpec::new(name, policy).under(ParentSpec::scheduler(parent))
}

#[test]
fn reservation_scheduler_under_time_sharing() {
    // §5 opening: "a real-time scheduler that is scheduled using a time-sharing
    // scheduler … cannot promise threads that they will meet their deadlines."
    let mut h = Hierarchy::new(1);
    h.add_scheduler(top("root", "fp"));
    h.add_scheduler(under("desktop", "ts", "root"));
    h.add_scheduler(under("rt", "rez", "desktop"));
    h.add_thread(
        ThreadSpec::new(
            "video",
            ParentSpec::scheduler("rt").reservation(ms(10.0), ms(33.0)),
        )
        .requesting(g("RESBH 10 33")),
    );
    let c = compose(&h);
    assert_eq!(c.diagnostics.len(), 1, "{:?}", c.diagnostics);
    let d = &c.diagnostics[0];
    assert_eq!(d.code(), "unacceptable");
    let msg = d.to_string();
    assert!(
        msg.starts_with("rez 'rt' under ts 'desktop' receives NULL; Rez needs ALL or RESU"),
        "{msg}"
    );
    assert!(msg.contains("NULL promises nothing"), "{msg}");
    assert!(
        msg.contains("[path: top → fp 'root' → ts 'desktop' → rez 'rt']"),
        "{msg}"
    );
    match d {
        Diagnostic::Unacceptable {
            received, needs, ..
        } => {
            assert_eq!(*received, Guarantee::Null);
            assert_eq!(needs, "ALL or RESU");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(c.node("rt").unwrap().status, Status::Failed);
    assert_eq!(c.node("video").unwrap().status, Status::Skipped);
    // The same reservation scheduler at the top of an FP root is fine.
    let mut h = Hierarchy::new(1);
    h.add_scheduler(top("root", "fp"));
    h.add_scheduler(
        SchedulerSpec::new("rt", "rez").under(ParentSpec::scheduler("root").priority(2)),
    );
    h.add_scheduler(
        SchedulerSpec::new("desktop", "ts").under(ParentSpec::scheduler("root").priority(1)),
    );
    h.add_thread(
        ThreadSpec::new(
            "video",
            ParentSpec::scheduler("rt").reservation(ms(10.0), ms(33.0)),
        )
        .requesting(g("RESBH 10 33")),
    );
    let c = compose(&h);
    assert!(c.is_ok(), "{:?}", c.diagnostics);
    assert_eq!(c.received("desktop"), Some(Guarantee::Null));
    assert_eq!(c.received("video"), Some(g("RESBH 10 33")));
}

#[test]
fn over_admission_is_refused_with_the_numbers() {
    let mut h = Hierarchy::new(1);
    h.add_scheduler(top("rt", "rez"));
    for (i, amount) in [40.0, 30.0, 20.0].iter().enumerate() {
        h.add_thread(ThreadSpec::new(
            &format!("t{i}"),
            ParentSpec::scheduler("rt").reservation(ms(*amount), ms(100.0)),
        ));
    }
    let c = compose(&h);
    assert_eq!(c.diagnostics.len(), 1, "{:?}", c.diagnostics);
    let msg = c.diagnostics[0].to_string();
    assert!(
        msg.starts_with("rez 'rt' cannot provide a guarantee to thread 't2': admission refused"),
        "{msg}"
    );
    assert!(
        msg.contains("needs 20.0% but 70.0% of the 85.0% cap is already reserved"),
        "{msg}"
    );
    assert_eq!(c.received("t1"), Some(g("RESBH 30 100")));
    assert_eq!(c.node("t2").unwrap().status, Status::Skipped);
    // A larger cap admits all three.
    h.schedulers[0].params = InstanceParams {
        cap: Some(0.95),
        ..Default::default()
    };
    assert!(compose(&h).is_ok());
}

fn join_hierarchy(request: &str, cpus: u32) -> Hierarchy {
    // Fig 6.3: FP root; Rez at high priority; a join combines a reservation
    // with the idle time below it.
    let mut h = Hierarchy::new(cpus);
    h.add_scheduler(SchedulerSpec::new("root", "fp").under(ParentSpec::top_cpu(0)));
    h.add_scheduler(
        SchedulerSpec::new("rez", "rez").under(ParentSpec::scheduler("root").priority(2)),
    );
    h.add_scheduler(
        SchedulerSpec::new("j", "join")
            .under(ParentSpec::scheduler("rez").reservation(ms(10.0), ms(33.0)))
            .under(ParentSpec::scheduler("root").priority(1)),
    );
    h.add_thread(ThreadSpec::new("player", ParentSpec::scheduler("j")).requesting(g(request)));
    h
}

#[test]
fn a_hard_guarantee_cannot_come_through_a_join() {
    let c = compose(&join_hierarchy("RESBH 10 33", 1));
    assert_eq!(c.diagnostics.len(), 1, "{:?}", c.diagnostics);
    let d = &c.diagnostics[0];
    assert_eq!(d.code(), "request-unsatisfied");
    let msg = d.to_string();
    assert!(
        msg.starts_with(
            "thread 'player' under join 'j' receives RESBS 10 33 but requested RESBH 10 33"
        ),
        "{msg}"
    );
    assert!(
        msg.contains("RESBS cannot become RESBH: a soft guarantee may give extra time"),
        "{msg}"
    );
    // The soft version is what a join provides (§5.3.1.2).
    assert!(compose(&join_hierarchy("RESBS 10 33", 1)).is_ok());
    // …and, through Theorem 5.2, a continuous soft reservation over 2y − x.
    assert!(compose(&join_hierarchy("RESCS 10 56", 1)).is_ok());
    assert!(!compose(&join_hierarchy("RESCS 10 55", 1)).is_ok());
    // A limit scheduler below the join makes it hard again (§5.3.1.3).
    let mut h = join_hierarchy("RESBH 10 33", 1);
    h.threads.clear();
    h.add_scheduler(under("lim", "limit", "j").with_params(InstanceParams {
        amount: Some(ms(10.0)),
        period: Some(ms(33.0)),
        ..Default::default()
    }));
    h.add_thread(
        ThreadSpec::new("player", ParentSpec::scheduler("lim")).requesting(g("RESBH 10 33")),
    );
    let c = compose(&h);
    assert!(c.is_ok(), "{:?}", c.diagnostics);
    assert_eq!(c.received("lim"), Some(g("RESBS 10 33")));
    assert_eq!(c.received("player"), Some(g("RESBH 10 33")));
}

#[test]
fn join_sums_only_on_a_uniprocessor() {
    let build = |cpus: u32| {
        let mut h = Hierarchy::new(cpus);
        h.add_scheduler(SchedulerSpec::new("rez", "rez").under(ParentSpec::top_cpu(0)));
        h.add_scheduler(
            SchedulerSpec::new("j", "join")
                .under(ParentSpec::scheduler("rez").reservation(ms(2.0), ms(30.0)))
                .under(ParentSpec::scheduler("rez").reservation(ms(3.0), ms(30.0))),
        );
        h.add_thread(ThreadSpec::new("t", ParentSpec::scheduler("j")).requesting(g("RESBS 5 30")));
        h
    };
    // §5.3.1.2: RESBS 2 30 + RESBS 3 30 = RESBS 5 30 on a uniprocessor.
    let c = compose(&build(1));
    assert!(c.is_ok(), "{:?}", c.diagnostics);
    assert_eq!(c.received("t"), Some(g("RESBS 5 30")));
    // Not on a multiprocessor: the best single parent is RESBS 3 30.
    let c = compose(&build(2));
    assert_eq!(c.diagnostics.len(), 1);
    assert!(
        c.diagnostics[0]
            .to_string()
            .contains("receives RESBS 3 30 but requested RESBS 5 30"),
        "{}",
        c.diagnostics[0]
    );
}

#[test]
fn proportional_share_needs_a_real_guarantee() {
    let mut h = Hierarchy::new(1);
    h.add_scheduler(top("ts", "ts"));
    h.add_scheduler(under("sfq", "ps", "ts"));
    let c = compose(&h);
    let msg = c.diagnostics[0].to_string();
    assert!(
        msg.starts_with("ps 'sfq' under ts 'ts' receives NULL; PS needs PSBE, PS or RESU"),
        "{msg}"
    );
    // Under a basic reservation it works through Theorem 5.5.
    let mut h = Hierarchy::new(1);
    h.add_scheduler(top("rez", "rez"));
    h.add_scheduler(
        SchedulerSpec::new("sfq", "ps")
            .under(ParentSpec::scheduler("rez").reservation(ms(10.0), ms(20.0))),
    );
    h.add_thread(ThreadSpec::new("a", ParentSpec::scheduler("sfq")));
    let c = compose(&h);
    assert!(c.is_ok());
    assert_eq!(c.node("sfq").unwrap().accepted, vec![g("PSBE 0.5 10")]);
    // One thread, q = 10 ms: PSBE 0.5 (1·1·10/0.5 + 10/0.5 + 10) = PSBE 0.5 50.
    assert_eq!(c.received("a"), Some(g("PSBE 0.5 50")));
}

#[test]
fn limit_needs_enough_underneath() {
    let mut h = Hierarchy::new(1);
    h.add_scheduler(top("rez", "rez"));
    h.add_scheduler(
        SchedulerSpec::new("lim", "limit")
            .with_params(InstanceParams {
                amount: Some(ms(5.0)),
                period: Some(ms(20.0)),
                ..Default::default()
            })
            .under(ParentSpec::scheduler("rez").reservation(ms(4.0), ms(20.0))),
    );
    let c = compose(&h);
    let msg = c.diagnostics[0].to_string();
    assert!(msg.starts_with("limit 'lim' under rez 'rez' receives RESBH 4 20; Limit needs RESBS of at least 5 per 20"), "{msg}");
}

#[test]
fn fp_priorities_must_be_distinct_where_it_matters() {
    let mut h = Hierarchy::new(1);
    h.add_scheduler(top("root", "fp"));
    h.add_thread(ThreadSpec::new(
        "a",
        ParentSpec::scheduler("root").priority(5),
    ));
    h.add_thread(ThreadSpec::new(
        "b",
        ParentSpec::scheduler("root").priority(5),
    ));
    h.add_thread(ThreadSpec::new(
        "c",
        ParentSpec::scheduler("root").priority(1),
    ));
    let c = compose(&h);
    assert_eq!(c.diagnostics.len(), 2);
    assert!(
        c.diagnostics[0]
            .to_string()
            .contains("priority 5 is shared with 'b'"),
        "{}",
        c.diagnostics[0]
    );
    assert_eq!(c.received("c"), Some(Guarantee::Null));
}

#[test]
fn structural_errors_are_named() {
    let mut h = Hierarchy::new(2);
    h.add_scheduler(top("root", "ts"));
    h.add_scheduler(under("x", "edf", "root"));
    h.add_scheduler(under("y", "rez", "nowhere"));
    h.add_scheduler(SchedulerSpec::new("z", "ts"));
    h.add_scheduler(SchedulerSpec::new("w", "rez").under(ParentSpec::top_cpu(7)));
    h.add_scheduler(under("c1", "ts", "c2"));
    h.add_scheduler(under("c2", "ts", "c1"));
    h.add_scheduler(
        SchedulerSpec::new("bad", "rez")
            .with_params(InstanceParams {
                cap: Some(2.0),
                ..Default::default()
            })
            .under(ParentSpec::scheduler("root")),
    );
    h.add_thread(ThreadSpec::new("t", ParentSpec::scheduler("root")));
    h.add_thread(ThreadSpec::new("t", ParentSpec::scheduler("root")));
    h.add_thread(ThreadSpec::new("u", ParentSpec::scheduler("t")));
    // Instances and threads are separate namespaces: a thread named like an
    // instance is fine.
    h.add_thread(ThreadSpec::new("root", ParentSpec::scheduler("root")));
    let c = compose(&h);
    let codes: Vec<&str> = c.diagnostics.iter().map(Diagnostic::code).collect();
    assert!(!text_has_root_dup(&c), "{:?}", c.diagnostics);
    assert_eq!(c.thread("root").unwrap().status, Status::Ok);
    for want in [
        "duplicate-name",
        "bad-scheduler",
        "unknown-parent",
        "no-parent",
        "bad-cpu",
        "cycle",
        "parent-is-thread",
    ] {
        assert!(codes.contains(&want), "{want} missing from {codes:?}");
    }
    let text: Vec<String> = c.diagnostics.iter().map(ToString::to_string).collect();
    let has = |s: &str| text.iter().any(|t| t.contains(s));
    assert!(
        has("unknown policy `edf`; known policies: fp, ts, rez, ps"),
        "{text:?}"
    );
    assert!(
        has("rez 'y' names parent 'nowhere', which is no scheduler instance"),
        "{text:?}"
    );
    assert!(has("ts 'z' has no parent"), "{text:?}");
    assert!(
        has("rez 'w' is on processor 7, but the machine has 2 (0 to 1)"),
        "{text:?}"
    );
    assert!(
        has("the hierarchy has a cycle through (or below) ts 'c1', ts 'c2'"),
        "{text:?}"
    );
    assert!(has("thread 't': the name is used twice"), "{text:?}");
    assert!(
        has("thread 'u' names parent 't', which is a thread"),
        "{text:?}"
    );
    assert!(has("`cap` = 2 must be a fraction in (0, 1]"), "{text:?}");
    assert!(c.diagnostics.iter().any(|d| matches!(
        d,
        Diagnostic::BadScheduler {
            error: MappingError::UnknownPolicy { .. },
            ..
        }
    )));
    assert!(Hierarchy::new(0).schedulers.is_empty());
    assert_eq!(
        compose(&Hierarchy::new(0)).diagnostics,
        vec![Diagnostic::NoCpus]
    );
}

fn text_has_root_dup(c: &hsched_guarantee::Composition) -> bool {
    c.diagnostics
        .iter()
        .any(|d| d.to_string().contains("'root': the name is used twice"))
}

#[test]
fn instances_can_ask_for_a_guarantee() {
    // §6.1: a rate-monotonic FP asks for the reservation the ghost-task
    // method computed; under a join it gets the soft version.
    let build = |amount: f64, request: &str| {
        let mut h = Hierarchy::new(1);
        h.add_scheduler(SchedulerSpec::new("root", "fp").under(ParentSpec::top()));
        h.add_scheduler(
            SchedulerSpec::new("rez", "rez").under(ParentSpec::scheduler("root").priority(2)),
        );
        h.add_scheduler(
            SchedulerSpec::new("j", "join")
                .under(ParentSpec::scheduler("rez").reservation(ms(amount), ms(6.0)))
                .under(ParentSpec::scheduler("root").priority(1)),
        );
        h.add_scheduler(
            SchedulerSpec::new("rm", "fp")
                .under(ParentSpec::scheduler("j"))
                .requesting(g(request)),
        );
        h
    };
    assert!(compose(&build(1.5, "RESBS 1.5 6")).is_ok());
    let c = compose(&build(1.2, "RESBS 1.5 6"));
    assert_eq!(c.diagnostics.len(), 1);
    let msg = c.diagnostics[0].to_string();
    assert!(
        msg.starts_with("fp 'rm' under join 'j' receives RESBS 1.2 6 but requested RESBS 1.5 6"),
        "{msg}"
    );
    // Rez sizes an instance's reservation from its request when the edge has none.
    let mut h = Hierarchy::new(1);
    h.add_scheduler(top("rez", "rez"));
    h.add_scheduler(under("rm", "fp", "rez").requesting(g("RESBH 1.5 6")));
    let c = compose(&h);
    assert!(c.is_ok(), "{:?}", c.diagnostics);
    assert_eq!(c.received("rm"), Some(g("RESBH 1.5 6")));
}

#[test]
fn multiprocessor_roots() {
    // A uniprocessor scheduler owning every processor uses one at a time:
    // it receives one ALL (§6.3.1)…
    let mut h = Hierarchy::new(2);
    h.add_scheduler(top("rez", "rez"));
    h.add_thread(ThreadSpec::new(
        "t",
        ParentSpec::scheduler("rez").reservation(ms(1.0), ms(2.0)),
    ));
    let c = compose(&h);
    assert!(c.is_ok(), "{:?}", c.diagnostics);
    assert_eq!(c.scheduler("rez").unwrap().received.len(), 1);
    // …but it cannot have two parents.
    let mut h = Hierarchy::new(1);
    h.add_scheduler(top("fp", "fp"));
    h.add_scheduler(
        SchedulerSpec::new("rez", "rez")
            .under(ParentSpec::scheduler("fp").priority(2))
            .under(ParentSpec::scheduler("fp").priority(1)),
    );
    let c = compose(&h);
    assert_eq!(c.diagnostics[0].code(), "too-many-parents");
    assert!(
        c.diagnostics[0]
            .to_string()
            .contains("receives 2 VPs but can use 1"),
        "{}",
        c.diagnostics[0]
    );
    // One reservation scheduler per processor (§6.3.1) is fine…
    let mut h = Hierarchy::new(2);
    h.add_scheduler(SchedulerSpec::new("rez0", "rez").under(ParentSpec::top_cpu(0)));
    h.add_scheduler(SchedulerSpec::new("rez1", "rez").under(ParentSpec::top_cpu(1)));
    assert!(compose(&h).is_ok());
    // …but two roots on one processor are not.
    h.add_scheduler(SchedulerSpec::new("ts", "ts").under(ParentSpec::top_cpu(1)));
    let c = compose(&h);
    assert!(
        c.diagnostics[0]
            .to_string()
            .starts_with("processor 1 is claimed by rez 'rez1' and ts 'ts'"),
        "{}",
        c.diagnostics[0]
    );
    // A multiprocessor FP gives ALL to its two most urgent children.
    let mut h = Hierarchy::new(2);
    h.add_scheduler(top("fp", "fp"));
    for (name, prio) in [("a", 3), ("b", 2), ("c", 1)] {
        h.add_thread(
            ThreadSpec::new(name, ParentSpec::scheduler("fp").priority(prio))
                .requesting(g("RESCS 1 1")),
        );
    }
    let c = compose(&h);
    assert_eq!(c.received("a"), Some(Guarantee::All));
    assert_eq!(c.received("b"), Some(Guarantee::All));
    assert_eq!(c.diagnostics.len(), 1);
    assert!(
        c.diagnostics[0]
            .to_string()
            .contains("thread 'c' under fp 'fp' receives NULL"),
        "{}",
        c.diagnostics[0]
    );
}

#[test]
fn a_deep_hierarchy() {
    // 10,000 nested time-sharing schedulers and a reservation scheduler at the
    // bottom: one diagnostic, with the whole path, and no stack overflow.
    let mut h = Hierarchy::new(1);
    h.add_scheduler(top("ts0", "ts"));
    for i in 1..10_000 {
        h.add_scheduler(under(&format!("ts{i}"), "ts", &format!("ts{}", i - 1)));
    }
    h.add_scheduler(under("rt", "rez", "ts9999"));
    let c = compose(&h);
    assert_eq!(c.diagnostics.len(), 1);
    let msg = c.diagnostics[0].to_string();
    assert!(
        msg.contains("[path: top → ts 'ts0' → ts 'ts1' → "),
        "{}",
        &msg[..200]
    );
    assert!(msg.ends_with("ts 'ts9999' → rez 'rt']"));
    let tree = c.render_tree();
    assert_eq!(tree.lines().count(), 1 + 10_001 + 2);
}

/// A multiprocessor child of fp registers a VP for every processor fp is
/// offered (§4.3.11), so on two processors an fp application above a
/// reservation scheduler can take both, and Rez below it is promised
/// nothing. (The composition once gave each child one processor.)
#[test]
fn a_multiprocessor_child_holds_every_rank_it_is_offered() {
    let at = |name: &str, policy: &str, prio: i64| {
        let mut edge = ParentSpec::scheduler("root");
        edge.params.priority = Some(prio);
        SchedulerSpec::new(name, policy).under(edge)
    };
    let mut h = Hierarchy::new(2);
    h.add_scheduler(top("root", "fp"));
    h.add_scheduler(at("app", "fp", 19));
    h.add_scheduler(at("rt", "rez", 18));
    h.add_scheduler(at("one", "rez", 17));
    let c = compose(&h);
    assert_eq!(c.received("app"), Some(Guarantee::All));
    assert_eq!(
        c.received("rt"),
        Some(Guarantee::Null),
        "{}",
        c.render_tree()
    );
    // Uniprocessor children take one rank each.
    let mut h = Hierarchy::new(2);
    h.add_scheduler(top("root", "fp"));
    h.add_scheduler(at("rt", "rez", 19));
    h.add_scheduler(at("one", "rez", 18));
    h.add_scheduler(at("app", "fp", 17));
    let c = compose(&h);
    assert_eq!(c.received("rt"), Some(Guarantee::All));
    assert_eq!(c.received("one"), Some(Guarantee::All));
    assert_eq!(c.received("app"), Some(Guarantee::Null));
}
