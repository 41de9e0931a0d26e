//! `ps`: proportional share by start-time fair queuing with warp (Regehr 2001,
//! §9.3.3, guarantees §5.3.1.4).
//!
//! # Algorithm
//! Start-time fair queuing (SFQ, Goyal et al., reference 28 of Regehr 2001) with a
//! warp extension like BVT's (reference 20) but without BVT's warp time limit
//! and unwarp time requirement, as in §9.3.3.
//!
//! - Every child has a *virtual time* `v` that advances by the CPU time it
//!   receives divided by its `share`. Received time is net of stolen time
//!   ([`Ctx::vp_received`]), so a child is not charged for interrupts.
//! - The *system virtual time* `V` is the smallest virtual time among the
//!   children that are ready or running (running children are brought up
//!   to date first); when none is, it is the largest virtual time any child
//!   reached. A child that asks for the processor catches up:
//!   `v := max(v, V)`, so blocked children build no credit (§9.3.3).
//! - Dispatch picks the ready child with the smallest `v − warp`, ties
//!   going to the child queued first (FIFO), from a vector kept sorted by
//!   (`v − warp`, queue sequence): the smallest key is at the front, and
//!   queuing a child is a short search and shift (the dissertation's
//!   implementation scanned a list; an instance usually has few children,
//!   one VP per processor for each child instance, where a B-tree costs
//!   more; past 16 entries the queue is a double-ended queue searched by
//!   bisection, past 512 a B-tree, so a decision is O(log n)).
//! - A running child keeps its processor for at most `quantum` while other
//!   children are ready: then it is charged, re-queued behind equal keys,
//!   and the smallest key runs (the same child when it is still the
//!   smallest, without a revoke). The quantum timer is armed only while a
//!   child waits, so an uncontended child costs no timer events.
//! - A child with a non-zero warp that asks for the processor while every
//!   processor this instance can hold is busy preempts the running child
//!   with the largest current key (`v − warp`, brought up to date) when its
//!   own key is strictly smaller: BVT's wake-up rule without a
//!   context-switch allowance. That is what warp is for: low dispatch
//!   latency in exchange for borrowing against the child's future
//!   allocation. Children without warp never preempt on wake-up, so with
//!   every warp zero PS is exactly SFQ, driven by quanta (§5.3.1.4).
//!
//! `warp` is CPU time the child may run ahead of its fair position: it is
//! converted to virtual time with the child's own share, so a warp of 5 ms
//! lets a child borrow 5 ms of its future allocation whatever its share.
//!
//! Notifications reach an instance only after its own actions are applied
//! (the HSI never nests a policy's hooks), so every hook first reconciles
//! with what already happened: a processor the parent took back, a running
//! child that released. A hook that revokes a VP of a child instance never
//! grants another VP of that instance: the instance may release it as a
//! consequence of the revocation, before the grant would be applied.
//! Hierarchies with Join can still invalidate a queued grant in ways a
//! policy cannot see: a Join below one child may release its VP under
//! another child when the first is revoked. This processor-holding part
//! is shared with `coop` (the crate's `sfq` module).
//!
//! Virtual time is exact integer arithmetic: `v` counts 2¹⁶ units per
//! nanosecond at share 1 in a `u128`, shares are fixed-point with three
//! decimals, and division remainders are carried per child, so long runs do
//! not drift and two runs give the same schedule.
//!
//! Multiprocessor: a PS instance holds up to as many processors as it has
//! parent VPs (all those its parent offers) and runs one child on each. It
//! asks its parent for as many processors as it has ready or running
//! children. A child runs on at most one processor, so a share above
//! `1/processors` of the total cannot be honoured in full.
//!
//! # Parameters
//! Instance: `quantum`, duration, default 10 ms (a typical time-sharing
//! quantum; the dissertation's clock gave 10–15 ms on Windows 2000), must be
//! positive.
//!
//! Child (a thread's or child instance's `params`):
//! - `share`: positive number, default 1 (three decimals kept; at least
//!   0.001, at most 1e6).
//! - `warp`: duration, default 0.
//!
//! # Guarantees (Regehr 2001, Table 5.1, §5.3.1.4)
//! With every warp zero PS is SFQ: it accepts `PS`, `PSBE`, `RESU` or
//! `RESCH` and provides `PS` (from `PS`) or `PSBE` (from the others) to
//! each child; given `PSBE s δ`, a child with weight `r` (its fraction of
//! the shares) among `T` children and quantum `q` receives
//! `PSBE s·r, r·T·q/s + r·δ/s + q` (eq. 5.2). Once any child has a
//! non-zero warp the bounded-error analysis no longer holds (§5.3.1.7, as
//! for BVT): the children then get `PS s·r` only.
//!
//! # Messages
//! `Msg::SetParams` with `share` and/or `warp` changes a child's share and
//! warp at run time (keys absent keep their value; unknown keys are
//! refused). The child keeps its virtual time; a running child is first
//! charged at its old share.

