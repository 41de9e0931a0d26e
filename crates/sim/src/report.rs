//! The result of a run: a JSON report (schema in docs/metrics.md) and a
//! fixed-width table for terminals.

use crate::metrics::Dist;
use serde::Serialize;
use std::fmt::Write as _;
use std::sync::Arc;

/// Version of the JSON schema; bumped when a field changes meaning or is
/// removed (adding fields does not bump it).
pub const SCHEMA_VERSION: u32 = 1;

/// Everything a run measured. Serialized field by field in this order.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Report {
    /// Schema version ([`SCHEMA_VERSION`]).
    pub hsched_report: u32,
    /// Simulated time.
    pub duration_ns: u64,
    /// Processors.
    pub cpus: usize,
    /// The random seed.
    pub seed: u64,
    /// HSI inputs fed during the run (the sum of `event_counts`).
    pub events: u64,
    /// HSI inputs by kind.
    pub event_counts: EventCounts,
    /// Threads, in hierarchy-file order.
    pub threads: Vec<ThreadReport>,
    /// Scheduler instances, in creation order (including destroyed ones).
    pub schedulers: Vec<SchedulerReport>,
    /// Principals, in file order.
    pub principals: Vec<PrincipalReport>,
    /// The machine.
    pub machine: MachineReport,
    /// Pipeline queues (`[[queue]]`), in file order.
    pub queues: Vec<QueueReport>,
    /// The resource manager's decisions on the file's `[[rm.request]]`s,
    /// one line each, in the order made (`2s #3 a3: granted at rez
    /// (RESBH 2 10)`). Written to the JSON only when there are some.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub requests: Vec<String>,
    /// Schedulers unloaded because their policy failed (a plug-in that
    /// trapped, ran out of its work bound or broke the protocol), in the
    /// order it happened. Written to the JSON only when there are some.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unloaded: Vec<UnloadReport>,
    /// The run was stopped early ([`SimOptions::stop`], Ctrl-C in `hsched
    /// sim`): `duration_ns` is the time simulated, shorter than asked.
    /// Written to the JSON only when true.
    ///
    /// [`SimOptions::stop`]: crate::SimOptions::stop
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub interrupted: bool,
    /// Per-job records, kept only when asked
    /// ([`SimOptions::job_records`]; empty otherwise): one row per job
    /// with a release and an absolute deadline (periodic, sporadic and
    /// video threads, and rt-app programs with `timer` steps), threads in
    /// file order, each thread's jobs in release order. A job released and
    /// not finished by the end of the run (or of its thread) is a row
    /// without completion, missed when its deadline passed before the end;
    /// so a thread's rows with `missed` add up to its `deadline_misses`.
    /// Written to the JSON only when there are some.
    ///
    /// [`SimOptions::job_records`]: crate::SimOptions::job_records
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub jobs: Vec<JobRecord>,
}

/// One job of one thread ([`Report::jobs`]; docs/metrics.md, "Per-job
/// records").
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct JobRecord {
    /// The thread's name.
    #[serde(serialize_with = "name_str")]
    pub thread: Arc<str>,
    /// The job's number in its thread, from 0, in release order.
    pub job: u64,
    /// When it was released (for a periodic thread, its nominal release
    /// plus the jitter drawn for it).
    pub release_ns: u64,
    /// Its absolute deadline.
    pub deadline_ns: u64,
    /// When it finished, `null` when it did not: abandoned at its deadline
    /// (a video frame in `skip` mode) or unfinished at the end.
    pub completion_ns: Option<u64>,
    /// `completion_ns − release_ns`.
    pub response_ns: Option<u64>,
    /// `completion_ns − deadline_ns` (negative: early).
    pub lateness_ns: Option<i64>,
    /// Finished after its deadline, abandoned at it, or unfinished with
    /// its deadline before the end.
    pub missed: bool,
}

impl JobRecord {
    /// The record of `row`, the job numbered `job` of `thread`.
    pub(crate) fn new(thread: &Arc<str>, job: u64, row: &crate::metrics::JobRow) -> JobRecord {
        JobRecord {
            thread: Arc::clone(thread),
            job,
            release_ns: row.release,
            deadline_ns: row.deadline,
            completion_ns: row.completion,
            response_ns: row.completion.map(|c| c.saturating_sub(row.release)),
            lateness_ns: row.completion.map(|c| {
                (c as i128 - row.deadline as i128).clamp(i64::MIN as i128, i64::MAX as i128) as i64
            }),
            missed: row.missed,
        }
    }
}

