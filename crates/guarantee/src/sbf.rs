//! Supply-bound functions and exact schedulability tests under a guarantee.
//!
//! This goes beyond the dissertation. The supply-bound function `sbf(t)` of
//! a guarantee is the least CPU time it promises in *any* window of length
//! `t` — the quantity Lemmas 5.1–5.3 and Theorems 5.2–5.7 (Regehr 2001, §5.3.2)
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
/// window of length `t` (jobs ready and due inside it; a job with release
/// jitter `J` may become ready `J` late, so it is due `D − J` after).
pub fn dbf(tasks: &[Task], t: Duration) -> Duration {
    let t = u128::from(t.as_nanos());
    let mut sum: u128 = 0;
    for task in tasks {
        let d = u128::from(task.deadline.saturating_sub(task.jitter).as_nanos());
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
        .map(|t| u128::from((t.deadline - t.jitter).as_nanos()))
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
                    (t.deadline - t.jitter).as_nanos() as f64,
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
            u128::from((task.deadline - task.jitter).as_nanos()),
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

/// Worst-case response times under static priorities (index 0 highest,
/// all distinct) when the task set runs on `supply`, or `None` for a task
/// that can miss its deadline; see [`fp_response_times_at_levels`] for the
/// method.
///
/// On [`Supply::Full`] this is Eq 6.1/6.2, extended to every job of the
/// busy period.
///
/// # Errors
/// An invalid task, or a busy period the analysis cannot follow to its end
/// ([`AnalysisError::NoConvergence`], [`AnalysisError::HorizonTooLong`]).
pub fn fp_response_times(
    tasks: &[Task],
    supply: &Supply,
) -> Result<Vec<Option<Duration>>, AnalysisError> {
    validate(tasks)?;
    (0..tasks.len())
        .map(|i| fp_response_time_unchecked(tasks, i, supply))
        .collect()
}

/// Worst-case response times under static priorities given as levels
/// (`levels[i]`: larger is more urgent; equal levels share a priority),
/// on `supply`. `None` for a task that can miss its deadline.
///
/// For each task `i` the analysis follows every job of its level-`i` busy
/// period (Lehoczky 1990; Tindell et al. 1994 for release jitter): job `q`
/// completes by the least `w` with
/// `sbf(w) ≥ (q + 1)·C_i + Σ_{j ≠ i, level_j ≥ level_i} ⌈(w + J_j)/T_j⌉·C_j`,
/// its response is `w − q·T_i + J_i`, and the busy period ends at the first
/// job that completes before the next one's release (`w ≤ (q + 1)·T_i −
/// J_i`). Deadlines may be longer than periods. A task whose share of the
/// higher-or-equal demand exceeds the supply's long-term rate can miss.
///
/// Tasks that share a level are each analysed as if the others had the
/// higher priority: every job of theirs released before `i`'s job completes
/// can delay it. That holds whatever order the scheduler serves equal
/// priorities in (first come first served, by thread, round robin), and on
/// the processors of a work-conserving global scheduler (at every instant of
/// a busy period one of them runs the level's work), at the price of some
/// pessimism.
///
/// # Errors
/// An invalid task, `levels` of another length than `tasks`, or a busy
/// period longer than `horizon` or needing more than [`MAX_ITERATIONS`]
/// steps per job (the analysis will not guess; shorten the periods' ratio or
/// raise the horizon).
pub fn fp_response_times_at_levels(
    tasks: &[Task],
    levels: &[i64],
    supply: &Supply,
    horizon: Duration,
) -> Result<Vec<Option<Duration>>, AnalysisError> {
    validate(tasks)?;
    if levels.len() != tasks.len() {
        return Err(AnalysisError::BadArgument {
            reason: format!("{} levels for {} tasks", levels.len(), tasks.len()),
        });
    }
    (0..tasks.len())
        .map(|i| {
            let interferes = |j: usize| j != i && levels[j] >= levels[i];
            busy_period_response(tasks, i, &interferes, supply, horizon)
        })
        .collect()
}

/// The busy periods [`fp_response_times`] follows by default: longer ones
/// are reported as [`AnalysisError::HorizonTooLong`].
pub const DEFAULT_HORIZON: Duration = Duration::from_secs(3600);

pub(crate) fn fp_response_time_unchecked(
    tasks: &[Task],
    i: usize,
    supply: &Supply,
) -> Result<Option<Duration>, AnalysisError> {
    busy_period_response(tasks, i, &|j| j < i, supply, DEFAULT_HORIZON)
}

/// The worst response of task `i` over the jobs of its busy period, with
/// `interferes(j)` naming the tasks that can delay it; `None` when a job can
/// miss its deadline.
pub(crate) fn busy_period_response(
    tasks: &[Task],
    i: usize,
    interferes: &dyn Fn(usize) -> bool,
    supply: &Supply,
    horizon: Duration,
) -> Result<Option<Duration>, AnalysisError> {
    let me = tasks[i];
    let c = u128::from(me.wcet.as_nanos());
    if c == 0 {
        return Ok(Some(me.jitter));
    }
    // Overload: past the busy period's start the demand outgrows the supply.
    let rate = supply.rate();
    let demand_rate: f64 = tasks
        .iter()
        .enumerate()
        .filter(|&(j, _)| j == i || interferes(j))
        .map(|(_, t)| t.utilization())
        .sum();
    if demand_rate > rate + EPS {
        return Ok(None);
    }
    let (period, jitter) = (
        u128::from(me.period.as_nanos()),
        u128::from(me.jitter.as_nanos()),
    );
    let deadline = u128::from(me.deadline.as_nanos());
    let horizon = u128::from(horizon.as_nanos());
    let others: Vec<(u128, u128, u128)> = tasks
        .iter()
        .enumerate()
        .filter(|&(j, t)| interferes(j) && t.wcet.as_nanos() > 0)
        .map(|(_, t)| {
            (
                u128::from(t.wcet.as_nanos()),
                u128::from(t.period.as_nanos()),
                u128::from(t.jitter.as_nanos()),
            )
        })
        .collect();
    let demand = |q: u128, w: u128| -> u128 {
        let mut d = (q + 1) * c;
        for &(cj, tj, jj) in &others {
            d += ceil_div(w + jj, tj) * cj;
        }
        d
    };
    let inverse = |d: u128| -> Option<u128> {
        let d = u64::try_from(d).ok()?;
        supply
            .sbf_inverse(Duration::from_nanos(d))
            .map(|t| u128::from(t.as_nanos()))
    };
    let mut worst: u128 = 0;
    let mut w: u128 = 0;
    let mut q: u128 = 0;
    loop {
        // Job q's completion, from job q − 1's (the demand only grows).
        let mut settled = false;
        for _ in 0..MAX_ITERATIONS {
            let Some(next) = inverse(demand(q, w)) else {
                return Ok(None);
            };
            // Its response can only grow from here: stop at the deadline.
            if (next + jitter).saturating_sub(q * period) > deadline {
                return Ok(None);
            }
            if next <= w {
                settled = true;
                break;
            }
            w = next;
        }
        if !settled {
            return Err(AnalysisError::NoConvergence {
                task: i,
                iterations: MAX_ITERATIONS,
            });
        }
        worst = worst.max((w + jitter).saturating_sub(q * period));
        if w + jitter <= (q + 1) * period {
            return Ok(Some(Duration::from_nanos(worst as u64)));
        }
        q += 1;
        if q * period > horizon || q > MAX_POINTS {
            return Err(AnalysisError::BusyPeriodTooLong {
                task: i,
                jobs: q,
                horizon: Duration::from_nanos(horizon.min(u128::from(u64::MAX)) as u64),
            });
        }
    }
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
    fn deadlines_past_the_period_follow_the_busy_period() {
        // Lehoczky's example: the fifth job of T2 takes 118 ms, the first 114.
        let t1 = Task::ms(26.0, 70.0);
        let t2 = Task::ms(62.0, 100.0);
        let late = [t1, t2.with_deadline(ms(115.0))];
        assert_eq!(fp_response_times(&late, &Supply::Full).unwrap()[1], None);
        let room = [t1, t2.with_deadline(ms(120.0))];
        assert_eq!(
            fp_response_times(&room, &Supply::Full).unwrap()[1],
            Some(ms(118.0))
        );
        // Inside RESBH 0.85 1 the same jobs take longer still.
        let r = fp_response_times(&late, &Supply::of(&g("RESBH 0.85 1"))).unwrap();
        assert_eq!(r[1], None);
        // Utilization past the supply's rate never settles: it can miss.
        let over = [
            Task::ms(6.0, 10.0),
            Task::ms(5.0, 10.0).with_deadline(ms(20.0)),
        ];
        assert_eq!(
            fp_response_times(&over, &Supply::Full).unwrap(),
            vec![Some(ms(6.0)), None]
        );
        let alone = [Task::ms(15.0, 10.0).with_deadline(ms(20.0))];
        assert_eq!(
            fp_response_times(&alone, &Supply::Full).unwrap(),
            vec![None]
        );
        assert_eq!(rta::response_times(&alone).unwrap(), vec![None]);
    }

    #[test]
    fn shared_priorities_delay_each_other() {
        let t0 = Task::ms(0.01, 100.0);
        let t1 = Task::ms(1.0, 10.0).with_deadline(ms(5.0));
        let t2 = Task::ms(6.0, 100.0);
        let r =
            fp_response_times_at_levels(&[t0, t1, t2], &[2, 1, 1], &Supply::Full, ms(1e4)).unwrap();
        assert_eq!(r[0], Some(ms(0.01)));
        assert_eq!(r[1], None, "T2 can run first and hold T1 for 6 ms");
        assert_eq!(r[2], Some(ms(7.01)));
        // Distinct levels are the index-order analysis.
        let distinct = [Task::ms(1.0, 4.0), Task::ms(2.0, 6.0), Task::ms(3.0, 12.0)];
        assert_eq!(
            fp_response_times_at_levels(&distinct, &[3, 2, 1], &Supply::Full, ms(1e4)).unwrap(),
            fp_response_times(&distinct, &Supply::Full).unwrap()
        );
    }

    #[test]
    fn a_busy_period_past_the_horizon_is_not_decided() {
        // Utilization exactly 1 with coprime periods: one long busy period.
        let ts = [
            Task::ms(3.5, 7.0),
            Task::ms(5.5, 11.0).with_deadline(ms(30.0)),
        ];
        assert!(fp_response_times_at_levels(&ts, &[2, 1], &Supply::Full, ms(1e4)).is_ok());
        let e = fp_response_times_at_levels(&ts, &[2, 1], &Supply::Full, ms(20.0)).unwrap_err();
        assert!(
            matches!(e, AnalysisError::BusyPeriodTooLong { task: 1, .. }),
            "{e}"
        );
        assert!(e.to_string().contains("not decided"), "{e}");
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
