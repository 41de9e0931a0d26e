//! The guarantee analysis of a hierarchy file (Regehr 2001, ch. 5–6).
//!
//! * [`translate`] turns the file's data model ([`hsched_config::Hierarchy`])
//!   into the analysis' abstract hierarchy
//!   ([`hsched_guarantee::compose::Hierarchy`]): instances with the
//!   parameters their guarantee mappings understand, parent edges with the
//!   parameters parents keep per child, threads, requested guarantees, and
//!   each root's processors.
//! * [`analyze`] runs the composition check (§5.1.2) on it, and
//!   [`Analysis::findings`] turns its diagnostics into located messages
//!   (`file:line:col`, what was received, what would be acceptable, why,
//!   and the path from the top).
//! * [`Analysis::tree_notes`] is what `hsched tree` draws next to each node.
//! * [`Analysis::rm_groups`] finds the rate-monotonic applications of §6.1:
//!   a fixed-priority instance whose children are all periodic or sporadic
//!   threads.
//!
//! What the translation leaves out, and why: instance parameters that do
//! not change a policy's guarantee (`fp` `unique_priorities`, `rez`
//! `variant` and `gain`, `ts` `mode`, `quantum` and `starvation`, `join`
//! `mode`, the BEST and Linux parameters), thread workloads (a thread
//! without `guarantee` requests nothing and is only checked for structure),
//! principals, and timed operations: the check is of the hierarchy as it
//! starts.

use hsched_config::{Hierarchy, Span, WorkloadSpec};
use hsched_core::Params;
use hsched_guarantee::compose::{Composition, Diagnostic, NodeKind, NodeReport, Source, Status};
use hsched_guarantee::mapping::{BestEffort, MappingContext, RateClass};
use hsched_guarantee::{
    Duration, EdgeParams, Guarantee, InstanceParams, ParentSpec, Registry, SchedulerSpec, Task,
    ThreadSpec,
};
use std::collections::{HashMap, HashSet};

/// A node of the file: an instance or a thread (two namespaces).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum NodeRef {
    /// A scheduler instance, by name.
    Scheduler(String),
    /// A thread, by name.
    Thread(String),
}

/// A value the translation could not read. A file that validated has none;
/// they exist so that a hand-built model never makes the analysis panic.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Issue {
    /// Where.
    pub node: NodeRef,
    /// What.
    pub message: String,
}

/// The translated hierarchy.
#[derive(Clone, Debug)]
pub struct Translation {
    /// The abstract hierarchy: instances in file-model order, then threads.
    pub hierarchy: hsched_guarantee::Hierarchy,
    /// Values that could not be read (left out of the hierarchy).
    pub issues: Vec<Issue>,
    /// How declared overheads enter the analysis, one note each.
    pub model: Vec<String>,
}

/// The instance parameters the guarantee mapping of `policy` understands
/// (`rez`: `cap`; `limit`: `amount`, `period`; `ps`: `quantum`;
/// `realrate`: `overload`, `floor`, `default_period`; `dl`: `processors`,
/// `tick`, `cap`).
fn instance_params(policy: &str, p: &Params, issues: &mut Vec<String>) -> InstanceParams {
    let mut out = InstanceParams::default();
    match policy {
        "rez" => out.cap = read(p.f64("cap"), issues),
        "limit" => {
            out.amount = read(p.duration("amount"), issues);
            out.period = read(p.duration("period"), issues);
        }
        "ps" | "sfq" => out.quantum = read(p.duration("quantum"), issues),
        // A plug-in's declared template may name its instance's quantum.
        plugin if hsched_plugin::is_plugin_name(plugin) => {
            out.quantum = read(p.duration("quantum"), issues)
        }
        "dl" => {
            out.processors = read(p.u64("processors"), issues);
            out.tick = read(p.duration("tick"), issues);
            out.cap = read(p.f64("cap"), issues);
        }
        "realrate" => {
            out.overload = read(p.f64("overload"), issues);
            out.floor = read(p.f64("floor"), issues);
            out.default_period = read(p.duration("default_period"), issues);
        }
        _ => {}
    }
    out
}

/// The parameters a parent keeps for one child: FP `priority`, PS `share`
/// and `warp`, Rez `amount` and `period`, real-rate `proportion`, `period`
/// and `class`. Each mapping reads only its own (a TS parent ignores a
/// child's `priority`, for instance).
fn edge_params(p: &Params, issues: &mut Vec<String>) -> EdgeParams {
    let class = match read(p.str("class"), issues) {
        None => None,
        Some(c) => RateClass::parse(c).or_else(|| {
            issues.push(format!(
                "`class` = \"{c}\" is not a real-rate class (real-time, aperiodic, real-rate, misc)"
            ));
            None
        }),
    };
    EdgeParams {
        priority: read(p.i64("priority"), issues),
        share: read(p.f64("share"), issues),
        warp: read(p.duration("warp"), issues),
        amount: read(p.duration("amount"), issues),
        period: read(p.duration("period"), issues),
        proportion: read(p.f64("proportion"), issues),
        class,
    }
}

fn read<T, E: std::fmt::Display>(r: Result<Option<T>, E>, issues: &mut Vec<String>) -> Option<T> {
    r.unwrap_or_else(|e| {
        issues.push(e.to_string());
        None
    })
}

