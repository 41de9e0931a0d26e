//! Live-mode tests on the real machine: real programs under small
//! hierarchies, as root. Each test skips with a message when live mode is
//! not available (not root, no freezer, no tracefs). They run one at a time
//! (they share the CPUs) and every run is bounded by `--duration` and a
//! `timeout`-like watchdog in the test.

mod support;
use hsched_linux::ctl::Client;
use serde_json::{json, Value};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use support::{bin, coop_staticlib, TestUser};

static SERIAL: Mutex<()> = Mutex::new(());

/// How long a test waits for the CPUs when another test binary or a
/// developer's daemon holds them.
const CPU_LOCK_WAIT: Duration = Duration::from_secs(120);

/// Held for one live test: the in-process serialization and the locks of
/// every online CPU (`hsched_linux::cpulock`), taken so that the daemons the
/// test starts as its children may use them and no other daemon can.
struct LiveGuard {
    _cpus: hsched_linux::cpulock::CpuLocks,
    _serial: std::sync::MutexGuard<'static, ()>,
}

/// `Some(guard)` when live mode can run; prints why not otherwise. Waits
/// (at most [`CPU_LOCK_WAIT`]) while another process manages a CPU.
fn live() -> Option<LiveGuard> {
    let g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    match hsched_linux::check_support() {
        Ok(()) => {
            let cpus = hsched_linux::sys::online_cpus();
            let t0 = Instant::now();
            let l = hsched_linux::cpulock::CpuLocks::acquire_wait(
                &cpus,
                hsched_linux::cpulock::Sharing::WithChildren,
                CPU_LOCK_WAIT,
            )
            .unwrap_or_else(|e| {
                panic!("the live tests need CPUs {cpus:?} to themselves; gave up after {CPU_LOCK_WAIT:?}: {e}")
            });
            if t0.elapsed() > Duration::from_millis(500) {
                eprintln!("waited {:?} for the CPU locks", t0.elapsed());
            }
            Some(LiveGuard {
                _cpus: l,
                _serial: g,
            })
        }
        Err(e) => {
            eprintln!("SKIPPED: {e}");
            None
        }
    }
}

/// The CPU the tests manage: the last online one.
fn test_cpu() -> usize {
    *hsched_linux::sys::online_cpus().last().unwrap()
}

fn write_file(name: &str, text: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("hsched-live-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::File::create(&p)
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    p
}

/// Runs `hsched-live run FILE --json ARGS` and returns the report.
fn run_json(file: &Path, args: &[&str]) -> Value {
    run_json_env(file, args, &[])
}

/// Hypervisor steal time on the test CPU so far, ns (`/proc/stat`, in
/// 10 ms units; 0 on bare metal).
fn steal_ns() -> u64 {
    steal_ns_on(test_cpu())
}

/// The hypervisor steal time of CPU `cpu` so far, ns (0 where unknown).
fn steal_ns_on(cpu: usize) -> u64 {
    hsched_linux::stolen::read_proc_stat()
        .ok()
        .and_then(|v| v.into_iter().find(|s| s.cpu == cpu))
        .map_or(0, |s| s.steal)
}

/// [`run_json`], and the hypervisor steal time on the test CPU during the
/// run, ns. Run times exclude steal (the scheduler clock does), so a bound
/// on what a thread received is widened by it: hsched cannot hand out the
/// time the host took from the whole virtual machine.
fn run_json_steal(file: &Path, args: &[&str]) -> (Value, u64) {
    let s0 = steal_ns();
    let r = run_json(file, args);
    let stolen = steal_ns().saturating_sub(s0);
    if stolen > 0 {
        eprintln!(
            "the host stole {} ms of the test CPU during the run",
            stolen / 1_000_000
        );
    }
    (r, stolen)
}

/// How late, at worst, the daemon handled an HSI timer in report `r`
/// (ns): a stall of the daemon's own CPU, which delays every grant and
/// replenishment by as much, so tests of lateness allow it as they allow
/// stolen time.
fn daemon_late_ns(r: &Value) -> u64 {
    r["live"]["timer_lateness"]["max_ns"].as_u64().unwrap_or(0)
}

/// [`run_json`] with environment variables set for the daemon.
fn run_json_env(file: &Path, args: &[&str], env: &[(&str, &str)]) -> Value {
    let cpu = test_cpu().to_string();
    let mut cmd = Command::new(bin());
    cmd.envs(env.iter().copied());
    cmd.arg("run")
        .arg(file)
        .args(["--cpus", &cpu, "--json"])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    let child = cmd.spawn().unwrap();
    let out = wait_bounded(child, Duration::from_secs(60));
    assert!(
        out.status.success(),
        "hsched-live run failed: {:?}",
        out.status
    );
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("bad report: {e}: {}", String::from_utf8_lossy(&out.stdout)))
}

/// Runs `file` live on the test CPU for `duration` with the progress
/// monitor's trace written to a fresh temporary file named `trace_name`;
/// returns the JSON report (checked free of protocol errors) and the trace
/// file.
fn run_with_progress_trace(file: &Path, trace_name: &str, duration: &str) -> (Value, PathBuf) {
    let (r, trace, _) = run_with_progress_trace_steal(file, trace_name, duration);
    (r, trace)
}

/// [`run_with_progress_trace`], and the hypervisor steal time on the test
/// CPU during the run, ns (see [`run_json_steal`]).
fn run_with_progress_trace_steal(
    file: &Path,
    trace_name: &str,
    duration: &str,
) -> (Value, PathBuf, u64) {
    let trace = write_file(trace_name, "");
    let s0 = steal_ns();
    let cpu = test_cpu().to_string();
    let child = Command::new(bin())
        .arg("run")
        .arg(file)
        .args(["--cpus", &cpu, "--json", "--duration", duration])
        .env("HSCHED_PROGRESS_TRACE", &trace)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let out = wait_bounded(child, Duration::from_secs(60));
    assert!(
        out.status.success(),
        "hsched-live run failed: {:?}",
        out.status
    );
    let stolen = steal_ns().saturating_sub(s0);
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["live"]["protocol_errors"], 0);
    (r, trace, stolen)
}

fn wait_bounded(mut child: Child, limit: Duration) -> std::process::Output {
    let t0 = Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            return child.wait_with_output().unwrap();
        }
        if t0.elapsed() > limit {
            let _ = child.kill();
            panic!("the daemon did not finish within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn program<'a>(r: &'a Value, name: &str) -> &'a Value {
    r["programs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == name)
        .unwrap_or_else(|| panic!("no program {name} in {r}"))
}

fn cpu_s(r: &Value, name: &str) -> f64 {
    program(r, name)["cpu_ns"].as_u64().unwrap() as f64 / 1e9
}

#[test]
fn proportional_share_one_to_two() {
    let Some(_g) = live() else { return };
    let f = write_file(
        "ps.toml",
        r#"
default = "ps"
[machine]
cpus = 1
[[scheduler]]
name = "ps"
policy = "ps"
[[thread]]
name = "one"
params = { share = 1 }
workload = { kind = "cpu-bound" }
[[thread]]
name = "two"
params = { share = 2 }
workload = { kind = "cpu-bound" }
"#,
    );
    let (r, stolen) = run_json_steal(&f, &["--duration", "3s"]);
    let (a, b) = (cpu_s(&r, "one"), cpu_s(&r, "two"));
    eprintln!("PS 1:2 measured {a:.3} s : {b:.3} s (ratio {:.3})", b / a);
    assert!(
        (b / a - 2.0).abs() < 0.12,
        "ratio {} not within 6% of 2",
        b / a
    );
    // Together they keep the CPU busy (RT throttling leaves 5% to others)
    // for the time the host left the virtual machine.
    let available = 3.0 - stolen as f64 / 1e9;
    assert!(
        a + b > 0.85 * available,
        "only {:.3} s of CPU in the {available:.3} s the host left",
        a + b
    );
    assert_eq!(r["live"]["protocol_errors"], 0);
}

/// The built-in workloads keep the simulator's timing live. An rt-app
/// `timer` keeps its period whatever the run before it took (rt-app's
/// relative mode rebases only a late timer): 5 ms of work every 20 ms is
/// 100 jobs in 2 s, where sleeping a period after each run gave about 80.
/// A program without a timer counts a job per loop, with no lateness, and
/// an `interactive` thread's jobs have no lateness either.
#[test]
fn built_in_workloads_keep_the_simulators_timing() {
    let Some(_g) = live() else { return };
    let json = write_file(
        "timer.json",
        r#"{ "tasks": {
  "video": { "loop": -1, "run": 5000, "timer": { "ref": "t", "period": 20000 } },
  "build": { "loop": -1, "run": 20000, "sleep": 10000 } } }"#,
    );
    let f = write_file(
        "timer.toml",
        &format!(
            r#"
default = "ts"
[machine]
cpus = 1
[[scheduler]]
name = "fp"
policy = "fp"
[[scheduler]]
name = "rez"
policy = "rez"
parent = "fp"
params = {{ priority = 2 }}
[[scheduler]]
name = "ts"
policy = "ts"
parent = "fp"
params = {{ priority = 1 }}
[workload]
rtapp = "{}"
[[workload.map]]
task = "video"
scheduler = "rez"
params = {{ amount = "7ms", period = "20ms" }}
[[thread]]
name = "ui"
workload = {{ kind = "interactive", think = "20ms", burst = "1ms" }}
"#,
            json.display()
        ),
    );
    let (r, stolen) = run_json_steal(&f, &["--duration", "2s"]);
    let jobs = |name: &str| program(&r, name)["jobs"].as_u64().unwrap();
    let late = |name: &str| program(&r, name)["max_lateness_ns"].clone();
    eprintln!(
        "video {} jobs (max lateness {}), build {} jobs, ui {} jobs",
        jobs("video"),
        late("video"),
        jobs("build"),
        jobs("ui")
    );
    // Every 20 ms the host left the machine is a period.
    let periods = (2_000_000_000u64.saturating_sub(stolen)) / 20_000_000;
    assert!(
        jobs("video") * 100 >= periods * 93 && jobs("video") <= 101,
        "{} video jobs in {periods} periods",
        jobs("video")
    );
    // Jobs with deadlines report a lateness (its sign depends on the
    // machine's load, not on the timer's rule).
    assert!(late("video").is_i64(), "{r}");
    // 20 ms of work and a 10 ms sleep: at most 67 loops in 2 s.
    assert!((5..=67).contains(&jobs("build")), "{r}");
    assert!(late("build").is_null(), "{r}");
    assert!(jobs("ui") > 10 && late("ui").is_null(), "{r}");
}

/// A daemon whose stderr reader has gone (`2>&1 | head` after head exited)
/// still runs to the end and writes its report: a warning it cannot print
/// is dropped, not a panic that ends the run (and aborts in the panic
/// hook).
#[test]
fn a_closed_stderr_loses_no_report() {
    let Some(_g) = live() else { return };
    let f = write_file(
        "closed-stderr.toml",
        r#"
default = "ts"
[machine]
cpus = 1
[[scheduler]]
name = "ts"
policy = "ts"
[[thread]]
name = "hog"
workload = { kind = "cpu-bound" }
"#,
    );
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let cpu = test_cpu().to_string();
    let child = Command::new(bin())
        // Out of range: the daemon warns at start.
        .env("HSCHED_LIVE_EARLY", "99999")
        .arg("run")
        .arg(&f)
        .args(["--cpus", &cpu, "--json", "--duration", "500ms"])
        .stdout(Stdio::piped())
        .stderr(writer)
        .spawn()
        .unwrap();
    let out = wait_bounded(child, Duration::from_secs(60));
    assert_eq!(out.status.code(), Some(0), "{:?}", out.status);
    let r: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("bad report: {e}: {}", String::from_utf8_lossy(&out.stdout)));
    assert!(cpu_s(&r, "hog") > 0.1, "{r}");
}

