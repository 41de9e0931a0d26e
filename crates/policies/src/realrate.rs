//! `realrate`: real-rate scheduling, a feedback controller that sizes each
//! child's proportion from its progress on top of a proportion/period
//! reservation dispatcher (Steere et al. 1998, OGI TR 98-014, §3).
//!
//! # Dispatcher (§3.1)
//! Every child VP holds a *proportion* (a fraction of the processor, kept at
//! nanosecond resolution, far finer than the paper's parts per thousand) and
//! a *period*. Its budget, proportion × period, is replenished at each of its
//! period starts and charged with the wall-clock time the child holds the
//! processor; a child whose budget runs out is revoked with
//! [`RevokeReason::BudgetExhausted`] and waits for its next period (§3.1:
//! "put to sleep until its next period begins"). Among the children that are
//! ready and have budget left the dispatcher runs the one with the shortest
//! period (rate-monotonic order, §3.1 and Liu & Layland), ties to the child
//! registered first; the running child is preempted only by a strictly
//! shorter period. When no child is eligible the processor goes back to the
//! parent. Replenishments sit in a binary heap in expiry order (the paper's
//! "list of timers … sorted by time of expiry", §4.1) and are driven by the
//! single instance timer, which also carries the running child's budget
//! exhaustion and the controller tick; every event costs O(log n).
//!
//! A proportion change takes effect at once and costs O(log n) (§3.1:
//! "very low overhead to change proportion and period"): the budget left in
//! the current period moves by the difference between the new and old
//! per-period amounts. A period change takes effect at the next period
//! start. A child's period grid starts at its first request; while a child
//! waits no events are kept for it and its grid is advanced by arithmetic
//! when it asks again (as `rez` does). A child that asks part way through
//! a period keeps its budget, but only what a periodic task could still
//! have to run, `amount − (now − period start)`, competes in
//! rate-monotonic order; the rest runs after every child within its rate.
//! Otherwise a child that sat out most of its period (a join whose other
//! parent ran its child) would run its budget and its next period's back
//! to back, and a reservation with a longer period, or the same period
//! and a later registration, would miss although the admission test
//! passed. The dispatcher is the one `rez` uses (the crate's `budget`
//! module) with rate-monotonic order.
//!
//! # Thread classes (§3.3, Fig 2) — child parameter `class`
//! - `real-time`: `proportion` and `period` given. Admitted only if the sum
//!   of real-time proportions plus a floor for every adaptive child stays
//!   within `overload` (admission control, §3.3 "Responding to Overload");
//!   the controller never changes it. The sum is kept in the fixed point
//!   Rez uses (the crate's `budget::SHARE_ONE`), so a file checker adds
//!   the same numbers; every registration and every change is checked, a
//!   change to an adaptive class too (it counts a floor from then on).
//! - `aperiodic`: `proportion` given, `period` defaults to `default_period`
//!   (30 ms, §3.3). Treated as real-time otherwise.
//! - `real-rate`: no proportion; sized by the controller from the progress
//!   metrics it reports (below). `period` may be given, else
//!   `default_period`. Period estimation is not implemented: the paper
//!   disabled it in every experiment (§4).
//! - `misc`: nothing known; the controller applies a constant positive
//!   pressure `misc_pressure` until the child is satisfied (the "too
//!   generous" test fires) or the processor is oversubscribed (§3.3).
//!
//! Without `class`, the class is inferred as Fig 2 does: proportion and
//! period → real-time, proportion only → aperiodic, otherwise misc, and a
//! misc child that reports a progress metric becomes real-rate (misc again
//! when its last queue is removed: it has no metric left).
//!
//! # Progress metrics (§3.2)
//! `Msg::App { kind: "progress", params: { queue, fill, size, role } }`
//! about a child registers or updates one bounded buffer of that child:
//! `queue` names it (any value; messages with the same name update it),
//! `fill` and `size` are in any unit (bytes, items) with `size > 0`, `role`
//! is `"producer"` or `"consumer"`; `remove = true` forgets the queue. A
//! child may have any number of queues. The backend's monitor sends these
//! periodically (the simulator's pipeline workload does).
//!
//! # Controller (§3.3), every `control_period` (10 ms = 100 Hz, §3.3)
//! For each real-rate child `t`: `e = Σ_i R_{t,i} F_{t,i}` with
//! `F = fill/size − 1/2` and `R = −1` for a producer, `+1` for a consumer
//! (Fig 3), passed through a first-order low-pass filter
//! (`filter` = α, `e_f ← α e + (1 − α) e_f`, §4.1's "suitable low-pass
//! filter"). The PID `G` of Fig 3 gives the pressure
//! `Q_t = kp·e·Δ + ki·I·Δ + kd·(e − e_prev)` with `I = Σ e·Δ` (clamped to
//! ±`integral_limit`) and `Δ` the tick in seconds, so the gains are per
//! second and do not depend on the tick rate. Fig 4 is read incrementally
//! (hsched's reading): `P' = P + Q_t` when on target, and
//! `P' = P·(1 − shrink)` when *too generous*, that is when the budget the
//! child left unused while blocked exceeds `generous` × its allocation over
//! the last evaluation window (at least one period and four ticks). Budget a
//! ready child could not get (a missed deadline) does not count as unused:
//! it is not a sign of over-allocation. A waiting child's unused budget is
//! counted at every tick, so a child that stops asking for the processor
//! (or never asks) is found too generous too. The shrink is applied once,
//! when the window closes, and the allocation is then held, not grown,
//! until the next window's verdict; otherwise an allocation nobody uses
//! would settle where growth and shrinking balance instead of at the floor.
//!
//! Miscellaneous children get `P' = P + kp·misc_pressure·Δ` (constant
//! pressure) or the same shrink when too generous.
//!
//! The controller's arithmetic lives in [`crate::rate_control`], which the
//! kernel backend's adaptive reservations drive too; this policy feeds it
//! the budget its dispatcher saw a child leave unused.
//!
//! # Overload: squishing (§3.3)
//! The adaptive children (real-rate and misc) share
//! `A = overload − Σ real-time proportions`. When their proposed
//! allocations add up to more than `A`, the excess is cut from each in
//! proportion to `allocation / importance` (so with equal importance every
//! allocation is scaled by the same factor, "an amount proportional to the
//! allocation", and with importance the fixed point of repeated squishing is
//! a weighted fair share, never starvation), never below `floor`; the cut a
//! child cannot take at its floor is spread over the others (water filling).
//! Real-time reservations are never squished. Each allocation is also
//! capped at `A`.
//!
//! # Quality exceptions (§3.1, §4.2)
//! When a real-rate child's pressure reaches `qex_level` (its queues are
//! nearly full for a consumer or empty for a producer) while squishing
//! holds it below what it asked for, the application cannot get the CPU it
//! needs: the policy raises a *quality exception*, counted per child and in
//! total, and recorded as a trace note `"quality exception: …"`. It fires
//! once per episode (re-armed when the pressure falls below half the level).
//! The count is shown by `describe` as `qex=N` (live mode's `hsched ctl
//! show`) and by [`RealRate::quality_exceptions`].
//!
//! # Parameters
//! Instance: `overload` (0.9), `control_period` (10 ms), `default_period`
//! (30 ms), `kp` (6 /s), `ki` (0 /s²), `kd` (1), `filter` (1 = none),
//! `generous` (0.3), `shrink` (0.1), `misc_pressure` (0.1), `floor` (0.01),
//! `initial` (0.05), `integral_limit` (1), `qex_level` (0.4). Defaults were
//! chosen by the experiments in `docs/real-rate.md`.
//!
//! Child: `class`, `proportion` (number in (0, 1]), `period` (duration),
//! `importance` (number > 0, default 1).
//!
//! # Guarantees (Regehr 2001, Table 5.1)
//! Needs `ALL` (run it at the root or as the top child of FP). A real-time
//! or aperiodic child is a reservation: `RESBH proportion·period period`
//! (rate-monotonic over admitted budgets is best effort beyond the RM
//! bound; with harmonic periods or a total under ln 2 it is hard). A
//! real-rate or misc child gets a best-effort allocation (`NULL` as a
//! guarantee; only the floor is always delivered while overload < 1). The
//! policy is uniprocessor: one parent VP.
//!
//! # Messages
//! `Msg::SetParams` with any of `class`, `proportion`, `period`,
//! `importance` changes a child at once (real-time changes pass admission
//! control); `Msg::App` kind `"progress"` as above.

