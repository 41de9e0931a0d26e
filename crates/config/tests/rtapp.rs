//! rt-app files under tests/rtapp/: the supported ones parse to the
//! expected programs and parameters; the unsupported ones fail with an
//! error naming each unsupported field and its task.

use hsched_config::*;
use hsched_core::{Duration, ParamValue};
use std::path::Path;

fn ms(x: u64) -> Duration {
    Duration::from_millis(x)
}
fn us(x: u64) -> Duration {
    Duration::from_micros(x)
}

fn parse(name: &str) -> Result<RtAppWorkload, ConfigErrors> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/rtapp")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap();
    parse_rtapp(&text, name)
}

fn ok(name: &str) -> RtAppWorkload {
    parse(name).unwrap_or_else(|e| panic!("{name}:\n{e}"))
}

fn task<'a>(w: &'a RtAppWorkload, name: &str) -> &'a RtAppTask {
    w.tasks
        .iter()
        .find(|t| t.name == name)
        .unwrap_or_else(|| panic!("no task {name}"))
}

fn str_param<'a>(t: &'a RtAppTask, k: &str) -> Option<&'a str> {
    t.params.str(k).unwrap()
}

#[test]
fn periodic_deadline_task() {
    let w = ok("periodic.json");
    assert_eq!(w.duration, Some(Duration::from_secs(10)));
    assert_eq!(w.file, "periodic.json");
    assert_eq!(w.tasks.len(), 1);
    let t = &w.tasks[0];
    assert_eq!(t.name, "video");
    assert_eq!(
        t.program,
        Program {
            steps: vec![
                Step::Run(ms(10)),
                Step::Timer {
                    period: us(33_333),
                    absolute: true
                }
            ],
            loops: None,
            delay: Duration::ZERO
        }
    );
    assert_eq!(str_param(t, "policy"), Some("SCHED_DEADLINE"));
    assert_eq!(t.params.duration("dl-runtime").unwrap(), Some(ms(11)));
    assert_eq!(t.params.duration("dl-period").unwrap(), Some(us(33_333)));
    // rt-app: the deadline defaults to the period.
    assert_eq!(t.params.duration("dl-deadline").unwrap(), Some(us(33_333)));
    assert_eq!(t.span, Span { line: 3, col: 3 });
}

#[test]
fn loop_delay_and_numbered_events() {
    let t = &ok("loop_delay.json").tasks[0];
    assert_eq!(
        t.program,
        Program {
            steps: vec![
                Step::Run(ms(1)),
                Step::Sleep(ms(2)),
                Step::Run(us(500)),
                Step::Timer {
                    period: ms(10),
                    absolute: false
                }
            ],
            loops: Some(5),
            delay: us(2500),
        }
    );
    assert_eq!(str_param(t, "policy"), Some("SCHED_OTHER"));
    assert!(t.params.get("priority").is_none());
}

#[test]
fn phases_unroll_into_one_loop() {
    let t = &ok("phases.json").tasks[0];
    let warm = [Step::Run(ms(1)), Step::Sleep(ms(1))];
    let steady = [
        Step::Run(ms(3)),
        Step::Timer {
            period: ms(5),
            absolute: false,
        },
    ];
    let steps: Vec<Step> = warm.iter().chain(&warm).chain(&steady).cloned().collect();
    assert_eq!(
        t.program,
        Program {
            steps,
            loops: Some(2),
            delay: Duration::ZERO
        }
    );
}

#[test]
fn single_phase_loops_multiply_and_forever_and_zero() {
    let w = ok("single_phase.json");
    let t = task(&w, "t");
    assert_eq!(t.program.loops, Some(12));
    assert_eq!(
        t.program.steps,
        vec![Step::Run(us(100)), Step::Sleep(us(900))]
    );
    assert_eq!(task(&w, "forever").program.loops, None);
    assert_eq!(task(&w, "never").program.loops, Some(0));
}

