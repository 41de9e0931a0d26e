//! The resource manager proper: requests, ownership, candidate schedulers
//! and the events that run rules (Regehr 2001, §8.2–8.4).

use std::collections::{BTreeMap, VecDeque};
use std::fmt;

use hsched_core::{ParamValue, Params};
use hsched_guarantee::compose::{Composition, Status};
use hsched_guarantee::mapping::{ChildRequest, MappingContext};
use hsched_guarantee::{
    can_convert, compose_with, EdgeParams, Guarantee, Hierarchy, ParentRef, ParentSpec, Registry,
    ThreadSpec,
};

use crate::principal::{Principal, SYSTEM};
use crate::rules::{
    Action, Grant, Request, RequestId, Rule, Verdict, View, NEW_REQUEST, REQUEST_ENDING,
};

/// The name refusals give when no scheduler can give the guarantee
/// (§8.3: the set of candidate schedulers is empty).
pub const NO_CANDIDATE: &str = "candidate schedulers (Regehr 2001, §8.3)";
/// The name a request waiting for a scheduler's admission test gives.
pub const ADMISSION: &str = "admission";
/// The name refusals give for the per-principal request limit.
pub const REQUEST_LIMIT: &str = "request limit";
/// Requests (granted and pending) one principal may hold by default: the
/// manager's memory per principal is bounded.
pub const DEFAULT_MAX_REQUESTS: usize = 256;
/// Most events one signal may raise in turn (rules raising each other).
const MAX_EVENTS: usize = 64;

/// A rule attached to an event, owned by a principal (§8.2: rules are
/// owned like guarantees; a system rule applies to every request, a
/// principal's only to requests of that principal and its members).
#[derive(Debug)]
pub struct RuleEntry {
    /// Whose rule it is ([`SYSTEM`] for a system rule).
    pub owner: String,
    /// The event that runs it.
    pub on: String,
    /// A custom event it raises when it passes a request (§8.4.3: rules
    /// that must run in order raise each other's events).
    pub then: Option<String>,
    /// The rule.
    pub rule: Box<dyn Rule>,
}

impl RuleEntry {
    /// A system rule run by `NEW_REQUEST`.
    pub fn system(rule: impl Rule + 'static) -> RuleEntry {
        RuleEntry {
            owner: SYSTEM.to_string(),
            on: NEW_REQUEST.to_string(),
            then: None,
            rule: Box::new(rule),
        }
    }
    /// A rule of `owner`'s run by `NEW_REQUEST`.
    pub fn of(owner: &str, rule: impl Rule + 'static) -> RuleEntry {
        RuleEntry {
            owner: owner.to_string(),
            ..RuleEntry::system(rule)
        }
    }
    /// Run by `event` instead.
    pub fn on(mut self, event: &str) -> RuleEntry {
        self.on = event.to_string();
        self
    }
    /// Raising `event` when it passes a request.
    pub fn then(mut self, event: &str) -> RuleEntry {
        self.then = Some(event.to_string());
        self
    }
}

/// A request as made (the manager numbers it).
#[derive(Clone, Debug, PartialEq)]
pub struct NewRequest {
    /// Who asks.
    pub principal: String,
    /// For which thread.
    pub thread: String,
    /// What.
    pub guarantee: Guarantee,
    /// Importance (0 unless the requester says).
    pub value: f64,
    /// A scheduler the requester wants (only that one is tried).
    pub scheduler: Option<String>,
}

impl NewRequest {
    /// `principal` asks `guarantee` for `thread`.
    pub fn new(principal: &str, thread: &str, guarantee: Guarantee) -> NewRequest {
        NewRequest {
            principal: principal.to_string(),
            thread: thread.to_string(),
            guarantee,
            value: 0.0,
            scheduler: None,
        }
    }
    /// With importance `value`.
    pub fn value(mut self, value: f64) -> NewRequest {
        self.value = value;
        self
    }
    /// At scheduler `name` only.
    pub fn at(mut self, name: &str) -> NewRequest {
        self.scheduler = Some(name.to_string());
        self
    }
}

