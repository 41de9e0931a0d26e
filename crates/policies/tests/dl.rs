//! `dl`, the Linux deadline class (Linux kernel/sched/deadline.c), on the
//! core's test driver: hand-worked schedules.

use hsched_core::testing::{Behaviour, Driver};
use hsched_core::*;
use hsched_policies::dl::{Dl, DlConfig};

fn ms(x: u64) -> Instant {
    Instant(x * 1_000_000)
}

fn dur_ms(x: u64) -> Duration {
    Duration::from_millis(x)
}

fn srv(amount: &str, period: &str) -> Params {
    Params::new()
        .with("amount", ParamValue::Str(amount.into()))
        .with("period", ParamValue::Str(period.into()))
}

/// An HSI of `cpus` processors with one `dl` instance over all of them.
fn dl_root(cpus: u32, cfg: DlConfig) -> (Hsi, InstanceId) {
    let mut hsi = Hsi::new(cpus as usize);
    hsi.set_checking(true);
    let top = vec![ParentLink {
        parent: ParentRef::Top {
            cpus: (0..cpus).map(CpuId).collect(),
        },
        params: Params::new(),
    }];
    let dl = hsi
        .create_instance(hsi.now(), "dl0", Box::new(Dl::new(cfg)), top)
        .unwrap();
    (hsi, dl)
}

fn cfg(processors: usize, tick: Duration) -> DlConfig {
    DlConfig {
        processors,
        tick,
        ..DlConfig::default()
    }
}

/// (a) One processor, exact enforcement: servers 2/10 and 3/15 over
/// CPU-bound threads get exactly their runtime each period, in EDF order:
/// A [0,2], B [2,5], A [10,12], B [15,18], A [20,22], A [30,32], B [32,35].
#[test]
fn two_servers_get_their_budgets_in_edf_order() {
    let (mut hsi, dl) = dl_root(1, cfg(1, Duration::ZERO));
    let a = hsi
        .create_thread(ms(0), "a", dl, srv("2ms", "10ms"))
        .unwrap();
    let b = hsi
        .create_thread(ms(0), "b", dl, srv("3ms", "15ms"))
        .unwrap();
    let mut d = Driver::new(hsi);
    d.add(a, Behaviour::CpuBound).unwrap();
    d.add(b, Behaviour::CpuBound).unwrap();
    let at = |d: &mut Driver, t: u64| {
        d.run_until(ms(t)).unwrap();
        (
            d.hsi.thread_received(a).as_nanos() / 1_000_000,
            d.hsi.thread_received(b).as_nanos() / 1_000_000,
            d.hsi.running(CpuId(0)),
        )
    };
    assert_eq!(at(&mut d, 1), (1, 0, Some(a)), "earliest deadline first");
    assert_eq!(at(&mut d, 3), (2, 1, Some(b)), "A throttled at 2");
    assert_eq!(at(&mut d, 6), (2, 3, None), "both throttled");
    assert_eq!(at(&mut d, 11), (3, 3, Some(a)), "A replenished at 10");
    assert_eq!(at(&mut d, 16), (4, 4, Some(b)), "B replenished at 15");
    assert_eq!(at(&mut d, 21), (5, 6, Some(a)));
    assert_eq!(at(&mut d, 31), (7, 6, Some(a)), "A (d 40) before B (d 45)");
    assert_eq!(at(&mut d, 33), (8, 7, Some(b)));
    assert_eq!(at(&mut d, 36), (8, 9, None));
    // Over 30 periods of 10 ms (20 of 15 ms): exactly the budgets.
    d.run_until(ms(300)).unwrap();
    assert_eq!(d.hsi.thread_received(a), dur_ms(60));
    assert_eq!(d.hsi.thread_received(b), dur_ms(60));
}

/// (b) The CBS wake-up rule. A 4/20 server whose thread runs 2 ms every
/// 8 ms wakes at 8 with r = 2, d = 20: 2·20 ≤ 12·4, so it keeps its
/// deadline. One that runs 1 ms every 15 ms wakes at 15 with r = 3, d = 20:
/// 3·20 > 5·4, so it gets a fresh deadline 35 and a full budget.
#[test]
fn a_waking_server_keeps_its_deadline_unless_it_would_overflow() {
    // A 4/20 server over a thread running `exec` every `period` ms.
    let server = |period: u64, exec: u64| {
        let (mut hsi, dl) = dl_root(1, cfg(1, Duration::ZERO));
        let t = hsi
            .create_thread(ms(0), "t", dl, srv("4ms", "20ms"))
            .unwrap();
        let vp = hsi.thread_vp(t);
        let mut d = Driver::new(hsi);
        d.add(
            t,
            Behaviour::Periodic {
                period: dur_ms(period),
                exec: dur_ms(exec),
                offset: Duration::ZERO,
            },
        )
        .unwrap();
        (d, t, vp)
    };
    let (mut d, t, vp) = server(8, 2);
    d.run_until(ms(1)).unwrap();
    assert_eq!(d.hsi.vp_deadline(vp), Some(ms(20)));
    d.run_until(ms(9)).unwrap();
    assert_eq!(
        d.hsi.vp_deadline(vp),
        Some(ms(20)),
        "kept at the wake-up at 8"
    );
    // Budget 4 used up at 10: throttled until 20, so the job of 16 waits.
    d.run_until(ms(19)).unwrap();
    assert_eq!(d.hsi.thread_received(t), dur_ms(4));
    assert_eq!(d.hsi.running(CpuId(0)), None);

    let (mut d, _, vp) = server(15, 1);
    d.run_until(ms(14)).unwrap();
    assert_eq!(d.hsi.vp_deadline(vp), Some(ms(20)));
    d.run_until(ms(16)).unwrap();
    assert_eq!(
        d.hsi.vp_deadline(vp),
        Some(ms(35)),
        "replenished at the wake-up at 15"
    );
    d.run_until(ms(31)).unwrap();
    assert_eq!(
        d.hsi.vp_deadline(vp),
        Some(ms(50)),
        "again at 30: 3·20 > 5·4"
    );
}

