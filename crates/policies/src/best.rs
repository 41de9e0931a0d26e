//! # BEST (`best`)
//!
//! Banachowski's *Best-effort scheduler Enhanced for Soft real-time
//! Time-sharing* (Banachowski 2002, ch. 3): an earliest-deadline-first
//! scheduler whose deadlines are all inferred. No child declares anything;
//! BEST watches when each child enters the run queue, estimates its period,
//! and gives children that look periodic the deadline `wake-up + period`.
//!
//! ## Algorithm (Banachowski 2002, §3.3)
//! - **Period detection at wake-up** (§3.3.1; the `request` hook, i.e. the
//!   child VP going from waiting to ready). `P_est` is the time since the
//!   child's previous wake-up, measured on a clock of resolution `tick`
//!   (800 Hz in the report). The effective period is the weighted average
//!   `P_n = (P_est + w·P_{n−1}) / (1 + w)`, clamped to `max_period`.
//!   [`PeriodEstimator`] does this; it is a small value type so it can be
//!   unit-tested and benchmarked alone.
//! - **Confidence** (§3.3.2): `|P_est mod P_n − P_n/2|`, normalised to an
//!   integer 0..=16 (16: `P_est` is a multiple of `P_n`; 0: exactly half-way
//!   between two multiples). The wake-up is *periodic* when the confidence
//!   exceeds `confidence_threshold` (0: "any confidence level greater than 0
//!   passes", §3.3.4). `P_n = 0` (two wake-ups on the same clock tick of a
//!   child with no history) scores 0: non-periodic.
//! - **Periodic wake-up**: deadline `wake + P_n`, budget ("deadline
//!   expiration timer") `P_n` of CPU time. Periodic children ignore `nice`.
//! - **Non-periodic wake-up**: a best-effort pseudo-deadline (see
//!   `best_effort_deadline`) and a budget of one nice-scaled quantum,
//!   `quantum · (20 − nice) / 20` (100 ms by default, 5 ms at nice 19, 200 ms
//!   at nice −20: §3.3.3 and Linux 2.4).
//! - **Budget**: charged only while the child runs (CPU time it receives,
//!   net of stolen time), kept across preemption and revocation. A child
//!   that uses it all without blocking is *postponed*: deadline
//!   `now + max_period + cpu_bound_offset`, budget one quantum (§3.3.1,
//!   §3.3.4). A postponed deadline is an absolute time, so CPU hogs cannot
//!   starve: every later wake-up gets a deadline at or after its wake time.
//! - **Dispatch**: EDF over ready children; ties go to the child whose
//!   deadline was assigned first. A waking child with an earlier deadline
//!   preempts a running one, unless that one has less than
//!   `no_preempt_window` (10 ms) of budget left (§3.3.3).
//!
//! ## Hierarchy and multiprocessors
//! BEST is an ordinary hierarchical policy: it works at the root, under a
//! reservation or beside other policies, and only ever sees the processors
//! its parent grants. The report is uniprocessor; with `k` processors held,
//! BEST runs the `k` earliest-deadline ready children (global EDF). A waking
//! child preempts the running child with the *latest* deadline among those
//! later than its own that are not inside their no-preemption window. When
//! the parent revokes a processor, the child on it loses it with the
//! parent's reason and keeps its deadline and remaining budget; if it is
//! earlier than another running child (outside its window), it takes that
//! child's processor. A child whose budget runs out is re-queued with its
//! postponed deadline and the freed processor goes to the earliest ready
//! child (possibly itself again; the window never protects an expired child).
//!
//! ## Parameters
//! | side | key | kind | default | meaning |
//! |---|---|---|---|---|
//! | instance | `max_period` | duration | `2.56s` | longest detectable period; `P_n` is clamped to it (§3.3.4) |
//! | instance | `cpu_bound_offset` | duration | `100ms` | added to `max_period` when postponing a child that used its whole budget |
//! | instance | `period_weight` | number or `"a/b"` | `1/3` | `w` in `P_n = (P_est + w·P_{n−1})/(1+w)` |
//! | instance | `confidence_threshold` | integer 0..=16 | `0` | a wake-up is periodic when its confidence is above this |
//! | instance | `confidence_period` | `"updated"` / `"previous"` | `"updated"` | which `P_n` the confidence compares `P_est` with |
//! | instance | `no_preempt_window` | duration | `10ms` | a running child with less budget left than this is not preempted by a wake-up |
//! | instance | `quantum` | duration, at least 20 µs (1 µs at nice 19) | `100ms` | the nice-0 quantum; nice scales it by `(20 − nice)/20` |
//! | instance | `best_effort_deadline` | `"period"` / `"max-period"` | `"period"` | pseudo-deadline of a non-periodic wake-up: `wake + P_n` or `wake + max_period` |
//! | instance | `initial_period` | duration | `0s` | `P_0` of a new child |
//! | instance | `tick` | duration | `1.25ms` | resolution of the clock wake-ups are measured on (800 Hz); `0s` for exact |
//! | child | `nice` | integer −20..=19 | `0` | scales the quantum of non-periodic children |
//!
//! `Msg::SetParams { nice }` changes a child's nice value; it applies from
//! the child's next budget.
//!
//! ## Readings of the report's ambiguities
//! - `w = 1/3` (new sample weight 3/4), not "new sample weight 1/3" (`w = 2`):
//!   only `w = 1/3` keeps both of the report's claims (a child waking twice
//!   per frame, and one that skipped periods after a miss, stay periodic)
//!   under either confidence ordering. Tested in `tests/best.rs`.
//! - The clamp applies to `P_n` after averaging, so a long sleep still
//!   leaves a period of at most `max_period`.
//! - The confidence uses the *updated* `P_n` (the Bossa port's reading);
//!   `confidence_period = "previous"` selects the other.
//! - Normalisation: `conf = 16·|2·(P_est mod P_n) − P_n| / P_n` (integer);
//!   16 at exact multiples, 0 exactly half-way.
//! - The best-effort pseudo-deadline is `wake + P_n` ("assigns
//!   pseudo-periods to non-periodic processes to allow for good response
//!   time"): an interactive child that sleeps gets a deadline within
//!   `max_period` of its wake-up, ahead of postponed CPU hogs.
//! - A new child has `P_0 = initial_period`, no previous wake-up and
//!   deadline = its first wake-up time: its first wake-up has no sample and
//!   is non-periodic.
//! - A postponed child's new budget is one quantum.
//!
//! ## Guarantees
//! Best effort: `NULL ↦ NULL`. BEST accepts any supply (it needs none) and
//! guarantees nothing to its children; the schedulability analysis treats
//! its subtree as best effort.
//!
//! ## Shared machinery
//! This file also holds the EDF dispatch core (`Edf`) that `best-rate`
//! reuses with its own deadline rule.

