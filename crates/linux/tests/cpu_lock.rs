//! One daemon per CPU, live (crates/linux/src/cpulock.rs): a second daemon
//! asking for a CPU another one manages is refused at start, daemons on
//! different CPUs run side by side, and the lock dies with a daemon killed
//! by SIGKILL. As root; skips with a message otherwise.

use hsched_linux::cpulock::{lock_path, CpuLocks, Sharing};
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_hsched-live")
}

fn hierarchy() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("hsched-cpu-lock-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join("ts.toml");
    std::fs::File::create(&p)
        .unwrap()
        .write_all(
            br#"
default = "ts"
[[scheduler]]
name = "ts"
policy = "ts"
[[thread]]
name = "tick"
workload = { kind = "periodic", period = "20ms", exec = "1ms" }
"#,
        )
        .unwrap();
    p
}

fn daemon(file: &PathBuf, cpus: &str, duration: &str) -> Command {
    let mut c = Command::new(bin());
    c.arg("run")
        .arg(file)
        .args(["--cpus", cpus, "--duration", duration, "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

/// The pid the holder of `cpu`'s lock wrote, if any.
fn holder(cpu: usize) -> Option<u32> {
    std::fs::read_to_string(lock_path(cpu))
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

#[test]
fn a_second_daemon_on_a_cpu_is_refused_and_other_cpus_work_side_by_side() {
    if let Err(e) = hsched_linux::check_support() {
        eprintln!("SKIPPED: {e}");
        return;
    }
    let online = hsched_linux::sys::online_cpus();
    if online.len() < 2 {
        eprintln!("SKIPPED: needs two CPUs");
        return;
    }
    let (c0, c1) = (online[0], *online.last().unwrap());
    // Wait (bounded) until no other daemon or test manages these CPUs, then
    // let go: the daemons below take the locks themselves. (Another live
    // run starting in between would make this test fail, not pass.)
    drop(
        CpuLocks::acquire_wait(&[c0, c1], Sharing::Exclusive, Duration::from_secs(120))
            .unwrap_or_else(|e| panic!("CPUs {c0} and {c1} stayed busy for 120 s: {e}")),
    );
    let file = hierarchy();
    let a_runs = Duration::from_secs(4);
    let mut a = daemon(&file, &c1.to_string(), "4s").spawn().unwrap();
    let t0 = Instant::now();
    while holder(c1) != Some(a.id()) {
        if let Some(st) = a.try_wait().unwrap() {
            let out = a.wait_with_output().unwrap();
            panic!(
                "the first daemon ended early ({st}): {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "the first daemon never took CPU {c1}'s lock"
        );
        std::thread::sleep(Duration::from_millis(20));
    }

    // Same CPU: refused at once, exit status 3, naming the CPU and holder.
    let t = Instant::now();
    let b = daemon(&file, &c1.to_string(), "1s").output().unwrap();
    let err = String::from_utf8_lossy(&b.stderr);
    eprintln!("second daemon: {err}");
    assert_eq!(b.status.code(), Some(3), "{err}");
    assert!(
        err.contains(&format!("CPU {c1} ")) && err.contains(&format!("pid {}", a.id())),
        "{err}"
    );
    assert!(b.stdout.is_empty(), "a refused daemon printed a report");
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "refusal took {:?}",
        t.elapsed()
    );
    // Both CPUs, one of them held: refused too, and CPU c0 is let go again.
    let b2 = daemon(&file, &format!("{c0},{c1}"), "1s").output().unwrap();
    assert_eq!(
        b2.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&b2.stderr)
    );

    // Another CPU: runs beside the first daemon, which is not disturbed.
    let c = daemon(&file, &c0.to_string(), "1s").output().unwrap();
    let cerr = String::from_utf8_lossy(&c.stderr);
    assert!(c.status.success(), "daemon on CPU {c0}: {cerr}");
    let r: serde_json::Value = serde_json::from_slice(&c.stdout).unwrap();
    assert_eq!(r["mode"], "live");
    assert!(
        a.try_wait().unwrap().is_none(),
        "the first daemon ended while the second ran"
    );
    assert_eq!(holder(c1), Some(a.id()));

    // SIGKILL: the lock dies with the daemon (the watchdog and the workload
    // processes it forked do not keep it).
    a.kill().unwrap();
    let t = Instant::now();
    let l = loop {
        if let Ok(l) = CpuLocks::try_acquire(&[c1], Sharing::Exclusive) {
            break l;
        }
        assert!(
            t.elapsed() < Duration::from_secs(1),
            "CPU {c1}'s lock outlived the killed daemon"
        );
        std::thread::sleep(Duration::from_millis(10));
    };
    eprintln!("lock free {:?} after SIGKILL", t.elapsed());
    assert_eq!(l.taken(), vec![c1]);
    drop(l);
    let _ = a.wait();
    // The killed daemon's workload program ends at the end of its run; let
    // it, and the watchdog's restoring, finish before the next test binary.
    std::thread::sleep((a_runs + Duration::from_millis(300)).saturating_sub(t0.elapsed()));
}
