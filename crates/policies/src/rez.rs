//! `rez`: basic, hard CPU reservations (seed 000 §9.3.2), with the two
//! augmented variants of seed 000 chapter 11, Rez-C (§11.5.2) and Rez-FB
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
//! Replenishments and the running child's budget exhaustion are driven by
//! the single instance timer, armed at the earliest pending event.
//! Replenishments sit in a binary heap ordered by (time, sequence number)
//! and eligible children in an ordered map keyed by (deadline, registration
//! order), so every event costs O(log n). Ties between equal deadlines go
//! to the child registered first; the running child is only preempted by a
//! strictly earlier deadline.
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
//! # Guarantees (seed 000 Table 5.1, §5.3.1.5)
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

use crate::registry::PolicyInfo;
use hsched_core::{
    CpuId, Ctx, Duration, Instant, Msg, ParamError, ParamSpec, Params, Policy, PolicyError,
    PolicyEvent, RevokeReason, Side, VpId, VpState, VpTable,
};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};

/// Registry entry.
pub const INFO: PolicyInfo = PolicyInfo {
    name: "rez",
    summary: "basic, hard CPU reservations: EDF over per-period budgets with admission control \
              (variants catch-up = Rez-C and feedback = Rez-FB cope with stolen time)",
    seed: "000 §9.3.2, §5.3.1.5, ch. 11 (§11.4, §11.5.2, §11.5.3)",
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
    min_parents: 1,
    max_parents: 1,
    build,
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
const UTIL_ONE: u128 = 1 << 32;

fn util_fp(amount: Duration, period: Duration) -> u128 {
    (amount.as_nanos() as u128 * UTIL_ONE).div_ceil(period.as_nanos().max(1) as u128)
}

fn fp_to_f64(u: u128) -> f64 {
    u as f64 / UTIL_ONE as f64
}

fn param_err(key: &str, message: impl Into<String>) -> PolicyError {
    PolicyError::Param(ParamError {
        key: key.to_string(),
        message: message.into(),
    })
}

/// How Rez charges budgets and sizes reservations (seed 000 ch. 11).
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
    /// Registration order, the EDF tie-break.
    order: u64,
    /// The reservation asked for (`R` and the period).
    res: Reservation,
    /// An accepted change, applied at the next period start.
    pending: Option<Reservation>,
    /// The amount each period is replenished with (`C`; equals
    /// `res.amount` except under Rez-FB).
    amount: Duration,
    /// Budget left in the current period.
    budget: Duration,
    /// Whether the period grid has started (first request seen).
    started: bool,
    /// End of the current period: the EDF deadline.
    deadline: Instant,
    /// Sequence number of the live replenishment event; 0 when none.
    event: u64,
    /// Whether the child sits in the eligible map.
    eligible: bool,
    /// The budget ran out in this period.
    exhausted: bool,
    /// Net CPU time received at the start of this period (Rez-FB's `P`).
    recv_at_period: Duration,
    /// What this child adds to `Rez::load` now.
    counted: u128,
}

impl Child {
    fn key(&self) -> (Instant, u64) {
        (self.deadline, self.order)
    }

    /// Utilization admission control counts for this child: the larger of
    /// the current and any pending reservation (and, under Rez-FB, of the
    /// requested and corrected amounts).
    fn committed(&self) -> u128 {
        let now = util_fp(self.amount.max(self.res.amount), self.res.period);
        self.pending
            .map_or(now, |p| now.max(util_fp(p.amount, p.period)))
    }
}

/// The child holding Rez's processor.
#[derive(Clone, Copy, Debug)]
struct Running {
    vp: VpId,
    /// When its budget was last charged.
    mark_at: Instant,
    /// Its net received time when last charged.
    mark_recv: Duration,
}