#[test]
fn a_cpu_that_is_not_online_or_a_program_that_cannot_run_is_an_input_error() {
    let Some(_g) = live() else { return };
    let f = write_file(
        "input-errors.toml",
        "default = \"ts\"\n[[scheduler]]\nname = \"ts\"\npolicy = \"ts\"\n",
    );
    let cpu = test_cpu().to_string();
    for (args, says) in [
        (&["--cpus", "4095"][..], "CPU 4095 is not online"),
        (
            &["--cpus", &cpu, "--", "/nonexistent/hsched-test-prog"][..],
            "/nonexistent/hsched-test-prog",
        ),
    ] {
        let child = Command::new(bin())
            .arg("run")
            .arg(&f)
            .args(["--duration", "2s"])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let out = wait_bounded(child, Duration::from_secs(30));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
}

/// A reservation that preempts a thread granted through another one gets
/// its CPU at once: the preempted thread's freeze is not deferred by the
/// reservation grace, which would come out of the preempting reservation's
/// budget. `T1` (1 ms / 10 ms, 0.8 ms jobs) beside a 10 ms / 20 ms Join
/// reservation whose time-sharing child is a hog: with the grace, `T1` sat
/// behind the hog for up to 0.85 ms of each 1 ms and finished many jobs a
/// period late (max lateness 9.2–90 ms); the simulator misses none. And
/// when its own budget ends, it keeps the time from its grant to its
/// switch-in: charged that, it missed 68–175 of its 297 deadlines (each
/// by under 0.71 ms); 0–8 now.
#[test]
fn a_reservation_that_preempts_another_is_not_charged_its_grace() {
    let Some(_g) = live() else { return };
    let f = write_file(
        "two-reservations.toml",
        r#"
default = "ts"
[machine]
cpus = 1
[[scheduler]]
name = "fp"
policy = "fp"
[[scheduler]]
name = "rez"
policy = "rez"
parent = "fp"
params = { priority = 2 }
[[scheduler]]
name = "j"
policy = "join"
parents = [ { name = "rez", amount = "10ms", period = "20ms" }, { name = "fp", priority = 1 } ]
[[scheduler]]
name = "ts"
policy = "ts"
parent = "j"
[[thread]]
name = "T1"
scheduler = "rez"
params = { amount = "1ms", period = "10ms" }
workload = { kind = "periodic", period = "10ms", exec = "800us" }
[[thread]]
name = "hog"
workload = { kind = "cpu-bound" }
"#,
    );
    // The count of misses is the sharper test (68–175 before the fix), but
    // the host or a stalled daemon can cost a few dozen, or a hundred when
    // the host steals 150 ms: a run that misses too many is run again, up
    // to three runs in all. When the host visibly disturbed the last of
    // three, the count says nothing about the fix, and the test says so.
    const RUNS: u32 = 3;
    for attempt in 1..=RUNS {
        let (r, stolen) = run_json_steal(&f, &["--duration", "3s"]);
        let p = program(&r, "T1");
        let stall = daemon_late_ns(&r);
        eprintln!(
            "T1: {} jobs, {} misses, max lateness {} ns; daemon's timers up to {stall} ns late",
            p["jobs"], p["deadline_misses"], p["max_lateness_ns"]
        );
        assert!(p["jobs"].as_u64().unwrap() >= 285, "{p}");
        // Late by most of a period only when the budget ran out long before
        // the job was done, or when the host held the test CPU or the daemon.
        let late = p["max_lateness_ns"].as_i64().unwrap();
        let bound = 8_000_000 + stolen + stall;
        // The grace bug was late in every run; a single late job with no
        // steal on record is the host (a busy sibling CPU, a page fault in
        // the daemon), so only three late runs in a row fail.
        if late >= bound as i64 && attempt < RUNS {
            eprintln!("T1 finished a job {late} ns late (bound {bound}): once more");
            continue;
        }
        assert!(
            late < bound as i64,
            "T1 finished a job {late} ns late (bound {bound}): {p}"
        );
        assert_eq!(r["live"]["protocol_errors"], 0);
        let allowed = 30 + stolen / 10_000_000;
        let misses = p["deadline_misses"].as_u64().unwrap();
        let disturbed = stolen > 0 || stall > 1_000_000;
        // The charged grace missed in every run; a busy host can make one
        // run miss a few dozen by under a millisecond without a trace in
        // the steal counter or the daemon's timers, so only three runs
        // over the allowance in a row fail.
        if misses > allowed && attempt < RUNS {
            eprintln!("T1 missed {misses} (allowed {allowed}): once more");
            continue;
        }
        if misses > allowed && disturbed {
            eprintln!(
                "INCONCLUSIVE: the host disturbed all {RUNS} runs (last: {stolen} ns stolen, timers {stall} ns late); T1's misses were not judged"
            );
            break;
        }
        assert!(
            misses <= allowed,
            "T1 missed {misses} (allowed {allowed}): {p}"
        );
        break;
    }
}

#[test]
fn hard_reservation_caps_a_cpu_hog() {
    let Some(_g) = live() else { return };
    let f = write_file(
        "rez.toml",
        r#"
default = "rez"
[machine]
cpus = 1
[[scheduler]]
name = "rez"
policy = "rez"
[[thread]]
name = "hog"
params = { amount = "10ms", period = "33ms" }
workload = { kind = "cpu-bound" }
"#,
    );
    let (r, stolen) = run_json_steal(&f, &["--duration", "3s"]);
    let duration = r["duration_ns"].as_u64().unwrap() as f64;
    let share = program(&r, "hog")["cpu_ns"].as_u64().unwrap() as f64 / duration;
    let g = &r["live"]["rt_governor"];
    eprintln!(
        "Rez 10ms/33ms gave the hog {:.2}% of the CPU; governor {g}",
        share * 100.0
    );
    // A revoked reservation thread runs on for the grace (enforce.rs
    // `RtBudget::grace_ns`, 0.5 ms by default) before it is frozen, and
    // for what its grant did not reach it (at most `lost_cap_ns`).
    let ms = |k: &str| g[k].as_u64().unwrap() as f64 / 1e6;
    let (low, high) = (
        (10.0 + ms("grace_ns")) / 33.0 - 0.02 - stolen as f64 / duration,
        (10.0 + ms("grace_ns") + ms("lost_cap_ns")) / 33.0 + 0.02,
    );
    assert!(
        (low..=high).contains(&share),
        "share {share} not within {low}..={high}"
    );
}

/// A thread that sleeps and wakes on an idle CPU: perf writes no sample
/// for such a wake-up, and without the daemon's ftrace source
/// (`HSCHED_LIVE_IDLE_WAKES=off`) the thread runs its bursts unseen, 15.8 %
/// of the CPU against a 4 % cap. The test sets `on` so that a developer's
/// `off` does not leak in.
#[test]
fn hard_reservation_caps_a_thread_that_wakes_on_an_idle_cpu() {
    bursts_under_a_reservation(false);
}

/// The same thread beside a program hsched does not manage, spinning on
/// the test CPU: the timer interrupt that wakes the thread now runs over
/// that program, and perf writes no sample for it either. With the ftrace
/// source filtered to idle-context wake-ups only (as it was), the thread
/// got 13.8–18.4 % against the same cap.
#[test]
fn hard_reservation_caps_a_thread_woken_over_an_unmanaged_program() {
    bursts_under_a_reservation(true);
}

/// Rez 2 ms / 50 ms over a thread waking every 5 ms for 1 ms bursts, for
/// 3 s, with an unmanaged CPU hog on the test CPU or not: the thread gets
/// no more than the cap plus 2 points.
fn bursts_under_a_reservation(beside_a_hog: bool) {
    let Some(_g) = live() else { return };
    let f = write_file(
        "rez-idle.toml",
        r#"
default = "rez"
[machine]
cpus = 1
[[scheduler]]
name = "rez"
policy = "rez"
[[thread]]
name = "bursts"
params = { amount = "2ms", period = "50ms" }
workload = { kind = "interactive", think = "4ms", burst = "1ms" }
"#,
    );
    // Killed and reaped on every way out of the test.
    struct Hog(Child);
    impl Drop for Hog {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let _hog = beside_a_hog.then(|| {
        let hog = Hog(Command::new(bin())
            .args(["probe", "hog", "--duration", "10s"])
            .spawn()
            .unwrap());
        let on_test_cpu = hsched_linux::sys::CpuMask::single(test_cpu());
        hsched_linux::sys::set_affinity(hog.0.id() as i32, &on_test_cpu).unwrap();
        hog
    });
    let r = run_json_env(
        &f,
        &["--duration", "3s"],
        &[("HSCHED_LIVE_IDLE_WAKES", "on")],
    );
    let iw = &r["live"]["idle_wakes"];
    if iw["source"] != "ftrace" {
        eprintln!("SKIPPED: no ftrace instance: {}", iw["off_because"]);
        return;
    }
    let share = program(&r, "bursts")["cpu_ns"].as_u64().unwrap() as f64
        / r["duration_ns"].as_u64().unwrap() as f64;
    let grace_ms = r["live"]["rt_governor"]["grace_ns"].as_u64().unwrap() as f64 / 1e6;
    let cap = (2.0 + grace_ms) / 50.0;
    eprintln!(
        "Rez 2ms/50ms gave the bursts {:.2}% of the CPU (cap {:.2}%), {} ftrace wake-ups read{}",
        share * 100.0,
        cap * 100.0,
        iw["records"],
        if beside_a_hog { ", beside a hog" } else { "" }
    );
    assert!(iw["records"].as_u64().unwrap() > 0, "{iw}");
    assert!(share < cap + 0.02, "share {share} over the cap {cap}");
}

#[test]
fn threads_a_program_creates_join_its_scheduler() {
    let Some(_g) = live() else { return };
    let f = write_file(
        "threads.toml",
        r#"
default = "ts"
[machine]
cpus = 1
[[scheduler]]
name = "ts"
policy = "ts"
"#,
    );
    let cmd = format!(
        "exec {} probe poll --threads 3 --duration 1s > /dev/null",
        bin()
    );
    let (r, stolen) = run_json_steal(&f, &["--", "sh", "-c", &cmd]);
    let threads = r["threads"].as_array().unwrap();
    assert!(
        threads.len() >= 4,
        "expected the main thread and 3 pollers, got {threads:?}"
    );
    assert!(threads.iter().all(|t| t["scheduler"] == "ts"));
    let p = &r["programs"][0];
    assert_eq!(p["exit_status"], 0, "the program ended normally");
    // The 3 pollers shared one CPU for about a second, a third each, less
    // what the host took from the virtual machine.
    let cpu = p["cpu_ns"].as_u64().unwrap();
    let floor = 700_000_000u64.saturating_sub(stolen);
    assert!(cpu > floor, "pollers got only {cpu} ns (floor {floor} ns)");
    for t in threads
        .iter()
        .filter(|t| t["name"].as_str().unwrap().contains('/'))
    {
        let got = t["received_ns"].as_u64().unwrap();
        assert!(
            (250_000_000..450_000_000).contains(&got),
            "a poller was granted {got} ns of ~330 ms"
        );
    }
}

#[test]
fn rules_place_new_threads_by_name() {
    let Some(_g) = live() else { return };
    // The program names itself `pollme`, so its two pollers are created
    // with that name (rule 2 places both under `mid`); 100 ms after that
    // placement they rename themselves `pollme-0` and `pollme-1`, and rule 1 moves the
    // second under a 5 ms / 50 ms hard reservation. The program itself was
    // launched by the file, so no rule moves it.
    let f = write_file(
        "rules.toml",
        r#"
default = "ts"
[machine]
cpus = 1
[[scheduler]]
name = "fp"
policy = "fp"
[[scheduler]]
name = "cap"
policy = "rez"
parent = "fp"
params = { priority = 3 }
[[scheduler]]
name = "mid"
policy = "ts"
parent = "fp"
params = { priority = 2 }
[[scheduler]]
name = "ts"
policy = "ts"
parent = "fp"
params = { priority = 1 }
[[rule]]
thread = "pollme-1"
scheduler = "cap"
params = { amount = "5ms", period = "50ms" }
[[rule]]
thread = "pollme*"
scheduler = "mid"
"#,
    );
    let cmd = format!(
        "exec {} probe poll --threads 2 --name pollme --duration 2s > /dev/null",
        bin()
    );
    let (r, stolen) = run_json_steal(&f, &["--", "sh", "-c", &cmd]);
    assert_eq!(
        r["live"]["rules"],
        json!({"placed": 2, "moved": 1}),
        "both pollers placed at creation, one moved by its rename"
    );
    let threads = r["threads"].as_array().unwrap();
    let under =
        |s: &str| -> Vec<&Value> { threads.iter().filter(|t| t["scheduler"] == s).collect() };
    assert_eq!(
        under("ts").len(),
        1,
        "the program stays where the file put it: {threads:?}"
    );
    let (cap, mid) = (under("cap"), under("mid"));
    assert_eq!((cap.len(), mid.len()), (1, 1), "{threads:?}");
    // About 1.9 s after the rename: 10 % of it under the reservation (plus
    // the 0.5 ms grace a period), the rest for the other poller.
    let got = |t: &Value| t["received_ns"].as_u64().unwrap();
    let run = r["duration_ns"].as_u64().unwrap();
    assert!(
        got(cap[0]) < run * 15 / 100,
        "the capped poller got {} of {run} ns",
        got(cap[0])
    );
    assert!(
        got(mid[0]) > (run * 70 / 100).saturating_sub(stolen),
        "the other poller got {} of {run} ns",
        got(mid[0])
    );
}

/// FP over a reservation scheduler `res` (priority 2) and the default
/// time-sharing `ts` (priority 1): the tests that run independent programs
/// place their threads under `res` with `[[rule]]`s.
const RES_AND_TS: &str = r#"
default = "ts"
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
"#;

/// The path of program `name` on `PATH`, if it is installed.
fn installed(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// Programs a test runs against; prints why it skips when one is missing
/// (`.ci/run` installs them).
fn tools(names: &[&str]) -> Option<()> {
    match names.iter().find(|n| installed(n).is_none()) {
        Some(n) => {
            eprintln!("SKIPPED: `{n}` is not installed (apt install rt-app stress-ng)");
            None
        }
        None => Some(()),
    }
}

/// `stress-ng --cpu N` pinned to `cpu`, in its own process group, which is
/// killed when this is dropped: a failing assertion leaves no hog behind.
struct Hogs(Child);

impl Hogs {
    fn start(n: usize, cpu: usize, limit: Duration) -> Hogs {
        use std::os::unix::process::CommandExt;
        let child = Command::new("stress-ng")
            .args(["--cpu", &n.to_string(), "--taskset", &cpu.to_string()])
            .args(["--timeout", &format!("{}s", limit.as_secs()), "--quiet"])
            .process_group(0)
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        // Let the workers start and spread their load first.
        std::thread::sleep(Duration::from_millis(300));
        Hogs(child)
    }
}

impl Drop for Hogs {
    fn drop(&mut self) {
        let _ = hsched_linux::sys::kill(-(self.0.id() as i32), libc::SIGKILL);
        let _ = self.0.wait();
    }
}

/// One rt-app log (`LOGDIR/BASENAME-TASK-INDEX.log`): per completed period,
/// the columns its header names. Returns (jobs, jobs whose `slack` is
/// negative, the smallest slack in µs).
fn rt_app_deadlines(dir: &Path, base: &str, task: &str) -> (u64, u64, i64) {
    let prefix = format!("{base}-{task}-");
    let file = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            let n = p.file_name().unwrap().to_string_lossy();
            n.starts_with(&prefix) && n.ends_with(".log")
        })
        .unwrap_or_else(|| panic!("rt-app wrote no log for `{task}` in {}", dir.display()));
    let text = std::fs::read_to_string(&file).unwrap();
    let header = text
        .lines()
        .find(|l| l.starts_with("#idx"))
        .unwrap_or_else(|| panic!("no column header in {}", file.display()));
    let slack = header
        .trim_start_matches('#')
        .split_whitespace()
        .position(|c| c == "slack")
        .expect("a `slack` column");
    let (mut jobs, mut misses, mut least) = (0, 0, i64::MAX);
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let s: i64 = line.split_whitespace().nth(slack).unwrap().parse().unwrap();
        jobs += 1;
        misses += (s < 0) as u64;
        least = least.min(s);
    }
    (jobs, misses, least)
}

/// rt-app's nanoseconds per loop of its `run` event on `cpu`, measured in
/// a fraction of a second rather than by its own 10-second calibration:
/// the shortest of a few 20 ms runs, wall time over loops. A run slowed by
/// other work only makes the figure larger, so the jobs smaller.
fn rt_app_calibration(dir: &Path, cpu: usize) -> u64 {
    let json = dir.join("rt-app-calibrate.json");
    std::fs::write(
        &json,
        format!(
            r#"{{"global": {{"duration": 2, "calibration": 15, "logdir": "{}", "log_basename": "rt-app-cal"}},
                "tasks": {{"cal": {{"loop": 4, "run": 20000, "sleep": 1000, "cpus": [{cpu}]}}}}}}"#,
            dir.display()
        ),
    )
    .unwrap();
    let out = wait_bounded(
        Command::new("rt-app")
            .arg(&json)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
        Duration::from_secs(20),
    );
    assert!(out.status.success(), "rt-app calibration run failed");
    let text = std::fs::read_to_string(dir.join("rt-app-cal-cal-0.log")).unwrap();
    let ns = text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| {
            let c: Vec<u64> = l
                .split_whitespace()
                .take(3)
                .map(|x| x.parse().unwrap())
                .collect();
            // idx, perf (loops), run (µs of wall time)
            c[2] * 1000 / c[1].max(1)
        })
        .min()
        .expect("calibration jobs");
    ns.max(1)
}

