//! Guarantee mappings declared as data: what a policy loaded at run time
//! (a plug-in, docs/plugin-abi.md) says it needs and gives, so that the
//! composition check treats it as Table 5.1 treats the built-in
//! schedulers (Regehr 2001, §5.2, §5.3).
//!
//! A declaration has three parts:
//!
//! * `needs`: `any`, or guarantee types separated by commas (`ALL, RESU`);
//!   a received guarantee is used as it is when its type is listed, else
//!   converted into the first listed type that Table 5.2 reaches.
//! * `gives`: `NULL` (best effort, `any ↦ NULL⁺`), `top:priority` (fixed
//!   priority, `any ↦ (any, NULL⁺)`, §5.3.1.1), or a guarantee template
//!   such as `RESCS {amount} {period}`: every child receives the template
//!   with its own parent-side parameters (`amount`, `period`, `share`,
//!   `proportion`, `priority`) and the instance's `quantum` filled in.
//! * `cap` in (0, 1]: children given templates are admitted in order
//!   while their rates add up to no more than `cap` times the rate the
//!   instance receives, as Rez admits reservations.
//!
//! The declaration is the policy's claim: hsched composes it, it does not
//! prove that the code keeps it.

use std::fmt;

use crate::mapping::{BestEffort, ChildRequest, FixedPriority, InstanceParams, Mapping, Provision};
use crate::parse::{Ms, Share};
use crate::rta::EPS;
use crate::types::{Guarantee, GuaranteeKind};
use crate::{convert, ConvertParams};

/// What a declared mapping gives each child.
#[derive(Clone, Debug, PartialEq)]
pub enum Gives {
    /// Nothing: best effort.
    Null,
    /// Fixed priority by the child parameter `priority`.
    TopPriority,
    /// This guarantee, with `{name}` filled in per child.
    Template(String),
}

/// A guarantee mapping read from a declaration (see the module docs).
#[derive(Clone, Debug, PartialEq)]
pub struct Declared {
    policy: String,
    /// `None`: any guarantee.
    needs: Option<Vec<GuaranteeKind>>,
    gives: Gives,
    cap: f64,
}

/// The names a template may use.
const CHILD_NAMES: &[&str] = &["amount", "period", "share", "proportion", "priority"];
const INSTANCE_NAMES: &[&str] = &["quantum"];

impl Declared {
    /// Reads a declaration for the policy named `policy`.
    ///
    /// # Errors
    /// An unknown guarantee type in `needs`, a `gives` that is none of the
    /// three forms, a template naming a value the analysis does not keep
    /// or that does not parse as a guarantee, or `cap` outside (0, 1].
    pub fn parse(policy: &str, needs: &str, gives: &str, cap: f64) -> Result<Declared, String> {
        if !(cap.is_finite() && cap > 0.0 && cap <= 1.0) {
            return Err(format!("`cap` = {cap} must be in (0, 1]"));
        }
        let needs = if needs.trim().eq_ignore_ascii_case("any") {
            None
        } else {
            let mut kinds = Vec::new();
            for name in needs.split(',').map(str::trim) {
                let k = GuaranteeKind::from_name(name).ok_or_else(|| {
                    format!("`needs`: `{name}` is not a guarantee type (ALL, RESU, RESBH, RESBS, RESCH, RESCS, PSBE, PS, NULL, …) or `any`")
                })?;
                kinds.push(k);
            }
            if kinds.is_empty() {
                return Err("`needs` names no guarantee type".into());
            }
            Some(kinds)
        };
        let g = gives.trim();
        let gives = if g.eq_ignore_ascii_case("null") {
            Gives::Null
        } else if let Some(key) = g.strip_prefix("top:") {
            if key != "priority" {
                return Err(format!(
                    "`gives` = \"{g}\": fixed priority orders children by `priority`, the only integer the analysis keeps per child (write \"top:priority\")"
                ));
            }
            Gives::TopPriority
        } else {
            // A template must parse once every name is filled in.
            let sample = fill(g, &|name| {
                Some(match name {
                    "amount" => "1".to_string(),
                    "period" | "quantum" => "2".to_string(),
                    "share" | "proportion" => "0.5".to_string(),
                    _ => "1".to_string(),
                })
            })
            .map_err(|e| format!("`gives` = \"{g}\": {e}"))?;
            sample.parse::<Guarantee>().map_err(|e| {
                format!("`gives` = \"{g}\" is not NULL, top:priority or a guarantee template: {e}")
            })?;
            Gives::Template(g.to_string())
        };
        Ok(Declared {
            policy: policy.to_string(),
            needs,
            gives,
            cap,
        })
    }

