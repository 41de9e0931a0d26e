//! Guarantee types (Regehr 2001, §5.2).
//!
//! A guarantee is a contract between a scheduler and a virtual processor about
//! the CPU time the VP receives while the guarantee is in force (§5.1.1). The
//! kinds are those of §5.2.2:
//!
//! | kind | parameters | promise |
//! |---|---|---|
//! | `ALL` | — | the whole processor (given to the root by the OS, §5.2.2.1) |
//! | `RESU r` | rate | a uniformly slower processor: `r·(d[n+1]−d[n])` between any two consecutive deadlines the child announces (§5.2.2.3) |
//! | `RESBH x y` / `RESBS x y` | amount, period | basic reservation: the scheduler picks `t`; every `[t+iy, t+(i+1)y]` holds `x` (hard: and no more) |
//! | `RESCH x y` / `RESCS x y` | amount, period | continuous reservation: every window of length `y` holds `x` |
//! | `RESPS x y z` | amount, period, overrun | probabilistic soft reservation: a basic soft `x/y` plus a *chance* of extra time from an overrun partition of size `z` (§6.2.2); only `x/y` is guaranteed |
//! | `RESNH x y` | amount, period | non-preemptive: one block of `x` at the same offset each period |
//! | `RESSH x y z` | amount, period, sync | synchronized: the block of `x` starts at `z + iy`, a time the thread chose |
//! | `PSBE s δ` | share, error | any window of length `t` holds at least `s·t − δ` (§5.2.2.4, Eq 5.1) |
//! | `PS s` | share | asymptotic share `s` over an unspecified interval |
//! | `NULL` | — | best effort: nothing (§5.2.2.5) |
//!
//! Utilizations (`r`, `s`) are absolute fractions of one processor (§5.2.1).
//! Times are [`Duration`]s in nanoseconds; in text, bare numbers are
//! milliseconds (see [`crate::parse`]).

use std::fmt;

use hsched_core::time::Duration;

/// The kind of a guarantee, without its parameters. The order is the order
/// of the rows and columns of Table 5.2.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum GuaranteeKind {
    /// `ALL`: the whole processor.
    All,
    /// `RESU r`: a uniformly slower processor.
    ResU,
    /// `RESBH x y`: basic, hard reservation.
    ResBH,
    /// `RESBS x y`: basic, soft reservation.
    ResBS,
    /// `RESCH x y`: continuous, hard reservation.
    ResCH,
    /// `RESCS x y`: continuous, soft reservation.
    ResCS,
    /// `RESPS x y z`: probabilistic (soft, basic) reservation.
    ResPS,
    /// `RESNH x y`: non-preemptive, hard reservation.
    ResNH,
    /// `RESSH x y z`: synchronized, hard reservation.
    ResSH,
    /// `PSBE s δ`: proportional share with bounded error.
    Psbe,
    /// `PS s`: proportional share without a bound.
    Ps,
    /// `NULL`: best effort.
    Null,
}

impl GuaranteeKind {
    /// Every kind, in the order of Table 5.2.
    pub const ALL_KINDS: [GuaranteeKind; 12] = [
        GuaranteeKind::All,
        GuaranteeKind::ResU,
        GuaranteeKind::ResBH,
        GuaranteeKind::ResBS,
        GuaranteeKind::ResCH,
        GuaranteeKind::ResCS,
        GuaranteeKind::ResPS,
        GuaranteeKind::ResNH,
        GuaranteeKind::ResSH,
        GuaranteeKind::Psbe,
        GuaranteeKind::Ps,
        GuaranteeKind::Null,
    ];

