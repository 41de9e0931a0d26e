//! `hsched sim`: run a hierarchy on the simulator.

use crate::input;
use crate::numbers::whole;
use crate::outcome::{input_error, Outcome, EXIT_INTERRUPTED};
use crate::output::{check_outputs, Named};
use crate::progress::Progress;
use hsched_core::time::{parse_duration, parse_run_length};
use hsched_core::Duration;
use hsched_linux::diag;
use hsched_sim::{BatchBuilder, BatchError, GanttColor, GanttRequest, SimError, SimOptions};
use std::cell::RefCell;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// Long help.
pub const LONG_ABOUT: &str = "\
Run a hierarchy on the deterministic simulator and report, for every
thread, the CPU time it received, its deadline misses, lateness and
dispatch latency; then the CPU each scheduler and principal received. The
same file and seed always give the same report.

Without FILE, the built-in copy of examples/home-computer.toml runs.

Durations take a unit: 500ms, 2s, 1.5s, 250us. The run's length and seed
default to the file's [sim] section (else 10s and seed 0). A progress bar
appears on stderr for runs longer than two seconds when stderr is a
terminal. Ctrl-C (or SIGTERM) ends the run early with the report, trace
and chart of the time simulated so far (exit status 130); a second one
stops at once. Before the run starts, while the files are read, Ctrl-C
stops hsched at once (status 130; 143 for SIGTERM).

--trace and --gantt refuse a path that is one of the files read (FILE,
its rt-app file, --workload) or the other output, and `-`: standard
output carries the report (`./-` names a file called `-`).

--job-records keeps one row per job with a deadline: DIR/jobs.csv with
--csv DIR, the report's `jobs` array with --json (docs/metrics.md,
\"Per-job records\"). A job unfinished at the end has no completion, and
is missed when its deadline passed.

--runs N runs the file with N consecutive seeds on every processor (or
--jobs of them at once) and reports each thread's spread over them
(docs/metrics.md, \"Several seeds\").";

/// Examples shown by `--help`.
pub const EXAMPLES: &str = "\
Examples:
  hsched sim examples/home-computer.toml
  hsched sim examples/home-computer.toml --duration 30s --seed 7
  hsched sim examples/overview.toml --json > report.json
  hsched sim examples/home-computer.toml --csv tables   # tables/threads.csv, tables/schedulers.csv
  hsched sim examples/home-computer.toml --csv tables --job-records   # and tables/jobs.csv
  hsched sim examples/walkthrough.toml --trace walkthrough.json   # open at ui.perfetto.dev
  hsched sim examples/hard-firm-soft.toml --gantt hfs.svg --window 1.9s..2.2s
  hsched sim examples/hard-firm-soft.toml --gantt hfs.svg --gantt-color thread
  hsched sim examples/walkthrough.toml --duration 10min --trace w.json --window 300s..301s
  hsched sim examples/rtapp-tasks.toml --workload examples/rtapp-tasks.json
  hsched sim examples/home-computer.toml --runs 20 --json > seeds.json";

/// `--gantt-color`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum GanttColorArg {
    /// By processor.
    Cpu,
    /// By thread.
    Thread,
}

