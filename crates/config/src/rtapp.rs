//! rt-app workload files (JSON) and how their tasks become threads.
//!
//! rt-app (`scheduler-tools/rt-app`, `doc/tutorial.txt`) describes tasks as
//! loops of events. hsched reads the events that describe CPU demand and
//! timing (`run`, `runtime`, `sleep`, `timer`), the structure (`instance`,
//! `loop`, `phases`, `delay`) and the scheduling fields (`policy`,
//! `priority`, `dl-runtime`, `dl-period`, `dl-deadline`, `cpus`). Everything
//! else that would change what the task does (locks, barriers, memory and
//! I/O load, suspend/resume, forks, cgroups, utilization clamps) is an error
//! naming the field and the task: nothing is silently dropped. Global keys
//! that only affect rt-app's own logging or calibration are accepted and
//! ignored (see `docs/hierarchy-format.md`).
//!
//! Numbers are microseconds, as in rt-app.

use crate::check::{check_child_params, check_timeline, find_policy, TimelineSites};
use crate::error::{did_you_mean, one_of, one_of_these, ConfigError, ConfigErrors, Source};
use crate::json::{self, ByteSpan, JKey, JVal, J};
use crate::model::*;
use crate::read::{unprintable, Diag};
use hsched_core::time::{MAX_PARSED, MAX_PARSED_TEXT};
use hsched_core::{Duration, ParamValue, Params};
use hsched_policies::PolicyInfo;
use std::collections::{BTreeMap, BTreeSet};

/// Events hsched runs.
const SUPPORTED_EVENTS: &[&str] = &["run", "runtime", "sleep", "timer"];
/// rt-app's event names, in the order rt-app matches them (by prefix:
/// `"run2"` is a `run` event, `"runtime"` is not a `run`).
const EVENTS: &[&str] = &[
    "lock", "unlock", "wait", "signal", "broad", "sync", "sleep", "runtime", "run", "timer",
    "suspend", "resume", "memrun", "mem", "iorun", "yield", "barrier", "fork", "sem_post",
    "sem_wait",
];
const TASK_KEYS: &[&str] = &[
    "instance",
    "loop",
    "phases",
    "delay",
    "policy",
    "priority",
    "dl-runtime",
    "dl-period",
    "dl-deadline",
    "cpus",
];
const UNSUPPORTED_TASK_KEYS: &[(&str, &str)] = &[
    (
        "nodes_membind",
        "NUMA memory binding does not change CPU scheduling in hsched's model",
    ),
    (
        "util_min",
        "utilization clamping (uclamp) is a frequency/placement hint hsched does not model",
    ),
    (
        "util_max",
        "utilization clamping (uclamp) is a frequency/placement hint hsched does not model",
    ),
    (
        "taskgroup",
        "cgroup task groups are not modelled; put the tasks under their own scheduler instead",
    ),
    (
        "period",
        "this is rt-app's legacy name for `dl-period`; write `dl-period`",
    ),
    (
        "deadline",
        "this is rt-app's legacy name for `dl-deadline`; write `dl-deadline`",
    ),
];
const GLOBAL_KEYS: &[&str] = &["duration", "default_policy"];
/// Global keys that only affect rt-app's logs, calibration or resources of
/// unsupported events; they cannot change a simulation.
const IGNORED_GLOBAL_KEYS: &[&str] = &[
    "calibration",
    "logdir",
    "log_basename",
    "log_size",
    "ftrace",
    "gnuplot",
    "lock_pages",
    "pi_enabled",
    "io_device",
    "mem_buffer_size",
    "cumulative_slack",
];
const POLICIES: &[&str] = &["SCHED_OTHER", "SCHED_FIFO", "SCHED_RR", "SCHED_DEADLINE"];
/// rt-app's priority for SCHED_FIFO/SCHED_RR tasks that give none.
const DEFAULT_RT_PRIORITY: i64 = 10;
/// Most steps a task's program may have once phases are unrolled.
const MAX_STEPS: usize = 100_000;
/// Most threads one file may create through `instance`.
const MAX_THREADS: usize = 100_000;
/// Longest `global.duration`, s (about 136 years; hsched's times are u64
/// nanoseconds, which reach 584 years).
pub(crate) const MAX_DURATION_S: i64 = 1 << 32;
/// Most program steps one file may expand to, over all its threads.
pub(crate) const MAX_TOTAL_STEPS: usize = 10_000_000;

/// The zero-time problem of a program, if any: looping forever over steps
/// that take no time would stop simulated time.
pub(crate) fn program_problem(p: &Program) -> Option<String> {
    if p.loops.is_some() {
        return None;
    }
    let takes_time = p.steps.iter().any(|s| match s {
        Step::Run(d) | Step::Runtime(d) | Step::Sleep(d) => *d > Duration::ZERO,
        Step::Timer { period, .. } => *period > Duration::ZERO,
    });
    (!takes_time).then(|| "this program loops forever over steps that take no time".to_string())
}

/// How long one pass over a program's steps takes at least: its CPU
/// time, sleeps and timer periods (a timer waits up to one period).
pub(crate) fn pass_time(p: &Program) -> Duration {
    p.steps.iter().fold(Duration::ZERO, |t, s| match s {
        Step::Run(d) | Step::Runtime(d) | Step::Sleep(d) => t.saturating_add(*d),
        Step::Timer { period, .. } => t.saturating_add(*period),
    })
}

/// A duration as text in the largest unit that keeps it exact (`"33333us"`,
/// `"11ms"`), so parameters round-trip without rounding.
fn exact(d: Duration) -> String {
    let ns = d.as_nanos();
    for (scale, unit) in [(1_000_000_000, "s"), (1_000_000, "ms"), (1_000, "us")] {
        if ns > 0 && ns.is_multiple_of(scale) {
            return format!("{}{unit}", ns / scale);
        }
    }
    format!("{ns}ns")
}

/// Whether `name` matches `pattern`, where `*` matches any run of
/// characters and `?` exactly one.
pub fn glob_match(pattern: &str, name: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let n: Vec<char> = name.chars().collect();
    let (mut pi, mut ni) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == n[ni]) {
            pi += 1;
            ni += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ni));
            pi += 1;
        } else if let Some((sp, sn)) = star {
            pi = sp + 1;
            ni = sn + 1;
            star = Some((sp, sn + 1));
        } else {
            return false;
        }
    }
    while pi < p.len() && p[pi] == '*' {
        pi += 1;
    }
    pi == p.len()
}

fn event_of(key: &str) -> Option<&'static str> {
    EVENTS.iter().copied().find(|e| key.starts_with(e))
}

