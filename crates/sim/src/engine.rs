//! The discrete-event engine: a virtual nanosecond clock driving the
//! sans-IO HSI.
//!
//! # Event order (the tie rule)
//! Time advances to the earliest of: a processor finishing the work its
//! thread asked for, a stolen-time boundary, the firing time of the
//! earliest scheduler timer (after the timer model's rounding), and the
//! earliest queued event. At one instant the engine handles, one at a time
//! and re-evaluating after each:
//! 1. work completions, lowest processor first;
//! 2. stolen-time boundaries (all of those due);
//! 3. due scheduler timers (one `Hsi::fire_timers` call);
//! 4. queued events by (time, class, sequence number), classes being
//!    thread creation < control operation < workload timer < thread exit,
//!    and the sequence number the order in which events were queued.
//!
//! So a job that finishes exactly when a budget timer expires finishes
//! first, threads exist before operations at the same instant name them,
//! and an exit comes after everything else the thread does at its instant.
//! Inside one workload callback: the messages it queued for its scheduler
//! are delivered (`Hsi::thread_msg`, in order) before its request is
//! applied, and then the threads its queue changes may have unblocked are
//! poked, in the order they began to wait (see `crate::workload`).
//! Nothing here iterates over a hash map; the order is total.
//!
//! # Processor model
//! A processor runs the thread `Hsi::drain_dispatch` last gave it. Stolen
//! time (any active source on that processor) stops all progress and is
//! reported with `Hsi::add_stolen` at the next instant the engine stops at,
//! before any input that could change the dispatch. When a processor starts
//! a thread other than the one it ran last, it first spends the machine's
//! context-switch cost, during which nothing progresses; resuming the same
//! thread after idling costs nothing.
//!
//! Time is charged to a processor (busy, idle, switching or stolen, and the
//! running thread's CPU time) lazily: when its dispatch, its stolen-time
//! state or its thread's work changes, and at the end. Charging an interval
//! in pieces gives the same sums, so the figures are those of charging at
//! every stop of the clock, which a stealing processor still gets (its
//! stolen time must reach the HSI at the instant it is observed).

use crate::error::SimError;
use crate::events::{Ev, EventQueue, MAX_TARGET};
use crate::gantt::Gantt;
use crate::machine::{timer_fire_time, StealGen, NEVER};
use crate::metrics::ThreadStats;
use crate::report::{
    CpuReport, EventCounts, JobRecord, MachineReport, PrincipalReport, QueueReport, Report,
    SchedulerReport, ThreadReport, SCHEMA_VERSION,
};
use crate::rng::{stream_of, Rng};
use crate::trace::{
    json_literal, json_str, push_u64, TraceWriter, PID_CPUS, PID_SCHEDULERS, PID_THREADS,
    STOLEN_TID,
};
use crate::workload::{Next, Shared, WCtx, Workload};
use hsched_config::{BuildError, Hierarchy, OpSpec, ThreadSpec, TimedOp, TimerModel};
use hsched_core::{
    CpuId, Hsi, HsiError, Instant, Node, PolicyEvent, RevokeReason, ThreadId, TraceEvent, TraceKind,
};
use hsched_policies::PolicyInfo;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Work that never finishes (CPU-bound threads).
const FOREVER: u64 = u64::MAX;

const CLASS_CREATE: u8 = 0;
const CLASS_OP: u8 = 1;
const CLASS_WORKLOAD: u8 = 2;
const CLASS_EXIT: u8 = 3;

/// Most scheduler-timer rounds at one instant before the run is declared
/// stuck (the HSI guards a single round itself).
const MAX_TIMER_ROUNDS_AT_ONE_INSTANT: u32 = 100_000;
/// How long an instant under way when a stop comes may go on to finish.
const STOP_GRACE: std::time::Duration = std::time::Duration::from_secs(1);

struct SimThread {
    name: String,
    principal: Option<usize>,
    id: Option<ThreadId>,
    workload: Workload,
    rng: Rng,
    /// Work left in the current demand (`FOREVER` for CPU-bound).
    remaining: u64,
    runnable: bool,
    cpu: Option<u32>,
    /// Sequence number of the armed workload timer (0: none); an event
    /// with another one is stale and skipped.
    timer: u64,
    /// Runnable without a processor since.
    waiting_since: Option<u64>,
    /// Woke at, until its first dispatch.
    woke_at: Option<u64>,
    created: Option<u64>,
    exited: Option<u64>,
    /// Scheduler at exit (an instance index).
    last_parent: Option<usize>,
    stats: ThreadStats,
}

#[derive(Default)]
struct Cpu {
    /// Time up to which `stats` and the running thread's time are charged.
    /// A processor that is not stealing is charged lazily, when its state
    /// is about to change (see `Engine::settle`).
    acct: u64,
    running: Option<u32>,
    last: Option<u32>,
    switch_left: u64,
    /// Active stolen-time sources.
    stealing: u32,
    /// Start of the current thread slice, for traces.
    since: u64,
    steal_since: u64,
    pending_stolen: u64,
    stats: CpuReport,
}

impl Cpu {
    /// Charges this processor from its last charge to `now`: stolen,
    /// switching, busy or idle time, and the running thread's (in
    /// `threads`) CPU time and remaining work. See [`Engine::settle`].
    #[inline(always)]
    fn charge(&mut self, threads: &mut [SimThread], now: u64) {
        let dt = now - self.acct;
        self.acct = now;
        if self.stealing > 0 {
            self.stats.stolen_ns += dt;
            if let Some(i) = self.running {
                threads[i as usize].stats.stolen_ns += dt;
                self.pending_stolen += dt;
            }
        } else if let Some(i) = self.running {
            let th = &mut threads[i as usize];
            let s = self.switch_left.min(dt);
            self.switch_left -= s;
            self.stats.context_switch_ns += s;
            th.stats.switch_ns += s;
            let p = dt - s;
            self.stats.busy_ns += p;
            th.stats.cpu_ns += p;
            if th.remaining != FOREVER {
                th.remaining = th.remaining.saturating_sub(p);
            }
        } else {
            self.stats.idle_ns += dt;
        }
    }

    /// When the work of the running thread (in `threads`) is done, for a
    /// processor charged up to `now`.
    #[inline(always)]
    fn done_time(&self, threads: &[SimThread], now: u64) -> u64 {
        match self.running {
            Some(i) if self.stealing == 0 => {
                let r = threads[i as usize].remaining;
                if r == FOREVER {
                    NEVER
                } else {
                    now.saturating_add(self.switch_left).saturating_add(r)
                }
            }
            _ => NEVER,
        }
    }

    /// Takes its running thread `th` off this processor, charged up to
    /// `now`, in the books (the caller draws the slice).
    #[inline(always)]
    fn take_off(&mut self, th: &mut SimThread, now: u64) {
        self.running = None;
        th.cpu = None;
        if th.runnable {
            th.stats.preemptions += 1;
            th.waiting_since = Some(now);
        }
    }

    /// Puts thread `i` (`th`) on this processor, number `c`, charged up to
    /// `now`; a thread other than the last one costs `switch_cost` first.
    #[inline(always)]
    fn put_on(&mut self, c: usize, i: usize, th: &mut SimThread, now: u64, switch_cost: u64) {
        self.running = Some(i as u32);
        self.since = now;
        if self.last != Some(i as u32) {
            self.last = Some(i as u32);
            self.switch_left = switch_cost;
            self.stats.context_switches += 1;
        }
        th.cpu = Some(c as u32);
        th.stats.switch_ins += 1;
        if let Some(ws) = th.waiting_since.take() {
            th.stats.max_gap = th.stats.max_gap.max(now - ws);
        }
        if let Some(w) = th.woke_at.take() {
            th.stats.dispatch_latency.record(now - w);
        }
    }
}

struct SchedRec {
    name: String,
    policy: String,
    supply: u64,
    live: bool,
}

/// Options the engine needs, already resolved.
pub(crate) struct Setup {
    pub end: u64,
    pub seed: u64,
    pub check_protocol: bool,
    pub source: Option<String>,
    pub trace: Option<TraceWriter>,
    pub gantt: Option<Gantt>,
    pub progress: Option<Box<dyn FnMut(f64)>>,
    pub stop: Option<Arc<AtomicBool>>,
    pub job_records: bool,
}

