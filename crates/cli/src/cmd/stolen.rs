//! `hsched stolen`: how much time this machine steals from a reserved
//! thread, and the live over-reservation experiment of Regehr 2001, Fig 11.3.
//! Everything is done by `hsched-linux`; this verb forwards its arguments.

use crate::outcome::Outcome;

/// Long help.
pub const LONG_ABOUT: &str = "\
Measure the time the system steals from a reserved thread (root only, Regehr
2001, ch. 11). Without a sub-verb: for each background load (none, tcp,
tcp-local, disk, timers) a probe pinned to one CPU spins 4 ms every 20 ms at
SCHED_FIFO and records the gaps in its execution, next to what the IRQ
tracepoints, /proc/stat and schedstat saw; prints a table. `rez` runs a test
application under Rez, Rez-C and Rez-FB at several over-reservations with
the load running and prints the deadline misses (`app` is that test
application, which `rez` launches). Every run is bounded and cleaned up.
See docs/stolen-time.md.

Options: --load LIST, --cpu N (default: the last CPU), --duration D
(default 5s), --reserve AMOUNT/PERIOD, --threshold D, --no-trace; for `rez`:
--over LIST (percent), --variants LIST, --source off|procstat|trace,
--irq-overhead D; for `app`: --period D, --need D, --duration D, --out FILE.
An option a form does not take is a usage error (exit status 2).";

/// Examples shown by `--help`.
pub const EXAMPLES: &str = "\
Examples:
  sudo hsched stolen --duration 10s
  sudo hsched stolen --load tcp,timers --cpu 1
  sudo hsched stolen rez --load tcp --over 0,10,20,30";

/// Arguments of `hsched stolen`, parsed by `hsched-linux`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// [rez] and options
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "[rez] [OPTIONS]"
    )]
    pub args: Vec<String>,
}

/// Runs the measurement.
///
/// # Errors
/// None of its own: `hsched-linux` reports and chooses the exit status
/// (3: this machine cannot run live mode).
pub fn run(args: &Args) -> anyhow::Result<Outcome> {
    Ok(Outcome::Status(hsched_linux::stolen::tool::stolen_main(
        &args.args,
    )))
}
