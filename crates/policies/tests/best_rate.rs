//! BEST-RATE (Banachowski 2002, ch. 4) driven by `hsched_core::testing::Driver`,
//! with the protocol checker on.

mod common;

use common::*;
use hsched_core::testing::{Behaviour, Driver};
use hsched_core::{CpuId, Instant, ParamValue, Params, ParentLink, ParentRef};

#[test]
fn cpu_bound_children_share_equally_like_linux() {
    let mut hsi = checked(1);
    let r = root(&mut hsi, "best-rate", Params::new(), 1);
    let ids: Vec<_> = (0..3)
        .map(|k| {
            hsi.create_thread(Instant(0), &format!("h{k}"), r, Params::new())
                .unwrap()
        })
        .collect();
    let mut d = Driver::new(hsi);
    for &t in &ids {
        d.add(t, Behaviour::CpuBound).unwrap();
    }
    d.run_until(Instant(10_000_000_000)).unwrap();
    for &t in &ids {
        let s = share(&d, t, 10.0);
        assert!((s - 1.0 / 3.0).abs() < 0.02, "{s:.3}");
    }
}

#[test]
fn nice_10_against_one_competitor_gets_a_third() {
    let mut hsi = checked(1);
    let r = root(&mut hsi, "best-rate", Params::new(), 1);
    let a = hsi
        .create_thread(Instant(0), "a", r, Params::new())
        .unwrap();
    let b = hsi.create_thread(Instant(0), "b", r, nice(10)).unwrap();
    let mut d = Driver::new(hsi);
    d.add(a, Behaviour::CpuBound).unwrap();
    d.add(b, Behaviour::CpuBound).unwrap();
    d.run_until(Instant(10_000_000_000)).unwrap();
    let (sa, sb) = (share(&d, a, 10.0), share(&d, b, 10.0));
    assert!(
        (sb - 1.0 / 3.0).abs() < 0.03,
        "nice 10: {sb:.3}, nice 0: {sa:.3}"
    );
}

#[test]
fn exp7_hog_and_a_half_share_periodic_thread() {
    let mut hsi = checked(1);
    let r = root(&mut hsi, "best-rate", Params::new(), 1);
    let hog = hsi
        .create_thread(Instant(0), "hog", r, Params::new())
        .unwrap();
    let srt = hsi
        .create_thread(Instant(0), "srt", r, Params::new())
        .unwrap();
    let mut d = Driver::new(hsi);
    d.add(hog, Behaviour::CpuBound).unwrap();
    d.add(srt, periodic(40, 19, 3)).unwrap();
    d.run_until(Instant(10_000_000_000)).unwrap();
    let (jobs, missed) = misses(&d, srt, 40, 1000);
    assert_eq!(missed, 0, "{missed} of {jobs}");
}

#[test]
fn exp8_three_hogs_and_a_quarter_share_periodic_thread() {
    let mut hsi = checked(1);
    let r = root(&mut hsi, "best-rate", Params::new(), 1);
    let hogs: Vec<_> = (0..3)
        .map(|k| {
            hsi.create_thread(Instant(0), &format!("h{k}"), r, Params::new())
                .unwrap()
        })
        .collect();
    let srt = hsi
        .create_thread(Instant(0), "srt", r, Params::new())
        .unwrap();
    let mut d = Driver::new(hsi);
    for &h in &hogs {
        d.add(h, Behaviour::CpuBound).unwrap();
    }
    d.add(srt, periodic(40, 9, 3)).unwrap();
    d.run_until(Instant(10_000_000_000)).unwrap();
    // A few misses in the first second while usages settle, none after.
    let (jobs, missed) = misses(&d, srt, 40, 0);
    assert!(missed <= 5, "{missed} of {jobs}");
    let (jobs, missed) = misses(&d, srt, 40, 2000);
    assert_eq!(missed, 0, "{missed} of {jobs}");
    for &h in &hogs {
        let s = share(&d, h, 10.0);
        assert!((s - 0.25).abs() < 0.02, "{s:.3}");
    }
}

#[test]
fn counting_only_runnable_children_breaks_exp8() {
    // The other reading of L (see the module documentation).
    let mut hsi = checked(1);
    let params = Params::new().with("load", ParamValue::Str("runnable".into()));
    let r = root(&mut hsi, "best-rate", params, 1);
    let hogs: Vec<_> = (0..3)
        .map(|k| {
            hsi.create_thread(Instant(0), &format!("h{k}"), r, Params::new())
                .unwrap()
        })
        .collect();
    let srt = hsi
        .create_thread(Instant(0), "srt", r, Params::new())
        .unwrap();
    let mut d = Driver::new(hsi);
    for &h in &hogs {
        d.add(h, Behaviour::CpuBound).unwrap();
    }
    d.add(srt, periodic(40, 9, 3)).unwrap();
    d.run_until(Instant(10_000_000_000)).unwrap();
    let (jobs, missed) = misses(&d, srt, 40, 2000);
    assert!(missed * 20 > jobs, "{missed} of {jobs}");
}

