//! Supply-bound functions and exact schedulability tests under a guarantee.
//!
//! This goes beyond the dissertation. The supply-bound function `sbf(t)` of
//! a guarantee is the least CPU time it promises in *any* window of length
//! `t` — the quantity Lemmas 5.1–5.3 and Theorems 5.2–5.7 (seed 000, §5.3.2)
//! reason about one window length at a time:
//!
//! | guarantee | `sbf(t)` |
//! |---|---|
//! | `ALL` | `t` |
//! | `RESBH/RESBS/RESPS x y` (basic) | the periodic resource model `Γ(Π = y, Θ = x)` of Shin and Lee (RTSS 2003): nothing for `2(y − x)`, then `x` per `y` |
//! | `RESCH/RESCS/RESNH/RESSH x y` (continuous) | `⌊t/y⌋·x + max(0, t mod y − (y − x))` |
//! | `PSBE s δ` | `max(0, s·t − δ)` (Eq 5.1) |
//! | `RESU r`, `PS s`, `NULL` | `0`: they bound no fixed window |
//!
//! Lemma 5.1 is `sbf(2y − x) = x` for basic reservations; Lemma 5.3 is
//! `sbf(2(y − x)) = 0`. The periodic resource formula is, with
//! `k = max(⌈(t − (Π − Θ))/Π⌉, 1)`:
//! `sbf(t) = t − (k + 1)(Π − Θ)` if `t ∈ [(k + 1)Π − 2Θ, (k + 1)Π − Θ]`,
//! else `(k − 1)Θ`.
//!
//! With `sbf` the classical tests carry over to any guarantee:
//!
//! * EDF: a task set is schedulable iff `dbf(t) ≤ sbf(t)` for all `t`, with
//!   the demand-bound function `dbf(t) = Σ max(0, ⌊(t − D_i)/T_i⌋ + 1)·C_i`
//!   ([`edf_schedulable`]).
//! * Static priorities: task `i` finishes by the least `t` with
//!   `sbf(t) ≥ rbf_i(t) = C_i + Σ_{j<i} ⌈(t + J_j)/T_j⌉·C_j`
//!   ([`fp_response_times`]); on `ALL` this is exactly Eq 6.1, and under a
//!   basic reservation it agrees with the ghost-task method of Theorem 6.2.

use hsched_core::time::Duration;

use crate::rta::{ceil_div, validate, AnalysisError, Task, EPS, MAX_ITERATIONS, MAX_POINTS};
use crate::types::{ratio, Guarantee, GuaranteeKind, InvalidGuarantee};

/// The periodic resource model `Γ(Π, Θ)` (Shin and Lee, RTSS 2003): `Θ`
/// units of CPU in every period `Π`, placed anywhere in the period — the
/// supply of a basic reservation `Θ / Π`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PeriodicResource {
    /// Resource period `Π`.
    pub period: Duration,
    /// Budget `Θ` per period.
    pub budget: Duration,
}

impl PeriodicResource {
    /// `Γ(period, budget)`.
    ///
    /// # Errors
    /// A zero period or a budget longer than the period.
    pub fn new(period: Duration, budget: Duration) -> Result<PeriodicResource, InvalidGuarantee> {
        let kind = GuaranteeKind::ResBS;
        if period.as_nanos() == 0 {
            return Err(InvalidGuarantee::ZeroPeriod { kind });
        }
        if budget > period {
            return Err(InvalidGuarantee::AmountExceedsPeriod {
                kind,
                amount: budget,
                period,
            });
        }
        Ok(PeriodicResource { period, budget })
    }

    /// Least supply in any window of length `t`.
    pub fn sbf(&self, t: Duration) -> Duration {
        let (p, q, t) = (
            u128::from(self.period.as_nanos()),
            u128::from(self.budget.as_nanos()),
            u128::from(t.as_nanos()),
        );
        if q == 0 || p == 0 {
            return Duration::ZERO;
        }
        let q = q.min(p); // a hand-built budget above the period is the whole period
        let b = p - q; // Π − Θ
        let k = if t <= b { 1 } else { ceil_div(t - b, p).max(1) };
        let lo = (k + 1) * p - 2 * q;
        let hi = (k + 1) * p - q;
        let v = if t >= lo && t <= hi {
            t - (k + 1) * b
        } else {
            (k - 1) * q
        };
        Duration::from_nanos(v.min(u128::from(u64::MAX)) as u64)
    }

