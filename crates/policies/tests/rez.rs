//! Rez, Rez-C and Rez-FB (Regehr 2001, §9.3.2, ch. 11) on the core's test driver.

mod common;

use hsched_core::testing::{Behaviour, Driver};
use hsched_core::*;
use hsched_policies::rez::{Rez, RezConfig, Variant};

fn ms(x: u64) -> Instant {
    Instant(x * 1_000_000)
}

fn dur_ms(x: u64) -> Duration {
    Duration::from_millis(x)
}

fn res(amount: &str, period: &str) -> Params {
    Params::new()
        .with("amount", ParamValue::Str(amount.into()))
        .with("period", ParamValue::Str(period.into()))
}

fn top(cpus: &[u32]) -> Vec<ParentLink> {
    vec![ParentLink {
        parent: ParentRef::Top {
            cpus: cpus.iter().map(|&c| CpuId(c)).collect(),
        },
        params: Params::new(),
    }]
}

fn rez_root(hsi: &mut Hsi, cfg: RezConfig) -> InstanceId {
    hsi.create_instance(hsi.now(), "rez0", Box::new(Rez::new(cfg)), top(&[0]))
        .unwrap()
}

fn new_hsi() -> Hsi {
    let mut hsi = Hsi::new(1);
    hsi.set_checking(true);
    hsi
}

#[test]
fn cpu_bound_thread_gets_exactly_its_amount_every_period() {
    let mut hsi = new_hsi();
    hsi.set_tracing(true);
    let rez = rez_root(&mut hsi, RezConfig::default());
    let t = hsi
        .create_thread(ms(0), "t", rez, res("10ms", "33ms"))
        .unwrap();
    let mut d = Driver::new(hsi);
    d.add(t, Behaviour::CpuBound).unwrap();
    let mut last = Duration::ZERO;
    for k in 1..=100u64 {
        d.run_until(ms(33 * k - 20)).unwrap();
        assert_eq!(
            d.hsi.running(CpuId(0)),
            None,
            "a hard reservation leaves the rest of period {k} idle"
        );
        d.run_until(ms(33 * k)).unwrap();
        let r = d.hsi.thread_received(t);
        assert_eq!(r - last, dur_ms(10), "period {k}");
        last = r;
    }
    let mut trace = Vec::new();
    d.hsi.drain_trace(&mut trace);
    let exhausted = trace
        .iter()
        .filter(|e| {
            matches!(
                e.kind,
                TraceKind::Revoke {
                    reason: RevokeReason::BudgetExhausted,
                    ..
                }
            )
        })
        .count();
    assert_eq!(exhausted, 100, "one budget exhaustion per period");
    let replenish = trace
        .iter()
        .filter(|e| {
            matches!(
                e.kind,
                TraceKind::Policy {
                    event: PolicyEvent::Replenish { .. },
                    ..
                }
            )
        })
        .count();
    assert_eq!(
        replenish, 101,
        "a replenishment at every period start, the first included"
    );
}

#[test]
fn earliest_deadline_runs_first() {
    let mut hsi = new_hsi();
    let rez = rez_root(&mut hsi, RezConfig::default());
    // a is created and woken first; FIFO would run it first, EDF runs b.
    let a = hsi
        .create_thread(ms(0), "a", rez, res("2ms", "10ms"))
        .unwrap();
    let b = hsi
        .create_thread(ms(0), "b", rez, res("3ms", "7ms"))
        .unwrap();
    let mut d = Driver::new(hsi);
    d.add(a, Behaviour::CpuBound).unwrap();
    d.add(b, Behaviour::CpuBound).unwrap();
    d.run_until(ms(3)).unwrap();
    assert_eq!(
        (d.hsi.thread_received(a), d.hsi.thread_received(b)),
        (dur_ms(0), dur_ms(3))
    );
    d.run_until(ms(5)).unwrap();
    assert_eq!(
        (d.hsi.thread_received(a), d.hsi.thread_received(b)),
        (dur_ms(2), dur_ms(3))
    );
    d.run_until(ms(10)).unwrap();
    assert_eq!(
        d.hsi.thread_received(b),
        dur_ms(6),
        "b's second period [7, 14) starts with its budget"
    );
    d.run_until(ms(12)).unwrap();
    assert_eq!(d.hsi.thread_received(a), dur_ms(4));
}

