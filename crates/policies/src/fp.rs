//! # Fixed priority (`fp`)
//!
//! Preemptive fixed-priority scheduling of child VPs: Regehr 2001, §5.3.1.1,
//! the FP scheduler of Figure 1.1, and the root of the §4.4 example ("FP, by
//! design, will always revoke the CPU from TS in response to a request from
//! RES").
//!
//! ## Algorithm
//! Each child VP has an integer priority; higher runs first. Children of
//! equal priority are served first come, first served by the time they
//! asked for a processor. A child that loses its processor (to a more
//! important sibling, or because the parent took it) keeps its place, so it
//! runs before equal-priority children that asked later.
//!
//! The scheduler is multiprocessor: it registers one VP per processor its
//! parent can offer, and with `k` processors held it runs the `k`
//! highest-priority ready children. A child that becomes ready with a higher
//! priority than the least important running child preempts that child at
//! once ([`RevokeReason::Preempted`]) and receives its processor; it also
//! asks the parent for one more processor. When the parent revokes a
//! processor, the child on it loses it with the *same* reason the parent
//! gave (so a budget exhaustion seen above reaches the Join or Limit below);
//! if that child outranks another running child, the other child is
//! preempted and the revoked child moves to its processor, so no ready child
//! ever waits while a lower-priority one runs.
//!
//! ## Parameters
//! | side | key | kind | default | meaning |
//! |---|---|---|---|---|
//! | instance | `unique_priorities` | bool | `false` | refuse a child whose priority another child already has (§5.3.1.1's admission control) |
//! | child | `priority` | integer | `0` | higher runs first |
//!
//! `Msg::SetParams { priority }` changes a child's priority at run time; the
//! schedule is re-evaluated at once.
//!
//! ## Guarantees (Table 5.1)
//! `any ↦ (any, NULL⁺)`: the highest-priority child receives whatever
//! guarantee FP receives, every other child receives NULL. The pass-through
//! is exact only with one child per priority (`unique_priorities = true`);
//! otherwise equal-priority children share the top guarantee.
//!
//! ## Shared machinery
//! This file also holds `Parents` and `PrioSet` (crate-private), the
//! multiprocessor bookkeeping that `ts`, `limit`, `join`, `best`,
//! `best-rate` and `linux24` reuse: an eager view of VP states and a fixed
//! order of actions that stay correct when a hook of this instance runs
//! nested inside the application of its own earlier actions (see the
//! comment above `Run`). With more than eight children `PrioSet` keeps the
//! ready children in one FIFO per priority and the child planned on each
//! processor, so a decision is a look at the queue's top and at the
//! processors rather than a pass over every child (docs/measurements/simulator.md,
//! "Indexed priority sets" and "The time-sharing leaf, cut further"). An
//! instance with more than eight parent VPs (one under a many-processor
//! parent) also keeps its parent VPs by state as bit sets, finds a parent
//! VP's entry through the VP's tag, and keeps its running children by rank,
//! so that the usual hook costs about the same on 64 processors as on 2
//! (docs/measurements/simulator.md, "Independent of the processor count"). One child
//! under one parent VP, the commonest shape in a deep hierarchy, takes a
//! shortcut for the grant and the revocation that carry a context switch
//! through it (docs/measurements/core-and-policies.md, "Context switch through the
//! hierarchy").

use crate::registry::{check_child_params, merge_change, PolicyInfo};
use hsched_core::{
    CpuId, Ctx, Instant, Msg, ParamError, ParamSpec, Params, Policy, PolicyError, RevokeReason,
    Side, VpId, VpState, VpTable,
};
use std::cmp::Reverse;
use std::collections::{BTreeSet, VecDeque};

/// Registry entry.
pub const INFO: PolicyInfo = PolicyInfo {
    name: "fp",
    summary:
        "preemptive fixed priority over child VPs, multiprocessor, FIFO among equal priorities",
    source: "Regehr 2001, §5.3.1.1, Fig 1.1, §4.4",
    instance_params: &[ParamSpec {
        key: "unique_priorities",
        kind: "bool",
        default: "false",
        doc: "refuse a child whose priority another child already has",
    }],
    child_params: &[ParamSpec {
        key: "priority",
        kind: "integer",
        default: "0",
        doc: "higher runs first",
    }],
    change_params: &[],
    max_children: None,
    min_parents: 1,
    max_parents: 1,
    build,
    check_child: crate::registry::no_child_check,
    exclusive: Some(exclusive),
    admission: None,
    merge_change: crate::registry::merge_change,
};

fn build(params: &Params) -> Result<Box<dyn Policy>, PolicyError> {
    Ok(Box::new(Fp::from_params(params)?))
}

/// The registry's [`PolicyInfo::exclusive`]: under `unique_priorities`,
/// each child holds its priority (parameters a checker has accepted).
fn exclusive(instance: &Params, child: &Params) -> Option<(&'static str, i64)> {
    let unique = matches!(instance.bool("unique_priorities"), Ok(Some(true)));
    let prio = child.i64("priority").ok().flatten().unwrap_or(0);
    unique.then_some(("priority", prio))
}

/// Why a unique-priority fp refuses a child of priority `prio`.
fn taken_message(prio: i64) -> String {
    format!("priority {prio} is taken and this fp scheduler admits one child per priority")
}

/// The fixed-priority scheduler.
#[derive(Debug)]
pub struct Fp {
    set: PrioSet<()>,
    unique: bool,
}

impl Default for Fp {
    fn default() -> Self {
        Fp {
            set: PrioSet::new(),
            unique: false,
        }
    }
}

impl Fp {
    /// An instance from its `[[scheduler]]` parameters.
    ///
    /// # Errors
    /// `unique_priorities` is not a boolean.
    pub fn from_params(params: &Params) -> Result<Self, PolicyError> {
        let unique = params.bool("unique_priorities")?.unwrap_or(false);
        Ok(Fp {
            set: PrioSet::new(),
            unique,
        })
    }

    fn priority(params: &Params) -> Result<Option<i64>, PolicyError> {
        check_child_params(&INFO, params)?;
        Ok(params.i64("priority")?)
    }

    /// Whether another child than `vp`'s holds `prio`. A child instance on
    /// several processors registers a VP per processor, all with its one
    /// priority: they do not make it taken for each other.
    fn taken(&self, ctx: &Ctx<'_>, prio: i64, vp: VpId) -> bool {
        let child = ctx.vp_child(vp);
        self.set
            .kids
            .iter()
            .any(|(v, e)| e.prio == prio && ctx.vp_child(v) != child)
    }

    /// Plans and queues the actions; the hook has called `begin`.
    fn settle(&mut self, ctx: &mut Ctx<'_>) {
        self.set.settle(ctx);
    }
}

impl Policy for Fp {
    fn policy_name(&self) -> &'static str {
        "fp"
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
        let prio = Self::priority(params)?.unwrap_or(0);
        if self.unique && self.taken(ctx, prio, vp) {
            return Err(PolicyError::Refused(taken_message(prio)));
        }
        self.set.add(ctx, vp, prio, ());
        Ok(())
    }

    fn unregister_vp(&mut self, ctx: &mut Ctx<'_>, vp: VpId) {
        self.set.remove(ctx, vp);
    }

    fn request(&mut self, ctx: &mut Ctx<'_>, vp: VpId) {
        self.set.request(ctx, vp);
        self.set.begin(ctx);
        self.settle(ctx);
    }

    fn release(&mut self, ctx: &mut Ctx<'_>, vp: VpId) {
        self.set.release(ctx, vp);
        self.set.begin(ctx);
        self.settle(ctx);
    }

    fn grant(&mut self, ctx: &mut Ctx<'_>, parent_vp: VpId, cpu: CpuId) {
        if self.set.solo_granted(ctx, parent_vp, cpu).is_none()
            && self.set.parent_granted(ctx, parent_vp, cpu)
        {
            self.settle(ctx);
        }
    }

    fn revoke(&mut self, ctx: &mut Ctx<'_>, parent_vp: VpId, reason: RevokeReason) {
        if self.set.solo_revoked(ctx, parent_vp, reason).is_none() {
            self.set.parent_revoked(ctx, parent_vp, reason);
            self.settle(ctx);
        }
    }

    fn msg(&mut self, ctx: &mut Ctx<'_>, vp: VpId, msg: &Msg) -> Result<(), PolicyError> {
        let Msg::SetParams(params) = msg else {
            return Err(PolicyError::Unsupported(format!(
                "fp accepts only SetParams {{ priority }}, not {msg:?}"
            )));
        };
        let Some(i) = self.set.kids.index_of(ctx, vp) else {
            return Err(PolicyError::Refused(format!(
                "{vp} is not a child of this fp scheduler"
            )));
        };
        let Some(prio) = Self::priority(params)? else {
            return Ok(());
        };
        if self.unique && self.taken(ctx, prio, vp) {
            return Err(PolicyError::Refused(taken_message(prio)));
        }
        self.set.set_prio(i, prio);
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
        if self.unique {
            "unique_priorities=true".into()
        } else {
            String::new()
        }
    }
}

/// A `ParamError` for `key`.
pub(crate) fn param_err(key: &str, message: impl Into<String>) -> PolicyError {
    PolicyError::Param(ParamError {
        key: key.to_string(),
        message: message.into(),
    })
}

// ----- shared machinery ------------------------------------------------------
//
// The HSI applies the actions of a hook only after the hook returns, one by
// one, delivering each one's notifications (and applying the receivers'
// actions) before the next. A notification for an instance whose actions
// are still being applied waits until they all are (the HSI never nests a
// policy's hooks), so when it arrives the VPs may already have moved on:
// a grant may have been revoked since, a request withdrawn, and the
// notifications saying so follow in order. Three rules keep the policies
// here correct:
//
// 1. An eager view. Each policy updates its own idea of every VP's state
//    when it queues an action, and a hook acts only on VPs whose state the
//    HSI agrees with (*settled* ones); an unsettled VP has a notification
//    still to come, which settles it.
// 2. Stale news is dropped: a grant is taken only if the VP still runs on
//    that processor, a request only if the VP is still ready. Revocations
//    and releases are facts and always processed.
// 3. A fixed order of actions within a hook: revocations from children
//    first, then releases of parent VPs (asking ones before held ones, so a
//    parent re-granting a freed processor never lands on a VP about to be
//    released), then grants to children, then requests to parents. So the
//    reactions to a revocation cannot invalidate a grant queued before it.
//
// Policies also keep revocation quiet: revoked, they stay asking for the
// processor and leave any release to a later notification or their timer,
// so a parent that revokes and re-grants in one hook finds its plan valid.

