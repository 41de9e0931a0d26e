//! The HSI's tables: virtual processors, instances, threads, CPUs. Kept apart
//! from the policies so a policy hook can read them through its `Ctx` while
//! the HSI holds the policy mutably.

use crate::ids::{CpuId, InstanceId, Node, ThreadId, VpId};
use crate::params::Params;
use crate::policy::{Msg, RevokeReason};
use crate::time::{Duration, Instant};
use crate::timers::Timers;
use crate::trace::TraceEvent;
use crate::violation::Violation;
use std::collections::VecDeque;

/// The state of a virtual processor (Regehr 2001, Fig 4.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum VpState {
    /// Registered, not asking for a processor.
    Waiting,
    /// Asking for a processor.
    Ready,
    /// Holding a physical processor.
    Running(CpuId),
}

/// An action a policy asked for; applied by the HSI after the hook returns.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Action {
    Grant {
        vp: VpId,
        cpu: CpuId,
    },
    Revoke {
        vp: VpId,
        reason: RevokeReason,
    },
    Request {
        vp: VpId,
    },
    Release {
        vp: VpId,
    },
    /// Index into `State::msgs`.
    Msg {
        vp: VpId,
        msg: u32,
    },
}

/// One entry of the HSI's work stack (see `Hsi::drive`): an action an
/// instance's hook queued, or the mark that frees the instance once the
/// hook's actions and all they caused are applied.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Step {
    pub actor: InstanceId,
    /// `None`: the mark that frees `actor` (its hook is done).
    pub action: Option<Action>,
    /// The hook's last action, whose entry becomes the mark once applied.
    pub last: bool,
}

/// A notification caused by an action, possibly waiting for a busy
/// instance (see `Hsi::notify`).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Note {
    Grant(VpId, CpuId),
    Revoke(VpId, CpuId, RevokeReason),
    Request(VpId),
    Release(VpId),
    /// Message index into `State::msgs`, and the sending instance.
    Msg(VpId, u32, InstanceId),
}

/// Whether an instance's hook is having its actions applied (busy), and how
/// many notifications wait for it meanwhile; one word, so that the hot path
/// reads and writes it once.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct HookState(u32);

impl HookState {
    const BUSY: u32 = 1 << 31;

    #[inline(always)]
    pub fn busy(self) -> bool {
        self.0 & Self::BUSY != 0
    }

    #[inline(always)]
    pub fn waiting(self) -> u32 {
        self.0 & !Self::BUSY
    }

    #[inline(always)]
    pub fn set_busy(&mut self) {
        self.0 |= Self::BUSY;
    }

    /// Frees the instance; returns whether notifications wait for it.
    #[inline(always)]
    pub fn done(&mut self) -> bool {
        self.0 &= !Self::BUSY;
        self.0 != 0
    }

    #[inline(always)]
    pub fn add_waiting(&mut self) {
        // The count would need 2^31 queued notifications (32 GiB) to reach
        // the busy bit.
        debug_assert!(self.waiting() < Self::BUSY - 1);
        self.0 += 1;
    }

    #[inline(always)]
    pub fn sub_waiting(&mut self) {
        self.0 -= 1;
    }
}

#[derive(Debug)]
pub(crate) struct VpSlot {
    pub parent: Node,
    pub child: Node,
    pub state: VpState,
    /// For VPs registered with the top scheduler: the processor it always grants.
    pub top_cpu: Option<CpuId>,
    /// The processor the VP ran on last (kept after revoke and release).
    pub last_cpu: Option<CpuId>,
    /// CPU time received while running, net of stolen time, excluding the
    /// current segment.
    pub received: Duration,
    pub granted_at: Instant,
    pub stolen_at_grant: Duration,
    /// Free for the parent policy (an index into its own tables).
    pub parent_tag: u32,
    /// Free for the child policy.
    pub child_tag: u32,
    /// Parent-side parameters given at registration (or last set).
    pub params: Params,
    pub live: bool,
    /// Its index in its parent instance's `children`, so that removing it
    /// takes constant time (a move of many threads removes many).
    pub child_pos: u32,
}

/// Parent VPs above which an instance counts the processors it holds per
/// processor, so that checking a grant of it is one look-up rather than a
/// pass over its parent VPs (one per processor under a multiprocessor
/// parent).
pub(crate) const WIDE_PARENTS: usize = 8;

impl VpSlot {
    /// Net CPU time of the running segment at `now`, with `stolen` the
    /// running total of stolen time on its processor.
    #[inline]
    fn segment(&self, now: Instant, stolen: Duration) -> Duration {
        now.saturating_since(self.granted_at) - (stolen - self.stolen_at_grant)
    }
}

