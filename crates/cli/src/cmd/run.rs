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
/run/hsched.sock (see `hsched ctl`) and prints the same report as the
simulator, measured. Every managed thread gets its original policy,
priority, affinity and runnable state back on exit, on SIGINT/SIGTERM, or
if the daemon dies (a watchdog outlives it). See docs/live-mode.md.

The run ends when the programs it launched (`exec`, COMMAND) have exited;
its built-in workloads end with it (alone, they run until their `exit`).
It also ends after --duration, on Ctrl-C or SIGTERM, or on `hsched ctl
shutdown`. A program of the file that cannot be launched is
named on standard error; the others run, and the run then exits with
status 1, as when none could be.";

/// Examples shown by `--help`.
pub const EXAMPLES: &str = "\
Examples:
  sudo hsched run examples/frame-renderer.toml --duration 10s
  sudo hsched run examples/overview.toml --scheduler ts --json -o make.json -- make -j2
  sudo hsched run examples/overview.toml --json --duration 5s > report.json
  sudo hsched run examples/home-computer.toml --duration 4s --compare";

/// The exit statuses of `hsched run`, shown by `--help`.
pub const EXIT_STATUS: &str = "\
Exit status:
    0  the run ended as asked: its programs exited, --duration passed,
       Ctrl-C, SIGTERM or `hsched ctl shutdown`
    1  the run failed: an error while it ran, the fail-safe ended it, or
       one or more of the file's programs could not be launched; with
       --compare, the simulator cannot run the file
    2  usage or input error: a bad option, an unreadable or invalid file, a
       --cpus list too short for the file or naming a CPU that is not
       online, a COMMAND that cannot be run, an output that cannot be
       written
    3  this machine cannot run live mode (not root, a missing kernel
       feature), or another daemon manages a requested CPU or answers on
       the control socket; nothing was changed
  130  --compare: Ctrl-C or SIGTERM while simulating; the measured report
       is printed without the comparison
  101  hsched itself failed (a bug: please report it)";

/// Arguments of `hsched run`. `hsched-linux` parses them again from
/// [`Args::glue_args`] (the parser `hsched-live run` uses), so that both
/// binaries mean the same by every option; the checks here only let clap
/// refuse a bad value before anything else happens.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The hierarchy file
    #[arg(value_name = "FILE")]
    pub file: String,
    /// The Linux CPUs to manage, e.g. 0,2-3; processor i of the file runs on
    /// the i-th of them, so list at least as many as the file has (default:
    /// the last [machine] cpus online CPUs)
    #[arg(long, value_name = "LIST", value_parser = cpu_list)]
    pub cpus: Option<String>,
    /// How long to run, e.g. 10s (default: until the launched programs exit)
    #[arg(long, value_name = "D", value_parser = run_length)]
    pub duration: Option<String>,
    /// Serve the control socket at PATH instead of /run/hsched.sock, and keep
    /// running after the programs exit, until --duration, Ctrl-C, SIGTERM or
    /// `hsched ctl --socket PATH shutdown` (a daemon)
    #[arg(long, value_name = "PATH", conflicts_with = "no_socket")]
    pub socket: Option<String>,
    /// Serve no control socket (to run beside another daemon on other CPUs)
    #[arg(long)]
    pub no_socket: bool,
    /// Members of this group may use every control operation
    #[arg(long, value_name = "GID")]
    pub group: Option<u32>,
    /// The scheduler of COMMAND (default: the file's default scheduler)
    #[arg(long, value_name = "NAME")]
    pub scheduler: Option<String>,
    /// A parameter of COMMAND under its scheduler, e.g. priority=5
    /// (repeatable)
    #[arg(long, value_name = "KEY=VALUE", value_parser = param)]
    pub param: Vec<String>,
    /// Do not run the built-in programs of threads that have only a
    /// simulator workload
    #[arg(long)]
    pub no_workloads: bool,
    /// Who enforces the hierarchy: user (this daemon, every policy, the
    /// control socket), kernel (Linux's own SCHED_DEADLINE, SCHED_FIFO, fair
    /// class and cpu cgroups; docs/kernel-backend.md), or auto (kernel where
    /// it keeps every guarantee the file asks for, else user) [default: user]
    #[arg(long, value_name = "BACKEND", value_parser = ["user", "kernel", "auto"])]
    pub enforce: Option<String>,
    /// The SCHED_FIFO priority of granted threads, 1 to 79 (the daemon runs
    /// at 80); 0 leaves their own policy [default: 10]
    #[arg(long, value_name = "N", value_parser = fifo_priority, allow_negative_numbers = true)]
    pub fifo_priority: Option<String>,
    /// Measure the time interrupts steal from the managed CPUs and feed it to
    /// the hierarchy (docs/stolen-time.md) [default: off]
    #[arg(long, value_name = "SOURCE", value_parser = ["off", "procstat", "trace"])]
    pub stolen: Option<String>,
    /// With --stolen trace: time added to every traced interrupt for what the
    /// tracepoints do not see, e.g. 2us
    #[arg(long, value_name = "D", value_parser = duration)]
    pub stolen_irq_overhead: Option<String>,
    /// Print the report as JSON, in the simulator's shape (docs/metrics.md)
    #[arg(long)]
    pub json: bool,
    /// Write the report to FILE, not to standard output, which the programs
    /// share (created before anything runs)
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<String>,
    /// Then simulate the file for as long as the run lasted and show, program
    /// by program, the share, jobs, misses and largest lateness simulated
    /// beside those measured (with --json, under the key `compare`)
    #[arg(long)]
    pub compare: bool,
    /// A program to run besides the file's threads, with its arguments
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

