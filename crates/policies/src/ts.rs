//! # Time sharing (`ts`)
//!
//! The HLS time-sharing scheduler of Regehr 2001, §9.3.1: a multiprocessor
//! priority and round-robin scheduler "very much like the native Windows
//! 2000 scheduler", that handles revocation, schedules any number of
//! processors, and can instead act as a fixed-priority scheduler without
//! time slicing.
//!
//! ## Algorithm
//! Each child has a base priority in 1..=31 (Windows' range; 0 is Windows'
//! zero-page thread and is not offered). With `k` processors held, the `k`
//! children with the highest effective priority run; §9.3.1's invariant holds
//! after every input: *no child is ready while a lower-priority child runs*
//! (a waking child that outranks a running one preempts it at once; a
//! child whose processor the parent revokes takes the processor of a
//! lower-priority sibling).
//!
//! `mode = "rr"` (default) adds round robin: a running child that has
//! received `quantum` of CPU time since its quantum began gives its
//! processor to a ready child of equal or higher priority and goes to the
//! back of its priority; with no such rival it starts a new quantum in
//! place. Quanta are counted in CPU time actually received
//! ([`Ctx::vp_received`], net of stolen time), so a child preempted or
//! revoked mid-quantum keeps the rest of its quantum and its place at the
//! front of its priority; a child that wakes up starts a fresh quantum at the
//! back. When several quanta end at once, the children that have waited
//! longest in the queue yield first, one per waiting rival.
//!
//! Starvation boost (rr mode), after Windows' balance set manager: a ready
//! child with base priority below 15 that has not run for `starvation` since
//! it last became ready is raised to priority 15 (the highest time-sharing
//! priority, Regehr 2001, §5.2.2.5) for one quantum of CPU time, then drops back
//! to its base priority and the back of its queue. Regehr 2001, §5.2.2.5 says
//! Windows 2000 boosts a thread that is "runnable but does not get to run for
//! more than about three seconds"; the balance set manager scans once a
//! second for threads ready for about 300 clock ticks (3–4.7 s depending on
//! the tick). We take 3 s and check it exactly (the instance timer fires
//! when the oldest waiter reaches it) rather than by a once-a-second scan,
//! which keeps the boost deterministic and independent of a tick. Windows
//! also doubles the boosted quantum; we give one quantum as HLS does not
//! vary quanta (§9.3.1: "does not support variable sized scheduling
//! quanta").
//!
//! `mode = "fp"` is §9.3.1's "non-preemptive fixed-priority" mode: no quanta
//! and no boosts, so a child keeps its processor until it blocks or a
//! higher-priority child needs it (equal priorities run first come, first
//! served). We read "non-preemptive" as "not preempted by the clock": a
//! higher-priority child still preempts, because §9.3.1 states the
//! invariant above for the scheduler as a whole.
//!
//! ## Parameters
//! | side | key | kind | default | meaning |
//! |---|---|---|---|---|
//! | instance | `mode` | `"rr"` or `"fp"` | `"rr"` | round robin with quanta, or fixed priority without |
//! | instance | `quantum` | duration | `30ms` | CPU time per turn (rr only) |
//! | instance | `starvation` | duration | `3s` | ready this long without running earns a boost; `"0s"` turns boosts off (rr only) |
//! | child | `priority` | integer 1..=31 | `8` | base priority (Windows' normal priority is 8) |
//!
//! The 30 ms quantum is Windows 2000 Professional's: two clock ticks of the
//! 15.6 ms multiprocessor HAL (Regehr 2001, §10.4 uses that HAL). Giving
//! `quantum` or `starvation` with `mode = "fp"` is refused, as they would
//! have no effect. `Msg::SetParams { priority }` changes a child's base
//! priority at run time (ending a boost if the new base is 15 or more).
//!
//! ## Guarantees (Table 5.1)
//! `NULL ↦ NULL⁺` (§5.3.1.6): TS makes no promise to its children and so
//! accepts any guarantee.

use crate::fp::{param_err, Entry, PrioSet, Run};
use crate::registry::{check_child_params, merge_change, PolicyInfo};
use hsched_core::{
    CpuId, Ctx, Duration, Instant, Msg, ParamSpec, Params, Policy, PolicyError, PolicyEvent,
    RevokeReason, VpId,
};
use std::cmp::Reverse;
use std::collections::binary_heap::{BinaryHeap, PeekMut};

/// Lowest child priority.
pub const MIN_PRIORITY: i64 = 1;
/// Highest child priority.
pub const MAX_PRIORITY: i64 = 31;
/// Default child priority (Windows' normal priority).
pub const DEFAULT_PRIORITY: i64 = 8;
/// Priority of a starvation boost: the highest time-sharing priority.
pub const BOOST_PRIORITY: i64 = 15;
/// Default quantum.
pub const DEFAULT_QUANTUM: Duration = Duration::from_millis(30);
/// Default starvation threshold.
pub const DEFAULT_STARVATION: Duration = Duration::from_secs(3);

