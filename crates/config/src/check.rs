//! Checks that need more than one table: parameters against the policies'
//! declared specs, the scheduler graph (parents, cycles, roots and their
//! processors), and the timeline of thread creations and `[[at]]`
//! operations (every name an operation uses exists at that time).

use crate::error::{did_you_mean, one_of, one_of_these, ConfigError, ConfigErrors};
use crate::model::*;
use crate::read::{duration_of, Diag};
use hsched_core::{Duration, ParamSpec, ParamValue, Params, PolicyError};
use hsched_policies::PolicyInfo;
use std::collections::{BTreeMap, BTreeSet};

/// Deepest nesting of schedulers, a root being level 1: far beyond the few
/// levels real hierarchies use, and small enough that a tree printed with
/// one indent per level stays readable (and of linear size).
pub(crate) const MAX_LEVELS: usize = 64;

/// The policy called `name` in `policies`.
pub(crate) fn find_policy<'p>(policies: &'p [PolicyInfo], name: &str) -> Option<&'p PolicyInfo> {
    policies.iter().find(|p| p.name == name)
}

fn keys_of(specs: &[ParamSpec]) -> Vec<&'static str> {
    specs.iter().map(|s| s.key).collect()
}

/// What is wrong with `v` as a value of the declared `kind`, if anything:
/// (message, expected, hint).
pub(crate) fn check_kind(
    key: &str,
    v: &ParamValue,
    kind: &str,
) -> Option<(String, String, Option<String>)> {
    let k = kind.trim().to_ascii_lowercase();
    // Alternatives (`number or "a/b"`, `"rr" or "fp"`) are left to the
    // policy's own parser, which runs when the scheduler is built.
    if k.contains(" or ") || k.contains('"') {
        return None;
    }
    if k.starts_with("duration") || k == "time" {
        return match duration_of(key, v) {
            Err(p) => Some((p.message, p.expected, p.hint)),
            // Policies turn their durations into timers, quanta and
            // budgets: a nanosecond quantum would make a run of hours.
            Ok(d) if d > Duration::ZERO && d < MIN_INTERVAL => Some((
                format!("`{key}` = {d} is shorter than {MIN_INTERVAL}, the shortest interval hsched models"),
                format!("0 or at least {MIN_INTERVAL}"),
                None,
            )),
            // `duration, at least 20us`: a duration the policy divides.
            Ok(d) => {
                let (_, least) = kind.split_once("at least ")?;
                let least = hsched_core::time::parse_duration(least.trim(), None).ok()?;
                (d > Duration::ZERO && d < least).then(|| {
                    (
                        format!("`{key}` = {d} is shorter than {least}, the least this policy takes"),
                        format!("0 or at least {least}"),
                        Some(format!("the policy divides `{key}` (`hsched policies` says how), and each part must be at least {MIN_INTERVAL}, the shortest interval hsched models")),
                    )
                })
            }
        };
    }
    let bad = |what: &str| {
        Some((
            format!("`{key}` must be {what}, found `{v}`"),
            what.to_string(),
            None,
        ))
    };
    if k.starts_with("int") {
        let ParamValue::Int(n) = v else {
            let hint = match v {
                ParamValue::Str(s) if s.trim().parse::<i64>().is_ok() => {
                    Some(format!("remove the quotes: `{key} = {}`", s.trim()))
                }
                _ => None,
            };
            return Some((
                format!("`{key}` must be an integer, found `{v}`"),
                "an integer".into(),
                hint,
            ));
        };
        // `integer A..=B`: a range.
        if let Some((lo, hi)) = k
            .split_whitespace()
            .nth(1)
            .and_then(|r| r.split_once("..="))
        {
            if let (Ok(lo), Ok(hi)) = (lo.parse::<i64>(), hi.parse::<i64>()) {
                if *n < lo || *n > hi {
                    return Some((
                        format!("`{key}` = {n} is out of range"),
                        format!("an integer from {lo} to {hi}"),
                        None,
                    ));
                }
            }
        }
        return None;
    }
    if k.starts_with("bool") {
        return (!matches!(v, ParamValue::Bool(_)))
            .then(|| bad("true or false"))
            .flatten();
    }
    if k.starts_with("string") {
        return (!matches!(v, ParamValue::Str(_)))
            .then(|| bad("a string"))
            .flatten();
    }
    if k.starts_with("number") || k.starts_with("float") || k.starts_with("fraction") {
        return match v {
            ParamValue::Int(_) | ParamValue::Float(_) => number_range(key, v, &k),
            ParamValue::Str(s) => Some((
                format!("`{key}` must be a number, found the string \"{s}\""),
                "a number such as `0.25`".into(),
                s.trim()
                    .parse::<f64>()
                    .is_ok()
                    .then(|| format!("remove the quotes: `{key} = {}`", s.trim())),
            )),
            _ => bad("a number"),
        };
    }
    None
}

/// `number A..=B`: a number out of its declared range, checked with the
/// file rather than when a thread is created mid-run.
fn number_range(key: &str, v: &ParamValue, kind: &str) -> Option<(String, String, Option<String>)> {
    let x = match v {
        ParamValue::Int(n) => *n as f64,
        ParamValue::Float(x) => *x,
        _ => return None,
    };
    let (lo, hi) = kind.split_whitespace().nth(1)?.split_once("..=")?;
    let (l, h) = (lo.parse::<f64>().ok()?, hi.parse::<f64>().ok()?);
    if (l..=h).contains(&x) {
        return None;
    }
    // 1e-300, not three hundred zeros.
    let shown = if x != 0.0 && !(1e-4..1e15).contains(&x.abs()) {
        format!("{x:e}")
    } else {
        v.to_string()
    };
    Some((
        format!("`{key}` = {shown} is out of range"),
        format!("a number from {lo} to {hi}"),
        None,
    ))
}

/// The first of `sites` the file has, else the first (which falls back to
/// a span).
fn first_site<const N: usize>(d: &Diag<'_>, sites: [String; N]) -> String {
    let i = sites.iter().position(|s| d.has(s)).unwrap_or(0);
    sites[i].clone()
}

/// Checks `amount`/`period` pairs wherever they appear: a zero period, or
/// an amount larger than its period.
fn check_amount_period(d: &mut Diag<'_>, params: &Params, path: &str, fallback: Span, whose: &str) {
    let dur = |k: &str| params.get(k).and_then(|v| duration_of(k, v).ok());
    let period = dur("period");
    if period == Some(Duration::ZERO) {
        let e = d
            .make(
                &format!("{path}.period="),
                fallback,
                format!("{whose} has a zero `period`"),
            )
            .expected("a period longer than zero");
        d.push(e);
        return;
    }
    if let (Some(a), Some(p)) = (dur("amount"), period) {
        if a > p {
            // A change may give only the period.
            let site = first_site(
                d,
                [
                    format!("{path}.amount="),
                    format!("{path}.period="),
                    path.to_string(),
                ],
            );
            let e = d
                .make(&site, fallback, format!("{whose}: `amount` ({a}) is larger than `period` ({p})"))
                .expected(format!("an amount of at most the period ({p})"))
                .hint("a reservation cannot give more than the whole processor: lower `amount` or raise `period`");
            d.push(e);
        }
    }
}

/// Checks parameters against a spec list: unknown keys (with the closest
/// accepted one), missing required keys, values of the wrong kind, and
/// amount/period consistency. `path` is the site prefix of the parameter
/// table (`path.key` for keys, `path.key=` for values).
#[allow(clippy::too_many_arguments)] // the parameters, and who they are for
pub(crate) fn check_params(
    d: &mut Diag<'_>,
    specs: &[ParamSpec],
    params: &Params,
    path: &str,
    fallback: Span,
    whose: &str,
    owner: &str,
    policy: &str,
) {
    let keys = keys_of(specs);
    let described = format!("`hsched policies {policy}` describes the parameters {owner} take");
    let mut suggested: Vec<&str> = Vec::new();
    for (k, v) in params.iter() {
        match specs.iter().find(|s| s.key == k) {
            None => {
                let close = crate::error::closest(k, keys.iter().copied());
                suggested.extend(close);
                let e = d
                    .make(
                        &format!("{path}.{k}"),
                        fallback,
                        format!("unknown parameter `{k}` for {whose}"),
                    )
                    .expected(if keys.is_empty() {
                        format!("no parameters: {owner} take none")
                    } else {
                        format!("{} (what {owner} take)", one_of(&keys))
                    })
                    .hint(match close {
                        Some(c) => format!("did you mean `{c}`?"),
                        None => described.clone(),
                    });
                d.push(e);
            }
            Some(spec) => {
                if let Some((msg, exp, hint)) = check_kind(k, v, spec.kind) {
                    let e = d
                        .make(&format!("{path}.{k}="), fallback, format!("{whose}: {msg}"))
                        .expected(exp)
                        .maybe_hint(hint);
                    d.push(e);
                }
            }
        }
    }
    for s in specs {
        if s.default.eq_ignore_ascii_case("required")
            && params.get(s.key).is_none()
            && !suggested.contains(&s.key)
        {
            let site = if d.has(path) {
                path.to_string()
            } else {
                format!("{path}!")
            };
            let e = d
                .make(
                    &site,
                    fallback,
                    format!("{whose} has no `{}`, which {owner} need", s.key),
                )
                .expected(format!(
                    "`{} = ...` ({}{})",
                    s.key,
                    s.kind,
                    if s.doc.is_empty() {
                        String::new()
                    } else {
                        format!(": {}", s.doc)
                    }
                ))
                .hint(described.clone());
            d.push(e);
        }
    }
    check_amount_period(d, params, path, fallback, whose);
}