use crate::budget::{share_down, share_up, SHARE_ONE};
use crate::budget::{Budgets, Charging, Rules, Slot};
use crate::rate_control::{self, Feedback};
use crate::registry::{Admission, PolicyInfo};
use hsched_core::{
    CpuId, Ctx, Duration, Instant, Msg, ParamError, ParamSpec, ParamValue, Params, Policy,
    PolicyError, PolicyEvent, RevokeReason, VpId, VpState,
};

/// Registry entry.
pub const INFO: PolicyInfo = PolicyInfo {
    name: "realrate",
    summary: "real-rate scheduling: a rate-monotonic proportion/period dispatcher whose \
              proportions a PID controller sizes from queue fill levels",
    source: "Steere et al. 1998, §3.1–§3.3 (Figs 2–4)",
    instance_params: &[
        ParamSpec {
            key: "overload",
            kind: "number",
            default: "0.9",
            doc: "overload threshold on the sum of proportions, in (0, 1)",
        },
        ParamSpec {
            key: "control_period",
            kind: "duration",
            default: "10ms",
            doc: "controller period (100 Hz)",
        },
        ParamSpec {
            key: "default_period",
            kind: "duration",
            default: "30ms",
            doc: "period of aperiodic, real-rate and misc children",
        },
        ParamSpec {
            key: "kp",
            kind: "number",
            default: "6",
            doc: "PID proportional gain, proportion per unit pressure per second",
        },
        ParamSpec {
            key: "ki",
            kind: "number",
            default: "0",
            doc: "PID integral gain, per second squared",
        },
        ParamSpec {
            key: "kd",
            kind: "number",
            default: "1",
            doc: "PID derivative gain, proportion per unit pressure change",
        },
        ParamSpec {
            key: "filter",
            kind: "number",
            default: "1",
            doc: "low-pass weight of the newest pressure sample, in (0, 1]",
        },
        ParamSpec {
            key: "generous",
            kind: "number",
            default: "0.3",
            doc: "too-generous threshold: unused share of the allocation, in (0, 1)",
        },
        ParamSpec {
            key: "shrink",
            kind: "number",
            default: "0.1",
            doc: "Fig 4's C: factor by which a too-generous allocation shrinks, in (0, 1)",
        },
        ParamSpec {
            key: "misc_pressure",
            kind: "number",
            default: "0.1",
            doc: "constant pressure of misc children",
        },
        ParamSpec {
            key: "floor",
            kind: "number",
            default: "0.01",
            doc: "smallest proportion of an adaptive child (no starvation)",
        },
        ParamSpec {
            key: "initial",
            kind: "number",
            default: "0.05",
            doc: "starting proportion of an adaptive child",
        },
        ParamSpec {
            key: "integral_limit",
            kind: "number",
            default: "1",
            doc: "anti-windup bound on the PID integral",
        },
        ParamSpec {
            key: "qex_level",
            kind: "number",
            default: "0.4",
            doc: "pressure at which a squished real-rate child raises a quality exception",
        },
    ],
    child_params: &[
        ParamSpec {
            key: "class",
            kind: "string",
            default: "inferred",
            doc: "real-time, aperiodic, real-rate or misc (Fig 2)",
        },
        ParamSpec {
            key: "proportion",
            kind: "number",
            default: "controller",
            doc: "fraction of the CPU, in (0, 1]",
        },
        ParamSpec {
            key: "period",
            kind: "duration",
            default: "default_period",
            doc: "reservation period",
        },
        ParamSpec {
            key: "importance",
            kind: "number",
            default: "1",
            doc: "weight when squishing under overload",
        },
    ],
    change_params: &[],
    max_children: None,
    min_parents: 1,
    max_parents: 1,
    build,
    check_child: |p| child_spec(&RealRateConfig::default(), p).map(drop),
    exclusive: None,
    admission: Some(ADMISSION),
    merge_change,
};

