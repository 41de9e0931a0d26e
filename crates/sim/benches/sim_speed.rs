//! Simulation speed: the 4-level, 100-thread hierarchy of
//! `four_level.toml`, 10 s of model time per iteration. Throughput is in
//! HSI inputs (the report's `events`: wake, block, create, exit,
//! fire_timers, operations, add_stolen) per second of wall time.
//! docs/measurements/simulator.md has the numbers; `examples/sim_speed.rs` runs the
//! 10-minute version and prints events per second.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use hsched_core::Duration;
use hsched_sim::SimOptions;

const HIERARCHY: &str = include_str!("four_level.toml");

fn run(secs: u64) -> u64 {
    let h = hsched_config::parse_str(HIERARCHY, "four_level.toml")
        .expect("the benchmark hierarchy parses");
    let opts = SimOptions {
        duration: Some(Duration::from_secs(secs)),
        seed: Some(1),
        ..Default::default()
    };
    hsched_sim::run(&h, opts)
        .expect("the benchmark hierarchy runs")
        .events
}

fn bench(c: &mut Criterion) {
    let events = run(10);
    let mut g = c.benchmark_group("sim");
    g.sample_size(10);
    g.throughput(Throughput::Elements(events));
    g.bench_function("four_level_100_threads_10s", |b| b.iter(|| run(10)));
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
