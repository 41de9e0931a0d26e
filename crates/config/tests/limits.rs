//! Values and sizes beyond what hsched can represent or handle are refused
//! with a located error: durations and rates whose period does not fit,
//! rt-app microseconds that overflow, names that would print blank or
//! reordered, and files with too many schedulers, too deep a hierarchy or
//! too many rt-app phases.

use hsched_config::*;
use hsched_core::time::MAX_PARSED;

fn errors(text: &str) -> ConfigErrors {
    match parse_str(text, "t.toml") {
        Ok(_) => panic!("accepted:\n{text}"),
        Err(e) => e,
    }
}

fn rtapp_errors(json: &str) -> ConfigErrors {
    match parse_rtapp(json, "t.json") {
        Ok(_) => panic!("accepted:\n{json}"),
        Err(e) => e,
    }
}

fn one_thread(workload: &str) -> String {
    format!(
        "[[queue]]\nname = \"q\"\nsize = 4\n[[scheduler]]\nname = \"fp\"\npolicy = \"fp\"\n\
         [[thread]]\nname = \"t\"\nscheduler = \"fp\"\nworkload = {workload}\n"
    )
}

#[test]
fn durations_too_long_say_so() {
    for q in ["3000000h", "18446744073709551615ns"] {
        let text = format!("[[scheduler]]\nname = \"r\"\npolicy = \"ts\"\nquantum = \"{q}\"\n");
        let e = errors(&text);
        assert_eq!(e.len(), 1, "{e}");
        let e = &e.0[0];
        assert!(e.message.contains("is too long"), "{e}");
        assert!(!e.message.contains("unit"), "{e}");
        assert_eq!(e.line, 4, "{e}");
        assert!(
            e.expected
                .as_deref()
                .unwrap()
                .contains("9223372036854775808ns"),
            "{e}"
        );
    }
    let e = errors(&one_thread(
        "{ kind = \"periodic\", period = \"3000000h\", exec = \"1ms\" }",
    ));
    assert!(
        e.0[0]
            .message
            .contains("`period` = \"3000000h\" is too long"),
        "{e}"
    );
}

#[test]
fn rates_whose_period_does_not_fit_are_refused() {
    for (w, key) in [
        ("{ kind = \"player\", fps = 5e-11 }", "fps"),
        ("{ kind = \"video\", fps = 1e-30, exec = \"1ms\" }", "fps"),
        ("{ kind = \"player\", fps = 2e6 }", "fps"),
        (
            "{ kind = \"stage\", output = \"q\", cost = \"1ms\", rate = 1e-20 }",
            "rate",
        ),
    ] {
        let e = errors(&one_thread(w));
        assert_eq!(e.len(), 1, "{e}");
        let e = &e.0[0];
        assert!(e.message.starts_with(&format!("`{key}` = ")), "{e}");
        assert!(e.message.contains("out of range"), "{e}");
        assert_eq!(e.line, 10, "{e}");
        assert!(e.expected.as_deref().unwrap().contains("1.1e-10"), "{e}");
    }
    let e = errors(&one_thread("{ kind = \"player\", fps = 5e-11 }"));
    assert!(
        e.0[0].message.contains("longer than the longest duration"),
        "{e}"
    );
    // The smallest rate still gives a period that fits.
    let h = parse_str(
        &one_thread("{ kind = \"video\", fps = 1.1e-10, exec = \"1ms\" }"),
        "t.toml",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    match &h.threads[0].workload {
        Some(WorkloadSpec::Video(v)) => assert!(v.period <= MAX_PARSED),
        other => panic!("{other:?}"),
    }
}

#[test]
fn rtapp_durations_that_overflow_are_refused() {
    let e = rtapp_errors(
        r#"{"tasks": {
  "a": {"loop": -1, "run": 9223372036854775807, "sleep": 1000},
  "b": {"run": 1000, "delay": 1000000000000000000},
  "c": {"run": 1000, "timer": {"ref": "unique", "period": 9300000000000000}},
  "d": {"policy": "SCHED_DEADLINE", "dl-runtime": 9300000000000000, "run": 1000}
}}"#,
    );
    let got: Vec<(&str, u32)> = e.iter().map(|e| (e.message.as_str(), e.line)).collect();
    assert_eq!(e.len(), 4, "{e}");
    for (field, line) in [
        ("`run` in task `a`", 2),
        ("`delay` of task `b`", 3),
        ("the timer period in task `c`", 4),
        ("`dl-runtime` of task `d`", 5),
    ] {
        assert!(
            got.iter()
                .any(|(m, l)| m.starts_with(&format!("{field} is too long")) && *l == line),
            "{field}: {e}"
        );
    }
    // The longest accepted is the longest TOML duration.
    let w = parse_rtapp(r#"{"tasks": {"a": {"run": 9223372036854775}}}"#, "t.json")
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        w.tasks[0].program.steps[0]
            == Step::Run(hsched_core::Duration::from_micros(9223372036854775))
    );
}

