//! A CPU reservation for a multithreaded application: the ghost-task method
//! (Regehr 2001, §6.1.2, Lemma 6.2, Theorem 6.2) and the parameter-space map of
//! Fig 6.2 (§6.1.3).
//!
//! The threads of one application share one basic reservation `x / y` and
//! are scheduled rate-monotonically inside it. By Theorem 6.2 they meet
//! their deadlines if a static-priority scheduler on the whole processor can
//! schedule them together with a *ghost task* of the highest priority, with
//! period `y`, execution time `y − x` and release jitter `x` (so that it may
//! run anywhere in its period, as the reservation scheduler may). The test
//! is the response-time analysis with jitter of Eq 6.1/6.2 ([`crate::rta`]).
//!
//! Two unknowns remain, `x` and `y`. [`search_reservation`] follows the
//! heuristic of §6.1.2: find the smallest reservation utilization `x/y`
//! (largest ghost utilization) over the period range, then the longest
//! period whose reservation has that utilization, within a tolerance —
//! longer periods mean fewer context switches. For the Media Player task
//! set of Table 6.1 this lands near 1.5 ms / 6 ms, as §6.1.3 says.
//!
//! [`parameter_space`] tests a grid of `(period, amount)` pairs, the data of
//! Fig 6.2, and writes it as CSV or as a self-contained SVG picture.

use std::fmt::Write as _;

use hsched_core::time::Duration;

use crate::parse::Ms;
use crate::rta::{self, validate, AnalysisError, Task};
use crate::sbf::{busy_period_response, PeriodicResource, Supply, DEFAULT_HORIZON};
use crate::types::{ratio, Guarantee};

/// The ghost task standing for the time a basic reservation `amount` per
/// `period` does not give (Lemma 6.2): period `y`, execution time `y − x`,
/// release jitter `x`, deadline `y`. (A reservation of the whole period
/// leaves a ghost with no work, given no jitter.)
pub fn ghost_task(amount: Duration, period: Duration) -> Task {
    let jitter = if amount >= period {
        Duration::ZERO
    } else {
        amount
    };
    Task {
        wcet: period - amount,
        period,
        deadline: period,
        jitter,
    }
}

/// The application's tasks (in priority order) under a basic reservation
/// `amount` per `period`, with the ghost task in front (Theorem 6.2).
pub fn with_ghost(app: &[Task], amount: Duration, period: Duration) -> Vec<Task> {
    let mut v = Vec::with_capacity(app.len() + 1);
    v.push(ghost_task(amount, period));
    v.extend_from_slice(app);
    v
}

