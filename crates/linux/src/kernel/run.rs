//! A live run enforced by the kernel: the daemon compiles the hierarchy
//! ([`super::compile()`]), refuses it before anything changes if a node does
//! not map or the deadline admission fails, then launches the programs,
//! sets each thread's mechanism ([`super::apply`]) and only watches:
//! it places the threads and processes programs create, samples CPU time
//! for the report, answers the control socket ([`super::serve`],
//! [`super::ops`]), runs the controller of each `realrate`
//! ([`super::adapt`], which changes servers' runtimes, never a switch)
//! and tells the watchdog it is alive. Scheduling decisions are the
//! kernel's, so nothing depends on the daemon running in time, and a
//! stopped or killed daemon leaves every reservation enforced until the
//! watchdog restores the threads.

use super::apply::{self, Cgroups};
use super::compile::{self, Mechanism, Node, NodeMap, Plan};
use crate::enforce::{self, Original};
use crate::report::{LiveStats, ProgramReport, Report, SchedulerReport, ThreadReport};
use crate::sys::{self, SchedAttr};
use crate::watchdog::Watchdog;
use crate::{LiveError, RunOptions};
use hsched_config::{Hierarchy, ThreadSpec, WorkloadSpec};
use hsched_core::Params;
use std::collections::BTreeMap;
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering;

/// How often the daemon looks for threads the programs created when the
/// kernel does not announce them (a new thread runs with its creator's
/// class and cgroup, reset to the fair class for a real-time or deadline
/// creator, until then).
const SWEEP_NS: u64 = 200_000_000;
/// How often it looks at every program when the kernel announces new and
/// renamed threads ([`crate::procevents`]): only a program attached with
/// threads of its own, or one whose announcements were lost, needs it, and
/// those are looked at at once.
const SAFETY_SWEEP_NS: u64 = 2_000_000_000;
/// How often it samples the threads' CPU time (and at the end).
const SAMPLE_NS: u64 = 1_000_000_000;

pub(super) struct Managed {
    pub(super) name: String,
    /// Its name (`comm`) when last looked at.
    pub(super) comm: String,
    /// Placed by a `[[rule]]`.
    by_rule: bool,
    /// Where it is in the hierarchy, with its parent-side parameters, and
    /// the mechanism that place maps to.
    pub(super) scheduler: String,
    pub(super) params: Params,
    pub(super) node: NodeMap,
    /// Where `begin-reservation` took it from, for `end-reservation`.
    pub(super) saved: Option<(NodeMap, String, Params)>,
    pub(super) group: usize,
    pub(super) orig: Original,
    pub(super) cpu_ns: u64,
    switches: (u64, u64),
    created_ns: u64,
    pub(super) exited_ns: Option<u64>,
}

pub(super) struct Program {
    name: String,
    pid: i32,
    /// The file's thread it was launched for (`None`: attached).
    pub(super) spec: Option<usize>,
    /// The mechanism of the thread it was launched as: its other threads
    /// get it too.
    node: NodeMap,
    pub(super) scheduler: String,
    /// Its new threads are looked for (a launched program, or one attached
    /// by pid; not a thread attached by tid).
    pub(super) whole: bool,
    /// The program whose thread forked it: its threads join that
    /// program's place, and the run does not wait for it.
    forked_from: Option<usize>,
    exit_status: Option<i32>,
    cpu_ns: Option<u64>,
}

/// Deadline bandwidth held on the machine by other tasks, in CPUs: every
/// `SCHED_DEADLINE` thread found in `/proc`.
pub fn others_bandwidth() -> f64 {
    others_held().total()
}

/// Every `SCHED_DEADLINE` thread found in `/proc`: its bandwidth and its
/// CPUs (the root domain it is admitted in, which its affinity spans).
pub fn others_held() -> compile::Held {
    let mut held = Vec::new();
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return compile::Held(held);
    };
    for p in procs.flatten() {
        let Some(pid) = p.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        for tid in enforce::proc_threads(pid).unwrap_or_default() {
            if let Ok(a) = sys::sched_getattr(tid) {
                if a.policy == apply::SCHED_DEADLINE && a.period > 0 {
                    let cpus = sys::get_affinity(tid).map(|m| m.cpus()).unwrap_or_default();
                    held.push((a.runtime as f64 / a.period as f64, cpus));
                }
            }
        }
    }
    compile::Held(held)
}

/// The hierarchy with `-- COMMAND` as one more thread (under
/// `--scheduler` or the default scheduler), so it is compiled like the
/// file's threads.
pub fn with_command(h: &Hierarchy, opts: &RunOptions) -> Result<Hierarchy, LiveError> {
    let mut h = h.clone();
    if let Some(cmd) = &opts.command {
        let sched = opts
            .command_scheduler
            .clone()
            .or_else(|| h.default_scheduler.clone())
            .ok_or_else(|| {
                LiveError::Hierarchy(
                    "`-- COMMAND` needs a default scheduler (or --scheduler)".into(),
                )
            })?;
        if !h.schedulers.iter().any(|s| s.name == sched) {
            return Err(LiveError::Usage(format!(
                "--scheduler: no scheduler `{sched}` in the file"
            )));
        }
        let name = std::path::Path::new(&cmd[0])
            .file_name()
            .map_or("command".into(), |s| s.to_string_lossy().into_owned());
        let mut t = ThreadSpec::new(&name, &sched, WorkloadSpec::CpuBound);
        t.workload = None;
        t.exec = Some(cmd.clone());
        t.params = opts.command_params.clone();
        h.threads.push(t);
    }
    Ok(h)
}

