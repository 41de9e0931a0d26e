//! `hsched policies`: what the registry knows, for people writing hierarchy
//! files.

use crate::outcome::{input_error, Outcome};
use hsched_core::ParamSpec;
use hsched_policies::{registry, PolicyInfo};
use std::io::Write;

/// Long help.
pub const LONG_ABOUT: &str = "\
List the scheduling policies a hierarchy file can name in `policy = \"...\"`,
with the parameters of an instance (keys of its [[scheduler]] table) and the
parameters its children register with (the `params = { ... }` of a child
scheduler or thread).";

/// Examples shown by `--help`.
pub const EXAMPLES: &str = "\
Examples:
  hsched policies          # every policy, with its parameters
  hsched policies rez      # one policy
  hsched policies sdk/build/lottery.wasm   # a plug-in: its parameters and mapping";

/// Arguments of `hsched policies`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Show only this policy; a path ending in `.wasm` loads that plug-in
    /// and shows what it declares
    #[arg(value_name = "POLICY")]
    pub name: Option<String>,
}

/// Prints the registry.
///
/// # Errors
/// An unknown policy name (input error), or stdout closed.
pub fn run(args: &Args) -> anyhow::Result<Outcome> {
    if let Some(path) = args
        .name
        .as_deref()
        .filter(|n| hsched_plugin::is_plugin_name(n))
    {
        let info = hsched_plugin::register(path, std::path::Path::new(path))
            .map_err(|e| input_error(format!("error: {e}")))?;
        let mut text = render(&[&info]);
        let decl = hsched_plugin::module_named(path).and_then(|m| m.descriptor.guarantee.clone());
        text.push_str(&match decl {
            Some(g) => format!(
                "  guarantee mapping (declared): needs {}, gives {}{}\n",
                g.needs,
                g.gives,
                if g.cap < 1.0 { format!(", cap {}", g.cap) } else { String::new() }
            ),
            None => "  guarantee mapping: none declared; `analyze` treats it as best effort (accepts anything, promises its children NULL)\n".to_string(),
        });
        crate::output::report().write_all(text.as_bytes())?;
        return Ok(Outcome::Ok);
    }
    let all = registry();
    let chosen: Vec<&PolicyInfo> = match &args.name {
        None => all.iter().collect(),
        Some(name) => match all.iter().find(|p| p.name == name) {
            Some(p) => vec![p],
            None => {
                let known: Vec<&str> = all.iter().map(|p| p.name).collect();
                return Err(input_error(format!(
                    "error: unknown policy `{name}`\n  = help: known policies: {}",
                    known.join(", ")
                )));
            }
        },
    };
    let mut out = crate::output::report();
    out.write_all(render(&chosen).as_bytes())?;
    Ok(Outcome::Ok)
}

/// Width the listing is wrapped to.
const WIDTH: usize = 100;

/// The listing as text.
pub fn render(policies: &[&PolicyInfo]) -> String {
    let mut s = String::from(
        "Instance parameters are keys of the policy's [[scheduler]] table; child parameters go in\n\
         the `params = { ... }` of each child (scheduler or thread) placed under it.\n",
    );
    for p in policies {
        s.push('\n');
        let summary = if p.summary.is_empty() {
            "(no summary yet)"
        } else {
            p.summary
        };
        let head = format!("{}  ", p.name);
        push_wrapped(&mut s, &head, summary);
        let indent = " ".repeat(head.len());
        if !p.source.is_empty() {
            push_wrapped(&mut s, &indent, &format!("implements: {}", p.source));
        }
        if p.min_parents != 1 || p.max_parents != 1 {
            push_wrapped(
                &mut s,
                &indent,
                &format!("parents: {} to {}", p.min_parents, p.max_parents),
            );
        }
        if let Some(n) = p.max_children {
            push_wrapped(&mut s, &indent, &format!("children: at most {n}"));
        }
        let all: Vec<&ParamSpec> = p
            .instance_params
            .iter()
            .chain(p.child_params)
            .chain(p.change_params)
            .collect();
        let kw = all.iter().map(|p| p.key.len()).max().unwrap_or(0);
        let tw = all.iter().map(|p| p.kind.len()).max().unwrap_or(0);
        let dw = all.iter().map(|p| p.default.len()).max().unwrap_or(0);
        let cols = Cols { kw, tw, dw };
        params(&mut s, "instance parameters", p.instance_params, cols);
        params(&mut s, "child parameters", p.child_params, cols);
        if !p.change_params.is_empty() {
            params(
                &mut s,
                "set-params about a child may also change",
                p.change_params,
                cols,
            );
        }
    }
    s
}

#[derive(Clone, Copy)]
struct Cols {
    kw: usize,
    tw: usize,
    dw: usize,
}

fn params(s: &mut String, title: &str, specs: &[ParamSpec], c: Cols) {
    if specs.is_empty() {
        s.push_str(&format!("  {title}: none\n"));
        return;
    }
    s.push_str(&format!("  {title}:\n"));
    for p in specs {
        let head = format!(
            "    {:kw$}  {:tw$}  {:dw$}  ",
            p.key,
            p.kind,
            p.default,
            kw = c.kw,
            tw = c.tw,
            dw = c.dw
        );
        push_wrapped(s, &head, p.doc);
    }
}

/// Appends `head` then `text` wrapped to [`WIDTH`], continuation lines
/// indented to line up under the text.
fn push_wrapped(s: &mut String, head: &str, text: &str) {
    let indent = head.chars().count();
    let room = WIDTH.saturating_sub(indent).max(30);
    let mut line = String::new();
    let mut first = true;
    for word in text.split_whitespace() {
        if !line.is_empty() && line.chars().count() + 1 + word.chars().count() > room {
            flush(s, head, indent, &line, first);
            first = false;
            line.clear();
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    flush(s, head, indent, &line, first);
}

fn flush(s: &mut String, head: &str, indent: usize, line: &str, first: bool) {
    if first {
        s.push_str(head.trim_end_matches(' '));
        if !line.is_empty() {
            s.push_str(&head[head.trim_end_matches(' ').len()..]);
        }
    } else {
        s.push_str(&" ".repeat(indent));
    }
    s.push_str(line);
    s.push('\n');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_text_wraps_under_its_column() {
        let mut s = String::new();
        let text = "word ".repeat(60);
        push_wrapped(&mut s, "    key  kind  ", &text);
        let lines: Vec<&str> = s.lines().collect();
        assert!(lines.len() >= 3, "{s}");
        assert!(lines.iter().all(|l| l.chars().count() <= WIDTH), "{s}");
        assert!(lines[0].starts_with("    key  kind  word"));
        assert!(lines[1].starts_with(&" ".repeat(15)) && lines[1][15..].starts_with("word"));
    }

    #[test]
    fn every_registered_policy_is_listed_with_its_parameters() {
        let all: Vec<&PolicyInfo> = registry().iter().collect();
        let text = render(&all);
        for p in &all {
            assert!(
                text.contains(&format!("\n{}  ", p.name)),
                "{} missing",
                p.name
            );
            let specs = p.instance_params.iter().chain(p.child_params);
            for spec in specs.chain(p.change_params) {
                assert!(text.contains(spec.key), "{}: {} missing", p.name, spec.key);
            }
        }
    }
}
