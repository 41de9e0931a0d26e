//! Wake-ups that perf does not see, read from an ftrace instance.
//!
//! On this kernel (6.18) a per-thread perf event on `sched_wakeup` records
//! a wake-up only when one of the followed threads is current: a managed
//! thread woken by a timer interrupt over the idle task (the usual wake-up
//! of a periodic thread) or over a program hsched does not manage leaves
//! no sample (1 and 0 of about 190 wake-ups of a sleeping thread in a
//! second, on an idle CPU and beside `yes`). The HSI learned of such
//! wake-ups only from the thread's switch-in record, which perf does not
//! wake the reader for, up to a whole job later (docs/live-mode.md,
//! "Limits"), and a thread woken over an unmanaged program ran its bursts
//! unseen past its reservation.
//!
//! This module owns one tracefs instance per daemon (`instances/hsched-PID`)
//! with `sched_wakeup` enabled, filtered to wake-ups of the managed thread
//! ids not run by the daemon itself (its thaws) nor, where the ids fit, by
//! a managed thread (perf sees those), clock `mono` (the daemon's
//! `CLOCK_MONOTONIC`), and `buffer_percent` 0, so that each record wakes
//! the daemon through `per_cpu/cpuN/trace_pipe_raw`. Pages are read
//! without blocking and decoded here (the ring-buffer page layout of
//! `events/header_page`).
//!
//! On unless `HSCHED_LIVE_IDLE_WAKES=off` (named after the idle-context
//! wake-ups it was made for); without tracefs instances the daemon warns
//! and goes on without it (docs/measurements/live-mode.md, "Idle-context wake-ups from
//! ftrace").

use crate::observe::{exact_id_filter, field_offset, id_filter, Event};
use crate::sys;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// Ring-buffer event types (`events/header_event`).
const TYPE_DATA_MAX: u32 = 28;
const TYPE_PADDING: u32 = 29;
const TYPE_TIME_EXTEND: u32 = 30;
const TYPE_TIME_STAMP: u32 = 31;
/// Flags in a page's `commit` word above the data size.
const MISSED_EVENTS: u64 = 1 << 31;
const COMMIT_SIZE: u64 = (1 << 30) - 1;
/// The kernel takes a filter shorter than a page (4 096 bytes here); this
/// leaves room for the text that joins the two id lists.
const MAX_FILTER_TEXT: usize = 4_000;
/// Instances are named after the daemon's pid.
const PREFIX: &str = "hsched-";

/// The `sched_wakeup` records of the managed threads' wake-ups perf misses
/// (see the module doc).
pub struct IdleWakes {
    dir: PathBuf,
    /// `per_cpu/cpuN/trace_pipe_raw` of every online CPU, non-blocking.
    pipes: Vec<File>,
    /// Offset of `pid` in a `sched_wakeup` record, and the record's type.
    pid_at: usize,
    type_id: u16,
    /// Offset of the data in a page and of the `commit` word.
    data_at: usize,
    commit_at: usize,
    targets: Option<Vec<i32>>,
    page: Vec<u8>,
    /// Records decoded.
    pub records: u64,
    /// Pages the kernel reported events missing from (buffer full).
    pub lost_pages: u64,
    /// Whether the filter covers every managed thread (false: the kernel
    /// refused the last one, which the old filter does not include).
    pub complete: bool,
}

