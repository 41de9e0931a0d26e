//! `hsched tree`: the hierarchy as a text tree.
//!
//! Schedulers are drawn under their parents with box-drawing characters; a
//! scheduler with several parents (Join) is drawn in full under its first
//! parent and as a one-line reference under the others. Threads are the
//! leaves, with their workload in short form. Next to each node: the
//! guarantee it receives from the parent it is drawn under, and for an
//! instance the form its policy uses and what it gives its children (Regehr
//! 2001, ch. 5, from [`crate::analysis`]); problems are listed after the tree.

use crate::input;
use crate::outcome::Outcome;
use hsched_config::{
    Hierarchy, MissPolicy, OpSpec, Program, SchedulerSpec, Step, StolenPattern, ThreadSpec,
    TimerModel, VideoMode, WorkloadSpec,
};
use hsched_core::{Duration, Params};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;

/// Long help.
pub const LONG_ABOUT: &str = "\
Draw the hierarchy of a file as a tree: each scheduler instance with its
policy, its own parameters [in brackets] and the parameters it registered
with its parent (priority, share, amount and period); threads are the leaves,
with their workload in short form. A scheduler with several parents (Join)
is drawn under its first parent and referenced under the others. Timed
operations are listed after the tree.

Next to each node is its guarantee (Regehr 2001, ch. 5): `gets G` is what it
receives from the parent it is drawn under; for an instance, `(as G)` is the
form its policy uses after the conversions of Table 5.2 and `gives ...` what
it provides to its children; `asks G ... ✓` marks a requested guarantee that
is met and `✗` a node that fails. Problems are listed after the tree
(`hsched check` explains them).";

/// Examples shown by `--help`.
pub const EXAMPLES: &str = "\
Examples:
  hsched tree examples/home-computer.toml
  hsched tree examples/hard-firm-soft.toml";

/// Arguments of `hsched tree`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The hierarchy file
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    /// `kernel`: next to each node, the kernel mechanism `hsched run
    /// --enforce kernel` maps it to and the guarantee the kernel's
    /// enforcement gives it
    #[arg(long, value_name = "BACKEND", value_parser = ["kernel", "user"])]
    pub enforce: Option<String>,
}

/// Loads the file and prints its tree.
///
/// # Errors
/// An invalid file (input error), or stdout closed.
pub fn run(args: &Args) -> anyhow::Result<Outcome> {
    let h = input::load(&args.file)?;
    let file = args.file.display().to_string();
    let notes = if args.enforce.as_deref() == Some("kernel") {
        kernel_notes(&h)
    } else {
        crate::analysis::analyze(&h).tree_notes(&file)
    };
    let text = render(&h, &notes);
    crate::output::report().write_all(text.as_bytes())?;
    Ok(Outcome::Ok)
}

/// Extra text drawn next to nodes, e.g. the guarantees the analysis derived
/// (instance names and thread names are separate namespaces).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Notes {
    /// Per instance: one note per parent link, in the order of its parents
    /// (a root has one); each is drawn where the instance appears under
    /// that parent.
    pub schedulers: BTreeMap<String, Vec<String>>,
    /// Per thread.
    pub threads: BTreeMap<String, String>,
    /// Lines after the tree.
    pub after: Vec<String>,
}

impl Notes {
    fn scheduler(&self, name: &str, link: usize) -> Option<&String> {
        self.schedulers.get(name)?.get(link)
    }
}

/// The kernel backend's mapping of every node, for `--enforce kernel`.
fn kernel_notes(h: &Hierarchy) -> Notes {
    use hsched_linux::kernel::{show, Node};
    let plan = show::plan_here(h);
    let mut notes = Notes::default();
    for n in &plan.nodes {
        match &n.node {
            Node::Scheduler(s) => {
                let links = h
                    .schedulers
                    .iter()
                    .find(|x| &x.name == s)
                    .map_or(1, |x| x.parents.len().max(1));
                notes
                    .schedulers
                    .insert(s.clone(), vec![show::node_note(n); links]);
            }
            Node::Thread(t) => {
                notes.threads.insert(t.clone(), show::node_note(n));
            }
        }
    }
    let text = show::check_text(h, &plan);
    // The mapping lines are in the tree already; the rest goes after it.
    notes.after = text
        .lines()
        .filter(|l| !l.starts_with("  ") && !l.ends_with("the kernel backend's mapping"))
        .map(String::from)
        .collect();
    notes
}