pub(crate) struct Engine<'h> {
    h: &'h Hierarchy,
    policies: &'h [PolicyInfo],
    hsi: Hsi,
    now: u64,
    end: u64,
    seed: u64,
    source: Option<String>,
    specs: Vec<ThreadSpec>,
    threads: Vec<SimThread>,
    /// `ThreadId` index → thread index (`u32::MAX`: not ours).
    by_id: Vec<u32>,
    /// (name, thread index), sorted by name.
    names: Vec<(String, u32)>,
    principals: Vec<String>,
    queue: EventQueue,
    cpus: Vec<Cpu>,
    /// Per processor: when the work its thread asked for is done (`NEVER`
    /// when idle, stealing or running forever), with the earliest one kept
    /// ready for the loop.
    done_at: Completions,
    steals: Vec<StealGen>,
    next_steal: u64,
    /// Processors with an active stolen-time source.
    stealing_cpus: usize,
    timer_model: TimerModel,
    switch_cost: u64,
    changes: Vec<(CpuId, Option<ThreadId>)>,
    counts: EventCounts,
    trace: Option<TraceWriter>,
    /// When the HSI's tracing next turns on (the trace window's start) or
    /// off (its end): outside the window it records nothing the trace
    /// keeps. [`NEVER`] when no trace is written or the window has passed.
    hsi_trace_flip: u64,
    tbuf: Vec<TraceEvent>,
    targs: Vec<u8>,
    /// Each thread's name as a JSON string literal, escaped once (only
    /// when a trace is written).
    thread_json: Vec<Box<[u8]>>,
    /// The same for each instance, by index, as they are created.
    instance_json: Vec<Box<[u8]>>,
    gantt: Option<Gantt>,
    progress: Option<Box<dyn FnMut(f64)>>,
    next_progress: u64,
    /// The first of `next_progress` and `hsi_trace_flip`: the one check
    /// a new instant makes for both.
    next_mark: u64,
    /// The end of the run asked for (`end` until a stop moves it), for
    /// the fraction done.
    asked_end: u64,
    /// Set from outside (Ctrl-C) to end the run early ([`SimOptions::stop`]).
    ///
    /// [`SimOptions::stop`]: crate::SimOptions::stop
    stop: Option<Arc<AtomicBool>>,
    /// The run was ended early by `stop`.
    interrupted: bool,
    /// When the stop was first seen in the middle of an instant.
    stop_seen: Option<std::time::Instant>,
    scheds: Vec<SchedRec>,
    /// Schedulers unloaded after their policy failed.
    unloads: crate::unload::Unloads,
    timer_rounds: u32,
    timer_round_at: u64,
    /// Pipeline queues, pokes and workload messages.
    shared: Shared,
    /// Inside `run_pokes`.
    poking: bool,
}

/// The name of the stolen-time slices, as a JSON string.
const STOLEN: &[u8] = b"\"stolen\"";

/// Appends the `cpu` and `vp` arguments of a grant or revocation event.
fn cpu_vp(args: &mut Vec<u8>, cpu: CpuId, vp: hsched_core::VpId) {
    args.extend_from_slice(b",\"cpu\":");
    push_u64(args, cpu.0.into());
    args.extend_from_slice(b",\"vp\":");
    push_u64(args, vp.0.into());
}

fn principal_index(list: &mut Vec<String>, name: &str) -> usize {
    match list.iter().position(|p| p == name) {
        Some(i) => i,
        None => {
            list.push(name.to_string());
            list.len() - 1
        }
    }
}

impl<'h> Engine<'h> {
    pub fn new(
        h: &'h Hierarchy,
        policies: &'h [PolicyInfo],
        mut hsi: Hsi,
        specs: Vec<ThreadSpec>,
        setup: Setup,
    ) -> Result<Self, SimError> {
        let ncpu = hsi.cpu_count();
        if ncpu == 0 {
            return Err(SimError::Machine {
                message: "the machine has no processors".into(),
            });
        }
        if ncpu != h.machine.cpus {
            return Err(SimError::Machine {
                message: format!(
                    "the HSI has {ncpu} processor(s) but the machine has {}",
                    h.machine.cpus
                ),
            });
        }
        hsi.set_checking(setup.check_protocol);
        let window = setup.trace.as_ref().map(TraceWriter::window);
        hsi.set_tracing(window.is_some_and(|(from, to)| from == 0 && to > 0));
        let hsi_trace_flip = match window {
            Some((0, to)) => to,
            Some((from, _)) => from,
            None => NEVER,
        };
        let mut steals = Vec::with_capacity(h.machine.stolen.len());
        for s in &h.machine.stolen {
            steals.push(StealGen::new(s, ncpu).map_err(|message| SimError::Machine { message })?);
        }
        if specs.len() > MAX_TARGET + 1 || h.operations.len() > MAX_TARGET + 1 {
            return Err(SimError::Build {
                message: format!(
                    "{} threads and {} operations: the simulator handles at most {} of each",
                    specs.len(),
                    h.operations.len(),
                    MAX_TARGET + 1
                ),
            });
        }
        let mut principals: Vec<String> = h.principals.iter().map(|p| p.name.clone()).collect();
        let mut threads = Vec::with_capacity(specs.len());
        for s in &specs {
            let rng = Rng::new(setup.seed, stream_of(&s.name));
            let spec = s.workload.as_ref().ok_or_else(|| SimError::Workload {
                thread: s.name.clone(),
                message: match &s.rtapp {
                    Some(b) => format!("is missing: rt-app task '{}' is not attached (load the rt-app file)", b.task),
                    None => "is missing: the thread has no `workload` (`exec` alone describes a live-mode thread)".into(),
                },
            })?;
            let workload = Workload::with_queues(spec, &rng, &h.queues).map_err(|message| {
                SimError::Workload {
                    thread: s.name.clone(),
                    message,
                }
            })?;
            threads.push(SimThread {
                name: s.name.clone(),
                principal: s
                    .principal
                    .as_deref()
                    .map(|p| principal_index(&mut principals, p)),
                id: None,
                workload,
                rng,
                remaining: 0,
                runnable: false,
                cpu: None,
                timer: 0,
                waiting_since: None,
                woke_at: None,
                created: None,
                exited: None,
                last_parent: None,
                stats: ThreadStats {
                    log: setup.job_records.then(Box::default),
                    ..ThreadStats::default()
                },
            });
        }
        let mut names: Vec<(String, u32)> = specs
            .iter()
            .enumerate()
            .map(|(i, s)| (s.name.clone(), i as u32))
            .collect();
        names.sort();
        if let Some(w) = names.windows(2).find(|w| w[0].0 == w[1].0) {
            return Err(SimError::Build {
                message: format!("two threads are named '{}'", w[0].0),
            });
        }
        let progress_step = (setup.end / 100).max(1);
        let specs_len = specs.len();
        let mut e = Engine {
            h,
            policies,
            hsi,
            now: 0,
            end: setup.end,
            seed: setup.seed,
            source: setup.source,
            specs,
            threads,
            by_id: Vec::new(),
            names,
            principals,
            queue: EventQueue::new(),
            cpus: (0..ncpu)
                .map(|c| Cpu {
                    stats: CpuReport {
                        cpu: c,
                        ..Default::default()
                    },
                    ..Default::default()
                })
                .collect(),
            done_at: Completions::new(ncpu),
            next_steal: NEVER,
            stealing_cpus: 0,
            steals,
            timer_model: h.machine.timer,
            switch_cost: h.machine.context_switch.as_nanos(),
            changes: Vec::with_capacity(ncpu * 2),
            counts: EventCounts::default(),
            trace: setup.trace,
            hsi_trace_flip,
            tbuf: Vec::new(),
            targs: Vec::new(),
            thread_json: Vec::new(),
            instance_json: Vec::new(),
            gantt: setup.gantt,
            progress: setup.progress,
            next_progress: progress_step,
            next_mark: progress_step.min(hsi_trace_flip),
            asked_end: setup.end,
            stop: setup.stop,
            interrupted: false,
            stop_seen: None,
            scheds: Vec::new(),
            unloads: crate::unload::Unloads::default(),
            timer_rounds: 0,
            timer_round_at: 0,
            shared: Shared::new(&h.queues, specs_len),
            poking: false,
        };
        e.next_steal = e.steals.iter().map(|g| g.next).min().unwrap_or(NEVER);
        if e.trace.is_some() {
            e.thread_json = e.threads.iter().map(|t| json_literal(&t.name)).collect();
        }
        e.refresh_schedulers();
        if let Some(t) = e.trace.as_mut() {
            for c in 0..ncpu {
                t.track(PID_CPUS, c as u32, &format!("cpu{c}"));
            }
            let mut stolen_cpus: Vec<usize> = e.steals.iter().map(|g| g.cpu).collect();
            stolen_cpus.sort_unstable();
            stolen_cpus.dedup();
            for c in stolen_cpus {
                t.track(PID_CPUS, STOLEN_TID + c as u32, &format!("cpu{c} stolen"));
            }
            t.track(PID_SCHEDULERS, 0, "top");
        }
        Ok(e)
    }