impl IdleWakes {
    /// Creates this daemon's instance for the online CPUs `cpus`, first
    /// removing those of daemons that are gone.
    ///
    /// # Errors
    /// tracefs has no instances, or refused a setting.
    pub fn new(cpus: &[usize]) -> io::Result<IdleWakes> {
        let root = crate::observe::tracefs()?.join("instances");
        remove_stale(&root);
        let dir = root.join(format!("{PREFIX}{}", std::process::id()));
        match fs::create_dir(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
        let made = Self::setup(&dir, cpus);
        if made.is_err() {
            let _ = fs::remove_dir(&dir);
        }
        made
    }

    fn setup(dir: &Path, cpus: &[usize]) -> io::Result<IdleWakes> {
        let w = |f: &str, v: &str| {
            fs::write(dir.join(f), v)
                .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", dir.join(f).display())))
        };
        w("trace_clock", "mono")?;
        w("buffer_size_kb", "64")?;
        // Before Linux 5.1 there is no such file and poll wakes on any data.
        let _ = fs::write(dir.join("buffer_percent"), "0");
        let ev = dir.join("events/sched/sched_wakeup");
        let (type_id, pid_at) = wakeup_format(&ev)?;
        let (commit_at, data_at) = page_layout(&dir.join("../../events/header_page"));
        fs::write(ev.join("filter"), "pid == 0")?;
        fs::write(ev.join("enable"), "1")?;
        let mut pipes = Vec::with_capacity(cpus.len());
        for c in cpus {
            pipes.push(
                OpenOptions::new()
                    .read(true)
                    .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
                    .open(dir.join(format!("per_cpu/cpu{c}/trace_pipe_raw")))?,
            );
        }
        Ok(IdleWakes {
            dir: dir.to_path_buf(),
            pipes,
            pid_at,
            type_id,
            data_at,
            commit_at,
            targets: None,
            page: vec![0; 4096.max(sys::page_size())],
            records: 0,
            lost_pages: 0,
            complete: false,
        })
    }

    /// The descriptors to poll (readable when records are waiting).
    pub fn poll_fds(&self) -> Vec<RawFd> {
        self.pipes.iter().map(|f| f.as_raw_fd()).collect()
    }

    /// Records the wake-ups of `tids` (sorted, deduplicated) perf misses,
    /// when the list changed: only theirs, or, when their ids are too
    /// scattered for a filter, those of the ranges that cover them
    /// ([`id_filter`]). An ftrace filter, unlike a perf event's, can be
    /// replaced in place.
    ///
    /// # Errors
    /// The kernel refused the filter (the previous one stays, and no
    /// longer covers every target).
    pub fn set_targets(&mut self, tids: &[i32]) -> io::Result<()> {
        if self.targets.as_deref() == Some(tids) {
            return Ok(());
        }
        // The daemon's own wake-ups (its thaws) tell it nothing.
        let woken = format!("({}) && common_pid != {}", id_filter(tids), sys::getpid());
        // Wake-ups run while a managed thread is current are perf's (that
        // thread's own events record them): left out where the ids fit a
        // filter exactly and the whole filter fits the kernel's page.
        let filter = match exact_id_filter(tids, "common_pid") {
            Some(waker) if woken.len() + waker.len() < MAX_FILTER_TEXT => {
                format!("{woken} && !({waker})")
            }
            _ => woken,
        };
        self.complete = false;
        fs::write(self.dir.join("events/sched/sched_wakeup/filter"), filter)?;
        self.complete = true;
        self.targets = Some(tids.to_vec());
        Ok(())
    }

    /// Appends every waiting record as a [`Event::Wake`].
    pub fn drain(&mut self, out: &mut Vec<Event>) {
        for i in 0..self.pipes.len() {
            // Bounded: a CPU writes at most its 64 KiB buffer meanwhile.
            for _ in 0..64 {
                let n = match self.pipes[i].read(&mut self.page) {
                    Ok(n) if n > 0 => n,
                    _ => break,
                };
                let (records, missed) = decode_page(
                    &self.page[..n],
                    self.commit_at,
                    self.data_at,
                    self.type_id,
                    self.pid_at,
                    out,
                );
                self.records += records;
                self.lost_pages += u64::from(missed);
            }
        }
    }
}

impl Drop for IdleWakes {
    fn drop(&mut self) {
        let _ = fs::write(self.dir.join("events/sched/sched_wakeup/enable"), "0");
        self.pipes.clear();
        // An instance with an open file cannot be removed: closed first.
        let _ = fs::remove_dir(&self.dir);
    }
}

/// Removes daemon `pid`'s instance (the watchdog's, after the daemon died
/// before its `Drop`). Best effort.
pub fn remove_instance(pid: i32) {
    if let Ok(root) = crate::observe::tracefs() {
        let dir = root.join(format!("instances/{PREFIX}{pid}"));
        let _ = fs::write(dir.join("events/sched/sched_wakeup/enable"), "0");
        let _ = fs::remove_dir(dir);
    }
}

/// Removes the instances of daemons that are no longer running (in case
/// a watchdog could not).
fn remove_stale(root: &Path) {
    let Ok(entries) = fs::read_dir(root) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(PREFIX))
            .and_then(|p| p.parse::<i32>().ok())
        else {
            continue;
        };
        if pid != std::process::id() as i32 && !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = fs::remove_dir(e.path());
        }
    }
}

