//! A producer and a consumer process joined by an `hsched-progress` queue,
//! for trying the live monitor's shared-memory path:
//!
//! ```text
//! cargo build --release -p hsched-progress --example shm_pipeline
//! # a hierarchy with a realrate scheduler and a thread
//! #   exec = ["target/release/examples/shm_pipeline", "12"]
//! sudo HSCHED_PROGRESS_TRACE=/tmp/shm.csv hsched run FILE
//! ```
//!
//! The producer makes 200 KB/s in 4 KiB blocks (0.25 µs of CPU per byte),
//! doubled from 4 s to 6 s; the consumer (a child process) spends 1 µs of
//! CPU per byte, so it needs 20 % of a CPU, 40 % during the pulse. Argument:
//! run time in seconds (default 10).

use hsched_progress::{Consumer, Producer};
use std::time::{Duration, Instant};

const CHUNK: usize = 4096;

/// CPU time of the calling thread, in seconds.
fn thread_cpu() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

fn burn(bytes: usize, per_byte: f64) {
    let end = thread_cpu() + bytes as f64 * per_byte;
    while thread_cpu() < end {}
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("consume") {
        let pid: i32 = args.get(2).and_then(|p| p.parse().ok()).unwrap_or(0);
        let q = loop {
            match Consumer::open(pid, "data") {
                Ok(q) => break q,
                Err(_) => std::thread::sleep(Duration::from_millis(5)),
            }
        };
        let mut buf = vec![0u8; CHUNK];
        loop {
            let n = q.pop(&mut buf);
            if n == 0 {
                std::thread::sleep(Duration::from_millis(1));
                continue;
            }
            burn(n, 1e-6);
        }
    }
    let secs: f64 = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(10.0);
    let q = match Producer::create("data", 64 * 1024) {
        Ok(q) => q,
        Err(e) => {
            eprintln!("shm_pipeline: {e}");
            std::process::exit(1);
        }
    };
    let me = std::process::id().to_string();
    let mut child = match std::process::Command::new(&args[0])
        .args(["consume", &me])
        .spawn()
    {
        Ok(c) => c,
        Err(e) => {
            eprintln!("shm_pipeline: consumer: {e}");
            std::process::exit(1);
        }
    };
    let t0 = Instant::now();
    let owed = |t: f64| 200e3 * t + 200e3 * (t.min(6.0) - 4.0).max(0.0);
    let block = [7u8; CHUNK];
    let mut made = 0usize;
    while t0.elapsed().as_secs_f64() < secs {
        let need = made as f64 + CHUNK as f64 - owed(t0.elapsed().as_secs_f64());
        if need > 0.0 {
            std::thread::sleep(Duration::from_secs_f64(need / 400e3 + 0.0005));
            continue;
        }
        burn(CHUNK, 0.25e-6);
        let mut off = 0;
        while off < CHUNK {
            let n = q.push(&block[off..]);
            off += n;
            if n == 0 {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        made += CHUNK;
    }
    let _ = child.kill();
    let _ = child.wait();
}
