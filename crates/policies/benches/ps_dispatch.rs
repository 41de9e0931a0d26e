//! The cost of a PS (SFQ with warp) dispatch decision against the number of
//! children: 10, 100, 1 000 and 10 000 CPU-bound threads on one processor.
//!
//! - `quantum_expiry`: one iteration is one quantum expiry: the running
//!   child is charged and re-queued, the smallest key is taken off the
//!   queue, and the processor moves to it (revoke + grant through the HSI).
//! - `block_wake`: the running child blocks (the processor goes to the next
//!   child) and wakes again (it catches up to the system virtual time and is
//!   queued).
//!
//! Both touch two ordered maps, so the cost should grow with log n; the
//! dissertation's implementation scanned every child (§9.3.3). Shares vary
//! (1 to 7) so keys spread; the protocol checker is off.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use hsched_core::{
    CpuId, Duration, Hsi, Instant, ParamValue, Params, ParentLink, ParentRef, ThreadId,
};
use hsched_policies::ps::{Ps, PsConfig};

const SIZES: [usize; 4] = [10, 100, 1_000, 10_000];

fn build(n: usize) -> Hsi {
    let mut hsi = Hsi::new(1);
    hsi.set_checking(false);
    let t0 = Instant(0);
    let top = vec![ParentLink {
        parent: ParentRef::Top {
            cpus: vec![CpuId(0)],
        },
        params: Params::new(),
    }];
    let cfg = PsConfig {
        quantum: Duration::from_millis(1),
    };
    let ps = hsi
        .create_instance(t0, "ps", Box::new(Ps::new(cfg)), top)
        .unwrap();
    for i in 0..n {
        let p = Params::new().with("share", ParamValue::Int(1 + (i % 7) as i64));
        let t = hsi.create_thread(t0, &format!("t{i}"), ps, p).unwrap();
        hsi.wake(t0, t).unwrap();
    }
    // Run every child once so the keys spread out.
    for _ in 0..n {
        expire(&mut hsi);
    }
    hsi
}

fn expire(hsi: &mut Hsi) {
    let at = hsi.next_timer().expect("the quantum timer is armed");
    hsi.fire_timers(at).unwrap();
}

fn block_wake(hsi: &mut Hsi, now: &mut Instant) {
    *now += Duration::from_micros(50);
    let t: ThreadId = hsi.running(CpuId(0)).expect("a child runs");
    hsi.block(*now, t).unwrap();
    hsi.wake(*now, t).unwrap();
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("ps_dispatch");
    for n in SIZES {
        g.bench_with_input(BenchmarkId::new("quantum_expiry", n), &n, |b, &n| {
            let mut hsi = build(n);
            let before = hsi.running(CpuId(0));
            expire(&mut hsi);
            assert_ne!(
                hsi.running(CpuId(0)),
                before,
                "a quantum expiry switches children"
            );
            b.iter(|| expire(&mut hsi));
        });
        g.bench_with_input(BenchmarkId::new("block_wake", n), &n, |b, &n| {
            let mut hsi = build(n);
            let mut now = hsi.now();
            b.iter(|| block_wake(&mut hsi, &mut now));
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
