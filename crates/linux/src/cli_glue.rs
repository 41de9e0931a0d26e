//! The `hsched run` and `hsched ctl` verbs, argument parsing included, so
//! the `hsched` binary (and `hsched-live`) only forward their arguments:
//!
//! ```text
//! hsched run FILE [--cpus 0,1] [--duration 10s] [--socket PATH | --no-socket] [--group GID]
//!                 [--scheduler NAME] [--param KEY=VALUE]... [--no-workloads]
//!                 [--fifo-priority N] [--stolen off|procstat|trace]
//!                 [--stolen-irq-overhead D] [--json]
//!                 [-- COMMAND ARGS...]
//! hsched ctl [--socket PATH] [--json] OP [KEY=VALUE]...
//! ```
//!
//! `run` serves the control socket at [`DEFAULT_SOCKET`], where `ctl`
//! looks by default, unless given `--socket PATH` (then it lasts until
//! stopped, as a daemon) or `--no-socket`. It exits with 0, 1 (an error
//! during the run, or some of the file's programs could not be launched,
//! or none), 2 (bad arguments or file, a `--cpus` list too short for the
//! file, a CPU that is not online, a `-- COMMAND` that cannot be run) or
//! 3 (live mode impossible here: a missing kernel feature, not root, a
//! requested CPU managed by another daemon, see [`crate::cpulock`], or a
//! control socket a running daemon answers on; nothing was changed).
//!
//! In `ctl`, `KEY=VALUE` pairs become the request's fields; a value is
//! read as JSON when it parses (numbers, `true`, arrays) and as a string
//! otherwise, and dotted keys nest (`params.amount=10ms`).

use crate::ctl::{Client, DEFAULT_SOCKET};
use crate::{run, RunOptions};
use hsched_core::time::{parse_duration, parse_run_length};
use hsched_core::ParamValue;
use serde_json::{Map, Value};
use std::path::PathBuf;

/// Usage of `run`.
pub const RUN_USAGE: &str = "usage: hsched run FILE [--cpus LIST] [--duration D] [--socket PATH | --no-socket] [--group GID] [--scheduler NAME] [--param KEY=VALUE]... [--no-workloads] [--enforce user|kernel|auto] [--fifo-priority N] [--stolen off|procstat|trace] [--stolen-irq-overhead D] [--json] [--output FILE] [-- COMMAND ARGS...]";
/// Usage of `ctl`.
pub const CTL_USAGE: &str = "usage: hsched ctl [--socket PATH] [--json] OP [KEY=VALUE]...   (OP: hello, show, create, destroy, move, begin-reservation, end-reservation, set-params, set-share, set-default, attach, detach, shutdown)";

fn param_value(s: &str) -> ParamValue {
    if let Ok(i) = s.parse::<i64>() {
        ParamValue::Int(i)
    } else if let Ok(f) = s.parse::<f64>() {
        ParamValue::Float(f)
    } else if s == "true" || s == "false" {
        ParamValue::Bool(s == "true")
    } else {
        ParamValue::Str(s.to_string())
    }
}

/// Parses a `--cpus` list: CPUs and ranges, `0,2-3`, each CPU once.
///
/// # Errors
/// A message naming the bad list.
pub fn parse_cpu_list(v: &str) -> Result<Vec<usize>, String> {
    let bad = || format!("bad CPU list `{v}`: expected CPUs and ranges, e.g. 0,2-3");
    let mut cpus: Vec<usize> = Vec::new();
    for part in v.split(',') {
        match part.split_once('-') {
            Some((x, y)) => {
                let (x, y): (usize, usize) =
                    (x.parse().map_err(|_| bad())?, y.parse().map_err(|_| bad())?);
                if x > y {
                    return Err(format!(
                        "bad CPU list `{v}`: the range {x}-{y} runs backwards"
                    ));
                }
                cpus.extend(x..=y);
            }
            None => cpus.push(part.parse().map_err(|_| bad())?),
        }
    }
    let mut sorted = cpus.clone();
    sorted.sort_unstable();
    if let Some(w) = sorted.windows(2).find(|w| w[0] == w[1]) {
        return Err(format!("bad CPU list `{v}`: CPU {} is listed twice", w[0]));
    }
    Ok(cpus)
}

