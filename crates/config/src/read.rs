//! Typed access to a parsed TOML document that reports every problem with
//! its place in the file: unknown keys (with the accepted ones and the
//! closest match), missing keys, wrong types, durations without a unit.

use crate::error::{did_you_mean, one_of, ConfigError, Source};
use crate::model::Span;
use hsched_core::time::{parse_duration, MAX_PARSED_TEXT};
use hsched_core::{Duration, ParamValue, Params};
use std::collections::BTreeMap;
use std::ops::Range;
use toml::de::{DeArray, DeTable, DeValue};
use toml::Spanned;

pub(crate) type V<'i> = Spanned<DeValue<'i>>;

/// Byte ranges of places that later checks point at, by path
/// (`"thread.3.scheduler"`, `"at.0.params.amount"`).
#[derive(Debug, Default)]
pub(crate) struct Sites(pub BTreeMap<String, Range<usize>>);

impl Sites {
    pub fn put(&mut self, path: String, r: Range<usize>) {
        self.0.insert(path, r);
    }
    pub fn get(&self, path: &str) -> Option<Range<usize>> {
        self.0.get(path).cloned()
    }
}

/// Reports errors either at byte ranges of a source text (while parsing) or
/// at model spans (checks run after parsing, e.g. when an rt-app workload is
/// attached).
pub(crate) struct Diag<'s> {
    pub file: String,
    pub src: Option<&'s Source<'s>>,
    pub sites: Option<&'s Sites>,
    pub errs: Vec<ConfigError>,
}

impl<'s> Diag<'s> {
    pub fn new(file: &str, src: Option<&'s Source<'s>>, sites: Option<&'s Sites>) -> Self {
        Diag {
            file: file.to_string(),
            src,
            sites,
            errs: Vec::new(),
        }
    }

    /// An error at the site `path`, or at `fallback` when the site is not
    /// known.
    pub fn make(&self, path: &str, fallback: Span, message: impl Into<String>) -> ConfigError {
        match (self.src, self.sites.and_then(|s| s.get(path))) {
            (Some(src), Some(r)) => src.error(r, message),
            (Some(src), None) => src.error_at(fallback, message),
            _ => ConfigError::at_span(&self.file, fallback, message),
        }
    }

    /// Whether `path` is a known site.
    pub fn has(&self, path: &str) -> bool {
        self.sites.is_some_and(|s| s.0.contains_key(path))
    }

    pub fn push(&mut self, e: ConfigError) {
        self.errs.push(e);
    }
}

/// A table with its span (the `[header]` or the `{ inline }` text) and a
/// description for messages (`[[scheduler]] "rez"`).
#[derive(Clone)]
pub(crate) struct Tab<'a, 'i> {
    pub t: &'a DeTable<'i>,
    pub span: Range<usize>,
}