/// Arguments of `hsched sim`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The hierarchy file (default: the built-in examples/home-computer.toml)
    #[arg(value_name = "FILE")]
    pub file: Option<PathBuf>,
    /// An rt-app JSON file whose tasks replace those the hierarchy file
    /// names (its own rt-app file is not read); they are placed by the
    /// file's [[workload.map]] rules
    #[arg(long, value_name = "RTAPP.json")]
    pub workload: Option<PathBuf>,
    /// Simulated time to run (e.g. 10s); overrides the file's [sim] duration
    #[arg(long, value_name = "D", value_parser = parse_run_duration, allow_hyphen_values = true)]
    pub duration: Option<Duration>,
    /// Random seed; overrides the file's [sim] seed
    #[arg(long, value_name = "N", value_parser = parse_seed, allow_negative_numbers = true)]
    pub seed: Option<u64>,
    /// Print the report as JSON (the schema is in docs/metrics.md)
    #[arg(long)]
    pub json: bool,
    /// Write a Perfetto trace (open it at https://ui.perfetto.dev)
    #[arg(long, value_name = "OUT.json", value_parser = crate::output::file_path)]
    pub trace: Option<PathBuf>,
    /// Write a Gantt chart of a window of the run as SVG
    #[arg(long, value_name = "OUT.svg", value_parser = crate::output::file_path)]
    pub gantt: Option<PathBuf>,
    /// What the Gantt chart's colors tell: `cpu` (the processor a stretch
    /// ran on, the default) or `thread` (one color per thread)
    #[arg(long, value_name = "BY", value_enum, default_value_t = GanttColorArg::Cpu, requires = "gantt")]
    pub gantt_color: GanttColorArg,
    /// The window of the Gantt chart and of the trace, START..END (default:
    /// the first second for the chart, the whole run for the trace)
    #[arg(long, value_name = "A..B", value_parser = parse_window, allow_hyphen_values = true)]
    pub window: Option<(Duration, Duration)>,
    /// Also write the per-thread and per-scheduler tables as CSV files,
    /// DIR/threads.csv and DIR/schedulers.csv (DIR is created), and
    /// DIR/jobs.csv with --job-records
    #[arg(long, value_name = "DIR", conflicts_with = "runs")]
    pub csv: Option<PathBuf>,
    /// Keep a record of every job with a deadline (release, deadline,
    /// completion, response time, lateness, missed): written to
    /// DIR/jobs.csv with --csv, and as the report's `jobs` array with
    /// --json. Off by default: the records grow with the run, the rest of
    /// the report does not
    #[arg(long, conflicts_with = "runs")]
    pub job_records: bool,
    /// Check the HLS protocol after every event (slower); a violation stops
    /// the run with a replay command
    #[arg(long)]
    pub check_protocol: bool,
    /// Run N times with the seeds S, S+1, ... (S: --seed, else the file's)
    /// on every processor, and report each figure's spread over the runs
    #[arg(long, value_name = "N",
          value_parser = parse_runs, allow_negative_numbers = true,
          conflicts_with_all = ["trace", "gantt", "window"])]
    pub runs: Option<u32>,
    /// How many of the --runs run at once (default: one per processor);
    /// the output is the same for any number
    #[arg(long, value_name = "N", requires = "runs",
          value_parser = parse_jobs, allow_negative_numbers = true)]
    pub jobs: Option<u32>,
}

/// The most runs `--runs` takes.
const MAX_RUNS: u32 = 10_000;

/// The most worker threads `--jobs` starts.
const MAX_JOBS: u32 = 1024;

/// The Gantt window when `--window` is not given.
const DEFAULT_WINDOW: Duration = Duration::from_secs(1);

