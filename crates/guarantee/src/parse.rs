//! Text syntax of guarantees (Regehr 2001, §5.2.1): `TYPE [params]`.
//!
//! * `TYPE` is one of `ALL RESU RESBH RESBS RESCH RESCS RESPS RESNH RESSH PSBE
//!   PS NULL` (any ASCII case).
//! * Times are milliseconds when bare (`RESBS 10 20`), or carry a unit
//!   (`RESBS 10ms 20ms`, `1.5ms`, `500us`, `2s`).
//! * Shares and rates are absolute fractions of one processor (`PSBE 0.25
//!   75`), or percentages (`PS 25%`).
//!
//! [`Guarantee`]'s `Display` writes the same syntax with bare milliseconds,
//! so `"RESBS 10ms 20ms".parse::<Guarantee>()?.to_string() == "RESBS 10 20"`.
//! Durations print exactly (to the nanosecond); shares print with at most six
//! decimals.

use std::fmt;
use std::str::FromStr;

use hsched_core::time::{parse_duration, Duration};

use crate::types::{Guarantee, GuaranteeKind, InvalidGuarantee};

/// Displays a duration as a bare number of milliseconds, exactly: `75`,
/// `1.5`, `0.000001`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ms(pub Duration);

impl fmt::Display for Ms {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ns = self.0.as_nanos();
        let whole = ns / 1_000_000;
        let frac = ns % 1_000_000;
        if frac == 0 {
            write!(f, "{whole}")
        } else {
            let digits = format!("{frac:06}");
            write!(f, "{whole}.{}", digits.trim_end_matches('0'))
        }
    }
}

/// Displays a share or rate with at most six decimals, trailing zeros
/// trimmed: `0.25`, `1`, `0.166667`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Share(pub f64);

impl fmt::Display for Share {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = format!("{:.6}", self.0);
        let s = if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.')
        } else {
            &s
        };
        f.write_str(if s == "-0" { "0" } else { s })
    }
}

impl fmt::Display for Guarantee {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = self.kind().name();
        match *self {
            Guarantee::All | Guarantee::Null => f.write_str(name),
            Guarantee::ResU { rate } => write!(f, "{name} {}", Share(rate)),
            Guarantee::Ps { share } => write!(f, "{name} {}", Share(share)),
            Guarantee::Psbe { share, error } => write!(f, "{name} {} {}", Share(share), Ms(error)),
            Guarantee::ResPS {
                amount,
                period,
                overrun,
            } => {
                write!(f, "{name} {} {} {}", Ms(amount), Ms(period), Ms(overrun))
            }
            Guarantee::ResSH {
                amount,
                period,
                sync,
            } => {
                write!(f, "{name} {} {} {}", Ms(amount), Ms(period), Ms(sync))
            }
            Guarantee::ResBH { amount, period }
            | Guarantee::ResBS { amount, period }
            | Guarantee::ResCH { amount, period }
            | Guarantee::ResCS { amount, period }
            | Guarantee::ResNH { amount, period } => {
                write!(f, "{name} {} {}", Ms(amount), Ms(period))
            }
        }
    }
}

/// What went wrong while parsing a guarantee.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParseErrorKind {
    /// The text is empty.
    Empty,
    /// The first word is not a guarantee type.
    UnknownType,
    /// Fewer parameters than the type takes.
    MissingParameter,
    /// More parameters than the type takes.
    ExtraParameter,
    /// A time parameter is not a duration.
    BadDuration,
    /// A share or rate is not a number in (0, 1].
    BadShare,
    /// The parameters parse but do not make a valid guarantee (an amount
    /// longer than its period, …).
    Invalid,
}

/// A guarantee that could not be parsed: the offending token, where it is,
/// what was expected there and a hint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseGuaranteeError {
    /// What went wrong.
    pub kind: ParseErrorKind,
    /// The offending token (empty at the end of the text).
    pub token: String,
    /// Byte offset of the token in the text.
    pub offset: usize,
    /// What was expected at that place.
    pub expected: String,
    /// How to fix it.
    pub hint: String,
}

