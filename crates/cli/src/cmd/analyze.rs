//! `hsched analyze`: what each scheduler instance receives and gives, its
//! admission headroom, and a reservation for every rate-monotonic
//! application (seed 000, chapters 5 and 6).
//!
//! The composition is [`crate::analysis`]'s. The rate-monotonic groups are
//! the applications of §6.1: an `fp` instance whose children are all
//! threads with a `periodic` workload. For each, the threads are analyzed
//! under the guarantee the instance receives (response times from the
//! supply-bound function of that guarantee; for a basic reservation this is
//! Theorem 6.2's ghost task), and, when it is not the whole processor, the
//! ghost-task search of §6.1.2 proposes a reservation and Fig 6.2's
//! parameter space can be written as SVG and CSV.

use crate::analysis::{self, Analysis, RmGroup};
use crate::input;
use crate::outcome::{input_error, Outcome};
use crate::output::{check_outputs, Named};
use hsched_config::Hierarchy;
use hsched_core::Duration;
use hsched_guarantee::compose::Status;
use hsched_guarantee::ghost::{self, Grid, ParameterSpace, ReservationChoice, SearchConfig};
use hsched_guarantee::mapping::DEFAULT_REZ_CAP;
use hsched_guarantee::parse::Ms;
use hsched_guarantee::sbf::{self, Supply};
use hsched_guarantee::{rta, Guarantee};
use std::fmt::Write as _;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Long help.
pub const LONG_ABOUT: &str = "\
Analyze the guarantees of a hierarchy file (seed 000, chapters 5 and 6).

For each scheduler instance: the guarantee it receives, the form its policy
uses, and what each child gets; for a reservation scheduler (rez) the
admission headroom, the utilization reserved against its cap (EDF
utilization test).

For each rate-monotonic application (an fp instance whose children are all
threads with a periodic workload): the threads in priority order with their
worst-case response times under the guarantee the instance receives
(response-time analysis, Eq 6.1/6.2; under a basic reservation Theorem 6.2's
ghost task), and, unless it has the whole processor, the reservation the
ghost-task search of §6.1.2 proposes: the smallest utilization, at the
longest period within --tolerance (1%) of it. --svg and --csv write the
parameter space of Fig 6.2 (which reservations keep the threads
schedulable); with several applications, the instance's name is added to
each file name. Neither may be the hierarchy file, its rt-app file, the
other output or `-` (standard output carries the report).

Exit status 1 when the hierarchy does not compose (as `hsched check`) or an
application can miss a deadline under what it receives.";

/// Examples shown by `--help`.
pub const EXAMPLES: &str = "\
Examples:
  hsched analyze examples/media-player.toml
  hsched analyze examples/media-player.toml --svg fig6_2.svg --csv fig6_2.csv
  hsched analyze examples/per-app-reservation.toml --tolerance 5
  hsched analyze examples/home-computer.toml";

/// Arguments of `hsched analyze`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The hierarchy file
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    /// Write the parameter space of each rate-monotonic application (Fig
    /// 6.2) as an SVG picture
    #[arg(long, value_name = "OUT.svg", value_parser = crate::output::file_path)]
    pub svg: Option<PathBuf>,
    /// Write the same parameter space as CSV
    /// (period_ms,amount_ms,utilization,schedulable)
    #[arg(long, value_name = "OUT.csv", value_parser = crate::output::file_path)]
    pub csv: Option<PathBuf>,
    /// How much more utilization than the smallest found the search may
    /// give a reservation for a longer period, in percent (§6.1.2: fewer
    /// context switches for a little more CPU)
    #[arg(long, value_name = "PCT", default_value = "1", value_parser = parse_tolerance,
          allow_negative_numbers = true)]
    pub tolerance: f64,
}