    /// Queues an event; returns its sequence number.
    #[inline]
    fn push(&mut self, at: u64, class: u8, target: u32) -> u64 {
        if self.queue.exhausted() {
            self.renumber();
        }
        self.queue.push(at, class, target)
    }

    /// Gives the queued events fresh sequence numbers (same order) and
    /// moves the threads' armed timers with them.
    #[cold]
    fn renumber(&mut self) {
        let armed: Vec<u64> = self
            .threads
            .iter_mut()
            .map(|t| std::mem::take(&mut t.timer))
            .collect();
        for (ev, seq) in self.queue.renumber() {
            let i = ev.target as usize;
            if ev.class == CLASS_WORKLOAD && armed[i] == ev.seq {
                self.threads[i].timer = seq;
            }
        }
    }

    /// Records instances created since the last call (and names their
    /// trace tracks).
    fn refresh_schedulers(&mut self) {
        let ids: Vec<_> = self.hsi.instances().collect();
        for id in ids {
            while self.scheds.len() <= id.index() {
                self.scheds.push(SchedRec {
                    name: String::new(),
                    policy: String::new(),
                    supply: 0,
                    live: false,
                });
            }
            let r = &mut self.scheds[id.index()];
            if !r.live && r.name.is_empty() {
                r.name = self.hsi.instance_name(id).to_string();
                r.policy = self
                    .hsi
                    .instance_policy(id)
                    .map_or("", |p| p.policy_name())
                    .to_string();
                r.live = true;
                if let Some(t) = self.trace.as_mut() {
                    t.track(PID_SCHEDULERS, id.0 + 1, &r.name);
                    let k = id.index();
                    if self.instance_json.len() <= k {
                        self.instance_json.resize(k + 1, Box::default());
                    }
                    self.instance_json[k] = json_literal(&r.name);
                }
            }
        }
    }

    // ----- the loop -----------------------------------------------------

    pub fn run(mut self) -> Result<Report, SimError> {
        for i in 0..self.specs.len() {
            let s = &self.specs[i];
            let (start, exit) = (s.start.as_nanos(), s.exit.map(|d| d.as_nanos()));
            self.push(start, CLASS_CREATE, i as u32);
            if let Some(x) = exit {
                self.push(x, CLASS_EXIT, i as u32);
            }
        }
        for k in 0..self.h.operations.len() {
            let at = self.h.operations[k].at.as_nanos();
            self.push(at, CLASS_OP, k as u32);
        }
        if let Err(e) = self.run_loop() {
            return Err(*e);
        }
        self.finish()
    }

    /// The event loop, up to the end of the run.
    fn run_loop(&mut self) -> Step {
        loop {
            let (t_cpu, cpu) = self.next_completion();
            let t_timer = match self.hsi.next_timer() {
                Some(t) => timer_fire_time(self.timer_model, t.0, self.now),
                None => NEVER,
            };
            let t_ev = self.queue.next_at();
            let t = t_cpu.min(self.next_steal).min(t_timer).min(t_ev);
            if t >= self.end || self.stop_before(t) {
                self.advance(self.end);
                break;
            }
            self.advance(t);
            if t_cpu == t {
                self.complete(cpu)?;
            } else if self.next_steal == t {
                self.flip_steals();
            } else if t_timer == t {
                self.fire_timers()?;
            } else if let Some(ev) = self.queue.pop() {
                self.handle(ev)?;
            }
        }
        Ok(())
    }

    /// The clock reached `hsi_trace_flip`: the HSI records trace events
    /// while `t` is in the trace window and not outside it.
    #[cold]
    fn flip_hsi_trace(&mut self, t: u64) {
        let (on, next) = match self.trace.as_ref().map(TraceWriter::window) {
            Some((from, to)) if from <= t && t < to => (true, to),
            _ => (false, NEVER),
        };
        self.hsi.set_tracing(on);
        self.hsi_trace_flip = next;
    }

    /// Whether the run was asked to stop; if so it now ends at `t`, the
    /// next event's time, as if that were the end it was given, so every
    /// instant before it is complete. An instant still under way when the
    /// stop comes is finished first, unless that takes longer than
    /// [`STOP_GRACE`]: one instant of thousands of events can take
    /// minutes, and a stop must come in well under the time a service
    /// manager waits after SIGTERM. Such a run ends in the middle of the
    /// instant, its other events left undone.
    #[inline(always)]
    fn stop_before(&mut self, t: u64) -> bool {
        match &self.stop {
            Some(flag) if flag.load(Ordering::Relaxed) => {
                if t == self.now
                    && self
                        .stop_seen
                        .get_or_insert_with(std::time::Instant::now)
                        .elapsed()
                        < STOP_GRACE
                {
                    return false;
                }
                self.end = t;
                self.interrupted = true;
                true
            }
            _ => false,
        }
    }

    /// The earliest work completion, lowest processor first.
    fn next_completion(&self) -> (u64, usize) {
        self.done_at.earliest()
    }

    /// Moves the clock to `t`. Processors that are stealing are charged
    /// now, so their stolen time reaches the HSI at this instant as before;
    /// the others are charged when their state next changes
    /// ([`settle`](Self::settle)), which adds up to the same figures.
    fn advance(&mut self, t: u64) {
        if t <= self.now {
            return;
        }
        self.now = t;
        if t >= self.next_mark {
            self.mark(t);
        }
        if self.stealing_cpus > 0 {
            self.advance_stealing(t);
        }
    }

    /// The clock reached `next_mark`: reports progress, turns the HSI's
    /// tracing on or off at the trace window's ends (before any input at
    /// `t`), and ends the run once the Gantt chart is full.
    #[cold]
    fn mark(&mut self, t: u64) {
        if t >= self.next_progress {
            if let Some(p) = self.progress.as_mut() {
                p(t as f64 / self.asked_end as f64);
            }
            let step = (self.asked_end / 100).max(1);
            self.next_progress = (t / step + 1) * step;
        }
        if t >= self.hsi_trace_flip {
            self.flip_hsi_trace(t);
        }
        if self.gantt.as_ref().is_some_and(Gantt::full) {
            // `finish` says why.
            self.end = self.end.min(t);
        }
        self.next_mark = self.next_progress.min(self.hsi_trace_flip);
    }

    /// Charges the stealing processors up to `t` and reports the time
    /// stolen from running threads to the HSI.
    #[cold]
    fn advance_stealing(&mut self, t: u64) {
        let mut any_stolen = false;
        for c in 0..self.cpus.len() {
            if self.cpus[c].stealing > 0 {
                self.settle(c);
                any_stolen |= self.cpus[c].pending_stolen > 0;
            }
        }
        if any_stolen {
            for c in 0..self.cpus.len() {
                let d = std::mem::take(&mut self.cpus[c].pending_stolen);
                if d > 0 {
                    self.counts.add_stolen += 1;
                    self.hsi
                        .add_stolen(Instant(t), CpuId(c as u32), hsched_core::Duration(d));
                }
            }
        }
    }

    /// Charges processor `c` from its last charge to now: stolen, switching,
    /// busy or idle time, and the running thread's CPU time and remaining
    /// work. Splitting an interval gives the same sums, so charging late is
    /// exact as long as it happens before `running`, `stealing`,
    /// `switch_left` or the thread's `remaining` change or are read.
    #[inline(always)]
    fn settle(&mut self, c: usize) {
        if self.cpus[c].acct != self.now {
            self.charge(c);
        }
    }

    /// [`settle`](Self::settle) when there is time to charge (inlined:
    /// out of line, the call cost about a fifth of the work).
    #[inline(always)]
    fn charge(&mut self, c: usize) {
        self.cpus[c].charge(&mut self.threads, self.now);
    }

    /// Charges processor `c` and recomputes when its thread's work is done.
    #[inline]
    fn recompute_done(&mut self, c: usize) {
        self.settle(c);
        self.set_done(c);
    }

    /// Recomputes when the work of processor `c`'s thread is done; the
    /// processor is charged up to now.
    #[inline(always)]
    fn set_done(&mut self, c: usize) {
        let at = self.cpus[c].done_time(&self.threads, self.now);
        self.done_at.set(c, at);
    }

