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
//!   reports state R and is not a block.
//! - `sched_wakeup` / `sched_wakeup_new`: the thread became runnable. The
//!   kernel delivers it to the woken thread's events (`__perf_task`) whose
//!   CPU is the CPU the wake-up runs on, which may be any online CPU (the
//!   waker's), hence events on every online CPU, not only managed ones.
//! - `PERF_RECORD_SWITCH` switch-in (`context_switch` on the switch event):
//!   the thread is on a CPU, so it is runnable. Written in the thread's own
//!   context, it carries the wake-ups whose sample the kernel drops: on
//!   this kernel (6.18) a tracepoint firing in the idle task's context
//!   (a timer interrupt on an idle CPU, a remote wake-up queued to an idle
//!   CPU) mostly writes no perf sample, although ftrace records it.
//! - `sched_process_fork`: a managed thread created a thread or process.
//! - `sched_process_exit`: a managed thread exited.

use crate::sys::{self, PerfEventAttr, PerfRing};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};

/// One observed event, in kernel time (`CLOCK_MONOTONIC` ns).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// `tid` went off a CPU in a sleeping state (it blocked).
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
    /// `tid` exited.
    Exit {
        /// When.
        time: u64,
        /// The thread.
        tid: i32,
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
            | Event::Exit { time, .. } => time,
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
}

/// The tracefs mount point, mounting it at `/sys/kernel/tracing` if needed.
///
/// # Errors
/// Not found and could not be mounted.
pub fn tracefs() -> io::Result<PathBuf> {
    for p in ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"] {
        if Path::new(p).join("events/sched/sched_switch/id").exists() {
            return Ok(p.into());
        }
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
    let dir = root.join("events/sched").join(name);
    let id: u64 = std::fs::read_to_string(dir.join("id"))?
        .trim()
        .parse()
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, format!("bad id for {name}")))?;
    let format = std::fs::read_to_string(dir.join("format"))?;
    let mut off = [usize::MAX; 2];
    for line in format.lines() {
        let Some(decl) = line.trim().strip_prefix("field:") else {
            continue;
        };
        let Some((decl, rest)) = decl.split_once(';') else {
            continue;
        };
        let fname = decl.rsplit(' ').next().unwrap_or("");
        let o = rest
            .split_once("offset:")
            .and_then(|(_, r)| r.split(';').next())
            .and_then(|s| s.trim().parse::<usize>().ok());
        for (k, f) in fields.iter().enumerate() {
            if fname == *f {
                if let Some(o) = o {
                    off[k] = o;
                }
            }
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
        })
    }

    fn all(&self) -> [u64; 5] {
        [
            self.switch.id,
            self.wakeup.id,
            self.wakeup_new.id,
            self.fork.id,
            self.exit.id,
        ]
    }

    /// Decodes one `PERF_RECORD_SWITCH` body: a switch-in of the thread
    /// named by the `sample_id` trailer (TID, TIME with [`sys::SAMPLE_TYPE`]).
    pub fn decode_switch(misc: u16, body: &[u8]) -> Option<Event> {
        if misc & sys::PERF_RECORD_MISC_SWITCH_OUT != 0 || body.len() < 16 {
            return None;
        }
        let tid = i32::from_ne_bytes(body[4..8].try_into().ok()?);
        let time = u64::from_ne_bytes(body[8..16].try_into().ok()?);
        Some(Event::Run { time, tid })
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
            // above): preempted. Anything else is a sleep.
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

impl Observer {
    /// One ring buffer (`2^order` pages) on each of `cpus`.
    ///
    /// # Errors
    /// tracefs or perf events unavailable, or not permitted.
    pub fn new(cpus: &[usize], order: u32) -> io::Result<Observer> {
        let tps = Tracepoints::load()?;
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
        Ok(Observer {
            tps,
            rings,
            lost: 0,
            samples: 0,
            switches: 0,
        })
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
        let mut fds = Vec::with_capacity(self.rings.len() * 5);
        for (cpu, owner, _) in &self.rings {
            for id in self.tps.all() {
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
        for (_, _, ring) in &mut self.rings {
            ring.drain_misc(|ty, misc, body| match ty {
                sys::PERF_RECORD_SAMPLE => {
                    samples += 1;
                    if let Some(e) = tps.decode(body) {
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
    fn a_switch_in_is_a_run_and_a_switch_out_nothing() {
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
        assert_eq!(Tracepoints::decode_switch(0, &b[..12]), None);
    }
}