impl<'a, 'i> Tab<'a, 'i> {
    pub fn get(&self, key: &str) -> Option<&'a V<'i>> {
        self.t.get(key)
    }
    /// The key's own span.
    pub fn key_span(&self, key: &str) -> Option<Range<usize>> {
        self.t
            .iter()
            .find(|(k, _)| k.get_ref().as_ref() == key)
            .map(|(k, _)| k.span())
    }
    pub fn keys(&self) -> impl Iterator<Item = (&'a str, Range<usize>)> + 'a {
        self.t.iter().map(|(k, _)| (k.get_ref().as_ref(), k.span()))
    }
}

/// A value's type, for messages.
pub(crate) fn kind_of(v: &DeValue<'_>) -> &'static str {
    match v {
        DeValue::String(_) => "a string",
        DeValue::Integer(_) => "an integer",
        DeValue::Float(_) => "a number",
        DeValue::Boolean(_) => "a boolean",
        DeValue::Datetime(_) => "a date",
        DeValue::Array(_) => "an array",
        DeValue::Table(_) => "a table",
    }
}

pub(crate) fn int_of(v: &DeValue<'_>) -> Option<i64> {
    match v {
        DeValue::Integer(i) => i64::from_str_radix(i.as_str(), i.radix()).ok(),
        _ => None,
    }
}

pub(crate) fn float_of(v: &DeValue<'_>) -> Option<f64> {
    match v {
        DeValue::Float(f) => f.as_str().replace('_', "").parse::<f64>().ok(),
        _ => None,
    }
}

/// The text of a value as written (for hints).
pub(crate) fn text_of<'t>(src: &Source<'t>, v: &V<'_>) -> &'t str {
    src.text.get(v.span()).unwrap_or("")
}

/// The first character of `name` that a name may not contain, described:
/// a control character (a newline or NUL garbles every table and trace the
/// name is printed in) or an invisible formatting one (a zero-width space
/// makes a blank or look-alike name, a bidirectional control reorders the
/// text printed after it). The zero-width joiners U+200C and U+200D are
/// allowed between visible characters: Persian and Indic words and emoji
/// sequences need them.
pub(crate) fn unprintable(name: &str) -> Option<String> {
    let joiner = |c: char| matches!(c, '\u{200C}' | '\u{200D}');
    let bad = name.chars().find_map(|c| {
        if c.is_control() {
            Some(format!("the control character {c:?}"))
        } else if invisible(c) {
            Some(format!(
                "the invisible formatting character U+{:04X}",
                c as u32
            ))
        } else {
            None
        }
    });
    bad.or_else(|| {
        (name.chars().any(joiner) && name.chars().all(|c| joiner(c) || c.is_whitespace()))
            .then(|| "only zero-width joiners".to_string())
    })
}

/// The invisible formatting characters a name may not contain.
fn invisible(c: char) -> bool {
    matches!(c,
        '\u{00AD}' | '\u{061C}' | '\u{180E}' | '\u{200B}' | '\u{200E}'..='\u{200F}'
        | '\u{2028}'..='\u{202E}' | '\u{2060}'..='\u{206F}' | '\u{FEFF}'
        | '\u{FFF9}'..='\u{FFFB}' | '\u{E0000}'..='\u{E007F}')
}

/// `name` with every character [`unprintable`] refuses replaced by `?`, as
/// `ps` prints them.
pub(crate) fn printable(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_control() || invisible(c) {
                '?'
            } else {
                c
            }
        })
        .collect()
}

/// Why a duration was refused, with what would be accepted and a hint.
pub(crate) struct DurationProblem {
    pub message: String,
    pub expected: String,
    pub hint: Option<String>,
}

pub(crate) const DURATION_EXPECTED: &str =
    "a duration in quotes with a unit: ns, us, ms, s, min or h (e.g. \"10ms\", \"1.5ms\", \"2s\")";
const UNITS: [&str; 7] = ["ns", "us", "ms", "s", "min", "m", "h"];

/// Explains why `text` is not a duration (given that it is not).
pub(crate) fn explain_duration_text(key: &str, text: &str) -> DurationProblem {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-' || c == '+'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let unit = unit.trim();
    let num_ok = num.parse::<f64>().is_ok();
    if t.is_empty() {
        return DurationProblem {
            message: format!("`{key}` is empty"),
            expected: DURATION_EXPECTED.into(),
            hint: None,
        };
    }
    if num_ok && num.trim_start().starts_with('-') {
        return DurationProblem {
            message: format!("`{key}` is negative (`{t}`)"),
            expected: "a duration of zero or more".into(),
            hint: Some(format!("write `\"{}\"`", t.trim_start_matches('-'))),
        };
    }
    if num_ok && unit.is_empty() {
        return DurationProblem {
            message: format!("`{key}` = \"{t}\" has no unit"),
            expected: DURATION_EXPECTED.into(),
            hint: Some(format!("write `\"{t}ms\"` for milliseconds")),
        };
    }
    if num_ok {
        let alias = match unit.to_lowercase().as_str() {
            "sec" | "secs" | "second" | "seconds" => Some("s"),
            "msec" | "msecs" | "millisecond" | "milliseconds" => Some("ms"),
            "usec" | "usecs" | "microsecond" | "microseconds" | "μs" => Some("us"),
            "nsec" | "nsecs" | "nanosecond" | "nanoseconds" => Some("ns"),
            "minute" | "minutes" | "mins" => Some("min"),
            "hour" | "hours" | "hr" | "hrs" => Some("h"),
            _ => None,
        };
        let hint = alias
            .map(|a| format!("did you mean `{a}`?"))
            .or_else(|| did_you_mean(unit, UNITS));
        return DurationProblem {
            message: format!("`{key}` = \"{t}\": unknown unit `{unit}`"),
            expected: "one of the units ns, us, ms, s, min, h".into(),
            hint,
        };
    }
    DurationProblem {
        message: format!("`{key}` = \"{t}\" is not a duration"),
        expected: DURATION_EXPECTED.into(),
        hint: None,
    }
}