/// Runs the simulation and prints the report.
///
/// # Errors
/// An invalid file or workload, an output that cannot be created (input
/// errors), or a failed run.
pub fn run(args: Args) -> anyhow::Result<Outcome> {
    let (h, source) = match &args.file {
        Some(path) => (
            input::load_with(path, args.workload.as_deref())?,
            path.display().to_string(),
        ),
        None => {
            hsched_linux::diag!(
                "note: no FILE given: simulating the built-in copy of examples/home-computer.toml"
            );
            let mut h = input::default_example()?;
            if let Some(w) = &args.workload {
                input::attach_workload(&mut h, w)?;
            }
            (h, input::DEFAULT_EXAMPLE_NAME.to_string())
        }
    };
    input::check_simulatable(&h)?;
    let rtapp = match (&args.file, &args.workload) {
        (Some(path), None) => input::rtapp_path(path, &h),
        _ => None,
    };
    let inputs: Vec<Named<'_>> = [
        ("FILE", args.file.as_deref()),
        ("FILE's rt-app file", rtapp.as_deref()),
        ("--workload", args.workload.as_deref()),
    ]
    .into_iter()
    .filter_map(|(option, path)| Some((option, path?)))
    .collect();
    let outputs: Vec<Named<'_>> = [("--trace", &args.trace), ("--gantt", &args.gantt)]
        .into_iter()
        .filter_map(|(option, path)| Some((option, path.as_deref()?)))
        .collect();
    check_outputs(&inputs, &outputs)?;
    // What `hsched_sim::run` will run, to check the window against it
    // before a long run rather than draw an empty chart after it.
    let duration = hsched_sim::run_duration(&h, args.duration);
    if let Some((from, _)) = args.window {
        if args.gantt.is_none() && args.trace.is_none() {
            return Err(input_error(
                "error: --window chooses what --gantt and --trace show, and neither was given\n  = hint: add --gantt OUT.svg or --trace OUT.json".to_string(),
            ));
        }
        if from >= duration {
            return Err(input_error(format!(
                "error: the window starts at {from}, but the run ends at {duration}\n  = hint: give a window inside the run, or a longer --duration"
            )));
        }
    }

    if args.job_records && args.csv.is_none() && !args.json {
        return Err(input_error(
            "error: --job-records adds the per-job records to what --csv and --json write, and neither was given\n  = hint: add --csv DIR (for DIR/jobs.csv) or --json".to_string(),
        ));
    }

    if let Some(note) = h.unreached_note(duration) {
        diag!("{note}");
    }

    // From here on a signal stops the run at its next instant, so that
    // the report and the outputs cover the time simulated; until here,
    // with nothing to save, it ends hsched at once.
    let stop = stop_on_signals()?;
    if let Some(n) = args.runs {
        return run_batch(&h, n, &args, source, stop, duration);
    }

    let mut opts = SimOptions {
        duration: args.duration,
        seed: args.seed,
        check_protocol: args.check_protocol,
        source: Some(source),
        stop: Some(stop),
        job_records: args.job_records,
        ..SimOptions::default()
    };
    if let Some(path) = &args.trace {
        opts.trace = Some(Box::new(create(path)?));
        opts.trace_window = args.window;
    }
    if let Some(path) = &args.gantt {
        let (from, to) = args.window.unwrap_or((Duration::ZERO, DEFAULT_WINDOW));
        opts.gantt = Some(GanttRequest {
            from,
            to,
            out: Box::new(create(path)?),
            color: match args.gantt_color {
                GanttColorArg::Cpu => GanttColor::Cpu,
                GanttColorArg::Thread => GanttColor::Thread,
            },
        });
    }
    let progress = Rc::new(RefCell::new(Progress::for_stderr()));
    let bar = Rc::clone(&progress);
    opts.progress = Some(Box::new(move |f| bar.borrow_mut().update(f)));

    let result = hsched_sim::run(&h, opts);
    progress.borrow_mut().finish();
    let report = match result {
        Ok(report) => report,
        Err(e) => {
            let e = output_error(&e, &args).unwrap_or_else(|| sim_error(e));
            return Err(remove_outputs(e, &args));
        }
    };

    if let Some(dir) = &args.csv {
        write_csv(dir, &report, args.job_records)?;
    }
    let mut out = crate::output::report();
    if args.json {
        writeln!(out, "{}", report.to_json().trim_end())?;
    } else {
        out.write_all(report.to_table().as_bytes())?;
        let mut written = Vec::new();
        if let Some(p) = &args.trace {
            written.push(format!(
                "trace: {} (open it at https://ui.perfetto.dev)",
                p.display()
            ));
        }
        if let Some(p) = &args.gantt {
            written.push(format!("gantt chart: {}", p.display()));
        }
        for w in written {
            writeln!(out, "{w}")?;
        }
    }
    if report.threads.is_empty() {
        out.flush()?;
        diag!("{IDLE_NOTE}");
    }
    if report.interrupted {
        out.flush()?;
        let what = if args.trace.is_some() || args.gantt.is_some() {
            "the report and the files written cover"
        } else {
            "the report covers"
        };
        diag!(
            "note: interrupted after {} of {duration} simulated; {what} that time",
            hsched_core::Duration(report.duration_ns),
        );
        return Ok(Outcome::Status(EXIT_INTERRUPTED.into()));
    }
    Ok(Outcome::Ok)
}

const IDLE_NOTE: &str =
    "note: the machine idled: the file has no [[thread]], and no workload or control operation created one";

