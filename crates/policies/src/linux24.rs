//! # Linux 2.4 time sharing (`linux24`)
//!
//! The `SCHED_OTHER` scheduler of Linux 2.4 (`kernel/sched.c`), which Banachowski
//! 2002 compares BEST and BEST-RATE against (§3.2, §3.4): dynamic priorities
//! from per-child *counters*, `goodness()`, and epochs that end with a
//! recalculation of every counter.
//!
//! ## Algorithm
//! - Each child has a `counter`, the CPU time left in its current epoch. It
//!   is charged while the child runs (see `accounting`); at zero the child
//!   is descheduled.
//! - `goodness(p) = 0` when `p`'s counter is empty, otherwise
//!   `ticks(counter) + (20 − nice)`, plus 1 for the child that was running
//!   on the processor (Linux's same-address-space bonus for `prev`), plus
//!   `proc_change_penalty` for a child that last ran on this processor when
//!   the instance holds more than one (Linux's SMP affinity bonus).
//!   `ticks(c)` is `c` in clock ticks of `hz`, rounded up.
//! - `schedule()` on a processor picks the highest goodness among the
//!   previous child (considered first) and the ready children in run-queue
//!   order, most recently woken first; the first strictly better wins.
//! - **Epochs**: when every candidate has an empty counter, *every* child,
//!   sleeping ones included, gets `counter = counter/2 + quantum(nice)`,
//!   where `quantum(nice) = quantum · (20 − nice)/20` (the report's scaling:
//!   100 ms at nice 0, 200 ms at −20, 50 ms at +10, 5 ms at +19). A child
//!   that sleeps through `n` epochs tends to `2·quantum(nice)`: the boost
//!   for interactive children (§3.2).
//! - **Wake-up** (`reschedule_idle`): the child takes an idle held
//!   processor if there is one; otherwise it preempts the running child
//!   whose goodness it beats by more than 1 (the `preemption_goodness > 1`
//!   test), choosing the processor where it wins by most.
//!
//! This reproduces the behaviour the report blames for Linux's misses
//! (§3.4.2, §4.1 Exp. 8): a periodic child usually preempts on wake-up
//! because its counter decays more slowly, but after a recalculation it may
//! not, and a CPU-bound child then runs a whole quantum.
//!
//! ## Hierarchy and multiprocessors
//! Works at the root or under any parent, on the processors granted: with
//! `k` held it behaves like a `k`-way SMP 2.4 kernel. When the parent
//! revokes a processor, the child on it loses it with the parent's reason
//! and keeps its counter and run-queue position.
//!
//! ## Parameters
//! | side | key | kind | default | meaning |
//! |---|---|---|---|---|
//! | instance | `quantum` | duration, at least 20 µs (1 µs at nice 19) | `100ms` | nice-0 quantum added to the counter at each epoch, scaled by `(20 − nice)/20` |
//! | instance | `hz` | integer | `800` | clock rate that counters are counted in for `goodness()` |
//! | instance | `accounting` | `"exact"` / `"tick"` | `"exact"` | charge counters for the CPU time used, or a whole tick to whichever child runs at each tick of `hz` (what 2.4 does) |
//! | instance | `proc_change_penalty` | integer | `15` | goodness bonus for the processor a child last ran on (more than one processor held) |
//! | child | `nice` | integer −20..=19 | `0` | weight `20 − nice` in goodness, and the quantum |
//!
//! Defaults and why:
//! - `quantum = 100ms`: the report's value for 2.4 (§3.3.3), scaled
//!   linearly by nice ("−20 will double the time-slice, and +10 will
//!   halve", §4.1). 2.4.x's own `NICE_TO_TICKS` gives 60 ms at 100 Hz.
//! - `hz = 800`: the report raised the clock to 800 Hz and ran every
//!   scheduler in one simulator, *schedsim*; it does not say which rate its
//!   Linux baseline used. At 800 Hz the counter dominates `goodness()`,
//!   and the simulated Tables 3.1/4.1 match the report's Linux column
//!   (docs/best.md); at 100 Hz they do not.
//! - `accounting = "exact"`: with tick accounting, work that starts and
//!   ends exactly on tick boundaries (constant frames in a deterministic
//!   simulation) escapes charging altogether, a real 2.4 artefact that no
//!   real machine hits this regularly (tested in `tests/linux24.rs`).
//!
//! New children start with a full counter, `quantum(nice)`.
//!
//! ## Cost per decision
//! `schedule()` is O(log n) in the children: a ready child's counter does
//! not change until it runs or an epoch ends, so the ready children with
//! a positive counter sit in an ordered set by `(ticks + 20 − nice,
//! run-queue position)`, those that last ran on each processor in one set
//! per processor (the affinity bonus is the same for all of them), and the
//! ready children with an empty counter in a set by run-queue position.
//! The best candidate is the better of the first usable entry of the
//! global set, of the set of `cpu` with the bonus added, and of the
//! empty-counter set; any other child is no better than one of these. The
//! child on each processor is a table lookup. What stays linear: a wake-up
//! compares the waker with the child on every held processor, and arming
//! the timer looks at each of them, O(processors held), because a running
//! child's goodness falls with the CPU time it receives (net of stolen
//! time, so at a different rate on each processor); each running child's
//! counter is read from the VP once per hook and kept for the rest of it.
//! An epoch's recalculation changes every counter, O(n log n) once per
//! epoch, which lasts at least a quantum of every runnable child.

