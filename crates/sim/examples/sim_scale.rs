//! The simulator's scaling benchmark: how the cost of a job and of a
//! simulated second grows with the number of threads and processors.
//!
//! - `sim_scale tasks [JOBS]`: uniprocessor task sets of 10, 100, 1 000 and
//!   10 000 periodic tasks (UUniFast, total utilization 0.75, periods
//!   log-uniform in [10 ms, 1 s] in whole milliseconds, seed 1, from
//!   `hsched-taskgen`; execution times rounded up to whole microseconds,
//!   the shortest reservation Rez models, which raises the total to at
//!   most 0.87), under rate-monotonic priorities (`fp`) and under EDF
//!   (`rez` with each reservation's amount its task's execution time, so
//!   Rez is plain EDF). Each set runs through hsched and through a bare
//!   event loop written below from the same set (two binary heaps, no
//!   hierarchy, no HSI: the limit to compare against), for about JOBS jobs
//!   (default 1 000 000) of simulated time; the two must agree on every
//!   task's job and miss counts, or the benchmark fails. Prints jobs per
//!   second on the CPU for each and their ratio.
//! - `sim_scale cpus [MAXCPUS] [POLICY…]`: 1, 2, 4, … MAXCPUS (default 64)
//!   processors with 100 threads per processor under each policy that can
//!   sit at the root over threads (default: all of them), 1 s of model
//!   time; prints the time on the CPU per run. Multiprocessor policies
//!   (`fp`, `ts`, `ps`, `best`, `best-rate`, `linux24`, `coop`, and `dl`
//!   with a 4 ms tick) hold every thread in one instance; the uniprocessor
//!   ones (`rez`, `realrate`) run one instance per processor under an `fp`
//!   root, 100 threads each.
//!   `limit` and `join` take a single child and are left out.
//! - `sim_scale print POLICY CPUS`: prints the hierarchy file `cpus` runs
//!   for POLICY on CPUS processors.
//!
//! Time is on-CPU time of this thread (`/proc/thread-self/schedstat`), as
//! in `sim_speed`, because the machines measured on are shared.
//!
//! ```text
//! cargo build --release -p hsched-sim --example sim_scale
//! target/release/examples/sim_scale tasks
//! target/release/examples/sim_scale cpus 64
//! ```

use hsched_core::Duration;
use hsched_sim::SimOptions;
use hsched_taskgen::{Config, TaskSet};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fmt::Write as _;

/// Time this thread has spent on a processor, else wall time since the
/// first call.
fn cpu_now() -> f64 {
    static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    let wall = || {
        START
            .get_or_init(std::time::Instant::now)
            .elapsed()
            .as_secs_f64()
    };
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|t| t.split_whitespace().next()?.parse::<u64>().ok())
        .map_or_else(wall, |ns| ns as f64 / 1e9)
}

fn fail(msg: impl std::fmt::Display) -> ! {
    eprintln!("sim_scale: {msg}");
    std::process::exit(1)
}

fn usage() -> ! {
    eprintln!(
        "usage: sim_scale tasks [JOBS] | sim_scale cpus [MAXCPUS] [POLICY...] | sim_scale print POLICY CPUS"
    );
    std::process::exit(2)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("tasks") => {
            let jobs = match args.get(1) {
                None => 1_000_000,
                Some(s) => s.parse().ok().filter(|&n| n > 0).unwrap_or_else(|| usage()),
            };
            if args.len() > 2 {
                usage()
            }
            tasks(jobs)
        }
        Some("cpus") => {
            let max = match args.get(1) {
                None => 64,
                Some(s) => s
                    .parse()
                    .ok()
                    .filter(|&n: &usize| (1..=1024).contains(&n))
                    .unwrap_or_else(|| usage()),
            };
            let names: Vec<&str> = args.iter().skip(2).map(String::as_str).collect();
            for n in &names {
                if !ROOT_POLICIES.contains(n) {
                    fail(format!("`{n}` is not one of {}", ROOT_POLICIES.join(", ")))
                }
            }
            let names = if names.is_empty() {
                ROOT_POLICIES.to_vec()
            } else {
                names
            };
            cpus(max, &names)
        }
        Some("print") => {
            let (Some(policy), Some(c), None) = (args.get(1), args.get(2), args.get(3)) else {
                usage()
            };
            let c: usize = c
                .parse()
                .ok()
                .filter(|&n| n >= 1)
                .unwrap_or_else(|| usage());
            if !ROOT_POLICIES.contains(&policy.as_str()) {
                fail(format!(
                    "`{policy}` is not one of {}",
                    ROOT_POLICIES.join(", ")
                ))
            }
            print!("{}", wide_hierarchy(policy, c))
        }
        _ => usage(),
    }
}