    /// The name in the dissertation's syntax (`RESBS`).
    pub const fn name(self) -> &'static str {
        match self {
            GuaranteeKind::All => "ALL",
            GuaranteeKind::ResU => "RESU",
            GuaranteeKind::ResBH => "RESBH",
            GuaranteeKind::ResBS => "RESBS",
            GuaranteeKind::ResCH => "RESCH",
            GuaranteeKind::ResCS => "RESCS",
            GuaranteeKind::ResPS => "RESPS",
            GuaranteeKind::ResNH => "RESNH",
            GuaranteeKind::ResSH => "RESSH",
            GuaranteeKind::Psbe => "PSBE",
            GuaranteeKind::Ps => "PS",
            GuaranteeKind::Null => "NULL",
        }
    }

    /// The kind named `name`, ignoring ASCII case.
    pub fn from_name(name: &str) -> Option<GuaranteeKind> {
        GuaranteeKind::ALL_KINDS
            .into_iter()
            .find(|k| k.name().eq_ignore_ascii_case(name))
    }

    /// Names of the parameters, in order (`["amount", "period"]`).
    pub const fn param_names(self) -> &'static [&'static str] {
        match self {
            GuaranteeKind::All | GuaranteeKind::Null => &[],
            GuaranteeKind::ResU => &["rate"],
            GuaranteeKind::ResBH
            | GuaranteeKind::ResBS
            | GuaranteeKind::ResCH
            | GuaranteeKind::ResCS
            | GuaranteeKind::ResNH => &["amount", "period"],
            GuaranteeKind::ResPS => &["amount", "period", "overrun"],
            GuaranteeKind::ResSH => &["amount", "period", "sync"],
            GuaranteeKind::Psbe => &["share", "error"],
            GuaranteeKind::Ps => &["share"],
        }
    }

    /// A one-line description for messages and help.
    pub const fn description(self) -> &'static str {
        match self {
            GuaranteeKind::All => "the whole processor",
            GuaranteeKind::ResU => "a uniformly slower processor of rate r",
            GuaranteeKind::ResBH => "a basic, hard reservation of x every y",
            GuaranteeKind::ResBS => "a basic, soft reservation of x every y",
            GuaranteeKind::ResCH => "a continuous, hard reservation of x in every window y",
            GuaranteeKind::ResCS => "a continuous, soft reservation of x in every window y",
            GuaranteeKind::ResPS => {
                "a probabilistic reservation: x every y guaranteed, a chance of up to z more"
            }
            GuaranteeKind::ResNH => {
                "a non-preemptive, hard reservation: one block of x each period y"
            }
            GuaranteeKind::ResSH => "a synchronized, hard reservation: x starting at z + i·y",
            GuaranteeKind::Psbe => "a share s, never more than δ behind (s·t − δ in any window t)",
            GuaranteeKind::Ps => "an asymptotic share s over an unspecified interval",
            GuaranteeKind::Null => "best effort, nothing guaranteed",
        }
    }

    /// Whether this is a CPU reservation (RESBH … RESSH, §5.2.2.2).
    pub const fn is_reservation(self) -> bool {
        matches!(
            self,
            GuaranteeKind::ResBH
                | GuaranteeKind::ResBS
                | GuaranteeKind::ResCH
                | GuaranteeKind::ResCS
                | GuaranteeKind::ResPS
                | GuaranteeKind::ResNH
                | GuaranteeKind::ResSH
        )
    }

    /// Whether this is a hard reservation: bounded above as well as below.
    pub const fn is_hard(self) -> bool {
        matches!(
            self,
            GuaranteeKind::ResBH
                | GuaranteeKind::ResCH
                | GuaranteeKind::ResNH
                | GuaranteeKind::ResSH
        )
    }

    /// Whether this is a basic reservation (RESBH, RESBS, RESPS): its periods
    /// are aligned to a time the scheduler picks, and it may place its time
    /// anywhere inside each period.
    pub const fn is_basic(self) -> bool {
        matches!(
            self,
            GuaranteeKind::ResBH | GuaranteeKind::ResBS | GuaranteeKind::ResPS
        )
    }

    /// Whether this is a continuous reservation (RESCH, RESCS and the
    /// implicitly continuous RESNH, RESSH): every window of a period holds
    /// the amount.
    pub const fn is_continuous(self) -> bool {
        matches!(
            self,
            GuaranteeKind::ResCH
                | GuaranteeKind::ResCS
                | GuaranteeKind::ResNH
                | GuaranteeKind::ResSH
        )
    }

    /// The soft counterpart of a hard kind (what a join makes of it,
    /// §5.3.1.2): RESBH → RESBS, RESCH/RESNH/RESSH → RESCS; others unchanged.
    pub const fn softened(self) -> GuaranteeKind {
        match self {
            GuaranteeKind::ResBH => GuaranteeKind::ResBS,
            GuaranteeKind::ResCH | GuaranteeKind::ResNH | GuaranteeKind::ResSH => {
                GuaranteeKind::ResCS
            }
            k => k,
        }
    }
}

