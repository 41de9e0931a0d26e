//! `dl`: the Linux deadline scheduling class (`SCHED_DEADLINE`), as Linux
//! kernel/sched/deadline.c enforces it: global EDF over constant-bandwidth
//! servers on several processors, with budgets optionally checked only at
//! the scheduler tick. It lets the simulator predict a run whose
//! reservations the kernel enforces; each child is a basic hard
//! reservation in the sense of Regehr 2001, §5.2.2 while the set stays
//! within the bound below.
//!
//! # Algorithm
//! Every child is a server with a runtime `amount` every `period` (its
//! relative deadline is its period). Per child the policy keeps the
//! remaining runtime `r` (signed: a tick-checked server overruns) and an
//! absolute deadline `d`, as `struct sched_dl_entity` does. The rules,
//! after Linux kernel/sched/deadline.c:
//!
//! - Wake-up (the child asks for a processor) at time `t`: if `d ≤ t` or
//!   `r · period > (d − t) · amount` (the CBS wake-up test,
//!   `dl_entity_overflow`), the child gets `d = t + period`, `r = amount`;
//!   otherwise it keeps both. A throttled child that wakes waits for its
//!   replenishment.
//! - Running, `r` falls by the wall-clock time the child is granted
//!   (stolen time included, like rez's `basic`).
//! - Exhaustion: with `tick = 0` the child is throttled the instant `r`
//!   reaches 0. With `tick > 0` the runtime is checked only at the tick
//!   instants, the multiples of `tick` from time 0 on every processor: the
//!   child is throttled at the first tick at or after the instant `r`
//!   would reach 0, and `r` goes negative by the overrun. A preemption, a
//!   revocation or a block before that charges exactly; a child whose `r`
//!   is then at most 0 is throttled too, ready or not (`update_curr_dl`
//!   runs on every dequeue).
//! - Throttled, the child waits for its replenishment at `d`
//!   (`dl_task_timer`): then `d += period; r += amount` while `r ≤ 0`
//!   (`replenish_dl_entity`, so an overrun comes off the next budget and may
//!   skip a whole period), and if then `d ≤ now`, `d = now + period`,
//!   `r = amount`. A ready child then competes again.
//! - A child that blocks with runtime left keeps `r` and `d` until it wakes.
//! - Global EDF: among the ready, unthrottled children the `k` earliest
//!   deadlines run, `k` the processors the parent grants now. Equal
//!   deadlines go to the child registered first. A child that becomes
//!   eligible (wakes, is replenished, or loses its processor to the
//!   parent) with a deadline strictly earlier than the latest-deadline
//!   running child preempts that one at once, even when another processor
//!   may be on its way from the parent (the preempted child then runs
//!   there). A child past its deadline with runtime left keeps running with
//!   that deadline: a missed server deadline is not enforced, as in Linux.
//! - Migration is free: a processor that falls idle goes to the earliest
//!   eligible child whichever processor it ran on before; a running child
//!   is only moved by a preemption, never to balance.
//!
//! A hook that revokes a child never grants that child (or another VP of
//! the same child instance) a processor in the same hook (the rule of the
//! crate's `sfq` module, whose processor holding `dl` shares): when that
//! child should preempt another at once, the instance arms its timer for
//! the same instant and preempts in the timer hook.
//!
//! Eligible children, running children by deadline, running children by
//! exhaustion instant and throttled children by replenishment are four
//! ordered sets, so deciding costs O(log n) in the children; finding the
//! processor a child runs on is a pass over the held processors (at most
//! `processors`), as in `ps` and `coop`.
//!
//! # Admission control
//! A child is admitted when the sum of amount/period over all children,
//! itself included, stays within `processors × cap` (the kernel's
//! `__dl_overflow` test against `sched_rt_runtime_us/sched_rt_period_us`
//! per processor of the root domain); a refusal is
//! [`PolicyError::AdmissionRefused`] naming the load it would have reached.
//! Utilizations are counted as rez counts them (units of 2⁻³² of a
//! processor, rounded up, one unit allowed per child).
//!
//! # Not modelled
//! GRUB reclaiming (`SCHED_FLAG_RECLAIM`), the fair servers (`dl_server`),
//! constrained deadlines (deadline shorter than the period), the delays of
//! push/pull migration (this is exact global EDF), and the admission's
//! per-root-domain accounting beyond `processors × cap`.
//!
//! # Parameters
//! Instance (`[[scheduler]]` keys):
//! - `processors`: integer ≥ 1, default 1: the parent VPs registered, the
//!   processors of the root domain.
//! - `tick`: duration, default 0 (exact enforcement); `"4ms"` models
//!   `CONFIG_HZ=250` without `HRTICK_DL`.
//! - `cap`: number in (0, 1], default 0.95 (`sched_rt_runtime_us` /
//!   `sched_rt_period_us`).
//!
//! Child: `amount` (duration, positive, at most `period`) and `period`
//! (duration, positive).
//!
//! # Messages
//! `Msg::SetParams` with `amount` and/or `period` changes a server
//! (`sched_setattr`): admitted at once with the new bandwidth in place of
//! the old, in force from the child's next replenishment or wake-up.
//!
//! # Guarantees (Regehr 2001, §5.2.2)
//! With `m` processors, tick `τ` and `u_i' = (amount_i + τ)/period_i`, if
//! `Σ u_i' ≤ m − (m − 1)·max u_i'` (Goossens, Funk and Baruah 2003) every
//! server job meets its deadline and child `i` receives `RESBH (amount_i −
//! τ) period_i` (none when `amount_i ≤ τ`). Otherwise global EDF may miss
//! server deadlines (its tardiness is bounded, Devi and Anderson 2005,
//! which no guarantee type of §5.2 expresses) and nothing is claimed. See
//! hsched-guarantee's `build_dl`.