/// Where a VP stands as this instance last arranged it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub(crate) enum Run {
    /// Not asking for a processor.
    #[default]
    Waiting,
    /// Asking for a processor.
    Ready,
    /// Holding this processor.
    Running(CpuId),
}

impl Run {
    pub(crate) fn of(s: VpState) -> Run {
        match s {
            VpState::Waiting => Run::Waiting,
            VpState::Ready => Run::Ready,
            VpState::Running(c) => Run::Running(c),
        }
    }

    pub(crate) fn cpu(self) -> Option<CpuId> {
        match self {
            Run::Running(c) => Some(c),
            _ => None,
        }
    }
}

/// The eager view of this instance's parent VPs, indexed by their position
/// in [`Ctx::parent_vps`] (declaration order), with counts of the asking
/// and held ones so that hooks skip the passes that have nothing to do.
///
/// A wide view (more than [`SMALL_SET`] parent VPs, as an instance under a
/// many-processor parent has) also keeps its entries by state as bit sets,
/// so that the passes that request, release or look for free processors
/// visit only the entries concerned, in the same (ascending or descending)
/// order as a pass over the view, and finds a parent VP's entry through the
/// VP's tag rather than a search.
#[derive(Debug, Default)]
pub(crate) struct Parents {
    view: Vec<Run>,
    /// Entries of `view` that are `Ready`.
    asking: usize,
    /// Entries of `view` that are `Running`.
    held: usize,
    /// Whether the bit sets below are kept (the view is wide).
    bits: bool,
    /// Entries of `view` that are `Ready`.
    asking_bits: Bits,
    /// Entries of `view` that are `Running`.
    held_bits: Bits,
    /// Entries of `view` that are `Running(c)` with `c` not `occupied`:
    /// held processors without a child planned on them.
    free_bits: Bits,
    /// Processors (by index) with a child planned on them, as the owner
    /// reports through [`Parents::occupy`] (only an indexed `PrioSet`).
    occupied: Bits,
    /// The entry of `view` that is `Running` on each processor (by
    /// index), [`NO_PARENT`] for none.
    cpu_parent: Vec<u32>,
}

/// `Parents::cpu_parent` of a processor no parent VP holds.
const NO_PARENT: u32 = u32::MAX;

/// A set of small indices as a bit set; reads past its end are empty.
#[derive(Debug, Default, Clone)]
struct Bits(Vec<u64>);

impl Bits {
    #[inline(always)]
    fn put(&mut self, i: usize, on: bool) {
        let w = i >> 6;
        if w >= self.0.len() {
            if !on {
                return;
            }
            self.0.resize(w + 1, 0);
        }
        let b = 1u64 << (i & 63);
        if on {
            self.0[w] |= b;
        } else {
            self.0[w] &= !b;
        }
    }

    #[inline(always)]
    fn get(&self, i: usize) -> bool {
        self.0.get(i >> 6).is_some_and(|w| w >> (i & 63) & 1 != 0)
    }

    /// Word `w`, empty past the end.
    #[inline(always)]
    fn word(&self, w: usize) -> u64 {
        self.0.get(w).copied().unwrap_or(0)
    }

    fn clear(&mut self) {
        self.0.iter_mut().for_each(|w| *w = 0);
    }
}

impl Parents {
    /// Builds the view from the HSI when the set of parent VPs changed (at
    /// `init`, or if a hook arrives first).
    #[inline]
    pub(crate) fn ensure(&mut self, ctx: &Ctx<'_>) {
        if self.view.len() != ctx.parent_vps().len() {
            self.rebuild(ctx);
        }
    }

    /// [`Parents::ensure`] at `init`: also stores each parent VP's index in
    /// its tag, so that a wide view finds it without a search. (The parent
    /// VPs of an instance do not change after `init` while it runs; a tag
    /// is checked before use all the same, and a search is the fallback.)
    pub(crate) fn init(&mut self, ctx: &mut Ctx<'_>) {
        self.ensure(ctx);
        for i in 0..ctx.parent_vps().len() {
            let vp = ctx.parent_vps()[i];
            ctx.set_parent_tag(vp, i as u32);
        }
    }

    fn rebuild(&mut self, ctx: &Ctx<'_>) {
        self.view = ctx
            .parent_vps()
            .iter()
            .map(|&p| Run::of(ctx.vp_state(p)))
            .collect();
        self.asking = self.view.iter().filter(|r| **r == Run::Ready).count();
        self.held = self.view.iter().filter(|r| r.cpu().is_some()).count();
        self.bits = self.view.len() > SMALL_SET;
        self.asking_bits.clear();
        self.held_bits.clear();
        self.free_bits.clear();
        self.cpu_parent.iter_mut().for_each(|p| *p = NO_PARENT);
        if self.bits {
            for i in 0..self.view.len() {
                self.set_bits(i, Run::Waiting, self.view[i]);
            }
        }
    }

    /// Changes `view[i]`, keeping the counts.
    #[inline]
    fn set(&mut self, i: usize, r: Run) {
        let old = std::mem::replace(&mut self.view[i], r);
        self.asking = self.asking - (old == Run::Ready) as usize + (r == Run::Ready) as usize;
        self.held = self.held - old.cpu().is_some() as usize + r.cpu().is_some() as usize;
        if self.bits {
            self.set_bits(i, old, r);
        }
    }

    /// `set`'s update of the bit sets: entry `i` went from `old` to `r`.
    /// Out of line, so that `set` stays small for narrow views.
    #[inline(never)]
    fn set_bits(&mut self, i: usize, old: Run, r: Run) {
        self.asking_bits.put(i, r == Run::Ready);
        self.held_bits.put(i, r.cpu().is_some());
        if let Run::Running(c) = old {
            if let Some(p) = self.cpu_parent.get_mut(c.index()) {
                if *p == i as u32 {
                    *p = NO_PARENT;
                }
            }
        }
        match r {
            Run::Running(c) => {
                if self.cpu_parent.len() <= c.index() {
                    self.cpu_parent.resize(c.index() + 1, NO_PARENT);
                }
                debug_assert_eq!(
                    self.cpu_parent[c.index()],
                    NO_PARENT,
                    "two parent VPs hold {c}"
                );
                self.cpu_parent[c.index()] = i as u32;
                self.free_bits.put(i, !self.occupied.get(c.index()));
            }
            _ => self.free_bits.put(i, false),
        }
    }

    /// Records whether a child is planned on processor `c` (a wide
    /// `PrioSet` reports every change), which decides whether the entry
    /// holding `c` is free.
    #[inline(always)]
    fn occupy(&mut self, c: CpuId, on: bool) {
        self.occupied.put(c.index(), on);
        if let Some(&p) = self.cpu_parent.get(c.index()) {
            if p != NO_PARENT {
                self.free_bits.put(p as usize, !on);
            }
        }
    }

    /// Forgets every processor's occupation (before reporting them anew).
    fn clear_occupied(&mut self) {
        self.occupied.clear();
        for i in 0..self.view.len() {
            if self.bits && self.view[i].cpu().is_some() {
                self.free_bits.put(i, true);
            }
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.view.len()
    }

    #[inline]
    fn index(&self, ctx: &Ctx<'_>, vp: VpId) -> Option<usize> {
        if self.bits {
            // A tag that names `vp`'s own entry is right (parent VPs are
            // distinct); any other falls back to the search.
            let i = ctx.parent_tag(vp) as usize;
            if ctx.parent_vps().get(i) == Some(&vp) {
                debug_assert_eq!(Some(i), ctx.parent_vps().iter().position(|&p| p == vp));
                return Some(i);
            }
        }
        ctx.parent_vps().iter().position(|&p| p == vp)
    }

    #[inline]
    fn settled(&self, ctx: &Ctx<'_>, i: usize) -> bool {
        ctx.parent_vps()
            .get(i)
            .is_some_and(|&p| Run::of(ctx.vp_state(p)) == self.view[i])
    }

    /// Parent VP `vp` was granted `cpu`. Returns its index when the grant
    /// is wanted; `None` when this instance has released the VP since, or
    /// the VP no longer runs on `cpu` (a safeguard: the HSI drops a grant
    /// that went stale while waiting, with its matching revocation, before
    /// delivering it).
    #[inline]
    pub(crate) fn on_grant(&mut self, ctx: &Ctx<'_>, vp: VpId, cpu: CpuId) -> Option<usize> {
        self.ensure(ctx);
        let i = self.index(ctx, vp)?;
        if ctx.vp_state(vp) != VpState::Running(cpu) {
            return None;
        }
        match self.view[i] {
            Run::Waiting => None,
            _ => {
                self.set(i, Run::Running(cpu));
                Some(i)
            }
        }
    }

    /// Parent VP `vp` lost its processor; returns its index and the
    /// processor when the view had it running there.
    #[inline]
    pub(crate) fn on_revoke(&mut self, ctx: &Ctx<'_>, vp: VpId) -> Option<(usize, CpuId)> {
        self.ensure(ctx);
        let i = self.index(ctx, vp)?;
        match self.view[i] {
            Run::Running(c) => {
                self.set(i, Run::Ready);
                Some((i, c))
            }
            _ => None,
        }
    }

    /// Processors held, as (parent index, processor), in parent order.
    pub(crate) fn held(&self) -> impl Iterator<Item = (usize, CpuId)> + '_ {
        let view = if self.held == 0 {
            &[][..]
        } else {
            &self.view[..]
        };
        view.iter()
            .enumerate()
            .filter_map(|(i, r)| r.cpu().map(|c| (i, c)))
    }

    /// Parent VPs asking for a processor.
    #[inline]
    pub(crate) fn asking(&self) -> usize {
        self.asking
    }

    /// Requests parent `i` if it is settled and waiting.
    #[inline]
    pub(crate) fn request(&mut self, ctx: &mut Ctx<'_>, i: usize) -> bool {
        if self.view[i] == Run::Waiting && self.settled(ctx, i) {
            self.set(i, Run::Ready);
            let vp = ctx.parent_vps()[i];
            ctx.request(vp);
            true
        } else {
            false
        }
    }

    /// Releases parent `i` (its request or its processor) if it is settled
    /// and not waiting.
    #[inline]
    pub(crate) fn release(&mut self, ctx: &mut Ctx<'_>, i: usize) -> bool {
        if self.view[i] != Run::Waiting && self.settled(ctx, i) {
            self.set(i, Run::Waiting);
            let vp = ctx.parent_vps()[i];
            ctx.release(vp);
            true
        } else {
            false
        }
    }

