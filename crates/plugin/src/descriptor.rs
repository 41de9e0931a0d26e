//! The JSON descriptor a plug-in returns from `hs_descriptor`
//! (docs/plugin-abi.md, "Descriptor").

use hsched_core::{ParamSpec, ParamValue, Params};
use serde_json::{Map, Value};

/// The ABI version this host implements.
pub const ABI_VERSION: i32 = 1;

/// Kinds a declared parameter may have, as `hsched policies` prints them.
const KINDS: &[&str] = &["integer", "number", "duration", "bool", "string"];

/// What a plug-in declares about itself.
#[derive(Clone, Debug, PartialEq)]
pub struct Descriptor {
    /// Its name, for messages.
    pub name: String,
    /// One line on what it does.
    pub summary: String,
    /// The sections it implements.
    pub source: String,
    /// Parameters of the instance.
    pub instance_params: Vec<Param>,
    /// Parent-side parameters of a child.
    pub child_params: Vec<Param>,
    /// Extra keys a `SetParams` about a child may give.
    pub change_params: Vec<Param>,
    /// One parent VP per processor the parent offers (else one).
    pub multiprocessor: bool,
    /// Most children at once.
    pub max_children: Option<usize>,
    /// The guarantee mapping, when declared.
    pub guarantee: Option<GuaranteeDecl>,
}

/// One declared parameter.
#[derive(Clone, Debug, PartialEq)]
pub struct Param {
    /// The key.
    pub key: String,
    /// One of `KINDS` (integer, number, duration, bool, string).
    pub kind: String,
    /// The default as text, or `"required"`.
    pub default: String,
    /// What it means.
    pub doc: String,
    /// The least value an `integer` or `number` parameter takes, if bounded.
    pub min: Option<f64>,
    /// The greatest value an `integer` or `number` parameter takes, if
    /// bounded.
    pub max: Option<f64>,
}

impl Param {
    /// Whether a file must give it.
    pub fn required(&self) -> bool {
        self.default == "required"
    }

    /// A `ParamSpec` for the registry (the strings live as long as the
    /// process: a loaded plug-in is never unloaded from the registry).
    pub fn spec(&self) -> ParamSpec {
        ParamSpec {
            key: leak(&self.key),
            kind: leak(&self.kind),
            default: leak(&self.default),
            doc: leak(&self.doc),
        }
    }

    /// Whether `v` has this parameter's kind and lies in its range; the
    /// reason when not.
    pub fn check(&self, v: &ParamValue) -> Result<(), String> {
        let p = Params::new().with(&self.key, v.clone());
        let in_range = |x: f64| {
            let below = self.min.is_some_and(|m| x < m);
            let above = self.max.is_some_and(|m| x > m);
            if below || above {
                let bound = |b: Option<f64>| b.map_or("…".to_string(), |b| b.to_string());
                Err(format!(
                    "{x} is outside {} to {}, the range the plug-in declares",
                    bound(self.min),
                    bound(self.max)
                ))
            } else {
                Ok(())
            }
        };
        let r = match self.kind.as_str() {
            "integer" => match p.i64(&self.key) {
                Ok(Some(x)) => return in_range(x as f64),
                other => other.map(drop),
            },
            "number" => match p.f64(&self.key) {
                Ok(Some(x)) => return in_range(x),
                other => other.map(drop),
            },
            "duration" => p.duration(&self.key).map(drop),
            "bool" => p.bool(&self.key).map(drop),
            _ => match v {
                ParamValue::Str(_) => Ok(()),
                _ => return Err(format!("expected a string, found `{v}`")),
            },
        };
        r.map_err(|e| e.message)
    }
}

/// The guarantee mapping a plug-in declares (docs/plugin-abi.md,
/// "Guarantee mapping").
#[derive(Clone, Debug, PartialEq)]
pub struct GuaranteeDecl {
    /// `"any"` or guarantee type names separated by commas.
    pub needs: String,
    /// `"NULL"`, `"top:KEY"` or a guarantee template.
    pub gives: String,
    /// The fraction of what it receives it hands out, in (0, 1].
    pub cap: f64,
}

impl GuaranteeDecl {
    /// The mapping the analysis composes, for the policy named `policy`.
    ///
    /// # Errors
    /// A declaration the guarantee syntax does not read (checked at load,
    /// so a loaded plug-in's never fails).
    pub fn mapping(&self, policy: &str) -> Result<hsched_guarantee::declared::Declared, String> {
        hsched_guarantee::declared::Declared::parse(policy, &self.needs, &self.gives, self.cap)
    }
}

