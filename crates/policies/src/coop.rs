//! `coop`: fair share with cooperative domains and cooperative polling
//! (Sinha 2007, §2.3–2.5; Figs 2.12–2.17).
//!
//! # Algorithm
//! - **Virtual time, minimum first** (§2.2.2, §2.3.3): every best-effort
//!   child has its own virtual time; every *cooperative domain* is one
//!   entity with one shared virtual time. Run time is charged net of stolen
//!   time ([`Ctx::vp_received`]); a domain member's run time is divided by
//!   the domain's member count (Fig 2.14). Dispatch picks the entity with
//!   the smallest virtual time; ties go to a domain, then to queue order.
//! - **Inside a domain** (Fig 2.15) the member with the earliest *expired*
//!   deadline (a release time, see the seed's terminology) runs, else the
//!   member with the most important best-effort event (larger priority,
//!   then earlier timestamp), else the member queued first (the thesis
//!   returns an error there; a ready member must run eventually).
//! - **Slices** (Eq 2.2, Fig 2.17): `max(period / n, min_slice)` with `n`
//!   runnable children per processor held, times the runnable member count
//!   for a domain; cut at the earliest coop deadline of any other member
//!   (cooperative sleepers included) unless fairness forbids, i.e. unless
//!   the chosen entity is still behind that member's domain in virtual
//!   time, in which case the slice is extended until it catches up; never
//!   below `min_slice`. No child is preempted before its slice ends
//!   ("strict time isolation"), with one exception below.
//! - **Borrowing** (§2.2.2): an entity that becomes runnable takes
//!   `max(own, V)` where `V` is the smallest virtual time among runnable
//!   entities, so sleepers build no credit ("use it or lose it"). The
//!   thesis sets it to the minimum outright; taking the maximum keeps a
//!   task that overran and slept briefly from gaining (decision).
//! - **Wake-up at a deadline**: when a member wakes with an expired
//!   deadline while every processor is busy, it preempts the best-effort
//!   entity with the largest virtual time if that is not behind the
//!   member's domain. The slice of that entity was cut at this deadline
//!   already (Fig 2.17); this makes the outcome independent of whether the
//!   slice timer or the wake-up is processed first at the same instant.
//!
//! # `coop_poll` (§2.3.2, Fig 2.12)
//! `Msg::App { kind: "coop_poll", params }` about a child, sent by the
//! child itself through `Hsi::thread_msg`. Parameters (all optional; times
//! are absolute instants in integer nanoseconds):
//! - `deadline`: the child's earliest deadline event (IN);
//! - `be_priority`, `be_timestamp`: its most important best-effort event
//!   (IN; `be_timestamp` defaults to 0).
//!
//! With neither, the call is a plain yield and the child is treated as a
//! best-effort task (step 2 of the seed's top half). Otherwise the call
//! (re)admits the child to the cooperative domain named by its `domain`
//! parameter, marks it *well behaved* and yields: its processor goes to
//! the best candidate, possibly itself. A child with no best-effort event
//! and a future deadline is expected to block until that deadline
//! (cooperative sleep); its deadline keeps cutting other slices.
//!
//! **OUT** is written into the child's VP parameters (read with
//! `hsi.vp_params(hsi.thread_vp(t))`) each time a member is
//! dispatched: `out_deadline` (integer ns), the end of the slice just
//! granted, by which it must call `coop_poll` again; `out_be_priority` and
//! `out_be_timestamp`, the most important best-effort event of the *other*
//! members of its domain (absent when none).
//!
//! # Policing (§2.3, decision 6)
//! A member is demoted, one way, to best effort when its slice ends more
//! than `grace` before it calls `coop_poll`, or when it blocks other than
//! after a `coop_poll` call. Its virtual time becomes its own, starting at
//! the domain's, and is charged to itself only. Its next `coop_poll`
//! re-admits it. `grace` (default 1 ms, the thesis's worst event
//! granularity, §2.1.1) exists because an event loop can only yield at an
//! event boundary, after the OUT deadline has passed.
//!
//! Each demotion is also written into the child's VP parameters, beside
//! OUT and kept across later OUT updates: `policed` (`"overrun"` or
//! `"blocked"`, the latest reason), `policed_count` (demotions so far) and
//! `policed_blocked` (those for blocking). A driver that answers
//! `coop_poll` for a real program (the live daemon) reads them when it
//! replies, so it needs no policy trace: the notes (`coop: policed ...`)
//! are only recorded when tracing is on. A child registered with any of
//! the written keys (OUT or policing, e.g. copied from the thread that
//! created it) starts without them.
//!
//! # Several domains (§2.5) and several processors
//! Each `domain` number is a separate entity with its own virtual time and
//! event queues; OUT reports only the caller's domain. On several
//! processors every processor this instance holds runs the minimum-
//! virtual-time entity among those queued: a domain may run members on
//! several processors at once, all charged to the shared virtual time, and
//! the slice divisor `n` is the runnable count per processor held. The
//! thesis is uniprocessor; this is the simplest extension that keeps the
//! domain one fair-share entity (decision).
//!
//! Notifications reach an instance only after its own actions are
//! applied, so every hook first reconciles with what already happened (a
//! processor taken back, a running child released), as `ps` does (the
//! crate's `sfq` module holds what the two share); a hook that revokes a
//! VP of a child instance never grants that instance another VP in the
//! same hook.
//!
//! # Parameters
//! Instance: `period` (default 20 ms), `min_slice` (default 100 µs),
//! `grace` (default 1 ms).
//! Child: `domain` (integer ≥ 0, default 0), plus the OUT keys above,
//! which the scheduler writes and ignores on input.
//!
//! # Cost per decision
//! Dispatch is O(log n) in the children, plus a look at each domain with
//! queued members and each held processor. The queued best-effort children
//! sit in an ordered set by (virtual time, queue order), and each domain
//! keeps its queued members in three ordered sets, by deadline, by
//! best-effort event and by queue order, since which of Fig 2.15's rules
//! applies depends on the time (an expired deadline) but the order within
//! each does not; the member a domain runs is the first usable entry of the
//! first set that has one (an entry is skipped only for the avoid rule).
//! The earliest deadline of the other members (Fig 2.17) and the other
//! members' best event (OUT) are kept in ordered sets too, and the runnable
//! counts as counts. A queued child whose VP stopped being ready (a
//! release not yet delivered) is found among the children queued in this
//! hook and the one it is about while no notification waits
//! ([`Ctx::notifications_waiting`]); only with one waiting are all
//! children looked at.
//!
//! # Guarantees
//! It accepts any guarantee and divides what it receives in fair shares,
//! weight `1/n` per best-effort child and `members/n` per domain; the
//! shares change as children join and leave domains, so the guarantee
//! mapping promises each child `NULL` (docs/guarantees.md). Timeliness
//! inside a domain is cooperative and carries no guarantee (the thesis's
//! goal (c): no reservations).