/// Independent programs, independent measurement: Debian's `rt-app` runs
/// a video task (5 ms every 20 ms) and an audio task (0.5 ms every 10 ms)
/// on their rt-app `timer`s, while `stress-ng` keeps four CPU hogs on the
/// same CPU, unmanaged. rt-app's own log (slack per period) says whether
/// each period's work was done in time. Without hsched the hogs take most
/// of the CPU and the video task misses most periods; under hsched, with
/// `[[rule]]`s placing the two threads under 8 ms / 20 ms and 2 ms / 10 ms
/// reservations when rt-app names them, both meet nearly all their timers
/// (a few misses are the user-space enforcement's, which a kernel
/// reservation would not have).
#[test]
fn real_rt_app_meets_its_timers_against_stress_ng_under_reservations() {
    let Some(_g) = live() else { return };
    let Some(()) = tools(&["rt-app", "stress-ng"]) else {
        return;
    };
    let cpu = test_cpu();
    // rt-app writes its logs beside the files this test writes.
    let dir = write_file("rt-app.toml", "")
        .parent()
        .unwrap()
        .to_path_buf();
    let calibration = rt_app_calibration(&dir, cpu);
    let tasks = |base: &str| {
        let text = format!(
            r#"{{
  "global": {{"duration": 3, "calibration": {calibration}, "logdir": "{}", "log_basename": "{base}"}},
  "tasks": {{
    "video": {{"loop": -1, "run": 5000, "timer": {{"ref": "video_tick", "period": 20000}}, "cpus": [{cpu}]}},
    "audio": {{"loop": -1, "run": 500, "timer": {{"ref": "audio_tick", "period": 10000}}, "cpus": [{cpu}]}}
  }}
}}"#,
            dir.display()
        );
        write_file(&format!("{base}.json"), &text)
    };

    // Without hsched.
    let plain = tasks("rt-app-plain");
    {
        let _hogs = Hogs::start(4, cpu, Duration::from_secs(6));
        let out = wait_bounded(
            Command::new("rt-app")
                .arg(&plain)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
            Duration::from_secs(20),
        );
        assert!(out.status.success(), "rt-app failed: {:?}", out.status);
    }
    let (jobs, misses, least) = rt_app_deadlines(&dir, "rt-app-plain", "video");
    eprintln!("without hsched: video {jobs} periods, {misses} missed (least slack {least} us)");
    assert!(
        misses * 2 > jobs,
        "four hogs should make the video task miss most periods without hsched \
         ({misses} of {jobs}): the load this test relies on is not there"
    );

    // Under hsched.
    let f = write_file(
        "rt-app.toml",
        &format!(
            r#"{RES_AND_TS}
[[rule]]
thread = "video"
program = "rt-app"
scheduler = "res"
params = {{ amount = "8ms", period = "20ms" }}
[[rule]]
thread = "audio"
program = "rt-app"
scheduler = "res"
params = {{ amount = "2ms", period = "10ms" }}
"#
        ),
    );
    let managed = tasks("rt-app-managed");
    let (r, stolen) = {
        let _hogs = Hogs::start(4, cpu, Duration::from_secs(10));
        // rt-app's own messages go to a file beside its logs.
        let cmd = format!(
            "exec rt-app {} > {}/rt-app-managed.out 2>&1",
            managed.display(),
            dir.display()
        );
        run_json_steal(&f, &["--", "sh", "-c", &cmd])
    };
    assert_eq!(r["live"]["protocol_errors"], 0);
    // Placed when created with their names, or moved when rt-app names them.
    let rules = &r["live"]["rules"];
    assert_eq!(
        rules["placed"].as_u64().unwrap() + rules["moved"].as_u64().unwrap(),
        2,
        "both rt-app threads placed by their names: {rules}"
    );
    // Enforcement from a user-space daemon misses a few periods where a
    // kernel reservation would not, more on a noisy host: the test allows
    // a fifth of the periods besides stolen time and the daemon's own
    // lateness. Without hsched the same run misses most of them.
    for task in ["video", "audio"] {
        let (jobs, misses, least) = rt_app_deadlines(&dir, "rt-app-managed", task);
        eprintln!("under hsched: {task} {jobs} periods, {misses} missed (least slack {least} us)");
        let period_ms = if task == "video" { 20 } else { 10 };
        assert!(
            jobs >= 2_500 / period_ms,
            "{task}: {jobs} periods in 3 s of rt-app"
        );
        let allowed = 2 + jobs / 5 + stolen / 10_000_000 + daemon_late_ns(&r) / 2_000_000;
        assert!(
            misses <= allowed,
            "{task} missed {misses} periods under its reservation (allowed {allowed})"
        );
    }
}

/// A program that sets its own threads' policy keeps the grants hsched
/// gives them: cyclictest (rt-tests) sets its measuring thread to
/// `SCHED_OTHER` as the thread starts, after hsched has raised it, and
/// that thread, under a 2 ms / 10 ms reservation, wakes every millisecond
/// on a CPU that four unmanaged stress-ng hogs keep busy. Set only at the
/// first grant, the policy stayed `SCHED_OTHER`: the thread queued behind
/// the hogs while its budget ran, skipped 13–20 % of its cycles and woke
/// 204–329 us late on average; set at every grant, it skips at most a few
/// and wakes 38–50 us late on average.
#[test]
fn a_program_that_sets_its_own_policy_is_raised_at_every_grant() {
    let Some(_g) = live() else { return };
    let Some(()) = tools(&["cyclictest", "stress-ng"]) else {
        return;
    };
    let cpu = test_cpu();
    let f = write_file(
        "cyclictest.toml",
        &format!(
            r#"{RES_AND_TS}
[[rule]]
thread = "cyclictest"
scheduler = "res"
params = {{ amount = "2ms", period = "10ms" }}
"#
        ),
    );
    let out = f.with_file_name("cyclictest.out");
    // 3 s of 1 ms cycles on the test CPU; `-q` prints one summary line.
    let cmd = format!(
        "exec cyclictest -t1 -a {cpu} -i 1000 -D 3 -q -m > {} 2>&1",
        out.display()
    );
    let (r, stolen) = {
        let _hogs = Hogs::start(4, cpu, Duration::from_secs(10));
        run_json_steal(&f, &["--", "sh", "-c", &cmd])
    };
    assert_eq!(r["live"]["protocol_errors"], 0);
    let text = std::fs::read_to_string(&out).unwrap();
    let line = text
        .lines()
        .find(|l| l.starts_with("T:"))
        .unwrap_or_else(|| panic!("no summary from cyclictest: {text}"));
    let field = |name: &str| -> u64 {
        let w: Vec<&str> = line.split_whitespace().collect();
        let k = w.iter().position(|x| *x == name).unwrap();
        w[k + 1].parse().unwrap()
    };
    let (cycles, avg_us) = (field("C:"), field("Avg:"));
    eprintln!("cyclictest under hsched: {line}");
    // The largest latency is left alone: one stall of the host or of the
    // daemon decides it. Cycles skipped and the mean are what the policy
    // changed (a stall of 30 ms adds 10 us to the mean of 3000 cycles).
    assert!(cycles >= 2_910, "{cycles} cycles of 3000: {line}");
    let bound_us = 150 + (stolen + daemon_late_ns(&r)) / 3_000_000;
    assert!(
        avg_us < bound_us,
        "woke {avg_us} us late on average (bound {bound_us} us): {line}"
    );
}

/// `-o FILE` keeps the report apart from what the launched program prints:
/// the program's line reaches standard output alone and the file holds the
/// whole JSON report.
#[test]
fn the_report_goes_to_its_output_file_and_the_programs_output_to_stdout() {
    let Some(_g) = live() else { return };
    let f = write_file(
        "output.toml",
        "default = \"ts\"\n[[scheduler]]\nname = \"ts\"\npolicy = \"ts\"\n",
    );
    let report = f.with_file_name("output.json");
    let cpu = test_cpu().to_string();
    let child = Command::new(bin())
        .arg("run")
        .arg(&f)
        .args(["--cpus", &cpu, "--json", "-o"])
        .arg(&report)
        .args(["--", "sh", "-c", "echo from the program"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let out = wait_bounded(child, Duration::from_secs(60));
    assert!(out.status.success(), "{:?}", out.status);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "from the program\n");
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert_eq!(r["mode"], "live", "{r}");
}

/// An `--output` that cannot be written is an input error found before the
/// run: nothing is launched. It needs no root (the check comes first).
#[test]
fn an_output_file_that_cannot_be_written_stops_the_run_before_it_starts() {
    let f = write_file(
        "unwritable.toml",
        "default = \"ts\"\n[[scheduler]]\nname = \"ts\"\npolicy = \"ts\"\n",
    );
    let marker = f.with_file_name("unwritable.ran");
    let out = Command::new(bin())
        .arg("run")
        .arg(&f)
        .args(["--output", "/nonexistent/dir/report.json", "--"])
        .args(["sh", "-c", &format!("touch {}", marker.display())])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("cannot create `/nonexistent/dir/report.json`"),
        "{err}"
    );
    assert!(!marker.exists(), "the program ran");
}

fn start_daemon(file: &Path, sock: &Path, extra: &[&str]) -> Child {
    start_daemon_with(file, sock, extra, Stdio::inherit())
}