use crate::registry::{Admission, PolicyInfo};
use crate::sfq::{arm_timer, Held, Holder};
use hsched_core::{
    CpuId, Ctx, Duration, Instant, Msg, Node, ParamError, ParamSpec, Params, Policy, PolicyError,
    RevokeReason, Side, VpId, VpState, VpTable,
};
use std::collections::BTreeSet;

/// Registry entry.
pub const INFO: PolicyInfo = PolicyInfo {
    name: "dl",
    summary: "Linux's deadline class: global EDF over constant-bandwidth servers on several \
              processors, budgets optionally checked at the tick, admission by processors × cap",
    source: "Linux kernel/sched/deadline.c; Regehr 2001, §5.2.2",
    instance_params: &[
        ParamSpec {
            key: "processors",
            kind: "integer",
            default: "1",
            doc: "parent VPs registered: the processors of the root domain",
        },
        ParamSpec {
            key: "tick",
            kind: "duration",
            default: "0",
            doc:
                "budgets are checked only at multiples of it (0: exactly); 4ms models CONFIG_HZ=250",
        },
        ParamSpec {
            key: "cap",
            kind: "number",
            default: "0.95",
            doc: "admission limit per processor on the sum of amount/period, in (0, 1]",
        },
    ],
    child_params: &[
        ParamSpec {
            key: "amount",
            kind: "duration",
            default: "required",
            doc: "runtime each period",
        },
        ParamSpec {
            key: "period",
            kind: "duration",
            default: "required",
            doc: "the server period, also its relative deadline",
        },
    ],
    change_params: &[],
    max_children: None,
    min_parents: 1,
    max_parents: 1,
    build,
    check_child: |p| Server::from_params(p).map(drop),
    exclusive: None,
    admission: Some(ADMISSION),
    merge_change: crate::registry::merge_change,
};

fn build(params: &Params) -> Result<Box<dyn Policy>, PolicyError> {
    Ok(Box::new(Dl::from_params(params)?))
}

/// Default admission cap per processor (`sched_rt_runtime_us` 950000 of
/// `sched_rt_period_us` 1000000).
pub const DEFAULT_CAP: f64 = 0.95;
/// Utilizations are fixed-point fractions of `UTIL_ONE`, rounded up.
const UTIL_ONE: u128 = crate::budget::SHARE_ONE;

fn util_fp(amount: Duration, period: Duration) -> u128 {
    (amount.as_nanos() as u128 * UTIL_ONE).div_ceil(period.as_nanos().max(1) as u128)
}

fn cap_fp(cfg: &DlConfig) -> u128 {
    crate::budget::share_down(cfg.cap) * cfg.processors as u128
}

