//! The error-message corpus: every `tests/corpus/*.toml` is a broken
//! hierarchy file whose full diagnostic output must equal its sibling
//! `.expected` file. A `.json` next to a `.toml` of the same stem is the
//! rt-app file that hierarchy names, and `*.json` files without a `.toml`
//! are broken rt-app files checked on their own.
//!
//! After a deliberate change of wording, regenerate the expectations with
//! `HSCHED_BLESS=1 cargo test -p hsched-config --test corpus` and review
//! the diff. A missing `.expected` file fails the test.

use std::path::{Path, PathBuf};

fn render(path: &Path) -> String {
    let dir = path.parent().unwrap();
    let name = path.file_name().unwrap().to_string_lossy().to_string();
    let is_toml = path.extension().is_some_and(|e| e == "toml");
    // Load from the corpus directory so messages carry the bare file name.
    let cwd_guard = CwdGuard::enter(dir);
    let out = if is_toml {
        match hsched_config::load(Path::new(&name)) {
            Ok(_) => "(no error)\n".to_string(),
            Err(e) => e.to_string(),
        }
    } else {
        let text = std::fs::read_to_string(&name).unwrap();
        match hsched_config::parse_rtapp(&text, &name) {
            Ok(_) => "(no error)\n".to_string(),
            Err(e) => e.to_string(),
        }
    };
    drop(cwd_guard);
    out
}

/// The working directory is process-wide: the corpus runs in one test, and
/// this is the only test in its binary.
struct CwdGuard(PathBuf);
impl CwdGuard {
    fn enter(dir: &Path) -> Self {
        let old = std::env::current_dir().unwrap();
        std::env::set_current_dir(dir).unwrap();
        CwdGuard(old)
    }
}
impl Drop for CwdGuard {
    fn drop(&mut self) {
        let _ = std::env::set_current_dir(&self.0);
    }
}

#[test]
fn corpus_messages_match() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus");
    let mut inputs: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let ext = p.extension().and_then(|e| e.to_str()).unwrap_or("");
            ext == "toml" || (ext == "json" && !p.with_extension("toml").exists())
        })
        .collect();
    inputs.sort();
    assert!(
        inputs.len() >= 20,
        "the corpus has only {} files",
        inputs.len()
    );
    let bless = std::env::var_os("HSCHED_BLESS").is_some();
    let mut failures = Vec::new();
    for input in &inputs {
        let got = render(input);
        assert!(
            !got.contains("(no error)"),
            "{} parses without error; every corpus file must be broken",
            input.display()
        );
        let expected_path = input.with_extension("expected");
        if bless {
            std::fs::write(&expected_path, &got).unwrap();
            continue;
        }
        match std::fs::read_to_string(&expected_path) {
            Err(_) => failures.push(format!(
                "{}: no .expected file; the output is:\n{got}",
                input.display()
            )),
            Ok(want) if want != got => failures.push(format!(
                "{}: output differs\n--- expected\n{want}--- got\n{got}",
                input.display()
            )),
            Ok(_) => {}
        }
    }
    assert!(
        failures.is_empty(),
        "{} corpus mismatch(es):\n\n{}",
        failures.len(),
        failures.join("\n")
    );
}
