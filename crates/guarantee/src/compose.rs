//! The composition check (Regehr 2001, §5.1.2, §5.3.1): does a hierarchy give
//! every scheduler and thread a guarantee acceptable to it?
//!
//! "A hierarchy of schedulers and threads composes correctly if and only if
//! (1) each scheduler in the hierarchy receives a guarantee that is
//! acceptable to it and (2) each application thread receives a guarantee
//! that is acceptable to it." The check starts at the root, where the top
//! supplies `ALL` on each processor, and walks towards the leaves in
//! topological order (the hierarchy may be a DAG through join schedulers).
//! At each scheduler instance it asks the policy's [`Mapping`] whether the
//! received guarantee is acceptable (directly or through the rewrite rules
//! of Table 5.2) and what each child gets; at each thread — and at each
//! instance that states the guarantee it needs — it checks the received
//! guarantee against that request with [`crate::convert::satisfies`].
//!
//! Instance names and thread names are separate namespaces, as in the
//! hierarchy file. A uniprocessor scheduler (Rez, Limit) at the root of
//! a multiprocessor receives one `ALL`: a VP uses one processor at a time
//! (§6.3.1); joins, FP, PS and best-effort schedulers may take one VP per
//! processor.
//!
//! The input is an abstract [`Hierarchy`] (the file parser builds it); the
//! output a [`Composition`]: per node what it received, how it used it and
//! what it provided (for a `tree` display, [`Composition::render_tree`]),
//! and a list of typed [`Diagnostic`]s, each naming the path, the guarantee
//! received and what would be acceptable. A failure is reported once, where
//! it happens; nodes below a failed one are marked
//! [`Status::Skipped`] rather than reported again.
//!
//! The walk is linear in the size of the hierarchy (10,000 instances take
//! about 10 ms; see `benches/guarantee.rs` and docs/measurements/guarantee.md).
//!
//! ```
//! use hsched_guarantee::compose::{compose, Hierarchy, ParentSpec, SchedulerSpec, ThreadSpec};
//! let mut h = Hierarchy::new(1);
//! h.add_scheduler(SchedulerSpec::new("desktop", "ts").under(ParentSpec::top()));
//! h.add_scheduler(SchedulerSpec::new("rt", "rez").under(ParentSpec::scheduler("desktop")));
//! let c = compose(&h);
//! assert_eq!(
//!     c.diagnostics[0].to_string().split(';').next().unwrap(),
//!     "rez 'rt' under ts 'desktop' receives NULL"
//! );
//! ```

use std::collections::hash_map::Entry;
use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::fmt::Write as _;
use std::hash::{BuildHasherDefault, Hasher};

use crate::convert::satisfies;
use crate::mapping::{
    ChildRequest, EdgeParams, InstanceParams, Mapping, MappingContext, MappingError, Provision,
    Registry,
};
use crate::types::Guarantee;
use hsched_core::time::Duration;

/// Where a VP comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ParentRef {
    /// The top of the hierarchy: `ALL` on processor `cpu`, or on every
    /// processor (one VP each) when `cpu` is `None`.
    Top {
        /// The processor.
        cpu: Option<u32>,
    },
    /// A scheduler instance, by name.
    Scheduler(String),
}

/// One parent edge (one VP) of a node, with the parameters the parent keeps
/// for it.
#[derive(Clone, Debug, PartialEq)]
pub struct ParentSpec {
    /// The parent.
    pub parent: ParentRef,
    /// Parameters the parent keeps for this child.
    pub params: EdgeParams,
}

impl ParentSpec {
    /// The top, on every processor.
    pub fn top() -> ParentSpec {
        ParentSpec {
            parent: ParentRef::Top { cpu: None },
            params: EdgeParams::default(),
        }
    }
    /// The top, on processor `cpu`.
    pub fn top_cpu(cpu: u32) -> ParentSpec {
        ParentSpec {
            parent: ParentRef::Top { cpu: Some(cpu) },
            params: EdgeParams::default(),
        }
    }
    /// The scheduler instance `name`.
    pub fn scheduler(name: &str) -> ParentSpec {
        ParentSpec {
            parent: ParentRef::Scheduler(name.to_string()),
            params: EdgeParams::default(),
        }
    }
    /// With FP priority `priority`.
    pub fn priority(mut self, priority: i64) -> ParentSpec {
        self.params.priority = Some(priority);
        self
    }
    /// With PS share (weight) `share`.
    pub fn share(mut self, share: f64) -> ParentSpec {
        self.params.share = Some(share);
        self
    }
    /// With PS warp `warp`.
    pub fn warp(mut self, warp: Duration) -> ParentSpec {
        self.params.warp = Some(warp);
        self
    }
    /// With a Rez reservation of `amount` per `period`.
    pub fn reservation(mut self, amount: Duration, period: Duration) -> ParentSpec {
        self.params.amount = Some(amount);
        self.params.period = Some(period);
        self
    }
}

/// A scheduler instance.
#[derive(Clone, Debug, PartialEq)]
pub struct SchedulerSpec {
    /// Unique name.
    pub name: String,
    /// Lowercase policy name (`rez`).
    pub policy: String,
    /// Instance parameters.
    pub params: InstanceParams,
    /// Parent edges; more than one only for joins (and multiprocessor
    /// schedulers taking several processors from the top).
    pub parents: Vec<ParentSpec>,
    /// The guarantee this instance asks of its parent, if any (checked
    /// like a thread's request; a reservation scheduler may size the
    /// instance's reservation from it).
    pub request: Option<Guarantee>,
}

