//! `hsched import`: a Linux scheduler trace of real programs, turned into
//! an rt-app workload that the simulator and live mode replay.

use crate::numbers::whole;
use crate::outcome::{input_error, Outcome};
use hsched_config::{SchedTrace, Silence};
use hsched_linux::diag;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Long help.
pub const LONG_ABOUT: &str = "\
Read a trace of the Linux scheduler (the sched_switch and sched_wakeup
tracepoints, as ftrace, `trace-cmd report` or `perf script` print them) and
turn the threads you choose into an rt-app workload: for each, the CPU time
it used from every wake-up to the block that followed, and the time it then
slept. `hsched sim FILE --workload OUT.json` replays that demand under any
hierarchy, `hsched run` on this machine, and rt-app itself runs the file too.

Without --pid or --comm, lists the threads of the trace, busiest first.
docs/trace-replay.md shows how to record a trace.";

/// Examples shown by `--help`.
pub const EXAMPLES: &str = "\
Examples:
  hsched import app.trace                      # list the threads in the trace
  hsched import app.trace --comm python3 -o app.json
  hsched import app.trace --pid 4242 --pid 4243 --repeat -o app.json
  hsched sim examples/rtapp-tasks.toml --workload app.json";

/// Arguments of `hsched import`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The trace (text)
    #[arg(value_name = "TRACE")]
    pub trace: PathBuf,
    /// Import this thread (repeatable)
    #[arg(long, value_name = "PID", value_parser = parse_pid, allow_negative_numbers = true)]
    pub pid: Vec<u32>,
    /// Import every thread with this name (repeatable)
    #[arg(long, value_name = "NAME")]
    pub comm: Vec<String>,
    /// Replay each thread's history over and over (rt-app `"loop": -1`)
    /// instead of once
    #[arg(long)]
    pub repeat: bool,
    /// Write the rt-app file here instead of standard output (`-`: standard
    /// output; never the trace itself)
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
}

/// Lists the trace's threads, or writes the chosen ones as rt-app tasks.
///
/// # Errors
/// An unreadable or malformed trace, or a thread that is not in it (input
/// errors), or an output that cannot be written (a bad path on the
/// command line: an input error too, as for `sim` and `analyze`).
pub fn run(args: &Args) -> anyhow::Result<Outcome> {
    let output = args.output.as_deref().filter(|p| *p != Path::new("-"));
    if let Some(path) = output {
        crate::output::check_outputs(&[("TRACE", &args.trace)], &[("--output", path)])?;
    }
    let trace = crate::input::load_trace(&args.trace)?;
    if let Some(j) = trace.clock_jump() {
        diag!("{}", jump_warning(&trace, j));
    }
    if let Some((n, line, name)) = &trace.misnamed {
        diag!(
            "warning: `{}` has {n} line{} of an event named like `sched_switch` or `sched_wakeup` but not one of them (the first at line {line}: `{name}`); {} skipped\n  \
             = help: fix the event name if it was mistyped; the events read are sched_switch, sched_wakeup and sched_wakeup_new",
            trace.file,
            if *n == 1 { "" } else { "s" },
            if *n == 1 { "it is" } else { "they are" },
        );
    }
    if let Some((n, line, by)) = trace.backwards {
        diag!(
            "warning: `{}` has {n} line{} whose time is earlier than a line above {} (the first at line {line}, by {by}); the trace is read in time order\n  \
             = help: a trace edited by hand or joined from two recordings replays what the times say, not what the lines say",
            trace.file,
            if n == 1 { "" } else { "s" },
            if n == 1 { "it" } else { "them" },
        );
    }
    if args.pid.is_empty() && args.comm.is_empty() {
        crate::output::report().write_all(list(&trace).as_bytes())?;
        return Ok(Outcome::Ok);
    }
    let pids = chosen(&trace, args)?;
    let json = trace
        .to_rtapp(&pids, args.repeat)
        .map_err(|e| input_error(format!("error: {e}")))?;
    match output {
        Some(path) => std::fs::write(path, &json)
            .map_err(|e| input_error(format!("error: cannot write `{}`: {e}", path.display())))?,
        None => crate::output::report().write_all(json.as_bytes())?,
    }
    for pid in &pids {
        let t = &trace.threads[pid];
        diag!(
            "imported {}-{}: {} bursts, {} of CPU",
            t.comm,
            t.pid,
            t.bursts.len(),
            t.cpu()
        );
    }
    Ok(Outcome::Ok)
}

