//! Limit (`limit`): the cap holds in every period, the child gets all of it
//! when the parent is willing, revocations from above are passed on, stolen
//! time is not charged, and bad parameters are refused. The protocol
//! checker runs after every input.

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

fn cap(amount: &str, period: &str) -> Params {
    Params::new()
        .with("amount", s(amount))
        .with("period", s(period))
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

/// root fp (1 CPU) with `limit` at priority 10 holding one CPU-bound
/// thread, and a CPU-bound background thread at priority 1. Optionally a
/// periodic thread at priority 20 that preempts the limit instance.
fn scene(interference: Option<Behaviour>) -> (Driver, ThreadId, ThreadId, Option<ThreadId>) {
    let mut hsi = Hsi::new(1);
    hsi.set_checking(true);
    hsi.set_tracing(true);
    let root = hsi
        .create_instance(ms(0), "root", build("fp", Params::new()), top(&[0]))
        .unwrap();
    let lim = hsi
        .create_instance(
            ms(0),
            "rt",
            build("limit", cap("10ms", "33ms")),
            under(root, prio(10)),
        )
        .unwrap();
    let t = hsi.create_thread(ms(0), "t", lim, Params::new()).unwrap();
    let bg = hsi.create_thread(ms(0), "bg", root, prio(1)).unwrap();
    let hi = interference.map(|_| hsi.create_thread(ms(0), "hi", root, prio(20)).unwrap());
    let mut drv = Driver::new(hsi);
    drv.add(t, Behaviour::CpuBound).unwrap();
    drv.add(bg, Behaviour::CpuBound).unwrap();
    if let (Some(h), Some(b)) = (hi, interference) {
        drv.add(h, b).unwrap();
    }
    (drv, t, bg, hi)
}

/// What `t` received in each 33 ms period `[33(k-1), 33k)` for `k` in
/// `ks`; the driver must stand at the start of the first.
fn per_period(drv: &mut Driver, t: ThreadId, ks: std::ops::RangeInclusive<u64>) -> Vec<Duration> {
    let mut out = Vec::new();
    let mut before = drv.hsi.thread_received(t);
    for k in ks {
        drv.run_until(ms(33 * k)).unwrap();
        let now = drv.hsi.thread_received(t);
        out.push(now - before);
        before = now;
    }
    out
}

#[test]
fn a_cpu_bound_child_gets_exactly_the_cap_in_every_period() {
    let (mut drv, t, bg, _) = scene(None);
    let got = per_period(&mut drv, t, 1..=100);
    for (k, g) in got.iter().enumerate() {
        assert_eq!(*g, d(10), "period {k}: {g:?}");
    }
    assert_eq!(
        drv.hsi.thread_received(bg),
        d(3300 - 1000),
        "the rest goes to the background"
    );
    let mut trace = Vec::new();
    drv.hsi.drain_trace(&mut trace);
    let exhausted = trace
        .iter()
        .filter(|e| {
            matches!(
                e.kind,
                TraceKind::Revoke {
                    reason: RevokeReason::BudgetExhausted,
                    child: Node::Thread(_),
                    ..
                }
            )
        })
        .count();
    assert_eq!(exhausted, 100, "one budget exhaustion per period");
}

#[test]
fn the_cap_holds_when_the_parent_preempts_the_limit() {
    // A periodic thread at priority 20 preempts the limit instance 2 ms of
    // every 7; the child still gets its 10 ms, never more, in each period.
    let hi = Behaviour::Periodic {
        period: d(7),
        exec: d(2),
        offset: d(1),
    };
    let (mut drv, t, bg, h) = scene(Some(hi));
    let got = per_period(&mut drv, t, 1..=90);
    for (k, g) in got.iter().enumerate() {
        assert_eq!(*g, d(10), "period {k}: {g:?}");
    }
    let total = ms(33 * 90).as_nanos();
    let sum = drv.hsi.thread_received(t)
        + drv.hsi.thread_received(bg)
        + drv.hsi.thread_received(h.unwrap());
    assert_eq!(sum.as_nanos(), total, "no time lost");
    let mut trace = Vec::new();
    drv.hsi.drain_trace(&mut trace);
    let t_vp = drv.hsi.thread_vp(t);
    let preempted = trace
        .iter()
        .filter(|e| matches!(e.kind, TraceKind::Revoke { vp, reason: RevokeReason::Preempted, .. } if vp == t_vp))
        .count();
    assert!(
        preempted > 50,
        "the root's preemptions reach the child as Preempted ({preempted})"
    );
}

#[test]
fn a_child_within_its_cap_is_never_cut_short() {
    let mut hsi = Hsi::new(1);
    hsi.set_checking(true);
    let root = hsi
        .create_instance(ms(0), "root", build("fp", Params::new()), top(&[0]))
        .unwrap();
    let lim = hsi
        .create_instance(
            ms(0),
            "rt",
            build("limit", cap("10ms", "33ms")),
            under(root, prio(10)),
        )
        .unwrap();
    let t = hsi.create_thread(ms(0), "t", lim, Params::new()).unwrap();
    let mut drv = Driver::new(hsi);
    drv.add(
        t,
        Behaviour::Periodic {
            period: d(33),
            exec: d(6),
            offset: d(0),
        },
    )
    .unwrap();
    drv.run_until(ms(33 * 30)).unwrap();
    let f = drv.finishes(t);
    assert_eq!(f.len(), 30);
    assert!(f.iter().all(|&(r, e)| e.saturating_since(r) == d(6)));
}

#[test]
fn stolen_time_is_not_charged() {
    let mut hsi = Hsi::new(1);
    hsi.set_checking(true);
    let root = hsi
        .create_instance(ms(0), "root", build("fp", Params::new()), top(&[0]))
        .unwrap();
    let lim = hsi
        .create_instance(
            ms(0),
            "rt",
            build("limit", cap("10ms", "33ms")),
            under(root, prio(10)),
        )
        .unwrap();
    let t = hsi.create_thread(ms(0), "t", lim, Params::new()).unwrap();
    hsi.wake(ms(0), t).unwrap();
    hsi.add_stolen(ms(5), CpuId(0), d(2));
    assert_eq!(hsi.next_timer(), Some(ms(10)));
    hsi.fire_timers(ms(10)).unwrap();
    assert_eq!(
        hsi.running(CpuId(0)),
        Some(t),
        "only 8 ms were received by 10 ms"
    );
    assert_eq!(hsi.next_timer(), Some(ms(12)));
    hsi.fire_timers(ms(12)).unwrap();
    assert_eq!(hsi.running(CpuId(0)), None);
    assert_eq!(hsi.thread_received(t), d(10));
    assert_eq!(
        hsi.next_timer(),
        Some(ms(33)),
        "asks again at the next period"
    );
    hsi.fire_timers(ms(33)).unwrap();
    assert_eq!(hsi.running(CpuId(0)), Some(t));
}

#[test]
fn set_params_changes_the_cap() {
    let (mut drv, t, _, _) = scene(None);
    drv.run_until(ms(66)).unwrap();
    assert_eq!(drv.hsi.thread_received(t), d(20));
    drv.hsi
        .thread_msg(
            ms(66),
            t,
            &Msg::SetParams(Params::new().with("amount", s("4ms"))),
        )
        .unwrap();
    let got = per_period(&mut drv, t, 3..=12);
    assert!(got.iter().all(|&g| g == d(4)), "{got:?}");
    let bad = drv.hsi.thread_msg(
        ms(400),
        t,
        &Msg::SetParams(Params::new().with("amount", s("40ms"))),
    );
    assert!(bad.is_err(), "amount above the period");
    let bad = drv.hsi.thread_msg(
        ms(400),
        t,
        &Msg::SetParams(Params::new().with("priority", ParamValue::Int(1))),
    );
    assert!(bad.is_err());
}

#[test]
fn bad_parameters_are_refused() {
    let bad = |p: Params| hsched_policies::build("limit", &p).is_err();
    assert!(bad(Params::new()));
    assert!(bad(Params::new().with("amount", s("10ms"))));
    assert!(bad(Params::new().with("period", s("10ms"))));
    assert!(bad(cap("34ms", "33ms")));
    assert!(bad(cap("0ms", "33ms")));
    assert!(bad(cap("10ms", "0ms")));
    assert!(bad(cap("-1ms", "33ms")));
    assert!(bad(cap("10", "33ms")));
    assert!(bad(cap("10ms", "33ms").with("budget", s("1ms"))));
    assert!(!bad(cap("33ms", "33ms")));
    let mut hsi = Hsi::new(1);
    let lim = hsi
        .create_instance(ms(0), "rt", build("limit", cap("1ms", "2ms")), top(&[0]))
        .unwrap();
    hsi.create_thread(ms(0), "a", lim, Params::new()).unwrap();
    let e = hsi
        .create_thread(ms(0), "b", lim, Params::new())
        .unwrap_err();
    assert!(e.to_string().contains("single child"), "{e}");
    assert!(hsi.create_thread(ms(0), "c", lim, prio(3)).is_err());
}