/// A Rez instance. See the module documentation.
#[derive(Debug)]
pub struct Rez {
    cfg: RezConfig,
    children: VpTable<Child>,
    /// Eligible children (ready, budget left, not running) by (deadline, order).
    eligible: BTreeMap<(Instant, u64), VpId>,
    /// Replenishment events (time, sequence, child); stale entries are
    /// recognised by their sequence number.
    events: BinaryHeap<Reverse<(Instant, u64, VpId)>>,
    next_seq: u64,
    next_order: u64,
    /// Sum of the children's `counted` utilizations.
    load: u128,
    /// `cap` in the same fixed point.
    cap: u128,
    /// The processor granted by the parent, while Rez holds it.
    cpu: Option<CpuId>,
    running: Option<Running>,
}

impl Rez {
    /// A Rez instance with this configuration.
    pub fn new(cfg: RezConfig) -> Self {
        Rez {
            cfg,
            children: VpTable::new(Side::Child),
            eligible: BTreeMap::new(),
            events: BinaryHeap::new(),
            next_seq: 1,
            next_order: 0,
            load: 0,
            cap: (cfg.cap * UTIL_ONE as f64).floor() as u128,
            cpu: None,
            running: None,
        }
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
        self.cfg
    }

    /// The utilization admission control counts now.
    pub fn load(&self) -> f64 {
        fp_to_f64(self.load)
    }

    /// Brings `load` up to date after a change of `vp`'s reservation.
    fn recount(&mut self, ctx: &Ctx<'_>, vp: VpId) {
        if let Some(c) = self.children.get_mut(ctx, vp) {
            let now = c.committed();
            self.load = self.load - c.counted + now;
            c.counted = now;
        }
    }

    fn child<'c>(&'c self, ctx: &Ctx<'_>, vp: VpId) -> Option<&'c Child> {
        self.children.get(ctx, vp)
    }

    /// Charges the running child for the time since its last charge.
    fn charge(&mut self, ctx: &Ctx<'_>) {
        let Some(r) = self.running.as_mut() else {
            return;
        };
        let now = ctx.now();
        let recv = ctx.vp_received(r.vp);
        let used = match self.cfg.variant {
            Variant::CatchUp => recv - r.mark_recv,
            Variant::Basic | Variant::Feedback { .. } => now.saturating_since(r.mark_at),
        };
        r.mark_at = now;
        r.mark_recv = recv;
        let vp = r.vp;
        if let Some(c) = self.children.get_mut(ctx, vp) {
            c.budget -= used;
        }
    }

    fn push_event(&mut self, ctx: &Ctx<'_>, vp: VpId) {
        let seq = self.next_seq;
        self.next_seq += 1;
        let Some(c) = self.children.get_mut(ctx, vp) else {
            return;
        };
        c.event = seq;
        self.events.push(Reverse((c.deadline, seq, vp)));
        // Stale entries are dropped lazily; rebuild when they dominate.
        if self.events.len() > 2 * self.children.len() + 32 {
            let children = &self.children;
            self.events
                .retain(|Reverse((_, s, v))| children.get(ctx, *v).is_some_and(|c| c.event == *s));
        }
    }

    fn event_live(&self, ctx: &Ctx<'_>, seq: u64, vp: VpId) -> bool {
        self.child(ctx, vp).is_some_and(|c| c.event == seq)
    }

    fn add_eligible(&mut self, ctx: &Ctx<'_>, vp: VpId) {
        if let Some(c) = self.children.get_mut(ctx, vp) {
            if !c.eligible && c.budget > Duration::ZERO {
                c.eligible = true;
                self.eligible.insert(c.key(), vp);
            }
        }
    }

    fn remove_eligible(&mut self, ctx: &Ctx<'_>, vp: VpId) {
        if let Some(c) = self.children.get_mut(ctx, vp) {
            if c.eligible {
                c.eligible = false;
                self.eligible.remove(&c.key());
            }
        }
    }