/// Checks the parent-side parameters a child registers with a scheduler of
/// policy `parent`.
pub(crate) fn check_child_params(
    d: &mut Diag<'_>,
    parent: &PolicyInfo,
    parent_name: &str,
    params: &Params,
    path: &str,
    fallback: Span,
    whose: &str,
) {
    let owner = format!("children of `{parent_name}` (policy `{}`)", parent.name);
    let before = d.errs.len();
    check_params(
        d,
        parent.child_params,
        params,
        path,
        fallback,
        whose,
        &owner,
        parent.name,
    );
    // A reservation of nothing: the parent refuses it when the child is
    // created, which in a run may be long after the file was read.
    let amount = params
        .get("amount")
        .and_then(|v| duration_of("amount", v).ok());
    if amount == Some(Duration::ZERO) {
        let e = d
            .make(
                &format!("{path}.amount="),
                fallback,
                format!("{whose} has a zero `amount`"),
            )
            .expected("an amount longer than zero");
        d.push(e);
    }
    // What only the policy knows (a class name, a value the declared kind
    // cannot express), once the keys and kinds are right: otherwise the
    // run would refuse the child when it creates it.
    if d.errs.len() == before {
        if let Err(e) = (parent.check_child)(params) {
            let (site, message) = match &e {
                // A merged key a change does not give has no site.
                PolicyError::Param(p) if params.get(&p.key).is_some() => (
                    first_site(d, [format!("{path}.{}=", p.key), path.to_string()]),
                    format!("{whose}: `{}`: {}", p.key, p.message),
                ),
                _ => (path.to_string(), format!("{whose}: {e}")),
            };
            let e = d.make(&site, fallback, message);
            d.push(e);
        }
    }
}

/// Whether `key` is one a scheduler of policy `info` writes into its
/// children's parameters itself (coop's OUT and policing keys): it drops
/// them from what a child registers with and ignores them in a change.
fn written(info: &PolicyInfo, key: &str) -> bool {
    info.child_params
        .iter()
        .any(|s| s.key == key && s.default.eq_ignore_ascii_case("written"))
}

/// The parameters a scheduler of policy `info` keeps for a child that
/// registers with `params`.
fn kept(info: &PolicyInfo, params: &Params) -> Params {
    let mut out = Params::new();
    for (k, v) in params.iter().filter(|(k, _)| !written(info, k)) {
        out.insert(k, v.clone());
    }
    out
}

/// A child's parameters after a `set-params` of `change`, merged into
/// `current` as the policy's `msg` does (`PolicyInfo::merge_change`),
/// without the keys the policy writes itself.
fn changed(info: &PolicyInfo, current: &Params, change: &Params) -> Params {
    (info.merge_change)(current, &kept(info, change))
}

/// Checks the parameters a thread takes along when an operation moves it
/// without giving new ones (`set-default` with `move_threads`, or
/// `end-reservation` to the default) against the policy `info` of its new
/// scheduler: the keys, their kinds, then what only the policy knows.
/// `what` opens each message. Returns whether they suit.
fn check_carried(
    d: &mut Diag<'_>,
    info: &PolicyInfo,
    params: &Params,
    site: &str,
    fallback: Span,
    what: &str,
    hint: &str,
) -> bool {
    let before = d.errs.len();
    let keys = keys_of(info.child_params);
    for (k, v) in params.iter() {
        let e = match info.child_params.iter().find(|s| s.key == k) {
            None => d
                .make(
                    site,
                    fallback,
                    format!("{what}: its parameter `{k}` is not accepted there"),
                )
                .expected(if keys.is_empty() {
                    format!("no parameters (policy `{}`)", info.name)
                } else {
                    one_of(&keys)
                }),
            Some(spec) => match check_kind(k, v, spec.kind) {
                Some((msg, exp, _)) => d
                    .make(site, fallback, format!("{what}: {msg}"))
                    .expected(exp),
                None => continue,
            },
        };
        d.push(e.hint(hint));
    }
    if d.errs.len() == before {
        if let Err(e) = (info.check_child)(params) {
            let e = d.make(site, fallback, format!("{what}: {e}")).hint(hint);
            d.push(e);
        }
    }
    d.errs.len() == before
}

/// What a child takes of its scheduler beside a place: what it holds
/// (`PolicyInfo::exclusive`) and its load (`PolicyInfo::admission`).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Seat {
    holds: Option<(&'static str, i64)>,
    load: u128,
}

impl Seat {
    /// The seat of a child with parent-side `params` (`None`: not known,
    /// so nothing) under an instance of policy `info` with `instance`.
    fn of(info: &PolicyInfo, instance: &Params, params: Option<&Params>) -> Seat {
        let Some(params) = params else {
            return Seat::default();
        };
        Seat {
            holds: info.exclusive.and_then(|rule| rule(instance, params)),
            load: info.admission.map_or(0, |a| (a.load)(instance, params)),
        }
    }

    /// The seat of such a child under scheduler `name`, if it exists.
    fn under(
        policies: &[PolicyInfo],
        live: &BTreeMap<String, Live>,
        name: &str,
        params: Option<&Params>,
    ) -> Seat {
        live.get(name)
            .and_then(|l| {
                Some(Seat::of(
                    find_policy(policies, &l.policy)?,
                    &l.params,
                    params,
                ))
            })
            .unwrap_or_default()
    }
}

/// A child of a scheduler, as the checks count children.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Kid {
    Sched(String),
    Thread(usize),
}

impl Kid {
    /// The child for a message; `names` are the file's threads.
    fn name(&self, names: &[ThreadSpec]) -> String {
        match self {
            Kid::Sched(s) => format!("scheduler `{s}`"),
            Kid::Thread(t) => match names.get(*t) {
                Some(t) => format!("thread `{}`", t.name),
                None => format!("thread #{}", t + 1),
            },
        }
    }
}

/// Who is under whom, with what they hold and their loads, kept as
/// children arrive and leave so that a check costs a lookup, not a pass
/// over every child.
#[derive(Default)]
struct Family {
    /// The children of each scheduler.
    kids: BTreeMap<String, BTreeSet<Kid>>,
    /// What a child holds under a policy with an exclusive rule:
    /// (scheduler, what, value) → the child.
    held: BTreeMap<(String, &'static str, i64), Kid>,
    /// The sum of the loads of each scheduler's children.
    load: BTreeMap<String, u128>,
    /// Where each thread is counted, and its seat there.
    thread_at: BTreeMap<usize, (String, Seat)>,
}

impl Family {
    fn add(&mut self, parent: &str, kid: Kid, seat: Seat) {
        if let Some((what, v)) = seat.holds {
            self.held
                .entry((parent.to_string(), what, v))
                .or_insert(kid.clone());
        }
        if seat.load > 0 {
            *self.load.entry(parent.to_string()).or_default() += seat.load;
        }
        self.kids.entry(parent.to_string()).or_default().insert(kid);
    }

    /// Removes `kid` from under `parent`, with the `seat` it took there;
    /// nothing when it was not counted there (it was refused).
    fn remove(&mut self, parent: &str, kid: &Kid, seat: Seat) {
        if !self.kids.get_mut(parent).is_some_and(|k| k.remove(kid)) {
            return;
        }
        if let Some((what, v)) = seat.holds {
            let key = (parent.to_string(), what, v);
            if self.held.get(&key) == Some(kid) {
                self.held.remove(&key);
            }
        }
        if let Some(l) = self.load.get_mut(parent) {
            *l = l.saturating_sub(seat.load);
        }
    }

    /// Counts thread `t` where `place` says (scheduler and seat there), or
    /// nowhere.
    fn place_thread(&mut self, t: usize, place: Option<(String, Seat)>) {
        if self.thread_at.get(&t) == place.as_ref() {
            return;
        }
        if let Some((s, seat)) = self.thread_at.remove(&t) {
            self.remove(&s, &Kid::Thread(t), seat);
        }
        if let Some((s, seat)) = place {
            self.add(&s, Kid::Thread(t), seat);
            self.thread_at.insert(t, (s, seat));
        }
    }
}

/// What the timeline walk knows at an instant: the schedulers that exist,
/// and who is under whom.
struct Placed<'a> {
    policies: &'a [PolicyInfo],
    live: &'a BTreeMap<String, Live>,
    names: &'a [ThreadSpec],
    family: &'a Family,
}

