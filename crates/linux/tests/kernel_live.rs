//! Live tests of the kernel backend (`hsched run --enforce kernel`), as
//! root: a reservation thread is a `SCHED_DEADLINE` server that meets every
//! deadline beside CPU hogs; a stopped daemon leaves the kernel enforcing
//! the reservation until the watchdog restores everything, and a killed one
//! leaves every thread and cgroup restored; a hierarchy the kernel cannot
//! enforce is refused before anything changes. Each test says SKIPPED
//! without root or without `SCHED_DEADLINE`; each run is bounded by
//! `--duration` and by the test's own deadline. Run them under
//! `flock /tmp/hsched-live.lock` beside other live tests.

use serde_json::Value;
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

static SERIAL: Mutex<()> = Mutex::new(());

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_hsched-live")
}

struct Guard {
    _cpus: hsched_linux::cpulock::CpuLocks,
    _serial: std::sync::MutexGuard<'static, ()>,
}

/// `Some` when the kernel backend can run here (root, SCHED_DEADLINE),
/// holding every CPU's lock for the daemons the test starts.
fn kernel_live() -> Option<Guard> {
    let g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if hsched_linux::sys::geteuid() != 0 {
        eprintln!("SKIPPED: the kernel backend needs root");
        return None;
    }
    if !std::path::Path::new("/proc/sys/kernel/sched_rt_runtime_us").exists() {
        eprintln!("SKIPPED: no SCHED_DEADLINE here");
        return None;
    }
    let cpus = hsched_linux::sys::online_cpus();
    let l = hsched_linux::cpulock::CpuLocks::acquire_wait(
        &cpus,
        hsched_linux::cpulock::Sharing::WithChildren,
        Duration::from_secs(120),
    )
    .unwrap_or_else(|e| panic!("the kernel live tests need CPUs {cpus:?}: {e}"));
    Some(Guard {
        _cpus: l,
        _serial: g,
    })
}

