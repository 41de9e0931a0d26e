//! Progress metrics of unmodified programs: the fill levels of the pipes
//! and UNIX sockets that connect managed processes, read from outside and
//! fed to `realrate` (Steere et al. 1998, §3.2, "symbiotic interfaces": the scheduler
//! learns a job's progress from the bounded buffers it shares with its
//! producers and consumers; §4.1: a monitor samples them periodically).
//!
//! Every `period` (10 ms by default, the controller's own rate, §3.3) the
//! monitor, for the managed threads whose scheduler is a `realrate`
//! instance:
//!
//! 1. **discovers** (every [`DISCOVER_TICKS`] periods, and at once when the
//!    set of such processes changes) the pipes and FIFOs each process
//!    holds (UNIX sockets: below): `/proc/PID/fd/N` stats as a FIFO (an anonymous `pipe:[ino]` or
//!    a named FIFO; the key is the pipe's device and inode) and the access
//!    mode in `/proc/PID/fdinfo/N` says which end. A pipe read by one
//!    managed process and written by another is a **queue**: the processes
//!    holding only its read end are its consumers, those holding only its
//!    write end its producers. A process holding both ends (a shell between
//!    `pipe` and `close`, a program talking to itself) is neither, and a
//!    pipe with an end outside the managed set (the terminal, `hsched run`'s
//!    own stdout piped somewhere) is no queue;
//! 2. **samples** each queue: one descriptor of its *read end* is duplicated
//!    from a consumer with `pidfd_open` + `pidfd_getfd`, `ioctl(FIONREAD)`
//!    gives the bytes queued and `fcntl(F_GETPIPE_SZ)` the capacity;
//! 3. **reports** `Msg::App { kind: "progress", params: { queue: "pipe:INO",
//!    fill, size, role } }` through a `Sink` (the user backend's HSI,
//!    [`Hsi::thread_msg`]; the kernel backend's adaptive reservations) about every
//!    `realrate` thread of each consumer (role `consumer`) and each producer
//!    (role `producer`). A queue that disappears is reported once more with
//!    `remove = true`, so the controller forgets it, and so is a queue to a
//!    thread no longer at either end of it.
//!
//! **Sources.** A producer that consumes no monitored queue (a pipeline's
//! first stage) is paced by something the monitor cannot see: a timer, a
//! device, the network, a file. Its output's fill level says whether its
//! consumer keeps up, not whether the source does: with the producer sign
//! of Fig 3 a source that is behind its pace but whose consumer keeps the
//! pipe half full feels no pressure, and the whole pipeline settles at
//! whatever rate the source happens to get (measured: 89 of 200 KB/s with
//! `filter = 0.2`, docs/real-rate.md "Live"). In §4.2 the producer has a
//! reservation the controller does not touch. So by default a source is
//! not told its queues and stays what `realrate` makes of a thread without
//! a metric, a *miscellaneous* job (constant pressure until the too-generous
//! test fires: it gets what it uses plus a margin, and more when it falls
//! behind); interior stages get both roles (the paper's "pairwise
//! comparison" along a pipeline). `HSCHED_PROGRESS_SOURCES=1` reports the
//! producer role to sources too.
//!
//! # What a program can observe
//! The daemon holds, for a moment or for the queue's life (see [`DupMode`]),
//! an extra reference to the pipe's **read end**; never to the write end, so
//! a consumer always sees end-of-file exactly when its producers close.
//! What changes is the producer's side: after every consumer has exited, a
//! write into the pipe fails with `EPIPE`/`SIGPIPE` only once the daemon has
//! dropped its copy too. In the default [`DupMode::Cached`] the copy is
//! dropped at the first tick after the consumer leaves the managed set (at
//! most one period, 10 ms) or, if it merely closes the descriptor, at the
//! next discovery (at most 100 ms); a producer blocked on a full pipe in
//! that window waits that long before it gets `EPIPE`. In
//! [`DupMode::Redup`] the copy lives only for the few microseconds of one
//! sample. `/proc/PID/fdinfo` of the pipe and `F_GETPIPE_SZ` are read-only;
//! nothing else is visible to the programs.
//!
//! # Errors
//! Everything is per queue and quiet: a process that exits, a descriptor
//! closed between discovery and sample, `EPERM` (a process that is not
//! dumpable, a kernel without `pidfd_getfd`: Linux ≥ 5.6) drop that sample
//! or that queue, are counted in [`ProgressStats::errors`] and warned once
//! per kind; none stops the run.
//!
//! # Options (environment of `hsched run`)
//! - `HSCHED_PROGRESS_PERIOD` (a duration such as `10ms`): sampling period;
//!   default the smallest `control_period` of the file's `realrate`
//!   schedulers, else 10 ms. `0` turns the monitor off.
//! - `HSCHED_PROGRESS_REDUP=1`: [`DupMode::Redup`].
//! - `HSCHED_PROGRESS_SOURCES=1`: tell sources their role too (above).
//! - `HSCHED_PROGRESS_TRACE=FILE`: every sample as CSV lines, for
//!   experiments (`docs/real-rate.md`, "Live").
//!
//! # Shared-memory queues
//! Programs that link the `hsched-progress` library (`crates/progress`)
//! register a queue by creating `/dev/shm/hsched-progress/<pid>.<queue>`;
//! at each discovery the monitor opens the files of monitored producers,
//! and at each tick reads the 64-byte header (one `pread`, never mapped)
//! and reports `shm:<pid>.<queue>` with `fill = head − tail` to the
//! consumer recorded in the header and, under the rule for sources above,
//! to the producer. A file that disappears is a queue that went away.
//!
//! # UNIX stream sockets
//! A connected `SOCK_STREAM` UNIX socket (a `socketpair`, or a listening
//! socket's accepted connection) between managed processes carries two
//! queues, one per direction: the data in socket S's receive queue was
//! written by the owners of its peer P and will be read by S's owners.
//! `/proc` shows a socket's inode but not its peer, so at each discovery
//! the socket inodes found in `/proc/PID/fd` are looked up through
//! `NETLINK_SOCK_DIAG` (`unix_diag_req` by inode with `UDIAG_SHOW_PEER |
//! UDIAG_SHOW_RQLEN | UDIAG_SHOW_MEMINFO`): S is a queue `unix:<S's inode>`
//! when its peer P is held by other managed processes (consumers: holding S
//! and not P; producers: holding P and not S); a socket whose peer is
//! outside the managed set, a listening socket and datagram sockets are
//! ignored. At each tick one batch of requests asks about every sender P.
//!
//! **Size.** A stream writer blocks when the memory charged for its unread
//! data (`sk_wmem_alloc`: each chunk's `truesize`, payload plus buffer
//! overhead) reaches its `SO_SNDBUF`; the receiver's buffer plays no part.
//! The payload queued at that point depends on the write size (measured,
//! default `SO_SNDBUF` 212992: 278 bytes with 1-byte writes, 180224 with
//! 4 KiB writes, 233152 with 64 KiB writes; test
//! `a_socket_writer_blocks_when_its_unread_memory_reaches_sndbuf`), so a
//! payload fraction says little. The monitor reports `fill` = the sender's
//! unread memory (`UNIX_DIAG_RQLEN`'s `wqueue`, what `SIOCOUTQ` says) and
//! `size` = the sender's `SO_SNDBUF` (`UNIX_DIAG_MEMINFO`), both in memory
//! bytes: `fill / size` = 1 means exactly "the writer blocks" (the last
//! write may overshoot; `fill` is capped at `size`).
//!
//! **Which direction.** Most connections carry data one way; the other
//! direction is always empty, and reporting it would tell the consumer it
//! is a producer of an empty queue (pressure to grow) and the producer the
//! opposite. So a direction is reported from the first sample that finds
//! unread data in it until the connection goes; while it is silent, its
//! processes are what they are without it (a consumer that keeps up is a
//! miscellaneous job). A direction shut down (`shutdown`, or the receiver
//! closed: the sender then shows `SEND_SHUTDOWN`) is no longer sampled.
//! Limitation: a direction that carried data once (a greeting, an
//! acknowledgement) stays reported, mostly empty, for the connection's
//! life.
//!
//! **No descriptor is taken**: the sockets are read through netlink, so
//! end-of-file and `EPIPE` are exactly as without the monitor. The price is
//! the kernel's lookup by inode, which scans its table of UNIX sockets:
//! about 50 µs per direction and tick on an idle host, more with many UNIX
//! sockets (docs/measurements/live-mode.md, "Live progress monitor"). `sock_diag`
//! sees the daemon's network namespace only. Netlink failures are counted
//! and warned once (`sock_diag`); a socket closed since the last discovery
//! is simply not sampled.

// The three system calls of a sample live here rather than in `sys`; each
// block says why it is sound.
#![allow(unsafe_code)]

use crate::daemon::Managed;
use hsched_config::Hierarchy;
use hsched_core::{Duration, Hsi, InstanceId, Instant, Msg, ParamValue, Params, ThreadId};
use std::collections::{BTreeMap, BTreeSet};
use std::io::{self, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::fs::{FileTypeExt, MetadataExt};

/// Default sampling period: the controller's rate (Steere et al. 1998, §3.3, 100 Hz).
pub const DEFAULT_PERIOD_NS: u64 = 10_000_000;
/// Pipes are rediscovered every this many periods (and whenever the set of
/// monitored processes changes).
pub const DISCOVER_TICKS: u64 = 10;
/// The policy whose threads are monitored.
pub const POLICY: &str = "realrate";

/// How the daemon holds its copy of a queue's read end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DupMode {
    /// Duplicate once per queue and keep it until the queue disappears (one
    /// system call per sample).
    Cached,
    /// Duplicate, check and close at every sample (four system calls per
    /// sample; the copy lives for microseconds).
    Redup,
}