/// A child a scheduler is asked to take, or to keep with new parameters.
#[derive(Clone, Copy)]
struct Newcomer<'p> {
    /// Its parent-side parameters there (`None`: not known, as they were
    /// refused, which is reported: then it holds nothing).
    params: Option<&'p Params>,
    /// The thread it is. It may be a child there already (moved to its own
    /// scheduler, or changing its parameters): the HSI registers the new
    /// VP before it drops the old one, so it takes room, but a thread
    /// clashes with no VP of its own.
    thread: Option<usize>,
    /// Whether it arrives (and needs room), rather than changing its
    /// parameters in place.
    arrives: bool,
}

impl<'p> Newcomer<'p> {
    /// Thread `t` arriving with `params`.
    fn thread(t: usize, params: Option<&'p Params>) -> Self {
        Newcomer {
            params,
            thread: Some(t),
            arrives: true,
        }
    }
}

/// Why a scheduler refuses a child (see [`refusal`]).
struct Refusal {
    message: String,
    expected: String,
    hint: String,
    /// The child's parameters are refused (what another child holds, or
    /// a load over the cap), not a lack of room: said at those parameters.
    at_params: bool,
}

/// Why scheduler `name` (policy `info`, instance parameters `instance`)
/// refuses `child` in `family`, if it does: a policy that takes no more
/// children (`PolicyInfo::max_children`: Limit and Join take one), a load
/// over its admission cap (`PolicyInfo::admission`: rez's utilization),
/// or a value another child holds (`PolicyInfo::exclusive`: a priority
/// under a unique-priority fp). `who` names a child.
fn refusal(
    info: &PolicyInfo,
    name: &str,
    instance: &Params,
    family: &Family,
    child: Newcomer<'_>,
    who: impl Fn(&Kid) -> String,
) -> Option<Refusal> {
    let kids = family.kids.get(name);
    if let (Some(max), true) = (info.max_children, child.arrives) {
        if kids.map_or(0, BTreeSet::len) >= max {
            let all: Vec<String> = kids.into_iter().flatten().map(&who).collect();
            return Some(Refusal {
                message: format!(
                    "`{name}` (policy `{}`) takes {max} child{} and has {}",
                    info.name,
                    if max == 1 { "" } else { "ren" },
                    all.join(", ")
                ),
                expected: format!("a scheduler with room for another child, or `{name}` once its child has left"),
                hint: "move the child away first (`move-thread`, `end-reservation`), or give this one another scheduler".into(),
                at_params: false,
            });
        }
    }
    if let (Some(a), Some(params)) = (info.admission, child.params) {
        // A change replaces the child's own load; an arrival adds to it
        // even when the thread is there already, as the HSI registers the
        // new VP before it drops the old one.
        let own = match (child.arrives, child.thread) {
            (false, Some(t)) => family
                .thread_at
                .get(&t)
                .filter(|(s, _)| s == name)
                .map_or(0, |(_, seat)| seat.load),
            _ => 0,
        };
        let others = family
            .load
            .get(name)
            .copied()
            .unwrap_or(0)
            .saturating_sub(own);
        let load = others.saturating_add((a.load)(instance, params));
        let cap = (a.cap)(instance);
        let children = family.kids.get(name).map_or(0, BTreeSet::len) + usize::from(child.arrives);
        if load > cap.saturating_add(a.per_child.saturating_mul(children as u128)) {
            let pct = |x: u128| format!("{:.1}%", x as f64 * 100.0 / a.one as f64);
            return Some(Refusal {
                message: format!(
                    "its children would load `{name}` (policy `{}`) to {}, over its admission cap `{}` = {}",
                    info.name,
                    pct(load),
                    a.cap_key,
                    pct(cap)
                ),
                expected: format!("a load that fits `{name}` with {} taken", pct(others)),
                hint: format!(
                    "ask for less, lower or end another child's first, or raise the `{}` of `{name}`",
                    a.cap_key
                ),
                at_params: true,
            });
        }
    }
    let (what, v) = info.exclusive?(instance, child.params?)?;
    let holder = family.held.get(&(name.to_string(), what, v))?;
    if child.thread.map(Kid::Thread).as_ref() == Some(holder) {
        return None;
    }
    let hint = match holder {
        Kid::Thread(_) => format!("give it another {what}, or move {} away first", who(holder)),
        Kid::Sched(_) => format!("give it another {what}"),
    };
    let holder = who(holder);
    Some(Refusal {
        message: format!(
            "{what} {v} is taken by {holder}, and `{name}` (policy `{}`) admits one child per {what}",
            info.name
        ),
        expected: format!("a {what} that no other child of `{name}` has"),
        hint,
        at_params: true,
    })
}

/// Refuses a child of scheduler `name` that the run would refuse there
/// (see [`refusal`]). `what` says what the child cannot do ("thread `a`
/// cannot start under"), `(site, span)` where to say it; refused
/// parameters are said at `params_site` when the file has it. Returns
/// whether the child is taken: a child refused is not placed, so it is
/// not reported again.
fn check_admit(
    d: &mut Diag<'_>,
    placed: &Placed<'_>,
    name: &str,
    child: Newcomer<'_>,
    what: &str,
    (site, params_site, span): (&str, &str, Span),
    at: &At,
) -> bool {
    let Some(l) = placed.live.get(name) else {
        return true;
    };
    let Some(info) = find_policy(placed.policies, &l.policy) else {
        return true;
    };
    let who = |k: &Kid| k.name(placed.names);
    let Some(r) = refusal(info, name, &l.params, placed.family, child, who) else {
        return true;
    };
    let site = if r.at_params {
        first_site(d, [params_site.to_string(), site.to_string()])
    } else {
        site.to_string()
    };
    let e = d
        .make(
            &site,
            span,
            format!("{what} `{name}` at {at}: {}", r.message),
        )
        .expected(r.expected)
        .hint(r.hint);
    d.push(e);
    false
}

/// A `set-params` about a child of a scheduler `name` of policy `info`
/// that takes `change_params`: checks the keys of `change`, then the
/// scheduler's parameters `instance` with the changes among them (by
/// building it), and keeps those when they are accepted. Returns the rest
/// of `change`, for the child's own parameters.
fn check_instance_change(
    d: &mut Diag<'_>,
    info: &PolicyInfo,
    name: &str,
    change: &Params,
    instance: &mut Params,
    (path, fallback): (&str, Span),
    whose: &str,
) -> Params {
    let before = d.errs.len();
    let specs: Vec<ParamSpec> = info
        .child_params
        .iter()
        .chain(info.change_params)
        .copied()
        .collect();
    let owner = format!("changes to children of `{name}` (policy `{}`)", info.name);
    check_params(d, &specs, change, path, fallback, whose, &owner, info.name);
    let (mut child, mut changed) = (Params::new(), instance.clone());
    for (k, v) in change.iter() {
        if info.change_params.iter().any(|c| c.key == k) {
            changed.insert(k, v.clone());
        } else {
            child.insert(k, v.clone());
        }
    }
    if d.errs.len() == before {
        match (info.build)(&changed) {
            Ok(_) => *instance = changed,
            Err(e) => {
                // At the key the error names, else at the change that
                // led to it (a period shorter than the amount in force).
                let keys = match &e {
                    PolicyError::Param(x) => vec![x.key.as_str()],
                    _ => Vec::new(),
                };
                let site = keys
                    .into_iter()
                    .chain(info.change_params.iter().map(|c| c.key))
                    .map(|k| format!("{path}.{k}="))
                    .find(|site| d.has(site))
                    .unwrap_or_else(|| path.to_string());
                let e = d.make(
                    &site,
                    fallback,
                    format!("{whose}: the new parameters of `{name}` are refused: {e}"),
                );
                d.push(e);
            }
        }
    }
    child
}