#[derive(Debug)]
pub(crate) struct InstSlot {
    pub name: String,
    pub parents: Vec<VpId>,
    pub children: Vec<VpId>,
    pub live: bool,
    /// How many of `parents` are not `Waiting` (asking for or holding a
    /// processor), so that `Ctx::set_parent_demand` need not look at each.
    pub asking: u32,
    /// Per processor, how many of `parents` run there (one, or two for a
    /// moment within an input while a policy grants before it revokes);
    /// kept only with more than [`WIDE_PARENTS`] parents, empty otherwise.
    pub held: Vec<u16>,
}

#[derive(Debug)]
pub(crate) struct ThreadSlot {
    pub name: String,
    pub vp: VpId,
    pub parent: InstanceId,
    pub runnable: bool,
    pub last_wake: Option<Instant>,
    pub last_block: Option<Instant>,
    /// Received CPU time of earlier VPs (before moves), net of stolen time.
    pub past_received: Duration,
    /// Where a reservation began from, to go back on `end_reservation`.
    pub before_reservation: Option<(InstanceId, Params)>,
    /// Why the thread last lost its processor to a revocation.
    pub last_revoke: Option<RevokeReason>,
    pub live: bool,
}

#[derive(Debug, Default)]
pub(crate) struct CpuSlot {
    /// The top VP for this CPU, when a root instance has registered one.
    pub top_vp: Option<VpId>,
    /// The thread the hierarchy runs here now.
    pub running: Option<ThreadId>,
    /// Thread VPs running here (more than one only transiently, within an
    /// input).
    pub leaves: u32,
    /// What the backend was last told.
    pub reported: Option<ThreadId>,
    pub dirty: bool,
    /// Total stolen time fed by the backend.
    pub stolen: Duration,
}

impl CpuSlot {
    /// Lists this processor, `cpu`, among those `Hsi::drain_dispatch`
    /// reports, once. Called with the slot already at hand, so that the
    /// thread bookkeeping looks the processor up once.
    #[inline]
    fn mark_dirty(&mut self, cpu: CpuId, dirty_cpus: &mut Vec<CpuId>) {
        if !self.dirty {
            self.dirty = true;
            dirty_cpus.push(cpu);
        }
    }
}

/// All tables, shared with `Ctx`.
pub(crate) struct State {
    pub now: Instant,
    pub vps: Vec<VpSlot>,
    pub free_vps: Vec<u32>,
    pub insts: Vec<InstSlot>,
    pub threads: Vec<ThreadSlot>,
    pub cpus: Vec<CpuSlot>,
    pub dirty_cpus: Vec<CpuId>,
    /// Hooks' queued actions still to apply, the next one last (see
    /// `Hsi::drive`).
    pub work: Vec<Step>,
    pub msgs: Vec<Option<Msg>>,
    /// Per instance: whether a hook of it is having its actions applied,
    /// and how many entries of `deferred` are its own.
    pub hooks: Vec<HookState>,
    /// Notifications waiting for busy instances, in arrival order.
    pub deferred: VecDeque<(InstanceId, Note)>,
    /// Notifications delivered during the current input.
    pub notes: u64,
    pub violations: Vec<Violation>,
    /// Faults of contained policies, for `Hsi::take_faults`.
    pub faults: Vec<crate::fault::Fault>,
    pub trace: Option<Vec<TraceEvent>>,
    /// The instances' timers.
    pub timers: Timers,
    /// The protocol checker's per-processor scratch tables, kept so that a
    /// check allocates nothing.
    pub check_leaf: Vec<Option<crate::ids::ThreadId>>,
    pub check_count: Vec<u32>,
}

impl State {
    pub fn new(cpus: usize) -> Self {
        State {
            now: Instant::ZERO,
            vps: Vec::new(),
            free_vps: Vec::new(),
            insts: Vec::new(),
            threads: Vec::new(),
            cpus: (0..cpus).map(|_| CpuSlot::default()).collect(),
            dirty_cpus: Vec::new(),
            work: Vec::new(),
            msgs: Vec::new(),
            hooks: Vec::new(),
            deferred: VecDeque::new(),
            notes: 0,
            violations: Vec::new(),
            faults: Vec::new(),
            trace: None,
            timers: Timers::default(),
            check_leaf: Vec::new(),
            check_count: Vec::new(),
        }
    }

    pub fn new_vp(&mut self, parent: Node, child: Node, params: Params) -> VpId {
        let slot = VpSlot {
            parent,
            child,
            state: VpState::Waiting,
            top_cpu: None,
            last_cpu: None,
            received: Duration::ZERO,
            granted_at: Instant::ZERO,
            stolen_at_grant: Duration::ZERO,
            parent_tag: u32::MAX,
            child_tag: u32::MAX,
            params,
            live: true,
            child_pos: u32::MAX,
        };
        match self.free_vps.pop() {
            Some(i) => {
                self.vps[i as usize] = slot;
                VpId(i)
            }
            None => {
                self.vps.push(slot);
                VpId(self.vps.len() as u32 - 1)
            }
        }
    }

