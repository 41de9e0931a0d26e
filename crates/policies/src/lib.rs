//! hsched's scheduling policies. Each file implements one policy of the
//! dissertation (or of a later document, docs/references.md) as a
//! [`hsched_core::Policy`] and opens with its algorithm, parameters,
//! guarantee mapping and the sections it implements.
//! [`registry()`] lists them all; [`build`] makes one from its name and
//! parameters.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod best;
pub mod best_rate;
mod budget;
pub mod coop;
pub mod dl;
pub mod fp;
pub mod join;
pub mod limit;
pub mod linux24;
pub mod ps;
pub mod rate_control;
pub mod realrate;
pub mod registry;
pub mod rez;
mod sfq;
pub mod ts;

pub use registry::{build, lookup, registry, PolicyInfo};