    /// Requests waiting parents in order, or releases asking ones from the
    /// back, until `want` parents are asking (never touching held ones).
    /// Policies that also grant in the same hook should prefer
    /// [`Parents::ask_at_most`] before their grants and
    /// [`Parents::ask_at_least`] after them.
    pub(crate) fn set_asking(&mut self, ctx: &mut Ctx<'_>, want: usize) {
        self.ask_at_least(ctx, want);
        self.ask_at_most(ctx, want);
    }

    /// Releases asking parents from the back until at most `want` ask.
    #[inline]
    pub(crate) fn ask_at_most(&mut self, ctx: &mut Ctx<'_>, want: usize) {
        if self.asking > want {
            self.release_asking(ctx, want);
        }
    }

    fn release_asking(&mut self, ctx: &mut Ctx<'_>, want: usize) {
        let mut asking = self.asking;
        if self.bits {
            // The asking entries from the back, as the pass below visits
            // them; releasing one changes only its own bit.
            let mut w = self.view.len().div_ceil(64);
            while asking > want && w > 0 {
                w -= 1;
                let mut m = self.asking_bits.word(w);
                while m != 0 && asking > want {
                    let b = 63 - m.leading_zeros() as usize;
                    m &= !(1u64 << b);
                    asking -= self.release(ctx, w * 64 + b) as usize;
                }
            }
            return;
        }
        let mut i = self.view.len();
        while asking > want && i > 0 {
            i -= 1;
            if self.view[i] == Run::Ready {
                asking -= self.release(ctx, i) as usize;
            }
        }
    }

    /// Requests waiting parents in order until at least `want` ask.
    #[inline]
    pub(crate) fn ask_at_least(&mut self, ctx: &mut Ctx<'_>, want: usize) {
        // Only waiting parents can be requested: with none (every parent
        // asking or held, the usual state of a busy instance) skip the pass.
        if self.asking < want && self.asking + self.held < self.view.len() {
            self.request_waiting(ctx, want);
        }
    }

    fn request_waiting(&mut self, ctx: &mut Ctx<'_>, want: usize) {
        let mut asking = self.asking;
        if self.bits {
            // The waiting entries in order, as the pass below visits them
            // (`request` acts on no other); requesting one changes only its
            // own bits.
            let n = self.view.len();
            for w in 0..n.div_ceil(64) {
                let valid = if (w + 1) * 64 <= n {
                    u64::MAX
                } else {
                    (1u64 << (n - w * 64)) - 1
                };
                let mut m = !(self.asking_bits.word(w) | self.held_bits.word(w)) & valid;
                while m != 0 && asking < want {
                    let b = m.trailing_zeros() as usize;
                    m &= m - 1;
                    asking += self.request(ctx, w * 64 + b) as usize;
                }
                if asking >= want {
                    break;
                }
            }
            return;
        }
        let mut i = 0;
        while asking < want && i < self.view.len() {
            asking += self.request(ctx, i) as usize;
            i += 1;
        }
    }

    /// Releases every held processor for which `used` is false.
    #[inline(always)]
    pub(crate) fn release_idle(&mut self, ctx: &mut Ctx<'_>, used: impl Fn(CpuId) -> bool) {
        if self.held > 0 {
            self.release_unused(ctx, used);
        }
    }

    fn release_unused(&mut self, ctx: &mut Ctx<'_>, used: impl Fn(CpuId) -> bool) {
        // Releasing parent `i` changes only `view[i]`, so one pass in
        // parent order sees the same held set as a list taken first.
        if self.bits {
            for w in 0..self.view.len().div_ceil(64) {
                let mut m = self.held_bits.word(w);
                while m != 0 {
                    let i = w * 64 + m.trailing_zeros() as usize;
                    m &= m - 1;
                    if let Run::Running(c) = self.view[i] {
                        if !used(c) {
                            self.release(ctx, i);
                        }
                    }
                }
            }
            return;
        }
        for i in 0..self.view.len() {
            if let Run::Running(c) = self.view[i] {
                if !used(c) {
                    self.release(ctx, i);
                }
            }
        }
    }

    /// Queues a hook's plan in the fixed order of rule 3 above, for owners
    /// that collect their child actions first (`best`, `best-rate`,
    /// `linux24`): the planned revocations; releases of the asking parents
    /// beyond `unserved` (ready children without a processor) and of the
    /// held processors that `used` says no child runs on; the planned
    /// grants; requests until `unserved` parents ask.
    pub(crate) fn queue_plan(
        &mut self,
        ctx: &mut Ctx<'_>,
        revokes: &mut Vec<(VpId, RevokeReason)>,
        grants: &mut Vec<(VpId, CpuId)>,
        unserved: usize,
        used: impl Fn(CpuId) -> bool,
    ) {
        for (vp, reason) in revokes.drain(..) {
            ctx.revoke(vp, reason);
        }
        self.ask_at_most(ctx, unserved);
        self.release_idle(ctx, used);
        for (vp, cpu) in grants.drain(..) {
            ctx.grant(vp, cpu);
        }
        self.ask_at_least(ctx, unserved);
    }

    /// Releases every held processor that no child is planned on, as
    /// `release_idle` with that test would, from the free entries (only
    /// for a wide view whose owner reports every processor's occupation).
    #[inline]
    fn release_free(&mut self, ctx: &mut Ctx<'_>) {
        debug_assert!(self.bits);
        for w in 0..self.view.len().div_ceil(64) {
            let mut m = self.free_bits.word(w);
            while m != 0 {
                let i = w * 64 + m.trailing_zeros() as usize;
                m &= m - 1;
                self.release(ctx, i);
            }
        }
    }

    /// The bit sets match the view (wide views only).
    fn check_bits(&self) -> Result<(), String> {
        for (i, &r) in self.view.iter().enumerate() {
            let want = (r == Run::Ready, r.cpu().is_some());
            if (self.asking_bits.get(i), self.held_bits.get(i)) != want {
                return Err(format!("the bit sets of parent {i} are out of step"));
            }
            let free = r.cpu().is_some_and(|c| {
                self.cpu_parent.get(c.index()) == Some(&(i as u32)) && !self.occupied.get(c.index())
            });
            if self.free_bits.get(i) != free {
                return Err(format!("the free bit of parent {i} is out of step"));
            }
        }
        Ok(())
    }

    /// Child `vp` is where this instance believes (`run`), and runs only
    /// on a processor this instance holds.
    pub(crate) fn check_child(&self, ctx: &Ctx<'_>, vp: VpId, run: Run) -> Result<(), String> {
        if Run::of(ctx.vp_state(vp)) != run {
            return Err(format!(
                "believes child {vp} is {run:?} but it is {:?}",
                ctx.vp_state(vp)
            ));
        }
        match run.cpu() {
            Some(c) if !self.view.contains(&Run::Running(c)) => Err(format!(
                "child {vp} runs on {c}, which this scheduler does not hold"
            )),
            _ => Ok(()),
        }
    }

    /// Every parent VP is settled (true after each input).
    pub(crate) fn check(&self, ctx: &Ctx<'_>) -> Result<(), String> {
        let parents = ctx.parent_vps();
        if self.view.len() != parents.len() {
            return Err(format!(
                "tracks {} parent VPs but has {}",
                self.view.len(),
                parents.len()
            ));
        }
        let (mut asking, mut held) = (0, 0);
        for (&p, &r) in parents.iter().zip(&self.view) {
            if Run::of(ctx.vp_state(p)) != r {
                return Err(format!(
                    "believes parent {p} is {r:?} but it is {:?}",
                    ctx.vp_state(p)
                ));
            }
            asking += (r == Run::Ready) as usize;
            held += r.cpu().is_some() as usize;
        }
        if (asking, held) != (self.asking, self.held) {
            return Err(format!(
                "counts {} asking and {} held parent VPs but the view has {asking} and {held}",
                self.asking, self.held
            ));
        }
        if self.bits {
            self.check_bits()?;
        }
        Ok(())
    }
}

/// One child of a priority scheduler.
#[derive(Clone, Debug)]
pub(crate) struct Entry<E> {
    /// Effective priority; higher runs first.
    pub prio: i64,
    /// Queue position: lower was queued earlier (FIFO among equals).
    pub seq: u64,
    /// Eager state.
    pub run: Run,
    /// Unsettled when the current hook began: a notification about it is
    /// still to come, so this hook leaves it alone.
    pub busy: bool,
    /// When it last became ready (woke, or lost its processor).
    pub since: Instant,
    /// Policy-specific data.
    pub extra: E,
}

/// Children ranked by (priority, queue position) on any number of
/// processors: the dispatch core of `fp` and `ts`.
///
/// A hook updates the entry its notification is about, calls
/// [`PrioSet::begin`], plans with [`PrioSet::preempt`] and
/// [`PrioSet::rebalance`], and ends with [`PrioSet::finish`], so that the
/// actions go out in the order described above: planned revocations are
/// queued at once (nothing else is queued while planning), planned grants
/// wait for `finish`, which queues the parent releases before them and the
/// parent requests after them.
#[derive(Debug)]
pub(crate) struct PrioSet<E> {
    pub kids: VpTable<Entry<E>>,
    pub parents: Parents,
    next_seq: u64,
    grants: Vec<(VpId, CpuId)>,
    /// Children whose eager state is `Ready` / `Running` (kept by
    /// `set_run`: change `Entry::run` through it only).
    ready: usize,
    running: usize,
    /// The ready children by rank, lowest first: `(prio, Reverse(seq))`,
    /// unique because queue positions are. Kept by `set_run`, `set_prio`
    /// and `set_seq`, so the best ready child is found without a scan.
    queue: ReadyQueue,
    /// The child (index in `kids`) planned to run on each processor (by
    /// processor index), kept by `set_run`: finds the child on a processor,
    /// and the running children, without a scan.
    on: Vec<Option<u32>>,
    /// Entries whose `busy` flag is set.
    busy: usize,
    /// No later than the `since` of any ready child (kept with `queue`):
    /// lets a policy skip looking for long-waiting children.
    since_floor: Instant,
    /// The earliest `since` of the children that left the ready queue
    /// since [`PrioSet::forget_left`], while `indexed`; `Instant(0)` once
    /// the index is built or a child rejoined without `since` now. Tells
    /// a policy that summarised the ready children whether a change could
    /// have mattered.
    left_since: Instant,
    /// Whether `queue` and `on` are kept: from the first time the set has
    /// more than [`SMALL_SET`] children on. Below that a pass over the
    /// children costs less than keeping them.
    indexed: bool,
    /// Whether the instance is wide (indexed, with more than [`SMALL_SET`]
    /// parent VPs when the index was built, so that `parents` keeps its
    /// bit sets): then `running_by_rank` is kept and finds the least
    /// running child instead of a pass over `on`, and the parents' free
    /// entries the processors without a child.
    wide: bool,
    /// The running children by rank, one FIFO per priority by queue
    /// position (as `queue` holds the ready ones), only while `wide`: the
    /// least running child is the back of the lowest priority. Kept by
    /// `set_run`, `set_prio`, `set_seq` and `remove`.
    running_by_rank: ReadyQueue,
    /// Whether `started` is kept (see [`PrioSet::track_started`]).
    track_started: bool,
    /// Children that started running since [`PrioSet::take_started`]
    /// (while `wide` and `track_started`).
    started: Vec<VpId>,
}

