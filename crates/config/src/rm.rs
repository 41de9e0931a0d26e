//! The resource manager's part of a hierarchy file (Regehr 2001, ch. 8):
//! what a `[[principal]]` is (user or group, its uid or gid, its groups),
//! and the `[rm]` section: allocation rules (`[[rm.rule]]`), delegated
//! guarantees (`[[rm.grant]]`) and, for the simulator, timed requests
//! (`[[rm.request]]`). The format is documented in
//! `docs/hierarchy-format.md` ("The resource manager") and
//! `docs/resource-manager.md`.

use crate::error::{did_you_mean, one_of_these};
use crate::model::{PrincipalSpec, SchedulerSpec, Span, ThreadSpec};
use crate::read::{Reader, Tab, V};
use hsched_core::Duration;
use std::collections::BTreeSet;

/// What a `[[principal]]` stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum PrincipalKind {
    /// A user (the default).
    #[default]
    User,
    /// A group of users.
    Group,
}

/// The resource-manager keys of a `[[principal]]`.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct PrincipalRm {
    /// User or group.
    pub kind: PrincipalKind,
    /// The Linux uid that acts as this user (live mode).
    pub uid: Option<u32>,
    /// The Linux gid of this group (live mode).
    pub gid: Option<u32>,
    /// Groups the principal belongs to.
    pub groups: Vec<String>,
    /// Where the `[[principal]]` was declared.
    pub span: Span,
}

/// Keys a `[[principal]]` takes.
pub(crate) const PRINCIPAL_KEYS: &[&str] = &["name", "kind", "uid", "gid", "groups"];

/// The `[rm]` section.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct RmConfig {
    /// Whether the file has an `[rm]` section (live mode then takes
    /// `request`/`release` on the control socket through these rules).
    pub enabled: bool,
    /// Most requests, granted and pending, one principal may hold.
    pub max_requests: Option<u64>,
    /// Allocation rules, in file order (their order does not matter,
    /// §8.4.3).
    pub rules: Vec<RmRule>,
    /// Delegated guarantees.
    pub grants: Vec<RmGrant>,
    /// Timed requests for the simulator, in time order.
    pub requests: Vec<RmRequest>,
}

/// One built-in, parameterized rule (§8.4.2).
#[derive(Clone, Debug, PartialEq)]
pub enum RmRuleKind {
    /// `cap`: reservations of `principal` (or of every user) across all
    /// schedulers at most `max` of the machine.
    Cap {
        /// Whose; `None`: every user.
        principal: Option<String>,
        /// Fraction of the machine.
        max: f64,
    },
    /// `keep`: principals outside `principal` leave it `share` of the
    /// machine.
    Keep {
        /// Who keeps the share.
        principal: String,
        /// Fraction of the machine.
        share: f64,
    },
    /// `fair-share`: each user at most `1/n` of the machine (Fig 8.2).
    FairShare,
    /// `most-important`: `principal`'s requests of higher `value` end its
    /// less important guarantees to fit within `limit` (Fig 8.1).
    MostImportant {
        /// Whose requests.
        principal: String,
        /// Fraction of the machine.
        limit: f64,
    },
    /// `minimum`: a shortest period and a smallest amount.
    Minimum {
        /// Shortest period.
        period: Duration,
        /// Smallest amount.
        amount: Duration,
    },
}

/// A `[[rm.rule]]`.
#[derive(Clone, Debug, PartialEq)]
pub struct RmRule {
    /// The rule and its parameters.
    pub kind: RmRuleKind,
    /// Whose rule it is: `None` for a system rule.
    pub owner: Option<String>,
    /// The event that runs it (`NEW_REQUEST` unless given).
    pub on: Option<String>,
    /// The custom event it raises when it passes a request.
    pub then: Option<String>,
    /// Where it was declared.
    pub span: Span,
}

/// A `[[rm.grant]]`: the guarantee of `scheduler` delegated to `to`.
#[derive(Clone, Debug, PartialEq)]
pub struct RmGrant {
    /// The scheduler whose guarantee is delegated.
    pub scheduler: String,
    /// The principal receiving it.
    pub to: String,
    /// Who delegates (`None`: the system).
    pub by: Option<String>,
    /// Where it was declared.
    pub span: Span,
}

