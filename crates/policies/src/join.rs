//! # Join (`join`)
//!
//! Schedules one child VP whenever any of its parents schedules it: Regehr
//! 2001, §9.3.4 and §5.3.1.2, the OR gate that makes the hierarchy a DAG. It
//! is how §6.2.1 builds soft and firm reservations from a hard one (join a
//! reservation with time sharing) and how §6.2.2 builds probabilistic
//! reservations (join a reservation with an overrun partition).
//!
//! ## Algorithm
//! Join registers one VP with each parent; parents are numbered in the order
//! they are declared ([`Ctx::parent_vps`]). While the child is ready, Join
//! asks every parent for a processor. The first grant runs the child. If
//! another parent grants while the child runs (possible only on a
//! multiprocessor, where parents hold different processors), Join keeps the
//! highest-numbered parent: a higher-numbered grant takes over (the child
//! is revoked with [`RevokeReason::Preempted`] from the old processor,
//! granted the new one, and the old parent VP released); a lower-numbered
//! grant is released at once (§9.3.4: "always accepts scheduling from the
//! highest-numbered parent that will grant a processor to it"). Parents
//! whose grant was released are asked again when the child next loses its
//! processor, so the child gets no less than any single parent would give
//! it (§5.3.1.2).
//!
//! When the parent Join runs from revokes the processor, Join revokes it
//! from the child with the *same* reason, so a budget exhaustion above is
//! visible below (§6.2.2 needs to tell it from a preemption). Join then
//! keeps asking that parent and asks again every parent it had released; if
//! another parent holds a processor for it at that moment, the child is
//! granted that one at once.
//!
//! ## Multiprocessor behaviour
//! Join offers its child exactly one processor (`cpus_offered` = 1) and
//! registers one VP with each parent (`parent_vps` = 1), so a
//! multiprocessor child below a Join registers one VP and runs on one
//! processor at a time. Join uses at most one processor at a time; which
//! one follows the parent numbering above, so declare the parent whose time
//! should be preferred last. On a uniprocessor two parents never grant at
//! once and the numbering does not matter.
//!
//! ## Overrun mode (§6.2.2)
//! With `mode = "overrun"` Join builds a probabilistic reservation: the
//! last (highest-numbered) parent is the reservation and is always asked;
//! the other parents (the shared overrun partition) are asked only after
//! the reservation revoked the processor with
//! [`RevokeReason::BudgetExhausted`], and no longer once the reservation
//! grants again (its next period). A plain preemption by the reservation
//! does not send the child to the overrun partition.
//!
//! ## Parameters
//! | side | key | kind | default | meaning |
//! |---|---|---|---|---|
//! | instance | `mode` | `"or"` or `"overrun"` | `"or"` | ask every parent, or the others only after the last one's budget ran out |
//!
//! No child-side parameters. Join takes 2 to 16 parents.
//!
//! ## Guarantees (§5.3.1.2)
//! The child may take any one parent's guarantee, hard reservations turned
//! into the corresponding soft ones (`RESBH ↦ RESBS`, `RESCH ↦ RESCS`),
//! since Join never gives less than one parent would and may give more. On
//! a uniprocessor, guarantees of the same type (and period) add up; on a
//! multiprocessor they do not, because Join uses only one processor at a
//! time.

use crate::fp::{param_err, Parents, Run};
use crate::registry::{check_child_params, PolicyInfo};
use hsched_core::{
    CpuId, Ctx, Instant, ParamSpec, Params, Policy, PolicyError, RevokeReason, VpId, VpState,
};

/// Most parents a Join instance may have.
pub const MAX_PARENTS: usize = 16;

/// Registry entry.
pub const INFO: PolicyInfo = PolicyInfo {
    name: "join",
    summary: "runs its single child whenever any parent grants it a processor; keeps the highest-numbered parent",
    source: "Regehr 2001, §9.3.4, §5.3.1.2, §6.2.1",
    instance_params: &[ParamSpec {
        key: "mode",
        kind: "\"or\" or \"overrun\"",
        default: "or",
        doc: "or: ask every parent; overrun: ask the others only after the last parent revoked for an exhausted budget (§6.2.2)",
    }],
    child_params: &[],
    change_params: &[],
    max_children: Some(1),
    min_parents: 2,
    max_parents: MAX_PARENTS,
    build,
    check_child: crate::registry::no_child_check,
    exclusive: None,
    admission: None,
    merge_change: crate::registry::merge_change,
};