/// Leaks `s` for a `&'static str` field of the registry.
pub(crate) fn leak(s: &str) -> &'static str {
    Box::leak(s.to_string().into_boxed_str())
}

fn string(obj: &Map<String, Value>, key: &str, required: bool) -> Result<String, String> {
    match obj.get(key) {
        Some(Value::String(s)) => Ok(s.clone()),
        None | Some(Value::Null) if !required => Ok(String::new()),
        None => Err(format!("the descriptor has no `{key}`")),
        Some(v) => Err(format!("`{key}` must be a string, found {v}")),
    }
}

fn params(obj: &Map<String, Value>, key: &str) -> Result<Vec<Param>, String> {
    let list = match obj.get(key) {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(a)) => a,
        Some(v) => return Err(format!("`{key}` must be a list of parameters, found {v}")),
    };
    let mut out: Vec<Param> = Vec::new();
    for (i, item) in list.iter().enumerate() {
        let Value::Object(p) = item else {
            return Err(format!("`{key}[{i}]` must be an object"));
        };
        let ctx = |e: String| format!("`{key}[{i}]`: {e}");
        let param = Param {
            key: string(p, "key", true).map_err(ctx)?,
            kind: string(p, "kind", true).map_err(ctx)?,
            default: string(p, "default", false).map_err(ctx)?,
            doc: string(p, "doc", false).map_err(ctx)?,
            min: bound(p, "min").map_err(ctx)?,
            max: bound(p, "max").map_err(ctx)?,
        };
        if (param.min.is_some() || param.max.is_some())
            && !["integer", "number"].contains(&param.kind.as_str())
        {
            return Err(ctx(format!(
                "`min` and `max` bound integer and number parameters, not a {}",
                param.kind
            )));
        }
        let param = Param {
            default: if param.default.is_empty() {
                "required".into()
            } else {
                param.default
            },
            ..param
        };
        if !valid_name(&param.key) {
            return Err(format!(
                "`{key}[{i}]`: key `{}` must be letters, digits and `_`",
                param.key
            ));
        }
        if !KINDS.contains(&param.kind.as_str()) {
            return Err(format!(
                "`{key}[{i}]`: kind `{}` is not one of {}",
                param.kind,
                KINDS.join(", ")
            ));
        }
        if out.iter().any(|p| p.key == param.key) {
            return Err(format!("`{key}` declares `{}` twice", param.key));
        }
        out.push(param);
    }
    Ok(out)
}

fn bound(p: &Map<String, Value>, key: &str) -> Result<Option<f64>, String> {
    match p.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => Ok(n.as_f64()),
        Some(v) => Err(format!("`{key}` must be a number, found {v}")),
    }
}