    /// Ends the child's current period at `now` (its deadline has passed)
    /// and starts the one containing `now`: Rez-FB correction, pending
    /// change, replenishment. `runnable` says whether the child was ready or
    /// running at the boundary.
    fn roll_period(&mut self, ctx: &mut Ctx<'_>, vp: VpId, runnable: bool) {
        let now = ctx.now();
        let recv = ctx.vp_received(vp);
        let tracing = ctx.tracing();
        let (cap, cap_fp, load) = (self.cfg.cap, self.cap, self.load);
        let Some(c) = self.children.get_mut(ctx, vp) else {
            return;
        };
        let was_eligible = c.eligible;
        if was_eligible {
            c.eligible = false;
            self.eligible.remove(&c.key());
        }
        let mut notes: Vec<PolicyEvent> = Vec::new();
        if tracing && runnable && c.budget > Duration::ZERO {
            notes.push(PolicyEvent::DeadlineMiss { vp });
        }
        if let Variant::Feedback { gain } = self.cfg.variant {
            if c.exhausted || runnable {
                let received = recv - c.recv_at_period;
                let error = c.res.amount.as_nanos() as f64 - received.as_nanos() as f64;
                let wanted = (c.amount.as_nanos() as f64 + gain * error)
                    .clamp(0.0, c.res.period.as_nanos() as f64);
                let mut next = Duration::from_nanos(wanted.round() as u64);
                // The largest amount admission control allows, and never
                // less than what is already admitted.
                let others = load - c.counted;
                let room_fp = cap_fp.saturating_sub(others);
                let room = (room_fp * c.res.period.as_nanos() as u128 / UTIL_ONE) as u64;
                let room = Duration::from_nanos(room).max(c.amount.max(c.res.amount));
                if next > room {
                    if tracing {
                        let load = fp_to_f64(others + util_fp(next, c.res.period));
                        notes.push(PolicyEvent::Note(format!(
                            "rez-fb: {vp} would need {next} per {} to make up for stolen time, loading the \
                             scheduler to {:.1}% over its cap of {:.1}%; amount held at {room}",
                            c.res.period,
                            load * 100.0,
                            cap * 100.0
                        )));
                    }
                    next = room;
                }
                c.amount = next;
            } else if c.amount > c.res.amount {
                // The child blocked with budget left: the correction was
                // larger than this period needed. Give back a fraction of
                // what went unused, never below the reserved amount, so a
                // correction made during a burst of stolen time decays
                // after it (the fixed point is R plus the time stolen from
                // a job of length R).
                let unused = c.budget.as_nanos() as f64;
                let lower = Duration::from_nanos((gain * unused).round() as u64);
                c.amount = c.amount.saturating_sub(lower).max(c.res.amount);
            }
        }
        if let Some(p) = c.pending.take() {
            c.res = p;
            c.amount = p.amount;
        }
        // The new period starts at the old deadline, skipping whole periods
        // that passed while the child waited (or the timer was late).
        let period = c.res.period;
        let mut start = c.deadline;
        if now >= start + period {
            let k = now.saturating_since(start).as_nanos() / period.as_nanos();
            start += Duration::from_nanos(k * period.as_nanos());
        }
        c.deadline = start + period;
        c.budget = c.amount;
        c.exhausted = false;
        c.recv_at_period = recv;
        if tracing {
            notes.push(PolicyEvent::Replenish {
                vp,
                budget: c.amount,
            });
        }
        for e in notes {
            ctx.event(e);
        }
        self.recount(ctx, vp);
    }

    /// Puts a child that just asked for the processor on its period grid.
    fn wake_child(&mut self, ctx: &mut Ctx<'_>, vp: VpId) {
        let now = ctx.now();
        let recv = ctx.vp_received(vp);
        let Some(c) = self.children.get_mut(ctx, vp) else {
            return;
        };
        if !c.started {
            c.started = true;
            if let Some(p) = c.pending.take() {
                c.res = p;
                c.amount = p.amount;
            }
            c.deadline = now + c.res.period;
            c.budget = c.amount;
            c.exhausted = false;
            c.recv_at_period = recv;
            if ctx.tracing() {
                let budget = c.amount;
                ctx.event(PolicyEvent::Replenish { vp, budget });
            }
        } else if now >= c.deadline {
            self.roll_period(ctx, vp, false);
        }
        self.recount(ctx, vp);
        self.push_event(ctx, vp);
        self.add_eligible(ctx, vp);
    }