    #[inline(never)]
    fn flip_steals(&mut self) {
        let t = self.now;
        for k in 0..self.steals.len() {
            if self.steals[k].next != t {
                continue;
            }
            let g = &mut self.steals[k];
            g.flip();
            let (c, active) = (g.cpu, g.active);
            self.settle(c);
            let cpu = &mut self.cpus[c];
            if active {
                cpu.stealing += 1;
                if cpu.stealing == 1 {
                    cpu.steal_since = t;
                    self.stealing_cpus += 1;
                }
            } else {
                cpu.stealing -= 1;
                if cpu.stealing == 0 {
                    self.stealing_cpus -= 1;
                    let since = cpu.steal_since;
                    if let Some(tr) = self.trace.as_mut() {
                        tr.slice(PID_CPUS, STOLEN_TID + c as u32, STOLEN, since, t, b"");
                    }
                    if let Some(g) = self.gantt.as_mut() {
                        g.stolen(c as u32, since, t);
                    }
                }
            }
            self.recompute_done(c);
        }
        self.next_steal = self.steals.iter().map(|g| g.next).min().unwrap_or(NEVER);
    }

    /// The error for timers that keep coming due at one instant.
    #[cold]
    fn timer_storm(&self) -> Box<SimError> {
        Box::new(SimError::Protocol {
            at: Instant(self.now),
            input: "scheduler timers".into(),
            violations: vec![hsched_core::Violation {
                rule: hsched_core::Rule::TimerStorm,
                culprit: "a scheduler".into(),
                vp: None,
                detail: format!(
                    "timers kept coming due at {} for {MAX_TIMER_ROUNDS_AT_ONE_INSTANT} rounds",
                    Instant(self.now)
                ),
            }],
            seed: self.seed,
            source: self.source.clone(),
        })
    }

    fn fire_timers(&mut self) -> Step {
        if self.timer_round_at == self.now {
            self.timer_rounds += 1;
            if self.timer_rounds > MAX_TIMER_ROUNDS_AT_ONE_INSTANT {
                return Err(self.timer_storm());
            }
        } else {
            self.timer_round_at = self.now;
            self.timer_rounds = 0;
        }
        self.counts.fire_timers += 1;
        let r = self.hsi.fire_timers(Instant(self.now));
        self.after_input(r, move || Input::Timers)
    }

    fn handle(&mut self, ev: Ev) -> Step {
        let i = ev.target as usize;
        match ev.class {
            CLASS_CREATE => self.create(i),
            CLASS_OP => self.operation(i),
            CLASS_WORKLOAD => {
                let th = &self.threads[i];
                if ev.seq != th.timer || th.exited.is_some() || th.id.is_none() {
                    return Ok(());
                }
                self.call_workload(i, Callback::Timer)
            }
            _ => {
                let th = &mut self.threads[i];
                if th.id.is_some() && th.exited.is_none() {
                    // Cut off by its exit time: what is overdue is missed,
                    // as at the end of the run.
                    th.workload.finish(self.now, &mut th.stats);
                    self.exit(i)
                } else {
                    Ok(())
                }
            }
        }
    }

    // ----- HSI inputs ----------------------------------------------------

    /// Maps an HSI result to a `SimError`, then applies dispatch changes
    /// and writes trace events. `input` names the input for the error; it
    /// is a closure so that the common `Ok` path does not build it.
    #[inline(always)]
    fn after_input(&mut self, r: Result<(), HsiError>, input: impl FnOnce() -> Input) -> Step {
        if let Err(e) = r {
            return Err(self.hsi_error(e, input()));
        }
        if self.hsi.faults_pending() {
            self.unload_failed();
        }
        if self.trace.is_some() {
            self.write_hsi_trace();
        }
        self.sync();
        Ok(())
    }

    /// Unloads the schedulers whose policies failed in the last input
    /// and marks the destroyed ones in the scheduler table.
    #[cold]
    #[inline(never)]
    fn unload_failed(&mut self) {
        let now = Instant(self.now);
        for (_, name, supply) in self.unloads.unload(&mut self.hsi, now) {
            if let Some(r) = self.scheds.iter_mut().find(|r| r.live && r.name == name) {
                r.supply = supply;
                r.live = false;
            }
        }
    }

    fn describe(&self, input: Input) -> String {
        match input {
            Input::Thread(i, action) => format!("{action} of thread '{}'", self.threads[i].name),
            Input::Timers => "scheduler timers".to_string(),
            Input::Op(k) => describe_op(&self.h.operations[k].op),
        }
    }

    #[cold]
    fn hsi_error(&self, e: HsiError, input: Input) -> Box<SimError> {
        Box::new(match e {
            HsiError::Protocol(violations) => SimError::Protocol {
                at: Instant(self.now),
                input: self.describe(input),
                violations,
                seed: self.seed,
                source: self.source.clone(),
            },
            HsiError::Op(op) => match input {
                Input::Thread(i, action) => SimError::Thread {
                    thread: self.threads[i].name.clone(),
                    action,
                    at: Instant(self.now),
                    message: op.to_string(),
                },
                _ => SimError::Op {
                    op: self.describe(input),
                    at: Instant(self.now),
                    message: op.to_string(),
                },
            },
        })
    }

    #[inline(never)]
    fn create(&mut self, i: usize) -> Step {
        self.counts.create_thread += 1;
        let r = match self.unloads.redirect(&self.specs[i].scheduler) {
            None => hsched_config::create_thread(&mut self.hsi, &self.specs[i], Instant(self.now)),
            // Its scheduler was unloaded: the thread joins the fallback, as
            // its siblings did, with its defaults where its parameters are
            // refused there.
            Some((report, fallback)) => {
                let mut spec = self.specs[i].clone();
                spec.scheduler = fallback;
                let now = Instant(self.now);
                let mut r = hsched_config::create_thread(&mut self.hsi, &spec, now);
                if let Err(BuildError::Hsi { error, .. }) = &r {
                    let why = format!("thread '{}' took its defaults: {error}", spec.name);
                    spec.params = Default::default();
                    r = hsched_config::create_thread(&mut self.hsi, &spec, now);
                    if r.is_ok() {
                        report.reset.push(why);
                    }
                }
                report.moved.push(spec.name);
                r
            }
        };
        let id = match r {
            Ok(id) => id,
            Err(BuildError::Hsi { error, .. }) => {
                return Err(self.hsi_error(error, Input::Thread(i, "creation")))
            }
            Err(other) => {
                return Err(Box::new(SimError::Thread {
                    thread: self.threads[i].name.clone(),
                    action: "creation",
                    at: Instant(self.now),
                    message: other.to_string(),
                }))
            }
        };
        if self.by_id.len() <= id.index() {
            self.by_id.resize(id.index() + 1, u32::MAX);
        }
        self.by_id[id.index()] = i as u32;
        let th = &mut self.threads[i];
        th.id = Some(id);
        th.created = Some(self.now);
        if let Some(t) = self.trace.as_mut() {
            t.track(PID_THREADS, i as u32, &th.name);
        }
        self.after_input(Ok(()), move || Input::Thread(i, "creation"))?;
        self.call_workload(i, Callback::Start)
    }

    /// Thread `i` becomes runnable. Inlined, as [`block`](Self::block),
    /// into the workload callbacks that ask for it: the call cost about a
    /// tenth of the engine's part of the input.
    #[inline(always)]
    fn wake(&mut self, i: usize) -> Step {
        let th = &mut self.threads[i];
        let Some(id) = th.id else { return Ok(()) };
        th.runnable = true;
        th.waiting_since = Some(self.now);
        th.woke_at = Some(self.now);
        th.stats.wakeups += 1;
        self.counts.wake += 1;
        let r = self.hsi.wake(Instant(self.now), id);
        self.after_input(r, move || Input::Thread(i, "wake-up"))
    }

    fn close_wait(&mut self, i: usize) {
        let now = self.now;
        let th = &mut self.threads[i];
        if let Some(ws) = th.waiting_since.take() {
            th.stats.max_gap = th.stats.max_gap.max(now - ws);
        }
        th.woke_at = None;
    }

    /// Thread `i` stops being runnable (inlined, see [`wake`](Self::wake)).
    #[inline(always)]
    fn block(&mut self, i: usize) -> Step {
        self.close_wait(i);
        let th = &mut self.threads[i];
        let Some(id) = th.id else { return Ok(()) };
        th.runnable = false;
        self.counts.block += 1;
        let r = self.hsi.block(Instant(self.now), id);
        self.after_input(r, move || Input::Thread(i, "block"))
    }