use crate::registry::PolicyInfo;
use crate::sfq::{arm_timer, Held, Holder};
use hsched_core::{
    CpuId, Ctx, Duration, Instant, Msg, Node, ParamError, ParamSpec, ParamValue, Params, Policy,
    PolicyError, PolicyEvent, RevokeReason, Side, VpId, VpState, VpTable,
};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet};

/// Registry entry.
pub const INFO: PolicyInfo = PolicyInfo {
    name: "coop",
    summary:
        "fair share with cooperative domains and coop_poll (Sinha 2007): informed yields, policing",
    source: "Sinha 2007, §2.3–2.5",
    instance_params: &[
        ParamSpec {
            key: "period",
            kind: "duration",
            default: "20ms",
            doc: "fair-share period divided among runnable children",
        },
        ParamSpec {
            key: "min_slice",
            kind: "duration",
            default: "100us",
            doc: "shortest slice",
        },
        ParamSpec {
            key: "grace",
            kind: "duration",
            default: "1ms",
            doc: "how late a member may call coop_poll after its slice before it is policed",
        },
    ],
    child_params: &[
        ParamSpec {
            key: "domain",
            kind: "integer",
            default: "0",
            doc: "cooperative domain joined by calling coop_poll",
        },
        ParamSpec {
            key: "out_deadline",
            kind: "integer",
            default: "written",
            doc: "OUT: instant (ns) by which to call coop_poll again",
        },
        ParamSpec {
            key: "out_be_priority",
            kind: "integer",
            default: "written",
            doc: "OUT: priority of the other members' best best-effort event",
        },
        ParamSpec {
            key: "out_be_timestamp",
            kind: "integer",
            default: "written",
            doc: "OUT: its timestamp (ns)",
        },
        ParamSpec {
            key: "policed",
            kind: "\"overrun\" or \"blocked\"",
            default: "written",
            doc: "written: the latest demotion's reason (absent until policed)",
        },
        ParamSpec {
            key: "policed_count",
            kind: "integer",
            default: "written",
            doc: "demotions so far",
        },
        ParamSpec {
            key: "policed_blocked",
            kind: "integer",
            default: "written",
            doc: "demotions for blocking outside coop_poll so far",
        },
    ],
    change_params: &[],
    max_children: None,
    min_parents: 1,
    max_parents: 1,
    build,
    check_child: |p| domain_param(p).map(drop),
    exclusive: None,
    admission: None,
    merge_change: crate::registry::merge_change,
};

fn build(params: &Params) -> Result<Box<dyn Policy>, PolicyError> {
    Ok(Box::new(Coop::new(CoopConfig::from_params(params)?)))
}

/// Virtual-time units per nanosecond (exact division by member counts).
const VT_SCALE: u128 = 1 << 16;
/// The OUT keys.
const OUT_KEYS: [&str; 3] = ["out_deadline", "out_be_priority", "out_be_timestamp"];
/// The policing keys (written on demotion, kept by OUT updates).
const POLICED_KEYS: [&str; 3] = ["policed", "policed_count", "policed_blocked"];
/// Both, for [`Policy::written_keys`].
const WRITTEN_KEYS: [&str; 6] = [
    OUT_KEYS[0],
    OUT_KEYS[1],
    OUT_KEYS[2],
    POLICED_KEYS[0],
    POLICED_KEYS[1],
    POLICED_KEYS[2],
];

fn param_err(key: &str, message: impl Into<String>) -> PolicyError {
    PolicyError::Param(ParamError {
        key: key.to_string(),
        message: message.into(),
    })
}

/// Configuration of one instance.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CoopConfig {
    /// Fair-share period (Eq 2.2 `sched_granularity`).
    pub period: Duration,
    /// Shortest slice (`sched_min_timeslice`).
    pub min_slice: Duration,
    /// Policing slack after a member's slice end.
    pub grace: Duration,
}

impl Default for CoopConfig {
    fn default() -> Self {
        CoopConfig {
            period: Duration::from_millis(20),
            min_slice: Duration::from_micros(100),
            grace: Duration::from_millis(1),
        }
    }
}