fn request(text: Option<&str>, issues: &mut Vec<String>) -> Option<Guarantee> {
    let text = text?;
    match text.parse::<Guarantee>() {
        Ok(g) => Some(g),
        Err(e) => {
            issues.push(format!("guarantee \"{text}\": {e}"));
            None
        }
    }
}

/// Translates a hierarchy file into the analysis' hierarchy.
pub fn translate(h: &Hierarchy) -> Translation {
    let cpus = u32::try_from(h.machine.cpus).unwrap_or(u32::MAX);
    let mut out = hsched_guarantee::Hierarchy::new(cpus);
    let mut issues = Vec::new();
    for s in &h.schedulers {
        let mut msgs = Vec::new();
        let mut spec = SchedulerSpec::new(&s.name, &s.policy)
            .with_params(instance_params(&s.policy, &s.params, &mut msgs));
        if s.parents.is_empty() {
            if s.cpus.is_empty() {
                spec = spec.under(ParentSpec::top());
            }
            for &c in &s.cpus {
                spec = spec.under(ParentSpec::top_cpu(u32::try_from(c).unwrap_or(u32::MAX)));
            }
        }
        for p in &s.parents {
            let mut edge = ParentSpec::scheduler(&p.name);
            edge.params = edge_params(&p.params, &mut msgs);
            spec = spec.under(edge);
        }
        spec.request = request(s.guarantee.as_deref(), &mut msgs);
        issues.extend(msgs.into_iter().map(|message| Issue {
            node: NodeRef::Scheduler(s.name.clone()),
            message,
        }));
        out.add_scheduler(spec);
    }
    for t in &h.threads {
        let mut msgs = Vec::new();
        let mut edge = ParentSpec::scheduler(&t.scheduler);
        edge.params = edge_params(&t.params, &mut msgs);
        let mut spec = ThreadSpec::new(&t.name, edge);
        spec.request = request(t.guarantee.as_deref(), &mut msgs);
        issues.extend(msgs.into_iter().map(|message| Issue {
            node: NodeRef::Thread(t.name.clone()),
            message,
        }));
        out.add_thread(spec);
    }
    let mut model = Vec::new();
    for (cpu, g, why) in stolen_supply(h) {
        out.with_top(cpu, g);
        model.push(why);
    }
    if h.machine.context_switch.as_nanos() > 0 {
        model.push(format!(
            "note: machine.context_switch = {} is declared: guarantees are of processor time, of which each switch into a thread spends {}; response times charge it where the analysis can bound the switches",
            h.machine.context_switch, h.machine.context_switch
        ));
    }
    Translation {
        hierarchy: out,
        issues,
        model,
    }
}

/// What the top supplies on each processor that loses time to declared
/// stolen time (Regehr 2001, ch. 11), with a note saying so: the most a pattern
/// steals in any window of length `t` bounds what is left, a continuous
/// soft reservation for a periodic pattern (`l` every `p` leaves `p − l`
/// in every window of `p`) or a burst (per slice). A processor with a
/// recorded trace or several sources is analysed as guaranteeing nothing.
pub fn stolen_supply(h: &Hierarchy) -> Vec<(u32, Guarantee, String)> {
    use hsched_config::StolenPattern;
    let mut by_cpu: std::collections::BTreeMap<usize, Vec<&hsched_config::StolenSpec>> =
        std::collections::BTreeMap::new();
    for s in &h.machine.stolen {
        by_cpu.entry(s.cpu).or_default().push(s);
    }
    let mut out = Vec::new();
    for (cpu, specs) in by_cpu {
        let Ok(c) = u32::try_from(cpu) else { continue };
        let left = match specs.as_slice() {
            [one] => match &one.pattern {
                StolenPattern::Periodic { every, amount, .. } if amount < every => {
                    Some((*every - *amount, *every, format!("{amount} every {every}")))
                }
                StolenPattern::Burst {
                    fraction, slice, ..
                } if slice.as_nanos() >= 2 => {
                    let n = slice.as_nanos();
                    let on = ((n as f64 * fraction).ceil() as u64).clamp(1, n - 1);
                    Some((
                        Duration::from_nanos(n - on),
                        *slice,
                        format!(
                            "up to {} of every {slice} in a burst",
                            Duration::from_nanos(on)
                        ),
                    ))
                }
                _ => None,
            },
            _ => None,
        };
        match left.and_then(|(x, y, what)| {
            Guarantee::reservation(hsched_guarantee::GuaranteeKind::ResCS, x, y)
                .ok()
                .map(|g| (g, what))
        }) {
            Some((g, what)) => out.push((
                c,
                g,
                format!("note: processor {cpu} loses {what} to [[machine.stolen]]: it is analyzed as supplying {g}, not ALL"),
            )),
            None => out.push((
                c,
                Guarantee::Null,
                format!("note: processor {cpu} loses time to [[machine.stolen]] in a pattern the analysis does not bound (a trace, or several sources): it is analyzed as supplying NULL, so nothing on it is certified"),
            )),
        }
    }
    out
}