/// Checks a parameter or field value as a duration: a string with a unit,
/// or the integer 0 (what `Params::duration` accepts).
pub(crate) fn duration_of(key: &str, v: &ParamValue) -> Result<Duration, DurationProblem> {
    match v {
        ParamValue::Str(s) => parse_duration(s, None).map_err(|e| {
            if e.is_too_long() {
                DurationProblem {
                    message: format!("`{key}` = \"{}\" is too long", s.trim()),
                    expected: format!("a duration of at most {MAX_PARSED_TEXT}"),
                    hint: None,
                }
            } else {
                explain_duration_text(key, s)
            }
        }),
        ParamValue::Int(0) => Ok(Duration::ZERO),
        ParamValue::Int(n) if *n < 0 => Err(DurationProblem {
            message: format!("`{key}` is negative ({n})"),
            expected: DURATION_EXPECTED.into(),
            hint: Some(format!(
                "durations are strings with a unit: write `{key} = \"{}ms\"`",
                n.unsigned_abs()
            )),
        }),
        ParamValue::Int(n) => Err(DurationProblem {
            message: format!("`{key}` = {n} is a bare number; a duration needs a unit"),
            expected: DURATION_EXPECTED.into(),
            hint: Some(format!(
                "write `{key} = \"{n}ms\"` (in quotes) for milliseconds"
            )),
        }),
        ParamValue::Float(x) if !x.is_finite() => Err(DurationProblem {
            message: format!(
                "`{key}` = {x} is not a duration: a duration is a finite number with a unit"
            ),
            expected: DURATION_EXPECTED.into(),
            hint: None,
        }),
        ParamValue::Float(x) => Err(DurationProblem {
            message: format!("`{key}` = {x} is a bare number; a duration needs a unit"),
            expected: DURATION_EXPECTED.into(),
            hint: Some(format!(
                "write `{key} = \"{x}ms\"` (in quotes) for milliseconds"
            )),
        }),
        ParamValue::Bool(b) => Err(DurationProblem {
            message: format!("`{key}` must be a duration, found the boolean {b}"),
            expected: DURATION_EXPECTED.into(),
            hint: None,
        }),
    }
}

/// The reader: a source text and the errors found so far.
pub(crate) struct Reader<'s> {
    pub src: &'s Source<'s>,
    pub errs: Vec<ConfigError>,
    pub sites: Sites,
}

impl<'s> Reader<'s> {
    pub fn new(src: &'s Source<'s>) -> Self {
        Reader {
            src,
            errs: Vec::new(),
            sites: Sites::default(),
        }
    }

    pub fn err(&self, r: Range<usize>, message: impl Into<String>) -> ConfigError {
        self.src.error(r, message)
    }

    pub fn push(&mut self, e: ConfigError) {
        self.errs.push(e);
    }

    pub fn span(&self, r: &Range<usize>) -> Span {
        self.src.span(r)
    }

    /// Reports every key of `tab` not in `accepted`, with a hint for a key
    /// that belongs elsewhere ([`misplaced_hint`]) or a close spelling.
    pub fn unknown_keys(&mut self, tab: &Tab<'_, '_>, what: &str, accepted: &[&str]) {
        for (k, span) in tab.keys() {
            if !accepted.contains(&k) {
                let e = self
                    .err(span, format!("unknown key `{k}` in {what}"))
                    .expected(if accepted.is_empty() {
                        "no keys here".to_string()
                    } else {
                        one_of(accepted)
                    })
                    .maybe_hint(
                        misplaced_hint(what, k)
                            .or_else(|| did_you_mean(k, accepted.iter().copied())),
                    );
                self.push(e);
            }
        }
    }