use crate::fp::{param_err, Parents, Run};
use crate::registry::{check_child_params, PolicyInfo};
use std::collections::BTreeSet;

use hsched_core::{
    CpuId, Ctx, Duration, Instant, ParamSpec, ParamValue, Params, Policy, PolicyError, PolicyEvent,
    RevokeReason, Side, VpId, VpState, VpTable,
};

/// Registry entry.
pub const INFO: PolicyInfo = PolicyInfo {
    name: "best",
    summary:
        "EDF with deadlines inferred from wake-up periods; best-effort quanta for the rest (BEST)",
    source: "Banachowski 2002, ch. 3 (§3.3)",
    instance_params: &[
        ParamSpec {
            key: "max_period",
            kind: "duration",
            default: "2.56s",
            doc: "longest detectable period; P_n is clamped to it",
        },
        ParamSpec {
            key: "cpu_bound_offset",
            kind: "duration",
            default: "100ms",
            doc: "added to max_period when postponing a child that used its whole budget",
        },
        ParamSpec {
            key: "period_weight",
            kind: "number or \"a/b\"",
            default: "1/3",
            doc: "w in P_n = (P_est + w·P_{n-1})/(1+w)",
        },
        ParamSpec {
            key: "confidence_threshold",
            kind: "integer 0..=16",
            default: "0",
            doc: "a wake-up is periodic when its confidence is above this",
        },
        ParamSpec {
            key: "confidence_period",
            kind: "\"updated\" or \"previous\"",
            default: "updated",
            doc: "which P_n the confidence compares P_est with",
        },
        ParamSpec {
            key: "no_preempt_window",
            kind: "duration",
            default: "10ms",
            doc: "a running child with less budget left is not preempted by a wake-up",
        },
        ParamSpec {
            key: "quantum",
            kind: "duration, at least 20us",
            default: "100ms",
            doc: "nice-0 quantum, scaled by (20 - nice)/20",
        },
        ParamSpec {
            key: "best_effort_deadline",
            kind: "\"period\" or \"max-period\"",
            default: "period",
            doc: "pseudo-deadline of a non-periodic wake-up: wake + P_n, or wake + max_period",
        },
        ParamSpec {
            key: "initial_period",
            kind: "duration",
            default: "0s",
            doc: "P_0 of a new child",
        },
        ParamSpec {
            key: "tick",
            kind: "duration",
            default: "1.25ms",
            doc: "resolution of the clock wake-ups are measured on (800 Hz); 0s for exact",
        },
    ],
    child_params: &[NICE_SPEC],
    change_params: &[],
    max_children: None,
    min_parents: 1,
    max_parents: 1,
    build,
    check_child: |p| crate::best::nice_of(&INFO, p).map(drop),
    exclusive: None,
    admission: None,
    merge_change: crate::registry::merge_change,
};

/// The `nice` child parameter shared by `best`, `best-rate` and `linux24`.
pub(crate) const NICE_SPEC: ParamSpec = ParamSpec {
    key: "nice",
    kind: "integer -20..=19",
    default: "0",
    doc: "Unix nice value: scales the quantum by (20 - nice)/20",
};

fn build(params: &Params) -> Result<Box<dyn Policy>, PolicyError> {
    Ok(Box::new(Best::new(BestConfig::from_params(params)?)))
}

// ----- parameter helpers (shared with best_rate and linux24) -----------------

/// A duration parameter with a default.
pub(crate) fn duration_or(
    params: &Params,
    key: &str,
    default: Duration,
) -> Result<Duration, PolicyError> {
    Ok(params.duration(key)?.unwrap_or(default))
}

/// A positive duration parameter with a default.
pub(crate) fn positive_duration_or(
    params: &Params,
    key: &str,
    default: Duration,
) -> Result<Duration, PolicyError> {
    let d = duration_or(params, key, default)?;
    if d == Duration::ZERO {
        return Err(param_err(key, "must be longer than zero"));
    }
    Ok(d)
}

/// A weight given as a number (`0.5`) or a fraction (`"1/3"`), in `[0, 1000]`.
pub(crate) fn weight_or(params: &Params, key: &str, default: f64) -> Result<f64, PolicyError> {
    let w = match params.get(key) {
        None => default,
        Some(ParamValue::Str(s)) => parse_fraction(s).ok_or_else(|| {
            param_err(
                key,
                format!("`{s}` is not a number or a fraction such as \"1/3\""),
            )
        })?,
        Some(_) => params.f64(key)?.unwrap_or(default),
    };
    if !(0.0..=1000.0).contains(&w) {
        return Err(param_err(key, format!("{w} is outside [0, 1000]")));
    }
    Ok(w)
}

fn parse_fraction(s: &str) -> Option<f64> {
    let s = s.trim();
    let v = match s.split_once('/') {
        Some((a, b)) => {
            let (a, b): (f64, f64) = (a.trim().parse().ok()?, b.trim().parse().ok()?);
            if b == 0.0 {
                return None;
            }
            a / b
        }
        None => s.parse().ok()?,
    };
    v.is_finite().then_some(v)
}

/// One of several words.
pub(crate) fn choice_or<'a>(
    params: &Params,
    key: &str,
    options: &[&'a str],
) -> Result<&'a str, PolicyError> {
    match params.str(key)? {
        None => Ok(options[0]),
        Some(s) => {
            options.iter().copied().find(|o| *o == s).ok_or_else(|| {
                param_err(key, format!("`{s}` is not one of {}", options.join(", ")))
            })
        }
    }
}

/// A child's `nice` value, checked against the child keys of `info`.
pub(crate) fn nice_of(info: &PolicyInfo, params: &Params) -> Result<Option<i64>, PolicyError> {
    check_child_params(info, params)?;
    match params.i64("nice")? {
        Some(n) if !(-20..=19).contains(&n) => {
            Err(param_err("nice", format!("{n} is outside -20..=19")))
        }
        n => Ok(n),
    }
}

/// The Linux nice priority `pri = 20 − nice`, in 1..=40.
pub(crate) fn nice_pri(nice: i64) -> u64 {
    (20 - nice.clamp(-20, 19)) as u64
}

/// The nice-scaled quantum `quantum · (20 − nice) / 20`: 100 ms at nice 0,
/// 200 ms at −20, 50 ms at +10, 5 ms at +19 with the default quantum.
pub(crate) fn nice_quantum(quantum: Duration, nice: i64) -> Duration {
    quantum.mul_div(nice_pri(nice), 20)
}