/// Counters of the monitor.
#[derive(Clone, Debug, Default)]
pub struct ProgressStats {
    /// Sampling ticks.
    pub ticks: u64,
    /// Discovery passes.
    pub discoveries: u64,
    /// Queue samples taken.
    pub samples: u64,
    /// Progress messages delivered to the HSI.
    pub messages: u64,
    /// Samples, duplications or messages that failed (quietly).
    pub errors: u64,
    /// Daemon CPU time spent discovering, in ns.
    pub discover_ns: u64,
    /// Daemon CPU time spent sampling and sending, in ns.
    pub sample_ns: u64,
    /// Part of `sample_ns` spent on UNIX sockets (`sock_diag` and their
    /// messages), in ns.
    pub socket_ns: u64,
}

/// A pipe: its device and inode.
type PipeKey = (u64, u64);
/// Managed processes holding a pipe's read end (with one of their
/// descriptors for it) and its write end.
type Ends = (BTreeMap<i32, RawFd>, BTreeSet<i32>);
/// A queue's consumers (with a descriptor) and producers.
type Roles = (Vec<(i32, RawFd)>, Vec<i32>);

/// A shared-memory queue of the `hsched-progress` library.
struct ShmQueue {
    name: String,
    file: std::fs::File,
    producer: i32,
    told: BTreeSet<ThreadId>,
}

/// One pipe between managed processes.
struct Queue {
    name: String,
    /// `(process, descriptor number in it)` holding only the read end.
    consumers: Vec<(i32, RawFd)>,
    /// Processes holding only the write end.
    producers: Vec<i32>,
    size: u64,
    dup: Option<OwnedFd>,
    /// Threads told about this queue (told to forget it when it goes).
    told: BTreeSet<ThreadId>,
}

/// One direction of a connected UNIX stream socket between managed
/// processes: the data waiting in socket `ino`'s receive queue, sent by its
/// peer.
struct SockQueue {
    name: String,
    /// The sending socket.
    peer: u32,
    /// Processes holding the receiving socket and not the sender.
    consumers: Vec<i32>,
    /// Processes holding the sending socket and not the receiver.
    producers: Vec<i32>,
    /// Data has been seen in this direction (and it is not shut down):
    /// only then is it reported, so the unused reverse direction of a
    /// one-way connection is no (always empty) queue.
    active: bool,
    told: BTreeSet<ThreadId>,
}

/// The pipe fill-level monitor of one live run.
pub struct ProgressMonitor {
    period_ns: u64,
    mode: DupMode,
    report_sources: bool,
    next_at: u64,
    ticks_since_discovery: u64,
    procs: Vec<i32>,
    queues: BTreeMap<(u64, u64), Queue>,
    pidfds: BTreeMap<i32, OwnedFd>,
    shm: BTreeMap<String, ShmQueue>,
    /// UNIX stream socket directions, by receiving inode.
    socks: BTreeMap<u32, SockQueue>,
    /// The `sock_diag` socket, opened on first use.
    diag: Option<SockDiag>,
    /// Consumers of shared-memory queues at the last sample.
    shm_consumers: BTreeSet<i32>,
    warned: BTreeSet<&'static str>,
    trace: Option<io::BufWriter<std::fs::File>>,
    /// Counters.
    pub stats: ProgressStats,
}

fn env_duration(key: &str) -> Option<Duration> {
    let v = std::env::var(key).ok()?;
    let v = v.trim();
    if v == "0" {
        return Some(Duration::ZERO);
    }
    let p = Params::new().with("d", ParamValue::Str(v.to_string()));
    match p.duration("d") {
        Ok(d) => d,
        Err(e) => {
            crate::diag!("hsched: warning: {key}={v}: {e}; using the default");
            None
        }
    }
}

impl ProgressMonitor {
    /// A monitor with an explicit period (0: off) and mode.
    pub fn new(period: Duration, mode: DupMode) -> Self {
        ProgressMonitor {
            period_ns: period.as_nanos(),
            mode,
            report_sources: false,
            next_at: 0,
            ticks_since_discovery: 0,
            procs: Vec::new(),
            queues: BTreeMap::new(),
            pidfds: BTreeMap::new(),
            shm: BTreeMap::new(),
            socks: BTreeMap::new(),
            diag: None,
            shm_consumers: BTreeSet::new(),
            warned: BTreeSet::new(),
            trace: None,
            stats: ProgressStats::default(),
        }
    }

    /// The monitor of a run of `h`, configured from the environment (see the
    /// module documentation).
    pub fn from_env(h: &Hierarchy) -> Self {
        let from_file = h
            .schedulers
            .iter()
            .filter(|s| s.policy == POLICY)
            .filter_map(|s| s.params.duration("control_period").ok().flatten())
            .min();
        let period = env_duration("HSCHED_PROGRESS_PERIOD")
            .or(from_file)
            .unwrap_or(Duration(DEFAULT_PERIOD_NS));
        let mode = match std::env::var("HSCHED_PROGRESS_REDUP").as_deref() {
            Ok("1") => DupMode::Redup,
            _ => DupMode::Cached,
        };
        let mut m = ProgressMonitor::new(period, mode);
        m.report_sources = std::env::var("HSCHED_PROGRESS_SOURCES").as_deref() == Ok("1");
        if let Some(path) = std::env::var_os("HSCHED_PROGRESS_TRACE") {
            match std::fs::File::create(&path) {
                Ok(f) => {
                    let mut w = io::BufWriter::new(f);
                    let _ = writeln!(
                        w,
                        "# q,t_s,queue,fill,size,consumers,producers | \
                         p,t_s,thread,proportion,cpu_ns,rchar,wchar,pid"
                    );
                    m.trace = Some(w);
                }
                Err(e) => crate::diag!(
                    "hsched: warning: HSCHED_PROGRESS_TRACE {}: {e}",
                    path.to_string_lossy()
                ),
            }
        }
        m
    }

    /// The sampling period.
    pub fn period(&self) -> Duration {
        Duration(self.period_ns)
    }

    /// When the next sample is due (daemon clock), if the monitor is on and
    /// `hsi` has a `realrate` instance.
    pub fn due(&self, hsi: &Hsi) -> Option<u64> {
        self.due_if(!realrate_instances(hsi).is_empty())
    }

    /// When the next sample is due, if the monitor is on and `wanted`.
    pub(crate) fn due_if(&self, wanted: bool) -> Option<u64> {
        (self.period_ns > 0 && wanted).then_some(self.next_at)
    }

    /// The next due time after a step at `now`: on the period grid,
    /// skipping ticks missed while busy.
    fn advance(&mut self, now: u64) {
        self.next_at = if self.next_at == 0 || now >= self.next_at + self.period_ns {
            now + self.period_ns
        } else {
            self.next_at + self.period_ns
        };
    }

    /// Counts `sent` progress messages and warns about a refused one.
    fn count_reports(&mut self, sent: u64, refused: Option<String>) {
        self.stats.messages += sent;
        if let Some(e) = refused {
            self.warn("msg", format!("the scheduler refused a message: {e}"));
        }
    }

    fn warn(&mut self, key: &'static str, msg: String) {
        self.stats.errors += 1;
        if self.warned.insert(key) {
            crate::diag!("hsched: warning: progress monitor: {msg} (further ones are counted)");
        }
    }

    /// One monitor step of the user backend at daemon time `now` (`epoch`
    /// is the HSI's time zero), for the threads of `hsi`'s `realrate`
    /// instances ([`ProgressMonitor::step`]).
    pub(crate) fn tick(
        &mut self,
        now: u64,
        epoch: u64,
        hsi: &mut Hsi,
        threads: &BTreeMap<i32, Managed>,
    ) {
        if self.period_ns == 0 || now < self.next_at {
            return;
        }
        let insts = realrate_instances(hsi);
        if insts.is_empty() {
            self.advance(now);
            return;
        }
        let monitored: Vec<(ThreadId, i32, i32)> = threads
            .values()
            .filter(|m| insts.contains(&hsi.thread_parent(m.hsi)))
            .map(|m| (m.hsi, m.tid, m.orig.tgid))
            .collect();
        let mut sink = HsiSink { hsi, insts };
        self.step(now, epoch, &mut sink, &monitored);
    }