//! ## Guarantees
//! Best effort: `NULL ↦ NULL`.

use crate::best::{choice_or, nice_quantum, positive_duration_or, NICE_SPEC};
use crate::fp::{param_err, Parents, Run};
use crate::registry::{merge_change, PolicyInfo};
use hsched_core::{
    CpuId, Ctx, Duration, Instant, Msg, ParamSpec, Params, Policy, PolicyError, PolicyEvent,
    RevokeReason, Side, VpId, VpState, VpTable,
};
use std::cell::Cell;
use std::collections::BTreeSet;

/// Registry entry.
pub const INFO: PolicyInfo = PolicyInfo {
    name: "linux24",
    summary: "Linux 2.4 time sharing: goodness(), counters, epochs (the baseline of Banachowski 2002)",
    source: "Banachowski 2002, §3.2, §3.4",
    instance_params: &[
        ParamSpec {
            key: "quantum",
            kind: "duration, at least 20us",
            default: "100ms",
            doc: "nice-0 quantum added to the counter at each epoch, scaled by (20 - nice)/20",
        },
        ParamSpec {
            key: "hz",
            kind: "integer",
            default: "800",
            doc: "clock rate counters are counted in for goodness()",
        },
        ParamSpec {
            key: "proc_change_penalty",
            kind: "integer",
            default: "15",
            doc: "goodness bonus for the processor a child last ran on (more than one processor held)",
        },
        ParamSpec {
            key: "accounting",
            kind: "\"exact\" or \"tick\"",
            default: "exact",
            doc: "charge counters a tick at a time to the child running at each tick, or exactly",
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

fn build(params: &Params) -> Result<Box<dyn Policy>, PolicyError> {
    Ok(Box::new(Linux24::new(Linux24Config::from_params(params)?)))
}

/// The baseline's parameters; `Default` gives the report's values.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Linux24Config {
    /// The nice-0 quantum (100 ms).
    pub quantum: Duration,
    /// Clock rate for `goodness()` (800 Hz).
    pub hz: u32,
    /// SMP affinity bonus (15).
    pub proc_change_penalty: i64,
    /// Charge counters a whole tick at a time to whichever child runs at
    /// each clock tick, as 2.4 does (true), or exactly (false, default).
    pub tick_accounting: bool,
}

impl Default for Linux24Config {
    fn default() -> Self {
        Linux24Config {
            quantum: Duration::from_millis(100),
            hz: 800,
            proc_change_penalty: 15,
            tick_accounting: false,
        }
    }
}

impl Linux24Config {
    /// The configuration from `[[scheduler]]` parameters.
    ///
    /// # Errors
    /// A parameter of the wrong type or out of range.
    pub fn from_params(params: &Params) -> Result<Self, PolicyError> {
        let d = Linux24Config::default();
        let hz = match params.u64("hz")? {
            None => d.hz,
            Some(h) if (1..=100_000).contains(&h) => h as u32,
            Some(h) => return Err(param_err("hz", format!("{h} is outside 1..=100000"))),
        };
        let penalty = match params.u64("proc_change_penalty")? {
            None => d.proc_change_penalty,
            Some(p) if p <= 1000 => p as i64,
            Some(p) => {
                return Err(param_err(
                    "proc_change_penalty",
                    format!("{p} is outside 0..=1000"),
                ))
            }
        };
        Ok(Linux24Config {
            quantum: positive_duration_or(params, "quantum", d.quantum)?,
            hz,
            proc_change_penalty: penalty,
            tick_accounting: choice_or(params, "accounting", &["exact", "tick"])? == "tick",
        })
    }
}

#[derive(Clone, Debug)]
struct Task {
    /// CPU time left in this epoch.
    counter: Duration,
    nice: i64,
    run: Run,
    /// Received CPU time when the counter was last charged.
    start: Duration,
    /// Run-queue position: higher was woken more recently (front).
    wake_seq: u64,
    last_cpu: Option<CpuId>,
    /// The hook that last acted on it (see `Linux24::hook`).
    touched: u64,
}

/// A ready child with a positive counter in [`Linux24`]'s ordered sets:
/// its goodness without the `prev` and affinity bonuses, its run-queue
/// position (distinct among ready children), and its VP.
type Entry = (i64, u64, VpId);

/// The Linux 2.4 time-sharing scheduler (see the module documentation).
///
/// Each change of a child's state, counter (while ready), run-queue
/// position, last processor or nice value goes through `unlink`, the
/// change, then `link`, which keep the indexes in step with `kids`.
#[derive(Debug)]
pub struct Linux24 {
    cfg: Linux24Config,
    kids: VpTable<Task>,
    /// Ready children with a positive counter, by [`Entry`].
    ready: BTreeSet<Entry>,
    /// The same children by the processor they last ran on (by index).
    ready_on: Vec<BTreeSet<Entry>>,
    /// Ready children with an empty counter, by run-queue position.
    empty: BTreeSet<(u64, VpId)>,
    /// The child running in the view on each processor, by index.
    on: Vec<Option<VpId>>,
    /// Children running in the view.
    running: usize,
    /// `counter_now` of the child on each processor (by index), as found
    /// in generation `.0`: a VP's received time does not change within a
    /// hook, and charging a running child (`account`) leaves the value as
    /// it was, so only a new hook or an epoch (`gen`) makes it old.
    memo: Vec<Cell<Option<(u64, VpId, Duration)>>>,
    /// Bumped at each hook and each recalculation.
    gen: u64,
    parents: Parents,
    /// Planned revocations, queued first by `settle`.
    revokes: Vec<(VpId, RevokeReason)>,
    /// Planned grants, queued after parent releases by `settle`.
    grants: Vec<(VpId, CpuId)>,
    next_seq: u64,
    epochs: u64,
    /// Counts hook calls: a child this hook already acted on may be acted
    /// on again, one with a notification about it still to come may not.
    hook: u64,
    /// The next clock tick to charge (tick accounting).
    next_tick: Instant,
}

impl Default for Linux24 {
    fn default() -> Self {
        Linux24::new(Linux24Config::default())
    }
}

impl Linux24 {
    /// An instance with `cfg`.
    pub fn new(cfg: Linux24Config) -> Self {
        Linux24 {
            cfg,
            kids: VpTable::new(Side::Child),
            ready: BTreeSet::new(),
            ready_on: Vec::new(),
            empty: BTreeSet::new(),
            on: Vec::new(),
            running: 0,
            memo: Vec::new(),
            gen: 0,
            parents: Parents::default(),
            revokes: Vec::new(),
            grants: Vec::new(),
            next_seq: 0,
            epochs: 0,
            hook: 0,
            next_tick: Instant::ZERO,
        }
    }

    /// How many counter recalculations (epoch ends) have happened.
    pub fn epochs(&self) -> u64 {
        self.epochs
    }

    /// Marks the start of a hook, and reconciles the view with grants the
    /// HSI dropped as stale (see `Edf::enter` in `best`).
    ///
    /// `about` is the child a `request` or `release` is about, `None` for
    /// the other hooks. A dropped grant is followed by a notification (the
    /// revocation that made it stale), and so is a child that released and
    /// asked again while running; so with none waiting only the child this
    /// hook is about can be stale, outside a `revoke` (`full`), and the pass
    /// over the running children is skipped (debug builds check it).
    fn enter(&mut self, ctx: &Ctx<'_>, about: Option<VpId>, full: bool) {
        self.hook += 1;
        self.gen += 1;
        if self.running == 0 {
            return;
        }
        let is_stale = |vp: VpId| {
            ctx.vp_state(vp) == VpState::Ready
                && self
                    .kids
                    .get(ctx, vp)
                    .is_some_and(|t| matches!(t.run, Run::Running(_)))
        };
        let all = || -> Vec<usize> {
            self.on
                .iter()
                .flatten()
                .filter(|&&vp| is_stale(vp))
                .filter_map(|&vp| self.kids.index_of(ctx, vp))
                .collect()
        };
        let stale = if full || ctx.notifications_waiting() > 0 {
            all()
        } else {
            let one: Vec<usize> = about
                .filter(|&vp| is_stale(vp))
                .and_then(|vp| self.kids.index_of(ctx, vp))
                .into_iter()
                .collect();
            debug_assert_eq!(one, all(), "a running child went stale unseen");
            one
        };
        for i in stale {
            self.unlink(i);
            self.kids.at_mut(i).1.run = Run::Ready;
            self.link(i);
        }
    }

    /// Goodness of child `i` without the `prev` and affinity bonuses, from
    /// its stored counter; 0 for an empty counter.
    fn base(&self, t: &Task) -> i64 {
        let ticks = t.counter.as_nanos().div_ceil(self.tick()) as i64;
        if ticks == 0 {
            0
        } else {
            ticks + 20 - t.nice
        }
    }

    /// Takes child `i` out of the indexes, before a change (see the type's
    /// documentation).
    fn unlink(&mut self, i: usize) {
        let (vp, t) = self.kids.at(i);
        match t.run {
            Run::Waiting => {}
            Run::Ready => {
                let b = self.base(t);
                if b == 0 {
                    self.empty.remove(&(t.wake_seq, vp));
                } else {
                    let e = (b, t.wake_seq, vp);
                    self.ready.remove(&e);
                    if let Some(set) = t.last_cpu.and_then(|c| self.ready_on.get_mut(c.index())) {
                        set.remove(&e);
                    }
                }
            }
            Run::Running(c) => {
                if let Some(slot) = self.on.get_mut(c.index()) {
                    if *slot == Some(vp) {
                        *slot = None;
                        self.running -= 1;
                    }
                }
            }
        }
    }

    /// Puts child `i` back after a change (see `unlink`).
    fn link(&mut self, i: usize) {
        let (vp, t) = self.kids.at(i);
        match t.run {
            Run::Waiting => {}
            Run::Ready => {
                let b = self.base(t);
                if b == 0 {
                    self.empty.insert((t.wake_seq, vp));
                } else {
                    let e = (b, t.wake_seq, vp);
                    self.ready.insert(e);
                    if let Some(c) = t.last_cpu {
                        if self.ready_on.len() <= c.index() {
                            self.ready_on.resize_with(c.index() + 1, BTreeSet::new);
                        }
                        self.ready_on[c.index()].insert(e);
                    }
                }
            }
            Run::Running(c) => {
                if self.on.len() <= c.index() {
                    self.on.resize(c.index() + 1, None);
                    self.memo.resize(c.index() + 1, Cell::new(None));
                }
                debug_assert!(self.on[c.index()].is_none(), "two children run on {c}");
                if self.on[c.index()].replace(vp).is_none() {
                    self.running += 1;
                }
            }
        }
    }

    fn ready_count(&self) -> usize {
        self.ready.len() + self.empty.len()
    }

    fn tick(&self) -> u64 {
        1_000_000_000 / self.cfg.hz as u64
    }

    /// Whether this hook may act on child `i`: the HSI agrees with the
    /// view, or the disagreement is this hook's own queued action.
    fn usable(&self, ctx: &Ctx<'_>, i: usize) -> bool {
        let (vp, t) = self.kids.at(i);
        t.touched == self.hook || Run::of(ctx.vp_state(vp)) == t.run
    }

    fn on_cpu(&self, ctx: &Ctx<'_>, cpu: CpuId) -> Option<usize> {
        self.kids.index_of(ctx, self.on_vp(cpu)?)
    }

    fn on_vp(&self, cpu: CpuId) -> Option<VpId> {
        self.on.get(cpu.index()).copied().flatten()
    }

    /// Counter left of child `i`, counting a segment in progress.
    fn counter_now(&self, ctx: &Ctx<'_>, i: usize) -> Duration {
        let (vp, t) = self.kids.at(i);
        match t.run {
            Run::Running(c) if !self.cfg.tick_accounting => {
                let slot = self.memo.get(c.index());
                if let Some((g, v, d)) = slot.and_then(Cell::get) {
                    if g == self.gen && v == vp {
                        return d;
                    }
                }
                let d = t.counter - (ctx.vp_received(vp) - t.start);
                if let Some(slot) = slot {
                    slot.set(Some((self.gen, vp, d)));
                }
                d
            }
            _ => t.counter,
        }
    }

    /// The quantum added at each epoch: nice-scaled, and in whole ticks
    /// (at least one) with tick accounting.
    fn quantum(&self, nice: i64) -> Duration {
        let q = nice_quantum(self.cfg.quantum, nice);
        if !self.cfg.tick_accounting {
            return q;
        }
        let tick = self.tick();
        Duration((q.as_nanos() + tick / 2) / tick * tick).max(Duration(tick))
    }

    /// Charges running child `i` exactly (without tick accounting; with it,
    /// the clock tick charges).
    fn account(&mut self, ctx: &Ctx<'_>, i: usize) {
        let exact = !self.cfg.tick_accounting;
        let (vp, t) = self.kids.at_mut(i);
        if let (Run::Running(_), true) = (t.run, exact) {
            let now = ctx.vp_received(vp);
            t.counter -= now - t.start;
            t.start = now;
        }
    }

    /// `goodness()` of child `i` on `cpu`, `prev` being the child that was
    /// running there.
    fn goodness(&self, ctx: &Ctx<'_>, i: usize, cpu: CpuId, prev: Option<usize>) -> i64 {
        let t = self.kids.at(i).1;
        let ticks = self.counter_now(ctx, i).as_nanos().div_ceil(self.tick()) as i64;
        if ticks == 0 {
            return 0;
        }
        let mut g = ticks + 20 - t.nice;
        if prev == Some(i) {
            g += 1;
        }
        if self.parents.len() > 1 && t.last_cpu == Some(cpu) {
            g += self.cfg.proc_change_penalty;
        }
        g
    }

    /// Every child's counter becomes `counter/2 + quantum(nice)` (an epoch
    /// ends).
    fn recalculate(&mut self, ctx: &mut Ctx<'_>) {
        let tick = self.tick();
        // Every ready child's key changes: rebuild the sets after.
        self.ready.clear();
        self.ready_on.iter_mut().for_each(BTreeSet::clear);
        self.empty.clear();
        self.gen += 1;
        for i in 0..self.kids.len() {
            self.account(ctx, i);
            let q = self.quantum(self.kids.at(i).1.nice);
            let t = self.kids.at_mut(i).1;
            let half = if self.cfg.tick_accounting {
                t.counter.as_nanos() / tick / 2 * tick
            } else {
                t.counter.as_nanos() / 2
            };
            t.counter = Duration(half) + q;
            if t.run == Run::Ready {
                self.link(i);
            }
        }
        self.epochs += 1;
        if ctx.tracing() {
            ctx.event(PolicyEvent::Note(format!(
                "epoch {} ends: counters recalculated",
                self.epochs
            )));
        }
    }

    /// Linux's `schedule()` for `cpu`: the best candidate among `prev` (if
    /// still runnable there) and the settled ready children.
    fn schedule(&mut self, ctx: &mut Ctx<'_>, cpu: CpuId, prev: Option<usize>) -> Option<usize> {
        for _ in 0..2 {
            let mut best = prev;
            let mut c = prev.map_or(i64::MIN, |p| self.goodness(ctx, p, cpu, prev));
            // Linux's pass over the run queue keeps the first strictly
            // better child, most recently woken first: the ready child with
            // the largest (goodness, run-queue position), if it beats prev.
            if let Some((g, _, i)) = self.best_ready(ctx, cpu, prev) {
                if g > c {
                    c = g;
                    best = Some(i);
                }
            }
            if best.is_some() && c == 0 {
                self.recalculate(ctx);
                continue;
            }
            return best;
        }
        // After a recalculation every counter is positive, so the second
        // pass always returns; this is only reached with a zero quantum.
        prev.or_else(|| self.first_ready(ctx))
    }

    /// The first usable index entry of `set`, in descending order.
    fn first_usable<'a, I>(&self, ctx: &Ctx<'_>, set: I) -> Option<usize>
    where
        I: Iterator<Item = &'a VpId>,
    {
        set.filter_map(|&vp| self.kids.index_of(ctx, vp))
            .find(|&i| self.usable(ctx, i))
    }

    /// The usable ready child with the largest (goodness on `cpu`, run-queue
    /// position), with them. A child in no set below is beaten by the first
    /// of its own set: by key in `ready` (its bonus is 0 on `cpu`), by key
    /// plus the same bonus in `ready_on[cpu]`, by position in `empty`.
    fn best_ready(
        &self,
        ctx: &Ctx<'_>,
        cpu: CpuId,
        prev: Option<usize>,
    ) -> Option<(i64, u64, usize)> {
        let mut firsts = [
            self.first_usable(ctx, self.ready.iter().rev().map(|e| &e.2)),
            None,
            self.first_usable(ctx, self.empty.iter().rev().map(|e| &e.1)),
        ];
        if self.parents.len() > 1 {
            if let Some(set) = self.ready_on.get(cpu.index()) {
                firsts[1] = self.first_usable(ctx, set.iter().rev().map(|e| &e.2));
            }
        }
        firsts
            .into_iter()
            .flatten()
            .map(|i| {
                let g = self.goodness(ctx, i, cpu, prev);
                (g, self.kids.at(i).1.wake_seq, i)
            })
            .max_by_key(|&(g, seq, _)| (g, seq))
    }

    /// The most recently woken usable ready child.
    fn first_ready(&self, ctx: &Ctx<'_>) -> Option<usize> {
        (0..self.kids.len())
            .filter(|&i| self.kids.at(i).1.run == Run::Ready && self.usable(ctx, i))
            .max_by_key(|&i| (self.kids.at(i).1.wake_seq, std::cmp::Reverse(i)))
    }

    /// Checks the indexes against a pass over every child.
    fn check_indexes(&self, ctx: &Ctx<'_>) -> Result<(), String> {
        let mut ready = BTreeSet::new();
        let mut empty = BTreeSet::new();
        let mut on = 0;
        for (vp, t) in self.kids.iter() {
            match t.run {
                Run::Waiting => {}
                Run::Ready if self.base(t) == 0 => {
                    empty.insert((t.wake_seq, vp));
                }
                Run::Ready => {
                    let e = (self.base(t), t.wake_seq, vp);
                    ready.insert(e);
                    let listed = t
                        .last_cpu
                        .and_then(|c| self.ready_on.get(c.index()))
                        .is_some_and(|s| s.contains(&e));
                    if t.last_cpu.is_some() && !listed {
                        return Err(format!("{vp} is missing from its processor's set"));
                    }
                }
                Run::Running(c) => {
                    on += 1;
                    if self.on_vp(c) != Some(vp) {
                        return Err(format!("{vp} runs on {c}, the table says otherwise"));
                    }
                }
            }
        }
        let per_cpu: usize = self.ready_on.iter().map(BTreeSet::len).sum();
        let with_cpu = ready
            .iter()
            .filter(|e| {
                self.kids
                    .get(ctx, e.2)
                    .is_some_and(|t| t.last_cpu.is_some())
            })
            .count();
        if ready != self.ready || empty != self.empty || on != self.running || per_cpu != with_cpu {
            return Err("the run-queue indexes disagree with the children".into());
        }
        Ok(())
    }

    fn grant(&mut self, ctx: &Ctx<'_>, i: usize, cpu: CpuId) {
        let (vp, _) = self.kids.at(i);
        let received = ctx.vp_received(vp);
        let hook = self.hook;
        self.unlink(i);
        let t = self.kids.at_mut(i).1;
        t.run = Run::Running(cpu);
        t.start = received;
        t.last_cpu = Some(cpu);
        t.touched = hook;
        self.link(i);
        self.grants.push((vp, cpu));
    }

    fn preempt(&mut self, ctx: &Ctx<'_>, i: usize, reason: RevokeReason) {
        self.account(ctx, i);
        let hook = self.hook;
        self.unlink(i);
        let (vp, t) = self.kids.at_mut(i);
        t.run = Run::Ready;
        t.touched = hook;
        self.link(i);
        self.revokes.push((vp, reason));
    }

    /// Runs `schedule()` on `cpu` where child `prev` was running, and
    /// switches if it chose another child.
    fn reschedule(&mut self, ctx: &mut Ctx<'_>, cpu: CpuId, prev: usize, reason: RevokeReason) {
        if let Some(next) = self.schedule(ctx, cpu, Some(prev)) {
            if next != prev {
                self.preempt(ctx, prev, reason);
                self.grant(ctx, next, cpu);
            }
        }
    }

    /// Fills idle held processors, matches parent demand, arms the timer.
    fn settle(&mut self, ctx: &mut Ctx<'_>) {
        // With no child ready, schedule(None) would find nothing.
        if self.ready_count() > 0 {
            let held: Vec<CpuId> = self.parents.held().map(|(_, c)| c).collect();
            for cpu in held {
                if self.on_vp(cpu).is_none() {
                    match self.schedule(ctx, cpu, None) {
                        Some(i) => self.grant(ctx, i, cpu),
                        None => break,
                    }
                }
            }
        }
        let unserved = self.ready_count();
        let on = &self.on;
        self.parents
            .queue_plan(ctx, &mut self.revokes, &mut self.grants, unserved, |c| {
                on.get(c.index()).copied().flatten().is_some()
            });
        let mut next = Instant::NEVER;
        let running = self.running > 0;
        if running && self.cfg.tick_accounting {
            // Ticks that passed while nothing ran charge nobody.
            let now = ctx.now().as_nanos();
            if self.next_tick.as_nanos() <= now.saturating_sub(1) || self.next_tick == Instant::ZERO
            {
                self.next_tick = Instant((now / self.tick() + 1) * self.tick());
            }
            next = next.min(self.next_tick);
        } else if running {
            for (c, &vp) in self.on.iter().enumerate() {
                let Some(vp) = vp else { continue };
                // Most were just found by the wake-up or the timer.
                let left = match self.memo[c].get() {
                    Some((g, v, d)) if g == self.gen && v == vp => Some(d),
                    _ => self
                        .kids
                        .index_of(ctx, vp)
                        .map(|i| self.counter_now(ctx, i)),
                };
                if let Some(d) = left {
                    next = next.min(ctx.now() + d);
                }
            }
        }
        if next == Instant::NEVER {
            ctx.cancel_timer();
        } else if ctx.timer() != Some(next) {
            ctx.set_timer(next);
        }
    }
}

impl Policy for Linux24 {
    fn policy_name(&self) -> &'static str {
        "linux24"
    }

    fn init(&mut self, ctx: &mut Ctx<'_>) {
        self.parents.init(ctx);
    }

    fn register_vp(
        &mut self,
        ctx: &mut Ctx<'_>,
        vp: VpId,
        params: &Params,
    ) -> Result<(), PolicyError> {
        let nice = crate::best::nice_of(&INFO, params)?.unwrap_or(0);
        let counter = self.quantum(nice);
        let task = Task {
            counter,
            nice,
            run: Run::Waiting,
            start: Duration::ZERO,
            wake_seq: 0,
            last_cpu: None,
            touched: 0,
        };
        self.kids.insert(ctx, vp, task);
        Ok(())
    }

    fn unregister_vp(&mut self, ctx: &mut Ctx<'_>, vp: VpId) {
        if let Some(i) = self.kids.index_of(ctx, vp) {
            self.unlink(i);
        }
        self.kids.remove(ctx, vp);
    }

    fn request(&mut self, ctx: &mut Ctx<'_>, vp: VpId) {
        self.enter(ctx, Some(vp), false);
        self.parents.ensure(ctx);
        let Some(w) = self.kids.index_of(ctx, vp) else {
            return;
        };
        if ctx.vp_state(vp) != VpState::Ready {
            // Stale: released since, or already granted after a later
            // request that this one stands for.
            self.settle(ctx);
            return;
        }
        self.next_seq += 1;
        let seq = self.next_seq;
        self.unlink(w);
        let t = self.kids.at_mut(w).1;
        t.run = Run::Ready;
        t.wake_seq = seq;
        self.link(w);
        // reschedule_idle(): an idle held processor takes it in settle();
        // otherwise preempt where the waker beats the current child by most.
        let idle = self.running < self.parents.held().count()
            || self.parents.held().any(|(_, c)| self.on_vp(c).is_none());
        if !idle {
            let mut target: Option<(i64, CpuId, usize)> = None;
            for (_, cpu) in self.parents.held() {
                let Some(cur) = self.on_cpu(ctx, cpu) else {
                    continue;
                };
                if !self.usable(ctx, cur) {
                    continue;
                }
                let gain =
                    self.goodness(ctx, w, cpu, Some(cur)) - self.goodness(ctx, cur, cpu, Some(cur));
                if gain > 1 && target.is_none_or(|(g, _, _)| gain > g) {
                    target = Some((gain, cpu, cur));
                }
            }
            if let Some((_, cpu, cur)) = target {
                self.reschedule(ctx, cpu, cur, RevokeReason::Preempted);
            }
        }
        self.settle(ctx);
    }

    fn release(&mut self, ctx: &mut Ctx<'_>, vp: VpId) {
        self.enter(ctx, Some(vp), false);
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

    fn grant(&mut self, ctx: &mut Ctx<'_>, parent_vp: VpId, cpu: CpuId) {
        self.enter(ctx, None, false);
        if self.parents.on_grant(ctx, parent_vp, cpu).is_some() {
            self.settle(ctx);
        }
    }

    fn revoke(&mut self, ctx: &mut Ctx<'_>, parent_vp: VpId, reason: RevokeReason) {
        self.enter(ctx, None, true);
        if let Some((_, cpu)) = self.parents.on_revoke(ctx, parent_vp) {
            if let Some(i) = self.on_cpu(ctx, cpu).filter(|&i| self.usable(ctx, i)) {
                self.preempt(ctx, i, reason);
            }
        }
        self.settle(ctx);
    }

    fn timer(&mut self, ctx: &mut Ctx<'_>) {
        self.enter(ctx, None, false);
        self.parents.ensure(ctx);
        if self.cfg.tick_accounting
            && self.next_tick != Instant::ZERO
            && ctx.now() >= self.next_tick
        {
            // A clock tick: each running child is charged one tick.
            let tick = Duration(self.tick());
            self.next_tick =
                Instant((ctx.now().as_nanos() / tick.as_nanos() + 1) * tick.as_nanos());
            for (_, cpu) in self.parents.held().collect::<Vec<_>>() {
                if let Some(i) = self.on_cpu(ctx, cpu).filter(|&i| self.usable(ctx, i)) {
                    let t = self.kids.at_mut(i).1;
                    t.counter -= tick;
                }
            }
        }
        for (_, cpu) in self.parents.held().collect::<Vec<_>>() {
            let Some(i) = self.on_cpu(ctx, cpu) else {
                continue;
            };
            if !self.usable(ctx, i) || self.counter_now(ctx, i) > Duration::ZERO {
                continue;
            }
            self.account(ctx, i);
            let vp = self.kids.at(i).0;
            ctx.event(PolicyEvent::BudgetExhausted { vp });
            self.reschedule(ctx, cpu, i, RevokeReason::BudgetExhausted);
        }
        self.settle(ctx);
    }

    fn msg(&mut self, ctx: &mut Ctx<'_>, vp: VpId, msg: &Msg) -> Result<(), PolicyError> {
        let Msg::SetParams(params) = msg else {
            return Err(PolicyError::Unsupported(format!(
                "linux24 accepts only SetParams {{ nice }}, not {msg:?}"
            )));
        };
        let Some(i) = self.kids.index_of(ctx, vp) else {
            return Err(PolicyError::Refused(format!(
                "{vp} is not a child of this linux24 scheduler"
            )));
        };
        if let Some(nice) = crate::best::nice_of(&INFO, params)? {
            self.unlink(i);
            self.kids.at_mut(i).1.nice = nice;
            self.link(i);
        }
        let merged = merge_change(ctx.vp_params(vp), params);
        ctx.set_vp_params(vp, merged);
        Ok(())
    }

    fn check_invariants(&self, ctx: &Ctx<'_>) -> Result<(), String> {
        self.parents.check(ctx)?;
        for (vp, t) in self.kids.iter() {
            self.parents.check_child(ctx, vp, t.run)?;
        }
        let ready = self.kids.iter().any(|(_, t)| t.run == Run::Ready);
        if ready && self.parents.held().any(|(_, c)| self.on_vp(c).is_none()) {
            return Err("a child is ready while a held processor idles".into());
        }
        self.check_indexes(ctx)
    }

    fn describe(&self) -> String {
        format!(
            "quantum={} hz={} proc_change_penalty={}",
            self.cfg.quantum, self.cfg.hz, self.cfg.proc_change_penalty
        )
    }
}