impl SchedulerSpec {
    /// An instance of `policy` named `name`, without parents yet.
    pub fn new(name: &str, policy: &str) -> SchedulerSpec {
        SchedulerSpec {
            name: name.to_string(),
            policy: policy.to_string(),
            params: InstanceParams::default(),
            parents: Vec::new(),
            request: None,
        }
    }
    /// With instance parameters.
    pub fn with_params(mut self, params: InstanceParams) -> SchedulerSpec {
        self.params = params;
        self
    }
    /// With one more parent edge.
    pub fn under(mut self, parent: ParentSpec) -> SchedulerSpec {
        self.parents.push(parent);
        self
    }
    /// Asking its parent for `request`.
    pub fn requesting(mut self, request: Guarantee) -> SchedulerSpec {
        self.request = Some(request);
        self
    }
}

/// A thread (a leaf).
#[derive(Clone, Debug, PartialEq)]
pub struct ThreadSpec {
    /// Unique name.
    pub name: String,
    /// Its parent edge.
    pub parent: ParentSpec,
    /// The guarantee it needs, if any (`RESBH 10 33`).
    pub request: Option<Guarantee>,
}

impl ThreadSpec {
    /// A thread named `name` under `parent`, asking for nothing.
    pub fn new(name: &str, parent: ParentSpec) -> ThreadSpec {
        ThreadSpec {
            name: name.to_string(),
            parent,
            request: None,
        }
    }
    /// Asking for `request`.
    pub fn requesting(mut self, request: Guarantee) -> ThreadSpec {
        self.request = Some(request);
        self
    }
}

/// An abstract scheduling hierarchy: scheduler instances, threads and the
/// number of processors. Instance names are unique among instances and
/// thread names among threads (two namespaces, as in the hierarchy file);
/// parents are always instances.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Hierarchy {
    /// Number of processors; the top supplies `ALL` on each, unless
    /// [`Hierarchy::top`] says otherwise.
    pub cpus: u32,
    /// What the top supplies on each processor, by processor number, where
    /// it is less than `ALL` (a processor that loses time to interference
    /// supplies what is left; see [`Hierarchy::with_top`]). Processors past
    /// the end supply `ALL`.
    pub top: Vec<Guarantee>,
    /// Scheduler instances.
    pub schedulers: Vec<SchedulerSpec>,
    /// Threads.
    pub threads: Vec<ThreadSpec>,
}

impl Hierarchy {
    /// An empty hierarchy on `cpus` processors.
    pub fn new(cpus: u32) -> Hierarchy {
        Hierarchy {
            cpus,
            top: Vec::new(),
            schedulers: Vec::new(),
            threads: Vec::new(),
        }
    }
    /// Says that the top supplies `g` on processor `cpu` instead of `ALL`.
    pub fn with_top(&mut self, cpu: u32, g: Guarantee) -> &mut Hierarchy {
        let i = cpu as usize;
        if self.top.len() <= i {
            self.top.resize(i + 1, Guarantee::All);
        }
        self.top[i] = g;
        self
    }
    /// Adds a scheduler instance.
    pub fn add_scheduler(&mut self, s: SchedulerSpec) -> &mut Hierarchy {
        self.schedulers.push(s);
        self
    }
    /// Adds a thread.
    pub fn add_thread(&mut self, t: ThreadSpec) -> &mut Hierarchy {
        self.threads.push(t);
        self
    }
}

/// What a node is.
#[derive(Clone, Debug, PartialEq)]
pub enum NodeKind {
    /// A scheduler instance of this policy.
    Scheduler {
        /// Policy name.
        policy: String,
    },
    /// A thread with its request.
    Thread {
        /// What it asked for.
        request: Option<Guarantee>,
    },
}

/// Where a received guarantee came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// The top, on this processor.
    Top {
        /// The processor.
        cpu: u32,
    },
    /// The node with this index in [`Composition::nodes`].
    Node(usize),
}

/// One received VP.
#[derive(Clone, Debug, PartialEq)]
pub struct Received {
    /// The parent.
    pub from: Source,
    /// The guarantee taken (for a join parent: the option chosen); `None`
    /// when the parent could not provide one.
    pub guarantee: Option<Guarantee>,
}

/// Outcome for one node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// It receives an acceptable guarantee (and, for a thread, what it asked).
    Ok,
    /// Something is wrong here; see the diagnostics.
    Failed,
    /// Not checked: a parent failed or refused it (reported there).
    Skipped,
}

/// The result for one node.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeReport {
    /// Its name.
    pub name: String,
    /// Scheduler or thread.
    pub kind: NodeKind,
    /// One entry per parent VP.
    pub received: Vec<Received>,
    /// The forms it uses (after rewrite rules), one per received VP: for a
    /// scheduler what its mapping accepted, for a thread with a request the
    /// received guarantee rewritten into the requested kind.
    pub accepted: Vec<Guarantee>,
    /// What each child (node index) was given, or why not.
    pub provided: Vec<(usize, Result<Provision, String>)>,
    /// Child node indices, in order.
    pub children: Vec<usize>,
    /// Outcome.
    pub status: Status,
}

impl NodeReport {
    /// `rez 'rt'` (policy and name) or `thread 'player'`.
    pub fn label(&self) -> String {
        match &self.kind {
            NodeKind::Scheduler { policy } => format!("{policy} '{}'", self.name),
            NodeKind::Thread { .. } => format!("thread '{}'", self.name),
        }
    }
}

