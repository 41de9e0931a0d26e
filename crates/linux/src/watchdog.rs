//! The fail-safe watchdog: a process forked before anything is changed,
//! which outlives the daemon and restores every managed thread when the
//! daemon ends for any reason, `kill -9` included.
//!
//! The daemon writes a fixed-size record to a pipe *before* it changes a
//! thread (policy, priority, affinity, freezer cgroup) and another when the
//! thread leaves the hierarchy. The watchdog holds the only read end; when
//! every write end is closed (the daemon exited, crashed or was killed,
//! since nothing else inherits the close-on-exec write end), `poll` reports
//! the hang-up and the watchdog restores whatever is still recorded, thaws
//! and removes hsched's freezer cgroups (or the kernel backend's cpu
//! cgroups and partitions, [`crate::cpuset`]), removes the daemon's `coop_poll`
//! channel file, and exits. It keeps the daemon's CPU lock descriptors
//! ([`crate::cpulock`]) open all along, so the CPUs of a killed daemon stay
//! locked, the holder line naming the watchdog, until that is done, and a
//! disabled perf event on each tracepoint the daemon follows, so that the
//! kernel closes a killed daemon's events at once ([`Watchdog::anchor`]). It
//! runs at a real-time priority above the managed threads and in its own
//! session, so neither a managed CPU hog nor a terminal's Ctrl-C gets in
//! its way, and the OOM killer leaves it alone (`oom_score_adj` −1000,
//! where `CAP_SYS_RESOURCE` allows it; otherwise its small size makes it
//! the last candidate beside the daemon).
//!
//! A daemon that is alive but stops answering is treated like a dead one:
//! stopped (`SIGSTOP`, a debugger) for [`STOPPED_NS`], or silent for
//! [`UNRESPONSIVE_NS`] while it manages threads (it writes a heartbeat
//! every [`HEARTBEAT_NS`] then; the bound leaves room for a slow start-up),
//! the watchdog restores everything and exits with [`EXIT_UNRESPONSIVE`],
//! which the daemon reads when it comes back. The
//! daemon in turn reaps the watchdog: a watchdog that ended for any reason
//! makes it restore every thread itself and end the run, since from then on
//! nothing would restore them after a `kill -9`.

use crate::cpulock::CpuLocks;
use crate::cpuset::Cpusets;
use crate::enforce::{self, Original};
use crate::sys::{self, CpuMask, SchedAttr};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::PathBuf;

const REC: usize = 208;
const MANAGE: u32 = 1;
const FORGET: u32 = 2;
const DONE: u32 = 3;
const ANCHOR: u32 = 4;
const HEARTBEAT: u32 = 5;

/// How often a daemon that manages threads tells its watchdog it is alive.
pub const HEARTBEAT_NS: u64 = 100_000_000;
/// How long a daemon that manages threads may say nothing before its
/// watchdog restores them.
pub const UNRESPONSIVE_NS: u64 = 3_000_000_000;
/// How long a daemon that manages threads may be stopped before its
/// watchdog restores them.
pub const STOPPED_NS: u64 = 300_000_000;
/// How often, at least, the watchdog looks at a daemon that holds threads
/// (its heartbeats wake it more often while it runs). A stop is confirmed
/// [`STOPPED_NS`] after it is first seen, so a stopped daemon's threads are
/// restored within `LOOK_MS` + [`STOPPED_NS`].
pub const LOOK_MS: i32 = 250;
/// The exit status of a watchdog that restored an unresponsive daemon's
/// threads.
pub const EXIT_UNRESPONSIVE: i32 = 3;

/// The daemon's handle on its watchdog.
#[derive(Debug)]
pub struct Watchdog {
    pid: i32,
    w: Option<OwnedFd>,
}

