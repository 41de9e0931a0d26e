//! Guarantee mappings of scheduling policies (Regehr 2001, §5.3.1, Table 5.1).
//!
//! Each policy converts the guarantee(s) it receives from its parent(s) into
//! guarantees for its children: `A ↦ B⁺` means "given A (or anything that
//! converts into A, Table 5.2), it provides any number of B". The built-in
//! mappings are:
//!
//! | name | policy | accepts | provides to each child | § |
//! |---|---|---|---|---|
//! | `fp` | [`FixedPriority`] | anything | what it receives to its highest-priority child, NULL to the others | 5.3.1.1 |
//! | `join` | [`Join`] | anything, from several parents | any one parent guarantee made soft; on a uniprocessor also same-type sums | 5.3.1.2 |
//! | `limit` | [`Limit`] | RESBS (at least its amount/period) | RESBH at its amount/period | 5.3.1.3 |
//! | `ps`, `sfq` | [`Sfq`] | PSBE, RESU (Theorem 5.1) or PS; several VPs on a multiprocessor | PSBE by Equation 5.2, or PS; on several VPs PS of their total rate | 5.3.1.4, 7.1 |
//! | `rez` | [`Rez`] | ALL or RESU | RESBH per child, EDF admission against its cap | 5.3.1.5 |
//! | `dl` | [`Dl`] | ALL on each of its `processors` | RESBH (amount − tick) per child while the servers, each with a tick of overrun, pass the global EDF bound `Σu ≤ m − (m − 1)·u_max`; NULL otherwise | Linux kernel/sched/deadline.c; 5.2.2 |
//! | `ts` | [`BestEffort`] | anything (as NULL) | NULL | 5.3.1.6 |
//! | `best`, `best-rate` | [`BestEffort`] | anything (as NULL) | NULL | — |
//! | `linux24` | [`BestEffort`] | anything (as NULL) | NULL | Table 5.1 "Linux" |
//! | `realrate` | [`RealRate`] | ALL | RESBH per real-time or aperiodic child (admission against `overload`, rate-monotonic test); NULL to real-rate and misc children | Steere et al. 1998, §3.1, §3.3 |
//! | `coop` | [`coop()`] | anything (as NULL) | NULL | Sinha 2007, §2.2.2, §2.3–2.5 |
//!
//! A mapping is data plus two questions: [`Mapping::accepts`] (is this
//! received guarantee usable, and as what?) and
//! [`Mapping::child_guarantees`] (given what I accepted, what does each
//! child get?). Instance parameters ([`InstanceParams`]: Rez's cap, Limit's
//! amount and period, SFQ's quantum) live in the mapping value; parameters
//! a parent keeps per child ([`EdgeParams`]: FP priority, PS share and warp,
//! Rez amount and period) arrive with each [`ChildRequest`]. A [`Registry`]
//! builds mappings by lowercase policy name and takes new entries for later
//! policies.
//!
//! [`LITERATURE`] carries the rest of Table 5.1 (schedulers from the
//! literature) as data, for documentation and help texts.

use std::fmt;

use hsched_core::time::Duration;

use crate::convert::{can_convert, convert, rule, ConversionError, ConvertParams};
use crate::parse::Ms;
use crate::rta::EPS;
use crate::types::{ratio, Guarantee, GuaranteeKind};

use GuaranteeKind as K;

/// Parameters of a scheduler instance. Which ones a policy takes: `rez`:
/// `cap` (default 0.85); `limit`: `amount`, `period`; `ps`: `quantum`
/// (default 10 ms); `dl`: `processors`, `tick`, `cap` (default 0.95).
/// Others take none.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct InstanceParams {
    /// Rez: the largest total utilization it admits, in (0, 1].
    pub cap: Option<f64>,
    /// Limit: the amount per period it lets through.
    pub amount: Option<Duration>,
    /// Limit: its period.
    pub period: Option<Duration>,
    /// PS (SFQ): the scheduling quantum `q` of Equation 5.2.
    pub quantum: Option<Duration>,
    /// Real-rate: the overload threshold on the sum of proportions, in
    /// (0, 1) (default 0.9).
    pub overload: Option<f64>,
    /// Real-rate: the proportion every adaptive child keeps (default 0.01).
    pub floor: Option<f64>,
    /// Real-rate: the period of aperiodic, real-rate and misc children
    /// (default 30 ms).
    pub default_period: Option<Duration>,
    /// dl: the processors of its root domain (default 1).
    pub processors: Option<u64>,
    /// dl: the budget-check tick (default 0, exact enforcement).
    pub tick: Option<Duration>,
}

impl InstanceParams {
    fn given(&self) -> Vec<&'static str> {
        let mut v = Vec::new();
        if self.cap.is_some() {
            v.push("cap");
        }
        if self.amount.is_some() {
            v.push("amount");
        }
        if self.period.is_some() {
            v.push("period");
        }
        if self.quantum.is_some() {
            v.push("quantum");
        }
        if self.overload.is_some() {
            v.push("overload");
        }
        if self.floor.is_some() {
            v.push("floor");
        }
        if self.default_period.is_some() {
            v.push("default_period");
        }
        if self.processors.is_some() {
            v.push("processors");
        }
        if self.tick.is_some() {
            v.push("tick");
        }
        v
    }

    fn only(&self, policy: &str, allowed: &[&str]) -> Result<(), String> {
        let extra: Vec<&str> = self
            .given()
            .into_iter()
            .filter(|p| !allowed.contains(p))
            .collect();
        if extra.is_empty() {
            Ok(())
        } else if allowed.is_empty() {
            Err(format!(
                "{policy} takes no instance parameters, but `{}` was given",
                extra.join("`, `")
            ))
        } else {
            Err(format!(
                "{policy} does not take `{}`; it takes `{}`",
                extra.join("`, `"),
                allowed.join("`, `")
            ))
        }
    }
}

/// Parameters a parent keeps for one child (one VP). Which ones a policy
/// reads: `fp`: `priority` (larger is more urgent); `ps`: `share` (weight,
/// default 1) and `warp`; `rez`: `amount` and `period`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct EdgeParams {
    /// FP: the child's priority; larger numbers run first (default 0).
    pub priority: Option<i64>,
    /// PS: the child's weight (shares); relative among siblings.
    pub share: Option<f64>,
    /// PS: the child's warp (BVT-style latency boost); non-zero warps void
    /// the bounded-error guarantee.
    pub warp: Option<Duration>,
    /// Rez: the reserved amount per period.
    pub amount: Option<Duration>,
    /// Rez: the reservation period.
    pub period: Option<Duration>,
    /// Real-rate: the child's proportion of the processor, in (0, 1].
    pub proportion: Option<f64>,
    /// Real-rate: the child's thread class (Steere et al. 1998, Fig 2); `None`
    /// infers it as the policy does.
    pub class: Option<RateClass>,
}

/// The thread classes of Steere et al. 1998, Fig 2, as `realrate` takes them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RateClass {
    /// Proportion and period given.
    RealTime,
    /// Proportion given, the default period.
    Aperiodic,
    /// Sized by the controller from progress.
    RealRate,
    /// Nothing known.
    Misc,
}

impl RateClass {
    /// The class named `s` (`real-time`, `aperiodic`, `real-rate`,
    /// `misc`).
    pub fn parse(s: &str) -> Option<RateClass> {
        Some(match s {
            "real-time" => RateClass::RealTime,
            "aperiodic" => RateClass::Aperiodic,
            "real-rate" => RateClass::RealRate,
            "misc" => RateClass::Misc,
            _ => return None,
        })
    }
}

/// What a mapping knows of the machine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MappingContext {
    /// Number of processors.
    pub cpus: u32,
}

/// One child of a scheduler, as its mapping sees it.
#[derive(Clone, Copy, Debug)]
pub struct ChildRequest<'a> {
    /// The child's name.
    pub name: &'a str,
    /// Whether the child is a thread (else a scheduler instance).
    pub is_thread: bool,
    /// Parameters the parent keeps for this child.
    pub params: &'a EdgeParams,
    /// The guarantee the child asked for, if it is a thread that asked.
    pub request: Option<&'a Guarantee>,
    /// Whether the child is a multiprocessor scheduler, which registers a
    /// VP for every processor the parent offers, not one (§4.3.11).
    pub multiprocessor: bool,
}

/// What a scheduler provides to one child: one guarantee, or (join) a
/// choice of guarantees the child may pick from, in order of preference.
#[derive(Clone, Debug, PartialEq)]
pub struct Provision {
    /// The guarantees the child may take; never empty.
    pub options: Vec<Guarantee>,
    /// The Table 5.1 conversion used, or a note on why the guarantee is
    /// what it is (dl's schedulability test, with the load and the bound).
    pub rule: std::borrow::Cow<'static, str>,
}

impl Provision {
    /// A single guarantee.
    pub fn one(g: Guarantee, rule: &'static str) -> Provision {
        Provision {
            options: vec![g],
            rule: rule.into(),
        }
    }

    /// A single guarantee with a note built for this child.
    pub fn noted(g: Guarantee, note: String) -> Provision {
        Provision {
            options: vec![g],
            rule: note.into(),
        }
    }

    /// The preferred option.
    pub fn first(&self) -> Guarantee {
        self.options.first().copied().unwrap_or(Guarantee::Null)
    }
}

