//! The live daemon: one thread, one epoll loop.
//!
//! ```text
//!  perf rings (per CPU) ─┐
//!  timerfd (one-shot) ───┤              ┌─ freeze / thaw (cgroup v1 freezer)
//!  signalfd ─────────────┼─► epoll ─► Hsi ─┤─ SCHED_FIFO + affinity
//!  control socket ───────┘              └─ watchdog records (before any change)
//! ```
//!
//! Each wake-up drains every ring, sorts the events by kernel time, feeds
//! them to the HSI (`wake`, `block`, `create_thread`, `exit`), fires due
//! timers, and applies the resulting dispatch. The timerfd is armed at the
//! earliest of the HSI's next timer, the next launch or timed operation,
//! and the end of the run: nothing wakes the daemon periodically.

use crate::control::{Conn, Server};
use crate::enforce::{self, Freezer, Original, ThreadCg};
use crate::hierarchy;
use crate::observe::{Event, Observer, STATE_INTERRUPTIBLE};
use crate::report::{LiveStats, Report};
use crate::stolen::{Steal, StolenMeter, StolenSource};
use crate::sys::{self, CpuMask, SchedAttr, Slots};
use crate::watchdog::Watchdog;
use crate::{LiveError, RunOptions};
use hsched_config::{Hierarchy, ThreadSpec, TimedOp, WorkloadSpec};
use hsched_core::{CpuId, Duration, Hsi, InstanceId, Instant, Params, ThreadId};
use std::collections::BTreeMap;
use std::os::fd::{AsRawFd, OwnedFd};

pub(crate) const TOK_RING: u64 = 1;
pub(crate) const TOK_TIMER: u64 = 2;
pub(crate) const TOK_SIGNAL: u64 = 3;
pub(crate) const TOK_LISTEN: u64 = 4;
/// The live `coop_poll` doorbell ([`crate::coop`]).
pub(crate) const TOK_COOP: u64 = 5;
/// The ftrace instance's trace pipes ([`crate::ftrace`]).
pub(crate) const TOK_IDLE_WAKES: u64 = 6;
pub(crate) const TOK_CLIENT: u64 = 1 << 32;
const SWEEP_NS: u64 = 200_000_000;
/// Between full sweeps, how often the threads the HSI holds blocked are
/// checked against `/proc` for a lost wake-up (see `sweep`), unless the
/// ftrace instance reports every idle-context wake-up.
const CHECK_NS: u64 = 20_000_000;
/// A thread is resynced only when its last event is older than this, so a
/// sample still on its way through the ring is not overtaken.
const RESYNC_GUARD_NS: u64 = 2_000_000;
/// A thread marked leaving that is still alive after this long, with
/// nothing fatal pending and not exiting, is managed again (its process
/// installed a handler between the check and the delivery).
const DYING_PATIENCE_NS: u64 = 1_000_000_000;
/// At most `SIGNAL_BUDGET` signal records per `SIGNAL_WINDOW_NS`: beyond,
/// the signal events pause for `SIGNAL_PAUSE_NS`, then every frozen thread
/// is checked once. A storm of signals to a managed process (each record
/// costs a wake-up and two `/proc` reads) costs the real-time daemon a
/// bounded share of its CPU, and a fatal signal during it waits at most
/// the pause.
const SIGNAL_WINDOW_NS: u64 = 100_000_000;
const SIGNAL_BUDGET: u32 = 200;
const SIGNAL_PAUSE_NS: u64 = 100_000_000;
/// The signal filter follows the managed threads at most this often: each
/// update replaces one event per online CPU (85 µs measured for 2 CPUs),
/// and a fork-heavy program would otherwise pay it at every pump. A
/// process created in between is found by the backstop if need be.
const FILTER_GAP_NS: u64 = 20_000_000;

/// One managed thread.
pub(crate) struct Managed {
    pub tid: i32,
    pub name: String,
    pub hsi: ThreadId,
    pub cg: Option<ThreadCg>,
    pub frozen: bool,
    /// When the current freeze was requested: the thread's switch-out after
    /// it (reported as a sleep) is the freeze, not a block.
    pub frozen_at: u64,
    /// When the last thaw completed: a thread may enter the freezer late
    /// (it must run to notice the freeze), so a sleep reported between a
    /// freeze and the following thaw is the freezer too.
    pub thawed_at: u64,
    /// hsched last gave it `SCHED_FIFO` (the program may have changed its
    /// policy since: each grant sets it again, see `start_on`).
    pub fifo: bool,
    pub pinned: Option<usize>,
    pub orig: Original,
    /// Kernel time of the last wake/block applied.
    pub last_event: u64,
    /// Perf events opened on this thread directly (launch or attach).
    pub fds: Vec<OwnedFd>,
    /// Index of the launched program or attach it belongs to.
    pub group: usize,
    /// Measured CPU time (last sample of /proc schedstat).
    pub cpu_ns: u64,
    /// Stolen time fed to the hierarchy while it ran.
    pub stolen_ns: u64,
    /// Counters for the report.
    pub grants: u64,
    pub freezes: u64,
    pub wakeups: u64,
    pub created_ns: u64,
    /// Since when (ns) the thread is known to be leaving: a fatal signal is
    /// pending or it is exiting. It is never frozen or raised again, and
    /// its exit (`sched_process_exit`) removes it from the hierarchy.
    pub dying: Option<u64>,
    /// Kernel time of the `execve` that gave this task its tid (0: none):
    /// an exit recorded for the tid before it was the old leader's.
    pub renamed_at: u64,
    /// A full sweep found the thread gone from `/proc` with no exit record
    /// applied; the next one removes it if the record is still missing.
    pub missing: bool,
    /// Granted, but off its CPU since then (kernel time): from its thaw to
    /// its switch-in, or preempted. `None`: on its CPU, or not granted.
    pub off_since: Option<u64>,
    /// Kernel time of its last wake-up record not yet followed by a
    /// switch-in or a block: runnable but not on a CPU since then.
    pub woke_at: Option<u64>,
    /// Time of its current grant it spent off the CPU so far (ns): what
    /// a reservation thread's deferred freeze adds to the grace.
    pub lost_ns: u64,
    /// Its grant goes through a fixed reservation (`rez`, `amount`):
    /// time lost is made up (enforce.rs `defer_stop`).
    pub fixed_reservation: bool,
    /// Created by a managed thread: the file's `[[rule]]`s place it, when
    /// it is created and again when it is renamed or calls `execve`.
    pub by_rules: bool,
}

/// A launched program or an attached process.
pub(crate) struct Group {
    pub name: String,
    pub pid: i32,
    pub launched: bool,
    pub exit_status: Option<i32>,
    /// Probe slot for built-in workloads.
    pub slot: Option<usize>,
    /// Thread spec index, when launched from the file.
    pub spec: Option<usize>,
    /// CPU time of the whole process: from `wait4` once reaped, else
    /// sampled from its CPU clock.
    pub cpu_ns: Option<u64>,
}

/// Report entry of a thread that exited.
pub(crate) struct Gone {
    pub name: String,
    pub scheduler: String,
    pub group: usize,
    pub cpu_ns: u64,
    pub received_ns: u64,
    pub grants: u64,
    pub freezes: u64,
    pub wakeups: u64,
    pub created_ns: u64,
    pub exited_ns: u64,
}

pub(crate) struct Daemon {
    pub h: Hierarchy,
    pub opts: RunOptions,
    pub hsi: Hsi,
    pub epoch: u64,
    /// HSI processor k is Linux CPU `cpus[k]`.
    pub cpus: Vec<usize>,
    pub obs: Observer,
    /// Idle-context wake-ups, which perf misses (ftrace.rs); `Err`: why
    /// there are none.
    pub idle_wakes: Result<crate::ftrace::IdleWakes, String>,
    /// epoll reported records in `idle_wakes`.
    pub idle_wakes_ready: bool,
    /// The daemon thread's CPU clock when its loop began.
    pub cpu_base: u64,
    pub epoll: sys::Epoll,
    pub timer: sys::TimerFd,
    pub sigfd: OwnedFd,
    pub freezer: Freezer,
    pub wd: Option<Watchdog>,
    /// When the watchdog last heard from the daemon (see
    /// [`crate::watchdog::UNRESPONSIVE_NS`]).
    pub last_heartbeat: u64,
    pub threads: BTreeMap<i32, Managed>,
    pub by_hsi: Vec<i32>,
    pub running: Vec<Option<i32>>,
    pub groups: Vec<Group>,
    pub gone: Vec<Gone>,
    pub pending_rmdir: Vec<ThreadCg>,
    /// Perf events of a launched or attached thread that exited while
    /// other threads of its group are still managed, by group: closing
    /// them would also close the events those threads inherited from them
    /// (their exits would never be seen).
    pub held_fds: Vec<(usize, Vec<OwnedFd>)>,
    /// The managed threads or processes changed: the signal filter's
    /// targets must follow (`update_signal_targets`).
    pub targets_dirty: bool,
    /// When the signal filter was last updated.
    pub filter_at: u64,
    /// Signal records in the current budget window, and its start.
    pub signal_window: (u64, u32),
    /// The signal events are paused until then.
    pub signals_paused_until: Option<u64>,
    pub launches: Vec<(u64, usize)>,
    pub kills: Vec<(u64, usize)>,
    pub ops: Vec<TimedOp>,
    pub end_at: Option<u64>,
    pub slots: Slots,
    pub server: Option<Server>,
    pub conns: BTreeMap<u64, Conn>,
    pub self_attr: SchedAttr,
    pub self_mask: CpuMask,
    pub stats: LiveStats,
    pub shutdown: bool,
    pub finished: bool,
    pub events: Vec<Event>,
    pub dispatch: Vec<(CpuId, Option<ThreadId>)>,
    pub touched: Vec<i32>,
    pub warned: std::collections::BTreeSet<String>,
    pub debug: bool,
    pub next_sweep: u64,
    pub next_check: u64,
    pub lost_seen: u64,
    /// Stolen-time measurement on the managed CPUs (Regehr 2001, ch. 11).
    pub stolen: Option<StolenMeter>,
    pub steals: Vec<Steal>,
    /// Real-time throttling governor and deferred freezes (enforce.rs).
    pub gov: crate::enforce::RtGovernor,
    /// The live `coop_poll` channel; always made (a `coop` instance may be
    /// created at run time), `None` only while crate::coop has taken it out
    /// to work on it beside the rest of the daemon.
    pub coop: Option<crate::coop::Channel>,
    /// Pipe fill levels fed to `realrate` instances (Steere et al. 1998, §3.2).
    pub progress: crate::progress::ProgressMonitor,
    /// The run launches programs (`exec`, `-- COMMAND`): it ends when they
    /// have exited, whatever its built-in workloads do.
    pub waits_for_programs: bool,
    /// The managed CPUs' locks, held for the daemon's life (dropped after
    /// `Drop::drop` has restored every thread).
    pub _cpu_lock: crate::cpulock::CpuLocks,
    /// The HSI timer the timerfd is armed for (absolute ns), to measure
    /// how late the daemon wakes for it.
    pub timer_due: Option<u64>,
    /// `HSCHED_LIVE_EARLY`: arm the timerfd this much before an HSI timer
    /// and spin to it (0: off).
    pub early_ns: u64,
    /// Spin until this time when the timerfd fires (early wake-up).
    pub spin_to: Option<u64>,
}

