//! The hierarchical scheduler infrastructure: owns instances, VPs and
//! threads, turns inputs into notifications, applies policy actions and
//! checks the protocol.
//!
//! # Call contract (sans-IO)
//! Every input takes `now`; time never goes backwards (an earlier `now` is
//! treated as the latest one seen). After each input the backend
//! - reads the dispatch changes with [`Hsi::drain_dispatch`] (or asks
//!   [`Hsi::running`] per CPU) and makes each CPU run that thread or idle;
//! - calls [`Hsi::fire_timers`] no later than [`Hsi::next_timer`]; calling it
//!   early is harmless (nothing fires), calling it late delays decisions.
//!
//! Actions a policy asks for are applied depth first: each action's
//! notification is delivered, and the receiver's own actions applied, before
//! the next action of the same hook: the order nested calls had in the
//! dissertation's kernel implementation (§4.3.1), with one difference that
//! makes policies simpler to write: a policy's hooks never nest. A
//! notification for an instance whose hook is still having its actions
//! applied (a child that releases at once the processor it was just
//! granted, the top scheduler granting at once what was just requested)
//! waits until those actions are all applied, then is delivered in arrival
//! order. (The HSI keeps this order with its own stack of actions still to
//! apply, not by recursion, so a switch through a deep hierarchy does not
//! deepen the call stack.)
//!
//! An action can go stale while it waits to be applied: planned as "revoke
//! A, grant B on cpu c", its first half may make the parent take c back. An
//! invalid action of an instance that has notifications waiting is
//! therefore dropped (with a trace note) rather than reported: the waiting
//! notification tells the policy what changed. An invalid action of an
//! instance with nothing waiting is a protocol violation.

use crate::ctx::Ctx;
use crate::ids::{CpuId, InstanceId, Node, ThreadId, VpId};
use crate::params::Params;
use crate::policy::{Msg, Policy, PolicyError, RevokeReason};
use crate::state::{
    Action, HookState, InstSlot, Note, State, Step, ThreadSlot, VpState, WIDE_PARENTS,
};
use crate::time::{Duration, Instant};
use crate::trace::{PolicyEvent, TraceEvent, TraceKind};
use crate::violation::{HsiError, OpError, Rule, Violation};
use std::collections::BTreeMap;

mod replace;
mod unload;

/// Where a new instance attaches.
#[derive(Clone, Debug, PartialEq)]
pub enum ParentRef {
    /// Directly under the top scheduler on these processors: the instance is
    /// a root. Several roots on disjoint processor sets are separate
    /// hierarchies (Regehr 2001, §4.3.7.3 space sharing).
    Top {
        /// The processors; each belongs to at most one root.
        cpus: Vec<CpuId>,
    },
    /// Under another instance.
    Instance(InstanceId),
}

/// One parent of a new instance, with the parent-side parameters.
#[derive(Clone, Debug, PartialEq)]
pub struct ParentLink {
    /// The parent.
    pub parent: ParentRef,
    /// Parent-side parameters (priority, share, amount/period, ...).
    pub params: Params,
}

/// A read-only view of one VP, for displays and tests.
#[derive(Clone, Debug, PartialEq)]
pub struct VpInfo {
    /// The parent side.
    pub parent: Node,
    /// The child side.
    pub child: Node,
    /// The state.
    pub state: VpState,
    /// Net CPU time received so far.
    pub received: Duration,
    /// Parent-side parameters.
    pub params: Params,
}

/// Safety valve: timer callbacks in one `fire_timers` call.
const MAX_TIMER_FIRINGS: usize = 1_000_000;

/// Safety valve: notifications delivered for one input.
const MAX_NOTIFICATIONS: u64 = 10_000_000;

/// The hierarchical scheduler infrastructure.
pub struct Hsi {
    policies: Vec<Option<Box<dyn Policy>>>,
    st: State,
    names: BTreeMap<String, InstanceId>,
    default: Option<InstanceId>,
    checking: bool,
    /// Failed instances that could not be unloaded: they stay, inert, and
    /// their later faults (consequences) are not reported again.
    stuck: Vec<InstanceId>,
}

impl std::fmt::Debug for Hsi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hsi")
            .field("cpus", &self.st.cpus.len())
            .field("instances", &self.names.len())
            .field("now", &self.st.now)
            .finish()
    }
}

impl Hsi {
    /// A machine with `cpus` processors and no instances. The protocol
    /// checker is on in debug builds and off in release builds; see
    /// [`Hsi::set_checking`].
    pub fn new(cpus: usize) -> Self {
        Hsi {
            policies: Vec::new(),
            st: State::new(cpus),
            names: BTreeMap::new(),
            default: None,
            checking: cfg!(debug_assertions),
            stuck: Vec::new(),
        }
    }

    /// Turns the full protocol check after every input on or off. The
    /// per-action transition checks are always on.
    pub fn set_checking(&mut self, on: bool) {
        self.checking = on;
    }

    /// Whether the full protocol check runs after every input.
    pub fn checking(&self) -> bool {
        self.checking
    }

    /// Turns event recording on or off; see [`Hsi::drain_trace`].
    pub fn set_tracing(&mut self, on: bool) {
        self.st.trace = if on {
            Some(self.st.trace.take().unwrap_or_default())
        } else {
            None
        };
    }

    /// The latest time seen.
    pub fn now(&self) -> Instant {
        self.st.now
    }

    /// Number of processors.
    pub fn cpu_count(&self) -> usize {
        self.st.cpus.len()
    }

    fn advance(&mut self, now: Instant) {
        if now > self.st.now {
            self.st.now = now;
        }
    }

    // ----- inputs: instances -------------------------------------------------

