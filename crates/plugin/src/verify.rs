//! Checks a hook's actions against the protocol (Regehr 2001, §4.3.4,
//! the rules of crates/core/src/checker.rs) before they reach the HSI, so
//! that a plug-in that breaks it is unloaded instead of stopping the run.
//!
//! The actions are replayed on an overlay of the VP states the hook saw:
//! each must be a legal transition from the state the earlier actions of
//! the same hook left, and after the hook every processor the instance
//! holds must be passed on to exactly one child (when no notification for
//! the instance is still waiting, so that its view is complete).
//! `set_parent_demand` is expanded here as `Ctx::set_parent_demand` would
//! expand it, so only explicit requests and releases reach the context.

use crate::host::Act;
use hsched_core::{CpuId, Ctx, VpId, VpState};

/// VP states as the hook's actions so far leave them.
struct Overlay<'c, 'a> {
    ctx: &'c Ctx<'a>,
    changed: Vec<(VpId, VpState)>,
}

impl Overlay<'_, '_> {
    fn state(&self, vp: VpId) -> VpState {
        self.changed
            .iter()
            .rev()
            .find(|(v, _)| *v == vp)
            .map_or_else(|| self.ctx.vp_state(vp), |&(_, s)| s)
    }

    fn set(&mut self, vp: VpId, s: VpState) {
        self.changed.push((vp, s));
    }

    fn child_on(&self, cpu: CpuId) -> usize {
        self.ctx
            .child_vps()
            .iter()
            .filter(|&&v| self.state(v) == VpState::Running(cpu))
            .count()
    }

    fn held(&self, cpu: CpuId) -> bool {
        self.ctx
            .parent_vps()
            .iter()
            .any(|&p| self.state(p) == VpState::Running(cpu))
    }
}

/// The hook's actions with `Demand` expanded, or the first broken rule.
pub(crate) fn check(ctx: &Ctx<'_>, acts: &[Act]) -> Result<Vec<Act>, String> {
    let mut o = Overlay {
        ctx,
        changed: Vec::new(),
    };
    let mut out = Vec::with_capacity(acts.len());
    for a in acts {
        match *a {
            Act::Grant(vp, cpu) => {
                if o.state(vp) != VpState::Ready {
                    return Err(format!(
                        "granted {cpu} to {vp}, which is {:?}, not ready (Fig 4.2)",
                        o.state(vp)
                    ));
                }
                if !o.held(cpu) {
                    return Err(format!(
                        "granted {cpu} to {vp} without holding {cpu} (a scheduler can only grant a processor it was granted)"
                    ));
                }
                if o.child_on(cpu) > 0 {
                    return Err(format!(
                        "granted {cpu} to {vp} while another child runs on it"
                    ));
                }
                o.set(vp, VpState::Running(cpu));
            }
            Act::Revoke(vp, _) => {
                if !matches!(o.state(vp), VpState::Running(_)) {
                    return Err(format!(
                        "revoked {vp}, which is {:?}, not running",
                        o.state(vp)
                    ));
                }
                o.set(vp, VpState::Ready);
            }
            Act::Request(vp) => {
                if o.state(vp) != VpState::Waiting {
                    return Err(format!(
                        "requested parent {vp}, which is {:?}, not waiting",
                        o.state(vp)
                    ));
                }
                o.set(vp, VpState::Ready);
            }
            Act::Release(vp) => {
                if o.state(vp) == VpState::Waiting {
                    return Err(format!("released parent {vp}, which is waiting (Fig 4.2)"));
                }
                o.set(vp, VpState::Waiting);
            }
            Act::Demand(want) => {
                demand(&mut o, want, &mut out);
                continue;
            }
            Act::Timer(_) | Act::Send(..) => {}
        }
        out.push(a.clone());
    }
    if ctx.notifications_waiting() == 0 {
        for &p in ctx.parent_vps() {
            if let VpState::Running(cpu) = o.state(p) {
                match o.child_on(cpu) {
                    1 => {}
                    0 => {
                        return Err(format!(
                            "holds {cpu} but granted it to no child and did not release it"
                        ))
                    }
                    n => return Err(format!("granted {cpu} to {n} children")),
                }
            }
        }
        for &c in ctx.child_vps() {
            if let VpState::Running(cpu) = o.state(c) {
                if !o.held(cpu) {
                    return Err(format!(
                        "lost {cpu} but did not revoke it from {c}, which still runs there"
                    ));
                }
            }
        }
    }
    Ok(out)
}

/// `Ctx::set_parent_demand` on the overlay: waiting parent VPs requested
/// in order, surplus ready ones released from the back.
fn demand(o: &mut Overlay<'_, '_>, want: usize, out: &mut Vec<Act>) {
    let parents = o.ctx.parent_vps();
    let mut active = parents
        .iter()
        .filter(|&&p| o.state(p) != VpState::Waiting)
        .count();
    for &p in parents {
        if active >= want {
            break;
        }
        if o.state(p) == VpState::Waiting {
            o.set(p, VpState::Ready);
            out.push(Act::Request(p));
            active += 1;
        }
    }
    for &p in parents.iter().rev() {
        if active <= want {
            break;
        }
        if o.state(p) == VpState::Ready {
            o.set(p, VpState::Waiting);
            out.push(Act::Release(p));
            active -= 1;
        }
    }
}
