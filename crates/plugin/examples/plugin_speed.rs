//! The simulator's 4-level benchmark (crates/sim/benches/four_level.toml)
//! with its root `fp` built in, then with the root replaced by the FP
//! plug-in `FILE.wasm` (sdk/examples/fp.c), in one run: HSI inputs per
//! second on the CPU for each, and their ratio.
//!
//! ```text
//! make -C sdk
//! cargo run --release -p hsched-plugin --example plugin_speed -- sdk/build/fp.wasm [MINUTES]
//! ```

use hsched_core::Duration;
use hsched_sim::SimOptions;

const FOUR_LEVEL: &str = include_str!("../../sim/benches/four_level.toml");

fn cpu_time() -> f64 {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").unwrap_or_default();
    text.split_whitespace()
        .next()
        .and_then(|s| s.parse::<u64>().ok())
        .map_or(0.0, |ns| ns as f64 / 1e9)
}

fn run(text: &str, minutes: f64, label: &str) -> f64 {
    let policies = hsched_plugin::policies_for(None, text).unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(2)
    });
    let h = hsched_config::parse_str_with_policies(text, "four_level.toml", &policies)
        .unwrap_or_else(|e| {
            eprintln!("{e}");
            std::process::exit(2)
        });
    let opts = SimOptions {
        duration: Some(Duration((60e9 * minutes) as u64)),
        seed: Some(1),
        ..Default::default()
    };
    let c0 = cpu_time();
    let r = hsched_sim::run_with_policies(&h, opts, &policies).unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(1)
    });
    let t = cpu_time() - c0;
    let rate = r.events as f64 / t;
    println!(
        "{label:<10} {} inputs in {t:.3} s on the CPU: {rate:.0} inputs/s, {} dispatches",
        r.events, r.machine.context_switches
    );
    rate
}

fn main() {
    let mut args = std::env::args().skip(1);
    let Some(plugin) = args.next() else {
        eprintln!("usage: plugin_speed FILE.wasm [MINUTES]");
        std::process::exit(2)
    };
    let minutes: f64 = args.next().and_then(|m| m.parse().ok()).unwrap_or(1.0);
    let path = std::fs::canonicalize(&plugin).unwrap_or_else(|e| {
        eprintln!("{plugin}: {e}");
        std::process::exit(2)
    });
    let with_plugin = FOUR_LEVEL.replacen(
        "name = \"fp\"\npolicy = \"fp\"",
        &format!("name = \"fp\"\npolicy = \"{}\"", path.display()),
        1,
    );
    assert_ne!(with_plugin, FOUR_LEVEL, "the benchmark's root is not `fp`");
    println!("runtime    {}", hsched_plugin::RUNTIME);
    let a = run(FOUR_LEVEL, minutes, "built-in");
    let b = run(&with_plugin, minutes, "plug-in");
    println!("ratio      {:.2} (plug-in / built-in)", b / a);
    let faults = hsched_plugin::faults();
    if !faults.is_empty() {
        println!("faults     {faults:?}");
    }
}
