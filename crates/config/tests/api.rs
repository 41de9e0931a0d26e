//! The model the parser produces and the builder, against a small table
//! of test policies (so these tests do not depend on the real policies'
//! parameter lists).

use hsched_config::*;
use hsched_core::testing::Fifo;
use hsched_core::{
    Duration, Instant, ParamError, ParamSpec, ParamValue, Params, Policy, PolicyError, ThreadId,
};
use hsched_policies::PolicyInfo;
use std::collections::BTreeMap;

fn fifo(_: &Params) -> Result<Box<dyn Policy>, PolicyError> {
    Ok(Box::new(Fifo::default()))
}

fn picky(p: &Params) -> Result<Box<dyn Policy>, PolicyError> {
    match p.get("level") {
        Some(ParamValue::Int(n)) if *n > 3 => Err(PolicyError::Param(ParamError {
            key: "level".into(),
            message: format!("{n} is above 3"),
        })),
        _ => Ok(Box::new(Fifo::default())),
    }
}

const PRIO: &[ParamSpec] = &[ParamSpec {
    key: "priority",
    kind: "integer 0..=99",
    default: "0",
    doc: "higher first",
}];
const RES: &[ParamSpec] = &[
    ParamSpec {
        key: "amount",
        kind: "duration",
        default: "required",
        doc: "budget",
    },
    ParamSpec {
        key: "period",
        kind: "duration",
        default: "required",
        doc: "period",
    },
];
const CAP: &[ParamSpec] = &[ParamSpec {
    key: "cap",
    kind: "number",
    default: "1",
    doc: "admission cap",
}];
const LEVEL: &[ParamSpec] = &[ParamSpec {
    key: "level",
    kind: "integer",
    default: "0",
    doc: "at most 3",
}];

fn policies() -> Vec<PolicyInfo> {
    let p = |name: &'static str, instance_params, child_params, min_parents, max_parents, build| {
        PolicyInfo {
            instance_params,
            child_params,
            min_parents,
            max_parents,
            ..PolicyInfo::new(name, build)
        }
    };
    vec![
        p("prio", &[], PRIO, 1, 1, fifo as fn(&Params) -> _),
        p("res", CAP, RES, 1, 1, fifo),
        p("both", &[], &[], 2, 4, fifo),
        p("picky", LEVEL, &[], 1, 1, picky),
    ]
}

fn parse(text: &str) -> Result<Hierarchy, ConfigErrors> {
    parse_str_with_policies(text, "t.toml", &policies())
}

const GOOD: &str = r#"
default = "low"

[machine]
cpus = 2

[[scheduler]]
name = "low"
policy = "prio"
parent = "top"
params = { priority = 1 }

[[scheduler]]
name = "top"
policy = "prio"

[[scheduler]]
name = "rez"
policy = "res"
parent = "top"
params = { priority = 9 }
cap = 0.5

[[scheduler]]
name = "j"
policy = "both"
parents = [ { name = "rez", amount = "1ms", period = "10ms" }, { name = "low", priority = 3 } ]

[[thread]]
name = "w"
count = 3
workload = { kind = "cpu-bound" }

[[thread]]
name = "late"
start = "3s"
workload = { kind = "cpu-bound" }

[[thread]]
name = "live"
scheduler = "top"
exec = ["/bin/true"]

[[at]]
time = "2s"
op = "set-default"
name = "top"

[[at]]
time = "1s"
op = "begin-reservation"
thread = "w.1"
scheduler = "rez"
params = { amount = "2ms", period = "10ms" }

[[at]]
time = "1s"
op = "create-scheduler"
scheduler = { name = "extra", policy = "prio", parent = "top", params = { priority = 2 } }

[[at]]
time = "1.5s"
op = "end-reservation"
thread = "w.1"
"#;

