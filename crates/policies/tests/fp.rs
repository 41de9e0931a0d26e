//! Fixed priority (`fp`): preemption, FIFO among equals, multiprocessor
//! dispatch, run-time priority changes, parameter checks, and FP under FP
//! with revocations. The protocol checker runs after every input.

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

fn fp() -> Box<dyn Policy> {
    hsched_policies::build("fp", &Params::new()).unwrap()
}

fn checked(cpus: usize) -> Hsi {
    let mut hsi = Hsi::new(cpus);
    hsi.set_checking(true);
    hsi.set_tracing(true);
    hsi
}

fn running(hsi: &Hsi) -> Vec<Option<ThreadId>> {
    (0..hsi.cpu_count())
        .map(|c| hsi.running(CpuId(c as u32)))
        .collect()
}

#[test]
fn a_waking_higher_priority_child_preempts_at_once() {
    let mut hsi = checked(1);
    let root = hsi.create_instance(ms(0), "root", fp(), top(&[0])).unwrap();
    let low = hsi.create_thread(ms(0), "low", root, prio(1)).unwrap();
    let high = hsi.create_thread(ms(0), "high", root, prio(5)).unwrap();
    hsi.wake(ms(0), low).unwrap();
    assert_eq!(hsi.running(CpuId(0)), Some(low));
    let mut trace = Vec::new();
    hsi.drain_trace(&mut trace);
    hsi.wake(ms(10), high).unwrap();
    assert_eq!(
        hsi.running(CpuId(0)),
        Some(high),
        "high runs in the same input that woke it"
    );
    trace.clear();
    hsi.drain_trace(&mut trace);
    let low_vp = hsi.thread_vp(low);
    assert!(
        trace.iter().any(|e| matches!(e.kind, TraceKind::Revoke { vp, reason: RevokeReason::Preempted, .. } if vp == low_vp)),
        "low is revoked as preempted: {trace:?}"
    );
    hsi.block(ms(25), high).unwrap();
    assert_eq!(hsi.running(CpuId(0)), Some(low));
    hsi.block(ms(30), low).unwrap();
    assert_eq!(hsi.thread_received(low), d(15));
    assert_eq!(hsi.thread_received(high), d(15));
}

#[test]
fn equal_priorities_run_first_come_first_served() {
    let mut hsi = checked(1);
    let root = hsi.create_instance(ms(0), "root", fp(), top(&[0])).unwrap();
    let a = hsi.create_thread(ms(0), "a", root, prio(3)).unwrap();
    let b = hsi.create_thread(ms(0), "b", root, prio(3)).unwrap();
    let c = hsi.create_thread(ms(0), "c", root, prio(3)).unwrap();
    let high = hsi.create_thread(ms(0), "high", root, prio(9)).unwrap();
    // Woken in the order c, a, b: that is the order they run.
    hsi.wake(ms(1), c).unwrap();
    hsi.wake(ms(2), a).unwrap();
    hsi.wake(ms(3), b).unwrap();
    assert_eq!(hsi.running(CpuId(0)), Some(c));
    // A preempted child keeps its place ahead of those that asked later.
    hsi.wake(ms(4), high).unwrap();
    hsi.block(ms(5), high).unwrap();
    assert_eq!(hsi.running(CpuId(0)), Some(c));
    hsi.block(ms(6), c).unwrap();
    assert_eq!(hsi.running(CpuId(0)), Some(a));
    // c wakes again: it goes behind b.
    hsi.wake(ms(7), c).unwrap();
    hsi.block(ms(8), a).unwrap();
    assert_eq!(hsi.running(CpuId(0)), Some(b));
    hsi.block(ms(9), b).unwrap();
    assert_eq!(hsi.running(CpuId(0)), Some(c));
}

