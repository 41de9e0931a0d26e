//! Time as `u64` nanoseconds (DESIGN.md §4.4): a monotonic [`Instant`] and a
//! non-negative [`Duration`]. Subtracting instants is explicit about its sign.

use std::fmt;
use std::ops::{Add, AddAssign, Sub, SubAssign};

/// A point in monotonic time, nanoseconds since the backend's epoch (the
/// simulator starts at zero; live mode at the daemon's start).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Instant(pub u64);

/// A length of time in nanoseconds.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Duration(pub u64);

impl Instant {
    /// The epoch.
    pub const ZERO: Instant = Instant(0);
    /// Later than every reachable instant; used as "never".
    pub const NEVER: Instant = Instant(u64::MAX);

    /// Nanoseconds since the epoch.
    pub const fn as_nanos(self) -> u64 {
        self.0
    }

    /// `self - earlier`, or zero when `earlier` is later than `self`.
    pub fn saturating_since(self, earlier: Instant) -> Duration {
        Duration(self.0.saturating_sub(earlier.0))
    }

    /// `self - earlier`, or `None` when `earlier` is later than `self`.
    pub fn checked_since(self, earlier: Instant) -> Option<Duration> {
        self.0.checked_sub(earlier.0).map(Duration)
    }

    /// Signed difference `self - other` in nanoseconds.
    pub fn signed_since(self, other: Instant) -> i64 {
        (self.0 as i128 - other.0 as i128).clamp(i64::MIN as i128, i64::MAX as i128) as i64
    }
}

impl Duration {
    /// Zero length.
    pub const ZERO: Duration = Duration(0);
    /// The largest duration.
    pub const MAX: Duration = Duration(u64::MAX);

    /// From nanoseconds.
    pub const fn from_nanos(ns: u64) -> Self {
        Duration(ns)
    }
    /// From microseconds.
    pub const fn from_micros(us: u64) -> Self {
        Duration(us * 1_000)
    }
    /// From milliseconds.
    pub const fn from_millis(ms: u64) -> Self {
        Duration(ms * 1_000_000)
    }
    /// From seconds.
    pub const fn from_secs(s: u64) -> Self {
        Duration(s * 1_000_000_000)
    }
    /// From fractional milliseconds (the dissertation's unit for bare numbers),
    /// rounded to the nearest nanosecond; negative and NaN give zero.
    pub fn from_millis_f64(ms: f64) -> Self {
        if ms.is_nan() || ms <= 0.0 {
            Duration(0)
        } else {
            Duration((ms * 1e6).round().min(u64::MAX as f64) as u64)
        }
    }
    /// Nanoseconds.
    pub const fn as_nanos(self) -> u64 {
        self.0
    }
    /// Milliseconds as a float.
    pub fn as_millis_f64(self) -> f64 {
        self.0 as f64 / 1e6
    }
    /// Seconds as a float.
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / 1e9
    }
    /// `self - rhs`, or zero.
    pub fn saturating_sub(self, rhs: Duration) -> Duration {
        Duration(self.0.saturating_sub(rhs.0))
    }
    /// `self + rhs`, saturating.
    pub fn saturating_add(self, rhs: Duration) -> Duration {
        Duration(self.0.saturating_add(rhs.0))
    }
    /// `self * k / d` without overflow (128-bit intermediate), saturating.
    pub fn mul_div(self, k: u64, d: u64) -> Duration {
        if d == 0 {
            return Duration::MAX;
        }
        Duration(((self.0 as u128 * k as u128) / d as u128).min(u64::MAX as u128) as u64)
    }
}

