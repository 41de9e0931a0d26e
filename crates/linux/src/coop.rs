//! Live `coop_poll` (Sinha 2007, §2.3.2): the daemon side of the
//! shared-memory channel through which programs using `hsched-coop` reach
//! the `coop` policy. No new system call exists, so:
//!
//! - at start the daemon creates `/dev/shm/hsched-coop-<pid>` (a 64-byte
//!   header and [`NSLOTS`] slots of 128 bytes; layout in
//!   `hsched_coop::live`, which this module mirrors) and an eventfd
//!   doorbell in its epoll set, and exports the path in `HSCHED_COOP` to
//!   the programs it launches. It does so for every hierarchy, not only
//!   one that starts with a `coop` instance: a control operation
//!   (`create-scheduler`, from the file's timeline or the socket) can add
//!   one later, and the programs launched before it must already know the
//!   path (decision: always, rather than lazily). Until a client first
//!   rings the doorbell (or a request is found behind a block) the daemon
//!   does not scan the slots, so a hierarchy without cooperating programs
//!   pays nothing per pump;
//! - a client writes IN into its slot, bumps `req_seq`, rings the doorbell
//!   and waits with `FUTEX_WAIT` on `reply_seq`;
//! - [`collect`] picks requests up at the start of every pump; [`serve`]
//!   hands each to the policy as `Msg::App { kind: "coop_poll" }` through
//!   `Hsi::thread_msg`, in kernel-time order among the perf events;
//! - [`reply`] writes OUT (from the VP parameters the policy wrote when it
//!   dispatched the caller) once the caller holds a processor again, bumps
//!   `reply_seq` and `FUTEX_WAKE`s.
//!
//! Order of events: the caller's `FUTEX_WAIT` is a `sched_switch` block
//! for the observer. A request is always applied before that block: the
//! request is read before the rings are drained and merged by time, and a
//! block of a thread whose request is still unread makes [`before_block`]
//! read and apply it first. While the caller waits for its reply it is
//! *parked*: its blocks and wake-ups are the channel's, not the program's,
//! so the observer's are ignored ([`parked`]; so is a block read after the
//! reply but older than it: the same wait, its record late in the ring):
//! - a yield (a best-effort event, or an expired deadline) keeps the thread
//!   runnable in the HSI, as the thesis's `coop_poll` stays on the run
//!   queue; a parked thread that loses its processor is not frozen (it
//!   cannot run before the reply anyway);
//! - a cooperative sleep (no best-effort event, a future deadline) blocks
//!   it in the HSI right after the message (the policy counts it as a
//!   sleeper whose deadline cuts other slices) and the daemon wakes it in
//!   the HSI at its deadline ([`next_wake`], [`wake_sleepers`]), the
//!   thesis's one-shot timer.
//!
//! Policing is reported back in the slot (`policed`, `policed_blocked`)
//! with each reply: the `coop` policy writes its demotion counts into the
//! caller's VP parameters (`policed_count`, `policed_blocked`), and the
//! daemon adds what is new since the last reply. No policy trace is
//! recorded, so inputs cost nothing extra.
//!
//! Times in the file are `CLOCK_MONOTONIC` ns; the HSI's are ns since the
//! daemon's epoch (`Daemon::inst`).
// The mapping and the futex need unsafe code; each block says why it is
// sound.
#![allow(unsafe_code)]

use crate::daemon::Daemon;
use hsched_core::{Msg, ParamValue, Params};
use std::cell::Cell;
use std::collections::BTreeMap;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicI32, AtomicU32, AtomicU64, Ordering};

/// Slots in the channel file (threads that may poll at once).
pub const NSLOTS: usize = 256;
/// File magic, "HSCOOP01" little-endian (as `hsched_coop::live::MAGIC`).
const MAGIC: u64 = u64::from_le_bytes(*b"HSCOOP01");
const VERSION: u32 = 1;
const F_DEADLINE: u64 = 1;
const F_BEST_EFFORT: u64 = 2;
const F_REFUSED: u64 = 4;
/// The environment variable the launched programs read.
pub const ENV: &str = "HSCHED_COOP";