fn build(params: &Params) -> Result<Box<dyn Policy>, PolicyError> {
    Ok(Box::new(RealRate::new(RealRateConfig::from_params(
        params,
    )?)))
}

fn param_err(key: &str, message: impl Into<String>) -> PolicyError {
    PolicyError::Param(ParamError {
        key: key.to_string(),
        message: message.into(),
    })
}

/// Configuration of one instance; every gain and threshold of §3.3.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RealRateConfig {
    /// Overload threshold on the sum of proportions (§3.1), in (0, 1).
    pub overload: f64,
    /// Controller period (§3.3: 10 ms).
    pub control_period: Duration,
    /// Period of children that give none (§3.3: 30 ms).
    pub default_period: Duration,
    /// PID proportional gain (per second).
    pub kp: f64,
    /// PID integral gain (per second squared).
    pub ki: f64,
    /// PID derivative gain.
    pub kd: f64,
    /// Low-pass weight of the newest pressure sample, in (0, 1].
    pub filter: f64,
    /// Too-generous threshold: unused fraction of the allocation.
    pub generous: f64,
    /// Fig 4's C: multiplicative shrink of a too-generous allocation.
    pub shrink: f64,
    /// Constant pressure of misc children.
    pub misc_pressure: f64,
    /// Smallest adaptive proportion.
    pub floor: f64,
    /// Starting adaptive proportion.
    pub initial: f64,
    /// Anti-windup bound on the integral.
    pub integral_limit: f64,
    /// Pressure at which a squished real-rate child raises a quality exception.
    pub qex_level: f64,
}

impl Default for RealRateConfig {
    fn default() -> Self {
        RealRateConfig {
            overload: 0.9,
            control_period: Duration::from_millis(10),
            default_period: Duration::from_millis(30),
            kp: 6.0,
            ki: 0.0,
            kd: 1.0,
            filter: 1.0,
            generous: 0.3,
            shrink: 0.1,
            misc_pressure: 0.1,
            floor: 0.01,
            initial: 0.05,
            integral_limit: 1.0,
            qex_level: 0.4,
        }
    }
}

impl RealRateConfig {
    /// Reads the instance parameters; absent keys keep their defaults.
    ///
    /// # Errors
    /// A value of the wrong type or out of range.
    pub fn from_params(p: &Params) -> Result<Self, PolicyError> {
        let mut c = RealRateConfig::default();
        let num = |key: &str, v: &mut f64, ok: fn(f64) -> bool, want: &str| {
            if let Some(x) = p.f64(key)? {
                if !ok(x) {
                    return Err(param_err(key, format!("must be {want}, found {x}")));
                }
                *v = x;
            }
            Ok::<(), PolicyError>(())
        };
        num(
            "overload",
            &mut c.overload,
            |x| x > 0.0 && x < 1.0,
            "in (0, 1)",
        )?;
        num("kp", &mut c.kp, |x| x >= 0.0, "non-negative")?;
        num("ki", &mut c.ki, |x| x >= 0.0, "non-negative")?;
        num("kd", &mut c.kd, |x| x >= 0.0, "non-negative")?;
        num(
            "filter",
            &mut c.filter,
            |x| x > 0.0 && x <= 1.0,
            "in (0, 1]",
        )?;
        num(
            "generous",
            &mut c.generous,
            |x| x > 0.0 && x < 1.0,
            "in (0, 1)",
        )?;
        num("shrink", &mut c.shrink, |x| x > 0.0 && x < 1.0, "in (0, 1)")?;
        num(
            "misc_pressure",
            &mut c.misc_pressure,
            |x| x >= 0.0,
            "non-negative",
        )?;
        num("floor", &mut c.floor, |x| x > 0.0 && x < 1.0, "in (0, 1)")?;
        num(
            "initial",
            &mut c.initial,
            |x| x > 0.0 && x <= 1.0,
            "in (0, 1]",
        )?;
        num(
            "integral_limit",
            &mut c.integral_limit,
            |x| x >= 0.0,
            "non-negative",
        )?;
        num("qex_level", &mut c.qex_level, |x| x > 0.0, "positive")?;
        for (key, v) in [
            ("control_period", &mut c.control_period),
            ("default_period", &mut c.default_period),
        ] {
            if let Some(d) = p.duration(key)? {
                if d == Duration::ZERO {
                    return Err(param_err(key, "must be positive"));
                }
                *v = d;
            }
        }
        if c.floor > c.overload {
            return Err(param_err("floor", "is above the overload threshold"));
        }
        Ok(c)
    }

