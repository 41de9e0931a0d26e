//! The crate against `sdk/include/hsched_policy.h`: every import (name,
//! C name, parameter names and types, return type), every export hook
//! `export_policy!` can define (name and signature) and every numeric
//! constant (name and value) must be the header's, and the header must have
//! no import, hook or constant the crate lacks. Types are compared after
//! resolving the typedefs on both sides to their primitive widths, and by
//! name (`hs_vp` in the header is `hs_vp` here). `examples/rr.rs` must
//! carry the descriptor of `sdk/tutorial/rr.c`, byte for byte.

use std::collections::BTreeMap;
use std::fs;
use std::path::PathBuf;

use crate::sys;

fn sdk() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn read(rel: &str) -> String {
    let p = sdk().join(rel);
    fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// `text` without C comments (`/* */`) and line comments (`//`).
fn strip_comments(text: &str) -> String {
    let mut out = String::new();
    let b = text.as_bytes();
    let mut i = 0;
    let mut in_str = false;
    while i < b.len() {
        if in_str {
            if b[i] == b'\\' && i + 1 < b.len() {
                out.push(b[i] as char);
                out.push(b[i + 1] as char);
                i += 2;
                continue;
            }
            if b[i] == b'"' {
                in_str = false;
            }
            out.push(b[i] as char);
            i += 1;
        } else if b[i..].starts_with(b"/*") {
            let end = text[i + 2..].find("*/").map_or(b.len(), |e| i + 2 + e + 2);
            out.push(' ');
            i = end;
        } else if b[i..].starts_with(b"//") {
            let end = text[i..].find('\n').map_or(b.len(), |e| i + e);
            i = end;
        } else {
            if b[i] == b'"' {
                in_str = true;
            }
            out.push(b[i] as char);
            i += 1;
        }
    }
    out
}

fn squash(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A function signature: its name, (parameter name, type) pairs and return
/// type, each type written the Rust way (`*const u8`, `hs_vp`, `()`).
#[derive(Clone, Debug, PartialEq, Eq)]
struct Sig {
    name: String,
    params: Vec<(String, String)>,
    ret: String,
}

/// A C type as this crate writes it: `const char *` is `*const u8`,
/// `T *` is `*mut T`, `double` is `f64`, `void` is `()`.
fn c_type_to_rust(c: &str) -> String {
    let c = squash(c);
    if let Some(base) = c.strip_suffix('*') {
        let base = base.trim();
        let (mutability, base) = match base.strip_prefix("const ") {
            Some(b) => ("*const ", b.trim()),
            None => ("*mut ", base),
        };
        return format!("{mutability}{}", c_type_to_rust(base));
    }
    match c.as_str() {
        "char" => "u8".into(),
        "double" => "f64".into(),
        "void" => "()".into(),
        other => other.into(),
    }
}

/// `RET NAME(TYPE NAME, ...)` in C.
fn parse_c_sig(text: &str) -> Sig {
    let text = squash(text);
    let open = text.find('(').unwrap_or_else(|| panic!("no ( in {text}"));
    let close = text.rfind(')').unwrap_or_else(|| panic!("no ) in {text}"));
    let head = text[..open].trim();
    let (ret, name) = head.rsplit_once(' ').unwrap_or_else(|| panic!("{head}"));
    // `const char *hs_descriptor`: the star belongs to the type.
    let stars = name.chars().take_while(|&c| c == '*').count();
    let (ret, name) = (format!("{ret}{}", "*".repeat(stars)), &name[stars..]);
    let args = text[open + 1..close].trim();
    let params = if args == "void" || args.is_empty() {
        Vec::new()
    } else {
        args.split(',')
            .map(|a| {
                let a = a.trim();
                let cut = a.rfind([' ', '*']).unwrap() + 1;
                (a[cut..].to_string(), c_type_to_rust(&a[..cut]))
            })
            .collect()
    };
    Sig {
        name: name.to_string(),
        params,
        ret: c_type_to_rust(&ret),
    }
}

/// `NAME(name: TYPE, ...) -> RET` in Rust, with `$crate::sys::` paths
/// written plainly.
fn parse_rust_sig(text: &str) -> Sig {
    let text = squash(&text.replace("$crate::sys::", ""));
    let open = text.find('(').unwrap_or_else(|| panic!("no ( in {text}"));
    let close = text.rfind(')').unwrap_or_else(|| panic!("no ) in {text}"));
    let name = text[..open].trim().to_string();
    let args = text[open + 1..close].trim().trim_end_matches(',');
    let params = if args.is_empty() {
        Vec::new()
    } else {
        args.split(',')
            .map(|a| {
                let (n, t) = a.split_once(':').unwrap_or_else(|| panic!("{a}"));
                (n.trim().to_string(), squash(t))
            })
            .collect()
    };
    let rest = text[close + 1..].trim();
    let ret = match rest.strip_prefix("->") {
        Some(r) => squash(r),
        None => "()".into(),
    };
    Sig { name, params, ret }
}

/// An integer literal of C or Rust (`0xFFFFFFFFu`, `0xFFFF_FFFF`, `-1`).
fn parse_int(s: &str) -> Option<i128> {
    let s = s.trim().replace('_', "");
    let (neg, s) = match s.strip_prefix('-') {
        Some(r) => (true, r.trim().to_string()),
        None => (false, s),
    };
    let s = s.trim_end_matches(['u', 'U', 'l', 'L']);
    let v = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => i128::from_str_radix(h, 16).ok()?,
        None => s.parse::<i128>().ok()?,
    };
    Some(if neg { -v } else { v })
}

/// What the header declares.
#[derive(Debug, Default)]
struct Header {
    /// typedef name -> the type it names.
    typedefs: BTreeMap<String, String>,
    /// Every `#define NAME number` and every enumerator, with its value.
    constants: BTreeMap<String, i128>,
    /// Import name -> the C function.
    imports: BTreeMap<String, Sig>,
    /// Export name -> the hook.
    exports: BTreeMap<String, Sig>,
}

fn parse_header(text: &str) -> Header {
    let text = strip_comments(text);
    let mut h = Header::default();
    for line in text.lines() {
        let line = line.trim();
        if let Some(t) = line.strip_prefix("typedef ") {
            let t = t.trim_end_matches(';');
            let (ty, name) = t.rsplit_once(' ').unwrap();
            h.typedefs.insert(name.into(), squash(ty));
        }
        if let Some(d) = line.strip_prefix("#define ") {
            let mut parts = d.splitn(2, char::is_whitespace);
            let name = parts.next().unwrap();
            if let (false, Some(v)) = (name.contains('('), parts.next()) {
                if let Some(v) = parse_int(v) {
                    h.constants.insert(name.into(), v);
                }
            }
        }
    }
    let mut rest = text.as_str();
    while let Some(at) = rest.find("enum ") {
        rest = &rest[at + 5..];
        let (Some(open), Some(close)) = (rest.find('{'), rest.find('}')) else {
            break;
        };
        if open > close || rest[..open].trim().contains(char::is_whitespace) {
            continue;
        }
        for item in rest[open + 1..close].split(',') {
            if let Some((n, v)) = item.split_once('=') {
                let v = parse_int(v).unwrap_or_else(|| panic!("enum value {item}"));
                h.constants.insert(n.trim().into(), v);
            }
        }
        rest = &rest[close..];
    }
    // Imports: HS_IMPORT("name") RET hsched_name(...);
    for piece in text.split("HS_IMPORT(\"").skip(1) {
        let (name, decl) = piece.split_once("\")").unwrap();
        let decl = &decl[..decl.find(';').unwrap()];
        h.imports.insert(name.into(), parse_c_sig(decl));
    }
    // Exports: the prototypes between HS_EXPORT's definition and the
    // helpers.
    let start = text.find("#define HS_EXPORT").expect("HS_EXPORT");
    let start = start + text[start..].find('\n').unwrap();
    let end = start + text[start..].find("#define HS_STR").expect("HS_STR");
    for decl in text[start..end].split(';') {
        if decl.trim().is_empty() {
            continue;
        }
        let sig = parse_c_sig(decl);
        h.exports.insert(sig.name.clone(), sig);
    }
    h
}

/// What the crate declares: sys.rs's typedefs and imports, lib.rs's
/// exports.
#[derive(Debug, Default)]
struct Crate {
    typedefs: BTreeMap<String, String>,
    imports: BTreeMap<String, Sig>,
    exports: BTreeMap<String, Sig>,
}

fn parse_crate(sys_rs: &str, lib_rs: &str) -> Crate {
    let sys_rs = strip_comments(sys_rs);
    let lib_rs = strip_comments(lib_rs);
    let mut c = Crate::default();
    for line in sys_rs.lines() {
        if let Some(t) = line.trim().strip_prefix("pub type ") {
            let (n, ty) = t.trim_end_matches(';').split_once('=').unwrap();
            c.typedefs.insert(n.trim().into(), ty.trim().into());
        }
    }
    let block = "#[link(wasm_import_module = \"hsched\")]\nextern \"C\" {";
    assert_eq!(
        sys_rs.matches("extern \"C\"").count(),
        1,
        "one extern block"
    );
    let at = sys_rs
        .find(block)
        .expect("the extern block imports module hsched");
    for piece in sys_rs[at..].split("#[link_name = \"").skip(1) {
        let (name, decl) = piece.split_once("\"]").unwrap();
        let decl = decl.trim().strip_prefix("pub fn ").expect("pub fn");
        let decl = &decl[..decl.find(';').unwrap()];
        c.imports.insert(name.into(), parse_rust_sig(decl));
    }
    for piece in lib_rs.split("#[export_name = \"").skip(1) {
        let (name, decl) = piece.split_once("\"]").unwrap();
        let decl = decl
            .trim()
            .strip_prefix("unsafe extern \"C\" fn ")
            .expect("fn");
        let decl = &decl[..decl.find('{').unwrap()];
        c.exports.insert(name.into(), parse_rust_sig(decl));
    }
    c
}

/// A type reduced to its primitive: typedefs followed, C base types named
/// as Rust's (`unsigned int` is `u32`).
fn resolve(ty: &str, typedefs: &BTreeMap<String, String>) -> String {
    if let Some(inner) = ty.strip_prefix("*const ") {
        return format!("*const {}", resolve(inner, typedefs));
    }
    if let Some(inner) = ty.strip_prefix("*mut ") {
        return format!("*mut {}", resolve(inner, typedefs));
    }
    match ty {
        "signed char" => "i8".into(),
        "int" => "i32".into(),
        "unsigned int" => "u32".into(),
        "long long" => "i64".into(),
        "unsigned long long" => "u64".into(),
        _ => match typedefs.get(ty) {
            Some(t) => resolve(t, typedefs),
            None => ty.into(),
        },
    }
}

fn resolved(sig: &Sig, typedefs: &BTreeMap<String, String>) -> Sig {
    Sig {
        name: sig.name.clone(),
        params: sig
            .params
            .iter()
            .map(|(n, t)| (n.clone(), resolve(t, typedefs)))
            .collect(),
        ret: resolve(&sig.ret, typedefs),
    }
}

/// Every difference between the header and the crate, as sentences.
fn differences(h: &Header, c: &Crate, constants: &[(&str, i128)]) -> Vec<String> {
    let mut out = Vec::new();
    for (name, ty) in &h.typedefs {
        match c.typedefs.get(name) {
            None => out.push(format!("typedef {name} is missing from sys.rs")),
            Some(t) if resolve(t, &c.typedefs) != resolve(ty, &h.typedefs) => out.push(format!(
                "typedef {name}: header {} (\"{ty}\"), crate {}",
                resolve(ty, &h.typedefs),
                resolve(t, &c.typedefs)
            )),
            Some(_) => {}
        }
    }
    let mut compare = |what: &str, hs: &BTreeMap<String, Sig>, cs: &BTreeMap<String, Sig>| {
        for (name, hsig) in hs {
            let Some(csig) = cs.get(name) else {
                out.push(format!(
                    "{what} {name} ({}) is missing from the crate",
                    hsig.name
                ));
                continue;
            };
            if what == "import" && hsig.name != format!("hsched_{name}") {
                out.push(format!("import {name}: the header calls it {}", hsig.name));
            }
            if csig.name != hsig.name {
                out.push(format!(
                    "{what} {name}: header {}, crate {}",
                    hsig.name, csig.name
                ));
            }
            if csig.params != hsig.params || csig.ret != hsig.ret {
                out.push(format!("{what} {name}: header {hsig:?}, crate {csig:?}"));
            }
            let types = |s: Sig| (s.params.into_iter().map(|p| p.1).collect::<Vec<_>>(), s.ret);
            let hr = types(resolved(hsig, &h.typedefs));
            let cr = types(resolved(csig, &c.typedefs));
            if hr != cr {
                out.push(format!(
                    "{what} {name}: widths differ: header {hr:?}, crate {cr:?}"
                ));
            }
        }
        for name in cs.keys().filter(|n| !hs.contains_key(*n)) {
            out.push(format!("{what} {name} is in the crate, not in the header"));
        }
    };
    compare("import", &h.imports, &c.imports);
    compare("export", &h.exports, &c.exports);
    let ours: BTreeMap<&str, i128> = constants.iter().copied().collect();
    for (name, v) in &h.constants {
        match ours.get(name.as_str()) {
            None => out.push(format!("constant {name} = {v} is missing from sys.rs")),
            Some(o) if o != v => out.push(format!("constant {name}: header {v}, crate {o}")),
            Some(_) => {}
        }
    }
    for name in ours.keys().filter(|n| !h.constants.contains_key(**n)) {
        out.push(format!(
            "constant {name} is in the crate, not in the header"
        ));
    }
    out
}

fn header() -> String {
    read("include/hsched_policy.h")
}

fn ours() -> Crate {
    parse_crate(&read("rust/src/sys.rs"), &read("rust/src/lib.rs"))
}

#[test]
fn the_crate_is_the_header() {
    let h = parse_header(&header());
    // What the parser must find, so that an empty parse cannot pass.
    assert_eq!(h.imports.len(), 45, "{:?}", h.imports.keys());
    assert_eq!(h.exports.len(), 16, "{:?}", h.exports.keys());
    assert_eq!(h.constants.len(), 23, "{:?}", h.constants);
    assert!(h.typedefs.contains_key("hs_vp"), "{:?}", h.typedefs);
    let diffs = differences(&h, &ours(), sys::ALL_CONSTANTS);
    assert!(
        diffs.is_empty(),
        "the crate differs from the header:\n{}",
        diffs.join("\n")
    );
}

/// The import names the host defines (`IMPORTS` in
/// crates/plugin/src/host.rs), which the header must list too.
fn host_imports() -> Vec<String> {
    let host = read("../crates/plugin/src/host.rs");
    let from = host
        .find("const IMPORTS: &[&str] = &[")
        .expect("IMPORTS in host.rs");
    let list = &host[from..from + host[from..].find("];").unwrap()];
    list.split('"')
        .skip(1)
        .step_by(2)
        .map(String::from)
        .collect()
}

#[test]
fn the_header_has_every_import_the_host_defines() {
    let h = parse_header(&header());
    let mut host = host_imports();
    host.sort();
    let header: Vec<String> = h.imports.keys().cloned().collect();
    assert_eq!(header, host);
}

#[test]
fn a_missing_or_renamed_import_is_a_difference() {
    let h = parse_header(&header());
    let sys_rs = read("rust/src/sys.rs");
    let lib_rs = read("rust/src/lib.rs");
    let renamed = sys_rs.replace("#[link_name = \"now\"]", "#[link_name = \"time\"]");
    let diffs = differences(&h, &parse_crate(&renamed, &lib_rs), sys::ALL_CONSTANTS);
    assert!(diffs.iter().any(|d| d.contains("import now")), "{diffs:?}");
    assert!(diffs.iter().any(|d| d.contains("import time")), "{diffs:?}");

    let cut = sys_rs.replace(
        "#[link_name = \"tracing\"]\n    pub fn hsched_tracing() -> hs_i32;",
        "",
    );
    assert_ne!(cut, sys_rs);
    let diffs = differences(&h, &parse_crate(&cut, &lib_rs), sys::ALL_CONSTANTS);
    assert_eq!(diffs.len(), 1, "{diffs:?}");
    assert!(diffs[0].contains("import tracing"), "{diffs:?}");

    let narrowed = sys_rs.replace(
        "pub fn hsched_now() -> hs_time;",
        "pub fn hsched_now() -> hs_u32;",
    );
    assert_ne!(narrowed, sys_rs);
    let diffs = differences(&h, &parse_crate(&narrowed, &lib_rs), sys::ALL_CONSTANTS);
    assert!(
        diffs.iter().any(|d| d.contains("widths differ")),
        "{diffs:?}"
    );
}

#[test]
fn a_changed_hook_or_constant_is_a_difference() {
    let h = parse_header(&header());
    let sys_rs = read("rust/src/sys.rs");
    let lib_rs = read("rust/src/lib.rs");
    let wrong_hook = lib_rs.replace(
        "fn hs_grant(parent: $crate::sys::hs_vp, cpu: $crate::sys::hs_cpu)",
        "fn hs_grant(parent: $crate::sys::hs_vp)",
    );
    assert_ne!(wrong_hook, lib_rs);
    let diffs = differences(&h, &parse_crate(&sys_rs, &wrong_hook), sys::ALL_CONSTANTS);
    assert!(
        diffs.iter().any(|d| d.contains("export hs_grant")),
        "{diffs:?}"
    );

    let mut constants = sys::ALL_CONSTANTS.to_vec();
    let at = constants
        .iter()
        .position(|c| c.0 == "HS_PARAM_WRONG")
        .unwrap();
    constants[at].1 = 2;
    let diffs = differences(&h, &ours(), &constants);
    assert_eq!(diffs, ["constant HS_PARAM_WRONG: header -1, crate 2"]);
    constants.remove(at);
    let diffs = differences(&h, &ours(), &constants);
    assert_eq!(
        diffs,
        ["constant HS_PARAM_WRONG = -1 is missing from sys.rs"]
    );
}

/// The string literals of a C or Rust source between `start` and `end`,
/// joined and with `\"` unescaped (line continuations of Rust literals
/// dropped).
fn literal(src: &str, start: &str, end: &str) -> String {
    let from = src.find(start).unwrap_or_else(|| panic!("{start}")) + start.len();
    let body = &src[from..from + src[from..].find(end).unwrap_or_else(|| panic!("{end}"))];
    let body = body.replace("\\\n", "");
    let mut out = String::new();
    let mut in_str = false;
    let mut chars = body.chars();
    while let Some(ch) = chars.next() {
        match (in_str, ch) {
            (false, '"') => in_str = true,
            (true, '"') => in_str = false,
            (true, '\\') => out.push(chars.next().unwrap()),
            (true, c) => out.push(c),
            (false, _) => {}
        }
    }
    out
}

#[test]
fn the_rust_rr_has_the_descriptor_of_rr_c() {
    let c = literal(&read("tutorial/rr.c"), "HS_PLUGIN(", ")\n");
    let rust = literal(&read("rust/examples/rr.rs"), "CStr = c", ";\n");
    assert!(c.starts_with("{\"abi\":1,\"name\":\"rr\""), "{c}");
    assert_eq!(rust, c);
}

#[test]
fn the_wrappers_map_the_enums_to_the_header_values() {
    for s in [VpState::Waiting, VpState::Ready, VpState::Running] {
        assert_eq!(VpState::from_raw(s.raw()), Some(s));
    }
    assert_eq!(VpState::from_raw(3), None);
    for r in [
        RevokeReason::Preempted,
        RevokeReason::BudgetExhausted,
        RevokeReason::Infrastructure,
    ] {
        assert_eq!(RevokeReason::from_raw(r.raw()), Some(r));
    }
    assert_eq!(result_code(Ok(())), sys::HS_OK);
    assert_eq!(result_code(Err(Refusal::Param)), sys::HS_ERR_PARAM);
    assert_eq!(result_code(Err(Refusal::Admission)), sys::HS_ERR_ADMISSION);
    assert_eq!(MsgKind::from_raw(sys::HS_MSG_APP), Some(MsgKind::App));
    assert_eq!(
        NodeKind::from_raw(sys::HS_NODE_THREAD),
        Some(NodeKind::Thread)
    );
    assert_eq!(ParamRead::from_raw(sys::HS_PARAM_WRONG, 5).ok(), None);
    assert_eq!(ParamRead::from_raw(sys::HS_PARAM_OK, 5).ok(), Some(5));
    let buf = *b"rese";
    let copied = Copied {
        bytes: &buf,
        full_len: 7,
    };
    assert!(copied.truncated());
    assert_eq!(copied.as_str(), None);
}

use crate::{result_code, Copied, MsgKind, NodeKind, ParamRead, Refusal, RevokeReason, VpState};