const ADMISSION: Admission = Admission {
    cap: |p| DlConfig::from_params(p).map_or(u128::MAX, |c| cap_fp(&c)),
    cap_key: "cap",
    load: |_, p| Server::from_params(p).map_or(0, |s| util_fp(s.amount, s.period)),
    per_child: 1,
    one: UTIL_ONE,
};

fn param_err(key: &str, message: impl Into<String>) -> PolicyError {
    PolicyError::Param(ParamError {
        key: key.to_string(),
        message: message.into(),
    })
}

/// Configuration of one `dl` instance.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DlConfig {
    /// Parent VPs registered (processors of the root domain), at least 1.
    pub processors: usize,
    /// Budget check granularity; zero for exact enforcement.
    pub tick: Duration,
    /// Admission cap per processor, in (0, 1].
    pub cap: f64,
}

impl Default for DlConfig {
    fn default() -> Self {
        DlConfig {
            processors: 1,
            tick: Duration::ZERO,
            cap: DEFAULT_CAP,
        }
    }
}

impl DlConfig {
    /// Reads `processors`, `tick` and `cap` from instance parameters.
    ///
    /// # Errors
    /// A value of the wrong type or out of range.
    pub fn from_params(params: &Params) -> Result<Self, PolicyError> {
        let processors = params.u64("processors")?.unwrap_or(1);
        if processors == 0 || processors > u32::MAX as u64 {
            return Err(param_err(
                "processors",
                format!("must be at least 1, found {processors}"),
            ));
        }
        let tick = params.duration("tick")?.unwrap_or(Duration::ZERO);
        let cap = params.f64("cap")?.unwrap_or(DEFAULT_CAP);
        if !(cap > 0.0 && cap <= 1.0) {
            return Err(param_err("cap", format!("must be in (0, 1], found {cap}")));
        }
        Ok(DlConfig {
            processors: processors as usize,
            tick,
            cap,
        })
    }
}

/// A server: `amount` of runtime every `period` (its relative deadline),
/// read and checked as Rez reads a reservation.
pub use crate::rez::Reservation as Server;

/// Deadline, registration order: the EDF order with its tie-break.
type Key = (Instant, u64);

/// Per-child state.
#[derive(Clone, Debug)]
struct Child {
    srv: Server,
    util: u128,
    order: u64,
    /// Remaining runtime in nanoseconds; negative after a tick overrun.
    r: i64,
    /// Absolute deadline; `Instant::ZERO` before the first wake-up.
    d: Instant,
    /// Waiting for its replenishment at `d`.
    throttled: bool,
    /// In the eligible set.
    queued: bool,
    /// In the running sets, with this exhaustion instant.
    exhaust: Option<Instant>,
}

impl Child {
    fn key(&self) -> Key {
        (self.d, self.order)
    }
}

/// A `dl` instance. See the module documentation.
#[derive(Debug)]
pub struct Dl {
    cfg: DlConfig,
    cap: u128,
    load: u128,
    children: VpTable<Child>,
    next_order: u64,
    /// Ready, unthrottled children not running.
    eligible: BTreeSet<(Key, VpId)>,
    /// Running children by deadline (the latest is the preemption victim).
    running: BTreeSet<(Key, VpId)>,
    /// Running children by the instant their budget check throttles them.
    exhaust: BTreeSet<(Instant, u64, VpId)>,
    /// Throttled children by replenishment instant (their deadline).
    replenish: BTreeSet<(Key, VpId)>,
    /// Processors held; `run` is when the child was last charged.
    held: Vec<Held<Instant>>,
    avoid: Vec<Node>,
    /// A preemption had to wait for the next hook (the avoid rule).
    again: bool,
}

impl Dl {
    /// A `dl` instance with this configuration.
    pub fn new(cfg: DlConfig) -> Self {
        Dl {
            cfg,
            cap: cap_fp(&cfg),
            load: 0,
            children: VpTable::new(Side::Child),
            next_order: 0,
            eligible: BTreeSet::new(),
            running: BTreeSet::new(),
            exhaust: BTreeSet::new(),
            replenish: BTreeSet::new(),
            held: Vec::new(),
            avoid: Vec::new(),
            again: false,
        }
    }

    /// A `dl` instance from instance parameters.
    ///
    /// # Errors
    /// As [`DlConfig::from_params`].
    pub fn from_params(params: &Params) -> Result<Self, PolicyError> {
        Ok(Dl::new(DlConfig::from_params(params)?))
    }

