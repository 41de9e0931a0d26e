//! The resource manager's decisions, one part of Regehr 2001, ch. 8 at a
//! time.

use hsched_guarantee::{Hierarchy, ParentSpec, SchedulerSpec, ThreadSpec};
use hsched_rm::rules::{Action, Cap, FairShare, Keep, MostImportant, Request, View};
use hsched_rm::{
    Manager, NewRequest, Notice, Outcome, Principal, Rule, RuleEntry, ADMISSION, NO_CANDIDATE,
    SYSTEM,
};

/// fp ─┬─ rez (cap 85 %)  priority 3
///     ├─ rez_alice       priority 2   (delegated to alice in some tests)
///     └─ ts              priority 1
fn hierarchy() -> Hierarchy {
    let mut h = Hierarchy::new(1);
    h.add_scheduler(SchedulerSpec::new("fp", "fp").under(ParentSpec::top()));
    h.add_scheduler(
        SchedulerSpec::new("rez", "rez").under(ParentSpec::scheduler("fp").priority(3)),
    );
    h.add_scheduler(SchedulerSpec::new("ts", "ts").under(ParentSpec::scheduler("fp").priority(1)));
    h.add_thread(ThreadSpec::new("shell", ParentSpec::scheduler("ts")));
    h
}

fn manager() -> Manager {
    let mut m = Manager::new(hierarchy());
    m.add_principal(Principal::group("interactive", None))
        .unwrap();
    m.add_principal(Principal::user("alice", Some(1001)).in_group("interactive"))
        .unwrap();
    m.add_principal(Principal::user("bob", Some(1002))).unwrap();
    m
}

fn ask(who: &str, thread: &str, g: &str) -> NewRequest {
    NewRequest::new(who, thread, g.parse().unwrap())
}

fn granted_at(o: &Outcome) -> Option<&str> {
    match o {
        Outcome::Granted(g) => Some(&g.scheduler),
        _ => None,
    }
}

