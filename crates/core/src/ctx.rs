//! What a policy sees and can do while handling a notification: the
//! services of Regehr 2001, §4.3.2 (time, a timer, messages) and the actions of
//! the protocol (grant, revoke, request, release).

use crate::ids::{CpuId, InstanceId, Node, ThreadId, VpId};
use crate::params::Params;
use crate::policy::{Msg, RevokeReason};
use crate::state::{Action, State, Step, VpState};
use crate::time::{Duration, Instant};
use crate::trace::{PolicyEvent, TraceEvent, TraceKind};

/// The context of one policy hook. Reads are immediate; actions are queued
/// and applied in order by the HSI after the hook returns.
pub struct Ctx<'a> {
    pub(crate) st: &'a mut State,
    pub(crate) me: InstanceId,
    /// Where this hook's queued actions start in `st.work`.
    pub(crate) base: usize,
    /// During `revoke`: the parent VP and the processor it lost, which may
    /// differ from the VP's state by now if the notification waited.
    pub(crate) revoked: Option<(VpId, CpuId)>,
}

impl<'a> Ctx<'a> {
    /// The current time (`HLSGetCurrentTime`).
    #[inline]
    pub fn now(&self) -> Instant {
        self.st.now
    }

    /// This instance.
    #[inline]
    pub fn me(&self) -> InstanceId {
        self.me
    }

    /// This instance's name.
    pub fn name(&self) -> &str {
        &self.st.insts[self.me.index()].name
    }

    /// The VPs this instance registered with its parents, in registration
    /// order (for Join: parent order as declared).
    #[inline]
    pub fn parent_vps(&self) -> &[VpId] {
        &self.st.insts[self.me.index()].parents
    }

    /// The VPs children registered with this instance, in no particular
    /// order (a child's removal moves the last one into its place).
    #[inline]
    pub fn child_vps(&self) -> &[VpId] {
        &self.st.insts[self.me.index()].children
    }

    /// How many notifications for this instance are waiting to be delivered
    /// after the current hook (they arrived while its earlier actions were
    /// being applied). When it is zero, every VP this instance shares is in
    /// the state this instance's own applied actions and delivered
    /// notifications left it in (an action dropped as stale was never
    /// applied), so a policy may skip looking for VPs that changed behind
    /// its back.
    #[inline]
    pub fn notifications_waiting(&self) -> usize {
        self.st.hooks[self.me.index()].waiting() as usize
    }

    /// A VP's state.
    #[inline]
    pub fn vp_state(&self, vp: VpId) -> VpState {
        self.st.vps[vp.index()].state
    }

    /// The processor a VP runs on, if running.
    #[inline]
    pub fn vp_cpu(&self, vp: VpId) -> Option<CpuId> {
        match self.st.vps[vp.index()].state {
            VpState::Running(c) => Some(c),
            _ => None,
        }
    }

    /// The processor a VP ran on most recently (also after a revoke).
    ///
    /// Inside `revoke`, for the revoked parent VP, this is the processor the
    /// revocation took, even if the VP has run elsewhere since.
    #[inline]
    pub fn vp_last_cpu(&self, vp: VpId) -> Option<CpuId> {
        match self.revoked {
            Some((v, c)) if v == vp => Some(c),
            _ => self.st.vps[vp.index()].last_cpu,
        }
    }

    /// The parent-side parameters the VP was registered with (or last set
    /// with [`Ctx::set_vp_params`]).
    #[inline]
    pub fn vp_params(&self, vp: VpId) -> &Params {
        &self.st.vps[vp.index()].params
    }

    /// Records new parent-side parameters for a child VP (after accepting a
    /// `Msg::SetParams`), so that moves and displays see them.
    pub fn set_vp_params(&mut self, vp: VpId, params: Params) {
        self.st.vps[vp.index()].params = params;
    }

    /// CPU time the VP has received, net of stolen time, including the
    /// segment it is running now (Regehr 2001, ch. 11 needs the net figure).
    #[inline]
    pub fn vp_received(&self, vp: VpId) -> Duration {
        self.st.vp_received(vp)
    }

    /// The other side of a VP.
    #[inline]
    pub fn vp_child(&self, vp: VpId) -> Node {
        self.st.vps[vp.index()].child
    }

    /// The thread behind a child VP, when the child is a thread.
    #[inline]
    pub fn vp_thread(&self, vp: VpId) -> Option<ThreadId> {
        match self.st.vps[vp.index()].child {
            Node::Thread(t) => Some(t),
            _ => None,
        }
    }

