//! The `hsched` command's verbs as a library: the binary (`main.rs`) parses
//! the command line and calls them, and programs that drive hsched without
//! its command line (the Python package) call them too.
//!
//! [`cmd::analyze::report_json`] is `hsched analyze --json` as data and
//! [`cmd::check::composition`] the problems `hsched check` prints.
#![forbid(unsafe_code)]
#![cfg_attr(not(test), deny(clippy::print_stderr, clippy::print_stdout))]
#![allow(
    rustdoc::broken_intra_doc_links,
    rustdoc::bare_urls,
    rustdoc::private_intra_doc_links
)]

pub mod analysis;
pub mod cmd;
pub mod compare;
pub mod csv;
pub mod input;
pub mod numbers;
pub mod outcome;
pub mod output;
pub mod progress;
