//! Loaded plug-ins as entries of the policy registry.
//!
//! `PolicyInfo` holds plain `fn` pointers, which cannot carry a loaded
//! module, so each loaded plug-in takes one of [`SLOTS`] slots, each with
//! its own monomorphic builder and child checker that find the module in
//! their slot. Built-in policies are untouched by this, and a process may
//! load up to [`SLOTS`] distinct plug-in files.

use crate::descriptor::{leak, Param};
use crate::load::{from_bytes, Limits, LoadError, Module};
use crate::policy::WasmPolicy;
use crate::{Fault, FaultLog};
use hsched_core::{ParamSpec, Params, Policy, PolicyError};
use hsched_policies::PolicyInfo;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

/// How many distinct plug-in files one process can load.
pub const SLOTS: usize = 32;

struct Slot {
    module: Arc<Module>,
    name: &'static str,
    info: PolicyInfo,
}

static TABLE: [OnceLock<Slot>; SLOTS] = [const { OnceLock::new() }; SLOTS];
/// Each loaded file by its canonical path and the fingerprint of its
/// contents.
static BY_PATH: Mutex<Vec<((PathBuf, u64), usize)>> = Mutex::new(Vec::new());
/// The names each slot was registered under (a file may be named by
/// several relative paths).
static BY_NAME: Mutex<Vec<(String, usize)>> = Mutex::new(Vec::new());
static FAULTS: OnceLock<FaultLog> = OnceLock::new();

fn log() -> FaultLog {
    FAULTS.get_or_init(FaultLog::default).clone()
}

/// Every fault of a plug-in instance in this process so far, in order.
pub fn faults() -> Vec<Fault> {
    log().lock().map(|v| v.clone()).unwrap_or_default()
}

/// Whether a hierarchy file's `policy` value names a plug-in file.
pub fn is_plugin_name(policy: &str) -> bool {
    policy.ends_with(".wasm")
}

/// `policy` as a path: relative to the directory of the hierarchy file
/// `base` (absolute paths as they are).
pub fn resolve(base: Option<&Path>, policy: &str) -> PathBuf {
    let p = Path::new(policy);
    match base.and_then(Path::parent) {
        Some(dir) if p.is_relative() => dir.join(p),
        _ => p.to_path_buf(),
    }
}

fn check_params(decl: &[Param], params: &Params, what: &str) -> Result<(), PolicyError> {
    for p in decl {
        match params.get(&p.key) {
            Some(v) => p.check(v).map_err(|message| {
                PolicyError::Param(hsched_core::ParamError {
                    key: p.key.clone(),
                    message,
                })
            })?,
            None if p.required() => {
                return Err(PolicyError::Param(hsched_core::ParamError {
                    key: p.key.clone(),
                    message: format!("{what} requires it ({})", p.doc),
                }))
            }
            None => {}
        }
    }
    Ok(())
}

fn build(n: usize, params: &Params) -> Result<Box<dyn Policy>, PolicyError> {
    let slot = TABLE[n]
        .get()
        .ok_or_else(|| PolicyError::Refused("no plug-in".into()))?;
    let d = &slot.module.descriptor;
    let keys: Vec<&str> = d.instance_params.iter().map(|p| p.key.as_str()).collect();
    if let Some(k) = params.unknown_keys(&keys).next() {
        return Err(PolicyError::Unsupported(format!(
            "plug-in `{}` has no parameter `{k}`",
            d.name
        )));
    }
    check_params(&d.instance_params, params, "the plug-in")?;
    Ok(Box::new(WasmPolicy::new(
        slot.module.clone(),
        slot.name,
        params,
        log(),
    )?))
}

fn check_child(n: usize, params: &Params) -> Result<(), PolicyError> {
    let slot = TABLE[n]
        .get()
        .ok_or_else(|| PolicyError::Refused("no plug-in".into()))?;
    hsched_policies::registry::check_child_params(&slot.info, params)?;
    check_params(&slot.module.descriptor.child_params, params, "a child")
}

macro_rules! slots {
    ($($n:literal)*) => {
        const BUILD: [fn(&Params) -> Result<Box<dyn Policy>, PolicyError>; SLOTS] =
            [$(|p| build($n, p)),*];
        const CHECK: [fn(&Params) -> Result<(), PolicyError>; SLOTS] =
            [$(|p| check_child($n, p)),*];
    };
}
slots!(0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31);

fn specs(v: &[Param]) -> &'static [ParamSpec] {
    Box::leak(
        v.iter()
            .map(Param::spec)
            .collect::<Vec<_>>()
            .into_boxed_slice(),
    )
}

/// Loads the plug-in at `path` (once per process and path) and returns
/// its registry entry, named `name` (the `policy` value as the hierarchy
/// file writes it).
///
/// # Errors
/// A [`LoadError`], or more distinct plug-ins than 32 (the slots of the registry).
pub fn register(name: &str, path: &Path) -> Result<PolicyInfo, LoadError> {
    let bytes = std::fs::read(path).map_err(|e| LoadError {
        path: path.to_path_buf(),
        message: format!("cannot be read: {e}"),
    })?;
    // A file is loaded again when its contents changed (a rebuilt
    // plug-in loaded into a running daemon); the old version stays for
    // the instances built from it.
    let key = (
        path.canonicalize().unwrap_or_else(|_| path.to_path_buf()),
        fingerprint(&bytes),
    );
    let mut by_path = BY_PATH.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(&(_, n)) = by_path.iter().find(|(p, _)| *p == key) {
        let slot = TABLE[n].get().expect("a registered slot");
        remember(name, n);
        return Ok(PolicyInfo {
            name: leak(name),
            ..slot.info
        });
    }
    let n = by_path.len();
    if n == SLOTS {
        return Err(LoadError {
            path: path.to_path_buf(),
            message: format!("one process loads at most {SLOTS} plug-in files (each changed version of a file counts)"),
        });
    }
    let module = from_bytes(path, &bytes, Limits::default())?;
    let d = &module.descriptor;
    let info = PolicyInfo {
        summary: leak(&if d.summary.is_empty() {
            format!("plug-in `{}`", d.name)
        } else {
            format!("{} (plug-in `{}`)", d.summary, d.name)
        }),
        source: leak(&d.source),
        instance_params: specs(&d.instance_params),
        child_params: specs(&d.child_params),
        change_params: specs(&d.change_params),
        max_children: d.max_children,
        check_child: CHECK[n],
        ..PolicyInfo::new(leak(name), BUILD[n])
    };
    let slot = Slot {
        name: leak(&d.name),
        module: Arc::new(module),
        info,
    };
    if TABLE[n].set(slot).is_err() {
        unreachable!("slots are taken under the lock, in order");
    }
    by_path.push((key, n));
    remember(name, n);
    Ok(info)
}