use crate::registry::PolicyInfo;
use crate::sfq::{arm_timer, Held, Holder};
use hsched_core::{
    CpuId, Ctx, Duration, Instant, Msg, Node, ParamError, ParamSpec, Params, Policy, PolicyError,
    RevokeReason, Side, VpId, VpState, VpTable,
};
use std::collections::{BTreeMap, VecDeque};

/// Registry entry.
pub const INFO: PolicyInfo = PolicyInfo {
    name: "ps",
    summary: "proportional share: start-time fair queuing with BVT-like warp, multiprocessor",
    source: "Regehr 2001, §9.3.3, §5.3.1.4",
    instance_params: &[ParamSpec {
        key: "quantum",
        kind: "duration",
        default: "10ms",
        doc: "longest a child runs while others are ready",
    }],
    child_params: &[
        ParamSpec {
            key: "share",
            kind: "number 0.001..=1e6",
            default: "1",
            doc: "relative share of the CPU, positive",
        },
        ParamSpec {
            key: "warp",
            kind: "duration",
            default: "0",
            doc: "CPU time the child may borrow ahead of its share for low dispatch latency",
        },
    ],
    change_params: &[],
    max_children: None,
    min_parents: 1,
    max_parents: 1,
    build,
    check_child: |p| ShareParams::from_params(p).map(drop),
    exclusive: None,
    admission: None,
    merge_change: crate::registry::merge_change,
};

fn build(params: &Params) -> Result<Box<dyn Policy>, PolicyError> {
    Ok(Box::new(Ps::from_params(params)?))
}

/// Default quantum.
pub const DEFAULT_QUANTUM: Duration = Duration::from_millis(10);
/// Virtual-time units per nanosecond at share 1, times the share scale.
const VT_SCALE: u128 = 1000 << 16;
/// Shares are kept in thousandths.
const SHARE_SCALE: f64 = 1000.0;
const MAX_SHARE: f64 = 1e6;

fn param_err(key: &str, message: impl Into<String>) -> PolicyError {
    PolicyError::Param(ParamError {
        key: key.to_string(),
        message: message.into(),
    })
}

/// Configuration of one PS instance.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PsConfig {
    /// Longest a child runs while others are ready; positive.
    pub quantum: Duration,
}

impl Default for PsConfig {
    fn default() -> Self {
        PsConfig {
            quantum: DEFAULT_QUANTUM,
        }
    }
}

impl PsConfig {
    /// Reads `quantum` from instance parameters.
    ///
    /// # Errors
    /// Not a duration, or zero.
    pub fn from_params(params: &Params) -> Result<Self, PolicyError> {
        let quantum = params.duration("quantum")?.unwrap_or(DEFAULT_QUANTUM);
        if quantum == Duration::ZERO {
            return Err(param_err("quantum", "must be positive"));
        }
        Ok(PsConfig { quantum })
    }
}

/// A child's share and warp.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ShareParams {
    /// Relative share, in [0.001, 1e6].
    pub share: f64,
    /// CPU time the child may run ahead of its share.
    pub warp: Duration,
}

impl ShareParams {
    /// Reads and checks `share` (default 1) and `warp` (default 0).
    ///
    /// # Errors
    /// A share that is not a number, not positive, below 0.001 or above
    /// 1e6; a warp that is not a duration.
    pub fn from_params(params: &Params) -> Result<Self, PolicyError> {
        let share = params.f64("share")?.unwrap_or(1.0);
        if share <= 0.0 {
            return Err(param_err(
                "share",
                format!("must be positive, found {share}"),
            ));
        }
        if !(1.0 / SHARE_SCALE..=MAX_SHARE).contains(&share) {
            return Err(param_err(
                "share",
                format!("must be between 0.001 and 1e6, found {share}"),
            ));
        }
        let warp = params.duration("warp")?.unwrap_or(Duration::ZERO);
        Ok(ShareParams { share, warp })
    }

    fn weight(self) -> u64 {
        (self.share * SHARE_SCALE).round().max(1.0) as u64
    }
}