/// Where the daemon's own loop runs: the online CPUs it does not manage
/// and no other daemon manages (their locks are held by another process,
/// `cpulock::held_by_others`), or its own managed CPUs when none is left.
/// `HSCHED_LIVE_PLACE=managed` forces the managed CPUs (experiments).
pub(crate) fn daemon_cpus(online: &[usize], managed: &[usize]) -> Vec<usize> {
    if std::env::var("HSCHED_LIVE_PLACE").is_ok_and(|v| v == "managed") {
        return managed.to_vec();
    }
    let rest: Vec<usize> = online
        .iter()
        .copied()
        .filter(|c| !managed.contains(c))
        .collect();
    let others = crate::cpulock::held_by_others(&rest);
    let free: Vec<usize> = rest.into_iter().filter(|c| !others.contains(c)).collect();
    if free.is_empty() {
        managed.to_vec()
    } else {
        free
    }
}

/// Whether the task named `m.tid`, `m` a process's leader, is the one that
/// took over the tid by `execve` from a thread `m` did not manage: it is in
/// `m`'s freezer cgroup and not leaving (the old leader, exiting, is
/// `PF_EXITING` until it has left the cgroup).
fn took_over(m: &Managed) -> bool {
    m.tid == m.orig.tgid
        && m.cg.as_ref().is_some_and(|cg| cg.tasks().contains(&m.tid))
        && enforce::proc_leaving(m.tid, m.orig.start) == Some(enforce::Leaving::No)
}

/// The task that managed thread `m` became by an `execve` from a thread
/// other than its process's leader, with its start time: `m.tid` has left
/// `m`'s freezer cgroup and the process's pid (the tid `de_thread` gave
/// the caller) is in it. `None` otherwise (a leader, or no such task).
fn exec_successor(m: &Managed) -> Option<(i32, u64)> {
    let pid = m.orig.tgid;
    if m.tid == pid {
        return None;
    }
    let tasks = m.cg.as_ref()?.tasks();
    if tasks.contains(&m.tid) || !tasks.contains(&pid) {
        return None;
    }
    let (tgid, start) = enforce::proc_identity(pid).ok()?;
    (tgid == pid).then_some((pid, start))
}

fn io_err(what: &str) -> impl Fn(std::io::Error) -> LiveError + '_ {
    move |e| LiveError::Io(format!("{what}: {e}"))
}

impl Daemon {
    pub fn start(h: &Hierarchy, opts: RunOptions) -> Result<Daemon, LiveError> {
        crate::check_support()?;
        let online = sys::online_cpus();
        let cpus = crate::managed_cpus(h, &opts)?;
        // One daemon per CPU (cpulock.rs), before anything changes.
        let cpu_lock =
            crate::cpulock::CpuLocks::try_acquire(&cpus, crate::cpulock::Sharing::Exclusive)?;
        // A daemon on other CPUs may answer on the same socket: refuse it
        // now, before anything changes (Server::bind checks again).
        if let Some(path) = &opts.socket {
            if let Ok(s) = std::os::unix::net::UnixStream::connect(path) {
                let holder = sys::peer_cred(s.as_raw_fd()).ok().map(|(pid, _, _)| pid);
                return Err(LiveError::SocketBusy {
                    path: path.clone(),
                    holder: holder.filter(|&p| p > 0),
                });
            }
        }
        let mut hsi = hierarchy::build_hsi(h, cpus.len())?;
        // No policy trace (`coop` writes policing into VP parameters, which
        // crate::coop reads when it replies), except to print it for
        // HSCHED_LIVE_DEBUG (crate::coop::reply drains it).
        hsi.set_tracing(std::env::var_os("HSCHED_LIVE_DEBUG").is_some());
        let self_attr = sys::sched_getattr(0).map_err(io_err("sched_getattr"))?;
        let self_mask = sys::get_affinity(0).map_err(io_err("sched_getaffinity"))?;
        sys::raise_nofile_limit();
        let freezer = Freezer::new().map_err(io_err("freezer cgroup"))?;
        let wd = Watchdog::start(
            Some((freezer.mount.clone(), freezer.root.clone())),
            None,
            opts.daemon_priority.saturating_add(5).min(99),
            Some(&cpu_lock),
        )
        .map_err(io_err("watchdog"))?;
        // Every online CPU, not only the managed ones: a wake-up sample is
        // written on the CPU where the wake-up runs, often the waker's.
        let obs = Observer::new(&online, opts.ring_order, !h.rules.is_empty())
            .map_err(io_err("perf events"))?;
        if !h.rules.is_empty() && !obs.watches_renames() {
            crate::diag!(
                "hsched: warning: this kernel has no task:task_rename tracepoint; [[rule]]s are checked when a thread is created or calls execve, not when it is renamed"
            );
        }
        wd.anchor(&obs.tracepoint_ids())
            .map_err(io_err("watchdog"))?;
        if let Some(e) = &obs.signal_error {
            crate::diag!(
                "hsched: warning: signals to frozen threads are not observed ({e}); a fatal one is found by the 200 ms sweep"
            );
        }
        // On unless HSCHED_LIVE_IDLE_WAKES=off (docs/measurements/live-mode.md,
        // "Idle-context wake-ups from ftrace").
        const IDLE_WAKES_OFF: &str = "off (HSCHED_LIVE_IDLE_WAKES=off)";
        let start = || crate::ftrace::IdleWakes::new(&online).map_err(|e| e.to_string());
        let idle_wakes = match std::env::var("HSCHED_LIVE_IDLE_WAKES").as_deref() {
            Ok("off") => Err(IDLE_WAKES_OFF.to_string()),
            Ok(v) if v != "on" => {
                crate::diag!(
                    "hsched: warning: HSCHED_LIVE_IDLE_WAKES={v}: expected `on` or `off`; using on"
                );
                start()
            }
            _ => start(),
        };
        match &idle_wakes {
            Err(e) if e != IDLE_WAKES_OFF => crate::diag!(
                "hsched: warning: wake-ups on idle CPUs reach the hierarchy late (no ftrace instance: {e})"
            ),
            _ => {}
        }
        let stolen = match opts.stolen {
            StolenSource::Off => None,
            s => {
                let mut m = StolenMeter::new(s, &cpus, opts.ring_order.max(6))
                    .map_err(io_err("stolen-time measurement"))?;
                m.irq_overhead_ns = opts.stolen_irq_overhead.as_nanos();
                wd.anchor(&m.tracepoint_ids()).map_err(io_err("watchdog"))?;
                Some(m)
            }
        };
        let epoll = sys::Epoll::new().map_err(io_err("epoll"))?;
        let timer = sys::TimerFd::new().map_err(io_err("timerfd"))?;
        let sigfd = sys::signalfd(&[libc::SIGINT, libc::SIGTERM, libc::SIGCHLD, libc::SIGHUP])
            .map_err(io_err("signalfd"))?;
        for fd in obs.poll_fds() {
            epoll
                .add(fd, libc::EPOLLIN as u32, TOK_RING)
                .map_err(io_err("epoll"))?;
        }
        for fd in idle_wakes.iter().flat_map(|w| w.poll_fds()) {
            epoll
                .add(fd, libc::EPOLLIN as u32, TOK_IDLE_WAKES)
                .map_err(io_err("epoll"))?;
        }
        epoll
            .add(timer.0.as_raw_fd(), libc::EPOLLIN as u32, TOK_TIMER)
            .map_err(io_err("epoll"))?;
        epoll
            .add(sigfd.as_raw_fd(), libc::EPOLLIN as u32, TOK_SIGNAL)
            .map_err(io_err("epoll"))?;
        let server = match &opts.socket {
            Some(p) => {
                let s = Server::bind(p, opts.control_group).map_err(io_err("control socket"))?;
                epoll
                    .add(s.fd(), libc::EPOLLIN as u32, TOK_LISTEN)
                    .map_err(io_err("epoll"))?;
                Some(s)
            }
            None => None,
        };
        let mut d_attr = SchedAttr::fifo(opts.daemon_priority);
        d_attr.flags = sys::SCHED_FLAG_RESET_ON_FORK;
        if let Err(e) = sys::sched_setattr(0, &d_attr) {
            crate::diag!(
                "hsched: warning: the daemon could not raise itself to SCHED_FIFO {}: {e}",
                opts.daemon_priority
            );
        }
        let epoch = sys::now_ns();
        if std::env::var_os("HSCHED_LIVE_DEBUG").is_some() {
            crate::diag!("[0] epoch mono {epoch}");
        }
        let coop = crate::coop::Channel::new(h, epoch).map_err(io_err("coop_poll channel"))?;
        epoll
            .add(coop.doorbell_fd(), libc::EPOLLIN as u32, TOK_COOP)
            .map_err(io_err("epoll"))?;
        let coop = Some(coop);
        let nthreads = h.threads.len() + 1;
        let slots = Slots::new(nthreads).map_err(io_err("shared memory"))?;
        let mut launches: Vec<(u64, usize)> = Vec::new();
        for (i, t) in h.threads.iter().enumerate() {
            if t.exec.is_some() || (opts.run_workloads && t.workload.is_some()) {
                launches.push((epoch + t.start.as_nanos(), i));
            }
        }
        launches.sort();
        let end_at = opts.duration.map(|d| epoch + d.as_nanos());
        let ops = h.operations.clone();
        let ncpu = cpus.len();
        // Keep the daemon's own (real-time) work off the managed CPUs, and
        // off those other daemons manage, when there are others; else on
        // its own managed CPUs (docs/measurements/live-mode.md, "One daemon per CPU").
        let place = daemon_cpus(&online, &cpus);
        let mut m = CpuMask::empty();
        place.iter().for_each(|&c| m.set(c));
        let _ = sys::set_affinity(0, &m);
        let early_ns = match std::env::var("HSCHED_LIVE_EARLY") {
            Err(_) => 0,
            Ok(v) => match v.trim().trim_end_matches("us").parse::<u64>() {
                Ok(us) if us <= 5_000 => us * 1_000,
                _ => {
                    crate::diag!("hsched: warning: HSCHED_LIVE_EARLY={v}: expected 0 to 5000 (µs); early wake-up off");
                    0
                }
            },
        };
        let opts_rt_budget = crate::enforce::RtBudget::for_run(opts.fifo_priority);
        let opts_programs = opts.command.is_some() || h.threads.iter().any(|t| t.exec.is_some());
        let stats = LiveStats {
            stolen_source: opts.stolen.name().to_string(),
            stolen_measured_ns: vec![0; ncpu],
            stolen_fed_ns: vec![0; ncpu],
            signals_watched: obs.watches_signals(),
            ..LiveStats::default()
        };
        Ok(Daemon {
            h: h.clone(),
            opts,
            hsi,
            epoch,
            cpus,
            obs,
            idle_wakes,
            idle_wakes_ready: false,
            cpu_base: 0,
            epoll,
            timer,
            sigfd,
            freezer,
            wd: Some(wd),
            last_heartbeat: 0,
            threads: BTreeMap::new(),
            by_hsi: Vec::new(),
            running: vec![None; ncpu],
            groups: Vec::new(),
            gone: Vec::new(),
            pending_rmdir: Vec::new(),
            held_fds: Vec::new(),
            targets_dirty: true,
            filter_at: 0,
            signal_window: (0, 0),
            signals_paused_until: None,
            launches,
            kills: Vec::new(),
            ops,
            end_at,
            slots,
            server,
            conns: BTreeMap::new(),
            self_attr,
            self_mask,
            stats,
            shutdown: false,
            finished: false,
            events: Vec::with_capacity(4096),
            dispatch: Vec::new(),
            touched: Vec::new(),
            warned: Default::default(),
            debug: std::env::var_os("HSCHED_LIVE_DEBUG").is_some(),
            next_sweep: 0,
            next_check: 0,
            lost_seen: 0,
            stolen,
            steals: Vec::new(),
            gov: crate::enforce::RtGovernor::new(opts_rt_budget, ncpu),
            coop,
            progress: crate::progress::ProgressMonitor::from_env(h),
            waits_for_programs: opts_programs,
            _cpu_lock: cpu_lock,
            timer_due: None,
            early_ns,
            spin_to: None,
        })
    }

