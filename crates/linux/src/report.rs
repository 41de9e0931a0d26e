//! The live report: the simulator's report shape (docs/metrics.md), with
//! every figure measured on the machine, plus what only live mode has
//! (notification latency, enforcement counts, the daemon's own CPU use).

use crate::daemon::Daemon;
use serde_json::{json, Value};
use std::fmt::Write as _;
use std::sync::atomic::Ordering;

/// Version of the JSON report schema (shared with the simulator).
pub const SCHEMA_VERSION: u32 = 1;

/// Counters the daemon keeps while running.
#[derive(Clone, Debug, Default)]
pub struct LiveStats {
    /// Notification latencies (kernel event → HSI input), ns: of the
    /// records that fed the HSI an input (wake, block, create, exit).
    pub latency: Vec<u64>,
    /// HSI wake inputs.
    pub wakes: u64,
    /// HSI block inputs.
    pub blocks: u64,
    /// HSI thread creations.
    pub creates: u64,
    /// HSI exits.
    pub exits: u64,
    /// Control and timed operations.
    pub operations: u64,
    /// Threads frozen.
    pub freezes: u64,
    /// Threads thawed.
    pub thaws: u64,
    /// Threads put on a CPU.
    pub dispatches: u64,
    /// Hierarchy (protocol) errors reported by the HSI.
    pub protocol_errors: u64,
    /// CPU time of the daemon's thread since its loop began.
    pub daemon_cpu_ns: u64,
    /// Of that, the time in its pumps (reading records, the HSI,
    /// enforcement; not waiting for and waking up to them).
    pub pump_cpu_ns: u64,
    /// Times the daemon's loop woke up (returns from `epoll_wait`).
    pub wakeups: u64,
    /// Wake-ups recovered by the procfs sweep (missed events).
    pub resyncs: u64,
    /// Why the run ended.
    pub ended_by: String,
    /// The programs of the file that could not be launched: name, why.
    pub launch_failures: Vec<(String, String)>,
    /// Policies loaded, unloaded (by request, or because a plug-in
    /// failed) and replaced during the run, in order.
    pub policy_changes: Vec<crate::loadable::PolicyChange>,
    /// Where stolen time was measured (`off`, `procstat`, `trace`).
    pub stolen_source: String,
    /// Stolen time measured per managed CPU, ns.
    pub stolen_measured_ns: Vec<u64>,
    /// Stolen time fed to the HSI per managed CPU (measured while the
    /// hierarchy ran a thread there), ns.
    pub stolen_fed_ns: Vec<u64>,
    /// `Hsi::add_stolen` calls.
    pub stolen_reports: u64,
    /// Real-time governor (enforce.rs `RtGovernor`): non-real-time time
    /// required per block, ns (0: governor off).
    pub rt_quota_ns: u64,
    /// Granted threads demoted to `SCHED_OTHER` to meet the quota.
    pub rt_demotions: u64,
    /// Of those, threads granted through a reservation (the quota could
    /// not be met from best-effort time).
    pub rt_forced: u64,
    /// Time granted threads spent demoted, ns.
    pub rt_demoted_ns: u64,
    /// Grace given to a revoked reservation thread, ns (0: off).
    pub grace_ns: u64,
    /// The most added to it for time the grant did not reach the thread.
    pub lost_cap_ns: u64,
    /// Freezes deferred by that grace.
    pub deferred_freezes: u64,
    /// Of those, deferred further by the time the grant did not reach the
    /// thread (count), and that time in total (ns).
    pub lost_deferrals: u64,
    /// See `lost_deferrals`.
    pub lost_deferred_ns: u64,
    /// How late the daemon handled each expiry of an HSI timer (its
    /// timerfd wake-up, after any early-wake spin), ns.
    pub timer_late_ns: Vec<u64>,
    /// CPU time spent spinning before HSI timers (`HSCHED_LIVE_EARLY`),
    /// ns; counted in `daemon_cpu_ns`.
    pub spin_ns: u64,
    /// Whether `signal:signal_generate` is observed (else only the 200 ms
    /// sweep finds fatal signals to frozen threads).
    pub signals_watched: bool,
    /// `signal_generate` records applied (possibly fatal signals sent to
    /// any process, filtered in the kernel).
    pub signal_records: u64,
    /// `/proc` checks of a managed thread for a fatal pending signal.
    pub fatal_checks: u64,
    /// Frozen threads thawed because a fatal signal was pending (they then
    /// exit; daemon.rs `leave`).
    pub fatal_thaws: u64,
    /// Of those, found by the periodic sweep rather than a signal record.
    pub fatal_by_sweep: u64,
    /// Times the signal events were paused for a storm of signals to
    /// managed processes (daemon.rs `SIGNAL_BUDGET`).
    pub signal_pauses: u64,
    /// Signal filter updates (the managed threads changed).
    pub filter_updates: u64,
    /// Why idle-context wake-ups are not read from ftrace (ftrace.rs);
    /// empty when they are.
    pub idle_wakes_off: String,
    /// `sched_wakeup` records read from ftrace (idle-context wake-ups of
    /// managed threads).
    pub idle_wake_records: u64,
    /// ftrace pages that reported records dropped (buffer full).
    pub idle_wake_lost_pages: u64,
    /// Whether the ftrace filter lists every managed thread now.
    pub idle_wakes_complete: bool,
    /// Threads the sweep found gone without an exit record (marked
    /// leaving, or missing from `/proc` at two full sweeps in a row), and
    /// removed from the hierarchy.
    pub exits_found: u64,
    /// Managed threads that called `execve` from a thread other than their
    /// process's leader and went on under the leader's tid
    /// (`sched_process_exec`, daemon.rs `rename`).
    pub execs: u64,
    /// Of those, found by the sweep (their exec record lost or late).
    pub execs_found: u64,
    /// New threads a `[[rule]]` placed when they were created.
    pub rule_placed: u64,
    /// Threads a `[[rule]]` moved when they were renamed or called `execve`.
    pub rule_moves: u64,
    /// The kernel backend's adaptive reservations (`realrate`).
    pub adapt: AdaptStats,
    /// Per fatal thaw found from a record, from the record's kernel time
    /// (the signal, or a sibling's exit) to the thaw, ns.
    pub fatal_latency_ns: Vec<u64>,
}