/// What became of a request.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// Granted now.
    Granted(Grant),
    /// Left pending: tried again whenever a request ends.
    Pending {
        /// Its number (to cancel it, and in the later notice).
        id: RequestId,
        /// The rule that holds it back.
        rule: String,
        /// Why.
        reason: String,
    },
    /// Refused for good.
    Refused {
        /// The rule that refused it.
        rule: String,
        /// Why.
        reason: String,
    },
}

/// Something the manager tells a requester later (§8.2: pending requests
/// may be granted later; the system may revoke).
#[derive(Clone, Debug, PartialEq)]
pub enum Notice {
    /// A pending request was granted.
    Granted(Grant),
    /// A granted guarantee was ended by a rule.
    Revoked {
        /// The request.
        request: Request,
        /// The rule.
        rule: String,
        /// Why.
        reason: String,
    },
    /// A pending request can no longer be granted.
    Refused {
        /// The request.
        request: Request,
        /// The rule.
        rule: String,
        /// Why.
        reason: String,
    },
}

/// A malformed request (§8.2: it returns an error code, and nothing is
/// kept of it).
#[derive(Clone, Debug, PartialEq)]
pub struct RequestError {
    /// A short code (`unknown-principal`, `bad-guarantee`, `busy`,
    /// `limit`, `not-found`, `unauthorized`).
    pub code: &'static str,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for RequestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl std::error::Error for RequestError {}

fn err(code: &'static str, message: impl Into<String>) -> RequestError {
    RequestError {
        code,
        message: message.into(),
    }
}

/// One step of the manager's history, for reports and tests.
#[derive(Clone, Debug, PartialEq)]
pub enum LogEntry {
    /// A request was granted at `scheduler`.
    Granted {
        /// Request.
        id: RequestId,
        /// Thread.
        thread: String,
        /// Scheduler.
        scheduler: String,
    },
    /// A request was left pending by `rule`.
    Pending {
        /// Request.
        id: RequestId,
        /// Thread.
        thread: String,
        /// Rule.
        rule: String,
    },
    /// A request was refused by `rule`.
    Refused {
        /// Request.
        id: RequestId,
        /// Thread.
        thread: String,
        /// Rule.
        rule: String,
    },
    /// A request ended (cancelled, released, or its thread exited).
    Ended {
        /// Request.
        id: RequestId,
        /// Thread.
        thread: String,
    },
    /// A guarantee was revoked by `rule`.
    Revoked {
        /// Request.
        id: RequestId,
        /// Thread.
        thread: String,
        /// Rule.
        rule: String,
    },
}

impl fmt::Display for LogEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LogEntry::Granted {
                id,
                thread,
                scheduler,
            } => write!(f, "#{id} {thread}: granted at {scheduler}"),
            LogEntry::Pending { id, thread, rule } => write!(f, "#{id} {thread}: pending ({rule})"),
            LogEntry::Refused { id, thread, rule } => write!(f, "#{id} {thread}: refused ({rule})"),
            LogEntry::Ended { id, thread } => write!(f, "#{id} {thread}: ended"),
            LogEntry::Revoked { id, thread, rule } => write!(f, "#{id} {thread}: revoked ({rule})"),
        }
    }
}

/// The resource manager: principals, the hierarchy's schedulers and what
/// they advertise, rules, and the granted and pending requests. Purely
/// reactive (§8.1: "not a planner"): every decision uses the state at the
/// moment it is made, and the same calls in the same order give the same
/// decisions.
#[derive(Debug)]
pub struct Manager {
    base: Hierarchy,
    registry: Registry,
    principals: Vec<Principal>,
    delegations: BTreeMap<String, String>,
    rules: Vec<RuleEntry>,
    granted: Vec<Grant>,
    pending: Vec<Request>,
    next_id: RequestId,
    max_requests: usize,
    log: Vec<LogEntry>,
}

/// The parameters the parent scheduler keeps for a thread given `g`: a
/// reservation's amount and period (a continuous soft reservation is sized
/// by the scheduler, Theorem 5.2), a share for proportional share.
fn edge_for(g: &Guarantee) -> EdgeParams {
    let mut e = EdgeParams::default();
    match *g {
        Guarantee::ResCS { .. } => {}
        Guarantee::Ps { share } | Guarantee::Psbe { share, .. } => e.share = Some(share),
        _ => {
            if let Some((a, p)) = g.amount_period() {
                e.amount = Some(a);
                e.period = Some(p);
            }
        }
    }
    e
}