/// A hierarchy file with its translation and composition.
#[derive(Debug)]
pub struct Analysis<'h> {
    /// The file's model.
    pub file: &'h Hierarchy,
    /// Its translation.
    pub translation: Translation,
    /// The composition check of the translation.
    pub composition: Composition,
    /// Policies used by the file that have no guarantee mapping of their
    /// own, analyzed as best effort.
    pub unmapped: Vec<String>,
    /// Plug-in policies the file uses whose mapping is their own
    /// declaration, with what it says (`needs ALL, gives RESCS {amount}
    /// {period}`).
    pub declared: Vec<(String, String)>,
    /// Where each scheduler and thread is declared (the first of a name),
    /// for [`Analysis::span`]: every problem looks one up.
    spans: HashMap<NodeRef, Span>,
    /// Threads that `fp` refuses a guarantee only because they share a
    /// priority with a sibling, and that ask for none: notes, not problems
    /// (docs/guarantees.md, "Equal priorities").
    ties: HashSet<String>,
}

/// The mapping of a policy that has not declared one: it accepts any
/// guarantee and promises its children nothing (`NULL ↦ NULL⁺`), which is
/// sound whatever the policy does.
fn unmapped(
    _: &InstanceParams,
    _: &MappingContext,
) -> Result<Box<dyn hsched_guarantee::Mapping>, String> {
    Ok(Box::new(BestEffort::new(
        "unmapped",
        "a policy without a guarantee mapping",
    )))
}

/// Translates `h` and checks its composition with the built-in mappings;
/// a policy of `hsched_policies` without one is analyzed as best effort
/// (and listed in [`Analysis::unmapped`]).
pub fn analyze(h: &Hierarchy) -> Analysis<'_> {
    let translation = translate(h);
    let mut registry = Registry::builtin();
    let mut known: Vec<String> = registry.names().map(String::from).collect();
    let mut declared = Vec::new();
    for p in hsched_policies::registry() {
        if known.iter().any(|k| k == p.name) {
            continue;
        }
        // A plug-in's declared mapping was checked when it was loaded.
        let decl = hsched_plugin::module_named(p.name).and_then(|m| {
            let g = m.descriptor.guarantee.as_ref()?;
            // A declaration that promises nothing needs no caveat.
            let claims = !g.gives.trim().eq_ignore_ascii_case("null");
            let says = format!("needs {}, gives {}", g.needs, g.gives);
            Some((g.mapping(p.name).ok()?, claims.then_some(says)))
        });
        match decl {
            Some((d, says)) => {
                registry.register_declared(p.name, d);
                known.push(p.name.to_string());
                if let Some(says) = says.filter(|_| h.schedulers.iter().any(|s| s.policy == p.name))
                {
                    declared.push((p.name.to_string(), says));
                }
            }
            None => registry.register(p.name, unmapped),
        }
    }
    let mut used: Vec<String> = Vec::new();
    for s in &h.schedulers {
        if !known.contains(&s.policy) && !used.contains(&s.policy) {
            used.push(s.policy.clone());
        }
    }
    let composition = hsched_guarantee::compose_with(&translation.hierarchy, &registry);
    let mut spans = HashMap::with_capacity(h.schedulers.len() + h.threads.len());
    for s in &h.schedulers {
        spans
            .entry(NodeRef::Scheduler(s.name.clone()))
            .or_insert(s.span);
    }
    for t in &h.threads {
        spans
            .entry(NodeRef::Thread(t.name.clone()))
            .or_insert(t.span);
    }
    let mut a = Analysis {
        file: h,
        translation,
        composition,
        unmapped: used,
        declared,
        spans,
        ties: HashSet::new(),
    };
    a.ties = a.unasked_ties();
    a
}

impl Analysis<'_> {
    /// Notes on the model the verdicts were computed under: policies
    /// analyzed as best effort, and declared overheads.
    pub fn notes(&self) -> Vec<String> {
        let mut out: Vec<String> = (!self.unmapped.is_empty())
            .then(|| {
                format!(
                    "note: {} {} no guarantee mapping yet; analyzed as best effort (accepts anything, promises its children NULL)",
                    self.unmapped.join(", "),
                    if self.unmapped.len() == 1 { "has" } else { "have" }
                )
            })
            .into_iter()
            .collect();
        for (policy, says) in &self.declared {
            out.push(format!(
                "note: {policy} is analyzed with the mapping it declares ({says}); hsched composes that claim but does not prove the plug-in's code keeps it"
            ));
        }
        out.extend(self.translation.model.iter().cloned());
        if !self.ties.is_empty() {
            let mut tied: Vec<&str> = self
                .file
                .threads
                .iter()
                .map(|t| t.name.as_str())
                .filter(|n| self.ties.contains(*n))
                .collect();
            let n = tied.len();
            let more = n.saturating_sub(8);
            tied.truncate(8);
            let names: Vec<String> = tied.iter().map(|t| format!("`{t}`")).collect();
            let names = match names.split_last() {
                Some((last, rest)) if more == 0 && !rest.is_empty() => {
                    format!("{} and {last}", rest.join(", "))
                }
                _ if more > 0 => format!("{} and {more} more", names.join(", ")),
                _ => names.join(", "),
            };
            let (who, s, is, asks) = if n == 1 {
                ("thread", "s", "it is", "it asks")
            } else {
                ("threads", "", "they are", "they ask")
            };
            out.push(format!(
                "note: {who} {names} share{s} a priority with a sibling under `fp`, which runs equal priorities in an order the analysis does not know: \
                 {is} guaranteed nothing, and {asks} for no guarantee (give each its own priority to guarantee one)"
            ));
        }
        out
    }
}