/// Counters of the kernel backend's adaptive reservations
/// (`kernel::adapt`).
#[derive(Clone, Debug, Default)]
pub struct AdaptStats {
    /// Controller ticks.
    pub ticks: u64,
    /// Runtimes written.
    pub runtime_changes: u64,
    /// Runtime changes the kernel refused.
    pub refused: u64,
    /// Quality exceptions raised (Steere et al. 1998, §3.1, §4.2).
    pub quality_exceptions: u64,
    /// Queue samples the progress monitor took.
    pub queue_samples: u64,
    /// Progress messages it delivered.
    pub progress_messages: u64,
}

impl LiveStats {
    /// HSI inputs fed for observed events so far (wake, block, create,
    /// exit).
    pub fn inputs(&self) -> u64 {
        self.wakes + self.blocks + self.creates + self.exits
    }
}

/// A latency distribution.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Dist {
    /// Samples.
    pub count: u64,
    /// Median, ns.
    pub median_ns: u64,
    /// 99th percentile, ns.
    pub p99_ns: u64,
    /// Largest, ns.
    pub max_ns: u64,
}

impl Dist {
    /// From samples (sorted in place).
    pub fn of(v: &mut [u64]) -> Dist {
        if v.is_empty() {
            return Dist::default();
        }
        v.sort_unstable();
        Dist {
            count: v.len() as u64,
            median_ns: v[v.len() / 2],
            p99_ns: v[(v.len() * 99 / 100).min(v.len() - 1)],
            max_ns: v[v.len() - 1],
        }
    }
    fn json(&self) -> Value {
        json!({"count": self.count, "median_ns": self.median_ns, "p99_ns": self.p99_ns, "max_ns": self.max_ns})
    }
}