impl fmt::Display for ParseGuaranteeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let problem = match self.kind {
            ParseErrorKind::Empty => "empty guarantee",
            ParseErrorKind::UnknownType => "unknown guarantee type",
            ParseErrorKind::MissingParameter => "missing parameter",
            ParseErrorKind::ExtraParameter => "too many parameters",
            ParseErrorKind::BadDuration => "not a duration",
            ParseErrorKind::BadShare => "not a share",
            ParseErrorKind::Invalid => "invalid guarantee",
        };
        if self.token.is_empty() {
            write!(f, "{problem} at column {}", self.offset + 1)?;
        } else {
            write!(
                f,
                "`{}` (column {}): {problem}",
                self.token,
                self.offset + 1
            )?;
        }
        write!(f, "; expected {}", self.expected)?;
        if !self.hint.is_empty() {
            write!(f, " (hint: {})", self.hint)?;
        }
        Ok(())
    }
}

impl std::error::Error for ParseGuaranteeError {}

fn type_list() -> String {
    GuaranteeKind::ALL_KINDS
        .iter()
        .map(|k| k.name())
        .collect::<Vec<_>>()
        .join(", ")
}

fn syntax(kind: GuaranteeKind) -> String {
    let mut s = kind.name().to_string();
    for p in kind.param_names() {
        s.push(' ');
        s.push_str(p);
    }
    s
}

fn example(kind: GuaranteeKind) -> &'static str {
    match kind {
        GuaranteeKind::All => "ALL",
        GuaranteeKind::ResU => "RESU 0.5",
        GuaranteeKind::ResBH => "RESBH 10 33",
        GuaranteeKind::ResBS => "RESBS 10 20",
        GuaranteeKind::ResCH => "RESCH 5 33",
        GuaranteeKind::ResCS => "RESCS 10 20",
        GuaranteeKind::ResPS => "RESPS 5 33 10",
        GuaranteeKind::ResNH => "RESNH 2 10",
        GuaranteeKind::ResSH => "RESSH 2 16.7 0",
        GuaranteeKind::Psbe => "PSBE 0.25 75",
        GuaranteeKind::Ps => "PS 0.4",
        GuaranteeKind::Null => "NULL",
    }
}

/// Edit distance, for "did you mean" hints.
fn distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.to_ascii_uppercase().chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != cb);
            cur[j + 1] = sub.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

fn parse_share(tok: &str) -> Option<f64> {
    let (num, scale) = match tok.strip_suffix('%') {
        Some(n) => (n, 100.0),
        None => (tok, 1.0),
    };
    let v: f64 = num.trim().parse().ok()?;
    let v = v / scale;
    (v.is_finite() && v > 0.0 && v <= 1.0).then_some(v)
}

impl FromStr for Guarantee {
    type Err = ParseGuaranteeError;

