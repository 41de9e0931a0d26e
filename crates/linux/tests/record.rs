//! `hsched record` on this machine: a real command's scheduling is traced
//! in a tracefs instance of its own, which is removed afterwards, and
//! `hsched import` reads the result. As root; skips with a message
//! otherwise (or without tracefs). No CPU lock is needed: recording changes
//! no thread.

use hsched_linux::record::{record, RecordOptions};

/// The tests look for this process's tracefs instances, so they take turns.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

fn supported() -> bool {
    if hsched_linux::sys::geteuid() != 0 {
        eprintln!("SKIPPED: recording needs root");
        return false;
    }
    if let Err(e) = hsched_linux::observe::tracefs() {
        eprintln!("SKIPPED: {e}");
        return false;
    }
    true
}

fn instances() -> Vec<String> {
    let Ok(root) = hsched_linux::observe::tracefs() else {
        return Vec::new();
    };
    std::fs::read_dir(root.join("instances"))
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with("hsched-record-"))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn a_recorded_shell_loop_imports_with_one_burst_per_wait() {
    let _turn = serial();
    if !supported() {
        return;
    }
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("record");
    std::fs::create_dir_all(&dir).unwrap();
    let output = dir.join("loop.trace");
    // The shell waits for each `sleep` child: it blocks at least once per
    // round, so its history has at least 10 bursts.
    let opts = RecordOptions {
        command: vec![
            "sh".into(),
            "-c".into(),
            "for i in 1 2 3 4 5 6 7 8 9 10; do sleep 0.02; done".into(),
        ],
        output: output.clone(),
        buffer_kib: 4096,
        all: false,
    };
    let r = record(&opts).expect("recording works as root");
    assert_eq!(r.status, 0);
    assert!(r.events > 0);
    assert_eq!(r.dropped, 0, "the buffer filled up");
    let mine = format!("hsched-record-{}-", std::process::id());
    assert!(
        !instances().iter().any(|n| n.starts_with(&mine)),
        "the tracefs instance was not removed"
    );
    let text = std::fs::read_to_string(&output).unwrap();
    let trace = hsched_config::parse_sched_trace(&text, "loop.trace").expect("the trace imports");
    let sh = trace
        .threads
        .get(&(r.pid as u32))
        .unwrap_or_else(|| panic!("the shell (pid {}) is not in the trace", r.pid));
    assert!(sh.bursts.len() >= 10, "{} bursts", sh.bursts.len());
    assert!(sh.exited);
    // Ten sleeps of 20 ms: at least 200 ms asleep between its bursts.
    let slept: u64 = sh.bursts.iter().filter_map(|b| b.sleep).map(|d| d.0).sum();
    assert!(slept >= 190_000_000, "slept {slept} ns");
    let sleeps = trace.by_comm("sleep");
    assert!(sleeps.len() >= 10, "{} sleep processes", sleeps.len());
}

#[test]
fn a_command_that_cannot_start_records_nothing() {
    let _turn = serial();
    if !supported() {
        return;
    }
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("record");
    std::fs::create_dir_all(&dir).unwrap();
    let output = dir.join("none.trace");
    let _ = std::fs::remove_file(&output);
    let opts = RecordOptions {
        command: vec!["hsched-no-such-program".into()],
        output: output.clone(),
        buffer_kib: 64,
        all: false,
    };
    let e = record(&opts).unwrap_err();
    assert!(
        matches!(&e, hsched_linux::LiveError::Setup(m) if m.contains("not found")),
        "{e}"
    );
    assert!(!output.exists(), "an output was written");
    let mine = format!("hsched-record-{}-", std::process::id());
    assert!(!instances().iter().any(|n| n.starts_with(&mine)));
}

/// The pid that ran a trace line (`comm-PID [cpu] ...`) and the other
/// thread it names (`next_pid` of a switch, `pid` of a wake-up).
fn line_pids(line: &str) -> Option<(u32, u32)> {
    let (head, rest) = line.split_once(" [")?;
    let current = head.trim().rsplit_once('-')?.1.parse().ok()?;
    let (_, fields) = rest.split_once(": sched_")?;
    let key = if fields.starts_with("switch:") {
        "next_pid="
    } else {
        " pid="
    };
    let other = fields
        .split_once(key)?
        .1
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    Some((current, other))
}

/// Lines of a trace in which neither thread is the command (pid `root`) or
/// one of the threads and processes it created (traced `sched_wakeup_new`
/// from a thread of the command).
fn lines_outside(text: &str, root: u32) -> usize {
    let mut tree = std::collections::BTreeSet::from([root]);
    let mut outside = 0;
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let Some((current, other)) = line_pids(line) else {
            continue;
        };
        if line.contains(": sched_wakeup_new:") && tree.contains(&current) {
            tree.insert(other);
        }
        if !tree.contains(&current) && !tree.contains(&other) {
            outside += 1;
        }
    }
    outside
}

#[test]
fn a_recording_keeps_to_the_command_and_its_children_unless_all() {
    let _turn = serial();
    if !supported() {
        return;
    }
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("record");
    std::fs::create_dir_all(&dir).unwrap();
    // A busy neighbour that is not the command: its wake-ups and switches
    // are the machine's, not the command's.
    let mut neighbour = std::process::Command::new("sh")
        .args(["-c", "for i in $(seq 100); do sleep 0.005; done"])
        .spawn()
        .unwrap();
    let mut outside = Vec::new();
    for all in [false, true] {
        let output = dir.join(format!("children-{all}.trace"));
        let opts = RecordOptions {
            command: vec![
                "sh".into(),
                "-c".into(),
                "for i in 1 2 3 4 5; do sleep 0.02; done".into(),
            ],
            output: output.clone(),
            buffer_kib: 4096,
            all,
        };
        let r = record(&opts).expect("recording works as root");
        assert_eq!(r.status, 0);
        assert_eq!(r.dropped, 0, "the buffer filled up");
        let text = std::fs::read_to_string(&output).unwrap();
        let trace = hsched_config::parse_sched_trace(&text, "children.trace").unwrap();
        assert!(trace.threads.contains_key(&(r.pid as u32)), "all={all}");
        // The command's children are followed from their first event.
        assert!(trace.by_comm("sleep").len() >= 5, "all={all}");
        outside.push(lines_outside(&text, r.pid as u32));
    }
    let _ = neighbour.kill();
    let _ = neighbour.wait();
    assert_eq!(outside[0], 0, "events of other threads were recorded");
    assert!(outside[1] > 0, "--all recorded only the command");
}