#[repr(C)]
struct Header {
    magic: AtomicU64,
    version: AtomicU32,
    nslots: AtomicU32,
    daemon_pid: AtomicI32,
    doorbell_fd: AtomicI32,
    epoch: AtomicU64,
    _pad: [u64; 4],
}

#[repr(C, align(64))]
struct Slot {
    tid: AtomicI32,
    req_seq: AtomicU32,
    reply_seq: AtomicU32,
    _pad0: u32,
    req_time: AtomicU64,
    in_flags: AtomicU64,
    in_deadline: AtomicU64,
    in_be_priority: AtomicU64,
    in_be_timestamp: AtomicU64,
    out_flags: AtomicU64,
    out_deadline: AtomicU64,
    out_be_priority: AtomicU64,
    out_be_timestamp: AtomicU64,
    reply_time: AtomicU64,
    policed: AtomicU64,
    policed_blocked: AtomicU64,
}

const fn slot_offset(i: usize) -> usize {
    std::mem::size_of::<Header>() + i * std::mem::size_of::<Slot>()
}

const _: () = assert!(std::mem::size_of::<Header>() == 64);
const _: () = assert!(std::mem::size_of::<Slot>() == 128);

/// One request read from a slot.
#[derive(Clone, Copy, Debug)]
struct Req {
    time: u64,
    slot: usize,
    tid: i32,
    seq: u32,
    deadline: Option<u64>,
    be: Option<(i64, u64)>,
}

/// A caller waiting for its reply.
#[derive(Clone, Copy, Debug)]
struct Parked {
    seq: u32,
    /// Cooperative sleep: wake it in the HSI at this `CLOCK_MONOTONIC`
    /// time (`None` once woken, or for a yield).
    wake_at: Option<u64>,
}

/// Counters of the channel.
#[derive(Clone, Copy, Debug, Default)]
pub struct CoopStats {
    /// Requests handed to the policy.
    pub polls: u64,
    /// Requests refused (unmanaged thread, or a scheduler that is not
    /// `coop`).
    pub refused: u64,
    /// Cooperative sleeps.
    pub sleeps: u64,
    /// Policing events seen.
    pub policed: u64,
}

/// The channel: the mapped file, the doorbell and the parked callers.
pub(crate) struct Channel {
    path: std::path::PathBuf,
    base: *mut u8,
    len: usize,
    doorbell: OwnedFd,
    /// Last request sequence read, per slot.
    seen: Vec<u32>,
    /// Requests read, not yet applied, in time order.
    queue: Vec<Req>,
    /// Slot index per parked tid.
    parked: BTreeMap<i32, (usize, Parked)>,
    /// Demotion counts (all, blocked) last reported per tid, from its VP
    /// parameters.
    policed_seen: BTreeMap<i32, (u64, u64)>,
    /// Whether any client has shown up: the slots are scanned at every
    /// pump only from then on.
    active: Cell<bool>,
    /// When each tid was last answered: a block of it up to then is its
    /// `FUTEX_WAIT` for that answer, read from the ring after the reply.
    replied: BTreeMap<i32, u64>,
    pub stats: CoopStats,
}

// SAFETY: the mapping is process-shared memory touched only through
// atomics; the daemon is single-threaded and `Drop` unmaps it once.
unsafe impl Send for Channel {}

/// The channel file of the daemon `pid` (also removed by its watchdog).
pub(crate) fn channel_path(pid: u32) -> std::path::PathBuf {
    std::path::PathBuf::from(format!("/dev/shm/hsched-coop-{pid}"))
}