#[test]
fn instances_are_expanded_and_cpus_kept() {
    let w = ok("instances.json");
    let names: Vec<&str> = w.tasks.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["worker", "worker-1", "worker-2"]);
    for t in &w.tasks {
        assert_eq!(t.cpus, vec![0, 1]);
        // default_policy applies, with rt-app's default priority.
        assert_eq!(str_param(t, "policy"), Some("SCHED_FIFO"));
        assert_eq!(t.params.get("priority"), Some(&ParamValue::Int(10)));
    }
}

#[test]
fn priorities_by_policy() {
    let w = ok("priorities.json");
    assert_eq!(
        task(&w, "fifo").params.get("priority"),
        Some(&ParamValue::Int(10))
    );
    assert_eq!(
        task(&w, "rr").params.get("priority"),
        Some(&ParamValue::Int(42))
    );
    assert_eq!(str_param(task(&w, "rr"), "policy"), Some("SCHED_RR"));
    assert_eq!(
        task(&w, "nice").params.get("priority"),
        Some(&ParamValue::Int(-5))
    );
    assert_eq!(task(&w, "plain").params.get("priority"), None);
    let dl = task(&w, "dl");
    assert_eq!(dl.params.duration("dl-runtime").unwrap(), Some(ms(2)));
    assert_eq!(dl.params.duration("dl-deadline").unwrap(), Some(ms(5)));
    assert_eq!(dl.params.duration("dl-period").unwrap(), Some(ms(10)));
}

#[test]
fn comments_trailing_commas_repeated_events_and_ignored_globals() {
    let w = ok("workgen_style.json");
    assert_eq!(w.duration, None);
    let t = &w.tasks[0];
    assert_eq!(
        t.program.steps,
        vec![
            Step::Run(ms(1)),
            Step::Sleep(ms(2)),
            Step::Run(ms(3)),
            Step::Runtime(ms(4))
        ]
    );
    assert_eq!(t.program.loops, None);
}

/// Each (field, task) must be named by one error of the file.
fn assert_unsupported(file: &str, expected: &[(&str, &str)]) {
    let errs = parse(file).expect_err(file);
    for (field, task) in expected {
        let hit = errs.iter().any(|e| {
            e.message.contains(&format!("`{field}`"))
                && e.message.contains(&format!("`{task}`"))
                && e.message.contains("not supported")
        });
        assert!(
            hit,
            "{file}: no error names `{field}` of task `{task}`:\n{errs}"
        );
    }
    assert_eq!(
        errs.len(),
        expected.len(),
        "{file}: one error per unsupported field:\n{errs}"
    );
    for e in errs.iter() {
        assert!(e.line > 0 && e.col > 0 && e.source_line.is_some(), "{e}");
    }
}

#[test]
fn synchronisation_events_are_refused() {
    assert_unsupported(
        "unsupported_sync.json",
        &[
            ("lock", "a"),
            ("unlock", "a"),
            ("wait", "b"),
            ("signal", "c"),
            ("broad", "c"),
            ("sync", "c"),
            ("barrier", "d"),
            ("sem_post", "e"),
            ("sem_wait", "e"),
        ],
    );
}

#[test]
fn other_unsupported_fields_are_refused() {
    assert_unsupported(
        "unsupported_other.json",
        &[
            ("suspend", "f"),
            ("resume", "f"),
            ("mem", "g"),
            ("iorun", "g"),
            ("memrun", "g"),
            ("yield", "h"),
            ("fork", "h"),
            ("util_min", "i"),
            ("util_max", "i"),
            ("nodes_membind", "i"),
            ("taskgroup", "i"),
            ("policy", "j"),
            ("cpus", "j"),
        ],
    );
}