// ----- the period estimator ---------------------------------------------------

/// Fixed-point denominator of the period weight: 3·2²⁰, so that 1/3, 2 and
/// every dyadic fraction are exact.
pub(crate) const WEIGHT_DEN: u64 = 3 << 20;

/// `(sample + w·old) / (1 + w)` with `w = w_num / WEIGHT_DEN`, in integer
/// nanoseconds (64-bit arithmetic when it cannot overflow, which covers
/// periods up to days; 128-bit otherwise).
pub(crate) fn smooth(sample: Duration, old: Duration, w_num: u64) -> Duration {
    let (s, o) = (sample.as_nanos(), old.as_nanos());
    let fast = s
        .checked_mul(WEIGHT_DEN)
        .and_then(|a| o.checked_mul(w_num).and_then(|b| a.checked_add(b)))
        .zip(WEIGHT_DEN.checked_add(w_num));
    match fast {
        // w = 1/3 makes the divisor 2^22: a shift, as in the report's
        // fixed-point kernel code.
        Some((num, den)) if den.is_power_of_two() => Duration(num >> den.trailing_zeros()),
        Some((num, den)) => Duration(num / den),
        None => {
            let num = s as u128 * WEIGHT_DEN as u128 + o as u128 * w_num as u128;
            let den = WEIGHT_DEN as u128 + w_num as u128;
            Duration((num / den) as u64)
        }
    }
}

/// `w` as a numerator over [`WEIGHT_DEN`].
pub(crate) fn weight_num(w: f64) -> u64 {
    // Non-negative, so adding one half and truncating rounds (without a
    // libm call on the wake-up path).
    (w.clamp(0.0, 1000.0) * WEIGHT_DEN as f64 + 0.5) as u64
}

/// Which effective period the confidence compares the sample with (the
/// report does not say).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConfidencePeriod {
    /// `P_n`, after folding in the sample (the Bossa port's reading).
    Updated,
    /// `P_{n−1}`, before the sample.
    Previous,
}

/// Settings of [`PeriodEstimator`]; `Default` gives the report's values.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EstimatorConfig {
    /// `w` in `P_n = (P_est + w·P_{n−1})/(1+w)`, in `[0, 1000]` (1/3).
    pub weight: f64,
    /// `P_n` is clamped to this (2.56 s).
    pub max_period: Duration,
    /// A wake-up is periodic when its confidence (0..=16) is above this (0).
    pub threshold: u8,
    /// Resolution of the clock wake-ups are measured on (1.25 ms, 800 Hz);
    /// zero measures exactly.
    pub tick: Duration,
    /// Which period the confidence uses (updated).
    pub confidence_period: ConfidencePeriod,
}

impl Default for EstimatorConfig {
    fn default() -> Self {
        EstimatorConfig {
            weight: 1.0 / 3.0,
            max_period: Duration::from_millis(2560),
            threshold: 0,
            tick: Duration::from_micros(1250),
            confidence_period: ConfidencePeriod::Updated,
        }
    }
}

/// What one wake-up told the estimator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Estimate {
    /// `P_est`, the time since the previous wake-up (none at the first).
    pub sample: Option<Duration>,
    /// `P_n` after this wake-up (clamped).
    pub period: Duration,
    /// Confidence 0..=16 that the sample fits a multiple of the period.
    pub confidence: u8,
    /// Whether the confidence passed the threshold.
    pub periodic: bool,
}

/// BEST's per-child period detector (Banachowski 2002, §3.3.1–3.3.2): the previous
/// wake-up time and the smoothed period. Feed it every wake-up with
/// [`PeriodEstimator::observe`].
///
/// ```
/// use hsched_core::{Duration, Instant};
/// use hsched_policies::best::{EstimatorConfig, PeriodEstimator};
///
/// let cfg = EstimatorConfig::default();
/// let mut est = PeriodEstimator::new(Duration::ZERO);
/// let mut last = None;
/// for k in 0..5u64 {
///     last = Some(est.observe(&cfg, Instant(k * 40_000_000)));
/// }
/// let e = last.unwrap();
/// assert!(e.periodic);
/// assert!(e.period.as_millis_f64() > 39.0 && e.period.as_millis_f64() <= 40.0);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PeriodEstimator {
    last_wake: Option<Instant>,
    period: Duration,
}

impl PeriodEstimator {
    /// A child with no wake-up yet and `P_0 = initial_period`.
    pub fn new(initial_period: Duration) -> Self {
        PeriodEstimator {
            last_wake: None,
            period: initial_period,
        }
    }

    /// The current effective period `P_n`.
    pub fn period(&self) -> Duration {
        self.period
    }

    /// The previous wake-up, on the estimator's clock.
    pub fn last_wake(&self) -> Option<Instant> {
        self.last_wake
    }

    /// Folds in a wake-up at `now`: measures `P_est`, updates and clamps
    /// `P_n`, and scores the confidence.
    pub fn observe(&mut self, cfg: &EstimatorConfig, now: Instant) -> Estimate {
        let now = quantize(now, cfg.tick, self.last_wake);
        let sample = self.last_wake.map(|l| now.saturating_since(l));
        self.last_wake = Some(now);
        let Some(p_est) = sample else {
            return Estimate {
                sample: None,
                period: self.period,
                confidence: 0,
                periodic: false,
            };
        };
        let previous = self.period;
        self.period = smooth(p_est, previous, weight_num(cfg.weight)).min(cfg.max_period);
        let base = match cfg.confidence_period {
            ConfidencePeriod::Updated => self.period,
            ConfidencePeriod::Previous => previous,
        };
        let c = confidence(p_est, base);
        Estimate {
            sample,
            period: self.period,
            confidence: c,
            periodic: c > cfg.threshold,
        }
    }
}

/// `t` rounded down to a multiple of `tick`, given `last`, an earlier
/// multiple: the usual gap fits 32-bit division, which is much cheaper
/// than 64-bit division on common processors.
fn quantize(t: Instant, tick: Duration, last: Option<Instant>) -> Instant {
    let q = tick.as_nanos();
    if q == 0 {
        return t;
    }
    let t = t.as_nanos();
    if let Some(l) = last.map(Instant::as_nanos).filter(|&l| l <= t) {
        let gap = t - l;
        if let (Ok(g), Ok(q32)) = (u32::try_from(gap), u32::try_from(q)) {
            return Instant(t - (g % q32) as u64);
        }
    }
    Instant(t - t % q)
}