    fn from_str(text: &str) -> Result<Guarantee, ParseGuaranteeError> {
        // Tokens with their byte offsets.
        let mut tokens: Vec<(usize, &str)> = Vec::new();
        let mut start = None;
        for (i, c) in text.char_indices() {
            match (c.is_whitespace(), start) {
                (false, None) => start = Some(i),
                (true, Some(s)) => {
                    tokens.push((s, &text[s..i]));
                    start = None;
                }
                _ => {}
            }
        }
        if let Some(s) = start {
            tokens.push((s, &text[s..]));
        }
        let err = |kind, offset: usize, token: &str, expected: String, hint: String| {
            ParseGuaranteeError {
                kind,
                token: token.to_string(),
                offset,
                expected,
                hint,
            }
        };
        let Some(&(off0, word)) = tokens.first() else {
            return Err(err(
                ParseErrorKind::Empty,
                0,
                "",
                format!("a guarantee type: {}", type_list()),
                "write e.g. `RESBS 10 20` (10 ms every 20 ms) or `NULL`".into(),
            ));
        };
        let Some(kind) = GuaranteeKind::from_name(word) else {
            let best = GuaranteeKind::ALL_KINDS
                .iter()
                .map(|k| (distance(word, k.name()), *k))
                .min_by_key(|(d, _)| *d);
            let hint = match best {
                Some((d, k)) if d <= 2 => format!("did you mean `{}`?", syntax(k)),
                _ => "guarantee types are listed in §5.2.2 of the HLS dissertation".into(),
            };
            return Err(err(
                ParseErrorKind::UnknownType,
                off0,
                word,
                format!("one of {}", type_list()),
                hint,
            ));
        };
        let names = kind.param_names();
        let params = &tokens[1..];
        if params.len() < names.len() {
            let end = text.trim_end().len();
            return Err(err(
                ParseErrorKind::MissingParameter,
                end,
                "",
                format!(
                    "`{}` ({} takes {} parameter(s))",
                    names[params.len()],
                    kind.name(),
                    names.len()
                ),
                format!("write `{}`, e.g. `{}`", syntax(kind), example(kind)),
            ));
        }
        if let Some(&(off, tok)) = params.get(names.len()) {
            return Err(err(
                ParseErrorKind::ExtraParameter,
                off,
                tok,
                format!("the end of the guarantee after `{}`", syntax(kind)),
                format!(
                    "{} takes {} parameter(s), e.g. `{}`",
                    kind.name(),
                    names.len(),
                    example(kind)
                ),
            ));
        }
        let dur = |i: usize| -> Result<Duration, ParseGuaranteeError> {
            let (off, tok) = params[i];
            parse_duration(tok, Some(1_000_000)).map_err(|e| {
                err(
                    ParseErrorKind::BadDuration,
                    off,
                    tok,
                    format!("the {} of {} as a duration", names[i], kind.name()),
                    format!(
                        "bare numbers are milliseconds; units ns, us, ms, s are allowed ({})",
                        e.message
                    ),
                )
            })
        };
        let share = |i: usize| -> Result<f64, ParseGuaranteeError> {
            let (off, tok) = params[i];
            parse_share(tok).ok_or_else(|| {
                err(
                    ParseErrorKind::BadShare,
                    off,
                    tok,
                    format!("the {} of {} as a number in (0, 1]", names[i], kind.name()),
                    "shares are absolute fractions of one processor (§5.2.1): `0.25` or `25%`"
                        .into(),
                )
            })
        };
        let g = match kind {
            GuaranteeKind::All => Guarantee::All,
            GuaranteeKind::Null => Guarantee::Null,
            GuaranteeKind::ResU => Guarantee::ResU { rate: share(0)? },
            GuaranteeKind::Ps => Guarantee::Ps { share: share(0)? },
            GuaranteeKind::Psbe => Guarantee::Psbe {
                share: share(0)?,
                error: dur(1)?,
            },
            GuaranteeKind::ResBH => Guarantee::ResBH {
                amount: dur(0)?,
                period: dur(1)?,
            },
            GuaranteeKind::ResBS => Guarantee::ResBS {
                amount: dur(0)?,
                period: dur(1)?,
            },
            GuaranteeKind::ResCH => Guarantee::ResCH {
                amount: dur(0)?,
                period: dur(1)?,
            },
            GuaranteeKind::ResCS => Guarantee::ResCS {
                amount: dur(0)?,
                period: dur(1)?,
            },
            GuaranteeKind::ResNH => Guarantee::ResNH {
                amount: dur(0)?,
                period: dur(1)?,
            },
            GuaranteeKind::ResPS => Guarantee::ResPS {
                amount: dur(0)?,
                period: dur(1)?,
                overrun: dur(2)?,
            },
            GuaranteeKind::ResSH => Guarantee::ResSH {
                amount: dur(0)?,
                period: dur(1)?,
                sync: dur(2)?,
            },
        };
        g.validate().map_err(|e: InvalidGuarantee| {
            let (off, tok) = params.first().copied().unwrap_or((off0, word));
            err(
                ParseErrorKind::Invalid,
                off,
                tok,
                format!(
                    "`{}` with an amount no longer than the period",
                    syntax(kind)
                ),
                e.to_string(),
            )
        })?;
        Ok(g)
    }
}

impl FromStr for GuaranteeKind {
    type Err = ParseGuaranteeError;