    /// Processes the replenishments due at or before now.
    fn due_events(&mut self, ctx: &mut Ctx<'_>) {
        let now = ctx.now();
        while let Some(&Reverse((at, seq, vp))) = self.events.peek() {
            if at > now {
                break;
            }
            self.events.pop();
            if !self.event_live(ctx, seq, vp) {
                continue;
            }
            let runnable = ctx.vp_state(vp) != VpState::Waiting;
            self.roll_period(ctx, vp, runnable);
            self.push_event(ctx, vp);
            let running = matches!(self.running, Some(r) if r.vp == vp);
            if runnable && !running {
                self.add_eligible(ctx, vp);
            }
        }
    }

    /// Takes the earliest deadline off the eligible map. An entry whose VP
    /// is no longer ready (it released; the notification is still on its
    /// way) is dropped.
    fn pop_eligible(&mut self, ctx: &Ctx<'_>) -> Option<VpId> {
        loop {
            let (_, vp) = self.eligible.pop_first()?;
            if let Some(c) = self.children.get_mut(ctx, vp) {
                c.eligible = false;
            }
            if ctx.vp_state(vp) == VpState::Ready {
                return Some(vp);
            }
        }
    }

    /// Catches up with what happened while this instance was busy: a
    /// notification for a busy instance is delivered only once its own
    /// actions are applied, so the parent may already have taken the
    /// processor back (revocation not yet delivered) or the running child
    /// may already have released. Run first in every hook, after `charge`
    /// and before any action is queued.
    fn sync(&mut self, ctx: &mut Ctx<'_>) {
        let Some(cpu) = self.cpu else { return };
        if let Some(r) = self.running {
            if ctx.vp_cpu(r.vp) != Some(cpu) {
                // Released: its notification will find it gone.
                self.running = None;
            }
        }
        let parent_ok = ctx
            .parent_vps()
            .first()
            .is_some_and(|&p| ctx.vp_cpu(p) == Some(cpu));
        if !parent_ok {
            self.lose_cpu(ctx, RevokeReason::Preempted);
        }
    }

    /// The parent took the processor: revoke the running child with the
    /// parent's reason.
    fn lose_cpu(&mut self, ctx: &mut Ctx<'_>, reason: RevokeReason) {
        self.cpu = None;
        if let Some(r) = self.running.take() {
            if ctx.vp_cpu(r.vp).is_some() {
                ctx.revoke(r.vp, reason);
                if let Some(c) = self.children.get_mut(ctx, r.vp) {
                    c.exhausted |= c.budget == Duration::ZERO;
                }
                self.add_eligible(ctx, r.vp);
            }
        }
    }

    /// Makes the decisions the protocol requires after any change: revoke
    /// an exhausted or outranked child, give a held processor to the
    /// earliest deadline or release it, adjust the demand on the parent, and
    /// arm the timer.
    fn settle(&mut self, ctx: &mut Ctx<'_>) {
        if let Some(r) = self.running {
            let (budget, key) = match self.child(ctx, r.vp) {
                Some(c) => (c.budget, c.key()),
                None => (Duration::ZERO, (Instant::NEVER, u64::MAX)),
            };
            if budget == Duration::ZERO {
                self.running = None;
                if let Some(c) = self.children.get_mut(ctx, r.vp) {
                    c.exhausted = true;
                }
                ctx.revoke(r.vp, RevokeReason::BudgetExhausted);
                if ctx.tracing() {
                    ctx.event(PolicyEvent::BudgetExhausted { vp: r.vp });
                }
            } else if self
                .eligible
                .first_key_value()
                .is_some_and(|(k, _)| *k < key)
            {
                self.running = None;
                ctx.revoke(r.vp, RevokeReason::Preempted);
                self.add_eligible(ctx, r.vp);
            }
        }
        if self.running.is_none() {
            if let Some(cpu) = self.cpu {
                match self.pop_eligible(ctx) {
                    Some(vp) => {
                        self.running = Some(Running {
                            vp,
                            mark_at: ctx.now(),
                            mark_recv: ctx.vp_received(vp),
                        });
                        ctx.grant(vp, cpu);
                    }
                    None => {
                        self.cpu = None;
                        if let Some(&p) = ctx.parent_vps().first() {
                            ctx.release(p);
                        }
                    }
                }
            }
        }
        let want = usize::from(self.running.is_some() || !self.eligible.is_empty());
        ctx.set_parent_demand(want);
        self.arm(ctx);
    }