impl Add<Duration> for Instant {
    type Output = Instant;
    fn add(self, d: Duration) -> Instant {
        Instant(self.0.saturating_add(d.0))
    }
}
impl AddAssign<Duration> for Instant {
    fn add_assign(&mut self, d: Duration) {
        *self = *self + d;
    }
}
impl Sub<Duration> for Instant {
    type Output = Instant;
    fn sub(self, d: Duration) -> Instant {
        Instant(self.0.saturating_sub(d.0))
    }
}
impl Add for Duration {
    type Output = Duration;
    fn add(self, d: Duration) -> Duration {
        Duration(self.0.saturating_add(d.0))
    }
}
impl AddAssign for Duration {
    fn add_assign(&mut self, d: Duration) {
        *self = *self + d;
    }
}
impl Sub for Duration {
    type Output = Duration;
    /// Saturating: durations are never negative.
    fn sub(self, d: Duration) -> Duration {
        self.saturating_sub(d)
    }
}
impl SubAssign for Duration {
    fn sub_assign(&mut self, d: Duration) {
        *self = *self - d;
    }
}

/// Writes a duration with the largest unit that keeps it readable:
/// `33ms`, `1.5ms`, `250us`, `2s`.
fn fmt_ns(ns: u64, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    const UNITS: [(u64, &str); 4] = [
        (1_000_000_000, "s"),
        (1_000_000, "ms"),
        (1_000, "us"),
        (1, "ns"),
    ];
    for (scale, unit) in UNITS {
        if ns >= scale || scale == 1 {
            if ns.is_multiple_of(scale) {
                return write!(f, "{}{}", ns / scale, unit);
            }
            let v = ns as f64 / scale as f64;
            // Up to three decimals, trailing zeros trimmed.
            let s = format!("{v:.3}");
            let s = s.trim_end_matches('0').trim_end_matches('.');
            return write!(f, "{s}{unit}");
        }
    }
    unreachable!("the unit table ends with 1ns")
}

impl fmt::Display for Duration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt_ns(self.0, f)
    }
}
impl fmt::Debug for Duration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt_ns(self.0, f)
    }
}
impl fmt::Display for Instant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "t=")?;
        fmt_ns(self.0, f)
    }
}
impl fmt::Debug for Instant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// The longest duration [`parse_duration`] accepts: 2^63 ns, about 292
/// years (2562047 h), half of what `u64` nanoseconds hold, so that a time
/// plus a parsed duration still fits.
pub const MAX_PARSED: Duration = Duration(1 << 63);

/// [`MAX_PARSED`] for messages.
pub const MAX_PARSED_TEXT: &str = "9223372036854775808ns (about 2562047.8h, 292 years)";

/// Error from [`parse_duration`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseDurationError {
    /// What was wrong, for a human.
    pub message: String,
    too_long: bool,
}

impl ParseDurationError {
    /// Whether the text is a well-formed duration longer than
    /// [`MAX_PARSED`] (rather than malformed).
    pub fn is_too_long(&self) -> bool {
        self.too_long
    }
}

impl fmt::Display for ParseDurationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}
impl std::error::Error for ParseDurationError {}