/// Registry entry.
pub const INFO: PolicyInfo = PolicyInfo {
    name: "ts",
    summary: "multiprocessor priority + round-robin time sharing like Windows 2000, with a starvation boost",
    source: "Regehr 2001, §9.3.1, §5.3.1.6",
    instance_params: &[
        ParamSpec { key: "mode", kind: "\"rr\" or \"fp\"", default: "rr", doc: "round robin with quanta, or fixed priority without time slicing" },
        ParamSpec { key: "quantum", kind: "duration", default: "30ms", doc: "CPU time per turn (rr only)" },
        ParamSpec {
            key: "starvation",
            kind: "duration",
            default: "3s",
            doc: "a ready child that has not run for this long runs one quantum at priority 15; 0s turns it off (rr only)",
        },
    ],
    child_params: &[ParamSpec { key: "priority", kind: "integer 1..=31", default: "8", doc: "base priority; higher runs first" }],
    change_params: &[],
    max_children: None,
    min_parents: 1,
    max_parents: 1,
    build,
    check_child: |p| Ts::priority(p).map(drop),
    exclusive: None,
    admission: None,
    merge_change: crate::registry::merge_change,
};

fn build(params: &Params) -> Result<Box<dyn Policy>, PolicyError> {
    Ok(Box::new(Ts::from_params(params)?))
}

/// How a TS instance treats children of equal priority.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Round robin with quanta and starvation boosts.
    RoundRobin,
    /// Fixed priority: no quanta, no boosts.
    FixedPriority,
}

#[derive(Clone, Debug)]
struct Kid {
    base: i64,
    /// Received CPU time when the current quantum began.
    mark: Duration,
    boosted: bool,
}

/// The time-sharing scheduler.
#[derive(Debug)]
pub struct Ts {
    set: PrioSet<Kid>,
    mode: Mode,
    quantum: Duration,
    /// `None`: boosts off.
    starvation: Option<Duration>,
    /// Scratch list of (queue position, child) for `on_clock`.
    expiring: Vec<(u64, VpId)>,
    /// The earliest boost due among the ready children, as `arm` last
    /// found it by a pass over them (indexed sets only).
    boost: BoostMemo,
    /// The (since, child) of every ready child that could be boosted when
    /// it was built, earliest first; entries go stale as children leave or
    /// change, and are dropped when they come to the top (see
    /// `Ts::next_boost`).
    boostable: BinaryHeap<Reverse<(Instant, VpId)>>,
    /// Whether `boostable` was built since the last pass of `find_boost`.
    boostable_fresh: bool,
    /// Quantum ends of the running children, earliest first, as lower
    /// bounds (see `Ts::earliest_quantum_end`); only while the set is
    /// wide.
    ends: BinaryHeap<Reverse<(Instant, VpId)>>,
    /// Scratch list for `PrioSet::take_started`.
    started: Vec<VpId>,
}

/// `arm`'s memory of the earliest starvation boost due, so that it need not
/// look through every ready child on each request and release.
///
/// The earliest boost due is `min(since) + starvation` over the ready
/// children that can be boosted. A pass at time `t` finds it. It stays
/// exact while the children that left the ready queue since all had
/// boosts due after it (`PrioSet::left_since`: none of them was the
/// earliest), and no ready child's `since`, `boosted` or `base` changes,
/// except for children that join the queue: they join with `since` now,
/// no earlier than `t`, so their boosts come no earlier than
/// `t + starvation`, which is no earlier than the remembered one (every
/// child in the pass had `since` at most `t`), unless there was none. So
/// the memo is used only when it holds a boost. A child that rejoins with
/// an older `since` (a revoked grant that never took effect) sets
/// `left_since` to zero; the hooks that change `boosted`, `base` or a
/// ready child's `since` otherwise (`timer`, `msg`, a request from a child
/// already ready) forget the memo.
#[derive(Debug, Clone, Copy)]
struct BoostMemo {
    valid: bool,
    /// The earliest boost due, `Instant::NEVER` for none.
    at: Instant,
}

impl Ts {
    /// An instance from its `[[scheduler]]` parameters.
    ///
    /// # Errors
    /// An unknown mode, a zero quantum, or `quantum`/`starvation` given in
    /// fp mode.
    pub fn from_params(params: &Params) -> Result<Self, PolicyError> {
        let mode = match params.str("mode")? {
            None | Some("rr") => Mode::RoundRobin,
            Some("fp") => Mode::FixedPriority,
            Some(other) => {
                return Err(param_err(
                    "mode",
                    format!("unknown mode `{other}`; expected \"rr\" or \"fp\""),
                ))
            }
        };
        let quantum = params.duration("quantum")?;
        let starvation = params.duration("starvation")?;
        if mode == Mode::FixedPriority {
            for (key, v) in [("quantum", quantum), ("starvation", starvation)] {
                if v.is_some() {
                    return Err(param_err(key, "has no effect with mode = \"fp\" (no time slicing); remove it or use mode = \"rr\""));
                }
            }
        }
        let quantum = quantum.unwrap_or(DEFAULT_QUANTUM);
        if quantum == Duration::ZERO {
            return Err(param_err("quantum", "must be longer than zero"));
        }
        let starvation = match starvation {
            None => Some(DEFAULT_STARVATION),
            Some(Duration::ZERO) => None,
            Some(s) => Some(s),
        };
        let mut set = PrioSet::new();
        if mode == Mode::RoundRobin {
            set.track_started();
        }
        Ok(Ts {
            set,
            mode,
            quantum,
            starvation,
            expiring: Vec::new(),
            boost: BoostMemo {
                valid: false,
                at: Instant::NEVER,
            },
            boostable: BinaryHeap::new(),
            boostable_fresh: false,
            ends: BinaryHeap::new(),
            started: Vec::new(),
        })
    }