    /// An adaptive child's first proportion: `initial`, but not below
    /// `floor`, which bounds every adaptive child.
    fn first_proportion(&self) -> f64 {
        self.initial.max(self.floor)
    }
}

/// A child's class (Fig 2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    /// Proportion and period specified: a reservation.
    RealTime,
    /// Proportion only; the period is `default_period`.
    Aperiodic,
    /// A progress metric, no proportion: sized by the controller.
    RealRate,
    /// Nothing known: constant pressure.
    Misc,
}

impl Class {
    /// Name in hierarchy files.
    pub fn name(self) -> &'static str {
        match self {
            Class::RealTime => "real-time",
            Class::Aperiodic => "aperiodic",
            Class::RealRate => "real-rate",
            Class::Misc => "misc",
        }
    }

    /// Whether the controller sizes it (real-rate and misc).
    pub fn adaptive(self) -> bool {
        matches!(self, Class::RealRate | Class::Misc)
    }
}

/// What a child asked for, read from its parameters ([`child_spec`]).
#[derive(Clone, Copy, Debug)]
pub struct Spec {
    /// Its class, given or inferred (Fig 2).
    pub class: Class,
    /// Whether `class` was given.
    pub explicit: bool,
    /// Its proportion (real-time and aperiodic children).
    pub proportion: Option<f64>,
    /// Its reservation period (`default_period` when none is given).
    pub period: Duration,
    /// Its weight when squishing.
    pub importance: f64,
}

/// What admission control counts for a child: its proportion when it is
/// real-time or aperiodic, the floor when it is adaptive.
fn load_of(cfg: &RealRateConfig, spec: &Spec) -> u128 {
    if spec.class.adaptive() {
        share_up(cfg.floor)
    } else {
        share_up(spec.proportion.unwrap_or(0.0))
    }
}

/// The registry's [`Admission`], as `register_vp` and `set_params` count.
const ADMISSION: Admission = Admission {
    cap: |p| RealRateConfig::from_params(p).map_or(u128::MAX, |c| share_down(c.overload)),
    cap_key: "overload",
    load: |instance, p| {
        let cfg = RealRateConfig::from_params(instance).unwrap_or_default();
        child_spec(&cfg, p).map_or(0, |spec| load_of(&cfg, &spec))
    },
    per_child: 1,
    one: SHARE_ONE,
};

/// The registry's [`PolicyInfo::merge_change`]: a change to an adaptive
/// class hands the child to the controller, so the proportion it had as a
/// real-time or aperiodic child goes (it starts again as a new adaptive
/// child does); merged in, it would make the request refused.
fn merge_change(current: &Params, change: &Params) -> Params {
    let adaptive =
        matches!(change.get("class"), Some(ParamValue::Str(c)) if c == "real-rate" || c == "misc");
    let mut merged = Params::new();
    for (k, v) in current.iter() {
        if !(adaptive && k == "proportion") {
            merged.insert(k, v.clone());
        }
    }
    for (k, v) in change.iter() {
        merged.insert(k, v.clone());
    }
    merged
}

/// Reads a child's parameters as `register_vp` does.
///
/// # Errors
/// A value out of range, an unknown class, or a proportion a class does
/// not take.
pub fn child_spec(cfg: &RealRateConfig, p: &Params) -> Result<Spec, PolicyError> {
    let proportion = p.f64("proportion")?;
    if let Some(x) = proportion {
        if !(x > 0.0 && x <= 1.0) {
            return Err(param_err(
                "proportion",
                format!("must be in (0, 1], found {x}"),
            ));
        }
    }
    let period = p.duration("period")?;
    if period == Some(Duration::ZERO) {
        return Err(param_err("period", "must be positive"));
    }
    let importance = p.f64("importance")?.unwrap_or(1.0);
    if importance <= 0.0 {
        return Err(param_err(
            "importance",
            format!("must be positive, found {importance}"),
        ));
    }
    let (class, explicit) = match p.str("class")? {
        Some("real-time") => (Class::RealTime, true),
        Some("aperiodic") => (Class::Aperiodic, true),
        Some("real-rate") => (Class::RealRate, true),
        Some("misc") => (Class::Misc, true),
        Some(other) => {
            return Err(param_err(
                "class",
                format!(
                    "unknown class `{other}`; expected real-time, aperiodic, real-rate or misc"
                ),
            ))
        }
        None => match (proportion, period) {
            (Some(_), Some(_)) => (Class::RealTime, false),
            (Some(_), None) => (Class::Aperiodic, false),
            _ => (Class::Misc, false),
        },
    };
    match class {
        Class::RealTime if proportion.is_none() || period.is_none() => {
            return Err(param_err(
                "proportion",
                "a real-time child needs proportion and period",
            ))
        }
        Class::Aperiodic if proportion.is_none() => {
            return Err(param_err(
                "proportion",
                "an aperiodic child needs a proportion",
            ))
        }
        Class::RealRate | Class::Misc if proportion.is_some() => {
            return Err(param_err(
                "proportion",
                "the controller sizes real-rate and misc children; give no proportion",
            ))
        }
        _ => {}
    }
    Ok(Spec {
        class,
        explicit,
        proportion,
        period: period.unwrap_or(cfg.default_period),
        importance,
    })
}