/// Parses a duration with a unit: `33ms`, `1.5ms`, `250us`, `2s`, `100ns`,
/// `1m` (minutes), `1h`. A bare number is taken in `bare_unit_ns` nanoseconds per
/// unit (milliseconds in guarantees, following the dissertation) or refused
/// when `bare_unit_ns` is `None`, except zero (`0`, `0.0`), which needs none.
///
/// # Errors
/// Empty text, a negative number, an unknown unit, a bare number where a
/// unit is required, or a duration beyond [`MAX_PARSED`].
pub fn parse_duration(
    text: &str,
    bare_unit_ns: Option<u64>,
) -> Result<Duration, ParseDurationError> {
    let t = text.trim();
    let err = |m: String| ParseDurationError {
        message: m,
        too_long: false,
    };
    if t.is_empty() {
        return Err(err(
            "empty duration; expected a number with a unit such as `10ms`".into(),
        ));
    }
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-' || c == '+'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let unit = unit.trim();
    let value: f64 = num.parse().map_err(|_| {
        err(format!(
            "`{t}` is not a duration; expected a number with a unit such as `10ms`, `1.5ms`, `2s`"
        ))
    })?;
    // The number is digits only, so it is never NaN, and infinity means it
    // overflowed, which the length check below reports as too long.
    if value < 0.0 {
        return Err(err(format!(
            "`{t}`: a duration must be a finite, non-negative number"
        )));
    }
    let scale: u128 = match unit {
        "ns" => 1,
        // The micro sign (U+00B5) or the Greek mu (U+03BC): they look alike.
        "us" | "\u{b5}s" | "\u{3bc}s" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        "m" | "min" => 60_000_000_000,
        "h" => 3_600_000_000_000,
        "" => match bare_unit_ns {
            Some(s) => s.into(),
            // Zero is zero in any unit.
            None if value == 0.0 => return Ok(Duration::ZERO),
            None => {
                return Err(err(format!(
                    "`{t}` has no unit; write it with one of ns, us, ms, s, min, h (e.g. `{t}ms`)"
                )))
            }
        },
        other => {
            return Err(err(format!(
                "`{t}`: unknown unit `{other}`; expected one of ns, us, ms, s, min, h"
            )))
        }
    };
    // The float checked the syntax; the value is computed exactly, as
    // `f64` would round 2^63 + 1 ns to 2^63 and let it through.
    match exact_ns(num, scale) {
        Some(ns) if ns <= u128::from(MAX_PARSED.0) => Ok(Duration(ns as u64)),
        _ => Err(ParseDurationError {
            message: format!("`{t}` is too long: the longest duration is {MAX_PARSED_TEXT}"),
            too_long: true,
        }),
    }
}

/// The non-negative decimal `num` (digits, at most one `.`, an optional
/// sign) times `scale` nanoseconds, rounded to the nearest nanosecond;
/// `None` when it is far beyond any duration.
fn exact_ns(num: &str, scale: u128) -> Option<u128> {
    let num = num.trim_start_matches(['+', '-']);
    let (int, frac) = num.split_once('.').unwrap_or((num, ""));
    let int = int.trim_start_matches('0');
    if int.len() > 20 {
        return None;
    }
    let whole = if int.is_empty() {
        0
    } else {
        int.parse::<u128>().ok()?
    };
    // 20 decimals resolve an hour to 4e-8 ns: later digits could move the
    // rounding only of a value that close to half a nanosecond.
    let frac = &frac[..frac.len().min(20)];
    let part = if frac.is_empty() {
        0
    } else {
        let den = 10u128.pow(frac.len() as u32);
        (frac.parse::<u128>().ok()? * scale + den / 2) / den
    };
    whole.checked_mul(scale)?.checked_add(part)
}