/// A problem found by the composition check.
#[derive(Clone, Debug, PartialEq)]
pub enum Diagnostic {
    /// The hierarchy has no processors.
    NoCpus,
    /// The hierarchy has more processors than the check handles.
    TooManyCpus {
        /// Processors given.
        cpus: u32,
        /// The most accepted ([`MAX_CPUS`]).
        max: u32,
    },
    /// Two instances, or two threads, share a name; the later one is
    /// ignored.
    DuplicateName {
        /// The label of the later one (`rez 'rt'`, `thread 'a'`).
        node: String,
    },
    /// The policy name is unknown or its parameters are wrong.
    BadScheduler {
        /// Node label.
        node: String,
        /// What is wrong.
        error: MappingError,
    },
    /// A parent edge names no known scheduler.
    UnknownParent {
        /// Node label.
        node: String,
        /// The missing name.
        parent: String,
    },
    /// A parent edge names a thread (and no instance).
    ParentIsThread {
        /// Node label.
        node: String,
        /// The thread.
        parent: String,
    },
    /// A scheduler instance has no parent.
    NoParent {
        /// Node label.
        node: String,
    },
    /// A top edge names a processor the machine does not have.
    BadCpu {
        /// Node label.
        node: String,
        /// The processor.
        cpu: u32,
        /// Processors of the machine.
        cpus: u32,
    },
    /// Several root VPs claim the same processor.
    CpuShared {
        /// The processor.
        cpu: u32,
        /// Labels of the nodes claiming it.
        nodes: Vec<String>,
    },
    /// The hierarchy has a cycle; these nodes are on it or below it.
    Cycle {
        /// Node labels.
        nodes: Vec<String>,
    },
    /// More parent VPs than the policy can use.
    TooManyParents {
        /// Node label.
        node: String,
        /// VPs given.
        count: usize,
        /// VPs usable.
        max: usize,
    },
    /// More children than the policy can schedule.
    TooManyChildren {
        /// Node label.
        node: String,
        /// Children given.
        count: usize,
        /// Children allowed.
        max: usize,
    },
    /// A scheduler receives a guarantee it cannot use.
    Unacceptable {
        /// Node label.
        node: String,
        /// Parent label.
        parent: String,
        /// Path from the top.
        path: String,
        /// What it receives.
        received: Guarantee,
        /// The policy's title (`Rez`).
        policy: String,
        /// What would be acceptable.
        needs: String,
        /// Why the received guarantee is not.
        reason: String,
    },
    /// A scheduler cannot provide a guarantee to a child (admission refused,
    /// missing parameters, priority tie).
    Refused {
        /// Parent label.
        parent: String,
        /// Child label.
        child: String,
        /// Path from the top to the child.
        path: String,
        /// Why.
        reason: String,
    },
    /// A thread (or an instance with a `guarantee`) receives less than it
    /// asked for.
    RequestUnsatisfied {
        /// Node label.
        node: String,
        /// Parent label.
        parent: String,
        /// Path from the top.
        path: String,
        /// What it receives (the best option).
        received: Guarantee,
        /// What it asked for.
        requested: Guarantee,
        /// Why the one does not provide the other.
        reason: String,
    },
}

impl Diagnostic {
    /// A short stable code (`unacceptable`, `refused`, …) for tools.
    pub fn code(&self) -> &'static str {
        match self {
            Diagnostic::NoCpus => "no-cpus",
            Diagnostic::TooManyCpus { .. } => "too-many-cpus",
            Diagnostic::DuplicateName { .. } => "duplicate-name",
            Diagnostic::BadScheduler { .. } => "bad-scheduler",
            Diagnostic::UnknownParent { .. } => "unknown-parent",
            Diagnostic::ParentIsThread { .. } => "parent-is-thread",
            Diagnostic::NoParent { .. } => "no-parent",
            Diagnostic::BadCpu { .. } => "bad-cpu",
            Diagnostic::CpuShared { .. } => "cpu-shared",
            Diagnostic::Cycle { .. } => "cycle",
            Diagnostic::TooManyParents { .. } => "too-many-parents",
            Diagnostic::TooManyChildren { .. } => "too-many-children",
            Diagnostic::Unacceptable { .. } => "unacceptable",
            Diagnostic::Refused { .. } => "refused",
            Diagnostic::RequestUnsatisfied { .. } => "request-unsatisfied",
        }
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Diagnostic::NoCpus => f.write_str("the hierarchy has no processors; give it `cpus = 1` or more"),
            Diagnostic::TooManyCpus { cpus, max } => {
                write!(f, "the hierarchy has {cpus} processors; the check handles at most {max}")
            }
            Diagnostic::DuplicateName { node } => {
                write!(f, "{node}: the name is used twice; instance names and thread names must each be unique")
            }
            Diagnostic::BadScheduler { node, error } => write!(f, "{node}: {error}"),
            Diagnostic::UnknownParent { node, parent } => {
                write!(f, "{node} names parent '{parent}', which is no scheduler instance in the hierarchy")
            }
            Diagnostic::ParentIsThread { node, parent } => {
                write!(f, "{node} names parent '{parent}', which is a thread; only scheduler instances have children")
            }
            Diagnostic::NoParent { node } => {
                write!(f, "{node} has no parent; put it under the top or under another instance")
            }
            Diagnostic::BadCpu { node, cpu, cpus } => {
                write!(f, "{node} is on processor {cpu}, but the machine has {cpus} (0 to {})", cpus.saturating_sub(1))
            }
            Diagnostic::CpuShared { cpu, nodes } => write!(
                f,
                "processor {cpu} is claimed by {}; the top gives each processor to one root VP",
                nodes.join(" and ")
            ),
            Diagnostic::Cycle { nodes } => {
                write!(f, "the hierarchy has a cycle through (or below) {}", nodes.join(", "))
            }
            Diagnostic::TooManyParents { node, count, max } => write!(
                f,
                "{node} receives {count} VPs but can use {max} (a uniprocessor scheduler; combine several parents with a join)"
            ),
            Diagnostic::TooManyChildren { node, count, max } => {
                write!(f, "{node} has {count} children but schedules at most {max}")
            }
            Diagnostic::Unacceptable { node, parent, path, received, policy, needs, reason } => write!(
                f,
                "{node} under {parent} receives {received}; {policy} needs {needs} ({reason}) [path: {path}]"
            ),
            Diagnostic::Refused { parent, child, path, reason } => {
                write!(f, "{parent} cannot provide a guarantee to {child}: {reason} [path: {path}]")
            }
            Diagnostic::RequestUnsatisfied { node, parent, path, received, requested, reason } => write!(
                f,
                "{node} under {parent} receives {received} but requested {requested}: {reason} [path: {path}]"
            ),
        }
    }
}

