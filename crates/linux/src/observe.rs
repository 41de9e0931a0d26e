//! Observing managed threads without modifying them: perf events on the
//! scheduler tracepoints, one ring buffer per online CPU.
//!
//! Each managed thread that was launched or attached gets one perf event per
//! tracepoint and online CPU (`pid = tid`, `cpu = c`, `inherit = 1`), so
//! every thread and process it creates later is followed by the kernel
//! itself, atomically at `clone`. All events of CPU `c` write into the ring
//! buffer of one dummy event on `c`. Sample times use `CLOCK_MONOTONIC`, the
//! daemon's clock, so the notification latency is `now - sample time`.
//!
//! What each record means for the HSI:
//! - `sched_switch` with the managed thread as `prev` and a sleeping state
//!   (S, D, T, ...): the thread blocked. A preempted or frozen thread
//!   reports state R and is not a block; a kernel filter keeps those out
//!   ([`SWITCH_FILTER`]).
//! - `sched_wakeup` / `sched_wakeup_new`: the thread became runnable. The
//!   kernel delivers it to the woken thread's events (`__perf_task`) whose
//!   CPU is the CPU the wake-up runs on, which may be any online CPU (the
//!   waker's), hence events on every online CPU, not only managed ones.
//! - `PERF_RECORD_SWITCH` switch-out with the preempt flag: the thread
//!   left its CPU runnable; for a granted thread it starts a stretch its
//!   grant did not reach it (daemon.rs, `lost_ns`).
//! - `PERF_RECORD_SWITCH` switch-in (`context_switch` on the switch event):
//!   the thread is on a CPU, so it is runnable. Written in the thread's own
//!   context, it carries the wake-ups whose sample the kernel drops: on
//!   this kernel (6.18) a tracepoint firing in the idle task's context
//!   (a timer interrupt on an idle CPU, a remote wake-up queued to an idle
//!   CPU) writes no perf sample, although ftrace records it. The daemon
//!   reads those from ftrace ([`crate::ftrace`]); without it the
//!   switch-in record tells, late because it does not wake the reader.
//! - `sched_process_fork`: a managed thread created a thread or process.
//! - `sched_process_exit`: a managed thread exited.
//! - `task:task_rename` (`pid`), followed only when the hierarchy has
//!   `[[rule]]`s: a managed thread renamed thread `pid` (its own name with
//!   `prctl`, or a sibling's through `/proc`); `execve` renames too.
//! - `sched_process_exec` (`pid`, `old_pid`): a managed thread called
//!   `execve`. From a thread other than the leader, `de_thread` has killed
//!   the other threads (the old leader's exit is recorded before) and the
//!   caller has taken over the leader's pid: `old_pid` names it no more,
//!   `pid` from now on. Its perf events stay with the task.
//! - `signal:signal_generate` (one system-wide event per online CPU, not per
//!   thread: the sender may be any process on any CPU): a signal that may be
//!   fatal by default was sent to some thread. A thread frozen by the v1
//!   freezer does not act on it until thawed, so the daemon checks the
//!   target's frozen threads for a fatal pending signal (daemon.rs
//!   `check_group`). A tracepoint filter keeps out of the ring the signals
//!   whose default action is to ignore, stop or continue (`SIGCHLD` above
//!   all), those the target ignores, and those sent to processes hsched
//!   does not manage ([`Observer::set_signal_targets`]).

use crate::sys::{self, PerfEventAttr, PerfRing};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};

/// One observed event, in kernel time (`CLOCK_MONOTONIC` ns).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// `tid` went off a CPU in a sleeping state (it blocked, or the freezer
    /// parked it: [`STATE_INTERRUPTIBLE`] tells its own sleeps).
    Block {
        /// When.
        time: u64,
        /// The thread.
        tid: i32,
        /// The reported state bits (1 = S, 2 = D, 4 = T, ...).
        state: u64,
    },
    /// `tid` was woken (or, `new`, started for the first time).
    Wake {
        /// When.
        time: u64,
        /// The thread.
        tid: i32,
        /// First wake-up of a new thread.
        new: bool,
    },
    /// `parent` created `child`.
    Fork {
        /// When.
        time: u64,
        /// The creating thread.
        parent: i32,
        /// The new thread or process.
        child: i32,
    },
    /// `tid` was switched in: it is runnable, whether or not its wake-up
    /// was seen (`PERF_RECORD_SWITCH`, written in the thread's own context).
    Run {
        /// When.
        time: u64,
        /// The thread.
        tid: i32,
    },
    /// `tid` went off its CPU still runnable: preempted
    /// (`PERF_RECORD_SWITCH` switch-out with the preempt flag).
    Preempt {
        /// When.
        time: u64,
        /// The thread.
        tid: i32,
    },
    /// `tid` exited.
    Exit {
        /// When.
        time: u64,
        /// The thread.
        tid: i32,
    },
    /// The thread `old_pid` called `execve` and is now thread `pid` (the
    /// same tid, unless a thread other than the leader did).
    Exec {
        /// When.
        time: u64,
        /// The thread's tid from now on (its process's pid).
        pid: i32,
        /// Its tid before the `execve`.
        old_pid: i32,
    },
    /// Thread `tid` was given a new name (`task_rename`).
    Rename {
        /// When.
        time: u64,
        /// The renamed thread.
        tid: i32,
    },
    /// Signal `sig` was sent to thread `pid` (or to its process).
    Signal {
        /// When.
        time: u64,
        /// The target thread named by the sender (the group leader for
        /// `kill`).
        pid: i32,
        /// The signal.
        sig: i32,
    },
}