    pub fn inst(&self, ns: u64) -> Instant {
        Instant(ns.saturating_sub(self.epoch))
    }

    pub fn warn(&mut self, key: &str, msg: String) {
        if self.warned.insert(key.to_string()) {
            crate::diag!("hsched: warning: {msg}");
        }
    }

    /// Runs until the end condition; returns the report.
    pub fn run(mut self) -> Result<Report, LiveError> {
        if let Some(cmd) = self.opts.command.clone() {
            let name = std::path::Path::new(&cmd[0])
                .file_name()
                .map_or("command".into(), |s| s.to_string_lossy().into_owned());
            let sched = match &self.opts.command_scheduler {
                Some(s) => hierarchy::instance(&self.hsi, s)?,
                None => self.hsi.default_instance().ok_or_else(|| {
                    LiveError::Hierarchy(
                        "`-- COMMAND` needs a default scheduler (or --scheduler)".into(),
                    )
                })?,
            };
            self.launch(
                &name,
                Some(&cmd),
                None,
                None,
                sched,
                self.opts.command_params.clone(),
            )?;
        }
        let mut ready = Vec::new();
        self.cpu_base = sys::thread_cpu_ns();
        self.pump();
        // The file's programs that start at once may all have failed.
        self.check_end();
        while !self.shutdown {
            self.arm_timer();
            ready.clear();
            if let Err(e) = self.epoll.wait(&mut ready, -1) {
                return Err(LiveError::Io(format!("epoll_wait: {e}")));
            }
            self.stats.wakeups += 1;
            for &tok in &ready {
                match tok {
                    TOK_TIMER => {
                        self.timer.clear();
                        self.timer_fired();
                        self.expire_clients();
                    }
                    TOK_SIGNAL => self.on_signals(),
                    TOK_IDLE_WAKES => self.idle_wakes_ready = true,
                    TOK_LISTEN => self.accept_clients(),
                    TOK_COOP => {
                        if let Some(c) = &self.coop {
                            c.clear_doorbell();
                        }
                    }
                    t if t >= TOK_CLIENT => self.client_io(t),
                    _ => {}
                }
            }
            self.pump();
            self.heartbeat();
            self.check_end();
        }
        // Every program the file asked for was tried, and none started: no
        // report of nothing (a run stopped before some were due gets one).
        if self.launches.is_empty()
            && self.groups.iter().all(|g| !g.launched)
            && !self.stats.launch_failures.is_empty()
        {
            self.shutdown_all();
            let why: Vec<String> = self
                .stats
                .launch_failures
                .iter()
                .map(|(name, e)| format!("\n  `{name}`: {e}"))
                .collect();
            // EMFILE: each followed thread holds perf events on every CPU.
            let help = if why.iter().any(|w| w.contains("(os error 24)")) {
                format!(
                    "\n  = help: each program needs about {} file descriptors here (6 per online CPU); raise the open-file limit (`ulimit -n`)",
                    6 * sys::online_cpus().len()
                )
            } else {
                String::new()
            };
            return Err(LiveError::Setup(format!(
                "no program could be launched, so nothing ran:{}{help}",
                why.concat()
            )));
        }
        Ok(self.finish())
    }

    /// Tells the watchdog the daemon is alive, at most every
    /// [`crate::watchdog::HEARTBEAT_NS`] while threads are managed (the
    /// loop wakes every `CHECK_NS` then).
    fn heartbeat(&mut self) {
        let now = sys::now_ns();
        if self.threads.is_empty()
            || now.saturating_sub(self.last_heartbeat) < crate::watchdog::HEARTBEAT_NS
        {
            return;
        }
        self.last_heartbeat = now;
        if let Some(wd) = &self.wd {
            // A watchdog that is gone is reaped, and handled, in `reap`.
            let _ = wd.heartbeat();
        }
    }

    /// The timerfd fired: spin to the HSI timer when armed early, and
    /// record how late the daemon is for it.
    fn timer_fired(&mut self) {
        if let Some(t) = self.spin_to.take() {
            let c0 = sys::thread_cpu_ns();
            while sys::now_ns() < t {
                std::hint::spin_loop();
            }
            let spun = sys::thread_cpu_ns().saturating_sub(c0);
            self.stats.spin_ns += spun;
        }
        if let Some(d) = self.timer_due.take() {
            let now = sys::now_ns();
            if now >= d && self.stats.timer_late_ns.len() < 4_000_000 {
                self.stats.timer_late_ns.push(now - d);
            }
            if self.debug {
                crate::diag!(
                    "[{}] HSI timer due {} late {} ns",
                    now - self.epoch,
                    d - self.epoch,
                    now.saturating_sub(d)
                );
            }
        }
    }

    fn arm_timer(&mut self) {
        let mut at = u64::MAX;
        let hsi_at = self
            .hsi
            .next_timer()
            .map(|t| self.epoch.saturating_add(t.0));
        if let Some(t) = hsi_at {
            at = at.min(t);
        }
        if let Some(&(t, _)) = self.launches.first() {
            at = at.min(t);
        }
        if let Some(&(t, _)) = self.kills.first() {
            at = at.min(t);
        }
        if let Some(op) = self.ops.first() {
            at = at.min(self.epoch + op.at.as_nanos());
        }
        if let Some(e) = self.end_at {
            at = at.min(e);
        }
        if let Some(t) = self.gov.next_wake() {
            at = at.min(t);
        }
        if let Some(t) = self.signals_paused_until {
            at = at.min(t);
        }
        if self.targets_dirty {
            at = at.min(self.filter_at + FILTER_GAP_NS);
        }
        if !self.threads.is_empty() {
            at = at.min(self.next_sweep).min(self.next_check);
            if let Some(w) = crate::coop::next_wake(self) {
                at = at.min(w);
            }
            if let Some(p) = self.progress.due(&self.hsi) {
                at = at.min(p);
            }
        }
        if !self.conns.is_empty() || !self.pending_rmdir.is_empty() {
            at = at.min(sys::now_ns() + 1_000_000_000);
        }
        self.timer_due = (Some(at) == hsi_at).then_some(at);
        self.spin_to = None;
        let mut arm = at;
        if self.early_ns > 0 && self.timer_due.is_some() {
            let now = sys::now_ns();
            if at > now + self.early_ns {
                arm = at - self.early_ns;
                self.spin_to = Some(at);
            }
        }
        let _ = self.timer.arm((arm != u64::MAX).then_some(arm));
    }

    fn on_signals(&mut self) {
        while let Some(sig) = sys::read_signal(&self.sigfd) {
            match sig {
                libc::SIGCHLD => self.reap(),
                s => {
                    self.stats.ended_by = format!("signal {s}");
                    for g in &self.groups {
                        if g.launched && g.exit_status.is_none() {
                            let _ = sys::kill(-g.pid, s);
                        }
                    }
                    self.shutdown = true;
                }
            }
        }
    }

    fn reap(&mut self) {
        while let Some((pid, status, cpu)) = sys::reap_any_rusage() {
            if self.debug {
                crate::diag!(
                    "[{}] reaped {pid} status {status}",
                    sys::now_ns().saturating_sub(self.epoch)
                );
            }
            if self.wd.as_ref().is_some_and(|w| w.pid() == pid) {
                self.watchdog_ended(status);
                continue;
            }
            if let Some(g) = self.groups.iter_mut().find(|g| g.pid == pid && g.launched) {
                g.exit_status = Some(status);
                g.cpu_ns = Some(cpu);
            }
        }
    }

    /// The watchdog ended: nothing would restore the threads after a
    /// `kill -9` from now on, so the daemon restores them itself and ends
    /// the run, saying why. A watchdog that found the daemon unresponsive
    /// has already restored them (and the daemon, stopped or hung, is back).
    fn watchdog_ended(&mut self, status: i32) {
        self.wd = None;
        let why = if libc::WIFEXITED(status)
            && libc::WEXITSTATUS(status) == crate::watchdog::EXIT_UNRESPONSIVE
        {
            format!(
                "the daemon was stopped for {} ms or silent for {} ms, so its watchdog restored every thread",
                crate::watchdog::STOPPED_NS / 1_000_000,
                crate::watchdog::UNRESPONSIVE_NS / 1_000_000
            )
        } else if libc::WIFSIGNALED(status) {
            format!(
                "its watchdog was killed by signal {}; every thread was restored",
                libc::WTERMSIG(status)
            )
        } else {
            format!("its watchdog ended (status {status}); every thread was restored")
        };
        crate::diag!("hsched: {why}, and the run ends");
        self.stats.ended_by = format!("fail-safe: {why}");
        self.shutdown = true;
    }

