//! Loading a plug-in: read the file, check it is a module for this ABI
//! that imports only what hsched offers and exports what it must, and read
//! its descriptor (docs/plugin-abi.md, "Load errors").

use crate::descriptor::{self, Descriptor, ABI_VERSION};
use crate::host::{self, Host};
use crate::rt;
use std::fmt;
use std::path::{Path, PathBuf};

/// Bounds on what one plug-in instance may use (docs/plugin-abi.md,
/// "Sandbox and fallback").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Most bytes of linear memory.
    pub memory_bytes: usize,
    /// Fuel for one hook (about one unit per WebAssembly instruction).
    pub fuel_per_hook: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            memory_bytes: 16 << 20,
            fuel_per_hook: 10_000_000,
        }
    }
}

/// A plug-in file hsched cannot use, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoadError {
    /// The file.
    pub path: PathBuf,
    /// What is wrong with it.
    pub message: String,
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "plug-in {}: {}", self.path.display(), self.message)
    }
}
impl std::error::Error for LoadError {}

/// Exports every plug-in must define.
pub(crate) const REQUIRED: &[&str] = &[
    "hs_abi_version",
    "hs_descriptor",
    "hs_register_vp",
    "hs_unregister_vp",
    "hs_request",
    "hs_release",
    "hs_grant",
    "hs_revoke",
];

/// A checked module, ready to be instantiated.
pub struct Module {
    /// The file it came from.
    pub path: PathBuf,
    /// What it declares.
    pub descriptor: Descriptor,
    /// Its bounds.
    pub limits: Limits,
    pub(crate) engine: rt::Engine,
    pub(crate) module: rt::Module,
    pub(crate) linker: rt::Linker<Host>,
}

impl fmt::Debug for Module {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Module")
            .field("path", &self.path)
            .field("name", &self.descriptor.name)
            .finish()
    }
}

/// A store and instance of `module` under `limits`.
pub(crate) fn instantiate(m: &Module) -> Result<(rt::Store<Host>, rt::Instance), String> {
    let limits = rt::StoreLimitsBuilder::new()
        .memory_size(m.limits.memory_bytes)
        .instances(1)
        .memories(1)
        .tables(1)
        .build();
    let mut store = rt::Store::new(&m.engine, Host::new(limits));
    store.limiter(|h| &mut h.limits);
    store
        .set_fuel(m.limits.fuel_per_hook)
        .map_err(|e| e.to_string())?;
    #[cfg(feature = "wasmtime")]
    let inst = m.linker.instantiate(&mut store, &m.module);
    #[cfg(not(feature = "wasmtime"))]
    let inst = m.linker.instantiate_and_start(&mut store, &m.module);
    let inst = inst.map_err(|e| format!("cannot be instantiated: {e}"))?;
    Ok((store, inst))
}

fn engine() -> rt::Engine {
    let mut config = rt::Config::default();
    config.consume_fuel(true);
    #[cfg(feature = "wasmtime")]
    {
        // Deterministic runs: no parallel or cached compilation needed.
        config.cranelift_opt_level(wasmtime::OptLevel::Speed);
    }
    #[cfg(feature = "wasmtime")]
    return rt::Engine::new(&config).expect("a wasmtime configuration hsched controls");
    #[cfg(not(feature = "wasmtime"))]
    rt::Engine::new(&config)
}

/// Loads and checks the plug-in at `path`.
///
/// # Errors
/// The file cannot be read, is not a WebAssembly module, is built for
/// another ABI version, imports something hsched does not offer, lacks a
/// required export or has a bad descriptor.
pub fn load(path: &Path, limits: Limits) -> Result<Module, LoadError> {
    let err = |message: String| LoadError {
        path: path.to_path_buf(),
        message,
    };
    let bytes = std::fs::read(path).map_err(|e| err(format!("cannot be read: {e}")))?;
    from_bytes(path, &bytes, limits)
}

