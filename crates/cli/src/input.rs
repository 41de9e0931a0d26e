//! Reading hierarchy files and rt-app workloads. Their errors become input
//! errors (exit status 2), printed as `hsched-config` renders them:
//! `file:line:col`, the offending line, what was expected and a hint.

use crate::outcome::input_error;
use hsched_config::{ConfigErrors, Hierarchy};
use std::path::{Path, PathBuf};

/// The hierarchy `hsched sim` runs when no file is given: Figure 7.2 of the
/// dissertation.
pub const DEFAULT_EXAMPLE: &str = include_str!("../../../examples/home-computer.toml");

/// The name the default example is reported under.
pub const DEFAULT_EXAMPLE_NAME: &str = "examples/home-computer.toml (built in)";

/// Loads and validates a hierarchy file, with the rt-app file it names.
///
/// # Errors
/// The file cannot be read or is invalid.
pub fn load(path: &Path) -> anyhow::Result<Hierarchy> {
    load_plugins(path)?;
    hsched_config::load(path).map_err(rendered)
}

/// Loads the plug-ins `path` names (`policy = "x.wasm"`, relative to the
/// file) into the process's policies, before the file is parsed against
/// them. A file that cannot be read is left to the parser to report.
///
/// # Errors
/// A plug-in that cannot be loaded: the hierarchy file, the plug-in file
/// and what is wrong with it.
pub fn load_plugins(path: &Path) -> anyhow::Result<()> {
    let Ok(text) = hsched_config::read_text(path, hsched_config::MAX_FILE_BYTES) else {
        return Ok(());
    };
    hsched_plugin::load_named(Some(path), &text)
        .map_err(|e| input_error(format!("error: {}: {e}", path.display())))
}

/// [`load`], or with `workload` given (`--workload`), with that workload
/// attached in place of the file's own (which is not read).
///
/// # Errors
/// Either file cannot be read or is invalid, or a task cannot be placed.
pub fn load_with(path: &Path, workload: Option<&Path>) -> anyhow::Result<Hierarchy> {
    match workload {
        None => load(path),
        Some(w) => {
            load_plugins(path)?;
            hsched_config::load_with_workload(path, w).map_err(rendered)
        }
    }
}

/// The rt-app file `h`, read from `path`, names: relative to the hierarchy
/// file, as [`load`] reads it.
pub fn rtapp_path(path: &Path, h: &Hierarchy) -> Option<PathBuf> {
    let rel = h.workload.rtapp_file.as_ref()?;
    Some(path.parent().unwrap_or(Path::new("")).join(rel))
}

/// The built-in default example.
///
/// # Errors
/// Only if the embedded example is invalid, which the tests rule out.
pub fn default_example() -> anyhow::Result<Hierarchy> {
    hsched_config::parse_str(DEFAULT_EXAMPLE, DEFAULT_EXAMPLE_NAME).map_err(rendered)
}

/// Reads an rt-app file and maps its tasks onto `h` with the file's
/// `[[workload.map]]` rules (tasks no rule matches join the default
/// scheduler).
///
/// # Errors
/// The file cannot be read, is invalid, or a task cannot be placed.
pub fn attach_workload(h: &mut Hierarchy, path: &Path) -> anyhow::Result<()> {
    let name = path.display().to_string();
    let text = hsched_config::read_text(path, hsched_config::MAX_FILE_BYTES)
        .map_err(|e| input_error(format!("error: cannot read the rt-app file `{name}`: {e}")))?;
    let w = hsched_config::parse_rtapp(&text, &name).map_err(rendered)?;
    hsched_config::attach_rtapp(h, w).map_err(|mut e| {
        e.fill_source(&name, &text);
        rendered(e)
    })
}

/// The longest trace `hsched import` reads: 1 GiB of text, some 7 million
/// events, far more than `record`'s default buffers hold (reading one
/// takes about twice its size in memory).
const MAX_TRACE_BYTES: u64 = 1 << 30;

/// Reads a Linux scheduler trace (`hsched import`).
///
/// # Errors
/// The file cannot be read, or an event line in it cannot.
pub fn load_trace(path: &Path) -> anyhow::Result<hsched_config::SchedTrace> {
    let name = path.display().to_string();
    let text = hsched_config::read_text(path, MAX_TRACE_BYTES)
        .map_err(|e| input_error(format!("error: cannot read `{name}`: {e}")))?;
    hsched_config::parse_sched_trace(&text, &name).map_err(rendered)
}

/// Checks that every thread can be simulated (has a workload).
///
/// # Errors
/// A thread without a workload.
pub fn check_simulatable(h: &Hierarchy) -> anyhow::Result<()> {
    h.check_simulatable().map_err(rendered)
}

/// Checks that every thread with `rtapp` has its task (`hsched check`).
///
/// # Errors
/// A thread whose rt-app task is not attached.
pub fn check_rtapp_attached(h: &Hierarchy) -> anyhow::Result<()> {
    h.check_rtapp_attached().map_err(rendered)
}

/// The configuration crate's rendering, which already counts several
/// errors.
fn rendered(e: ConfigErrors) -> anyhow::Error {
    input_error(e.to_string())
}
