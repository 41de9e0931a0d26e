//! # Limit (`limit`)
//!
//! Caps its single child at `amount` of CPU time per `period`: Regehr 2001,
//! §5.3.1.3, which turns a soft basic reservation into a hard one
//! (`RESBS ↦ RESBH`).
//!
//! ## Algorithm
//! Like a reservation scheduler, Limit keeps a budget for its child. The
//! budget is `amount` at the start of each period and is charged with the
//! CPU time the child receives, read from [`Ctx::vp_received`] on the
//! child's VP (net of stolen time, Regehr 2001, ch. 11: time stolen by
//! interrupts is not charged to the child). Limit asks its parent for a
//! processor only while the child is ready *and* has budget; it passes a
//! granted processor on to the child only then. Its timer fires when the
//! running child's budget would run out (now + budget); if stolen time
//! means the budget is not used up yet, the timer is simply re-armed for the
//! rest. At exhaustion Limit revokes the processor from the child with
//! [`RevokeReason::BudgetExhausted`] (so a Join below can tell it from a
//! preemption, §6.2.2), releases its parent VP, and asks again at the start
//! of the next period, when the budget is replenished (§5.3.1.3: "it
//! releases the processor and does not request it again until the start of
//! the next period").
//!
//! Periods are aligned to the instance's creation: they start at
//! `created + n·period`. A replenishment that falls while the child is
//! blocked is applied when the child next wakes (the result is the same).
//! When the parent revokes the processor, the child loses it with the
//! parent's reason and Limit keeps asking while budget is left.
//!
//! Limit is a uniprocessor scheduler: it registers one VP with its parent
//! and offers its child one processor; the child is a single VP (a thread,
//! or an instance that registers one VP here).
//!
//! ## Parameters
//! | side | key | kind | default | meaning |
//! |---|---|---|---|---|
//! | instance | `amount` | duration | required | CPU time per period, `0 < amount ≤ period` |
//! | instance | `period` | duration | required | length of a period, `> 0` |
//!
//! `Msg::SetParams { amount, period }` about the child changes the cap at
//! run time: the current period keeps its end and is charged as if the new
//! amount had applied since it began; later periods use the new length.
//!
//! ## Guarantees (Table 5.1)
//! `RESBS x y ↦ RESBH x y`: given a soft basic reservation of `amount` per
//! `period` whose periods line up with Limit's, the child receives exactly
//! that reservation, and never more.

use crate::fp::{param_err, Parents, Run};
use crate::registry::{check_child_params, PolicyInfo};
use hsched_core::{
    CpuId, Ctx, Duration, Instant, Msg, ParamSpec, Params, Policy, PolicyError, PolicyEvent,
    RevokeReason, VpId, VpState,
};

/// Registry entry.
pub const INFO: PolicyInfo = PolicyInfo {
    name: "limit",
    summary: "caps its single child at amount per period (soft reservation to hard)",
    source: "Regehr 2001, §5.3.1.3",
    instance_params: &[
        ParamSpec {
            key: "amount",
            kind: "duration",
            default: "required",
            doc: "CPU time per period, 0 < amount <= period",
        },
        ParamSpec {
            key: "period",
            kind: "duration",
            default: "required",
            doc: "length of a period",
        },
    ],
    child_params: &[],
    change_params: &[
        ParamSpec {
            key: "amount",
            kind: "duration",
            default: "unchanged",
            doc: "the instance's amount; the current period is charged as if it had applied since the period began",
        },
        ParamSpec {
            key: "period",
            kind: "duration",
            default: "unchanged",
            doc: "the instance's period, from the next period on",
        },
    ],
    max_children: Some(1),
    min_parents: 1,
    max_parents: 1,
    build,
    check_child: crate::registry::no_child_check,
    exclusive: None,
    admission: None,
    merge_change: crate::registry::merge_change,
};

fn build(params: &Params) -> Result<Box<dyn Policy>, PolicyError> {
    Ok(Box::new(Limit::from_params(params)?))
}

/// Reads and checks `amount` and `period`, each falling back to `current`.
fn cap(
    params: &Params,
    current: Option<(Duration, Duration)>,
) -> Result<(Duration, Duration), PolicyError> {
    let amount = match (params.duration("amount")?, current) {
        (Some(a), _) => a,
        (None, Some((a, _))) => a,
        (None, None) => {
            return Err(param_err(
                "amount",
                "is required (a duration such as \"10ms\")",
            ))
        }
    };
    let period = match (params.duration("period")?, current) {
        (Some(p), _) => p,
        (None, Some((_, p))) => p,
        (None, None) => {
            return Err(param_err(
                "period",
                "is required (a duration such as \"33ms\")",
            ))
        }
    };
    if period == Duration::ZERO {
        return Err(param_err("period", "must be longer than zero"));
    }
    if amount == Duration::ZERO {
        return Err(param_err(
            "amount",
            "must be longer than zero (a zero cap would never run the child)",
        ));
    }
    if amount > period {
        return Err(param_err(
            "amount",
            format!("{amount} is more than the period {period}"),
        ));
    }
    Ok((amount, period))
}