    /// Least `t` with `sbf(t) ≥ demand`.
    pub fn sbf_inverse(&self, demand: Duration) -> Option<Duration> {
        let d = u128::from(demand.as_nanos());
        if d == 0 {
            return Some(Duration::ZERO);
        }
        let (p, q) = (
            u128::from(self.period.as_nanos()),
            u128::from(self.budget.as_nanos()),
        );
        if q == 0 || p == 0 {
            return None;
        }
        let q = q.min(p);
        let k = ceil_div(d, q);
        let t = d + (k + 1) * (p - q);
        u64::try_from(t).ok().map(Duration::from_nanos)
    }

    /// The linear lower bound `lsbf(t) = (Θ/Π)(t − 2(Π − Θ))`, as
    /// `(rate, delay)`.
    pub fn linear_bound(&self) -> (f64, Duration) {
        let b = self.period - self.budget;
        (ratio(self.budget, self.period), b + b)
    }
}

/// The worst-case supply of a guarantee, as a function of window length.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Supply {
    /// The whole processor: `sbf(t) = t`.
    Full,
    /// A basic reservation: the periodic resource model.
    Periodic(PeriodicResource),
    /// A continuous reservation: `amount` in every window of `period`.
    Continuous {
        /// Amount per window.
        amount: Duration,
        /// Window length.
        period: Duration,
    },
    /// Proportional share with bounded error: `max(0, share·t − error)`.
    BoundedError {
        /// Share.
        share: f64,
        /// Error bound.
        error: Duration,
    },
    /// No window is guaranteed anything (RESU, PS, NULL).
    Nothing,
}

impl Supply {
    /// The supply promised by `g` (see the module table).
    pub fn of(g: &Guarantee) -> Supply {
        match *g {
            Guarantee::All => Supply::Full,
            Guarantee::Psbe { share, error } => Supply::BoundedError { share, error },
            Guarantee::ResU { .. } | Guarantee::Ps { .. } | Guarantee::Null => Supply::Nothing,
            _ => match g.amount_period() {
                Some((amount, period)) if g.kind().is_basic() => {
                    Supply::Periodic(PeriodicResource {
                        period,
                        budget: amount,
                    })
                }
                Some((amount, period)) => Supply::Continuous { amount, period },
                None => Supply::Nothing,
            },
        }
    }

    /// Least CPU time supplied in any window of length `t`.
    pub fn sbf(&self, t: Duration) -> Duration {
        match *self {
            Supply::Full => t,
            Supply::Periodic(r) => r.sbf(t),
            Supply::Continuous { amount, period } => {
                let (x, y, t) = (amount.as_nanos(), period.as_nanos(), t.as_nanos());
                if y == 0 {
                    return Duration::ZERO;
                }
                let x = x.min(y);
                let whole = u128::from(t / y) * u128::from(x);
                let rest = (t % y).saturating_sub(y - x);
                Duration::from_nanos((whole + u128::from(rest)).min(u128::from(u64::MAX)) as u64)
            }
            Supply::BoundedError { share, error } => {
                let v = share * t.as_nanos() as f64 - error.as_nanos() as f64;
                if v <= 0.0 {
                    Duration::ZERO
                } else {
                    Duration::from_nanos(v.floor().min(u64::MAX as f64) as u64)
                }
            }
            Supply::Nothing => Duration::ZERO,
        }
    }

    /// Least window length `t` with `sbf(t) ≥ demand`; `None` when no
    /// window is long enough.
    pub fn sbf_inverse(&self, demand: Duration) -> Option<Duration> {
        if demand.as_nanos() == 0 {
            return Some(Duration::ZERO);
        }
        match *self {
            Supply::Full => Some(demand),
            Supply::Periodic(r) => r.sbf_inverse(demand),
            Supply::Continuous { amount, period } => {
                let (x, y, d) = (
                    u128::from(amount.as_nanos()),
                    u128::from(period.as_nanos()),
                    u128::from(demand.as_nanos()),
                );
                if x == 0 || y == 0 {
                    return None;
                }
                let x = x.min(y);
                let k = ceil_div(d, x);
                u64::try_from(d + k * (y - x))
                    .ok()
                    .map(Duration::from_nanos)
            }
            Supply::BoundedError { share, error } => {
                if share.is_nan() || share <= 0.0 {
                    return None;
                }
                let est = ((demand.as_nanos() as f64 + error.as_nanos() as f64) / share).ceil();
                if !est.is_finite() || est >= u64::MAX as f64 / 4.0 {
                    return None;
                }
                // Least t with sbf(t) ≥ demand, by bisection around the float estimate.
                let (mut lo, mut hi) =
                    (0u64, (est as u64).saturating_mul(2).saturating_add(1 << 20));
                if self.sbf(Duration::from_nanos(hi)) < demand {
                    return None;
                }
                while hi - lo > 1 {
                    let mid = lo + (hi - lo) / 2;
                    if self.sbf(Duration::from_nanos(mid)) >= demand {
                        hi = mid;
                    } else {
                        lo = mid;
                    }
                }
                Some(Duration::from_nanos(
                    if self.sbf(Duration::from_nanos(lo)) >= demand {
                        lo
                    } else {
                        hi
                    },
                ))
            }
            Supply::Nothing => None,
        }
    }