    /// Arms the timer at the earliest replenishment or budget exhaustion.
    fn arm(&mut self, ctx: &mut Ctx<'_>) {
        let mut at = Instant::NEVER;
        while let Some(&Reverse((t, seq, vp))) = self.events.peek() {
            if self.event_live(ctx, seq, vp) {
                at = t;
                break;
            }
            self.events.pop();
        }
        if let Some(r) = self.running {
            if let Some(c) = self.child(ctx, r.vp) {
                let slice = match self.cfg.variant {
                    Variant::CatchUp => c.budget.max(CATCH_UP_GRANULARITY),
                    _ => c.budget,
                };
                at = at.min(r.mark_at + slice);
            }
        }
        if ctx.timer() != Some(at) {
            if at == Instant::NEVER {
                ctx.cancel_timer();
            } else {
                ctx.set_timer(at);
            }
        }
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
        let mut merged = ctx.vp_params(vp).clone();
        for (k, v) in change.iter() {
            merged.insert(k, v.clone());
        }
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
        let res = Reservation::from_params(params)?;
        let counted = util_fp(res.amount, res.period);
        if self.load + counted > self.cap {
            return Err(PolicyError::AdmissionRefused {
                load: fp_to_f64(self.load + counted),
                cap: self.cfg.cap,
            });
        }
        self.load += counted;
        let order = self.next_order;
        self.next_order += 1;
        let child = Child {
            order,
            res,
            pending: None,
            amount: res.amount,
            budget: Duration::ZERO,
            started: false,
            deadline: Instant::NEVER,
            event: 0,
            eligible: false,
            exhausted: false,
            recv_at_period: Duration::ZERO,
            counted,
        };
        self.children.insert(ctx, vp, child);
        Ok(())
    }

    fn unregister_vp(&mut self, ctx: &mut Ctx<'_>, vp: VpId) {
        // The VP is waiting, so it is neither eligible nor running; stay
        // safe if a broken caller says otherwise.
        self.remove_eligible(ctx, vp);
        if self.running.is_some_and(|r| r.vp == vp) {
            self.running = None;
        }
        if let Some(c) = self.children.remove(ctx, vp) {
            self.load -= c.counted;
        }
        self.arm(ctx);
    }

    fn request(&mut self, ctx: &mut Ctx<'_>, vp: VpId) {
        self.charge(ctx);
        self.sync(ctx);
        self.due_events(ctx);
        // Stale when the child has released again since.
        if ctx.vp_state(vp) == VpState::Ready {
            self.wake_child(ctx, vp);
        }
        self.settle(ctx);
    }

    fn release(&mut self, ctx: &mut Ctx<'_>, vp: VpId) {
        // A running child that released is found by `sync`.
        self.charge(ctx);
        self.sync(ctx);
        // Stale when the child has asked again since.
        if ctx.vp_state(vp) == VpState::Waiting {
            self.remove_eligible(ctx, vp);
            if let Some(c) = self.children.get_mut(ctx, vp) {
                c.event = 0;
            }
        }
        self.due_events(ctx);
        self.settle(ctx);
    }

    fn grant(&mut self, ctx: &mut Ctx<'_>, parent_vp: VpId, cpu: CpuId) {
        self.charge(ctx);
        self.sync(ctx);
        // Stale when the processor was taken back, or released, since.
        if self.cpu.is_none() && ctx.vp_cpu(parent_vp) == Some(cpu) {
            self.cpu = Some(cpu);
        }
        self.due_events(ctx);
        self.settle(ctx);
    }

    fn revoke(&mut self, ctx: &mut Ctx<'_>, _parent_vp: VpId, reason: RevokeReason) {
        self.charge(ctx);
        // Before `sync`, so the child learns the parent's reason.
        if self.cpu.is_some() {
            self.lose_cpu(ctx, reason);
        }
        self.sync(ctx);
        self.due_events(ctx);
        self.settle(ctx);
    }

