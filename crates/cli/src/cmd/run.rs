//! `hsched run`: live mode. Everything is done by `hsched-linux`; this verb
//! forwards its arguments.

use crate::outcome::Outcome;

/// Long help.
pub const LONG_ABOUT: &str = "\
Run real Linux programs under a hierarchy (live mode, root only). The
daemon loads FILE, launches the `exec = [...]` of its threads (or the
COMMAND after `--`), follows every thread and child they create, enforces
the hierarchy's decisions on the managed CPUs, serves the control socket
(see `hsched ctl`) and prints the same report as the simulator, measured.
Every managed thread gets its original policy, priority, affinity and
runnable state back on exit, on SIGINT/SIGTERM, or if the daemon dies (a
watchdog outlives it). See docs/live-mode.md.

Options: --cpus LIST (default: all), --duration D (default: until the
programs exit), --socket PATH, --group GID (may use the socket),
--scheduler NAME and --param KEY=VALUE (where COMMAND goes), --no-workloads,
--fifo-priority N (SCHED_FIFO of granted threads, 1 to 79, default 10; 0
leaves their policy), --stolen off|procstat|trace (measure time stolen by
interrupts and feed it to the hierarchy; see docs/stolen-time.md),
--stolen-irq-overhead D, --json.";

/// Examples shown by `--help`.
pub const EXAMPLES: &str = "\
Examples:
  sudo hsched run examples/frame-renderer.toml --duration 10s
  sudo hsched run examples/overview.toml --scheduler TS -- make -j2
  sudo hsched run examples/overview.toml --json --duration 5s > report.json";

/// Arguments of `hsched run`, parsed by `hsched-linux`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// FILE, options, and `-- COMMAND ARGS...`
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "FILE [OPTIONS] [-- COMMAND...]"
    )]
    pub args: Vec<String>,
}

/// Runs live mode.
///
/// # Errors
/// None of its own: `hsched-linux` reports and chooses the exit status
/// (3: this machine cannot run live mode).
pub fn run(args: &Args) -> anyhow::Result<Outcome> {
    Ok(Outcome::Status(hsched_linux::cli_glue::run_main(
        &args.args,
    )))
}
