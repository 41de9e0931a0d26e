//! `hsched`: check, draw, analyze and simulate hierarchies of loadable
//! schedulers.
//!
//! The binary is glue: the hierarchy file is parsed by `hsched-config`, runs
//! happen in `hsched-sim`, and each verb lives in one module of [`cmd`].
//! Exit statuses are listed in [`outcome`].
#![forbid(unsafe_code)]
// Messages go through `diag!`, results through writers whose errors are
// handled: `eprintln!` and `println!` panic on a closed stream.
#![cfg_attr(not(test), deny(clippy::print_stderr, clippy::print_stdout))]
// The `Args` fields' doc comments are clap's help text, printed as written:
// `[sim] duration` names a section of the hierarchy file, not an item, and
// an escaped `\[sim\]` would show its backslashes in `--help`.
#![allow(rustdoc::broken_intra_doc_links, rustdoc::bare_urls)]

// The verbs live in the library target (src/lib.rs), which the Python
// package also links.
use hsched_cli::{cmd, outcome};

use clap::{Parser, Subcommand};
use hsched_linux::diag;
use outcome::{
    is_broken_pipe, stdout_error, InputError, EXIT_INPUT, EXIT_PROBLEMS, EXIT_STATUS_HELP,
};
use std::process::ExitCode;

const ABOUT: &str = "Check, draw, analyze and simulate hierarchies of loadable CPU schedulers";

const LONG_ABOUT: &str = "\
hsched runs hierarchies of loadable CPU schedulers (HLS, Regehr 2001): a root
scheduler gives the processors to child schedulers, which give them to their
own children, down to the threads. A hierarchy is described in a TOML file
(see docs/hierarchy-format.md).";

const EXAMPLES: &str = "\
Examples:
  hsched check examples/home-computer.toml
  hsched tree examples/home-computer.toml
  hsched analyze examples/media-player.toml
  hsched sim examples/home-computer.toml --duration 5s
  hsched policies";

