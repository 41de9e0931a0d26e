//! Measuring the time the system steals from threads (Regehr 2001, ch. 11) on
//! Linux, and feeding it to the HSI (`Hsi::add_stolen`) so that Rez-C and
//! Rez-FB can compensate in live mode.
//!
//! *Stolen time* is CPU time spent on something other than the thread the
//! scheduler put on a processor, charged to that thread anyway (§11.3). On
//! a Linux guest it has four parts: hardware interrupt handlers, softirqs
//! (Linux's deferred procedure calls, §11.3's DPCs; also run by
//! `ksoftirqd`), the hypervisor running another guest on our virtual CPU
//! (*steal time*), and anything else the kernel runs first (real-time
//! throttling, higher-priority threads such as the live daemon itself).
//!
//! Four ways to see it, each blind to something (docs/stolen-time.md has
//! the measurements on this machine):
//!
//! | source | what it sees | what it misses |
//! |---|---|---|
//! | `/proc/stat` `irq`, `softirq` ([`read_proc_stat`]) | with `CONFIG_IRQ_TIME_ACCOUNTING` exact IRQ time; without it (this kernel), a tick (250 Hz) that lands in a handler charges the whole tick: a sample, not a measurement | everything between ticks; hard IRQs almost always (the tick is itself an interrupt); in `USER_HZ` (10 ms) units |
//! | `/proc/stat` `steal` | hypervisor steal time from the paravirtual steal clock (`CONFIG_PARAVIRT_TIME_ACCOUNTING`), exact but in 10 ms units | IRQs, softirqs |
//! | `/proc/TID/schedstat` ([`read_schedstat`]) | the thread's run time net of steal time (the scheduler clock excludes it), so wall − run time shows steal and preemption by other tasks | IRQ and softirq time (charged to the thread without IRQ time accounting); stale by up to one tick for a running thread |
//! | IRQ tracepoints ([`IrqTracer`]) | every hard IRQ handler, local timer, IPI and softirq on a CPU, with exact entry and exit times (the instrumentation of §11.5.1, done by the kernel's tracepoints) | interrupt entry and exit code around the handlers, the hypervisor's exits, steal time; costs about a microsecond per event itself |
//! | a gap probe ([`probe_window`], §11.6.2) | everything: any gap in a spinning thread's clock readings | what caused it; it needs the whole CPU, so it characterizes but cannot run beside real work |
//!
//! [`StolenMeter`] combines the best of them for the live daemon
//! ([`StolenSource`]): tracepoint intervals (exact, timestamped, so they
//! are charged to the thread the HSI had on that CPU at the time), the
//! daemon's own CPU time when it ran on a managed CPU, and the hypervisor
//! steal deltas of `/proc/stat` (polled every 10 ms).
//!
//! The characterization tool of §11.8 (`hsched-live stolen`) is in
//! [`tool`]; its background loads are in [`load`].

pub mod load;
pub mod tool;

use crate::sys::{self, PerfEventAttr, PerfRing};
use std::io;
use std::os::fd::OwnedFd;
use std::path::Path;

// ----- /proc/stat -------------------------------------------------------------

/// One CPU's line of `/proc/stat`, in nanoseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuStat {
    /// The CPU number.
    pub cpu: usize,
    /// User time.
    pub user: u64,
    /// Niced user time.
    pub nice: u64,
    /// System time.
    pub system: u64,
    /// Idle time.
    pub idle: u64,
    /// I/O wait.
    pub iowait: u64,
    /// Hard IRQ time.
    pub irq: u64,
    /// Softirq time.
    pub softirq: u64,
    /// Hypervisor steal time.
    pub steal: u64,
}

impl CpuStat {
    /// `irq + softirq + steal`: what `/proc/stat` says was stolen.
    pub fn stolen(&self) -> u64 {
        self.irq + self.softirq + self.steal
    }
}

/// Parses the per-CPU `cpuN` lines of `/proc/stat`; `ns_per_tick` converts
/// its `USER_HZ` units. Lines that do not parse are skipped.
pub fn parse_proc_stat(text: &str, ns_per_tick: u64) -> Vec<CpuStat> {
    let mut out = Vec::new();
    for line in text.lines() {
        let mut it = line.split_ascii_whitespace();
        let Some(name) = it.next() else { continue };
        let Some(Ok(cpu)) = name.strip_prefix("cpu").map(str::parse::<usize>) else {
            continue;
        };
        let v: Vec<u64> = it.map_while(|f| f.parse().ok()).collect();
        if v.len() < 8 {
            continue;
        }
        let t = |i: usize| v[i].saturating_mul(ns_per_tick);
        out.push(CpuStat {
            cpu,
            user: t(0),
            nice: t(1),
            system: t(2),
            idle: t(3),
            iowait: t(4),
            irq: t(5),
            softirq: t(6),
            steal: t(7),
        });
    }
    out
}