    /// One monitor step at daemon time `now` (`epoch` is the sink's time
    /// zero) for `monitored` threads (key, tid, process): discovers when
    /// due, samples every queue and sends the progress messages to `sink`.
    /// Does nothing before the next due time.
    pub(crate) fn step(
        &mut self,
        now: u64,
        epoch: u64,
        hsi: &mut dyn Sink,
        monitored: &[(ThreadId, i32, i32)],
    ) {
        if self.period_ns == 0 || now < self.next_at {
            return;
        }
        self.advance(now);
        // With no thread left to monitor the step still runs: discovery
        // then drops the queues and the read ends it held.
        self.stats.ticks += 1;
        let at = Instant(now.saturating_sub(epoch));
        // Monitored threads per process, in tid order.
        let mut by_proc: BTreeMap<i32, Vec<(ThreadId, i32)>> = BTreeMap::new();
        let mut sorted = monitored.to_vec();
        sorted.sort_by_key(|m| m.1);
        for (t, tid, tgid) in sorted {
            by_proc.entry(tgid).or_default().push((t, tid));
        }
        let procs: Vec<i32> = by_proc.keys().copied().collect();
        let t0 = crate::sys::thread_cpu_ns();
        if procs != self.procs || self.ticks_since_discovery >= DISCOVER_TICKS {
            self.discover(&procs, at, hsi);
            self.procs = procs;
            self.ticks_since_discovery = 0;
            let t1 = crate::sys::thread_cpu_ns();
            self.stats.discover_ns += t1 - t0;
        }
        self.ticks_since_discovery += 1;
        let t1 = crate::sys::thread_cpu_ns();
        let keys: Vec<(u64, u64)> = self.queues.keys().copied().collect();
        let consumers = self.consuming();
        for key in keys {
            let Some(fill) = self.sample(key) else {
                continue;
            };
            self.stats.samples += 1;
            let q = &self.queues[&key];
            let (name, size) = (q.name.clone(), q.size);
            let mut targets: Vec<(ThreadId, &'static str)> = Vec::new();
            for &(pid, _) in &q.consumers {
                for &(t, _) in by_proc.get(&pid).map_or(&[][..], |v| v) {
                    targets.push((t, "consumer"));
                }
            }
            for pid in &q.producers {
                if !self.report_sources && !consumers.contains(pid) {
                    continue; // a source: paced from outside, see above
                }
                for &(t, _) in by_proc.get(pid).map_or(&[][..], |v| v) {
                    targets.push((t, "producer"));
                }
            }
            if let Some(q) = self.queues.get_mut(&key) {
                let (sent, refused) = report(hsi, at, &name, fill, size, &targets, &mut q.told);
                self.count_reports(sent, refused);
            }
            if self.trace.is_some() {
                let q = &self.queues[&key];
                let cons: Vec<String> = q.consumers.iter().map(|c| c.0.to_string()).collect();
                let prods: Vec<String> = q.producers.iter().map(|p| p.to_string()).collect();
                let line = format!(
                    "q,{:.4},{},{},{},{},{}",
                    at.0 as f64 / 1e9,
                    q.name,
                    fill,
                    q.size,
                    cons.join(" "),
                    prods.join(" ")
                );
                if let Some(w) = self.trace.as_mut() {
                    let _ = writeln!(w, "{line}");
                }
            }
        }
        let t2 = crate::sys::thread_cpu_ns();
        self.sample_socks(at, hsi, &by_proc, &consumers);
        self.stats.socket_ns += crate::sys::thread_cpu_ns() - t2;
        self.sample_shm(at, hsi, &by_proc);
        self.stats.sample_ns += crate::sys::thread_cpu_ns() - t1;
        if self.trace.is_some() {
            self.trace_threads(at, hsi, &by_proc);
        }
    }

    /// Rebuilds the queue table from `/proc` for processes `procs`.
    fn discover(&mut self, procs: &[i32], at: Instant, hsi: &mut dyn Sink) {
        self.stats.discoveries += 1;
        // Pipe key -> (readers with one of their fds, writers).
        let mut ends: BTreeMap<PipeKey, Ends> = BTreeMap::new();
        // Socket inode -> processes holding it.
        let mut sockets: BTreeMap<u32, BTreeSet<i32>> = BTreeMap::new();
        for &pid in procs {
            let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
                continue; // exited since the last event
            };
            let mut fds: Vec<RawFd> = dir
                .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect();
            fds.sort_unstable();
            for fd in fds {
                let Ok(md) = std::fs::metadata(format!("/proc/{pid}/fd/{fd}")) else {
                    continue;
                };
                if md.file_type().is_socket() {
                    if let Ok(ino) = u32::try_from(md.ino()) {
                        sockets.entry(ino).or_default().insert(pid);
                    }
                    continue;
                }
                if !md.file_type().is_fifo() {
                    continue;
                }
                let Some(acc) = fd_access_mode(pid, fd) else {
                    continue;
                };
                let e = ends.entry((md.dev(), md.ino())).or_default();
                if acc == libc::O_RDONLY || acc == libc::O_RDWR {
                    e.0.entry(pid).or_insert(fd);
                }
                if acc == libc::O_WRONLY || acc == libc::O_RDWR {
                    e.1.insert(pid);
                }
            }
        }
        let mut found: BTreeMap<PipeKey, Roles> = BTreeMap::new();
        for (key, (readers, writers)) in ends {
            let consumers: Vec<(i32, RawFd)> = readers
                .iter()
                .filter(|(p, _)| !writers.contains(p))
                .map(|(&p, &fd)| (p, fd))
                .collect();
            let producers: Vec<i32> = writers
                .iter()
                .copied()
                .filter(|p| !readers.contains_key(p))
                .collect();
            if !consumers.is_empty() && !producers.is_empty() {
                found.insert(key, (consumers, producers));
            }
        }
        // Queues that went away: tell their threads to forget them.
        let gone: Vec<(u64, u64)> = self
            .queues
            .keys()
            .filter(|k| !found.contains_key(k))
            .copied()
            .collect();
        for k in gone {
            if let Some(q) = self.queues.remove(&k) {
                forget(hsi, at, &q.name, &q.told);
            }
        }
        for (key, (consumers, producers)) in found {
            let q = self.queues.entry(key).or_insert_with(|| Queue {
                name: format!("pipe:{}", key.1),
                consumers: Vec::new(),
                producers: Vec::new(),
                size: 0,
                dup: None,
                told: BTreeSet::new(),
            });
            // A cached copy stays valid while the pipe is a queue (it is the
            // pipe itself, whichever consumer it came from).
            q.consumers = consumers;
            q.producers = producers;
        }
        // Process handles of processes no longer monitored.
        self.pidfds.retain(|p, _| procs.binary_search(p).is_ok());
        self.discover_sockets(&sockets, at, hsi);
        self.discover_shm(procs, at, hsi);
    }

    /// Processes that consume a monitored queue (pipe, active socket
    /// direction, shared memory): the others are sources.
    fn consuming(&self) -> BTreeSet<i32> {
        let mut c: BTreeSet<i32> = self
            .queues
            .values()
            .flat_map(|q| q.consumers.iter().map(|c| c.0))
            .collect();
        c.extend(
            self.socks
                .values()
                .filter(|q| q.active)
                .flat_map(|q| q.consumers.iter().copied()),
        );
        c.extend(self.shm_consumers.iter().copied());
        c
    }

    /// `sock_diag` about inodes `inos`, or `None` (counted, warned once)
    /// when netlink fails.
    fn diag_query(&mut self, inos: &[u32]) -> Option<BTreeMap<u32, UnixSock>> {
        if self.diag.is_none() {
            match SockDiag::open() {
                Ok(d) => self.diag = Some(d),
                Err(e) => {
                    self.warn("sock_diag", format!("NETLINK_SOCK_DIAG: {e}"));
                    return None;
                }
            }
        }
        let r = self.diag.as_mut()?.query(inos);
        match r {
            Ok(m) => Some(m),
            Err(e) => {
                // Start afresh next time (replies may be pending).
                self.diag = None;
                self.warn("sock_diag", format!("sock_diag: {e}"));
                None
            }
        }
    }

    /// Rebuilds the socket queue table: each connected UNIX stream socket
    /// held by managed processes whose peer is held by other managed
    /// processes is one direction of a queue (`sockets`: inode -> holders).
    fn discover_sockets(
        &mut self,
        sockets: &BTreeMap<u32, BTreeSet<i32>>,
        at: Instant,
        hsi: &mut dyn Sink,
    ) {
        let mut found: BTreeMap<u32, (u32, Vec<i32>, Vec<i32>)> = BTreeMap::new();
        if !sockets.is_empty() {
            let inos: Vec<u32> = sockets.keys().copied().collect();
            let Some(diag) = self.diag_query(&inos) else {
                return; // keep the table until netlink answers again
            };
            for (ino, s) in &diag {
                if s.kind != libc::SOCK_STREAM as u8 || s.peer == 0 {
                    continue;
                }
                let (Some(mine), Some(theirs)) = (sockets.get(ino), sockets.get(&s.peer)) else {
                    continue; // peer outside the managed set
                };
                let consumers: Vec<i32> = mine.difference(theirs).copied().collect();
                let producers: Vec<i32> = theirs.difference(mine).copied().collect();
                if !consumers.is_empty() && !producers.is_empty() {
                    found.insert(*ino, (s.peer, consumers, producers));
                }
            }
        }
        let gone: Vec<u32> = self
            .socks
            .keys()
            .filter(|k| !found.contains_key(k))
            .copied()
            .collect();
        for k in gone {
            if let Some(q) = self.socks.remove(&k) {
                forget(hsi, at, &q.name, &q.told);
            }
        }
        for (ino, (peer, consumers, producers)) in found {
            let q = self.socks.entry(ino).or_insert_with(|| SockQueue {
                name: format!("unix:{ino}"),
                peer,
                consumers: Vec::new(),
                producers: Vec::new(),
                active: false,
                told: BTreeSet::new(),
            });
            q.peer = peer;
            q.consumers = consumers;
            q.producers = producers;
        }
    }