/// Draws `h` as text.
pub fn render(h: &Hierarchy, notes: &Notes) -> String {
    let mut out = String::new();
    out.push_str(&machine_line(h));
    out.push('\n');
    if let Some(d) = &h.default_scheduler {
        out.push_str(&format!("default scheduler: {d}\n"));
    }
    let tree = Tree::new(h);
    for root in h.schedulers.iter().filter(|s| s.parents.is_empty()) {
        out.push('\n');
        out.push_str(&scheduler_label(
            root,
            None,
            Some(&cpu_list(&root.cpus, h)),
            notes,
        ));
        out.push('\n');
        tree.children(&root.name, "", notes, &mut out);
    }
    let orphans: Vec<&ThreadSpec> = h
        .threads
        .iter()
        .filter(|t| !h.schedulers.iter().any(|s| s.name == t.scheduler))
        .collect();
    if !orphans.is_empty() {
        out.push_str("\nthreads under no scheduler of this file:\n");
        for t in orphans {
            out.push_str(&format!("  {}\n", thread_label(t, notes)));
        }
    }
    if !notes.after.is_empty() {
        out.push('\n');
        for l in &notes.after {
            out.push_str(l);
            out.push('\n');
        }
    }
    if !h.rules.is_empty() {
        out.push_str("\nnew threads of managed programs (live mode), first match:\n");
        for r in &h.rules {
            let thread = r.thread.as_deref().map(|g| format!("`{g}`"));
            let program = r.program.as_deref().map(|g| format!("`{g}`"));
            let mut l = format!(
                "  {} of {} -> {}",
                thread.as_deref().unwrap_or("any thread"),
                program.as_deref().unwrap_or("any program"),
                r.scheduler
            );
            push_params(&mut l, &r.params);
            out.push_str(&l);
            out.push('\n');
        }
    }
    if !h.operations.is_empty() {
        out.push_str("\ntimed operations:\n");
        for op in &h.operations {
            out.push_str(&format!(
                "  at {:>8}  {}\n",
                op.at.to_string(),
                op_text(&op.op)
            ));
        }
    }
    out
}

/// A child of a scheduler: another scheduler (through one of its parent
/// links) or a thread.
enum Child<'a> {
    Scheduler {
        spec: &'a SchedulerSpec,
        link: usize,
    },
    Thread(&'a ThreadSpec),
}

struct Tree<'a> {
    children: BTreeMap<&'a str, Vec<(u32, usize, Child<'a>)>>,
}

