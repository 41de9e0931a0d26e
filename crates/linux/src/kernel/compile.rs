//! The kernel backend's compiler: a hierarchy file, node by node, onto
//! Linux's own scheduling mechanisms, with the guarantee each mapped node
//! really gets and the admission both hsched and the kernel apply. Pure:
//! no system call; [`KernelModel`] carries what it needs of the machine.
//! The mapping rules and their justification are in the module
//! documentation of [`crate::kernel`].

use hsched_config::{Hierarchy, SchedulerSpec, ThreadSpec};
use hsched_core::{Duration, Params};
use hsched_guarantee::{satisfies, Guarantee};
use hsched_policies::realrate::{child_spec, RealRateConfig, Spec};
use std::collections::BTreeMap;
use std::fmt;

/// What the compiler knows of the kernel that will enforce the plan.
#[derive(Clone, Debug, PartialEq)]
pub struct KernelModel {
    /// CPUs of the root domain the deadline servers are scheduled on
    /// (global EDF across them) while the run does not partition it.
    pub root_domain: usize,
    /// The online CPUs (what the root domain spans).
    pub online: Vec<usize>,
    /// Whether the run can split the root domain with exclusive cpusets
    /// (the cgroup-v1 `cpuset` controller is mounted): the roots of a file
    /// on disjoint CPU sets then get a root domain each.
    pub cpusets: bool,
    /// The scheduler tick (`1 / CONFIG_HZ`): without `HRTICK_DL` a
    /// deadline server's runtime is checked at the tick, so it can run up
    /// to one tick past its budget before it is throttled.
    pub tick: Duration,
    /// `sched_rt_runtime_us` (`None`: -1, no limit).
    pub rt_runtime_us: Option<u64>,
    /// `sched_rt_period_us`.
    pub rt_period_us: u64,
    /// The fair server of each CPU (a deadline server of its own that
    /// keeps the fair class from starving): runtime and period.
    pub fair_server: (Duration, Duration),
    /// Lowest and highest `SCHED_FIFO` priority managed threads may get
    /// (the daemon and its watchdog run above).
    pub fifo_range: (u32, u32),
    /// Where these values come from, for the notes.
    pub source: String,
}

impl KernelModel {
    /// Linux's defaults on `cpus` CPUs with `hz` ticks per second:
    /// `sched_rt_runtime_us` 950000 per 1000000, a fair server of 50 ms per
    /// second on each CPU, managed real-time priorities 1 to 79.
    pub fn defaults(cpus: usize, hz: u32) -> KernelModel {
        KernelModel {
            root_domain: cpus.max(1),
            online: (0..cpus.max(1)).collect(),
            cpusets: true,
            tick: Duration::from_nanos(1_000_000_000 / u64::from(hz.max(1))),
            rt_runtime_us: Some(950_000),
            rt_period_us: 1_000_000,
            fair_server: (Duration::from_millis(50), Duration::from_secs(1)),
            fifo_range: (1, 79),
            source: format!("Linux defaults, HZ={hz}"),
        }
    }

    /// The most deadline bandwidth the kernel admits on the root domain,
    /// in CPUs: `m × rt_runtime/rt_period`, less the fair servers'.
    pub fn kernel_limit(&self) -> f64 {
        let m = self.root_domain as f64;
        let rt = self
            .rt_runtime_us
            .map_or(1.0, |r| r as f64 / self.rt_period_us.max(1) as f64);
        m * rt - m * self.fair_server_util()
    }

    fn fair_server_util(&self) -> f64 {
        ratio(self.fair_server.0, self.fair_server.1)
    }

    /// The same kernel with a root domain of `cpus` CPUs (a partition).
    pub fn with_root_domain(&self, cpus: usize) -> KernelModel {
        KernelModel {
            root_domain: cpus.max(1),
            ..self.clone()
        }
    }
}

fn ratio(a: Duration, b: Duration) -> f64 {
    a.as_nanos() as f64 / b.as_nanos().max(1) as f64
}

/// What hsched itself admits under reservation scheduler `s`, in CPUs:
/// a `rez`'s `cap`, a `dl`'s `cap` on each of its `processors`.
pub(super) fn reservation_cap(s: &SchedulerSpec) -> f64 {
    let p = &s.params;
    if s.policy == "realrate" {
        return RealRateConfig::from_params(p).map_or(0.9, |c| c.overload);
    }
    if s.policy == "dl" {
        let m = p.u64("processors").ok().flatten().unwrap_or(1) as f64;
        m * p
            .f64("cap")
            .ok()
            .flatten()
            .unwrap_or(hsched_guarantee::mapping::DEFAULT_DL_CAP)
    } else {
        p.f64("cap")
            .ok()
            .flatten()
            .unwrap_or(hsched_guarantee::mapping::DEFAULT_REZ_CAP)
    }
}

/// A node of the file.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Node {
    /// A scheduler instance.
    Scheduler(String),
    /// A thread.
    Thread(String),
}

impl Node {
    /// The node's name.
    pub fn name(&self) -> &str {
        match self {
            Node::Scheduler(n) | Node::Thread(n) => n,
        }
    }
}

impl fmt::Display for Node {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Node::Scheduler(n) => write!(f, "scheduler `{n}`"),
            Node::Thread(n) => write!(f, "thread `{n}`"),
        }
    }
}

/// The kernel mechanism a node becomes.
#[derive(Clone, Debug, PartialEq)]
pub enum Mechanism {
    /// A `rez` instance: the deadline class itself; each child is a
    /// deadline server.
    DeadlineClass,
    /// A thread under `rez` (or under a reclaiming `join`): `SCHED_DEADLINE`.
    Deadline {
        /// `sched_runtime`: the reservation's amount.
        runtime: Duration,
        /// `sched_deadline`: the period (implicit deadline).
        deadline: Duration,
        /// `sched_period`.
        period: Duration,
        /// `SCHED_FLAG_RECLAIM` (GRUB): a soft reservation.
        reclaim: bool,
    },
    /// A `join` of a reservation and a best-effort parent over one thread:
    /// realised by that thread's reclaiming deadline server.
    ReclaimingJoin,
    /// A `realrate` instance: the deadline class, each child a deadline
    /// server whose runtime the daemon sets from real-rate's controller
    /// (adaptive reservations, [`super::adapt`]).
    AdaptiveClass {
        /// Its overload threshold: the most its servers hold in all.
        overload: f64,
        /// How often the controller runs.
        control_period: Duration,
    },
    /// An `fp` instance: a band of real-time priorities.
    FifoBand {
        /// Lowest `SCHED_FIFO` priority in the band.
        low: u32,
        /// Highest.
        high: u32,
    },
    /// An `fp` instance with no thread of its own to order: Linux's class
    /// order (deadline, real-time, fair) is its priority order.
    ClassOrder,
    /// A thread under `fp`: `SCHED_FIFO`.
    Fifo {
        /// Its priority.
        priority: u32,
    },
    /// A fair-class scheduler (`ts`, `linux24`, `ps`, `limit`): a cpu
    /// cgroup.
    FairGroup {
        /// The cgroup, relative to the run's own cgroup (`a/b`).
        cgroup: String,
        /// `cpu.shares` (1024 is one nice-0 thread).
        shares: u64,
        /// `cpu.cfs_quota_us` / `cpu.cfs_period_us` (`limit`).
        quota: Option<(Duration, Duration)>,
    },
    /// A thread in the fair class.
    Fair {
        /// Its nice value.
        nice: i32,
        /// Its cgroup (empty: the run's own).
        cgroup: String,
    },
}

impl Mechanism {
    /// The scheduling class the node lives in.
    pub fn class(&self) -> &'static str {
        match self {
            Mechanism::DeadlineClass
            | Mechanism::Deadline { .. }
            | Mechanism::ReclaimingJoin
            | Mechanism::AdaptiveClass { .. } => "deadline",
            Mechanism::FifoBand { .. } | Mechanism::Fifo { .. } | Mechanism::ClassOrder => {
                "real-time"
            }
            Mechanism::FairGroup { .. } | Mechanism::Fair { .. } => "fair",
        }
    }
}

impl fmt::Display for Mechanism {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Mechanism::DeadlineClass => {
                f.write_str("SCHED_DEADLINE class (each child a deadline server)")
            }
            Mechanism::Deadline {
                runtime,
                deadline,
                period,
                reclaim,
            } => write!(
                f,
                "SCHED_DEADLINE runtime {runtime} deadline {deadline} period {period}{}",
                if *reclaim { " reclaim" } else { "" }
            ),
            Mechanism::ReclaimingJoin => f.write_str("its thread's reclaiming deadline server"),
            Mechanism::AdaptiveClass {
                overload,
                control_period,
            } => write!(
                f,
                "SCHED_DEADLINE class (each child a deadline server; the daemon sets their runtimes from real-rate's controller every {control_period}, at most {:.1}% in all)",
                overload * 100.0
            ),
            Mechanism::FifoBand { low, high } if low == high => {
                write!(f, "SCHED_FIFO priority {low}")
            }
            Mechanism::FifoBand { low, high } => write!(f, "SCHED_FIFO priorities {low}-{high}"),
            Mechanism::Fifo { priority } => write!(f, "SCHED_FIFO {priority}"),
            Mechanism::ClassOrder => {
                f.write_str("the order of Linux's classes (deadline, real-time, fair)")
            }
            Mechanism::FairGroup {
                cgroup,
                shares,
                quota,
            } => {
                write!(f, "cpu cgroup {cgroup} shares {shares}")?;
                if let Some((q, p)) = quota {
                    write!(f, " quota {q} per {p}")?;
                }
                Ok(())
            }
            Mechanism::Fair { nice, cgroup } => {
                write!(f, "SCHED_OTHER nice {nice}")?;
                if !cgroup.is_empty() {
                    write!(f, " in {cgroup}")?;
                }
                Ok(())
            }
        }
    }
}

/// One mapped node.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeMap {
    /// The node.
    pub node: Node,
    /// What it becomes.
    pub mechanism: Mechanism,
    /// Linux CPUs a thread is pinned to (empty: the whole root domain,
    /// which `SCHED_DEADLINE` requires).
    pub cpus: Vec<usize>,
    /// The partition (an exclusive cpuset, its own root domain) a thread
    /// is moved into, when the plan partitions the machine.
    pub partition: Option<usize>,
    /// What the kernel's enforcement guarantees it.
    pub guarantee: Guarantee,
    /// Why it gets that guarantee (when it is less than the file's).
    pub note: Option<String>,
}

/// A node the kernel backend cannot enforce exactly.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    /// The node.
    pub node: Node,
    /// Why it cannot be mapped.
    pub reason: String,
    /// What would work instead.
    pub instead: String,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}; {}", self.node, self.reason, self.instead)
    }
}

/// A requested guarantee the kernel's enforcement does not provide.
#[derive(Clone, Debug, PartialEq)]
pub struct Shortfall {
    /// The node that asked.
    pub node: Node,
    /// What it asked for.
    pub request: Guarantee,
    /// What the kernel gives it.
    pub received: Guarantee,
    /// Why that is not enough, and what would be.
    pub reason: String,
}

