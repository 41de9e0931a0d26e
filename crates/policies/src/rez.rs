//! `rez`: basic, hard CPU reservations (Regehr 2001, §9.3.2), with the two
//! augmented variants of Regehr 2001, ch. 11, Rez-C (§11.5.2) and Rez-FB
//! (§11.5.3).
//!
//! # Algorithm
//! Every child VP holds a reservation of `amount` every `period`. Rez keeps
//! a *budget* per child, replenished to the amount at the start of each of
//! the child's periods and decremented by the CPU time the child receives.
//! It always runs, among the children that are ready and have budget left,
//! the one with the earliest deadline, the deadline being the end of the
//! child's current period (EDF). A child whose budget runs out is revoked
//! with [`RevokeReason::BudgetExhausted`] and waits, ready, for its next
//! period: reservations are *hard*, and when no child is eligible Rez gives
//! its processor back to its parent, so slack goes to whatever the parent
//! runs next (typically a time-sharing scheduler below Rez under FP, §11.4).
//!
//! A child's periods form a fixed grid that starts at its first request
//! after registration (the phase `t` of §5.2.2.2 is chosen by the
//! scheduler; starting at the first wake-up aligns the grid with the jobs
//! of a periodic thread). While a child is waiting no events are kept for
//! it; when it asks again, its period is advanced along the grid by
//! arithmetic, replenishing its budget if a boundary passed.
//!
//! A child that asks part way through a period keeps its budget, but only
//! `amount × (deadline − now) / period` of it competes by deadline; the
//! rest runs after every child within its rate (the crate's `budget`
//! module). EDF meets every deadline of children whose utilizations add up
//! to at most 1 only if none asks for more than its rate of the time left
//! before its deadline: a child waking 10 ms before the end of its 40 ms
//! period with 8 ms of budget (a join whose other parent ran its child
//! until then does exactly that) would otherwise take time promised to a
//! reservation whose period ends at the same instant.
//!
//! Replenishments and the running child's budget exhaustion are driven by
//! the single instance timer, armed at the earliest pending event.
//! Replenishments sit in a binary heap ordered by (time, sequence number)
//! and eligible children in a sorted set keyed by (over its rate, deadline,
//! registration order), so every event costs O(log n). Ties between equal
//! deadlines go to the child registered first; the running child is only
//! preempted by a strictly earlier deadline, or by a child within its rate
//! once its own budget is down to the part over its rate.
//!
//! Rez is a uniprocessor scheduler: it registers one VP with its parent
//! ([`Policy::parent_vps`] is 1) and offers one processor to each child.
//! Several processors need one instance per processor (§9.3.2). When the
//! parent revokes Rez's processor, Rez charges the running child up to that
//! instant and revokes it with the parent's reason; time during which the
//! child was not granted is never charged, so Rez keeps correct accounts
//! under a preempting parent.
//!
//! Notifications reach an instance only after its own actions are applied
//! (the HSI never nests a policy's hooks), so every hook first reconciles
//! with what already happened: a processor the parent took back (the child
//! is revoked with `Preempted` when the parent's own revocation has not
//! arrived yet), a running child that released, a child that released or
//! asked again since the notification was sent.
//!
//! This budget/period mechanism is shared with `realrate` (the crate's
//! `budget` module); what is Rez's own is the EDF order, the variants'
//! charging and period ends, and admission control.
//!
//! # Admission control (§11.4)
//! A child is admitted when the sum of amount/period over all children,
//! itself included, stays within `cap`. Registration and reservation
//! changes (`Msg::SetParams`) beyond the cap are refused with
//! [`PolicyError::AdmissionRefused`] naming the load that would have been
//! reached, and nothing changes. A reservation change is checked at once
//! and takes effect at the child's next period start; until then the child
//! counts with the larger of its old and new utilization, so capacity freed
//! by a decrease cannot be promised twice.
//!
//! Utilizations are counted in units of 2⁻³² of the processor, each
//! rounded up, and the cap rounded down, so that sums are exact integers.
//! Rounding up costs each child less than a unit, so the test allows one
//! unit per child: reservations whose exact sum is the cap (0.4 + 0.1
//! under 0.5) are admitted, as the guarantee analysis admits them, and a
//! set is never admitted more than one unit per child, 2.3·10⁻¹⁰ of the
//! processor, over the cap.
//!
//! # Variants (instance parameter `variant`)
//! - `basic` (Rez, §9.3.2): budgets are charged with the wall-clock time
//!   the child was granted, stolen time included, so time stolen by
//!   interrupts and deferred work (reported through `Hsi::add_stolen`)
//!   reduces what the thread really gets. That is the point of §11.2.
//! - `catch-up` (Rez-C, §11.5.2): budgets are charged only with the CPU
//!   time actually received ([`Ctx::vp_received`], net of stolen time).
//!   When the budget timer fires with budget left because time was stolen,
//!   Rez-C lets the child run on for the stolen amount, so it catches up
//!   within its period. The extra time bypasses admission control. Budget
//!   timers are never armed shorter than 1 µs (the footnote of §11.5.2:
//!   timers are quantized), so a child may get up to 1 µs extra per period.
//! - `feedback` (Rez-FB, §11.5.3): budgets are charged like `basic`, but at
//!   every period start the amount actually reserved is corrected with
//!   `C_t = C_{t-1} + G (R - P_{t-1})`, `R` the requested amount, `P` the
//!   CPU time the child actually received (net) in the period just ended
//!   and `G` the `gain`. The correction stays within admission control: an
//!   amount that would push the load over the cap is held at the largest
//!   admissible one, and a trace note says so. To avoid integral wind-up the
//!   controller only learns from periods the child wanted in full (its
//!   budget ran out, or it was still ready or running at the period end); a
//!   period in which it blocked with budget left `u` lowers an amount above
//!   `R` by `G u`, never below `R`, so a correction made during a burst of
//!   stolen time decays once the burst is over.
//!   `C` is clamped to `[0, period]`. A reservation change resets `C` to the
//!   new amount.
//!
//! The policy name stays `rez` for all three; the variant is a mode, so a
//! hierarchy file switches between them by changing one key.
//!
//! # Parameters
//! Instance (`[[scheduler]]` keys):
//! - `cap`: number in (0, 1], default 0.85: admission limit on the total
//!   utilization (§11.4 uses 0.85 to keep time for time sharing).
//! - `variant`: `"basic"` (default), `"catch-up"` or `"feedback"`.
//! - `gain`: number in (0, 1], default 0.5: Rez-FB's `G`; only accepted with
//!   `variant = "feedback"`.
//!
//! Child (a thread's or child instance's `params`):
//! - `amount`: duration, required, positive, at most `period`.
//! - `period`: duration, required, positive.
//!
//! # Guarantees (Regehr 2001, Table 5.1, §5.3.1.5)
//! Rez needs `ALL` (the whole processor: run it at the root, or as the
//! highest-priority child of FP, which passes `ALL` through) and provides
//! `RESBH amount period` to each child. Table 5.1 also lists
//! `RESU ↦ RESBH+`; that needs a uniformly-slower-processor parent that
//! reads Rez's deadlines, which hsched does not have, so `RESU` is not
//! claimed here. Rez-C and Rez-FB provide the same guarantee type (an
//! *augmented* reservation, §11.1): they only relax the assumption that
//! stolen time is negligible. Rez-C's catch-up time is taken outside
//! admission control and can make other reservations miss (§11.5.2).
//!
//! # Messages
//! `Msg::SetParams` with `amount` and/or `period` changes a child's
//! reservation (keys absent keep their value; unknown keys are refused).