impl<'a> Tree<'a> {
    fn new(h: &'a Hierarchy) -> Self {
        let mut children: BTreeMap<&str, Vec<(u32, usize, Child<'a>)>> = BTreeMap::new();
        let mut order = 0;
        for s in &h.schedulers {
            for (link, p) in s.parents.iter().enumerate() {
                children.entry(p.name.as_str()).or_default().push((
                    s.span.line,
                    order,
                    Child::Scheduler { spec: s, link },
                ));
                order += 1;
            }
        }
        for t in &h.threads {
            children.entry(t.scheduler.as_str()).or_default().push((
                t.span.line,
                order,
                Child::Thread(t),
            ));
            order += 1;
        }
        // File order: by line, then declaration order (expanded `count`
        // threads share a line).
        for list in children.values_mut() {
            list.sort_by_key(|(line, order, _)| (*line, *order));
        }
        Tree { children }
    }

    fn children(&self, parent: &str, prefix: &str, notes: &Notes, out: &mut String) {
        let Some(list) = self.children.get(parent) else {
            return;
        };
        for (i, (_, _, child)) in list.iter().enumerate() {
            let last = i + 1 == list.len();
            let (branch, indent) = if last {
                ("└── ", "    ")
            } else {
                ("├── ", "│   ")
            };
            match child {
                Child::Thread(t) => {
                    out.push_str(&format!("{prefix}{branch}{}\n", thread_label(t, notes)))
                }
                Child::Scheduler { spec, link } => {
                    out.push_str(&format!(
                        "{prefix}{branch}{}\n",
                        scheduler_label(spec, Some(*link), None, notes)
                    ));
                    if *link == 0 {
                        self.children(&spec.name, &format!("{prefix}{indent}"), notes, out);
                    }
                }
            }
        }
    }
}

fn machine_line(h: &Hierarchy) -> String {
    let m = &h.machine;
    let mut s = format!(
        "machine: {} CPU{}",
        m.cpus,
        if m.cpus == 1 { "" } else { "s" }
    );
    if m.context_switch.as_nanos() > 0 {
        s.push_str(&format!(", context switch {}", m.context_switch));
    }
    match m.timer {
        TimerModel::Precise => s.push_str(", precise timers"),
        TimerModel::Tick { hz } => s.push_str(&format!(", timer tick {hz} Hz")),
    }
    for st in &m.stolen {
        let what = match &st.pattern {
            StolenPattern::Periodic { every, amount, .. } => format!("{amount} every {every}"),
            StolenPattern::Burst {
                start,
                length,
                fraction,
                ..
            } => {
                format!("{:.0}% from {start} for {length}", fraction * 100.0)
            }
            StolenPattern::Trace { steals } => format!("{} recorded steals", steals.len()),
        };
        s.push_str(&format!(", stolen on CPU {}: {what}", st.cpu));
    }
    s
}

fn cpu_list(cpus: &[usize], h: &Hierarchy) -> String {
    let cpus: Vec<usize> = if cpus.is_empty() {
        (0..h.machine.cpus).collect()
    } else {
        cpus.to_vec()
    };
    let list: Vec<String> = cpus.iter().map(|c| c.to_string()).collect();
    format!(
        "CPU{} {}",
        if list.len() == 1 { "" } else { "s" },
        list.join(",")
    )
}

/// `name [policy k=v]  parent-side params  asks G  note`; for a Join drawn a
/// second time, a pointer to where it is drawn in full; for a root, `on
/// CPUs` before the guarantees.
fn scheduler_label(
    s: &SchedulerSpec,
    link: Option<usize>,
    cpus: Option<&str>,
    notes: &Notes,
) -> String {
    let mut l = format!("{} [{}", s.name, s.policy);
    if !s.params.is_empty() {
        l.push_str(&format!(" {}", s.params));
    }
    l.push(']');
    if let Some(i) = link {
        push_params(&mut l, &s.parents[i].params);
        if i > 0 {
            l.push_str(&format!("  (drawn under {})", s.parents[0].name));
        } else if s.parents.len() > 1 {
            let others: Vec<&str> = s.parents[1..].iter().map(|p| p.name.as_str()).collect();
            l.push_str(&format!("  (also under {})", others.join(", ")));
        }
    }
    if let Some(c) = cpus {
        l.push_str(&format!("  on {c}"));
    }
    let at = link.unwrap_or(0);
    let asked = if at == 0 {
        s.guarantee.as_deref()
    } else {
        None
    };
    push_guarantee(&mut l, asked, notes.scheduler(&s.name, at));
    l
}

fn thread_label(t: &ThreadSpec, notes: &Notes) -> String {
    let mut l = t.name.clone();
    push_params(&mut l, &t.params);
    match (&t.workload, &t.rtapp, &t.exec) {
        (Some(w), Some(b), _) => {
            l.push_str(&format!(" · rt-app task {}: {}", b.task, workload_text(w)))
        }
        (Some(w), None, _) => l.push_str(&format!(" · {}", workload_text(w))),
        (None, Some(b), _) => l.push_str(&format!(" · rt-app task {}", b.task)),
        (None, None, Some(cmd)) => l.push_str(&format!(" · runs `{}`", cmd.join(" "))),
        (None, None, None) => l.push_str(" · no workload"),
    }
    if let Some(p) = &t.principal {
        l.push_str(&format!(" · principal {p}"));
    }
    if t.start.as_nanos() > 0 {
        l.push_str(&format!(" · starts {}", t.start));
    }
    if let Some(e) = t.exit {
        l.push_str(&format!(" · exits {e}"));
    }
    push_guarantee(&mut l, t.guarantee.as_deref(), notes.threads.get(&t.name));
    l
}

fn push_params(l: &mut String, p: &Params) {
    if !p.is_empty() {
        l.push_str(&format!("  {p}"));
    }
}

fn push_guarantee(l: &mut String, asked: Option<&str>, note: Option<&String>) {
    if let Some(g) = asked {
        l.push_str(&format!("  asks {g}"));
    }
    if let Some(n) = note {
        l.push_str(&format!("  {n}"));
    }
}

/// A workload in a few words: `periodic 5ms every 20ms`.
pub fn workload_text(w: &WorkloadSpec) -> String {
    match w {
        WorkloadSpec::CpuBound => "cpu-bound".into(),
        WorkloadSpec::Periodic {
            period,
            exec,
            deadline,
            jitter,
            offset,
        } => {
            let mut s = format!("periodic {exec} every {period}");
            if deadline != period {
                s.push_str(&format!(", deadline {deadline}"));
            }
            if jitter.as_nanos() > 0 {
                s.push_str(&format!(", jitter {jitter}"));
            }
            if offset.as_nanos() > 0 {
                s.push_str(&format!(", first at {offset}"));
            }
            s
        }
        WorkloadSpec::Sporadic {
            min_interarrival,
            max_interarrival,
            exec,
            deadline,
        } => {
            format!(
                "sporadic {exec} every {min_interarrival}..{max_interarrival}, deadline {deadline}"
            )
        }
        WorkloadSpec::Interactive { think, burst } => {
            format!("interactive: think {think}, burst {burst}")
        }
        WorkloadSpec::BlockingIo { compute, io } => format!("i/o: compute {compute}, wait {io}"),
        WorkloadSpec::Video(v) => {
            let work = match &v.mode {
                VideoMode::Constant { exec } => format!("{exec}"),
                VideoMode::Mpeg { i, p, b, gop } => format!("I {i} P {p} B {b} ({gop})"),
            };
            let skip = if v.on_miss == MissPolicy::Skip {
                ", skips late frames"
            } else {
                ""
            };
            format!("video: {work} per frame every {}{skip}", v.period)
        }
        WorkloadSpec::FrameRenderer { work, miss_gap } => {
            format!("frame renderer: {work} per frame, miss if no frame for {miss_gap}")
        }
        WorkloadSpec::Program(p) => program_text(p),
        WorkloadSpec::Stage(st) => stage_text(st),
        WorkloadSpec::Player(p) => {
            let fps = 1e9 / p.frame.as_nanos().max(1) as f64;
            format!(
                "video player: {fps:.0} fps, decode {} per frame (±{:.0}%), {}",
                p.decode,
                p.spread * 100.0,
                if p.cooperative {
                    "calls coop_poll"
                } else {
                    "non-cooperative"
                }
            )
        }
    }
}

fn stage_text(st: &hsched_config::StageSpec) -> String {
    let role = match (&st.input, &st.output) {
        (Some(i), Some(o)) => format!("stage {i} -> {o}"),
        (None, Some(o)) => format!("source -> {o}"),
        (Some(i), None) => format!("sink {i} ->"),
        (None, None) => "stage".into(),
    };
    let mut s = format!("{role}: {} per item", st.cost);
    if let Some(r) = st.rate {
        s.push_str(&format!(", {r} items/s"));
    }
    if !st.pulses.is_empty() {
        s.push_str(&format!(", {} pulse(s)", st.pulses.len()));
    }
    if let Some(r) = st.report {
        s.push_str(&format!(", reports progress every {r}"));
    }
    s
}

/// Steps of a program shown in full; a longer one (a replayed trace has
/// hundreds) is summed up after them.
const PROGRAM_STEPS_SHOWN: usize = 8;

fn program_text(p: &Program) -> String {
    let steps: Vec<String> = p
        .steps
        .iter()
        .take(PROGRAM_STEPS_SHOWN)
        .map(|s| match s {
            Step::Run(d) => format!("run {d}"),
            Step::Runtime(d) => format!("runtime {d}"),
            Step::Sleep(d) => format!("sleep {d}"),
            Step::Timer {
                period,
                absolute: true,
            } => format!("timer {period}"),
            Step::Timer {
                period,
                absolute: false,
            } => format!("timer +{period}"),
        })
        .collect();
    let mut s = format!("program: {}", steps.join(", "));
    if p.steps.len() > PROGRAM_STEPS_SHOWN {
        let cpu = p.steps.iter().fold(Duration::ZERO, |a, s| match s {
            Step::Run(d) => a.saturating_add(*d),
            _ => a,
        });
        s.push_str(&format!(
            ", … ({} steps, {cpu} of `run` in all)",
            p.steps.len()
        ));
    }
    match p.loops {
        Some(n) => s.push_str(&format!(" ×{n}")),
        None => s.push_str(" (loops)"),
    }
    if p.delay.as_nanos() > 0 {
        s.push_str(&format!(", after {}", p.delay));
    }
    s
}

fn op_text(op: &OpSpec) -> String {
    let with = |p: &Params| {
        if p.is_empty() {
            String::new()
        } else {
            format!(" ({p})")
        }
    };
    match op {
        OpSpec::BeginReservation {
            thread,
            scheduler,
            params,
        } => {
            format!(
                "begin-reservation: {thread} moves to {scheduler}{}",
                with(params)
            )
        }
        OpSpec::EndReservation { thread } => format!("end-reservation: {thread} moves back"),
        OpSpec::SetParams { thread, params } => format!("set-params: {thread}{}", with(params)),
        OpSpec::MoveThread { thread, to, params } => {
            format!("move-thread: {thread} moves to {to}{}", with(params))
        }
        OpSpec::CreateScheduler(s) => {
            let parents: Vec<&str> = s.parents.iter().map(|p| p.name.as_str()).collect();
            format!(
                "create-scheduler: {} [{}] under {}",
                s.name,
                s.policy,
                parents.join(", ")
            )
        }
        OpSpec::DestroyScheduler { name } => format!("destroy-scheduler: {name}"),
        OpSpec::SetDefault { name, move_threads } => {
            format!(
                "set-default: {name}{}",
                if *move_threads {
                    ", moving the old default's threads"
                } else {
                    ""
                }
            )
        }
    }
}