/// The plan for `h` on this machine, or why the kernel backend cannot
/// enforce it (every node that stops it, or the admission's refusal):
/// nothing has changed when this returns.
///
/// # Errors
/// [`LiveError::Usage`] naming every refused node, or the thread, load
/// and limit of a refused admission.
pub fn plan_for(h: &Hierarchy, opts: &RunOptions) -> Result<(Plan, Vec<usize>), LiveError> {
    let cpus = crate::managed_cpus(h, opts)?;
    let plan = compile::compile(h, &super::machine_model(), &cpus, others_held());
    if !plan.is_enforceable() {
        return Err(LiveError::Usage(format!(
            "--enforce kernel: the kernel backend cannot enforce {} exactly (nothing was changed):\n  {}",
            h.file,
            plan.refusal_text().replace('\n', "\n  ")
        )));
    }
    Ok((plan, cpus))
}

fn io_err(what: &'static str) -> impl Fn(std::io::Error) -> LiveError {
    move |e| LiveError::Io(format!("{what}: {e}"))
}

/// Runs `h` enforced by the kernel; see the module documentation.
///
/// # Errors
/// Not root or no `SCHED_DEADLINE`, a hierarchy the kernel backend
/// cannot enforce, a program that cannot be started.
pub fn run(h: &Hierarchy, opts: RunOptions) -> Result<Report, LiveError> {
    if sys::geteuid() != 0 {
        return Err(LiveError::Unsupported(
            "live mode needs root (it changes other threads' scheduling)".into(),
        ));
    }
    if !std::path::Path::new("/proc/sys/kernel/sched_rt_runtime_us").exists() {
        return Err(LiveError::Unsupported(
            "the kernel backend needs SCHED_DEADLINE (no /proc/sys/kernel/sched_rt_runtime_us)"
                .into(),
        ));
    }
    let h = with_command(h, &opts)?;
    let (plan, cpus) = plan_for(&h, &opts)?;
    if plan
        .nodes
        .iter()
        .any(|n| matches!(n.mechanism, Mechanism::FairGroup { .. }))
        && apply::cpu_mount().is_none()
    {
        return Err(LiveError::Unsupported(
            "the kernel backend maps `ts`, `ps` and `limit` to cgroup-v1 cpu cgroups, and no cpu controller is mounted".into(),
        ));
    }
    // A daemon may answer on the same socket: refuse it before anything
    // changes (Server::bind checks again).
    if let Some(path) = &opts.socket {
        if let Ok(s) = std::os::unix::net::UnixStream::connect(path) {
            let holder = sys::peer_cred(s.as_raw_fd()).ok().map(|(pid, _, _)| pid);
            return Err(LiveError::SocketBusy {
                path: path.clone(),
                holder: holder.filter(|&p| p > 0),
            });
        }
    }
    for n in &plan.notes {
        if n.contains("surplus") || n.contains("root domain (") || n.contains("sched_load_balance")
        {
            crate::diag!("hsched: {n}");
        }
    }
    let lock = crate::cpulock::CpuLocks::try_acquire(&cpus, crate::cpulock::Sharing::Exclusive)?;
    let self_attr = sys::sched_getattr(0).map_err(io_err("sched_getattr"))?;
    let self_mask = sys::get_affinity(0).map_err(io_err("sched_getaffinity"))?;
    let mut clients = match &opts.socket {
        Some(p) => Some(super::serve::Clients::new(
            crate::control::Server::bind(p, opts.control_group)
                .map_err(io_err("control socket"))?,
            opts.control_group,
        )),
        None => None,
    };
    let cg = match Cgroups::create(&plan) {
        Ok(c) => c,
        Err(e) => {
            if let Some(c) = clients.take() {
                c.close();
            }
            return Err(io_err("cpu cgroup")(e));
        }
    };
    let cs = if plan.partitions.is_empty() {
        None
    } else {
        let sets: Vec<Vec<usize>> = plan.partitions.iter().map(|p| p.cpus.clone()).collect();
        let rest = plan.partitions.last().is_some_and(|p| p.root.is_none());
        match crate::cpuset::Cpusets::create(&sets, rest, sys::getpid()) {
            Ok(c) => Some(c),
            Err(e) => {
                if let Some(c) = &cg {
                    c.cleanup();
                }
                if let Some(c) = clients.take() {
                    c.close();
                }
                return Err(io_err("exclusive cpusets for the file's root domains")(e));
            }
        }
    };
    let wd = match Watchdog::start(
        cg.as_ref().map(|c| (c.base.clone(), c.root.clone())),
        cs.clone(),
        opts.daemon_priority.saturating_add(5).min(99),
        Some(&lock),
    ) {
        Ok(w) => w,
        Err(e) => {
            if let Some(c) = &cg {
                c.cleanup();
            }
            if let Some(c) = &cs {
                c.remove();
            }
            if let Some(c) = clients.take() {
                c.close();
            }
            return Err(io_err("watchdog")(e));
        }
    };
    let sigfd = sys::signalfd(&[libc::SIGINT, libc::SIGTERM, libc::SIGCHLD, libc::SIGHUP])
        .map_err(io_err("signalfd"))?;

    // Above every managed real-time thread, so the heartbeat is never
    // starved; children start in the fair class.
    let mut d_attr = SchedAttr::fifo(opts.daemon_priority);
    d_attr.flags = sys::SCHED_FLAG_RESET_ON_FORK;
    let _ = sys::sched_setattr(0, &d_attr);
    // Off the managed CPUs where there are others: deadline servers
    // preempt the daemon, and the controller of a `realrate` must run on
    // time (the user backend's placement, daemon.rs `daemon_cpus`).
    let mut place = sys::CpuMask::empty();
    crate::daemon::daemon_cpus(&sys::online_cpus(), &cpus)
        .iter()
        .for_each(|&c| place.set(c));
    let _ = sys::set_affinity(0, &place);
    let slots = sys::Slots::new(h.threads.len() + 1).map_err(io_err("shared memory"))?;
    let mut k = Kernel {
        h: &h,
        plan: &plan,
        cg,
        cs,
        wd: Some(wd),
        epoch: sys::now_ns(),
        end_at: None,
        threads: BTreeMap::new(),
        programs: Vec::new(),
        slots,
        self_attr,
        self_mask,
        cpu_base: sys::thread_cpu_ns(),
        warned: Default::default(),
        cpus,
        stats: LiveStats::default(),
        clients,
        events: crate::procevents::ProcEvents::open().ok(),
        due: Default::default(),
        shutdown: false,
        limits: opts.control_limits,
        adapt: super::adapt::Adapt::new(&h, &plan),
    };
    k.end_at = opts.duration.map(|d| k.epoch + d.as_nanos());
    let result = k.main_loop(&opts, &sigfd);
    let report = k.finish();
    if let Some(c) = k.clients.take() {
        c.close();
    }
    let _ = sys::sched_setattr(0, &self_attr);
    let _ = sys::set_affinity(0, &self_mask);
    drop(lock);
    result.map(|()| report)
}

