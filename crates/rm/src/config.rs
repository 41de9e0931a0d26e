//! A [`Manager`] from a hierarchy file: its schedulers and threads as the
//! abstract hierarchy the guarantee mappings check (Regehr 2001, §5.1.2),
//! its `[[principal]]`s, and its `[rm]` rules and delegations (§8.2,
//! §8.4).
//!
//! The translation gives each instance the parameters its guarantee
//! mapping reads (`rez` `cap`, `limit` `amount`/`period`, `ps` `quantum`,
//! `realrate` `overload`/`floor`/`default_period`) and each edge the
//! parameters parents keep per child, as `hsched check` does; a policy
//! without a mapping is treated as best effort. Stolen time and timed
//! operations are left out: the manager places threads in the hierarchy
//! as the file declares it.

use std::fmt;

use hsched_config::rm::{PrincipalKind as FileKind, RmRuleKind};
use hsched_config::Hierarchy as File;
use hsched_core::Params;
use hsched_guarantee::mapping::{BestEffort, MappingContext, RateClass};
use hsched_guarantee::{
    EdgeParams, Guarantee, Hierarchy, InstanceParams, ParentSpec, Registry, SchedulerSpec,
    ThreadSpec,
};

use crate::manager::{Manager, RuleEntry};
use crate::principal::{Principal, SYSTEM};
use crate::rules::{Cap, FairShare, Keep, Minimum, MostImportant};

/// A hierarchy file the manager cannot be built from (a file that passed
/// `hsched check` has none; they guard a hand-built model).
#[derive(Clone, Debug, PartialEq)]
pub struct ConfigError(pub String);

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ConfigError {}

fn read<T, E: fmt::Display>(r: Result<Option<T>, E>, what: &str) -> Result<Option<T>, ConfigError> {
    r.map_err(|e| ConfigError(format!("{what}: {e}")))
}

fn instance(policy: &str, p: &Params, what: &str) -> Result<InstanceParams, ConfigError> {
    let mut out = InstanceParams::default();
    match policy {
        "rez" => out.cap = read(p.f64("cap"), what)?,
        "limit" => {
            out.amount = read(p.duration("amount"), what)?;
            out.period = read(p.duration("period"), what)?;
        }
        "ps" | "sfq" => out.quantum = read(p.duration("quantum"), what)?,
        "realrate" => {
            out.overload = read(p.f64("overload"), what)?;
            out.floor = read(p.f64("floor"), what)?;
            out.default_period = read(p.duration("default_period"), what)?;
        }
        _ => {}
    }
    Ok(out)
}

fn edge(p: &Params, what: &str) -> Result<EdgeParams, ConfigError> {
    let class = match read(p.str("class"), what)? {
        None => None,
        Some(c) => Some(RateClass::parse(c).ok_or_else(|| {
            ConfigError(format!(
                "{what}: `class` = \"{c}\" is not a real-rate class"
            ))
        })?),
    };
    Ok(EdgeParams {
        priority: read(p.i64("priority"), what)?,
        share: read(p.f64("share"), what)?,
        warp: read(p.duration("warp"), what)?,
        amount: read(p.duration("amount"), what)?,
        period: read(p.duration("period"), what)?,
        proportion: read(p.f64("proportion"), what)?,
        class,
    })
}

fn guarantee(text: Option<&str>, what: &str) -> Result<Option<Guarantee>, ConfigError> {
    text.map(|t| {
        t.parse::<Guarantee>()
            .map_err(|e| ConfigError(format!("{what}: guarantee \"{t}\": {e}")))
    })
    .transpose()
}

