//! Placeholder for the `best` policy (being written).

use crate::registry::PolicyInfo;
use hsched_core::{Params, Policy, PolicyError};

/// Registry entry.
pub const INFO: PolicyInfo = PolicyInfo {
    name: "best",
    summary: "",
    seed: "",
    instance_params: &[],
    child_params: &[],
    min_parents: 1,
    max_parents: 1,
    build,
};

fn build(_: &Params) -> Result<Box<dyn Policy>, PolicyError> {
    Err(PolicyError::Unsupported("best is not built yet".into()))
}