/// The guarantee mapping of a scheduling policy (Table 5.1).
pub trait Mapping: fmt::Debug + Send + Sync {
    /// The lowercase policy name (`rez`).
    fn policy(&self) -> &str;

    /// The name used in messages (`Rez`).
    fn title(&self) -> &str;

    /// What it needs to receive, in words (`ALL or RESU`).
    fn needs(&self) -> String;

    /// How many parent VPs it can use; `None` for any number.
    fn max_parents(&self) -> Option<usize> {
        Some(1)
    }

    /// How many children it can schedule; `None` for any number.
    fn max_children(&self) -> Option<usize> {
        None
    }

    /// Whether the received guarantee `g` is acceptable, directly or through
    /// the rewrite rules; returns the form the mapping uses (an SFQ receiving
    /// `RESBS 10 20` uses `PSBE 0.5 10`, Theorem 5.5).
    ///
    /// # Errors
    /// Why `g` is not acceptable.
    fn accepts(&self, g: &Guarantee) -> Result<Guarantee, String>;

    /// The guarantee each child gets, given the accepted forms of what this
    /// scheduler receives (one per parent VP, never empty) — one entry per
    /// child, in order.
    fn child_guarantees(
        &self,
        received: &[Guarantee],
        children: &[ChildRequest<'_>],
    ) -> Vec<Result<Provision, String>>;
}

fn reason_for(from: &Guarantee, to: GuaranteeKind) -> String {
    match rule(from.kind(), to) {
        Err(ConversionError::Impossible { reason, cite, .. }) => {
            format!("{} cannot become {to}: {reason} ({cite})", from.kind())
        }
        Err(e) => e.to_string(),
        Ok(_) => String::new(),
    }
}

/// Preemptive fixed priority (§5.3.1.1): `any ↦ (any, NULL⁺)`. The
/// highest-priority child gets what the scheduler receives; every other
/// child gets NULL. A child without a `priority` has the policy's default,
/// 0. With several parent VPs (one per processor), the `k` highest-priority
/// children get the `k` received guarantees. FP admits one VP per priority:
/// children tied at a priority that decides who gets a guarantee are
/// refused.
#[derive(Clone, Copy, Debug, Default)]
pub struct FixedPriority;

impl Mapping for FixedPriority {
    fn policy(&self) -> &str {
        "fp"
    }
    fn title(&self) -> &str {
        "FP"
    }
    fn needs(&self) -> String {
        "any guarantee".into()
    }
    fn max_parents(&self) -> Option<usize> {
        None
    }
    fn accepts(&self, g: &Guarantee) -> Result<Guarantee, String> {
        Ok(*g)
    }
    fn child_guarantees(
        &self,
        received: &[Guarantee],
        children: &[ChildRequest<'_>],
    ) -> Vec<Result<Provision, String>> {
        const RULE: &str = "Table 5.1: FP any ↦ (any, NULL⁺)";
        let n = children.len();
        let mut order: Vec<usize> = (0..n).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(children[i].params.priority.unwrap_or(0)));
        let k = received.len();
        let mut out: Vec<Result<Provision, String>> =
            vec![Ok(Provision::one(Guarantee::Null, RULE)); n];
        // A multiprocessor child holds one rank per processor it is offered:
        // while it has work on each, the children below it get none of them.
        let ranks = |i: usize| {
            if children[i].multiprocessor {
                k.max(1)
            } else {
                1
            }
        };
        // Equal priorities are adjacent in `order` (a stable sort): one pass
        // over each run of them keeps this linear in the children, which a
        // file may have 100 000 of.
        let prio_of = |i: usize| children[i].params.priority.unwrap_or(0);
        let (mut pos, mut rank) = (0, 0);
        while pos < n {
            let prio = prio_of(order[pos]);
            let end = order[pos..]
                .iter()
                .position(|&j| prio_of(j) != prio)
                .map_or(n, |len| pos + len);
            let run = &order[pos..end];
            // A tie matters when it straddles or falls inside the guaranteed ranks.
            let tie = run.len() > 1 && rank < k && !received[rank].eq(&Guarantee::Null);
            for &i in run {
                if tie {
                    let tied = tied_names(run, i, |j| children[j].name);
                    out[i] = Err(format!(
                        "priority {prio} is shared with {tied}; fp admits one VP per priority, so neither can be given the guarantee (§5.3.1.1)"
                    ));
                } else if rank < k {
                    out[i] = Ok(Provision::one(received[rank], RULE));
                }
                rank = rank.saturating_add(ranks(i));
            }
            pos = end;
        }
        out
    }
}

/// The most siblings a priority tie names; the rest are counted, so that a
/// tie among thousands of children does not make a message per child that
/// lists them all.
const MAX_TIED_NAMES: usize = 8;

/// `'b', 'c'`: the children of `run` (which holds `me` once) other than
/// `me`, the first [`MAX_TIED_NAMES`] by name and the rest as `and N more`.
fn tied_names<'a>(run: &[usize], me: usize, name: impl Fn(usize) -> &'a str) -> String {
    let shown: Vec<&str> = run
        .iter()
        .filter(|&&j| j != me)
        .take(MAX_TIED_NAMES)
        .map(|&j| name(j))
        .collect();
    let mut s = format!("'{}'", shown.join("', '"));
    let more = run.len().saturating_sub(1 + shown.len());
    if more > 0 {
        s.push_str(&format!(" and {more} more"));
    }
    s
}

/// A scheduler that makes no guarantee (time sharing, §5.3.1.6, and later
/// best-effort policies such as BEST or BEST-RATE): it uses any guarantee
/// (trivially converted to NULL) and provides NULL to every child.
#[derive(Clone, Debug)]
pub struct BestEffort {
    policy: String,
    title: String,
    rule: &'static str,
}

impl BestEffort {
    /// A best-effort mapping for the policy named `policy`, shown as
    /// `title` in messages.
    pub fn new(policy: &str, title: &str) -> BestEffort {
        BestEffort {
            policy: policy.to_string(),
            title: title.to_string(),
            rule: "Table 5.1: TS NULL ↦ NULL⁺",
        }
    }

    /// The same, citing `rule` for what each child gets.
    pub fn with_rule(mut self, rule: &'static str) -> BestEffort {
        self.rule = rule;
        self
    }

    /// The time-sharing scheduler `ts`: `NULL ↦ NULL⁺`.
    pub fn time_sharing() -> BestEffort {
        BestEffort::new("ts", "TS")
    }
}