impl Event {
    /// The kernel time of the event.
    pub fn time(&self) -> u64 {
        match *self {
            Event::Block { time, .. }
            | Event::Wake { time, .. }
            | Event::Fork { time, .. }
            | Event::Run { time, .. }
            | Event::Preempt { time, .. }
            | Event::Exit { time, .. }
            | Event::Exec { time, .. }
            | Event::Rename { time, .. }
            | Event::Signal { time, .. } => time,
        }
    }
}

#[derive(Clone, Copy, Debug, Default)]
struct Tp {
    id: u64,
    /// Field offsets inside the raw record.
    a: usize,
    b: usize,
}

/// Ids and field offsets of the tracepoints, read from tracefs.
#[derive(Clone, Copy, Debug, Default)]
pub struct Tracepoints {
    switch: Tp, // a = prev_pid, b = prev_state
    wakeup: Tp, // a = pid
    wakeup_new: Tp,
    fork: Tp, // a = parent_pid, b = child_pid
    exit: Tp, // a = pid
    exec: Tp, // a = pid, b = old_pid
    /// `signal:signal_generate`, when the kernel has it: a = pid, b = sig.
    signal: Option<Tp>,
    /// `task:task_rename` when followed (see [`Observer::new`]): a = pid.
    rename: Option<Tp>,
}

/// The `signal:signal_generate` filter for every target: only signals whose
/// default action ends the process (every one but `SIGCHLD`, `SIGCONT`,
/// `SIGURG`, `SIGWINCH` and the four stop signals), and not those the
/// kernel reports as ignored (`result` 1, `TRACE_SIGNAL_IGNORED`).
pub const SIGNAL_FILTER: &str = "result != 1 && sig != 17 && sig != 18 && sig != 19 && sig != 20 && sig != 21 && sig != 22 && sig != 23 && sig != 28";

/// `sched_switch`'s `prev_state` for an interruptible sleep (S): a thread's
/// own wait (a timer, a futex, a read). The cgroup freezer parks a thread
/// uninterruptibly (D, 2), which is how a freeze's switch-out is told from
/// a sleep that began as the freeze was asked for.
pub const STATE_INTERRUPTIBLE: u64 = 1;

/// The `sched_switch` filter: only switch-outs in a sleeping state (a
/// block). A preempted thread reports 0 or `TASK_REPORT_MAX` (0x100 and
/// above), and each such sample would wake the daemon for nothing:
/// preemptions are read from the `PERF_RECORD_SWITCH` switch-out records
/// instead, which do not wake the reader. (A thread entering the freezer
/// reports a sleep; daemon.rs tells those from blocks.)
pub const SWITCH_FILTER: &str = "prev_state > 0 && prev_state < 256";

/// The tracefs mount point, mounting it at `/sys/kernel/tracing` if needed.
///
/// # Errors
/// Not found and could not be mounted.
pub fn tracefs() -> io::Result<PathBuf> {
    let mut denied = None;
    for p in ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"] {
        match std::fs::metadata(Path::new(p).join("events/sched/sched_switch/id")) {
            Ok(_) => return Ok(p.into()),
            Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
                denied.get_or_insert(p);
            }
            Err(_) => {}
        }
    }
    if let Some(p) = denied {
        // Mounting would fail the same way: say what is missing.
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!("{p} cannot be read without root (permission denied)"),
        ));
    }
    let ok = std::process::Command::new("mount")
        .args(["-t", "tracefs", "nodev", "/sys/kernel/tracing"])
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if ok && Path::new("/sys/kernel/tracing/events/sched/sched_switch/id").exists() {
        return Ok("/sys/kernel/tracing".into());
    }
    Err(io::Error::new(io::ErrorKind::NotFound, "tracefs with the sched tracepoints is not available (mount -t tracefs nodev /sys/kernel/tracing)"))
}

