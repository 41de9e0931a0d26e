//! Enforcing the hierarchy's decisions on real threads.
//!
//! Mechanism (chosen by measurement, see docs/live-mode.md):
//! - a thread the hierarchy grants CPU `c` runs at `SCHED_FIFO` (a low
//!   real-time priority, below the daemon's) pinned to `c`, so unmanaged
//!   fair-class work cannot take the CPU from it;
//! - a runnable thread that is not granted is *frozen* in a cgroup-v1
//!   freezer cgroup of its own (one per thread, so threads of one process
//!   are stopped independently; SIGSTOP would stop the whole process and
//!   is visible to its parent through `waitpid`);
//! - a blocked thread is left alone (freezing it would hide its wake-up).
//!
//! Everything changed is recorded first in [`Original`] and handed to the
//! watchdog, which restores it if the daemon dies.

use crate::sys::{self, CpuMask, SchedAttr};
use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// What a thread looked like before hsched touched it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Original {
    /// The thread.
    pub tid: i32,
    /// Its process.
    pub tgid: i32,
    /// Its start time (clock ticks since boot, `/proc/TID/stat` field 22),
    /// so a recycled tid is never touched.
    pub start: u64,
    /// Scheduling policy, priority, nice, deadline parameters.
    pub attr: SchedAttr,
    /// CPU affinity.
    pub mask: CpuMask,
}

/// `(tgid, start time)` of thread `tid`, from procfs.
pub fn proc_identity(tid: i32) -> io::Result<(i32, u64)> {
    let stat = std::fs::read_to_string(format!("/proc/{tid}/stat"))?;
    let start = stat
        .rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().nth(19))
        .and_then(|s| s.parse::<u64>().ok())
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "bad /proc stat"))?;
    let status = std::fs::read_to_string(format!("/proc/{tid}/status"))?;
    let tgid = status
        .lines()
        .find_map(|l| l.strip_prefix("Tgid:"))
        .and_then(|s| s.trim().parse().ok())
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "bad /proc status"))?;
    Ok((tgid, start))
}

/// The state letter of thread `tid` (`R`, `S`, `D`, `T`, ...).
pub fn proc_state(tid: i32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{tid}/stat")).ok()?;
    stat.rsplit_once(')')?
        .1
        .split_whitespace()
        .next()?
        .chars()
        .next()
}

