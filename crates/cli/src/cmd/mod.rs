//! One module per verb. Each has `Args` (its clap arguments), `LONG_ABOUT`
//! and `EXAMPLES` (its help text) and `run`, which returns an
//! [`Outcome`](crate::outcome::Outcome) or an error (input errors are
//! [`InputError`](crate::outcome::InputError)s).
//!
//! To add a verb (`analyze`, `run`, `ctl`): write `cmd/VERB.rs` with those
//! four items, declare it here, and add one variant to `Command` in
//! `main.rs`.

pub mod analyze;
pub mod check;
pub mod ctl;
pub mod generate;
pub mod import;
pub mod policies;
pub mod record;
pub mod run;
pub mod sim;
pub mod stolen;
pub mod tree;