fn parse_tolerance(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .trim()
        .trim_end_matches('%')
        .parse()
        .map_err(|_| format!("`{s}` is not a percentage (e.g. 1 or 10%)"))?;
    if v.is_finite() && (0.0..=1000.0).contains(&v) {
        Ok(v / 100.0)
    } else {
        Err(format!(
            "`{s}`: the tolerance must be between 0 and 1000 percent"
        ))
    }
}

/// Analyzes the file and prints the report.
///
/// # Errors
/// An invalid file, an output that cannot be written or that has nothing
/// to show (input errors), or stdout closed.
pub fn run(args: &Args) -> anyhow::Result<Outcome> {
    let h = input::load(&args.file)?;
    let file = args.file.display().to_string();
    let a = analysis::analyze(&h);
    let groups = a.rm_groups();
    let mapped: Vec<&RmGroup> = groups
        .iter()
        .filter(|g| g.received != Some(Guarantee::All))
        .collect();
    if (args.svg.is_some() || args.csv.is_some()) && mapped.is_empty() {
        return Err(input_error(format!(
            "error: {file} has no rate-monotonic application under a reservation to map\n  = expected: an `fp` instance whose children are all threads with a periodic workload, below something other than the whole processor"
        )));
    }
    if args.svg.is_some() || args.csv.is_some() {
        if let Some(g) = mapped.iter().find(|g| g.tasks().len() > MAX_SEARCH_THREADS) {
            return Err(input_error(format!(
                "error: the parameter space of '{}' has {} threads to analyze at each point, more than the {MAX_SEARCH_THREADS} it is drawn for\n  = hint: leave out --svg and --csv",
                g.scheduler,
                g.tasks().len()
            )));
        }
    }
    // Each file to write, by application, before anything is written.
    let outputs: Vec<(&str, &str, PathBuf)> = mapped
        .iter()
        .flat_map(|g| {
            [("--svg", &args.svg), ("--csv", &args.csv)]
                .into_iter()
                .filter_map(|(option, path)| {
                    let path = path.as_ref()?;
                    let out = if mapped.len() > 1 {
                        with_suffix(path, &g.scheduler)
                    } else {
                        path.clone()
                    };
                    Some((g.scheduler.as_str(), option, out))
                })
        })
        .collect();
    let rtapp = input::rtapp_path(&args.file, &h);
    let inputs: Vec<Named<'_>> = std::iter::once(("FILE", args.file.as_path()))
        .chain(rtapp.as_deref().map(|p| ("FILE's rt-app file", p)))
        .collect();
    let named: Vec<Named<'_>> = outputs.iter().map(|(_, o, p)| (*o, p.as_path())).collect();
    check_outputs(&inputs, &named)?;
    let mut text = String::new();
    let ok = a.is_ok();
    let _ = writeln!(
        text,
        "{file}: {}; {}",
        crate::cmd::check::summary(&h),
        if ok {
            "the guarantees compose"
        } else {
            "the guarantees do NOT compose"
        }
    );
    if let Some(note) = a.unmapped_note() {
        let _ = writeln!(text, "{note}");
    }
    instances(&a, &mut text);
    let mut all_met = true;
    let mut written = Vec::new();
    for g in &groups {
        let report = group(g, args.tolerance, &mut text);
        all_met &= report.met;
        for (_, option, out) in outputs.iter().filter(|(name, ..)| *name == g.scheduler) {
            let space = parameter_space(g)?;
            let body = if *option == "--svg" {
                space.to_svg(report.choice.map(|c| (c.amount, c.period)))
            } else {
                space.to_csv()
            };
            if let Err(e) = std::fs::write(out, body) {
                return Err(write_failed(out, &e, &written));
            }
            written.push((g.scheduler.clone(), out.clone()));
        }
    }
    if groups.is_empty() {
        text.push_str(
            "\nno rate-monotonic application (an fp instance whose children are all periodic threads)\n",
        );
    }
    if !written.is_empty() {
        text.push('\n');
        for (name, path) in &written {
            let _ = writeln!(
                text,
                "wrote the parameter space of '{name}' (Fig 6.2) to {}",
                path.display()
            );
        }
    }
    let findings = a.findings();
    if !findings.is_empty() {
        let source = std::fs::read_to_string(&args.file).ok();
        text.push('\n');
        for (k, f) in findings.iter().enumerate() {
            if k > 0 {
                text.push('\n');
            }
            let span = f.node.as_ref().and_then(|n| a.span(n));
            text.push_str(&analysis::render(f, &file, source.as_deref(), span));
        }
        let _ = writeln!(
            text,
            "\n{file}: {} guarantee problem{}: the hierarchy does not keep its promises",
            findings.len(),
            if findings.len() == 1 { "" } else { "s" }
        );
    }
    crate::output::report().write_all(text.as_bytes())?;
    Ok(if ok && all_met {
        Outcome::Ok
    } else {
        Outcome::Problems
    })
}

