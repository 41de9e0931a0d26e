//! Live `coop_poll`: the client side of the channel to the `coop` policy
//! running in the hsched live daemon (`hsched run`).
//!
//! No new system call exists, so the call goes through shared memory and a
//! futex (Sinha 2007, §2.4 used the same medium for its user-level
//! prototype; docs/cooperative-polling.md, "Live", has the layout):
//!
//! 1. the daemon creates `/dev/shm/hsched-coop-<daemon pid>` with one slot
//!    per thread and puts its path in `HSCHED_COOP` for the programs it
//!    launches;
//! 2. a thread claims a slot (compare-and-swap of its tid), writes IN
//!    (`CLOCK_MONOTONIC` nanoseconds), bumps the request sequence, rings
//!    the daemon's doorbell (an eventfd of the daemon, opened through
//!    `/proc/<daemon pid>/fd/<n>`; one `write`) and waits with
//!    `FUTEX_WAIT` on the reply sequence;
//! 3. the daemon hands IN to the policy as
//!    `Msg::App { kind: "coop_poll", .. }`, and once the policy grants the
//!    thread a processor again it writes OUT, bumps the reply sequence and
//!    `FUTEX_WAKE`s. `coop_poll` therefore returns when the caller is to
//!    run again, as the kernel call of §2.3.2 does.
//!
//! Without `HSCHED_COOP` (or when the daemon refuses: the thread's
//! scheduler is not `coop`, or the daemon is gone) the client falls back to
//! non-cooperative mode and says so once on stderr: [`CoopPoll::coop_poll`]
//! answers "no limit" and the event loop sleeps until its own next deadline
//! (Fig 2.3).
//!
//! This is the one module of the crate with `unsafe` code (the mapping and
//! the futex); each block says why it is sound.
#![allow(unsafe_code)]

use crate::event_loop::{BestEffortKey, Clock, CoopPoll, EventLoop, PollIn, PollOut};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicI32, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Once};

/// The environment variable naming the channel file.
pub const ENV: &str = "HSCHED_COOP";
/// Set to `block` to skip the eventfd doorbell: the daemon then learns of
/// a request from the `sched_switch` record of the caller's `FUTEX_WAIT`
/// (measured in docs/cooperative-polling.md; the eventfd is the default).
pub const ENV_DOORBELL: &str = "HSCHED_COOP_DOORBELL";

/// File magic, "HSCOOP01" little-endian.
pub const MAGIC: u64 = u64::from_le_bytes(*b"HSCOOP01");
/// Layout version.
pub const VERSION: u32 = 1;

/// The file header (64 bytes); the slots follow it.
#[repr(C)]
pub struct Header {
    /// [`MAGIC`].
    pub magic: AtomicU64,
    /// [`VERSION`].
    pub version: AtomicU32,
    /// Number of slots.
    pub nslots: AtomicU32,
    /// The daemon's pid.
    pub daemon_pid: AtomicI32,
    /// The daemon's doorbell eventfd number (-1: none).
    pub doorbell_fd: AtomicI32,
    /// The daemon's HSI epoch, `CLOCK_MONOTONIC` ns (informative).
    pub epoch: AtomicU64,
    _pad: [u64; 4],
}

/// `in_flags` / `out_flags`: the deadline field is meaningful.
pub const F_DEADLINE: u64 = 1;
/// `in_flags` / `out_flags`: the best-effort fields are meaningful.
pub const F_BEST_EFFORT: u64 = 2;
/// `out_flags`: the daemon refused (not a managed thread, or its scheduler
/// does not accept `coop_poll`); the caller should stop cooperating.
pub const F_REFUSED: u64 = 4;