#[test]
fn parses_into_the_model() {
    let h = parse(GOOD).unwrap_or_else(|e| panic!("{e}"));
    // Parents first, file order among independents.
    let names: Vec<&str> = h.schedulers.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["top", "low", "rez", "j"]);
    assert_eq!(h.schedulers[0].cpus, vec![0, 1]);
    assert_eq!(
        h.schedulers[2].params.get("cap"),
        Some(&ParamValue::Float(0.5))
    );
    assert_eq!(
        h.schedulers[3].parents[0]
            .params
            .duration("amount")
            .unwrap(),
        Some(Duration::from_millis(1))
    );
    // `count` expands names; threads without a scheduler get the default in
    // force when they start.
    let t: Vec<(&str, &str)> = h
        .threads
        .iter()
        .map(|t| (t.name.as_str(), t.scheduler.as_str()))
        .collect();
    assert_eq!(
        t,
        [
            ("w.0", "low"),
            ("w.1", "low"),
            ("w.2", "low"),
            ("late", "top"),
            ("live", "top")
        ]
    );
    assert_eq!(h.threads[0].span, Span { line: 29, col: 1 });
    assert!(h.threads[4].workload.is_none());
    // Operations sorted by time, stable for equal times.
    let ops: Vec<Duration> = h.operations.iter().map(|o| o.at).collect();
    assert_eq!(
        ops,
        [
            Duration::from_secs(1),
            Duration::from_secs(1),
            Duration::from_millis(1500),
            Duration::from_secs(2)
        ]
    );
    assert!(matches!(
        h.operations[0].op,
        OpSpec::BeginReservation { .. }
    ));
    assert!(matches!(
        h.operations[3].op,
        OpSpec::SetDefault {
            move_threads: true,
            ..
        }
    ));
    assert_eq!(h.file, "t.toml");
    assert_eq!(h.machine.timer, TimerModel::Precise);
}

#[test]
fn a_thread_without_workload_cannot_be_simulated() {
    let h = parse(GOOD).unwrap();
    let e = h.check_simulatable().unwrap_err();
    assert_eq!(e.len(), 1);
    assert!(e.0[0].message.contains("`live`"), "{e}");
    assert_eq!((e.0[0].line, e.0[0].col), (39, 1));
}

#[test]
fn an_rtapp_thread_without_its_task_cannot_run_live_unless_it_has_exec() {
    let text = r#"
default = "top"

[[scheduler]]
name = "top"
policy = "prio"

[[thread]]
name = "alone"
rtapp = "task"

[[thread]]
name = "with-exec"
rtapp = "task"
exec = ["/bin/true"]
"#;
    let h = parse_str_with_policies(text, "t.toml", &policies()).unwrap_or_else(|e| panic!("{e}"));
    for e in [h.check_live(), h.check_rtapp_attached()] {
        let e = e.unwrap_err();
        assert_eq!(e.len(), 1, "{e}");
        assert!(
            e.0[0]
                .message
                .contains("thread `alone` has `rtapp = \"task\"`, but no rt-app file is given"),
            "{e}"
        );
    }
    // The simulator needs both tasks.
    assert_eq!(h.check_simulatable().unwrap_err().len(), 2);
}