/// One thread.
#[derive(Clone, Debug, PartialEq)]
pub struct ThreadReport {
    /// Name (`spec` for a launched program's first thread, `spec/TID` for
    /// threads it created).
    pub name: String,
    /// Its scheduler at the end.
    pub scheduler: String,
    /// Measured CPU time (`/proc/TID/schedstat`).
    pub cpu_ns: u64,
    /// `cpu_ns / (duration × managed CPUs)`.
    pub share: f64,
    /// CPU time the HSI granted it.
    pub received_ns: u64,
    /// Times put on a CPU.
    pub context_switches: u64,
    /// Times frozen while runnable.
    pub preemptions: u64,
    /// Blocked → runnable transitions.
    pub wakeups: u64,
    /// When it joined, ns from the start.
    pub created_ns: u64,
    /// When it left, if it did.
    pub exited_ns: Option<u64>,
}

/// One launched program or attached process, with what its built-in
/// workload measured (jobs, misses).
#[derive(Clone, Debug, PartialEq)]
pub struct ProgramReport {
    /// Name.
    pub name: String,
    /// Process id.
    pub pid: i32,
    /// The thread spec's principal.
    pub principal: Option<String>,
    /// Workload model, or `exec`.
    pub workload: String,
    /// Threads seen.
    pub threads: usize,
    /// Measured CPU time of all its threads.
    pub cpu_ns: u64,
    /// `cpu_ns / (duration × managed CPUs)`.
    pub share: f64,
    /// Jobs or frames completed (built-in workloads).
    pub jobs: Option<u64>,
    /// Missed deadlines or frames.
    pub deadline_misses: Option<u64>,
    /// Largest lateness (or, for the frame renderer, largest gap over the
    /// allowed one).
    pub max_lateness_ns: Option<i64>,
    /// Wait status, if it ended during the run.
    pub exit_status: Option<i32>,
}

/// One scheduler instance.
#[derive(Clone, Debug, PartialEq)]
pub struct SchedulerReport {
    /// Name.
    pub name: String,
    /// Policy.
    pub policy: String,
    /// CPU time it received from its parents (HSI accounting).
    pub supply_ns: u64,
}

/// Everything a live run measured.
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// Wall-clock length of the run.
    pub duration_ns: u64,
    /// Managed Linux CPUs (HSI processor k is `cpus[k]`).
    pub cpus: Vec<usize>,
    /// HSI inputs.
    pub events: u64,
    /// Threads, live ones first in creation order, then exited ones.
    pub threads: Vec<ThreadReport>,
    /// Programs.
    pub programs: Vec<ProgramReport>,
    /// Schedulers in creation order.
    pub schedulers: Vec<SchedulerReport>,
    /// Principals: (name, cpu_ns, share).
    pub principals: Vec<(String, u64, f64)>,
    /// Event source → HSI latency.
    pub notification_latency: Dist,
    /// Daemon counters.
    pub stats: LiveStats,
    /// Records the kernel dropped.
    pub lost_events: u64,
    /// Perf samples read.
    pub samples: u64,
    /// The kernel's model, when the kernel backend enforced the run
    /// (`--compare` simulates the file as it enforces it).
    pub kernel: Option<crate::kernel::KernelModel>,
}

impl Report {
    /// A thread by name.
    pub fn thread(&self, name: &str) -> Option<&ThreadReport> {
        self.threads.iter().find(|t| t.name == name)
    }
    /// A program by name.
    pub fn program(&self, name: &str) -> Option<&ProgramReport> {
        self.programs.iter().find(|p| p.name == name)
    }