/// A child's class after a progress message (Fig 2): one of inferred
/// class is real-rate while it reports a progress metric through some
/// queue, and miscellaneous again when its last queue goes (a shell's
/// helper pipes, gone once the program `exec`s, would otherwise leave it a
/// real-rate job without pressure, held at what it had).
pub fn learned_class(class: Class, explicit: bool, reports: bool) -> Class {
    match class {
        Class::Misc | Class::RealRate if !explicit => {
            if reports {
                Class::RealRate
            } else {
                Class::Misc
            }
        }
        c => c,
    }
}

/// Per-child state.
#[derive(Clone, Debug)]
struct Child {
    /// Budget, period grid and queue state; `slot.amount` is the
    /// per-period amount in force.
    slot: Slot,
    class: Class,
    explicit: bool,
    importance: f64,
    /// Current proportion, in [0, 1].
    proportion: f64,
    period: Duration,
    pending_period: Option<Duration>,
    /// The controller's state ([`crate::rate_control`]).
    fb: Feedback,
    misses: u64,
    /// What admission control counts for it (`load_of`).
    counted: u128,
}

fn amount_of(p: f64, period: Duration) -> Duration {
    Duration::from_nanos((period.as_nanos() as f64 * p).round() as u64)
}

/// Real-rate's side of the budget dispatcher: rate-monotonic order, and
/// the unused budget and missed deadlines the controller learns from.
#[derive(Debug)]
struct RateMonotonic;

impl Rules for RateMonotonic {
    type Child = Child;
    type Key = Duration;

    fn slot(c: &Child) -> &Slot {
        &c.slot
    }

    fn slot_mut(c: &mut Child) -> &mut Slot {
        &mut c.slot
    }

    fn key(c: &Child) -> Duration {
        c.period
    }

    fn first_period(&mut self, _ctx: &Ctx<'_>, _vp: VpId, c: &mut Child) -> Duration {
        if let Some(p) = c.pending_period.take() {
            c.period = p;
        }
        c.slot.amount = amount_of(c.proportion, c.period);
        c.period
    }

    /// Unused budget of a blocked child feeds the too-generous test; of a
    /// ready one, it is a missed deadline.
    fn end_period(
        &mut self,
        _ctx: &Ctx<'_>,
        _vp: VpId,
        c: &mut Child,
        runnable: bool,
        _notes: &mut Vec<PolicyEvent>,
    ) -> Duration {
        if c.slot.budget > Duration::ZERO {
            if runnable {
                c.misses += 1;
            } else {
                c.fb.unused(c.slot.budget.as_secs_f64());
            }
        }
        if let Some(p) = c.pending_period.take() {
            c.period = p;
        }
        c.period
    }

    fn start_period(
        &mut self,
        _ctx: &Ctx<'_>,
        _vp: VpId,
        c: &mut Child,
        skipped: u64,
        period: Duration,
    ) {
        if skipped > 0 {
            // Whole periods spent waiting were unused allocation.
            c.fb.unused(skipped as f64 * c.proportion * period.as_secs_f64());
        }
        c.slot.amount = amount_of(c.proportion, period);
    }

    /// Rate-monotonic analysis counts on each child's demand being that of
    /// a periodic task, which runs from its period start at the latest: a
    /// child asking `elapsed` into its period is owed at most what such a
    /// task could still have to run, `amount − elapsed`. (The EDF rule,
    /// `amount × left / period`, lets a late child and its next period
    /// run back to back longer than a periodic task can, which makes
    /// lower-priority reservations miss.)
    fn on_rate(s: &Slot, left: Duration) -> Duration {
        s.amount.saturating_sub(s.period.saturating_sub(left))
    }
}

/// A real-rate scheduler instance. See the module documentation.
#[derive(Debug)]
pub struct RealRate {
    cfg: RealRateConfig,
    /// The dispatcher; its `tick` is the next controller tick.
    core: Budgets<RateMonotonic>,
    /// Sum of real-time and aperiodic proportions.
    rt_load: f64,
    /// Number of adaptive children.
    adaptive: usize,
    /// Sum of the children's `counted` loads, and how many they are.
    admitted: u128,
    children: u128,
    last_control: Instant,
    qex_total: u64,
    ticks: u64,
}

impl RealRate {
    /// An instance with this configuration.
    pub fn new(cfg: RealRateConfig) -> Self {
        RealRate {
            cfg,
            core: Budgets::new(RateMonotonic, Charging::Granted),
            rt_load: 0.0,
            adaptive: 0,
            admitted: 0,
            children: 0,
            last_control: Instant::ZERO,
            qex_total: 0,
            ticks: 0,
        }
    }

    /// The configuration.
    pub fn config(&self) -> RealRateConfig {
        self.cfg
    }

    /// Quality exceptions raised so far.
    pub fn quality_exceptions(&self) -> u64 {
        self.qex_total
    }

    /// Controller ticks run so far.
    pub fn ticks(&self) -> u64 {
        self.ticks
    }

    /// Sum of all current proportions.
    pub fn load(&self) -> f64 {
        self.core.children.iter().map(|(_, c)| c.proportion).sum()
    }

    /// Capacity left to adaptive children.
    fn adaptive_room(&self) -> f64 {
        (self.cfg.overload - self.rt_load).max(0.0)
    }

    /// Sets a child's proportion now: the budget left in this period moves
    /// by the change of the per-period amount (§3.1: cheap changes).
    fn set_proportion(&mut self, ctx: &Ctx<'_>, vp: VpId, p: f64) {
        let Some(c) = self.core.children.get_mut(ctx, vp) else {
            return;
        };
        c.proportion = p;
        if !c.slot.started {
            return;
        }
        let new = amount_of(p, c.period);
        self.core.change_budget(ctx, vp, |s| {
            if new >= s.amount {
                s.budget += new - s.amount;
            } else {
                s.budget -= s.amount - new;
            }
            s.amount = new;
        });
    }