/// Per-child state.
#[derive(Clone, Debug)]
struct Child {
    params: ShareParams,
    /// `share` in thousandths.
    weight: u64,
    /// `warp` in virtual time.
    warp_vt: u128,
    /// Virtual time.
    vt: u128,
    /// Remainder of the last virtual-time division.
    rem: u128,
    /// Key in `ready`, while queued.
    ready_key: Option<(i128, u64)>,
}

impl Child {
    fn key(&self) -> i128 {
        self.vt as i128 - self.warp_vt as i128
    }

    fn set_params(&mut self, p: ShareParams) {
        self.params = p;
        self.weight = p.weight();
        self.warp_vt = p.warp.as_nanos() as u128 * VT_SCALE / self.weight as u128;
    }
}

/// Entries up to which a [`SortedMap`] is a vector searched linearly; past
/// that it is a double-ended queue searched by bisection, and back again at
/// half as many.
const SMALL_MAX: usize = 16;
/// Entries up to which a [`SortedMap`] is a double-ended queue; past that
/// it becomes a `BTreeMap`, and back again at half as many.
const MEDIUM_MAX: usize = 512;

/// A map from unique keys to children: `ps`'s ready queue. Iteration is in
/// key order whatever the representation, so the schedule does not depend
/// on it.
///
/// An instance usually has a handful of children (one VP per processor for
/// each child instance), and then a vector sorted by key costs far less
/// than a B-tree's node handling (measured: about 210 instructions per
/// insertion or removal in a `BTreeMap` of six entries). Its searches are
/// linear, as the shift that follows is anyway: an entry is found by its
/// child (each child is in a map at most once, under the key the child
/// remembers), and a new key's place from the back, where keys that grow
/// (virtual times, queue sequences) usually land. On a large machine (a
/// child instance per processor, up to a few hundred entries) a sorted
/// double-ended queue is searched by bisection, takes the front in O(1),
/// and shifts the shorter side on an insertion (a memory move of at most
/// half the entries); above all it is walked in order as a slice, several times cheaper
/// per entry than a B-tree, which matters when the front entries belong to
/// an instance being revoked (see [`Ps::take_ready`]). With thousands of
/// threads under one instance (Table 10.4) those shifts would dominate, so
/// a large map is a `BTreeMap`: O(log n) per decision.
#[derive(Debug)]
enum SortedMap<K> {
    Small(Vec<(K, VpId)>),
    Medium(VecDeque<(K, VpId)>),
    Large(BTreeMap<K, VpId>),
}

impl<K> Default for SortedMap<K> {
    fn default() -> Self {
        SortedMap::Small(Vec::new())
    }
}

impl<K: Ord + Copy> SortedMap<K> {
    fn len(&self) -> usize {
        match self {
            SortedMap::Small(v) => v.len(),
            SortedMap::Medium(v) => v.len(),
            SortedMap::Large(m) => m.len(),
        }
    }

    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The entry with the smallest key.
    #[inline]
    fn first(&self) -> Option<(K, VpId)> {
        match self {
            SortedMap::Small(v) => v.first().copied(),
            SortedMap::Medium(v) => v.front().copied(),
            SortedMap::Large(m) => m.first_key_value().map(|(&k, &vp)| (k, vp)),
        }
    }

    /// Removes the entry with the smallest key.
    fn pop_first(&mut self) {
        match self {
            SortedMap::Small(v) => {
                if !v.is_empty() {
                    v.remove(0);
                }
            }
            SortedMap::Medium(v) => {
                v.pop_front();
                self.shrink();
            }
            SortedMap::Large(m) => {
                m.pop_first();
                self.shrink();
            }
        }
    }

    /// Adds `vp` under `k`, a key no entry has (queue sequences and
    /// registration orders are unique).
    #[inline]
    fn insert(&mut self, k: K, vp: VpId) {
        match self {
            SortedMap::Small(v) if v.len() < SMALL_MAX => {
                // Behind every smaller key, searching from the back.
                let mut at = v.len();
                while at > 0 && v[at - 1].0 > k {
                    at -= 1;
                }
                debug_assert!(at == 0 || v[at - 1].0 < k, "duplicate key");
                v.insert(at, (k, vp));
            }
            SortedMap::Small(v) => {
                let mut d: VecDeque<(K, VpId)> = v.drain(..).collect();
                let at = d.partition_point(|e| e.0 < k);
                d.insert(at, (k, vp));
                *self = SortedMap::Medium(d);
            }
            SortedMap::Medium(v) if v.len() < MEDIUM_MAX => {
                let at = v.partition_point(|e| e.0 < k);
                debug_assert!(v.get(at).is_none_or(|e| e.0 != k), "duplicate key");
                v.insert(at, (k, vp));
            }
            SortedMap::Medium(v) => {
                let mut m: BTreeMap<K, VpId> = v.drain(..).collect();
                m.insert(k, vp);
                *self = SortedMap::Large(m);
            }
            SortedMap::Large(m) => {
                let had = m.insert(k, vp);
                debug_assert!(had.is_none(), "duplicate key");
            }
        }
    }