    #[inline(never)]
    fn exit(&mut self, i: usize) -> Step {
        self.close_wait(i);
        let th = &mut self.threads[i];
        let Some(id) = th.id else { return Ok(()) };
        th.runnable = false;
        th.exited = Some(self.now);
        th.timer = 0;
        th.last_parent = Some(self.hsi.thread_parent(id).index());
        self.counts.exit += 1;
        let r = self.hsi.exit(Instant(self.now), id);
        self.after_input(r, move || Input::Thread(i, "exit"))
    }

    #[inline(never)]
    fn operation(&mut self, k: usize) -> Step {
        let TimedOp { op, .. } = &self.h.operations[k];
        if let OpSpec::DestroyScheduler { name } = op {
            if let Some(id) = self.hsi.instance(name) {
                let supply = self.hsi.instance_supply(id).as_nanos();
                if let Some(r) = self.scheds.get_mut(id.index()) {
                    r.supply = supply;
                    r.live = false;
                }
            }
        }
        self.counts.operations += 1;
        let (threads, names) = (&self.threads, &self.names);
        let lookup = |n: &str| -> Option<ThreadId> {
            let k = names.binary_search_by(|(x, _)| x.as_str().cmp(n)).ok()?;
            let th = &threads[names[k].1 as usize];
            if th.exited.is_some() {
                None
            } else {
                th.id
            }
        };
        let r = hsched_config::apply_op_with(
            &mut self.hsi,
            op,
            Instant(self.now),
            &lookup,
            self.policies,
        );
        let r = match r {
            Ok(()) => Ok(()),
            Err(BuildError::Hsi {
                error: e @ HsiError::Protocol(_),
                ..
            }) => Err(e),
            Err(other) => {
                return Err(Box::new(SimError::Op {
                    op: describe_op(op),
                    at: Instant(self.now),
                    message: self.op_refusal(other),
                }));
            }
        };
        self.after_input(r, move || Input::Op(k))?;
        self.refresh_schedulers();
        Ok(())
    }

    /// Why an operation was refused, in words. An operation naming a
    /// thread that has exited says when, and why: the file checker cannot
    /// know when a finite program ends, so this is where the run finds out.
    fn op_refusal(&self, e: BuildError) -> String {
        let BuildError::UnknownThread(name) = &e else {
            return e.to_string();
        };
        let exited = self
            .names
            .binary_search_by(|(x, _)| x.as_str().cmp(name))
            .ok()
            .map(|k| self.names[k].1 as usize)
            .and_then(|i| Some((i, self.threads[i].exited?)));
        let Some((i, at)) = exited else {
            return e.to_string();
        };
        let why = if self.h.threads[i].exit.map(|x| x.as_nanos()) == Some(at) {
            "at its `exit` time"
        } else {
            "when its program ended"
        };
        format!(
            "thread `{name}` exited at {} ({why}); an operation cannot name it after that: \
             apply the operation earlier, or give the program more loops",
            Instant(at)
        )
    }

    // ----- dispatch -------------------------------------------------------

    #[inline(always)]
    fn sync(&mut self) {
        self.changes.clear();
        self.hsi.drain_dispatch(&mut self.changes);
        if !self.changes.is_empty() {
            self.apply_changes();
        }
    }

    #[inline(never)]
    fn apply_changes(&mut self) {
        if let [(cpu, new)] = self.changes[..] {
            // One change, the common case: the new thread cannot be on
            // another processor (that one would have changed too). The
            // processor and the threads are looked up once, on slices
            // that calls cannot change, and the old slice is drawn last.
            let c = cpu.index();
            let new = self.ours(new);
            let (now, switch_cost) = (self.now, self.switch_cost);
            let threads = &mut self.threads[..];
            let cpu = &mut self.cpus[c];
            if cpu.acct != now {
                cpu.charge(threads, now);
            }
            let (old, since) = (cpu.running, cpu.since);
            if let Some(i) = old {
                cpu.take_off(&mut threads[i as usize], now);
            }
            if let Some(i) = new {
                cpu.put_on(c, i, &mut threads[i], now, switch_cost);
            }
            self.done_at.set(c, cpu.done_time(threads, now));
            if let Some(i) = old {
                self.draw_run(c, i as usize, since);
            }
            return;
        }
        // Take every changed processor's old thread off first, so a thread
        // that migrates is never on two processors in our books.
        let now = self.now;
        for k in 0..self.changes.len() {
            let c = self.changes[k].0.index();
            self.settle(c);
            let cpu = &mut self.cpus[c];
            if let Some(i) = cpu.running {
                let since = cpu.since;
                cpu.take_off(&mut self.threads[i as usize], now);
                self.draw_run(c, i as usize, since);
            }
        }
        for k in 0..self.changes.len() {
            let (cpu, new) = self.changes[k];
            let c = cpu.index();
            if let Some(i) = self.ours(new) {
                self.cpus[c].put_on(c, i, &mut self.threads[i], now, self.switch_cost);
            }
            self.set_done(c);
        }
    }

    /// Our index of HSI thread `t`, if it is one of ours.
    #[inline(always)]
    fn ours(&self, t: Option<ThreadId>) -> Option<usize> {
        match self.by_id.get(t?.index()) {
            Some(&i) if i != u32::MAX => Some(i as usize),
            _ => None,
        }
    }

    /// Draws thread `i`'s slice on processor `c`, from `since` to now, in
    /// the trace and the Gantt chart if they are written.
    #[inline(always)]
    fn draw_run(&mut self, c: usize, i: usize, since: u64) {
        if self.trace.is_some() || self.gantt.is_some() {
            self.draw_run_out(c, i, since);
        }
    }

    /// [`draw_run`](Self::draw_run)'s drawing, out of the untraced path.
    #[inline(never)]
    fn draw_run_out(&mut self, c: usize, i: usize, since: u64) {
        let now = self.now;
        if let Some(t) = self.trace.as_mut() {
            t.slice(PID_CPUS, c as u32, &self.thread_json[i], since, now, b"");
        }
        if let Some(g) = self.gantt.as_mut() {
            g.run(i as u32, c as u32, since, now);
            if g.full() {
                // `mark` ends the run at the next instant.
                self.next_mark = 0;
            }
        }
    }

    // ----- workloads ------------------------------------------------------

    fn complete(&mut self, c: usize) -> Step {
        match self.cpus[c].running {
            Some(i) => self.call_workload(i as usize, Callback::Done),
            None => {
                self.done_at.set(c, NEVER);
                Ok(())
            }
        }
    }

    #[inline(always)]
    fn call_workload(&mut self, i: usize, cb: Callback) -> Step {
        let now = self.now;
        let SimThread {
            workload,
            rng,
            stats,
            id,
            ..
        } = &mut self.threads[i];
        let params = match id {
            Some(t) if workload.reads_params() => Some(self.hsi.vp_params(self.hsi.thread_vp(*t))),
            _ => None,
        };
        let mut cx = WCtx {
            now,
            rng,
            stats,
            arm: None,
            missed: 0,
            me: i as u32,
            shared: &mut self.shared,
            params,
        };
        let next = match cb {
            Callback::Start => workload.start(&mut cx),
            Callback::Done => workload.done(&mut cx),
            Callback::Timer => workload.timer(&mut cx),
            Callback::Poke => workload.poke(&mut cx),
        };
        let (arm, missed) = (cx.arm, cx.missed);
        if !self.shared.msgs.is_empty() {
            self.send_messages(i)?;
        }
        if missed > 0 && (self.trace.is_some() || self.gantt.is_some()) {
            self.record_miss(i, missed);
        }
        if let Some(at) = arm {
            let seq = self.push(at, CLASS_WORKLOAD, i as u32);
            self.threads[i].timer = seq;
        }
        match next {
            Next::Run(w) => {
                if let Some(c) = self.threads[i].cpu {
                    // Charge the old work before replacing it.
                    self.settle(c as usize);
                }
                let th = &mut self.threads[i];
                th.remaining = w;
                if th.runnable {
                    if let Some(c) = th.cpu {
                        self.recompute_done(c as usize);
                    }
                    Ok(())
                } else {
                    self.wake(i)
                }
            }
            Next::Block => {
                let th = &mut self.threads[i];
                th.remaining = 0;
                if th.runnable {
                    self.block(i)
                } else {
                    Ok(())
                }
            }
            Next::Same => Ok(()),
            Next::Exit => self.exit(i),
            Next::Stuck => Err(Box::new(SimError::Stuck {
                thread: self.threads[i].name.clone(),
                at: Instant(now),
            })),
        }?;
        self.run_pokes()
    }

