//! What BEST's period detection costs per wake-up (Banachowski 2002, §3.3.3: "BEST
//! incurs some computation overhead every time a process wakes").
//!
//! - `observe/*`: one [`PeriodEstimator::observe`] call, the whole
//!   per-wake-up work of the estimator (tick quantisation, the weighted
//!   average, the clamp, the modulo confidence), on a 33 ms period with a
//!   tick of jitter, on a double wake-up pattern, and on an irregular one.
//! - `confidence`: the modulo confidence alone.
//! - `wake_block/*`: one wake-up and one block of a thread through the HSI
//!   under `best` and under `best-rate` (same EDF machinery, no estimator)
//!   with 8 children, to put the estimator's share of a wake-up in context.

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use hsched_core::{CpuId, Duration, Hsi, Instant, Params, ParentLink, ParentRef};
use hsched_policies::best::{confidence, EstimatorConfig, PeriodEstimator};

/// Wake-up times (ns) of three patterns, 1024 each.
fn patterns() -> Vec<(&'static str, Vec<u64>)> {
    let jitter = [
        0u64, 1_250_000, 300_000, 900_000, 0, 1_250_000, 600_000, 100_000,
    ];
    let periodic: Vec<u64> = (0..1024u64)
        .map(|k| k * 33_000_000 + jitter[k as usize % 8])
        .collect();
    let double: Vec<u64> = (0..1024u64)
        .map(|k| (k / 2) * 41_700_000 + (k % 2) * 400_000)
        .collect();
    // SplitMix64 gaps between 0.1 and 300 ms.
    let mut rng = hsched_core::testing::SplitMix(7);
    let mut t = 0u64;
    let irregular: Vec<u64> = (0..1024)
        .map(|_| {
            t += 100_000 + rng.below(300_000_000);
            t
        })
        .collect();
    vec![
        ("periodic_33ms", periodic),
        ("double_wakeup", double),
        ("irregular", irregular),
    ]
}

fn estimator(c: &mut Criterion) {
    let cfg = EstimatorConfig::default();
    for (name, times) in patterns() {
        c.bench_function(&format!("observe/{name}"), |b| {
            let mut est = PeriodEstimator::new(Duration::ZERO);
            let mut i = 0usize;
            let mut base = 0u64;
            b.iter(|| {
                // Keep time monotonic across passes over the pattern.
                if i == times.len() {
                    i = 0;
                    base += times[times.len() - 1] + 33_000_000;
                }
                let e = est.observe(&cfg, Instant(base + times[i]));
                i += 1;
                black_box(e)
            });
        });
    }
    c.bench_function("confidence", |b| {
        let mut s = 40_000_000u64;
        b.iter(|| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            black_box(confidence(
                Duration(s % 3_000_000_000),
                black_box(Duration(39_843_750)),
            ))
        });
    });
}

fn wake_block(c: &mut Criterion) {
    for policy in ["best", "best-rate"] {
        c.bench_function(&format!("wake_block/{policy}"), |b| {
            let mut hsi = Hsi::new(1);
            hsi.set_checking(false);
            let p = hsched_policies::build(policy, &Params::new()).unwrap();
            let link = ParentLink {
                parent: ParentRef::Top {
                    cpus: vec![CpuId(0)],
                },
                params: Params::new(),
            };
            let r = hsi
                .create_instance(Instant(0), "root", p, vec![link])
                .unwrap();
            let ts: Vec<_> = (0..8)
                .map(|k| {
                    hsi.create_thread(Instant(0), &format!("t{k}"), r, Params::new())
                        .unwrap()
                })
                .collect();
            let mut now = 0u64;
            let mut k = 0usize;
            let mut out = Vec::new();
            b.iter(|| {
                // Each thread wakes every 8 iterations, 1 ms apart: a
                // periodic pattern the estimator locks on to.
                now += 1_000_000;
                let t = ts[k % 8];
                k += 1;
                hsi.wake(Instant(now), t).unwrap();
                hsi.block(Instant(now + 500_000), t).unwrap();
                out.clear();
                hsi.drain_dispatch(&mut out);
                black_box(out.len())
            });
        });
    }
}

criterion_group!(benches, estimator, wake_block);
criterion_main!(benches);