    /// The mode.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    fn priority(params: &Params) -> Result<Option<i64>, PolicyError> {
        check_child_params(&INFO, params)?;
        match params.i64("priority")? {
            Some(p) if !(MIN_PRIORITY..=MAX_PRIORITY).contains(&p) => Err(param_err(
                "priority",
                format!("{p} is out of range; expected {MIN_PRIORITY}..={MAX_PRIORITY}"),
            )),
            p => Ok(p),
        }
    }

    fn rr(&self) -> bool {
        self.mode == Mode::RoundRobin
    }

    #[inline]
    fn used(&self, ctx: &Ctx<'_>, i: usize) -> Duration {
        let (vp, e) = self.set.kids.at(i);
        ctx.vp_received(vp) - e.extra.mark
    }

    #[inline]
    fn fresh_quantum(&mut self, ctx: &Ctx<'_>, i: usize) {
        let (vp, e) = self.set.kids.at_mut(i);
        e.extra.mark = ctx.vp_received(vp);
    }

    #[inline]
    fn unboost(&mut self, i: usize) {
        let e = self.set.kids.at_mut(i).1;
        e.extra.boosted = false;
        let base = e.extra.base;
        self.set.set_prio(i, base);
    }

    #[inline]
    fn boostable(&self, i: usize) -> bool {
        let e = self.set.kids.at(i).1;
        e.run == Run::Ready && !e.extra.boosted && e.extra.base < BOOST_PRIORITY
    }

    /// Ends used-up quanta (rotating among equal priorities) and boosts
    /// starving children.
    fn on_clock(&mut self, ctx: &mut Ctx<'_>) {
        if !self.rr() {
            return;
        }
        let round = self.set.take_seq();
        // Queue positions are unique, so sorting by them alone is a total
        // order; the scratch list keeps this hook free of allocations.
        let mut expiring = std::mem::take(&mut self.expiring);
        expiring.clear();
        if self.set.indexed() {
            for i in self.set.running_kids() {
                let (vp, e) = self.set.kids.at(i);
                if !e.busy && self.used(ctx, i) >= self.quantum {
                    expiring.push((e.seq, vp));
                }
            }
        } else {
            for i in 0..self.set.kids.len() {
                let (vp, e) = self.set.kids.at(i);
                if matches!(e.run, Run::Running(_)) && !e.busy && self.used(ctx, i) >= self.quantum
                {
                    expiring.push((e.seq, vp));
                }
            }
        }
        expiring.sort_unstable_by_key(|&(seq, _)| seq);
        let mut claimed = 0;
        // By VP: preempting reorders nothing, but keep indices honest.
        for &(_, vp) in &expiring {
            let Some(i) = self.set.kids.index_of(ctx, vp) else {
                continue;
            };
            self.unboost(i);
            self.fresh_quantum(ctx, i);
            let prio = self.set.kids.at(i).1.prio;
            let rival = |e: &Entry<Kid>| !e.busy && e.seq < round && e.prio >= prio;
            let rivals = if self.set.indexed() {
                // The ready children of priority `prio` or more are the
                // back of the queue. Only whether there are more than
                // `claimed` matters, so the count stops there.
                self.set
                    .ready_kids()
                    .rev()
                    .map(|j| self.set.kids.at(j).1)
                    .take_while(|e| e.prio >= prio)
                    .filter(|e| rival(e))
                    .take(claimed + 1)
                    .count()
            } else {
                self.set
                    .kids
                    .iter()
                    .filter(|(_, e)| e.run == Run::Ready && rival(e))
                    .count()
            };
            if rivals > claimed {
                claimed += 1;
                self.set.preempt(ctx, i, RevokeReason::Preempted, true);
            }
        }
        self.expiring = expiring;
        if let Some(starve) = self.starvation {
            let now = ctx.now();
            if self.set.indexed() && self.set.since_floor() + starve > now {
                // No ready child has waited that long.
                return;
            }
            for i in 0..self.set.kids.len() {
                if self.boostable(i) && self.set.kids.at(i).1.since + starve <= now {
                    self.fresh_quantum(ctx, i);
                    self.set.set_prio(i, BOOST_PRIORITY);
                    let (vp, e) = self.set.kids.at_mut(i);
                    e.extra.boosted = true;
                    if ctx.tracing() {
                        ctx.event(PolicyEvent::Note(format!(
                            "starvation boost: {vp} to priority {BOOST_PRIORITY}"
                        )));
                    }
                }
            }
        }
    }

    /// The earliest starvation boost due (`starvation` = `s`) by a pass over
    /// the ready children of an indexed set; makes the floor exact and
    /// remembers the boost (see `BoostMemo`). Out of line: most calls of
    /// `arm` find the memo good.
    #[inline(never)]
    fn find_boost(&mut self, s: Duration) -> Instant {
        #[cfg(test)]
        tests::PASSES.with(|p| p.set(p.get() + 1));
        // `+ s` saturates, so it keeps order: add it once to the minimum.
        let mut floor = Instant::NEVER;
        let mut oldest = Instant::NEVER;
        self.set.for_each_ready(|e| {
            floor = floor.min(e.since);
            if !e.extra.boosted && e.extra.base < BOOST_PRIORITY {
                oldest = oldest.min(e.since);
            }
        });
        // `next_boost` rebuilds it when it needs it.
        self.boostable_fresh = false;
        let boost = oldest + s;
        self.set.set_since_floor(floor);
        self.set.forget_left();
        self.boost = BoostMemo {
            valid: true,
            at: boost,
        };
        boost
    }

    /// The earliest boost due after children left the ready queue, one of
    /// which may have been the earliest: the first entry of `boostable`
    /// that is still as it was built. Children not in it joined the queue
    /// since, with `since` no earlier than that, so none comes before it;
    /// changes that break this (a boost, a new base, a child back with an
    /// older `since`) forget the memo, and only a pass follows them. Each
    /// entry is dropped once, and a build is paid for by the entries it
    /// makes, so a move of `n` children costs `O(n log n)` rather than a
    /// pass per child.
    fn next_boost(&mut self, ctx: &Ctx<'_>, s: Duration) -> Instant {
        if !self.boostable_fresh {
            let mut heap = std::mem::take(&mut self.boostable).into_vec();
            heap.clear();
            for i in self.set.ready_kids() {
                let (vp, e) = self.set.kids.at(i);
                if !e.extra.boosted && e.extra.base < BOOST_PRIORITY {
                    heap.push(Reverse((e.since, vp)));
                }
            }
            self.boostable = BinaryHeap::from(heap);
            self.boostable_fresh = true;
        }
        while let Some(&Reverse((since, vp))) = self.boostable.peek() {
            let current = self.set.kids.index_of(ctx, vp).is_some_and(|i| {
                let e = self.set.kids.at(i).1;
                e.run == Run::Ready
                    && e.since == since
                    && !e.extra.boosted
                    && e.extra.base < BOOST_PRIORITY
            });
            if current {
                let boost = since + s;
                self.set.forget_left();
                self.boost.at = boost;
                return boost;
            }
            self.boostable.pop();
        }
        self.find_boost(s)
    }

    /// The quantum end of running child `i` (of VP `vp`) as seen now.
    #[inline(always)]
    fn quantum_end(&self, ctx: &Ctx<'_>, vp: VpId, i: usize) -> Instant {
        let used = ctx.vp_received(vp) - self.set.kids.at(i).1.extra.mark;
        ctx.now() + (self.quantum - used)
    }

    /// The earliest quantum end of the running children of a wide set,
    /// from `ends` rather than a pass over them.
    ///
    /// A child's quantum end seen at time `t`, `t + (quantum - (received -
    /// mark))` (saturating), never moves earlier as `t` grows: its received
    /// time grows no faster than `t` (slower when time is stolen), and a
    /// new quantum sets `mark` to the received time, which puts the end at
    /// `t + quantum`, the latest it can be. So an end computed once stays
    /// a lower bound for that child, running or not. `ends` holds such a
    /// bound for every running child (pushed when it starts running) and
    /// stale entries for children that stopped; the top is checked against
    /// the child's current end and moved down until a top is exact, which
    /// is then no later than any other child's end.
    #[inline(never)]
    fn earliest_quantum_end(&mut self, ctx: &Ctx<'_>) -> Instant {
        let mut started = std::mem::take(&mut self.started);
        self.set.take_started(&mut started);
        for &vp in &started {
            if let Some(i) = self.set.kids.index_of(ctx, vp) {
                if matches!(self.set.kids.at(i).1.run, Run::Running(_)) {
                    let at = self.quantum_end(ctx, vp, i);
                    self.ends.push(Reverse((at, vp)));
                }
            }
        }
        started.clear();
        self.started = started;
        if self.ends.len() > 2 * self.set.running() + 64 {
            self.ends.clear();
            for i in self.set.running_kids() {
                let vp = self.set.kids.at(i).0;
                let at = self.quantum_end(ctx, vp, i);
                self.ends.push(Reverse((at, vp)));
            }
        }
        let mut next = Instant::NEVER;
        let (set, quantum, now) = (&self.set, self.quantum, ctx.now());
        while let Some(mut top) = self.ends.peek_mut() {
            let Reverse((at, vp)) = *top;
            match set.kids.index_of(ctx, vp) {
                Some(i) if matches!(set.kids.at(i).1.run, Run::Running(_)) => {
                    let used = ctx.vp_received(vp) - set.kids.at(i).1.extra.mark;
                    let exact = now + (quantum - used);
                    debug_assert!(exact >= at, "a quantum end moved earlier");
                    if exact <= at {
                        next = exact;
                        break;
                    }
                    *top = Reverse((exact, vp));
                }
                _ => {
                    PeekMut::pop(top);
                }
            }
        }
        #[cfg(debug_assertions)]
        {
            let scan = self
                .set
                .running_kids()
                .map(|i| self.quantum_end(ctx, self.set.kids.at(i).0, i))
                .min()
                .unwrap_or(Instant::NEVER);
            assert_eq!(next, scan, "quantum ends out of step");
        }
        next
    }

    /// Arms the timer for the next quantum end or starvation boost.
    #[inline(always)]
    fn arm(&mut self, ctx: &mut Ctx<'_>) {
        if !self.rr() {
            return;
        }
        let now = ctx.now();
        let mut next = Instant::NEVER;
        if self.set.indexed() {
            // As below, over the running and the ready children only.
            if self.set.wide() {
                next = self.earliest_quantum_end(ctx);
            } else {
                for i in self.set.running_kids() {
                    let (vp, e) = self.set.kids.at(i);
                    let used = ctx.vp_received(vp) - e.extra.mark;
                    next = next.min(now + (self.quantum - used));
                }
            }
            if let Some(s) = self.starvation {
                // Every ready child's boost is at or after the floor's, so
                // only look when that could come first; then make the floor
                // exact and remember the earliest boost (see `BoostMemo`).
                if self.set.since_floor() + s < next {
                    let memo = self.boost;
                    if memo.valid
                        && memo.at != Instant::NEVER
                        && self.set.left_since() + s > memo.at
                    {
                        #[cfg(debug_assertions)]
                        {
                            let exact = self
                                .set
                                .ready_kids()
                                .map(|i| self.set.kids.at(i).1)
                                .filter(|e| !e.extra.boosted && e.extra.base < BOOST_PRIORITY)
                                .map(|e| e.since + s)
                                .min();
                            assert_eq!(exact, Some(memo.at), "boost memo out of step");
                        }
                        next = next.min(memo.at);
                    } else if memo.valid
                        && memo.at != Instant::NEVER
                        && self.set.left_since() != Instant::ZERO
                    {
                        next = next.min(self.next_boost(ctx, s));
                    } else {
                        next = next.min(self.find_boost(s));
                    }
                }
            }
        } else {
            // As `used` and `boostable`, in one pass over the children.
            for (vp, e) in self.set.kids.iter() {
                if matches!(e.run, Run::Running(_)) {
                    let used = ctx.vp_received(vp) - e.extra.mark;
                    next = next.min(now + (self.quantum - used));
                } else if let Some(s) = self.starvation {
                    if e.run == Run::Ready && !e.extra.boosted && e.extra.base < BOOST_PRIORITY {
                        next = next.min(e.since + s);
                    }
                }
            }
        }
        set_timer(ctx, next);
    }

    /// The general path of `grant`, out of line so that the one-child
    /// shortcut keeps a small frame.
    #[inline(never)]
    fn grant_general(&mut self, ctx: &mut Ctx<'_>, parent_vp: VpId, cpu: CpuId) {
        if self.set.parent_granted(ctx, parent_vp, cpu) {
            self.settle(ctx);
        }
    }

    /// The general path of `revoke` (see `grant_general`).
    #[inline(never)]
    fn revoke_general(&mut self, ctx: &mut Ctx<'_>, parent_vp: VpId, reason: RevokeReason) {
        self.set.parent_revoked(ctx, parent_vp, reason);
        self.settle(ctx);
    }

    /// Plans and queues the actions, then re-arms the timer; the hook has
    /// called `begin`.
    #[inline]
    fn settle(&mut self, ctx: &mut Ctx<'_>) {
        self.set.settle(ctx);
        self.arm(ctx);
    }
}