/// Theorem 6.2: whether the application's tasks (index 0 highest priority,
/// e.g. [`rta::rate_monotonic`] order) meet their deadlines under static
/// priorities inside a basic reservation of `amount` per `period`.
///
/// # Errors
/// An invalid task, a zero period, an amount longer than the period, or a
/// recurrence that does not settle ([`AnalysisError::NoConvergence`]).
pub fn schedulable_in_reservation(
    app: &[Task],
    amount: Duration,
    period: Duration,
) -> Result<bool, AnalysisError> {
    validate(app)?;
    check_reservation(amount, period)?;
    let levels = distinct_levels(app.len());
    if amount.as_nanos() == 0 || !necessary(app, amount, period) {
        return Ok(fits(app, &levels, amount, period));
    }
    let tasks = with_ghost(app, amount, period);
    for i in 1..tasks.len() {
        if ghost_response(&tasks, &levels, i)?.is_none() {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Levels for tasks in decreasing priority order, all distinct.
pub(crate) fn distinct_levels(n: usize) -> Vec<i64> {
    (0..n).map(|k| (n - k) as i64).collect()
}

/// The response of `tasks[i]` (the ghost at index 0, the application after
/// it with `levels`): the ghost delays everything, and each application
/// task is delayed by the others of its level or above.
fn ghost_response(
    tasks: &[Task],
    levels: &[i64],
    i: usize,
) -> Result<Option<Duration>, AnalysisError> {
    let interferes = |j: usize| j == 0 || (j != i && levels[j - 1] >= levels[i - 1]);
    busy_period_response(tasks, i, &interferes, &Supply::Full, DEFAULT_HORIZON)
}

fn check_reservation(amount: Duration, period: Duration) -> Result<(), AnalysisError> {
    if period.as_nanos() == 0 || amount > period {
        return Err(AnalysisError::BadArgument {
            reason: format!(
                "a reservation of {} per {} is not valid",
                Ms(amount),
                Ms(period)
            ),
        });
    }
    Ok(())
}

/// Cheap necessary conditions, implied by either exact test: the
/// reservation's rate covers the utilization (for the lowest-priority task
/// the recurrence gives `r ≥ C_n / (1 − U_hp)`), and each task's own
/// execution fits in the worst-case supply of its deadline window.
fn necessary(app: &[Task], amount: Duration, period: Duration) -> bool {
    if ratio(amount, period) + 1e-12 < rta::utilization(app) {
        return false;
    }
    let supply = PeriodicResource {
        period,
        budget: amount,
    };
    app.iter()
        .all(|t| supply.sbf(t.deadline - t.jitter) >= t.wcet)
}

/// The test used by the search and the grid (tasks at `levels`); a busy
/// period that is not decided counts as "does not fit".
fn fits(app: &[Task], levels: &[i64], amount: Duration, period: Duration) -> bool {
    if amount.as_nanos() == 0 {
        return app.iter().all(|t| t.wcet.as_nanos() == 0);
    }
    if !necessary(app, amount, period) {
        return false;
    }
    let tasks = with_ghost(app, amount, period);
    (1..tasks.len()).all(|i| matches!(ghost_response(&tasks, levels, i), Ok(Some(_))))
}

/// Lemma 6.2 in closed form: the jittered ghost leaves exactly the supply of
/// the periodic resource `Γ(y, x)`, so the test can iterate over the
/// application's own jobs (`t ← sbf⁻¹(rbf(t))`) instead of the ghost's.
fn fits_sbf(app: &[Task], levels: &[i64], amount: Duration, period: Duration) -> bool {
    if !necessary(app, amount, period) {
        return false;
    }
    let supply = Supply::Periodic(PeriodicResource {
        period,
        budget: amount,
    });
    (0..app.len()).all(|i| {
        let interferes = |j: usize| j != i && levels[j] >= levels[i];
        matches!(
            busy_period_response(app, i, &interferes, &supply, DEFAULT_HORIZON),
            Ok(Some(_))
        )
    })
}

/// The smallest amount, on a grid of `resolution`, of a basic reservation
/// with `period` that keeps the application schedulable (binary search;
/// schedulability grows with the amount). `None` when even the whole period
/// is not enough.
///
/// # Errors
/// An invalid task, a zero period or resolution.
pub fn min_amount(
    app: &[Task],
    period: Duration,
    resolution: Duration,
) -> Result<Option<Duration>, AnalysisError> {
    validate(app)?;
    check_reservation(Duration::ZERO, period)?;
    if resolution.as_nanos() == 0 {
        return Err(AnalysisError::BadArgument {
            reason: "the amount resolution must be longer than zero".into(),
        });
    }
    Ok(min_amount_unchecked(
        app,
        &distinct_levels(app.len()),
        period,
        resolution,
        Analysis::GhostTask,
        None,
    ))
}

fn min_amount_unchecked(
    app: &[Task],
    levels: &[i64],
    period: Duration,
    resolution: Duration,
    analysis: Analysis,
    hint: Option<f64>,
) -> Option<Duration> {
    let fits = analysis.test();
    let step = resolution.as_nanos();
    let top = period.as_nanos() / step; // amounts k·step ≤ period
    let amount = |k: u64| Duration::from_nanos(k * step);
    let ok = |k: u64| fits(app, levels, amount(k), period);
    if !fits(app, levels, period, period) {
        return None;
    }
    if !ok(top) {
        // The whole period fits but the last grid point below it does not.
        return Some(period);
    }
    if ok(0) {
        return Some(Duration::ZERO);
    }
    // Start from the guessed utilization (the previous period's, or the task
    // set's) and gallop to a bracket: lo fails, hi fits.
    let u = hint.unwrap_or_else(|| rta::utilization(app));
    let guess = (((u * period.as_nanos() as f64) / step as f64).ceil() as u64).clamp(1, top);
    let (mut lo, mut hi);
    if ok(guess) {
        hi = guess;
        let mut d = 1;
        loop {
            let k = guess.saturating_sub(d);
            if k == 0 {
                lo = 0;
                break;
            }
            if ok(k) {
                hi = k;
                d = d.saturating_mul(2);
            } else {
                lo = k;
                break;
            }
        }
    } else {
        lo = guess;
        let mut d = 1;
        loop {
            let k = guess.saturating_add(d).min(top);
            if ok(k) {
                hi = k;
                break;
            }
            lo = k;
            d = d.saturating_mul(2);
        }
    }
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if ok(mid) {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    Some(amount(hi))
}

/// How the search tests one reservation; both give the same answer
/// (Lemma 6.2, checked by the crate's randomized tests).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Analysis {
    /// Response-time analysis with the jittered ghost task (Theorem 6.2,
    /// Eq 6.1/6.2), as in the dissertation.
    #[default]
    GhostTask,
    /// The same test in closed form: the application's tasks under the
    /// supply bound of the basic reservation ([`crate::sbf`]); it iterates
    /// over the application's jobs only, so it is faster with short periods.
    SupplyBound,
}

impl Analysis {
    fn test(self) -> fn(&[Task], &[i64], Duration, Duration) -> bool {
        match self {
            Analysis::GhostTask => fits,
            Analysis::SupplyBound => fits_sbf,
        }
    }
}

/// The search space of [`search_reservation`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SearchConfig {
    /// Shortest period tried.
    pub min_period: Duration,
    /// Longest period tried.
    pub max_period: Duration,
    /// Step between periods.
    pub period_step: Duration,
    /// Grid of amounts.
    pub resolution: Duration,
    /// Relative tolerance on the utilization when looking for the longest
    /// period: a period is chosen when its reservation's utilization is
    /// within `(1 + tolerance)` of the smallest found.
    pub tolerance: f64,
    /// How each candidate is tested.
    pub analysis: Analysis,
}

impl SearchConfig {
    /// Defaults for a task set: periods from `D_min/100` to `D_min` (the
    /// shortest deadline; longer periods need `x ≥ y − (D_min − C)/2` and so
    /// a growing utilization) in steps of `D_min/100`, amounts to 1 µs, 1%
    /// tolerance.
    pub fn for_tasks(app: &[Task]) -> SearchConfig {
        let d_min = app
            .iter()
            .map(|t| t.deadline)
            .min()
            .unwrap_or(Duration::from_millis(10));
        let step = Duration::from_nanos((d_min.as_nanos() / 100).max(1));
        SearchConfig {
            min_period: step,
            max_period: d_min,
            period_step: step,
            resolution: Duration::from_micros(1),
            tolerance: 0.01,
            analysis: Analysis::GhostTask,
        }
    }
}

/// The reservation chosen by [`search_reservation`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ReservationChoice {
    /// Amount `x`.
    pub amount: Duration,
    /// Period `y`.
    pub period: Duration,
    /// `x / y`.
    pub utilization: f64,
    /// The smallest utilization found at any period.
    pub min_utilization: f64,
    /// Periods examined.
    pub periods_tested: usize,
}

impl ReservationChoice {
    /// The guarantee the application needs: `RESBS x y` (a basic
    /// reservation; a hard one, as Rez gives, satisfies it too).
    pub fn request(&self) -> Guarantee {
        Guarantee::ResBS {
            amount: self.amount,
            period: self.period,
        }
    }
}

/// Finds a basic reservation for the application (tasks in priority order)
/// with the heuristic of §6.1.2: over the periods of `config`, the smallest
/// amount for each period; among those, the smallest utilization `u*`; then
/// the longest period whose utilization is at most `u*·(1 + tolerance)`.
///
/// # Errors
/// Invalid tasks or configuration, or a task set that is not schedulable
/// even on the whole processor.
pub fn search_reservation(
    app: &[Task],
    config: &SearchConfig,
) -> Result<ReservationChoice, AnalysisError> {
    search_reservation_at_levels(app, &distinct_levels(app.len()), config)
}

/// [`search_reservation`] for tasks at priority `levels` (larger is more
/// urgent; equal levels share a priority, analysed as in
/// [`crate::sbf::fp_response_times_at_levels`]). Every reservation it
/// proposes passes that analysis.
///
/// # Errors
/// As [`search_reservation`], and `levels` of another length than `app`.
pub fn search_reservation_at_levels(
    app: &[Task],
    levels: &[i64],
    config: &SearchConfig,
) -> Result<ReservationChoice, AnalysisError> {
    validate(app)?;
    if levels.len() != app.len() {
        return Err(AnalysisError::BadArgument {
            reason: format!("{} levels for {} tasks", levels.len(), app.len()),
        });
    }
    let c = config;
    if c.min_period.as_nanos() == 0
        || c.period_step.as_nanos() == 0
        || c.resolution.as_nanos() == 0
        || c.max_period < c.min_period
    {
        return Err(AnalysisError::BadArgument {
            reason: "the search needs 0 < min_period ≤ max_period and non-zero steps".into(),
        });
    }
    if !(c.tolerance.is_finite() && c.tolerance >= 0.0) {
        return Err(AnalysisError::BadArgument {
            reason: "the tolerance must be a non-negative number".into(),
        });
    }
    let full =
        crate::sbf::fp_response_times_at_levels(app, levels, &Supply::Full, DEFAULT_HORIZON)?;
    if full.iter().any(Option::is_none) {
        return Err(AnalysisError::BadArgument {
            reason:
                "the task set misses deadlines even on the whole processor; no reservation can help"
                    .into(),
        });
    }
    let mut found: Vec<(Duration, Duration)> = Vec::new();
    let mut tested = 0;
    let mut p = c.min_period;
    while p <= c.max_period {
        tested += 1;
        let hint = found.last().map(|&(x, q)| ratio(x, q));
        if let Some(x) = min_amount_unchecked(app, levels, p, c.resolution, c.analysis, hint) {
            found.push((x, p));
        }
        p += c.period_step;
    }
    let Some(min_u) = found
        .iter()
        .map(|&(x, p)| ratio(x, p))
        .min_by(f64::total_cmp)
    else {
        return Err(AnalysisError::BadArgument {
            reason: format!(
                "no period between {} and {} ms works; widen the search",
                Ms(c.min_period),
                Ms(c.max_period)
            ),
        });
    };
    let limit = min_u * (1.0 + c.tolerance) + 1e-12;
    let &(amount, period) = found
        .iter()
        .rev()
        .find(|&&(x, p)| ratio(x, p) <= limit)
        .unwrap_or(&found[0]);
    Ok(ReservationChoice {
        amount,
        period,
        utilization: ratio(amount, period),
        min_utilization: min_u,
        periods_tested: tested,
    })
}

/// A grid of reservation parameters for [`parameter_space`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Grid {
    /// Shortest period.
    pub period_min: Duration,
    /// Longest period.
    pub period_max: Duration,
    /// Step between periods.
    pub period_step: Duration,
    /// Smallest amount.
    pub amount_min: Duration,
    /// Largest amount.
    pub amount_max: Duration,
    /// Step between amounts.
    pub amount_step: Duration,
}