fn valid_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Parses a descriptor.
///
/// # Errors
/// Not JSON, not an object, another ABI version, a field of the wrong
/// shape; the message names the field.
pub fn parse(text: &str) -> Result<Descriptor, String> {
    let v: Value = serde_json::from_str(text).map_err(|e| format!("not valid JSON: {e}"))?;
    let Value::Object(obj) = v else {
        return Err("the descriptor must be a JSON object".into());
    };
    const KEYS: &[&str] = &[
        "abi",
        "name",
        "summary",
        "source",
        "instance_params",
        "child_params",
        "change_params",
        "multiprocessor",
        "max_children",
        "guarantee",
    ];
    if let Some(k) = obj.keys().find(|k| !KEYS.contains(&k.as_str())) {
        return Err(format!(
            "unknown key `{k}`; a version-{ABI_VERSION} descriptor has {}",
            KEYS.join(", ")
        ));
    }
    match obj.get("abi") {
        Some(Value::Number(n)) if n.as_i64() == Some(ABI_VERSION as i64) => {}
        Some(Value::Number(n)) => {
            return Err(format!(
            "the descriptor is for ABI version {n}; this hsched implements version {ABI_VERSION}"
        ))
        }
        Some(v) => return Err(format!("`abi` must be a number, found {v}")),
        None => return Err("the descriptor has no `abi`".into()),
    }
    let name = string(&obj, "name", true)?;
    if !valid_name(&name) {
        return Err(format!(
            "name `{name}` must be 1 to 64 letters, digits, `_` or `-`"
        ));
    }
    let multiprocessor = match obj.get("multiprocessor") {
        None | Some(Value::Null) => true,
        Some(Value::Bool(b)) => *b,
        Some(v) => return Err(format!("`multiprocessor` must be true or false, found {v}")),
    };
    let max_children = match obj.get("max_children") {
        None | Some(Value::Null) => None,
        Some(Value::Number(n)) if n.as_u64().is_some_and(|n| n >= 1) => {
            Some(n.as_u64().unwrap_or(1) as usize)
        }
        Some(v) => {
            return Err(format!(
                "`max_children` must be a positive integer or null, found {v}"
            ))
        }
    };
    let guarantee = match obj.get("guarantee") {
        None | Some(Value::Null) => None,
        Some(Value::Object(g)) => {
            if let Some(k) = g
                .keys()
                .find(|k| !["needs", "gives", "cap"].contains(&k.as_str()))
            {
                return Err(format!(
                    "`guarantee` has an unknown key `{k}`; it takes needs, gives, cap"
                ));
            }
            let cap = match g.get("cap") {
                None | Some(Value::Null) => 1.0,
                Some(Value::Number(n)) => n.as_f64().unwrap_or(f64::NAN),
                Some(v) => return Err(format!("`guarantee.cap` must be a number, found {v}")),
            };
            if !(cap > 0.0 && cap <= 1.0) {
                return Err(format!("`guarantee.cap` = {cap} must be in (0, 1]"));
            }
            let ctx = |e: String| format!("`guarantee`: {e}");
            let decl = GuaranteeDecl {
                needs: string(g, "needs", true).map_err(ctx)?,
                gives: string(g, "gives", true).map_err(ctx)?,
                cap,
            };
            decl.mapping(&name).map_err(ctx)?;
            Some(decl)
        }
        Some(v) => return Err(format!("`guarantee` must be an object, found {v}")),
    };
    Ok(Descriptor {
        name,
        summary: string(&obj, "summary", false)?,
        source: string(&obj, "source", false)?,
        instance_params: params(&obj, "instance_params")?,
        child_params: params(&obj, "child_params")?,
        change_params: params(&obj, "change_params")?,
        multiprocessor,
        max_children,
        guarantee,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_documented_example() {
        let d = parse(
            r#"{"abi":1,"name":"fp-wasm","child_params":[{"key":"priority","kind":"integer","default":"0","doc":"higher runs first"}],"guarantee":{"needs":"any","gives":"top:priority"}}"#,
        )
        .unwrap();
        assert_eq!(d.name, "fp-wasm");
        assert!(d.multiprocessor);
        assert_eq!(d.child_params[0].key, "priority");
        assert_eq!(d.guarantee.unwrap().gives, "top:priority");
    }

    #[test]
    fn names_what_is_wrong() {
        let e = |t: &str| parse(t).unwrap_err();
        assert!(e("{").starts_with("not valid JSON"));
        assert!(e(r#"{"abi":2,"name":"x"}"#).contains("ABI version 2"));
        assert!(e(r#"{"abi":1}"#).contains("no `name`"));
        assert!(e(r#"{"abi":1,"name":"x","colour":1}"#).contains("unknown key `colour`"));
        assert!(
            e(r#"{"abi":1,"name":"x","child_params":[{"key":"p","kind":"float"}]}"#)
                .contains("kind `float`")
        );
        assert!(
            e(r#"{"abi":1,"name":"x","guarantee":{"needs":"any","gives":"NULL","cap":2}}"#)
                .contains("(0, 1]")
        );
    }

    #[test]
    fn checks_a_value_against_the_kind() {
        let p = Param {
            key: "amount".into(),
            kind: "duration".into(),
            default: "required".into(),
            doc: String::new(),
            min: None,
            max: None,
        };
        assert!(p.check(&ParamValue::Str("10ms".into())).is_ok());
        assert!(p.check(&ParamValue::Int(3)).is_err());
        assert!(p.required());
        let t = Param {
            key: "tickets".into(),
            kind: "integer".into(),
            min: Some(1.0),
            ..p
        };
        assert!(t.check(&ParamValue::Int(1)).is_ok());
        assert!(t
            .check(&ParamValue::Int(0))
            .unwrap_err()
            .contains("outside 1 to"));
    }
}