impl Mapping for BestEffort {
    fn policy(&self) -> &str {
        &self.policy
    }
    fn title(&self) -> &str {
        &self.title
    }
    fn needs(&self) -> String {
        "NULL (any guarantee)".into()
    }
    fn max_parents(&self) -> Option<usize> {
        None
    }
    fn accepts(&self, _g: &Guarantee) -> Result<Guarantee, String> {
        Ok(Guarantee::Null)
    }
    fn child_guarantees(
        &self,
        _received: &[Guarantee],
        children: &[ChildRequest<'_>],
    ) -> Vec<Result<Provision, String>> {
        vec![Ok(Provision::one(Guarantee::Null, self.rule)); children.len()]
    }
}

/// Default Rez cap: the largest total utilization it admits.
pub const DEFAULT_REZ_CAP: f64 = 0.85;

/// Rez, the basic hard reservation scheduler (§5.3.1.5, §9.3.2): `ALL ↦
/// RESBH⁺`, `RESU ↦ RESBH⁺`. Each child gets `RESBH amount period` from its
/// edge parameters (or, for a thread without them, from its request), and
/// children are admitted in order by the EDF utilization test against the
/// cap. Under `RESU r` amounts are in the slower processor's time, so the
/// absolute guarantee is `RESBH r·amount period` (§5.3.1).
#[derive(Clone, Copy, Debug)]
pub struct Rez {
    /// Largest total utilization admitted, in (0, 1].
    pub cap: f64,
}

impl Default for Rez {
    fn default() -> Rez {
        Rez {
            cap: DEFAULT_REZ_CAP,
        }
    }
}

impl Rez {
    /// The reservation to make for a child: edge parameters, or derived from
    /// the thread's request.
    fn sizing(child: &ChildRequest<'_>) -> Result<(Duration, Duration), String> {
        match (child.params.amount, child.params.period) {
            (Some(a), Some(p)) => Ok((a, p)),
            (Some(_), None) | (None, Some(_)) => {
                Err("rez needs both `amount` and `period`, or neither".to_string())
            }
            (None, None) => match child.request.copied() {
                // Theorem 5.2 backwards: x per (x + y)/2 yields RESCS x y.
                Some(Guarantee::ResCS { amount, period }) => {
                    Ok((amount, Duration::from_nanos((amount.as_nanos() + period.as_nanos()) / 2)))
                }
                Some(g) if g.amount_period().is_some() => Ok(g.amount_period().unwrap_or_default()),
                _ => Err(
                    "rez needs `amount` and `period` for this child (or a reservation request such as `RESBH 10 33`)"
                        .to_string(),
                ),
            },
        }
    }
}

impl Mapping for Rez {
    fn policy(&self) -> &str {
        "rez"
    }
    fn title(&self) -> &str {
        "Rez"
    }
    fn needs(&self) -> String {
        "ALL or RESU".into()
    }
    fn accepts(&self, g: &Guarantee) -> Result<Guarantee, String> {
        match *g {
            Guarantee::All | Guarantee::ResU { .. } => Ok(*g),
            _ => Err(reason_for(g, K::ResU)),
        }
    }
    fn child_guarantees(
        &self,
        received: &[Guarantee],
        children: &[ChildRequest<'_>],
    ) -> Vec<Result<Provision, String>> {
        const RULE: &str = "Table 5.1: Rez ALL ↦ RESBH⁺, RESU ↦ RESBH⁺";
        let rate = match received.first() {
            Some(Guarantee::ResU { rate }) => *rate,
            _ => 1.0,
        };
        let mut total = 0.0;
        children
            .iter()
            .map(|child| {
                let (amount, period) = Rez::sizing(child)?;
                Guarantee::reservation(K::ResBH, amount, period).map_err(|e| format!("'{}': {e}", child.name))?;
                let util = ratio(amount, period);
                if total + util > self.cap + EPS {
                    return Err(format!(
                        "admission refused: RESBH {} {} needs {:.1}% but {:.1}% of the {:.1}% cap is already reserved (EDF utilization test)",
                        Ms(amount),
                        Ms(period),
                        util * 100.0,
                        total * 100.0,
                        self.cap * 100.0
                    ));
                }
                total += util;
                let amount = if rate < 1.0 {
                    Duration::from_nanos((amount.as_nanos() as f64 * rate).floor() as u64)
                } else {
                    amount
                };
                Ok(Provision::one(Guarantee::ResBH { amount, period }, RULE))
            })
            .collect()
    }
}

/// Default admission cap per processor of `dl` (`sched_rt_runtime_us` /
/// `sched_rt_period_us` = 0.95).
pub const DEFAULT_DL_CAP: f64 = 0.95;

/// `dl`, Linux's deadline class (Linux kernel/sched/deadline.c): global EDF
/// over constant-bandwidth servers on `m = processors` processors, budgets
/// checked every `tick` (so a server may run up to one tick over its
/// runtime, taken from its next budget). It needs ALL on each processor.
/// Children are admitted in order while Σ amount/period stays within
/// `m × cap`, as the policy admits them. With `u_i' = (amount_i + τ) /
/// period_i` (τ the tick, each server counted with one tick of overrun),
/// if `Σ u_i' ≤ m − (m − 1)·max u_i'` (Goossens, Funk and Baruah 2003; on
/// one processor EDF's `Σ ≤ 1`) every server job meets its deadline, and
/// child `i`, charged at most `amount_i + τ` and repaying any overrun from
/// its next budget, gets at least `amount_i − τ` every period: `RESBH
/// (amount_i − τ) period_i`, a basic hard reservation (Regehr 2001,
/// §5.2.2), or NULL when `amount_i ≤ τ`. Otherwise global EDF may miss
/// server deadlines: it still keeps long-run shares with bounded tardiness
/// (Devi and Anderson 2005), which no guarantee type of Regehr 2001, §5.2
/// expresses, so every child gets NULL with a note naming the load and the
/// bound (the test `hsched run --enforce kernel` applies at admission).
#[derive(Clone, Copy, Debug)]
pub struct Dl {
    /// Processors of the root domain, `m`.
    pub processors: u64,
    /// Budget-check tick `τ`; zero for exact enforcement.
    pub tick: Duration,
    /// Admission cap per processor, in (0, 1].
    pub cap: f64,
}

impl Mapping for Dl {
    fn policy(&self) -> &str {
        "dl"
    }
    fn title(&self) -> &str {
        "dl"
    }
    fn needs(&self) -> String {
        "ALL on each processor (a root, or FP's top child)".into()
    }
    fn max_parents(&self) -> Option<usize> {
        None
    }
    fn accepts(&self, g: &Guarantee) -> Result<Guarantee, String> {
        match *g {
            Guarantee::All => Ok(*g),
            _ => Err(format!(
                "{g} is not a whole processor: dl is the deadline class, which runs above everything but stop tasks and needs ALL (Linux kernel/sched/deadline.c)"
            )),
        }
    }
    fn child_guarantees(
        &self,
        _received: &[Guarantee],
        children: &[ChildRequest<'_>],
    ) -> Vec<Result<Provision, String>> {
        const RULE: &str =
            "Linux kernel/sched/deadline.c, Regehr 2001 §5.2.2: dl ALL ↦ RESBH⁺ within the global EDF bound";
        let m = self.processors.max(1) as f64;
        let tick = self.tick.as_nanos() as f64;
        let limit = m * self.cap;
        let mut total = 0.0;
        let sized: Vec<Result<(Duration, Duration), String>> = children
            .iter()
            .map(|child| {
                let (amount, period) = Rez::sizing(child).map_err(|e| e.replacen("rez", "dl", 1))?;
                Guarantee::reservation(K::ResBH, amount, period)
                    .map_err(|e| format!("'{}': {e}", child.name))?;
                let util = ratio(amount, period);
                if total + util > limit + EPS {
                    return Err(format!(
                        "admission refused: a server of {} every {} needs {:.1}% but {:.1}% of the {:.1}% limit ({} CPU(s) × cap {}) is already reserved",
                        Ms(amount),
                        Ms(period),
                        util * 100.0,
                        total * 100.0,
                        limit * 100.0,
                        self.processors,
                        self.cap
                    ));
                }
                total += util;
                Ok((amount, period))
            })
            .collect();
        let inflated = |(a, p): (Duration, Duration)| {
            ((a.as_nanos() as f64 + tick) / p.as_nanos().max(1) as f64).min(1.0)
        };
        let (mut sum, mut max) = (0.0f64, 0.0f64);
        for &(a, p) in sized.iter().flatten() {
            let u = inflated((a, p));
            sum += u;
            max = max.max(u);
        }
        let bound = if self.processors <= 1 {
            1.0
        } else {
            m - (m - 1.0) * max
        };
        let passes = sum <= bound + EPS;
        let test = if self.processors <= 1 {
            "the most EDF on one CPU schedules without a miss".to_string()
        } else {
            format!(
                "the most global EDF on {} CPUs is known to schedule without a miss (m − (m − 1)·u_max with u_max {:.1}%)",
                self.processors,
                max * 100.0
            )
        };
        sized
            .into_iter()
            .map(|r| {
                let (amount, period) = r?;
                if !passes {
                    return Ok(Provision::noted(
                        Guarantee::Null,
                        format!(
                            "the deadline load, each server counted with one tick ({}) of overrun, is {:.1}%, above {:.1}%, {test}: server deadlines may be missed; global EDF keeps long-run shares with bounded tardiness (Devi and Anderson 2005), which no guarantee type of Regehr 2001, §5.2 expresses",
                            self.tick,
                            sum * 100.0,
                            bound * 100.0
                        ),
                    ));
                }
                if amount <= self.tick {
                    return Ok(Provision::noted(
                        Guarantee::Null,
                        format!(
                            "a runtime of {} is no more than the tick ({}): a period's overrun may take the next budget whole",
                            Ms(amount),
                            self.tick
                        ),
                    ));
                }
                Guarantee::reservation(K::ResBH, amount - self.tick, period)
                    .map(|g| Provision::one(g, RULE))
                    .map_err(|e| e.to_string())
            })
            .collect()
    }
}

/// Default SFQ quantum (a common quantum in general-purpose systems, §5.3.3.1).
pub const DEFAULT_QUANTUM: Duration = Duration::from_millis(10);

/// Equation 5.2: the PSBE guarantee of a thread with weight `r` (fraction of
/// the total shares) among `threads` children of an SFQ scheduler with
/// quantum `q` that receives `PSBE s δ`:
/// `PSBE (s·r) (r·T·q/s + r·δ/s + q)`.
pub fn sfq_child(
    share: f64,
    error: Duration,
    weight: f64,
    threads: usize,
    quantum: Duration,
) -> Guarantee {
    let (q, d) = (quantum.as_nanos() as f64, error.as_nanos() as f64);
    let delta = weight * threads as f64 * q / share + weight * d / share + q;
    Guarantee::Psbe {
        share: share * weight,
        error: Duration::from_nanos(delta.ceil().min(u64::MAX as f64) as u64),
    }
}

/// The proportional-share scheduler of HLS: start-time fair queuing with a
/// warp extension (§5.3.1.4): `PS ↦ PS⁺`, `PSBE ↦ PSBE⁺`, `RESU ↦ PSBE⁺`,
/// `RESCH ↦ PSBE⁺`. Under `PSBE s δ` each child gets the PSBE guarantee of
/// Equation 5.2 ([`sfq_child`]); a `RESU r` is used one quantum at a time
/// (Theorem 5.1), as a basic reservation `r·q` per `q`; any reservation or
/// ALL is first rewritten into PSBE (Theorems 5.4, 5.5). When a child has a
/// non-zero warp the scheduler behaves like BVT (§5.3.1.7), whose error is
/// not bounded: every child then gets `PS s·r` only. On several VPs (a
/// multiprocessor PS, §7.1) each child gets `PS min(1, R·r)` of the total
/// rate `R` received.
#[derive(Clone, Copy, Debug)]
pub struct Sfq {
    /// Scheduling quantum `q`.
    pub quantum: Duration,
}

impl Default for Sfq {
    fn default() -> Sfq {
        Sfq {
            quantum: DEFAULT_QUANTUM,
        }
    }
}

impl Mapping for Sfq {
    fn policy(&self) -> &str {
        "ps"
    }
    fn title(&self) -> &str {
        "PS"
    }
    fn needs(&self) -> String {
        "PSBE, PS or RESU (or a guarantee that converts to PSBE)".into()
    }
    /// A multiprocessor scheduler: one VP per processor it may hold (§7.1).
    fn max_parents(&self) -> Option<usize> {
        None
    }
    fn accepts(&self, g: &Guarantee) -> Result<Guarantee, String> {
        if can_convert(g.kind(), K::Psbe) {
            return convert(g, K::Psbe, &ConvertParams::default()).map_err(|e| e.to_string());
        }
        match *g {
            Guarantee::ResU { rate } => {
                let q = self.quantum;
                let per_quantum = Guarantee::ResBS {
                    amount: Duration::from_nanos((q.as_nanos() as f64 * rate).floor() as u64),
                    period: q,
                };
                convert(&per_quantum, K::Psbe, &ConvertParams::default()).map_err(|e| e.to_string())
            }
            Guarantee::Ps { .. } => Ok(*g),
            _ => Err(reason_for(g, K::Psbe)),
        }
    }
    fn child_guarantees(
        &self,
        received: &[Guarantee],
        children: &[ChildRequest<'_>],
    ) -> Vec<Result<Provision, String>> {
        let t = children.len();
        let shares: Vec<Result<f64, String>> = children
            .iter()
            .map(|c| match c.params.share {
                None => Ok(1.0),
                Some(s) if s.is_finite() && s > 0.0 => Ok(s),
                Some(s) => Err(format!(
                    "'{}' has share {s}; shares must be positive numbers",
                    c.name
                )),
            })
            .collect();
        let total: f64 = shares.iter().filter_map(|s| s.as_ref().ok()).sum();
        let warped = children
            .iter()
            .any(|c| c.params.warp.is_some_and(|w| w.as_nanos() > 0));
        if received.len() > 1 {
            return sfq_multiprocessor(received, shares, total);
        }
        let got = received.first().copied().unwrap_or(Guarantee::Null);
        shares
            .into_iter()
            .map(|s| {
                let r = s? / total;
                Ok(match got {
                    Guarantee::Psbe { share, error } if !warped => Provision::one(
                        sfq_child(share, error, r, t, self.quantum),
                        "Table 5.1: PS PSBE ↦ PSBE⁺ (Equation 5.2)",
                    ),
                    Guarantee::Psbe { share, .. } => Provision::one(
                        Guarantee::Ps { share: share * r },
                        "§5.3.1.7: with warps SFQ acts as BVT, PS ↦ PS⁺",
                    ),
                    Guarantee::Ps { share } => {
                        Provision::one(Guarantee::Ps { share: share * r }, "Table 5.1: PS PS ↦ PS⁺")
                    }
                    _ => Provision::one(Guarantee::Null, "no usable guarantee"),
                })
            })
            .collect()
    }
}

/// A PS scheduler holding several VPs (a multiprocessor PS of §7.1, such as
/// PS1 of Fig 7.1 on both processors): the capacity `R`, the sum of the
/// received rates, is divided by weight, and each child VP gets `PS
/// min(1, R·r)` — one VP uses one processor at a time (§6.3.1). Only `PS`:
/// Equation 5.2 bounds the error of SFQ on one processor, not on several.
/// A child whose share of `R` exceeds one processor cannot use the excess;
/// the others then receive more than this promises, never less.
fn sfq_multiprocessor(
    received: &[Guarantee],
    shares: Vec<Result<f64, String>>,
    total: f64,
) -> Vec<Result<Provision, String>> {
    let capacity: f64 = received.iter().map(Guarantee::rate).sum();
    shares
        .into_iter()
        .map(|s| {
            let share = (capacity * s? / total).min(1.0);
            Ok(if share > 0.0 {
                Provision::one(
                    Guarantee::Ps { share },
                    "§7.1: a multiprocessor PS divides the capacity of its VPs, PS ↦ PS⁺",
                )
            } else {
                Provision::one(Guarantee::Null, "no usable guarantee")
            })
        })
        .collect()
}

/// The join scheduler (§5.3.1.2): it registers VPs with several parents and
/// runs its one child whenever any parent runs it. The child may take any
/// one parent guarantee, made soft (a join may add time, so nothing hard
/// survives). On a uniprocessor, guarantees of the same type add up
/// (`RESBS 2 30` + `RESBS 3 30` = `RESBS 5 30`, as in the text, which
/// assumes the parents' periods are aligned; continuous reservations of one
/// period, PSBE, PS and RESU add without that assumption). On a
/// multiprocessor nothing adds, since two parents may run the join at once
/// and it can use only one.
#[derive(Clone, Copy, Debug)]
pub struct Join {
    /// Number of processors of the machine.
    pub cpus: u32,
}

fn cap_amount(amount: Duration, period: Duration) -> Duration {
    amount.min(period)
}

fn join_sums(soft: &[Guarantee]) -> Vec<Guarantee> {
    let mut out = Vec::new();
    if soft.contains(&Guarantee::All) {
        return vec![Guarantee::All];
    }
    // Reservations of one period.
    let mut periods: Vec<Duration> = Vec::new();
    for g in soft {
        if let Some((_, p)) = g.amount_period() {
            if !periods.contains(&p) {
                periods.push(p);
            }
        }
    }
    for p in periods {
        let group: Vec<&Guarantee> = soft
            .iter()
            .filter(|g| g.amount_period().is_some_and(|(_, q)| q == p))
            .collect();
        if group.len() < 2 {
            continue;
        }
        let sum = group.iter().fold(Duration::ZERO, |acc, g| {
            acc + g.amount_period().unwrap_or_default().0
        });
        let amount = cap_amount(sum, p);
        if group.iter().all(|g| g.kind() == K::ResCS) {
            out.push(Guarantee::ResCS { amount, period: p });
        } else {
            out.push(Guarantee::ResBS { amount, period: p });
        }
    }
    // PSBE: s·t − δ from each parent, on disjoint time.
    let psbe: Vec<Guarantee> = soft
        .iter()
        .filter(|g| can_convert(g.kind(), K::Psbe))
        .filter_map(|g| convert(g, K::Psbe, &ConvertParams::default()).ok())
        .collect();
    if psbe.len() >= 2 {
        let (mut s, mut d) = (0.0, Duration::ZERO);
        for g in &psbe {
            if let Guarantee::Psbe { share, error } = g {
                s += share;
                d += *error;
            }
        }
        out.push(Guarantee::Psbe {
            share: s.min(1.0),
            error: d,
        });
    }
    let resu: Vec<f64> = soft
        .iter()
        .filter_map(|g| {
            if let Guarantee::ResU { rate } = g {
                Some(*rate)
            } else {
                None
            }
        })
        .collect();
    if resu.len() >= 2 {
        out.push(Guarantee::ResU {
            rate: resu.iter().sum::<f64>().min(1.0),
        });
    }
    let ps: Vec<f64> = soft
        .iter()
        .filter(|g| can_convert(g.kind(), K::Ps))
        .map(Guarantee::rate)
        .collect();
    if ps.len() >= 2 {
        out.push(Guarantee::Ps {
            share: ps.iter().sum::<f64>().min(1.0),
        });
    }
    out
}

impl Mapping for Join {
    fn policy(&self) -> &str {
        "join"
    }
    fn title(&self) -> &str {
        "Join"
    }
    fn needs(&self) -> String {
        "any guarantee from each parent".into()
    }
    fn max_parents(&self) -> Option<usize> {
        None
    }
    fn max_children(&self) -> Option<usize> {
        Some(1)
    }
    fn accepts(&self, g: &Guarantee) -> Result<Guarantee, String> {
        Ok(*g)
    }
    fn child_guarantees(
        &self,
        received: &[Guarantee],
        children: &[ChildRequest<'_>],
    ) -> Vec<Result<Provision, String>> {
        let soft: Vec<Guarantee> = received
            .iter()
            .map(Guarantee::softened)
            .filter(|g| *g != Guarantee::Null)
            .collect();
        let mut options = Vec::new();
        let rule = if self.cpus == 1 && soft.len() >= 2 {
            options.extend(join_sums(&soft));
            "§5.3.1.2: Join passes any one parent guarantee made soft; same-type guarantees add on a uniprocessor"
        } else {
            "§5.3.1.2: Join passes any one parent guarantee made soft"
        };
        let mut singles = soft;
        singles.sort_by(|a, b| b.rate().total_cmp(&a.rate()));
        for g in singles {
            if !options.contains(&g) {
                options.push(g);
            }
        }
        if options.is_empty() {
            options.push(Guarantee::Null);
        }
        children
            .iter()
            .enumerate()
            .map(|(i, c)| {
                if i == 0 {
                    Ok(Provision {
                        options: options.clone(),
                        rule: rule.into(),
                    })
                } else {
                    Err(format!(
                        "join schedules a single child; '{}' is one too many",
                        c.name
                    ))
                }
            })
            .collect()
    }
}

/// The limit scheduler (§5.3.1.3): `RESBS ↦ RESBH`. It passes at most
/// `amount` per `period` to its single child, turning a soft basic
/// reservation of at least that much into a hard one. Without parameters it
/// limits to exactly what it receives.
#[derive(Clone, Copy, Debug, Default)]
pub struct Limit {
    /// Amount per period let through.
    pub amount: Option<Duration>,
    /// Period.
    pub period: Option<Duration>,
}

impl Mapping for Limit {
    fn policy(&self) -> &str {
        "limit"
    }
    fn title(&self) -> &str {
        "Limit"
    }
    fn needs(&self) -> String {
        match (self.amount, self.period) {
            (Some(a), Some(p)) => format!("RESBS of at least {} per {}", Ms(a), Ms(p)),
            _ => "RESBS".into(),
        }
    }
    fn max_children(&self) -> Option<usize> {
        Some(1)
    }
    fn accepts(&self, g: &Guarantee) -> Result<Guarantee, String> {
        if !can_convert(g.kind(), K::ResBS) {
            return Err(reason_for(g, K::ResBS));
        }
        let params = ConvertParams {
            period: self.period,
            slack: Duration::ZERO,
        };
        let via = convert(g, K::ResBS, &params).map_err(|e| match e {
            ConversionError::NeedsPeriod { .. } => {
                format!("limit needs `amount` and `period` to use {g}")
            }
            e => e.to_string(),
        })?;
        let (have, p) = via.amount_period().unwrap_or_default();
        match self.amount {
            Some(want) if have < want => Err(format!(
                "{g} promises only {} per {} (as {via}); the limit lets through {} per {} and needs at least that",
                Ms(have),
                Ms(p),
                Ms(want),
                Ms(p)
            )),
            _ => Ok(via),
        }
    }
    fn child_guarantees(
        &self,
        received: &[Guarantee],
        children: &[ChildRequest<'_>],
    ) -> Vec<Result<Provision, String>> {
        let (a, p) = received
            .first()
            .and_then(Guarantee::amount_period)
            .unwrap_or_default();
        let g = Guarantee::ResBH {
            amount: self.amount.unwrap_or(a),
            period: self.period.unwrap_or(p),
        };
        children
            .iter()
            .enumerate()
            .map(|(i, c)| {
                if i == 0 {
                    Ok(Provision::one(g, "Table 5.1: Limit RESBS ↦ RESBH"))
                } else {
                    Err(format!(
                        "limit schedules a single child; '{}' is one too many",
                        c.name
                    ))
                }
            })
            .collect()
    }
}

/// Builds a mapping from instance parameters.
pub type Constructor = fn(&InstanceParams, &MappingContext) -> Result<Box<dyn Mapping>, String>;

/// A policy name that cannot be turned into a mapping.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MappingError {
    /// No mapping is registered under this name.
    UnknownPolicy {
        /// The name.
        policy: String,
        /// Registered names.
        known: Vec<String>,
    },
    /// The instance parameters are wrong for the policy.
    BadParams {
        /// The policy.
        policy: String,
        /// What is wrong.
        message: String,
    },
}

impl fmt::Display for MappingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MappingError::UnknownPolicy { policy, known } => {
                write!(
                    f,
                    "unknown policy `{policy}`; known policies: {}",
                    known.join(", ")
                )
            }
            MappingError::BadParams { policy, message } => write!(f, "{policy}: {message}"),
        }
    }
}

impl std::error::Error for MappingError {}

/// Mappings by lowercase policy name.
#[derive(Clone)]
pub struct Registry {
    entries: Vec<(String, Entry)>,
}

/// How a registered mapping is made: by a constructor, or from a
/// declaration (a plug-in's).
#[derive(Clone)]
enum Entry {
    Built(Constructor),
    Declared(crate::declared::Declared),
}

impl fmt::Debug for Registry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.entries.iter().map(|(n, _)| n))
            .finish()
    }
}

