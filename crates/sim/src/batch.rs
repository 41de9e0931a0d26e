//! Several runs of one hierarchy with different seeds, and their summary.
//!
//! One seed's deadline misses may be luck: a researcher comparing two
//! hierarchies wants the spread over many seeds. [`run_seeds`] runs them
//! on worker threads (each run is as deterministic as alone: it shares
//! nothing but the parsed hierarchy), and [`Batch::of`] summarizes the
//! reports: for each thread its share's mean, standard deviation, minimum
//! and maximum, its deadline misses over all runs, and the worst run's
//! lateness, dispatch latency and gap. docs/metrics.md defines each figure.

use crate::report::{clip, fmt_ns, fmt_signed, name_width, pretty_json};
use crate::{Report, SimError, SimOptions};
use hsched_config::Hierarchy;
use serde::Serialize;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Version of the batch JSON schema (bumped as [`crate::SCHEMA_VERSION`]).
pub const BATCH_SCHEMA_VERSION: u32 = 1;

/// Runs `h` once per entry of `seeds` on up to `workers` threads; `opts(i)`
/// gives the options of run `i` (its seed given by `seeds[i]`). `tick` is
/// called on the calling thread about every `every` while runs are under
/// way (to redraw a progress bar). The reports are in the order of
/// `seeds`, whatever the number of workers.
///
/// # Errors
/// A run failed: no new run starts after that, and the seed and error of
/// the failed run with the lowest index are returned.
pub fn run_seeds(
    h: &Hierarchy,
    seeds: &[u64],
    workers: usize,
    opts: &(dyn Fn(usize) -> SimOptions + Sync),
    every: Duration,
    tick: &mut dyn FnMut(),
) -> Result<Vec<Report>, (u64, SimError)> {
    let next = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    let (tx, rx) = mpsc::channel();
    let mut out: Vec<Option<Report>> = seeds.iter().map(|_| None).collect();
    let mut first_error: Option<(usize, SimError)> = None;
    std::thread::scope(|s| {
        for _ in 0..workers.clamp(1, seeds.len().max(1)) {
            let (tx, next, failed) = (tx.clone(), &next, &failed);
            s.spawn(move || loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= seeds.len() || failed.load(Ordering::Relaxed) {
                    break;
                }
                let mut o = opts(i);
                o.seed = Some(seeds[i]);
                let r = crate::run(h, o);
                if r.is_err() {
                    failed.store(true, Ordering::Relaxed);
                }
                if tx.send((i, r)).is_err() {
                    break;
                }
            });
        }
        drop(tx);
        // Ticks keep their pace however often runs end.
        let mut ticked = Instant::now();
        loop {
            match rx.recv_timeout(every.saturating_sub(ticked.elapsed())) {
                Ok((i, Ok(r))) => out[i] = Some(r),
                Ok((i, Err(e))) => {
                    if first_error.as_ref().is_none_or(|(k, _)| i < *k) {
                        first_error = Some((i, e));
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            }
            if ticked.elapsed() >= every {
                tick();
                ticked = Instant::now();
            }
        }
    });
    if let Some((i, e)) = first_error {
        return Err((seeds[i], e));
    }
    // Without an error every index was run once and its report sent.
    Ok(out.into_iter().flatten().collect())
}

/// Mean, standard deviation, minimum and maximum of one figure over runs.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Spread {
    /// Arithmetic mean.
    pub mean: f64,
    /// Sample standard deviation (divided by runs − 1; 0 for one run).
    pub sd: f64,
    /// Smallest value.
    pub min: f64,
    /// Largest value.
    pub max: f64,
}

impl Spread {
    /// The spread of `xs` (all zero when empty).
    pub fn of(xs: &[f64]) -> Spread {
        if xs.is_empty() {
            return Spread {
                mean: 0.0,
                sd: 0.0,
                min: 0.0,
                max: 0.0,
            };
        }
        let n = xs.len() as f64;
        let mean = xs.iter().sum::<f64>() / n;
        let var = if xs.len() > 1 {
            xs.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / (n - 1.0)
        } else {
            0.0
        };
        Spread {
            mean,
            sd: var.sqrt(),
            min: xs.iter().copied().fold(f64::INFINITY, f64::min),
            max: xs.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        }
    }
}

/// Deadline misses over the runs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Misses {
    /// All runs together.
    pub total: u64,
    /// The run with the most.
    pub max: u64,
    /// Runs with at least one.
    pub runs: usize,
}

