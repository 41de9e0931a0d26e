//! Random periodic task sets for schedulability experiments, seeded and
//! deterministic: the same [`Config`] always gives the same tasks.
//!
//! Utilizations come from UUniFast (Bini & Buttazzo 2005),
//! UUniFast-discard (Davis & Burns 2009) or Stafford's Randfixedsum, as
//! Emberson, Stafford & Davis 2010 recommend for multiprocessor totals;
//! periods are log-uniform between two bounds (Emberson, Stafford & Davis
//! 2010), optionally rounded to a granularity; deadlines are implicit,
//! constrained or arbitrary; jitter is a fraction of the period.
//!
//! [`TaskSet::to_hierarchy`] writes a hierarchy file `hsched check`
//! accepts, [`TaskSet::to_threads`] only the `[[thread]]` tables, to place
//! under a scheduler of another file.
//!
//! ```
//! let cfg = hsched_taskgen::Config { n: 5, utilization: 0.8, seed: 7, ..Default::default() };
//! let set = hsched_taskgen::generate(&cfg).unwrap();
//! assert_eq!(set.tasks.len(), 5);
//! let u: f64 = set.tasks.iter().map(|t| t.exec_ns as f64 / t.period_ns as f64).sum();
//! assert!((u - 0.8).abs() < 1e-3);
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod rng;
mod util;

pub use rng::Rng;
pub use util::{randfixedsum, uunifast, uunifast_discard, DISCARD_LIMIT};

use std::fmt::{self, Write as _};

/// Bad parameters: what is wrong and, where it helps, a hint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    /// The message.
    pub message: String,
}

impl Error {
    fn new(message: impl Into<String>) -> Self {
        Error {
            message: message.into(),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

/// How utilizations are drawn.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Method {
    /// UUniFast: uniform over the simplex; tasks may exceed 1 when the
    /// total does, so a total above 1 is refused.
    #[default]
    Uunifast,
    /// UUniFast, discarding sets with a task above the per-task maximum.
    UunifastDiscard,
    /// Stafford's Randfixedsum: uniform within the per-task bounds, no
    /// rejection.
    Randfixedsum,
}

impl Method {
    /// Its name on the command line and in Python.
    pub fn name(self) -> &'static str {
        match self {
            Method::Uunifast => "uunifast",
            Method::UunifastDiscard => "uunifast-discard",
            Method::Randfixedsum => "randfixedsum",
        }
    }

    /// The method called `name`.
    ///
    /// # Errors
    /// An unknown name, listing the known ones.
    pub fn parse(name: &str) -> Result<Self, Error> {
        match name {
            "uunifast" => Ok(Method::Uunifast),
            "uunifast-discard" => Ok(Method::UunifastDiscard),
            "randfixedsum" => Ok(Method::Randfixedsum),
            _ => Err(Error::new(format!(
                "unknown utilization method `{name}`; expected uunifast, uunifast-discard or randfixedsum"
            ))),
        }
    }
}

/// Relative deadlines.
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub enum Deadlines {
    /// D = T.
    #[default]
    Implicit,
    /// D uniform in [max(C, min_fraction × T), T].
    Constrained {
        /// The shortest deadline as a fraction of the period, in [0, 1].
        min_fraction: f64,
    },
    /// D uniform in [C, max_factor × T]: may exceed the period.
    Arbitrary {
        /// The longest deadline as a multiple of the period, at least 1.
        max_factor: f64,
    },
}

/// What to generate. `Default` gives 10 tasks of total utilization 0.5,
/// UUniFast, periods log-uniform in [10 ms, 1 s] rounded to 1 ms, implicit
/// deadlines, no jitter, seed 0.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// Number of tasks.
    pub n: usize,
    /// Total utilization (above 1 for a multiprocessor).
    pub utilization: f64,
    /// How utilizations are drawn.
    pub method: Method,
    /// Smallest per-task utilization (Randfixedsum only).
    pub min_task_utilization: f64,
    /// Largest per-task utilization (UUniFast-discard and Randfixedsum).
    pub max_task_utilization: f64,
    /// Shortest period, ns.
    pub period_min_ns: u64,
    /// Longest period, ns.
    pub period_max_ns: u64,
    /// Periods are rounded to a multiple of this (ns; 0: not rounded).
    pub granularity_ns: u64,
    /// Relative deadlines.
    pub deadlines: Deadlines,
    /// Release jitter as a fraction of the period, in [0, 1).
    pub jitter: f64,
    /// The seed.
    pub seed: u64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            n: 10,
            utilization: 0.5,
            method: Method::Uunifast,
            min_task_utilization: 0.0,
            max_task_utilization: 1.0,
            period_min_ns: 10_000_000,
            period_max_ns: 1_000_000_000,
            granularity_ns: 1_000_000,
            deadlines: Deadlines::Implicit,
            jitter: 0.0,
            seed: 0,
        }
    }
}

/// The most tasks one set may have (a hierarchy file holds at most
/// 100 000 threads).
pub const MAX_TASKS: usize = 100_000;