impl CoopConfig {
    /// Reads `period`, `min_slice` and `grace`.
    ///
    /// # Errors
    /// Not durations, a zero period or minimum slice, or a minimum slice
    /// above the period.
    pub fn from_params(params: &Params) -> Result<Self, PolicyError> {
        let d = CoopConfig::default();
        let period = params.duration("period")?.unwrap_or(d.period);
        let min_slice = params.duration("min_slice")?.unwrap_or(d.min_slice);
        let grace = params.duration("grace")?.unwrap_or(d.grace);
        if period == Duration::ZERO {
            return Err(param_err("period", "must be positive"));
        }
        if min_slice == Duration::ZERO || min_slice > period {
            return Err(param_err(
                "min_slice",
                "must be positive and at most the period",
            ));
        }
        Ok(CoopConfig {
            period,
            min_slice,
            grace,
        })
    }
}

/// A best-effort event key: larger priority, then earlier timestamp.
type BeKey = (i64, u64);

#[derive(Clone, Debug)]
struct Child {
    /// The configured domain.
    domain: u32,
    /// A member of its domain now (called coop_poll, not policed since).
    member: bool,
    /// Inside coop_poll: called it and has not run since.
    in_poll: bool,
    /// Own virtual time (best-effort children and demoted members).
    vt: u128,
    deadline: Option<Instant>,
    asap: Option<BeKey>,
    /// Queue sequence while ready and not running.
    queued: Option<u64>,
    /// Times policed.
    policed: u32,
    /// Times policed for blocking outside coop_poll.
    policed_blocked: u32,
}

#[derive(Clone, Copy, Debug, Default)]
struct Domain {
    vt: u128,
    members: u32,
}

/// The queued members of one domain, in the orders of Fig 2.15's rules.
#[derive(Clone, Debug, Default)]
struct DomainQueue {
    /// Queued members with a deadline, by (deadline, queue order).
    deadline: BTreeSet<(Instant, u64, VpId)>,
    /// Queued members with a best-effort event, by (event, queue order).
    asap: BTreeSet<(Reverse<i64>, u64, u64, VpId)>,
    /// Every queued member, by queue order.
    fifo: BTreeSet<(u64, VpId)>,
    /// Every member with a best-effort event, queued or not, by event (for
    /// OUT).
    events: BTreeSet<(Reverse<i64>, u64, VpId)>,
}

/// What dispatch reads, kept in step with the children (see
/// `Coop::update`).
#[derive(Clone, Debug, Default)]
struct Index {
    /// Queued best-effort children, by (virtual time, queue order).
    be: BTreeSet<(u128, u64, VpId)>,
    /// Per domain.
    domains: BTreeMap<u32, DomainQueue>,
    /// Members with a deadline, queued or inside coop_poll, by (deadline,
    /// domain): the deadlines that cut slices.
    cuts: BTreeSet<(Instant, u32, VpId)>,
    /// Queued children.
    queued: usize,
}

impl Index {
    /// Adds (`on`) or removes child `vp`'s entries, as `c` stands.
    fn put(&mut self, vp: VpId, c: &Child, on: bool) {
        fn set<T: Ord>(s: &mut BTreeSet<T>, e: T, on: bool) {
            if on {
                s.insert(e);
            } else {
                s.remove(&e);
            }
        }
        if c.queued.is_some() {
            if on {
                self.queued += 1;
            } else {
                self.queued -= 1;
            }
        }
        if c.member {
            if let (Some(d), true) = (c.deadline, c.queued.is_some() || c.in_poll) {
                set(&mut self.cuts, (d, c.domain, vp), on);
            }
            let q = self.domains.entry(c.domain).or_default();
            if let Some((p, ts)) = c.asap {
                set(&mut q.events, (Reverse(p), ts, vp), on);
            }
            if let Some(seq) = c.queued {
                set(&mut q.fifo, (seq, vp), on);
                if let Some(d) = c.deadline {
                    set(&mut q.deadline, (d, seq, vp), on);
                }
                if let Some((p, ts)) = c.asap {
                    set(&mut q.asap, (Reverse(p), ts, seq, vp), on);
                }
            }
        } else if let Some(seq) = c.queued {
            set(&mut self.be, (c.vt, seq, vp), on);
        }
    }
}

/// A dispatch: the slice a child was given.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Slice {
    /// Slice end.
    end: Instant,
    /// Dispatched as a domain member (policed at `end + grace`).
    member: bool,
}

/// Why a member was demoted (see [`Coop::policed`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policing {
    /// It ran past its slice end plus `grace`.
    Overrun,
    /// It blocked outside `coop_poll`.
    Blocked,
}

/// A `coop` instance. See the module documentation.
#[derive(Debug)]
pub struct Coop {
    cfg: CoopConfig,
    children: VpTable<Child>,
    domains: BTreeMap<u32, Domain>,
    /// Dispatch's indexes.
    ix: Index,
    /// Children queued in the current hook, and the child it is about:
    /// the only queued ones that may have stopped being ready while no
    /// notification waits (see the module documentation).
    suspects: Vec<VpId>,
    held: Vec<Held<Slice>>,
    avoid: Vec<Node>,
    next_seq: u64,
    vmax: u128,
    /// Policing events so far, in order.
    log: Vec<(VpId, Policing)>,
}

/// Sort key of a candidate: entity virtual time, then class and
/// within-domain order (see `Coop::rank`).
type Rank = (u128, u8, i128, u64, u64);

