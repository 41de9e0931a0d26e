//! The `hsched` binary as a user and a script see it: every example checks,
//! draws and simulates; the examples do what their opening comments say;
//! broken files give exit status 2 and a `file:line:col` message, never a
//! panic; every verb has a help text with examples.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn hsched() -> Command {
    Command::new(env!("CARGO_BIN_EXE_hsched"))
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Runs `hsched ARGS` from the repository root.
fn run(args: &[&str]) -> Output {
    hsched()
        .current_dir(root())
        .args(args)
        .output()
        .expect("hsched runs")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn examples() -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(root().join("examples"))
        .expect("examples/ exists")
        .map(|e| {
            e.expect("readable entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .filter(|n| n.ends_with(".toml"))
        .map(|n| format!("examples/{n}"))
        .collect();
    v.sort();
    v
}

/// No user error may look like a crash.
fn assert_no_crash(o: &Output) {
    let err = stderr(o);
    for bad in [
        "panicked",
        "RUST_BACKTRACE",
        "stack backtrace",
        "Error {",
        "Os {",
    ] {
        assert!(
            !err.contains(bad),
            "stderr looks like a crash ({bad}):\n{err}"
        );
    }
}

fn sim_json(file: &str, extra: &[&str]) -> Value {
    let mut args = vec!["sim", file, "--json"];
    args.extend_from_slice(extra);
    let o = run(&args);
    assert!(
        o.status.success(),
        "hsched {args:?} failed:\n{}",
        stderr(&o)
    );
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{file}: --json is not JSON: {e}"))
}

fn thread<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["threads"]
        .as_array()
        .and_then(|ts| ts.iter().find(|t| t["name"] == name))
        .unwrap_or_else(|| panic!("no thread {name} in the report"))
}

/// Share of the machine in percent.
fn pct(v: &Value) -> f64 {
    v["share"].as_f64().expect("share is a number") * 100.0
}

fn misses(report: &Value, name: &str) -> u64 {
    thread(report, name)["deadline_misses"]
        .as_u64()
        .expect("deadline_misses")
}

fn named<'a>(report: &'a Value, list: &str, name: &str) -> &'a Value {
    report[list]
        .as_array()
        .and_then(|xs| xs.iter().find(|x| x["name"] == name))
        .unwrap_or_else(|| panic!("no {name} in {list}"))
}

fn near(what: &str, got: f64, want: f64, tol: f64) {
    assert!(
        (got - want).abs() <= tol,
        "{what}: got {got:.2}, expected {want} ± {tol}"
    );
}

#[test]
fn there_are_examples_for_every_figure() {
    let all = examples();
    for f in [
        "overview",
        "walkthrough",
        "per-app-reservation",
        "hard-firm-soft",
        "web-servers",
        "home-computer",
        "terminal-server",
        "principal-isolation",
        "frame-renderer",
    ] {
        assert!(
            all.contains(&format!("examples/{f}.toml")),
            "examples/{f}.toml is missing"
        );
    }
}

#[test]
fn every_example_opens_with_its_figure_and_what_to_look_for() {
    for f in examples() {
        let text = std::fs::read_to_string(root().join(&f)).unwrap();
        let head: String = text
            .lines()
            .take_while(|l| l.starts_with('#'))
            .collect::<Vec<_>>()
            .join("\n");
        assert!(
            head.contains("Figure") || head.contains("figure"),
            "{f}: the opening comment names no figure"
        );
        assert!(
            head.contains("What to look for"),
            "{f}: the opening comment does not say what to look for"
        );
    }
}

#[test]
fn every_example_checks() {
    for f in examples() {
        let o = run(&["check", &f]);
        assert!(o.status.success(), "hsched check {f}:\n{}", stderr(&o));
        let out = stdout(&o);
        assert!(out.starts_with(&format!("{f}: ok (")), "{f}: {out}");
        let quiet = run(&["check", "--quiet", &f]);
        assert!(quiet.status.success());
        assert!(quiet.stdout.is_empty());
    }
}

#[test]
fn every_example_draws_a_tree_with_all_its_threads() {
    for f in examples() {
        let o = run(&["tree", &f]);
        assert!(o.status.success(), "hsched tree {f}:\n{}", stderr(&o));
        let tree = stdout(&o);
        assert!(tree.contains("└── "), "{f}: no box drawing in\n{tree}");
        // Every thread of the report appears as a leaf of the tree.
        let report = sim_json(&f, &["--duration", "10ms"]);
        for t in report["threads"].as_array().unwrap() {
            let name = t["name"].as_str().unwrap();
            assert!(
                tree.contains(&format!("── {name} ")),
                "{f}: thread {name} missing from\n{tree}"
            );
        }
    }
}

#[test]
fn every_example_simulates_to_a_json_report() {
    for f in examples() {
        let r = sim_json(&f, &["--duration", "1s", "--check-protocol"]);
        for key in [
            "hsched_report",
            "duration_ns",
            "cpus",
            "seed",
            "events",
            "threads",
            "schedulers",
            "principals",
            "machine",
        ] {
            assert!(r.get(key).is_some(), "{f}: the report has no `{key}`");
        }
        assert_eq!(
            r["duration_ns"], 1_000_000_000u64,
            "{f}: --duration ignored"
        );
        assert!(
            !r["threads"].as_array().unwrap().is_empty(),
            "{f}: no threads"
        );
        let busy = r["machine"]["busy_ns"].as_u64().unwrap();
        assert!(busy > 0, "{f}: nothing ran");
    }
}