/// `sched_wakeup`'s type id and the offset of its `pid` field.
fn wakeup_format(ev: &Path) -> io::Result<(u16, usize)> {
    let bad =
        |what: &str| io::Error::new(io::ErrorKind::InvalidData, format!("sched_wakeup: {what}"));
    let id: u16 = fs::read_to_string(ev.join("id"))?
        .trim()
        .parse()
        .map_err(|_| bad("bad id"))?;
    let format = fs::read_to_string(ev.join("format"))?;
    let pid_at = field_offset(&format, "pid").ok_or_else(|| bad("no pid field"))?;
    Ok((id, pid_at))
}

/// The offsets of a page's `commit` word and data (`events/header_page`),
/// or those of 64-bit kernels (8 and 16) when it cannot be read.
fn page_layout(header_page: &Path) -> (usize, usize) {
    let text = fs::read_to_string(header_page).unwrap_or_default();
    (
        field_offset(&text, "commit").unwrap_or(8),
        field_offset(&text, "data").unwrap_or(16),
    )
}

/// Decodes one `trace_pipe_raw` page, appending a [`Event::Wake`] for each
/// record of type `type_id` (the woken thread at `pid_at` of the record).
/// Returns the records decoded and whether the kernel dropped events
/// before this page. Malformed input ends the page; it never panics.
pub fn decode_page(
    page: &[u8],
    commit_at: usize,
    data_at: usize,
    type_id: u16,
    pid_at: usize,
    out: &mut Vec<Event>,
) -> (u64, bool) {
    let u32_at = |o: usize| {
        page.get(o..o + 4)
            .map(|s| u32::from_ne_bytes([s[0], s[1], s[2], s[3]]))
    };
    let u64_at = |o: usize| {
        page.get(o..o + 8)
            .map(|s| u64::from_ne_bytes(s.try_into().unwrap_or([0; 8])))
    };
    let (Some(mut ts), Some(commit)) = (u64_at(0), u64_at(commit_at)) else {
        return (0, false);
    };
    let end = (data_at + (commit & COMMIT_SIZE) as usize).min(page.len());
    let mut at = data_at;
    let mut n = 0;
    while at + 4 <= end {
        let Some(h) = u32_at(at) else { break };
        let (type_len, delta) = (h & 0x1f, u64::from(h >> 5));
        let array = u32_at(at + 4);
        match type_len {
            // A discarded record (its time delta is not applied), or with
            // a zero delta the end of the data.
            TYPE_PADDING => match array {
                _ if delta == 0 => break,
                Some(len) => at += 4 + len as usize,
                None => break,
            },
            TYPE_TIME_EXTEND => {
                let Some(hi) = array else { break };
                ts += (u64::from(hi) << 27) | delta;
                at += 8;
            }
            TYPE_TIME_STAMP => {
                let Some(hi) = array else { break };
                ts = (u64::from(hi) << 27) | delta | (ts & !((1u64 << 59) - 1));
                at += 8;
            }
            0..=TYPE_DATA_MAX => {
                ts += delta;
                // type_len 0: the length, itself included, in the first word.
                let (data, len) = if type_len == 0 {
                    let Some(len) = array.filter(|&l| l >= 4) else {
                        break;
                    };
                    (at + 8, len as usize - 4)
                } else {
                    (at + 4, type_len as usize * 4)
                };
                let Some(rec) = page.get(data..data + len) else {
                    break;
                };
                let ty = rec.get(..2).map(|b| u16::from_ne_bytes([b[0], b[1]]));
                let pid = rec
                    .get(pid_at..pid_at + 4)
                    .map(|b| i32::from_ne_bytes([b[0], b[1], b[2], b[3]]));
                if let (Some(t), Some(tid)) = (ty, pid) {
                    if t == type_id {
                        out.push(Event::Wake {
                            time: ts,
                            tid,
                            new: false,
                        });
                        n += 1;
                    }
                }
                at = data + len;
            }
            _ => break,
        }
    }
    (n, commit & MISSED_EVENTS != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(type_len: u32, delta: u32) -> [u8; 4] {
        (type_len | (delta << 5)).to_ne_bytes()
    }

    /// A page of: a small record, a time extension, a record with its
    /// length in the first word, a padding event, a foreign record.
    fn page() -> Vec<u8> {
        let mut d = Vec::new();
        // sched_wakeup (type 300), pid 4242 at offset 8; 12 bytes.
        let rec = |pid: i32, ty: u16| {
            let mut r = vec![0u8; 12];
            r[..2].copy_from_slice(&ty.to_ne_bytes());
            r[8..12].copy_from_slice(&pid.to_ne_bytes());
            r
        };
        d.extend_from_slice(&header(3, 10));
        d.extend_from_slice(&rec(4242, 300));
        d.extend_from_slice(&header(TYPE_TIME_EXTEND, 5));
        d.extend_from_slice(&1u32.to_ne_bytes()); // + (1 << 27) + 5
        d.extend_from_slice(&header(0, 7));
        d.extend_from_slice(&16u32.to_ne_bytes());
        d.extend_from_slice(&rec(4243, 300));
        // A discarded record: its length counts from the length word on;
        // its time delta is not applied.
        d.extend_from_slice(&header(TYPE_PADDING, 1));
        d.extend_from_slice(&8u32.to_ne_bytes());
        d.extend_from_slice(&[0; 4]);
        d.extend_from_slice(&header(3, 1));
        d.extend_from_slice(&rec(4244, 301));
        let mut p = Vec::new();
        p.extend_from_slice(&1_000u64.to_ne_bytes());
        p.extend_from_slice(&(d.len() as u64 | MISSED_EVENTS).to_ne_bytes());
        p.extend_from_slice(&d);
        p.resize(4096, 0);
        p
    }

    #[test]
    fn a_page_decodes_into_wake_ups_with_their_times() {
        let mut out = Vec::new();
        let (n, missed) = decode_page(&page(), 8, 16, 300, 8, &mut out);
        assert_eq!((n, missed), (2, true));
        let t2 = 1_010 + (1 << 27) + 5 + 7;
        assert_eq!(
            out,
            vec![
                Event::Wake {
                    time: 1_010,
                    tid: 4242,
                    new: false
                },
                Event::Wake {
                    time: t2,
                    tid: 4243,
                    new: false
                }
            ]
        );
    }

    #[test]
    fn a_truncated_or_corrupt_page_never_panics() {
        let p = page();
        let mut out = Vec::new();
        for len in 0..120 {
            decode_page(&p[..len], 8, 16, 300, 8, &mut out);
        }
        let mut rng = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..2_000 {
            let mut q = p.clone();
            for _ in 0..4 {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                let i = (rng % 120) as usize;
                q[i] = (rng >> 32) as u8;
            }
            decode_page(&q, 8, 16, 300, 8, &mut out);
        }
    }

    #[test]
    fn field_offsets_come_from_the_format_text() {
        let f = "name: sched_wakeup\nID: 300\nformat:\n\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\tfield:char comm[16];\toffset:8;\tsize:16;\tsigned:0;\n\tfield:pid_t pid;\toffset:24;\tsize:4;\tsigned:1;\n";
        assert_eq!(field_offset(f, "pid"), Some(24));
        assert_eq!(field_offset(f, "comm[16]"), Some(8));
        assert_eq!(field_offset(f, "prio"), None);
    }
}
