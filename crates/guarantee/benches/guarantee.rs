//! Benchmarks: the composition check of a 10,000-instance hierarchy (goal:
//! well under 50 ms) and the ghost-task reservation search for the Media
//! Player task set of Table 6.1 (goal: under 10 ms).
//!
//! `cargo bench -p hsched-guarantee --bench guarantee`

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use hsched_guarantee::compose::{compose, Hierarchy, ParentSpec, SchedulerSpec, ThreadSpec};
use hsched_guarantee::ghost::{media_player, search_reservation, Analysis, SearchConfig};
use hsched_guarantee::{Duration, Guarantee};

/// `groups` × (join, ps, ts, fp) under a root FP with a Rez and a TS, plus
/// two threads per group: 4·groups + 3 instances, 2·groups threads.
fn big_hierarchy(groups: usize) -> Hierarchy {
    let mut h = Hierarchy::new(1);
    h.add_scheduler(SchedulerSpec::new("root", "fp").under(ParentSpec::top()));
    h.add_scheduler(
        SchedulerSpec::new("rez", "rez").under(ParentSpec::scheduler("root").priority(2)),
    );
    h.add_scheduler(
        SchedulerSpec::new("ts0", "ts").under(ParentSpec::scheduler("root").priority(1)),
    );
    let request = Guarantee::Ps { share: 0.00005 };
    for i in 0..groups {
        h.add_scheduler(
            SchedulerSpec::new(&format!("j{i}"), "join")
                .under(
                    ParentSpec::scheduler("rez")
                        .reservation(Duration::from_micros(200), Duration::from_secs(1)),
                )
                .under(ParentSpec::scheduler("ts0")),
        );
        h.add_scheduler(
            SchedulerSpec::new(&format!("ps{i}"), "ps")
                .under(ParentSpec::scheduler(&format!("j{i}"))),
        );
        h.add_scheduler(
            SchedulerSpec::new(&format!("ts{}", i + 1), "ts")
                .under(ParentSpec::scheduler(&format!("ps{i}")).share(1.0)),
        );
        h.add_scheduler(
            SchedulerSpec::new(&format!("fp{i}"), "fp")
                .under(ParentSpec::scheduler(&format!("ps{i}")).share(3.0)),
        );
        h.add_thread(ThreadSpec::new(
            &format!("a{i}"),
            ParentSpec::scheduler(&format!("ts{}", i + 1)),
        ));
        h.add_thread(
            ThreadSpec::new(&format!("b{i}"), ParentSpec::scheduler(&format!("fp{i}")))
                .requesting(request),
        );
    }
    h
}

fn bench_compose(c: &mut Criterion) {
    let h = big_hierarchy(2500);
    assert_eq!(h.schedulers.len(), 10_003);
    let result = compose(&h);
    assert!(result.is_ok(), "{:?}", result.diagnostics.first());
    c.bench_function("compose_10k_instances", |b| {
        b.iter(|| compose(std::hint::black_box(&h)))
    });
    c.bench_function("render_tree_10k_instances", |b| {
        b.iter_batched(|| compose(&h), |r| r.render_tree(), BatchSize::LargeInput)
    });
}

fn bench_ghost(c: &mut Criterion) {
    let app = media_player();
    let config = SearchConfig::for_tasks(&app);
    let choice = search_reservation(&app, &config).expect("Table 6.1 is schedulable");
    assert!((5.0..=7.0).contains(&choice.period.as_millis_f64()));
    c.bench_function("ghost_search_table_6_1", |b| {
        b.iter(|| search_reservation(std::hint::black_box(&app), &config))
    });
    let closed_form = SearchConfig {
        analysis: Analysis::SupplyBound,
        ..config
    };
    assert_eq!(search_reservation(&app, &closed_form).ok(), Some(choice));
    c.bench_function("ghost_search_table_6_1_supply_bound", |b| {
        b.iter(|| search_reservation(std::hint::black_box(&app), &closed_form))
    });
}

criterion_group!(benches, bench_compose, bench_ghost);
criterion_main!(benches);