impl fmt::Display for GuaranteeKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A guarantee with its parameters (§5.2.2). Construct checked values with
/// [`Guarantee::reservation`], the other constructors, or by parsing text
/// ([`std::str::FromStr`]); [`Guarantee::validate`] checks a value built by
/// hand.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Guarantee {
    /// `ALL`: 100% of one processor.
    All,
    /// `RESU r`: a uniformly slower processor of rate `r` in (0, 1].
    ResU {
        /// Fraction of the processor.
        rate: f64,
    },
    /// `RESBH x y`.
    ResBH {
        /// Reserved amount `x` per period.
        amount: Duration,
        /// Period `y`.
        period: Duration,
    },
    /// `RESBS x y`.
    ResBS {
        /// Reserved amount `x` per period.
        amount: Duration,
        /// Period `y`.
        period: Duration,
    },
    /// `RESCH x y`.
    ResCH {
        /// Amount `x` in every window of length `y`.
        amount: Duration,
        /// Window length `y`.
        period: Duration,
    },
    /// `RESCS x y`.
    ResCS {
        /// Amount `x` in every window of length `y`.
        amount: Duration,
        /// Window length `y`.
        period: Duration,
    },
    /// `RESPS x y z`.
    ResPS {
        /// Guaranteed amount `x` per period.
        amount: Duration,
        /// Period `y`.
        period: Duration,
        /// Size `z` of the shared overrun partition (extra time that is
        /// likely, never guaranteed).
        overrun: Duration,
    },
    /// `RESNH x y`.
    ResNH {
        /// Length `x` of the block.
        amount: Duration,
        /// Period `y`.
        period: Duration,
    },
    /// `RESSH x y z`.
    ResSH {
        /// Length `x` of the block.
        amount: Duration,
        /// Period `y`.
        period: Duration,
        /// Time `z` the blocks are synchronized to: they start at `z + iy`.
        sync: Duration,
    },
    /// `PSBE s δ`.
    Psbe {
        /// Share `s` in (0, 1].
        share: f64,
        /// Allocation error bound `δ`.
        error: Duration,
    },
    /// `PS s`.
    Ps {
        /// Share `s` in (0, 1].
        share: f64,
    },
    /// `NULL`.
    Null,
}

/// Why a guarantee's parameters are not valid.
#[derive(Clone, Debug, PartialEq)]
pub enum InvalidGuarantee {
    /// A reservation's period is zero.
    ZeroPeriod {
        /// The kind.
        kind: GuaranteeKind,
    },
    /// A reservation's amount is zero (a reservation of nothing is NULL).
    ZeroAmount {
        /// The kind.
        kind: GuaranteeKind,
    },
    /// A reservation's amount exceeds its period.
    AmountExceedsPeriod {
        /// The kind.
        kind: GuaranteeKind,
        /// Amount.
        amount: Duration,
        /// Period.
        period: Duration,
    },
    /// A share or rate outside (0, 1], or not finite.
    ShareOutOfRange {
        /// The kind.
        kind: GuaranteeKind,
        /// The value.
        value: f64,
    },
    /// [`Guarantee::reservation`] was asked for a kind that is not a
    /// two-parameter reservation.
    NotAReservation {
        /// The kind.
        kind: GuaranteeKind,
    },
}

