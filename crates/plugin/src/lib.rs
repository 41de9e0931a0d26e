//! Plug-in policies: schedulers compiled to WebAssembly, loaded from a
//! file and run, sandboxed, as [`hsched_core::Policy`] (docs/plugin-abi.md).
//!
//! [`load`] checks a module; [`register`] makes a
//! [`hsched_policies::PolicyInfo`] for it, so that a hierarchy file can
//! name it by path like a built-in policy; [`load_named`] does that for
//! every plug-in a hierarchy file names and installs them in
//! [`hsched_policies::registry()`], where the parser, the simulator and
//! the live daemon find them. A plug-in instance that
//! faults reports it through `Ctx::fault` and stays inert; the HSI's
//! caller unloads it (`Hsi::unload`) and its children move to the default
//! scheduler. [`faults`] lists what happened in this process.
#![warn(missing_docs)]

mod descriptor;
mod host;
mod load;
mod policy;
mod registry;
mod verify;

#[cfg(not(feature = "wasmtime"))]
pub(crate) use wasmi as rt;
#[cfg(feature = "wasmtime")]
pub(crate) use wasmtime as rt;

pub use descriptor::{Descriptor, GuaranteeDecl, Param, ABI_VERSION};
pub use load::{from_bytes, load, Limits, LoadError, Module};
pub use policy::WasmPolicy;
pub use registry::{
    faults, is_plugin_name, load_as, load_named, module_named, policies_for, register, resolve,
};

use hsched_core::Instant;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// The runtime this build runs plug-ins on.
pub const RUNTIME: &str = if cfg!(feature = "wasmtime") {
    "wasmtime"
} else {
    "wasmi"
};

/// A plug-in instance that was unloaded, and why.
#[derive(Clone, Debug, PartialEq)]
pub struct Fault {
    /// The scheduler instance (its name in the hierarchy).
    pub scheduler: String,
    /// The plug-in file.
    pub plugin: PathBuf,
    /// When.
    pub at: Instant,
    /// The hook that faulted (`hs_request`).
    pub hook: &'static str,
    /// What happened.
    pub what: String,
}

impl std::fmt::Display for Fault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "plug-in {} (scheduler `{}`) failed at {}: {} {}",
            self.plugin.display(),
            self.scheduler,
            self.at,
            self.hook,
            self.what
        )
    }
}

/// Where the instances of a process record their faults.
pub type FaultLog = Arc<Mutex<Vec<Fault>>>;
