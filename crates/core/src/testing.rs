//! Small policies for tests and examples of the core. Real policies live in
//! the `hsched-policies` crate.

use crate::ctx::Ctx;
use crate::hsi::Hsi;
use crate::ids::{CpuId, ThreadId, VpId};
use crate::params::Params;
use crate::policy::{Policy, PolicyError, RevokeReason};
use crate::time::{Duration, Instant};
use crate::violation::HsiError;
use std::collections::VecDeque;

/// First-come first-served over any number of processors, without
/// preemption: the smallest correct hierarchical policy. It handles
/// revocation (the revoked child goes back to the front of the queue).
#[derive(Debug, Default)]
pub struct Fifo {
    ready: VecDeque<VpId>,
    /// (processor, child running on it)
    running: Vec<(CpuId, VpId)>,
}

impl Fifo {
    fn demand(&self) -> usize {
        self.ready.len() + self.running.len()
    }

    /// Gives `cpu` to the next ready child, or releases the parent VP.
    fn pass_on(&mut self, ctx: &mut Ctx<'_>, cpu: CpuId, parent_vp: VpId) {
        match self.ready.pop_front() {
            Some(vp) => {
                self.running.push((cpu, vp));
                ctx.grant(vp, cpu);
            }
            None => ctx.release(parent_vp),
        }
    }

    fn parent_on(ctx: &Ctx<'_>, cpu: CpuId) -> Option<VpId> {
        ctx.parent_vps()
            .iter()
            .copied()
            .find(|&p| ctx.vp_cpu(p) == Some(cpu))
    }
}

impl Policy for Fifo {
    fn policy_name(&self) -> &'static str {
        "fifo"
    }

    fn register_vp(
        &mut self,
        _ctx: &mut Ctx<'_>,
        _vp: VpId,
        _params: &Params,
    ) -> Result<(), PolicyError> {
        Ok(())
    }

    fn unregister_vp(&mut self, _ctx: &mut Ctx<'_>, vp: VpId) {
        self.ready.retain(|&v| v != vp);
    }

    fn request(&mut self, ctx: &mut Ctx<'_>, vp: VpId) {
        self.ready.push_back(vp);
        ctx.set_parent_demand(self.demand());
    }

    fn release(&mut self, ctx: &mut Ctx<'_>, vp: VpId) {
        if let Some(i) = self.running.iter().position(|&(_, v)| v == vp) {
            let (cpu, _) = self.running.swap_remove(i);
            if let Some(pvp) = Self::parent_on(ctx, cpu) {
                self.pass_on(ctx, cpu, pvp);
            }
        } else {
            self.ready.retain(|&v| v != vp);
        }
        ctx.set_parent_demand(self.demand());
    }

    fn grant(&mut self, ctx: &mut Ctx<'_>, parent_vp: VpId, cpu: CpuId) {
        self.pass_on(ctx, cpu, parent_vp);
    }

    fn revoke(&mut self, ctx: &mut Ctx<'_>, parent_vp: VpId, reason: RevokeReason) {
        let Some(cpu) = ctx.vp_last_cpu(parent_vp) else {
            return;
        };
        if let Some(i) = self.running.iter().position(|&(c, _)| c == cpu) {
            let (_, vp) = self.running.swap_remove(i);
            // A grant planned before this revocation may have been dropped
            // as stale; only a child that really runs there is revoked.
            if ctx.vp_cpu(vp) == Some(cpu) {
                ctx.revoke(vp, reason);
            }
            self.ready.push_front(vp);
        }
    }

    fn check_invariants(&self, ctx: &Ctx<'_>) -> Result<(), String> {
        for &(cpu, vp) in &self.running {
            if ctx.vp_cpu(vp) != Some(cpu) {
                return Err(format!(
                    "thinks {vp} runs on {cpu} but it is {:?}",
                    ctx.vp_state(vp)
                ));
            }
        }
        Ok(())
    }
}

/// A policy that breaks the protocol on purpose: granted a processor, it
/// keeps it without granting it to anyone. For checker tests.
#[derive(Debug, Default)]
pub struct Hoarder;

