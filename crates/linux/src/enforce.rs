//! Enforcing the hierarchy's decisions on real threads.
//!
//! Mechanism (chosen by measurement, see docs/measurements/live-mode.md):
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
use hsched_core::RevokeReason;
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

/// Thread `tid`'s own `stat` file. `/proc/TID/stat` is the process view:
/// for a thread of a large process the kernel sums the CPU time of every
/// thread of it at each read, which made the daemon's per-thread reads
/// quadratic under a program creating thousands of threads. The fields
/// read here (state, flags, start time) are the thread's in both.
fn read_thread_stat(tid: i32) -> io::Result<String> {
    std::fs::read_to_string(format!("/proc/{tid}/task/{tid}/stat"))
}

/// `(tgid, start time)` of thread `tid`, from procfs.
pub fn proc_identity(tid: i32) -> io::Result<(i32, u64)> {
    let stat = read_thread_stat(tid)?;
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

/// The name of thread `tid` (its `comm`), from procfs.
pub fn proc_comm(tid: i32) -> Option<String> {
    let comm = std::fs::read_to_string(format!("/proc/{tid}/comm")).ok()?;
    Some(comm.strip_suffix('\n').unwrap_or(&comm).to_string())
}

/// The state letter of thread `tid` (`R`, `S`, `D`, `T`, ...).
pub fn proc_state(tid: i32) -> Option<char> {
    let stat = read_thread_stat(tid).ok()?;
    stat.rsplit_once(')')?
        .1
        .split_whitespace()
        .next()?
        .chars()
        .next()
}

/// The CPU thread `tid` last ran on (`processor`, field 39 of its stat).
pub fn proc_last_cpu(tid: i32) -> Option<usize> {
    let stat = read_thread_stat(tid).ok()?;
    stat.rsplit_once(')')?
        .1
        .split_whitespace()
        .nth(36)?
        .parse()
        .ok()
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

/// Signals (bit `n - 1` for signal `n`) whose default action ends the
/// process: all but `SIGCHLD`, `SIGCONT`, the four stop signals, `SIGURG`
/// and `SIGWINCH` (signal(7)).
pub const DEFAULT_FATAL: u64 = !((1 << (17 - 1))
    | (1 << (18 - 1))
    | (1 << (19 - 1))
    | (1 << (20 - 1))
    | (1 << (21 - 1))
    | (1 << (22 - 1))
    | (1 << (23 - 1))
    | (1 << (28 - 1)));

/// `SIGKILL` as a signal-set bit.
const SIGKILL_BIT: u64 = 1 << (libc::SIGKILL - 1);

/// A thread's signal sets, from `/proc/TID/status`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SigSets {
    /// `SigPnd`: pending for this thread alone (a group-fatal signal puts
    /// `SIGKILL` here in every thread of the group).
    pub pending: u64,
    /// `ShdPnd`: pending for the process.
    pub shared: u64,
    /// `SigBlk`: blocked by this thread.
    pub blocked: u64,
    /// `SigIgn`: ignored by the process.
    pub ignored: u64,
    /// `SigCgt`: caught (a handler is installed) by the process.
    pub caught: u64,
    /// `CoreDumping: 1`: the process is writing its core dump.
    pub core_dumping: bool,
}

impl SigSets {
    /// Parses the text of `/proc/TID/status`; `None` when a set is missing.
    pub fn parse(status: &str) -> Option<SigSets> {
        let mut s = SigSets::default();
        let mut seen = 0;
        for line in status.lines() {
            let Some((k, v)) = line.split_once(':') else {
                continue;
            };
            let slot = match k {
                "SigPnd" => &mut s.pending,
                "ShdPnd" => &mut s.shared,
                "SigBlk" => &mut s.blocked,
                "SigIgn" => &mut s.ignored,
                "SigCgt" => &mut s.caught,
                "CoreDumping" => {
                    s.core_dumping = v.trim() == "1";
                    continue;
                }
                _ => continue,
            };
            *slot = u64::from_str_radix(v.trim(), 16).ok()?;
            seen += 1;
        }
        (seen == 5).then_some(s)
    }

    /// The lowest pending signal that, delivered to this thread, ends its
    /// process: `SIGKILL` in its own set (always), or a signal pending for
    /// it or its process that it does not block and the process neither
    /// ignores nor catches, whose default action is to terminate or dump
    /// core. A caught signal is not fatal: its handler runs when the
    /// hierarchy grants the thread.
    pub fn fatal(&self) -> Option<i32> {
        let f = if self.pending & SIGKILL_BIT != 0 {
            SIGKILL_BIT
        } else {
            (self.pending | self.shared)
                & !self.blocked
                & !self.ignored
                & !self.caught
                & DEFAULT_FATAL
        };
        (f != 0).then(|| f.trailing_zeros() as i32 + 1)
    }
}

/// How close thread `tid` is to its end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Leaving {
    /// Nothing fatal pending, not exiting.
    No,
    /// Signal `n` is pending and will end its process ([`SigSets::fatal`]).
    Signal(i32),
    /// Already in its exit path (`PF_EXITING`) or dumping core.
    Exiting,
}

