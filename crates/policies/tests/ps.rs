//! PS: start-time fair queuing with warp (Regehr 2001, §9.3.3) on the core's
//! test driver.

use hsched_core::testing::{Behaviour, Driver};
use hsched_core::*;
use hsched_policies::ps::{Ps, PsConfig};

fn ms(x: u64) -> Instant {
    Instant(x * 1_000_000)
}

fn share(s: f64) -> Params {
    Params::new().with("share", ParamValue::Float(s))
}

fn warped(s: f64, warp: &str) -> Params {
    share(s).with("warp", ParamValue::Str(warp.into()))
}

fn top(cpus: &[u32]) -> Vec<ParentLink> {
    vec![ParentLink {
        parent: ParentRef::Top {
            cpus: cpus.iter().map(|&c| CpuId(c)).collect(),
        },
        params: Params::new(),
    }]
}

fn ps_root(hsi: &mut Hsi, cpus: &[u32]) -> InstanceId {
    hsi.create_instance(
        hsi.now(),
        "ps0",
        Box::new(Ps::new(PsConfig::default())),
        top(cpus),
    )
    .unwrap()
}

fn new_hsi(cpus: usize) -> Hsi {
    let mut hsi = Hsi::new(cpus);
    hsi.set_checking(true);
    hsi
}

/// Asserts `got` is within `tol` (relative) of `want` seconds.
fn near(got: Duration, want: f64, tol: f64, what: &str) {
    let g = got.as_secs_f64();
    assert!(
        (g - want).abs() <= want * tol,
        "{what}: got {g:.4}s, want {want:.4}s ± {:.1}%",
        tol * 100.0
    );
}

#[test]
fn shares_one_two_three_divide_a_cpu() {
    let mut hsi = new_hsi(1);
    let ps = ps_root(&mut hsi, &[0]);
    let ts: Vec<ThreadId> = (1..=3)
        .map(|s| {
            hsi.create_thread(ms(0), &format!("s{s}"), ps, share(s as f64))
                .unwrap()
        })
        .collect();
    let mut d = Driver::new(hsi);
    for &t in &ts {
        d.add(t, Behaviour::CpuBound).unwrap();
    }
    d.run_until(ms(10_000)).unwrap();
    for (i, &t) in ts.iter().enumerate() {
        near(
            d.hsi.thread_received(t),
            10.0 * (i + 1) as f64 / 6.0,
            0.01,
            &format!("share {}", i + 1),
        );
    }
    // Over a short window too: a few quanta of error at most.
    let before: Vec<Duration> = ts.iter().map(|&t| d.hsi.thread_received(t)).collect();
    d.run_until(ms(10_600)).unwrap();
    for (i, &t) in ts.iter().enumerate() {
        let got = d.hsi.thread_received(t) - before[i];
        near(
            got,
            0.6 * (i + 1) as f64 / 6.0,
            0.1,
            &format!("share {} over 600ms", i + 1),
        );
    }
}

#[test]
fn shares_hold_on_two_processors() {
    let mut hsi = new_hsi(2);
    let ps = ps_root(&mut hsi, &[0, 1]);
    assert_eq!(
        hsi.instance_parents(ps).len(),
        2,
        "PS takes every processor offered"
    );
    let shares = [1.0, 1.0, 2.0, 2.0];
    let ts: Vec<ThreadId> = shares
        .iter()
        .enumerate()
        .map(|(i, &s)| {
            hsi.create_thread(ms(0), &format!("t{i}"), ps, share(s))
                .unwrap()
        })
        .collect();
    let mut d = Driver::new(hsi);
    for &t in &ts {
        d.add(t, Behaviour::CpuBound).unwrap();
    }
    d.run_until(ms(10_000)).unwrap();
    let total: f64 = shares.iter().sum();
    for (i, &t) in ts.iter().enumerate() {
        near(
            d.hsi.thread_received(t),
            20.0 * shares[i] / total,
            0.01,
            &format!("t{i} (share {})", shares[i]),
        );
    }
}