/// The confidence that `sample` is a multiple of `period`, 0..=16:
/// `16·|2·(sample mod period) − period| / period`, i.e. `|P_est mod P_n −
/// P_n/2|` scaled from `[0, P_n/2]` to `[0, 16]` (Banachowski 2002, §3.3.2). A zero
/// period scores 0.
pub fn confidence(sample: Duration, period: Duration) -> u8 {
    let p = period.as_nanos();
    if p == 0 {
        return 0;
    }
    let s = sample.as_nanos();
    // Samples are usually within a few periods: subtracting beats dividing.
    let r = if s < p {
        s
    } else if s - p < p {
        s - p
    } else {
        s % p
    };
    // d = |2r − p| ≤ p; the confidence is floor(16·d / p), found by binary
    // search with multiplications instead of a division.
    if p > u64::MAX / 64 {
        return (16 * (2 * r as u128).abs_diff(p as u128) / p as u128) as u8;
    }
    let x = 16 * (2 * r).abs_diff(p);
    let mut k = 0u64;
    for step in [16, 8, 4, 2, 1] {
        if (k + step) * p <= x {
            k += step;
        }
    }
    k as u8
}

// ----- the EDF dispatch core ----------------------------------------------------

/// One child of an EDF scheduler with inferred deadlines.
#[derive(Clone, Debug)]
pub(crate) struct Kid<X> {
    /// Absolute deadline: the EDF key.
    pub deadline: Instant,
    /// Order in which deadlines were assigned: breaks ties (earlier first).
    pub seq: u64,
    /// CPU time left before the deadline is reset ("deadline expiration
    /// timer").
    pub budget: Duration,
    /// CPU time used since the deadline was last reset (BEST-RATE's burst).
    pub consumed: Duration,
    /// Received CPU time when the budget was last charged.
    pub start: Duration,
    /// Eager state.
    pub run: Run,
    /// Unix nice value.
    pub nice: i64,
    /// Its budget ran out in the current hook: no window protects it.
    pub expired: bool,
    /// The hook (see `Edf::hook`) that last acted on it.
    pub touched: u64,
    /// Rule-specific state.
    pub x: X,
}

/// How an EDF scheduler with inferred deadlines assigns them.
pub(crate) trait Rule: Send + 'static {
    /// Per-child state of the rule.
    type X: Send + 'static;
    /// The policy name.
    const NAME: &'static str;
    /// The rule's state for a new child.
    fn new_x(&self) -> Self::X;
    /// The nice-0 quantum.
    fn quantum(&self) -> Duration;
    /// Budget left under which a running child is not preempted.
    fn window(&self) -> Duration;
    /// Child `i` entered the run queue at `at`: set its deadline and
    /// budget. `cpus` is how many processors the instance can hold, `load`
    /// the children's nice weights with `i` counted as not waiting. Returns
    /// a trace note when `trace` is set.
    fn wake(
        &self,
        kids: &mut VpTable<Kid<Self::X>>,
        i: usize,
        at: Instant,
        cpus: usize,
        load: Load,
        trace: bool,
    ) -> Option<String>;
    /// Runnable child `i` used its whole budget at `now`: set its next
    /// deadline and budget.
    fn expire(
        &self,
        kids: &mut VpTable<Kid<Self::X>>,
        i: usize,
        now: Instant,
        cpus: usize,
        load: Load,
    );
    /// The parameters in one line.
    fn describe(&self) -> String;
}

/// The sums of the children's nice weights (`nice_pri`) that BEST-RATE's
/// deadline rule reads, kept by [`Edf`] so no wake-up sums over every child.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Load {
    /// Over every child.
    pub all: u64,
    /// Over the children that ask for or hold a processor.
    pub active: u64,
}

/// A child's place in [`Edf`]'s ordered sets: its EDF key and its VP.
type Entry = (Instant, u64, VpId);

/// Earliest-deadline-first dispatch over any number of processors, with
/// CPU-time budgets and a no-preemption window; the deadlines come from a
/// [`Rule`]. The core of `best` and `best-rate`.
///
/// Every decision is O(log n) in the children: the ready children sit in an
/// ordered set by EDF key (deadline, then the order deadlines were
/// assigned; keys are distinct), so the earliest usable one is its first
/// usable entry, and the running ones in another, walked from the latest
/// deadline to find a victim; the child on each processor is a table
/// lookup and BEST-RATE's load a kept sum. Passes over the running
/// children (the budget timer, expiry) are bounded by the processors held.
/// Each change of a child's state, key or nice value goes through
/// `unlink`, the change, then `link`, which keep these in step with `kids`.
#[derive(Debug)]
pub(crate) struct Edf<R: Rule> {
    pub rule: R,
    pub kids: VpTable<Kid<R::X>>,
    /// Children ready in the view, by key.
    ready: BTreeSet<Entry>,
    /// Children running in the view, by key.
    running: BTreeSet<Entry>,
    /// The child running in the view on each processor, by index.
    on: Vec<Option<VpId>>,
    /// Nice weights, see [`Load`].
    load: Load,
    /// The eager view of the parent VPs; `Parents::queue_plan` queues each
    /// hook's actions in `crate::fp`'s fixed order.
    parents: Parents,
    /// Planned revocations, queued first by `settle`.
    revokes: Vec<(VpId, RevokeReason)>,
    /// Planned grants, queued after parent releases by `settle`.
    grants: Vec<(VpId, CpuId)>,
    next_seq: u64,
    /// Counts hook calls. A child this hook already acted on may be acted
    /// on again (its actions apply in order); a child whose state the HSI
    /// sees differently, with a notification about it still to come, may
    /// not.
    hook: u64,
}

impl<R: Rule> Edf<R> {
    /// Child `vp`'s current deadline, while it asks for or holds a
    /// processor (`Policy::child_deadline`).
    pub(crate) fn deadline(&self, ctx: &Ctx<'_>, vp: VpId) -> Option<Instant> {
        let k = self.kids.get(ctx, vp)?;
        (k.run != Run::Waiting).then_some(k.deadline)
    }

    pub(crate) fn new(rule: R) -> Self {
        Edf {
            rule,
            kids: VpTable::new(Side::Child),
            ready: BTreeSet::new(),
            running: BTreeSet::new(),
            on: Vec::new(),
            load: Load::default(),
            parents: Parents::default(),
            revokes: Vec::new(),
            grants: Vec::new(),
            next_seq: 0,
            hook: 0,
        }
    }