/// Whether thread `tid`, started at `start` (clock ticks, as
/// [`Original::start`]), is leaving; `None` when it is gone or `tid` now
/// names another thread. `/proc/TID/status` is read before `/proc/TID/stat`:
/// a start time that still matches after it proves both reads were of the
/// same thread (a tid is only reused once its thread is reaped).
pub fn proc_leaving(tid: i32, start: u64) -> Option<Leaving> {
    const PF_EXITING: u64 = 0x4;
    let sets = SigSets::parse(&std::fs::read_to_string(format!("/proc/{tid}/status")).ok()?)?;
    let stat = read_thread_stat(tid).ok()?;
    let mut f = stat.rsplit_once(')')?.1.split_whitespace();
    // After the name: field 3 is index 0, flags (9) index 6, start (22) 19.
    let flags: u64 = f.nth(6)?.parse().ok()?;
    let started: u64 = f.nth(12)?.parse().ok()?;
    if started != start {
        return None;
    }
    Some(if flags & PF_EXITING != 0 || sets.core_dumping {
        Leaving::Exiting
    } else if let Some(sig) = sets.fatal() {
        Leaving::Signal(sig)
    } else {
        Leaving::No
    })
}

/// Whether the process `tgid` ignores or catches signal `sig` (its
/// `SigIgn` / `SigCgt`, shared by all its threads); `None` when unknown.
pub fn proc_handles(tgid: i32, sig: i32) -> Option<bool> {
    if !(1..=64).contains(&sig) {
        return None;
    }
    let s = SigSets::parse(&std::fs::read_to_string(format!("/proc/{tgid}/status")).ok()?)?;
    Some((s.ignored | s.caught) & (1u64 << (sig - 1)) != 0)
}

/// `SCHED_OTHER` (or the thread's original `SCHED_BATCH`) with its
/// original nice: what a managed thread runs at when it may not be real-time.
pub fn other_attr(o: &Original) -> SchedAttr {
    let mut a = SchedAttr::other();
    if o.attr.policy == libc::SCHED_OTHER as u32 || o.attr.policy == libc::SCHED_BATCH as u32 {
        a.policy = o.attr.policy;
        a.nice = o.attr.nice;
    }
    a.flags = o.attr.flags & sys::SCHED_FLAG_RESET_ON_FORK;
    a
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
    sys::cgroup_v1_mount("freezer")
}

/// Where hsched mounts a v1 freezer hierarchy of its own when none is
/// mounted (a cgroup2-only system, as most distributions now are).
pub const OWN_FREEZER_MOUNT: &str = "/run/hsched/freezer";

/// The v1 freezer mount point, mounting one at [`OWN_FREEZER_MOUNT`] if
/// none is mounted. The mount stays after hsched ends, as tracefs's does:
/// later runs, and the watchdog of a daemon that died, find it there. It
/// changes nothing for other processes: everything starts in its root
/// cgroup, which cannot be frozen, and cgroup v2 does not use the v1
/// freezer controller.
///
/// # Errors
/// The kernel refuses the mount (no `CONFIG_CGROUP_FREEZER`, or cgroup v1
/// controllers disabled with `cgroup_no_v1=`), or this is not root.
pub fn ensure_freezer() -> io::Result<PathBuf> {
    if let Some(m) = freezer_mount() {
        return Ok(m);
    }
    let at = Path::new(OWN_FREEZER_MOUNT);
    std::fs::create_dir_all(at)
        .and_then(|()| sys::mount_cgroup_v1(at, "freezer"))
        .map_err(|e| {
            io::Error::new(
                e.kind(),
                format!(
                    "the cgroup-v1 freezer controller is not mounted and mounting it at {OWN_FREEZER_MOUNT} failed: {e} (the kernel needs CONFIG_CGROUP_FREEZER and cgroup v1 controllers not disabled by cgroup_no_v1=)"
                ),
            )
        })?;
    freezer_mount().ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::NotFound,
            format!("mounted the cgroup-v1 freezer at {OWN_FREEZER_MOUNT} but /proc/self/mounts does not show it"),
        )
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
    /// Creates `MOUNT/hsched-PID`, mounting the freezer first if need be
    /// ([`ensure_freezer`]).
    ///
    /// # Errors
    /// No v1 freezer can be mounted, or the directory cannot be made.
    pub fn new() -> io::Result<Freezer> {
        let mount = ensure_freezer()?;
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

    /// Thaws the cgroup of `tid`, which has exited (`sched_process_exit`),
    /// and removes it; `false` if it is still busy. Unlike
    /// [`Freezer::release`] the thread is not moved to the root: it is
    /// leaving its cgroup by itself, and a move (`tasks`) would make it
    /// wait in its exit path until the move's synchronisation is done
    /// (6–22 ms measured, the daemon blocked as long).
    pub fn release_exited(&self, cg: &ThreadCg) -> bool {
        let _ = (&cg.state).write_all(b"THAWED");
        std::fs::remove_dir(&cg.dir).is_ok()
    }

    /// Removes every leftover cgroup and the root (best effort, retrying
    /// for up to `patience`).
    pub fn cleanup(&self, patience: std::time::Duration) {
        cleanup_root(&self.mount, &self.root, patience);
    }
}

