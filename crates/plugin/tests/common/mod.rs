//! What the plug-in tests share: building C plug-ins with clang-14 and
//! simulating hierarchy files that name them.
//!
//! Without `clang-14` on PATH the tests that need it say SKIPPED and pass,
//! unless `HSCHED_REQUIRE_CLANG=1` (CI sets it) makes that a failure.
#![allow(dead_code)] // each test binary uses a part

use std::path::{Path, PathBuf};
use std::process::Command;

/// The repository root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A fresh directory for this test process, named for `what`.
pub fn scratch(what: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("hsched-plugin-{what}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Reads `p`, panicking with its name.
pub fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// Compiles the C file `src` with `defines` into `scratch("build")/NAME.wasm`
/// as sdk/Makefile does; `None` when clang-14 is missing and not required.
pub fn compile(src: &Path, name: &str, defines: &[&str]) -> Option<PathBuf> {
    let out = scratch("build").join(format!("{name}.wasm"));
    let mut cmd = Command::new("clang-14");
    cmd.args([
        "--target=wasm32",
        "-O2",
        "-nostdlib",
        "-ffreestanding",
        "-fuse-ld=lld",
        "-Wl,--no-entry",
        "-Wl,--export-dynamic",
        "-Wall",
        "-Wextra",
        "-Werror",
    ])
    .arg("-I")
    .arg(repo().join("sdk/include"))
    .args(defines)
    .arg("-o")
    .arg(&out)
    .arg(src);
    match cmd.output() {
        Ok(o) if o.status.success() => Some(out),
        Ok(o) => panic!(
            "clang-14 failed on {}:\n{}",
            src.display(),
            String::from_utf8_lossy(&o.stderr)
        ),
        Err(e) => {
            if std::env::var("HSCHED_REQUIRE_CLANG").as_deref() == Ok("1") {
                panic!("clang-14 is required (HSCHED_REQUIRE_CLANG=1) but cannot run: {e}");
            }
            eprintln!("SKIPPED: clang-14 not found ({e}); apt-get install clang-14 lld-14");
            None
        }
    }
}

/// Builds the SDK example `sdk/examples/NAME.c`.
pub fn example(name: &str) -> Option<PathBuf> {
    compile(&repo().join(format!("sdk/examples/{name}.c")), name, &[])
}

/// Loads the hierarchy file `toml` with the plug-ins it names and
/// simulates it under the protocol checker with `opts` (whose
/// `check_protocol` is forced on).
pub fn simulate(toml: &Path, opts: hsched_sim::SimOptions) -> hsched_sim::Report {
    let text = read(toml);
    let policies = hsched_plugin::policies_for(Some(toml), &text)
        .unwrap_or_else(|e| panic!("{}: {e}", toml.display()));
    let h = hsched_config::load_with_policies(toml, &policies)
        .unwrap_or_else(|e| panic!("{}: {e}", toml.display()));
    hsched_sim::run_with_policies(
        &h,
        hsched_sim::SimOptions {
            check_protocol: true,
            ..opts
        },
        &policies,
    )
    .unwrap_or_else(|e| panic!("sim {}: {e}", toml.display()))
}