struct Rd<'s> {
    src: Source<'s>,
    errs: Vec<ConfigError>,
    /// Program steps of the tasks read so far (bounded by MAX_TOTAL_STEPS).
    steps: usize,
    /// A task went over MAX_THREADS or MAX_TOTAL_STEPS: the rest are not
    /// read (each would only repeat that error).
    full: bool,
    /// The thread names made so far: the task and instance each comes from.
    names: BTreeMap<String, (String, usize)>,
}

/// A thread made from an rt-app task, as messages name it.
fn instance_name(task: &str, k: usize) -> String {
    if k == 0 {
        format!("task `{task}`")
    } else {
        format!("instance {} of task `{task}`", k + 1)
    }
}

impl Rd<'_> {
    fn err(
        &mut self,
        span: impl Into<std::ops::Range<usize>>,
        message: impl Into<String>,
    ) -> &mut ConfigError {
        let e = self.src.error(span.into(), message);
        self.errs.push(e);
        self.errs.last_mut().expect("just pushed")
    }

    /// An integer value.
    fn int(&mut self, v: &J, what: &str) -> Option<i64> {
        self.int_of(v, what, "an integer")
    }

    /// [`int`](Self::int) saying what the integer counts in the error.
    fn int_of(&mut self, v: &J, what: &str, expected: &str) -> Option<i64> {
        match &v.v {
            JVal::Num(n) if n.int.is_some() => n.int,
            other => {
                let k = other.kind();
                set(
                    self.err(v.span, format!("{what} must be an integer, found {k}")),
                    Some(expected),
                    None,
                );
                None
            }
        }
    }

    /// A non-negative integer of microseconds, no longer than the longest
    /// duration a hierarchy file may give.
    fn micros(&mut self, v: &J, what: &str) -> Option<Duration> {
        let n = self.int_of(v, what, "an integer (rt-app times are microseconds)")?;
        if n < 0 {
            set(
                self.err(v.span, format!("{what} is negative ({n})")),
                Some("a number of microseconds, 0 or more"),
                None,
            );
            return None;
        }
        let max = MAX_PARSED.as_nanos() / 1000;
        if n as u64 > max {
            set(
                self.err(v.span, format!("{what} is too long ({n} us)")),
                Some(&format!(
                    "at most {max} us (the longest duration is {MAX_PARSED_TEXT})"
                )),
                None,
            );
            return None;
        }
        Some(Duration::from_micros(n as u64))
    }

    fn obj<'j, 't>(&mut self, v: &'j J<'t>, what: &str) -> Option<&'j [(JKey<'t>, J<'t>)]> {
        match &v.v {
            JVal::Obj(m) => Some(m),
            other => {
                let k = other.kind();
                set(
                    self.err(v.span, format!("{what} must be an object, found {k}")),
                    Some("an object `{ ... }`"),
                    None,
                );
                None
            }
        }
    }

    /// Reports keys that appear twice in an object (except events, which
    /// run in order like rt-app's `workgen` does with repeated keys).
    fn duplicates(&mut self, m: &[(JKey, J)], what: &str, events_ok: bool) {
        let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
        for (k, _) in m {
            if events_ok && event_of(&k.name).is_some() {
                continue;
            }
            if let Some(&first) = seen.get(&*k.name) {
                let (line, col) = self.src.line_col(first);
                set(
                    self.err(k.span, format!("`{}` appears twice in {what}", k.name)),
                    Some("each key once"),
                    Some(format!("the first one is at {line}:{col}")),
                );
            } else {
                seen.insert(&k.name, k.span.start());
            }
        }
    }
}

fn set(e: &mut ConfigError, expected: Option<&str>, hint: Option<String>) {
    e.expected = expected.map(str::to_string);
    e.hint = hint;
}

/// Parses an rt-app JSON file (`file_name` is for messages).
///
/// # Errors
/// Every problem found, each with its line and column: JSON syntax, unknown
/// or unsupported keys and events (named with their task), bad values.
pub fn parse_rtapp(json_text: &str, file_name: &str) -> Result<RtAppWorkload, ConfigErrors> {
    let mut rd = Rd {
        src: Source::new(file_name, json_text),
        errs: Vec::new(),
        steps: 0,
        full: false,
        names: BTreeMap::new(),
    };
    let doc = match json::parse(json_text) {
        Ok(d) => d,
        Err(e) => {
            let err = rd
                .src
                .error(e.span.into(), format!("invalid JSON: {}", e.message))
                .expected(e.expected);
            return Err(ConfigErrors::one(err));
        }
    };
    let Some(top) = rd.obj(&doc, "an rt-app file") else {
        return Err(ConfigErrors(rd.errs));
    };
    rd.duplicates(top, "the file", false);
    let mut duration = None;
    let mut default_policy = "SCHED_OTHER".to_string();
    let mut tasks_v = None;
    for (k, v) in top {
        match &*k.name {
            "tasks" => tasks_v = Some(v),
            "global" => {
                let Some(g) = rd.obj(v, "`global`") else {
                    continue;
                };
                rd.duplicates(g, "`global`", false);
                for (gk, gv) in g {
                    match &*gk.name {
                        "duration" => {
                            // rt-app: a duration of 0 or less means "until the tasks end".
                            match rd.int_of(gv, "`duration`", "an integer number of seconds") {
                                Some(s) if s > MAX_DURATION_S => set(
                                    rd.err(
                                        gv.span,
                                        format!("`duration` of {s} s is longer than hsched runs"),
                                    ),
                                    Some(&format!(
                                        "at most {MAX_DURATION_S} s, or 0 or less for \"until the tasks end\""
                                    )),
                                    None,
                                ),
                                Some(s) => {
                                    duration = (s > 0).then(|| Duration::from_secs(s as u64));
                                }
                                None => {}
                            }
                        }
                        "default_policy" => {
                            if let Some(p) = policy_name(&mut rd, gv, "`default_policy`") {
                                default_policy = p;
                            }
                        }
                        other if IGNORED_GLOBAL_KEYS.contains(&other) => {}
                        other => {
                            let all: Vec<&str> = GLOBAL_KEYS
                                .iter()
                                .chain(IGNORED_GLOBAL_KEYS)
                                .copied()
                                .collect();
                            set(
                                rd.err(gk.span, format!("unknown key `{other}` in `global`")),
                                Some(&one_of(&all)),
                                did_you_mean(other, all.iter().copied()),
                            );
                        }
                    }
                }
            }
            "resources" => {
                set(
                    rd.err(k.span, "`resources` is not supported: it declares mutexes, conditions, barriers and other shared objects that hsched does not model"),
                    Some("`tasks` and `global`"),
                    None,
                );
            }
            other => {
                set(
                    rd.err(
                        k.span,
                        format!("unknown key `{other}` at the top of an rt-app file"),
                    ),
                    Some("`tasks` and `global`"),
                    did_you_mean(other, ["tasks", "global"]),
                );
            }
        }
    }
    let mut tasks = Vec::new();
    match tasks_v {
        None => set(
            rd.err(
                doc.span.start()..doc.span.start() + 1,
                "the rt-app file has no `tasks`",
            ),
            Some("`\"tasks\": { \"name\": { ... } }`"),
            None,
        ),
        Some(tv) => {
            if let Some(m) = rd.obj(tv, "`tasks`") {
                rd.duplicates(m, "`tasks`", false);
                let mut timer_owner: BTreeMap<String, String> = BTreeMap::new();
                for (k, v) in m {
                    read_task(&mut rd, k, v, &default_policy, &mut timer_owner, &mut tasks);
                    if rd.full {
                        break;
                    }
                }
                if m.is_empty() {
                    set(
                        rd.err(tv.span, "`tasks` is empty"),
                        Some("at least one task"),
                        None,
                    );
                }
            }
        }
    }
    if rd.errs.is_empty() {
        Ok(RtAppWorkload {
            duration,
            tasks,
            file: file_name.to_string(),
        })
    } else {
        let mut e = ConfigErrors(rd.errs);
        e.sort();
        Err(e)
    }
}