#[test]
fn builds_and_applies_operations() {
    let pol = policies();
    let h = parse(GOOD).unwrap();
    let mut hsi = build_hsi_with(&h, &pol).unwrap();
    assert_eq!(hsi.default_instance(), hsi.instance("low"));
    let mut ids: BTreeMap<String, ThreadId> = BTreeMap::new();
    for t in h.threads.iter().filter(|t| t.start == Duration::ZERO) {
        let id = create_thread(&mut hsi, t, Instant::ZERO).unwrap();
        hsi.wake(Instant::ZERO, id).unwrap();
        ids.insert(t.name.clone(), id);
    }
    let look = |n: &str| ids.get(n).copied();
    for op in &h.operations {
        apply_op_with(&mut hsi, &op.op, Instant(op.at.as_nanos()), &look, &pol)
            .unwrap_or_else(|e| panic!("{op:?}: {e}"));
    }
    assert!(hsi.instance("extra").is_some());
    assert_eq!(hsi.default_instance(), hsi.instance("top"));
    // Back from its reservation at 1.5s, then moved with the other threads
    // of the old default at 2s.
    assert_eq!(hsi.thread_parent(ids["w.1"]), hsi.instance("top").unwrap());
    // Errors name what they are about.
    let e = apply_op_with(
        &mut hsi,
        &OpSpec::EndReservation {
            thread: "nobody".into(),
        },
        Instant(5),
        &look,
        &pol,
    )
    .unwrap_err();
    assert_eq!(e, BuildError::UnknownThread("nobody".into()));
    let e = apply_op_with(
        &mut hsi,
        &OpSpec::DestroyScheduler { name: "top".into() },
        Instant(5),
        &look,
        &pol,
    )
    .unwrap_err();
    assert!(e.to_string().starts_with("scheduler `top`: "), "{e}");
    let e = apply_op_with(
        &mut hsi,
        &OpSpec::EndReservation {
            thread: "w.0".into(),
        },
        Instant(5),
        &look,
        &pol,
    )
    .unwrap_err();
    assert!(
        matches!(e, BuildError::Hsi { ref what, .. } if what == "thread `w.0`"),
        "{e}"
    );
}

#[test]
fn reports_every_error_in_file_order() {
    let text = r#"
[[scheduler]]
name = "top"
policy = "prio"
levle = 2

[[scheduler]]
name = "r"
policy = "res"
parent = "top"
params = { priority = 100 }

[[thread]]
name = "a"
scheduler = "r"
params = { amount = "20ms", period = "10ms" }
workload = { kind = "cpu-bound" }

[[thread]]
name = "b"
scheduler = "r"
workload = { kind = "cpu-bound" }
"#;
    let e = parse(text).unwrap_err();
    let lines: Vec<u32> = e.iter().map(|e| e.line).collect();
    assert_eq!(lines, [5, 11, 16, 19, 19], "{e}");
    assert!(e.0[0].message.contains("unknown key `levle`"), "{e}");
    assert!(e.0[1].message.contains("out of range"), "{e}");
    assert!(e.0[2].message.contains("larger than `period`"), "{e}");
    assert!(e.0[3].message.contains("no `amount`"), "{e}");
    assert!(e.0[4].message.contains("no `period`"), "{e}");
    assert!(e.to_string().ends_with("found 5 errors\n"));
}

#[test]
fn join_needs_two_parents_and_build_errors_surface_at_parse_time() {
    let text = r#"
[[scheduler]]
name = "top"
policy = "prio"

[[scheduler]]
name = "j"
policy = "both"
parent = "top"

[[scheduler]]
name = "p"
policy = "picky"
parent = "top"
level = 7
"#;
    let e = parse(text).unwrap_err();
    assert_eq!(e.len(), 2, "{e}");
    assert!(e.0[0].message.contains("needs at least 2"), "{e}");
    assert_eq!(e.0[1].line, 15);
    assert!(e.0[1].message.contains("7 is above 3"), "{e}");
}

#[test]
fn timeline_follows_the_default_and_exits() {
    let text = r#"
default = "a"

[[scheduler]]
name = "top"
policy = "prio"

[[scheduler]]
name = "a"
policy = "prio"
parent = "top"

[[thread]]
name = "t"
exit = "1s"
workload = { kind = "cpu-bound" }

[[at]]
time = "1s"
op = "destroy-scheduler"
name = "a"

[[at]]
time = "2s"
op = "move-thread"
thread = "t"
to = "top"
"#;
    let e = parse(text).unwrap_err();
    // At 1s the operation runs before the exit: `a` still has `t`.
    assert_eq!(e.len(), 2, "{e}");
    assert!(
        e.0[0]
            .message
            .contains("still has children at 1s: thread `t`"),
        "{e}"
    );
    assert!(e.0[1].message.contains("has already exited at 2s"), "{e}");
}