    /// Checks every managed thread against procfs (every 200 ms while
    /// threads are managed, and after lost events): a thread the HSI holds
    /// blocked that is running and not frozen missed its wake-up; also
    /// samples CPU times for threads that may exit.
    /// Compares the HSI's view with `/proc`: a thread the HSI holds blocked
    /// that is runnable and not frozen gets its lost wake-up. `full` also
    /// refreshes the CPU times (every `SWEEP_NS`); the state check alone runs
    /// every `CHECK_NS`, because on this kernel a wake-up in the idle task's
    /// context (a timer on an idle CPU, during real-time throttling) writes
    /// no perf sample, and a thread that then cannot run (throttled, or
    /// queued behind a granted thread at its own `SCHED_FIFO` priority)
    /// writes no switch-in record either. While the ftrace instance
    /// records those wake-ups for every managed thread, the full sweep
    /// alone remains, as a backstop (a new thread the filter does not list
    /// yet, a record lost), at a tenth of the cost.
    fn sweep(&mut self, full: bool) {
        let now = sys::now_ns();
        if full {
            self.next_sweep = now + SWEEP_NS;
        }
        let covered = self.idle_wakes.as_ref().is_ok_and(|w| w.complete);
        self.next_check = now + if covered { SWEEP_NS } else { CHECK_NS };
        let mut wake = Vec::new();
        let mut gone = Vec::new();
        if full {
            self.backstop(now);
        }
        for m in self.threads.values_mut() {
            if full {
                let c = enforce::proc_cpu_ns(m.tid);
                if let Some(c) = c {
                    m.cpu_ns = c;
                }
                if m.missing || (c.is_none() && !m.orig.same_thread()) {
                    gone.push(m.tid);
                    continue;
                }
            }
            if !m.frozen && !self.hsi.thread_runnable(m.hsi) && m.last_event + RESYNC_GUARD_NS < now
            {
                // The read time, not `now`, becomes the thread's last event:
                // a block after the read must still be applied.
                let read_at = sys::now_ns();
                if enforce::proc_state(m.tid) == Some('R') {
                    wake.push((m.tid, m.hsi, read_at));
                }
            }
        }
        if full {
            for g in self.groups.iter_mut() {
                if g.exit_status.is_none() {
                    if let Some(c) = sys::process_cpu_ns_of(g.pid) {
                        g.cpu_ns = Some(c);
                    }
                }
            }
        }
        for tid in gone {
            self.vanished(tid, now);
        }
        for (tid, t, read_at) in wake {
            // `vanished` may have removed the thread or, for an `execve`
            // from another thread, put that thread's entry under `tid`.
            let Some(m) = self.threads.get_mut(&tid).filter(|m| m.hsi == t) else {
                continue;
            };
            m.last_event = m.last_event.max(read_at);
            self.stats.resyncs += 1;
            if self.debug {
                crate::diag!("[{}] resync {tid}", now.saturating_sub(self.epoch));
            }
            if let Err(e) = self.hsi.wake(self.inst(now), t) {
                self.protocol_error(e);
            }
            self.touched.push(tid);
        }
    }

    /// Managed thread `tid` is no longer in `/proc` and no exit record
    /// removed it, or it is `missing`. An `execve` from it made it its
    /// process's leader (its record lost, or still on its way): renamed
    /// now. A leader whose tid an unmanaged thread was taking over at its
    /// exit record: kept if that is done. Otherwise it exited with its
    /// record lost (a full ring, its events closed): removed at the next
    /// full sweep if the record has not come by then, so that a record
    /// still in a ring is applied rather than overtaken.
    fn vanished(&mut self, tid: i32, now: u64) {
        let Some(m) = self.threads.get_mut(&tid) else {
            return;
        };
        if let Some((new, start)) = exec_successor(m) {
            self.stats.execs_found += 1;
            self.rename(tid, new, start, now);
        } else if m.missing && took_over(m) {
            self.stats.execs_found += 1;
            self.renamed_in_place(tid, now);
        } else if m.missing {
            self.stats.exits_found += 1;
            self.thread_exit(tid, now);
        } else {
            m.missing = true;
        }
    }

    /// The backstop for a lost or paused `signal_generate` record, or a
    /// freeze that raced with the signal: checks every frozen thread, and
    /// every thread marked leaving that is still here after
    /// `DYING_PATIENCE_NS`.
    fn backstop(&mut self, now: u64) {
        let check: Vec<(i32, u64)> = self
            .threads
            .values()
            .filter(|m| m.frozen || m.dying.is_some_and(|t| t + DYING_PATIENCE_NS < now))
            .map(|m| (m.tid, m.orig.start))
            .collect();
        for (tid, start) in check {
            self.stats.fatal_checks += 1;
            let leaving = enforce::proc_leaving(tid, start);
            let Some(m) = self.threads.get_mut(&tid) else {
                continue;
            };
            match leaving {
                Some(enforce::Leaving::Signal(_) | enforce::Leaving::Exiting)
                    if m.dying.is_none() =>
                {
                    self.stats.fatal_by_sweep += 1;
                    self.leave(tid, None);
                }
                None if m.dying.is_some() => {
                    // Gone, its exit record lost (a sibling's events
                    // closed, a full ring): it leaves the hierarchy now.
                    self.stats.exits_found += 1;
                    self.thread_exit(tid, now);
                }
                Some(enforce::Leaving::No) if m.dying.is_some() => {
                    // Not leaving after all: managed again, frozen by the
                    // next dispatch unless granted.
                    m.dying = None;
                    self.touched.push(tid);
                }
                _ => {}
            }
        }
    }

    /// Points the signal filter at the managed threads and processes.
    fn update_signal_targets(&mut self, now: u64) {
        if !self.targets_dirty || now < self.filter_at + FILTER_GAP_NS {
            return;
        }
        self.targets_dirty = false;
        self.filter_at = now;
        let mut ids: Vec<i32> = self
            .threads
            .values()
            .flat_map(|m| [m.tid, m.orig.tgid])
            .collect();
        ids.sort_unstable();
        ids.dedup();
        let t0 = sys::now_ns();
        if let Ok(w) = self.idle_wakes.as_mut() {
            // The map is ordered by tid.
            let tids: Vec<i32> = self.threads.keys().copied().collect();
            if let Err(e) = w.set_targets(&tids) {
                self.warn(
                    "wake-filter",
                    format!("the idle wake-up filter could not follow the managed threads: {e}"),
                );
            }
        }
        let r = self.obs.set_signal_targets(&ids);
        if self.debug {
            crate::diag!(
                "[{}] signal filter for {} ids in {} us",
                t0.saturating_sub(self.epoch),
                ids.len(),
                (sys::now_ns() - t0) / 1_000
            );
        }
        if let Err(e) = r {
            self.warn(
                "signal-filter",
                format!("the signal filter could not follow the managed threads: {e}"),
            );
        }
    }

    /// Counts one signal record against the budget; pauses the signal
    /// events when it is spent.
    fn signal_budget(&mut self, now: u64) {
        let (start, n) = &mut self.signal_window;
        if now.saturating_sub(*start) > SIGNAL_WINDOW_NS {
            *start = now;
            *n = 0;
        }
        *n += 1;
        if *n > SIGNAL_BUDGET && self.signals_paused_until.is_none() {
            self.obs.pause_signals(true);
            self.signals_paused_until = Some(now + SIGNAL_PAUSE_NS);
            self.stats.signal_pauses += 1;
        }
    }

    fn check_end(&mut self) {
        let now = sys::now_ns();
        if self.end_at.is_some_and(|e| now >= e) {
            if self.stats.ended_by.is_empty() {
                self.stats.ended_by = "duration".into();
            }
            self.shutdown = true;
        }
        let launched: Vec<&Group> = self.groups.iter().filter(|g| g.launched).collect();
        // Asked to launch programs, none of which could be: the run failed,
        // however long it was to last (Daemon::run says which and why).
        if self.launches.is_empty() && launched.is_empty() && !self.stats.launch_failures.is_empty()
        {
            self.stats.ended_by = "no program could be launched".into();
            self.shutdown = true;
        }
        // The run waits for the programs it launched (`exec`, the `--
        // COMMAND`), not for the built-in workloads beside them, which end
        // with it; a run of built-in workloads alone waits for them all.
        let program = |spec: Option<usize>| spec.is_none_or(|i| self.h.threads[i].exec.is_some());
        let programs = self.waits_for_programs;
        let waited = |g: &Group| !programs || program(g.spec);
        let pending = self
            .launches
            .iter()
            .any(|&(_, i)| !programs || program(Some(i)));
        let done = if programs && !self.stats.launch_failures.is_empty() {
            // Those that could not be launched are not waited for.
            true
        } else {
            launched.iter().any(|g| waited(g))
        };
        if self.end_at.is_none()
            && !self.opts.until_stopped
            && !pending
            && done
            && launched
                .iter()
                .filter(|g| waited(g))
                .all(|g| g.exit_status.is_some())
        {
            self.stats.ended_by = "programs exited".into();
            self.shutdown = true;
        }
    }