    /// When a thread last woke up (DESIGN.md §5: BEST infers periods from it).
    #[inline]
    pub fn thread_last_wake(&self, t: ThreadId) -> Option<Instant> {
        self.st.threads[t.index()].last_wake
    }

    /// When a thread last blocked.
    #[inline]
    pub fn thread_last_block(&self, t: ThreadId) -> Option<Instant> {
        self.st.threads[t.index()].last_block
    }

    /// Total stolen time reported on a processor so far.
    #[inline]
    pub fn cpu_stolen(&self, cpu: CpuId) -> Duration {
        self.st.cpus[cpu.index()].stolen
    }

    /// Number of physical processors of the machine.
    #[inline]
    pub fn cpu_count(&self) -> usize {
        self.st.cpus.len()
    }

    /// The tag this instance stored on a child VP (`u32::MAX` when unset).
    #[inline]
    pub fn child_tag(&self, vp: VpId) -> u32 {
        self.st.vps[vp.index()].parent_tag
    }

    /// Stores a tag on a child VP, typically an index into the policy's own
    /// table, so lookups need no map.
    #[inline]
    pub fn set_child_tag(&mut self, vp: VpId, tag: u32) {
        self.st.vps[vp.index()].parent_tag = tag;
    }

    /// The tag this instance stored on one of its parent VPs.
    #[inline]
    pub fn parent_tag(&self, vp: VpId) -> u32 {
        self.st.vps[vp.index()].child_tag
    }

    /// Stores a tag on a parent VP.
    #[inline]
    pub fn set_parent_tag(&mut self, vp: VpId, tag: u32) {
        self.st.vps[vp.index()].child_tag = tag;
    }

    /// Grants `cpu`, which this instance holds, to ready child `vp`.
    #[inline]
    pub fn grant(&mut self, vp: VpId, cpu: CpuId) {
        self.push(Action::Grant { vp, cpu });
    }

    /// Takes the processor back from running child `vp`.
    #[inline]
    pub fn revoke(&mut self, vp: VpId, reason: RevokeReason) {
        self.push(Action::Revoke { vp, reason });
    }

    /// Asks the parent of waiting parent VP `vp` for a processor.
    #[inline]
    pub fn request(&mut self, vp: VpId) {
        self.push(Action::Request { vp });
    }

    /// Gives back parent VP `vp`'s processor or cancels its request.
    #[inline]
    pub fn release(&mut self, vp: VpId) {
        self.push(Action::Release { vp });
    }

    /// Queues action `a` of this hook; the HSI applies it after the hook.
    #[inline(always)]
    fn push(&mut self, a: Action) {
        self.st.work.push(Step {
            actor: self.me,
            action: Some(a),
            last: false,
        });
    }

    /// Whether this hook has already queued `action` on `vp`.
    fn queued(&self, vp: VpId, release: bool) -> bool {
        self.st.work[self.base..].iter().any(|s| match *s {
            Step {
                action: Some(Action::Release { vp: v }),
                ..
            } => release && v == vp,
            Step {
                action: Some(Action::Request { vp: v }),
                ..
            } => !release && v == vp,
            _ => false,
        })
    }

    /// Requests or releases parent VPs so that `want` of them (at most all)
    /// are asking for or holding a processor. Waiting VPs are requested in
    /// order; surplus *ready* VPs are released from the back. Running VPs
    /// are never released here: a policy releases those itself when it has
    /// nothing to run on that processor. Actions this hook already queued
    /// are taken into account.
    #[inline]
    pub fn set_parent_demand(&mut self, want: usize) {
        // One parent VP, the usual case: only a waiting VP can be requested
        // and only a ready one released, so its state alone often shows
        // there is nothing to do, without a look at the queued actions.
        if let [vp] = *self.parent_vps() {
            let act = match self.vp_state(vp) {
                VpState::Waiting => want > 0,
                VpState::Ready => want == 0,
                VpState::Running(_) => false,
            };
            if !act {
                return;
            }
        }
        self.match_parent_demand(want);
    }

