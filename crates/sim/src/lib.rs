//! hsched's simulator: a deterministic machine that runs any hierarchy on
//! modelled workloads.
//!
//! It drives the sans-IO core ([`hsched_core::Hsi`]) with a virtual
//! nanosecond clock, the way the dissertation's simulation environment ran
//! the real schedulers (Regehr 2001, §9.4.1): the same policy code as live
//! mode, no wall clock, no threads, a seeded random stream. The machine has
//! N processors, an optional context-switch cost, precise or tick-rounded
//! timers (§10.4; the 800 Hz clock of Banachowski 2002) and stolen time (ch. 11).
//! Threads are programmable state machines: CPU-bound, periodic,
//! sporadic, interactive, blocking I/O, `srtsim` video (Banachowski 2002, §2), the
//! self-monitoring frame renderer of §10.5.2, programs of steps (what
//! rt-app tasks become), pipeline stages joined by bounded queues (Steere et al. 1998,
//! §4) and the adaptive video player of Sinha 2007. A workload may send
//! messages to its own scheduler (`progress`, `coop_poll`) through
//! `Hsi::thread_msg`; see the `workload` module.
//!
//! A run returns a [`Report`] (JSON and a table; docs/metrics.md defines
//! every figure) and can stream a Perfetto trace and write an SVG Gantt
//! chart. The same hierarchy and seed give byte-identical outputs.
//! [`run_seeds`] runs a hierarchy with several seeds on worker threads and
//! [`BatchBuilder`] folds their reports into a [`Batch`].
//!
//! # Time and event order
//! A run covers `[0, duration)`. Time jumps to the earliest of: a processor
//! finishing the work its thread asked for, a stolen-time boundary, the
//! earliest scheduler timer (rounded up to the next tick under a periodic
//! timer model) and the earliest queued event. At one instant the engine
//! handles, one at a time: work completions (lowest processor first),
//! stolen-time boundaries, due scheduler timers, then queued events by
//! class (thread creation, control operation, workload timer, thread exit)
//! and, within a class, in the order they were queued. Every HSI input is
//! followed by `Hsi::drain_dispatch`; stolen time is reported with
//! `Hsi::add_stolen` before any input that could change the dispatch.
//!
//! ```
//! use hsched_core::Duration;
//!
//! let h = hsched_config::parse_str(r#"
//!     [[scheduler]]
//!     name = "fp"
//!     policy = "fp"
//!
//!     [[thread]]
//!     name = "video"
//!     scheduler = "fp"
//!     params = { priority = 1 }
//!     workload = { kind = "periodic", period = "33ms", exec = "10ms" }
//!
//!     [[thread]]
//!     name = "hog"
//!     scheduler = "fp"
//!     workload = { kind = "cpu-bound" }
//! "#, "example.toml").unwrap();
//! let opts = hsched_sim::SimOptions { duration: Some(Duration::from_secs(1)), ..Default::default() };
//! let report = hsched_sim::run(&h, opts).unwrap();
//! let video = report.thread("video").unwrap();
//! // Released at 0, 33, ..., 990 ms; the last job would finish at 1 s,
//! // where the run ends.
//! assert_eq!(video.jobs, 30);
//! assert_eq!(video.deadline_misses, 0);
//! assert_eq!(video.cpu_ns, 310_000_000);
//! assert_eq!(report.thread("hog").unwrap().cpu_ns, 690_000_000);
//! println!("{}", report.to_table());
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod batch;
mod engine;
mod error;
mod events;
mod gantt;
mod machine;
mod metrics;
pub mod player;
pub mod reference;
mod report;
mod rng;
mod trace;
mod unload;
mod workload;

pub use batch::{
    run_seeds, Batch, BatchBuilder, BatchError, MachineSummary, Misses, ShareSummary, Spread,
    ThreadSummary, BATCH_SCHEMA_VERSION,
};
pub use error::SimError;
pub use gantt::{GanttColor, GanttRequest};
pub use metrics::Dist;
pub use report::{
    CpuReport, EventCounts, JobRecord, MachineReport, PrincipalReport, QueueReport, Report,
    SchedulerReport, ThreadReport, UnloadReport, SCHEMA_VERSION,
};

use hsched_config::{BuildError, Hierarchy};
use hsched_core::{Duration, HsiError};
use hsched_policies::PolicyInfo;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// Simulated time when neither the options nor the file say.
pub const DEFAULT_DURATION: Duration = Duration::from_secs(10);

/// How long [`run`] simulates `h`: `asked` (the command line's), else the
/// file's `[sim] duration`, else its rt-app workload's, else
/// [`DEFAULT_DURATION`].
pub fn run_duration(h: &Hierarchy, asked: Option<Duration>) -> Duration {
    asked
        .or(h.sim.duration)
        .or(h.rtapp.as_ref().and_then(|w| w.duration))
        .unwrap_or(DEFAULT_DURATION)
}