    fn start_controller(&mut self, now: Instant) {
        if self.adaptive > 0 && self.core.tick == Instant::NEVER {
            self.last_control = now;
            self.core.tick = now + self.cfg.control_period;
        }
    }

    /// One controller tick (§3.3): pressure, PID, Fig 4, squishing,
    /// quality exceptions, actuation.
    fn control(&mut self, ctx: &mut Ctx<'_>) {
        let now = ctx.now();
        if now < self.core.tick {
            return;
        }
        self.ticks += 1;
        let dt = now.saturating_since(self.last_control).as_secs_f64();
        self.last_control = now;
        self.core.tick = if self.adaptive == 0 {
            Instant::NEVER
        } else {
            now + self.cfg.control_period
        };
        let cfg = self.cfg;
        // A waiting child's unused allocation must reach the too-generous
        // test now, not when it next asks: one that never asks again would
        // otherwise keep growing under constant pressure.
        for i in 0..self.core.children.len() {
            let (vp, c) = self.core.children.at_mut(i);
            if !c.class.adaptive() || ctx.vp_state(vp) != VpState::Waiting {
                continue;
            }
            if !c.slot.started {
                c.fb.unused(c.proportion * dt);
            } else if now >= c.slot.deadline {
                self.core.roll_period(ctx, vp, false);
            }
        }
        let mut notes = Vec::new();
        for i in 0..self.core.children.len() {
            let (_, c) = self.core.children.at_mut(i);
            if !c.class.adaptive() {
                continue;
            }
            c.fb.step(&cfg, c.class, c.proportion, c.period, now, dt);
        }
        let room = self.adaptive_room();
        let granted = self.squish(room);
        for (i, g) in granted {
            let (vp, c) = self.core.children.at_mut(i);
            // Quality exceptions: a real-rate child far behind and held
            // below what it asked for.
            if c.class == Class::RealRate && c.fb.quality(&cfg, g) {
                self.qex_total += 1;
                notes.push(format!(
                    "quality exception: {vp} is behind (pressure {:.2}) but gets {:.1}% of the \
                     {:.1}% it needs; lower its requirements",
                    c.fb.filtered,
                    g * 100.0,
                    c.fb.wanted * 100.0
                ));
            }
            if (g - c.proportion).abs() > 1e-12 {
                self.set_proportion(ctx, vp, g);
            }
        }
        if ctx.tracing() {
            for n in notes {
                ctx.event(PolicyEvent::Note(n));
            }
        }
    }

    /// Squishes the adaptive children's wanted proportions into `room`
    /// ([`rate_control::squish`]). Returns (index, granted).
    fn squish(&self, room: f64) -> Vec<(usize, f64)> {
        let mut wanted = Vec::new();
        for i in 0..self.core.children.len() {
            let (_, c) = self.core.children.at(i);
            if c.class.adaptive() {
                wanted.push((i, c.fb.wanted, c.importance));
            }
        }
        rate_control::squish(self.cfg.floor, room, &wanted)
    }

    /// Applies a squish of the current allocations at once (after a
    /// real-time admission or a class change), so the dispatcher never
    /// runs oversubscribed until the next tick.
    fn rebalance(&mut self, ctx: &Ctx<'_>) {
        for i in 0..self.core.children.len() {
            let (_, c) = self.core.children.at_mut(i);
            if c.class.adaptive() {
                c.fb.wanted = c.proportion;
            }
        }
        let room = self.adaptive_room();
        for (i, g) in self.squish(room) {
            let (vp, c) = self.core.children.at(i);
            if (g - c.proportion).abs() > 1e-12 {
                self.set_proportion(ctx, vp, g);
            }
        }
    }

    /// Admission control (§3.3): `load`, the real-time proportions plus a
    /// floor for every adaptive child of `children` children, must stay
    /// within the overload threshold (one unit per child for rounding, see
    /// `budget::SHARE_ONE`).
    fn admit(&self, load: u128, children: u128) -> Result<(), PolicyError> {
        if load > share_down(self.cfg.overload) + children {
            return Err(PolicyError::AdmissionRefused {
                load: load as f64 / SHARE_ONE as f64,
                cap: self.cfg.overload,
                held: 0.0,
            });
        }
        Ok(())
    }

    fn progress(&mut self, ctx: &Ctx<'_>, vp: VpId, p: &Params) -> Result<(), PolicyError> {
        let c = self.core.children.get_mut(ctx, vp).ok_or_else(|| {
            PolicyError::Refused(format!("{vp} is not a child of this scheduler"))
        })?;
        c.fb.progress(p)?;
        c.class = learned_class(c.class, c.explicit, c.fb.reports());
        Ok(())
    }

