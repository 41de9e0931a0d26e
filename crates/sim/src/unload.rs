//! What the simulator does when a contained policy fails: unload the
//! scheduler (`Hsi::unload`), keep going, and say in the report what
//! happened, when, and where the threads went.

use crate::report::UnloadReport;
use hsched_core::{Hsi, InstanceId, Instant};

/// The unloads of one run.
#[derive(Debug, Default)]
pub(crate) struct Unloads {
    /// One per failed scheduler, in the order they failed.
    pub reports: Vec<UnloadReport>,
    /// Failed schedulers that could not be unloaded: they stay, inert, and
    /// their later faults (the consequences) are not reported again.
    stuck: Vec<InstanceId>,
}

impl Unloads {
    /// Unloads every scheduler whose policy failed since the last call.
    /// Returns the schedulers destroyed, each with its name and the supply
    /// it had received, for the scheduler table.
    pub fn unload(&mut self, hsi: &mut Hsi, now: Instant) -> Vec<(InstanceId, String, u64)> {
        let mut gone = Vec::new();
        for fault in hsi.take_faults() {
            if self.stuck.contains(&fault.instance) {
                continue;
            }
            let policy = hsi
                .instance_policy(fault.instance)
                .map_or("", |p| p.policy_name())
                .to_string();
            // Supplies before the instances go; only destroyed ones are kept.
            let supplies: Vec<(InstanceId, String, u64)> = hsi
                .instances()
                .map(|id| {
                    let name = hsi.instance_name(id).to_string();
                    (id, name, hsi.instance_supply(id).as_nanos())
                })
                .collect();
            let mut report = UnloadReport {
                scheduler: fault.name.clone(),
                policy,
                at_ns: fault.at.0,
                what: fault.what.clone(),
                fallback: None,
                moved: Vec::new(),
                reset: Vec::new(),
                destroyed: Vec::new(),
                error: None,
            };
            match hsi.unload(now, fault.instance) {
                Ok(done) => {
                    let name = |t| hsi.thread_name(t).to_string();
                    report.moved = done.moved.iter().map(|&t| name(t)).collect();
                    report.reset = done
                        .reset
                        .iter()
                        .map(|(t, why)| format!("thread '{}' took its defaults: {why}", name(*t)))
                        .collect();
                    gone.extend(
                        supplies
                            .into_iter()
                            .filter(|(_, n, _)| done.destroyed.contains(n)),
                    );
                    report.destroyed = done.destroyed;
                    report.fallback = Some(done.fallback);
                }
                Err(e) => {
                    self.stuck.push(fault.instance);
                    report.error = Some(e.to_string());
                }
            }
            self.reports.push(report);
        }
        gone
    }

    /// Where a thread created later under `scheduler`, which an unload
    /// destroyed, goes instead: that unload's fallback (as for the threads
    /// it moved), with the report to list it in.
    pub fn redirect(&mut self, scheduler: &str) -> Option<(&mut UnloadReport, String)> {
        self.reports.iter_mut().find_map(|r| {
            let fallback = r.fallback.clone()?;
            r.destroyed
                .iter()
                .any(|d| d == scheduler)
                .then_some((r, fallback))
        })
    }
}