    /// Creates an instance named `name` running `policy` under `parents`
    /// (several parents make a Join point; the hierarchy is a DAG). The
    /// instance registers `policy.parent_vps(n)` VPs with each parent that
    /// can offer `n` processors, then receives `init`.
    ///
    /// # Errors
    /// Name taken, no parent, unknown parent, processors unavailable, or a
    /// parent refused the registration; nothing changed then.
    pub fn create_instance(
        &mut self,
        now: Instant,
        name: &str,
        policy: Box<dyn Policy>,
        parents: Vec<ParentLink>,
    ) -> Result<InstanceId, HsiError> {
        self.advance(now);
        if self.names.contains_key(name) {
            return Err(OpError::NameTaken(name.to_string()).into());
        }
        if parents.is_empty() {
            return Err(OpError::NoParent(name.to_string()).into());
        }
        let mut seen_cpus = Vec::new();
        for link in &parents {
            match &link.parent {
                ParentRef::Instance(p) => self.live_instance(*p)?,
                ParentRef::Top { cpus } => {
                    for &c in cpus {
                        if c.index() >= self.st.cpus.len()
                            || self.st.cpus[c.index()].top_vp.is_some()
                            || seen_cpus.contains(&c)
                        {
                            return Err(OpError::CpuUnavailable(c).into());
                        }
                        seen_cpus.push(c);
                    }
                }
            }
        }
        let me = InstanceId(self.st.insts.len() as u32);
        self.st.insts.push(InstSlot {
            name: name.to_string(),
            parents: Vec::new(),
            children: Vec::new(),
            live: true,
            asking: 0,
            held: Vec::new(),
        });
        self.policies.push(Some(policy));
        self.st.hooks.push(HookState::default());
        let child = Node::Instance(me);
        let mut registered: Vec<VpId> = Vec::new();
        for link in parents {
            let available = match &link.parent {
                ParentRef::Top { cpus } => cpus.len(),
                ParentRef::Instance(p) => {
                    let n = self.st.insts[p.index()].parents.len();
                    self.policy(*p).cpus_offered(n)
                }
            };
            let count = self.policy(me).parent_vps(available).min(available);
            for k in 0..count {
                match &link.parent {
                    ParentRef::Top { cpus } => {
                        let vp = self.st.new_vp(Node::Top, child, link.params.clone());
                        self.st.vps[vp.index()].top_cpu = Some(cpus[k]);
                        self.st.cpus[cpus[k].index()].top_vp = Some(vp);
                        registered.push(vp);
                    }
                    ParentRef::Instance(p) => {
                        let vp = self
                            .st
                            .new_vp(Node::Instance(*p), child, link.params.clone());
                        match self.register_with(*p, vp) {
                            Ok(()) => registered.push(vp),
                            Err(error) => {
                                self.st.free_vp(vp);
                                for vp in registered.into_iter().rev() {
                                    self.unregister(vp);
                                }
                                self.st.insts.pop();
                                self.policies.pop();
                                self.st.hooks.pop();
                                let instance = self.st.insts[p.index()].name.clone();
                                self.st.work.clear();
                                return Err(OpError::Refused { instance, error }.into());
                            }
                        }
                    }
                }
            }
        }
        if registered.len() > WIDE_PARENTS {
            // No parent VP runs yet: the instance has not asked for one.
            self.st.insts[me.index()].held = vec![0; self.st.cpus.len()];
        }
        self.st.insts[me.index()].parents = registered;
        self.names.insert(name.to_string(), me);
        self.deliver(me, |p, ctx| p.init(ctx));
        self.finish()?;
        Ok(me)
    }

    /// Destroys an instance that has no children: it gives up its
    /// processors, unregisters from its parents and receives `deinit`.
    ///
    /// # Errors
    /// Unknown instance, or it still has children.
    pub fn destroy_instance(&mut self, now: Instant, id: InstanceId) -> Result<(), HsiError> {
        self.advance(now);
        self.live_instance(id)?;
        let slot = &self.st.insts[id.index()];
        if !slot.children.is_empty() {
            return Err(OpError::InstanceNotEmpty {
                name: slot.name.clone(),
                children: slot.children.len(),
            }
            .into());
        }
        for vp in slot.parents.clone() {
            if self.st.vps[vp.index()].state != VpState::Waiting {
                self.apply(Node::Instance(id), Action::Release { vp });
            }
            self.unregister(vp);
        }
        self.deliver(id, |p, ctx| p.deinit(ctx));
        let slot = &mut self.st.insts[id.index()];
        slot.live = false;
        slot.parents.clear();
        self.st.timers.cancel(id);
        let slot = &mut self.st.insts[id.index()];
        let name = std::mem::take(&mut slot.name);
        self.names.remove(&name);
        self.policies[id.index()] = None;
        if self.default == Some(id) {
            self.default = None;
        }
        self.finish()
    }

    /// Sends `msg` to the parent(s) of an instance about the VPs the
    /// instance registered there, e.g. to change the reservation of a
    /// time-sharing instance that sits under Rez.
    ///
    /// # Errors
    /// Unknown instance, or a parent refused.
    pub fn instance_msg(
        &mut self,
        now: Instant,
        id: InstanceId,
        msg: &Msg,
    ) -> Result<(), HsiError> {
        self.advance(now);
        self.live_instance(id)?;
        for vp in self.st.insts[id.index()].parents.clone() {
            if let Node::Instance(p) = self.st.vps[vp.index()].parent {
                self.deliver(p, |pol, ctx| pol.msg(ctx, vp, msg))
                    .map_err(|error| OpError::Refused {
                        instance: self.st.insts[p.index()].name.clone(),
                        error,
                    })?;
            }
        }
        self.finish()
    }

    /// Makes `id` the default scheduler for new threads; with
    /// `move_threads`, moves every thread of the old default there too,
    /// keeping each thread's parameters (§4.3.9).
    ///
    /// # Errors
    /// Unknown instance, or the new default refused a thread (the others
    /// are still moved; the first refusal is returned).
    pub fn set_default(
        &mut self,
        now: Instant,
        id: InstanceId,
        move_threads: bool,
    ) -> Result<(), HsiError> {
        self.advance(now);
        self.live_instance(id)?;
        let old = self.default.replace(id);
        let mut first_err = None;
        if let (true, Some(old)) = (move_threads, old) {
            if old != id {
                let movers: Vec<ThreadId> = self.threads_of(old).collect();
                for t in movers {
                    let params = self.carried_params(t);
                    if let Err(e) = self.move_thread(now, t, id, params) {
                        first_err.get_or_insert(e);
                    }
                }
            }
        }
        first_err.map_or(Ok(()), Err)
    }

    /// The default scheduler, if one was set.
    pub fn default_instance(&self) -> Option<InstanceId> {
        self.default
    }

    // ----- inputs: threads --------------------------------------------------