fn policy_name(rd: &mut Rd<'_>, v: &J, what: &str) -> Option<String> {
    let JVal::Str(s) = &v.v else {
        let k = v.v.kind();
        set(
            rd.err(v.span, format!("{what} must be a string, found {k}")),
            Some(&one_of(POLICIES)),
            None,
        );
        return None;
    };
    if POLICIES.contains(&s.as_ref()) {
        return Some(s.to_string());
    }
    if s == "SCHED_BATCH" || s == "SCHED_IDLE" {
        set(rd.err(v.span, format!("{what} `{s}` is not supported")), Some(&one_of(POLICIES)), Some("hsched maps rt-app policies onto its own schedulers; SCHED_BATCH and SCHED_IDLE have no counterpart".into()));
    } else {
        set(
            rd.err(v.span, format!("{what} `{s}` is not a scheduling policy")),
            Some(&one_of(POLICIES)),
            did_you_mean(s, POLICIES.iter().copied()),
        );
    }
    None
}

/// Reads the events of one object (a phase, or a task without phases) into
/// steps. Reports unsupported events and unknown keys; `extra` lists the
/// other keys allowed there. Returns the steps read and whether the object
/// has any event at all.
fn read_events(
    rd: &mut Rd<'_>,
    m: &[(JKey, J)],
    task: &str,
    extra: &[&str],
    timers: &mut BTreeSet<String>,
) -> (Vec<Step>, bool) {
    let mut steps = Vec::new();
    let mut any_event = false;
    for (k, v) in m {
        let name = &*k.name;
        if extra.contains(&name) {
            continue;
        }
        let Some(ev) = event_of(name) else {
            if let Some((_, why)) = UNSUPPORTED_TASK_KEYS.iter().find(|(u, _)| *u == name) {
                set(
                    rd.err(
                        k.span,
                        format!("`{name}` in task `{task}` is not supported"),
                    ),
                    Some(&format!(
                        "events {} and keys {}",
                        one_of(SUPPORTED_EVENTS),
                        one_of(extra)
                    )),
                    Some(why.to_string()),
                );
            } else {
                let all: Vec<&str> = SUPPORTED_EVENTS.iter().chain(extra).copied().collect();
                set(
                    rd.err(k.span, format!("unknown key `{name}` in task `{task}`")),
                    Some(&one_of(&all)),
                    did_you_mean(name, all.iter().copied()),
                );
            }
            continue;
        };
        any_event = true;
        if steps.len() >= MAX_STEPS {
            set(
                rd.err(
                    k.span,
                    format!("task `{task}` has more than {MAX_STEPS} events: `{name}` is one too many"),
                ),
                Some(&format!("at most {MAX_STEPS} steps")),
                Some("hsched runs a task's events as one program of at most that many steps; loop over fewer events instead".into()),
            );
            break;
        }
        if !SUPPORTED_EVENTS.contains(&ev) {
            set(
                rd.err(k.span, format!("rt-app event `{name}` in task `{task}` is not supported")),
                Some(&format!("the events {} (by prefix: `run0`, `sleep1`, ...)", one_of(SUPPORTED_EVENTS))),
                Some(format!("hsched models CPU demand and timing only; `{ev}` needs shared objects, memory or I/O that the simulator does not have")),
            );
            continue;
        }
        match ev {
            "run" | "runtime" | "sleep" => {
                let Some(d) = rd.micros(v, &format!("`{name}` in task `{task}`")) else {
                    continue;
                };
                steps.push(match ev {
                    "run" => Step::Run(d),
                    "runtime" => Step::Runtime(d),
                    _ => Step::Sleep(d),
                });
            }
            _ => {
                let Some(t) = rd.obj(v, &format!("`{name}` in task `{task}`")) else {
                    continue;
                };
                let mut period = None;
                let mut absolute = false;
                let mut reference = "unknown".to_string();
                for (tk, tv) in t {
                    match &*tk.name {
                        "period" => period = rd.micros(tv, &format!("the timer period in task `{task}`")),
                        "mode" => match &tv.v {
                            JVal::Str(s) if s == "absolute" => absolute = true,
                            JVal::Str(s) if s == "relative" => absolute = false,
                            _ => set(rd.err(tv.span, format!("timer `mode` in task `{task}` must be \"absolute\" or \"relative\"")), Some("\"absolute\" or \"relative\" (the default)"), None),
                        },
                        "ref" => match &tv.v {
                            JVal::Str(s) => reference = s.to_string(),
                            _ => set(rd.err(tv.span, format!("timer `ref` in task `{task}` must be a string")), Some("\"unique\", or a timer name"), None),
                        },
                        other => set(rd.err(tk.span, format!("unknown key `{other}` in a timer of task `{task}`")), Some("`ref`, `period` and `mode`"), did_you_mean(other, ["ref", "period", "mode"])),
                    }
                }
                timers.insert(reference);
                match period {
                    // A zero period never waits (rt-app sets the next expiry to now).
                    Some(p) if p > Duration::ZERO => steps.push(Step::Timer {
                        period: p,
                        absolute,
                    }),
                    Some(_) => {}
                    None if !t.iter().any(|(k, _)| k.name == "period") => {
                        set(
                            rd.err(
                                v.span,
                                format!("the timer in task `{task}` has no `period`"),
                            ),
                            Some("`\"period\": N` in microseconds"),
                            None,
                        );
                    }
                    None => {}
                }
            }
        }
    }
    (steps, any_event)
}

