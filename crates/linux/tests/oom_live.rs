//! The fail-safe under a memory limit: the daemon and its watchdog run in
//! a memory cgroup that a memory hog fills; the OOM killer takes the
//! daemon (made its first choice here with `oom_score_adj` 1000, since
//! this test cannot count on `CAP_SYS_RESOURCE` to exempt the watchdog),
//! and afterwards no managed thread is left raised, pinned or frozen.
//! Needs root and the cgroup-v1 memory controller (skips without). Run
//! under `flock /tmp/hsched-live.lock`.

use hsched_linux::ctl::Client;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

static SERIAL: Mutex<()> = Mutex::new(());

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_hsched-live")
}

const MEMCG: &str = "/sys/fs/cgroup/memory";

/// A memory cgroup made for the test, removed after it (its processes
/// killed first).
struct MemCg(PathBuf);

impl MemCg {
    fn create(limit: u64) -> Option<MemCg> {
        let p = Path::new(MEMCG).join(format!("hsched-oom-test-{}", std::process::id()));
        std::fs::create_dir(&p).ok()?;
        let cg = MemCg(p);
        std::fs::write(cg.0.join("memory.limit_in_bytes"), limit.to_string()).ok()?;
        Some(cg)
    }
    fn procs(&self) -> Vec<i32> {
        std::fs::read_to_string(self.0.join("cgroup.procs"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect()
    }
}

impl Drop for MemCg {
    fn drop(&mut self) {
        for p in self.procs() {
            let _ = hsched_linux::sys::kill(p, libc::SIGKILL);
        }
        let t0 = Instant::now();
        while !self.procs().is_empty() && t0.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = std::fs::remove_dir(&self.0);
    }
}

fn in_cgroup(cg: &MemCg, program: &str, args: &[&str]) -> Command {
    let mut c = Command::new("sh");
    c.arg("-c")
        .arg(format!(
            "echo $$ > {}/cgroup.procs && exec \"$@\"",
            cg.0.display()
        ))
        .arg("sh")
        .arg(program)
        .args(args);
    c
}

fn restored(t: i32) -> bool {
    let all = hsched_linux::sys::get_affinity(0).unwrap();
    hsched_linux::sys::sched_getattr(t).ok().map(|a| a.policy) == Some(libc::SCHED_OTHER as u32)
        && hsched_linux::sys::get_affinity(t).ok() == Some(all)
        && hsched_linux::enforce::proc_state(t) == Some('R')
}

struct Kill(Vec<Child>);

impl Drop for Kill {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

#[test]
fn an_oom_killed_daemon_leaves_nothing_raised_pinned_or_frozen() {
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if let Err(e) = hsched_linux::check_support() {
        eprintln!("SKIPPED: {e}");
        return;
    }
    if !Path::new(MEMCG).join("memory.limit_in_bytes").exists() {
        eprintln!("SKIPPED: no cgroup-v1 memory controller at {MEMCG}");
        return;
    }
    let cpus = hsched_linux::sys::online_cpus();
    let _locks = hsched_linux::cpulock::CpuLocks::acquire_wait(
        &cpus,
        hsched_linux::cpulock::Sharing::WithChildren,
        Duration::from_secs(120),
    )
    .expect("the CPUs");
    let Some(cg) = MemCg::create(256 << 20) else {
        eprintln!("SKIPPED: cannot make a memory cgroup");
        return;
    };
    let dir = std::env::temp_dir().join(format!("hsched-oom-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("oom.toml");
    std::fs::write(
        &file,
        "default = \"fp\"\n[machine]\ncpus = 1\n[[scheduler]]\nname = \"fp\"\npolicy = \"fp\"\n",
    )
    .unwrap();
    let sock = dir.join("oom.sock");
    let cpu = cpus.last().unwrap().to_string();
    let file_s = file.display().to_string();
    let sock_s = sock.display().to_string();
    let daemon = in_cgroup(
        &cg,
        bin(),
        &[
            "run",
            &file_s,
            "--cpus",
            &cpu,
            "--duration",
            "30s",
            "--socket",
            &sock_s,
        ],
    )
    .stdout(Stdio::null())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let mut kids = Kill(vec![daemon]);
    let t0 = Instant::now();
    let mut c = loop {
        if let Ok(c) = Client::connect(&sock) {
            break c;
        }
        assert!(t0.elapsed() < Duration::from_secs(10), "no daemon socket");
        std::thread::sleep(Duration::from_millis(20));
    };
    // Two hogs outside the cgroup: one raised (it runs), one frozen.
    let hog = || {
        Command::new(bin())
            .args(["probe", "hog", "--duration", "30s"])
            .spawn()
            .unwrap()
    };
    let (h1, h2) = (hog(), hog());
    let (high, low) = (h1.id() as i32, h2.id() as i32);
    kids.0.push(h1);
    kids.0.push(h2);
    for (pid, prio) in [(high, 3), (low, 2)] {
        c.request(
            "attach",
            json!({"pid": pid, "scheduler": "fp", "params": {"priority": prio}}),
        )
        .unwrap();
    }
    let t0 = Instant::now();
    while hsched_linux::enforce::proc_state(low) != Some('D') {
        assert!(
            t0.elapsed() < Duration::from_secs(2),
            "the low hog is never frozen"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let daemon_pid = kids.0[0].id() as i32;
    let wd = hsched_linux::watchdog::find(daemon_pid).expect("the daemon's watchdog");
    // The OOM killer's first choice in the cgroup is the daemon.
    std::fs::write(format!("/proc/{daemon_pid}/oom_score_adj"), "1000").unwrap();
    // Fill the cgroup.
    let filler = in_cgroup(
        &cg,
        "python3",
        &[
            "-c",
            "import time\na=[]\nwhile True:\n  a.append(bytearray(8<<20))\n  time.sleep(0.005)\n",
        ],
    )
    .spawn()
    .unwrap();
    kids.0.push(filler);
    let t0 = Instant::now();
    let status = loop {
        if let Some(s) = kids.0[0].try_wait().unwrap() {
            break s;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "the daemon was never OOM-killed"
        );
        std::thread::sleep(Duration::from_millis(10));
    };
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(status.signal(), Some(libc::SIGKILL), "{status:?}");
    // The watchdog restores within a second of the daemon's death.
    let t0 = Instant::now();
    while !(restored(high) && restored(low)) {
        assert!(
            t0.elapsed() < Duration::from_secs(3),
            "threads left raised, pinned or frozen after the OOM kill (watchdog {wd} alive: {})",
            Path::new(&format!("/proc/{wd}")).exists()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    drop(kids);
    drop(cg);
    let _ = std::fs::remove_dir_all(&dir);
}