impl Args {
    /// The arguments as `hsched_linux::cli_glue::parse_run_args` reads
    /// them (all but --compare, which is this verb's).
    pub fn glue_args(&self) -> Vec<String> {
        let mut v = vec![self.file.clone()];
        let mut opt = |flag: &str, value: Option<String>| {
            if let Some(x) = value {
                v.push(flag.to_string());
                v.push(x);
            }
        };
        opt("--cpus", self.cpus.clone());
        opt("--duration", self.duration.clone());
        opt("--socket", self.socket.clone());
        opt("--group", self.group.map(|g| g.to_string()));
        opt("--scheduler", self.scheduler.clone());
        opt("--enforce", self.enforce.clone());
        opt("--fifo-priority", self.fifo_priority.clone());
        opt("--stolen", self.stolen.clone());
        opt("--stolen-irq-overhead", self.stolen_irq_overhead.clone());
        opt("--output", self.output.clone());
        for p in &self.param {
            v.push("--param".into());
            v.push(p.clone());
        }
        for (on, flag) in [
            (self.no_socket, "--no-socket"),
            (self.no_workloads, "--no-workloads"),
            (self.json, "--json"),
        ] {
            if on {
                v.push(flag.into());
            }
        }
        if !self.command.is_empty() {
            v.push("--".into());
            v.extend(self.command.iter().cloned());
        }
        v
    }
}

/// Checks a value with `hsched-linux`'s own parser and keeps it as written.
fn checked<T>(s: &str, parse: impl Fn(&str) -> Result<T, String>) -> Result<String, String> {
    parse(s).map(|_| s.to_string())
}

fn cpu_list(s: &str) -> Result<String, String> {
    checked(s, hsched_linux::cli_glue::parse_cpu_list)
}

fn fifo_priority(s: &str) -> Result<String, String> {
    checked(s, hsched_linux::cli_glue::parse_fifo_priority)
}

fn param(s: &str) -> Result<String, String> {
    checked(s, hsched_linux::cli_glue::parse_param)
}

fn run_length(s: &str) -> Result<String, String> {
    checked(s, |s| {
        hsched_core::time::parse_run_length(s).map_err(|e| e.message)
    })
}

fn duration(s: &str) -> Result<String, String> {
    checked(s, |s| {
        hsched_core::time::parse_duration(s, None).map_err(|e| e.message)
    })
}

/// Runs live mode, then with `--compare` the simulator.
///
/// # Errors
/// Installing the signal handlers for the simulation fails (a bug).
/// Everything else becomes an exit status: `hsched-linux` reports the
/// live run's (3: this machine cannot run live mode), 1 when the
/// simulator cannot run the file, 130 when it is interrupted.
pub fn run(args: &Args) -> anyhow::Result<Outcome> {
    let compare = args.compare;
    let args = args.glue_args();
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
    // A kernel-backed run is compared with the kernel's model of the file.
    let model = done
        .report
        .kernel
        .as_ref()
        .map(|k| hsched_linux::kernel::simulate::as_enforced(&done.hierarchy, k));
    let simulated = model.as_ref().map_or(&done.hierarchy, |m| &m.hierarchy);
    let sim = hsched_sim::run(simulated, opts);
    progress.borrow_mut().finish();
    let interrupted = sim.as_ref().is_ok_and(|s| s.interrupted);
    let c = sim
        .as_ref()
        .ok()
        .filter(|_| !interrupted)
        .map(|s| compare::Comparison {
            model: model.map(|m| m.notes).unwrap_or_default(),
            ..compare::compare(&done.report, s)
        });
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
    status = status.max(done.run_status());
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