/// A `[[rm.request]]`: at `time`, `principal` asks `guarantee` for
/// `thread`; it ends at `release` if given (and when the thread exits).
#[derive(Clone, Debug, PartialEq)]
pub struct RmRequest {
    /// When.
    pub time: Duration,
    /// The thread.
    pub thread: String,
    /// Who asks.
    pub principal: String,
    /// The guarantee, in the syntax of `guarantee` keys.
    pub guarantee: String,
    /// Importance.
    pub value: f64,
    /// The only scheduler to try, if given.
    pub scheduler: Option<String>,
    /// When the request ends, if it does before the thread exits.
    pub release: Option<Duration>,
    /// Where it was declared.
    pub span: Span,
}

const RM_KEYS: &[&str] = &["max_requests", "rule", "grant", "request"];
const RULES: &[&str] = &["cap", "keep", "fair-share", "most-important", "minimum"];
const EVENT_NAME_MAX: usize = 64;

/// Reads a `[[principal]]`'s resource-manager keys.
pub(crate) fn read_principal(r: &mut Reader<'_>, tab: &Tab<'_, '_>) -> PrincipalRm {
    let mut out = PrincipalRm {
        span: r.span(&tab.span),
        ..PrincipalRm::default()
    };
    if let Some(v) = tab.get("kind") {
        match r.string(v, "kind").as_deref() {
            Some("user") | None => {}
            Some("group") => out.kind = PrincipalKind::Group,
            Some(other) => {
                let e = r
                    .err(v.span(), format!("unknown principal kind `{other}`"))
                    .expected(one_of_these(&["user", "group"]));
                r.push(e);
            }
        }
    }
    let id = |r: &mut Reader<'_>, key: &str| -> Option<u32> {
        tab.get(key)
            .and_then(|v| r.uint(v, key, u64::from(u32::MAX - 1)))
            .map(|n| n as u32)
    };
    out.uid = id(r, "uid");
    out.gid = id(r, "gid");
    if out.kind == PrincipalKind::Group {
        if let (Some(_), Some(v)) = (out.uid, tab.get("uid")) {
            let e = r
                .err(v.span(), "a group principal has a `gid`, not a `uid`")
                .expected("`gid = ...`, or `kind = \"user\"`");
            r.push(e);
        }
    } else if let (Some(_), Some(v)) = (out.gid, tab.get("gid")) {
        let e = r
            .err(v.span(), "a user principal has a `uid`, not a `gid`")
            .expected("`uid = ...`, or `kind = \"group\"`");
        r.push(e);
    }
    if let Some(v) = tab.get("groups") {
        if let Some(a) = r.array(v, "groups") {
            for g in a.iter() {
                if let Some(name) = r.name(g, "groups") {
                    out.groups.push(name);
                }
            }
        }
    }
    out
}

/// Names a rule or request refers to, for the checks.
pub(crate) struct Known<'a> {
    pub principals: &'a [PrincipalSpec],
    pub schedulers: BTreeSet<String>,
    pub threads: BTreeSet<String>,
}

/// Reads the `[rm]` section of `root` and checks the principals' groups.
pub(crate) fn read_section(
    r: &mut Reader<'_>,
    root: &Tab<'_, '_>,
    principals: &[PrincipalSpec],
    schedulers: &[SchedulerSpec],
    threads: &[ThreadSpec],
) -> RmConfig {
    let known = Known {
        principals,
        schedulers: schedulers.iter().map(|s| s.name.clone()).collect(),
        threads: threads.iter().map(|t| t.name.clone()).collect(),
    };
    check_groups(r, &known);
    read_rm(r, root.get("rm"), &known)
}

impl Known<'_> {
    fn principal(&self, r: &mut Reader<'_>, v: &V<'_>, key: &str) -> Option<String> {
        let name = r.name(v, key)?;
        if name == "system" || self.principals.iter().any(|p| p.name == name) {
            return Some(name);
        }
        let names: Vec<&str> = self.principals.iter().map(|p| p.name.as_str()).collect();
        let e = r
            .err(v.span(), format!("principal `{name}` is not declared"))
            .expected("a [[principal]] with this name, or \"system\"")
            .maybe_hint(did_you_mean(&name, names.iter().copied()));
        r.push(e);
        None
    }
    fn scheduler(&self, r: &mut Reader<'_>, v: &V<'_>, key: &str) -> Option<String> {
        let name = r.name(v, key)?;
        if self.schedulers.contains(&name) {
            return Some(name);
        }
        let e = r
            .err(v.span(), format!("scheduler `{name}` is not declared"))
            .expected("the name of a [[scheduler]]")
            .maybe_hint(did_you_mean(
                &name,
                self.schedulers.iter().map(String::as_str),
            ));
        r.push(e);
        None
    }
}