use crate::budget::{Budgets, Charging, Rules, Slot};
use crate::registry::{Admission, PolicyInfo};
use hsched_core::{
    CpuId, Ctx, Duration, Instant, Msg, ParamError, ParamSpec, Params, Policy, PolicyError,
    PolicyEvent, RevokeReason, VpId, VpState,
};

/// Registry entry.
pub const INFO: PolicyInfo = PolicyInfo {
    name: "rez",
    summary: "basic, hard CPU reservations: EDF over per-period budgets with admission control \
              (variants catch-up = Rez-C and feedback = Rez-FB cope with stolen time)",
    source: "Regehr 2001, §9.3.2, §5.3.1.5, ch. 11 (§11.4, §11.5.2, §11.5.3)",
    instance_params: &[
        ParamSpec {
            key: "cap",
            kind: "number",
            default: "0.85",
            doc: "admission limit on the sum of amount/period, in (0, 1]",
        },
        ParamSpec {
            key: "variant",
            kind: "string",
            default: "basic",
            doc: "basic (Rez), catch-up (Rez-C, charges net of stolen time), feedback (Rez-FB, corrects amounts)",
        },
        ParamSpec { key: "gain", kind: "number", default: "0.5", doc: "Rez-FB's controller gain G, in (0, 1]" },
    ],
    child_params: &[
        ParamSpec { key: "amount", kind: "duration", default: "required", doc: "CPU time reserved each period" },
        ParamSpec { key: "period", kind: "duration", default: "required", doc: "the reservation period" },
    ],
    change_params: &[],
    max_children: None,
    min_parents: 1,
    max_parents: 1,
    build,
    check_child: |p| Reservation::from_params(p).map(drop),
    exclusive: None,
    admission: Some(ADMISSION),
    merge_change: crate::registry::merge_change,
};

