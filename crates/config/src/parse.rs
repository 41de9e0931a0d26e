//! Reads a hierarchy file (TOML) into the [`Hierarchy`] model, reporting
//! every problem at once. The format is documented in
//! `docs/hierarchy-format.md`.

use crate::check::{
    check_child_params, check_graph, check_params, check_timeline, find_policy, At, TimelineSites,
};
use crate::error::{
    closest, did_you_mean, one_of, one_of_these, ConfigError, ConfigErrors, Source,
};
use crate::model::*;
use crate::read::{text_of, Diag, Reader, Tab, V};
use hsched_core::time::{MAX_PARSED, MAX_PARSED_TEXT};
use hsched_core::{Duration, Params};
use hsched_policies::PolicyInfo;
use std::collections::{BTreeMap, BTreeSet};
use toml::de::{DeTable, DeValue};

const TOP_KEYS: &[&str] = &[
    "default",
    "machine",
    "sim",
    "principal",
    "queue",
    "scheduler",
    "thread",
    "workload",
    "rule",
    "at",
    "rm",
];
const MACHINE_KEYS: &[&str] = &["cpus", "context_switch", "timer", "stolen"];
const SIM_KEYS: &[&str] = &["duration", "seed"];
const SCHED_KEYS: &[&str] = &[
    "name",
    "policy",
    "parent",
    "parents",
    "params",
    "cpus",
    "guarantee",
];
const THREAD_KEYS: &[&str] = &[
    "name",
    "scheduler",
    "params",
    "guarantee",
    "principal",
    "count",
    "start",
    "exit",
    "workload",
    "exec",
    "rtapp",
];
const WORKLOAD_SECTION_KEYS: &[&str] = &["rtapp", "map"];
const RULE_KEYS: &[&str] = &["task", "scheduler", "params"];
const THREAD_RULE_KEYS: &[&str] = &["thread", "program", "scheduler", "params", "guarantee"];
/// Linux keeps at most this many bytes of a thread's name (`TASK_COMM_LEN`
/// less the terminating NUL).
const COMM_LEN: usize = 15;
const OPS: &[&str] = &[
    "begin-reservation",
    "end-reservation",
    "set-params",
    "move-thread",
    "create-scheduler",
    "destroy-scheduler",
    "set-default",
];
const KINDS: &[&str] = &[
    "cpu-bound",
    "periodic",
    "sporadic",
    "interactive",
    "io",
    "video",
    "frame-renderer",
    "program",
    "stage",
    "player",
];
/// Most threads one `count` may create.
const MAX_COUNT: u64 = 100_000;
/// Most schedulers a file may declare and create, together: real
/// hierarchies have a few to a few hundred instances (one per application
/// or user), and each costs some kilobytes in every check and run.
const MAX_SCHEDULERS: usize = 10_000;
/// Most processors a machine may have.
const MAX_CPUS: u64 = 4096;
/// A context switch shorter than this: 100 ms is the longest default
/// quantum (`best`), so a longer switch takes every turn of every
/// time-sharing policy whole (a real one costs microseconds).
const MAX_CONTEXT_SWITCH: Duration = Duration::from_millis(100);
/// Largest queue capacity, in items.
const MAX_QUEUE: u64 = 1 << 40;
/// Smallest `fps` or `rate`: one event about every 288 years, so that the
/// period still fits in the longest duration ([`MAX_PARSED`]).
const MIN_RATE: f64 = 1.1e-10;
const MIN_RATE_TEXT: &str = "1.1e-10";
const _: () = assert!(1e9 / MIN_RATE <= MAX_PARSED.as_nanos() as f64);

/// Parses a hierarchy file with the policies of `hsched_policies`.
/// `file_name` is used in messages only; nothing is read from disk, so an
/// rt-app file named by `[workload] rtapp` is recorded but not read (see
/// [`crate::load`]).
///
/// # Errors
/// Every problem in the file, each with its line and column.
pub fn parse_str(text: &str, file_name: &str) -> Result<Hierarchy, ConfigErrors> {
    parse_str_with_policies(text, file_name, hsched_policies::registry())
}

/// [`parse_str`] against another table of policies (tests, or programs
/// that add their own policies).
///
/// # Errors
/// As [`parse_str`].
pub fn parse_str_with_policies(
    text: &str,
    file_name: &str,
    policies: &[PolicyInfo],
) -> Result<Hierarchy, ConfigErrors> {
    parse_partial(text, file_name, policies).map_err(|i| i.errs)
}

/// An invalid hierarchy file: its errors, and the hierarchy as far as it
/// could be read, so that [`crate::load`] can still check the operations
/// that name threads of its rt-app file.
pub(crate) struct Invalid {
    pub errs: ConfigErrors,
    /// `None` when the file is not TOML or too large to read on.
    pub hierarchy: Option<Box<Hierarchy>>,
    /// Threads (indices) whose tables had errors.
    pub broken_threads: Vec<usize>,
    /// Operations (indices) whose tables had errors.
    pub broken_ops: Vec<usize>,
}

impl Invalid {
    fn only(errs: ConfigErrors) -> Self {
        Invalid {
            errs,
            hierarchy: None,
            broken_threads: Vec::new(),
            broken_ops: Vec::new(),
        }
    }
}

/// [`parse_str_with_policies`], keeping what was read of an invalid file.
pub(crate) fn parse_partial(
    text: &str,
    file_name: &str,
    policies: &[PolicyInfo],
) -> Result<Hierarchy, Invalid> {
    let src = Source::new(file_name, text);
    let (doc, syntax) = DeTable::parse_recoverable(text);
    if !syntax.is_empty() {
        let mut errs = ConfigErrors(syntax.iter().map(|e| syntax_error(&src, e)).collect());
        errs.sort();
        return Err(Invalid::only(errs));
    }
    let mut r = Reader::new(&src);
    let root = Tab {
        t: doc.get_ref(),
        span: 0..0,
    };
    r.unknown_keys(&root, "the file", TOP_KEYS);

    let machine = read_machine(&mut r, root.get("machine"));
    let sim = read_sim(&mut r, root.get("sim"));
    let principals = read_principals(&mut r, root.get("principal"));
    let default_scheduler = root.get("default").and_then(|v| {
        r.sites.put("default=".into(), v.span());
        r.name(v, "default")
    });
    let mut scheds = Vec::new();
    let mut sched_paths = Vec::new();
    let mut sound = Vec::new();
    if let Some(v) = root.get("scheduler") {
        let tabs = r.tables(v, "scheduler");
        // Refused before anything is built from them.
        if let Some(tab) = tabs.get(MAX_SCHEDULERS) {
            let e = r
                .err(
                    tab.span.clone(),
                    format!(
                        "[[scheduler]] #{} makes the file too large: it has {} [[scheduler]] tables",
                        MAX_SCHEDULERS + 1,
                        tabs.len()
                    ),
                )
                .expected(format!("at most {MAX_SCHEDULERS} schedulers in all, declared and created by operations"));
            r.push(e);
            let mut errs = ConfigErrors(std::mem::take(&mut r.errs));
            errs.sort();
            return Err(Invalid::only(errs));
        }
        for (i, tab) in tabs.into_iter().enumerate() {
            let path = format!("sched.{i}");
            let what = format!("[[scheduler]] #{}", i + 1);
            if let Some((s, ok)) =
                read_scheduler(&mut r, &tab, &path, &what, policies, machine.cpus)
            {
                scheds.push(s);
                sched_paths.push(path);
                sound.push(ok);
            }
        }
    }
    let principal_names: BTreeSet<String> = principals.iter().map(|p| p.name.clone()).collect();
    let queues = read_queues(&mut r, root.get("queue"));
    let queue_names: BTreeSet<String> = queues.iter().map(|q| q.name.clone()).collect();
    let (threads, thread_paths, broken_threads) =
        read_threads(&mut r, root.get("thread"), &principal_names, &queue_names);
    let workload = read_workload_section(&mut r, root.get("workload"));
    let rules = read_thread_rules(&mut r, root.get("rule"));
    let (operations, op_paths, broken_ops) =
        read_ops(&mut r, root.get("at"), policies, machine.cpus);
    let rm = crate::rm::read_section(&mut r, &root, &principals, &scheds, &threads);
    // Every [[scheduler]] table counts, read or not.
    let mut schedulers = root
        .get("scheduler")
        .and_then(|v| v.get_ref().as_array())
        .map_or(0, |a| a.len());
    for (op, path) in operations.iter().zip(&op_paths) {
        if !matches!(op.op, OpSpec::CreateScheduler(_)) {
            continue;
        }
        schedulers += 1;
        if schedulers > MAX_SCHEDULERS {
            let msg = format!("this `create-scheduler` operation makes the file too large: {MAX_SCHEDULERS} schedulers are declared or created before it");
            let e = match r.sites.get(path) {
                Some(at) => r.err(at, msg),
                None => src.error_at(op.span, msg),
            }
            .expected(format!(
                "at most {MAX_SCHEDULERS} schedulers in all, declared and created by operations"
            ));
            r.push(e);
            break;
        }
    }

    // Operations may name threads of an rt-app file that is not read yet;
    // `attach_rtapp` checks them again once it is.
    let rtapp_pending = workload.rtapp_file.is_some();

    let mut errs = std::mem::take(&mut r.errs);
    let sites = std::mem::take(&mut r.sites);
    let mut d = Diag::new(file_name, Some(&src), Some(&sites));

    // Instance parameters of every scheduler, declared or created later.
    for ((s, p), ok) in scheds.iter().zip(&sched_paths).zip(&sound) {
        if *ok {
            check_instance(&mut d, s, p, policies);
        }
    }
    for (i, (op, p)) in operations.iter().zip(&op_paths).enumerate() {
        if let (OpSpec::CreateScheduler(s), false) = (&op.op, broken_ops.contains(&i)) {
            check_instance(&mut d, s, &format!("{p}.scheduler"), policies);
        }
    }

    let thread_names: BTreeSet<String> = threads.iter().map(|t| t.name.clone()).collect();
    let order = check_graph(
        &mut d,
        &mut scheds,
        &sched_paths,
        &sound,
        machine.cpus,
        policies,
        &thread_names,
    );
    // Without a sound graph the timeline still runs (on the schedulers in
    // file order) so that its own errors are reported too.
    let schedulers: Vec<SchedulerSpec> = match &order {
        Some(order) => order.iter().map(|&i| scheds[i].clone()).collect(),
        None => scheds.clone(),
    };

    // Mapping rules and thread rules: their scheduler must exist from the
    // start, and the parameters they give must suit it.
    for (i, rule) in workload.rules.iter().enumerate() {
        let target = RuleTarget {
            path: format!("workload.map.{i}"),
            span: rule.span,
            who: format!("the rule for tasks `{}`", rule.task),
            whose: format!("tasks matching `{}`", rule.task),
        };
        target.check(
            &mut d,
            &scheds,
            policies,
            &rule.scheduler,
            rule.params.as_ref(),
        );
    }
    for (rule, i) in &rules {
        let target = RuleTarget {
            path: format!("rule.{i}"),
            span: rule.span,
            who: format!("rule #{}", i + 1),
            whose: format!("rule #{}", i + 1),
        };
        // A rule with a guarantee gets its parameters from the grant.
        let params = rule.guarantee.is_none().then_some(&rule.params);
        target.check(&mut d, &scheds, policies, &rule.scheduler, params);
    }

    let mut h = Hierarchy {
        machine,
        schedulers,
        threads,
        principals,
        queues,
        default_scheduler,
        operations,
        sim,
        rtapp: None,
        workload,
        rules: rules.into_iter().map(|(rule, _)| rule).collect(),
        rm,
        file: file_name.to_string(),
    };
    let ts = TimelineSites {
        threads: &thread_paths,
        ops: &op_paths,
        strict_threads: !rtapp_pending,
        broken_threads: &broken_threads,
        broken_ops: &broken_ops,
        rtapp_file: "",
    };
    check_timeline(&mut d, &mut h, policies, &ts);
    errs.extend(d.errs);
    if errs.is_empty() {
        Ok(h)
    } else {
        let mut errs = ConfigErrors(errs);
        errs.sort();
        Err(Invalid {
            errs,
            hierarchy: Some(Box::new(h)),
            broken_threads,
            broken_ops,
        })
    }
}