fn name_str<S: serde::Serializer>(name: &Arc<str>, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(name)
}

/// A scheduler whose policy failed, and what became of it and its threads.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct UnloadReport {
    /// The scheduler instance.
    pub scheduler: String,
    /// Its policy as the report's scheduler table names it.
    pub policy: String,
    /// When its policy failed.
    pub at_ns: u64,
    /// What happened.
    pub what: String,
    /// Where its threads went, or `null` when they could not be moved.
    pub fallback: Option<String>,
    /// The threads moved there.
    pub moved: Vec<String>,
    /// Moved threads the fallback refused with their parameters and took
    /// with its defaults: `thread: refusal`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub reset: Vec<String>,
    /// The schedulers destroyed, the failed one last.
    pub destroyed: Vec<String>,
    /// Why it could not be unloaded, when it could not; the scheduler then
    /// stays, doing nothing, and its threads receive no processor time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl UnloadReport {
    /// What [`hsched_core::Hsi::unload_faulted`] did for one failed
    /// scheduler, with names for its threads.
    pub fn new(hsi: &hsched_core::Hsi, u: &hsched_core::Unloading) -> UnloadReport {
        let mut report = UnloadReport {
            scheduler: u.fault.name.clone(),
            policy: u.policy.clone(),
            at_ns: u.fault.at.0,
            what: u.fault.what.clone(),
            fallback: None,
            moved: Vec::new(),
            reset: Vec::new(),
            destroyed: Vec::new(),
            error: None,
        };
        match &u.result {
            Ok(done) => {
                let name = |t| hsi.thread_name(t).to_string();
                report.moved = done.moved.iter().map(|&t| name(t)).collect();
                report.reset = done
                    .reset
                    .iter()
                    .map(|(t, why)| format!("thread '{}' took its defaults: {why}", name(*t)))
                    .collect();
                report.destroyed = done.destroyed.clone();
                report.fallback = Some(done.fallback.clone());
            }
            Err(e) => report.error = Some(e.to_string()),
        }
        report
    }

    /// The report in one line, as the text report prints it.
    pub fn line(&self) -> String {
        let mut s = format!(
            "{} scheduler '{}' ({}) failed: {}",
            fmt_ns(self.at_ns),
            self.scheduler,
            self.policy,
            self.what
        );
        match (&self.fallback, &self.error) {
            (_, Some(e)) => {
                let _ = write!(s, "; not unloaded: {e}");
            }
            (Some(f), None) => {
                let _ = write!(
                    s,
                    "; unloaded ({}), {} thread(s) moved to '{f}'",
                    self.destroyed.join(", "),
                    self.moved.len()
                );
                for r in &self.reset {
                    let _ = write!(s, "; {r}");
                }
            }
            (None, None) => {}
        }
        s
    }
}

/// One pipeline queue over the run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct QueueReport {
    /// Name.
    pub name: String,
    /// Capacity, items.
    pub size: u64,
    /// Items in it at the end.
    pub fill: u64,
    /// Time-weighted mean fill as a fraction of `size`.
    pub mean_fill: f64,
    /// Fewest items it held.
    pub min_fill: u64,
    /// Most items it held.
    pub max_fill: u64,
    /// Items put in.
    pub pushed: u64,
    /// Items taken out.
    pub popped: u64,
}

/// HSI inputs by kind.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct EventCounts {
    /// `Hsi::wake`.
    pub wake: u64,
    /// `Hsi::block`.
    pub block: u64,
    /// `Hsi::create_thread`.
    pub create_thread: u64,
    /// `Hsi::exit`.
    pub exit: u64,
    /// `Hsi::fire_timers` calls (each at a due timer).
    pub fire_timers: u64,
    /// Control operations (reservations, moves, new instances, ...).
    pub operations: u64,
    /// `Hsi::add_stolen` reports.
    pub add_stolen: u64,
    /// `Hsi::thread_msg` calls by workloads (progress, coop_poll).
    pub thread_msg: u64,
}

