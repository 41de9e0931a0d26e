//! hsched core: the hierarchical scheduler infrastructure (HSI).
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod time;

pub use time::{Duration, Instant};