/// Reads `/proc/stat` per CPU.
///
/// # Errors
/// `/proc/stat` cannot be read.
pub fn read_proc_stat() -> io::Result<Vec<CpuStat>> {
    let text = std::fs::read_to_string("/proc/stat")?;
    Ok(parse_proc_stat(&text, 1_000_000_000 / sys::clock_ticks()))
}

// ----- /proc/TID/schedstat -----------------------------------------------------

/// `/proc/TID/schedstat`: the scheduler's own accounting of one thread.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Schedstat {
    /// Time on a CPU (`sum_exec_runtime`), ns; excludes hypervisor steal
    /// time, includes IRQs served while it ran (no IRQ time accounting).
    pub run_ns: u64,
    /// Time runnable but waiting for a CPU, ns.
    pub wait_ns: u64,
    /// Times it was put on a CPU.
    pub timeslices: u64,
}

/// Parses the three numbers of a schedstat file.
pub fn parse_schedstat(text: &str) -> Option<Schedstat> {
    let mut it = text.split_ascii_whitespace().map(|s| s.parse::<u64>().ok());
    Some(Schedstat {
        run_ns: it.next()??,
        wait_ns: it.next()??,
        timeslices: it.next()??,
    })
}

/// Reads `/proc/TID/schedstat` (`/proc/self/task/TID/...` is the same file).
///
/// # Errors
/// The thread is gone, or the kernel lacks `CONFIG_SCHED_INFO`.
pub fn read_schedstat(tid: i32) -> io::Result<Schedstat> {
    let text = std::fs::read_to_string(format!("/proc/{tid}/schedstat"))?;
    parse_schedstat(&text).ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "schedstat"))
}

// ----- the kernel's configuration ----------------------------------------------

/// What the running kernel accounts, from its build configuration.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KernelAccounting {
    /// Where the configuration was read (`None`: not found).
    pub source: Option<String>,
    /// `CONFIG_IRQ_TIME_ACCOUNTING`: exact IRQ and softirq time.
    pub irq_time: Option<bool>,
    /// `CONFIG_PARAVIRT_TIME_ACCOUNTING`: steal time from the hypervisor.
    pub paravirt_steal: Option<bool>,
    /// `CONFIG_TICK_CPU_ACCOUNTING`: per-tick sampling.
    pub tick_accounting: Option<bool>,
    /// `CONFIG_HZ`.
    pub hz: Option<u32>,
}

/// Reads the kernel configuration from `/proc/config.gz` (through `zcat`)
/// or `/boot/config-RELEASE`.
pub fn kernel_accounting() -> KernelAccounting {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let boot = format!("/boot/config-{}", release.trim());
    let (text, source) = if Path::new("/proc/config.gz").exists() {
        let out = std::process::Command::new("zcat")
            .arg("/proc/config.gz")
            .stderr(std::process::Stdio::null())
            .output();
        match out {
            Ok(o) if o.status.success() => (
                String::from_utf8_lossy(&o.stdout).into_owned(),
                "/proc/config.gz".to_string(),
            ),
            _ => (String::new(), String::new()),
        }
    } else if let Ok(t) = std::fs::read_to_string(&boot) {
        (t, boot)
    } else {
        (String::new(), String::new())
    };
    parse_kernel_config(&text, (!source.is_empty()).then_some(source))
}

/// [`kernel_accounting`] from the configuration's text.
pub fn parse_kernel_config(text: &str, source: Option<String>) -> KernelAccounting {
    if source.is_none() {
        return KernelAccounting::default();
    }
    let flag = |name: &str| {
        let on = format!("{name}=y");
        let off = format!("# {name} is not set");
        if text.lines().any(|l| l.trim() == on) {
            Some(true)
        } else if text.lines().any(|l| l.trim() == off) {
            Some(false)
        } else {
            None
        }
    };
    let hz = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("CONFIG_HZ="))
        .and_then(|v| v.parse().ok());
    KernelAccounting {
        source,
        irq_time: flag("CONFIG_IRQ_TIME_ACCOUNTING").or(Some(false)),
        paravirt_steal: flag("CONFIG_PARAVIRT_TIME_ACCOUNTING"),
        tick_accounting: flag("CONFIG_TICK_CPU_ACCOUNTING"),
        hz,
    }
}

