//! Faults of contained policies and unloading them (`Ctx::fault`,
//! `Policy::unload_on_fault`, `Hsi::unload`).

use hsched_core::testing::{Fifo, Hoarder};
use hsched_core::*;

fn top(cpus: &[u32]) -> Vec<ParentLink> {
    vec![ParentLink {
        parent: ParentRef::Top {
            cpus: cpus.iter().map(|&c| CpuId(c)).collect(),
        },
        params: Params::new(),
    }]
}

fn under(p: InstanceId) -> Vec<ParentLink> {
    vec![ParentLink {
        parent: ParentRef::Instance(p),
        params: Params::new(),
    }]
}

fn ms(x: u64) -> Instant {
    Instant(x * 1_000_000)
}

/// A contained policy: `inner` until its `after`-th request, which it
/// answers with a fault, then nothing at all (as a sandboxed plug-in that
/// trapped).
struct Faulty<P> {
    inner: P,
    after: u32,
    broken: bool,
}

impl<P: Policy> Faulty<P> {
    fn new(inner: P, after: u32) -> Self {
        Faulty {
            inner,
            after,
            broken: false,
        }
    }
}

impl<P: Policy> Policy for Faulty<P> {
    fn policy_name(&self) -> &'static str {
        "faulty"
    }
    fn unload_on_fault(&self) -> bool {
        true
    }
    fn register_vp(
        &mut self,
        ctx: &mut Ctx<'_>,
        vp: VpId,
        params: &Params,
    ) -> Result<(), PolicyError> {
        if self.broken {
            return Ok(());
        }
        self.inner.register_vp(ctx, vp, params)
    }
    fn unregister_vp(&mut self, ctx: &mut Ctx<'_>, vp: VpId) {
        if !self.broken {
            self.inner.unregister_vp(ctx, vp)
        }
    }
    fn request(&mut self, ctx: &mut Ctx<'_>, vp: VpId) {
        if self.broken {
            return;
        }
        self.inner.request(ctx, vp);
        if self.after == 0 {
            self.broken = true;
            ctx.fault("trapped: unreachable");
        } else {
            self.after -= 1;
        }
    }
    fn release(&mut self, ctx: &mut Ctx<'_>, vp: VpId) {
        if !self.broken {
            self.inner.release(ctx, vp)
        }
    }
    fn grant(&mut self, ctx: &mut Ctx<'_>, vp: VpId, cpu: CpuId) {
        if !self.broken {
            self.inner.grant(ctx, vp, cpu)
        }
    }
    fn revoke(&mut self, ctx: &mut Ctx<'_>, vp: VpId, reason: RevokeReason) {
        if !self.broken {
            self.inner.revoke(ctx, vp, reason)
        }
    }
}

/// Hoarder, contained: its protocol violations are faults.
struct ContainedHoarder(Hoarder);

impl Policy for ContainedHoarder {
    fn policy_name(&self) -> &'static str {
        "hoarder"
    }
    fn unload_on_fault(&self) -> bool {
        true
    }
    fn register_vp(&mut self, c: &mut Ctx<'_>, v: VpId, p: &Params) -> Result<(), PolicyError> {
        self.0.register_vp(c, v, p)
    }
    fn unregister_vp(&mut self, c: &mut Ctx<'_>, v: VpId) {
        self.0.unregister_vp(c, v)
    }
    fn request(&mut self, c: &mut Ctx<'_>, v: VpId) {
        self.0.request(c, v)
    }
    fn release(&mut self, c: &mut Ctx<'_>, v: VpId) {
        self.0.release(c, v)
    }
    fn grant(&mut self, c: &mut Ctx<'_>, v: VpId, cpu: CpuId) {
        self.0.grant(c, v, cpu)
    }
    fn revoke(&mut self, c: &mut Ctx<'_>, v: VpId, r: RevokeReason) {
        self.0.revoke(c, v, r)
    }
}

/// root (fifo, the default) on processor 0 with thread `r`, and `plug`
/// below it running `policy` with threads a and b.
fn hierarchy(policy: Box<dyn Policy>) -> (Hsi, InstanceId, [ThreadId; 3]) {
    let mut hsi = Hsi::new(1);
    hsi.set_checking(true);
    let root = hsi
        .create_instance(ms(0), "root", Box::new(Fifo::default()), top(&[0]))
        .unwrap();
    hsi.set_default(ms(0), root, false).unwrap();
    let plug = hsi
        .create_instance(ms(0), "plug", policy, under(root))
        .unwrap();
    let r = hsi.create_thread(ms(0), "r", root, Params::new()).unwrap();
    let a = hsi.create_thread(ms(0), "a", plug, Params::new()).unwrap();
    let b = hsi.create_thread(ms(0), "b", plug, Params::new()).unwrap();
    (hsi, plug, [r, a, b])
}