/// Thaws and empties every cgroup under `root` (at any depth) into
/// `mount`, then removes them.
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
                // Nested groups (the kernel backend's cpu cgroups) first.
                cleanup_root(mount, &p, std::time::Duration::ZERO);
                let _ = std::fs::write(p.join("freezer.state"), "THAWED");
                if let Ok(tasks) = std::fs::read_to_string(p.join("tasks")) {
                    for t in tasks.split_whitespace() {
                        let _ = std::fs::write(mount.join("tasks"), t);
                    }
                }
                if std::fs::remove_dir(&p).is_err() && p.exists() {
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
    /// The tasks in the cgroup (`tasks`), by tid; empty when it cannot
    /// be read. A thread that took over its process's pid by `execve`
    /// stays in its cgroup under its new tid.
    pub fn tasks(&self) -> Vec<i32> {
        std::fs::read_to_string(self.dir.join("tasks"))
            .map(|t| {
                t.split_whitespace()
                    .filter_map(|s| s.parse().ok())
                    .collect()
            })
            .unwrap_or_default()
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

/// Keeping the kernel's real-time throttling out of the schedule.
///
/// A granted thread runs at `SCHED_FIFO`, so a CPU the hierarchy keeps busy
/// is 100 % real-time, and the kernel's throttling (`sched_rt_runtime_us` /
/// `sched_rt_period_us`, 950000/1000000 here) then stops every real-time
/// task of that CPU for the last 50 ms of each second: the granted thread,
/// whatever its guarantee, loses the CPU at a moment the hierarchy did not
/// choose, while its policy keeps charging it (measured: a Rez 10 ms / 33 ms
/// renderer lost two whole periods in one such window). The governor keeps
/// the real-time time of each managed CPU under the kernel's limit itself:
/// in every block of `block_ns` it makes sure at least `quota_ns` are not
/// real-time, counting the time the hierarchy idles the CPU, and otherwise
/// *demoting* the granted thread to `SCHED_OTHER` (still granted, thawed
/// and pinned) until the quota is met. Demotion, unlike throttling, costs
/// the thread nothing unless unmanaged fair-class work is runnable on that
/// CPU, which then shares the slice with it — the time the kernel's
/// throttling exists to guarantee it. Any one-second window holds at least
/// `floor(1 s / block) - 1` whole blocks, so with the defaults (8 ms per
/// 100 ms) at least 72 ms of each second are not real-time and the kernel
/// (which needs 50 ms) never throttles.
///
/// The slice is taken from best-effort time: a thread the hierarchy runs
/// through a reservation (a VP with an `amount` parameter, or a child of a
/// `rez` or `realrate` instance, at any level of its grant path) is
/// *protected* and is only demoted when the block would otherwise end
/// short of its quota. The same protected threads get `grace_ns` of
/// enforcement granularity when their grant ends: the freeze is applied
/// that much after the revocation, the thread granted next queueing behind
/// them at the same `SCHED_FIFO` priority (see [`RtGovernor::defer_freeze`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RtBudget {
    /// Length of an accounting block (ns).
    pub block_ns: u64,
    /// Time per block that must not be real-time (ns); 0 turns the governor
    /// off.
    pub quota_ns: u64,
    /// How long before a block's end a protected thread is demoted anyway
    /// if the quota is still short (ns), beyond the time still missing.
    pub margin_ns: u64,
    /// Extra run time of a protected thread after its grant ends (ns).
    pub grace_ns: u64,
    /// At most this much more (ns) for the time its grant did not reach
    /// it: from its thaw to its switch-in, and preempted while granted
    /// ([`RtGovernor::defer_freeze`]).
    pub lost_cap_ns: u64,
}

impl Default for RtBudget {
    fn default() -> Self {
        RtBudget {
            block_ns: 100_000_000,
            quota_ns: 8_000_000,
            margin_ns: 2_000_000,
            grace_ns: 500_000,
            lost_cap_ns: 2_000_000,
        }
    }
}

impl RtBudget {
    /// The governor's budget for a kernel limit of `runtime_us` real-time
    /// microseconds per `period_us` (`/proc/sys/kernel/sched_rt_*`): the
    /// default, unless the kernel's limit needs a larger quota (with
    /// `runtime_us` negative, throttling is off, and so is the governor).
    pub fn for_kernel(runtime_us: i64, period_us: i64) -> RtBudget {
        let mut b = RtBudget::default();
        if runtime_us < 0 || period_us <= 0 || runtime_us >= period_us {
            b.quota_ns = 0;
            return b;
        }
        // Non-real-time time the kernel wants per period, spread over the
        // whole blocks a period is sure to contain, plus 40 % margin.
        let need = (period_us - runtime_us) as u64 * 1_000;
        let blocks = (period_us as u64 * 1_000 / b.block_ns)
            .saturating_sub(1)
            .max(1);
        b.quota_ns = b.quota_ns.max(need * 14 / 10 / blocks).min(b.block_ns / 2);
        b
    }

    /// The budget for a run whose granted threads get `SCHED_FIFO`
    /// `fifo_priority` (0: they do not, and the governor is off).
    ///
    /// `HSCHED_LIVE_RT` overrides it for experiments: `off` (no governor,
    /// no grace), or `quota=DUR`, `block=DUR`, `grace=DUR`, `lost=DUR`
    /// separated by commas (e.g. `grace=0`).
    pub fn for_run(fifo_priority: u32) -> RtBudget {
        let off = RtBudget {
            quota_ns: 0,
            grace_ns: 0,
            lost_cap_ns: 0,
            ..RtBudget::default()
        };
        let mut b = match (fifo_priority > 0).then(RtBudget::from_kernel).flatten() {
            Some(b) => b,
            None => return off,
        };
        if let Ok(v) = std::env::var("HSCHED_LIVE_RT") {
            match b.with_overrides(&v) {
                Ok(o) => b = o,
                Err(e) => crate::diag!("hsched: warning: HSCHED_LIVE_RT={v}: {e}; ignored"),
            }
        }
        b
    }

    /// Applies `off` or `key=DURATION,...` (keys `quota`, `block`,
    /// `margin`, `grace`, `lost`), or says which item it cannot read.
    pub fn with_overrides(mut self, spec: &str) -> Result<RtBudget, String> {
        for item in spec.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            if item == "off" {
                self.quota_ns = 0;
                self.grace_ns = 0;
                self.lost_cap_ns = 0;
                continue;
            }
            let bad = |why: &str| format!("`{item}`: {why}");
            let (k, v) = item
                .split_once('=')
                .ok_or_else(|| bad("expected `off` or KEY=DURATION"))?;
            let ns = if v.trim() == "0" {
                0
            } else {
                hsched_core::time::parse_duration(v.trim(), None)
                    .map_err(|e| bad(&e.to_string()))?
                    .as_nanos()
            };
            match k.trim() {
                "quota" => self.quota_ns = ns,
                "block" if ns > 0 => self.block_ns = ns,
                "block" => return Err(bad("the block must be longer than 0")),
                "margin" => self.margin_ns = ns,
                "grace" => self.grace_ns = ns,
                "lost" => self.lost_cap_ns = ns,
                _ => return Err(bad("keys are quota, block, margin, grace, lost")),
            }
        }
        Ok(self)
    }

    /// Reads the kernel's limit (`None`: not readable).
    pub fn from_kernel() -> Option<RtBudget> {
        let rd = |p: &str| -> Option<i64> { std::fs::read_to_string(p).ok()?.trim().parse().ok() };
        Some(RtBudget::for_kernel(
            rd("/proc/sys/kernel/sched_rt_runtime_us")?,
            rd("/proc/sys/kernel/sched_rt_period_us")?,
        ))
    }
}

