//! Guarantee rewrite rules (Regehr 2001, §5.3.2, Table 5.2, Lemmas 5.1–5.3,
//! Theorems 5.2–5.7).
//!
//! A rewrite rule turns a guarantee into another one that every allocation
//! pattern meeting the first also meets, without a scheduler doing anything.
//! Table 5.2 says which kinds convert into which; [`table_5_2`] is that table
//! and [`convert`] computes the parameters:
//!
//! | from → to | result | source |
//! |---|---|---|
//! | any → same kind | itself (at a multiple of the period: `k·x` per `k·y`) | definition |
//! | any → NULL | NULL | §5.3.1.6 |
//! | ALL → RESU / PS / PSBE | `RESU 1`, `PS 1`, `PSBE 1 0` | §5.2.2 |
//! | ALL → RESBS/RESCS/RESPS at period `p` | `p` per `p` | §5.2.2.1 |
//! | hard → soft, continuous → basic, RESSH → RESNH → RESCH | same parameters | §5.2.2.2 |
//! | basic `x y` → RESCS | `x` per `2y − x + c` | Theorem 5.2 (Lemma 5.1) |
//! | continuous `x y` → PSBE | `PSBE x/y (x/y)(y − x)` | Theorem 5.4 (Lemma 5.2) |
//! | basic `x y` → PSBE | `PSBE x/y 2(x/y)(y − x)` | Theorem 5.5 (Lemma 5.3) |
//! | any reservation `x y` → PS | `PS x/y` | Theorem 5.6 |
//! | `PSBE s δ` → RESCS/RESBS at `y ≥ δ/s` | `(y·s − δ)` per `y` | Theorem 5.7 |
//!
//! When a target period is given ([`ConvertParams::period`]), soft targets
//! get the most the source promises in every window of that length — its
//! supply-bound function ([`crate::sbf`]); this generalizes Theorem 5.2 (at
//! `2y − x + c` it is at least `x`) and Theorem 5.7 (it *is* `y·s − δ`).
//! Hard targets keep their upper bound, so their period can only be scaled
//! by a whole number.
//!
//! What cannot be converted is refused with the reason: soft never becomes
//! hard (Theorem 5.3 for basic → continuous hard), nothing but ALL becomes
//! ALL or RESU, PS and NULL bound no window, and so on.
//!
//! [`satisfies`] answers the question the composition check asks: does a
//! received guarantee, rewritten, promise at least what was requested?
//! Requests are minimums: a thread asking for `RESBH 10 33` is satisfied by
//! `RESBH 10 33` or `RESBH 20 66`, not by `RESBS 10 33` (soft cannot become
//! hard).

use std::fmt;

use hsched_core::time::Duration;

use crate::parse::{Ms, Share};
use crate::rta::EPS;
use crate::sbf::Supply;
use crate::types::{ratio, Guarantee, GuaranteeKind, InvalidGuarantee};

use GuaranteeKind as K;

/// Table 5.2, row by row (from), columns (to) in the order of
/// [`GuaranteeKind::ALL_KINDS`]: `t` feasible, `f` impossible.
const TABLE: [&[u8; 12]; 12] = [
    b"ttftfttffttt", // ALL
    b"ftfffffffftt", // RESU
    b"ffttfttffttt", // RESBH
    b"ffftfttffttt", // RESBS
    b"fftttttffttt", // RESCH
    b"ffftfttffttt", // RESCS
    b"ffftfttffttt", // RESPS
    b"ffttttttfttt", // RESNH
    b"fftttttttttt", // RESSH
    b"ffftfttffttt", // PSBE
    b"fffffffffftt", // PS
    b"ffffffffffft", // NULL
];

/// One cell of Table 5.2.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cell {
    /// Whether a guarantee of the row's kind can be rewritten into one of
    /// the column's kind.
    pub feasible: bool,
    /// The theorem Table 5.2 cites for the cell, if any ("5.2").
    pub theorem: Option<&'static str>,
}

/// Table 5.2: whether `from` can be rewritten into `to`, with the theorem the
/// table cites.
pub fn table_5_2(from: GuaranteeKind, to: GuaranteeKind) -> Cell {
    let feasible = TABLE[from as usize][to as usize] == b't';
    let theorem = match (from, to) {
        (K::ResBH | K::ResBS | K::ResPS, K::ResCH) => Some("5.3"),
        (K::ResBH | K::ResBS | K::ResPS, K::ResCS) => Some("5.2"),
        (K::ResBH | K::ResBS | K::ResPS, K::Psbe) => Some("5.5"),
        (K::ResCH | K::ResCS | K::ResNH | K::ResSH, K::Psbe) => Some("5.4"),
        (f, K::Ps) if f.is_reservation() => Some("5.6"),
        (K::Psbe, K::ResBS | K::ResCS) => Some("5.7"),
        _ => None,
    };
    Cell { feasible, theorem }
}

/// Whether a guarantee of kind `from` can be rewritten into kind `to`
/// (Table 5.2).
pub fn can_convert(from: GuaranteeKind, to: GuaranteeKind) -> bool {
    table_5_2(from, to).feasible
}