impl Coop {
    /// An instance with this configuration.
    pub fn new(cfg: CoopConfig) -> Self {
        Coop {
            cfg,
            children: VpTable::new(Side::Child),
            domains: BTreeMap::new(),
            ix: Index::default(),
            suspects: Vec::new(),
            held: Vec::new(),
            avoid: Vec::new(),
            next_seq: 0,
            vmax: 0,
            log: Vec::new(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> CoopConfig {
        self.cfg
    }

    /// Every demotion so far: the child's VP and why.
    pub fn policed(&self) -> &[(VpId, Policing)] {
        &self.log
    }

    fn entity_vt(&self, c: &Child) -> u128 {
        if c.member {
            self.domains.get(&c.domain).map_or(0, |d| d.vt)
        } else {
            c.vt
        }
    }

    /// Changes child `vp` through `f`, keeping the index in step.
    fn update(&mut self, ctx: &Ctx<'_>, vp: VpId, f: impl FnOnce(&mut Child)) {
        if let Some(c) = self.children.get_mut(ctx, vp) {
            self.ix.put(vp, c, false);
            f(c);
            self.ix.put(vp, c, true);
        }
    }

    /// Starts a policy hook about child `about` (if any).
    fn hook(&mut self, about: Option<VpId>) {
        self.suspects.clear();
        self.suspects.extend(about);
    }

    /// The running children that are not also queued: with the queued
    /// ones, the runnable children (a VP runs on one processor at a time,
    /// so none is met twice).
    fn held_only<'a>(&'a self, ctx: &'a Ctx<'_>) -> impl Iterator<Item = &'a Child> + 'a {
        self.held
            .iter()
            .filter_map(move |h| self.children.get(ctx, h.vp))
            .filter(|c| c.queued.is_none())
    }

    /// Runnable (queued or running) children.
    fn runnable_count(&self, ctx: &Ctx<'_>) -> usize {
        self.ix.queued + self.held_only(ctx).count()
    }

    /// Runnable members of domain `dom`.
    fn runnable_members(&self, ctx: &Ctx<'_>, dom: u32) -> usize {
        let queued = self.ix.domains.get(&dom).map_or(0, |q| q.fifo.len());
        queued
            + self
                .held_only(ctx)
                .filter(|c| c.member && c.domain == dom)
                .count()
    }

    /// `V`: the smallest entity virtual time among runnable children.
    fn vsys(&self, ctx: &Ctx<'_>) -> u128 {
        let be = self.ix.be.first().map(|e| e.0);
        let members = self
            .ix
            .domains
            .iter()
            .filter(|(_, q)| !q.fifo.is_empty())
            .map(|(dom, _)| self.domains.get(dom).map_or(0, |d| d.vt));
        let held = self.held_only(ctx).map(|c| self.entity_vt(c));
        be.into_iter()
            .chain(members)
            .chain(held)
            .min()
            .unwrap_or(self.vmax)
    }

    fn rank(&self, c: &Child, now: Instant) -> Rank {
        let vt = self.entity_vt(c);
        let seq = c.queued.unwrap_or(u64::MAX);
        if !c.member {
            return (vt, 3, 0, 0, seq);
        }
        match (c.deadline, c.asap) {
            (Some(d), _) if d <= now => (vt, 0, i128::from(d.as_nanos()), 0, seq),
            (_, Some((p, ts))) => (vt, 1, -i128::from(p), ts, seq),
            _ => (vt, 2, 0, 0, seq),
        }
    }

    /// The queued children whose VP is no longer ready, in table order.
    ///
    /// A queued child whose VP still runs is not among them: this hook
    /// revoked it and queued it again (`reconsider`, `sync`), the
    /// revocation is applied after the hook and leaves it ready, and the
    /// avoid rule keeps it from being granted again in the meantime.
    /// Dropping it would lose it for good when a later step of the same
    /// hook looks for stale entries (two slices ending in one timer hook).
    fn stale(&self, ctx: &Ctx<'_>) -> Vec<VpId> {
        let is_stale = |vp: VpId| {
            self.children
                .get(ctx, vp)
                .is_some_and(|c| c.queued.is_some())
                && ctx.vp_state(vp) == VpState::Waiting
        };
        let all = || -> Vec<VpId> {
            self.children
                .iter()
                .map(|(vp, _)| vp)
                .filter(|&vp| is_stale(vp))
                .collect()
        };
        if ctx.notifications_waiting() > 0 {
            return all();
        }
        let mut found: Vec<(usize, VpId)> = self
            .suspects
            .iter()
            .filter(|&&vp| is_stale(vp))
            .filter_map(|&vp| Some((self.children.index_of(ctx, vp)?, vp)))
            .collect();
        found.sort_unstable();
        found.dedup();
        let found: Vec<VpId> = found.into_iter().map(|(_, vp)| vp).collect();
        debug_assert_eq!(found, all(), "a queued child went stale unseen");
        found
    }

    /// Whether queued child `vp` may be dispatched in this hook (the avoid
    /// rule).
    fn allowed(&self, ctx: &Ctx<'_>, vp: VpId) -> bool {
        !self.avoid.contains(&ctx.vp_child(vp))
    }

    /// The member domain `dom` runs now (Fig 2.15), with its rank.
    fn best_member(
        &self,
        ctx: &Ctx<'_>,
        dom: u32,
        q: &DomainQueue,
        now: Instant,
    ) -> Option<(VpId, Rank)> {
        let vt = self.domains.get(&dom).map_or(0, |d| d.vt);
        let expired = |vp: VpId| {
            self.children
                .get(ctx, vp)
                .and_then(|c| c.deadline)
                .is_some_and(|d| d <= now)
        };
        // An entry skipped below is avoided, or belongs to an earlier rule
        // whose pass skipped it for being avoided.
        if let Some(&(d, seq, vp)) = q
            .deadline
            .iter()
            .take_while(|e| e.0 <= now)
            .find(|e| self.allowed(ctx, e.2))
        {
            return Some((vp, (vt, 0, i128::from(d.as_nanos()), 0, seq)));
        }
        if let Some(&(Reverse(p), ts, seq, vp)) = q
            .asap
            .iter()
            .find(|e| self.allowed(ctx, e.3) && !expired(e.3))
        {
            return Some((vp, (vt, 1, -i128::from(p), ts, seq)));
        }
        q.fifo
            .iter()
            .find(|e| {
                self.allowed(ctx, e.1)
                    && !expired(e.1)
                    && self
                        .children
                        .get(ctx, e.1)
                        .is_some_and(|c| c.asap.is_none())
            })
            .map(|&(seq, vp)| (vp, (vt, 2, 0, 0, seq)))
    }

    /// The best queued, ready child not of an avoided instance, with its
    /// rank. Entries whose VP is no longer ready are dropped first (see
    /// `stale`).
    fn best(&mut self, ctx: &mut Ctx<'_>) -> Option<(VpId, Rank)> {
        for vp in self.stale(ctx) {
            self.on_block(ctx, vp);
        }
        let now = ctx.now();
        let mut best: Option<(VpId, Rank)> = self
            .ix
            .be
            .iter()
            .find(|e| self.allowed(ctx, e.2))
            .map(|&(vt, seq, vp)| (vp, (vt, 3, 0, 0, seq)));
        for (&dom, q) in &self.ix.domains {
            if q.fifo.is_empty() {
                continue;
            }
            if let Some((vp, r)) = self.best_member(ctx, dom, q, now) {
                // Ranks end in the queue order, unique among queued children.
                if best.is_none_or(|(_, b)| r < b) {
                    best = Some((vp, r));
                }
            }
        }
        best
    }

    /// The slice for `vp` starting now (Eq 2.2, Fig 2.17).
    fn slice(&self, ctx: &Ctx<'_>, vp: VpId) -> Duration {
        let now = ctx.now();
        let Some(c) = self.children.get(ctx, vp) else {
            return self.cfg.period;
        };
        let cpus = ctx.parent_vps().len().max(1) as u64;
        let n = (self.runnable_count(ctx) as u64 + u64::from(c.queued.is_none()))
            .div_ceil(cpus)
            .max(1);
        let mut fs = self.cfg.period.mul_div(1, n).max(self.cfg.min_slice);
        if c.member {
            let m = self.runnable_members(ctx, c.domain).max(1) as u64;
            fs = fs.mul_div(m, 1);
        }
        // Earliest deadline of another member, sleepers included.
        let other = self
            .ix
            .cuts
            .iter()
            .find(|e| e.2 != vp)
            .map(|&(d, dom, _)| (d, dom));
        let mut slice = fs;
        if let Some((d, dom)) = other {
            let mut cut = d.saturating_since(now);
            let dvt = self.domains.get(&dom).map_or(0, |x| x.vt);
            let cvt = self.entity_vt(c);
            let same = c.member && c.domain == dom;
            let cut_vt = u128::from(cut.as_nanos()) * VT_SCALE;
            if !same && cvt + cut_vt < dvt {
                // Fairness forbids cutting: extend until it catches up.
                let extra = (dvt - cvt - cut_vt) / VT_SCALE;
                cut = cut.saturating_add(Duration::from_nanos(
                    u64::try_from(extra).unwrap_or(u64::MAX),
                ));
            }
            slice = slice.min(cut);
        }
        slice.max(self.cfg.min_slice)
    }

    /// Starts `vp` on `cpu` through `parent` (a grant, or a new slice when
    /// it is already running there) and writes OUT for a member.
    fn start(&mut self, ctx: &mut Ctx<'_>, parent: VpId, cpu: CpuId, vp: VpId, grant: bool) {
        let slice = self.slice(ctx, vp);
        let end = ctx.now() + slice;
        let member = self.children.get(ctx, vp).is_some_and(|c| c.member);
        self.update(ctx, vp, |c| {
            c.queued = None;
            c.in_poll = false;
        });
        self.hold(ctx, parent, cpu, vp, Slice { end, member });
        if grant {
            ctx.grant(vp, cpu);
        }
        if member {
            self.write_out(ctx, vp, end);
        }
    }

    fn write_out(&self, ctx: &mut Ctx<'_>, vp: VpId, end: Instant) {
        let Some(c) = self.children.get(ctx, vp) else {
            return;
        };
        let best = self
            .ix
            .domains
            .get(&c.domain)
            .and_then(|q| q.events.iter().find(|e| e.2 != vp))
            .map(|&(Reverse(p), ts, _)| (p, ts));
        let mut p = Params::new();
        for (k, v) in ctx.vp_params(vp).iter() {
            if !OUT_KEYS.contains(&k) {
                p.insert(k, v.clone());
            }
        }
        p.insert("out_deadline", ParamValue::Int(ns_i64(end.as_nanos())));
        if let Some((prio, ts)) = best {
            p.insert("out_be_priority", ParamValue::Int(prio));
            p.insert("out_be_timestamp", ParamValue::Int(ns_i64(ts)));
        }
        ctx.set_vp_params(vp, p);
    }

    /// Demotes a member to best effort (§2.3 decision 6).
    fn police(&mut self, ctx: &mut Ctx<'_>, vp: VpId, why: Policing) {
        let Some(c) = self.children.get(ctx, vp) else {
            return;
        };
        if !c.member {
            return;
        }
        let dom = c.domain;
        let d = self.domains.entry(dom).or_default();
        d.members = d.members.saturating_sub(1);
        let dvt = d.vt;
        let mut counts = (0, 0);
        self.update(ctx, vp, |c| {
            c.member = false;
            c.policed += 1;
            if why == Policing::Blocked {
                c.policed_blocked += 1;
            }
            c.deadline = None;
            c.asap = None;
            c.vt = dvt;
            counts = (c.policed, c.policed_blocked);
        });
        let (count, blocked) = counts;
        self.log.push((vp, why));
        // The cheap signal for drivers (no trace needed); demotions are
        // rare, so copying the parameters here costs nothing per input.
        let mut p = ctx.vp_params(vp).clone();
        let reason = match why {
            Policing::Overrun => "overrun",
            Policing::Blocked => "blocked",
        };
        p.insert("policed", ParamValue::Str(reason.into()));
        p.insert("policed_count", ParamValue::Int(i64::from(count)));
        p.insert("policed_blocked", ParamValue::Int(i64::from(blocked)));
        ctx.set_vp_params(vp, p);
        if ctx.tracing() {
            ctx.event(PolicyEvent::Note(format!("coop: policed {vp} ({why:?})")));
        }
    }

    fn admit(&mut self, ctx: &mut Ctx<'_>, vp: VpId) {
        let v = self.vsys(ctx);
        let Some(c) = self.children.get(ctx, vp) else {
            return;
        };
        if c.member {
            return;
        }
        let dom = c.domain;
        let own = c.vt;
        self.update(ctx, vp, |c| c.member = true);
        let d = self.domains.entry(dom).or_default();
        if d.members == 0 {
            // A new (or emptied) domain starts where its first member was.
            d.vt = own.max(v);
        }
        d.members += 1;
        if ctx.tracing() {
            ctx.event(PolicyEvent::Note(format!(
                "coop: admitted {vp} to domain {dom}"
            )));
        }
    }

    fn leave(&mut self, ctx: &mut Ctx<'_>, vp: VpId) {
        let Some(c) = self.children.get(ctx, vp) else {
            return;
        };
        if c.member {
            let d = self.domains.entry(c.domain).or_default();
            d.members = d.members.saturating_sub(1);
            let dvt = d.vt;
            self.update(ctx, vp, |c| {
                c.member = false;
                c.vt = dvt;
            });
        }
    }

    /// A child stopped being runnable: a member that did so outside
    /// coop_poll is policed; one inside is in cooperative sleep.
    fn on_block(&mut self, ctx: &mut Ctx<'_>, vp: VpId) {
        if ctx.vp_state(vp) == VpState::Ready {
            // Released and asked again: its request, on its way, queues it.
            return;
        }
        let Some(c) = self.children.get(ctx, vp) else {
            return;
        };
        let (member, in_poll) = (c.member, c.in_poll);
        self.update(ctx, vp, |c| {
            c.queued = None;
            if member && in_poll {
                c.asap = None;
            }
        });
        if member && !in_poll {
            self.police(ctx, vp, Policing::Blocked);
        }
    }

    fn settle(&mut self, ctx: &mut Ctx<'_>) {
        let queued = self.ix.queued;
        let want = (queued + self.held.len()).min(ctx.parent_vps().len());
        ctx.set_parent_demand(want);
        let grace = self.cfg.grace;
        let at = self
            .held
            .iter()
            .map(|h| h.run.due(grace))
            .min()
            .unwrap_or(Instant::NEVER);
        arm_timer(ctx, at);
    }

    /// Re-decides processor `i` now: the running child keeps it (with a
    /// new slice) unless a queued child ranks at least as well.
    fn reconsider(&mut self, ctx: &mut Ctx<'_>, i: usize) {
        self.charge(ctx, i);
        let h = self.held.remove(i);
        let now = ctx.now();
        let cur_rank = self
            .children
            .get(ctx, h.vp)
            .map_or((u128::MAX, 9, 0, 0, 0), |c| self.rank(c, now));
        self.avoid.push(ctx.vp_child(h.vp));
        let next = self.best(ctx).filter(|&(_, r)| r <= cur_rank);
        match next {
            Some((vp, _)) => {
                ctx.revoke(h.vp, RevokeReason::Preempted);
                self.start(ctx, h.parent, h.cpu, vp, true);
                self.enqueue(ctx, h.vp);
            }
            None => {
                self.avoid.pop();
                self.start(ctx, h.parent, h.cpu, h.vp, false);
            }
        }
    }

    /// A member woke with an expired deadline while every processor is
    /// busy: take one from the best-effort entity furthest ahead, unless it
    /// is behind the member's domain.
    fn maybe_preempt(&mut self, ctx: &mut Ctx<'_>, vp: VpId) {
        let now = ctx.now();
        let Some(c) = self.children.get(ctx, vp) else {
            return;
        };
        if !c.member || c.deadline.is_none_or(|d| d > now) {
            return;
        }
        if self.held.len() < ctx.parent_vps().len() {
            return;
        }
        let dvt = self.entity_vt(c);
        let me = ctx.vp_child(vp);
        let victim = (0..self.held.len())
            .filter(|&i| {
                let h = &self.held[i];
                ctx.vp_child(h.vp) != me && ctx.vp_cpu(h.vp) == Some(h.cpu)
            })
            .filter_map(|i| {
                let hc = self.children.get(ctx, self.held[i].vp)?;
                (!hc.member).then_some((hc.vt, i))
            })
            .max();
        if let Some((vt, i)) = victim {
            if vt >= dvt {
                self.reconsider(ctx, i);
            }
        }
    }

    fn coop_poll(&mut self, ctx: &mut Ctx<'_>, vp: VpId, p: &Params) -> Result<(), PolicyError> {
        if let Some(k) = p
            .unknown_keys(&["deadline", "be_priority", "be_timestamp"])
            .next()
        {
            return Err(PolicyError::Unsupported(format!(
                "coop_poll has no parameter `{k}`; it accepts: deadline, be_priority, be_timestamp"
            )));
        }
        let deadline = p.u64("deadline")?.map(Instant);
        let prio = p.i64("be_priority")?;
        let ts = p.u64("be_timestamp")?.unwrap_or(0);
        if p.get("be_timestamp").is_some() && prio.is_none() {
            return Err(param_err("be_timestamp", "needs be_priority"));
        }
        self.begin_about(ctx, None);
        self.charge_all(ctx);
        let asap = prio.map(|p| (p, ts));
        let cooperative = deadline.is_some() || asap.is_some();
        if cooperative {
            self.admit(ctx, vp);
        }
        if cooperative {
            self.update(ctx, vp, |c| {
                c.in_poll = true;
                c.deadline = deadline;
                c.asap = asap;
            });
        }
        // No best-effort work and a future deadline: cooperative sleep. The
        // caller blocks next and stays well behaved (its deadline keeps
        // cutting slices); its processor is re-decided when it releases.
        let sleeping = asap.is_none() && deadline.is_some_and(|d| d > ctx.now());
        if !sleeping {
            if let Some(i) = self.held.iter().position(|h| h.vp == vp) {
                self.reconsider(ctx, i);
            }
        }
        self.settle(ctx);
        Ok(())
    }
}

fn ns_i64(ns: u64) -> i64 {
    i64::try_from(ns).unwrap_or(i64::MAX)
}

fn domain_param(params: &Params) -> Result<u32, PolicyError> {
    let d = params.u64("domain")?.unwrap_or(0);
    u32::try_from(d).map_err(|_| param_err("domain", format!("must be below 2^32, found {d}")))
}

impl Slice {
    /// When the slice's processor is re-decided: its end, plus `grace`
    /// for a member.
    fn due(self, grace: Duration) -> Instant {
        if self.member {
            self.end + grace
        } else {
            self.end
        }
    }
}

impl Holder for Coop {
    type Run = Slice;

    fn held(&self) -> &[Held<Slice>] {
        &self.held
    }

    fn held_mut(&mut self) -> &mut Vec<Held<Slice>> {
        &mut self.held
    }

    fn avoid_mut(&mut self) -> &mut Vec<Node> {
        &mut self.avoid
    }

    /// A best-effort child's own virtual time, or its domain's, advanced
    /// by `used` divided by the member count (Fig 2.14).
    fn advance(&mut self, ctx: &Ctx<'_>, vp: VpId, used: Duration) {
        let Some(c) = self.children.get(ctx, vp) else {
            return;
        };
        let units = u128::from(used.as_nanos()) * VT_SCALE;
        let v = if c.member {
            let d = self.domains.entry(c.domain).or_default();
            d.vt += units / u128::from(d.members.max(1));
            d.vt
        } else {
            let mut v = 0;
            self.update(ctx, vp, |c| {
                c.vt += units;
                v = c.vt;
            });
            v
        };
        self.vmax = self.vmax.max(v);
    }

    fn enqueue(&mut self, ctx: &Ctx<'_>, vp: VpId) {
        let seq = self.next_seq;
        self.next_seq += 1;
        self.update(ctx, vp, |c| c.queued = Some(seq));
        self.suspects.push(vp);
    }

    fn stopped(&mut self, ctx: &mut Ctx<'_>, vp: VpId) {
        self.on_block(ctx, vp);
    }

    fn dispatch(&mut self, ctx: &mut Ctx<'_>, parent: VpId, cpu: CpuId) {
        match self.best(ctx) {
            Some((vp, _)) => self.start(ctx, parent, cpu, vp, true),
            None => ctx.release(parent),
        }
    }
}

impl Policy for Coop {
    fn policy_name(&self) -> &'static str {
        "coop"
    }

    fn written_keys(&self) -> &'static [&'static str] {
        &WRITTEN_KEYS
    }

