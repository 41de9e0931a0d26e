//! Per-job records (`SimOptions::job_records`): rows checked against
//! schedules worked out by hand, their agreement with the per-thread
//! counts on every example, and a report, trace and chart that do not
//! change when they are asked.

mod common;

use common::{sim_with, Buf};
use hsched_core::Duration;
use hsched_sim::{GanttColor, GanttRequest, JobRecord, Report, SimOptions};
use std::path::Path;

fn with_jobs(secs: f64) -> SimOptions {
    SimOptions {
        job_records: true,
        ..common::opts(secs)
    }
}

/// `(job, release, deadline, completion, missed)` of `thread`'s rows, in
/// milliseconds (every time in these tests is whole).
fn rows(r: &Report, thread: &str) -> Vec<(u64, u64, u64, Option<u64>, bool)> {
    let ms = |ns: u64| {
        assert_eq!(ns % 1_000_000, 0, "{ns} ns is not whole milliseconds");
        ns / 1_000_000
    };
    r.jobs
        .iter()
        .filter(|j| &*j.thread == thread)
        .map(|j| {
            (
                j.job,
                ms(j.release_ns),
                ms(j.deadline_ns),
                j.completion_ns.map(ms),
                j.missed,
            )
        })
        .collect()
}

/// Two rate-monotonic tasks on one processor: t1 (3 ms every 10 ms, the
/// higher priority) and t2 (6 ms every 15 ms), for 32 ms.
///
/// ```text
/// t1 | 0-3 |      | 10-13 |       | 20-23 |    | 30-32 (unfinished)
/// t2 |     | 3-9  |       | 15-20 |       | 23-24 |
/// ```
/// t2's second job is preempted at 20 by t1's third and finishes at 24:
/// response 9 ms, lateness 24 − 30 = −6 ms. Both release again at 30:
/// t1's fourth job (due at 40) runs and is unfinished at the end, t2's
/// third (due at 45) waits; neither is missed.
const RM: &str = include_str!("common/two_rm_tasks.toml");

#[test]
fn two_rate_monotonic_tasks_match_the_schedule_by_hand() {
    let r = sim_with(RM, with_jobs(0.032));
    assert_eq!(
        rows(&r, "t1"),
        [
            (0, 0, 10, Some(3), false),
            (1, 10, 20, Some(13), false),
            (2, 20, 30, Some(23), false),
            (3, 30, 40, None, false),
        ]
    );
    assert_eq!(
        rows(&r, "t2"),
        [
            (0, 0, 15, Some(9), false),
            (1, 15, 30, Some(24), false),
            (2, 30, 45, None, false),
        ]
    );
    let j = &r.jobs[5];
    assert_eq!(
        *j,
        JobRecord {
            thread: "t2".into(),
            job: 1,
            release_ns: 15_000_000,
            deadline_ns: 30_000_000,
            completion_ns: Some(24_000_000),
            response_ns: Some(9_000_000),
            lateness_ns: Some(-6_000_000),
            missed: false,
        }
    );
    // Threads in file order, then jobs in release order.
    let order: Vec<(&str, u64)> = r.jobs.iter().map(|j| (&*j.thread, j.job)).collect();
    assert_eq!(
        order,
        [
            ("t1", 0),
            ("t1", 1),
            ("t1", 2),
            ("t1", 3),
            ("t2", 0),
            ("t2", 1),
            ("t2", 2)
        ]
    );
    let unfinished = &r.jobs[3];
    assert_eq!(
        (unfinished.response_ns, unfinished.lateness_ns),
        (None, None)
    );
}

/// One task asking 15 ms every 10 ms, for 35 ms: job 0 runs 0-15, job 1
/// (released at 10) 15-30, job 2 (released at 20) from 30 and is
/// unfinished at 35, past its deadline of 30; job 3 (released at 30, due
/// at 40) waits. Three misses, as the thread's count says.
const OVERLOAD: &str = r#"
[[scheduler]]
name = "fp"
policy = "fp"

[[thread]]
name = "late"
scheduler = "fp"
workload = { kind = "periodic", period = "10ms", exec = "15ms" }
"#;

#[test]
fn a_backlog_keeps_each_release_and_unfinished_jobs_count_as_missed() {
    let r = sim_with(OVERLOAD, with_jobs(0.035));
    assert_eq!(
        rows(&r, "late"),
        [
            (0, 0, 10, Some(15), true),
            (1, 10, 20, Some(30), true),
            (2, 20, 30, None, true),
            (3, 30, 40, None, false),
        ]
    );
    assert_eq!(r.jobs[1].response_ns, Some(20_000_000));
    assert_eq!(r.jobs[1].lateness_ns, Some(10_000_000));
    assert_eq!(r.thread("late").unwrap().deadline_misses, 3);
}