// ----- IRQ tracepoints ---------------------------------------------------------

/// What kind of interrupt context a traced interval was.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum IrqKind {
    /// A device interrupt handler (`irq:irq_handler_*`).
    Hardirq,
    /// The local APIC timer (`irq_vectors:local_timer_*`): tick, hrtimers.
    Timer,
    /// Inter-processor interrupts (`irq_vectors:reschedule_*`,
    /// `call_function*`).
    Ipi,
    /// A softirq (`irq:softirq_*`), by vector.
    Softirq(u32),
}

/// Names of the softirq vectors (`include/linux/interrupt.h`).
pub const SOFTIRQ_NAMES: [&str; 10] = [
    "HI", "TIMER", "NET_TX", "NET_RX", "BLOCK", "IRQ_POLL", "TASKLET", "SCHED", "HRTIMER", "RCU",
];

impl IrqKind {
    /// A short name: `hardirq`, `timer`, `ipi`, `NET_RX`, ...
    pub fn name(self) -> &'static str {
        match self {
            IrqKind::Hardirq => "hardirq",
            IrqKind::Timer => "timer",
            IrqKind::Ipi => "ipi",
            // u32::MAX: the vector is unknown (no raw records).
            IrqKind::Softirq(v) => SOFTIRQ_NAMES.get(v as usize).copied().unwrap_or("softirq"),
        }
    }
}

/// One stretch of interrupt context on one CPU, outermost level only
/// (a hard IRQ inside a softirq is part of the softirq's interval).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IrqInterval {
    /// Linux CPU.
    pub cpu: usize,
    /// Entry, `CLOCK_MONOTONIC` ns.
    pub start: u64,
    /// Exit, `CLOCK_MONOTONIC` ns.
    pub end: u64,
}

#[derive(Clone, Copy, Debug)]
struct TpDef {
    id: u64,
    entry: bool,
    kind: IrqKind,
    /// Offset of the softirq vector in the raw record.
    vec_off: Option<usize>,
}

/// Per-CPU nesting state and totals.
#[derive(Clone, Debug, Default)]
struct CpuIrq {
    /// (kind, entry time, time of nested intervals inside it).
    stack: Vec<(IrqKind, u64, u64)>,
    /// Own time per kind (nested time excluded), ns.
    totals: std::collections::BTreeMap<IrqKind, u64>,
    /// Union of all intervals, ns.
    busy: u64,
    /// Intervals closed.
    count: u64,
}

/// Traces interrupt context on chosen CPUs with perf events on the IRQ
/// tracepoints (one event per tracepoint and CPU, all of a CPU writing to
/// one ring buffer), the Linux counterpart of §11.5.1's timestamps at the
/// start and end of the DPC dispatcher.
pub struct IrqTracer {
    defs: Vec<TpDef>,
    /// (perf event id, index in `defs`), sorted by id.
    ids: Vec<(u64, usize)>,
    /// Whether samples carry the raw record (softirq vectors); the kernel
    /// allows it to `CAP_SYS_ADMIN` or with `perf_event_paranoid` -1 only.
    raw: bool,
    rings: Vec<(usize, OwnedFd, PerfRing)>,
    _events: Vec<OwnedFd>,
    state: Vec<CpuIrq>,
    /// Records the kernel dropped (ring full).
    pub lost: u64,
    /// Samples read.
    pub samples: u64,
}

fn read_tp_id(root: &Path, group: &str, name: &str) -> Option<(u64, String)> {
    let dir = root.join("events").join(group).join(name);
    let id = std::fs::read_to_string(dir.join("id"))
        .ok()?
        .trim()
        .parse()
        .ok()?;
    let format = std::fs::read_to_string(dir.join("format")).ok()?;
    Some((id, format))
}

impl IrqTracer {
    /// The ids of the tracepoints traced.
    pub fn tracepoint_ids(&self) -> Vec<u64> {
        self.defs.iter().map(|d| d.id).collect()
    }