    /// Adds `vp` to the children of instance `p`.
    pub fn add_child(&mut self, p: usize, vp: VpId) {
        let list = &mut self.insts[p].children;
        self.vps[vp.index()].child_pos = list.len() as u32;
        list.push(vp);
    }

    /// Removes `vp` from the children of instance `p`, moving the last child
    /// into its place.
    pub fn remove_child(&mut self, p: usize, vp: VpId) {
        let i = self.vps[vp.index()].child_pos as usize;
        let list = &mut self.insts[p].children;
        debug_assert_eq!(list.get(i), Some(&vp), "child index out of step");
        list.swap_remove(i);
        if let Some(&moved) = list.get(i) {
            self.vps[moved.index()].child_pos = i as u32;
        }
    }

    pub fn free_vp(&mut self, vp: VpId) {
        let s = &mut self.vps[vp.index()];
        s.live = false;
        s.params = Params::new();
        self.free_vps.push(vp.0);
    }

    /// Net CPU time received by `vp`, including the running segment.
    #[inline]
    pub fn vp_received(&self, vp: VpId) -> Duration {
        let s = &self.vps[vp.index()];
        match s.state {
            VpState::Running(cpu) => {
                s.received + s.segment(self.now, self.cpus[cpu.index()].stolen)
            }
            _ => s.received,
        }
    }

    /// Puts `vp` in `Running(cpu)` and opens its running segment, with one
    /// look-up of the VP table (the state change and the segment go
    /// together on every grant).
    #[inline]
    pub fn start_segment(&mut self, vp: VpId, cpu: CpuId) {
        let stolen = self.cpus[cpu.index()].stolen;
        let now = self.now;
        let s = &mut self.vps[vp.index()];
        s.state = VpState::Running(cpu);
        s.granted_at = now;
        s.stolen_at_grant = stolen;
        s.last_cpu = Some(cpu);
    }

    /// Counts `cpu` as held (or no longer held) by instance `i` through
    /// one of its parent VPs, if it keeps the count ([`InstSlot::held`]).
    #[inline(always)]
    pub fn count_held(&mut self, i: InstanceId, cpu: CpuId, on: bool) {
        if !self.insts[i.index()].held.is_empty() {
            self.count_held_wide(i, cpu, on);
        }
    }

    #[inline(never)]
    fn count_held_wide(&mut self, i: InstanceId, cpu: CpuId, on: bool) {
        let n = &mut self.insts[i.index()].held[cpu.index()];
        *n = if on { *n + 1 } else { *n - 1 };
    }

    /// Closes the running segment of `vp`, which runs on `cpu`, and puts
    /// it in `next` (`Ready` on a revocation, `Waiting` on a release), with
    /// one look-up of the VP table.
    #[inline]
    pub fn end_segment(&mut self, vp: VpId, cpu: CpuId, next: VpState) {
        let (now, stolen) = (self.now, self.cpus[cpu.index()].stolen);
        let s = &mut self.vps[vp.index()];
        s.received += s.segment(now, stolen);
        s.state = next;
    }

    /// Thread `t`'s VP now runs on `cpu`.
    #[inline]
    pub fn thread_started(&mut self, cpu: CpuId, t: ThreadId) {
        let c = &mut self.cpus[cpu.index()];
        c.leaves += 1;
        c.running = Some(t);
        c.mark_dirty(cpu, &mut self.dirty_cpus);
    }

    /// Thread `t`'s VP stopped running on `cpu`. Within one input a policy
    /// may grant a processor before revoking it from the thread that held
    /// it; the table then names whichever thread still runs there.
    #[inline]
    pub fn thread_stopped(&mut self, cpu: CpuId, t: ThreadId) {
        let c = &mut self.cpus[cpu.index()];
        c.leaves = c.leaves.saturating_sub(1);
        c.mark_dirty(cpu, &mut self.dirty_cpus);
        if c.running == Some(t) {
            if c.leaves == 0 {
                c.running = None;
            } else {
                self.other_thread_runs(cpu, t);
            }
        }
    }

    /// Rare: `t` stopped on `cpu` while another thread's VP still runs
    /// there (an overlap is being resolved); finds that thread.
    #[cold]
    #[inline(never)]
    fn other_thread_runs(&mut self, cpu: CpuId, t: ThreadId) {
        let vps = &self.vps;
        self.cpus[cpu.index()].running = self.threads.iter().enumerate().find_map(|(i, th)| {
            (th.live && i != t.index() && vps[th.vp.index()].state == VpState::Running(cpu))
                .then_some(ThreadId(i as u32))
        });
    }

    pub fn node_name(&self, n: Node) -> String {
        match n {
            Node::Top => "top".to_string(),
            Node::Instance(i) => format!("instance '{}'", self.insts[i.index()].name),
            Node::Thread(t) => format!("thread '{}'", self.threads[t.index()].name),
        }
    }
}