    /// A linear lower bound `rate · (t − delay) ≤ sbf(t)`, as `(rate,
    /// delay)`; `None` for [`Supply::Nothing`].
    pub fn linear_bound(&self) -> Option<(f64, Duration)> {
        match *self {
            Supply::Full => Some((1.0, Duration::ZERO)),
            Supply::Periodic(r) => Some(r.linear_bound()),
            Supply::Continuous { amount, period } => Some((ratio(amount, period), period - amount)),
            Supply::BoundedError { share, error } => Some((
                share,
                Duration::from_nanos(
                    (error.as_nanos() as f64 / share)
                        .ceil()
                        .min(u64::MAX as f64) as u64,
                ),
            )),
            Supply::Nothing => None,
        }
    }

    /// Long-term rate of supply.
    pub fn rate(&self) -> f64 {
        self.linear_bound().map_or(0.0, |(r, _)| r)
    }

    /// The period after which the supply pattern repeats, if any.
    fn period(&self) -> Option<Duration> {
        match *self {
            Supply::Periodic(r) => Some(r.period),
            Supply::Continuous { period, .. } => Some(period),
            _ => None,
        }
    }
}

/// Demand-bound function: the most execution that must complete within any
/// window of length `t` (jobs released and due inside it).
pub fn dbf(tasks: &[Task], t: Duration) -> Duration {
    let t = u128::from(t.as_nanos());
    let mut sum: u128 = 0;
    for task in tasks {
        let d = u128::from(task.deadline.as_nanos());
        if t >= d {
            let n = (t - d) / u128::from(task.period.as_nanos().max(1)) + 1;
            sum += n * u128::from(task.wcet.as_nanos());
        }
    }
    Duration::from_nanos(sum.min(u128::from(u64::MAX)) as u64)
}

/// Request-bound function of task `i` under static priorities (tasks
/// `0..i` have higher priority): `C_i + Σ_{j<i} ⌈(t + J_j)/T_j⌉·C_j`.
pub fn rbf(tasks: &[Task], i: usize, t: Duration) -> Duration {
    let t = u128::from(t.as_nanos());
    let mut sum = u128::from(tasks.get(i).map_or(0, |x| x.wcet.as_nanos()));
    for hp in tasks.iter().take(i) {
        let n = ceil_div(
            t + u128::from(hp.jitter.as_nanos()),
            u128::from(hp.period.as_nanos().max(1)),
        );
        sum += n * u128::from(hp.wcet.as_nanos());
    }
    Duration::from_nanos(sum.min(u128::from(u64::MAX)) as u64)
}