/// One periodic task. Times in nanoseconds.
#[derive(Clone, Debug, PartialEq)]
pub struct Task {
    /// `t0`, `t1`, ...
    pub name: String,
    /// The utilization drawn (`exec_ns / period_ns` up to rounding).
    pub utilization: f64,
    /// Period.
    pub period_ns: u64,
    /// Worst-case execution time, at least 1 ns.
    pub exec_ns: u64,
    /// Relative deadline.
    pub deadline_ns: u64,
    /// Largest release delay.
    pub jitter_ns: u64,
}

/// A generated task set, with the configuration that made it.
#[derive(Clone, Debug, PartialEq)]
pub struct TaskSet {
    /// What generated it.
    pub config: Config,
    /// The tasks, in the order drawn.
    pub tasks: Vec<Task>,
}

/// Generates one task set.
///
/// # Errors
/// Parameters out of range, or (UUniFast-discard) no acceptable draw.
pub fn generate(cfg: &Config) -> Result<TaskSet, Error> {
    validate(cfg)?;
    let mut rng = Rng::new(cfg.seed);
    let utils = match cfg.method {
        Method::Uunifast => {
            if cfg.utilization > 1.0 {
                return Err(Error::new(format!(
                    "UUniFast draws a total of at most 1 (got {}): a single task could need more than a processor\n  = hint: use uunifast-discard or randfixedsum for a multiprocessor total",
                    cfg.utilization
                )));
            }
            uunifast(cfg.n, cfg.utilization, &mut rng)?
        }
        Method::UunifastDiscard => {
            uunifast_discard(cfg.n, cfg.utilization, cfg.max_task_utilization, &mut rng)?
        }
        Method::Randfixedsum => randfixedsum(
            cfg.n,
            cfg.utilization,
            cfg.min_task_utilization,
            cfg.max_task_utilization,
            &mut rng,
        )?,
    };
    let periods = log_uniform_periods(
        cfg.n,
        cfg.period_min_ns,
        cfg.period_max_ns,
        cfg.granularity_ns,
        &mut rng,
    )?;
    let tasks = utils
        .iter()
        .zip(&periods)
        .enumerate()
        .map(|(i, (&u, &period_ns))| {
            let exec_ns = ((u * period_ns as f64).round() as u64).max(1);
            let deadline_ns = match cfg.deadlines {
                Deadlines::Implicit => period_ns,
                Deadlines::Constrained { min_fraction } => {
                    let lo = (min_fraction * period_ns as f64).max(exec_ns as f64);
                    let hi = period_ns as f64;
                    uniform_ns(&mut rng, lo.min(hi), hi)
                }
                Deadlines::Arbitrary { max_factor } => {
                    let lo = exec_ns as f64;
                    let hi = (max_factor * period_ns as f64).max(lo);
                    uniform_ns(&mut rng, lo, hi)
                }
            };
            Task {
                name: format!("t{i}"),
                utilization: u,
                period_ns,
                exec_ns,
                deadline_ns,
                jitter_ns: (cfg.jitter * period_ns as f64).round() as u64,
            }
        })
        .collect();
    Ok(TaskSet {
        config: cfg.clone(),
        tasks,
    })
}

/// Uniform in [lo, hi], rounded to whole nanoseconds, at least 1.
fn uniform_ns(rng: &mut Rng, lo: f64, hi: f64) -> u64 {
    (rng.range(lo, hi).round() as u64).max(1)
}

/// `n` periods log-uniform in [min, max] ns. With a granularity `g > 0`
/// each is rounded to the nearest multiple of `g` inside the range, so
/// the bounds must hold one: Emberson, Stafford & Davis 2010 round down
/// to a granularity so that hyperperiods stay short.
///
/// # Errors
/// `min` is zero or above `max`, or no multiple of `g` lies in [min, max].
pub fn log_uniform_periods(
    n: usize,
    min: u64,
    max: u64,
    granularity: u64,
    rng: &mut Rng,
) -> Result<Vec<u64>, Error> {
    if min == 0 || min > max {
        return Err(Error::new(format!(
            "periods need 0 < min <= max (got min {min} ns, max {max} ns)"
        )));
    }
    let (lo_k, hi_k) = if granularity > 0 {
        let lo_k = min.div_ceil(granularity);
        let hi_k = max / granularity;
        if lo_k > hi_k || lo_k == 0 {
            return Err(Error::new(format!(
                "no multiple of the granularity ({granularity} ns) lies between the shortest ({min} ns) and the longest period ({max} ns)"
            )));
        }
        (lo_k, hi_k)
    } else {
        (0, 0)
    };
    let (lmin, lmax) = ((min as f64).ln(), (max as f64).ln());
    Ok((0..n)
        .map(|_| {
            let p = rng.range(lmin, lmax).exp();
            if granularity > 0 {
                ((p / granularity as f64).round() as u64).clamp(lo_k, hi_k) * granularity
            } else {
                (p.round() as u64).clamp(min, max)
            }
        })
        .collect())
}