/// `--runs N`: runs `h` with N consecutive seeds on every processor and
/// prints their summary. After Ctrl-C the summary covers the runs that
/// completed (status 130).
fn run_batch(
    h: &hsched_config::Hierarchy,
    n: u32,
    args: &Args,
    source: String,
    stop: Arc<AtomicBool>,
    duration: Duration,
) -> anyhow::Result<Outcome> {
    let first = args.seed.or(h.sim.seed).unwrap_or(0);
    let seeds: Vec<u64> = (0..u64::from(n)).map(|k| first.wrapping_add(k)).collect();
    let workers = match args.jobs {
        Some(j) => j as usize,
        None => std::thread::available_parallelism().map_or(1, |p| p.get()),
    };
    // Each run's progress, in millionths.
    let done: Arc<Vec<AtomicU64>> = Arc::new(seeds.iter().map(|_| AtomicU64::new(0)).collect());
    let opts = |i: usize| {
        let done = Arc::clone(&done);
        SimOptions {
            duration: args.duration,
            check_protocol: args.check_protocol,
            source: Some(source.clone()),
            stop: Some(Arc::clone(&stop)),
            progress: Some(Box::new(move |f| {
                done[i].store((f * 1e6) as u64, Ordering::Relaxed)
            })),
            ..SimOptions::default()
        }
    };
    let mut bar = Progress::for_stderr();
    let mut tick = || {
        let sum: u64 = done.iter().map(|d| d.load(Ordering::Relaxed)).sum();
        bar.update(sum as f64 / 1e6 / f64::from(n));
    };
    let mut summary = BatchBuilder::new(args.json).map_err(summary_failed)?;
    let result = hsched_sim::run_seeds(
        h,
        &seeds,
        workers,
        &opts,
        std::time::Duration::from_millis(100),
        &mut tick,
        // An interrupted run is not summarized.
        &mut |r| {
            if r.interrupted {
                Ok(())
            } else {
                summary.add(&r)
            }
        },
    );
    bar.finish();
    result.map_err(|e| match e {
        BatchError::Run {
            error: e @ SimError::Build { .. },
            ..
        } => sim_error(e),
        BatchError::Run { seed, error } => {
            anyhow::Error::new(error).context(format!("the simulation with seed {seed} failed"))
        }
        BatchError::Take(e) => summary_failed(e),
    })?;
    let batch = summary.finish().map_err(summary_failed)?;
    let asked = seeds.len();
    let mut out = crate::output::report();
    if batch.runs > 0 {
        if args.json {
            batch.write_json(&mut out)?;
        } else {
            out.write_all(batch.to_table().as_bytes())?;
        }
        out.flush()?;
        if batch.threads.is_empty() {
            diag!("{IDLE_NOTE}");
        }
        if batch.runs == asked {
            return Ok(Outcome::Ok);
        }
        diag!(
            "note: interrupted: {} of {asked} runs of {duration} completed; the summary covers those",
            batch.runs
        );
    } else {
        diag!("note: interrupted before any of the {asked} runs of {duration} completed");
    }
    Ok(Outcome::Status(EXIT_INTERRUPTED.into()))
}

/// `--csv DIR`: the report's tables (crate::csv), with `jobs.csv` when
/// `jobs`, a bad directory being an input error.
fn write_csv(dir: &Path, report: &hsched_sim::Report, jobs: bool) -> anyhow::Result<()> {
    let failed = |what: &Path, e: std::io::Error| {
        input_error(format!(
            "error: --csv: cannot write `{}`: {e}",
            what.display()
        ))
    };
    std::fs::create_dir_all(dir).map_err(|e| failed(dir, e))?;
    for (name, text) in [
        ("threads.csv", crate::csv::threads(report)),
        ("schedulers.csv", crate::csv::schedulers(report)),
    ]
    .into_iter()
    .chain(jobs.then(|| ("jobs.csv", crate::csv::jobs(report))))
    {
        let path = dir.join(name);
        std::fs::write(&path, text).map_err(|e| failed(&path, e))?;
    }
    Ok(())
}

/// A flag raised by the first Ctrl-C (SIGINT) or SIGTERM: the run then
/// ends at its next instant, with its report and complete outputs. A
/// second signal ends the process at once, as without hsched's handler.
/// Installed only once the run is about to start: nothing checks the flag
/// while the files load.
pub(crate) fn stop_on_signals() -> anyhow::Result<Arc<AtomicBool>> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [SIGINT, SIGTERM] {
        // The default action first: it only acts once the flag is up.
        signal_hook::flag::register_conditional_default(sig, Arc::clone(&stop))?;
        signal_hook::flag::register(sig, Arc::clone(&stop))?;
    }
    Ok(stop)
}

/// After a failed run, removes the trace and chart it was writing (cut
/// off mid-way, they are not valid files) and says so in the error.
fn remove_outputs(e: anyhow::Error, args: &Args) -> anyhow::Error {
    let removed: Vec<String> = [(&args.trace, "trace"), (&args.gantt, "Gantt chart")]
        .into_iter()
        .filter_map(|(p, what)| {
            let p = p.as_ref()?;
            crate::output::remove_unfinished(p)
                .unwrap_or(false)
                .then(|| format!("{what} `{}`", p.display()))
        })
        .collect();
    if removed.is_empty() {
        return e;
    }
    let note = format!("note: removed the incomplete {}", removed.join(" and "));
    match e.downcast::<crate::outcome::InputError>() {
        Ok(input) => input_error(format!("{}\n  = {note}", input.0.trim_end())),
        Err(e) => anyhow::anyhow!("{e:#}\n  = {note}"),
    }
}