fn ns(d: hsched_core::time::Duration) -> ParamValue {
    ParamValue::Str(format!("{}ns", d.as_nanos()))
}

impl Grant {
    /// The parent-side parameters to apply with the HSI's
    /// `begin_reservation` (or a move): `amount` and `period` of what the
    /// thread receives, or its `share`.
    pub fn params(&self) -> Params {
        let mut p = Params::new();
        match self.received {
            Guarantee::Ps { share } | Guarantee::Psbe { share, .. } => {
                p.insert("share", ParamValue::Float(share));
            }
            g => {
                if let Some((a, per)) = g.amount_period() {
                    p.insert("amount", ns(a));
                    p.insert("period", ns(per));
                }
            }
        }
        p
    }
}

impl Manager {
    /// A manager over the abstract hierarchy `base` (what the file
    /// declares), with the built-in guarantee mappings and only the system
    /// principal.
    pub fn new(base: Hierarchy) -> Manager {
        Manager::with_registry(base, Registry::builtin())
    }

    /// With the mappings of `registry`.
    pub fn with_registry(base: Hierarchy, registry: Registry) -> Manager {
        Manager {
            base,
            registry,
            principals: vec![Principal::system()],
            delegations: BTreeMap::new(),
            rules: Vec::new(),
            granted: Vec::new(),
            pending: Vec::new(),
            next_id: 1,
            max_requests: DEFAULT_MAX_REQUESTS,
            log: Vec::new(),
        }
    }

    /// Adds a principal.
    ///
    /// # Errors
    /// Its name is taken, or it names a group that is not a group.
    pub fn add_principal(&mut self, p: Principal) -> Result<(), RequestError> {
        if self.principal(&p.name).is_some() {
            return Err(err("duplicate", format!("principal `{}` exists", p.name)));
        }
        self.principals.push(p);
        Ok(())
    }

    /// Adds a rule.
    pub fn add_rule(&mut self, r: RuleEntry) {
        self.rules.push(r);
    }

    /// Adds a rule before the others, so that of several refusals its is
    /// the one named (the outcome does not depend on the order, §8.4.3;
    /// only which rule a refusal names does).
    pub fn add_rule_first(&mut self, r: RuleEntry) {
        self.rules.insert(0, r);
    }

    /// Sets how many requests (granted and pending) one principal may hold.
    pub fn set_max_requests(&mut self, n: usize) {
        self.max_requests = n;
    }

    /// The principal named `name`.
    pub fn principal(&self, name: &str) -> Option<&Principal> {
        self.principals.iter().find(|p| p.name == name)
    }

    /// The principals, the system first.
    pub fn principals(&self) -> &[Principal] {
        &self.principals
    }

    /// The user principal whose uid is `uid`.
    pub fn principal_of_uid(&self, uid: u32) -> Option<&Principal> {
        self.principals
            .iter()
            .find(|p| p.kind == crate::PrincipalKind::User { uid: Some(uid) })
    }

    /// Granted requests, in the order granted.
    pub fn granted(&self) -> &[Grant] {
        &self.granted
    }

    /// Pending requests, in arrival order.
    pub fn pending(&self) -> &[Request] {
        &self.pending
    }

    /// Everything decided so far.
    pub fn log(&self) -> &[LogEntry] {
        &self.log
    }

    /// The abstract hierarchy the manager places threads in.
    pub fn hierarchy(&self) -> &Hierarchy {
        &self.base
    }