    /// The JSON report (keys of docs/metrics.md plus `live`).
    pub fn to_json(&self) -> String {
        let threads: Vec<Value> = self
            .threads
            .iter()
            .map(|t| {
                json!({"name": t.name, "scheduler": t.scheduler, "cpu_ns": t.cpu_ns, "share": t.share, "received_ns": t.received_ns,
                    "jobs": Value::Null, "deadline_misses": Value::Null, "max_lateness_ns": Value::Null,
                    "context_switches": t.context_switches, "preemptions": t.preemptions, "wakeups": t.wakeups,
                    "created_ns": t.created_ns, "exited_ns": t.exited_ns})
            })
            .collect();
        let programs: Vec<Value> = self
            .programs
            .iter()
            .map(|p| {
                json!({"name": p.name, "pid": p.pid, "principal": p.principal, "workload": p.workload, "threads": p.threads,
                    "cpu_ns": p.cpu_ns, "share": p.share, "jobs": p.jobs, "deadline_misses": p.deadline_misses,
                    "max_lateness_ns": p.max_lateness_ns, "exit_status": p.exit_status})
            })
            .collect();
        let scheds: Vec<Value> = self
            .schedulers
            .iter()
            .map(|s| json!({"name": s.name, "policy": s.policy, "supply_ns": s.supply_ns}))
            .collect();
        let principals: Vec<Value> = self
            .principals
            .iter()
            .map(|(n, c, s)| json!({"name": n, "cpu_ns": c, "share": s}))
            .collect();
        let st = &self.stats;
        let mut v = json!({
            "hsched_report": SCHEMA_VERSION,
            "mode": "live",
            "duration_ns": self.duration_ns,
            "cpus": self.cpus.len(),
            "events": self.events,
            "event_counts": {"wake": st.wakes, "block": st.blocks, "create_thread": st.creates, "exit": st.exits, "operations": st.operations},
            "threads": threads,
            "programs": programs,
            "schedulers": scheds,
            "principals": principals,
            "live": {
                "linux_cpus": self.cpus,
                "notification_latency": self.notification_latency.json(),
                "freezes": st.freezes, "thaws": st.thaws, "dispatches": st.dispatches,
                "lost_events": self.lost_events, "samples": self.samples,
                "protocol_errors": st.protocol_errors,
                "resyncs": st.resyncs,
                "daemon_cpu_ns": st.daemon_cpu_ns,
                "pump_cpu_ns": st.pump_cpu_ns,
                "daemon_wakeups": st.wakeups,
                "timer_lateness": Dist::of(&mut st.timer_late_ns.clone()).json(),
                "spin_ns": st.spin_ns,
                "fatal_thaws": st.fatal_thaws,
                "execs": {"renamed": st.execs, "by_sweep": st.execs_found},
                "signals": {"watched": st.signals_watched, "records": st.signal_records,
                    "checks": st.fatal_checks, "by_sweep": st.fatal_by_sweep, "exits_found": st.exits_found,
                    "pauses": st.signal_pauses, "filter_updates": st.filter_updates,
                    "thaw_latency": Dist::of(&mut st.fatal_latency_ns.clone()).json()},
                "idle_wakes": {"source": if st.idle_wakes_off.is_empty() { "ftrace" } else { "off" },
                    "off_because": (!st.idle_wakes_off.is_empty()).then_some(&st.idle_wakes_off),
                    "records": st.idle_wake_records, "lost_pages": st.idle_wake_lost_pages,
                    "complete": st.idle_wakes_complete},
                "ended_by": st.ended_by,
                "stolen": {"source": st.stolen_source, "measured_ns": st.stolen_measured_ns,
                    "fed_ns": st.stolen_fed_ns, "reports": st.stolen_reports},
                "rt_governor": {"quota_ns": st.rt_quota_ns, "demotions": st.rt_demotions,
                    "forced": st.rt_forced, "demoted_ns": st.rt_demoted_ns,
                    "grace_ns": st.grace_ns, "deferred_freezes": st.deferred_freezes,
                    "lost_cap_ns": st.lost_cap_ns, "lost_deferrals": st.lost_deferrals,
                    "lost_deferred_ns": st.lost_deferred_ns},
            }
        });
        // Apart: one more key inside the macro passes its recursion limit.
        v["live"]["rules"] = json!({"placed": st.rule_placed, "moved": st.rule_moves});
        let a = &st.adapt;
        v["live"]["adaptive"] = json!({"ticks": a.ticks, "runtime_changes": a.runtime_changes,
            "refused": a.refused, "quality_exceptions": a.quality_exceptions,
            "queue_samples": a.queue_samples, "progress_messages": a.progress_messages});
        v["live"]["policy_changes"] = st.policy_changes.iter().map(|c| c.to_json()).collect();
        v["live"]["launch_failures"] = st
            .launch_failures
            .iter()
            .map(|(name, error)| json!({"name": name, "error": error}))
            .collect();
        serde_json::to_string_pretty(&v).unwrap_or_default()
    }

