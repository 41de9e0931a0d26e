//! Schedulability tests on the whole processor: static-priority response-time
//! analysis with release jitter (Regehr 2001, §6.1.2, Eq 6.1 and 6.2, after
//! Tindell et al.), and the EDF utilization test that a reservation
//! scheduler such as Rez uses for admission control (§5.3.1.5, §9.3.2).
//!
//! Tasks are periodic: worst-case execution time `C`, period `T`, relative
//! deadline `D` (the period unless set) and release jitter `J`. Task sets
//! passed to the fixed-priority functions are in *decreasing priority
//! order*: index 0 has the highest priority. [`rate_monotonic`] produces that
//! order from periods.
//!
//! Hierarchical variants (a task set under a reservation or any other
//! guarantee) are in [`crate::ghost`] (the dissertation's ghost-task method)
//! and [`crate::sbf`] (supply-bound functions).

use std::fmt;

use hsched_core::time::Duration;

/// A periodic task.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Task {
    /// Worst-case execution time `C`.
    pub wcet: Duration,
    /// Period `T` (minimum inter-release time).
    pub period: Duration,
    /// Relative deadline `D`.
    pub deadline: Duration,
    /// Release jitter `J`: a job may become ready up to `J` after its
    /// nominal release.
    pub jitter: Duration,
}

impl Task {
    /// A task with deadline equal to its period and no jitter.
    pub const fn periodic(wcet: Duration, period: Duration) -> Task {
        Task {
            wcet,
            period,
            deadline: period,
            jitter: Duration::ZERO,
        }
    }

    /// [`Task::periodic`] from milliseconds (`Task::ms(1.0, 10.0)`).
    pub fn ms(wcet: f64, period: f64) -> Task {
        Task::periodic(
            Duration::from_millis_f64(wcet),
            Duration::from_millis_f64(period),
        )
    }

    /// The same task with relative deadline `deadline`.
    pub const fn with_deadline(mut self, deadline: Duration) -> Task {
        self.deadline = deadline;
        self
    }

    /// The same task with release jitter `jitter`.
    pub const fn with_jitter(mut self, jitter: Duration) -> Task {
        self.jitter = jitter;
        self
    }

    /// `C / T`.
    pub fn utilization(&self) -> f64 {
        crate::types::ratio(self.wcet, self.period)
    }
}

/// An analysis that cannot be carried out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AnalysisError {
    /// A task's parameters make no sense.
    InvalidTask {
        /// Index in the task set.
        index: usize,
        /// What is wrong.
        reason: &'static str,
    },
    /// The exact test would need to examine too many points (a very long
    /// horizon against very short periods).
    HorizonTooLong {
        /// Points that would be examined.
        points: u128,
        /// The most this crate examines.
        limit: u128,
    },
    /// A response-time recurrence did not settle within
    /// [`MAX_ITERATIONS`] steps (extreme parameters: nanosecond periods
    /// against very long deadlines).
    NoConvergence {
        /// The task.
        task: usize,
        /// Steps taken.
        iterations: u32,
    },
    /// A busy period that runs past the analysis' horizon: whether its
    /// later jobs meet their deadlines is not decided.
    BusyPeriodTooLong {
        /// The task.
        task: usize,
        /// Jobs examined.
        jobs: u128,
        /// The horizon.
        horizon: Duration,
    },
    /// Arguments outside the analysis' domain (an empty search range, …).
    BadArgument {
        /// What is wrong.
        reason: String,
    },
}

impl fmt::Display for AnalysisError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AnalysisError::InvalidTask { index, reason } => write!(f, "task {index}: {reason}"),
            AnalysisError::HorizonTooLong { points, limit } => write!(
                f,
                "the exact test would examine {points} points (limit {limit}); shorten the horizon or lower the utilization"
            ),
            AnalysisError::NoConvergence { task, iterations } => write!(
                f,
                "task {task}: the response-time recurrence did not settle in {iterations} steps; check for nanosecond periods or huge deadlines"
            ),
            AnalysisError::BusyPeriodTooLong { task, jobs, horizon } => write!(
                f,
                "task {task}: its busy period runs past the {horizon} horizon ({jobs} jobs examined), so whether later jobs meet their deadlines is not decided; raise the horizon"
            ),
            AnalysisError::BadArgument { reason } => f.write_str(reason),
        }
    }
}

impl std::error::Error for AnalysisError {}

/// The most test points an exact analysis examines before giving up.
pub const MAX_POINTS: u128 = 5_000_000;