const PHASE_SCHEDULING_KEYS: &[&str] = &[
    "policy",
    "priority",
    "dl-runtime",
    "dl-period",
    "dl-deadline",
    "cpus",
    "taskgroup",
    "util_min",
    "util_max",
    "nodes_membind",
];

fn read_task(
    rd: &mut Rd<'_>,
    key: &JKey,
    v: &J,
    default_policy: &str,
    timer_owner: &mut BTreeMap<String, String>,
    out: &mut Vec<RtAppTask>,
) {
    let name = key.name.clone();
    let before = rd.errs.len();
    // Task names become thread names, printed in tables and traces.
    if name.trim().is_empty() {
        set(
            rd.err(key.span, format!("task name {name:?} is empty")),
            Some("a non-empty name"),
            None,
        );
        return;
    }
    if let Some(c) = unprintable(&name) {
        set(
            rd.err(key.span, format!("task name {name:?} contains {c}")),
            Some("a name of printable characters"),
            None,
        );
        return;
    }
    let Some(m) = rd.obj(v, &format!("task `{name}`")) else {
        return;
    };
    rd.duplicates(m, &format!("task `{name}`"), true);
    let get = |k: &str| m.iter().find(|(x, _)| x.name == k).map(|(_, v)| v);
    let instance = match get("instance") {
        None => 1,
        Some(iv) => match rd.int(iv, &format!("`instance` of task `{name}`")) {
            Some(n) if (0..=MAX_THREADS as i64).contains(&n) => n as usize,
            Some(n) => {
                set(
                    rd.err(iv.span, format!("`instance` of task `{name}` is {n}")),
                    Some(&format!("a number of threads from 0 to {MAX_THREADS}")),
                    None,
                );
                1
            }
            None => 1,
        },
    };
    let delay = get("delay")
        .and_then(|d| rd.micros(d, &format!("`delay` of task `{name}`")))
        .unwrap_or_default();
    let task_loop = get("loop").and_then(|l| rd.int(l, &format!("`loop` of task `{name}`")));
    let params = read_sched_fields(rd, key, &get, &name, default_policy);
    let mut cpus = Vec::new();
    if let Some(cv) = get("cpus") {
        match &cv.v {
            JVal::Arr(a) => {
                for c in a {
                    match &c.v {
                        JVal::Num(n)
                            if n.int.is_some_and(|x| (0..=u32::MAX as i64).contains(&x)) =>
                        {
                            cpus.push(n.int.unwrap_or(0) as usize)
                        }
                        _ => set(
                            rd.err(
                                c.span,
                                format!("`cpus` of task `{name}` must list CPU numbers"),
                            ),
                            Some("integers 0 or more, e.g. [0, 1]"),
                            None,
                        ),
                    }
                }
                cpus.sort_unstable();
                cpus.dedup();
            }
            other => {
                let k = other.kind();
                set(
                    rd.err(
                        cv.span,
                        format!("`cpus` of task `{name}` must be an array, found {k}"),
                    ),
                    Some("a list of CPU numbers, e.g. [0, 1]"),
                    None,
                );
            }
        }
    }
    // The program.
    let mut timers = BTreeSet::new();
    let program = match get("phases") {
        None => {
            let (steps, any) = read_events(rd, m, &name, TASK_KEYS, &mut timers);
            if !any {
                set(
                    rd.err(key.span, format!("task `{name}` has no events")),
                    Some(&format!(
                        "at least one of the events {}",
                        one_of(SUPPORTED_EVENTS)
                    )),
                    None,
                );
            }
            // rt-app: without phases, `loop` counts the iterations of the
            // events; absent, zero or negative means forever.
            let loops = match task_loop {
                Some(n) if n > 0 => Some(n as u64),
                _ => None,
            };
            Some(Program {
                steps,
                loops,
                delay,
            })
        }
        Some(pv) => read_phases(rd, m, pv, &name, task_loop, delay, &mut timers),
    };
    if timers.len() > 1 {
        let list: Vec<&str> = timers.iter().map(String::as_str).collect();
        set(
            rd.err(key.span, format!("task `{name}` waits on several timers ({})", list.iter().map(|t| format!("`{t}`")).collect::<Vec<_>>().join(", "))),
            Some("one timer per task"),
            Some("hsched gives each thread one timer origin; use the same `ref` for every timer event of the task".into()),
        );
    }
    // rt-app: "unique..." refs are private to the thread; a name is one
    // timer within it (counted above).
    for t in timers.iter().filter(|t| !t.starts_with("unique")) {
        let shared = match timer_owner.get(t) {
            Some(owner) if *owner != name => Some(format!("task `{owner}`")),
            _ if instance > 1 => Some(format!("the {instance} instances of `{name}`")),
            _ => None,
        };
        if let Some(other) = shared {
            set(
                rd.err(key.span, format!("timer `{t}` of task `{name}` is shared with {other}")),
                Some("timers private to one thread (`\"ref\": \"unique\"`, or a name no other thread uses)"),
                Some("a shared rt-app timer advances once per waiter, which hsched does not model; use `\"ref\": \"unique\"`".into()),
            );
        }
        timer_owner
            .entry(t.clone())
            .or_insert_with(|| name.to_string());
    }
    let Some(mut program) = program else { return };
    if rd.errs.len() > before {
        return;
    }
    // rt-app keeps one mode per timer, absolute once any of its events
    // says so (and this task has one timer).
    if program
        .steps
        .iter()
        .any(|s| matches!(s, Step::Timer { absolute: true, .. }))
    {
        for s in &mut program.steps {
            if let Step::Timer { absolute, .. } = s {
                *absolute = true;
            }
        }
    }
    if let Some(problem) = program_problem(&program) {
        set(
            rd.err(key.span, format!("task `{name}`: {problem}")),
            Some(
                "at least one `run`, `runtime` or `sleep` longer than 0, or a timer with a period",
            ),
            None,
        );
        return;
    }
    // Bound what one file may expand to (threads, and steps in all).
    let more = instance.saturating_mul(program.steps.len().max(1));
    if out.len() + instance > MAX_THREADS || rd.steps.saturating_add(more) > MAX_TOTAL_STEPS {
        set(
            rd.err(key.span, format!("task `{name}` makes the file too large: {instance} instance(s) of {} step(s) after {} thread(s)", program.steps.len(), out.len())),
            Some(&format!("at most {MAX_THREADS} threads and {MAX_TOTAL_STEPS} program steps in all")),
            None,
        );
        rd.full = true;
        return;
    }
    rd.steps += more;
    let (line, col) = rd.src.line_col(key.span.start());
    for k in 0..instance {
        let tname = if k == 0 {
            name.to_string()
        } else {
            format!("{name}-{k}")
        };
        // Instances are named `NAME-k`, which another task may be called.
        if let Some((task, j)) = rd.names.get(&tname) {
            let first = instance_name(task, *j);
            let msg = format!(
                "{first} and {} are both named `{tname}`",
                instance_name(&name, k)
            );
            set(
                rd.err(key.span, msg),
                Some("thread names used once (instances beyond the first are named `NAME-1`, `NAME-2`, ...)"),
                Some("rename one of the tasks".into()),
            );
            continue;
        }
        rd.names.insert(tname.clone(), (name.to_string(), k));
        out.push(RtAppTask {
            name: tname,
            program: program.clone(),
            params: params.clone(),
            cpus: cpus.clone(),
            span: Span { line, col },
        });
    }
}