fn build_fp(p: &InstanceParams, _: &MappingContext) -> Result<Box<dyn Mapping>, String> {
    p.only("fp", &[])?;
    Ok(Box::new(FixedPriority))
}
fn build_ts(p: &InstanceParams, _: &MappingContext) -> Result<Box<dyn Mapping>, String> {
    p.only("ts", &[])?;
    Ok(Box::new(BestEffort::time_sharing()))
}
fn build_best(p: &InstanceParams, _: &MappingContext) -> Result<Box<dyn Mapping>, String> {
    p.only("best", &[])?;
    Ok(Box::new(BestEffort::new("best", "BEST")))
}
fn build_best_rate(p: &InstanceParams, _: &MappingContext) -> Result<Box<dyn Mapping>, String> {
    p.only("best-rate", &[])?;
    Ok(Box::new(BestEffort::new("best-rate", "BEST-RATE")))
}
fn build_linux24(p: &InstanceParams, _: &MappingContext) -> Result<Box<dyn Mapping>, String> {
    p.only("linux24", &[])?;
    Ok(Box::new(BestEffort::new("linux24", "Linux 2.4")))
}
fn build_rez(p: &InstanceParams, _: &MappingContext) -> Result<Box<dyn Mapping>, String> {
    p.only("rez", &["cap"])?;
    let cap = p.cap.unwrap_or(DEFAULT_REZ_CAP);
    if !(cap.is_finite() && cap > 0.0 && cap <= 1.0) {
        return Err(format!(
            "`cap` = {cap} must be a fraction in (0, 1], e.g. 0.85"
        ));
    }
    Ok(Box::new(Rez { cap }))
}
fn build_dl(p: &InstanceParams, _: &MappingContext) -> Result<Box<dyn Mapping>, String> {
    p.only("dl", &["processors", "tick", "cap"])?;
    let cap = p.cap.unwrap_or(DEFAULT_DL_CAP);
    if !(cap.is_finite() && cap > 0.0 && cap <= 1.0) {
        return Err(format!(
            "`cap` = {cap} must be a fraction in (0, 1], e.g. 0.95"
        ));
    }
    let processors = p.processors.unwrap_or(1);
    if processors == 0 {
        return Err("`processors` must be at least 1".into());
    }
    Ok(Box::new(Dl {
        processors,
        tick: p.tick.unwrap_or(Duration::ZERO),
        cap,
    }))
}
fn build_ps(p: &InstanceParams, _: &MappingContext) -> Result<Box<dyn Mapping>, String> {
    p.only("ps", &["quantum"])?;
    let quantum = p.quantum.unwrap_or(DEFAULT_QUANTUM);
    if quantum.as_nanos() == 0 {
        return Err("`quantum` must be longer than zero, e.g. 10ms".into());
    }
    Ok(Box::new(Sfq { quantum }))
}
fn build_join(p: &InstanceParams, ctx: &MappingContext) -> Result<Box<dyn Mapping>, String> {
    p.only("join", &[])?;
    Ok(Box::new(Join { cpus: ctx.cpus }))
}
fn build_limit(p: &InstanceParams, _: &MappingContext) -> Result<Box<dyn Mapping>, String> {
    p.only("limit", &["amount", "period"])?;
    match (p.amount, p.period) {
        (Some(a), Some(per)) => {
            Guarantee::reservation(K::ResBH, a, per).map_err(|e| e.to_string())?;
        }
        (None, None) => {}
        _ => return Err("give both `amount` and `period`, or neither".into()),
    }
    Ok(Box::new(Limit {
        amount: p.amount,
        period: p.period,
    }))
}