/// One thread over the runs.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ThreadSummary {
    /// Name.
    pub name: String,
    /// Its `share` (fraction of the machine).
    pub share: Spread,
    /// Completed jobs, all runs together.
    pub jobs: u64,
    /// Missed deadlines.
    pub deadline_misses: Misses,
    /// The largest `max_lateness_ns` of any run, `null` without deadlines.
    pub max_lateness_ns: Option<i64>,
    /// The largest 99th percentile of dispatch latency of any run.
    pub dispatch_latency_p99_ns: Option<i64>,
    /// The largest `max_runnable_gap_ns` of any run.
    pub max_runnable_gap_ns: u64,
    /// Its frames per second, for video and renderer threads.
    pub fps: Option<Spread>,
}

/// One scheduler instance or principal over the runs.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ShareSummary {
    /// Name.
    pub name: String,
    /// Its `share` (fraction of the machine).
    pub share: Spread,
}

/// The machine over the runs, as fractions of its capacity.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MachineSummary {
    /// Idle time.
    pub idle: Spread,
    /// Stolen time.
    pub stolen: Spread,
}

/// The summary of several complete runs of one hierarchy (see the module
/// docs). Serialized field by field in this order.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Batch {
    /// Schema version ([`BATCH_SCHEMA_VERSION`]).
    pub hsched_batch: u32,
    /// Number of runs summarized.
    pub runs: usize,
    /// Their seeds, in order.
    pub seeds: Vec<u64>,
    /// Simulated time of each run.
    pub duration_ns: u64,
    /// Processors.
    pub cpus: usize,
    /// HSI inputs, all runs together.
    pub events: u64,
    /// Threads, in hierarchy-file order.
    pub threads: Vec<ThreadSummary>,
    /// Scheduler instances, in creation order.
    pub schedulers: Vec<ShareSummary>,
    /// Principals, in file order.
    pub principals: Vec<ShareSummary>,
    /// The machine.
    pub machine: MachineSummary,
    /// Every run's own report, in the order of `seeds`.
    pub reports: Vec<Report>,
}

impl Batch {
    /// Summarizes `reports`, runs of one hierarchy (threads, schedulers and
    /// principals are those of the first, found by name in the others).
    pub fn of(reports: Vec<Report>) -> Batch {
        let first = reports.first();
        let capacity = |r: &Report| (r.duration_ns as f64 * r.cpus as f64).max(1.0);
        let threads = first.map_or(&[][..], |r| &r.threads[..]);
        let threads = threads
            .iter()
            .enumerate()
            .map(|(i, t0)| {
                let all: Vec<_> = reports
                    .iter()
                    .filter_map(|r| {
                        r.threads
                            .get(i)
                            .filter(|t| t.name == t0.name)
                            .or_else(|| r.thread(&t0.name))
                    })
                    .collect();
                let misses: Vec<u64> = all.iter().map(|t| t.deadline_misses).collect();
                let fps: Vec<f64> = all.iter().filter_map(|t| t.fps).collect();
                ThreadSummary {
                    name: t0.name.clone(),
                    share: Spread::of(&all.iter().map(|t| t.share).collect::<Vec<_>>()),
                    jobs: all.iter().map(|t| t.jobs).sum(),
                    deadline_misses: Misses {
                        total: misses.iter().sum(),
                        max: misses.iter().copied().max().unwrap_or(0),
                        runs: misses.iter().filter(|&&m| m > 0).count(),
                    },
                    max_lateness_ns: all.iter().filter_map(|t| t.max_lateness_ns).max(),
                    dispatch_latency_p99_ns: all
                        .iter()
                        .filter_map(|t| t.dispatch_latency_ns.as_ref().map(|d| d.p99))
                        .max(),
                    max_runnable_gap_ns: all
                        .iter()
                        .map(|t| t.max_runnable_gap_ns)
                        .max()
                        .unwrap_or(0),
                    fps: (!fps.is_empty()).then(|| Spread::of(&fps)),
                }
            })
            .collect();
        let shares = |names: Vec<&str>, share: &dyn Fn(&Report, &str) -> Option<f64>| {
            names
                .into_iter()
                .map(|name| ShareSummary {
                    name: name.to_string(),
                    share: Spread::of(
                        &reports
                            .iter()
                            .filter_map(|r| share(r, name))
                            .collect::<Vec<_>>(),
                    ),
                })
                .collect::<Vec<_>>()
        };
        let schedulers = shares(
            first.map_or(vec![], |r| {
                r.schedulers.iter().map(|s| s.name.as_str()).collect()
            }),
            &|r, n| r.scheduler(n).map(|s| s.share),
        );
        let principals = shares(
            first.map_or(vec![], |r| {
                r.principals.iter().map(|p| p.name.as_str()).collect()
            }),
            &|r, n| r.principals.iter().find(|p| p.name == n).map(|p| p.share),
        );
        let machine = MachineSummary {
            idle: Spread::of(
                &reports
                    .iter()
                    .map(|r| r.machine.idle_ns as f64 / capacity(r))
                    .collect::<Vec<_>>(),
            ),
            stolen: Spread::of(
                &reports
                    .iter()
                    .map(|r| r.machine.stolen_ns as f64 / capacity(r))
                    .collect::<Vec<_>>(),
            ),
        };
        Batch {
            hsched_batch: BATCH_SCHEMA_VERSION,
            runs: reports.len(),
            seeds: reports.iter().map(|r| r.seed).collect(),
            duration_ns: first.map_or(0, |r| r.duration_ns),
            cpus: first.map_or(0, |r| r.cpus),
            events: reports.iter().map(|r| r.events).sum(),
            threads,
            schedulers,
            principals,
            machine,
            reports,
        }
    }