impl fmt::Display for InvalidGuarantee {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InvalidGuarantee::ZeroPeriod { kind } => {
                write!(f, "{kind}: the period must be longer than zero")
            }
            InvalidGuarantee::ZeroAmount { kind } => {
                write!(f, "{kind}: the amount must be longer than zero (a reservation of nothing is NULL)")
            }
            InvalidGuarantee::AmountExceedsPeriod { kind, amount, period } => write!(
                f,
                "{kind}: the amount {} exceeds the period {}; a reservation cannot hold more than its period",
                crate::parse::Ms(*amount),
                crate::parse::Ms(*period)
            ),
            InvalidGuarantee::ShareOutOfRange { kind, value } => write!(
                f,
                "{kind}: {value} is not a fraction of one processor; expected a number in (0, 1] such as 0.25"
            ),
            InvalidGuarantee::NotAReservation { kind } => {
                write!(f, "{kind} is not a reservation with an amount and a period")
            }
        }
    }
}

impl std::error::Error for InvalidGuarantee {}

/// `numerator / denominator` as a float; zero when the denominator is zero.
pub(crate) fn ratio(numerator: Duration, denominator: Duration) -> f64 {
    if denominator.as_nanos() == 0 {
        0.0
    } else {
        numerator.as_nanos() as f64 / denominator.as_nanos() as f64
    }
}

impl Guarantee {
    /// A reservation of `kind` (RESBH, RESBS, RESCH, RESCS, RESNH; RESPS with
    /// no overrun partition; RESSH synchronized to time zero).
    ///
    /// # Errors
    /// The kind is not a reservation, the period is zero, or the amount
    /// exceeds the period.
    pub fn reservation(
        kind: GuaranteeKind,
        amount: Duration,
        period: Duration,
    ) -> Result<Guarantee, InvalidGuarantee> {
        let g = match kind {
            GuaranteeKind::ResBH => Guarantee::ResBH { amount, period },
            GuaranteeKind::ResBS => Guarantee::ResBS { amount, period },
            GuaranteeKind::ResCH => Guarantee::ResCH { amount, period },
            GuaranteeKind::ResCS => Guarantee::ResCS { amount, period },
            GuaranteeKind::ResNH => Guarantee::ResNH { amount, period },
            GuaranteeKind::ResPS => Guarantee::ResPS {
                amount,
                period,
                overrun: Duration::ZERO,
            },
            GuaranteeKind::ResSH => Guarantee::ResSH {
                amount,
                period,
                sync: Duration::ZERO,
            },
            kind => return Err(InvalidGuarantee::NotAReservation { kind }),
        };
        g.validate()?;
        Ok(g)
    }

    /// `RESBH x y` from milliseconds, for tests and examples.
    ///
    /// # Errors
    /// As [`Guarantee::reservation`].
    pub fn resbh_ms(amount: f64, period: f64) -> Result<Guarantee, InvalidGuarantee> {
        Guarantee::reservation(
            GuaranteeKind::ResBH,
            Duration::from_millis_f64(amount),
            Duration::from_millis_f64(period),
        )
    }

    /// `PSBE s δ`.
    ///
    /// # Errors
    /// The share is outside (0, 1].
    pub fn psbe(share: f64, error: Duration) -> Result<Guarantee, InvalidGuarantee> {
        let g = Guarantee::Psbe { share, error };
        g.validate()?;
        Ok(g)
    }

    /// `PS s`.
    ///
    /// # Errors
    /// The share is outside (0, 1].
    pub fn ps(share: f64) -> Result<Guarantee, InvalidGuarantee> {
        let g = Guarantee::Ps { share };
        g.validate()?;
        Ok(g)
    }

    /// `RESU r`.
    ///
    /// # Errors
    /// The rate is outside (0, 1].
    pub fn resu(rate: f64) -> Result<Guarantee, InvalidGuarantee> {
        let g = Guarantee::ResU { rate };
        g.validate()?;
        Ok(g)
    }