/// The result of the composition check.
#[derive(Clone, Debug, PartialEq)]
pub struct Composition {
    /// Processors.
    pub cpus: u32,
    /// What the top supplies where it is less than `ALL` ([`Hierarchy::top`]).
    pub top: Vec<Guarantee>,
    /// Scheduler instances (in input order), then threads (in input order).
    pub nodes: Vec<NodeReport>,
    /// Problems, in the order found (root first).
    pub diagnostics: Vec<Diagnostic>,
    first_parent: Vec<Option<Source>>,
}

#[derive(Clone, Copy)]
enum Src {
    Top(Option<u32>),
    Node(usize),
}

/// A small multiplicative hasher for the name index (names are not
/// adversarial here, and lookups dominate the set-up of large hierarchies).
#[derive(Default)]
struct NameHasher(u64);

impl Hasher for NameHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut buf = [0u8; 8];
            buf[..chunk.len()].copy_from_slice(chunk);
            self.0 = (self.0.rotate_left(5) ^ u64::from_le_bytes(buf))
                .wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
        }
    }
}

/// The most processors a hierarchy may have.
pub const MAX_CPUS: u32 = 4096;

/// Checks `h` with the built-in policy mappings ([`Registry::builtin`]).
pub fn compose(h: &Hierarchy) -> Composition {
    compose_with(h, &Registry::builtin())
}

