//! The engine's machine model and metrics, checked against numbers worked
//! out by hand.

mod common;
use common::*;
use hsched_sim::{GanttRequest, SimError, SimOptions};

const ONE_FIFO: &str = r#"
[machine]
cpus = 1
[[scheduler]]
name = "root"
policy = "fifo"
"#;

#[test]
fn a_periodic_thread_on_an_idle_machine() {
    let text = format!(
        "{ONE_FIFO}
[[thread]]
name = \"video\"
scheduler = \"root\"
workload = {{ kind = \"periodic\", period = \"33ms\", exec = \"10ms\", offset = \"5ms\" }}
"
    );
    let r = sim(&text, 1.0);
    let v = r.thread("video").unwrap();
    // Releases at 5, 38, ..., 995 ms: 31 of them; the last one has run
    // 5 ms of its 10 when the run ends.
    assert_eq!(v.jobs, 30);
    assert_eq!(v.cpu_ns, 305 * MS);
    assert_eq!(v.received_ns, 305 * MS);
    assert_eq!(v.deadline_misses, 0);
    assert_eq!(v.deadline_hits, 30);
    // Every job finishes 23 ms before its deadline.
    assert_eq!(v.max_lateness_ns, Some(-23 * MS as i64));
    assert_eq!(v.lateness_ns.as_ref().unwrap().min, -23 * MS as i64);
    assert_eq!(v.max_tardiness_ns, Some(0));
    let lat = v.dispatch_latency_ns.as_ref().unwrap();
    assert_eq!((lat.count, lat.max), (31, 0));
    assert_eq!(v.wakeups, 31);
    assert_eq!(v.context_switches, 31);
    assert_eq!(v.preemptions, 0);
    assert_eq!(v.max_runnable_gap_ns, 0);
    assert!((v.share - 0.305).abs() < 1e-12);
    assert_eq!(r.machine.busy_ns, 305 * MS);
    assert_eq!(r.machine.idle_ns, 695 * MS);
    assert_eq!(r.machine.stolen_ns, 0);
    assert_eq!(r.scheduler("root").unwrap().supply_ns, 305 * MS);
    assert_eq!(r.scheduler("root").unwrap().policy, "fifo");
    // 31 wakes, 30 blocks, one creation.
    assert_eq!(
        (
            r.event_counts.wake,
            r.event_counts.block,
            r.event_counts.create_thread
        ),
        (31, 30, 1)
    );
    assert_eq!(r.events, 62);
}

#[test]
fn context_switches_cost_time_that_nobody_receives() {
    // Two periodic threads released together every 10 ms, 2 ms each, on a
    // non-preemptive FIFO with a 1 ms switch: a switches in at 0, runs 1..3;
    // b switches in at 3, runs 4..6, due at 10.
    let text = format!(
        "{ONE_FIFO}
context_switch_placeholder
[[thread]]
name = \"a\"
scheduler = \"root\"
workload = {{ kind = \"periodic\", period = \"10ms\", exec = \"2ms\" }}
[[thread]]
name = \"b\"
scheduler = \"root\"
workload = {{ kind = \"periodic\", period = \"10ms\", exec = \"2ms\" }}
"
    )
    .replace("cpus = 1\n", "cpus = 1\ncontext_switch = \"1ms\"\n")
    .replace("context_switch_placeholder\n", "");
    let r = sim(&text, 1.0);
    let (a, b) = (r.thread("a").unwrap(), r.thread("b").unwrap());
    assert_eq!((a.jobs, b.jobs), (100, 100));
    assert_eq!((a.cpu_ns, b.cpu_ns), (200 * MS, 200 * MS));
    assert_eq!(a.max_lateness_ns, Some(-7 * MS as i64));
    assert_eq!(b.max_lateness_ns, Some(-4 * MS as i64));
    // b waited 3 ms for its processor each period.
    assert_eq!(b.dispatch_latency_ns.as_ref().unwrap().max, 3 * MS as i64);
    assert_eq!(b.max_runnable_gap_ns, 3 * MS);
    assert_eq!(r.machine.context_switches, 200);
    assert_eq!(r.machine.context_switch_ns, 200 * MS);
    assert_eq!(r.machine.busy_ns, 400 * MS);
    assert_eq!(r.machine.idle_ns, 400 * MS);
    // The HSI accounts the switch to the thread switched in.
    assert_eq!(a.received_ns, 300 * MS);
}

#[test]
fn stolen_time_reduces_what_threads_receive() {
    let text = format!(
        "{ONE_FIFO}
[[machine.stolen]]
cpu = 0
every = \"10ms\"
amount = \"1ms\"
start = \"2ms\"
[[thread]]
name = \"hog\"
scheduler = \"root\"
workload = {{ kind = \"cpu-bound\" }}
"
    );
    let r = sim(&text, 1.0);
    let h = r.thread("hog").unwrap();
    assert_eq!(h.cpu_ns, 900 * MS);
    assert_eq!(h.stolen_ns, 100 * MS);
    // The HSI saw the same stolen time: received is net of it.
    assert_eq!(h.received_ns, 900 * MS);
    assert_eq!(r.scheduler("root").unwrap().supply_ns, 900 * MS);
    assert_eq!(r.machine.stolen_ns, 100 * MS);
    assert_eq!(r.machine.idle_ns, 0);
    assert_eq!(r.event_counts.add_stolen, 100);

    // A 5 ms job released at 0 every 10 ms loses 1 ms at 2..3 ms: it
    // finishes at 6 ms instead of 5.
    let text = text.replace(
        "{ kind = \"cpu-bound\" }",
        "{ kind = \"periodic\", period = \"10ms\", exec = \"5ms\" }",
    );
    let r = sim(&text, 1.0);
    let h = r.thread("hog").unwrap();
    assert_eq!(h.max_lateness_ns, Some(-4 * MS as i64));
    assert_eq!(h.cpu_ns, 500 * MS);
    assert_eq!(h.stolen_ns, 100 * MS);
    assert_eq!(r.machine.stolen_ns, 100 * MS);
    assert_eq!(r.machine.idle_ns, 400 * MS);
}

#[test]
fn threads_come_and_go_at_their_times() {
    let text = format!(
        "{ONE_FIFO}
[[thread]]
name = \"late\"
scheduler = \"root\"
start = \"250ms\"
exit = \"750ms\"
workload = {{ kind = \"cpu-bound\" }}
[[thread]]
name = \"never\"
scheduler = \"root\"
start = \"5s\"
workload = {{ kind = \"cpu-bound\" }}
"
    );
    let r = sim(&text, 1.0);
    let t = r.thread("late").unwrap();
    assert_eq!(
        (t.created_ns, t.exited_ns),
        (Some(250 * MS), Some(750 * MS))
    );
    assert_eq!(t.cpu_ns, 500 * MS);
    assert_eq!(t.received_ns, 500 * MS);
    let n = r.thread("never").unwrap();
    assert_eq!(
        (n.created_ns, n.cpu_ns, n.scheduler.as_str()),
        (None, 0, "root")
    );
    assert_eq!(r.machine.idle_ns, 500 * MS);
    assert_eq!(r.event_counts.exit, 1);
}

#[test]
fn a_starved_thread_shows_its_gap() {
    // FIFO never preempts: the second CPU-bound thread never runs.
    let text = format!(
        "{ONE_FIFO}
[[thread]]
name = \"first\"
scheduler = \"root\"
workload = {{ kind = \"cpu-bound\" }}
[[thread]]
name = \"second\"
scheduler = \"root\"
workload = {{ kind = \"cpu-bound\" }}
"
    );
    let r = sim(&text, 2.0);
    assert_eq!(r.thread("first").unwrap().cpu_ns, 2 * S);
    let s = r.thread("second").unwrap();
    assert_eq!(s.cpu_ns, 0);
    assert_eq!(s.max_runnable_gap_ns, 2 * S);
    assert!(s.dispatch_latency_ns.is_none());
}

/// A periodic thread that never runs misses every deadline that passes
/// while it waits, counted at the end of the run or at its exit time.
#[test]
fn a_starved_periodic_thread_misses_its_deadlines() {
    let text = format!(
        "{ONE_FIFO}
[[thread]]
name = \"hog\"
scheduler = \"root\"
workload = {{ kind = \"cpu-bound\" }}
[[thread]]
name = \"late\"
scheduler = \"root\"
workload = {{ kind = \"periodic\", period = \"10ms\", exec = \"1ms\" }}
[[thread]]
name = \"gone\"
scheduler = \"root\"
exit = \"505ms\"
workload = {{ kind = \"periodic\", period = \"10ms\", exec = \"1ms\" }}
"
    );
    let r = sim(&text, 1.0);
    // Jobs due at 10, 20, ..., 990 ms: the one due at 1 s, the end, is not
    // yet missed.
    let late = r.thread("late").unwrap();
    assert_eq!((late.jobs, late.deadline_misses), (0, 99));
    assert!(late.lateness_ns.is_none());
    let gone = r.thread("gone").unwrap();
    assert_eq!((gone.jobs, gone.deadline_misses), (0, 50));
}

#[test]
fn timer_ticks_delay_budget_enforcement() {
    // A hard reservation of 10 ms / 33 ms for a CPU-bound renderer: with
    // precise timers it gets exactly its reservation; with a 64 Hz clock
    // (15.6 ms ticks) budgets are enforced late, so it gets more (§10.5.2:
    // "slightly more than the amount of CPU time that it reserved").
    let text = r#"
[machine]
cpus = 1
TIMER
[[scheduler]]
name = "fp"
policy = "fp"
[[scheduler]]
name = "rez"
policy = "rez"
parent = "fp"
params = { priority = 1 }
[[scheduler]]
name = "ts"
policy = "ts"
parent = "fp"
params = { priority = 0 }
[[thread]]
name = "render"
scheduler = "rez"
params = { amount = "10ms", period = "33ms" }
workload = { kind = "frame-renderer" }
[[thread]]
name = "bg"
scheduler = "ts"
workload = { kind = "cpu-bound" }
"#;
    let precise = sim(&text.replace("TIMER", ""), 33.0);
    let tick = sim(&text.replace("TIMER", "timer = \"64hz\""), 33.0);
    let p = precise.thread("render").unwrap();
    let t = tick.thread("render").unwrap();
    assert_eq!(p.cpu_ns, 10_000 * MS);
    assert!(
        t.cpu_ns > p.cpu_ns + 1000 * MS,
        "tick {} vs precise {}",
        t.cpu_ns,
        p.cpu_ns
    );
    assert!(t.fps.unwrap() > p.fps.unwrap());
    assert!(tick.event_counts.fire_timers > 0);
    assert_eq!(p.deadline_misses, 0);
}

#[test]
fn operations_apply_at_their_time() {
    // A CPU-bound thread under TS next to a rival; at 1 s it moves into a
    // hard 3 ms / 10 ms reservation under Rez (above TS), at 2 s it goes
    // back.
    let text = r#"
[machine]
cpus = 1
[[scheduler]]
name = "fp"
policy = "fp"
[[scheduler]]
name = "rez"
policy = "rez"
parent = "fp"
params = { priority = 1 }
[[scheduler]]
name = "ts"
policy = "ts"
parent = "fp"
params = { priority = 0 }
[[thread]]
name = "a"
scheduler = "ts"
workload = { kind = "cpu-bound" }
[[thread]]
name = "b"
scheduler = "ts"
workload = { kind = "cpu-bound" }
[[at]]
time = "1s"
op = "begin-reservation"
thread = "a"
scheduler = "rez"
params = { amount = "3ms", period = "10ms" }
[[at]]
time = "2s"
op = "end-reservation"
thread = "a"
"#;
    let r1 = sim(text, 1.0);
    let r2 = sim(text, 2.0);
    let r3 = sim(text, 3.0);
    let a = |r: &hsched_sim::Report| r.thread("a").unwrap().cpu_ns as f64 / S as f64;
    // Round robin halves the first second; during the reservation a gets
    // exactly its 30 % (it left TS, so it gets nothing more); then halves
    // again.
    assert!((a(&r1) - 0.5).abs() < 0.04, "{}", a(&r1));
    assert!((a(&r2) - a(&r1) - 0.3).abs() < 0.001, "{}", a(&r2) - a(&r1));
    assert!((a(&r3) - a(&r2) - 0.5).abs() < 0.04, "{}", a(&r3) - a(&r2));
    assert_eq!(r2.thread("a").unwrap().scheduler, "rez");
    assert_eq!(r3.thread("a").unwrap().scheduler, "ts");
    assert_eq!(r2.event_counts.operations, 1);
    assert_eq!(r3.event_counts.operations, 2);
    assert_eq!(r3.scheduler("rez").unwrap().supply_ns, 300 * MS);
}

#[test]
fn set_params_about_a_limit_child_changes_the_cap() {
    // 10 ms every 33 ms; at 500 ms the amount drops to 5 ms (the current
    // period is charged as if it had applied since it began: already
    // spent); at 1 s the period becomes 20 ms, from the next period (at
    // 1023 ms) on; at 1.5 s the thread moves to TS, taking no parameter
    // of Limit's along, and has the processor to itself.
    let text = include_str!("../../config/tests/valid/limit_change.toml");
    let cpu = |secs: f64| sim(text, secs).thread("decoder").unwrap().cpu_ns / MS;
    assert_eq!(cpu(0.5), 15 * 10 + 5);
    assert_eq!(cpu(1.0) - cpu(0.5), 14 * 5 + 5);
    assert_eq!(cpu(1.5) - cpu(1.0), 23 * 5 + 5);
    assert_eq!(cpu(2.0) - cpu(1.5), 500);
}

#[test]
fn refused_operations_name_the_operation_and_time() {
    let text = OVER_ADMISSION;
    let h = parse(text);
    let e = hsched_sim::run_with_policies(&h, opts(1.0), &policies()).unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, SimError::Op { .. }), "{msg}");
    // Admission control: 60 % + 60 % exceeds Rez's cap.
    assert!(
        msg.contains("255ms") && msg.contains("begin_reservation of 'b'"),
        "{msg}"
    );
    assert!(msg.contains("admission"), "{msg}");
    // a's old 60 % holds until its next period start.
    assert!(
        msg.contains("120.0%") && msg.contains("40.0% of it held until the next period start"),
        "{msg}"
    );
}

#[test]
fn an_operation_after_a_program_ends_says_when_it_ended() {
    // Five 10 ms loops: the program ends at 50 ms, the checker cannot
    // know that, and the operation at 500 ms names the thread.
    let text = format!(
        "{ONE_FIFO}
[[thread]]
name = \"a\"
scheduler = \"root\"
workload = {{ kind = \"program\", steps = [{{ run = \"1ms\" }}, {{ sleep = \"9ms\" }}], loops = 5 }}
[[at]]
time = \"500ms\"
op = \"move-thread\"
thread = \"a\"
to = \"root\"
"
    );
    let h = parse(&text);
    let e = hsched_sim::run_with_policies(&h, opts(1.0), &policies()).unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, SimError::Op { .. }), "{msg}");
    assert!(
        msg.contains("at t=500ms")
            && msg.contains("thread `a` exited at t=50ms (when its program ended)"),
        "{msg}"
    );
}

#[test]
fn protocol_violations_print_a_replay_line() {
    let text = r#"
[machine]
cpus = 1
[[scheduler]]
name = "greedy"
policy = "hoarder"
[[thread]]
name = "t"
scheduler = "greedy"
start = "3ms"
workload = { kind = "cpu-bound" }
"#;
    let h = parse(text);
    let o = SimOptions {
        seed: Some(42),
        ..opts(1.0)
    };
    let e = hsched_sim::run_with_policies(&h, o, &policies()).unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, SimError::Protocol { .. }), "{msg}");
    assert!(msg.contains("wake-up of thread 't'"), "{msg}");
    assert!(msg.contains("t=3ms"), "{msg}");
    assert!(
        msg.ends_with("repro: hsched sim test.toml --seed 42"),
        "{msg}"
    );
}

#[test]
fn a_thread_without_a_workload_is_refused_by_name() {
    let text = format!(
        "{ONE_FIFO}
[[thread]]
name = \"daemon\"
scheduler = \"root\"
exec = [\"sleep\", \"1\"]
"
    );
    let h = parse(&text);
    let e = hsched_sim::run_with_policies(&h, opts(1.0), &policies()).unwrap_err();
    assert!(
        matches!(&e, SimError::Workload { thread, .. } if thread == "daemon"),
        "{e}"
    );
}

#[test]
fn multiprocessor_round_robin_never_runs_a_thread_twice() {
    // Three CPU-bound threads on two processors under TS: each gets about
    // two thirds of a processor; the trace shows no thread on two
    // processors at once and no processor running two threads.
    let text = r#"
[machine]
cpus = 2
[[scheduler]]
name = "ts"
policy = "ts"
quantum = "10ms"
[[thread]]
name = "w"
count = 3
scheduler = "ts"
workload = { kind = "cpu-bound" }
"#;
    let buf = Buf::default();
    let o = SimOptions {
        trace: Some(Box::new(buf.clone())),
        ..opts(3.0)
    };
    let r = sim_with(text, o);
    for t in &r.threads {
        let share = t.cpu_ns as f64 / (3 * S) as f64;
        assert!((share - 2.0 / 3.0).abs() < 0.02, "{} got {share}", t.name);
        assert!(t.preemptions > 50);
    }
    assert_eq!(r.machine.idle_ns, 0);
    let v: serde_json::Value = serde_json::from_str(&buf.text()).unwrap();
    let mut slices: Vec<(String, u64, f64, f64)> = v["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ph"] == "X" && e["pid"] == 1)
        .map(|e| {
            (
                e["name"].as_str().unwrap().to_string(),
                e["tid"].as_u64().unwrap(),
                e["ts"].as_f64().unwrap(),
                e["dur"].as_f64().unwrap(),
            )
        })
        .collect();
    // Per processor: slices do not overlap and cover the whole run.
    for cpu in 0..2 {
        let mut s: Vec<_> = slices.iter().filter(|x| x.1 == cpu).collect();
        s.sort_by(|a, b| a.2.partial_cmp(&b.2).unwrap());
        let total: f64 = s.iter().map(|x| x.3).sum();
        assert!((total - 3e6).abs() < 1.0, "cpu{cpu} covered {total} us");
        for w in s.windows(2) {
            assert!(w[0].2 + w[0].3 <= w[1].2 + 1e-6);
        }
    }
    // Per thread: slices on different processors do not overlap.
    slices.sort_by(|a, b| a.0.cmp(&b.0).then(a.2.partial_cmp(&b.2).unwrap()));
    for w in slices.windows(2) {
        if w[0].0 == w[1].0 {
            assert!(
                w[0].2 + w[0].3 <= w[1].2 + 1e-6,
                "{} runs twice at {}",
                w[0].0,
                w[1].2
            );
        }
    }
}

#[test]
fn video_sporadic_interactive_io_and_programs_run() {
    let text = format!(
        "{ONE_FIFO}
[[thread]]
name = \"mpeg\"
scheduler = \"root\"
workload = {{ kind = \"video\", fps = 25, i = \"6ms\", p = \"5ms\", b = \"3ms\" }}
[[thread]]
name = \"spor\"
scheduler = \"root\"
workload = {{ kind = \"sporadic\", min_interarrival = \"20ms\", max_interarrival = \"40ms\", exec = \"1ms\", deadline = \"20ms\" }}
[[thread]]
name = \"click\"
scheduler = \"root\"
workload = {{ kind = \"interactive\", think = \"100ms\", burst = \"2ms\" }}
[[thread]]
name = \"disk\"
scheduler = \"root\"
workload = {{ kind = \"io\", compute = \"1ms\", io = \"9ms\" }}
[[thread]]
name = \"rt\"
scheduler = \"root\"
workload = {{ kind = \"program\", steps = [{{ run = \"2ms\" }}, {{ timer = \"10ms\", absolute = true }}], loops = 50 }}
"
    );
    let r = sim(&text, 10.0);
    let m = r.thread("mpeg").unwrap();
    assert_eq!(m.frames, Some(250));
    assert!((m.fps.unwrap() - 25.0).abs() < 1e-9);
    assert_eq!(m.deadline_misses, 0);
    let s = r.thread("spor").unwrap();
    // Mean inter-arrival 30 ms over 10 s.
    assert!((300..=367).contains(&s.jobs), "{}", s.jobs);
    assert_eq!(s.deadline_misses, 0);
    let c = r.thread("click").unwrap();
    assert!((80..=120).contains(&c.jobs), "{}", c.jobs);
    let d = r.thread("disk").unwrap();
    assert!((900..=1000).contains(&d.jobs), "{}", d.jobs);
    let p = r.thread("rt").unwrap();
    assert_eq!(p.jobs, 50);
    assert_eq!(p.exited_ns, Some(500 * MS));
    assert_eq!(p.cpu_ns, 100 * MS);
}

#[test]
fn progress_is_reported_and_ends_at_one() {
    use std::sync::{Arc, Mutex};
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s2 = seen.clone();
    let text = format!("{ONE_FIFO}\n[[thread]]\nname = \"t\"\nscheduler = \"root\"\nworkload = {{ kind = \"periodic\", period = \"1ms\", exec = \"100us\" }}\n");
    let o = SimOptions {
        progress: Some(Box::new(move |f| s2.lock().unwrap().push(f))),
        ..opts(1.0)
    };
    sim_with(&text, o);
    let v = seen.lock().unwrap();
    assert!(v.len() >= 90, "{} calls", v.len());
    assert!(v.windows(2).all(|w| w[0] <= w[1]));
    assert_eq!(*v.last().unwrap(), 1.0);
}

#[test]
fn gantt_charts_show_runs_and_misses_in_the_window() {
    let text = format!(
        "{ONE_FIFO}
[[thread]]
name = \"late<&>\"
scheduler = \"root\"
workload = {{ kind = \"periodic\", period = \"10ms\", exec = \"15ms\" }}
"
    );
    let buf = Buf::default();
    let o = SimOptions {
        gantt: Some(GanttRequest {
            from: hsched_core::Duration(100 * MS),
            to: hsched_core::Duration(200 * MS),
            out: Box::new(buf.clone()),
            color: Default::default(),
        }),
        ..opts(1.0)
    };
    sim_with(&text, o);
    let svg = buf.text();
    assert!(svg.starts_with("<svg"));
    assert!(svg.trim_end().ends_with("</svg>"));
    assert!(svg.contains("late&lt;&amp;&gt;"));
    // Overloaded: every job completion in the window is a miss (every 15 ms).
    let misses = svg.matches("fill=\"red\"").count();
    assert!((6..=7).contains(&misses), "{misses} misses drawn");
    assert!(svg.contains("<rect x=\"170.00\""));
}

#[test]
fn a_gantt_window_too_full_to_draw_ends_the_run_with_an_error() {
    // A bar every 2 µs: the chart is full after about 2 s of model time,
    // so the run stops there rather than keeping a bar for all 10 s.
    let text = format!(
        "{ONE_FIFO}
[[thread]]
name = \"fast\"
scheduler = \"root\"
workload = {{ kind = \"periodic\", period = \"2us\", exec = \"1us\" }}
"
    );
    let buf = Buf::default();
    let o = SimOptions {
        gantt: Some(GanttRequest {
            from: hsched_core::Duration(0),
            to: hsched_core::Duration(10_000 * MS),
            out: Box::new(buf.clone()),
            color: Default::default(),
        }),
        check_protocol: false,
        ..opts(10.0)
    };
    let e = hsched_sim::run_with_policies(&parse(&text), o, &policies()).unwrap_err();
    let SimError::Io { what, error } = &e else {
        panic!("{e}")
    };
    assert_eq!(*what, "Gantt chart");
    let msg = error.to_string();
    assert!(msg.contains("more than 1000000 bars"), "{msg}");
    assert!(msg.contains("the run stopped at t=2s"), "{msg}");
    assert!(buf.bytes().is_empty(), "nothing is written");
}

#[test]
fn a_join_under_a_multiprocessor_ts_keeps_the_protocol() {
    // A soft reservation (Join of a hard 5/20 reservation and a TS instance
    // over two processors) next to a periodic TS thread. This once broke
    // the protocol at t=0 (TS granted a processor it did not hold); the
    // checker is on in `opts`.
    let text = r#"
[machine]
cpus = 2
[[scheduler]]
name = "fp"
policy = "fp"
[[scheduler]]
name = "rez"
policy = "rez"
parent = "fp"
params = { priority = 2 }
[[scheduler]]
name = "ts-a"
policy = "ts"
parent = "fp"
params = { priority = 1 }
[[scheduler]]
name = "soft"
policy = "join"
parents = [{ name = "rez", amount = "5ms", period = "20ms" }, { name = "ts-a" }]
[[thread]]
name = "game"
scheduler = "soft"
workload = { kind = "frame-renderer" }
[[thread]]
name = "jittery"
scheduler = "ts-a"
params = { priority = 12 }
workload = { kind = "periodic", period = "10ms", exec = "2ms", jitter = "3ms" }
"#;
    let r = sim(text, 4.0);
    let game = r.thread("game").unwrap();
    // At least its reservation (25 %), at most one processor.
    assert!(game.cpu_ns >= S && game.cpu_ns <= 4 * S, "{}", game.cpu_ns);
    let j = r.thread("jittery").unwrap();
    assert!(
        j.jobs >= 399 && j.deadline_misses == 0,
        "{} jobs, {} misses",
        j.jobs,
        j.deadline_misses
    );
}

/// A run stopped from outside (Ctrl-C in `hsched sim`) ends before its
/// next instant and reports exactly what a run given that length reports,
/// with a complete trace; only `interrupted` tells them apart.
#[test]
fn a_stopped_run_reports_the_time_it_simulated() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let text = include_str!("../../../examples/home-computer.toml");
    let stop = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&stop);
    let trace = Buf::default();
    let mut o = opts(10.0);
    o.trace = Some(Box::new(trace.clone()));
    // The progress callback stands in for the signal: it sets the flag a
    // little past a third of the run.
    let reached = std::rc::Rc::new(std::cell::Cell::new(0.0));
    let seen = std::rc::Rc::clone(&reached);
    o.progress = Some(Box::new(move |f| {
        seen.set(f);
        if f >= 0.37 {
            flag.store(true, Ordering::Relaxed);
        }
    }));
    o.stop = Some(stop);
    let stopped = sim_with(text, o);
    assert!(stopped.interrupted);
    assert!(reached.get() < 0.5, "the bar went to {}", reached.get());
    let d = stopped.duration_ns;
    assert!((3 * S..4 * S).contains(&d), "stopped at {d} ns");
    assert!(stopped.to_json().contains("\"interrupted\": true"));
    assert!(stopped.to_table().contains("(interrupted)"));

    let whole = Buf::default();
    let mut o = opts(d as f64 / 1e9);
    o.duration = Some(hsched_core::Duration(d));
    o.trace = Some(Box::new(whole.clone()));
    let full = sim_with(text, o);
    assert!(!full.interrupted);
    assert!(!full.to_json().contains("interrupted"));
    let mut a: serde_json::Value = serde_json::from_str(&stopped.to_json()).unwrap();
    let b: serde_json::Value = serde_json::from_str(&full.to_json()).unwrap();
    assert_eq!(
        a.as_object_mut().unwrap().remove("interrupted"),
        Some(true.into())
    );
    assert_eq!(a, b);
    assert_eq!(trace.text(), whole.text());
    let v: serde_json::Value = serde_json::from_str(&trace.text()).unwrap();
    assert!(v["traceEvents"].as_array().unwrap().len() > 100);
}

/// A trace window keeps the events of the whole run's trace that fall in
/// it, slices clipped to it, and nothing else.
#[test]
fn a_trace_window_is_the_whole_trace_cut_to_it() {
    use serde_json::Value;
    let text = include_str!("../../../examples/home-computer.toml");
    let traced = |window: Option<(u64, u64)>| {
        let buf = Buf::default();
        let mut o = opts(2.0);
        o.trace = Some(Box::new(buf.clone()));
        o.trace_window = window.map(|(a, b)| (hsched_core::Duration(a), hsched_core::Duration(b)));
        sim_with(text, o);
        let v: Value = serde_json::from_str(&buf.text()).unwrap();
        v["traceEvents"].as_array().unwrap().clone()
    };
    let whole = traced(None);
    // Nanoseconds from the text's microseconds with three decimals.
    let ns = |v: &Value| (v.as_f64().unwrap() * 1e3).round() as u64;
    // Between events; from an instant with grants and releases (every
    // periodic thread is released at 1 s) to another; from the start.
    for (from, to) in [
        (1_234_567_000u64, 1_500_000_000u64),
        (1_000_000_000, 1_200_000_000),
        (0, 300_000_000),
    ] {
        let cut = traced(Some((from, to)));
        assert_eq!(cut, cut_by_hand(&whole, from, to, ns), "{from}..{to}");
    }
}

/// The events of `whole` in `[from, to)`, slices clipped to it.
fn cut_by_hand(
    whole: &[serde_json::Value],
    from: u64,
    to: u64,
    ns: impl Fn(&serde_json::Value) -> u64,
) -> Vec<serde_json::Value> {
    let mut want = Vec::new();
    for e in whole {
        if e["ph"] == "M" {
            want.push(e.clone());
            continue;
        }
        let start = ns(&e["ts"]);
        if e["ph"] == "X" {
            let end = start + ns(&e["dur"]);
            if start >= to || (end <= from && start < from) {
                continue;
            }
            let (s, t) = (start.max(from), end.min(to));
            let mut c = e.clone();
            c["ts"] = format!("{}.{:03}", s / 1000, s % 1000).parse().unwrap();
            c["dur"] = format!("{}.{:03}", (t - s) / 1000, (t - s) % 1000)
                .parse()
                .unwrap();
            want.push(c);
        } else if (from..to).contains(&start) {
            want.push(e.clone());
        }
    }
    assert!(
        want.len() > 100 && want.len() < whole.len() / 4,
        "{} of {}",
        want.len(),
        whole.len()
    );
    want
}

/// Names are escaped once for the trace (`json_literal`): quotes and
/// backslashes in scheduler and thread names come back as written, in the
/// processor slices and in the grants' `child`.
#[test]
fn trace_names_with_quotes_and_backslashes_read_back() {
    let text = r#"
[machine]
cpus = 1
[[scheduler]]
name = 'ro"ot'
policy = "fp"
[[scheduler]]
name = 't\s'
policy = "ts"
parent = 'ro"ot'
params = { priority = 1 }
[[thread]]
name = 'w"eird\'
scheduler = 't\s'
workload = { kind = "periodic", period = "10ms", exec = "2ms" }
[[thread]]
name = "plain"
scheduler = 't\s'
workload = { kind = "cpu-bound" }
"#;
    let buf = Buf::default();
    sim_with(
        text,
        SimOptions {
            trace: Some(Box::new(buf.clone())),
            ..opts(0.1)
        },
    );
    let v: serde_json::Value = serde_json::from_str(&buf.text()).unwrap();
    let names = |f: &dyn Fn(&serde_json::Value) -> Option<String>| {
        let mut n: Vec<String> = v["traceEvents"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(f)
            .collect();
        n.sort();
        n.dedup();
        n
    };
    let slices = names(&|e| (e["ph"] == "X").then(|| e["name"].as_str().unwrap().to_string()));
    assert_eq!(slices, ["plain", "w\"eird\\"]);
    let children = names(&|e| e["args"]["child"].as_str().map(str::to_string));
    assert_eq!(children, ["plain", "ro\"ot", "t\\s", "w\"eird\\"]);
}