/// The limit scheduler.
#[derive(Debug)]
pub struct Limit {
    amount: Duration,
    period: Duration,
    parents: Parents,
    child: Option<VpId>,
    run: Run,
    /// Budget left in the current period.
    budget: Duration,
    /// End of the current period; `NEVER` before `init`.
    period_end: Instant,
    /// The child's received time when last charged.
    mark: Duration,
}

impl Limit {
    /// An instance from its `[[scheduler]]` parameters.
    ///
    /// # Errors
    /// `amount` or `period` missing, not a duration, zero, or
    /// `amount > period`.
    pub fn from_params(params: &Params) -> Result<Self, PolicyError> {
        let (amount, period) = cap(params, None)?;
        Ok(Limit {
            amount,
            period,
            parents: Parents::default(),
            child: None,
            run: Run::Waiting,
            budget: amount,
            period_end: Instant::NEVER,
            mark: Duration::ZERO,
        })
    }

    /// Budget left in the current period, as of the last notification.
    pub fn budget(&self) -> Duration {
        self.budget
    }

    /// Charges the running child for the time since it was last charged.
    fn charge(&mut self, ctx: &Ctx<'_>) {
        if let (Some(vp), Run::Running(_)) = (self.child, self.run) {
            let r = ctx.vp_received(vp);
            self.budget -= r - self.mark;
            self.mark = r;
        }
    }

    /// Starts the periods that began since the last look.
    fn roll(&mut self, ctx: &mut Ctx<'_>) {
        let now = ctx.now();
        if self.period_end == Instant::NEVER {
            self.period_end = now + self.period;
        }
        if now >= self.period_end {
            let behind =
                now.saturating_since(self.period_end).as_nanos() / self.period.as_nanos() + 1;
            self.period_end += Duration::from_nanos(self.period.as_nanos().saturating_mul(behind));
            self.budget = self.amount;
            if let (Some(vp), true) = (self.child, ctx.tracing()) {
                ctx.event(PolicyEvent::Replenish {
                    vp,
                    budget: self.amount,
                });
            }
        }
    }

    /// Charges, replenishes, then makes the child, the parent VP and the
    /// timer agree with the budget. Actions go out in the order of
    /// `crate::fp` (revoke, release, grant, request). `quiet` (in the revoke
    /// hook) keeps the parent VP asking even with no budget left, so the
    /// parent's own plan stays valid; the timer, armed for now, releases it.
    fn update(&mut self, ctx: &mut Ctx<'_>, quiet: bool) {
        self.parents.ensure(ctx);
        self.charge(ctx);
        self.roll(ctx);
        // A notification about the child is still to come: leave it alone.
        let busy = self
            .child
            .is_some_and(|vp| Run::of(ctx.vp_state(vp)) != self.run);
        if let (Some(vp), Run::Running(_), false) = (self.child, self.run, busy) {
            if self.budget == Duration::ZERO {
                self.run = Run::Ready;
                ctx.revoke(vp, RevokeReason::BudgetExhausted);
                if ctx.tracing() {
                    ctx.event(PolicyEvent::BudgetExhausted { vp });
                }
            }
        }
        let wants = self.child.is_some() && self.run == Run::Ready && self.budget > Duration::ZERO;
        let grant = match (wants && !busy, self.child) {
            (true, Some(vp)) => self.parents.held().next().map(|(_, cpu)| (vp, cpu)),
            _ => None,
        };
        if let Some((vp, cpu)) = grant {
            self.run = Run::Running(cpu);
            self.mark = ctx.vp_received(vp);
        }
        let asking = wants && grant.is_none();
        let run = self.run;
        if !quiet {
            self.parents.ask_at_most(ctx, asking as usize);
        }
        self.parents.release_idle(ctx, |c| run == Run::Running(c));
        if let Some((vp, cpu)) = grant {
            ctx.grant(vp, cpu);
        }
        self.parents.ask_at_least(ctx, asking as usize);
        self.arm(ctx, quiet && self.parents.asking() > asking as usize);
    }

    /// Arms the timer for exhaustion or replenishment; `now` when a
    /// deferred release is due.
    fn arm(&mut self, ctx: &mut Ctx<'_>, release_due: bool) {
        let at = match self.run {
            _ if release_due => ctx.now(),
            Run::Running(_) => self.period_end.min(ctx.now() + self.budget),
            Run::Ready if self.budget == Duration::ZERO => self.period_end,
            _ => Instant::NEVER,
        };
        if at == Instant::NEVER {
            ctx.cancel_timer();
        } else if ctx.timer() != Some(at) {
            ctx.set_timer(at);
        }
    }
}