/// Turns a TOML syntax error into a diagnostic, with a hint for the usual
/// slips (unquoted durations and names).
fn syntax_error(src: &Source<'_>, e: &toml::de::Error) -> ConfigError {
    let span = e.span().unwrap_or(0..0);
    let text = src.text.get(span.clone()).unwrap_or("").trim();
    let raw = e.message().trim();
    let (msg, expected) = match raw.split_once(", expected ") {
        Some((m, x)) => (m.to_string(), Some(x.to_string())),
        None => (raw.to_string(), None),
    };
    let msg = if msg == "duplicate key" && !text.is_empty() {
        format!("duplicate key `{text}`")
    } else {
        msg
    };
    let mut err = src.error(span, format!("invalid TOML: {msg}"));
    // The parser names its grammar rule ("literal string"); say it plainly.
    let expected = match expected.as_deref() {
        Some("literal string") | Some("basic string") => {
            Some("a value in quotes: \"...\"".to_string())
        }
        _ => expected,
    };
    if let Some(x) = expected {
        err = err.expected(x);
    }
    let looks_duration = {
        let t = text.trim_start_matches('-');
        let digits = t
            .chars()
            .take_while(|c| c.is_ascii_digit() || *c == '.')
            .count();
        digits > 0 && digits < t.len() && t[digits..].trim().chars().all(|c| c.is_alphabetic())
    };
    let word = !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_alphanumeric() || "-_.".contains(c));
    // A duplicate key's span is the key, a bare word: not a value missing
    // its quotes.
    if msg.starts_with("duplicate key") {
        err.hint("each key and each [table] may appear once; use [[double brackets]] for a list of tables")
    } else if looks_duration {
        err.hint(format!(
            "durations are strings with a unit: write `\"{}\"`",
            text.replace(' ', "")
        ))
    } else if word && text != "true" && text != "false" {
        err.hint(format!(
            "names and other strings need quotes: write `\"{text}\"`"
        ))
    } else {
        err
    }
}

fn read_machine(r: &mut Reader<'_>, v: Option<&V<'_>>) -> Machine {
    let mut m = Machine {
        cpus: 1,
        context_switch: Duration::ZERO,
        timer: TimerModel::Precise,
        stolen: Vec::new(),
    };
    let Some(v) = v else { return m };
    let Some(tab) = r.table(v, "machine") else {
        return m;
    };
    r.unknown_keys(&tab, "[machine]", MACHINE_KEYS);
    if let Some(v) = tab.get("cpus") {
        match r.uint_from(v, "cpus", 1, MAX_CPUS) {
            Some(0) => {
                let e = r
                    .err(v.span(), "`cpus` is 0")
                    .expected(format!("a number of processors from 1 to {MAX_CPUS}"));
                r.push(e);
            }
            Some(n) => m.cpus = n as usize,
            None => {}
        }
    }
    if let Some(v) = tab.get("context_switch") {
        m.context_switch = r.duration(v, "context_switch").unwrap_or_default();
    }
    if let Some(v) = tab.get("timer") {
        if let Some(s) = r.string(v, "timer") {
            let t = s.trim().to_ascii_lowercase();
            if t == "precise" {
                m.timer = TimerModel::Precise;
            } else if let Some(hz) = t
                .strip_suffix("hz")
                .and_then(|n| n.trim().parse::<u32>().ok())
                .filter(|&n| n > 0)
            {
                // A tick is an interval: at least `MIN_INTERVAL` apart.
                let max = 1_000_000_000 / MIN_INTERVAL.as_nanos();
                if u64::from(hz) > max {
                    let e = r
                        .err(
                            v.span(),
                            format!(
                                "a {hz} Hz `timer` ticks more often than every {}, the shortest interval hsched models",
                                MIN_INTERVAL
                            ),
                        )
                        .expected(format!("at most \"{max}hz\""));
                    r.push(e);
                } else {
                    m.timer = TimerModel::Tick { hz };
                }
            } else {
                let e = r
                    .err(v.span(), format!("`timer` = \"{s}\" is not a timer model"))
                    .expected("\"precise\", or a periodic tick such as \"1000hz\" or \"800hz\"")
                    .maybe_hint(did_you_mean(&t, ["precise"]));
                r.push(e);
            }
        }
    }
    if let Some(v) = tab.get("context_switch") {
        // A switch that lasts a tick, or any quantum, leaves no time to run.
        let tick = match m.timer {
            TimerModel::Tick { hz } => Some((hz, Duration(1_000_000_000 / u64::from(hz)))),
            TimerModel::Precise => None,
        };
        let (limit, why) = match tick {
            Some((hz, t)) if t < MAX_CONTEXT_SWITCH => {
                (t, format!("the interval of the {hz} Hz `timer`"))
            }
            _ => (
                MAX_CONTEXT_SWITCH,
                "the longest default quantum (`best`)".to_string(),
            ),
        };
        if m.context_switch >= limit {
            let e = r
                .err(
                    v.span(),
                    format!(
                        "`context_switch` ({}) is not shorter than {limit}, {why}: switching would leave threads no time to run",
                        m.context_switch
                    ),
                )
                .expected(format!("less than {limit} (a real switch costs microseconds)"));
            r.push(e);
            m.context_switch = Duration::ZERO;
        }
    }
    if let Some(v) = tab.get("stolen") {
        for t in r.tables(v, "stolen") {
            if let Some(s) = read_stolen(r, &t, m.cpus) {
                m.stolen.push(s);
            }
        }
    }
    m
}