/// The scheduling fields of a task as parent-side parameters: `policy`
/// always; `priority` when given (rt-app's 10 for SCHED_FIFO/SCHED_RR
/// without one); `dl-runtime`, `dl-period`, `dl-deadline` for
/// SCHED_DEADLINE, with rt-app's defaults (period = runtime, deadline =
/// period).
fn read_sched_fields<'j, 't>(
    rd: &mut Rd<'_>,
    key: &JKey,
    get: &dyn Fn(&str) -> Option<&'j J<'t>>,
    name: &str,
    default_policy: &str,
) -> Params {
    let mut params = Params::new();
    let policy = match get("policy") {
        Some(pv) => policy_name(rd, pv, &format!("`policy` of task `{name}`")),
        None => Some(default_policy.to_string()),
    };
    let Some(policy) = policy else { return params };
    params.insert("policy", ParamValue::Str(policy.clone()));
    let prio = get("priority").and_then(|p| {
        rd.int(p, &format!("`priority` of task `{name}`"))
            .map(|n| (n, p.span))
    });
    match (policy.as_str(), prio) {
        ("SCHED_FIFO" | "SCHED_RR", Some((n, span))) => {
            if (1..=99).contains(&n) {
                params.insert("priority", ParamValue::Int(n));
            } else {
                set(
                    rd.err(
                        span,
                        format!("`priority` {n} of task `{name}` is out of range for {policy}"),
                    ),
                    Some("1 to 99"),
                    None,
                );
            }
        }
        ("SCHED_FIFO" | "SCHED_RR", None) => {
            params.insert("priority", ParamValue::Int(DEFAULT_RT_PRIORITY))
        }
        ("SCHED_OTHER", Some((n, span))) => {
            if (-20..=19).contains(&n) {
                params.insert("priority", ParamValue::Int(n));
            } else {
                set(rd.err(span, format!("`priority` {n} of task `{name}` is out of range for SCHED_OTHER (a nice value)")), Some("-20 to 19"), None);
            }
        }
        ("SCHED_DEADLINE", Some((n, span))) if n != 0 => {
            set(
                rd.err(
                    span,
                    format!("`priority` of task `{name}` has no meaning under SCHED_DEADLINE"),
                ),
                Some("no `priority`, or 0"),
                None,
            );
        }
        _ => {}
    }
    let dl: Vec<(&str, &J)> = ["dl-runtime", "dl-period", "dl-deadline"]
        .into_iter()
        .filter_map(|k| get(k).map(|v| (k, v)))
        .collect();
    if policy == "SCHED_DEADLINE" {
        let mut us =
            |k: &str| get(k).and_then(|v| rd.micros(v, &format!("`{k}` of task `{name}`")));
        let runtime = us("dl-runtime");
        let period = us("dl-period").or(runtime);
        let deadline = us("dl-deadline").or(period);
        match (runtime, period, deadline) {
            (Some(r), Some(p), Some(d)) if r > Duration::ZERO && r <= d && d <= p => {
                params.insert("dl-runtime", ParamValue::Str(exact(r)));
                params.insert("dl-period", ParamValue::Str(exact(p)));
                params.insert("dl-deadline", ParamValue::Str(exact(d)));
            }
            (None, _, _) if get("dl-runtime").is_none() => {
                set(
                    rd.err(
                        key.span,
                        format!("task `{name}` is SCHED_DEADLINE but has no `dl-runtime`"),
                    ),
                    Some("`\"dl-runtime\": N` (and `dl-period`) in microseconds"),
                    None,
                );
            }
            (Some(r), Some(p), Some(d)) => {
                set(
                    rd.err(key.span, format!("task `{name}`: SCHED_DEADLINE needs 0 < dl-runtime <= dl-deadline <= dl-period, found {r}, {d}, {p}")),
                    Some("0 < dl-runtime <= dl-deadline <= dl-period"),
                    None,
                );
            }
            _ => {}
        }
    } else if let Some((k, v)) = dl.first() {
        set(
            rd.err(v.span, format!("`{k}` of task `{name}` needs `\"policy\": \"SCHED_DEADLINE\"` (its policy is {policy})")),
            Some("dl-* keys only with SCHED_DEADLINE"),
            Some("since Linux 6.12, rt-app uses `dl-runtime` as a custom slice for SCHED_OTHER; hsched does not model slices".into()),
        );
    }
    params
}

