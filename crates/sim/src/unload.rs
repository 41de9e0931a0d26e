//! What the simulator does when a contained policy fails: unload the
//! scheduler (`Hsi::unload_faulted`), keep going, and say in the report
//! what happened, when, and where the threads went.

use crate::report::UnloadReport;
use hsched_core::{Hsi, InstanceId, Instant};

/// The unloads of one run.
#[derive(Debug, Default)]
pub(crate) struct Unloads {
    /// One per failed scheduler, in the order they failed.
    pub reports: Vec<UnloadReport>,
}

impl Unloads {
    /// Unloads every scheduler whose policy failed since the last call.
    /// Returns the schedulers destroyed, each with its name and the supply
    /// it had received, for the scheduler table.
    pub fn unload(&mut self, hsi: &mut Hsi, now: Instant) -> Vec<(InstanceId, String, u64)> {
        // Supplies before the instances go; only destroyed ones are kept.
        let supplies: Vec<(InstanceId, String, u64)> = hsi
            .instances()
            .map(|id| {
                let name = hsi.instance_name(id).to_string();
                (id, name, hsi.instance_supply(id).as_nanos())
            })
            .collect();
        let mut gone = Vec::new();
        for u in hsi.unload_faulted(now) {
            let report = UnloadReport::new(hsi, &u);
            gone.extend(
                supplies
                    .iter()
                    .filter(|(_, n, _)| report.destroyed.contains(n))
                    .cloned(),
            );
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