impl Policy for Hoarder {
    fn policy_name(&self) -> &'static str {
        "hoarder"
    }
    fn register_vp(&mut self, _: &mut Ctx<'_>, _: VpId, _: &Params) -> Result<(), PolicyError> {
        Ok(())
    }
    fn unregister_vp(&mut self, _: &mut Ctx<'_>, _: VpId) {}
    fn request(&mut self, ctx: &mut Ctx<'_>, _: VpId) {
        ctx.set_parent_demand(1);
    }
    fn release(&mut self, _: &mut Ctx<'_>, _: VpId) {}
    fn grant(&mut self, _: &mut Ctx<'_>, _: VpId, _: CpuId) {}
    fn revoke(&mut self, _: &mut Ctx<'_>, _: VpId, _: RevokeReason) {}
}

/// What a [`Driver`] thread does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Behaviour {
    /// Always runnable.
    CpuBound,
    /// A job of `exec` every `period`, first released at `offset`; blocks
    /// when its job is done.
    Periodic {
        /// Release period.
        period: Duration,
        /// CPU time per job.
        exec: Duration,
        /// First release.
        offset: Duration,
    },
}

#[derive(Debug)]
struct DriverThread {
    id: ThreadId,
    behaviour: Behaviour,
    /// Work left in the current job (periodic).
    left: Duration,
    /// Next release while blocked.
    release: Option<Instant>,
    /// Release time of the current job.
    job_release: Instant,
    finishes: Vec<(Instant, Instant)>,
}

/// A minimal deterministic driver for policy unit tests: CPU-bound and
/// periodic threads on a precise machine with free context switches. The
/// full simulator (`hsched-sim`) has the real machine and workload models.
#[derive(Debug)]
pub struct Driver {
    /// The hierarchy being driven.
    pub hsi: Hsi,
    threads: Vec<DriverThread>,
    /// Which driver thread runs on each processor.
    on_cpu: Vec<Option<usize>>,
    since: Instant,
    changes: Vec<(CpuId, Option<ThreadId>)>,
}

impl Driver {
    /// Drives `hsi` from its current time.
    pub fn new(hsi: Hsi) -> Self {
        let n = hsi.cpu_count();
        let since = hsi.now();
        Driver {
            hsi,
            threads: Vec::new(),
            on_cpu: vec![None; n],
            since,
            changes: Vec::new(),
        }
    }

    /// Gives thread `id` a behaviour; CPU-bound threads wake at once.
    ///
    /// # Errors
    /// A protocol violation while waking it.
    pub fn add(&mut self, id: ThreadId, behaviour: Behaviour) -> Result<(), HsiError> {
        let now = self.hsi.now();
        let release = match behaviour {
            Behaviour::CpuBound => None,
            Behaviour::Periodic { offset, .. } => Some(now + offset),
        };
        self.threads.push(DriverThread {
            id,
            behaviour,
            left: Duration::ZERO,
            release,
            job_release: now,
            finishes: Vec::new(),
        });
        if behaviour == Behaviour::CpuBound {
            self.hsi.wake(now, id)?;
        }
        self.sync();
        Ok(())
    }

    /// Completion times of a periodic thread's jobs: (release, finish).
    pub fn finishes(&self, id: ThreadId) -> &[(Instant, Instant)] {
        self.threads
            .iter()
            .find(|t| t.id == id)
            .map_or(&[], |t| &t.finishes)
    }

    fn sync(&mut self) {
        self.changes.clear();
        self.hsi.drain_dispatch(&mut self.changes);
        for &(cpu, t) in &self.changes {
            self.on_cpu[cpu.index()] = t.and_then(|t| self.threads.iter().position(|d| d.id == t));
        }
    }

    /// Runs until `end`.
    ///
    /// # Errors
    /// The first protocol violation.
    pub fn run_until(&mut self, end: Instant) -> Result<(), HsiError> {
        loop {
            let now = self.since;
            // Next event: a timer, a job completion, a release, or the end.
            let mut next = end;
            if let Some(t) = self.hsi.next_timer() {
                next = next.min(t.max(now));
            }
            for &i in self.on_cpu.iter().flatten() {
                if let Behaviour::Periodic { .. } = self.threads[i].behaviour {
                    next = next.min(now + self.threads[i].left);
                }
            }
            for d in &self.threads {
                if let Some(r) = d.release {
                    next = next.min(r.max(now));
                }
            }
            // Charge the running threads.
            let elapsed = next.saturating_since(now);
            for d in self.on_cpu.iter().flatten() {
                let th = &mut self.threads[*d];
                th.left = th.left.saturating_sub(elapsed);
            }
            self.since = next;
            // Completions.
            for c in 0..self.on_cpu.len() {
                if let Some(i) = self.on_cpu[c] {
                    let th = &mut self.threads[i];
                    if let Behaviour::Periodic { period, .. } = th.behaviour {
                        if th.left == Duration::ZERO {
                            th.finishes.push((th.job_release, next));
                            let mut r = th.job_release + period;
                            while r <= next {
                                r += period;
                            }
                            th.release = Some(r);
                            let id = th.id;
                            self.hsi.block(next, id)?;
                            self.sync();
                        }
                    }
                }
            }
            // Releases.
            for i in 0..self.threads.len() {
                let th = &mut self.threads[i];
                if let (Some(r), Behaviour::Periodic { exec, .. }) = (th.release, th.behaviour) {
                    if r <= next {
                        th.release = None;
                        th.left = exec;
                        th.job_release = r;
                        let id = th.id;
                        self.hsi.wake(next, id)?;
                        self.sync();
                    }
                }
            }
            self.hsi.fire_timers(next)?;
            self.sync();
            if next >= end {
                return Ok(());
            }
        }
    }
}

/// SplitMix64: the small deterministic generator of hsched's randomized
/// tests, so that a seed printed by a failing test replays it. Not for
/// simulation (`hsched-sim` has its own, with streams per thread).
#[derive(Clone, Debug)]
pub struct SplitMix(pub u64);

impl SplitMix {
    /// The next 64 random bits.
    #[allow(clippy::should_implement_trait)] // not an iterator: it never ends
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (modulo, which tests do not mind); 0, drawing
    /// nothing, when `n` is 0.
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next() % n
        }
    }

    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }

    /// True `percent` times in a hundred.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    /// Uniform in `[0, 1)`, from the top 53 bits.
    pub fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// One of `items`, which is not empty.
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }

    /// `items` in a random order (Fisher–Yates).
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            items.swap(i, self.below(i as u64 + 1) as usize);
        }
    }
}