#[test]
fn two_processors_with_blocking_threads_keep_the_protocol_and_the_work() {
    let mut hsi = new_hsi(2);
    let ps = ps_root(&mut hsi, &[0, 1]);
    let hogs: Vec<ThreadId> = (0..2)
        .map(|i| {
            hsi.create_thread(ms(0), &format!("hog{i}"), ps, share(1.0))
                .unwrap()
        })
        .collect();
    let periodic: Vec<ThreadId> = (0..4)
        .map(|i| {
            hsi.create_thread(
                ms(0),
                &format!("p{i}"),
                ps,
                warped(1.0 + i as f64, &format!("{}ms", i + 1)),
            )
            .unwrap()
        })
        .collect();
    let mut d = Driver::new(hsi);
    for &t in &hogs {
        d.add(t, Behaviour::CpuBound).unwrap();
    }
    let spec = |i: u64| (7 + 3 * i, 1 + i);
    for (i, &t) in periodic.iter().enumerate() {
        let (period, exec) = spec(i as u64);
        let b = Behaviour::Periodic {
            period: Duration::from_millis(period),
            exec: Duration::from_millis(exec),
            offset: Duration::from_micros(300 * i as u64),
        };
        d.add(t, b).unwrap();
    }
    d.run_until(ms(3_000)).unwrap();
    // Each periodic thread asks for less than its share: it gets all it asks.
    let mut total = Duration::ZERO;
    for (i, &t) in periodic.iter().enumerate() {
        let (period, exec) = spec(i as u64);
        let got = d.hsi.thread_received(t);
        near(
            got,
            3.0 * exec as f64 / period as f64,
            0.03,
            &format!("p{i}"),
        );
        total += got;
    }
    for &t in &hogs {
        total += d.hsi.thread_received(t);
    }
    assert_eq!(total, Duration::from_secs(6), "both processors stay busy");
}

#[test]
fn a_waking_thread_gets_no_credit_for_having_slept() {
    let mut hsi = new_hsi(1);
    let ps = ps_root(&mut hsi, &[0]);
    let a = hsi.create_thread(ms(0), "a", ps, share(1.0)).unwrap();
    let b = hsi.create_thread(ms(0), "b", ps, share(1.0)).unwrap();
    let sleeper = hsi.create_thread(ms(0), "sleeper", ps, share(1.0)).unwrap();
    let mut d = Driver::new(hsi);
    d.add(a, Behaviour::CpuBound).unwrap();
    d.add(b, Behaviour::CpuBound).unwrap();
    d.run_until(ms(5_000)).unwrap();
    assert_eq!(d.hsi.thread_received(sleeper), Duration::ZERO);
    d.add(sleeper, Behaviour::CpuBound).unwrap();
    d.run_until(ms(8_000)).unwrap();
    // Catching up to the system virtual time, the sleeper gets a third of
    // the next 3 s; with 5 s of credit it would have had all of it.
    near(
        d.hsi.thread_received(sleeper),
        1.0,
        0.02,
        "sleeper after waking",
    );
    near(d.hsi.thread_received(a), 2.5 + 1.0, 0.01, "a");
}

/// Mean and max response time of a periodic 1ms/20ms thread among two
/// CPU-bound ones, with the given child parameters.
fn periodic_latency(params: Params) -> (f64, f64) {
    let mut hsi = new_hsi(1);
    let ps = ps_root(&mut hsi, &[0]);
    let a = hsi.create_thread(ms(0), "a", ps, share(1.0)).unwrap();
    let b = hsi.create_thread(ms(0), "b", ps, share(1.0)).unwrap();
    let p = hsi.create_thread(ms(0), "p", ps, params).unwrap();
    let mut d = Driver::new(hsi);
    d.add(a, Behaviour::CpuBound).unwrap();
    d.add(b, Behaviour::CpuBound).unwrap();
    let b = Behaviour::Periodic {
        period: Duration::from_millis(20),
        exec: Duration::from_millis(1),
        offset: Duration::from_millis(5),
    };
    d.add(p, b).unwrap();
    d.run_until(ms(2_000)).unwrap();
    let lat: Vec<f64> = d
        .finishes(p)
        .iter()
        .map(|&(r, f)| f.saturating_since(r).as_millis_f64())
        .collect();
    assert!(lat.len() >= 95, "{} jobs", lat.len());
    (
        lat.iter().sum::<f64>() / lat.len() as f64,
        lat.iter().cloned().fold(0.0, f64::max),
    )
}

#[test]
fn warp_lowers_the_dispatch_latency_of_a_periodic_thread() {
    let (plain_mean, plain_max) = periodic_latency(share(1.0));
    let (warp_mean, warp_max) = periodic_latency(warped(1.0, "20ms"));
    assert!(
        plain_mean > 3.0,
        "without warp a job waits for the running quantum: mean {plain_mean}ms"
    );
    assert!(plain_max > 5.0, "max {plain_max}ms");
    assert_eq!(
        warp_max, 1.0,
        "with warp every job runs at once (mean {warp_mean}ms)"
    );
}