// ----- uniprocessor task sets against a bare event loop ----------------------

/// The scheduling rule of a uniprocessor run.
#[derive(Clone, Copy, PartialEq)]
enum Rule {
    /// Rate-monotonic fixed priorities (`fp`).
    Rm,
    /// Earliest deadline first (`rez`, amount = execution time).
    Edf,
}

fn tasks(target_jobs: u64) {
    println!("jobs per second on the CPU, hsched against a bare event loop (same jobs and misses)");
    println!(
        "{:>6} {:>5} {:>4} {:>10} {:>8} {:>8} {:>12} {:>12} {:>6}",
        "tasks", "util", "rule", "jobs", "misses", "model s", "hsched /s", "bare /s", "ratio"
    );
    for n in [10, 100, 1_000, 10_000] {
        let set = hsched_taskgen::generate(&Config {
            n,
            utilization: 0.75,
            seed: 1,
            ..Default::default()
        })
        .unwrap_or_else(|e| fail(e));
        // Rez models intervals of 1 µs and more: execution times are
        // rounded up to whole microseconds, for both runs.
        let mut set = set;
        for t in &mut set.tasks {
            t.exec_ns = t.exec_ns.div_ceil(1_000).max(1) * 1_000;
        }
        let util = set.utilization();
        // Simulated time for about `target_jobs` jobs, in whole seconds.
        let rate: f64 = set.tasks.iter().map(|t| 1e9 / t.period_ns as f64).sum();
        let secs = (target_jobs as f64 / rate).ceil().max(1.0) as u64;
        let end = secs * 1_000_000_000;
        for rule in [Rule::Rm, Rule::Edf] {
            let (h_jobs, h_time) = through_hsched(&set, rule, end);
            let t0 = cpu_now();
            let b_jobs = bare_loop(&set, rule, end);
            let b_time = cpu_now() - t0;
            if h_jobs != b_jobs {
                let first = h_jobs.iter().zip(&b_jobs).position(|(a, b)| a != b);
                fail(format!(
                    "{n} tasks, {}: hsched and the bare loop disagree (task {first:?}: {:?} against {:?})",
                    rule_name(rule),
                    first.map(|i| h_jobs[i]),
                    first.map(|i| b_jobs[i]),
                ))
            }
            let jobs: u64 = b_jobs.iter().map(|j| j.0).sum();
            let misses: u64 = b_jobs.iter().map(|j| j.1).sum();
            let (h, b) = (jobs as f64 / h_time, jobs as f64 / b_time);
            println!(
                "{n:>6} {util:>5.3} {:>4} {jobs:>10} {misses:>8} {secs:>8} {:>12} {:>12} {:>6.2}",
                rule_name(rule),
                mega(h),
                mega(b),
                b / h
            );
        }
    }
}

fn rule_name(rule: Rule) -> &'static str {
    match rule {
        Rule::Rm => "RM",
        Rule::Edf => "EDF",
    }
}

fn mega(x: f64) -> String {
    format!("{:.2} M", x / 1e6)
}

/// The set as a hierarchy file of one `fp` or `rez` root.
fn hierarchy_of(set: &TaskSet, rule: Rule) -> String {
    let mut s = String::new();
    match rule {
        Rule::Rm => s.push_str("[[scheduler]]\nname = \"root\"\npolicy = \"fp\"\n\n"),
        Rule::Edf => s.push_str("[[scheduler]]\nname = \"root\"\npolicy = \"rez\"\ncap = 1\n\n"),
    }
    let prio = set.dm_priorities();
    for (t, p) in set.tasks.iter().zip(prio) {
        let params = match rule {
            Rule::Rm => format!("priority = {p}"),
            Rule::Edf => format!(
                "amount = \"{}ns\", period = \"{}ns\"",
                t.exec_ns, t.period_ns
            ),
        };
        let _ = writeln!(
            s,
            "[[thread]]\nname = \"{}\"\nscheduler = \"root\"\nparams = {{ {params} }}\n\
             workload = {{ kind = \"periodic\", period = \"{}ns\", exec = \"{}ns\" }}\n",
            t.name, t.period_ns, t.exec_ns
        );
    }
    s
}