    fn view(&self) -> View<'_> {
        View {
            cpus: self.base.cpus,
            principals: &self.principals,
            granted: &self.granted,
            pending: &self.pending,
        }
    }

    fn first_parent(&self, scheduler: &str) -> Option<&ParentRef> {
        self.base
            .schedulers
            .iter()
            .find(|s| s.name == scheduler)
            .and_then(|s| s.parents.first())
            .map(|p| &p.parent)
    }

    /// Who owns the guarantee scheduler `name` receives (§8.2): the
    /// principal it was delegated to, else the owner of its (first)
    /// parent's guarantee; the system owns the top's.
    pub fn owner_of(&self, name: &str) -> String {
        let mut at = name;
        // A hierarchy is acyclic; the bound only guards a hand-built one.
        for _ in 0..=self.base.schedulers.len() {
            if let Some(p) = self.delegations.get(at) {
                return p.clone();
            }
            match self.first_parent(at) {
                Some(ParentRef::Scheduler(parent)) => at = parent,
                _ => break,
            }
        }
        SYSTEM.to_string()
    }

    /// Delegates the guarantee of scheduler `scheduler` to `to` (§8.2): the
    /// system may delegate any guarantee; another principal only one it
    /// owns (it subdivides what it has, consulting no one).
    ///
    /// # Errors
    /// An unknown scheduler or principal, or `by` does not own it.
    pub fn delegate(&mut self, by: &str, scheduler: &str, to: &str) -> Result<(), RequestError> {
        if !self.base.schedulers.iter().any(|s| s.name == scheduler) {
            return Err(err("not-found", format!("no scheduler `{scheduler}`")));
        }
        if self.principal(to).is_none() {
            return Err(err("unknown-principal", format!("no principal `{to}`")));
        }
        let owner = self.owner_of(scheduler);
        if by != SYSTEM && owner != by {
            return Err(err(
                "unauthorized",
                format!("the guarantee of `{scheduler}` belongs to `{owner}`, not to `{by}`"),
            ));
        }
        self.delegations
            .insert(scheduler.to_string(), to.to_string());
        Ok(())
    }

    /// The hierarchy with the granted threads placed, the thread `probe`
    /// (with `g`) under `at` if given, and every thread a grant moves
    /// taken out of its place in the file.
    fn placed(&self, except: &[RequestId], probe: Option<(&str, &Guarantee, &str)>) -> Hierarchy {
        let mut h = self.base.clone();
        let grants: Vec<&Grant> = self
            .granted
            .iter()
            .filter(|g| !except.contains(&g.request.id))
            .collect();
        h.threads.retain(|t| {
            !grants.iter().any(|g| g.request.thread == t.name)
                && probe.is_none_or(|(name, _, _)| name != t.name)
        });
        for g in grants {
            let mut edge = ParentSpec::scheduler(&g.scheduler);
            edge.params = edge_for(&g.request.guarantee);
            h.add_thread(ThreadSpec::new(&g.request.thread, edge).requesting(g.request.guarantee));
        }
        if let Some((name, g, at)) = probe {
            let mut edge = ParentSpec::scheduler(at);
            edge.params = edge_for(g);
            h.add_thread(ThreadSpec::new(name, edge).requesting(*g));
        }
        h
    }

    /// Whether scheduler `name` advertises guarantees of the kind of `g`
    /// to any number of children (§8.3: advertised guarantees are
    /// templates with unbound parameters; the template is asked by giving
    /// its mapping two small children of that kind on what the scheduler
    /// receives). `Err` says why not.
    fn advertises(
        &self,
        name: &str,
        received: Option<Guarantee>,
        g: &Guarantee,
    ) -> Result<(), String> {
        let Some(spec) = self.base.schedulers.iter().find(|s| s.name == name) else {
            return Err("no such scheduler".into());
        };
        let ctx = MappingContext {
            cpus: self.base.cpus,
        };
        let mapping = self
            .registry
            .build(&spec.policy, &spec.params, &ctx)
            .map_err(|e| e.to_string())?;
        let Some(received) = received else {
            return Err("it receives no guarantee".into());
        };
        let accepted = mapping.accepts(&received)?;
        let small = match g.amount_period() {
            Some((_, p)) => {
                let a = hsched_core::time::Duration::from_nanos((p.as_nanos() / 10_000).max(1));
                Guarantee::reservation(g.kind(), a, p).unwrap_or(*g)
            }
            None => match *g {
                Guarantee::Ps { .. } => Guarantee::Ps { share: 1e-4 },
                Guarantee::Psbe { error, .. } => Guarantee::Psbe { share: 1e-4, error },
                other => other,
            },
        };
        let edge = edge_for(&small);
        let probe = |n| ChildRequest {
            name: n,
            is_thread: true,
            params: &edge,
            request: Some(&small),
            multiprocessor: false,
        };
        let kids = [probe("probe-1"), probe("probe-2")];
        let out = mapping.child_guarantees(&[accepted], &kids);
        for r in out {
            match r {
                Ok(p) if p.options.iter().any(|o| can_convert(o.kind(), g.kind())) => {}
                Ok(p) => {
                    return Err(format!(
                        "{} gives its children {}, which cannot become {}",
                        mapping.title(),
                        p.first().kind(),
                        g.kind()
                    ))
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Candidate schedulers for `req` (§8.3 step 2), the requester's own
    /// first, then its groups', then the system's; or why there are none.
    fn candidates(&self, req: &Request, now: &Composition) -> Result<Vec<String>, String> {
        let mut mine = Vec::new();
        let mut groups = Vec::new();
        let mut system = Vec::new();
        let mut why = Vec::new();
        for s in &self.base.schedulers {
            if req.scheduler.as_ref().is_some_and(|n| n != &s.name) {
                continue;
            }
            let owner = self.owner_of(&s.name);
            let view = self.view();
            let rank = if owner == req.principal {
                &mut mine
            } else if owner != SYSTEM && view.counts_toward(&req.principal, &owner) {
                &mut groups
            } else if owner == SYSTEM {
                &mut system
            } else {
                why.push(format!("`{}` belongs to `{owner}`", s.name));
                continue;
            };
            match self.advertises(&s.name, now.received(&s.name), &req.guarantee) {
                Ok(()) => rank.push(s.name.clone()),
                Err(e) => why.push(format!("`{}`: {e}", s.name)),
            }
        }
        if let Some(n) = &req.scheduler {
            if !self.base.schedulers.iter().any(|s| &s.name == n) {
                return Err(format!("there is no scheduler `{n}`"));
            }
        }
        mine.extend(groups);
        mine.extend(system);
        if mine.is_empty() {
            Err(format!(
                "no scheduler that {} may use provides {}: {}",
                self.principal(&req.principal)
                    .map_or_else(|| req.principal.clone(), ToString::to_string),
                req.guarantee.kind(),
                if why.is_empty() {
                    "the hierarchy has no schedulers".to_string()
                } else {
                    why.join("; ")
                }
            ))
        } else {
            Ok(mine)
        }
    }

    /// Tries `req` at `at` (§8.3 step 3): the scheduler's admission test,
    /// through the composition check of the whole hierarchy with the
    /// thread added. `Ok` is what the thread receives.
    fn admit_at(
        &self,
        req: &Request,
        at: &str,
        except: &[RequestId],
        before: &Composition,
    ) -> Result<Guarantee, String> {
        let with = self.placed(except, Some((&req.thread, &req.guarantee, at)));
        let after = compose_with(&with, &self.registry);
        let node = after.thread(&req.thread);
        let ok = node.is_some_and(|n| n.status == Status::Ok)
            && after.diagnostics.len() <= before.diagnostics.len();
        if ok {
            return after
                .received(&req.thread)
                .ok_or_else(|| "it receives nothing".to_string());
        }
        let new: Vec<String> = after
            .diagnostics
            .iter()
            .filter(|d| !before.diagnostics.contains(d))
            .map(ToString::to_string)
            .collect();
        Err(if new.is_empty() {
            "the composition check fails".to_string()
        } else {
            new.join("; ")
        })
    }

    /// Runs the rules for `req` (§8.4.1): `NEW_REQUEST`, and the custom
    /// events passing rules raise. Returns the verdict that decides (a
    /// refusal over a wait over revocations) with the rule's name.
    fn run_rules(&self, req: &Request) -> (Verdict, String) {
        let view = self.view();
        let mut events: VecDeque<String> = VecDeque::from([NEW_REQUEST.to_string()]);
        let mut seen: Vec<String> = Vec::new();
        let mut wait: Option<(Verdict, String)> = None;
        let mut victims: Vec<RequestId> = Vec::new();
        let mut victim_rules: Vec<String> = Vec::new();
        while let Some(ev) = events.pop_front() {
            if seen.contains(&ev) || seen.len() >= MAX_EVENTS {
                continue;
            }
            seen.push(ev.clone());
            for entry in self.rules.iter().filter(|e| e.on == ev) {
                let applies =
                    entry.owner == SYSTEM || view.counts_toward(&req.principal, &entry.owner);
                if !applies {
                    continue;
                }
                let name = entry.rule.name();
                match entry.rule.admit(&view, req) {
                    Verdict::Pass => {
                        if let Some(t) = &entry.then {
                            events.push_back(t.clone());
                        }
                    }
                    v @ Verdict::Refuse(_) => return (v, name),
                    v @ Verdict::Wait(_) => {
                        if wait.is_none() {
                            wait = Some((v, name));
                        }
                    }
                    Verdict::PassIfRevoked(ids, why) => {
                        // A rule revokes only guarantees its owner may end.
                        let allowed = ids.into_iter().filter(|id| {
                            self.granted.iter().any(|g| {
                                g.request.id == *id
                                    && (entry.owner == SYSTEM
                                        || view.counts_toward(&g.request.principal, &entry.owner))
                            })
                        });
                        victims.extend(allowed);
                        victim_rules.push(format!("{name}: {why}"));
                        if let Some(t) = &entry.then {
                            events.push_back(t.clone());
                        }
                    }
                }
            }
        }
        if let Some(w) = wait {
            return w;
        }
        victims.sort_unstable();
        victims.dedup();
        if victims.is_empty() {
            (Verdict::Pass, String::new())
        } else {
            (
                Verdict::PassIfRevoked(victims, victim_rules.join("; ")),
                String::new(),
            )
        }
    }

    /// Decides `req`: rules, candidates, admission. Grants and revokes on
    /// success; returns the outcome and the revocations it made.
    fn decide(&mut self, req: &Request) -> (Outcome, Vec<Notice>) {
        let (verdict, rule) = self.run_rules(req);
        let (victims, why) = match verdict {
            Verdict::Refuse(reason) => return (Outcome::Refused { rule, reason }, Vec::new()),
            Verdict::Wait(reason) => {
                return (
                    Outcome::Pending {
                        id: req.id,
                        rule,
                        reason,
                    },
                    Vec::new(),
                )
            }
            Verdict::Pass => (Vec::new(), String::new()),
            Verdict::PassIfRevoked(ids, why) => (ids, why),
        };
        // The hierarchy as it is (less the victims), composed once for
        // every candidate.
        let now = compose_with(&self.placed(&victims, None), &self.registry);
        let candidates = match self.candidates(req, &now) {
            Ok(c) => c,
            Err(reason) => {
                return (
                    Outcome::Refused {
                        rule: NO_CANDIDATE.to_string(),
                        reason,
                    },
                    Vec::new(),
                )
            }
        };
        let mut refusals = Vec::new();
        for at in &candidates {
            match self.admit_at(req, at, &victims, &now) {
                Ok(received) => {
                    let mut notices = Vec::new();
                    for id in &victims {
                        if let Some(k) = self.granted.iter().position(|g| g.request.id == *id) {
                            let g = self.granted.remove(k);
                            self.log.push(LogEntry::Revoked {
                                id: *id,
                                thread: g.request.thread.clone(),
                                rule: why.clone(),
                            });
                            notices.push(Notice::Revoked {
                                request: g.request,
                                rule: why.clone(),
                                reason: format!(
                                    "request #{} of value {} needed the room",
                                    req.id, req.value
                                ),
                            });
                        }
                    }
                    let grant = Grant {
                        request: req.clone(),
                        scheduler: at.clone(),
                        received,
                    };
                    self.granted.push(grant.clone());
                    self.log.push(LogEntry::Granted {
                        id: req.id,
                        thread: req.thread.clone(),
                        scheduler: at.clone(),
                    });
                    return (Outcome::Granted(grant), notices);
                }
                Err(e) => refusals.push(format!("`{at}`: {e}")),
            }
        }
        (
            Outcome::Pending {
                id: req.id,
                rule: ADMISSION.to_string(),
                reason: refusals.join("; "),
            },
            Vec::new(),
        )
    }

    /// A new request (§8.3). Malformed requests are errors and leave no
    /// trace; well-formed ones are granted, refused, or kept pending.
    /// The notices are guarantees a rule revoked to make room.
    ///
    /// # Errors
    /// An unknown principal, an invalid guarantee (or more than the
    /// machine), a thread that already has a request, or the principal's
    /// request limit.
    pub fn request(
        &mut self,
        new: NewRequest,
    ) -> Result<(RequestId, Outcome, Vec<Notice>), RequestError> {
        if self.principal(&new.principal).is_none() {
            return Err(err(
                "unknown-principal",
                format!("no principal `{}`", new.principal),
            ));
        }
        new.guarantee
            .validate()
            .map_err(|e| err("bad-guarantee", format!("{}: {e}", new.guarantee)))?;
        if new.guarantee.rate() > 1.0 {
            return Err(err(
                "bad-guarantee",
                format!("{} asks more than one processor", new.guarantee),
            ));
        }
        if !new.value.is_finite() {
            return Err(err("bad-request", "`value` must be a finite number"));
        }
        if new.thread.is_empty() {
            return Err(err("bad-request", "the thread name is empty"));
        }
        if let Some(id) = self.request_of(&new.thread) {
            return Err(err(
                "busy",
                format!(
                    "thread `{}` has request #{id} already; release it first",
                    new.thread
                ),
            ));
        }
        let held = self
            .granted
            .iter()
            .map(|g| &g.request)
            .chain(&self.pending)
            .filter(|r| r.principal == new.principal)
            .count();
        if held >= self.max_requests {
            return Err(err(
                "limit",
                format!(
                    "`{}` holds {held} requests, the most one principal may ({REQUEST_LIMIT})",
                    new.principal
                ),
            ));
        }
        let id = self.next_id;
        self.next_id += 1;
        let req = Request {
            id,
            principal: new.principal,
            thread: new.thread,
            guarantee: new.guarantee,
            value: new.value,
            scheduler: new.scheduler,
        };
        let (outcome, notices) = self.decide(&req);
        match &outcome {
            Outcome::Pending { rule, .. } => {
                self.log.push(LogEntry::Pending {
                    id,
                    thread: req.thread.clone(),
                    rule: rule.clone(),
                });
                self.pending.push(req);
            }
            Outcome::Refused { rule, .. } => self.log.push(LogEntry::Refused {
                id,
                thread: req.thread.clone(),
                rule: rule.clone(),
            }),
            Outcome::Granted(_) => {}
        }
        Ok((id, outcome, notices))
    }

    /// The request (granted or pending) of `thread`, if any.
    pub fn request_of(&self, thread: &str) -> Option<RequestId> {
        self.granted
            .iter()
            .map(|g| &g.request)
            .chain(&self.pending)
            .find(|r| r.thread == thread)
            .map(|r| r.id)
    }

    /// The request numbered `id`, granted or pending.
    pub fn find(&self, id: RequestId) -> Option<&Request> {
        self.granted
            .iter()
            .map(|g| &g.request)
            .chain(&self.pending)
            .find(|r| r.id == id)
    }

    /// Ends request `id` on behalf of `by` (§8.2: its requester cancels
    /// it, or the system revokes it), signals `REQUEST_ENDING`, and tries
    /// the pending requests again. Returns the ended request and the
    /// notices (pending requests granted, guarantees revoked by rules).
    ///
    /// # Errors
    /// No such request, or `by` is neither its principal nor the system.
    pub fn release(
        &mut self,
        by: &str,
        id: RequestId,
    ) -> Result<(Request, Vec<Notice>), RequestError> {
        let Some(r) = self.find(id) else {
            return Err(err("not-found", format!("no request #{id}")));
        };
        if by != SYSTEM && r.principal != by {
            return Err(err(
                "unauthorized",
                format!("request #{id} belongs to `{}`, not to `{by}`", r.principal),
            ));
        }
        let ended = if let Some(k) = self.granted.iter().position(|g| g.request.id == id) {
            self.granted.remove(k).request
        } else {
            let k = self
                .pending
                .iter()
                .position(|p| p.id == id)
                .unwrap_or_default();
            self.pending.remove(k)
        };
        self.log.push(LogEntry::Ended {
            id,
            thread: ended.thread.clone(),
        });
        let mut notices = self.run_event(REQUEST_ENDING, Some(&ended));
        notices.extend(self.retry_pending());
        Ok((ended, notices))
    }

    /// Ends the request of `thread` (its thread exited, §8.2), if it has
    /// one.
    pub fn thread_exited(&mut self, thread: &str) -> Vec<Notice> {
        match self.request_of(thread) {
            Some(id) => self.release(SYSTEM, id).map(|(_, n)| n).unwrap_or_default(),
            None => Vec::new(),
        }
    }

    /// Ends every request of `principal` (its last session ended).
    pub fn principal_gone(&mut self, principal: &str) -> Vec<Notice> {
        let ids: Vec<RequestId> = self
            .granted
            .iter()
            .map(|g| &g.request)
            .chain(&self.pending)
            .filter(|r| r.principal == principal)
            .map(|r| r.id)
            .collect();
        let mut out = Vec::new();
        for id in ids {
            if let Ok((_, n)) = self.release(SYSTEM, id) {
                out.extend(n);
            }
        }
        out
    }

    /// Signals the custom event `event` (§8.2): its rules react, and the
    /// pending requests are tried again when anything was revoked.
    pub fn signal(&mut self, event: &str) -> Vec<Notice> {
        let mut out = self.run_event(event, None);
        if !out.is_empty() {
            out.extend(self.retry_pending());
        }
        out
    }

    /// Runs the rules attached to `event` and the events they signal,
    /// applying their revocations.
    fn run_event(&mut self, event: &str, ending: Option<&Request>) -> Vec<Notice> {
        let mut events: VecDeque<String> = VecDeque::from([event.to_string()]);
        let mut seen: Vec<String> = Vec::new();
        let mut out = Vec::new();
        while let Some(ev) = events.pop_front() {
            if seen.contains(&ev) || seen.len() >= MAX_EVENTS {
                continue;
            }
            seen.push(ev.clone());
            let mut actions: Vec<(String, String, Action)> = Vec::new();
            {
                let view = self.view();
                for entry in self.rules.iter().filter(|e| e.on == ev) {
                    for a in entry.rule.react(&view, ending) {
                        actions.push((entry.owner.clone(), entry.rule.name(), a));
                    }
                }
            }
            for (owner, name, a) in actions {
                match a {
                    Action::Signal(e) => events.push_back(e),
                    Action::Revoke { id, reason } => {
                        let Some(k) = self.granted.iter().position(|g| g.request.id == id) else {
                            continue;
                        };
                        let may = owner == SYSTEM
                            || self
                                .view()
                                .counts_toward(&self.granted[k].request.principal, &owner);
                        if !may {
                            continue;
                        }
                        let g = self.granted.remove(k);
                        self.log.push(LogEntry::Revoked {
                            id,
                            thread: g.request.thread.clone(),
                            rule: name.clone(),
                        });
                        out.push(Notice::Revoked {
                            request: g.request,
                            rule: name.clone(),
                            reason,
                        });
                    }
                }
            }
        }
        out
    }

    /// Tries the pending requests again, the most important first and
    /// among equals the oldest (§8.4.4.1: when a guarantee ends, give one
    /// to the most important feasible pending request).
    fn retry_pending(&mut self) -> Vec<Notice> {
        let mut order: Vec<Request> = self.pending.clone();
        order.sort_by(|a, b| b.value.total_cmp(&a.value).then(a.id.cmp(&b.id)));
        let mut out = Vec::new();
        for req in order {
            let Some(k) = self.pending.iter().position(|p| p.id == req.id) else {
                continue;
            };
            // Out of the pending list while it is decided, so that rules
            // do not count it twice.
            let req = self.pending.remove(k);
            let (outcome, notices) = self.decide(&req);
            out.extend(notices);
            match outcome {
                Outcome::Granted(g) => out.push(Notice::Granted(g)),
                Outcome::Pending { .. } => self.pending.insert(k, req),
                Outcome::Refused { rule, reason } => {
                    self.log.push(LogEntry::Refused {
                        id: req.id,
                        thread: req.thread.clone(),
                        rule: rule.clone(),
                    });
                    out.push(Notice::Refused {
                        request: req,
                        rule,
                        reason,
                    });
                }
            }
        }
        out
    }
}
