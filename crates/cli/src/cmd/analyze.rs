//! `hsched analyze`: what each scheduler instance receives and gives, its
//! admission headroom, and a reservation for every rate-monotonic
//! application (Regehr 2001, ch. 5–6).
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
Analyze the guarantees of a hierarchy file (Regehr 2001, ch. 5–6).

For each scheduler instance: the guarantee it receives, the form its policy
uses, and what each child gets; for a reservation scheduler (rez) the
admission headroom, the utilization reserved against its cap (EDF
utilization test).

For each rate-monotonic application (an fp instance whose children are all
threads with a periodic or sporadic workload): the threads in priority
order with their worst-case response times under the guarantee the
instance receives (response-time analysis over every job of the busy
period, Eq 6.1/6.2 with Lehoczky's extension to deadlines past the period;
under a basic reservation Theorem 6.2's ghost task; threads sharing a
priority analyzed as delaying each other), and, unless it has the whole
processor, the reservation the ghost-task search of §6.1.2 proposes: the
smallest utilization, at the longest period within --tolerance (1%) of it.
--svg and --csv write the parameter space of Fig 6.2 (which reservations
keep the threads schedulable); with several applications, the instance's
name is added to each file name. Neither may be the hierarchy file, its
rt-app file, the other output or `-` (standard output carries the report).

Declared overheads are part of the model or stop the certificate: a
processor with [[machine.stolen]] supplies what the steals leave (a
periodic or burst pattern), or nothing it can bound; machine.context_switch
is charged twice per job for an application on the whole processor, and
under anything else the application is not certified. Every verdict names
the model it was computed under; --json gives the same report as data
(schema in docs/guarantees.md).

Exit status 0 only when the hierarchy composes and every application is
certified to meet its deadlines; 1 when it does not compose (as `hsched
check`), an application can miss a deadline, or it is not certified or not
decided (a busy period past --horizon).";

/// Examples shown by `--help`.
pub const EXAMPLES: &str = "\
Examples:
  hsched analyze examples/media-player.toml
  hsched analyze examples/media-player.toml --svg fig6_2.svg --csv fig6_2.csv
  hsched analyze examples/per-app-reservation.toml --tolerance 5
  hsched analyze examples/home-computer.toml
  hsched analyze examples/media-player.toml --json > verdicts.json";

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
    /// The longest busy period the response-time analysis follows; past it
    /// an application is "not decided"
    #[arg(long, value_name = "DURATION", default_value = "1h", value_parser = parse_horizon)]
    pub horizon: Duration,
    /// Print the report as JSON (every instance, verdict, response time,
    /// proposed reservation and assumption; schema in docs/guarantees.md)
    #[arg(long)]
    pub json: bool,
}