#[test]
fn a_run_shorter_than_the_file_says_what_it_leaves_out() {
    // walkthrough.toml starts T2 at 1 s and changes T2's reservation at 2 s.
    let f = "examples/walkthrough.toml";
    let o = run(&["sim", f, "--duration", "1s"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.contains("note: the run ends at 1s; 1 [[at]] operation (at 2s, line ")
            && e.contains("1 thread start (`T2`, at 1s, line "),
        "{e}"
    );
    let o = run(&["sim", f, "--duration", "3s"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(!stderr(&o).contains("note:"), "{}", stderr(&o));
}

#[test]
fn the_readable_report_names_every_thread() {
    let o = run(&["sim", "examples/overview.toml", "--duration", "1s"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    for t in ["T1", "T2", "T3", "res", "ts"] {
        assert!(
            out.lines().any(|l| l.starts_with(t)),
            "no line for {t} in\n{out}"
        );
    }
}

#[test]
fn sim_without_a_file_runs_the_home_computer() {
    let o = run(&["sim", "--json", "--duration", "500ms"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    let names: Vec<&str> = r["threads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["T1", "T2", "T3", "T4", "T5", "T6", "T7", "T8"]);
    let from_file = sim_json("examples/home-computer.toml", &["--duration", "500ms"]);
    assert_eq!(
        r["threads"], from_file["threads"],
        "the built-in example differs from the file"
    );
}

#[test]
fn same_seed_same_report_other_seed_other_report() {
    let a = run(&[
        "sim",
        "examples/terminal-server.toml",
        "--json",
        "--duration",
        "2s",
        "--seed",
        "3",
    ]);
    let b = run(&[
        "sim",
        "examples/terminal-server.toml",
        "--json",
        "--duration",
        "2s",
        "--seed",
        "3",
    ]);
    assert!(a.status.success() && b.status.success());
    assert_eq!(a.stdout, b.stdout, "two runs with the same seed differ");
    let r: Value = serde_json::from_slice(&a.stdout).unwrap();
    assert_eq!(r["seed"], 3);
}

// The numbers each example's opening comment promises.

#[test]
fn overview_reserves_t1_and_gives_t3_the_rest() {
    let r = sim_json("examples/overview.toml", &[]);
    assert_eq!(misses(&r, "T1"), 0);
    near("T1 %", pct(thread(&r, "T1")), 25.0, 0.5);
    assert!(pct(thread(&r, "T3")) > 70.0);
}

#[test]
fn walkthrough_reservation_ends_the_misses() {
    let r = sim_json("examples/walkthrough.toml", &[]);
    let before = misses(&r, "T2");
    assert!(before > 0, "T2 should miss while it shares TS with make");
    // A run that stops when T2 has just begun its reservation has seen
    // every miss: none happen once it holds the reservation.
    let at_two = sim_json("examples/walkthrough.toml", &["--duration", "2.05s"]);
    assert_eq!(misses(&at_two, "T2"), before);
}

#[test]
fn per_app_reservation_meets_every_deadline() {
    let r = sim_json("examples/per-app-reservation.toml", &[]);
    for t in ["T1", "T2", "T3"] {
        assert_eq!(misses(&r, t), 0, "{t}");
    }
    near("app %", pct(named(&r, "schedulers", "app")), 20.0, 0.5);
    near("background %", pct(thread(&r, "background")), 80.0, 0.5);
}

#[test]
fn hard_firm_soft_shares() {
    let r = sim_json("examples/hard-firm-soft.toml", &[]);
    near("T1 (hard) %", pct(thread(&r, "T1")), 20.0, 0.5);
    near("T2 (soft) %", pct(thread(&r, "T2")), 33.0, 2.0);
    near("T3 (firm) %", pct(thread(&r, "T3")), 40.0, 2.0);
    near("T4 %", pct(thread(&r, "T4")), 7.0, 1.5);
    // While T4 and T2 run (first 2 s), the firm reservation gets no extra.
    let early = sim_json("examples/hard-firm-soft.toml", &["--duration", "2s"]);
    near(
        "T3 (firm) % before 2 s",
        pct(thread(&early, "T3")),
        20.0,
        2.0,
    );
}

#[test]
fn web_servers_split_20_80() {
    let r = sim_json("examples/web-servers.toml", &[]);
    near("vs1 %", pct(named(&r, "principals", "vs1")), 20.0, 1.0);
    near("vs2 %", pct(named(&r, "principals", "vs2")), 80.0, 1.0);
    near("PS7 %", pct(named(&r, "schedulers", "PS7")), 70.0, 1.0);
    near("PS6 %", pct(named(&r, "schedulers", "PS6")), 10.0, 1.0);
}

#[test]
fn home_computer_keeps_its_promises() {
    let r = sim_json("examples/home-computer.toml", &[]);
    for t in ["T1", "T2", "T3"] {
        assert_eq!(misses(&r, t), 0, "{t}");
    }
    let ts1 = pct(named(&r, "schedulers", "TS1"));
    assert!(ts1 >= 30.0, "TS1 gets {ts1:.1}%, less than its PSBE 0.3");
    let t4 = pct(thread(&r, "T4"));
    let fenced = pct(thread(&r, "T5")) + pct(thread(&r, "T6"));
    near("T5 + T6 against T4", fenced, t4, 2.0);
}

#[test]
fn terminal_server_isolates_real_time_and_shows_the_loophole() {
    let r = sim_json("examples/terminal-server.toml", &[]);
    assert_eq!(misses(&r, "T3"), 0);
    near(
        "TS1 vs TS2",
        pct(named(&r, "schedulers", "TS1")),
        pct(named(&r, "schedulers", "TS2")),
        1.0,
    );
    assert!(pct(named(&r, "principals", "user1")) > pct(named(&r, "principals", "user2")) + 10.0);
}

#[test]
fn principal_isolation_reproduces_table_10_4() {
    let r = sim_json("examples/principal-isolation.toml", &[]);
    let p = |n: &str| pct(named(&r, "principals", n));
    near("flat-1", p("flat-1"), 10.0, 0.5);
    near("flat-2", p("flat-2"), 40.0, 0.5);
    near("iso-1", p("iso-1"), 25.0, 0.5);
    near("iso-2", p("iso-2"), 25.0, 0.5);
}

#[test]
fn frame_renderer_hard_and_soft() {
    let r = sim_json("examples/frame-renderer.toml", &[]);
    let hard = thread(&r, "hard");
    let soft = thread(&r, "soft");
    assert_eq!(hard["deadline_misses"], 0);
    assert_eq!(soft["deadline_misses"], 0);
    near("hard fps", hard["fps"].as_f64().unwrap(), 30.3, 1.0);
    assert!(
        soft["fps"].as_f64().unwrap() > 60.0,
        "soft fps {}",
        soft["fps"]
    );
}

#[test]
fn rtapp_example_and_workload_flag() {
    let r = sim_json("examples/rtapp-tasks.toml", &[]);
    assert_eq!(misses(&r, "video"), 0);
    assert_eq!(misses(&r, "audio"), 0);
    near(
        "build vs build-1",
        pct(thread(&r, "build")),
        pct(thread(&r, "build-1")),
        1.0,
    );
    // The same tasks given on the command line to another hierarchy join
    // its default scheduler.
    let o = sim_json(
        "examples/overview.toml",
        &[
            "--workload",
            "examples/rtapp-tasks.json",
            "--duration",
            "1s",
        ],
    );
    assert_eq!(thread(&o, "video")["scheduler"], "ts");
}

// Outputs.

#[test]
fn trace_and_gantt_files_are_written() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let trace = dir.join("walkthrough-trace.json");
    let svg = dir.join("hfs.svg");
    let o = run(&[
        "sim",
        "examples/hard-firm-soft.toml",
        "--duration",
        "3s",
        "--trace",
        trace.to_str().unwrap(),
        "--gantt",
        svg.to_str().unwrap(),
        "--window",
        "1.9s..2.2s",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let t: Value =
        serde_json::from_str(&std::fs::read_to_string(&trace).unwrap()).expect("the trace is JSON");
    let events = t
        .get("traceEvents")
        .and_then(Value::as_array)
        .or_else(|| t.as_array())
        .expect("trace events");
    assert!(events.len() > 100, "only {} trace events", events.len());
    // The window applies to the trace too: every event in 1.9–2.2 s.
    for e in events.iter().filter(|e| e["ph"] != "M") {
        let ts = e["ts"].as_f64().unwrap();
        let end = ts + e["dur"].as_f64().unwrap_or(0.0);
        assert!(ts >= 1.9e6 && end <= 2.2e6 + 1e-6, "{e}");
    }
    let chart = std::fs::read_to_string(&svg).unwrap();
    assert!(chart.starts_with("<svg"), "not an SVG");
    for t in ["T1", "T2", "T3", "T4"] {
        assert!(
            chart.contains(&format!(">{t}<")),
            "{t} missing from the chart"
        );
    }
    assert!(stdout(&o).contains("ui.perfetto.dev"));
}

// Errors: exit status 2, file:line:col, no crash.

fn broken(name: &str) -> String {
    format!("crates/cli/tests/broken/{name}")
}

#[test]
fn broken_files_give_status_2_and_a_located_message() {
    let cases = [
        ("unknown-key.toml", ":10:1", "capp"),
        ("no-unit.toml", ":10:57", "unit"),
        ("missing-parent.toml", ":9:10", "roto"),
        ("amount-over-period.toml", ":9:21", "period"),
        ("not-toml.toml", ":2:", "error"),
        ("bad-guarantee.toml", ":10:14", "RESBX"),
        ("join-one-parent.toml", ":6:1", "at least 2"),
        ("cycle.toml", ":14:10", "own ancestor"),
    ];
    for (file, at, word) in cases {
        let path = broken(file);
        for verb in ["check", "tree", "sim"] {
            let o = run(&[verb, &path]);
            assert_eq!(
                o.status.code(),
                Some(2),
                "hsched {verb} {file}: status {:?}\n{}",
                o.status,
                stderr(&o)
            );
            assert_no_crash(&o);
            let err = stderr(&o);
            assert!(
                err.contains(&format!("{path}{at}")),
                "hsched {verb} {file}: no `{path}{at}` in\n{err}"
            );
            assert!(
                err.contains(word),
                "hsched {verb} {file}: no `{word}` in\n{err}"
            );
            assert!(
                o.stdout.is_empty(),
                "hsched {verb} {file} printed on stdout"
            );
        }
    }
}

#[test]
fn a_hierarchy_without_threads_runs_idle_and_says_so() {
    let o = run(&["sim", "/dev/null", "--duration", "1s", "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(r["threads"], serde_json::json!([]));
    assert!(stderr(&o).contains("the machine idled"), "{}", stderr(&o));
    let o = run(&["sim", "examples/overview.toml", "--duration", "1s"]);
    assert!(!stderr(&o).contains("idled"), "{}", stderr(&o));
}

#[test]
fn a_missing_file_is_an_input_error() {
    let o = run(&["check", "no/such/file.toml"]);
    assert_eq!(o.status.code(), Some(2));
    assert_no_crash(&o);
    assert!(stderr(&o).contains("no/such/file.toml"));
}

#[test]
fn a_broken_workload_file_is_an_input_error() {
    let path = Path::new(env!("CARGO_TARGET_TMPDIR")).join("bad-rtapp.json");
    std::fs::write(&path, "{\"tasks\": {\"x\": {\"run\": \"abc\"}}}").unwrap();
    let o = run(&[
        "sim",
        "examples/overview.toml",
        "--workload",
        path.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert_no_crash(&o);
    assert!(stderr(&o).contains("bad-rtapp.json:1:"), "{}", stderr(&o));
}

#[test]
fn bad_command_lines_are_usage_errors() {
    let cases: &[&[&str]] = &[
        &[],
        &["frobnicate"],
        &["check"],
        &["sim", "examples/overview.toml", "--duration", "5"],
        &["sim", "examples/overview.toml", "--seed", "minus one"],
        &["sim", "examples/overview.toml", "--window", "1s..2s"],
        &[
            "sim",
            "examples/overview.toml",
            "--gantt",
            "x.svg",
            "--window",
            "2s..1s",
        ],
        &["policies", "no-such-policy"],
    ];
    for args in cases {
        let o = run(args);
        assert_eq!(
            o.status.code(),
            Some(2),
            "hsched {args:?}: status {:?}",
            o.status
        );
        assert_no_crash(&o);
        assert!(!stderr(&o).is_empty(), "hsched {args:?} said nothing");
    }
    let o = run(&[
        "sim",
        "examples/overview.toml",
        "--trace",
        "no/such/dir/t.json",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("cannot create"), "{}", stderr(&o));
    let o = run(&["sim", "examples/overview.toml", "--window", "1s..2s"]);
    assert!(stderr(&o).contains("neither was given"), "{}", stderr(&o));
    // A negative value reaches the option's own parser, which says what
    // the option takes, rather than being taken for an unknown flag.
    for (args, says) in [
        (
            &["sim", "examples/overview.toml", "--duration", "-1s"][..],
            "non-negative",
        ),
        (
            &["sim", "examples/overview.toml", "--seed", "-1"],
            "from 0 to",
        ),
        (
            &["sim", "examples/overview.toml", "--runs", "-2"],
            "from 1 to 10000",
        ),
        (
            &["analyze", "examples/overview.toml", "--tolerance", "-5"],
            "between 0 and 1000",
        ),
        (&["import", "x.trace", "--pid", "-3"], "whole number"),
    ] {
        let o = run(args);
        assert_eq!(o.status.code(), Some(2), "hsched {args:?}");
        assert!(stderr(&o).contains(says), "hsched {args:?}: {}", stderr(&o));
    }
}

#[test]
fn a_gantt_window_outside_the_run_is_refused_before_it() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let svg = dir.join("outside.svg");
    let _ = std::fs::remove_file(&svg);
    // overview.toml runs 10 s by default: a window at 20 s drew an empty
    // chart after the whole run.
    for extra in [
        &["--window", "20s..21s"][..],
        &["--duration", "1s", "--window", "1s..2s"],
    ] {
        let mut args = vec![
            "sim",
            "examples/overview.toml",
            "--gantt",
            svg.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        let o = run(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains("but the run ends at"), "{}", stderr(&o));
        assert!(stdout(&o).is_empty(), "{args:?} ran: {}", stdout(&o));
        assert!(!svg.exists(), "{args:?} left {}", svg.display());
    }
    let o = run(&["sim", "examples/overview.toml", "--duration", "0s"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("no time at all"), "{}", stderr(&o));
}

/// A hierarchy whose run fails at t = 0, after its outputs were started:
/// zero-length steps looped a finite number of times.
fn failing_run(name: &str) -> PathBuf {
    let file = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    std::fs::write(
        &file,
        "[[scheduler]]\nname = \"fp\"\npolicy = \"fp\"\n\n[[thread]]\nname = \"t\"\nscheduler = \"fp\"\nworkload = { kind = \"program\", steps = [{ run = \"0ms\" }], loops = 9223372036854775807 }\n",
    )
    .unwrap();
    file
}

#[test]
fn a_failed_run_leaves_no_cut_off_outputs() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let file = failing_run("zero-loops.toml");
    let trace = dir.join("cut-off.json");
    let svg = dir.join("cut-off.svg");
    let o = run(&[
        "sim",
        file.to_str().unwrap(),
        "--trace",
        trace.to_str().unwrap(),
        "--gantt",
        svg.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert_no_crash(&o);
    let err = stderr(&o);
    assert!(err.contains("without letting time pass"), "{err}");
    assert!(err.contains("removed the incomplete trace"), "{err}");
    assert!(!trace.exists() && !svg.exists(), "{err}");
}

#[test]
fn a_failed_run_ends_runs_with_its_seed() {
    let file = failing_run("zero-loops-runs.toml");
    let o = run(&["sim", file.to_str().unwrap(), "--runs", "4", "--seed", "9"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert_no_crash(&o);
    let err = stderr(&o);
    assert!(err.contains("the simulation with seed 9 failed"), "{err}");
    assert!(err.contains("without letting time pass"), "{err}");
    assert!(o.stdout.is_empty());
}

#[test]
fn a_failed_run_removes_only_regular_files() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let file = failing_run("zero-loops-link.toml");
    // A symbolic link named as the trace (as a device such as /dev/full
    // would be) is the user's, not a file the run made: it stays.
    let target = dir.join("link-target.json");
    let link = dir.join("trace-link.json");
    let _ = std::fs::remove_file(&link);
    std::fs::write(&target, "").unwrap();
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let o = run(&[
        "sim",
        file.to_str().unwrap(),
        "--trace",
        link.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(!err.contains("removed"), "{err}");
    assert!(
        std::fs::symlink_metadata(&link).unwrap().is_symlink(),
        "{err}"
    );
}

#[test]
fn sigterm_ends_a_run_inside_a_long_instant() {
    // At 1 ms, a thousand threads wake at once on 4096 processors under
    // `best`: one instant of a thousand wake-ups, tens of seconds here.
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let file = dir.join("long-instant.toml");
    std::fs::write(
        &file,
        "[machine]\ncpus = 4096\n\n[[scheduler]]\nname = \"BEST\"\npolicy = \"best\"\n\n\
         [[thread]]\nname = \"p\"\ncount = 1000\nscheduler = \"BEST\"\n\
         workload = { kind = \"periodic\", period = \"10ms\", exec = \"1ms\" }\n",
    )
    .unwrap();
    // A file, not a pipe: the report outgrows what a pipe holds unread.
    let report = dir.join("long-instant.txt");
    let mut child = hsched()
        .args(["sim", file.to_str().unwrap(), "--duration", "1s"])
        .stdout(std::fs::File::create(&report).unwrap())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_secs(2));
    assert!(child.try_wait().unwrap().is_none(), "hsched ended early");
    // SAFETY: kill(2) on our own child's pid, which it has not reaped.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
    let t0 = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if t0.elapsed().as_secs() >= 10 {
            let _ = child.kill();
            panic!("still running 10 s after SIGTERM");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(130), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("note: interrupted after"),
        "{}",
        stderr(&o)
    );
    let report = std::fs::read_to_string(&report).unwrap();
    assert!(report.contains("\np.999 "), "{report}");
}

#[test]
fn ctrl_c_ends_a_run_with_its_report_and_a_whole_trace() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let trace = dir.join("interrupted.json");
    let _ = std::fs::remove_file(&trace);
    let mut child = hsched()
        .current_dir(root())
        .args(["sim", "crates/sim/benches/four_level.toml"])
        .args(["--duration", "100min", "--json", "--trace"])
        .arg(&trace)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The trace's first block reaches the file once the run is under way;
    // the handler was installed before anything was written.
    let t0 = std::time::Instant::now();
    while std::fs::metadata(&trace).map_or(0, |m| m.len()) == 0 {
        assert!(child.try_wait().unwrap().is_none(), "hsched ended early");
        assert!(t0.elapsed().as_secs() < 60, "no trace after 60 s");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    // SAFETY: kill(2) on our own child's pid, which it has not reaped.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGINT) }, 0);
    let o = child.wait_with_output().unwrap();
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(130), "{err}");
    assert!(err.contains("note: interrupted after"), "{err}");
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(r["interrupted"], true);
    let d = r["duration_ns"].as_u64().unwrap();
    assert!(d > 0 && d < 6_000_000_000_000, "{d}");
    // The trace is whole: closed, and nothing in it after the end.
    let t: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&trace).unwrap()).expect("a complete trace");
    let last = t["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["ts"].as_f64())
        .fold(0.0, f64::max);
    assert!(
        last * 1e3 <= d as f64,
        "an event at {last} us, after {d} ns"
    );
}

#[test]
fn runs_summarize_the_reports_of_consecutive_seeds() {
    let file = "examples/home-computer.toml";
    let b = sim_json(file, &["--runs", "3", "--seed", "5", "--duration", "2s"]);
    assert_eq!(b["hsched_batch"], 1);
    assert_eq!(b["seeds"], serde_json::json!([5, 6, 7]));
    for (k, seed) in ["5", "6", "7"].into_iter().enumerate() {
        let alone = sim_json(file, &["--seed", seed, "--duration", "2s"]);
        assert_eq!(b["reports"][k], alone, "seed {seed}");
    }
    let t8 = b["threads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "T8")
        .unwrap();
    let misses: u64 = (0..3).map(|k| misses(&b["reports"][k], "T8")).sum();
    assert_eq!(t8["deadline_misses"]["total"], misses);
    // One worker or three: the same summary.
    for jobs in ["1", "3"] {
        let args = [
            "--runs",
            "3",
            "--seed",
            "5",
            "--duration",
            "2s",
            "--jobs",
            jobs,
        ];
        assert_eq!(sim_json(file, &args), b, "--jobs {jobs}");
    }
    let o = run(&["sim", file, "--runs", "2", "--duration", "1s"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).starts_with("2 runs of 1.000s"), "{}", stdout(&o));
    // Only the reports kept for `--json` need a temporary file.
    let no_tmp = |json: bool| {
        let mut c = hsched();
        c.current_dir(root())
            .args(["sim", file, "--runs", "2", "--duration", "1s"])
            .env("TMPDIR", root().join("no-such-dir"));
        if json {
            c.arg("--json");
        }
        c.output().unwrap()
    };
    let o = no_tmp(false);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(
        stdout(&o),
        stdout(&run(&["sim", file, "--runs", "2", "--duration", "1s"]))
    );
    let o = no_tmp(true);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("cannot summarize the runs"),
        "{}",
        stderr(&o)
    );
    assert_no_crash(&o);
    for bad in [
        &["--runs", "0"][..],
        &["--runs", "2", "--trace", "t.json"],
        &["--runs", "2", "--gantt", "g.svg"],
        &["--runs", "2", "--jobs", "0"],
        &["--jobs", "2"],
    ] {
        let o = run(&[&["sim", file][..], bad].concat());
        assert_eq!(o.status.code(), Some(2), "{bad:?}: {}", stderr(&o));
        assert_no_crash(&o);
    }
}

#[test]
fn ctrl_c_ends_runs_and_says_none_completed() {
    // 100 minutes of the benchmark take seconds: the run is under way
    // when the signal comes, and an interrupted run is not summarized.
    let mut child = hsched()
        .current_dir(root())
        .args(["sim", "crates/sim/benches/four_level.toml", "--runs", "1"])
        .args(["--duration", "100min", "--json"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(500));
    assert!(child.try_wait().unwrap().is_none(), "hsched ended early");
    // SAFETY: kill(2) on our own child's pid, which it has not reaped.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGINT) }, 0);
    let o = child.wait_with_output().unwrap();
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(130), "{err}");
    assert!(
        err.contains("interrupted before any of the 1 runs"),
        "{err}"
    );
    assert!(o.stdout.is_empty());
}

#[test]
fn a_tie_among_many_threads_is_checked_in_linear_time() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let file = dir.join("many-tied.toml");
    // 100 000 threads (the documented limit) at one priority: every thread
    // is refused a guarantee, and as none asks for one that is one note.
    // Each once listed all the others (N² output, tens of gigabytes) and
    // the problems were located by linear searches.
    std::fs::write(
        &file,
        "[[scheduler]]\nname = \"root\"\npolicy = \"fp\"\n\n[[thread]]\nname = \"t\"\nscheduler = \"root\"\ncount = 100000\nparams = { priority = 1 }\nworkload = { kind = \"cpu-bound\" }\n",
    )
    .unwrap();
    for verb in ["check", "tree", "analyze"] {
        let o = run(&[verb, file.to_str().unwrap()]);
        assert_no_crash(&o);
        let out = stdout(&o);
        assert!(
            out.len() < 100 * 1024 * 1024,
            "{verb}: {} bytes of output",
            out.len()
        );
        let capped = match verb {
            "tree" => "refuses t.0, t.1, t.2, t.3, t.4, t.5, t.6, t.7 and 99992 more",
            "check" => "`t.6`, `t.7` and 99992 more share a priority with a sibling under `fp`",
            _ => "'t.8' and 99991 more",
        };
        assert_eq!(o.status.code(), Some(0), "{verb}");
        assert!(
            out.contains(capped),
            "{verb}: {}",
            &out[..out.len().min(2000)]
        );
    }
}

#[test]
fn analyze_bounds_the_search_for_large_applications() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let file = dir.join("large-rm.toml");
    // 201 periodic threads under a reservation: the ghost-task search
    // (thousands of response-time analyses) grew with the cube of the
    // threads; 2 000 ran for a quarter of an hour.
    let mut text = String::from(
        "[[scheduler]]\nname = \"fp\"\npolicy = \"fp\"\n\n[[scheduler]]\nname = \"rez\"\npolicy = \"rez\"\nparent = \"fp\"\ncap = 1\n\n[[scheduler]]\nname = \"rm\"\npolicy = \"fp\"\nparent = \"rez\"\nparams = { amount = \"5ms\", period = \"10ms\" }\n",
    );
    for i in 0..201 {
        text.push_str(&format!(
            "\n[[thread]]\nname = \"t{i}\"\nscheduler = \"rm\"\nparams = {{ priority = {} }}\nworkload = {{ kind = \"periodic\", period = \"{}ms\", exec = \"10us\" }}\n",
            201 - i,
            10 + i
        ));
    }
    std::fs::write(&file, text).unwrap();
    let o = run(&["analyze", file.to_str().unwrap()]);
    assert_no_crash(&o);
    let out = stdout(&o);
    assert!(
        out.contains("no reservation searched (§6.1.2): 201 threads, more than the 200"),
        "{out}"
    );
    let svg = dir.join("large-rm.svg");
    let o = run(&[
        "analyze",
        file.to_str().unwrap(),
        "--svg",
        svg.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("more than the 200"), "{}", stderr(&o));
    assert!(stdout(&o).is_empty());
}

#[test]
fn a_closed_stdout_is_not_a_crash() {
    let mut child = hsched()
        .current_dir(root())
        .args(["policies"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(0));
    assert_no_crash(&o);
}

/// Runs `hsched ARGS` with stderr a pipe whose reader has gone, as after
/// `2>&1 | head` once head has exited.
fn run_with_closed_stderr(args: &[&str]) -> Output {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    hsched()
        .current_dir(root())
        .args(args)
        .stdout(Stdio::piped())
        .stderr(writer)
        .output()
        .unwrap()
}

#[test]
fn a_closed_stderr_is_not_a_crash() {
    // An error (`eprintln!` would panic, then panic again in the hook and
    // abort) and a note after a complete report.
    let o = run_with_closed_stderr(&["check", "no/such/file.toml"]);
    assert_eq!(o.status.code(), Some(2), "{:?}", o.status);
    let idle = Path::new(env!("CARGO_TARGET_TMPDIR")).join("no-threads.toml");
    std::fs::write(
        &idle,
        "[machine]\ncpus = 1\n\n[[scheduler]]\nname = \"ts\"\npolicy = \"ts\"\n",
    )
    .unwrap();
    let o = run_with_closed_stderr(&["sim", idle.to_str().unwrap(), "--duration", "10ms"]);
    assert_eq!(o.status.code(), Some(0), "{:?}", o.status);
    assert!(stdout(&o).contains("simulated 0.010s"), "{}", stdout(&o));
}

// Help.

#[test]
fn every_verb_has_help_with_examples() {
    let top = run(&["--help"]);
    assert!(top.status.success());
    let text = stdout(&top);
    assert!(text.contains("Exit status:"), "{text}");
    for verb in ["check", "tree", "sim", "record", "import", "policies"] {
        assert!(text.contains(verb), "--help does not list {verb}");
        for flag in ["-h", "--help"] {
            let o = run(&[verb, flag]);
            assert!(o.status.success(), "hsched {verb} {flag}");
            let h = stdout(&o);
            assert!(
                h.contains(&format!("Usage: hsched {verb}")),
                "{verb} {flag}:\n{h}"
            );
            assert!(
                h.contains("Examples:\n  hsched ") || h.contains("Examples:\n  sudo hsched "),
                "{verb} {flag} has no examples:\n{h}"
            );
        }
        assert!(stdout(&run(&[verb, "--help"])).contains("Exit status:"));
    }
    let sim = stdout(&run(&["sim", "--help"]));
    for flag in [
        "--workload",
        "--duration",
        "--seed",
        "--json",
        "--trace",
        "--gantt",
        "--window",
        "--check-protocol",
    ] {
        assert!(sim.contains(flag), "sim --help does not mention {flag}");
    }
}

#[test]
fn policies_lists_the_registry() {
    let o = run(&["policies"]);
    assert!(o.status.success());
    let text = stdout(&o);
    for p in hsched_policies::registry() {
        assert!(
            text.contains(&format!("\n{}  ", p.name)),
            "{} missing",
            p.name
        );
    }
    let one = stdout(&run(&["policies", "rez"]));
    assert!(
        one.contains("\nrez  ") && one.contains("amount") && !one.contains("\nfp  "),
        "{one}"
    );
}

// The README shows real output; it must stay true.

/// The output block the README shows right after the shell block `cmds`.
fn readme_output_after(readme: &str, cmds: &str) -> String {
    let opening = format!("```sh\n{cmds}\n```\n\n```\n");
    let start = readme
        .find(&opening)
        .unwrap_or_else(|| panic!("README has no block\n{cmds}"))
        + opening.len();
    let len = readme[start..]
        .find("\n```")
        .expect("the output block ends");
    readme[start..start + len].to_string()
}

fn output_text(o: &Output) -> String {
    format!("{}{}", stdout(o), stderr(o)).trim_end().to_string()
}

#[test]
fn readme_outputs_are_current() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    for cmd in [
        "hsched check examples/home-computer.toml",
        "hsched tree examples/home-computer.toml",
    ] {
        let args: Vec<&str> = cmd.split_whitespace().skip(1).collect();
        let shown = readme_output_after(&readme, cmd);
        let o = run(&args);
        assert!(o.status.success(), "{cmd}: {}", stderr(&o));
        assert_eq!(
            output_text(&o),
            shown,
            "README.md shows outdated output for `{cmd}`"
        );
    }
    // The report's numbers move with the simulator and the policies; its
    // shape (the rows and the columns) must be what the README shows.
    let cmd = "hsched sim examples/home-computer.toml --duration 5s";
    let shown = readme_output_after(&readme, cmd);
    let o = run(&cmd.split_whitespace().skip(1).collect::<Vec<_>>());
    assert!(o.status.success(), "{cmd}: {}", stderr(&o));
    let shape = |text: &str| -> Vec<String> {
        text.lines()
            .map(|l| l.split_whitespace().next().unwrap_or("").to_string())
            .collect()
    };
    let got = output_text(&o);
    assert_eq!(
        shape(&got),
        shape(&shown),
        "README.md shows a report of another shape than `{cmd}`:\n{got}"
    );
    assert_eq!(
        got.lines().nth(2),
        shown.lines().nth(2),
        "the report's columns changed"
    );
    // The broken-file example, made the way the README says.
    let sed =
        "sed 's/amount = \"1ms\"/amount = \"12ms\"/' examples/home-computer.toml > broken.toml";
    let shown = readme_output_after(&readme, &format!("{sed}\nhsched check broken.toml"));
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("readme");
    std::fs::create_dir_all(&dir).unwrap();
    let text = std::fs::read_to_string(root().join("examples/home-computer.toml")).unwrap();
    assert_eq!(
        text.matches("amount = \"1ms\"").count(),
        1,
        "the README's sed would change more than one line"
    );
    std::fs::write(
        dir.join("broken.toml"),
        text.replace("amount = \"1ms\"", "amount = \"12ms\""),
    )
    .unwrap();
    let o = hsched()
        .current_dir(&dir)
        .args(["check", "broken.toml"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(
        output_text(&o),
        shown,
        "README.md shows an outdated error message"
    );
}

#[test]
fn the_pipeline_example_keeps_its_queue_half_full_under_realrate() {
    let r = sim_json("examples/pipeline.toml", &[]);
    // The producer's reservation is untouched: 20 % of the CPU.
    near("producer %", pct(thread(&r, "producer")), 20.0, 0.05);
    // The consumer keeps up: it consumed all but the items in flight.
    let made = thread(&r, "producer")["jobs"].as_u64().unwrap();
    let used = thread(&r, "consumer")["jobs"].as_u64().unwrap();
    assert!(made >= used && made - used <= 64, "{made} {used}");
    near("consumer %", pct(thread(&r, "consumer")), 30.0, 2.0);
    let q = named(&r, "queues", "q");
    near(
        "mean fill %",
        q["mean_fill"].as_f64().unwrap() * 100.0,
        50.0,
        10.0,
    );
    assert!(q["min_fill"].as_u64().unwrap() > 0 && q["max_fill"].as_u64().unwrap() < 64);
    assert_eq!(misses(&r, "audio"), 0);
    for t in ["producer", "consumer"] {
        assert!(thread(&r, t)["messages_sent"].as_u64().unwrap() >= 1199);
        assert_eq!(thread(&r, t)["messages_refused"], 0);
    }
    // The analysis: reservations for the real-time threads, NULL for the
    // real-rate consumer; a request the reservation cannot meet is named.
    let tree = stdout(&run(&["tree", "examples/pipeline.toml"]));
    assert!(tree.contains("gets RESBH 2 10"), "{tree}");
    assert!(tree.contains("gets RESBH 0.5 5"), "{tree}");
    assert!(
        tree.contains("consumer") && tree.contains("gets NULL"),
        "{tree}"
    );
    let text = std::fs::read_to_string(root().join("examples/pipeline.toml"))
        .unwrap()
        .replace("guarantee = \"RESBH 0.5 5\"", "guarantee = \"RESBH 1 5\"");
    let dir = std::env::temp_dir().join(format!("hsched-cli-rr-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("pipeline.toml");
    std::fs::write(&f, text).unwrap();
    let o = run(&["check", f.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    let all = format!("{}{}", stdout(&o), stderr(&o));
    assert!(
        all.contains("audio") && all.contains("RESBH 0.5 5"),
        "{all}"
    );
}

#[test]
fn cooperative_players_are_several_times_more_timely_than_time_shared_ones() {
    let r = sim_json("examples/coop-players.toml", &[]);
    let worst = |prefix: &str| {
        r["threads"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| t["name"].as_str().unwrap().starts_with(prefix))
            .map(|t| t["max_tardiness_ns"].as_u64().unwrap())
            .max()
            .unwrap() as f64
            / 1e6
    };
    let (coop, plain) = (worst("coop."), worst("plain."));
    assert!(coop < 10.0, "coop worst tardiness {coop} ms");
    assert!(plain > 80.0, "ts worst tardiness {plain} ms");
    for k in 0..5 {
        let c = thread(&r, &format!("coop.{k}"));
        assert!(c["messages_sent"].as_u64().unwrap() > 100, "{c}");
        let p = thread(&r, &format!("plain.{k}"));
        assert_eq!(p["messages_sent"], 0);
        for t in [c, p] {
            let fps = t["fps"].as_f64().unwrap();
            assert!((12.0..24.1).contains(&fps), "{t}");
        }
    }
    near(
        "coop group %",
        pct(named(&r, "schedulers", "coop")),
        50.0,
        0.5,
    );
}

const TRACE: &str = "examples/traces/busy-sleep.trace";

#[test]
fn import_lists_the_threads_of_a_trace() {
    let o = run(&["import", TRACE]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    // The recorded program: 100 rounds of 2 ms of CPU and 8 ms of sleep
    // after starting up, seen as 115 bursts.
    let line = out
        .lines()
        .find(|l| l.contains(" python3 "))
        .unwrap_or_else(|| panic!("no python3 in the listing:\n{out}"));
    let cols: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(
        cols[..4],
        ["17463", "python3", "115", "290.529ms"],
        "{line}"
    );
}

#[test]
fn an_imported_trace_replays_its_recorded_cpu_time() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("import");
    std::fs::create_dir_all(&dir).unwrap();
    let json = dir.join("py.json");
    let o = run(&[
        "import",
        TRACE,
        "--comm",
        "python3",
        "-o",
        json.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("imported python3-17463: 115 bursts"));
    // Alone under time sharing, replayed once: the recorded CPU time to
    // the microsecond, spread over about the recorded 1.17 s.
    let r = sim_json(
        "examples/rtapp-tasks.toml",
        &["--workload", json.to_str().unwrap(), "--duration", "3s"],
    );
    let t = thread(&r, "python3-17463");
    let cpu = t["cpu_ns"].as_u64().unwrap();
    assert!(cpu.abs_diff(290_529_000) <= 1_000, "replayed {cpu} ns");
    assert_eq!(t["jobs"].as_u64(), Some(1));
}

#[test]
fn import_warns_of_a_jump_in_the_trace_clock() {
    let o = run(&["import", TRACE]);
    assert!(!stderr(&o).contains("warning"), "{}", stderr(&o));
    // The last switch-out of python3, mistyped 1000 s late.
    let text = std::fs::read_to_string(root().join(TRACE)).unwrap();
    assert!(text.contains("15356.305990:"));
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("import");
    std::fs::create_dir_all(&dir).unwrap();
    let jump = dir.join("jump.trace");
    std::fs::write(&jump, text.replace("15356.305990:", "16356.305990:")).unwrap();
    let json = dir.join("jump.json");
    let args = ["import", jump.to_str().unwrap(), "--comm", "python3", "-o"];
    let o = run(&[&args[..], &[json.to_str().unwrap()]].concat());
    assert!(o.status.success(), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("has no event for 1000.014s between lines 308 and 309"),
        "{err}"
    );
    assert!(err.contains("python3-17463 are charged all of it"), "{err}");
}

#[test]
fn import_refuses_what_it_cannot_read_or_find() {
    let o = run(&["import", TRACE, "--pid", "1"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("thread 1 does not run in"),
        "{}",
        stderr(&o)
    );
    let o = run(&["import", TRACE, "--comm", "nosuch"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("names in the trace:"), "{}", stderr(&o));
    // A hierarchy file is not a trace.
    let o = run(&["import", "examples/overview.toml"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("no sched_switch or sched_wakeup event"),
        "{}",
        stderr(&o)
    );
    assert_no_crash(&o);
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("import");
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad.trace");
    std::fs::write(
        &bad,
        "a-1 [000] d..2. 1.5: sched_wakeup: comm=a pid=x prio=120\n",
    )
    .unwrap();
    let o = run(&["import", bad.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    assert!(err.contains("bad.trace:1:"), "{err}");
    assert!(err.contains("`x` is not a thread id"), "{err}");
    assert_no_crash(&o);
    // An output in a directory that does not exist is a bad path on the
    // command line, as for `sim --trace`.
    let missing = dir.join("no-such-dir").join("py.json");
    let o = run(&[
        "import",
        TRACE,
        "--comm",
        "python3",
        "-o",
        missing.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("cannot write"), "{}", stderr(&o));
    assert_no_crash(&o);
}

#[test]
fn stolen_refuses_options_its_form_does_not_take() {
    // Checked before anything runs (and before the root check), so a typo
    // never starts a whole measurement on a default.
    for args in [
        &["stolen", "--irq-overhed", "5us"][..],
        &["stolen", "rez", "--reserve", "4ms/20ms"],
        &["stolen", "app", "--cpu"],
    ] {
        let o = run(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        let e = stderr(&o);
        assert!(
            e.starts_with("hsched stolen: ")
                && (e.contains("unknown option")
                    || e.contains("not take")
                    || e.contains("needs a value")),
            "{args:?}: {e}"
        );
    }
}

#[test]
fn tree_and_check_show_thread_rules() {
    let f = "examples/rules-live.toml";
    let tree = stdout(&run(&["tree", f]));
    assert!(
        tree.contains("new threads of managed programs (live mode), first match:")
            && tree.contains("  any thread of `yes` -> rez  amount=5ms period=50ms"),
        "{tree}"
    );
    let check = stdout(&run(&["check", f]));
    assert!(check.contains("1 thread rule"), "{check}");
}

/// A fresh directory of its own under the test target's temporary one.
fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn an_output_never_overwrites_an_input_or_another_output() {
    let dir = scratch("same-file");
    for f in [
        "examples/overview.toml",
        "examples/rtapp-tasks.toml",
        "examples/rtapp-tasks.json",
        "examples/media-player.toml",
        "examples/traces/busy-sleep.trace",
    ] {
        let from = root().join(f);
        std::fs::copy(&from, dir.join(from.file_name().unwrap())).unwrap();
    }
    std::os::unix::fs::symlink("overview.toml", dir.join("link.toml")).unwrap();
    let in_dir = |args: &[&str]| {
        hsched()
            .current_dir(&dir)
            .args(args)
            .output()
            .expect("hsched runs")
    };
    let short = ["--duration", "100ms"];
    for (args, options) in [
        (
            &["sim", "overview.toml", "--trace", "overview.toml"][..],
            ["--trace", "FILE"],
        ),
        (
            &["sim", "overview.toml", "--gantt", "./link.toml"],
            ["--gantt", "FILE"],
        ),
        (
            &[
                "sim",
                "rtapp-tasks.toml",
                "--workload",
                "rtapp-tasks.json",
                "--trace",
                "rtapp-tasks.json",
            ],
            ["--trace", "--workload"],
        ),
        (
            &["sim", "rtapp-tasks.toml", "--gantt", "rtapp-tasks.json"],
            ["--gantt", "FILE's rt-app file"],
        ),
        (
            &[
                "sim",
                "overview.toml",
                "--trace",
                "out.x",
                "--gantt",
                "./out.x",
            ],
            ["--gantt", "--trace"],
        ),
        (
            &["analyze", "media-player.toml", "--svg", "media-player.toml"],
            ["--svg", "FILE"],
        ),
        (
            &[
                "analyze",
                "media-player.toml",
                "--svg",
                "fig.x",
                "--csv",
                "fig.x",
            ],
            ["--csv", "--svg"],
        ),
        (
            &[
                "import",
                "busy-sleep.trace",
                "--comm",
                "python3",
                "-o",
                "busy-sleep.trace",
            ],
            ["--output", "TRACE"],
        ),
    ] {
        let before: Vec<Vec<u8>> = [
            "overview.toml",
            "rtapp-tasks.json",
            "media-player.toml",
            "busy-sleep.trace",
        ]
        .iter()
        .map(|f| std::fs::read(dir.join(f)).unwrap())
        .collect();
        let args = if args[0] == "sim" {
            [args, &short[..]].concat()
        } else {
            args.to_vec()
        };
        let o = in_dir(&args);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.starts_with(&format!(
                "error: {} and {} both name",
                options[0], options[1]
            )),
            "{args:?}: {err}"
        );
        assert_no_crash(&o);
        for (k, f) in [
            "overview.toml",
            "rtapp-tasks.json",
            "media-player.toml",
            "busy-sleep.trace",
        ]
        .iter()
        .enumerate()
        {
            assert_eq!(
                std::fs::read(dir.join(f)).unwrap(),
                before[k],
                "{args:?} changed {f}"
            );
        }
        for new in ["out.x", "fig.x"] {
            assert!(!dir.join(new).exists(), "{args:?} created {new}");
        }
    }
    // Devices may be named twice; `-` is standard output only for import,
    // whose output goes there anyway.
    let o = in_dir(&[
        "sim",
        "overview.toml",
        "--duration",
        "100ms",
        "--trace",
        "/dev/null",
        "--gantt",
        "/dev/null",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    for args in [
        &["sim", "overview.toml", "--trace", "-"][..],
        &["analyze", "media-player.toml", "--csv", "-"],
    ] {
        let o = in_dir(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(
            stderr(&o).contains("`-` would be standard output"),
            "{}",
            stderr(&o)
        );
        assert!(!dir.join("-").exists());
    }
    let o = in_dir(&["import", "busy-sleep.trace", "--comm", "python3", "-o", "-"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).starts_with('{') && !dir.join("-").exists());
}

#[test]
fn workload_replaces_the_files_own_rt_app_file_unread() {
    let dir = scratch("workload-replaces");
    let toml = "default = \"ts\"\n[workload]\nrtapp = \"does-not-exist.json\"\n[[scheduler]]\nname = \"ts\"\npolicy = \"ts\"\n";
    std::fs::write(dir.join("h.toml"), toml).unwrap();
    let h = dir.join("h.toml");
    let json = root().join("examples/rtapp-tasks.json");
    let o = run(&[
        "sim",
        h.to_str().unwrap(),
        "--workload",
        json.to_str().unwrap(),
        "--duration",
        "1s",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).contains("\nvideo "), "{}", stdout(&o));
    // The same as a file that names that workload itself.
    std::fs::write(
        dir.join("h2.toml"),
        toml.replace("does-not-exist.json", json.to_str().unwrap()),
    )
    .unwrap();
    let named = run(&[
        "sim",
        dir.join("h2.toml").to_str().unwrap(),
        "--duration",
        "1s",
        "--json",
    ]);
    let given = run(&[
        "sim",
        h.to_str().unwrap(),
        "--workload",
        json.to_str().unwrap(),
        "--duration",
        "1s",
        "--json",
    ]);
    let strip = |o: &Output| {
        stdout(o)
            .lines()
            .filter(|l| !l.contains("\"file\""))
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert_eq!(strip(&named), strip(&given));
    // Without --workload the file's own is read, and missing.
    let o = run(&["sim", h.to_str().unwrap(), "--duration", "1s"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("does-not-exist.json"), "{}", stderr(&o));
}

#[test]
fn a_refused_workload_task_is_reported_in_the_workload_file() {
    let dir = scratch("workload-refused");
    let toml = "default = \"root\"\n[[scheduler]]\nname = \"root\"\npolicy = \"fp\"\nunique_priorities = true\n\n[[thread]]\nname = \"x\"\nparams = { priority = 10 }\nworkload = { kind = \"cpu-bound\" }\n";
    std::fs::write(dir.join("h.toml"), toml).unwrap();
    let json =
        "{\n\t\"tasks\" : {\n\t\t\"b\" : { \"policy\" : \"SCHED_FIFO\", \"run\" : 1000 }\n\t}\n}\n";
    std::fs::write(dir.join("w.json"), json).unwrap();
    let w = dir.join("w.json");
    let o = run(&[
        "sim",
        dir.join("h.toml").to_str().unwrap(),
        "--workload",
        w.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let want = format!(" --> {}:3:3\n  |\n3 |         \"b\" : {{", w.display());
    assert!(
        stderr(&o).contains("priority 10 is taken by thread `x`"),
        "{}",
        stderr(&o)
    );
    assert!(stderr(&o).contains(&want), "{}", stderr(&o));
}

#[test]
fn check_refuses_an_rtapp_thread_without_its_task_as_sim_does() {
    let dir = scratch("check-rtapp");
    let toml = "default = \"ts\"\n[[scheduler]]\nname = \"ts\"\npolicy = \"ts\"\n\n[[thread]]\nname = \"v\"\nscheduler = \"ts\"\nrtapp = \"video\"\n\n[[thread]]\nname = \"live\"\nscheduler = \"ts\"\nexec = [\"true\"]\n";
    let h = dir.join("h.toml");
    std::fs::write(&h, toml).unwrap();
    let check = run(&["check", h.to_str().unwrap()]);
    let sim = run(&["sim", h.to_str().unwrap(), "--duration", "1s"]);
    assert_eq!(check.status.code(), Some(2), "{}", stdout(&check));
    assert!(
        stderr(&check).contains("thread `v` has `rtapp = \"video\"`, but no rt-app file is given"),
        "{}",
        stderr(&check)
    );
    // Only that error: a thread with just `exec` is valid for live mode.
    assert!(!stderr(&check).contains("`live`"), "{}", stderr(&check));
    assert!(
        stderr(&sim).starts_with(&stderr(&check)),
        "{}",
        stderr(&sim)
    );
    // With the workload, as `sim --workload` reads it, the file checks.
    let json = root().join("examples/rtapp-tasks.json");
    let o = run(&[
        "check",
        h.to_str().unwrap(),
        "--workload",
        json.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}

#[test]
fn a_full_output_names_what_was_written_and_exits_2() {
    let full = || {
        std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap()
    };
    let cases: &[(&[&str], &str)] = &[
        (
            &["sim", "examples/home-computer.toml", "--duration", "1s"],
            "writing the report to standard output",
        ),
        (
            &[
                "sim",
                "examples/home-computer.toml",
                "--duration",
                "1s",
                "--json",
            ],
            "writing the report to standard output",
        ),
        (
            &["check", "examples/home-computer.toml"],
            "writing the report to standard output",
        ),
        (
            &["tree", "examples/home-computer.toml"],
            "writing the report to standard output",
        ),
        (
            &["analyze", "examples/media-player.toml"],
            "writing the report to standard output",
        ),
        (&["policies"], "writing the report to standard output"),
        // The live tools write through `hsched_linux::out::print_stdout`.
        (&["stolen", "help"], "writing the report to standard output"),
        (
            &[
                "sim",
                "examples/home-computer.toml",
                "--duration",
                "1s",
                "--trace",
                "/dev/full",
            ],
            "writing the trace to `/dev/full`",
        ),
        (
            &[
                "sim",
                "examples/home-computer.toml",
                "--duration",
                "1s",
                "--gantt",
                "/dev/full",
            ],
            "writing the Gantt chart to `/dev/full`",
        ),
        (
            &[
                "analyze",
                "examples/media-player.toml",
                "--csv",
                "/dev/full",
            ],
            "cannot write `/dev/full`",
        ),
    ];
    for (args, what) in cases {
        // A file named `/dev/full` is written with the report going nowhere.
        let stdout = if args.contains(&"/dev/full") {
            Stdio::null()
        } else {
            full().into()
        };
        let o = hsched()
            .current_dir(root())
            .args(*args)
            .stdout(stdout)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        let err = stderr(&o);
        assert!(err.contains(what), "{args:?}: {err}");
        assert!(err.contains("No space left on device"), "{args:?}: {err}");
    }
}

#[test]
fn a_signal_while_the_files_load_ends_hsched_at_once() {
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::OpenOptionsExt;
    use std::os::unix::process::ExitStatusExt;
    let dir = scratch("signal-loading");
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // A pipe as the hierarchy file: hsched reads it until the writer
        // closes it, however long that is.
        let fifo = dir.join(format!("h-{sig}.toml"));
        let c = std::ffi::CString::new(fifo.as_os_str().as_bytes()).unwrap();
        // SAFETY: a NUL-terminated path that outlives the call.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let mut child = hsched()
            .args(["sim", fifo.to_str().unwrap(), "--duration", "1s"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Opening the writing end succeeds once hsched has opened the
        // reading end: it is loading the file.
        let t0 = std::time::Instant::now();
        let writer = loop {
            match std::fs::OpenOptions::new()
                .write(true)
                .custom_flags(libc::O_NONBLOCK)
                .open(&fifo)
            {
                Ok(w) => break w,
                Err(_) => {
                    assert!(child.try_wait().unwrap().is_none(), "hsched ended early");
                    assert!(t0.elapsed().as_secs() < 30, "hsched never opened the file");
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
            }
        };
        // SAFETY: kill(2) on our own child's pid, which it has not reaped.
        assert_eq!(unsafe { libc::kill(child.id() as i32, sig) }, 0);
        let t0 = std::time::Instant::now();
        let status = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break Some(s);
            }
            if t0.elapsed().as_secs() >= 5 {
                break None;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        };
        if status.is_none() {
            let _ = child.kill();
        }
        drop(writer);
        let o = child.wait_with_output().unwrap();
        assert_eq!(status.and_then(|s| s.signal()), Some(sig), "{}", stderr(&o));
        assert_eq!(o.status.signal(), Some(sig));
    }
}

/// `hsched run --compare` (root, live mode): the measured report, then the
/// simulator's run of the same file for as long, program by program. Only
/// the shape and the simulated side are checked: the measured side is the
/// live tests' business (crates/linux/tests/live.rs).
#[test]
fn run_compare_puts_the_simulation_beside_the_measurement() {
    let _turn = live_turn();
    if let Err(e) = hsched_linux::check_support() {
        eprintln!("SKIPPED: {e}");
        return;
    }
    // As the live tests do: wait while another daemon manages a CPU, and
    // hold the CPUs for the daemon this test starts.
    let cpus = hsched_linux::sys::online_cpus();
    let _locks = hsched_linux::cpulock::CpuLocks::acquire_wait(
        &cpus,
        hsched_linux::cpulock::Sharing::WithChildren,
        std::time::Duration::from_secs(120),
    )
    .expect("the CPUs, within 2 minutes");
    let cpu = cpus.last().unwrap().to_string();
    let f = "crates/cli/tests/compare.toml";
    let base = ["run", f, "--cpus", &cpu, "--duration", "500ms"];
    let o = run(&[&base[..], &["--compare", "--json"]].concat());
    assert!(o.status.success(), "{}", stderr(&o));
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(r["mode"], "live");
    let c = &r["compare"];
    assert_eq!(c["duration_ns"], r["duration_ns"]);
    let rows = c["rows"].as_array().unwrap();
    let names: Vec<&str> = rows.iter().map(|x| x["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["video", "hog"], "{c}");
    let video = &rows[0];
    assert!(
        (video["sim"]["share"].as_f64().unwrap() - 0.2).abs() < 0.01,
        "{c}"
    );
    assert_eq!(video["sim"]["deadline_misses"], 0, "{c}");
    assert!(video["live"]["jobs"].as_u64().unwrap() > 0, "{c}");
    assert_eq!(rows[1]["sim"]["jobs"], Value::Null, "{c}");
    let o = run(&[&base[..], &["--compare"]].concat());
    assert!(o.status.success(), "{}", stderr(&o));
    let t = stdout(&o);
    assert!(
        t.contains("compared with the simulator (same file, 0.5"),
        "{t}"
    );
}

/// `hsched run --enforce kernel --compare` (root, `SCHED_DEADLINE`): the
/// simulated side is the file as the kernel enforces it, the `rez` as
/// global EDF over deadline servers (`dl`), and says so; a periodic thread
/// within its server gets the same share on both sides.
#[test]
fn run_compare_under_the_kernel_backend_simulates_the_kernel_enforcement() {
    let _turn = live_turn();
    if hsched_linux::sys::geteuid() != 0
        || !Path::new("/proc/sys/kernel/sched_rt_runtime_us").exists()
        || hsched_linux::kernel::apply::cpu_mount().is_none()
    {
        eprintln!("SKIPPED: the kernel backend needs root, SCHED_DEADLINE and a cpu cgroup");
        return;
    }
    let cpus = hsched_linux::sys::online_cpus();
    let _locks = hsched_linux::cpulock::CpuLocks::acquire_wait(
        &cpus,
        hsched_linux::cpulock::Sharing::WithChildren,
        std::time::Duration::from_secs(120),
    )
    .expect("the CPUs, within 2 minutes");
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("kernel-compare");
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("k.toml");
    std::fs::write(
        &f,
        format!(
            r#"[machine]
cpus = {}
[[scheduler]]
name = "fp"
policy = "fp"
[[scheduler]]
name = "res"
policy = "rez"
parent = "fp"
params = {{ priority = 2 }}
[[scheduler]]
name = "ts"
policy = "ts"
parent = "fp"
params = {{ priority = 1 }}
[[thread]]
name = "rt"
scheduler = "res"
params = {{ amount = "3ms", period = "10ms" }}
workload = {{ kind = "periodic", period = "10ms", exec = "2ms" }}
[[thread]]
name = "hog"
scheduler = "ts"
workload = {{ kind = "cpu-bound" }}
"#,
            cpus.len()
        ),
    )
    .unwrap();
    let f = f.to_str().unwrap();
    let o = run(&[
        "run",
        f,
        "--enforce",
        "kernel",
        "--duration",
        "1s",
        "--no-socket",
        "--compare",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    let c = &r["compare"];
    let model = c["model"].as_array().unwrap();
    assert!(
        model[0]
            .as_str()
            .unwrap()
            .contains("each `rez` and `dl` as `dl`"),
        "{c}"
    );
    let rows = c["rows"].as_array().unwrap();
    let rt = rows.iter().find(|x| x["name"] == "rt").unwrap();
    let want = 0.2 / cpus.len() as f64;
    let sim = rt["sim"]["share"].as_f64().unwrap();
    assert!((sim - want).abs() < 0.005, "{c}");
    assert_eq!(rt["sim"]["deadline_misses"], 0, "{c}");
    let live = rt["live"]["share"].as_f64().unwrap();
    assert!((live - sim).abs() < 0.03, "{c}");
    assert!(rt["live"]["jobs"].as_u64().unwrap() > 50, "{c}");
}

/// A trace of one thread per name, each woken, switched in, blocked and
/// woken again at `times` (seconds, as the trace writes them).
fn trace_of(names: &[&str], times: [&str; 4]) -> String {
    let mut text = String::new();
    for (k, name) in names.iter().enumerate() {
        let pid = 100 + k;
        let [wake, run, block, again] = times;
        text.push_str(&format!(
            "x-1 [000] d..2. {wake}: sched_wakeup: comm={name} pid={pid} prio=120\n\
             x-1 [000] d..2. {run}: sched_switch: prev_comm=x prev_pid=1 prev_prio=120 prev_state=S ==> next_comm={name} next_pid={pid} next_prio=120\n\
             x-1 [000] d..2. {block}: sched_switch: prev_comm={name} prev_pid={pid} prev_prio=120 prev_state=S ==> next_comm=x next_pid=1 next_prio=120\n\
             x-1 [000] d..2. {again}: sched_wakeup: comm={name} pid={pid} prio=120\n"
        ));
    }
    text
}

#[test]
fn import_writes_only_what_check_reads_back() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("import-round-trip");
    std::fs::create_dir_all(&dir).unwrap();
    let trace = dir.join("names.trace");
    let names = [
        "esc\u{1b}[31mred",
        "rtl\u{202e}txt",
        "zw\u{200b}sp",
        "soft\u{ad}hy",
    ];
    let times = ["1.000000", "1.000010", "1.001010", "2.000000"];
    std::fs::write(&trace, trace_of(&names, times)).unwrap();
    // The listing prints no control or formatting character.
    let o = run(&["import", trace.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let listed = stdout(&o);
    for bad in ['\u{1b}', '\u{202e}', '\u{200b}', '\u{ad}'] {
        assert!(!listed.contains(bad), "{bad:?} listed raw:\n{listed}");
    }
    assert!(listed.contains("esc?[31mred"), "{listed}");
    // Every thread imported, by pid and by the name the listing shows.
    let json = dir.join("names.json");
    let o = run(&[
        "import",
        trace.to_str().unwrap(),
        "--pid",
        "100",
        "--pid",
        "101",
        "--pid",
        "102",
        "--comm",
        "soft?hy",
        "-o",
        json.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = run(&[
        "check",
        "examples/rtapp-tasks.toml",
        "--workload",
        json.to_str().unwrap(),
    ]);
    assert!(
        o.status.success(),
        "check refuses what import wrote:\n{}",
        stderr(&o)
    );
    // Times near 2^64 ns would give sleeps longer than any duration.
    std::fs::write(
        &trace,
        trace_of(
            &["app"],
            ["0.000001", "0.000010", "0.001000", "18446744073.000000"],
        ),
    )
    .unwrap();
    let o = run(&[
        "import",
        trace.to_str().unwrap(),
        "--comm",
        "app",
        "-o",
        json.to_str().unwrap(),
    ]);
    if o.status.success() {
        let o = run(&[
            "check",
            "examples/rtapp-tasks.toml",
            "--workload",
            json.to_str().unwrap(),
        ]);
        assert!(
            o.status.success(),
            "check refuses what import wrote:\n{}",
            stderr(&o)
        );
    } else {
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        assert!(stderr(&o).contains("names.trace:4:"), "{}", stderr(&o));
        assert_no_crash(&o);
    }
    // A span longer than any rt-app `global.duration`.
    std::fs::write(
        &trace,
        trace_of(
            &["app"],
            ["0.000001", "0.000010", "0.001000", "9000000000.0"],
        ),
    )
    .unwrap();
    let o = run(&[
        "import",
        trace.to_str().unwrap(),
        "--comm",
        "app",
        "-o",
        json.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("global.duration"), "{}", stderr(&o));
    let o = run(&[
        "import",
        trace.to_str().unwrap(),
        "--comm",
        "app",
        "--repeat",
        "-o",
        json.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = run(&[
        "check",
        "examples/rtapp-tasks.toml",
        "--workload",
        json.to_str().unwrap(),
    ]);
    assert!(
        o.status.success(),
        "check refuses what import wrote:\n{}",
        stderr(&o)
    );
}

#[test]
fn import_warns_of_times_that_go_backwards() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("import-backwards");
    std::fs::create_dir_all(&dir).unwrap();
    let trace = dir.join("back.trace");
    std::fs::write(
        &trace,
        trace_of(&["app"], ["10.0", "10.001", "3.0", "12.0"]),
    )
    .unwrap();
    let o = run(&["import", trace.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("warning:"), "{err}");
    assert!(err.contains("line 3"), "{err}");
    // A few microseconds out of order, as merged per-processor buffers
    // print, is no warning.
    std::fs::write(
        &trace,
        trace_of(&["app"], ["10.000010", "10.000005", "10.001", "10.002"]),
    )
    .unwrap();
    let o = run(&["import", trace.to_str().unwrap()]);
    assert!(!stderr(&o).contains("warning"), "{}", stderr(&o));
}

#[test]
fn sim_without_a_file_says_what_it_runs() {
    let o = run(&["sim", "--duration", "100ms"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains(
            "note: no FILE given: simulating the built-in copy of examples/home-computer.toml"
        ),
        "{}",
        stderr(&o)
    );
    let o = run(&["sim", "examples/home-computer.toml", "--duration", "100ms"]);
    assert!(!stderr(&o).contains("built-in"), "{}", stderr(&o));
}

#[test]
fn an_empty_file_is_valid_with_a_warning() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let file = dir.join("empty.toml");
    std::fs::write(&file, "# nothing yet\n").unwrap();
    let o = run(&["check", file.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("ok (1 CPU, 0 schedulers, 0 threads)"),
        "{}",
        stdout(&o)
    );
    let err = stderr(&o);
    assert!(
        err.contains("warning:") && err.contains("no [[scheduler]]"),
        "{err}"
    );
    let o = run(&["check", "--quiet", file.to_str().unwrap()]);
    assert!(o.status.success() && o.stderr.is_empty(), "{}", stderr(&o));
}

/// Issue #39: `run --cpus 0` on a two-processor file said "scheduler
/// `root` names processor 1" (no root names one there) and exited 1. A
/// list shorter than the file is a usage error, checked before anything
/// needs root, and says what `--cpus` must be.
#[test]
fn a_cpus_list_shorter_than_the_file_is_a_usage_error() {
    let o = run(&["run", "examples/web-servers.toml", "--cpus", "0"]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--cpus 0 lists 1 CPU but the hierarchy runs on 2 processors")
            && err.contains("--cpus must list at least 2 online CPUs"),
        "{err}"
    );
    assert!(!err.contains("names processor"), "{err}");
    assert!(o.stdout.is_empty());
    for (args, says) in [
        (&["--cpus", "1,1"][..], "CPU 1 is listed twice"),
        (
            &["--socket", "/tmp/x.sock", "--no-socket"],
            "cannot be used with",
        ),
    ] {
        let o = run(&[&["run", "examples/web-servers.toml"][..], args].concat());
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(stderr(&o).contains(says), "{args:?}: {}", stderr(&o));
    }
}

/// Issue #39: `run --help` and `ctl --help` described their options in
/// prose and ended with the generic exit table ("the file is valid…").
#[test]
fn run_and_ctl_help_list_their_options_and_their_own_exit_statuses() {
    let help = |verb: &str| {
        let o = run(&[verb, "--help"]);
        assert!(o.status.success(), "{verb} --help");
        stdout(&o)
    };
    let r = help("run");
    for opt in [
        "--cpus <LIST>",
        "--duration <D>",
        "--socket <PATH>",
        "--no-socket",
        "--group <GID>",
        "--scheduler <NAME>",
        "--param <KEY=VALUE>",
        "--no-workloads",
        "--enforce <BACKEND>",
        "--fifo-priority <N>",
        "--stolen <SOURCE>",
        "--stolen-irq-overhead <D>",
        "--json",
        "-o, --output <FILE>",
        "--compare",
        "[-- <COMMAND>...]",
    ] {
        assert!(r.contains(opt), "run --help does not list {opt}:\n{r}");
    }
    assert!(!r.contains("Options: --cpus"), "{r}");
    assert!(r.contains("3  this machine cannot run live mode"), "{r}");
    let c = help("ctl");
    for opt in [
        "--socket <PATH>",
        "[default: /run/hsched.sock]",
        "--json",
        "<OP>",
    ] {
        assert!(c.contains(opt), "ctl --help does not list {opt}:\n{c}");
    }
    assert!(c.contains("1  no daemon answers on the socket"), "{c}");
    for (verb, h) in [("run", &r), ("ctl", &c)] {
        assert!(h.contains("Exit status:"), "{verb}");
        assert!(!h.contains("the file is valid"), "{verb} --help:\n{h}");
        assert!(!h.contains("130  sim:"), "{verb} --help:\n{h}");
    }
    // A mistyped operation or field is a usage error before any daemon.
    for args in [&["ctl"][..], &["ctl", "bogus"], &["ctl", "show", "nokey"]] {
        let o = run(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
    }
}

/// One live run of this file's tests at a time: the CPU locks they hold
/// let their own daemons in, and only one daemon can serve the default
/// control socket.
fn live_turn() -> std::sync::MutexGuard<'static, ()> {
    static LIVE: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LIVE.lock().unwrap_or_else(|e| e.into_inner())
}

/// Issue #39 (root, live mode): `hsched ctl`'s first example reaches a
/// daemon started the ordinary way, which serves /run/hsched.sock and still
/// ends with its program; a run whose only program cannot be launched
/// fails at once, naming it.
#[test]
fn a_live_run_serves_ctl_by_default_and_fails_when_nothing_launches() {
    let _turn = live_turn();
    if let Err(e) = hsched_linux::check_support() {
        eprintln!("SKIPPED: {e}");
        return;
    }
    let sock = Path::new(hsched_linux::ctl::DEFAULT_SOCKET);
    if std::os::unix::net::UnixStream::connect(sock).is_ok() {
        eprintln!("SKIPPED: a daemon already serves {}", sock.display());
        return;
    }
    let cpus = hsched_linux::sys::online_cpus();
    let _locks = hsched_linux::cpulock::CpuLocks::acquire_wait(
        &cpus,
        hsched_linux::cpulock::Sharing::WithChildren,
        std::time::Duration::from_secs(120),
    )
    .expect("the CPUs, within 2 minutes");
    let cpu = cpus.last().unwrap().to_string();
    let dir = scratch("live-default-socket");
    let ts = "default = \"ts\"\n[[scheduler]]\nname = \"ts\"\npolicy = \"ts\"\n";
    let napper = dir.join("napper.toml");
    std::fs::write(
        &napper,
        format!("{ts}[[thread]]\nname = \"napper\"\nexec = [\"sleep\", \"2\"]\n"),
    )
    .unwrap();
    let daemon = hsched()
        .args(["run", napper.to_str().unwrap(), "--cpus", &cpu, "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = std::time::Instant::now();
    let shown = loop {
        let o = run(&["ctl", "--json", "show"]);
        if o.status.success() {
            break serde_json::from_slice::<Value>(&o.stdout).unwrap();
        }
        assert!(
            t0.elapsed().as_secs() < 10,
            "ctl never reached the daemon: {}",
            stderr(&o)
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let names: Vec<&str> = shown["threads"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(names.contains(&"napper"), "{shown}");
    let o = daemon.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(r["live"]["ended_by"], "programs exited");
    assert!(!sock.exists(), "the socket outlived the run");

    let ghost = dir.join("ghost.toml");
    std::fs::write(
        &ghost,
        format!("{ts}[[thread]]\nname = \"ghost\"\nexec = [\"/nonexistent\"]\n"),
    )
    .unwrap();
    let o = run(&[
        "run",
        ghost.to_str().unwrap(),
        "--cpus",
        &cpu,
        "--duration",
        "30s",
    ]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("no program could be launched") && err.contains("`ghost`: `/nonexistent`"),
        "{err}"
    );
    assert!(o.stdout.is_empty(), "{}", stdout(&o));
}