#[test]
fn an_earlier_deadline_preempts_the_running_reservation() {
    let mut hsi = new_hsi();
    hsi.set_tracing(true);
    let rez = rez_root(&mut hsi, RezConfig::default());
    let a = hsi
        .create_thread(ms(0), "a", rez, res("5ms", "20ms"))
        .unwrap();
    let b = hsi
        .create_thread(ms(0), "b", rez, res("1ms", "4ms"))
        .unwrap();
    let mut d = Driver::new(hsi);
    assert_eq!(d.hsi.thread_last_revoke(a), None);
    d.add(a, Behaviour::CpuBound).unwrap();
    d.add(b, Behaviour::CpuBound).unwrap();
    d.run_until(ms(5)).unwrap();
    assert_eq!(
        (d.hsi.thread_received(a), d.hsi.thread_received(b)),
        (dur_ms(3), dur_ms(2))
    );
    // What a live backend reads to tell the two apart.
    assert_eq!(d.hsi.thread_last_revoke(a), Some(RevokeReason::Preempted));
    assert_eq!(
        d.hsi.thread_last_revoke(b),
        Some(RevokeReason::BudgetExhausted)
    );
    d.run_until(ms(7)).unwrap();
    assert_eq!(d.hsi.thread_received(a), dur_ms(5));
    assert_eq!(
        d.hsi.thread_last_revoke(a),
        Some(RevokeReason::BudgetExhausted)
    );
    d.run_until(ms(9)).unwrap();
    assert_eq!(d.hsi.thread_received(b), dur_ms(3));
    let vp_a = d.hsi.thread_vp(a);
    let mut trace = Vec::new();
    d.hsi.drain_trace(&mut trace);
    let revokes: Vec<(Instant, RevokeReason)> = trace
        .iter()
        .filter_map(|e| match e.kind {
            TraceKind::Revoke { vp, reason, .. } if vp == vp_a => Some((e.at, reason)),
            _ => None,
        })
        .collect();
    // a, woken first, is preempted at once by b's earlier deadline, again
    // when b's second period starts, and finally runs out of budget.
    let expected = vec![
        (ms(0), RevokeReason::Preempted),
        (ms(4), RevokeReason::Preempted),
        (ms(7), RevokeReason::BudgetExhausted),
    ];
    assert_eq!(revokes, expected);
}

#[test]
fn many_reservations_each_get_their_amount_in_every_period() {
    // Total utilization 0.8 under EDF: every reservation is met exactly.
    let specs: [(u64, u64); 8] = [
        (1, 10),
        (2, 25),
        (3, 40),
        (1, 8),
        (5, 50),
        (2, 20),
        (4, 64),
        (3, 48),
    ];
    let total: f64 = specs.iter().map(|&(a, p)| a as f64 / p as f64).sum();
    assert!(total < 0.85);
    let mut hsi = new_hsi();
    let rez = rez_root(&mut hsi, RezConfig::default());
    let ts: Vec<ThreadId> = specs
        .iter()
        .enumerate()
        .map(|(i, &(a, p))| {
            hsi.create_thread(
                ms(0),
                &format!("t{i}"),
                rez,
                res(&format!("{a}ms"), &format!("{p}ms")),
            )
            .unwrap()
        })
        .collect();
    let mut d = Driver::new(hsi);
    for &t in &ts {
        d.add(t, Behaviour::CpuBound).unwrap();
    }
    let mut boundaries: Vec<u64> = specs
        .iter()
        .flat_map(|&(_, p)| (1..=1000 / p).map(move |k| k * p))
        .collect();
    boundaries.sort_unstable();
    boundaries.dedup();
    let mut last = vec![Duration::ZERO; ts.len()];
    for b in boundaries {
        d.run_until(ms(b)).unwrap();
        for (i, &(a, p)) in specs.iter().enumerate() {
            if b % p == 0 {
                let r = d.hsi.thread_received(ts[i]);
                assert_eq!(
                    r - last[i],
                    dur_ms(a),
                    "t{i} ({a}ms/{p}ms) in the period ending at {b}ms"
                );
                last[i] = r;
            }
        }
    }
}

#[test]
fn admission_refusal_names_load_and_cap_and_leaves_nothing() {
    let mut hsi = new_hsi();
    let rez = rez_root(&mut hsi, RezConfig::default());
    hsi.create_thread(ms(0), "big", rez, res("20ms", "33ms"))
        .unwrap();
    let err = hsi
        .create_thread(ms(0), "more", rez, res("10ms", "33ms"))
        .unwrap_err();
    let HsiError::Op(OpError::Refused {
        instance,
        error: PolicyError::AdmissionRefused { load, cap, .. },
    }) = &err
    else {
        panic!("expected an admission refusal, got {err:?}");
    };
    assert_eq!(instance, "rez0");
    assert!((load - 30.0 / 33.0).abs() < 1e-9, "load {load}");
    assert_eq!(*cap, 0.85);
    let text = err.to_string();
    assert!(text.contains("90.9%") && text.contains("85.0%"), "{text}");
    assert_eq!(hsi.instance_children(rez).len(), 1);
    assert_eq!(hsi.threads_of(rez).count(), 1);
    // The refused reservation left no load behind: one that fits is admitted.
    hsi.create_thread(ms(0), "fits", rez, res("8ms", "33ms"))
        .unwrap();
    let describe = hsi.instance_policy(rez).unwrap().describe();
    assert!(describe.contains("load=84.8%"), "{describe}");
}

#[test]
fn a_custom_cap_is_enforced() {
    let mut hsi = new_hsi();
    let rez = rez_root(
        &mut hsi,
        RezConfig {
            cap: 0.5,
            variant: Variant::Basic,
        },
    );
    hsi.create_thread(ms(0), "a", rez, res("5ms", "10ms"))
        .unwrap();
    let err = hsi
        .create_thread(ms(0), "b", rez, res("1ms", "100ms"))
        .unwrap_err();
    assert!(
        matches!(err, HsiError::Op(OpError::Refused { error: PolicyError::AdmissionRefused { cap, .. }, .. }) if cap == 0.5)
    );
}

