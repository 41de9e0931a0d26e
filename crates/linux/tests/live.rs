//! Live-mode tests on the real machine: real programs under small
//! hierarchies, as root. Each test skips with a message when live mode is
//! not available (not root, no freezer, no tracefs). They run one at a time
//! (they share the CPUs) and every run is bounded by `--duration` and a
//! `timeout`-like watchdog in the test.

use hsched_linux::ctl::Client;
use serde_json::{json, Value};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

static SERIAL: Mutex<()> = Mutex::new(());

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_hsched-live")
}

/// `Some(guard)` when live mode can run; prints why not otherwise.
fn live() -> Option<std::sync::MutexGuard<'static, ()>> {
    let g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    match hsched_linux::check_support() {
        Ok(()) => Some(g),
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
    let cpu = test_cpu().to_string();
    let mut cmd = Command::new(bin());
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
    let r = run_json(&f, &["--duration", "3s"]);
    let (a, b) = (cpu_s(&r, "one"), cpu_s(&r, "two"));
    eprintln!("PS 1:2 measured {a:.3} s : {b:.3} s (ratio {:.3})", b / a);
    assert!(
        (b / a - 2.0).abs() < 0.12,
        "ratio {} not within 6% of 2",
        b / a
    );
    // Together they keep the CPU busy (RT throttling leaves 5% to others).
    assert!(a + b > 0.85 * 3.0, "only {:.3} s of CPU in 3 s", a + b);
    assert_eq!(r["live"]["protocol_errors"], 0);
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
    let r = run_json(&f, &["--duration", "3s"]);
    let share = program(&r, "hog")["cpu_ns"].as_u64().unwrap() as f64
        / r["duration_ns"].as_u64().unwrap() as f64;
    eprintln!(
        "Rez 10ms/33ms gave the hog {:.2}% of the CPU",
        share * 100.0
    );
    assert!(
        (share - 10.0 / 33.0).abs() < 0.02,
        "share {share} not within 2 points of 30.3%"
    );
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
    let r = run_json(&f, &["--", "sh", "-c", &cmd]);
    let threads = r["threads"].as_array().unwrap();
    assert!(
        threads.len() >= 4,
        "expected the main thread and 3 pollers, got {threads:?}"
    );
    assert!(threads.iter().all(|t| t["scheduler"] == "ts"));
    let p = &r["programs"][0];
    assert_eq!(p["exit_status"], 0, "the program ended normally");
    // The 3 pollers shared one CPU for about a second, a third each.
    let cpu = p["cpu_ns"].as_u64().unwrap();
    assert!(cpu > 700_000_000, "pollers got only {cpu} ns");
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

fn start_daemon(file: &Path, sock: &Path, extra: &[&str]) -> Child {
    let cpu = test_cpu().to_string();
    let _ = std::fs::remove_file(sock);
    let child = Command::new(bin())
        .arg("run")
        .arg(file)
        .args(["--cpus", &cpu, "--socket"])
        .arg(sock)
        .args(extra)
        .stdout(Stdio::null())
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
    // FP: the high-priority hog runs (SCHED_FIFO, pinned), the low one is frozen.
    let f = write_file(
        "fp.toml",
        r#"
default = "fp"
[machine]
cpus = 1
[[scheduler]]
name = "fp"
policy = "fp"
[[thread]]
name = "high"
params = { priority = 2 }
workload = { kind = "cpu-bound" }
[[thread]]
name = "low"
params = { priority = 1 }
workload = { kind = "cpu-bound" }
"#,
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
    let (high, low) = (tid("high"), tid("low"));
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
    // The frozen one really runs again.
    let c0 = hsched_linux::enforce::proc_cpu_ns(low).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        hsched_linux::enforce::proc_cpu_ns(low).unwrap() > c0 + 20_000_000,
        "the formerly frozen thread does not run"
    );
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
    for t in [high, low] {
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

/// Seed 000 ch. 11: with `--stolen trace` the daemon measures interrupt
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
