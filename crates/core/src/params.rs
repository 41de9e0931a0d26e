//! Policy parameters: a small typed key/value map that hierarchy files,
//! control messages and policies share. Values stay as written until a
//! policy asks for a type, so the error names the key and what was expected.

use crate::time::{parse_duration, Duration};
use std::collections::BTreeMap;
use std::fmt;

/// One parameter value as written in a hierarchy file or control message.
#[derive(Clone, Debug, PartialEq)]
pub enum ParamValue {
    /// An integer.
    Int(i64),
    /// A float.
    Float(f64),
    /// A string; durations are strings with a unit (`"10ms"`).
    Str(String),
    /// A boolean.
    Bool(bool),
}

impl fmt::Display for ParamValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParamValue::Int(v) => write!(f, "{v}"),
            ParamValue::Float(v) => write!(f, "{v}"),
            ParamValue::Str(v) => write!(f, "{v}"),
            ParamValue::Bool(v) => write!(f, "{v}"),
        }
    }
}

/// A parameter that was present but had the wrong type or value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParamError {
    /// The key.
    pub key: String,
    /// What was wrong and what would be accepted.
    pub message: String,
}

impl fmt::Display for ParamError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "parameter `{}`: {}", self.key, self.message)
    }
}
impl std::error::Error for ParamError {}

/// Parameters keyed by name, iterated in key order (deterministic).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Params(BTreeMap<String, ParamValue>);

impl Params {
    /// No parameters.
    pub fn new() -> Self {
        Params(BTreeMap::new())
    }

    /// Adds or replaces a value; returns `self` for chaining.
    pub fn with(mut self, key: &str, value: ParamValue) -> Self {
        self.0.insert(key.to_string(), value);
        self
    }

    /// Adds or replaces a value.
    pub fn insert(&mut self, key: &str, value: ParamValue) {
        self.0.insert(key.to_string(), value);
    }

    /// The raw value of `key`.
    pub fn get(&self, key: &str) -> Option<&ParamValue> {
        self.0.get(key)
    }

    /// Whether there are no parameters.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Keys and values in key order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &ParamValue)> {
        self.0.iter().map(|(k, v)| (k.as_str(), v))
    }

    /// Keys not in `known`, in key order: callers report them as errors.
    pub fn unknown_keys<'a>(&'a self, known: &'a [&str]) -> impl Iterator<Item = &'a str> + 'a {
        self.0
            .keys()
            .map(|k| k.as_str())
            .filter(move |k| !known.contains(k))
    }

    fn err(key: &str, message: impl Into<String>) -> ParamError {
        ParamError {
            key: key.to_string(),
            message: message.into(),
        }
    }

    /// A duration with a unit (`"10ms"`).
    ///
    /// # Errors
    /// The value is not a string with a valid unit.
    pub fn duration(&self, key: &str) -> Result<Option<Duration>, ParamError> {
        match self.0.get(key) {
            None => Ok(None),
            Some(ParamValue::Str(s)) => parse_duration(s, None)
                .map(Some)
                .map_err(|e| Self::err(key, e.message)),
            Some(ParamValue::Int(0)) => Ok(Some(Duration::ZERO)),
            Some(v) => Err(Self::err(
                key,
                format!("expected a duration with a unit such as \"10ms\", found `{v}`"),
            )),
        }
    }

    /// A non-negative integer.
    ///
    /// # Errors
    /// The value is not an integer, or is negative.
    pub fn u64(&self, key: &str) -> Result<Option<u64>, ParamError> {
        match self.0.get(key) {
            None => Ok(None),
            Some(ParamValue::Int(v)) if *v >= 0 => Ok(Some(*v as u64)),
            Some(v) => Err(Self::err(
                key,
                format!("expected a non-negative integer, found `{v}`"),
            )),
        }
    }

    /// A signed integer.
    ///
    /// # Errors
    /// The value is not an integer.
    pub fn i64(&self, key: &str) -> Result<Option<i64>, ParamError> {
        match self.0.get(key) {
            None => Ok(None),
            Some(ParamValue::Int(v)) => Ok(Some(*v)),
            Some(v) => Err(Self::err(key, format!("expected an integer, found `{v}`"))),
        }
    }

    /// A finite number (integers are accepted).
    ///
    /// # Errors
    /// The value is not a finite number.
    pub fn f64(&self, key: &str) -> Result<Option<f64>, ParamError> {
        match self.0.get(key) {
            None => Ok(None),
            Some(ParamValue::Int(v)) => Ok(Some(*v as f64)),
            Some(ParamValue::Float(v)) if v.is_finite() => Ok(Some(*v)),
            Some(v) => Err(Self::err(key, format!("expected a number, found `{v}`"))),
        }
    }

    /// A string.
    ///
    /// # Errors
    /// The value is not a string.
    pub fn str(&self, key: &str) -> Result<Option<&str>, ParamError> {
        match self.0.get(key) {
            None => Ok(None),
            Some(ParamValue::Str(s)) => Ok(Some(s)),
            Some(v) => Err(Self::err(key, format!("expected a string, found `{v}`"))),
        }
    }

    /// A boolean.
    ///
    /// # Errors
    /// The value is not a boolean.
    pub fn bool(&self, key: &str) -> Result<Option<bool>, ParamError> {
        match self.0.get(key) {
            None => Ok(None),
            Some(ParamValue::Bool(b)) => Ok(Some(*b)),
            Some(v) => Err(Self::err(
                key,
                format!("expected true or false, found `{v}`"),
            )),
        }
    }

    /// A required duration.
    ///
    /// # Errors
    /// Missing, or not a duration.
    pub fn require_duration(&self, key: &str) -> Result<Duration, ParamError> {
        self.duration(key)?
            .ok_or_else(|| Self::err(key, "is required (a duration such as \"10ms\")"))
    }
}

impl fmt::Display for Params {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for (k, v) in &self.0 {
            if !first {
                f.write_str(" ")?;
            }
            first = false;
            write!(f, "{k}={v}")?;
        }
        Ok(())
    }
}

/// Declares one parameter a policy accepts, for validation and docs.
#[derive(Clone, Copy, Debug)]
pub struct ParamSpec {
    /// The key.
    pub key: &'static str,
    /// The expected kind, for humans: "duration", "integer", "number", ...
    pub kind: &'static str,
    /// The default, as text ("required" when there is none).
    pub default: &'static str,
    /// What it means.
    pub doc: &'static str,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typed_getters_name_the_key() {
        let p = Params::new()
            .with("amount", ParamValue::Str("10ms".into()))
            .with("share", ParamValue::Int(3))
            .with("bad", ParamValue::Str("ten".into()));
        assert_eq!(
            p.duration("amount").unwrap(),
            Some(Duration::from_millis(10))
        );
        assert_eq!(p.f64("share").unwrap(), Some(3.0));
        assert_eq!(p.u64("missing").unwrap(), None);
        let e = p.duration("bad").unwrap_err();
        assert_eq!(e.key, "bad");
        assert!(p.duration("share").is_err());
        assert_eq!(
            p.unknown_keys(&["amount", "share"]).collect::<Vec<_>>(),
            vec!["bad"]
        );
    }
}