/// The command line.
#[derive(Parser, Debug)]
#[command(
    name = "hsched",
    version,
    about = ABOUT,
    long_about = LONG_ABOUT,
    after_help = EXAMPLES,
    after_long_help = format!("{EXAMPLES}\n\n{EXIT_STATUS_HELP}")
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// The verbs. Each is one module of `cmd`.
#[derive(Subcommand, Debug)]
enum Command {
    /// Parse and validate a hierarchy file, and check its guarantees
    #[command(
        long_about = cmd::check::LONG_ABOUT,
        after_help = cmd::check::EXAMPLES,
        after_long_help = format!("{}\n\n{EXIT_STATUS_HELP}", cmd::check::EXAMPLES)
    )]
    Check(cmd::check::Args),
    /// Draw a hierarchy as a tree
    #[command(
        long_about = cmd::tree::LONG_ABOUT,
        after_help = cmd::tree::EXAMPLES,
        after_long_help = format!("{}\n\n{EXIT_STATUS_HELP}", cmd::tree::EXAMPLES)
    )]
    Tree(cmd::tree::Args),
    /// Analyze guarantees: admission headroom, reservations for rate-monotonic applications
    #[command(
        long_about = cmd::analyze::LONG_ABOUT,
        after_help = cmd::analyze::EXAMPLES,
        after_long_help = format!("{}\n\n{EXIT_STATUS_HELP}", cmd::analyze::EXAMPLES)
    )]
    Analyze(cmd::analyze::Args),
    /// Run a hierarchy on the simulator and report what every thread received
    #[command(
        long_about = cmd::sim::LONG_ABOUT,
        after_help = cmd::sim::EXAMPLES,
        after_long_help = format!("{}\n\n{EXIT_STATUS_HELP}", cmd::sim::EXAMPLES)
    )]
    Sim(cmd::sim::Args),
    /// Record what the Linux scheduler does while a command runs (root), for `import`
    #[command(
        long_about = cmd::record::LONG_ABOUT,
        after_help = cmd::record::EXAMPLES,
        after_long_help = format!("{}\n\n{EXIT_STATUS_HELP}", cmd::record::EXAMPLES)
    )]
    Record(cmd::record::Args),
    /// Turn a Linux scheduler trace of real programs into an rt-app workload to replay
    #[command(
        long_about = cmd::import::LONG_ABOUT,
        after_help = cmd::import::EXAMPLES,
        after_long_help = format!("{}\n\n{EXIT_STATUS_HELP}", cmd::import::EXAMPLES)
    )]
    Import(cmd::import::Args),
    /// List the scheduling policies and their parameters
    #[command(
        long_about = cmd::policies::LONG_ABOUT,
        after_help = cmd::policies::EXAMPLES,
        after_long_help = format!("{}\n\n{EXIT_STATUS_HELP}", cmd::policies::EXAMPLES)
    )]
    Policies(cmd::policies::Args),
    /// Run real programs under a hierarchy on this Linux machine (root)
    #[command(
        long_about = cmd::run::LONG_ABOUT,
        after_help = cmd::run::EXAMPLES,
        after_long_help = format!("{}\n\n{}", cmd::run::EXAMPLES, cmd::run::EXIT_STATUS)
    )]
    Run(cmd::run::Args),
    /// Send a control request to a running `hsched run` daemon
    #[command(
        long_about = cmd::ctl::LONG_ABOUT,
        after_help = cmd::ctl::EXAMPLES,
        after_long_help = format!("{}\n\n{}", cmd::ctl::EXAMPLES, cmd::ctl::EXIT_STATUS)
    )]
    Ctl(cmd::ctl::Args),
    /// Measure the time this machine steals from a reserved thread (root)
    #[command(
        long_about = cmd::stolen::LONG_ABOUT,
        after_help = cmd::stolen::EXAMPLES,
        after_long_help = format!("{}\n\n{EXIT_STATUS_HELP}", cmd::stolen::EXAMPLES)
    )]
    Stolen(cmd::stolen::Args),
    /// Generate a random periodic task set (UUniFast, Randfixedsum) as a hierarchy file
    #[command(
        long_about = cmd::generate::LONG_ABOUT,
        after_help = cmd::generate::EXAMPLES,
        after_long_help = format!("{}\n\n{EXIT_STATUS_HELP}", cmd::generate::EXAMPLES)
    )]
    Generate(cmd::generate::Args),
}

fn main() -> ExitCode {
    // A panic is a bug in hsched, never a user error: say so plainly
    // (the process still exits with Rust's status 101).
    std::panic::set_hook(Box::new(|info| {
        diag!("error: hsched hit an internal bug: {info}");
        diag!("  = please report it with the command line and the files that trigger it");
    }));
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // clap prints help and version on stdout (status 0) and usage
            // errors on stderr (status 2).
            let _ = e.print();
            return ExitCode::from(e.exit_code().clamp(0, 255) as u8);
        }
    };
    let result = match cli.command {
        Command::Check(args) => cmd::check::run(&args),
        Command::Tree(args) => cmd::tree::run(&args),
        Command::Analyze(args) => cmd::analyze::run(&args),
        Command::Sim(args) => cmd::sim::run(args),
        Command::Record(args) => cmd::record::run(&args),
        Command::Import(args) => cmd::import::run(&args),
        Command::Policies(args) => cmd::policies::run(&args),
        Command::Run(args) => cmd::run::run(&args),
        Command::Ctl(args) => cmd::ctl::run(&args),
        Command::Stolen(args) => cmd::stolen::run(&args),
        Command::Generate(args) => cmd::generate::run(&args),
    };
    match result {
        Ok(outcome) => outcome.exit_code(),
        Err(e) if is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) if stdout_error(&e).is_some() => {
            diag!("error: {e:#}");
            ExitCode::from(EXIT_INPUT)
        }
        Err(e) => match e.downcast_ref::<InputError>() {
            Some(input) => {
                diag!("{}", input.0.trim_end());
                ExitCode::from(EXIT_INPUT)
            }
            None => {
                diag!("error: {e:#}");
                ExitCode::from(EXIT_PROBLEMS)
            }
        },
    }
}