#[test]
fn exp9_a_niced_hog_leaves_two_thirds_on_time() {
    let mut hsi = checked(1);
    let r = root(&mut hsi, "best-rate", Params::new(), 1);
    let hog = hsi.create_thread(Instant(0), "hog", r, nice(10)).unwrap();
    let srt = hsi
        .create_thread(Instant(0), "srt", r, Params::new())
        .unwrap();
    let mut d = Driver::new(hsi);
    d.add(hog, Behaviour::CpuBound).unwrap();
    d.add(srt, periodic(30, 19, 3)).unwrap();
    d.run_until(Instant(10_000_000_000)).unwrap();
    let (jobs, missed) = misses(&d, srt, 30, 1000);
    assert_eq!(missed, 0, "{missed} of {jobs}");
}

#[test]
fn a_periodic_thread_gets_no_more_than_its_fair_share() {
    // Needs 60% beside two hogs: its share is a third (BEST would give it
    // the 60%).
    let mut hsi = checked(1);
    let r = root(&mut hsi, "best-rate", Params::new(), 1);
    let hogs: Vec<_> = (0..2)
        .map(|k| {
            hsi.create_thread(Instant(0), &format!("h{k}"), r, Params::new())
                .unwrap()
        })
        .collect();
    let srt = hsi
        .create_thread(Instant(0), "srt", r, Params::new())
        .unwrap();
    let mut d = Driver::new(hsi);
    for &h in &hogs {
        d.add(h, Behaviour::CpuBound).unwrap();
    }
    d.add(srt, periodic(40, 24, 3)).unwrap();
    d.run_until(Instant(20_000_000_000)).unwrap();
    let s = share(&d, srt, 20.0);
    assert!(s < 1.0 / 3.0 + 0.05, "srt got {s:.3}");
    for &h in &hogs {
        assert!(share(&d, h, 20.0) > 1.0 / 3.0 - 0.05);
    }
}

#[test]
fn works_on_two_processors_and_under_a_parent() {
    // FP root on two processors: a high-priority thread, and BEST-RATE
    // below with four hogs and a periodic thread.
    let mut hsi = checked(2);
    let fp = {
        let p = hsched_policies::build("fp", &Params::new()).unwrap();
        let link = ParentLink {
            parent: ParentRef::Top {
                cpus: vec![CpuId(0), CpuId(1)],
            },
            params: Params::new(),
        };
        hsi.create_instance(Instant(0), "fp", p, vec![link])
            .unwrap()
    };
    let br = hsched_policies::build("best-rate", &Params::new()).unwrap();
    let link = ParentLink {
        parent: ParentRef::Instance(fp),
        params: Params::new().with("priority", ParamValue::Int(1)),
    };
    let b = hsi
        .create_instance(Instant(0), "br", br, vec![link])
        .unwrap();
    let top = hsi
        .create_thread(
            Instant(0),
            "top",
            fp,
            Params::new().with("priority", ParamValue::Int(5)),
        )
        .unwrap();
    let hogs: Vec<_> = (0..4)
        .map(|k| {
            hsi.create_thread(Instant(0), &format!("h{k}"), b, Params::new())
                .unwrap()
        })
        .collect();
    let srt = hsi
        .create_thread(Instant(0), "srt", b, Params::new())
        .unwrap();
    let mut d = Driver::new(hsi);
    d.add(top, periodic(20, 10, 0)).unwrap();
    for &h in &hogs {
        d.add(h, Behaviour::CpuBound).unwrap();
    }
    d.add(srt, periodic(40, 10, 3)).unwrap();
    d.run_until(Instant(10_000_000_000)).unwrap();
    let (jobs, missed) = misses(&d, srt, 40, 1000);
    assert_eq!(missed, 0, "{missed} of {jobs}");
    // 1.5 processors for BEST-RATE: 0.25 to the periodic thread, the rest
    // shared by the hogs.
    let hogs_total: f64 = hogs.iter().map(|&h| share(&d, h, 10.0)).sum();
    assert!((hogs_total - 1.25).abs() < 0.03, "{hogs_total:.3}");
}

#[test]
fn parameters_are_checked() {
    let bad = [
        ("usage_weight", ParamValue::Str("x".into())),
        ("quantum", ParamValue::Str("0s".into())),
        ("load", ParamValue::Str("some".into())),
    ];
    for (k, v) in bad {
        assert!(
            hsched_policies::build("best-rate", &Params::new().with(k, v.clone())).is_err(),
            "{k}={v}"
        );
    }
    let ok = Params::new()
        .with("load", ParamValue::Str("all".into()))
        .with("usage_weight", ParamValue::Float(0.5));
    assert!(hsched_policies::build("best-rate", &ok).is_ok());
}
