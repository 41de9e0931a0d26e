//! Time sharing (`ts`): round robin among equals, priorities, the
//! starvation boost, fp mode, TS under FP with revocations, and parameter
//! checks. The protocol checker (with TS's own invariant: no ready child
//! above a running one) runs after every input.

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

fn ts(params: Params) -> Box<dyn Policy> {
    hsched_policies::build("ts", &params).unwrap()
}

fn checked(cpus: usize) -> Hsi {
    let mut hsi = Hsi::new(cpus);
    hsi.set_checking(true);
    hsi
}

/// CPU-bound threads under a root TS; returns what each received by `end`.
fn share(cpus: usize, params: Params, prios: &[i64], end: u64) -> (Vec<Duration>, Vec<TraceEvent>) {
    let mut hsi = checked(cpus);
    hsi.set_tracing(true);
    let all: Vec<u32> = (0..cpus as u32).collect();
    let root = hsi
        .create_instance(ms(0), "ts", ts(params), top(&all))
        .unwrap();
    let threads: Vec<ThreadId> = prios
        .iter()
        .enumerate()
        .map(|(i, &p)| {
            hsi.create_thread(ms(0), &format!("t{i}"), root, prio(p))
                .unwrap()
        })
        .collect();
    let mut drv = Driver::new(hsi);
    for &t in &threads {
        drv.add(t, Behaviour::CpuBound).unwrap();
    }
    drv.run_until(ms(end)).unwrap();
    let mut trace = Vec::new();
    drv.hsi.drain_trace(&mut trace);
    (
        threads
            .iter()
            .map(|&t| drv.hsi.thread_received(t))
            .collect(),
        trace,
    )
}

fn boosts(trace: &[TraceEvent]) -> Vec<Instant> {
    trace
        .iter()
        .filter(|e| matches!(&e.kind, TraceKind::Policy { event: PolicyEvent::Note(n), .. } if n.contains("starvation boost")))
        .map(|e| e.at)
        .collect()
}

#[test]
fn equal_priorities_share_one_processor_round_robin() {
    let (got, trace) = share(1, Params::new(), &[8, 8, 8], 10_000);
    for g in &got {
        let frac = g.as_secs_f64() / 10.0;
        assert!(
            (frac - 1.0 / 3.0).abs() < 0.01,
            "each gets a third within 1%: {got:?}"
        );
    }
    // They alternate every 30 ms quantum, not in long stretches.
    let grants = trace
        .iter()
        .filter(|e| {
            matches!(
                e.kind,
                TraceKind::Grant {
                    child: Node::Thread(_),
                    ..
                }
            )
        })
        .count();
    assert!(
        (330..=340).contains(&grants),
        "one dispatch per 30 ms quantum, got {grants}"
    );
}

#[test]
fn equal_priorities_share_two_processors_round_robin() {
    let (got, _) = share(2, Params::new(), &[8, 8, 8], 10_000);
    for g in &got {
        let frac = g.as_secs_f64() / 20.0;
        assert!(
            (frac - 1.0 / 3.0).abs() < 0.01,
            "each gets a third of two processors within 1%: {got:?}"
        );
    }
    let total: u64 = got.iter().map(|g| g.as_nanos()).sum();
    assert_eq!(
        Duration::from_nanos(total),
        d(20_000),
        "both processors are always busy"
    );
}

#[test]
fn a_shorter_quantum_is_honoured() {
    let (got, trace) = share(1, Params::new().with("quantum", s("10ms")), &[8, 8], 1_000);
    assert_eq!(got, vec![d(500), d(500)]);
    let grants = trace
        .iter()
        .filter(|e| {
            matches!(
                e.kind,
                TraceKind::Grant {
                    child: Node::Thread(_),
                    ..
                }
            )
        })
        .count();
    assert_eq!(grants, 101, "a dispatch at 0, 10, ..., 1000 ms");
}

