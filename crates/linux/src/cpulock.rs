//! One hsched daemon per CPU: an exclusive `flock(2)` per managed CPU.
//!
//! Two daemons that manage the same CPU both grant `SCHED_FIFO` threads
//! there, freeze each other's work and charge each other's time: measured
//! with a second daemon on the CPU, a 10/33 ms reservation received 60–70 %
//! of its allocation and its frames had 67 ms gaps (docs/measurements/live-mode.md). So
//! before it changes anything a daemon takes an exclusive, non-blocking
//! lock on `/run/hsched/cpu<N>.lock` (mode 0644) for every CPU it manages,
//! writes its pid there for the error message of whoever comes next, and
//! keeps the locks for its whole life. A daemon asking for a CPU whose lock
//! is held fails at start ([`crate::LiveError::CpuBusy`], exit status 3)
//! before any change, and releases the CPUs it had already taken.
//!
//! The lock belongs to the open file description, which is opened
//! `O_CLOEXEC`: programs the daemon `exec`s never get it, and the built-in
//! workloads it forks close every inherited descriptor first. The watchdog
//! ([`crate::watchdog`]) keeps the daemon's lock descriptors ([`CpuLocks::fds`]):
//! after a `kill -9` the CPUs stay locked, under the watchdog's pid
//! ([`CpuLocks::rewrite_holder`]), until it has restored the dead daemon's
//! threads, and a new daemon there waits or is refused until then. So the
//! lock ends with the daemon and its watchdog: there is no stale lock to
//! clean up, and the files are never removed (removing a lock file races
//! with its next user).
//!
//! A process that holds a CPU may run daemons on it itself (the benchmarks
//! run one after another in one process), and, when it took the lock
//! [`Sharing::WithChildren`], its direct children may too (the live tests
//! and `bench ctl` start `hsched-live run` as children). Such a daemon runs
//! under its parent's lock without taking one; keeping those daemons apart
//! is the holder's business.

use std::fs::File;
use std::io::{self, Read, Seek, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::FileExt;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Where the lock files live.
pub const LOCK_DIR: &str = "/run/hsched";

/// The lock file of `cpu` in [`LOCK_DIR`].
pub fn lock_path(cpu: usize) -> PathBuf {
    Path::new(LOCK_DIR).join(format!("cpu{cpu}.lock"))
}

/// Who else may run a daemon on a CPU this process holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sharing {
    /// Only this process (a daemon).
    Exclusive,
    /// This process and its direct children (tests and benchmarks that
    /// start `hsched-live run`).
    WithChildren,
}

/// Why CPUs could not be locked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LockError {
    /// Another process holds the lock of `cpu`.
    Busy {
        /// The Linux CPU.
        cpu: usize,
        /// The holder's pid as it wrote it, if it did.
        holder: Option<i32>,
        /// The lock file.
        path: PathBuf,
    },
    /// The lock directory or file could not be opened.
    Io(String),
}

impl std::fmt::Display for LockError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LockError::Busy { cpu, holder, path } => {
                write!(f, "CPU {cpu} is already managed by another hsched daemon ")?;
                match holder {
                    Some(pid) => match comm(*pid) {
                        Some(c) => write!(f, "(pid {pid}, `{c}`)")?,
                        None => write!(f, "(pid {pid})")?,
                    },
                    None => write!(f, "(pid unknown)")?,
                }
                write!(
                    f,
                    "; one daemon per CPU (lock {}): choose other CPUs with --cpus or wait for it to end",
                    path.display()
                )
            }
            LockError::Io(m) => write!(f, "CPU lock: {m}"),
        }
    }
}
impl std::error::Error for LockError {}

fn comm(pid: i32) -> Option<String> {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

struct Held {
    cpu: usize,
    /// `None`: covered by this process's or its parent's lock.
    file: Option<File>,
}

/// The CPU locks this process holds; dropping it releases them.
pub struct CpuLocks {
    held: Vec<Held>,
}

impl std::fmt::Debug for CpuLocks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CpuLocks")
            .field("cpus", &self.cpus())
            .field("taken", &self.taken())
            .finish()
    }
}