fn build(params: &Params) -> Result<Box<dyn Policy>, PolicyError> {
    Ok(Box::new(Rez::from_params(params)?))
}

/// Default admission cap (§11.4).
pub const DEFAULT_CAP: f64 = 0.85;
/// Default Rez-FB gain.
pub const DEFAULT_GAIN: f64 = 0.5;
/// Shortest budget timer Rez-C arms when catching up (§11.5.2 footnote).
pub const CATCH_UP_GRANULARITY: Duration = Duration::from_micros(1);
/// Utilizations are fixed-point fractions of `UTIL_ONE`, rounded up, so
/// admission sums are exact and kept incrementally (no drift, no scan).
const UTIL_ONE: u128 = crate::budget::SHARE_ONE;

fn util_fp(amount: Duration, period: Duration) -> u128 {
    let (a, p) = (amount.as_nanos(), period.as_nanos().max(1));
    // Every amount under 2^32 ns (4.3 s) fits 64 bits once scaled, and a
    // 64-bit division gives the same quotient as the 128-bit one, which is
    // a library call; this runs at every period start.
    if a < 1 << 32 {
        (a << 32).div_ceil(p) as u128
    } else {
        (a as u128 * UTIL_ONE).div_ceil(p as u128)
    }
}

/// The admission cap in the fixed point of [`util_fp`].
fn cap_fp(cap: f64) -> u128 {
    crate::budget::share_down(cap)
}

/// The registry's [`Admission`]: the cap and each reservation's
/// utilization, as `register_vp` and `msg` count them.
const ADMISSION: Admission = Admission {
    cap: |p| RezConfig::from_params(p).map_or(u128::MAX, |c| cap_fp(c.cap)),
    cap_key: "cap",
    load: |_, p| Reservation::from_params(p).map_or(0, |r| util_fp(r.amount, r.period)),
    per_child: 1,
    one: UTIL_ONE,
};

fn fp_to_f64(u: u128) -> f64 {
    u as f64 / UTIL_ONE as f64
}

fn param_err(key: &str, message: impl Into<String>) -> PolicyError {
    PolicyError::Param(ParamError {
        key: key.to_string(),
        message: message.into(),
    })
}

/// How Rez charges budgets and sizes reservations (Regehr 2001, ch. 11).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Variant {
    /// Rez: charge wall-clock time while granted.
    Basic,
    /// Rez-C: charge only CPU time received, net of stolen time.
    CatchUp,
    /// Rez-FB: charge like `Basic`; correct each amount at its period start.
    Feedback {
        /// The controller gain `G`, in (0, 1].
        gain: f64,
    },
}

impl Variant {
    /// The name used in hierarchy files.
    pub fn name(self) -> &'static str {
        match self {
            Variant::Basic => "basic",
            Variant::CatchUp => "catch-up",
            Variant::Feedback { .. } => "feedback",
        }
    }
}

/// Configuration of one Rez instance.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RezConfig {
    /// Admission cap on the total utilization, in (0, 1].
    pub cap: f64,
    /// Which variant runs.
    pub variant: Variant,
}

impl Default for RezConfig {
    fn default() -> Self {
        RezConfig {
            cap: DEFAULT_CAP,
            variant: Variant::Basic,
        }
    }
}

