//! Join (`join`): CPU from either parent, revocation reasons passed on
//! unchanged, the highest-numbered parent kept on a multiprocessor, and
//! Join under FP at depth with revocations. The protocol checker runs after
//! every input.

use hsched_core::testing::{Behaviour, Driver};
use hsched_core::*;

fn ms(x: u64) -> Instant {
    Instant(x * 1_000_000)
}

fn d(x: u64) -> Duration {
    Duration::from_millis(x)
}

fn prio(p: i64) -> Params {
    Params::new().with("priority", ParamValue::Int(p))
}

fn s(v: &str) -> ParamValue {
    ParamValue::Str(v.into())
}

fn top(cpus: &[u32]) -> Vec<ParentLink> {
    vec![ParentLink {
        parent: ParentRef::Top {
            cpus: cpus.iter().map(|&c| CpuId(c)).collect(),
        },
        params: Params::new(),
    }]
}

fn under(p: InstanceId, params: Params) -> Vec<ParentLink> {
    vec![ParentLink {
        parent: ParentRef::Instance(p),
        params,
    }]
}

fn build(name: &str, params: Params) -> Box<dyn Policy> {
    hsched_policies::build(name, &params).unwrap()
}

fn checked(cpus: usize) -> Hsi {
    let mut hsi = Hsi::new(cpus);
    hsi.set_checking(true);
    hsi.set_tracing(true);
    hsi
}

fn drain(hsi: &mut Hsi) -> Vec<TraceEvent> {
    let mut t = Vec::new();
    hsi.drain_trace(&mut t);
    t
}

/// Fig 6.3's soft reservation on one processor: root fp with a hard part
/// (limit 10ms/33ms at priority 10) and ts at priority 1; the join `j`
/// takes both, the hard part declared first. A thread under the join and
/// a competing thread under ts, both CPU-bound.
struct Soft {
    drv: Driver,
    join: InstanceId,
    hard: InstanceId,
    ts: InstanceId,
    t: ThreadId,
    other: ThreadId,
}

fn soft() -> Soft {
    let mut hsi = checked(1);
    let root = hsi
        .create_instance(ms(0), "root", build("fp", Params::new()), top(&[0]))
        .unwrap();
    let cap = Params::new()
        .with("amount", s("10ms"))
        .with("period", s("33ms"));
    let hard = hsi
        .create_instance(ms(0), "hard", build("limit", cap), under(root, prio(10)))
        .unwrap();
    let ts = hsi
        .create_instance(
            ms(0),
            "ts",
            build("ts", Params::new()),
            under(root, prio(1)),
        )
        .unwrap();
    let parents = vec![
        ParentLink {
            parent: ParentRef::Instance(hard),
            params: Params::new(),
        },
        ParentLink {
            parent: ParentRef::Instance(ts),
            params: prio(8),
        },
    ];
    let join = hsi
        .create_instance(ms(0), "j", build("join", Params::new()), parents)
        .unwrap();
    assert_eq!(
        hsi.instance_parents(join).len(),
        2,
        "one VP with each parent"
    );
    let t = hsi.create_thread(ms(0), "t", join, Params::new()).unwrap();
    let other = hsi.create_thread(ms(0), "other", ts, prio(8)).unwrap();
    let mut drv = Driver::new(hsi);
    drv.add(t, Behaviour::CpuBound).unwrap();
    drv.add(other, Behaviour::CpuBound).unwrap();
    Soft {
        drv,
        join,
        hard,
        ts,
        t,
        other,
    }
}

#[test]
fn a_thread_under_join_gets_cpu_from_either_parent() {
    let mut sc = soft();
    let mut before = Duration::ZERO;
    for k in 1..=100 {
        sc.drv.run_until(ms(33 * k)).unwrap();
        let now = sc.drv.hsi.thread_received(sc.t);
        assert!(
            now - before >= d(10),
            "period {k}: the hard part alone gives 10 ms, got {:?}",
            now - before
        );
        before = now;
    }
    let t = sc.drv.hsi.thread_received(sc.t).as_secs_f64();
    let o = sc.drv.hsi.thread_received(sc.other).as_secs_f64();
    assert!((t + o - 3.3).abs() < 1e-9, "the processor is never idle");
    // 10/33 from the hard part plus about half of the remaining 23/33.
    assert!((0.58..0.72).contains(&(t / 3.3)), "join share {}", t / 3.3);
    let trace = drain(&mut sc.drv.hsi);
    let j = Node::Instance(sc.join);
    let granted_by = |p: InstanceId| {
        trace.iter().filter(|e| matches!(e.kind, TraceKind::Grant { parent, child, .. } if parent == Node::Instance(p) && child == j)).count()
    };
    assert!(
        granted_by(sc.hard) >= 100,
        "the hard part grants every period"
    );
    assert!(granted_by(sc.ts) >= 30, "time sharing grants too");
}