impl EventCounts {
    /// The total.
    pub fn total(&self) -> u64 {
        self.wake
            + self.block
            + self.create_thread
            + self.exit
            + self.fire_timers
            + self.operations
            + self.add_stolen
            + self.thread_msg
    }
}

/// One thread's figures (docs/metrics.md defines each).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ThreadReport {
    /// Name.
    pub name: String,
    /// The scheduler it ended under (or started under, if never created).
    pub scheduler: String,
    /// Its principal.
    pub principal: Option<String>,
    /// Workload model (`periodic`, `frame_renderer`, ...).
    pub workload: &'static str,
    /// Useful CPU time.
    pub cpu_ns: u64,
    /// `cpu_ns / (duration_ns × cpus)`: its fraction of the machine.
    pub share: f64,
    /// CPU time the HSI accounted to it (net of stolen time, including
    /// context-switch time).
    pub received_ns: u64,
    /// Time stolen while it held a processor.
    pub stolen_ns: u64,
    /// Completed jobs.
    pub jobs: u64,
    /// Jobs that met their deadline.
    pub deadline_hits: u64,
    /// Missed deadlines.
    pub deadline_misses: u64,
    /// Jobs abandoned at their deadline.
    pub dropped: u64,
    /// Largest lateness, `null` without deadlines.
    pub max_lateness_ns: Option<i64>,
    /// Lateness distribution.
    pub lateness_ns: Option<Dist>,
    /// Largest tardiness (`max(0, lateness)`).
    pub max_tardiness_ns: Option<u64>,
    /// Mean tardiness over all jobs with a deadline.
    pub mean_tardiness_ns: Option<f64>,
    /// Wake-up to dispatch.
    pub dispatch_latency_ns: Option<Dist>,
    /// Longest time runnable without a processor.
    pub max_runnable_gap_ns: u64,
    /// Times put on a processor.
    pub context_switches: u64,
    /// Times taken off a processor while runnable.
    pub preemptions: u64,
    /// Blocked → runnable transitions.
    pub wakeups: u64,
    /// Frames completed (video and renderer only).
    pub frames: Option<u64>,
    /// Frames per second of simulated time while the thread existed.
    pub fps: Option<f64>,
    /// When it was created, `null` if never.
    pub created_ns: Option<u64>,
    /// When it exited, `null` if it did not.
    pub exited_ns: Option<u64>,
    /// Messages its workload sent to its scheduler and the scheduler took
    /// (`progress`, `coop_poll`).
    pub messages_sent: u64,
    /// Messages its scheduler refused (a policy that does not take them).
    pub messages_refused: u64,
}

/// One scheduler instance.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SchedulerReport {
    /// Name.
    pub name: String,
    /// Policy.
    pub policy: String,
    /// CPU time received from its parents, net of stolen time
    /// (`Hsi::instance_supply`).
    pub supply_ns: u64,
    /// `supply_ns / (duration_ns × cpus)`.
    pub share: f64,
    /// Whether it still existed at the end.
    pub live: bool,
}

/// One principal.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PrincipalReport {
    /// Name.
    pub name: String,
    /// Its threads.
    pub threads: usize,
    /// Their useful CPU time.
    pub cpu_ns: u64,
    /// `cpu_ns / (duration_ns × cpus)`.
    pub share: f64,
}

/// The machine.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MachineReport {
    /// Time threads made progress, all processors.
    pub busy_ns: u64,
    /// Time no thread was on a processor (and nothing was stolen).
    pub idle_ns: u64,
    /// Stolen time, all processors.
    pub stolen_ns: u64,
    /// Time spent switching contexts.
    pub context_switch_ns: u64,
    /// Context switches charged.
    pub context_switches: u64,
    /// Per processor.
    pub per_cpu: Vec<CpuReport>,
}

/// One processor.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct CpuReport {
    /// Number.
    pub cpu: usize,
    /// Threads made progress.
    pub busy_ns: u64,
    /// Nothing ran.
    pub idle_ns: u64,
    /// Stolen.
    pub stolen_ns: u64,
    /// Switching contexts.
    pub context_switch_ns: u64,
    /// Context switches charged.
    pub context_switches: u64,
}

