//! Compiles `tests/c/smoke.c` against the static library and the header
//! and runs it. Skipped (with a message) when no C compiler is installed.

use std::path::PathBuf;
use std::process::Command;

#[test]
fn c_program_uses_the_header_and_static_library() {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    if Command::new("cc").arg("--version").output().is_err() {
        eprintln!("skipped: no C compiler");
        return;
    }
    // Always (re)build the static library into a private target directory
    // (no lock shared with the running cargo): a `libhsched_coop.a` left
    // beside the test binary by an earlier `cargo build` may be stale, and
    // cargo's own freshness check makes this cheap when nothing changed.
    let target = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("staticlib");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(cargo)
        .args(["build", "--offline", "--lib", "--manifest-path"])
        .arg(manifest.join("Cargo.toml"))
        .arg("--target-dir")
        .arg(&target)
        .status()
        .expect("cargo runs");
    assert!(status.success(), "building libhsched_coop.a failed");
    let lib = target.join("debug/libhsched_coop.a");
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("hsched_coop_smoke");
    let status = Command::new("cc")
        .arg("-std=c99")
        .arg("-Wall")
        .arg("-Werror")
        .arg("-I")
        .arg(manifest.join("include"))
        .arg(manifest.join("tests/c/smoke.c"))
        .arg(&lib)
        .args(["-lpthread", "-ldl", "-lm", "-o"])
        .arg(&out)
        .status()
        .expect("cc runs");
    assert!(status.success(), "C compile failed");
    let run = Command::new(&out).output().expect("smoke runs");
    let text = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success(),
        "C smoke test failed: {:?} {text}",
        run.status
    );
    assert!(text.starts_with("baxxd 5 "), "{text}");
}