fn encode(kind: u32, o: &Original) -> [u8; REC] {
    let mut b = [0u8; REC];
    b[0..4].copy_from_slice(&kind.to_ne_bytes());
    b[4..8].copy_from_slice(&o.tid.to_ne_bytes());
    b[8..12].copy_from_slice(&o.tgid.to_ne_bytes());
    b[16..24].copy_from_slice(&o.start.to_ne_bytes());
    let a = &o.attr;
    b[24..28].copy_from_slice(&a.policy.to_ne_bytes());
    b[28..36].copy_from_slice(&a.flags.to_ne_bytes());
    b[36..40].copy_from_slice(&a.nice.to_ne_bytes());
    b[40..44].copy_from_slice(&a.priority.to_ne_bytes());
    b[44..52].copy_from_slice(&a.runtime.to_ne_bytes());
    b[52..60].copy_from_slice(&a.deadline.to_ne_bytes());
    b[60..68].copy_from_slice(&a.period.to_ne_bytes());
    b[68..72].copy_from_slice(&a.util_min.to_ne_bytes());
    b[72..76].copy_from_slice(&a.util_max.to_ne_bytes());
    b[80..208].copy_from_slice(&o.mask.bytes());
    b
}

fn decode(b: &[u8]) -> (u32, Original) {
    let u32_at = |o: usize| u32::from_ne_bytes(b[o..o + 4].try_into().unwrap_or([0; 4]));
    let u64_at = |o: usize| u64::from_ne_bytes(b[o..o + 8].try_into().unwrap_or([0; 8]));
    let attr = SchedAttr {
        size: std::mem::size_of::<SchedAttr>() as u32,
        policy: u32_at(24),
        flags: u64_at(28),
        nice: u32_at(36) as i32,
        priority: u32_at(40),
        runtime: u64_at(44),
        deadline: u64_at(52),
        period: u64_at(60),
        util_min: u32_at(68),
        util_max: u32_at(72),
    };
    let mut m = [0u8; 128];
    m.copy_from_slice(&b[80..208]);
    let o = Original {
        tid: u32_at(4) as i32,
        tgid: u32_at(8) as i32,
        start: u64_at(16),
        attr,
        mask: CpuMask::from_bytes(&m),
    };
    (u32_at(0), o)
}

impl Watchdog {
    /// Forks the watchdog. `freezer` is hsched's freezer mount and root, if
    /// threads will be frozen. `priority` is its SCHED_FIFO priority.
    ///
    /// Call it while the process is single-threaded or accept that the
    /// child relies on glibc's fork-safe allocator (it allocates a little).
    ///
    /// `locks` are the daemon's CPU locks: the watchdog keeps their
    /// descriptors, so after a `kill -9` the CPUs stay locked (under the
    /// watchdog's pid) until it has restored every thread.
    ///
    /// # Errors
    /// The pipe or the fork failed.
    pub fn start(
        freezer: Option<(PathBuf, PathBuf)>,
        cpusets: Option<Cpusets>,
        priority: u32,
        locks: Option<&CpuLocks>,
    ) -> io::Result<Watchdog> {
        let (r, w) = sys::pipe()?;
        sys::set_pipe_size(&w, 1 << 20);
        let pid = sys::fork()?;
        if pid == 0 {
            drop(w);
            let code = watchdog_main(r, freezer, cpusets, priority, locks);
            sys::exit_now(code);
        }
        drop(r);
        Ok(Watchdog { pid, w: Some(w) })
    }

    /// The watchdog's pid.
    pub fn pid(&self) -> i32 {
        self.pid
    }

    fn send(&self, b: &[u8]) -> io::Result<()> {
        match &self.w {
            Some(w) => sys::write_all(w.as_raw_fd(), b),
            None => Err(io::Error::new(
                io::ErrorKind::BrokenPipe,
                "watchdog finished",
            )),
        }
    }

    /// Records `o` before the daemon changes the thread.
    ///
    /// # Errors
    /// The watchdog is gone: the caller must not change the thread.
    pub fn manage(&self, o: &Original) -> io::Result<()> {
        self.send(&encode(MANAGE, o))
    }

