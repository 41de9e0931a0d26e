//! Per-child budgets replenished each period, an eligible set, one
//! processor: the dispatcher shared by [`rez`](crate::rez) (Regehr 2001,
//! §9.3.2) and [`realrate`](crate::realrate) (Steere et al. 1998, §3.1).
//!
//! Every child has a *budget*, replenished to its per-period amount at the
//! start of each of its periods and charged with the CPU time it holds the
//! processor. Among the children that are ready and have budget left (the
//! *eligible* set, ordered by whether the child is over its rate, below,
//! then by a key the policy chooses, ties to the child registered first)
//! the first one runs; the running child is preempted only by a strictly
//! smaller key. A child whose budget runs out is revoked with
//! [`RevokeReason::BudgetExhausted`] and waits, still asking, for its next
//! period; when no child is eligible the processor goes back to the
//! parent. The instance is uniprocessor: one parent VP.
//!
//! A child's periods form a grid that starts at its first request. While a
//! child waits no events are kept for it; when it asks again its period is
//! advanced along the grid by arithmetic.
//!
//! A child that asks part way through a period (it slept, or it is a join
//! whose other parent ran its child meanwhile) may hold more budget than
//! its rate, amount/period, covers in what is left of the period: 8 ms of
//! an 8 ms / 40 ms reservation 10 ms before its deadline. Served in the
//! policy's order like any other budget, it takes time the admission test
//! promised to the other children, which assumes every child asks like a
//! periodic task. So at every request the part of the budget above what
//! the policy's test allows a late child ([`Rules::on_rate`]: for EDF
//! `amount × (deadline − now) / period`, the wake-up test of the constant
//! bandwidth server, Abeni and Buttazzo 1998, in the form that keeps the
//! deadline; for rate-monotonic order `amount − (now − period start)`) is
//! marked *over rate* (`Slot::over_rate`), and once a child's budget is
//! down to that part it comes after every child within its rate in the
//! eligible order. The child keeps its budget and its grid, so it still
//! gets its amount in a period when the processor is otherwise free, and
//! never more. A period that starts while the child asks (a replenishment
//! at its deadline) has nothing over rate, and neither does a child whose
//! requests keep to its grid, so their schedules are unchanged.
//!
//! Replenishments sit in a binary heap ordered by (time, sequence
//! number), at most one per child, and each child knows where its entry
//! is: a child that stops asking, or gets a newer replenishment, has its
//! entry taken out at once, so no stale entry is ever met. They are driven
//! by the single instance timer, which also carries the running child's
//! budget exhaustion and any tick of the owner's own ([`Budgets::tick`]).
//! Every event costs O(log n) comparisons, plus moving up to n entries of
//! the eligible set (a sorted vector, cheaper than a tree at the tens of
//! children a reservation scheduler has).
//!
//! The hooks follow the shared rules of [`crate::fp`] (eager view, stale
//! news dropped, fixed action order): every notification first charges the
//! running child and reconciles with what happened while the instance was
//! busy ([`Budgets::catch_up`]), then processes due replenishments, then
//! makes the decisions the protocol requires ([`Budgets::settle`]).
//!
//! What differs between the policies is a [`Rules`] implementation: the
//! eligible order (EDF by deadline for `rez`, rate-monotonic by period for
//! `realrate`) and how a period ends and the next one is sized.

use hsched_core::{
    CpuId, Ctx, Duration, Instant, PolicyEvent, RevokeReason, Side, VpId, VpState, VpTable,
};
use std::fmt::Debug;

/// The budget state of one child, as the dispatcher keeps it.
#[derive(Clone, Debug)]
pub(crate) struct Slot {
    /// Registration order, the tie-break of the eligible order.
    pub(crate) order: u64,
    /// The amount each period is replenished with.
    pub(crate) amount: Duration,
    /// Budget left in the current period.
    pub(crate) budget: Duration,
    /// Whether the period grid has started (first request seen).
    pub(crate) started: bool,
    /// End of the current period.
    pub(crate) deadline: Instant,
    /// Length of the current period.
    pub(crate) period: Duration,
    /// The part of `budget` the child got beyond its rate when it last
    /// asked late in this period (see the module documentation): once the
    /// budget is down to it, the child is served after every child within
    /// its rate. Zero from each period start.
    pub(crate) over_rate: Duration,
    /// Where the child's replenishment is in the replenishment heap;
    /// `NO_EVENT` when it has none.
    event_pos: u32,
    /// Whether the child sits in the eligible set.
    pub(crate) eligible: bool,
    /// The budget ran out in this period.
    pub(crate) exhausted: bool,
}

