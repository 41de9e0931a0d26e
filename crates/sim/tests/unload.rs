//! A scheduler whose contained policy fails is unloaded: the run goes on,
//! its threads go to the fallback, and the report says what happened.

use hsched_core::testing::{Fifo, Hoarder};
use hsched_core::{CpuId, Ctx, Duration, Params, Policy, PolicyError, RevokeReason, VpId};
use hsched_policies::PolicyInfo;
use hsched_sim::{Report, SimOptions};

/// FIFO until its `after`-th request, which it answers with a fault; then
/// inert, as a plug-in that trapped.
struct Faulty {
    inner: Fifo,
    after: u32,
    broken: bool,
}

impl Policy for Faulty {
    fn policy_name(&self) -> &'static str {
        "faulty"
    }
    fn unload_on_fault(&self) -> bool {
        true
    }
    fn register_vp(&mut self, c: &mut Ctx<'_>, v: VpId, p: &Params) -> Result<(), PolicyError> {
        if self.broken {
            return Ok(());
        }
        self.inner.register_vp(c, v, p)
    }
    fn unregister_vp(&mut self, c: &mut Ctx<'_>, v: VpId) {
        if !self.broken {
            self.inner.unregister_vp(c, v)
        }
    }
    fn request(&mut self, c: &mut Ctx<'_>, v: VpId) {
        if self.broken {
            return;
        }
        if self.after == 0 {
            self.broken = true;
            c.fault("trapped: out of fuel");
            return;
        }
        self.after -= 1;
        self.inner.request(c, v)
    }
    fn release(&mut self, c: &mut Ctx<'_>, v: VpId) {
        if !self.broken {
            self.inner.release(c, v)
        }
    }
    fn grant(&mut self, c: &mut Ctx<'_>, v: VpId, cpu: CpuId) {
        if !self.broken {
            self.inner.grant(c, v, cpu)
        }
    }
    fn revoke(&mut self, c: &mut Ctx<'_>, v: VpId, r: RevokeReason) {
        if !self.broken {
            self.inner.revoke(c, v, r)
        }
    }
}

/// Hoarder, contained: it keeps the processor it is granted.
struct Greedy(Hoarder);

impl Policy for Greedy {
    fn policy_name(&self) -> &'static str {
        "greedy"
    }
    fn unload_on_fault(&self) -> bool {
        true
    }
    fn register_vp(&mut self, c: &mut Ctx<'_>, v: VpId, p: &Params) -> Result<(), PolicyError> {
        self.0.register_vp(c, v, p)
    }
    fn unregister_vp(&mut self, c: &mut Ctx<'_>, v: VpId) {
        self.0.unregister_vp(c, v)
    }
    fn request(&mut self, c: &mut Ctx<'_>, v: VpId) {
        self.0.request(c, v)
    }
    fn release(&mut self, c: &mut Ctx<'_>, v: VpId) {
        self.0.release(c, v)
    }
    fn grant(&mut self, c: &mut Ctx<'_>, v: VpId, cpu: CpuId) {
        self.0.grant(c, v, cpu)
    }
    fn revoke(&mut self, c: &mut Ctx<'_>, v: VpId, r: RevokeReason) {
        self.0.revoke(c, v, r)
    }
}

fn faulty(p: &Params) -> Result<Box<dyn Policy>, PolicyError> {
    let after = p.u64("after")?.unwrap_or(0) as u32;
    Ok(Box::new(Faulty {
        inner: Fifo::default(),
        after,
        broken: false,
    }))
}

fn greedy(_: &Params) -> Result<Box<dyn Policy>, PolicyError> {
    Ok(Box::new(Greedy(Hoarder)))
}

fn policies() -> Vec<PolicyInfo> {
    const AFTER: &[hsched_core::ParamSpec] = &[hsched_core::ParamSpec {
        key: "after",
        kind: "integer",
        default: "0",
        doc: "requests served before the fault",
    }];
    // A priority the children carry to fp when they are moved there.
    const PRIORITY: &[hsched_core::ParamSpec] = &[hsched_core::ParamSpec {
        key: "priority",
        kind: "integer",
        default: "0",
        doc: "kept for the fallback",
    }];
    let mut v = hsched_policies::registry().to_vec();
    v.push(PolicyInfo {
        instance_params: AFTER,
        child_params: PRIORITY,
        ..PolicyInfo::new("faulty", faulty)
    });
    v.push(PolicyInfo {
        child_params: PRIORITY,
        ..PolicyInfo::new("greedy", greedy)
    });
    v
}

