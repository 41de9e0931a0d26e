//! hsched live mode: the same core and policies that the simulator runs,
//! controlling real Linux threads without modifying the programs — a
//! user-space HSI (Regehr 2001, ch. 4 and §9.3, with the policies deciding and
//! this crate observing and enforcing).
//!
//! - **Observe** ([`observe`]): perf events on the `sched_switch`,
//!   `sched_wakeup(_new)`, `sched_process_fork` and `sched_process_exit`
//!   tracepoints, attached per managed thread with `inherit`, so every
//!   thread and child a program creates is followed from its first
//!   instruction; one mmap ring buffer per CPU. Wake-ups in the idle
//!   task's context, which perf does not record, can come from an ftrace
//!   instance ([`ftrace`]).
//! - **Enforce** ([`enforce`]): a granted thread runs at `SCHED_FIFO`
//!   pinned to its CPU; a runnable thread without a CPU is frozen in a
//!   cgroup-v1 freezer cgroup of its own; blocked threads are left alone.
//! - **Time**: one-shot absolute `timerfd` at the HSI's next timer; no
//!   periodic tick.
//! - **Fail-safe** ([`watchdog`]): a process forked before anything changes
//!   restores every thread if the daemon dies, `kill -9` included.
//! - **Control** ([`control`], [`ctl`]): a JSON-lines Unix socket with
//!   `SO_PEERCRED` authorisation (HLSCtl, §4.3.9).
//!
//! Requires root, the v1 freezer controller, perf events and tracefs;
//! [`check_support`] says what is missing.
//!
//! ```no_run
//! use hsched_linux::{run, RunOptions};
//! # fn get() -> hsched_config::Hierarchy { unimplemented!() }
//! let hierarchy = get(); // e.g. from hsched_config
//! let opts = RunOptions { command: Some(vec!["./render".into()]), ..RunOptions::default() };
//! let report = run(&hierarchy, opts).unwrap();
//! println!("{}", report.to_table());
//! ```
#![warn(missing_docs)]
// Only `sys` may use unsafe code; every block there says why it is sound.
#![deny(unsafe_code)]
// Messages and results go through `diag!` and `out::print_stdout`, which
// do not panic on a closed stream (see `out`).
#![cfg_attr(not(test), deny(clippy::print_stderr, clippy::print_stdout))]

pub mod authz;
pub mod bench;
pub mod cli_glue;
pub mod control;
mod coop;
pub mod cpulock;
pub mod cpuset;
pub mod ctl;
mod daemon;
pub mod enforce;
pub mod ftrace;
pub mod hierarchy;
pub mod kernel;
pub mod loadable;
pub mod observe;
pub mod out;
pub mod probe;
pub mod procevents;
pub mod progress;
pub mod record;
pub mod report;
pub mod stolen;
pub mod sys;
pub mod watchdog;

pub use report::{Dist, ProgramReport, Report, SchedulerReport, ThreadReport};

use hsched_config::{Hierarchy, WorkloadSpec};
use hsched_core::{Duration, Params};
use std::path::PathBuf;

/// What can stop a live run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LiveError {
    /// Not root, or a kernel feature is missing (the message says which).
    Unsupported(String),
    /// The hierarchy cannot be built (unknown policy, bad parameter, ...).
    Hierarchy(String),
    /// The HSI or a policy refused an operation.
    Refused(String),
    /// The options or the file ask for what this machine does not have (a
    /// CPU that is not online, a program that cannot be run): the CLI's
    /// input error, exit status 2.
    Usage(String),
    /// A program could not be started, or the run could not be set up.
    Setup(String),
    /// A system call failed.
    Io(String),
    /// A running daemon already answers on the control socket `path`.
    SocketBusy {
        /// The socket.
        path: PathBuf,
        /// The process listening there, if the kernel says.
        holder: Option<i32>,
    },
    /// Another hsched daemon manages `cpu` ([`cpulock`]): one daemon per CPU.
    CpuBusy {
        /// The Linux CPU.
        cpu: usize,
        /// The other daemon's pid, if it could be read.
        holder: Option<i32>,
    },
}