/// A fingerprint of a module's bytes, to tell a rebuilt file from the one
/// loaded before (not a security measure: the file is trusted as far as
/// its sandbox).
fn fingerprint(bytes: &[u8]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    bytes.hash(&mut h);
    h.finish()
}

fn remember(name: &str, n: usize) {
    // Last is latest: a name loaded again from an older version of its
    // file stands for that version from now on.
    let mut names = BY_NAME.lock().unwrap_or_else(|e| e.into_inner());
    names.retain(|(m, k)| !(m == name && *k == n));
    names.push((name.to_string(), n));
}

/// The module a plug-in was registered from under `name` (the `policy`
/// value as a hierarchy file writes it), if one was: its descriptor holds
/// the declared parameters and guarantee mapping.
pub fn module_named(name: &str) -> Option<Arc<Module>> {
    let names = BY_NAME.lock().unwrap_or_else(|e| e.into_inner());
    let &(_, n) = names.iter().rev().find(|(m, _)| m == name)?;
    TABLE[n].get().map(|s| s.module.clone())
}

/// Loads every plug-in that the hierarchy file at `path` (text `text`)
/// names in a `policy` value, relative to the file, and installs each in
/// [`hsched_policies::registry()`] under the name the file writes, so that
/// parsing, analysing, simulating and running the file find it. A file
/// that names none loads nothing.
///
/// # Errors
/// The first plug-in that cannot be loaded, or whose name already stands
/// for another policy in this process (a built-in, or a plug-in of the
/// same name loaded from another directory).
pub fn load_named(path: Option<&Path>, text: &str) -> Result<(), LoadError> {
    for name in plugin_names(text) {
        let file = resolve(path, &name);
        let info = register(&name, &file)?;
        hsched_policies::registry::install(info).map_err(|message| LoadError {
            path: file.clone(),
            message,
        })?;
    }
    Ok(())
}

/// Loads the plug-in at `path` into a running process under `name` (a
/// daemon's `load`): a file loaded before under that name whose contents
/// changed since takes the name over, and instances already built keep
/// the version they run. Returns the registry entry, the module, and
/// whether an earlier version gave the name way.
///
/// # Errors
/// A [`LoadError`]; `name` is a built-in policy's.
pub fn load_as(name: &str, path: &Path) -> Result<(PolicyInfo, Arc<Module>, bool), LoadError> {
    let info = register(name, path)?;
    let replaced =
        hsched_policies::registry::install_replacing(info).map_err(|message| LoadError {
            path: path.to_path_buf(),
            message,
        })?;
    let module = module_named(name).ok_or_else(|| LoadError {
        path: path.to_path_buf(),
        message: "was loaded but is not in the registry".into(),
    })?;
    Ok((info, module, replaced))
}

/// [`load_named`], then the policies to parse and run the file with: the
/// built-in ones and every plug-in loaded in this process.
///
/// # Errors
/// As [`load_named`].
pub fn policies_for(path: Option<&Path>, text: &str) -> Result<Vec<PolicyInfo>, LoadError> {
    load_named(path, text)?;
    Ok(hsched_policies::registry().to_vec())
}

/// The `policy = "….wasm"` values of a hierarchy file, in order. A file
/// that is not TOML names none here; its parser reports the error.
fn plugin_names(text: &str) -> Vec<String> {
    let mut names = Vec::new();
    for line in text.lines() {
        let line = line.trim_start();
        let Some(rest) = line.strip_prefix("policy") else {
            continue;
        };
        let Some(rest) = rest.trim_start().strip_prefix('=') else {
            continue;
        };
        let rest = rest.trim_start();
        let quote = match rest.chars().next() {
            Some(q @ ('"' | '\'')) => q,
            _ => continue,
        };
        let Some(end) = rest[1..].find(quote) else {
            continue;
        };
        let value = &rest[1..1 + end];
        if is_plugin_name(value) && !names.iter().any(|n| n == value) {
            names.push(value.to_string());
        }
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_plugin_policies_and_resolves_them_next_to_the_file() {
        let text = "[[scheduler]]\nname = \"a\"\npolicy = \"plugins/fp.wasm\"\n\n[[scheduler]]\nname = \"b\"\npolicy = 'fp'\n  policy = \"plugins/fp.wasm\"\n";
        assert_eq!(plugin_names(text), vec!["plugins/fp.wasm".to_string()]);
        assert_eq!(
            resolve(Some(Path::new("dir/h.toml")), "plugins/fp.wasm"),
            PathBuf::from("dir/plugins/fp.wasm")
        );
        assert_eq!(
            resolve(Some(Path::new("h.toml")), "/x.wasm"),
            PathBuf::from("/x.wasm")
        );
    }
}