impl Policy for Ts {
    fn policy_name(&self) -> &'static str {
        "ts"
    }

    fn init(&mut self, ctx: &mut Ctx<'_>) {
        self.set.parents.init(ctx);
    }

    fn register_vp(
        &mut self,
        ctx: &mut Ctx<'_>,
        vp: VpId,
        params: &Params,
    ) -> Result<(), PolicyError> {
        let base = Self::priority(params)?.unwrap_or(DEFAULT_PRIORITY);
        self.set.add(
            ctx,
            vp,
            base,
            Kid {
                base,
                mark: Duration::ZERO,
                boosted: false,
            },
        );
        Ok(())
    }

    fn unregister_vp(&mut self, ctx: &mut Ctx<'_>, vp: VpId) {
        self.set.remove(ctx, vp);
    }

    fn request(&mut self, ctx: &mut Ctx<'_>, vp: VpId) {
        if let Some((i, before)) = self.set.request(ctx, vp) {
            if before == Run::Ready {
                // A ready child's `since` moved later (see `BoostMemo`).
                self.boost.valid = false;
            }
            self.unboost(i);
            self.fresh_quantum(ctx, i);
        }
        self.set.begin(ctx);
        self.settle(ctx);
    }

    fn release(&mut self, ctx: &mut Ctx<'_>, vp: VpId) {
        if let Some(i) = self.set.release(ctx, vp) {
            self.unboost(i);
        }
        self.set.begin(ctx);
        self.settle(ctx);
    }

    fn grant(&mut self, ctx: &mut Ctx<'_>, parent_vp: VpId, cpu: CpuId) {
        let Some((vp, e)) = self.set.solo_granted(ctx, parent_vp, cpu) else {
            return self.grant_general(ctx, parent_vp, cpu);
        };
        // `arm` for the one child, now running: its quantum end is the only
        // deadline.
        if self.mode == Mode::RoundRobin {
            let used = ctx.vp_received(vp) - e.extra.mark;
            set_timer(ctx, ctx.now() + (self.quantum - used));
        }
    }

    fn revoke(&mut self, ctx: &mut Ctx<'_>, parent_vp: VpId, reason: RevokeReason) {
        let Some((_, e)) = self.set.solo_revoked(ctx, parent_vp, reason) else {
            return self.revoke_general(ctx, parent_vp, reason);
        };
        // `arm` for the one child, ready since now: its starvation boost, if
        // it can have one, is the only deadline.
        if self.mode == Mode::RoundRobin {
            let next = match self.starvation {
                Some(s) if !e.extra.boosted && e.extra.base < BOOST_PRIORITY => e.since + s,
                _ => Instant::NEVER,
            };
            set_timer(ctx, next);
        }
    }

    fn timer(&mut self, ctx: &mut Ctx<'_>) {
        // Boosts change ready children.
        self.boost.valid = false;
        self.set.begin(ctx);
        self.on_clock(ctx);
        self.settle(ctx);
    }

    fn msg(&mut self, ctx: &mut Ctx<'_>, vp: VpId, msg: &Msg) -> Result<(), PolicyError> {
        let Msg::SetParams(params) = msg else {
            return Err(PolicyError::Unsupported(format!(
                "ts accepts only SetParams {{ priority }}, not {msg:?}"
            )));
        };
        let Some(i) = self.set.kids.index_of(ctx, vp) else {
            return Err(PolicyError::Refused(format!(
                "{vp} is not a child of this ts scheduler"
            )));
        };
        let Some(base) = Self::priority(params)? else {
            return Ok(());
        };
        self.boost.valid = false;
        let e = self.set.kids.at_mut(i).1;
        e.extra.base = base;
        if !e.extra.boosted || base >= BOOST_PRIORITY {
            e.extra.boosted = false;
            self.set.set_prio(i, base);
        }
        let merged = merge_change(ctx.vp_params(vp), params);
        ctx.set_vp_params(vp, merged);
        self.set.begin(ctx);
        self.settle(ctx);
        Ok(())
    }

    fn check_invariants(&self, ctx: &Ctx<'_>) -> Result<(), String> {
        self.set.check(ctx)
    }

    fn describe(&self) -> String {
        match self.mode {
            Mode::FixedPriority => "mode=fp".into(),
            Mode::RoundRobin => match self.starvation {
                Some(s) => format!("mode=rr quantum={} starvation={s}", self.quantum),
                None => format!("mode=rr quantum={} starvation=off", self.quantum),
            },
        }
    }
}