/// Utilizations are rounded up to 2^-32 of the processor, which alone
/// would refuse reservations whose exact sum is the cap: 0.4 and 0.1 both
/// round up, to one unit over 0.5.
#[test]
fn reservations_that_sum_exactly_to_the_cap_are_admitted() {
    let cap = |c: f64| RezConfig {
        cap: c,
        variant: Variant::Basic,
    };
    for (c, amounts) in [
        (0.5, &["4ms", "1ms"][..]),
        (0.85, &["4ms", "2.5ms", "2ms"][..]),
        (0.2, &["1ms", "1ms"][..]),
        (1.0, &["3ms", "3ms", "3ms", "1ms"][..]),
    ] {
        let mut hsi = new_hsi();
        let rez = rez_root(&mut hsi, cap(c));
        for (k, a) in amounts.iter().enumerate() {
            hsi.create_thread(ms(0), &format!("t{k}"), rez, res(a, "10ms"))
                .unwrap_or_else(|e| panic!("cap {c}, {amounts:?}: {e}"));
        }
        // One nanosecond more per period is over the cap.
        let err = hsi
            .create_thread(ms(0), "more", rez, res("1ns", "10ms"))
            .unwrap_err();
        assert!(err.to_string().contains("admission"), "{err}");
    }
}

fn param_key(e: PolicyError) -> String {
    match e {
        PolicyError::Param(p) => p.key,
        other => panic!("expected a parameter error, got {other:?}"),
    }
}

#[test]
fn bad_reservations_are_refused_with_typed_errors() {
    let mut hsi = new_hsi();
    let rez = rez_root(&mut hsi, RezConfig::default());
    let cases: Vec<(Params, &str)> = vec![
        (
            Params::new().with("period", ParamValue::Str("10ms".into())),
            "amount",
        ),
        (
            Params::new().with("amount", ParamValue::Str("1ms".into())),
            "period",
        ),
        (res("-1ms", "10ms"), "amount"),
        (res("1ms", "0ms"), "period"),
        (res("0ms", "10ms"), "amount"),
        (res("11ms", "10ms"), "amount"),
        (res("1", "10ms"), "amount"),
        (
            Params::new()
                .with("amount", ParamValue::Int(3))
                .with("period", ParamValue::Str("10ms".into())),
            "amount",
        ),
    ];
    for (p, key) in cases {
        let err = hsi.create_thread(ms(0), "bad", rez, p.clone()).unwrap_err();
        let HsiError::Op(OpError::Refused { error, .. }) = err else {
            panic!("{p}: {err:?}")
        };
        assert_eq!(param_key(error), key, "{p}");
    }
    assert_eq!(hsi.instance_children(rez).len(), 0);
}

#[test]
fn bad_instance_parameters_are_refused() {
    let p = |k: &str, v: ParamValue| Params::new().with(k, v);
    assert_eq!(
        param_key(
            hsched_policies::build("rez", &p("cap", ParamValue::Float(1.5)))
                .err()
                .unwrap()
        ),
        "cap"
    );
    assert_eq!(
        param_key(
            hsched_policies::build("rez", &p("cap", ParamValue::Int(0)))
                .err()
                .unwrap()
        ),
        "cap"
    );
    assert_eq!(
        param_key(
            hsched_policies::build("rez", &p("cap", ParamValue::Float(-0.5)))
                .err()
                .unwrap()
        ),
        "cap"
    );
    assert_eq!(
        param_key(
            hsched_policies::build("rez", &p("variant", ParamValue::Str("turbo".into())))
                .err()
                .unwrap()
        ),
        "variant"
    );
    assert_eq!(
        param_key(
            hsched_policies::build("rez", &p("gain", ParamValue::Float(0.3)))
                .err()
                .unwrap()
        ),
        "gain"
    );
    let fb = p("variant", ParamValue::Str("feedback".into()));
    assert_eq!(
        param_key(
            hsched_policies::build("rez", &fb.clone().with("gain", ParamValue::Int(2)))
                .err()
                .unwrap()
        ),
        "gain"
    );
    assert!(hsched_policies::build("rez", &fb.with("gain", ParamValue::Float(0.25))).is_ok());
    let ok = hsched_policies::build("rez", &Params::new()).unwrap();
    assert_eq!(ok.policy_name(), "rez");
    assert_eq!(ok.parent_vps(4), 1, "Rez is a uniprocessor scheduler");
}