    /// Reports that `tab` lacks `key`.
    pub fn missing(&mut self, tab: &Tab<'_, '_>, what: &str, key: &str, expected: &str) {
        let e = self
            .err(tab.span.clone(), format!("{what} has no `{key}`"))
            .expected(format!("`{key} = {expected}`"));
        self.push(e);
    }

    /// Reports a value of the wrong type.
    pub fn wrong_type(&mut self, v: &V<'_>, key: &str, expected: &str) {
        let e = self
            .err(
                v.span(),
                format!("`{key}` must be {expected}, found {}", kind_of(v.get_ref())),
            )
            .expected(expected.to_string());
        self.push(e);
    }

    pub fn table<'a, 'i>(&mut self, v: &'a V<'i>, key: &str) -> Option<Tab<'a, 'i>> {
        match v.get_ref() {
            DeValue::Table(t) => Some(Tab { t, span: v.span() }),
            _ => {
                self.wrong_type(v, key, "a table");
                None
            }
        }
    }

    pub fn array<'a, 'i>(&mut self, v: &'a V<'i>, key: &str) -> Option<&'a DeArray<'i>> {
        match v.get_ref() {
            DeValue::Array(a) => Some(a),
            _ => {
                self.wrong_type(v, key, "an array");
                None
            }
        }
    }

    /// An array of tables (`[[key]]`).
    pub fn tables<'a, 'i>(&mut self, v: &'a V<'i>, key: &str) -> Vec<Tab<'a, 'i>> {
        let Some(a) = self.array(v, key) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for item in a.iter() {
            if let Some(t) = self.table(item, key) {
                out.push(t);
            }
        }
        out
    }

    pub fn string(&mut self, v: &V<'_>, key: &str) -> Option<String> {
        match v.get_ref() {
            DeValue::String(s) => Some(s.to_string()),
            _ => {
                self.wrong_type(v, key, "a string");
                None
            }
        }
    }

    /// A non-empty name.
    pub fn name(&mut self, v: &V<'_>, key: &str) -> Option<String> {
        let s = self.string(v, key)?;
        if s.trim().is_empty() {
            let e = self
                .err(v.span(), format!("`{key}` is empty"))
                .expected("a non-empty name");
            self.push(e);
            return None;
        }
        if let Some(c) = unprintable(&s) {
            let e = self
                .err(v.span(), format!("`{key}` contains {c}"))
                .expected("a name of printable characters");
            self.push(e);
            return None;
        }
        Some(s)
    }

    pub fn boolean(&mut self, v: &V<'_>, key: &str) -> Option<bool> {
        match v.get_ref() {
            DeValue::Boolean(b) => Some(*b),
            _ => {
                self.wrong_type(v, key, "true or false");
                None
            }
        }
    }

    /// A non-negative integer no larger than `max`.
    pub fn uint(&mut self, v: &V<'_>, key: &str, max: u64) -> Option<u64> {
        self.uint_from(v, key, 0, max)
    }

    /// [`uint`](Self::uint) for a key whose smallest valid value is `min`:
    /// errors name the range from `min`. A non-negative value below `min`
    /// is returned for the caller to explain.
    pub fn uint_from(&mut self, v: &V<'_>, key: &str, min: u64, max: u64) -> Option<u64> {
        match int_of(v.get_ref()) {
            Some(n) if n >= 0 && (n as u64) <= max => Some(n as u64),
            Some(n) => {
                let e = self
                    .err(v.span(), format!("`{key}` = {n} is out of range"))
                    .expected(format!("an integer from {min} to {max}"));
                self.push(e);
                None
            }
            None if matches!(v.get_ref(), DeValue::Integer(_)) => {
                let e = self
                    .err(v.span(), format!("`{key}` is too large"))
                    .expected(format!("an integer from {min} to {max}"));
                self.push(e);
                None
            }
            None => {
                self.wrong_type(v, key, "an integer");
                None
            }
        }
    }