/// The ready children of an indexed [`PrioSet`] in rank order: one FIFO per
/// priority, by queue position, so that the commonest moves (a child that
/// wakes takes a fresh queue position and joins the back of its priority;
/// the best child leaves from the front of the highest one) shift nothing
/// and search nothing. A child that keeps an older position (preempted or
/// revoked) usually goes back to the front of its priority; other positions
/// are found by a binary search within the priority.
///
/// That shape suits a few priorities (`ts`'s, a hand-written `fp`'s). A
/// rate-monotonic set of hundreds of tasks has a priority per task, so
/// nearly every wake-up would insert a level: past [`MAX_LEVELS`]
/// distinct priorities the queue holds its children in one ordered set by
/// rank instead (`many`), O(log n) whatever the number of priorities, until
/// it is cleared.
#[derive(Debug, Default)]
struct ReadyQueue {
    /// By priority, lowest first. A priority whose FIFO empties keeps it
    /// (the same few priorities come back), up to [`MAX_LEVELS`]; empty
    /// while `many` holds the children.
    levels: Vec<Level>,
    /// The children by rank, lowest first, once more than [`MAX_LEVELS`]
    /// priorities were seen since the last [`ReadyQueue::clear`].
    many: Option<BTreeSet<(Key, u32)>>,
    /// Bit `k` set when `levels[k]`'s FIFO is not empty, so that the best
    /// child is found with one bit scan instead of a look at every empty
    /// priority above it (a boost's, a priority that ran dry). Only the
    /// first 64 levels have a bit: with more (more than [`MAX_LEVELS`]
    /// priorities ready at once) `best` looks at the levels instead.
    nonempty: u64,
}

#[derive(Debug)]
struct Level {
    prio: i64,
    /// (queue position, child index), earliest position first.
    fifo: VecDeque<(u64, u32)>,
}

/// Priorities a [`ReadyQueue`] keeps before dropping its empty FIFOs: as
/// many as `nonempty` has bits.
const MAX_LEVELS: usize = u64::BITS as usize;

/// Level `k`'s bit in `ReadyQueue::nonempty`; none past the 64th.
#[inline(always)]
fn level_bit(k: usize) -> u64 {
    1u64.checked_shl(k as u32).unwrap_or(0)
}

impl ReadyQueue {
    /// The index in `levels` of `prio`'s FIFO.
    #[inline(always)]
    fn find(&self, prio: i64) -> Option<usize> {
        // Few priorities, the high ones used most: look from the top.
        let mut k = self.levels.len();
        while k > 0 {
            k -= 1;
            let p = self.levels[k].prio;
            if p <= prio {
                return (p == prio).then_some(k);
            }
        }
        None
    }

    /// The index in `levels` of `prio`'s FIFO, created if needed; `None`
    /// when the children are (now) in `many`.
    #[inline]
    fn level(&mut self, prio: i64) -> Option<usize> {
        match self.find(prio) {
            Some(k) => Some(k),
            None if self.many.is_some() => None,
            None => self.add_level(prio),
        }
    }

    /// Inserts `prio`'s FIFO; `None` when the queue moved to `many`
    /// instead, because all [`MAX_LEVELS`] levels are taken.
    #[inline(never)]
    fn add_level(&mut self, prio: i64) -> Option<usize> {
        if self.levels.len() >= MAX_LEVELS {
            let mut set = BTreeSet::new();
            for l in self.levels.drain(..) {
                set.extend(l.fifo.into_iter().map(|(s, i)| ((l.prio, Reverse(s)), i)));
            }
            self.many = Some(set);
            self.nonempty = 0;
            return None;
        }
        let k = self.levels.partition_point(|l| l.prio < prio);
        self.levels.insert(
            k,
            Level {
                prio,
                fifo: VecDeque::new(),
            },
        );
        // The levels moved: count the non-empty ones afresh.
        self.nonempty = 0;
        for (j, l) in self.levels.iter().enumerate() {
            self.nonempty |= level_bit(j) * !l.fifo.is_empty() as u64;
        }
        Some(k)
    }

    /// Empties every FIFO.
    fn clear(&mut self) {
        self.many = None;
        for l in &mut self.levels {
            l.fifo.clear();
        }
        self.nonempty = 0;
    }

    /// Adds child `i` with priority `prio` and queue position `seq`.
    #[inline(always)]
    fn push(&mut self, prio: i64, seq: u64, i: u32) {
        let Some(k) = self.level(prio) else {
            return self.push_many(prio, seq, i);
        };
        self.nonempty |= level_bit(k);
        let q = &mut self.levels[k].fifo;
        match (q.front(), q.back()) {
            (_, None) => q.push_back((seq, i)),
            (_, Some(&(b, _))) if b < seq => q.push_back((seq, i)),
            (Some(&(f, _)), _) if seq < f => q.push_front((seq, i)),
            _ => {
                let at = q.partition_point(|&(s, _)| s < seq);
                q.insert(at, (seq, i));
            }
        }
    }

    /// [`ReadyQueue::push`] into `many`.
    #[inline(never)]
    fn push_many(&mut self, prio: i64, seq: u64, i: u32) {
        if let Some(m) = &mut self.many {
            let _new = m.insert(((prio, Reverse(seq)), i));
            debug_assert!(_new, "queue out of step");
        }
    }

    /// Takes out child `i` with priority `prio` and queue position `seq`.
    #[inline(always)]
    fn remove(&mut self, prio: i64, seq: u64, i: u32) {
        let Some(k) = self.find(prio) else {
            let _taken = self
                .many
                .as_mut()
                .is_some_and(|m| m.remove(&((prio, Reverse(seq)), i)));
            debug_assert!(_taken, "queue out of step");
            return;
        };
        let q = &mut self.levels[k].fifo;
        let _taken = match (q.front(), q.back()) {
            (Some(&(f, _)), _) if f == seq => q.pop_front(),
            (_, Some(&(b, _))) if b == seq => q.pop_back(),
            _ => {
                let at = q.partition_point(|&(s, _)| s < seq);
                q.remove(at)
            }
        };
        if q.is_empty() {
            self.nonempty &= !level_bit(k);
        }
        debug_assert_eq!(_taken, Some((seq, i)), "queue out of step");
    }

    /// Child `from` (priority `prio`, queue position `seq`) is now child
    /// `to`.
    fn renumber(&mut self, prio: i64, seq: u64, from: u32, to: u32) {
        let Some(k) = self.find(prio) else {
            if let Some(m) = &mut self.many {
                if m.remove(&((prio, Reverse(seq)), from)) {
                    m.insert(((prio, Reverse(seq)), to));
                }
            }
            return;
        };
        let q = &mut self.levels[k].fifo;
        let at = q.partition_point(|&(s, _)| s < seq);
        if let Some(e) = q.get_mut(at) {
            debug_assert_eq!(*e, (seq, from));
            e.1 = to;
        }
    }

    /// The index in `levels` of the highest non-empty priority.
    #[inline(always)]
    fn top(&self) -> Option<usize> {
        if self.levels.len() > MAX_LEVELS {
            return self.top_by_scan();
        }
        let found = match self.nonempty {
            0 => None,
            m => Some((u64::BITS - 1 - m.leading_zeros()) as usize),
        };
        debug_assert_eq!(found, self.top_by_scan(), "non-empty levels out of step");
        found
    }

    /// [`ReadyQueue::top`] by a look at every level from the top.
    #[inline(never)]
    fn top_by_scan(&self) -> Option<usize> {
        self.levels.iter().rposition(|l| !l.fifo.is_empty())
    }

    /// The best child: the front of the highest non-empty priority.
    #[inline]
    fn best(&self) -> Option<u32> {
        if let Some(m) = &self.many {
            return m.last().map(|&(_, i)| i);
        }
        let k = self.top()?;
        self.levels[k].fifo.front().map(|&(_, i)| i)
    }

    /// The least child: the back of the lowest non-empty priority.
    #[inline]
    fn least(&self) -> Option<u32> {
        if let Some(m) = &self.many {
            return m.first().map(|&(_, i)| i);
        }
        let k = if self.levels.len() > MAX_LEVELS {
            self.levels.iter().position(|l| !l.fifo.is_empty())?
        } else if self.nonempty == 0 {
            return None;
        } else {
            self.nonempty.trailing_zeros() as usize
        };
        debug_assert_eq!(
            Some(k),
            self.levels.iter().position(|l| !l.fifo.is_empty()),
            "non-empty levels out of step"
        );
        self.levels[k].fifo.back().map(|&(_, i)| i)
    }

    /// Takes the best child off the queue and returns it.
    #[inline]
    fn pop_best(&mut self) -> Option<u32> {
        if let Some(m) = &mut self.many {
            return m.pop_last().map(|(_, i)| i);
        }
        let k = self.top()?;
        let q = &mut self.levels[k].fifo;
        let (_, i) = q.pop_front()?;
        if q.is_empty() {
            self.nonempty &= !level_bit(k);
        }
        Some(i)
    }

    /// The children, lowest rank first.
    #[inline]
    fn iter(&self) -> impl DoubleEndedIterator<Item = u32> + '_ {
        self.levels
            .iter()
            .flat_map(|l| l.fifo.iter().rev().map(|&(_, i)| i))
            .chain(self.many.iter().flatten().map(|&(_, i)| i))
    }

    /// The children with their ranks, lowest first.
    fn iter_keys(&self) -> impl Iterator<Item = (Key, u32)> + '_ {
        self.levels
            .iter()
            .flat_map(|l| {
                l.fifo
                    .iter()
                    .rev()
                    .map(move |&(s, i)| ((l.prio, Reverse(s)), i))
            })
            .chain(self.many.iter().flatten().copied())
    }
}