#[test]
fn revocation_reasons_pass_through_unchanged() {
    let mut sc = soft();
    sc.drv.run_until(ms(3300)).unwrap();
    let trace = drain(&mut sc.drv.hsi);
    let j = Node::Instance(sc.join);
    let mut seen = Vec::new();
    for (i, e) in trace.iter().enumerate() {
        if let TraceKind::Revoke {
            parent,
            child: Node::Thread(_),
            reason,
            ..
        } = e.kind
        {
            if parent != j {
                continue;
            }
            // The revoke Join received just before, in the same input.
            let upstream = trace[..i].iter().rev().find_map(|x| match x.kind {
                TraceKind::Revoke { child, reason, .. } if child == j => Some((x.at, reason)),
                _ => None,
            });
            assert_eq!(
                upstream,
                Some((e.at, reason)),
                "event {i}: join passes on the reason it got"
            );
            seen.push(reason);
        }
    }
    let exhausted = seen
        .iter()
        .filter(|r| **r == RevokeReason::BudgetExhausted)
        .count();
    let preempted = seen
        .iter()
        .filter(|r| **r == RevokeReason::Preempted)
        .count();
    assert!(
        exhausted >= 90,
        "the hard part's exhaustion reaches the thread ({exhausted})"
    );
    assert!(
        preempted >= 30,
        "time sharing's preemptions reach the thread ({preempted})"
    );
}

/// Two one-processor hierarchies, fp on cpu0 (`a`) and fp on cpu1 (`b`),
/// and a join under both (`a` declared first, so `b` is preferred).
fn two_roots() -> (Hsi, InstanceId, InstanceId, InstanceId) {
    let mut hsi = checked(2);
    let a = hsi
        .create_instance(ms(0), "a", build("fp", Params::new()), top(&[0]))
        .unwrap();
    let b = hsi
        .create_instance(ms(0), "b", build("fp", Params::new()), top(&[1]))
        .unwrap();
    let parents = vec![
        ParentLink {
            parent: ParentRef::Instance(a),
            params: prio(1),
        },
        ParentLink {
            parent: ParentRef::Instance(b),
            params: prio(1),
        },
    ];
    let j = hsi
        .create_instance(ms(0), "j", build("join", Params::new()), parents)
        .unwrap();
    (hsi, a, b, j)
}

#[test]
fn both_parents_granting_keeps_the_highest_numbered() {
    let (mut hsi, a, _, j) = two_roots();
    let t = hsi.create_thread(ms(0), "t", j, Params::new()).unwrap();
    drain(&mut hsi);
    hsi.wake(ms(1), t).unwrap();
    assert_eq!(
        hsi.running(CpuId(1)),
        Some(t),
        "runs from b, the highest-numbered parent"
    );
    assert_eq!(hsi.running(CpuId(0)), None);
    let trace = drain(&mut hsi);
    let a_vp = hsi.instance_parents(j)[0];
    assert!(
        trace
            .iter()
            .any(|e| matches!(e.kind, TraceKind::Grant { vp, .. } if vp == a_vp)),
        "a granted too: {trace:?}"
    );
    assert!(
        trace
            .iter()
            .any(|e| matches!(e.kind, TraceKind::Release { vp, .. } if vp == a_vp)),
        "and was released"
    );
    assert_eq!(hsi.vp_info(a_vp).state, VpState::Waiting);
    assert_eq!(hsi.vp_info(a_vp).parent, Node::Instance(a));
}