impl Channel {
    /// Creates the channel, for every hierarchy (a `coop` instance may be
    /// created later by a control operation). The slots are
    /// scanned from the start when `h` has a `coop` instance, otherwise
    /// once a client rings the doorbell.
    ///
    /// # Errors
    /// The file, the mapping or the eventfd could not be made.
    pub fn new(h: &hsched_config::Hierarchy, epoch: u64) -> io::Result<Channel> {
        let has_coop = h.schedulers.iter().any(|s| s.policy == "coop");
        let pid = std::process::id();
        let path = channel_path(pid);
        let len = slot_offset(NSLOTS);
        let f = {
            use std::os::unix::fs::OpenOptionsExt;
            std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o600)
                .custom_flags(libc::O_CLOEXEC)
                .open(&path)?
        };
        f.set_len(len as u64)?;
        // SAFETY: a fresh shared mapping of a regular file of `len` bytes;
        // the result is checked for MAP_FAILED.
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
            let e = io::Error::last_os_error();
            let _ = std::fs::remove_file(&path);
            return Err(e);
        }
        // SAFETY: plain eventfd creation; the result is checked.
        let efd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if efd < 0 {
            let e = io::Error::last_os_error();
            // SAFETY: unmaps the mapping made above, once.
            unsafe { libc::munmap(p, len) };
            let _ = std::fs::remove_file(&path);
            return Err(e);
        }
        // SAFETY: `efd` is a fresh descriptor owned by nobody else.
        let doorbell = unsafe { OwnedFd::from_raw_fd(efd) };
        let ch = Channel {
            path,
            base: p.cast(),
            len,
            doorbell,
            seen: vec![0; NSLOTS],
            queue: Vec::new(),
            parked: BTreeMap::new(),
            policed_seen: BTreeMap::new(),
            active: Cell::new(has_coop),
            replied: BTreeMap::new(),
            stats: CoopStats::default(),
        };
        let hd = ch.header();
        hd.nslots.store(NSLOTS as u32, Ordering::Relaxed);
        hd.daemon_pid.store(pid as i32, Ordering::Relaxed);
        hd.doorbell_fd.store(efd, Ordering::Relaxed);
        hd.epoch.store(epoch, Ordering::Relaxed);
        hd.version.store(VERSION, Ordering::Relaxed);
        hd.magic.store(MAGIC, Ordering::Release);
        // Launched programs inherit it (`sys::Exec` captures the
        // environment when the program is started).
        std::env::set_var(ENV, &ch.path);
        Ok(ch)
    }

    /// The doorbell descriptor (for the epoll set).
    pub fn doorbell_fd(&self) -> i32 {
        self.doorbell.as_raw_fd()
    }

    fn header(&self) -> &Header {
        // SAFETY: the mapping is `len >= 64` bytes, page-aligned, atomics
        // only, alive as long as `self`.
        unsafe { &*(self.base as *const Header) }
    }

    fn slot(&self, i: usize) -> &Slot {
        assert!(slot_offset(i + 1) <= self.len);
        // SAFETY: in bounds (asserted), 64-byte aligned, atomics only,
        // alive as long as `self`.
        unsafe { &*(self.base.add(slot_offset(i)) as *const Slot) }
    }

    /// Empties the doorbell (level-triggered epoll would fire again); a
    /// client exists from now on, so the slots are scanned at every pump.
    pub fn clear_doorbell(&self) {
        self.active.set(true);
        let mut b = [0u8; 8];
        // SAFETY: reads at most 8 bytes into a live local buffer from a
        // non-blocking eventfd; EAGAIN is fine.
        unsafe { libc::read(self.doorbell.as_raw_fd(), b.as_mut_ptr().cast(), 8) };
    }

    /// Reads new requests into the queue (time order).
    fn read_requests(&mut self) {
        let mut added = false;
        for i in 0..NSLOTS {
            let s = self.slot(i);
            let seq = s.req_seq.load(Ordering::Acquire);
            if seq == self.seen[i] || seq == s.reply_seq.load(Ordering::Relaxed) {
                self.seen[i] = seq;
                continue;
            }
            let flags = s.in_flags.load(Ordering::Relaxed);
            let r = Req {
                time: s.req_time.load(Ordering::Relaxed),
                slot: i,
                tid: s.tid.load(Ordering::Relaxed),
                seq,
                deadline: (flags & F_DEADLINE != 0).then(|| s.in_deadline.load(Ordering::Relaxed)),
                be: (flags & F_BEST_EFFORT != 0).then(|| {
                    (
                        s.in_be_priority.load(Ordering::Relaxed) as i64,
                        s.in_be_timestamp.load(Ordering::Relaxed),
                    )
                }),
            };
            self.seen[i] = seq;
            self.queue.push(r);
            added = true;
        }
        if added {
            self.active.set(true);
        }
        if added {
            self.queue.sort_by_key(|r| (r.time, r.slot));
        }
    }

    /// Writes OUT, publishes the reply and wakes the caller; returns the
    /// time of the reply (before the wake-up).
    fn answer(&self, slot: usize, seq: u32, flags: u64, out: [u64; 3]) -> u64 {
        let s = self.slot(slot);
        let now = crate::sys::now_ns();
        s.out_deadline.store(out[0], Ordering::Relaxed);
        s.out_be_priority.store(out[1], Ordering::Relaxed);
        s.out_be_timestamp.store(out[2], Ordering::Relaxed);
        s.out_flags.store(flags, Ordering::Relaxed);
        s.reply_time.store(now, Ordering::Relaxed);
        s.reply_seq.store(seq, Ordering::Release);
        // SAFETY: FUTEX_WAKE on a live, aligned 32-bit word of the shared
        // mapping (not private: the waiter is another process); it only
        // wakes waiters.
        unsafe {
            libc::syscall(
                libc::SYS_futex,
                s.reply_seq.as_ptr(),
                libc::FUTEX_WAKE,
                i32::MAX,
            )
        };
        now
    }
}