fn read_stolen(r: &mut Reader<'_>, t: &Tab<'_, '_>, cpus: usize) -> Option<StolenSpec> {
    const PERIODIC: &[&str] = &["every", "amount"];
    const BURST: &[&str] = &["length", "fraction", "slice"];
    let what = "[[machine.stolen]]";
    r.unknown_keys(
        t,
        what,
        &[
            "cpu", "every", "amount", "start", "length", "fraction", "slice", "trace",
        ],
    );
    let cpu = match t.get("cpu") {
        None => {
            r.missing(t, what, "cpu", "0");
            None
        }
        Some(v) => match r.uint(v, "cpu", u32::MAX as u64) {
            Some(c) if (c as usize) < cpus => Some(c as usize),
            Some(c) => {
                let e = r
                    .err(
                        v.span(),
                        format!(
                            "CPU {c} does not exist: the machine has {cpus} CPU{}",
                            if cpus == 1 { "" } else { "s" }
                        ),
                    )
                    .expected(format!("a CPU from 0 to {}", cpus - 1));
                r.push(e);
                None
            }
            None => None,
        },
    };
    let has = |keys: &[&str]| keys.iter().any(|k| t.get(k).is_some());
    let shapes = [has(PERIODIC), has(BURST), t.get("trace").is_some()];
    let count = shapes.iter().filter(|&&b| b).count();
    let expected = "`every` + `amount` (periodic), `length` + `fraction` (burst), or `trace = [[start, length], ...]`";
    if count != 1 {
        let msg = if count == 0 {
            format!("{what} says neither how often nor how much time is stolen")
        } else {
            format!("{what} mixes the keys of several shapes")
        };
        let e = r.err(t.span.clone(), msg).expected(expected);
        r.push(e);
        return None;
    }
    let dur = |r: &mut Reader<'_>, key: &str, default: Option<Duration>| -> Option<Duration> {
        match (t.get(key), default) {
            (Some(v), _) => r.duration(v, key),
            (None, Some(d)) => Some(d),
            (None, None) => {
                r.missing(t, what, key, "\"1ms\"");
                None
            }
        }
    };
    let pattern = if shapes[0] {
        let every = dur(r, "every", None);
        let amount = dur(r, "amount", None);
        let start = dur(r, "start", Some(Duration::ZERO));
        let (every, amount, start) = (every?, amount?, start?);
        if let Some(v) = t.get("every") {
            check_interval(r, v.span(), "stolen `every`", every);
        }
        // Stealing all of every period would leave the processor nothing.
        if every == Duration::ZERO || amount >= every {
            let at = t.get("amount").map(|v| v.span()).unwrap_or(t.span.clone());
            let e = r.err(at, format!("stolen `amount` ({amount}) must be shorter than `every` ({every}), which must be longer than zero")).expected("amount < every");
            r.push(e);
            return None;
        }
        StolenPattern::Periodic {
            every,
            amount,
            start,
        }
    } else if shapes[1] {
        let start = dur(r, "start", Some(Duration::ZERO));
        let length = dur(r, "length", None);
        let slice = dur(r, "slice", Some(Duration::from_millis(1)));
        let fraction = match t.get("fraction") {
            None => {
                r.missing(t, what, "fraction", "0.2");
                None
            }
            Some(v) => match r.number(v, "fraction") {
                Some(f) if f > 0.0 && f < 1.0 => Some(f),
                Some(_) => {
                    let text = text_of(r.src, v);
                    let e = r
                        .err(v.span(), format!("`fraction` = {text} is out of range"))
                        .expected("a fraction of the processor strictly between 0 and 1, e.g. 0.2");
                    r.push(e);
                    None
                }
                None => None,
            },
        };
        let (start, length, slice, fraction) = (start?, length?, slice?, fraction?);
        if let Some(v) = t.get("slice") {
            check_interval(r, v.span(), "`slice`", slice);
        }
        if slice == Duration::ZERO {
            let at = t.get("slice").map(|v| v.span()).unwrap_or(t.span.clone());
            let e = r
                .err(at, "`slice` is zero")
                .expected("a slice longer than zero, e.g. \"1ms\"");
            r.push(e);
            return None;
        }
        // A slice cut short by the burst's end steals all that is left of
        // it, so a burst shorter than one slice would steal 100 %.
        if slice > length && length > Duration::ZERO {
            let at = t.get("slice").map(|v| v.span()).unwrap_or(t.span.clone());
            let slice_is = if t.get("slice").is_none() {
                format!("`slice`, {slice} by default,")
            } else {
                format!("`slice` ({slice})")
            };
            let e = r
                .err(
                    at,
                    format!("the burst's {slice_is} is longer than its `length` ({length}), so it would steal the whole burst instead of `fraction` = {fraction} of it"),
                )
                .expected(format!(
                    "a `slice` no longer than `length`, e.g. \"{}\"",
                    Duration((length.as_nanos() / 10).max(MIN_INTERVAL.as_nanos()).min(length.as_nanos()))
                ));
            r.push(e);
            return None;
        }
        // Each slice steals a whole number of nanoseconds, at least one,
        // and leaves at least one: a smaller share would be rounded up
        // (or down) to that without a word. (A slice under the shortest
        // interval has its own error.)
        let least = fraction.min(1.0 - fraction);
        if slice >= MIN_INTERVAL && (slice.as_nanos() as f64) * least < 1.0 {
            let at = t.get("slice").map(|v| v.span()).unwrap_or(t.span.clone());
            let e = r
                .err(
                    at,
                    format!("`fraction` = {fraction} of a {slice} `slice` is less than 1 ns a slice, which hsched cannot steal exactly"),
                )
                .expected(format!(
                    "a `slice` of at least {}",
                    Duration((1.0 / least).ceil().min(u64::MAX as f64) as u64)
                ));
            r.push(e);
            return None;
        }
        StolenPattern::Burst {
            start,
            length,
            fraction,
            slice,
        }
    } else {
        let v = t.get("trace")?;
        let items = r.array(v, "trace")?;
        if items.is_empty() {
            let e = r
                .err(v.span(), "`trace` is empty: the source steals nothing")
                .expected("at least one steal [start, length], e.g. [[\"10ms\", \"1ms\"]]")
                .hint("remove the [[machine.stolen]] table to steal nothing");
            r.push(e);
            return None;
        }
        let mut steals: Vec<(Duration, Duration)> = Vec::new();
        let mut ok = true;
        for item in items.iter() {
            let pair = match item.get_ref() {
                DeValue::Array(a) if a.len() == 2 => {
                    let s = r.duration(&a[0], "start");
                    let l = r.duration(&a[1], "length");
                    s.zip(l)
                }
                _ => {
                    let e = r
                        .err(
                            item.span(),
                            "each entry of `trace` must be a pair [start, length]",
                        )
                        .expected("[\"10ms\", \"1ms\"]");
                    r.push(e);
                    None
                }
            };
            match pair {
                Some((s, l)) => {
                    if let Some(&(ps, pl)) = steals.last() {
                        if s < ps + pl {
                            let e = r.err(item.span(), format!("steal at {s} starts before the previous one ({ps} for {pl}) ends")).expected("steals sorted by start, without overlap");
                            r.push(e);
                            ok = false;
                        }
                    }
                    steals.push((s, l));
                }
                None => ok = false,
            }
        }
        if !ok {
            return None;
        }
        StolenPattern::Trace { steals }
    };
    Some(StolenSpec { cpu: cpu?, pattern })
}

fn read_sim(r: &mut Reader<'_>, v: Option<&V<'_>>) -> SimDefaults {
    let mut s = SimDefaults::default();
    let Some(v) = v else { return s };
    let Some(tab) = r.table(v, "sim") else {
        return s;
    };
    r.unknown_keys(&tab, "[sim]", SIM_KEYS);
    if let Some(v) = tab.get("duration") {
        s.duration = r.duration(v, "duration");
        if s.duration == Some(Duration::ZERO) {
            let e = r
                .err(v.span(), "`duration` is zero")
                .expected("a simulated time longer than zero, e.g. \"10s\"");
            r.push(e);
        }
    }
    if let Some(v) = tab.get("seed") {
        s.seed = r.uint(v, "seed", i64::MAX as u64);
    }
    s
}

/// Reads `[[queue]]` tables: `name`, `size` (items), `initial` (items,
/// default 0).
fn read_queues(r: &mut Reader<'_>, v: Option<&V<'_>>) -> Vec<QueueSpec> {
    let mut out: Vec<QueueSpec> = Vec::new();
    let Some(v) = v else { return out };
    for tab in r.tables(v, "queue") {
        r.unknown_keys(&tab, "[[queue]]", &["name", "size", "initial"]);
        let Some(nv) = tab.get("name") else {
            r.missing(&tab, "[[queue]]", "name", "\"q1\"");
            continue;
        };
        let Some(name) = r.name(nv, "name") else {
            continue;
        };
        if out.iter().any(|q| q.name == name) {
            let e = r
                .err(nv.span(), format!("duplicate queue `{name}`"))
                .expected("a name no other [[queue]] uses");
            r.push(e);
            continue;
        }
        let size = match tab.get("size") {
            None => {
                r.missing(&tab, &format!("queue `{name}`"), "size", "64");
                continue;
            }
            Some(v) => match r.uint_from(v, "size", 1, MAX_QUEUE) {
                Some(0) => {
                    let e = r
                        .err(v.span(), format!("queue `{name}` has `size` 0"))
                        .expected(format!("a capacity from 1 to {MAX_QUEUE} items"));
                    r.push(e);
                    continue;
                }
                Some(n) => n,
                None => continue,
            },
        };
        let initial = match tab.get("initial") {
            None => 0,
            Some(v) => match r.uint(v, "initial", MAX_QUEUE) {
                Some(n) if n <= size => n,
                Some(n) => {
                    let e = r
                        .err(
                            v.span(),
                            format!("queue `{name}` starts with {n} items but holds {size}"),
                        )
                        .expected(format!("`initial` from 0 to {size}"));
                    r.push(e);
                    continue;
                }
                None => continue,
            },
        };
        let span = r.span(&tab.span);
        out.push(QueueSpec {
            name,
            size,
            initial,
            span,
        });
    }
    out
}

fn read_principals(r: &mut Reader<'_>, v: Option<&V<'_>>) -> Vec<PrincipalSpec> {
    let mut out: Vec<PrincipalSpec> = Vec::new();
    let Some(v) = v else { return out };
    for tab in r.tables(v, "principal") {
        r.unknown_keys(&tab, "[[principal]]", crate::rm::PRINCIPAL_KEYS);
        let rm = crate::rm::read_principal(r, &tab);
        let Some(nv) = tab.get("name") else {
            r.missing(&tab, "[[principal]]", "name", "\"alice\"");
            continue;
        };
        let Some(name) = r.name(nv, "name") else {
            continue;
        };
        if out.iter().any(|p| p.name == name) {
            let e = r
                .err(nv.span(), format!("duplicate principal `{name}`"))
                .expected("a name no other [[principal]] uses");
            r.push(e);
            continue;
        }
        out.push(PrincipalSpec { name, rm });
    }
    out
}