/// With `--json`, the runs' summary keeps their reports until the end in a
/// temporary file.
fn summary_failed(e: std::io::Error) -> anyhow::Error {
    anyhow::anyhow!(
        "cannot summarize the runs: {e}\n  = hint: set TMPDIR to a directory with room for the runs' reports"
    )
}

/// Creates an output file; failing to is an input error (a bad path on
/// the command line).
fn create(path: &Path) -> anyhow::Result<BufWriter<File>> {
    File::create(path)
        .map(BufWriter::new)
        .map_err(|e| input_error(format!("error: cannot create `{}`: {e}", path.display())))
}

/// Building the hierarchy fails on bad input, and writing the trace or the
/// chart on a full disk (exit 2); everything else is a failed run (exit
/// 1), reported with its replay line when it has one.
fn sim_error(e: SimError) -> anyhow::Error {
    match &e {
        SimError::Build { message } => input_error(format!("error: {message}")),
        SimError::Io { .. } => input_error(format!("error: {e}")),
        _ => anyhow::Error::new(e).context("the simulation failed"),
    }
}

/// A trace or chart that could not be written, naming its file (exit 2):
/// the simulator names only the output (`what`: "trace" or "Gantt
/// chart").
fn output_error(e: &SimError, args: &Args) -> Option<anyhow::Error> {
    let SimError::Io { what, error } = e else {
        return None;
    };
    let path = if *what == "trace" {
        args.trace.as_ref()
    } else {
        args.gantt.as_ref()
    }?;
    Some(input_error(format!(
        "error: writing the {what} to `{}`: {error}",
        path.display()
    )))
}

fn parse_duration_arg(s: &str) -> Result<Duration, String> {
    parse_duration(s, None).map_err(|e| e.message)
}

/// A run's length: longer than zero, like the file's `[sim] duration`.
fn parse_run_duration(s: &str) -> Result<Duration, String> {
    parse_run_length(s).map_err(|e| e.message)
}

fn parse_seed(s: &str) -> Result<u64, String> {
    whole(s, 0, u64::MAX)
}

fn parse_runs(s: &str) -> Result<u32, String> {
    whole(s, 1, MAX_RUNS)
}

fn parse_jobs(s: &str) -> Result<u32, String> {
    whole(s, 1, MAX_JOBS)
}

/// `A..B` with units on both ends, A before B.
fn parse_window(s: &str) -> Result<(Duration, Duration), String> {
    let (a, b) = s
        .split_once("..")
        .ok_or_else(|| format!("`{s}` is not a window; write START..END, e.g. 1s..1.2s"))?;
    let from = parse_duration_arg(a)?;
    let to = parse_duration_arg(b)?;
    if to <= from {
        return Err(format!("the window must end after it starts (`{s}`)"));
    }
    Ok((from, to))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_parse_with_units_and_in_order() {
        let ms = Duration::from_millis;
        assert_eq!(parse_window("1s..1.2s").unwrap(), (ms(1000), ms(1200)));
        assert_eq!(parse_window("0ms..500ms").unwrap(), (ms(0), ms(500)));
        assert!(parse_window("2s..1s").is_err());
        assert!(parse_window("1s-2s").is_err());
        assert!(parse_window("1..2").unwrap_err().contains("unit"));
    }

    #[test]
    fn a_run_takes_some_time() {
        assert_eq!(parse_run_duration("2s").unwrap(), Duration::from_secs(2));
        // `0.1ns` rounds to nothing: a run of 0 ns reported nothing.
        for zero in ["0s", "0ms", "0.1ns"] {
            let e = parse_run_duration(zero).unwrap_err();
            assert!(e.contains("no time at all"), "{e}");
        }
    }

    #[test]
    fn errors_map_to_exit_statuses() {
        let build = sim_error(SimError::Build {
            message: "x".into(),
        });
        assert!(build.downcast_ref::<crate::outcome::InputError>().is_some());
        let stuck = sim_error(SimError::Stuck {
            thread: "t".into(),
            at: hsched_core::Instant(5),
        });
        assert!(stuck.downcast_ref::<crate::outcome::InputError>().is_none());
    }
}