    /// A readable table.
    pub fn to_table(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "live run: {:.3} s on CPU(s) {:?} (ended by {})",
            self.duration_ns as f64 / 1e9,
            self.cpus,
            self.stats.ended_by
        );
        let _ = writeln!(
            s,
            "{:<24} {:>8} {:>10} {:>7} {:>7} {:>7}",
            "program", "threads", "cpu ms", "share", "jobs", "misses"
        );
        for p in &self.programs {
            let opt = |v: Option<u64>| v.map_or("-".to_string(), |v| v.to_string());
            let _ = writeln!(
                s,
                "{:<24} {:>8} {:>10.1} {:>6.1}% {:>7} {:>7}",
                p.name,
                p.threads,
                p.cpu_ns as f64 / 1e6,
                p.share * 100.0,
                opt(p.jobs),
                opt(p.deadline_misses)
            );
        }
        let _ = writeln!(
            s,
            "{:<24} {:<10} {:>10}",
            "scheduler", "policy", "supply ms"
        );
        for sc in &self.schedulers {
            let _ = writeln!(
                s,
                "{:<24} {:<10} {:>10.1}",
                sc.name,
                sc.policy,
                sc.supply_ns as f64 / 1e6
            );
        }
        let a = &self.stats.adapt;
        if a.ticks > 0 {
            let _ = writeln!(
                s,
                "adaptive reservations: {} controller ticks, {} runtime changes ({} refused by the kernel), {} quality exceptions; {} queue samples, {} progress messages",
                a.ticks, a.runtime_changes, a.refused, a.quality_exceptions, a.queue_samples, a.progress_messages
            );
        }
        for c in &self.stats.policy_changes {
            let _ = writeln!(
                s,
                "policy change at {:.3} s: {}",
                c.at_ns as f64 / 1e9,
                c.line
            );
        }
        let l = &self.notification_latency;
        let latency = if l.count == 0 {
            "notification latency: no observed event fed the HSI (no wake-up, block or new thread)"
                .to_string()
        } else {
            format!(
                "notification latency: median {:.1} us, p99 {:.1} us over {} HSI inputs",
                l.median_ns as f64 / 1e3,
                l.p99_ns as f64 / 1e3,
                l.count
            )
        };
        let _ = writeln!(
            s,
            "{latency}; daemon CPU {:.1} ms; lost events {}",
            self.stats.daemon_cpu_ns as f64 / 1e6,
            self.lost_events
        );
        s
    }
}