/// Reads one `[[scheduler]]` table (or the `scheduler` table of a
/// `create-scheduler` operation). Records its sites under `path`.
fn read_scheduler(
    r: &mut Reader<'_>,
    tab: &Tab<'_, '_>,
    path: &str,
    fallback_what: &str,
    policies: &[PolicyInfo],
    cpus: usize,
) -> Option<(SchedulerSpec, bool)> {
    let before = r.errs.len();
    r.sites.put(path.to_string(), tab.span.clone());
    let name = match tab.get("name") {
        None => {
            r.missing(tab, fallback_what, "name", "\"...\"");
            None
        }
        Some(v) => {
            r.sites.put(format!("{path}.name="), v.span());
            r.name(v, "name")
        }
    };
    let what = match &name {
        Some(n) => format!("scheduler `{n}`"),
        None => fallback_what.to_string(),
    };
    let policy_names: Vec<&str> = policies.iter().map(|p| p.name).collect();
    let mut info: Option<&PolicyInfo> = None;
    let policy = match tab.get("policy") {
        None => {
            r.missing(tab, &what, "policy", "\"fp\"");
            // Without a policy, other keys are not checked as its
            // parameters: name the one that is likely `policy` misspelled.
            let near = tab.keys().find(|(k, _)| closest(k, ["policy"]).is_some());
            if let (Some((k, _)), Some(e)) = (near, r.errs.last_mut()) {
                e.hint = Some(format!("`{k}` is not a key here; did you mean `policy`?"));
            }
            None
        }
        Some(v) => {
            r.sites.put(format!("{path}.policy="), v.span());
            let p = r.name(v, "policy");
            if let Some(p) = &p {
                info = find_policy(policies, p);
                if info.is_none() {
                    let e = r
                        .err(v.span(), format!("unknown policy `{p}` for {what}"))
                        .expected(one_of_these(&policy_names))
                        .maybe_hint(did_you_mean(p, policy_names.iter().copied()));
                    r.push(e);
                }
            }
            p
        }
    };
    // Keys besides the fixed ones are instance parameters of the policy.
    let mut params = Params::new();
    let mut params_ok = true;
    for (k, kspan) in tab.keys() {
        if SCHED_KEYS.contains(&k) {
            continue;
        }
        let Some(v) = tab.get(k) else { continue };
        r.sites.put(format!("{path}.inst.{k}"), kspan.clone());
        r.sites.put(format!("{path}.inst.{k}="), v.span());
        match info {
            Some(info) if !info.instance_params.iter().any(|s| s.key == k) => {
                let inst: Vec<&str> = info.instance_params.iter().map(|s| s.key).collect();
                let accepted: Vec<&str> = SCHED_KEYS
                    .iter()
                    .copied()
                    .chain(inst.iter().copied())
                    .collect();
                let e = r
                    .err(
                        kspan,
                        format!("unknown key `{k}` in {what} (policy `{}`)", info.name),
                    )
                    .expected(format!(
                        "{}, or a parameter of `{}`: {}",
                        one_of(SCHED_KEYS),
                        info.name,
                        if inst.is_empty() {
                            "it has none".to_string()
                        } else {
                            one_of(&inst)
                        }
                    ))
                    .maybe_hint(did_you_mean(k, accepted.iter().copied()));
                r.push(e);
                params_ok = false;
            }
            _ => match r.scalar(v, k) {
                Some(pv) => params.insert(k, pv),
                None => params_ok = false,
            },
        }
    }
    let mut parents: Vec<ParentSpec> = Vec::new();
    let single = tab.get("parent");
    let multi = tab.get("parents");
    let mut parents_ok = true;
    match (single, multi) {
        (Some(_), Some(m)) => {
            let e = r.err(m.span(), format!("{what} has both `parent` and `parents`")).expected("`parent = \"name\"` for one parent, or `parents = [ { name = \"...\" }, ... ]` for several");
            r.push(e);
            parents_ok = false;
        }
        (Some(v), None) => {
            r.sites.put(format!("{path}.parent.0"), v.span());
            r.sites.put(format!("{path}.parent.0="), v.span());
            match r.name(v, "parent") {
                Some(pn) => {
                    let pparams = match tab.get("params") {
                        Some(pv) => r.params(pv, "params", &format!("{path}.parent.0.params")),
                        None => Some(Params::new()),
                    };
                    match pparams {
                        Some(pp) => parents.push(ParentSpec {
                            name: pn,
                            params: pp,
                        }),
                        None => parents_ok = false,
                    }
                }
                None => parents_ok = false,
            }
        }
        (None, Some(v)) => {
            r.sites.put(format!("{path}.parents"), v.span());
            let entries = r.tables(v, "parents");
            if entries.is_empty() && r.array(v, "parents").is_some_and(|a| a.is_empty()) {
                let e = r
                    .err(v.span(), format!("{what} has an empty `parents` list"))
                    .expected(
                        "at least one `{ name = \"...\" }`, or no `parents` at all for a root",
                    );
                r.push(e);
                parents_ok = false;
            }
            for (j, t) in entries.iter().enumerate() {
                let ppath = format!("{path}.parent.{j}");
                r.sites.put(format!("{ppath}.params"), t.span.clone());
                let Some(nv) = t.get("name") else {
                    r.missing(t, "a `parents` entry", "name", "\"parent\"");
                    parents_ok = false;
                    continue;
                };
                r.sites.put(ppath.clone(), nv.span());
                r.sites.put(format!("{ppath}="), nv.span());
                let Some(pn) = r.name(nv, "name") else {
                    parents_ok = false;
                    continue;
                };
                let mut pp = Params::new();
                for (k, kspan) in t.keys() {
                    if k == "name" {
                        continue;
                    }
                    let Some(pv) = t.get(k) else { continue };
                    r.sites.put(format!("{ppath}.params.{k}"), kspan);
                    r.sites.put(format!("{ppath}.params.{k}="), pv.span());
                    match r.scalar(pv, k) {
                        Some(x) => pp.insert(k, x),
                        None => parents_ok = false,
                    }
                }
                if parents.iter().any(|p| p.name == pn) {
                    let e = r
                        .err(nv.span(), format!("{what} lists parent `{pn}` twice"))
                        .expected("each parent once");
                    r.push(e);
                    parents_ok = false;
                }
                parents.push(ParentSpec {
                    name: pn,
                    params: pp,
                });
            }
            if let Some(pv) = tab.get("params") {
                let e = r
                    .err(tab.key_span("params").unwrap_or(pv.span()), format!("{what} has `params` next to `parents`"))
                    .expected("parent-side parameters inside each `parents` entry: `{ name = \"...\", amount = \"10ms\" }`");
                r.push(e);
                parents_ok = false;
            }
        }
        (None, None) => {
            if let Some(pv) = tab.get("params") {
                let e = r
                    .err(tab.key_span("params").unwrap_or(pv.span()), format!("{what} is a root (it has no `parent`), so it has no parent-side `params`"))
                    .expected("`params` only together with `parent`")
                    .hint("parameters of the scheduler itself go directly in the [[scheduler]] table");
                r.push(e);
                parents_ok = false;
            }
        }
    }
    let mut root_cpus = Vec::new();
    if let Some(v) = tab.get("cpus") {
        r.sites.put(format!("{path}.cpus"), v.span());
        if !parents.is_empty() || multi.is_some() {
            let e = r
                .err(
                    v.span(),
                    format!("{what} has a parent, so it cannot own `cpus`"),
                )
                .expected("`cpus` only on a root (a scheduler without `parent`)")
                .hint("a child runs on the processors its parents give it");
            r.push(e);
        } else if let Some(a) = r.array(v, "cpus") {
            if a.is_empty() {
                let e = r
                    .err(
                        v.span(),
                        format!("root `{}` has no CPUs", name.as_deref().unwrap_or("?")),
                    )
                    .expected(format!(
                        "a list of CPU numbers from 0 to {}, e.g. [0]",
                        cpus.saturating_sub(1)
                    ));
                r.push(e);
            }
            // The first entry that is no CPU number is reported, not every
            // one: a long list of them would take gigabytes of errors.
            for c in a.iter() {
                match r.uint(c, "cpus", u32::MAX as u64) {
                    Some(n) => root_cpus.push(n as usize),
                    None => break,
                }
            }
        }
    }
    let guarantee = tab.get("guarantee").and_then(|v| {
        r.sites.put(format!("{path}.guarantee="), v.span());
        let g = r.string(v, "guarantee")?;
        check_guarantee(r, v, &g).then_some(g)
    });
    let span = r.span(&tab.span);
    let ok = params_ok && parents_ok && r.errs.len() == before;
    // Without its policy (an error already) it is still declared: its
    // children and threads are not told that their parent does not exist.
    let spec = SchedulerSpec {
        name: name?,
        policy: policy.unwrap_or_default(),
        params,
        parents,
        cpus: root_cpus,
        guarantee,
        span,
    };
    Some((spec, ok))
}

/// Checks a guarantee's syntax (Regehr 2001, §5.2.1), pointing at the
/// offending token inside the string when it can.
fn check_guarantee(r: &mut Reader<'_>, v: &V<'_>, text: &str) -> bool {
    match crate::guarantee_syntax(text) {
        Ok(()) => true,
        Err(g) => {
            // Point inside the quotes when the string has no escapes.
            let raw = text_of(r.src, v);
            let span = if raw.len() == text.len() + 2 && raw[1..raw.len() - 1] == *text {
                let start = v.span().start + 1 + g.offset.min(text.len());
                start..start + g.token.len().max(1)
            } else {
                v.span()
            };
            let e = r
                .err(span, format!("bad guarantee \"{text}\": {}", g.problem))
                .expected(g.expected)
                .maybe_hint((!g.hint.is_empty()).then_some(g.hint));
            r.push(e);
            false
        }
    }
}

