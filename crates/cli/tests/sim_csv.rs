//! `hsched sim --csv DIR`: the per-thread and per-scheduler tables as CSV,
//! with the same figures as the JSON report.

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
