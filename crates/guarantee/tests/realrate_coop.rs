//! The guarantee mappings of `realrate` (Steere et al. 1998, §3.1, §3.3) and `coop`
//! (Sinha 2007, §2.3–2.5): what each child gets, admission against the
//! overload threshold, the rate-monotonic condition, what they accept.

mod common;

use common::{g, ms};
use hsched_guarantee::compose::{compose, Hierarchy, ParentSpec, SchedulerSpec, ThreadSpec};
use hsched_guarantee::mapping::{EdgeParams, InstanceParams, RateClass};
use hsched_guarantee::Guarantee;

fn rr_child(proportion: Option<f64>, period: Option<f64>, class: Option<RateClass>) -> ParentSpec {
    let mut p = ParentSpec::scheduler("rr");
    p.params = EdgeParams {
        proportion,
        period: period.map(ms),
        class,
        ..Default::default()
    };
    p
}

fn realrate(params: InstanceParams) -> Hierarchy {
    let mut h = Hierarchy::new(1);
    h.add_scheduler(
        SchedulerSpec::new("rr", "realrate")
            .under(ParentSpec::top())
            .with_params(params),
    );
    h
}

#[test]
fn real_time_children_get_reservations_and_adaptive_ones_null() {
    let mut h = realrate(InstanceParams::default());
    h.add_thread(
        ThreadSpec::new("producer", rr_child(Some(0.2), Some(10.0), None))
            .requesting(g("RESBH 2 10")),
    );
    // Aperiodic: the default 30 ms period.
    h.add_thread(ThreadSpec::new("aper", rr_child(Some(0.1), None, None)));
    h.add_thread(ThreadSpec::new(
        "consumer",
        rr_child(None, Some(10.0), Some(RateClass::RealRate)),
    ));
    h.add_thread(ThreadSpec::new("hog", rr_child(None, None, None)));
    let c = compose(&h);
    assert!(c.is_ok(), "{:?}", c.diagnostics);
    assert_eq!(c.received("producer"), Some(g("RESBH 2 10")));
    assert_eq!(c.received("aper"), Some(g("RESBH 3 30")));
    assert_eq!(c.received("consumer"), Some(Guarantee::Null));
    assert_eq!(c.received("hog"), Some(Guarantee::Null));
}

#[test]
fn admission_counts_the_floors_of_adaptive_children_against_overload() {
    // 0.5 + 0.38 + 2 floors of 0.01 = 0.9: admitted at the threshold.
    let mut h = realrate(InstanceParams::default());
    h.add_thread(ThreadSpec::new("a", rr_child(Some(0.5), Some(10.0), None)));
    h.add_thread(ThreadSpec::new("b", rr_child(Some(0.38), Some(20.0), None)));
    for m in ["m1", "m2"] {
        // Harmonic periods (10, 20 ms): the reservations are hard.
        h.add_thread(ThreadSpec::new(
            m,
            rr_child(None, Some(20.0), Some(RateClass::Misc)),
        ));
    }
    let c = compose(&h);
    assert!(c.is_ok(), "{:?}", c.diagnostics);
    assert_eq!(c.received("b"), Some(g("RESBH 7.6 20")));
    // One more real-time percent is refused, with the numbers.
    h.add_thread(ThreadSpec::new("c", rr_child(Some(0.01), Some(20.0), None)));
    let c = compose(&h);
    assert_eq!(c.diagnostics.len(), 1, "{:?}", c.diagnostics);
    let msg = c.diagnostics[0].to_string();
    assert!(msg.contains("admission refused"), "{msg}");
    assert!(msg.contains("90.0% overload threshold"), "{msg}");
    // A higher threshold admits it.
    h.schedulers[0].params.overload = Some(0.95);
    assert!(compose(&h).is_ok());
}

#[test]
fn non_harmonic_periods_above_the_liu_layland_bound_give_no_reservation() {
    // Periods 10 and 15 ms are not harmonic; two children's bound is 0.828
    // < 0.9, so rate-monotonic dispatch may miss: no hard reservation.
    let mut h = realrate(InstanceParams::default());
    h.add_thread(ThreadSpec::new("a", rr_child(Some(0.3), Some(10.0), None)));
    h.add_thread(
        ThreadSpec::new("b", rr_child(Some(0.3), Some(15.0), None)).requesting(g("RESBH 4.5 15")),
    );
    let c = compose(&h);
    assert_eq!(c.received("b"), Some(Guarantee::Null));
    assert!(!c.is_ok());
    // At an overload within the bound the same pair is hard.
    h.schedulers[0].params.overload = Some(0.8);
    let c = compose(&h);
    assert!(c.is_ok(), "{:?}", c.diagnostics);
    assert_eq!(c.received("b"), Some(g("RESBH 4.5 15")));
}

#[test]
fn realrate_needs_the_whole_processor() {
    let mut h = Hierarchy::new(1);
    h.add_scheduler(SchedulerSpec::new("ps", "ps").under(ParentSpec::top()));
    h.add_scheduler(SchedulerSpec::new("rr", "realrate").under(ParentSpec::scheduler("ps")));
    h.add_thread(ThreadSpec::new("t", rr_child(Some(0.2), Some(10.0), None)));
    let c = compose(&h);
    assert!(!c.is_ok());
    let text: String = c.diagnostics.iter().map(|d| d.to_string()).collect();
    assert!(text.contains("needs ALL") || text.contains("ALL"), "{text}");
}

#[test]
fn coop_accepts_anything_and_promises_best_effort() {
    let mut h = Hierarchy::new(1);
    h.add_scheduler(SchedulerSpec::new("root", "fp").under(ParentSpec::top()));
    h.add_scheduler(
        SchedulerSpec::new("rez", "rez").under(ParentSpec::scheduler("root").priority(2)),
    );
    h.add_scheduler(
        SchedulerSpec::new("coop", "coop")
            .under(ParentSpec::scheduler("rez").reservation(ms(50.0), ms(100.0))),
    );
    h.add_thread(ThreadSpec::new("p0", ParentSpec::scheduler("coop")));
    h.add_thread(ThreadSpec::new("p1", ParentSpec::scheduler("coop")));
    let c = compose(&h);
    assert!(c.is_ok(), "{:?}", c.diagnostics);
    assert_eq!(c.received("coop"), Some(g("RESBH 50 100")));
    assert_eq!(c.received("p0"), Some(Guarantee::Null));
    // A member asking for a share is told it gets none.
    h.add_thread(ThreadSpec::new("p2", ParentSpec::scheduler("coop")).requesting(g("PS 0.1")));
    assert!(!compose(&h).is_ok());
}