/// Checks the groups principals name: each must be a group principal.
fn check_groups(r: &mut Reader<'_>, known: &Known<'_>) {
    for p in known.principals {
        if p.name == "system" {
            let e = r
                .src
                .error_at(
                    p.rm.span,
                    "principal `system` is the resource manager's own",
                )
                .expected("another name");
            r.push(e);
        }
        for g in &p.rm.groups {
            let ok = known
                .principals
                .iter()
                .any(|q| &q.name == g && q.rm.kind == PrincipalKind::Group);
            if !ok {
                let e = r
                    .src
                    .error_at(
                        p.rm.span,
                        format!(
                            "principal `{}` is in group `{g}`, which is not a group principal",
                            p.name
                        ),
                    )
                    .expected(format!(
                        "a [[principal]] named `{g}` with `kind = \"group\"`"
                    ));
                r.push(e);
            }
        }
    }
}

fn fraction(r: &mut Reader<'_>, tab: &Tab<'_, '_>, what: &str, key: &str) -> Option<f64> {
    let Some(v) = tab.get(key) else {
        r.missing(tab, what, key, "0.3");
        return None;
    };
    let x = r.number(v, key)?;
    if x > 0.0 && x <= 1.0 {
        Some(x)
    } else {
        let e = r
            .err(
                v.span(),
                format!("`{key}` = {x} is not a fraction of the machine"),
            )
            .expected("a number in (0, 1], such as 0.3 for 30 %");
        r.push(e);
        None
    }
}

fn event(r: &mut Reader<'_>, tab: &Tab<'_, '_>, key: &str) -> Option<String> {
    let v = tab.get(key)?;
    let name = r.name(v, key)?;
    let ok = name.len() <= EVENT_NAME_MAX
        && name
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_');
    if ok {
        Some(name)
    } else {
        let e = r
            .err(
                v.span(),
                format!("`{key}` = \"{name}\" is not an event name"),
            )
            .expected("NEW_REQUEST, REQUEST_ENDING, or a custom name in capitals and underscores");
        r.push(e);
        None
    }
}

/// Reads the `[rm]` section.
fn read_rm(r: &mut Reader<'_>, v: Option<&V<'_>>, known: &Known<'_>) -> RmConfig {
    let mut out = RmConfig::default();
    let Some(v) = v else { return out };
    let Some(tab) = r.table(v, "rm") else {
        return out;
    };
    out.enabled = true;
    r.unknown_keys(&tab, "[rm]", RM_KEYS);
    if let Some(v) = tab.get("max_requests") {
        out.max_requests = r.uint_from(v, "max_requests", 1, 1 << 20);
        if out.max_requests == Some(0) {
            let e = r
                .err(v.span(), "`max_requests` = 0 lets no one ask")
                .expected("an integer from 1 to 1048576");
            r.push(e);
            out.max_requests = None;
        }
    }
    if let Some(v) = tab.get("rule") {
        for t in r.tables(v, "rule") {
            if let Some(rule) = read_rule(r, &t, known) {
                out.rules.push(rule);
            }
        }
    }
    if let Some(v) = tab.get("grant") {
        for t in r.tables(v, "grant") {
            let what = "[[rm.grant]]";
            r.unknown_keys(&t, what, &["scheduler", "to", "by"]);
            let scheduler = match t.get("scheduler") {
                Some(v) => known.scheduler(r, v, "scheduler"),
                None => {
                    r.missing(&t, what, "scheduler", "\"rez_alice\"");
                    None
                }
            };
            let to = match t.get("to") {
                Some(v) => known.principal(r, v, "to"),
                None => {
                    r.missing(&t, what, "to", "\"alice\"");
                    None
                }
            };
            let by = t.get("by").and_then(|v| known.principal(r, v, "by"));
            if let (Some(scheduler), Some(to)) = (scheduler, to) {
                out.grants.push(RmGrant {
                    scheduler,
                    to,
                    by: by.filter(|b| b != "system"),
                    span: r.span(&t.span),
                });
            }
        }
    }
    if let Some(v) = tab.get("request") {
        for t in r.tables(v, "request") {
            if let Some(q) = read_request(r, &t, known) {
                out.requests.push(q);
            }
        }
        out.requests.sort_by_key(|q| q.time);
    }
    out
}