    /// How many parent VPs will be asking for or holding a processor once
    /// this hook's actions are applied: those not waiting now (counted by
    /// the HSI), plus the waiting ones this hook requested, less those this
    /// hook released, each VP counted once. Only the hook's own actions are
    /// looked at, not every parent VP.
    fn parent_demand(&self) -> usize {
        let me = Node::Instance(self.me);
        let work = &self.st.work[self.base..];
        let mut active = self.st.insts[self.me.index()].asking as usize;
        for (k, s) in work.iter().enumerate() {
            let (vp, release) = match s.action {
                Some(Action::Request { vp }) => (vp, false),
                Some(Action::Release { vp }) => (vp, true),
                _ => continue,
            };
            let slot = &self.st.vps[vp.index()];
            // Only this instance's parent VPs count, and a VP once.
            let seen = work[..k].iter().any(|e| match e.action {
                Some(Action::Request { vp: v }) => !release && v == vp,
                Some(Action::Release { vp: v }) => release && v == vp,
                _ => false,
            });
            if slot.child != me || !slot.live || seen {
                continue;
            }
            match (slot.state, release) {
                (VpState::Waiting, false) => active += 1,
                (VpState::Waiting, true) | (_, false) => {}
                (_, true) => active -= 1,
            }
        }
        active
    }

    /// [`Ctx::set_parent_demand`] past its shortcut.
    #[inline(never)]
    fn match_parent_demand(&mut self, want: usize) {
        let n = self.parent_vps().len();
        let active = self.parent_demand();
        #[cfg(debug_assertions)]
        {
            let mut slow = 0;
            for k in 0..n {
                let vp = self.parent_vps()[k];
                slow += match self.vp_state(vp) {
                    VpState::Waiting => self.queued(vp, false) as usize,
                    _ => !self.queued(vp, true) as usize,
                };
            }
            assert_eq!(active, slow, "parent demand count");
        }
        let mut active = active;
        if active == want.min(n) {
            return;
        }
        let mut k = 0;
        while active < want && k < n {
            let vp = self.parent_vps()[k];
            if self.vp_state(vp) == VpState::Waiting && !self.queued(vp, false) {
                self.request(vp);
                active += 1;
            }
            k += 1;
        }
        let mut k = n;
        while active > want && k > 0 {
            k -= 1;
            let vp = self.parent_vps()[k];
            if self.vp_state(vp) == VpState::Ready && !self.queued(vp, true) {
                self.release(vp);
                active -= 1;
            }
        }
    }

    /// Sends a message to the parent of parent VP `vp`. A refusal is
    /// reported by the HSI as a trace note; the sender is not told.
    pub fn send_msg(&mut self, vp: VpId, msg: Msg) {
        let i = self.st.msgs.len() as u32;
        self.st.msgs.push(Some(msg));
        self.push(Action::Msg { vp, msg: i });
    }

    /// Arms this instance's single timer (`HLSSetTimer`), replacing any
    /// earlier setting. A time in the past fires at the next timer input.
    #[inline]
    pub fn set_timer(&mut self, at: Instant) {
        if at == Instant::NEVER {
            self.st.timers.cancel(self.me);
        } else {
            self.st.timers.set(self.me, at);
        }
    }

    /// Disarms this instance's timer.
    #[inline]
    pub fn cancel_timer(&mut self) {
        self.st.timers.cancel(self.me);
    }

    /// When this instance's timer fires next, if armed.
    #[inline]
    pub fn timer(&self) -> Option<Instant> {
        self.st.timers.get(self.me)
    }

    /// Whether events are being traced (so policies can skip building them).
    #[inline]
    pub fn tracing(&self) -> bool {
        self.st.trace.is_some()
    }

    /// Reports that this policy failed (a sandboxed plug-in trapped or ran
    /// out of its work bound): the actions this hook queued are dropped,
    /// and the fault waits for the HSI's caller ([`crate::Hsi::take_faults`]),
    /// which unloads the instance ([`crate::Hsi::unload`]). The policy
    /// must do nothing more in this hook and stay inert in later ones.
    #[cold]
    pub fn fault(&mut self, what: impl Into<String>) {
        self.st.work.truncate(self.base);
        let name = self.name().to_string();
        self.st.faults.push(crate::fault::Fault {
            instance: self.me,
            name,
            at: self.st.now,
            what: what.into(),
        });
    }

    /// Records a policy event in the trace, when tracing is on.
    pub fn event(&mut self, event: PolicyEvent) {
        let (at, me) = (self.st.now, self.me);
        if let Some(t) = self.st.trace.as_mut() {
            t.push(TraceEvent {
                at,
                kind: TraceKind::Policy {
                    instance: me,
                    event,
                },
            });
        }
    }
}
