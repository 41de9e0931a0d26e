//! Placeholder for the `best_rate` policy (being written).

use crate::registry::PolicyInfo;
use hsched_core::{Params, Policy, PolicyError};

/// Registry entry.
pub const INFO: PolicyInfo = PolicyInfo {
    name: "best-rate",
    summary: "",
    seed: "",
    instance_params: &[],
    child_params: &[],
    min_parents: 1,
    max_parents: 1,
    build,
};

fn build(_: &Params) -> Result<Box<dyn Policy>, PolicyError> {
    Err(PolicyError::Unsupported("best_rate is not built yet".into()))
}