#[test]
fn share_and_warp_change_at_run_time() {
    let mut hsi = new_hsi(1);
    let ps = ps_root(&mut hsi, &[0]);
    let a = hsi.create_thread(ms(0), "a", ps, share(1.0)).unwrap();
    let b = hsi.create_thread(ms(0), "b", ps, share(1.0)).unwrap();
    let p = hsi.create_thread(ms(0), "p", ps, share(1.0)).unwrap();
    let mut d = Driver::new(hsi);
    d.add(a, Behaviour::CpuBound).unwrap();
    d.add(b, Behaviour::CpuBound).unwrap();
    let per = Behaviour::Periodic {
        period: Duration::from_millis(20),
        exec: Duration::from_millis(1),
        offset: Duration::from_millis(5),
    };
    d.add(p, per).unwrap();
    d.run_until(ms(5_000)).unwrap();
    near(d.hsi.thread_received(a), 2.375, 0.01, "a before");
    let set = |p: Params| Msg::SetParams(p);
    d.hsi
        .thread_msg(
            ms(5_000),
            a,
            &set(Params::new().with("share", ParamValue::Int(3))),
        )
        .unwrap();
    d.hsi
        .thread_msg(
            ms(5_000),
            p,
            &set(Params::new().with("warp", ParamValue::Str("30ms".into()))),
        )
        .unwrap();
    assert_eq!(
        d.hsi.vp_info(d.hsi.thread_vp(a)).params,
        share(1.0).with("share", ParamValue::Int(3))
    );
    let (ra, rb, jobs) = (
        d.hsi.thread_received(a),
        d.hsi.thread_received(b),
        d.finishes(p).len(),
    );
    d.run_until(ms(10_000)).unwrap();
    near(
        d.hsi.thread_received(a) - ra,
        4.75 * 0.75,
        0.01,
        "a with share 3",
    );
    near(d.hsi.thread_received(b) - rb, 4.75 * 0.25, 0.01, "b");
    let late = d.finishes(p)[jobs + 1..]
        .iter()
        .map(|&(r, f)| f.saturating_since(r))
        .max()
        .unwrap();
    assert_eq!(late, Duration::from_millis(1), "warped jobs run at once");
    // Bad changes are refused and change nothing.
    let err = d
        .hsi
        .thread_msg(
            ms(10_000),
            a,
            &set(Params::new().with("share", ParamValue::Int(0))),
        )
        .unwrap_err();
    assert!(
        matches!(
            err,
            HsiError::Op(OpError::Refused {
                error: PolicyError::Param(_),
                ..
            })
        ),
        "{err:?}"
    );
    let err = d
        .hsi
        .thread_msg(
            ms(10_000),
            a,
            &set(Params::new().with("shares", ParamValue::Int(2))),
        )
        .unwrap_err();
    assert!(
        matches!(
            err,
            HsiError::Op(OpError::Refused {
                error: PolicyError::Unsupported(_),
                ..
            })
        ),
        "{err:?}"
    );
    assert_eq!(
        d.hsi.vp_info(d.hsi.thread_vp(a)).params,
        share(1.0).with("share", ParamValue::Int(3))
    );
}

#[test]
fn nested_ps_under_ps() {
    let mut hsi = new_hsi(1);
    let outer = ps_root(&mut hsi, &[0]);
    let link = ParentLink {
        parent: ParentRef::Instance(outer),
        params: share(1.0),
    };
    let cfg = PsConfig {
        quantum: Duration::from_millis(4),
    };
    let inner = hsi
        .create_instance(ms(0), "inner", Box::new(Ps::new(cfg)), vec![link])
        .unwrap();
    let x = hsi.create_thread(ms(0), "x", outer, share(1.0)).unwrap();
    let y = hsi.create_thread(ms(0), "y", inner, share(1.0)).unwrap();
    let z = hsi.create_thread(ms(0), "z", inner, share(3.0)).unwrap();
    let mut d = Driver::new(hsi);
    for t in [x, y, z] {
        d.add(t, Behaviour::CpuBound).unwrap();
    }
    d.run_until(ms(10_000)).unwrap();
    near(d.hsi.thread_received(x), 5.0, 0.01, "x");
    near(d.hsi.thread_received(y), 1.25, 0.01, "y");
    near(d.hsi.thread_received(z), 3.75, 0.01, "z");
    near(d.hsi.instance_supply(inner), 5.0, 0.01, "inner");
}