    fn register_vp(
        &mut self,
        ctx: &mut Ctx<'_>,
        vp: VpId,
        params: &Params,
    ) -> Result<(), PolicyError> {
        crate::registry::check_child_params(&INFO, params)?;
        let domain = domain_param(params)?;
        // The keys this policy writes describe one VP: a new child that
        // arrives with them (a thread created by a member inherits its
        // creator's parameters, in live mode) starts without them.
        if params
            .iter()
            .any(|(k, _)| OUT_KEYS.contains(&k) || POLICED_KEYS.contains(&k))
        {
            let mut clean = Params::new();
            for (k, v) in params.iter() {
                if !OUT_KEYS.contains(&k) && !POLICED_KEYS.contains(&k) {
                    clean.insert(k, v.clone());
                }
            }
            ctx.set_vp_params(vp, clean);
        }
        let vt = self.vsys(ctx);
        let i = self.children.insert(
            ctx,
            vp,
            Child {
                domain,
                member: false,
                in_poll: false,
                vt,
                deadline: None,
                asap: None,
                queued: None,
                policed: 0,
                policed_blocked: 0,
            },
        );
        let (vp, c) = self.children.at(i);
        self.ix.put(vp, c, true);
        Ok(())
    }

    fn unregister_vp(&mut self, ctx: &mut Ctx<'_>, vp: VpId) {
        self.held.retain(|h| h.vp != vp);
        self.leave(ctx, vp);
        if let Some(c) = self.children.get(ctx, vp) {
            self.ix.put(vp, c, false);
        }
        self.children.remove(ctx, vp);
    }

