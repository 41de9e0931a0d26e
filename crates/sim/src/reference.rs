//! Yardstick policies: schedulers no one deploys, which experiments run
//! beside the real ones to show what the workload itself allows.
//!
//! `edf-true-periods` is uniprocessor earliest deadline first told every
//! child's true period (its `period` parameter): a child waking at `t` gets
//! deadline `t + period`, children without one an hour. Preemptive, no
//! budgets. It is what BEST (Banachowski 2002) would do with perfect period
//! detection, so its misses are those the workload forces (the "EDF"
//! reference column of docs/best.md).
//!
//! These policies are not in `hsched_policies::registry()`: hierarchy
//! files name them only when parsed against [`policies`] and run with
//! [`crate::run_with_policies`] (from Python, `reference_policies=True`).

use hsched_core::{
    CpuId, Ctx, Duration, Instant, ParamSpec, Params, Policy, PolicyError, RevokeReason, VpId,
};
use hsched_policies::PolicyInfo;

/// The name hierarchy files give the true-period EDF reference.
pub const EDF_TRUE_PERIODS: &str = "edf-true-periods";

/// One child of [`TruePeriodEdf`].
struct Kid {
    vp: VpId,
    period: Duration,
    deadline: Instant,
    ready: bool,
}

/// Uniprocessor EDF with each child's deadline one true period after it
/// wakes (module docs).
#[derive(Default)]
pub struct TruePeriodEdf {
    kids: Vec<Kid>,
    running: Option<VpId>,
    cpu: Option<CpuId>,
}

impl TruePeriodEdf {
    fn deadline(&self, vp: VpId) -> Instant {
        self.kids
            .iter()
            .find(|k| k.vp == vp)
            .map_or(Instant::NEVER, |k| k.deadline)
    }

    fn earliest_waiting(&self) -> Option<VpId> {
        self.kids
            .iter()
            .filter(|k| k.ready && Some(k.vp) != self.running)
            .min_by_key(|k| k.deadline)
            .map(|k| k.vp)
    }

    fn settle(&mut self, ctx: &mut Ctx<'_>) {
        let Some(cpu) = self.cpu else {
            if self.kids.iter().any(|k| k.ready) {
                ctx.set_parent_demand(1);
            }
            return;
        };
        match (self.running, self.earliest_waiting()) {
            (None, Some(b)) => {
                ctx.grant(b, cpu);
                self.running = Some(b);
            }
            (Some(r), Some(b)) if self.deadline(b) < self.deadline(r) => {
                ctx.revoke(r, RevokeReason::Preempted);
                ctx.grant(b, cpu);
                self.running = Some(b);
            }
            (None, None) => {
                ctx.release(ctx.parent_vps()[0]);
                self.cpu = None;
            }
            _ => {}
        }
    }
}

impl Policy for TruePeriodEdf {
    fn policy_name(&self) -> &'static str {
        EDF_TRUE_PERIODS
    }
    fn parent_vps(&self, _: usize) -> usize {
        1
    }
    fn register_vp(&mut self, _: &mut Ctx<'_>, vp: VpId, p: &Params) -> Result<(), PolicyError> {
        let period = p.duration("period")?.unwrap_or(Duration::from_secs(3600));
        self.kids.push(Kid {
            vp,
            period,
            deadline: Instant::ZERO,
            ready: false,
        });
        Ok(())
    }
    fn unregister_vp(&mut self, _: &mut Ctx<'_>, vp: VpId) {
        self.kids.retain(|k| k.vp != vp);
    }
    fn request(&mut self, ctx: &mut Ctx<'_>, vp: VpId) {
        let now = ctx.now();
        if let Some(k) = self.kids.iter_mut().find(|k| k.vp == vp) {
            k.ready = true;
            k.deadline = now + k.period;
        }
        self.settle(ctx);
    }
    fn release(&mut self, ctx: &mut Ctx<'_>, vp: VpId) {
        if let Some(k) = self.kids.iter_mut().find(|k| k.vp == vp) {
            k.ready = false;
        }
        if self.running == Some(vp) {
            self.running = None;
        }
        self.settle(ctx);
    }
    fn grant(&mut self, ctx: &mut Ctx<'_>, _: VpId, cpu: CpuId) {
        self.cpu = Some(cpu);
        self.settle(ctx);
    }
    fn revoke(&mut self, ctx: &mut Ctx<'_>, _: VpId, reason: RevokeReason) {
        if let Some(r) = self.running.take() {
            ctx.revoke(r, reason);
        }
        self.cpu = None;
        self.settle(ctx);
    }
}

const PERIOD: &[ParamSpec] = &[ParamSpec {
    key: "period",
    kind: "duration",
    default: "1h",
    doc: "the child's true period: its deadline is one period after it wakes",
}];

fn build_edf(_: &Params) -> Result<Box<dyn Policy>, PolicyError> {
    Ok(Box::<TruePeriodEdf>::default())
}

/// The registry's policies followed by the reference policies.
pub fn policies() -> Vec<PolicyInfo> {
    let mut all = hsched_policies::registry().to_vec();
    all.push(PolicyInfo {
        summary: "reference: EDF told each child's true period (not for deployment)",
        child_params: PERIOD,
        ..PolicyInfo::new(EDF_TRUE_PERIODS, build_edf)
    });
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reference_meets_a_feasible_set_that_needs_the_true_deadlines() {
        // 60% + 35% beside a hog: EDF with the true periods meets both;
        // the hog, with an hour's deadline, takes only the rest.
        let text = r#"
[[scheduler]]
name = "root"
policy = "edf-true-periods"
[[thread]]
name = "a"
scheduler = "root"
params = { period = "10ms" }
workload = { kind = "periodic", period = "10ms", exec = "6ms" }
[[thread]]
name = "b"
scheduler = "root"
params = { period = "20ms" }
workload = { kind = "periodic", period = "20ms", exec = "7ms" }
[[thread]]
name = "hog"
scheduler = "root"
workload = { kind = "cpu-bound" }
"#;
        let all = policies();
        let h = hsched_config::parse_str_with_policies(text, "edf.toml", &all).unwrap();
        let opts = crate::SimOptions {
            duration: Some(Duration::from_secs(2)),
            check_protocol: true,
            ..Default::default()
        };
        let r = crate::run_with_policies(&h, opts, &all).unwrap();
        assert_eq!(r.thread("a").unwrap().deadline_misses, 0);
        assert_eq!(r.thread("b").unwrap().deadline_misses, 0);
        let hog = r.thread("hog").unwrap().share;
        assert!((hog - 0.05).abs() < 0.01, "{hog}");
        // The registry alone does not know it.
        assert!(hsched_config::parse_str(text, "edf.toml").is_err());
    }
}