/// [`load`] for a module already in memory; `path` names it in messages.
///
/// # Errors
/// As [`load`].
pub fn from_bytes(path: &Path, bytes: &[u8], limits: Limits) -> Result<Module, LoadError> {
    let err = |message: String| LoadError {
        path: path.to_path_buf(),
        message,
    };
    if !bytes.starts_with(b"\0asm") {
        return Err(err(
            "is not a WebAssembly module (it does not start with the \\0asm magic number)".into(),
        ));
    }
    let engine = engine();
    let module = rt::Module::new(&engine, bytes)
        .map_err(|e| err(format!("is not a valid WebAssembly module: {e}")))?;
    for imp in module.imports() {
        let (m, n) = (imp.module(), imp.name());
        if m != "hsched" || !host::IMPORTS.contains(&n) {
            return Err(err(format!(
                "imports `{m}.{n}`, which hsched does not offer; a plug-in may import only functions of module `hsched` (docs/plugin-abi.md, \"Host functions\")"
            )));
        }
    }
    let exports: Vec<String> = module.exports().map(|e| e.name().to_string()).collect();
    let missing = |need: &str| {
        (!exports.iter().any(|e| e == need)).then(|| {
            err(format!(
                "does not export `{need}`, which every plug-in must (docs/plugin-abi.md, \"Hooks\")"
            ))
        })
    };
    // The version first: a module built for another ABI is told so, not
    // that it lacks this version's hooks.
    if let Some(e) = ["hs_abi_version", "memory"].into_iter().find_map(missing) {
        return Err(e);
    }
    let mut linker = rt::Linker::new(&engine);
    host::link(&mut linker).map_err(|e| err(format!("cannot be linked: {e}")))?;
    let mut m = Module {
        path: path.to_path_buf(),
        descriptor: descriptor::parse(r#"{"abi":1,"name":"loading"}"#).map_err(err)?,
        limits,
        engine,
        module,
        linker,
    };
    let (mut store, inst) = instantiate(&m).map_err(err)?;
    let version = inst
        .get_typed_func::<(), i32>(&mut store, "hs_abi_version")
        .map_err(|e| err(format!("`hs_abi_version` has the wrong signature: {e}")))?
        .call(&mut store, ())
        .map_err(|e| err(format!("`hs_abi_version` failed: {e}")))?;
    if version != ABI_VERSION {
        return Err(err(format!(
            "is built for ABI version {version}; this hsched implements version {ABI_VERSION} (rebuild it against sdk/include/hsched_policy.h)"
        )));
    }
    if let Some(e) = REQUIRED.iter().copied().find_map(missing) {
        return Err(e);
    }
    let ptr = inst
        .get_typed_func::<(), u32>(&mut store, "hs_descriptor")
        .map_err(|e| err(format!("`hs_descriptor` has the wrong signature: {e}")))?
        .call(&mut store, ())
        .map_err(|e| err(format!("`hs_descriptor` failed: {e}")))?;
    let text = c_string(&mut store, &inst, ptr)
        .map_err(|e| err(format!("the descriptor (`hs_descriptor`) {e}")))?;
    m.descriptor = descriptor::parse(&text).map_err(|e| err(format!("descriptor: {e}")))?;
    crate::policy::Funcs::get(&mut store, &inst).map_err(err)?;
    Ok(m)
}

/// The NUL-terminated UTF-8 string at `ptr` (at most 64 KiB).
pub(crate) fn c_string(
    store: &mut rt::Store<Host>,
    inst: &rt::Instance,
    ptr: u32,
) -> Result<String, String> {
    let mem = inst
        .get_memory(&mut *store, "memory")
        .ok_or("has no memory to read")?;
    let data = mem.data(&*store);
    let start = ptr as usize;
    let tail = data
        .get(start..)
        .ok_or_else(|| format!("points outside memory ({ptr})"))?;
    let tail = &tail[..tail.len().min(64 << 10)];
    let end = tail
        .iter()
        .position(|&b| b == 0)
        .ok_or("is not NUL-terminated within 64 KiB")?;
    std::str::from_utf8(&tail[..end])
        .map(str::to_string)
        .map_err(|_| "is not UTF-8".to_string())
}