impl Drop for Channel {
    fn drop(&mut self) {
        // Release every waiter: the daemon is leaving.
        let parked: Vec<(usize, Parked)> = self.parked.values().copied().collect();
        for (slot, p) in parked {
            let _ = self.answer(slot, p.seq, F_REFUSED, [0; 3]);
        }
        // SAFETY: the mapping made in `new`, unmapped once; no reference
        // into it outlives `self`.
        unsafe { libc::munmap(self.base.cast(), self.len) };
        let _ = std::fs::remove_file(&self.path);
        if std::env::var_os(ENV).is_some_and(|v| v == self.path.as_os_str()) {
            std::env::remove_var(ENV);
        }
    }
}

/// Reads new requests (start of a pump, before the rings are drained: a
/// request is then never newer than the events read after it).
pub(crate) fn collect(d: &mut Daemon) {
    if let Some(ch) = d.coop.as_mut() {
        if ch.active.get() {
            ch.read_requests();
        }
    }
}

/// Applies the queued requests made at or before `until` (kernel time).
pub(crate) fn serve(d: &mut Daemon, until: u64) {
    loop {
        let Some(ch) = d.coop.as_mut() else { return };
        match ch.queue.first() {
            Some(r) if r.time <= until => {
                let r = ch.queue.remove(0);
                apply(d, r);
            }
            _ => return,
        }
    }
}

/// A block of `tid` is about to be applied: first apply its request if it
/// made one (it blocks in `FUTEX_WAIT` right after). Returns whether the
/// block belongs to the channel and is to be ignored.
pub(crate) fn before_block(d: &mut Daemon, tid: i32, time: u64) -> bool {
    let Some(ch) = d.coop.as_mut() else {
        return false;
    };
    if ch.parked.contains_key(&tid) || ch.replied.get(&tid).is_some_and(|&t| time <= t) {
        return true;
    }
    if !ch.queue.iter().any(|r| r.tid == tid) {
        ch.read_requests();
    }
    let Some(ch) = d.coop.as_mut() else {
        return false;
    };
    if let Some(k) = ch.queue.iter().position(|r| r.tid == tid && r.time <= time) {
        let r = ch.queue.remove(k);
        apply(d, r);
    }
    parked(d, tid)
}