/// How to run. Every field is optional; `SimOptions::default()` runs the
/// file's duration and seed with no outputs but the report.
#[derive(Default)]
pub struct SimOptions {
    /// Simulated time; the file's `[sim] duration`, else the rt-app file's
    /// `global.duration`, else 10 s.
    pub duration: Option<Duration>,
    /// Random seed; the file's `[sim] seed`, else 0.
    pub seed: Option<u64>,
    /// Run the full protocol checker after every HSI input (slower).
    pub check_protocol: bool,
    /// Stream a Perfetto / Chrome trace-event JSON here.
    pub trace: Option<Box<dyn std::io::Write>>,
    /// Keep only the trace events in `[from, to)`, clipping slices to it;
    /// the whole run when `None`.
    pub trace_window: Option<(Duration, Duration)>,
    /// Write an SVG Gantt chart of a window.
    pub gantt: Option<GanttRequest>,
    /// Called with the fraction of simulated time done (0..=1), about a
    /// hundred times per run and once with 1.0 at the end.
    pub progress: Option<Box<dyn FnMut(f64)>>,
    /// The hierarchy file's path, for the `repro:` line of protocol
    /// violations (the hierarchy's own `file` when not given).
    pub source: Option<String>,
    /// Set to true (from a signal handler, another thread) to end the run
    /// early: it stops before the next instant with events, finishes the
    /// trace and the chart, and reports the time simulated so far with
    /// [`Report::interrupted`] set.
    pub stop: Option<Arc<AtomicBool>>,
    /// Keep a record of every job with a deadline and return them in
    /// [`Report::jobs`] (release, deadline, completion, response time,
    /// lateness, missed). Off by default: the records take memory in
    /// proportion to the jobs run, where the report's other figures take
    /// the same however long the run. The report's other figures, the
    /// trace and the chart are the same either way.
    pub job_records: bool,
}

impl std::fmt::Debug for SimOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimOptions")
            .field("duration", &self.duration)
            .field("seed", &self.seed)
            .field("check_protocol", &self.check_protocol)
            .field("trace", &self.trace.is_some())
            .field("trace_window", &self.trace_window)
            .field("gantt", &self.gantt)
            .field("progress", &self.progress.is_some())
            .field("source", &self.source)
            .field("stop", &self.stop)
            .field("job_records", &self.job_records)
            .finish()
    }
}

/// Builds the hierarchy `h` with the policies of `hsched_policies` and
/// simulates it.
///
/// # Errors
/// The hierarchy cannot be built, a workload or the machine is unusable,
/// the HSI refuses an input or an operation, a policy breaks the protocol
/// (the error carries a `repro:` line), or writing an output fails.
pub fn run(h: &Hierarchy, opts: SimOptions) -> Result<Report, SimError> {
    run_with_policies(h, opts, hsched_policies::registry())
}

/// [`run`] with another table of policies, e.g. the registry plus a policy
/// under test (`create-scheduler` operations use the same table).
///
/// # Errors
/// As [`run`].
pub fn run_with_policies(
    h: &Hierarchy,
    opts: SimOptions,
    policies: &[PolicyInfo],
) -> Result<Report, SimError> {
    // Timed requests go through the resource manager (Regehr 2001, ch. 8),
    // whose decisions become reservation operations of the run.
    let (planned, decisions) = if h.rm.requests.is_empty() {
        (None, Vec::new())
    } else {
        let mut c = h.clone();
        let d = hsched_rm::sim::apply(&mut c).map_err(|e| SimError::Build {
            message: format!("resource manager: {e}"),
        })?;
        (Some(c), d)
    };
    let h = planned.as_ref().unwrap_or(h);
    let hsi = hsched_config::build_hsi_with(h, policies).map_err(|e| match e {
        BuildError::Hsi {
            error: HsiError::Protocol(violations),
            what,
        } => SimError::Protocol {
            at: hsched_core::Instant::ZERO,
            input: format!("creation of {what}"),
            violations,
            seed: opts.seed.or(h.sim.seed).unwrap_or(0),
            source: opts
                .source
                .clone()
                .or_else(|| (!h.file.is_empty()).then(|| h.file.clone())),
        },
        other => SimError::Build {
            message: other.to_string(),
        },
    })?;
    let end = run_duration(h, opts.duration).as_nanos();
    let seed = opts.seed.or(h.sim.seed).unwrap_or(0);
    let setup = engine::Setup {
        end,
        seed,
        check_protocol: opts.check_protocol,
        source: opts
            .source
            .or_else(|| (!h.file.is_empty()).then(|| h.file.clone())),
        trace: opts.trace.map(|out| {
            let window = opts
                .trace_window
                .map_or((0, u64::MAX), |(a, b)| (a.as_nanos(), b.as_nanos()));
            trace::TraceWriter::new(out, window)
        }),
        gantt: opts.gantt.map(gantt::Gantt::new),
        progress: opts.progress,
        stop: opts.stop,
        job_records: opts.job_records,
    };
    let mut report = engine::Engine::new(h, policies, hsi, h.threads.clone(), setup)?.run()?;
    report.requests = decisions.iter().map(ToString::to_string).collect();
    Ok(report)
}