/// Up to this many children, `PrioSet` finds children by a pass rather than
/// keeping an index (measured: the index costs about as much as a pass over
/// eight children, and most instances in a deep hierarchy have one).
const SMALL_SET: usize = 8;

/// A child's rank among ready children: higher priority first, then
/// earlier queue position.
type Key = (i64, Reverse<u64>);

impl<E> PrioSet<E> {
    pub(crate) fn new() -> Self {
        PrioSet {
            kids: VpTable::new(Side::Child),
            parents: Parents::default(),
            next_seq: 0,
            grants: Vec::new(),
            ready: 0,
            running: 0,
            queue: ReadyQueue::default(),
            on: Vec::new(),
            busy: 0,
            since_floor: Instant::NEVER,
            left_since: Instant(0),
            indexed: false,
            wide: false,
            running_by_rank: ReadyQueue::default(),
            track_started: false,
            started: Vec::new(),
        }
    }

    /// Asks the set to remember the children that start running, for
    /// [`PrioSet::take_started`] (a policy that keeps its own index of the
    /// running children, and drains the list in every hook).
    pub(crate) fn track_started(&mut self) {
        self.track_started = true;
    }

    /// Whether the set keeps `running_by_rank` and, with
    /// [`PrioSet::track_started`], the children that started running.
    #[inline]
    pub(crate) fn wide(&self) -> bool {
        self.wide
    }

    /// Children planned to run.
    #[inline]
    pub(crate) fn running(&self) -> usize {
        self.running
    }

    /// Moves the children that started running since the last call (VPs,
    /// oldest first; only while `wide` and tracking) into `out`.
    #[inline]
    pub(crate) fn take_started(&mut self, out: &mut Vec<VpId>) {
        std::mem::swap(&mut self.started, out);
        self.started.clear();
    }

    /// No later than the `since` of any ready child; only when `indexed`.
    #[inline]
    pub(crate) fn since_floor(&self) -> Instant {
        self.since_floor
    }

    /// Sets the floor to `at`, the exact earliest `since` of the ready
    /// children as a pass over them found.
    #[inline]
    pub(crate) fn set_since_floor(&mut self, at: Instant) {
        self.since_floor = at;
    }

    /// The earliest `since` of the children that left the ready queue
    /// since the last [`PrioSet::forget_left`], or `Instant(0)` when a
    /// child joined it with an earlier `since` than now; only when
    /// `indexed`. Other children that join the queue have `since` now.
    #[inline]
    pub(crate) fn left_since(&self) -> Instant {
        self.left_since
    }

    /// Starts [`PrioSet::left_since`] afresh.
    #[inline]
    pub(crate) fn forget_left(&mut self) {
        self.left_since = Instant::NEVER;
    }

    /// Builds `queue` and `on` from the children and keeps them from now on.
    fn build_index(&mut self) {
        self.indexed = true;
        self.wide = self.parents.bits;
        self.running_by_rank.clear();
        self.started.clear();
        self.left_since = Instant(0);
        self.queue.clear();
        self.on.clear();
        self.parents.clear_occupied();
        self.since_floor = Instant::NEVER;
        for i in 0..self.kids.len() {
            let e = self.kids.at(i).1;
            match e.run {
                Run::Ready => {
                    self.queue.push(e.prio, e.seq, i as u32);
                    self.since_floor = self.since_floor.min(e.since);
                }
                Run::Running(c) => {
                    if self.on.len() <= c.index() {
                        self.on.resize(c.index() + 1, None);
                    }
                    self.on[c.index()] = Some(i as u32);
                    self.ran(i, c);
                }
                Run::Waiting => {}
            }
        }
    }

    /// Records that child `i` runs on `c` (see `running_by_rank`), that it
    /// started running, and that `c` is occupied (see
    /// `Parents::free_bits`).
    #[inline(always)]
    fn ran(&mut self, i: usize, c: CpuId) {
        if self.wide {
            self.ran_wide(i, c);
        }
    }

    #[inline(never)]
    fn ran_wide(&mut self, i: usize, c: CpuId) {
        self.parents.occupy(c, true);
        let (vp, e) = self.kids.at(i);
        self.running_by_rank.push(e.prio, e.seq, i as u32);
        if self.track_started {
            self.started.push(vp);
        }
    }

    /// Child `i`, with rank `k`, stops running on `c`; `mine`: `c` was
    /// recorded as its processor and is free now.
    #[inline(never)]
    fn stopped_wide(&mut self, c: CpuId, mine: bool, k: Key, i: usize) {
        if mine {
            self.parents.occupy(c, false);
        }
        self.running_by_rank.remove(k.0, k.1 .0, i as u32);
    }

    /// Child `i`'s rank changed from `old`: moves it in `running_by_rank`
    /// if it runs.
    #[inline]
    fn reranked(&mut self, i: usize, old: Key) {
        let e = self.kids.at(i).1;
        if self.wide && matches!(e.run, Run::Running(_)) {
            let (prio, seq) = (e.prio, e.seq);
            self.running_by_rank.remove(old.0, old.1 .0, i as u32);
            self.running_by_rank.push(prio, seq, i as u32);
        }
    }

    /// The least running child (lowest priority, then latest queued) and
    /// its rank, from `running_by_rank`.
    #[inline]
    fn least_running_by_rank(&self) -> Option<(usize, Key)> {
        let i = self.running_by_rank.least()? as usize;
        Some((i, Self::key(self.kids.at(i).1)))
    }

    #[inline(always)]
    fn key(e: &Entry<E>) -> Key {
        (e.prio, Reverse(e.seq))
    }

    /// Puts ready child `i` with rank `k` into the queue.
    #[inline]
    fn enqueue(&mut self, k: Key, i: usize) {
        self.queue.push(k.0, k.1 .0, i as u32);
    }

    /// Takes ready child `i` with rank `k` out of the queue.
    #[inline]
    fn dequeue(&mut self, k: Key, i: usize) {
        self.queue.remove(k.0, k.1 .0, i as u32);
    }

    /// Changes child `i`'s priority, keeping the queue.
    #[inline(always)]
    pub(crate) fn set_prio(&mut self, i: usize, prio: i64) {
        let e = self.kids.at_mut(i).1;
        if e.prio == prio {
            return;
        }
        if !self.indexed {
            e.prio = prio;
            return;
        }
        self.requeue_prio(i, prio);
    }

    /// `set_prio` for an indexed set.
    #[inline(never)]
    fn requeue_prio(&mut self, i: usize, prio: i64) {
        let e = self.kids.at_mut(i).1;
        let old = Self::key(e);
        e.prio = prio;
        let new = Self::key(e);
        if self.indexed && e.run == Run::Ready {
            self.dequeue(old, i);
            self.enqueue(new, i);
        } else {
            self.reranked(i, old);
        }
    }

    /// Changes child `i`'s queue position, keeping the queue.
    #[inline]
    fn set_seq(&mut self, i: usize, seq: u64) {
        let e = self.kids.at_mut(i).1;
        let old = Self::key(e);
        e.seq = seq;
        let new = Self::key(e);
        if self.indexed && e.run == Run::Ready {
            self.dequeue(old, i);
            self.enqueue(new, i);
        } else {
            self.reranked(i, old);
        }
    }

    /// Changes child `i`'s eager state, keeping the counts; returns its VP.
    #[inline(always)]
    fn set_run(&mut self, i: usize, r: Run) -> VpId {
        let (vp, e) = self.kids.at_mut(i);
        let old = std::mem::replace(&mut e.run, r);
        if old == r {
            return vp;
        }
        self.ready =
            self.ready - matches!(old, Run::Ready) as usize + matches!(r, Run::Ready) as usize;
        self.running = self.running - matches!(old, Run::Running(_)) as usize
            + matches!(r, Run::Running(_)) as usize;
        if self.indexed {
            self.reindex(i, old, r);
        }
        vp
    }

    /// `set_run`'s update of `queue` and `on`: child `i` with rank `k` went
    /// from `old` to `r`. Inlined: out of line its call costs as much as
    /// its work (small sets, which keep no index, skip it at one branch).
    #[inline(always)]
    fn reindex(&mut self, i: usize, old: Run, r: Run) {
        let e = self.kids.at(i).1;
        let k = Self::key(e);
        if r == Run::Ready {
            // Callers set `since` before making a child ready, so a child
            // that waits from now lowers the floor no further than now.
            self.since_floor = self.since_floor.min(e.since);
        }
        match old {
            Run::Ready => {
                self.left_since = self.left_since.min(e.since);
                self.dequeue(k, i);
            }
            Run::Running(c) => {
                let mut mine = false;
                if let Some(slot) = self.on.get_mut(c.index()) {
                    if *slot == Some(i as u32) {
                        *slot = None;
                        mine = true;
                    }
                }
                if self.wide {
                    self.stopped_wide(c, mine, k, i);
                }
            }
            Run::Waiting => {}
        }
        match r {
            Run::Ready => self.enqueue(k, i),
            Run::Running(c) => self.put_on(c, i),
            Run::Waiting => {}
        }
    }

    /// Records child `i` as planned on free processor `c`.
    #[inline(always)]
    fn put_on(&mut self, c: CpuId, i: usize) {
        if self.on.len() <= c.index() {
            self.on.resize(c.index() + 1, None);
        }
        debug_assert!(self.on[c.index()].is_none(), "two children planned on {c}");
        self.on[c.index()] = Some(i as u32);
        self.ran(i, c);
    }

    /// A queue position behind every earlier one.
    pub(crate) fn take_seq(&mut self) -> u64 {
        self.next_seq += 1;
        self.next_seq
    }

    pub(crate) fn add(&mut self, ctx: &mut Ctx<'_>, vp: VpId, prio: i64, extra: E) {
        let seq = self.take_seq();
        let since = ctx.now();
        self.kids.insert(
            ctx,
            vp,
            Entry {
                prio,
                seq,
                run: Run::Waiting,
                busy: false,
                since,
                extra,
            },
        );
        if !self.indexed && self.kids.len() > SMALL_SET {
            self.build_index();
        }
    }