    /// Samples every socket direction with one batch of `sock_diag`
    /// requests and tells its consumers and producers (`consuming`: the
    /// processes that are no sources). Fill and size are in the kernel's
    /// memory units (`truesize`), see the module documentation.
    fn sample_socks(
        &mut self,
        at: Instant,
        hsi: &mut dyn Sink,
        by_proc: &BTreeMap<i32, Vec<(ThreadId, i32)>>,
        consuming: &BTreeSet<i32>,
    ) {
        if self.socks.is_empty() {
            return;
        }
        // The sending side says it all: its unread data, its `SO_SNDBUF`,
        // and `SEND_SHUTDOWN` once either side shut the direction down or
        // the receiver closed (one lookup per direction: each scans the
        // kernel's table of UNIX sockets, docs/measurements/live-mode.md).
        let inos: BTreeSet<u32> = self.socks.values().map(|q| q.peer).collect();
        let inos: Vec<u32> = inos.into_iter().collect();
        let Some(diag) = self.diag_query(&inos) else {
            return;
        };
        let keys: Vec<u32> = self.socks.keys().copied().collect();
        for key in keys {
            let Some(q) = self.socks.get_mut(&key) else {
                continue;
            };
            // A socket closed since discovery is absent: no sample, and the
            // next discovery drops the queue.
            let Some(tx) = diag.get(&q.peer) else {
                continue;
            };
            if tx.peer != key || tx.sndbuf == 0 || tx.shutdown & SEND_SHUTDOWN != 0 {
                continue;
            }
            if !q.active {
                if tx.wqueue == 0 {
                    continue;
                }
                q.active = true;
            }
            let size = u64::from(tx.sndbuf);
            let fill = u64::from(tx.wqueue).min(size);
            self.stats.samples += 1;
            let mut targets: Vec<(ThreadId, &'static str)> = Vec::new();
            for pid in &q.consumers {
                for &(t, _) in by_proc.get(pid).map_or(&[][..], |v| v) {
                    targets.push((t, "consumer"));
                }
            }
            for pid in &q.producers {
                if !self.report_sources && !consuming.contains(pid) {
                    continue; // a source, as for pipes
                }
                for &(t, _) in by_proc.get(pid).map_or(&[][..], |v| v) {
                    targets.push((t, "producer"));
                }
            }
            let name = q.name.clone();
            let line = self.trace.is_some().then(|| {
                let cons: Vec<String> = q.consumers.iter().map(|c| c.to_string()).collect();
                let prods: Vec<String> = q.producers.iter().map(|p| p.to_string()).collect();
                format!(
                    "q,{:.4},{name},{fill},{size},{},{}",
                    at.0 as f64 / 1e9,
                    cons.join(" "),
                    prods.join(" ")
                )
            });
            let (sent, refused) = report(hsi, at, &name, fill, size, &targets, &mut q.told);
            self.count_reports(sent, refused);
            if let (Some(w), Some(l)) = (self.trace.as_mut(), line) {
                let _ = writeln!(w, "{l}");
            }
        }
    }

    /// Finds the `hsched-progress` queues of processes `procs`: files
    /// `SHM_DIR/<pid>.<queue>` whose `pid` (the producer) is monitored.
    fn discover_shm(&mut self, procs: &[i32], at: Instant, hsi: &mut dyn Sink) {
        let mut found: BTreeMap<String, i32> = BTreeMap::new();
        if let Ok(dir) = std::fs::read_dir(SHM_DIR) {
            for e in dir.flatten() {
                let Some(n) = e.file_name().to_str().map(str::to_string) else {
                    continue;
                };
                let pid = n.split_once('.').and_then(|(p, _)| p.parse::<i32>().ok());
                if let Some(pid) = pid.filter(|p| procs.binary_search(p).is_ok()) {
                    found.insert(n, pid);
                }
            }
        }
        let gone: Vec<String> = self
            .shm
            .keys()
            .filter(|k| !found.contains_key(*k))
            .cloned()
            .collect();
        for k in gone {
            if let Some(q) = self.shm.remove(&k) {
                forget(hsi, at, &q.name, &q.told);
            }
        }
        for (n, pid) in found {
            if self.shm.contains_key(&n) {
                continue;
            }
            match std::fs::File::open(format!("{SHM_DIR}/{n}")) {
                Ok(file) => {
                    self.shm.insert(
                        n.clone(),
                        ShmQueue {
                            name: format!("shm:{n}"),
                            file,
                            producer: pid,
                            told: BTreeSet::new(),
                        },
                    );
                }
                Err(e) => self.warn("shm-open", format!("{SHM_DIR}/{n}: {e}")),
            }
        }
    }

    /// Samples every shared-memory queue's header and tells its consumer
    /// and its producer (a source only with `HSCHED_PROGRESS_SOURCES=1`).
    fn sample_shm(
        &mut self,
        at: Instant,
        hsi: &mut dyn Sink,
        by_proc: &BTreeMap<i32, Vec<(ThreadId, i32)>>,
    ) {
        let keys: Vec<String> = self.shm.keys().cloned().collect();
        // Producers that consume nothing monitored are sources, as for pipes.
        let consumers = self.consuming();
        let mut seen = BTreeSet::new();
        for k in keys {
            let Some(q) = self.shm.get_mut(&k) else {
                continue;
            };
            let mut b = [0u8; SHM_HEADER];
            let h = std::os::unix::fs::FileExt::read_exact_at(&q.file, &mut b, 0)
                .ok()
                .and_then(|()| ShmHeader::decode(&b));
            let Some(h) = h else {
                self.warn("shm-header", format!("{SHM_DIR}/{k} is not a queue"));
                continue;
            };
            self.stats.samples += 1;
            let fill = h.head.wrapping_sub(h.tail).min(h.size);
            let mut targets: Vec<(ThreadId, &'static str)> = Vec::new();
            seen.insert(h.consumer);
            for (pid, role) in [(q.producer, "producer"), (h.consumer, "consumer")] {
                if role == "producer" && !self.report_sources && !consumers.contains(&pid) {
                    continue;
                }
                for &(t, _) in by_proc.get(&pid).map_or(&[][..], |v| v) {
                    targets.push((t, role));
                }
            }
            let name = q.name.clone();
            let (sent, refused) = report(hsi, at, &name, fill, h.size, &targets, &mut q.told);
            self.count_reports(sent, refused);
            if let Some(w) = self.trace.as_mut() {
                let _ = writeln!(
                    w,
                    "q,{:.4},{name},{fill},{},{},{}",
                    at.0 as f64 / 1e9,
                    h.size,
                    h.consumer,
                    h.producer
                );
            }
        }
        self.shm_consumers = seen;
    }

    /// Bytes queued in pipe `key`, or `None` (quietly) when it cannot be read.
    fn sample(&mut self, key: (u64, u64)) -> Option<u64> {
        let mode = self.mode;
        if mode == DupMode::Cached {
            if let Some(fd) = self.queues.get(&key).and_then(|q| q.dup.as_ref()) {
                match fionread(fd.as_raw_fd()) {
                    Ok(n) => return Some(n),
                    Err(e) => {
                        self.warn("fionread", format!("FIONREAD: {e}"));
                        return None;
                    }
                }
            }
        }
        let consumers = self.queues.get(&key)?.consumers.clone();
        let mut last_err = None;
        for (pid, fd) in consumers {
            match self.dup_read_end(pid, fd, key) {
                Ok(dup) => {
                    let n = match fionread(dup.as_raw_fd()) {
                        Ok(n) => n,
                        Err(e) => {
                            last_err = Some(("fionread", format!("FIONREAD: {e}")));
                            continue;
                        }
                    };
                    let q = self.queues.get_mut(&key)?;
                    if q.size == 0 || mode == DupMode::Redup {
                        q.size = pipe_size(dup.as_raw_fd()).unwrap_or(65536);
                    }
                    if mode == DupMode::Cached {
                        q.dup = Some(dup);
                    }
                    return Some(n);
                }
                Err(e) => last_err = Some(e),
            }
        }
        if let Some((k, m)) = last_err {
            self.warn(k, m);
        }
        None
    }

    /// A copy of descriptor `fd` of process `pid`, checked to be pipe `key`
    /// (the number may have been reused since discovery).
    fn dup_read_end(
        &mut self,
        pid: i32,
        fd: RawFd,
        key: (u64, u64),
    ) -> Result<OwnedFd, (&'static str, String)> {
        let pidfd = match self.pidfds.entry(pid) {
            std::collections::btree_map::Entry::Occupied(e) => e.get().as_raw_fd(),
            std::collections::btree_map::Entry::Vacant(e) => e
                .insert(
                    crate::sys::pidfd_open(pid)
                        .map_err(|e| ("pidfd_open", format!("pidfd_open({pid}): {e}")))?,
                )
                .as_raw_fd(),
        };
        let dup = pidfd_getfd(pidfd, fd)
            .map_err(|e| ("pidfd_getfd", format!("pidfd_getfd({pid}, {fd}): {e}")))?;
        let f = std::fs::File::from(dup);
        let md = f
            .metadata()
            .map_err(|e| ("fstat", format!("fstat of a copied descriptor: {e}")))?;
        if (md.dev(), md.ino()) != key {
            return Err((
                "reused",
                format!("descriptor {fd} of {pid} is no longer the pipe"),
            ));
        }
        Ok(OwnedFd::from(f))
    }

    /// Trace lines: each monitored thread's proportion, CPU time and its
    /// process's bytes read and written.
    fn trace_threads(
        &mut self,
        at: Instant,
        hsi: &dyn Sink,
        by_proc: &BTreeMap<i32, Vec<(ThreadId, i32)>>,
    ) {
        let Some(w) = self.trace.as_mut() else {
            return;
        };
        for (pid, ts) in by_proc {
            let (rchar, wchar) = proc_io(*pid).unwrap_or((0, 0));
            for &(t, tid) in ts {
                let (name, proportion) = hsi.traced(t);
                let _ = writeln!(
                    w,
                    "p,{:.4},{},{},{},{},{},{}",
                    at.0 as f64 / 1e9,
                    name,
                    proportion,
                    crate::enforce::proc_cpu_ns(tid).unwrap_or(0),
                    rchar,
                    wchar,
                    pid
                );
            }
        }
        let _ = w.flush();
    }
}

impl Drop for ProgressMonitor {
    /// Ends the trace with the monitor's counters.
    fn drop(&mut self) {
        let s = self.stats.clone();
        if let Some(w) = self.trace.as_mut() {
            let _ = writeln!(
                w,
                "# stats,mode={:?},period_ns={},ticks={},discoveries={},samples={},messages={},\
                 errors={},discover_ns={},sample_ns={},socket_ns={}",
                self.mode,
                self.period_ns,
                s.ticks,
                s.discoveries,
                s.samples,
                s.messages,
                s.errors,
                s.discover_ns,
                s.sample_ns,
                s.socket_ns
            );
            let _ = w.flush();
        }
    }
}

/// Directory of the `hsched-progress` shared-memory queues
/// (`crates/progress`; the layout below must match it).
pub const SHM_DIR: &str = "/dev/shm/hsched-progress";
const SHM_HEADER: usize = 64;
const SHM_MAGIC: u64 = u64::from_le_bytes(*b"hschedPQ");

/// The fields of a queue header the monitor uses (layout: `hsched-progress`
/// crate documentation).
struct ShmHeader {
    size: u64,
    head: u64,
    tail: u64,
    producer: i32,
    consumer: i32,
}

impl ShmHeader {
    fn decode(b: &[u8; SHM_HEADER]) -> Option<ShmHeader> {
        let u64_at = |o: usize| u64::from_le_bytes(b[o..o + 8].try_into().unwrap_or([0; 8]));
        let i32_at = |o: usize| i32::from_le_bytes(b[o..o + 4].try_into().unwrap_or([0; 4]));
        (u64_at(0) == SHM_MAGIC && i32_at(8) == 1 && u64_at(16) > 0).then(|| ShmHeader {
            size: u64_at(16),
            head: u64_at(24),
            tail: u64_at(32),
            producer: i32_at(40),
            consumer: i32_at(44),
        })
    }
}

/// Sends one progress message about thread `t`.
fn send(
    hsi: &mut dyn Sink,
    at: Instant,
    t: ThreadId,
    queue: &str,
    fill: u64,
    size: u64,
    role: &str,
) -> Result<(), String> {
    let msg = Msg::App {
        kind: "progress".into(),
        params: Params::new()
            .with("queue", ParamValue::Str(queue.to_string()))
            .with("fill", ParamValue::Float(fill as f64))
            .with("size", ParamValue::Float(size as f64))
            .with("role", ParamValue::Str(role.into())),
    };
    hsi.progress(at, t, &msg)
}

/// Sends one sample of queue `name` about each of `targets`, and tells the
/// threads told before but no longer among them to forget the queue. A
/// process that gives up its end while the queue lives on (a shell that
/// forks a stage and closes its copy of the pipe, then becomes the next
/// stage) would otherwise keep the last fill level it was told for good:
/// an empty pipe's −½ held against a full one's +½ left a pipeline's sink
/// without pressure at half its rate. Returns the messages sent and the
/// last refusal.
fn report(
    hsi: &mut dyn Sink,
    at: Instant,
    name: &str,
    fill: u64,
    size: u64,
    targets: &[(ThreadId, &'static str)],
    told: &mut BTreeSet<ThreadId>,
) -> (u64, Option<String>) {
    let stale: Vec<ThreadId> = told
        .iter()
        .filter(|t| !targets.iter().any(|(u, _)| u == *t))
        .copied()
        .collect();
    if !stale.is_empty() {
        forget(hsi, at, name, &stale);
        told.retain(|t| !stale.contains(t));
    }
    let (mut sent, mut refused) = (0, None);
    for &(t, role) in targets {
        match send(hsi, at, t, name, fill, size, role) {
            Ok(()) => {
                sent += 1;
                told.insert(t);
            }
            Err(e) => refused = Some(e),
        }
    }
    (sent, refused)
}

/// Tells threads `told` that queue `name` is gone (`remove = true`).
fn forget<'a>(
    hsi: &mut dyn Sink,
    at: Instant,
    name: &str,
    told: impl IntoIterator<Item = &'a ThreadId>,
) {
    let msg = Msg::App {
        kind: "progress".into(),
        params: Params::new()
            .with("queue", ParamValue::Str(name.to_string()))
            .with("remove", ParamValue::Bool(true)),
    };
    for &t in told {
        // A thread that exited is no longer live: nothing to tell.
        if hsi.live(t) {
            let _ = hsi.progress(at, t, &msg);
        }
    }
}

/// Where the monitor's progress messages go.
pub(crate) trait Sink {
    /// Delivers a progress message about thread `t` at `at`.
    ///
    /// # Errors
    /// The scheduler refused it.
    fn progress(&mut self, at: Instant, t: ThreadId, msg: &Msg) -> Result<(), String>;
    /// Whether `t` still lives (one that exited needs no removal).
    fn live(&self, t: ThreadId) -> bool;
    /// For the trace: `t`'s name and its proportion now (NaN unknown).
    fn traced(&self, t: ThreadId) -> (String, f64);
}

/// The user backend's sink: the HSI, whose `realrate` instances get the
/// messages as `Msg::App` about their child VPs.
struct HsiSink<'a> {
    hsi: &'a mut Hsi,
    insts: Vec<InstanceId>,
}

impl Sink for HsiSink<'_> {
    fn progress(&mut self, at: Instant, t: ThreadId, msg: &Msg) -> Result<(), String> {
        self.hsi.thread_msg(at, t, msg).map_err(|e| e.to_string())
    }

    fn live(&self, t: ThreadId) -> bool {
        self.hsi.thread_live(t)
    }

    /// The proportion from the instance's `describe` (`[vp class P%/…]`).
    fn traced(&self, t: ThreadId) -> (String, f64) {
        let vp = self.hsi.thread_vp(t).to_string();
        let mut proportion = f64::NAN;
        for &i in &self.insts {
            let Some(p) = self.hsi.instance_policy(i) else {
                continue;
            };
            for part in p.describe().split('[').skip(1) {
                let mut w = part.split_whitespace();
                let (Some(v), Some(_class), Some(pp)) = (w.next(), w.next(), w.next()) else {
                    continue;
                };
                if v == vp {
                    if let Some(x) = pp.split('%').next().and_then(|s| s.parse::<f64>().ok()) {
                        proportion = x / 100.0;
                    }
                }
            }
        }
        (self.hsi.thread_name(t).to_string(), proportion)
    }
}

/// The live `realrate` instances of `hsi`.
fn realrate_instances(hsi: &Hsi) -> Vec<InstanceId> {
    hsi.instances()
        .filter(|&i| {
            hsi.instance_policy(i)
                .is_some_and(|p| p.policy_name() == POLICY)
        })
        .collect()
}

/// `O_ACCMODE` bits of descriptor `fd` of `pid`, from `/proc/PID/fdinfo`.
fn fd_access_mode(pid: i32, fd: RawFd) -> Option<i32> {
    let info = std::fs::read_to_string(format!("/proc/{pid}/fdinfo/{fd}")).ok()?;
    let flags = info.lines().find_map(|l| l.strip_prefix("flags:"))?.trim();
    i32::from_str_radix(flags, 8)
        .ok()
        .map(|f| f & libc::O_ACCMODE)
}

/// `rchar` and `wchar` of process `pid` (`/proc/PID/io`): bytes it passed
/// to `read` and `write`, the pipeline's throughput seen from outside.
pub fn proc_io(pid: i32) -> Option<(u64, u64)> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/io")).ok()?;
    let field = |k: &str| {
        s.lines()
            .find_map(|l| l.strip_prefix(k))
            .and_then(|v| v.trim().parse().ok())
    };
    Some((field("rchar:")?, field("wchar:")?))
}