    fn set_params(
        &mut self,
        ctx: &mut Ctx<'_>,
        vp: VpId,
        change: &Params,
    ) -> Result<(), PolicyError> {
        let known = ["class", "proportion", "period", "importance"];
        if let Some(k) = change.unknown_keys(&known).next() {
            return Err(PolicyError::Unsupported(format!(
                "a realrate change has no parameter `{k}`; it accepts: {}",
                known.join(", ")
            )));
        }
        let Some(old) = self.core.children.get(ctx, vp).cloned() else {
            return Err(PolicyError::Refused(format!(
                "{vp} is not a child of this scheduler"
            )));
        };
        let merged = merge_change(ctx.vp_params(vp), change);
        // An adaptive child changing to real-time drops the old absent
        // proportion rule: read the merged parameters as a new request.
        let spec = child_spec(&self.cfg, &merged)?;
        let was_rt = !old.class.adaptive();
        let is_rt = !spec.class.adaptive();
        let rt_after = self.rt_load - if was_rt { old.proportion } else { 0.0 }
            + if is_rt {
                spec.proportion.unwrap_or(0.0)
            } else {
                0.0
            };
        let adaptive_after = self.adaptive - usize::from(!was_rt) + usize::from(!is_rt);
        let counted = load_of(&self.cfg, &spec);
        let admitted = self.admitted - old.counted + counted;
        self.admit(admitted, self.children)?;
        self.admitted = admitted;
        self.rt_load = rt_after.max(0.0);
        self.adaptive = adaptive_after;
        let new_p = match spec.proportion {
            Some(p) => p,
            None if was_rt => self.cfg.first_proportion(),
            None => old.proportion,
        };
        if let Some(c) = self.core.children.get_mut(ctx, vp) {
            c.counted = counted;
            // Keep a real-rate class learned from progress messages.
            let learned = c.class == Class::RealRate && spec.class == Class::Misc && !spec.explicit;
            if !learned {
                c.class = spec.class;
            }
            c.explicit = spec.explicit;
            c.importance = spec.importance;
            if spec.period != c.period {
                if c.slot.started {
                    c.pending_period = Some(spec.period);
                } else {
                    c.period = spec.period;
                }
            }
            c.fb.wanted = new_p;
        }
        self.set_proportion(ctx, vp, new_p);
        self.rebalance(ctx);
        self.start_controller(ctx.now());
        ctx.set_vp_params(vp, merged);
        Ok(())
    }
}

