//! One daemon per CPU, live (crates/linux/src/cpulock.rs): a second daemon
//! asking for a CPU another one manages is refused at start, daemons on
//! different CPUs run side by side, and the lock dies with a daemon killed
//! by SIGKILL. As root; skips with a message otherwise.

use hsched_linux::cpulock::{lock_path, CpuLocks, Sharing};
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The tests of this file share the CPUs: one at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

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
    let _s = serial();
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
    // Neither serves the default control socket, which only one could.
    let mut a = daemon(&file, &c1.to_string(), "4s")
        .arg("--no-socket")
        .spawn()
        .unwrap();
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
    let c = daemon(&file, &c0.to_string(), "1s")
        .arg("--no-socket")
        .output()
        .unwrap();
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

/// Whether thread `tid` is back as it was: `SCHED_OTHER`, affinity `all`,
/// out of hsched's freezer cgroups (so thawed). Not its `/proc` state: the
/// kernel's teardown of the dead daemon's perf events can keep a thawed
/// thread in `D` (`synchronize_rcu_tasks_trace`) for a few hundred ms.
fn restored(tid: i32, all: &hsched_linux::sys::CpuMask) -> bool {
    let cg = std::fs::read_to_string(format!("/proc/{tid}/cgroup")).unwrap_or_default();
    hsched_linux::sys::sched_getattr(tid).ok().map(|a| a.policy) == Some(libc::SCHED_OTHER as u32)
        && hsched_linux::sys::get_affinity(tid).ok().as_ref() == Some(all)
        && cg.lines().any(|l| l.ends_with(":freezer:/"))
}

