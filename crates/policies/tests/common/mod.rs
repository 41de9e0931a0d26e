//! Helpers shared by the BEST, BEST-RATE and linux24 tests: a checked
//! machine, a root instance, periodic behaviours and job statistics from
//! `hsched_core::testing::Driver`.
#![allow(dead_code)] // each test file uses a subset

use hsched_core::testing::{Behaviour, Driver};
use hsched_core::{
    CpuId, Duration, Hsi, InstanceId, Instant, ParamValue, Params, ParentLink, ParentRef, ThreadId,
};

pub fn ms(x: u64) -> Duration {
    Duration::from_millis(x)
}

pub fn nice(n: i64) -> Params {
    Params::new().with("nice", ParamValue::Int(n))
}

/// A machine of `cpus` processors with the protocol checker on.
pub fn checked(cpus: usize) -> Hsi {
    let mut hsi = Hsi::new(cpus);
    hsi.set_checking(true);
    hsi
}

/// A root instance of `policy` over processors `0..cpus`.
pub fn root(hsi: &mut Hsi, policy: &str, params: Params, cpus: u32) -> InstanceId {
    let p = hsched_policies::build(policy, &params).unwrap();
    let link = ParentLink {
        parent: ParentRef::Top {
            cpus: (0..cpus).map(CpuId).collect(),
        },
        params: Params::new(),
    };
    hsi.create_instance(Instant(0), "root", p, vec![link])
        .unwrap()
}

pub fn periodic(period: u64, exec: u64, offset: u64) -> Behaviour {
    Behaviour::Periodic {
        period: ms(period),
        exec: ms(exec),
        offset: ms(offset),
    }
}

/// (jobs, misses) of a periodic thread released at or after `from` ms; a
/// job misses when it finishes more than `period` ms after its release.
pub fn misses(d: &Driver, t: ThreadId, period: u64, from: u64) -> (usize, usize) {
    let jobs: Vec<_> = d
        .finishes(t)
        .iter()
        .filter(|(r, _)| *r >= Instant(from * 1_000_000))
        .collect();
    let missed = jobs
        .iter()
        .filter(|(r, f)| f.saturating_since(*r) > ms(period))
        .count();
    (jobs.len(), missed)
}

/// The thread's share of one processor over `secs` seconds.
pub fn share(d: &Driver, t: ThreadId, secs: f64) -> f64 {
    d.hsi.thread_received(t).as_secs_f64() / secs
}