/// Checks the instance parameters of a scheduler and tries to build it, so
/// that bad values are reported with the file instead of at run time.
fn check_instance(d: &mut Diag<'_>, s: &SchedulerSpec, path: &str, policies: &[PolicyInfo]) {
    let Some(info) = find_policy(policies, &s.policy) else {
        return;
    };
    let before = d.errs.len();
    let owner = format!("schedulers of policy `{}`", info.name);
    check_params(
        d,
        info.instance_params,
        &s.params,
        &format!("{path}.inst"),
        s.span,
        &format!("scheduler `{}`", s.name),
        &owner,
        info.name,
    );
    if d.errs.len() > before {
        return;
    }
    if let Err(e) = (info.build)(&s.params) {
        let site = match &e {
            hsched_core::PolicyError::Param(p) => format!("{path}.inst.{}=", p.key),
            _ => path.to_string(),
        };
        let err = d.make(
            &site,
            s.span,
            format!(
                "scheduler `{}` (policy `{}`) cannot be built: {e}",
                s.name, info.name
            ),
        );
        let err = match info.instance_params.is_empty() {
            true => err,
            false => err.expected(format!(
                "parameters {}",
                info.instance_params
                    .iter()
                    .map(|p| format!("`{}` ({}, default {})", p.key, p.kind, p.default))
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
        };
        d.push(err);
    }
}

/// Reads `[[thread]]` tables, expanding `count`. Returns the threads and
/// the site prefix of each.
fn read_threads(
    r: &mut Reader<'_>,
    v: Option<&V<'_>>,
    principals: &BTreeSet<String>,
    queues: &BTreeSet<String>,
) -> (Vec<ThreadSpec>, Vec<String>, Vec<usize>) {
    let mut out: Vec<ThreadSpec> = Vec::new();
    let mut paths = Vec::new();
    let mut broken = Vec::new();
    let mut total_steps = 0usize;
    // Once over the limits, one error says so; the tables after it are
    // still read for their own errors.
    let mut too_large = false;
    let mut first_line: BTreeMap<String, u32> = BTreeMap::new();
    let Some(v) = v else {
        return (out, paths, broken);
    };
    for (i, tab) in r.tables(v, "thread").into_iter().enumerate() {
        let path = format!("thread.{i}");
        r.sites.put(path.clone(), tab.span.clone());
        r.unknown_keys(&tab, "[[thread]]", THREAD_KEYS);
        let nv = tab.get("name");
        let name = match nv {
            None => {
                r.missing(&tab, "[[thread]]", "name", "\"...\"");
                None
            }
            Some(v) => {
                r.sites.put(format!("{path}.name="), v.span());
                r.name(v, "name")
            }
        };
        let what = format!("thread `{}`", name.as_deref().unwrap_or("?"));
        let mut sched_ok = true;
        let scheduler = match tab.get("scheduler") {
            None => String::new(),
            Some(v) => {
                r.sites.put(format!("{path}.scheduler="), v.span());
                r.name(v, "scheduler").unwrap_or_else(|| {
                    sched_ok = false;
                    String::new()
                })
            }
        };
        let mut params_ok = true;
        let params = match tab.get("params") {
            None => Params::new(),
            Some(v) => r
                .params(v, "params", &format!("{path}.params"))
                .unwrap_or_else(|| {
                    params_ok = false;
                    Params::new()
                }),
        };
        let guarantee = tab.get("guarantee").and_then(|v| {
            let g = r.string(v, "guarantee")?;
            if check_guarantee(r, v, &g) {
                Some(g)
            } else {
                None
            }
        });
        let principal = tab.get("principal").and_then(|v| {
            let p = r.name(v, "principal")?;
            if !principals.contains(&p) {
                let names: Vec<&str> = principals.iter().map(String::as_str).collect();
                let e = r
                    .err(
                        v.span(),
                        format!("{what} belongs to principal `{p}`, which is not declared"),
                    )
                    .expected(if names.is_empty() {
                        "a [[principal]] with this name".to_string()
                    } else {
                        one_of_these(&names)
                    })
                    .maybe_hint(did_you_mean(&p, names.iter().copied()));
                r.push(e);
            }
            Some(p)
        });
        let count = match tab.get("count") {
            None => 1,
            Some(v) => match r.uint_from(v, "count", 1, MAX_COUNT) {
                Some(0) => {
                    let e = r
                        .err(v.span(), "`count` is 0")
                        .expected(format!("a number of threads from 1 to {MAX_COUNT}"))
                        .hint("remove the [[thread]] to have none");
                    r.push(e);
                    1
                }
                Some(n) => n,
                None => 1,
            },
        };
        let start = tab
            .get("start")
            .and_then(|v| r.duration(v, "start"))
            .unwrap_or_default();
        let exit = tab.get("exit").and_then(|v| {
            let x = r.duration(v, "exit")?;
            if x <= start {
                let e = r
                    .err(
                        v.span(),
                        format!(
                            "{what} exits at {}, not after it starts ({})",
                            At(x),
                            At(start)
                        ),
                    )
                    .expected(format!("an exit time later than start ({})", At(start)))
                    .hint("give `exit` a time after `start`, or leave `exit` out for a thread that runs to the end");
                r.push(e);
            }
            Some(x)
        });
        let exec = tab.get("exec").and_then(|v| {
            let a = r.array(v, "exec")?;
            let mut args = Vec::new();
            for item in a.iter() {
                args.push(r.string(item, "exec")?);
            }
            if args.is_empty() || args[0].is_empty() {
                let e = r
                    .err(v.span(), "`exec` is empty")
                    .expected("the program and its arguments, e.g. [\"./prog\", \"arg\"]");
                r.push(e);
                return None;
            }
            Some(args)
        });
        let workload = tab
            .get("workload")
            .and_then(|v| read_workload(r, v, queues));
        let rtapp = tab.get("rtapp").and_then(|v| r.name(v, "rtapp"));
        if let (Some(_), Some(_)) = (&workload, &rtapp) {
            let at = tab.key_span("rtapp").unwrap_or(tab.span.clone());
            let e = r
                .err(at, format!("{what} has both `workload` and `rtapp`"))
                .expected("one of them: a built-in workload, or the program of an rt-app task");
            r.push(e);
        }
        if rtapp.is_some() && count > 1 {
            let at = tab
                .get("count")
                .map(|v| v.span())
                .unwrap_or(tab.span.clone());
            let e = r
                .err(
                    at,
                    format!(
                        "{what} takes rt-app task `{}` but has `count` = {count}",
                        rtapp.as_deref().unwrap_or("")
                    ),
                )
                .expected("`count = 1`: an rt-app task is one thread")
                .hint("use rt-app's `instance` to make copies of a task");
            r.push(e);
        }
        if ["workload", "rtapp", "exec"]
            .iter()
            .all(|k| tab.get(k).is_none())
        {
            let e = r.err(tab.span.clone(), format!("{what} does nothing: it has no `workload`, `rtapp` or `exec`")).expected("`workload = { kind = \"cpu-bound\" }` (simulation), `rtapp = \"task\"`, or `exec = [\"prog\"]` (live mode)");
            r.push(e);
        }
        // A thread with errors is still passed on (unless its name or
        // scheduler is unreadable), so that later checks do not report
        // operations on it as naming an unknown thread.
        let (Some(name), true) = (name, sched_ok) else {
            continue;
        };
        let span = r.span(&tab.span);
        let base = ThreadSpec {
            name: name.clone(),
            scheduler,
            params,
            workload,
            rtapp: rtapp.map(|task| RtAppBinding {
                task,
                declared: true,
            }),
            principal,
            guarantee,
            start,
            exit,
            exec,
            span,
        };
        // Bound what one file may expand to (threads, and steps in all).
        let steps = match &base.workload {
            Some(WorkloadSpec::Program(p)) => p.steps.len(),
            _ => 1,
        };
        let more = (count as usize).saturating_mul(steps);
        if out.len() + count as usize > MAX_COUNT as usize
            || total_steps + more > crate::rtapp::MAX_TOTAL_STEPS
        {
            if !too_large {
                too_large = true;
                let e = r
                    .err(tab.span.clone(), format!("{what} makes the file too large: {count} thread(s) of {steps} step(s) after {} thread(s)", out.len()))
                    .expected(format!("at most {MAX_COUNT} threads and {} program steps in all", crate::rtapp::MAX_TOTAL_STEPS))
                    .hint("the threads declared after this one are not counted");
                r.push(e);
            }
            continue;
        }
        total_steps += more;
        for k in 0..count {
            let mut t = base.clone();
            if count > 1 {
                t.name = format!("{name}.{k}");
            }
            if let Some(line) = first_line.get(&t.name) {
                let at = nv.map(|v| v.span()).unwrap_or(tab.span.clone());
                let e = r
                    .err(at, format!("duplicate thread name `{}`", t.name))
                    .expected("a name no other thread uses")
                    .hint(format!("`{}` is first declared at line {line}", t.name));
                r.push(e);
                break;
            }
            first_line.insert(t.name.clone(), span.line);
            // Parameters that did not parse are not checked again.
            if !params_ok {
                broken.push(out.len());
            }
            out.push(t);
            paths.push(path.clone());
        }
    }
    (out, paths, broken)
}

/// Reads a `workload = { kind = ..., ... }` table.
fn read_workload(r: &mut Reader<'_>, v: &V<'_>, queues: &BTreeSet<String>) -> Option<WorkloadSpec> {
    let tab = r.table(v, "workload")?;
    let Some(kv) = tab.get("kind") else {
        let e = r
            .err(tab.span.clone(), "the workload has no `kind`")
            .expected(format!("`kind = ...`, one of {}", one_of(KINDS)));
        r.push(e);
        return None;
    };
    let kind = r.string(kv, "kind")?;
    let keys: &[&str] = match kind.as_str() {
        "cpu-bound" => &["kind"],
        "periodic" => &["kind", "period", "exec", "deadline", "jitter", "offset"],
        "sporadic" => &[
            "kind",
            "min_interarrival",
            "max_interarrival",
            "exec",
            "deadline",
        ],
        "interactive" => &["kind", "think", "burst"],
        "io" => &["kind", "compute", "io"],
        "video" => &[
            "kind", "period", "fps", "exec", "i", "p", "b", "gop", "on_miss",
        ],
        "frame-renderer" => &["kind", "work", "miss_gap"],
        "program" => &["kind", "steps", "loops", "delay"],
        "stage" => &[
            "kind", "input", "output", "cost", "rate", "pulses", "report",
        ],
        "player" => &[
            "kind",
            "fps",
            "decode",
            "spread",
            "event",
            "display",
            "window",
            "cooperative",
        ],
        other => {
            let e = r
                .err(kv.span(), format!("unknown workload kind `{other}`"))
                .expected(one_of_these(KINDS))
                .maybe_hint(did_you_mean(other, KINDS.iter().copied()));
            r.push(e);
            return None;
        }
    };
    let what = format!("the `{kind}` workload");
    r.unknown_keys(&tab, &what, keys);
    let before = r.errs.len();
    // Required duration, or a default.
    let dur =
        |r: &mut Reader<'_>, key: &str, default: Option<Duration>, example: &str| -> Duration {
            match (tab.get(key), default) {
                (Some(v), _) => r.duration(v, key).unwrap_or_default(),
                (None, Some(d)) => d,
                (None, None) => {
                    r.missing(&tab, &what, key, example);
                    Duration::ZERO
                }
            }
        };
    // Reports a value that parses as a zero duration (a value that does not
    // parse is reported once, by `dur`).
    let positive = |r: &mut Reader<'_>, key: &str, _d: Duration| {
        let zero = match tab.get(key).map(|v| v.get_ref()) {
            Some(DeValue::String(s)) => {
                hsched_core::time::parse_duration(s, None) == Ok(Duration::ZERO)
            }
            Some(v @ DeValue::Integer(_)) => crate::read::int_of(v) == Some(0),
            _ => false,
        };
        if zero {
            if let Some(v) = tab.get(key) {
                let e = r
                    .err(v.span(), format!("`{key}` is zero"))
                    .expected(format!("`{key}` longer than zero"));
                r.push(e);
            }
        }
    };
    // A duration that sets how often the workload acts.
    let interval = |r: &mut Reader<'_>, key: &str, d: Duration| {
        if let Some(v) = tab.get(key) {
            check_interval(r, v.span(), &format!("`{key}`"), d);
        }
    };
    let w = match kind.as_str() {
        "cpu-bound" => WorkloadSpec::CpuBound,
        "periodic" => {
            let period = dur(r, "period", None, "\"33ms\"");
            let exec = dur(r, "exec", None, "\"10ms\"");
            let deadline = dur(r, "deadline", Some(period), "");
            let jitter = dur(r, "jitter", Some(Duration::ZERO), "");
            let offset = dur(r, "offset", Some(Duration::ZERO), "");
            positive(r, "period", period);
            positive(r, "exec", exec);
            positive(r, "deadline", deadline);
            interval(r, "period", period);
            WorkloadSpec::Periodic {
                period,
                exec,
                deadline,
                jitter,
                offset,
            }
        }
        "sporadic" => {
            let min = dur(r, "min_interarrival", None, "\"20ms\"");
            let max = dur(r, "max_interarrival", Some(min), "");
            let exec = dur(r, "exec", None, "\"5ms\"");
            let deadline = dur(r, "deadline", Some(min), "");
            positive(r, "min_interarrival", min);
            positive(r, "exec", exec);
            interval(r, "min_interarrival", min);
            positive(r, "deadline", deadline);
            if max < min {
                if let Some(v) = tab.get("max_interarrival") {
                    let e = r.err(v.span(), format!("`max_interarrival` ({max}) is shorter than `min_interarrival` ({min})")).expected(format!("at least {min}"));
                    r.push(e);
                }
            }
            WorkloadSpec::Sporadic {
                min_interarrival: min,
                max_interarrival: max,
                exec,
                deadline,
            }
        }
        "interactive" => {
            let think = dur(r, "think", None, "\"500ms\"");
            let burst = dur(r, "burst", None, "\"5ms\"");
            positive(r, "burst", burst);
            check_interval(
                r,
                tab.span.clone(),
                "`think` + `burst`",
                think.saturating_add(burst),
            );
            WorkloadSpec::Interactive { think, burst }
        }
        "io" => {
            let compute = dur(r, "compute", None, "\"2ms\"");
            let io = dur(r, "io", None, "\"8ms\"");
            if compute == Duration::ZERO
                && io == Duration::ZERO
                && tab.get("compute").is_some()
                && tab.get("io").is_some()
            {
                let e = r
                    .err(tab.span.clone(), "`compute` and `io` are both zero")
                    .expected("at least one of them longer than zero");
                r.push(e);
            }
            check_interval(
                r,
                tab.span.clone(),
                "`compute` + `io`",
                compute.saturating_add(io),
            );
            WorkloadSpec::BlockingIo { compute, io }
        }
        "video" => read_video(r, &tab, &what)?,
        "frame-renderer" => {
            let work = dur(r, "work", Some(Duration::from_millis(10)), "");
            let miss_gap = dur(r, "miss_gap", Some(Duration::from_millis(33)), "");
            positive(r, "work", work);
            positive(r, "miss_gap", miss_gap);
            interval(r, "work", work);
            WorkloadSpec::FrameRenderer { work, miss_gap }
        }
        "stage" => read_stage(r, &tab, &what, queues)?,
        "player" => read_player(r, &tab)?,
        _ => WorkloadSpec::Program(read_program(r, &tab, &what)?),
    };
    (r.errs.len() == before).then_some(w)
}