    /// The thread recorded as `old` is `new` from now on (same task, new
    /// tid: an `execve` from a thread other than its process's leader):
    /// both records in one write, so the watchdog never holds neither.
    ///
    /// # Errors
    /// The watchdog is gone.
    pub fn replace(&self, old: &Original, new: &Original) -> io::Result<()> {
        let mut b = [0u8; 2 * REC];
        b[..REC].copy_from_slice(&encode(MANAGE, new));
        b[REC..].copy_from_slice(&encode(FORGET, old));
        self.send(&b)
    }

    /// Makes the watchdog hold an anchor ([`crate::observe::anchor`]) on
    /// each of tracepoints `ids` until it exits. Closing the last perf
    /// event on a tracepoint waits for RCU grace periods (about 50 ms per
    /// tracepoint here), so a killed daemon holding the last ones would
    /// take the kernel a third of a second to close, and the watchdog
    /// learns of the death only after that (docs/measurements/live-mode.md, "Fail-safe").
    ///
    /// # Errors
    /// The watchdog is gone.
    pub fn anchor(&self, ids: &[u64]) -> io::Result<()> {
        let mut b = Vec::with_capacity(ids.len() * REC);
        for &id in ids {
            let mut r = [0u8; REC];
            r[0..4].copy_from_slice(&ANCHOR.to_ne_bytes());
            r[16..24].copy_from_slice(&id.to_ne_bytes());
            b.extend_from_slice(&r);
        }
        self.send(&b)
    }

    /// Tells the watchdog the daemon is alive (see [`UNRESPONSIVE_NS`]).
    ///
    /// # Errors
    /// The watchdog is gone.
    pub fn heartbeat(&self) -> io::Result<()> {
        let mut b = [0u8; REC];
        b[0..4].copy_from_slice(&HEARTBEAT.to_ne_bytes());
        self.send(&b)
    }

    /// The thread left the hierarchy (exited or was restored).
    pub fn forget(&self, o: &Original) {
        let _ = self.send(&encode(FORGET, o));
    }

    /// The daemon restored everything itself: tell the watchdog, close the
    /// pipe and wait for it to exit (it re-checks what it still holds).
    pub fn finish(mut self) {
        let zero = Original {
            tid: 0,
            tgid: 0,
            start: 0,
            attr: SchedAttr::default(),
            mask: CpuMask::empty(),
        };
        let _ = self.send(&encode(DONE, &zero));
        self.w = None;
        let _ = sys::wait_pid(self.pid);
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        // Closing the pipe (if still open) makes the watchdog restore all.
        self.w = None;
    }
}

/// The pid of daemon `daemon`'s watchdog (its child named
/// `hsched-watchdog`), if it has one; for tests and diagnostics.
pub fn find(daemon: i32) -> Option<i32> {
    std::fs::read_to_string(format!("/proc/{daemon}/task/{daemon}/children"))
        .ok()?
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .find(|p: &i32| {
            std::fs::read_to_string(format!("/proc/{p}/comm"))
                .is_ok_and(|c| c.trim() == "hsched-watchdog")
        })
}