fn read_tp(root: &Path, name: &str, fields: [&str; 2]) -> io::Result<Tp> {
    read_tp_in(root, "sched", name, fields)
}

fn read_tp_in(root: &Path, system: &str, name: &str, fields: [&str; 2]) -> io::Result<Tp> {
    let dir = root.join("events").join(system).join(name);
    let id: u64 = std::fs::read_to_string(dir.join("id"))?
        .trim()
        .parse()
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, format!("bad id for {name}")))?;
    let format = std::fs::read_to_string(dir.join("format"))?;
    let mut off = [usize::MAX; 2];
    for (k, f) in fields.iter().enumerate() {
        if let Some(o) = field_offset(&format, f) {
            off[k] = o;
        }
    }
    if off[0] == usize::MAX || (!fields[1].is_empty() && off[1] == usize::MAX) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("tracepoint {name} lacks the fields {fields:?}"),
        ));
    }
    Ok(Tp {
        id,
        a: off[0],
        b: off[1],
    })
}

/// The offset of field `name` in a tracefs `format` text.
pub(crate) fn field_offset(format: &str, name: &str) -> Option<usize> {
    format.lines().find_map(|line| {
        let decl = line.trim().strip_prefix("field:")?;
        let (decl, rest) = decl.split_once(';')?;
        (decl.rsplit(' ').next()? == name).then_some(())?;
        rest.split_once("offset:")?
            .1
            .split(';')
            .next()?
            .trim()
            .parse()
            .ok()
    })
}

/// The longest id list [`id_filter`] writes (the kernel copies at most a
/// page): about 170 scattered ids exactly, any number in a few runs.
const MAX_FILTER: usize = 3_000;