fn parse_horizon(s: &str) -> Result<Duration, String> {
    let d = hsched_core::time::parse_duration(s, None).map_err(|e| format!("`{s}`: {e}"))?;
    if d.as_nanos() == 0 {
        return Err(format!("`{s}`: the horizon must be longer than zero"));
    }
    Ok(d)
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
            "error: {file} has no rate-monotonic application under a reservation to map\n  = expected: an `fp` instance whose children are all threads with a periodic or sporadic workload, below something other than the whole processor"
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
    for note in a.notes() {
        let _ = writeln!(text, "{note}");
    }
    instances(&a, &mut text);
    let mut all_met = true;
    let mut written = Vec::new();
    let mut apps = Vec::with_capacity(groups.len());
    for g in &groups {
        let report = analyse_group(&a, g, args.tolerance, args.horizon);
        all_met &= report.verdict == Verdict::Met;
        group_text(&report, &mut text);
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
        apps.push(report);
    }
    if groups.is_empty() {
        text.push_str(
            "\nno rate-monotonic application (an fp instance whose children are all periodic or sporadic threads)\n",
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
    if args.json {
        let doc = json_report(&a, &file, &apps, &findings, ok && all_met);
        text = serde_json::to_string_pretty(&doc).unwrap_or_default();
        text.push('\n');
    }
    crate::output::report().write_all(text.as_bytes())?;
    Ok(if ok && all_met {
        Outcome::Ok
    } else {
        Outcome::Problems
    })
}

/// `hsched analyze --json`'s report for `h` as data (`hsched-analyze/1`,
/// docs/guarantees.md), with `file` the name it is reported under; the
/// same analysis as [`run`], without the files it can write.
pub fn report_json(
    h: &Hierarchy,
    file: &str,
    tolerance: f64,
    horizon: Duration,
) -> serde_json::Value {
    let a = analysis::analyze(h);
    let apps: Vec<AppReport> = a
        .rm_groups()
        .iter()
        .map(|g| analyse_group(&a, g, tolerance, horizon))
        .collect();
    let all_met = apps.iter().all(|r| r.verdict == Verdict::Met);
    json_report(&a, file, &apps, &a.findings(), a.is_ok() && all_met)
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
        let mut line = String::from("  ");
        pad(&mut line, &s.name, width);
        line.push_str("  ");
        pad(&mut line, &s.policy, pw);
        let _ = write!(
            line,
            "  gets {}",
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
                    if s.policy == "rez" || (s.policy == "dl" && p.first() != Guarantee::Null) {
                        extra = pct(p.first().rate());
                    }
                    // A note built for this child (dl's schedulability
                    // test, with the load and the bound) says why NULL.
                    match &p.rule {
                        std::borrow::Cow::Owned(note) if p.first() == Guarantee::Null => {
                            format!("NULL: {note}")
                        }
                        _ => g,
                    }
                }
                Err(reason) if *c >= ns && a.is_tied_only(&child.name) => {
                    format!("NULL: {reason}")
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

/// What the analysis of one rate-monotonic application found: the data
/// behind both the text and the JSON report.
struct AppReport {
    scheduler: String,
    under: Option<Guarantee>,
    /// The model the response times were computed under, in words.
    model: String,
    verdict: Verdict,
    /// Why the verdict is not "met", in words.
    reason: Option<String>,
    /// Per thread, in priority order: the execution time charged (with
    /// switching) and the response bound when one was computed.
    rows: Vec<Row>,
    utilization: f64,
    rate_monotonic: bool,
    ties: Vec<(String, String, i64)>,
    choice: Option<ReservationChoice>,
    /// Why no reservation is proposed, when none is.
    choice_note: Option<String>,
}

struct Row {
    thread: String,
    priority: i64,
    task: rta::Task,
    charged: Duration,
    response: Option<Duration>,
}

/// The verdict on one application.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Verdict {
    /// Every thread meets every deadline under the model.
    Met,
    /// Some thread can miss a deadline.
    CanMiss,
    /// The model leaves out something declared, or the hierarchy does not
    /// compose: no certificate either way.
    NotCertified,
    /// The analysis could not reach a decision (a busy period past the
    /// horizon).
    NotDecided,
}

impl Verdict {
    fn code(self) -> &'static str {
        match self {
            Verdict::Met => "met",
            Verdict::CanMiss => "can-miss",
            Verdict::NotCertified => "not-certified",
            Verdict::NotDecided => "not-decided",
        }
    }
}

/// The supply an application's threads run on, or why none can be named:
/// one guarantee, or the same `ALL` on every processor of a global fp (at
/// every instant of a busy period one of them runs the application's work,
/// so one processor's analysis bounds it).
fn supply_of(a: &Analysis<'_>, g: &RmGroup) -> Result<(Supply, Option<Guarantee>), String> {
    let node = &a.composition.nodes[g.index];
    let got: Vec<Option<Guarantee>> = node.received.iter().map(|r| r.guarantee).collect();
    match got.as_slice() {
        [] | [None] => Err("it receives no guarantee (its parent gave it nothing)".into()),
        [Some(one)] => Ok((Supply::of(one), Some(*one))),
        many if many.iter().all(|x| *x == Some(Guarantee::All)) => {
            Ok((Supply::Full, Some(Guarantee::All)))
        }
        many => Err(format!(
            "it receives {} on several processors, and the analysis bounds one supply",
            many.iter()
                .map(|x| x.map_or("nothing".to_string(), |x| x.to_string()))
                .collect::<Vec<_>>()
                .join(" + ")
        )),
    }
}

/// Analyses one rate-monotonic application (§6.1).
fn analyse_group(a: &Analysis<'_>, g: &RmGroup, tolerance: f64, horizon: Duration) -> AppReport {
    let tasks = g.tasks();
    let levels: Vec<i64> = g.members.iter().map(|m| m.priority).collect();
    let switch = a.file.machine.context_switch;
    let mut report = AppReport {
        scheduler: g.scheduler.clone(),
        under: g.received,
        model: String::new(),
        verdict: Verdict::NotCertified,
        reason: None,
        rows: g
            .members
            .iter()
            .map(|m| Row {
                thread: m.thread.clone(),
                priority: m.priority,
                task: m.task,
                charged: m.task.wcet,
                response: None,
            })
            .collect(),
        utilization: rta::utilization(&tasks),
        rate_monotonic: g.is_rate_monotonic(),
        ties: g
            .ties()
            .into_iter()
            .map(|(a, b, p)| (a.to_string(), b.to_string(), p))
            .collect(),
        choice: None,
        choice_note: None,
    };
    if let Err(e) = rta::validate(&tasks) {
        let who = match e {
            rta::AnalysisError::InvalidTask { index, .. } => g
                .members
                .get(index)
                .map_or(String::new(), |m| format!(" (thread {})", m.thread)),
            _ => String::new(),
        };
        report.reason = Some(format!("cannot be analyzed: {e}{who}"));
        return report;
    }
    if tasks.len() > MAX_RTA_THREADS {
        report.reason = Some(format!(
            "cannot be analyzed: {} threads, more than the {MAX_RTA_THREADS} the response-time analysis takes",
            tasks.len()
        ));
        return report;
    }
    let (supply, under) = match supply_of(a, g) {
        Ok(x) => x,
        Err(why) => {
            report.reason = Some(format!("{why}: no deadline is promised"));
            return report;
        }
    };
    // Each job pays for the switch into it and the one back into the job
    // it preempted (Burns et al. 1995); that bounds the switches only where
    // the application has its processors to itself.
    let charged: Vec<rta::Task> = if switch.as_nanos() > 0 {
        if supply != Supply::Full {
            report.model = how_analyzed(&under);
            report.reason = Some(format!(
                "machine.context_switch = {switch} is declared, and the analysis does not bound how often the processor switches into this application under {}: each switch spends {switch} of it",
                under.map_or("nothing".into(), |u| u.to_string())
            ));
            report.choice_note = Some(format!(
                "no reservation searched (§6.1.2): the search does not model machine.context_switch = {switch}"
            ));
            return report;
        }
        tasks
            .iter()
            .map(|t| rta::Task {
                wcet: t.wcet.saturating_add(switch).saturating_add(switch),
                ..*t
            })
            .collect()
    } else {
        tasks.clone()
    };
    for (row, t) in report.rows.iter_mut().zip(&charged) {
        row.charged = t.wcet;
    }
    let mut model = how_analyzed(&under);
    if switch.as_nanos() > 0 {
        let _ = write!(model, "; each job charged 2 × {switch} of switching");
    }
    if levels.windows(2).any(|w| w[0] == w[1]) {
        model.push_str("; threads sharing a priority analyzed as delaying each other");
    }
    report.model = model;
    match sbf::fp_response_times_at_levels(&charged, &levels, &supply, horizon) {
        Err(e) => {
            report.verdict = Verdict::NotDecided;
            let who = match e {
                rta::AnalysisError::BusyPeriodTooLong { task, .. }
                | rta::AnalysisError::NoConvergence { task, .. } => g
                    .members
                    .get(task)
                    .map_or(String::new(), |m| format!(" (thread {})", m.thread)),
                _ => String::new(),
            };
            report.reason = Some(format!("not decided: {e}{who}"));
        }
        Ok(r) => {
            for (row, x) in report.rows.iter_mut().zip(&r) {
                row.response = *x;
            }
            let missing: Vec<&str> = r
                .iter()
                .zip(&g.members)
                .filter(|(x, _)| x.is_none())
                .map(|(_, m)| m.thread.as_str())
                .collect();
            // A member refused only for a priority tie is analyzed above
            // as delayed by the threads it ties with, which bounds it.
            let statuses_ok = a.composition.nodes[g.index].status == Status::Ok
                && g.members.iter().all(|m| {
                    a.composition.nodes[m.index].status == Status::Ok || a.is_tied_only(&m.thread)
                });
            if !missing.is_empty() {
                report.verdict = Verdict::CanMiss;
                report.reason = Some(format!("{} can miss deadlines", missing.join(", ")));
            } else if !statuses_ok {
                report.reason = Some(
                    "the hierarchy around it does not compose (see below), so nothing is certified (the response times above are under what it would receive)".into(),
                );
            } else {
                report.verdict = Verdict::Met;
            }
        }
    }
    if under == Some(Guarantee::All) {
        return report;
    }
    if tasks.len() > MAX_SEARCH_THREADS {
        report.choice_note = Some(format!(
            "no reservation searched (§6.1.2): {} threads, more than the {MAX_SEARCH_THREADS} the search takes",
            tasks.len()
        ));
        return report;
    }
    let config = SearchConfig {
        tolerance,
        ..SearchConfig::for_tasks(&tasks)
    };
    match ghost::search_reservation_at_levels(&tasks, &levels, &config) {
        Ok(c) => report.choice = Some(c),
        Err(e) => report.choice_note = Some(format!("no reservation found (§6.1.2): {e}")),
    }
    report
}

/// The text section of one application.
fn group_text(r: &AppReport, out: &mut String) {
    let under = r.under.map_or("nothing".to_string(), |u| u.to_string());
    let _ = writeln!(
        out,
        "\nrate-monotonic application '{}' under {under} (§6.1):",
        r.scheduler
    );
    let charged = r.rows.iter().any(|x| x.charged != x.task.wcet);
    let mut head = vec![
        "thread".to_string(),
        "priority".into(),
        "exec".into(),
        "period".into(),
        "deadline".into(),
        "jitter".into(),
        "util".into(),
        "response".into(),
    ];
    if charged {
        head.insert(3, "charged".into());
    }
    let mut rows = vec![head];
    let decided = matches!(r.verdict, Verdict::Met | Verdict::CanMiss)
        || (r.verdict == Verdict::NotCertified && r.rows.iter().any(|x| x.response.is_some()));
    for x in &r.rows {
        let t = x.task;
        let resp = match (decided, x.response) {
            (false, _) => "?".to_string(),
            (true, Some(d)) => format!("{} ms", Ms(d)),
            (true, None) => "can miss".into(),
        };
        let mut row = vec![
            x.thread.clone(),
            x.priority.to_string(),
            format!("{} ms", Ms(t.wcet)),
            format!("{} ms", Ms(t.period)),
            format!("{} ms", Ms(t.deadline)),
            format!("{} ms", Ms(t.jitter)),
            pct(t.utilization()),
            resp,
        ];
        if charged {
            row.insert(3, format!("{} ms", Ms(x.charged)));
        }
        rows.push(row);
    }
    table(&rows, out);
    let mut order = if r.rate_monotonic {
        "priorities are rate-monotonic".to_string()
    } else {
        "priorities are NOT rate-monotonic (analyzed in the file's order)".to_string()
    };
    // The first few ties, then a count: one line, however many threads.
    for (a, b, p) in r.ties.iter().take(3) {
        let _ = write!(
            order,
            "; {a} and {b} share priority {p} (each analyzed as delaying the other)"
        );
    }
    if r.ties.len() > 3 {
        let _ = write!(order, "; and {} more ties", r.ties.len() - 3);
    }
    let _ = writeln!(out, "  utilization {}; {order}", pct(r.utilization));
    match (r.verdict, &r.reason) {
        (Verdict::Met, _) => {
            let _ = writeln!(out, "  under {under}: every deadline is met ({})", r.model);
        }
        (Verdict::CanMiss, Some(why)) => {
            let _ = writeln!(out, "  under {under}: {why} ({})", r.model);
        }
        (_, Some(why)) => {
            let _ = writeln!(out, "  not certified: {why}");
        }
        (_, None) => {}
    }
    if let Some(c) = &r.choice {
        let _ = writeln!(
            out,
            "  reservation from the ghost-task search (§6.1.2): {}, utilization {} (smallest found {}, {} periods tried); longest gap {} ms",
            c.request(),
            pct(c.utilization),
            pct(c.min_utilization),
            c.periods_tested,
            Ms(c.request().max_gap().unwrap_or_default())
        );
        if let Some(rec) = r.under {
            if rec.rate() > 0.0 {
                let _ = writeln!(
                    out,
                    "  it receives {} of the processor; the search's reservation needs {}",
                    pct(rec.rate()),
                    pct(c.utilization)
                );
            }
        }
    }
    if let Some(note) = &r.choice_note {
        let _ = writeln!(out, "  {note}");
    }
}

fn ns(d: Duration) -> serde_json::Value {
    serde_json::Value::from(d.as_nanos())
}

/// The JSON form of one application (docs/guarantees.md, "analyze --json").
fn group_json(r: &AppReport) -> serde_json::Value {
    serde_json::json!({
        "scheduler": r.scheduler,
        "under": r.under.map(|u| u.to_string()),
        "model": r.model,
        "verdict": r.verdict.code(),
        "reason": r.reason,
        "utilization": r.utilization,
        "threads": r.rows.iter().map(|x| serde_json::json!({
            "thread": x.thread,
            "priority": x.priority,
            "exec_ns": ns(x.task.wcet),
            "charged_exec_ns": ns(x.charged),
            "period_ns": ns(x.task.period),
            "deadline_ns": ns(x.task.deadline),
            "jitter_ns": ns(x.task.jitter),
            "utilization": x.task.utilization(),
            "response_ns": match r.verdict {
                Verdict::Met | Verdict::CanMiss | Verdict::NotCertified => x.response.map(ns),
                Verdict::NotDecided => None,
            },
            "meets": match r.verdict {
                Verdict::Met | Verdict::CanMiss => Some(x.response.is_some()),
                _ => None,
            },
        })).collect::<Vec<_>>(),
        "reservation": r.choice.map(|c| serde_json::json!({
            "guarantee": c.request().to_string(),
            "amount_ns": ns(c.amount),
            "period_ns": ns(c.period),
            "utilization": c.utilization,
            "min_utilization": c.min_utilization,
            "periods_tested": c.periods_tested,
        })),
        "reservation_note": r.choice_note,
    })
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
fn how_analyzed(g: &Option<Guarantee>) -> String {
    let Some(g) = g else {
        return "nothing is received".into();
    };
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

/// The whole report as JSON (`hsched-analyze/1`, docs/guarantees.md).
fn json_report(
    a: &Analysis<'_>,
    file: &str,
    apps: &[AppReport],
    findings: &[analysis::Finding],
    certified: bool,
) -> serde_json::Value {
    let h = a.file;
    let ns_count = h.schedulers.len();
    let status = |st: Status| match st {
        Status::Ok => "ok",
        Status::Failed => "failed",
        Status::Skipped => "skipped",
    };
    let show = |g: &Option<Guarantee>| g.map(|g| g.to_string());
    let instances: Vec<serde_json::Value> = h
        .schedulers
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let node = &a.composition.nodes[i];
            let children: Vec<serde_json::Value> = node
                .provided
                .iter()
                .map(|(c, r)| {
                    let child = &a.composition.nodes[*c];
                    serde_json::json!({
                        "name": child.name,
                        "kind": if *c < ns_count { "scheduler" } else { "thread" },
                        "guarantees": r.as_ref().ok().map(|p| p.options.iter().map(Guarantee::to_string).collect::<Vec<_>>()),
                        "refused": r.as_ref().err(),
                    })
                })
                .collect();
            serde_json::json!({
                "name": s.name,
                "policy": s.policy,
                "receives": node.received.iter().map(|r| show(&r.guarantee)).collect::<Vec<_>>(),
                "uses": node.accepted.iter().map(Guarantee::to_string).collect::<Vec<_>>(),
                "request": s.guarantee,
                "status": status(node.status),
                "children": children,
            })
        })
        .collect();
    let threads: Vec<serde_json::Value> = h
        .threads
        .iter()
        .enumerate()
        .map(|(k, t)| {
            let node = &a.composition.nodes[ns_count + k];
            serde_json::json!({
                "name": t.name,
                "scheduler": t.scheduler,
                "receives": node.received.first().and_then(|r| show(&r.guarantee)),
                "request": t.guarantee,
                "status": status(node.status),
            })
        })
        .collect();
    let problems: Vec<serde_json::Value> = findings
        .iter()
        .map(|f| {
            let details: serde_json::Map<String, serde_json::Value> = f
                .details
                .iter()
                .map(|(k, v)| ((*k).to_string(), serde_json::Value::from(v.as_str())))
                .collect();
            serde_json::json!({
                "code": f.code,
                "node": f.node.as_ref().map(|n| match n {
                    analysis::NodeRef::Scheduler(s) => serde_json::json!({"scheduler": s}),
                    analysis::NodeRef::Thread(t) => serde_json::json!({"thread": t}),
                }),
                "headline": f.headline,
                "details": details,
            })
        })
        .collect();
    let top: Vec<serde_json::Value> = (0..h.machine.cpus)
        .map(|c| {
            serde_json::json!({
                "cpu": c,
                "supplies": a.translation.hierarchy.top.get(c).unwrap_or(&Guarantee::All).to_string(),
            })
        })
        .collect();
    serde_json::json!({
        "schema": "hsched-analyze/1",
        "file": file,
        "composes": a.is_ok(),
        "certified": certified,
        "model": {
            "context_switch_ns": h.machine.context_switch.as_nanos(),
            "top": top,
            "notes": a.notes(),
        },
        "instances": instances,
        "threads": threads,
        "applications": apps.iter().map(group_json).collect::<Vec<_>>(),
        "problems": problems,
    })
}

/// Fig 6.2: every (period, amount) on a square grid up to twice the
/// shortest deadline, in 100 steps.
fn parameter_space(g: &RmGroup) -> anyhow::Result<ParameterSpace> {
    let tasks = g.tasks();
    let levels: Vec<i64> = g.members.iter().map(|m| m.priority).collect();
    let d_min = tasks
        .iter()
        .map(|t| t.deadline)
        .min()
        .unwrap_or(Duration::from_millis(10));
    let max = d_min.saturating_add(d_min);
    let step = Duration::from_nanos((max.as_nanos() / 100).max(1));
    ghost::parameter_space_at_levels(&tasks, &levels, &Grid::square(max, step)).map_err(|e| {
        input_error(format!(
            "error: the parameter space of '{}': {e}",
            g.scheduler
        ))
    })
}

/// Appends `text` left-aligned in `width` characters. (Not `{:<width$}`:
/// a width past 65 535, a name that long, is out of `format!`'s range.)
fn pad(out: &mut String, text: &str, width: usize) {
    out.push_str(text);
    let n = text.chars().count();
    out.extend(std::iter::repeat_n(' ', width.saturating_sub(n)));
}

/// Left-aligned columns, two spaces apart, indented by two.
fn table(rows: &[Vec<String>], out: &mut String) {
    let mut w = vec![0usize; rows.first().map_or(0, Vec::len)];
    for r in rows {
        for (k, c) in r.iter().enumerate() {
            w[k] = w[k].max(c.chars().count());
        }
    }
    for r in rows {
        let mut line = String::from("  ");
        for (k, c) in r.iter().enumerate() {
            pad(&mut line, c, w[k]);
            line.push_str("  ");
        }
        let _ = writeln!(out, "{}", line.trim_end());
    }
}