/// A decrease waits for the child's next period start, and until then
/// the child counts at its old reservation: a refusal in that window says
/// how much of the load is held so (a file checker, which counts the new
/// reservation, cannot foresee it).
#[test]
fn a_refusal_while_a_decrease_is_pending_says_how_much_is_held() {
    let mut hsi = new_hsi();
    let rez = rez_root(&mut hsi, RezConfig::default());
    let a = hsi
        .create_thread(ms(0), "a", rez, res("6ms", "10ms"))
        .unwrap();
    let mut d = Driver::new(hsi);
    d.add(a, Behaviour::CpuBound).unwrap();
    d.run_until(ms(5)).unwrap();
    let smaller = Params::new().with("amount", ParamValue::Str("2ms".into()));
    d.hsi
        .thread_msg(ms(5), a, &Msg::SetParams(smaller))
        .unwrap();
    let err = d
        .hsi
        .create_thread(ms(5), "b", rez, res("6ms", "10ms"))
        .unwrap_err();
    let HsiError::Op(OpError::Refused {
        error: PolicyError::AdmissionRefused { load, held, .. },
        ..
    }) = &err
    else {
        panic!("{err:?}")
    };
    assert!(
        (load - 1.2).abs() < 1e-6 && (held - 0.4).abs() < 1e-6,
        "{err}"
    );
    assert!(
        err.to_string()
            .contains("40.0% of it held until the next period start"),
        "{err}"
    );
    // From a's next period start (10 ms) on, b fits.
    d.run_until(ms(11)).unwrap();
    d.hsi
        .create_thread(ms(11), "b", rez, res("6ms", "10ms"))
        .unwrap();
}

#[test]
fn a_reservation_change_takes_effect_next_period() {
    let mut hsi = new_hsi();
    let rez = rez_root(&mut hsi, RezConfig::default());
    let t = hsi
        .create_thread(ms(0), "t", rez, res("10ms", "33ms"))
        .unwrap();
    let other = hsi
        .create_thread(ms(0), "other", rez, res("5ms", "50ms"))
        .unwrap();
    let mut d = Driver::new(hsi);
    d.add(t, Behaviour::CpuBound).unwrap();
    d.run_until(ms(33)).unwrap();
    assert_eq!(d.hsi.thread_received(t), dur_ms(10));
    d.run_until(ms(40)).unwrap();
    let change = |p: Params| Msg::SetParams(p);
    d.hsi
        .thread_msg(
            ms(40),
            t,
            &change(Params::new().with("amount", ParamValue::Str("20ms".into()))),
        )
        .unwrap();
    assert_eq!(
        d.hsi.vp_info(d.hsi.thread_vp(t)).params,
        res("20ms", "33ms")
    );
    d.run_until(ms(66)).unwrap();
    assert_eq!(
        d.hsi.thread_received(t),
        dur_ms(20),
        "the current period keeps the old amount"
    );
    d.run_until(ms(99)).unwrap();
    assert_eq!(
        d.hsi.thread_received(t),
        dur_ms(40),
        "the next period has the new amount"
    );

    // Beyond the cap: 30/33 + 5/50 > 0.85. Refused, nothing changes.
    let err = d
        .hsi
        .thread_msg(
            ms(99),
            t,
            &change(Params::new().with("amount", ParamValue::Str("30ms".into()))),
        )
        .unwrap_err();
    let HsiError::Op(OpError::Refused {
        error: PolicyError::AdmissionRefused { load, cap, .. },
        ..
    }) = err
    else {
        panic!("{err:?}")
    };
    assert!(
        (load - (30.0 / 33.0 + 0.1)).abs() < 1e-9 && cap == 0.85,
        "load {load}"
    );
    // A bad value and an unknown key are refused too.
    let err = d
        .hsi
        .thread_msg(
            ms(99),
            t,
            &change(Params::new().with("amount", ParamValue::Str("40ms".into()))),
        )
        .unwrap_err();
    assert!(matches!(
        err,
        HsiError::Op(OpError::Refused {
            error: PolicyError::Param(_),
            ..
        })
    ));
    let err = d
        .hsi
        .thread_msg(
            ms(99),
            t,
            &change(Params::new().with("priority", ParamValue::Int(3))),
        )
        .unwrap_err();
    assert!(matches!(
        err,
        HsiError::Op(OpError::Refused {
            error: PolicyError::Unsupported(_),
            ..
        })
    ));
    assert_eq!(
        d.hsi.vp_info(d.hsi.thread_vp(t)).params,
        res("20ms", "33ms")
    );
    d.run_until(ms(132)).unwrap();
    assert_eq!(d.hsi.thread_received(t), dur_ms(60));

    // A period change: 10ms every 20ms from the next period start (132ms).
    d.hsi
        .thread_msg(ms(132), t, &change(res("10ms", "20ms")))
        .unwrap();
    d.run_until(ms(165)).unwrap();
    assert_eq!(
        d.hsi.thread_received(t),
        dur_ms(80),
        "the period [132, 165) still has 20ms"
    );
    d.run_until(ms(185)).unwrap();
    assert_eq!(d.hsi.thread_received(t), dur_ms(90));
    d.run_until(ms(205)).unwrap();
    assert_eq!(d.hsi.thread_received(t), dur_ms(100));
    let _ = other;
}

/// A preemptive fixed-priority test policy on one processor: the ready
/// child with the highest `priority` runs; a higher one preempts.
#[derive(Default)]
struct Prio {
    kids: Vec<(VpId, i64)>,
    ready: Vec<VpId>,
    running: Option<VpId>,
    cpu: Option<CpuId>,
}

impl Prio {
    fn prio(&self, vp: VpId) -> i64 {
        self.kids
            .iter()
            .find(|k| k.0 == vp)
            .map_or(i64::MIN, |k| k.1)
    }

