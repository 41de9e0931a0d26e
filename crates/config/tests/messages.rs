//! Messages that say what the code does: durations, shares and rt-app
//! limits are refused with the reason that applies, and what is accepted
//! reads back.

use hsched_config::*;

const SCHED: &str = "[[scheduler]]\nname = \"root\"\npolicy = \"ts\"\n";
const BASE: &str = "[machine]\ncpus = 1\n[[scheduler]]\nname = \"root\"\npolicy = \"ts\"\n";

fn errors(text: &str) -> Vec<ConfigError> {
    match parse_str(text, "m.toml") {
        Ok(_) => Vec::new(),
        Err(e) => e.0,
    }
}

/// A bare non-finite number is not "a number without its unit": `nan`
/// plus a unit is no duration either.
#[test]
fn a_non_finite_duration_is_not_told_to_add_a_unit() {
    for key in ["time = nan", "time = inf", "time = -inf"] {
        let text = format!(
            "{BASE}[[thread]]\nname = \"a\"\nscheduler = \"root\"\nworkload = {{ kind = \"cpu-bound\" }}\n\
             [[at]]\n{key}\nop = \"set-params\"\nthread = \"a\"\nparams = {{ priority = 1 }}\n"
        );
        let e = errors(&text);
        assert_eq!(e.len(), 1, "{key}: {e:?}");
        assert!(
            e[0].message
                .contains("a duration is a finite number with a unit"),
            "{key}: {}",
            e[0].message
        );
        assert_eq!(e[0].hint, None, "{key}");
    }
    // In parameters, which may be numbers or durations.
    let text = "[[scheduler]]\nname = \"r\"\npolicy = \"rez\"\n[[thread]]\nname = \"a\"\n\
        scheduler = \"r\"\nworkload = { kind = \"cpu-bound\" }\n\
        params = { amount = \"1ms\", period = nan }\n";
    let e = errors(text);
    assert_eq!(e.len(), 1, "{e:?}");
    assert!(
        e[0].expected
            .as_deref()
            .unwrap_or("")
            .contains("a finite number with a unit"),
        "{:?}",
        e[0]
    );
}

/// docs/hierarchy-format.md: a bare number is an error except zero, and a
/// zero needs no unit in quotes either.
#[test]
fn zero_needs_no_unit() {
    for v in ["0", "\"0\"", "\"0.0\"", "\"0ms\""] {
        let text = format!("[machine]\ncpus = 1\ncontext_switch = {v}\n{SCHED}");
        parse_str(&text, "m.toml").unwrap_or_else(|e| panic!("{v}: {e}"));
    }
    for v in ["\"0.5\"", "\"1\"", "5"] {
        let text = format!("[machine]\ncpus = 1\ncontext_switch = {v}\n{SCHED}");
        let e = errors(&text);
        assert!(e.len() == 1 && e[0].message.contains("unit"), "{v}: {e:?}");
    }
}

/// hsched prints a share with six decimals: a smaller share would print as
/// `PS 0`, which it refuses to read, so it is refused where it is read.
#[test]
fn shares_too_small_to_print_are_refused() {
    let with = |g: &str| {
        format!(
            "{BASE}[[thread]]\nname = \"a\"\nscheduler = \"root\"\nguarantee = \"{g}\"\n\
             workload = {{ kind = \"cpu-bound\" }}\n"
        )
    };
    for g in ["PS 1e-300", "PSBE 0.0000001 5", "RESU 1e-7", "PS 0.00001%"] {
        let e = errors(&with(g));
        assert_eq!(e.len(), 1, "{g}: {e:?}");
        assert!(
            e[0].message
                .contains("smaller than 0.000001, the smallest share hsched prints"),
            "{g}: {}",
            e[0].message
        );
    }
    // The smallest accepted share prints as itself and reads back.
    for g in ["PS 0.000001", "PS 0.0001%", "RESU 0.000001"] {
        let parsed: hsched_guarantee::Guarantee = g.parse().unwrap();
        let printed = parsed.to_string();
        assert_eq!(
            printed.parse::<hsched_guarantee::Guarantee>(),
            Ok(parsed),
            "{g}"
        );
        assert!(
            errors(&with(g))
                .iter()
                .all(|e| !e.message.contains("bad guarantee")),
            "{g}"
        );
    }
}