    /// The configuration.
    pub fn config(&self) -> DlConfig {
        self.cfg
    }

    /// The admitted load, Σ amount/period, in processors.
    pub fn load(&self) -> f64 {
        self.load as f64 / UTIL_ONE as f64
    }

    /// Admission: `load` over `children` children within `processors ×
    /// cap`, one unit per child for rounding.
    fn admit(&self, load: u128, children: u128) -> Result<(), PolicyError> {
        if load > self.cap + children {
            return Err(PolicyError::AdmissionRefused {
                load: load as f64 / UTIL_ONE as f64,
                cap: self.cfg.cap * self.cfg.processors as f64,
                held: 0.0,
            });
        }
        Ok(())
    }

    /// When a child dispatched now with `r > 0` is throttled: when `r`
    /// runs out, or at the first tick at or after it.
    fn exhaust_at(&self, now: Instant, r: i64) -> Instant {
        let at = now.as_nanos().saturating_add(r.max(0) as u64);
        let tick = self.cfg.tick.as_nanos();
        if tick == 0 {
            Instant(at)
        } else {
            Instant(at.div_ceil(tick).saturating_mul(tick))
        }
    }

    /// Takes `vp` out of the running sets.
    fn leave_running(&mut self, ctx: &Ctx<'_>, vp: VpId) {
        let Some(c) = self.children.get_mut(ctx, vp) else {
            return;
        };
        if let Some(at) = c.exhaust.take() {
            self.running.remove(&(c.key(), vp));
            self.exhaust.remove(&(at, c.order, vp));
        }
    }

    /// Throttles `vp` until its replenishment at its deadline.
    fn throttle(&mut self, ctx: &Ctx<'_>, vp: VpId) {
        let Some(c) = self.children.get_mut(ctx, vp) else {
            return;
        };
        if c.queued {
            self.eligible.remove(&(c.key(), vp));
            c.queued = false;
        }
        if !c.throttled {
            c.throttled = true;
            self.replenish.insert((c.key(), vp));
        }
    }

    /// Replenishes throttled `vp` at `now` and makes it eligible if ready.
    fn replenish_child(&mut self, ctx: &Ctx<'_>, vp: VpId) {
        let now = ctx.now();
        let ready = ctx.vp_state(vp) == VpState::Ready;
        let Some(c) = self.children.get_mut(ctx, vp) else {
            return;
        };
        self.replenish.remove(&(c.key(), vp));
        c.throttled = false;
        let (a, p) = (c.srv.amount.as_nanos() as i64, c.srv.period);
        if c.r <= 0 {
            // The periods `while r <= 0 { d += period; r += amount }` takes.
            let k = c.r.unsigned_abs() / a as u64 + 1;
            c.d += Duration::from_nanos(p.as_nanos().saturating_mul(k));
            c.r += (k as i64).saturating_mul(a);
        }
        if c.d <= now {
            c.d = now + p;
            c.r = a;
        }
        if ready {
            c.queued = true;
            self.eligible.insert((c.key(), vp));
        }
    }

    /// Processes due exhaustions and replenishments.
    fn due(&mut self, ctx: &mut Ctx<'_>) {
        let now = ctx.now();
        while let Some(&(at, _, vp)) = self.exhaust.first() {
            if at > now {
                break;
            }
            let Some(i) = self.held.iter().position(|h| h.vp == vp) else {
                self.leave_running(ctx, vp);
                continue;
            };
            let h = self.held[i];
            if ctx.vp_cpu(vp) != Some(h.cpu) {
                // Granted in this hook, not running yet: next hook.
                self.again = true;
                break;
            }
            self.charge(ctx, i);
            let r = self.children.get(ctx, vp).map_or(0, |c| c.r);
            if r > 0 {
                // Not due after all (charged late); re-arm from now.
                let at = self.exhaust_at(now, r);
                self.leave_running(ctx, vp);
                self.enter_running(ctx, vp, at);
                continue;
            }
            self.held.remove(i);
            self.leave_running(ctx, vp);
            self.revoke_child(ctx, vp, RevokeReason::BudgetExhausted);
            self.throttle(ctx, vp);
            self.dispatch(ctx, h.parent, h.cpu);
        }
        while let Some(&((d, _), vp)) = self.replenish.first() {
            if d > now {
                break;
            }
            self.replenish_child(ctx, vp);
        }
    }

