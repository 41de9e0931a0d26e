//! The processors of a virtual-time fair-share instance: the part of
//! start-time fair queuing (Regehr 2001, §9.3.3) that [`ps`](crate::ps) and
//! [`coop`](crate::coop) (Sinha 2007, §2.2.2) share.
//!
//! Such an instance holds up to as many processors as it has parent VPs and
//! runs one child on each. A child is charged with the CPU time it actually
//! receives, net of stolen time ([`Ctx::vp_received`]), and the policy turns
//! that time into virtual time its own way ([`Holder::advance`]). This
//! module keeps the list of held processors and does what does not depend
//! on how virtual time is kept or how the next child is chosen:
//!
//! - charging every running child before virtual times are compared;
//! - reconciling, at the start of every hook, with what happened while the
//!   instance was busy (the shared rules of [`crate::fp`]): a processor the
//!   parent took back (the child is revoked with `Preempted` and queued
//!   again) or a running child that released (its processor goes to the
//!   next child);
//! - the `grant` and `revoke` hooks;
//! - the *avoid* rule: a hook that revokes a VP of a child instance never
//!   grants that instance another VP, since the instance may release it as
//!   a consequence of the revocation before the grant is applied.

use hsched_core::{CpuId, Ctx, Duration, Instant, Node, RevokeReason, VpId};

/// A processor the instance holds and the child running on it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Held<T> {
    /// The parent VP the processor is held through.
    pub(crate) parent: VpId,
    /// The processor.
    pub(crate) cpu: CpuId,
    /// The child running on it.
    pub(crate) vp: VpId,
    /// The child's net received time when last charged.
    pub(crate) mark: Duration,
    /// What the policy keeps about this dispatch (its slice).
    pub(crate) run: T,
}

/// A virtual-time fair-share policy. The provided methods are the shared
/// mechanism; the required ones say where the policies differ.
pub(crate) trait Holder {
    /// What the policy keeps about a dispatch.
    type Run: Copy;

    /// The processors held, in dispatch order.
    fn held(&self) -> &[Held<Self::Run>];
    /// The processors held, to change.
    fn held_mut(&mut self) -> &mut Vec<Held<Self::Run>>;
    /// Instances revoked in the current hook: none of their VPs is granted
    /// in it.
    fn avoid_mut(&mut self) -> &mut Vec<Node>;

