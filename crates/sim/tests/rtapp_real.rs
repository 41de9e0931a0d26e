//! The simulator's rt-app programs against the real rt-app (Debian's
//! `rt-app`): each task runs alone for 2 s on one CPU, in rt-app and in the
//! simulator, and rt-app's own log (one line per timer period, a negative
//! `slack` when the period was missed) must give the simulator's jobs and
//! misses, give or take a few at the ends of the run (the simulator counts
//! a job still pending at the end). The tasks use `runtime`, wall time, so
//! that rt-app's loop calibration plays no part. Skips with a message
//! where rt-app or `taskset` is not installed (`.ci/run` installs rt-app).

use hsched_config::{attach_rtapp, parse_rtapp, parse_str};
use hsched_core::Duration;
use hsched_sim::SimOptions;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Timer shapes where the order of rt-app's timer arithmetic shows: one
/// timer whose events have different periods, late or not, relative and
/// absolute (a single `"absolute"` event makes the whole timer absolute).
const TASKS: &[(&str, &str)] = &[
    (
        "two periods",
        r#"{"p1": {"loop": 2, "runtime": 15000, "timer": {"ref": "t", "period": 20000}},
            "p2": {"loop": 5, "runtime": 1000, "timer": {"ref": "t", "period": 5000}}}"#,
    ),
    (
        "two periods, late",
        r#"{"p1": {"loop": 3, "runtime": 12000, "timer": {"ref": "t", "period": 8000}},
            "p2": {"loop": 2, "runtime": 2000, "timer": {"ref": "t", "period": 30000}}}"#,
    ),
    (
        "late, absolute in the second phase",
        r#"{"p1": {"loop": 2, "runtime": 25000, "timer": {"ref": "t", "period": 10000}},
            "p2": {"loop": 5, "runtime": 1000, "timer": {"ref": "t", "period": 10000, "mode": "absolute"}}}"#,
    ),
];

/// How far rt-app's counts may be from the simulator's: the simulator
/// counts a job pending at the end, and rt-app's start and end are a
/// little off the 2 s.
const SLACK: u64 = 3;

fn installed(name: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(name).is_file()))
}

/// rt-app's file for one task `a` with these phases, logging to `dir`.
fn rtapp_json(phases: &str, dir: &Path) -> String {
    format!(
        r#"{{"global": {{"duration": 2, "calibration": 16, "logdir": "{}", "log_basename": "rt"}},
            "tasks": {{"a": {{"loop": -1, "phases": {phases}}}}}}}"#,
        dir.display()
    )
}

/// Periods and missed periods in rt-app's log for task `a`.
fn rt_app_counts(dir: &Path) -> (u64, u64) {
    let log = dir.join("rt-a-0.log");
    let text = std::fs::read_to_string(&log)
        .unwrap_or_else(|e| panic!("rt-app wrote no log {}: {e}", log.display()));
    let header = text
        .lines()
        .find(|l| l.starts_with("#idx"))
        .expect("rt-app's column header");
    let slack = header
        .trim_start_matches('#')
        .split_whitespace()
        .position(|c| c == "slack")
        .expect("a `slack` column");
    let mut counts = (0, 0);
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let s: i64 = line.split_whitespace().nth(slack).unwrap().parse().unwrap();
        counts.0 += 1;
        counts.1 += u64::from(s < 0);
    }
    counts
}

/// Jobs and misses of task `a` simulated alone on one CPU for 2 s.
fn simulated(json: &str) -> (u64, u64) {
    let mut h = parse_str(
        "default = \"fp\"\n[machine]\ncpus = 1\n[[scheduler]]\nname = \"fp\"\npolicy = \"fp\"\n",
        "rt.toml",
    )
    .unwrap();
    attach_rtapp(&mut h, parse_rtapp(json, "rt.json").unwrap()).unwrap();
    let r = hsched_sim::run(
        &h,
        SimOptions {
            duration: Some(Duration::from_secs(2)),
            ..SimOptions::default()
        },
    )
    .unwrap();
    let t = &r.threads[0];
    (t.jobs, t.deadline_misses)
}

fn scratch() -> PathBuf {
    let d = std::env::temp_dir().join(format!("hsched-rtapp-real-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn simulated_rt_app_timers_count_as_rt_app_does() {
    if !installed("rt-app") || !installed("taskset") {
        eprintln!("SKIPPED: rt-app or taskset is not installed (apt install rt-app)");
        return;
    }
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let cpu = (cpus - 1).to_string();
    let dir = scratch();
    let mut wrong = Vec::new();
    for (what, phases) in TASKS {
        let json = rtapp_json(phases, &dir);
        let file = dir.join("rt.json");
        std::fs::write(&file, &json).unwrap();
        let _ = std::fs::remove_file(dir.join("rt-a-0.log"));
        let status = Command::new("taskset")
            .args(["-c", &cpu, "rt-app"])
            .arg(&file)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .unwrap();
        assert!(status.success(), "rt-app failed on {what}: {status}");
        let real = rt_app_counts(&dir);
        let sim = simulated(&json);
        eprintln!("{what}: rt-app {real:?} periods and misses, simulated {sim:?}");
        if real.0.abs_diff(sim.0) > SLACK || real.1.abs_diff(sim.1) > SLACK {
            wrong.push(format!("{what}: rt-app {real:?}, simulated {sim:?}"));
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