/// A video in `skip` mode abandons a frame at its deadline: a missed row
/// without completion. 12 ms frames every 10 ms under a 4 ms-every-10 ms
/// task of higher priority: frame 0 gets 0-4 and 4-10 (6 ms), is dropped
/// at 10; each later frame likewise.
const SKIP: &str = r#"
[[scheduler]]
name = "fp"
policy = "fp"

[[thread]]
name = "hi"
scheduler = "fp"
params = { priority = 2 }
workload = { kind = "periodic", period = "10ms", exec = "4ms" }

[[thread]]
name = "video"
scheduler = "fp"
params = { priority = 1 }
workload = { kind = "video", period = "10ms", exec = "5ms" }
"#;

#[test]
fn video_frames_done_on_time_and_frames_dropped() {
    // 5 ms frames fit beside hi's 4 ms: each finishes at 9, due at 10.
    let r = sim_with(SKIP, with_jobs(0.030));
    assert_eq!(
        rows(&r, "video"),
        [
            (0, 0, 10, Some(9), false),
            (1, 10, 20, Some(19), false),
            (2, 20, 30, Some(29), false),
        ]
    );
    // 7 ms frames do not: in `skip` mode each is dropped at its deadline.
    let text = SKIP.replace(r#"exec = "5ms" }"#, r#"exec = "7ms", on_miss = "skip" }"#);
    let r = sim_with(&text, with_jobs(0.030));
    assert_eq!(
        rows(&r, "video"),
        [
            (0, 0, 10, None, true),
            (1, 10, 20, None, true),
            (2, 20, 30, None, false),
        ]
    );
    let v = r.thread("video").unwrap();
    assert_eq!((v.deadline_misses, v.dropped), (2, 2));
}

/// A thread's missed rows are its misses, its finished rows its lateness
/// samples, for every model that keeps rows (all but the renderer, whose
/// misses count gaps, and the player, whose frames have no release).
fn check_counts(r: &Report, what: &str) {
    for t in &r.threads {
        if matches!(t.workload, "frame_renderer" | "player") {
            assert!(
                r.jobs.iter().all(|j| *j.thread != *t.name),
                "{what}: {}",
                t.name
            );
            continue;
        }
        let mine: Vec<&JobRecord> = r.jobs.iter().filter(|j| *j.thread == *t.name).collect();
        let missed = mine.iter().filter(|j| j.missed).count() as u64;
        let done = mine.iter().filter(|j| j.completion_ns.is_some()).count() as u64;
        assert_eq!(missed, t.deadline_misses, "{what}: {} misses", t.name);
        assert_eq!(
            done,
            t.lateness_ns.as_ref().map_or(0, |d| d.count),
            "{what}: {} finished jobs",
            t.name
        );
        for (k, j) in mine.iter().enumerate() {
            assert_eq!(j.job, k as u64, "{what}: {}", t.name);
            assert!(j.release_ns < r.duration_ns, "{what}: {j:?}");
            if let Some(c) = j.completion_ns {
                assert!(c >= j.release_ns, "{what}: {j:?}");
                assert_eq!(j.missed, c > j.deadline_ns, "{what}: {j:?}");
            }
        }
        // Released in order.
        assert!(
            mine.windows(2).all(|w| w[0].release_ns <= w[1].release_ns),
            "{what}: {}",
            t.name
        );
    }
}

/// The report, trace and chart of `h` with and without records; the
/// records are then taken out of the report to compare the rest.
fn both(h: &hsched_config::Hierarchy, secs: u64) -> [(Report, Vec<u8>, Vec<u8>); 2] {
    [false, true].map(|job_records| {
        let trace = Buf::default();
        let gantt = Buf::default();
        let opts = SimOptions {
            duration: Some(Duration::from_secs(secs)),
            trace: Some(Box::new(trace.clone())),
            gantt: Some(GanttRequest {
                from: Duration::ZERO,
                to: Duration::from_millis(200),
                out: Box::new(gantt.clone()),
                color: GanttColor::Cpu,
            }),
            job_records,
            ..Default::default()
        };
        let r = hsched_sim::run(h, opts).unwrap_or_else(|e| panic!("{}: {e}", h.file));
        (r, trace.bytes(), gantt.bytes())
    })
}

#[test]
fn every_example_keeps_its_outputs_and_its_rows_agree_with_its_counts() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("examples/ exists")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    let mut with_rows = 0;
    for f in &files {
        let h = hsched_config::load(f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        if h.threads.iter().any(|t| t.workload.is_none()) {
            continue; // a live-mode-only example
        }
        let [(plain, trace, gantt), (mut rec, rec_trace, rec_gantt)] = both(&h, 3);
        let what = f.display().to_string();
        assert!(plain.jobs.is_empty(), "{what}");
        check_counts(&rec, &what);
        with_rows += usize::from(!rec.jobs.is_empty());
        rec.jobs.clear();
        assert_eq!(plain.to_json(), rec.to_json(), "{what}: report");
        assert!(trace == rec_trace, "{what}: trace");
        assert!(gantt == rec_gantt, "{what}: chart");
    }
    assert!(with_rows >= 5, "only {with_rows} examples have job rows");
}

/// Sporadic jobs, release jitter and rt-app programs, with a backlog: the
/// counts agree on random seeds, and a sporadic job's row starts at its
/// arrival.
#[test]
fn sporadic_jittered_and_program_rows_agree_with_the_counts() {
    let text = r#"
[[scheduler]]
name = "fp"
policy = "fp"

[[thread]]
name = "jit"
scheduler = "fp"
params = { priority = 3 }
workload = { kind = "periodic", period = "7ms", exec = "3ms", jitter = "4ms", deadline = "5ms" }

[[thread]]
name = "spor"
scheduler = "fp"
params = { priority = 2 }
workload = { kind = "sporadic", min_interarrival = "3ms", max_interarrival = "9ms", exec = "3ms", deadline = "6ms" }

[[thread]]
name = "prog"
scheduler = "fp"
params = { priority = 1 }
workload = { kind = "program", steps = [{ run = "2ms" }, { timer = "5ms" }] }
"#;
    let mut prog_done = 0;
    for seed in 0..20 {
        let opts = SimOptions {
            seed: Some(seed),
            ..with_jobs(0.5)
        };
        let r = sim_with(text, opts);
        check_counts(&r, &format!("seed {seed}"));
        // The three ask for 133 % of the processor: prog, the lowest
        // priority, may starve, and then has one unfinished job.
        for (name, least) in [("jit", 20), ("spor", 20), ("prog", 1)] {
            assert!(
                r.jobs.iter().filter(|j| &*j.thread == name).count() >= least,
                "seed {seed}: {name}"
            );
        }
        assert!(r.thread("spor").unwrap().deadline_misses > 0, "seed {seed}");
        // Jittered releases are within [nominal, nominal + jitter].
        for j in r.jobs.iter().filter(|j| &*j.thread == "jit") {
            let nominal = j.job * 7_000_000;
            assert_eq!(j.deadline_ns, nominal + 5_000_000, "seed {seed}: {j:?}");
            assert!(
                (nominal..=nominal + 4_000_000).contains(&j.release_ns),
                "seed {seed}: {j:?}"
            );
        }
        for j in r.jobs.iter().filter(|j| &*j.thread == "spor") {
            assert_eq!(
                j.deadline_ns,
                j.release_ns + 6_000_000,
                "seed {seed}: {j:?}"
            );
        }
        // A program's job runs from one timer expiry to the next.
        let prog: Vec<_> = r.jobs.iter().filter(|j| &*j.thread == "prog").collect();
        for j in &prog {
            assert_eq!(
                j.deadline_ns,
                j.release_ns + 5_000_000,
                "seed {seed}: {j:?}"
            );
        }
        prog_done += prog.iter().filter(|j| j.completion_ns.is_some()).count();
    }
    assert!(prog_done > 100, "{prog_done}");
}

#[test]
fn records_are_off_by_default_and_in_the_json_when_asked() {
    let plain = sim_with(RM, common::opts(0.032));
    assert!(plain.jobs.is_empty());
    assert!(!plain.to_json().contains("\"jobs\": ["));
    let rec = sim_with(RM, with_jobs(0.032));
    let v: serde_json::Value = serde_json::from_str(&rec.to_json()).unwrap();
    let jobs = v["jobs"].as_array().unwrap();
    assert_eq!(jobs.len(), 7);
    assert_eq!(
        jobs[5],
        serde_json::json!({
            "thread": "t2", "job": 1, "release_ns": 15_000_000u64,
            "deadline_ns": 30_000_000u64, "completion_ns": 24_000_000u64,
            "response_ns": 9_000_000u64, "lateness_ns": -6_000_000i64, "missed": false
        })
    );
    assert!(jobs[3]["completion_ns"].is_null());
}

/// The sizes docs/metrics.md gives for a record in the report.
#[test]
#[cfg(target_pointer_width = "64")]
fn a_record_takes_what_the_docs_say() {
    assert_eq!(std::mem::size_of::<JobRecord>(), 96);
}
