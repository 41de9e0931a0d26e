//! The cost of one Rez timer event (a budget exhaustion or a period start,
//! with the EDF decision that follows) against the number of reservations:
//! 10, 100, 1 000 and 10 000 CPU-bound threads on one processor, with
//! periods from 10 to 100 ms and a total utilization of 0.8.
//!
//! Replenishments sit in a binary heap that knows each child's entry, and
//! eligible children in a vector sorted by deadline (a binary search, then
//! a shift of the entries behind), so the cost should grow with log n,
//! plus a shift that is small next to the rest at these sizes. The
//! protocol checker is off.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use hsched_core::{CpuId, Duration, Hsi, Instant, ParamValue, Params, ParentLink, ParentRef};
use hsched_policies::rez::{Rez, RezConfig};

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
    let rez = hsi
        .create_instance(t0, "rez", Box::new(Rez::new(RezConfig::default())), top)
        .unwrap();
    for i in 0..n {
        let period = Duration::from_millis(10 + (i % 10) as u64 * 10);
        let amount = period.mul_div(8, 10 * n as u64);
        let p = Params::new()
            .with(
                "amount",
                ParamValue::Str(format!("{}ns", amount.as_nanos())),
            )
            .with(
                "period",
                ParamValue::Str(format!("{}ns", period.as_nanos())),
            );
        let t = hsi.create_thread(t0, &format!("t{i}"), rez, p).unwrap();
        hsi.wake(t0, t).unwrap();
    }
    hsi
}

fn event(hsi: &mut Hsi) {
    let at = hsi.next_timer().expect("a budget or period timer is armed");
    hsi.fire_timers(at).unwrap();
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("rez_events");
    for n in SIZES {
        g.bench_with_input(BenchmarkId::new("timer_event", n), &n, |b, &n| {
            let mut hsi = build(n);
            // Warm up through a full longest period so every child is on
            // its grid.
            while hsi.now() < Instant(100_000_000) {
                event(&mut hsi);
            }
            b.iter(|| event(&mut hsi));
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
