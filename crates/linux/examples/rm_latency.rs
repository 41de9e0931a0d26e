//! Request latency of the resource manager live: the time from sending a
//! `request` on the control socket to its reply, by which the guarantee is
//! in force (the thread has begun its reservation in the daemon's
//! hierarchy), with `N` requesters asking at once.
//!
//! ```sh
//! cargo build --release -p hsched-linux --bin hsched-live --example rm_latency
//! sudo target/release/examples/rm_latency [REQUESTERS] [ROUNDS]   # default 100 and 10
//! ```
//!
//! It starts `hsched-live run` (the binary next to the example's
//! directory) on the last CPU with a control socket, attaches `N` sleeping
//! processes, and in each round all `N` requests are sent at the same
//! instant, each for `RESBS 0.2ms 100ms` for its own process; then all
//! are released. The daemon serves at most 72 connections to root, so the
//! `N` requests travel on `min(N, 50)` connections, pipelined (100
//! requesters: 50 connections with 2 requests each in flight); each
//! request is timed from the write that carries it to its reply. Prints
//! the median and 99th percentile over all rounds. Needs root (the daemon
//! manages real threads).

use hsched_linux::ctl::Client;
use serde_json::json;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

const FILE: &str = r#"
default = "ts"
[[scheduler]]
name = "fp"
policy = "fp"
[[scheduler]]
name = "rez"
policy = "rez"
parent = "fp"
params = { priority = 2 }
[[scheduler]]
name = "ts"
policy = "ts"
parent = "fp"
params = { priority = 1 }
[[thread]]
name = "tick"
scheduler = "ts"
workload = { kind = "periodic", period = "100ms", exec = "1ms" }
[rm]
"#;

fn daemon_bin() -> PathBuf {
    let me = std::env::current_exe().expect("own path");
    // target/<profile>/examples/rm_latency → target/<profile>/hsched-live
    me.parent()
        .and_then(|p| p.parent())
        .map(|p| p.join("hsched-live"))
        .expect("a target directory")
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

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let n: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(100);
    let rounds: usize = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(10);
    let dir = std::env::temp_dir().join(format!("hsched-rm-latency-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let file = dir.join("rm.toml");
    std::fs::write(&file, FILE).expect("write the hierarchy");
    let sock = dir.join("rm.sock");
    let cpu = hsched_linux::sys::online_cpus()
        .last()
        .copied()
        .expect("a CPU");
    let daemon = Command::new(daemon_bin())
        .arg("run")
        .arg(&file)
        .args(["--cpus", &cpu.to_string(), "--duration", "600s", "--socket"])
        .arg(&sock)
        .stdout(Stdio::null())
        .spawn()
        .expect("start hsched-live run");
    let mut procs = Kill(vec![daemon]);
    let t0 = Instant::now();
    let mut root = loop {
        if let Ok(c) = Client::connect(&sock) {
            break c;
        }
        assert!(t0.elapsed() < Duration::from_secs(10), "no daemon socket");
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut names = Vec::new();
    for k in 0..n {
        let s = Command::new("sleep")
            .arg("600")
            .spawn()
            .expect("start a sleeper");
        let name = format!("r{k}");
        root.request("attach", json!({"pid": s.id(), "name": name}))
            .expect("attach");
        procs.0.push(s);
        names.push(name);
    }
    let mut all: Vec<u64> = Vec::new();
    for _ in 0..rounds {
        let conns = n.min(50);
        let barrier = Arc::new(Barrier::new(conns));
        let handles: Vec<_> = (0..conns)
            .map(|c| {
                let mine: Vec<String> = names.iter().skip(c).step_by(conns).cloned().collect();
                let (sock, barrier) = (sock.clone(), barrier.clone());
                std::thread::spawn(move || {
                    let s = UnixStream::connect(&sock).expect("connect");
                    s.set_read_timeout(Some(Duration::from_secs(30))).ok();
                    let mut r = BufReader::new(s.try_clone().expect("clone"));
                    let mut w = s;
                    let mut lines = String::new();
                    for (k, name) in mine.iter().enumerate() {
                        lines.push_str(&json!({"v": 1, "id": k, "op": "request", "thread": name, "guarantee": "RESBS 0.2ms 100ms"}).to_string());
                        lines.push('\n');
                    }
                    barrier.wait();
                    let t = Instant::now();
                    w.write_all(lines.as_bytes()).expect("send");
                    let mut out = Vec::new();
                    for _ in &mine {
                        let mut l = String::new();
                        r.read_line(&mut l).expect("reply");
                        out.push(t.elapsed().as_nanos() as u64);
                        let v: serde_json::Value = serde_json::from_str(&l).expect("json");
                        assert_eq!(v["result"]["state"], "granted", "{v}");
                    }
                    out
                })
            })
            .collect();
        for h in handles {
            all.extend(h.join().expect("requester"));
        }
        for name in &names {
            root.request("release", json!({"thread": name}))
                .expect("release");
        }
    }
    let (med, p99) = hsched_linux::probe::median_p99(&mut all);
    println!(
        "{n} concurrent requesters, {rounds} rounds, {} requests: request -> guarantee in force median {:.3} ms, p99 {:.3} ms, max {:.3} ms",
        all.len(),
        med as f64 / 1e6,
        p99 as f64 / 1e6,
        all.last().copied().unwrap_or(0) as f64 / 1e6
    );
    let _ = root.request("shutdown", json!({}));
    // Let the daemon restore its threads before the sleepers go.
    let t0 = Instant::now();
    while procs.0[0].try_wait().ok().flatten().is_none() && t0.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(procs);
    let _ = std::fs::remove_dir_all(&dir);
}