    /// Drains events, applies them, fires timers and enforces the dispatch.
    pub fn pump(&mut self) {
        let t_start = sys::thread_cpu_ns();
        self.events.clear();
        let mut evs = std::mem::take(&mut self.events);
        crate::coop::collect(self);
        self.obs.drain(&mut evs);
        // Read only when epoll said so (level-triggered: what is left
        // is reported again): two system calls saved on every other pump.
        if let Some(w) = self
            .idle_wakes
            .as_mut()
            .ok()
            .filter(|_| self.idle_wakes_ready)
        {
            w.drain(&mut evs);
            self.idle_wakes_ready = false;
        }
        let mut steals = std::mem::take(&mut self.steals);
        steals.clear();
        if let Some(m) = self.stolen.as_mut() {
            m.collect(sys::now_ns(), &mut steals);
            steals.sort_by_key(|s| s.at);
        }
        if !evs.is_empty() || !steals.is_empty() {
            evs.sort_by_key(|e| e.time());
            let now = sys::now_ns();
            // Stolen stretches go in at their end time, among the events,
            // so each is charged to the thread the hierarchy ran then.
            let mut k = 0;
            for e in &evs {
                while k < steals.len() && steals[k].at <= e.time() {
                    self.feed_stolen(steals[k]);
                    k += 1;
                }
                crate::coop::serve(self, e.time());
                let before = self.stats.inputs();
                self.apply_event(*e);
                // Only records that fed the HSI an input count: a
                // switch-in that confirms a thread already runnable (most
                // of them) wakes no reader (perf wakes the daemon for
                // samples only) and waits in the ring for the next one.
                if self.stats.inputs() != before && self.stats.latency.len() < 4_000_000 {
                    self.stats.latency.push(now.saturating_sub(e.time()));
                }
            }
            for &s in &steals[k..] {
                self.feed_stolen(s);
            }
        }
        self.steals = steals;
        self.events = evs;
        crate::coop::serve(self, u64::MAX);
        crate::coop::wake_sleepers(self, sys::now_ns());
        let now = sys::now_ns();
        while let Some(&(t, i)) = self.launches.first() {
            if t > now {
                break;
            }
            self.launches.remove(0);
            let spec = self.h.threads[i].clone();
            if let Err(e) = self.launch_spec(i, &spec) {
                crate::diag!("hsched: could not launch `{}`: {e}", spec.name);
                self.stats
                    .launch_failures
                    .push((spec.name.clone(), e.to_string()));
            }
        }
        while let Some(&(t, g)) = self.kills.first() {
            if t > now {
                break;
            }
            self.kills.remove(0);
            let pid = self.groups[g].pid;
            if self.groups[g].exit_status.is_none() {
                let _ = sys::kill(-pid, libc::SIGKILL);
            }
        }
        while self
            .ops
            .first()
            .is_some_and(|o| self.epoch + o.at.as_nanos() <= now)
        {
            let op = self.ops.remove(0);
            let at = self.inst(now);
            let names = self.thread_names();
            let r = hierarchy::apply_op(&mut self.hsi, at, &op.op, &|n| names.get(n).copied());
            self.stats.operations += 1;
            if let Err(e) = r {
                crate::diag!("hsched: timed operation at {}: {e}", op.at);
            }
        }
        if self.signals_paused_until.is_some_and(|t| now >= t) {
            self.signals_paused_until = None;
            self.obs.pause_signals(false);
            self.backstop(now);
        }
        self.update_signal_targets(now);
        let lost = self.obs.lost + self.idle_wakes.as_ref().map_or(0, |w| w.lost_pages);
        if now >= self.next_sweep || lost != self.lost_seen {
            self.lost_seen = lost;
            self.sweep(true);
        } else if now >= self.next_check {
            self.sweep(false);
        }
        // Fresh fill levels before the controller's timer may fire.
        self.progress
            .tick(now, self.epoch, &mut self.hsi, &self.threads);
        if let Err(e) = self.hsi.fire_timers(self.inst(now)) {
            self.protocol_error(e);
        }
        self.unload_failed();
        self.enforce();
        crate::coop::reply(self);
        if !self.pending_rmdir.is_empty() {
            self.pending_rmdir
                .retain(|cg| std::fs::remove_dir(cg.dir()).is_err());
        }
        self.stats.pump_cpu_ns += sys::thread_cpu_ns() - t_start;
    }

    /// Reports one stretch of stolen time to the HSI when the hierarchy
    /// runs a thread on that CPU (time stolen from an idle CPU is nobody's).
    fn feed_stolen(&mut self, s: Steal) {
        if let Some(v) = self.stats.stolen_measured_ns.get_mut(s.cpu) {
            *v += s.ns;
        }
        let cpu = CpuId(s.cpu as u32);
        if let Some(t) = self.hsi.running(cpu) {
            self.hsi.add_stolen(self.inst(s.at), cpu, Duration(s.ns));
            let tid = self.by_hsi.get(t.index()).copied().unwrap_or(0);
            if let Some(m) = self.threads.get_mut(&tid) {
                m.stolen_ns += s.ns;
            }
            self.stats.stolen_reports += 1;
            if let Some(v) = self.stats.stolen_fed_ns.get_mut(s.cpu) {
                *v += s.ns;
            }
        }
    }

    pub fn thread_names(&self) -> BTreeMap<String, ThreadId> {
        self.threads
            .values()
            .map(|m| (m.name.clone(), m.hsi))
            .collect()
    }

    pub fn protocol_error(&mut self, e: hsched_core::HsiError) {
        self.stats.protocol_errors += 1;
        self.warn(
            "protocol",
            format!("hierarchy error (further ones counted in the report): {e}"),
        );
    }

    fn apply_event(&mut self, e: Event) {
        if self.debug {
            crate::diag!("[{}] event {e:?}", e.time().saturating_sub(self.epoch));
        }
        match e {
            Event::Preempt { time, tid } => {
                let granted = self.running.contains(&Some(tid));
                if let Some(m) = self.threads.get_mut(&tid).filter(|m| granted && !m.frozen) {
                    m.off_since.get_or_insert(time);
                }
            }
            Event::Wake { time, tid, .. } | Event::Run { time, tid } => {
                if let Some(m) = self.threads.get_mut(&tid) {
                    if matches!(e, Event::Run { .. }) {
                        // Back on its CPU: the stretch off it ends.
                        if let Some(t0) = m.off_since.filter(|&t0| time >= t0) {
                            m.lost_ns += time - t0;
                            m.off_since = None;
                        }
                        m.woke_at = None;
                    } else {
                        m.woke_at.get_or_insert(time);
                    }
                }
                if crate::coop::parked(self, tid) {
                    return;
                }
                let Some(m) = self.threads.get_mut(&tid) else {
                    return;
                };
                if time < m.last_event {
                    return;
                }
                m.last_event = time;
                let t = m.hsi;
                if !self.hsi.thread_runnable(t) {
                    m.wakeups += 1;
                    self.stats.wakes += 1;
                    let at = self.inst(time);
                    if let Err(e) = self.hsi.wake(at, t) {
                        self.protocol_error(e);
                    }
                }
                self.touched.push(tid);
            }
            Event::Block { time, tid, state } => {
                if crate::coop::before_block(self, tid, time) {
                    return;
                }
                let Some(m) = self.threads.get_mut(&tid) else {
                    return;
                };
                m.woke_at = None;
                // The freezer parks a thread uninterruptibly (reported as
                // D); an interruptible sleep (S) is the thread's own, even
                // between a freeze request and the thaw: a thread that ends
                // its job as the freeze comes must not be held runnable
                // while it sleeps, its grant spent on an idle CPU.
                let by_freezer = state != STATE_INTERRUPTIBLE
                    && m.frozen_at != 0
                    && time >= m.frozen_at
                    && (m.frozen || time <= m.thawed_at);
                if time < m.last_event || by_freezer {
                    return;
                }
                m.last_event = time;
                let t = m.hsi;
                if self.hsi.thread_runnable(t) {
                    self.stats.blocks += 1;
                    let at = self.inst(time);
                    if let Err(e) = self.hsi.block(at, t) {
                        self.protocol_error(e);
                    }
                }
                // Frozen after this block while the block was still in the
                // ring: left frozen, its wake-up would be absorbed by the
                // freezer (no sample) and it would never run again.
                if let Some(m) = self.threads.get_mut(&tid).filter(|m| m.frozen) {
                    if let Some(cg) = &m.cg {
                        let _ = cg.thaw();
                    }
                    m.frozen = false;
                    m.thawed_at = sys::now_ns();
                }
            }
            Event::Fork {
                time,
                parent,
                child,
            } => {
                if self.threads.contains_key(&child) {
                    return;
                }
                let Some(p) = self.threads.get(&parent) else {
                    return;
                };
                let (group, pname, pt, porig, pfifo, ppin) =
                    (p.group, p.name.clone(), p.hsi, p.orig, p.fifo, p.pinned);
                let base = pname.split('/').next().unwrap_or(&pname).to_string();
                let name = format!("{base}/{child}");
                let Ok((tgid, start)) = enforce::proc_identity(child) else {
                    return;
                };
                // Its creator's scheduler and parameters, unless a rule
                // says otherwise.
                let rule = self.rule_for(child, tgid);
                let placed = u64::from(rule.is_some());
                let (sched, params) = rule.unwrap_or_else(|| {
                    let params = self.hsi.vp_info(self.hsi.thread_vp(pt)).params;
                    (self.hsi.thread_parent(pt), params)
                });
                let orig = Original {
                    tid: child,
                    tgid,
                    start,
                    ..porig
                };
                if let Err(e) = self.adopt(child, name, group, orig, sched, params, false, time) {
                    // A thread that ended (or is ending) before the
                    // daemon read its creation leaves nothing to manage.
                    if enforce::proc_leaving(child, start) == Some(enforce::Leaving::No) {
                        self.warn(
                            "fork",
                            format!("a new thread ({child}) could not join the hierarchy: {e}"),
                        );
                    }
                } else if let Some(m) = self.threads.get_mut(&child) {
                    m.fifo = pfifo;
                    m.pinned = ppin;
                    m.by_rules = true;
                    self.stats.rule_placed += placed;
                }
            }
            Event::Exit { time, tid } => {
                if self.threads.get(&tid).is_some_and(|m| time < m.renamed_at) {
                    // The old leader's exit, recorded before the `execve`
                    // that gave its tid to the thread managed under it now
                    // (its entry already left, see `thread_exec`).
                    return;
                }
                if self.leader_taken_over(tid, time) {
                    return;
                }
                let tgid = self.threads.get(&tid).map(|m| m.orig.tgid);
                self.thread_exit(tid, time);
                // A group exit (a fatal signal to one thread, `exit_group`)
                // puts SIGKILL in every other thread's own set without a
                // `signal_generate` record; the first thread's exit is the
                // earliest sign of it.
                if let Some(g) = tgid {
                    self.check_group(g, true, time);
                }
            }
            Event::Exec { time, pid, old_pid } => {
                if pid != old_pid {
                    self.thread_exec(old_pid, pid, time);
                }
                self.apply_rules(pid, time);
            }
            Event::Rename { time, tid } => self.apply_rules(tid, time),
            Event::Signal { time, pid, sig } => self.on_signal(pid, sig, time),
        }
    }

    /// The scheduler and parameters the first `[[rule]]` matching thread
    /// `tid` of process `tgid` gives it, by their names now; `None` when
    /// no rule matches (or its scheduler is gone: destroyed through the
    /// control interface).
    fn rule_for(&mut self, tid: i32, tgid: i32) -> Option<(InstanceId, Params)> {
        if self.h.rules.is_empty() {
            return None;
        }
        let thread = enforce::proc_comm(tid)?;
        let program = enforce::proc_comm(tgid)?;
        let (i, rule) =
            (self.h.rules.iter().enumerate()).find(|(_, r)| r.matches(&thread, &program))?;
        // A rule with a guarantee asks the resource manager instead
        // (control.rs, `rm_rules`).
        if rule.guarantee.is_some() {
            return None;
        }
        match hierarchy::instance(&self.hsi, &rule.scheduler) {
            Ok(to) => Some((to, rule.params.clone())),
            Err(_) => {
                let msg = format!(
                    "rule #{} places thread `{thread}` of `{program}` under scheduler `{}`, which no longer exists; it stays where it is",
                    i + 1,
                    rule.scheduler
                );
                self.warn(&format!("rule-{i}"), msg);
                None
            }
        }
    }