/// Parses `--fifo-priority`: 1 to one below the daemon's priority, or 0.
///
/// # Errors
/// A message saying the range.
pub fn parse_fifo_priority(v: &str) -> Result<u32, String> {
    let daemon = RunOptions::default().daemon_priority;
    // Granted threads must stay below the daemon, which has to preempt
    // them to take a processor back.
    match v.parse::<u32>() {
        Ok(p) if p < daemon => Ok(p),
        _ => Err(format!(
            "--fifo-priority takes 1 to {} (below the daemon's SCHED_FIFO {daemon}), or 0 to leave the threads' own policy",
            daemon - 1
        )),
    }
}

/// Parses a `--param KEY=VALUE`.
///
/// # Errors
/// No `=`.
pub fn parse_param(v: &str) -> Result<(String, ParamValue), String> {
    let (k, val) = v
        .split_once('=')
        .ok_or_else(|| format!("--param needs KEY=VALUE, not `{v}`"))?;
    Ok((k.to_string(), param_value(val)))
}

/// Where the control socket goes: `--socket PATH` (the run then lasts
/// until it is stopped: a daemon), none with `--no-socket`, else
/// [`DEFAULT_SOCKET`], which `hsched ctl` talks to by default. Returns the
/// path and whether the run lasts until stopped.
///
/// # Errors
/// Both options.
pub fn socket_choice(
    socket: Option<PathBuf>,
    no_socket: bool,
) -> Result<(Option<PathBuf>, bool), String> {
    match (socket, no_socket) {
        (Some(_), true) => Err("--socket and --no-socket exclude each other".into()),
        (Some(p), false) => Ok((Some(p), true)),
        (None, true) => Ok((None, false)),
        (None, false) => Ok((Some(PathBuf::from(DEFAULT_SOCKET)), false)),
    }
}

/// Whether `cpus` (`--cpus`) gives every root of `h` the processors it
/// names: processor *i* of the file is the *i*-th CPU of the list.
///
/// # Errors
/// A message saying how many CPUs `--cpus` must list.
pub fn check_cpus_fit(h: &hsched_config::Hierarchy, cpus: &[usize]) -> Result<(), String> {
    let needed = h
        .schedulers
        .iter()
        .filter(|s| s.parents.is_empty())
        .flat_map(|s| s.cpus.iter().map(|&c| c + 1))
        .max()
        .unwrap_or(1);
    if cpus.len() >= needed {
        return Ok(());
    }
    let list: Vec<String> = cpus.iter().map(|c| c.to_string()).collect();
    let machine = if h.machine.cpus == needed {
        format!(" (`[machine] cpus = {needed}`)")
    } else {
        String::new()
    };
    Err(format!(
        "--cpus {} lists {} CPU{} but the hierarchy runs on {needed} processors{machine}: --cpus must list at least {needed} online CPUs, one for each processor of the file (e.g. --cpus 0-{}), or be left out to manage the last {needed}",
        list.join(","),
        cpus.len(),
        if cpus.len() == 1 { "" } else { "s" },
        needed - 1
    ))
}