#[test]
fn a_multiprocessor_ps_under_ps_on_two_cpus() {
    let mut hsi = new_hsi(2);
    let outer = ps_root(&mut hsi, &[0, 1]);
    // The inner instance registers one VP per processor, each with the
    // link's share: 1.5 + 1.5 against x's 1.
    let link = ParentLink {
        parent: ParentRef::Instance(outer),
        params: share(1.5),
    };
    let inner = hsi
        .create_instance(
            ms(0),
            "inner",
            Box::new(Ps::new(PsConfig::default())),
            vec![link],
        )
        .unwrap();
    assert_eq!(hsi.instance_parents(inner).len(), 2);
    let x = hsi.create_thread(ms(0), "x", outer, share(1.0)).unwrap();
    let ys: Vec<ThreadId> = (0..3)
        .map(|i| {
            hsi.create_thread(ms(0), &format!("y{i}"), inner, share(1.0))
                .unwrap()
        })
        .collect();
    let mut d = Driver::new(hsi);
    d.add(x, Behaviour::CpuBound).unwrap();
    for &y in &ys {
        d.add(y, Behaviour::CpuBound).unwrap();
    }
    d.run_until(ms(6_000)).unwrap();
    // 12 CPU-seconds: x has a quarter, the inner instance three quarters,
    // split evenly among its three threads.
    let total: Duration = ys
        .iter()
        .map(|&y| d.hsi.thread_received(y))
        .fold(d.hsi.thread_received(x), |a, b| a + b);
    near(total, 12.0, 0.001, "both processors busy");
    near(d.hsi.thread_received(x), 3.0, 0.02, "x");
    for &y in &ys {
        near(d.hsi.thread_received(y), 3.0, 0.02, "a y");
    }
}

fn param_key(e: PolicyError) -> String {
    match e {
        PolicyError::Param(p) => p.key,
        other => panic!("expected a parameter error, got {other:?}"),
    }
}

#[test]
fn bad_parameters_are_refused_with_typed_errors() {
    let mut hsi = new_hsi(1);
    let ps = ps_root(&mut hsi, &[0]);
    let cases: Vec<(Params, &str)> = vec![
        (share(0.0), "share"),
        (share(-2.0), "share"),
        (share(0.0001), "share"),
        (
            Params::new().with("share", ParamValue::Str("lots".into())),
            "share",
        ),
        (
            Params::new().with("warp", ParamValue::Str("-1ms".into())),
            "warp",
        ),
        (Params::new().with("warp", ParamValue::Int(5)), "warp"),
    ];
    for (p, key) in cases {
        let err = hsi.create_thread(ms(0), "bad", ps, p.clone()).unwrap_err();
        let HsiError::Op(OpError::Refused { error, .. }) = err else {
            panic!("{p}: {err:?}")
        };
        assert_eq!(param_key(error), key, "{p}");
    }
    assert!(hsi.instance_children(ps).is_empty());
    hsi.create_thread(ms(0), "default", ps, Params::new())
        .unwrap();
    let q = |v: ParamValue| Params::new().with("quantum", v);
    assert_eq!(
        param_key(
            hsched_policies::build("ps", &q(ParamValue::Str("0ms".into())))
                .err()
                .unwrap()
        ),
        "quantum"
    );
    assert_eq!(
        param_key(
            hsched_policies::build("ps", &q(ParamValue::Int(10)))
                .err()
                .unwrap()
        ),
        "quantum"
    );
    assert!(hsched_policies::build("ps", &q(ParamValue::Str("4ms".into()))).is_ok());
}

fn mixed_trace() -> Vec<TraceEvent> {
    let mut hsi = new_hsi(2);
    hsi.set_tracing(true);
    let ps = ps_root(&mut hsi, &[0, 1]);
    let mut d = {
        let ts: Vec<(ThreadId, Behaviour)> = (0..6u64)
            .map(|i| {
                let t = hsi
                    .create_thread(
                        ms(0),
                        &format!("t{i}"),
                        ps,
                        warped(1.0 + (i % 3) as f64, &format!("{}ms", i % 2)),
                    )
                    .unwrap();
                let b = if i < 2 {
                    Behaviour::CpuBound
                } else {
                    Behaviour::Periodic {
                        period: Duration::from_millis(5 * i),
                        exec: Duration::from_millis(i),
                        offset: Duration::from_millis(i),
                    }
                };
                (t, b)
            })
            .collect();
        let mut d = Driver::new(hsi);
        for (t, b) in ts {
            d.add(t, b).unwrap();
        }
        d
    };
    d.run_until(ms(500)).unwrap();
    let mut trace = Vec::new();
    d.hsi.drain_trace(&mut trace);
    trace
}