    /// Thread `tid` was renamed or called `execve`: if it was created by a
    /// managed thread and a `[[rule]]` now matches it, it moves to that
    /// rule's scheduler (unless it is there already).
    fn apply_rules(&mut self, tid: i32, time: u64) {
        let Some(m) = self.threads.get(&tid).filter(|m| m.by_rules) else {
            return;
        };
        let (t, tgid) = (m.hsi, m.orig.tgid);
        let Some((to, params)) = self.rule_for(tid, tgid) else {
            return;
        };
        if self.hsi.thread_parent(t) == to {
            return;
        }
        let at = self.inst(time);
        match self.hsi.move_thread(at, t, to, params) {
            Ok(()) => self.stats.rule_moves += 1,
            Err(e) => {
                let name = self.threads.get(&tid).map_or("", |m| m.name.as_str());
                let msg = format!("thread `{name}` matches a [[rule]] but could not move: {e}");
                self.warn(&format!("rule-move-{tid}"), msg);
            }
        }
    }

    /// The exit record of managed thread `tid`, a process's leader, while
    /// an unmanaged thread of the process takes over its tid by `execve`:
    /// one whose fork record was applied only after the `execve` had
    /// renamed it (no `/proc` entry left to adopt), or whose adoption
    /// failed. Such a thread is in the leader's freezer cgroup (a thread
    /// starts in its creator's), so the leader's entry goes on as that task
    /// instead of leaving (which would also close the perf events that
    /// task inherited). `true` when the entry stays: the task named `tid`
    /// is in it now, or another thread of the process is and the takeover
    /// is still under way (`missing`: the next full sweep decides).
    fn leader_taken_over(&mut self, tid: i32, time: u64) -> bool {
        let Some(m) = self.threads.get(&tid) else {
            return false;
        };
        if took_over(m) {
            self.renamed_in_place(tid, time);
            return true;
        }
        let pending = tid == m.orig.tgid
            && m.cg.as_ref().is_some_and(|cg| {
                cg.tasks()
                    .into_iter()
                    .any(|t| t != tid && enforce::proc_identity(t).is_ok_and(|(g, _)| g == tid))
            });
        if pending {
            if let Some(m) = self.threads.get_mut(&tid) {
                m.missing = true;
            }
        }
        pending
    }

    /// The leader's entry `tid` is the task that took over its tid by
    /// `execve` (see [`Daemon::leader_taken_over`]) since kernel time
    /// `time`. The same tid and start time (`de_thread` gives the caller
    /// the leader's), so the watchdog record and the cgroup stay; the old
    /// leader's HSI state is fixed by the check sweep (a runnable task the
    /// HSI holds blocked), and policy and affinity are those the thread
    /// inherited, applied afresh at its next grant.
    fn renamed_in_place(&mut self, tid: i32, time: u64) {
        let Some(m) = self.threads.get_mut(&tid) else {
            return;
        };
        m.renamed_at = time;
        m.last_event = m.last_event.max(time);
        m.missing = false;
        m.dying = None;
        m.fifo = sys::sched_getattr(tid).is_ok_and(|a| a.policy == libc::SCHED_FIFO as u32);
        m.pinned = None;
        self.stats.execs += 1;
        self.touched.push(tid);
        if self.debug {
            crate::diag!(
                "[{}] exec: an unmanaged thread is {tid} now",
                time.saturating_sub(self.epoch)
            );
        }
    }

    /// Managed thread `old` called `execve` from a thread other than its
    /// process's leader and is now thread `new` (the leader's tid); see
    /// [`Daemon::rename`]. Checked first: the task named `new` now is the
    /// one in `old`'s freezer cgroup. When it is not (it exited since, or
    /// the record is stale), nothing changes here: the full sweep finds
    /// `old` gone and renames or removes it.
    fn thread_exec(&mut self, old: i32, new: i32, time: u64) {
        let Some(m) = self.threads.get(&old) else {
            return;
        };
        match exec_successor(m) {
            Some((tid, start)) if tid == new => self.rename(old, new, start, time),
            _ => {
                if self.debug {
                    crate::diag!(
                        "[{}] exec {old} -> {new} not confirmed by its cgroup",
                        time.saturating_sub(self.epoch)
                    );
                }
            }
        }
    }

    /// Thread `old` is thread `new` from now on, the same task (an
    /// `execve` from a non-leader thread, at kernel time `time`; `start`:
    /// its start time as `/proc/NEW/stat` reports it, which `de_thread`
    /// sets to the old leader's). Everything keyed by tid follows it; its
    /// freezer cgroup, HSI thread, policy and affinity stay. The old leader
    /// (the entry under `new`, if its exit record has not been applied) is
    /// gone: it leaves first, while `old` still counts in its group, so
    /// that the group's held perf events (which the renamed task inherited)
    /// stay open.
    fn rename(&mut self, old: i32, new: i32, start: u64, time: u64) {
        if !self.threads.contains_key(&old) {
            return;
        }
        if self.threads.contains_key(&new) {
            // Its /proc entry is the renamed task's now: no CPU sample.
            self.thread_gone(new, time, false);
        }
        let Some(mut m) = self.threads.remove(&old) else {
            return;
        };
        let was = m.orig;
        m.tid = new;
        m.orig.tid = new;
        m.orig.start = start;
        m.renamed_at = time;
        m.last_event = m.last_event.max(time);
        m.missing = false;
        // The new record in the same write as the old one's removal.
        if let Some(Err(e)) = self.wd.as_ref().map(|wd| wd.replace(&was, &m.orig)) {
            self.warn(
                "watchdog-exec",
                format!("the watchdog could not follow thread {old}'s exec (now {new}): {e}"),
            );
        }
        if let Some(slot) = self.by_hsi.get_mut(m.hsi.index()) {
            *slot = new;
        }
        for r in self.running.iter_mut().filter(|r| **r == Some(old)) {
            *r = Some(new);
        }
        for t in self.touched.iter_mut().filter(|t| **t == old) {
            *t = new;
        }
        self.gov.rename(old, new);
        self.touched.push(new);
        self.threads.insert(new, m);
        self.stats.execs += 1;
        self.targets_dirty = true;
        if self.debug {
            crate::diag!(
                "[{}] exec: thread {old} is {new} now",
                time.saturating_sub(self.epoch)
            );
        }
    }

    /// A possibly fatal signal `sig` was sent to thread `pid` (or to its
    /// process). A thread the v1 freezer holds does not act on it until
    /// thawed, so every thread of a managed target process is checked now:
    /// the frozen ones, and the others before the dispatch that follows
    /// could freeze them (one woken by the signal, say).
    fn on_signal(&mut self, pid: i32, sig: i32, time: u64) {
        self.stats.signal_records += 1;
        self.signal_budget(sys::now_ns());
        if self.signals_paused_until.is_some() {
            // Over budget: the records still in the rings are skipped
            // too; the backstop after the pause covers them.
            return;
        }
        let tgid = self.threads.get(&pid).map_or(pid, |m| m.orig.tgid);
        if !self.threads.values().any(|m| m.orig.tgid == tgid) {
            return;
        }
        // A signal the process handles or ignores is not fatal, whatever
        // its number; SIGKILL cannot be either.
        if sig != libc::SIGKILL && enforce::proc_handles(tgid, sig) == Some(true) {
            return;
        }
        self.check_group(tgid, false, time);
    }

    /// Checks the threads of process `tgid` not yet known to be leaving
    /// and lets each one that is leave ([`Daemon::leave`]). `first_only`:
    /// stop at the first thread that is not leaving (after an exit, a
    /// group exit has marked all of them or none).
    fn check_group(&mut self, tgid: i32, first_only: bool, time: u64) {
        let tids: Vec<(i32, u64)> = self
            .threads
            .values()
            .filter(|m| m.orig.tgid == tgid && m.dying.is_none())
            .map(|m| (m.tid, m.orig.start))
            .collect();
        for (tid, start) in tids {
            self.stats.fatal_checks += 1;
            match enforce::proc_leaving(tid, start) {
                Some(enforce::Leaving::Signal(_) | enforce::Leaving::Exiting) => {
                    self.leave(tid, Some(time))
                }
                Some(enforce::Leaving::No) if first_only => return,
                _ => {}
            }
        }
    }

    /// Thread `tid` is leaving (a fatal signal pending, or exiting): thaw
    /// it if frozen, and let it run to its exit at `SCHED_OTHER` (original
    /// nice) on its original CPUs other than the managed ones (all of them
    /// when that leaves none), so that it neither waits for a grant nor
    /// takes a managed CPU from the granted thread. Policy and affinity
    /// change before the thaw, so that the thaw's wake-up already places
    /// it: woken first, it would queue on its managed CPU behind the
    /// granted `SCHED_FIFO` thread until the fair class's load balancing
    /// moved it (25 ms measured). It stays in the hierarchy (no input is
    /// fed for it) until its `sched_process_exit`.
    /// `seen`: the kernel time of the record that showed it (the signal or
    /// a sibling's exit), for `live.signals.thaw_latency`.
    fn leave(&mut self, tid: i32, seen: Option<u64>) {
        let now = sys::now_ns();
        let granted = self.running.contains(&Some(tid));
        if !granted {
            self.unleash(tid, true);
        }
        let Some(m) = self.threads.get_mut(&tid) else {
            return;
        };
        m.dying = Some(now);
        let was_frozen = m.frozen;
        if m.frozen {
            if let Some(cg) = &m.cg {
                let _ = cg.thaw();
            }
            m.frozen = false;
            m.thawed_at = now;
        }
        self.gov.cancel(tid);
        if was_frozen {
            self.stats.fatal_thaws += 1;
            if let Some(t) = seen.filter(|_| self.stats.fatal_latency_ns.len() < 100_000) {
                self.stats.fatal_latency_ns.push(now.saturating_sub(t));
            }
        }
        if self.debug {
            crate::diag!(
                "[{}] leaving {tid} (frozen {was_frozen}, granted {granted})",
                now.saturating_sub(self.epoch)
            );
        }
    }