/// Reports `what` = `d`, a duration that sets how often something recurs,
/// when it is shorter than [`MIN_INTERVAL`] but not zero (zero is each
/// caller's own case: an error, or "off").
fn check_interval(r: &mut Reader<'_>, at: std::ops::Range<usize>, what: &str, d: Duration) {
    if d > Duration::ZERO && d < MIN_INTERVAL {
        let e = r
            .err(
                at,
                format!("{what} ({d}) is shorter than {MIN_INTERVAL}, the shortest interval hsched models"),
            )
            .expected(format!("at least {MIN_INTERVAL}"));
        r.push(e);
    }
}

/// A `stage` workload (docs/hierarchy-format.md, "Pipelines").
fn read_stage(
    r: &mut Reader<'_>,
    tab: &Tab<'_, '_>,
    what: &str,
    queues: &BTreeSet<String>,
) -> Option<WorkloadSpec> {
    let queue = |r: &mut Reader<'_>, key: &str| -> Option<Option<String>> {
        let Some(v) = tab.get(key) else {
            return Some(None);
        };
        let q = r.name(v, key)?;
        if !queues.contains(&q) {
            let names: Vec<&str> = queues.iter().map(String::as_str).collect();
            let e = r
                .err(
                    v.span(),
                    format!("{what} names {key} queue `{q}`, which is not declared"),
                )
                .expected(if names.is_empty() {
                    format!("a [[queue]] named `{q}` (name, size)")
                } else {
                    one_of_these(&names)
                })
                .maybe_hint(did_you_mean(&q, names.iter().copied()));
            r.push(e);
            return None;
        }
        Some(Some(q))
    };
    let input = queue(r, "input");
    let output = queue(r, "output");
    let (input, output) = (input?, output?);
    if input.is_none() && output.is_none() {
        let e = r
            .err(
                tab.span.clone(),
                format!("{what} has neither `input` nor `output`"),
            )
            .expected(
                "`input = \"q\"` (a consumer), `output = \"q\"` (a producer), or both (a filter)",
            );
        r.push(e);
        return None;
    }
    if input.is_some() && input == output {
        let e = r
            .err(
                tab.span.clone(),
                format!("{what} reads and writes the same queue"),
            )
            .expected("different `input` and `output` queues");
        r.push(e);
        return None;
    }
    let cost = match tab.get("cost") {
        None => {
            r.missing(tab, what, "cost", "\"1ms\"");
            return None;
        }
        Some(v) => {
            let c = r.duration(v, "cost")?;
            if c == Duration::ZERO {
                let e = r
                    .err(v.span(), "`cost` is zero")
                    .expected("the CPU time per item, longer than zero");
                r.push(e);
                return None;
            }
            check_interval(r, v.span(), "`cost`", c);
            c
        }
    };
    let rate = match tab.get("rate") {
        None => None,
        Some(v) => {
            let x = per_second(r, v, "rate", "item", 1e9, "200")?;
            if input.is_some() {
                let e = r
                    .err(v.span(), format!("{what} has `rate` and an `input` queue"))
                    .expected("`rate` only on a source (a stage without `input`): other stages are paced by their input");
                r.push(e);
                return None;
            }
            Some(x)
        }
    };
    let mut pulses = Vec::new();
    if let (Some(pv), Some(_)) = (tab.get("pulses"), &input) {
        let e = r
            .err(pv.span(), format!("{what} has `pulses` and an `input` queue"))
            .expected("`pulses` only on a source (a stage without `input`): other stages follow their input");
        r.push(e);
        return None;
    }
    // Every pulse is read, so that all bad ones are reported at once.
    let mut pulses_ok = true;
    if let Some(pv) = tab.get("pulses") {
        for pt in r.tables(pv, "pulses") {
            r.unknown_keys(&pt, "a pulse", &["start", "length", "factor"]);
            let required = |r: &mut Reader<'_>, key: &str| match pt.get(key) {
                Some(v) => r.duration(v, key),
                None => {
                    r.missing(&pt, "a pulse", key, "\"1s\"");
                    None
                }
            };
            let start = required(r, "start");
            let length = required(r, "length");
            let factor = match pt.get("factor") {
                Some(v) => r.number(v, "factor").filter(|f| {
                    // A millionfold change either way: further would stop
                    // the source or make its items free, not pace them.
                    let ok = (1e-6..=1e6).contains(f);
                    if !ok {
                        let text = text_of(r.src, v);
                        let e = r
                            .err(v.span(), format!("`factor` = {text} is out of range"))
                            .expected("a speed multiplier from 0.000001 to 1000000, e.g. 2 (twice as fast) or 0.5 (half as fast)");
                        r.push(e);
                    }
                    ok
                }),
                None => Some(2.0),
            };
            match (start, length, factor) {
                (Some(start), Some(length), Some(factor)) => pulses.push(Pulse {
                    start,
                    length,
                    factor,
                }),
                _ => pulses_ok = false,
            }
        }
    }
    let report = match tab.get("report") {
        None => Some(Duration::from_millis(10)),
        Some(v) => {
            let d = r.duration(v, "report")?;
            check_interval(r, v.span(), "`report`", d);
            (d > Duration::ZERO).then_some(d)
        }
    };
    if !pulses_ok {
        return None;
    }
    // An unpaced source's cost is divided by the pulses in force: the
    // fastest it gets must still cost an interval hsched models.
    if let (None, Some(pv)) = (rate, tab.get("pulses")) {
        let fastest = fastest_pulse(&pulses);
        let least = Duration(((cost.as_nanos() as f64 / fastest) as u64).max(1));
        if least < MIN_INTERVAL {
            let e = r
                .err(
                    pv.span(),
                    format!(
                        "{what}: its `pulses` speed it up {fastest}-fold, to items of {least}, shorter than {MIN_INTERVAL}, the shortest interval hsched models"
                    ),
                )
                .expected(format!("a `cost` of at least {MIN_INTERVAL} once divided by the factors of the pulses in force together"))
                .hint(format!("raise `cost` to {} or more, or lower the `factor`s", Duration((MIN_INTERVAL.as_nanos() as f64 * fastest).ceil() as u64)));
            r.push(e);
            return None;
        }
    }
    Some(WorkloadSpec::Stage(StageSpec {
        input,
        output,
        cost,
        rate,
        pulses,
        report,
    }))
}

/// The largest product of the factors of pulses in force at one time (1
/// when none speeds the source up).
fn fastest_pulse(pulses: &[Pulse]) -> f64 {
    // A sweep over the pulses' ends and starts, ends first at equal times
    // (a pulse covers `[start, start + length)`).
    let mut edges: Vec<(Duration, bool, f64)> = Vec::with_capacity(2 * pulses.len());
    for p in pulses.iter().filter(|p| p.length > Duration::ZERO) {
        edges.push((p.start, true, p.factor));
        edges.push((p.start.saturating_add(p.length), false, p.factor));
    }
    edges.sort_by_key(|e| (e.0, e.1));
    let (mut now, mut most) = (1.0f64, 1.0f64);
    for (_, starts, factor) in edges {
        if starts {
            now *= factor;
        } else {
            now /= factor;
        }
        most = most.max(now);
    }
    most
}

/// Reads `key`, a number of `what`s per second, from [`MIN_RATE`] to `max`.
fn per_second(
    r: &mut Reader<'_>,
    v: &V<'_>,
    key: &str,
    what: &str,
    max: f64,
    example: &str,
) -> Option<f64> {
    let x = r.number(v, key)?;
    if (MIN_RATE..=max).contains(&x) {
        return Some(x);
    }
    let text = text_of(r.src, v);
    let why = if x > 0.0 && x < MIN_RATE {
        format!(
            ": one {what} every 1/{text} s is longer than the longest duration, {MAX_PARSED_TEXT}"
        )
    } else {
        String::new()
    };
    let e = r
        .err(v.span(), format!("`{key}` = {text} is out of range{why}"))
        .expected(format!(
            "{what}s per second from {MIN_RATE_TEXT} to {max}, e.g. {example}"
        ));
    r.push(e);
    None
}

/// The frame period of `fps = v`: from 1 us ([`MIN_INTERVAL`]) to about
/// 288 years.
fn frame_period(r: &mut Reader<'_>, v: &V<'_>, example: &str) -> Option<Duration> {
    let max = 1e9 / MIN_INTERVAL.as_nanos() as f64;
    let f = per_second(r, v, "fps", "frame", max, example)?;
    Some(Duration::from_nanos((1e9 / f).round() as u64))
}

