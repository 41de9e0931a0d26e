//! Behaviour of the HSI itself, with the test policies of `testing`.

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

#[test]
fn two_levels_dispatch_and_release() {
    let mut hsi = Hsi::new(2);
    hsi.set_checking(true);
    let root = hsi
        .create_instance(ms(0), "root", Box::new(Fifo::default()), top(&[0, 1]))
        .unwrap();
    let mid = hsi
        .create_instance(ms(0), "mid", Box::new(Fifo::default()), under(root))
        .unwrap();
    assert_eq!(
        hsi.instance_parents(mid).len(),
        2,
        "a multiprocessor child takes every processor offered"
    );
    let a = hsi.create_thread(ms(0), "a", mid, Params::new()).unwrap();
    let b = hsi.create_thread(ms(0), "b", mid, Params::new()).unwrap();
    let c = hsi.create_thread(ms(0), "c", root, Params::new()).unwrap();
    hsi.wake(ms(1), a).unwrap();
    hsi.wake(ms(1), b).unwrap();
    let running: Vec<_> = (0..2).map(|i| hsi.running(CpuId(i))).collect();
    assert!(running.contains(&Some(a)) && running.contains(&Some(b)));
    hsi.wake(ms(2), c).unwrap();
    // FIFO does not preempt: c waits until a processor frees up.
    assert!(!(0..2).any(|i| hsi.running(CpuId(i)) == Some(c)));
    hsi.block(ms(5), a).unwrap();
    assert!(
        (0..2).any(|i| hsi.running(CpuId(i)) == Some(c)),
        "the freed processor goes to c"
    );
    assert_eq!(hsi.thread_received(a), Duration::from_millis(4));
    let mut changes = Vec::new();
    hsi.drain_dispatch(&mut changes);
    assert!(!changes.is_empty());
    changes.clear();
    hsi.drain_dispatch(&mut changes);
    assert!(changes.is_empty(), "changes are reported once");
}

#[test]
fn hoarding_a_processor_is_a_named_violation() {
    let mut hsi = Hsi::new(1);
    hsi.set_checking(true);
    let root = hsi
        .create_instance(ms(0), "greedy", Box::new(Hoarder), top(&[0]))
        .unwrap();
    let t = hsi.create_thread(ms(0), "t", root, Params::new()).unwrap();
    let err = hsi.wake(ms(1), t).unwrap_err();
    let HsiError::Protocol(v) = err else {
        panic!("expected a protocol violation")
    };
    assert_eq!(v[0].rule, Rule::HeldCpuNotPassedOn);
    assert_eq!(v[0].culprit, "instance 'greedy'");
    assert!(v[0].to_string().contains("must immediately grant"));
}

#[test]
fn operations_refuse_with_typed_errors() {
    let mut hsi = Hsi::new(2);
    let root = hsi
        .create_instance(ms(0), "root", Box::new(Fifo::default()), top(&[0]))
        .unwrap();
    assert_eq!(
        hsi.create_instance(ms(0), "root", Box::new(Fifo::default()), under(root))
            .unwrap_err(),
        HsiError::Op(OpError::NameTaken("root".into()))
    );
    assert_eq!(
        hsi.create_instance(ms(0), "other", Box::new(Fifo::default()), top(&[0]))
            .unwrap_err(),
        HsiError::Op(OpError::CpuUnavailable(CpuId(0)))
    );
    // A second hierarchy on the other processor is fine.
    let other = hsi
        .create_instance(ms(0), "other", Box::new(Fifo::default()), top(&[1]))
        .unwrap();
    let t = hsi.create_thread(ms(0), "t", root, Params::new()).unwrap();
    match hsi.destroy_instance(ms(0), root).unwrap_err() {
        HsiError::Op(OpError::InstanceNotEmpty { name, children }) => {
            assert_eq!((name.as_str(), children), ("root", 1));
        }
        e => panic!("unexpected {e:?}"),
    }
    hsi.wake(ms(1), t).unwrap();
    hsi.move_thread(ms(2), t, other, Params::new()).unwrap();
    assert_eq!(hsi.running(CpuId(1)), Some(t));
    assert_eq!(hsi.running(CpuId(0)), None);
    hsi.exit(ms(3), t).unwrap();
    assert!(hsi.wake(ms(4), t).is_err());
    hsi.destroy_instance(ms(4), root).unwrap();
    assert_eq!(hsi.instance("root"), None);
}

