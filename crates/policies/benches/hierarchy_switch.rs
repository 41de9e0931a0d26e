//! The cost of one context switch made through the hierarchy, at depths
//! 1, 2, 4, 8 and 16 (the shape of Regehr 2001, Fig 10.2 / 10.3).
//!
//! A root TS instance time-slices between two chains of `depth - 1`
//! single-child TS instances, each ending in a CPU-bound thread. One
//! iteration is one quantum expiry at the root: the revocation travels
//! down one chain, the release of the old VP is not needed (revoked VPs stay
//! ready), and the grant travels down the other chain to the other thread.
//! The inner instances have a quantum of an hour so only the root switches.
//! The protocol checker is off (release builds); `checker_on` measures its
//! cost on the same hierarchy.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use hsched_core::{CpuId, Hsi, InstanceId, Instant, ParamValue, Params, ParentLink, ParentRef};

fn ts(quantum: &str) -> Box<dyn hsched_core::Policy> {
    let p = Params::new().with("quantum", ParamValue::Str(quantum.into()));
    hsched_policies::build("ts", &p).expect("ts builds")
}

fn under(p: InstanceId) -> Vec<ParentLink> {
    vec![ParentLink {
        parent: ParentRef::Instance(p),
        params: Params::new(),
    }]
}

/// Builds the Fig 10.2 hierarchy of the given depth with both threads awake.
fn build(depth: usize, checking: bool) -> Hsi {
    let mut hsi = Hsi::new(1);
    hsi.set_checking(checking);
    let t0 = Instant(0);
    let top = vec![ParentLink {
        parent: ParentRef::Top {
            cpus: vec![CpuId(0)],
        },
        params: Params::new(),
    }];
    let root = hsi.create_instance(t0, "ts1", ts("1ms"), top).unwrap();
    for chain in 0..2 {
        let mut parent = root;
        for level in 1..depth {
            parent = hsi
                .create_instance(t0, &format!("c{chain}-{level}"), ts("3600s"), under(parent))
                .unwrap();
        }
        let t = hsi
            .create_thread(t0, &format!("t{chain}"), parent, Params::new())
            .unwrap();
        hsi.wake(t0, t).unwrap();
    }
    hsi
}

fn switch(hsi: &mut Hsi, out: &mut Vec<(CpuId, Option<hsched_core::ThreadId>)>) {
    let at = hsi.next_timer().expect("the root's quantum timer is armed");
    hsi.fire_timers(at).unwrap();
    out.clear();
    hsi.drain_dispatch(out);
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("hierarchy_switch");
    for depth in [1usize, 2, 4, 8, 16] {
        g.bench_with_input(BenchmarkId::new("checker_off", depth), &depth, |b, &d| {
            let mut hsi = build(d, false);
            let mut out = Vec::new();
            // Each quantum expiry really switches threads.
            let before = hsi.running(CpuId(0));
            switch(&mut hsi, &mut out);
            assert_ne!(
                hsi.running(CpuId(0)),
                before,
                "depth {d}: the root did not switch"
            );
            assert!(hsi.running(CpuId(0)).is_some());
            b.iter(|| switch(&mut hsi, &mut out));
        });
    }
    for depth in [1usize, 4, 16] {
        g.bench_with_input(BenchmarkId::new("checker_on", depth), &depth, |b, &d| {
            let mut hsi = build(d, true);
            let mut out = Vec::new();
            b.iter(|| switch(&mut hsi, &mut out));
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