/// One thread's slot (128 bytes). Times are `CLOCK_MONOTONIC` ns.
#[repr(C, align(64))]
pub struct Slot {
    /// Owner thread id; 0 when free.
    pub tid: AtomicI32,
    /// Request sequence, bumped by the client after writing IN.
    pub req_seq: AtomicU32,
    /// Reply sequence (the futex word), set to `req_seq` by the daemon
    /// after writing OUT.
    pub reply_seq: AtomicU32,
    _pad0: u32,
    /// When the request was made.
    pub req_time: AtomicU64,
    /// IN: `F_DEADLINE | F_BEST_EFFORT`.
    pub in_flags: AtomicU64,
    /// IN: release time of the earliest own deadline event.
    pub in_deadline: AtomicU64,
    /// IN: priority of the most important own best-effort event (i64 bits).
    pub in_be_priority: AtomicU64,
    /// IN: its timestamp.
    pub in_be_timestamp: AtomicU64,
    /// OUT: `F_DEADLINE | F_BEST_EFFORT | F_REFUSED`.
    pub out_flags: AtomicU64,
    /// OUT: the time by which to call `coop_poll` again.
    pub out_deadline: AtomicU64,
    /// OUT: priority of the other members' best best-effort event.
    pub out_be_priority: AtomicU64,
    /// OUT: its timestamp.
    pub out_be_timestamp: AtomicU64,
    /// When the daemon replied.
    pub reply_time: AtomicU64,
    /// Times the policy policed this thread (written by the daemon).
    pub policed: AtomicU64,
    /// Of those, times for blocking outside `coop_poll`.
    pub policed_blocked: AtomicU64,
}

/// Offset of slot `i` in the file.
pub const fn slot_offset(i: usize) -> usize {
    std::mem::size_of::<Header>() + i * std::mem::size_of::<Slot>()
}

/// Why the live channel cannot be used.
#[derive(Debug)]
pub enum LiveError {
    /// `HSCHED_COOP` is not set.
    NotSet,
    /// The file could not be opened or mapped, or is not a channel.
    Channel(String),
    /// Every slot is taken.
    Full,
    /// The daemon refused the call (see [`F_REFUSED`]).
    Refused,
    /// The daemon is gone.
    DaemonGone,
}

impl std::fmt::Display for LiveError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LiveError::NotSet => write!(f, "{ENV} is not set (not launched by `hsched run`)"),
            LiveError::Channel(m) => write!(f, "{m}"),
            LiveError::Full => write!(f, "every slot of the channel is taken"),
            LiveError::Refused => write!(
                f,
                "the daemon refused coop_poll (the thread's scheduler is not `coop`)"
            ),
            LiveError::DaemonGone => write!(f, "the hsched daemon is gone"),
        }
    }
}
impl std::error::Error for LiveError {}

/// `CLOCK_MONOTONIC` now, ns.
pub fn mono_now() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the call's duration.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec as u64)
}

fn gettid() -> i32 {
    // SAFETY: gettid has no arguments and cannot fail.
    unsafe { libc::gettid() }
}

/// The mapped channel file.
struct Map {
    base: *mut u8,
    len: usize,
}

// SAFETY: the mapping is shared memory accessed only through atomics; the
// pointer stays valid until `Drop`, which needs exclusive ownership.
unsafe impl Send for Map {}
// SAFETY: as above: every access through `&Map` is atomic.
unsafe impl Sync for Map {}

