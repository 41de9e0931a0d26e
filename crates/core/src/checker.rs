//! The protocol checker (Regehr 2001, §4.3.4): after an input is fully
//! processed, every processor runs exactly one thread or idles, no thread
//! runs twice, every held processor is passed on, no VP runs on a processor
//! its parent lost, and each policy's own invariants hold. Per-action
//! transition checks (Fig 4.2) happen in `Hsi::apply`.

use crate::ctx::Ctx;
use crate::ids::{InstanceId, Node, ThreadId, VpId};
use crate::policy::Policy;
use crate::state::{State, VpState};
use crate::violation::{Rule, Violation};

fn push(
    out: &mut Vec<Violation>,
    st: &State,
    rule: Rule,
    culprit: Node,
    vp: Option<VpId>,
    detail: String,
) {
    out.push(Violation {
        rule,
        culprit: st.node_name(culprit),
        vp,
        detail,
    });
}

/// Checks the whole state; violations are appended to `st.violations`.
pub(crate) fn check(st: &mut State, policies: &mut [Option<Box<dyn Policy>>]) {
    // Violations go straight to `st.violations` (empty here: `finish`
    // takes them after every input); the tables are reused scratch.
    let mut out = std::mem::take(&mut st.violations);
    let ncpu = st.cpus.len();
    // Which thread each CPU runs according to the leaf VPs.
    let mut leaf = std::mem::take(&mut st.check_leaf);
    leaf.clear();
    leaf.resize(ncpu, None);
    for (t, th) in st.threads.iter().enumerate() {
        if !th.live {
            continue;
        }
        let t = ThreadId(t as u32);
        let state = st.vps[th.vp.index()].state;
        if th.runnable == (state == VpState::Waiting) {
            let detail = format!("runnable={} but its VP is {state:?}", th.runnable);
            push(
                &mut out,
                st,
                Rule::ThreadStateMismatch,
                Node::Thread(t),
                Some(th.vp),
                detail,
            );
            continue;
        }
        if let VpState::Running(c) = state {
            if let Some(other) = leaf[c.index()] {
                let detail = format!(
                    "{c} runs both '{}' and '{}'",
                    st.threads[other.index()].name,
                    th.name
                );
                push(
                    &mut out,
                    st,
                    Rule::CpuRunsTwo,
                    Node::Thread(t),
                    Some(th.vp),
                    detail,
                );
            }
            leaf[c.index()] = Some(t);
        }
    }
    for (c, &by_vps) in leaf.iter().enumerate() {
        if st.cpus[c].running != by_vps {
            let detail = format!(
                "dispatch table says {:?} but the VPs say {by_vps:?}",
                st.cpus[c].running
            );
            push(&mut out, st, Rule::CpuRunsTwo, Node::Top, None, detail);
        }
    }
    // Every running VP's parent holds its processor.
    for i in 0..st.vps.len() {
        let v = &st.vps[i];
        if !v.live {
            continue;
        }
        if let VpState::Running(c) = v.state {
            let ok = match v.parent {
                Node::Top => v.top_cpu == Some(c),
                Node::Instance(p) => st.insts[p.index()]
                    .parents
                    .iter()
                    .any(|&pv| st.vps[pv.index()].state == VpState::Running(c)),
                Node::Thread(_) => false,
            };
            if !ok {
                let parent = v.parent;
                push(
                    &mut out,
                    st,
                    Rule::RunningWithoutParentCpu,
                    parent,
                    Some(VpId(i as u32)),
                    format!("child VP still runs on {c}"),
                );
            }
        }
    }
    st.check_leaf = leaf;
    // Every processor an instance holds is granted to exactly one child.
    let mut count = std::mem::take(&mut st.check_count);
    count.clear();
    count.resize(ncpu, 0);
    for i in 0..st.insts.len() {
        if !st.insts[i].live {
            continue;
        }
        for &vp in &st.insts[i].children {
            if let VpState::Running(c) = st.vps[vp.index()].state {
                count[c.index()] += 1;
            }
        }
        let me = Node::Instance(InstanceId(i as u32));
        for k in 0..st.insts[i].parents.len() {
            let pv = st.insts[i].parents[k];
            if let VpState::Running(c) = st.vps[pv.index()].state {
                match count[c.index()] {
                    1 => {}
                    0 => push(
                        &mut out,
                        st,
                        Rule::HeldCpuNotPassedOn,
                        me,
                        Some(pv),
                        format!("holds {c} but granted it to no child"),
                    ),
                    n => push(
                        &mut out,
                        st,
                        Rule::CpuRunsTwo,
                        me,
                        Some(pv),
                        format!("granted {c} to {n} children"),
                    ),
                }
            }
        }
        for &vp in &st.insts[i].children {
            if let VpState::Running(c) = st.vps[vp.index()].state {
                count[c.index()] = 0;
            }
        }
    }
    st.check_count = count;
    for (i, p) in policies.iter().enumerate() {
        if let Some(p) = p {
            let me = InstanceId(i as u32);
            let base = st.work.len();
            let ctx = Ctx {
                st: &mut *st,
                me,
                base,
                revoked: None,
            };
            if let Err(detail) = p.check_invariants(&ctx) {
                push(
                    &mut out,
                    st,
                    Rule::PolicyInvariant,
                    Node::Instance(me),
                    None,
                    detail,
                );
            }
        }
    }
    st.violations = out;
}
