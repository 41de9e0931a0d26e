//! Small policies for tests and examples of the core. Real policies live in
//! the `hsched-policies` crate.

use crate::ctx::Ctx;
use crate::ids::{CpuId, VpId};
use crate::params::Params;
use crate::policy::{Policy, PolicyError, RevokeReason};
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
        ctx.parent_vps().iter().copied().find(|&p| ctx.vp_cpu(p) == Some(cpu))
    }
}

impl Policy for Fifo {
    fn policy_name(&self) -> &'static str {
        "fifo"
    }

    fn register_vp(&mut self, _ctx: &mut Ctx<'_>, _vp: VpId, _params: &Params) -> Result<(), PolicyError> {
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
        let Some(cpu) = ctx.vp_last_cpu(parent_vp) else { return };
        if let Some(i) = self.running.iter().position(|&(c, _)| c == cpu) {
            let (_, vp) = self.running.swap_remove(i);
            ctx.revoke(vp, reason);
            self.ready.push_front(vp);
        }
    }

    fn check_invariants(&self, ctx: &Ctx<'_>) -> Result<(), String> {
        for &(cpu, vp) in &self.running {
            if ctx.vp_cpu(vp) != Some(cpu) {
                return Err(format!("thinks {vp} runs on {cpu} but it is {:?}", ctx.vp_state(vp)));
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