/// One problem, ready to print: a headline, where it is, and labelled
/// details (`expected`, `why`, `path`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    /// A stable code (`unacceptable`, `refused`, `request-unsatisfied`, …).
    pub code: &'static str,
    /// The node it is about, if one.
    pub node: Option<NodeRef>,
    /// One line.
    pub headline: String,
    /// `(label, text)` lines.
    pub details: Vec<(&'static str, String)>,
}

impl Analysis<'_> {
    /// Whether the hierarchy composes and everything translated. A
    /// priority tie under `fp` that no thread's guarantee depends on is a
    /// note, not a failure: `sim` runs it, and the rate-monotonic analysis
    /// counts tied threads as delaying each other, which bounds either
    /// order.
    pub fn is_ok(&self) -> bool {
        self.translation.issues.is_empty()
            && self
                .composition
                .diagnostics
                .iter()
                .all(|d| self.is_unasked_tie(d))
    }

    /// Whether thread `name` is refused a guarantee only for a priority
    /// tie, and asks for none.
    pub fn is_tied_only(&self, name: &str) -> bool {
        self.ties.contains(name)
    }

    fn is_unasked_tie(&self, d: &Diagnostic) -> bool {
        match d {
            Diagnostic::Refused { child, .. } => child
                .strip_prefix("thread '")
                .and_then(|c| c.strip_suffix('\''))
                .is_some_and(|c| self.ties.contains(c)),
            _ => false,
        }
    }

    /// The threads refused by an `fp` parent that holds another child at
    /// their priority, and that ask for no guarantee (a tie is the one
    /// reason `fp` refuses a child, §5.3.1.1).
    fn unasked_ties(&self) -> HashSet<String> {
        let mut out = HashSet::new();
        let threads: HashMap<&str, &hsched_config::ThreadSpec> = self
            .file
            .threads
            .iter()
            .map(|t| (t.name.as_str(), t))
            .collect();
        let fp: HashSet<&str> = self
            .file
            .schedulers
            .iter()
            .filter(|s| s.policy == "fp")
            .map(|s| s.name.as_str())
            .collect();
        // Priorities held under each fp instance, with how many hold each.
        let mut held: HashMap<(&str, i64), usize> = HashMap::new();
        let prio = |p: &Params| match p.get("priority") {
            Some(hsched_core::ParamValue::Int(n)) => *n,
            _ => 0,
        };
        for t in &self.file.threads {
            if fp.contains(t.scheduler.as_str()) {
                *held
                    .entry((t.scheduler.as_str(), prio(&t.params)))
                    .or_default() += 1;
            }
        }
        for s in &self.file.schedulers {
            for link in s.parents.iter().filter(|l| fp.contains(l.name.as_str())) {
                *held
                    .entry((link.name.as_str(), prio(&link.params)))
                    .or_default() += 1;
            }
        }
        for d in &self.composition.diagnostics {
            let Diagnostic::Refused { parent, child, .. } = d else {
                continue;
            };
            let Some(name) = child
                .strip_prefix("thread '")
                .and_then(|c| c.strip_suffix('\''))
            else {
                continue;
            };
            let Some(t) = threads.get(name) else { continue };
            let tied = parent
                .strip_prefix("fp '")
                .and_then(|p| p.strip_suffix('\''))
                .filter(|p| *p == t.scheduler)
                .is_some_and(|p| held.get(&(p, prio(&t.params))).is_some_and(|n| *n > 1));
            if tied && t.guarantee.is_none() {
                out.insert(name.to_string());
            }
        }
        out
    }

    /// Each node's label (`fp 'root'`, `thread 't'`) to its index, the
    /// first node when two share one: diagnostics name nodes by label, and
    /// a file may have 100 000 of them.
    fn label_index(&self) -> HashMap<String, usize> {
        let mut map = HashMap::with_capacity(self.composition.nodes.len());
        for (i, n) in self.composition.nodes.iter().enumerate() {
            map.entry(n.label()).or_insert(i);
        }
        map
    }

    fn node_by_label(&self, labels: &HashMap<String, usize>, label: &str) -> Option<NodeRef> {
        let ns = self.file.schedulers.len();
        let i = *labels.get(label)?;
        Some(if i < ns {
            NodeRef::Scheduler(self.composition.nodes[i].name.clone())
        } else {
            NodeRef::Thread(self.composition.nodes[i].name.clone())
        })
    }

    /// Every problem: translation issues, then the composition's
    /// diagnostics in the order found (root first).
    pub fn findings(&self) -> Vec<Finding> {
        let mut out: Vec<Finding> = self
            .translation
            .issues
            .iter()
            .map(|i| Finding {
                code: "unreadable",
                node: Some(i.node.clone()),
                headline: format!("{}: {}", node_text(&i.node), i.message),
                details: vec![("note", "the analysis leaves this value out".into())],
            })
            .collect();
        if !self.composition.diagnostics.is_empty() {
            let labels = self.label_index();
            for d in &self.composition.diagnostics {
                if !self.is_unasked_tie(d) {
                    out.push(self.finding(&labels, d));
                }
            }
        }
        out
    }

    fn finding(&self, labels: &HashMap<String, usize>, d: &Diagnostic) -> Finding {
        let code = d.code();
        match d {
            Diagnostic::Unacceptable {
                node,
                parent,
                path,
                received,
                policy,
                needs,
                reason,
            } => {
                let mut details = vec![
                    ("expected", needs.clone()),
                    ("why", reason.clone()),
                    ("path", path.clone()),
                ];
                if *received == Guarantee::Null {
                    details.push(("hint", null_hint(node, parent, needs)));
                }
                Finding {
                    code,
                    node: self.node_by_label(labels, node),
                    headline: format!(
                        "{node} under {parent} receives {received}, which {policy} cannot use"
                    ),
                    details,
                }
            }
            Diagnostic::Refused {
                parent,
                child,
                path,
                reason,
            } => Finding {
                code,
                node: self.node_by_label(labels, child),
                headline: format!("{parent} cannot give {child} a guarantee"),
                details: vec![("why", reason.clone()), ("path", path.clone())],
            },
            Diagnostic::RequestUnsatisfied {
                node,
                parent,
                path,
                received,
                requested,
                reason,
            } => Finding {
                code,
                node: self.node_by_label(labels, node),
                headline: format!(
                    "{node} under {parent} receives {received} but requested {requested}"
                ),
                details: vec![
                    (
                        "expected",
                        format!("{requested}, or a guarantee that converts into it (Table 5.2)"),
                    ),
                    ("why", reason.clone()),
                    ("path", path.clone()),
                ],
            },
            other => {
                let label = match other {
                    Diagnostic::DuplicateName { node }
                    | Diagnostic::BadScheduler { node, .. }
                    | Diagnostic::UnknownParent { node, .. }
                    | Diagnostic::ParentIsThread { node, .. }
                    | Diagnostic::NoParent { node }
                    | Diagnostic::BadCpu { node, .. }
                    | Diagnostic::TooManyParents { node, .. }
                    | Diagnostic::TooManyChildren { node, .. } => Some(node.as_str()),
                    Diagnostic::CpuShared { nodes, .. } | Diagnostic::Cycle { nodes } => {
                        nodes.first().map(String::as_str)
                    }
                    _ => None,
                };
                Finding {
                    code,
                    node: label.and_then(|l| self.node_by_label(labels, l)),
                    headline: other.to_string(),
                    details: Vec::new(),
                }
            }
        }
    }

    /// Where `node` is declared in the file.
    pub fn span(&self, node: &NodeRef) -> Option<Span> {
        let span = *self.spans.get(node)?;
        (span.line > 0).then_some(span)
    }

    /// The guarantee node `i` (an index of the composition) receives on its
    /// first VP, if it was given one.
    pub fn received(&self, i: usize) -> Option<Guarantee> {
        self.composition.nodes.get(i)?.received.first()?.guarantee
    }

    /// What `hsched tree` shows next to each node: per instance and parent
    /// link the guarantee that VP receives (on the first link also the form
    /// the policy uses and what it gives its children), per thread the
    /// guarantee it receives, and after the tree the problems found.
    pub fn tree_notes(&self, file: &str) -> crate::cmd::tree::Notes {
        let mut notes = crate::cmd::tree::Notes::default();
        let ns = self.file.schedulers.len();
        // (parent, child) index pairs of refusals, looked up per skipped node.
        let refused: HashSet<(usize, usize)> = self
            .composition
            .nodes
            .iter()
            .enumerate()
            .flat_map(|(p, n)| {
                n.provided
                    .iter()
                    .filter(|(_, r)| r.is_err())
                    .map(move |(c, _)| (p, *c))
            })
            .collect();
        for (i, node) in self.composition.nodes.iter().enumerate() {
            if i < ns {
                let s = &self.file.schedulers[i];
                let links = s.parents.len().max(1);
                let mut v = Vec::with_capacity(links);
                for link in 0..links {
                    v.push(self.scheduler_note(i, node, link, &refused));
                }
                notes.schedulers.insert(node.name.clone(), v);
            } else {
                notes
                    .threads
                    .insert(node.name.clone(), self.thread_note(i, node, &refused));
            }
        }
        notes.after.extend(self.notes());
        let findings = self.findings();
        if !findings.is_empty() {
            notes.after.push(format!(
                "{} guarantee problem{} (`hsched check {file}` explains):",
                findings.len(),
                if findings.len() == 1 { "" } else { "s" }
            ));
            for f in &findings {
                notes.after.push(format!("  - {}", f.headline));
            }
        }
        notes
    }

    fn scheduler_note(
        &self,
        i: usize,
        node: &NodeReport,
        link: usize,
        refused: &HashSet<(usize, usize)>,
    ) -> String {
        let s = &self.file.schedulers[i];
        // A root receives one VP per processor it owns; a uniprocessor
        // policy at the root uses one of them (the composition truncates).
        let got: Vec<Option<Guarantee>> = if s.parents.is_empty() {
            node.received.iter().map(|r| r.guarantee).collect()
        } else {
            // Received entries follow the parent links in order.
            node.received
                .get(link)
                .map(|r| vec![r.guarantee])
                .unwrap_or_default()
        };
        let mut out = match got.as_slice() {
            [] => "gets nothing".to_string(),
            [one] => format!("gets {}", opt(*one)),
            many if many.iter().all(|g| *g == many[0]) => {
                format!("gets {} ×{}", opt(many[0]), many.len())
            }
            many => format!(
                "gets {}",
                many.iter().map(|g| opt(*g)).collect::<Vec<_>>().join(" + ")
            ),
        };
        if link > 0 {
            return out;
        }
        if s.guarantee.is_some() && node.status == Status::Ok {
            out.push_str(" ✓");
        }
        let used: Vec<String> = node
            .accepted
            .iter()
            .zip(node.received.iter().filter_map(|r| r.guarantee))
            .filter(|(a, r)| a != &r && **a != Guarantee::Null)
            .map(|(a, _)| a.to_string())
            .fold(Vec::new(), |mut v, a| {
                if !v.contains(&a) {
                    v.push(a);
                }
                v
            });
        if !used.is_empty() {
            out.push_str(&format!(" (as {})", used.join(", ")));
        }
        let gives = self.gives(node);
        if !gives.is_empty() {
            out.push_str(&format!(", gives {gives}"));
        }
        out.push_str(&self.status_mark(i, node, refused));
        out
    }

    /// What an instance provides, in brief: distinct guarantees in child
    /// order, and the children it refused.
    fn gives(&self, node: &NodeReport) -> String {
        let mut given: Vec<String> = Vec::new();
        let mut refused: Vec<String> = Vec::new();
        for (c, r) in &node.provided {
            match r {
                Ok(p) => {
                    let text = p
                        .options
                        .iter()
                        .map(Guarantee::to_string)
                        .collect::<Vec<_>>()
                        .join(" or ");
                    if !given.contains(&text) {
                        given.push(text);
                    }
                }
                Err(_) => refused.push(self.composition.nodes[*c].name.clone()),
            }
        }
        let mut out = given.join(", ");
        if !refused.is_empty() {
            if !out.is_empty() {
                out.push_str("; ");
            }
            // One line of the tree: a few names, then a count.
            const SHOWN: usize = 8;
            out.push_str(&format!(
                "refuses {}",
                refused[..refused.len().min(SHOWN)].join(", ")
            ));
            if refused.len() > SHOWN {
                out.push_str(&format!(" and {} more", refused.len() - SHOWN));
            }
        }
        out
    }

    fn thread_note(
        &self,
        i: usize,
        node: &NodeReport,
        refused: &HashSet<(usize, usize)>,
    ) -> String {
        let got = node.received.first().and_then(|r| r.guarantee);
        let mut out = match got {
            Some(g) => format!("gets {g}"),
            None => "gets nothing".into(),
        };
        if let NodeKind::Thread { request: Some(req) } = &node.kind {
            if node.status == Status::Ok {
                match node.accepted.first() {
                    Some(a) if a != req && Some(*a) != got => {
                        out.push_str(&format!(" (as {a}) ✓"));
                    }
                    _ => out.push_str(" ✓"),
                }
            }
        }
        out.push_str(&self.status_mark(i, node, refused));
        out
    }

    /// ` ✗` for node `i` when it fails; for one not checked, why not.
    fn status_mark(
        &self,
        i: usize,
        node: &NodeReport,
        refused: &HashSet<(usize, usize)>,
    ) -> String {
        match node.status {
            Status::Ok => String::new(),
            Status::Failed => " ✗".into(),
            Status::Skipped => {
                // Refused by a parent (reported there), or below a failure.
                let refused = node.received.iter().find_map(|r| match r.from {
                    Source::Node(p) => {
                        let parent = self.composition.nodes.get(p)?;
                        refused.contains(&(p, i)).then(|| parent.name.clone())
                    }
                    Source::Top { .. } => None,
                });
                match refused {
                    Some(p) => format!(" ✗ (refused by {p})"),
                    None => " (not checked: a parent above it fails)".into(),
                }
            }
        }
    }

    /// The rate-monotonic applications of §6.1: every `fp` instance whose
    /// children are all threads with a `periodic` or `sporadic` workload,
    /// with its tasks
    /// in priority order (larger `priority` first; ties by period, then
    /// file order).
    pub fn rm_groups(&self) -> Vec<RmGroup> {
        let ns = self.file.schedulers.len();
        let mut out = Vec::new();
        for (i, s) in self.file.schedulers.iter().enumerate() {
            if s.policy != "fp" {
                continue;
            }
            let node = &self.composition.nodes[i];
            if node.children.is_empty() || node.children.iter().any(|&c| c < ns) {
                continue;
            }
            let mut members = Vec::new();
            for &c in &node.children {
                let t = &self.file.threads[c - ns];
                let Some(task) = t.workload.as_ref().and_then(task_of) else {
                    break;
                };
                let priority = t.params.i64("priority").ok().flatten().unwrap_or(0);
                members.push(Member {
                    index: c,
                    thread: t.name.clone(),
                    priority,
                    task,
                });
            }
            if members.len() != node.children.len() {
                continue;
            }
            members.sort_by(|a, b| {
                b.priority
                    .cmp(&a.priority)
                    .then(a.task.period.cmp(&b.task.period))
            });
            out.push(RmGroup {
                index: i,
                scheduler: s.name.clone(),
                received: self.received(i),
                status: node.status,
                members,
            });
        }
        out
    }
}

