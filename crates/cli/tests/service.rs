//! The systemd unit in contrib/systemd names the `hsched run` a desktop
//! would start: it must be a unit systemd accepts, with a command line
//! `hsched run` accepts.

use std::path::Path;
use std::process::Command;

#[test]
fn the_service_unit_is_valid_and_its_command_parses() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let unit = std::fs::read_to_string(root.join("contrib/systemd/hsched.service")).unwrap();
    let exec = unit
        .lines()
        .find_map(|l| l.strip_prefix("ExecStart="))
        .expect("an ExecStart line");
    let args: Vec<&str> = exec.split_whitespace().collect();
    assert_eq!(
        &args[..3],
        &["/usr/local/bin/hsched", "run", "/etc/hsched/hierarchy.toml"]
    );
    // The options after the file are ones `run` knows: with a missing file
    // it fails on the file (exit 2 naming it), not on an option.
    let o = Command::new(env!("CARGO_BIN_EXE_hsched"))
        .arg("run")
        .arg(root.join("no-such-hierarchy.toml"))
        .args(&args[3..])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("no-such-hierarchy.toml"), "{err}");
    // systemd's own check, where systemd is installed.
    if Command::new("systemd-analyze")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("SKIPPED: no systemd-analyze");
        return;
    }
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("service");
    std::fs::create_dir_all(&dir).unwrap();
    let copy = dir.join("hsched.service");
    std::fs::write(
        &copy,
        unit.replace("/usr/local/bin/hsched", env!("CARGO_BIN_EXE_hsched")),
    )
    .unwrap();
    let o = Command::new("systemd-analyze")
        .arg("verify")
        .arg(&copy)
        .output()
        .unwrap();
    assert!(
        o.status.success() && o.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}