#[test]
fn without_rules_only_admission_decides() {
    // §8.1: no built-in policy; the reservation scheduler's admission test.
    let mut m = manager();
    let (_, o, _) = m.request(ask("alice", "a", "RESBS 5 10")).unwrap();
    assert_eq!(granted_at(&o), Some("rez"));
    let (_, o, _) = m.request(ask("bob", "b", "RESBS 4 10")).unwrap();
    match o {
        Outcome::Pending { rule, reason, .. } => {
            assert_eq!(rule, ADMISSION);
            assert!(reason.contains("admission refused"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    // The thread's received guarantee converts into the request.
    assert_eq!(m.granted()[0].received.to_string(), "RESBH 5 10");
    assert_eq!(
        m.granted()[0]
            .params()
            .duration("amount")
            .unwrap()
            .unwrap()
            .as_nanos(),
        5_000_000
    );
}

#[test]
fn malformed_requests_are_errors_and_leave_nothing() {
    let mut m = manager();
    let e = m.request(ask("carol", "c", "RESBS 1 10")).unwrap_err();
    assert_eq!(e.code, "unknown-principal");
    let mut big = ask("alice", "a", "RESBS 1 10");
    big.guarantee = hsched_guarantee::Guarantee::Ps { share: 1.1 };
    assert_eq!(m.request(big).unwrap_err().code, "bad-guarantee");
    m.request(ask("alice", "a", "RESBS 1 10")).unwrap();
    assert_eq!(
        m.request(ask("alice", "a", "RESBS 1 10")).unwrap_err().code,
        "busy"
    );
    m.set_max_requests(1);
    assert_eq!(
        m.request(ask("alice", "a2", "RESBS 1 10"))
            .unwrap_err()
            .code,
        "limit"
    );
    assert_eq!(m.granted().len(), 1);
    assert!(m.pending().is_empty());
}

#[test]
fn no_candidate_is_a_refusal_naming_why() {
    // §8.3: nothing advertises PSBE here (rez gives RESBH, ts NULL, fp
    // only to one child).
    let mut m = manager();
    let (_, o, _) = m.request(ask("alice", "a", "PSBE 0.2 10")).unwrap();
    match o {
        Outcome::Refused { rule, reason } => {
            assert_eq!(rule, NO_CANDIDATE);
            assert!(reason.contains("`ts`"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    // A named scheduler that does not exist.
    let (_, o, _) = m
        .request(ask("alice", "a", "RESBS 1 10").at("nope"))
        .unwrap();
    assert!(
        matches!(o, Outcome::Refused { ref reason, .. } if reason.contains("no scheduler `nope`"))
    );
}

#[test]
fn delegated_guarantees_belong_to_their_principal_and_its_schedulers_first() {
    let mut h = hierarchy();
    h.add_scheduler(
        SchedulerSpec::new("rez_alice", "rez").under(ParentSpec::scheduler("fp").priority(2)),
    );
    let mut m = Manager::new(h);
    m.add_principal(Principal::user("alice", Some(1001)))
        .unwrap();
    m.add_principal(Principal::user("bob", Some(1002))).unwrap();
    assert_eq!(m.owner_of("rez_alice"), SYSTEM);
    // Only the owner (or the system) delegates.
    assert_eq!(
        m.delegate("bob", "rez_alice", "bob").unwrap_err().code,
        "unauthorized"
    );
    m.delegate(SYSTEM, "rez_alice", "alice").unwrap();
    assert_eq!(m.owner_of("rez_alice"), "alice");
    // Under fp priority 2 rez_alice receives NULL (rez at 3 takes ALL):
    // it advertises nothing, so alice's request goes to the system's rez.
    let (_, o, _) = m.request(ask("alice", "a", "RESBS 1 10")).unwrap();
    assert_eq!(granted_at(&o), Some("rez"));
    // Bob may not use alice's scheduler even by name.
    let (_, o, _) = m
        .request(ask("bob", "b", "RESBS 1 10").at("rez_alice"))
        .unwrap();
    assert!(
        matches!(o, Outcome::Refused { ref reason, .. } if reason.contains("belongs to `alice`")),
        "{o:?}"
    );
}

#[test]
fn a_principals_own_scheduler_comes_before_the_systems() {
    // The system's rez under fp at the top priority, alice's rez as the
    // root of the other processor: each receives ALL.
    let mut h = Hierarchy::new(2);
    h.add_scheduler(SchedulerSpec::new("rez", "rez").under(ParentSpec::top_cpu(0)));
    h.add_scheduler(SchedulerSpec::new("rez_alice", "rez").under(ParentSpec::top_cpu(1)));
    let mut m = Manager::new(h);
    m.add_principal(Principal::user("alice", None)).unwrap();
    m.add_principal(Principal::user("bob", None)).unwrap();
    m.delegate(SYSTEM, "rez_alice", "alice").unwrap();
    // Alice subdivides freely: she may delegate it on.
    m.delegate("alice", "rez_alice", "bob").unwrap();
    m.delegate(SYSTEM, "rez_alice", "alice").unwrap();
    let (_, o, _) = m.request(ask("alice", "a", "RESBS 5 10")).unwrap();
    assert_eq!(granted_at(&o), Some("rez_alice"));
    let (_, o, _) = m.request(ask("bob", "b", "RESBS 5 10")).unwrap();
    assert_eq!(granted_at(&o), Some("rez"));
    // Alice's next request still fits in hers; the one after goes to
    // the system's.
    let (_, o, _) = m.request(ask("alice", "a2", "RESBS 3 10")).unwrap();
    assert_eq!(granted_at(&o), Some("rez_alice"), "{o:?}");
    let (_, o, _) = m.request(ask("alice", "a3", "RESBS 3 10")).unwrap();
    assert_eq!(granted_at(&o), Some("rez"), "{o:?}");
}

#[test]
fn pending_requests_are_granted_when_capacity_frees_most_important_first() {
    let mut m = manager();
    m.add_rule(RuleEntry::system(Cap {
        principal: None,
        max: 0.5,
    }));
    let (a, _, _) = m.request(ask("alice", "a1", "RESBS 4 10")).unwrap();
    let (p1, o, _) = m
        .request(ask("alice", "a2", "RESBS 3 10").value(1.0))
        .unwrap();
    assert!(matches!(o, Outcome::Pending { ref rule, .. } if rule == "cap 50% per user"));
    let (p2, _, _) = m
        .request(ask("alice", "a3", "RESBS 3 10").value(5.0))
        .unwrap();
    // The owner cancels; a3 (value 5) is granted, a2 still waits.
    assert_eq!(m.release("bob", a).unwrap_err().code, "unauthorized");
    let (_, notices) = m.release("alice", a).unwrap();
    assert_eq!(notices.len(), 1);
    assert!(matches!(&notices[0], Notice::Granted(g) if g.request.id == p2));
    assert_eq!(m.pending().len(), 1);
    assert_eq!(m.pending()[0].id, p1);
    // The thread exits: its request ends and a2 gets its turn.
    let n = m.thread_exited("a3");
    assert!(matches!(&n[..], [Notice::Granted(g)] if g.request.id == p1));
}

#[test]
fn caps_count_every_scheduler_and_groups_count_their_members() {
    let mut h = hierarchy();
    h.add_scheduler(SchedulerSpec::new("rez2", "rez").under(ParentSpec::top_cpu(1)));
    h.cpus = 2;
    h.schedulers[0].parents = vec![ParentSpec::top_cpu(0)];
    let mut m = Manager::new(h);
    m.add_principal(Principal::group("interactive", None))
        .unwrap();
    m.add_principal(Principal::user("alice", None).in_group("interactive"))
        .unwrap();
    m.add_principal(Principal::user("bob", None).in_group("interactive"))
        .unwrap();
    m.add_rule(RuleEntry::system(Cap {
        principal: Some("interactive".into()),
        max: 0.5,
    }));
    // 50 % of two processors is one processor's worth.
    m.request(ask("alice", "a", "RESBS 8 10").at("rez"))
        .unwrap();
    let (_, o, _) = m.request(ask("bob", "b", "RESBS 3 10")).unwrap();
    assert!(
        matches!(o, Outcome::Pending { ref rule, .. } if rule.contains("interactive")),
        "{o:?}"
    );
    let (_, o, _) = m.request(ask("bob", "b2", "RESBS 2 10")).unwrap();
    assert!(matches!(o, Outcome::Granted(_)), "{o:?}");
}

#[test]
fn interactive_users_keep_their_share() {
    let mut m = manager();
    m.add_rule(RuleEntry::system(Keep {
        principal: "interactive".into(),
        share: 0.1,
    }));
    let (_, o, _) = m.request(ask("bob", "b", "RESBS 7 10")).unwrap();
    assert!(matches!(o, Outcome::Granted(_)));
    let (_, o, _) = m.request(ask("bob", "b2", "RESBS 1 10")).unwrap();
    assert!(matches!(o, Outcome::Granted(_)), "{o:?}");
    let (_, o, _) = m.request(ask("bob", "b3", "RESBS 1.5 10")).unwrap();
    assert!(
        matches!(o, Outcome::Pending { ref rule, .. } if rule.contains("keep 10%")),
        "{o:?}"
    );
    // Alice (interactive) may take the kept share, up to rez's cap.
    let (_, o, _) = m.request(ask("alice", "a", "RESBS 0.5 10")).unwrap();
    assert!(matches!(o, Outcome::Granted(_)), "{o:?}");
}

#[test]
fn the_most_important_rule_revokes_only_when_the_request_then_fits() {
    let mut m = manager();
    m.add_rule(RuleEntry::of(
        "alice",
        MostImportant {
            principal: "alice".into(),
            limit: 0.5,
        },
    ));
    let (low, _, _) = m
        .request(ask("alice", "low", "RESBS 3 10").value(1.0))
        .unwrap();
    m.request(ask("alice", "mid", "RESBS 2 10").value(4.0))
        .unwrap();
    // Value 3 needs 3: revoking `low` (value 1) makes room.
    let (_, o, n) = m
        .request(ask("alice", "new", "RESBS 3 10").value(3.0))
        .unwrap();
    assert!(matches!(o, Outcome::Granted(_)), "{o:?}");
    assert!(matches!(&n[..], [Notice::Revoked { request, .. }] if request.id == low));
    // Value 2 cannot displace value 3 or 4: it waits, and nothing goes.
    let (_, o, n) = m
        .request(ask("alice", "x", "RESBS 1 10").value(2.0))
        .unwrap();
    assert!(matches!(o, Outcome::Pending { .. }), "{o:?}");
    assert!(n.is_empty());
    assert_eq!(m.granted().len(), 2);
    // Bob is not subject to alice's rule.
    let (_, o, _) = m.request(ask("bob", "b", "RESBS 3 10")).unwrap();
    assert!(matches!(o, Outcome::Granted(_)), "{o:?}");
}

/// A rule that refuses everything, to show which events run it.
#[derive(Debug)]
struct Never;

impl Rule for Never {
    fn name(&self) -> String {
        "never".into()
    }
    fn admit(&self, _: &View<'_>, _: &Request) -> hsched_rm::rules::Verdict {
        hsched_rm::rules::Verdict::Refuse("no".into())
    }
}

/// A rule that asks for a custom event whenever a request ends.
#[derive(Debug)]
struct Recalculate;

impl Rule for Recalculate {
    fn name(&self) -> String {
        "recalculate".into()
    }
    fn react(&self, _: &View<'_>, _: Option<&Request>) -> Vec<Action> {
        vec![Action::Signal("RECALCULATE_SHARES".into())]
    }
}

#[test]
fn custom_events_run_the_rules_attached_to_them() {
    let mut m = manager();
    // A rule on a custom event no one raises never runs.
    m.add_rule(RuleEntry::system(Never).on("REALTIME_REQUEST"));
    let (a, o, _) = m.request(ask("alice", "a", "RESBS 3 10")).unwrap();
    assert!(matches!(o, Outcome::Granted(_)));
    // A rule raising it on NEW_REQUEST makes it run (§8.4.3 ordering).
    m.add_rule(
        RuleEntry::system(Cap {
            principal: None,
            max: 1.0,
        })
        .then("REALTIME_REQUEST"),
    );
    let (_, o, _) = m.request(ask("bob", "b", "RESBS 1 10")).unwrap();
    assert!(
        matches!(o, Outcome::Refused { ref rule, .. } if rule == "never"),
        "{o:?}"
    );

    // REQUEST_ENDING → RECALCULATE_SHARES → fair share revokes.
    let mut m = manager();
    m.add_rule(RuleEntry::system(Recalculate).on(hsched_rm::rules::REQUEST_ENDING));
    m.add_rule(RuleEntry::system(FairShare).on("RECALCULATE_SHARES"));
    m.request(ask("alice", "a1", "RESBS 3 10")).unwrap();
    m.request(ask("alice", "a2", "RESBS 3 10")).unwrap();
    let (b, _, _) = m.request(ask("bob", "b1", "RESBS 1 10")).unwrap();
    let (_, o, _) = m.request(ask("bob", "b2", "RESBS 2 10")).unwrap();
    assert!(matches!(o, Outcome::Pending { .. }), "{o:?}");
    // b1 ends: bob still has b2 pending, so two users share; alice (60 %)
    // loses her newest, and b2 is granted with the room.
    let (_, n) = m.release("bob", b).unwrap();
    assert!(
        n.iter()
            .any(|x| matches!(x, Notice::Revoked { request, .. } if request.thread == "a2")),
        "{n:?}"
    );
    assert!(
        n.iter()
            .any(|x| matches!(x, Notice::Granted(g) if g.request.thread == "b2")),
        "{n:?}"
    );
    // A signal from outside runs the same rules.
    assert!(m.signal("RECALCULATE_SHARES").is_empty());
    let _ = a;
}

#[test]
fn the_same_calls_give_the_same_decisions() {
    let run = || {
        let mut m = manager();
        m.add_rule(RuleEntry::system(Cap {
            principal: None,
            max: 0.4,
        }));
        for (k, who) in ["alice", "bob", "alice", "bob", "alice", "bob"]
            .iter()
            .enumerate()
        {
            let _ = m.request(ask(who, &format!("t{k}"), "RESBS 2 10"));
        }
        m.thread_exited("t0");
        m.thread_exited("t3");
        m.log().iter().map(ToString::to_string).collect::<Vec<_>>()
    };
    let a = run();
    assert_eq!(a, run());
    assert!(a.iter().any(|l| l.contains("pending")));
}