    /// A finite number (integers accepted).
    pub fn number(&mut self, v: &V<'_>, key: &str) -> Option<f64> {
        let x = match v.get_ref() {
            DeValue::Integer(_) => int_of(v.get_ref()).map(|n| n as f64),
            DeValue::Float(_) => float_of(v.get_ref()),
            _ => {
                self.wrong_type(v, key, "a number");
                return None;
            }
        };
        match x {
            Some(x) if x.is_finite() => Some(x),
            _ => {
                let e = self
                    .err(v.span(), format!("`{key}` must be a finite number"))
                    .expected("a number such as `0.25`");
                self.push(e);
                None
            }
        }
    }

    /// A duration with a unit (`"10ms"`), or the integer 0.
    pub fn duration(&mut self, v: &V<'_>, key: &str) -> Option<Duration> {
        let pv = match v.get_ref() {
            DeValue::String(s) => ParamValue::Str(s.to_string()),
            DeValue::Integer(_) => match int_of(v.get_ref()) {
                Some(n) => ParamValue::Int(n),
                None => {
                    self.wrong_type(v, key, DURATION_EXPECTED);
                    return None;
                }
            },
            DeValue::Float(_) => ParamValue::Float(float_of(v.get_ref()).unwrap_or(f64::NAN)),
            _ => {
                self.wrong_type(v, key, DURATION_EXPECTED);
                return None;
            }
        };
        match duration_of(key, &pv) {
            Ok(d) => Some(d),
            Err(p) => {
                let e = self
                    .err(v.span(), p.message)
                    .expected(p.expected)
                    .maybe_hint(p.hint);
                self.push(e);
                None
            }
        }
    }

    /// A table of scalar parameters. Records the site of each key under
    /// `path.key` and of each value under `path.key=`; the table itself
    /// under `path`.
    pub fn params(&mut self, v: &V<'_>, key: &str, path: &str) -> Option<Params> {
        let tab = self.table(v, key)?;
        self.sites.put(path.to_string(), tab.span.clone());
        let mut p = Params::new();
        let mut ok = true;
        for (k, val) in tab.t.iter() {
            let k = k.get_ref().as_ref();
            self.sites.put(
                format!("{path}.{k}"),
                tab.key_span(k).unwrap_or_else(|| val.span()),
            );
            self.sites.put(format!("{path}.{k}="), val.span());
            match self.scalar(val, k) {
                Some(pv) => p.insert(k, pv),
                None => ok = false,
            }
        }
        ok.then_some(p)
    }

    /// A parameter value: integer, number, string or boolean.
    pub fn scalar(&mut self, v: &V<'_>, key: &str) -> Option<ParamValue> {
        match v.get_ref() {
            DeValue::String(s) => Some(ParamValue::Str(s.to_string())),
            DeValue::Boolean(b) => Some(ParamValue::Bool(*b)),
            DeValue::Integer(_) => match int_of(v.get_ref()) {
                Some(n) => Some(ParamValue::Int(n)),
                None => {
                    let e = self
                        .err(v.span(), format!("`{key}` is too large"))
                        .expected("an integer that fits in 64 bits");
                    self.push(e);
                    None
                }
            },
            DeValue::Float(_) => match float_of(v.get_ref()) {
                Some(x) if x.is_finite() => Some(ParamValue::Float(x)),
                _ => {
                    let e = self
                        .err(v.span(), format!("`{key}` must be a finite number"))
                        .expected("a finite number such as `0.25`, or for a duration a finite number with a unit, in quotes (\"10ms\")");
                    self.push(e);
                    None
                }
            },
            other => {
                let e = self
                    .err(
                        v.span(),
                        format!(
                            "parameter `{key}` must be a number, a string or a boolean, found {}",
                            kind_of(other)
                        ),
                    )
                    .expected("a number, a string (durations: \"10ms\") or true/false");
                self.push(e);
                None
            }
        }
    }
}

/// What to write instead of a key that is valid elsewhere but not in
/// `what`: a thread has one scheduler, so several parents take a join.
fn misplaced_hint(what: &str, key: &str) -> Option<String> {
    (what == "[[thread]]" && matches!(key, "parent" | "parents")).then(|| {
        "a thread has one `scheduler`; to run it under several, give it a `join` scheduler whose `parents` are those (Regehr 2001, §9.3.4)".to_string()
    })
}