fn build(params: &Params) -> Result<Box<dyn Policy>, PolicyError> {
    Ok(Box::new(Join::from_params(params)?))
}

/// Which parents a Join asks while its child is ready.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Mode {
    /// Every parent: the OR gate of §9.3.4.
    #[default]
    Or,
    /// The last (highest-numbered) parent always; the others only after
    /// it revoked with [`RevokeReason::BudgetExhausted`], until it grants
    /// again: a probabilistic reservation's overrun partition (§6.2.2).
    Overrun,
}

/// The join scheduler.
#[derive(Debug, Default)]
pub struct Join {
    parents: Parents,
    child: Option<VpId>,
    /// The child's eager state.
    run: Run,
    /// The parent the running child's processor comes from.
    kept: Option<usize>,
    mode: Mode,
    /// Overrun mode: the last parent's budget is exhausted.
    overrun: bool,
    /// When Join last gave back a grant of each parent (by index).
    refused: Vec<Instant>,
}

impl Join {
    /// An instance from its `[[scheduler]]` parameters.
    ///
    /// # Errors
    /// An unknown parameter or mode.
    pub fn from_params(params: &Params) -> Result<Self, PolicyError> {
        if let Some(k) = params.unknown_keys(&["mode"]).next() {
            return Err(PolicyError::Unsupported(format!(
                "join has no parameter `{k}`; it accepts: mode"
            )));
        }
        let mode = match params.str("mode")? {
            None | Some("or") => Mode::Or,
            Some("overrun") => Mode::Overrun,
            Some(other) => {
                return Err(param_err(
                    "mode",
                    format!("unknown mode `{other}`; expected \"or\" or \"overrun\""),
                ))
            }
        };
        Ok(Join {
            mode,
            ..Join::default()
        })
    }

    /// The mode.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// The index (declaration order) of the parent the child runs from.
    pub fn kept_parent(&self) -> Option<usize> {
        self.kept
    }

    /// Asks every waiting parent the mode allows, highest-numbered first so
    /// that a parent granting at once is the preferred one. A parent whose
    /// grant Join gave back at this very instant is not asked again until
    /// time moves on: when one parent lies below another in the hierarchy,
    /// asking the lower one can make the upper one preempt the join, which
    /// would otherwise ask again, forever, within one instant.
    fn ask_all(&mut self, ctx: &mut Ctx<'_>) {
        let n = self.parents.len();
        let now = ctx.now();
        for i in (0..n).rev() {
            let allowed = self.mode == Mode::Or || self.overrun || i + 1 == n;
            if allowed && self.refused.get(i) != Some(&now) {
                self.parents.request(ctx, i);
            }
        }
    }

    /// Gives back parent `i`'s processor or request, remembering when.
    fn give_back(&mut self, ctx: &mut Ctx<'_>, i: usize) {
        if self.refused.len() < self.parents.len() {
            self.refused.resize(self.parents.len(), Instant::NEVER);
        }
        self.refused[i] = ctx.now();
        self.parents.release(ctx, i);
    }

    /// Runs the child on `cpu`, which parent `i` granted.
    fn take(&mut self, ctx: &mut Ctx<'_>, vp: VpId, i: usize, cpu: CpuId) {
        if i + 1 == self.parents.len() {
            self.overrun = false;
        }
        self.run = Run::Running(cpu);
        self.kept = Some(i);
        ctx.grant(vp, cpu);
    }
}