/// What the governor wants done to a granted thread's policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RtChange {
    /// Run it at `SCHED_OTHER` (it stays granted).
    Demote(i32),
    /// Back to `SCHED_FIFO`.
    Promote(i32),
}

#[derive(Clone, Copy, Debug, Default)]
struct CpuGov {
    started: bool,
    block_start: u64,
    non_rt: u64,
    since: u64,
    granted: Option<i32>,
    protected: bool,
    demoted: bool,
    /// Demoted although protected (the block was ending short).
    forced: bool,
}

/// Per managed CPU real-time accounting and the deferred freezes; see
/// [`RtBudget`]. Pure bookkeeping: the daemon applies what it returns.
#[derive(Clone, Debug, Default)]
pub struct RtGovernor {
    /// The budget.
    pub budget: RtBudget,
    cpus: Vec<CpuGov>,
    pending: Vec<(u64, i32)>,
    /// Demotions made.
    pub demotions: u64,
    /// Demotions of protected threads (the quota could not be met from
    /// best-effort time).
    pub forced: u64,
    /// Time spent demoted (ns).
    pub demoted_ns: u64,
    /// Freezes deferred: by the grace, or by lost time alone.
    pub deferred: u64,
    /// Of those, deferred further for time lost to dispatch (count, ns).
    pub lost_deferrals: u64,
    /// Total extra deferral for lost time (ns).
    pub lost_ns: u64,
}

impl RtGovernor {
    /// A governor for `ncpu` managed CPUs.
    pub fn new(budget: RtBudget, ncpu: usize) -> RtGovernor {
        RtGovernor {
            budget,
            cpus: vec![CpuGov::default(); ncpu],
            ..RtGovernor::default()
        }
    }

    /// Whether the governor does anything.
    pub fn active(&self) -> bool {
        self.budget.quota_ns > 0
    }

    fn advance(&mut self, c: usize, now: u64) {
        let block = self.budget.block_ns.max(1);
        let Some(g) = self.cpus.get_mut(c) else {
            return;
        };
        if !g.started {
            *g = CpuGov {
                started: true,
                block_start: now,
                since: now,
                ..*g
            };
            return;
        }
        let non_rt = g.granted.is_none() || g.demoted;
        while now > g.since {
            let end = g.block_start + block;
            let upto = now.min(end);
            if non_rt {
                g.non_rt += upto.saturating_sub(g.since);
                if g.demoted {
                    self.demoted_ns += upto.saturating_sub(g.since);
                }
            }
            g.since = upto;
            if upto == end {
                g.non_rt = 0;
                // A long quiet stretch: skip whole blocks at once.
                let skip = (now - end) / block;
                g.block_start = end + skip * block;
                if skip > 0 {
                    g.since = g.block_start;
                }
            } else {
                break;
            }
        }
    }

    /// The hierarchy now runs `granted` on managed CPU `c` (index).
    /// A thread that loses the CPU while demoted keeps `SCHED_OTHER` until
    /// its next grant raises it again.
    pub fn set_granted(&mut self, c: usize, now: u64, granted: Option<i32>) {
        self.advance(c, now);
        if let Some(g) = self.cpus.get_mut(c) {
            if g.granted != granted {
                g.granted = granted;
                g.demoted = false;
                g.forced = false;
                g.protected = false;
            }
        }
    }