/// The task a workload is to the response-time analysis: a periodic one
/// as it is (its offset only shifts the phase, which the analysis takes at
/// its worst), a sporadic one at its shortest inter-arrival time.
fn task_of(w: &WorkloadSpec) -> Option<Task> {
    match *w {
        WorkloadSpec::Periodic {
            period,
            exec,
            deadline,
            jitter,
            ..
        } => Some(Task {
            wcet: exec,
            period,
            deadline,
            jitter,
        }),
        WorkloadSpec::Sporadic {
            min_interarrival,
            exec,
            deadline,
            ..
        } => Some(Task::periodic(exec, min_interarrival).with_deadline(deadline)),
        _ => None,
    }
}

/// One thread of a rate-monotonic group.
#[derive(Clone, Debug, PartialEq)]
pub struct Member {
    /// Its index in the composition.
    pub index: usize,
    /// Thread name.
    pub thread: String,
    /// Its FP priority (larger first).
    pub priority: i64,
    /// Its periodic task.
    pub task: Task,
}

/// A fixed-priority instance scheduling periodic threads (§6.1).
#[derive(Clone, Debug, PartialEq)]
pub struct RmGroup {
    /// The `fp` instance's index in the composition.
    pub index: usize,
    /// The `fp` instance.
    pub scheduler: String,
    /// What it receives (first VP).
    pub received: Option<Guarantee>,
    /// Its composition status.
    pub status: Status,
    /// Its threads, in priority order.
    pub members: Vec<Member>,
}