impl std::fmt::Display for LiveError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LiveError::Unsupported(m) => write!(f, "live mode is not available here: {m}"),
            LiveError::Hierarchy(m) => write!(f, "hierarchy: {m}"),
            LiveError::Refused(m) => write!(f, "refused: {m}"),
            LiveError::Usage(m) | LiveError::Setup(m) => write!(f, "{m}"),
            LiveError::Io(m) => write!(f, "{m}"),
            LiveError::SocketBusy { path, holder } => {
                write!(f, "the control socket {} is in use by ", path.display())?;
                match holder {
                    Some(pid) => write!(f, "a running daemon (pid {pid})")?,
                    None => write!(f, "a running daemon")?,
                }
                write!(
                    f,
                    "; give this run another one with --socket PATH, or none with --no-socket"
                )
            }
            LiveError::CpuBusy { cpu, holder } => cpulock::LockError::Busy {
                cpu: *cpu,
                holder: *holder,
                path: cpulock::lock_path(*cpu),
            }
            .fmt(f),
        }
    }
}
impl std::error::Error for LiveError {}

impl From<cpulock::LockError> for LiveError {
    fn from(e: cpulock::LockError) -> Self {
        match e {
            cpulock::LockError::Busy { cpu, holder, .. } => LiveError::CpuBusy { cpu, holder },
            e @ cpulock::LockError::Io(_) => LiveError::Io(e.to_string()),
        }
    }
}

/// Options of a live run (`hsched run`).
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// Linux CPUs to manage; default: all online CPUs, or the last
    /// `machine.cpus` of them when the file asks for fewer.
    pub cpus: Option<Vec<usize>>,
    /// End the run after this long; default: when the launched programs
    /// (`exec`, `command`) have exited, or every built-in workload when
    /// there are none (with [`RunOptions::until_stopped`]: on SIGINT,
    /// SIGTERM or `shutdown`).
    pub duration: Option<Duration>,
    /// A command to launch (`hsched run FILE -- COMMAND`).
    pub command: Option<Vec<String>>,
    /// Scheduler of `command` (default: the file's default scheduler).
    pub command_scheduler: Option<String>,
    /// Parent-side parameters of `command`.
    pub command_params: Params,
    /// Also run threads without `exec` as built-in workload programs
    /// ([`probe`]) so simulator files run live unchanged.
    pub run_workloads: bool,
    /// Control socket path (none: no control interface). A socket a
    /// running daemon answers on is refused ([`LiveError::SocketBusy`]); a
    /// stale one is replaced.
    pub socket: Option<PathBuf>,
    /// Keep running once every launched program has exited, until
    /// `duration`, SIGINT or SIGTERM, or a `shutdown` request: a daemon
    /// that programs are attached to (`hsched run --socket PATH`).
    pub until_stopped: bool,
    /// A group whose members may use every control operation.
    pub control_group: Option<u32>,
    /// SCHED_FIFO priority of granted threads (0: leave their policy).
    pub fifo_priority: u32,
    /// SCHED_FIFO priority of the daemon (the watchdog runs 5 above).
    pub daemon_priority: u32,
    /// Ring buffer size per CPU: 2^order pages.
    pub ring_order: u32,
    /// At the end, SIGTERM (then SIGKILL) launched programs still running.
    pub kill_at_end: bool,
    /// Where to measure the time the system steals on the managed CPUs,
    /// fed to the HSI (`Hsi::add_stolen`) for Rez-C and Rez-FB (Regehr 2001,
    /// ch. 11); see [`stolen`].
    pub stolen: stolen::StolenSource,
    /// With [`stolen::StolenSource::Trace`]: time added to every traced
    /// interrupt for the entry and exit paths the tracepoints do not see
    /// (estimate it with `hsched-live stolen`: 1 to 3 µs under load here).
    pub stolen_irq_overhead: Duration,
    /// Limits on what control requests may ask for ([`authz`]).
    pub control_limits: authz::ControlLimits,
    /// Which backend enforces the hierarchy ([`kernel::Enforce`]).
    pub enforce: kernel::Enforce,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            cpus: None,
            duration: None,
            command: None,
            command_scheduler: None,
            command_params: Params::new(),
            run_workloads: true,
            socket: None,
            until_stopped: false,
            control_group: None,
            fifo_priority: 10,
            daemon_priority: 80,
            ring_order: 6,
            kill_at_end: true,
            stolen: stolen::StolenSource::Off,
            stolen_irq_overhead: Duration::ZERO,
            control_limits: authz::ControlLimits::default(),
            enforce: kernel::Enforce::User,
        }
    }
}