    /// Starts tracing `cpus` with a ring of `2^order` pages each.
    ///
    /// # Errors
    /// No tracefs, no `irq` tracepoints, or perf refused (not root).
    pub fn new(cpus: &[usize], order: u32) -> io::Result<IrqTracer> {
        let root = crate::observe::tracefs()?;
        let mut defs = Vec::new();
        // Not `irq_work_*`: perf itself signals through IRQ work, and the
        // kernel refuses perf events on `irq_work_exit`.
        let pairs: [(&str, &str, IrqKind); 6] = [
            ("irq", "irq_handler", IrqKind::Hardirq),
            ("irq", "softirq", IrqKind::Softirq(0)),
            ("irq_vectors", "local_timer", IrqKind::Timer),
            ("irq_vectors", "reschedule", IrqKind::Ipi),
            ("irq_vectors", "call_function", IrqKind::Ipi),
            ("irq_vectors", "call_function_single", IrqKind::Ipi),
        ];
        for (group, base, kind) in pairs {
            for entry in [true, false] {
                let name = format!("{base}_{}", if entry { "entry" } else { "exit" });
                let Some((id, format)) = read_tp_id(&root, group, &name) else {
                    continue;
                };
                let vec_off = match kind {
                    IrqKind::Softirq(_) => crate::observe::field_offset(&format, "vec"),
                    _ => None,
                };
                defs.push(TpDef {
                    id,
                    entry,
                    kind,
                    vec_off,
                });
            }
        }
        if !defs.iter().any(|d| matches!(d.kind, IrqKind::Softirq(_))) {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                "the irq:softirq_entry/exit tracepoints are not available",
            ));
        }
        // Raw records name the softirq vector; where they are refused,
        // sample ids still tell the tracepoints apart.
        let opened = Self::open(&defs, cpus, order, true);
        let (rings, events, ids, raw) = match opened {
            Ok((r, e, i)) => (r, e, i, true),
            Err(e)
                if e.raw_os_error() == Some(libc::EPERM)
                    || e.raw_os_error() == Some(libc::EACCES) =>
            {
                let (r, e, i) = Self::open(&defs, cpus, order, false)?;
                (r, e, i, false)
            }
            Err(e) => return Err(e),
        };
        let n = cpus.iter().copied().max().map_or(0, |m| m + 1);
        Ok(IrqTracer {
            defs,
            ids,
            raw,
            rings,
            _events: events,
            state: vec![CpuIrq::default(); n],
            lost: 0,
            samples: 0,
        })
    }

    #[allow(clippy::type_complexity)]
    fn open(
        defs: &[TpDef],
        cpus: &[usize],
        order: u32,
        raw: bool,
    ) -> io::Result<(
        Vec<(usize, OwnedFd, PerfRing)>,
        Vec<OwnedFd>,
        Vec<(u64, usize)>,
    )> {
        let mut rings = Vec::new();
        let mut events = Vec::new();
        let mut ids = Vec::new();
        for &c in cpus {
            let base = PerfEventAttr {
                sample_period: 1,
                sample_type: SAMPLE_TIME | SAMPLE_ID | if raw { SAMPLE_RAW } else { 0 },
                flags: sys::FLAG_USE_CLOCKID,
                clockid: libc::CLOCK_MONOTONIC,
                // Nobody polls these rings: the daemon drains them when it
                // wakes for other reasons.
                wakeup_events: 1 << 20,
                ..Default::default()
            };
            let owner = sys::perf_event_open(
                &PerfEventAttr {
                    type_: sys::PERF_TYPE_SOFTWARE,
                    config: sys::PERF_COUNT_SW_DUMMY,
                    ..base
                },
                -1,
                c as i32,
            )
            .map_err(|e| ctx(e, "perf event on CPU"))?;
            let ring = PerfRing::map(&owner, order).map_err(|e| ctx(e, "perf ring buffer"))?;
            for (k, d) in defs.iter().enumerate() {
                let fd = sys::perf_event_open(
                    &PerfEventAttr {
                        type_: sys::PERF_TYPE_TRACEPOINT,
                        config: d.id,
                        ..base
                    },
                    -1,
                    c as i32,
                )
                .map_err(|e| ctx(e, "tracepoint event"))?;
                sys::perf_set_output(&fd, &owner).map_err(|e| ctx(e, "perf output"))?;
                ids.push((
                    sys::perf_event_id(&fd).map_err(|e| ctx(e, "perf event id"))?,
                    k,
                ));
                events.push(fd);
            }
            rings.push((c, owner, ring));
        }
        ids.sort_unstable();
        Ok((rings, events, ids))
    }

    /// Whether softirqs are told apart by vector (raw records allowed).
    pub fn has_vectors(&self) -> bool {
        self.raw
    }

    /// Appends the intervals closed since the last call, per CPU in time
    /// order.
    pub fn drain(&mut self, out: &mut Vec<IrqInterval>) {
        let defs = &self.defs;
        let ids = &self.ids;
        let raw = self.raw;
        let state = &mut self.state;
        let (mut lost, mut samples) = (0, 0);
        for (cpu, _, ring) in &mut self.rings {
            let cpu = *cpu;
            ring.drain(|ty, body| match ty {
                sys::PERF_RECORD_SAMPLE => {
                    samples += 1;
                    if let Some((time, d, vec)) = decode(defs, ids, raw, body) {
                        let kind = match d.kind {
                            IrqKind::Softirq(_) => IrqKind::Softirq(vec),
                            k => k,
                        };
                        if let Some(s) = state.get_mut(cpu) {
                            step(s, cpu, time, d.entry, kind, out);
                        }
                    }
                }
                sys::PERF_RECORD_LOST if body.len() >= 16 => {
                    lost += u64::from_ne_bytes(body[8..16].try_into().unwrap_or([0; 8]));
                    // Nesting is unknown after a loss: start afresh.
                    if let Some(s) = state.get_mut(cpu) {
                        s.stack.clear();
                    }
                }
                _ => {}
            });
        }
        self.lost += lost;
        self.samples += samples;
    }

    /// Own time per kind on `cpu` so far (nested time excluded), ns.
    pub fn totals(&self, cpu: usize) -> Vec<(IrqKind, u64)> {
        self.state
            .get(cpu)
            .map(|s| s.totals.iter().map(|(&k, &v)| (k, v)).collect())
            .unwrap_or_default()
    }

    /// Time in interrupt context on `cpu` so far (union of intervals), ns.
    pub fn busy(&self, cpu: usize) -> u64 {
        self.state.get(cpu).map_or(0, |s| s.busy)
    }

    /// Intervals closed on `cpu` so far.
    pub fn count(&self, cpu: usize) -> u64 {
        self.state.get(cpu).map_or(0, |s| s.count)
    }
}