    /// The position of `vp`'s entry, which is under `k`, in a small map.
    #[inline]
    fn find(v: &[(K, VpId)], k: K, vp: VpId) -> Option<usize> {
        let at = v.iter().position(|e| e.1 == vp);
        debug_assert!(at.is_some_and(|at| v[at].0 == k));
        at
    }

    /// Removes `vp`'s entry, which is under `k`.
    #[inline]
    fn remove(&mut self, k: K, vp: VpId) {
        match self {
            SortedMap::Small(v) => {
                if let Some(at) = Self::find(v, k, vp) {
                    v.remove(at);
                }
            }
            SortedMap::Medium(v) => {
                let at = v.partition_point(|e| e.0 < k);
                if v.get(at).is_some_and(|e| e.0 == k) {
                    debug_assert_eq!(v[at].1, vp);
                    v.remove(at);
                }
                self.shrink();
            }
            SortedMap::Large(m) => {
                let had = m.remove(&k);
                debug_assert_eq!(had, Some(vp));
                self.shrink();
            }
        }
    }

    /// A map that has become small again takes the next smaller form.
    fn shrink(&mut self) {
        match self {
            SortedMap::Medium(v) if v.len() <= SMALL_MAX / 2 => {
                *self = SortedMap::Small(std::mem::take(v).into_iter().collect());
            }
            SortedMap::Large(m) if m.len() <= MEDIUM_MAX / 2 => {
                *self = SortedMap::Medium(std::mem::take(m).into_iter().collect());
            }
            _ => {}
        }
    }

    /// Calls `f` on the entries with keys up to `last`, in key order,
    /// until it returns `true`.
    #[inline]
    fn find_up_to(&self, last: K, mut f: impl FnMut(K, VpId) -> bool) {
        match self {
            SortedMap::Small(v) => {
                for &(k, vp) in v.iter() {
                    if k > last || f(k, vp) {
                        return;
                    }
                }
            }
            SortedMap::Medium(v) => {
                let (a, b) = v.as_slices();
                for &(k, vp) in a.iter().chain(b) {
                    if k > last || f(k, vp) {
                        return;
                    }
                }
            }
            SortedMap::Large(m) => {
                for (&k, &vp) in m.iter() {
                    if k > last || f(k, vp) {
                        return;
                    }
                }
            }
        }
    }

    /// The entries in key order (for checks).
    fn entries(&self) -> Vec<(K, VpId)> {
        let mut all = Vec::with_capacity(self.len());
        self.each(|k, vp| all.push((k, vp)));
        all
    }

    /// Calls `f` on every entry, in key order.
    fn each(&self, mut f: impl FnMut(K, VpId)) {
        match self {
            SortedMap::Small(v) => v.iter().for_each(|&(k, vp)| f(k, vp)),
            SortedMap::Medium(v) => v.iter().for_each(|&(k, vp)| f(k, vp)),
            SortedMap::Large(m) => m.iter().for_each(|(&k, &vp)| f(k, vp)),
        }
    }
}

/// A PS instance. See the module documentation.
#[derive(Debug)]
pub struct Ps {
    cfg: PsConfig,
    children: VpTable<Child>,
    /// Ready children by (v − warp, queue sequence).
    ready: SortedMap<(i128, u64)>,
    /// Children whose warp is not zero in virtual time. While there are
    /// none, a ready child's key is its virtual time, so the front of
    /// `ready` has the smallest one (see [`Ps::vsys`]).
    warped: usize,
    /// Processors held; `run` is when the child was dispatched (its
    /// quantum runs from there).
    held: Vec<Held<Instant>>,
    /// Instances revoked in the current hook: none of their VPs is granted
    /// in it (see `take_ready`).
    avoid: Vec<Node>,
    /// Reused buffer for the timer hook.
    scratch: Vec<VpId>,
    next_seq: u64,
    /// Largest virtual time reached: `V` when nothing is active.
    vmax: u128,
}