    /// Delivers the messages a workload callback of thread `i` queued to
    /// its scheduler, in order. A refusal is counted; a protocol violation
    /// ends the run.
    #[inline(never)]
    fn send_messages(&mut self, i: usize) -> Step {
        let mut msgs = std::mem::take(&mut self.shared.msgs);
        if let Some(id) = self.threads[i].id {
            for m in &msgs {
                self.counts.thread_msg += 1;
                match self.hsi.thread_msg(Instant(self.now), id, m) {
                    Ok(()) => self.shared.sent[i].0 += 1,
                    Err(HsiError::Op(_)) => self.shared.sent[i].1 += 1,
                    Err(e) => return Err(self.hsi_error(e, Input::Thread(i, "message"))),
                }
                self.after_input(Ok(()), move || Input::Thread(i, "message"))?;
            }
        }
        // Keep the allocation for the next callback.
        msgs.clear();
        self.shared.msgs = msgs;
        Ok(())
    }

    /// Calls `poke` on every thread a queue change may have unblocked, in
    /// order; pokes raised meanwhile join the end of the list.
    #[inline(always)]
    fn run_pokes(&mut self) -> Step {
        if self.shared.pokes.is_empty() || self.poking {
            return Ok(());
        }
        self.poke_waiters()
    }

    /// [`run_pokes`](Self::run_pokes) when there are pokes to deliver.
    #[inline(never)]
    fn poke_waiters(&mut self) -> Step {
        self.poking = true;
        let mut k = 0;
        let r = loop {
            let Some(&j) = self.shared.pokes.get(k) else {
                break Ok(());
            };
            k += 1;
            let th = &self.threads[j as usize];
            if th.id.is_none() || th.exited.is_some() {
                continue;
            }
            if let Err(e) = self.call_workload(j as usize, Callback::Poke) {
                break Err(e);
            }
        };
        self.shared.pokes.clear();
        self.poking = false;
        r
    }

    /// Draws `n` deadline misses of thread `i` in the trace and the Gantt
    /// chart (called only when one of them is written).
    #[inline(never)]
    fn record_miss(&mut self, i: usize, n: u64) {
        let now = self.now;
        if let Some(t) = self.trace.as_mut() {
            self.targs.clear();
            self.targs.extend_from_slice(b"\"misses\":");
            push_u64(&mut self.targs, n);
            t.instant(
                PID_THREADS,
                i as u32,
                b"\"deadline miss\"",
                now,
                &self.targs,
            );
        }
        if let Some(g) = self.gantt.as_mut() {
            g.miss(i as u32, now);
        }
    }

    // ----- tracing --------------------------------------------------------

    fn node_name(&self, n: Node) -> &str {
        match n {
            Node::Top => "top",
            Node::Instance(id) => self.hsi.instance_name(id),
            Node::Thread(t) => match self.by_id.get(t.index()) {
                Some(&i) if i != u32::MAX => &self.threads[i as usize].name,
                _ => self.hsi.thread_name(t),
            },
        }
    }

    /// Appends `n`'s name as a JSON string, escaped in advance where it
    /// can be (an instance is named once `refresh_schedulers` saw it).
    fn push_node_name(&self, args: &mut Vec<u8>, n: Node) {
        let known = match n {
            Node::Instance(id) => self.instance_json.get(id.index()),
            Node::Thread(t) => match self.by_id.get(t.index()) {
                Some(&i) if i != u32::MAX => self.thread_json.get(i as usize),
                _ => None,
            },
            Node::Top => None,
        };
        match known.filter(|l| !l.is_empty()) {
            Some(l) => args.extend_from_slice(l),
            None => json_str(args, self.node_name(n)),
        }
    }

    fn node_tid(n: Node) -> u32 {
        match n {
            Node::Instance(id) => id.0 + 1,
            _ => 0,
        }
    }

    fn write_hsi_trace(&mut self) {
        self.tbuf.clear();
        self.hsi.drain_trace(&mut self.tbuf);
        let events = std::mem::take(&mut self.tbuf);
        let mut args = std::mem::take(&mut self.targs);
        for ev in &events {
            let at = ev.at.0;
            if !self.trace.as_ref().is_some_and(|t| t.covers(at)) {
                continue;
            }
            args.clear();
            let (tid, name): (u32, &[u8]) = match &ev.kind {
                TraceKind::Grant {
                    vp,
                    parent,
                    child,
                    cpu,
                } => {
                    args.extend_from_slice(b"\"child\":");
                    self.push_node_name(&mut args, *child);
                    cpu_vp(&mut args, *cpu, *vp);
                    (Self::node_tid(*parent), b"\"grant\"")
                }
                TraceKind::Revoke {
                    vp,
                    parent,
                    child,
                    cpu,
                    reason,
                } => {
                    args.extend_from_slice(b"\"child\":");
                    self.push_node_name(&mut args, *child);
                    cpu_vp(&mut args, *cpu, *vp);
                    let why: &[u8] = match reason {
                        RevokeReason::Preempted => b",\"reason\":\"preempted\"",
                        RevokeReason::BudgetExhausted => b",\"reason\":\"budget exhausted\"",
                        RevokeReason::Infrastructure => b",\"reason\":\"infrastructure\"",
                    };
                    args.extend_from_slice(why);
                    (Self::node_tid(*parent), b"\"revoke\"")
                }
                TraceKind::Policy { instance, event } => {
                    let tid = instance.0 + 1;
                    match event {
                        PolicyEvent::Replenish { vp, budget } => {
                            args.extend_from_slice(b"\"vp\":");
                            push_u64(&mut args, vp.0.into());
                            args.extend_from_slice(b",\"budget_ns\":");
                            push_u64(&mut args, budget.0);
                            (tid, b"\"replenish\"")
                        }
                        PolicyEvent::BudgetExhausted { vp } => {
                            args.extend_from_slice(b"\"vp\":");
                            push_u64(&mut args, vp.0.into());
                            (tid, b"\"budget exhausted\"")
                        }
                        PolicyEvent::DeadlineMiss { vp } => {
                            args.extend_from_slice(b"\"vp\":");
                            push_u64(&mut args, vp.0.into());
                            (tid, b"\"deadline miss (policy)\"")
                        }
                        PolicyEvent::Note(text) => {
                            args.extend_from_slice(b"\"text\":");
                            json_str(&mut args, text);
                            (tid, b"\"note\"")
                        }
                    }
                }
                // Requests, releases and timer expiries are not drawn: they
                // would double the trace without showing a decision.
                _ => continue,
            };
            if let Some(t) = self.trace.as_mut() {
                t.instant(PID_SCHEDULERS, tid, name, at, &args);
            }
        }
        self.targs = args;
        self.tbuf = events;
    }

    // ----- the end --------------------------------------------------------

    fn finish(mut self) -> Result<Report, SimError> {
        let end = self.end;
        // Bring the HSI's clock to the end so running segments count in
        // received time and supplies (a zero report changes nothing else).
        self.hsi
            .add_stolen(Instant(end), CpuId(0), hsched_core::Duration::ZERO);
        for c in 0..self.cpus.len() {
            self.settle(c);
        }
        for c in 0..self.cpus.len() {
            if let Some(i) = self.cpus[c].running {
                let since = self.cpus[c].since;
                if let Some(t) = self.trace.as_mut() {
                    let name = &self.thread_json[i as usize];
                    t.slice(PID_CPUS, c as u32, name, since, end, b"");
                }
                if let Some(g) = self.gantt.as_mut() {
                    g.run(i, c as u32, since, end);
                }
            }
            if self.cpus[c].stealing > 0 {
                let since = self.cpus[c].steal_since;
                if let Some(t) = self.trace.as_mut() {
                    t.slice(PID_CPUS, STOLEN_TID + c as u32, STOLEN, since, end, b"");
                }
                if let Some(g) = self.gantt.as_mut() {
                    g.stolen(c as u32, since, end);
                }
            }
        }
        for th in self.threads.iter_mut() {
            if let Some(ws) = th.waiting_since.take() {
                th.stats.max_gap = th.stats.max_gap.max(end - ws);
            }
            if th.created.is_some() && th.exited.is_none() {
                th.workload.finish(end, &mut th.stats);
            }
        }
        let report = self.build_report();
        if let Some(t) = self.trace.take() {
            t.finish().map_err(|error| SimError::Io {
                what: "trace",
                error,
            })?;
        }
        if let Some(g) = self.gantt.take() {
            if g.full() {
                return Err(SimError::Io {
                    what: "Gantt chart",
                    error: std::io::Error::other(format!(
                        "its window holds more than {} bars and marks, more than a chart \
                         can show (the run stopped at {}); choose a shorter window (`--window`), \
                         or write a trace (`--trace`), which streams a run of any length",
                        crate::gantt::MAX_MARKS,
                        Instant(end)
                    )),
                });
            }
            let names: Vec<String> = self.threads.iter().map(|t| t.name.clone()).collect();
            g.write(&names, self.cpus.len())
                .map_err(|error| SimError::Io {
                    what: "Gantt chart",
                    error,
                })?;
        }
        // An interrupted run is not done: its bar stays where it stopped.
        if let Some(p) = self.progress.as_mut().filter(|_| !self.interrupted) {
            p(1.0);
        }
        Ok(report)
    }