/// The pid and sharing a holder wrote (`PID` or `PID children`).
fn read_holder(file: &mut File) -> Option<(i32, Sharing)> {
    // The holder writes its line right after locking: retry briefly when
    // the file is still empty.
    for _ in 0..5 {
        let mut s = String::new();
        if file.rewind().is_ok() && file.read_to_string(&mut s).is_ok() {
            let mut w = s.lines().next().unwrap_or("").split_whitespace();
            if let Some(pid) = w.next().and_then(|p| p.parse().ok()) {
                let sharing = match w.next() {
                    Some("children") => Sharing::WithChildren,
                    _ => Sharing::Exclusive,
                };
                return Some((pid, sharing));
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    None
}

impl CpuLocks {
    /// Locks every CPU of `cpus` in [`LOCK_DIR`], without waiting.
    ///
    /// # Errors
    /// [`LockError::Busy`] for the first CPU another process holds (the
    /// CPUs already taken are released), [`LockError::Io`] when the lock
    /// directory or a file cannot be opened.
    pub fn try_acquire(cpus: &[usize], sharing: Sharing) -> Result<CpuLocks, LockError> {
        Self::try_acquire_in(Path::new(LOCK_DIR), cpus, sharing)
    }

    /// [`CpuLocks::try_acquire`] with the lock files in `dir`.
    ///
    /// # Errors
    /// As [`CpuLocks::try_acquire`].
    pub fn try_acquire_in(
        dir: &Path,
        cpus: &[usize],
        sharing: Sharing,
    ) -> Result<CpuLocks, LockError> {
        Self::acquire_as(
            dir,
            cpus,
            sharing,
            crate::sys::getpid(),
            crate::sys::getppid(),
        )
    }

    /// Like [`CpuLocks::try_acquire`], but retries every 100 ms while a CPU
    /// is busy, for at most `timeout`.
    ///
    /// # Errors
    /// The last [`LockError::Busy`] when `timeout` passed, or
    /// [`LockError::Io`] at once.
    pub fn acquire_wait(
        cpus: &[usize],
        sharing: Sharing,
        timeout: std::time::Duration,
    ) -> Result<CpuLocks, LockError> {
        let t0 = std::time::Instant::now();
        let mut order: Vec<usize> = cpus.to_vec();
        loop {
            match Self::acquire_as(
                Path::new(LOCK_DIR),
                &order,
                sharing,
                crate::sys::getpid(),
                crate::sys::getppid(),
            ) {
                Err(LockError::Busy { cpu, .. }) if t0.elapsed() < timeout => {
                    // Try the busy CPU first next time, so that while it
                    // stays busy no other CPU is taken even for a moment
                    // (a daemon starting there would be refused).
                    order.retain(|&c| c != cpu);
                    order.insert(0, cpu);
                    std::thread::sleep(std::time::Duration::from_millis(100));
                }
                r => return r,
            }
        }
    }

    /// The locking itself, with the caller's identity given (tests).
    fn acquire_as(
        dir: &Path,
        cpus: &[usize],
        sharing: Sharing,
        me: i32,
        parent: i32,
    ) -> Result<CpuLocks, LockError> {
        let io = |what: &Path, e: io::Error| LockError::Io(format!("{}: {e}", what.display()));
        if !dir.is_dir() {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o755)
                .create(dir)
                .map_err(|e| io(dir, e))?;
        }
        // In the order given (each try is non-blocking, so no order can
        // deadlock), each CPU once.
        let mut locks = CpuLocks { held: Vec::new() };
        for (i, &cpu) in cpus.iter().enumerate() {
            if cpus[..i].contains(&cpu) {
                continue;
            }
            let path = dir.join(format!("cpu{cpu}.lock"));
            // std opens with O_CLOEXEC: exec'd programs never inherit it.
            let mut file = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .mode(0o644)
                .open(&path)
                .map_err(|e| io(&path, e))?;
            if crate::sys::flock_exclusive_nb(file.as_raw_fd()).map_err(|e| io(&path, e))? {
                // Write the new line first, then cut what is left of an
                // older one, so a reader always sees one whole first line.
                let line = match sharing {
                    Sharing::Exclusive => format!("{me}\n"),
                    Sharing::WithChildren => format!("{me} children\n"),
                };
                let _ = file.rewind();
                let _ = file.write_all(line.as_bytes());
                let _ = file.set_len(line.len() as u64);
                if let Ok(m) = file.metadata() {
                    if m.permissions().mode() & 0o777 != 0o644 {
                        let _ = file.set_permissions(std::fs::Permissions::from_mode(0o644));
                    }
                }
                locks.held.push(Held {
                    cpu,
                    file: Some(file),
                });
                continue;
            }
            let holder = read_holder(&mut file);
            let covered = match holder {
                Some((pid, _)) if pid == me => true,
                Some((pid, Sharing::WithChildren)) if pid == parent => true,
                _ => false,
            };
            if !covered {
                // `locks` drops here: the CPUs taken so far are released.
                return Err(LockError::Busy {
                    cpu,
                    holder: holder.map(|h| h.0),
                    path,
                });
            }
            locks.held.push(Held { cpu, file: None });
        }
        Ok(locks)
    }

    /// Every CPU this object stands for (locked here or covered by this
    /// process's or its parent's lock), in increasing order.
    pub fn cpus(&self) -> Vec<usize> {
        let mut v: Vec<usize> = self.held.iter().map(|h| h.cpu).collect();
        v.sort_unstable();
        v
    }

    /// The descriptors of the locks this object itself took. The watchdog
    /// keeps them across its fork ([`crate::watchdog`]): they share the
    /// open file description, so the locks stay held until it has restored
    /// the threads of a daemon that died.
    pub fn fds(&self) -> Vec<RawFd> {
        self.held
            .iter()
            .filter_map(|h| h.file.as_ref().map(|f| f.as_raw_fd()))
            .collect()
    }

    /// Replaces the holder line of every lock this object took with `pid`
    /// and a note (`PID NOTE`, read as an exclusive holder): the watchdog
    /// names itself while it restores a dead daemon's threads.
    pub fn rewrite_holder(&self, pid: i32, note: &str) {
        let line = format!("{pid} {note}\n");
        for f in self.held.iter().filter_map(|h| h.file.as_ref()) {
            let _ = f.write_all_at(line.as_bytes(), 0);
            let _ = f.set_len(line.len() as u64);
        }
    }

    /// Empties the holder line of every lock this object took (the lock is
    /// still held until the descriptors close).
    pub fn clear_holder(&self) {
        for f in self.held.iter().filter_map(|h| h.file.as_ref()) {
            let _ = f.set_len(0);
        }
    }

    /// The CPUs this object itself locked (released when it drops), in
    /// increasing order.
    pub fn taken(&self) -> Vec<usize> {
        let mut v: Vec<usize> = self
            .held
            .iter()
            .filter(|h| h.file.is_some())
            .map(|h| h.cpu)
            .collect();
        v.sort_unstable();
        v
    }
}

/// The CPUs of `cpus` whose lock in [`LOCK_DIR`] another process holds
/// now: not this process, nor its parent when the parent locked them
/// [`Sharing::WithChildren`]. Read from `/proc/locks` (no lock is taken,
/// so a daemon starting meanwhile is not disturbed); a daemon places its
/// own loop off these CPUs (docs/measurements/live-mode.md, "One daemon per CPU").
pub fn held_by_others(cpus: &[usize]) -> Vec<usize> {
    held_by_others_in(
        Path::new(LOCK_DIR),
        cpus,
        crate::sys::getpid(),
        crate::sys::getppid(),
    )
}

/// `(major, minor, inode)` of every `FLOCK` in `/proc/locks` text.
fn flocks(text: &str) -> Vec<(u64, u64, u64)> {
    let mut v = Vec::new();
    for l in text.lines() {
        let w: Vec<&str> = l.split_whitespace().collect();
        // `N: FLOCK ADVISORY WRITE PID MAJ:MIN:INODE START END`; waiters
        // have `->` after the number.
        if w.len() < 6 || w[1] != "FLOCK" {
            continue;
        }
        let mut p = w[5].split(':');
        let (Some(a), Some(b), Some(c)) = (p.next(), p.next(), p.next()) else {
            continue;
        };
        if let (Ok(a), Ok(b), Ok(c)) = (
            u64::from_str_radix(a, 16),
            u64::from_str_radix(b, 16),
            c.parse::<u64>(),
        ) {
            v.push((a, b, c));
        }
    }
    v
}

fn held_by_others_in(dir: &Path, cpus: &[usize], me: i32, parent: i32) -> Vec<usize> {
    use std::os::unix::fs::MetadataExt;
    let Ok(text) = std::fs::read_to_string("/proc/locks") else {
        return Vec::new();
    };
    let locks = flocks(&text);
    let mut out = Vec::new();
    for &cpu in cpus {
        let path = dir.join(format!("cpu{cpu}.lock"));
        let Ok(mut f) = File::open(&path) else {
            continue;
        };
        let Ok(m) = f.metadata() else { continue };
        let dev = m.dev();
        let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff);
        let minor = (dev & 0xff) | ((dev >> 12) & !0xff);
        if !locks.contains(&(major, minor, m.ino())) {
            continue;
        }
        let covered = match read_holder(&mut f) {
            Some((pid, _)) if pid == me => true,
            Some((pid, Sharing::WithChildren)) if pid == parent => true,
            _ => false,
        };
        if !covered && !out.contains(&cpu) {
            out.push(cpu);
        }
    }
    out.sort_unstable();
    out
}

impl Drop for CpuLocks {
    fn drop(&mut self) {
        for h in &mut self.held {
            if let Some(f) = &h.file {
                // Clear the pid while still holding the lock; closing the
                // file then releases it.
                let _ = f.set_len(0);
            }
            h.file = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("hsched-cpulock-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn a_held_cpu_is_refused_naming_cpu_and_holder() {
        let d = dir("busy");
        let a = CpuLocks::acquire_as(&d, &[1], Sharing::Exclusive, 1000, 1).unwrap();
        assert_eq!(a.taken(), vec![1]);
        assert_eq!(
            std::fs::read_to_string(d.join("cpu1.lock")).unwrap(),
            "1000\n"
        );
        let mode = std::fs::metadata(d.join("cpu1.lock"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o644);
        // Another process (pid 2000) asking for CPUs 0 and 1: refused on 1,
        // and CPU 0, taken on the way, is released again.
        let e = CpuLocks::acquire_as(&d, &[0, 1], Sharing::Exclusive, 2000, 1).unwrap_err();
        assert_eq!(
            e,
            LockError::Busy {
                cpu: 1,
                holder: Some(1000),
                path: d.join("cpu1.lock")
            }
        );
        let msg = e.to_string();
        assert!(msg.contains("CPU 1") && msg.contains("pid 1000"), "{msg}");
        let c = CpuLocks::acquire_as(&d, &[0], Sharing::Exclusive, 3000, 1).unwrap();
        assert_eq!(c.taken(), vec![0]);
        drop(c);
        // Released on drop, pid cleared.
        drop(a);
        assert_eq!(std::fs::read_to_string(d.join("cpu1.lock")).unwrap(), "");
        let b = CpuLocks::acquire_as(&d, &[1], Sharing::Exclusive, 2000, 1).unwrap();
        assert_eq!(b.taken(), vec![1]);
        drop(b);
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn different_cpus_side_by_side() {
        let d = dir("side");
        let a = CpuLocks::acquire_as(&d, &[0], Sharing::Exclusive, 1000, 1).unwrap();
        let b = CpuLocks::acquire_as(&d, &[1, 1], Sharing::Exclusive, 2000, 1).unwrap();
        assert_eq!((a.taken(), b.taken()), (vec![0], vec![1]));
        assert!(CpuLocks::acquire_as(&d, &[0], Sharing::Exclusive, 3000, 1).is_err());
        assert!(CpuLocks::acquire_as(&d, &[1], Sharing::Exclusive, 3000, 1).is_err());
        drop((a, b));
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn own_process_and_allowed_children_run_under_the_lock() {
        let d = dir("cover");
        let a = CpuLocks::acquire_as(&d, &[1], Sharing::WithChildren, 1000, 1).unwrap();
        assert_eq!(
            std::fs::read_to_string(d.join("cpu1.lock")).unwrap(),
            "1000 children\n"
        );
        // The holder itself, and its child (parent 1000), are covered.
        let own = CpuLocks::acquire_as(&d, &[1], Sharing::Exclusive, 1000, 1).unwrap();
        assert_eq!((own.cpus(), own.taken()), (vec![1], vec![]));
        let child = CpuLocks::acquire_as(&d, &[1], Sharing::Exclusive, 1001, 1000).unwrap();
        assert_eq!((child.cpus(), child.taken()), (vec![1], vec![]));
        // A covered user leaves the holder's line alone.
        drop((own, child));
        assert_eq!(
            std::fs::read_to_string(d.join("cpu1.lock")).unwrap(),
            "1000 children\n"
        );
        // A grandchild or a stranger is not.
        assert!(CpuLocks::acquire_as(&d, &[1], Sharing::Exclusive, 1002, 1001).is_err());
        drop(a);
        // An exclusive holder covers nobody else.
        let x = CpuLocks::acquire_as(&d, &[1], Sharing::Exclusive, 1000, 1).unwrap();
        assert!(CpuLocks::acquire_as(&d, &[1], Sharing::Exclusive, 1001, 1000).is_err());
        drop(x);
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn cpus_held_by_other_processes_are_found_without_locking() {
        let d = dir("others");
        // Held by this process under another pid's name: a stranger's.
        let a = CpuLocks::acquire_as(&d, &[0], Sharing::Exclusive, 1000, 1).unwrap();
        let b = CpuLocks::acquire_as(&d, &[2], Sharing::WithChildren, 1000, 1).unwrap();
        // CPU 1's file exists but nobody holds it; CPU 3 has no file.
        drop(CpuLocks::acquire_as(&d, &[1], Sharing::Exclusive, 1000, 1).unwrap());
        assert_eq!(held_by_others_in(&d, &[0, 1, 2, 3], 2000, 1), vec![0, 2]);
        // The holder itself, and a child of a holder that shares: not others.
        assert_eq!(
            held_by_others_in(&d, &[0, 1, 2, 3], 1000, 1),
            Vec::<usize>::new()
        );
        assert_eq!(held_by_others_in(&d, &[0, 1, 2, 3], 1001, 1000), vec![0]);
        // A watchdog's hand-over line names it, as an exclusive holder.
        a.rewrite_holder(1234, "watchdog of 1000, restoring");
        assert_eq!(
            std::fs::read_to_string(d.join("cpu0.lock")).unwrap(),
            "1234 watchdog of 1000, restoring\n"
        );
        assert_eq!(held_by_others_in(&d, &[0], 1000, 1), vec![0]);
        assert_eq!(a.fds().len(), 1);
        drop((a, b));
        assert_eq!(
            held_by_others_in(&d, &[0, 1, 2, 3], 2000, 1),
            Vec::<usize>::new()
        );
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn proc_locks_lines_are_parsed() {
        let t = "1: FLOCK  ADVISORY  WRITE 812 00:1a:4242 0 EOF\n2: -> FLOCK  ADVISORY  WRITE 813 00:1a:4242 0 EOF\n3: POSIX  ADVISORY  WRITE 9 fd:01:77 0 EOF\n4: FLOCK  ADVISORY  WRITE 7 fd:01:99 0 EOF\n";
        assert_eq!(flocks(t), vec![(0, 0x1a, 4242), (0xfd, 1, 99)]);
    }

    #[test]
    fn the_lock_descriptor_is_close_on_exec() {
        let d = dir("cloexec");
        let a = CpuLocks::acquire_as(&d, &[3], Sharing::Exclusive, 1000, 1).unwrap();
        let fd = a.held[0].file.as_ref().unwrap().as_raw_fd();
        let info = std::fs::read_to_string(format!("/proc/self/fdinfo/{fd}")).unwrap();
        let flags = info
            .lines()
            .find_map(|l| l.strip_prefix("flags:"))
            .map(|f| u32::from_str_radix(f.trim(), 8).unwrap())
            .unwrap();
        assert_ne!(flags & libc::O_CLOEXEC as u32, 0, "{info}");
        drop(a);
        let _ = std::fs::remove_dir_all(&d);
    }
}