#[test]
fn runs_are_deterministic() {
    let a = mixed_trace();
    assert!(a.len() > 200);
    assert_eq!(a, mixed_trace());
}

/// A multiprocessor child that, whenever it loses a processor, also gives
/// back its other pending requests at once (legal, if unhelpful), and asks
/// again when it is granted one: FIFO otherwise.
#[derive(Default)]
struct Shy(hsched_core::testing::Fifo);

impl Shy {
    fn demand(ctx: &Ctx<'_>) -> usize {
        ctx.child_vps()
            .iter()
            .filter(|&&v| ctx.vp_state(v) != VpState::Waiting)
            .count()
    }
}

impl Policy for Shy {
    fn policy_name(&self) -> &'static str {
        "shy"
    }
    fn register_vp(&mut self, ctx: &mut Ctx<'_>, vp: VpId, p: &Params) -> Result<(), PolicyError> {
        self.0.register_vp(ctx, vp, p)
    }
    fn unregister_vp(&mut self, ctx: &mut Ctx<'_>, vp: VpId) {
        self.0.unregister_vp(ctx, vp)
    }
    fn request(&mut self, ctx: &mut Ctx<'_>, vp: VpId) {
        self.0.request(ctx, vp)
    }
    fn release(&mut self, ctx: &mut Ctx<'_>, vp: VpId) {
        self.0.release(ctx, vp)
    }
    fn grant(&mut self, ctx: &mut Ctx<'_>, parent_vp: VpId, cpu: CpuId) {
        self.0.grant(ctx, parent_vp, cpu);
        ctx.set_parent_demand(Self::demand(ctx));
    }
    fn revoke(&mut self, ctx: &mut Ctx<'_>, parent_vp: VpId, reason: RevokeReason) {
        self.0.revoke(ctx, parent_vp, reason);
        for k in 0..ctx.parent_vps().len() {
            let p = ctx.parent_vps()[k];
            if p != parent_vp && ctx.vp_state(p) == VpState::Ready {
                ctx.release(p);
            }
        }
    }
}

#[test]
fn a_child_instance_losing_one_processor_never_gets_another_in_the_same_step() {
    // When the root revokes one of the shy instance's VPs at a quantum end,
    // the instance releases its other, ready VP before the root's next
    // action is applied. The root must not have chosen that VP for the
    // processor (the checker would see a grant to a waiting VP).
    let mut hsi = new_hsi(2);
    let cfg = PsConfig {
        quantum: Duration::from_millis(3),
    };
    let root = hsi
        .create_instance(ms(0), "root", Box::new(Ps::new(cfg)), top(&[0, 1]))
        .unwrap();
    let link = ParentLink {
        parent: ParentRef::Instance(root),
        params: share(1.0),
    };
    let shy = hsi
        .create_instance(ms(0), "shy", Box::new(Shy::default()), vec![link])
        .unwrap();
    assert_eq!(hsi.instance_parents(shy).len(), 2);
    let xs: Vec<ThreadId> = (0..2)
        .map(|i| {
            hsi.create_thread(ms(0), &format!("x{i}"), root, share(1.0))
                .unwrap()
        })
        .collect();
    let ys: Vec<ThreadId> = (0..2)
        .map(|i| {
            hsi.create_thread(ms(0), &format!("y{i}"), shy, Params::new())
                .unwrap()
        })
        .collect();
    let mut d = Driver::new(hsi);
    for &t in xs.iter().chain(&ys) {
        d.add(t, Behaviour::CpuBound).unwrap();
    }
    d.run_until(ms(2_000)).unwrap();
    let total = xs
        .iter()
        .chain(&ys)
        .fold(Duration::ZERO, |a, &t| a + d.hsi.thread_received(t));
    assert_eq!(total, Duration::from_secs(4), "both processors stay busy");
    for &x in &xs {
        assert!(
            d.hsi.thread_received(x) >= Duration::from_millis(900),
            "x gets its share"
        );
    }
}