#[test]
fn after_sigkill_the_cpu_stays_locked_until_the_watchdog_has_restored() {
    let _s = serial();
    if let Err(e) = hsched_linux::check_support() {
        eprintln!("SKIPPED: {e}");
        return;
    }
    let c = *hsched_linux::sys::online_cpus().last().unwrap();
    drop(
        CpuLocks::acquire_wait(&[c], Sharing::Exclusive, Duration::from_secs(120))
            .unwrap_or_else(|e| panic!("CPU {c} stayed busy for 120 s: {e}")),
    );
    // TS: ten hogs take turns, one granted at SCHED_FIFO and nine frozen
    // at any moment, so the watchdog has ten threads to put back.
    let dir = std::env::temp_dir().join(format!("hsched-cpu-lock-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("ts10.toml");
    let mut text =
        String::from("default = \"ts\"\n[[scheduler]]\nname = \"ts\"\npolicy = \"ts\"\n");
    for i in 0..10 {
        text.push_str(&format!(
            "[[thread]]\nname = \"hog{i}\"\nworkload = {{ kind = \"cpu-bound\" }}\n"
        ));
    }
    std::fs::write(&file, text).unwrap();
    let sock = dir.join("d.sock");
    let _ = std::fs::remove_file(&sock);
    let mut a = daemon(&file, &c.to_string(), "6s")
        .arg("--socket")
        .arg(&sock)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    let tids: Vec<i32> = loop {
        let shown = hsched_linux::ctl::Client::connect(&sock)
            .ok()
            .and_then(|mut cl| cl.request("show", serde_json::json!({})).ok());
        if let Some(tree) = shown {
            let v: Vec<i32> = tree["threads"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|t| t["tid"].as_i64())
                        .map(|t| t as i32)
                        .collect()
                })
                .unwrap_or_default();
            if v.len() == 10 {
                break v;
            }
        }
        assert!(
            a.try_wait().unwrap().is_none(),
            "the daemon ended early: {}",
            String::from_utf8_lossy(&a.wait_with_output().unwrap().stderr)
        );
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "no 10 managed threads"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let all = hsched_linux::sys::get_affinity(0).unwrap();
    // Wait until every hog has run and closed the descriptors it inherited
    // from the daemon (a workload forked by the daemon and frozen before it
    // first ran still has them, the CPU lock included), and until the
    // hierarchy freezes the ones it does not run.
    let has_lock_fd = |t: i32| {
        std::fs::read_dir(format!("/proc/{t}/fd")).is_ok_and(|d| {
            d.flatten()
                .any(|e| std::fs::read_link(e.path()).is_ok_and(|l| l == lock_path(c)))
        })
    };
    let t1 = Instant::now();
    while tids.iter().any(|&t| has_lock_fd(t))
        || tids
            .iter()
            .filter(|&&t| hsched_linux::enforce::proc_state(t) == Some('D'))
            .count()
            < 5
    {
        assert!(
            t1.elapsed() < Duration::from_secs(5),
            "the hogs never all ran, or were never frozen"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(holder(c), Some(a.id()));
    // The watchdog is the daemon's child named `hsched-watchdog`. Stop it
    // before the kill, so that its restoring visibly takes a while (it
    // takes about a millisecond otherwise, too fast to tell the lock's
    // release from it); the guard lets it go again even if the test fails.
    let daemon_pid = a.id() as i32;
    let wd =
        hsched_linux::watchdog::find(daemon_pid).expect("no watchdog among the daemon's children");
    struct Resume(i32);
    impl Drop for Resume {
        fn drop(&mut self) {
            let _ = hsched_linux::sys::kill(self.0, libc::SIGCONT);
        }
    }
    let resume = Resume(wd);
    hsched_linux::sys::kill(wd, libc::SIGSTOP).unwrap();

    a.kill().unwrap();
    let killed = Instant::now();
    let _ = a.wait();
    // The daemon is gone, its threads are not restored yet: the CPU must
    // stay locked (before, the lock died with the daemon).
    let stopped_for = Duration::from_millis(300);
    let mut refused = 0u32;
    let mut holders = std::collections::BTreeSet::new();
    let mut resumed = false;
    let lock = loop {
        if !resumed && killed.elapsed() >= stopped_for {
            resumed = true;
            hsched_linux::sys::kill(wd, libc::SIGCONT).unwrap();
        }
        match CpuLocks::try_acquire(&[c], Sharing::Exclusive) {
            Ok(l) => break l,
            Err(hsched_linux::cpulock::LockError::Busy { holder, .. }) => {
                refused += 1;
                holders.insert(holder);
            }
            Err(e) => panic!("{e}"),
        }
        assert!(
            killed.elapsed() < Duration::from_secs(3),
            "CPU {c} still locked 3 s after SIGKILL"
        );
        std::thread::sleep(Duration::from_micros(200));
    };
    drop(resume);
    let free = killed.elapsed();
    // The moment the CPU can be taken, every thread is back.
    // (tid, policy, state, affinity) of each thread not restored yet.
    let not_back: Vec<String> = tids
        .iter()
        .copied()
        .filter(|&t| !restored(t, &all))
        .map(|t| {
            format!(
                "{t}: policy {:?}, state {:?}, CPUs {:?}",
                hsched_linux::sys::sched_getattr(t).ok().map(|a| a.policy),
                hsched_linux::enforce::proc_state(t),
                hsched_linux::sys::get_affinity(t)
                    .map(|m| m.cpus())
                    .unwrap_or_default()
            )
        })
        .collect();
    eprintln!(
        "lock free {free:?} after SIGKILL, refused {refused} times (holders {holders:?}); not restored then: {not_back:?}"
    );
    assert!(
        not_back.is_empty(),
        "CPU {c} was free again while threads {not_back:?} were not restored yet"
    );
    assert!(
        resumed && free >= stopped_for,
        "CPU {c} was free {free:?} after SIGKILL, while the watchdog was still stopped"
    );
    assert!(
        free < stopped_for + Duration::from_secs(1),
        "lock held {free:?}"
    );
    assert!(refused > 0);
    drop(lock);
    for &t in &tids {
        let _ = hsched_linux::sys::kill(t, libc::SIGKILL);
    }
    let _ = std::fs::remove_dir_all(&dir);
}