impl Report {
    /// The report as pretty-printed JSON (deterministic: fixed field order,
    /// shortest round-trip floats).
    pub fn to_json(&self) -> String {
        pretty_json(self)
    }

    /// The thread named `name`.
    pub fn thread(&self, name: &str) -> Option<&ThreadReport> {
        self.threads.iter().find(|t| t.name == name)
    }

    /// The scheduler instance named `name`.
    pub fn scheduler(&self, name: &str) -> Option<&SchedulerReport> {
        self.schedulers.iter().find(|s| s.name == name)
    }

    /// The principal named `name`.
    pub fn principal(&self, name: &str) -> Option<&PrincipalReport> {
        self.principals.iter().find(|p| p.name == name)
    }

    /// A fixed-width table for terminals.
    pub fn to_table(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "simulated {}{} on {} cpu(s), seed {}, {} HSI inputs",
            fmt_ns(self.duration_ns),
            if self.interrupted {
                " (interrupted)"
            } else {
                ""
            },
            self.cpus,
            self.seed,
            self.events
        );
        let _ = writeln!(s);
        let w = name_width(self.threads.iter().map(|x| x.name.as_str()), 6);
        // One unit per column.
        let cpu = Unit::of(self.threads.iter().map(|t| t.cpu_ns));
        let late = Unit::of(
            self.threads
                .iter()
                .filter_map(|t| t.max_lateness_ns.map(i64::unsigned_abs)),
        );
        let p99 = Unit::of(
            self.threads
                .iter()
                .filter_map(|t| t.dispatch_latency_ns.as_ref().map(|d| d.p99.max(0) as u64)),
        );
        let gap = Unit::of(self.threads.iter().map(|t| t.max_runnable_gap_ns));
        let _ = writeln!(
            s,
            "{:<w$} {:>10} {:>7} {:>8} {:>7} {:>10} {:>10} {:>10} {:>8} {:>7}",
            "thread",
            "cpu",
            "share%",
            "jobs",
            "misses",
            "max late",
            "p99 lat",
            "max gap",
            "switches",
            "fps"
        );
        for t in &self.threads {
            let _ = writeln!(
                s,
                "{:<w$} {:>10} {:>7.2} {:>8} {:>7} {:>10} {:>10} {:>10} {:>8} {:>7}",
                clip(&t.name, w),
                cpu.fmt(t.cpu_ns),
                t.share * 100.0,
                t.jobs,
                t.deadline_misses,
                t.max_lateness_ns
                    .map_or("-".to_string(), |n| late.fmt_signed(n)),
                t.dispatch_latency_ns
                    .as_ref()
                    .map_or("-".to_string(), |d| p99.fmt(d.p99.max(0) as u64)),
                gap.fmt(t.max_runnable_gap_ns),
                t.context_switches,
                t.fps.map_or("-".to_string(), |f| format!("{f:.1}")),
            );
        }
        let _ = writeln!(s);
        let w = name_width(self.schedulers.iter().map(|x| x.name.as_str()), 9);
        let _ = writeln!(
            s,
            "{:<w$} {:<10} {:>10} {:>7}",
            "scheduler", "policy", "supply", "share%"
        );
        let supply = Unit::of(self.schedulers.iter().map(|x| x.supply_ns));
        for x in &self.schedulers {
            let _ = writeln!(
                s,
                "{:<w$} {:<10} {:>10} {:>7.2}{}",
                clip(&x.name, w),
                clip(&x.policy, 10),
                supply.fmt(x.supply_ns),
                x.share * 100.0,
                if x.live { "" } else { "  (destroyed)" }
            );
        }
        if !self.principals.is_empty() {
            let _ = writeln!(s);
            let w = name_width(self.principals.iter().map(|x| x.name.as_str()), 9);
            let _ = writeln!(
                s,
                "{:<w$} {:>7} {:>10} {:>7}",
                "principal", "threads", "cpu", "share%"
            );
            let cpu = Unit::of(self.principals.iter().map(|p| p.cpu_ns));
            for p in &self.principals {
                let _ = writeln!(
                    s,
                    "{:<w$} {:>7} {:>10} {:>7.2}",
                    clip(&p.name, w),
                    p.threads,
                    cpu.fmt(p.cpu_ns),
                    p.share * 100.0
                );
            }
        }
        if !self.queues.is_empty() {
            let _ = writeln!(s);
            let w = name_width(self.queues.iter().map(|x| x.name.as_str()), 5);
            let _ = writeln!(
                s,
                "{:<w$} {:>8} {:>6} {:>6} {:>6} {:>10} {:>10}",
                "queue", "size", "mean%", "min", "max", "pushed", "popped"
            );
            for q in &self.queues {
                let _ = writeln!(
                    s,
                    "{:<w$} {:>8} {:>6.1} {:>6} {:>6} {:>10} {:>10}",
                    clip(&q.name, w),
                    q.size,
                    q.mean_fill * 100.0,
                    q.min_fill,
                    q.max_fill,
                    q.pushed,
                    q.popped
                );
            }
        }
        if !self.unloaded.is_empty() {
            let _ = writeln!(s);
            for u in &self.unloaded {
                let _ = writeln!(s, "unloaded: {}", u.line());
            }
        }
        let m = &self.machine;
        let _ = writeln!(s);
        let _ = writeln!(
            s,
            "machine: busy {}, idle {}, stolen {}, switching {} ({} switches)",
            fmt_ns(m.busy_ns),
            fmt_ns(m.idle_ns),
            fmt_ns(m.stolen_ns),
            fmt_ns(m.context_switch_ns),
            m.context_switches
        );
        s
    }
}