/// The abstract hierarchy of a file's schedulers and threads.
///
/// # Errors
/// A value the mappings cannot read.
pub fn abstract_hierarchy(f: &File) -> Result<Hierarchy, ConfigError> {
    let cpus =
        u32::try_from(f.machine.cpus).map_err(|_| ConfigError("too many processors".into()))?;
    let mut h = Hierarchy::new(cpus);
    for s in &f.schedulers {
        let what = format!("scheduler `{}`", s.name);
        let mut spec = SchedulerSpec::new(&s.name, &s.policy)
            .with_params(instance(&s.policy, &s.params, &what)?);
        if s.parents.is_empty() {
            if s.cpus.is_empty() {
                spec = spec.under(ParentSpec::top());
            }
            for &c in &s.cpus {
                spec = spec.under(ParentSpec::top_cpu(u32::try_from(c).unwrap_or(u32::MAX)));
            }
        }
        for p in &s.parents {
            let mut e = ParentSpec::scheduler(&p.name);
            e.params = edge(&p.params, &what)?;
            spec = spec.under(e);
        }
        spec.request = guarantee(s.guarantee.as_deref(), &what)?;
        h.add_scheduler(spec);
    }
    for t in &f.threads {
        let what = format!("thread `{}`", t.name);
        let mut e = ParentSpec::scheduler(&t.scheduler);
        e.params = edge(&t.params, &what)?;
        let mut spec = ThreadSpec::new(&t.name, e);
        spec.request = guarantee(t.guarantee.as_deref(), &what)?;
        h.add_thread(spec);
    }
    Ok(h)
}

fn unmapped(
    _: &InstanceParams,
    _: &MappingContext,
) -> Result<Box<dyn hsched_guarantee::Mapping>, String> {
    Ok(Box::new(BestEffort::new(
        "unmapped",
        "a policy without a guarantee mapping",
    )))
}

/// The guarantee mappings, with every policy of `hsched_policies` that has
/// none analysed as best effort (it promises its children nothing).
pub fn registry() -> Registry {
    let mut r = Registry::builtin();
    let known: Vec<String> = r.names().map(String::from).collect();
    for p in hsched_policies::registry() {
        if !known.iter().any(|k| k == p.name) {
            r.register(p.name, unmapped);
        }
    }
    r
}

/// A manager for the file `f`: its hierarchy, principals, rules and
/// delegations.
///
/// # Errors
/// A value the mappings cannot read, or a delegation the rules of §8.2 do
/// not allow (a principal delegating a guarantee it does not own).
pub fn from_config(f: &File) -> Result<Manager, ConfigError> {
    let mut m = Manager::with_registry(abstract_hierarchy(f)?, registry());
    for p in &f.principals {
        let mut q = match p.rm.kind {
            FileKind::User => Principal::user(&p.name, p.rm.uid),
            FileKind::Group => Principal::group(&p.name, p.rm.gid),
        };
        q.groups.clone_from(&p.rm.groups);
        m.add_principal(q).map_err(|e| ConfigError(e.message))?;
    }
    if let Some(n) = f.rm.max_requests {
        m.set_max_requests(usize::try_from(n).unwrap_or(usize::MAX));
    }
    for r in &f.rm.rules {
        let mut entry = match &r.kind {
            RmRuleKind::Cap { principal, max } => RuleEntry::system(Cap {
                principal: principal.clone(),
                max: *max,
            }),
            RmRuleKind::Keep { principal, share } => RuleEntry::system(Keep {
                principal: principal.clone(),
                share: *share,
            }),
            RmRuleKind::FairShare => RuleEntry::system(FairShare),
            RmRuleKind::MostImportant { principal, limit } => RuleEntry::system(MostImportant {
                principal: principal.clone(),
                limit: *limit,
            }),
            RmRuleKind::Minimum { period, amount } => RuleEntry::system(Minimum {
                period: *period,
                amount: *amount,
            }),
        };
        if let Some(o) = &r.owner {
            entry.owner.clone_from(o);
        }
        if let Some(on) = &r.on {
            entry = entry.on(on);
        }
        if let Some(t) = &r.then {
            entry = entry.then(t);
        }
        m.add_rule(entry);
    }
    for g in &f.rm.grants {
        let by = g.by.as_deref().unwrap_or(SYSTEM);
        m.delegate(by, &g.scheduler, &g.to).map_err(|e| {
            ConfigError(format!(
                "[[rm.grant]] of `{}` to `{}`: {}",
                g.scheduler, g.to, e.message
            ))
        })?;
    }
    Ok(m)
}