/// Reads `phases` and flattens them into one program.
fn read_phases(
    rd: &mut Rd<'_>,
    m: &[(JKey, J)],
    pv: &J,
    name: &str,
    task_loop: Option<i64>,
    delay: Duration,
    timers: &mut BTreeSet<String>,
) -> Option<Program> {
    // Events beside `phases` are ignored by rt-app: refuse them.
    for (k, _) in m {
        if event_of(&k.name).is_some() {
            set(
                rd.err(
                    k.span,
                    format!(
                        "event `{}` of task `{name}` is outside its `phases`",
                        k.name
                    ),
                ),
                Some("events inside a phase when the task has `phases`"),
                Some("rt-app ignores such events; move it into a phase".into()),
            );
        } else if !TASK_KEYS.contains(&&*k.name) {
            match UNSUPPORTED_TASK_KEYS.iter().find(|(u, _)| *u == k.name) {
                Some((_, why)) => set(
                    rd.err(
                        k.span,
                        format!("`{}` in task `{name}` is not supported", k.name),
                    ),
                    Some(&one_of(TASK_KEYS)),
                    Some(why.to_string()),
                ),
                None => set(
                    rd.err(k.span, format!("unknown key `{}` in task `{name}`", k.name)),
                    Some(&one_of(TASK_KEYS)),
                    did_you_mean(&k.name, TASK_KEYS.iter().copied()),
                ),
            }
        }
    }
    let phases = rd.obj(pv, &format!("`phases` of task `{name}`"))?;
    rd.duplicates(phases, &format!("`phases` of task `{name}`"), false);
    if phases.is_empty() {
        set(
            rd.err(pv.span, format!("task `{name}` has an empty `phases`")),
            Some("at least one phase"),
            None,
        );
        return None;
    }
    let allowed: Vec<&str> = std::iter::once("loop")
        .chain(PHASE_SCHEDULING_KEYS.iter().copied())
        .collect();
    let mut read: Vec<(String, Vec<Step>, i64, ByteSpan)> = Vec::new();
    // Steps after unrolling so far (unless the first phase loops forever,
    // which ends the program there).
    let mut unrolled: u128 = 0;
    for (pk, pv) in phases {
        let Some(pm) = rd.obj(pv, &format!("phase `{}` of task `{name}`", pk.name)) else {
            continue;
        };
        rd.duplicates(pm, &format!("phase `{}` of task `{name}`", pk.name), true);
        for (k, _) in pm {
            if PHASE_SCHEDULING_KEYS.contains(&&*k.name) {
                set(
                    rd.err(k.span, format!("`{}` in phase `{}` of task `{name}` is not supported", k.name, pk.name)),
                    Some("`loop` and events inside a phase"),
                    Some("hsched maps each task onto one thread with fixed scheduling parameters; give scheduling fields at the task level, or change them with an [[at]] `set-params` operation".into()),
                );
            }
        }
        let (steps, any) = read_events(rd, pm, name, &allowed, timers);
        if !any {
            set(
                rd.err(
                    pk.span,
                    format!("phase `{}` of task `{name}` has no events", pk.name),
                ),
                Some(&format!(
                    "at least one of the events {}",
                    one_of(SUPPORTED_EVENTS)
                )),
                None,
            );
        }
        let ploop = match pm.iter().find(|(k, _)| k.name == "loop") {
            Some((_, lv)) => rd
                .int(
                    lv,
                    &format!("`loop` of phase `{}` in task `{name}`", pk.name),
                )
                .unwrap_or(1),
            None => 1,
        };
        unrolled += steps.len() as u128 * ploop.max(0) as u128;
        read.push((pk.name.to_string(), steps, ploop, pk.span));
        // Refused before the rest is read: a file of many phases would
        // otherwise be read in full only to be refused.
        if read.len() > 1 && read[0].2 > 0 && unrolled > MAX_STEPS as u128 {
            set(
                rd.err(
                    pk.span,
                    format!("task `{name}`: unrolling its phases up to phase `{}` gives {unrolled} steps", pk.name),
                ),
                Some(&format!("at most {MAX_STEPS} steps")),
                Some(format!("hsched flattens phases into one loop of at most {MAX_STEPS} steps; lower the phase loops")),
            );
            return None;
        }
    }
    match unroll(&read, task_loop.unwrap_or(-1), delay) {
        Ok(p) => Some(p),
        Err((span, msg, expected, hint)) => {
            set(
                rd.err(span, format!("task `{name}`: {msg}")),
                Some(&expected),
                hint,
            );
            None
        }
    }
}

type UnrollError = (ByteSpan, String, String, Option<String>);

/// Flattens phases into one program (rt-app semantics: each phase runs its
/// events `loop` times, a phase loop of 0 or less never ends; the task
/// repeats all phases `task_loop` times, forever when negative).
fn unroll(
    phases: &[(String, Vec<Step>, i64, ByteSpan)],
    task_loop: i64,
    delay: Duration,
) -> Result<Program, UnrollError> {
    if let Some(i) = phases.iter().position(|p| p.2 <= 0) {
        if i == 0 {
            return Ok(Program {
                steps: phases[0].1.clone(),
                loops: None,
                delay,
            });
        }
        return Err((
            phases[i].3,
            format!("phase `{}` loops forever (`loop` = {}) after other phases", phases[i].0, phases[i].2),
            "a phase `loop` of 1 or more (only the first phase may loop forever)".to_string(),
            Some("a program cannot run some steps once and then others forever; give the phase a finite `loop` and let the task loop".into()),
        ));
    }
    if phases.len() == 1 {
        let (_, steps, ploop, _) = &phases[0];
        let loops = if task_loop < 0 {
            None
        } else {
            Some((*ploop as u64).saturating_mul(task_loop as u64))
        };
        return Ok(Program {
            steps: steps.clone(),
            loops,
            delay,
        });
    }
    // At most MAX_STEPS: `read_phases` checks as it reads.
    let total: usize = phases.iter().map(|p| p.1.len() * p.2 as usize).sum();
    let mut steps = Vec::with_capacity(total);
    for (_, s, n, _) in phases {
        for _ in 0..*n {
            steps.extend(s.iter().cloned());
        }
    }
    let loops = if task_loop < 0 {
        None
    } else {
        Some(task_loop as u64)
    };
    Ok(Program {
        steps,
        loops,
        delay,
    })
}

/// Maps the tasks of `w` onto threads of `h`: a `[[thread]]` that names a
/// task (`rtapp = "task"`) takes its program; every other task becomes a
/// thread under the first `[[workload.map]]` rule whose glob matches its
/// name, or under the default scheduler. Threads placed by an earlier
/// attachment are replaced. The task's scheduling fields become parent-side
/// parameters unless the rule or `[[thread]]` gives `params` (see the
/// mapping table in `docs/hierarchy-format.md`).
///
/// # Errors
/// A task named by two threads or by none that exists, a task no rule or
/// default can place, fields the target scheduler cannot take, processors
/// that the target's root does not own, names that collide, and operations
/// that name threads that still do not exist. `h` is unchanged then.
pub fn attach_rtapp(h: &mut Hierarchy, w: RtAppWorkload) -> Result<(), ConfigErrors> {
    attach_rtapp_with_policies(h, w, hsched_policies::registry())
}

