//! Helpers shared by the integration tests: a seeded generator (SplitMix64)
//! and parsing shorthands.
#![allow(dead_code)]

use hsched_guarantee::{Duration, Guarantee, GuaranteeKind};

pub use hsched_core::testing::SplitMix as Rng;

/// A generator seeded from `HSCHED_SEED` (to replay a failure) or `default`.
pub fn rng_from_env(default: u64) -> Rng {
    let seed = std::env::var("HSCHED_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default);
    eprintln!("seed {seed} (replay: HSCHED_SEED={seed} cargo test -p hsched-guarantee)");
    Rng(seed)
}

pub fn g(s: &str) -> Guarantee {
    s.parse().unwrap_or_else(|e| panic!("{s}: {e}"))
}

pub fn ms(v: f64) -> Duration {
    Duration::from_millis_f64(v)
}

/// A random valid guarantee of `kind`, times in whole microseconds up to
/// 100 ms, shares in thousandths.
pub fn random_guarantee(rng: &mut Rng, kind: GuaranteeKind) -> Guarantee {
    let us = Duration::from_micros;
    let period = us(rng.range(10, 100_000));
    let amount = Duration::from_nanos(period.as_nanos() / 1000 * rng.range(1, 1000));
    let share = rng.range(1, 1000) as f64 / 1000.0;
    match kind {
        GuaranteeKind::All => Guarantee::All,
        GuaranteeKind::Null => Guarantee::Null,
        GuaranteeKind::ResU => Guarantee::ResU { rate: share },
        GuaranteeKind::Ps => Guarantee::Ps { share },
        GuaranteeKind::Psbe => Guarantee::Psbe {
            share,
            error: us(rng.range(0, 100_000)),
        },
        GuaranteeKind::ResPS => Guarantee::ResPS {
            amount,
            period,
            overrun: us(rng.range(0, 10_000)),
        },
        GuaranteeKind::ResSH => Guarantee::ResSH {
            amount,
            period,
            sync: us(rng.range(0, 10_000)),
        },
        k => Guarantee::reservation(k, amount, period).expect("valid"),
    }
}