pub(crate) fn build(d: &mut Daemon, duration: u64) -> Report {
    let machine = (duration.max(1) * d.cpus.len() as u64) as f64;
    let end = d.epoch + duration;
    let mut threads = Vec::new();
    for m in d.threads.values() {
        let sched = d.hsi.instance_name(d.hsi.thread_parent(m.hsi)).to_string();
        threads.push((
            m.group,
            ThreadReport {
                name: m.name.clone(),
                scheduler: sched,
                cpu_ns: m.cpu_ns,
                share: m.cpu_ns as f64 / machine,
                received_ns: d.hsi.thread_received(m.hsi).as_nanos(),
                context_switches: m.grants,
                preemptions: m.freezes,
                wakeups: m.wakeups,
                created_ns: m.created_ns,
                exited_ns: None,
            },
        ));
    }
    for g in &d.gone {
        threads.push((
            g.group,
            ThreadReport {
                name: g.name.clone(),
                scheduler: g.scheduler.clone(),
                cpu_ns: g.cpu_ns,
                share: g.cpu_ns as f64 / machine,
                received_ns: g.received_ns,
                context_switches: g.grants,
                preemptions: g.freezes,
                wakeups: g.wakeups,
                created_ns: g.created_ns,
                exited_ns: Some(g.exited_ns),
            },
        ));
    }
    let mut programs = Vec::new();
    for (gi, g) in d.groups.iter().enumerate() {
        let mine: Vec<&ThreadReport> = threads
            .iter()
            .filter(|(k, _)| *k == gi)
            .map(|(_, t)| t)
            .collect();
        let cpu: u64 = g
            .cpu_ns
            .unwrap_or_else(|| mine.iter().map(|t| t.cpu_ns).sum());
        let spec = g.spec.map(|i| &d.h.threads[i]);
        let slot = g
            .slot
            .and_then(|i| d.slots.get(i))
            .filter(|s| s.used.load(Ordering::Relaxed) != 0);
        let workload = match spec {
            Some(s) if s.exec.is_none() => s
                .workload
                .as_ref()
                .map_or("none", crate::workload_name)
                .to_string(),
            _ if g.launched => "exec".to_string(),
            _ => "attached".to_string(),
        };
        programs.push(ProgramReport {
            name: g.name.clone(),
            pid: g.pid,
            principal: spec.and_then(|s| s.principal.clone()),
            workload,
            threads: mine.len(),
            cpu_ns: cpu,
            share: cpu as f64 / machine,
            jobs: slot.map(|s| s.jobs.load(Ordering::Relaxed)),
            deadline_misses: slot.map(|s| s.misses_at(end)),
            max_lateness_ns: slot
                .map(|s| s.max_lateness.load(Ordering::Relaxed))
                .filter(|&v| v != i64::MIN),
            exit_status: g.exit_status,
        });
    }
    let mut principals = Vec::new();
    for p in &d.h.principals {
        let cpu: u64 = programs
            .iter()
            .filter(|g| g.principal.as_deref() == Some(p.name.as_str()))
            .map(|g| g.cpu_ns)
            .sum();
        principals.push((p.name.clone(), cpu, cpu as f64 / machine));
    }
    let schedulers = d
        .hsi
        .instances()
        .collect::<Vec<_>>()
        .into_iter()
        .map(|i| SchedulerReport {
            name: d.hsi.instance_name(i).to_string(),
            policy: d
                .hsi
                .instance_policy(i)
                .map_or("", |p| p.policy_name())
                .to_string(),
            supply_ns: d.hsi.instance_supply(i).as_nanos(),
        })
        .collect();
    let mut st = d.stats.clone();
    st.rt_quota_ns = d.gov.budget.quota_ns;
    st.rt_demotions = d.gov.demotions;
    st.rt_forced = d.gov.forced;
    st.rt_demoted_ns = d.gov.demoted_ns;
    st.grace_ns = d.gov.budget.grace_ns;
    st.deferred_freezes = d.gov.deferred;
    st.daemon_cpu_ns = d.daemon_cpu_ns();
    st.lost_cap_ns = d.gov.budget.lost_cap_ns;
    st.lost_deferrals = d.gov.lost_deferrals;
    st.lost_deferred_ns = d.gov.lost_ns;
    st.filter_updates = d.obs.filter_updates;
    match &d.idle_wakes {
        Ok(w) => {
            st.idle_wake_records = w.records;
            st.idle_wake_lost_pages = w.lost_pages;
            st.idle_wakes_complete = w.complete;
        }
        Err(e) => st.idle_wakes_off = e.clone(),
    }
    let mut lat = st.latency.clone();
    Report {
        duration_ns: duration,
        cpus: d.cpus.clone(),
        events: st.wakes + st.blocks + st.creates + st.exits + st.operations,
        threads: threads.into_iter().map(|(_, t)| t).collect(),
        programs,
        schedulers,
        principals,
        notification_latency: Dist::of(&mut lat),
        stats: LiveStats {
            latency: Vec::new(),
            ..st
        },
        lost_events: d.obs.lost,
        samples: d.obs.samples,
        kernel: None,
    }
}