fn read_rule(r: &mut Reader<'_>, t: &Tab<'_, '_>, known: &Known<'_>) -> Option<RmRule> {
    let what = "[[rm.rule]]";
    let Some(kv) = t.get("rule") else {
        r.missing(t, what, "rule", "\"cap\"");
        return None;
    };
    let name = r.string(kv, "rule")?;
    let keys: &[&str] = match name.as_str() {
        "cap" => &["rule", "principal", "max", "owner", "on", "then"],
        "keep" => &["rule", "principal", "share", "owner", "on", "then"],
        "fair-share" => &["rule", "owner", "on", "then"],
        "most-important" => &["rule", "principal", "limit", "owner", "on", "then"],
        "minimum" => &["rule", "period", "amount", "owner", "on", "then"],
        other => {
            let e = r
                .err(kv.span(), format!("unknown rule `{other}`"))
                .expected(one_of_these(RULES))
                .maybe_hint(did_you_mean(other, RULES.iter().copied()));
            r.push(e);
            return None;
        }
    };
    let what = format!("the `{name}` rule");
    r.unknown_keys(t, &what, keys);
    let principal = |r: &mut Reader<'_>, required: bool| -> Option<Option<String>> {
        match t.get("principal") {
            Some(v) => known.principal(r, v, "principal").map(Some),
            None if required => {
                r.missing(t, &what, "principal", "\"alice\"");
                None
            }
            None => Some(None),
        }
    };
    let kind = match name.as_str() {
        "cap" => {
            let p = principal(r, false);
            let max = fraction(r, t, &what, "max");
            RmRuleKind::Cap {
                principal: p?,
                max: max?,
            }
        }
        "keep" => {
            let p = principal(r, true);
            let share = fraction(r, t, &what, "share");
            RmRuleKind::Keep {
                principal: p??,
                share: share?,
            }
        }
        "fair-share" => RmRuleKind::FairShare,
        "most-important" => {
            let p = principal(r, true);
            let limit = fraction(r, t, &what, "limit");
            RmRuleKind::MostImportant {
                principal: p??,
                limit: limit?,
            }
        }
        _ => {
            let d = |r: &mut Reader<'_>, key: &str| -> Option<Duration> {
                match t.get(key) {
                    Some(v) => r.duration(v, key),
                    None => {
                        r.missing(t, &what, key, "\"1ms\"");
                        None
                    }
                }
            };
            let period = d(r, "period");
            let amount = d(r, "amount");
            RmRuleKind::Minimum {
                period: period?,
                amount: amount?,
            }
        }
    };
    let owner = match t.get("owner") {
        Some(v) => known.principal(r, v, "owner").filter(|o| o != "system"),
        // A user's ranking of its own applications is the user's rule.
        None => match &kind {
            RmRuleKind::MostImportant { principal, .. } if principal != "system" => {
                Some(principal.clone())
            }
            _ => None,
        },
    };
    Some(RmRule {
        kind,
        owner,
        on: event(r, t, "on"),
        then: event(r, t, "then"),
        span: r.span(&t.span),
    })
}

/// A `[[rule]]`'s `guarantee`: `Some(None)` without one, `None` when it
/// is wrong (reported).
pub(crate) fn rule_guarantee(r: &mut Reader<'_>, t: &Tab<'_, '_>) -> Option<Option<String>> {
    let Some(v) = t.get("guarantee") else {
        return Some(None);
    };
    let text = r.string(v, "guarantee")?;
    if let Some(p) = t.get("params") {
        let e = r
            .err(
                p.span(),
                "a [[rule]] with a `guarantee` takes its parameters from the grant",
            )
            .expected("`guarantee` or `params`, not both");
        r.push(e);
        return None;
    }
    match crate::guarantee_syntax(&text) {
        Ok(()) => Some(Some(text)),
        Err(p) => {
            let e = r
                .err(v.span(), format!("guarantee \"{text}\": {}", p.problem))
                .expected(p.expected)
                .maybe_hint((!p.hint.is_empty()).then_some(p.hint));
            r.push(e);
            None
        }
    }
}