    fn settle(&mut self, ctx: &mut Ctx<'_>) {
        let best = self
            .ready
            .iter()
            .copied()
            .enumerate()
            .max_by_key(|&(i, v)| (self.prio(v), std::cmp::Reverse(i)));
        if let (Some(r), Some((_, b))) = (self.running, best) {
            if self.prio(b) > self.prio(r) {
                ctx.revoke(r, RevokeReason::Preempted);
                self.ready.push(r);
                self.running = None;
            }
        }
        if self.running.is_none() {
            if let Some(cpu) = self.cpu {
                let best = self
                    .ready
                    .iter()
                    .copied()
                    .enumerate()
                    .max_by_key(|&(i, v)| (self.prio(v), std::cmp::Reverse(i)));
                match best {
                    Some((i, vp)) => {
                        self.ready.remove(i);
                        self.running = Some(vp);
                        ctx.grant(vp, cpu);
                    }
                    None => {
                        self.cpu = None;
                        let p = ctx.parent_vps()[0];
                        ctx.release(p);
                    }
                }
            }
        }
        ctx.set_parent_demand(usize::from(
            self.running.is_some() || !self.ready.is_empty(),
        ));
    }
}

impl Policy for Prio {
    fn policy_name(&self) -> &'static str {
        "test-fp"
    }
    fn parent_vps(&self, available: usize) -> usize {
        available.min(1)
    }
    fn register_vp(
        &mut self,
        _: &mut Ctx<'_>,
        vp: VpId,
        params: &Params,
    ) -> Result<(), PolicyError> {
        self.kids.push((vp, params.i64("priority")?.unwrap_or(0)));
        Ok(())
    }
    fn unregister_vp(&mut self, _: &mut Ctx<'_>, vp: VpId) {
        self.kids.retain(|k| k.0 != vp);
    }
    fn request(&mut self, ctx: &mut Ctx<'_>, vp: VpId) {
        self.ready.push(vp);
        self.settle(ctx);
    }
    fn release(&mut self, ctx: &mut Ctx<'_>, vp: VpId) {
        if self.running == Some(vp) {
            self.running = None;
        } else {
            self.ready.retain(|&v| v != vp);
        }
        self.settle(ctx);
    }
    fn grant(&mut self, ctx: &mut Ctx<'_>, _: VpId, cpu: CpuId) {
        self.cpu = Some(cpu);
        self.settle(ctx);
    }
    fn revoke(&mut self, ctx: &mut Ctx<'_>, _: VpId, reason: RevokeReason) {
        self.cpu = None;
        if let Some(r) = self.running.take() {
            ctx.revoke(r, reason);
            self.ready.push(r);
        }
        self.settle(ctx);
    }
}

#[test]
fn under_a_preempting_parent_rez_passes_revocations_on_and_charges_only_granted_time() {
    let mut hsi = new_hsi();
    hsi.set_tracing(true);
    let prio = |p: i64| Params::new().with("priority", ParamValue::Int(p));
    let fp = hsi
        .create_instance(ms(0), "fp", Box::new(Prio::default()), top(&[0]))
        .unwrap();
    let link = ParentLink {
        parent: ParentRef::Instance(fp),
        params: prio(5),
    };
    let rez = hsi
        .create_instance(
            ms(0),
            "rez0",
            Box::new(Rez::new(RezConfig::default())),
            vec![link],
        )
        .unwrap();
    let r = hsi
        .create_thread(ms(0), "r", rez, res("5ms", "20ms"))
        .unwrap();
    let h = hsi.create_thread(ms(0), "h", fp, prio(10)).unwrap();
    let bg = hsi.create_thread(ms(0), "bg", fp, prio(0)).unwrap();
    let mut d = Driver::new(hsi);
    d.add(r, Behaviour::CpuBound).unwrap();
    d.add(bg, Behaviour::CpuBound).unwrap();
    // h preempts r 3 ms into each of r's periods.
    let period = dur_ms(10);
    d.add(
        h,
        Behaviour::Periodic {
            period,
            exec: dur_ms(2),
            offset: dur_ms(3),
        },
    )
    .unwrap();
    let mut last = Duration::ZERO;
    for k in 1..=50u64 {
        d.run_until(ms(20 * k)).unwrap();
        let got = d.hsi.thread_received(r);
        assert_eq!(
            got - last,
            dur_ms(5),
            "period {k}: preemption by h must not be charged to r"
        );
        last = got;
    }
    assert_eq!(d.hsi.thread_received(h), dur_ms(200));
    assert_eq!(
        d.hsi.thread_received(bg),
        dur_ms(1000 - 250 - 200),
        "slack goes to the background thread"
    );
    let (vp_r, vp_rez) = (d.hsi.thread_vp(r), d.hsi.instance_parents(rez)[0]);
    let mut trace = Vec::new();
    d.hsi.drain_trace(&mut trace);
    let count = |who: VpId, why: RevokeReason| {
        trace.iter().filter(|e| matches!(e.kind, TraceKind::Revoke { vp, reason, .. } if vp == who && reason == why)).count()
    };
    assert_eq!(
        count(vp_rez, RevokeReason::Preempted),
        50,
        "fp preempts rez once per period"
    );
    assert_eq!(
        count(vp_r, RevokeReason::Preempted),
        50,
        "rez passes each preemption on, with its reason"
    );
    assert_eq!(count(vp_r, RevokeReason::BudgetExhausted), 50);
}