/// Arms the instance timer for `next`, or disarms it for `Instant::NEVER`.
///
/// Re-arming at the armed time, or disarming a disarmed timer, changes
/// nothing, and the timer heap sees that itself from the instance's slot
/// (`Timers::set` and `cancel` return at once), so asking for the armed time
/// first would only repeat that look-up.
#[inline(always)]
fn set_timer(ctx: &mut Ctx<'_>, next: Instant) {
    ctx.set_timer(next);
}

#[cfg(test)]
mod tests {
    //! The one-child shortcuts (`PrioSet::solo_granted`, `solo_revoked` and
    //! the timer arithmetic after them) against the general path.

    use hsched_core::{
        CpuId, Hsi, InstanceId, Instant, Node, ParamValue, Params, ParentLink, ParentRef, ThreadId,
        TraceEvent,
    };

    fn us(x: u64) -> Instant {
        Instant(x * 1_000)
    }

    thread_local! {
        /// Passes of `find_boost` over the ready children, on this test's
        /// thread.
        pub(super) static PASSES: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    }

    /// Moving the ready children of a large instance away, oldest first,
    /// removes the earliest boost each time: the next one comes from
    /// `boostable`, not from a pass over every ready child per move (which
    /// made `set-default` with `move_threads` quadratic).
    #[test]
    fn moving_ready_children_away_takes_no_pass_per_child() {
        let mut hsi = Hsi::new(1);
        let top = vec![ParentLink {
            parent: ParentRef::Top {
                cpus: vec![CpuId(0)],
            },
            params: Params::new(),
        }];
        let t0 = Instant(0);
        let root = hsi.create_instance(t0, "root", policy("fp"), top).unwrap();
        let s = |v: &str| ParamValue::Str(v.into());
        let ts = |q: &str| {
            let p = Params::new()
                .with("quantum", s(q))
                .with("starvation", s("5ms"));
            crate::build("ts", &p).expect("builds")
        };
        let at = |p: i64| {
            vec![ParentLink {
                parent: ParentRef::Instance(root),
                params: Params::new().with("priority", ParamValue::Int(p)),
            }]
        };
        let a = hsi.create_instance(t0, "a", ts("100ms"), at(2)).unwrap();
        let b = hsi.create_instance(t0, "b", ts("100ms"), at(1)).unwrap();
        let n = 2_000u64;
        let threads: Vec<ThreadId> = (0..n)
            .map(|k| {
                let t = hsi
                    .create_thread(t0, &format!("t{k}"), a, Params::new())
                    .unwrap();
                // Ready since `k` us: the oldest first in creation order.
                hsi.wake(us(k), t).unwrap();
                t
            })
            .collect();
        let before = PASSES.with(|p| p.get());
        for &t in &threads {
            hsi.move_thread(us(n + 1000), t, b, Params::new()).unwrap();
        }
        let passes = PASSES.with(|p| p.get()) - before;
        assert!(passes < 10, "{passes} passes for {n} moves");
        assert!(hsi.instance_children(a).is_empty());
        assert_eq!(hsi.instance_children(b).len(), n as usize);
    }