impl Grid {
    /// A square grid from `step` to `max` on both axes (`Grid::square(20ms,
    /// 0.2ms)`).
    pub fn square(max: Duration, step: Duration) -> Grid {
        Grid {
            period_min: step,
            period_max: max,
            period_step: step,
            amount_min: step,
            amount_max: max,
            amount_step: step,
        }
    }
}

/// The schedulable region of reservation parameters (Fig 6.2).
#[derive(Clone, Debug, PartialEq)]
pub struct ParameterSpace {
    /// Periods, ascending.
    pub periods: Vec<Duration>,
    /// Amounts, ascending.
    pub amounts: Vec<Duration>,
    /// `cells[p * amounts.len() + a]`: `Some(schedulable)`, or `None` where
    /// the amount exceeds the period.
    pub cells: Vec<Option<bool>>,
    /// Utilization of the task set.
    pub task_utilization: f64,
}

fn axis(min: Duration, max: Duration, step: Duration) -> Vec<Duration> {
    let mut v = Vec::new();
    let mut x = min;
    while x <= max {
        v.push(x);
        x += step;
    }
    v
}

/// Tests every `(period, amount)` of the grid with Theorem 6.2.
///
/// # Errors
/// Invalid tasks, a zero step, or more than a million cells.
pub fn parameter_space(app: &[Task], grid: &Grid) -> Result<ParameterSpace, AnalysisError> {
    parameter_space_at_levels(app, &distinct_levels(app.len()), grid)
}