impl fmt::Display for Shortfall {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} asks {} but the kernel's enforcement gives {}: {}",
            self.node, self.request, self.received, self.reason
        )
    }
}

/// The deadline admission: hsched's test and the kernel's, on the same
/// servers.
#[derive(Clone, Debug, PartialEq)]
pub struct Admission {
    /// Each deadline server: thread, utilization (runtime / period).
    pub servers: Vec<(String, f64)>,
    /// Bandwidth other tasks already hold on the root domain, in CPUs
    /// (deadline tasks hsched does not manage, measured at run time).
    pub others: f64,
    /// The kernel's limit on the sum, in CPUs.
    pub kernel_limit: f64,
    /// A refusal naming the thread that crosses a limit, the load and the
    /// limit.
    pub refused: Option<String>,
}

/// The compiled plan.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    /// Mapped nodes: schedulers in file order, then threads.
    pub nodes: Vec<NodeMap>,
    /// Nodes that stop the mapping.
    pub refusals: Vec<Refusal>,
    /// Requested guarantees the kernel does not give.
    pub shortfalls: Vec<Shortfall>,
    /// The deadline admission.
    pub admission: Admission,
    /// The model the guarantees assume, and what differs from the file.
    pub notes: Vec<String>,
    /// What else stops the plan (the file's timed operations).
    pub other: Vec<String>,
    /// The cgroup of each thread under `ps` (its own, weighted by its
    /// share) and its `cpu.shares`.
    pub leaf_groups: Vec<(String, u64)>,
    /// The root domains the run makes with exclusive cpusets, one per root
    /// of the file and one for the online CPUs no root owns; empty when the
    /// deadline servers share the machine's one root domain.
    pub partitions: Vec<Partition>,
}

/// A root domain of its own: an exclusive cpuset.
#[derive(Clone, Debug, PartialEq)]
pub struct Partition {
    /// Its Linux CPUs.
    pub cpus: Vec<usize>,
    /// The file's root it holds (`None`: the CPUs no root owns).
    pub root: Option<String>,
    /// Deadline bandwidth other tasks hold on these CPUs, in CPUs.
    pub others: f64,
}

/// Deadline bandwidth other tasks hold: each task's bandwidth (in CPUs)
/// and the CPUs it may run on (empty: any). A plain number is held on
/// every CPU.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Held(pub Vec<(f64, Vec<usize>)>);

impl From<f64> for Held {
    fn from(u: f64) -> Held {
        Held(if u > 0.0 {
            vec![(u, Vec::new())]
        } else {
            Vec::new()
        })
    }
}

impl Held {
    /// All of it, in CPUs.
    pub fn total(&self) -> f64 {
        // `+ 0.0`: an empty sum of floats is −0.0, which prints so.
        self.0.iter().map(|h| h.0).sum::<f64>() + 0.0
    }

    /// What is held by tasks that may run on one of `cpus`.
    pub fn on(&self, cpus: &[usize]) -> f64 {
        self.0
            .iter()
            .filter(|(_, c)| c.is_empty() || c.iter().any(|x| cpus.contains(x)))
            .map(|h| h.0)
            .sum::<f64>()
            + 0.0
    }
}

impl Partition {
    fn describe(&self) -> String {
        let cpus = crate::cpuset::cpu_list(&self.cpus);
        match &self.root {
            Some(r) => format!("the root domain of `{r}` (CPU {cpus})"),
            None => format!("the root domain of CPU {cpus}"),
        }
    }
}

impl Plan {
    /// Whether every node maps and the deadline admission passes.
    pub fn is_enforceable(&self) -> bool {
        self.refusals.is_empty() && self.admission.refused.is_none() && self.other.is_empty()
    }

    /// Whether it is enforceable and every requested guarantee holds.
    pub fn keeps_promises(&self) -> bool {
        self.is_enforceable() && self.shortfalls.is_empty()
    }

    /// The mapping of `node`.
    pub fn node(&self, node: &Node) -> Option<&NodeMap> {
        self.nodes.iter().find(|n| &n.node == node)
    }

    /// The mapping of thread `name`.
    pub fn thread(&self, name: &str) -> Option<&NodeMap> {
        self.node(&Node::Thread(name.to_string()))
    }

    /// Every reason the plan cannot run, one per line.
    pub fn refusal_text(&self) -> String {
        let mut lines: Vec<String> = self.refusals.iter().map(|r| r.to_string()).collect();
        if let Some(a) = &self.admission.refused {
            lines.push(a.clone());
        }
        lines.extend(self.other.iter().cloned());
        lines.join("\n")
    }
}

/// The children of each scheduler: (child, edge parameters), schedulers
/// and threads in file order.
struct Tree<'h> {
    h: &'h Hierarchy,
    by_name: BTreeMap<&'h str, &'h SchedulerSpec>,
    sched_children: BTreeMap<&'h str, Vec<(&'h SchedulerSpec, &'h Params)>>,
    thread_children: BTreeMap<&'h str, Vec<&'h ThreadSpec>>,
}

impl<'h> Tree<'h> {
    fn new(h: &'h Hierarchy) -> Tree<'h> {
        let mut t = Tree {
            h,
            by_name: BTreeMap::new(),
            sched_children: BTreeMap::new(),
            thread_children: BTreeMap::new(),
        };
        for s in &h.schedulers {
            t.by_name.insert(&s.name, s);
            for p in &s.parents {
                t.sched_children
                    .entry(p.name.as_str())
                    .or_default()
                    .push((s, &p.params));
            }
        }
        for th in &h.threads {
            t.thread_children
                .entry(th.scheduler.as_str())
                .or_default()
                .push(th);
        }
        t
    }
    fn schedulers(&self, name: &str) -> &[(&'h SchedulerSpec, &'h Params)] {
        self.sched_children.get(name).map_or(&[], |v| v.as_slice())
    }
    fn threads(&self, name: &str) -> &[&'h ThreadSpec] {
        self.thread_children.get(name).map_or(&[], |v| v.as_slice())
    }
}

/// An entry of a fixed-priority root's order: its priority path (the
/// priorities from the root down, compared lexicographically, higher
/// first) and what it is.
#[derive(Clone, Debug)]
struct Item<'h> {
    key: Vec<i64>,
    kind: ItemKind<'h>,
}

#[derive(Clone, Debug)]
enum ItemKind<'h> {
    /// A `rez` instance, realised by the deadline class.
    Deadline(&'h SchedulerSpec),
    /// The best-effort parent link of a reclaiming `join`.
    JoinSurplus(&'h SchedulerSpec),
    /// A thread under fixed priority.
    Rt(&'h ThreadSpec),
    /// A fair-class subtree.
    Fair(&'h SchedulerSpec),
}

impl ItemKind<'_> {
    fn rank(&self) -> u8 {
        match self {
            ItemKind::Deadline(_) => 0,
            ItemKind::JoinSurplus(_) => 0,
            ItemKind::Rt(_) => 1,
            ItemKind::Fair(_) => 2,
        }
    }
    fn node(&self) -> Node {
        match self {
            ItemKind::Deadline(s) | ItemKind::JoinSurplus(s) | ItemKind::Fair(s) => {
                Node::Scheduler(s.name.clone())
            }
            ItemKind::Rt(t) => Node::Thread(t.name.clone()),
        }
    }
}

const FAIR_POLICIES: [&str; 4] = ["ts", "linux24", "ps", "limit"];
const USER: &str =
    "what would work: `--enforce user` (the user-space backend enforces every policy)";

struct Compiler<'h> {
    tree: Tree<'h>,
    model: &'h KernelModel,
    /// Linux CPU of HSI processor k.
    cpus: &'h [usize],
    nodes: Vec<NodeMap>,
    refusals: Vec<Refusal>,
    notes: Vec<String>,
    fair_tops: usize,
    leaf_groups: Vec<(String, u64)>,
    /// The root being compiled, and the root of each mapped node.
    cur_root: usize,
    node_root: Vec<usize>,
    /// Whether a root with deadline servers owns fewer CPUs than the root
    /// domain.
    narrow: bool,
    /// Each `dl` of the file: its tick, its processors and its root.
    dl_models: Vec<(String, Duration, usize, usize)>,
}

/// Compiles `h` for the kernel backend. `cpus` are the Linux CPUs the run
/// manages (processor `k` of the file is `cpus[k]`); `others` is the
/// deadline bandwidth already held by tasks hsched does not manage (in
/// CPUs, 0 offline; with their CPUs, so that a partition counts only what
/// is held on its own).
pub fn compile(
    h: &Hierarchy,
    model: &KernelModel,
    cpus: &[usize],
    others: impl Into<Held>,
) -> Plan {
    let others: Held = others.into();
    let mut c = Compiler {
        tree: Tree::new(h),
        model,
        cpus,
        nodes: Vec::new(),
        refusals: Vec::new(),
        notes: Vec::new(),
        fair_tops: 0,
        leaf_groups: Vec::new(),
        cur_root: 0,
        node_root: Vec::new(),
        narrow: false,
        dl_models: Vec::new(),
    };
    let roots: Vec<&SchedulerSpec> = h
        .schedulers
        .iter()
        .filter(|s| s.parents.is_empty())
        .collect();
    for (k, root) in roots.iter().enumerate() {
        c.cur_root = k;
        c.root(root);
    }
    let mut partitions = c.partition(&roots);
    c.uniprocessor_realrate(&partitions);
    for (name, tick, m, root) in std::mem::take(&mut c.dl_models) {
        let domain = partitions
            .get(root)
            .map_or(model.root_domain, |p| p.cpus.len());
        if tick != model.tick || m != domain {
            c.notes.push(format!(
                "note: `{name}` models a tick of {tick} on {m} processor(s); the kernel enforces it with its own, {} on {domain} CPU(s), which the guarantees here assume",
                model.tick
            ));
        }
    }
    for p in &mut partitions {
        p.others = others.on(&p.cpus);
    }
    for t in &h.threads {
        if !c.tree.by_name.contains_key(t.scheduler.as_str()) {
            c.refuse(
                Node::Thread(t.name.clone()),
                format!("its scheduler `{}` is not in the file", t.scheduler),
                "what would work: place it under a scheduler of the file".into(),
            );
        }
    }
    let admission = admit(h, model, &c.nodes, &partitions, others.total());
    c.derive_guarantees(admission.refused.is_none());
    let shortfalls = c.shortfalls();
    let domains = if partitions.is_empty() {
        format!(
            "global EDF over deadline servers on a root domain of {} CPU(s)",
            model.root_domain
        )
    } else {
        format!(
            "EDF over deadline servers in each of {} root domains made with exclusive cpusets ({}; partitioned EDF: a server runs, and is admitted, only in its root's)",
            partitions.len(),
            partitions.iter().map(|p| format!("CPU {}", crate::cpuset::cpu_list(&p.cpus))).collect::<Vec<_>>().join(", ")
        )
    };
    c.notes.insert(
        0,
        format!(
            "note: kernel enforcement model ({}): {domains}, runtime enforced at the tick ({}), deadline limit {:.1}% of one CPU (sched_rt_runtime_us / sched_rt_period_us on every CPU, less each CPU's fair server {} per {})",
            model.source,
            model.tick,
            admission.kernel_limit * 100.0,
            model.fair_server.0,
            model.fair_server.1,
        ),
    );
    if !partitions.is_empty() {
        c.notes.push("note: while the run lasts the kernel does not balance the machine's other tasks across these root domains (the top cpuset's sched_load_balance is off); it is put back when the run ends".into());
    }
    // Schedulers first, then threads, each in file order.
    let order = |n: &Node| match n {
        Node::Scheduler(s) => (0, h.schedulers.iter().position(|x| &x.name == s)),
        Node::Thread(t) => (1, h.threads.iter().position(|x| &x.name == t)),
    };
    c.nodes.sort_by_key(|n| order(&n.node));
    c.refusals.sort_by_key(|r| order(&r.node));
    c.refusals.dedup();
    let other = if h.operations.is_empty() {
        Vec::new()
    } else {
        vec![format!(
            "{} timed operation(s) (the first at {}): they change the hierarchy through the daemon's HSI, which the kernel backend does not run; what would work: `--enforce user`",
            h.operations.len(),
            h.operations[0].at
        )]
    };
    Plan {
        other,
        leaf_groups: c.leaf_groups,
        nodes: c.nodes,
        refusals: c.refusals,
        shortfalls,
        admission,
        notes: c.notes,
        partitions,
    }
}

/// A proportion of `period`, as `realrate` sizes a budget.
pub(super) fn proportion_of(p: f64, period: Duration) -> Duration {
    Duration::from_nanos((period.as_nanos() as f64 * p).round() as u64)
}

/// A child with `params` of `realrate` instance `sched` of `h`: the
/// instance's configuration and what the child asks for (`None` under
/// another policy, or with parameters the policy refuses).
pub(super) fn realrate_child(
    h: &Hierarchy,
    sched: &str,
    params: &Params,
) -> Option<(RealRateConfig, Spec)> {
    let s = h.schedulers.iter().find(|s| s.name == sched)?;
    if s.policy != "realrate" {
        return None;
    }
    let cfg = RealRateConfig::from_params(&s.params).ok()?;
    child_spec(&cfg, params).ok().map(|c| (cfg, c))
}

/// A thread of `h` under a `realrate` instance whose controller sizes it
/// (a real-rate or misc child): the instance's configuration.
pub(super) fn adaptive_child(h: &Hierarchy, t: &ThreadSpec) -> Option<RealRateConfig> {
    realrate_child(h, &t.scheduler, &t.params)
        .filter(|(_, c)| c.class.adaptive())
        .map(|(cfg, _)| cfg)
}

/// The real-time and aperiodic proportions of a `realrate`'s children
/// with `params`, and how many adaptive ones there are (children whose
/// parameters the policy refuses count as neither).
pub(super) fn realrate_tally<'p>(
    cfg: &RealRateConfig,
    params: impl IntoIterator<Item = &'p Params>,
) -> (f64, usize) {
    let (mut fixed, mut n) = (0.0, 0);
    for p in params {
        match child_spec(cfg, p) {
            Ok(c) if c.class.adaptive() => n += 1,
            Ok(c) => fixed += c.proportion.unwrap_or(0.0),
            Err(_) => {}
        }
    }
    (fixed, n)
}