    /// Runs leaving thread `tid` at `SCHED_OTHER` (original nice) on its
    /// original CPUs minus the managed ones (all of them when that leaves
    /// none); `always`: even if hsched has not raised or pinned it (it may
    /// still be on a managed CPU's queue, where it last ran).
    fn unleash(&mut self, tid: i32, always: bool) {
        let managed = &self.cpus;
        let Some(m) = self
            .threads
            .get_mut(&tid)
            .filter(|m| always || m.fifo || m.pinned.is_some())
        else {
            return;
        };
        let mut mask = CpuMask::empty();
        for c in m
            .orig
            .mask
            .cpus()
            .into_iter()
            .filter(|c| !managed.contains(c))
        {
            mask.set(c);
        }
        if mask.cpus().is_empty() {
            mask = m.orig.mask;
        }
        let _ = sys::sched_setattr(tid, &enforce::other_attr(&m.orig));
        let _ = sys::set_affinity(tid, &mask);
        m.fifo = false;
        m.pinned = None;
    }

    /// Keeps the perf events `fds` of a thread of `group` that left while
    /// other threads of the group are managed (they follow those threads
    /// through inheritance), and closes the held ones of a group that has
    /// no managed thread left.
    fn hold_fds(&mut self, group: usize, fds: Vec<OwnedFd>) {
        if !fds.is_empty() {
            self.held_fds.push((group, fds));
        }
        let threads = &self.threads;
        self.held_fds
            .retain(|(g, _)| threads.values().any(|m| m.group == *g));
    }

    /// Makes thread `tid` managed: watchdog record first, then its own
    /// freezer cgroup, then the HSI thread (blocked; `runnable` wakes it).
    #[allow(clippy::too_many_arguments)]
    pub fn adopt(
        &mut self,
        tid: i32,
        name: String,
        group: usize,
        orig: Original,
        sched: InstanceId,
        params: Params,
        runnable: bool,
        time: u64,
    ) -> Result<(), LiveError> {
        let wd = self
            .wd
            .as_ref()
            .ok_or_else(|| LiveError::Setup("shutting down".into()))?;
        wd.manage(&orig).map_err(io_err("watchdog"))?;
        let cg = match self.freezer.adopt(tid) {
            Ok(cg) => cg,
            Err(e) => {
                wd.forget(&orig);
                return Err(LiveError::Io(format!(
                    "freezer cgroup for thread {tid}: {e}"
                )));
            }
        };
        let at = self.inst(time);
        let t = match self.hsi.create_thread(at, &name, sched, params.clone()) {
            Ok(t) => t,
            Err(e) => {
                // Refused (e.g. admission): fall back to the default scheduler.
                let fallback = self.hsi.default_instance().filter(|&d| d != sched);
                match fallback.map(|d| self.hsi.create_thread(at, &name, d, Params::new())) {
                    Some(Ok(t)) => {
                        self.warn(
                            &format!("fallback-{name}"),
                            format!("thread `{name}` went to the default scheduler: {e}"),
                        );
                        t
                    }
                    _ => {
                        self.freezer.release(tid, &cg);
                        wd.forget(&orig);
                        return Err(LiveError::Refused(e.to_string()));
                    }
                }
            }
        };
        self.stats.creates += 1;
        self.targets_dirty = true;
        if self.by_hsi.len() <= t.index() {
            self.by_hsi.resize(t.index() + 1, 0);
        }
        self.by_hsi[t.index()] = tid;
        self.threads.insert(
            tid,
            Managed {
                tid,
                name,
                hsi: t,
                cg: Some(cg),
                frozen: false,
                frozen_at: 0,
                thawed_at: 0,
                fifo: false,
                pinned: None,
                orig,
                last_event: time,
                fds: Vec::new(),
                group,
                cpu_ns: 0,
                stolen_ns: 0,
                grants: 0,
                freezes: 0,
                wakeups: 0,
                created_ns: time.saturating_sub(self.epoch),
                dying: None,
                renamed_at: 0,
                missing: false,
                off_since: None,
                woke_at: None,
                lost_ns: 0,
                fixed_reservation: false,
                by_rules: false,
            },
        );
        if runnable {
            if let Err(e) = self.hsi.wake(at, t) {
                self.protocol_error(e);
            }
            self.touched.push(tid);
        }
        Ok(())
    }

    fn thread_exit(&mut self, tid: i32, time: u64) {
        self.thread_gone(tid, time, true);
    }

    /// Thread `tid` is gone (exited at `time`): it leaves the hierarchy;
    /// `sample`: its CPU time is read from `/proc` first (not when the tid
    /// names another task now).
    fn thread_gone(&mut self, tid: i32, time: u64, sample: bool) {
        let Some(mut m) = self.threads.remove(&tid) else {
            return;
        };
        if let Some(c) = enforce::proc_cpu_ns(tid).filter(|_| sample) {
            m.cpu_ns = c;
        }
        let received = self.hsi.thread_received(m.hsi).as_nanos();
        let scheduler = self
            .hsi
            .instance_name(self.hsi.thread_parent(m.hsi))
            .to_string();
        let at = self.inst(time);
        self.stats.exits += 1;
        if let Err(e) = self.hsi.exit(at, m.hsi) {
            self.protocol_error(e);
        }
        for r in self.running.iter_mut() {
            if *r == Some(tid) {
                *r = None;
            }
        }
        self.hold_fds(m.group, std::mem::take(&mut m.fds));
        self.targets_dirty = true;
        if let Some(cg) = m.cg.take() {
            // Not moved to the root: it leaves its cgroup by itself
            // (enforce.rs `release_exited`).
            if !self.freezer.release_exited(&cg) {
                self.pending_rmdir.push(cg);
            }
        }
        if let Some(wd) = &self.wd {
            wd.forget(&m.orig);
        }
        self.gone.push(Gone {
            name: m.name,
            scheduler,
            group: m.group,
            cpu_ns: m.cpu_ns,
            received_ns: received,
            grants: m.grants,
            freezes: m.freezes,
            wakeups: m.wakeups,
            created_ns: m.created_ns,
            exited_ns: time.saturating_sub(self.epoch),
        });
    }

    /// Applies the HSI's dispatch: freeze what lost its CPU (if runnable),
    /// pin, raise and thaw what got one, freeze woken threads that got none.
    fn enforce(&mut self) {
        self.dispatch.clear();
        self.hsi.drain_dispatch(&mut self.dispatch);
        if self.debug && !self.dispatch.is_empty() {
            crate::diag!(
                "[{}] dispatch {:?} next timer {:?}",
                sys::now_ns() - self.epoch,
                self.dispatch,
                self.hsi.next_timer()
            );
        }
        let mut next = self.running.clone();
        for &(cpu, t) in &self.dispatch {
            next[cpu.index()] = t.map(|t| self.by_hsi[t.index()]);
        }
        // Stop first, so a CPU never has two granted threads.
        for c in 0..next.len() {
            if let Some(old) = self.running[c] {
                if !next.contains(&Some(old)) {
                    self.stop(old, next[c]);
                }
            }
        }
        for (c, &n) in next.iter().enumerate() {
            if let Some(tid) = n {
                if self.running[c] != Some(tid) {
                    self.start_on(tid, c);
                }
            }
        }
        self.running = next;
        let touched = std::mem::take(&mut self.touched);
        for &tid in &touched {
            if !self.running.contains(&Some(tid)) {
                self.stop(tid, None);
            }
        }
        self.touched = touched;
        self.touched.clear();
        self.govern();
    }

    /// `tid` lost its CPU to `successor` (`None`: to no managed thread).
    fn stop(&mut self, tid: i32, successor: Option<i32>) {
        if !self.defer_stop(tid, successor) {
            self.freeze_now(tid);
        }
    }

    /// Freezes `tid` now if it is runnable and not frozen.
    pub(crate) fn freeze_now(&mut self, tid: i32) {
        if crate::coop::parked(self, tid) {
            return;
        }
        let Some(m) = self.threads.get_mut(&tid) else {
            return;
        };
        if m.dying.is_some() {
            // Leaving, granted when it was found so (a core dump can be
            // long): not frozen, but off the managed CPU it was granted.
            self.unleash(tid, false);
            return;
        }
        if m.frozen || !self.hsi.thread_runnable(m.hsi) {
            return;
        }
        if let Some(cg) = &m.cg {
            m.frozen_at = sys::now_ns();
            if self.debug {
                crate::diag!("[{}] freeze {tid}", m.frozen_at - self.epoch);
            }
            if cg.freeze().is_ok() {
                m.frozen = true;
                m.freezes += 1;
                self.stats.freezes += 1;
            }
        }
    }

    fn start_on(&mut self, tid: i32, c: usize) {
        let cpu = self.cpus[c];
        let prio = self.opts.fifo_priority;
        let Some(m) = self.threads.get_mut(&tid) else {
            return;
        };
        if m.dying.is_some() {
            // Leaving: it runs (to its exit) wherever its original
            // affinity allows, at SCHED_OTHER (see `leave`).
            return;
        }
        m.grants += 1;
        // A frozen thread is off its CPU from now to its switch-in record;
        // one woken and not yet on a CPU, from the HSI's grant (the time
        // its budget is charged from: the input that granted it) or its
        // wake-up, whichever is later; one that may be running already
        // counts nothing.
        m.lost_ns = 0;
        m.off_since = if m.frozen {
            Some(sys::now_ns())
        } else {
            m.woke_at.map(|w| w.max(self.epoch + self.hsi.now().0))
        };
        let mut warn = None;
        // A thread that exited since (`ESRCH`) is no failure: its exit
        // record follows. A warning for it would also take the place of a
        // real one, which is said once per run.
        let gone = |e: &std::io::Error| e.raw_os_error() == Some(libc::ESRCH);
        if m.pinned != Some(cpu) {
            match sys::set_affinity(tid, &CpuMask::single(cpu)) {
                Ok(()) => m.pinned = Some(cpu),
                Err(e) if gone(&e) => {}
                Err(e) => {
                    warn = Some((
                        "affinity",
                        format!("could not pin thread {tid} to CPU {cpu}: {e}"),
                    ))
                }
            }
        }
        // Set at every grant, not only when hsched last left it otherwise:
        // a program may set its own threads' policy at any time (cyclictest
        // and rt-app do as each thread starts), and a granted thread left at
        // `SCHED_OTHER` would queue behind unmanaged work on its CPU while
        // its budget runs. The kernel returns at once when nothing changes.
        if prio > 0 {
            let mut a = SchedAttr::fifo(prio);
            a.flags = m.orig.attr.flags & sys::SCHED_FLAG_RESET_ON_FORK;
            match sys::sched_setattr(tid, &a) {
                Ok(()) => m.fifo = true,
                Err(e) if gone(&e) => {}
                Err(e) => {
                    warn = Some((
                        "fifo",
                        format!("could not give thread {tid} SCHED_FIFO {prio}: {e}"),
                    ))
                }
            }
        }
        if m.frozen {
            if let Some(cg) = &m.cg {
                let r = cg.thaw();
                m.thawed_at = sys::now_ns();
                if self.debug {
                    crate::diag!(
                        "[{}] thaw {tid} on {cpu}: {r:?}",
                        sys::now_ns() - self.epoch
                    );
                }
            }
            m.frozen = false;
            self.stats.thaws += 1;
        }
        self.stats.dispatches += 1;
        if let Some((k, w)) = warn {
            self.warn(k, w);
        }
    }