/// The pids chosen by `--pid` and `--comm`, in the order given, each once.
fn chosen(trace: &SchedTrace, args: &Args) -> anyhow::Result<Vec<u32>> {
    let mut pids: Vec<u32> = Vec::new();
    for &pid in &args.pid {
        if !trace.threads.contains_key(&pid) {
            return Err(input_error(format!(
                "error: thread {pid} does not run in `{}`\n  = help: `hsched import {}` lists the threads that do",
                trace.file, trace.file
            )));
        }
        if !pids.contains(&pid) {
            pids.push(pid);
        }
    }
    for comm in &args.comm {
        let found = trace.by_comm(comm);
        if found.is_empty() {
            let mut names: Vec<&str> = trace.threads.values().map(|t| t.comm.as_str()).collect();
            names.sort_unstable();
            names.dedup();
            return Err(input_error(format!(
                "error: no thread named `{comm}` runs in `{}`\n  = help: names in the trace: {}",
                trace.file,
                names.join(", ")
            )));
        }
        for pid in found {
            if !pids.contains(&pid) {
                pids.push(pid);
            }
        }
    }
    Ok(pids)
}

/// The warning for a silence that looks like a jump of the trace's clock.
fn jump_warning(trace: &SchedTrace, j: &Silence) -> String {
    let who: Vec<String> = j
        .charged
        .iter()
        .filter_map(|pid| trace.threads.get(pid))
        .map(|t| format!("{}-{}", t.comm, t.pid))
        .collect();
    let ran = if who.is_empty() {
        String::new()
    } else {
        format!(
            "; {} {} charged all of it as CPU time",
            who.join(", "),
            if who.len() == 1 { "is" } else { "are" }
        )
    };
    format!(
        "warning: `{}` has no event for {} between lines {} and {}, where its events are {} apart on average{ran}\n  \
         = help: if the trace's clock jumped there (two traces joined, a mistyped timestamp), fix that line \
         or import each side on its own; a program that really paused that long replays as it ran",
        trace.file,
        j.length,
        j.from_line,
        j.to_line,
        j.usual.unwrap_or_default(),
    )
}

/// The threads of a trace, busiest first.
fn list(trace: &SchedTrace) -> String {
    let mut threads: Vec<_> = trace.threads.values().collect();
    threads.sort_by(|a, b| b.cpu().cmp(&a.cpu()).then(a.pid.cmp(&b.pid)));
    let span = hsched_core::Duration(trace.end_ns - trace.start_ns);
    let mut s = format!(
        "{}: {} threads ran in {span}\n\n{:>8}  {:<20} {:>8} {:>12} {:>12} {:>9} {:>5}  exited\n",
        trace.file,
        threads.len(),
        "pid",
        "name",
        "bursts",
        "cpu",
        "first wake",
        "estimated",
        "lost"
    );
    for t in threads {
        s.push_str(&format!(
            "{:>8}  {:<20} {:>8} {:>12} {:>12} {:>9} {:>5}  {}\n",
            t.pid,
            t.comm,
            t.bursts.len(),
            t.cpu().to_string(),
            t.first_wake.to_string(),
            t.estimated,
            t.lost,
            if t.exited { "yes" } else { "no" }
        ));
    }
    s.push_str(
        "\nestimated: slices whose start the trace did not show, taken from the wake-up before\n\
         them; lost: slices that fit no burst (events missing from the trace).\n",
    );
    s.push_str("\nchoose with --pid PID or --comm NAME, e.g. `hsched import ");
    s.push_str(&trace.file);
    s.push_str(" --comm NAME -o app.json`\n");
    s
}

fn parse_pid(s: &str) -> Result<u32, String> {
    whole(s, 0, u32::MAX)
}