    /// Records whether the grant on CPU `c` goes through a reservation.
    pub fn set_protected(&mut self, c: usize, protected: bool) {
        if let Some(g) = self.cpus.get_mut(c) {
            g.protected = protected;
        }
    }

    /// Whether the grant on CPU `c` went through a reservation.
    pub fn protected(&self, c: usize) -> bool {
        self.cpus.get(c).is_some_and(|g| g.protected)
    }

    /// Decides CPU `c`'s policy at `now`.
    pub fn decide(&mut self, c: usize, now: u64) -> Option<RtChange> {
        if !self.active() {
            return None;
        }
        self.advance(c, now);
        let b = self.budget;
        let g = self.cpus.get_mut(c)?;
        let tid = g.granted?;
        let need = b.quota_ns.saturating_sub(g.non_rt);
        let left = (g.block_start + b.block_ns).saturating_sub(now);
        if g.demoted {
            // A thread demoted in best-effort time that is now running
            // through a reservation (a Join switching parents) is raised.
            if need == 0 || (g.protected && !g.forced) {
                g.demoted = false;
                return Some(RtChange::Promote(tid));
            }
            return None;
        }
        if need == 0 {
            return None;
        }
        if !g.protected || left <= need + b.margin_ns {
            g.demoted = true;
            g.forced = g.protected;
            self.demotions += 1;
            if g.protected {
                self.forced += 1;
            }
            return Some(RtChange::Demote(tid));
        }
        None
    }

    /// When the daemon must look again (absolute ns), if ever.
    pub fn next_wake(&self) -> Option<u64> {
        let b = self.budget;
        let mut at = self.pending.iter().map(|p| p.0).min();
        if self.active() {
            for g in self
                .cpus
                .iter()
                .filter(|g| g.started && g.granted.is_some())
            {
                let end = g.block_start + b.block_ns;
                let need = b.quota_ns.saturating_sub(g.non_rt);
                let t = if g.demoted {
                    g.since + need
                } else if need > 0 && g.protected {
                    end.saturating_sub(need + b.margin_ns).max(g.since)
                } else if need > 0 {
                    g.since
                } else {
                    end
                };
                at = Some(at.map_or(t, |a: u64| a.min(t)));
            }
        }
        at
    }

    /// A protected thread lost its CPU at `now`: its freeze waits `grace_ns`
    /// (`true`), so that enforcement latency and wake-up jitter are paid by
    /// the best-effort time after it, never by the reservation — the
    /// "enforceable scheduling granularity" through which HLS's reservations
    /// received slightly more than reserved (Regehr 2001, §10.5.2). It waits
    /// `lost` more (at most `lost_cap_ns`), the time during the grant the
    /// thread was measured off its CPU: dispatch through the freezer is not
    /// instant (the thaw, then a switch-in that can wait for unmanaged work
    /// to reach a preemption point), which an in-kernel HSI would not
    /// charge to the reservation. Without `grace` (the time after it is
    /// another reservation's) it waits only that lost time, and not at all
    /// (`false`) when none was lost.
    pub fn defer_freeze(&mut self, tid: i32, now: u64, lost: u64, grace: bool) -> bool {
        if self.budget.grace_ns == 0 {
            return false;
        }
        if !self.pending.iter().any(|p| p.1 == tid) {
            let extra = lost.min(self.budget.lost_cap_ns);
            let grace = if grace { self.budget.grace_ns } else { 0 };
            if grace + extra == 0 {
                return false;
            }
            self.pending.push((now + grace + extra, tid));
            self.deferred += 1;
            if extra > 0 {
                self.lost_deferrals += 1;
                self.lost_ns += extra;
            }
        }
        true
    }

    /// Whether `tid` has a deferred freeze pending.
    pub fn freeze_pending(&self, tid: i32) -> bool {
        self.pending.iter().any(|p| p.1 == tid)
    }

    /// Forgets `tid`'s deferred freeze (it was granted again or left).
    pub fn cancel(&mut self, tid: i32) {
        self.pending.retain(|p| p.1 != tid);
    }

    /// Thread `old` is thread `new` from now on (an `execve` from a thread
    /// other than its process's leader gives it the leader's tid): its
    /// grant and deferred freeze follow it.
    pub fn rename(&mut self, old: i32, new: i32) {
        for g in &mut self.cpus {
            if g.granted == Some(old) {
                g.granted = Some(new);
            }
        }
        for p in &mut self.pending {
            if p.1 == old {
                p.1 = new;
            }
        }
    }

    /// Deferred freezes due at `now`, removed from the list.
    pub fn due(&mut self, now: u64, out: &mut Vec<i32>) {
        out.clear();
        self.pending.retain(|&(at, tid)| {
            if at <= now {
                out.push(tid);
                false
            } else {
                true
            }
        });
    }
}