#[test]
fn higher_priority_starves_lower_except_for_the_boost() {
    // High (10) and low (4), both CPU-bound. Low runs only when boosted:
    // after 3 s ready without running, for one 30 ms quantum at 15.
    let (got, trace) = share(1, Params::new(), &[10, 4], 10_000);
    assert_eq!(boosts(&trace), vec![ms(3000), ms(6030), ms(9060)]);
    assert_eq!(got[1], d(90), "three boosted quanta");
    assert_eq!(got[0], d(10_000 - 90));
    // Without the boost, low gets nothing at all.
    let (got, trace) = share(
        1,
        Params::new().with("starvation", s("0s")),
        &[10, 4],
        10_000,
    );
    assert!(boosts(&trace).is_empty());
    assert_eq!(got, vec![d(10_000), d(0)]);
    // A custom threshold.
    let (got, _) = share(
        1,
        Params::new().with("starvation", s("1s")),
        &[10, 4],
        10_000,
    );
    assert_eq!(got[1], d(9 * 30), "boosts at 1 s, 2.03 s, ... 9.27 s");
}

#[test]
fn a_boosted_thread_preempts_at_once_and_drops_back() {
    let mut hsi = checked(1);
    hsi.set_tracing(true);
    let root = hsi
        .create_instance(
            ms(0),
            "ts",
            ts(Params::new().with("starvation", s("100ms"))),
            top(&[0]),
        )
        .unwrap();
    let high = hsi.create_thread(ms(0), "high", root, prio(12)).unwrap();
    let low = hsi.create_thread(ms(0), "low", root, prio(2)).unwrap();
    let mut drv = Driver::new(hsi);
    drv.add(high, Behaviour::CpuBound).unwrap();
    drv.add(low, Behaviour::CpuBound).unwrap();
    drv.run_until(ms(100)).unwrap();
    assert_eq!(
        drv.hsi.running(CpuId(0)),
        Some(low),
        "boosted at 100 ms, runs at once"
    );
    drv.run_until(ms(129)).unwrap();
    assert_eq!(drv.hsi.running(CpuId(0)), Some(low));
    drv.run_until(ms(130)).unwrap();
    assert_eq!(
        drv.hsi.running(CpuId(0)),
        Some(high),
        "one quantum, then back to priority 2"
    );
    assert_eq!(drv.hsi.thread_received(low), d(30));
}

#[test]
fn fp_mode_does_not_time_slice() {
    let (got, _) = share(1, Params::new().with("mode", s("fp")), &[8, 8], 10_000);
    assert_eq!(
        got,
        vec![d(10_000), d(0)],
        "the first keeps the processor; no quanta, no boost"
    );
    // A higher priority still preempts at once in fp mode.
    let mut hsi = checked(1);
    let root = hsi
        .create_instance(
            ms(0),
            "ts",
            ts(Params::new().with("mode", s("fp"))),
            top(&[0]),
        )
        .unwrap();
    let a = hsi.create_thread(ms(0), "a", root, prio(8)).unwrap();
    let b = hsi.create_thread(ms(0), "b", root, prio(9)).unwrap();
    hsi.wake(ms(0), a).unwrap();
    hsi.wake(ms(1), b).unwrap();
    assert_eq!(hsi.running(CpuId(0)), Some(b));
    assert_eq!(hsi.next_timer(), None, "fp mode arms no timer");
}

