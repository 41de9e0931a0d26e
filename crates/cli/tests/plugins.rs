//! Plug-in policies through the `hsched` binary: a hierarchy file naming
//! `x.wasm` checks, draws, analyses (with the plug-in's declared mapping,
//! or as best effort, saying which) and simulates; `hsched policies
//! x.wasm` lists what a plug-in declares; a plug-in that cannot be loaded,
//! or parameters it refuses, are input errors (exit 2) naming the file and
//! what is wrong.
//!
//! The plug-ins are the SDK's examples, built by `make -C sdk` into a
//! scratch directory. Without clang-14 the tests say SKIPPED and pass,
//! unless `HSCHED_REQUIRE_CLANG=1` (CI sets it).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn scratch(what: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("hsched-cli-plugins-{what}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The SDK's examples built once for this test process, or `None` when
/// clang-14 is missing and not required.
fn built() -> Option<&'static Path> {
    static DIR: OnceLock<Option<PathBuf>> = OnceLock::new();
    DIR.get_or_init(|| {
        if Command::new("clang-14").arg("--version").output().is_err() {
            assert!(
                std::env::var("HSCHED_REQUIRE_CLANG").as_deref() != Ok("1"),
                "clang-14 is required (HSCHED_REQUIRE_CLANG=1) but cannot run"
            );
            eprintln!("SKIPPED: clang-14 not found; apt-get install clang-14 lld-14");
            return None;
        }
        let out = scratch("build");
        let o = Command::new("make")
            .arg("-s")
            .arg("-C")
            .arg(root().join("sdk"))
            .arg(format!("OUT={}", out.display()))
            .output()
            .expect("make runs");
        assert!(
            o.status.success(),
            "make -C sdk failed:\n{}",
            String::from_utf8_lossy(&o.stderr)
        );
        Some(out)
    })
    .as_deref()
}

