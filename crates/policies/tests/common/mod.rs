//! Helpers shared by the BEST, BEST-RATE, linux24, Rez and real-rate
//! tests: a checked machine, a root instance, periodic behaviours, job
//! statistics from `hsched_core::testing::Driver`, and an audit of hard
//! reservations.
#![allow(dead_code)] // each test file uses a subset

use hsched_core::testing::{Behaviour, Driver};
use hsched_core::{
    CpuId, Duration, Hsi, InstanceId, Instant, ParamValue, Params, ParentLink, ParentRef,
    PolicyEvent, ThreadId, TraceKind, VpId,
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

/// A hard reservation to audit: its VP, amount, period and the start of
/// its period grid (its first request).
pub struct Hard {
    pub name: &'static str,
    pub vp: VpId,
    pub amount: Duration,
    pub period: Duration,
    pub origin: Instant,
}

/// Runs `d` to `end` in steps of `step` (a divisor of every period, the
/// grids starting at multiples of it) and checks that each reservation is
/// replenished at most once in each of its periods and receives at most
/// its amount there.
pub fn run_auditing(d: &mut Driver, hard: &[Hard], step: Duration, end: Instant) {
    let mut received = vec![Vec::new(); hard.len()];
    let mut at = Instant(0);
    while at < end {
        at += step;
        d.run_until(at).unwrap();
        for (h, r) in hard.iter().zip(&mut received) {
            r.push((at, d.hsi.vp_info(h.vp).received));
        }
    }
    let mut trace = Vec::new();
    d.hsi.drain_trace(&mut trace);
    for (h, samples) in hard.iter().zip(&received) {
        let window = |t: Instant| t.saturating_since(h.origin).as_nanos() / h.period.as_nanos();
        let mut per_window = std::collections::BTreeMap::new();
        for e in &trace {
            if let TraceKind::Policy {
                event: PolicyEvent::Replenish { vp, .. },
                ..
            } = e.kind
            {
                if vp == h.vp {
                    *per_window.entry(window(e.at)).or_insert(0) += 1;
                }
            }
        }
        for (k, n) in per_window {
            assert!(n <= 1, "{}: {n} replenishments in period {k}", h.name);
        }
        // Received at each period boundary, and what each period held.
        let at_bounds: Vec<_> = samples
            .iter()
            .filter(|(t, _)| {
                *t >= h.origin && t.saturating_since(h.origin).as_nanos() % h.period.as_nanos() == 0
            })
            .collect();
        for w in at_bounds.windows(2) {
            let got = w[1].1 - w[0].1;
            assert!(
                got <= h.amount,
                "{}: {got} in the period ending at {}, more than {}",
                h.name,
                w[1].0,
                h.amount
            );
        }
    }
}