/// Keeps the OS error (callers test it) and names the step that failed.
fn ctx(e: io::Error, what: &str) -> io::Error {
    match e.raw_os_error() {
        Some(code) if code == libc::EPERM || code == libc::EACCES => e,
        _ => io::Error::new(e.kind(), format!("{what}: {e}")),
    }
}

const SAMPLE_TIME: u64 = 1 << 2;
const SAMPLE_ID: u64 = 1 << 6;
const SAMPLE_RAW: u64 = 1 << 10;

/// Decodes one sample (TIME, ID and maybe RAW): (time, tracepoint,
/// softirq vector or 0).
fn decode<'d>(
    defs: &'d [TpDef],
    ids: &[(u64, usize)],
    raw: bool,
    body: &[u8],
) -> Option<(u64, &'d TpDef, u32)> {
    let time = u64::from_ne_bytes(body.get(0..8)?.try_into().ok()?);
    let id = u64::from_ne_bytes(body.get(8..16)?.try_into().ok()?);
    let k = ids.binary_search_by_key(&id, |&(i, _)| i).ok()?;
    let d = defs.get(ids[k].1)?;
    let vec = if raw {
        let raw_size = u32::from_ne_bytes(body.get(16..20)?.try_into().ok()?) as usize;
        let rec = body.get(20..20 + raw_size)?;
        d.vec_off
            .and_then(|o| rec.get(o..o + 4))
            .map_or(0, |b| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
    } else {
        u32::MAX
    };
    Some((time, d, vec))
}

/// An interval still open after this long was missed (lost records).
const STALE_NS: u64 = 100_000_000;

/// Feeds one entry or exit into a CPU's nesting state.
fn step(
    s: &mut CpuIrq,
    cpu: usize,
    time: u64,
    entry: bool,
    kind: IrqKind,
    out: &mut Vec<IrqInterval>,
) {
    if entry {
        if s.stack
            .first()
            .is_some_and(|&(_, t0, _)| time.saturating_sub(t0) > STALE_NS)
        {
            s.stack.clear();
        }
        s.stack.push((kind, time, 0));
        return;
    }
    // An exit must close the innermost entry of its kind; anything else
    // means records were lost or tracing started inside a handler.
    match s.stack.last() {
        Some(&(k, _, _)) if k == kind => {}
        _ => {
            s.stack.clear();
            return;
        }
    }
    let Some((k, t0, nested)) = s.stack.pop() else {
        return;
    };
    let len = time.saturating_sub(t0);
    *s.totals.entry(k).or_insert(0) += len.saturating_sub(nested);
    match s.stack.last_mut() {
        Some(outer) => outer.2 += len,
        None => {
            s.busy += len;
            s.count += 1;
            out.push(IrqInterval {
                cpu,
                start: t0,
                end: time,
            });
        }
    }
}

// ----- the live feed -------------------------------------------------------------

/// Where live mode takes stolen time from (`hsched run --stolen`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum StolenSource {
    /// Nothing is fed: the HSI believes every granted nanosecond was
    /// received (the behaviour before chapter 11).
    #[default]
    Off,
    /// `/proc/stat` irq + softirq + steal deltas, polled at the first
    /// daemon wake-up 10 ms after the last poll and charged to whatever
    /// runs then: nearly free but coarse (tick-sampled IRQ time, 10 ms
    /// units), and the poll can lock onto a reservation's phase (the
    /// wake-ups are its timers) so that nothing runs when it is charged:
    /// the resonance of the footnote to Regehr 2001, §11.6.2. Measured useless
    /// here (docs/stolen-time.md); kept for kernels with IRQ time
    /// accounting and for comparison.
    ProcStat,
    /// IRQ tracepoints (exact intervals, charged to the thread the HSI had
    /// on that CPU at the time), the daemon's own CPU time on managed CPUs,
    /// and `/proc/stat` steal deltas. Costs about 1 µs of kernel time per
    /// interrupt on the managed CPUs.
    Trace,
}