#[test]
fn attach_maps_tasks_with_rules_and_translates_fields() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/valid");
    let h = load(&dir.join("rtapp_mapped.toml")).unwrap_or_else(|e| panic!("{e}"));
    let th = |n: &str| {
        h.threads
            .iter()
            .find(|t| t.name == n)
            .unwrap_or_else(|| panic!("no thread {n}"))
    };
    // A [[thread]] naming a task: its scheduler, the task's priority.
    let audio = th("audio");
    assert_eq!(audio.scheduler, "rt");
    assert_eq!(audio.params.get("priority"), Some(&ParamValue::Int(50)));
    assert_eq!(
        audio.rtapp,
        Some(RtAppBinding {
            task: "audio".into(),
            declared: true
        })
    );
    // SCHED_DEADLINE under a reservation scheduler: amount and period.
    let video = th("video");
    assert_eq!(video.scheduler, "rez");
    assert_eq!(video.params.duration("amount").unwrap(), Some(ms(11)));
    assert_eq!(video.params.duration("period").unwrap(), Some(us(33_333)));
    assert!(video.params.get("deadline").is_none());
    assert_eq!(
        video.rtapp,
        Some(RtAppBinding {
            task: "video".into(),
            declared: false
        })
    );
    // SCHED_FIFO without priority: rt-app's default 10.
    assert_eq!(th("irq1").scheduler, "rt");
    assert_eq!(
        th("irq1").params.get("priority"),
        Some(&ParamValue::Int(10))
    );
    // Rule params replace the task's fields.
    for n in ["worker", "worker-1"] {
        assert_eq!(th(n).scheduler, "ts");
        assert_eq!(th(n).params.get("priority"), Some(&ParamValue::Int(4)));
        assert_eq!(
            th(n)
                .workload
                .as_ref()
                .map(|w| matches!(w, WorkloadSpec::Program(p) if p.delay == ms(1))),
            Some(true)
        );
    }
    assert_eq!(h.threads.len(), 5);
    assert_eq!(h.rtapp.as_ref().map(|w| w.tasks.len()), Some(5));
}

#[test]
fn attaching_another_workload_replaces_placed_threads() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/valid");
    let mut h = load(&dir.join("rtapp_mapped.toml")).unwrap();
    let other = r#"{ "tasks": { "audio": { "policy": "SCHED_FIFO", "priority": 7, "run": 10, "sleep": 90 },
                                "video9": { "policy": "SCHED_DEADLINE", "dl-runtime": 1000, "dl-period": 4000, "run": 900, "sleep": 3100 } } }"#;
    let w = parse_rtapp(other, "other.json").unwrap();
    attach_rtapp(&mut h, w).unwrap_or_else(|e| panic!("{e}"));
    let names: Vec<&str> = h.threads.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["audio", "video9"]);
    // The declared thread keeps its own settings; its program is the new one.
    let audio = &h.threads[0];
    assert_eq!(audio.scheduler, "rt");
    assert!(
        matches!(&audio.workload, Some(WorkloadSpec::Program(p)) if p.steps == vec![Step::Run(us(10)), Step::Sleep(us(90))])
    );
    assert_eq!(h.threads[1].params.duration("amount").unwrap(), Some(ms(1)));
    // A failing attachment leaves the hierarchy as it was.
    let bad = parse_rtapp(r#"{ "tasks": { "video": { "policy": "SCHED_DEADLINE", "dl-runtime": 1000, "run": 10 }, "x": { "cpus": [1], "run": 1, "sleep": 1 } } }"#, "bad.json").unwrap();
    let before = h.clone();
    let err = attach_rtapp(&mut h, bad).unwrap_err();
    assert!(
        err.to_string().contains("rt-app task `audio`") || err.to_string().contains("`audio`"),
        "{err}"
    );
    assert_eq!(h, before);
}