    pub(crate) fn remove(&mut self, ctx: &mut Ctx<'_>, vp: VpId) {
        let Some(i) = self.kids.index_of(ctx, vp) else {
            return;
        };
        self.set_run(i, Run::Waiting);
        let last = self.kids.len() - 1;
        if let Some(e) = self.kids.remove(ctx, vp) {
            self.busy -= e.busy as usize;
        }
        if self.indexed && i != last {
            // The last child moved to `i`: follow it in the queue or on its
            // processor.
            let e = self.kids.at(i).1;
            match e.run {
                Run::Ready => {
                    let (prio, seq) = (e.prio, e.seq);
                    self.queue.renumber(prio, seq, last as u32, i as u32);
                }
                Run::Running(c) => {
                    if let Some(slot) = self.on.get_mut(c.index()) {
                        *slot = Some(i as u32);
                    }
                    if self.wide {
                        let (prio, seq) = (e.prio, e.seq);
                        self.running_by_rank
                            .renumber(prio, seq, last as u32, i as u32);
                    }
                }
                Run::Waiting => {}
            }
        }
    }

    /// Marks the children a notification is still to come about.
    #[inline]
    pub(crate) fn begin(&mut self, ctx: &Ctx<'_>) {
        self.parents.ensure(ctx);
        self.mark_busy(ctx, None);
    }

    /// `begin` once the parent view is known to be built. `except`: the
    /// child on the processor a revocation is about, which
    /// `parent_revoked` settles itself.
    ///
    /// A child is unsettled only while a notification about it is still to
    /// come, so with none waiting for this instance and no flag left set
    /// from an earlier hook there is nothing to mark and the pass over the
    /// children is skipped (debug builds check that the pass would have
    /// found nothing).
    #[inline(always)]
    fn mark_busy(&mut self, ctx: &Ctx<'_>, except: Option<usize>) {
        #[cfg(not(debug_assertions))]
        let _ = except;
        if self.busy == 0 && ctx.notifications_waiting() == 0 {
            #[cfg(debug_assertions)]
            for (i, (vp, e)) in self.kids.iter().enumerate() {
                let state = ctx.vp_state(vp);
                let excused = except == Some(i)
                    && matches!((e.run, state), (Run::Running(_), VpState::Ready));
                assert!(
                    excused || Run::of(state) == e.run,
                    "{vp} is unsettled ({:?} planned, {state:?}) with no notification waiting",
                    e.run
                );
            }
            return;
        }
        let mut busy = 0;
        for (vp, e) in self.kids.iter_mut() {
            e.busy = Run::of(ctx.vp_state(vp)) != e.run;
            busy += e.busy as usize;
        }
        self.busy = busy;
    }

    /// Whether the shortcuts [`PrioSet::solo_granted`] and
    /// [`PrioSet::solo_revoked`] may be considered for a notification about
    /// `parent_vp`: one child, no index, one parent VP (`parent_vp`, so the
    /// view needs no rebuilding), and nothing unsettled (no flag left set
    /// and no notification waiting, so `begin` would mark nothing).
    ///
    /// A view of one entry was built from the instance's parent VPs, which
    /// never change after `init`, so that one is `parent_vp`.
    #[inline(always)]
    fn solo(&self, ctx: &Ctx<'_>, parent_vp: VpId) -> bool {
        let solo = self.kids.len() == 1
            && !self.indexed
            && self.busy == 0
            && self.parents.view.len() == 1
            && ctx.notifications_waiting() == 0;
        debug_assert!(!solo || ctx.parent_vps() == [parent_vp]);
        solo
    }

    /// The commonest grant, in one step: a one-child set (see
    /// [`PrioSet::solo`]) whose parent VP was asking and whose child is
    /// ready gets the processor it asked for. `parent_granted` followed by
    /// `settle` would take the same decisions (the grant is wanted, the
    /// processor goes to the ready child, nothing to release or request)
    /// and queue the same single action, `grant(child, cpu)`; this skips
    /// their general checks. Returns the child and its entry (for the
    /// policy's own bookkeeping, such as a timer); `None`, with nothing
    /// changed, in every other case, which the general path handles.
    ///
    /// `Parents::on_grant`'s test that the grant is still current is not
    /// needed here: with no notification waiting, every parent VP is as the
    /// delivered notifications left it ([`Ctx::notifications_waiting`]),
    /// this one included (the HSI drops a grant superseded while it
    /// waited).
    #[inline(always)]
    pub(crate) fn solo_granted(
        &mut self,
        ctx: &mut Ctx<'_>,
        parent_vp: VpId,
        cpu: CpuId,
    ) -> Option<(VpId, &Entry<E>)> {
        if !self.solo(ctx, parent_vp)
            || self.parents.view[0] != Run::Ready
            || self.kids.at(0).1.run != Run::Ready
        {
            return None;
        }
        debug_assert_eq!(ctx.vp_state(parent_vp), VpState::Running(cpu));
        // As `Parents::set` and `set_run` would count them.
        self.parents.view[0] = Run::Running(cpu);
        self.parents.asking -= 1;
        self.parents.held += 1;
        self.ready -= 1;
        self.running += 1;
        let (vp, e) = self.kids.at_mut(0);
        e.run = Run::Running(cpu);
        ctx.grant(vp, cpu);
        Some((vp, e))
    }

    /// The commonest revocation, in one step: a one-child set (see
    /// [`PrioSet::solo`]) loses the processor its child runs on.
    /// `parent_revoked` followed by `settle` would take the same decisions
    /// (the child is preempted with the parent's reason and stays ready,
    /// the parent VP stays asking, nothing else to do) and queue the same
    /// single action, `revoke(child, reason)`. Returns the child and its
    /// entry; `None`, with nothing changed, in every other case.
    ///
    /// The child's own state is still tested: the grant that put it on the
    /// processor may have been dropped as stale, leaving it ready.
    #[inline(always)]
    pub(crate) fn solo_revoked(
        &mut self,
        ctx: &mut Ctx<'_>,
        parent_vp: VpId,
        reason: RevokeReason,
    ) -> Option<(VpId, &Entry<E>)> {
        if !self.solo(ctx, parent_vp) {
            return None;
        }
        let Run::Running(cpu) = self.parents.view[0] else {
            return None;
        };
        let (vp, e) = self.kids.at(0);
        if e.run != Run::Running(cpu) || ctx.vp_state(vp) != VpState::Running(cpu) {
            return None;
        }
        self.parents.view[0] = Run::Ready;
        self.parents.asking += 1;
        self.parents.held -= 1;
        self.ready += 1;
        self.running -= 1;
        let now = ctx.now();
        let e = self.kids.at_mut(0).1;
        e.run = Run::Ready;
        e.since = now;
        ctx.revoke(vp, reason);
        Some((vp, e))
    }

    /// The parent granted `cpu` through `parent_vp`: whether the grant is
    /// wanted (see [`Parents::on_grant`]); if so, calls `begin`.
    #[inline(always)]
    pub(crate) fn parent_granted(&mut self, ctx: &Ctx<'_>, parent_vp: VpId, cpu: CpuId) -> bool {
        // `on_grant` builds the parent view, so `begin` is `mark_busy`.
        let wanted = self.parents.on_grant(ctx, parent_vp, cpu).is_some();
        if wanted {
            self.mark_busy(ctx, None);
        }
        wanted
    }

    /// Child `vp` asks for a processor: it joins the back of its priority.
    /// A request already withdrawn (the notification waited while this
    /// instance was busy; the release's notification follows) is ignored.
    /// Returns the child's index and its eager state before.
    #[inline(always)]
    pub(crate) fn request(&mut self, ctx: &mut Ctx<'_>, vp: VpId) -> Option<(usize, Run)> {
        if ctx.vp_state(vp) != VpState::Ready {
            return None;
        }
        let i = self.kids.index_of(ctx, vp)?;
        let before = self.kids.at(i).1.run;
        let seq = self.take_seq();
        let now = ctx.now();
        if before != Run::Waiting {
            // Ready or running: move it in its queue.
            self.set_seq(i, seq);
        } else {
            // Not in the queue: nothing to move.
            self.kids.at_mut(i).1.seq = seq;
        }
        // `since` before `set_run`, so that the floor it lowers is now
        // rather than when the child was last ready: a stale floor would
        // make `ts` look through every ready child for a boost due.
        self.kids.at_mut(i).1.since = now;
        self.set_run(i, Run::Ready);
        Some((i, before))
    }

    /// Child `vp` stopped asking; its processor, if any, is free.
    #[inline(always)]
    pub(crate) fn release(&mut self, ctx: &mut Ctx<'_>, vp: VpId) -> Option<usize> {
        let i = self.kids.index_of(ctx, vp)?;
        self.set_run(i, Run::Waiting);
        Some(i)
    }

    /// The parent took back `parent_vp`'s processor: the child on it loses
    /// it for the same reason and keeps its queue position. Calls `begin`.
    #[inline]
    pub(crate) fn parent_revoked(
        &mut self,
        ctx: &mut Ctx<'_>,
        parent_vp: VpId,
        reason: RevokeReason,
    ) {
        // `on_revoke` builds the parent view, so `begin` is `mark_busy`.
        let lost = self.parents.on_revoke(ctx, parent_vp);
        let on = lost.map(|(_, cpu)| cpu);
        let found = on
            .and_then(|c| self.on_cpu(c))
            .map(|i| (i, ctx.vp_state(self.kids.at(i).0)));
        self.mark_busy(ctx, found.map(|(i, _)| i));
        if let Some(cpu) = on {
            if let Some((i, state)) = found {
                match state {
                    VpState::Running(c) if c == cpu => self.preempt(ctx, i, reason, false),
                    // The grant to it never took effect: it is simply ready.
                    VpState::Ready => {
                        // It rejoins the queue with its old `since`: as
                        // far as `left_since` can tell, anything changed.
                        self.left_since = Instant(0);
                        self.set_run(i, Run::Ready);
                        let e = self.kids.at_mut(i).1;
                        self.busy -= e.busy as usize;
                        e.busy = false;
                    }
                    _ => {}
                }
            }
        }
    }

    /// Whether [`PrioSet::running_kids`] and [`PrioSet::ready_kids`] may be
    /// used (the set keeps its index).
    #[inline]
    pub(crate) fn indexed(&self) -> bool {
        self.indexed
    }