/// Scheduler graph checks over the schedulers of a file. `paths[i]` is the
/// site prefix of scheduler `i`. Fills root CPU sets (all processors when
/// not given) and returns the schedulers parents-first (file order among
/// independents), or `None` when the graph is broken.
pub(crate) fn check_graph(
    d: &mut Diag<'_>,
    scheds: &mut [SchedulerSpec],
    paths: &[String],
    sound: &[bool],
    cpus: usize,
    policies: &[PolicyInfo],
    thread_names: &BTreeSet<String>,
) -> Option<Vec<usize>> {
    let n = scheds.len();
    let before = d.errs.len();
    let mut index: BTreeMap<String, usize> = BTreeMap::new();
    let mut dup = vec![false; n];
    for (i, s) in scheds.iter().enumerate() {
        if let Some(&first) = index.get(s.name.as_str()) {
            let e = d
                .make(
                    &format!("{}.name=", paths[i]),
                    s.span,
                    format!("duplicate scheduler name `{}`", s.name),
                )
                .expected("a name no other [[scheduler]] uses")
                .hint(format!(
                    "`{}` is first declared at line {}",
                    s.name, scheds[first].span.line
                ));
            d.push(e);
            dup[i] = true;
        } else {
            index.insert(s.name.clone(), i);
        }
    }
    // A second table of a name is reported once, above: nothing is
    // checked of it that would only follow from the duplicate.
    let sound: Vec<bool> = sound.iter().zip(&dup).map(|(s, d)| *s && !*d).collect();
    let names: Vec<String> = index.keys().cloned().collect();
    // Edges child -> parent, by index.
    let mut edges: Vec<Vec<(usize, usize)>> = vec![Vec::new(); n];
    for (i, s) in scheds.iter().enumerate() {
        if dup[i] {
            continue;
        }
        for (j, p) in s.parents.iter().enumerate() {
            match index.get(p.name.as_str()) {
                Some(&pi) => edges[i].push((pi, j)),
                None => {
                    let others: Vec<&str> = names
                        .iter()
                        .map(String::as_str)
                        .filter(|n| *n != s.name)
                        .collect();
                    let hint = if thread_names.contains(&p.name) {
                        Some(format!(
                            "`{}` is a thread; a parent must be a scheduler",
                            p.name
                        ))
                    } else {
                        did_you_mean(&p.name, others.iter().copied())
                    };
                    let e = d
                        .make(
                            &format!("{}.parent.{j}", paths[i]),
                            s.span,
                            format!(
                                "scheduler `{}` has parent `{}`, which is not a declared scheduler",
                                s.name, p.name
                            ),
                        )
                        .expected(if others.is_empty() {
                            "the name of another [[scheduler]]".to_string()
                        } else {
                            one_of_these(&others)
                        })
                        .maybe_hint(hint);
                    d.push(e);
                }
            }
        }
    }
    // Parent counts (not for tables that had errors: their parent list may
    // be incomplete).
    for (i, s) in scheds.iter().enumerate() {
        let Some(info) = find_policy(policies, &s.policy).filter(|_| sound[i]) else {
            continue;
        };
        let count = s.parents.len().max(1);
        let site = if s.parents.len() > 1 {
            format!("{}.parents", paths[i])
        } else {
            paths[i].clone()
        };
        if count < info.min_parents {
            let e = d
                .make(&site, s.span, format!("scheduler `{}` (policy `{}`) has {count} parent{}, but `{}` needs at least {}", s.name, s.policy, if count == 1 { "" } else { "s" }, s.policy, info.min_parents))
                .expected(format!("`parents = [ {{ name = \"...\" }}, ... ]` with {} to {} entries", info.min_parents, info.max_parents))
                .hint(format!("a `{}` instance joins several parents; give each one in `parents`", s.policy));
            d.push(e);
        } else if count > info.max_parents {
            let e = d
                .make(&site, s.span, format!("scheduler `{}` (policy `{}`) has {count} parents, but `{}` takes at most {}", s.name, s.policy, s.policy, info.max_parents))
                .expected(format!("at most {} parent{}", info.max_parents, if info.max_parents == 1 { "" } else { "s" }))
                .hint("only a join-style policy (e.g. `join`) can have several parents");
            d.push(e);
        }
    }
    // Cycles: depth-first search over child -> parent edges.
    let mut color = vec![0u8; n];
    let mut reported: BTreeSet<Vec<usize>> = BTreeSet::new();
    for start in 0..n {
        if color[start] != 0 {
            continue;
        }
        // Iterative DFS keeping the path for cycle extraction.
        let mut stack: Vec<(usize, usize)> = vec![(start, 0)];
        color[start] = 1;
        while let Some(&mut (v, ref mut next)) = stack.last_mut() {
            if *next < edges[v].len() {
                let (w, j) = edges[v][*next];
                *next += 1;
                if color[w] == 0 {
                    color[w] = 1;
                    stack.push((w, 0));
                } else if color[w] == 1 {
                    let from = stack.iter().position(|&(x, _)| x == w).unwrap_or(0);
                    let cycle: Vec<usize> = stack[from..].iter().map(|&(x, _)| x).collect();
                    let mut key = cycle.clone();
                    key.sort_unstable();
                    if reported.insert(key) {
                        // Start at `v`, whose parent link closes the cycle.
                        let mut path: Vec<&str> = vec![scheds[v].name.as_str()];
                        path.extend(
                            cycle
                                .iter()
                                .take(cycle.len() - 1)
                                .map(|&x| scheds[x].name.as_str()),
                        );
                        path.push(&scheds[v].name);
                        let msg = format!(
                            "scheduler `{}` is its own ancestor: {} (each name is followed by its parent)",
                            scheds[v].name,
                            path.join(" -> ")
                        );
                        let e = d
                            .make(&format!("{}.parent.{j}", paths[v]), scheds[v].span, msg)
                            .expected("a hierarchy without cycles: every chain of parents ends at a root (a scheduler without `parent`)")
                            .hint(format!("remove one of the links, e.g. the parent `{}` of `{}`", scheds[w].name, scheds[v].name));
                        d.push(e);
                    }
                }
            } else {
                color[v] = 2;
                stack.pop();
            }
        }
    }
    // Roots and their processors.
    for (i, s) in scheds.iter_mut().enumerate() {
        if s.parents.is_empty() && !dup[i] && s.cpus.is_empty() {
            s.cpus = (0..cpus).collect();
        }
    }
    let mut roots: Vec<(usize, &SchedulerSpec)> = Vec::new();
    for (i, s) in scheds.iter().enumerate() {
        if s.parents.is_empty() && !dup[i] && sound[i] {
            check_root_cpus(d, s, &paths[i], cpus, roots.iter().map(|(_, r)| *r));
            roots.push((i, s));
        }
    }
    // Parent-side parameters.
    for (i, s) in scheds.iter().enumerate() {
        if !sound[i] {
            continue;
        }
        for (j, p) in s.parents.iter().enumerate() {
            let Some(&pi) = index.get(p.name.as_str()) else {
                continue;
            };
            let Some(info) = find_policy(policies, &scheds[pi].policy) else {
                continue;
            };
            let whose = format!("scheduler `{}`", s.name);
            check_child_params(
                d,
                info,
                &p.name,
                &p.params,
                &format!("{}.parent.{j}.params", paths[i]),
                s.span,
                &whose,
            );
        }
    }
    if d.errs.len() > before {
        return None;
    }
    // Topological order, parents first, file order among ready ones.
    let mut order = Vec::with_capacity(n);
    let mut placed = vec![false; n];
    while order.len() < n {
        let next = (0..n).find(|&i| !placed[i] && edges[i].iter().all(|&(p, _)| placed[p]))?;
        placed[next] = true;
        order.push(next);
    }
    // Levels, parents first; the first scheduler too deep is reported (a
    // long chain would give one error per scheduler below the limit).
    let mut level = vec![0usize; n];
    let deepest =
        |x: usize, level: &[usize]| edges[x].iter().copied().max_by_key(|&(p, _)| level[p]);
    for &i in &order {
        let up = deepest(i, &level);
        level[i] = 1 + up.map_or(0, |(p, _)| level[p]);
        let (Some((_, j)), true) = (up, level[i] > MAX_LEVELS) else {
            continue;
        };
        let mut chain = vec![scheds[i].name.as_str()];
        let mut x = i;
        while let Some((p, _)) = deepest(x, &level) {
            chain.push(&scheds[p].name);
            x = p;
        }
        let chain = if chain.len() <= 6 {
            chain.join(" -> ")
        } else {
            format!(
                "{} -> ... -> {}",
                chain[..3].join(" -> "),
                chain[chain.len() - 2..].join(" -> ")
            )
        };
        let e = d
            .make(
                &format!("{}.parent.{j}", paths[i]),
                scheds[i].span,
                format!(
                    "scheduler `{}` is nested {} levels deep: {chain} (each name is followed by its parent)",
                    scheds[i].name, level[i]
                ),
            )
            .expected(format!(
                "at most {MAX_LEVELS} levels of schedulers (a root is level 1)"
            ));
        d.push(e);
        return None;
    }
    // Children each parent refuses beside its other children (Limit takes
    // one, a unique-priority fp one per priority, rez up to its cap), in
    // the order the run creates them. A child refused is not counted.
    let mut family = Family::default();
    for &i in &order {
        for (j, link) in scheds[i].parents.iter().enumerate() {
            let p = &scheds[index[link.name.as_str()]];
            let Some(info) = find_policy(policies, &p.policy) else {
                continue;
            };
            let child = Newcomer {
                params: Some(&link.params),
                thread: None,
                arrives: true,
            };
            let who = |k: &Kid| k.name(&[]);
            let Some(r) = refusal(info, &link.name, &p.params, &family, child, who) else {
                let seat = Seat::of(info, &p.params, Some(&link.params));
                family.add(&link.name, Kid::Sched(scheds[i].name.clone()), seat);
                continue;
            };
            let site = format!("{}.parent.{j}", paths[i]);
            let site = if r.at_params {
                first_site(d, [format!("{site}.params"), site])
            } else {
                site
            };
            let e = d
                .make(
                    &site,
                    scheds[i].span,
                    format!(
                        "scheduler `{}` cannot be a child of `{}`: {}",
                        scheds[i].name, link.name, r.message
                    ),
                )
                .expected(r.expected)
                .hint(if r.at_params {
                    r.hint
                } else {
                    format!("give `{}` another parent", scheds[i].name)
                });
            d.push(e);
        }
    }
    Some(order)
}