/// Default real-rate overload threshold (Steere et al. 1998, §3.3).
pub const DEFAULT_OVERLOAD: f64 = 0.9;
/// Default real-rate floor of adaptive children.
pub const DEFAULT_FLOOR: f64 = 0.01;
/// Default period of aperiodic, real-rate and misc children (Steere et al. 1998,
/// §3.3: 30 ms).
pub const DEFAULT_RATE_PERIOD: Duration = Duration::from_millis(30);

/// `realrate`, real-rate scheduling (Steere et al. 1998, §3.1, §3.3): `ALL ↦
/// (RESBH⁺, NULL⁺)`. A real-time child (`proportion` and `period`) and an
/// aperiodic one (`proportion`, the default period) get `RESBH
/// proportion·period period`: the dispatcher enforces the budget every
/// period and never squishes it (§3.3). They are admitted in order while
/// the real-time proportions plus the floor of every adaptive child stay
/// within `overload`, as the policy's own admission control does. The
/// budgets are dispatched rate-monotonically beside the adaptive
/// children, whose allocations the controller may raise to whatever
/// `overload` leaves, so the reservation is hard only when rate-monotonic
/// scheduling of the whole instance at utilization `overload` is
/// feasible: all periods harmonic (each divides the longer ones), or
/// `overload` within the Liu–Layland bound `n(2^{1/n} − 1)` of its `n`
/// children. Otherwise the real-time children get NULL, with the reason.
/// Real-rate and misc children get NULL: their allocations follow
/// progress and are squished under overload (only the floor is kept, too
/// small to be worth a guarantee). Uniprocessor: one parent VP.
#[derive(Clone, Copy, Debug)]
pub struct RealRate {
    /// Overload threshold, in (0, 1).
    pub overload: f64,
    /// Floor of every adaptive child.
    pub floor: f64,
    /// Period of children that do not give one.
    pub default_period: Duration,
}

impl Default for RealRate {
    fn default() -> RealRate {
        RealRate {
            overload: DEFAULT_OVERLOAD,
            floor: DEFAULT_FLOOR,
            default_period: DEFAULT_RATE_PERIOD,
        }
    }
}