fn watchdog_main(
    r: OwnedFd,
    freezer: Option<(PathBuf, PathBuf)>,
    cpusets: Option<Cpusets>,
    priority: u32,
    locks: Option<&CpuLocks>,
) -> i32 {
    // The daemon is our parent: a pidfd on it tells us it died even if some
    // process wrongly inherited the pipe's write end.
    let daemon_pid = sys::getppid();
    let daemon = sys::pidfd_open(daemon_pid).ok();
    sys::setsid();
    for s in [
        libc::SIGINT,
        libc::SIGTERM,
        libc::SIGHUP,
        libc::SIGPIPE,
        libc::SIGQUIT,
        libc::SIGTSTP,
    ] {
        sys::ignore_signal(s);
    }
    sys::unblock_all_signals();
    let keep: Vec<i32> = [Some(r.as_raw_fd()), daemon.as_ref().map(|d| d.as_raw_fd())]
        .into_iter()
        .flatten()
        .collect();
    // The CPU locks' descriptors stay open too (not polled).
    let lock_fds = locks.map(|l| l.fds()).unwrap_or_default();
    let mut keep_all = keep.clone();
    keep_all.extend_from_slice(&lock_fds);
    sys::close_from(3, &keep_all);
    sys::set_nonblocking(r.as_raw_fd());
    sys::set_thread_name("hsched-watchdog");
    let _ = sys::sched_setattr(0, &SchedAttr::fifo(priority));
    // Under memory pressure the OOM killer should take the daemon, whose
    // threads this process then restores, never this process (exempt where
    // CAP_SYS_RESOURCE allows it).
    let _ = std::fs::write("/proc/self/oom_score_adj", "-1000");
    let mut held: Vec<Original> = Vec::with_capacity(1024);
    let mut anchors = Vec::new();
    let mut buf = vec![0u8; REC * 256];
    let mut fill = 0usize;
    let mut done = false;
    let mut daemon_gone = false;
    let mut unresponsive: Option<String> = None;
    let mut last_word = sys::now_ns();
    let mut stopped_since: Option<u64> = None;
    loop {
        let n = match sys::read(r.as_raw_fd(), &mut buf[fill..]) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                if daemon_gone {
                    break;
                }
                // Silence and stops matter only while threads are held.
                let now = sys::now_ns();
                if !held.is_empty() {
                    stopped_since = if is_stopped(daemon_pid) {
                        stopped_since.or(Some(now))
                    } else {
                        None
                    };
                    if stopped_since.is_some_and(|t| now - t >= STOPPED_NS) {
                        unresponsive =
                            Some(format!("was stopped for {} ms", STOPPED_NS / 1_000_000));
                        break;
                    }
                    if now.saturating_sub(last_word) >= UNRESPONSIVE_NS {
                        unresponsive = Some(format!(
                            "said nothing for {} ms",
                            UNRESPONSIVE_NS / 1_000_000
                        ));
                        break;
                    }
                }
                let timeout = match stopped_since {
                    _ if held.is_empty() => -1,
                    // Look again the moment the stop would count.
                    Some(t) => ((t + STOPPED_NS).saturating_sub(now) / 1_000_000 + 1) as i32,
                    None => LOOK_MS,
                };
                let fds: Vec<i32> = keep.clone();
                let ready = sys::poll_many(&fds, timeout);
                if ready.contains(&1) {
                    // Read what is left in the pipe, then restore.
                    daemon_gone = true;
                }
                continue;
            }
            Err(_) => break,
        };
        last_word = sys::now_ns();
        fill += n;
        let whole = fill / REC * REC;
        for rec in buf[..whole].chunks_exact(REC) {
            let (kind, o) = decode(rec);
            match kind {
                MANAGE => {
                    held.retain(|h| h.tid != o.tid);
                    held.push(o);
                }
                FORGET => held.retain(|h| !(h.tid == o.tid && h.start == o.start)),
                DONE => done = true,
                // The id travels in the `start` field.
                ANCHOR => anchors.extend(crate::observe::anchor(o.start)),
                _ => {}
            }
        }
        buf.copy_within(whole..fill, 0);
        fill -= whole;
    }
    // A daemon that ended without restoring is dead (or past its Drop):
    // the CPUs' locks are the watchdog's now, and the holder line says so
    // until the threads are back.
    let lock_note = format!("watchdog of {daemon_pid}, restoring");
    if !done && !lock_fds.is_empty() {
        if let Some(l) = locks {
            l.rewrite_holder(sys::getpid(), &lock_note);
        }
    }
    let (mount, root) = match &freezer {
        Some((m, r)) => (Some(m.as_path()), Some(r.as_path())),
        None => (None, None),
    };
    // Out of the partitions first: the move resets a thread's affinity to
    // the top cpuset's CPUs, which its own restore then narrows again.
    if let Some(cs) = &cpusets {
        cs.release_tasks();
    }
    let mut failed = 0;
    for o in &held {
        if enforce::restore(o, mount, root).is_err() {
            failed += 1;
        }
    }
    if let (Some(m), Some(r)) = (mount, root) {
        enforce::cleanup_root(m, r, std::time::Duration::from_secs(2));
    }
    if let Some(cs) = &cpusets {
        cs.remove();
    }
    // A daemon killed before its Drop leaves its coop_poll channel file.
    let _ = std::fs::remove_file(crate::coop::channel_path(daemon_pid as u32));
    // And its ftrace instance, still recording wake-ups.
    crate::ftrace::remove_instance(daemon_pid);
    if let Some(what) = &unresponsive {
        let msg = format!(
            "hsched-watchdog: the daemon {what}; restored {} thread(s), {failed} failed\n",
            held.len()
        );
        let _ = sys::write_all(2, msg.as_bytes());
    } else if !done && !held.is_empty() {
        let msg = format!("hsched-watchdog: the daemon ended without restoring; restored {} thread(s), {failed} failed\n", held.len());
        let _ = sys::write_all(2, msg.as_bytes());
    }
    // Restored: empty the line (unless a live daemon still holds it and
    // will) and free the CPUs, then let the anchors go, whose closing may
    // wait for grace periods (a live daemon holds its own and waits for
    // nothing here).
    if !done && !lock_fds.is_empty() {
        if let Some(l) = locks {
            l.clear_holder();
        }
    }
    for fd in lock_fds {
        sys::close(fd);
    }
    drop(anchors);
    if unresponsive.is_some() {
        EXIT_UNRESPONSIVE
    } else {
        0
    }
}