    /// A new thread under `parent`, blocked until its first [`Hsi::wake`].
    ///
    /// # Errors
    /// Unknown parent, or the parent refused the parameters.
    pub fn create_thread(
        &mut self,
        now: Instant,
        name: &str,
        parent: InstanceId,
        params: Params,
    ) -> Result<ThreadId, HsiError> {
        self.advance(now);
        self.live_instance(parent)?;
        let t = ThreadId(self.st.threads.len() as u32);
        let vp = self
            .st
            .new_vp(Node::Instance(parent), Node::Thread(t), params);
        self.st.threads.push(ThreadSlot {
            name: name.to_string(),
            vp,
            parent,
            runnable: false,
            last_wake: None,
            last_block: None,
            past_received: Duration::ZERO,
            before_reservation: None,
            last_revoke: None,
            live: true,
        });
        if let Err(error) = self.register_with(parent, vp) {
            self.st.free_vp(vp);
            self.st.threads.pop();
            self.st.work.clear();
            return Err(OpError::Refused {
                instance: self.st.insts[parent.index()].name.clone(),
                error,
            }
            .into());
        }
        self.finish()?;
        Ok(t)
    }

    /// Thread `t` became runnable. Waking a runnable thread does nothing.
    ///
    /// # Errors
    /// Unknown thread, or a protocol violation.
    pub fn wake(&mut self, now: Instant, t: ThreadId) -> Result<(), HsiError> {
        self.advance(now);
        self.live_thread(t)?;
        let th = &mut self.st.threads[t.index()];
        if !th.runnable {
            th.runnable = true;
            th.last_wake = Some(now);
            let vp = th.vp;
            self.apply(Node::Thread(t), Action::Request { vp });
        }
        self.finish()
    }

    /// Thread `t` blocked. Blocking a blocked thread does nothing.
    ///
    /// # Errors
    /// Unknown thread, or a protocol violation.
    pub fn block(&mut self, now: Instant, t: ThreadId) -> Result<(), HsiError> {
        self.advance(now);
        self.live_thread(t)?;
        self.block_inner(now, t);
        self.finish()
    }

    /// Inlined: [`Hsi::block`], one of the two most frequent inputs, is
    /// little more than this.
    #[inline(always)]
    fn block_inner(&mut self, now: Instant, t: ThreadId) {
        let th = &mut self.st.threads[t.index()];
        if th.runnable {
            th.runnable = false;
            th.last_block = Some(now);
            let vp = th.vp;
            self.apply(Node::Thread(t), Action::Release { vp });
        }
    }

    /// Thread `t` exited: it leaves the hierarchy.
    ///
    /// # Errors
    /// Unknown thread, or a protocol violation.
    pub fn exit(&mut self, now: Instant, t: ThreadId) -> Result<(), HsiError> {
        self.advance(now);
        self.live_thread(t)?;
        self.block_inner(now, t);
        let vp = self.st.threads[t.index()].vp;
        self.st.threads[t.index()].past_received += self.st.vps[vp.index()].received;
        self.unregister(vp);
        self.st.threads[t.index()].live = false;
        self.finish()
    }

    /// Moves thread `t` under `to` with parent-side `params`.
    ///
    /// The new VP is registered first, so a refusal (bad parameters,
    /// admission control) leaves the thread where it was; then the old VP is
    /// released and unregistered and the new one requested if the thread is
    /// runnable (the sequence of Regehr 2001, §10.2, made atomic).
    ///
    /// # Errors
    /// Unknown thread or instance, or `to` refused.
    pub fn move_thread(
        &mut self,
        now: Instant,
        t: ThreadId,
        to: InstanceId,
        params: Params,
    ) -> Result<(), HsiError> {
        self.advance(now);
        self.live_thread(t)?;
        self.live_instance(to)?;
        let new_vp = self.st.new_vp(Node::Instance(to), Node::Thread(t), params);
        if let Err(error) = self.register_with(to, new_vp) {
            self.st.free_vp(new_vp);
            self.st.work.clear();
            return Err(OpError::Refused {
                instance: self.st.insts[to.index()].name.clone(),
                error,
            }
            .into());
        }
        let old_vp = self.st.threads[t.index()].vp;
        let runnable = self.st.threads[t.index()].runnable;
        if runnable && self.st.vps[old_vp.index()].state != VpState::Waiting {
            self.apply(Node::Thread(t), Action::Release { vp: old_vp });
        }
        self.st.threads[t.index()].past_received += self.st.vps[old_vp.index()].received;
        self.unregister(old_vp);
        let th = &mut self.st.threads[t.index()];
        th.vp = new_vp;
        th.parent = to;
        if runnable {
            self.apply(Node::Thread(t), Action::Request { vp: new_vp });
        }
        self.finish()
    }

    /// Begins a CPU reservation for `t`: moves it under the reservation
    /// scheduler `rez` with `params` (e.g. amount and period). The thread's
    /// previous place is remembered for [`Hsi::end_reservation`].
    ///
    /// # Errors
    /// As [`Hsi::move_thread`]; admission refusal leaves the thread in place.
    pub fn begin_reservation(
        &mut self,
        now: Instant,
        t: ThreadId,
        rez: InstanceId,
        params: Params,
    ) -> Result<(), HsiError> {
        self.live_thread(t)?;
        let th = &self.st.threads[t.index()];
        let before = match &th.before_reservation {
            Some(b) => b.clone(),
            None => (th.parent, self.carried_params(t)),
        };
        self.move_thread(now, t, rez, params)?;
        self.st.threads[t.index()].before_reservation = Some(before);
        Ok(())
    }

    /// Ends the reservation begun with [`Hsi::begin_reservation`]: the
    /// thread goes back where it was, or to the default scheduler if that
    /// instance is gone.
    ///
    /// # Errors
    /// Unknown thread, no reservation, or no place to go back to.
    pub fn end_reservation(&mut self, now: Instant, t: ThreadId) -> Result<(), HsiError> {
        self.live_thread(t)?;
        let Some((back, params)) = self.st.threads[t.index()].before_reservation.clone() else {
            return Err(OpError::NotInReservation(t).into());
        };
        let to = if self.st.insts[back.index()].live {
            back
        } else {
            self.default.ok_or(OpError::DeadInstance(back))?
        };
        self.move_thread(now, t, to, params)?;
        self.st.threads[t.index()].before_reservation = None;
        Ok(())
    }