impl Ps {
    /// A PS instance with this configuration.
    pub fn new(cfg: PsConfig) -> Self {
        Ps {
            cfg,
            children: VpTable::new(Side::Child),
            ready: SortedMap::default(),
            warped: 0,
            held: Vec::new(),
            avoid: Vec::new(),
            scratch: Vec::new(),
            next_seq: 0,
            vmax: 0,
        }
    }

    /// A PS instance from instance parameters (see [`PsConfig::from_params`]).
    ///
    /// # Errors
    /// As [`PsConfig::from_params`].
    pub fn from_params(params: &Params) -> Result<Self, PolicyError> {
        Ok(Ps::new(PsConfig::from_params(params)?))
    }

    /// The configuration.
    pub fn config(&self) -> PsConfig {
        self.cfg
    }

    /// The system virtual time `V`: the smallest virtual time among the
    /// ready and running children, running ones brought up to date, or the
    /// largest reached when there are none.
    ///
    /// A ready child's virtual time does not change while it is queued, and
    /// while no child has a warp its key in `ready` is that virtual time, so
    /// the ready part is the front of `ready`; only with warps are the
    /// queued children looked at one by one. A running child's virtual
    /// time as last charged is a lower bound of its current one, so only
    /// the running children whose bound is below the minimum so far are
    /// charged: the others cannot lower it. Charging is exact (remainders
    /// carried), so charging later gives the same virtual times; the hooks
    /// that compare running children's keys charge them all first. (An
    /// ordered set of every active child by virtual time, re-keyed on every
    /// charge, cost far more than this pass on a large machine.)
    fn vsys(&mut self, ctx: &Ctx<'_>) -> u128 {
        let ready = if self.warped == 0 {
            self.ready.first().map(|(k, _)| k.0 as u128)
        } else {
            self.ready_vt_min(ctx)
        };
        debug_assert_eq!(ready, self.ready_vt_min(ctx));
        let mut v = ready.unwrap_or(u128::MAX);
        for i in 0..self.held.len() {
            let vp = self.held[i].vp;
            if self.children.get(ctx, vp).is_some_and(|c| c.vt < v) {
                self.charge(ctx, i);
                if let Some(c) = self.children.get(ctx, vp) {
                    v = v.min(c.vt);
                }
            }
        }
        let v = if ready.is_none() && self.held.is_empty() {
            self.vmax
        } else {
            v
        };
        #[cfg(debug_assertions)]
        {
            // The long way: every running child up to date.
            self.charge_all(ctx);
            let exact = self
                .held
                .iter()
                .filter_map(|h| self.children.get(ctx, h.vp).map(|c| c.vt))
                .chain(ready)
                .min()
                .unwrap_or(self.vmax);
            assert_eq!(v, exact, "system virtual time");
        }
        v
    }

    /// The smallest virtual time among the queued children, the long way.
    fn ready_vt_min(&self, ctx: &Ctx<'_>) -> Option<u128> {
        let mut min = None;
        self.ready.each(|_, vp| {
            if let Some(c) = self.children.get(ctx, vp) {
                min = Some(min.map_or(c.vt, |m: u128| m.min(c.vt)));
            }
        });
        min
    }

    fn dequeue(&mut self, ctx: &Ctx<'_>, vp: VpId) {
        if let Some(c) = self.children.get_mut(ctx, vp) {
            if let Some(k) = c.ready_key.take() {
                self.ready.remove(k, vp);
            }
        }
    }

    /// Takes off the queue the smallest-key ready child whose key is at
    /// most `limit`, skipping the VPs of the instances in `avoid`. Entries
    /// whose VP is no longer ready (it released; the notification is still
    /// on its way) are dropped.
    ///
    /// A child instance with several VPs may release one of them when
    /// another is revoked, before a grant queued in the same hook is
    /// applied; so a hook never grants a VP of an instance it revokes
    /// (swapping one of its processors for another would gain nothing
    /// anyway). The skipped entries are at most the VPs of those instances.
    fn take_ready(&mut self, ctx: &Ctx<'_>, limit: i128) -> Option<VpId> {
        // The usual case: the smallest key qualifies.
        let (k, vp) = self.ready.first()?;
        if k.0 > limit {
            return None;
        }
        if ctx.vp_state(vp) == VpState::Ready && !self.avoid.contains(&ctx.vp_child(vp)) {
            self.ready.pop_first();
            if let Some(c) = self.children.get_mut(ctx, vp) {
                c.ready_key = None;
            }
            return Some(vp);
        }
        let mut stale = Vec::new();
        let mut found = None;
        let avoid = &self.avoid;
        self.ready.find_up_to((limit, u64::MAX), |k, vp| {
            if ctx.vp_state(vp) != VpState::Ready {
                stale.push((k, vp));
                false
            } else if !avoid.contains(&ctx.vp_child(vp)) {
                found = Some((k, vp));
                true
            } else {
                false
            }
        });
        for (k, vp) in stale {
            self.ready.remove(k, vp);
            if let Some(c) = self.children.get_mut(ctx, vp) {
                c.ready_key = None;
            }
        }
        let (k, vp) = found?;
        self.ready.remove(k, vp);
        if let Some(c) = self.children.get_mut(ctx, vp) {
            c.ready_key = None;
        }
        Some(vp)
    }