/// [`parameter_space`] for tasks at priority `levels` (see
/// [`search_reservation_at_levels`]).
///
/// # Errors
/// As [`parameter_space`], and `levels` of another length than `app`.
pub fn parameter_space_at_levels(
    app: &[Task],
    levels: &[i64],
    grid: &Grid,
) -> Result<ParameterSpace, AnalysisError> {
    validate(app)?;
    if levels.len() != app.len() {
        return Err(AnalysisError::BadArgument {
            reason: format!("{} levels for {} tasks", levels.len(), app.len()),
        });
    }
    if grid.period_step.as_nanos() == 0
        || grid.amount_step.as_nanos() == 0
        || grid.period_min.as_nanos() == 0
    {
        return Err(AnalysisError::BadArgument {
            reason: "grid steps and the shortest period must be longer than zero".into(),
        });
    }
    let periods = axis(grid.period_min, grid.period_max, grid.period_step);
    let amounts = axis(grid.amount_min, grid.amount_max, grid.amount_step);
    if periods.len().saturating_mul(amounts.len()) > 1_000_000 {
        return Err(AnalysisError::BadArgument {
            reason: "the grid has more than a million cells; use larger steps".into(),
        });
    }
    let mut cells = Vec::with_capacity(periods.len() * amounts.len());
    for &p in &periods {
        for &a in &amounts {
            cells.push((a <= p).then(|| fits(app, levels, a, p)));
        }
    }
    Ok(ParameterSpace {
        periods,
        amounts,
        cells,
        task_utilization: rta::utilization(app),
    })
}