/// Parses `hsched run` arguments (after the verb) into the file and options.
///
/// # Errors
/// A message naming the bad argument.
pub fn parse_run_args(args: &[String]) -> Result<RunArgs, String> {
    let mut opts = RunOptions::default();
    let mut file = None;
    let mut json = false;
    let mut output = None;
    let (mut socket, mut no_socket) = (None, false);
    let mut it = args.iter().enumerate();
    let need = |v: Option<(usize, &String)>, flag: &str| {
        v.map(|(_, s)| s.clone())
            .ok_or_else(|| format!("{flag} needs a value"))
    };
    while let Some((i, a)) = it.next() {
        match a.as_str() {
            "--" => {
                let cmd: Vec<String> = args[i + 1..].to_vec();
                if cmd.is_empty() {
                    return Err("`--` must be followed by a command".into());
                }
                opts.command = Some(cmd);
                break;
            }
            "--cpus" => opts.cpus = Some(parse_cpu_list(&need(it.next(), a)?)?),
            "--duration" => {
                let v = need(it.next(), a)?;
                opts.duration =
                    Some(parse_run_length(&v).map_err(|e| format!("--duration: {}", e.message))?);
            }
            "--socket" => socket = Some(PathBuf::from(need(it.next(), a)?)),
            "--no-socket" => no_socket = true,
            "--group" => {
                opts.control_group = Some(
                    need(it.next(), a)?
                        .parse()
                        .map_err(|_| "--group needs a numeric gid")?,
                )
            }
            "--scheduler" => opts.command_scheduler = Some(need(it.next(), a)?),
            "--param" => {
                let (k, v) = parse_param(&need(it.next(), a)?)?;
                opts.command_params.insert(&k, v);
            }
            "--fifo-priority" => opts.fifo_priority = parse_fifo_priority(&need(it.next(), a)?)?,
            "--no-workloads" => opts.run_workloads = false,
            "--enforce" => opts.enforce = need(it.next(), a)?.parse()?,
            "--stolen" => opts.stolen = need(it.next(), a)?.parse()?,
            "--stolen-irq-overhead" => {
                let v = need(it.next(), a)?;
                opts.stolen_irq_overhead = parse_duration(&v, None)
                    .map_err(|e| format!("--stolen-irq-overhead: {}", e.message))?;
            }
            "--json" => json = true,
            "--output" | "-o" => output = Some(PathBuf::from(need(it.next(), a)?)),
            s if s.starts_with("--") => return Err(format!("unknown option `{s}`")),
            _ if file.is_none() => file = Some(PathBuf::from(a)),
            _ => return Err(format!("unexpected argument `{a}`")),
        }
    }
    let file = file.ok_or("a hierarchy FILE is required")?;
    (opts.socket, opts.until_stopped) = socket_choice(socket, no_socket)?;
    Ok(RunArgs {
        file,
        opts,
        json,
        output,
    })
}

/// `hsched run`'s arguments.
pub struct RunArgs {
    /// The hierarchy file.
    pub file: PathBuf,
    /// The daemon's options.
    pub opts: RunOptions,
    /// `--json`.
    pub json: bool,
    /// `--output FILE`: where the report goes instead of standard output.
    pub output: Option<PathBuf>,
}

/// `hsched run`: returns the process exit code.
pub fn run_main(args: &[String]) -> i32 {
    match run_report(args) {
        Ok(mut done) => {
            let text = if done.json {
                format!("{}\n", done.report.to_json())
            } else {
                done.report.to_table()
            };
            let code = done.out.write(&text);
            code.max(done.run_status())
        }
        Err(code) => code,
    }
}

/// A finished `hsched run`: what ran, its report, and whether `--json`
/// was asked for.
pub struct RunDone {
    /// The hierarchy file as loaded.
    pub hierarchy: hsched_config::Hierarchy,
    /// The measured report.
    pub report: crate::Report,
    /// `--json` was given.
    pub json: bool,
    /// Where the report goes (`--output`).
    pub out: crate::out::ReportOut,
}

impl RunDone {
    /// 1 when the run has a report but did not go as asked, else 0: the
    /// fail-safe ended it, or some of the file's programs could not be
    /// launched (named here, after the report).
    pub fn run_status(&self) -> i32 {
        let failed = &self.report.stats.launch_failures;
        if !failed.is_empty() {
            let why: Vec<String> = failed
                .iter()
                .map(|(name, e)| format!("\n  `{name}`: {e}"))
                .collect();
            crate::diag!(
                "hsched run: {} of the file's programs could not be launched; the report covers the others:{}",
                failed.len(),
                why.concat()
            );
            return 1;
        }
        i32::from(self.report.stats.ended_by.starts_with("fail-safe"))
    }
}

/// `hsched run` up to its report, for callers that print more with it.
///
/// # Errors
/// The exit code, after saying why on stderr: 2 for bad arguments or an
/// unusable file, 3 where live mode is impossible (nothing was changed),
/// 1 for an error during the run, or when no program could be launched.
pub fn run_report(args: &[String]) -> Result<RunDone, i32> {
    let args = parse_run_args(args).map_err(|e| {
        crate::diag!("hsched run: {e}\n{RUN_USAGE}");
        2
    })?;
    run_parsed(args)
}