pub(super) struct Kernel<'a> {
    pub(super) h: &'a Hierarchy,
    pub(super) plan: &'a Plan,
    pub(super) cg: Option<Cgroups>,
    /// The plan's partitions, when it has them.
    pub(super) cs: Option<crate::cpuset::Cpusets>,
    pub(super) wd: Option<Watchdog>,
    pub(super) epoch: u64,
    end_at: Option<u64>,
    pub(super) threads: BTreeMap<i32, Managed>,
    pub(super) programs: Vec<Program>,
    pub(super) slots: sys::Slots,
    self_attr: SchedAttr,
    self_mask: sys::CpuMask,
    cpu_base: u64,
    warned: std::collections::BTreeSet<String>,
    pub(super) cpus: Vec<usize>,
    pub(super) stats: LiveStats,
    /// The control socket ([`super::ops`]), when the run serves one.
    pub(super) clients: Option<super::serve::Clients>,
    /// The kernel's announcements of new and renamed threads, when it
    /// makes them to this daemon.
    events: Option<crate::procevents::ProcEvents>,
    /// Programs to look at in the next sweep: attached ones, and those the
    /// kernel announced a thread of.
    due: std::collections::BTreeSet<usize>,
    /// A `shutdown` request ended the run.
    pub(super) shutdown: bool,
    pub(super) limits: crate::authz::ControlLimits,
    /// The controllers of the file's `realrate` instances.
    pub(super) adapt: super::adapt::Adapt,
}