    /// Marks the start of a hook.
    ///
    /// It also reconciles the view with grants the HSI dropped: a grant
    /// queued in an earlier hook goes stale when the parent takes the
    /// processor back before it is applied (the HSI then drops it and
    /// delivers the revocation afterwards), leaving a child this instance
    /// believes running but that is still ready.
    fn enter(&mut self, ctx: &Ctx<'_>) {
        self.hook += 1;
        // Only children running in the view can be stale this way.
        let stale: Vec<VpId> = self
            .running
            .iter()
            .map(|e| e.2)
            .filter(|&vp| ctx.vp_state(vp) == VpState::Ready)
            .collect();
        for vp in stale {
            if let Some(i) = self.kids.index_of(ctx, vp) {
                self.unlink(i);
                self.kids.at_mut(i).1.run = Run::Ready;
                self.link(i);
            }
        }
    }

    /// Takes child `i` out of the ordered sets, the processor table and the
    /// load, before its state, key or nice value changes.
    fn unlink(&mut self, i: usize) {
        let (vp, k) = self.kids.at(i);
        let e = (k.deadline, k.seq, vp);
        match k.run {
            Run::Waiting => {}
            Run::Ready => {
                self.ready.remove(&e);
            }
            Run::Running(c) => {
                self.running.remove(&e);
                if let Some(slot) = self.on.get_mut(c.index()) {
                    if *slot == Some(vp) {
                        *slot = None;
                    }
                }
            }
        }
        if k.run != Run::Waiting {
            self.load.active -= nice_pri(k.nice);
        }
    }

    /// Puts child `i` back after a change (see `unlink`).
    fn link(&mut self, i: usize) {
        let (vp, k) = self.kids.at(i);
        let e = (k.deadline, k.seq, vp);
        match k.run {
            Run::Waiting => {}
            Run::Ready => {
                self.ready.insert(e);
            }
            Run::Running(c) => {
                self.running.insert(e);
                if self.on.len() <= c.index() {
                    self.on.resize(c.index() + 1, None);
                }
                self.on[c.index()] = Some(vp);
            }
        }
        if k.run != Run::Waiting {
            self.load.active += nice_pri(k.nice);
        }
    }

    /// The load with child `i` counted as not waiting.
    fn load_with(&self, i: usize) -> Load {
        let k = self.kids.at(i).1;
        let extra = if k.run == Run::Waiting {
            nice_pri(k.nice)
        } else {
            0
        };
        Load {
            all: self.load.all,
            active: self.load.active + extra,
        }
    }

    fn take_seq(&mut self) -> u64 {
        self.next_seq += 1;
        self.next_seq
    }

    fn key(&self, i: usize) -> (Instant, u64) {
        let k = self.kids.at(i).1;
        (k.deadline, k.seq)
    }

    fn settled(&self, ctx: &Ctx<'_>, i: usize) -> bool {
        let (vp, k) = self.kids.at(i);
        Run::of(ctx.vp_state(vp)) == k.run
    }

    /// Whether this hook may act on child `i`: the HSI agrees with the
    /// view, or the disagreement is this hook's own queued action.
    fn usable(&self, ctx: &Ctx<'_>, i: usize) -> bool {
        self.kids.at(i).1.touched == self.hook || self.settled(ctx, i)
    }

    fn on_cpu(&self, ctx: &Ctx<'_>, cpu: CpuId) -> Option<usize> {
        self.kids.index_of(ctx, self.on_vp(cpu)?)
    }

    fn on_vp(&self, cpu: CpuId) -> Option<VpId> {
        self.on.get(cpu.index()).copied().flatten()
    }

    /// Budget left of running child `i`, counting the segment in progress.
    fn remaining(&self, ctx: &Ctx<'_>, i: usize) -> Duration {
        let (vp, k) = self.kids.at(i);
        k.budget - (ctx.vp_received(vp) - k.start)
    }

    /// Charges running child `i` for the CPU it used since the last charge.
    fn account(&mut self, ctx: &Ctx<'_>, i: usize) {
        let (vp, k) = self.kids.at_mut(i);
        if let Run::Running(_) = k.run {
            let now = ctx.vp_received(vp);
            let used = now - k.start;
            k.budget -= used;
            k.consumed += used;
            k.start = now;
        }
    }

    /// The ready child with the earliest deadline among those this hook
    /// may grant a processor to.
    fn best_ready(&self, ctx: &Ctx<'_>) -> Option<usize> {
        self.ready
            .iter()
            .filter_map(|e| self.kids.index_of(ctx, e.2))
            .find(|&i| self.usable(ctx, i))
    }

    /// The settled running child to preempt for a child with key `than`:
    /// the latest deadline after `than` among those outside the window.
    fn victim(&self, ctx: &Ctx<'_>, than: (Instant, u64)) -> Option<usize> {
        let window = self.rule.window();
        self.running
            .iter()
            .rev()
            .take_while(|e| (e.0, e.1) > than)
            .filter_map(|e| self.kids.index_of(ctx, e.2))
            .find(|&i| {
                let k = self.kids.at(i).1;
                self.usable(ctx, i) && (k.expired || self.remaining(ctx, i) >= window)
            })
    }

    fn grant(&mut self, ctx: &Ctx<'_>, i: usize, cpu: CpuId) {
        let (vp, _) = self.kids.at(i);
        let received = ctx.vp_received(vp);
        let hook = self.hook;
        self.unlink(i);
        let k = self.kids.at_mut(i).1;
        k.run = Run::Running(cpu);
        k.start = received;
        k.expired = false;
        k.touched = hook;
        self.link(i);
        self.grants.push((vp, cpu));
    }

    fn preempt(&mut self, ctx: &Ctx<'_>, i: usize, reason: RevokeReason) {
        self.account(ctx, i);
        let hook = self.hook;
        self.unlink(i);
        let (vp, k) = self.kids.at_mut(i);
        k.run = Run::Ready;
        k.expired = false;
        k.touched = hook;
        self.link(i);
        self.revokes.push((vp, reason));
    }

    /// Fills free processors with the earliest ready children, then
    /// preempts while a ready child has an earlier deadline than a
    /// preemptible running one; finally matches parent demand and arms the
    /// budget timer.
    fn settle(&mut self, ctx: &mut Ctx<'_>) {
        // With no child ready the pass would grant nothing.
        if !self.ready.is_empty() {
            let held: Vec<CpuId> = self.parents.held().map(|(_, c)| c).collect();
            for cpu in held {
                if self.on_vp(cpu).is_none() {
                    match self.best_ready(ctx) {
                        Some(i) => self.grant(ctx, i, cpu),
                        None => break,
                    }
                }
            }
        }
        while let Some(b) = self.best_ready(ctx) {
            let Some(v) = self.victim(ctx, self.key(b)) else {
                break;
            };
            let Some(cpu) = self.kids.at(v).1.run.cpu() else {
                break;
            };
            let reason = if self.kids.at(v).1.expired {
                RevokeReason::BudgetExhausted
            } else {
                RevokeReason::Preempted
            };
            self.preempt(ctx, v, reason);
            self.grant(ctx, b, cpu);
        }
        let unserved = self.ready.len();
        let on = &self.on;
        self.parents
            .queue_plan(ctx, &mut self.revokes, &mut self.grants, unserved, |c| {
                on.get(c.index()).copied().flatten().is_some()
            });
        // Budget timer.
        let mut next = Instant::NEVER;
        let running: Vec<VpId> = self.running.iter().map(|e| e.2).collect();
        for vp in running {
            if let Some(i) = self.kids.index_of(ctx, vp) {
                self.kids.at_mut(i).1.expired = false;
                next = next.min(ctx.now() + self.remaining(ctx, i));
            }
        }
        if next == Instant::NEVER {
            ctx.cancel_timer();
        } else if ctx.timer() != Some(next) {
            ctx.set_timer(next);
        }
    }