/// `pidfd_getfd(2)`: a copy of descriptor `fd` of the process behind `pidfd`.
fn pidfd_getfd(pidfd: RawFd, fd: RawFd) -> io::Result<OwnedFd> {
    // SAFETY: plain system call with integer arguments; on success the
    // kernel returns a new descriptor that nothing else owns (it is opened
    // close-on-exec).
    let r = unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd, fd, 0u32) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `r` is a fresh descriptor owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(r as RawFd) })
}

/// Bytes queued in a pipe (`ioctl(FIONREAD)`).
fn fionread(fd: RawFd) -> io::Result<u64> {
    let mut n: libc::c_int = 0;
    // SAFETY: FIONREAD writes one int through the pointer, which is valid
    // and writable for the call.
    let r = unsafe { libc::ioctl(fd, libc::FIONREAD as _, &mut n as *mut libc::c_int) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n.max(0) as u64)
}

/// A pipe's capacity in bytes (`fcntl(F_GETPIPE_SZ)`).
fn pipe_size(fd: RawFd) -> io::Result<u64> {
    // SAFETY: F_GETPIPE_SZ takes no pointer; no memory effects.
    let r = unsafe { libc::fcntl(fd, libc::F_GETPIPE_SZ) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(r as u64)
}

/// One UNIX-domain socket as `sock_diag` describes it (`linux/unix_diag.h`:
/// `unix_diag_msg` with the `UNIX_DIAG_PEER`, `_RQLEN`, `_MEMINFO` and
/// `_SHUTDOWN` attributes).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct UnixSock {
    /// `SOCK_STREAM`, `SOCK_DGRAM` or `SOCK_SEQPACKET`.
    kind: u8,
    /// The peer's inode (0: none).
    peer: u32,
    /// Payload bytes in the receive queue (`unix_inq_len`, what `FIONREAD`
    /// says).
    rqueue: u32,
    /// Memory (`truesize`) of the data this socket sent that its peer has
    /// not read yet (`sk_wmem_alloc`, what `SIOCOUTQ` says).
    wqueue: u32,
    /// `SO_SNDBUF`: a writer blocks while `wqueue` is at least this.
    sndbuf: u32,
    /// `RCV_SHUTDOWN` (1) and `SEND_SHUTDOWN` (2) bits.
    shutdown: u8,
}