    fn request(&mut self, ctx: &mut Ctx<'_>, vp: VpId) {
        self.hook(Some(vp));
        self.begin_about(ctx, Some(vp));
        let queued = self
            .children
            .get(ctx, vp)
            .is_some_and(|c| c.queued.is_some());
        let running = self.held.iter().any(|h| h.vp == vp);
        if ctx.vp_state(vp) == VpState::Ready && !queued && !running {
            self.charge_all(ctx);
            let v = self.vsys(ctx);
            let mut dom_idle = None;
            if let Some(c) = self.children.get(ctx, vp) {
                if c.member {
                    dom_idle = Some(c.domain);
                } else {
                    self.update(ctx, vp, |c| c.vt = c.vt.max(v));
                }
            }
            if let Some(dom) = dom_idle {
                let any_runnable = self.runnable_members(ctx, dom) > 0;
                if !any_runnable {
                    let d = self.domains.entry(dom).or_default();
                    d.vt = d.vt.max(v);
                }
            }
            self.enqueue(ctx, vp);
            self.maybe_preempt(ctx, vp);
        }
        self.settle(ctx);
    }

    fn release(&mut self, ctx: &mut Ctx<'_>, vp: VpId) {
        self.hook(Some(vp));
        self.begin_about(ctx, Some(vp));
        let queued = self
            .children
            .get(ctx, vp)
            .is_some_and(|c| c.queued.is_some());
        if ctx.vp_state(vp) == VpState::Waiting && queued {
            self.on_block(ctx, vp);
        }
        self.settle(ctx);
    }