/// Checks `h`, building mappings from `registry`.
pub fn compose_with(h: &Hierarchy, registry: &Registry) -> Composition {
    let ns = h.schedulers.len();
    let n = ns + h.threads.len();
    let mut diags = Vec::new();
    if h.cpus == 0 {
        diags.push(Diagnostic::NoCpus);
    } else if h.cpus > MAX_CPUS {
        diags.push(Diagnostic::TooManyCpus {
            cpus: h.cpus,
            max: MAX_CPUS,
        });
    }
    let name_of = |i: usize| -> &str {
        if i < ns {
            &h.schedulers[i].name
        } else {
            &h.threads[i - ns].name
        }
    };
    let mut nodes: Vec<NodeReport> = (0..n)
        .map(|i| {
            let kind = if i < ns {
                NodeKind::Scheduler {
                    policy: h.schedulers[i].policy.clone(),
                }
            } else {
                NodeKind::Thread {
                    request: h.threads[i - ns].request,
                }
            };
            NodeReport {
                name: name_of(i).to_string(),
                kind,
                received: Vec::new(),
                accepted: Vec::new(),
                provided: Vec::new(),
                children: Vec::new(),
                status: Status::Ok,
            }
        })
        .collect();
    if !diags.is_empty() {
        for node in &mut nodes {
            node.status = Status::Skipped;
        }
        return Composition {
            cpus: h.cpus,
            top: h.top.clone(),
            nodes,
            diagnostics: diags,
            first_parent: vec![None; n],
        };
    }

    // Names: instances and threads are separate namespaces.
    let mut index: HashMap<&str, usize, BuildHasherDefault<NameHasher>> =
        HashMap::with_capacity_and_hasher(ns, BuildHasherDefault::default());
    let mut thread_index: HashMap<&str, usize, BuildHasherDefault<NameHasher>> =
        HashMap::with_capacity_and_hasher(n - ns, BuildHasherDefault::default());
    let mut dead = vec![false; n];
    for (i, dead_i) in dead.iter_mut().enumerate() {
        let map = if i < ns {
            &mut index
        } else {
            &mut thread_index
        };
        match map.entry(name_of(i)) {
            Entry::Occupied(_) => {
                diags.push(Diagnostic::DuplicateName {
                    node: nodes[i].label(),
                });
                *dead_i = true;
            }
            Entry::Vacant(slot) => {
                slot.insert(i);
            }
        }
    }

    // Edges, flattened: node i's parent edges are edge_src[edge_start[i]..edge_start[i + 1]],
    // aligned with its parent specs whenever the node is not dead.
    let mut edge_src: Vec<Src> = Vec::with_capacity(n + n / 4);
    let mut edge_start: Vec<usize> = Vec::with_capacity(n + 1);
    let mut children: Vec<Vec<(usize, usize)>> = vec![Vec::new(); n];
    let mut cpu_claims: Vec<Vec<usize>> = vec![Vec::new(); h.cpus as usize];
    let mut links: Vec<(usize, usize)> = Vec::new();
    let mut claims: Vec<u32> = Vec::new();
    for i in 0..n {
        edge_start.push(edge_src.len());
        if dead[i] {
            continue;
        }
        let specs: &[ParentSpec] = if i < ns {
            &h.schedulers[i].parents
        } else {
            std::slice::from_ref(&h.threads[i - ns].parent)
        };
        if specs.is_empty() {
            diags.push(Diagnostic::NoParent {
                node: nodes[i].label(),
            });
            dead[i] = true;
        }
        links.clear();
        claims.clear();
        for (k, spec) in specs.iter().enumerate() {
            match &spec.parent {
                ParentRef::Top { cpu } => {
                    match cpu {
                        Some(c) if *c >= h.cpus => {
                            diags.push(Diagnostic::BadCpu {
                                node: nodes[i].label(),
                                cpu: *c,
                                cpus: h.cpus,
                            });
                            dead[i] = true;
                        }
                        Some(c) => claims.push(*c),
                        None => claims.extend(0..h.cpus),
                    }
                    edge_src.push(Src::Top(*cpu));
                }
                ParentRef::Scheduler(p) => match index.get(p.as_str()) {
                    Some(&j) => {
                        links.push((j, k));
                        edge_src.push(Src::Node(j));
                    }
                    None if thread_index.contains_key(p.as_str()) => {
                        diags.push(Diagnostic::ParentIsThread {
                            node: nodes[i].label(),
                            parent: p.clone(),
                        });
                        dead[i] = true;
                    }
                    None => {
                        diags.push(Diagnostic::UnknownParent {
                            node: nodes[i].label(),
                            parent: p.clone(),
                        });
                        dead[i] = true;
                    }
                },
            }
        }
        // Only a node whose every parent edge resolves joins the graph.
        if !dead[i] {
            for &(j, k) in &links {
                children[j].push((i, k));
            }
            for &c in &claims {
                cpu_claims[c as usize].push(i);
            }
        }
    }
    edge_start.push(edge_src.len());
    for (cpu, claims) in cpu_claims.iter().enumerate() {
        if claims.len() > 1 {
            diags.push(Diagnostic::CpuShared {
                cpu: cpu as u32,
                nodes: claims.iter().map(|&i| nodes[i].label()).collect(),
            });
        }
    }
    let first_parent: Vec<Option<Source>> = (0..n)
        .map(|i| {
            (edge_start[i] < edge_start[i + 1]).then(|| match edge_src[edge_start[i]] {
                Src::Top(c) => Source::Top {
                    cpu: c.unwrap_or(0),
                },
                Src::Node(j) => Source::Node(j),
            })
        })
        .collect();
    for (i, kids) in children.iter().enumerate() {
        nodes[i].children = kids.iter().map(|&(c, _)| c).collect();
    }

    // Mappings; instances of a policy with default parameters share one.
    let ctx = MappingContext {
        cpus: h.cpus.max(1),
    };
    let mut built: Vec<Box<dyn Mapping>> = Vec::new();
    let mut shared: Vec<(&str, usize)> = Vec::new();
    let mut mappings: Vec<Option<usize>> = Vec::with_capacity(ns);
    for (i, s) in h.schedulers.iter().enumerate() {
        if dead[i] {
            mappings.push(None);
            continue;
        }
        let default = s.params == InstanceParams::default();
        if default {
            if let Some(&(_, m)) = shared.iter().find(|(p, _)| *p == s.policy) {
                mappings.push(Some(m));
                continue;
            }
        }
        match registry.build(&s.policy, &s.params, &ctx) {
            Ok(m) => {
                built.push(m);
                if default {
                    shared.push((&s.policy, built.len() - 1));
                }
                mappings.push(Some(built.len() - 1));
            }
            Err(error) => {
                diags.push(Diagnostic::BadScheduler {
                    node: nodes[i].label(),
                    error,
                });
                mappings.push(None);
            }
        }
    }

    // Topological order (Kahn), ties by index.
    let mut indegree = vec![0usize; n];
    for kids in &children {
        for &(c, _) in kids {
            indegree[c] += 1;
        }
    }
    let mut queue: VecDeque<usize> = (0..n).filter(|&i| indegree[i] == 0).collect();
    let mut order = Vec::with_capacity(n);
    while let Some(i) = queue.pop_front() {
        order.push(i);
        for &(c, _) in &children[i] {
            indegree[c] -= 1;
            if indegree[c] == 0 {
                queue.push_back(c);
            }
        }
    }
    if order.len() < n {
        let stuck: Vec<usize> = (0..n).filter(|&i| indegree[i] > 0).collect();
        diags.push(Diagnostic::Cycle {
            nodes: stuck.iter().map(|&i| nodes[i].label()).collect(),
        });
        for i in stuck {
            nodes[i].status = Status::Failed;
        }
    }
    for (i, d) in dead.iter().enumerate() {
        if *d || (i < ns && mappings[i].is_none()) {
            nodes[i].status = Status::Failed;
        }
    }

    let mut walk = Walk {
        h,
        ns,
        comp: Composition {
            cpus: h.cpus,
            top: h.top.clone(),
            nodes,
            diagnostics: diags,
            first_parent,
        },
        children,
        edge_start,
        inbox: vec![None; edge_src.len()],
        slots: Vec::new(),
        multiprocessor: mappings
            .iter()
            .map(|m| m.is_none_or(|m| built[m].max_parents().is_none()))
            .collect(),
    };
    for &i in &order {
        if walk.comp.nodes[i].status != Status::Ok {
            continue;
        }
        // Gather what each parent edge delivered.
        walk.slots.clear();
        let (lo, hi) = (walk.edge_start[i], walk.edge_start[i + 1]);
        for (e, src) in edge_src[lo..hi]
            .iter()
            .enumerate()
            .map(|(k, s)| (lo + k, *s))
        {
            let slot = match src {
                Src::Top(Some(c)) => Slot::Top(c),
                Src::Top(None) => {
                    walk.slots.extend((0..h.cpus).map(Slot::Top));
                    continue;
                }
                Src::Node(j) => match walk.inbox[e] {
                    Some((parent, pos)) => Slot::Given { parent, pos },
                    None => Slot::Missing(j),
                },
            };
            walk.slots.push(slot);
        }
        // A parent that failed or refused this VP is reported there; a node
        // missing any of its VPs is not checked further (even a join, whose
        // remaining parents no longer give what was intended).
        if walk.slots.iter().any(|s| matches!(s, Slot::Missing(_))) {
            let received: Vec<Received> = walk
                .slots
                .iter()
                .map(|&s| Received {
                    from: s.source(),
                    guarantee: walk.options(s).first().copied(),
                })
                .collect();
            walk.comp.nodes[i].received = received;
            walk.comp.nodes[i].status = Status::Skipped;
            continue;
        }
        match mappings.get(i) {
            Some(Some(m)) => walk.scheduler(i, built[*m].as_ref()),
            Some(None) => {}
            None => walk.thread(i),
        }
    }
    walk.comp
}