/// Checks a root's processors: each exists, is listed once, and belongs to
/// no other root in `others`.
fn check_root_cpus<'x>(
    d: &mut Diag<'_>,
    s: &SchedulerSpec,
    path: &str,
    cpus: usize,
    others: impl Iterator<Item = &'x SchedulerSpec>,
) {
    let site = format!("{path}.cpus");
    // One error for the CPUs the machine lacks and one for the repeats,
    // however long the list: an error per entry of a list of millions
    // would take gigabytes.
    let mut seen = BTreeSet::new();
    let (mut beyond, mut beyond_n) = (Vec::new(), 0usize);
    let mut repeats: BTreeMap<usize, usize> = BTreeMap::new();
    for &c in &s.cpus {
        if c >= cpus {
            beyond_n += 1;
            if beyond.len() < 5 {
                beyond.push(c.to_string());
            }
        } else if !seen.insert(c) {
            *repeats.entry(c).or_insert(1) += 1;
        }
    }
    if beyond_n > 0 {
        let list = match beyond_n - beyond.len() {
            0 if beyond.len() == 1 => format!("CPU {}", beyond[0]),
            0 => format!("CPUs {}", beyond.join(", ")),
            more => format!("CPUs {} and {more} more", beyond.join(", ")),
        };
        let e = d
            .make(
                &site,
                s.span,
                format!(
                    "root `{}` names {list}, but the machine has {cpus} CPU{}",
                    s.name,
                    if cpus == 1 { "" } else { "s" }
                ),
            )
            .expected(format!("CPU numbers from 0 to {}", cpus.saturating_sub(1)))
            .hint("raise `cpus` in [machine] or remove the CPU from the list");
        d.push(e);
    }
    if !repeats.is_empty() {
        let message = match repeats.iter().next() {
            Some((c, 2)) if repeats.len() == 1 => format!("root `{}` lists CPU {c} twice", s.name),
            Some((c, n)) if repeats.len() == 1 => {
                format!("root `{}` lists CPU {c} {n} times", s.name)
            }
            _ => {
                let list: Vec<String> = repeats.keys().map(|c| c.to_string()).collect();
                format!(
                    "root `{}` lists CPUs {} more than once",
                    s.name,
                    list.join(", ")
                )
            }
        };
        d.push(d.make(&site, s.span, message).expected("each CPU once"));
    }
    for other in others {
        let shared: Vec<String> = other
            .cpus
            .iter()
            .filter(|c| seen.contains(c))
            .map(|c| c.to_string())
            .collect();
        if !shared.is_empty() {
            let e = d
                .make(&site, s.span, format!("roots overlap: {} {} to both `{}` and `{}`", if shared.len() == 1 { "CPU" } else { "CPUs" }, shared.join(", ") + if shared.len() == 1 { " belongs" } else { " belong" }, other.name, s.name))
                .expected("roots on disjoint sets of CPUs")
                .hint(format!("give each root its own `cpus` (a root without `cpus` takes all of them); `{}` is declared at line {}", other.name, other.span.line));
            d.push(e);
        }
    }
}

/// Where the timeline check finds the sites of threads and operations.
pub(crate) struct TimelineSites<'a> {
    /// Site prefix per thread (`"thread.2"`), or empty when unknown.
    pub threads: &'a [String],
    /// Site prefix per operation (`"at.0"`), or empty when unknown.
    pub ops: &'a [String],
    /// Whether an operation naming a thread that does not exist is an
    /// error (false while an rt-app file that may declare it is not read).
    pub strict_threads: bool,
    /// Threads (indices) whose tables had errors: their parameters are not
    /// checked again.
    pub broken_threads: &'a [usize],
    /// Operations (indices) whose tables had errors.
    pub broken_ops: &'a [usize],
    /// The rt-app file, where the threads made from its tasks (not named
    /// by a `[[thread]]`) are declared and their errors are reported.
    pub rtapp_file: &'a str,
}

/// Where `end-reservation` takes a thread back, as the HSI remembers it.
struct Before {
    sched: String,
    /// That instance was destroyed since: one created later with its name
    /// is another instance, so the thread goes to the default instead.
    gone: bool,
    /// The parameters it had there (`None`: not known).
    params: Option<Params>,
}

struct Live {
    policy: String,
    /// Its instance parameters, with the `change_params` given since.
    params: Params,
    /// Its parents, with the parameters it has there.
    parents: Vec<ParentSpec>,
    spec_cpus: Vec<usize>,
    line: u32,
    /// Nesting level, a root being 1.
    level: usize,
}

/// The level of a scheduler under `parents` (those that are live).
fn level_under<'p>(live: &BTreeMap<String, Live>, parents: impl Iterator<Item = &'p str>) -> usize {
    1 + parents
        .filter_map(|p| live.get(p).map(|l| l.level))
        .max()
        .unwrap_or(0)
}