    /// A ready child `vp` with a non-zero warp preempts the running child
    /// with the largest current key when every processor the instance could
    /// hold is busy and its own key is strictly smaller (BVT's rule with no
    /// context-switch allowance). Running children must be charged first.
    fn maybe_preempt(&mut self, ctx: &mut Ctx<'_>, vp: VpId) {
        if self.ready.len() + self.held.len() <= ctx.parent_vps().len() {
            return;
        }
        let Some((key, warp)) = self
            .children
            .get(ctx, vp)
            .and_then(|c| Some((c.ready_key?.0, c.warp_vt)))
        else {
            return;
        };
        if warp == 0 {
            return;
        }
        // Keys of running children are compared: all up to date.
        self.charge_all(ctx);
        let current =
            |h: &Held<Instant>| self.children.get(ctx, h.vp).map_or(i128::MIN, Child::key);
        // The largest current key (the last one on ties), never another VP
        // of the same child instance (see `take_ready`) nor a child
        // granted in this hook (not running yet).
        let me = ctx.vp_child(vp);
        let Some(i) = (0..self.held.len())
            .filter(|&i| {
                let h = &self.held[i];
                ctx.vp_child(h.vp) != me && ctx.vp_cpu(h.vp) == Some(h.cpu)
            })
            .max_by_key(|&i| current(&self.held[i]))
        else {
            return;
        };
        if key >= current(&self.held[i]) {
            return;
        }
        let h = self.held.remove(i);
        // The victim is queued after the grant is decided.
        self.avoid.push(ctx.vp_child(h.vp));
        let Some(next) = self.take_ready(ctx, i128::MAX) else {
            self.avoid.pop();
            self.held.insert(i, h);
            return;
        };
        ctx.revoke(h.vp, RevokeReason::Preempted);
        self.hold(ctx, h.parent, h.cpu, next, ctx.now());
        ctx.grant(next, h.cpu);
        self.enqueue(ctx, h.vp);
    }

    /// Adjusts the demand on the parent and arms the quantum timer.
    fn settle(&mut self, ctx: &mut Ctx<'_>) {
        let want = (self.ready.len() + self.held.len()).min(ctx.parent_vps().len());
        ctx.set_parent_demand(want);
        let at = if self.ready.is_empty() {
            Instant::NEVER
        } else {
            // Adding the quantum (saturating) keeps the order: add it once.
            self.held
                .iter()
                .map(|h| h.run)
                .min()
                .map_or(Instant::NEVER, |run| run + self.cfg.quantum)
        };
        arm_timer(ctx, at);
    }

    fn parse_change(
        ctx: &Ctx<'_>,
        vp: VpId,
        change: &Params,
    ) -> Result<(Params, ShareParams), PolicyError> {
        if let Some(k) = change.unknown_keys(&["share", "warp"]).next() {
            return Err(PolicyError::Unsupported(format!(
                "a PS child has no parameter `{k}`; it accepts: share, warp"
            )));
        }
        let merged = crate::registry::merge_change(ctx.vp_params(vp), change);
        let p = ShareParams::from_params(&merged)?;
        Ok((merged, p))
    }
}

impl Holder for Ps {
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

    /// `v += used / share`, remainder carried; `V`'s map follows.
    fn advance(&mut self, ctx: &Ctx<'_>, vp: VpId, used: Duration) {
        let Some(c) = self.children.get_mut(ctx, vp) else {
            return;
        };
        let total = used.as_nanos() as u128 * VT_SCALE + c.rem;
        c.vt += total / c.weight as u128;
        c.rem = total % c.weight as u128;
        self.vmax = self.vmax.max(c.vt);
    }