impl Map {
    fn open(path: &str) -> Result<Map, LiveError> {
        use std::os::unix::fs::OpenOptionsExt;
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_CLOEXEC)
            .open(path)
            .map_err(|e| LiveError::Channel(format!("{ENV}={path}: {e}")))?;
        let len = f
            .metadata()
            .map_err(|e| LiveError::Channel(format!("{path}: {e}")))?
            .len() as usize;
        if len < slot_offset(1) {
            return Err(LiveError::Channel(format!(
                "{path}: too short ({len} bytes)"
            )));
        }
        // SAFETY: a fresh shared mapping of an open regular file; the kernel
        // checks the arguments, and the result is checked for MAP_FAILED.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                f.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(LiveError::Channel(format!(
                "mmap {path}: {}",
                io::Error::last_os_error()
            )));
        }
        let m = Map {
            base: p.cast(),
            len,
        };
        let h = m.header();
        if h.magic.load(Ordering::Acquire) != MAGIC || h.version.load(Ordering::Acquire) != VERSION
        {
            return Err(LiveError::Channel(format!(
                "{path}: not an hsched coop channel of version {VERSION}"
            )));
        }
        let n = h.nslots.load(Ordering::Acquire) as usize;
        if slot_offset(n) > len {
            return Err(LiveError::Channel(format!("{path}: truncated")));
        }
        Ok(m)
    }

    fn header(&self) -> &Header {
        // SAFETY: the mapping is at least one header long (checked in
        // `open`), page-aligned, and `Header` holds only atomics, valid
        // for any bit pattern; it lives as long as `self`.
        unsafe { &*(self.base as *const Header) }
    }

    fn slot(&self, i: usize) -> Option<&Slot> {
        let n = self.header().nslots.load(Ordering::Relaxed) as usize;
        if i >= n || slot_offset(i + 1) > self.len {
            return None;
        }
        // SAFETY: in bounds (checked above), 64-byte aligned (page-aligned
        // base, 64-byte header, 128-byte slots), atomics only; it lives as
        // long as `self`.
        Some(unsafe { &*(self.base.add(slot_offset(i)) as *const Slot) })
    }
}

impl Drop for Map {
    fn drop(&mut self) {
        // SAFETY: `base`/`len` are the mapping made in `open`, unmapped
        // once; no reference into it outlives `self`.
        unsafe { libc::munmap(self.base.cast(), self.len) };
    }
}

/// A copy of descriptor `fd` of process `pid` (`pidfd_getfd`, Linux 5.6;
/// an eventfd cannot be reopened through `/proc/<pid>/fd`).
fn dup_from(pid: i32, fd: i32) -> Result<OwnedFd, LiveError> {
    let err = |what: &str| {
        LiveError::Channel(format!(
            "doorbell: {what} of daemon {pid}: {}",
            io::Error::last_os_error()
        ))
    };
    // SAFETY: pidfd_open takes a pid and flags and returns a new
    // descriptor or -1; nothing is borrowed.
    let pfd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if pfd < 0 {
        return Err(err("pidfd_open"));
    }
    // SAFETY: `pfd` is a fresh descriptor owned by nobody else.
    let pfd = unsafe { OwnedFd::from_raw_fd(pfd as i32) };
    // SAFETY: pidfd_getfd takes a pidfd, a descriptor number of that
    // process and flags, and returns a new descriptor or -1.
    let r = unsafe { libc::syscall(libc::SYS_pidfd_getfd, pfd.as_raw_fd(), fd, 0) };
    if r < 0 {
        return Err(err("pidfd_getfd"));
    }
    // SAFETY: `r` is a fresh descriptor owned by nobody else.
    let own = unsafe { OwnedFd::from_raw_fd(r as i32) };
    // Close-on-exec: the doorbell is this process's, not its children's.
    // SAFETY: fcntl on a descriptor we own.
    unsafe { libc::fcntl(own.as_raw_fd(), libc::F_SETFD, libc::FD_CLOEXEC) };
    Ok(own)
}

fn futex_wait(word: &AtomicU32, expected: u32, timeout_ns: u64) {
    let ts = libc::timespec {
        tv_sec: (timeout_ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (timeout_ns % 1_000_000_000) as libc::c_long,
    };
    // SAFETY: `word` is a live, aligned 32-bit atomic in shared memory;
    // FUTEX_WAIT (not private: other processes wake it) only reads it, and
    // `ts` outlives the call. Errors (EAGAIN, EINTR, ETIMEDOUT) are
    // handled by the caller re-reading the word.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT,
            expected,
            &ts as *const libc::timespec,
        )
    };
}