/// Walks thread creations, `[[at]]` operations and thread exits in time
/// order (at equal times: creations, then operations in file order, then
/// exits) and checks that every name exists when it is used, that
/// parameters suit the scheduler that receives them, and that destroyed
/// schedulers are empty. Fills in the scheduler of threads that name none
/// (the default in force when they start) and the processors of roots
/// created at run time.
pub(crate) fn check_timeline(
    d: &mut Diag<'_>,
    h: &mut Hierarchy,
    policies: &[PolicyInfo],
    sites: &TimelineSites<'_>,
) {
    let broken_ops = sites.broken_ops;
    let tpath = |i: usize| {
        sites
            .threads
            .get(i)
            .cloned()
            .unwrap_or_else(|| format!("?thread.{i}"))
    };
    let opath = |i: usize| {
        sites
            .ops
            .get(i)
            .cloned()
            .unwrap_or_else(|| format!("?at.{i}"))
    };
    let cpus = h.machine.cpus;
    let mut live: BTreeMap<String, Live> = BTreeMap::new();
    // Parents first when the graph is sound (`check_graph` bounds their
    // levels); otherwise a parent not seen yet counts as absent, which can
    // only make a level lower.
    for s in &h.schedulers {
        // A duplicate name is reported by `check_graph`; the first
        // declaration stands, so nothing else is reported for the second.
        if live.contains_key(&s.name) {
            continue;
        }
        let level = level_under(&live, s.parents.iter().map(|p| p.name.as_str()));
        live.insert(
            s.name.clone(),
            Live {
                policy: s.policy.clone(),
                params: s.params.clone(),
                parents: s.parents.clone(),
                spec_cpus: s.cpus.clone(),
                line: s.span.line,
                level,
            },
        );
    }
    // Every scheduler name the file ever uses, with when it appears.
    let mut created_at: BTreeMap<String, Duration> = BTreeMap::new();
    for op in &h.operations {
        if let OpSpec::CreateScheduler(s) = &op.op {
            created_at.entry(s.name.clone()).or_insert(op.at);
        }
    }
    let mut destroyed_at: BTreeMap<String, Duration> = BTreeMap::new();
    let all_names: Vec<String> = live
        .keys()
        .chain(created_at.keys())
        .cloned()
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();

    let mut default = h.default_scheduler.clone();
    // A bad `default` is reported once, not again for every thread.
    let mut default_invalid = false;
    if let Some(name) = &default {
        if !live.contains_key(name) {
            let hint = if let Some(t) = created_at.get(name) {
                Some(format!(
                    "`{name}` is created at {t}; the default must exist from the start"
                ))
            } else {
                did_you_mean(name, all_names.iter().map(String::as_str))
            };
            let e = d
                .make(
                    "default=",
                    Span { line: 1, col: 1 },
                    format!("the default scheduler `{name}` is not a declared scheduler"),
                )
                .expected(one_of_these(&live.keys().collect::<Vec<_>>()))
                .maybe_hint(hint);
            d.push(e);
            default = None;
            default_invalid = true;
        }
    }

    let n = h.threads.len();
    let by_name: BTreeMap<String, usize> = h
        .threads
        .iter()
        .enumerate()
        .rev()
        .map(|(i, t)| (t.name.clone(), i))
        .collect();
    let thread_names: Vec<&str> = by_name.keys().map(String::as_str).collect();
    let thread_names: Vec<String> = thread_names.iter().map(|s| s.to_string()).collect();
    let mut sched: Vec<Option<String>> = vec![None; n];
    // The parameters each thread has now, as its scheduler keeps them:
    // what operations that move it without new ones take along. `None`
    // when not known (they were refused, which is reported).
    let mut current: Vec<Option<Params>> = vec![None; n];
    let mut rez_from: Vec<Option<Before>> = (0..n).map(|_| None).collect();
    let mut alive = vec![false; n];
    // Who is under whom now, for `check_admit`.
    let mut family = Family::default();
    for (name, l) in &live {
        for link in &l.parents {
            let seat = Seat::under(policies, &live, &link.name, Some(&link.params));
            family.add(&link.name, Kid::Sched(name.clone()), seat);
        }
    }
    macro_rules! placed {
        () => {
            Placed {
                policies,
                live: &live,
                names: &h.threads,
                family: &family,
            }
        };
    }
    // Counts thread `t` where it is now, after an event moved it.
    macro_rules! sync {
        ($t:expr) => {{
            let t = $t;
            let place = sched[t].clone().filter(|_| alive[t]).map(|s| {
                let seat = Seat::under(policies, &live, &s, current[t].as_ref());
                (s, seat)
            });
            family.place_thread(t, place);
        }};
    }

    // (time, phase, index): 0 create, 1 operation, 2 exit.
    let mut events: Vec<(Duration, u8, usize)> = Vec::new();
    for (i, t) in h.threads.iter().enumerate() {
        events.push((t.start, 0, i));
        if let Some(x) = t.exit {
            events.push((x, 2, i));
        }
    }
    for (i, op) in h.operations.iter().enumerate() {
        events.push((op.at, 1, i));
    }
    events.sort();
    // The `[[thread]]` tables (by position) whose parameters were refused:
    // the other copies of a table with `count` share them and are not
    // reported again.
    let mut refused_tables: BTreeSet<(u32, u32)> = BTreeSet::new();

    for (now, phase, i) in events {
        let at = At(now);
        match phase {
            0 => {
                let first = d.errs.len();
                'start: {
                    let t = &h.threads[i];
                    let explicit = !t.scheduler.is_empty();
                    let target = if explicit {
                        Some(t.scheduler.clone())
                    } else {
                        default.clone()
                    };
                    let Some(target) = target else {
                        if default_invalid {
                            break 'start;
                        }
                        let e = d
                            .make(&tpath(i), t.span, format!("thread `{}` names no `scheduler` and no default scheduler is in force at {at}", t.name))
                            .expected("`scheduler = \"...\"` in the [[thread]], or a top-level `default = \"...\"`");
                        d.push(e);
                        break 'start;
                    };
                    // The scheduler key, or the thread when the default applies.
                    let site = if explicit {
                        format!("{}.scheduler=", tpath(i))
                    } else {
                        tpath(i)
                    };
                    if !live.contains_key(&target) {
                        let e = missing_scheduler(
                            d,
                            &site,
                            t.span,
                            &target,
                            now,
                            &format!("thread `{}` starts at {at} under", t.name),
                            &created_at,
                            &destroyed_at,
                            &all_names,
                        );
                        let hint = match destroyed_at.get(&target) {
                            Some(t) => format!("give the thread another scheduler, or destroy `{target}` after the thread starts (it is destroyed at {})", At(*t)),
                            None => "give the thread a scheduler that exists when it starts".to_string(),
                        };
                        d.push(e.hint_if_none(hint));
                        break 'start;
                    }
                    let info = find_policy(policies, &live[&target].policy);
                    // A thread made from an rt-app task was checked where its
                    // task was read; a declared one without `params` (and
                    // without `exec`, which runs live with or without the
                    // task) takes them from its task when the task is
                    // attached, and is checked then.
                    let from_task = t.rtapp.as_ref().is_some_and(|b| !b.declared)
                        || (t.rtapp.is_some()
                            && t.workload.is_none()
                            && t.exec.is_none()
                            && t.params.is_empty());
                    let table = (t.span.line, t.span.col);
                    let broken = sites.broken_threads.contains(&i)
                        || (!from_task && refused_tables.contains(&table));
                    let skip = from_task || broken;
                    let before = d.errs.len();
                    let params_site = format!("{}.params", tpath(i));
                    if let (Some(info), false) = (info, skip) {
                        check_child_params(
                            d,
                            info,
                            &target,
                            &t.params,
                            &params_site,
                            t.span,
                            &format!("thread `{}`", t.name),
                        );
                    }
                    if !from_task && d.errs.len() > before {
                        refused_tables.insert(table);
                    }
                    let params = info
                        .filter(|_| !broken && d.errs.len() == before)
                        .map(|info| kept(info, &t.params));
                    let newcomer = format!("thread `{}` cannot start under", t.name);
                    let child = Newcomer::thread(i, params.as_ref());
                    let sites = (site.as_str(), params_site.as_str(), t.span);
                    let taken = check_admit(d, &placed!(), &target, child, &newcomer, sites, &at);
                    current[i] = params;
                    h.threads[i].scheduler = target.clone();
                    sched[i] = taken.then_some(target);
                    alive[i] = true;
                    sync!(i);
                }
                // A thread made from an rt-app task is declared in that file.
                if h.threads[i].rtapp.as_ref().is_some_and(|b| !b.declared) {
                    for e in &mut d.errs[first..] {
                        e.file = sites.rtapp_file.to_string();
                    }
                }
            }
            2 => {
                alive[i] = false;
                sync!(i);
            }
            _ => {
                let op_span = h.operations[i].span;
                let p = opath(i);
                // Resolves a thread name used by the operation.
                let thread_ref = |d: &mut Diag<'_>,
                                  name: &str,
                                  key: &str,
                                  alive: &[bool]|
                 -> Option<usize> {
                    let site = format!("{p}.{key}=");
                    match by_name.get(name) {
                        None => {
                            if sites.strict_threads {
                                let e = d
                                    .make(&site, op_span, format!("no thread is named `{name}`"))
                                    .expected(if thread_names.is_empty() {
                                        "the name of a [[thread]]".to_string()
                                    } else {
                                        one_of_these(&thread_names)
                                    })
                                    .maybe_hint(did_you_mean(
                                        name,
                                        thread_names.iter().map(String::as_str),
                                    ));
                                d.push(e);
                            }
                            None
                        }
                        Some(&ti) if !alive[ti] => {
                            let t = &h.threads[ti];
                            let msg = if t.start > now {
                                format!(
                                    "thread `{name}` does not exist yet at {at}: it starts at {}",
                                    t.start
                                )
                            } else {
                                format!(
                                    "thread `{name}` has already exited at {at} (exit = {})",
                                    t.exit.unwrap_or_default()
                                )
                            };
                            let e = d
                                .make(&site, op_span, msg)
                                .expected(format!("a thread alive at {at}"));
                            d.push(e);
                            None
                        }
                        Some(&ti) => Some(ti),
                    }
                };
                let sched_ref = |d: &mut Diag<'_>,
                                 name: &str,
                                 key: &str,
                                 live: &BTreeMap<String, Live>,
                                 destroyed: &BTreeMap<String, Duration>|
                 -> bool {
                    if live.contains_key(name) {
                        return true;
                    }
                    let e = missing_scheduler(
                        d,
                        &format!("{p}.{key}="),
                        op_span,
                        name,
                        now,
                        &format!("the operation at {at} uses"),
                        &created_at,
                        destroyed,
                        &all_names,
                    );
                    d.push(e);
                    false
                };
                let op = h.operations[i].op.clone();
                match op {
                    OpSpec::BeginReservation {
                        thread,
                        scheduler,
                        params,
                    } => {
                        let t = thread_ref(d, &thread, "thread", &alive);
                        let s_ok = sched_ref(d, &scheduler, "scheduler", &live, &destroyed_at);
                        let info = live
                            .get(&scheduler)
                            .and_then(|l| find_policy(policies, &l.policy));
                        let before = d.errs.len();
                        let params_site = format!("{p}.params");
                        if let (Some(info), true) = (info, s_ok) {
                            check_child_params(
                                d,
                                info,
                                &scheduler,
                                &params,
                                &params_site,
                                op_span,
                                &format!(
                                    "the reservation of thread `{thread}` under `{scheduler}`"
                                ),
                            );
                        }
                        let params = info
                            .filter(|_| d.errs.len() == before)
                            .map(|info| kept(info, &params));
                        if let (Some(t), true) = (t, s_ok) {
                            let newcomer =
                                format!("thread `{thread}` cannot begin a reservation under");
                            let child = Newcomer::thread(t, params.as_ref());
                            let site = format!("{p}.scheduler=");
                            let sites = (site.as_str(), params_site.as_str(), op_span);
                            if check_admit(d, &placed!(), &scheduler, child, &newcomer, sites, &at)
                            {
                                // The HSI keeps the place the first
                                // reservation began from.
                                if rez_from[t].is_none() {
                                    rez_from[t] = sched[t].clone().map(|s| Before {
                                        sched: s,
                                        gone: false,
                                        params: current[t].clone(),
                                    });
                                }
                                sched[t] = Some(scheduler);
                                current[t] = params;
                                sync!(t);
                            }
                        }
                    }
                    OpSpec::EndReservation { thread } => {
                        if let Some(t) = thread_ref(d, &thread, "thread", &alive) {
                            match rez_from[t].take() {
                                None => {
                                    let e = d
                                        .make(&format!("{p}.thread="), op_span, format!("thread `{thread}` has no reservation to end at {at}"))
                                        .expected("a thread moved by an earlier `begin-reservation`")
                                        .hint("add a `begin-reservation` operation before this one");
                                    d.push(e);
                                }
                                Some(Before {
                                    sched: back,
                                    gone,
                                    params: saved,
                                }) => {
                                    let to = if gone {
                                        default.clone()
                                    } else {
                                        Some(back.clone())
                                    };
                                    match to {
                                        Some(to) => {
                                            let info = live
                                                .get(&to)
                                                .and_then(|l| find_policy(policies, &l.policy));
                                            // Back where it began, with the
                                            // parameters it had there, which
                                            // the default must accept when
                                            // that instance is gone.
                                            let params = match (info, saved) {
                                                (Some(info), Some(params)) if gone => {
                                                    let what = format!("thread `{thread}` goes to the default `{to}` at {at}, as `{back}` was destroyed");
                                                    check_carried(d, info, &params, &format!("{p}.thread="), op_span, &what, "end the reservation before its scheduler is destroyed, or move the thread with `move-thread` and new `params`")
                                                        .then(|| kept(info, &params))
                                                }
                                                (Some(info), Some(params)) => {
                                                    Some(kept(info, &params))
                                                }
                                                _ => None,
                                            };
                                            let newcomer =
                                                format!("thread `{thread}` cannot go back under");
                                            let child = Newcomer::thread(t, params.as_ref());
                                            let site = format!("{p}.thread=");
                                            let sites = (site.as_str(), site.as_str(), op_span);
                                            if check_admit(
                                                d,
                                                &placed!(),
                                                &to,
                                                child,
                                                &newcomer,
                                                sites,
                                                &at,
                                            ) {
                                                sched[t] = Some(to);
                                                current[t] = params;
                                                sync!(t);
                                            }
                                        }
                                        None => {
                                            let e = d
                                                .make(&format!("{p}.thread="), op_span, format!("thread `{thread}` cannot go back at {at}: `{back}` is destroyed and there is no default scheduler"))
                                                .expected("the scheduler the reservation began from, or a default scheduler");
                                            d.push(e);
                                        }
                                    }
                                }
                            }
                        }
                    }
                    OpSpec::SetParams { thread, params } => {
                        if let Some(t) = thread_ref(d, &thread, "thread", &alive) {
                            let info = sched[t]
                                .as_ref()
                                .and_then(|s| live.get(s).map(|l| (s, l)))
                                .and_then(|(s, l)| Some((s, find_policy(policies, &l.policy)?)));
                            if let Some((s, info)) = info.filter(|(_, i)| {
                                i.child_params.is_empty() && i.change_params.is_empty()
                            }) {
                                // Such a policy takes no SetParams at all
                                // (Join): the run would stop here.
                                let e = d
                                    .make(&format!("{p}.thread="), op_span, format!("thread `{thread}` under `{s}` has no parameters to set at {at}: children of `{s}` (policy `{}`) take none", info.name))
                                    .expected("a thread under a scheduler that takes child parameters")
                                    .hint("remove this operation, or move the thread with `move-thread`");
                                d.push(e);
                            } else if let (Some((s, info)), Some(now_params)) = (info, &current[t])
                            {
                                // The policy reads the change merged into
                                // the thread's parameters; when those are
                                // not known (refused, which is reported),
                                // neither is this.
                                let path = format!("{p}.params");
                                let whose = format!("thread `{thread}` under `{s}`");
                                let before = d.errs.len();
                                // Keys that change the instance itself
                                // (Limit's cap) are checked as its
                                // parameters; the others as the child's.
                                let child = match live.get_mut(s) {
                                    Some(l) if !info.change_params.is_empty() => {
                                        let site = (path.as_str(), op_span);
                                        check_instance_change(
                                            d,
                                            info,
                                            s,
                                            &params,
                                            &mut l.params,
                                            site,
                                            &whose,
                                        )
                                    }
                                    _ => params.clone(),
                                };
                                if d.errs.len() == before {
                                    let merged = changed(info, now_params, &child);
                                    check_child_params(d, info, s, &merged, &path, op_span, &whose);
                                    let child = Newcomer {
                                        params: Some(&merged),
                                        thread: Some(t),
                                        arrives: false,
                                    };
                                    let what = format!(
                                        "thread `{thread}` cannot take these parameters under"
                                    );
                                    let sites = (path.as_str(), path.as_str(), op_span);
                                    // A refused change changes nothing.
                                    if d.errs.len() == before
                                        && check_admit(d, &placed!(), s, child, &what, sites, &at)
                                    {
                                        current[t] = Some(merged);
                                        sync!(t);
                                    }
                                }
                            }
                        }
                    }
                    OpSpec::MoveThread { thread, to, params } => {
                        let t = thread_ref(d, &thread, "thread", &alive);
                        let s_ok = sched_ref(d, &to, "to", &live, &destroyed_at);
                        let info = live.get(&to).and_then(|l| find_policy(policies, &l.policy));
                        let before = d.errs.len();
                        let params_site = format!("{p}.params");
                        if let (Some(info), true) = (info, s_ok) {
                            check_child_params(
                                d,
                                info,
                                &to,
                                &params,
                                &params_site,
                                op_span,
                                &format!("thread `{thread}` under `{to}`"),
                            );
                        }
                        let params = info
                            .filter(|_| d.errs.len() == before)
                            .map(|info| kept(info, &params));
                        if let (Some(t), true) = (t, s_ok) {
                            let newcomer = format!("thread `{thread}` cannot move under");
                            let child = Newcomer::thread(t, params.as_ref());
                            let site = format!("{p}.to=");
                            let sites = (site.as_str(), params_site.as_str(), op_span);
                            if check_admit(d, &placed!(), &to, child, &newcomer, sites, &at) {
                                sched[t] = Some(to);
                                current[t] = params;
                                sync!(t);
                            }
                        }
                    }
                    OpSpec::CreateScheduler(mut spec) => {
                        let sp = format!("{p}.scheduler");
                        let mut ok = !broken_ops.contains(&i);
                        if live.contains_key(&spec.name) {
                            let e = d
                                .make(
                                    &format!("{sp}.name="),
                                    op_span,
                                    format!(
                                        "a scheduler named `{}` already exists at {at}",
                                        spec.name
                                    ),
                                )
                                .expected("a new name")
                                .hint(format!(
                                    "destroy `{}` first, or choose another name",
                                    spec.name
                                ));
                            d.push(e);
                            continue;
                        }
                        for (j, parent) in spec.parents.iter().enumerate() {
                            if !sched_ref(
                                d,
                                &parent.name,
                                &format!("scheduler.parent.{j}"),
                                &live,
                                &destroyed_at,
                            ) {
                                ok = false;
                            }
                        }
                        if let Some(info) = find_policy(policies, &spec.policy) {
                            let count = spec.parents.len().max(1);
                            if count < info.min_parents || count > info.max_parents {
                                let e = d
                                    .make(&sp, op_span, format!("scheduler `{}` (policy `{}`) has {count} parent{}, but `{}` takes {} to {}", spec.name, spec.policy, if count == 1 { "" } else { "s" }, spec.policy, info.min_parents, info.max_parents))
                                    .expected(format!("{} to {} parents", info.min_parents, info.max_parents));
                                d.push(e);
                                ok = false;
                            }
                        }
                        if spec.parents.is_empty() {
                            if spec.cpus.is_empty() {
                                spec.cpus = (0..cpus).collect();
                            }
                            let others: Vec<SchedulerSpec> = live
                                .iter()
                                .filter(|(_, l)| l.parents.is_empty())
                                .map(|(name, l)| SchedulerSpec {
                                    name: name.clone(),
                                    policy: l.policy.clone(),
                                    params: Params::new(),
                                    parents: Vec::new(),
                                    cpus: l.spec_cpus.clone(),
                                    guarantee: None,
                                    span: Span {
                                        line: l.line,
                                        col: 1,
                                    },
                                })
                                .collect();
                            let before = d.errs.len();
                            check_root_cpus(d, &spec, &sp, cpus, others.iter());
                            ok &= d.errs.len() == before;
                        }
                        if ok {
                            for (j, parent) in spec.parents.iter().enumerate() {
                                let params_site = format!("{sp}.parent.{j}.params");
                                let before = d.errs.len();
                                if let Some(info) =
                                    find_policy(policies, &live[&parent.name].policy)
                                {
                                    check_child_params(
                                        d,
                                        info,
                                        &parent.name,
                                        &parent.params,
                                        &params_site,
                                        op_span,
                                        &format!("scheduler `{}`", spec.name),
                                    );
                                }
                                let newcomer =
                                    format!("scheduler `{}` cannot be created under", spec.name);
                                let child = Newcomer {
                                    params: (d.errs.len() == before).then_some(&parent.params),
                                    thread: None,
                                    arrives: true,
                                };
                                let site = format!("{sp}.parent.{j}=");
                                let sites = (site.as_str(), params_site.as_str(), op_span);
                                if check_admit(
                                    d,
                                    &placed!(),
                                    &parent.name,
                                    child,
                                    &newcomer,
                                    sites,
                                    &at,
                                ) {
                                    let seat =
                                        Seat::under(policies, &live, &parent.name, child.params);
                                    family.add(&parent.name, Kid::Sched(spec.name.clone()), seat);
                                }
                            }
                        }
                        let level =
                            level_under(&live, spec.parents.iter().map(|x| x.name.as_str()));
                        if level > MAX_LEVELS {
                            let e = d
                                .make(&sp, op_span, format!("scheduler `{}` created at {at} would be nested {level} levels deep", spec.name))
                                .expected(format!("at most {MAX_LEVELS} levels of schedulers (a root is level 1)"));
                            d.push(e);
                        }
                        // Known from now on even when broken, so later
                        // operations are not reported again.
                        live.insert(
                            spec.name.clone(),
                            Live {
                                policy: spec.policy.clone(),
                                params: spec.params.clone(),
                                parents: spec.parents.clone(),
                                spec_cpus: spec.cpus.clone(),
                                line: op_span.line,
                                level,
                            },
                        );
                        destroyed_at.remove(&spec.name);
                        h.operations[i].op = OpSpec::CreateScheduler(spec);
                    }
                    OpSpec::DestroyScheduler { name } => {
                        if sched_ref(d, &name, "name", &live, &destroyed_at) {
                            let all: Vec<String> = family
                                .kids
                                .get(&name)
                                .into_iter()
                                .flatten()
                                .map(|k| k.name(&h.threads))
                                .collect();
                            if !all.is_empty() {
                                let e = d
                                    .make(&format!("{p}.name="), op_span, format!("scheduler `{name}` still has children at {at}: {}", all.join(", ")))
                                    .expected("a scheduler without children")
                                    .hint("move its threads away (`move-thread`, `end-reservation`) or destroy its child schedulers first");
                                d.push(e);
                            } else {
                                if let Some(gone) = live.get(&name) {
                                    for link in &gone.parents {
                                        let seat = Seat::under(
                                            policies,
                                            &live,
                                            &link.name,
                                            Some(&link.params),
                                        );
                                        family.remove(&link.name, &Kid::Sched(name.clone()), seat);
                                    }
                                }
                                family.kids.remove(&name);
                                live.remove(&name);
                                destroyed_at.insert(name.clone(), now);
                                for b in rez_from.iter_mut().flatten() {
                                    if b.sched == name {
                                        b.gone = true;
                                    }
                                }
                                if default.as_deref() == Some(name.as_str()) {
                                    default = None;
                                }
                            }
                        }
                    }
                    OpSpec::SetDefault { name, move_threads } => {
                        if sched_ref(d, &name, "name", &live, &destroyed_at) {
                            // The HSI moves nothing to the default in force.
                            let old = default.clone().filter(|o| move_threads && *o != name);
                            if let Some(old) = old {
                                let info = find_policy(policies, &live[&name].policy);
                                for t in 0..n {
                                    if !alive[t] || sched[t].as_deref() != Some(old.as_str()) {
                                        continue;
                                    }
                                    // Each thread keeps the parameters it has
                                    // now, which the new default must accept.
                                    let params = match (info, current[t].clone()) {
                                        (Some(info), Some(params)) => {
                                            let what = format!(
                                                "moving thread `{}` to `{name}` at {at}",
                                                h.threads[t].name
                                            );
                                            check_carried(d, info, &params, &format!("{p}.name="), op_span, &what, "use `move_threads = false`, or move the thread with `move-thread` and new `params`")
                                                .then(|| kept(info, &params))
                                        }
                                        _ => None,
                                    };
                                    let newcomer = format!(
                                        "thread `{}` cannot move with the default to",
                                        h.threads[t].name
                                    );
                                    let child = Newcomer::thread(t, params.as_ref());
                                    let site = format!("{p}.name=");
                                    let sites = (site.as_str(), site.as_str(), op_span);
                                    if check_admit(
                                        d,
                                        &placed!(),
                                        &name,
                                        child,
                                        &newcomer,
                                        sites,
                                        &at,
                                    ) {
                                        sched[t] = Some(name.clone());
                                        current[t] = params;
                                        sync!(t);
                                    }
                                }
                            }
                            default = Some(name);
                        }
                    }
                }
            }
        }
    }
}