impl std::str::FromStr for StolenSource {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "off" | "none" => Ok(StolenSource::Off),
            "procstat" | "proc-stat" => Ok(StolenSource::ProcStat),
            "trace" | "tracepoints" => Ok(StolenSource::Trace),
            other => Err(format!(
                "unknown stolen-time source `{other}`; expected off, procstat or trace"
            )),
        }
    }
}

impl StolenSource {
    /// The name used on the command line.
    pub fn name(self) -> &'static str {
        match self {
            StolenSource::Off => "off",
            StolenSource::ProcStat => "procstat",
            StolenSource::Trace => "trace",
        }
    }
}

/// Time stolen on a managed CPU, to report to the HSI.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Steal {
    /// Index of the CPU in the managed set (the HSI's processor).
    pub cpu: usize,
    /// When the stolen stretch ended (`CLOCK_MONOTONIC` ns).
    pub at: u64,
    /// How long it was, ns.
    pub ns: u64,
}

/// Poll interval of `/proc/stat` (its unit is 10 ms).
const PROC_STAT_EVERY_NS: u64 = 10_000_000;

/// Measures stolen time on the managed CPUs for the live daemon.
pub struct StolenMeter {
    source: StolenSource,
    /// Linux CPU of each managed index.
    cpus: Vec<usize>,
    tracer: Option<IrqTracer>,
    last_stat: Vec<CpuStat>,
    next_stat: u64,
    intervals: Vec<IrqInterval>,
    /// The daemon's thread CPU time at the last call.
    daemon_cpu: u64,
    /// Stolen time measured per managed CPU, by part: (irq, steal, daemon).
    pub measured: Vec<[u64; 3]>,
    /// Added to every traced interval: the interrupt entry and exit paths
    /// around the handlers, which the tracepoints do not cover.
    pub irq_overhead_ns: u64,
}

impl StolenMeter {
    /// The ids of the tracepoints the meter's events are on (none unless
    /// the source is [`StolenSource::Trace`]).
    pub fn tracepoint_ids(&self) -> Vec<u64> {
        self.tracer
            .as_ref()
            .map_or_else(Vec::new, IrqTracer::tracepoint_ids)
    }

    /// A meter for the managed `cpus` (Linux numbers, in HSI order).
    ///
    /// # Errors
    /// The tracepoints cannot be opened (source `trace`) or `/proc/stat`
    /// cannot be read.
    pub fn new(source: StolenSource, cpus: &[usize], order: u32) -> io::Result<StolenMeter> {
        let tracer = match source {
            StolenSource::Trace => Some(IrqTracer::new(cpus, order)?),
            _ => None,
        };
        let last_stat = match source {
            StolenSource::Off => Vec::new(),
            _ => read_proc_stat()?,
        };
        Ok(StolenMeter {
            source,
            cpus: cpus.to_vec(),
            tracer,
            last_stat,
            next_stat: sys::now_ns() + PROC_STAT_EVERY_NS,
            intervals: Vec::new(),
            daemon_cpu: sys::thread_cpu_ns(),
            measured: vec![[0; 3]; cpus.len()],
            irq_overhead_ns: 0,
        })
    }