/// Checks every task: period and deadline longer than zero, jitter shorter
/// than the deadline.
///
/// # Errors
/// The first invalid task.
pub fn validate(tasks: &[Task]) -> Result<(), AnalysisError> {
    for (index, t) in tasks.iter().enumerate() {
        let reason = if t.period.as_nanos() == 0 {
            "the period must be longer than zero"
        } else if t.deadline.as_nanos() == 0 {
            "the deadline must be longer than zero"
        } else if t.jitter >= t.deadline {
            "the release jitter must be shorter than the deadline"
        } else {
            continue;
        };
        return Err(AnalysisError::InvalidTask { index, reason });
    }
    Ok(())
}

/// Total utilization `Σ C/T`.
pub fn utilization(tasks: &[Task]) -> f64 {
    tasks.iter().map(Task::utilization).sum()
}

/// The tasks sorted into rate-monotonic priority order (shortest period
/// first; ties keep their input order).
pub fn rate_monotonic(tasks: &[Task]) -> Vec<Task> {
    let mut v = tasks.to_vec();
    v.sort_by_key(|t| t.period);
    v
}

/// The tasks sorted into deadline-monotonic priority order.
pub fn deadline_monotonic(tasks: &[Task]) -> Vec<Task> {
    let mut v = tasks.to_vec();
    v.sort_by_key(|t| t.deadline);
    v
}

/// Liu and Layland's rate-monotonic utilization bound `n(2^{1/n} − 1)`
/// (about 69% for large `n`, §6.1.1).
pub fn liu_layland_bound(n: usize) -> f64 {
    if n == 0 {
        return 1.0;
    }
    let n = n as f64;
    n * (2f64.powf(1.0 / n) - 1.0)
}

pub(crate) fn ceil_div(a: u128, b: u128) -> u128 {
    a.div_ceil(b)
}

/// Worst-case response time of task `i` under preemptive static priorities
/// on the whole processor, with release jitter (Eq 6.1, solved by the
/// recurrence of Eq 6.2 from `r⁰ = 0`):
///
/// `r = C_i + Σ_{j ∈ hp(i)} ⌈(J_j + r) / T_j⌉ · C_j`
///
/// and, when that first job may still be running at the next release (a
/// deadline past the period), the same for every later job `q` of the busy
/// period (`(q + 1)·C_i` in place of `C_i`, response `r_q − q·T_i`;
/// Lehoczky 1990). Returns `Some(max r_q + J_i)`, the response time
/// measured from the nominal release, when it is within the deadline `D_i`,
/// and `None` when some job can miss it. Tasks `0..i` are the
/// higher-priority ones.
///
/// # Errors
/// An invalid task, `i` out of range, or no convergence in
/// [`MAX_ITERATIONS`] steps.
pub fn response_time(tasks: &[Task], i: usize) -> Result<Option<Duration>, AnalysisError> {
    validate(tasks)?;
    if i >= tasks.len() {
        return Err(AnalysisError::BadArgument {
            reason: format!("no task {i} in a set of {}", tasks.len()),
        });
    }
    response_time_unchecked(tasks, i)
}

/// Iterations of a response-time recurrence before the analysis gives up
/// ([`AnalysisError::NoConvergence`]); real task sets need far fewer (one
/// per higher-priority job in the deadline window at most).
pub const MAX_ITERATIONS: u32 = 100_000;

pub(crate) fn response_time_unchecked(
    tasks: &[Task],
    i: usize,
) -> Result<Option<Duration>, AnalysisError> {
    crate::sbf::fp_response_time_unchecked(tasks, i, &crate::sbf::Supply::Full)
}

/// [`response_time`] of every task.
///
/// # Errors
/// An invalid task.
pub fn response_times(tasks: &[Task]) -> Result<Vec<Option<Duration>>, AnalysisError> {
    validate(tasks)?;
    (0..tasks.len())
        .map(|i| response_time_unchecked(tasks, i))
        .collect()
}

/// Whether every task meets its deadline under static priorities in the
/// given order (exact for distinct priorities, any deadlines: every job of
/// each busy period is examined).
///
/// # Errors
/// An invalid task.
pub fn schedulable(tasks: &[Task]) -> Result<bool, AnalysisError> {
    validate(tasks)?;
    for i in 0..tasks.len() {
        if response_time_unchecked(tasks, i)?.is_none() {
            return Ok(false);
        }
    }
    Ok(true)
}

/// A reservation refused by the EDF utilization test.
#[derive(Clone, Debug, PartialEq)]
pub struct AdmissionError {
    /// Index of the first reservation that does not fit.
    pub index: usize,
    /// Utilization already admitted before it.
    pub admitted: f64,
    /// Its own utilization.
    pub requested: f64,
    /// The cap.
    pub cap: f64,
}