    fn enter_running(&mut self, ctx: &Ctx<'_>, vp: VpId, at: Instant) {
        if let Some(c) = self.children.get_mut(ctx, vp) {
            c.exhaust = Some(at);
            self.running.insert((c.key(), vp));
            self.exhaust.insert((at, c.order, vp));
        }
    }

    /// The earliest eligible child not to be granted in this hook, dropping
    /// entries of children that released since (their notification is on
    /// its way). Records in `again` when a child that must wait for the
    /// next hook is ahead of `limit`.
    fn first_eligible(&mut self, ctx: &Ctx<'_>, limit: Option<Key>) -> Option<(Key, VpId)> {
        let mut stale = Vec::new();
        let mut found = None;
        for &(k, vp) in &self.eligible {
            if limit.is_some_and(|l| k >= l) {
                break;
            }
            if ctx.vp_state(vp) != VpState::Ready {
                stale.push((k, vp));
            } else if self.avoid.contains(&ctx.vp_child(vp)) {
                self.again = true;
            } else {
                found = Some((k, vp));
                break;
            }
        }
        for (k, vp) in stale {
            self.eligible.remove(&(k, vp));
            if let Some(c) = self.children.get_mut(ctx, vp) {
                c.queued = false;
            }
        }
        found
    }

    /// Grants `cpu`, held through `parent`, to eligible `vp`.
    fn run_on(&mut self, ctx: &mut Ctx<'_>, parent: VpId, cpu: CpuId, vp: VpId) {
        let now = ctx.now();
        let Some(c) = self.children.get_mut(ctx, vp) else {
            return;
        };
        self.eligible.remove(&(c.key(), vp));
        c.queued = false;
        let r = c.r;
        let at = self.exhaust_at(now, r);
        self.enter_running(ctx, vp, at);
        self.hold(ctx, parent, cpu, vp, now);
        ctx.grant(vp, cpu);
    }

    /// Global EDF: while an eligible child has an earlier deadline than the
    /// latest-deadline running child, it takes that child's processor.
    fn balance(&mut self, ctx: &mut Ctx<'_>) {
        while let Some(&(worst, victim)) = self.running.last() {
            let Some((_, vp)) = self.first_eligible(ctx, Some(worst)) else {
                break;
            };
            let Some(i) = self.held.iter().position(|h| h.vp == victim) else {
                break;
            };
            let h = self.held[i];
            if ctx.vp_child(victim) == ctx.vp_child(vp) {
                // Two VPs of one child instance: swapping gains nothing.
                break;
            }
            if ctx.vp_cpu(victim) != Some(h.cpu) {
                // Granted in this hook, not running yet: next hook.
                self.again = true;
                break;
            }
            self.charge(ctx, i);
            self.held.remove(i);
            self.revoke_child(ctx, victim, RevokeReason::Preempted);
            self.leave_running(ctx, victim);
            self.run_on(ctx, h.parent, h.cpu, vp);
            self.enqueue(ctx, victim);
        }
    }

    /// Balances, adjusts the demand on the parent and arms the timer.
    fn settle(&mut self, ctx: &mut Ctx<'_>) {
        self.balance(ctx);
        let want = (self.eligible.len() + self.held.len()).min(ctx.parent_vps().len());
        ctx.set_parent_demand(want);
        let mut at = Instant::NEVER;
        if let Some(&(t, _, _)) = self.exhaust.first() {
            at = at.min(t);
        }
        if let Some(&((t, _), _)) = self.replenish.first() {
            at = at.min(t);
        }
        if self.again {
            at = ctx.now();
        }
        arm_timer(ctx, at);
    }

    /// The CBS wake-up rule at `now` (`dl_entity_overflow`).
    fn wake(c: &mut Child, now: Instant) {
        let left = c.d.as_nanos() as i128 - now.as_nanos() as i128;
        let (a, p) = (c.srv.amount.as_nanos() as i128, c.srv.period);
        if left <= 0 || c.r as i128 * p.as_nanos() as i128 > left * a {
            c.d = now + p;
            c.r = a as i64;
        }
    }
}

impl Holder for Dl {
    type Run = Instant;

    fn held(&self) -> &[Held<Instant>] {
        &self.held
    }

    fn held_mut(&mut self) -> &mut Vec<Held<Instant>> {
        &mut self.held
    }