/// A feasible rewrite rule and where it comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rule {
    /// Source kind.
    pub from: GuaranteeKind,
    /// Target kind.
    pub to: GuaranteeKind,
    /// Where the rule is justified ("Theorem 5.2", "§5.2.2.2").
    pub cite: &'static str,
    /// What it does, in words.
    pub summary: &'static str,
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} → {} ({}: {})",
            self.from, self.to, self.cite, self.summary
        )
    }
}

/// Why `from` cannot be rewritten into `to`, with the place in the
/// dissertation that says so.
fn impossibility(from: GuaranteeKind, to: GuaranteeKind) -> (&'static str, &'static str) {
    if from == K::Null {
        return (
            "NULL promises nothing, so it can only stay NULL",
            "§5.2.2.5",
        );
    }
    if to == K::All {
        return ("only ALL itself is the whole processor", "§5.2.2.1");
    }
    if from == K::Ps {
        return (
            "PS s bounds the share only over an unspecified interval, so no window of any length is guaranteed anything",
            "§5.3.2, converse of Theorem 5.6",
        );
    }
    if to == K::ResU {
        return (
            "RESU r must deliver r·(d[n+1] − d[n]) between any deadlines the child announces; only ALL or another RESU can",
            "§5.2.2.3",
        );
    }
    if from == K::ResU {
        return (
            "RESU r delivers its rate only between deadlines the child announces at run time, so no fixed window is guaranteed; put a deadline-driven scheduler (rez) under it",
            "§5.2.2.3, §5.3.1.5",
        );
    }
    if to.is_hard() && from == K::All {
        return (
            "a hard reservation also caps the VP at its amount and ALL has no cap; a rewrite cannot add one (use a reservation or limit scheduler)",
            "§5.2.2.2, §5.3.1.3",
        );
    }
    if to == K::ResCH && from.is_basic() {
        return (
            "a basic reservation becomes continuous only as a soft reservation (x per 2y − x, Theorem 5.2), and is hard continuous only when x = y",
            "Theorem 5.3",
        );
    }
    if to == K::ResSH {
        return (
            "a synchronized reservation starts its block at a time the thread chose; this guarantee lets the scheduler choose",
            "§5.2.2.2",
        );
    }
    if to == K::ResNH {
        return (
            "a non-preemptive reservation is one block at the same offset each period; this guarantee does not fix where its time falls",
            "§5.2.2.2",
        );
    }
    if to.is_hard() && !from.is_hard() {
        return (
            "a soft guarantee may give extra time, which a hard one forbids; a rewrite cannot add the upper limit (a limit scheduler can, §5.3.1.3)",
            "§5.2.2.2, Theorem 5.3",
        );
    }
    ("Table 5.2 has no rule for this pair", "Table 5.2")
}

fn feasible_rule(from: GuaranteeKind, to: GuaranteeKind) -> (&'static str, &'static str) {
    match (from, to) {
        (f, t) if f == t => ("definition", "the same kind (at a whole multiple of the period for reservations)"),
        (_, K::Null) => ("§5.3.1.6", "any guarantee can be weakened to best effort"),
        (K::All, K::ResU) => ("§5.2.2.3", "ALL is a uniformly slower processor of rate 1"),
        (K::All, K::Psbe) => ("§5.2.2.4", "ALL is PSBE 1 0"),
        (K::All, K::Ps) => ("§5.2.2.4", "ALL is PS 1"),
        (K::All, _) => ("§5.2.2.1", "ALL fills every window, so it is p per p for any period p"),
        (K::ResU, K::Ps) => ("§5.2.2.3", "RESU r delivers the share r in the long run"),
        (f, K::ResCS) if f.is_basic() => ("Theorem 5.2", "basic x/y is continuous soft x per 2y − x + c (Lemma 5.1)"),
        (f, K::Psbe) if f.is_basic() => ("Theorem 5.5", "basic x/y is PSBE x/y 2(x/y)(y − x) (Lemma 5.3)"),
        (f, K::Psbe) if f.is_continuous() => ("Theorem 5.4", "continuous x/y is PSBE x/y (x/y)(y − x) (Lemma 5.2)"),
        (f, K::Ps) if f.is_reservation() => ("Theorem 5.6", "any reservation x/y is PS x/y"),
        (K::Psbe, K::ResCS | K::ResBS) => ("Theorem 5.7", "PSBE s δ is a soft reservation of y·s − δ per y, for y ≥ δ/s"),
        (K::Psbe, K::ResPS) => (
            "Theorem 5.7, §6.2.2",
            "PSBE s δ is a soft basic reservation, hence a probabilistic one without overrun partition",
        ),
        (K::Psbe, K::Ps) => ("§5.2.2.4", "PSBE s δ guarantees the share s in the long run"),
        (_, K::ResPS) => (
            "§6.2.2",
            "a soft basic reservation is a probabilistic one without an overrun partition",
        ),
        (K::ResSH, K::ResNH) => ("§5.2.2.2", "a synchronized reservation is non-preemptive"),
        (K::ResSH | K::ResNH, K::ResCH | K::ResCS) => ("§5.2.2.2", "non-preemptive reservations are implicitly continuous"),
        (f, t) if f.is_hard() && t == f.softened() => ("§5.2.2.2", "a hard reservation is also soft"),
        (f, t) if f.is_continuous() && t.is_basic() => (
            "§5.2.2.2, Fig 5.1",
            "a continuous reservation is also a basic one with the same parameters",
        ),
        _ => ("§5.2.2.2", "the target promises less than the source"),
    }
}

