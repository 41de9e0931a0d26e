//! The Linux 2.4 baseline (`linux24`) driven by
//! `hsched_core::testing::Driver`, with the protocol checker on.

mod common;

use common::*;
use hsched_core::testing::{Behaviour, Driver};
use hsched_core::{Duration, Instant, ParamValue, Params, ParentLink, ParentRef};

#[test]
fn hogs_share_by_nice() {
    let mut hsi = checked(1);
    let r = root(&mut hsi, "linux24", Params::new(), 1);
    let a = hsi
        .create_thread(Instant(0), "a", r, Params::new())
        .unwrap();
    let b = hsi
        .create_thread(Instant(0), "b", r, Params::new())
        .unwrap();
    let c = hsi.create_thread(Instant(0), "c", r, nice(10)).unwrap();
    let mut d = Driver::new(hsi);
    for t in [a, b, c] {
        d.add(t, Behaviour::CpuBound).unwrap();
    }
    d.run_until(Instant(10_000_000_000)).unwrap();
    // Each epoch gives 100, 100 and 50 ms.
    let (sa, sb, sc) = (share(&d, a, 10.0), share(&d, b, 10.0), share(&d, c, 10.0));
    assert!(
        (sa - 0.4).abs() < 0.02 && (sb - 0.4).abs() < 0.02 && (sc - 0.2).abs() < 0.02,
        "{sa:.3} {sb:.3} {sc:.3}"
    );
}

#[test]
fn nice_10_against_one_competitor_gets_a_third() {
    let mut hsi = checked(1);
    let r = root(&mut hsi, "linux24", Params::new(), 1);
    let a = hsi
        .create_thread(Instant(0), "a", r, Params::new())
        .unwrap();
    let b = hsi.create_thread(Instant(0), "b", r, nice(10)).unwrap();
    let mut d = Driver::new(hsi);
    d.add(a, Behaviour::CpuBound).unwrap();
    d.add(b, Behaviour::CpuBound).unwrap();
    d.run_until(Instant(9_000_000_000)).unwrap();
    let sb = share(&d, b, 9.0);
    assert!((sb - 1.0 / 3.0).abs() < 0.02, "{sb:.3}");
}

#[test]
fn a_sleeper_preempts_a_hog_when_it_wakes() {
    // A thread that runs 2 ms every 100 ms keeps a large counter, so its
    // goodness beats the hog's by more than 1 and it runs at once.
    let mut hsi = checked(1);
    let r = root(&mut hsi, "linux24", Params::new(), 1);
    let hog = hsi
        .create_thread(Instant(0), "hog", r, Params::new())
        .unwrap();
    let io = hsi
        .create_thread(Instant(0), "io", r, Params::new())
        .unwrap();
    let mut d = Driver::new(hsi);
    d.add(hog, Behaviour::CpuBound).unwrap();
    d.add(
        io,
        Behaviour::Periodic {
            period: ms(100),
            exec: ms(2),
            offset: ms(50),
        },
    )
    .unwrap();
    d.run_until(Instant(5_000_000_000)).unwrap();
    let late: Vec<_> = d
        .finishes(io)
        .iter()
        .filter(|(r, f)| f.saturating_since(*r) > ms(2))
        .collect();
    assert!(
        late.len() * 10 < d.finishes(io).len(),
        "{} of {} waited",
        late.len(),
        d.finishes(io).len()
    );
}

/// Exp. 7: a hog and a thread needing 50% (20 ms every 40 ms), constant
/// work. Returns (jobs, misses) after the first second.
fn exp7(policy: &str) -> (usize, usize) {
    let mut hsi = checked(1);
    let r = root(&mut hsi, policy, Params::new(), 1);
    let hog = hsi
        .create_thread(Instant(0), "hog", r, Params::new())
        .unwrap();
    let srt = hsi
        .create_thread(Instant(0), "srt", r, Params::new())
        .unwrap();
    let mut d = Driver::new(hsi);
    d.add(hog, Behaviour::CpuBound).unwrap();
    d.add(
        srt,
        Behaviour::Periodic {
            period: ms(40),
            exec: ms(20),
            offset: ms(3),
        },
    )
    .unwrap();
    d.run_until(Instant(30_000_000_000)).unwrap();
    misses(&d, srt, 40, 1000)
}