fn rtapp_events(n: usize, phase: bool) -> String {
    let events: Vec<String> = (0..n).map(|i| format!("\"run{i}\": 10")).collect();
    let events = events.join(", ");
    if phase {
        format!("{{\"tasks\": {{\"t\": {{\"phases\": {{\"p\": {{\"loop\": 3, {events}}}}}}}}}}}")
    } else {
        format!("{{\"tasks\": {{\"t\": {{{events}}}}}}}")
    }
}

/// docs/hierarchy-format.md bounds a task to 100 000 steps, with or without
/// phases, one phase or several.
#[test]
fn an_rtapp_task_of_more_than_100_000_events_is_refused() {
    for phase in [false, true] {
        parse_rtapp(&rtapp_events(100_000, phase), "w.json")
            .unwrap_or_else(|e| panic!("phase {phase}: {e}"));
        let e = parse_rtapp(&rtapp_events(100_001, phase), "w.json").unwrap_err();
        assert_eq!(e.len(), 1, "{e}");
        assert!(
            e.0[0]
                .message
                .contains("task `t` has more than 100000 events: `run100000` is one too many"),
            "{e}"
        );
    }
}

/// Instances are named `NAME-1`, `NAME-2`: a task of that name collides
/// with the instance, not with a `[[thread]]` of the hierarchy.
#[test]
fn an_instance_colliding_with_a_task_names_both() {
    let one = r#""a": {"instance": 2, "run": 1000, "sleep": 1000}"#;
    let two = r#""a-1": {"run": 1000, "sleep": 1000}"#;
    let e = parse_rtapp(&format!("{{\"tasks\": {{{one}, {two}}}}}"), "w.json").unwrap_err();
    assert_eq!(e.len(), 1, "{e}");
    assert_eq!(
        e.0[0].message,
        "instance 2 of task `a` and task `a-1` are both named `a-1`"
    );
    let e = parse_rtapp(&format!("{{\"tasks\": {{{two}, {one}}}}}"), "w.json").unwrap_err();
    assert_eq!(
        e.0[0].message,
        "task `a-1` and instance 2 of task `a` are both named `a-1`"
    );
    assert!(!e.to_string().contains("[[thread]]"), "{e}");
}

/// Errors a user cannot fix from the message alone say where to look.
#[test]
fn missing_and_unknown_parameters_and_schedulers_have_hints() {
    let text = "[[scheduler]]\nname = \"root\"\npolicy = \"fp\"\n\
        [[scheduler]]\nname = \"rez\"\npolicy = \"rez\"\nparent = \"root\"\nparams = { priority = 1 }\n\
        [[thread]]\nname = \"a\"\nscheduler = \"rez\"\nparams = { amount = \"1ms\", zzz = 1 }\n\
        workload = { kind = \"cpu-bound\" }\nstart = \"2s\"\nexit = \"1s\"\n\
        [[at]]\ntime = \"3s\"\nop = \"move-thread\"\nthread = \"a\"\nto = \"elsewhere\"\n";
    let e = errors(text);
    let hint_of = |needle: &str| -> String {
        let e = e
            .iter()
            .find(|e| e.message.contains(needle))
            .unwrap_or_else(|| panic!("no error with {needle}: {e:?}"));
        e.hint.clone().unwrap_or_else(|| panic!("no hint: {e:?}"))
    };
    assert!(hint_of("has no `period`").contains("`hsched policies rez` describes"));
    assert!(hint_of("unknown parameter `zzz`").contains("`hsched policies rez` describes"));
    assert!(hint_of("not after it starts").contains("leave `exit` out"));
    assert!(hint_of("uses `elsewhere`").contains("create-scheduler"));
}