    /// Gives child `i` (unlinked) the next sequence number.
    fn set_deadline_seq(&mut self, i: usize) {
        let seq = self.take_seq();
        let k = self.kids.at_mut(i).1;
        k.seq = seq;
        k.consumed = Duration::ZERO;
    }

    pub(crate) fn init(&mut self, ctx: &mut Ctx<'_>) {
        self.parents.init(ctx);
    }

    pub(crate) fn register_vp(&mut self, ctx: &mut Ctx<'_>, vp: VpId, nice: i64) {
        let q = nice_quantum(self.rule.quantum(), nice);
        let kid = Kid {
            deadline: ctx.now(),
            seq: 0,
            budget: q,
            consumed: Duration::ZERO,
            start: Duration::ZERO,
            run: Run::Waiting,
            nice,
            expired: false,
            touched: 0,
            x: self.rule.new_x(),
        };
        self.load.all += nice_pri(nice);
        let i = self.kids.insert(ctx, vp, kid);
        self.link(i);
    }

    pub(crate) fn unregister_vp(&mut self, ctx: &mut Ctx<'_>, vp: VpId) {
        if let Some(i) = self.kids.index_of(ctx, vp) {
            self.unlink(i);
            self.load.all -= nice_pri(self.kids.at(i).1.nice);
        }
        self.kids.remove(ctx, vp);
    }

    pub(crate) fn request(&mut self, ctx: &mut Ctx<'_>, vp: VpId) {
        self.enter(ctx);
        self.parents.ensure(ctx);
        let Some(i) = self.kids.index_of(ctx, vp) else {
            return;
        };
        if ctx.vp_state(vp) != VpState::Ready {
            // Stale: released since, or already granted after a later
            // request that this one stands for.
            self.settle(ctx);
            return;
        }
        // The wake-up time: the thread's own when the child is a thread
        // (it differs from now only when a runnable thread moves here).
        let at = ctx
            .vp_thread(vp)
            .and_then(|t| ctx.thread_last_wake(t))
            .unwrap_or(ctx.now())
            .min(ctx.now());
        let load = self.load_with(i);
        self.unlink(i);
        self.kids.at_mut(i).1.run = Run::Ready;
        let trace = ctx.tracing();
        let note = self.rule.wake(
            &mut self.kids,
            i,
            at,
            self.parents.len().max(1),
            load,
            trace,
        );
        self.set_deadline_seq(i);
        self.link(i);
        if let Some(n) = note {
            ctx.event(PolicyEvent::Note(n));
        }
        self.settle(ctx);
    }

    pub(crate) fn release(&mut self, ctx: &mut Ctx<'_>, vp: VpId) {
        self.enter(ctx);
        self.parents.ensure(ctx);
        let Some(i) = self.kids.index_of(ctx, vp) else {
            return;
        };
        if ctx.vp_state(vp) == VpState::Waiting {
            self.account(ctx, i);
            self.unlink(i);
            self.kids.at_mut(i).1.run = Run::Waiting;
            self.link(i);
        }
        // Otherwise stale: the child asked again since, and the request
        // (already handled, or still to come) decides.
        self.settle(ctx);
    }

    pub(crate) fn grant_parent(&mut self, ctx: &mut Ctx<'_>, parent_vp: VpId, cpu: CpuId) {
        self.enter(ctx);
        if self.parents.on_grant(ctx, parent_vp, cpu).is_some() {
            self.settle(ctx);
        }
    }

    pub(crate) fn revoke_parent(
        &mut self,
        ctx: &mut Ctx<'_>,
        parent_vp: VpId,
        reason: RevokeReason,
    ) {
        self.enter(ctx);
        if let Some((_, cpu)) = self.parents.on_revoke(ctx, parent_vp) {
            if let Some(i) = self.on_cpu(ctx, cpu).filter(|&i| self.usable(ctx, i)) {
                self.preempt(ctx, i, reason);
            }
        }
        self.settle(ctx);
    }

    pub(crate) fn timer(&mut self, ctx: &mut Ctx<'_>) {
        self.enter(ctx);
        self.parents.ensure(ctx);
        let now = ctx.now();
        let cpus = self.parents.len().max(1);
        // The running children in index order, as a pass over every child
        // would meet them (the order gives out sequence numbers).
        let mut running: Vec<usize> = self
            .running
            .iter()
            .filter_map(|e| self.kids.index_of(ctx, e.2))
            .collect();
        running.sort_unstable();
        for i in running {
            if !self.usable(ctx, i) {
                continue;
            }
            if self.remaining(ctx, i) > Duration::ZERO {
                continue;
            }
            self.account(ctx, i);
            let load = self.load_with(i);
            self.unlink(i);
            self.rule.expire(&mut self.kids, i, now, cpus, load);
            self.set_deadline_seq(i);
            self.kids.at_mut(i).1.expired = true;
            self.link(i);
            let vp = self.kids.at(i).0;
            ctx.event(PolicyEvent::BudgetExhausted { vp });
        }
        self.settle(ctx);
    }

    /// Applies a new nice value to child `vp`.
    pub(crate) fn set_nice(
        &mut self,
        ctx: &mut Ctx<'_>,
        vp: VpId,
        nice: i64,
    ) -> Result<(), PolicyError> {
        let Some(i) = self.kids.index_of(ctx, vp) else {
            return Err(PolicyError::Refused(format!(
                "{vp} is not a child of this {} scheduler",
                R::NAME
            )));
        };
        self.unlink(i);
        let k = self.kids.at_mut(i).1;
        self.load.all = self.load.all - nice_pri(k.nice) + nice_pri(nice);
        k.nice = nice;
        self.link(i);
        Ok(())
    }