/// The rewrite rule from `from` to `to`.
///
/// # Errors
/// [`ConversionError::Impossible`] with the reason, where Table 5.2 says `f`.
pub fn rule(from: GuaranteeKind, to: GuaranteeKind) -> Result<Rule, ConversionError> {
    if can_convert(from, to) {
        let (cite, summary) = feasible_rule(from, to);
        Ok(Rule {
            from,
            to,
            cite,
            summary,
        })
    } else {
        let (reason, cite) = impossibility(from, to);
        Err(ConversionError::Impossible {
            from,
            to,
            reason,
            cite,
        })
    }
}

/// Free parameters of a conversion.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ConvertParams {
    /// Period of the target reservation. When `None`: the source's period,
    /// or `2y − x + slack` for Theorem 5.2; ALL and PSBE sources need one.
    pub period: Option<Duration>,
    /// The `c ≥ 0` of Theorem 5.2, used when no period is given.
    pub slack: Duration,
}

impl ConvertParams {
    /// Parameters asking for a target period.
    pub const fn period(period: Duration) -> ConvertParams {
        ConvertParams {
            period: Some(period),
            slack: Duration::ZERO,
        }
    }
}

/// A conversion that cannot be made.
#[derive(Clone, Debug, PartialEq)]
pub enum ConversionError {
    /// Table 5.2 says no.
    Impossible {
        /// Source kind.
        from: GuaranteeKind,
        /// Target kind.
        to: GuaranteeKind,
        /// Why, in words.
        reason: &'static str,
        /// Where the dissertation says so.
        cite: &'static str,
    },
    /// The rule needs a target period (ALL → reservation, Theorem 5.7).
    NeedsPeriod {
        /// Source.
        from: Guarantee,
        /// Target kind.
        to: GuaranteeKind,
        /// The rule.
        cite: &'static str,
    },
    /// The target period is too short for the source to promise anything in
    /// it.
    PeriodTooShort {
        /// Source.
        from: Guarantee,
        /// Target kind.
        to: GuaranteeKind,
        /// The period asked for.
        period: Duration,
        /// The period must be longer than this (the source's longest gap).
        min: Duration,
        /// The rule.
        cite: &'static str,
    },
    /// A hard or non-preemptive target whose period is not a whole multiple
    /// of (or, for RESNH and RESSH, equal to) the source's.
    PeriodNotMultiple {
        /// Source.
        from: Guarantee,
        /// Target kind.
        to: GuaranteeKind,
        /// The period asked for.
        period: Duration,
    },
    /// The source guarantee itself is invalid.
    Invalid(InvalidGuarantee),
    /// The resulting period would not fit in 64-bit nanoseconds.
    TooLong {
        /// Source.
        from: Guarantee,
        /// Target kind.
        to: GuaranteeKind,
    },
}

impl fmt::Display for ConversionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConversionError::Impossible { from, to, reason, cite } => {
                write!(f, "{from} cannot become {to}: {reason} ({cite})")
            }
            ConversionError::NeedsPeriod { from, to, cite } => {
                write!(f, "{from} → {to} needs a target period ({cite})")
            }
            ConversionError::PeriodTooShort { from, to, period, min, cite } => write!(
                f,
                "{from} → {to} at period {}: {from} may give nothing for {}, so the period must be longer than that ({cite})",
                Ms(*period),
                Ms(*min)
            ),
            ConversionError::PeriodNotMultiple { from, to, period } => {
                let (_, y) = from.amount_period().unwrap_or_default();
                if matches!(to, K::ResNH | K::ResSH) {
                    write!(
                        f,
                        "{from} → {to} at period {}: a non-preemptive block keeps its period {} (§5.2.2.2)",
                        Ms(*period),
                        Ms(y)
                    )
                } else {
                    write!(
                        f,
                        "{from} → {to} at period {}: a hard reservation keeps its upper bound only at a whole multiple of {} (§5.2.2.2)",
                        Ms(*period),
                        Ms(y)
                    )
                }
            }
            ConversionError::Invalid(e) => write!(f, "invalid source guarantee: {e}"),
            ConversionError::TooLong { from, to } => {
                write!(f, "{from} → {to}: the resulting period is longer than 584 years")
            }
        }
    }
}

impl std::error::Error for ConversionError {}

/// `x·(y − x)/y`, rounded up (a larger error bound is the safe side).
fn lag(amount: Duration, period: Duration) -> Duration {
    let (x, y) = (u128::from(amount.as_nanos()), u128::from(period.as_nanos()));
    if y == 0 {
        return Duration::ZERO;
    }
    Duration::from_nanos((x * (y - x)).div_ceil(y) as u64)
}