impl ParameterSpace {
    /// The cell for period index `p` and amount index `a`.
    pub fn cell(&self, p: usize, a: usize) -> Option<bool> {
        self.cells
            .get(p * self.amounts.len() + a)
            .copied()
            .flatten()
    }

    /// CSV with a header: `period_ms,amount_ms,utilization,schedulable`, one
    /// row per valid cell (amount ≤ period).
    pub fn to_csv(&self) -> String {
        let mut out = String::from("period_ms,amount_ms,utilization,schedulable\n");
        for (pi, &p) in self.periods.iter().enumerate() {
            for (ai, &a) in self.amounts.iter().enumerate() {
                if let Some(ok) = self.cells[pi * self.amounts.len() + ai] {
                    let _ = writeln!(out, "{},{},{:.4},{}", Ms(p), Ms(a), ratio(a, p), ok);
                }
            }
        }
        out
    }

    /// A self-contained SVG picture in the style of Fig 6.2: period on the
    /// x axis, amount on the y axis, unschedulable combinations shaded, the
    /// impossible region (amount > period) hatched in light grey, the line
    /// of the task set's utilization dashed, and `mark` (e.g. the chosen
    /// reservation) as a dot.
    pub fn to_svg(&self, mark: Option<(Duration, Duration)>) -> String {
        let (w, h, left, bottom, top, right) = (640.0, 480.0, 60.0, 50.0, 20.0, 20.0);
        let pw = w - left - right;
        let ph = h - top - bottom;
        let pmax = self
            .periods
            .last()
            .map_or(1.0, |d| d.as_millis_f64())
            .max(1e-9);
        let amax = self
            .amounts
            .last()
            .map_or(1.0, |d| d.as_millis_f64())
            .max(1e-9);
        let pstep = pmax / self.periods.len().max(1) as f64;
        let astep = amax / self.amounts.len().max(1) as f64;
        let x = |p: f64| left + p / pmax * pw;
        let y = |a: f64| top + ph - a / amax * ph;
        let mut s = String::new();
        let _ = writeln!(
            s,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="sans-serif" font-size="12">"#
        );
        let _ = writeln!(
            s,
            r#"<rect x="0" y="0" width="{w}" height="{h}" fill="white"/>"#
        );
        // Runs of equal cells per period column, drawn as one rectangle each.
        for (pi, p) in self.periods.iter().enumerate() {
            let px = p.as_millis_f64();
            let mut ai = 0;
            while ai < self.amounts.len() {
                let state = self.cells[pi * self.amounts.len() + ai];
                let mut end = ai;
                while end + 1 < self.amounts.len()
                    && self.cells[pi * self.amounts.len() + end + 1] == state
                {
                    end += 1;
                }
                let fill = match state {
                    Some(true) => None,
                    Some(false) => Some("#9a9a9a"),
                    None => Some("#e6e6e6"),
                };
                if let Some(fill) = fill {
                    let a0 = self.amounts[ai].as_millis_f64() - astep;
                    let a1 = self.amounts[end].as_millis_f64();
                    let _ = writeln!(
                        s,
                        r#"<rect x="{:.2}" y="{:.2}" width="{:.2}" height="{:.2}" fill="{fill}"/>"#,
                        x(px - pstep),
                        y(a1),
                        x(px) - x(px - pstep),
                        y(a0.max(0.0)) - y(a1)
                    );
                }
                ai = end + 1;
            }
        }
        // Utilization line a = U·p.
        let u = self.task_utilization;
        let _ = writeln!(
            s,
            r##"<line x1="{:.2}" y1="{:.2}" x2="{:.2}" y2="{:.2}" stroke="#c03030" stroke-dasharray="6 4"/>"##,
            x(0.0),
            y(0.0),
            x(pmax),
            y((u * pmax).min(amax))
        );
        // Axes and ticks.
        let _ = writeln!(
            s,
            r#"<line x1="{left}" y1="{}" x2="{}" y2="{}" stroke="black"/>"#,
            top + ph,
            left + pw,
            top + ph
        );
        let _ = writeln!(
            s,
            r#"<line x1="{left}" y1="{top}" x2="{left}" y2="{}" stroke="black"/>"#,
            top + ph
        );
        for k in 0..=5 {
            let pv = pmax * k as f64 / 5.0;
            let av = amax * k as f64 / 5.0;
            let _ = writeln!(
                s,
                r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{:.1}</text>"#,
                x(pv),
                top + ph + 16.0,
                pv
            );
            let _ = writeln!(
                s,
                r#"<text x="{:.1}" y="{:.1}" text-anchor="end">{:.1}</text>"#,
                left - 6.0,
                y(av) + 4.0,
                av
            );
        }
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">reservation period (ms)</text>"#,
            left + pw / 2.0,
            h - 10.0
        );
        let _ = writeln!(
            s,
            r#"<text x="16" y="{:.1}" text-anchor="middle" transform="rotate(-90 16 {:.1})">reservation amount (ms)</text>"#,
            top + ph / 2.0,
            top + ph / 2.0
        );
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{:.1}">shaded: not schedulable; dashed: task-set utilization {:.1}%</text>"#,
            left + 8.0,
            top + 14.0,
            u * 100.0
        );
        if let Some((amount, period)) = mark {
            let _ = writeln!(
                s,
                r##"<circle cx="{:.2}" cy="{:.2}" r="4" fill="#2060c0"/><text x="{:.2}" y="{:.2}">{} / {} ms</text>"##,
                x(period.as_millis_f64()),
                y(amount.as_millis_f64()),
                x(period.as_millis_f64()) + 6.0,
                y(amount.as_millis_f64()) - 6.0,
                Ms(amount),
                Ms(period)
            );
        }
        s.push_str("</svg>\n");
        s
    }
}