    /// The children planned to run, by processor; only when `indexed`.
    #[inline]
    pub(crate) fn running_kids(&self) -> impl Iterator<Item = usize> + '_ {
        debug_assert!(self.indexed);
        self.on.iter().flatten().map(|&i| i as usize)
    }

    /// The ready children, lowest rank first; only when `indexed`.
    #[inline]
    pub(crate) fn ready_kids(&self) -> impl DoubleEndedIterator<Item = usize> + '_ {
        debug_assert!(self.indexed);
        self.queue.iter().map(|i| i as usize)
    }

    /// Calls `f` with every ready child's entry, in no particular order;
    /// only when `indexed`. For passes that only take a minimum: plain
    /// loops over each priority's FIFO cost about a third less than
    /// [`PrioSet::ready_kids`]' ordered walk (measured in `ts`'s boost
    /// pass).
    #[inline]
    pub(crate) fn for_each_ready(&self, mut f: impl FnMut(&Entry<E>)) {
        debug_assert!(self.indexed);
        for l in &self.queue.levels {
            let (front, back) = l.fifo.as_slices();
            for part in [front, back] {
                for &(_, i) in part {
                    f(self.kids.at(i as usize).1);
                }
            }
        }
        for &(_, i) in self.queue.many.iter().flatten() {
            f(self.kids.at(i as usize).1);
        }
    }

    /// The child running on `cpu` (as planned).
    #[inline]
    pub(crate) fn on_cpu(&self, cpu: CpuId) -> Option<usize> {
        if !self.indexed {
            if self.running == 0 {
                return None;
            }
            return self
                .kids
                .iter()
                .position(|(_, e)| e.run == Run::Running(cpu));
        }
        let i = self
            .on
            .get(cpu.index())
            .copied()
            .flatten()
            .map(|i| i as usize);
        debug_assert_eq!(
            i,
            self.kids
                .iter()
                .position(|(_, e)| e.run == Run::Running(cpu))
        );
        i
    }

    /// Plans to take the processor from running child `i`; `back` sends it
    /// behind the other children of its priority (a used-up quantum).
    #[inline(always)]
    pub(crate) fn preempt(
        &mut self,
        ctx: &mut Ctx<'_>,
        i: usize,
        reason: RevokeReason,
        back: bool,
    ) {
        if back {
            let seq = self.take_seq();
            self.set_seq(i, seq);
        }
        // `since` first, as in `request`.
        self.kids.at_mut(i).1.since = ctx.now();
        let vp = self.set_run(i, Run::Ready);
        // Revocations come first in a hook's actions (see above), and
        // nothing else is queued while planning: queue it at once.
        ctx.revoke(vp, reason);
    }

    #[inline]
    fn grant(&mut self, i: usize, cpu: CpuId) {
        let vp = self.set_run(i, Run::Running(cpu));
        self.grants.push((vp, cpu));
    }

    /// Plans to give `cpu` to the best ready child, as `grant` would, in an
    /// indexed set: the child comes off the front of the queue directly
    /// instead of being looked up again by its rank. Returns whether a
    /// child was ready.
    #[inline(always)]
    fn grant_best(&mut self, cpu: CpuId) -> bool {
        let Some(i) = self.queue.pop_best() else {
            return false;
        };
        let i = i as usize;
        let (vp, e) = self.kids.at_mut(i);
        debug_assert_eq!(e.run, Run::Ready, "queue out of step");
        // What `set_run` and `reindex` do for Ready → Running(cpu), the
        // dequeuing done.
        e.run = Run::Running(cpu);
        self.left_since = self.left_since.min(e.since);
        self.ready -= 1;
        self.running += 1;
        self.put_on(cpu, i);
        self.grants.push((vp, cpu));
        true
    }

    /// In one pass: the ready child to run next (highest priority, then
    /// earliest queued) and the running child to preempt first (lowest
    /// priority, then latest queued), leaving out children a notification
    /// is still to come about; neither when no child is ready, as then
    /// there is nothing to plan. Ties go as with `max_by_key` (the last)
    /// and `min_by_key` (the first), though queue positions never tie.
    ///
    /// The ready child comes from the back of the queue, the running one
    /// from the processors, so neither needs a pass over the children.
    #[inline(always)]
    fn extremes(&self) -> (Option<usize>, Option<usize>) {
        if self.ready == 0 {
            return (None, None);
        }
        if !self.indexed {
            return self.extremes_by_scan();
        }
        self.extremes_indexed()
    }

    /// [`PrioSet::extremes`] from the index.
    #[inline(never)]
    fn extremes_indexed(&self) -> (Option<usize>, Option<usize>) {
        // With nothing unsettled (the usual case) the best is the back of
        // the queue and every running child counts.
        let best = if self.busy == 0 {
            self.queue.best().map(|i| i as usize)
        } else {
            self.ready_kids().rev().find(|&i| !self.kids.at(i).1.busy)
        };
        let worst = if self.running > 0 {
            self.least_running(|e| self.busy == 0 || !e.busy)
                .map(|(i, _)| i)
        } else {
            None
        };
        let found = (best, worst);
        #[cfg(debug_assertions)]
        assert_eq!(found, self.extremes_by_scan(), "queue out of step");
        found
    }

    /// The running child of least rank (priority, then latest queued)
    /// among those `usable`, from the processors' index, with its rank.
    #[inline(always)]
    fn least_running(&self, usable: impl Fn(&Entry<E>) -> bool) -> Option<(usize, Key)> {
        let mut worst: Option<(usize, Key)> = None;
        for &slot in &self.on {
            let Some(i) = slot else { continue };
            let e = self.kids.at(i as usize).1;
            if !usable(e) {
                continue;
            }
            let k = Self::key(e);
            if worst.is_none_or(|(_, w)| k < w) {
                worst = Some((i as usize, k));
            }
        }
        worst
    }

    /// [`PrioSet::extremes`] by a pass over every child (small sets, and
    /// debug checks of the index).
    #[inline]
    fn extremes_by_scan(&self) -> (Option<usize>, Option<usize>) {
        if self.indexed {
            debug_assert_eq!(self.queue.iter().count(), self.ready);
            debug_assert_eq!(self.on.iter().flatten().count(), self.running);
        }
        let rank = |e: &Entry<E>| (e.prio, Reverse(e.seq));
        let mut best: Option<(usize, &Entry<E>)> = None;
        let mut worst: Option<(usize, &Entry<E>)> = None;
        for (i, (_, e)) in self.kids.iter().enumerate() {
            if e.busy {
                continue;
            }
            match e.run {
                Run::Ready => {
                    if best.is_none_or(|(_, b)| rank(e) >= rank(b)) {
                        best = Some((i, e));
                    }
                }
                Run::Running(_) => {
                    if worst.is_none_or(|(_, w)| rank(e) < rank(w)) {
                        worst = Some((i, e));
                    }
                }
                Run::Waiting => {}
            }
        }
        (best.map(|(i, _)| i), worst.map(|(i, _)| i))
    }

    /// The ready child to run next: highest priority, then earliest queued.
    #[inline]
    pub(crate) fn best_ready(&self) -> Option<usize> {
        self.extremes().0
    }

    /// Plans and queues the actions: [`PrioSet::rebalance`] then
    /// [`PrioSet::finish`]; the hook has called `begin`.
    #[inline(always)]
    pub(crate) fn settle(&mut self, ctx: &mut Ctx<'_>) {
        if self.kids.len() == 1 && self.parents.view.len() == 1 {
            self.settle_single(ctx);
        } else if self.indexed && self.busy == 0 {
            if self.wide {
                self.settle_quiet_wide(ctx);
            } else {
                self.settle_quiet::<false>(ctx);
            }
        } else {
            self.rebalance(ctx);
            self.finish(ctx);
        }
    }

    /// [`PrioSet::rebalance`] and [`PrioSet::finish`] for the commonest
    /// shape, one child under one parent VP (a uniprocessor instance, or
    /// any instance under one that offers one processor), unrolled: the
    /// same decisions and actions in the same order, without the passes.
    #[inline(always)]
    fn settle_single(&mut self, ctx: &mut Ctx<'_>) {
        // rebalance: the held processor, if free, goes to the child if it
        // is ready and settled. A child cannot be both the best ready and
        // the worst running one, so there is nothing to preempt.
        let mut grant = None;
        if let Run::Running(cpu) = self.parents.view[0] {
            let e = self.kids.at(0).1;
            if e.run == Run::Ready && !e.busy {
                grant = Some((self.set_run(0, Run::Running(cpu)), cpu));
            }
        }
        // finish, with `unserved` (ready children) being 0 or 1.
        let ready = self.kids.at(0).1.run == Run::Ready;
        if self.parents.view[0] == Run::Ready && !ready {
            self.parents.release(ctx, 0);
        }
        if let Run::Running(c) = self.parents.view[0] {
            if self.kids.at(0).1.run != Run::Running(c) {
                self.parents.release(ctx, 0);
            }
        }
        if let Some((vp, cpu)) = grant {
            ctx.grant(vp, cpu);
        }
        if ready && self.parents.view[0] != Run::Ready {
            self.parents.request(ctx, 0);
        }
    }

    /// Plans to give every free held processor to the best ready child, then
    /// to preempt while a ready child outranks a running one.
    #[inline(always)]
    pub(crate) fn rebalance(&mut self, ctx: &mut Ctx<'_>) {
        // Granting changes only the children, so the held processors can
        // be read in place, in parent order.
        if self.parents.held > 0 {
            for k in 0..self.parents.view.len() {
                let Run::Running(cpu) = self.parents.view[k] else {
                    continue;
                };
                if self.on_cpu(cpu).is_none() {
                    match self.best_ready() {
                        Some(i) => self.grant(i, cpu),
                        None => break,
                    }
                }
            }
        }
        if self.running == 0 {
            return;
        }
        while let (Some(b), Some(w)) = self.extremes() {
            if self.kids.at(b).1.prio <= self.kids.at(w).1.prio {
                break;
            }
            let Some(cpu) = self.kids.at(w).1.run.cpu() else {
                break;
            };
            self.preempt(ctx, w, RevokeReason::Preempted, false);
            self.grant(b, cpu);
        }
    }

    /// [`PrioSet::rebalance`] then [`PrioSet::finish`] for an indexed set
    /// with nothing unsettled (the usual case in a large instance): every
    /// child is usable, so the best ready child is the queue's and the
    /// worst running one the least of the processors' (the same choices as
    /// `extremes`, without its general filtering), and the pass that gives
    /// free held processors away also tells whether one stays unused, so
    /// `finish` looks for processors to release only then.
    ///
    /// `WIDE` (the set is `wide`) takes the free processors from the
    /// parents' free entries, the least running child from
    /// `running_by_rank`, and releases unused processors from the free
    /// entries; a narrow set keeps the passes, which cost less for a few
    /// processors.
    #[inline(always)]
    fn settle_quiet<const WIDE: bool>(&mut self, ctx: &mut Ctx<'_>) {
        let idle = self.rebalance_quiet::<WIDE>(ctx);
        let unserved = self.ready;
        self.parents.ask_at_most(ctx, unserved);
        if idle {
            if WIDE {
                self.parents.release_free(ctx);
            } else {
                let on = &self.on;
                self.parents
                    .release_idle(ctx, |c| on.get(c.index()).is_some_and(Option::is_some));
            }
        }
        for &(vp, cpu) in &self.grants {
            ctx.grant(vp, cpu);
        }
        self.grants.clear();
        self.parents.ask_at_least(ctx, unserved);
    }

    /// `settle_quiet` for a wide set, out of line.
    #[inline(never)]
    fn settle_quiet_wide(&mut self, ctx: &mut Ctx<'_>) {
        // The parents' free entries are kept while their view is wide,
        // which it stays unless the parent VPs change.
        if self.parents.bits {
            self.settle_quiet::<true>(ctx);
        } else {
            self.settle_quiet::<false>(ctx);
        }
    }

    /// `rebalance` for `settle_quiet`; returns whether a held processor
    /// may have been left without a child (preempting moves a processor
    /// from one child to another, so only the first pass can leave one).
    #[inline(always)]
    fn rebalance_quiet<const WIDE: bool>(&mut self, ctx: &mut Ctx<'_>) -> bool {
        let mut idle = false;
        // Running children sit on distinct held processors (`check`), so
        // with as many of them as held processors none is free.
        debug_assert!(
            self.parents.held > self.running
                || self.parents.held().all(|(_, c)| self.on_cpu(c).is_some()),
            "a held processor is free although as many children run"
        );
        if self.parents.held > self.running {
            if WIDE {
                // The free held processors in parent order, as the pass
                // below finds them; granting one frees no other.
                'words: for w in 0..self.parents.view.len().div_ceil(64) {
                    let mut m = self.parents.free_bits.word(w);
                    while m != 0 {
                        let k = w * 64 + m.trailing_zeros() as usize;
                        m &= m - 1;
                        let Run::Running(cpu) = self.parents.view[k] else {
                            continue;
                        };
                        debug_assert!(self.on.get(cpu.index()).copied().flatten().is_none());
                        if !self.grant_best(cpu) {
                            idle = true;
                            break 'words;
                        }
                    }
                }
            } else {
                for k in 0..self.parents.view.len() {
                    let Run::Running(cpu) = self.parents.view[k] else {
                        continue;
                    };
                    if self.on.get(cpu.index()).copied().flatten().is_none() {
                        if !self.grant_best(cpu) {
                            idle = true;
                            break;
                        }
                        // As many children as held processors: none is
                        // free any more (see above).
                        if self.parents.held == self.running {
                            debug_assert!(self
                                .parents
                                .held()
                                .all(|(_, c)| self.on_cpu(c).is_some()));
                            break;
                        }
                    }
                }
            }
        }
        if self.running == 0 {
            return idle;
        }
        while let Some(b) = self.queue.best() {
            let b = b as usize;
            let worst = if WIDE {
                self.least_running_by_rank()
            } else {
                self.least_running(|_| true)
            };
            #[cfg(debug_assertions)]
            assert_eq!(
                (Some(b), worst.map(|(i, _)| i)),
                self.extremes_by_scan(),
                "queue out of step"
            );
            let Some((w, (wprio, _))) = worst else {
                break;
            };
            if self.kids.at(b).1.prio <= wprio {
                break;
            }
            let Some(cpu) = self.kids.at(w).1.run.cpu() else {
                break;
            };
            self.preempt(ctx, w, RevokeReason::Preempted, false);
            self.grant(b, cpu);
        }
        idle
    }

    /// Releases every held processor no child is planned on (an indexed
    /// set): from the parents' free entries when the view keeps them.
    #[inline(always)]
    fn release_unoccupied(&mut self, ctx: &mut Ctx<'_>) {
        if self.wide && self.parents.bits {
            self.parents.release_free(ctx);
        } else {
            let on = &self.on;
            self.parents
                .release_idle(ctx, |c| on.get(c.index()).is_some_and(Option::is_some));
        }
    }

    /// Queues the rest of the planned actions (parent releases, grants,
    /// parent requests) with one asking parent VP per ready child without a
    /// processor, and every unused held processor released.
    #[inline(always)]
    pub(crate) fn finish(&mut self, ctx: &mut Ctx<'_>) {
        let unserved = self.ready;
        self.parents.ask_at_most(ctx, unserved);
        if self.indexed {
            self.release_unoccupied(ctx);
        } else {
            let kids = &self.kids;
            self.parents
                .release_idle(ctx, |c| kids.iter().any(|(_, e)| e.run == Run::Running(c)));
        }
        for &(vp, cpu) in &self.grants {
            ctx.grant(vp, cpu);
        }
        self.grants.clear();
        self.parents.ask_at_least(ctx, unserved);
    }

    /// The view matches the HSI, running children sit on held processors,
    /// and no ready child outranks a running one.
    pub(crate) fn check(&self, ctx: &Ctx<'_>) -> Result<(), String> {
        self.parents.check(ctx)?;
        // In one pass: the most important ready child (the last of equal
        // priority, as `max_by_key`) and the least important running one
        // (the first, as `min_by_key`), and the counts.
        let mut best: Option<(VpId, i64)> = None;
        let mut worst: Option<(VpId, i64)> = None;
        let (mut ready, mut running) = (0, 0);
        for (vp, e) in self.kids.iter() {
            self.parents.check_child(ctx, vp, e.run)?;
            match e.run {
                Run::Running(_) => {
                    running += 1;
                    if worst.is_none_or(|(_, p)| e.prio < p) {
                        worst = Some((vp, e.prio));
                    }
                }
                Run::Ready => {
                    ready += 1;
                    if best.is_none_or(|(_, p)| e.prio >= p) {
                        best = Some((vp, e.prio));
                    }
                }
                Run::Waiting => {}
            }
        }
        if let (Some((bv, bp)), Some((wv, wp))) = (best, worst) {
            if bp > wp {
                return Err(format!(
                    "ready child {bv} (priority {bp}) waits while {wv} (priority {wp}) runs"
                ));
            }
        }
        if (ready, running) != (self.ready, self.running) {
            return Err(format!(
                "counts {} ready and {} running children but they are {ready} and {running}",
                self.ready, self.running
            ));
        }
        if self.indexed {
            self.check_index()?;
        }
        Ok(())
    }

    /// The queue holds exactly the ready children in rank order, each
    /// processor's entry the child planned there, and the floor is no later
    /// than any ready child's `since`.
    fn check_index(&self) -> Result<(), String> {
        let mut want: Vec<(Key, u32)> = Vec::with_capacity(self.ready);
        for (i, (vp, e)) in self.kids.iter().enumerate() {
            match e.run {
                Run::Ready => {
                    want.push((Self::key(e), i as u32));
                    if e.since < self.since_floor {
                        return Err(format!("ready child {vp} waits from before the floor"));
                    }
                }
                Run::Running(c) => {
                    if self.on.get(c.index()).copied().flatten() != Some(i as u32) {
                        return Err(format!("child {vp} runs on {c} but the index says not"));
                    }
                }
                Run::Waiting => {}
            }
        }
        want.sort_unstable();
        if !want.iter().copied().eq(self.queue.iter_keys()) {
            return Err("the ready queue is out of step with the children".into());
        }
        if self.on.iter().flatten().count() != self.running {
            return Err("the per-processor index has stale entries".into());
        }
        if self.wide && self.parents.bits {
            for (k, r) in self.parents.view.iter().enumerate() {
                let free = r
                    .cpu()
                    .is_some_and(|c| self.on.get(c.index()).copied().flatten().is_none());
                if self.parents.free_bits.get(k) != free {
                    return Err(format!("parent {k}'s free bit is out of step"));
                }
            }
        }
        if self.wide {
            let mut want: Vec<(Key, u32)> = self
                .on
                .iter()
                .flatten()
                .map(|&i| (Self::key(self.kids.at(i as usize).1), i))
                .collect();
            want.sort_unstable();
            if !want.iter().copied().eq(self.running_by_rank.iter_keys()) {
                return Err("the running children by rank are out of step".into());
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::{ReadyQueue, MAX_LEVELS};
    use std::cmp::Reverse;

    /// More priorities than the levels hold: the queue moves its children
    /// into one ordered set and still gives them in rank order (best,
    /// least, removal, renumbering), and after a clear the levels and their
    /// bits take over again.
    #[test]
    fn ready_queue_keeps_rank_order_past_the_levels() {
        let mut q = ReadyQueue::default();
        let prios = MAX_LEVELS as u32 + 6;
        let mut want = Vec::new();
        let mut seq = 0;
        // Two children per priority, the priorities in a scrambled order.
        for i in 0..2 * prios {
            let prio = i64::from((i * 37) % prios);
            seq += 1;
            q.push(prio, seq, i);
            want.push((prio, Reverse(seq), i));
        }
        assert!(q.many.is_some() && q.levels.is_empty());
        want.sort_unstable();
        let keys: Vec<_> = q.iter_keys().map(|((p, s), i)| (p, s, i)).collect();
        assert_eq!(keys, want);
        assert!(q.iter().eq(want.iter().map(|w| w.2)));
        // The least child is the back of the lowest priority.
        assert_eq!(q.least(), Some(want[0].2));
        let (p, Reverse(s), i) = want.remove(0);
        q.remove(p, s, i);
        q.renumber(want[0].0, want[0].1 .0, want[0].2, 999);
        want[0].2 = 999;
        for &(_, _, i) in want.iter().rev() {
            assert_eq!(q.best(), Some(i));
            assert_eq!(q.pop_best(), Some(i));
        }
        assert_eq!((q.best(), q.least()), (None, None));
        q.clear();
        q.push(1_000, seq + 1, 7);
        q.push(-5, seq + 2, 8);
        q.push(1_000, seq + 3, 9);
        assert!(q.many.is_none());
        assert_eq!(q.levels.len(), 2);
        assert_eq!(q.nonempty, 0b11);
        assert_eq!(q.pop_best(), Some(7));
        assert_eq!(q.pop_best(), Some(9));
        assert_eq!(q.nonempty, 0b01);
        assert_eq!(q.best(), Some(8));
        q.remove(-5, seq + 2, 8);
        assert_eq!((q.nonempty, q.best()), (0, None));
    }
}