    fn policy(kind: &str) -> Box<dyn hsched_core::Policy> {
        let s = |v: &str| ParamValue::Str(v.into());
        let (name, p) = match kind {
            // Quantum and starvation shorter than the root's quantum, so
            // that quanta end and boosts happen inside the chains.
            "rr" => (
                "ts",
                Params::new()
                    .with("quantum", s("700us"))
                    .with("starvation", s("400us")),
            ),
            "tsfp" => ("ts", Params::new().with("mode", s("fp"))),
            "root" => ("ts", Params::new().with("quantum", s("1ms"))),
            _ => ("fp", Params::new()),
        };
        crate::build(name, &p).expect("builds")
    }

    fn under(p: InstanceId) -> Vec<ParentLink> {
        vec![ParentLink {
            parent: ParentRef::Instance(p),
            params: Params::new(),
        }]
    }

    /// A root TS time-slicing among three chains of one-child instances
    /// (TS rr, TS fp, FP in turn), each ending in a thread, driven through
    /// quantum ends, boosts, blocks and wakes; returns the trace with VP
    /// numbers left out and threads named. With `padded`, every chain
    /// instance first has nine children that leave at once, so it keeps
    /// the index of large sets and never takes the one-child shortcuts.
    fn run(padded: bool) -> Vec<String> {
        let mut hsi = Hsi::new(1);
        hsi.set_checking(true);
        hsi.set_tracing(true);
        let top = vec![ParentLink {
            parent: ParentRef::Top {
                cpus: vec![CpuId(0)],
            },
            params: Params::new(),
        }];
        let t0 = Instant(0);
        let root = hsi
            .create_instance(t0, "root", policy("root"), top)
            .unwrap();
        let kinds = ["rr", "tsfp", "fp", "rr"];
        let mut threads: Vec<ThreadId> = Vec::new();
        for chain in 0..3 {
            let mut parent = root;
            for (level, kind) in kinds.iter().enumerate().skip(chain).take(3) {
                let name = format!("c{chain}-{level}");
                parent = hsi
                    .create_instance(t0, &name, policy(kind), under(parent))
                    .unwrap();
                if padded {
                    let pads: Vec<ThreadId> = (0..9)
                        .map(|k| {
                            let pad = format!("{name}-pad{k}");
                            hsi.create_thread(t0, &pad, parent, Params::new()).unwrap()
                        })
                        .collect();
                    for t in pads {
                        hsi.exit(t0, t).unwrap();
                    }
                }
            }
            let t = hsi
                .create_thread(t0, &format!("t{chain}"), parent, Params::new())
                .unwrap();
            hsi.wake(t0, t).unwrap();
            threads.push(t);
        }
        // Quantum ends and boosts by the timers, with a thread blocking
        // now and then and waking later, until 100 ms.
        let mut blocked: Option<(ThreadId, Instant)> = None;
        let mut step = 0;
        while let Some(at) = hsi.next_timer().filter(|&at| at < us(100_000)) {
            hsi.fire_timers(at).unwrap();
            step += 1;
            match blocked {
                Some((t, until)) if at >= until => {
                    hsi.wake(at, t).unwrap();
                    blocked = None;
                }
                None if step % 5 == 0 => {
                    let t = threads[step % 3];
                    hsi.block(at, t).unwrap();
                    blocked = Some((t, at + hsched_core::Duration::from_micros(1_300)));
                }
                _ => {}
            }
        }
        let mut trace: Vec<TraceEvent> = Vec::new();
        hsi.drain_trace(&mut trace);
        trace
            .iter()
            .map(|e| {
                let mut kind = format!("{:?}", e.kind);
                for t in (0..hsi.thread_count() as u32).rev() {
                    let name = hsi.thread_name(ThreadId(t));
                    kind = kind.replace(&format!("{:?}", Node::Thread(ThreadId(t))), name);
                }
                // VP numbers differ with the padding: leave them out.
                let mut out = String::with_capacity(kind.len());
                let mut rest = kind.as_str();
                while let Some(k) = rest.find("vp") {
                    out.push_str(&rest[..k + 2]);
                    rest = rest[k + 2..].trim_start_matches(|c: char| c.is_ascii_digit());
                }
                out.push_str(rest);
                format!("{} {out}", e.at)
            })
            .collect()
    }