/// Runs a 10ms/33ms CPU-bound reservation for `periods` periods while 100 µs
/// are stolen every millisecond; returns the net CPU time per period.
fn under_stolen_time(
    cfg: RezConfig,
    periods: u64,
    tracing: bool,
) -> (Vec<Duration>, Vec<TraceEvent>) {
    let mut hsi = new_hsi();
    hsi.set_tracing(tracing);
    let rez = rez_root(&mut hsi, cfg);
    let t = hsi
        .create_thread(ms(0), "t", rez, res("10ms", "33ms"))
        .unwrap();
    let mut d = Driver::new(hsi);
    d.add(t, Behaviour::CpuBound).unwrap();
    d.hsi
        .add_stolen(ms(0), CpuId(0), Duration::from_micros(100));
    let mut out = Vec::new();
    let mut last = Duration::ZERO;
    for step in 1..=33 * periods {
        d.run_until(ms(step)).unwrap();
        if step % 33 == 0 {
            let r = d.hsi.thread_received(t);
            out.push(r - last);
            last = r;
        }
        d.hsi
            .add_stolen(ms(step), CpuId(0), Duration::from_micros(100));
    }
    let mut trace = Vec::new();
    d.hsi.drain_trace(&mut trace);
    (out, trace)
}

#[test]
fn stolen_time_shortchanges_basic_rez_but_not_rez_c() {
    let (basic, _) = under_stolen_time(RezConfig::default(), 20, false);
    let (catch_up, _) = under_stolen_time(
        RezConfig {
            variant: Variant::CatchUp,
            ..RezConfig::default()
        },
        20,
        false,
    );
    for (k, p) in basic.iter().enumerate() {
        assert_eq!(
            *p,
            dur_ms(9),
            "basic Rez, period {k}: 10 ms granted, 1 ms of it stolen"
        );
    }
    for (k, p) in catch_up.iter().enumerate() {
        assert!(
            *p >= dur_ms(10) && *p <= dur_ms(10) + CATCH,
            "Rez-C, period {k}: {p:?}"
        );
    }
}

const CATCH: Duration = Duration::from_micros(1);

#[test]
fn rez_fb_converges_to_the_requested_amount() {
    let cfg = RezConfig {
        variant: Variant::Feedback { gain: 0.5 },
        ..RezConfig::default()
    };
    let (p, _) = under_stolen_time(cfg, 40, false);
    assert_eq!(
        p[0],
        dur_ms(9),
        "the first period is as short as basic Rez's"
    );
    let err = |d: Duration| (d.as_millis_f64() - 10.0).abs();
    assert!(err(p[3]) < err(p[0]) && err(p[3]) < 0.5, "{:?}", &p[..4]);
    for (k, x) in p.iter().enumerate().skip(10) {
        assert!(
            err(*x) <= 0.01,
            "period {k}: {x:?} should be within 0.1% of 10ms"
        );
    }
    let ns: Vec<u64> = p[20..].iter().map(|x| x.as_nanos()).collect();
    assert!(
        ns.iter().all(|&x| x.abs_diff(10_000_000) <= 1_000),
        "within 1 µs: {ns:?}"
    );
}

#[test]
fn rez_fb_holds_the_correction_at_the_cap_and_says_so() {
    // 10/33 = 0.303; the cap leaves room for 0.31 * 33ms = 10.23ms only.
    let cfg = RezConfig {
        cap: 0.31,
        variant: Variant::Feedback { gain: 0.5 },
    };
    let (p, trace) = under_stolen_time(cfg, 10, true);
    assert!(p.iter().all(|x| *x < Duration::from_micros(9_300)), "{p:?}");
    let notes: Vec<&String> = trace
        .iter()
        .filter_map(|e| match &e.kind {
            TraceKind::Policy {
                event: PolicyEvent::Note(n),
                ..
            } => Some(n),
            _ => None,
        })
        .collect();
    assert!(!notes.is_empty());
    assert!(
        notes[0].contains("over its cap of 31.0%") && notes[0].contains("held at 10.23ms"),
        "{}",
        notes[0]
    );
}

#[test]
fn runs_are_deterministic() {
    let cfg = RezConfig {
        variant: Variant::Feedback { gain: 0.5 },
        ..RezConfig::default()
    };
    let (a, ta) = under_stolen_time(cfg, 10, true);
    let (b, tb) = under_stolen_time(cfg, 10, true);
    assert_eq!(a, b);
    assert_eq!(ta, tb);
    assert!(ta.len() > 50);
}