fn hsched(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hsched"))
        .current_dir(dir)
        .args(args)
        .output()
        .expect("hsched runs")
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// A lottery plug-in over two CPU-bound threads, `extra` added to its
/// table; the plug-in named relative to the file.
fn lottery_file(dir: &Path, wasm: &str, extra: &str) -> PathBuf {
    let f = dir.join("lottery.toml");
    std::fs::write(
        &f,
        format!(
            "[[scheduler]]\nname = \"root\"\npolicy = \"{wasm}\"\n{extra}\n\n\
             [[thread]]\nname = \"a\"\nscheduler = \"root\"\nparams = {{ tickets = 3 }}\nworkload = {{ kind = \"cpu-bound\" }}\n\n\
             [[thread]]\nname = \"b\"\nscheduler = \"root\"\nparams = {{ tickets = 1 }}\nworkload = {{ kind = \"cpu-bound\" }}\n"
        ),
    )
    .unwrap();
    f
}

#[test]
fn the_sfq_worked_example_checks_analyzes_and_simulates_from_the_command_line() {
    let Some(build) = built() else { return };
    // The example names ../build/rescs.wasm: put it beside a copy of the
    // built plug-ins, as sdk/ has them.
    let dir = scratch("sfq");
    std::fs::create_dir_all(dir.join("examples")).unwrap();
    std::fs::create_dir_all(dir.join("build")).unwrap();
    std::fs::copy(build.join("rescs.wasm"), dir.join("build/rescs.wasm")).unwrap();
    std::fs::copy(
        root().join("sdk/examples/sfq-worked-example.toml"),
        dir.join("examples/sfq-worked-example.toml"),
    )
    .unwrap();
    let file = "examples/sfq-worked-example.toml";
    let o = hsched(&dir, &["check", file]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "check: {out}{err}");
    let o = hsched(&dir, &["analyze", file]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "analyze: {out}{err}");
    // §5.3.3.1: RESCS 10 20 → PSBE 0.5 5 → PSBE 0.25 75 for T1.
    assert!(out.contains("gets RESCS 10 20 (as PSBE 0.5 5)"), "{out}");
    assert!(out.contains("thread T1: PSBE 0.25 75"), "{out}");
    assert!(
        out.contains(
            "is analyzed with the mapping it declares (needs ALL, gives RESCS {amount} {period})"
        ),
        "{out}"
    );
    let o = hsched(&dir, &["tree", file]);
    assert!(o.status.success(), "tree: {:?}", text(&o));
    let o = hsched(
        &dir,
        &[
            "sim",
            file,
            "--duration",
            "4s",
            "--check-protocol",
            "--json",
        ],
    );
    let (out, err) = text(&o);
    assert!(o.status.success(), "sim: {err}");
    let r: serde_json::Value = serde_json::from_str(&out).unwrap();
    let share = |name: &str| {
        r["threads"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == name)
            .unwrap_or_else(|| panic!("no thread {name} in {out}"))["cpu_ns"]
            .as_f64()
            .unwrap()
            / 4e9
    };
    assert!((share("T1") - 0.25).abs() < 0.01, "T1 {}", share("T1"));
    assert!((share("bg") - 0.5).abs() < 0.01, "bg {}", share("bg"));
    assert!(
        r["unloaded"].as_array().is_none_or(|u| u.is_empty()),
        "{out}"
    );
}

#[test]
fn a_plugin_without_a_mapping_is_analyzed_as_best_effort_and_says_so() {
    let Some(build) = built() else { return };
    let dir = scratch("lottery");
    std::fs::copy(build.join("lottery.wasm"), dir.join("lottery.wasm")).unwrap();
    lottery_file(&dir, "lottery.wasm", "");
    let o = hsched(&dir, &["analyze", "lottery.toml"]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}{err}");
    assert!(
        out.contains("lottery.wasm has no guarantee mapping yet; analyzed as best effort"),
        "{out}"
    );
    let o = hsched(&dir, &["sim", "lottery.toml", "--duration", "2s"]);
    assert!(o.status.success(), "{:?}", text(&o));
    let o = hsched(&dir, &["policies", "lottery.wasm"]);
    let (out, _) = text(&o);
    assert!(o.status.success());
    assert!(out.contains("tickets"), "{out}");
    assert!(out.contains("none declared"), "{out}");
}

#[test]
fn modules_that_cannot_be_loaded_are_input_errors_naming_the_file() {
    let Some(build) = built() else { return };
    let dir = scratch("bad");
    // Not a module at all; a truncated one; a missing file.
    std::fs::write(dir.join("text.wasm"), "not a module\n").unwrap();
    let good = std::fs::read(build.join("fp.wasm")).unwrap();
    std::fs::write(dir.join("cut.wasm"), &good[..good.len() / 2]).unwrap();
    // A module for another ABI version.
    build_c(
        &dir,
        "old",
        "#include \"hsched_policy.h\"\n\
         HS_EXPORT(hs_abi_version) hs_i32 hs_abi_version(void) { return 0; }\n\
         HS_EXPORT(hs_descriptor) const char *hs_descriptor(void) { return \"{}\"; }\n",
    );
    for (wasm, says) in [
        ("text.wasm", "is not a WebAssembly module"),
        ("cut.wasm", "cut.wasm"),
        ("old.wasm", "ABI version 0"),
        ("missing.wasm", "missing.wasm"),
    ] {
        lottery_file(&dir, wasm, "");
        for verb in ["check", "tree", "analyze", "sim", "run"] {
            let o = hsched(&dir, &[verb, "lottery.toml"]);
            let (out, err) = text(&o);
            assert_eq!(o.status.code(), Some(2), "{verb} {wasm}: {out}{err}");
            assert!(
                err.contains("lottery.toml") && err.contains(wasm) && err.contains(says),
                "{verb} {wasm}: {err}"
            );
            assert!(!err.contains("panicked"), "{err}");
        }
        let o = hsched(&dir, &["policies", wasm]);
        assert_eq!(o.status.code(), Some(2), "policies {wasm}");
    }
}

#[test]
fn parameters_the_plugin_refuses_are_input_errors_naming_them() {
    let Some(build) = built() else { return };
    let dir = scratch("params");
    std::fs::copy(build.join("lottery.wasm"), dir.join("lottery.wasm")).unwrap();
    for (extra, says) in [
        ("quantum = \"soon\"", "quantum"),
        ("colour = 3", "colour"),
        ("seed = \"x\"", "seed"),
    ] {
        lottery_file(&dir, "lottery.wasm", extra);
        for verb in ["check", "sim"] {
            let o = hsched(&dir, &[verb, "lottery.toml"]);
            let (out, err) = text(&o);
            assert_eq!(o.status.code(), Some(2), "{verb} `{extra}`: {out}{err}");
            assert!(
                err.contains("lottery.toml") && err.contains(says),
                "{verb} `{extra}`: {err}"
            );
        }
    }
    // A child parameter out of its declared range.
    let f = lottery_file(&dir, "lottery.wasm", "");
    let t = std::fs::read_to_string(&f)
        .unwrap()
        .replace("tickets = 3", "tickets = 0");
    std::fs::write(&f, t).unwrap();
    let o = hsched(&dir, &["check", "lottery.toml"]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{out}{err}");
    assert!(err.contains("tickets"), "{err}");
}

/// Builds the C source `src` into `dir/NAME.wasm` with the tutorial's
/// command.
fn build_c(dir: &Path, name: &str, src: &str) {
    let c = dir.join(format!("{name}.c"));
    std::fs::write(&c, src).unwrap();
    let o = Command::new("clang-14")
        .args([
            "--target=wasm32",
            "-O2",
            "-nostdlib",
            "-ffreestanding",
            "-fuse-ld=lld",
            "-Wl,--no-entry",
            "-Wl,--export-dynamic",
        ])
        .arg("-I")
        .arg(root().join("sdk/include"))
        .arg("-o")
        .arg(dir.join(format!("{name}.wasm")))
        .arg(&c)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

#[test]
fn the_tutorial_shows_what_hsched_prints() {
    if built().is_none() {
        return;
    }
    // Sections 5 and 6 of docs/writing-a-policy.md, as a reader runs them.
    let dir = scratch("tutorial");
    let rr = std::fs::read_to_string(root().join("sdk/tutorial/rr.c")).unwrap();
    let toml = std::fs::read_to_string(root().join("sdk/tutorial/rr.toml")).unwrap();
    build_c(&dir, "rr", &rr);
    std::fs::write(dir.join("rr.toml"), &toml).unwrap();
    let release = "      hsched_release(hsched_parent_vp(0));";
    assert!(rr.contains(release), "rr.c lost the line section 6 removes");
    build_c(
        &dir,
        "broken",
        &rr.replace(release, "      /* forgot to release */"),
    );
    std::fs::write(
        dir.join("broken.toml"),
        toml.replace("policy = \"rr.wasm\"", "policy = \"broken.wasm\"")
            .replace(
                "{ kind = \"cpu-bound\" }",
                "{ kind = \"periodic\", period = \"20ms\", exec = \"5ms\" }",
            ),
    )
    .unwrap();
    let doc = std::fs::read_to_string(root().join("docs/writing-a-policy.md")).unwrap();
    let marker = "<!-- output of: hsched ";
    let mut shown = 0;
    for (at, _) in doc.match_indices(marker) {
        let rest = &doc[at + marker.len()..];
        let args: Vec<&str> = rest[..rest.find(" -->").unwrap()].split(' ').collect();
        let body = &rest[rest.find("```text\n").unwrap() + 8..];
        let want = &body[..body.find("```").unwrap()];
        let o = hsched(&dir, &args);
        let (out, err) = text(&o);
        assert!(o.status.success(), "hsched {args:?}: {err}");
        assert_eq!(
            format!("{out}{err}"),
            want,
            "docs/writing-a-policy.md shows another output of hsched {args:?}"
        );
        shown += 1;
    }
    assert!(shown >= 3, "only {shown} outputs shown in the tutorial");
}
