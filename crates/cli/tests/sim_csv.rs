//! `hsched sim --csv DIR`: the per-thread and per-scheduler tables as CSV,
//! with the same figures as the JSON report, and the per-job records of
//! `--job-records` as DIR/jobs.csv.

use std::process::Command;

fn hsched(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_hsched"))
        .args(args)
        .output()
        .expect("run hsched")
}

#[test]
fn sim_csv_writes_one_row_per_thread_and_scheduler() {
    let dir = std::env::temp_dir().join(format!("hsched-csv-{}", std::process::id()));
    let root = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/home-computer.toml"
    );
    let o = hsched(&[
        "sim",
        root,
        "--duration",
        "1s",
        "--csv",
        dir.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let threads = std::fs::read_to_string(dir.join("threads.csv")).unwrap();
    let mut lines = threads.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    assert_eq!(&header[..3], ["name", "scheduler", "principal"]);
    assert!(header.contains(&"dispatch_latency_p99_ns") && header.contains(&"lateness_count"));
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    assert_eq!(rows.len(), 8);
    assert!(rows.iter().all(|r| r.len() == header.len()));
    // The same figures as the JSON report.
    let json = hsched(&["sim", root, "--duration", "1s", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    let col = header.iter().position(|h| *h == "cpu_ns").unwrap();
    for (row, t) in rows.iter().zip(v["threads"].as_array().unwrap()) {
        assert_eq!(row[0], t["name"].as_str().unwrap());
        assert_eq!(row[col], t["cpu_ns"].to_string());
    }
    let scheds = std::fs::read_to_string(dir.join("schedulers.csv")).unwrap();
    assert!(scheds.starts_with("name,policy,supply_ns,share,live\n"));
    assert_eq!(scheds.lines().count(), 1 + 8);
    let _ = std::fs::remove_dir_all(&dir);
    let bad = hsched(&[
        "sim",
        root,
        "--duration",
        "1s",
        "--csv",
        "/proc/no/such/dir",
    ]);
    assert_eq!(bad.status.code(), Some(2));
}

/// Two rate-monotonic tasks on one processor, for 32 ms: t1 (3 ms every
/// 10 ms, the higher priority) and t2 (6 ms every 15 ms).
///
/// ```text
/// t1 | 0-3 |      | 10-13 |       | 20-23 |    | 30-32 (unfinished)
/// t2 |     | 3-9  |       | 15-20 |       | 23-24 |
/// ```
/// t2's second job, released at 15 and due at 30, is preempted at 20 by
/// t1 and finishes at 24: response 9 ms, lateness −6 ms. At 30 both
/// release again; neither of those jobs finishes by 32, and neither is
/// due by then.
const RM: &str = include_str!("../../sim/tests/common/two_rm_tasks.toml");

#[test]
fn job_records_write_jobs_csv_with_the_schedule_by_hand() {
    let dir = std::env::temp_dir().join(format!("hsched-jobs-csv-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("rm.toml");
    std::fs::write(&file, RM).unwrap();
    let out = dir.join("tables");
    let (file, out_s) = (file.to_str().unwrap(), out.to_str().unwrap());
    let o = hsched(&[
        "sim",
        file,
        "--duration",
        "32ms",
        "--csv",
        out_s,
        "--job-records",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let jobs = std::fs::read_to_string(out.join("jobs.csv")).unwrap();
    let ms = 1_000_000i64;
    let row = |t: &str, k: u64, rel: i64, dl: i64, done: Option<i64>, missed: bool| {
        let cell = |v: Option<i64>| v.map_or(String::new(), |v| (v * ms).to_string());
        format!(
            "{t},{k},{},{},{},{},{},{missed}",
            rel * ms,
            dl * ms,
            cell(done),
            cell(done.map(|d| d - rel)),
            cell(done.map(|d| d - dl)),
        )
    };
    let expected = [
        "thread,job,release_ns,deadline_ns,completion_ns,response_ns,lateness_ns,missed".into(),
        row("t1", 0, 0, 10, Some(3), false),
        row("t1", 1, 10, 20, Some(13), false),
        row("t1", 2, 20, 30, Some(23), false),
        row("t1", 3, 30, 40, None, false),
        row("t2", 0, 0, 15, Some(9), false),
        row("t2", 1, 15, 30, Some(24), false),
        row("t2", 2, 30, 45, None, false),
    ];
    assert_eq!(jobs.lines().collect::<Vec<_>>(), expected);
    assert!(jobs.contains("\nt2,1,15000000,30000000,24000000,9000000,-6000000,false\n"));
    // The other tables are those of a run without records.
    let plain = dir.join("plain");
    let o = hsched(&[
        "sim",
        file,
        "--duration",
        "32ms",
        "--csv",
        plain.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(!plain.join("jobs.csv").exists());
    for name in ["threads.csv", "schedulers.csv"] {
        assert_eq!(
            std::fs::read_to_string(plain.join(name)).unwrap(),
            std::fs::read_to_string(out.join(name)).unwrap(),
            "{name}"
        );
    }
    // --json carries the same rows, and nothing else changes.
    let json = hsched(&["sim", file, "--duration", "32ms", "--json", "--job-records"]);
    let mut v: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    let rows = v["jobs"].as_array().unwrap();
    assert_eq!(rows.len(), 7);
    assert_eq!(rows[5]["lateness_ns"], -6 * ms);
    assert!(rows[6]["completion_ns"].is_null());
    v.as_object_mut().unwrap().remove("jobs");
    let json = hsched(&["sim", file, "--duration", "32ms", "--json"]);
    let w: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(v, w);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn job_records_need_somewhere_to_go() {
    let root = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/home-computer.toml"
    );
    let o = hsched(&["sim", root, "--duration", "1s", "--job-records"]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("--job-records") && err.contains("--csv"),
        "{err}"
    );
    let o = hsched(&["sim", root, "--runs", "2", "--job-records"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("--runs"));
}