/// Whether live mode can run here.
///
/// # Errors
/// [`LiveError::Unsupported`] naming the first missing piece: root,
/// tracefs with the sched tracepoints, perf events, the v1 freezer (each
/// of tracefs and the freezer is mounted if it is not).
pub fn check_support() -> Result<(), LiveError> {
    if sys::geteuid() != 0 {
        return Err(LiveError::Unsupported(
            "live mode needs root (it changes other threads' scheduling)".into(),
        ));
    }
    observe::tracefs().map_err(|e| LiveError::Unsupported(e.to_string()))?;
    enforce::ensure_freezer().map_err(|e| LiveError::Unsupported(e.to_string()))?;
    if !std::path::Path::new("/proc/sys/kernel/perf_event_paranoid").exists() {
        return Err(LiveError::Unsupported(
            "perf events are not available".into(),
        ));
    }
    Ok(())
}

/// Runs `hierarchy` live until the end condition of `opts` and returns the
/// measured report. Every managed thread is restored before it returns,
/// also on error.
///
/// Call it from a single-threaded process if you can: the watchdog and the
/// built-in workloads are forked children.
///
/// # Errors
/// Unsupported machine, a hierarchy that cannot be built, a program that
/// cannot be started.
pub fn run(hierarchy: &Hierarchy, opts: RunOptions) -> Result<Report, LiveError> {
    match opts.enforce {
        kernel::Enforce::User => daemon::Daemon::start(hierarchy, opts)?.run(),
        kernel::Enforce::Kernel => kernel::run::run(hierarchy, opts),
        kernel::Enforce::Auto => {
            // The kernel where it enforces every node and keeps every
            // promise the file makes; the user backend otherwise.
            let why = match kernel::run::with_command(hierarchy, &opts)
                .and_then(|h| kernel::run::plan_for(&h, &opts))
            {
                Ok((plan, _)) if plan.keeps_promises() => None,
                Ok((plan, _)) => Some(
                    plan.shortfalls
                        .iter()
                        .map(|s| s.to_string())
                        .collect::<Vec<_>>()
                        .join("; "),
                ),
                Err(e) => Some(e.to_string()),
            };
            match why {
                None => {
                    diag!("hsched: --enforce auto: the kernel enforces this hierarchy");
                    kernel::run::run(hierarchy, opts)
                }
                Some(why) => {
                    diag!(
                        "hsched: --enforce auto: the user backend enforces this hierarchy ({why})"
                    );
                    daemon::Daemon::start(hierarchy, opts)?.run()
                }
            }
        }
    }
}

/// The report name of a workload model.
pub fn workload_name(w: &WorkloadSpec) -> &'static str {
    match w {
        WorkloadSpec::CpuBound => "cpu_bound",
        WorkloadSpec::Periodic { .. } => "periodic",
        WorkloadSpec::Sporadic { .. } => "sporadic",
        WorkloadSpec::Interactive { .. } => "interactive",
        WorkloadSpec::BlockingIo { .. } => "io",
        WorkloadSpec::Video(_) => "video",
        WorkloadSpec::FrameRenderer { .. } => "frame_renderer",
        WorkloadSpec::Program(_) => "program",
        WorkloadSpec::Stage(_) => "stage",
        WorkloadSpec::Player(_) => "player",
    }
}

/// The Linux CPUs a run manages, under either backend: `--cpus`, else the
/// file's count of the highest online CPUs, else all of them.
///
/// # Errors
/// A listed CPU that is not online, or none to manage.
pub fn managed_cpus(h: &Hierarchy, opts: &RunOptions) -> Result<Vec<usize>, LiveError> {
    let online = crate::sys::online_cpus();
    let cpus = match &opts.cpus {
        Some(c) => {
            if let Some(bad) = c.iter().find(|c| !online.contains(c)) {
                return Err(LiveError::Usage(format!(
                    "--cpus: CPU {bad} is not online (online: {online:?})"
                )));
            }
            c.clone()
        }
        None if h.machine.cpus >= online.len() || h.machine.cpus == 0 => online.clone(),
        None => online[online.len() - h.machine.cpus..].to_vec(),
    };
    if cpus.is_empty() {
        return Err(LiveError::Setup("no CPU to manage".into()));
    }
    Ok(cpus)
}