/// [`start_daemon`] with the daemon's standard error going to `stderr`.
fn start_daemon_with(file: &Path, sock: &Path, extra: &[&str], stderr: Stdio) -> Child {
    let cpu = test_cpu().to_string();
    let _ = std::fs::remove_file(sock);
    let child = Command::new(bin())
        .arg("run")
        .arg(file)
        .args(["--cpus", &cpu, "--socket"])
        .arg(sock)
        .args(extra)
        .stdout(Stdio::null())
        .stderr(stderr)
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    while Client::connect(sock).is_err() {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "daemon socket never appeared"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    child
}

fn sched_policy(tid: i32) -> Option<u32> {
    hsched_linux::sys::sched_getattr(tid).ok().map(|a| a.policy)
}

#[test]
fn sigkill_of_the_daemon_restores_every_thread_within_a_second() {
    let Some(_g) = live() else { return };
    // FP: the high-priority hog runs (SCHED_FIFO, pinned), the low one and
    // a built-in workload are frozen. The hogs are programs of their own
    // (restored, like any launched program); the built-in workload is part
    // of the run and dies with the daemon.
    let hog = format!(
        "exec = [\"{}\", \"probe\", \"hog\", \"--duration\", \"20s\"]",
        bin()
    );
    let f = write_file(
        "fp.toml",
        &format!(
            r#"
default = "fp"
[machine]
cpus = 1
[[scheduler]]
name = "fp"
policy = "fp"
[[thread]]
name = "high"
params = {{ priority = 3 }}
{hog}
[[thread]]
name = "low"
params = {{ priority = 2 }}
{hog}
[[thread]]
name = "builtin"
params = {{ priority = 1 }}
workload = {{ kind = "cpu-bound" }}
[[thread]]
name = "waiter"
params = {{ priority = 1 }}
exec = ["sleep", "30"]
"#
        ),
    );
    let sock = std::env::temp_dir().join(format!("hsched-test-kill-{}.sock", std::process::id()));
    let mut daemon = start_daemon(&f, &sock, &["--duration", "20s"]);
    std::thread::sleep(Duration::from_millis(500));
    let tree = Client::connect(&sock)
        .unwrap()
        .request("show", json!({}))
        .unwrap();
    let tid = |n: &str| {
        tree["threads"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == n)
            .unwrap()["tid"]
            .as_i64()
            .unwrap() as i32
    };
    let (high, low, builtin) = (tid("high"), tid("low"), tid("builtin"));
    // The real-time governor runs a best-effort granted thread at
    // SCHED_OTHER for 8 ms of every 100 ms (enforce.rs `RtGovernor`), so
    // look a few times.
    let t0 = Instant::now();
    while sched_policy(high) != Some(libc::SCHED_FIFO as u32)
        && t0.elapsed() < Duration::from_millis(300)
    {
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(
        sched_policy(high),
        Some(libc::SCHED_FIFO as u32),
        "the granted thread runs at SCHED_FIFO"
    );
    assert_eq!(
        hsched_linux::enforce::proc_state(low),
        Some('D'),
        "the other one is frozen"
    );
    // Frozen or not, before or after `exec`, a launched program holds none
    // of the daemon's descriptors (CPU locks, perf events, the socket).
    for t in [high, low, builtin, tid("waiter")] {
        let held: Vec<String> = std::fs::read_dir(format!("/proc/{t}/fd"))
            .unwrap()
            .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
            .map(|l| l.display().to_string())
            .filter(|l| {
                l.contains("perf_event")
                    || l.starts_with(hsched_linux::cpulock::LOCK_DIR)
                    || l.starts_with("socket:")
            })
            .collect();
        assert!(held.is_empty(), "thread {t} holds the daemon's {held:?}");
    }
    // The watchdog holds an anchor on each of the daemon's tracepoints
    // (six sched ones and `signal_generate`), so the dead daemon's perf
    // events close without RCU grace periods (docs/measurements/live-mode.md,
    // "Fail-safe"): 21–36 ms to restore, 320–415 ms without.
    let wd = hsched_linux::watchdog::find(daemon.id() as i32).expect("the daemon's watchdog");
    let perf_fds = std::fs::read_dir(format!("/proc/{wd}/fd"))
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter(|l| l.display().to_string().contains("perf_event"))
        .count();
    assert!(perf_fds >= 6, "the watchdog holds {perf_fds} perf events");
    let all = hsched_linux::sys::get_affinity(0).unwrap();
    daemon.kill().unwrap();
    let killed = Instant::now();
    let _ = daemon.wait();
    let restored = loop {
        let ok = [high, low].iter().all(|&t| {
            sched_policy(t) == Some(libc::SCHED_OTHER as u32)
                && hsched_linux::sys::get_affinity(t).ok() == Some(all)
                && hsched_linux::enforce::proc_state(t) == Some('R')
        });
        if ok {
            break killed.elapsed();
        }
        assert!(
            killed.elapsed() < Duration::from_secs(1),
            "threads not restored within 1 s of SIGKILL"
        );
        std::thread::sleep(Duration::from_millis(5));
    };
    eprintln!("restored {restored:?} after SIGKILL");
    // The built-in workload is gone (or a zombie where nothing reaps
    // orphans) once the watchdog has thawed it.
    while !matches!(hsched_linux::enforce::proc_state(builtin), None | Some('Z')) {
        assert!(
            killed.elapsed() < Duration::from_secs(1),
            "the built-in workload outlives the daemon: state {:?}",
            hsched_linux::enforce::proc_state(builtin)
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    // The watchdog also removes the daemon's coop_poll channel file.
    let channel = format!("/dev/shm/hsched-coop-{}", daemon.id());
    let t1 = Instant::now();
    while std::path::Path::new(&channel).exists() && t1.elapsed() < Duration::from_secs(2) {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(
        !std::path::Path::new(&channel).exists(),
        "{channel} left behind after SIGKILL"
    );
    // The frozen one really runs again: 20 ms of CPU within a second.
    let c0 = hsched_linux::enforce::proc_cpu_ns(low).unwrap();
    let t2 = Instant::now();
    while hsched_linux::enforce::proc_cpu_ns(low).unwrap() < c0 + 20_000_000 {
        assert!(
            t2.elapsed() < Duration::from_secs(1),
            "the formerly frozen thread does not run"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    // No freezer cgroup is left behind.
    let mount = hsched_linux::enforce::freezer_mount().unwrap();
    let t0 = Instant::now();
    while mount.join(format!("hsched-{}", daemon.id())).exists() {
        assert!(
            t0.elapsed() < Duration::from_secs(3),
            "freezer cgroup left behind"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    for t in [high, low, builtin, tid("waiter")] {
        let _ = hsched_linux::sys::kill(t, libc::SIGKILL);
    }
    let _ = std::fs::remove_file(&sock);
}

#[test]
fn control_socket_operations_and_hostile_input() {
    let Some(_g) = live() else { return };
    let f = write_file(
        "ctl.toml",
        r#"
default = "ts"
[machine]
cpus = 1
[[scheduler]]
name = "root"
policy = "fp"
[[scheduler]]
name = "rez"
policy = "rez"
parent = "root"
params = { priority = 10 }
[[scheduler]]
name = "ts"
policy = "ts"
parent = "root"
params = { priority = 1 }
[[thread]]
name = "worker"
workload = { kind = "cpu-bound" }
"#,
    );
    let sock = std::env::temp_dir().join(format!("hsched-test-ctl-{}.sock", std::process::id()));
    let mut daemon = start_daemon(&f, &sock, &["--duration", "30s"]);
    let mut c = Client::connect(&sock).unwrap();
    let hello = c.request("hello", json!({})).unwrap();
    assert_eq!(hello["protocol"], 1);
    // HLSCtl operations.
    c.request(
        "create",
        json!({"name": "ps", "policy": "ps", "parent": "root", "parent_params": {"priority": 5}}),
    )
    .unwrap();
    c.request("begin-reservation", json!({"thread": "worker", "scheduler": "rez", "params": {"amount": "5ms", "period": "20ms"}})).unwrap();
    let tree = c.request("show", json!({})).unwrap();
    let w = tree["threads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "worker")
        .unwrap()
        .clone();
    assert_eq!(w["scheduler"], "rez");
    // Under the reservation the worker shows its period's end; its CPU
    // time, stolen time and (a built-in workload) its own counts are there.
    let now = tree["now_ns"].as_u64().unwrap();
    let deadline = w["deadline_ns"].as_u64().expect("a deadline under rez");
    assert!(
        deadline + 20_000_000 >= now && deadline <= now + 20_000_000,
        "deadline {deadline} ns at {now} ns, period 20 ms"
    );
    assert!(w["stolen_ns"].is_u64() && w["jobs"].is_u64(), "{w}");
    c.request(
        "set-params",
        json!({"thread": "worker", "params": {"amount": "6ms", "period": "20ms"}}),
    )
    .unwrap();
    c.request("end-reservation", json!({"thread": "worker"}))
        .unwrap();
    c.request(
        "move",
        json!({"thread": w["tid"], "to": "ps", "params": {"share": 3}}),
    )
    .unwrap();
    c.request(
        "set-share",
        json!({"thread": "worker", "share": 2, "warp": "1ms"}),
    )
    .unwrap();
    let err = c.request("destroy", json!({"name": "ps"})).unwrap_err();
    assert!(
        err.to_string().contains("refused"),
        "ps still has a child: {err}"
    );
    c.request("move", json!({"thread": "worker", "to": "ts"}))
        .unwrap();
    c.request("destroy", json!({"name": "ps"})).unwrap();
    // Attach an existing process by pid, then detach it.
    let mut other = Command::new(bin())
        .args(["probe", "hog", "--duration", "20s"])
        .spawn()
        .unwrap();
    let r = c
        .request("attach", json!({"pid": other.id(), "scheduler": "ts"}))
        .unwrap();
    assert_eq!(r["attached"].as_array().unwrap().len(), 1);
    c.request("detach", json!({"pid": other.id()})).unwrap();
    let _ = other.kill();
    let _ = other.wait();
    // Hostile input: every line gets an error reply, the daemon keeps serving.
    let mut rng = 0x2545_f491_4f6c_dd1du64;
    let mut next = || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let samples = [
        "", "{", "[]", "null", "{\"op\":5}", "{\"op\":\"nope\"}", "{\"v\":99,\"op\":\"show\"}", "{\"op\":\"move\",\"thread\":[1]}",
        "{\"op\":\"move\",\"thread\":\"worker\",\"to\":\"ts\",\"params\":{\"x\":{}}}", "{\"op\":\"attach\",\"pid\":-1}",
        "{\"op\":\"attach\",\"pid\":1e99}", "{\"op\":\"create\",\"name\":\"x\",\"policy\":\"nope\",\"parent\":\"root\"}",
        "{\"op\":\"begin-reservation\",\"thread\":\"worker\",\"scheduler\":\"rez\",\"params\":{\"amount\":\"900ms\",\"period\":\"10ms\"}}",
        "{\"op\":\"set-share\",\"thread\":\"worker\",\"share\":\"a\"}", "\u{0}\u{1}\u{2}",
    ];
    for s in samples {
        let resp = c.raw(s).unwrap();
        let v: Value = serde_json::from_str(&resp).unwrap();
        assert_eq!(v["ok"], false, "{s:?} should be refused, got {resp}");
    }
    for _ in 0..300 {
        let len = (next() % 200) as usize;
        let line: String = (0..len)
            .map(|_| {
                char::from(
                    b" {}[]\":,0a\\tv1op"
                        .get((next() % 17) as usize)
                        .copied()
                        .unwrap_or(b'x'),
                )
            })
            .collect();
        let resp = c.raw(&line).unwrap();
        assert!(resp.contains("\"ok\""), "no reply to {line:?}");
    }
    // An over-long line is refused and the connection closed; others go on.
    let mut big = Client::connect(&sock).unwrap();
    let huge = "x".repeat(hsched_linux::control::MAX_LINE + 10);
    let r = big.raw(&huge);
    assert!(r.map(|s| s.contains("too-large")).unwrap_or(true));
    // A client that connects and says nothing does not stall anyone.
    let _silent = std::os::unix::net::UnixStream::connect(&sock).unwrap();
    let t0 = Instant::now();
    c.request("show", json!({})).unwrap();
    assert!(t0.elapsed() < Duration::from_millis(500));
    c.request("shutdown", json!({})).unwrap();
    let out = wait_bounded(daemon_take(&mut daemon), Duration::from_secs(10));
    assert!(out.status.success());
    let _ = std::fs::remove_file(&sock);
}

fn daemon_take(c: &mut Child) -> Child {
    // Move the child out for wait_bounded (stdout is null, nothing to read).
    let id = c.id();
    let _ = id;
    std::mem::replace(c, Command::new("true").spawn().unwrap())
}

/// Regehr 2001, ch. 11: with `--stolen trace` the daemon measures interrupt
/// time on the managed CPU (IRQ tracepoints) and feeds the part that falls
/// while the hierarchy runs a thread there to the HSI, for Rez-C.
#[test]
fn stolen_time_is_measured_and_fed_to_the_hierarchy() {
    let Some(_g) = live() else { return };
    let f = write_file(
        "rezc.toml",
        r#"
default = "rez"
[machine]
cpus = 1
[[scheduler]]
name = "rez"
policy = "rez"
variant = "catch-up"
[[thread]]
name = "hog"
params = { amount = "10ms", period = "33ms" }
workload = { kind = "cpu-bound" }
"#,
    );
    let r = run_json(&f, &["--duration", "2s", "--stolen", "trace"]);
    let s = &r["live"]["stolen"];
    eprintln!("stolen time: {s}");
    assert_eq!(s["source"], "trace");
    let measured = s["measured_ns"][0].as_u64().unwrap();
    let fed = s["fed_ns"][0].as_u64().unwrap();
    // The local timer alone interrupts a busy CPU 250 times a second, and
    // the hog runs 30 % of the time.
    assert!(
        measured > 0 && fed > 0,
        "measured {measured} ns, fed {fed} ns"
    );
    assert!(fed <= measured);
    assert!(s["reports"].as_u64().unwrap() > 0);
    assert_eq!(r["live"]["protocol_errors"], 0);
    // Without the option nothing is measured.
    let r = run_json(&f, &["--duration", "1s"]);
    assert_eq!(r["live"]["stolen"]["source"], "off");
    assert_eq!(r["live"]["stolen"]["fed_ns"][0], 0);
}

/// One monitored thread's sample from the progress trace (progress.rs).
struct PSample {
    t: f64,
    cpu_ns: u64,
    rchar: u64,
    wchar: u64,
}

/// Rate of a counter of `s` between `a` and `b` seconds (per second).
fn rate(s: &[PSample], a: f64, b: f64, f: fn(&PSample) -> u64) -> f64 {
    let at = |t: f64| s.iter().rev().find(|x| x.t <= t).map_or(0, f);
    (at(b).saturating_sub(at(a))) as f64 / (b - a)
}

#[test]
fn pipe_fill_levels_size_a_shell_pipeline_beside_a_hog() {
    let Some(_g) = live() else { return };
    if !Path::new("/usr/bin/python3").exists()
        && Command::new("python3")
            .arg("-c")
            .arg("pass")
            .status()
            .is_err()
    {
        eprintln!("SKIPPED: examples/pipeline-live.toml needs python3");
        return;
    }
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/pipeline-live.toml");
    let (r, trace) = run_with_progress_trace(&file, "progress.csv", "10s");
    // The trace: queues with their consumer and producer processes, and
    // every monitored thread's proportion, CPU time and bytes moved.
    let text = std::fs::read_to_string(&trace).unwrap();
    let mut queues: std::collections::BTreeMap<String, (usize, String, String)> =
        Default::default();
    let mut threads: std::collections::BTreeMap<String, Vec<PSample>> = Default::default();
    for l in text.lines() {
        let f: Vec<&str> = l.split(',').collect();
        match f[0] {
            "q" => {
                let e = queues.entry(f[2].to_string()).or_default();
                e.0 += 1;
                e.1 = f[5].to_string();
                e.2 = f[6].to_string();
            }
            "p" => threads.entry(f[7].to_string()).or_default().push(PSample {
                t: f[1].parse().unwrap(),
                cpu_ns: f[4].parse().unwrap(),
                rchar: f[5].parse().unwrap(),
                wchar: f[6].parse().unwrap(),
            }),
            _ => {}
        }
    }
    // Two queues sampled about every 10 ms for ~10 s: source -> filter and
    // filter -> sink (helpers' pipes during start-up are short-lived).
    let long: Vec<&(usize, String, String)> = queues.values().filter(|q| q.0 > 300).collect();
    assert_eq!(long.len(), 2, "queues: {queues:?}");
    let filter = long
        .iter()
        .find(|q| long.iter().any(|o| o.2 == q.1))
        .map(|q| q.1.clone())
        .unwrap();
    let source = long.iter().find(|q| q.1 == filter).unwrap().2.clone();
    let sink = long.iter().find(|q| q.2 == filter).unwrap().1.clone();
    let (src, flt, snk) = (&threads[&source], &threads[&filter], &threads[&sink]);
    let t0 = src[0].t; // the source's clock: pulse over [4, 6) s
    let cpu = |s: &[PSample], a: f64, b: f64| rate(s, t0 + a, t0 + b, |x| x.cpu_ns) / 1e9;
    let base_in = rate(src, t0 + 1.5, t0 + 3.5, |x| x.wchar);
    let base_out = rate(snk, t0 + 1.5, t0 + 3.5, |x| x.rchar);
    let pulse_out = rate(snk, t0 + 4.5, t0 + 6.0, |x| x.rchar);
    let (fb, fp) = (cpu(flt, 1.5, 3.5), cpu(flt, 4.5, 6.0));
    let (sb, sp) = (cpu(snk, 1.5, 3.5), cpu(snk, 4.5, 6.0));
    let hog = cpu_s(&r, "hog") / 10.0;
    eprintln!(
        "pipeline: source {:.0} KB/s, sink {:.0} KB/s base, {:.0} KB/s in the pulse; \
         filter CPU {fb:.3} -> {fp:.3}, sink CPU {sb:.3} -> {sp:.3}; hog {hog:.3} of the CPU",
        base_in / 1e3,
        base_out / 1e3,
        pulse_out / 1e3
    );
    // The pipeline keeps its 200 KB/s beside the hog and doubles with the
    // source; the stages' CPU follows (the controller sized it: the hog
    // would take all of it otherwise).
    assert!(
        base_out > 0.8 * 200e3,
        "sink {base_out} B/s, source {base_in} B/s"
    );
    assert!(
        pulse_out > 1.5 * base_out,
        "pulse {pulse_out} vs base {base_out}"
    );
    assert!(
        fp > 1.5 * fb && sp > 1.5 * sb,
        "filter {fb}->{fp}, sink {sb}->{sp}"
    );
    // The hog is squished, not starved.
    assert!(hog > 0.2 && hog < 0.9, "hog {hog}");
}

/// Regehr 2001, Table 10.5 live, the hard-reservation row with one background
/// thread: a frame renderer (10 ms of CPU per frame, a gap over 33 ms is a
/// miss) under Rez 10 ms / 33 ms beside a CPU hog under TS, for 4 s, so at
/// least three of the kernel's real-time throttling windows (50 ms of every
/// second when the CPU is all `SCHED_FIFO`) would fall in the run. Without
/// the real-time governor and the reservation grace (enforce.rs) this run
/// missed 40–60 frames, up to 95 ms late (without the grace alone,
/// 139–203); the bounds leave room for the shared, loaded 2-vCPU machine,
/// where up to 13 misses and one frame 20.5 ms late were seen in 4 s, by
/// the code of this commit and by that of several before it, and a frame
/// as late as the daemon's own stall (below).
#[test]
fn hard_reservation_frames_survive_a_hog_and_rt_throttling() {
    let Some(_g) = live() else { return };
    let f = write_file(
        "frames.toml",
        r#"
[machine]
cpus = 1
[[scheduler]]
name = "root"
policy = "fp"
[[scheduler]]
name = "rez"
policy = "rez"
parent = "root"
params = { priority = 10 }
[[scheduler]]
name = "ts"
policy = "ts"
parent = "root"
params = { priority = 1 }
[[thread]]
name = "renderer"
scheduler = "rez"
params = { amount = "10ms", period = "33ms" }
workload = { kind = "frame-renderer", work = "10ms", miss_gap = "33ms" }
[[thread]]
name = "hog"
scheduler = "ts"
workload = { kind = "cpu-bound" }
"#,
    );
    let (r, stolen) = run_json_steal(&f, &["--duration", "4s"]);
    let p = program(&r, "renderer");
    let share = p["share"].as_f64().unwrap();
    let jobs = p["jobs"].as_u64().unwrap();
    let misses = p["deadline_misses"].as_u64().unwrap();
    let late_ms = p["max_lateness_ns"].as_i64().unwrap() as f64 / 1e6;
    let g = &r["live"]["rt_governor"];
    // A stall of the daemon's own (seen once in CI: one frame 47 ms late,
    // none stolen from the test CPU, the hog demoted 64 ms longer than
    // usual, which only a daemon that did not run explains).
    let daemon_late_ms = daemon_late_ns(&r) as f64 / 1e6;
    eprintln!(
        "renderer share {share:.3}, {jobs} frames, {misses} misses, max lateness {late_ms:.2} ms; hog {:.3}; daemon's timers up to {daemon_late_ms:.2} ms late; governor {g}",
        program(&r, "hog")["share"].as_f64().unwrap()
    );
    // The longest the renderer may be let run in a period, by design: the
    // amount, the grace, and at most `lost_cap` of time its grant did not
    // reach it (docs/measurements/live-mode.md, "Reservation grace"). A quiet host gives
    // 32–34 %; one CI run on a disturbed host measured 35.9 %.
    let ms = |key: &str| g[key].as_u64().unwrap() as f64 / 1e6;
    let cap = (10.0 + ms("grace_ns") + ms("lost_cap_ns")) / 33.0;
    // Time the host steals is lost to the run (see `run_json_steal`): it
    // lowers the floor, and each 10 ms of it may cost a frame and make
    // one later.
    let stolen_ms = stolen as f64 / 1e6;
    let low = 0.29 - stolen as f64 / r["duration_ns"].as_u64().unwrap() as f64;
    assert!(
        (low..=cap).contains(&share),
        "renderer share {share}, not within {low}..={cap}"
    );
    assert!(jobs >= 100, "only {jobs} frames in 4 s");
    let allowed = 20 + stolen / 10_000_000;
    assert!(
        misses <= allowed,
        "{misses} frames missed (allowed {allowed})"
    );
    // With the governor off, frames are 65 ms late (the throttling window
    // after a period's budget) while the daemon is punctual (< 0.5 ms).
    assert!(
        late_ms < 40.0 + stolen_ms + daemon_late_ms,
        "a frame was {late_ms} ms late"
    );
    assert!(g["demotions"].as_u64().unwrap() > 0, "no demotion: {g}");
    assert!(g["deferred_freezes"].as_u64().unwrap() > 0, "no grace: {g}");
    assert!(program(&r, "hog")["share"].as_f64().unwrap() > 0.5);
}

/// The `live_player` example of `hsched-coop`, built beforehand with
/// `cargo build [--release] --examples -p hsched-coop`.
fn live_player() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    // target/<profile>/deps/live-<hash>
    let target = exe.parent()?.parent()?.parent()?;
    ["release", "debug"]
        .iter()
        .map(|p| target.join(p).join("examples").join("live_player"))
        .find(|p| p.is_file())
}

fn read_json(p: &Path) -> Value {
    let s = std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    serde_json::from_str(s.trim()).unwrap_or_else(|e| panic!("{}: {e}: {s}", p.display()))
}

/// Live `coop_poll` (Sinha 2007, §2.3, crate::coop): a player calling it
/// through shared memory and a futex gets OUT back and, cooperating, is
/// never policed, although every cooperative sleep is a `FUTEX_WAIT` block
/// the observer sees (the call must reach the policy before that block);
/// a member that spins 300 ms without calling it is policed and comes back
/// on its next call. `grace` is 100 ms so that noise on this shared VM
/// does not police the cooperating player for a late event; a host that
/// stole more than that from the CPU during the run may still have, and
/// then one policing of the player is tolerated.
#[test]
fn live_coop_poll_gets_out_and_polices_a_spinning_member() {
    let Some(_g) = live() else { return };
    let Some(player) = live_player() else {
        eprintln!(
            "SKIPPED: no live_player binary; build it with `cargo build --release --examples -p hsched-coop`"
        );
        return;
    };
    let dir = std::env::temp_dir().join(format!("hsched-live-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (pj, sj) = (dir.join("player.json"), dir.join("spinner.json"));
    let _ = std::fs::remove_file(&pj);
    let _ = std::fs::remove_file(&sj);
    let f = write_file(
        "coop.toml",
        &format!(
            r#"
[machine]
cpus = 1
[[scheduler]]
name = "coop"
policy = "coop"
grace = "100ms"
[[thread]]
name = "player"
scheduler = "coop"
exec = ["{p}", "--frames", "96", "--name", "player", "--json", "{pj}"]
[[thread]]
name = "spinner"
scheduler = "coop"
exec = ["{p}", "--frames", "96", "--seed", "2", "--spin-at-ms", "1000", "--spin-ms", "300", "--name", "spinner", "--json", "{sj}"]
[[thread]]
name = "hog"
scheduler = "coop"
workload = {{ kind = "cpu-bound" }}
"#,
            p = player.display(),
            pj = pj.display(),
            sj = sj.display()
        ),
    );
    // CPU 0, not `test_cpu()`: live runs of other sessions manage the last
    // CPU with threads at the same SCHED_FIFO priority, which would delay
    // the player past its grace; the daemon itself then runs on another
    // CPU, above them.
    let mut cmd = Command::new(bin());
    cmd.arg("run")
        .arg(&f)
        .args(["--cpus", "0", "--json", "--duration", "6s"])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    let s0 = steal_ns_on(0);
    let child = cmd.spawn().unwrap();
    let daemon = child.id();
    let out = wait_bounded(child, Duration::from_secs(60));
    let stolen = steal_ns_on(0).saturating_sub(s0);
    assert!(
        out.status.success(),
        "hsched-live run failed: {:?}",
        out.status
    );
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        !Path::new(&format!("/dev/shm/hsched-coop-{daemon}")).exists(),
        "channel file left behind"
    );
    let (p, s) = (read_json(&pj), read_json(&sj));
    eprintln!(
        "player {p}\nspinner {s}\nhog share {}\nthe host stole {} ms of CPU 0",
        program(&r, "hog")["share"],
        stolen / 1_000_000
    );
    let n = |v: &Value, k: &str| v[k].as_u64().unwrap_or_else(|| panic!("{k} in {v}"));
    assert_eq!(p["cooperative"], true, "{p}");
    assert!(n(&p, "polls") >= 50, "{p}");
    // OUT came back: every answer carried a yield-by deadline.
    assert_eq!(n(&p, "out_deadlines"), n(&p, "polls"), "{p}");
    let tolerated = u64::from(stolen > 100_000_000);
    assert!(
        n(&p, "policed") <= tolerated,
        "a cooperating player was policed: {p}"
    );
    assert!(n(&p, "shown") >= 86, "{p}");
    assert_eq!(s["cooperative"], true, "{s}");
    assert!(n(&s, "policed") >= 1, "the spinner was not policed: {s}");
    assert_eq!(n(&s, "policed_blocked"), 0, "{s}");
    // Re-admitted: it kept calling coop_poll after the spin.
    assert!(n(&s, "polls") >= 30, "{s}");
    // The hog still gets processor time beside the domain.
    assert!(program(&r, "hog")["share"].as_f64().unwrap() > 0.1);
}

/// A C program (`crates/coop/tests/c/live.c`) calling the live functions
/// of `hsched_coop.h` under the daemon. The hierarchy starts without a
/// `coop` instance: one is created at 100 ms by a timeline operation and
/// the program moved under it at 150 ms, so the channel must exist from
/// the start (crate::coop). The program's own loop gets a yield-by time
/// in every answer, its cooperative sleeps never return early, a 150 ms
/// spin is reported as one demotion (from the VP parameters, with no
/// policy trace), a second thread's best-effort event comes back as OUT's
/// best event of the other members, and an `hsched_coop_new_live` loop
/// runs its deadline events on time. `grace` is 50 ms (a slice is 20 ms here, the spin
/// 150 ms) so that noise on this shared VM cannot police the cooperating
/// part.
#[test]
fn live_c_program_polls_the_daemon() {
    let Some(_g) = live() else { return };
    if Command::new("cc").arg("--version").output().is_err() {
        eprintln!("SKIPPED: no C compiler (cc)");
        return;
    }
    let Some(lib) = coop_staticlib() else {
        panic!("building libhsched_coop.a failed");
    };
    let coop = Path::new(env!("CARGO_MANIFEST_DIR")).join("../coop");
    let dir = std::env::temp_dir().join(format!("hsched-live-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let exe = dir.join("coop_live_c");
    let status = Command::new("cc")
        .args(["-std=c99", "-Wall", "-Werror", "-O1", "-I"])
        .arg(coop.join("include"))
        .arg(coop.join("tests/c/live.c"))
        .arg(&lib)
        .args(["-lpthread", "-ldl", "-lm", "-o"])
        .arg(&exe)
        .status()
        .expect("cc runs");
    assert!(status.success(), "compiling live.c failed");
    let res = dir.join("coop_live_c.txt");
    let _ = std::fs::remove_file(&res);
    let f = write_file(
        "coop_c.toml",
        &format!(
            r#"
[machine]
cpus = 1
[[scheduler]]
name = "root"
policy = "ps"
[[thread]]
name = "cprog"
scheduler = "root"
exec = ["{exe}", "{res}", "400"]
[[at]]
time = "100ms"
op = "create-scheduler"
scheduler = {{ name = "coop", policy = "coop", parent = "root", grace = "50ms" }}
[[at]]
time = "150ms"
op = "move-thread"
thread = "cprog"
to = "coop"
"#,
            exe = exe.display(),
            res = res.display()
        ),
    );
    // CPU 0, as the other coop test (see there).
    let s0 = steal_ns_on(0);
    let child = Command::new(bin())
        .arg("run")
        .arg(&f)
        .args(["--cpus", "0", "--json", "--duration", "5s"])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let daemon = child.id();
    let out = wait_bounded(child, Duration::from_secs(60));
    let stolen = steal_ns_on(0).saturating_sub(s0);
    assert!(
        out.status.success(),
        "hsched-live run failed: {:?}",
        out.status
    );
    assert!(
        !Path::new(&format!("/dev/shm/hsched-coop-{daemon}")).exists(),
        "channel file left behind"
    );
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(program(&r, "cprog")["exit_status"], json!(0), "{r}");
    let line = std::fs::read_to_string(&res).unwrap_or_else(|e| panic!("{}: {e}", res.display()));
    eprintln!(
        "live.c: {line}\nthe host stole {} ms of CPU 0",
        stolen / 1_000_000
    );
    let kv: std::collections::BTreeMap<&str, i64> = line
        .split_whitespace()
        .filter_map(|w| w.split_once('='))
        .map(|(k, v)| (k, v.parse().unwrap_or(-1)))
        .collect();
    let n = |k: &str| *kv.get(k).unwrap_or_else(|| panic!("{k} in {line}"));
    assert_eq!(n("open"), 1, "no channel: {line}");
    assert_eq!(n("refused"), 0, "{line}");
    // 60 cooperative sleeps plus the yields of 2 ms of work per frame.
    assert_eq!(n("sleeps"), 60, "{line}");
    assert!(n("polls") >= 61, "{line}");
    // OUT came back: every answer carried a yield-by time.
    assert_eq!(n("out_deadlines"), n("polls"), "{line}");
    assert_eq!(n("early"), 0, "a cooperative sleep returned early: {line}");
    // A cooperating member is policed only if it overran the 50 ms grace,
    // which the host can make it do by stealing more than that from its
    // processor (as in the other coop test).
    let before = n("policed_before");
    assert!(
        before == 0 || stolen > 50_000_000,
        "policed while cooperating, with {} ms stolen: {line}",
        stolen / 1_000_000
    );
    assert_eq!(n("policed_after"), before + 1, "{line}");
    // A second thread of the program joined the domain with a less
    // important best-effort event: OUT reported it to the main thread.
    assert_eq!(n("other_started"), 1, "{line}");
    assert_eq!(n("other_refused"), 0, "{line}");
    assert_eq!(n("other_seen"), 3, "{line}");
    assert_eq!(n("other_joined"), 1, "{line}");
    assert_eq!(n("loop_deadlines"), 8, "{line}");
    assert_eq!(n("loop_best_effort"), 8, "{line}");
    assert_eq!(n("loop_ran"), 16, "{line}");
    assert_eq!(n("loop_early"), 0, "{line}");
}

/// The two-process pipeline of `unix_socket_fill_levels_size_a_consumer`:
/// a parent and a forked child joined by a `socket.socketpair()`. The child
/// (source) sends 4 KiB chunks at 200 KB/s, doubled over [4, 6) s of its
/// clock, burning 0.25 µs of CPU per byte; the parent (consumer) burns
/// 1 µs per byte received: 20 % of the CPU, 40 % in the pulse. The
/// consumer starts reading 0.3 s late, so that the monitor sees data in the
/// socket at once and reports it from the start (a direction is a queue
/// from the first sample that finds data in it: progress.rs). They use
/// `read` and `write` (not `send` / `recv`, which `/proc/PID/io` does not
/// count) so that the trace shows the bytes moved.
const SOCKET_PIPELINE: &str = r#"
import os, socket, time
CHUNK = 4096
RATE = 200e3
PULSE = (4.0, 6.0)
def burn(n, cost):
    end = time.thread_time() + n * cost
    while time.thread_time() < end:
        pass
def owed(t):
    return RATE * (t + max(0.0, min(t, PULSE[1]) - PULSE[0]))
a, b = socket.socketpair()
if os.fork() == 0:
    b.close()
    t0 = time.monotonic()
    made = 0
    while True:
        while True:
            need = made + CHUNK - owed(time.monotonic() - t0)
            if need <= 0:
                break
            time.sleep(need / (2 * RATE) + 0.0005)
        burn(CHUNK, 0.25e-6)
        data = bytes(CHUNK)
        while data:
            data = data[os.write(a.fileno(), data):]
        made += CHUNK
a.close()
time.sleep(0.3)
while True:
    buf = os.read(b.fileno(), CHUNK)
    if not buf:
        break
    burn(len(buf), 1e-6)
"#;

/// Issue #8 item 3 for sockets: a consumer reading a UNIX stream socket
/// (a socketpair between two unmodified processes) is sized by `realrate`
/// from the socket's fill level, read from outside through `sock_diag`
/// (progress.rs), beside a CPU hog: its CPU and throughput follow the
/// producer's rate when it doubles, and the queue is reported in memory
/// units against the writer's `SO_SNDBUF`.
#[test]
fn unix_socket_fill_levels_size_a_consumer() {
    let Some(_g) = live() else { return };
    let py = if Path::new("/usr/bin/python3").exists() {
        "/usr/bin/python3"
    } else {
        "python3"
    };
    if Command::new(py).arg("-c").arg("pass").status().is_err() {
        eprintln!("SKIPPED: the socket pipeline needs python3");
        return;
    }
    let prog = write_file("socket_pipeline.py", SOCKET_PIPELINE);
    let file = write_file(
        "socket_pipeline.toml",
        &format!(
            r#"
[machine]
cpus = 1

[[scheduler]]
name = "realrate"
policy = "realrate"
cpus = [0]
filter = 0.3

[[thread]]
name = "pipeline"
scheduler = "realrate"
workload = {{ kind = "periodic", period = "20ms", exec = "5ms" }}
exec = ["{py}", "{}"]

[[thread]]
name = "hog"
scheduler = "realrate"
workload = {{ kind = "cpu-bound" }}
"#,
            prog.display()
        ),
    );
    let (r, trace, stolen) = run_with_progress_trace_steal(&file, "socket_progress.csv", "8s");
    let text = std::fs::read_to_string(&trace).unwrap();
    // Socket queue samples (t, fill fraction) with their consumer and
    // producer; monitored threads by pid.
    let mut queues: std::collections::BTreeMap<String, Vec<(f64, f64)>> = Default::default();
    let mut ends = (String::new(), String::new());
    let mut threads: std::collections::BTreeMap<String, Vec<PSample>> = Default::default();
    for l in text.lines() {
        let f: Vec<&str> = l.split(',').collect();
        match f[0] {
            "q" if f[2].starts_with("unix:") => {
                let (fill, size): (f64, f64) = (f[3].parse().unwrap(), f[4].parse().unwrap());
                assert!(size > 0.0 && fill <= size, "{l}");
                queues
                    .entry(f[2].to_string())
                    .or_default()
                    .push((f[1].parse().unwrap(), fill / size));
                ends = (f[5].to_string(), f[6].to_string());
            }
            "p" => threads.entry(f[7].to_string()).or_default().push(PSample {
                t: f[1].parse().unwrap(),
                cpu_ns: f[4].parse().unwrap(),
                rchar: f[5].parse().unwrap(),
                wchar: f[6].parse().unwrap(),
            }),
            _ => {}
        }
    }
    // One direction only (the reverse one never carries data), sampled
    // about every 10 ms for most of the run.
    assert_eq!(queues.len(), 1, "socket queues: {:?}", queues.keys());
    let q = queues.values().next().unwrap();
    assert!(q.len() > 400, "{} samples", q.len());
    let (consumer, producer) = ends;
    let (cons, prod) = (&threads[&consumer], &threads[&producer]);
    let t0 = prod[0].t; // the producer's clock: pulse over [4, 6) s
    let cpu = |s: &[PSample], a: f64, b: f64| rate(s, t0 + a, t0 + b, |x| x.cpu_ns) / 1e9;
    let base_in = rate(prod, t0 + 2.0, t0 + 3.8, |x| x.wchar);
    let base_out = rate(cons, t0 + 2.0, t0 + 3.8, |x| x.rchar);
    let pulse_out = rate(cons, t0 + 4.5, t0 + 6.0, |x| x.rchar);
    let (cb, cp) = (cpu(cons, 2.0, 3.8), cpu(cons, 4.5, 6.0));
    let mean_fill = |a: f64, b: f64| {
        let v: Vec<f64> = q
            .iter()
            .filter(|s| s.0 >= t0 + a && s.0 < t0 + b)
            .map(|s| s.1)
            .collect();
        v.iter().sum::<f64>() / v.len().max(1) as f64
    };
    let (fb, fp) = (mean_fill(2.0, 3.8), mean_fill(4.5, 6.0));
    let hog = cpu_s(&r, "hog") / 8.0;
    // Time the host steals from the test CPU is lost to both programs (see
    // `run_json_steal`). Where in the run it fell is not known, so the
    // pulse's floors are lowered as if all of it fell in the 1.5 s the
    // pulse is measured over: one CI run under heavy steal measured 363
    // KB/s in the pulse against a quiet host's 410.
    let lost = (stolen as f64 / 1.5e9).min(0.5);
    eprintln!(
        "socket pipeline: producer {:.0} KB/s, consumer {:.0} KB/s base, {:.0} KB/s in the \
         pulse; consumer CPU {cb:.3} -> {cp:.3}; fill {fb:.3} -> {fp:.3}; hog {hog:.3}; \
         the host stole {} ms",
        base_in / 1e3,
        base_out / 1e3,
        pulse_out / 1e3,
        stolen / 1_000_000
    );
    assert!(
        base_out > 0.8 * 200e3,
        "consumer {base_out} B/s, producer {base_in} B/s"
    );
    // With the monitor off the consumer is a miscellaneous job that falls
    // behind in the pulse (measured: 341 of 400 KB/s, docs/real-rate.md).
    assert!(
        pulse_out > 1.85 * (1.0 - lost) * base_out,
        "pulse {pulse_out} vs base {base_out}"
    );
    assert!(cp > 1.7 * (1.0 - lost) * cb, "consumer CPU {cb} -> {cp}");
    // The controller holds the queue off both ends.
    assert!(fb > 0.1 && fb < 0.9, "fill {fb}");
    assert!(hog > 0.2 && hog < 0.9, "hog {hog}");
}

/// A low-priority program for [`fp_with_frozen`]: name, `sh -c` script,
/// and how many threads it has once set up.
type Low<'a> = (&'a str, &'a str, usize);

/// The daemon of a live test with a JSON report on its stdout; ended with
/// SIGTERM (it restores everything) if the test fails before
/// [`DaemonRun::finish`].
struct DaemonRun {
    child: Option<Child>,
    sock: PathBuf,
}

impl DaemonRun {
    /// Starts `hsched-live run` of `toml` (written to `TAG.toml`) on the
    /// test CPU for `duration`, with a JSON report and a control socket.
    fn start(tag: &str, toml: &str, duration: &str) -> DaemonRun {
        let f = write_file(&format!("{tag}.toml"), toml);
        let sock =
            std::env::temp_dir().join(format!("hsched-test-{tag}-{}.sock", std::process::id()));
        let _ = std::fs::remove_file(&sock);
        let cpu = test_cpu().to_string();
        let child = Command::new(bin())
            .arg("run")
            .arg(&f)
            .args(["--cpus", &cpu, "--json", "--duration", duration, "--socket"])
            .arg(&sock)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        DaemonRun {
            child: Some(child),
            sock,
        }
    }

    /// Waits for the end of the run and returns the report.
    fn finish(mut self) -> Value {
        let out = wait_bounded(self.child.take().unwrap(), Duration::from_secs(30));
        assert!(
            out.status.success(),
            "hsched-live run failed: {:?}",
            out.status
        );
        serde_json::from_slice(&out.stdout).unwrap()
    }

    /// The managed threads whose name is `name` or starts with `name/`
    /// (`None`: the daemon did not answer `show`).
    fn threads_of(&self, name: &str) -> Option<Vec<Value>> {
        let tree = Client::connect(&self.sock)
            .ok()
            .and_then(|mut c| c.request("show", json!({})).ok())?;
        let prefix = format!("{name}/");
        let threads = tree["threads"].as_array()?.iter().filter(|t| {
            t["name"] == name || t["name"].as_str().is_some_and(|n| n.starts_with(&prefix))
        });
        Some(threads.cloned().collect())
    }
}

impl Drop for DaemonRun {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = hsched_linux::sys::kill(c.id() as i32, libc::SIGTERM);
            let _ = c.wait();
        }
        let _ = std::fs::remove_file(&self.sock);
    }
}

/// An FP root on one CPU with `high` (FP priority 2, a built-in CPU hog
/// that starts at `high_start`) and a TS scheduler `lows` at FP priority 1
/// holding one thread per `(name, exec)`, `exec` a TOML array of strings.
fn fp_high_over_lows(high_start: &str, lows: &[(&str, String)]) -> String {
    let mut toml = format!(
        r#"
default = "fp"
[machine]
cpus = 1
[[scheduler]]
name = "fp"
policy = "fp"
[[scheduler]]
name = "lows"
policy = "ts"
parent = "fp"
params = {{ priority = 1 }}
[[thread]]
name = "high"
params = {{ priority = 2 }}
start = "{high_start}"
workload = {{ kind = "cpu-bound" }}
"#
    );
    for (name, exec) in lows {
        toml.push_str(&format!(
            "[[thread]]\nname = \"{name}\"\nscheduler = \"lows\"\nexec = {exec}\n"
        ));
    }
    toml
}

/// An FP hierarchy on the test CPU: each of `lows` (`sh -c SCRIPT`, under a
/// TS scheduler at FP priority 1) runs for the first 600 ms, long enough
/// to `exec` and set itself up, then `high` (FP priority 2, a built-in CPU
/// hog) starts and is always granted, so every runnable thread of the low
/// ones stays frozen. Returns the daemon, the pids of the low programs and
/// the tid of `high`, once every low one is set up and frozen.
fn fp_with_frozen(tag: &str, lows: &[Low], duration: &str) -> (DaemonRun, Vec<i32>, i32) {
    let execs: Vec<(&str, String)> = lows
        .iter()
        .map(|&(name, script, _)| (name, format!("[\"sh\", \"-c\", {script:?}]")))
        .collect();
    let run = DaemonRun::start(tag, &fp_high_over_lows("600ms", &execs), duration);
    let t0 = Instant::now();
    loop {
        let high = run.threads_of("high").unwrap_or_default();
        let ready: Vec<i32> = lows
            .iter()
            .filter_map(|&(name, _, n)| {
                let ts = run.threads_of(name)?;
                let pid = ts.iter().find(|t| t["name"] == name)?["tid"].as_i64()? as i32;
                // Set up: past its `exec` (the daemon's fork runs `run`)
                // and all its threads there ...
                let cmd = std::fs::read_to_string(format!("/proc/{pid}/cmdline")).ok()?;
                let set_up = !cmd.contains("\0run\0") && ts.len() == n;
                // ... and every runnable one frozen, in the kernel too.
                let frozen = ts.iter().filter(|t| t["runnable"] == true).all(|t| {
                    t["frozen"] == true
                        && hsched_linux::enforce::proc_state(t["tid"].as_i64().unwrap() as i32)
                            == Some('D')
                });
                (set_up && frozen).then_some(pid)
            })
            .collect();
        if let (Some(h), true) = (high.first(), ready.len() == lows.len()) {
            let h = h["tid"].as_i64().unwrap() as i32;
            return (run, ready, h);
        }
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "the low-priority programs were never all set up and frozen"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Sends `sig` to `pid` and returns how long until the process ended
/// (zombie or gone) and until it was reaped (`/proc/PID` gone), or `None`
/// if it was still there after `limit`.
fn signal_and_time(pid: i32, sig: i32, limit: Duration) -> Option<(Duration, Duration)> {
    let proc_dir = PathBuf::from(format!("/proc/{pid}"));
    // Timed from before the call: the daemon (real-time, perhaps on this
    // CPU) may thaw and reap the program before `kill` returns.
    let t0 = Instant::now();
    hsched_linux::sys::kill(pid, sig).unwrap();
    let mut ended = None;
    while t0.elapsed() < limit {
        let st = hsched_linux::enforce::proc_state(pid);
        if ended.is_none() && matches!(st, None | Some('Z') | Some('X')) {
            ended = Some(t0.elapsed());
        }
        if !proc_dir.exists() {
            return Some((ended.unwrap_or(t0.elapsed()), t0.elapsed()));
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    None
}

fn median(v: &[Duration]) -> Duration {
    let mut v = v.to_vec();
    v.sort();
    v[v.len() / 2]
}

fn kill_all(pids: &[i32]) {
    for &q in pids {
        let _ = hsched_linux::sys::kill(q, libc::SIGKILL);
    }
}

/// Issue #6: `kill -9` of a program the hierarchy never grants (frozen in
/// its freezer cgroup) takes effect at once, not at its next grant, and the
/// granted program runs on. The last one has 3 frozen threads besides its
/// blocked main thread: all of them leave the hierarchy.
#[test]
fn kill_9_of_a_frozen_program_takes_effect_at_once() {
    let Some(_g) = live() else { return };
    let multi = format!(
        "exec {} probe poll --threads 3 --duration 30s > /dev/null",
        bin()
    );
    let loop_ = "while :; do :; done";
    let lows: Vec<Low> = vec![
        ("low1", loop_, 1),
        ("low2", loop_, 1),
        ("low3", loop_, 1),
        ("low4", loop_, 1),
        ("low5", loop_, 1),
        ("multi", &multi, 4),
    ];
    let (run, pids, high) = fp_with_frozen("kill9", &lows, "6s");
    let mut ended = Vec::new();
    let mut reaped = Vec::new();
    for &p in &pids {
        let Some((e, r)) = signal_and_time(p, libc::SIGKILL, Duration::from_secs(1)) else {
            kill_all(&pids);
            panic!("a frozen program was still there 1 s after kill -9");
        };
        ended.push(e);
        reaped.push(r);
        // The granted hog runs on: 50 ms of CPU within 200 ms.
        let c0 = hsched_linux::enforce::proc_cpu_ns(high).unwrap();
        std::thread::sleep(Duration::from_millis(200));
        let c1 = hsched_linux::enforce::proc_cpu_ns(high).unwrap();
        assert!(
            c1 > c0 + 50_000_000,
            "the granted program stopped ({} ns in 200 ms)",
            c1 - c0
        );
    }
    // Every thread of the killed programs has left the hierarchy (none
    // stays behind as a runnable ghost).
    for (name, _, _) in &lows {
        let left = run.threads_of(name).expect("the daemon answers `show`");
        assert!(left.is_empty(), "{name} left {left:?} in the hierarchy");
    }
    let r = run.finish();
    eprintln!(
        "kill -9 of a frozen program: ended after {ended:?} (median {:?}), reaped after {reaped:?} (median {:?}); live.signals {}",
        median(&ended),
        median(&reaped),
        r["live"]["signals"]
    );
    assert!(median(&reaped) < Duration::from_millis(100));
    // 5 single-threaded programs and the 3 frozen threads of the last one.
    assert_eq!(r["live"]["fatal_thaws"], 8);
    assert_eq!(r["live"]["signals"]["exits_found"], 0);
    assert_eq!(r["live"]["protocol_errors"], 0);
    for (n, _, _) in &lows {
        // Raw wait status: killed by signal 9.
        assert_eq!(
            program(&r, n)["exit_status"],
            libc::SIGKILL,
            "{n} was killed"
        );
    }
    assert!(cpu_s(&r, "high") > 4.0, "the granted program ran on");
}

/// Issue #6: SIGTERM to a frozen program without a handler ends it at once
/// (the kernel's default action); a frozen program that catches SIGTERM is
/// not thawed: its handler runs when the hierarchy grants it, here never
/// during the run.
#[test]
fn sigterm_ends_a_frozen_program_at_once_unless_it_has_a_handler() {
    let Some(_g) = live() else { return };
    let loop_ = "while :; do :; done";
    let lows: Vec<Low> = vec![
        ("plain1", loop_, 1),
        ("plain2", loop_, 1),
        ("plain3", loop_, 1),
        ("caught", "trap 'exit 3' TERM; while :; do :; done", 1),
    ];
    let (run, pids, high) = fp_with_frozen("term", &lows, "3s");
    let mut reaped = Vec::new();
    for &p in &pids[..3] {
        match signal_and_time(p, libc::SIGTERM, Duration::from_secs(1)) {
            Some((_, r)) => reaped.push(r),
            None => {
                kill_all(&pids);
                panic!("a frozen program was still there 1 s after SIGTERM");
            }
        }
    }
    let caught = pids[3];
    let gone = signal_and_time(caught, libc::SIGTERM, Duration::from_millis(500));
    let state = hsched_linux::enforce::proc_state(caught);
    if gone.is_some() || state != Some('D') {
        kill_all(&pids);
        panic!("the program with a SIGTERM handler was thawed: gone {gone:?}, state {state:?}");
    }
    assert!(hsched_linux::enforce::proc_cpu_ns(high).is_some());
    let r = run.finish();
    kill_all(&pids);
    eprintln!(
        "SIGTERM to a frozen program: reaped after {reaped:?} (median {:?}); live.signals {}",
        median(&reaped),
        r["live"]["signals"]
    );
    assert_eq!(r["live"]["fatal_thaws"], 3);
    assert_eq!(r["live"]["protocol_errors"], 0);
    for n in ["plain1", "plain2", "plain3"] {
        assert_eq!(
            program(&r, n)["exit_status"],
            libc::SIGTERM,
            "{n} ended by SIGTERM"
        );
    }
    // Still there (frozen) when the run ended; its handler runs when hsched
    // lets it go.
    assert_eq!(program(&r, "caught")["exit_status"], Value::Null);
}

/// A Python program whose second thread `exec`s a shell CPU loop: the
/// kernel kills the main thread and the caller goes on under its pid.
const EXEC_FROM_THREAD: &str = "import os,threading; threading.Thread(target=lambda: os.execv('/bin/sh', ['sh','-c','while :; do :; done'])).start(); threading.Event().wait()";

/// The freezer cgroup of `pid` (`/proc/PID/cgroup`), `""` if none.
fn freezer_cgroup(pid: i32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/cgroup"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| {
            let (_, rest) = l.split_once(':')?;
            let (ctl, path) = rest.split_once(':')?;
            ctl.split(',')
                .any(|c| c == "freezer")
                .then(|| path.to_string())
        })
        .unwrap_or_default()
}

/// Issue #6, live-mode `execve` from a thread other than the leader: under
/// FP, `execer` (priority 1, [`EXEC_FROM_THREAD`]) runs alone until `high`
/// (priority 2, a CPU hog) starts at 2 s. Returns the daemon and the
/// program's pid once (1) the daemon manages exactly one thread of it, the
/// exec'd task under the pid, (2) it ran alone before `high` came, and (3)
/// since `high` runs, it is frozen in its hsched freezer cgroup and gets no
/// CPU. `None` when python3 is missing.
fn exec_from_a_thread(tag: &str) -> Option<(DaemonRun, i32)> {
    if !Command::new("python3")
        .args(["-c", "pass"])
        .status()
        .is_ok_and(|s| s.success())
    {
        eprintln!("SKIPPED: python3 is missing");
        return None;
    }
    let toml = fp_high_over_lows(
        "2s",
        &[(
            "execer",
            format!("[\"python3\", \"-c\", {EXEC_FROM_THREAD:?}]"),
        )],
    );
    let run = DaemonRun::start(tag, &toml, "6s");
    let daemon = run.child.as_ref().unwrap().id();
    // (1) The exec'd shell is managed under the pid, and nothing else.
    let t0 = Instant::now();
    let mut pid = None;
    let mut last = Vec::new();
    loop {
        if let Some(ts) = run.threads_of("execer") {
            if pid.is_none() {
                pid = ts.first().and_then(|t| t["pid"].as_i64()).map(|p| p as i32);
            }
            if let Some(p) = pid {
                let comm = std::fs::read_to_string(format!("/proc/{p}/comm")).unwrap_or_default();
                let tids: Vec<i64> = ts.iter().filter_map(|t| t["tid"].as_i64()).collect();
                if comm.trim() == "sh" && tids == [p as i64] {
                    break;
                }
            }
            last = ts;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "after the exec the daemon does not manage the program under its pid {pid:?}: {last:?}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let pid = pid.unwrap();
    // (2) Alone on the test CPU before `high` starts: it runs.
    let c0 = hsched_linux::enforce::proc_cpu_ns(pid).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let c1 = hsched_linux::enforce::proc_cpu_ns(pid).unwrap();
    let alone = run.threads_of("high").unwrap_or_default().is_empty();
    if alone {
        assert!(
            c1 > c0 + 200_000_000,
            "alone, the exec'd program got {} ns of 300 ms",
            c1 - c0
        );
    }
    // (3) Once `high` runs, the program is frozen in its hsched cgroup.
    let cg = format!("/hsched-{daemon}/");
    let t1 = Instant::now();
    loop {
        let frozen = run
            .threads_of("execer")
            .is_some_and(|ts| ts.len() == 1 && ts[0]["tid"] == pid && ts[0]["frozen"] == true);
        if frozen
            && !run.threads_of("high").unwrap_or_default().is_empty()
            && hsched_linux::enforce::proc_state(pid) == Some('D')
            && freezer_cgroup(pid).contains(&cg)
        {
            break;
        }
        assert!(
            t1.elapsed() < Duration::from_secs(3),
            "the exec'd program was never frozen under `high`: {:?}, state {:?}, freezer {:?}",
            run.threads_of("execer"),
            hsched_linux::enforce::proc_state(pid),
            freezer_cgroup(pid)
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let c2 = hsched_linux::enforce::proc_cpu_ns(pid).unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let c3 = hsched_linux::enforce::proc_cpu_ns(pid).unwrap();
    assert!(
        c3 < c2 + 10_000_000,
        "the frozen program ran {} ns in 500 ms",
        c3 - c2
    );
    eprintln!(
        "exec from a thread: pid {pid}, {} ms of 300 ms alone{}, {} us of 500 ms under `high`",
        (c1 - c0) / 1_000_000,
        if alone { "" } else { " (`high` had started)" },
        (c3 - c2) / 1_000
    );
    Some((run, pid))
}

/// Whether `pid` is back as it was: `SCHED_OTHER`, affinity `all`, out of
/// hsched's freezer cgroups, and running (10 ms of CPU), within `limit`.
fn restored_within(pid: i32, all: hsched_linux::sys::CpuMask, limit: Duration) -> bool {
    let t0 = Instant::now();
    let mut c0 = None;
    while t0.elapsed() < limit {
        let back = sched_policy(pid) == Some(libc::SCHED_OTHER as u32)
            && hsched_linux::sys::get_affinity(pid).ok() == Some(all)
            && !freezer_cgroup(pid).contains("/hsched-");
        if back {
            let c = hsched_linux::enforce::proc_cpu_ns(pid).unwrap_or(0);
            match c0 {
                None => c0 = Some(c),
                Some(s) if c > s + 10_000_000 => return true,
                _ => {}
            }
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    false
}

/// Issue #6: a thread that `exec`s (not the leader) stays managed under its
/// new tid (the pid), frozen when the hierarchy says so, and `detach`
/// restores it (policy, affinity, freezer cgroup).
#[test]
fn a_thread_that_execs_stays_managed_under_the_pid() {
    let Some(_g) = live() else { return };
    let Some((run, pid)) = exec_from_a_thread("exec-detach") else {
        return;
    };
    let all = hsched_linux::sys::get_affinity(0).unwrap();
    let released = Client::connect(&run.sock)
        .unwrap()
        .request("detach", json!({"pid": pid}))
        .unwrap();
    let ok = restored_within(pid, all, Duration::from_secs(1));
    if !ok {
        let _ = hsched_linux::sys::kill(pid, libc::SIGKILL);
        panic!(
            "not restored by detach ({released}): policy {:?}, affinity {:?}, freezer {:?}",
            sched_policy(pid),
            hsched_linux::sys::get_affinity(pid),
            freezer_cgroup(pid)
        );
    }
    let r = run.finish();
    let _ = hsched_linux::sys::kill(pid, libc::SIGKILL);
    eprintln!("exec from a thread: live.execs {}", r["live"]["execs"]);
    assert_eq!(r["live"]["execs"]["renamed"], 1);
    assert_eq!(r["live"]["signals"]["exits_found"], 0);
    assert_eq!(r["live"]["protocol_errors"], 0);
}

/// Issue #6: after such an `exec`, the watchdog holds the program under its
/// new tid: a `kill -9` of the daemon while the program is frozen (and
/// pinned) restores it.
#[test]
fn sigkill_of_the_daemon_restores_a_program_that_execed_from_a_thread() {
    let Some(_g) = live() else { return };
    let Some((mut run, pid)) = exec_from_a_thread("exec-kill9") else {
        return;
    };
    let all = hsched_linux::sys::get_affinity(0).unwrap();
    let pinned = hsched_linux::sys::get_affinity(pid).unwrap();
    let mut daemon = run.child.take().unwrap();
    daemon.kill().unwrap();
    let _ = daemon.wait();
    let ok = restored_within(pid, all, Duration::from_secs(1));
    let state = (
        sched_policy(pid),
        hsched_linux::sys::get_affinity(pid),
        freezer_cgroup(pid),
    );
    let _ = hsched_linux::sys::kill(pid, libc::SIGKILL);
    assert!(pinned != all, "the granted program was pinned ({pinned:?})");
    assert!(ok, "not restored within 1 s of SIGKILL: {state:?}");
}

/// A daemon over `fp` with a granted hog (`SCHED_FIFO`, pinned) and a
/// frozen one, both processes of the test's that the daemon attached (so
/// that they outlive it): the daemon, its socket path and the hogs' pids.
fn daemon_with_raised_and_frozen(tag: &str) -> (Child, PathBuf, i32, i32) {
    let f = write_file(
        &format!("{tag}.toml"),
        r#"
default = "fp"
[machine]
cpus = 1
[[scheduler]]
name = "fp"
policy = "fp"
"#,
    );
    let sock = std::env::temp_dir().join(format!("hsched-test-{tag}-{}.sock", std::process::id()));
    let daemon = start_daemon_with(&f, &sock, &["--duration", "20s"], Stdio::piped());
    let hog = || {
        Command::new(bin())
            .args(["probe", "hog", "--duration", "20s"])
            .spawn()
            .unwrap()
            .id() as i32
    };
    let (high, low) = (hog(), hog());
    let mut c = Client::connect(&sock).unwrap();
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
    (daemon, sock, high, low)
}

/// The hogs' policy, affinity and state, for a failure message.
fn hog_states(high: i32, low: i32) -> String {
    [high, low]
        .iter()
        .map(|&t| {
            format!(
                "{t}: policy {:?}, affinity {:?}, state {:?}",
                sched_policy(t),
                hsched_linux::sys::get_affinity(t).ok(),
                hsched_linux::enforce::proc_state(t)
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// Whether this process holds `CAP_SYS_RESOURCE` (bit 24 of CapEff).
fn has_cap_sys_resource() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            let hex = s
                .lines()
                .find_map(|l| l.strip_prefix("CapEff:"))?
                .trim()
                .to_string();
            u64::from_str_radix(&hex, 16).ok()
        })
        .is_some_and(|caps| caps & (1 << 24) != 0)
}

/// Whether both hogs are back as they were: `SCHED_OTHER`, on every CPU,
/// not frozen.
fn hogs_restored(high: i32, low: i32) -> bool {
    let all = hsched_linux::sys::get_affinity(0).unwrap();
    [high, low].iter().all(|&t| {
        sched_policy(t) == Some(libc::SCHED_OTHER as u32)
            && hsched_linux::sys::get_affinity(t).ok() == Some(all)
            && hsched_linux::enforce::proc_state(t) == Some('R')
    })
}

#[test]
fn a_daemon_whose_watchdog_dies_restores_and_ends() {
    let Some(_g) = live() else { return };
    let (mut daemon, sock, high, low) = daemon_with_raised_and_frozen("wd-dies");
    let wd = hsched_linux::watchdog::find(daemon.id() as i32).expect("the daemon's watchdog");
    // The watchdog cannot be chosen by the OOM killer, where the daemon may
    // exempt it (CAP_SYS_RESOURCE; some containers withhold it).
    let adj = std::fs::read_to_string(format!("/proc/{wd}/oom_score_adj")).unwrap();
    if has_cap_sys_resource() {
        assert_eq!(adj.trim(), "-1000");
    } else {
        eprintln!(
            "no CAP_SYS_RESOURCE here: the watchdog's oom_score_adj stays {}",
            adj.trim()
        );
    }
    hsched_linux::sys::kill(wd, libc::SIGKILL).unwrap();
    let out = wait_bounded(daemon_take(&mut daemon), Duration::from_secs(5));
    assert_eq!(out.status.code(), Some(1), "the run ends as failed");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("watchdog was killed by signal 9"), "{err}");
    assert!(
        hogs_restored(high, low),
        "threads left raised or frozen: {}",
        hog_states(high, low)
    );
    for t in [high, low] {
        let _ = hsched_linux::sys::kill(t, libc::SIGKILL);
    }
    let _ = std::fs::remove_file(&sock);
}

#[test]
fn a_stopped_daemon_is_treated_as_dead_by_its_watchdog() {
    let Some(_g) = live() else { return };
    let (mut daemon, sock, high, low) = daemon_with_raised_and_frozen("stopped");
    let pid = daemon.id() as i32;
    hsched_linux::sys::kill(pid, libc::SIGSTOP).unwrap();
    let stopped = Instant::now();
    // The watchdog's own bound, and a second for a loaded machine.
    let bound = Duration::from_millis(hsched_linux::watchdog::LOOK_MS as u64)
        + Duration::from_nanos(hsched_linux::watchdog::STOPPED_NS)
        + Duration::from_secs(1);
    let restored = loop {
        if hogs_restored(high, low) {
            break stopped.elapsed();
        }
        assert!(
            stopped.elapsed() < bound,
            "threads still raised or frozen {:?} after SIGSTOP",
            stopped.elapsed()
        );
        std::thread::sleep(Duration::from_millis(10));
    };
    eprintln!("restored {restored:?} after SIGSTOP");
    std::thread::sleep(Duration::from_millis(3000).saturating_sub(restored));
    assert!(hogs_restored(high, low), "restored for the whole stop");
    hsched_linux::sys::kill(pid, libc::SIGCONT).unwrap();
    let out = wait_bounded(daemon_take(&mut daemon), Duration::from_secs(5));
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("was stopped for"), "{err}");
    assert!(
        hogs_restored(high, low),
        "the daemon changed them again: {}",
        hog_states(high, low)
    );
    for t in [high, low] {
        let _ = hsched_linux::sys::kill(t, libc::SIGKILL);
    }
    let _ = std::fs::remove_file(&sock);
}

#[test]
fn an_unprivileged_user_takes_no_real_time_capacity_it_is_not_granted() {
    let Some(_g) = live() else { return };
    let Some(user) = TestUser::create("ctl") else {
        return;
    };
    let f = write_file(
        "authz.toml",
        r#"
default = "ts"
[machine]
cpus = 1
[[scheduler]]
name = "root"
policy = "fp"
[[scheduler]]
name = "rez"
policy = "rez"
parent = "root"
params = { priority = 10 }
[[scheduler]]
name = "ts"
policy = "ts"
parent = "root"
params = { priority = 1 }
[[thread]]
name = "rt"
scheduler = "rez"
params = { amount = "2ms", period = "10ms" }
workload = { kind = "periodic", period = "10ms", exec = "1ms" }
"#,
    );
    let sock = std::env::temp_dir().join(format!("hsched-test-authz-{}.sock", std::process::id()));
    let mut daemon = start_daemon(&f, &sock, &["--duration", "30s"]);
    // The user's own CPU hog, attached to the default scheduler: allowed.
    let mut hog = {
        use std::os::unix::process::CommandExt;
        Command::new(bin())
            .uid(user.uid)
            .gid(user.uid)
            .args(["probe", "hog", "--duration", "20s"])
            .spawn()
            .unwrap()
    };
    let pid = hog.id().to_string();
    let field = |k: &str, v: &str| format!("{k}={v}");
    let (code, err) = user.ctl(&sock, "attach", &[field("pid", &pid)]);
    assert_eq!(code, 0, "{err}");
    let refused = |op: &str, fields: &[String], what: &str| {
        let (code, err) = user.ctl(&sock, op, fields);
        assert_eq!(code, 1, "{op} {fields:?} was allowed");
        assert!(err.contains(what), "{op} {fields:?}: {err}");
    };
    // No real-time priority, reservation, share or place above the
    // default without RLIMIT_RTPRIO (0 for this user, as `chrt -f` says).
    refused(
        "move",
        &[
            field("thread", &pid),
            field("to", "root"),
            field("params.priority", "1000"),
        ],
        "RLIMIT_RTPRIO is 0",
    );
    refused(
        "begin-reservation",
        &[
            field("thread", &pid),
            field("scheduler", "rez"),
            field("params.amount", "5.4ms"),
            field("params.period", "10ms"),
        ],
        "RLIMIT_RTPRIO is 0",
    );
    refused(
        "set-params",
        &[field("thread", &pid), field("params.priority", "31")],
        "RLIMIT_RTPRIO is 0",
    );
    // Minimums hold for everyone, root too.
    let mut root = Client::connect(&sock).unwrap();
    let e = root
        .request("begin-reservation", json!({"thread": "rt", "scheduler": "rez", "params": {"amount": "1us", "period": "2us"}}))
        .unwrap_err();
    assert!(e.to_string().contains("below the daemon's minimum"), "{e}");
    // A name is the daemon's to give once: another user's cannot shadow it.
    let mut other = {
        use std::os::unix::process::CommandExt;
        Command::new(bin())
            .uid(user.uid)
            .gid(user.uid)
            .args(["probe", "hog", "--duration", "20s"])
            .spawn()
            .unwrap()
    };
    let other_pid = other.id().to_string();
    refused(
        "attach",
        &[field("pid", &other_pid), field("name", "rt")],
        "already named",
    );
    refused(
        "attach",
        &[field("pid", &other_pid), field("name", &"n".repeat(60_000))],
        "at most 64 bytes",
    );
    // Root's thread is still root's, and root's operations reach it.
    root.request(
        "set-params",
        json!({"thread": "rt", "params": {"amount": "3ms", "period": "10ms"}}),
    )
    .unwrap();
    // A user cannot hold the socket: its ninth connection is refused, and
    // root still gets in.
    {
        use std::os::unix::process::CommandExt;
        // Connections made by a process of the user's; the test reads the
        // replies through the process's output.
        let script = format!(
            "import socket,time\nss=[]\nfor i in range(9):\n  s=socket.socket(socket.AF_UNIX)\n  s.connect({:?})\n  s.settimeout(0.3)\n  try:\n    d=s.recv(4096)\n  except socket.timeout:\n    s.settimeout(None)\n    s.sendall(b'{{\"op\":\"hello\"}}\\n')\n    d=s.recv(4096)\n  print(d.decode().strip(), flush=True)\n  ss.append(s)\ntime.sleep(3)\n",
            sock.display().to_string()
        );
        let mut py = Command::new("python3")
            .uid(user.uid)
            .gid(user.uid)
            .args(["-c", &script])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let out = py.stdout.take().unwrap();
        let lines: Vec<String> = std::io::BufRead::lines(std::io::BufReader::new(out))
            .take(9)
            .map(Result::unwrap)
            .collect();
        assert!(
            lines[..8].iter().all(|l| l.contains("\"ok\":true")),
            "{lines:?}"
        );
        assert!(
            lines[8].contains("busy") && lines[8].contains("uid"),
            "{lines:?}"
        );
        let mut c = Client::connect(&sock).unwrap();
        c.request("hello", json!({})).expect("root always gets in");
        let _ = py.kill();
        let _ = py.wait();
    }
    root.request("shutdown", json!({})).unwrap();
    let out = wait_bounded(daemon_take(&mut daemon), Duration::from_secs(10));
    assert!(out.status.success());
    for c in [&mut hog, &mut other] {
        let _ = c.kill();
        let _ = c.wait();
    }
    let _ = std::fs::remove_file(&sock);
}

/// Runs `hsched-live run FILE --cpus CPU --json ARGS` through `sh`, after
/// `limits` (e.g. `ulimit -n 32`), and waits at most 30 s.
fn run_in_shell(limits: &str, file: &Path, args: &[&str]) -> std::process::Output {
    let cmd = format!(
        "{limits}; exec \"$0\" run \"$1\" --cpus {} --json {}",
        test_cpu(),
        args.join(" ")
    );
    let child = Command::new("sh")
        .args(["-c", &cmd, bin()])
        .arg(file)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_bounded(child, Duration::from_secs(30))
}

/// Issue #39: a run none of whose programs could be launched printed an
/// empty report and exited 0 (with `--duration`), or ran until a signal
/// (without). Now it ends at once with status 1 and names each program and
/// why; a run where some were launched reports them, names the others and
/// exits 1 too.
#[test]
fn a_run_whose_programs_cannot_be_launched_fails_naming_them() {
    let Some(_g) = live() else { return };
    let ts = "default = \"ts\"\n[[scheduler]]\nname = \"ts\"\npolicy = \"ts\"\n";
    let none = write_file(
        "unlaunchable.toml",
        &format!("{ts}[[thread]]\nname = \"ghost\"\nexec = [\"/nonexistent/hsched-ghost\"]\n"),
    );
    let some = write_file(
        "half-launchable.toml",
        &format!(
            "{ts}[[thread]]\nname = \"ghost\"\nexec = [\"/nonexistent/hsched-ghost\"]\n\
             [[thread]]\nname = \"napper\"\nexec = [\"sleep\", \"0.2\"]\n"
        ),
    );
    for extra in [&[][..], &["--duration", "20s"]] {
        let t0 = Instant::now();
        let out = run_in_shell(":", &none, extra);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{extra:?}: {err}");
        assert!(
            err.contains("no program could be launched")
                && err.contains("`ghost`: `/nonexistent/hsched-ghost`: No such file"),
            "{err}"
        );
        assert!(out.stdout.is_empty(), "a report of nothing was printed");
        assert!(t0.elapsed() < Duration::from_secs(10), "{:?}", t0.elapsed());
    }
    // Too few descriptors for perf events: each program fails for that.
    let out = run_in_shell("ulimit -n 32", &some, &["--no-socket"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("`napper`: perf events: Too many open files") && err.contains("ulimit -n"),
        "{err}"
    );
    // One of two: the run goes on with the other, then fails.
    let out = run_in_shell(":", &some, &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("1 of the file's programs could not be launched") && err.contains("`ghost`"),
        "{err}"
    );
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["live"]["ended_by"], "programs exited");
    assert!(
        program(&r, "napper")["threads"].as_u64().unwrap() >= 1,
        "{r}"
    );
    let failed = &r["live"]["launch_failures"];
    assert_eq!(failed.as_array().map(Vec::len), Some(1), "{failed}");
    assert_eq!(failed[0]["name"], "ghost");
}

/// Issue #39: `hsched ctl` looks for `/run/hsched.sock`, where `hsched run`
/// now listens unless told otherwise; a second daemon (on other CPUs) is
/// refused the socket the first one answers on, before it changes
/// anything; a stale socket is replaced, and the socket goes with the run.
#[test]
fn run_serves_the_default_socket_that_ctl_uses() {
    let Some(_g) = live() else { return };
    let sock = Path::new(hsched_linux::ctl::DEFAULT_SOCKET);
    if Client::connect(sock).is_ok() {
        eprintln!("SKIPPED: a daemon already serves {}", sock.display());
        return;
    }
    // A stale socket, as a `kill -9`ed daemon leaves it.
    let _ = std::fs::remove_file(sock);
    drop(std::os::unix::net::UnixListener::bind(sock).unwrap());
    let f = write_file(
        "default-socket.toml",
        "default = \"ts\"\n[[scheduler]]\nname = \"ts\"\npolicy = \"ts\"\n\
         [[thread]]\nname = \"napper\"\nexec = [\"sleep\", \"3\"]\n",
    );
    let cpu = test_cpu().to_string();
    let daemon = Command::new(bin())
        .arg("run")
        .arg(&f)
        .args(["--cpus", &cpu, "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = daemon.id() as u64;
    let t0 = Instant::now();
    let hello = loop {
        let out = Command::new(bin()).args(["ctl", "hello"]).output().unwrap();
        if out.status.success() {
            break serde_json::from_slice::<Value>(&out.stdout).unwrap();
        }
        assert!(t0.elapsed() < Duration::from_secs(10), "ctl never got in");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(hello["pid"], pid, "{hello}");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(sock).unwrap().permissions().mode() & 0o777;
    assert_eq!(
        mode, 0o666,
        "anyone may connect; requests are authorised one by one"
    );
    let online = hsched_linux::sys::online_cpus();
    if let Some(other) = online.iter().find(|&&c| c != test_cpu()) {
        let out = Command::new(bin())
            .arg("run")
            .arg(&f)
            .args(["--cpus", &other.to_string(), "--duration", "1s"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "{err}");
        assert!(
            err.contains(&format!(
                "/run/hsched.sock is in use by a running daemon (pid {pid})"
            )) && err.contains("--no-socket"),
            "{err}"
        );
        assert!(out.stdout.is_empty());
    }
    // The socket does not keep the run going: it ends with its program.
    let out = wait_bounded(daemon, Duration::from_secs(20));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["live"]["ended_by"], "programs exited");
    assert!(!sock.exists(), "the socket outlived the run");
}

/// Issue #39: `run FILE -- COMMAND` beside the file's built-in workloads
/// (the `--help` example `examples/overview.toml --scheduler ts -- make`)
/// ran on after COMMAND exited, since a built-in workload never does. The
/// run waits for the programs it launched; its workloads end with it.
#[test]
fn a_run_ends_with_its_programs_not_its_built_in_workloads() {
    let Some(_g) = live() else { return };
    let f = write_file(
        "programs-and-workloads.toml",
        "default = \"ts\"\n[[scheduler]]\nname = \"ts\"\npolicy = \"ts\"\n\
         [[thread]]\nname = \"hog\"\nworkload = { kind = \"cpu-bound\" }\n",
    );
    let t0 = Instant::now();
    let out = run_in_shell(":", &f, &["--no-socket", "--", "sleep", "0.5"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(t0.elapsed() < Duration::from_secs(10), "{:?}", t0.elapsed());
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["live"]["ended_by"], "programs exited");
    // The workload ran beside the command until then.
    assert!(cpu_s(&r, "hog") > 0.1, "{r}");
    assert!(
        program(&r, "sleep")["threads"].as_u64().unwrap() >= 1,
        "{r}"
    );
}