    /// The summary as pretty-printed JSON, newline-terminated.
    pub fn to_json(&self) -> String {
        pretty_json(self)
    }

    /// The summary as a table for terminals.
    pub fn to_table(&self) -> String {
        let mut s = String::new();
        let seeds = match (self.seeds.first(), self.seeds.last()) {
            (Some(a), Some(b)) if self.seeds.len() > 1 => format!("seeds {a} to {b}"),
            (Some(a), _) => format!("seed {a}"),
            _ => "no seeds".to_string(),
        };
        let _ = writeln!(
            s,
            "{} runs of {} on {} cpu(s), {seeds}, {} HSI inputs in all",
            self.runs,
            fmt_ns(self.duration_ns),
            self.cpus,
            self.events
        );
        let _ = writeln!(
            s,
            "share%: mean, sd, min, max over the runs; misses: all runs, and how many runs had any;\n\
             max late, p99 lat, max gap: the worst run's; fps: the lowest run's"
        );
        let _ = writeln!(s);
        let w = name_width(self.threads.iter().map(|t| t.name.as_str()), 6);
        let _ = writeln!(
            s,
            "{:<w$} {:>7} {:>6} {:>7} {:>7} {:>8} {:>5} {:>10} {:>10} {:>10} {:>7}",
            "thread",
            "share%",
            "sd",
            "min",
            "max",
            "misses",
            "runs",
            "max late",
            "p99 lat",
            "max gap",
            "fps"
        );
        for t in &self.threads {
            let _ = writeln!(
                s,
                "{:<w$} {} {:>8} {:>5} {:>10} {:>10} {:>10} {:>7}",
                clip(&t.name, w),
                percents(&t.share),
                t.deadline_misses.total,
                t.deadline_misses.runs,
                t.max_lateness_ns.map_or("-".to_string(), fmt_signed),
                t.dispatch_latency_p99_ns
                    .map_or("-".to_string(), |p| fmt_ns(p.max(0) as u64)),
                fmt_ns(t.max_runnable_gap_ns),
                t.fps
                    .as_ref()
                    .map_or("-".to_string(), |f| format!("{:.1}", f.min)),
            );
        }
        for (title, list) in [
            ("scheduler", &self.schedulers),
            ("principal", &self.principals),
        ] {
            if list.is_empty() {
                continue;
            }
            let _ = writeln!(s);
            let w = name_width(list.iter().map(|x| x.name.as_str()), 9);
            let _ = writeln!(
                s,
                "{title:<w$} {:>7} {:>6} {:>7} {:>7}",
                "share%", "sd", "min", "max"
            );
            for x in list {
                let _ = writeln!(s, "{:<w$} {}", clip(&x.name, w), percents(&x.share));
            }
        }
        let m = &self.machine;
        let _ = writeln!(s);
        let _ = writeln!(
            s,
            "machine: idle {:.2}% (min {:.2}, max {:.2}), stolen {:.2}% (min {:.2}, max {:.2})",
            m.idle.mean * 100.0,
            m.idle.min * 100.0,
            m.idle.max * 100.0,
            m.stolen.mean * 100.0,
            m.stolen.min * 100.0,
            m.stolen.max * 100.0
        );
        s
    }
}

/// `mean sd min max` of a fraction, in percent, in the table's columns.
fn percents(x: &Spread) -> String {
    format!(
        "{:>7.2} {:>6.2} {:>7.2} {:>7.2}",
        x.mean * 100.0,
        x.sd * 100.0,
        x.min * 100.0,
        x.max * 100.0
    )
}