impl Policy for RealRate {
    fn policy_name(&self) -> &'static str {
        "realrate"
    }

    fn parent_vps(&self, available: usize) -> usize {
        available.min(1)
    }

    fn register_vp(
        &mut self,
        ctx: &mut Ctx<'_>,
        vp: VpId,
        params: &Params,
    ) -> Result<(), PolicyError> {
        crate::registry::check_child_params(&INFO, params)?;
        let spec = child_spec(&self.cfg, params)?;
        let rt = !spec.class.adaptive();
        let rt_after = self.rt_load
            + if rt {
                spec.proportion.unwrap_or(0.0)
            } else {
                0.0
            };
        let adaptive_after = self.adaptive + usize::from(!rt);
        let counted = load_of(&self.cfg, &spec);
        self.admit(self.admitted + counted, self.children + 1)?;
        self.admitted += counted;
        self.children += 1;
        self.rt_load = rt_after;
        self.adaptive = adaptive_after;
        let proportion = spec.proportion.unwrap_or(self.cfg.first_proportion());
        let now = ctx.now();
        let child = Child {
            slot: self.core.new_slot(),
            class: spec.class,
            explicit: spec.explicit,
            importance: spec.importance,
            proportion,
            period: spec.period,
            pending_period: None,
            fb: Feedback::new(now, proportion),
            misses: 0,
            counted,
        };
        self.core.children.insert(ctx, vp, child);
        // A new reservation or a new adaptive child may oversubscribe the
        // adaptive room: squish at once rather than at the next tick.
        self.rebalance(ctx);
        self.start_controller(now);
        self.core.arm(ctx);
        Ok(())
    }

    fn unregister_vp(&mut self, ctx: &mut Ctx<'_>, vp: VpId) {
        if let Some(c) = self.core.unregister(ctx, vp) {
            self.admitted -= c.counted;
            self.children -= 1;
            if c.class.adaptive() {
                self.adaptive -= 1;
            } else {
                self.rt_load = (self.rt_load - c.proportion).max(0.0);
            }
        }
        if self.core.children.is_empty() {
            self.rt_load = 0.0;
        }
    }

    fn request(&mut self, ctx: &mut Ctx<'_>, vp: VpId) {
        self.core.request(ctx, vp);
    }

    fn release(&mut self, ctx: &mut Ctx<'_>, vp: VpId) {
        self.core.release(ctx, vp);
    }

    fn grant(&mut self, ctx: &mut Ctx<'_>, parent_vp: VpId, cpu: CpuId) {
        self.core.grant(ctx, parent_vp, cpu);
    }

    fn revoke(&mut self, ctx: &mut Ctx<'_>, _parent_vp: VpId, reason: RevokeReason) {
        self.core.revoke(ctx, reason);
    }

    fn msg(&mut self, ctx: &mut Ctx<'_>, vp: VpId, msg: &Msg) -> Result<(), PolicyError> {
        self.core.catch_up(ctx);
        let r = match msg {
            Msg::SetParams(change) => self.set_params(ctx, vp, change),
            Msg::App { kind, params } if kind == "progress" => {
                let r = self.progress(ctx, vp, params);
                self.start_controller(ctx.now());
                r
            }
            other => Err(PolicyError::Unsupported(format!(
                "realrate accepts SetParams and App \"progress\" messages, not {other:?}"
            ))),
        };
        self.core.due_events(ctx);
        self.core.settle(ctx);
        r
    }

    fn timer(&mut self, ctx: &mut Ctx<'_>) {
        self.core.catch_up(ctx);
        self.core.due_events(ctx);
        self.control(ctx);
        self.core.settle(ctx);
    }

    fn check_invariants(&self, ctx: &Ctx<'_>) -> Result<(), String> {
        let sum: u128 = self.core.children.iter().map(|(_, c)| c.counted).sum();
        let count = self.core.children.iter().count() as u128;
        if (sum, count) != (self.admitted, self.children) {
            return Err(format!(
                "admission counts {} children for {}, but they add up to {count} for {sum}",
                self.children, self.admitted
            ));
        }
        self.admit(self.admitted, self.children)
            .map_err(|e| format!("over its threshold: {e}"))?;
        if let Some(vp) = self.core.running() {
            let cpu = self
                .core
                .cpu()
                .ok_or_else(|| format!("{vp} runs but realrate holds no processor"))?;
            if ctx.vp_cpu(vp) != Some(cpu) {
                return Err(format!(
                    "thinks {vp} runs on {cpu} but it is {:?}",
                    ctx.vp_state(vp)
                ));
            }
        }
        if let Some(cpu) = self.core.cpu() {
            if self.core.running().is_none() {
                return Err(format!("holds {cpu} without running a child"));
            }
        }
        for (key, vp) in self.core.eligible() {
            let c = self
                .core
                .children
                .get(ctx, vp)
                .ok_or_else(|| format!("eligible {vp} is not a child"))?;
            if !c.slot.eligible
                || Budgets::<RateMonotonic>::key_of(c) != key
                || c.slot.budget == Duration::ZERO
            {
                return Err(format!("eligible entry of {vp} is stale"));
            }
        }
        self.core.check_events()?;
        let load = self.load();
        if load
            > self
                .cfg
                .overload
                .max(self.rt_load + self.adaptive as f64 * self.cfg.floor)
                + 1e-6
        {
            return Err(format!(
                "proportions add up to {load:.4}, over the threshold {}",
                self.cfg.overload
            ));
        }
        for (vp, c) in self.core.children.iter() {
            if c.class.adaptive() && c.proportion + 1e-9 < self.cfg.floor {
                return Err(format!("{vp} is below the floor: {}", c.proportion));
            }
        }
        Ok(())
    }

    /// The end of the child's current reservation period.
    fn child_deadline(&self, ctx: &Ctx<'_>, vp: VpId) -> Option<Instant> {
        self.core.deadline(ctx, vp)
    }

    fn describe(&self) -> String {
        let mut s = format!(
            "overload={} load={:.1}% rt={:.1}% adaptive={} ticks={} qex={}",
            self.cfg.overload,
            self.load() * 100.0,
            self.rt_load * 100.0,
            self.adaptive,
            self.ticks,
            self.qex_total
        );
        for (vp, c) in self.core.children.iter() {
            s.push_str(&format!(
                " [{vp} {} {:.1}%/{}{}]",
                c.class.name(),
                c.proportion * 100.0,
                c.period,
                if c.fb.qex + c.misses > 0 {
                    format!(" qex={} misses={}", c.fb.qex, c.misses)
                } else {
                    String::new()
                }
            ));
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hsched_core::testing::{Behaviour, Driver};
    use hsched_core::{Hsi, ParamValue, ParentLink, ParentRef};

    #[test]
    fn an_inferred_child_is_real_rate_while_it_reports_a_queue() {
        use Class::*;
        assert_eq!(learned_class(Misc, false, true), RealRate);
        assert_eq!(learned_class(RealRate, false, false), Misc);
        assert_eq!(learned_class(RealRate, false, true), RealRate);
        // A class the file gives stays.
        assert_eq!(learned_class(Misc, true, true), Misc);
        assert_eq!(learned_class(RealRate, true, false), RealRate);
        assert_eq!(learned_class(RealTime, false, true), RealTime);
    }

    fn prio(p: i64) -> Params {
        Params::new().with("priority", ParamValue::Int(p))
    }

    /// The parent takes the processor back at the very instant the
    /// running child's period ends, and the revocation is delivered before
    /// the replenishment timer: the child rolls into its next period while
    /// still `Running` in the VP table (the revocation is not applied yet)
    /// and must stay eligible, or it would sit out a whole period.
    #[test]
    fn a_child_revoked_at_its_period_end_stays_eligible() {
        let mut hsi = Hsi::new(1);
        hsi.set_checking(true);
        let top = vec![ParentLink {
            parent: ParentRef::Top {
                cpus: vec![CpuId(0)],
            },
            params: Params::new(),
        }];
        let fp = crate::build("fp", &Params::new()).unwrap();
        let fp = hsi.create_instance(Instant::ZERO, "fp", fp, top).unwrap();
        let link = ParentLink {
            parent: ParentRef::Instance(fp),
            params: prio(5),
        };
        let rr = Box::new(RealRate::new(RealRateConfig::default()));
        let rr = hsi
            .create_instance(Instant::ZERO, "rr", rr, vec![link])
            .unwrap();
        let rt = Params::new()
            .with("proportion", ParamValue::Float(0.5))
            .with("period", ParamValue::Str("30ms".into()));
        let a = hsi.create_thread(Instant::ZERO, "a", rr, rt).unwrap();
        let h = hsi.create_thread(Instant::ZERO, "h", fp, prio(10)).unwrap();
        let mut d = Driver::new(hsi);
        d.add(a, Behaviour::CpuBound).unwrap();
        // h runs 20 ms of every 30: `a` runs the last 10 ms of each of its
        // periods (its 15 ms budget never runs out) and is revoked by h's
        // release exactly at its period end.
        let ms = Duration::from_millis;
        d.add(
            h,
            Behaviour::Periodic {
                period: ms(30),
                exec: ms(20),
                offset: ms(0),
            },
        )
        .unwrap();
        d.run_until(Instant::ZERO + ms(90)).unwrap();
        assert_eq!(d.hsi.thread_received(a), ms(30));
        assert_eq!(d.hsi.thread_received(h), ms(60));
    }
}