#[test]
fn two_processors_run_the_two_highest() {
    let mut hsi = checked(2);
    let root = hsi
        .create_instance(ms(0), "root", fp(), top(&[0, 1]))
        .unwrap();
    let t: Vec<ThreadId> = (1..=4)
        .map(|p| {
            hsi.create_thread(ms(0), &format!("p{p}"), root, prio(p))
                .unwrap()
        })
        .collect();
    for &x in &t {
        hsi.wake(ms(1), x).unwrap();
    }
    let mut r = running(&hsi);
    r.sort();
    assert_eq!(r, vec![Some(t[2]), Some(t[3])], "priorities 3 and 4 run");
    let cpu_of_3 = (0..2)
        .find(|&c| hsi.running(CpuId(c)) == Some(t[2]))
        .unwrap();
    hsi.block(ms(2), t[3]).unwrap();
    let mut r = running(&hsi);
    r.sort();
    assert_eq!(
        r,
        vec![Some(t[1]), Some(t[2])],
        "priority 2 takes the freed processor"
    );
    let five = hsi.create_thread(ms(3), "p5", root, prio(5)).unwrap();
    hsi.wake(ms(3), five).unwrap();
    let mut r = running(&hsi);
    r.sort();
    assert_eq!(
        r,
        vec![Some(t[2]), Some(five)],
        "priority 5 preempts priority 2, the lowest running"
    );
    assert_eq!(
        hsi.running(CpuId(cpu_of_3)),
        Some(t[2]),
        "priority 3 was not moved"
    );
}

#[test]
fn set_params_changes_a_priority_at_run_time() {
    let mut hsi = checked(1);
    let root = hsi.create_instance(ms(0), "root", fp(), top(&[0])).unwrap();
    let a = hsi.create_thread(ms(0), "a", root, prio(5)).unwrap();
    let b = hsi.create_thread(ms(0), "b", root, prio(1)).unwrap();
    hsi.wake(ms(0), a).unwrap();
    hsi.wake(ms(0), b).unwrap();
    assert_eq!(hsi.running(CpuId(0)), Some(a));
    hsi.thread_msg(ms(5), b, &Msg::SetParams(prio(7))).unwrap();
    assert_eq!(
        hsi.running(CpuId(0)),
        Some(b),
        "raising b above a preempts a"
    );
    assert_eq!(
        hsi.vp_info(hsi.thread_vp(b))
            .params
            .i64("priority")
            .unwrap(),
        Some(7)
    );
    hsi.thread_msg(ms(6), b, &Msg::SetParams(prio(0))).unwrap();
    assert_eq!(
        hsi.running(CpuId(0)),
        Some(a),
        "lowering b below a gives a the processor back"
    );
    let bad = hsi.thread_msg(
        ms(7),
        b,
        &Msg::SetParams(Params::new().with("priority", ParamValue::Str("high".into()))),
    );
    assert!(bad.is_err());
    let unknown = hsi.thread_msg(
        ms(7),
        b,
        &Msg::SetParams(Params::new().with("share", ParamValue::Int(2))),
    );
    assert!(unknown.is_err());
    let app = hsi.thread_msg(
        ms(7),
        b,
        &Msg::App {
            kind: "x".into(),
            params: Params::new(),
        },
    );
    assert!(app.is_err());
    assert_eq!(
        hsi.running(CpuId(0)),
        Some(a),
        "refused messages change nothing"
    );
}

#[test]
fn bad_parameters_are_refused() {
    let mut hsi = checked(1);
    let root = hsi.create_instance(ms(0), "root", fp(), top(&[0])).unwrap();
    let e = hsi
        .create_thread(
            ms(0),
            "x",
            root,
            Params::new().with("priority", ParamValue::Float(1.5)),
        )
        .unwrap_err();
    assert!(e.to_string().contains("priority"), "{e}");
    let e = hsi
        .create_thread(
            ms(0),
            "y",
            root,
            Params::new().with("prio", ParamValue::Int(1)),
        )
        .unwrap_err();
    assert!(e.to_string().contains("prio"), "{e}");
    assert!(hsched_policies::build(
        "fp",
        &Params::new().with("quantum", ParamValue::Str("1ms".into()))
    )
    .is_err());
    assert!(hsched_policies::build(
        "fp",
        &Params::new().with("unique_priorities", ParamValue::Int(1))
    )
    .is_err());
    let unique = hsched_policies::build(
        "fp",
        &Params::new().with("unique_priorities", ParamValue::Bool(true)),
    )
    .unwrap();
    let mut hsi = checked(1);
    let root = hsi
        .create_instance(ms(0), "root", unique, top(&[0]))
        .unwrap();
    hsi.create_thread(ms(0), "a", root, prio(2)).unwrap();
    assert!(matches!(
        hsi.create_thread(ms(0), "b", root, prio(2)),
        Err(HsiError::Op(OpError::Refused {
            error: PolicyError::Refused(_),
            ..
        }))
    ));
    hsi.create_thread(ms(0), "c", root, prio(3)).unwrap();
}