impl RmGroup {
    /// The tasks in priority order.
    pub fn tasks(&self) -> Vec<Task> {
        self.members.iter().map(|m| m.task).collect()
    }

    /// Whether the priority order is rate-monotonic: a shorter period never
    /// has a lower or equal priority than a longer one, and no two threads
    /// share a priority.
    pub fn is_rate_monotonic(&self) -> bool {
        self.members
            .windows(2)
            .all(|w| w[0].priority > w[1].priority && w[0].task.period <= w[1].task.period)
    }

    /// Threads sharing a priority (fp runs them first come, first served).
    pub fn ties(&self) -> Vec<(&str, &str, i64)> {
        self.members
            .windows(2)
            .filter(|w| w[0].priority == w[1].priority)
            .map(|w| (w[0].thread.as_str(), w[1].thread.as_str(), w[0].priority))
            .collect()
    }
}

fn opt(g: Option<Guarantee>) -> String {
    g.map_or_else(|| "nothing".to_string(), |g| g.to_string())
}

fn node_text(n: &NodeRef) -> String {
    match n {
        NodeRef::Scheduler(s) => format!("scheduler '{s}'"),
        NodeRef::Thread(t) => format!("thread '{t}'"),
    }
}

/// What would work where a scheduler is promised nothing (NULL): one
/// that needs no guarantee, or a place that gives one it can use
/// (Regehr 2001, Table 5.1).
fn null_hint(node: &str, parent: &str, needs: &str) -> String {
    let mut places = Vec::new();
    // Shares and best-effort guarantees convert from reservations.
    if needs.contains("PSBE") {
        places.push("a reservation of a `rez` that is itself guaranteed");
        places.push("a `join` under one");
    }
    if parent.starts_with("fp ") {
        places.push("the highest priority of the fp");
    }
    let places = match places.len() {
        0 => String::new(),
        1 => format!(": {}", places[0]),
        n => format!(": {}, or {}", places[..n - 1].join(", "), places[n - 1]),
    };
    format!(
        "{parent} promises it no time; a scheduler that needs no guarantee (`ts`) works here, \
         or move {node} where it receives {needs}{places}"
    )
}