    pub(crate) fn check(&self, ctx: &Ctx<'_>) -> Result<(), String> {
        self.parents.check(ctx)?;
        for (vp, k) in self.kids.iter() {
            self.parents.check_child(ctx, vp, k.run)?;
        }
        if let Some(b) = self.best_ready(ctx) {
            if self.parents.held().any(|(_, c)| self.on_vp(c).is_none()) {
                return Err(format!(
                    "child {} is ready while a held processor idles",
                    self.kids.at(b).0
                ));
            }
            if let Some(v) = self.victim(ctx, self.key(b)) {
                return Err(format!(
                    "ready child {} (deadline {}) waits while {} (deadline {}) runs with budget to spare",
                    self.kids.at(b).0,
                    self.kids.at(b).1.deadline,
                    self.kids.at(v).0,
                    self.kids.at(v).1.deadline
                ));
            }
        }
        Ok(())
    }
}

/// Implements [`Policy`] for a newtype around [`Edf`].
macro_rules! edf_policy {
    ($ty:ty, $info:expr) => {
        impl hsched_core::Policy for $ty {
            fn policy_name(&self) -> &'static str {
                $info.name
            }
            fn init(&mut self, ctx: &mut hsched_core::Ctx<'_>) {
                self.edf.init(ctx);
            }
            fn register_vp(
                &mut self,
                ctx: &mut hsched_core::Ctx<'_>,
                vp: hsched_core::VpId,
                params: &hsched_core::Params,
            ) -> Result<(), hsched_core::PolicyError> {
                let nice = $crate::best::nice_of(&$info, params)?.unwrap_or(0);
                self.edf.register_vp(ctx, vp, nice);
                Ok(())
            }
            fn unregister_vp(&mut self, ctx: &mut hsched_core::Ctx<'_>, vp: hsched_core::VpId) {
                self.edf.unregister_vp(ctx, vp);
            }
            fn request(&mut self, ctx: &mut hsched_core::Ctx<'_>, vp: hsched_core::VpId) {
                self.edf.request(ctx, vp);
            }
            fn release(&mut self, ctx: &mut hsched_core::Ctx<'_>, vp: hsched_core::VpId) {
                self.edf.release(ctx, vp);
            }
            fn grant(
                &mut self,
                ctx: &mut hsched_core::Ctx<'_>,
                parent_vp: hsched_core::VpId,
                cpu: hsched_core::CpuId,
            ) {
                self.edf.grant_parent(ctx, parent_vp, cpu);
            }
            fn revoke(
                &mut self,
                ctx: &mut hsched_core::Ctx<'_>,
                parent_vp: hsched_core::VpId,
                reason: hsched_core::RevokeReason,
            ) {
                self.edf.revoke_parent(ctx, parent_vp, reason);
            }
            fn timer(&mut self, ctx: &mut hsched_core::Ctx<'_>) {
                self.edf.timer(ctx);
            }
            fn msg(
                &mut self,
                ctx: &mut hsched_core::Ctx<'_>,
                vp: hsched_core::VpId,
                msg: &hsched_core::Msg,
            ) -> Result<(), hsched_core::PolicyError> {
                let hsched_core::Msg::SetParams(params) = msg else {
                    return Err(hsched_core::PolicyError::Unsupported(format!(
                        "{} accepts only SetParams {{ nice }}, not {msg:?}",
                        $info.name
                    )));
                };
                if let Some(nice) = $crate::best::nice_of(&$info, params)? {
                    self.edf.set_nice(ctx, vp, nice)?;
                }
                let merged = $crate::registry::merge_change(ctx.vp_params(vp), params);
                ctx.set_vp_params(vp, merged);
                Ok(())
            }
            fn check_invariants(&self, ctx: &hsched_core::Ctx<'_>) -> Result<(), String> {
                self.edf.check(ctx)
            }
            fn describe(&self) -> String {
                self.edf.rule.describe()
            }
            fn child_deadline(
                &self,
                ctx: &hsched_core::Ctx<'_>,
                vp: hsched_core::VpId,
            ) -> Option<hsched_core::Instant> {
                self.edf.deadline(ctx, vp)
            }
        }
    };
}
pub(crate) use edf_policy;

// ----- BEST -------------------------------------------------------------------

/// Which pseudo-deadline a non-periodic wake-up gets (the report gives
/// only its budget).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BestEffortDeadline {
    /// `wake + P_n`: the child's pseudo-period (default).
    Period,
    /// `wake + max_period`.
    MaxPeriod,
}

/// BEST's parameters; `Default` gives the report's values (Banachowski 2002, §3.3.4).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BestConfig {
    /// The period estimator's settings.
    pub estimator: EstimatorConfig,
    /// Added to `max_period` when postponing an exhausted child (100 ms).
    pub cpu_bound_offset: Duration,
    /// A running child with less budget left is not preempted by a
    /// wake-up (10 ms).
    pub no_preempt_window: Duration,
    /// The nice-0 quantum (100 ms).
    pub quantum: Duration,
    /// Pseudo-deadline of a non-periodic wake-up.
    pub best_effort_deadline: BestEffortDeadline,
    /// `P_0` of a new child (0).
    pub initial_period: Duration,
}

impl Default for BestConfig {
    fn default() -> Self {
        BestConfig {
            estimator: EstimatorConfig::default(),
            cpu_bound_offset: Duration::from_millis(100),
            no_preempt_window: Duration::from_millis(10),
            quantum: Duration::from_millis(100),
            best_effort_deadline: BestEffortDeadline::Period,
            initial_period: Duration::ZERO,
        }
    }
}

impl BestConfig {
    /// The configuration from `[[scheduler]]` parameters (see the module
    /// documentation for keys and defaults).
    ///
    /// # Errors
    /// A parameter of the wrong type or out of range.
    pub fn from_params(params: &Params) -> Result<Self, PolicyError> {
        let d = BestConfig::default();
        let threshold = match params.u64("confidence_threshold")? {
            None => d.estimator.threshold,
            Some(t) if t <= 16 => t as u8,
            Some(t) => {
                return Err(param_err(
                    "confidence_threshold",
                    format!("{t} is outside 0..=16"),
                ))
            }
        };
        let confidence_period =
            match choice_or(params, "confidence_period", &["updated", "previous"])? {
                "previous" => ConfidencePeriod::Previous,
                _ => ConfidencePeriod::Updated,
            };
        let best_effort_deadline =
            match choice_or(params, "best_effort_deadline", &["period", "max-period"])? {
                "max-period" => BestEffortDeadline::MaxPeriod,
                _ => BestEffortDeadline::Period,
            };
        Ok(BestConfig {
            estimator: EstimatorConfig {
                weight: weight_or(params, "period_weight", d.estimator.weight)?,
                max_period: positive_duration_or(params, "max_period", d.estimator.max_period)?,
                threshold,
                tick: duration_or(params, "tick", d.estimator.tick)?,
                confidence_period,
            },
            cpu_bound_offset: duration_or(params, "cpu_bound_offset", d.cpu_bound_offset)?,
            no_preempt_window: duration_or(params, "no_preempt_window", d.no_preempt_window)?,
            quantum: positive_duration_or(params, "quantum", d.quantum)?,
            best_effort_deadline,
            initial_period: duration_or(params, "initial_period", d.initial_period)?,
        })
    }
}