fn gcd(a: u128, b: u128) -> u128 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// Whether the task set is schedulable by preemptive EDF under `supply`:
/// `dbf(t) ≤ sbf(t)` at every absolute deadline `t` up to a horizon past
/// which the linear bounds guarantee it (exact for the supply model).
///
/// # Errors
/// An invalid task, or a horizon with more than [`MAX_POINTS`] deadlines.
pub fn edf_schedulable(tasks: &[Task], supply: &Supply) -> Result<bool, AnalysisError> {
    validate(tasks)?;
    let demand: Vec<&Task> = tasks.iter().filter(|t| t.wcet.as_nanos() > 0).collect();
    if demand.is_empty() {
        return Ok(true);
    }
    let Some((alpha, delay)) = supply.linear_bound() else {
        return Ok(false);
    };
    let u: f64 = demand.iter().map(|t| t.utilization()).sum();
    if u > alpha + EPS {
        return Ok(false);
    }
    let d_max = demand
        .iter()
        .map(|t| u128::from(t.deadline.as_nanos()))
        .max()
        .unwrap_or(0);
    let horizon: u128 = if alpha - u > 1e-9 {
        // dbf(t) ≤ U·t + B and sbf(t) ≥ α(t − Δ): past L = (B + αΔ)/(α − U)
        // the test always holds.
        let b: f64 = demand
            .iter()
            .map(|t| {
                let (c, p, d) = (
                    t.wcet.as_nanos() as f64,
                    t.period.as_nanos() as f64,
                    t.deadline.as_nanos() as f64,
                );
                (c * (p - d) / p).max(0.0)
            })
            .sum();
        let l = (b + alpha * delay.as_nanos() as f64) / (alpha - u);
        (l.ceil().min(1e30) as u128).max(d_max)
    } else {
        // Utilization equals the supply rate: both sides repeat with the
        // least common multiple of the periods.
        let mut l: u128 = supply.period().map_or(1, |p| u128::from(p.as_nanos()));
        for t in &demand {
            let p = u128::from(t.period.as_nanos());
            l = l / gcd(l, p) * p;
            if l > u128::from(u64::MAX) {
                return Err(AnalysisError::HorizonTooLong {
                    points: u128::MAX,
                    limit: MAX_POINTS,
                });
            }
        }
        l + d_max.max(u128::from(delay.as_nanos()))
    };
    let points: u128 = demand
        .iter()
        .map(|t| horizon / u128::from(t.period.as_nanos()) + 1)
        .sum();
    if points > MAX_POINTS {
        return Err(AnalysisError::HorizonTooLong {
            points,
            limit: MAX_POINTS,
        });
    }
    for task in &demand {
        let (p, d) = (
            u128::from(task.period.as_nanos()),
            u128::from(task.deadline.as_nanos()),
        );
        let mut t = d;
        while t <= horizon {
            let at = Duration::from_nanos(t as u64);
            if dbf(tasks, at) > supply.sbf(at) {
                return Ok(false);
            }
            t += p;
        }
    }
    Ok(true)
}

/// Worst-case response times under static priorities (index 0 highest)
/// when the task set runs on `supply`: for each task the least `t` with
/// `sbf(t) ≥ rbf_i(t)`, found by iterating `t ← sbf⁻¹(rbf_i(t))`, plus its
/// own release jitter. `None` when the task can miss its deadline.
///
/// On [`Supply::Full`] this is Eq 6.1/6.2 exactly.
///
/// # Errors
/// An invalid task, or no convergence in [`MAX_ITERATIONS`] steps.
pub fn fp_response_times(
    tasks: &[Task],
    supply: &Supply,
) -> Result<Vec<Option<Duration>>, AnalysisError> {
    validate(tasks)?;
    (0..tasks.len())
        .map(|i| fp_response_time_unchecked(tasks, i, supply))
        .collect()
}

pub(crate) fn fp_response_time_unchecked(
    tasks: &[Task],
    i: usize,
    supply: &Supply,
) -> Result<Option<Duration>, AnalysisError> {
    let me = tasks[i];
    let limit = me.deadline - me.jitter;
    let Some(mut t) = supply.sbf_inverse(me.wcet) else {
        return Ok(None);
    };
    for _ in 0..MAX_ITERATIONS {
        if t > limit {
            return Ok(None);
        }
        let Some(next) = supply.sbf_inverse(rbf(tasks, i, t)) else {
            return Ok(None);
        };
        if next <= t {
            return Ok(Some(t + me.jitter));
        }
        t = next;
    }
    Err(AnalysisError::NoConvergence {
        task: i,
        iterations: MAX_ITERATIONS,
    })
}