#[test]
fn a_global_duration_beyond_what_hsched_runs_is_refused() {
    let text =
        r#"{"global": {"duration": 4294967297}, "tasks": {"t": {"run": 1000, "sleep": 1000}}}"#;
    let e = parse_rtapp(text, "d.json").unwrap_err().to_string();
    assert!(e.contains("longer than hsched runs"), "{e}");
    let w = parse_rtapp(&text.replace("4294967297", "4294967296"), "d.json").unwrap();
    assert_eq!(w.duration, Some(Duration::from_secs(1 << 32)));
}

#[test]
fn a_hierarchy_and_its_workload_make_at_most_100_000_threads_together() {
    let toml = |count: u32| {
        format!(
            "default = \"ts\"\n[[scheduler]]\nname = \"ts\"\npolicy = \"ts\"\n[[thread]]\nname = \"w\"\ncount = {count}\nworkload = {{ kind = \"cpu-bound\" }}\n"
        )
    };
    let json = r#"{"tasks": {"t": {"instance": 50000, "run": 1000, "sleep": 1000}}}"#;
    let attach = |count: u32| {
        let mut h = parse_str(&toml(count), "h.toml").unwrap();
        attach_rtapp(&mut h, parse_rtapp(json, "w.json").unwrap()).map(|()| h.threads.len())
    };
    assert_eq!(attach(50_000).unwrap(), 100_000);
    let e = attach(50_001).unwrap_err().to_string();
    assert!(
        e.contains("make 100001 threads together") && e.contains("at most 100000 threads in all"),
        "{e}"
    );
}

/// rt-app keeps one mode per timer: absolute once any of its events says
/// so, whichever phase it is in (`src/rt-app_parse_config.c`; checked
/// against rt-app 1.0, whose log shows the absolute timer's catch-up in
/// both orders).
#[test]
fn a_timer_is_absolute_for_every_event_once_one_says_so() {
    for (first, second) in [
        ("\"absolute\"", "\"relative\""),
        ("\"relative\"", "\"absolute\""),
    ] {
        let text = format!(
            r#"{{"tasks": {{"t": {{"phases": {{
                "a": {{"runtime": 25000, "timer": {{"ref": "tick", "period": 10000, "mode": {first}}}}},
                "b": {{"runtime": 1000, "timer": {{"ref": "tick", "period": 5000, "mode": {second}}}}}
            }}}}}}}}"#
        );
        let w = parse_rtapp(&text, "m.json").unwrap_or_else(|e| panic!("{e}"));
        let modes: Vec<bool> = w.tasks[0]
            .program
            .steps
            .iter()
            .filter_map(|s| match s {
                Step::Timer { absolute, .. } => Some(*absolute),
                _ => None,
            })
            .collect();
        assert_eq!(modes, [true, true], "{first} then {second}");
    }
}

/// Two `unique…` names in one task are two timers in rt-app (one per
/// name and thread), which hsched does not model: refused like two
/// shared names, instead of run as one timer.
#[test]
fn two_unique_timer_names_in_a_task_are_two_timers() {
    let text = r#"{"tasks": {"t": {"phases": {
        "a": {"run": 1000, "timer": {"ref": "uniqueA", "period": 10000}},
        "b": {"run": 1000, "timer": {"ref": "uniqueB", "period": 10000}}
    }}}}"#;
    let e = parse_rtapp(text, "u.json").unwrap_err().to_string();
    assert!(
        e.contains("task `t` waits on several timers (`uniqueA`, `uniqueB`)"),
        "{e}"
    );
    // One unique name, used twice, is one timer.
    parse_rtapp(&text.replace("uniqueB", "uniqueA"), "u.json").unwrap_or_else(|e| panic!("{e}"));
}