#[test]
fn a_higher_numbered_grant_takes_over_and_a_revoke_falls_back() {
    let (mut hsi, _, b, j) = two_roots();
    let t = hsi.create_thread(ms(0), "t", j, Params::new()).unwrap();
    let x = hsi.create_thread(ms(0), "x", b, prio(5)).unwrap();
    hsi.wake(ms(0), x).unwrap();
    hsi.wake(ms(1), t).unwrap();
    assert_eq!(
        hsi.running(CpuId(0)),
        Some(t),
        "b is busy, so t runs from a"
    );
    drain(&mut hsi);
    hsi.block(ms(5), x).unwrap();
    assert_eq!(hsi.running(CpuId(1)), Some(t), "b granted: t moves to b");
    assert_eq!(
        hsi.running(CpuId(0)),
        None,
        "and a's processor is given back"
    );
    let t_vp = hsi.thread_vp(t);
    let trace = drain(&mut hsi);
    assert!(trace.iter().any(|e| matches!(e.kind, TraceKind::Revoke { vp, reason: RevokeReason::Preempted, cpu: CpuId(0), .. } if vp == t_vp)));
    assert_eq!(
        hsi.vp_info(hsi.instance_parents(j)[0]).state,
        VpState::Waiting
    );
    hsi.wake(ms(9), x).unwrap();
    assert_eq!(hsi.running(CpuId(1)), Some(x), "b preempts the join for x");
    assert_eq!(
        hsi.running(CpuId(0)),
        Some(t),
        "and t falls back to a at once"
    );
    hsi.block(ms(12), t).unwrap();
    assert_eq!(hsi.running(CpuId(0)), None);
    for &p in hsi.instance_parents(j) {
        assert_eq!(
            hsi.vp_info(p).state,
            VpState::Waiting,
            "a blocked child leaves no request behind"
        );
    }
    assert_eq!(hsi.thread_received(t), d(4) + d(4) + d(3));
}

#[test]
fn join_under_fp_on_two_processors_with_revocations() {
    // root fp on two processors with a periodic thread at priority 10 and
    // two children at priority 1: a limit (5ms/20ms) and ts. The join takes
    // ts first and the limit second, so the limit is preferred.
    let mut hsi = checked(2);
    hsi.set_tracing(false);
    let root = hsi
        .create_instance(ms(0), "root", build("fp", Params::new()), top(&[0, 1]))
        .unwrap();
    let cap = Params::new()
        .with("amount", s("5ms"))
        .with("period", s("20ms"));
    let lim = hsi
        .create_instance(ms(0), "lim", build("limit", cap), under(root, prio(2)))
        .unwrap();
    let ts = hsi
        .create_instance(
            ms(0),
            "ts",
            build("ts", Params::new()),
            under(root, prio(1)),
        )
        .unwrap();
    let parents = vec![
        ParentLink {
            parent: ParentRef::Instance(ts),
            params: prio(8),
        },
        ParentLink {
            parent: ParentRef::Instance(lim),
            params: Params::new(),
        },
    ];
    let j = hsi
        .create_instance(ms(0), "j", build("join", Params::new()), parents)
        .unwrap();
    let ts_under_join = hsi
        .create_instance(
            ms(0),
            "inner",
            build("ts", Params::new()),
            under(j, Params::new()),
        )
        .unwrap();
    assert_eq!(
        hsi.instance_parents(ts_under_join).len(),
        1,
        "join offers one processor"
    );
    let p = hsi.create_thread(ms(0), "p", root, prio(10)).unwrap();
    let a = hsi
        .create_thread(ms(0), "a", ts_under_join, Params::new())
        .unwrap();
    let b = hsi
        .create_thread(ms(0), "b", ts_under_join, Params::new())
        .unwrap();
    let o1 = hsi.create_thread(ms(0), "o1", ts, prio(8)).unwrap();
    let o2 = hsi.create_thread(ms(0), "o2", ts, prio(8)).unwrap();
    let mut drv = Driver::new(hsi);
    drv.add(
        p,
        Behaviour::Periodic {
            period: d(10),
            exec: d(4),
            offset: d(0),
        },
    )
    .unwrap();
    for t in [a, b, o1, o2] {
        drv.add(t, Behaviour::CpuBound).unwrap();
    }
    let mut before = Duration::ZERO;
    for k in 1..=50 {
        drv.run_until(ms(20 * k)).unwrap();
        let got = drv.hsi.thread_received(a) + drv.hsi.thread_received(b);
        assert!(
            got - before >= d(5),
            "period {k}: the join gets at least the limit's 5 ms"
        );
        assert!(
            got - before <= d(20),
            "period {k}: and never more than one processor"
        );
        before = got;
    }
    let all: u64 = [p, a, b, o1, o2]
        .iter()
        .map(|&t| drv.hsi.thread_received(t).as_nanos())
        .sum();
    assert_eq!(
        Duration::from_nanos(all),
        d(2000),
        "both processors always busy"
    );
    assert_eq!(drv.hsi.thread_received(p), d(400));
}

#[test]
fn bad_uses_are_refused() {
    assert!(hsched_policies::build("join", &Params::new().with("x", ParamValue::Int(1))).is_err());
    let info = hsched_policies::lookup("join").unwrap();
    assert_eq!((info.min_parents, info.max_parents), (2, 16));
    let (mut hsi, _, _, j) = two_roots();
    hsi.create_thread(ms(0), "t", j, Params::new()).unwrap();
    let e = hsi.create_thread(ms(0), "u", j, Params::new()).unwrap_err();
    assert!(e.to_string().contains("single child"), "{e}");
    assert!(hsi.create_thread(ms(0), "v", j, prio(1)).is_err());
}