impl crate::daemon::Daemon {
    /// Whether the grant of `tid` goes through a reservation: a VP with an
    /// `amount` parameter, or a child VP of a `rez` or `realrate` instance,
    /// anywhere on the path of running VPs from the thread up to the top;
    /// `Some(true)` for a fixed one (`amount`, `rez`), `Some(false)` for
    /// `realrate`'s, which its controller resizes.
    pub(crate) fn grant_reservation(&self, tid: i32) -> Option<bool> {
        let m = self.threads.get(&tid)?;
        let mut vp = self.hsi.thread_vp(m.hsi);
        // Bounded: a hierarchy is a DAG of instances, each step goes up.
        for _ in 0..64 {
            if self.hsi.vp_params(vp).get("amount").is_some() {
                return Some(true);
            }
            let hsched_core::Node::Instance(i) = self.hsi.vp_parent(vp) else {
                return None;
            };
            match self.hsi.instance_policy(i).map(|p| p.policy_name()) {
                Some("rez") => return Some(true),
                Some("realrate") => return Some(false),
                _ => {}
            }
            let up = self
                .hsi
                .instance_parents(i)
                .iter()
                .copied()
                .find(|&p| matches!(self.hsi.vp_state(p), hsched_core::VpState::Running(_)));
            vp = up?;
        }
        None
    }

    /// Called instead of freezing a thread that lost its CPU to
    /// `successor`: `true` when the freeze is deferred (the thread was
    /// granted through a reservation) or already pending.
    ///
    /// When the successor is granted through a reservation too, the
    /// deferral comes out of the successor's own reservation (it queues
    /// behind the old thread while its budget is charged), and a
    /// reservation's guarantee is not another's slack: a thread preempted
    /// by it is frozen at once (a 1 ms / 10 ms hard reservation that
    /// preempted a thread of a 10 ms / 20 ms one lost up to 0.85 ms of
    /// each 1 ms to the grace and missed half its deadlines), and a thread
    /// whose own budget ended keeps only the time its grant did not reach
    /// it, no grace: without that, the same 1 ms reservation ran about
    /// 0.7 ms of each 1 ms and finished a third of its 0.8 ms jobs in the
    /// next period.
    pub(crate) fn defer_stop(&mut self, tid: i32, successor: Option<i32>) -> bool {
        if self.gov.freeze_pending(tid) {
            return true;
        }
        let to_reservation = successor.is_some_and(|s| self.grant_reservation(s).is_some());
        if to_reservation {
            let exhausted = self.threads.get(&tid).is_some_and(|m| {
                self.hsi.thread_last_revoke(m.hsi) == Some(RevokeReason::BudgetExhausted)
            });
            if !exhausted {
                return false;
            }
        }
        match self.running.iter().position(|r| *r == Some(tid)) {
            Some(c) if self.gov.protected(c) => {
                let now = sys::now_ns();
                // Made up for fixed reservations only: `realrate`'s
                // controller measures progress and resizes the reservation
                // itself (Steere et al. 1998, §3), and a second correction under it
                // would be one its model does not know. Only stretches a
                // switch-in record closed count: one still open may be a
                // record not read yet, or lost.
                let lost = self.threads.get_mut(&tid).map_or(0, |m| {
                    m.off_since = None;
                    let lost = std::mem::take(&mut m.lost_ns);
                    if m.fixed_reservation {
                        lost
                    } else {
                        0
                    }
                });
                self.gov.defer_freeze(tid, now, lost, !to_reservation)
            }
            _ => false,
        }
    }

    /// After each dispatch: applies due deferred freezes, accounts each
    /// managed CPU's real-time time and demotes or promotes its granted
    /// thread as the [`RtGovernor`] says.
    pub(crate) fn govern(&mut self) {
        let now = sys::now_ns();
        let mut due = Vec::new();
        self.gov.due(now, &mut due);
        for tid in due {
            if !self.running.contains(&Some(tid)) {
                self.freeze_now(tid);
            }
        }
        for c in 0..self.running.len() {
            let tid = self.running[c];
            self.gov.set_granted(c, now, tid);
            if let Some(t) = tid {
                self.gov.cancel(t);
                let r = self.grant_reservation(t);
                let p = r.is_some();
                if let Some(m) = self.threads.get_mut(&t) {
                    m.fixed_reservation = r == Some(true);
                }
                self.gov.set_protected(c, p);
            }
            let change = self.gov.decide(c, now);
            let (t, attr) = match change {
                Some(RtChange::Demote(t)) => {
                    let Some(m) = self.threads.get(&t) else {
                        continue;
                    };
                    (t, other_attr(&m.orig))
                }
                Some(RtChange::Promote(t)) => {
                    let Some(m) = self.threads.get(&t) else {
                        continue;
                    };
                    let mut a = SchedAttr::fifo(self.opts.fifo_priority);
                    a.flags = m.orig.attr.flags & sys::SCHED_FLAG_RESET_ON_FORK;
                    (t, a)
                }
                None => continue,
            };
            if self.debug {
                crate::diag!("[{}] rt {change:?}", now.saturating_sub(self.epoch));
            }
            if sys::sched_setattr(t, &attr).is_ok() {
                if let Some(m) = self.threads.get_mut(&t) {
                    m.fifo = attr.policy == libc::SCHED_FIFO as u32;
                }
            }
        }
    }
}