/// [`parse_duration`] (units required) for the length of a run, which must
/// be longer than zero: `hsched sim --duration` and `hsched run --duration`.
///
/// # Errors
/// As `parse_duration`, or a duration that rounds to zero nanoseconds.
pub fn parse_run_length(text: &str) -> Result<Duration, ParseDurationError> {
    let d = parse_duration(text, None)?;
    if d == Duration::ZERO {
        return Err(ParseDurationError {
            message: format!(
                "`{}` is no time at all; give a duration longer than zero, e.g. 10s",
                text.trim()
            ),
            too_long: false,
        });
    }
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_are_exact_to_the_nanosecond() {
        let ns = |t: &str| parse_duration(t, None).map(|d| d.0);
        assert_eq!(ns("9223372036854775807ns"), Ok((1 << 63) - 1));
        assert_eq!(ns("9223372036854775808ns"), Ok(1 << 63));
        assert!(ns("9223372036854775809ns").unwrap_err().is_too_long());
        assert!(ns("2562048h").unwrap_err().is_too_long());
        assert!(ns(&format!("1{}ns", "0".repeat(400)))
            .unwrap_err()
            .is_too_long());
        assert_eq!(ns("2562047h"), Ok(2_562_047 * 3_600_000_000_000));
        assert_eq!(ns("1.5ns"), Ok(2));
        assert_eq!(ns("1.49ns"), Ok(1));
        assert_eq!(ns("0.1s"), Ok(100_000_000));
        assert_eq!(ns(".5us"), Ok(500));
        assert_eq!(ns("5.ms"), Ok(5_000_000));
        assert_eq!(ns("0.333333333333333333333333333ms"), Ok(333_333));
        assert_eq!(ns("000012.000us"), Ok(12_000));
        // Zero needs no unit; any other bare number does.
        assert_eq!(ns("0"), Ok(0));
        assert_eq!(ns(" 0.0 "), Ok(0));
        assert!(ns("0.5").is_err());
        assert!(ns("1").is_err());
        assert_eq!(ns("-0ms"), Ok(0));
        assert_eq!(ns("5\u{b5}s"), Ok(5_000));
        assert_eq!(ns("5\u{3bc}s"), Ok(5_000));
    }

    #[test]
    fn parses_units_and_bare_numbers() {
        assert_eq!(
            parse_duration("33ms", None).unwrap(),
            Duration::from_millis(33)
        );
        assert_eq!(
            parse_duration("1.5ms", None).unwrap(),
            Duration::from_micros(1500)
        );
        assert_eq!(parse_duration("2s", None).unwrap(), Duration::from_secs(2));
        assert_eq!(
            parse_duration("1.5h", None).unwrap(),
            Duration::from_secs(5400)
        );
        assert_eq!(
            parse_duration("250us", None).unwrap(),
            Duration::from_micros(250)
        );
        assert_eq!(
            parse_duration("10", Some(1_000_000)).unwrap(),
            Duration::from_millis(10)
        );
        assert!(parse_duration("10", None).is_err());
        assert!(parse_duration("-1ms", None).is_err());
        assert!(parse_duration("10 parsecs", None)
            .unwrap_err()
            .message
            .contains("unknown unit"));
        assert!(parse_duration("", None).is_err());
    }

    #[test]
    fn too_long_is_its_own_error() {
        assert_eq!(
            parse_duration("2562047h", None).unwrap(),
            Duration::from_secs(2_562_047 * 3600)
        );
        let huge = format!("1{}ms", "0".repeat(400));
        for t in ["2562048h", "3000000h", "18446744073709551615ns", &huge] {
            let e = parse_duration(t, None).unwrap_err();
            assert!(e.is_too_long(), "{t}: {}", e.message);
            assert!(
                e.message
                    .contains("the longest duration is 9223372036854775808ns"),
                "{}",
                e.message
            );
        }
        // The longest the message names is the longest accepted.
        let (longest, _) = MAX_PARSED_TEXT.split_once(' ').unwrap();
        assert_eq!(parse_duration(longest, None), Ok(MAX_PARSED));
        assert!(parse_duration("9223372036854775809ns", None)
            .unwrap_err()
            .is_too_long());
        let e = parse_duration("3000000 parsecs", None).unwrap_err();
        assert!(!e.is_too_long() && e.message.contains("unknown unit"));
        assert!(parse_duration(&format!("{}ns", MAX_PARSED.0), None).is_ok());
    }

    #[test]
    fn displays_readably() {
        assert_eq!(Duration::from_millis(33).to_string(), "33ms");
        assert_eq!(Duration::from_micros(1500).to_string(), "1.5ms");
        assert_eq!(Duration::from_secs(2).to_string(), "2s");
        assert_eq!(Duration::ZERO.to_string(), "0ns");
    }

    #[test]
    fn instant_arithmetic_is_explicit_about_sign() {
        let a = Instant(10);
        let b = Instant(4);
        assert_eq!(a.saturating_since(b), Duration(6));
        assert_eq!(b.saturating_since(a), Duration(0));
        assert_eq!(b.checked_since(a), None);
        assert_eq!(b.signed_since(a), -6);
    }
}