#[test]
fn a_fault_waits_for_the_caller_and_unloading_moves_the_threads() {
    let (mut hsi, plug, [r, a, b]) = hierarchy(Box::new(Faulty::new(Fifo::default(), 1)));
    hsi.wake(ms(1), a).unwrap();
    assert_eq!(hsi.running(CpuId(0)), Some(a));
    assert!(!hsi.faults_pending());
    // The second request faults: its actions are dropped and the input
    // still succeeds, the protocol checker included.
    hsi.wake(ms(2), b).unwrap();
    assert!(hsi.faults_pending());
    let faults = hsi.take_faults();
    assert_eq!(faults.len(), 1);
    assert_eq!(faults[0].instance, plug);
    assert_eq!(faults[0].name, "plug");
    assert_eq!(faults[0].at, ms(2));
    assert_eq!(faults[0].what, "trapped: unreachable");
    assert!(!hsi.faults_pending());

    let done = hsi.unload(ms(3), plug).unwrap();
    assert_eq!(done.fallback, "root");
    assert_eq!(done.destroyed, vec!["plug".to_string()]);
    assert_eq!(done.moved, vec![a, b]);
    assert!(done.reset.is_empty());
    assert_eq!(hsi.thread_parent(a), hsi.default_instance().unwrap());
    assert_eq!(hsi.thread_parent(b), hsi.default_instance().unwrap());
    assert!(hsi.instance("plug").is_none());
    hsi.check_protocol().unwrap();
    // Both runnable threads are now scheduled by root, and r with them.
    hsi.wake(ms(4), r).unwrap();
    hsi.block(ms(5), a).unwrap();
    assert_eq!(hsi.running(CpuId(0)), Some(b));
    hsi.block(ms(6), b).unwrap();
    assert_eq!(hsi.running(CpuId(0)), Some(r));
    assert!(!hsi.faults_pending());
}

#[test]
fn a_protocol_violation_of_a_contained_policy_is_a_fault_not_an_error() {
    let (mut hsi, plug, [_, a, _]) = hierarchy(Box::new(ContainedHoarder(Hoarder)));
    hsi.wake(ms(1), a).unwrap();
    let faults = hsi.take_faults();
    assert_eq!(faults.len(), 1, "{faults:?}");
    assert!(
        faults[0].what.contains("must immediately grant it"),
        "{}",
        faults[0].what
    );
    hsi.unload(ms(1), plug).unwrap();
    assert_eq!(hsi.running(CpuId(0)), Some(a));
    hsi.check_protocol().unwrap();
}

#[test]
fn the_same_violation_of_a_built_in_policy_stays_an_error() {
    let (mut hsi, _, [_, a, _]) = hierarchy(Box::new(Hoarder));
    assert!(matches!(hsi.wake(ms(1), a), Err(HsiError::Protocol(_))));
    assert!(!hsi.faults_pending());
}

#[test]
fn instances_below_go_too_and_threads_keep_their_parameters() {
    let (mut hsi, plug, [_, a, _]) = hierarchy(Box::new(Faulty::new(Fifo::default(), 0)));
    let inner = hsi
        .create_instance(ms(0), "inner", Box::new(Fifo::default()), under(plug))
        .unwrap();
    let p = Params::new().with("weight", ParamValue::Int(3));
    let c = hsi.create_thread(ms(0), "c", inner, p.clone()).unwrap();
    hsi.wake(ms(1), a).unwrap();
    assert_eq!(hsi.take_faults().len(), 1);
    let done = hsi.unload(ms(1), plug).unwrap();
    assert_eq!(
        done.destroyed,
        vec!["inner".to_string(), "plug".to_string()]
    );
    assert!(done.moved.contains(&c));
    assert_eq!(hsi.vp_params(hsi.thread_vp(c)), &p);
    hsi.wake(ms(2), c).unwrap();
    hsi.check_protocol().unwrap();
}

#[test]
fn without_a_default_the_parent_takes_the_threads() {
    let mut hsi = Hsi::new(1);
    hsi.set_checking(true);
    let root = hsi
        .create_instance(ms(0), "root", Box::new(Fifo::default()), top(&[0]))
        .unwrap();
    let plug = hsi
        .create_instance(
            ms(0),
            "plug",
            Box::new(Faulty::new(Fifo::default(), 0)),
            under(root),
        )
        .unwrap();
    let a = hsi.create_thread(ms(0), "a", plug, Params::new()).unwrap();
    hsi.wake(ms(1), a).unwrap();
    assert_eq!(hsi.take_faults().len(), 1);
    let done = hsi.unload(ms(1), plug).unwrap();
    assert_eq!(done.fallback, "root");
    assert_eq!(hsi.thread_parent(a), root);
    assert_eq!(hsi.running(CpuId(0)), Some(a));
}

#[test]
fn without_a_default_outside_nothing_is_unloaded() {
    let mut hsi = Hsi::new(1);
    let plug = hsi
        .create_instance(
            ms(0),
            "plug",
            Box::new(Faulty::new(Fifo::default(), 0)),
            top(&[0]),
        )
        .unwrap();
    hsi.set_default(ms(0), plug, false).unwrap();
    let a = hsi.create_thread(ms(0), "a", plug, Params::new()).unwrap();
    hsi.wake(ms(1), a).unwrap();
    assert_eq!(hsi.take_faults().len(), 1);
    let e = hsi.unload(ms(1), plug).unwrap_err();
    assert_eq!(
        e.to_string(),
        "neither a default scheduler nor a parent scheduler outside 'plug' and the schedulers below it can take their threads"
    );
    assert!(hsi.instance("plug").is_some());
}