impl RezConfig {
    /// Reads `cap`, `variant` and `gain` from instance parameters.
    ///
    /// # Errors
    /// A value of the wrong type or out of range, an unknown variant, or a
    /// `gain` without `variant = "feedback"`.
    pub fn from_params(params: &Params) -> Result<Self, PolicyError> {
        let cap = params.f64("cap")?.unwrap_or(DEFAULT_CAP);
        if !(cap > 0.0 && cap <= 1.0) {
            return Err(param_err("cap", format!("must be in (0, 1], found {cap}")));
        }
        let gain = params.f64("gain")?;
        let variant = match params.str("variant")?.unwrap_or("basic") {
            "basic" => Variant::Basic,
            "catch-up" => Variant::CatchUp,
            "feedback" => {
                let gain = gain.unwrap_or(DEFAULT_GAIN);
                if !(gain > 0.0 && gain <= 1.0) {
                    return Err(param_err(
                        "gain",
                        format!("must be in (0, 1], found {gain}"),
                    ));
                }
                Variant::Feedback { gain }
            }
            other => {
                return Err(param_err(
                    "variant",
                    format!("unknown variant `{other}`; expected basic, catch-up or feedback"),
                ))
            }
        };
        if gain.is_some() && !matches!(variant, Variant::Feedback { .. }) {
            return Err(param_err(
                "gain",
                "only applies with variant = \"feedback\"",
            ));
        }
        Ok(RezConfig { cap, variant })
    }
}

/// A reservation: `amount` of CPU time every `period`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reservation {
    /// CPU time per period; positive, at most `period`.
    pub amount: Duration,
    /// The period; positive.
    pub period: Duration,
}

impl Reservation {
    /// Reads and checks `amount` and `period`.
    ///
    /// # Errors
    /// Either is missing, not a duration, zero, or `amount > period`.
    pub fn from_params(params: &Params) -> Result<Self, PolicyError> {
        let amount = params.require_duration("amount")?;
        let period = params.require_duration("period")?;
        if period == Duration::ZERO {
            return Err(param_err("period", "must be positive"));
        }
        if amount == Duration::ZERO {
            return Err(param_err("amount", "must be positive"));
        }
        if amount > period {
            return Err(param_err(
                "amount",
                format!("{amount} is longer than the period {period}"),
            ));
        }
        Ok(Reservation { amount, period })
    }

    /// amount / period.
    pub fn utilization(self) -> f64 {
        util(self.amount, self.period)
    }
}

fn util(amount: Duration, period: Duration) -> f64 {
    amount.as_nanos() as f64 / period.as_nanos() as f64
}

/// Per-child state.
#[derive(Clone, Debug)]
struct Child {
    /// Budget, period grid and queue state; `slot.amount` is the amount
    /// each period is replenished with (`C`; equals `res.amount` except
    /// under Rez-FB), `slot.deadline` the end of the current period, the
    /// EDF deadline.
    slot: Slot,
    /// The reservation asked for (`R` and the period).
    res: Reservation,
    /// An accepted change, applied at the next period start.
    pending: Option<Reservation>,
    /// Net CPU time received at the start of this period (Rez-FB's `P`;
    /// kept under Rez-FB only).
    recv_at_period: Duration,
    /// What this child adds to `Rez::load` now.
    counted: u128,
}

impl Child {
    /// Utilization admission control counts for this child: the larger of
    /// the current and any pending reservation (and, under Rez-FB, of the
    /// requested and corrected amounts).
    fn committed(&self) -> u128 {
        let now = util_fp(self.slot.amount.max(self.res.amount), self.res.period);
        self.pending
            .map_or(now, |p| now.max(util_fp(p.amount, p.period)))
    }
}

/// Rez's side of the budget dispatcher: EDF order, the variants' period
/// ends, and the admission load kept up to date when a period start
/// changes a reservation.
#[derive(Debug)]
struct Edf {
    cfg: RezConfig,
    /// Sum of the children's `counted` utilizations.
    load: u128,
    /// `cap` in the same fixed point.
    cap: u128,
    /// Children counted in `load`.
    children: u128,
}

impl Edf {
    /// Whether `load`, the sum of `children` utilizations, is admitted:
    /// each was rounded up by less than a unit (see the module docs).
    fn fits(&self, load: u128, children: u128) -> bool {
        load <= self.cap + children
    }
}

impl Rules for Edf {
    type Child = Child;
    type Key = Instant;

    fn slot(c: &Child) -> &Slot {
        &c.slot
    }

    fn slot_mut(c: &mut Child) -> &mut Slot {
        &mut c.slot
    }