/// Counters of one live client, shared with a [`LiveMonitor`].
#[derive(Default)]
struct Counters {
    polls: AtomicU64,
    round_trips: Mutex<Vec<u64>>,
    keep_samples: std::sync::atomic::AtomicBool,
}

/// The live `coop_poll` of one thread. Create it on the thread that polls
/// (the slot is claimed for the calling thread's tid).
pub struct LivePoll {
    map: Arc<Map>,
    slot: usize,
    doorbell: Option<OwnedFd>,
    daemon_pid: i32,
    counters: Arc<Counters>,
    broken: bool,
}

/// Read access to a [`LivePoll`]'s counters after the poller has moved
/// into an event loop.
#[derive(Clone)]
pub struct LiveMonitor {
    map: Arc<Map>,
    slot: usize,
    counters: Arc<Counters>,
}

impl LiveMonitor {
    /// Times the policy policed this thread (demoted it to best effort).
    pub fn policed(&self) -> u64 {
        self.map
            .slot(self.slot)
            .map_or(0, |s| s.policed.load(Ordering::Acquire))
    }
    /// Of [`LiveMonitor::policed`], the times for blocking outside
    /// `coop_poll` (the daemon must apply a call before the caller's
    /// `FUTEX_WAIT` block, so a cooperating thread has none).
    pub fn policed_blocked(&self) -> u64 {
        self.map
            .slot(self.slot)
            .map_or(0, |s| s.policed_blocked.load(Ordering::Acquire))
    }
    /// Calls made through the channel.
    pub fn polls(&self) -> u64 {
        self.counters.polls.load(Ordering::Relaxed)
    }
    /// Round trips (request to reply seen, ns) recorded since
    /// [`LiveMonitor::record_round_trips`] was turned on.
    pub fn round_trips(&self) -> Vec<u64> {
        self.counters
            .round_trips
            .lock()
            .map(|v| v.clone())
            .unwrap_or_default()
    }
    /// Starts or stops recording round trips.
    pub fn record_round_trips(&self, on: bool) {
        self.counters.keep_samples.store(on, Ordering::Relaxed);
    }
}

/// IN or OUT in `CLOCK_MONOTONIC` nanoseconds (the channel's clock).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MonoParam {
    /// Release time (IN) or yield-by time (OUT).
    pub deadline: Option<u64>,
    /// Best-effort event (timestamp in `CLOCK_MONOTONIC` ns).
    pub best_effort: Option<BestEffortKey>,
}

impl LivePoll {
    /// Opens the channel named by `HSCHED_COOP` and claims a slot for the
    /// calling thread.
    ///
    /// # Errors
    /// No variable, a bad file, no free slot.
    pub fn from_env() -> Result<LivePoll, LiveError> {
        let path = std::env::var(ENV).map_err(|_| LiveError::NotSet)?;
        Self::open(&path)
    }

    /// Opens the channel file `path` and claims a slot for the calling
    /// thread.
    ///
    /// # Errors
    /// A bad file, no free slot.
    pub fn open(path: &str) -> Result<LivePoll, LiveError> {
        let map = Arc::new(Map::open(path)?);
        let h = map.header();
        let daemon_pid = h.daemon_pid.load(Ordering::Acquire);
        let efd = h.doorbell_fd.load(Ordering::Acquire);
        let want_bell = std::env::var(ENV_DOORBELL).map_or(true, |v| v != "block");
        let doorbell = if efd >= 0 && want_bell {
            Some(dup_from(daemon_pid, efd)?)
        } else {
            None
        };
        let tid = gettid();
        let n = h.nslots.load(Ordering::Acquire) as usize;
        let mut mine = None;
        for i in 0..n {
            let Some(s) = map.slot(i) else { break };
            if s.tid.load(Ordering::Relaxed) == tid
                || s.tid
                    .compare_exchange(0, tid, Ordering::AcqRel, Ordering::Relaxed)
                    .is_ok()
            {
                // A fresh owner starts with both sequences equal.
                let r = s.reply_seq.load(Ordering::Acquire);
                s.req_seq.store(r, Ordering::Release);
                s.policed.store(0, Ordering::Relaxed);
                s.policed_blocked.store(0, Ordering::Relaxed);
                mine = Some(i);
                break;
            }
        }
        let slot = mine.ok_or(LiveError::Full)?;
        Ok(LivePoll {
            map,
            slot,
            doorbell,
            daemon_pid,
            counters: Arc::new(Counters::default()),
            broken: false,
        })
    }