fn read_request(r: &mut Reader<'_>, t: &Tab<'_, '_>, known: &Known<'_>) -> Option<RmRequest> {
    let what = "[[rm.request]]";
    r.unknown_keys(
        t,
        what,
        &[
            "time",
            "thread",
            "principal",
            "guarantee",
            "value",
            "scheduler",
            "release",
        ],
    );
    let time = match t.get("time") {
        Some(v) => r.duration(v, "time"),
        None => {
            r.missing(t, what, "time", "\"1s\"");
            None
        }
    };
    let thread = match t.get("thread") {
        Some(v) => match r.name(v, "thread") {
            Some(n) if known.threads.contains(&n) => Some(n),
            Some(n) => {
                let e = r
                    .err(v.span(), format!("thread `{n}` is not declared"))
                    .expected("the name of a [[thread]]")
                    .maybe_hint(did_you_mean(&n, known.threads.iter().map(String::as_str)));
                r.push(e);
                None
            }
            None => None,
        },
        None => {
            r.missing(t, what, "thread", "\"player\"");
            None
        }
    };
    let principal = match t.get("principal") {
        Some(v) => known.principal(r, v, "principal"),
        None => {
            r.missing(t, what, "principal", "\"alice\"");
            None
        }
    };
    let guarantee = match t.get("guarantee") {
        Some(v) => {
            let text = r.string(v, "guarantee")?;
            match crate::guarantee_syntax(&text) {
                Ok(()) => Some(text),
                Err(p) => {
                    let e = r
                        .err(v.span(), format!("guarantee \"{text}\": {}", p.problem))
                        .expected(p.expected)
                        .maybe_hint((!p.hint.is_empty()).then_some(p.hint));
                    r.push(e);
                    None
                }
            }
        }
        None => {
            r.missing(t, what, "guarantee", "\"RESBS 1ms 5ms\"");
            None
        }
    };
    let value = t
        .get("value")
        .and_then(|v| r.number(v, "value"))
        .unwrap_or(0.0);
    let scheduler = t
        .get("scheduler")
        .and_then(|v| known.scheduler(r, v, "scheduler"));
    let release = t.get("release").and_then(|v| r.duration(v, "release"));
    if let (Some(at), Some(until), Some(v)) = (time, release, t.get("release")) {
        if until <= at {
            let e = r
                .err(
                    v.span(),
                    format!("`release` = {until} is not after `time` = {at}"),
                )
                .expected("a release after the request");
            r.push(e);
            return None;
        }
    }
    Some(RmRequest {
        time: time?,
        thread: thread?,
        principal: principal?,
        guarantee: guarantee?,
        value,
        scheduler,
        release,
        span: r.span(&t.span),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = r#"
[[principal]]
name = "alice"
uid = 1001
groups = ["interactive"]

[[principal]]
name = "interactive"
kind = "group"

[[scheduler]]
name = "rez"
policy = "rez"

[[thread]]
name = "a1"
scheduler = "rez"
params = { amount = "1ms", period = "10ms" }
workload = { kind = "cpu-bound" }
"#;

    fn parse(extra: &str) -> Result<crate::Hierarchy, String> {
        crate::parse_str(&format!("{BASE}{extra}"), "t.toml").map_err(|e| e.to_string())
    }

    #[test]
    fn a_full_rm_section_is_read() {
        let h = parse(
            r#"
[rm]
max_requests = 8
[[rm.rule]]
rule = "cap"
max = 0.3
[[rm.rule]]
rule = "keep"
principal = "interactive"
share = 0.1
on = "NEW_REQUEST"
then = "CHECK_MORE"
[[rm.rule]]
rule = "most-important"
principal = "alice"
limit = 0.5
[[rm.rule]]
rule = "minimum"
period = "1ms"
amount = "100us"
[[rm.grant]]
scheduler = "rez"
to = "alice"
[[rm.request]]
time = "2s"
thread = "a1"
principal = "alice"
guarantee = "RESBS 1ms 5ms"
release = "3s"
value = 2
[[rm.request]]
time = "1s"
thread = "a1"
principal = "alice"
guarantee = "RESBS 1ms 5ms"
"#,
        )
        .unwrap();
        let p = &h.principals[0];
        assert_eq!((p.rm.kind, p.rm.uid), (PrincipalKind::User, Some(1001)));
        assert_eq!(p.rm.groups, ["interactive"]);
        assert_eq!(h.principals[1].rm.kind, PrincipalKind::Group);
        assert!(h.rm.enabled);
        assert_eq!(h.rm.max_requests, Some(8));
        assert_eq!(h.rm.rules.len(), 4);
        assert_eq!(h.rm.rules[1].then.as_deref(), Some("CHECK_MORE"));
        // A user's ranking rule is the user's.
        assert_eq!(h.rm.rules[2].owner.as_deref(), Some("alice"));
        assert_eq!(h.rm.grants[0].to, "alice");
        // Requests in time order.
        assert_eq!(h.rm.requests[0].time, Duration::from_secs(1));
        assert_eq!(h.rm.requests[1].value, 2.0);
    }

    #[test]
    fn a_rule_may_ask_for_a_guarantee_instead_of_placing() {
        let h = parse(
            "[[rule]]\nprogram = \"mpv\"\nscheduler = \"rez\"\nguarantee = \"RESBS 5ms 33ms\"\n",
        )
        .unwrap();
        assert_eq!(h.rules[0].guarantee.as_deref(), Some("RESBS 5ms 33ms"));
        let e = parse("[[rule]]\nprogram = \"mpv\"\nscheduler = \"rez\"\nguarantee = \"RESBS 5ms 33ms\"\nparams = { amount = \"1ms\", period = \"10ms\" }\n").unwrap_err();
        assert!(e.contains("takes its parameters from the grant"), "{e}");
        let e =
            parse("[[rule]]\nprogram = \"mpv\"\nscheduler = \"rez\"\nguarantee = \"RESBS 5ms\"\n")
                .unwrap_err();
        assert!(e.contains("guarantee \"RESBS 5ms\""), "{e}");
        // Without a guarantee a rule under rez still needs its parameters.
        let e = parse("[[rule]]\nprogram = \"mpv\"\nscheduler = \"rez\"\n").unwrap_err();
        assert!(e.contains("no `amount`"), "{e}");
    }

    #[test]
    fn a_file_without_rm_has_it_off() {
        let h = parse("").unwrap();
        assert!(!h.rm.enabled);
        assert!(h.rm.rules.is_empty());
    }

    #[test]
    fn mistakes_are_located_and_explained() {
        let cases: &[(&str, &str)] = &[
            ("[rm]\n[[rm.rule]]\nrule = \"capp\"\nmax = 0.3\n", "unknown rule `capp`"),
            ("[rm]\n[[rm.rule]]\nrule = \"cap\"\nmax = 1.5\n", "is not a fraction of the machine"),
            ("[rm]\n[[rm.rule]]\nrule = \"cap\"\n", "has no `max`"),
            ("[rm]\n[[rm.rule]]\nrule = \"keep\"\nprincipal = \"bob\"\nshare = 0.1\n", "principal `bob` is not declared"),
            ("[rm]\n[[rm.rule]]\nrule = \"fair-share\"\non = \"lower case\"\n", "is not an event name"),
            ("[rm]\n[[rm.grant]]\nscheduler = \"nope\"\nto = \"alice\"\n", "scheduler `nope` is not declared"),
            ("[rm]\n[[rm.request]]\ntime = \"2s\"\nthread = \"a1\"\nprincipal = \"alice\"\nguarantee = \"RESBS 1ms 5ms\"\nrelease = \"1s\"\n", "is not after `time`"),
            ("[rm]\n[[rm.request]]\ntime = \"2s\"\nthread = \"zz\"\nprincipal = \"alice\"\nguarantee = \"RESBS 1ms 5ms\"\n", "thread `zz` is not declared"),
            ("[rm]\n[[rm.request]]\ntime = \"2s\"\nthread = \"a1\"\nprincipal = \"alice\"\nguarantee = \"RESQ 1\"\n", "unknown guarantee type"),
            ("[rm]\nfoo = 1\n", "unknown key `foo` in [rm]"),
            ("[rm]\nmax_requests = 0\n", "lets no one ask"),
        ];
        for (extra, want) in cases {
            let e = parse(extra).expect_err(extra);
            assert!(e.contains(want), "{extra}\n→ {e}");
        }
        // Principals' own mistakes.
        let e = crate::parse_str(
            "[[principal]]\nname = \"a\"\ngroups = [\"b\"]\n[[principal]]\nname = \"b\"\n[[principal]]\nname = \"g\"\nkind = \"group\"\nuid = 3\n[[principal]]\nname = \"h\"\nkind = \"robot\"\n",
            "p.toml",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("which is not a group principal"), "{e}");
        assert!(
            e.contains("a group principal has a `gid`, not a `uid`"),
            "{e}"
        );
        assert!(e.contains("unknown principal kind `robot`"), "{e}");
        let e = crate::parse_str("[[principal]]\nname = \"system\"\n", "s.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("resource manager's own"), "{e}");
    }
}
