//! Every hierarchy in the repository's `examples/` runs (with its rt-app
//! file, if it names one) under the protocol checker, and twice gives the
//! same report.

use hsched_core::Duration;
use hsched_sim::SimOptions;
use std::path::Path;

#[test]
fn every_example_runs_and_repeats() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("examples/ exists")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    assert!(!files.is_empty());
    let mut ran = 0;
    for f in &files {
        let h = match hsched_config::load(f) {
            Ok(h) => h,
            Err(e) => panic!("{}: {e}", f.display()),
        };
        if h.threads.iter().any(|t| t.workload.is_none()) {
            continue; // a live-mode-only example
        }
        let opts = || SimOptions {
            duration: Some(Duration::from_secs(3)),
            check_protocol: true,
            ..Default::default()
        };
        let a = hsched_sim::run(&h, opts()).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        let b = hsched_sim::run(&h, opts()).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        assert_eq!(a.to_json(), b.to_json(), "{}", f.display());
        assert!(a.machine.busy_ns > 0, "{}: nothing ran", f.display());
        ran += 1;
    }
    assert!(
        ran >= files.len() / 2,
        "only {ran} of {} examples are simulatable",
        files.len()
    );
}