/// [`attach_rtapp`] against another table of policies.
///
/// # Errors
/// As [`attach_rtapp`].
pub fn attach_rtapp_with_policies(
    h: &mut Hierarchy,
    w: RtAppWorkload,
    policies: &[PolicyInfo],
) -> Result<(), ConfigErrors> {
    attach_rtapp_sparing(h, w, policies, &[], &[])
}

/// [`attach_rtapp_with_policies`] to a hierarchy whose file had errors:
/// the threads and operations (indices) whose tables had them are not
/// checked again, so that what follows from those errors is not reported.
pub(crate) fn attach_rtapp_sparing(
    h: &mut Hierarchy,
    w: RtAppWorkload,
    policies: &[PolicyInfo],
    broken_threads: &[usize],
    broken_ops: &[usize],
) -> Result<(), ConfigErrors> {
    let mut g = h.clone();
    let toml_file = g.file.clone();
    let json_file = w.file.clone();
    let mut tdiag = Diag::new(&toml_file, None, None);
    let mut jdiag = Diag::new(&json_file, None, None);
    g.threads
        .retain(|t| t.rtapp.as_ref().is_none_or(|b| b.declared));
    let tasks: BTreeMap<&str, &RtAppTask> = w.tasks.iter().map(|t| (&*t.name, t)).collect();
    let task_names: Vec<&str> = w.tasks.iter().map(|t| &*t.name).collect();
    let mut claimed: BTreeMap<String, String> = BTreeMap::new();
    // By name: one look-up per task, among up to MAX_SCHEDULERS.
    let by_name: BTreeMap<&str, &SchedulerSpec> =
        g.schedulers.iter().map(|s| (&*s.name, s)).collect();
    let sched_policy = |name: &str| {
        by_name
            .get(name)
            .and_then(|s| find_policy(policies, &s.policy))
    };
    let cpus = g.machine.cpus;
    let mut updates: Vec<(usize, WorkloadSpec, Option<Params>)> = Vec::new();
    for (i, t) in g.threads.iter().enumerate() {
        let Some(b) = &t.rtapp else { continue };
        match tasks.get(b.task.as_str()) {
            None => {
                let e = tdiag
                    .make("", t.span, format!("thread `{}` runs rt-app task `{}`, which `{json_file}` does not declare", t.name, b.task))
                    .expected(one_of_these(&task_names))
                    .maybe_hint(did_you_mean(&b.task, task_names.iter().copied()));
                tdiag.push(e);
            }
            Some(task) => {
                if let Some(first) = claimed.get(&b.task) {
                    let e = tdiag
                        .make("", t.span, format!("rt-app task `{}` is mapped twice: by thread `{first}` and by thread `{}`", b.task, t.name))
                        .expected("each rt-app task named by at most one [[thread]]");
                    tdiag.push(e);
                    continue;
                }
                claimed.insert(b.task.clone(), t.name.clone());
                check_cpus(&mut jdiag, &by_name, cpus, task, &t.scheduler);
                let params = if t.params.is_empty() {
                    sched_policy(&t.scheduler)
                        .and_then(|info| translate(&mut jdiag, task, info, &t.scheduler, policies))
                } else {
                    None
                };
                updates.push((i, WorkloadSpec::Program(task.program.clone()), params));
            }
        }
    }
    for (i, wl, params) in updates {
        g.threads[i].workload = Some(wl);
        if let Some(p) = params {
            g.threads[i].params = p;
        }
    }
    let mut names: BTreeSet<String> = g.threads.iter().map(|t| t.name.clone()).collect();
    for task in &w.tasks {
        if claimed.contains_key(&task.name) {
            continue;
        }
        let rule = g
            .workload
            .rules
            .iter()
            .find(|r| glob_match(&r.task, &task.name));
        let (scheduler, rule_params) = match (rule, &g.default_scheduler) {
            (Some(r), _) => (r.scheduler.clone(), r.params.clone()),
            (None, Some(d)) => (d.clone(), None),
            (None, None) => {
                let e = jdiag
                    .make("", task.span, format!("rt-app task `{}` is never reachable: no [[workload.map]] rule matches it and the hierarchy has no default scheduler", task.name))
                    .expected("a [[workload.map]] rule whose `task` glob matches it, a [[thread]] with `rtapp` = its name, or a top-level `default`");
                jdiag.push(e);
                continue;
            }
        };
        if !names.insert(task.name.clone()) {
            let e = jdiag
                .make("", task.span, format!("rt-app task `{}` has the name of a thread of the hierarchy", task.name))
                .expected("thread names used once")
                .hint(format!("name it in that [[thread]] with `rtapp = \"{}\"` to give it that thread's settings, or rename one of them", task.name));
            jdiag.push(e);
            continue;
        }
        check_cpus(&mut jdiag, &by_name, cpus, task, &scheduler);
        let params = match rule_params {
            Some(p) => p,
            None => match sched_policy(&scheduler) {
                Some(info) => {
                    translate(&mut jdiag, task, info, &scheduler, policies).unwrap_or_default()
                }
                None => Params::new(),
            },
        };
        g.threads.push(ThreadSpec {
            name: task.name.clone(),
            scheduler,
            params,
            workload: Some(WorkloadSpec::Program(task.program.clone())),
            rtapp: Some(RtAppBinding {
                task: task.name.clone(),
                declared: false,
            }),
            principal: None,
            guarantee: None,
            start: Duration::ZERO,
            exit: None,
            exec: None,
            span: task.span,
        });
    }
    // Each file is held to the limit on its own; together they are too.
    if g.threads.len() > MAX_THREADS {
        let first = w.tasks.first().map_or(Span::default(), |t| t.span);
        let e = jdiag
            .make(
                "",
                first,
                format!(
                    "the hierarchy file and `{json_file}` make {} threads together",
                    g.threads.len()
                ),
            )
            .expected(format!("at most {MAX_THREADS} threads in all"));
        jdiag.push(e);
    }
    if tdiag.errs.is_empty() && jdiag.errs.is_empty() {
        let sites = TimelineSites {
            threads: &[],
            ops: &[],
            strict_threads: true,
            broken_threads,
            broken_ops,
            rtapp_file: &json_file,
        };
        check_timeline(&mut tdiag, &mut g, policies, &sites);
    }
    let mut errs: Vec<ConfigError> = tdiag.errs;
    errs.extend(jdiag.errs);
    if !errs.is_empty() {
        let mut e = ConfigErrors(errs);
        e.sort();
        return Err(e);
    }
    g.rtapp = Some(w);
    *h = g;
    Ok(())
}

