//! The `hsched run` and `hsched ctl` verbs, argument parsing included, so
//! the `hsched` binary (and `hsched-live`) only forward their arguments:
//!
//! ```text
//! hsched run FILE [--cpus 0,1] [--duration 10s] [--socket PATH] [--group GID]
//!                 [--scheduler NAME] [--param KEY=VALUE]... [--no-workloads]
//!                 [--fifo-priority N] [--stolen off|procstat|trace]
//!                 [--stolen-irq-overhead D] [--json]
//!                 [-- COMMAND ARGS...]
//! hsched ctl [--socket PATH] [--json] OP [KEY=VALUE]...
//! ```
//!
//! `run` exits with 0, 1 (an error during the run), 2 (bad arguments or
//! file, a CPU that is not online, a program that cannot be run) or 3 (live mode impossible here: a missing kernel feature, not
//! root, or a requested CPU managed by another daemon, see
//! [`crate::cpulock`]; nothing was changed).
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
pub const RUN_USAGE: &str = "usage: hsched run FILE [--cpus LIST] [--duration D] [--socket PATH] [--group GID] [--scheduler NAME] [--param KEY=VALUE]... [--no-workloads] [--fifo-priority N] [--stolen off|procstat|trace] [--stolen-irq-overhead D] [--json] [--output FILE] [-- COMMAND ARGS...]";
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

/// Parses `hsched run` arguments (after the verb) into the file and options.
///
/// # Errors
/// A message naming the bad argument.
pub fn parse_run_args(args: &[String]) -> Result<RunArgs, String> {
    let mut opts = RunOptions::default();
    let mut file = None;
    let mut json = false;
    let mut output = None;
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
            "--cpus" => {
                let v = need(it.next(), a)?;
                let mut cpus = Vec::new();
                for part in v.split(',') {
                    match part.split_once('-') {
                        Some((x, y)) => {
                            let (x, y): (usize, usize) = (
                                x.parse().map_err(|_| format!("bad CPU list `{v}`"))?,
                                y.parse().map_err(|_| format!("bad CPU list `{v}`"))?,
                            );
                            if x > y {
                                return Err(format!(
                                    "bad CPU list `{v}`: the range {x}-{y} runs backwards"
                                ));
                            }
                            cpus.extend(x..=y);
                        }
                        None => cpus.push(part.parse().map_err(|_| format!("bad CPU list `{v}`"))?),
                    }
                }
                opts.cpus = Some(cpus);
            }
            "--duration" => {
                let v = need(it.next(), a)?;
                opts.duration =
                    Some(parse_run_length(&v).map_err(|e| format!("--duration: {}", e.message))?);
            }
            "--socket" => opts.socket = Some(need(it.next(), a)?.into()),
            "--group" => {
                opts.control_group = Some(
                    need(it.next(), a)?
                        .parse()
                        .map_err(|_| "--group needs a numeric gid")?,
                )
            }
            "--scheduler" => opts.command_scheduler = Some(need(it.next(), a)?),
            "--param" => {
                let v = need(it.next(), a)?;
                let (k, val) = v.split_once('=').ok_or("--param needs KEY=VALUE")?;
                opts.command_params.insert(k, param_value(val));
            }
            "--fifo-priority" => {
                // Granted threads must stay below the daemon, which has to
                // preempt them to take a processor back.
                let top = opts.daemon_priority - 1;
                opts.fifo_priority = match need(it.next(), a)?.parse::<u32>() {
                    Ok(p) if p <= top => p,
                    _ => {
                        return Err(format!(
                            "--fifo-priority takes 1 to {top} (below the daemon's SCHED_FIFO {}), or 0 to leave the threads' own policy",
                            opts.daemon_priority
                        ))
                    }
                };
            }
            "--no-workloads" => opts.run_workloads = false,
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
            // The fail-safe ended the run: its report is there, but the run
            // did not go as asked.
            if code == 0 && done.report.stats.ended_by.starts_with("fail-safe") {
                1
            } else {
                code
            }
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

/// `hsched run` up to its report, for callers that print more with it.
///
/// # Errors
/// The exit code, after saying why on stderr: 2 for bad arguments or an
/// unusable file, 3 where live mode is impossible (nothing was changed),
/// 1 for an error during the run.
pub fn run_report(args: &[String]) -> Result<RunDone, i32> {
    let RunArgs {
        file,
        opts,
        json,
        output,
    } = parse_run_args(args).map_err(|e| {
        crate::diag!("hsched run: {e}\n{RUN_USAGE}");
        2
    })?;
    // An unreadable or invalid file is an input error (2), like every verb.
    let h = hsched_config::load(&file).map_err(|e| {
        crate::diag!("{e}");
        2
    })?;
    if let Err(e) = h.check_live() {
        crate::diag!("{e}");
        return Err(2);
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
                crate::LiveError::Unsupported(_) | crate::LiveError::CpuBusy { .. } => 3,
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
    let fields = match ctl_fields(pairs) {
        Ok(f) => f,
        Err(e) => {
            crate::diag!("hsched ctl: {e}\n{CTL_USAGE}");
            return 2;
        }
    };
    let mut c = match Client::connect(&socket) {
        Ok(c) => c,
        Err(e) => {
            crate::diag!(
                "hsched ctl: cannot reach the daemon at {}: {e}",
                socket.display()
            );
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