    /// Sends `msg` about thread `t`'s VP to its scheduler: change its
    /// reservation, its share and warp, its priority (`Msg::SetParams`), or
    /// an application message.
    ///
    /// # Errors
    /// Unknown thread, or the scheduler refused.
    pub fn thread_msg(&mut self, now: Instant, t: ThreadId, msg: &Msg) -> Result<(), HsiError> {
        self.advance(now);
        self.live_thread(t)?;
        let th = &self.st.threads[t.index()];
        let (parent, vp) = (th.parent, th.vp);
        self.deliver(parent, |p, ctx| p.msg(ctx, vp, msg))
            .map_err(|error| OpError::Refused {
                instance: self.st.insts[parent.index()].name.clone(),
                error,
            })?;
        self.finish()
    }

    // ----- inputs: time -----------------------------------------------------

    /// Fires every timer due at or before `now`, in (deadline, instance id)
    /// order.
    ///
    /// # Errors
    /// A protocol violation.
    pub fn fire_timers(&mut self, now: Instant) -> Result<(), HsiError> {
        self.advance(now);
        let mut fired = 0usize;
        while let Some((at, inst)) = self.st.timers.first() {
            if at > self.st.now {
                break;
            }
            // Disarmed while its callback runs (which usually re-arms it);
            // `settle` makes `first` exact again afterwards.
            self.st.timers.disarm_first();
            fired += 1;
            if fired > MAX_TIMER_FIRINGS {
                self.st.timers.settle();
                self.violate(
                    Rule::TimerStorm,
                    Node::Instance(inst),
                    None,
                    format!("more than {MAX_TIMER_FIRINGS} timer callbacks at {at}"),
                );
                break;
            }
            if let Some(tr) = self.st.trace.as_mut() {
                tr.push(TraceEvent {
                    at: self.st.now,
                    kind: TraceKind::Timer { instance: inst },
                });
            }
            self.deliver(inst, |p, ctx| p.timer(ctx));
            self.st.timers.settle();
        }
        self.finish()
    }

    /// The earliest armed timer, if any: call [`Hsi::fire_timers`] then.
    pub fn next_timer(&self) -> Option<Instant> {
        self.st.timers.first().map(|(at, _)| at)
    }

    /// Reports `d` of time stolen on `cpu` (interrupts, deferred work, the
    /// hypervisor) just before `now`. It is charged to whatever VPs run
    /// there, so report it before the dispatch on that CPU changes.
    pub fn add_stolen(&mut self, now: Instant, cpu: CpuId, d: Duration) {
        self.advance(now);
        if let Some(c) = self.st.cpus.get_mut(cpu.index()) {
            c.stolen += d;
        }
    }

    // ----- outputs ----------------------------------------------------------

    /// The thread the hierarchy runs on `cpu`, or `None` for idle.
    pub fn running(&self, cpu: CpuId) -> Option<ThreadId> {
        self.st.cpus.get(cpu.index()).and_then(|c| c.running)
    }

    /// Appends each processor whose thread changed since the last call,
    /// with its new thread (`None`: idle).
    #[inline]
    pub fn drain_dispatch(&mut self, out: &mut Vec<(CpuId, Option<ThreadId>)>) {
        // An input that changes no processor returns at once.
        if !self.st.dirty_cpus.is_empty() {
            self.drain_dirty(out);
        }
    }

    /// The changed processors (one or two), read in place, then the list
    /// is cleared. Inlined into the backend's loop: about two inputs in
    /// three change a processor, and the call itself was a fair part of
    /// the cost.
    #[inline(always)]
    fn drain_dirty(&mut self, out: &mut Vec<(CpuId, Option<ThreadId>)>) {
        let st = &mut self.st;
        for &cpu in &st.dirty_cpus {
            let c = &mut st.cpus[cpu.index()];
            c.dirty = false;
            if c.running != c.reported {
                c.reported = c.running;
                out.push((cpu, c.running));
            }
        }
        st.dirty_cpus.clear();
    }

    /// Appends and clears the recorded events (tracing must be on).
    pub fn drain_trace(&mut self, out: &mut Vec<TraceEvent>) {
        if let Some(t) = self.st.trace.as_mut() {
            out.append(t);
        }
    }

    // ----- introspection ----------------------------------------------------

    /// The instance named `name`.
    pub fn instance(&self, name: &str) -> Option<InstanceId> {
        self.names.get(name).copied()
    }