    /// What each child gets.
    pub fn gives(&self) -> &Gives {
        &self.gives
    }

    /// The mapping of one instance with parameters `params`.
    pub fn instantiate(&self, params: &InstanceParams) -> DeclaredMapping {
        DeclaredMapping {
            decl: self.clone(),
            quantum: params.quantum,
        }
    }
}

/// `template` with each `{name}` replaced by `value(name)`.
fn fill(template: &str, value: &dyn Fn(&str) -> Option<String>) -> Result<String, String> {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let close = after
            .find('}')
            .ok_or_else(|| "a `{` without its `}`".to_string())?;
        let name = after[..close].trim();
        if !CHILD_NAMES.contains(&name) && !INSTANCE_NAMES.contains(&name) {
            return Err(format!(
                "`{{{name}}}` is not a value the analysis keeps (children: {}; the instance: {})",
                CHILD_NAMES.join(", "),
                INSTANCE_NAMES.join(", ")
            ));
        }
        out.push_str(&value(name).ok_or_else(|| format!("no `{name}` is given"))?);
        rest = &after[close + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// One instance of a [`Declared`] mapping.
#[derive(Clone, Debug)]
pub struct DeclaredMapping {
    decl: Declared,
    quantum: Option<hsched_core::time::Duration>,
}

const RULE: &str = "the plug-in's declared mapping (docs/plugin-abi.md)";

impl DeclaredMapping {
    fn child_value(&self, child: &ChildRequest<'_>, name: &str) -> Option<String> {
        let p = child.params;
        match name {
            "amount" => p.amount.map(|d| Ms(d).to_string()),
            "period" => p.period.map(|d| Ms(d).to_string()),
            "share" => p.share.map(|s| Share(s).to_string()),
            "proportion" => p.proportion.map(|s| Share(s).to_string()),
            "priority" => p.priority.map(|v| v.to_string()),
            "quantum" => self.quantum.map(|d| Ms(d).to_string()),
            _ => None,
        }
    }
}

impl Mapping for DeclaredMapping {
    fn policy(&self) -> &str {
        &self.decl.policy
    }
    fn title(&self) -> &str {
        &self.decl.policy
    }
    fn needs(&self) -> String {
        match &self.decl.needs {
            None => "any guarantee".into(),
            Some(k) => k
                .iter()
                .map(|k| k.to_string())
                .collect::<Vec<_>>()
                .join(" or "),
        }
    }
    fn max_parents(&self) -> Option<usize> {
        match self.decl.gives {
            Gives::Template(_) => Some(1),
            _ => None,
        }
    }
    fn accepts(&self, g: &Guarantee) -> Result<Guarantee, String> {
        let Some(kinds) = &self.decl.needs else {
            return Ok(*g);
        };
        if kinds.contains(&g.kind()) {
            return Ok(*g);
        }
        let mut why = Vec::new();
        for &k in kinds {
            match convert(g, k, &ConvertParams::default()) {
                Ok(c) => return Ok(c),
                Err(e) => why.push(e.to_string()),
            }
        }
        Err(why.join("; "))
    }
    fn child_guarantees(
        &self,
        received: &[Guarantee],
        children: &[ChildRequest<'_>],
    ) -> Vec<Result<Provision, String>> {
        match &self.decl.gives {
            Gives::Null => BestEffort::new(&self.decl.policy, &self.decl.policy)
                .with_rule(RULE)
                .child_guarantees(received, children),
            Gives::TopPriority => FixedPriority
                .child_guarantees(received, children)
                .into_iter()
                .map(|r| {
                    r.map(|p| Provision {
                        rule: RULE.into(),
                        ..p
                    })
                })
                .collect(),
            Gives::Template(t) => {
                let limit = self.decl.cap * received.first().map_or(0.0, Guarantee::rate);
                let mut total = 0.0;
                children
                    .iter()
                    .map(|child| {
                        let text = fill(t, &|name| self.child_value(child, name))
                            .map_err(|e| format!("\"{t}\" for '{}': {e}", child.name))?;
                        let g: Guarantee = text
                            .parse()
                            .map_err(|e| format!("\"{text}\" for '{}': {e}", child.name))?;
                        let rate = g.rate();
                        if total + rate > limit + EPS {
                            return Err(format!(
                                "admission refused: {g} needs {:.1}% but {:.1}% of the {:.1}% the plug-in can give is already given",
                                rate * 100.0,
                                total * 100.0,
                                limit * 100.0
                            ));
                        }
                        total += rate;
                        Ok(Provision::one(g, RULE))
                    })
                    .collect()
            }
        }
    }
}

impl fmt::Display for Gives {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Gives::Null => f.write_str("NULL"),
            Gives::TopPriority => f.write_str("top:priority"),
            Gives::Template(t) => f.write_str(t),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mapping::EdgeParams;
    use hsched_core::time::Duration;

    fn child<'a>(name: &'a str, p: &'a EdgeParams) -> ChildRequest<'a> {
        ChildRequest {
            name,
            is_thread: true,
            params: p,
            request: None,
            multiprocessor: false,
        }
    }

    #[test]
    fn templates_fill_in_each_child_and_admit_by_rate() {
        let d = Declared::parse("rescs.wasm", "ALL", "RESCS {amount} {period}", 1.0).unwrap();
        let m = d.instantiate(&InstanceParams::default());
        let a = EdgeParams {
            amount: Some(Duration::from_millis(10)),
            period: Some(Duration::from_millis(20)),
            ..Default::default()
        };
        let b = EdgeParams {
            amount: Some(Duration::from_millis(15)),
            period: Some(Duration::from_millis(20)),
            ..Default::default()
        };
        let out = m.child_guarantees(&[Guarantee::All], &[child("a", &a), child("b", &b)]);
        assert_eq!(out[0].as_ref().unwrap().first().to_string(), "RESCS 10 20");
        let e = out[1].as_ref().unwrap_err();
        assert!(e.contains("admission refused"), "{e}");
        // A child without the values the template names is refused.
        let none = EdgeParams::default();
        let out = m.child_guarantees(&[Guarantee::All], &[child("c", &none)]);
        assert!(out[0].as_ref().unwrap_err().contains("no `amount`"));
    }

    #[test]
    fn needs_convert_what_is_received_or_say_why_not() {
        let d = Declared::parse("x.wasm", "PSBE", "PS {share}", 1.0).unwrap();
        let m = d.instantiate(&InstanceParams::default());
        let got = m.accepts(&"RESCS 10 20".parse().unwrap()).unwrap();
        assert_eq!(got.to_string(), "PSBE 0.5 5");
        assert!(m.accepts(&Guarantee::Null).is_err());
        let eevdf = Declared::parse("e.wasm", "ALL", "PSBE {share} {quantum}", 1.0).unwrap();
        let m = eevdf.instantiate(&InstanceParams {
            quantum: Some(Duration::from_micros(500)),
            ..Default::default()
        });
        let s = EdgeParams {
            share: Some(0.45),
            ..Default::default()
        };
        let out = m.child_guarantees(&[Guarantee::All], &[child("t", &s)]);
        assert_eq!(
            out[0].as_ref().unwrap().first().to_string(),
            "PSBE 0.45 0.5"
        );
    }

    #[test]
    fn bad_declarations_are_refused_with_the_reason() {
        let e = |n: &str, g: &str, c: f64| Declared::parse("p", n, g, c).unwrap_err();
        assert!(e("FOO", "NULL", 1.0).contains("`FOO`"));
        assert!(e("any", "top:weight", 1.0).contains("top:priority"));
        assert!(e("any", "RESBH {amount} {size}", 1.0).contains("`{size}`"));
        assert!(e("any", "RESBH {amount}", 1.0).contains("not NULL"));
        assert!(e("any", "NULL", 0.0).contains("(0, 1]"));
        assert!(e("any", "RESBH {amount", 1.0).contains("`{`"));
    }
}