/// A `player` workload (docs/hierarchy-format.md, "Video players").
fn read_player(r: &mut Reader<'_>, tab: &Tab<'_, '_>) -> Option<WorkloadSpec> {
    let d = |r: &mut Reader<'_>, key: &str, default: Duration| -> Option<Duration> {
        match tab.get(key) {
            None => Some(default),
            Some(v) => {
                let x = r.duration(v, key)?;
                if x == Duration::ZERO {
                    let e = r
                        .err(v.span(), format!("`{key}` is zero"))
                        .expected(format!("`{key}` longer than zero"));
                    r.push(e);
                    return None;
                }
                Some(x)
            }
        }
    };
    let frame = match tab.get("fps") {
        None => Some(Duration::from_nanos(41_666_667)),
        // Not `?`: the other keys' problems are reported too.
        Some(v) => frame_period(r, v, "24"),
    };
    let decode = d(r, "decode", Duration::from_micros(5_500));
    let event = d(r, "event", Duration::from_millis(1));
    if let (Some(e), Some(v)) = (event, tab.get("event")) {
        check_interval(r, v.span(), "`event`", e);
    }
    let display = d(r, "display", Duration::from_micros(50));
    let spread = match tab.get("spread") {
        None => Some(0.4),
        Some(v) => match r.number(v, "spread") {
            None => None,
            Some(x) if (0.0..1.0).contains(&x) => Some(x),
            Some(_) => {
                let text = text_of(r.src, v);
                let e = r
                    .err(v.span(), format!("`spread` = {text} is out of range"))
                    .expected("a relative spread in [0, 1), e.g. 0.4");
                r.push(e);
                None
            }
        },
    };
    let window = match tab.get("window") {
        None => Some(3),
        Some(v) => r.uint(v, "window", 1000),
    };
    let cooperative = match tab.get("cooperative") {
        None => Some(true),
        Some(v) => r.boolean(v, "cooperative"),
    };
    Some(WorkloadSpec::Player(PlayerSpec {
        frame: frame?,
        decode: decode?,
        spread: spread?,
        event: event?,
        display: display?,
        window: window?,
        cooperative: cooperative?,
    }))
}

fn read_video(r: &mut Reader<'_>, tab: &Tab<'_, '_>, what: &str) -> Option<WorkloadSpec> {
    let period = match (tab.get("period"), tab.get("fps")) {
        (Some(_), Some(f)) => {
            let e = r
                .err(f.span(), format!("{what} has both `period` and `fps`"))
                .expected("one of them");
            r.push(e);
            None
        }
        (Some(v), None) => r.duration(v, "period"),
        (None, Some(v)) => frame_period(r, v, "30"),
        (None, None) => {
            let e = r
                .err(
                    tab.span.clone(),
                    format!("{what} has neither `period` nor `fps`"),
                )
                .expected("`period = \"33ms\"` or `fps = 30`");
            r.push(e);
            None
        }
    };
    if period == Some(Duration::ZERO) {
        let e = r
            .err(
                tab.get("period")
                    .map(|v| v.span())
                    .unwrap_or(tab.span.clone()),
                "`period` is zero",
            )
            .expected("a frame period longer than zero");
        r.push(e);
        return None;
    }
    if let (Some(p), Some(v)) = (period, tab.get("period")) {
        check_interval(r, v.span(), "`period`", p);
    }
    let mpeg = ["i", "p", "b", "gop"].iter().any(|k| tab.get(k).is_some());
    let mode = match (tab.get("exec"), mpeg) {
        (Some(v), true) => {
            let e = r
                .err(
                    v.span(),
                    format!("{what} has both `exec` and MPEG frame costs (`i`, `p`, `b`, `gop`)"),
                )
                .expected("`exec` for a constant cost per frame, or `i`, `p`, `b` (and `gop`)");
            r.push(e);
            None
        }
        (Some(v), false) => r
            .duration(v, "exec")
            .map(|exec| VideoMode::Constant { exec }),
        (None, false) => {
            let e = r
                .err(
                    tab.span.clone(),
                    format!("{what} says nothing about the work per frame"),
                )
                .expected("`exec = \"10ms\"`, or `i`, `p`, `b` costs and a `gop` pattern");
            r.push(e);
            None
        }
        (None, true) => {
            let mut get = |k: &str| match tab.get(k) {
                Some(v) => r.duration(v, k),
                None => {
                    r.missing(tab, what, k, "\"10ms\"");
                    None
                }
            };
            let (i, p, b) = (get("i"), get("p"), get("b"));
            let gop = match tab.get("gop") {
                None => Some("IBBPBBPBBPBB".to_string()),
                Some(v) => {
                    let g = r.string(v, "gop")?;
                    if g.is_empty() || !g.chars().all(|c| matches!(c, 'I' | 'P' | 'B')) {
                        let e = r.err(v.span(), format!("`gop` = \"{g}\" is not a group of pictures")).expected("a non-empty pattern of the letters I, P and B, e.g. \"IBBPBBPBBPBB\"");
                        r.push(e);
                        None
                    } else {
                        Some(g)
                    }
                }
            };
            match (i, p, b, gop) {
                (Some(i), Some(p), Some(b), Some(gop)) => Some(VideoMode::Mpeg { i, p, b, gop }),
                _ => None,
            }
        }
    };
    let on_miss = match tab.get("on_miss") {
        None => Some(MissPolicy::Continue),
        Some(v) => match r.string(v, "on_miss")?.as_str() {
            "continue" => Some(MissPolicy::Continue),
            "skip" => Some(MissPolicy::Skip),
            other => {
                let e = r
                    .err(
                        v.span(),
                        format!("`on_miss` = \"{other}\" is not a miss policy"),
                    )
                    .expected("\"continue\" or \"skip\"")
                    .maybe_hint(did_you_mean(other, ["continue", "skip"]));
                r.push(e);
                None
            }
        },
    };
    Some(WorkloadSpec::Video(VideoSpec {
        period: period?,
        mode: mode?,
        on_miss: on_miss?,
    }))
}

fn read_program(r: &mut Reader<'_>, tab: &Tab<'_, '_>, what: &str) -> Option<Program> {
    let Some(sv) = tab.get("steps") else {
        r.missing(
            tab,
            what,
            "steps",
            "[ { run = \"1ms\" }, { sleep = \"2ms\" } ]",
        );
        return None;
    };
    let mut steps = Vec::new();
    let mut ok = true;
    let step_tabs = r.tables(sv, "steps");
    if step_tabs.is_empty() {
        let e = r.err(sv.span(), "the program has no steps").expected(
            "[ { run = \"1ms\" }, { sleep = \"2ms\" }, { timer = \"10ms\", absolute = true } ]",
        );
        r.push(e);
        return None;
    }
    for st in step_tabs {
        r.unknown_keys(
            &st,
            "a program step",
            &["run", "runtime", "sleep", "timer", "absolute"],
        );
        let present: Vec<&str> = ["run", "runtime", "sleep", "timer"]
            .into_iter()
            .filter(|k| st.get(k).is_some())
            .collect();
        if present.len() != 1 {
            let e = r.err(st.span.clone(), format!("a program step must say exactly one of `run`, `runtime`, `sleep` or `timer`{}", if present.is_empty() { String::new() } else { format!(", found {}", one_of(&present)) })).expected("{ run = \"1ms\" }, { runtime = \"1ms\" }, { sleep = \"2ms\" } or { timer = \"10ms\", absolute = true }");
            r.push(e);
            ok = false;
            continue;
        }
        let key = present[0];
        let Some(v) = st.get(key) else { continue };
        let Some(d) = r.duration(v, key) else {
            ok = false;
            continue;
        };
        if let Some(av) = st.get("absolute") {
            if key != "timer" {
                let e = r
                    .err(av.span(), "`absolute` belongs to a `timer` step")
                    .expected("{ timer = \"10ms\", absolute = true }");
                r.push(e);
                ok = false;
            }
        }
        steps.push(match key {
            "run" => Step::Run(d),
            "runtime" => Step::Runtime(d),
            "sleep" => Step::Sleep(d),
            _ => {
                if d == Duration::ZERO {
                    let e = r
                        .err(v.span(), "a `timer` period of zero")
                        .expected("a timer period longer than zero");
                    r.push(e);
                    ok = false;
                }
                let before = r.errs.len();
                check_interval(r, v.span(), "a `timer` period", d);
                ok &= r.errs.len() == before;
                let absolute = match st.get("absolute") {
                    Some(av) => r.boolean(av, "absolute").unwrap_or(false),
                    None => false,
                };
                Step::Timer {
                    period: d,
                    absolute,
                }
            }
        });
    }
    let loops = match tab.get("loops") {
        None => None,
        Some(v) => match r.uint_from(v, "loops", 1, u64::MAX >> 1)? {
            0 => {
                let e = r.err(v.span(), "`loops` is 0").expected(
                    "a number of repetitions of at least 1, or no `loops` to repeat forever",
                );
                r.push(e);
                return None;
            }
            n => Some(n),
        },
    };
    let delay = match tab.get("delay") {
        None => Duration::ZERO,
        Some(v) => r.duration(v, "delay")?,
    };
    let p = Program {
        steps,
        loops,
        delay,
    };
    if ok {
        if let Some(problem) = crate::rtapp::program_problem(&p) {
            let e = r.err(sv.span(), problem).expected("at least one step that takes time (a `run`, `runtime` or `sleep` longer than zero, or a `timer`)");
            r.push(e);
            ok = false;
        }
    }
    if ok && p.loops != Some(1) {
        // Each repetition is at least one event: it must take some time.
        let before = r.errs.len();
        check_interval(
            r,
            sv.span(),
            "one pass over the steps",
            crate::rtapp::pass_time(&p),
        );
        ok = r.errs.len() == before;
    }
    ok.then_some(p)
}

fn read_workload_section(r: &mut Reader<'_>, v: Option<&V<'_>>) -> WorkloadConfig {
    let mut w = WorkloadConfig::default();
    let Some(v) = v else { return w };
    let Some(tab) = r.table(v, "workload") else {
        return w;
    };
    r.unknown_keys(&tab, "[workload]", WORKLOAD_SECTION_KEYS);
    if let Some(v) = tab.get("rtapp") {
        w.rtapp_file = r.name(v, "rtapp");
        w.rtapp_span = Some(r.span(&v.span()));
    }
    if let Some(v) = tab.get("map") {
        for (i, t) in r.tables(v, "map").into_iter().enumerate() {
            let path = format!("workload.map.{i}");
            r.sites.put(path.clone(), t.span.clone());
            r.unknown_keys(&t, "[[workload.map]]", RULE_KEYS);
            let task = match t.get("task") {
                Some(v) => r.name(v, "task"),
                None => {
                    r.missing(&t, "[[workload.map]]", "task", "\"video*\"");
                    None
                }
            };
            let scheduler = rule_scheduler(r, &t, &path, "[[workload.map]]");
            let params = match t.get("params") {
                None => Some(None),
                Some(v) => r.params(v, "params", &format!("{path}.params")).map(Some),
            };
            if let (Some(task), Some(scheduler), Some(params)) = (task, scheduler, params) {
                w.rules.push(MapRule {
                    task,
                    scheduler,
                    params,
                    span: r.span(&t.span),
                });
            }
        }
    }
    w
}