/// `v` as pretty-printed JSON, newline-terminated.
pub(crate) fn pretty_json(v: &impl Serialize) -> String {
    let mut s =
        serde_json::to_string_pretty(v).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"));
    s.push('\n');
    s
}

/// The width of a table's name column: the longest name, at least
/// `least` (the heading's width) and at most 40 (longer ones are clipped).
pub(crate) fn name_width<'a>(names: impl Iterator<Item = &'a str>, least: usize) -> usize {
    names.map(str::len).max().unwrap_or(least).clamp(least, 40)
}

pub(crate) fn clip(s: &str, w: usize) -> String {
    if s.chars().count() <= w {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(w.saturating_sub(1)).collect();
        t.push('~');
        t
    }
}

/// `12.345ms`-style, three significant decimals.
pub(crate) fn fmt_ns(ns: u64) -> String {
    match ns {
        0..=9_999 => format!("{ns}ns"),
        10_000..=9_999_999 => format!("{:.3}ms", ns as f64 / 1e6),
        _ if ns < 100_000_000_000 => format!("{:.3}s", ns as f64 / 1e9),
        _ => format!("{:.1}s", ns as f64 / 1e9),
    }
}

/// The unit a table column prints its durations in, chosen from its
/// largest magnitude, so that the column reads in one unit (`-2.400ms`
/// and `-24.000ms`, not `-2.400ms` and `-0.024s`): nanoseconds below
/// 10 µs, milliseconds below a second (at most ten characters, signed),
/// seconds above.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Unit {
    Ns,
    Ms,
    S,
    /// Seconds with one decimal, from 100 s up.
    LongS,
}

impl Unit {
    /// The unit for a column whose values (magnitudes) are `ns`.
    pub(crate) fn of(ns: impl IntoIterator<Item = u64>) -> Unit {
        match ns.into_iter().max().unwrap_or(0) {
            0..=9_999 => Unit::Ns,
            10_000..=999_999_999 => Unit::Ms,
            m if m < 100_000_000_000 => Unit::S,
            _ => Unit::LongS,
        }
    }

    /// `ns` in this unit, with [`fmt_ns`]'s decimals.
    pub(crate) fn fmt(self, ns: u64) -> String {
        match self {
            Unit::Ns => format!("{ns}ns"),
            Unit::Ms => format!("{:.3}ms", ns as f64 / 1e6),
            Unit::S => format!("{:.3}s", ns as f64 / 1e9),
            Unit::LongS => format!("{:.1}s", ns as f64 / 1e9),
        }
    }

    /// A signed `ns` in this unit.
    pub(crate) fn fmt_signed(self, ns: i64) -> String {
        if ns < 0 {
            format!("-{}", self.fmt(ns.unsigned_abs()))
        } else {
            self.fmt(ns as u64)
        }
    }
}
