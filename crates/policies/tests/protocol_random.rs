//! Randomized protocol tests (Regehr 2001, §9.4.1): random machines (1 to 17
//! processors), random hierarchies of every registered policy, random
//! threads that wake, block, exit, move, begin and end reservations and
//! change parameters, with the protocol checker on after every input.
//!
//! A failure prints its seed; replay one seed with
//! `HSCHED_SEED=N cargo test -p hsched-policies --test protocol_random`.
//! `HSCHED_SEEDS=N` changes how many seeds run (default 1500);
//! `HSCHED_POLICIES=fp,ts` restricts the mix; `HSCHED_TRACE=1` prints the
//! last events before a failure.

#[path = "common/protocol.rs"]
mod protocol;

use hsched_core::testing::SplitMix as Rng;
use hsched_policies::{registry, PolicyInfo};
use protocol::{random_params, run_seed};

/// The core's minimal FIFO policy joins the mix: it is a correct
/// hierarchical policy too, and keeps the harness itself tested.
static FIFO: PolicyInfo = PolicyInfo {
    summary: "test FIFO",
    ..PolicyInfo::new("fifo", |_| {
        Ok(Box::new(hsched_core::testing::Fifo::default()))
    })
};

/// Policies that build with random parameters (placeholders do not),
/// restricted to `HSCHED_POLICIES=fp,ts,...` when set.
fn usable() -> Vec<&'static PolicyInfo> {
    let mut rng = Rng(1);
    let only = std::env::var("HSCHED_POLICIES").ok();
    registry()
        .iter()
        .chain(std::iter::once(&FIFO))
        .filter(|info| {
            only.as_deref()
                .is_none_or(|o| o.split(',').any(|n| n == info.name))
        })
        .filter(|info| {
            (0..8).any(|_| (info.build)(&random_params(&mut rng, info.instance_params)).is_ok())
        })
        .collect()
}

#[test]
fn random_hierarchies_never_violate_the_protocol() {
    let policies = usable();
    assert!(!policies.is_empty(), "no policy builds");
    let names: Vec<_> = policies.iter().map(|p| p.name).collect();
    protocol::run_seeds(
        &format!("policies {names:?}"),
        "cargo test -p hsched-policies --test protocol_random",
        |seed, steps| run_seed(seed, &policies, steps),
    );
}