    /// The source.
    pub fn source(&self) -> StolenSource {
        self.source
    }

    /// Records lost by the tracer.
    pub fn lost(&self) -> u64 {
        self.tracer.as_ref().map_or(0, |t| t.lost)
    }

    /// Appends what was stolen since the last call. Call it from the
    /// daemon's thread (its own CPU time is part of the measure).
    pub fn collect(&mut self, now: u64, out: &mut Vec<Steal>) {
        if self.source == StolenSource::Off {
            return;
        }
        let index = |cpus: &[usize], c: usize| cpus.iter().position(|&x| x == c);
        if let Some(t) = self.tracer.as_mut() {
            self.intervals.clear();
            t.drain(&mut self.intervals);
            for iv in &self.intervals {
                if let Some(i) = index(&self.cpus, iv.cpu) {
                    let ns = iv.end - iv.start + self.irq_overhead_ns;
                    self.measured[i][0] += ns;
                    out.push(Steal {
                        cpu: i,
                        at: iv.end,
                        ns,
                    });
                }
            }
            // The daemon preempts whatever runs on the CPU it runs on.
            let cpu_now = sys::thread_cpu_ns();
            let d = cpu_now.saturating_sub(self.daemon_cpu);
            self.daemon_cpu = cpu_now;
            if let Some(i) = sys::current_cpu().and_then(|c| index(&self.cpus, c)) {
                if d > 0 {
                    self.measured[i][2] += d;
                    out.push(Steal {
                        cpu: i,
                        at: now,
                        ns: d,
                    });
                }
            }
        }
        if now >= self.next_stat {
            self.next_stat = now + PROC_STAT_EVERY_NS;
            if let Ok(stat) = read_proc_stat() {
                for (i, &c) in self.cpus.iter().enumerate() {
                    let (Some(new), Some(old)) = (
                        stat.iter().find(|s| s.cpu == c),
                        self.last_stat.iter().find(|s| s.cpu == c),
                    ) else {
                        continue;
                    };
                    let d = match self.source {
                        StolenSource::Trace => new.steal.saturating_sub(old.steal),
                        _ => new.stolen().saturating_sub(old.stolen()),
                    };
                    if d > 0 {
                        let part = if self.source == StolenSource::Trace {
                            1
                        } else {
                            0
                        };
                        self.measured[i][part] += d;
                        out.push(Steal {
                            cpu: i,
                            at: now,
                            ns: d,
                        });
                    }
                }
                self.last_stat = stat;
            }
        }
    }
}

// ----- the gap probe (§11.6.2) ----------------------------------------------------

/// What one probe window saw.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Window {
    /// First clock reading.
    pub start: u64,
    /// Last clock reading.
    pub end: u64,
    /// Gaps longer than the threshold: (last reading before, first after).
    pub gaps: Vec<(u64, u64)>,
}

impl Window {
    /// Time lost to gaps, ns.
    pub fn stolen(&self) -> u64 {
        self.gaps.iter().map(|&(a, b)| b - a).sum()
    }
    /// Time the probe ran, ns.
    pub fn received(&self) -> u64 {
        (self.end - self.start).saturating_sub(self.stolen())
    }
}

/// The dissertation's probe (§11.6.2): spins reading `CLOCK_MONOTONIC`
/// until `until` and records every gap between two successive readings
/// longer than `threshold` ns (at most `max` of them) as time stolen from
/// it. A reading costs about 20–30 ns here, so a threshold of 1 µs sees
/// every interrupt and misses nothing longer.
pub fn probe_window(until: u64, threshold: u64, max: usize) -> Window {
    let start = sys::now_ns();
    let mut w = Window {
        start,
        end: start,
        gaps: Vec::new(),
    };
    let mut last = start;
    while last < until {
        let t = sys::now_ns();
        if t - last > threshold && w.gaps.len() < max {
            w.gaps.push((last, t));
        }
        last = t;
    }
    w.end = last;
    w
}

