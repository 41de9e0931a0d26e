//! Several runs of one hierarchy with different seeds, and their summary.
//!
//! One seed's deadline misses may be luck: a researcher comparing two
//! hierarchies wants the spread over many seeds. [`run_seeds`] runs them
//! on worker threads (each run is as deterministic as alone: it shares
//! nothing but the parsed hierarchy) and hands their reports over in the
//! order of the seeds; [`BatchBuilder`] folds them, one at a time, into a
//! [`Batch`]: for each thread its share's mean, standard deviation, minimum
//! and maximum, its deadline misses over all runs, and the worst run's
//! lateness, dispatch latency and gap. docs/metrics.md defines each figure.
//!
//! Memory does not grow with the number of runs: at most one report per
//! worker waits for the runs before it, each figure is folded in at once
//! (Welford's method for the standard deviations), and only the reports
//! kept for the JSON wait in a temporary file.

use crate::report::{clip, fmt_ns, name_width, pretty_json, Unit};
use crate::{Report, SimError, SimOptions, ThreadReport};
use hsched_config::Hierarchy;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::{self, Write as _};
use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Seek, Write};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

/// Version of the batch JSON schema (bumped as [`crate::SCHEMA_VERSION`]).
pub const BATCH_SCHEMA_VERSION: u32 = 1;

/// Why [`run_seeds`] ended before every run was handed over.
#[derive(Debug)]
pub enum BatchError {
    /// A run failed: the failed run with the lowest index.
    Run {
        /// Its seed, which replays it alone.
        seed: u64,
        /// Why it failed.
        error: SimError,
    },
    /// The caller could not take a report (e.g. its temporary file).
    Take(io::Error),
}

impl fmt::Display for BatchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BatchError::Run { seed, error } => {
                write!(f, "the run with seed {seed} failed: {error}")
            }
            BatchError::Take(e) => write!(f, "cannot summarize the runs: {e}"),
        }
    }
}

impl std::error::Error for BatchError {}

/// Which runs the workers may start.
struct Gate {
    /// The next run to start.
    next: usize,
    /// The next run to hand over.
    handed: usize,
    /// Start no more runs.
    halt: bool,
}