    fn build_report(&mut self) -> Report {
        let dur = self.end;
        let ncpu = self.cpus.len();
        let capacity = dur as f64 * ncpu as f64;
        let frac = |x: u64| {
            if capacity > 0.0 {
                x as f64 / capacity
            } else {
                0.0
            }
        };
        // Supplies of live instances.
        let live: Vec<_> = self.hsi.instances().collect();
        for id in live {
            let supply = self.hsi.instance_supply(id).as_nanos();
            if let Some(r) = self.scheds.get_mut(id.index()) {
                r.supply = supply;
            }
        }
        let mut threads = Vec::with_capacity(self.threads.len());
        for (i, th) in self.threads.iter().enumerate() {
            let s = &th.stats;
            let scheduler = match th.id {
                Some(id) => {
                    let p = th
                        .last_parent
                        .unwrap_or_else(|| self.hsi.thread_parent(id).index());
                    self.scheds
                        .get(p)
                        .map_or_else(String::new, |r| r.name.clone())
                }
                None if self.specs[i].scheduler.is_empty() => {
                    self.h.default_scheduler.clone().unwrap_or_default()
                }
                None => self.specs[i].scheduler.clone(),
            };
            let lateness = s.lateness.summary();
            let alive = th
                .created
                .map(|c| th.exited.unwrap_or(dur).saturating_sub(c))
                .unwrap_or(0);
            let frames = th.workload.has_frames().then_some(s.jobs);
            threads.push(ThreadReport {
                name: th.name.clone(),
                scheduler,
                principal: th.principal.map(|p| self.principals[p].clone()),
                workload: th.workload.kind(),
                cpu_ns: s.cpu_ns,
                share: frac(s.cpu_ns),
                received_ns: th
                    .id
                    .map_or(0, |id| self.hsi.thread_received(id).as_nanos()),
                stolen_ns: s.stolen_ns,
                jobs: s.jobs,
                deadline_hits: s.hits,
                deadline_misses: s.misses,
                dropped: s.dropped,
                max_lateness_ns: s.lateness.max(),
                max_tardiness_ns: s.lateness.max().map(|m| m.max(0) as u64),
                mean_tardiness_ns: lateness.as_ref().map(|_| s.lateness.mean_positive()),
                lateness_ns: lateness,
                dispatch_latency_ns: s.dispatch_latency.summary(),
                max_runnable_gap_ns: s.max_gap,
                context_switches: s.switch_ins,
                preemptions: s.preemptions,
                wakeups: s.wakeups,
                frames,
                fps: frames.map(|f| {
                    if alive > 0 {
                        f as f64 * 1e9 / alive as f64
                    } else {
                        0.0
                    }
                }),
                created_ns: th.created,
                exited_ns: th.exited,
                messages_sent: self.shared.sent[i].0,
                messages_refused: self.shared.sent[i].1,
            });
        }
        let schedulers = self
            .scheds
            .iter()
            .filter(|r| !r.name.is_empty())
            .map(|r| SchedulerReport {
                name: r.name.clone(),
                policy: r.policy.clone(),
                supply_ns: r.supply,
                share: frac(r.supply),
                live: r.live,
            })
            .collect();
        let principals = self
            .principals
            .iter()
            .enumerate()
            .map(|(p, name)| {
                let mine = self.threads.iter().filter(|t| t.principal == Some(p));
                let (n, cpu) = mine.fold((0, 0u64), |(n, c), t| (n + 1, c + t.stats.cpu_ns));
                PrincipalReport {
                    name: name.clone(),
                    threads: n,
                    cpu_ns: cpu,
                    share: frac(cpu),
                }
            })
            .collect();
        let per_cpu: Vec<CpuReport> = self.cpus.iter().map(|c| c.stats.clone()).collect();
        let machine = MachineReport {
            busy_ns: per_cpu.iter().map(|c| c.busy_ns).sum(),
            idle_ns: per_cpu.iter().map(|c| c.idle_ns).sum(),
            stolen_ns: per_cpu.iter().map(|c| c.stolen_ns).sum(),
            context_switch_ns: per_cpu.iter().map(|c| c.context_switch_ns).sum(),
            context_switches: per_cpu.iter().map(|c| c.context_switches).sum(),
            per_cpu,
        };
        let queues = self
            .shared
            .queues
            .iter()
            .map(|q| QueueReport {
                name: q.name.clone(),
                size: q.size,
                fill: q.fill,
                mean_fill: q.mean_fill(dur) / q.size as f64,
                min_fill: q.min,
                max_fill: q.max,
                pushed: q.pushed,
                popped: q.popped,
            })
            .collect();
        Report {
            hsched_report: SCHEMA_VERSION,
            duration_ns: dur,
            cpus: ncpu,
            seed: self.seed,
            events: self.counts.total(),
            event_counts: self.counts.clone(),
            threads,
            schedulers,
            principals,
            machine,
            queues,
            requests: Vec::new(),
            unloaded: self.unloads.reports.clone(),
            interrupted: self.interrupted,
            jobs: self.job_records(),
        }
    }
}

impl Engine<'_> {
    /// Every thread's per-job records, in file order (empty when they are
    /// not kept).
    fn job_records(&self) -> Vec<JobRecord> {
        let n = (self.threads.iter())
            .filter_map(|t| t.stats.log.as_ref())
            .map(|l| l.rows.len())
            .sum();
        let mut jobs = Vec::with_capacity(n);
        for th in &self.threads {
            let Some(log) = th.stats.log.as_ref() else {
                continue;
            };
            let name: Arc<str> = Arc::from(th.name.as_str());
            for (k, row) in log.rows.iter().enumerate() {
                jobs.push(JobRecord::new(&name, k as u64, row));
            }
        }
        jobs
    }
}

/// Processors up to which [`Completions`] scans its array rather than
/// keeping a tree: a scan of a few words costs less than a tree's upkeep on
/// every change.
const SCAN_MAX: usize = 8;

/// When each processor's work is done, and the earliest completion, lowest
/// processor first on ties.
///
/// The loop asks for the earliest completion on every turn, while an input
/// changes one or two processors, so on a large machine a scan of every
/// processor per turn would dominate the engine's own work. Past
/// [`SCAN_MAX`] processors a tournament tree keeps the earliest: a change
/// replays the matches on the way from its leaf to the root (log₂ of the
/// processor count), a query reads the root. Ties go to the left (lower)
/// processor at every match, so the winner is exactly the first smallest
/// entry that a scan finds.
struct Completions {
    /// Per processor; past [`SCAN_MAX`] processors, padded with `NEVER` to
    /// `win.len()`, a power of two, so that a length above `SCAN_MAX` is
    /// what says there is a tree (tested where the length is read anyway).
    done: Vec<u64>,
    /// Processors in use.
    n: usize,
    /// Node `i` (from 1) holds the processor that wins its subtree; its
    /// children are nodes `2i` and `2i + 1`, and index `k ≥ win.len()` is
    /// processor `k − win.len()`. Empty when scanning.
    win: Vec<u32>,
}

impl Completions {
    fn new(n: usize) -> Self {
        if n <= SCAN_MAX {
            return Completions {
                done: vec![NEVER; n],
                n,
                win: Vec::new(),
            };
        }
        let size = n.next_power_of_two();
        // Every entry is `NEVER`: each match goes to its left side.
        let mut win = vec![0u32; size];
        for i in (1..size).rev() {
            let l = 2 * i;
            win[i] = if l >= size { (l - size) as u32 } else { win[l] };
        }
        Completions {
            done: vec![NEVER; size],
            n,
            win,
        }
    }