const SOCK_DIAG_BY_FAMILY: u16 = 20;
const NLM_F_REQUEST: u16 = 1;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const NLMSG_HDR: usize = 16;
const UDIAG_SHOW_PEER: u32 = 0x04;
const UDIAG_SHOW_RQLEN: u32 = 0x10;
const UDIAG_SHOW_MEMINFO: u32 = 0x20;
const UNIX_DIAG_PEER: u16 = 2;
const UNIX_DIAG_RQLEN: u16 = 4;
const UNIX_DIAG_MEMINFO: u16 = 5;
const UNIX_DIAG_SHUTDOWN: u16 = 6;
/// Index of `SK_MEMINFO_SNDBUF` in the `UNIX_DIAG_MEMINFO` array.
const SK_MEMINFO_SNDBUF: usize = 3;
#[cfg(test)]
const RCV_SHUTDOWN: u8 = 1;
const SEND_SHUTDOWN: u8 = 2;
/// `sock_diag` requests sent in one `send` (each reply is one message of
/// about 100 bytes, so the replies of a batch fit the receive buffer).
const DIAG_BATCH: usize = 64;

/// A `NETLINK_SOCK_DIAG` socket asking the kernel about UNIX sockets by
/// inode: no descriptor of the programs is touched or held.
struct SockDiag {
    fd: OwnedFd,
    seq: u32,
    buf: Vec<u8>,
}

impl SockDiag {
    fn open() -> io::Result<SockDiag> {
        let fd = crate::sys::netlink_socket(libc::NETLINK_SOCK_DIAG, false)?;
        // The kernel answers within the `send`; the timeout only bounds a
        // daemon tick should it ever not.
        let tv = libc::timeval {
            tv_sec: 0,
            tv_usec: 100_000,
        };
        // SAFETY: the option value points to a valid `timeval` of the
        // length given, read during the call only.
        let r = unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVTIMEO,
                &tv as *const libc::timeval as *const libc::c_void,
                std::mem::size_of::<libc::timeval>() as libc::socklen_t,
            )
        };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(SockDiag {
            fd,
            seq: 0,
            buf: vec![0; 64 * 1024],
        })
    }

    /// The UNIX sockets among inodes `inos` (one exact request each,
    /// batched): inodes that are no UNIX socket of this network namespace,
    /// or no longer exist, are simply absent from the answer.
    fn query(&mut self, inos: &[u32]) -> io::Result<BTreeMap<u32, UnixSock>> {
        let mut out = BTreeMap::new();
        for batch in inos.chunks(DIAG_BATCH) {
            self.query_batch(batch, &mut out)?;
        }
        Ok(out)
    }

    fn query_batch(&mut self, inos: &[u32], out: &mut BTreeMap<u32, UnixSock>) -> io::Result<()> {
        let base = self.seq;
        self.seq = self.seq.wrapping_add(inos.len() as u32);
        let mut req = Vec::with_capacity(inos.len() * 40);
        for (i, &ino) in inos.iter().enumerate() {
            req.extend_from_slice(&diag_request(ino, base.wrapping_add(i as u32)));
        }
        // SAFETY: the buffer is valid for reads of its length during the
        // call; with no address a netlink socket sends to the kernel.
        let r = unsafe {
            libc::send(
                self.fd.as_raw_fd(),
                req.as_ptr() as *const libc::c_void,
                req.len(),
                0,
            )
        };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        // Every request gets exactly one message: the socket, or an error
        // (ENOENT: no such UNIX socket).
        let mut answered = 0;
        while answered < inos.len() {
            // SAFETY: the buffer is valid for writes of its length during
            // the call.
            let n = unsafe {
                libc::recv(
                    self.fd.as_raw_fd(),
                    self.buf.as_mut_ptr() as *mut libc::c_void,
                    self.buf.len(),
                    0,
                )
            };
            if n < 0 {
                return Err(io::Error::last_os_error());
            }
            for (seq, m) in parse_diag(&self.buf[..n as usize])? {
                // Replies to an earlier, abandoned batch are dropped.
                if seq.wrapping_sub(base) < inos.len() as u32 {
                    answered += 1;
                    if let Some((ino, s)) = m {
                        out.insert(ino, s);
                    }
                }
            }
        }
        Ok(())
    }
}

/// An exact `unix_diag_req` for inode `ino` (cookie ignored).
fn diag_request(ino: u32, seq: u32) -> [u8; 40] {
    let mut b = [0u8; 40];
    b[0..4].copy_from_slice(&40u32.to_ne_bytes());
    b[4..6].copy_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
    b[6..8].copy_from_slice(&NLM_F_REQUEST.to_ne_bytes());
    b[8..12].copy_from_slice(&seq.to_ne_bytes());
    // unix_diag_req: family, protocol, pad, states, ino, show, cookie[2].
    b[16] = libc::AF_UNIX as u8;
    b[20..24].copy_from_slice(&u32::MAX.to_ne_bytes());
    b[24..28].copy_from_slice(&ino.to_ne_bytes());
    let show = UDIAG_SHOW_PEER | UDIAG_SHOW_RQLEN | UDIAG_SHOW_MEMINFO;
    b[28..32].copy_from_slice(&show.to_ne_bytes());
    b[32..40].copy_from_slice(&[0xff; 8]);
    b
}