/// Runs the set through hsched until `end`: each task's (jobs, misses),
/// and the CPU time of the run (building the hierarchy included, parsing
/// the file not).
fn through_hsched(set: &TaskSet, rule: Rule, end: u64) -> (Vec<(u64, u64)>, f64) {
    let text = hierarchy_of(set, rule);
    let policies = hsched_policies::registry();
    let h = hsched_config::parse_str_with_policies(&text, "taskset.toml", policies)
        .unwrap_or_else(|e| fail(e));
    let t0 = cpu_now();
    let opts = SimOptions {
        duration: Some(Duration(end)),
        seed: Some(1),
        ..Default::default()
    };
    let report = hsched_sim::run_with_policies(&h, opts, policies).unwrap_or_else(|e| fail(e));
    let time = cpu_now() - t0;
    let jobs = report
        .threads
        .iter()
        .map(|t| (t.jobs, t.deadline_misses))
        .collect();
    (jobs, time)
}

/// The same model as the simulator's `periodic` workload (job k released
/// at k·period, due at k·period + deadline, a backlog run back to back,
/// nothing at or after `end` happens, an unfinished job due before `end`
/// is a miss), scheduled by `rule` on one processor with the ties Rez and
/// FP use: a completion before a release at the same instant, the running
/// task preempted only by a strictly better one, equal deadlines to the
/// lower index. Each task's (jobs, misses).
fn bare_loop(set: &TaskSet, rule: Rule, end: u64) -> Vec<(u64, u64)> {
    let n = set.tasks.len();
    let period: Vec<u64> = set.tasks.iter().map(|t| t.period_ns).collect();
    let exec: Vec<u64> = set.tasks.iter().map(|t| t.exec_ns).collect();
    let deadline: Vec<u64> = set.tasks.iter().map(|t| t.deadline_ns).collect();
    let prio = set.dm_priorities();
    let mut released = vec![0u64; n];
    let mut done = vec![0u64; n];
    let mut out = vec![(0u64, 0u64); n];
    // The key the rule orders ready tasks by, smaller first.
    let key = |i: usize, done: u64| -> u64 {
        match rule {
            Rule::Rm => (i64::MAX - prio[i]) as u64,
            Rule::Edf => done * period[i] + deadline[i],
        }
    };
    let mut releases: BinaryHeap<Reverse<(u64, u32)>> =
        (0..n).map(|i| Reverse((0, i as u32))).collect();
    let mut ready: BinaryHeap<Reverse<(u64, u32)>> = BinaryHeap::new();
    // The running task, its key and the work left of its job.
    let mut running: Option<(u64, usize)> = None;
    // The work left of each preempted task's job.
    let mut rest = vec![0u64; n];
    let mut left = 0u64;
    let mut now = 0u64;
    loop {
        let next_release = releases.peek().map_or(u64::MAX, |r| r.0 .0);
        let completion = running.map_or(u64::MAX, |_| now + left);
        let t = next_release.min(completion);
        if t >= end {
            break;
        }
        if running.is_some() {
            left -= t - now;
        }
        now = t;
        if completion <= next_release {
            let (_, i) = running.expect("a completion needs a running task");
            let due = done[i] * period[i] + deadline[i];
            done[i] += 1;
            out[i].0 += 1;
            if now > due {
                out[i].1 += 1;
            }
            if done[i] < released[i] {
                left = exec[i];
            } else {
                running = ready.pop().map(|Reverse((k, j))| {
                    left = rest[j as usize];
                    (k, j as usize)
                });
            }
        } else {
            let Reverse((_, i)) = releases.pop().expect("a release was due");
            let i = i as usize;
            let idle = done[i] == released[i];
            released[i] += 1;
            releases.push(Reverse((released[i] * period[i], i as u32)));
            if idle {
                let k = key(i, done[i]);
                match running {
                    None => {
                        running = Some((k, i));
                        left = exec[i];
                    }
                    Some((rk, r)) if k < rk => {
                        rest[r] = left;
                        ready.push(Reverse((rk, r as u32)));
                        running = Some((k, i));
                        left = exec[i];
                    }
                    Some(_) => {
                        rest[i] = exec[i];
                        ready.push(Reverse((k, i as u32)));
                    }
                }
            }
        }
    }
    // Jobs due before the end and not done are misses.
    for i in 0..n {
        let x = end.saturating_sub(deadline[i]);
        out[i].1 += released[i]
            .min(x.div_ceil(period[i]))
            .saturating_sub(done[i]);
    }
    out
}

// ----- many processors under every root policy --------------------------------

/// The policies that can sit at the root over threads.
const ROOT_POLICIES: &[&str] = &[
    "fp",
    "ts",
    "ps",
    "best",
    "best-rate",
    "linux24",
    "coop",
    "rez",
    "realrate",
    "dl",
];

/// Uniprocessor policies: one instance per processor under an `fp` root.
fn per_cpu(policy: &str) -> bool {
    matches!(policy, "rez" | "realrate")
}

