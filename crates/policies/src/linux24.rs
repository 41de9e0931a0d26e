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

//! ## Guarantees
//! Best effort: `NULL ↦ NULL`.

use crate::best::{choice_or, nice_quantum, positive_duration_or, NICE_SPEC};
use crate::fp::{param_err, Parents, Run};
use crate::registry::{merge_change, PolicyInfo};
use hsched_core::{
    CpuId, Ctx, Duration, Instant, Msg, ParamSpec, Params, Policy, PolicyError, PolicyEvent,
    RevokeReason, Side, VpId, VpState, VpTable,
};

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

/// The Linux 2.4 time-sharing scheduler (see the module documentation).
#[derive(Debug)]
pub struct Linux24 {
    cfg: Linux24Config,
    kids: VpTable<Task>,
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
    fn enter(&mut self, ctx: &Ctx<'_>) {
        self.hook += 1;
        for (vp, t) in self.kids.iter_mut() {
            if let (Run::Running(_), VpState::Ready) = (t.run, ctx.vp_state(vp)) {
                t.run = Run::Ready;
            }
        }
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

    fn on_cpu(&self, cpu: CpuId) -> Option<usize> {
        (0..self.kids.len()).find(|&i| self.kids.at(i).1.run == Run::Running(cpu))
    }

    /// Counter left of child `i`, counting a segment in progress.
    fn counter_now(&self, ctx: &Ctx<'_>, i: usize) -> Duration {
        let (vp, t) = self.kids.at(i);
        match t.run {
            Run::Running(_) if !self.cfg.tick_accounting => {
                t.counter - (ctx.vp_received(vp) - t.start)
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
        let mut order: Vec<usize> = (0..self.kids.len())
            .filter(|&i| self.kids.at(i).1.run == Run::Ready && self.usable(ctx, i))
            .collect();
        order.sort_by_key(|&i| std::cmp::Reverse(self.kids.at(i).1.wake_seq));
        for _ in 0..2 {
            let mut best = prev;
            let mut c = prev.map_or(i64::MIN, |p| self.goodness(ctx, p, cpu, prev));
            for &i in &order {
                let g = self.goodness(ctx, i, cpu, prev);
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
        prev.or(order.first().copied())
    }

    fn grant(&mut self, ctx: &Ctx<'_>, i: usize, cpu: CpuId) {
        let (vp, _) = self.kids.at(i);
        let received = ctx.vp_received(vp);
        let hook = self.hook;
        let t = self.kids.at_mut(i).1;
        t.run = Run::Running(cpu);
        t.start = received;
        t.last_cpu = Some(cpu);
        t.touched = hook;
        self.grants.push((vp, cpu));
    }

    fn preempt(&mut self, ctx: &Ctx<'_>, i: usize, reason: RevokeReason) {
        self.account(ctx, i);
        let hook = self.hook;
        let (vp, t) = self.kids.at_mut(i);
        t.run = Run::Ready;
        t.touched = hook;
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
        let held: Vec<CpuId> = self.parents.held().map(|(_, c)| c).collect();
        for cpu in held {
            if self.on_cpu(cpu).is_none() {
                match self.schedule(ctx, cpu, None) {
                    Some(i) => self.grant(ctx, i, cpu),
                    None => break,
                }
            }
        }
        let kids = &self.kids;
        let unserved = kids.iter().filter(|(_, t)| t.run == Run::Ready).count();
        self.parents
            .queue_plan(ctx, &mut self.revokes, &mut self.grants, unserved, |c| {
                kids.iter().any(|(_, t)| t.run == Run::Running(c))
            });
        let mut next = Instant::NEVER;
        let running =
            (0..self.kids.len()).any(|i| matches!(self.kids.at(i).1.run, Run::Running(_)));
        if running && self.cfg.tick_accounting {
            // Ticks that passed while nothing ran charge nobody.
            let now = ctx.now().as_nanos();
            if self.next_tick.as_nanos() <= now.saturating_sub(1) || self.next_tick == Instant::ZERO
            {
                self.next_tick = Instant((now / self.tick() + 1) * self.tick());
            }
            next = next.min(self.next_tick);
        } else if running {
            for i in 0..self.kids.len() {
                if let Run::Running(_) = self.kids.at(i).1.run {
                    next = next.min(ctx.now() + self.counter_now(ctx, i));
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
        self.kids.remove(ctx, vp);
    }

    fn request(&mut self, ctx: &mut Ctx<'_>, vp: VpId) {
        self.enter(ctx);
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
        let t = self.kids.at_mut(w).1;
        t.run = Run::Ready;
        t.wake_seq = seq;
        // reschedule_idle(): an idle held processor takes it in settle();
        // otherwise preempt where the waker beats the current child by most.
        let idle = self.parents.held().any(|(_, c)| self.on_cpu(c).is_none());
        if !idle {
            let mut target: Option<(i64, CpuId, usize)> = None;
            for (_, cpu) in self.parents.held().collect::<Vec<_>>() {
                let Some(cur) = self.on_cpu(cpu) else {
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
        self.enter(ctx);
        self.parents.ensure(ctx);
        let Some(i) = self.kids.index_of(ctx, vp) else {
            return;
        };
        if ctx.vp_state(vp) == VpState::Waiting {
            self.account(ctx, i);
            self.kids.at_mut(i).1.run = Run::Waiting;
        }
        // Otherwise stale: the child asked again since, and the request
        // (already handled, or still to come) decides.
        self.settle(ctx);
    }

    fn grant(&mut self, ctx: &mut Ctx<'_>, parent_vp: VpId, cpu: CpuId) {
        self.enter(ctx);
        if self.parents.on_grant(ctx, parent_vp, cpu).is_some() {
            self.settle(ctx);
        }
    }

    fn revoke(&mut self, ctx: &mut Ctx<'_>, parent_vp: VpId, reason: RevokeReason) {
        self.enter(ctx);
        if let Some((_, cpu)) = self.parents.on_revoke(ctx, parent_vp) {
            if let Some(i) = self.on_cpu(cpu).filter(|&i| self.usable(ctx, i)) {
                self.preempt(ctx, i, reason);
            }
        }
        self.settle(ctx);
    }

    fn timer(&mut self, ctx: &mut Ctx<'_>) {
        self.enter(ctx);
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
                if let Some(i) = self.on_cpu(cpu).filter(|&i| self.usable(ctx, i)) {
                    let t = self.kids.at_mut(i).1;
                    t.counter -= tick;
                }
            }
        }
        for (_, cpu) in self.parents.held().collect::<Vec<_>>() {
            let Some(i) = self.on_cpu(cpu) else { continue };
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
            self.kids.at_mut(i).1.nice = nice;
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
        if ready && self.parents.held().any(|(_, c)| self.on_cpu(c).is_none()) {
            return Err("a child is ready while a held processor idles".into());
        }
        Ok(())
    }

    fn describe(&self) -> String {
        format!(
            "quantum={} hz={} proc_change_penalty={}",
            self.cfg.quantum, self.cfg.hz, self.cfg.proc_change_penalty
        )
    }
}