/// CPU time thread `tid` has used, in ns (`/proc/TID/schedstat`).
pub fn proc_cpu_ns(tid: i32) -> Option<u64> {
    std::fs::read_to_string(format!("/proc/{tid}/schedstat"))
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// The real uid owning thread `tid`.
pub fn proc_uid(tid: i32) -> Option<u32> {
    let status = std::fs::read_to_string(format!("/proc/{tid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// The thread ids of process `pid`.
pub fn proc_threads(pid: i32) -> io::Result<Vec<i32>> {
    let mut v: Vec<i32> = std::fs::read_dir(format!("/proc/{pid}/task"))?
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    v.sort_unstable();
    Ok(v)
}

impl Original {
    /// Captures thread `tid` as it is now.
    ///
    /// # Errors
    /// The thread is gone or cannot be inspected.
    pub fn capture(tid: i32) -> io::Result<Original> {
        let (tgid, start) = proc_identity(tid)?;
        Ok(Original {
            tid,
            tgid,
            start,
            attr: sys::sched_getattr(tid)?,
            mask: sys::get_affinity(tid)?,
        })
    }

    /// Whether `self.tid` still names the same thread.
    pub fn same_thread(&self) -> bool {
        proc_identity(self.tid).is_ok_and(|(_, s)| s == self.start)
    }
}

/// The v1 freezer mount point, if the freezer controller is mounted.
pub fn freezer_mount() -> Option<PathBuf> {
    let mounts = std::fs::read_to_string("/proc/self/mounts").ok()?;
    mounts.lines().find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        (f.len() >= 4 && f[2] == "cgroup" && f[3].split(',').any(|o| o == "freezer"))
            .then(|| PathBuf::from(f[1]))
    })
}

/// hsched's freezer cgroups: `MOUNT/hsched-PID/TID`, one per managed thread.
#[derive(Debug)]
pub struct Freezer {
    /// The freezer mount point.
    pub mount: PathBuf,
    /// `MOUNT/hsched-PID`.
    pub root: PathBuf,
}

/// One thread's freezer cgroup, with its state file open for writing.
#[derive(Debug)]
pub struct ThreadCg {
    state: File,
    dir: PathBuf,
}

impl Freezer {
    /// Creates `MOUNT/hsched-PID`.
    ///
    /// # Errors
    /// No v1 freezer mounted, or the directory cannot be made.
    pub fn new() -> io::Result<Freezer> {
        let mount = freezer_mount().ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                "the cgroup-v1 freezer controller is not mounted",
            )
        })?;
        let root = mount.join(format!("hsched-{}", sys::getpid()));
        match std::fs::create_dir(&root) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
        Ok(Freezer { mount, root })
    }

    /// Moves thread `tid` into a freezer cgroup of its own.
    ///
    /// # Errors
    /// The thread is gone, or the cgroup cannot be made.
    pub fn adopt(&self, tid: i32) -> io::Result<ThreadCg> {
        let dir = self.root.join(tid.to_string());
        match std::fs::create_dir(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
        let res = std::fs::write(dir.join("tasks"), tid.to_string());
        if let Err(e) = res {
            let _ = std::fs::remove_dir(&dir);
            return Err(e);
        }
        let state = std::fs::OpenOptions::new()
            .write(true)
            .open(dir.join("freezer.state"))?;
        Ok(ThreadCg { state, dir })
    }

    /// Moves `tid` back to the freezer root (thawing it) and removes its
    /// cgroup; `false` if the cgroup is still busy (an exiting thread).
    pub fn release(&self, tid: i32, cg: &ThreadCg) -> bool {
        let _ = (&cg.state).write_all(b"THAWED");
        let _ = std::fs::write(self.mount.join("tasks"), tid.to_string());
        std::fs::remove_dir(&cg.dir).is_ok()
    }

    /// Removes every leftover cgroup and the root (best effort, retrying
    /// for up to `patience`).
    pub fn cleanup(&self, patience: std::time::Duration) {
        cleanup_root(&self.mount, &self.root, patience);
    }
}

/// Thaws and empties every cgroup under `root`, then removes them.
pub fn cleanup_root(mount: &Path, root: &Path, patience: std::time::Duration) {
    let t0 = std::time::Instant::now();
    loop {
        let mut left = false;
        if let Ok(rd) = std::fs::read_dir(root) {
            for e in rd.flatten() {
                let p = e.path();
                if !p.is_dir() {
                    continue;
                }
                let _ = std::fs::write(p.join("freezer.state"), "THAWED");
                if let Ok(tasks) = std::fs::read_to_string(p.join("tasks")) {
                    for t in tasks.split_whitespace() {
                        let _ = std::fs::write(mount.join("tasks"), t);
                    }
                }
                if std::fs::remove_dir(&p).is_err() {
                    left = true;
                }
            }
        }
        if !left && (std::fs::remove_dir(root).is_ok() || !root.exists()) {
            return;
        }
        if t0.elapsed() > patience {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

impl ThreadCg {
    /// Stops the thread (`FROZEN`).
    ///
    /// # Errors
    /// The cgroup is gone.
    pub fn freeze(&self) -> io::Result<()> {
        (&self.state).write_all(b"FROZEN")
    }
    /// Lets the thread run again (`THAWED`).
    ///
    /// # Errors
    /// The cgroup is gone.
    pub fn thaw(&self) -> io::Result<()> {
        (&self.state).write_all(b"THAWED")
    }
    /// The cgroup directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

/// Puts everything recorded in `o` back on its thread, if it is still the
/// same thread: moves it out of hsched's freezer cgroups (which thaws it),
/// then restores policy, priority and affinity.
pub fn restore(o: &Original, freezer_mount: Option<&Path>, root: Option<&Path>) -> io::Result<()> {
    if !o.same_thread() {
        return Ok(());
    }
    if let (Some(m), Some(r)) = (freezer_mount, root) {
        let _ = std::fs::write(r.join(o.tid.to_string()).join("freezer.state"), "THAWED");
        let _ = std::fs::write(m.join("tasks"), o.tid.to_string());
    }
    let a = sys::sched_setattr(o.tid, &o.attr);
    let b = sys::set_affinity(o.tid, &o.mask);
    a.and(b)
}