    fn msg(&mut self, ctx: &mut Ctx<'_>, vp: VpId, msg: &Msg) -> Result<(), PolicyError> {
        let Msg::SetParams(change) = msg else {
            return Err(PolicyError::Unsupported(format!(
                "rez accepts reservation changes (SetParams), not {msg:?}"
            )));
        };
        let Some(c) = self.child(ctx, vp) else {
            return Err(PolicyError::Refused(format!(
                "{vp} is not a child of this scheduler"
            )));
        };
        let (merged, res) = Self::parse_change(ctx, vp, change)?;
        let others = self.load - c.counted;
        let new = util_fp(res.amount, res.period);
        // Until the change applies, the child counts with the larger of
        // its current and new reservations.
        let mine = util_fp(c.amount.max(c.res.amount), c.res.period).max(new);
        if others + mine > self.cap {
            return Err(PolicyError::AdmissionRefused {
                load: fp_to_f64(others + new),
                cap: self.cfg.cap,
            });
        }
        if let Some(c) = self.children.get_mut(ctx, vp) {
            if c.started {
                c.pending = Some(res);
            } else {
                c.res = res;
                c.amount = res.amount;
            }
        }
        self.recount(ctx, vp);
        ctx.set_vp_params(vp, merged);
        Ok(())
    }

    fn timer(&mut self, ctx: &mut Ctx<'_>) {
        self.charge(ctx);
        self.sync(ctx);
        self.due_events(ctx);
        self.settle(ctx);
    }

    fn check_invariants(&self, ctx: &Ctx<'_>) -> Result<(), String> {
        if let Some(r) = self.running {
            let cpu = self
                .cpu
                .ok_or_else(|| format!("{} runs but Rez holds no processor", r.vp))?;
            if ctx.vp_cpu(r.vp) != Some(cpu) {
                return Err(format!(
                    "thinks {} runs on {cpu} but it is {:?}",
                    r.vp,
                    ctx.vp_state(r.vp)
                ));
            }
        }
        if let Some(cpu) = self.cpu {
            if self.running.is_none() {
                return Err(format!("holds {cpu} without running a child"));
            }
            if !ctx.parent_vps().iter().any(|&p| ctx.vp_cpu(p) == Some(cpu)) {
                return Err(format!(
                    "thinks it holds {cpu} but its parent VP does not run there"
                ));
            }
        }
        for (&key, &vp) in &self.eligible {
            let c = self
                .child(ctx, vp)
                .ok_or_else(|| format!("eligible {vp} is not a child"))?;
            if !c.eligible || c.key() != key || c.budget == Duration::ZERO {
                return Err(format!("eligible entry of {vp} is stale"));
            }
            if ctx.vp_state(vp) != VpState::Ready {
                return Err(format!(
                    "eligible {vp} is {:?}, not ready",
                    ctx.vp_state(vp)
                ));
            }
        }
        let sum: u128 = self.children.iter().map(|(_, c)| c.counted).sum();
        if sum != self.load {
            return Err(format!(
                "load is {} but the children add up to {sum}",
                self.load
            ));
        }
        if self.load > self.cap {
            return Err(format!(
                "load {:.4} is over the cap {}",
                self.load(),
                self.cfg.cap
            ));
        }
        for (vp, c) in self.children.iter() {
            if c.counted != c.committed() {
                return Err(format!("{vp} is counted with a stale utilization"));
            }
            if c.budget > c.res.period.max(c.amount) {
                return Err(format!(
                    "{vp} has a budget of {} above its period",
                    c.budget
                ));
            }
            if c.eligible && !self.eligible.contains_key(&c.key()) {
                return Err(format!("{vp} is marked eligible but is not in the queue"));
            }
        }
        Ok(())
    }

    fn describe(&self) -> String {
        let mut s = format!(
            "variant={} cap={} load={:.1}%",
            self.cfg.variant.name(),
            self.cfg.cap,
            self.load() * 100.0
        );
        if let Variant::Feedback { gain } = self.cfg.variant {
            s.push_str(&format!(" gain={gain}"));
        }
        s
    }
}