    fn grant(&mut self, ctx: &mut Ctx<'_>, parent_vp: VpId, cpu: CpuId) {
        self.hook(None);
        self.on_grant(ctx, parent_vp, cpu);
        self.settle(ctx);
    }

    fn revoke(&mut self, ctx: &mut Ctx<'_>, parent_vp: VpId, reason: RevokeReason) {
        self.hook(None);
        self.on_revoke(ctx, parent_vp, reason);
        self.settle(ctx);
    }

    fn msg(&mut self, ctx: &mut Ctx<'_>, vp: VpId, msg: &Msg) -> Result<(), PolicyError> {
        self.hook(Some(vp));
        if self.children.get(ctx, vp).is_none() {
            return Err(PolicyError::Refused(format!(
                "{vp} is not a child of this scheduler"
            )));
        }
        match msg {
            Msg::App { kind, params } if kind == "coop_poll" => self.coop_poll(ctx, vp, params),
            Msg::SetParams(change) => {
                let keys = ["domain"];
                if let Some(k) = change.unknown_keys(&keys).next() {
                    if !OUT_KEYS.contains(&k) && !POLICED_KEYS.contains(&k) {
                        return Err(PolicyError::Unsupported(format!(
                            "a coop child has no settable parameter `{k}`; it accepts: domain"
                        )));
                    }
                }
                let domain = domain_param(change)?;
                self.begin_about(ctx, None);
                self.charge_all(ctx);
                let same = self
                    .children
                    .get(ctx, vp)
                    .is_some_and(|c| c.domain == domain);
                if !same && change.get("domain").is_some() {
                    self.leave(ctx, vp);
                    self.update(ctx, vp, |c| {
                        c.domain = domain;
                        c.deadline = None;
                        c.asap = None;
                    });
                    let mut merged = ctx.vp_params(vp).clone();
                    merged.insert("domain", ParamValue::Int(i64::from(domain)));
                    ctx.set_vp_params(vp, merged);
                }
                self.settle(ctx);
                Ok(())
            }
            other => Err(PolicyError::Unsupported(format!(
                "coop accepts coop_poll (App) and domain changes (SetParams), not {other:?}"
            ))),
        }
    }