/// Renders a finding like the file parser's errors: the headline, the
/// location with the quoted line, then the details.
pub fn render(f: &Finding, file: &str, text: Option<&str>, span: Option<Span>) -> String {
    let mut e = match span {
        Some(s) => hsched_config::ConfigError::at_span(file, s, &f.headline),
        None => hsched_config::ConfigError::new(file, 0, 0, &f.headline),
    };
    // `expected` goes through the parser's own line; the others follow it.
    if let Some((_, x)) = f.details.iter().find(|(k, _)| *k == "expected") {
        e = e.expected(x.clone());
    }
    let gutter = if e.line == 0 {
        1
    } else {
        e.line.to_string().len()
    };
    let mut errs = hsched_config::ConfigErrors::one(e);
    if let Some(t) = text {
        errs.fill_source(file, t);
    }
    let mut out = errs.to_string();
    let pad = " ".repeat(gutter);
    for (k, v) in f.details.iter().filter(|(k, _)| *k != "expected") {
        out.push_str(&format!("{pad} = {k}: {v}\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use hsched_core::ParamValue;
    use hsched_guarantee::ParentRef;

    fn parse(text: &str) -> Hierarchy {
        hsched_config::parse_str(text, "t.toml").unwrap_or_else(|e| panic!("{e}"))
    }

    const FILE: &str = r#"
[machine]
cpus = 2

[[scheduler]]
name = "fp"
policy = "fp"
cpus = [0]
unique_priorities = true

[[scheduler]]
name = "rez"
policy = "rez"
parent = "fp"
params = { priority = 3 }
cap = 0.9
variant = "catch-up"

[[scheduler]]
name = "ps"
policy = "ps"
cpus = [1]
quantum = "5ms"

[[scheduler]]
name = "j"
policy = "join"
parents = [{ name = "rez", amount = "2ms", period = "10ms" }, { name = "fp", priority = 1 }]
guarantee = "RESBS 2 10"

[[thread]]
name = "a"
scheduler = "ps"
params = { share = 2.5, warp = "1ms" }
guarantee = "PS 0.1"
workload = { kind = "cpu-bound" }

[[thread]]
name = "b"
scheduler = "j"
workload = { kind = "cpu-bound" }
"#;

    #[test]
    fn translates_what_the_mappings_understand() {
        let h = parse(FILE);
        let t = translate(&h);
        assert!(t.issues.is_empty(), "{:?}", t.issues);
        let g = &t.hierarchy;
        assert_eq!(g.cpus, 2);
        let fp = &g.schedulers[0];
        assert_eq!(
            fp.params,
            InstanceParams::default(),
            "unique_priorities is left out"
        );
        assert_eq!(fp.parents.len(), 1);
        assert_eq!(fp.parents[0].parent, ParentRef::Top { cpu: Some(0) });
        let rez = &g.schedulers[1];
        assert_eq!(rez.params.cap, Some(0.9));
        assert_eq!(rez.params.quantum, None);
        assert_eq!(rez.parents[0].params.priority, Some(3));
        let ps = &g.schedulers[2];
        assert_eq!(
            ps.params.quantum,
            Some(hsched_core::Duration::from_millis(5))
        );
        let j = &g.schedulers[3];
        assert_eq!(j.parents.len(), 2);
        assert_eq!(
            j.parents[0].params.amount,
            Some(hsched_core::Duration::from_millis(2))
        );
        assert_eq!(
            j.parents[0].params.period,
            Some(hsched_core::Duration::from_millis(10))
        );
        assert_eq!(j.parents[1].params.priority, Some(1));
        assert_eq!(
            j.request.map(|r| r.to_string()).as_deref(),
            Some("RESBS 2 10")
        );
        let a = &g.threads[0];
        assert_eq!(a.parent.params.share, Some(2.5));
        assert_eq!(
            a.parent.params.warp,
            Some(hsched_core::Duration::from_millis(1))
        );
        assert_eq!(a.request.map(|r| r.to_string()).as_deref(), Some("PS 0.1"));
        assert_eq!(g.threads[1].request, None);
        // And it composes: b gets the join's soft reservation.
        let an = analyze(&h);
        assert!(an.is_ok(), "{:?}", an.findings());
        assert_eq!(
            an.composition
                .received("b")
                .map(|g| g.to_string())
                .as_deref(),
            Some("RESBS 2 10")
        );
        // A warped child voids PSBE: a gets PS (2.5 of 2.5 shares, one VP).
        assert_eq!(
            an.composition
                .received("a")
                .map(|g| g.to_string())
                .as_deref(),
            Some("PS 1")
        );
    }

    #[test]
    fn unreadable_values_are_issues_not_panics() {
        let mut h = parse(FILE);
        h.schedulers[1]
            .params
            .insert("cap", ParamValue::Str("lots".into()));
        h.threads[0].params.insert("share", ParamValue::Bool(true));
        h.threads[1].guarantee = Some("RESBX 1 2".into());
        let a = analyze(&h);
        let f = a.findings();
        assert_eq!(f.len(), 3, "{f:?}");
        assert!(f.iter().all(|x| x.code == "unreadable"));
        assert_eq!(f[0].node, Some(NodeRef::Scheduler("rez".into())));
        assert!(f[0].headline.contains("cap"), "{}", f[0].headline);
        assert!(f[2].headline.contains("RESBX"), "{}", f[2].headline);
        assert!(!a.is_ok());
    }

    #[test]
    fn findings_are_located_and_rendered_like_file_errors() {
        let text = r#"[[scheduler]]
name = "desktop"
policy = "ts"

[[scheduler]]
name = "rt"
policy = "rez"
parent = "desktop"
"#;
        let h = parse(text);
        let a = analyze(&h);
        let f = a.findings();
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].code, "unacceptable");
        let span = a.span(f[0].node.as_ref().unwrap());
        assert_eq!(span.map(|s| s.line), Some(5));
        let shown = render(&f[0], "t.toml", Some(text), span);
        assert!(shown.starts_with("error: rez 'rt' under ts 'desktop' receives NULL, which Rez cannot use\n --> t.toml:5:1\n"), "{shown}");
        assert!(shown.contains("\n  = expected: ALL or RESU\n"), "{shown}");
        assert!(
            shown.contains("\n  = path: top → ts 'desktop' → rez 'rt'\n"),
            "{shown}"
        );
    }

    #[test]
    fn groups_are_fp_instances_of_periodic_threads() {
        let h = parse(include_str!("../../../examples/home-computer.toml"));
        let a = analyze(&h);
        let g = a.rm_groups();
        assert_eq!(g.len(), 1);
        assert_eq!(g[0].scheduler, "RM");
        assert_eq!(
            g[0].received.map(|r| r.to_string()).as_deref(),
            Some("RESBS 1.5 5")
        );
        let names: Vec<&str> = g[0].members.iter().map(|m| m.thread.as_str()).collect();
        assert_eq!(names, ["T2", "T3"]);
        assert!(g[0].is_rate_monotonic());
        assert!(g[0].ties().is_empty());
        // Inverted priorities are reported, and a tie named.
        let mut h2 = h.clone();
        for t in &mut h2.threads {
            if t.name == "T2" {
                t.params.insert("priority", ParamValue::Int(1));
            }
        }
        let g = analyze(&h2).rm_groups();
        assert!(!g[0].is_rate_monotonic());
        assert_eq!(g[0].ties(), vec![("T2", "T3", 1)]);
    }
}