    fn from_str(text: &str) -> Result<GuaranteeKind, ParseGuaranteeError> {
        let t = text.trim();
        GuaranteeKind::from_name(t).ok_or_else(|| ParseGuaranteeError {
            kind: if t.is_empty() {
                ParseErrorKind::Empty
            } else {
                ParseErrorKind::UnknownType
            },
            token: t.to_string(),
            offset: text.len() - text.trim_start().len(),
            expected: format!("one of {}", type_list()),
            hint: "guarantee types are listed in §5.2.2 of the HLS dissertation".into(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn g(s: &str) -> Guarantee {
        s.parse().unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    #[test]
    fn parses_the_dissertation_syntax() {
        assert_eq!(
            g("RESBS 10 20"),
            Guarantee::ResBS {
                amount: Duration::from_millis(10),
                period: Duration::from_millis(20)
            }
        );
        assert_eq!(g("RESBS 10ms 20ms"), g("RESBS 10 20"));
        assert_eq!(g("resbs 1.5ms 6"), g("RESBS 1.5 6"));
        assert_eq!(
            g("PSBE 0.25 75"),
            Guarantee::Psbe {
                share: 0.25,
                error: Duration::from_millis(75)
            }
        );
        assert_eq!(g("PS 40%"), Guarantee::Ps { share: 0.4 });
        assert_eq!(g("  ALL "), Guarantee::All);
        assert_eq!(g("NULL"), Guarantee::Null);
        assert_eq!(
            g("RESPS 5 33 10"),
            Guarantee::ResPS {
                amount: Duration::from_millis(5),
                period: Duration::from_millis(33),
                overrun: Duration::from_millis(10)
            }
        );
        assert_eq!(g("RESU 0.5"), Guarantee::ResU { rate: 0.5 });
        assert_eq!(
            g("RESBH 500us 1s").amount_period().unwrap().0,
            Duration::from_micros(500)
        );
    }

    #[test]
    fn display_round_trips() {
        for s in [
            "ALL",
            "RESU 0.5",
            "RESBH 10 33",
            "RESBS 1.5 6",
            "RESCH 5 33",
            "RESCS 25 400",
            "RESPS 5 33 10",
            "RESNH 2 10",
            "RESSH 2 16.666667 0.5",
            "PSBE 0.25 75",
            "PS 0.4",
            "NULL",
        ] {
            assert_eq!(g(s).to_string(), s);
            assert_eq!(g(&g(s).to_string()), g(s));
        }
        assert_eq!(g("RESBS 10ms 20ms").to_string(), "RESBS 10 20");
        assert_eq!(g("RESBS 250us 1").to_string(), "RESBS 0.25 1");
    }

    #[test]
    fn errors_name_the_token_and_hint() {
        let e = "RESBX 10 20".parse::<Guarantee>().unwrap_err();
        assert_eq!(e.kind, ParseErrorKind::UnknownType);
        assert_eq!(e.token, "RESBX");
        assert!(e.hint.contains("RESB"), "{e}");
        assert!(e.to_string().contains("`RESBX`"), "{e}");

        let e = "RESBS 10".parse::<Guarantee>().unwrap_err();
        assert_eq!(e.kind, ParseErrorKind::MissingParameter);
        assert!(e.expected.contains("period"), "{e}");

        let e = "RESBS 10 20 30".parse::<Guarantee>().unwrap_err();
        assert_eq!(
            (e.kind, e.token.as_str(), e.offset),
            (ParseErrorKind::ExtraParameter, "30", 12)
        );

        let e = "RESBS 10 twenty".parse::<Guarantee>().unwrap_err();
        assert_eq!(
            (e.kind, e.token.as_str()),
            (ParseErrorKind::BadDuration, "twenty")
        );
        assert!(e.expected.contains("period"));

        let e = "PSBE 1.5 10".parse::<Guarantee>().unwrap_err();
        assert_eq!(
            (e.kind, e.token.as_str()),
            (ParseErrorKind::BadShare, "1.5")
        );

        let e = "RESBS 30 20".parse::<Guarantee>().unwrap_err();
        assert_eq!(e.kind, ParseErrorKind::Invalid);
        assert!(e.hint.contains("exceeds the period"), "{e}");

        let e = "".parse::<Guarantee>().unwrap_err();
        assert_eq!(e.kind, ParseErrorKind::Empty);

        let e = "RESBS -1 20".parse::<Guarantee>().unwrap_err();
        assert_eq!(e.kind, ParseErrorKind::BadDuration);
    }

    #[test]
    fn kinds_parse() {
        assert_eq!(
            "resbh".parse::<GuaranteeKind>().unwrap(),
            GuaranteeKind::ResBH
        );
        assert!("nope".parse::<GuaranteeKind>().is_err());
    }

    #[test]
    fn ms_display_is_exact() {
        assert_eq!(Ms(Duration::from_nanos(1)).to_string(), "0.000001");
        assert_eq!(Ms(Duration::from_millis(75)).to_string(), "75");
        assert_eq!(Share(1.0).to_string(), "1");
        assert_eq!(Share(0.3).to_string(), "0.3");
    }
}