/// What one parent edge delivered.
#[derive(Clone, Copy, Debug)]
enum Slot {
    /// ALL from the top, on this processor.
    Top(u32),
    /// The provision at `comp.nodes[parent].provided[pos]`.
    Given { parent: usize, pos: usize },
    /// Nothing: the parent (this node) failed or refused.
    Missing(usize),
}

impl Slot {
    fn source(self) -> Source {
        match self {
            Slot::Top(cpu) => Source::Top { cpu },
            Slot::Given { parent, .. } | Slot::Missing(parent) => Source::Node(parent),
        }
    }
}

const ALL_ONLY: &[Guarantee] = &[Guarantee::All];

/// The state of the walk from the top.
struct Walk<'h> {
    h: &'h Hierarchy,
    ns: usize,
    comp: Composition,
    children: Vec<Vec<(usize, usize)>>,
    edge_start: Vec<usize>,
    /// Per parent edge: where its provision is (`(parent, position in provided)`).
    inbox: Vec<Option<(usize, usize)>>,
    slots: Vec<Slot>,
    /// Per scheduler: whether its policy takes every processor a parent
    /// offers (a mapping without a limit on parents), as the policies'
    /// `parent_vps` does; unknown ones are assumed to.
    multiprocessor: Vec<bool>,
}