#[test]
fn rtapp_task_names_must_be_printable() {
    let e = rtapp_errors(r#"{"tasks": {"": {"run": 1000, "sleep": 1000}}}"#);
    assert_eq!(e.len(), 1, "{e}");
    assert_eq!(e.0[0].message, "task name \"\" is empty");
    assert_eq!((e.0[0].line, e.0[0].col), (1, 12));
    let e = rtapp_errors("{\"tasks\": {\n  \" \t\": {\"run\": 1000, \"sleep\": 1000}}}");
    assert!(e.0[0].message.contains("is empty"), "{e}");
    assert_eq!(e.0[0].line, 2);
    for name in [
        "\u{200b}",
        "a\u{202e}b",
        "\u{2066}x",
        "\u{feff}",
        "soft\u{ad}",
    ] {
        let json = format!(r#"{{"tasks": {{"{name}": {{"run": 1000, "sleep": 1000}}}}}}"#);
        let e = rtapp_errors(&json);
        assert_eq!(e.len(), 1, "{e}");
        assert!(
            e.0[0].message.contains("invisible formatting character U+"),
            "{e}"
        );
    }
}

#[test]
fn names_must_not_hide_characters() {
    let e = errors(
        "[[scheduler]]\nname = \"\\u200b\"\npolicy = \"fp\"\n\
         [[principal]]\nname = \"p\\u2060\"\n\
         [[queue]]\nname = \"q\\u00ad\"\nsize = 1\n\
         [[thread]]\nname = \"\\u202e\\u2066\"\nscheduler = \"fp\"\nworkload = { kind = \"cpu-bound\" }\n",
    );
    let found: Vec<(u32, &str)> = e.iter().map(|e| (e.line, e.message.as_str())).collect();
    for (line, message) in [
        (
            2,
            "`name` contains the invisible formatting character U+200B",
        ),
        (
            5,
            "`name` contains the invisible formatting character U+2060",
        ),
        (
            7,
            "`name` contains the invisible formatting character U+00AD",
        ),
        (
            10,
            "`name` contains the invisible formatting character U+202E",
        ),
    ] {
        assert!(found.contains(&(line, message)), "{line}: {e}");
    }
    // Visible non-ASCII names stay fine, zero-width joiners between
    // visible characters too (Persian words, emoji sequences).
    parse_str(
        "[[scheduler]]\nname = \"vidéo-日本\"\npolicy = \"fp\"\n\
         [[thread]]\nname = \"می\\u200cخواهم-👩\\u200d💻\"\nscheduler = \"vidéo-日本\"\n\
         workload = { kind = \"cpu-bound\" }\n",
        "t.toml",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    // But not a name of nothing else.
    let e = errors("[[scheduler]]\nname = \"\\u200d\"\npolicy = \"fp\"\n");
    assert!(e.to_string().contains("only zero-width joiners"), "{e}");
}

/// `n` schedulers under one root, and `ops` operations creating more.
fn wide(n: usize, ops: usize) -> String {
    let mut t = String::from("[[scheduler]]\nname = \"s0\"\npolicy = \"fp\"\n");
    for i in 1..n {
        t += &format!(
            "[[scheduler]]\nname = \"s{i}\"\npolicy = \"fp\"\nparent = \"s0\"\nparams = {{ priority = 1 }}\n"
        );
    }
    for i in 0..ops {
        t += &format!(
            "[[at]]\ntime = \"1s\"\nop = \"create-scheduler\"\nscheduler = {{ name = \"c{i}\", policy = \"fp\", parent = \"s0\", params = {{ priority = 1 }} }}\n"
        );
    }
    t
}

#[test]
fn schedulers_are_limited_in_number() {
    let e = errors(&wide(10_001, 0));
    assert_eq!(e.len(), 1, "{e}");
    assert!(
        e.0[0]
            .message
            .starts_with("[[scheduler]] #10001 makes the file too large"),
        "{e}"
    );
    assert_eq!(e.0[0].line, 3 + 5 * 9_999 + 1);
    // Operations count too: the second one here is one too many.
    let e = errors(&wide(9_999, 2));
    assert_eq!(e.len(), 1, "{e}");
    assert!(
        e.0[0]
            .message
            .contains("`create-scheduler` operation makes the file too large"),
        "{e}"
    );
    assert_eq!(e.0[0].line, 3 + 5 * 9_998 + 4 + 1);
}

/// A chain of `n` schedulers, each the parent of the next.
fn chain(n: usize) -> String {
    let mut t = String::from("[[scheduler]]\nname = \"s0\"\npolicy = \"fp\"\n");
    for i in 1..n {
        t += &format!(
            "[[scheduler]]\nname = \"s{i}\"\npolicy = \"fp\"\nparent = \"s{}\"\nparams = {{ priority = 1 }}\n",
            i - 1
        );
    }
    t
}

#[test]
fn hierarchies_are_limited_in_depth() {
    parse_str(&chain(64), "t.toml").unwrap_or_else(|e| panic!("{e}"));
    let e = errors(&chain(1000));
    assert_eq!(e.len(), 1, "{e}");
    assert_eq!(
        e.0[0].message,
        "scheduler `s64` is nested 65 levels deep: s64 -> s63 -> s62 -> ... -> s1 -> s0 (each name is followed by its parent)"
    );
    // At its `parent` line.
    assert_eq!(e.0[0].line, 3 + 5 * 63 + 4);
    // A scheduler created under the deepest one is one level too deep.
    let text = chain(64)
        + "[[at]]\ntime = \"1s\"\nop = \"create-scheduler\"\n\
           scheduler = { name = \"x\", policy = \"fp\", parent = \"s63\", params = { priority = 1 } }\n";
    let e = errors(&text);
    assert_eq!(e.len(), 1, "{e}");
    assert!(
        e.0[0]
            .message
            .contains("`x` created at 1s would be nested 65 levels deep"),
        "{e}"
    );
}

#[test]
fn phases_are_refused_where_they_go_over_the_limit() {
    let phases: Vec<String> = (0..200_000)
        .map(|i| format!("\"p{i}\": {{\"run\": 1}}"))
        .collect();
    let json = format!(
        "{{\"tasks\": {{\"a\": {{\"phases\": {{{}}}}}}}}}",
        phases.join(", ")
    );
    let e = rtapp_errors(&json);
    assert_eq!(e.len(), 1, "{e}");
    assert_eq!(
        e.0[0].message,
        "task `a`: unrolling its phases up to phase `p100000` gives 100001 steps"
    );
    // The column counts characters on a line of megabytes; the line is too
    // long to quote.
    assert_eq!(e.0[0].col as usize, json.find("\"p100000\"").unwrap() + 1);
    assert_eq!(e.0[0].source_line, None);
}

#[test]
fn tasks_past_the_limit_give_one_error() {
    let tasks: Vec<String> = (0..100_005)
        .map(|i| format!("\"t{i}\": {{\"run\": 1000, \"sleep\": 1000}}"))
        .collect();
    let e = rtapp_errors(&format!("{{\"tasks\": {{{}}}}}", tasks.join(",\n")));
    assert_eq!(e.len(), 1, "{e}");
    assert!(
        e.0[0]
            .message
            .starts_with("task `t100000` makes the file too large"),
        "{e}"
    );
    assert_eq!(e.0[0].line, 100_001);
}

#[test]
fn threads_past_the_limit_give_one_error() {
    let mut text = String::from("[[scheduler]]\nname = \"ts\"\npolicy = \"ts\"\n");
    text.push_str(&one_thread_named("big", 99_999));
    for i in 0..5 {
        text.push_str(&one_thread_named(&format!("t{i}"), 1));
    }
    let e = errors(&text);
    assert_eq!(e.len(), 1, "{e}");
    assert!(
        e.0[0]
            .message
            .starts_with("thread `t1` makes the file too large"),
        "{e}"
    );
}

#[test]
fn a_flood_of_errors_shows_the_first_hundred_and_counts_them_all() {
    let text: String = (0..250).map(|i| format!("[t{i}]\na = 1\n")).collect();
    let e = errors(&text);
    assert_eq!(e.len(), 250);
    let shown = e.to_string();
    assert_eq!(shown.matches("error: unknown key").count(), 100, "{shown}");
    assert!(
        shown.ends_with("found 250 errors; the first 100 are shown\n"),
        "{shown}"
    );
}

fn one_thread_named(name: &str, count: u32) -> String {
    format!("[[thread]]\nname = \"{name}\"\nscheduler = \"ts\"\ncount = {count}\nworkload = {{ kind = \"cpu-bound\" }}\n")
}

#[test]
fn an_rtapp_thread_without_an_rtapp_file_is_explained_in_file_terms() {
    let h = parse_str(
        "[[scheduler]]\nname = \"fp\"\npolicy = \"fp\"\n\
         [[thread]]\nname = \"t\"\nscheduler = \"fp\"\nrtapp = \"x\"\n",
        "t.toml",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let e = h.check_simulatable().unwrap_err();
    assert_eq!(e.len(), 1);
    let text = e.to_string();
    assert!(text.contains("no rt-app file is given"), "{text}");
    assert!(
        text.contains("`[workload] rtapp = \"tasks.json\"`"),
        "{text}"
    );
    assert!(text.contains("--workload"), "{text}");
    assert!(!text.contains("`load`"), "{text}");
}

#[test]
fn pulses_cannot_make_items_shorter_than_the_shortest_interval() {
    let source = |pulses: &str| {
        format!(
            "[[queue]]\nname = \"q\"\nsize = 4\n[[scheduler]]\nname = \"fp\"\npolicy = \"fp\"\n\
             [[thread]]\nname = \"t\"\nscheduler = \"fp\"\n\
             workload = {{ kind = \"stage\", output = \"q\", cost = \"1us\", pulses = [{pulses}] }}\n"
        )
    };
    let e = errors(&source(
        "{ start = \"0s\", length = \"1s\", factor = 1000000 }",
    ));
    assert_eq!(e.len(), 1, "{e}");
    assert!(e.0[0].message.contains("1ns"), "{e}");
    assert!(e.0[0].message.contains("shorter than 1us"), "{e}");
    // Overlapping pulses multiply; end to end, each alone is within bounds.
    let two = |second: &str| {
        source(&format!(
            "{{ start = \"0s\", length = \"1s\" }}, {{ start = \"{second}\", length = \"1s\" }}"
        ))
        .replace("cost = \"1us\"", "cost = \"3us\"")
    };
    let e = errors(&two("500ms"));
    assert!(e.0[0].message.contains("750ns"), "{e}");
    parse_str(&two("1s"), "t.toml").unwrap();
    // A slower source is no problem.
    parse_str(
        &source("{ start = \"0s\", length = \"1s\", factor = 0.001 }"),
        "t.toml",
    )
    .unwrap();
}

#[test]
fn a_nice_scaled_quantum_is_never_shorter_than_the_shortest_interval() {
    for policy in ["best", "best-rate", "linux24"] {
        let file = |q: &str| {
            format!("[[scheduler]]\nname = \"b\"\npolicy = \"{policy}\"\nquantum = \"{q}\"\n")
        };
        // At nice 19 a child's quantum is 1/20 of it: 50 ns.
        let e = errors(&file("1us"));
        assert_eq!(e.len(), 1, "{policy}: {e}");
        assert!(e.0[0].message.contains("quantum"), "{policy}: {e}");
        assert!(
            e.0[0].to_string().contains("at least 20us"),
            "{policy}: {e}"
        );
        parse_str(&file("20us"), "t.toml").unwrap();
    }
}

#[test]
fn a_long_cpus_list_is_one_error_per_kind_of_problem() {
    // A million entries: one error for the repeats, one for the CPUs the
    // machine lacks and one for the entries that are no CPU number, not
    // one per entry (each a few hundred bytes: a 16 MiB file of them took
    // gigabytes).
    let n = 1_000_000;
    let mut list: Vec<String> = Vec::with_capacity(n);
    for k in 0..n {
        list.push(match k % 4 {
            0 | 1 => "0".to_string(),
            2 => (k + 8).to_string(),
            _ => "\"x\"".to_string(),
        });
    }
    let text = format!(
        "[machine]\ncpus = 2\n[[scheduler]]\nname = \"fp\"\npolicy = \"fp\"\ncpus = [{}]\n",
        list.join(", ")
    );
    let e = errors(&text);
    let shown = e.to_string();
    assert_eq!(e.len(), 1, "{shown}");
    assert!(
        shown.contains("is not a CPU number") || shown.contains("integer"),
        "{shown}"
    );
    // Without the bad entries, the CPUs beyond the machine and the repeats.
    let text = text.replace(", \"x\"", "");
    let e = errors(&text);
    let shown = e.to_string();
    assert_eq!(e.len(), 2, "{shown}");
    assert!(
        shown.contains("root `fp` lists CPU 0 500000 times"),
        "{shown}"
    );
    assert!(
        shown.contains(
            "root `fp` names CPUs 10, 14, 18, 22, 26 and 249995 more, but the machine has 2 CPUs"
        ),
        "{shown}"
    );
}
