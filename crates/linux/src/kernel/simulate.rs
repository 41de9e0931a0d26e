//! What `hsched run --compare` simulates for a kernel-backed run: the
//! file's hierarchy with each reservation scheduler replaced by the model
//! of what the kernel enforces in its place, so that the simulated side
//! predicts the kernel's schedule rather than the user backend's.
//!
//! A `rez` becomes the simulator's `dl` policy (docs/policies/dl.md), and
//! a `dl` of the file takes the kernel's values:
//! global EDF over constant-bandwidth servers on every processor of its
//! root (a root domain of its own where the run partitions the machine
//! with exclusive cpusets, [`crate::cpuset`]), with the wake-up rule,
//! throttling and replenishment of Linux's deadline class, runtime
//! checked at the tick when the kernel has no `HRTICK_DL`, and the
//! kernel's admission limit per CPU. The children
//! keep their `amount` and `period`, which are the servers' runtime and
//! period. Everything else is simulated as written; the notes say what
//! that leaves out.

use super::compile::KernelModel;
use hsched_config::Hierarchy;
use hsched_core::{ParamValue, Params};

/// The hierarchy to simulate and what its model leaves out.
#[derive(Clone, Debug)]
pub struct Simulated {
    /// The file's hierarchy, every `rez` as `dl` and every `dl` with the
    /// kernel's values.
    pub hierarchy: Hierarchy,
    /// One line each on what differs from the kernel's enforcement.
    pub notes: Vec<String>,
}

/// `h` as the kernel backend enforces it, under `model`.
pub fn as_enforced(h: &Hierarchy, model: &KernelModel) -> Simulated {
    let mut out = h.clone();
    let cap = (model.kernel_limit() / model.root_domain.max(1) as f64).clamp(1e-6, 1.0);
    let mut servers = 0;
    for i in 0..out.schedulers.len() {
        // A `dl` of the file is enforced with the kernel's values too.
        if !matches!(out.schedulers[i].policy.as_str(), "rez" | "dl") {
            continue;
        }
        servers += 1;
        let processors = root_cpus(h, &h.schedulers[i].name);
        let s = &mut out.schedulers[i];
        s.policy = "dl".into();
        s.params = Params::new()
            .with("processors", ParamValue::Int(processors as i64))
            .with(
                "tick",
                ParamValue::Str(format!("{}ns", model.tick.as_nanos())),
            )
            .with("cap", ParamValue::Float(cap));
    }
    let mut notes = Vec::new();
    if servers > 0 {
        notes.push(format!(
            "simulated as the kernel enforces it: each `rez` and `dl` as `dl` with the kernel's values, EDF over deadline servers on its root's CPUs (global where the root owns several), runtime checked every {} tick, admission {:.1}% per CPU ({})",
            model.tick, cap * 100.0, model.source
        ));
        if !model.cpusets {
            notes.push(
                "the kernel ran the servers on every CPU of its root domain (no cpuset controller to partition it), the simulation on their root's CPUs".into(),
            );
        }
        notes.push(
            "not modelled: GRUB reclaiming (a join's reclaiming server runs as the file's join), the fair servers' reserve, and push/pull migration delays".into(),
        );
    }
    if h.schedulers.iter().any(|s| s.policy == "realrate") {
        notes.push(
            "`realrate` is simulated by its policy, whose dispatcher runs its budgets rate-monotonically where the kernel runs its servers by EDF; both size them with the same controller, fed in the simulation by the progress the simulated workloads report".into(),
        );
    }
    if h.schedulers
        .iter()
        .any(|s| matches!(s.policy.as_str(), "ts" | "linux24" | "ps" | "limit"))
    {
        notes.push(
            "the fair class (CFS/EEVDF cgroups and nice values) is simulated by the file's own `ts`, `ps` and `limit`, which divide time by other rules".into(),
        );
    }
    Simulated {
        hierarchy: out,
        notes,
    }
}

/// The processors of the root above scheduler `name` (through first
/// parents): its `cpus`, or the whole machine.
fn root_cpus(h: &Hierarchy, name: &str) -> usize {
    let mut at = name;
    for _ in 0..=h.schedulers.len() {
        let Some(s) = h.schedulers.iter().find(|s| s.name == at) else {
            break;
        };
        match s.parents.first() {
            Some(p) => at = p.name.as_str(),
            None if s.cpus.is_empty() => break,
            None => return s.cpus.len(),
        }
    }
    h.machine.cpus.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = r#"
[machine]
cpus = 2
[[scheduler]]
name = "fp"
policy = "fp"
[[scheduler]]
name = "res"
policy = "rez"
parent = "fp"
params = { priority = 2 }
[[scheduler]]
name = "ts"
policy = "ts"
parent = "fp"
params = { priority = 1 }
[[thread]]
name = "rt"
scheduler = "res"
params = { amount = "2ms", period = "10ms" }
workload = { kind = "cpu-bound" }
[[thread]]
name = "bg"
scheduler = "ts"
count = 3
workload = { kind = "cpu-bound" }
"#;

    fn parse(text: &str) -> Hierarchy {
        hsched_config::parse_str_with_policies(text, "k.toml", hsched_policies::registry()).unwrap()
    }

    #[test]
    fn a_reservation_scheduler_is_simulated_as_the_deadline_class() {
        let h = parse(FILE);
        let s = as_enforced(&h, &KernelModel::defaults(2, 250));
        let res = &s.hierarchy.schedulers[1];
        assert_eq!(res.policy, "dl");
        assert_eq!(res.params.u64("processors"), Ok(Some(2)));
        assert_eq!(
            res.params.duration("tick").unwrap(),
            Some(hsched_core::Duration::from_millis(4))
        );
        // 95 % less the 5 % fair server.
        let cap = res.params.f64("cap").unwrap().unwrap();
        assert!((cap - 0.90).abs() < 1e-9, "{cap}");
        // Everything else as written.
        assert_eq!(s.hierarchy.schedulers[0], h.schedulers[0]);
        assert_eq!(s.hierarchy.schedulers[2], h.schedulers[2]);
        assert_eq!(s.hierarchy.threads, h.threads);
        assert_eq!(s.notes.len(), 3, "{:?}", s.notes);
    }

    /// The simulated server gets its budget less what the tick lets it
    /// overrun into the next period, never more than its share in the long
    /// run, and the fair threads the rest of both CPUs.
    #[test]
    fn the_simulated_kernel_run_gives_the_server_its_share() {
        let h = parse(FILE);
        let s = as_enforced(&h, &KernelModel::defaults(2, 250));
        let opts = hsched_sim::SimOptions {
            duration: Some(hsched_core::Duration::from_secs(2)),
            ..Default::default()
        };
        let r =
            hsched_sim::run_with_policies(&s.hierarchy, opts, hsched_policies::registry()).unwrap();
        let rt = r.threads.iter().find(|t| t.name == "rt").unwrap();
        let share = rt.cpu_ns as f64 / 2e9;
        assert!((share - 0.2).abs() < 0.01, "rt got {share}");
        let bg: u64 = r
            .threads
            .iter()
            .filter(|t| t.name.starts_with("bg"))
            .map(|t| t.cpu_ns)
            .sum();
        assert!(bg as f64 / 4e9 > 0.89, "bg got {bg}");
    }
}
