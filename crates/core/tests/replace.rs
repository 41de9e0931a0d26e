//! Replacing the policy of a running scheduler (`Hsi::replace`).

use hsched_core::testing::Fifo;
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

/// Fifo that refuses every child with a parameter `refuse`, or every child
/// at all.
struct Picky {
    inner: Fifo,
    all: bool,
}

impl Policy for Picky {
    fn policy_name(&self) -> &'static str {
        "picky"
    }
    fn register_vp(&mut self, c: &mut Ctx<'_>, v: VpId, p: &Params) -> Result<(), PolicyError> {
        if self.all || p.get("refuse").is_some() {
            return Err(PolicyError::Refused("picky refuses this child".into()));
        }
        self.inner.register_vp(c, v, p)
    }
    fn unregister_vp(&mut self, c: &mut Ctx<'_>, v: VpId) {
        self.inner.unregister_vp(c, v)
    }
    fn request(&mut self, c: &mut Ctx<'_>, v: VpId) {
        self.inner.request(c, v)
    }
    fn release(&mut self, c: &mut Ctx<'_>, v: VpId) {
        self.inner.release(c, v)
    }
    fn grant(&mut self, c: &mut Ctx<'_>, v: VpId, cpu: CpuId) {
        self.inner.grant(c, v, cpu)
    }
    fn revoke(&mut self, c: &mut Ctx<'_>, v: VpId, r: RevokeReason) {
        self.inner.revoke(c, v, r)
    }
}

/// root (fifo) on processor 0 with thread `r`, and `plug` below it, the
/// default, with threads a (parameter `refuse`) and b.
fn hierarchy() -> (Hsi, InstanceId, InstanceId, [ThreadId; 3]) {
    let mut hsi = Hsi::new(1);
    hsi.set_checking(true);
    let root = hsi
        .create_instance(ms(0), "root", Box::new(Fifo::default()), top(&[0]))
        .unwrap();
    let plug = hsi
        .create_instance(ms(0), "plug", Box::new(Fifo::default()), under(root))
        .unwrap();
    hsi.set_default(ms(0), plug, false).unwrap();
    let r = hsi.create_thread(ms(0), "r", root, Params::new()).unwrap();
    let mut p = Params::new();
    p.insert("refuse", ParamValue::Int(1));
    let a = hsi.create_thread(ms(0), "a", plug, p).unwrap();
    let b = hsi.create_thread(ms(0), "b", plug, Params::new()).unwrap();
    (hsi, root, plug, [r, a, b])
}

#[test]
fn replacing_keeps_the_name_the_place_the_default_and_the_running_thread() {
    let (mut hsi, root, plug, [r, a, b]) = hierarchy();
    hsi.wake(ms(1), a).unwrap();
    hsi.wake(ms(1), b).unwrap();
    assert_eq!(hsi.running(CpuId(0)), Some(a));
    let new = Box::new(Picky {
        inner: Fifo::default(),
        all: false,
    });
    let done = hsi.replace(ms(2), plug, new).unwrap();
    assert_eq!(done.moved, vec![a, b]);
    assert_eq!(done.reset.len(), 1, "{:?}", done.reset);
    assert_eq!(done.reset[0].0, a);
    assert!(
        done.reset[0].1.contains("picky refuses"),
        "{:?}",
        done.reset
    );
    let now = hsi.instance("plug").expect("the name is kept");
    assert_ne!(now, plug);
    assert_eq!(hsi.instance_policy(now).unwrap().policy_name(), "picky");
    assert_eq!(hsi.default_instance(), Some(now));
    assert_eq!(hsi.thread_parent(a), now);
    assert_eq!(hsi.thread_parent(b), now);
    assert!(hsi.vp_params(hsi.thread_vp(a)).is_empty());
    assert_eq!(hsi.instances().count(), 2);
    assert!(hsi.instances().all(|i| i == root || i == now));
    hsi.check_protocol().unwrap();
    // Both threads are still runnable and scheduled, with r beside them.
    assert!(hsi.running(CpuId(0)).is_some_and(|t| t == a || t == b));
    hsi.wake(ms(3), r).unwrap();
    let first = hsi.running(CpuId(0)).unwrap();
    hsi.block(ms(4), first).unwrap();
    let second = hsi.running(CpuId(0)).unwrap();
    assert!([a, b].contains(&second) && second != first);
    hsi.block(ms(5), second).unwrap();
    assert_eq!(hsi.running(CpuId(0)), Some(r));
    // A thread created later under the name goes to the new policy.
    let c = hsi.create_thread(ms(6), "c", now, Params::new()).unwrap();
    assert_eq!(hsi.thread_parent(c), now);
}

#[test]
fn a_refusal_puts_every_thread_back_and_changes_nothing() {
    let (mut hsi, _, plug, [_, a, b]) = hierarchy();
    hsi.wake(ms(1), b).unwrap();
    let before: Vec<String> = hsi
        .instances()
        .map(|i| hsi.instance_name(i).to_string())
        .collect();
    let new = Box::new(Picky {
        inner: Fifo::default(),
        all: true,
    });
    let e = hsi.replace(ms(2), plug, new).unwrap_err();
    assert!(
        matches!(e, ReplaceError::Refused { ref thread, .. } if thread == "a"),
        "{e}"
    );
    assert!(e.to_string().contains("nothing changed"), "{e}");
    let after: Vec<String> = hsi
        .instances()
        .map(|i| hsi.instance_name(i).to_string())
        .collect();
    assert_eq!(before, after);
    assert_eq!(hsi.instance("plug"), Some(plug));
    assert_eq!(hsi.default_instance(), Some(plug));
    assert_eq!(hsi.thread_parent(a), plug);
    assert_eq!(hsi.thread_parent(b), plug);
    assert_eq!(
        hsi.vp_params(hsi.thread_vp(a)).get("refuse"),
        Some(&ParamValue::Int(1))
    );
    assert_eq!(hsi.running(CpuId(0)), Some(b));
    hsi.check_protocol().unwrap();
}

#[test]
fn roots_and_schedulers_of_schedulers_are_refused_with_the_reason() {
    let (mut hsi, root, plug, _) = hierarchy();
    let e = hsi
        .replace(ms(1), root, Box::new(Fifo::default()))
        .unwrap_err();
    assert!(matches!(e, ReplaceError::Schedulers { .. }), "{e}");
    assert!(e.to_string().contains("plug"), "{e}");
    let _leaf = hsi
        .create_instance(ms(1), "leaf", Box::new(Fifo::default()), under(plug))
        .unwrap();
    let e = hsi
        .replace(ms(1), plug, Box::new(Fifo::default()))
        .unwrap_err();
    assert!(e.to_string().contains("leaf"), "{e}");
    // A root of threads only.
    let mut solo = Hsi::new(1);
    let only = solo
        .create_instance(ms(0), "only", Box::new(Fifo::default()), top(&[0]))
        .unwrap();
    let e = solo
        .replace(ms(1), only, Box::new(Fifo::default()))
        .unwrap_err();
    assert!(matches!(e, ReplaceError::Root { .. }), "{e}");
    assert_eq!(solo.instance("only"), Some(only));
}