    /// Charges running child `vp` with `used` (positive) CPU time: advances
    /// its (or its entity's) virtual time.
    fn advance(&mut self, ctx: &Ctx<'_>, vp: VpId, used: Duration);
    /// Queues ready child `vp` (again), behind the children queued before.
    fn enqueue(&mut self, ctx: &Ctx<'_>, vp: VpId);
    /// Running child `vp` released its processor (or released and asked
    /// again: its request, still on its way, queues it).
    fn stopped(&mut self, ctx: &mut Ctx<'_>, vp: VpId);
    /// Gives `cpu`, held through `parent`, to the best queued child, or
    /// releases `parent`.
    fn dispatch(&mut self, ctx: &mut Ctx<'_>, parent: VpId, cpu: CpuId);

    /// Charges the child running on `held[i]` for the CPU time it received
    /// since its last charge.
    fn charge(&mut self, ctx: &Ctx<'_>, i: usize) {
        let h = &mut self.held_mut()[i];
        let recv = ctx.vp_received(h.vp);
        let used = recv - h.mark;
        h.mark = recv;
        let vp = h.vp;
        if used != Duration::ZERO {
            self.advance(ctx, vp, used);
        }
    }

    /// Charges every running child.
    fn charge_all(&mut self, ctx: &Ctx<'_>) {
        for i in 0..self.held().len() {
            self.charge(ctx, i);
        }
    }

    /// Holds `cpu` through `parent` for child `vp`, dispatched now.
    fn hold(&mut self, ctx: &Ctx<'_>, parent: VpId, cpu: CpuId, vp: VpId, run: Self::Run) {
        let mark = ctx.vp_received(vp);
        self.held_mut().push(Held {
            parent,
            cpu,
            vp,
            mark,
            run,
        });
    }

    /// Revokes running child `vp`, remembering its instance (the avoid
    /// rule).
    fn revoke_child(&mut self, ctx: &mut Ctx<'_>, vp: VpId, reason: RevokeReason) {
        self.avoid_mut().push(ctx.vp_child(vp));
        ctx.revoke(vp, reason);
    }

    /// Catches up with what happened while this instance was busy: a
    /// notification for a busy instance is delivered only once its own
    /// actions are applied, so a parent may already have taken a processor
    /// back (revocation not yet delivered) or a running child may already
    /// have released. Run at the start of every hook, after clearing the
    /// avoid list.
    fn sync(&mut self, ctx: &mut Ctx<'_>) {
        let mut freed = Vec::new();
        let mut i = 0;
        while i < self.held().len() {
            let h = self.held()[i];
            let parent_ok = ctx.vp_cpu(h.parent) == Some(h.cpu);
            let child_ok = ctx.vp_cpu(h.vp) == Some(h.cpu);
            if parent_ok && child_ok {
                i += 1;
                continue;
            }
            self.charge(ctx, i);
            self.held_mut().remove(i);
            if child_ok {
                // The parent took the processor back.
                self.revoke_child(ctx, h.vp, RevokeReason::Preempted);
                self.enqueue(ctx, h.vp);
            } else {
                self.stopped(ctx, h.vp);
                if parent_ok {
                    freed.push((h.parent, h.cpu));
                }
            }
        }
        for (parent, cpu) in freed {
            self.dispatch(ctx, parent, cpu);
        }
    }

    /// [`sync`](Holder::sync) for a hook about `about` (the child VP of a
    /// `request` or `release`, the parent VP of a `grant` or `revoke`,
    /// `None` for a timer or a message), without the pass over every held
    /// processor in the usual case.
    ///
    /// Every change to a VP this instance shares, other than by its own
    /// applied actions, is followed by a notification to it, and an action
    /// of it is dropped as stale only while one is waiting
    /// ([`Ctx::notifications_waiting`]). So with none waiting, the only
    /// held processor that can disagree with the VPs is the one this hook
    /// is about: through parent VP `about`, or running child `about`
    /// (released while the instance was busy, or never granted). When that
    /// one agrees, `sync` would find nothing (debug builds check it).
    fn sync_about(&mut self, ctx: &mut Ctx<'_>, about: Option<VpId>) {
        if ctx.notifications_waiting() == 0 {
            let settled = |h: &Held<Self::Run>| {
                ctx.vp_cpu(h.parent) == Some(h.cpu) && ctx.vp_cpu(h.vp) == Some(h.cpu)
            };
            let quiet = match about {
                None => true,
                Some(vp) => self
                    .held()
                    .iter()
                    .all(|h| (h.parent != vp && h.vp != vp) || settled(h)),
            };
            if quiet {
                debug_assert!(
                    self.held().iter().all(settled),
                    "a held processor changed with no notification waiting"
                );
                return;
            }
        }
        self.sync(ctx);
    }

    /// Starts a hook about `about`: clears the avoid list and reconciles
    /// (see [`sync_about`](Holder::sync_about)).
    fn begin_about(&mut self, ctx: &mut Ctx<'_>, about: Option<VpId>) {
        self.avoid_mut().clear();
        self.sync_about(ctx, about);
    }

    /// The `grant` hook, up to the policy's settling.
    fn on_grant(&mut self, ctx: &mut Ctx<'_>, parent_vp: VpId, cpu: CpuId) {
        self.begin_about(ctx, Some(parent_vp));
        // Stale when the processor was taken back, or released, since.
        let held = self.held().iter().any(|h| h.parent == parent_vp);
        if ctx.vp_cpu(parent_vp) == Some(cpu) && !held {
            self.dispatch(ctx, parent_vp, cpu);
        }
    }

    /// The `revoke` hook, up to the policy's settling.
    fn on_revoke(&mut self, ctx: &mut Ctx<'_>, parent_vp: VpId, reason: RevokeReason) {
        self.avoid_mut().clear();
        // Before `sync`, so the child learns the parent's reason.
        if let Some(i) = self.held().iter().position(|h| h.parent == parent_vp) {
            let h = self.held()[i];
            if ctx.vp_cpu(h.vp) == Some(h.cpu) {
                self.charge(ctx, i);
                self.held_mut().remove(i);
                self.revoke_child(ctx, h.vp, reason);
                self.enqueue(ctx, h.vp);
            }
        }
        self.sync_about(ctx, Some(parent_vp));
    }

    /// Checks that every held processor is held and runs its child.
    fn check_held(&self, ctx: &Ctx<'_>) -> Result<(), String> {
        for h in self.held() {
            if ctx.vp_cpu(h.vp) != Some(h.cpu) {
                return Err(format!(
                    "thinks {} runs on {} but it is {:?}",
                    h.vp,
                    h.cpu,
                    ctx.vp_state(h.vp)
                ));
            }
            if ctx.vp_cpu(h.parent) != Some(h.cpu) {
                return Err(format!(
                    "thinks it holds {} through {} but that VP is {:?}",
                    h.cpu,
                    h.parent,
                    ctx.vp_state(h.parent)
                ));
            }
        }
        Ok(())
    }
}

/// Arms the instance timer at `at`, or cancels it for `Instant::NEVER`.
/// An unchanged deadline costs the timer heap one look at the instance's
/// slot (`Timers::set` and `cancel` return at once), so it is not asked
/// for the armed time first.
#[inline]
pub(crate) fn arm_timer(ctx: &mut Ctx<'_>, at: Instant) {
    ctx.set_timer(at);
}