/// The roots (and so the processors) a scheduler runs on.
fn root_cpus(schedulers: &BTreeMap<&str, &SchedulerSpec>, name: &str) -> BTreeSet<usize> {
    let mut out = BTreeSet::new();
    let mut stack = vec![name.to_string()];
    let mut seen = BTreeSet::new();
    while let Some(n) = stack.pop() {
        if !seen.insert(n.clone()) {
            continue;
        }
        let Some(s) = schedulers.get(n.as_str()) else {
            continue;
        };
        if s.parents.is_empty() {
            out.extend(s.cpus.iter().copied());
        }
        stack.extend(s.parents.iter().map(|p| p.name.clone()));
    }
    out
}

/// A task pinned with `cpus` must go under a scheduler whose roots own only
/// those processors: hsched places threads by hierarchy, not by affinity.
fn check_cpus(
    d: &mut Diag<'_>,
    schedulers: &BTreeMap<&str, &SchedulerSpec>,
    cpus: usize,
    task: &RtAppTask,
    scheduler: &str,
) {
    if task.cpus.is_empty() {
        return;
    }
    if let Some(&c) = task.cpus.iter().find(|&&c| c >= cpus) {
        let e = d
            .make(
                "",
                task.span,
                format!(
                    "task `{}` is pinned to CPU {c}, but the machine has {cpus} CPU{}",
                    task.name,
                    if cpus == 1 { "" } else { "s" }
                ),
            )
            .expected(format!("CPUs from 0 to {}", cpus - 1));
        d.push(e);
        return;
    }
    let runs_on = root_cpus(schedulers, scheduler);
    let allowed: BTreeSet<usize> = task.cpus.iter().copied().collect();
    if !runs_on.is_subset(&allowed) {
        let list = |s: &BTreeSet<usize>| {
            s.iter()
                .map(|c| c.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        };
        let e = d
            .make("", task.span, format!("task `{}` is pinned to CPUs [{}] (`cpus`), but scheduler `{scheduler}` runs on CPUs [{}]", task.name, list(&allowed), list(&runs_on)))
            .expected(format!("a scheduler under a root whose `cpus` are among [{}]", list(&allowed)))
            .hint("map the task with a [[workload.map]] rule (or a [[thread]]) to a scheduler of a root that owns only those CPUs");
        d.push(e);
    }
}

/// Turns the task's scheduling fields into parent-side parameters for a
/// scheduler of policy `info` (the mapping table of the format doc).
fn translate(
    d: &mut Diag<'_>,
    task: &RtAppTask,
    info: &PolicyInfo,
    sched: &str,
    _policies: &[PolicyInfo],
) -> Option<Params> {
    let accepts = |k: &str| info.child_params.iter().any(|s| s.key == k);
    let policy = task
        .params
        .str("policy")
        .ok()
        .flatten()
        .unwrap_or("SCHED_OTHER")
        .to_string();
    let mut out = Params::new();
    let fail = |d: &mut Diag<'_>, msg: String, expected: String| {
        let e = d.make("", task.span, msg).expected(expected).hint(format!("give the parameters explicitly: a [[workload.map]] rule (or [[thread]]) for `{}` with `params = {{ ... }}` replaces the task's scheduling fields", task.name));
        d.push(e);
    };
    let before = d.errs.len();
    let child_keys: Vec<&str> = info.child_params.iter().map(|s| s.key).collect();
    let keys_text = if child_keys.is_empty() {
        "none".to_string()
    } else {
        one_of(&child_keys)
    };
    match policy.as_str() {
        "SCHED_FIFO" | "SCHED_RR" => {
            if let Some(p) = task.params.get("priority") {
                if accepts("priority") {
                    out.insert("priority", p.clone());
                } else {
                    fail(d, format!("task `{}` ({policy}, priority {p}) goes to `{sched}` (policy `{}`), which takes no `priority`", task.name, info.name), format!("a scheduler whose children take `priority` (`{sched}` takes {keys_text})"));
                }
            }
        }
        "SCHED_DEADLINE" => {
            if accepts("amount") && accepts("period") {
                if let (Some(r), Some(p)) =
                    (task.params.get("dl-runtime"), task.params.get("dl-period"))
                {
                    out.insert("amount", r.clone());
                    out.insert("period", p.clone());
                }
                if let Some(dl) = task.params.get("dl-deadline") {
                    if accepts("deadline") {
                        out.insert("deadline", dl.clone());
                    } else if Some(dl) != task.params.get("dl-period") {
                        fail(d, format!("task `{}` has dl-deadline {dl} shorter than its dl-period, but `{sched}` (policy `{}`) has no `deadline` parameter", task.name, info.name), "dl-deadline equal to dl-period, or a scheduler whose children take `deadline`".into());
                    }
                }
            } else {
                fail(d, format!("task `{}` is SCHED_DEADLINE, but `{sched}` (policy `{}`) is not a reservation scheduler", task.name, info.name), format!("a scheduler whose children take `amount` and `period` (`{sched}` takes {keys_text})"));
            }
        }
        _ => {
            if let Some(n) = task.params.get("priority") {
                if accepts("nice") {
                    out.insert("nice", n.clone());
                } else {
                    fail(d, format!("task `{}` (SCHED_OTHER, nice {n}) goes to `{sched}` (policy `{}`), which takes no `nice`", task.name, info.name), format!("a scheduler whose children take `nice` (`{sched}` takes {keys_text})"));
                }
            }
        }
    }
    if d.errs.len() > before {
        return None;
    }
    check_child_params(
        d,
        info,
        sched,
        &out,
        "",
        task.span,
        &format!("rt-app task `{}`", task.name),
    );
    (d.errs.len() == before).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs() {
        assert!(glob_match("video*", "video"));
        assert!(glob_match("video*", "video-3"));
        assert!(glob_match("v?deo", "video"));
        assert!(glob_match("*", ""));
        assert!(glob_match("*a*b*", "xxaxxbxx"));
        assert!(!glob_match("video*", "avideo"));
        assert!(!glob_match("v?deo", "vdeo"));
        assert!(glob_match("a*a*a*a*b", "aaaaaaaaaaaaaaaaaaaaaab"));
        assert!(!glob_match("a*a*a*a*b", "aaaaaaaaaaaaaaaaaaaaaaa"));
    }

    #[test]
    fn event_prefixes_follow_rt_app() {
        assert_eq!(event_of("run0"), Some("run"));
        assert_eq!(event_of("runtime"), Some("runtime"));
        assert_eq!(event_of("memrun"), Some("memrun"));
        assert_eq!(event_of("loop"), None);
        assert_eq!(event_of("sleep2"), Some("sleep"));
    }
}