    /// Live instances in creation order.
    pub fn instances(&self) -> impl Iterator<Item = InstanceId> + '_ {
        self.st
            .insts
            .iter()
            .enumerate()
            .filter(|(_, s)| s.live)
            .map(|(i, _)| InstanceId(i as u32))
    }

    /// An instance's name (empty once destroyed).
    pub fn instance_name(&self, id: InstanceId) -> &str {
        &self.st.insts[id.index()].name
    }

    /// An instance's policy, if live.
    pub fn instance_policy(&self, id: InstanceId) -> Option<&dyn Policy> {
        self.policies.get(id.index()).and_then(|p| p.as_deref())
    }

    /// The VPs an instance registered with its parents.
    pub fn instance_parents(&self, id: InstanceId) -> &[VpId] {
        &self.st.insts[id.index()].parents
    }

    /// The VPs registered with an instance, in no particular order.
    pub fn instance_children(&self, id: InstanceId) -> &[VpId] {
        &self.st.insts[id.index()].children
    }

    /// CPU time an instance has received from its parents, net of stolen time.
    pub fn instance_supply(&self, id: InstanceId) -> Duration {
        self.st.insts[id.index()]
            .parents
            .iter()
            .fold(Duration::ZERO, |a, &vp| a + self.st.vp_received(vp))
    }

    /// A VP's state (cheaper than [`Hsi::vp_info`], which copies the
    /// parameters).
    pub fn vp_state(&self, vp: VpId) -> VpState {
        self.st.vps[vp.index()].state
    }

    /// A VP's parent side.
    pub fn vp_parent(&self, vp: VpId) -> Node {
        self.st.vps[vp.index()].parent
    }

    /// A VP's parent-side parameters, borrowed (policies also write their
    /// outputs there, e.g. `coop`'s OUT).
    pub fn vp_params(&self, vp: VpId) -> &Params {
        &self.st.vps[vp.index()].params
    }

    /// A VP's sides, state, received time and parameters.
    pub fn vp_info(&self, vp: VpId) -> VpInfo {
        let s = &self.st.vps[vp.index()];
        VpInfo {
            parent: s.parent,
            child: s.child,
            state: s.state,
            received: self.st.vp_received(vp),
            params: s.params.clone(),
        }
    }

    /// The deadline the parent of `vp` holds for it now, if its policy
    /// schedules by deadlines ([`Policy::child_deadline`]); `None` for a VP
    /// under the top scheduler or an unregistered one.
    pub fn vp_deadline(&mut self, vp: VpId) -> Option<Instant> {
        let slot = self.st.vps.get(vp.index()).filter(|s| s.live)?;
        let Node::Instance(p) = slot.parent else {
            return None;
        };
        let policy = self.policies.get(p.index())?.as_deref()?;
        let base = self.st.work.len();
        let ctx = Ctx {
            st: &mut self.st,
            me: p,
            base,
            revoked: None,
        };
        policy.child_deadline(&ctx, vp)
    }

    /// Threads in creation order (including exited ones).
    pub fn thread_count(&self) -> usize {
        self.st.threads.len()
    }

    /// A thread's name.
    pub fn thread_name(&self, t: ThreadId) -> &str {
        &self.st.threads[t.index()].name
    }

    /// Whether a thread is live (created and not exited).
    pub fn thread_live(&self, t: ThreadId) -> bool {
        self.st.threads.get(t.index()).is_some_and(|s| s.live)
    }

    /// A thread's scheduler.
    pub fn thread_parent(&self, t: ThreadId) -> InstanceId {
        self.st.threads[t.index()].parent
    }

    /// A thread's VP.
    pub fn thread_vp(&self, t: ThreadId) -> VpId {
        self.st.threads[t.index()].vp
    }

    /// Whether a thread is runnable.
    pub fn thread_runnable(&self, t: ThreadId) -> bool {
        self.st.threads[t.index()].runnable
    }

    /// Why the thread last lost its processor to a revocation (`None`
    /// if it never did): a backend that enforces late can tell a thread
    /// whose own budget ended from one preempted by a more urgent one.
    pub fn thread_last_revoke(&self, t: ThreadId) -> Option<RevokeReason> {
        self.st.threads[t.index()].last_revoke
    }

    /// CPU time a thread has received, net of stolen time, across moves.
    pub fn thread_received(&self, t: ThreadId) -> Duration {
        let th = &self.st.threads[t.index()];
        if th.live {
            th.past_received + self.st.vp_received(th.vp)
        } else {
            th.past_received
        }
    }

    /// Live threads under `inst`, in creation order.
    pub fn threads_of(&self, inst: InstanceId) -> impl Iterator<Item = ThreadId> + '_ {
        self.st
            .threads
            .iter()
            .enumerate()
            .filter(move |(_, s)| s.live && s.parent == inst)
            .map(|(i, _)| ThreadId(i as u32))
    }

    // ----- internals --------------------------------------------------------

    /// The parameters thread `t` takes along when it leaves its scheduler
    /// without new ones: its own, without those the scheduler wrote.
    fn carried_params(&self, t: ThreadId) -> Params {
        let th = &self.st.threads[t.index()];
        let params = &self.st.vps[th.vp.index()].params;
        let written = self.policy(th.parent).written_keys();
        if !params.iter().any(|(k, _)| written.contains(&k)) {
            return params.clone();
        }
        let mut out = Params::new();
        for (k, v) in params.iter().filter(|(k, _)| !written.contains(k)) {
            out.insert(k, v.clone());
        }
        out
    }

    fn policy(&self, id: InstanceId) -> &dyn Policy {
        self.policies[id.index()]
            .as_deref()
            .expect("live instance has a policy")
    }

    fn live_instance(&self, id: InstanceId) -> Result<(), OpError> {
        match self.st.insts.get(id.index()) {
            Some(s) if s.live => Ok(()),
            _ => Err(OpError::DeadInstance(id)),
        }
    }

    fn live_thread(&self, t: ThreadId) -> Result<(), OpError> {
        if self.thread_live(t) {
            Ok(())
        } else {
            Err(OpError::UnknownThread(t))
        }
    }

    /// Registers a fresh (waiting) child VP with instance `p`.
    fn register_with(&mut self, p: InstanceId, vp: VpId) -> Result<(), PolicyError> {
        let params = self.st.vps[vp.index()].params.clone();
        self.st.add_child(p.index(), vp);
        let r = self.deliver(p, |pol, ctx| pol.register_vp(ctx, vp, &params));
        if r.is_err() {
            self.st.remove_child(p.index(), vp);
        }
        r
    }

    /// Unregisters a VP from its parent and frees it. It must be waiting.
    fn unregister(&mut self, vp: VpId) {
        let s = &self.st.vps[vp.index()];
        let (parent, child, state) = (s.parent, s.child, s.state);
        if state != VpState::Waiting {
            self.violate(
                Rule::UnregisterNotWaiting,
                child,
                Some(vp),
                format!("unregistered while {state:?}"),
            );
            return;
        }
        match parent {
            Node::Top => {
                let c = self.st.vps[vp.index()].top_cpu.expect("top VPs have a CPU");
                self.st.cpus[c.index()].top_vp = None;
            }
            Node::Instance(p) => {
                self.deliver(p, |pol, ctx| pol.unregister_vp(ctx, vp));
                self.st.remove_child(p.index(), vp);
            }
            Node::Thread(_) => unreachable!("threads are leaves"),
        }
        if let Node::Instance(c) = child {
            self.st.insts[c.index()].parents.retain(|&v| v != vp);
        }
        self.st.free_vp(vp);
    }

    /// Calls one hook of `inst` and applies the actions it asked for, then
    /// delivers the notifications that arrived for `inst` meanwhile; all
    /// of it before returning (an input, or a message between policies).
    fn deliver<R>(
        &mut self,
        inst: InstanceId,
        f: impl FnOnce(&mut dyn Policy, &mut Ctx<'_>) -> R,
    ) -> R {
        let depth = self.st.work.len();
        let r = self.call_hook(inst, None, f);
        self.drive_to(depth);
        r
    }

    /// Applies one action by `actor` and everything it causes, before
    /// returning (an input).
    #[inline(always)]
    fn apply(&mut self, actor: Node, a: Action) {
        let depth = self.st.work.len();
        self.apply_one(actor, a);
        self.drive_to(depth);
    }

    /// Calls one hook of `inst` (`revoked`: the parent VP and processor a
    /// `revoke` hook is about), marks `inst` busy, and leaves the actions it
    /// asked for on the work stack, the first on top, the last marked to
    /// become the hook's done mark once applied; [`Hsi::drive`] applies
    /// them. A hook that asked for nothing is done at once (see
    /// [`Hsi::done_at_once`]).
    #[inline(always)]
    fn call_hook<R>(
        &mut self,
        inst: InstanceId,
        revoked: Option<(VpId, CpuId)>,
        f: impl FnOnce(&mut dyn Policy, &mut Ctx<'_>) -> R,
    ) -> R {
        let base = self.st.work.len();
        self.st.hooks[inst.index()].set_busy();
        let r = {
            let p = self.policies[inst.index()]
                .as_deref_mut()
                .expect("notifications go to live instances");
            let mut ctx = Ctx {
                st: &mut self.st,
                me: inst,
                base,
                revoked,
            };
            f(p, &mut ctx)
        };
        let work = &mut self.st.work;
        match work.get_mut(base..) {
            Some([]) | None => self.done_at_once(inst),
            Some([only]) => only.last = true,
            Some(mine) => {
                mine.reverse();
                mine[0].last = true;
            }
        }
        r
    }

    /// Ends the hook of `inst` that asked for no action. Its done mark
    /// would be the next step [`Hsi::drive`] takes, so with no notification
    /// waiting for `inst` (the usual case) the mark would only free it:
    /// that is done here, without the mark. Otherwise the mark goes on the
    /// stack as for any hook, to deliver what waits in the usual order.
    #[inline(always)]
    fn done_at_once(&mut self, inst: InstanceId) {
        let hook = &mut self.st.hooks[inst.index()];
        if hook.waiting() == 0 {
            hook.done();
        } else {
            self.st.work.push(Step {
                actor: inst,
                action: None,
                last: false,
            });
        }
    }

    /// [`Hsi::drive`], called only when there is work above `depth`: a
    /// hook that asked for nothing, or an action that notified nobody,
    /// leaves none, and then the call is not worth making.
    #[inline(always)]
    fn drive_to(&mut self, depth: usize) {
        if self.st.work.len() > depth {
            self.drive(depth);
        }
    }

    /// Runs the work stack down to `depth`, depth first: the action on top
    /// is applied (its notification may call a hook, whose actions then go
    /// on top and are applied first); a hook's done mark frees its instance
    /// and delivers the notifications that waited for it. This is the order
    /// nested calls had in the kernel implementation (§4.3.1), without
    /// growing the call stack with the depth of the hierarchy.
    ///
    /// When a hook's last action notifies nobody (a grant to or revocation
    /// from a thread, an action dropped as stale), the done mark it left is
    /// at once on top again: it is taken there and then, not by the next
    /// turn of the loop.
    #[inline(never)]
    fn drive(&mut self, depth: usize) {
        while self.st.work.len() > depth {
            let Some(step) = self.st.work.last_mut() else {
                break;
            };
            let actor = step.actor;
            let Some(action) = step.action else {
                self.st.work.pop();
                self.hook_done(actor);
                continue;
            };
            let last = step.last;
            if last {
                step.action = None;
            } else {
                self.st.work.pop();
            }
            match self.transition(Node::Instance(actor), action) {
                Some((inst, note)) => self.notify(inst, note),
                None if last => {
                    self.st.work.pop();
                    self.hook_done(actor);
                }
                None => {}
            }
        }
    }

    /// Takes the done mark of `inst`'s hook: frees `inst` and delivers the
    /// notifications that waited for it.
    #[inline(always)]
    fn hook_done(&mut self, inst: InstanceId) {
        if self.st.hooks[inst.index()].done() {
            self.deliver_waiting(inst);
        }
    }

    /// Delivers, in arrival order, the notifications that waited while
    /// `inst` was busy: up to the first that leaves work on the stack, whose
    /// done mark delivers the rest.
    #[inline(never)]
    fn deliver_waiting(&mut self, inst: InstanceId) {
        let depth = self.st.work.len();
        while let Some(k) = self.st.deferred.iter().position(|&(i, _)| i == inst) {
            let (_, note) = self.st.deferred.remove(k).expect("position is in range");
            self.st.hooks[inst.index()].sub_waiting();
            if let Note::Grant(vp, cpu) = note {
                if self.st.vps[vp.index()].state != VpState::Running(cpu) {
                    // Superseded while waiting: the instance released the VP
                    // itself, or the parent took the processor back (then
                    // the matching revocation is dropped too).
                    let later = self.st.deferred.iter().position(|&(i, n)| {
                        i == inst && matches!(n, Note::Revoke(v, c, _) if v == vp && c == cpu)
                    });
                    if let Some(j) = later {
                        self.st.deferred.remove(j);
                        self.st.hooks[inst.index()].sub_waiting();
                    }
                    continue;
                }
            }
            self.notify(inst, note);
            if self.st.work.len() > depth {
                return;
            }
        }
    }

    /// Delivers a VP notification caused by another node's action: calls
    /// the hook, whose actions go on the work stack. A policy's hooks never
    /// nest: while `inst` is handling a hook (its actions are still being
    /// applied), notifications for it wait, in order, until that hook's
    /// actions are all applied.
    #[inline(always)]
    fn notify(&mut self, inst: InstanceId, note: Note) {
        if self.st.hooks[inst.index()].busy() {
            self.st.deferred.push_back((inst, note));
            self.st.hooks[inst.index()].add_waiting();
            return;
        }
        self.st.notes += 1;
        if self.st.notes > MAX_NOTIFICATIONS {
            return self.livelock(inst);
        }
        let revoked = match note {
            Note::Msg(vp, msg, from) => return self.notify_msg(inst, vp, msg, from),
            Note::Revoke(vp, cpu, _) => Some((vp, cpu)),
            _ => None,
        };
        // One `call_hook` for all keeps this hot path small.
        self.call_hook(inst, revoked, |p, ctx| match note {
            Note::Grant(vp, cpu) => p.grant(ctx, vp, cpu),
            Note::Revoke(vp, _, reason) => p.revoke(ctx, vp, reason),
            Note::Request(vp) => p.request(ctx, vp),
            Note::Release(vp) => p.release(ctx, vp),
            Note::Msg(..) => unreachable!("handled above"),
        })
    }

    #[cold]
    #[inline(never)]
    fn livelock(&mut self, inst: InstanceId) {
        if self.st.notes == MAX_NOTIFICATIONS + 1 {
            let detail = format!(
                "more than {MAX_NOTIFICATIONS} notifications for one input: the policies are looping"
            );
            self.violate(Rule::Livelock, Node::Instance(inst), None, detail);
        }
    }

    #[inline(never)]
    fn notify_msg(&mut self, inst: InstanceId, vp: VpId, msg: u32, from: InstanceId) {
        let Some(m) = self.st.msgs.get_mut(msg as usize).and_then(Option::take) else {
            return;
        };
        if let Err(e) = self.deliver(inst, |pol, ctx| pol.msg(ctx, vp, &m)) {
            if self.st.trace.is_some() {
                let note = format!(
                    "message from {} refused: {e}",
                    self.st.node_name(Node::Instance(from))
                );
                self.record(TraceKind::Policy {
                    instance: from,
                    event: PolicyEvent::Note(note),
                });
            }
        }
    }

    /// Reports an invalid action of `actor`, or drops it as stale when the
    /// actor has notifications waiting that explain the change.
    fn refuse(&mut self, rule: Rule, actor: Node, vp: Option<VpId>, detail: String) {
        if let Node::Instance(i) = actor {
            if self.st.hooks[i.index()].waiting() > 0 {
                let at = self.st.now;
                if let Some(t) = self.st.trace.as_mut() {
                    let event = PolicyEvent::Note(format!("stale action dropped: {detail}"));
                    t.push(TraceEvent {
                        at,
                        kind: TraceKind::Policy { instance: i, event },
                    });
                }
                return;
            }
        }
        self.violate(rule, actor, vp, detail);
    }

    fn violate(&mut self, rule: Rule, culprit: Node, vp: Option<VpId>, detail: String) {
        let culprit = self.st.node_name(culprit);
        self.st.violations.push(Violation {
            rule,
            culprit,
            vp,
            detail,
        });
    }

    /// Records an event when tracing is on; `kind` runs only then.
    #[inline(always)]
    fn trace(&mut self, kind: impl FnOnce() -> TraceKind) {
        if self.st.trace.is_some() {
            self.record(kind());
        }
    }

    #[cold]
    #[inline(never)]
    fn record(&mut self, kind: TraceKind) {
        if let Some(t) = self.st.trace.as_mut() {
            t.push(TraceEvent {
                at: self.st.now,
                kind,
            });
        }
    }

    /// Whether `n` holds `cpu` (has a parent VP running there).
    #[inline(always)]
    fn holds(&self, n: Node, cpu: CpuId) -> bool {
        match n {
            Node::Top => true,
            Node::Instance(i) => match self.st.insts[i.index()].parents[..] {
                // The usual shape, without the loop.
                [vp] => self.st.vps[vp.index()].state == VpState::Running(cpu),
                ref vps if vps.len() <= WIDE_PARENTS => vps
                    .iter()
                    .any(|&vp| self.st.vps[vp.index()].state == VpState::Running(cpu)),
                _ => self.holds_wide(i, cpu),
            },
            Node::Thread(_) => false,
        }
    }

    /// [`Hsi::holds`] for an instance with more than [`WIDE_PARENTS`]
    /// parent VPs (one per processor of a large machine): their count on
    /// `cpu` rather than a pass over them.
    #[inline(never)]
    fn holds_wide(&self, i: InstanceId, cpu: CpuId) -> bool {
        let inst = &self.st.insts[i.index()];
        let held = inst.held[cpu.index()] > 0;
        debug_assert_eq!(
            held,
            inst.parents
                .iter()
                .any(|&vp| self.st.vps[vp.index()].state == VpState::Running(cpu)),
            "held count of {} out of step",
            inst.name
        );
        held
    }

    /// Reports an invalid action (see [`Hsi::refuse`]), building the detail
    /// only on this cold path.
    #[cold]
    #[inline(never)]
    fn refuse_with(
        &mut self,
        rule: Rule,
        actor: Node,
        vp: VpId,
        detail: impl FnOnce(&State) -> String,
    ) {
        let detail = detail(&self.st);
        self.refuse(rule, actor, Some(vp), detail);
    }

    /// Applies one action by `actor`, checking ownership and the Fig 4.2
    /// transition, then delivers the notification (calls the receiver's
    /// hook, whose actions the caller's [`Hsi::drive`] applies).
    #[inline(always)]
    fn apply_one(&mut self, actor: Node, a: Action) {
        if let Some((inst, note)) = self.transition(actor, a) {
            self.notify(inst, note);
        }
    }

    /// The checks and the state change of [`Hsi::apply_one`]; returns the
    /// notification to deliver, if any.
    #[inline(always)]
    fn transition(&mut self, actor: Node, a: Action) -> Option<(InstanceId, Note)> {
        match a {
            Action::Grant { vp, cpu } => self.grant(actor, vp, cpu),
            Action::Revoke { vp, reason } => self.revoke(actor, vp, reason),
            Action::Request { vp } => self.request(actor, vp),
            Action::Release { vp } => self.release(actor, vp),
            Action::Msg { vp, msg } => {
                self.owned(actor, vp, false, || Action::Msg { vp, msg })?;
                match (self.st.vps[vp.index()].parent, actor) {
                    (Node::Instance(p), Node::Instance(from)) => {
                        Some((p, Note::Msg(vp, msg, from)))
                    }
                    _ => None,
                }
            }
        }
    }

    /// The state of `vp` and the node on its other side, when `actor` is
    /// its parent (`parent_side`) or its child; otherwise reports `a()`.
    #[inline(always)]
    fn owned(
        &mut self,
        actor: Node,
        vp: VpId,
        parent_side: bool,
        a: impl FnOnce() -> Action,
    ) -> Option<(VpState, Node)> {
        if let Some(s) = self.st.vps.get(vp.index()) {
            let (owner, other) = if parent_side {
                (s.parent, s.child)
            } else {
                (s.child, s.parent)
            };
            if s.live && owner == actor {
                return Some((s.state, other));
            }
        }
        self.not_owner(actor, vp, parent_side, a());
        None
    }

    #[cold]
    #[inline(never)]
    fn not_owner(&mut self, actor: Node, vp: VpId, parent_side: bool, a: Action) {
        self.refuse_with(Rule::NotOwner, actor, vp, |st| {
            match st.vps.get(vp.index()) {
                Some(s) if s.live => {
                    let (side, owner) = if parent_side {
                        ("parent", s.parent)
                    } else {
                        ("child", s.child)
                    };
                    format!("{a:?} on a VP whose {side} is {}", st.node_name(owner))
                }
                _ => "acted on a VP that is not registered".into(),
            }
        });
    }

    /// A grant of `cpu` by `actor` to its ready child `vp`.
    #[inline(always)]
    fn grant(&mut self, actor: Node, vp: VpId, cpu: CpuId) -> Option<(InstanceId, Note)> {
        let (state, child) = self.owned(actor, vp, true, || Action::Grant { vp, cpu })?;
        if state != VpState::Ready {
            self.refuse_with(Rule::IllegalTransition, actor, vp, |_| {
                format!("grant of {cpu} to a VP that is {state:?}, not Ready")
            });
            return None;
        }
        if cpu.index() >= self.st.cpus.len() || !self.holds(actor, cpu) {
            self.refuse_with(Rule::CpuNotHeld, actor, vp, |_| {
                format!("granted {cpu}, which it does not hold")
            });
            return None;
        }
        self.st.start_segment(vp, cpu);
        self.trace(|| TraceKind::Grant {
            vp,
            parent: actor,
            child,
            cpu,
        });
        match child {
            Node::Instance(c) => {
                self.st.count_held(c, cpu, true);
                Some((c, Note::Grant(vp, cpu)))
            }
            Node::Thread(t) => {
                self.st.thread_started(cpu, t);
                None
            }
            Node::Top => unreachable!("the top scheduler is never a child"),
        }
    }

    /// A revocation by `actor` of the processor of its running child `vp`.
    #[inline(always)]
    fn revoke(
        &mut self,
        actor: Node,
        vp: VpId,
        reason: RevokeReason,
    ) -> Option<(InstanceId, Note)> {
        let (state, child) = self.owned(actor, vp, true, || Action::Revoke { vp, reason })?;
        let VpState::Running(cpu) = state else {
            self.refuse_with(Rule::IllegalTransition, actor, vp, |_| {
                format!("revoke from a VP that is {state:?}, not Running")
            });
            return None;
        };
        self.st.end_segment(vp, cpu, VpState::Ready);
        self.trace(|| TraceKind::Revoke {
            vp,
            parent: actor,
            child,
            cpu,
            reason,
        });
        match child {
            Node::Instance(c) => {
                self.st.count_held(c, cpu, false);
                Some((c, Note::Revoke(vp, cpu, reason)))
            }
            Node::Thread(t) => {
                self.st.threads[t.index()].last_revoke = Some(reason);
                self.st.thread_stopped(cpu, t);
                None
            }
            Node::Top => unreachable!("the top scheduler is never a child"),
        }
    }

    /// A request by `actor` for a processor for its waiting parent VP `vp`.
    #[inline(always)]
    fn request(&mut self, actor: Node, vp: VpId) -> Option<(InstanceId, Note)> {
        let (state, parent) = self.owned(actor, vp, false, || Action::Request { vp })?;
        if state != VpState::Waiting {
            self.refuse_with(Rule::IllegalTransition, actor, vp, |_| {
                format!("request from a VP that is {state:?}, not Waiting")
            });
            return None;
        }
        self.st.vps[vp.index()].state = VpState::Ready;
        if let Node::Instance(i) = actor {
            self.st.insts[i.index()].asking += 1;
        }
        self.trace(|| TraceKind::Request {
            vp,
            parent,
            child: actor,
        });
        match parent {
            Node::Instance(p) => Some((p, Note::Request(vp))),
            Node::Top => {
                // The top scheduler grants every request at once, always
                // the same processor (§9.3.5).
                let cpu = self.st.vps[vp.index()].top_cpu.expect("top VPs have a CPU");
                self.st.start_segment(vp, cpu);
                self.trace(|| TraceKind::Grant {
                    vp,
                    parent: Node::Top,
                    child: actor,
                    cpu,
                });
                match actor {
                    Node::Instance(c) => {
                        self.st.count_held(c, cpu, true);
                        Some((c, Note::Grant(vp, cpu)))
                    }
                    _ => None,
                }
            }
            Node::Thread(_) => unreachable!("threads are leaves"),
        }
    }

    /// A release by `actor` of its parent VP `vp`: it gives back the
    /// processor, or withdraws the request.
    #[inline(always)]
    fn release(&mut self, actor: Node, vp: VpId) -> Option<(InstanceId, Note)> {
        let (state, parent) = self.owned(actor, vp, false, || Action::Release { vp })?;
        match state {
            VpState::Waiting => {
                self.refuse_with(Rule::IllegalTransition, actor, vp, |_| {
                    "release from a VP that is already Waiting".into()
                });
                return None;
            }
            VpState::Running(cpu) => {
                self.st.end_segment(vp, cpu, VpState::Waiting);
                match actor {
                    Node::Thread(t) => self.st.thread_stopped(cpu, t),
                    Node::Instance(i) => self.st.count_held(i, cpu, false),
                    Node::Top => {}
                }
            }
            VpState::Ready => self.st.vps[vp.index()].state = VpState::Waiting,
        }
        if let Node::Instance(i) = actor {
            self.st.insts[i.index()].asking -= 1;
        }
        self.trace(|| TraceKind::Release {
            vp,
            parent,
            child: actor,
        });
        match parent {
            Node::Instance(p) => Some((p, Note::Release(vp))),
            _ => None,
        }
    }

    /// Ends an input: runs the protocol checker if on, reports violations.
    #[inline]
    fn finish(&mut self) -> Result<(), HsiError> {
        self.st.notes = 0;
        // The usual end, inline: nothing to check, report or free.
        if !self.checking && self.st.violations.is_empty() && self.st.msgs.is_empty() {
            return Ok(());
        }
        self.finish_slow()
    }

    #[inline(never)]
    fn finish_slow(&mut self) -> Result<(), HsiError> {
        if self.st.work.is_empty() {
            self.st.msgs.clear();
        }
        if self.checking {
            crate::checker::check(&mut self.st, &mut self.policies);
        }
        if !self.st.violations.is_empty() {
            self.contain_violations();
        }
        if self.st.violations.is_empty() {
            Ok(())
        } else {
            Err(HsiError::Protocol(std::mem::take(&mut self.st.violations)))
        }
    }

    /// Runs the full protocol check now, whatever [`Hsi::checking`] says.
    ///
    /// # Errors
    /// Every violation found.
    pub fn check_protocol(&mut self) -> Result<(), HsiError> {
        crate::checker::check(&mut self.st, &mut self.policies);
        if !self.st.violations.is_empty() {
            self.contain_violations();
        }
        if self.st.violations.is_empty() {
            Ok(())
        } else {
            Err(HsiError::Protocol(std::mem::take(&mut self.st.violations)))
        }
    }
}
