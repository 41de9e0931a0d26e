//! Runs the simulator's speed benchmark for a given number of minutes of
//! model time and prints the HSI inputs processed per second of wall time.
//!
//! - `sim_speed [MINUTES]`: `benches/four_level.toml`, 4 levels (fp → rez +
//!   ps → ts), 100 threads, 2 processors, the registry's policies;
//! - `sim_speed [MINUTES] flat`: `benches/flat_fifo.toml`, one instance of
//!   the core's minimal `fifo` policy over 100 threads, to see the
//!   simulator's and the HSI's own cost without a policy's data structures;
//! - `sim_speed [MINUTES] wide`: `benches/wide.toml`, the 4-level hierarchy
//!   on 64 processors with 2 890 threads, to see how the cost of an input
//!   grows with the machine.
//!
//! - `--trace FILE` also streams the Perfetto trace to FILE.
//!
//! MINUTES may be a fraction (`0.05` is 3 s).
//!
//! Measure peak memory with `/usr/bin/time -v`:
//!
//! ```text
//! cargo build --release -p hsched-sim --example sim_speed
//! /usr/bin/time -v target/release/examples/sim_speed 10
//! ```

use hsched_core::testing::Fifo;
use hsched_core::{Duration, Params, Policy, PolicyError};
use hsched_policies::PolicyInfo;
use hsched_sim::SimOptions;

const FOUR_LEVEL: &str = include_str!("../benches/four_level.toml");
const FLAT: &str = include_str!("../benches/flat_fifo.toml");
const WIDE: &str = include_str!("../benches/wide.toml");

fn fifo(_: &Params) -> Result<Box<dyn Policy>, PolicyError> {
    Ok(Box::new(Fifo::default()))
}

/// The registry plus the core's `fifo` test policy.
fn policies() -> Vec<PolicyInfo> {
    let mut v = hsched_policies::registry().to_vec();
    v.push(PolicyInfo {
        summary: "first come first served (hsched_core::testing::Fifo)",
        ..PolicyInfo::new("fifo", fifo)
    });
    v
}

/// Time this thread has spent on a processor, from Linux's schedstat (the
/// machines we measure on are shared, so wall time includes waiting for a
/// processor). `None` elsewhere.
fn cpu_time() -> Option<f64> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let ns: u64 = text.split_whitespace().next()?.parse().ok()?;
    Some(ns as f64 / 1e9)
}

fn main() {
    let usage = || -> ! {
        eprintln!("usage: sim_speed [MINUTES] [flat|wide] [--trace FILE]");
        std::process::exit(2)
    };
    let mut minutes = 10f64;
    let (mut text, mut name) = (FOUR_LEVEL, "four_level.toml");
    let mut trace: Option<Box<dyn std::io::Write>> = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "flat" => (text, name) = (FLAT, "flat_fifo.toml"),
            "wide" => (text, name) = (WIDE, "wide.toml"),
            "--trace" => {
                let path = args.next().unwrap_or_else(|| usage());
                match std::fs::File::create(&path) {
                    Ok(f) => trace = Some(Box::new(f)),
                    Err(e) => {
                        eprintln!("{path}: {e}");
                        std::process::exit(1);
                    }
                }
            }
            m => match m.parse::<f64>() {
                Ok(x) if x > 0.0 && x <= 1e6 => minutes = x,
                _ => usage(),
            },
        }
    }
    let policies = policies();
    let h = match hsched_config::parse_str_with_policies(text, name, &policies) {
        Ok(h) => h,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    };
    let opts = SimOptions {
        duration: Some(Duration((60e9 * minutes) as u64)),
        seed: Some(1),
        trace,
        ..Default::default()
    };
    let cpu0 = cpu_time();
    let start = std::time::Instant::now();
    let report = match hsched_sim::run_with_policies(&h, opts, &policies) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    };
    let wall = start.elapsed().as_secs_f64();
    let cpu = cpu_time().zip(cpu0).map(|(b, a)| b - a);
    let c = &report.event_counts;
    println!(
        "hierarchy       {name}: {} threads, {} cpus, {minutes} min of model time",
        report.threads.len(),
        report.cpus
    );
    println!("wall time       {wall:.3} s");
    if let Some(cpu) = cpu {
        println!("on-CPU time     {cpu:.3} s");
    }
    println!(
        "HSI inputs      {} (wake {}, block {}, fire_timers {}, create {}, exit {}, ops {}, stolen {})",
        report.events, c.wake, c.block, c.fire_timers, c.create_thread, c.exit, c.operations, c.add_stolen
    );
    let t = cpu.unwrap_or(wall);
    println!(
        "inputs/s        {:.0} (per second on the CPU)",
        report.events as f64 / t
    );
    println!(
        "dispatches      {} ({:.0}/s)",
        report.machine.context_switches,
        report.machine.context_switches as f64 / t
    );
}