impl Policy for Limit {
    fn policy_name(&self) -> &'static str {
        "limit"
    }

    fn parent_vps(&self, available: usize) -> usize {
        available.min(1)
    }

    fn init(&mut self, ctx: &mut Ctx<'_>) {
        self.parents.init(ctx);
        self.period_end = ctx.now() + self.period;
        self.budget = self.amount;
    }

    fn register_vp(
        &mut self,
        _ctx: &mut Ctx<'_>,
        vp: VpId,
        params: &Params,
    ) -> Result<(), PolicyError> {
        check_child_params(&INFO, params)?;
        if let Some(other) = self.child {
            return Err(PolicyError::Refused(format!(
                "a limit scheduler has a single child, and {other} is it"
            )));
        }
        self.child = Some(vp);
        self.run = Run::Waiting;
        Ok(())
    }

    fn unregister_vp(&mut self, _ctx: &mut Ctx<'_>, vp: VpId) {
        if self.child == Some(vp) {
            self.child = None;
            self.run = Run::Waiting;
        }
    }

    fn request(&mut self, ctx: &mut Ctx<'_>, vp: VpId) {
        // A request withdrawn since (its release follows) is ignored.
        if self.child == Some(vp) && ctx.vp_state(vp) == VpState::Ready {
            self.run = Run::Ready;
        }
        self.update(ctx, false);
    }

    fn release(&mut self, ctx: &mut Ctx<'_>, vp: VpId) {
        if self.child == Some(vp) {
            self.charge(ctx);
            self.run = Run::Waiting;
        }
        self.update(ctx, false);
    }

    fn grant(&mut self, ctx: &mut Ctx<'_>, parent_vp: VpId, cpu: CpuId) {
        if self.parents.on_grant(ctx, parent_vp, cpu).is_some() {
            self.update(ctx, false);
        }
    }

    fn revoke(&mut self, ctx: &mut Ctx<'_>, parent_vp: VpId, reason: RevokeReason) {
        if let Some((_, cpu)) = self.parents.on_revoke(ctx, parent_vp) {
            let on_cpu =
                |vp| self.run == Run::Running(cpu) && ctx.vp_state(vp) == VpState::Running(cpu);
            if let Some(vp) = self.child.filter(|&vp| on_cpu(vp)) {
                self.charge(ctx);
                self.run = Run::Ready;
                ctx.revoke(vp, reason);
            }
        }
        self.update(ctx, true);
    }

    fn timer(&mut self, ctx: &mut Ctx<'_>) {
        self.update(ctx, false);
    }

    fn msg(&mut self, ctx: &mut Ctx<'_>, vp: VpId, msg: &Msg) -> Result<(), PolicyError> {
        let Msg::SetParams(params) = msg else {
            return Err(PolicyError::Unsupported(format!(
                "limit accepts only SetParams {{ amount, period }}, not {msg:?}"
            )));
        };
        if self.child != Some(vp) {
            return Err(PolicyError::Refused(format!(
                "{vp} is not the child of this limit scheduler"
            )));
        }
        if let Some(k) = params.unknown_keys(&["amount", "period"]).next() {
            return Err(PolicyError::Unsupported(format!(
                "limit has no parameter `{k}`; it accepts: amount, period"
            )));
        }
        let (amount, period) = cap(params, Some((self.amount, self.period)))?;
        self.charge(ctx);
        self.roll(ctx);
        let used = self.amount - self.budget;
        self.amount = amount;
        self.period = period;
        self.budget = amount - used;
        // The cap is the instance's (`describe` shows it), not a parameter
        // the child keeps: one carried to another scheduler would be
        // refused there.
        self.update(ctx, false);
        Ok(())
    }

    fn check_invariants(&self, ctx: &Ctx<'_>) -> Result<(), String> {
        self.parents.check(ctx)?;
        if let Some(vp) = self.child {
            if Run::of(ctx.vp_state(vp)) != self.run {
                return Err(format!(
                    "believes child {vp} is {:?} but it is {:?}",
                    self.run,
                    ctx.vp_state(vp)
                ));
            }
            if let Some(c) = self.run.cpu() {
                if !self.parents.held().any(|(_, h)| h == c) {
                    return Err(format!(
                        "child {vp} runs on {c}, which this limit scheduler does not hold"
                    ));
                }
            }
        }
        if self.budget > self.amount {
            return Err(format!(
                "budget {} exceeds the amount {}",
                self.budget, self.amount
            ));
        }
        Ok(())
    }

    fn describe(&self) -> String {
        format!("amount={} period={}", self.amount, self.period)
    }
}