/// How budgets are charged (Regehr 2001, §11.5.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Charging {
    /// With the wall-clock time the child was granted, stolen time included.
    Granted,
    /// With the CPU time the child actually received, net of stolen time;
    /// budget timers are armed no shorter than `min_slice`, so a child
    /// robbed of time while granted catches up within its period.
    Received {
        /// Shortest budget timer (timers are quantized).
        min_slice: Duration,
    },
}

/// Where the policies differ. Hooks get the child's VP and the context to
/// read from; the dispatcher owns the grid, the budget and the queues.
pub(crate) trait Rules {
    /// The policy's per-child state, which holds a [`Slot`].
    type Child: Debug;
    /// The eligible order, before the registration-order tie-break.
    type Key: Ord + Copy + Debug;

    /// The child's budget state.
    fn slot(c: &Self::Child) -> &Slot;
    /// The child's budget state, to change.
    fn slot_mut(c: &mut Self::Child) -> &mut Slot;
    /// The child's place in the eligible order.
    fn key(c: &Self::Child) -> Self::Key;

    /// The child asked for the first time: apply any pending change, set
    /// `slot.amount`, and return the length of its first period.
    fn first_period(&mut self, ctx: &Ctx<'_>, vp: VpId, c: &mut Self::Child) -> Duration;

    /// The child's period ended (its deadline passed) with `slot.budget`
    /// left; `runnable` says whether it was ready or running then. Account
    /// for the period, apply any pending change, and return the length of
    /// the next period. Trace events go to `notes`, emitted in order after
    /// the dispatcher's `DeadlineMiss` and before its `Replenish`.
    fn end_period(
        &mut self,
        ctx: &Ctx<'_>,
        vp: VpId,
        c: &mut Self::Child,
        runnable: bool,
        notes: &mut Vec<PolicyEvent>,
    ) -> Duration;

    /// The next period starts (its deadline is set); `skipped` whole
    /// periods passed unused while the child waited. Set `slot.amount`.
    fn start_period(
        &mut self,
        ctx: &Ctx<'_>,
        vp: VpId,
        c: &mut Self::Child,
        skipped: u64,
        period: Duration,
    );

    /// How much budget a child asking at `now`, `left` before the end of
    /// its period, may use within its rate: what the policy's
    /// schedulability test allows a child that asks late (see the module
    /// documentation). The amount when `left` is the whole period.
    fn on_rate(s: &Slot, left: Duration) -> Duration;
}

/// The child holding the processor.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Running {
    /// The child.
    pub(crate) vp: VpId,
    /// When its budget was last charged.
    mark_at: Instant,
    /// Its net received time when last charged (with
    /// [`Charging::Received`] only).
    mark_recv: Duration,
}

/// The dispatcher: children, eligible set, replenishment heap, the
/// processor held and the running child. See the module documentation.
#[derive(Debug)]
pub(crate) struct Budgets<R: Rules> {
    /// The policy's own state that the rules need.
    pub(crate) rules: R,
    /// The children. Remove them only through [`Budgets::unregister`]:
    /// the replenishment heap names children by their index here.
    pub(crate) children: VpTable<R::Child>,
    /// Another instant the timer must fire at (a controller tick), or
    /// `Instant::NEVER`.
    pub(crate) tick: Instant,
    charging: Charging,
    /// Eligible children (ready, budget left, not running) by key.
    eligible: Eligible<Key<R>>,
    /// Replenishments: exactly one entry per child whose `event_pos`
    /// names one, at that position.
    events: EventHeap,
    next_seq: u64,
    next_order: u64,
    /// The processor granted by the parent, while the instance holds it.
    cpu: Option<CpuId>,
    running: Option<Running>,
}

impl<R: Rules> Budgets<R> {
    /// An empty dispatcher.
    pub(crate) fn new(rules: R, charging: Charging) -> Self {
        Budgets {
            rules,
            children: VpTable::new(Side::Child),
            tick: Instant::NEVER,
            charging,
            eligible: Eligible::default(),
            events: EventHeap::default(),
            next_seq: 1,
            next_order: 0,
            cpu: None,
            running: None,
        }
    }

