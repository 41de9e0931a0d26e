//! What several live test binaries share: throw-away system users and the
//! C library built for C test programs. Each binary uses a part of it.
#![allow(dead_code)]

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::Duration;

/// The `hsched-live` binary under test.
pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_hsched-live")
}

/// A system user made for one test and removed after it.
pub struct TestUser {
    pub name: String,
    pub uid: u32,
}

impl TestUser {
    /// `None` (after saying SKIPPED) where `useradd` fails.
    pub fn create(tag: &str) -> Option<TestUser> {
        let name = format!("hsched-{tag}-{}", std::process::id() % 100_000);
        let ok = Command::new("useradd")
            .args([
                "--system",
                "--no-create-home",
                "--shell",
                "/usr/sbin/nologin",
                &name,
            ])
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            eprintln!("SKIPPED: useradd {name} failed");
            return None;
        }
        let out = Command::new("id").args(["-u", &name]).output().ok()?;
        let uid = String::from_utf8_lossy(&out.stdout).trim().parse().ok()?;
        Some(TestUser { name, uid })
    }

    /// `program`, to be run as this user.
    pub fn command(&self, program: &str) -> Command {
        let mut c = Command::new(program);
        c.uid(self.uid).gid(self.uid);
        c
    }

    /// A CPU hog of this user's (a program that asks for nothing itself).
    pub fn hog(&self) -> Child {
        self.command(bin())
            .args(["probe", "hog", "--duration", "40s"])
            .spawn()
            .unwrap()
    }

    /// `hsched-live ctl` as this user: exit code and standard error.
    pub fn ctl(&self, sock: &Path, op: &str, fields: &[String]) -> (i32, String) {
        let out = self
            .command(bin())
            .arg("ctl")
            .arg("--socket")
            .arg(sock)
            .arg(op)
            .args(fields)
            .output()
            .unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }
}

impl Drop for TestUser {
    fn drop(&mut self) {
        // userdel refuses a user with processes (a failed test's hogs).
        let _ = Command::new("pkill")
            .args(["-KILL", "-u", &self.name])
            .status();
        std::thread::sleep(Duration::from_millis(100));
        let _ = Command::new("userdel").arg(&self.name).status();
    }
}

/// `libhsched_coop.a`, built (or brought up to date) in a target directory
/// of its own, so no lock is shared with the running cargo; `None` when
/// the build fails.
pub fn coop_staticlib() -> Option<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../coop");
    let target = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("staticlib");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let ok = Command::new(cargo)
        .args(["build", "--offline", "--lib", "--manifest-path"])
        .arg(root.join("Cargo.toml"))
        .arg("--target-dir")
        .arg(&target)
        .status()
        .is_ok_and(|s| s.success());
    let lib = target.join("debug/libhsched_coop.a");
    (ok && lib.is_file()).then_some(lib)
}