impl Walk<'_> {
    /// The options a slot offers, borrowed from the parent's report.
    fn options(&self, s: Slot) -> &[Guarantee] {
        match s {
            Slot::Top(c) => self
                .h
                .top
                .get(c as usize)
                .map_or(ALL_ONLY, std::slice::from_ref),
            Slot::Given { parent, pos } => match &self.comp.nodes[parent].provided[pos].1 {
                Ok(p) => &p.options,
                Err(_) => &[],
            },
            Slot::Missing(_) => &[],
        }
    }

    fn scheduler(&mut self, i: usize, mapping: &dyn Mapping) {
        let h = self.h;
        let ns = self.ns;
        let request = h.schedulers[i].request;
        // A uniprocessor scheduler at the root uses one processor at a time,
        // however many it owns (§6.3.1): one ALL, or the least supply among
        // them when some lose time to interference.
        let mut slots = std::mem::take(&mut self.slots);
        if mapping.max_parents() == Some(1)
            && slots.len() > 1
            && slots.iter().all(|s| matches!(s, Slot::Top(_)))
        {
            let reduced = slots.iter().position(|s| match s {
                Slot::Top(c) => h.top.get(*c as usize).is_some_and(|g| *g != Guarantee::All),
                _ => false,
            });
            slots.swap(0, reduced.unwrap_or(0));
            slots.truncate(1);
        }
        if let Some(max) = mapping.max_parents() {
            if slots.len() > max {
                self.comp.diagnostics.push(Diagnostic::TooManyParents {
                    node: self.comp.nodes[i].label(),
                    count: slots.len(),
                    max,
                });
                self.comp.nodes[i].status = Status::Failed;
                self.slots = slots;
                return;
            }
        }
        let mut received = Vec::with_capacity(slots.len());
        let mut accepted = Vec::with_capacity(slots.len());
        for &slot in &slots {
            let options = self.options(slot);
            // Prefer an option that is acceptable and also meets the request.
            let pick = request
                .and_then(|req| {
                    options
                        .iter()
                        .filter(|o| satisfies(o, &req).is_ok())
                        .find_map(|o| mapping.accepts(o).ok().map(|a| (*o, a)))
                })
                .or_else(|| {
                    options
                        .iter()
                        .find_map(|o| mapping.accepts(o).ok().map(|a| (*o, a)))
                });
            let first = options.first().copied().unwrap_or(Guarantee::Null);
            match pick {
                Some((o, a)) => {
                    received.push(Received {
                        from: slot.source(),
                        guarantee: Some(o),
                    });
                    accepted.push(a);
                }
                None => {
                    let reason = mapping.accepts(&first).err().unwrap_or_default();
                    received.push(Received {
                        from: slot.source(),
                        guarantee: Some(first),
                    });
                    let d = Diagnostic::Unacceptable {
                        node: self.comp.nodes[i].label(),
                        parent: source_label(&self.comp, slot.source()),
                        path: self.comp.path(i),
                        received: first,
                        policy: mapping.title().to_string(),
                        needs: mapping.needs(),
                        reason,
                    };
                    self.comp.diagnostics.push(d);
                    self.comp.nodes[i].received = received;
                    self.comp.nodes[i].status = Status::Failed;
                    self.slots = slots;
                    return;
                }
            }
        }
        self.slots = slots;
        if let Some(req) = request {
            let got = received
                .iter()
                .filter_map(|r| r.guarantee.map(|g| (r.from, g)));
            let mut first = None;
            let mut met = false;
            for (src, g) in got {
                first.get_or_insert((src, g));
                if satisfies(&g, &req).is_ok() {
                    met = true;
                    break;
                }
            }
            if let (false, Some((src, g))) = (met, first) {
                let reason = satisfies(&g, &req)
                    .err()
                    .map(|u| u.reason)
                    .unwrap_or_default();
                let d = Diagnostic::RequestUnsatisfied {
                    node: self.comp.nodes[i].label(),
                    parent: source_label(&self.comp, src),
                    path: self.comp.path(i),
                    received: g,
                    requested: req,
                    reason,
                };
                self.comp.diagnostics.push(d);
                self.comp.nodes[i].received = received;
                self.comp.nodes[i].status = Status::Failed;
                return;
            }
        }
        self.comp.nodes[i].received = received;
        let kids = std::mem::take(&mut self.children[i]);
        if let Some(max) = mapping.max_children() {
            if kids.len() > max {
                self.comp.diagnostics.push(Diagnostic::TooManyChildren {
                    node: self.comp.nodes[i].label(),
                    count: kids.len(),
                    max,
                });
                self.comp.nodes[i].accepted = accepted;
                self.comp.nodes[i].status = Status::Failed;
                self.children[i] = kids;
                return;
            }
        }
        let reqs: Vec<ChildRequest<'_>> = kids
            .iter()
            .map(|&(c, k)| {
                if c < ns {
                    let sc = &h.schedulers[c];
                    ChildRequest {
                        name: &sc.name,
                        is_thread: false,
                        params: &sc.parents[k].params,
                        request: sc.request.as_ref(),
                        multiprocessor: self.multiprocessor[c],
                    }
                } else {
                    let t = &h.threads[c - ns];
                    ChildRequest {
                        name: &t.name,
                        is_thread: true,
                        params: &t.parent.params,
                        request: t.request.as_ref(),
                        multiprocessor: false,
                    }
                }
            })
            .collect();
        let mut out = mapping.child_guarantees(&accepted, &reqs);
        out.resize_with(kids.len(), || {
            Err("the policy's mapping gave no guarantee for this child".into())
        });
        let mut provided = Vec::with_capacity(kids.len());
        for (pos, (&(c, k), r)) in kids.iter().zip(out).enumerate() {
            match &r {
                Ok(p) if !p.options.is_empty() => {
                    self.inbox[self.edge_start[c] + k] = Some((i, pos))
                }
                Ok(_) => {}
                Err(reason) => {
                    let d = Diagnostic::Refused {
                        parent: self.comp.nodes[i].label(),
                        child: self.comp.nodes[c].label(),
                        path: self.comp.path(c),
                        reason: reason.clone(),
                    };
                    self.comp.diagnostics.push(d);
                }
            }
            provided.push((c, r));
        }
        self.children[i] = kids;
        self.comp.nodes[i].accepted = accepted;
        self.comp.nodes[i].provided = provided;
    }

    fn thread(&mut self, i: usize) {
        let Some(&slot) = self.slots.first() else {
            return;
        };
        let options = self.options(slot);
        let from = slot.source();
        let first = options.first().copied().unwrap_or(Guarantee::Null);
        let Some(req) = self.h.threads[i - self.ns].request else {
            self.comp.nodes[i].received = vec![Received {
                from,
                guarantee: Some(first),
            }];
            return;
        };
        match options
            .iter()
            .find_map(|o| satisfies(o, &req).ok().map(|s| (*o, s)))
        {
            Some((o, s)) => {
                self.comp.nodes[i].received = vec![Received {
                    from,
                    guarantee: Some(o),
                }];
                self.comp.nodes[i].accepted = vec![s.via];
            }
            None => {
                let reason = satisfies(&first, &req)
                    .err()
                    .map(|u| u.reason)
                    .unwrap_or_default();
                let d = Diagnostic::RequestUnsatisfied {
                    node: self.comp.nodes[i].label(),
                    parent: source_label(&self.comp, from),
                    path: self.comp.path(i),
                    received: first,
                    requested: req,
                    reason,
                };
                self.comp.diagnostics.push(d);
                self.comp.nodes[i].received = vec![Received {
                    from,
                    guarantee: Some(first),
                }];
                self.comp.nodes[i].status = Status::Failed;
            }
        }
    }
}

fn source_label(comp: &Composition, s: Source) -> String {
    match s {
        Source::Top { cpu } => format!("the top (processor {cpu})"),
        Source::Node(j) => comp.nodes[j].label(),
    }
}

impl Composition {
    /// Whether the hierarchy composes correctly: no diagnostics.
    pub fn is_ok(&self) -> bool {
        self.diagnostics.is_empty()
    }

    /// The report of the instance named `name`, or else of the thread
    /// named `name`.
    pub fn node(&self, name: &str) -> Option<&NodeReport> {
        self.scheduler(name).or_else(|| self.thread(name))
    }

    /// The report of the instance named `name`.
    pub fn scheduler(&self, name: &str) -> Option<&NodeReport> {
        self.nodes
            .iter()
            .find(|n| n.name == name && matches!(n.kind, NodeKind::Scheduler { .. }))
    }