fn validate(cfg: &Config) -> Result<(), Error> {
    if cfg.n == 0 || cfg.n > MAX_TASKS {
        return Err(Error::new(format!(
            "the number of tasks must be between 1 and {MAX_TASKS} (got {})",
            cfg.n
        )));
    }
    if !(cfg.jitter.is_finite() && (0.0..1.0).contains(&cfg.jitter)) {
        return Err(Error::new(format!(
            "jitter is a fraction of the period in [0, 1) (got {})",
            cfg.jitter
        )));
    }
    match cfg.deadlines {
        Deadlines::Implicit => {}
        Deadlines::Constrained { min_fraction } => {
            if !(min_fraction.is_finite() && (0.0..=1.0).contains(&min_fraction)) {
                return Err(Error::new(format!(
                    "a constrained deadline's shortest fraction of the period must be in [0, 1] (got {min_fraction})"
                )));
            }
        }
        Deadlines::Arbitrary { max_factor } => {
            if !(max_factor.is_finite() && (1.0..=1000.0).contains(&max_factor)) {
                return Err(Error::new(format!(
                    "an arbitrary deadline's longest multiple of the period must be in [1, 1000] (got {max_factor})"
                )));
            }
        }
    }
    Ok(())
}

/// A duration as hierarchy files write it, exact to the nanosecond.
fn dur(ns: u64) -> String {
    if ns.is_multiple_of(1_000_000_000) {
        format!("{}s", ns / 1_000_000_000)
    } else if ns.is_multiple_of(1_000_000) {
        format!("{}ms", ns / 1_000_000)
    } else if ns.is_multiple_of(1_000) {
        format!("{}us", ns / 1_000)
    } else {
        format!("{ns}ns")
    }
}

impl TaskSet {
    /// The total utilization of the tasks as rounded (`exec / period`).
    pub fn utilization(&self) -> f64 {
        self.tasks
            .iter()
            .map(|t| t.exec_ns as f64 / t.period_ns as f64)
            .sum()
    }

    /// Deadline-monotonic priorities, one per task (unique; higher runs
    /// first, as `fp` reads them): the shortest deadline gets `n`, ties
    /// broken by the order drawn. With implicit deadlines this is
    /// rate-monotonic.
    pub fn dm_priorities(&self) -> Vec<i64> {
        let mut order: Vec<usize> = (0..self.tasks.len()).collect();
        order.sort_by_key(|&i| (self.tasks[i].deadline_ns, self.tasks[i].period_ns, i));
        let n = self.tasks.len() as i64;
        let mut prio = vec![0; self.tasks.len()];
        for (rank, &i) in order.iter().enumerate() {
            prio[i] = n - rank as i64;
        }
        prio
    }

    /// The `[[thread]]` tables, each a `periodic` workload under
    /// `scheduler`. With `priorities` each has a deadline-monotonic
    /// `priority` (for an `fp` scheduler).
    pub fn to_threads(&self, scheduler: &str, priorities: bool) -> String {
        let prio = self.dm_priorities();
        let mut out = String::new();
        for (t, p) in self.tasks.iter().zip(prio) {
            let _ = writeln!(out, "[[thread]]");
            let _ = writeln!(out, "name = \"{}\"", t.name);
            let _ = writeln!(out, "scheduler = \"{}\"", toml_escape(scheduler));
            if priorities {
                let _ = writeln!(out, "params = {{ priority = {p} }}");
            }
            let mut w = format!(
                "kind = \"periodic\", period = \"{}\", exec = \"{}\"",
                dur(t.period_ns),
                dur(t.exec_ns)
            );
            if t.deadline_ns != t.period_ns {
                let _ = write!(w, ", deadline = \"{}\"", dur(t.deadline_ns));
            }
            if t.jitter_ns > 0 {
                let _ = write!(w, ", jitter = \"{}\"", dur(t.jitter_ns));
            }
            let _ = writeln!(out, "workload = {{ {w} }}");
            out.push('\n');
        }
        out
    }

    /// A whole hierarchy file: `cpus` processors, one `fp` root named
    /// `root` with deadline-monotonic priorities, the threads under it,
    /// and a comment that says how the set was generated.
    pub fn to_hierarchy(&self, cpus: usize) -> String {
        let c = &self.config;
        let mut out = String::new();
        let _ = writeln!(
            out,
            "# {} periodic tasks, total utilization {} ({}), seed {}.",
            c.n,
            c.utilization,
            c.method.name(),
            c.seed
        );
        let _ = writeln!(
            out,
            "# Periods log-uniform in [{}, {}]{}; deadline-monotonic priorities under fixed priority.\n",
            dur(c.period_min_ns),
            dur(c.period_max_ns),
            if c.granularity_ns > 0 {
                format!(", multiples of {}", dur(c.granularity_ns))
            } else {
                String::new()
            }
        );
        if cpus != 1 {
            let _ = writeln!(out, "[machine]\ncpus = {cpus}\n");
        }
        out.push_str("[[scheduler]]\nname = \"root\"\npolicy = \"fp\"\n\n");
        out.push_str(&self.to_threads("root", true));
        out
    }
}

/// `s` inside a TOML basic string.
fn toml_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => {
                let _ = write!(out, "\\u{:04X}", c as u32);
            }
            c => out.push(c),
        }
    }
    out
}