    /// The earliest completion and its processor; `(NEVER, 0)` when none.
    #[inline(always)]
    fn earliest(&self) -> (u64, usize) {
        match *self.done {
            // The common small machines first, written out as `earliest`
            // has them: calling it behind a length test cost the
            // 2-processor benchmark 2 M instructions (0.6 %).
            [a] => (a, 0),
            [a, b] => {
                if b < a {
                    (b, 1)
                } else {
                    (a, 0)
                }
            }
            ref all if all.len() <= SCAN_MAX => earliest(all),
            _ => {
                let c = self.win[1] as usize;
                (self.done[c], c)
            }
        }
    }

    /// Processor `c`'s work is done at `at`.
    #[inline(always)]
    fn set(&mut self, c: usize, at: u64) {
        debug_assert!(c < self.n);
        self.done[c] = at;
        if self.done.len() > SCAN_MAX {
            self.replay(c);
        }
    }

    /// Replays the matches from processor `c`'s leaf to the root (out of
    /// line: small machines never get here, and the loop stays compact).
    #[inline(never)]
    fn replay(&mut self, c: usize) {
        let size = self.win.len();
        let mut i = (c + size) >> 1;
        while i >= 1 {
            let (l, r) = (2 * i, 2 * i + 1);
            let (l, r) = if l >= size {
                (l - size, r - size)
            } else {
                (self.win[l] as usize, self.win[r] as usize)
            };
            // The left side wins ties: it holds the lower processors.
            let w = if self.done[r] < self.done[l] { r } else { l } as u32;
            let old = std::mem::replace(&mut self.win[i], w);
            // The same winner, and not `c`, whose time changed: every match
            // above sees the same sides as before.
            if old == w && w as usize != c {
                break;
            }
            i >>= 1;
        }
        debug_assert_eq!(self.earliest(), earliest(&self.done[..self.n]));
    }
}

/// The smallest of `done` and its first index; `(NEVER, 0)` when all are
/// `NEVER` or there are none.
#[inline(always)]
fn earliest(done: &[u64]) -> (u64, usize) {
    match *done {
        // The common machines, without a loop.
        [a] => (a, 0),
        [a, b] => {
            if b < a {
                (b, 1)
            } else {
                (a, 0)
            }
        }
        ref all => {
            let mut best = (NEVER, 0);
            for (c, &at) in all.iter().enumerate() {
                if at < best.0 {
                    best = (at, c);
                }
            }
            best
        }
    }
}

/// What an engine step returns; the error is boxed so that the common
/// `Ok` travels in a register.
type Step = Result<(), Box<SimError>>;

/// The HSI input being handled, for error messages.
#[derive(Clone, Copy)]
enum Input {
    Thread(usize, &'static str),
    Timers,
    Op(usize),
}

#[derive(Clone, Copy)]
enum Callback {
    Start,
    Done,
    Timer,
    /// A queue the thread waits on changed.
    Poke,
}

/// An operation in words, for errors.
pub(crate) fn describe_op(op: &OpSpec) -> String {
    match op {
        OpSpec::BeginReservation {
            thread,
            scheduler,
            params,
        } => {
            format!("begin_reservation of '{thread}' under '{scheduler}' ({params})")
        }
        OpSpec::EndReservation { thread } => format!("end_reservation of '{thread}'"),
        OpSpec::SetParams { thread, params } => format!("set_params of '{thread}' ({params})"),
        OpSpec::MoveThread { thread, to, params } => {
            format!("move of '{thread}' to '{to}' ({params})")
        }
        OpSpec::CreateScheduler(s) => format!("creation of scheduler '{}'", s.name),
        OpSpec::DestroyScheduler { name } => format!("destruction of scheduler '{name}'"),
        OpSpec::SetDefault { name, .. } => format!("set_default to '{name}'"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;
    use std::rc::Rc;

    #[derive(Clone, Default)]
    struct Buf(Rc<RefCell<Vec<u8>>>);

    impl std::io::Write for Buf {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.borrow_mut().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// Periodic releases, re-armed timers, exits with a timer pending and
    /// stolen time (which makes every stop of the clock visible).
    const H: &str = r#"
[machine]
cpus = 2
context_switch = "10us"
[[machine.stolen]]
cpu = 0
every = "3ms"
amount = "250us"

[[scheduler]]
name = "fp"
policy = "fp"
[[scheduler]]
name = "rez"
policy = "rez"
parent = "fp"
params = { priority = 2 }
[[scheduler]]
name = "ts"
policy = "ts"
parent = "fp"
params = { priority = 1 }

[[thread]]
name = "rt"
count = 3
scheduler = "rez"
params = { amount = "2ms", period = "10ms" }
workload = { kind = "periodic", period = "10ms", exec = "1500us", jitter = "2ms" }
[[thread]]
name = "ui"
count = 4
scheduler = "ts"
workload = { kind = "interactive", think = "5ms", burst = "1ms" }
exit = "700ms"
[[thread]]
name = "hog"
scheduler = "ts"
workload = { kind = "cpu-bound" }
"#;

    /// The report and trace of a 1 s run, with sequence numbers renumbered
    /// past `limit`.
    fn run(limit: Option<u64>) -> (String, Vec<u8>) {
        let h = hsched_config::parse_str(H, "renumber.toml").unwrap();
        let policies = hsched_policies::registry();
        let hsi = hsched_config::build_hsi_with(&h, policies).unwrap();
        let buf = Buf::default();
        let setup = Setup {
            end: 1_000_000_000,
            seed: 4,
            check_protocol: true,
            source: None,
            trace: Some(TraceWriter::new(Box::new(buf.clone()), (0, u64::MAX))),
            gantt: None,
            progress: None,
            stop: None,
            job_records: false,
        };
        let mut e = Engine::new(&h, policies, hsi, h.threads.clone(), setup).unwrap();
        if let Some(l) = limit {
            e.queue.set_limit(l);
        }
        let report = e.run().unwrap();
        let trace = buf.0.borrow().clone();
        (report.to_json(), trace)
    }

    #[test]
    fn earliest_is_the_first_smallest() {
        let naive = |d: &[u64]| {
            let mut best = (NEVER, 0);
            for (c, &at) in d.iter().enumerate() {
                if at < best.0 {
                    best = (at, c);
                }
            }
            best
        };
        let vals = [0, 5, 7, NEVER];
        for n in 0..=4u32 {
            for code in 0..vals.len().pow(n) {
                let d: Vec<u64> = (0..n)
                    .map(|k| vals[code / vals.len().pow(k) % vals.len()])
                    .collect();
                assert_eq!(earliest(&d), naive(&d), "{d:?}");
            }
        }
        assert_eq!(earliest(&[NEVER, NEVER]), (NEVER, 0));
        assert_eq!(earliest(&[5, 5]), (5, 0));
        assert_eq!(earliest(&[7, 5, 5]), (5, 1));
    }

    /// The tree finds the first smallest completion, as a scan does, after
    /// every change, at sizes on both sides of the scan limit and not powers
    /// of two.
    #[test]
    fn completions_find_the_first_smallest_at_every_size() {
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        let mut next = |m: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % m
        };
        for n in [1, 2, 3, SCAN_MAX, SCAN_MAX + 1, 13, 64, 100] {
            let mut c = Completions::new(n);
            let mut plain = vec![NEVER; n];
            assert_eq!(c.earliest(), (NEVER, 0));
            for _ in 0..2_000 {
                let k = next(n as u64) as usize;
                // Few distinct values, so ties are common.
                let at = match next(5) {
                    0 => NEVER,
                    v => v * 10,
                };
                c.set(k, at);
                plain[k] = at;
                assert_eq!(c.earliest(), earliest(&plain), "n {n}: {plain:?}");
            }
        }
    }

    #[test]
    fn renumbering_sequence_numbers_changes_nothing() {
        let (report, trace) = run(None);
        assert!(report.contains("\"add_stolen\": "), "{report}");
        assert!(!report.contains("\"add_stolen\": 0,"), "{report}");
        // Renumber every 20, and every 3 events (more often than there are
        // events queued, so nearly every push renumbers).
        for limit in [20, 3] {
            let (r, t) = run(Some(limit));
            assert_eq!(r, report, "limit {limit}");
            assert!(t == trace, "limit {limit}: traces differ");
        }
    }
}