    /// A handle on the counters that stays usable after `self` moves into
    /// an [`EventLoop`].
    pub fn monitor(&self) -> LiveMonitor {
        LiveMonitor {
            map: self.map.clone(),
            slot: self.slot,
            counters: self.counters.clone(),
        }
    }

    fn daemon_alive(&self) -> bool {
        // SAFETY: kill with signal 0 only checks that the process exists.
        let r = unsafe { libc::kill(self.daemon_pid, 0) };
        r == 0 || io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
    }

    /// One `coop_poll` with times in `CLOCK_MONOTONIC` ns: returns when
    /// the daemon has granted the caller a processor again.
    ///
    /// # Errors
    /// The daemon refused the call or is gone.
    pub fn poll_mono(&mut self, input: &MonoParam) -> Result<MonoParam, LiveError> {
        if self.broken {
            return Err(LiveError::Refused);
        }
        let map = self.map.clone();
        let s = map.slot(self.slot).ok_or(LiveError::DaemonGone)?;
        let mut flags = 0;
        if let Some(d) = input.deadline {
            flags |= F_DEADLINE;
            s.in_deadline.store(d, Ordering::Relaxed);
        }
        if let Some(b) = input.best_effort {
            flags |= F_BEST_EFFORT;
            s.in_be_priority.store(b.priority as u64, Ordering::Relaxed);
            s.in_be_timestamp.store(b.timestamp, Ordering::Relaxed);
        }
        s.in_flags.store(flags, Ordering::Relaxed);
        let t0 = mono_now();
        s.req_time.store(t0, Ordering::Relaxed);
        let seq = s.req_seq.load(Ordering::Relaxed).wrapping_add(1);
        s.req_seq.store(seq, Ordering::Release);
        if let Some(fd) = &self.doorbell {
            let one = 1u64.to_ne_bytes();
            // SAFETY: writes 8 bytes from a live local buffer to an open
            // eventfd; a failure only loses the doorbell, and the daemon
            // still sees the request with the caller's block below.
            unsafe { libc::write(fd.as_raw_fd(), one.as_ptr().cast(), 8) };
        }
        loop {
            let r = s.reply_seq.load(Ordering::Acquire);
            if r == seq {
                break;
            }
            futex_wait(&s.reply_seq, r, 1_000_000_000);
            if s.reply_seq.load(Ordering::Acquire) != seq && !self.daemon_alive() {
                self.broken = true;
                return Err(LiveError::DaemonGone);
            }
        }
        let t1 = mono_now();
        self.counters.polls.fetch_add(1, Ordering::Relaxed);
        if self.counters.keep_samples.load(Ordering::Relaxed) {
            if let Ok(mut v) = self.counters.round_trips.lock() {
                v.push(t1.saturating_sub(t0));
            }
        }
        let of = s.out_flags.load(Ordering::Relaxed);
        if of & F_REFUSED != 0 {
            self.broken = true;
            return Err(LiveError::Refused);
        }
        Ok(MonoParam {
            deadline: (of & F_DEADLINE != 0).then(|| s.out_deadline.load(Ordering::Relaxed)),
            best_effort: (of & F_BEST_EFFORT != 0).then(|| BestEffortKey {
                priority: s.out_be_priority.load(Ordering::Relaxed) as i64,
                timestamp: s.out_be_timestamp.load(Ordering::Relaxed),
            }),
        })
    }
}

