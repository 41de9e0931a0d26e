//! `hsched check`: parse and validate a hierarchy file, then check that it
//! keeps its promises.
//!
//! Validation is done by `hsched-config` (syntax, names, parents, cycles,
//! parameters). The guarantee composition (Regehr 2001, §5.1.2, ch. 5) is
//! [`composition`]: every instance must receive a guarantee its policy can
//! use and every thread or instance that states a `guarantee` must receive
//! one that converts into it.

use crate::analysis;
use crate::input;
use crate::outcome::Outcome;
use hsched_config::{Hierarchy, Span};
use std::io::Write;
use std::path::PathBuf;

/// Long help.
pub const LONG_ABOUT: &str = "\
Parse and validate a hierarchy file: syntax, known keys and policies, every
parent exists, no cycles, parameters of the right type and range. Errors are
printed as FILE:LINE:COL with what was expected and a hint (exit status 2).

Then check the guarantees (Regehr 2001, ch. 5): starting from the top, which
gives ALL on each processor, every scheduler instance must receive a
guarantee its policy can use (directly or through the conversions of Table
5.2), and every thread or instance with a `guarantee = \"...\"` must receive
one that provides it. Each problem names the node, what it receives, what
would be acceptable, why not, and the path from the top (exit status 1).
`hsched tree` shows every node's guarantee; `hsched analyze` the admission
headroom and the reservations of rate-monotonic applications.";

/// Examples shown by `--help`.
pub const EXAMPLES: &str = "\
Examples:
  hsched check examples/home-computer.toml
  hsched check --quiet examples/overview.toml && echo composes
  hsched check --enforce kernel examples/frame-renderer.toml
  for f in examples/*.toml; do hsched check \"$f\" || exit 1; done";

/// Arguments of `hsched check`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The hierarchy file
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    /// An rt-app JSON file whose tasks replace those the hierarchy file
    /// names, as `hsched sim --workload` takes them
    #[arg(long, value_name = "RTAPP.json")]
    pub workload: Option<PathBuf>,
    /// Print nothing when the file is valid
    #[arg(short, long)]
    pub quiet: bool,
    /// `kernel`: check the hierarchy as the kernel backend of `hsched run
    /// --enforce kernel` would enforce it on this machine: the mapping of
    /// every node and the guarantees the kernel's enforcement gives
    /// (docs/kernel-backend.md)
    #[arg(long, value_name = "BACKEND", value_parser = ["kernel", "user"])]
    pub enforce: Option<String>,
}

/// A problem found after the file parsed: the hierarchy is well-formed but
/// cannot keep a promise it makes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// Where the node concerned is declared.
    pub span: Option<Span>,
    /// What is wrong: a headline and details.
    pub finding: analysis::Finding,
}

/// Validates the file and reports.
///
/// # Errors
/// An invalid file (input error), or stdout closed.
pub fn run(args: &Args) -> anyhow::Result<Outcome> {
    let h = input::load_with(&args.file, args.workload.as_deref())?;
    input::check_rtapp_attached(&h)?;
    if args.enforce.as_deref() == Some("kernel") {
        let plan = hsched_linux::kernel::show::plan_here(&h);
        let text = hsched_linux::kernel::show::check_text(&h, &plan);
        let mut out = crate::output::report();
        if !(args.quiet && plan.keeps_promises()) {
            out.write_all(text.as_bytes())?;
        }
        return Ok(if plan.keeps_promises() {
            Outcome::Ok
        } else {
            Outcome::Problems
        });
    }
    let a = analysis::analyze(&h);
    let problems = composition(&a);
    let mut out = crate::output::report();
    if !problems.is_empty() {
        let file = args.file.display().to_string();
        // The text was readable a moment ago; without it the lines are not quoted.
        let text = std::fs::read_to_string(&args.file).ok();
        for (k, p) in problems.iter().enumerate() {
            if k > 0 {
                writeln!(out)?;
            }
            let shown = analysis::render(&p.finding, &file, text.as_deref(), p.span);
            out.write_all(shown.as_bytes())?;
        }
        writeln!(
            out,
            "\n{file}: {} guarantee problem{}: the hierarchy does not keep its promises",
            problems.len(),
            if problems.len() == 1 { "" } else { "s" }
        )?;
        for note in a.notes() {
            writeln!(out, "{note}")?;
        }
        return Ok(Outcome::Problems);
    }
    if !args.quiet {
        writeln!(out, "{}: ok ({})", args.file.display(), summary(&h))?;
        if h.schedulers.is_empty() && h.threads.is_empty() && h.operations.is_empty() {
            out.flush()?;
            hsched_linux::diag!(
                "warning: `{}` declares no [[scheduler]] and no [[thread]]: there is nothing to check\n  \
                 = help: docs/hierarchy-format.md shows what a file holds; `hsched sim` without a file runs an example",
                args.file.display()
            );
        }
        for note in a.notes() {
            writeln!(out, "{note}")?;
        }
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
    if !h.rules.is_empty() {
        parts.push(n(h.rules.len(), "thread rule"));
    }
    parts.join(", ")
}

/// The guarantee composition check (Regehr 2001, §5.1.2): does every scheduler
/// receive the guarantee it needs to provide the ones it gives, and every
/// request its guarantee? One problem per diagnostic, in the order found
/// (from the root).
pub fn composition(a: &analysis::Analysis<'_>) -> Vec<Problem> {
    a.findings()
        .into_iter()
        .map(|finding| Problem {
            span: finding.node.as_ref().and_then(|n| a.span(n)),
            finding,
        })
        .collect()
}