    fn enqueue(&mut self, ctx: &Ctx<'_>, vp: VpId) {
        let seq = self.next_seq;
        self.next_seq += 1;
        let Some(c) = self.children.get_mut(ctx, vp) else {
            return;
        };
        if let Some(k) = c.ready_key.take() {
            self.ready.remove(k, vp);
        }
        let k = (c.key(), seq);
        c.ready_key = Some(k);
        self.ready.insert(k, vp);
    }

    fn stopped(&mut self, _ctx: &mut Ctx<'_>, _vp: VpId) {
        // Neither queued nor running: nothing to forget.
    }

    /// Gives `cpu` (held through `parent`) to the smallest-key ready child,
    /// or releases `parent`.
    fn dispatch(&mut self, ctx: &mut Ctx<'_>, parent: VpId, cpu: CpuId) {
        match self.take_ready(ctx, i128::MAX) {
            Some(vp) => {
                self.hold(ctx, parent, cpu, vp, ctx.now());
                ctx.grant(vp, cpu);
            }
            None => ctx.release(parent),
        }
    }
}

impl Policy for Ps {
    fn policy_name(&self) -> &'static str {
        "ps"
    }

    fn register_vp(
        &mut self,
        ctx: &mut Ctx<'_>,
        vp: VpId,
        params: &Params,
    ) -> Result<(), PolicyError> {
        crate::registry::check_child_params(&INFO, params)?;
        let p = ShareParams::from_params(params)?;
        let mut c = Child {
            params: p,
            weight: 1,
            warp_vt: 0,
            vt: 0,
            rem: 0,
            ready_key: None,
        };
        c.set_params(p);
        self.warped += (c.warp_vt != 0) as usize;
        self.children.insert(ctx, vp, c);
        Ok(())
    }

    fn unregister_vp(&mut self, ctx: &mut Ctx<'_>, vp: VpId) {
        // The VP is waiting; its release has been handled.
        self.held.retain(|h| h.vp != vp);
        self.dequeue(ctx, vp);
        if let Some(c) = self.children.remove(ctx, vp) {
            self.warped -= (c.warp_vt != 0) as usize;
        }
    }

    fn request(&mut self, ctx: &mut Ctx<'_>, vp: VpId) {
        self.begin_about(ctx, Some(vp));
        // Stale when the child has released again since.
        let queued = self
            .children
            .get(ctx, vp)
            .is_some_and(|c| c.ready_key.is_some());
        if ctx.vp_state(vp) == VpState::Ready && !queued {
            let v = self.vsys(ctx);
            if let Some(c) = self.children.get_mut(ctx, vp) {
                c.vt = c.vt.max(v);
            }
            self.enqueue(ctx, vp);
            self.maybe_preempt(ctx, vp);
        }
        self.settle(ctx);
    }

    fn release(&mut self, ctx: &mut Ctx<'_>, vp: VpId) {
        // A running child that released is found by `sync`.
        self.begin_about(ctx, Some(vp));
        if ctx.vp_state(vp) == VpState::Waiting {
            self.dequeue(ctx, vp);
        }
        self.settle(ctx);
    }

    fn grant(&mut self, ctx: &mut Ctx<'_>, parent_vp: VpId, cpu: CpuId) {
        self.on_grant(ctx, parent_vp, cpu);
        self.settle(ctx);
    }

    fn revoke(&mut self, ctx: &mut Ctx<'_>, parent_vp: VpId, reason: RevokeReason) {
        self.on_revoke(ctx, parent_vp, reason);
        self.settle(ctx);
    }

    fn msg(&mut self, ctx: &mut Ctx<'_>, vp: VpId, msg: &Msg) -> Result<(), PolicyError> {
        let Msg::SetParams(change) = msg else {
            return Err(PolicyError::Unsupported(format!(
                "ps accepts share and warp changes (SetParams), not {msg:?}"
            )));
        };
        if self.children.get(ctx, vp).is_none() {
            return Err(PolicyError::Refused(format!(
                "{vp} is not a child of this scheduler"
            )));
        }
        let (merged, p) = Self::parse_change(ctx, vp, change)?;
        self.begin_about(ctx, None);
        self.charge_all(ctx);
        let queued = match self.children.get_mut(ctx, vp) {
            Some(c) => {
                let was = (c.warp_vt != 0) as usize;
                c.set_params(p);
                self.warped = self.warped - was + (c.warp_vt != 0) as usize;
                c.ready_key.is_some()
            }
            None => false,
        };
        ctx.set_vp_params(vp, merged);
        if queued {
            self.enqueue(ctx, vp);
            self.maybe_preempt(ctx, vp);
        }
        self.settle(ctx);
        Ok(())
    }

    fn timer(&mut self, ctx: &mut Ctx<'_>) {
        self.begin_about(ctx, None);
        let now = ctx.now();
        // Children that lose their processor are queued only once every
        // processor has been decided, so that no child is revoked and
        // granted in one batch of actions: its revocation may make it
        // release before the grant would be applied.
        let mut out = std::mem::take(&mut self.scratch);
        let quantum = self.cfg.quantum;
        for i in 0..self.held.len() {
            // Most processors are not due: one look at their dispatch time.
            if self.held[i].run + quantum > now {
                continue;
            }
            let h = self.held[i];
            if ctx.vp_cpu(h.vp) != Some(h.cpu) {
                continue;
            }
            self.charge(ctx, i);
            self.held[i].run = now;
            let old = self.held[i].vp;
            let old_key = self.children.get(ctx, old).map_or(i128::MAX, Child::key);
            // Re-queued behind equal keys: a ready child with a key no
            // larger than the old one's runs next.
            self.avoid.push(ctx.vp_child(old));
            let Some(vp) = self.take_ready(ctx, old_key) else {
                self.avoid.pop();
                continue;
            };
            let h = &mut self.held[i];
            h.vp = vp;
            h.mark = ctx.vp_received(vp);
            let cpu = h.cpu;
            ctx.revoke(old, RevokeReason::Preempted);
            ctx.grant(vp, cpu);
            out.push(old);
        }
        for vp in out.drain(..) {
            self.enqueue(ctx, vp);
        }
        self.scratch = out;
        self.settle(ctx);
    }

    fn check_invariants(&self, ctx: &Ctx<'_>) -> Result<(), String> {
        self.check_held(ctx)?;
        for (k, vp) in self.ready.entries() {
            let c = self
                .children
                .get(ctx, vp)
                .ok_or_else(|| format!("queued {vp} is not a child"))?;
            if c.ready_key != Some(k) {
                return Err(format!("queue entry of {vp} is stale"));
            }
            if ctx.vp_state(vp) != VpState::Ready {
                return Err(format!("queued {vp} is {:?}, not ready", ctx.vp_state(vp)));
            }
        }
        let warped = self.children.iter().filter(|(_, c)| c.warp_vt != 0).count();
        if warped != self.warped {
            return Err(format!(
                "counts {} children with a warp but there are {warped}",
                self.warped
            ));
        }
        Ok(())
    }

    fn describe(&self) -> String {
        format!(
            "quantum={} children={}",
            self.cfg.quantum,
            self.children.len()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::{SortedMap, MEDIUM_MAX, SMALL_MAX};
    use hsched_core::VpId;
    use std::collections::BTreeMap;

    /// Random insertions, removals, re-keyings and pops, in every form
    /// (around `SMALL_MAX` and `MEDIUM_MAX`), keep the same entries in the
    /// same order as a `BTreeMap`.
    #[test]
    fn a_sorted_map_orders_as_a_btree_map_at_every_size() {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        for target in [4u64, SMALL_MAX as u64 + 8, 200, MEDIUM_MAX as u64 + 100] {
            let mut map = SortedMap::default();
            let mut reference = BTreeMap::new();
            let mut key_of = BTreeMap::new();
            let mut seq = 0u64;
            for _ in 0..5_000 {
                let vp = VpId(next(2 * target) as u32);
                match key_of.get(&vp).copied() {
                    None if next(3) > 0 => {
                        seq += 1;
                        let k = (next(1_000), seq);
                        map.insert(k, vp);
                        reference.insert(k, vp);
                        key_of.insert(vp, k);
                    }
                    None => {
                        if let Some((k, vp)) = map.first() {
                            map.pop_first();
                            assert_eq!(reference.pop_first(), Some((k, vp)));
                            key_of.remove(&vp);
                        }
                    }
                    Some(k) if next(2) == 0 => {
                        map.remove(k, vp);
                        reference.remove(&k);
                        key_of.remove(&vp);
                    }
                    Some(k) => {
                        seq += 1;
                        let new = (k.0 + next(500), seq);
                        map.remove(k, vp);
                        map.insert(new, vp);
                        reference.remove(&k);
                        reference.insert(new, vp);
                        key_of.insert(vp, new);
                    }
                }
                assert!(map
                    .entries()
                    .into_iter()
                    .eq(reference.iter().map(|(&k, &v)| (k, v))));
                assert_eq!(
                    map.first(),
                    reference.first_key_value().map(|(&k, &v)| (k, v))
                );
                assert_eq!(map.len(), reference.len());
            }
        }
    }
}