/// A rule that sends threads to a scheduler (`[[workload.map]]`,
/// `[[rule]]`), for the checks both kinds share.
struct RuleTarget {
    /// Site prefix of the rule.
    path: String,
    span: Span,
    /// The rule in messages (`rule #2`).
    who: String,
    /// The threads it places, in parameter messages.
    whose: String,
}

impl RuleTarget {
    /// `scheduler` must be declared, and `params` (when given) must suit it.
    fn check(
        &self,
        d: &mut Diag<'_>,
        scheds: &[SchedulerSpec],
        policies: &[PolicyInfo],
        scheduler: &str,
        params: Option<&Params>,
    ) {
        match scheds.iter().find(|s| s.name == scheduler) {
            None => {
                let names: Vec<&str> = scheds.iter().map(|s| s.name.as_str()).collect();
                let e = d
                    .make(
                        &format!("{}.scheduler=", self.path),
                        self.span,
                        format!(
                            "{} names scheduler `{scheduler}`, which is not declared",
                            self.who
                        ),
                    )
                    .expected(one_of_these(&names))
                    .maybe_hint(did_you_mean(scheduler, names.iter().copied()));
                d.push(e);
            }
            Some(s) => {
                if let (Some(info), Some(params)) = (find_policy(policies, &s.policy), params) {
                    let at = format!("{}.params", self.path);
                    check_child_params(d, info, &s.name, params, &at, self.span, &self.whose);
                }
            }
        }
    }
}

/// The `scheduler` of a `what` table (`[[rule]]`) at site `path`.
fn rule_scheduler(r: &mut Reader<'_>, t: &Tab<'_, '_>, path: &str, what: &str) -> Option<String> {
    match t.get("scheduler") {
        Some(v) => {
            r.sites.put(format!("{path}.scheduler="), v.span());
            r.name(v, "scheduler")
        }
        None => {
            r.missing(t, what, "scheduler", "\"rez\"");
            None
        }
    }
}

/// Reads `[[rule]]` tables (live mode's placement of new threads).
/// Returns each with its position in the file.
fn read_thread_rules(r: &mut Reader<'_>, v: Option<&V<'_>>) -> Vec<(ThreadRule, usize)> {
    let mut out = Vec::new();
    let Some(v) = v else { return out };
    for (i, t) in r.tables(v, "rule").into_iter().enumerate() {
        let path = format!("rule.{i}");
        r.sites.put(path.clone(), t.span.clone());
        r.unknown_keys(&t, "[[rule]]", THREAD_RULE_KEYS);
        let mut ok = true;
        let mut glob = |r: &mut Reader<'_>, key: &str| -> Option<String> {
            let v = t.get(key)?;
            let g = r.name(v, key);
            // Wildcards aside, a glob longer than a thread name can hold
            // would silently never match.
            match g {
                Some(g) if g.bytes().filter(|&b| b != b'*').count() > COMM_LEN => {
                    let e = r
                        .err(
                            v.span(),
                            format!(
                                "`{key} = \"{g}\"` can never match: Linux keeps at most {COMM_LEN} bytes of a name"
                            ),
                        )
                        .hint(format!(
                            "match the first {COMM_LEN} bytes, or end the glob with `*`"
                        ));
                    r.push(e);
                    ok = false;
                    None
                }
                Some(g) => Some(g),
                None => {
                    ok = false;
                    None
                }
            }
        };
        let thread = glob(r, "thread");
        let program = glob(r, "program");
        if ok && thread.is_none() && program.is_none() {
            let e = r
                .err(t.span.clone(), "[[rule]] has neither `thread` nor `program`")
                .expected("`thread = \"decoder*\"` (a glob on the thread's name), `program = \"mpv\"` (on its process's name), or both");
            r.push(e);
            ok = false;
        }
        let scheduler = rule_scheduler(r, &t, &path, "[[rule]]");
        let guarantee = crate::rm::rule_guarantee(r, &t);
        ok &= guarantee.is_some();
        let params = match t.get("params") {
            None => Some(Params::default()),
            Some(v) => r.params(v, "params", &format!("{path}.params")),
        };
        if let (true, Some(scheduler), Some(params)) = (ok, scheduler, params) {
            let rule = ThreadRule {
                thread,
                program,
                scheduler,
                params,
                guarantee: guarantee.flatten(),
                span: r.span(&t.span),
            };
            out.push((rule, i));
        }
    }
    out
}

/// Reads `[[at]]` tables; returns them sorted by time (stable) with the
/// site prefix of each.
fn read_ops(
    r: &mut Reader<'_>,
    v: Option<&V<'_>>,
    policies: &[PolicyInfo],
    cpus: usize,
) -> (Vec<TimedOp>, Vec<String>, Vec<usize>) {
    let mut out: Vec<(TimedOp, String, bool)> = Vec::new();
    let Some(v) = v else {
        return (Vec::new(), Vec::new(), Vec::new());
    };
    for (i, tab) in r.tables(v, "at").into_iter().enumerate() {
        let path = format!("at.{i}");
        r.sites.put(path.clone(), tab.span.clone());
        let at = match tab.get("time") {
            Some(v) => r.duration(v, "time"),
            None => {
                r.missing(&tab, "[[at]]", "time", "\"2s\"");
                None
            }
        };
        let Some(ov) = tab.get("op") else {
            r.missing(&tab, "[[at]]", "op", "\"begin-reservation\"");
            r.unknown_keys(
                &tab,
                "[[at]]",
                &[
                    "time",
                    "op",
                    "thread",
                    "scheduler",
                    "params",
                    "to",
                    "name",
                    "move_threads",
                ],
            );
            continue;
        };
        let Some(op_name) = r.string(ov, "op") else {
            continue;
        };
        let keys: &[&str] = match op_name.as_str() {
            "begin-reservation" => &["time", "op", "thread", "scheduler", "params"],
            "end-reservation" => &["time", "op", "thread"],
            "set-params" => &["time", "op", "thread", "params"],
            "move-thread" => &["time", "op", "thread", "to", "params"],
            "create-scheduler" => &["time", "op", "scheduler"],
            "destroy-scheduler" => &["time", "op", "name"],
            "set-default" => &["time", "op", "name", "move_threads"],
            other => {
                let e = r
                    .err(ov.span(), format!("unknown operation `{other}`"))
                    .expected(one_of_these(OPS))
                    .maybe_hint(did_you_mean(other, OPS.iter().copied()));
                r.push(e);
                continue;
            }
        };
        let what = format!("the `{op_name}` operation");
        r.unknown_keys(&tab, &what, keys);
        let before = r.errs.len();
        let mut create_ok = true;
        let name_of = |r: &mut Reader<'_>, key: &str, example: &str| -> String {
            match tab.get(key) {
                Some(v) => {
                    r.sites.put(format!("{path}.{key}="), v.span());
                    r.name(v, key).unwrap_or_default()
                }
                None => {
                    r.missing(&tab, &what, key, example);
                    String::new()
                }
            }
        };
        let params = |r: &mut Reader<'_>| -> Params {
            match tab.get("params") {
                Some(v) => r
                    .params(v, "params", &format!("{path}.params"))
                    .unwrap_or_default(),
                None => Params::new(),
            }
        };
        let op = match op_name.as_str() {
            "begin-reservation" => {
                let thread = name_of(r, "thread", "\"t1\"");
                let scheduler = name_of(r, "scheduler", "\"rez\"");
                OpSpec::BeginReservation {
                    thread,
                    scheduler,
                    params: params(r),
                }
            }
            "end-reservation" => OpSpec::EndReservation {
                thread: name_of(r, "thread", "\"t1\""),
            },
            "set-params" => {
                let thread = name_of(r, "thread", "\"t1\"");
                if tab.get("params").is_none() {
                    r.missing(&tab, &what, "params", "{ ... }");
                }
                OpSpec::SetParams {
                    thread,
                    params: params(r),
                }
            }
            "move-thread" => {
                let thread = name_of(r, "thread", "\"t1\"");
                let to = name_of(r, "to", "\"ts\"");
                OpSpec::MoveThread {
                    thread,
                    to,
                    params: params(r),
                }
            }
            "create-scheduler" => match tab.get("scheduler") {
                None => {
                    r.missing(
                        &tab,
                        &what,
                        "scheduler",
                        "{ name = \"...\", policy = \"...\", parent = \"...\" }",
                    );
                    continue;
                }
                Some(sv) => {
                    let Some(st) = r.table(sv, "scheduler") else {
                        continue;
                    };
                    match read_scheduler(
                        r,
                        &st,
                        &format!("{path}.scheduler"),
                        "the new scheduler",
                        policies,
                        cpus,
                    ) {
                        // A scheduler with errors is still created in the
                        // timeline, so later operations on it are checked.
                        Some((s, ok)) => {
                            create_ok = ok;
                            OpSpec::CreateScheduler(s)
                        }
                        None => continue,
                    }
                }
            },
            "destroy-scheduler" => OpSpec::DestroyScheduler {
                name: name_of(r, "name", "\"rez\""),
            },
            _ => {
                let name = name_of(r, "name", "\"ts\"");
                let move_threads = match tab.get("move_threads") {
                    Some(v) => r.boolean(v, "move_threads").unwrap_or(true),
                    None => true,
                };
                OpSpec::SetDefault { name, move_threads }
            }
        };
        let creates = matches!(op, OpSpec::CreateScheduler(_));
        let ok = r.errs.len() == before;
        let (Some(at), true) = (at, ok || creates) else {
            continue;
        };
        out.push((
            TimedOp {
                at,
                op,
                span: r.span(&tab.span),
            },
            path,
            ok && create_ok,
        ));
    }
    out.sort_by_key(|(op, _, _)| op.at);
    let mut ops = Vec::new();
    let mut paths = Vec::new();
    let mut broken = Vec::new();
    for (i, (op, path, ok)) in out.into_iter().enumerate() {
        if !ok {
            broken.push(i);
        }
        ops.push(op);
        paths.push(path);
    }
    (ops, paths, broken)
}
