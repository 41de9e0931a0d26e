//! Run-time overhead of Rez-C and Rez-FB relative to Rez (Regehr 2001,
//! §11.6.8): the CPU time the scheduling hierarchy itself needs per second
//! of schedule, under each variant, for the scenario of Fig 11.3.
//!
//! The core is driven directly (no simulator engine, whose own work would
//! drown the difference): one processor, §11.4's hierarchy (FP root, Rez at
//! priority 10 with a CPU-bound thread reserving 4 ms / 20 ms, TS at
//! priority 1 with a CPU-bound thread), and network-like stolen time (one
//! chunk of 15–28 µs every 60–180 µs, 18 % of the processor) reported with
//! `Hsi::add_stolen` at the end of each chunk, the same inputs for every
//! variant. Only the HSI calls are timed. The dissertation measured the
//! CPU time a reservation lost under each variant: +0.012 % (Rez-C) and
//! +0.017 % (Rez-FB) over Rez.
//!
//! ```text
//! cargo run --release -p hsched-sim --example rez_stolen_overhead [-- SECONDS ROUNDS]
//! valgrind --tool=callgrind target/release/examples/rez_stolen_overhead --only VARIANT SECONDS
//! ```
//!
//! With `--only VARIANT` it runs one variant once, untimed, for an
//! instruction count under callgrind (deterministic, unlike wall time on a
//! shared machine).

use hsched_core::{CpuId, Duration, Hsi, Instant, ParamValue, Params};
use std::time::Instant as Wall;

const HIERARCHY: &str = r#"
[machine]
cpus = 1
[[scheduler]]
name = "root"
policy = "fp"
[[scheduler]]
name = "rez"
policy = "rez"
parent = "root"
variant = "VARIANT"
params = { priority = 10 }
[[scheduler]]
name = "ts"
policy = "ts"
parent = "root"
params = { priority = 1 }
"#;

/// xorshift64*, so every variant sees the same stolen time.
struct Rng(u64);
impl Rng {
    fn unit(&mut self) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// What one run measured.
struct Cost {
    /// Wall-clock time spent inside HSI calls.
    ns: u64,
    /// HSI inputs.
    inputs: u64,
    /// Timer firings among them.
    timers: u64,
}

fn build(variant: &str) -> Hsi {
    let h = hsched_config::parse_str(&HIERARCHY.replace("VARIANT", variant), "overhead.toml")
        .unwrap_or_else(|e| panic!("{e}"));
    let mut hsi = hsched_config::build_hsi(&h).unwrap_or_else(|e| panic!("{e}"));
    hsi.set_checking(false);
    let rez = hsi.instance("rez").expect("rez");
    let ts = hsi.instance("ts").expect("ts");
    let mut p = Params::new();
    p.insert("amount", ParamValue::Str("4ms".into()));
    p.insert("period", ParamValue::Str("20ms".into()));
    let rt = hsi.create_thread(Instant(0), "rt", rez, p).expect("rt");
    let hog = hsi
        .create_thread(Instant(0), "hog", ts, Params::new())
        .expect("hog");
    hsi.wake(Instant(0), rt).expect("wake");
    hsi.wake(Instant(0), hog).expect("wake");
    hsi
}

fn run(variant: &str, secs: u64) -> Cost {
    let mut hsi = build(variant);
    let end = secs * 1_000_000_000;
    let mut rng = Rng(0x5eed_1234_abcd_ef01);
    let mut dispatch = Vec::new();
    let mut cost = Cost {
        ns: 0,
        inputs: 0,
        timers: 0,
    };
    let mut steal_start = (rng.unit() * 120_000.0) as u64;
    let mut steal_len = 15_000 + (rng.unit() * 13_000.0) as u64;
    loop {
        let steal_end = steal_start + steal_len;
        let timer = hsi.next_timer().map_or(u64::MAX, |t| t.0);
        let now = steal_end.min(timer);
        if now >= end {
            break;
        }
        let t0 = Wall::now();
        if steal_end <= timer {
            hsi.add_stolen(Instant(now), CpuId(0), Duration(steal_len));
            steal_start = steal_end + ((0.5 + rng.unit()) * 120_000.0) as u64 - steal_len;
            steal_start = steal_start.max(steal_end + 1);
            steal_len = 15_000 + (rng.unit() * 13_000.0) as u64;
        } else {
            hsi.fire_timers(Instant(now)).expect("timers");
            cost.timers += 1;
        }
        dispatch.clear();
        hsi.drain_dispatch(&mut dispatch);
        cost.ns += t0.elapsed().as_nanos() as u64;
        cost.inputs += 1;
    }
    cost
}

fn main() {
    let raw: Vec<String> = std::env::args().skip(1).collect();
    let args: Vec<u64> = raw.iter().filter_map(|a| a.parse().ok()).collect();
    if let Some(i) = raw.iter().position(|a| a == "--only") {
        let v = raw.get(i + 1).map_or("basic", String::as_str);
        let c = run(v, args.first().copied().unwrap_or(20));
        println!("{v}: {} inputs, {} timer firings", c.inputs, c.timers);
        return;
    }
    let secs = args.first().copied().unwrap_or(20);
    let rounds = args.get(1).copied().unwrap_or(7).max(1);
    let variants = ["basic", "catch-up", "feedback"];
    // Interleaved rounds, median per variant, so drift in machine load
    // hits every variant alike.
    let mut per: Vec<Vec<f64>> = vec![Vec::new(); variants.len()];
    let mut last: Vec<(u64, u64)> = vec![(0, 0); variants.len()];
    for _ in 0..rounds {
        for (i, v) in variants.iter().enumerate() {
            let c = run(v, secs);
            per[i].push(c.ns as f64 / secs as f64);
            last[i] = (c.inputs, c.timers);
        }
    }
    let med = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let base = med(&mut per[0].clone());
    println!("{secs} s of schedule per run, {rounds} interleaved rounds, median per variant\n");
    println!("| variant | HSI inputs per s | timer firings per s | hierarchy CPU per s of schedule (us) | CPU share (%) | overhead vs Rez (% of the CPU) |");
    println!("|---|---|---|---|---|---|");
    for (i, v) in variants.iter().enumerate() {
        let m = med(&mut per[i]);
        let (inputs, timers) = last[i];
        println!(
            "| {} | {} | {} | {:.1} | {:.4} | {:+.4} |",
            match *v {
                "basic" => "Rez",
                "catch-up" => "Rez-C",
                _ => "Rez-FB",
            },
            inputs / secs,
            timers / secs,
            m / 1e3,
            m / 1e9 * 100.0,
            (m - base) / 1e9 * 100.0
        );
    }
}