impl Policy for Join {
    fn policy_name(&self) -> &'static str {
        "join"
    }

    fn parent_vps(&self, available: usize) -> usize {
        available.min(1)
    }

    fn cpus_offered(&self, _parent_vps: usize) -> usize {
        1
    }

    fn init(&mut self, ctx: &mut Ctx<'_>) {
        self.parents.init(ctx);
    }

    fn register_vp(
        &mut self,
        _ctx: &mut Ctx<'_>,
        vp: VpId,
        params: &Params,
    ) -> Result<(), PolicyError> {
        check_child_params(&INFO, params)?;
        if let Some(other) = self.child {
            return Err(PolicyError::Refused(format!(
                "a join scheduler has a single child, and {other} is it"
            )));
        }
        self.child = Some(vp);
        self.run = Run::Waiting;
        self.kept = None;
        Ok(())
    }

    fn unregister_vp(&mut self, _ctx: &mut Ctx<'_>, vp: VpId) {
        if self.child == Some(vp) {
            self.child = None;
            self.run = Run::Waiting;
            self.kept = None;
        }
    }

    fn request(&mut self, ctx: &mut Ctx<'_>, vp: VpId) {
        self.parents.ensure(ctx);
        // A request withdrawn since (its release follows) is ignored.
        if self.child != Some(vp) || ctx.vp_state(vp) != VpState::Ready {
            return;
        }
        self.run = Run::Ready;
        self.kept = None;
        if let Some((i, cpu)) = self.parents.held().last() {
            self.take(ctx, vp, i, cpu);
        }
        self.ask_all(ctx);
    }

    fn release(&mut self, ctx: &mut Ctx<'_>, vp: VpId) {
        self.parents.ensure(ctx);
        if self.child != Some(vp) {
            return;
        }
        self.run = Run::Waiting;
        self.kept = None;
        // Asking parents first, then the held one: see `PrioSet::finish`.
        self.parents.set_asking(ctx, 0);
        self.parents.release_idle(ctx, |_| false);
    }

    fn grant(&mut self, ctx: &mut Ctx<'_>, parent_vp: VpId, cpu: CpuId) {
        let Some(i) = self.parents.on_grant(ctx, parent_vp, cpu) else {
            return;
        };
        // A child a notification is still to come about is left alone; the
        // grant is given back.
        let Some(vp) = self
            .child
            .filter(|&vp| Run::of(ctx.vp_state(vp)) == self.run)
        else {
            self.give_back(ctx, i);
            return;
        };
        match (self.run, self.kept) {
            (Run::Ready, _) => self.take(ctx, vp, i, cpu),
            (Run::Running(_), Some(k)) if i > k => {
                // A better parent: move the child there and give the old
                // processor back (revoke, release, grant: see `crate::fp`).
                ctx.revoke(vp, RevokeReason::Preempted);
                self.give_back(ctx, k);
                self.take(ctx, vp, i, cpu);
            }
            _ => self.give_back(ctx, i),
        }
    }

    fn revoke(&mut self, ctx: &mut Ctx<'_>, parent_vp: VpId, reason: RevokeReason) {
        let Some((i, cpu)) = self.parents.on_revoke(ctx, parent_vp) else {
            return;
        };
        let Some(vp) = self.child else { return };
        if self.run != Run::Running(cpu) || self.kept != Some(i) {
            return;
        }
        match ctx.vp_state(vp) {
            // Quiet: keep asking the revoking parent, ask the others again.
            VpState::Running(c) if c == cpu => ctx.revoke(vp, reason),
            // The grant to it never took effect (the processor was revoked
            // before it was applied, and it was dropped as stale): it is
            // simply ready.
            VpState::Ready => {}
            _ => return,
        }
        if i + 1 == self.parents.len() && reason == RevokeReason::BudgetExhausted {
            self.overrun = true;
        }
        self.run = Run::Ready;
        self.kept = None;
        if let Some((j, c)) = self.parents.held().last() {
            self.take(ctx, vp, j, c);
        }
        self.ask_all(ctx);
    }

    fn describe(&self) -> String {
        match self.mode {
            Mode::Or => String::new(),
            Mode::Overrun => "mode=overrun".into(),
        }
    }

    fn check_invariants(&self, ctx: &Ctx<'_>) -> Result<(), String> {
        self.parents.check(ctx)?;
        // The held processors, listed only for a message.
        let mut it = self.parents.held();
        let (first, more) = (it.next(), it.next().is_some());
        let none_held = first.is_none();
        let held = || self.parents.held().collect::<Vec<(usize, CpuId)>>();
        let Some(vp) = self.child else {
            return if none_held {
                Ok(())
            } else {
                Err("holds a processor but has no child".into())
            };
        };
        if Run::of(ctx.vp_state(vp)) != self.run {
            return Err(format!(
                "believes child {vp} is {:?} but it is {:?}",
                self.run,
                ctx.vp_state(vp)
            ));
        }
        match (self.run, self.kept) {
            (Run::Running(c), Some(k)) if more || first != Some((k, c)) => {
                return Err(format!(
                    "child runs on {c} from parent {k} but the held processors are {:?}",
                    held()
                ));
            }
            (Run::Running(_), Some(_)) => {}
            (Run::Running(c), None) => return Err(format!("child runs on {c} from no parent")),
            (_, _) if !none_held => {
                return Err(format!("holds {:?} but the child is not running", held()))
            }
            _ => {}
        }
        Ok(())
    }
}