#[test]
fn ts_under_fp_is_revoked_and_keeps_its_invariant() {
    // root fp on two processors: a periodic thread at priority 10 and TS at
    // priority 1 with one high thread and two equal ones. TS always holds a
    // processor, so its high thread always runs; when the root revokes the
    // processor under it, TS moves it to the other processor at once.
    let mut hsi = checked(2);
    let root = hsi
        .create_instance(
            ms(0),
            "root",
            hsched_policies::build("fp", &Params::new()).unwrap(),
            top(&[0, 1]),
        )
        .unwrap();
    let tsi = hsi
        .create_instance(ms(0), "ts", ts(Params::new()), under(root, prio(1)))
        .unwrap();
    assert_eq!(hsi.instance_parents(tsi).len(), 2);
    let p = hsi.create_thread(ms(0), "p", root, prio(10)).unwrap();
    let hi = hsi.create_thread(ms(0), "hi", tsi, prio(12)).unwrap();
    let m1 = hsi.create_thread(ms(0), "m1", tsi, prio(8)).unwrap();
    let m2 = hsi.create_thread(ms(0), "m2", tsi, prio(8)).unwrap();
    let mut drv = Driver::new(hsi);
    for t in [hi, m1, m2] {
        drv.add(t, Behaviour::CpuBound).unwrap();
    }
    drv.add(
        p,
        Behaviour::Periodic {
            period: d(10),
            exec: d(3),
            offset: d(1),
        },
    )
    .unwrap();
    drv.run_until(ms(10_000)).unwrap();
    let got = |t| drv.hsi.thread_received(t);
    assert_eq!(got(p), d(3000));
    assert_eq!(got(hi), d(10_000));
    assert_eq!(got(m1) + got(m2), d(7000));
    let diff = got(m1).as_secs_f64() - got(m2).as_secs_f64();
    assert!(
        diff.abs() < 0.07,
        "m1 and m2 share within 1% of the run: {:?} {:?}",
        got(m1),
        got(m2)
    );
}

#[test]
fn set_params_changes_priority_and_ends_a_boost() {
    let mut hsi = checked(1);
    let root = hsi
        .create_instance(ms(0), "ts", ts(Params::new()), top(&[0]))
        .unwrap();
    let a = hsi.create_thread(ms(0), "a", root, prio(8)).unwrap();
    let b = hsi.create_thread(ms(0), "b", root, Params::new()).unwrap();
    hsi.wake(ms(0), a).unwrap();
    hsi.wake(ms(0), b).unwrap();
    assert_eq!(hsi.running(CpuId(0)), Some(a));
    hsi.thread_msg(ms(1), b, &Msg::SetParams(prio(9))).unwrap();
    assert_eq!(hsi.running(CpuId(0)), Some(b));
    assert!(hsi.thread_msg(ms(2), b, &Msg::SetParams(prio(32))).is_err());
    assert!(hsi.thread_msg(ms(2), b, &Msg::SetParams(prio(0))).is_err());
    assert_eq!(hsi.running(CpuId(0)), Some(b));
}

#[test]
fn bad_parameters_are_refused() {
    let bad = |p: Params| hsched_policies::build("ts", &p).is_err();
    assert!(bad(Params::new().with("mode", s("lottery"))));
    assert!(bad(Params::new().with("quantum", s("0ms"))));
    assert!(bad(Params::new().with("quantum", s("-5ms"))));
    assert!(bad(Params::new().with("quantum", ParamValue::Int(30))));
    assert!(bad(Params::new()
        .with("mode", s("fp"))
        .with("quantum", s("10ms"))));
    assert!(bad(Params::new()
        .with("mode", s("fp"))
        .with("starvation", s("1s"))));
    assert!(bad(Params::new().with("slice", s("1s"))));
    let mut hsi = checked(1);
    let root = hsi
        .create_instance(ms(0), "ts", ts(Params::new()), top(&[0]))
        .unwrap();
    for p in [0, 32, -1] {
        assert!(
            hsi.create_thread(ms(0), "x", root, prio(p)).is_err(),
            "priority {p} is refused"
        );
    }
    hsi.create_thread(ms(0), "ok1", root, prio(1)).unwrap();
    hsi.create_thread(ms(0), "ok31", root, prio(31)).unwrap();
}

#[test]
fn runs_are_deterministic() {
    let run = || {
        share(
            2,
            Params::new().with("starvation", s("200ms")),
            &[9, 8, 8, 4, 2],
            2_000,
        )
        .1
    };
    let first = run();
    assert!(boosts(&first).len() >= 2);
    assert_eq!(first, run());
}