impl Kernel<'_> {
    /// Whether a run without a duration has nothing left to wait for. As
    /// in the user backend, a run waits for the programs it launched (an
    /// `exec`, the `-- COMMAND`) and those attached, not for the built-in
    /// workloads beside them, which end with it; a run of built-in
    /// workloads alone waits for them all.
    fn programs_done(&self, launches: &[(u64, usize)]) -> bool {
        let h = self.h;
        let programs = h.threads.iter().any(|t| t.exec.is_some());
        let waited =
            |spec: Option<usize>| !programs || spec.is_none_or(|i| h.threads[i].exec.is_some());
        let waited_programs = || {
            self.programs
                .iter()
                .filter(|p| p.forked_from.is_none() && waited(p.spec))
        };
        !launches.iter().any(|&(_, i)| waited(Some(i)))
            && waited_programs().next().is_some()
            && waited_programs().all(|p| p.exit_status.is_some())
    }

    fn warn(&mut self, key: &str, msg: String) {
        if self.warned.insert(key.to_string()) {
            crate::diag!("hsched: warning: {msg}");
        }
    }

    fn main_loop(
        &mut self,
        opts: &RunOptions,
        sigfd: &std::os::fd::OwnedFd,
    ) -> Result<(), LiveError> {
        let h = self.h;
        let mut launches: Vec<(u64, usize)> = h
            .threads
            .iter()
            .enumerate()
            .filter(|(_, t)| t.exec.is_some() || (opts.run_workloads && t.workload.is_some()))
            .map(|(i, t)| (self.epoch + t.start.as_nanos(), i))
            .collect();
        launches.sort();
        let mut kills: Vec<(u64, i32)> = Vec::new();
        let (mut next_sweep, mut next_sample, mut next_beat) = (0, 0, 0);
        loop {
            let now = sys::now_ns();
            while let Some(&(at, i)) = launches.first() {
                if at > now {
                    break;
                }
                launches.remove(0);
                let pid = self.launch(i)?;
                if let Some(e) = h.threads[i].exit {
                    kills.push((self.epoch + e.as_nanos(), pid));
                }
            }
            kills.retain(|&(at, pid)| {
                if at <= now {
                    let _ = sys::kill(pid, libc::SIGKILL);
                }
                at > now
            });
            self.reap(now);
            if now >= next_sweep {
                self.sweep(now, true);
                let every = if self.events.is_some() {
                    SAFETY_SWEEP_NS
                } else {
                    SWEEP_NS
                };
                next_sweep = now + every;
            } else if !self.due.is_empty() {
                self.sweep(now, false);
            }
            if now >= next_sample {
                self.sample();
                next_sample = now + SAMPLE_NS;
            }
            if self.adapt.due().is_some_and(|d| now >= d) {
                self.adapt.tick(now, self.epoch, &mut self.threads);
                if let Some(w) = self.adapt.warning.take() {
                    self.warn("adapt-refused", w);
                }
            }
            if now >= next_beat {
                if let Some(w) = &self.wd {
                    if w.heartbeat().is_err() {
                        self.stats.ended_by = "watchdog".into();
                        return Err(LiveError::Io(
                            "the watchdog ended: the threads were restored".into(),
                        ));
                    }
                }
                next_beat = now + crate::watchdog::HEARTBEAT_NS;
            }
            if self.end_at.is_some_and(|e| now >= e) {
                self.stats.ended_by = "duration".into();
                return Ok(());
            }
            if self.shutdown {
                return Ok(());
            }
            if self.end_at.is_none() && !opts.until_stopped && self.programs_done(&launches) {
                self.stats.ended_by = "programs exited".into();
                return Ok(());
            }
            let wake = [
                next_sweep,
                next_sample,
                next_beat,
                self.end_at.unwrap_or(u64::MAX),
                launches.first().map_or(u64::MAX, |l| l.0),
                kills.iter().map(|k| k.0).min().unwrap_or(u64::MAX),
                self.adapt.due().unwrap_or(u64::MAX),
            ]
            .into_iter()
            .min()
            .unwrap_or(u64::MAX);
            let ms = (wake.saturating_sub(sys::now_ns()) / 1_000_000 + 1).min(1000) as i32;
            let mut fds = vec![sigfd.as_raw_fd()];
            if let Some(c) = &self.clients {
                fds.extend(c.fds());
            }
            let clients_end = fds.len();
            if let Some(e) = &self.events {
                fds.push(e.fd());
            }
            let ready = sys::poll_many(&fds, ms);
            if ready.contains(&clients_end) {
                self.take_events();
            }
            if ready.iter().any(|&i| i > 0 && i < clients_end) {
                self.serve();
            }
            if ready.contains(&0) {
                while let Some(sig) = sys::read_signal(sigfd) {
                    if sig != libc::SIGCHLD {
                        self.stats.ended_by = "signal".into();
                        return Ok(());
                    }
                }
            }
            self.stats.wakeups += 1;
        }
    }

    /// Starts thread spec `i` blocked on a pipe, sets its mechanism, then
    /// lets it go.
    fn launch(&mut self, i: usize) -> Result<i32, LiveError> {
        let spec = &self.h.threads[i];
        let node =
            self.plan.thread(&spec.name).cloned().ok_or_else(|| {
                LiveError::Hierarchy(format!("thread `{}` is not mapped", spec.name))
            })?;
        let (r, w) = sys::pipe().map_err(io_err("pipe"))?;
        // A deadline server of a partition must have run there: the child
        // moves itself in before it waits at the gate.
        let join = match (node.partition, &self.cs) {
            (Some(k), Some(cs)) => Some(cs.join_fd(k).map_err(io_err("cpuset"))?),
            _ => None,
        };
        let jfd = join.as_ref().map(|f| f.as_raw_fd());
        let last_fd = sys::highest_fd();
        let slot = spec.exec.is_none().then_some(i);
        let pid = match (&spec.exec, &spec.workload) {
            (Some(argv), _) => {
                // A run whose program cannot be launched failed (exit 1), as
                // under the user backend; this one ends at the first.
                let ex = sys::Exec::new(argv).map_err(|e| {
                    LiveError::Setup(format!(
                        "`{}` could not be launched: `{}`: {e}",
                        spec.name,
                        argv.join(" ")
                    ))
                })?;
                ex.spawn_gated(r.as_raw_fd(), last_fd, jfd)
                    .map_err(io_err("fork"))?
            }
            (None, Some(wl)) => {
                let wl = wl.clone();
                let end = self.end_at.unwrap_or(u64::MAX);
                let rfd = r.as_raw_fd();
                let seed =
                    self.h.sim.seed.unwrap_or(0) ^ (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
                let slots = &self.slots;
                let daemon = sys::getpid();
                let keep: Vec<i32> = [0, 1, 2, rfd].into_iter().chain(jfd).collect();
                sys::spawn_fn(&keep, move || {
                    sys::setpgid_self();
                    sys::die_with_parent(daemon);
                    if let Some(j) = jfd {
                        let _ = sys::write_all(j, b"0");
                        sys::close(j);
                    }
                    let mut b = [0u8; 1];
                    let _ = sys::read(rfd, &mut b);
                    crate::probe::run_workload(&wl, slot.and_then(|i| slots.get(i)), end, seed);
                    0
                })
                .map_err(io_err("fork"))?
            }
            (None, None) => {
                return Err(LiveError::Setup(format!(
                    "thread `{}` has neither `exec` nor a workload",
                    spec.name
                )))
            }
        };
        drop(r);
        // The kernel makes it a server of its partition only once it is
        // there: wait (sleeping, so that a child confined to the daemon's
        // CPU gets to run) until it last ran on one of the partition's
        // CPUs, for at most a second.
        if let Some(cpus) = join
            .as_ref()
            .and(node.partition)
            .and_then(|k| self.plan.partitions.get(k))
            .map(|p| p.cpus.clone())
        {
            let until = sys::now_ns() + 1_000_000_000;
            while enforce::proc_last_cpu(pid).is_none_or(|c| !cpus.contains(&c))
                && sys::now_ns() < until
            {
                std::thread::sleep(std::time::Duration::from_micros(100));
            }
        }
        drop(join);
        // What it would have had without hsched: the daemon's own.
        let _ = sys::sched_setattr(pid, &self.self_attr);
        let _ = sys::set_affinity(pid, &self.self_mask);
        let g = self.add_program(spec.name.clone(), pid, node.clone(), &spec.scheduler);
        self.programs[g].spec = Some(i);
        let (name, sched, params) = (
            spec.name.clone(),
            spec.scheduler.clone(),
            spec.params.clone(),
        );
        if let Err(e) = self.adopt(pid, name, sched, params, g, &node) {
            let _ = sys::kill(pid, libc::SIGKILL);
            return Err(e);
        }
        let _ = sys::write_all(w.as_raw_fd(), b"g");
        Ok(pid)
    }

    /// A program (launched, or attached at `pid`) whose threads get
    /// `node`'s mechanism under `scheduler`; its index.
    pub(super) fn add_program(
        &mut self,
        name: String,
        pid: i32,
        node: NodeMap,
        scheduler: &str,
    ) -> usize {
        self.programs.push(Program {
            name,
            pid,
            spec: None,
            node,
            scheduler: scheduler.to_string(),
            whole: true,
            forked_from: None,
            exit_status: None,
            cpu_ns: None,
        });
        let g = self.programs.len() - 1;
        // An attached program may have threads already.
        self.due.insert(g);
        g
    }

    /// Marks the programs the kernel announced a new thread of (or, with
    /// `[[rule]]`s, a renamed one) for the next sweep; every program when
    /// announcements were lost.
    fn take_events(&mut self) {
        let Some(ev) = &self.events else {
            return;
        };
        let mut got = Vec::new();
        let complete = match ev.drain(&mut got) {
            Ok(c) => c,
            Err(e) => {
                // Back to looking at every program five times a second.
                self.warn(
                    "procevents",
                    format!("--enforce kernel: process events failed ({e}); new threads are looked for every 200 ms"),
                );
                self.events = None;
                false
            }
        };
        let rules = !self.h.rules.is_empty();
        for e in got {
            if let crate::procevents::ProcEvent::Created { tgid, tid, parent } = e {
                if tid == tgid {
                    self.follow_fork(parent, tid);
                }
            }
            if matches!(e, crate::procevents::ProcEvent::Renamed { .. }) && !rules {
                continue;
            }
            if let Some(g) = self.programs.iter().rposition(|p| p.pid == e.tgid()) {
                self.due.insert(g);
            }
        }
        if !complete {
            self.due.extend(0..self.programs.len());
        }
    }

    /// Takes in process `pid` that managed thread `parent` forked, as a
    /// program of its own placed where `parent`'s program is (the user
    /// backend's rule: a new thread or process joins its creator's
    /// scheduler). Its threads are placed at the next sweep.
    fn follow_fork(&mut self, parent: i32, pid: i32) {
        let Some(g) = self
            .threads
            .get(&parent)
            .filter(|m| m.exited_ns.is_none())
            .map(|m| m.group)
        else {
            return;
        };
        if self
            .programs
            .iter()
            .any(|p| p.pid == pid && p.exit_status.is_none())
        {
            return;
        }
        let p = &self.programs[g];
        let (name, node, sched) = (
            format!("{}/{pid}", p.name),
            p.node.clone(),
            p.scheduler.clone(),
        );
        let k = self.add_program(name, pid, node, &sched);
        self.programs[k].forked_from = Some(g);
    }

    /// Records thread `tid` of program `group` with the watchdog before
    /// anything of it changes; it is in the fair class until placed.
    pub(super) fn record(&mut self, tid: i32, name: String, group: usize) -> Result<(), LiveError> {
        let mut orig = Original::capture(tid).map_err(io_err("inspect"))?;
        // A thread of a program the run started had, without hsched, the
        // affinity the daemon started with; what it shows now may be its
        // partition's, which the run gives back.
        if self.launched(group) {
            orig.mask = self.self_mask;
        }
        let wd = self
            .wd
            .as_ref()
            .ok_or_else(|| LiveError::Io("the watchdog ended".into()))?;
        wd.manage(&orig).map_err(io_err("watchdog"))?;
        let node = self.fair_fallback();
        self.threads.insert(
            tid,
            Managed {
                name,
                comm: String::new(),
                by_rule: false,
                scheduler: self.programs[group].scheduler.clone(),
                params: Params::new(),
                node,
                saved: None,
                group,
                orig,
                cpu_ns: 0,
                switches: (0, 0),
                created_ns: sys::now_ns().saturating_sub(self.epoch),
                exited_ns: None,
            },
        );
        self.stats.creates += 1;
        Ok(())
    }

    /// Whether program `g` was started by the run: launched for the file,
    /// or forked by such a program.
    fn launched(&self, g: usize) -> bool {
        let mut g = g;
        for _ in 0..=self.programs.len() {
            let p = &self.programs[g];
            if p.spec.is_some() {
                return true;
            }
            match p.forked_from {
                Some(f) => g = f,
                None => return false,
            }
        }
        false
    }

    /// The fair class at nice 0 in the daemon's own cgroup: what a thread
    /// has before it is placed, and what a deadline server's other threads
    /// get.
    pub(super) fn fair_fallback(&self) -> NodeMap {
        NodeMap {
            node: Node::Thread(String::new()),
            mechanism: Mechanism::Fair {
                nice: 0,
                cgroup: String::new(),
            },
            cpus: self.cpus.clone(),
            partition: None,
            guarantee: hsched_guarantee::Guarantee::Null,
            note: None,
        }
    }

    /// Gives thread `tid` back as it was (`detach`, or an attach that
    /// failed half way) and forgets it.
    pub(super) fn release(&mut self, tid: i32) {
        if let Some(m) = self.threads.remove(&tid) {
            if let Some(c) = &self.cs {
                let _ = c.leave(tid);
            }
            let base = self
                .cg
                .as_ref()
                .map(|c| (c.base.as_path(), c.root.as_path()));
            let _ = enforce::restore(&m.orig, base.map(|b| b.0), base.map(|b| b.1));
            if let Some(w) = &self.wd {
                w.forget(&m.orig);
            }
        }
    }

    /// Records thread `tid` with the watchdog, then sets `node` on it.
    fn adopt(
        &mut self,
        tid: i32,
        name: String,
        scheduler: String,
        params: Params,
        group: usize,
        node: &NodeMap,
    ) -> Result<(), LiveError> {
        self.record(tid, name, group)?;
        // A child of a `realrate` started later takes its share from its
        // siblings' (they may hold the whole threshold by now).
        if let Mechanism::Deadline {
            runtime, period, ..
        } = node.mechanism
        {
            let share = runtime.as_nanos() as f64 / period.as_nanos().max(1) as f64;
            self.adapt.make_room(&scheduler, share, &mut self.threads);
        }
        match apply::apply(tid, node, self.cg.as_ref(), self.cs.as_ref()) {
            Ok(()) => {
                if let Some(m) = self.threads.get_mut(&tid) {
                    m.node = node.clone();
                    m.scheduler = scheduler;
                    m.params = params;
                }
                Ok(())
            }
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) => Err(LiveError::Refused(format!(
                "the kernel's deadline admission refused thread `{}` ({}): another task took deadline bandwidth since hsched checked ({:.1}% of the {:.1}% limit were in use then)",
                node.node.name(),
                node.mechanism,
                (self.plan.admission.others + self.plan.admission.servers.iter().map(|s| s.1).sum::<f64>()) * 100.0,
                self.plan.admission.kernel_limit * 100.0
            ))),
            Err(e) => Err(LiveError::Io(format!("thread `{}`: {}: {e}", node.node.name(), node.mechanism))),
        }
    }

    fn reap(&mut self, now: u64) {
        while let Some((pid, status, cpu)) = sys::reap_any_rusage() {
            if let Some(p) = self.programs.iter_mut().find(|p| p.pid == pid) {
                p.exit_status = Some(status);
                p.cpu_ns = Some(cpu);
            }
            for (tid, m) in self.threads.iter_mut() {
                if m.exited_ns.is_none() && (*tid == pid || m.orig.tgid == pid) {
                    m.exited_ns = Some(now.saturating_sub(self.epoch));
                    if let Some(w) = &self.wd {
                        w.forget(&m.orig);
                    }
                    self.stats.exits += 1;
                }
            }
        }
    }

    /// Where a `[[rule]]` puts thread `tid` named `comm` of program `prog`:
    /// the mechanism its scheduler and parameters map to
    /// ([`Kernel::target`]), the scheduler and the parameters. `None` when
    /// no rule matches or the rule's place does not map (said once).
    fn rule_node(&mut self, tid: i32, comm: &str, prog: &str) -> Option<(NodeMap, String, Params)> {
        let rule = self.h.rules.iter().find(|r| r.matches(comm, prog))?;
        match self.target(tid, &rule.scheduler, &rule.params) {
            Ok(mut node) => {
                node.node = Node::Thread(comm.to_string());
                self.stats.rule_placed += 1;
                Some((node, rule.scheduler.clone(), rule.params.clone()))
            }
            Err(why) => {
                let msg = format!(
                    "--enforce kernel: a [[rule]] cannot place `{comm}` under `{}`: {why}; it stays where its program is",
                    rule.scheduler
                );
                self.warn(&format!("rule-{}-{comm}", rule.scheduler), msg);
                None
            }
        }
    }

    /// Puts thread `tid` where a matching `[[rule]]` says, admitted like
    /// any deadline server; whether it did (a refusal is said once).
    fn place_by_rule(&mut self, tid: i32, comm: &str, prog: &str) -> bool {
        let Some((node, sched, params)) = self.rule_node(tid, comm, prog) else {
            return false;
        };
        match self.place(tid, node, &sched, params) {
            Ok(()) => {
                if let Some(m) = self.threads.get_mut(&tid) {
                    m.by_rule = true;
                }
                self.stats.rule_moves += 1;
                true
            }
            Err(f) => {
                self.warn(
                    &format!("rule-place-{tid}"),
                    format!("--enforce kernel: [[rule]] for `{comm}` under `{sched}`: {}; it stays where its program is", f.message),
                );
                false
            }
        }
    }

    /// Places the threads the programs created since the last sweep: a
    /// `[[rule]]` that matches its name puts it where the rule says; else it
    /// gets its program's mechanism (a deadline server's threads stay in
    /// the fair class: each would need a reservation and an admission of
    /// its own). A thread not placed by a rule is looked at again when it
    /// is renamed (rt-app names its threads after creating them). Every
    /// program with `all`, else those marked due.
    fn sweep(&mut self, now: u64, all: bool) {
        if all {
            // Processes the programs forked whose announcement was lost
            // (or that no connector announces).
            let forks: Vec<(i32, i32)> = self
                .threads
                .iter()
                .filter(|(_, m)| m.exited_ns.is_none())
                .flat_map(|(&tid, m)| {
                    std::fs::read_to_string(format!("/proc/{}/task/{tid}/children", m.orig.tgid))
                        .unwrap_or_default()
                        .split_whitespace()
                        .filter_map(|c| c.parse().ok())
                        .map(|c| (tid, c))
                        .collect::<Vec<_>>()
                })
                .collect();
            for (parent, pid) in forks {
                self.follow_fork(parent, pid);
            }
        }
        let due = std::mem::take(&mut self.due);
        for g in 0..self.programs.len() {
            if self.programs[g].exit_status.is_some() || !self.programs[g].whole {
                continue;
            }
            if !all && !due.contains(&g) {
                continue;
            }
            let pid = self.programs[g].pid;
            // The program's name matters to rules only.
            let prog = if self.h.rules.is_empty() {
                String::new()
            } else {
                enforce::proc_comm(pid).unwrap_or_default()
            };
            for tid in enforce::proc_threads(pid).unwrap_or_default() {
                if let Some(m) = self.threads.get(&tid) {
                    if m.by_rule || m.exited_ns.is_some() || self.h.rules.is_empty() || tid == pid {
                        continue;
                    }
                    let comm = enforce::proc_comm(tid).unwrap_or_default();
                    if comm == m.comm {
                        continue;
                    }
                    if let Some(m) = self.threads.get_mut(&tid) {
                        m.comm = comm.clone();
                    }
                    self.place_by_rule(tid, &comm, &prog);
                    continue;
                }
                let comm = enforce::proc_comm(tid).unwrap_or_default();
                let name = format!("{}/{comm}-{tid}", self.programs[g].name);
                if self.record(tid, name, g).is_err() {
                    // Gone already, most likely.
                    continue;
                }
                if let Some(m) = self.threads.get_mut(&tid) {
                    m.comm = comm.clone();
                }
                if self.place_by_rule(tid, &comm, &prog) {
                    continue;
                }
                let mut node = self.programs[g].node.clone();
                let sched = self.programs[g].scheduler.clone();
                // The parameters of the program's first thread (of the
                // program it was forked from, for a forked one).
                let first = |k: usize| self.threads.get(&self.programs[k].pid);
                let params = first(g)
                    .or_else(|| self.programs[g].forked_from.and_then(first))
                    .map(|m| m.params.clone())
                    .unwrap_or_default();
                if self.adaptive(&sched) {
                    // Under `realrate` every thread is a child of its own,
                    // as in the policy: a server of the initial
                    // proportion, which the controller then sizes.
                    match self.target(tid, &sched, &params) {
                        Ok(n) => node = n,
                        Err(why) => {
                            self.warn(
                                &format!("rr-child-{pid}"),
                                format!("--enforce kernel: a thread of `{}` cannot join `{sched}` ({why}); it runs in the fair class", self.programs[g].name),
                            );
                            node = self.fair_fallback();
                        }
                    }
                } else if matches!(node.mechanism, Mechanism::Deadline { .. }) {
                    self.warn(
                        &format!("dl-child-{pid}"),
                        format!(
                            "--enforce kernel: threads created by deadline server `{}` run in the fair class (each would need a reservation of its own; a [[rule]] can give one)",
                            self.programs[g].name
                        ),
                    );
                    node = self.fair_fallback();
                }
                node.node = Node::Thread(comm);
                if self.place(tid, node, &sched, params).is_err() {
                    if let Some(m) = self.threads.get_mut(&tid) {
                        m.exited_ns = Some(now.saturating_sub(self.epoch));
                    }
                }
            }
        }
    }

    /// Whether `sched` is a `realrate` instance (adaptive reservations).
    fn adaptive(&self, sched: &str) -> bool {
        matches!(
            self.plan
                .node(&Node::Scheduler(sched.to_string()))
                .map(|n| &n.mechanism),
            Some(Mechanism::AdaptiveClass { .. })
        )
    }

    fn sample(&mut self) {
        let now = sys::now_ns().saturating_sub(self.epoch);
        for (&tid, m) in self.threads.iter_mut() {
            if m.exited_ns.is_some() {
                continue;
            }
            // A thread that is gone has exited (restore checks identity).
            match enforce::proc_cpu_ns(tid) {
                Some(c) => m.cpu_ns = c,
                None => {
                    m.exited_ns = Some(now);
                    continue;
                }
            }
            if let Ok(s) = std::fs::read_to_string(format!("/proc/{tid}/task/{tid}/status")) {
                let f = |k: &str| {
                    s.lines()
                        .find_map(|l| l.strip_prefix(k))
                        .and_then(|v| v.trim().parse::<u64>().ok())
                        .unwrap_or(0)
                };
                m.switches = (
                    f("voluntary_ctxt_switches:"),
                    f("nonvoluntary_ctxt_switches:"),
                );
            }
        }
    }

    /// Samples, restores every thread and cgroup, ends the programs still
    /// running, stops the watchdog; returns the report.
    fn finish(&mut self) -> Report {
        let end = sys::now_ns();
        let duration = end.saturating_sub(self.epoch);
        self.sample();
        // Built-in workloads still running are ended below, up to a second
        // later: their CPU time is what their threads had used at the end,
        // not what the kernel reports when they are reaped. (A launched
        // program keeps the reaped figure, which counts its children.)
        let h = self.h;
        let running: Vec<usize> = (0..self.programs.len())
            .filter(|&g| {
                let p = &self.programs[g];
                p.exit_status.is_none() && p.spec.is_some_and(|i| h.threads[i].exec.is_none())
            })
            .collect();
        // Out of the partitions first (the move resets affinities, which
        // the restore then sets).
        if let Some(c) = &self.cs {
            c.release_tasks();
        }
        for m in self.threads.values() {
            let base = self
                .cg
                .as_ref()
                .map(|c| (c.base.as_path(), c.root.as_path()));
            let _ = enforce::restore(&m.orig, base.map(|b| b.0), base.map(|b| b.1));
            if let Some(w) = &self.wd {
                w.forget(&m.orig);
            }
        }
        if let Some(c) = &self.cg {
            c.cleanup();
        }
        if let Some(c) = &self.cs {
            c.remove();
        }
        // A forked program is not the daemon's child: it is ended only
        // while its first thread is still the process hsched took in.
        let forked_alive = |k: &Kernel<'_>, p: &Program| {
            k.threads.get(&p.pid).is_some_and(|m| {
                enforce::proc_identity(p.pid).is_ok_and(|id| id == (m.orig.tgid, m.orig.start))
            })
        };
        for p in &self.programs {
            if p.exit_status.is_none() && (p.forked_from.is_none() || forked_alive(self, p)) {
                let _ = sys::kill(p.pid, libc::SIGTERM);
            }
        }
        let t0 = sys::now_ns();
        while self
            .programs
            .iter()
            .any(|p| p.exit_status.is_none() && p.forked_from.is_none())
            && sys::now_ns() - t0 < 1_000_000_000
        {
            self.reap(sys::now_ns());
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        for p in &self.programs {
            if p.exit_status.is_none() && (p.forked_from.is_none() || forked_alive(self, p)) {
                let _ = sys::kill(p.pid, libc::SIGKILL);
            }
        }
        self.reap(sys::now_ns());
        for g in running {
            self.programs[g].cpu_ns = None;
        }
        if let Some(w) = self.wd.take() {
            w.finish();
        }
        self.report(duration)
    }

    fn report(&self, duration: u64) -> Report {
        let machine = (duration.max(1) * self.cpus.len() as u64) as f64;
        let threads: Vec<ThreadReport> = self
            .threads
            .values()
            .map(|m| ThreadReport {
                name: m.name.clone(),
                scheduler: m.scheduler.clone(),
                cpu_ns: m.cpu_ns,
                share: m.cpu_ns as f64 / machine,
                received_ns: m.cpu_ns,
                context_switches: m.switches.0 + m.switches.1,
                preemptions: m.switches.1,
                wakeups: m.switches.0,
                created_ns: m.created_ns,
                exited_ns: m.exited_ns,
            })
            .collect();
        let end = self.epoch + duration;
        let programs = self
            .programs
            .iter()
            .enumerate()
            .map(|(g, p)| {
                let spec = p.spec.map(|i| &self.h.threads[i]);
                let slot = spec
                    .filter(|s| s.exec.is_none())
                    .and(p.spec)
                    .and_then(|i| self.slots.get(i))
                    .filter(|s| s.used.load(Ordering::Relaxed) != 0);
                let cpu = p.cpu_ns.unwrap_or_else(|| {
                    self.threads
                        .values()
                        .filter(|m| m.group == g)
                        .map(|m| m.cpu_ns)
                        .sum()
                });
                ProgramReport {
                    name: p.name.clone(),
                    pid: p.pid,
                    principal: spec.and_then(|s| s.principal.clone()),
                    workload: match spec {
                        Some(s) if s.exec.is_none() => s
                            .workload
                            .as_ref()
                            .map_or("none", crate::workload_name)
                            .to_string(),
                        _ => "exec".into(),
                    },
                    threads: self.threads.values().filter(|m| m.group == g).count(),
                    cpu_ns: cpu,
                    share: cpu as f64 / machine,
                    jobs: slot.map(|s| s.jobs.load(Ordering::Relaxed)),
                    deadline_misses: slot.map(|s| s.misses_at(end)),
                    max_lateness_ns: slot
                        .map(|s| s.max_lateness.load(Ordering::Relaxed))
                        .filter(|&v| v != i64::MIN),
                    exit_status: p.exit_status,
                }
            })
            .collect::<Vec<_>>();
        let principals = self
            .h
            .principals
            .iter()
            .map(|pr| {
                let cpu: u64 = programs
                    .iter()
                    .filter(|g| g.principal.as_deref() == Some(pr.name.as_str()))
                    .map(|g| g.cpu_ns)
                    .sum();
                (pr.name.clone(), cpu, cpu as f64 / machine)
            })
            .collect();
        // A scheduler's supply: the CPU of the threads below it (through
        // first parents).
        let schedulers = self
            .h
            .schedulers
            .iter()
            .map(|s| SchedulerReport {
                name: s.name.clone(),
                policy: s.policy.clone(),
                supply_ns: threads
                    .iter()
                    .filter(|t| below(self.h, &s.name, &t.scheduler))
                    .map(|t| t.cpu_ns)
                    .sum(),
            })
            .collect();
        let mut stats = self.stats.clone();
        stats.daemon_cpu_ns = sys::thread_cpu_ns().saturating_sub(self.cpu_base);
        stats.adapt = self.adapt.stats();
        Report {
            duration_ns: duration,
            cpus: self.cpus.clone(),
            events: stats.creates + stats.exits,
            threads,
            programs,
            schedulers,
            principals,
            stats,
            kernel: Some(super::machine_model()),
            ..Report::default()
        }
    }
}

/// Whether scheduler `at` is `s` or below it (through first parents).
pub(super) fn below(h: &Hierarchy, s: &str, at: &str) -> bool {
    let mut at = at;
    for _ in 0..=h.schedulers.len() {
        if at == s {
            return true;
        }
        match h
            .schedulers
            .iter()
            .find(|x| x.name == at)
            .and_then(|x| x.parents.first())
        {
            Some(p) => at = p.name.as_str(),
            None => return false,
        }
    }
    false
}