#[test]
fn fp_under_fp_is_preempted_and_migrates_correctly() {
    // root fp on two processors: two periodic threads at priority 10 that
    // never overlap, and a child fp at priority 1 with three CPU-bound
    // threads. The child always holds at least one processor, so its
    // highest thread always runs, and its second runs whenever neither
    // periodic thread does.
    let mut hsi = checked(2);
    hsi.set_tracing(false);
    let root = hsi
        .create_instance(ms(0), "root", fp(), top(&[0, 1]))
        .unwrap();
    let sub = hsi
        .create_instance(ms(0), "sub", fp(), under(root, prio(1)))
        .unwrap();
    assert_eq!(hsi.instance_parents(sub).len(), 2);
    let p1 = hsi.create_thread(ms(0), "p1", root, prio(10)).unwrap();
    let p2 = hsi.create_thread(ms(0), "p2", root, prio(10)).unwrap();
    let a = hsi.create_thread(ms(0), "a", sub, prio(3)).unwrap();
    let b = hsi.create_thread(ms(0), "b", sub, prio(2)).unwrap();
    let c = hsi.create_thread(ms(0), "c", sub, prio(1)).unwrap();
    let mut drv = Driver::new(hsi);
    for t in [a, b, c] {
        drv.add(t, Behaviour::CpuBound).unwrap();
    }
    drv.add(
        p1,
        Behaviour::Periodic {
            period: d(10),
            exec: d(3),
            offset: d(0),
        },
    )
    .unwrap();
    drv.add(
        p2,
        Behaviour::Periodic {
            period: d(10),
            exec: d(3),
            offset: d(5),
        },
    )
    .unwrap();
    drv.run_until(ms(1000)).unwrap();
    let got = |t| drv.hsi.thread_received(t);
    assert_eq!(got(p1), d(300));
    assert_eq!(got(p2), d(300));
    assert_eq!(
        got(a),
        d(1000),
        "the highest thread of the child never waits"
    );
    assert_eq!(got(b), d(400));
    assert_eq!(got(c), d(0));
    assert!(
        drv.finishes(p1)
            .iter()
            .all(|&(r, f)| f.saturating_since(r) == d(3)),
        "the periodic threads never wait"
    );
}

#[test]
fn runs_are_deterministic() {
    let run = || {
        let mut hsi = checked(2);
        let root = hsi
            .create_instance(ms(0), "root", fp(), top(&[0, 1]))
            .unwrap();
        let sub = hsi
            .create_instance(ms(0), "sub", fp(), under(root, prio(1)))
            .unwrap();
        let mut drv = Driver::new(hsi);
        for (i, (parent, p)) in [(root, 5), (sub, 2), (sub, 2), (sub, 1)]
            .into_iter()
            .enumerate()
        {
            let t = drv
                .hsi
                .create_thread(ms(0), &format!("t{i}"), parent, prio(p))
                .unwrap();
            let b = Behaviour::Periodic {
                period: d(7 + i as u64),
                exec: d(3),
                offset: d(i as u64),
            };
            drv.add(t, b).unwrap();
        }
        drv.run_until(ms(500)).unwrap();
        let mut trace = Vec::new();
        drv.hsi.drain_trace(&mut trace);
        trace
    };
    let first = run();
    assert!(first.len() > 100);
    assert_eq!(first, run());
}