    /// The report of the thread named `name`.
    pub fn thread(&self, name: &str) -> Option<&NodeReport> {
        self.nodes
            .iter()
            .find(|n| n.name == name && matches!(n.kind, NodeKind::Thread { .. }))
    }

    /// The guarantee the node named `name` received on its first VP.
    pub fn received(&self, name: &str) -> Option<Guarantee> {
        self.node(name)?.received.first()?.guarantee
    }

    /// The path from the top to node `i`, following first parents:
    /// `top → fp 'root' → ts 'desktop' → rez 'rt'`.
    pub fn path(&self, i: usize) -> String {
        let mut parts = Vec::new();
        let mut cur = Some(i);
        let mut steps = 0;
        let mut reached_top = false;
        while let Some(j) = cur {
            if j >= self.nodes.len() || steps > self.nodes.len() {
                break;
            }
            parts.push(self.nodes[j].label());
            steps += 1;
            cur = match self.first_parent.get(j).copied().flatten() {
                Some(Source::Node(p)) => Some(p),
                Some(Source::Top { .. }) => {
                    reached_top = true;
                    None
                }
                None => None,
            };
        }
        if reached_top {
            parts.push("top".to_string());
        }
        parts.reverse();
        parts.join(" → ")
    }

    /// A text tree of the hierarchy: each node with the guarantee it
    /// receives from the parent it is shown under, how it uses it, and its
    /// status. A node with several parents is drawn under its first parent
    /// and referenced under the others.
    pub fn render_tree(&self) -> String {
        /// Levels drawn with guides; deeper levels show their depth instead.
        const MAX_GUIDES: usize = 64;
        let mut out = String::with_capacity(64 * (self.nodes.len() + 1));
        if self.top.iter().all(|g| *g == Guarantee::All) {
            let _ = writeln!(out, "top: ALL on each of {} processor(s)", self.cpus);
        } else {
            let each: Vec<String> = (0..self.cpus as usize)
                .map(|c| {
                    format!(
                        "{} on processor {c}",
                        self.top.get(c).unwrap_or(&Guarantee::All)
                    )
                })
                .collect();
            let _ = writeln!(out, "top: {}", each.join(", "));
        }
        let roots: Vec<usize> = (0..self.nodes.len())
            .filter(|&i| {
                matches!(
                    self.first_parent.get(i).copied().flatten(),
                    Some(Source::Top { .. })
                )
            })
            .collect();
        // Explicit stack: (node, parent shown under, depth, last sibling);
        // `guides[d]` says whether the ancestor at depth d was a last child.
        let mut stack: Vec<(usize, Option<usize>, usize, bool)> = Vec::new();
        for (k, &r) in roots.iter().enumerate().rev() {
            stack.push((r, None, 0, k + 1 == roots.len()));
        }
        let mut guides: Vec<bool> = Vec::new();
        let mut drawn = vec![false; self.nodes.len()];
        while let Some((i, parent, depth, last)) = stack.pop() {
            let node = &self.nodes[i];
            guides.truncate(depth);
            if depth > MAX_GUIDES {
                let _ = write!(out, "[depth {depth}] ");
            } else {
                for &ancestor_last in &guides {
                    out.push_str(if ancestor_last { "   " } else { "│  " });
                }
            }
            out.push_str(if last { "└─ " } else { "├─ " });
            match &node.kind {
                NodeKind::Scheduler { policy } => {
                    let _ = write!(out, "{policy} '{}'", node.name);
                }
                NodeKind::Thread { .. } => {
                    let _ = write!(out, "thread '{}'", node.name);
                }
            }
            let mut sep = " ← ";
            for r in &node.received {
                let here = match (r.from, parent) {
                    (Source::Node(p), Some(q)) => p == q,
                    (Source::Top { .. }, None) => true,
                    _ => false,
                };
                if here {
                    out.push_str(sep);
                    sep = ", ";
                    match r.guarantee {
                        Some(g) => {
                            let _ = write!(out, "{g}");
                        }
                        None => out.push_str("nothing"),
                    }
                }
            }
            let first_here = match (self.first_parent.get(i).copied().flatten(), parent) {
                (Some(Source::Node(p)), Some(q)) => p == q,
                (Some(Source::Top { .. }), None) => true,
                _ => false,
            };
            if !first_here || drawn[i] {
                out.push_str(" (see above)\n");
                continue;
            }
            drawn[i] = true;
            match &node.kind {
                NodeKind::Scheduler { .. } => {
                    let mut sep = " (used as ";
                    for (a, _) in node
                        .accepted
                        .iter()
                        .zip(node.received.iter().filter_map(|r| r.guarantee))
                        .filter(|(a, r)| a != &r && **a != Guarantee::Null)
                    {
                        let _ = write!(out, "{sep}{a}");
                        sep = ", ";
                    }
                    if sep == ", " {
                        out.push(')');
                    }
                }
                NodeKind::Thread { request: Some(req) } => {
                    let _ = write!(out, " (requested {req})");
                }
                NodeKind::Thread { request: None } => {}
            }
            match node.status {
                Status::Ok => {}
                Status::Failed => out.push_str("  ✗"),
                Status::Skipped => out.push_str("  (not checked: a parent gave it no guarantee)"),
            }
            out.push('\n');
            guides.push(last);
            let kids = &node.children;
            for (k, &c) in kids.iter().enumerate().rev() {
                stack.push((c, Some(i), depth + 1, k + 1 == kids.len()));
            }
        }
        if !self.diagnostics.is_empty() {
            let _ = writeln!(out, "{} problem(s):", self.diagnostics.len());
            for d in &self.diagnostics {
                let _ = writeln!(out, "  - {d}");
            }
        }
        out
    }
}