#[cfg(test)]
mod rt_tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn gov() -> RtGovernor {
        RtGovernor::new(RtBudget::default(), 1)
    }

    #[test]
    fn kernel_limit_sizes_the_quota() {
        // 50 ms per second over at least 9 whole 100 ms blocks, +40 %: 7.8 ms.
        assert_eq!(RtBudget::for_kernel(950_000, 1_000_000).quota_ns, 8 * MS);
        // 20 % non-real-time: 200 ms over 9 blocks, +40 %: 31.1 ms.
        assert_eq!(
            RtBudget::for_kernel(800_000, 1_000_000).quota_ns,
            200 * MS * 14 / 10 / 9
        );
        assert_eq!(RtBudget::for_kernel(-1, 1_000_000).quota_ns, 0);
        assert_eq!(RtBudget::for_kernel(1_000_000, 1_000_000).quota_ns, 0);
        let o = RtBudget::default()
            .with_overrides("grace=0, quota=3ms,lost=1ms,")
            .unwrap();
        assert_eq!((o.grace_ns, o.quota_ns, o.lost_cap_ns), (0, 3 * MS, MS));
        assert_eq!(o.block_ns, 100 * MS);
        assert_eq!(
            RtBudget::default().with_overrides("off").unwrap().quota_ns,
            0
        );
        for (bad, names) in [
            ("grace=0,bogus=1", "bogus=1"),
            ("block=x", "block=x"),
            ("block=0", "block=0"),
            ("grace", "grace"),
        ] {
            let e = RtBudget::default().with_overrides(bad).unwrap_err();
            assert!(e.contains(names), "{bad}: {e}");
        }
    }

    #[test]
    fn best_effort_thread_is_demoted_until_the_quota_is_met() {
        let mut g = gov();
        g.set_granted(0, 0, Some(7));
        assert_eq!(g.decide(0, 0), Some(RtChange::Demote(7)));
        assert_eq!(g.next_wake(), Some(8 * MS));
        assert_eq!(g.decide(0, 5 * MS), None);
        assert_eq!(g.decide(0, 8 * MS), Some(RtChange::Promote(7)));
        // Real-time for the rest of the block; the next block demotes again.
        assert_eq!(g.decide(0, 50 * MS), None);
        assert_eq!(g.next_wake(), Some(100 * MS));
        assert_eq!(g.decide(0, 100 * MS), Some(RtChange::Demote(7)));
        assert_eq!(g.demoted_ns, 8 * MS);
        assert_eq!((g.demotions, g.forced), (2, 0));
    }

    #[test]
    fn idle_time_counts_and_protected_threads_wait_for_the_deadline() {
        let mut g = gov();
        g.set_granted(0, 0, None);
        // 5 ms idle, then a reservation thread: 3 ms still missing.
        g.set_granted(0, 5 * MS, Some(1));
        g.set_protected(0, true);
        assert_eq!(g.decide(0, 5 * MS), None);
        // Demoted only when the block would end short: 100 - 3 - 2 ms.
        assert_eq!(g.next_wake(), Some(95 * MS));
        assert_eq!(g.decide(0, 90 * MS), None);
        assert_eq!(g.decide(0, 95 * MS), Some(RtChange::Demote(1)));
        assert_eq!(g.forced, 1);
        // A best-effort thread demoted at 100 ms is raised when the same
        // thread's grant turns protected (a Join switching parents).
        assert_eq!(g.decide(0, 98 * MS), Some(RtChange::Promote(1)));
        g.set_protected(0, false);
        assert_eq!(g.decide(0, 100 * MS), Some(RtChange::Demote(1)));
        g.set_protected(0, true);
        assert_eq!(g.decide(0, 101 * MS), Some(RtChange::Promote(1)));
    }

    #[test]
    fn a_renamed_thread_keeps_its_grant_and_deferred_freeze() {
        let mut g = gov();
        g.set_granted(0, 0, Some(7));
        assert!(g.defer_freeze(9, 0, 0, true));
        g.rename(7, 5);
        g.rename(9, 5);
        assert!(g.freeze_pending(5) && !g.freeze_pending(9));
        // Still the same grant: the demotion decided for 7 goes to 5.
        assert_eq!(g.decide(0, 0), Some(RtChange::Demote(5)));
        g.set_granted(0, MS, Some(5));
        assert_eq!(g.decide(0, 8 * MS), Some(RtChange::Promote(5)));
    }

    #[test]
    fn long_quiet_stretches_and_deferred_freezes() {
        let mut g = gov();
        g.set_granted(0, 0, None);
        g.set_granted(0, 1_050 * MS, Some(3));
        // Ten whole blocks skipped; 50 ms idle in the current one.
        assert_eq!(g.decide(0, 1_050 * MS), None);
        assert_eq!(g.next_wake(), Some(1_100 * MS));
        assert!(g.defer_freeze(3, 10, 0, true));
        assert!(g.defer_freeze(3, 20, 0, true), "already pending");
        assert_eq!(g.deferred, 1);
        assert!(g.freeze_pending(3));
        let mut due = Vec::new();
        g.due(10 + 499_999, &mut due);
        assert!(due.is_empty());
        g.due(10 + 500_000, &mut due);
        assert_eq!(due, vec![3]);
        assert!(!g.freeze_pending(3));
        g.defer_freeze(4, 0, 0, true);
        g.cancel(4);
        assert!(!g.freeze_pending(4));
        // Time lost to dispatch is added, up to the cap.
        g.defer_freeze(5, 0, 300_000, true);
        g.defer_freeze(6, 0, 9 * MS, true);
        assert_eq!((g.lost_deferrals, g.lost_ns), (2, 300_000 + 2 * MS));
        let mut due = Vec::new();
        g.due(799_999, &mut due);
        assert!(due.is_empty());
        g.due(800_000, &mut due);
        assert_eq!(due, vec![5]);
        g.due(2_500_000, &mut due);
        assert_eq!(due, vec![6]);
        // Before another reservation: the lost time only, or no deferral.
        assert!(!g.defer_freeze(7, 0, 0, false));
        assert!(!g.freeze_pending(7));
        assert!(g.defer_freeze(8, 0, 300_000, false));
        g.due(299_999, &mut due);
        assert!(due.is_empty());
        g.due(300_000, &mut due);
        assert_eq!(due, vec![8]);
        let off = RtGovernor::new(RtBudget::default().with_overrides("off").unwrap(), 1);
        assert!(!off.active());
    }
}