impl fmt::Display for AdmissionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "reservation {} needs {:.1}% but {:.1}% of the {:.1}% cap is already reserved",
            self.index,
            self.requested * 100.0,
            self.admitted * 100.0,
            self.cap * 100.0
        )
    }
}

impl std::error::Error for AdmissionError {}

/// Tolerance for floating-point comparisons of utilizations.
pub(crate) const EPS: f64 = 1e-9;

/// The EDF utilization test a reservation scheduler uses for admission
/// control: reservations `(amount, period)` are admitted in order while
/// `Σ amount/period ≤ cap` (Liu and Layland: EDF schedules any set with
/// total utilization ≤ 1; Rez keeps `cap` < 1, by default 0.85, to leave
/// time for the rest of the system). Returns the total utilization.
///
/// # Errors
/// The first reservation that pushes the total above `cap`, or a zero period.
pub fn edf_admission(
    reservations: &[(Duration, Duration)],
    cap: f64,
) -> Result<f64, AdmissionError> {
    let mut total = 0.0;
    for (index, &(amount, period)) in reservations.iter().enumerate() {
        let requested = if period.as_nanos() == 0 {
            f64::INFINITY
        } else {
            crate::types::ratio(amount, period)
        };
        if total + requested > cap + EPS {
            return Err(AdmissionError {
                index,
                admitted: total,
                requested,
                cap,
            });
        }
        total += requested;
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: f64) -> Duration {
        Duration::from_millis_f64(v)
    }

    #[test]
    fn classic_rm_example() {
        // C=(1,2,3), T=(4,6,12): response times 1, 3, 10.
        let ts = [Task::ms(1.0, 4.0), Task::ms(2.0, 6.0), Task::ms(3.0, 12.0)];
        let r = response_times(&ts).unwrap();
        assert_eq!(r, vec![Some(ms(1.0)), Some(ms(3.0)), Some(ms(10.0))]);
        assert!(schedulable(&ts).unwrap());
        // C3 = 5 still fits exactly (r = 12); 5.5 does not.
        assert_eq!(
            response_time(&[ts[0], ts[1], Task::ms(5.0, 12.0)], 2).unwrap(),
            Some(ms(12.0))
        );
        let ts2 = [ts[0], ts[1], Task::ms(5.5, 12.0)];
        assert_eq!(response_time(&ts2, 2).unwrap(), None);
    }

    #[test]
    fn jitter_adds_interference_and_response() {
        // Eq 6.1: a higher-priority task with jitter can hit twice.
        let hp = Task::ms(2.0, 10.0).with_jitter(ms(5.0));
        let lo = Task::ms(4.0, 20.0);
        let r = response_times(&[hp, lo]).unwrap();
        assert_eq!(r[0], Some(ms(7.0))); // 2 + its own jitter 5
                                         // r = 4 + ceil((5 + r)/10)*2: r0=0 -> 6 -> 8 -> 8.
        assert_eq!(r[1], Some(ms(8.0)));
        let no_jitter = response_times(&[Task::ms(2.0, 10.0), lo]).unwrap();
        assert_eq!(no_jitter[1], Some(ms(6.0)));
    }

    #[test]
    fn invalid_tasks_are_errors() {
        let bad = [Task::periodic(ms(1.0), Duration::ZERO)];
        assert!(matches!(
            schedulable(&bad),
            Err(AnalysisError::InvalidTask { index: 0, .. })
        ));
        let bad = [Task::ms(1.0, 10.0).with_jitter(ms(10.0))];
        assert!(response_times(&bad).is_err());
        assert!(response_time(&[Task::ms(1.0, 2.0)], 3).is_err());
    }

    #[test]
    fn edf_admission_respects_the_cap() {
        let r = [
            (ms(10.0), ms(100.0)),
            (ms(30.0), ms(100.0)),
            (ms(10.0), ms(20.0)),
        ];
        assert!((edf_admission(&r, 1.0).unwrap() - 0.9).abs() < 1e-12);
        let e = edf_admission(&r, 0.85).unwrap_err();
        assert_eq!(e.index, 2);
        assert!((e.admitted - 0.4).abs() < 1e-12);
        assert!(e.to_string().contains("50.0%"), "{e}");
    }

    #[test]
    fn rm_order_and_bound() {
        let ts = [Task::ms(1.0, 20.0), Task::ms(1.0, 10.0)];
        assert_eq!(rate_monotonic(&ts)[0].period, ms(10.0));
        assert!((liu_layland_bound(1) - 1.0).abs() < 1e-12);
        assert!((liu_layland_bound(1000) - std::f64::consts::LN_2).abs() < 1e-3);
    }
}