/// The gate, even after a worker panicked (the scope passes the panic on).
fn lock(m: &Mutex<Gate>) -> MutexGuard<'_, Gate> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Runs `h` once per entry of `seeds` on up to `workers` threads; `opts(i)`
/// gives the options of run `i` (its seed given by `seeds[i]`). Each
/// report goes to `take`, on the calling thread, in the order of `seeds`,
/// whatever the number of workers: a run starts only while fewer than
/// `workers` runs before it are still to be handed over, so at most
/// `workers` finished reports wait. `tick` is called on the calling thread
/// about every `every` while runs are under way (to redraw a progress
/// bar). After a report marked [`Report::interrupted`] (its
/// [`SimOptions::stop`] was raised) no new run starts.
///
/// # Errors
/// A run failed or `take` did: no new run starts after that. For failed
/// runs, the seed and error of the one with the lowest index.
pub fn run_seeds(
    h: &Hierarchy,
    seeds: &[u64],
    workers: usize,
    opts: &(dyn Fn(usize) -> SimOptions + Sync),
    every: Duration,
    tick: &mut dyn FnMut(),
    take: &mut dyn FnMut(Report) -> io::Result<()>,
) -> Result<(), BatchError> {
    let workers = workers.clamp(1, seeds.len().max(1));
    let gate = Mutex::new(Gate {
        next: 0,
        handed: 0,
        halt: false,
    });
    let moved = Condvar::new();
    let (tx, rx) = mpsc::channel();
    let mut first_error: Option<(usize, SimError)> = None;
    let mut take_error = None;
    std::thread::scope(|s| {
        for _ in 0..workers {
            let (tx, gate, moved) = (tx.clone(), &gate, &moved);
            s.spawn(move || loop {
                let i = {
                    let mut g = lock(gate);
                    while !g.halt && g.next < seeds.len() && g.next >= g.handed + workers {
                        g = moved.wait(g).unwrap_or_else(PoisonError::into_inner);
                    }
                    if g.halt || g.next >= seeds.len() {
                        break;
                    }
                    g.next += 1;
                    g.next - 1
                };
                let mut o = opts(i);
                o.seed = Some(seeds[i]);
                if tx.send((i, crate::run(h, o))).is_err() {
                    break;
                }
            });
        }
        drop(tx);
        let halt = || {
            lock(&gate).halt = true;
            moved.notify_all();
        };
        // Finished runs that wait for those before them.
        let mut waiting: BTreeMap<usize, Report> = BTreeMap::new();
        let mut handed = 0;
        // Ticks keep their pace however often runs end.
        let mut ticked = Instant::now();
        loop {
            match rx.recv_timeout(every.saturating_sub(ticked.elapsed())) {
                Ok((i, Ok(r))) => {
                    if r.interrupted {
                        halt();
                    }
                    waiting.insert(i, r);
                    while let Some(r) = waiting.remove(&handed) {
                        handed += 1;
                        if first_error.is_none() && take_error.is_none() {
                            if let Err(e) = take(r) {
                                take_error = Some(e);
                                halt();
                            }
                        }
                    }
                    lock(&gate).handed = handed;
                    moved.notify_all();
                }
                Ok((i, Err(e))) => {
                    halt();
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
    if let Some((i, error)) = first_error {
        return Err(BatchError::Run {
            seed: seeds[i],
            error,
        });
    }
    take_error.map_or(Ok(()), |e| Err(BatchError::Take(e)))
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
        let mut f = Fold::EMPTY;
        xs.iter().for_each(|&x| f.add(x));
        f.spread()
    }
}

/// One figure's running totals over the runs, for its [`Spread`], in one
/// pass: the sum for the mean, and Welford's running mean and sum of
/// squared deviations for the standard deviation (stable where the
/// deviations are tiny against the values, as shares over many runs of one
/// hierarchy are).
#[derive(Clone, Copy, Debug)]
struct Fold {
    n: usize,
    sum: f64,
    running: f64,
    m2: f64,
    min: f64,
    max: f64,
}

impl Fold {
    /// `sum` starts where `Iterator::sum` does, so that a mean is the same
    /// to the bit.
    const EMPTY: Fold = Fold {
        n: 0,
        sum: -0.0,
        running: 0.0,
        m2: 0.0,
        min: f64::INFINITY,
        max: f64::NEG_INFINITY,
    };

    fn add(&mut self, x: f64) {
        self.n += 1;
        self.sum += x;
        let d = x - self.running;
        self.running += d / self.n as f64;
        self.m2 += d * (x - self.running);
        self.min = self.min.min(x);
        self.max = self.max.max(x);
    }

    fn mean(&self) -> f64 {
        self.sum / self.n as f64
    }

    fn spread(&self) -> Spread {
        if self.n == 0 {
            return Spread {
                mean: 0.0,
                sd: 0.0,
                min: 0.0,
                max: 0.0,
            };
        }
        let n = self.n as f64;
        let var = if self.n > 1 { self.m2 / (n - 1.0) } else { 0.0 };
        Spread {
            mean: self.mean(),
            sd: var.sqrt(),
            min: self.min,
            max: self.max,
        }
    }
}

/// Deadline misses over the runs.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
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
/// docs), made by [`BatchBuilder`]. Serialized field by field in this
/// order; [`Batch::write_json`] adds the runs' own reports.
#[derive(Debug, Serialize)]
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
    /// Every run's own report as JSON, nested as in the summary's
    /// `reports` (kept only when asked for).
    #[serde(skip)]
    reports: Option<File>,
}

/// The figures of one thread over the runs that are not spreads.
#[derive(Debug, Default)]
struct ThreadTotals {
    jobs: u64,
    misses: Misses,
    max_lateness_ns: Option<i64>,
    p99_ns: Option<i64>,
    max_gap_ns: u64,
}

impl ThreadTotals {
    fn add(&mut self, t: &ThreadReport) {
        let m = t.deadline_misses;
        self.jobs += t.jobs;
        self.misses.total += m;
        self.misses.max = self.misses.max.max(m);
        self.misses.runs += usize::from(m > 0);
        // `None` orders before any value: the largest of those the runs have.
        self.max_lateness_ns = self.max_lateness_ns.max(t.max_lateness_ns);
        self.p99_ns = self
            .p99_ns
            .max(t.dispatch_latency_ns.as_ref().map(|d| d.p99));
        self.max_gap_ns = self.max_gap_ns.max(t.max_runnable_gap_ns);
    }
}

/// Folds the reports of complete runs of one hierarchy, in seed order,
/// into a [`Batch`]. Threads, schedulers and principals are those of the
/// first report, found by name in the others. Each report's figures with a
/// spread (thread shares and frame rates, scheduler and principal shares,
/// idle and stolen time, in that order) are folded in at once; the reports
/// themselves, when kept for [`Batch::write_json`], wait in a temporary
/// file.
#[derive(Debug)]
pub struct BatchBuilder {
    seeds: Vec<u64>,
    duration_ns: u64,
    cpus: usize,
    events: u64,
    threads: Vec<(String, ThreadTotals)>,
    schedulers: Vec<String>,
    principals: Vec<String>,
    /// One per figure with a spread, in the order above.
    folds: Vec<Fold>,
    reports: Option<BufWriter<File>>,
}

impl BatchBuilder {
    /// An empty summary; `keep_reports` keeps every report for the JSON.
    ///
    /// # Errors
    /// With `keep_reports`, a temporary file cannot be created (see
    /// [`std::env::temp_dir`]).
    pub fn new(keep_reports: bool) -> io::Result<BatchBuilder> {
        Ok(BatchBuilder {
            seeds: Vec::new(),
            duration_ns: 0,
            cpus: 0,
            events: 0,
            threads: Vec::new(),
            schedulers: Vec::new(),
            principals: Vec::new(),
            // A summary without threads has the machine's two.
            folds: vec![Fold::EMPTY; 2],
            reports: if keep_reports {
                Some(BufWriter::new(scratch_file()?))
            } else {
                None
            },
        })
    }

    /// Folds in the next run's report.
    ///
    /// # Errors
    /// Writing a temporary file failed (a full disk).
    pub fn add(&mut self, r: &Report) -> io::Result<()> {
        if self.seeds.is_empty() {
            self.duration_ns = r.duration_ns;
            self.cpus = r.cpus;
            self.threads = r
                .threads
                .iter()
                .map(|t| (t.name.clone(), ThreadTotals::default()))
                .collect();
            self.schedulers = r.schedulers.iter().map(|s| s.name.clone()).collect();
            self.principals = r.principals.iter().map(|p| p.name.clone()).collect();
            let figures =
                2 * self.threads.len() + self.schedulers.len() + self.principals.len() + 2;
            self.folds = vec![Fold::EMPTY; figures];
        }
        let mut row = Vec::with_capacity(self.folds.len());
        for (k, (name, totals)) in self.threads.iter_mut().enumerate() {
            let t = named(&r.threads, k, name, |t| &t.name);
            row.push(t.map(|t| t.share));
            row.push(t.and_then(|t| t.fps));
            if let Some(t) = t {
                totals.add(t);
            }
        }
        for (k, name) in self.schedulers.iter().enumerate() {
            row.push(named(&r.schedulers, k, name, |s| &s.name).map(|s| s.share));
        }
        for (k, name) in self.principals.iter().enumerate() {
            row.push(named(&r.principals, k, name, |p| &p.name).map(|p| p.share));
        }
        let capacity = (r.duration_ns as f64 * r.cpus as f64).max(1.0);
        row.push(Some(r.machine.idle_ns as f64 / capacity));
        row.push(Some(r.machine.stolen_ns as f64 / capacity));
        for (fold, x) in self.folds.iter_mut().zip(&row) {
            if let Some(x) = x {
                fold.add(*x);
            }
        }
        if let Some(out) = &mut self.reports {
            out.write_all(if self.seeds.is_empty() { b"\n" } else { b",\n" })?;
            out.write_all(REPORT_INDENT)?;
            // Buffered before the indenting, which then sees long stretches.
            let mut json = BufWriter::new(Indented(&mut *out));
            serde_json::to_writer_pretty(&mut json, r)?;
            json.flush()?;
        }
        self.seeds.push(r.seed);
        self.events += r.events;
        Ok(())
    }

    /// The summary of the runs folded in.
    ///
    /// # Errors
    /// Reading a temporary file back failed.
    pub fn finish(self) -> io::Result<Batch> {
        let BatchBuilder {
            seeds,
            duration_ns,
            cpus,
            events,
            threads,
            schedulers,
            principals,
            folds,
            reports,
        } = self;
        let spread = |k: usize| folds[k].spread();
        let shares = |names: Vec<String>, first: usize| {
            names
                .into_iter()
                .enumerate()
                .map(|(k, name)| ShareSummary {
                    name,
                    share: spread(first + k),
                })
                .collect::<Vec<_>>()
        };
        let n = threads.len();
        let schedulers = shares(schedulers, 2 * n);
        let principals = shares(principals, 2 * n + schedulers.len());
        let threads = threads
            .into_iter()
            .enumerate()
            .map(|(k, (name, t))| ThreadSummary {
                name,
                share: spread(2 * k),
                jobs: t.jobs,
                deadline_misses: t.misses,
                max_lateness_ns: t.max_lateness_ns,
                dispatch_latency_p99_ns: t.p99_ns,
                max_runnable_gap_ns: t.max_gap_ns,
                fps: (folds[2 * k + 1].n > 0).then(|| spread(2 * k + 1)),
            })
            .collect();
        let last = folds.len();
        Ok(Batch {
            hsched_batch: BATCH_SCHEMA_VERSION,
            runs: seeds.len(),
            seeds,
            duration_ns,
            cpus,
            events,
            threads,
            schedulers,
            principals,
            machine: MachineSummary {
                idle: spread(last - 2),
                stolen: spread(last - 1),
            },
            reports: reports.map(rewound).transpose()?,
        })
    }
}

/// The entry of `list` named `name`: the `k`th if it is (runs of one
/// hierarchy list them in the same order), else the first so named.
fn named<'a, T>(list: &'a [T], k: usize, name: &str, name_of: fn(&T) -> &String) -> Option<&'a T> {
    list.get(k)
        .filter(|x| name_of(x) == name)
        .or_else(|| list.iter().find(|x| name_of(x) == name))
}

/// Where a report starts in the summary's JSON: in `reports`, two levels
/// deep.
const REPORT_INDENT: &[u8] = b"    ";

/// Writes pretty-printed JSON nested [`REPORT_INDENT`] deep: the indent
/// after every line break (JSON strings escape theirs).
struct Indented<W>(W);

impl<W: Write> Write for Indented<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        for (k, line) in buf.split(|&b| b == b'\n').enumerate() {
            if k > 0 {
                self.0.write_all(b"\n")?;
                self.0.write_all(REPORT_INDENT)?;
            }
            self.0.write_all(line)?;
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}

/// A file of its own in the temporary directory, removed from the
/// directory at once: it is gone when closed, however the process ends.
fn scratch_file() -> io::Result<File> {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::temp_dir();
    loop {
        let name = format!(
            "hsched-runs-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let path = dir.join(name);
        match OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)
        {
            Ok(file) => return std::fs::remove_file(&path).map(|()| file),
            // Left by another process that had this id.
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => {
                return Err(io::Error::new(
                    e.kind(),
                    format!("cannot create a temporary file in {}: {e}", dir.display()),
                ))
            }
        }
    }
}

/// The file `out` wrote, flushed, to be read from its start.
fn rewound(out: BufWriter<File>) -> io::Result<File> {
    let mut file = out.into_inner().map_err(io::IntoInnerError::into_error)?;
    file.rewind()?;
    Ok(file)
}

impl Batch {
    /// Writes the summary as pretty-printed JSON, newline-terminated, with
    /// every run's report in `reports` (last) if the builder kept them.
    ///
    /// # Errors
    /// Writing to `out`, or reading the reports back, failed.
    pub fn write_json(&self, out: &mut dyn Write) -> io::Result<()> {
        let Some(mut reports) = self.reports.as_ref() else {
            return out.write_all(pretty_json(self).as_bytes());
        };
        let summary = serde_json::to_string_pretty(self)?;
        // `reports` goes in before the closing brace.
        let head = summary
            .strip_suffix("\n}")
            .ok_or_else(|| io::Error::other("the summary is not a JSON object"))?;
        out.write_all(head.as_bytes())?;
        if self.runs == 0 {
            return out.write_all(b",\n  \"reports\": []\n}\n");
        }
        out.write_all(b",\n  \"reports\": [")?;
        reports.rewind()?;
        io::copy(&mut reports, out)?;
        out.write_all(b"\n  ]\n}\n")
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
        // One unit per column.
        let late = Unit::of(
            self.threads
                .iter()
                .filter_map(|t| t.max_lateness_ns.map(i64::unsigned_abs)),
        );
        let p99 = Unit::of(
            self.threads
                .iter()
                .filter_map(|t| t.dispatch_latency_p99_ns.map(|p| p.max(0) as u64)),
        );
        let gap = Unit::of(self.threads.iter().map(|t| t.max_runnable_gap_ns));
        for t in &self.threads {
            let _ = writeln!(
                s,
                "{:<w$} {} {:>8} {:>5} {:>10} {:>10} {:>10} {:>7}",
                clip(&t.name, w),
                percents(&t.share),
                t.deadline_misses.total,
                t.deadline_misses.runs,
                t.max_lateness_ns
                    .map_or("-".to_string(), |n| late.fmt_signed(n)),
                t.dispatch_latency_p99_ns
                    .map_or("-".to_string(), |p| p99.fmt(p.max(0) as u64)),
                gap.fmt(t.max_runnable_gap_ns),
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;

    fn home() -> Hierarchy {
        let text = include_str!("../../../examples/home-computer.toml");
        hsched_config::parse_str(text, "home-computer.toml").unwrap()
    }

    fn lasting(d: Duration) -> SimOptions {
        SimOptions {
            duration: Some(hsched_core::Duration::from_nanos(d.as_nanos() as u64)),
            ..SimOptions::default()
        }
    }

    /// Runs `seeds` and returns the reports in the order `take` got them.
    fn handed_over(
        h: &Hierarchy,
        seeds: &[u64],
        workers: usize,
        opts: &(dyn Fn(usize) -> SimOptions + Sync),
    ) -> Result<Vec<Report>, BatchError> {
        let mut got = Vec::new();
        run_seeds(
            h,
            seeds,
            workers,
            opts,
            Duration::from_millis(1),
            &mut || {},
            &mut |r| {
                got.push(r);
                Ok(())
            },
        )?;
        Ok(got)
    }

    #[test]
    fn no_run_starts_more_than_the_workers_ahead_of_the_next_handed_over() {
        // The first run starts late: without the bound the other worker
        // ran every later seed meanwhile, and all their reports waited.
        let h = home();
        let seeds: Vec<u64> = (0..24).collect();
        let started = AtomicUsize::new(0);
        let opts = |i: usize| {
            started.fetch_max(i, Ordering::SeqCst);
            let t0 = Instant::now();
            while i == 0
                && started.load(Ordering::SeqCst) < seeds.len() - 1
                && t0.elapsed() < Duration::from_millis(300)
            {
                std::thread::sleep(Duration::from_millis(1));
            }
            lasting(Duration::from_millis(1))
        };
        let mut handed = 0;
        run_seeds(
            &h,
            &seeds,
            2,
            &opts,
            Duration::from_millis(1),
            &mut || {},
            &mut |r| {
                assert_eq!(r.seed, seeds[handed]);
                let ahead = started.load(Ordering::SeqCst);
                assert!(
                    ahead < handed + 2,
                    "run {ahead} started before run {handed} was handed over"
                );
                handed += 1;
                Ok(())
            },
        )
        .unwrap();
        assert_eq!(handed, seeds.len());
    }

    #[test]
    fn no_run_starts_after_an_interrupted_one() {
        let h = home();
        let seeds: Vec<u64> = (0..50).collect();
        let stop = Arc::new(AtomicBool::new(true));
        let opts = |_| SimOptions {
            stop: Some(Arc::clone(&stop)),
            ..lasting(Duration::from_secs(1))
        };
        let got = handed_over(&h, &seeds, 2, &opts).unwrap();
        assert!(got.iter().all(|r| r.interrupted));
        assert!(got.len() <= 2, "{} runs after the stop", got.len());
    }

    #[test]
    fn a_failure_to_take_a_report_ends_the_batch() {
        let h = home();
        let seeds: Vec<u64> = (0..50).collect();
        let started = AtomicUsize::new(0);
        let opts = |_| {
            started.fetch_add(1, Ordering::SeqCst);
            lasting(Duration::from_millis(1))
        };
        let e = run_seeds(
            &h,
            &seeds,
            2,
            &opts,
            Duration::from_millis(1),
            &mut || {},
            &mut |_| Err(io::Error::other("disk full")),
        )
        .unwrap_err();
        assert!(matches!(e, BatchError::Take(_)), "{e}");
        assert!(started.into_inner() <= 4);
    }

    #[test]
    fn the_json_is_the_summary_then_every_report() {
        #[derive(Serialize)]
        struct Whole<'a> {
            #[serde(flatten)]
            summary: &'a Batch,
            reports: &'a [Report],
        }
        let h = home();
        let opts = |_| lasting(Duration::from_millis(300));
        let reports = handed_over(&h, &[4, 9, 2], 3, &opts).unwrap();
        let mut b = BatchBuilder::new(true).unwrap();
        for r in &reports {
            b.add(r).unwrap();
        }
        let batch = b.finish().unwrap();
        let mut out = Vec::new();
        batch.write_json(&mut out).unwrap();
        let whole = pretty_json(&Whole {
            summary: &batch,
            reports: &reports,
        });
        assert_eq!(String::from_utf8(out).unwrap(), whole);
        let t = &batch.threads[0];
        let shares: Vec<f64> = reports.iter().map(|r| r.threads[0].share).collect();
        assert_eq!(t.share, Spread::of(&shares));
    }

    #[test]
    fn an_empty_summary_is_all_zero() {
        let batch = BatchBuilder::new(true).unwrap().finish().unwrap();
        assert_eq!((batch.runs, batch.machine.idle.max), (0, 0.0));
        let mut out = Vec::new();
        batch.write_json(&mut out).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["reports"], serde_json::json!([]));
        let mut without = Vec::new();
        let b = BatchBuilder::new(false).unwrap().finish().unwrap();
        b.write_json(&mut without).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&without).unwrap();
        assert!(v.get("reports").is_none());
    }

    #[test]
    fn the_spread_is_exact_far_from_zero() {
        // Sample standard deviation of 4, 7, 13, 16: √30. The naive sum of
        // squares minus n·mean² loses it entirely at 1e9 offsets.
        for offset in [0.0, 1e9, 1e12] {
            let xs = [4.0, 7.0, 13.0, 16.0].map(|x| x + offset);
            let s = Spread::of(&xs);
            assert!((s.sd - 30f64.sqrt()).abs() < 1e-9, "{offset}: {s:?}");
            assert_eq!((s.mean, s.min, s.max), (offset + 10.0, xs[0], xs[3]));
        }
        assert_eq!(Spread::of(&[0.25]).sd, 0.0);
    }
}