    fn avoid_mut(&mut self) -> &mut Vec<Node> {
        &mut self.avoid
    }

    fn advance(&mut self, ctx: &Ctx<'_>, vp: VpId, used: Duration) {
        if let Some(c) = self.children.get_mut(ctx, vp) {
            c.r =
                c.r.saturating_sub(used.as_nanos().min(i64::MAX as u64) as i64);
        }
    }

    /// Charges wall-clock granted time since the last charge (`run`), not
    /// the net received time the fair-share policies use.
    fn charge(&mut self, ctx: &Ctx<'_>, i: usize) {
        let now = ctx.now();
        let h = &mut self.held[i];
        let used = now.saturating_since(h.run);
        h.run = now;
        let vp = h.vp;
        if used != Duration::ZERO {
            self.advance(ctx, vp, used);
        }
    }

    /// A child that lost its processor competes again, or is throttled
    /// when its runtime is used up.
    fn enqueue(&mut self, ctx: &Ctx<'_>, vp: VpId) {
        self.leave_running(ctx, vp);
        let Some(c) = self.children.get_mut(ctx, vp) else {
            return;
        };
        if c.r <= 0 {
            self.throttle(ctx, vp);
        } else if !c.queued && !c.throttled {
            c.queued = true;
            self.eligible.insert((c.key(), vp));
        }
    }

    fn stopped(&mut self, ctx: &mut Ctx<'_>, vp: VpId) {
        self.leave_running(ctx, vp);
        if self.children.get(ctx, vp).is_some_and(|c| c.r <= 0) {
            self.throttle(ctx, vp);
        }
    }

    fn dispatch(&mut self, ctx: &mut Ctx<'_>, parent: VpId, cpu: CpuId) {
        match self.first_eligible(ctx, None) {
            Some((_, vp)) => self.run_on(ctx, parent, cpu, vp),
            None => ctx.release(parent),
        }
    }
}