/// A time for messages: `0s` rather than `0ns`.
pub(crate) struct At(pub Duration);

impl std::fmt::Display for At {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.0 == Duration::ZERO {
            f.write_str("0s")
        } else {
            write!(f, "{}", self.0)
        }
    }
}

/// The error for a scheduler name that does not exist at `now`, saying
/// whether it appears later, was destroyed, or is a typo.
#[allow(clippy::too_many_arguments)]
fn missing_scheduler(
    d: &Diag<'_>,
    site: &str,
    fallback: Span,
    name: &str,
    now: Duration,
    what: &str,
    created_at: &BTreeMap<String, Duration>,
    destroyed_at: &BTreeMap<String, Duration>,
    all: &[String],
) -> ConfigError {
    let (msg, hint) = if let Some(t) = destroyed_at.get(name) {
        (
            format!("{what} `{name}`, which was destroyed at {}", At(*t)),
            None,
        )
    } else if let Some(t) = created_at.get(name).filter(|t| **t >= now) {
        (
            format!("{what} `{name}`, which does not exist until {}", At(*t)),
            Some(format!(
                "`{name}` is created by an [[at]] operation at {}",
                At(*t)
            )),
        )
    } else {
        (
            format!("{what} `{name}`, which is not a declared scheduler"),
            did_you_mean(name, all.iter().map(String::as_str)).or_else(|| {
                Some(format!("declare `{name}` in a [[scheduler]] table, or create it with an earlier `create-scheduler` operation"))
            }),
        )
    };
    d.make(site, fallback, msg)
        .expected(format!("a scheduler that exists at {}", At(now)))
        .maybe_hint(hint)
}

