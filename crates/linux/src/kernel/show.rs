//! What `hsched check --enforce kernel` and `hsched tree --enforce kernel`
//! print: the mapping of every node, the guarantee the kernel's
//! enforcement gives it, what is refused and why.

use super::compile::{Mechanism, Node, NodeMap, Plan};
use hsched_config::Hierarchy;

/// One line per node: what it becomes and what the kernel guarantees it.
pub fn node_note(n: &NodeMap) -> String {
    let place = match (&n.mechanism, n.partition) {
        (Mechanism::Deadline { .. }, Some(_)) => format!(
            " on CPU {} (its root's root domain, an exclusive cpuset)",
            crate::cpuset::cpu_list(&n.cpus)
        ),
        _ => String::new(),
    };
    format!("→ {}{place} (kernel: gets {})", n.mechanism, n.guarantee)
}

/// The kernel check of `h` on this machine: the plan, and the text of
/// `hsched check --enforce kernel` (the mapping of every node, refusals,
/// shortfalls, the model's notes, and a last verdict line).
pub fn check_text(h: &Hierarchy, plan: &Plan) -> String {
    let mut out = String::new();
    let width = plan
        .nodes
        .iter()
        .map(|n| n.node.to_string().chars().count())
        .max()
        .unwrap_or(0);
    out.push_str(&format!("{}: the kernel backend's mapping\n", h.file));
    for n in &plan.nodes {
        let label = n.node.to_string();
        let pad = width.saturating_sub(label.chars().count());
        out.push_str(&format!("  {label}{}  {}\n", " ".repeat(pad), node_note(n)));
        if let (Node::Thread(_), Some(note)) = (&n.node, &n.note) {
            out.push_str(&format!("  {}  {}\n", " ".repeat(width), note));
        }
    }
    for r in &plan.refusals {
        out.push_str(&format!("refused: {r}\n"));
    }
    if let Some(a) = &plan.admission.refused {
        out.push_str(&format!("refused: {a}\n"));
    }
    for o in &plan.other {
        out.push_str(&format!("refused: {o}\n"));
    }
    for s in &plan.shortfalls {
        out.push_str(&format!("guarantee problem: {s}\n"));
    }
    for n in &plan.notes {
        out.push_str(n);
        out.push('\n');
    }
    let problems = plan.refusals.len()
        + usize::from(plan.admission.refused.is_some())
        + plan.other.len()
        + plan.shortfalls.len();
    if problems == 0 {
        out.push_str(&format!(
            "{}: ok for --enforce kernel ({} nodes mapped; every requested guarantee holds under the kernel's enforcement)\n",
            h.file,
            plan.nodes.len()
        ));
    } else {
        out.push_str(&format!(
            "{}: {problems} problem{} for --enforce kernel\n",
            h.file,
            if problems == 1 { "" } else { "s" }
        ));
    }
    out
}

/// The plan of `h` for the kernel backend on this machine, as `hsched run
/// --enforce kernel` would compile it (no system call changes anything).
pub fn plan_here(h: &Hierarchy) -> Plan {
    let opts = crate::RunOptions::default();
    let cpus = crate::managed_cpus(h, &opts).unwrap_or_else(|_| crate::sys::online_cpus());
    super::compile(h, &super::machine_model(), &cpus, super::run::others_held())
}