    fn key(c: &Child) -> Instant {
        c.slot.deadline
    }

    fn first_period(&mut self, ctx: &Ctx<'_>, vp: VpId, c: &mut Child) -> Duration {
        if let Some(p) = c.pending.take() {
            c.res = p;
            c.slot.amount = p.amount;
            self.recount(c);
        }
        if self.feedback() {
            c.recv_at_period = ctx.vp_received(vp);
        }
        c.res.period
    }

    /// Rez-FB correction, then the pending change.
    fn end_period(
        &mut self,
        ctx: &Ctx<'_>,
        vp: VpId,
        c: &mut Child,
        runnable: bool,
        notes: &mut Vec<PolicyEvent>,
    ) -> Duration {
        if let Variant::Feedback { gain } = self.cfg.variant {
            if c.slot.exhausted || runnable {
                let received = ctx.vp_received(vp) - c.recv_at_period;
                let error = c.res.amount.as_nanos() as f64 - received.as_nanos() as f64;
                let wanted = (c.slot.amount.as_nanos() as f64 + gain * error)
                    .clamp(0.0, c.res.period.as_nanos() as f64);
                let mut next = Duration::from_nanos(wanted.round() as u64);
                // The largest amount admission control allows, and never
                // less than what is already admitted.
                let others = self.load - c.counted;
                let room_fp = (self.cap + self.children).saturating_sub(others);
                let room = (room_fp * c.res.period.as_nanos() as u128 / UTIL_ONE) as u64;
                let room = Duration::from_nanos(room).max(c.slot.amount.max(c.res.amount));
                if next > room {
                    if ctx.tracing() {
                        let load = fp_to_f64(others + util_fp(next, c.res.period));
                        notes.push(PolicyEvent::Note(format!(
                            "rez-fb: {vp} would need {next} per {} to make up for stolen time, loading the \
                             scheduler to {:.1}% over its cap of {:.1}%; amount held at {room}",
                            c.res.period,
                            load * 100.0,
                            self.cfg.cap * 100.0
                        )));
                    }
                    next = room;
                }
                c.slot.amount = next;
            } else if c.slot.amount > c.res.amount {
                // The child blocked with budget left: the correction was
                // larger than this period needed. Give back a fraction of
                // what went unused, never below the reserved amount, so a
                // correction made during a burst of stolen time decays
                // after it (the fixed point is R plus the time stolen from
                // a job of length R).
                let unused = c.slot.budget.as_nanos() as f64;
                let lower = Duration::from_nanos((gain * unused).round() as u64);
                c.slot.amount = c.slot.amount.saturating_sub(lower).max(c.res.amount);
            }
        }
        if let Some(p) = c.pending.take() {
            c.res = p;
            c.slot.amount = p.amount;
            self.recount(c);
        } else if self.feedback() {
            self.recount(c);
        }
        c.res.period
    }

    fn start_period(
        &mut self,
        ctx: &Ctx<'_>,
        vp: VpId,
        c: &mut Child,
        _skipped: u64,
        _period: Duration,
    ) {
        if self.feedback() {
            c.recv_at_period = ctx.vp_received(vp);
        }
    }

    /// EDF meets every deadline while no child asks for more than
    /// amount/period of the time left before its deadline (the revised
    /// wake-up rule of the constant bandwidth server).
    fn on_rate(s: &Slot, left: Duration) -> Duration {
        s.amount.mul_div(left.as_nanos(), s.period.as_nanos())
    }
}

impl Edf {
    /// Whether this is Rez-FB, the only variant that reads `recv_at_period`.
    #[inline]
    fn feedback(&self) -> bool {
        matches!(self.cfg.variant, Variant::Feedback { .. })
    }

    /// Brings `load` up to date after a change of a child's reservation
    /// or of its corrected amount. Only a pending change or Rez-FB's
    /// correction changes them at a period start, so the other period
    /// starts skip this (its division included).
    fn recount(&mut self, c: &mut Child) {
        let now = c.committed();
        self.load = self.load - c.counted + now;
        c.counted = now;
    }
}

/// A Rez instance. See the module documentation.
#[derive(Debug)]
pub struct Rez {
    core: Budgets<Edf>,
}