/// The error for an output that could not be written. The files this run
/// wrote before it are removed, so a failed run leaves no partial set of
/// figures behind.
fn write_failed(out: &Path, e: &std::io::Error, written: &[(String, PathBuf)]) -> anyhow::Error {
    let mut msg = format!("error: cannot write `{}`: {e}", out.display());
    for (_, path) in written {
        match crate::output::remove_unfinished(path) {
            Ok(false) => {}
            Ok(true) => {
                let _ = write!(
                    msg,
                    "\n  = note: removed `{}`, written before it",
                    path.display()
                );
            }
            Err(e) => {
                let _ = write!(
                    msg,
                    "\n  = note: `{}` was written before it and could not be removed: {e}",
                    path.display()
                );
            }
        }
    }
    input_error(msg)
}

/// `fig.svg` with `app` → `fig-app.svg`.
fn with_suffix(path: &Path, name: &str) -> PathBuf {
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let file = match path.extension() {
        Some(ext) => format!("{stem}-{name}.{}", ext.to_string_lossy()),
        None => format!("{stem}-{name}"),
    };
    path.with_file_name(file)
}

fn pct(x: f64) -> String {
    // An empty sum of floats is -0.0 (no reservation yet): not below zero.
    format!("{:.1}%", x * 100.0 + 0.0)
}