#[test]
fn a_blocked_reservation_resumes_on_its_period_grid() {
    let mut hsi = new_hsi();
    let rez = rez_root(&mut hsi, RezConfig::default());
    let t = hsi
        .create_thread(ms(0), "t", rez, res("4ms", "10ms"))
        .unwrap();
    hsi.wake(ms(0), t).unwrap();
    hsi.block(ms(1), t).unwrap();
    // Same period: 3 ms of budget are left.
    hsi.wake(ms(5), t).unwrap();
    hsi.fire_timers(ms(8)).unwrap();
    assert_eq!(hsi.running(CpuId(0)), None);
    assert_eq!(hsi.thread_received(t), dur_ms(4));
    hsi.block(ms(9), t).unwrap();
    // Woken much later, in the period [1000, 1010): a full budget.
    hsi.wake(ms(1003), t).unwrap();
    hsi.fire_timers(ms(1007)).unwrap();
    assert_eq!(hsi.running(CpuId(0)), None);
    assert_eq!(hsi.thread_received(t), dur_ms(8));
    // The deadline is 1010: replenished then.
    hsi.fire_timers(ms(1010)).unwrap();
    assert_eq!(hsi.running(CpuId(0)), Some(t));
}

#[test]
fn rez_fb_gives_back_its_correction_after_a_burst_of_stolen_time() {
    // A 10 ms / 33 ms reservation; 10% of the processor is stolen during
    // the first second, while the thread wants the processor all the time.
    // Afterwards the thread runs jobs of exactly 10 ms per period and blocks.
    let cfg = RezConfig {
        variant: Variant::Feedback { gain: 0.5 },
        cap: 0.9,
    };
    let mut hsi = new_hsi();
    hsi.set_tracing(true);
    let rez = rez_root(&mut hsi, cfg);
    let t = hsi
        .create_thread(ms(0), "job", rez, res("10ms", "33ms"))
        .unwrap();
    let mut d = Driver::new(hsi);
    d.add(t, Behaviour::CpuBound).unwrap();
    let budgets = |d: &mut Driver| -> Vec<Duration> {
        let mut trace = Vec::new();
        d.hsi.drain_trace(&mut trace);
        trace
            .iter()
            .filter_map(|e| match e.kind {
                TraceKind::Policy {
                    event: PolicyEvent::Replenish { budget, .. },
                    ..
                } => Some(budget),
                _ => None,
            })
            .collect()
    };
    for step in 1..=33 * 30 {
        d.hsi
            .add_stolen(ms(step - 1), CpuId(0), Duration::from_micros(100));
        d.run_until(ms(step)).unwrap();
    }
    let peak = budgets(&mut d).into_iter().max().unwrap();
    assert!(
        peak > dur_ms(10) + Duration::from_micros(800),
        "the correction rises during the burst: {peak:?}"
    );
    for k in 30..90 {
        let start = ms(33 * k);
        d.run_until(start).unwrap();
        d.hsi.wake(start, t).unwrap();
        d.run_until(start + dur_ms(10)).unwrap();
        d.hsi.block(start + dur_ms(10), t).unwrap();
    }
    let last = *budgets(&mut d).last().unwrap();
    assert!(
        last <= dur_ms(10) + Duration::from_micros(10),
        "after the burst the amount returns to the reservation: {last:?} (peak {peak:?})"
    );
}

#[test]
fn the_deadline_shown_for_a_child_is_the_end_of_its_current_period() {
    let mut hsi = new_hsi();
    let rez = rez_root(&mut hsi, RezConfig::default());
    let t = hsi
        .create_thread(ms(0), "t", rez, res("10ms", "33ms"))
        .unwrap();
    let vp = hsi.thread_vp(t);
    assert_eq!(
        hsi.vp_deadline(vp),
        None,
        "no period before the first request"
    );
    let mut d = Driver::new(hsi);
    d.add(t, Behaviour::CpuBound).unwrap();
    d.run_until(ms(5)).unwrap();
    assert_eq!(d.hsi.vp_deadline(vp), Some(ms(33)));
    d.run_until(ms(40)).unwrap();
    assert_eq!(d.hsi.vp_deadline(vp), Some(ms(66)));
    d.run_until(ms(100)).unwrap();
    assert_eq!(d.hsi.vp_deadline(vp), Some(ms(132)));
    // The root's own VP sits under the top scheduler: no deadline there.
    let root_vp = d.hsi.instance_parents(rez)[0];
    assert_eq!(d.hsi.vp_deadline(root_vp), None);
}