impl Policy for Dl {
    fn policy_name(&self) -> &'static str {
        "dl"
    }

    fn parent_vps(&self, available: usize) -> usize {
        available.min(self.cfg.processors)
    }

    fn register_vp(
        &mut self,
        ctx: &mut Ctx<'_>,
        vp: VpId,
        params: &Params,
    ) -> Result<(), PolicyError> {
        crate::registry::check_child_params(&INFO, params)?;
        let srv = Server::from_params(params)?;
        let util = util_fp(srv.amount, srv.period);
        self.admit(self.load + util, self.children.len() as u128 + 1)?;
        self.load += util;
        let order = self.next_order;
        self.next_order += 1;
        self.children.insert(
            ctx,
            vp,
            Child {
                srv,
                util,
                order,
                r: 0,
                d: Instant::ZERO,
                throttled: false,
                queued: false,
                exhaust: None,
            },
        );
        Ok(())
    }

    fn unregister_vp(&mut self, ctx: &mut Ctx<'_>, vp: VpId) {
        self.held.retain(|h| h.vp != vp);
        self.leave_running(ctx, vp);
        if let Some(c) = self.children.remove(ctx, vp) {
            self.eligible.remove(&(c.key(), vp));
            self.replenish.remove(&(c.key(), vp));
            self.load -= c.util;
        }
    }

    fn request(&mut self, ctx: &mut Ctx<'_>, vp: VpId) {
        self.again = false;
        self.begin_about(ctx, Some(vp));
        self.due(ctx);
        let now = ctx.now();
        if ctx.vp_state(vp) == VpState::Ready {
            if let Some(c) = self.children.get_mut(ctx, vp) {
                // Stale when queued, running or throttled already.
                if !c.queued && c.exhaust.is_none() && !c.throttled {
                    Self::wake(c, now);
                    c.queued = true;
                    self.eligible.insert((c.key(), vp));
                }
            }
        }
        self.settle(ctx);
    }

    fn release(&mut self, ctx: &mut Ctx<'_>, vp: VpId) {
        self.again = false;
        self.begin_about(ctx, Some(vp));
        self.due(ctx);
        if ctx.vp_state(vp) == VpState::Waiting {
            if let Some(c) = self.children.get_mut(ctx, vp) {
                if c.queued {
                    self.eligible.remove(&(c.key(), vp));
                    c.queued = false;
                }
            }
        }
        self.settle(ctx);
    }

    fn grant(&mut self, ctx: &mut Ctx<'_>, parent_vp: VpId, cpu: CpuId) {
        self.again = false;
        self.on_grant(ctx, parent_vp, cpu);
        self.due(ctx);
        self.settle(ctx);
    }

    fn revoke(&mut self, ctx: &mut Ctx<'_>, parent_vp: VpId, reason: RevokeReason) {
        self.again = false;
        self.on_revoke(ctx, parent_vp, reason);
        self.due(ctx);
        self.settle(ctx);
    }

    /// `SetParams` with `amount` and/or `period` changes a server, as
    /// `sched_setattr` does: admitted at once against the new bandwidth,
    /// in force from the child's next replenishment or wake-up (its
    /// current runtime and deadline stay).
    fn msg(&mut self, ctx: &mut Ctx<'_>, vp: VpId, msg: &Msg) -> Result<(), PolicyError> {
        let Msg::SetParams(change) = msg else {
            return Err(PolicyError::Unsupported(format!(
                "dl accepts server changes (SetParams), not {msg:?}"
            )));
        };
        if let Some(k) = change.unknown_keys(&["amount", "period"]).next() {
            return Err(PolicyError::Unsupported(format!(
                "a dl child has no parameter `{k}`; it accepts: amount, period"
            )));
        }
        let Some(old) = self.children.get(ctx, vp).map(|c| c.util) else {
            return Err(PolicyError::Refused(format!(
                "{vp} is not a child of this scheduler"
            )));
        };
        let merged = crate::registry::merge_change(ctx.vp_params(vp), change);
        let srv = Server::from_params(&merged)?;
        let util = util_fp(srv.amount, srv.period);
        let load = self.load - old + util;
        self.admit(load, self.children.len() as u128)?;
        self.load = load;
        if let Some(c) = self.children.get_mut(ctx, vp) {
            c.srv = srv;
            c.util = util;
        }
        ctx.set_vp_params(vp, merged);
        Ok(())
    }

    fn timer(&mut self, ctx: &mut Ctx<'_>) {
        self.again = false;
        self.begin_about(ctx, None);
        self.due(ctx);
        self.settle(ctx);
    }

    fn check_invariants(&self, ctx: &Ctx<'_>) -> Result<(), String> {
        self.check_held(ctx)?;
        let mut load = 0;
        for i in 0..self.children.len() {
            let (vp, c) = self.children.at(i);
            load += c.util;
            let held = self.held.iter().any(|h| h.vp == vp);
            if held != c.exhaust.is_some() {
                return Err(format!("{vp} held {held} but exhaust {:?}", c.exhaust));
            }
            if c.queued as u8 + held as u8 + c.throttled as u8 > 1 {
                return Err(format!(
                    "{vp} is in more than one of eligible, running, throttled"
                ));
            }
            if c.queued != self.eligible.contains(&(c.key(), vp)) {
                return Err(format!("{vp}'s eligible entry is stale"));
            }
            if c.throttled != self.replenish.contains(&(c.key(), vp)) {
                return Err(format!("{vp}'s replenishment entry is stale"));
            }
            if held && c.r < 0 && self.cfg.tick == Duration::ZERO {
                return Err(format!("{vp} runs with no runtime left"));
            }
        }
        if load != self.load {
            return Err(format!(
                "load is {} but children add up to {load}",
                self.load
            ));
        }
        let counts = [
            self.eligible.len(),
            self.running.len(),
            self.exhaust.len(),
            self.replenish.len(),
        ];
        let n = self.children.len();
        if counts[1] != self.held.len()
            || counts[2] != self.held.len()
            || counts.iter().any(|&k| k > n)
        {
            return Err(format!(
                "set sizes {counts:?} with {} held",
                self.held.len()
            ));
        }
        Ok(())
    }

    fn child_deadline(&self, ctx: &Ctx<'_>, vp: VpId) -> Option<Instant> {
        self.children
            .get(ctx, vp)
            .filter(|c| c.d != Instant::ZERO)
            .map(|c| c.d)
    }

    fn describe(&self) -> String {
        format!(
            "processors={} tick={} cap={} load={:.1}%",
            self.cfg.processors,
            self.cfg.tick,
            self.cfg.cap,
            self.load() * 100.0
        )
    }
}