/// The Media Player task set of Table 6.1 (periods and amounts in ms), in
/// rate-monotonic order. Total utilization 24.1%.
pub fn media_player() -> Vec<Task> {
    rta::rate_monotonic(&[
        Task::ms(1.0, 10.0),
        Task::ms(2.0, 45.0),
        Task::ms(4.0, 100.0),
        Task::ms(3.0, 100.0),
        Task::ms(7.0, 500.0),
        Task::ms(25.0, 2000.0),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sbf::{fp_schedulable, Supply};

    fn ms(v: f64) -> Duration {
        Duration::from_millis_f64(v)
    }

    #[test]
    fn table_6_1_utilization() {
        assert!((rta::utilization(&media_player()) - 0.241).abs() < 0.0005);
    }

    #[test]
    fn section_6_1_3_gap_of_9ms_barely_fits_the_10ms_thread() {
        let app = media_player();
        // 1.5 / 6 has a 9 ms gap (Lemma 5.3): the period-10 thread needing 1 ms just fits.
        let only_t1 = &app[..1];
        assert!(schedulable_in_reservation(only_t1, ms(1.5), ms(6.0)).unwrap());
        let r = rta::response_time(&with_ghost(only_t1, ms(1.5), ms(6.0)), 1);
        assert_eq!(r, Ok(Some(ms(10.0))));
        // A gap of more than 9 ms leaves it no room.
        assert!(!schedulable_in_reservation(only_t1, ms(1.4), ms(6.0)).unwrap());
    }

    #[test]
    fn section_6_1_3_search_lands_near_1_5_over_6() {
        let app = media_player();
        let choice = search_reservation(&app, &SearchConfig::for_tasks(&app)).unwrap();
        let (x, y) = (choice.amount.as_millis_f64(), choice.period.as_millis_f64());
        assert!((5.0..=7.0).contains(&y), "period {y}");
        assert!((1.2..=1.8).contains(&x), "amount {x}");
        assert!(
            choice.utilization >= 0.241 && choice.utilization <= 0.30,
            "{choice:?}"
        );
        assert!(schedulable_in_reservation(&app, choice.amount, choice.period).unwrap());
        // Optimal in the §6.1.3 sense: a little less time at that period fails.
        assert!(
            !schedulable_in_reservation(&app, choice.amount - ms(0.001), choice.period).unwrap()
        );
        assert_eq!(
            choice.request().to_string(),
            format!("RESBS {} {}", Ms(choice.amount), Ms(choice.period))
        );
    }

    #[test]
    fn figure_6_1_example() {
        // T1..T3 under a basic reservation of 1.1 ms / 5 ms (§6.1).
        let app = rta::rate_monotonic(&[
            Task::ms(1.0, 10.0),
            Task::ms(1.0, 20.0),
            Task::ms(5.0, 100.0),
        ]);
        assert!(schedulable_in_reservation(&app, ms(1.1), ms(5.0)).unwrap());
    }

    #[test]
    fn ghost_method_agrees_with_the_periodic_supply_bound() {
        // Lemma 6.2: the ghost task and the basic reservation give the same
        // schedule, so the two analyses must agree.
        let app = media_player();
        for p10 in (10..=120).step_by(7) {
            let p = ms(p10 as f64 / 10.0);
            for a in (1..=p10).step_by(3) {
                let x = ms(a as f64 / 10.0);
                let ghost = schedulable_in_reservation(&app, x, p).unwrap();
                let sbf = fp_schedulable(
                    &app,
                    &Supply::of(&Guarantee::ResBS {
                        amount: x,
                        period: p,
                    }),
                )
                .unwrap();
                assert_eq!(ghost, sbf, "{x} / {p}");
            }
        }
    }

    #[test]
    fn parameter_space_outputs() {
        let app = media_player();
        let space = parameter_space(&app, &Grid::square(ms(12.0), ms(0.5))).unwrap();
        assert_eq!(space.periods.len(), 24);
        // The chosen reservation region: 1.5/6 schedulable, 1.0/6 not, 7/6 impossible.
        let pi = space.periods.iter().position(|&p| p == ms(6.0)).unwrap();
        let ai = |a: f64| space.amounts.iter().position(|&x| x == ms(a)).unwrap();
        assert_eq!(space.cell(pi, ai(1.5)), Some(true));
        assert_eq!(space.cell(pi, ai(1.0)), Some(false));
        assert_eq!(space.cell(pi, ai(7.0)), None);
        let csv = space.to_csv();
        assert!(csv.starts_with("period_ms,amount_ms,utilization,schedulable\n"));
        assert!(csv.contains("\n6,1.5,0.2500,true\n"), "{csv}");
        assert!(csv.contains("\n6,1,0.1667,false\n"));
        let svg = space.to_svg(Some((ms(1.5), ms(6.0))));
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert!(svg.contains("1.5 / 6 ms"));
        assert!(parameter_space(&app, &Grid::square(ms(12.0), Duration::ZERO)).is_err());
    }

    #[test]
    fn both_analyses_and_warm_starts_agree() {
        let app = media_player();
        let cfg = SearchConfig::for_tasks(&app);
        let a = search_reservation(&app, &cfg).unwrap();
        let b = search_reservation(
            &app,
            &SearchConfig {
                analysis: Analysis::SupplyBound,
                ..cfg
            },
        )
        .unwrap();
        assert_eq!(a, b);
        let us = Duration::from_micros(1);
        for p in [0.3, 1.0, 2.5, 5.9, 9.0, 14.0] {
            let levels = distinct_levels(app.len());
            let cold = min_amount_unchecked(&app, &levels, ms(p), us, Analysis::GhostTask, None);
            for hint in [Some(0.01), Some(0.3), Some(0.99)] {
                for an in [Analysis::GhostTask, Analysis::SupplyBound] {
                    assert_eq!(
                        min_amount_unchecked(&app, &levels, ms(p), us, an, hint),
                        cold,
                        "{p} {hint:?} {an:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn min_amount_edges() {
        let app = media_player();
        assert_eq!(
            min_amount(&[], ms(5.0), ms(0.1)).unwrap(),
            Some(Duration::ZERO)
        );
        // A period too long for the 10 ms thread's gap needs nearly all of it.
        let x = min_amount(&app, ms(20.0), ms(0.01)).unwrap().unwrap();
        assert!(x.as_millis_f64() > 15.0, "{x}");
        assert!(min_amount(&app, Duration::ZERO, ms(0.1)).is_err());
        let overloaded = [Task::ms(6.0, 10.0), Task::ms(6.0, 10.0)];
        assert_eq!(min_amount(&overloaded, ms(5.0), ms(0.1)).unwrap(), None);
        assert!(search_reservation(&overloaded, &SearchConfig::for_tasks(&overloaded)).is_err());
    }
}