    /// Budget state for a child about to be registered: next in
    /// registration order, not started.
    pub(crate) fn new_slot(&mut self) -> Slot {
        let order = self.next_order;
        self.next_order += 1;
        Slot {
            order,
            amount: Duration::ZERO,
            budget: Duration::ZERO,
            started: false,
            deadline: Instant::NEVER,
            period: Duration::ZERO,
            over_rate: Duration::ZERO,
            event_pos: NO_EVENT,
            eligible: false,
            exhausted: false,
        }
    }

    /// The processor held, if any.
    pub(crate) fn cpu(&self) -> Option<CpuId> {
        self.cpu
    }

    /// The running child, if any.
    pub(crate) fn running(&self) -> Option<VpId> {
        self.running.map(|r| r.vp)
    }

    /// The eligible set, in order.
    pub(crate) fn eligible(&self) -> impl Iterator<Item = (Key<R>, VpId)> + '_ {
        self.eligible.iter()
    }

    /// Whether an entry with this key is in the eligible set.
    pub(crate) fn is_queued(&self, key: Key<R>) -> bool {
        self.eligible.contains(key)
    }

    /// Checks that the replenishment heap is a heap and holds exactly one
    /// entry per child with a replenishment, where that child says (for
    /// `Policy::check_invariants`).
    pub(crate) fn check_events(&self) -> Result<(), String> {
        let heap = &self.events.heap;
        if (1..heap.len()).any(|k| heap[(k - 1) / 2] > heap[k]) {
            return Err("the replenishment heap is out of order".to_string());
        }
        let mut queued = 0;
        for i in 0..self.children.len() {
            let (vp, c) = self.children.at(i);
            let pos = R::slot(c).event_pos;
            if pos == NO_EVENT {
                continue;
            }
            queued += 1;
            if heap.get(pos as usize).is_none_or(|e| e.child as usize != i) {
                return Err(format!("{vp}'s replenishment is not where it says"));
            }
        }
        if queued != heap.len() {
            return Err(format!(
                "{} replenishments queued for {queued} children that have one",
                heap.len()
            ));
        }
        Ok(())
    }

    /// A child's full eligible key.
    #[inline(always)]
    pub(crate) fn key_of(c: &R::Child) -> Key<R> {
        let s = R::slot(c);
        (Self::over_rate(s), R::key(c), s.order)
    }

    /// Whether the child's budget is down to the part it holds over its
    /// rate (a running child with no budget left counts as over rate; it
    /// is revoked before anyone compares).
    #[inline(always)]
    fn over_rate(s: &Slot) -> bool {
        s.budget <= s.over_rate
    }

    /// Forgets a child (it is waiting, so neither eligible nor running;
    /// stays safe if a broken caller says otherwise) and returns its state.
    pub(crate) fn unregister(&mut self, ctx: &mut Ctx<'_>, vp: VpId) -> Option<R::Child> {
        let index = self.children.index_of(ctx, vp);
        if let Some(i) = index {
            Self::leave(&mut self.eligible, self.children.at_mut(i).1);
            self.events.unqueue::<R>(&mut self.children, i);
        }
        if self.running.is_some_and(|r| r.vp == vp) {
            self.running = None;
        }
        let c = self.children.remove(ctx, vp);
        // The last child took the removed one's index: its entry says so.
        if let Some(i) = index.filter(|&i| i < self.children.len()) {
            let pos = R::slot(self.children.at(i).1).event_pos;
            if pos != NO_EVENT {
                self.events.heap[pos as usize].child = i as u32;
            }
        }
        self.arm(ctx);
        c
    }

    /// Charges the running child and reconciles with what happened while
    /// the instance was busy. Run first in every hook that may act.
    #[inline]
    pub(crate) fn catch_up(&mut self, ctx: &mut Ctx<'_>) {
        self.charge(ctx);
        self.sync(ctx);
    }

    /// `request` hook: a child asked for the processor.
    pub(crate) fn request(&mut self, ctx: &mut Ctx<'_>, vp: VpId) {
        self.catch_up(ctx);
        self.due_events(ctx);
        // Stale when the child has released again since.
        if ctx.vp_state(vp) == VpState::Ready {
            self.wake_child(ctx, vp);
        }
        self.settle(ctx);
    }

    /// `release` hook: a child stopped asking. A running child that
    /// released is found by `sync`.
    pub(crate) fn release(&mut self, ctx: &mut Ctx<'_>, vp: VpId) {
        self.catch_up(ctx);
        // Stale when the child has asked again since.
        if ctx.vp_state(vp) == VpState::Waiting {
            if let Some(i) = self.children.index_of(ctx, vp) {
                self.events.unqueue::<R>(&mut self.children, i);
                Self::leave(&mut self.eligible, self.children.at_mut(i).1);
            }
        }
        self.due_events(ctx);
        self.settle(ctx);
    }

    /// `grant` hook: the parent granted `cpu` to `parent_vp`.
    pub(crate) fn grant(&mut self, ctx: &mut Ctx<'_>, parent_vp: VpId, cpu: CpuId) {
        self.catch_up(ctx);
        // Stale when the processor was taken back, or released, since.
        if self.cpu.is_none() && ctx.vp_cpu(parent_vp) == Some(cpu) {
            self.cpu = Some(cpu);
        }
        self.due_events(ctx);
        self.settle(ctx);
    }

    /// `revoke` hook: the parent took the processor back.
    pub(crate) fn revoke(&mut self, ctx: &mut Ctx<'_>, reason: RevokeReason) {
        self.charge(ctx);
        // Before `sync`, so the child learns the parent's reason.
        if self.cpu.is_some() {
            self.lose_cpu(ctx, reason);
        }
        self.sync(ctx);
        self.due_events(ctx);
        self.settle(ctx);
    }

    /// Charges the running child for the time since its last charge.
    #[inline]
    fn charge(&mut self, ctx: &Ctx<'_>) {
        let Some(r) = self.running.as_mut() else {
            return;
        };
        let now = ctx.now();
        let used = match self.charging {
            Charging::Received { .. } => {
                let recv = ctx.vp_received(r.vp);
                let used = recv - r.mark_recv;
                r.mark_recv = recv;
                used
            }
            Charging::Granted => now.saturating_since(r.mark_at),
        };
        r.mark_at = now;
        let vp = r.vp;
        if let Some(c) = self.children.get_mut(ctx, vp) {
            R::slot_mut(c).budget -= used;
        }
    }

    /// Puts a child with budget left in the eligible set. No state check:
    /// also used for a child just revoked, still `Running` in the VP table
    /// until the revocation applies and ready then.
    #[inline]
    pub(crate) fn add_eligible(&mut self, ctx: &Ctx<'_>, vp: VpId) {
        if let Some(c) = self.children.get_mut(ctx, vp) {
            Self::enter(&mut self.eligible, c, vp);
        }
    }

    /// [`Budgets::add_eligible`] for child `c` (`vp`), already looked up.
    #[inline(always)]
    fn enter(set: &mut Eligible<Key<R>>, c: &mut R::Child, vp: VpId) {
        let key = Self::key_of(c);
        let s = R::slot_mut(c);
        if !s.eligible && s.budget > Duration::ZERO {
            s.eligible = true;
            set.insert(key, vp);
        }
    }

    /// Takes child `c` out of the eligible set.
    #[inline(always)]
    fn leave(set: &mut Eligible<Key<R>>, c: &mut R::Child) {
        let key = Self::key_of(c);
        let s = R::slot_mut(c);
        if s.eligible {
            s.eligible = false;
            set.remove(key);
        }
    }

    /// Changes child `vp`'s budget with `change`, then puts it in the
    /// eligible set if it is ready, not running and has budget left, out
    /// of it otherwise. It leaves the set first: its key depends on the
    /// budget (`Slot::over_rate`).
    pub(crate) fn change_budget(
        &mut self,
        ctx: &Ctx<'_>,
        vp: VpId,
        change: impl FnOnce(&mut Slot),
    ) {
        let running = self.running.is_some_and(|r| r.vp == vp);
        let Some(c) = self.children.get_mut(ctx, vp) else {
            return;
        };
        Self::leave(&mut self.eligible, c);
        change(R::slot_mut(c));
        if !running && ctx.vp_state(vp) == VpState::Ready {
            Self::enter(&mut self.eligible, c, vp);
        }
    }

    /// Ends the child's current period at now (its deadline has passed)
    /// and starts the one containing now, skipping whole periods that
    /// passed while the child waited (or the timer was late). `runnable`
    /// says whether the child was ready or running at the boundary.
    pub(crate) fn roll_period(&mut self, ctx: &mut Ctx<'_>, vp: VpId, runnable: bool) {
        if let Some(c) = self.children.get_mut(ctx, vp) {
            Self::roll(&mut self.rules, &mut self.eligible, ctx, vp, c, runnable);
        }
    }

    /// [`Budgets::roll_period`] for child `c` (`vp`), already looked up.
    fn roll(
        rules: &mut R,
        eligible: &mut Eligible<Key<R>>,
        ctx: &mut Ctx<'_>,
        vp: VpId,
        c: &mut R::Child,
        runnable: bool,
    ) {
        let now = ctx.now();
        let tracing = ctx.tracing();
        Self::leave(eligible, c);
        let mut notes: Vec<PolicyEvent> = Vec::new();
        if tracing && runnable && R::slot(c).budget > Duration::ZERO {
            notes.push(PolicyEvent::DeadlineMiss { vp });
        }
        let period = rules.end_period(ctx, vp, c, runnable, &mut notes);
        let s = R::slot_mut(c);
        let mut start = s.deadline;
        let mut skipped = 0;
        if now >= start + period {
            skipped = now.saturating_since(start).as_nanos() / period.as_nanos();
            start += Duration::from_nanos(skipped * period.as_nanos());
        }
        s.deadline = start + period;
        s.period = period;
        rules.start_period(ctx, vp, c, skipped, period);
        let s = R::slot_mut(c);
        s.budget = s.amount;
        s.over_rate = Duration::ZERO;
        s.exhausted = false;
        if tracing {
            notes.push(PolicyEvent::Replenish {
                vp,
                budget: s.amount,
            });
        }
        // Only a trace has notes to give (`Ctx::event` drops them
        // otherwise): skip the loop's setup when none is kept.
        if tracing {
            for e in notes {
                ctx.event(e);
            }
        }
    }

    /// Puts a child that just asked for the processor on its period grid.
    fn wake_child(&mut self, ctx: &mut Ctx<'_>, vp: VpId) {
        let now = ctx.now();
        let Some(i) = self.children.index_of(ctx, vp) else {
            return;
        };
        let c = self.children.at_mut(i).1;
        if !R::slot(c).started {
            let period = self.rules.first_period(ctx, vp, c);
            let s = R::slot_mut(c);
            s.started = true;
            s.deadline = now + period;
            s.period = period;
            s.budget = s.amount;
            s.over_rate = Duration::ZERO;
            s.exhausted = false;
            let budget = s.amount;
            if ctx.tracing() {
                ctx.event(PolicyEvent::Replenish { vp, budget });
            }
        } else if now >= R::slot(c).deadline {
            Self::roll(&mut self.rules, &mut self.eligible, ctx, vp, c, false);
        }
        // Budget beyond what the rules allow in what is left of the period
        // is over rate (module docs); none in a period that starts now.
        let s = R::slot_mut(c);
        let on_rate = R::on_rate(s, s.deadline.saturating_since(now));
        s.over_rate = s.over_rate.max(s.budget - on_rate);
        self.queue_event(i);
        Self::enter(&mut self.eligible, self.children.at_mut(i).1, vp);
    }

    /// Queues child `i`'s next replenishment at its deadline, replacing
    /// the one it had. The sequence number is fresh, so among
    /// replenishments due at the same time the one queued first comes
    /// first, as it always has.
    #[inline]
    fn queue_event(&mut self, i: usize) {
        let seq = self.next_seq;
        self.next_seq += 1;
        let at = R::slot(self.children.at(i).1).deadline;
        let e = Event {
            at,
            seq,
            child: i as u32,
        };
        self.events.queue::<R>(&mut self.children, e);
    }

    /// Processes the replenishments due at or before now. Most hooks find
    /// none due: that check is inlined into them, the work is not.
    #[inline]
    pub(crate) fn due_events(&mut self, ctx: &mut Ctx<'_>) {
        if self.events.heap.first().is_some_and(|e| e.at <= ctx.now()) {
            self.process_due_events(ctx);
        }
    }

    /// [`Budgets::due_events`] once one is due.
    #[inline(never)]
    fn process_due_events(&mut self, ctx: &mut Ctx<'_>) {
        let now = ctx.now();
        while let Some(&first) = self.events.heap.first() {
            if first.at > now {
                break;
            }
            // Its entry stays at the root until `queue_event` replaces it.
            let i = first.child as usize;
            let (vp, c) = self.children.at_mut(i);
            let runnable = ctx.vp_state(vp) != VpState::Waiting;
            Self::roll(&mut self.rules, &mut self.eligible, ctx, vp, c, runnable);
            self.queue_event(i);
            // A runnable child that is not running is ready, or was just
            // revoked (ready once the revocation applies).
            if runnable && self.running.is_none_or(|r| r.vp != vp) {
                Self::enter(&mut self.eligible, self.children.at_mut(i).1, vp);
            }
        }
    }

    /// Takes the first child off the eligible set. An entry whose VP is no
    /// longer ready (it released; the notification is still on its way) is
    /// dropped.
    fn pop_eligible(&mut self, ctx: &Ctx<'_>) -> Option<VpId> {
        loop {
            let (_, vp) = self.eligible.pop_first()?;
            if let Some(c) = self.children.get_mut(ctx, vp) {
                R::slot_mut(c).eligible = false;
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
    /// may already have released.
    #[inline(always)]
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
    /// parent's reason. Rare: kept out of the hooks that check for it.
    #[inline(never)]
    fn lose_cpu(&mut self, ctx: &mut Ctx<'_>, reason: RevokeReason) {
        self.cpu = None;
        if let Some(r) = self.running.take() {
            if ctx.vp_cpu(r.vp).is_some() {
                ctx.revoke(r.vp, reason);
                if let Some(c) = self.children.get_mut(ctx, r.vp) {
                    let s = R::slot_mut(c);
                    s.exhausted |= s.budget == Duration::ZERO;
                }
                self.add_eligible(ctx, r.vp);
            }
        }
    }

    /// Makes the decisions the protocol requires after any change: revoke
    /// an exhausted or outranked child, give a held processor to the first
    /// eligible child or release it, adjust the demand on the parent, and
    /// arm the timer.
    pub(crate) fn settle(&mut self, ctx: &mut Ctx<'_>) {
        if let Some(r) = self.running {
            let (budget, key) = match self.children.get(ctx, r.vp) {
                Some(c) => (R::slot(c).budget, Some(Self::key_of(c))),
                None => (Duration::ZERO, None),
            };
            if budget == Duration::ZERO {
                self.running = None;
                if let Some(c) = self.children.get_mut(ctx, r.vp) {
                    R::slot_mut(c).exhausted = true;
                }
                ctx.revoke(r.vp, RevokeReason::BudgetExhausted);
                if ctx.tracing() {
                    ctx.event(PolicyEvent::BudgetExhausted { vp: r.vp });
                }
            } else if self
                .eligible
                .first_key()
                .is_some_and(|k| key.is_some_and(|key| k < key))
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
                        let mark_recv = match self.charging {
                            Charging::Received { .. } => ctx.vp_received(vp),
                            Charging::Granted => Duration::ZERO,
                        };
                        self.running = Some(Running {
                            vp,
                            mark_at: ctx.now(),
                            mark_recv,
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

    /// The end of child `vp`'s current period, once its period grid has
    /// started (`Policy::child_deadline`).
    pub(crate) fn deadline(&self, ctx: &Ctx<'_>, vp: VpId) -> Option<Instant> {
        let s = R::slot(self.children.get(ctx, vp)?);
        (s.started && s.deadline != Instant::NEVER).then_some(s.deadline)
    }

    /// Arms the timer at the earliest of the tick, the next replenishment
    /// and the running child's budget exhaustion.
    pub(crate) fn arm(&mut self, ctx: &mut Ctx<'_>) {
        let mut at = self.tick;
        if let Some(e) = self.events.heap.first() {
            at = at.min(e.at);
        }
        if let Some(r) = self.running {
            if let Some(c) = self.children.get(ctx, r.vp) {
                let s = R::slot(c);
                let mut budget = s.budget;
                // A child on its rate may be outranked by a waiting one
                // once its budget is down to the part over its rate.
                if !Self::over_rate(s) && s.over_rate > Duration::ZERO && !self.eligible.is_empty()
                {
                    budget -= s.over_rate;
                }
                let slice = match self.charging {
                    Charging::Received { min_slice } => budget.max(min_slice),
                    Charging::Granted => budget,
                };
                at = at.min(r.mark_at + slice);
            }
        }
        // Re-arming at the armed time (or disarming a disarmed timer) is
        // a no-op in the HSI's timer heap, checked there in one lookup.
        ctx.set_timer(at);
    }
}

/// `Slot::event_pos` of a child without a replenishment.
const NO_EVENT: u32 = u32::MAX;

/// A child's place in the eligible order: within its rate before over it
/// (`false` first), then the policy's key, then registration order.
pub(crate) type Key<R> = (bool, <R as Rules>::Key, u64);

/// Admission loads (rez's utilizations, realrate's proportions) are
/// fixed-point fractions of the processor, `SHARE_ONE` to the whole, so
/// that sums are exact integers kept incrementally, and a checker that
/// adds them gets the same (`registry::Admission`). A load is rounded up
/// and a cap down; the tests allow one unit per child, the most rounding
/// up can add, so that loads whose exact sum is the cap are admitted.
pub(crate) const SHARE_ONE: u128 = 1 << 32;

/// A fraction of the processor in `SHARE_ONE` units, rounded up (a load).
pub(crate) fn share_up(x: f64) -> u128 {
    (x.max(0.0) * SHARE_ONE as f64).ceil() as u128
}

/// A fraction of the processor in `SHARE_ONE` units, rounded down (a cap).
pub(crate) fn share_down(x: f64) -> u128 {
    (x.max(0.0) * SHARE_ONE as f64).floor() as u128
}

/// One replenishment: when, the sequence number that orders replenishments
/// due at the same time (the one queued first comes first), and the
/// child's index in the children table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Event {
    at: Instant,
    seq: u64,
    child: u32,
}

/// The replenishments: a binary min-heap of [`Event`]s whose children
/// each keep their entry's position (`Slot::event_pos`), so that a child's
/// entry is taken out or replaced in O(log n) as soon as it is stale
/// instead of lingering until it reaches the top. Keys are unique (the
/// sequence numbers are), so entries leave in exactly the order of the
/// lazy heap this replaces.
#[derive(Debug, Default)]
struct EventHeap {
    heap: Vec<Event>,
}

impl EventHeap {
    /// Gives child `e.child` the entry `e`, replacing the one it has in
    /// place (a replenishment that came due is replaced at the root, with
    /// one sift instead of a pop and a push).
    #[inline]
    fn queue<R: Rules>(&mut self, children: &mut VpTable<R::Child>, e: Event) {
        let pos = R::slot(children.at(e.child as usize).1).event_pos;
        if pos == NO_EVENT {
            self.heap.push(e);
            self.up::<R>(children, self.heap.len() - 1, e);
        } else {
            self.fill::<R>(children, pos as usize, e);
        }
    }

    /// Takes child `i`'s entry out, if it has one.
    #[inline]
    fn unqueue<R: Rules>(&mut self, children: &mut VpTable<R::Child>, i: usize) {
        let s = R::slot_mut(children.at_mut(i).1);
        if s.event_pos != NO_EVENT {
            let pos = s.event_pos as usize;
            s.event_pos = NO_EVENT;
            self.remove_at::<R>(children, pos);
        }
    }

    /// Takes the entry at `pos` out (its child already forgot it).
    #[inline(never)]
    fn remove_at<R: Rules>(&mut self, children: &mut VpTable<R::Child>, pos: usize) {
        let Some(last) = self.heap.pop() else {
            return;
        };
        if pos < self.heap.len() {
            self.fill::<R>(children, pos, last);
        }
    }

    /// Puts `e` in the hole at `pos` and moves it to its place.
    #[inline]
    fn fill<R: Rules>(&mut self, children: &mut VpTable<R::Child>, pos: usize, e: Event) {
        if pos > 0 && e < self.heap[(pos - 1) / 2] {
            self.up::<R>(children, pos, e);
        } else {
            self.down::<R>(children, pos, e);
        }
    }

    /// Puts `e` at `pos` and tells its child.
    #[inline(always)]
    fn place<R: Rules>(&mut self, children: &mut VpTable<R::Child>, pos: usize, e: Event) {
        self.heap[pos] = e;
        R::slot_mut(children.at_mut(e.child as usize).1).event_pos = pos as u32;
    }

    /// Moves `e`, meant for the hole at `pos`, up to its place.
    fn up<R: Rules>(&mut self, children: &mut VpTable<R::Child>, mut pos: usize, e: Event) {
        while pos > 0 {
            let parent = (pos - 1) / 2;
            let p = self.heap[parent];
            if p <= e {
                break;
            }
            self.place::<R>(children, pos, p);
            pos = parent;
        }
        self.place::<R>(children, pos, e);
    }

    /// Moves `e`, meant for the hole at `pos`, down to its place.
    fn down<R: Rules>(&mut self, children: &mut VpTable<R::Child>, mut pos: usize, e: Event) {
        let n = self.heap.len();
        loop {
            let l = 2 * pos + 1;
            if l >= n {
                break;
            }
            let m = if l + 1 < n && self.heap[l + 1] < self.heap[l] {
                l + 1
            } else {
                l
            };
            let c = self.heap[m];
            if c >= e {
                break;
            }
            self.place::<R>(children, pos, c);
            pos = m;
        }
        self.place::<R>(children, pos, e);
    }
}

/// The eligible set: entries `(key, child)` with unique keys, kept sorted
/// from the largest key to the smallest, so the first child in eligible
/// order is the last entry and taking it moves nothing. The set holds at
/// most one entry per child; at the sizes a reservation scheduler has
/// (tens of children) a sorted vector costs a fraction of a B-tree's
/// insertions and removals (docs/measurements/simulator.md, "Reservation dispatch").
#[derive(Debug)]
struct Eligible<K> {
    by_key_desc: Vec<(K, VpId)>,
}

impl<K> Default for Eligible<K> {
    fn default() -> Self {
        Eligible {
            by_key_desc: Vec::new(),
        }
    }
}

impl<K: Ord + Copy> Eligible<K> {
    /// Where `key` is, or would go.
    #[inline]
    fn position(&self, key: K) -> usize {
        let v = &self.by_key_desc;
        // The set is usually a handful of entries: a scan is cheaper than
        // the out-of-line binary search, with the same answer.
        if v.len() <= 8 {
            v.iter().take_while(|&&(k, _)| k > key).count()
        } else {
            v.partition_point(|&(k, _)| k > key)
        }
    }

    /// Adds `vp` under `key`, which no entry has.
    #[inline]
    fn insert(&mut self, key: K, vp: VpId) {
        let at = self.position(key);
        debug_assert!(self.by_key_desc.get(at).is_none_or(|&(k, _)| k != key));
        self.by_key_desc.insert(at, (key, vp));
    }

    /// Removes the entry with `key`, if there is one.
    #[inline]
    fn remove(&mut self, key: K) {
        let at = self.position(key);
        if self.by_key_desc.get(at).is_some_and(|&(k, _)| k == key) {
            self.by_key_desc.remove(at);
        }
    }

    /// Whether an entry has `key`.
    fn contains(&self, key: K) -> bool {
        let at = self.position(key);
        self.by_key_desc.get(at).is_some_and(|&(k, _)| k == key)
    }

    /// The smallest key.
    #[inline]
    fn first_key(&self) -> Option<K> {
        self.by_key_desc.last().map(|&(k, _)| k)
    }

    /// Takes the entry with the smallest key.
    #[inline]
    fn pop_first(&mut self) -> Option<(K, VpId)> {
        self.by_key_desc.pop()
    }

    fn is_empty(&self) -> bool {
        self.by_key_desc.is_empty()
    }

    /// The entries, smallest key first.
    fn iter(&self) -> impl Iterator<Item = (K, VpId)> + '_ {
        self.by_key_desc.iter().rev().copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// The sorted vector against the map it replaced, on a long run of
    /// mixed operations: same first key, same pops, same order.
    #[test]
    fn eligible_set_behaves_as_an_ordered_map() {
        let mut set = Eligible::default();
        let mut map = BTreeMap::new();
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for step in 0..20_000u32 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let key = ((x % 64) as u32, (x >> 8) % 8);
            let vp = VpId(step);
            match x % 5 {
                0 | 1 if !map.contains_key(&key) => {
                    set.insert(key, vp);
                    map.insert(key, vp);
                }
                2 => {
                    set.remove(key);
                    map.remove(&key);
                }
                3 => assert_eq!(set.pop_first(), map.pop_first()),
                _ => assert_eq!(set.contains(key), map.contains_key(&key)),
            }
            assert_eq!(set.first_key(), map.first_key_value().map(|(k, _)| *k));
            assert_eq!(set.is_empty(), map.is_empty());
        }
        assert!(set.iter().eq(map.iter().map(|(k, v)| (*k, *v))));
    }
}