    /// Runs `hsi` from 0 to `end` in steps of `step_us`: the timers due
    /// within a step fire, then each thread `flip(step)` names blocks if
    /// `awake`, wakes if not. Returns the trace.
    fn churn<const K: usize>(
        hsi: &mut Hsi,
        threads: &[ThreadId],
        awake: &mut [bool],
        step_us: u64,
        end: Instant,
        flip: impl Fn(usize) -> [usize; K],
    ) -> Vec<TraceEvent> {
        let mut now = Instant(0);
        let mut step = 0usize;
        while now < end {
            let tick = now + hsched_core::Duration::from_micros(step_us);
            while let Some(at) = hsi.next_timer().filter(|&at| at <= tick) {
                hsi.fire_timers(at).unwrap();
            }
            now = tick;
            step += 1;
            for k in flip(step) {
                if awake[k] {
                    hsi.block(now, threads[k]).unwrap();
                } else {
                    hsi.wake(now, threads[k]).unwrap();
                }
                awake[k] = !awake[k];
            }
        }
        let mut trace: Vec<TraceEvent> = Vec::new();
        hsi.drain_trace(&mut trace);
        trace
    }

    /// A large (indexed) round-robin instance on two processors whose
    /// children block and wake often while others starve: `arm`'s boost
    /// memo is checked against a pass over the ready children at every use
    /// (a debug assertion), and the run must reach the paths that use it.
    #[test]
    fn boost_memo_matches_a_pass_over_the_ready_children() {
        let mut hsi = Hsi::new(2);
        hsi.set_checking(true);
        hsi.set_tracing(true);
        let top = vec![ParentLink {
            parent: ParentRef::Top {
                cpus: vec![CpuId(0), CpuId(1)],
            },
            params: Params::new(),
        }];
        let t0 = Instant(0);
        let ts = hsi.create_instance(t0, "ts", policy("rr"), top).unwrap();
        // Priorities 10 run first; the 8s starve until boosted; a 20 is
        // never boosted.
        let prios = [10, 10, 10, 8, 8, 8, 8, 8, 8, 8, 20, 10];
        let threads: Vec<ThreadId> = prios
            .iter()
            .enumerate()
            .map(|(k, &p)| {
                let params = Params::new().with("priority", ParamValue::Int(p));
                hsi.create_thread(t0, &format!("t{k}"), ts, params).unwrap()
            })
            .collect();
        for &t in &threads[..10] {
            hsi.wake(t0, t).unwrap();
        }
        // Every 150 us one thread blocks and another wakes, in a fixed
        // rotation, between the timers' quantum ends and boosts.
        let mut awake: Vec<bool> = (0..threads.len()).map(|k| k < 10).collect();
        let n = threads.len();
        let trace = churn(&mut hsi, &threads, &mut awake, 150, us(60_000), |step| {
            [(step * 7) % n]
        });
        let boosts = trace
            .iter()
            .filter(|e| format!("{:?}", e.kind).contains("starvation boost"))
            .count();
        assert!(boosts > 20, "{boosts} boosts");
    }