/// (c) Tick-checked enforcement, tick 4 ms (CONFIG_HZ=250 without
/// HRTICK_DL): a 2/10 CPU-bound server is only found out of runtime at the
/// tick of 4, having run 4 ms (r = −2); it is throttled until its
/// replenishment at 10, where the debt takes the whole next budget
/// (r = −2 + 2 = 0, so another period: d = 30, r = 2). It runs [10, 12],
/// found out at the tick of 12 with r = 0, and waits until 30.
#[test]
fn a_tick_checked_server_overruns_and_repays_from_its_next_budget() {
    let (mut hsi, dl) = dl_root(1, cfg(1, dur_ms(4)));
    let t = hsi
        .create_thread(ms(0), "t", dl, srv("2ms", "10ms"))
        .unwrap();
    let vp = hsi.thread_vp(t);
    let mut d = Driver::new(hsi);
    d.add(t, Behaviour::CpuBound).unwrap();
    let got = |d: &mut Driver, at: u64| {
        d.run_until(ms(at)).unwrap();
        d.hsi.thread_received(t).as_nanos() / 1_000_000
    };
    assert_eq!(got(&mut d, 3), 3, "still running past its 2 ms");
    assert_eq!(got(&mut d, 4), 4);
    assert_eq!(got(&mut d, 9), 4, "throttled at the tick of 4");
    assert_eq!(d.hsi.vp_deadline(vp), Some(ms(10)));
    assert_eq!(got(&mut d, 11), 5);
    assert_eq!(
        d.hsi.vp_deadline(vp),
        Some(ms(30)),
        "the debt skipped a period"
    );
    assert_eq!(got(&mut d, 12), 6);
    assert_eq!(got(&mut d, 29), 6, "throttled at the tick of 12 with r = 0");
    // At 30: r = 0 + 2 with d = 40; runs [30, 32], 32 a tick.
    assert_eq!(got(&mut d, 33), 8);
    assert_eq!(d.hsi.vp_deadline(vp), Some(ms(40)));

    // Exact enforcement for comparison: 2 ms every period.
    let (mut hsi, dl) = dl_root(1, cfg(1, Duration::ZERO));
    let t = hsi
        .create_thread(ms(0), "t", dl, srv("2ms", "10ms"))
        .unwrap();
    let mut d = Driver::new(hsi);
    d.add(t, Behaviour::CpuBound).unwrap();
    d.run_until(ms(100)).unwrap();
    assert_eq!(d.hsi.thread_received(t), dur_ms(20));
}

/// (d) Global EDF's known miss (Dhall-like): on 2 processors three 6/10
/// servers load 1.8 ≤ 2, but 1.8 > 2 − 0.6 (the GFB bound fails). A and B
/// take [0, 6]; C runs from 6 and has only 4 ms by its deadline of 10: it
/// keeps running past the deadline until its runtime is gone at 12.
#[test]
fn global_edf_misses_a_deadline_within_total_capacity() {
    let (mut hsi, dl) = dl_root(2, cfg(2, Duration::ZERO));
    let ts: Vec<_> = ["a", "b", "c"]
        .iter()
        .map(|n| hsi.create_thread(ms(0), n, dl, srv("6ms", "10ms")).unwrap())
        .collect();
    let mut d = Driver::new(hsi);
    for &t in &ts {
        d.add(t, Behaviour::CpuBound).unwrap();
    }
    let got = |d: &mut Driver, at: u64| {
        d.run_until(ms(at)).unwrap();
        ts.iter()
            .map(|&t| d.hsi.thread_received(t).as_nanos() / 1_000_000)
            .collect::<Vec<_>>()
    };
    assert_eq!(
        got(&mut d, 6),
        vec![6, 6, 0],
        "ties go to the first registered"
    );
    assert_eq!(
        got(&mut d, 10),
        vec![6, 6, 4],
        "C missed its deadline of 10"
    );
    assert_eq!(got(&mut d, 12), vec![8, 6, 6], "C is 2 ms late");
}