#[cfg(test)]
mod freezer_tests {
    use super::*;

    /// The CPU this thread last ran on is the one it runs on now.
    #[test]
    fn a_threads_last_cpu_is_read_from_its_stat() {
        let me = sys::gettid();
        let pinned = sys::CpuMask::single(0);
        let before = sys::get_affinity(0).unwrap();
        sys::set_affinity(0, &pinned).unwrap();
        assert_eq!(proc_last_cpu(me), Some(0));
        sys::set_affinity(0, &before).unwrap();
        assert_eq!(proc_last_cpu(i32::MAX), None);
    }

    /// Mounting the v1 freezer, as `ensure_freezer` does on a system with
    /// none: a second mount of a mounted controller is the same hierarchy,
    /// so this runs beside the system's and removes its own mount.
    #[test]
    fn the_freezer_hierarchy_can_be_mounted_and_shows_every_process() {
        if sys::geteuid() != 0 {
            crate::diag!("SKIPPED: mounting a cgroup hierarchy needs root");
            return;
        }
        let at = std::env::temp_dir().join(format!("hsched-freezer-test-{}", sys::getpid()));
        std::fs::create_dir_all(&at).unwrap();
        let mounted = sys::mount_cgroup_v1(&at, "freezer");
        let tasks = std::fs::read_to_string(at.join("tasks"));
        if mounted.is_ok() {
            sys::umount_lazy(&at).unwrap();
        }
        std::fs::remove_dir(&at).unwrap();
        if freezer_mount().is_none() {
            // No v1 freezer on this kernel at all: the mount must fail.
            assert!(mounted.is_err());
            crate::diag!("SKIPPED: this kernel has no v1 freezer");
            return;
        }
        mounted.unwrap();
        let me = sys::gettid().to_string();
        assert!(
            tasks.unwrap().lines().any(|t| t == me),
            "the root cgroup lists this thread"
        );
        assert_eq!(ensure_freezer().unwrap(), freezer_mount().unwrap());
        assert!(sys::mount_cgroup_v1(Path::new("/nonexistent/hsched"), "freezer").is_err());
    }
}

#[cfg(test)]
mod signal_tests {
    use super::*;

    fn status(pnd: u64, shd: u64, blk: u64, ign: u64, cgt: u64) -> String {
        format!(
            "Name:\tsh\nState:\tD (disk sleep)\nSigQ:\t1/7823\nSigPnd:\t{pnd:016x}\nShdPnd:\t{shd:016x}\nSigBlk:\t{blk:016x}\nSigIgn:\t{ign:016x}\nSigCgt:\t{cgt:016x}\nCoreDumping:\t0\n"
        )
    }
    const TERM: u64 = 1 << 14;
    const KILL: u64 = 1 << 8;
    const CHLD: u64 = 1 << 16;

    #[test]
    fn kill_term_and_handled_signals() {
        let f = |p, s, b, i, c| SigSets::parse(&status(p, s, b, i, c)).unwrap().fatal();
        // kill -9: SIGKILL in the thread's own set (and the process's).
        assert_eq!(f(KILL, KILL, 0, 0, 0), Some(9));
        // A group-fatal signal already turned into SIGKILL, TERM blocked.
        assert_eq!(f(KILL, TERM, TERM, 0, 0), Some(9));
        // SIGTERM waiting for the process, default action.
        assert_eq!(f(0, TERM, 0, 0, 0), Some(15));
        // ... caught, ignored or blocked: not fatal.
        assert_eq!(f(0, TERM, 0, 0, TERM), None);
        assert_eq!(f(0, TERM, 0, TERM, 0), None);
        assert_eq!(f(0, TERM, TERM, 0, 0), None);
        // SIGCHLD's default is to ignore.
        assert_eq!(f(CHLD, CHLD, 0, 0, 0), None);
        assert_eq!(f(0, 0, 0, 0, 0), None);
        // A missing set is no answer.
        assert_eq!(SigSets::parse("SigPnd:\t0\n"), None);
        assert_eq!(
            SigSets::parse(
                &status(0, 0, 0, 0, 0).replace("0000000000000000\nSigIgn", "zz\nSigIgn")
            ),
            None
        );
        assert!(
            SigSets::parse(&status(0, 0, 0, 0, 0).replace("CoreDumping:\t0", "CoreDumping:\t1"))
                .unwrap()
                .core_dumping
        );
    }

    #[test]
    fn leaving_of_this_thread_and_of_a_wrong_start() {
        let tid = sys::gettid();
        let (_, start) = proc_identity(tid).unwrap();
        assert_eq!(proc_leaving(tid, start), Some(Leaving::No));
        assert_eq!(proc_leaving(tid, start + 1), None, "another thread");
        assert_eq!(proc_leaving(i32::MAX, start), None, "no such thread");
        assert_eq!(proc_handles(sys::getpid(), 0), None);
    }
}