/// The per-instance section: what each instance receives, how its policy
/// uses it, what each child gets, and the admission headroom of
/// reservation schedulers.
fn instances(a: &Analysis<'_>, out: &mut String) {
    let h: &Hierarchy = a.file;
    let ns = h.schedulers.len();
    let _ = writeln!(
        out,
        "\ninstances (what each receives and gives, Table 5.1):"
    );
    let width = h
        .schedulers
        .iter()
        .map(|s| s.name.chars().count())
        .max()
        .unwrap_or(0);
    let pw = h
        .schedulers
        .iter()
        .map(|s| s.policy.chars().count())
        .max()
        .unwrap_or(0);
    for (i, s) in h.schedulers.iter().enumerate() {
        let node = &a.composition.nodes[i];
        let received: Vec<String> = node
            .received
            .iter()
            .map(|r| r.guarantee.map_or("nothing".to_string(), |g| g.to_string()))
            .collect();
        let mut line = format!(
            "  {:<width$}  {:<pw$}  gets {}",
            s.name,
            s.policy,
            if received.is_empty() {
                "nothing".to_string()
            } else {
                received.join(" + ")
            }
        );
        let used: Vec<String> = node
            .accepted
            .iter()
            .zip(node.received.iter().filter_map(|r| r.guarantee))
            .filter(|(x, r)| x != &r && **x != Guarantee::Null)
            .map(|(x, _)| x.to_string())
            .fold(Vec::new(), |mut v, x| {
                if !v.contains(&x) {
                    v.push(x);
                }
                v
            });
        if !used.is_empty() {
            let _ = write!(line, " (as {})", used.join(", "));
        }
        if let Some(req) = &s.guarantee {
            let _ = write!(
                line,
                "; asks {req}{}",
                if node.status == Status::Ok {
                    " ✓"
                } else {
                    ""
                }
            );
        }
        match node.status {
            Status::Ok => {}
            Status::Failed => line.push_str("  ✗ (see below)"),
            Status::Skipped => line.push_str("  (not checked: its parent gave it nothing)"),
        }
        let _ = writeln!(out, "{line}");
        let pad = " ".repeat(2 + width + 2 + pw + 2);
        if s.policy == "rez" && node.status == Status::Ok {
            let cap = a.translation.hierarchy.schedulers[i]
                .params
                .cap
                .unwrap_or(DEFAULT_REZ_CAP);
            let reserved: f64 = node
                .provided
                .iter()
                .filter_map(|(_, r)| r.as_ref().ok())
                .map(|p| p.first().rate())
                .sum();
            let _ = writeln!(
                out,
                "{pad}admission (EDF utilization test): {} of the {} cap reserved, {} free",
                pct(reserved),
                pct(cap),
                pct((cap - reserved).max(0.0))
            );
        }
        if s.policy == "ps" && node.status == Status::Ok {
            let shares: Vec<f64> = node
                .provided
                .iter()
                .map(|(c, _)| edge_of(a, *c, i).and_then(|e| e.share).unwrap_or(1.0))
                .collect();
            let total: f64 = shares.iter().sum();
            if !shares.is_empty() {
                let _ = writeln!(
                    out,
                    "{pad}{} children, shares total {}",
                    shares.len(),
                    hsched_guarantee::parse::Share(total)
                );
            }
        }
        for (c, r) in &node.provided {
            let child = &a.composition.nodes[*c];
            let who = if *c < ns {
                child.name.clone()
            } else {
                format!("thread {}", child.name)
            };
            let edge = edge_of(a, *c, i);
            let mut extra = String::new();
            if let Some(e) = edge {
                match s.policy.as_str() {
                    "fp" => extra = format!("priority {}", e.priority.unwrap_or(0)),
                    "ps" | "sfq" => {
                        let _ = write!(
                            extra,
                            "share {}",
                            hsched_guarantee::parse::Share(e.share.unwrap_or(1.0))
                        );
                        if e.warp.is_some_and(|w| w.as_nanos() > 0) {
                            extra.push_str(", warp");
                        }
                    }
                    _ => {}
                }
            }
            let what = match r {
                Ok(p) => {
                    let g = p
                        .options
                        .iter()
                        .map(Guarantee::to_string)
                        .collect::<Vec<_>>()
                        .join(" or ");
                    if s.policy == "rez" {
                        extra = pct(p.first().rate());
                    }
                    g
                }
                Err(reason) => format!("✗ {reason}"),
            };
            let extra = if extra.is_empty() {
                String::new()
            } else {
                format!("  ({extra})")
            };
            let _ = writeln!(out, "{pad}→ {who}: {what}{extra}");
        }
    }
}

/// The edge parameters node `c` registered with parent `p` (its first
/// parent link to `p`).
fn edge_of<'a>(
    a: &'a Analysis<'_>,
    c: usize,
    p: usize,
) -> Option<&'a hsched_guarantee::EdgeParams> {
    let gh = &a.translation.hierarchy;
    let ns = gh.schedulers.len();
    let parent = &gh.schedulers.get(p)?.name;
    let is = |s: &hsched_guarantee::ParentSpec| matches!(&s.parent, hsched_guarantee::ParentRef::Scheduler(n) if n == parent);
    if c < ns {
        gh.schedulers[c]
            .parents
            .iter()
            .find(|s| is(s))
            .map(|s| &s.params)
    } else {
        let t = gh.threads.get(c - ns)?;
        is(&t.parent).then_some(&t.parent.params)
    }
}