/// (e) Admission: on 2 processors at the default cap 0.95 the limit is
/// 1.9; three 6/10 servers (1.8) fit, a fourth of 2/10 (2.0) is refused.
#[test]
fn admission_refuses_beyond_processors_times_cap() {
    let (mut hsi, dl) = dl_root(2, cfg(2, Duration::ZERO));
    for n in ["a", "b", "c"] {
        hsi.create_thread(ms(0), n, dl, srv("6ms", "10ms")).unwrap();
    }
    let err = hsi
        .create_thread(ms(0), "d", dl, srv("2ms", "10ms"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("200.0%") && err.contains("190.0%"), "{err}");
    // One processor: 0.95.
    let (mut hsi, dl) = dl_root(1, cfg(1, Duration::ZERO));
    hsi.create_thread(ms(0), "a", dl, srv("9ms", "10ms"))
        .unwrap();
    assert!(hsi
        .create_thread(ms(0), "b", dl, srv("1ms", "10ms"))
        .is_err());
}

/// A processor taken by the parent (a higher-priority sibling under FP)
/// leaves the earliest deadlines running on the processors left, and the
/// child that lost its processor is charged only up to then.
#[test]
fn fewer_granted_processors_run_the_earliest_deadlines() {
    let mut hsi = Hsi::new(2);
    hsi.set_checking(true);
    let top = vec![ParentLink {
        parent: ParentRef::Top {
            cpus: vec![CpuId(0), CpuId(1)],
        },
        params: Params::new(),
    }];
    let fp = hsi
        .create_instance(
            hsi.now(),
            "fp",
            hsched_policies::build("fp", &Params::new()).unwrap(),
            top,
        )
        .unwrap();
    let link = |prio: i64| {
        vec![ParentLink {
            parent: ParentRef::Instance(fp),
            params: Params::new().with("priority", ParamValue::Int(prio)),
        }]
    };
    let dl = hsi
        .create_instance(
            hsi.now(),
            "dl",
            Box::new(Dl::new(cfg(2, Duration::ZERO))),
            link(1),
        )
        .unwrap();
    let hi = hsi
        .create_thread(
            ms(0),
            "hi",
            fp,
            Params::new().with("priority", ParamValue::Int(5)),
        )
        .unwrap();
    let a = hsi
        .create_thread(ms(0), "a", dl, srv("5ms", "10ms"))
        .unwrap();
    let b = hsi
        .create_thread(ms(0), "b", dl, srv("5ms", "20ms"))
        .unwrap();
    let mut d = Driver::new(hsi);
    d.add(a, Behaviour::CpuBound).unwrap();
    d.add(b, Behaviour::CpuBound).unwrap();
    // The high-priority thread takes one processor from 2 on.
    d.add(
        hi,
        Behaviour::Periodic {
            period: dur_ms(100),
            exec: dur_ms(50),
            offset: dur_ms(2),
        },
    )
    .unwrap();
    d.run_until(ms(2)).unwrap();
    assert_eq!(d.hsi.thread_received(a), dur_ms(2));
    assert_eq!(d.hsi.thread_received(b), dur_ms(2));
    // A (d 10) keeps a processor, B (d 20) waits, whichever processor the
    // parent took.
    d.run_until(Instant(2_500_000)).unwrap();
    assert_eq!(d.hsi.thread_received(a), Duration::from_micros(2500));
    assert_eq!(d.hsi.thread_received(b), dur_ms(2), "B gave way at 2");
    d.run_until(ms(7)).unwrap();
    assert_eq!(d.hsi.thread_received(a), dur_ms(5), "A throttled at 5");
    assert_eq!(d.hsi.thread_received(b), dur_ms(4), "B from 5");
}

/// A server change is admitted against the new bandwidth in place of the
/// old, and takes effect at the next replenishment.
#[test]
fn a_server_change_is_admitted_and_applies_at_the_next_replenishment() {
    let (mut hsi, dl) = dl_root(1, cfg(1, Duration::ZERO));
    let a = hsi
        .create_thread(ms(0), "a", dl, srv("2ms", "10ms"))
        .unwrap();
    hsi.create_thread(ms(0), "b", dl, srv("5ms", "10ms"))
        .unwrap();
    let mut d = Driver::new(hsi);
    d.add(a, Behaviour::CpuBound).unwrap();
    d.run_until(ms(5)).unwrap();
    // 0.5 + 0.5 is over 0.95; 0.5 + 0.4 is not.
    let change =
        |amount: &str| Msg::SetParams(Params::new().with("amount", ParamValue::Str(amount.into())));
    assert!(d.hsi.thread_msg(ms(5), a, &change("5ms")).is_err());
    d.hsi.thread_msg(ms(5), a, &change("4ms")).unwrap();
    d.run_until(ms(10)).unwrap();
    assert_eq!(
        d.hsi.thread_received(a),
        dur_ms(2),
        "this period's budget stays"
    );
    d.run_until(ms(20)).unwrap();
    assert_eq!(
        d.hsi.thread_received(a),
        dur_ms(6),
        "4 ms from the replenishment at 10"
    );
}