impl RealRate {
    /// The class of `c` as the policy infers it (Fig 2): proportion and
    /// period: real-time; proportion only: aperiodic; otherwise misc (a
    /// misc child that reports progress becomes real-rate, which changes no
    /// guarantee).
    fn class(c: &EdgeParams) -> RateClass {
        c.class.unwrap_or(match (c.proportion, c.period) {
            (Some(_), Some(_)) => RateClass::RealTime,
            (Some(_), None) => RateClass::Aperiodic,
            _ => RateClass::Misc,
        })
    }
}

/// Whether every period divides every longer one.
fn harmonic(periods: &[u64]) -> bool {
    periods.iter().all(|&a| {
        periods
            .iter()
            .all(|&b| a == 0 || b == 0 || a.max(b) % a.min(b) == 0)
    })
}

impl Mapping for RealRate {
    fn policy(&self) -> &str {
        "realrate"
    }
    fn title(&self) -> &str {
        "RealRate"
    }
    fn needs(&self) -> String {
        "ALL (the whole processor: a root, or FP's top child)".into()
    }
    fn accepts(&self, g: &Guarantee) -> Result<Guarantee, String> {
        match *g {
            Guarantee::All => Ok(*g),
            _ => Err(format!(
                "{g} is not the whole processor: realrate sizes proportions of a full CPU and needs ALL (Steere et al. 1998, §3.1)"
            )),
        }
    }
    fn child_guarantees(
        &self,
        _received: &[Guarantee],
        children: &[ChildRequest<'_>],
    ) -> Vec<Result<Provision, String>> {
        const RULE: &str =
            "Steere et al. 1998, §3.1/§3.3: RealRate ALL ↦ RESBH⁺ for real-time children";
        const ADAPTIVE: &str =
            "Steere et al. 1998, §3.3: real-rate and misc allocations follow progress and are squished under overload: NULL";
        const NOT_RM: &str = "Steere et al. 1998, §3.1: rate-monotonic dispatch up to `overload` is not feasible here (periods not harmonic, overload above the Liu–Layland bound): NULL";
        let classes: Vec<RateClass> = children.iter().map(|c| RealRate::class(c.params)).collect();
        let adaptive = classes
            .iter()
            .filter(|c| matches!(c, RateClass::RealRate | RateClass::Misc))
            .count();
        let periods: Vec<u64> = children
            .iter()
            .zip(&classes)
            .map(|(c, k)| match (k, c.params.period) {
                (RateClass::Aperiodic, _) | (_, None) => self.default_period.as_nanos(),
                (_, Some(p)) => p.as_nanos(),
            })
            .collect();
        let n = children.len().max(1) as f64;
        let ll = n * (2f64.powf(1.0 / n) - 1.0);
        let rm_ok = harmonic(&periods) || self.overload <= ll + EPS;
        let mut total = adaptive as f64 * self.floor;
        children
            .iter()
            .zip(&classes)
            .zip(&periods)
            .map(|((c, class), &period)| {
                if matches!(class, RateClass::RealRate | RateClass::Misc) {
                    return Ok(Provision::one(Guarantee::Null, ADAPTIVE));
                }
                let Some(p) = c.params.proportion else {
                    return Err(format!(
                        "'{}' is {} but has no `proportion`",
                        c.name,
                        if *class == RateClass::RealTime { "real-time" } else { "aperiodic" }
                    ));
                };
                if !(p > 0.0 && p <= 1.0) {
                    return Err(format!("'{}' has proportion {p}; it must be in (0, 1]", c.name));
                }
                if total + p > self.overload + EPS {
                    return Err(format!(
                        "admission refused: proportion {:.1}% on top of {:.1}% (real-time proportions and the floors of {adaptive} adaptive children) exceeds the {:.1}% overload threshold (Steere et al. 1998, §3.3)",
                        p * 100.0,
                        total * 100.0,
                        self.overload * 100.0
                    ));
                }
                total += p;
                if !rm_ok {
                    return Ok(Provision::one(Guarantee::Null, NOT_RM));
                }
                let period = Duration::from_nanos(period);
                let amount = Duration::from_nanos((period.as_nanos() as f64 * p).floor() as u64);
                Guarantee::reservation(K::ResBH, amount, period)
                    .map(|g| Provision::one(g, RULE))
                    .map_err(|e| format!("'{}': {e}", c.name))
            })
            .collect()
    }
}

/// `coop`, fair share with cooperative domains (Sinha 2007, §2.2.2, §2.3–2.5):
/// `any ↦ NULL⁺`. It accepts any guarantee and promises every child NULL.
/// What it does provide, precisely: a child that never calls `coop_poll`
/// is a best-effort entity with its own virtual time, dispatched
/// minimum-virtual-time first with slices of `max(period / n, min_slice)`
/// (§2.2.2), so over a long interval in which it stays runnable it gets
/// at least `1/n` of what `coop` receives (`n` the entities runnable);
/// but a sleeper's virtual time is raised on wake-up (borrowing, "use it
/// or lose it"), slices are cut at other members' deadlines (Fig 2.17),
/// and entities come and go as children join or leave domains, so neither
/// the share nor its error is bounded in advance. A member of a
/// cooperative domain shares one entity's virtual time with the other
/// members (Fig 2.14); inside the domain, time goes to the earliest
/// expired deadline or the most important best-effort event (Fig 2.15),
/// which is cooperative timeliness and no reservation (the thesis's goal
/// (c), §1: no reservations); and a member that overruns its slice or
/// blocks outside `coop_poll` is policed (§2.3). Since which children are
/// members is decided at run time by their `coop_poll` calls, every child
/// is declared best effort.
pub fn coop() -> BestEffort {
    BestEffort::new("coop", "Coop").with_rule(
        "Sinha 2007, §2.3–2.5: Coop any ↦ NULL⁺ (fair share and cooperative domains, no reservation)",
    )
}

fn build_realrate(p: &InstanceParams, _: &MappingContext) -> Result<Box<dyn Mapping>, String> {
    p.only("realrate", &["overload", "floor", "default_period"])?;
    let d = RealRate::default();
    let overload = p.overload.unwrap_or(d.overload);
    if !(overload > 0.0 && overload < 1.0) {
        return Err(format!(
            "`overload` = {overload} must be a fraction in (0, 1), e.g. 0.9"
        ));
    }
    let floor = p.floor.unwrap_or(d.floor);
    if !(0.0..1.0).contains(&floor) {
        return Err(format!("`floor` = {floor} must be a fraction in [0, 1)"));
    }
    let default_period = p.default_period.unwrap_or(d.default_period);
    if default_period.as_nanos() == 0 {
        return Err("`default_period` must be longer than zero, e.g. 30ms".into());
    }
    Ok(Box::new(RealRate {
        overload,
        floor,
        default_period,
    }))
}

fn build_coop(p: &InstanceParams, _: &MappingContext) -> Result<Box<dyn Mapping>, String> {
    p.only("coop", &[])?;
    Ok(Box::new(coop()))
}

impl Registry {
    /// The built-in mappings: `fp`, `ts`, `rez`, `ps` (alias `sfq`),
    /// `join`, `limit`, best-effort `best`, `best-rate` and `linux24`
    /// (Linux's time sharing: `NULL ↦ NULL⁺`, Table 5.1), `realrate`,
    /// `coop` and `dl` (Linux's deadline class).
    pub fn builtin() -> Registry {
        let entries: Vec<(String, Constructor)> = vec![
            ("fp".into(), build_fp as Constructor),
            ("ts".into(), build_ts),
            ("rez".into(), build_rez),
            ("ps".into(), build_ps),
            ("sfq".into(), build_ps),
            ("join".into(), build_join),
            ("limit".into(), build_limit),
            ("best".into(), build_best),
            ("best-rate".into(), build_best_rate),
            ("linux24".into(), build_linux24),
            ("realrate".into(), build_realrate),
            ("coop".into(), build_coop),
            ("dl".into(), build_dl),
        ];
        Registry {
            entries: entries
                .into_iter()
                .map(|(n, c)| (n, Entry::Built(c)))
                .collect(),
        }
    }

    /// Adds or replaces the mapping for `policy`.
    pub fn register(&mut self, policy: &str, constructor: Constructor) {
        self.put(policy, Entry::Built(constructor));
    }

    /// Adds or replaces the mapping for `policy` with a declared one (a
    /// plug-in's, [`crate::declared`]).
    pub fn register_declared(&mut self, policy: &str, decl: crate::declared::Declared) {
        self.put(policy, Entry::Declared(decl));
    }

    fn put(&mut self, policy: &str, entry: Entry) {
        match self.entries.iter_mut().find(|(n, _)| n == policy) {
            Some(e) => e.1 = entry,
            None => self.entries.push((policy.to_string(), entry)),
        }
    }

    /// Registered policy names, in registration order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().map(|(n, _)| n.as_str())
    }

    /// The mapping of `policy` with instance parameters `params`.
    ///
    /// # Errors
    /// An unknown policy name, or parameters the policy does not take or
    /// cannot use.
    pub fn build(
        &self,
        policy: &str,
        params: &InstanceParams,
        ctx: &MappingContext,
    ) -> Result<Box<dyn Mapping>, MappingError> {
        let Some((_, entry)) = self.entries.iter().find(|(n, _)| n == policy) else {
            return Err(MappingError::UnknownPolicy {
                policy: policy.to_string(),
                known: self.names().map(String::from).collect(),
            });
        };
        let made = match entry {
            Entry::Built(ctor) => ctor(params, ctx),
            Entry::Declared(d) => Ok(Box::new(d.instantiate(params)) as Box<dyn Mapping>),
        };
        made.map_err(|message| MappingError::BadParams {
            policy: policy.to_string(),
            message,
        })
    }
}