/// A child that asks late in its period holds its whole amount with only
/// part of the period left: 8 ms of a 40 ms reservation with 10 ms to its
/// deadline, of which its rate covers 2 ms. The rest must not run ahead of
/// another child's reservation: here audio, 1.2 ms every 5 ms, whose
/// period ends with the late child's. Before this was fixed audio lost
/// that tie (the late child is registered first) and finished 0.4 ms late
/// whenever one of the late child's 70 ms jobs came 30 ms into one of its
/// 40 ms periods, and the backlog made later jobs miss too.
#[test]
fn a_child_that_asks_late_in_its_period_cannot_take_another_reservations_time() {
    let mut hsi = new_hsi();
    hsi.set_tracing(true);
    let rez = rez_root(&mut hsi, RezConfig::default());
    let late = hsi
        .create_thread(ms(0), "late", rez, res("8ms", "40ms"))
        .unwrap();
    let audio = hsi
        .create_thread(ms(0), "audio", rez, res("1.2ms", "5ms"))
        .unwrap();
    let mut d = Driver::new(hsi);
    let periodic = |period: u64, exec: Duration| Behaviour::Periodic {
        period: dur_ms(period),
        exec,
        offset: Duration::ZERO,
    };
    d.add(late, periodic(70, dur_ms(8))).unwrap();
    d.add(audio, periodic(5, Duration::from_micros(1200)))
        .unwrap();
    let hard = [
        common::Hard {
            name: "late",
            vp: d.hsi.thread_vp(late),
            amount: dur_ms(8),
            period: dur_ms(40),
            origin: ms(0),
        },
        common::Hard {
            name: "audio",
            vp: d.hsi.thread_vp(audio),
            amount: Duration::from_micros(1200),
            period: dur_ms(5),
            origin: ms(0),
        },
    ];
    common::run_auditing(&mut d, &hard, dur_ms(5), ms(2800));
    let jobs = d.finishes(audio);
    for &(release, finish) in jobs {
        assert!(
            finish <= release + dur_ms(5),
            "audio's job of {release} finished at {finish}"
        );
    }
    assert_eq!(jobs.len(), 560, "every job released by the end finished");
    // The late child still gets its amount whenever its job is due at a
    // period start, and most of it when not.
    assert!(d.hsi.thread_received(late) >= dur_ms(8 * 36));
}

/// The same through a join, as in a soft reservation built from a hard one
/// and time sharing (Regehr 2001, §6.2.1), on two processors: the join runs
/// its decoder from time sharing (its preferred, last parent) and gives
/// Rez's grants back, until two higher-priority threads take both
/// processors 30 ms into the join's 40 ms period; then it asks Rez with
/// its 8 ms budget untouched and 10 ms to go. Before this was fixed it
/// took 8 of those 10 ms, winning the tie with audio, whose period ends
/// with its own, and audio finished late.
#[test]
fn a_join_that_asks_late_in_its_period_cannot_take_a_hard_reservations_time() {
    let mut hsi = Hsi::new(2);
    hsi.set_checking(true);
    hsi.set_tracing(true);
    let build = |name: &str| hsched_policies::build(name, &Params::new()).unwrap();
    let prio = |p: i64| Params::new().with("priority", ParamValue::Int(p));
    let root = hsi
        .create_instance(ms(0), "root", build("fp"), top(&[0, 1]))
        .unwrap();
    let under = |p: InstanceId, params: Params| {
        vec![ParentLink {
            parent: ParentRef::Instance(p),
            params,
        }]
    };
    let rez = hsi
        .create_instance(
            ms(0),
            "rt",
            Box::new(Rez::new(RezConfig::default())),
            under(root, prio(4)),
        )
        .unwrap();
    let ts = hsi
        .create_instance(ms(0), "fair", build("ts"), under(root, prio(1)))
        .unwrap();
    let parents = vec![
        ParentLink {
            parent: ParentRef::Instance(rez),
            params: res("8ms", "40ms"),
        },
        ParentLink {
            parent: ParentRef::Instance(ts),
            params: Params::new(),
        },
    ];
    let join = hsi
        .create_instance(ms(0), "video", build("join"), parents)
        .unwrap();
    let decoder = hsi
        .create_thread(ms(0), "decoder", join, Params::new())
        .unwrap();
    let audio = hsi
        .create_thread(ms(0), "audio", rez, res("1.2ms", "5ms"))
        .unwrap();
    let g1 = hsi.create_thread(ms(0), "g1", root, prio(3)).unwrap();
    let g2 = hsi.create_thread(ms(0), "g2", root, prio(2)).unwrap();
    let join_vp = vp_under(&hsi, join, rez);
    let mut d = Driver::new(hsi);
    let periodic = |period: u64, exec: Duration, offset: u64| Behaviour::Periodic {
        period: dur_ms(period),
        exec,
        offset: dur_ms(offset),
    };
    d.add(decoder, periodic(40, dur_ms(38), 0)).unwrap();
    d.add(audio, periodic(5, Duration::from_micros(1200), 0))
        .unwrap();
    d.add(g1, periodic(40, dur_ms(5), 30)).unwrap();
    d.add(g2, periodic(40, dur_ms(5), 30)).unwrap();
    let hard = [
        common::Hard {
            name: "video",
            vp: join_vp,
            amount: dur_ms(8),
            period: dur_ms(40),
            origin: ms(0),
        },
        common::Hard {
            name: "audio",
            vp: d.hsi.thread_vp(audio),
            amount: Duration::from_micros(1200),
            period: dur_ms(5),
            origin: ms(0),
        },
    ];
    common::run_auditing(&mut d, &hard, dur_ms(5), ms(1000));
    let jobs = d.finishes(audio);
    for &(release, finish) in jobs {
        assert!(
            finish <= release + dur_ms(5),
            "audio's job of {release} finished at {finish}"
        );
    }
    assert_eq!(jobs.len(), 200, "every job released by the end finished");
}

/// The VP instance `child` registered with `parent`.
fn vp_under(hsi: &Hsi, child: InstanceId, parent: InstanceId) -> VpId {
    hsi.instance_parents(child)
        .iter()
        .copied()
        .find(|&vp| hsi.vp_parent(vp) == Node::Instance(parent))
        .unwrap()
}