#[test]
fn the_phasing_of_dynamic_priorities_makes_linux_miss_where_best_does_not() {
    // §3.4.2 and §4.1: after a recalculation the periodic thread may no
    // longer beat the hog, which then runs a whole quantum.
    let (jobs, linux) = exp7("linux24");
    let (_, best) = exp7("best");
    let (_, rate) = exp7("best-rate");
    assert!(linux * 200 > jobs, "linux24 missed only {linux} of {jobs}");
    assert_eq!(best, 0);
    assert_eq!(rate, 0);
}

#[test]
fn works_on_two_processors_and_under_a_parent() {
    let mut hsi = checked(2);
    let fp = root(&mut hsi, "fp", Params::new(), 2);
    let l = hsched_policies::build("linux24", &Params::new()).unwrap();
    let link = ParentLink {
        parent: ParentRef::Instance(fp),
        params: Params::new().with("priority", ParamValue::Int(1)),
    };
    let l = hsi.create_instance(Instant(0), "l", l, vec![link]).unwrap();
    let top = hsi
        .create_thread(
            Instant(0),
            "top",
            fp,
            Params::new().with("priority", ParamValue::Int(5)),
        )
        .unwrap();
    let hogs: Vec<_> = (0..3)
        .map(|k| {
            hsi.create_thread(Instant(0), &format!("h{k}"), l, Params::new())
                .unwrap()
        })
        .collect();
    let mut d = Driver::new(hsi);
    d.add(
        top,
        Behaviour::Periodic {
            period: ms(20),
            exec: ms(10),
            offset: ms(0),
        },
    )
    .unwrap();
    for &h in &hogs {
        d.add(h, Behaviour::CpuBound).unwrap();
    }
    d.run_until(Instant(12_000_000_000)).unwrap();
    // 1.5 processors left, shared by three hogs.
    for &h in &hogs {
        let s = share(&d, h, 12.0);
        assert!((s - 0.5).abs() < 0.05, "{s:.3}");
    }
}

#[test]
fn parameters_are_checked() {
    for (k, v) in [
        ("hz", ParamValue::Int(0)),
        ("quantum", ParamValue::Str("0s".into())),
        ("proc_change_penalty", ParamValue::Int(-1)),
    ] {
        assert!(
            hsched_policies::build("linux24", &Params::new().with(k, v.clone())).is_err(),
            "{k}={v}"
        );
    }
    let ok = Params::new()
        .with("hz", ParamValue::Int(800))
        .with("quantum", ParamValue::Str("60ms".into()));
    assert!(hsched_policies::build("linux24", &ok).is_ok());
}

/// A thread that runs 9 ms out of every 10 ms, always between two ticks of
/// a 100 Hz clock, beside a hog: the share it gets.
fn between_ticks_share(accounting: &str) -> f64 {
    let mut hsi = checked(1);
    let params = Params::new()
        .with("hz", ParamValue::Int(100))
        .with("accounting", ParamValue::Str(accounting.into()));
    let r = root(&mut hsi, "linux24", params, 1);
    let a = hsi
        .create_thread(Instant(0), "a", r, Params::new())
        .unwrap();
    let hog = hsi
        .create_thread(Instant(0), "hog", r, Params::new())
        .unwrap();
    let mut d = Driver::new(hsi);
    d.add(hog, Behaviour::CpuBound).unwrap();
    d.add(
        a,
        Behaviour::Periodic {
            period: ms(10),
            exec: ms(9),
            offset: Duration::from_micros(500),
        },
    )
    .unwrap();
    d.run_until(Instant(10_000_000_000)).unwrap();
    share(&d, a, 10.0)
}

#[test]
fn tick_accounting_charges_only_who_runs_at_the_tick() {
    // Linux 2.4 charges a whole tick to whichever task runs when the clock
    // interrupt arrives. A task that always runs between ticks is never
    // charged, keeps a full counter, and out-preempts the hog; charged
    // exactly, it gets about half.
    let tick = between_ticks_share("tick");
    let exact = between_ticks_share("exact");
    assert!(tick > 0.85, "tick accounting: {tick:.3}");
    assert!(exact < 0.6, "exact accounting: {exact:.3}");
}