/// BEST's deadline rule.
#[derive(Debug)]
pub(crate) struct BestRule(BestConfig);

impl Rule for BestRule {
    type X = PeriodEstimator;
    const NAME: &'static str = "best";

    fn new_x(&self) -> PeriodEstimator {
        PeriodEstimator::new(self.0.initial_period.min(self.0.estimator.max_period))
    }

    fn quantum(&self) -> Duration {
        self.0.quantum
    }

    fn window(&self) -> Duration {
        self.0.no_preempt_window
    }

    fn wake(
        &self,
        kids: &mut VpTable<Kid<PeriodEstimator>>,
        i: usize,
        at: Instant,
        _: usize,
        _: Load,
        trace: bool,
    ) -> Option<String> {
        let cfg = &self.0;
        let (vp, k) = kids.at_mut(i);
        let e = k.x.observe(&cfg.estimator, at);
        if e.periodic {
            k.deadline = at + e.period;
            k.budget = e.period;
        } else {
            k.deadline = at
                + match cfg.best_effort_deadline {
                    BestEffortDeadline::Period => e.period,
                    BestEffortDeadline::MaxPeriod => cfg.estimator.max_period,
                };
            k.budget = nice_quantum(cfg.quantum, k.nice);
        }
        trace.then(|| {
            format!(
                "{vp} woke: P_est {:?} P_n {} confidence {} {}",
                e.sample,
                e.period,
                e.confidence,
                if e.periodic {
                    "periodic"
                } else {
                    "best effort"
                }
            )
        })
    }

    fn expire(
        &self,
        kids: &mut VpTable<Kid<PeriodEstimator>>,
        i: usize,
        now: Instant,
        _: usize,
        _: Load,
    ) {
        let cfg = &self.0;
        let k = kids.at_mut(i).1;
        k.deadline = now + cfg.estimator.max_period + cfg.cpu_bound_offset;
        k.budget = nice_quantum(cfg.quantum, k.nice);
    }

    fn describe(&self) -> String {
        let c = &self.0;
        format!(
            "max_period={} cpu_bound_offset={} period_weight={:.4} confidence_threshold={} quantum={} no_preempt_window={} tick={}",
            c.estimator.max_period,
            c.cpu_bound_offset,
            c.estimator.weight,
            c.estimator.threshold,
            c.quantum,
            c.no_preempt_window,
            c.estimator.tick
        )
    }
}

/// The BEST scheduler (see the module documentation).
#[derive(Debug)]
pub struct Best {
    edf: Edf<BestRule>,
}

impl Default for Best {
    fn default() -> Self {
        Best::new(BestConfig::default())
    }
}

impl Best {
    /// An instance with `config`.
    pub fn new(config: BestConfig) -> Self {
        Best {
            edf: Edf::new(BestRule(config)),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &BestConfig {
        &self.edf.rule.0
    }
}

edf_policy!(Best, INFO);

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(x: u64) -> Duration {
        Duration::from_millis(x)
    }

    #[test]
    fn confidence_is_16_at_multiples_and_0_half_way() {
        assert_eq!(confidence(ms(40), ms(40)), 16);
        assert_eq!(confidence(ms(80), ms(40)), 16);
        assert_eq!(confidence(ms(60), ms(40)), 0);
        assert_eq!(confidence(ms(50), ms(40)), 8);
        assert_eq!(confidence(ms(40), Duration::ZERO), 0);
    }

    /// The division-free paths agree with the plain formulas.
    #[test]
    fn fast_paths_match_the_formulas() {
        let mut x = 1u64;
        let mut next = || {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            x >> 11
        };
        for _ in 0..200_000 {
            let p = 1 + next() % 5_000_000_000;
            let s = match next() % 3 {
                0 => next() % (3 * p),
                1 => next() % 100_000_000_000,
                _ => next(),
            };
            let r = s % p;
            let want = (16 * (2 * r as u128).abs_diff(p as u128) / p as u128) as u8;
            assert_eq!(confidence(Duration(s), Duration(p)), want, "s={s} p={p}");
            let tick = 1 + next() % 2_000_000;
            let last = next() % 1_000_000_000_000;
            let last = last - last % tick;
            let t = last + next() % 10_000_000_000;
            assert_eq!(
                quantize(Instant(t), Duration(tick), Some(Instant(last))),
                Instant(t - t % tick)
            );
            let w = weight_num([1.0 / 3.0, 2.0, 0.5, 0.0, 7.25][(next() % 5) as usize]);
            let (a, b) = (next() % 10_000_000_000, next() % 10_000_000_000);
            let plain = (a as u128 * WEIGHT_DEN as u128 + b as u128 * w as u128)
                / (WEIGHT_DEN as u128 + w as u128);
            assert_eq!(
                smooth(Duration(a), Duration(b), w).as_nanos() as u128,
                plain
            );
        }
        assert_eq!(confidence(Duration(u64::MAX), Duration(u64::MAX / 3)), 16);
    }

    #[test]
    fn smoothing_is_exact_for_one_third_and_two() {
        assert_eq!(
            smooth(ms(40), Duration::ZERO, weight_num(1.0 / 3.0)),
            ms(30)
        );
        assert_eq!(smooth(ms(40), ms(10), weight_num(2.0)), ms(20));
        assert_eq!(smooth(ms(40), ms(10), weight_num(0.0)), ms(40));
    }

    #[test]
    fn fractions_parse() {
        assert_eq!(parse_fraction("1/3"), Some(1.0 / 3.0));
        assert_eq!(parse_fraction(" 2 "), Some(2.0));
        assert_eq!(parse_fraction("1/0"), None);
        assert_eq!(parse_fraction("x"), None);
    }

    #[test]
    fn nice_scales_the_quantum_between_5_and_200_ms() {
        assert_eq!(nice_quantum(ms(100), 0), ms(100));
        assert_eq!(nice_quantum(ms(100), -20), ms(200));
        assert_eq!(nice_quantum(ms(100), 10), ms(50));
        assert_eq!(nice_quantum(ms(100), 19), ms(5));
    }
}