impl Rez {
    /// A Rez instance with this configuration.
    pub fn new(cfg: RezConfig) -> Self {
        let charging = match cfg.variant {
            Variant::CatchUp => Charging::Received {
                min_slice: CATCH_UP_GRANULARITY,
            },
            Variant::Basic | Variant::Feedback { .. } => Charging::Granted,
        };
        let rules = Edf {
            cfg,
            load: 0,
            cap: cap_fp(cfg.cap),
            children: 0,
        };
        Rez {
            core: Budgets::new(rules, charging),
        }
    }

    /// How much more than their reservations in force from the next
    /// period start on the children (but `except`) count for now: pending
    /// decreases and Rez-FB corrections (see `Child::committed`).
    fn held(&self, except: Option<VpId>) -> u128 {
        self.core
            .children
            .iter()
            .filter(|(vp, _)| Some(*vp) != except)
            .map(|(_, c)| {
                let next = c.pending.unwrap_or(c.res);
                c.counted - util_fp(next.amount, next.period).min(c.counted)
            })
            .sum()
    }

    /// A Rez instance from instance parameters (see [`RezConfig::from_params`]).
    ///
    /// # Errors
    /// As [`RezConfig::from_params`].
    pub fn from_params(params: &Params) -> Result<Self, PolicyError> {
        Ok(Rez::new(RezConfig::from_params(params)?))
    }

    /// The configuration.
    pub fn config(&self) -> RezConfig {
        self.core.rules.cfg
    }

    /// The utilization admission control counts now.
    pub fn load(&self) -> f64 {
        fp_to_f64(self.core.rules.load)
    }

    fn parse_change(
        ctx: &Ctx<'_>,
        vp: VpId,
        change: &Params,
    ) -> Result<(Params, Reservation), PolicyError> {
        let known = ["amount", "period"];
        if let Some(k) = change.unknown_keys(&known).next() {
            return Err(PolicyError::Unsupported(format!(
                "a reservation change has no parameter `{k}`; it accepts: amount, period"
            )));
        }
        let merged = crate::registry::merge_change(ctx.vp_params(vp), change);
        let res = Reservation::from_params(&merged)?;
        Ok((merged, res))
    }
}