#[test]
fn rtapp_references_wait_for_the_workload() {
    let text = r#"
default = "top"

[[scheduler]]
name = "top"
policy = "prio"

[[thread]]
name = "declared"
rtapp = "task"

[workload]
rtapp = "tasks.json"

[[at]]
time = "1s"
op = "set-params"
thread = "from-file"
params = { priority = 3 }
"#;
    let pol = policies();
    let mut h = parse_str_with_policies(text, "t.toml", &pol).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(h.workload.rtapp_file.as_deref(), Some("tasks.json"));
    assert!(h.check_simulatable().is_err());
    // The operation names a thread the workload does not have.
    let w = parse_rtapp(
        r#"{"tasks": {"task": {"run": 10, "sleep": 10}, "other": {"run": 1, "sleep": 1}}}"#,
        "tasks.json",
    )
    .unwrap();
    let e = attach_rtapp_with_policies(&mut h, w, &pol).unwrap_err();
    assert_eq!(e.len(), 1, "{e}");
    assert!(
        e.0[0].message.contains("no thread is named `from-file`"),
        "{e}"
    );
    assert_eq!((e.0[0].file.as_str(), e.0[0].line), ("t.toml", 15));
    // It does here.
    let w = parse_rtapp(r#"{"tasks": {"task": {"run": 10, "sleep": 10}, "from-file": {"policy": "SCHED_RR", "priority": 5, "run": 1, "sleep": 1}}}"#, "tasks.json").unwrap();
    attach_rtapp_with_policies(&mut h, w, &pol).unwrap_or_else(|e| panic!("{e}"));
    h.check_simulatable().unwrap();
    let f = h.threads.iter().find(|t| t.name == "from-file").unwrap();
    assert_eq!(f.scheduler, "top");
    assert_eq!(f.params.get("priority"), Some(&ParamValue::Int(5)));
}

#[test]
fn durations_need_units_everywhere() {
    for (text, needle) in [
        ("[sim]\nduration = 10\n", "bare number"),
        (
            "[sim]\nduration = \"10 parsecs\"\n",
            "unknown unit `parsecs`",
        ),
        ("[sim]\nduration = \"-1s\"\n", "negative"),
        ("[sim]\nduration = \"10secs\"\n", "did you mean `s`?"),
        ("[machine]\ncontext_switch = 1.5\n", "bare number"),
        ("[machine]\ntimer = \"fast\"\n", "not a timer model"),
    ] {
        let e = parse(text).unwrap_err();
        assert!(e.to_string().contains(needle), "{text}: {e}");
    }
    let h = parse("[machine]\ntimer = \"800Hz\"\ncontext_switch = 0\n").unwrap();
    assert_eq!(h.machine.timer, TimerModel::Tick { hz: 800 });
}

#[test]
fn pipeline_stages_and_players_parse_and_are_refused_in_live_mode() {
    let text = r#"
[[scheduler]]
name = "rr"
policy = "realrate"
[[queue]]
name = "q"
size = 64
initial = 32
[[thread]]
name = "src"
scheduler = "rr"
workload = { kind = "stage", output = "q", cost = "1ms", rate = 200, pulses = [{ start = "1s", length = "500ms" }], report = "20ms" }
[[thread]]
name = "sink"
scheduler = "rr"
workload = { kind = "stage", input = "q", cost = "2ms", report = "0s" }
[[thread]]
name = "p"
scheduler = "rr"
workload = { kind = "player", fps = 25, cooperative = false }
[[thread]]
name = "real"
scheduler = "rr"
exec = ["./sink"]
workload = { kind = "stage", input = "q", cost = "1ms" }
"#;
    let h = hsched_config::parse_str(text, "p.toml").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        h.queues,
        vec![hsched_config::QueueSpec {
            name: "q".into(),
            size: 64,
            initial: 32,
            span: h.queues[0].span,
        }]
    );
    let Some(WorkloadSpec::Stage(src)) = &h.threads[0].workload else {
        panic!("{:?}", h.threads[0].workload)
    };
    assert_eq!(src.output.as_deref(), Some("q"));
    assert_eq!(src.rate, Some(200.0));
    assert_eq!(src.report, Some(Duration::from_millis(20)));
    // A pulse doubles the speed by default.
    assert_eq!(src.pulses[0].factor, 2.0);
    let Some(WorkloadSpec::Stage(sink)) = &h.threads[1].workload else {
        panic!()
    };
    assert_eq!((sink.input.as_deref(), sink.report), (Some("q"), None));
    let Some(WorkloadSpec::Player(p)) = &h.threads[2].workload else {
        panic!()
    };
    assert_eq!(p.frame, Duration::from_millis(40));
    assert!(!p.cooperative);
    assert_eq!(p.decode, Duration::from_micros(5500));
    // Live mode: the three simulated-only threads are named, the one with
    // `exec` is not.
    let e = h.check_live().unwrap_err().to_string();
    for name in [
        "`src` has a `stage`",
        "`sink` has a `stage`",
        "`p` has a `player`",
    ] {
        assert!(e.contains(name), "{e}");
    }
    assert!(!e.contains("`real`"), "{e}");
    assert!(h.check_simulatable().is_ok());
}