impl Drop for LivePoll {
    fn drop(&mut self) {
        if let Some(s) = self.map.slot(self.slot) {
            let _ = s
                .tid
                .compare_exchange(gettid(), 0, Ordering::AcqRel, Ordering::Relaxed);
        }
    }
}

fn to_mono(t: u64, offset: i128) -> u64 {
    (i128::from(t) + offset).clamp(0, i128::from(u64::MAX)) as u64
}

fn from_mono(t: u64, offset: i128) -> u64 {
    (i128::from(t) - offset).clamp(0, i128::from(u64::MAX)) as u64
}

static FALLBACK: Once = Once::new();

/// Says once per process why the client is not cooperating.
pub fn note_fallback(why: &LiveError) {
    FALLBACK.call_once(|| {
        // Not `eprintln!`: a closed stderr must not panic the application.
        use std::io::Write as _;
        let _ = writeln!(
            std::io::stderr().lock(),
            "hsched-coop: non-cooperative mode: {why}"
        );
    });
}

impl CoopPoll for LivePoll {
    /// Converts the loop clock's times to `CLOCK_MONOTONIC` and back (the
    /// offset is read at each call, so any [`Clock`] works). On a refusal
    /// the answer is "no limit, nothing from others": the loop then
    /// behaves non-cooperatively (sleeps until its own deadline).
    fn coop_poll(&mut self, clock: &mut dyn Clock, input: &PollIn) -> PollOut {
        let offset = i128::from(mono_now()) - i128::from(clock.now_ns());
        let inp = MonoParam {
            deadline: input.deadline.map(|d| to_mono(d, offset)),
            best_effort: input.best_effort.map(|b| BestEffortKey {
                priority: b.priority,
                timestamp: to_mono(b.timestamp, offset),
            }),
        };
        match self.poll_mono(&inp) {
            Ok(out) => PollOut {
                deadline: out.deadline.map(|d| from_mono(d, offset)),
                best_effort: out.best_effort.map(|b| BestEffortKey {
                    priority: b.priority,
                    timestamp: from_mono(b.timestamp, offset),
                }),
            },
            Err(e) => {
                note_fallback(&e);
                PollOut::default()
            }
        }
    }
}