#[test]
fn stolen_time_is_not_received() {
    let mut hsi = Hsi::new(1);
    let root = hsi
        .create_instance(ms(0), "root", Box::new(Fifo::default()), top(&[0]))
        .unwrap();
    let t = hsi.create_thread(ms(0), "t", root, Params::new()).unwrap();
    hsi.wake(ms(0), t).unwrap();
    hsi.add_stolen(ms(5), CpuId(0), Duration::from_millis(2));
    hsi.block(ms(10), t).unwrap();
    assert_eq!(hsi.thread_received(t), Duration::from_millis(8));
    assert_eq!(hsi.instance_supply(root), Duration::from_millis(8));
}

/// Arms its timer for every multiple of 10 ms and counts the callbacks.
#[derive(Default)]
struct Ticker {
    fired: std::sync::Arc<std::sync::atomic::AtomicU32>,
}

impl Policy for Ticker {
    fn policy_name(&self) -> &'static str {
        "ticker"
    }
    fn init(&mut self, ctx: &mut Ctx<'_>) {
        ctx.set_timer(ctx.now() + Duration::from_millis(10));
    }
    fn register_vp(&mut self, _: &mut Ctx<'_>, _: VpId, p: &Params) -> Result<(), PolicyError> {
        p.require_duration("amount")?;
        Ok(())
    }
    fn unregister_vp(&mut self, _: &mut Ctx<'_>, _: VpId) {}
    fn request(&mut self, _: &mut Ctx<'_>, _: VpId) {}
    fn release(&mut self, _: &mut Ctx<'_>, _: VpId) {}
    fn grant(&mut self, ctx: &mut Ctx<'_>, vp: VpId, _: CpuId) {
        ctx.release(vp);
    }
    fn revoke(&mut self, _: &mut Ctx<'_>, _: VpId, _: RevokeReason) {}
    fn timer(&mut self, ctx: &mut Ctx<'_>) {
        self.fired
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        ctx.set_timer(ctx.now() + Duration::from_millis(10));
    }
}

#[test]
fn timers_fire_in_order_and_refusals_change_nothing() {
    let mut hsi = Hsi::new(1);
    let ticker = Ticker::default();
    let fired = ticker.fired.clone();
    let root = hsi
        .create_instance(ms(0), "root", Box::new(ticker), top(&[0]))
        .unwrap();
    assert_eq!(hsi.next_timer(), Some(ms(10)));
    hsi.fire_timers(ms(9)).unwrap();
    assert_eq!(
        fired.load(std::sync::atomic::Ordering::Relaxed),
        0,
        "not early"
    );
    hsi.fire_timers(ms(10)).unwrap();
    assert_eq!(hsi.next_timer(), Some(ms(20)));
    assert_eq!(fired.load(std::sync::atomic::Ordering::Relaxed), 1);
    let err = hsi
        .create_thread(ms(11), "t", root, Params::new())
        .unwrap_err();
    assert!(err.to_string().contains("parameter `amount`"), "{err}");
    assert_eq!(
        hsi.thread_count(),
        0,
        "a refused thread leaves nothing behind"
    );
    let ok = Params::new().with("amount", ParamValue::Str("1ms".into()));
    hsi.create_thread(ms(11), "t", root, ok).unwrap();
}

#[test]
fn driver_runs_periodic_threads_under_fifo() {
    use hsched_core::testing::{Behaviour, Driver};
    let mut hsi = Hsi::new(1);
    hsi.set_checking(true);
    let root = hsi
        .create_instance(ms(0), "root", Box::new(Fifo::default()), top(&[0]))
        .unwrap();
    let p = hsi.create_thread(ms(0), "p", root, Params::new()).unwrap();
    let mut d = Driver::new(hsi);
    d.add(
        p,
        Behaviour::Periodic {
            period: Duration::from_millis(10),
            exec: Duration::from_millis(3),
            offset: Duration::ZERO,
        },
    )
    .unwrap();
    d.run_until(ms(100)).unwrap();
    let f = d.finishes(p);
    assert_eq!(f.len(), 10);
    assert!(f
        .iter()
        .all(|&(r, e)| e.saturating_since(r) == Duration::from_millis(3)));
    assert_eq!(d.hsi.thread_received(p), Duration::from_millis(30));
}

/// Under a parent that offers twelve processors, an instance registers
/// twelve parent VPs, more than the HSI checks grants of by a pass over
/// them (it counts the processors they hold instead). Granted one
/// processor, this policy passes on the processor `offset` places further.
#[derive(Debug)]
struct PassOn {
    offset: u32,
    cpus: u32,
    child: Option<VpId>,
    /// The parent VP holding a processor.
    held: Option<VpId>,
}

impl Policy for PassOn {
    fn policy_name(&self) -> &'static str {
        "pass-on"
    }
    fn register_vp(&mut self, _: &mut Ctx<'_>, vp: VpId, _: &Params) -> Result<(), PolicyError> {
        self.child = Some(vp);
        Ok(())
    }
    fn unregister_vp(&mut self, _: &mut Ctx<'_>, _: VpId) {}
    fn request(&mut self, ctx: &mut Ctx<'_>, _: VpId) {
        ctx.set_parent_demand(1);
    }
    fn release(&mut self, ctx: &mut Ctx<'_>, _: VpId) {
        // Running parent VPs are the policy's to release.
        if let Some(p) = self.held.take() {
            ctx.release(p);
        }
    }
    fn grant(&mut self, ctx: &mut Ctx<'_>, parent_vp: VpId, cpu: CpuId) {
        self.held = Some(parent_vp);
        if let Some(vp) = self.child {
            ctx.grant(vp, CpuId((cpu.0 + self.offset) % self.cpus));
        }
    }
    fn revoke(&mut self, _: &mut Ctx<'_>, _: VpId, _: RevokeReason) {}
}

#[test]
fn a_wide_instance_grants_only_processors_it_holds() {
    let cpus = 12u32;
    for offset in [0, 1, 7] {
        let mut hsi = Hsi::new(cpus as usize);
        hsi.set_checking(true);
        let all: Vec<u32> = (0..cpus).collect();
        let root = hsi
            .create_instance(ms(0), "root", Box::new(Fifo::default()), top(&all))
            .unwrap();
        let policy = PassOn {
            offset,
            cpus,
            child: None,
            held: None,
        };
        let mid = hsi
            .create_instance(ms(0), "mid", Box::new(policy), under(root))
            .unwrap();
        assert_eq!(hsi.instance_parents(mid).len(), cpus as usize);
        let t = hsi.create_thread(ms(0), "t", mid, Params::new()).unwrap();
        let r = hsi.wake(ms(1), t);
        if offset == 0 {
            r.unwrap();
            assert!((0..cpus).any(|c| hsi.running(CpuId(c)) == Some(t)));
            hsi.block(ms(2), t).unwrap();
            assert!((0..cpus).all(|c| hsi.running(CpuId(c)).is_none()));
        } else {
            let Err(HsiError::Protocol(v)) = r else {
                panic!("offset {offset}: expected a protocol violation, got {r:?}")
            };
            assert_eq!(v[0].rule, Rule::CpuNotHeld, "offset {offset}: {v:?}");
            assert_eq!(v[0].culprit, "instance 'mid'");
        }
    }
}