    /// The kind of this guarantee.
    pub const fn kind(&self) -> GuaranteeKind {
        match self {
            Guarantee::All => GuaranteeKind::All,
            Guarantee::ResU { .. } => GuaranteeKind::ResU,
            Guarantee::ResBH { .. } => GuaranteeKind::ResBH,
            Guarantee::ResBS { .. } => GuaranteeKind::ResBS,
            Guarantee::ResCH { .. } => GuaranteeKind::ResCH,
            Guarantee::ResCS { .. } => GuaranteeKind::ResCS,
            Guarantee::ResPS { .. } => GuaranteeKind::ResPS,
            Guarantee::ResNH { .. } => GuaranteeKind::ResNH,
            Guarantee::ResSH { .. } => GuaranteeKind::ResSH,
            Guarantee::Psbe { .. } => GuaranteeKind::Psbe,
            Guarantee::Ps { .. } => GuaranteeKind::Ps,
            Guarantee::Null => GuaranteeKind::Null,
        }
    }

    /// Checks the parameters: periods and amounts longer than zero, amounts
    /// no longer than their period, shares and rates in (0, 1].
    ///
    /// # Errors
    /// The first parameter that is out of range.
    pub fn validate(&self) -> Result<(), InvalidGuarantee> {
        let kind = self.kind();
        if let Some((amount, period)) = self.amount_period() {
            if period.as_nanos() == 0 {
                return Err(InvalidGuarantee::ZeroPeriod { kind });
            }
            if amount.as_nanos() == 0 {
                return Err(InvalidGuarantee::ZeroAmount { kind });
            }
            if amount > period {
                return Err(InvalidGuarantee::AmountExceedsPeriod {
                    kind,
                    amount,
                    period,
                });
            }
        }
        match *self {
            Guarantee::ResU { rate: v }
            | Guarantee::Psbe { share: v, .. }
            | Guarantee::Ps { share: v }
                if !(v.is_finite() && v > 0.0 && v <= 1.0 + 1e-12) =>
            {
                Err(InvalidGuarantee::ShareOutOfRange { kind, value: v })
            }
            _ => Ok(()),
        }
    }

    /// `(amount, period)` of a reservation; `None` for other kinds.
    pub const fn amount_period(&self) -> Option<(Duration, Duration)> {
        match *self {
            Guarantee::ResBH { amount, period }
            | Guarantee::ResBS { amount, period }
            | Guarantee::ResCH { amount, period }
            | Guarantee::ResCS { amount, period }
            | Guarantee::ResPS { amount, period, .. }
            | Guarantee::ResNH { amount, period }
            | Guarantee::ResSH { amount, period, .. } => Some((amount, period)),
            _ => None,
        }
    }

    /// The long-term fraction of one processor guaranteed: 1 for ALL, `r`
    /// for RESU, `x/y` for reservations (Theorem 5.6), `s` for PSBE and PS,
    /// 0 for NULL.
    pub fn rate(&self) -> f64 {
        match *self {
            Guarantee::All => 1.0,
            Guarantee::ResU { rate } => rate,
            Guarantee::Psbe { share, .. } | Guarantee::Ps { share } => share,
            Guarantee::Null => 0.0,
            _ => match self.amount_period() {
                Some((a, p)) => ratio(a, p),
                None => 0.0,
            },
        }
    }

    /// The longest interval in which the VP may receive no CPU time at all:
    /// 0 for ALL, `y − x` for continuous reservations (Lemma 5.2), `2(y − x)`
    /// for basic ones (Lemma 5.3), `δ/s` for PSBE; `None` (unbounded) for
    /// RESU, PS and NULL, which bound no fixed window.
    pub fn max_gap(&self) -> Option<Duration> {
        let kind = self.kind();
        match *self {
            Guarantee::All => Some(Duration::ZERO),
            Guarantee::Psbe { share, error } => Some(Duration::from_nanos(
                (error.as_nanos() as f64 / share).ceil() as u64,
            )),
            _ => {
                let (a, p) = self.amount_period()?;
                let gap = p - a;
                if kind.is_basic() {
                    Some(gap + gap)
                } else {
                    Some(gap)
                }
            }
        }
    }