/// [`run_report`] of arguments already parsed (the `hsched` binary's
/// own command line).
///
/// # Errors
/// As [`run_report`].
pub fn run_parsed(args: RunArgs) -> Result<RunDone, i32> {
    let RunArgs {
        file,
        opts,
        json,
        output,
    } = args;
    // An unreadable or invalid file is an input error (2), like every verb;
    // so is a plug-in it names that cannot be loaded.
    if let Ok(text) = hsched_config::read_text(&file, hsched_config::MAX_FILE_BYTES) {
        hsched_plugin::load_named(Some(&file), &text).map_err(|e| {
            crate::diag!("error: {}: {e}", file.display());
            2
        })?;
    }
    let h = hsched_config::load(&file).map_err(|e| {
        crate::diag!("{e}");
        2
    })?;
    if let Err(e) = h.check_live() {
        crate::diag!("{e}");
        return Err(2);
    }
    // Before the root check: a usage error whoever runs it.
    if let Some(cpus) = &opts.cpus {
        if let Err(e) = check_cpus_fit(&h, cpus) {
            crate::diag!("hsched run: {e}");
            return Err(2);
        }
    }
    if let Some(note) = opts.duration.and_then(|d| h.unreached_note(d)) {
        crate::diag!("{note}");
    }
    let out = crate::out::ReportOut::create(output.as_deref()).map_err(|e| {
        crate::diag!("hsched run: {e}");
        2
    })?;
    match run(&h, opts) {
        Ok(report) => Ok(RunDone {
            hierarchy: h,
            report,
            json,
            out,
        }),
        Err(e) => {
            crate::diag!("hsched run: {e}");
            // No report: leave no empty file behind.
            if let crate::out::ReportOut::File(path, _) = &out {
                let _ = std::fs::remove_file(path);
            }
            Err(match e {
                crate::LiveError::Usage(_) => 2,
                // Live mode impossible here (a missing feature, or another
                // daemon manages a requested CPU); nothing was changed.
                crate::LiveError::Unsupported(_)
                | crate::LiveError::CpuBusy { .. }
                | crate::LiveError::SocketBusy { .. } => 3,
                _ => 1,
            })
        }
    }
}

/// Builds a request object from `KEY=VALUE` pairs.
///
/// # Errors
/// A pair without `=`.
pub fn ctl_fields(pairs: &[String]) -> Result<Value, String> {
    let mut root = Map::new();
    for p in pairs {
        let (k, v) = p
            .split_once('=')
            .ok_or_else(|| format!("`{p}` is not KEY=VALUE"))?;
        let val: Value = serde_json::from_str(v).unwrap_or_else(|_| Value::String(v.to_string()));
        let mut cur = &mut root;
        let parts: Vec<&str> = k.split('.').collect();
        for (i, part) in parts.iter().enumerate() {
            if i + 1 == parts.len() {
                cur.insert(part.to_string(), val.clone());
            } else {
                let e = cur
                    .entry(part.to_string())
                    .or_insert_with(|| Value::Object(Map::new()));
                if !e.is_object() {
                    *e = Value::Object(Map::new());
                }
                cur = e.as_object_mut().expect("just made an object");
            }
        }
    }
    Ok(Value::Object(root))
}

/// A readable rendering of the `show` result.
pub fn render_tree(v: &Value) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let ms = |x: &Value| x.as_u64().unwrap_or(0) as f64 / 1e6;
    let _ = writeln!(
        s,
        "t = {:.3} s, CPUs {}, default {}",
        ms(&v["now_ns"]) / 1e3,
        v["cpus"],
        v["default"]
    );
    if let Some(insts) = v["instances"].as_array() {
        for i in insts {
            let parents: Vec<String> = i["parents"].as_array().map_or(Vec::new(), |ps| {
                ps.iter()
                    .map(|p| {
                        format!(
                            "{} [{}] {}",
                            p["parent"].as_str().unwrap_or("?"),
                            p["state"].as_str().unwrap_or(""),
                            p["params"]
                        )
                    })
                    .collect()
            });
            let _ = writeln!(
                s,
                "{:<16} {:<8} supply {:>10.1} ms  {}  <- {}",
                i["name"].as_str().unwrap_or(""),
                i["policy"].as_str().unwrap_or(""),
                ms(&i["supply_ns"]),
                i["describe"].as_str().unwrap_or(""),
                parents.join(", ")
            );
        }
    }
    if let Some(ts) = v["threads"].as_array() {
        for t in ts {
            // What only some threads have: a deadline held by a deadline
            // scheduler, stolen time, a built-in workload's own counts.
            let mut extra = String::new();
            if let Some(d) = t["deadline_ns"].as_u64() {
                let _ = write!(extra, " deadline t={:.1} ms", d as f64 / 1e6);
            }
            if t["stolen_ns"].as_u64().is_some_and(|x| x > 0) {
                let _ = write!(extra, " stolen {:.1} ms", ms(&t["stolen_ns"]));
            }
            if let (Some(j), Some(m)) = (t["jobs"].as_u64(), t["deadline_misses"].as_u64()) {
                let _ = write!(extra, " jobs {j} misses {m}");
            }
            let _ = writeln!(
                s,
                "  {:<20} tid {:<7} in {:<12} {} cpu {:>10.1} ms granted {:>10.1} ms{extra} {}",
                t["name"].as_str().unwrap_or(""),
                t["tid"],
                t["scheduler"].as_str().unwrap_or(""),
                if t["cpu"].is_null() {
                    if t["runnable"] == Value::Bool(true) {
                        "ready  ".to_string()
                    } else {
                        "blocked".to_string()
                    }
                } else {
                    format!("on {}  ", t["cpu"])
                },
                ms(&t["cpu_ns"]),
                ms(&t["received_ns"]),
                t["params"]
            );
        }
    }
    s
}