/// Rewrites `from` into a guarantee of kind `to` (Table 5.2 and the
/// theorems of §5.3.2; see the module table for each rule).
///
/// * Theorem 5.2: `RESBS x y` / `RESBH x y` / `RESPS x y z` → `RESCS x
///   (2y − x + c)` with `c = params.slack` when no period is given.
/// * Theorem 5.4: continuous `x y` → `PSBE x/y (x/y)(y − x)`.
/// * Theorem 5.5: basic `x y` → `PSBE x/y 2(x/y)(y − x)`.
/// * Theorem 5.6: any reservation `x y` → `PS x/y`.
/// * Theorem 5.7: `PSBE s δ` → `RESCS (ys − δ) y` or `RESBS (ys − δ) y`
///   for the period `y = params.period`, which must exceed `δ/s`.
///
/// With `params.period = Some(p)` a reservation target gets the largest
/// amount the source guarantees for period `p`: `k·x` when `p = k·y` for a
/// reservation source (basic periods nest), else (soft targets only) the
/// source's supply bound `sbf(p)`. Error bounds are rounded up and amounts
/// down to the nanosecond, so results never promise more than the theorems.
///
/// # Errors
/// [`ConversionError`] explains an impossible pair (Table 5.2), a missing
/// or too-short period, or a hard period that is not a whole multiple.
pub fn convert(
    from: &Guarantee,
    to: GuaranteeKind,
    params: &ConvertParams,
) -> Result<Guarantee, ConversionError> {
    from.validate().map_err(ConversionError::Invalid)?;
    let fk = from.kind();
    rule(fk, to)?;
    if fk == to && (params.period.is_none() || !to.is_reservation()) {
        return Ok(*from);
    }
    match to {
        K::Null => Ok(Guarantee::Null),
        K::All => Ok(Guarantee::All),
        K::ResU => Ok(match *from {
            Guarantee::All => Guarantee::ResU { rate: 1.0 },
            g => g,
        }),
        K::Ps => Ok(Guarantee::Ps { share: from.rate() }),
        K::Psbe => Ok(match *from {
            Guarantee::All => Guarantee::Psbe {
                share: 1.0,
                error: Duration::ZERO,
            },
            Guarantee::Psbe { .. } => *from,
            _ => {
                // Reservations (the table admits no other source).
                let (x, y) = from.amount_period().ok_or(ConversionError::Impossible {
                    from: fk,
                    to,
                    reason: "not a reservation",
                    cite: "Table 5.2",
                })?;
                let d = lag(x, y);
                let error = if fk.is_basic() { d + d } else { d };
                Guarantee::Psbe {
                    share: ratio(x, y),
                    error,
                }
            }
        }),
        _ => reservation_target(from, to, params),
    }
    .and_then(|g| match g.validate() {
        Ok(()) => Ok(g),
        Err(e) => Err(ConversionError::Invalid(e)),
    })
}

fn build(to: GuaranteeKind, amount: Duration, period: Duration, from: &Guarantee) -> Guarantee {
    match to {
        K::ResBH => Guarantee::ResBH { amount, period },
        K::ResBS => Guarantee::ResBS { amount, period },
        K::ResCH => Guarantee::ResCH { amount, period },
        K::ResCS => Guarantee::ResCS { amount, period },
        K::ResNH => Guarantee::ResNH { amount, period },
        K::ResPS => Guarantee::ResPS {
            amount,
            period,
            overrun: match *from {
                Guarantee::ResPS { overrun, .. } => overrun,
                _ => Duration::ZERO,
            },
        },
        K::ResSH => Guarantee::ResSH {
            amount,
            period,
            sync: match *from {
                Guarantee::ResSH { sync, .. } => sync,
                _ => Duration::ZERO,
            },
        },
        _ => Guarantee::Null,
    }
}

fn reservation_target(
    from: &Guarantee,
    to: GuaranteeKind,
    params: &ConvertParams,
) -> Result<Guarantee, ConversionError> {
    let cite = feasible_rule(from.kind(), to).0;
    let supply = Supply::of(from);
    let too_short = |period: Duration| ConversionError::PeriodTooShort {
        from: *from,
        to,
        period,
        min: from.max_gap().unwrap_or(period),
        cite,
    };
    match *from {
        Guarantee::All => {
            let p = params.period.ok_or(ConversionError::NeedsPeriod {
                from: *from,
                to,
                cite,
            })?;
            if p.as_nanos() == 0 {
                return Err(too_short(p));
            }
            Ok(build(to, p, p, from))
        }
        Guarantee::Psbe { .. } => {
            let p = params.period.ok_or(ConversionError::NeedsPeriod {
                from: *from,
                to,
                cite,
            })?;
            let amount = supply.sbf(p);
            if amount.as_nanos() == 0 {
                return Err(too_short(p));
            }
            Ok(build(to, amount, p, from))
        }
        _ => {
            let Some((x, y)) = from.amount_period() else {
                let (reason, cite) = impossibility(from.kind(), to);
                return Err(ConversionError::Impossible {
                    from: from.kind(),
                    to,
                    reason,
                    cite,
                });
            };
            if to.is_hard() {
                let p = params.period.unwrap_or(y);
                let fixed = matches!(to, K::ResNH | K::ResSH);
                if p.as_nanos() == 0
                    || !p.as_nanos().is_multiple_of(y.as_nanos())
                    || (fixed && p != y)
                {
                    return Err(ConversionError::PeriodNotMultiple {
                        from: *from,
                        to,
                        period: p,
                    });
                }
                let k = p.as_nanos() / y.as_nanos();
                return Ok(build(to, x.mul_div(k, 1), p, from));
            }
            if to == K::ResCS {
                let (amount, p) = match params.period {
                    Some(p) => (supply.sbf(p), p),
                    // Theorem 5.2 exactly, or the source's own period.
                    None if from.kind().is_basic() => {
                        let p = y
                            .as_nanos()
                            .checked_add((y - x).as_nanos())
                            .and_then(|p| p.checked_add(params.slack.as_nanos()))
                            .ok_or(ConversionError::TooLong { from: *from, to })?;
                        (x, Duration::from_nanos(p))
                    }
                    None => (x, y),
                };
                if amount.as_nanos() == 0 {
                    return Err(too_short(p));
                }
                return Ok(build(to, amount, p, from));
            }
            // Soft basic targets (RESBS, RESPS).
            let p = params.period.unwrap_or(y);
            if p.as_nanos() == 0 {
                return Err(too_short(p));
            }
            let mut amount = supply.sbf(p);
            if p.as_nanos().is_multiple_of(y.as_nanos()) {
                amount = amount.max(x.mul_div(p.as_nanos() / y.as_nanos(), 1));
            }
            if amount.as_nanos() == 0 {
                return Err(too_short(p));
            }
            Ok(build(to, amount, p, from))
        }
    }
}