    /// The soft counterpart of a hard guarantee, with the same parameters
    /// (what a join scheduler may promise, §5.3.1.2): RESBH → RESBS,
    /// RESCH/RESNH/RESSH → RESCS. Other guarantees are returned unchanged.
    pub fn softened(&self) -> Guarantee {
        match *self {
            Guarantee::ResBH { amount, period } => Guarantee::ResBS { amount, period },
            Guarantee::ResCH { amount, period }
            | Guarantee::ResNH { amount, period }
            | Guarantee::ResSH { amount, period, .. } => Guarantee::ResCS { amount, period },
            g => g,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[test]
    fn kinds_round_trip_their_names() {
        for k in GuaranteeKind::ALL_KINDS {
            assert_eq!(GuaranteeKind::from_name(k.name()), Some(k));
            assert_eq!(GuaranteeKind::from_name(&k.name().to_lowercase()), Some(k));
        }
        assert_eq!(GuaranteeKind::from_name("RESXX"), None);
    }

    #[test]
    fn classification_is_orthogonal_for_reservations() {
        // Every reservation is basic or continuous and hard or soft (§5.2.2.2).
        for k in GuaranteeKind::ALL_KINDS
            .into_iter()
            .filter(|k| k.is_reservation())
        {
            assert!(k.is_basic() ^ k.is_continuous(), "{k}");
            assert!(!k.softened().is_hard(), "{k}");
        }
        assert!(!GuaranteeKind::Psbe.is_reservation());
    }

    #[test]
    fn validation_rejects_bad_parameters() {
        assert!(Guarantee::reservation(GuaranteeKind::ResBS, ms(10), ms(20)).is_ok());
        assert!(matches!(
            Guarantee::reservation(GuaranteeKind::ResBS, ms(30), ms(20)),
            Err(InvalidGuarantee::AmountExceedsPeriod { .. })
        ));
        assert!(matches!(
            Guarantee::reservation(GuaranteeKind::ResBS, ms(0), ms(0)),
            Err(InvalidGuarantee::ZeroPeriod { .. })
        ));
        assert!(matches!(
            Guarantee::reservation(GuaranteeKind::ResCS, ms(0), ms(20)),
            Err(InvalidGuarantee::ZeroAmount { .. })
        ));
        assert!(Guarantee::psbe(1.5, ms(1)).is_err());
        assert!(Guarantee::ps(0.0).is_err());
        assert!(Guarantee::resu(f64::NAN).is_err());
        assert!(matches!(
            Guarantee::reservation(GuaranteeKind::Psbe, ms(1), ms(2)),
            Err(InvalidGuarantee::NotAReservation { .. })
        ));
    }

    #[test]
    fn gaps_follow_lemmas_5_2_and_5_3() {
        // §6.1.3: a basic reservation of 1.5 ms / 6 ms has a 9 ms gap.
        let basic =
            Guarantee::reservation(GuaranteeKind::ResBS, Duration::from_micros(1500), ms(6))
                .unwrap();
        assert_eq!(basic.max_gap(), Some(ms(9)));
        let cont = Guarantee::reservation(GuaranteeKind::ResCS, Duration::from_micros(1500), ms(6))
            .unwrap();
        assert_eq!(cont.max_gap(), Some(Duration::from_micros(4500)));
        assert_eq!(Guarantee::Null.max_gap(), None);
        assert_eq!(Guarantee::All.max_gap(), Some(Duration::ZERO));
    }

    #[test]
    fn softening_keeps_parameters() {
        let g = Guarantee::ResSH {
            amount: ms(2),
            period: ms(10),
            sync: ms(3),
        };
        assert_eq!(
            g.softened(),
            Guarantee::ResCS {
                amount: ms(2),
                period: ms(10)
            }
        );
        assert_eq!(Guarantee::All.softened(), Guarantee::All);
        assert!((g.rate() - 0.2).abs() < 1e-12);
    }
}