impl Default for Registry {
    fn default() -> Registry {
        Registry::builtin()
    }
}

/// The schedulers of Table 5.1 that HLS did not implement, as
/// `(name, [(accepted, provided)])`; `+` marks "any number of".
pub const LITERATURE: &[(&str, &[(&str, &str)])] = &[
    ("BSS-I, PShED", &[("ALL", "RESU+"), ("RESU", "RESU+")]),
    ("BVT", &[("PS", "PS+"), ("RESU", "PS+"), ("RESCH", "PS+")]),
    ("CBS", &[("ALL", "RESBH+"), ("RESU", "RESBH+")]),
    ("EEVDF", &[("ALL", "PSBE+"), ("RESU", "PSBE+")]),
    ("Linux", &[("NULL", "NULL+")]),
    (
        "Lottery",
        &[("PS", "PS+"), ("RESU", "PS+"), ("RESCH", "PS+")],
    ),
    (
        "Resource Kernel",
        &[("ALL", "RESBS+, RESBH+"), ("RESU", "RESBS+, RESBH+")],
    ),
    (
        "Rialto, Rialto/NT",
        &[("ALL", "RESCS+"), ("RESU", "RESCS+")],
    ),
    (
        "SFQ",
        &[
            ("PS", "PS+"),
            ("PSBE", "PSBE+"),
            ("RESU", "PSBE+"),
            ("RESCH", "PSBE+"),
        ],
    ),
    (
        "SFS",
        &[("PS+", "PS+"), ("RESU+", "PS+"), ("RESCH+", "PS+")],
    ),
    ("SMART", &[("NULL", "NULL+")]),
    ("Spring", &[("ALL", "RESBH+"), ("RESU", "RESBH+")]),
    (
        "Stride",
        &[("PS", "PS+"), ("RESU", "PS+"), ("RESCH", "PS+")],
    ),
    ("TBS", &[("ALL", "RESBS+"), ("RESU", "RESBH+")]),
    ("Windows 2000", &[("NULL", "NULL+")]),
];

#[cfg(test)]
mod tests {
    use super::*;

    fn g(s: &str) -> Guarantee {
        s.parse().unwrap()
    }
    fn ms(v: f64) -> Duration {
        Duration::from_millis_f64(v)
    }
    fn edge() -> EdgeParams {
        EdgeParams::default()
    }
    fn child<'a>(name: &'a str, params: &'a EdgeParams) -> ChildRequest<'a> {
        ChildRequest {
            name,
            is_thread: true,
            params,
            request: None,
            multiprocessor: false,
        }
    }
    fn ctx() -> MappingContext {
        MappingContext { cpus: 1 }
    }

    #[test]
    fn fp_passes_to_the_highest_priority_child() {
        let hi = EdgeParams {
            priority: Some(10),
            ..edge()
        };
        let lo = EdgeParams {
            priority: Some(1),
            ..edge()
        };
        let out = FixedPriority
            .child_guarantees(&[g("RESBS 2 10")], &[child("lo", &lo), child("hi", &hi)]);
        assert_eq!(out[0].as_ref().unwrap().first(), Guarantee::Null);
        assert_eq!(out[1].as_ref().unwrap().first(), g("RESBS 2 10"));
        // Two VPs (two processors): the two most urgent children get one each.
        let out = FixedPriority.child_guarantees(
            &[Guarantee::All, Guarantee::All],
            &[child("lo", &lo), child("hi", &hi)],
        );
        assert!(out
            .iter()
            .all(|r| r.as_ref().unwrap().first() == Guarantee::All));
        // A tie at the top is refused; a missing priority too.
        let hi2 = EdgeParams {
            priority: Some(10),
            ..edge()
        };
        let out = FixedPriority.child_guarantees(
            &[Guarantee::All],
            &[child("a", &hi), child("b", &hi2), child("c", &lo)],
        );
        assert!(out[0].as_ref().unwrap_err().contains("one VP per priority"));
        assert_eq!(out[2].as_ref().unwrap().first(), Guarantee::Null);
        // A missing priority is the policy's default, 0.
        let none = edge();
        let out = FixedPriority
            .child_guarantees(&[Guarantee::All], &[child("a", &hi), child("b", &none)]);
        assert_eq!(out[1].as_ref().unwrap().first(), Guarantee::Null);
        let out = FixedPriority
            .child_guarantees(&[Guarantee::All], &[child("a", &none), child("b", &none)]);
        assert!(out[0]
            .as_ref()
            .unwrap_err()
            .contains("priority 0 is shared with 'b'"));
        // A single child needs no priority.
        let out = FixedPriority.child_guarantees(&[Guarantee::All], &[child("a", &none)]);
        assert_eq!(out[0].as_ref().unwrap().first(), Guarantee::All);
    }

    #[test]
    fn fp_tie_among_many_children_names_a_few_and_counts_the_rest() {
        // 100 000 children at one priority (a `count` at its limit) once made
        // a message per child naming every other: gigabytes of output.
        let none = edge();
        let names: Vec<String> = (0..100_000).map(|i| format!("t.{i}")).collect();
        let kids: Vec<ChildRequest<'_>> = names.iter().map(|n| child(n, &none)).collect();
        let out = FixedPriority.child_guarantees(&[Guarantee::All], &kids);
        let e = out[0].as_ref().unwrap_err();
        assert!(
            e.starts_with(
                "priority 0 is shared with 't.1', 't.2', 't.3', 't.4', 't.5', 't.6', 't.7', 't.8' and 99991 more;"
            ),
            "{e}"
        );
        let e = out[5].as_ref().unwrap_err();
        assert!(
            e.contains("'t.4', 't.6', 't.7', 't.8' and 99991 more"),
            "{e}"
        );
        // A tie below the guaranteed ranks still costs nothing.
        let hi = EdgeParams {
            priority: Some(1),
            ..edge()
        };
        let mut kids = kids;
        kids.insert(0, child("top", &hi));
        let out = FixedPriority.child_guarantees(&[Guarantee::All], &kids);
        assert_eq!(out[0].as_ref().unwrap().first(), Guarantee::All);
        assert_eq!(out[100_000].as_ref().unwrap().first(), Guarantee::Null);
    }

    #[test]
    fn rez_admits_by_edf_utilization_against_its_cap() {
        let rez = Rez::default();
        assert!(rez.accepts(&Guarantee::All).is_ok());
        assert!(rez.accepts(&g("RESU 0.5")).is_ok());
        let e = rez.accepts(&Guarantee::Null).unwrap_err();
        assert!(e.contains("NULL cannot become RESU"), "{e}");
        let a = EdgeParams {
            amount: Some(ms(50.0)),
            period: Some(ms(100.0)),
            ..edge()
        };
        let b = EdgeParams {
            amount: Some(ms(40.0)),
            period: Some(ms(100.0)),
            ..edge()
        };
        let c = EdgeParams {
            amount: Some(ms(1.0)),
            period: Some(ms(100.0)),
            ..edge()
        };
        let out = rez.child_guarantees(
            &[Guarantee::All],
            &[child("a", &a), child("b", &b), child("c", &c)],
        );
        assert_eq!(out[0].as_ref().unwrap().first(), g("RESBH 50 100"));
        let e = out[1].as_ref().unwrap_err();
        assert!(e.contains("needs 40.0% but 50.0% of the 85.0% cap"), "{e}");
        assert_eq!(out[2].as_ref().unwrap().first(), g("RESBH 1 100"));
        // Under RESU 0.5 the amounts are in the slower processor's time.
        let out = rez.child_guarantees(&[g("RESU 0.5")], &[child("a", &a)]);
        assert_eq!(out[0].as_ref().unwrap().first(), g("RESBH 25 100"));
        // Sizing from the thread's request.
        let req = g("RESCS 10 30");
        let e0 = edge();
        let kid = ChildRequest {
            name: "t",
            is_thread: true,
            params: &e0,
            request: Some(&req),
            multiprocessor: false,
        };
        let out = rez.child_guarantees(&[Guarantee::All], &[kid]);
        assert_eq!(out[0].as_ref().unwrap().first(), g("RESBH 10 20"));
        let out = rez.child_guarantees(&[Guarantee::All], &[child("t", &e0)]);
        assert!(out[0]
            .as_ref()
            .unwrap_err()
            .contains("needs `amount` and `period`"));
    }