    fn launch_spec(&mut self, i: usize, spec: &ThreadSpec) -> Result<(), LiveError> {
        let sched = hierarchy::instance(&self.hsi, &spec.scheduler)?;
        let end = spec.exit.map(|e| self.epoch + e.as_nanos());
        let workload = if spec.exec.is_none() {
            spec.workload.clone()
        } else {
            None
        };
        let g = self.launch(
            &spec.name,
            spec.exec.as_deref(),
            workload.as_ref(),
            Some(i),
            sched,
            spec.params.clone(),
        )?;
        if let Some(e) = end {
            self.kills.push((e, g));
            self.kills.sort();
        }
        Ok(())
    }

    /// Starts a program (or a built-in workload) blocked on a pipe, follows
    /// it, adopts it, then lets it go: no event of it is missed.
    pub fn launch(
        &mut self,
        name: &str,
        exec: Option<&[String]>,
        workload: Option<&WorkloadSpec>,
        spec: Option<usize>,
        sched: InstanceId,
        params: Params,
    ) -> Result<usize, LiveError> {
        let (r, w) = sys::pipe().map_err(io_err("pipe"))?;
        // The child closes every descriptor it inherited from the daemon
        // (CPU locks, perf events, the control socket), this pipe's write
        // end with them, before it is adopted: a child frozen before its
        // first instruction must not hold them, or a `kill -9` of the
        // daemon would leave them alive until the child runs.
        let (shed_r, shed_w) = sys::pipe().map_err(io_err("pipe"))?;
        let last_fd = sys::highest_fd();
        let slot = spec.filter(|_| workload.is_some());
        let pid = match (exec, workload) {
            (Some(argv), _) => {
                let ex = sys::Exec::new(argv)
                    .map_err(|e| LiveError::Usage(format!("`{}`: {e}", argv.join(" "))))?;
                ex.spawn_gated(r.as_raw_fd(), last_fd, None)
                    .map_err(io_err("fork"))?
            }
            (None, Some(wl)) => {
                let wl = wl.clone();
                let end = self.end_at.unwrap_or(u64::MAX);
                let rfd = r.as_raw_fd();
                let seed = self.h.sim.seed.unwrap_or(0)
                    ^ (spec.unwrap_or(0) as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
                let slots = &self.slots;
                let daemon = sys::getpid();
                sys::spawn_fn(&[0, 1, 2, rfd], move || {
                    sys::setpgid_self();
                    // A built-in workload is part of this run, not a user's
                    // program: it ends with the daemon, however the daemon
                    // ends (a killed daemon's frozen one dies once the
                    // watchdog thaws it).
                    sys::die_with_parent(daemon);
                    let mut b = [0u8; 1];
                    let _ = sys::read(rfd, &mut b);
                    let s = slot.and_then(|i| slots.get(i));
                    crate::probe::run_workload(&wl, s, end, seed);
                    0
                })
                .map_err(io_err("fork"))?
            }
            (None, None) => {
                return Err(LiveError::Setup(format!(
                    "thread `{name}` has neither `exec` nor a workload"
                )))
            }
        };
        drop(r);
        drop(shed_w);
        // Put the child back to the daemon's own original scheduling before
        // recording it: that is what it would have had without hsched.
        let _ = sys::sched_setattr(pid, &self.self_attr);
        let _ = sys::set_affinity(pid, &self.self_mask);
        match sys::wait_closed(shed_r.as_raw_fd(), 5_000) {
            Ok(true) => {}
            Ok(false) => {
                let _ = sys::kill(pid, libc::SIGKILL);
                return Err(LiveError::Setup(format!(
                    "thread `{name}`: its process did not start within 5 s"
                )));
            }
            Err(e) => {
                let _ = sys::kill(pid, libc::SIGKILL);
                return Err(io_err("pipe")(e));
            }
        }
        drop(shed_r);
        let gi = self.groups.len();
        self.groups.push(Group {
            name: name.to_string(),
            pid,
            launched: true,
            exit_status: None,
            slot,
            spec,
            cpu_ns: None,
        });
        let result = (|| {
            let fds = self.obs.follow(pid).map_err(io_err("perf events"))?;
            let orig = Original::capture(pid).map_err(io_err("inspect"))?;
            self.adopt(
                pid,
                name.to_string(),
                gi,
                orig,
                sched,
                params,
                false,
                sys::now_ns(),
            )?;
            if let Some(m) = self.threads.get_mut(&pid) {
                m.fds = fds;
            }
            Ok(())
        })();
        if let Err(e) = result {
            let _ = sys::kill(pid, libc::SIGKILL);
            drop(w);
            // Killed before its first instruction, it was never one of the
            // run's programs: no report of it (its group is the last one).
            self.release_thread(pid);
            self.gone.retain(|g| g.group != gi);
            self.groups.truncate(gi);
            return Err(e);
        }
        // Released from the pipe, the program is runnable: whether it had
        // blocked on the pipe yet or not, no wake-up event may follow.
        let now = sys::now_ns();
        if let Some(m) = self.threads.get_mut(&pid) {
            m.last_event = now;
            let t = m.hsi;
            if let Err(e) = self.hsi.wake(self.inst(now), t) {
                self.protocol_error(e);
            }
            self.touched.push(pid);
        }
        let _ = sys::write_all(w.as_raw_fd(), b"g");
        drop(w);
        Ok(gi)
    }

    /// Puts every managed thread back as it was (idempotent).
    pub fn restore_all(&mut self) {
        let tids: Vec<i32> = self.threads.keys().copied().collect();
        for tid in tids {
            self.release_thread(tid);
        }
        for cg in std::mem::take(&mut self.pending_rmdir) {
            let _ = std::fs::remove_dir(cg.dir());
        }
        self.freezer.cleanup(std::time::Duration::from_millis(500));
    }

    /// Stops managing one thread: thaw, original policy and affinity.
    pub fn release_thread(&mut self, tid: i32) {
        let Some(mut m) = self.threads.remove(&tid) else {
            return;
        };
        if let Some(c) = enforce::proc_cpu_ns(tid) {
            m.cpu_ns = c;
        }
        self.hold_fds(m.group, std::mem::take(&mut m.fds));
        self.targets_dirty = true;
        if let Some(cg) = m.cg.take() {
            if !self.freezer.release(tid, &cg) {
                self.pending_rmdir.push(cg);
            }
        }
        let _ = enforce::restore(&m.orig, None, None);
        if let Some(wd) = &self.wd {
            wd.forget(&m.orig);
        }
        let received = self.hsi.thread_received(m.hsi).as_nanos();
        let scheduler = self
            .hsi
            .instance_name(self.hsi.thread_parent(m.hsi))
            .to_string();
        if self.hsi.thread_live(m.hsi) {
            let now = self.inst(sys::now_ns());
            let _ = self.hsi.exit(now, m.hsi);
        }
        for r in self.running.iter_mut() {
            if *r == Some(tid) {
                *r = None;
            }
        }
        self.gone.push(Gone {
            name: m.name,
            scheduler,
            group: m.group,
            cpu_ns: m.cpu_ns,
            received_ns: received,
            grants: m.grants,
            freezes: m.freezes,
            wakeups: m.wakeups,
            created_ns: m.created_ns,
            exited_ns: sys::now_ns().saturating_sub(self.epoch),
        });
        self.enforce();
    }

    /// The daemon thread's CPU time since its loop began: the pumps, and
    /// the kernel's work in `epoll_wait` and on each wake-up (measured:
    /// about as much again as the pumps).
    pub fn daemon_cpu_ns(&self) -> u64 {
        sys::thread_cpu_ns().saturating_sub(self.cpu_base)
    }

    fn finish(&mut self) -> Report {
        let end = sys::now_ns();
        let duration = end - self.epoch;
        // Sample CPU time before anything changes.
        self.reap();
        self.sweep(true);
        if self.debug {
            let mut v = self.stats.timer_late_ns.clone();
            v.sort_unstable();
            if let Some(&max) = v.last() {
                let q = |f: f64| v[((v.len() as f64 * f) as usize).min(v.len() - 1)] / 1_000;
                crate::diag!(
                    "hsched: HSI timer wake-up lateness over {} expiries: p50 {} us, p99 {} us, p99.9 {} us, max {} us; daemon CPU {:.2} %, spin {:.2} %",
                    v.len(),
                    q(0.5),
                    q(0.99),
                    q(0.999),
                    max / 1_000,
                    self.daemon_cpu_ns() as f64 / duration as f64 * 100.0,
                    self.stats.spin_ns as f64 / duration as f64 * 100.0
                );
            }
        }
        let report = crate::report::build(self, duration);
        self.shutdown_all();
        report
    }

    /// Restores everything, ends launched programs, stops the watchdog.
    pub fn shutdown_all(&mut self) {
        if self.finished {
            return;
        }
        self.finished = true;
        self.restore_all();
        let _ = sys::sched_setattr(0, &self.self_attr);
        if let Some(wd) = self.wd.take() {
            wd.finish();
        }
        if let Some(s) = self.server.take() {
            s.remove();
        }
        if self.opts.kill_at_end {
            for g in &self.groups {
                if g.launched && g.exit_status.is_none() {
                    let _ = sys::kill(-g.pid, libc::SIGTERM);
                    let _ = sys::kill(g.pid, libc::SIGTERM);
                }
            }
            let t0 = sys::now_ns();
            while self
                .groups
                .iter()
                .any(|g| g.launched && g.exit_status.is_none())
                && sys::now_ns() - t0 < 1_000_000_000
            {
                self.reap();
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            for g in &self.groups {
                if g.launched && g.exit_status.is_none() {
                    let _ = sys::kill(-g.pid, libc::SIGKILL);
                    let _ = sys::kill(g.pid, libc::SIGKILL);
                }
            }
            self.reap();
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        // A panic or an early return: put everything back before leaving.
        self.shutdown_all();
    }
}