/// The time `iv` (sorted, disjoint) covers inside `[a, b)`.
pub fn covered(iv: &[(u64, u64)], a: u64, b: u64) -> u64 {
    let from = iv.partition_point(|&(_, e)| e <= a);
    iv[from..]
        .iter()
        .take_while(|&&(s, _)| s < b)
        .map(|&(s, e)| e.min(b).saturating_sub(s.max(a)))
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_stat_lines_are_parsed_per_cpu() {
        let text = "cpu  516376 0 38397 155188 399 0 212 633 0 0\n\
                    cpu0 263162 0 14092 77730 247 0 91 317 0 0\n\
                    cpu1 253214 0 24305 77458 152 3 120 315 0 0\n\
                    intr 2698919 0 0\n";
        let v = parse_proc_stat(text, 10_000_000);
        assert_eq!(v.len(), 2);
        assert_eq!(v[1].cpu, 1);
        assert_eq!(v[1].irq, 30_000_000);
        assert_eq!(v[1].softirq, 1_200_000_000);
        assert_eq!(v[1].steal, 3_150_000_000);
        assert_eq!(v[1].stolen(), 30_000_000 + 1_200_000_000 + 3_150_000_000);
    }

    #[test]
    fn schedstat_has_three_numbers() {
        let s = parse_schedstat("123 456 7\n").unwrap();
        assert_eq!((s.run_ns, s.wait_ns, s.timeslices), (123, 456, 7));
        assert!(parse_schedstat("1 2").is_none());
    }

    #[test]
    fn kernel_config_flags() {
        let text = "CONFIG_TICK_CPU_ACCOUNTING=y\n# CONFIG_IRQ_TIME_ACCOUNTING is not set\nCONFIG_PARAVIRT_TIME_ACCOUNTING=y\nCONFIG_HZ=250\n";
        let k = parse_kernel_config(text, Some("x".into()));
        assert_eq!(k.irq_time, Some(false));
        assert_eq!(k.paravirt_steal, Some(true));
        assert_eq!(k.tick_accounting, Some(true));
        assert_eq!(k.hz, Some(250));
        assert_eq!(parse_kernel_config(text, None), KernelAccounting::default());
    }

    #[test]
    fn nested_interrupts_count_once_in_the_union() {
        let mut s = CpuIrq::default();
        let mut out = Vec::new();
        // A softirq from 100 to 200 with a hard IRQ from 120 to 130 inside.
        step(&mut s, 1, 100, true, IrqKind::Softirq(3), &mut out);
        step(&mut s, 1, 120, true, IrqKind::Hardirq, &mut out);
        step(&mut s, 1, 130, false, IrqKind::Hardirq, &mut out);
        assert!(out.is_empty());
        step(&mut s, 1, 200, false, IrqKind::Softirq(3), &mut out);
        assert_eq!(
            out,
            vec![IrqInterval {
                cpu: 1,
                start: 100,
                end: 200
            }]
        );
        assert_eq!(s.busy, 100);
        assert_eq!(s.totals[&IrqKind::Softirq(3)], 90);
        assert_eq!(s.totals[&IrqKind::Hardirq], 10);
        // An exit without its entry (tracing began inside a handler) is
        // dropped, and the next pair counts normally.
        step(&mut s, 1, 300, false, IrqKind::Timer, &mut out);
        step(&mut s, 1, 400, true, IrqKind::Timer, &mut out);
        step(&mut s, 1, 405, false, IrqKind::Timer, &mut out);
        assert_eq!(out.len(), 2);
        assert_eq!(s.busy, 105);
    }

    #[test]
    fn covered_time_of_sorted_intervals() {
        let iv = [(10, 20), (30, 40), (50, 60)];
        assert_eq!(covered(&iv, 0, 100), 30);
        assert_eq!(covered(&iv, 15, 35), 10);
        assert_eq!(covered(&iv, 40, 50), 0);
        assert_eq!(covered(&[], 0, 10), 0);
    }

    #[test]
    fn the_source_names_parse() {
        assert_eq!("trace".parse::<StolenSource>(), Ok(StolenSource::Trace));
        assert_eq!(
            "procstat".parse::<StolenSource>(),
            Ok(StolenSource::ProcStat)
        );
        assert_eq!("off".parse::<StolenSource>(), Ok(StolenSource::Off));
        assert!("tcp".parse::<StolenSource>().is_err());
    }

    #[test]
    fn probe_accounts_every_nanosecond_of_its_window() {
        let until = sys::now_ns() + 2_000_000;
        let w = probe_window(until, 1_000, 4);
        assert!(w.gaps.len() <= 4);
        assert!(w.end >= until && w.start < until);
        assert_eq!(w.stolen() + w.received(), w.end - w.start);
        assert!(w
            .gaps
            .iter()
            .all(|&(a, b)| b - a > 1_000 && a >= w.start && b <= w.end));
    }
}
