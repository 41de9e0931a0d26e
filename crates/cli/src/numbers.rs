//! Parsers for the whole-number options (`--seed`, `--runs`, `--pid`, …).
//!
//! clap's own integer parsers report `-1` as an unknown flag, or say only
//! "invalid digit found in string"; these name what the option takes.
//! The options that use them also set `allow_negative_numbers`, so that a
//! negative value reaches the parser instead of being taken for a flag.

/// A whole number from `min` to `max`: what `--seed`, `--runs` and the
/// like take.
pub fn whole<T>(s: &str, min: T, max: T) -> Result<T, String>
where
    T: Copy + std::fmt::Display + TryFrom<u64> + Into<u64>,
{
    let t = s.trim();
    let out_of_range = || format!("`{s}` is out of range: give a whole number from {min} to {max}");
    if t.starts_with('-') && t.len() > 1 && t[1..].bytes().all(|b| b.is_ascii_digit()) {
        return Err(out_of_range());
    }
    if t.is_empty() || !t.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!(
            "`{s}` is not a whole number; give one from {min} to {max}"
        ));
    }
    let v: u64 = t.parse().map_err(|_| out_of_range())?;
    match T::try_from(v) {
        Ok(x) if v >= min.into() && v <= max.into() => Ok(x),
        _ => Err(out_of_range()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_numbers_name_their_range() {
        assert_eq!(whole::<u64>("42", 0, u64::MAX), Ok(42));
        assert_eq!(whole::<u32>(" 7 ", 1, 10), Ok(7));
        for (bad, says) in [
            ("-1", "out of range: give a whole number from 1 to 10"),
            ("0", "out of range"),
            ("11", "out of range"),
            ("99999999999999999999", "out of range"),
            ("1.5", "not a whole number"),
            ("ten", "not a whole number"),
            ("", "not a whole number"),
            ("-", "not a whole number"),
        ] {
            let e = whole::<u32>(bad, 1, 10).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
        assert!(whole::<u32>("4294967296", 0, u32::MAX)
            .unwrap_err()
            .contains("out of range"));
    }
}