    /// dl on 2 processors: three 6/10 servers load 1.8 ≤ 2 but fail the
    /// global EDF bound (1.8 > 2 − 0.6), so every child gets NULL with a
    /// note (the simulator shows the miss: crates/policies/tests/dl.rs);
    /// three 3/10 servers (0.9 ≤ 2 − 0.3) get RESBH, less a 1 ms tick
    /// when enforcement is at the tick.
    #[test]
    fn dl_gives_resbh_within_the_global_edf_bound_and_null_beyond() {
        let reg = Registry::builtin();
        let ctx = MappingContext { cpus: 2 };
        let two = |tick: Option<Duration>| InstanceParams {
            processors: Some(2),
            tick,
            ..InstanceParams::default()
        };
        let dl = reg.build("dl", &two(None), &ctx).unwrap();
        let heavy = EdgeParams {
            amount: Some(ms(6.0)),
            period: Some(ms(10.0)),
            ..edge()
        };
        let kids = [child("a", &heavy), child("b", &heavy), child("c", &heavy)];
        let out = dl.child_guarantees(&[Guarantee::All, Guarantee::All], &kids);
        for o in &out {
            let p = o.as_ref().unwrap();
            assert_eq!(p.first(), Guarantee::Null);
            assert!(
                p.rule.contains("180.0%, above 140.0%")
                    && p.rule.contains("Devi and Anderson 2005"),
                "{}",
                p.rule
            );
        }
        let light = EdgeParams {
            amount: Some(ms(3.0)),
            period: Some(ms(10.0)),
            ..edge()
        };
        let kids = [child("a", &light), child("b", &light), child("c", &light)];
        let out = dl.child_guarantees(&[Guarantee::All, Guarantee::All], &kids);
        assert!(out
            .iter()
            .all(|o| o.as_ref().unwrap().first() == g("RESBH 3 10")));
        let ticked = reg.build("dl", &two(Some(ms(1.0))), &ctx).unwrap();
        let out = ticked.child_guarantees(&[Guarantee::All, Guarantee::All], &kids);
        assert!(out
            .iter()
            .all(|o| o.as_ref().unwrap().first() == g("RESBH 2 10")));
        // A tick at least the runtime leaves nothing.
        let big = reg.build("dl", &two(Some(ms(3.0))), &ctx).unwrap();
        let out = big.child_guarantees(&[Guarantee::All], &kids[..1]);
        assert_eq!(out[0].as_ref().unwrap().first(), Guarantee::Null);
        // One processor: EDF's Σ ≤ 1; admission against 1 × 0.95.
        let one = reg.build("dl", &InstanceParams::default(), &ctx).unwrap();
        let out =
            one.child_guarantees(&[Guarantee::All], &[child("a", &heavy), child("b", &heavy)]);
        assert_eq!(out[0].as_ref().unwrap().first(), g("RESBH 6 10"));
        assert!(out[1].as_ref().unwrap_err().contains("admission refused"));
        assert!(one.accepts(&g("RESBH 5 10")).is_err());
    }

    #[test]
    fn sfq_uses_equation_5_2() {
        // §5.3.3.1: RESCS 10 20 → PSBE 0.5 5; six threads, q = 10 ms, T1 has weight 0.5.
        let sfq = Sfq::default();
        let accepted = sfq.accepts(&g("RESCS 10 20")).unwrap();
        assert_eq!(accepted, g("PSBE 0.5 5"));
        let t1 = EdgeParams {
            share: Some(5.0),
            ..edge()
        };
        let other = EdgeParams {
            share: Some(1.0),
            ..edge()
        };
        let kids = [
            child("T1", &t1),
            child("T2", &other),
            child("T3", &other),
            child("T4", &other),
            child("T5", &other),
            child("T6", &other),
        ];
        let out = sfq.child_guarantees(&[accepted], &kids);
        assert_eq!(out[0].as_ref().unwrap().first(), g("PSBE 0.25 75"));
        // Warps void the bound.
        let warped = EdgeParams {
            share: Some(1.0),
            warp: Some(ms(5.0)),
            ..edge()
        };
        let out = sfq.child_guarantees(&[accepted], &[child("a", &warped), child("b", &other)]);
        assert_eq!(out[0].as_ref().unwrap().first(), g("PS 0.25"));
        assert!(sfq.accepts(&Guarantee::Null).unwrap_err().contains("NULL"));
        assert_eq!(sfq.accepts(&g("PS 0.4")).unwrap(), g("PS 0.4"));
        // RESU r, one quantum at a time (Theorem 5.1): r·q per q, Theorem 5.5.
        assert_eq!(sfq.accepts(&g("RESU 0.5")).unwrap(), g("PSBE 0.5 5"));
        let bad = EdgeParams {
            share: Some(-1.0),
            ..edge()
        };
        assert!(sfq.child_guarantees(&[accepted], &[child("x", &bad)])[0].is_err());
    }

    #[test]
    fn sfq_on_several_vps_divides_their_capacity() {
        // §7.1, Fig 7.1: PS1 on two processors gives VS1 (weight 0.4 of 2)
        // PS 0.4; VS2's 1.6 processors exceed what one VP can use.
        let sfq = Sfq::default();
        let all = sfq.accepts(&Guarantee::All).unwrap();
        let vs1 = EdgeParams {
            share: Some(0.4),
            ..edge()
        };
        let vs2 = EdgeParams {
            share: Some(1.6),
            ..edge()
        };
        let out = sfq.child_guarantees(&[all, all], &[child("PS2", &vs1), child("PS5", &vs2)]);
        assert_eq!(out[0].as_ref().unwrap().first().to_string(), "PS 0.4");
        assert_eq!(out[1].as_ref().unwrap().first(), g("PS 1"));
        // PS received on each VP adds up the same way.
        let out = sfq.child_guarantees(
            &[g("PS 0.5"), g("PS 0.3")],
            &[child("a", &vs1), child("b", &vs1)],
        );
        assert_eq!(out[0].as_ref().unwrap().first().to_string(), "PS 0.4");
        assert_eq!(sfq.max_parents(), None);
    }

    #[test]
    fn join_softens_and_adds_on_a_uniprocessor() {
        let e = edge();
        let kid = [child("t", &e)];
        let uni = Join { cpus: 1 };
        let out = uni.child_guarantees(&[g("RESBH 10 20"), Guarantee::Null], &kid);
        assert_eq!(out[0].as_ref().unwrap().options, vec![g("RESBS 10 20")]);
        let out = uni.child_guarantees(&[g("RESBS 2 30"), g("RESBS 3 30")], &kid);
        let opts = &out[0].as_ref().unwrap().options;
        assert_eq!(opts[0], g("RESBS 5 30"));
        assert!(opts.contains(&g("RESBS 3 30")) && opts.contains(&g("RESBS 2 30")));
        let smp = Join { cpus: 2 };
        let out = smp.child_guarantees(&[g("RESBS 2 30"), g("RESBS 3 30")], &kid);
        assert_eq!(
            out[0].as_ref().unwrap().options,
            vec![g("RESBS 3 30"), g("RESBS 2 30")]
        );
        let out = uni.child_guarantees(&[Guarantee::Null, Guarantee::Null], &kid);
        assert_eq!(out[0].as_ref().unwrap().options, vec![Guarantee::Null]);
        let f = edge();
        let out = uni.child_guarantees(&[Guarantee::All], &[child("a", &e), child("b", &f)]);
        assert!(out[1].is_err());
    }

    #[test]
    fn limit_turns_soft_into_hard() {
        let lim = Limit {
            amount: Some(ms(10.0)),
            period: Some(ms(20.0)),
        };
        assert_eq!(lim.accepts(&g("RESBS 12 20")).unwrap(), g("RESBS 12 20"));
        assert!(lim
            .accepts(&g("RESBS 5 20"))
            .unwrap_err()
            .contains("needs at least that"));
        assert!(lim.accepts(&Guarantee::Null).is_err());
        let e = edge();
        let out = lim.child_guarantees(&[g("RESBS 12 20")], &[child("t", &e)]);
        assert_eq!(out[0].as_ref().unwrap().first(), g("RESBH 10 20"));
        let free = Limit::default();
        let out =
            free.child_guarantees(&[free.accepts(&g("RESBS 3 9")).unwrap()], &[child("t", &e)]);
        assert_eq!(out[0].as_ref().unwrap().first(), g("RESBH 3 9"));
        assert!(free
            .accepts(&Guarantee::All)
            .unwrap_err()
            .contains("needs `amount` and `period`"));
    }

    #[test]
    fn registry_builds_by_name_and_checks_params() {
        let r = Registry::builtin();
        let c = ctx();
        for name in [
            "fp",
            "ts",
            "rez",
            "ps",
            "sfq",
            "join",
            "limit",
            "best",
            "best-rate",
            "linux24",
        ] {
            assert!(
                r.build(name, &InstanceParams::default(), &c).is_ok(),
                "{name}"
            );
        }
        let e = r.build("edf", &InstanceParams::default(), &c).unwrap_err();
        assert!(e.to_string().contains("known policies: fp, ts, rez"), "{e}");
        let e = r
            .build(
                "fp",
                &InstanceParams {
                    cap: Some(0.5),
                    ..Default::default()
                },
                &c,
            )
            .unwrap_err();
        assert!(
            e.to_string().contains("fp takes no instance parameters"),
            "{e}"
        );
        let e = r
            .build(
                "rez",
                &InstanceParams {
                    cap: Some(1.5),
                    ..Default::default()
                },
                &c,
            )
            .unwrap_err();
        assert!(e.to_string().contains("(0, 1]"), "{e}");
        let e = r
            .build(
                "limit",
                &InstanceParams {
                    amount: Some(ms(1.0)),
                    ..Default::default()
                },
                &c,
            )
            .unwrap_err();
        assert!(e.to_string().contains("both"), "{e}");
        let mut r2 = r.clone();
        r2.register("coop", |_, _| Ok(Box::new(BestEffort::new("coop", "COOP"))));
        assert_eq!(
            r2.build("coop", &InstanceParams::default(), &c)
                .unwrap()
                .title(),
            "COOP"
        );
        assert!(LITERATURE.iter().any(|(n, _)| *n == "EEVDF"));
    }
}