/// §6.2.2 on two processors: `res` (limit 5ms/33ms) on cpu0 under fp with
/// a periodic thread above it, and an overrun partition `ovr` (fp) on cpu1
/// with a background thread below it. The join takes `ovr` first and `res`
/// last. Returns the trace and what the join's thread received.
fn overrun_scene(
    mode: &str,
) -> (
    Vec<TraceEvent>,
    InstanceId,
    InstanceId,
    InstanceId,
    Duration,
) {
    let mut hsi = checked(2);
    let r0 = hsi
        .create_instance(ms(0), "r0", build("fp", Params::new()), top(&[0]))
        .unwrap();
    let r1 = hsi
        .create_instance(ms(0), "r1", build("fp", Params::new()), top(&[1]))
        .unwrap();
    let cap = Params::new()
        .with("amount", s("5ms"))
        .with("period", s("33ms"));
    let res = hsi
        .create_instance(ms(0), "res", build("limit", cap), under(r0, prio(10)))
        .unwrap();
    let ovr = hsi
        .create_instance(ms(0), "ovr", build("fp", Params::new()), under(r1, prio(5)))
        .unwrap();
    let parents = vec![
        ParentLink {
            parent: ParentRef::Instance(ovr),
            params: Params::new(),
        },
        ParentLink {
            parent: ParentRef::Instance(res),
            params: Params::new(),
        },
    ];
    let j = hsi
        .create_instance(
            ms(0),
            "j",
            build("join", Params::new().with("mode", s(mode))),
            parents,
        )
        .unwrap();
    let t = hsi.create_thread(ms(0), "t", j, Params::new()).unwrap();
    let hi = hsi.create_thread(ms(0), "hi", r0, prio(20)).unwrap();
    let bg = hsi.create_thread(ms(0), "bg", r1, prio(1)).unwrap();
    let mut drv = Driver::new(hsi);
    drv.add(t, Behaviour::CpuBound).unwrap();
    drv.add(bg, Behaviour::CpuBound).unwrap();
    drv.add(
        hi,
        Behaviour::Periodic {
            period: d(10),
            exec: d(2),
            offset: d(1),
        },
    )
    .unwrap();
    drv.run_until(ms(33 * 30)).unwrap();
    let got = drv.hsi.thread_received(t);
    (drain(&mut drv.hsi), j, res, ovr, got)
}

/// For each grant by `ovr` to the join, the reason `res` last revoked it
/// with (None: `res` granted again since, or never revoked).
fn overrun_causes(
    trace: &[TraceEvent],
    j: InstanceId,
    res: InstanceId,
    ovr: InstanceId,
) -> Vec<Option<RevokeReason>> {
    let (j, res, ovr) = (Node::Instance(j), Node::Instance(res), Node::Instance(ovr));
    let mut last = None;
    let mut out = Vec::new();
    for e in trace {
        match e.kind {
            TraceKind::Revoke {
                parent,
                child,
                reason,
                ..
            } if parent == res && child == j => last = Some(reason),
            TraceKind::Grant { parent, child, .. } if parent == res && child == j => last = None,
            TraceKind::Grant { parent, child, .. } if parent == ovr && child == j => out.push(last),
            _ => {}
        }
    }
    out
}

#[test]
fn overrun_mode_turns_to_the_overrun_partition_only_after_exhaustion() {
    let (trace, j, res, ovr, got) = overrun_scene("overrun");
    let causes = overrun_causes(&trace, j, res, ovr);
    assert!(
        causes.len() >= 25,
        "the overrun partition is used in nearly every period ({})",
        causes.len()
    );
    assert!(
        causes
            .iter()
            .all(|c| *c == Some(RevokeReason::BudgetExhausted)),
        "only after the reservation's budget ran out: {causes:?}"
    );
    // The plain OR gate also turns to ovr when res is merely preempted.
    let (trace, j, res, ovr, got_or) = overrun_scene("or");
    let causes = overrun_causes(&trace, j, res, ovr);
    assert!(
        causes
            .iter()
            .any(|c| *c != Some(RevokeReason::BudgetExhausted)),
        "{causes:?}"
    );
    assert!(
        got_or > got,
        "or mode takes more from the overrun partition: {got_or:?} vs {got:?}"
    );
    assert!(hsched_policies::build("join", &Params::new().with("mode", s("and"))).is_err());
}
