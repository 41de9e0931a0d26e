//! Helpers shared by the simulator's integration tests.
#![allow(dead_code)]

use hsched_config::Hierarchy;
use hsched_core::testing::{Fifo, Hoarder};
use hsched_core::{Duration, Params, Policy, PolicyError};
use hsched_policies::PolicyInfo;
use hsched_sim::{Report, SimOptions};
use std::io::{self, Write};
use std::sync::{Arc, Mutex};

fn fifo(_: &Params) -> Result<Box<dyn Policy>, PolicyError> {
    Ok(Box::new(Fifo::default()))
}

fn hoarder(_: &Params) -> Result<Box<dyn Policy>, PolicyError> {
    Ok(Box::new(Hoarder))
}

/// The registry plus the core's test policies `fifo` (first come first
/// served, non-preemptive) and `hoarder` (breaks the protocol).
pub fn policies() -> Vec<PolicyInfo> {
    let mut v = hsched_policies::registry().to_vec();
    for (name, build) in [("fifo", fifo as fn(&Params) -> _), ("hoarder", hoarder)] {
        v.push(PolicyInfo {
            summary: "test policy",
            ..PolicyInfo::new(name, build)
        });
    }
    v
}

/// Parses a hierarchy file given as text.
pub fn parse(text: &str) -> Hierarchy {
    hsched_config::parse_str_with_policies(text, "test.toml", &policies())
        .unwrap_or_else(|e| panic!("{e}"))
}

/// Simulates `text` for `secs` seconds with seed 1.
pub fn sim(text: &str, secs: f64) -> Report {
    sim_with(text, opts(secs))
}

/// Options for a run of `secs` seconds, seed 1.
pub fn opts(secs: f64) -> SimOptions {
    SimOptions {
        duration: Some(Duration((secs * 1e9) as u64)),
        seed: Some(1),
        check_protocol: true,
        ..Default::default()
    }
}

/// Simulates `text` with `opts`, panicking with the error's text.
pub fn sim_with(text: &str, opts: SimOptions) -> Report {
    let h = parse(text);
    hsched_sim::run_with_policies(&h, opts, &policies()).unwrap_or_else(|e| panic!("{e}"))
}

/// A `Write` that keeps what is written, shareable with the test.
#[derive(Clone, Default)]
pub struct Buf(pub Arc<Mutex<Vec<u8>>>);

impl Buf {
    /// What was written.
    pub fn bytes(&self) -> Vec<u8> {
        self.0.lock().unwrap().clone()
    }
    /// What was written, as text.
    pub fn text(&self) -> String {
        String::from_utf8(self.bytes()).unwrap()
    }
}

impl Write for Buf {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// 1 ms in nanoseconds.
pub const MS: u64 = 1_000_000;
/// 1 s in nanoseconds.
pub const S: u64 = 1_000_000_000;

/// Thread `a` holds 60 % of Rez; at 255 ms it asks for 20 % instead and
/// TS thread `b` asks for 60 %. The file checker counts `a` at its new
/// 20 % and accepts the file, but Rez counts it at 60 % until the change
/// applies at its next period start (260 ms), so the run refuses `b`
/// (60 % + 60 % over the 85 % cap), whatever the seed.
pub const OVER_ADMISSION: &str = r#"
[machine]
cpus = 1
[[scheduler]]
name = "fp"
policy = "fp"
[[scheduler]]
name = "rez"
policy = "rez"
parent = "fp"
params = { priority = 1 }
[[scheduler]]
name = "ts"
policy = "ts"
parent = "fp"
[[thread]]
name = "a"
scheduler = "rez"
params = { amount = "6ms", period = "10ms" }
workload = { kind = "cpu-bound" }
[[thread]]
name = "b"
scheduler = "ts"
workload = { kind = "cpu-bound" }
[[at]]
time = "255ms"
op = "set-params"
thread = "a"
params = { amount = "2ms" }
[[at]]
time = "255ms"
op = "begin-reservation"
thread = "b"
scheduler = "rez"
params = { amount = "6ms", period = "10ms" }
"#;
