//! The built-in policies' conformance suite run on plug-ins (issue #36):
//! the random protocol test of crates/policies/tests/protocol_random.rs
//! (Regehr 2001, §9.4.1), with its generator, driver, seeds, steps and
//! protocol checker, over the example plug-ins of sdk/examples. A seed
//! passes when no step breaks the protocol and no plug-in instance
//! faults (a fault would hide a bug behind the fallback).
//!
//! Replay one seed with `HSCHED_SEED=N cargo test -p hsched-plugin --test
//! conformance`; `HSCHED_SEEDS=N` changes how many run (default 1500, as
//! for the built-ins); `HSCHED_POLICIES=fp,edf` restricts the mix.

mod common;
#[path = "../../policies/tests/common/protocol.rs"]
mod protocol;

use hsched_policies::PolicyInfo;

/// The example plug-ins of sdk/examples the suite runs on.
const EXAMPLES: &[&str] = &["fp", "lottery", "stride", "eevdf", "edf", "rescs"];

/// Each example built and registered under its own name; `None` without
/// clang-14 (and not required).
fn plugins() -> Option<Vec<&'static PolicyInfo>> {
    let only = std::env::var("HSCHED_POLICIES").ok();
    let mut out = Vec::new();
    for name in EXAMPLES {
        if only
            .as_deref()
            .is_some_and(|o| !o.split(',').any(|n| n == *name))
        {
            continue;
        }
        let wasm = common::example(name)?;
        let info = hsched_plugin::register(name, &wasm).unwrap_or_else(|e| panic!("{name}: {e}"));
        // The driver keeps `&'static` entries, as `registry()` gives.
        out.push(&*Box::leak(Box::new(info)));
    }
    Some(out)
}

/// Runs `seed`; a protocol violation or a plug-in fault is an error.
fn run(seed: u64, policies: &[&'static PolicyInfo], steps: usize) -> Result<(), String> {
    let before = hsched_plugin::faults().len();
    protocol::run_seed(seed, policies, steps)?;
    let faults = hsched_plugin::faults();
    match faults.get(before..).unwrap_or_default() {
        [] => Ok(()),
        new => Err(format!(
            "plug-in faults: {}",
            new.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; ")
        )),
    }
}

#[test]
fn random_hierarchies_of_plugins_never_violate_the_protocol_or_fault() {
    let Some(policies) = plugins() else { return };
    assert!(!policies.is_empty(), "no plug-in selected");
    let names: Vec<_> = policies.iter().map(|p| p.name).collect();
    protocol::run_seeds(
        &format!("plug-ins {names:?}"),
        "cargo test -p hsched-plugin --test conformance",
        |seed, steps| run(seed, &policies, steps),
    );
}
