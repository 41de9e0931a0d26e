//! `hsched run`: live mode. Everything is done by `hsched-linux`; this verb
//! forwards its arguments, and with `--compare` simulates the same file
//! for the same length and prints the two side by side (crate::compare).

use crate::compare;
use crate::outcome::{Outcome, EXIT_INTERRUPTED};
use crate::progress::Progress;
use hsched_linux::diag;
use std::cell::RefCell;
use std::rc::Rc;

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
--stolen-irq-overhead D, --json, -o/--output FILE (write the report there,
not to standard output, which the programs share; the file is created
before anything runs), --compare (then simulate the file for as long as
the run lasted and show, program by program, the share, jobs, misses and
largest lateness simulated beside those measured; with --json, under the
key `compare`).";

/// Examples shown by `--help`.
pub const EXAMPLES: &str = "\
Examples:
  sudo hsched run examples/frame-renderer.toml --duration 10s
  sudo hsched run examples/overview.toml --scheduler ts --json -o make.json -- make -j2
  sudo hsched run examples/overview.toml --json --duration 5s > report.json
  sudo hsched run examples/home-computer.toml --duration 4s --compare";

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

/// Runs live mode, then with `--compare` the simulator.
///
/// # Errors
/// Installing the signal handlers for the simulation fails (a bug).
/// Everything else becomes an exit status: `hsched-linux` reports the
/// live run's (3: this machine cannot run live mode), 1 when the
/// simulator cannot run the file, 130 when it is interrupted.
pub fn run(args: &Args) -> anyhow::Result<Outcome> {
    let (compare, args) = take_compare(&args.args);
    if !compare {
        return Ok(Outcome::Status(hsched_linux::cli_glue::run_main(&args)));
    }
    let mut done = match hsched_linux::cli_glue::run_report(&args) {
        Ok(done) => done,
        Err(code) => return Ok(Outcome::Status(code)),
    };
    // The measured table goes out at once; the JSON report waits for its
    // `compare` key.
    let mut status = if done.json {
        0
    } else {
        done.out.write(&done.report.to_table())
    };
    // The daemon left SIGINT, SIGTERM and SIGHUP blocked (its signalfd
    // read them): from here on the first SIGINT or SIGTERM ends the
    // simulation early and the measured report is printed without the
    // comparison; a second ends hsched at once, and SIGHUP (the terminal
    // went away) ends it at once, as in `hsched sim`.
    let stop = crate::cmd::sim::stop_on_signals()?;
    hsched_linux::sys::unblock_signals(&[
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGHUP,
    ]);
    // As `hsched sim`: a bar on a terminal when simulating a long run
    // takes more than about two seconds.
    let progress = Rc::new(RefCell::new(Progress::for_stderr()));
    let bar = Rc::clone(&progress);
    let opts = hsched_sim::SimOptions {
        duration: Some(compare::sim_duration(&done.report)),
        stop: Some(stop),
        progress: Some(Box::new(move |f| bar.borrow_mut().update(f))),
        ..Default::default()
    };
    let sim = hsched_sim::run(&done.hierarchy, opts);
    progress.borrow_mut().finish();
    let interrupted = sim.as_ref().is_ok_and(|s| s.interrupted);
    let c = sim
        .as_ref()
        .ok()
        .filter(|_| !interrupted)
        .map(|s| compare::compare(&done.report, s));
    if done.json {
        // The measured report as it is should it not take the key.
        let live = done.report.to_json();
        let text = serde_json::from_str::<serde_json::Value>(&live)
            .ok()
            .and_then(|mut v| {
                v["compare"] = c.as_ref().map_or(serde_json::Value::Null, |c| c.to_json());
                serde_json::to_string_pretty(&v).ok()
            })
            .unwrap_or(live);
        status = done.out.write(&format!("{text}\n"));
    } else if let Some(c) = &c {
        status = status.max(done.out.write(&c.to_table()));
    }
    if let Err(e) = sim {
        diag!("hsched run --compare: the simulator cannot run this file: {e}");
        return Ok(Outcome::Status(1));
    }
    if interrupted {
        diag!("hsched run --compare: interrupted while simulating; no comparison");
        return Ok(Outcome::Status(EXIT_INTERRUPTED.into()));
    }
    Ok(Outcome::Status(status))
}

/// Whether `--compare` is among the options (before a `-- COMMAND`), and
/// the arguments without it, for `hsched-linux`.
fn take_compare(args: &[String]) -> (bool, Vec<String>) {
    let end = args.iter().position(|a| a == "--").unwrap_or(args.len());
    let mut rest: Vec<String> = args[..end]
        .iter()
        .filter(|a| *a != "--compare")
        .cloned()
        .collect();
    let compare = rest.len() < end;
    rest.extend_from_slice(&args[end..]);
    (compare, rest)
}

#[cfg(test)]
mod tests {
    use super::take_compare;

    fn v(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn compare_is_an_option_only_before_the_command() {
        assert_eq!(
            take_compare(&v(&["f.toml", "--compare", "--json"])),
            (true, v(&["f.toml", "--json"]))
        );
        assert_eq!(
            take_compare(&v(&["f.toml", "--", "prog", "--compare"])),
            (false, v(&["f.toml", "--", "prog", "--compare"]))
        );
        assert_eq!(take_compare(&v(&["f.toml"])), (false, v(&["f.toml"])));
    }
}
