//! The hierarchy file and workload descriptions of hsched.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod model;

pub use model::*;