trait HintIfNone {
    fn hint_if_none(self, h: String) -> Self;
}
impl HintIfNone for ConfigError {
    fn hint_if_none(self, h: String) -> Self {
        if self.hint.is_some() {
            self
        } else {
            self.hint(h)
        }
    }
}

impl Hierarchy {
    /// Checks that live mode can run every thread that has no `exec`: the
    /// `stage` and `player` workloads exist only in the simulator (their
    /// queues and coop_poll calls are modelled, not real), so such a thread
    /// needs `exec`, and a thread with `rtapp` needs its task.
    ///
    /// # Errors
    /// One error per such thread, naming it and its workload kind or task.
    pub fn check_live(&self) -> Result<(), ConfigErrors> {
        // An `rtapp` thread without its task has nothing to run live either.
        let unattached = self.check_rtapp_attached().err().map(|e| e.0);
        let errs: Vec<ConfigError> = self
            .threads
            .iter()
            .filter(|t| t.exec.is_none())
            .filter_map(|t| {
                let kind = t.workload.as_ref().and_then(WorkloadSpec::simulated_only)?;
                Some(
                    ConfigError::at_span(
                        &self.file,
                        t.span,
                        format!(
                            "thread `{}` has a `{kind}` workload, which only the simulator runs",
                            t.name
                        ),
                    )
                    .expected("`exec = [\"prog\", ...]` for live mode")
                    .hint("run the file with `hsched sim`, or give the thread a real program"),
                )
            })
            .chain(unattached.into_iter().flatten())
            .collect();
        if errs.is_empty() {
            Ok(())
        } else {
            Err(ConfigErrors(errs))
        }
    }

    /// Checks that the simulator can run every thread: each has a
    /// workload (a live-mode thread with only `exec`, or one whose rt-app
    /// task was never attached, cannot be simulated).
    ///
    /// # Errors
    /// One error per thread without a workload.
    pub fn check_simulatable(&self) -> Result<(), ConfigErrors> {
        self.check_workloads(false)
    }

    /// Checks that every thread with `rtapp` has its task attached, unless
    /// it has `exec` for live mode: with no rt-app file given, such a thread
    /// runs nothing, in the simulator or live (`hsched check`, which also
    /// passes live-mode threads, and `hsched run`).
    ///
    /// # Errors
    /// One error per thread whose rt-app task is not attached.
    pub fn check_rtapp_attached(&self) -> Result<(), ConfigErrors> {
        self.check_workloads(true)
    }

    /// Threads without a workload, except those with `exec` when
    /// `exec_ok`.
    fn check_workloads(&self, exec_ok: bool) -> Result<(), ConfigErrors> {
        let mut errs = Vec::new();
        for t in &self.threads {
            if t.workload.is_some() || (exec_ok && t.exec.is_some()) {
                continue;
            }
            let e = match &t.rtapp {
                Some(b) => ConfigError::at_span(&self.file, t.span, format!("thread `{}` has `rtapp = \"{}\"`, but no rt-app file is given", t.name, b.task))
                    .expected("an rt-app file that declares the task: `[workload] rtapp = \"tasks.json\"` in the hierarchy file, or `--workload tasks.json` on the command line")
                    .hint("`rtapp` takes a task's program from that file; give the thread a `workload` instead to run it without one"),
                None => ConfigError::at_span(&self.file, t.span, format!("thread `{}` has no `workload`, so it cannot be simulated", t.name))
                    .expected("`workload = { kind = \"...\" }` or `rtapp = \"task\"`")
                    .hint("`exec` alone describes a thread for live mode only"),
            };
            errs.push(e);
        }
        if errs.is_empty() {
            Ok(())
        } else {
            Err(ConfigErrors(errs))
        }
    }
}