/// The share `realrate` instance `name` of `h` leaves its adaptive
/// children (`overload` less its real-time and aperiodic proportions), and
/// how many they are.
pub(super) fn adaptive_room(h: &Hierarchy, name: &str) -> (f64, usize) {
    let Some(cfg) = h
        .schedulers
        .iter()
        .find(|s| s.name == name)
        .and_then(|s| RealRateConfig::from_params(&s.params).ok())
    else {
        return (0.0, 0);
    };
    let (fixed, n) = realrate_tally(
        &cfg,
        h.threads
            .iter()
            .filter(|t| t.scheduler == name)
            .map(|t| &t.params),
    );
    ((cfg.overload - fixed).max(0.0), n)
}

fn sanitize(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

impl<'h> Compiler<'h> {
    fn refuse(&mut self, node: Node, reason: String, instead: String) {
        self.refusals.push(Refusal {
            node,
            reason,
            instead,
        });
    }

    fn map(&mut self, node: Node, mechanism: Mechanism, cpus: Vec<usize>) {
        self.nodes.push(NodeMap {
            node,
            mechanism,
            cpus,
            partition: None,
            guarantee: Guarantee::Null,
            note: None,
        });
        self.node_root.push(self.cur_root);
    }

    /// The root domains the plan needs: none while every deadline server's
    /// root spans the machine's root domain (or no cpuset controller can
    /// split it); otherwise one per root and one for the online CPUs no
    /// root owns, with every node in its root's and every deadline server
    /// pinned to it (the kernel lets a server's affinity be its root
    /// domain).
    fn partition(&mut self, roots: &[&SchedulerSpec]) -> Vec<Partition> {
        let root_cpus: Vec<Vec<usize>> = roots.iter().map(|r| self.root_cpus(r)).collect();
        let holds_servers = |k: usize| {
            self.nodes
                .iter()
                .zip(&self.node_root)
                .any(|(n, &r)| r == k && matches!(n.mechanism, Mechanism::Deadline { .. }))
        };
        let narrow = (0..roots.len())
            .any(|k| holds_servers(k) && root_cpus[k].len() < self.model.online.len());
        self.narrow = narrow;
        if !narrow || !self.model.cpusets || root_cpus.iter().any(Vec::is_empty) {
            return Vec::new();
        }
        let owned: std::collections::BTreeSet<usize> =
            root_cpus.iter().flatten().copied().collect();
        let rest: Vec<usize> = self
            .model
            .online
            .iter()
            .copied()
            .filter(|c| !owned.contains(c))
            .collect();
        let mut parts: Vec<Partition> = roots
            .iter()
            .zip(&root_cpus)
            .map(|(r, c)| Partition {
                cpus: c.clone(),
                root: Some(r.name.clone()),
                others: 0.0,
            })
            .collect();
        if !rest.is_empty() {
            parts.push(Partition {
                cpus: rest,
                root: None,
                others: 0.0,
            });
        }
        for (n, &r) in self.nodes.iter_mut().zip(&self.node_root) {
            n.partition = Some(r);
            if matches!(n.mechanism, Mechanism::Deadline { .. }) {
                n.cpus = root_cpus[r].clone();
            }
        }
        parts
    }

    /// `realrate` is a uniprocessor scheduler (one parent VP): its servers
    /// need a root domain of one CPU, or the kernel would run its children
    /// in parallel, which the policy never does, and the room its
    /// controller shares out would not bound what global EDF delivers.
    fn uniprocessor_realrate(&mut self, partitions: &[Partition]) {
        let mut wide = Vec::new();
        for (n, &r) in self.nodes.iter().zip(&self.node_root) {
            if let (Node::Scheduler(name), Mechanism::AdaptiveClass { .. }) =
                (&n.node, &n.mechanism)
            {
                let domain = partitions
                    .get(r)
                    .map_or(self.model.root_domain, |p| p.cpus.len());
                if domain > 1 {
                    wide.push((name.clone(), domain));
                }
            }
        }
        let split = if self.model.cpusets {
            ""
        } else {
            " (no cgroup-v1 cpuset controller is mounted here to give a root of one CPU a root domain of its own)"
        };
        for (name, domain) in wide {
            self.refuse(
                Node::Scheduler(name.clone()),
                format!("`realrate` is a uniprocessor scheduler, and its deadline servers would share a root domain of {domain} CPUs, where the kernel runs them in parallel{split}"),
                format!("what would work: give its root one CPU (`cpus = [0]`) on a machine with a cpuset controller, so that it gets a root domain of its own, or {}", &USER[17..]),
            );
        }
    }

    /// The Linux CPUs of a root (all managed ones when it names none).
    fn root_cpus(&self, root: &SchedulerSpec) -> Vec<usize> {
        if root.cpus.is_empty() {
            return self.cpus.to_vec();
        }
        root.cpus
            .iter()
            .filter_map(|&k| self.cpus.get(k).copied())
            .collect()
    }

    fn root(&mut self, root: &'h SchedulerSpec) {
        let cpus = self.root_cpus(root);
        match root.policy.as_str() {
            "fp" => self.fp_root(root, &cpus),
            "rez" | "dl" => self.rez(root, &cpus),
            "realrate" => self.realrate(root),
            p if FAIR_POLICIES.contains(&p) => {
                self.fair_tops += 1;
                self.fair(root, "", 1024, &cpus);
            }
            _ => self.unsupported(root),
        }
    }

    fn unsupported(&mut self, s: &SchedulerSpec) {
        let (reason, instead) = match s.policy.as_str() {
            "best" | "best-rate" => (
                format!(
                    "`{}` runs EDF over deadlines it infers at every wake-up, with no bound on a child's bandwidth (a budget of a whole period or quantum, then a later deadline); a SCHED_DEADLINE server is a bandwidth reservation under admission, so no server parameters give its schedule, and adapting them would need every wake-up and block of its threads in the daemon",
                    s.policy
                ),
                format!("what would work: fixed `rez` reservations sized for the threads, `realrate` (whose controller the kernel backend runs), or {}", &USER[17..]),
            ),
            "coop" => (
                "`coop` answers the threads' coop_poll calls from the daemon, which the kernel cannot do".into(),
                USER.into(),
            ),
            "join" => (
                "a `join` maps only as a soft reservation: a `rez` parent, a best-effort parent and one thread child".into(),
                USER.into(),
            ),
            p if hsched_plugin::is_plugin_name(p) => (
                format!("`{p}` is a WebAssembly plug-in, whose decisions only the daemon can make: mainline Linux cannot run a loaded policy (sched_ext could, and this kernel has none)"),
                USER.into(),
            ),
            p => (format!("no kernel mechanism enforces `{p}` exactly"), USER.into()),
        };
        self.refuse(Node::Scheduler(s.name.clone()), reason, instead);
    }

    /// A fixed-priority root: Linux's classes are themselves a fixed
    /// priority order (deadline, then real-time, then fair), so its
    /// children map when they come in that order.
    fn fp_root(&mut self, root: &'h SchedulerSpec, cpus: &[usize]) {
        let mut items = Vec::new();
        self.flatten_fp(root, &[], &mut items);
        // Highest priority first; a stable sort keeps file order in ties.
        items.sort_by(|a, b| b.key.cmp(&a.key));
        let mut worst_rank = 0u8;
        let mut above: Option<Node> = None;
        let mut fair_seen = false;
        for (i, it) in items.iter().enumerate() {
            let r = it.kind.rank();
            if let ItemKind::JoinSurplus(_) = it.kind {
                continue;
            }
            let tied_other = items.iter().enumerate().any(|(j, o)| {
                j != i
                    && o.key == it.key
                    && o.kind.rank() != r
                    && !matches!(o.kind, ItemKind::JoinSurplus(_))
            });
            if tied_other {
                self.refuse(
                    it.kind.node(),
                    format!(
                        "it shares its priority under `{}` with a node of another kernel class; Linux orders its classes strictly (deadline, real-time, fair)",
                        root.name
                    ),
                    "what would work: distinct priorities".into(),
                );
            } else if r < worst_rank {
                let what = match it.kind {
                    ItemKind::Deadline(_) => {
                        "a deadline reservation always preempts real-time and fair threads in Linux"
                    }
                    _ => "a real-time thread always preempts the fair class in Linux",
                };
                self.refuse(
                    it.kind.node(),
                    format!(
                        "it is below {} under `{}`, but {what}",
                        above.as_ref().map_or_else(String::new, |n| n.to_string()),
                        root.name
                    ),
                    format!(
                        "what would work: give reservations the highest priorities, then real-time threads, then time sharing; or {}",
                        &USER[17..]
                    ),
                );
            } else if r == 2 && fair_seen {
                self.refuse(
                    it.kind.node(),
                    format!(
                        "a second fair-class subtree under `{}`: Linux's fair class has no strict priority between groups",
                        root.name
                    ),
                    format!("what would work: one `ts`/`ps` node at the lowest priority holding both, or {}", &USER[17..]),
                );
            }
            if r > worst_rank {
                worst_rank = r;
                above = Some(it.kind.node());
            }
            fair_seen |= r == 2;
        }
        // Real-time priorities: one per distinct priority path, ties kept.
        let mut keys: Vec<&Vec<i64>> = items
            .iter()
            .filter(|i| matches!(i.kind, ItemKind::Rt(_)))
            .map(|i| &i.key)
            .collect();
        keys.dedup();
        let (lo, hi) = self.model.fifo_range;
        let levels = keys.len() as u32;
        if levels > hi - lo + 1 {
            self.refuse(
                Node::Scheduler(root.name.clone()),
                format!(
                    "its threads need {levels} distinct real-time priorities; managed threads have {} ({lo} to {hi})",
                    hi - lo + 1
                ),
                "what would work: fewer distinct priorities".into(),
            );
            return;
        }
        let prio_of = |key: &Vec<i64>| -> u32 {
            let from_top = keys.iter().position(|k| *k == key).unwrap_or(0) as u32;
            lo + levels.saturating_sub(1) - from_top
        };
        for it in &items {
            match it.kind {
                ItemKind::Rt(t) => self.map(
                    Node::Thread(t.name.clone()),
                    Mechanism::Fifo {
                        priority: prio_of(&it.key),
                    },
                    cpus.to_vec(),
                ),
                ItemKind::Deadline(s) if s.policy == "realrate" => self.realrate(s),
                ItemKind::Deadline(s) => self.rez(s, cpus),
                ItemKind::Fair(s) => {
                    self.fair_tops += 1;
                    self.fair(s, "", 1024, cpus);
                }
                ItemKind::JoinSurplus(_) => {}
            }
        }
        // The fp instances themselves: the band their threads occupy.
        let mut bands: BTreeMap<String, (u32, u32)> = BTreeMap::new();
        for it in &items {
            if let ItemKind::Rt(t) = it.kind {
                let p = prio_of(&it.key);
                let mut s = t.scheduler.as_str();
                loop {
                    let e = bands.entry(s.to_string()).or_insert((p, p));
                    e.0 = e.0.min(p);
                    e.1 = e.1.max(p);
                    match self.tree.by_name.get(s).and_then(|x| x.parents.first()) {
                        Some(parent) if s != root.name => s = parent.name.as_str(),
                        _ => break,
                    }
                }
            }
        }
        let mut fps = vec![root.name.clone()];
        fps.extend(
            items
                .iter()
                .filter_map(|i| match i.kind {
                    ItemKind::Rt(t) => Some(t.scheduler.clone()),
                    _ => None,
                })
                .filter(|s| s != &root.name),
        );
        fps.dedup();
        let mut done = std::collections::BTreeSet::new();
        for s in fps {
            if !done.insert(s.clone()) {
                continue;
            }
            let m = match bands.get(&s) {
                Some(&(low, high)) => Mechanism::FifoBand { low, high },
                None => Mechanism::ClassOrder,
            };
            self.map(Node::Scheduler(s), m, vec![]);
        }
        // Nested fp instances with no thread (only fair or deadline nodes
        // below) still need an entry.
        for s in &self.tree.h.schedulers {
            if s.policy == "fp"
                && !s.parents.is_empty()
                && !self
                    .nodes
                    .iter()
                    .any(|n| n.node == Node::Scheduler(s.name.clone()))
                && !self
                    .refusals
                    .iter()
                    .any(|r| r.node == Node::Scheduler(s.name.clone()))
                && fp_ancestor(&self.tree, s, &root.name)
            {
                self.map(
                    Node::Scheduler(s.name.clone()),
                    Mechanism::ClassOrder,
                    vec![],
                );
            }
        }
    }

    fn flatten_fp(&mut self, fp: &'h SchedulerSpec, key: &[i64], out: &mut Vec<Item<'h>>) {
        let prio = |p: &Params| p.i64("priority").ok().flatten().unwrap_or(0);
        for t in self.tree.threads(&fp.name).to_vec() {
            let mut k = key.to_vec();
            k.push(prio(&t.params));
            out.push(Item {
                key: k,
                kind: ItemKind::Rt(t),
            });
        }
        for (s, params) in self.tree.schedulers(&fp.name).to_vec() {
            let mut k = key.to_vec();
            k.push(prio(params));
            match s.policy.as_str() {
                "fp" if s.parents.len() == 1 => self.flatten_fp(s, &k, out),
                "rez" | "dl" | "realrate" => out.push(Item {
                    key: k,
                    kind: ItemKind::Deadline(s),
                }),
                "join" if s.parents.first().is_some_and(|p| p.name != fp.name) => {
                    // The join is placed under its first parent (a `rez`,
                    // checked there); this link is its surplus.
                    out.push(Item {
                        key: k,
                        kind: ItemKind::JoinSurplus(s),
                    });
                }
                p if FAIR_POLICIES.contains(&p) && s.parents.len() == 1 => out.push(Item {
                    key: k,
                    kind: ItemKind::Fair(s),
                }),
                _ => self.unsupported(s),
            }
        }
    }

    /// A reservation scheduler: every thread child becomes a deadline
    /// server; a soft reservation (`join` over one thread) a reclaiming one.
    fn rez(&mut self, r: &'h SchedulerSpec, _cpus: &[usize]) {
        let variant = r.params.str("variant").ok().flatten().unwrap_or("basic");
        if variant != "basic" {
            self.refuse(
                Node::Scheduler(r.name.clone()),
                format!(
                    "variant `{variant}` corrects budgets for stolen time (Regehr 2001, ch. 11); SCHED_DEADLINE charges a server for interrupts it suffers"
                ),
                format!("what would work: variant `basic`, or {}", &USER[17..]),
            );
            return;
        }
        if r.policy == "dl" {
            // `dl` is the deadline class already; the kernel enforces it
            // with its own tick and root domain, whatever the file models.
            // Compared with the root domain once the plan knows it.
            let tick = r.params.duration("tick").ok().flatten().unwrap_or_default();
            let m = r.params.u64("processors").ok().flatten().unwrap_or(1);
            self.dl_models
                .push((r.name.clone(), tick, m as usize, self.cur_root));
        }
        self.map(
            Node::Scheduler(r.name.clone()),
            Mechanism::DeadlineClass,
            vec![],
        );
        for t in self.tree.threads(&r.name).to_vec() {
            self.server(t, &t.params, false);
        }
        for (s, params) in self.tree.schedulers(&r.name).to_vec() {
            if s.policy == "join" {
                self.join(r, s, params);
            } else {
                self.refuse(
                    Node::Scheduler(s.name.clone()),
                    format!(
                        "a `{}` scheduler inside reservation `{}`: an application scheduler inside a reservation needs hierarchical deadline servers, which mainline Linux does not have",
                        s.policy, r.name
                    ),
                    format!(
                        "what would work: a reservation of its own for each of its threads, or {}",
                        &USER[17..]
                    ),
                );
            }
        }
    }

    /// A real-rate scheduler: every thread child becomes a deadline server
    /// of its proportion × period; the daemon's controller resizes the
    /// adaptive ones (real-rate and misc) while the run lasts.
    fn realrate(&mut self, r: &'h SchedulerSpec) {
        let cfg = match RealRateConfig::from_params(&r.params) {
            Ok(c) => c,
            Err(e) => {
                self.refuse(
                    Node::Scheduler(r.name.clone()),
                    e.to_string(),
                    "what would work: the parameters the realrate page lists".into(),
                );
                return;
            }
        };
        self.map(
            Node::Scheduler(r.name.clone()),
            Mechanism::AdaptiveClass {
                overload: cfg.overload,
                control_period: cfg.control_period,
            },
            vec![],
        );
        for t in self.tree.threads(&r.name).to_vec() {
            match child_spec(&cfg, &t.params) {
                Ok(spec) => {
                    let p = spec.proportion.unwrap_or(cfg.initial.max(cfg.floor));
                    self.server_of(t, proportion_of(p, spec.period), spec.period, false);
                }
                Err(e) => self.refuse(
                    Node::Thread(t.name.clone()),
                    e.to_string(),
                    "what would work: the child parameters the realrate page lists".into(),
                ),
            }
        }
        for (s, _) in self.tree.schedulers(&r.name).to_vec() {
            self.refuse(
                Node::Scheduler(s.name.clone()),
                format!(
                    "a `{}` scheduler inside real-rate scheduler `{}`: its reservation would need hierarchical deadline servers, which mainline Linux does not have",
                    s.policy, r.name
                ),
                format!("what would work: threads directly under `{}`, or {}", r.name, &USER[17..]),
            );
        }
    }

    fn join(&mut self, r: &'h SchedulerSpec, j: &'h SchedulerSpec, params: &'h Params) {
        let threads = self.tree.threads(&j.name).to_vec();
        let scheds = self.tree.schedulers(&j.name).to_vec();
        let first_is_rez = j.parents.first().is_some_and(|p| p.name == r.name);
        let mut wrong = Vec::new();
        if !first_is_rez {
            wrong.push(format!("its first parent is not `{}`", r.name));
        }
        if j.parents.len() > 2 {
            wrong.push(format!("it has {} parents", j.parents.len()));
        }
        if threads.len() != 1 || !scheds.is_empty() {
            wrong.push(format!(
                "it schedules {} thread(s) and {} scheduler(s): an application scheduler inside a reservation needs hierarchical deadline servers, which mainline Linux does not have",
                threads.len(),
                scheds.len()
            ));
        }
        if !wrong.is_empty() {
            self.refuse(
                Node::Scheduler(j.name.clone()),
                format!(
                    "a join maps only as a soft reservation of one thread (first parent a `rez`, at most one best-effort parent), and {}",
                    wrong.join("; ")
                ),
                format!("what would work: one join per thread, or {}", &USER[17..]),
            );
            return;
        }
        self.map(
            Node::Scheduler(j.name.clone()),
            Mechanism::ReclaimingJoin,
            vec![],
        );
        let soft = j.parents.len() == 2;
        self.server(threads[0], params, soft);
        if soft {
            self.notes.push(format!(
                "note: `{}`'s surplus comes from deadline bandwidth other servers leave unused (SCHED_FLAG_RECLAIM, GRUB), not from its parent `{}`; its guarantee is the reservation's lower bound",
                j.name, j.parents[1].name
            ));
        }
    }

    fn server(&mut self, t: &'h ThreadSpec, params: &Params, reclaim: bool) {
        let amount = params.duration("amount").ok().flatten();
        let period = params.duration("period").ok().flatten();
        match (amount, period) {
            (Some(a), Some(p)) if a.as_nanos() > 0 && a <= p => self.server_of(t, a, p, reclaim),
            _ => self.refuse(
                Node::Thread(t.name.clone()),
                "a deadline server needs an `amount` and a `period` (0 < amount ≤ period)".into(),
                "what would work: give the thread `amount` and `period`".into(),
            ),
        }
    }

    /// Thread `t` as a deadline server of `a` every `p`.
    fn server_of(&mut self, t: &'h ThreadSpec, a: Duration, p: Duration, reclaim: bool) {
        // The kernel takes runtimes of at least 1 µs (and periods
        // of at least 100 µs by default; sched_deadline_period_min_us).
        if a < Duration::from_micros(1) || p < Duration::from_micros(100) {
            self.refuse(
                Node::Thread(t.name.clone()),
                format!("SCHED_DEADLINE takes runtimes of at least 1us and periods of at least 100us; this one asks {a} per {p}"),
                "what would work: a longer period".into(),
            );
            return;
        }
        self.map(
            Node::Thread(t.name.clone()),
            Mechanism::Deadline {
                runtime: a,
                deadline: p,
                period: p,
                reclaim,
            },
            vec![],
        );
    }

    /// A fair-class scheduler: a cpu cgroup holding its children.
    fn fair(&mut self, s: &'h SchedulerSpec, parent: &str, shares: u64, cpus: &[usize]) {
        let cg = if parent.is_empty() {
            format!("s-{}", sanitize(&s.name))
        } else {
            format!("{parent}/s-{}", sanitize(&s.name))
        };
        let quota = if s.policy == "limit" {
            match (
                s.params.duration("amount").ok().flatten(),
                s.params.duration("period").ok().flatten(),
            ) {
                (Some(a), Some(p))
                    if a >= Duration::from_millis(1)
                        && p >= Duration::from_millis(1)
                        && p <= Duration::from_secs(1) =>
                {
                    Some((a, p))
                }
                _ => {
                    self.refuse(
                        Node::Scheduler(s.name.clone()),
                        "cgroup bandwidth (cpu.cfs_quota_us / cpu.cfs_period_us) needs an amount of at least 1ms and a period of 1ms to 1s".into(),
                        "what would work: `amount` and `period` in that range".into(),
                    );
                    return;
                }
            }
        } else {
            None
        };
        self.map(
            Node::Scheduler(s.name.clone()),
            Mechanism::FairGroup {
                cgroup: cg.clone(),
                shares,
                quota,
            },
            vec![],
        );
        let ps = s.policy == "ps";
        let threads = self.tree.threads(&s.name).to_vec();
        let scheds = self.tree.schedulers(&s.name).to_vec();
        // Under `ps` every child gets a cgroup weighted by its share.
        let share = |p: &Params| p.f64("share").ok().flatten().unwrap_or(1.0);
        let total: f64 = threads
            .iter()
            .map(|t| share(&t.params))
            .chain(scheds.iter().map(|(_, p)| share(p)))
            .sum::<f64>()
            .max(f64::MIN_POSITIVE);
        let n = (threads.len() + scheds.len()).max(1) as f64;
        let weight = |p: &Params| -> u64 {
            // The mean child weighs 1024, as a nice-0 thread does.
            ((share(p) / total * n * 1024.0).round() as u64).clamp(2, 262_144)
        };
        let warped = |p: &Params| {
            p.duration("warp")
                .ok()
                .flatten()
                .is_some_and(|w| w.as_nanos() > 0)
        };
        for t in threads {
            if ps && warped(&t.params) {
                self.refuse(
                    Node::Thread(t.name.clone()),
                    "`warp` has no counterpart in the fair class's weights".into(),
                    format!("what would work: no warp, or {}", &USER[17..]),
                );
                continue;
            }
            let (nice, cgroup) = if ps {
                let leaf = format!("{cg}/t-{}", sanitize(&t.name));
                self.leaf_groups.push((leaf.clone(), weight(&t.params)));
                (0, leaf)
            } else if s.policy == "ts" {
                let p = t.params.i64("priority").ok().flatten().unwrap_or(8);
                ((8 - p).clamp(-20, 19) as i32, cg.clone())
            } else {
                (0, cg.clone())
            };
            self.map(
                Node::Thread(t.name.clone()),
                Mechanism::Fair { nice, cgroup },
                cpus.to_vec(),
            );
        }
        for (c, p) in scheds {
            if c.policy == "join" && c.parents.first().is_some_and(|f| f.name != s.name) {
                // Its surplus link; the join maps under its first parent.
                continue;
            }
            if !FAIR_POLICIES.contains(&c.policy.as_str()) || c.parents.len() != 1 {
                let reason = if matches!(c.policy.as_str(), "fp" | "rez" | "dl") {
                    format!(
                        "a `{}` scheduler inside the fair-class scheduler `{}`: real-time and deadline threads would escape its share",
                        c.policy, s.name
                    )
                } else {
                    format!("a `{}` scheduler inside the fair class", c.policy)
                };
                if matches!(c.policy.as_str(), "fp" | "rez" | "dl") {
                    self.refuse(Node::Scheduler(c.name.clone()), reason, USER.into());
                } else {
                    self.unsupported(c);
                }
                continue;
            }
            if ps && warped(p) {
                self.refuse(
                    Node::Scheduler(c.name.clone()),
                    "`warp` has no counterpart in the fair class's weights".into(),
                    format!("what would work: no warp, or {}", &USER[17..]),
                );
                continue;
            }
            let w = if ps { weight(p) } else { 1024 };
            self.fair(c, &cg, w, cpus);
        }
    }

    /// Fills in what the kernel guarantees each mapped node (see the
    /// module documentation of [`crate::kernel`]).
    fn derive_guarantees(&mut self, admitted: bool) {
        for n in &mut self.nodes {
            if let Mechanism::Fair { cgroup, .. } = &n.mechanism {
                if let Some((_, w)) = self.leaf_groups.iter().find(|g| &g.0 == cgroup) {
                    n.note = Some(format!(
                        "a cgroup of its own, cpu.shares {w}: its parent's share among its siblings"
                    ));
                }
            }
        }
        let tick = self.model.tick;
        let mut joins: Vec<(String, Guarantee)> = Vec::new();
        for n in &mut self.nodes {
            if let (
                Node::Thread(name),
                Mechanism::Deadline {
                    runtime,
                    period,
                    reclaim,
                    ..
                },
            ) = (&n.node, &n.mechanism)
            {
                if !admitted {
                    n.note = Some("not admitted: no guarantee".into());
                    continue;
                }
                let spec = self.tree.h.threads.iter().find(|t| &t.name == name);
                if let Some(cfg) = spec.and_then(|t| adaptive_child(self.tree.h, t)) {
                    n.note = Some(format!(
                        "its runtime, {runtime} every {period} at first, is what real-rate's controller makes of its progress every {} (Steere et al. 1998, §3.3): no guarantee (NULL), as under `realrate` itself",
                        cfg.control_period
                    ));
                    continue;
                }
                if *runtime <= tick {
                    n.note = Some(format!(
                        "its runtime {runtime} is not longer than the tick ({tick}): a server that overran by a tick may get nothing in a period; an amount above {tick} gives amount − {tick} per period"
                    ));
                    continue;
                }
                let amount = Duration::from_nanos(runtime.as_nanos() - tick.as_nanos());
                let g = if *reclaim {
                    Guarantee::ResBS {
                        amount,
                        period: *period,
                    }
                } else {
                    Guarantee::ResBH {
                        amount,
                        period: *period,
                    }
                };
                n.guarantee = g;
                n.note = Some(format!(
                    "{runtime} every {period} less one tick ({tick}): the server may have overrun its previous budget by up to a tick, which the kernel takes back from this one"
                ));
                if *reclaim {
                    if let Some(j) = self.tree.h.threads.iter().find(|t| &t.name == name) {
                        joins.push((j.scheduler.clone(), g));
                    }
                }
            }
        }
        for (j, g) in joins {
            if let Some(n) = self
                .nodes
                .iter_mut()
                .find(|n| n.node == Node::Scheduler(j.clone()))
            {
                n.guarantee = g;
            }
        }
        if self.fair_tops > 0 {
            self.notes.push(
                "note: fair-class nodes share their CPUs with every other fair task of the machine (their cgroups compete with the rest by cpu.shares) and get no guarantee (NULL)".into(),
            );
        }
        if self
            .nodes
            .iter()
            .any(|n| matches!(n.mechanism, Mechanism::Fifo { .. }))
        {
            self.notes.push(
                "note: real-time threads get no guarantee (NULL): deadline servers preempt them, and the kernel throttles real-time tasks beyond sched_rt_runtime_us".into(),
            );
        }
        if self
            .nodes
            .iter()
            .any(|n| matches!(n.mechanism, Mechanism::Deadline { .. }))
            && self.narrow
            && self.nodes.iter().all(|n| n.partition.is_none())
        {
            self.notes.push(format!(
                "note: deadline servers run on every CPU of the root domain ({} CPUs; SCHED_DEADLINE refuses a narrower affinity), not only on their root's{}",
                self.model.root_domain,
                if self.model.cpusets { "" } else { " (no cgroup-v1 cpuset controller is mounted to give the file's roots root domains of their own)" }
            ));
        }
    }

    fn shortfalls(&self) -> Vec<Shortfall> {
        let mut out = Vec::new();
        let tick = self.model.tick;
        let asks = self
            .tree
            .h
            .schedulers
            .iter()
            .map(|s| (Node::Scheduler(s.name.clone()), s.guarantee.as_deref()))
            .chain(
                self.tree
                    .h
                    .threads
                    .iter()
                    .map(|t| (Node::Thread(t.name.clone()), t.guarantee.as_deref())),
            );
        for (node, ask) in asks {
            let Some(Ok(request)) = ask.map(str::parse::<Guarantee>) else {
                continue;
            };
            let Some(m) = self.nodes.iter().find(|n| n.node == node) else {
                continue;
            };
            if let Err(e) = satisfies(&m.guarantee, &request) {
                let hint = match request {
                    Guarantee::ResBH { amount, period } | Guarantee::ResBS { amount, period }
                        if amount.as_nanos() + tick.as_nanos() <= period.as_nanos() =>
                    {
                        let need = Duration::from_nanos(amount.as_nanos() + tick.as_nanos());
                        format!(
                            "; what would work: amount {need} per {period} ({:.1}% instead of {:.1}%: the tick's overrun is paid from the budget)",
                            ratio(need, period) * 100.0,
                            ratio(amount, period) * 100.0
                        )
                    }
                    _ => String::new(),
                };
                out.push(Shortfall {
                    node,
                    request,
                    received: m.guarantee,
                    reason: format!("{}{hint}", e.reason),
                });
            }
        }
        out
    }
}

fn fp_ancestor(tree: &Tree<'_>, s: &SchedulerSpec, root: &str) -> bool {
    let mut cur = s;
    for _ in 0..tree.h.schedulers.len() {
        let Some(p) = cur.parents.first() else {
            return false;
        };
        if p.name == root {
            return true;
        }
        match tree.by_name.get(p.name.as_str()) {
            Some(next) if next.policy == "fp" => cur = next,
            _ => return false,
        }
    }
    false
}

/// The deadline admission of the mapped servers: each `rez` instance's
/// own cap (what the simulator admits), the kernel's limit on the root
/// domain, and hsched's schedulability test for global EDF with every
/// server's possible overrun of one tick (Goossens, Funk and Baruah's
/// utilization bound `U ≤ m − (m − 1)·u_max`; on one CPU, EDF's `U ≤ 1`).
/// The first thread, in file order, at which a sum crosses its limit is
/// named with the load and the limit. With `partitions`, each root domain
/// is admitted on its own CPUs (partitioned EDF), beside what other tasks
/// hold there ([`Partition::others`]); `others` is all they hold.
pub fn admit(
    h: &Hierarchy,
    model: &KernelModel,
    nodes: &[NodeMap],
    partitions: &[Partition],
    others: f64,
) -> Admission {
    if partitions.is_empty() {
        return admit_domain(h, model, nodes, None, "the root domain", others);
    }
    let mut all = Admission {
        servers: Vec::new(),
        others,
        kernel_limit: model.kernel_limit(),
        refused: None,
    };
    for (k, p) in partitions.iter().enumerate() {
        let a = admit_domain(
            h,
            &model.with_root_domain(p.cpus.len()),
            nodes,
            Some(k),
            &p.describe(),
            p.others,
        );
        all.servers.extend(a.servers);
        all.refused = all.refused.or(a.refused);
    }
    all
}

/// [`admit`] on one root domain: the servers of `partition` (every one
/// when `None`), on `model.root_domain` CPUs, named `label` in refusals.
fn admit_domain(
    h: &Hierarchy,
    model: &KernelModel,
    nodes: &[NodeMap],
    partition: Option<usize>,
    label: &str,
    others: f64,
) -> Admission {
    let mut servers = Vec::new();
    let mut refused = None;
    let kernel_limit = model.kernel_limit();
    let m = model.root_domain as f64;
    let tick = model.tick.as_nanos() as f64;
    let fs = model.fair_server;
    // Every CPU's fair server, with its own tick of overrun.
    let fs_inflated = ((fs.0.as_nanos() as f64 + tick) / fs.1.as_nanos().max(1) as f64).min(1.0);
    let mut sum = others;
    let mut sum_inflated = others + m * fs_inflated;
    let mut max_inflated = fs_inflated;
    let mut per_rez: BTreeMap<&str, f64> = BTreeMap::new();
    // A `realrate` whose servers crossed a bound, the bound, and whether
    // it was the one that counts the ticks' overruns.
    let mut tight: Option<(String, f64, bool)> = None;
    // The overrun test protects guarantees: it applies where a server
    // promises something (every one but `realrate`'s adaptive servers) or
    // another program's deadline tasks run.
    let promising = others > 0.0
        || h.threads.iter().any(|t| {
            adaptive_child(h, t).is_none()
                && nodes.iter().any(|n| {
                    n.node == Node::Thread(t.name.clone())
                        && matches!(n.mechanism, Mechanism::Deadline { .. })
                        && (partition.is_none() || n.partition == partition)
                })
        });
    for t in &h.threads {
        let Some(NodeMap {
            mechanism: Mechanism::Deadline {
                runtime, period, ..
            },
            ..
        }) = nodes.iter().find(|n| {
            n.node == Node::Thread(t.name.clone())
                && (partition.is_none() || n.partition == partition)
        })
        else {
            continue;
        };
        let overrun = tick / period.as_nanos().max(1) as f64;
        let (u, ui) = match adaptive_child(h, t) {
            // The controller may hand any of a `realrate`'s adaptive
            // servers all of the room its real-time children leave, and
            // all of them together no more: each counts its part of the
            // room, and may be as large as the whole.
            Some(_) => {
                let (room, n) = adaptive_room(h, &t.scheduler);
                max_inflated = max_inflated.max((room + overrun).min(1.0));
                (room / n.max(1) as f64, room / n.max(1) as f64 + overrun)
            }
            None => {
                let ui = (ratio(*runtime, *period) + overrun).min(1.0);
                max_inflated = max_inflated.max(ui);
                (ratio(*runtime, *period), ui)
            }
        };
        servers.push((t.name.clone(), u));
        sum += u;
        sum_inflated += ui;
        // How a refusal names the server.
        let what = if adaptive_child(h, t).is_some() {
            format!(
                "an adaptive server of `{}`, {period} period, counted at {:.1}%: its part of what the controller shares out",
                t.scheduler,
                u * 100.0
            )
        } else {
            format!("{runtime} every {period}, {:.1}%", u * 100.0)
        };
        // The rez above it (through a join, if any).
        let mut rez = t.scheduler.as_str();
        if let Some(s) = h.schedulers.iter().find(|s| s.name == rez) {
            if s.policy == "join" {
                rez = s.parents.first().map_or(rez, |p| p.name.as_str());
            }
        }
        let cap = h
            .schedulers
            .iter()
            .find(|s| s.name == rez)
            .map_or(hsched_guarantee::mapping::DEFAULT_REZ_CAP, reservation_cap);
        let in_rez = per_rez.entry(rez).or_insert(0.0);
        *in_rez += u;
        if refused.is_some() {
            continue;
        }
        let gfb = if model.root_domain <= 1 {
            1.0
        } else {
            m - (m - 1.0) * max_inflated
        };
        refused = if *in_rez > cap + 1e-9 {
            Some(format!(
                "admission refused: thread `{}` ({what}) brings reservation scheduler `{rez}` to {:.1}%, above its cap of {:.1}%",
                t.name,
                *in_rez * 100.0,
                cap * 100.0
            ))
        } else if sum > kernel_limit + 1e-9 {
            if adaptive_child(h, t).is_some() {
                tight = Some((t.scheduler.clone(), kernel_limit, false));
            }
            Some(format!(
                "admission refused: thread `{}` ({what}) brings the deadline load of {label} to {:.1}% (with {:.1}% held by other tasks), above the kernel's limit of {:.1}% ({} CPU(s) × sched_rt_runtime_us/sched_rt_period_us, less the fair servers)",
                t.name,
                sum * 100.0,
                others * 100.0,
                kernel_limit * 100.0,
                model.root_domain
            ))
        } else if promising && sum_inflated > gfb + 1e-9 {
            if adaptive_child(h, t).is_some() {
                tight = Some((t.scheduler.clone(), gfb, true));
            }
            let test = if model.root_domain <= 1 {
                "the most EDF on one CPU schedules without a miss".to_string()
            } else {
                format!(
                    "the most global EDF on {} CPUs is known to schedule without a miss (m − (m − 1)·u_max with u_max {:.1}%)",
                    model.root_domain,
                    max_inflated * 100.0
                )
            };
            Some(format!(
                "admission refused: thread `{}` ({what}) brings the deadline load of {label}, each server counted with one tick ({}) of overrun and the fair servers included, to {:.1}% (with {:.1}% held by other tasks), above {:.1}%, {test}",
                t.name,
                model.tick,
                sum_inflated * 100.0,
                others * 100.0,
                gfb * 100.0,
            ))
        } else {
            None
        };
    }
    if let (Some(r), Some((name, bound, overrun))) = (refused.as_mut(), tight) {
        let (room, _) = adaptive_room(h, &name);
        let cap = h
            .schedulers
            .iter()
            .find(|s| s.name == name)
            .map_or(0.0, reservation_cap);
        let load = if overrun { sum_inflated } else { sum };
        let fits = cap - (load - bound);
        if fits > cap - room {
            r.push_str(&format!(
                "; what would work: `overload` of at most {:.1}% on `{name}`{}",
                (fits * 1000.0 + 1e-6).floor() / 10.0,
                if overrun {
                    ", or longer periods for its children (each of its servers is counted with a tick of overrun)"
                } else {
                    ""
                }
            ));
        }
    }
    Admission {
        servers,
        others,
        kernel_limit,
        refused,
    }
}

/// The kernel's limit and the global-EDF test of [`admit`] on `servers`
/// (runtime, period) beside `others` CPUs of deadline bandwidth: for a
/// server added while the run goes on (a `[[rule]]`). The test with a
/// tick of overrun per server applies when `promising` (some server, or
/// another program's task, has a guarantee to keep).
///
/// # Errors
/// The load and the limit it crosses.
pub fn admit_servers(
    model: &KernelModel,
    servers: &[(Duration, Duration)],
    others: f64,
    promising: bool,
) -> Result<(), String> {
    let m = model.root_domain as f64;
    let tick = model.tick.as_nanos() as f64;
    let fs = model.fair_server;
    let fs_inflated = ((fs.0.as_nanos() as f64 + tick) / fs.1.as_nanos().max(1) as f64).min(1.0);
    let sum: f64 = others + servers.iter().map(|&(a, p)| ratio(a, p)).sum::<f64>();
    let inflated: Vec<f64> = servers
        .iter()
        .map(|&(a, p)| ((a.as_nanos() as f64 + tick) / p.as_nanos().max(1) as f64).min(1.0))
        .collect();
    let max = inflated.iter().copied().fold(fs_inflated, f64::max);
    let sum_inflated = others + m * fs_inflated + inflated.iter().sum::<f64>();
    let bound = if model.root_domain <= 1 {
        1.0
    } else {
        m - (m - 1.0) * max
    };
    if sum > model.kernel_limit() + 1e-9 {
        return Err(format!(
            "admission refused: the deadline load would be {:.1}%, above the kernel's limit of {:.1}%",
            sum * 100.0,
            model.kernel_limit() * 100.0
        ));
    }
    if (promising || others > 0.0) && sum_inflated > bound + 1e-9 {
        return Err(format!(
            "admission refused: the deadline load with a tick of overrun per server would be {:.1}%, above the {:.1}% EDF schedules without a miss on {} CPU(s)",
            sum_inflated * 100.0,
            bound * 100.0,
            model.root_domain
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Parses `text`, every thread cpu-bound.
    fn parse(text: &str) -> Hierarchy {
        let text = text.replace(
            "[[thread]]\n",
            "[[thread]]\nworkload = { kind = \"cpu-bound\" }\n",
        );
        hsched_config::parse_str(&text, "t.toml").unwrap()
    }

    fn model() -> KernelModel {
        KernelModel::defaults(2, 250)
    }

    const HOME: &str = r#"
[machine]
cpus = 1
[[scheduler]]
name = "FP"
policy = "fp"
[[scheduler]]
name = "RES"
policy = "rez"
parent = "FP"
params = { priority = 3 }
[[scheduler]]
name = "TS"
policy = "ts"
parent = "FP"
params = { priority = 0 }
[[thread]]
name = "A"
scheduler = "RES"
params = { amount = "10ms", period = "33ms" }
guarantee = "RESBH 6 33"
[[thread]]
name = "Hi"
scheduler = "FP"
params = { priority = 2 }
[[thread]]
name = "Lo"
scheduler = "FP"
params = { priority = 1 }
[[thread]]
name = "Lo2"
scheduler = "FP"
params = { priority = 1 }
[[thread]]
name = "B"
scheduler = "TS"
params = { priority = 10 }
"#;

    /// `dl` is the deadline class itself: its threads are servers as under
    /// `rez`, guaranteed with the kernel's tick (a note says the file
    /// models another), and hsched admits up to `processors × cap` under
    /// it.
    #[test]
    fn a_dl_scheduler_maps_to_the_deadline_class_it_models() {
        let with_cap = |cap: &str| {
            parse(&HOME.replace(
                "policy = \"rez\"",
                &format!("policy = \"dl\"\nprocessors = 2\ntick = \"1ms\"\ncap = {cap}"),
            ))
        };
        let p = compile(&with_cap("0.2"), &model(), &[1], 0.0);
        assert!(p.refusals.is_empty(), "{:?}", p.refusals);
        assert!(p.admission.refused.is_none(), "{:?}", p.admission);
        assert_eq!(
            p.node(&Node::Scheduler("RES".into())).unwrap().mechanism,
            Mechanism::DeadlineClass
        );
        assert_eq!(
            p.thread("A").unwrap().mechanism,
            Mechanism::Deadline {
                runtime: Duration::from_millis(10),
                deadline: Duration::from_millis(33),
                period: Duration::from_millis(33),
                reclaim: false
            }
        );
        // The kernel's 4 ms tick, not the file's 1 ms.
        assert_eq!(p.thread("A").unwrap().guarantee.to_string(), "RESBH 6 33");
        assert!(
            p.notes
                .iter()
                .any(|n| n.contains("`RES` models a tick of 1ms on 2 processor(s)")),
            "{:?}",
            p.notes
        );
        // 30.3 % is within 2 × 20 %; 2 × 10 % is refused when the file is
        // read, before anything is compiled.
        let h = with_cap("0.2");
        let res = h.schedulers.iter().find(|s| s.name == "RES").unwrap();
        assert!((reservation_cap(res) - 0.4).abs() < 1e-9);
        let text = HOME.replace(
            "policy = \"rez\"",
            "policy = \"dl\"\nprocessors = 2\ncap = 0.1",
        );
        let why = hsched_config::parse_str(&text, "t.toml")
            .unwrap_err()
            .to_string();
        assert!(why.contains("= 20.0%"), "{why}");
    }

    #[test]
    fn classes_follow_the_fixed_priority_order() {
        let h = parse(HOME);
        let p = compile(&h, &model(), &[1], 0.0);
        assert!(p.refusals.is_empty(), "{:?}", p.refusals);
        assert!(p.admission.refused.is_none());
        let m = |n: &str| p.thread(n).unwrap().mechanism.clone();
        assert_eq!(
            m("A"),
            Mechanism::Deadline {
                runtime: Duration::from_millis(10),
                deadline: Duration::from_millis(33),
                period: Duration::from_millis(33),
                reclaim: false
            }
        );
        // Order kept, ties kept as ties.
        assert_eq!(m("Hi"), Mechanism::Fifo { priority: 2 });
        assert_eq!(m("Lo"), Mechanism::Fifo { priority: 1 });
        assert_eq!(m("Lo2"), Mechanism::Fifo { priority: 1 });
        assert_eq!(
            m("B"),
            Mechanism::Fair {
                nice: -2,
                cgroup: "s-TS".into()
            }
        );
        // A file for one CPU of two: its root gets a root domain of its
        // own (an exclusive cpuset), so its deadline servers are pinned
        // there too, and the other CPU is a partition of its own.
        assert_eq!(p.thread("Hi").unwrap().cpus, vec![1]);
        assert_eq!(p.thread("A").unwrap().cpus, vec![1]);
        assert_eq!(p.thread("A").unwrap().partition, Some(0));
        assert_eq!(
            p.partitions,
            vec![
                Partition {
                    cpus: vec![1],
                    root: Some("FP".into()),
                    others: 0.0
                },
                Partition {
                    cpus: vec![0],
                    root: None,
                    others: 0.0
                }
            ]
        );
        // 10 ms less a 4 ms tick.
        assert_eq!(p.thread("A").unwrap().guarantee.to_string(), "RESBH 6 33");
        assert!(p.shortfalls.is_empty(), "{:?}", p.shortfalls);
        assert!(p.keeps_promises());
        assert_eq!(
            p.node(&Node::Scheduler("FP".into())).unwrap().mechanism,
            Mechanism::FifoBand { low: 1, high: 2 }
        );
    }

    #[test]
    fn a_request_the_tick_eats_into_is_a_shortfall_with_the_amount_that_works() {
        let h = parse(&HOME.replace("RESBH 6 33", "RESBH 10 33"));
        let p = compile(&h, &model(), &[1], 0.0);
        assert!(p.is_enforceable());
        assert_eq!(p.shortfalls.len(), 1);
        let s = p.shortfalls[0].to_string();
        assert!(
            s.contains("thread `A`") && s.contains("amount 14ms per 33ms"),
            "{s}"
        );
        assert!(!p.keeps_promises());
    }

    #[test]
    fn out_of_class_order_and_nested_schedulers_are_refused_by_name() {
        let text = HOME
            .replace("params = { priority = 3 }", "params = { priority = 0 }")
            .replace(
                "name = \"TS\"\npolicy = \"ts\"\nparent = \"FP\"\nparams = { priority = 0 }",
                "name = \"TS\"\npolicy = \"ts\"\nparent = \"FP\"\nparams = { priority = 5 }",
            )
            + r#"
[[scheduler]]
name = "RM"
policy = "fp"
parent = "RES"
params = { amount = "2ms", period = "10ms" }
[[thread]]
name = "R1"
scheduler = "RM"
"#;
        let h = parse(&text);
        let p = compile(&h, &model(), &[1], 0.0);
        let names: Vec<String> = p.refusals.iter().map(|r| r.node.to_string()).collect();
        assert!(names.contains(&"scheduler `RES`".to_string()), "{names:?}");
        assert!(names.contains(&"scheduler `RM`".to_string()), "{names:?}");
        assert!(names.contains(&"thread `Hi`".to_string()), "{names:?}");
        let rm = p.refusals.iter().find(|r| r.node.name() == "RM").unwrap();
        assert!(rm.reason.contains("hierarchical deadline servers"), "{rm}");
        assert!(rm.instead.contains("--enforce user"), "{rm}");
        assert!(!p.is_enforceable());
    }

    #[test]
    fn adaptive_policies_are_refused_with_what_would_work() {
        let h = parse(
            r#"
[[scheduler]]
name = "B"
policy = "best"
[[thread]]
name = "T"
scheduler = "B"
"#,
        );
        let p = compile(&h, &model(), &[0, 1], 0.0);
        assert_eq!(p.refusals.len(), 1);
        assert!(p.refusals[0].reason.contains("deadlines it infers"));
        assert!(p.refusals[0].instead.contains("fixed `rez`"));
        assert!(p.refusals[0].instead.contains("`realrate`"));
    }

    #[test]
    fn proportional_share_and_limit_become_cgroup_weights_and_bandwidth() {
        let h = parse(
            r#"
[[scheduler]]
name = "L"
policy = "limit"
amount = "20ms"
period = "100ms"
[[scheduler]]
name = "PS"
policy = "ps"
parent = "L"
[[thread]]
name = "a"
scheduler = "PS"
params = { share = 0.75 }
[[thread]]
name = "b"
scheduler = "PS"
params = { share = 0.25 }
"#,
        );
        let p = compile(&h, &model(), &[0, 1], 0.0);
        assert!(p.is_enforceable(), "{}", p.refusal_text());
        assert_eq!(
            p.node(&Node::Scheduler("L".into())).unwrap().mechanism,
            Mechanism::FairGroup {
                cgroup: "s-L".into(),
                shares: 1024,
                quota: Some((Duration::from_millis(20), Duration::from_millis(100)))
            }
        );
        assert_eq!(
            p.thread("a").unwrap().mechanism,
            Mechanism::Fair {
                nice: 0,
                cgroup: "s-L/s-PS/t-a".into()
            }
        );
        // Shares in proportion: 0.75 and 0.25 of two children averaging 1024.
        assert_eq!(
            p.leaf_groups,
            vec![
                ("s-L/s-PS/t-a".to_string(), 1536),
                ("s-L/s-PS/t-b".to_string(), 512)
            ]
        );
        assert_eq!(plan_shares(&p, "s-L/s-PS"), Some(1024));
    }

    fn plan_shares(p: &Plan, cg: &str) -> Option<u64> {
        p.nodes.iter().find_map(|n| match &n.mechanism {
            Mechanism::FairGroup { cgroup, shares, .. } if cgroup == cg => Some(*shares),
            _ => None,
        })
    }

    #[test]
    fn soft_reservations_reclaim_and_give_a_soft_guarantee() {
        let h = parse(
            r#"
[[scheduler]]
name = "FP"
policy = "fp"
[[scheduler]]
name = "RES"
policy = "rez"
parent = "FP"
params = { priority = 2 }
[[scheduler]]
name = "J"
policy = "join"
parents = [{ name = "RES", amount = "10ms", period = "20ms" }, { name = "FP", priority = 1 }]
guarantee = "RESBS 5 20"
[[thread]]
name = "T"
scheduler = "J"
"#,
        );
        let p = compile(&h, &model(), &[0, 1], 0.0);
        assert!(p.is_enforceable(), "{}", p.refusal_text());
        assert!(matches!(
            p.thread("T").unwrap().mechanism,
            Mechanism::Deadline { reclaim: true, .. }
        ));
        assert_eq!(
            p.node(&Node::Scheduler("J".into()))
                .unwrap()
                .guarantee
                .to_string(),
            "RESBS 6 20"
        );
        assert!(p.shortfalls.is_empty(), "{:?}", p.shortfalls);
    }

    /// Roots on disjoint CPUs get a root domain each (exclusive cpusets):
    /// partitioned EDF, admitted per CPU set, where one root domain of two
    /// CPUs would need the global-EDF bound.
    #[test]
    fn roots_on_their_own_cpus_are_admitted_as_partitions() {
        let file = |extra: &str| {
            parse(&format!(
                r#"
[machine]
cpus = 2
[[scheduler]]
name = "A"
policy = "rez"
cap = 1.0
cpus = [0]
[[scheduler]]
name = "B"
policy = "rez"
cap = 1.0
cpus = [1]
[[thread]]
name = "T0"
scheduler = "A"
params = {{ amount = "5ms", period = "20ms" }}
[[thread]]
name = "T1"
scheduler = "A"
params = {{ amount = "5ms", period = "20ms" }}
[[thread]]
name = "T2"
scheduler = "B"
params = {{ amount = "10ms", period = "20ms" }}
{extra}"#
            ))
        };
        let p = compile(&file(""), &model(), &[0, 1], 0.0);
        assert!(p.keeps_promises(), "{:?}", p.admission.refused);
        assert_eq!(p.partitions.len(), 2);
        assert_eq!(
            (
                p.thread("T1").unwrap().partition,
                p.thread("T1").unwrap().cpus.clone()
            ),
            (Some(0), vec![0])
        );
        assert_eq!(p.thread("T2").unwrap().cpus, vec![1]);
        assert!(p.notes[0].contains("partitioned EDF"), "{}", p.notes[0]);
        // Each CPU set on its own: a third server on CPU 0 does not fit
        // EDF's bound there, whatever CPU 1 has left.
        let more = "[[thread]]\nname = \"T3\"\nscheduler = \"A\"\nparams = { amount = \"2ms\", period = \"20ms\" }\n";
        let why = compile(&file(more), &model(), &[0, 1], 0.0)
            .admission
            .refused
            .unwrap();
        assert!(
            why.contains("thread `T3`") && why.contains("the root domain of `A` (CPU 0)"),
            "{why}"
        );
        // Another program's deadline task counts where it may run only.
        let held = |cpu: usize| Held(vec![(0.5, vec![cpu])]);
        let why = compile(&file(""), &model(), &[0, 1], held(1))
            .admission
            .refused
            .unwrap();
        assert!(
            why.contains("thread `T2`") && why.contains("(with 50.0% held by other tasks)"),
            "{why}"
        );
        let why = compile(&file(""), &model(), &[0, 1], held(0))
            .admission
            .refused
            .unwrap();
        assert!(why.contains("thread `T0`"), "{why}");
        // Without a cpuset controller the servers share one root domain of
        // two CPUs, where global EDF's bound refuses the same three.
        let flat = KernelModel {
            cpusets: false,
            ..model()
        };
        let g = compile(&file(""), &flat, &[0, 1], 0.0);
        assert!(g.partitions.is_empty());
        assert!(g.thread("T0").unwrap().cpus.is_empty());
        assert!(g
            .admission
            .refused
            .unwrap()
            .contains("global EDF on 2 CPUs"));
        assert!(g
            .notes
            .iter()
            .any(|n| n.contains("no cgroup-v1 cpuset controller")));
    }

    #[test]
    fn admission_names_the_thread_the_load_and_the_limit() {
        let on = |cpus: usize, n: usize, amount: &str| {
            let mut text = format!(
                "[machine]\ncpus = {cpus}\n[[scheduler]]\nname = \"R\"\npolicy = \"rez\"\ncap = 1.0\n",
            );
            for i in 0..n {
                text.push_str(&format!(
                    "[[thread]]\nname = \"T{i}\"\nscheduler = \"R\"\nparams = {{ amount = \"{amount}\", period = \"10ms\" }}\n"
                ));
            }
            parse(&text)
        };
        let servers = |n: usize, amount: &str| on(2, n, amount);
        // Two CPUs: 3 × 30 % is well within the kernel's 180 %, but with a
        // tick of overrun each server counts 70 %: beyond what global EDF
        // is known to schedule.
        let p = compile(&servers(3, "3ms"), &model(), &[0, 1], 0.0);
        let why = p.admission.refused.clone().unwrap();
        assert!(
            why.contains("thread `T1`") && why.contains("global EDF"),
            "{why}"
        );
        // One CPU: EDF's bound, the same servers with their ticks.
        let p1 = compile(&on(1, 2, "4ms"), &KernelModel::defaults(1, 250), &[0], 0.0);
        let why = p1.admission.refused.unwrap();
        assert!(
            why.contains("thread `T1`") && why.contains("165.4%") && why.contains("EDF on one CPU"),
            "{why}"
        );
        // Others' bandwidth counts.
        let p2 = compile(&servers(2, "2ms"), &model(), &[0, 1], 1.5);
        let why = p2.admission.refused.unwrap();
        // The same tests for a server added at run time.
        let ms = Duration::from_millis;
        assert!(admit_servers(&model(), &[(ms(3), ms(10))], 0.0, true).is_ok());
        let e = admit_servers(&model(), &[(ms(3), ms(10)); 3], 0.0, true).unwrap_err();
        assert!(e.contains("220.8%") && e.contains("130.0%"), "{e}");
        assert!(admit_servers(&model(), &[(ms(2), ms(10))], 1.7, true)
            .unwrap_err()
            .contains("kernel's limit"));
        assert!(
            why.contains("thread `T0`") && why.contains("150.0% held by other tasks"),
            "{why}"
        );
    }

    const REALRATE: &str = r#"
[machine]
cpus = 1
[[scheduler]]
name = "rr"
policy = "realrate"
cpus = [0]
overload = 0.6
default_period = "60ms"
[[thread]]
name = "video"
scheduler = "rr"
params = { proportion = 0.2, period = "40ms" }
[[thread]]
name = "sink"
scheduler = "rr"
[[thread]]
name = "hog"
scheduler = "rr"
"#;

    /// `realrate`'s children are deadline servers: a real-time one keeps
    /// its reservation's guarantee, the adaptive ones start at `initial`
    /// and promise nothing; admission holds the whole overload threshold,
    /// each server with a tick of overrun.
    #[test]
    fn realrate_maps_to_adaptive_deadline_servers_admitted_at_its_threshold() {
        let p = compile(&parse(REALRATE), &model(), &[1], 0.0);
        assert!(p.is_enforceable(), "{}", p.refusal_text());
        assert!(matches!(
            p.node(&Node::Scheduler("rr".into())).unwrap().mechanism,
            Mechanism::AdaptiveClass { overload, .. } if overload == 0.6
        ));
        let ms = Duration::from_millis;
        let server = |runtime, period| Mechanism::Deadline {
            runtime,
            deadline: period,
            period,
            reclaim: false,
        };
        assert_eq!(p.thread("video").unwrap().mechanism, server(ms(8), ms(40)));
        assert_eq!(
            p.thread("video").unwrap().guarantee.to_string(),
            "RESBH 4 40"
        );
        assert_eq!(p.thread("sink").unwrap().mechanism, server(ms(3), ms(60)));
        assert_eq!(p.thread("sink").unwrap().guarantee, Guarantee::Null);
        let sum: f64 = p.admission.servers.iter().map(|s| s.1).sum();
        assert!((sum - 0.6).abs() < 1e-9, "{:?}", p.admission.servers);
        // A threshold the tick's overruns do not leave room for is refused,
        // with the threshold that would fit.
        let tight = compile(
            &parse(&REALRATE.replace("overload = 0.6", "overload = 0.8")),
            &model(),
            &[1],
            0.0,
        );
        let why = tight.admission.refused.unwrap();
        assert!(
            why.contains("thread `hog`") && why.contains("`overload` of at most 71.2% on `rr`"),
            "{why}"
        );
    }

    /// The overrun test protects guarantees: adaptive servers alone (which
    /// promise nothing) are held to the kernel's limit, but beside a
    /// reservation, or another program's deadline task, every server
    /// counts its tick.
    #[test]
    fn adaptive_servers_alone_are_admitted_by_the_kernels_limit() {
        let alone = REALRATE
            .replace("overload = 0.6", "overload = 0.9")
            .replace("params = { proportion = 0.2, period = \"40ms\" }\n", "");
        let p = compile(&parse(&alone), &model(), &[1], 0.0);
        assert!(p.is_enforceable(), "{}", p.refusal_text());
        let alone85 = alone.replace("overload = 0.9", "overload = 0.85");
        assert!(compile(&parse(&alone85), &model(), &[1], 0.0).is_enforceable());
        let held = compile(
            &parse(&alone85),
            &model(),
            &[1],
            Held(vec![(0.01, vec![1])]),
        );
        let why = held.admission.refused.unwrap();
        assert!(why.contains("one tick (4ms) of overrun"), "{why}");
        let beside = compile(
            &parse(&REALRATE.replace("overload = 0.6", "overload = 0.9")),
            &model(),
            &[1],
            0.0,
        );
        assert!(beside.admission.refused.is_some(), "{:?}", beside.admission);
        // Above the kernel's own limit, promise or not.
        let over = compile(
            &parse(&alone.replace("overload = 0.9", "overload = 0.95")),
            &model(),
            &[1],
            0.0,
        );
        let why = over.admission.refused.unwrap();
        assert!(
            why.contains("kernel's limit") && why.contains("`overload` of at most 90.0% on `rr`"),
            "{why}"
        );
    }

    /// A `realrate` on a root domain of several CPUs, and a scheduler
    /// inside one, are refused.
    #[test]
    fn realrate_needs_a_root_domain_of_one_cpu_and_threads_as_children() {
        let wide = REALRATE
            .replace("cpus = 1", "cpus = 2")
            .replace("cpus = [0]", "");
        let p = compile(&parse(&wide), &model(), &[0, 1], 0.0);
        let why = p.refusal_text();
        assert!(
            why.contains("scheduler `rr`")
                && why.contains("uniprocessor")
                && why.contains("2 CPUs"),
            "{why}"
        );
        let mut bare = model();
        bare.cpusets = false;
        let p = compile(&parse(REALRATE), &bare, &[1], 0.0);
        assert!(
            p.refusal_text().contains("no cgroup-v1 cpuset controller"),
            "{}",
            p.refusal_text()
        );
        let nested =
            format!("{REALRATE}[[scheduler]]\nname = \"ts\"\npolicy = \"ts\"\nparent = \"rr\"\n");
        let p = compile(&parse(&nested), &model(), &[1], 0.0);
        assert!(
            p.refusal_text()
                .contains("scheduler `ts`: a `ts` scheduler inside real-rate scheduler `rr`"),
            "{}",
            p.refusal_text()
        );
    }
}