/// What the analysis of one group found.
struct GroupReport {
    /// Every thread meets its deadlines under what the instance receives.
    met: bool,
    /// The reservation proposed by the search.
    choice: Option<ReservationChoice>,
}

/// The section of one rate-monotonic group.
fn group(g: &RmGroup, tolerance: f64, out: &mut String) -> GroupReport {
    let tasks = g.tasks();
    let under = g.received.map_or("nothing".to_string(), |r| r.to_string());
    let _ = writeln!(
        out,
        "\nrate-monotonic application '{}' under {under} (§6.1):",
        g.scheduler
    );
    let mut report = GroupReport {
        met: false,
        choice: None,
    };
    if let Err(e) = rta::validate(&tasks) {
        let who = match e {
            rta::AnalysisError::InvalidTask { index, .. } => g
                .members
                .get(index)
                .map_or(String::new(), |m| format!(" (thread {})", m.thread)),
            _ => String::new(),
        };
        let _ = writeln!(out, "  cannot be analyzed: {e}{who}");
        return report;
    }
    if tasks.len() > MAX_RTA_THREADS {
        let _ = writeln!(
            out,
            "  cannot be analyzed: {} threads, more than the {MAX_RTA_THREADS} the response-time analysis takes",
            tasks.len()
        );
        return report;
    }
    let supply = g
        .received
        .map(|r| Supply::of(&r))
        .unwrap_or(Supply::Nothing);
    let responses = sbf::fp_response_times(&tasks, &supply);
    // The table: priority order, with each thread's response time.
    let mut rows = vec![[
        "thread".to_string(),
        "priority".into(),
        "exec".into(),
        "period".into(),
        "deadline".into(),
        "jitter".into(),
        "util".into(),
        "response".into(),
    ]];
    for (k, m) in g.members.iter().enumerate() {
        let t = m.task;
        let resp = match &responses {
            Ok(r) => match r[k] {
                Some(d) => format!("{} ms", Ms(d)),
                None => "can miss".into(),
            },
            Err(_) => "?".into(),
        };
        rows.push([
            m.thread.clone(),
            m.priority.to_string(),
            format!("{} ms", Ms(t.wcet)),
            format!("{} ms", Ms(t.period)),
            format!("{} ms", Ms(t.deadline)),
            format!("{} ms", Ms(t.jitter)),
            pct(t.utilization()),
            resp,
        ]);
    }
    table(&rows, out);
    let mut order = if g.is_rate_monotonic() {
        "priorities are rate-monotonic".to_string()
    } else {
        "priorities are NOT rate-monotonic (analyzed in the file's order)".to_string()
    };
    // The first few ties, then a count: one line, however many threads.
    let ties = g.ties();
    for (a, b, p) in ties.iter().take(3) {
        let _ = write!(
            order,
            "; {a} and {b} share priority {p} (fp runs them first come, first served; analyzed shorter period first)"
        );
    }
    if ties.len() > 3 {
        let _ = write!(order, "; and {} more ties", ties.len() - 3);
    }
    let _ = writeln!(
        out,
        "  utilization {}; {order}",
        pct(rta::utilization(&tasks))
    );
    match (&responses, g.received) {
        (Err(e), _) => {
            let _ = writeln!(out, "  cannot be analyzed: {e}");
        }
        (Ok(_), None) => {
            let _ = writeln!(
                out,
                "  it receives no guarantee (its parent gave it nothing): no deadline is promised"
            );
        }
        (Ok(r), Some(rec)) => {
            let missing: Vec<&str> = r
                .iter()
                .zip(&g.members)
                .filter(|(x, _)| x.is_none())
                .map(|(_, m)| m.thread.as_str())
                .collect();
            report.met = missing.is_empty();
            let how = how_analyzed(&rec);
            if missing.is_empty() {
                let _ = writeln!(out, "  under {rec}: every deadline is met ({how})");
            } else {
                let _ = writeln!(
                    out,
                    "  under {rec}: {} can miss deadlines ({how})",
                    missing.join(", ")
                );
            }
        }
    }
    if g.received == Some(Guarantee::All) {
        return report;
    }
    if tasks.len() > MAX_SEARCH_THREADS {
        let _ = writeln!(
            out,
            "  no reservation searched (§6.1.2): {} threads, more than the {MAX_SEARCH_THREADS} the search takes",
            tasks.len()
        );
        return report;
    }
    let config = SearchConfig {
        tolerance,
        ..SearchConfig::for_tasks(&tasks)
    };
    match ghost::search_reservation(&tasks, &config) {
        Ok(c) => {
            let _ = writeln!(
                out,
                "  reservation from the ghost-task search (§6.1.2): {}, utilization {} (smallest found {}, {} periods tried); longest gap {} ms",
                c.request(),
                pct(c.utilization),
                pct(c.min_utilization),
                c.periods_tested,
                Ms(c.request().max_gap().unwrap_or_default())
            );
            if let Some(rec) = g.received {
                if rec.rate() > 0.0 {
                    let _ = writeln!(
                        out,
                        "  it receives {} of the processor; the search's reservation needs {}",
                        pct(rec.rate()),
                        pct(c.utilization)
                    );
                }
            }
            report.choice = Some(c);
        }
        Err(e) => {
            let _ = writeln!(out, "  no reservation found (§6.1.2): {e}");
        }
    }
    report
}