/// A filter matching field `pid` equal to one of `ids` (sorted,
/// deduplicated), runs of consecutive ids written as ranges (threads
/// created in a row get consecutive ids). When that list is too long for
/// a filter, the runs
/// separated by the narrowest gaps are merged into wider ranges until it
/// fits: the filter then also matches some ids that are no targets, whose
/// records the daemon drops, but never misses a target. No id: a filter
/// that matches nothing (pid 0 is never a target).
pub fn id_filter(ids: &[i32]) -> String {
    if ids.is_empty() {
        return "pid == 0".into();
    }
    let runs = runs_of(ids);
    if runs_len(&runs, "pid") <= MAX_FILTER {
        return render_runs(&runs, "pid");
    }
    // The widest gaps stay: keep as many as fit (one range always fits).
    let mut gaps: Vec<(i64, usize)> = runs
        .windows(2)
        .enumerate()
        .map(|(i, w)| (i64::from(w[1].0) - i64::from(w[0].1), i))
        .collect();
    gaps.sort_unstable_by(|a, b| b.cmp(a));
    let merged = |keep: usize| -> Vec<(i32, i32)> {
        let mut cut: Vec<usize> = gaps[..keep].iter().map(|g| g.1).collect();
        cut.sort_unstable();
        let mut out = Vec::with_capacity(keep + 1);
        let mut start = runs[0].0;
        for &c in &cut {
            out.push((start, runs[c].1));
            start = runs[c + 1].0;
        }
        out.push((start, runs[runs.len() - 1].1));
        out
    };
    let (mut lo, mut hi) = (0, gaps.len());
    while lo < hi {
        let mid = (lo + hi).div_ceil(2);
        if runs_len(&merged(mid), "pid") <= MAX_FILTER {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    render_runs(&merged(lo), "pid")
}

/// A filter matching `field` equal to exactly one of `ids` (sorted,
/// deduplicated, not empty), runs written as ranges; `None` when that is
/// longer than [`id_filter`]'s limit, where it would merge runs and so
/// also match other ids.
pub fn exact_id_filter(ids: &[i32], field: &str) -> Option<String> {
    let runs = runs_of(ids);
    (!runs.is_empty() && runs_len(&runs, field) <= MAX_FILTER).then(|| render_runs(&runs, field))
}

/// `ids` (sorted, deduplicated) as runs of consecutive ids, inclusive.
fn runs_of(ids: &[i32]) -> Vec<(i32, i32)> {
    let mut runs: Vec<(i32, i32)> = Vec::new();
    for &id in ids {
        match runs.last_mut() {
            Some(r) if id == r.1.saturating_add(1) => r.1 = id,
            _ => runs.push((id, id)),
        }
    }
    runs
}

/// The length of [`render_runs`]'s text, without writing it.
fn runs_len(runs: &[(i32, i32)], field: &str) -> usize {
    let f = field.len();
    let digits = |v: i32| {
        v.unsigned_abs()
            .checked_ilog10()
            .map_or(1, |l| l as usize + 1)
            + usize::from(v < 0)
    };
    let terms: usize = runs
        .iter()
        .map(|&(a, b)| match i64::from(b) - i64::from(a) {
            0 => f + 4 + digits(a),
            1 => 2 * f + 12 + digits(a) + digits(b),
            _ => 2 * f + 14 + digits(a) + digits(b),
        })
        .sum();
    terms + 4 * runs.len().saturating_sub(1)
}

/// `runs` (inclusive, ascending) as `field` terms joined by `||`.
fn render_runs(runs: &[(i32, i32)], field: &str) -> String {
    let terms: Vec<String> = runs
        .iter()
        .map(|&(a, b)| match i64::from(b) - i64::from(a) {
            0 => format!("{field} == {a}"),
            1 => format!("{field} == {a} || {field} == {b}"),
            _ => format!("({field} >= {a} && {field} <= {b})"),
        })
        .collect();
    terms.join(" || ")
}

/// The filter for signals to the targets `ids` (thread ids as the sender
/// names them: a process id for `kill`, a thread id for `tgkill`).
pub fn signal_filter(ids: &[i32]) -> String {
    if ids.is_empty() {
        return "pid == 0".into();
    }
    format!("({}) && {SIGNAL_FILTER}", id_filter(ids))
}

impl Tracepoints {
    /// Reads the tracepoints from tracefs.
    ///
    /// # Errors
    /// tracefs missing or a format not as expected.
    pub fn load() -> io::Result<Tracepoints> {
        let root = tracefs()?;
        Ok(Tracepoints {
            switch: read_tp(&root, "sched_switch", ["prev_pid", "prev_state"])?,
            wakeup: read_tp(&root, "sched_wakeup", ["pid", ""])?,
            wakeup_new: read_tp(&root, "sched_wakeup_new", ["pid", ""])?,
            fork: read_tp(&root, "sched_process_fork", ["parent_pid", "child_pid"])?,
            exit: read_tp(&root, "sched_process_exit", ["pid", ""])?,
            exec: read_tp(&root, "sched_process_exec", ["pid", "old_pid"])?,
            signal: read_tp_in(&root, "signal", "signal_generate", ["pid", "sig"]).ok(),
            rename: read_tp_in(&root, "task", "task_rename", ["pid", ""]).ok(),
        })
    }

    /// Every tracepoint's id, `signal_generate`'s included.
    fn ids(&self) -> Vec<u64> {
        self.per_thread().chain(self.signal.map(|t| t.id)).collect()
    }

    /// The tracepoints followed per thread: [`Observer::follow`] opens
    /// one event per tracepoint and online CPU.
    fn per_thread(&self) -> impl Iterator<Item = u64> {
        [
            self.switch.id,
            self.wakeup.id,
            self.wakeup_new.id,
            self.fork.id,
            self.exit.id,
            self.exec.id,
        ]
        .into_iter()
        .chain(self.rename.map(|t| t.id))
    }

    /// Decodes one `PERF_RECORD_SWITCH` body: a switch-in, or a switch-out
    /// while runnable (preempted), of the thread named by the `sample_id`
    /// trailer (TID, TIME with [`sys::SAMPLE_TYPE`]).
    pub fn decode_switch(misc: u16, body: &[u8]) -> Option<Event> {
        if body.len() < 16 {
            return None;
        }
        let tid = i32::from_ne_bytes(body[4..8].try_into().ok()?);
        let time = u64::from_ne_bytes(body[8..16].try_into().ok()?);
        if misc & sys::PERF_RECORD_MISC_SWITCH_OUT == 0 {
            Some(Event::Run { time, tid })
        } else if misc & sys::PERF_RECORD_MISC_SWITCH_OUT_PREEMPT != 0 {
            Some(Event::Preempt { time, tid })
        } else {
            None
        }
    }

    /// Decodes one `PERF_RECORD_SAMPLE` body.
    pub fn decode(&self, body: &[u8]) -> Option<Event> {
        // TID (pid, tid), TIME, CPU (cpu, res), RAW (size, data)
        if body.len() < 28 {
            return None;
        }
        let u32_at = |b: &[u8], o: usize| {
            b.get(o..o + 4)
                .map(|s| u32::from_ne_bytes([s[0], s[1], s[2], s[3]]))
        };
        let time = u64::from_ne_bytes(body[8..16].try_into().ok()?);
        let raw_size = u32_at(body, 24)? as usize;
        let raw = body.get(28..28 + raw_size)?;
        let ty = u16::from_ne_bytes([*raw.first()?, *raw.get(1)?]) as u64;
        let i32_at = |o: usize| u32_at(raw, o).map(|v| v as i32);
        if ty == self.switch.id {
            let tid = i32_at(self.switch.a)?;
            let state = raw
                .get(self.switch.b..self.switch.b + 8)
                .map(|s| u64::from_ne_bytes(s.try_into().unwrap_or([0; 8])))?;
            // 0: running (preempted or frozen); TASK_REPORT_MAX (0x100 and
            // above): preempted. Anything else is a sleep. The filter
            // ([`SWITCH_FILTER`]) keeps the others out of the ring.
            if state == 0 || state >= 0x100 {
                return None;
            }
            Some(Event::Block { time, tid, state })
        } else if ty == self.wakeup.id || ty == self.wakeup_new.id {
            Some(Event::Wake {
                time,
                tid: i32_at(self.wakeup.a)?,
                new: ty == self.wakeup_new.id,
            })
        } else if ty == self.fork.id {
            Some(Event::Fork {
                time,
                parent: i32_at(self.fork.a)?,
                child: i32_at(self.fork.b)?,
            })
        } else if ty == self.exit.id {
            Some(Event::Exit {
                time,
                tid: i32_at(self.exit.a)?,
            })
        } else if ty == self.exec.id {
            Some(Event::Exec {
                time,
                pid: i32_at(self.exec.a)?,
                old_pid: i32_at(self.exec.b)?,
            })
        } else if let Some(rn) = self.rename.filter(|rn| ty == rn.id) {
            Some(Event::Rename {
                time,
                tid: i32_at(rn.a)?,
            })
        } else if let Some(sg) = self.signal.filter(|sg| ty == sg.id) {
            Some(Event::Signal {
                time,
                pid: i32_at(sg.a)?,
                sig: i32_at(sg.b)?,
            })
        } else {
            None
        }
    }
}

/// The per-CPU ring buffers and the per-task events writing into them.
pub struct Observer {
    tps: Tracepoints,
    /// (cpu, owner event, ring)
    rings: Vec<(usize, OwnedFd, PerfRing)>,
    /// Records the kernel dropped (buffer full).
    pub lost: u64,
    /// Samples read.
    pub samples: u64,
    /// Context-switch records read.
    pub switches: u64,
    /// The system-wide `signal_generate` events (one per ring), empty when
    /// they could not be opened.
    signal_fds: Vec<OwnedFd>,
    /// Why the signal events are missing, if they are.
    pub signal_error: Option<String>,
    /// `signal_generate` records read.
    pub signals: u64,
    /// The targets the signal filter lists now (`None`: every target).
    signal_targets: Option<Vec<i32>>,
    /// Whether the signal events are paused ([`Observer::pause_signals`]).
    pub signals_paused: bool,
    /// Filter updates made.
    pub filter_updates: u64,
    /// One disabled event per followed tracepoint, on the daemon's own
    /// thread, held for the Observer's life (see [`Observer::new`]).
    _anchors: Vec<OwnedFd>,
}

fn base_attr() -> PerfEventAttr {
    PerfEventAttr {
        sample_period: 1,
        sample_type: sys::SAMPLE_TYPE,
        flags: sys::FLAG_USE_CLOCKID,
        clockid: libc::CLOCK_MONOTONIC,
        wakeup_events: 1,
        ..Default::default()
    }
}

/// A disabled perf event on tracepoint `id`, on the calling thread: while
/// it is open the tracepoint stays registered, so closing every other event
/// on it costs no RCU grace period (see [`Observer::new`]). `None` where
/// perf refuses it.
pub fn anchor(id: u64) -> Option<OwnedFd> {
    let attr = PerfEventAttr {
        type_: sys::PERF_TYPE_TRACEPOINT,
        config: id,
        flags: sys::FLAG_USE_CLOCKID | sys::FLAG_DISABLED,
        ..base_attr()
    };
    sys::perf_event_open(&attr, 0, -1).ok()
}

impl Observer {
    /// The ids of the tracepoints this observer's events are on.
    pub fn tracepoint_ids(&self) -> Vec<u64> {
        self.tps.ids()
    }

    /// One ring buffer (`2^order` pages) on each of `cpus`; `renames`:
    /// also follow `task_rename` (one more event per thread and CPU, so
    /// only for hierarchies whose `[[rule]]`s match names).
    ///
    /// # Errors
    /// tracefs or perf events unavailable, or not permitted.
    pub fn new(cpus: &[usize], order: u32, renames: bool) -> io::Result<Observer> {
        let mut tps = Tracepoints::load()?;
        if !renames {
            tps.rename = None;
        }
        let mut rings = Vec::new();
        for &c in cpus {
            let attr = PerfEventAttr {
                type_: sys::PERF_TYPE_SOFTWARE,
                config: sys::PERF_COUNT_SW_DUMMY,
                ..base_attr()
            };
            let fd = sys::perf_event_open(&attr, -1, c as i32)?;
            let ring = PerfRing::map(&fd, order)?;
            rings.push((c, fd, ring));
        }
        // Closing the last perf event of a tracepoint unregisters the
        // tracepoint, which waits for RCU grace periods in `close`: 193 ms
        // measured when the only followed program exited, up to a second
        // under load, the daemon blocked all along. One disabled event per
        // tracepoint keeps them registered (best effort: without it, only
        // that stall returns).
        let anchors = tps.ids().iter().filter_map(|&id| anchor(id)).collect();
        let (signal_fds, signal_error) = match tps
            .signal
            .ok_or("tracepoint signal:signal_generate not found".to_string())
        {
            Ok(tp) => match Self::open_wide(tp.id, &rings, SIGNAL_FILTER, false) {
                Ok(v) => (v, None),
                Err(e) => (Vec::new(), Some(format!("signal_generate {e}"))),
            },
            Err(e) => (Vec::new(), Some(e)),
        };
        Ok(Observer {
            tps,
            rings,
            lost: 0,
            samples: 0,
            switches: 0,
            signal_fds,
            signal_error,
            signals: 0,
            signal_targets: None,
            signals_paused: false,
            filter_updates: 0,
            _anchors: anchors,
        })
    }

    /// One event on tracepoint `id` per ring's CPU, in every context (`pid
    /// = -1`: the sender of a signal, the waker of a thread may be any
    /// task, the idle task included), filtered by `filter`, writing into
    /// that CPU's ring, `disabled` or not. All or nothing.
    fn open_wide(
        id: u64,
        rings: &[(usize, OwnedFd, PerfRing)],
        filter: &str,
        disabled: bool,
    ) -> Result<Vec<OwnedFd>, String> {
        let mut fds = Vec::with_capacity(rings.len());
        for (cpu, owner, _) in rings {
            let attr = PerfEventAttr {
                type_: sys::PERF_TYPE_TRACEPOINT,
                config: id,
                flags: base_attr().flags | if disabled { sys::FLAG_DISABLED } else { 0 },
                ..base_attr()
            };
            let fd = sys::perf_event_open(&attr, -1, *cpu as i32)
                .map_err(|e| format!("on CPU {cpu}: {e}"))?;
            sys::perf_set_filter(&fd, filter).map_err(|e| format!("filter: {e}"))?;
            sys::perf_set_output(&fd, owner).map_err(|e| format!("output on CPU {cpu}: {e}"))?;
            fds.push(fd);
        }
        Ok(fds)
    }

    /// Whether renames of managed threads are observed (asked for, and the
    /// kernel has `task:task_rename`).
    pub fn watches_renames(&self) -> bool {
        self.tps.rename.is_some()
    }

    /// Whether signals sent to managed threads are observed.
    pub fn watches_signals(&self) -> bool {
        !self.signal_fds.is_empty()
    }

    /// Records only signals sent to `ids` (sorted, deduplicated), when the
    /// list changed; see [`signal_filter`]. A perf event's filter can be
    /// set only once (`EEXIST`), so new events replace the old ones, opened
    /// first: a signal in between may be recorded twice, never lost.
    ///
    /// # Errors
    /// The kernel refused the new events (the previous ones stay).
    pub fn set_signal_targets(&mut self, ids: &[i32]) -> Result<(), String> {
        if self.signal_fds.is_empty() || self.signal_targets.as_deref() == Some(ids) {
            return Ok(());
        }
        let id = self.tps.signal.map_or(0, |t| t.id);
        let fds = Self::open_wide(id, &self.rings, &signal_filter(ids), self.signals_paused)
            .map_err(|e| format!("signal_generate {e}"))?;
        self.signal_fds = fds;
        self.filter_updates += 1;
        self.signal_targets = Some(ids.to_vec());
        Ok(())
    }

    /// Stops (`true`) or resumes (`false`) recording signals.
    pub fn pause_signals(&mut self, pause: bool) {
        if pause == self.signals_paused {
            return;
        }
        for fd in &self.signal_fds {
            let _ = sys::perf_enable(fd, !pause);
        }
        self.signals_paused = pause;
    }

    /// The descriptors to poll (readable when records are waiting).
    pub fn poll_fds(&self) -> Vec<RawFd> {
        self.rings.iter().map(|(_, fd, _)| fd.as_raw_fd()).collect()
    }

    /// Starts following thread `tid` and everything it creates from now on.
    /// The returned descriptors keep the events alive; dropping them stops
    /// following threads created later (already inherited ones stay).
    ///
    /// # Errors
    /// The thread is gone, or perf refused.
    pub fn follow(&self, tid: i32) -> io::Result<Vec<OwnedFd>> {
        let mut fds = Vec::with_capacity(self.rings.len() * 7);
        for (cpu, owner, _) in &self.rings {
            for id in self.tps.per_thread() {
                // The switch event also writes the thread's switch-ins
                // (`context_switch`), which are emitted in the thread's own
                // context and so survive when the wake-up sample is lost.
                let switch = if id == self.tps.switch.id {
                    sys::FLAG_CONTEXT_SWITCH | sys::FLAG_SAMPLE_ID_ALL
                } else {
                    0
                };
                let attr = PerfEventAttr {
                    type_: sys::PERF_TYPE_TRACEPOINT,
                    config: id,
                    flags: sys::FLAG_USE_CLOCKID | sys::FLAG_INHERIT | switch,
                    ..base_attr()
                };
                let fd = sys::perf_event_open(&attr, tid, *cpu as i32)?;
                if switch != 0 {
                    // Best effort: without it, those samples are decoded
                    // and dropped as before.
                    let _ = sys::perf_set_filter(&fd, SWITCH_FILTER);
                }
                sys::perf_set_output(&fd, owner)?;
                fds.push(fd);
            }
        }
        Ok(fds)
    }

    /// Appends every waiting event, in no particular order across CPUs
    /// (callers sort by time).
    pub fn drain(&mut self, out: &mut Vec<Event>) {
        let tps = self.tps;
        let mut lost = 0;
        let mut samples = 0;
        let mut switches = 0;
        let mut signals = 0;
        for (_, _, ring) in &mut self.rings {
            ring.drain_misc(|ty, misc, body| match ty {
                sys::PERF_RECORD_SAMPLE => {
                    samples += 1;
                    if let Some(e) = tps.decode(body) {
                        signals += u64::from(matches!(e, Event::Signal { .. }));
                        out.push(e);
                    }
                }
                sys::PERF_RECORD_SWITCH => {
                    switches += 1;
                    if let Some(e) = Tracepoints::decode_switch(misc, body) {
                        out.push(e);
                    }
                }
                sys::PERF_RECORD_LOST if body.len() >= 16 => {
                    lost += u64::from_ne_bytes(body[8..16].try_into().unwrap_or([0; 8]));
                }
                _ => {}
            });
        }
        self.lost += lost;
        self.samples += samples;
        self.switches += switches;
        self.signals += signals;
    }
}

#[cfg(test)]
mod switch_tests {
    use super::*;

    fn body(pid: u32, tid: u32, time: u64) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(&pid.to_ne_bytes());
        b.extend_from_slice(&tid.to_ne_bytes());
        b.extend_from_slice(&time.to_ne_bytes());
        b.extend_from_slice(&[0; 8]); // cpu, res
        b
    }

    #[test]
    fn the_signal_filter_lists_its_targets() {
        assert_eq!(signal_filter(&[]), "pid == 0");
        assert_eq!(
            signal_filter(&[12, 345]),
            format!("(pid == 12 || pid == 345) && {SIGNAL_FILTER}")
        );
        // Consecutive ids are one range, however many.
        let run: Vec<i32> = (100_000..100_300).collect();
        assert_eq!(
            signal_filter(&run),
            format!("((pid >= 100000 && pid <= 100299)) && {SIGNAL_FILTER}")
        );
    }

    #[test]
    fn the_id_filter_writes_runs_as_ranges() {
        assert_eq!(
            id_filter(&[3, 5, 6, 8, 9, 10, 11]),
            "pid == 3 || pid == 5 || pid == 6 || (pid >= 8 && pid <= 11)"
        );
        for runs in [
            &[(3, 3), (5, 6), (8, 11)][..],
            &[
                (-12, -12),
                (0, 0),
                (9, 10),
                (99, 100_000),
                (i32::MAX, i32::MAX),
            ],
        ] {
            for field in ["pid", "common_pid"] {
                assert_eq!(
                    runs_len(runs, field),
                    render_runs(runs, field).len(),
                    "{runs:?}"
                );
            }
        }
        assert_eq!(
            id_filter(&[i32::MAX - 1, i32::MAX]),
            format!("pid == {} || pid == {}", i32::MAX - 1, i32::MAX)
        );
    }

    /// The ids a filter of [`id_filter`]'s grammar matches, within `span`.
    fn matched(filter: &str, span: std::ops::RangeInclusive<i32>) -> Vec<i32> {
        let terms: Vec<(i32, i32)> = filter
            .split(" || ")
            .map(|t| {
                let n: Vec<i32> = t
                    .split(|c: char| !c.is_ascii_digit())
                    .filter_map(|x| x.parse().ok())
                    .collect();
                (n[0], *n.last().unwrap())
            })
            .collect();
        span.filter(|i| terms.iter().any(|&(a, b)| (a..=b).contains(i)))
            .collect()
    }

    #[test]
    fn too_many_scattered_ids_are_covered_by_merged_ranges() {
        // Clusters of 3 ids 1 000 apart (a program's threads), no two
        // consecutive: 60 clusters are too many to list one by one.
        let clusters = |n: i32| -> Vec<i32> {
            (0..n)
                .flat_map(|c| [0, 4, 9].map(|o| 100_000 + c * 1_000 + o))
                .collect()
        };
        let ids = clusters(60);
        let f = id_filter(&ids);
        assert!(f.len() <= MAX_FILTER, "{}", f.len());
        // Every target, and nothing outside a cluster's span: the gaps
        // between clusters are the widest, so they stay.
        let got = matched(&f, 99_000..=170_000);
        assert!(got.len() > ids.len());
        assert!(ids.iter().all(|i| got.binary_search(i).is_ok()));
        assert!(got.iter().all(|i| (i - 100_000) % 1_000 <= 9), "{got:?}");
        // 200 clusters do not fit even as ranges: neighbours merge, yet
        // every target stays matched.
        let ids = clusters(200);
        let f = id_filter(&ids);
        assert!(f.len() <= MAX_FILTER);
        let got = matched(&f, 99_000..=301_000);
        assert!(ids.iter().all(|i| got.binary_search(i).is_ok()));
        // Within the limit, the exact list.
        let f = id_filter(&ids[..150]);
        assert_eq!(matched(&f, 99_000..=301_000), ids[..150].to_vec());
    }

    #[test]
    fn an_exec_record_names_the_new_and_the_old_tid() {
        let tps = Tracepoints {
            exec: Tp {
                id: 365,
                a: 12,
                b: 16,
            },
            ..Tracepoints::default()
        };
        // sched_process_exec: common fields, filename (data_loc), pid, old_pid.
        let mut raw = vec![0u8; 20];
        raw[0..2].copy_from_slice(&365u16.to_ne_bytes());
        raw[12..16].copy_from_slice(&4000i32.to_ne_bytes());
        raw[16..20].copy_from_slice(&4003i32.to_ne_bytes());
        let mut b = body(4000, 4000, 77);
        b.extend_from_slice(&(raw.len() as u32).to_ne_bytes());
        b.extend_from_slice(&raw);
        assert_eq!(
            tps.decode(&b),
            Some(Event::Exec {
                time: 77,
                pid: 4000,
                old_pid: 4003
            })
        );
        assert_eq!(tps.decode(&b[..b.len() - 1]), None);
    }

    #[test]
    fn a_switch_in_is_a_run_a_preempted_switch_out_a_preempt() {
        let b = body(40, 41, 123_456_789);
        assert_eq!(
            Tracepoints::decode_switch(0, &b),
            Some(Event::Run {
                time: 123_456_789,
                tid: 41
            })
        );
        assert_eq!(
            Tracepoints::decode_switch(sys::PERF_RECORD_MISC_SWITCH_OUT, &b),
            None
        );
        assert_eq!(
            Tracepoints::decode_switch(
                sys::PERF_RECORD_MISC_SWITCH_OUT | sys::PERF_RECORD_MISC_SWITCH_OUT_PREEMPT,
                &b
            ),
            Some(Event::Preempt {
                time: 123_456_789,
                tid: 41
            })
        );
        assert_eq!(Tracepoints::decode_switch(0, &b[..12]), None);
    }
}