/// A loop on `clock` that is cooperative through the live channel when
/// `HSCHED_COOP` names a usable one, and non-cooperative otherwise (said
/// once on stderr). Returns the monitor when cooperative.
pub fn event_loop_from_env<C: Clock>(clock: C) -> (EventLoop<C>, Option<LiveMonitor>) {
    match LivePoll::from_env() {
        Ok(p) => {
            let m = p.monitor();
            (EventLoop::cooperative(clock, Box::new(p)), Some(m))
        }
        Err(e) => {
            note_fallback(&e);
            (EventLoop::new(clock), None)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_is_fixed() {
        assert_eq!(std::mem::size_of::<Header>(), 64);
        assert_eq!(std::mem::size_of::<Slot>(), 128);
        assert_eq!(slot_offset(2), 64 + 256);
    }

    #[test]
    fn clock_conversion_round_trips() {
        assert_eq!(from_mono(to_mono(5, 100), 100), 5);
        assert_eq!(to_mono(5, -100), 0);
        assert_eq!(from_mono(u64::MAX, -1), u64::MAX);
    }

    #[test]
    fn no_variable_means_non_cooperative() {
        std::env::remove_var(ENV);
        assert!(matches!(LivePoll::from_env(), Err(LiveError::NotSet)));
        let (l, m) = event_loop_from_env(crate::ManualClock::new(0));
        assert!(m.is_none());
        assert_eq!(l.stats().polls, 0);
    }

    /// A daemon stand-in on a thread: answers every request of slot 0
    /// with OUT deadline = IN deadline + 5 and priority 7, or refuses when
    /// the IN deadline is 666.
    fn fake_daemon(path: &std::path::Path, n: u32) -> std::thread::JoinHandle<()> {
        let len = slot_offset(4);
        std::fs::write(path, vec![0u8; len]).unwrap();
        let map = Arc::new({
            let f = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open(path)
                .unwrap();
            // SAFETY: a shared mapping of the file just written, checked.
            let p = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    len,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_SHARED,
                    f.as_raw_fd(),
                    0,
                )
            };
            assert_ne!(p, libc::MAP_FAILED);
            Map {
                base: p.cast(),
                len,
            }
        });
        let h = map.header();
        h.nslots.store(4, Ordering::Relaxed);
        h.daemon_pid
            .store(std::process::id() as i32, Ordering::Relaxed);
        h.doorbell_fd.store(-1, Ordering::Relaxed);
        h.version.store(VERSION, Ordering::Relaxed);
        h.magic.store(MAGIC, Ordering::Release);
        std::thread::spawn(move || {
            let mut served = 0;
            while served < n {
                let s = map.slot(0).unwrap();
                let seq = s.req_seq.load(Ordering::Acquire);
                if seq == s.reply_seq.load(Ordering::Relaxed) {
                    std::thread::sleep(std::time::Duration::from_micros(50));
                    continue;
                }
                let d = s.in_deadline.load(Ordering::Relaxed);
                let flags = if d == 666 {
                    F_REFUSED
                } else {
                    F_DEADLINE | F_BEST_EFFORT
                };
                s.out_deadline.store(d + 5, Ordering::Relaxed);
                s.out_be_priority.store(7, Ordering::Relaxed);
                s.out_be_timestamp.store(d, Ordering::Relaxed);
                s.out_flags.store(flags, Ordering::Relaxed);
                s.reply_seq.store(seq, Ordering::Release);
                // SAFETY: FUTEX_WAKE on a live aligned word of the mapping.
                unsafe {
                    libc::syscall(libc::SYS_futex, s.reply_seq.as_ptr(), libc::FUTEX_WAKE, 1)
                };
                served += 1;
            }
        })
    }

    #[test]
    fn a_call_round_trips_through_the_shared_slot() {
        let p = std::env::temp_dir().join(format!("hsched-coop-fake-{}", std::process::id()));
        let d = fake_daemon(&p, 3);
        let mut lp = LivePoll::open(p.to_str().unwrap()).unwrap();
        let out = lp
            .poll_mono(&MonoParam {
                deadline: Some(100),
                best_effort: None,
            })
            .unwrap();
        assert_eq!(out.deadline, Some(105));
        assert_eq!(
            out.best_effort,
            Some(BestEffortKey {
                priority: 7,
                timestamp: 100
            })
        );
        // Through the event loop: the loop's clock is converted to
        // CLOCK_MONOTONIC and back, so OUT comes back in loop time.
        let mut clock = crate::ManualClock::new(1_000);
        let out = lp.coop_poll(
            &mut clock,
            &PollIn {
                deadline: Some(2_000),
                best_effort: None,
            },
        );
        assert_eq!(out.deadline, Some(2_005));
        assert_eq!(lp.monitor().polls(), 2);
        // A refusal turns the client non-cooperative for good.
        let r = lp.poll_mono(&MonoParam {
            deadline: Some(666),
            best_effort: None,
        });
        assert!(matches!(r, Err(LiveError::Refused)));
        let r = lp.poll_mono(&MonoParam::default());
        assert!(matches!(r, Err(LiveError::Refused)));
        d.join().unwrap();
        drop(lp);
        let _ = std::fs::remove_file(&p);
    }

    #[test]
    fn a_file_that_is_not_a_channel_is_refused() {
        let p = std::env::temp_dir().join(format!("hsched-coop-notchan-{}", std::process::id()));
        std::fs::write(&p, vec![0u8; 4096]).unwrap();
        let r = LivePoll::open(p.to_str().unwrap());
        assert!(matches!(r, Err(LiveError::Channel(_))), "{:?}", r.err());
        let _ = std::fs::remove_file(&p);
    }
}