impl Policy for Rez {
    fn policy_name(&self) -> &'static str {
        "rez"
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
        let res = Reservation::from_params(params)?;
        let counted = util_fp(res.amount, res.period);
        let rules = &mut self.core.rules;
        if !rules.fits(rules.load + counted, rules.children + 1) {
            return Err(PolicyError::AdmissionRefused {
                load: fp_to_f64(rules.load + counted),
                cap: rules.cfg.cap,
                held: fp_to_f64(self.held(None)),
            });
        }
        rules.load += counted;
        rules.children += 1;
        let mut slot = self.core.new_slot();
        slot.amount = res.amount;
        let child = Child {
            slot,
            res,
            pending: None,
            recv_at_period: Duration::ZERO,
            counted,
        };
        self.core.children.insert(ctx, vp, child);
        Ok(())
    }

    fn unregister_vp(&mut self, ctx: &mut Ctx<'_>, vp: VpId) {
        if let Some(c) = self.core.unregister(ctx, vp) {
            self.core.rules.load -= c.counted;
            self.core.rules.children -= 1;
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
        let Msg::SetParams(change) = msg else {
            return Err(PolicyError::Unsupported(format!(
                "rez accepts reservation changes (SetParams), not {msg:?}"
            )));
        };
        let Some(c) = self.core.children.get(ctx, vp) else {
            return Err(PolicyError::Refused(format!(
                "{vp} is not a child of this scheduler"
            )));
        };
        let (merged, res) = Self::parse_change(ctx, vp, change)?;
        let rules = &self.core.rules;
        let others = rules.load - c.counted;
        let new = util_fp(res.amount, res.period);
        // Until the change applies, the child counts with the larger of
        // its current and new reservations.
        let mine = util_fp(c.slot.amount.max(c.res.amount), c.res.period).max(new);
        if !rules.fits(others + mine, rules.children) {
            return Err(PolicyError::AdmissionRefused {
                load: fp_to_f64(others + mine),
                cap: rules.cfg.cap,
                held: fp_to_f64(self.held(Some(vp)) + (mine - new)),
            });
        }
        if let Some(c) = self.core.children.get_mut(ctx, vp) {
            if c.slot.started {
                c.pending = Some(res);
            } else {
                c.res = res;
                c.slot.amount = res.amount;
            }
            self.core.rules.recount(c);
        }
        ctx.set_vp_params(vp, merged);
        Ok(())
    }

    fn timer(&mut self, ctx: &mut Ctx<'_>) {
        self.core.catch_up(ctx);
        self.core.due_events(ctx);
        self.core.settle(ctx);
    }

    fn check_invariants(&self, ctx: &Ctx<'_>) -> Result<(), String> {
        let core = &self.core;
        if let Some(vp) = core.running() {
            let cpu = core
                .cpu()
                .ok_or_else(|| format!("{vp} runs but Rez holds no processor"))?;
            if ctx.vp_cpu(vp) != Some(cpu) {
                return Err(format!(
                    "thinks {vp} runs on {cpu} but it is {:?}",
                    ctx.vp_state(vp)
                ));
            }
        }
        if let Some(cpu) = core.cpu() {
            if core.running().is_none() {
                return Err(format!("holds {cpu} without running a child"));
            }
            if !ctx.parent_vps().iter().any(|&p| ctx.vp_cpu(p) == Some(cpu)) {
                return Err(format!(
                    "thinks it holds {cpu} but its parent VP does not run there"
                ));
            }
        }
        for (key, vp) in core.eligible() {
            let c = core
                .children
                .get(ctx, vp)
                .ok_or_else(|| format!("eligible {vp} is not a child"))?;
            if !c.slot.eligible
                || Budgets::<Edf>::key_of(c) != key
                || c.slot.budget == Duration::ZERO
            {
                return Err(format!("eligible entry of {vp} is stale"));
            }
            if ctx.vp_state(vp) != VpState::Ready {
                return Err(format!(
                    "eligible {vp} is {:?}, not ready",
                    ctx.vp_state(vp)
                ));
            }
        }
        core.check_events()?;
        let rules = &core.rules;
        let sum: u128 = core.children.iter().map(|(_, c)| c.counted).sum();
        if sum != rules.load {
            return Err(format!(
                "load is {} but the children add up to {sum}",
                rules.load
            ));
        }
        if rules.children != core.children.iter().count() as u128 {
            return Err(format!("counts {} children", rules.children));
        }
        if !rules.fits(rules.load, rules.children) {
            return Err(format!(
                "load {:.4} is over the cap {}",
                self.load(),
                rules.cfg.cap
            ));
        }
        for (vp, c) in core.children.iter() {
            if c.counted != c.committed() {
                return Err(format!("{vp} is counted with a stale utilization"));
            }
            if c.slot.budget > c.res.period.max(c.slot.amount) {
                return Err(format!(
                    "{vp} has a budget of {} above its period",
                    c.slot.budget
                ));
            }
            if c.slot.eligible && !core.is_queued(Budgets::<Edf>::key_of(c)) {
                return Err(format!("{vp} is marked eligible but is not in the queue"));
            }
        }
        Ok(())
    }

    /// The end of the child's current reservation period.
    fn child_deadline(&self, ctx: &Ctx<'_>, vp: VpId) -> Option<Instant> {
        self.core.deadline(ctx, vp)
    }

    fn describe(&self) -> String {
        let cfg = self.core.rules.cfg;
        let mut s = format!(
            "variant={} cap={} load={:.1}%",
            cfg.variant.name(),
            cfg.cap,
            self.load() * 100.0
        );
        if let Variant::Feedback { gain } = cfg.variant {
            s.push_str(&format!(" gain={gain}"));
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The 64-bit path of `util_fp` against the plain 128-bit formula,
    /// around its boundary and at the extremes.
    #[test]
    fn util_fp_matches_the_128_bit_formula() {
        let amounts = [1, 999, 1_000_000, (1 << 32) - 1, 1 << 32, u64::MAX];
        let periods = [0, 1, 3, 20_000_000, (1 << 32) + 7, u64::MAX];
        for &a in &amounts {
            for &p in &periods {
                let plain = (u128::from(a) * UTIL_ONE).div_ceil(u128::from(p.max(1)));
                assert_eq!(
                    util_fp(Duration::from_nanos(a), Duration::from_nanos(p)),
                    plain,
                    "amount {a} period {p}"
                );
            }
        }
        assert_eq!(
            util_fp(Duration::from_millis(1), Duration::from_millis(20)),
            214_748_365
        );
    }
}