/// Makes the plug-in files a request names (`path`, and a `policy` that
/// is a `.wasm` file) absolute: the daemon does not run in this directory.
fn absolute_plugin_paths(fields: &mut serde_json::Value) {
    for key in ["path", "policy"] {
        let Some(v) = fields.get_mut(key) else {
            continue;
        };
        let Some(p) = v.as_str().filter(|p| hsched_plugin::is_plugin_name(p)) else {
            continue;
        };
        if let Ok(abs) = std::path::absolute(p) {
            *v = serde_json::Value::String(abs.display().to_string());
        }
    }
}

/// `hsched ctl`: returns the process exit code.
pub fn ctl_main(args: &[String]) -> i32 {
    let mut socket = PathBuf::from(DEFAULT_SOCKET);
    let mut json = false;
    let mut rest = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--socket" => match it.next() {
                Some(p) => socket = p.into(),
                None => {
                    crate::diag!("hsched ctl: --socket needs a path\n{CTL_USAGE}");
                    return 2;
                }
            },
            "--json" => json = true,
            _ => rest.push(a.clone()),
        }
    }
    let Some((op, pairs)) = rest.split_first() else {
        crate::diag!("{CTL_USAGE}");
        return 2;
    };
    // A mistyped operation is the user's error whether or not a daemon
    // runs: say so before trying to reach one.
    if !crate::control::OPERATIONS.contains(&op.as_str()) {
        crate::diag!(
            "hsched ctl: unknown operation `{op}`; known: {}\n{CTL_USAGE}",
            crate::control::OPERATIONS.join(", ")
        );
        return 2;
    }
    let mut fields = match ctl_fields(pairs) {
        Ok(f) => f,
        Err(e) => {
            crate::diag!("hsched ctl: {e}\n{CTL_USAGE}");
            return 2;
        }
    };
    absolute_plugin_paths(&mut fields);
    let mut c = match Client::connect(&socket) {
        Ok(c) => c,
        Err(e) => {
            crate::diag!(
                "hsched ctl: cannot reach the daemon at {}: {e}",
                socket.display()
            );
            if matches!(
                e.kind(),
                std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused
            ) {
                crate::diag!(
                    "  = help: `hsched run` serves {DEFAULT_SOCKET} unless given --socket PATH (then use `hsched ctl --socket PATH`) or --no-socket"
                );
            }
            return 1;
        }
    };
    match c.request(op, fields) {
        Ok(v) => crate::out::print_stdout(&if op == "show" && !json {
            render_tree(&v)
        } else {
            format!("{}\n", serde_json::to_string_pretty(&v).unwrap_or_default())
        }),
        Err(e) => {
            crate::diag!("hsched ctl {op}: {e}");
            1
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_arguments() {
        let a: Vec<String> = [
            "f.toml",
            "--cpus",
            "1",
            "--duration",
            "2s",
            "--",
            "sleep",
            "1",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let RunArgs {
            file: f,
            opts: o,
            json,
            output,
        } = parse_run_args(&a).unwrap();
        assert_eq!(f, PathBuf::from("f.toml"));
        assert_eq!(o.cpus, Some(vec![1]));
        assert_eq!(o.duration, Some(hsched_core::Duration::from_secs(2)));
        assert_eq!(o.command, Some(vec!["sleep".to_string(), "1".to_string()]));
        assert!(!json);
        assert_eq!(output, None);
        // `ctl` finds it where it looks by default; the run still ends
        // with its programs.
        assert_eq!(o.socket, Some(PathBuf::from(DEFAULT_SOCKET)));
        assert!(!o.until_stopped);
        let a: Vec<String> = ["f.toml", "--json", "-o", "r.json", "--", "sleep", "1"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let r = parse_run_args(&a).unwrap();
        assert_eq!(r.output, Some(PathBuf::from("r.json")));
        assert!(parse_run_args(&["f.toml".to_string(), "--output".to_string()]).is_err());
        assert!(parse_run_args(&["--bogus".to_string()]).is_err());
        assert!(parse_run_args(&[]).is_err());
    }

    #[test]
    fn an_unknown_ctl_operation_is_a_usage_error_without_a_daemon() {
        let args = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let nowhere = "/nonexistent/hsched-test.sock";
        assert_eq!(ctl_main(&args(&["--socket", nowhere, "bogus-op"])), 2);
        // A known one gets as far as the (missing) daemon.
        assert_eq!(ctl_main(&args(&["--socket", nowhere, "show"])), 1);
    }

    #[test]
    fn run_arguments_out_of_range_are_refused() {
        let parse = |extra: &[&str]| {
            let a: Vec<String> = ["f.toml"]
                .iter()
                .chain(extra)
                .map(|s| s.to_string())
                .collect();
            parse_run_args(&a).map(|r| r.opts)
        };
        let o = parse(&["--cpus", "0-2,5", "--fifo-priority", "79"]).unwrap();
        assert_eq!(o.cpus, Some(vec![0, 1, 2, 5]));
        assert_eq!(o.fifo_priority, 79);
        assert_eq!(parse(&["--fifo-priority", "0"]).unwrap().fifo_priority, 0);
        for (args, says) in [
            (&["--cpus", "3-1"][..], "runs backwards"),
            (&["--duration", "0s"], "no time at all"),
            (&["--fifo-priority", "80"], "1 to 79"),
            (&["--fifo-priority", "-1"], "1 to 79"),
        ] {
            let e = parse(args).unwrap_err();
            assert!(e.contains(says), "{args:?}: {e}");
        }
    }

    #[test]
    fn the_socket_is_the_default_one_a_chosen_one_or_none() {
        let parse = |extra: &[&str]| {
            let a: Vec<String> = ["f.toml"]
                .iter()
                .chain(extra)
                .map(|s| s.to_string())
                .collect();
            parse_run_args(&a).map(|r| (r.opts.socket, r.opts.until_stopped))
        };
        let sock = Some(PathBuf::from("/tmp/x.sock"));
        assert_eq!(parse(&["--socket", "/tmp/x.sock"]), Ok((sock, true)));
        assert_eq!(parse(&["--no-socket"]), Ok((None, false)));
        let e = parse(&["--no-socket", "--socket", "/tmp/x.sock"]).unwrap_err();
        assert!(e.contains("exclude each other"), "{e}");
    }

    #[test]
    fn a_cpu_list_names_each_cpu_once() {
        assert_eq!(parse_cpu_list("3,0-1"), Ok(vec![3, 0, 1]));
        for (bad, says) in [
            ("0,0", "CPU 0 is listed twice"),
            ("0-2,1", "CPU 1 is listed twice"),
            ("", "expected CPUs and ranges"),
            ("a", "expected CPUs and ranges"),
        ] {
            let e = parse_cpu_list(bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }

    #[test]
    fn ctl_pairs_nest_and_type() {
        let v = ctl_fields(&[
            "thread=7".into(),
            "params.amount=10ms".into(),
            "move_threads=true".into(),
        ])
        .unwrap();
        assert_eq!(v["thread"], 7);
        assert_eq!(v["params"]["amount"], "10ms");
        assert_eq!(v["move_threads"], true);
        assert!(ctl_fields(&["nope".into()]).is_err());
    }
}
