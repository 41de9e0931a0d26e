//! Several seeds on worker threads, and their summary.

mod common;
use common::{parse, OVER_ADMISSION};
use hsched_sim::{run_seeds, Batch, BatchBuilder, BatchError, Report, SimOptions, Spread};
use std::time::Duration;

fn home() -> hsched_config::Hierarchy {
    let text = include_str!("../../../examples/home-computer.toml");
    hsched_config::parse_str(text, "home-computer.toml").unwrap()
}

fn two_seconds(_: usize) -> SimOptions {
    SimOptions {
        duration: Some(hsched_core::Duration::from_secs(2)),
        ..SimOptions::default()
    }
}

fn batch(h: &hsched_config::Hierarchy, seeds: &[u64], workers: usize) -> Vec<Report> {
    let mut reports = Vec::new();
    run_seeds(
        h,
        seeds,
        workers,
        &two_seconds,
        Duration::from_millis(1),
        &mut || {},
        &mut |r| {
            reports.push(r);
            Ok(())
        },
    )
    .unwrap();
    reports
}

fn summary(reports: &[Report]) -> Batch {
    let mut b = BatchBuilder::new(true).unwrap();
    for r in reports {
        b.add(r).unwrap();
    }
    b.finish().unwrap()
}

fn json(b: &Batch) -> String {
    let mut out = Vec::new();
    b.write_json(&mut out).unwrap();
    String::from_utf8(out).unwrap()
}

#[test]
fn each_run_is_the_run_of_its_seed_alone_whatever_the_workers() {
    let h = home();
    let seeds = [7, 3, 11, 4];
    let alone: Vec<Report> = seeds
        .iter()
        .map(|&s| {
            let mut o = two_seconds(0);
            o.seed = Some(s);
            hsched_sim::run(&h, o).unwrap()
        })
        .collect();
    for workers in [1, 3, 8] {
        assert_eq!(batch(&h, &seeds, workers), alone, "{workers} workers");
    }
    assert_eq!(
        json(&summary(&batch(&h, &seeds, 1))),
        json(&summary(&batch(&h, &seeds, 3)))
    );
}

#[test]
fn the_summary_is_the_reports_figures_combined() {
    let h = home();
    let reports = batch(&h, &[1, 2, 3, 4, 5], 2);
    let b = summary(&reports);
    assert_eq!((b.runs, b.seeds.clone()), (5, vec![1, 2, 3, 4, 5]));
    assert_eq!(b.events, reports.iter().map(|r| r.events).sum::<u64>());
    let whole: serde_json::Value = serde_json::from_str(&json(&b)).unwrap();
    let each: Vec<serde_json::Value> = reports
        .iter()
        .map(|r| serde_json::from_str(&r.to_json()).unwrap())
        .collect();
    assert_eq!(whole["reports"], serde_json::Value::Array(each));
    // T8, the video thread, misses deadlines; its share varies with the
    // seed.
    let t8 = b.threads.iter().find(|t| t.name == "T8").unwrap();
    let of = |f: &dyn Fn(&Report) -> f64| reports.iter().map(f).collect::<Vec<_>>();
    let shares = of(&|r| r.thread("T8").unwrap().share);
    assert_eq!(t8.share, Spread::of(&shares));
    assert!(t8.share.min < t8.share.max, "{:?}", t8.share);
    let misses = of(&|r| r.thread("T8").unwrap().deadline_misses as f64);
    assert_eq!(t8.deadline_misses.total as f64, misses.iter().sum::<f64>());
    assert_eq!(
        t8.deadline_misses.max as f64,
        misses.iter().copied().fold(0.0, f64::max)
    );
    assert_eq!(
        t8.deadline_misses.runs,
        misses.iter().filter(|&&m| m > 0.0).count()
    );
    let worst = reports
        .iter()
        .filter_map(|r| r.thread("T8").unwrap().max_lateness_ns)
        .max();
    assert_eq!(t8.max_lateness_ns, worst);
    let fps = of(&|r| r.thread("T8").unwrap().fps.unwrap());
    assert_eq!(
        t8.fps.as_ref().unwrap().min,
        fps.iter().copied().fold(f64::MAX, f64::min)
    );
    let ts1 = b.schedulers.iter().find(|s| s.name == "TS1").unwrap();
    assert_eq!(
        ts1.share,
        Spread::of(&of(&|r| r.scheduler("TS1").unwrap().share))
    );
    let table = b.to_table();
    assert!(
        table.starts_with("5 runs of 2.000s on 1 cpu(s), seeds 1 to 5"),
        "{table}"
    );
    assert!(table.contains("\nT8 "), "{table}");
}

#[test]
fn a_spread_has_the_sample_deviation() {
    let s = Spread::of(&[1.0, 2.0, 3.0, 4.0]);
    assert_eq!((s.mean, s.min, s.max), (2.5, 1.0, 4.0));
    assert!((s.sd - (5.0f64 / 3.0).sqrt()).abs() < 1e-12, "{}", s.sd);
    assert_eq!(Spread::of(&[0.3]).sd, 0.0);
    assert_eq!(Spread::of(&[]).mean, 0.0);
}

#[test]
fn a_failed_run_ends_the_batch_with_its_error() {
    let h = parse(OVER_ADMISSION);
    let seeds: Vec<u64> = (0..50).collect();
    let started = std::sync::atomic::AtomicUsize::new(0);
    let opts = |i: usize| {
        started.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        two_seconds(i)
    };
    let e = run_seeds(
        &h,
        &seeds,
        2,
        &opts,
        Duration::from_millis(10),
        &mut || {},
        &mut |_| Ok(()),
    )
    .unwrap_err();
    let BatchError::Run { seed, error } = e else {
        panic!("{e}")
    };
    assert!(matches!(error, hsched_sim::SimError::Op { .. }), "{error}");
    // Each worker's first run fails; the lower seed's error is returned.
    assert_eq!(seed, 0);
    let started = started.into_inner();
    assert!(
        started < 10,
        "{started} runs started after the first failed"
    );
}