    fn timer(&mut self, ctx: &mut Ctx<'_>) {
        self.hook(None);
        self.begin_about(ctx, None);
        let now = ctx.now();
        let grace = self.cfg.grace;
        // Decide every expired processor; indices shift as `reconsider`
        // re-pushes, so collect the VPs first.
        let due: Vec<VpId> = self
            .held
            .iter()
            .filter(|h| h.run.due(grace) <= now && ctx.vp_cpu(h.vp) == Some(h.cpu))
            .map(|h| h.vp)
            .collect();
        for vp in due {
            let Some(i) = self.held.iter().position(|h| h.vp == vp) else {
                continue;
            };
            if self.held[i].run.member {
                self.charge(ctx, i);
                self.police(ctx, vp, Policing::Overrun);
            }
            let Some(i) = self.held.iter().position(|h| h.vp == vp) else {
                continue;
            };
            self.reconsider(ctx, i);
        }
        self.settle(ctx);
    }

    fn check_invariants(&self, ctx: &Ctx<'_>) -> Result<(), String> {
        self.check_held(ctx)?;
        for h in &self.held {
            if self
                .children
                .get(ctx, h.vp)
                .is_some_and(|c| c.queued.is_some())
            {
                return Err(format!("{} is both running and queued", h.vp));
            }
        }
        for (dom, d) in &self.domains {
            let n = self
                .children
                .iter()
                .filter(|(_, c)| c.member && c.domain == *dom)
                .count();
            if n != d.members as usize {
                return Err(format!(
                    "domain {dom} counts {} members, has {n}",
                    d.members
                ));
            }
        }
        Ok(())
    }

    fn describe(&self) -> String {
        format!(
            "period={} min_slice={} grace={} children={} domains={}",
            self.cfg.period,
            self.cfg.min_slice,
            self.cfg.grace,
            self.children.len(),
            self.domains.len()
        )
    }
}
