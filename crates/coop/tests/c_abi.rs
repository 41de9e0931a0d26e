//! Compiles `tests/c/smoke.c` against the static library and the header
//! and runs it. Skipped (with a message) when no C compiler is installed.

use std::path::PathBuf;
use std::process::Command;

#[test]
fn c_program_uses_the_header_and_static_library() {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let exe = std::env::current_exe().expect("test path");
    // target/<profile>/deps/c_abi-*: the static library is built beside.
    let deps = exe.parent().expect("deps dir").to_path_buf();
    if Command::new("cc").arg("--version").output().is_err() {
        eprintln!("skipped: no C compiler");
        return;
    }
    // `cargo build` leaves the static library beside the test binary;
    // `cargo test` alone does not, so build it into a private target
    // directory (no lock shared with the running cargo).
    let lib = match [
        deps.join("libhsched_coop.a"),
        deps.join("../libhsched_coop.a"),
    ]
    .into_iter()
    .find(|p| p.exists())
    {
        Some(lib) => lib,
        None => {
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
            target.join("debug/libhsched_coop.a")
        }
    };
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