/// One processor's 100 threads: the mix of `benches/flat_fifo.toml`
/// (periodic, interactive, I/O-bound, sporadic, video), 2.6 processors'
/// worth of demand, so every policy has a ready queue to order.
const MIX: &[(&str, usize, &str)] = &[
    (
        "tick",
        20,
        "kind = \"periodic\", period = \"20ms\", exec = \"300us\", jitter = \"1ms\"",
    ),
    (
        "ui",
        30,
        "kind = \"interactive\", think = \"30ms\", burst = \"500us\"",
    ),
    (
        "disk",
        30,
        "kind = \"io\", compute = \"200us\", io = \"5ms\"",
    ),
    (
        "events",
        10,
        "kind = \"sporadic\", min_interarrival = \"2ms\", max_interarrival = \"20ms\", exec = \"100us\"",
    ),
    (
        "movie",
        10,
        "kind = \"video\", fps = 30, i = \"3ms\", p = \"2ms\", b = \"1ms\"",
    ),
];

/// Thread parameters under `policy`, by the thread's index in its group.
fn thread_params(policy: &str, k: usize) -> String {
    match policy {
        "fp" => format!("params = {{ priority = {} }}\n", k % 8),
        "ts" => format!("params = {{ priority = {} }}\n", 1 + k % 16),
        "ps" => format!("params = {{ share = {} }}\n", 1 + k % 4),
        // 100 reservations of 0.8 % each: a load of 0.8 per instance.
        "rez" | "dl" => "params = { amount = \"80us\", period = \"10ms\" }\n".into(),
        _ => String::new(),
    }
}

fn wide_hierarchy(policy: &str, cpus: usize) -> String {
    let mut s = format!("[machine]\ncpus = {cpus}\n\n");
    let groups: Vec<String> = if per_cpu(policy) {
        s.push_str("[[scheduler]]\nname = \"root\"\npolicy = \"fp\"\n\n");
        (0..cpus)
            .map(|c| {
                // Real rate's floor and first proportion (1 % and 5 %
                // by default) would load 100 threads past its cap.
                let extra = if policy == "realrate" {
                    "floor = 0.005\ninitial = 0.005\n"
                } else {
                    ""
                };
                let _ = writeln!(
                    s,
                    "[[scheduler]]\nname = \"s{c}\"\npolicy = \"{policy}\"\nparent = \"root\"\n{extra}"
                );
                format!("s{c}")
            })
            .collect()
    } else {
        // `dl` is global EDF over every processor, its budgets checked at
        // a 4 ms tick as Linux's deadline class does at HZ=250.
        let extra = if policy == "dl" {
            format!("processors = {cpus}\ntick = \"4ms\"\n")
        } else {
            String::new()
        };
        let _ = writeln!(
            s,
            "[[scheduler]]\nname = \"root\"\npolicy = \"{policy}\"\n{extra}"
        );
        (0..cpus).map(|_| "root".to_string()).collect()
    };
    for (c, sched) in groups.iter().enumerate() {
        for (name, count, workload) in MIX {
            // A count of one per table, so parameters can vary.
            for k in 0..*count {
                let _ = writeln!(
                    s,
                    "[[thread]]\nname = \"{name}-{c}-{k}\"\nscheduler = \"{sched}\"\n{}workload = {{ {workload} }}\n",
                    thread_params(policy, k)
                );
            }
        }
    }
    s
}

fn cpus(max: usize, policies: &[&str]) {
    let mut counts = vec![];
    let mut c = 1;
    while c <= max {
        counts.push(c);
        c *= 2;
    }
    if counts.last() != Some(&max) {
        counts.push(max);
    }
    println!("seconds on the CPU for 1 s of model time, 100 threads per processor");
    print!("{:>10}", "policy");
    for c in &counts {
        print!(" {:>8}", format!("{c} cpu"));
    }
    println!("  (HSI inputs at the largest)");
    let registry = hsched_policies::registry();
    for policy in policies {
        print!("{policy:>10}");
        let mut inputs = 0;
        for &c in &counts {
            let text = wide_hierarchy(policy, c);
            let h = hsched_config::parse_str_with_policies(&text, "wide.toml", registry)
                .unwrap_or_else(|e| fail(format!("{policy}, {c} cpus: {e}")));
            let opts = SimOptions {
                duration: Some(Duration(1_000_000_000)),
                seed: Some(1),
                ..Default::default()
            };
            let t0 = cpu_now();
            let report = hsched_sim::run_with_policies(&h, opts, registry)
                .unwrap_or_else(|e| fail(format!("{policy}, {c} cpus: {e}")));
            let t = cpu_now() - t0;
            inputs = report.events;
            print!(" {t:>8.3}");
            use std::io::Write as _;
            let _ = std::io::stdout().flush();
        }
        println!("  ({inputs})");
    }
}