/// Whether every task meets its deadline under static priorities (index 0
/// highest) on `supply`.
///
/// # Errors
/// An invalid task, or no convergence in [`MAX_ITERATIONS`] steps.
pub fn fp_schedulable(tasks: &[Task], supply: &Supply) -> Result<bool, AnalysisError> {
    Ok(fp_response_times(tasks, supply)?
        .iter()
        .all(Option::is_some))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rta;

    fn ms(v: f64) -> Duration {
        Duration::from_millis_f64(v)
    }

    fn g(s: &str) -> Guarantee {
        s.parse().unwrap()
    }

    #[test]
    fn lemma_5_1_and_5_3_on_the_periodic_model() {
        for (x, y) in [
            (1.5, 6.0),
            (3.0, 8.0),
            (10.0, 20.0),
            (1.0, 1.0),
            (0.5, 33.0),
        ] {
            let s = Supply::of(&g(&format!("RESBS {x} {y}")));
            // Lemma 5.3: nothing for 2(y − x).
            assert_eq!(s.sbf(ms(2.0 * (y - x))), Duration::ZERO, "{x}/{y}");
            // Lemma 5.1: x within 2y − x, and not before.
            assert_eq!(s.sbf(ms(2.0 * y - x)), ms(x), "{x}/{y}");
            if x > 0.0 && y > x {
                assert!(s.sbf(ms(2.0 * y - x) - Duration::from_nanos(1)) < ms(x));
            }
        }
    }

    #[test]
    fn continuous_supply_matches_lemma_5_2() {
        let s = Supply::of(&g("RESCS 3 8"));
        assert_eq!(s.sbf(ms(5.0)), Duration::ZERO);
        assert_eq!(s.sbf(ms(6.0)), ms(1.0));
        assert_eq!(s.sbf(ms(8.0)), ms(3.0));
        assert_eq!(s.sbf(ms(16.0)), ms(6.0));
        assert_eq!(s.sbf(ms(13.0)), ms(3.0));
    }

    #[test]
    fn inverse_is_the_least_point() {
        let sups = [
            Supply::Full,
            Supply::of(&g("RESBS 1.5 6")),
            Supply::of(&g("RESCS 3 8")),
            Supply::of(&g("PSBE 0.3 35")),
            Supply::of(&g("RESBH 1 1")),
        ];
        for s in sups {
            for d in [1u64, 7, 1_000, 1_500_000, 3_000_000, 10_000_000] {
                let d = Duration::from_nanos(d);
                let t = s.sbf_inverse(d).unwrap();
                assert!(s.sbf(t) >= d, "{s:?} {d}");
                if t.as_nanos() > 0 {
                    assert!(s.sbf(t - Duration::from_nanos(1)) < d, "{s:?} {d} {t}");
                }
            }
        }
        assert_eq!(Supply::Nothing.sbf_inverse(ms(1.0)), None);
        assert_eq!(Supply::of(&g("PS 0.5")).sbf(ms(100.0)), Duration::ZERO);
    }

    #[test]
    fn fp_on_full_supply_is_equation_6_1() {
        let ts = rta::rate_monotonic(&[
            Task::ms(1.0, 10.0),
            Task::ms(2.0, 45.0),
            Task::ms(4.0, 100.0),
            Task::ms(3.0, 100.0),
            Task::ms(7.0, 500.0),
            Task::ms(25.0, 2000.0),
        ]);
        assert_eq!(
            fp_response_times(&ts, &Supply::Full).unwrap(),
            rta::response_times(&ts).unwrap()
        );
        let jittered = [
            Task::ms(2.0, 10.0).with_jitter(ms(5.0)),
            Task::ms(4.0, 20.0),
        ];
        assert_eq!(
            fp_response_times(&jittered, &Supply::Full).unwrap(),
            rta::response_times(&jittered).unwrap()
        );
    }

    #[test]
    fn edf_under_supply() {
        let ts = [Task::ms(1.0, 4.0), Task::ms(2.0, 6.0), Task::ms(3.0, 12.0)]; // U = 0.833
        assert!(edf_schedulable(&ts, &Supply::Full).unwrap());
        // A 90% continuous reservation with a fine period works; a coarse one does not.
        assert!(edf_schedulable(&ts, &Supply::of(&g("RESCS 0.9 1"))).unwrap());
        assert!(!edf_schedulable(&ts, &Supply::of(&g("RESCS 45 50"))).unwrap());
        // Below the utilization nothing works.
        assert!(!edf_schedulable(&ts, &Supply::of(&g("RESCS 0.8 1"))).unwrap());
        // Utilization exactly 1 on the full processor: the lcm horizon is used.
        let full = [Task::ms(1.0, 2.0), Task::ms(1.0, 2.0)];
        assert!(edf_schedulable(&full, &Supply::Full).unwrap());
        assert!(!edf_schedulable(&[Task::ms(1.0, 2.0)], &Supply::Nothing).unwrap());
        assert!(edf_schedulable(&[], &Supply::Nothing).unwrap());
    }

    #[test]
    fn dbf_and_rbf_values() {
        let ts = [Task::ms(1.0, 4.0), Task::ms(2.0, 6.0)];
        assert_eq!(dbf(&ts, ms(3.9)), Duration::ZERO);
        assert_eq!(dbf(&ts, ms(4.0)), ms(1.0));
        assert_eq!(dbf(&ts, ms(12.0)), ms(3.0 + 4.0));
        assert_eq!(rbf(&ts, 1, ms(4.0)), ms(3.0));
        assert_eq!(rbf(&ts, 1, ms(4.1)), ms(4.0));
    }
}