/// How a received guarantee satisfies a requested one.
#[derive(Clone, Debug, PartialEq)]
pub struct Satisfaction {
    /// The received guarantee rewritten into the requested kind.
    pub via: Guarantee,
    /// The rule used.
    pub rule: Rule,
}

/// Why a received guarantee does not satisfy a requested one.
#[derive(Clone, Debug, PartialEq)]
pub struct Unsatisfied {
    /// What was received.
    pub received: Guarantee,
    /// What was requested.
    pub required: Guarantee,
    /// Why not, in words.
    pub reason: String,
}

impl fmt::Display for Unsatisfied {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} does not provide {}: {}",
            self.received, self.required, self.reason
        )
    }
}

impl std::error::Error for Unsatisfied {}

/// Whether `received`, rewritten by the rules of Table 5.2, promises at
/// least `required`: the same kind with at least the amount at the
/// requested period (or a larger share and no larger relative error).
///
/// # Errors
/// [`Unsatisfied`] with the reason: an impossible conversion (citing the
/// theorem), or the amount or share that falls short.
pub fn satisfies(received: &Guarantee, required: &Guarantee) -> Result<Satisfaction, Unsatisfied> {
    let fail = |reason: String| Unsatisfied {
        received: *received,
        required: *required,
        reason,
    };
    if let Err(e) = received.validate() {
        return Err(fail(format!("it is invalid: {e}")));
    }
    if let Err(e) = required.validate() {
        return Err(fail(format!("the request is invalid: {e}")));
    }
    let to = required.kind();
    let rule = match rule(received.kind(), to) {
        Ok(r) => r,
        Err(ConversionError::Impossible { reason, cite, .. }) => {
            return Err(fail(format!(
                "{} cannot become {to}: {reason} ({cite})",
                received.kind()
            )))
        }
        Err(e) => return Err(fail(e.to_string())),
    };
    let params = match required.amount_period() {
        Some((_, p)) => ConvertParams::period(p),
        None => ConvertParams::default(),
    };
    let via = convert(received, to, &params).map_err(|e| fail(e.to_string()))?;
    let ok = |via: Guarantee| Ok(Satisfaction { via, rule });
    match (*required, via) {
        (Guarantee::Null, _) | (Guarantee::All, _) => ok(via),
        (Guarantee::ResU { rate: want }, _) | (Guarantee::Ps { share: want }, _) => {
            if via.rate() + EPS >= want {
                ok(via)
            } else {
                Err(fail(format!(
                    "it amounts to {via}, a share of {} below {}",
                    Share(via.rate()),
                    Share(want)
                )))
            }
        }
        (
            Guarantee::Psbe {
                share: s2,
                error: d2,
            },
            Guarantee::Psbe { share: s, error: d },
        ) => {
            // max(0, s·t − δ) ≥ max(0, s'·t − δ') for all t iff s ≥ s' and δ ≤ δ'·s/s'.
            let allowed = d2.as_nanos() as f64 * s / s2;
            if s + EPS < s2 {
                Err(fail(format!(
                    "it amounts to {via}, a share of {} below {}",
                    Share(s),
                    Share(s2)
                )))
            } else if d.as_nanos() as f64 > allowed + 1.0 {
                Err(fail(format!(
                    "it amounts to {via}, which may fall {} ms behind where {required} allows {} ms",
                    Ms(d),
                    Ms(Duration::from_nanos(allowed as u64))
                )))
            } else {
                ok(via)
            }
        }
        (req, got) => {
            let (Some((want, period)), Some((have, _))) =
                (req.amount_period(), got.amount_period())
            else {
                return Err(fail(format!("it amounts to {via}")));
            };
            if have < want {
                return Err(fail(format!(
                    "it amounts to {via}: {} per {} where {} is requested",
                    Ms(have),
                    Ms(period),
                    Ms(want)
                )));
            }
            match (req, got) {
                (Guarantee::ResPS { overrun: z2, .. }, Guarantee::ResPS { overrun: z, .. })
                    if have + z < want + z2 =>
                {
                    Err(fail(format!(
                        "it amounts to {via}: at most {} per {} is likely where {} is requested",
                        Ms(have + z),
                        Ms(period),
                        Ms(want + z2)
                    )))
                }
                (Guarantee::ResSH { sync: s2, .. }, Guarantee::ResSH { sync: s, .. })
                    if s.as_nanos() % period.as_nanos() != s2.as_nanos() % period.as_nanos() =>
                {
                    Err(fail(format!(
                        "it is synchronized to {} ms, not {} ms (mod {})",
                        Ms(s),
                        Ms(s2),
                        Ms(period)
                    )))
                }
                _ => ok(via),
            }
        }
    }
}