/// The messages of one netlink datagram: `(seq, Some((inode, socket)))` for
/// a socket, `(seq, None)` for an error reply or the end of a dump.
#[allow(clippy::type_complexity)]
fn parse_diag(b: &[u8]) -> io::Result<Vec<(u32, Option<(u32, UnixSock)>)>> {
    let bad = |what: &str| io::Error::new(io::ErrorKind::InvalidData, format!("sock_diag: {what}"));
    let u16_at = |o: usize| u16::from_ne_bytes([b[o], b[o + 1]]);
    let u32_at = |o: usize| u32::from_ne_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]);
    let mut out = Vec::new();
    let mut off = 0;
    while off + NLMSG_HDR <= b.len() {
        let len = u32_at(off) as usize;
        if len < NLMSG_HDR || off + len > b.len() {
            return Err(bad("truncated message"));
        }
        let (kind, seq) = (u16_at(off + 4), u32_at(off + 8));
        match kind {
            NLMSG_ERROR | NLMSG_DONE => out.push((seq, None)),
            SOCK_DIAG_BY_FAMILY => {
                // unix_diag_msg: family, type, state, pad, ino, cookie[2].
                let p = off + NLMSG_HDR;
                if len < NLMSG_HDR + 16 {
                    return Err(bad("short unix_diag_msg"));
                }
                let mut s = UnixSock {
                    kind: b[p + 1],
                    ..UnixSock::default()
                };
                let ino = u32_at(p + 4);
                let mut a = p + 16;
                while a + 4 <= off + len {
                    let alen = u16_at(a) as usize;
                    if alen < 4 || a + alen > off + len {
                        return Err(bad("bad attribute"));
                    }
                    let (d, dlen) = (a + 4, alen - 4);
                    match (u16_at(a + 2) & 0x3fff, dlen) {
                        (UNIX_DIAG_PEER, 4..) => s.peer = u32_at(d),
                        (UNIX_DIAG_RQLEN, 8..) => {
                            s.rqueue = u32_at(d);
                            s.wqueue = u32_at(d + 4);
                        }
                        (UNIX_DIAG_MEMINFO, l) if l >= 4 * (SK_MEMINFO_SNDBUF + 1) => {
                            s.sndbuf = u32_at(d + 4 * SK_MEMINFO_SNDBUF)
                        }
                        (UNIX_DIAG_SHUTDOWN, 1..) => s.shutdown = b[d],
                        _ => {}
                    }
                    a += (alen + 3) & !3;
                }
                out.push((seq, Some((ino, s))));
            }
            _ => {}
        }
        off += (len + 3) & !3;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pipe() -> (OwnedFd, OwnedFd) {
        crate::sys::pipe().unwrap()
    }

    #[test]
    fn fionread_and_pipe_size_read_a_pipe() {
        let (r, w) = pipe();
        assert_eq!(fionread(r.as_raw_fd()).unwrap(), 0);
        crate::sys::write_all(w.as_raw_fd(), &[7u8; 1000]).unwrap();
        assert_eq!(fionread(r.as_raw_fd()).unwrap(), 1000);
        let sz = pipe_size(r.as_raw_fd()).unwrap();
        assert!(sz >= 4096, "pipe size {sz}");
    }

    #[test]
    fn fdinfo_tells_the_read_end_from_the_write_end() {
        let (r, w) = pipe();
        let me = std::process::id() as i32;
        assert_eq!(fd_access_mode(me, r.as_raw_fd()), Some(libc::O_RDONLY));
        assert_eq!(fd_access_mode(me, w.as_raw_fd()), Some(libc::O_WRONLY));
        assert_eq!(fd_access_mode(me, 1_000_000), None);
    }

    #[test]
    fn a_copied_read_end_sees_the_same_bytes_and_keeps_eof() {
        let (r, w) = pipe();
        let me = std::process::id() as i32;
        let key = {
            let md = std::fs::metadata(format!("/proc/{me}/fd/{}", r.as_raw_fd())).unwrap();
            assert!(md.file_type().is_fifo());
            (md.dev(), md.ino())
        };
        let mut m = ProgressMonitor::new(Duration(DEFAULT_PERIOD_NS), DupMode::Cached);
        let dup = match m.dup_read_end(me, r.as_raw_fd(), key) {
            Ok(d) => d,
            // pidfd_getfd needs Linux >= 5.6 and ptrace rights over oneself.
            Err((_, e)) => {
                eprintln!("SKIPPED: {e}");
                return;
            }
        };
        crate::sys::write_all(w.as_raw_fd(), b"hello").unwrap();
        assert_eq!(fionread(dup.as_raw_fd()).unwrap(), 5);
        // A copy of the read end does not hold the pipe open for writing:
        // the reader still sees end-of-file once the writer closes.
        drop(w);
        let mut b = [0u8; 16];
        assert_eq!(crate::sys::read(r.as_raw_fd(), &mut b).unwrap(), 5);
        assert_eq!(crate::sys::read(r.as_raw_fd(), &mut b).unwrap(), 0);
        // A descriptor number that is another file is refused.
        let other = m.dup_read_end(me, 0, key);
        assert!(other.is_err());
    }

    #[test]
    fn a_shared_memory_header_decodes_and_a_bad_one_is_refused() {
        let mut b = [0u8; SHM_HEADER];
        b[0..8].copy_from_slice(b"hschedPQ");
        b[8..12].copy_from_slice(&1u32.to_le_bytes());
        b[16..24].copy_from_slice(&4096u64.to_le_bytes());
        b[24..32].copy_from_slice(&10_000u64.to_le_bytes());
        b[32..40].copy_from_slice(&9_000u64.to_le_bytes());
        b[40..44].copy_from_slice(&123i32.to_le_bytes());
        b[44..48].copy_from_slice(&456i32.to_le_bytes());
        let h = ShmHeader::decode(&b).unwrap();
        assert_eq!(
            (h.size, h.head - h.tail, h.producer, h.consumer),
            (4096, 1000, 123, 456)
        );
        b[8] = 2; // another version
        assert!(ShmHeader::decode(&b).is_none());
        b[8] = 1;
        b[0] = b'X'; // not a queue
        assert!(ShmHeader::decode(&b).is_none());
    }

    fn sock_ino(fd: &impl AsRawFd) -> u32 {
        let md = std::fs::metadata(format!("/proc/self/fd/{}", fd.as_raw_fd())).unwrap();
        assert!(md.file_type().is_socket());
        u32::try_from(md.ino()).unwrap()
    }

    fn so_sndbuf(fd: &impl AsRawFd) -> u32 {
        let mut v: libc::c_int = 0;
        let mut l = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: value and length point to valid, writable locals.
        let r = unsafe {
            libc::getsockopt(
                fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_SNDBUF,
                &mut v as *mut libc::c_int as *mut libc::c_void,
                &mut l,
            )
        };
        assert_eq!(r, 0);
        v as u32
    }

    /// `sock_diag`, or `None` with a message where the kernel has no
    /// `unix_diag` (CONFIG_UNIX_DIAG).
    fn diag() -> Option<SockDiag> {
        let mut d = match SockDiag::open() {
            Ok(d) => d,
            Err(e) => {
                eprintln!("SKIPPED: no NETLINK_SOCK_DIAG: {e}");
                return None;
            }
        };
        let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
        match d.query(&[sock_ino(&a)]) {
            Ok(m) if !m.is_empty() => Some(d),
            r => {
                eprintln!("SKIPPED: no unix_diag: {r:?}");
                None
            }
        }
    }

    #[test]
    fn sock_diag_pairs_a_socketpair_and_reads_its_queues() {
        let Some(mut d) = diag() else { return };
        let (mut a, b) = std::os::unix::net::UnixStream::pair().unwrap();
        let (ia, ib) = (sock_ino(&a), sock_ino(&b));
        std::io::Write::write_all(&mut a, &[5u8; 1000]).unwrap();
        // An inode that is no UNIX socket (a pipe's) is absent, not an error.
        let (r, _w) = pipe();
        let ip = u32::try_from(
            std::fs::metadata(format!("/proc/self/fd/{}", r.as_raw_fd()))
                .unwrap()
                .ino(),
        )
        .unwrap();
        let m = d.query(&[ia, ib, ip]).unwrap();
        assert_eq!(m.len(), 2, "{m:?}");
        let (sa, sb) = (m[&ia], m[&ib]);
        assert_eq!((sa.peer, sb.peer), (ib, ia));
        assert_eq!(sa.kind, libc::SOCK_STREAM as u8);
        // b has the 1000 bytes to read (what FIONREAD says); a's memory
        // charge for them is larger (skb truesize).
        assert_eq!(fionread(b.as_raw_fd()).unwrap(), 1000);
        assert_eq!((sb.rqueue, sa.rqueue), (1000, 0));
        assert!(sa.wqueue > 1000 && sb.wqueue == 0, "{sa:?} {sb:?}");
        assert_eq!(sa.sndbuf, so_sndbuf(&a));
        assert_eq!(sa.shutdown, 0);
        // The receiver shutting down reading shows on the sender too, which
        // is all a sample asks about.
        b.shutdown(std::net::Shutdown::Read).unwrap();
        let m = d.query(&[ia, ib]).unwrap();
        assert_eq!(m[&ib].shutdown & RCV_SHUTDOWN, RCV_SHUTDOWN);
        assert_eq!(m[&ia].shutdown & SEND_SHUTDOWN, SEND_SHUTDOWN);
        // So does its closing.
        let (c, e) = std::os::unix::net::UnixStream::pair().unwrap();
        let ic = sock_ino(&c);
        drop(e);
        assert_eq!(
            d.query(&[ic]).unwrap()[&ic].shutdown & SEND_SHUTDOWN,
            SEND_SHUTDOWN
        );
        // A listening socket's accepted connection pairs with its client.
        let path = std::env::temp_dir().join(format!("hsched-diag-{}.sock", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let l = std::os::unix::net::UnixListener::bind(&path).unwrap();
        let client = std::os::unix::net::UnixStream::connect(&path).unwrap();
        let (server, _) = l.accept().unwrap();
        let _ = std::fs::remove_file(&path);
        let (ic, is, il) = (sock_ino(&client), sock_ino(&server), sock_ino(&l));
        let m = d.query(&[ic, is, il]).unwrap();
        assert_eq!((m[&ic].peer, m[&is].peer, m[&il].peer), (is, ic, 0));
        // Many batches in one query.
        let pairs: Vec<_> = (0..70)
            .map(|_| std::os::unix::net::UnixStream::pair().unwrap())
            .collect();
        let inos: Vec<u32> = pairs.iter().map(|p| sock_ino(&p.0)).collect();
        assert_eq!(d.query(&inos).unwrap().len(), 70);
    }

    /// What "full" means: a stream writer blocks when the memory of its
    /// unread data (`wqueue`, truesize) reaches its `SO_SNDBUF`; the payload
    /// queued at that moment (FIONREAD) depends on the write size.
    #[test]
    fn a_socket_writer_blocks_when_its_unread_memory_reaches_sndbuf() {
        let Some(mut d) = diag() else { return };
        let mut seen = Vec::new();
        for w in [1usize, 100, 4096, 65536] {
            let (mut a, b) = std::os::unix::net::UnixStream::pair().unwrap();
            a.set_nonblocking(true).unwrap();
            let chunk = vec![0u8; w];
            let mut sent = 0u64;
            loop {
                match std::io::Write::write(&mut a, &chunk) {
                    Ok(n) => sent += n as u64,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) => panic!("{e}"),
                }
            }
            let (ia, ib) = (sock_ino(&a), sock_ino(&b));
            let m = d.query(&[ia, ib]).unwrap();
            let (tx, rx) = (m[&ia], m[&ib]);
            let queued = fionread(b.as_raw_fd()).unwrap();
            eprintln!(
                "write {w}: FIONREAD {queued}, rqueue {}, wqueue {}, sndbuf {}, payload/sndbuf {:.3}",
                rx.rqueue,
                tx.wqueue,
                tx.sndbuf,
                queued as f64 / f64::from(tx.sndbuf)
            );
            assert_eq!((u64::from(rx.rqueue), queued), (sent, sent));
            // Blocked: the memory charge reached SO_SNDBUF, overshooting
            // by at most the last write's charge.
            assert!(tx.wqueue >= tx.sndbuf, "write {w}: {tx:?}");
            assert!(
                u64::from(tx.wqueue) < u64::from(tx.sndbuf) + 2 * w as u64 + 4096,
                "write {w}: {tx:?}"
            );
            seen.push(queued as f64 / f64::from(tx.sndbuf));
        }
        // Payload is no measure of fullness: one-byte writes block the
        // writer with well under 1 % of SO_SNDBUF queued, 4 KiB writes
        // with most of it.
        assert!(seen[0] < 0.01 && seen[2] > 0.5, "{seen:?}");
    }

    #[test]
    fn discovery_pairs_sockets_between_processes_and_ignores_outsiders() {
        if diag().is_none() {
            return;
        }
        let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
        let (ia, ib) = (sock_ino(&a), sock_ino(&b));
        let (c, _d) = std::os::unix::net::UnixStream::pair().unwrap();
        let ic = sock_ino(&c);
        // Two fake processes 1 and 2 (holders come from /proc in a run).
        let holders: BTreeMap<u32, BTreeSet<i32>> = [
            (ia, BTreeSet::from([1])),
            (ib, BTreeSet::from([2])),
            // c's peer is held by nobody managed: no queue.
            (ic, BTreeSet::from([1])),
        ]
        .into_iter()
        .collect();
        let mut m = ProgressMonitor::new(Duration(DEFAULT_PERIOD_NS), DupMode::Cached);
        let mut hsi = Hsi::new(1);
        let mut hsi = HsiSink {
            hsi: &mut hsi,
            insts: Vec::new(),
        };
        m.discover_sockets(&holders, Instant(0), &mut hsi);
        let got: Vec<(u32, u32, Vec<i32>, Vec<i32>)> = m
            .socks
            .iter()
            .map(|(&k, q)| (k, q.peer, q.consumers.clone(), q.producers.clone()))
            .collect();
        let mut want = vec![(ia, ib, vec![1], vec![2]), (ib, ia, vec![2], vec![1])];
        want.sort();
        assert_eq!(got, want);
        assert!(m.socks.values().all(|q| !q.active));
        // Only a direction that carried data makes its reader a consumer
        // (who is then no source for the sources rule).
        assert!(m.consuming().is_empty());
        if let Some(q) = m.socks.get_mut(&ib) {
            q.active = true;
        }
        assert_eq!(m.consuming(), BTreeSet::from([2]));
        // A process holding both ends is neither consumer nor producer.
        let both: BTreeMap<u32, BTreeSet<i32>> =
            [(ia, BTreeSet::from([1, 2])), (ib, BTreeSet::from([2]))]
                .into_iter()
                .collect();
        m.discover_sockets(&both, Instant(0), &mut hsi);
        assert!(
            m.socks.is_empty(),
            "{:?}",
            m.socks.keys().collect::<Vec<_>>()
        );
        assert_eq!(m.stats.errors, 0);
    }

    /// CPU share of a CPU-bound `sink` beside a CPU-bound misc `hog` under
    /// `realrate`, told that it consumes an empty pipe `a` and a full pipe
    /// `b`, after `a`'s sample tells it again (`still_a_consumer`) or no
    /// longer names it.
    fn sink_share(still_a_consumer: bool) -> f64 {
        use hsched_core::testing::{Behaviour, Driver};
        use hsched_core::{CpuId, ParentLink, ParentRef};
        let mut hsi = Hsi::new(1);
        let top = vec![ParentLink {
            parent: ParentRef::Top {
                cpus: vec![CpuId(0)],
            },
            params: Params::new(),
        }];
        let rr = hsched_policies::build(POLICY, &Params::new()).unwrap();
        let rr = hsi.create_instance(Instant::ZERO, "rr", rr, top).unwrap();
        let sink = hsi
            .create_thread(Instant::ZERO, "sink", rr, Params::new())
            .unwrap();
        let hog = hsi
            .create_thread(Instant::ZERO, "hog", rr, Params::new())
            .unwrap();
        let (mut told_a, mut told_b) = (BTreeSet::new(), BTreeSet::new());
        let me = [(sink, "consumer")];
        let at = Instant::ZERO;
        let mut s = HsiSink {
            hsi: &mut hsi,
            insts: vec![rr],
        };
        assert_eq!(report(&mut s, at, "a", 0, 64, &me, &mut told_a).0, 1);
        assert_eq!(report(&mut s, at, "b", 64, 64, &me, &mut told_b).0, 1);
        let again: &[(ThreadId, &str)] = if still_a_consumer { &me } else { &[] };
        let (sent, refused) = report(&mut s, at, "a", 0, 64, again, &mut told_a);
        assert!(refused.is_none());
        assert_eq!(sent, u64::from(still_a_consumer));
        assert_eq!(told_a.contains(&sink), still_a_consumer);
        let mut d = Driver::new(hsi);
        d.add(sink, Behaviour::CpuBound).unwrap();
        d.add(hog, Behaviour::CpuBound).unwrap();
        let run = Duration::from_millis(2000);
        d.run_until(Instant::ZERO + run).unwrap();
        d.hsi.thread_received(sink).as_secs_f64() / run.as_secs_f64()
    }

    /// A process that gives up its end of a pipe that lives on (the shell
    /// of `source | filter`, between its fork and its close, then `exec`ed
    /// as the sink) is told to forget the pipe. Kept, the empty pipe's −½
    /// cancelled the full input's +½ and the sink stayed at its initial
    /// proportion while the hog took the rest.
    #[test]
    fn a_thread_no_longer_at_a_queue_forgets_it() {
        let forgot = sink_share(false);
        let stale = sink_share(true);
        assert!(forgot > 0.5, "sink share {forgot} after forgetting `a`");
        assert!(stale < 0.15, "sink share {stale} still told about `a`");
    }

    #[test]
    fn a_diag_reply_parses_and_a_truncated_one_is_refused() {
        let mut b = Vec::new();
        let mut msg = Vec::new();
        msg.extend_from_slice(&[libc::AF_UNIX as u8, libc::SOCK_STREAM as u8, 1, 0]);
        msg.extend_from_slice(&77u32.to_ne_bytes());
        msg.extend_from_slice(&[0; 8]);
        let attr = |t: u16, d: &[u8], m: &mut Vec<u8>| {
            m.extend_from_slice(&(4 + d.len() as u16).to_ne_bytes());
            m.extend_from_slice(&t.to_ne_bytes());
            m.extend_from_slice(d);
            while !m.len().is_multiple_of(4) {
                m.push(0);
            }
        };
        attr(UNIX_DIAG_PEER, &78u32.to_ne_bytes(), &mut msg);
        let rq: Vec<u8> = [10u32, 20].iter().flat_map(|v| v.to_ne_bytes()).collect();
        attr(UNIX_DIAG_RQLEN, &rq, &mut msg);
        let mi: Vec<u8> = [0u32, 1, 2, 3000, 4, 5, 6, 7, 8]
            .iter()
            .flat_map(|v| v.to_ne_bytes())
            .collect();
        attr(UNIX_DIAG_MEMINFO, &mi, &mut msg);
        attr(UNIX_DIAG_SHUTDOWN, &[2], &mut msg);
        attr(99, &[1, 2, 3], &mut msg); // unknown: skipped
        b.extend_from_slice(&((16 + msg.len()) as u32).to_ne_bytes());
        b.extend_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
        b.extend_from_slice(&[0; 2]);
        b.extend_from_slice(&9u32.to_ne_bytes());
        b.extend_from_slice(&[0; 4]);
        b.extend_from_slice(&msg);
        let got = parse_diag(&b).unwrap();
        let want = UnixSock {
            kind: libc::SOCK_STREAM as u8,
            peer: 78,
            rqueue: 10,
            wqueue: 20,
            sndbuf: 3000,
            shutdown: 2,
        };
        assert_eq!(got, vec![(9, Some((77, want)))]);
        assert!(parse_diag(&b[..b.len() - 4]).is_err());
        let mut err = b[..16].to_vec();
        err[0..4].copy_from_slice(&20u32.to_ne_bytes());
        err[4..6].copy_from_slice(&NLMSG_ERROR.to_ne_bytes());
        err.extend_from_slice(&(-2i32).to_ne_bytes());
        assert_eq!(parse_diag(&err).unwrap(), vec![(9, None)]);
    }

    #[test]
    fn proc_io_counts_bytes_written() {
        let me = std::process::id() as i32;
        let (_, w0) = proc_io(me).unwrap();
        let (_r, w) = pipe();
        crate::sys::write_all(w.as_raw_fd(), &[1u8; 3000]).unwrap();
        let (_, w1) = proc_io(me).unwrap();
        assert!(w1 >= w0 + 3000, "{w0} -> {w1}");
    }
}