/// Whether process `pid` is stopped (`T`) or stopped by a tracer (`t`).
fn is_stopped(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            // The state follows the command name, which may hold spaces
            // and parentheses: after the last ')'.
            let rest = &s[s.rfind(')')? + 1..];
            rest.split_whitespace()
                .next()
                .map(|st| st == "T" || st == "t")
        })
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip() {
        let mut mask = CpuMask::empty();
        mask.set(1);
        mask.set(63);
        let o = Original {
            tid: 4242,
            tgid: 4240,
            start: 987_654_321,
            attr: SchedAttr {
                size: 56,
                policy: 1,
                flags: 1,
                nice: -5,
                priority: 7,
                runtime: 1,
                deadline: 2,
                period: 3,
                util_min: 4,
                util_max: 5,
            },
            mask,
        };
        let (k, back) = decode(&encode(MANAGE, &o));
        assert_eq!(k, MANAGE);
        assert_eq!(back, o);
        let (k, _) = decode(&encode(FORGET, &o));
        assert_eq!(k, FORGET);
    }

    #[test]
    fn replace_records_the_new_tid_then_forgets_the_old_one() {
        let (r, w) = sys::pipe().unwrap();
        let wd = Watchdog { pid: 0, w: Some(w) };
        let old = Original {
            tid: 4243,
            tgid: 4240,
            start: 11,
            attr: SchedAttr {
                size: std::mem::size_of::<SchedAttr>() as u32,
                ..SchedAttr::default()
            },
            mask: CpuMask::empty(),
        };
        let new = Original {
            tid: 4240,
            start: 10,
            ..old
        };
        wd.replace(&old, &new).unwrap();
        let mut b = [0u8; 2 * REC];
        assert_eq!(sys::read(r.as_raw_fd(), &mut b).unwrap(), 2 * REC);
        assert_eq!(decode(&b[..REC]), (MANAGE, new));
        assert_eq!(decode(&b[REC..]), (FORGET, old));
    }
}