/// Theorem 5.7 solved for the share: the `s` a PSBE guarantee with error
/// `δ` needs so that it converts into a reservation of `amount` per
/// `period`, `s = (x + δ)/y` (§5.3.3.2: 5 ms / 33 ms from EEVDF with a
/// 10 ms quantum needs `s = 15/33 ≈ 0.45`).
pub fn psbe_share_for(amount: Duration, period: Duration, error: Duration) -> f64 {
    ratio(amount + error, period)
}

/// Theorem 5.7 solved for the error: the largest `δ` with which `PSBE s δ`
/// still converts into `amount` per `period`, `δ = y·s − x`; `None` when the
/// share is too small even with no error (§5.3.3.2: `s = 1.1·5/33` allows a
/// quantum of 0.5 ms).
pub fn psbe_error_for(amount: Duration, period: Duration, share: f64) -> Option<Duration> {
    let d = period.as_nanos() as f64 * share - amount.as_nanos() as f64;
    (d >= 0.0).then(|| Duration::from_nanos(d.floor() as u64))
}

/// The shortest period `y` at which the reservation Theorem 5.7 derives from
/// `PSBE s δ`, `(y·s − δ)/y`, is within `pessimism` (a fraction, 0.1 for 10%)
/// of the share `s`: `y = δ / (s·pessimism)` (§5.3.3.1: PSBE 0.25 75 needs
/// 3 s for 10%).
pub fn period_for_pessimism(share: f64, error: Duration, pessimism: f64) -> Option<Duration> {
    let y = error.as_nanos() as f64 / (share * pessimism);
    (y.is_finite() && y >= 0.0).then(|| Duration::from_nanos(y.ceil() as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn g(s: &str) -> Guarantee {
        s.parse().unwrap_or_else(|e| panic!("{s}: {e}"))
    }
    fn ms(v: f64) -> Duration {
        Duration::from_millis_f64(v)
    }
    fn conv(
        from: &str,
        to: GuaranteeKind,
        period: Option<f64>,
    ) -> Result<Guarantee, ConversionError> {
        let params = ConvertParams {
            period: period.map(ms),
            slack: Duration::ZERO,
        };
        convert(&g(from), to, &params)
    }

    #[test]
    fn the_table_as_printed() {
        // Rows of Table 5.2 in the dissertation, read left to right.
        let rows = [
            "t t f t f t t f f t t t",
            "f t f f f f f f f f t t",
            "f f t t f t t f f t t t",
            "f f f t f t t f f t t t",
            "f f t t t t t f f t t t",
            "f f f t f t t f f t t t",
            "f f f t f t t f f t t t",
            "f f t t t t t t f t t t",
            "f f t t t t t t t t t t",
            "f f f t f t t f f t t t",
            "f f f f f f f f f f t t",
            "f f f f f f f f f f f t",
        ];
        for (i, row) in rows.iter().enumerate() {
            let cells: Vec<bool> = row.split(' ').map(|c| c == "t").collect();
            for (j, &want) in cells.iter().enumerate() {
                let (from, to) = (GuaranteeKind::ALL_KINDS[i], GuaranteeKind::ALL_KINDS[j]);
                assert_eq!(can_convert(from, to), want, "{from} → {to}");
                assert_eq!(rule(from, to).is_ok(), want);
            }
        }
        assert_eq!(table_5_2(K::ResBS, K::ResCS).theorem, Some("5.2"));
        assert_eq!(table_5_2(K::ResBH, K::ResCH).theorem, Some("5.3"));
        assert_eq!(table_5_2(K::ResCS, K::Psbe).theorem, Some("5.4"));
        assert_eq!(table_5_2(K::ResPS, K::Psbe).theorem, Some("5.5"));
        assert_eq!(table_5_2(K::ResNH, K::Ps).theorem, Some("5.6"));
        assert_eq!(table_5_2(K::Psbe, K::ResBS).theorem, Some("5.7"));
    }

    #[test]
    fn theorem_5_2_period_is_2y_minus_x_plus_c() {
        assert_eq!(conv("RESBS 3 8", K::ResCS, None).unwrap(), g("RESCS 3 13"));
        assert_eq!(
            conv("RESBH 10 20", K::ResCS, None).unwrap(),
            g("RESCS 10 30")
        );
        let with_c = convert(
            &g("RESBS 3 8"),
            K::ResCS,
            &ConvertParams {
                period: None,
                slack: ms(2.0),
            },
        )
        .unwrap();
        assert_eq!(with_c, g("RESCS 3 15"));
        // Asking for the period directly gives the supply bound, never less.
        assert_eq!(
            conv("RESBS 3 8", K::ResCS, Some(13.0)).unwrap(),
            g("RESCS 3 13")
        );
        assert_eq!(
            conv("RESBS 3 8", K::ResCS, Some(21.0)).unwrap(),
            g("RESCS 6 21")
        );
        // Shorter than the 2(y − x) gap: nothing is promised.
        let e = conv("RESBS 3 8", K::ResCS, Some(10.0)).unwrap_err();
        assert!(
            matches!(e, ConversionError::PeriodTooShort { min, .. } if min == ms(10.0)),
            "{e}"
        );
    }

    #[test]
    fn theorem_5_3_soft_or_basic_cannot_become_continuous_hard() {
        for from in ["RESBS 3 8", "RESBH 3 8", "RESPS 3 8 1"] {
            let e = conv(from, K::ResCH, None).unwrap_err();
            assert!(e.to_string().contains("Theorem 5.3"), "{e}");
        }
        let e = conv("RESCS 3 8", K::ResCH, None).unwrap_err();
        assert!(
            e.to_string().contains("soft guarantee may give extra time"),
            "{e}"
        );
        let e = conv("PSBE 0.5 5", K::ResBH, Some(20.0)).unwrap_err();
        assert!(matches!(e, ConversionError::Impossible { .. }));
    }

    #[test]
    fn theorems_5_4_and_5_5_give_psbe() {
        assert_eq!(conv("RESCS 10 20", K::Psbe, None).unwrap(), g("PSBE 0.5 5"));
        assert_eq!(conv("RESCH 10 20", K::Psbe, None).unwrap(), g("PSBE 0.5 5"));
        assert_eq!(
            conv("RESBS 10 20", K::Psbe, None).unwrap(),
            g("PSBE 0.5 10")
        );
        assert_eq!(
            conv("RESNH 1 4", K::Psbe, None).unwrap(),
            g("PSBE 0.25 0.75")
        );
        assert_eq!(conv("ALL", K::Psbe, None).unwrap(), g("PSBE 1 0"));
    }

    #[test]
    fn theorem_5_6_any_reservation_is_ps() {
        for from in [
            "RESBH 1 4",
            "RESBS 1 4",
            "RESCH 1 4",
            "RESCS 1 4",
            "RESPS 1 4 2",
            "RESNH 1 4",
            "RESSH 1 4 0",
        ] {
            assert_eq!(conv(from, K::Ps, None).unwrap(), g("PS 0.25"), "{from}");
        }
        let e = conv("PS 0.5", K::Psbe, None).unwrap_err();
        assert!(e.to_string().contains("unspecified interval"), "{e}");
    }

    #[test]
    fn theorem_5_7_psbe_to_soft_reservations() {
        assert_eq!(
            conv("PSBE 0.25 75", K::ResCS, Some(400.0)).unwrap(),
            g("RESCS 25 400")
        );
        assert_eq!(
            conv("PSBE 0.25 75", K::ResBS, Some(400.0)).unwrap(),
            g("RESBS 25 400")
        );
        assert!(matches!(
            conv("PSBE 0.25 75", K::ResCS, None),
            Err(ConversionError::NeedsPeriod { .. })
        ));
        let e = conv("PSBE 0.25 75", K::ResCS, Some(300.0)).unwrap_err();
        assert!(
            matches!(e, ConversionError::PeriodTooShort { min, .. } if min == ms(300.0)),
            "{e}"
        );
    }

    #[test]
    fn hard_periods_scale_by_whole_multiples() {
        assert_eq!(
            conv("RESBH 2 10", K::ResBH, Some(30.0)).unwrap(),
            g("RESBH 6 30")
        );
        assert_eq!(
            conv("RESCH 2 10", K::ResBH, Some(20.0)).unwrap(),
            g("RESBH 4 20")
        );
        assert!(matches!(
            conv("RESBH 2 10", K::ResBH, Some(25.0)),
            Err(ConversionError::PeriodNotMultiple { .. })
        ));
        assert!(matches!(
            conv("RESNH 2 10", K::ResNH, Some(20.0)),
            Err(ConversionError::PeriodNotMultiple { .. })
        ));
        assert_eq!(
            conv("RESSH 2 10 3", K::ResNH, None).unwrap(),
            g("RESNH 2 10")
        );
        assert_eq!(
            conv("RESSH 2 10 3", K::ResSH, Some(10.0)).unwrap(),
            g("RESSH 2 10 3")
        );
        // Soft basic targets combine nesting and the supply bound.
        assert_eq!(
            conv("RESBS 2 10", K::ResBS, Some(20.0)).unwrap(),
            g("RESBS 4 20")
        );
        assert_eq!(
            conv("RESBS 2 10", K::ResBS, Some(25.0)).unwrap(),
            g("RESBS 2 25")
        );
        assert_eq!(
            conv("RESBS 2 10", K::ResBS, Some(27.0)).unwrap(),
            g("RESBS 3 27")
        );
    }

    #[test]
    fn everything_else_in_the_table() {
        assert_eq!(conv("ALL", K::ResU, None).unwrap(), g("RESU 1"));
        assert_eq!(conv("ALL", K::ResBS, Some(7.0)).unwrap(), g("RESBS 7 7"));
        assert!(matches!(
            conv("ALL", K::ResBS, None),
            Err(ConversionError::NeedsPeriod { .. })
        ));
        let e = conv("ALL", K::ResBH, Some(7.0)).unwrap_err();
        assert!(e.to_string().contains("caps the VP"), "{e}");
        assert_eq!(conv("RESU 0.5", K::Ps, None).unwrap(), g("PS 0.5"));
        assert!(conv("RESU 0.5", K::ResBS, Some(10.0))
            .unwrap_err()
            .to_string()
            .contains("deadline-driven"));
        assert_eq!(conv("RESBH 3 9", K::ResPS, None).unwrap(), g("RESPS 3 9 0"));
        assert_eq!(conv("RESPS 3 9 4", K::ResBS, None).unwrap(), g("RESBS 3 9"));
        assert_eq!(conv("RESCH 3 9", K::ResBH, None).unwrap(), g("RESBH 3 9"));
        assert_eq!(conv("RESNH 3 9", K::ResCS, None).unwrap(), g("RESCS 3 9"));
        assert_eq!(conv("PSBE 0.5 5", K::Ps, None).unwrap(), g("PS 0.5"));
        assert_eq!(conv("NULL", K::Null, None).unwrap(), g("NULL"));
        assert!(conv("NULL", K::Ps, None)
            .unwrap_err()
            .to_string()
            .contains("NULL promises nothing"));
        assert!(conv("RESBS 1 2", K::All, None).is_err());
        assert!(conv("RESBS 1 2", K::ResNH, None)
            .unwrap_err()
            .to_string()
            .contains("one block"));
        assert!(conv("RESNH 1 2", K::ResSH, None)
            .unwrap_err()
            .to_string()
            .contains("synchronized"));
        let bad = Guarantee::ResBS {
            amount: ms(3.0),
            period: ms(2.0),
        };
        assert!(matches!(
            convert(&bad, K::Ps, &ConvertParams::default()),
            Err(ConversionError::Invalid(_))
        ));
    }

    #[test]
    fn satisfaction() {
        let ok = |r: &str, q: &str| satisfies(&g(r), &g(q)).is_ok();
        assert!(ok("RESBH 10 33", "RESBH 10 33"));
        assert!(ok("RESBH 10 33", "RESBS 10 33"));
        assert!(ok("RESBH 10 33", "RESBH 20 66"));
        assert!(ok("RESBH 10 20", "RESCS 10 30")); // Theorem 5.2
        assert!(!ok("RESBH 10 20", "RESCS 10 29"));
        assert!(ok("ALL", "RESCS 5 33"));
        assert!(ok("PSBE 0.5 10", "PSBE 0.25 10"));
        assert!(!ok("PSBE 0.5 10", "PSBE 0.5 5"));
        assert!(ok("PSBE 0.5 10", "PSBE 0.4 8")); // 10 ≤ 8·0.5/0.4
        assert!(!ok("PSBE 0.5 10", "PSBE 0.4 7.9"));
        assert!(ok("RESBS 5 33", "RESPS 5 33 0"));
        assert!(!ok("RESBS 5 33", "RESPS 5 33 10"));
        assert!(ok("RESBS 15 33", "RESPS 5 33 10"));
        assert!(ok("RESPS 5 33 10", "RESPS 5 33 10"));
        assert!(!ok("RESSH 1 10 2", "RESSH 1 10 3"));
        assert!(ok("RESSH 1 10 2", "RESSH 1 10 12"));
        assert!(ok(
            "anything is fine for NULL"
                .split(' ')
                .next()
                .map(|_| "PS 0.1")
                .unwrap(),
            "NULL"
        ));
        let e = satisfies(&g("RESBS 10 33"), &g("RESBH 10 33")).unwrap_err();
        assert!(
            e.reason.contains("soft guarantee may give extra time"),
            "{e}"
        );
        let e = satisfies(&g("RESBH 5 33"), &g("RESBH 10 33")).unwrap_err();
        assert!(e.reason.contains("5 per 33 where 10 is requested"), "{e}");
    }

    #[test]
    fn section_5_3_3_helpers() {
        // §5.3.3.2 (EEVDF): 5 ms / 33 ms with a 10 ms quantum needs 45%.
        let s = psbe_share_for(ms(5.0), ms(33.0), ms(10.0));
        assert!((s - 15.0 / 33.0).abs() < 1e-12 && (s - 0.45).abs() < 0.005);
        // …and 10% pessimism needs a 0.5 ms quantum.
        let d = psbe_error_for(ms(5.0), ms(33.0), 1.1 * 5.0 / 33.0).unwrap();
        assert!((d.as_millis_f64() - 0.5).abs() < 1e-6, "{d}");
        assert_eq!(psbe_error_for(ms(5.0), ms(33.0), 0.1), None);
        // §5.3.3.1: PSBE 0.25 75 needs a 3000 ms period for 10% pessimism.
        assert_eq!(period_for_pessimism(0.25, ms(75.0), 0.1), Some(ms(3000.0)));
    }
}