fn write_file(name: &str, text: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("hsched-kernel-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::File::create(&p)
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    p
}

/// `hsched-live run FILE --enforce kernel --duration D --no-socket`, and
/// `extra`, to its end.
fn run_kernel(file: &std::path::Path, duration: &str, extra: &[&str]) -> std::process::Output {
    kernel_command(file, duration, extra).output().unwrap()
}

/// The same, started with its output piped, for a test to look at the
/// run while it lasts.
fn spawn_kernel(file: &std::path::Path, duration: &str, extra: &[&str]) -> std::process::Child {
    kernel_command(file, duration, extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn kernel_command(file: &std::path::Path, duration: &str, extra: &[&str]) -> Command {
    let mut c = Command::new(bin());
    c.arg("run")
        .arg(file)
        .args(["--enforce", "kernel", "--duration", duration, "--no-socket"])
        .args(extra);
    c
}

/// The daemon's children: its watchdog and its programs.
fn children(daemon: i32) -> Vec<i32> {
    std::fs::read_to_string(format!("/proc/{daemon}/task/{daemon}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

/// Program `name` of a run's JSON report.
fn program(report: &Value, name: &str) -> Value {
    report["programs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == name)
        .cloned()
        .unwrap_or_else(|| panic!("no program {name} in {report}"))
}

fn policy(tid: i32) -> Option<u32> {
    hsched_linux::sys::sched_getattr(tid).ok().map(|a| a.policy)
}

fn hsched_cgroups() -> Vec<String> {
    let Some(m) = hsched_linux::kernel::apply::cpu_mount() else {
        return Vec::new();
    };
    std::fs::read_dir(m)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with("hsched-"))
                .collect()
        })
        .unwrap_or_default()
}

/// The partitions (exclusive cpusets) runs left, and the top cpuset's
/// balancing.
fn hsched_cpusets() -> (Vec<String>, String) {
    let Some(m) = hsched_linux::cpuset::mount() else {
        return (Vec::new(), String::new());
    };
    let left = std::fs::read_dir(&m)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with("hsched-"))
                .collect()
        })
        .unwrap_or_default();
    let balance = std::fs::read_to_string(m.join("cpuset.sched_load_balance")).unwrap_or_default();
    (left, balance.trim().to_string())
}

fn cpuset_of(tid: i32) -> String {
    std::fs::read_to_string(format!("/proc/{tid}/cpuset"))
        .unwrap_or_default()
        .trim()
        .to_string()
}

const HOGS: &str = r#"
[[thread]]
name = "hog"
count = 4
scheduler = "TS"
workload = { kind = "cpu-bound" }
"#;

/// A reservation of 3 ms every 10 ms for `rt` under a fixed-priority root
/// on `cpus` CPUs, time sharing below it.
fn reservation_file(cpus: usize, rt: &str) -> String {
    format!(
        r#"
[machine]
cpus = {cpus}
[[scheduler]]
name = "FP"
policy = "fp"
[[scheduler]]
name = "RES"
policy = "rez"
parent = "FP"
params = {{ priority = 2 }}
[[scheduler]]
name = "TS"
policy = "ts"
parent = "FP"
params = {{ priority = 1 }}
[[thread]]
name = "rt"
scheduler = "RES"
params = {{ amount = "3ms", period = "10ms" }}
{rt}
{HOGS}"#
    )
}

/// A 2 ms job every 20 ms under a 6 ms / 20 ms server, which the analysis
/// guarantees `RESBH 2 20` at HZ=250 (6 ms less a tick; kernel/compile.rs):
/// every deadline is met but for the host's own disturbances, which the
/// test allows up to 1 %. (Under a 3 ms / 10 ms server, not longer than
/// the tick and so promised nothing, 0–1 misses in 400 were seen here
/// and once 6 in a CI run.)
#[test]
fn a_reservation_thread_meets_its_deadlines_beside_four_hogs() {
    let Some(_g) = kernel_live() else { return };
    let file = write_file(
        "rez.toml",
        // Both CPUs, two hogs on each: wherever global EDF puts the server,
        // it preempts a hog.
        &reservation_file(
            2,
            r#"workload = { kind = "periodic", period = "20ms", exec = "2ms" }"#,
        )
        .replace(
            r#"amount = "3ms", period = "10ms""#,
            r#"amount = "6ms", period = "20ms""#,
        ),
    );
    let out = run_kernel(&file, "4s", &["--json"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let prog = |n: &str| program(&v, n);
    let rt = prog("rt");
    let jobs = rt["jobs"].as_u64().unwrap();
    assert!(jobs >= 190, "{rt}");
    let misses = rt["deadline_misses"].as_u64().unwrap();
    assert!(misses <= jobs / 100, "{misses} of {jobs} missed: {rt}");
    // The hogs run beside it (the reservation takes only its own time; how
    // much the hogs get depends on what else this machine runs).
    for k in 0..4 {
        let h = prog(&format!("hog.{k}"));
        assert!(h["share"].as_f64().unwrap() > 0.02, "{h}");
    }
    assert!(hsched_cgroups().is_empty(), "left {:?}", hsched_cgroups());
}

#[test]
fn a_stopped_daemon_leaves_the_kernel_enforcing_then_a_killed_one_leaves_everything_restored() {
    let Some(_g) = kernel_live() else { return };
    let (_, balance) = hsched_cpusets();
    let file = write_file(
        "stop.toml",
        &reservation_file(1, r#"exec = ["sh", "-c", "while :; do :; done"]"#).replace(
            HOGS,
            r#"
[[thread]]
name = "fair"
scheduler = "TS"
exec = ["sh", "-c", "while :; do :; done"]
"#,
        ),
    );
    let mut daemon = Command::new(bin())
        .args([
            "run",
            file.to_str().unwrap(),
            "--enforce",
            "kernel",
            "--duration",
            "30s",
            "--no-socket",
        ])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let dpid = daemon.id() as i32;
    let deadline = Instant::now() + Duration::from_secs(10);
    // The daemon's children: the watchdog and the two programs.
    let (rt, fair) = loop {
        assert!(Instant::now() < deadline, "the programs never started");
        let kids = children(dpid);
        let rt = kids.iter().copied().find(|&k| policy(k) == Some(6));
        // In a cpu cgroup of the run (every thread is in its cpuset).
        let fair = kids.iter().copied().find(|&k| {
            std::fs::read_to_string(format!("/proc/{k}/cgroup")).is_ok_and(|c| {
                c.lines().any(|l| {
                    let f: Vec<&str> = l.splitn(3, ':').collect();
                    f.len() == 3 && f[1].split(',').any(|x| x == "cpu") && f[2].contains("/hsched-")
                })
            })
        });
        if let (Some(r), Some(f)) = (rt, fair) {
            break (r, f);
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let attr = hsched_linux::sys::sched_getattr(rt).unwrap();
    assert_eq!((attr.runtime, attr.period), (3_000_000, 10_000_000));
    // A file for one CPU of several: its root is a root domain of its own,
    // the server pinned there.
    if hsched_linux::sys::online_cpus().len() > 1 && hsched_linux::cpuset::mount().is_some() {
        assert!(cpuset_of(rt).starts_with("/hsched-"), "{}", cpuset_of(rt));
        assert_eq!(hsched_linux::sys::get_affinity(rt).unwrap().cpus().len(), 1);
        assert_eq!(hsched_cpusets().1, "0");
    }
    // Stopped, the daemon decides nothing, yet the busy reservation thread
    // keeps to its 30 % until the watchdog restores it.
    let cpu = |t: i32| hsched_linux::enforce::proc_cpu_ns(t).unwrap();
    hsched_linux::sys::kill(dpid, libc::SIGSTOP).unwrap();
    let (c0, t0) = (cpu(rt), Instant::now());
    std::thread::sleep(Duration::from_millis(200));
    let share = (cpu(rt) - c0) as f64 / t0.elapsed().as_nanos() as f64;
    assert_eq!(policy(rt), Some(6), "restored too early");
    // 3 ms per 10 ms, and at most one 4 ms tick of overrun in 200 ms.
    assert!(
        share < 0.3 + 0.04 + 0.02,
        "the stopped daemon's reservation thread ran {share:.3} of a CPU"
    );
    assert!(share > 0.2, "the reservation thread got only {share:.3}");
    // The watchdog restores a stopped daemon's threads within its bound.
    let back = Instant::now() + Duration::from_secs(3);
    while policy(rt) == Some(6) && Instant::now() < back {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(
        policy(rt),
        Some(0),
        "the watchdog did not restore the stopped daemon's server"
    );
    hsched_linux::sys::kill(dpid, libc::SIGKILL).unwrap();
    let _ = daemon.wait();
    let back = Instant::now() + Duration::from_secs(3);
    while !hsched_cgroups().is_empty() && Instant::now() < back {
        std::thread::sleep(Duration::from_millis(20));
    }
    let fair_cg = std::fs::read_to_string(format!("/proc/{fair}/cgroup")).unwrap();
    let mine = std::fs::read_to_string("/proc/self/cgroup").unwrap();
    let cpu_line = |s: &str| {
        s.lines()
            .find(|l| {
                l.split(':')
                    .nth(1)
                    .is_some_and(|c| c.split(',').any(|x| x == "cpu"))
            })
            .map(String::from)
    };
    assert_eq!(
        cpu_line(&fair_cg),
        cpu_line(&mine),
        "the fair thread is still in a cgroup of the run"
    );
    assert!(hsched_cgroups().is_empty(), "left {:?}", hsched_cgroups());
    assert_eq!(hsched_cpusets(), (Vec::new(), balance));
    let all = hsched_linux::sys::online_cpus();
    // Looked at, then ended before any assertion: a failing one must not
    // leave the busy loops running.
    let seen: Vec<_> = [rt, fair]
        .iter()
        .map(|&t| {
            let got = (
                cpuset_of(t),
                policy(t),
                hsched_linux::sys::get_affinity(t).map(|m| m.cpus()).ok(),
            );
            let _ = hsched_linux::sys::kill(t, libc::SIGKILL);
            got
        })
        .collect();
    for got in seen {
        assert_eq!(got, ("/".to_string(), Some(0), Some(all.clone())));
    }
}

/// Two roots on CPUs of their own: each is a root domain (an exclusive
/// cpuset), so its servers are pinned and admitted there (partitioned
/// EDF), and the cpusets and the top cpuset's balancing are put back.
#[test]
fn roots_on_their_own_cpus_get_root_domains_of_their_own_and_give_them_back() {
    let Some(_g) = kernel_live() else { return };
    let online = hsched_linux::sys::online_cpus();
    if online.len() < 2 || hsched_linux::cpuset::mount().is_none() {
        eprintln!("SKIPPED: needs two CPUs and the cgroup-v1 cpuset controller");
        return;
    }
    let (_, balance) = hsched_cpusets();
    let file = write_file(
        "partitions.toml",
        r#"
[machine]
cpus = 2
[[scheduler]]
name = "A"
policy = "rez"
cpus = [0]
[[scheduler]]
name = "B"
policy = "fp"
cpus = [1]
[[scheduler]]
name = "RB"
policy = "rez"
parent = "B"
params = { priority = 2 }
[[scheduler]]
name = "TS"
policy = "ts"
parent = "B"
params = { priority = 1 }
[[thread]]
name = "a"
count = 2
scheduler = "A"
params = { amount = "6ms", period = "40ms" }
workload = { kind = "periodic", period = "40ms", exec = "2ms" }
[[thread]]
name = "b"
scheduler = "RB"
params = { amount = "12ms", period = "20ms" }
workload = { kind = "periodic", period = "20ms", exec = "8ms" }
[[thread]]
name = "hog"
count = 2
scheduler = "TS"
workload = { kind = "cpu-bound" }
"#,
    );
    let daemon = Command::new(bin())
        .args([
            "run",
            file.to_str().unwrap(),
            "--enforce",
            "kernel",
            "--duration",
            "3s",
            "--no-socket",
            "--json",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let dpid = daemon.id() as i32;
    let deadline = Instant::now() + Duration::from_secs(10);
    let servers = loop {
        assert!(Instant::now() < deadline, "the servers never started");
        let kids: Vec<i32> = children(dpid)
            .into_iter()
            .filter(|&k| policy(k) == Some(6))
            .collect();
        if kids.len() == 3 {
            break kids;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(hsched_cpusets().1, "0");
    for t in servers {
        let runtime = hsched_linux::sys::sched_getattr(t).unwrap().runtime;
        // `a`'s servers (6 ms) on CPU 0, `b`'s (12 ms) on CPU 1.
        let cpu = if runtime == 6_000_000 {
            online[0]
        } else {
            online[1]
        };
        assert_eq!(
            hsched_linux::sys::get_affinity(t).unwrap().cpus(),
            vec![cpu]
        );
        assert!(
            cpuset_of(t).starts_with(&format!("/hsched-{dpid}-")),
            "{}",
            cpuset_of(t)
        );
    }
    let out = daemon.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("sched_load_balance"), "{stderr}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    // Each server less a 4 ms tick covers its job (RESBH 2 40, RESBH 8
    // 20), so a miss would be the host's: one is allowed.
    for p in v["programs"].as_array().unwrap() {
        if let Some(n) = p["name"].as_str().filter(|n| !n.starts_with("hog")) {
            let least = if n == "b" { 140 } else { 70 };
            assert!(p["jobs"].as_u64().unwrap() >= least, "{p}");
            assert!(p["deadline_misses"].as_u64().unwrap() <= 1, "{p}");
        }
    }
    assert_eq!(hsched_cpusets(), (Vec::new(), balance));
}

#[test]
fn a_hierarchy_the_kernel_cannot_enforce_is_refused_before_anything_changes() {
    let Some(_g) = kernel_live() else { return };
    let marker = std::env::temp_dir().join(format!("hsched-kernel-marker-{}", std::process::id()));
    let _ = std::fs::remove_file(&marker);
    let file = write_file(
        "refused.toml",
        &format!(
            r#"
[[scheduler]]
name = "FP"
policy = "fp"
[[scheduler]]
name = "RES"
policy = "rez"
parent = "FP"
params = {{ priority = 2 }}
[[scheduler]]
name = "APP"
policy = "fp"
parent = "RES"
params = {{ amount = "2ms", period = "10ms" }}
[[scheduler]]
name = "RR"
policy = "best"
parent = "FP"
params = {{ priority = 1 }}
[[thread]]
name = "a"
scheduler = "APP"
exec = ["touch", "{m}"]
[[thread]]
name = "b"
scheduler = "RR"
exec = ["touch", "{m}"]
"#,
            m = marker.display()
        ),
    );
    let out = run_kernel(&file, "2s", &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("nothing was changed"), "{stderr}");
    assert!(
        stderr.contains("scheduler `APP`") && stderr.contains("hierarchical deadline servers"),
        "{stderr}"
    );
    assert!(
        stderr.contains("scheduler `RR`") && stderr.contains("deadlines it infers"),
        "{stderr}"
    );
    assert!(!marker.exists(), "a program ran");
    assert!(hsched_cgroups().is_empty());
}

/// A program that cannot be launched fails the run (exit 1, as under the
/// user backend), naming it, and leaves no thread or cgroup changed.
#[test]
fn a_program_the_kernel_backend_cannot_launch_fails_the_run() {
    let Some(_g) = kernel_live() else { return };
    let file = write_file(
        "unlaunchable.toml",
        &reservation_file(2, "exec = [\"/nonexistent/hsched-ghost\"]"),
    );
    let t0 = Instant::now();
    let out = run_kernel(&file, "5s", &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("`rt` could not be launched")
            && stderr.contains("/nonexistent/hsched-ghost"),
        "{stderr}"
    );
    assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
    assert!(hsched_cgroups().is_empty());
}

/// `run FILE --enforce kernel -- COMMAND` beside a built-in hog ran on
/// after COMMAND exited, as the user backend once did: the run waits for
/// the programs it launched, not for its built-in workloads.
#[test]
fn a_kernel_run_ends_with_its_programs_not_its_built_in_workloads() {
    let Some(_g) = kernel_live() else { return };
    let file = write_file(
        "program-beside-a-hog.toml",
        "default = \"ts\"\n[machine]\ncpus = 1\n[[scheduler]]\nname = \"ts\"\npolicy = \"ts\"\n\
         [[thread]]\nname = \"hog\"\nworkload = { kind = \"cpu-bound\" }\n",
    );
    let t0 = Instant::now();
    let out = Command::new(bin())
        .arg("run")
        .arg(&file)
        .args([
            "--enforce",
            "kernel",
            "--no-socket",
            "--json",
            "--",
            "sleep",
            "0.5",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(t0.elapsed() < Duration::from_secs(10), "{:?}", t0.elapsed());
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["live"]["ended_by"], "programs exited", "{r}");
    let hog = r["programs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "hog")
        .unwrap_or_else(|| panic!("no hog in {r}"));
    // Its CPU time is what it used until the end, not until it was
    // reaped after it (once 100.2 % of the run).
    let cpu = hog["cpu_ns"].as_u64().unwrap();
    assert!(cpu > 100_000_000, "{hog}");
    assert!(cpu <= r["duration_ns"].as_u64().unwrap(), "{hog} in {r}");
    assert!(hsched_cgroups().is_empty());
}

/// `hsched-live ctl --socket SOCK OP FIELDS...`: exit code, stdout, stderr.
fn ctl(sock: &std::path::Path, op: &str, fields: &[&str]) -> (i32, String, String) {
    let out = Command::new(bin())
        .arg("ctl")
        .arg("--socket")
        .arg(sock)
        .args(["--json", op])
        .args(fields)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The control socket under the kernel backend: `set-params` changes a
/// deadline server's runtime and period, and one hsched's admission
/// refuses changes nothing and names the thread, the load and the limit;
/// `begin-reservation` makes a fair thread a deadline server and
/// `end-reservation` puts it back; `show` gives each thread's mechanism.
#[test]
fn ctl_operations_change_kernel_mechanisms_under_admission() {
    let Some(_g) = kernel_live() else { return };
    let file = write_file(
        "ctl.toml",
        &reservation_file(2, r#"exec = ["sh", "-c", "while :; do :; done"]"#).replace(
            HOGS,
            r#"
[[thread]]
name = "fair"
scheduler = "TS"
exec = ["sh", "-c", "while :; do :; done"]
"#,
        ),
    );
    let sock = std::env::temp_dir().join(format!("hsched-kernel-ctl-{}.sock", std::process::id()));
    let mut daemon = Command::new(bin())
        .arg("run")
        .arg(&file)
        .args(["--enforce", "kernel", "--duration", "20s", "--socket"])
        .arg(&sock)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let tid_of = |show: &str, name: &str| -> Option<i32> {
        let v: Value = serde_json::from_str(show).ok()?;
        v["threads"]
            .as_array()?
            .iter()
            .find(|t| t["name"] == name)
            .and_then(|t| t["tid"].as_i64())
            .map(|t| t as i32)
    };
    let (rt, fair) = loop {
        assert!(Instant::now() < deadline, "the daemon never answered");
        let (code, out, _) = ctl(&sock, "show", &[]);
        if code == 0 {
            if let (Some(r), Some(f)) = (tid_of(&out, "rt"), tid_of(&out, "fair")) {
                assert!(out.contains("SCHED_DEADLINE runtime 3ms"), "{out}");
                break (r, f);
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let dl = |t: i32| {
        let a = hsched_linux::sys::sched_getattr(t).unwrap();
        (a.policy, a.runtime, a.period)
    };
    assert_eq!(dl(rt), (6, 3_000_000, 10_000_000));
    let (code, _, err) = ctl(
        &sock,
        "set-params",
        &["thread=rt", "params.amount=4ms", "params.period=20ms"],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(dl(rt), (6, 4_000_000, 20_000_000));
    // 95 % is above the reservation scheduler's default cap of 85 %.
    let (code, _, err) = ctl(&sock, "set-params", &["thread=rt", "params.amount=19ms"]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("thread `rt`") && err.contains("95.0%") && err.contains("cap of 85.0%"),
        "{err}"
    );
    assert_eq!(
        dl(rt),
        (6, 4_000_000, 20_000_000),
        "a refused change changed the server"
    );
    let (code, _, err) = ctl(
        &sock,
        "begin-reservation",
        &[
            "thread=fair",
            "scheduler=RES",
            "params.amount=2ms",
            "params.period=10ms",
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(dl(fair), (6, 2_000_000, 10_000_000));
    let (code, _, err) = ctl(&sock, "end-reservation", &["thread=fair"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(dl(fair).0, 0);
    let cg = std::fs::read_to_string(format!("/proc/{fair}/cgroup")).unwrap();
    assert!(cg.contains("/hsched-"), "back in its TS cgroup: {cg}");
    let (code, _, err) = ctl(&sock, "create", &["name=X", "policy=ts", "parent=FP"]);
    assert_eq!(code, 1);
    assert!(err.contains("--enforce user"), "{err}");
    let (code, _, err) = ctl(&sock, "shutdown", &[]);
    assert_eq!(code, 0, "{err}");
    let t0 = Instant::now();
    while daemon.try_wait().unwrap().is_none() {
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "shutdown did not end the run"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!sock.exists(), "the socket was left");
    assert!(hsched_cgroups().is_empty(), "left {:?}", hsched_cgroups());
    for t in [rt, fair] {
        assert_ne!(policy(t), Some(6));
    }
}

/// A thread that its program creates and names afterwards (as rt-app does)
/// is placed by its `[[rule]]` as soon as the kernel announces the name
/// (`procevents`), well before the daemon's look at every program, which
/// comes every 2 s when the kernel announces threads.
#[test]
fn a_thread_named_after_it_starts_is_placed_by_its_rule_at_once() {
    let Some(_g) = kernel_live() else {
        return;
    };
    if !Command::new("python3")
        .args(["-c", ""])
        .status()
        .is_ok_and(|s| s.success())
    {
        eprintln!("SKIPPED: no python3 to write the naming program in");
        return;
    }
    // The worker names itself 0.5 s in (after the sweep that follows the
    // launch), then spins for 1.5 s.
    let script = write_file(
        "namer.py",
        "import ctypes, threading, time\n\
         libc = ctypes.CDLL(None)\n\
         def work():\n    \
             time.sleep(0.5)\n    \
             libc.prctl(15, b'hsched-named', 0, 0, 0)\n    \
             t = time.time()\n    \
             while time.time() - t < 1.5: pass\n\
         w = threading.Thread(target=work)\n\
         w.start()\n\
         w.join()\n",
    );
    let file = write_file(
        "namer.toml",
        r#"
default = "ts"
[machine]
cpus = 1
[[scheduler]]
name = "fp"
policy = "fp"
[[scheduler]]
name = "res"
policy = "rez"
parent = "fp"
params = { priority = 2 }
[[scheduler]]
name = "ts"
policy = "ts"
parent = "fp"
params = { priority = 1 }
[[rule]]
thread = "hsched-named"
scheduler = "res"
params = { amount = "5ms", period = "20ms" }
"#,
    );
    let script_arg = script.display().to_string();
    let child = spawn_kernel(&file, "4s", &["--json", "--", "python3", &script_arg]);
    // The named thread, when first seen, and when first a deadline server.
    let named_tid = || -> Option<i32> {
        for p in std::fs::read_dir("/proc").ok()?.flatten() {
            let dir = p.path();
            let Ok(cmd) = std::fs::read(dir.join("cmdline")) else {
                continue;
            };
            if !String::from_utf8_lossy(&cmd).contains("namer.py") {
                continue;
            }
            for t in std::fs::read_dir(dir.join("task")).ok()?.flatten() {
                let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
                if comm.trim() == "hsched-named" {
                    return t.file_name().to_str()?.parse().ok();
                }
            }
        }
        None
    };
    let start = Instant::now();
    let (mut seen, mut placed) = (None, None);
    while start.elapsed() < Duration::from_secs(3) && placed.is_none() {
        if let Some(tid) = named_tid() {
            let at = *seen.get_or_insert_with(Instant::now);
            // 6: SCHED_DEADLINE.
            if policy(tid) == Some(6) {
                placed = Some(at.elapsed());
            }
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["live"]["rules"]["moved"], 1, "{r}");
    let placed = placed.expect("the named thread never became a deadline server while seen");
    assert!(
        placed < Duration::from_millis(150),
        "placed {placed:?} after its name was seen"
    );
}

/// A pipeline stage for the adaptive-reservation test: `source` writes
/// 200 KB/s into a FIFO, burning 0.25 µs of CPU per byte; `sink` reads it,
/// burning 1.25 µs per byte (25 % of a CPU at that rate), and logs
/// `seconds bytes` every 32 KiB.
const STAGE: &str = r#"
import os, sys, time
role, path = sys.argv[1], sys.argv[2]
CHUNK = 4096
RATE = 200e3
COST = {"source": 0.25e-6, "sink": 1.25e-6}[role]
def burn(n):
    end = time.thread_time() + n * COST
    while time.thread_time() < end:
        pass
t0 = time.monotonic()
if role == "source":
    fd = os.open(path, os.O_WRONLY)
    made = 0
    while True:
        need = made + CHUNK - RATE * (time.monotonic() - t0)
        if need > 0:
            time.sleep(need / RATE + 0.0005)
            continue
        burn(CHUNK)
        os.write(fd, bytes(CHUNK))
        made += CHUNK
else:
    fd = os.open(path, os.O_RDONLY)
    log = open(sys.argv[3], "w")
    got = 0
    while True:
        b = os.read(fd, CHUNK)
        if not b:
            break
        burn(len(b))
        got += len(b)
        if got % (CHUNK * 8) == 0:
            log.write(f"{time.monotonic() - t0:.3f} {got}\n")
            log.flush()
"#;

/// `realrate` under the kernel backend: its children are deadline servers
/// whose runtimes the daemon's controller sizes from the fill level of the
/// FIFO between them. The sink starts at 5 % (40 KB/s at its cost) and must
/// be given about 25 % to keep up with its source, beside a CPU hog that
/// takes what the controller leaves.
#[test]
fn a_realrate_sink_under_the_kernel_backend_is_given_what_keeps_up_with_its_source() {
    let Some(_g) = kernel_live() else { return };
    if Command::new("python3")
        .arg("-c")
        .arg("pass")
        .status()
        .map_or(true, |s| !s.success())
    {
        eprintln!("SKIPPED: no python3 for the pipeline");
        return;
    }
    let stage = write_file("stage.py", STAGE);
    let dir = stage.parent().unwrap().to_path_buf();
    let fifo = dir.join("q");
    let log = dir.join("sink.log");
    let _ = std::fs::remove_file(&fifo);
    let _ = std::fs::remove_file(&log);
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let (s, q, l) = (stage.display(), fifo.display(), log.display());
    let file = write_file(
        "realrate.toml",
        &format!(
            r#"
[machine]
cpus = 1

[[scheduler]]
name = "rr"
policy = "realrate"
cpus = [0]
overload = 0.6
filter = 0.3
default_period = "60ms"

[[thread]]
name = "source"
scheduler = "rr"
exec = ["python3", "{s}", "source", "{q}"]

[[thread]]
name = "sink"
scheduler = "rr"
exec = ["python3", "{s}", "sink", "{q}", "{l}"]

[[thread]]
name = "hog"
scheduler = "rr"
workload = {{ kind = "cpu-bound" }}
"#
        ),
    );
    let out = run_kernel(&file, "8s", &["--json"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let share = |n: &str| program(&v, n)["share"].as_f64().unwrap();
    let a = &v["live"]["adaptive"];
    assert!(a["ticks"].as_u64().unwrap() > 400, "{a}");
    assert!(a["runtime_changes"].as_u64().unwrap() > 0, "{a}");
    assert!(a["progress_messages"].as_u64().unwrap() > 0, "{a}");
    // The sink keeps up from 3 s on: at least 80 % of the source's rate.
    let points: Vec<(f64, f64)> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            Some((w.next()?.parse().ok()?, w.next()?.parse().ok()?))
        })
        .collect();
    let from = points.iter().find(|p| p.0 >= 3.0).copied();
    let to = points.last().copied();
    let (Some(from), Some(to)) = (from, to) else {
        panic!("the sink logged too little: {points:?}\n{stderr}");
    };
    let rate = (to.1 - from.1) / (to.0 - from.0).max(1e-3);
    assert!(
        rate > 160e3,
        "sink {rate:.0} B/s from {from:?} to {to:?}; {v}"
    );
    // It got far beyond its first 5 %, and no child beyond the threshold.
    assert!(share("sink") > 0.18, "{v}");
    assert!(
        share("sink") + share("source") + share("hog") < 0.6 + 0.05,
        "{v}"
    );
    assert!(share("hog") > 0.05, "the hog is squished, not starved: {v}");
    assert!(hsched_cgroups().is_empty(), "left {:?}", hsched_cgroups());
    assert!(hsched_cpusets().0.is_empty(), "left {:?}", hsched_cpusets());
}

/// A process a managed program forks joins its creator's place, as under
/// the user backend: here the nice value and cpu cgroup of a `ts` thread;
/// the run does not wait for it, and the forked process is given back as
/// it was when the run ends.
#[test]
fn a_process_a_managed_program_forks_gets_its_creators_mechanism() {
    let Some(_g) = kernel_live() else { return };
    let pidfile = std::env::temp_dir().join(format!("hsched-fork-test-{}", std::process::id()));
    let _ = std::fs::remove_file(&pidfile);
    let file = write_file(
        "fork.toml",
        &format!(
            "[[scheduler]]\nname = \"ts\"\npolicy = \"ts\"\n[[thread]]\nname = \"sh\"\n\
             scheduler = \"ts\"\nparams = {{ priority = 3 }}\n\
             exec = [\"sh\", \"-c\", \"sleep 30 & echo $! > {p}; wait\"]\n",
            p = pidfile.display()
        ),
    );
    let child = spawn_kernel(&file, "4s", &["--json"]);
    let deadline = Instant::now() + Duration::from_secs(3);
    let mut placed = None;
    while Instant::now() < deadline {
        let pid: Option<i32> = std::fs::read_to_string(&pidfile)
            .ok()
            .and_then(|s| s.trim().parse().ok());
        if let Some(pid) = pid {
            let nice = hsched_linux::sys::sched_getattr(pid)
                .map(|a| a.nice)
                .unwrap_or(0);
            let cg = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap_or_default();
            if nice == 5
                && cg
                    .lines()
                    .any(|l| l.contains(":cpu") && l.contains("/hsched-"))
            {
                placed = Some(pid);
                break;
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let pid = placed.unwrap_or_else(|| panic!("the forked sleep was not placed\n{stderr}"));
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        r["programs"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["name"] == format!("sh/{pid}")),
        "{r}"
    );
    // Ended with its program: nothing of it is left running.
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        hsched_linux::enforce::proc_state(pid).is_none_or(|s| s == 'Z'),
        "the forked sleep {pid} outlived the run"
    );
    let _ = std::fs::remove_file(&pidfile);
    assert!(hsched_cgroups().is_empty(), "left {:?}", hsched_cgroups());
}