fn run(text: &str) -> Report {
    let h = hsched_config::parse_str_with_policies(text, "unload.toml", &policies())
        .unwrap_or_else(|e| panic!("{e}"));
    let opts = SimOptions {
        duration: Some(Duration::from_secs(1)),
        seed: Some(1),
        check_protocol: true,
        ..Default::default()
    };
    hsched_sim::run_with_policies(&h, opts, &policies()).unwrap_or_else(|e| panic!("{e}"))
}

/// `policy` under fp at priority 1 beside a low-priority thread at the
/// root, the default scheduler; threads a and b under `policy`, a's wake
/// at 100 ms the request that fails.
fn file(policy: &str) -> String {
    format!(
        r#"
default = "root"
[machine]
cpus = 1
[[scheduler]]
name = "root"
policy = "fp"
[[scheduler]]
name = "plug"
parent = "root"
params = {{ priority = 1 }}
{policy}
[[thread]]
name = "r"
scheduler = "root"
params = {{ priority = 0 }}
workload = {{ kind = "cpu-bound" }}
[[thread]]
name = "b"
scheduler = "plug"
params = {{ priority = 2 }}
workload = {{ kind = "periodic", period = "10ms", exec = "1ms" }}
[[thread]]
name = "a"
scheduler = "plug"
params = {{ priority = 3 }}
workload = {{ kind = "periodic", period = "50ms", exec = "2ms", offset = "100ms" }}
"#
    )
}

#[test]
fn a_failing_scheduler_is_unloaded_and_its_threads_run_under_the_default() {
    // b's 10 jobs in the first 100 ms are its first requests; a's first
    // wake, the eleventh request, fails.
    let r = run(&file("policy = \"faulty\"\nafter = 10"));
    assert_eq!(r.unloaded.len(), 1, "{:?}", r.unloaded);
    let u = &r.unloaded[0];
    assert_eq!(u.scheduler, "plug");
    assert_eq!(u.policy, "faulty");
    assert_eq!(u.at_ns, 100_000_000);
    assert_eq!(u.what, "trapped: out of fuel");
    assert_eq!(u.fallback.as_deref(), Some("root"));
    assert_eq!(u.moved, vec!["b".to_string(), "a".to_string()]);
    assert_eq!(u.destroyed, vec!["plug".to_string()]);
    assert!(u.error.is_none());
    // The run went on to its end, and under fp the moved threads keep
    // their priorities above r: every job of a and b after the fault runs.
    assert_eq!(r.duration_ns, 1_000_000_000);
    let (a, b) = (r.thread("a").unwrap(), r.thread("b").unwrap());
    assert_eq!(a.jobs, 18, "a: 50 ms jobs from 100 ms");
    assert_eq!(b.jobs, 100);
    assert_eq!(a.deadline_misses + b.deadline_misses, 0);
    let plug = r.schedulers.iter().find(|s| s.name == "plug").unwrap();
    assert!(!plug.live);
    let text = r.to_table();
    assert!(
        text.contains(
            "unloaded: 0.100s scheduler 'plug' (faulty) failed: trapped: out of fuel; unloaded (plug), 2 thread(s) moved to 'root'"
        ),
        "{text}"
    );
    let json = r.to_json();
    assert!(json.contains("\"unloaded\""), "{json}");
    assert!(
        json.contains("\"what\": \"trapped: out of fuel\""),
        "{json}"
    );
}

#[test]
fn a_protocol_violation_unloads_instead_of_stopping_the_run() {
    let r = run(&file("policy = \"greedy\""));
    assert_eq!(r.unloaded.len(), 1, "{:?}", r.unloaded);
    let u = &r.unloaded[0];
    assert_eq!(u.at_ns, 0);
    assert!(
        u.what.contains("protocol violation by instance 'plug'"),
        "{}",
        u.what
    );
    assert_eq!(r.duration_ns, 1_000_000_000);
    assert_eq!(r.thread("b").unwrap().jobs, 100);
}

#[test]
fn a_run_without_faults_has_no_unloaded_key() {
    let r = run(&file("policy = \"faulty\"\nafter = 1000000"));
    assert!(r.unloaded.is_empty());
    assert!(!r.to_json().contains("unloaded"));
    assert!(!r.to_table().contains("unloaded"));
}
