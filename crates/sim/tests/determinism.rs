//! Same hierarchy and seed, same bytes: the report, the Perfetto trace and
//! the Gantt chart (Regehr 2001, §9.4.1: "Since the simulator is deterministic,
//! the same scenario could be run repeatedly").

mod common;
use common::*;
use hsched_sim::{GanttRequest, SimOptions};

/// Every random workload, stolen time, switch costs, ticks, a join and a
/// mode change, on two processors (one hierarchy each).
const BUSY: &str = r#"
[machine]
cpus = 2
context_switch = "20us"
timer = "1000hz"
[[machine.stolen]]
cpu = 1
start = "1s"
length = "2s"
fraction = 0.25
slice = "3ms"
[[machine.stolen]]
cpu = 0
every = "7ms"
amount = "150us"

[[principal]]
name = "alice"
[[principal]]
name = "bob"

[[scheduler]]
name = "fp"
policy = "fp"
cpus = [0]
[[scheduler]]
name = "rez"
policy = "rez"
parent = "fp"
params = { priority = 2 }
[[scheduler]]
name = "ps"
policy = "ps"
parent = "fp"
params = { priority = 1 }
[[scheduler]]
name = "ts-a"
policy = "ts"
parent = "ps"
params = { share = 2 }
[[scheduler]]
name = "ts-b"
policy = "ts"
parent = "ps"
params = { share = 1 }
[[scheduler]]
name = "fp1"
policy = "fp"
cpus = [1]
[[scheduler]]
name = "rez1"
policy = "rez"
parent = "fp1"
params = { priority = 2 }
variant = "catch-up"
[[scheduler]]
name = "ts1"
policy = "ts"
parent = "fp1"
params = { priority = 1 }
quantum = "10ms"
[[scheduler]]
name = "soft"
policy = "join"
parents = [{ name = "rez1", amount = "5ms", period = "20ms" }, { name = "ts1" }]

[[thread]]
name = "movie"
scheduler = "rez"
params = { amount = "8ms", period = "40ms" }
workload = { kind = "video", fps = 25, i = "9ms", p = "7ms", b = "4ms", on_miss = "skip" }
[[thread]]
name = "game"
scheduler = "soft"
workload = { kind = "frame-renderer" }
[[thread]]
name = "jittery"
scheduler = "ts-a"
principal = "alice"
params = { priority = 12 }
workload = { kind = "periodic", period = "10ms", exec = "2ms", jitter = "3ms" }
[[thread]]
name = "events"
scheduler = "ts-a"
principal = "alice"
workload = { kind = "sporadic", min_interarrival = "5ms", max_interarrival = "50ms", exec = "1ms" }
[[thread]]
name = "editor"
scheduler = "ts-b"
principal = "bob"
count = 3
workload = { kind = "interactive", think = "50ms", burst = "3ms" }
[[thread]]
name = "batch"
scheduler = "ts-b"
principal = "bob"
count = 2
start = "500ms"
workload = { kind = "cpu-bound" }
[[thread]]
name = "crunch"
scheduler = "ts1"
count = 2
workload = { kind = "cpu-bound" }
[[thread]]
name = "disk"
scheduler = "ts-a"
workload = { kind = "io", compute = "300us", io = "4ms" }

[[at]]
time = "2s"
op = "begin-reservation"
thread = "editor.0"
scheduler = "rez"
params = { amount = "2ms", period = "10ms" }
"#;

struct Outputs {
    report: String,
    table: String,
    trace: Vec<u8>,
    svg: Vec<u8>,
}

fn run_once(seed: u64) -> Outputs {
    let trace = Buf::default();
    let svg = Buf::default();
    let o = SimOptions {
        seed: Some(seed),
        trace: Some(Box::new(trace.clone())),
        gantt: Some(GanttRequest {
            from: hsched_core::Duration(900 * MS),
            to: hsched_core::Duration(1100 * MS),
            out: Box::new(svg.clone()),
            color: Default::default(),
        }),
        ..opts(4.0)
    };
    let r = sim_with(BUSY, o);
    Outputs {
        report: r.to_json(),
        table: r.to_table(),
        trace: trace.bytes(),
        svg: svg.bytes(),
    }
}

#[test]
fn same_seed_same_bytes() {
    let a = run_once(7);
    let b = run_once(7);
    assert_eq!(a.report, b.report);
    assert_eq!(a.table, b.table);
    assert!(a.trace == b.trace, "traces differ");
    assert!(a.svg == b.svg, "Gantt charts differ");
    // The outputs are not trivially empty.
    assert!(a.trace.len() > 100_000, "trace of {} bytes", a.trace.len());
    let v: serde_json::Value = serde_json::from_slice(&a.trace).unwrap();
    let evs = v["traceEvents"].as_array().unwrap();
    for name in ["grant", "revoke", "replenish", "deadline miss", "stolen"] {
        assert!(
            evs.iter().any(|e| e["name"] == name),
            "no `{name}` event in the trace"
        );
    }
    let r: serde_json::Value = serde_json::from_str(&a.report).unwrap();
    assert_eq!(r["hsched_report"], 1);
    assert_eq!(r["threads"].as_array().unwrap().len(), 12);
    assert!(r["machine"]["stolen_ns"].as_u64().unwrap() > 0);
}

#[test]
fn another_seed_changes_the_random_workloads_only() {
    let a = run_once(7);
    let c = run_once(8);
    assert_ne!(a.report, c.report);
    let ra: serde_json::Value = serde_json::from_str(&a.report).unwrap();
    let rc: serde_json::Value = serde_json::from_str(&c.report).unwrap();
    // The renderer's and the I/O thread's work does not depend on the seed;
    // the sporadic thread's arrivals do.
    let jobs = |r: &serde_json::Value, name: &str| {
        r["threads"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == name)
            .unwrap()["jobs"]
            .as_u64()
            .unwrap()
    };
    assert_ne!(jobs(&ra, "events"), jobs(&rc, "events"));
}

#[test]
fn every_processor_accounts_for_all_its_time() {
    let a = run_once(3);
    let r: serde_json::Value = serde_json::from_str(&a.report).unwrap();
    for c in r["machine"]["per_cpu"].as_array().unwrap() {
        let sum: u64 = ["busy_ns", "idle_ns", "stolen_ns", "context_switch_ns"]
            .iter()
            .map(|k| c[k].as_u64().unwrap())
            .sum();
        assert_eq!(sum, 4 * S, "{c}");
    }
    // Threads' useful time adds up to the machine's busy time.
    let cpu: u64 = r["threads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["cpu_ns"].as_u64().unwrap())
        .sum();
    assert_eq!(cpu, r["machine"]["busy_ns"].as_u64().unwrap());
}