/// Whether `tid` waits for a reply (its blocks and wake-ups are the
/// channel's, and it must not be frozen: it cannot run before the reply).
pub(crate) fn parked(d: &Daemon, tid: i32) -> bool {
    d.coop
        .as_ref()
        .is_some_and(|ch| ch.parked.contains_key(&tid))
}

/// The earliest cooperative-sleep wake-up, `CLOCK_MONOTONIC` ns.
pub(crate) fn next_wake(d: &Daemon) -> Option<u64> {
    d.coop
        .as_ref()?
        .parked
        .values()
        .filter_map(|(_, p)| p.wake_at)
        .min()
}

/// Wakes, in the HSI, the cooperative sleepers whose deadline has come.
pub(crate) fn wake_sleepers(d: &mut Daemon, now: u64) {
    let Some(ch) = d.coop.as_mut() else { return };
    let mut due = Vec::new();
    for (tid, (_, p)) in ch.parked.iter_mut() {
        if let Some(w) = p.wake_at.filter(|&w| w <= now) {
            p.wake_at = None;
            due.push((*tid, w));
        }
    }
    for (tid, w) in due {
        let Some(m) = d.threads.get(&tid) else {
            continue;
        };
        let t = m.hsi;
        if !d.hsi.thread_runnable(t) {
            let at = d.inst(w);
            if let Err(e) = d.hsi.wake(at, t) {
                d.protocol_error(e);
            }
        }
    }
}

fn ns_i64(x: u64) -> i64 {
    i64::try_from(x).unwrap_or(i64::MAX)
}

/// Hands one request to the policy.
fn apply(d: &mut Daemon, r: Req) {
    let Some(m) = d.threads.get_mut(&r.tid) else {
        if let Some(ch) = d.coop.as_mut() {
            ch.stats.refused += 1;
            let _ = ch.answer(r.slot, r.seq, F_REFUSED, [0; 3]);
        }
        return;
    };
    m.last_event = m.last_event.max(r.time);
    let t = m.hsi;
    let now = d.inst(r.time).max(d.hsi.now());
    let epoch = d.epoch;
    let mut p = Params::new();
    if let Some(dl) = r.deadline {
        p.insert(
            "deadline",
            ParamValue::Int(ns_i64(dl.saturating_sub(epoch))),
        );
    }
    if let Some((prio, ts)) = r.be {
        p.insert("be_priority", ParamValue::Int(prio));
        p.insert(
            "be_timestamp",
            ParamValue::Int(ns_i64(ts.saturating_sub(epoch))),
        );
    }
    let msg = Msg::App {
        kind: "coop_poll".into(),
        params: p,
    };
    // The thread is running (it made the call): a wake-up not yet seen
    // must not make the policy police a poll of a "blocked" thread.
    if !d.hsi.thread_runnable(t) {
        if let Err(e) = d.hsi.wake(now, t) {
            d.protocol_error(e);
        }
    }
    let res = d.hsi.thread_msg(now, t, &msg);
    if d.debug {
        crate::diag!(
            "[{}] coop_poll {} deadline {:?} be {:?}: {:?}",
            now.0,
            r.tid,
            r.deadline.map(|x| d.inst(x).0),
            r.be.map(|b| b.0),
            res.as_ref().err()
        );
    }
    let sleep = r.be.is_none() && r.deadline.is_some_and(|dl| d.inst(dl) > now);
    let Some(ch) = d.coop.as_mut() else { return };
    if res.is_err() {
        ch.stats.refused += 1;
        let _ = ch.answer(r.slot, r.seq, F_REFUSED, [0; 3]);
        return;
    }
    ch.stats.polls += 1;
    let wake_at = if sleep {
        ch.stats.sleeps += 1;
        r.deadline
    } else {
        None
    };
    ch.parked.insert(
        r.tid,
        (
            r.slot,
            Parked {
                seq: r.seq,
                wake_at,
            },
        ),
    );
    if sleep && d.hsi.thread_runnable(t) {
        if let Err(e) = d.hsi.block(now, t) {
            d.protocol_error(e);
        }
    }
}

