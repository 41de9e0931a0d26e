//! Unloading a failed instance: its threads go to the default scheduler,
//! it and the instances below it are destroyed (Vassal's unload, with the
//! fallback of sched_ext). See [`crate::fault`].

use super::Hsi;
use crate::fault::{Fault, UnloadError, Unloaded, Unloading};
use crate::ids::{InstanceId, Node, ThreadId};
use crate::params::Params;
use crate::time::Instant;
use crate::violation::{HsiError, OpError, Violation};

/// Most rounds of destroying childless instances: each round destroys at
/// least one, so this bounds the loop even if the hierarchy were corrupt.
const MAX_DESTROY_ROUNDS: usize = 1 << 20;

impl Hsi {
    /// Whether a contained policy failed since the last [`Hsi::take_faults`].
    #[inline]
    pub fn faults_pending(&self) -> bool {
        !self.st.faults.is_empty()
    }

    /// The faults since the last call, the first of each live instance
    /// only (what follows a fault is its consequence).
    pub fn take_faults(&mut self) -> Vec<Fault> {
        let mut out: Vec<Fault> = Vec::new();
        for f in std::mem::take(&mut self.st.faults) {
            let live = self.st.insts[f.instance.index()].live;
            if live && !out.iter().any(|o| o.instance == f.instance) {
                out.push(f);
            }
        }
        out
    }

    /// Unloads every instance whose policy failed since the last call
    /// (the first fault of each), as the simulator and the live daemon do
    /// after each input. An instance that could not be unloaded stays,
    /// inert, and its later faults are not reported again.
    pub fn unload_faulted(&mut self, now: Instant) -> Vec<Unloading> {
        let mut out = Vec::new();
        for fault in self.take_faults() {
            if self.stuck.contains(&fault.instance) {
                continue;
            }
            let policy = self
                .instance_policy(fault.instance)
                .map_or("", |p| p.policy_name())
                .to_string();
            let result = self.unload(now, fault.instance);
            if result.is_err() {
                self.stuck.push(fault.instance);
            }
            out.push(Unloading {
                fault,
                policy,
                result,
            });
        }
        out
    }

    /// Unloads instance `id`: moves every thread of `id` and of the
    /// instances below it to the default scheduler (or, when there is none
    /// outside them, to `id`'s first parent instance), keeping each thread's
    /// parameters where the default takes them (its defaults otherwise),
    /// then destroys those instances, children first. Faults of the
    /// destroyed instances are forgotten.
    ///
    /// # Errors
    /// `id` is not live, neither a default scheduler nor a parent instance
    /// lies outside `id` and the instances below it (a root with no other
    /// default), or the fallback refused a thread even without parameters.
    pub fn unload(&mut self, now: Instant, id: InstanceId) -> Result<Unloaded, UnloadError> {
        self.advance(now);
        self.live_instance(id).map_err(|_| UnloadError::Dead(id))?;
        let below = self.instances_below(id);
        let name = self.st.insts[id.index()].name.clone();
        let parent = self.st.insts[id.index()].parents.iter().find_map(|vp| {
            match self.st.vps[vp.index()].parent {
                Node::Instance(p) if !below.contains(&p) => Some(p),
                _ => None,
            }
        });
        let fallback = self
            .default
            .filter(|d| !below.contains(d))
            .or(parent)
            .ok_or(UnloadError::NoFallback { name })?;
        let mut done = Unloaded {
            fallback: self.st.insts[fallback.index()].name.clone(),
            ..Unloaded::default()
        };
        let mut violations = Vec::new();
        for &i in &below {
            let threads: Vec<ThreadId> = self.threads_of(i).collect();
            for t in threads {
                self.move_out(now, t, fallback, &mut done, &mut violations)?;
            }
        }
        for _ in 0..MAX_DESTROY_ROUNDS {
            let Some(&leaf) = below.iter().rev().find(|&&i| {
                let s = &self.st.insts[i.index()];
                s.live && s.children.is_empty()
            }) else {
                break;
            };
            done.destroyed
                .push(self.st.insts[leaf.index()].name.clone());
            if let Err(HsiError::Protocol(v)) = self.destroy_instance(now, leaf) {
                violations.extend(v);
            }
        }
        self.st.faults.retain(|f| !below.contains(&f.instance));
        // Violations by instances that stay are theirs to answer for: they
        // come out of the next input as usual.
        self.st.violations.extend(violations);
        Ok(done)
    }

    /// `id` and every instance below it, `id` first, each once.
    fn instances_below(&self, id: InstanceId) -> Vec<InstanceId> {
        let mut below = vec![id];
        let mut k = 0;
        while k < below.len() {
            for &vp in &self.st.insts[below[k].index()].children {
                if let Node::Instance(c) = self.st.vps[vp.index()].child {
                    if !below.contains(&c) {
                        below.push(c);
                    }
                }
            }
            k += 1;
        }
        below
    }

    /// Moves one thread of an instance being unloaded to `fallback`.
    fn move_out(
        &mut self,
        now: Instant,
        t: ThreadId,
        fallback: InstanceId,
        done: &mut Unloaded,
        violations: &mut Vec<Violation>,
    ) -> Result<(), UnloadError> {
        let params = self.carried_params(t);
        let refusal = match self.move_thread(now, t, fallback, params) {
            Ok(()) => None,
            Err(HsiError::Protocol(v)) => {
                violations.extend(v);
                None
            }
            Err(HsiError::Op(OpError::Refused { error, .. })) => Some(error.to_string()),
            Err(HsiError::Op(e)) => Some(e.to_string()),
        };
        let Some(refusal) = refusal else {
            done.moved.push(t);
            return Ok(());
        };
        match self.move_thread(now, t, fallback, Params::new()) {
            Ok(()) => {}
            Err(HsiError::Protocol(v)) => violations.extend(v),
            Err(HsiError::Op(e)) => {
                return Err(UnloadError::Refused {
                    thread: self.st.threads[t.index()].name.clone(),
                    error: e.to_string(),
                })
            }
        }
        done.moved.push(t);
        done.reset.push((t, refusal));
        Ok(())
    }

    /// Turns the violations of contained instances
    /// ([`crate::Policy::unload_on_fault`]) into faults; the others stay.
    #[cold]
    #[inline(never)]
    pub(super) fn contain_violations(&mut self) {
        let contained: Vec<(InstanceId, String)> = self
            .policies
            .iter()
            .enumerate()
            .filter(|(i, p)| {
                self.st.insts[*i].live && p.as_deref().is_some_and(|p| p.unload_on_fault())
            })
            .map(|(i, _)| {
                let id = InstanceId(i as u32);
                (id, self.st.node_name(Node::Instance(id)))
            })
            .collect();
        if contained.is_empty() {
            return;
        }
        let at = self.st.now;
        let mut kept = Vec::new();
        for v in std::mem::take(&mut self.st.violations) {
            match contained.iter().find(|(_, n)| *n == v.culprit) {
                Some(&(instance, _)) => self.st.faults.push(Fault {
                    instance,
                    name: self.st.insts[instance.index()].name.clone(),
                    at,
                    what: v.to_string(),
                }),
                None => kept.push(v),
            }
        }
        self.st.violations = kept;
    }
}