#[test]
fn thread_rules_keep_file_order_and_match_both_globs() {
    let h = parse(&format!(
        "{GOOD}\n{}",
        r#"
[[rule]]
thread = "dec?der*"
program = "mpv"
scheduler = "rez"
params = { amount = "2ms", period = "10ms" }

[[rule]]
program = "ff*"
scheduler = "low"
"#
    ))
    .unwrap();
    assert_eq!(h.rules.len(), 2);
    let (dec, ff) = (&h.rules[0], &h.rules[1]);
    assert_eq!(dec.scheduler, "rez");
    assert_eq!(
        dec.params.get("amount"),
        Some(&ParamValue::Str("2ms".into()))
    );
    assert!(ff.params.is_empty() && ff.thread.is_none());
    assert!(dec.matches("decoder:0", "mpv"));
    assert!(!dec.matches("decoder:0", "mpv2"), "both globs must match");
    assert!(!dec.matches("audio", "mpv"));
    assert!(ff.matches("anything", "ffmpeg") && !ff.matches("ffmpeg", "x"));
    // A file without rules has none.
    assert!(parse(GOOD).unwrap().rules.is_empty());
}

#[test]
fn files_are_read_up_to_a_limit() {
    let path = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("read-limit.toml");
    std::fs::write(&path, "# twelve ch\n").unwrap();
    assert_eq!(read_text(&path, 12).unwrap(), "# twelve ch\n");
    let e = read_text(&path, 11).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidData);
    // An endless device ends with an error, not with memory exhausted.
    let e = load(std::path::Path::new("/dev/zero")).unwrap_err();
    assert!(e.to_string().contains("longer than 16 MiB"), "{e}");
    // An rt-app file may be longer than a hierarchy file.
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"));
    let h = dir.join("read-limit-zero.toml");
    std::fs::write(
        &h,
        "[[scheduler]]\nname = \"ts\"\npolicy = \"ts\"\n[workload]\nrtapp = \"/dev/zero\"\n",
    )
    .unwrap();
    let e = load(&h).unwrap_err();
    assert!(e.to_string().contains("longer than 256 MiB"), "{e}");
}

#[test]
fn parents_on_a_thread_point_to_a_join() {
    for key in ["parents = [\"a\", \"b\"]", "parent = \"a\""] {
        let text = format!(
            "[[scheduler]]\nname = \"a\"\npolicy = \"ts\"\n[[scheduler]]\nname = \"b\"\npolicy = \"ts\"\n[[thread]]\nname = \"t\"\nscheduler = \"a\"\n{key}\nworkload = {{ kind = \"cpu-bound\" }}\n"
        );
        let e = parse(&text).unwrap_err().to_string();
        assert!(
            e.contains("unknown key") && e.contains("give it a `join` scheduler"),
            "{e}"
        );
    }
}