/// A `[[thread]]` naming an rt-app task without `params` of its own takes
/// the task's scheduling fields, as a `[[workload.map]]` rule does: a
/// `SCHED_DEADLINE` task under `rez` gets its `amount` and `period`. The
/// file is checked again when the task is attached, so a task with no such
/// fields is refused there, in the rt-app file.
#[test]
fn a_declared_thread_without_params_takes_its_tasks_fields() {
    let toml = "default = \"ts\"\n[[scheduler]]\nname = \"fp\"\npolicy = \"fp\"\n\
        [[scheduler]]\nname = \"res\"\npolicy = \"rez\"\nparent = \"fp\"\nparams = { priority = 2 }\n\
        [[scheduler]]\nname = \"ts\"\npolicy = \"ts\"\nparent = \"fp\"\nparams = { priority = 1 }\n\
        [[thread]]\nname = \"v\"\nrtapp = \"video\"\nscheduler = \"res\"\n";
    let mut h = parse_str(toml, "h.toml").unwrap_or_else(|e| panic!("{e}"));
    let dl = r#"{"tasks": {"video": {"policy": "SCHED_DEADLINE", "dl-runtime": 6000, "dl-period": 20000, "run": 5000, "timer": {"ref": "t", "period": 20000}}}}"#;
    attach_rtapp(&mut h, parse_rtapp(dl, "dl.json").unwrap()).unwrap_or_else(|e| panic!("{e}"));
    let v = &h.threads[0];
    assert_eq!(v.params.duration("amount").unwrap(), Some(ms(6)));
    assert_eq!(v.params.duration("period").unwrap(), Some(ms(20)));
    let mut h = parse_str(toml, "h.toml").unwrap();
    let other = r#"{"tasks": {"video": {"run": 5000, "timer": {"ref": "t", "period": 20000}}}}"#;
    let e = attach_rtapp(&mut h, parse_rtapp(other, "o.json").unwrap()).unwrap_err();
    assert!(
        e.0.iter()
            .any(|e| e.file == "o.json" && e.message.contains("task `video` has no `amount`")),
        "{e}"
    );
}

/// Writes `files` into a fresh directory of its own and returns it.
fn scratch(tag: &str, files: &[(&str, &str)]) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("hsched-config-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    for (name, text) in files {
        std::fs::write(dir.join(name), text).unwrap();
    }
    dir
}

/// docs/hierarchy-format.md promises every problem at once: an operation
/// naming a thread of the rt-app file is checked even when another
/// operation of the hierarchy file has an error, and the error found on
/// both readings is reported once.
#[test]
fn operation_errors_with_an_rtapp_file_are_reported_together() {
    let toml = "default = \"ts\"\n[workload]\nrtapp = \"w.json\"\n\
        [[scheduler]]\nname = \"ts\"\npolicy = \"ts\"\n\
        [[at]]\ntime = \"1ms\"\nop = \"move-thread\"\nthread = \"video\"\nto = \"nosuch\"\n\
        [[at]]\ntime = \"2ms\"\nop = \"move-thread\"\nthread = \"viddeo\"\nto = \"ts\"\n";
    let json = r#"{"tasks": {"video": {"run": 5000, "timer": {"ref": "t", "period": 20000}}}}"#;
    let dir = scratch("ops-together", &[("h.toml", toml), ("w.json", json)]);
    let e = load(&dir.join("h.toml")).unwrap_err();
    let messages: Vec<&str> = e.0.iter().map(|e| e.message.as_str()).collect();
    assert_eq!(
        messages,
        [
            "the operation at 1ms uses `nosuch`, which is not a declared scheduler",
            "no thread is named `viddeo`",
        ],
        "{e}"
    );
    // The same with the rt-app file given in place of the file's own.
    let e = load_with_workload(&dir.join("h.toml"), &dir.join("w.json")).unwrap_err();
    assert_eq!(e.len(), 2, "{e}");
    // And an unreadable rt-app file is one more problem, not a hidden one.
    std::fs::remove_file(dir.join("w.json")).unwrap();
    let e = load(&dir.join("h.toml")).unwrap_err();
    assert_eq!(e.len(), 2, "{e}");
    assert!(e.to_string().contains("cannot read the rt-app file"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}