    /// A wide round-robin instance (more parent VPs and children than
    /// `fp::SMALL_SET`) under a fixed-priority root whose own threads take
    /// processors from it now and then: the wide indexes (the parents' bit
    /// sets and free entries, the running children by rank, the quantum
    /// ends) are checked against passes at every input (the invariant
    /// checks and debug assertions), and the run must reach the paths that
    /// use them.
    #[test]
    fn wide_instance_indexes_match_the_passes() {
        let cpus = 12u32;
        let mut hsi = Hsi::new(cpus as usize);
        hsi.set_checking(true);
        hsi.set_tracing(true);
        let top = vec![ParentLink {
            parent: ParentRef::Top {
                cpus: (0..cpus).map(CpuId).collect(),
            },
            params: Params::new(),
        }];
        let t0 = Instant(0);
        let root = hsi.create_instance(t0, "root", policy("fp"), top).unwrap();
        let ts = hsi
            .create_instance(t0, "ts", policy("rr"), under(root))
            .unwrap();
        let prio = |p: i64| Params::new().with("priority", ParamValue::Int(p));
        // Threads of the root outrank the whole TS instance.
        let mut threads: Vec<ThreadId> = (0..3)
            .map(|k| {
                hsi.create_thread(t0, &format!("rt{k}"), root, prio(5))
                    .unwrap()
            })
            .collect();
        let prios = [8, 8, 10, 8, 12, 8, 8, 10, 20, 8];
        for k in 0..36 {
            let p = prio(prios[k % prios.len()]);
            threads.push(hsi.create_thread(t0, &format!("t{k}"), ts, p).unwrap());
        }
        let mut awake: Vec<bool> = (0..threads.len()).map(|k| (3..30).contains(&k)).collect();
        for (k, &t) in threads.iter().enumerate() {
            if awake[k] {
                hsi.wake(t0, t).unwrap();
            }
        }
        let n = threads.len();
        let trace = churn(&mut hsi, &threads, &mut awake, 90, us(40_000), |step| {
            [(step * 7) % n, (step * 11 + 3) % n]
        });
        let count = |what: &str| {
            trace
                .iter()
                .filter(|e| format!("{:?}", e.kind).contains(what))
                .count()
        };
        assert!(count("Grant") > 700, "{} grants", count("Grant"));
        assert!(count("Revoke") > 500, "{} revocations", count("Revoke"));
        assert!(
            count("starvation boost") > 400,
            "{} boosts",
            count("starvation boost")
        );
    }

    #[test]
    fn one_child_shortcuts_decide_as_the_general_path() {
        let fast = run(false);
        let general = run(true);
        let count = |what: &str| fast.iter().filter(|e| e.contains(what)).count();
        // The run exercises what the shortcuts do: grants and revocations
        // through the chains, quanta ending inside them, boosts.
        assert!(count("Grant") > 300, "{} grants", count("Grant"));
        assert!(count("Revoke") > 200, "{} revocations", count("Revoke"));
        assert!(
            count("starvation boost") > 50,
            "{} boosts",
            count("starvation boost")
        );
        assert!(count("Timer") > 200, "{} timer events", count("Timer"));
        assert_eq!(fast.len(), general.len());
        for (i, (a, b)) in fast.iter().zip(&general).enumerate() {
            assert_eq!(a, b, "trace event {i} differs");
        }
    }
}