/// The most threads of one application whose response times are
/// computed: the analysis grows with the square of the threads (10 000
/// take about a second; the 100 000 a file may have, minutes).
const MAX_RTA_THREADS: usize = 10_000;

/// The most threads of one application the ghost-task search and the
/// parameter space take: each tries thousands of reservations with a
/// response-time analysis that grows with the square of the threads (200
/// take about a second, 2 000 would take a quarter of an hour).
const MAX_SEARCH_THREADS: usize = 200;

/// Which analysis the response times come from.
fn how_analyzed(g: &Guarantee) -> String {
    match g {
        Guarantee::All => "response-time analysis, Eq 6.1/6.2".into(),
        g if g.kind().is_basic() => {
            let (x, y) = g.amount_period().unwrap_or_default();
            format!(
                "Theorem 6.2: a ghost task of {} ms every {} ms with {} ms of jitter",
                Ms(y - x),
                Ms(y),
                Ms(x)
            )
        }
        g if matches!(Supply::of(g), Supply::Nothing) => {
            format!("{} promises nothing in any window", g.kind())
        }
        _ => "response times from its supply-bound function".into(),
    }
}

/// Fig 6.2: every (period, amount) on a square grid up to twice the
/// shortest deadline, in 100 steps.
fn parameter_space(g: &RmGroup) -> anyhow::Result<ParameterSpace> {
    let tasks = g.tasks();
    let d_min = tasks
        .iter()
        .map(|t| t.deadline)
        .min()
        .unwrap_or(Duration::from_millis(10));
    let max = d_min.saturating_add(d_min);
    let step = Duration::from_nanos((max.as_nanos() / 100).max(1));
    ghost::parameter_space(&tasks, &Grid::square(max, step)).map_err(|e| {
        input_error(format!(
            "error: the parameter space of '{}': {e}",
            g.scheduler
        ))
    })
}

/// Left-aligned columns, two spaces apart, indented by two.
fn table<const N: usize>(rows: &[[String; N]], out: &mut String) {
    let mut w = [0usize; N];
    for r in rows {
        for (k, c) in r.iter().enumerate() {
            w[k] = w[k].max(c.chars().count());
        }
    }
    for r in rows {
        let mut line = String::from("  ");
        for (k, c) in r.iter().enumerate() {
            let _ = write!(line, "{c:<width$}  ", width = w[k]);
        }
        let _ = writeln!(out, "{}", line.trim_end());
    }
}