/// After the dispatch is enforced: answers every parked caller that holds
/// a processor again (OUT and the policing counts from its VP parameters).
pub(crate) fn reply(d: &mut Daemon) {
    let Some(mut ch) = d.coop.take() else { return };
    if d.debug {
        // The HSI records its trace only for HSCHED_LIVE_DEBUG: print it.
        let mut t = Vec::new();
        d.hsi.drain_trace(&mut t);
        for e in &t {
            crate::diag!("[{}] trace {:?}", e.at.0, e.kind);
        }
    }
    if ch.parked.is_empty() {
        d.coop = Some(ch);
        return;
    }
    let done: Vec<(i32, usize, Parked)> = ch
        .parked
        .iter()
        .map(|(&tid, &(slot, p))| (tid, slot, p))
        .filter(|&(tid, _, _)| !d.threads.contains_key(&tid) || d.running.contains(&Some(tid)))
        .collect();
    for (tid, slot, p) in done {
        ch.parked.remove(&tid);
        let Some(m) = d.threads.get(&tid) else {
            ch.policed_seen.remove(&tid);
            continue;
        };
        let params = d.hsi.vp_params(d.hsi.thread_vp(m.hsi));
        let mono = |k: &str| {
            params
                .get(k)
                .and_then(|v| match v {
                    ParamValue::Int(x) => Some(*x),
                    _ => None,
                })
                .map(|x| u64::try_from(x).unwrap_or(0).saturating_add(d.epoch))
        };
        let mut flags = 0;
        let mut out = [0u64; 3];
        if let Some(dl) = mono("out_deadline") {
            flags |= F_DEADLINE;
            out[0] = dl;
        }
        if let Some(ParamValue::Int(prio)) = params.get("out_be_priority") {
            flags |= F_BEST_EFFORT;
            out[1] = *prio as u64;
            out[2] = mono("out_be_timestamp").unwrap_or(0);
        }
        if d.debug {
            crate::diag!(
                "[{}] coop reply {tid} yield by {}",
                crate::sys::now_ns().saturating_sub(d.epoch),
                out[0].saturating_sub(d.epoch)
            );
        }
        let count = |k: &str| match params.get(k) {
            Some(ParamValue::Int(x)) => u64::try_from(*x).unwrap_or(0),
            _ => 0,
        };
        let now = (count("policed_count"), count("policed_blocked"));
        let was = ch.policed_seen.insert(tid, now).unwrap_or((0, 0));
        // A new VP (the thread moved) starts its counts again.
        let new = if now.0 >= was.0 {
            (now.0 - was.0, now.1.saturating_sub(was.1))
        } else {
            now
        };
        if new.0 > 0 {
            if d.debug {
                crate::diag!(
                    "[coop] {tid} policed {:?} x{}",
                    params.get("policed"),
                    new.0
                );
            }
            ch.stats.policed += new.0;
            let s = ch.slot(slot);
            if s.tid.load(Ordering::Relaxed) == tid {
                s.policed_blocked.fetch_add(new.1, Ordering::AcqRel);
                s.policed.fetch_add(new.0, Ordering::AcqRel);
            }
        }
        let at = ch.answer(slot, p.seq, flags, out);
        ch.replied.insert(tid, at);
    }
    d.coop = Some(ch);
}
