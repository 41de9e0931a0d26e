//! `hsched check`: parse and validate a hierarchy file.
//!
//! Validation is done by `hsched-config` (syntax, names, parents, cycles,
//! parameters). The guarantee composition (seed 000 ch. 5) plugs in at
//! [`composition`].

use crate::input;
use crate::outcome::Outcome;
use hsched_config::Hierarchy;
use std::io::Write;
use std::path::PathBuf;

/// Long help.
pub const LONG_ABOUT: &str = "\
Parse and validate a hierarchy file: syntax, known keys and policies, every
parent exists, no cycles, parameters of the right type and range. Errors are
printed as FILE:LINE:COL with what was expected and a hint.";

/// Examples shown by `--help`.
pub const EXAMPLES: &str = "\
Examples:
  hsched check examples/home-computer.toml
  for f in examples/*.toml; do hsched check \"$f\" || exit 1; done";

/// Arguments of `hsched check`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The hierarchy file
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    /// Print nothing when the file is valid
    #[arg(short, long)]
    pub quiet: bool,
}

/// A problem found after the file parsed: the hierarchy is well-formed but
/// cannot keep a promise it makes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// The scheduler or thread concerned.
    pub node: String,
    /// What is wrong, for a human.
    pub message: String,
}

/// Validates the file and reports.
///
/// # Errors
/// An invalid file (input error), or stdout closed.
pub fn run(args: &Args) -> anyhow::Result<Outcome> {
    let h = input::load(&args.file)?;
    let problems = composition(&h);
    let mut out = std::io::stdout().lock();
    for p in &problems {
        writeln!(out, "{}: {}: {}", args.file.display(), p.node, p.message)?;
    }
    if !problems.is_empty() {
        return Ok(Outcome::Problems);
    }
    if !args.quiet {
        writeln!(out, "{}: ok ({})", args.file.display(), summary(&h))?;
    }
    Ok(Outcome::Ok)
}

/// Counts, for the one-line verdict.
pub fn summary(h: &Hierarchy) -> String {
    let n = |k: usize, what: &str| format!("{k} {what}{}", if k == 1 { "" } else { "s" });
    let mut parts = vec![
        n(h.machine.cpus, "CPU"),
        n(h.schedulers.len(), "scheduler"),
        n(h.threads.len(), "thread"),
    ];
    if !h.operations.is_empty() {
        parts.push(n(h.operations.len(), "timed operation"));
    }
    if !h.principals.is_empty() {
        parts.push(n(h.principals.len(), "principal"));
    }
    parts.join(", ")
}

/// The guarantee composition check (seed 000 §5.1.2): does every scheduler
/// receive the guarantee it needs to provide the ones it gives? Nothing is
/// checked yet; the analysis fills this in.
pub fn composition(_h: &Hierarchy) -> Vec<Problem> {
    Vec::new()
}
