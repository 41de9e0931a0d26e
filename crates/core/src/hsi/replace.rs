//! Replacing the policy of a running scheduler: a new instance of the new
//! policy takes the old one's place under the same parents, every thread
//! moves across with its parameters, and the old instance is destroyed,
//! all in one input. This is Vassal's unload of one scheduler and load of
//! another (Candea and Jones 1998, §4) without a moment in which the
//! threads have no scheduler, and it is all or nothing: when the new
//! policy cannot take a thread even with its own defaults, every thread
//! goes back and nothing has changed.

use super::Hsi;
use crate::fault::{ReplaceError, Replaced};
use crate::ids::{InstanceId, Node, ThreadId};
use crate::params::Params;
use crate::policy::Policy;
use crate::time::Instant;
use crate::violation::{HsiError, OpError, Violation};
use crate::{ParentLink, ParentRef};

impl Hsi {
    /// Replaces the policy of instance `id` by `policy`, keeping its name,
    /// its parents (with the parameters it registered with them), its
    /// place as the default scheduler, and its threads. A thread the new
    /// policy refuses with its parameters is taken with none (the
    /// policy's defaults) and listed in [`Replaced::reset`].
    ///
    /// # Errors
    /// `id` is not live, is a root (it holds processors directly), has
    /// child schedulers, its parents refused the new policy, or the new
    /// policy refused a thread even without parameters; the hierarchy is
    /// then as it was.
    pub fn replace(
        &mut self,
        now: Instant,
        id: InstanceId,
        policy: Box<dyn Policy>,
    ) -> Result<Replaced, ReplaceError> {
        self.advance(now);
        self.live_instance(id).map_err(|_| ReplaceError::Dead(id))?;
        let name = self.st.insts[id.index()].name.clone();
        let children: Vec<String> = self.st.insts[id.index()]
            .children
            .iter()
            .filter_map(|vp| match self.st.vps[vp.index()].child {
                Node::Instance(c) => Some(self.st.insts[c.index()].name.clone()),
                _ => None,
            })
            .collect();
        if !children.is_empty() {
            return Err(ReplaceError::Schedulers { name, children });
        }
        // One link per parent, in registration order, with the parameters
        // of the first VP registered there (an instance registers the same
        // parameters on each VP of one parent).
        let mut links: Vec<ParentLink> = Vec::new();
        let mut seen: Vec<InstanceId> = Vec::new();
        for vp in &self.st.insts[id.index()].parents {
            let v = &self.st.vps[vp.index()];
            let Node::Instance(p) = v.parent else {
                return Err(ReplaceError::Root { name });
            };
            if !seen.contains(&p) {
                seen.push(p);
                links.push(ParentLink {
                    parent: ParentRef::Instance(p),
                    params: v.params.clone(),
                });
            }
        }
        // The new instance's name while both live; should it be taken,
        // the creation fails and nothing has changed.
        let staging = format!("{name} (replacing)");
        let new = self
            .create_instance(now, &staging, policy, links)
            .map_err(|e| ReplaceError::Create(e.to_string()))?;
        let mut done = Replaced::default();
        let mut violations = Vec::new();
        let threads: Vec<ThreadId> = self.threads_of(id).collect();
        let mut back: Vec<(ThreadId, Params)> = Vec::new();
        for t in threads {
            let before = self.st.vps[self.st.threads[t.index()].vp.index()]
                .params
                .clone();
            match self.move_across(now, t, new, &mut violations) {
                Ok(reset) => {
                    done.moved.push(t);
                    if let Some(why) = reset {
                        done.reset.push((t, why));
                    }
                    back.push((t, before));
                }
                Err(error) => {
                    let thread = self.st.threads[t.index()].name.clone();
                    for (t, params) in back.into_iter().rev() {
                        if let Err(HsiError::Protocol(v)) = self.move_thread(now, t, id, params) {
                            violations.extend(v);
                        }
                    }
                    if let Err(HsiError::Protocol(v)) = self.destroy_instance(now, new) {
                        violations.extend(v);
                    }
                    self.st.violations.extend(violations);
                    return Err(ReplaceError::Refused { thread, error });
                }
            }
        }
        if self.default == Some(id) {
            self.default = Some(new);
        }
        if let Err(HsiError::Protocol(v)) = self.destroy_instance(now, id) {
            violations.extend(v);
        }
        self.names.remove(&staging);
        self.names.insert(name.clone(), new);
        self.st.insts[new.index()].name = name;
        self.st.faults.retain(|f| f.instance != id);
        self.st.violations.extend(violations);
        Ok(done)
    }

    /// Moves thread `t` to `to` with its parameters, or with none when
    /// `to` refuses those; returns that refusal, or the last one when
    /// `to` refuses the thread either way.
    fn move_across(
        &mut self,
        now: Instant,
        t: ThreadId,
        to: InstanceId,
        violations: &mut Vec<Violation>,
    ) -> Result<Option<String>, String> {
        let params = self.carried_params(t);
        let refusal = match self.move_thread(now, t, to, params) {
            Ok(()) => return Ok(None),
            Err(HsiError::Protocol(v)) => {
                violations.extend(v);
                return Ok(None);
            }
            Err(HsiError::Op(OpError::Refused { error, .. })) => error.to_string(),
            Err(HsiError::Op(e)) => e.to_string(),
        };
        match self.move_thread(now, t, to, Params::new()) {
            Ok(()) => Ok(Some(refusal)),
            Err(HsiError::Protocol(v)) => {
                violations.extend(v);
                Ok(Some(refusal))
            }
            Err(HsiError::Op(OpError::Refused { error, .. })) => Err(error.to_string()),
            Err(HsiError::Op(e)) => Err(e.to_string()),
        }
    }
}
