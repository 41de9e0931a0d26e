//! Threads as programmable state machines (Regehr 2001, §9.4.1).
//!
//! A workload only decides what its thread wants next; the engine turns
//! that into HSI inputs. Three callbacks drive it: [`Workload::start`] when
//! the thread is created, [`Workload::done`] when the CPU work it asked for
//! is finished, and [`Workload::timer`] when the one timer it may arm
//! expires. Each returns a [`Next`]. A workload never sees the scheduler.
//!
//! Jobs, deadlines and lateness are recorded here, where the model knows
//! what a job is; docs/metrics.md defines them for every model.
//!
//! # Shared state and messages
//! Pipeline stages share bounded queues ([`Shared::queues`]). A stage that
//! blocks on an empty input or a full output registers as a waiter; the
//! stage that changes the queue *pokes* the waiters ([`Shared::pokes`]),
//! and the engine then calls [`Workload::poke`] on each, in the order they
//! started waiting, after the caller's own request is applied. A callback
//! may also queue messages to its own thread's scheduler
//! ([`Shared::msgs`]); the engine delivers them with `Hsi::thread_msg`, in
//! order, *before* applying the callback's [`Next`] (so a `coop_poll` is
//! seen before the block that follows it). A message the scheduler refuses
//! (a policy that does not understand it) is counted, not fatal.

use crate::metrics::{JobLog, JobRow, ThreadStats};
use crate::player::PlayerWorkload;
use crate::rng::{to_u64, Rng};
use hsched_config::{
    timer_turn, MissPolicy, Program, QueueSpec, StageSpec, Step, VideoMode, VideoSpec,
    WorkloadSpec, MPEG_REL_STDDEV,
};
use hsched_core::{Msg, ParamValue, Params};

/// What the thread wants after a callback.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    /// Be runnable and consume this much CPU (nanoseconds, > 0; `u64::MAX`
    /// runs forever). Replaces whatever work was left.
    Run(u64),
    /// Block until the armed timer says otherwise.
    Block,
    /// Nothing changes (e.g. a release while the previous job still runs).
    Same,
    /// The thread exits.
    Exit,
    /// The model went round its loop too often without time passing.
    Stuck,
}

/// The world a workload callback sees.
pub struct WCtx<'a> {
    /// The current time.
    pub now: u64,
    /// The thread's own random stream.
    pub rng: &'a mut Rng,
    /// The thread's statistics.
    pub stats: &'a mut ThreadStats,
    /// Set to arm (or re-arm) the thread's timer at this time.
    pub arm: Option<u64>,
    /// Deadline misses recorded by this callback (for traces).
    pub missed: u64,
    /// The calling thread's index.
    pub me: u32,
    /// Queues, pokes and outgoing messages.
    pub shared: &'a mut Shared,
    /// The thread's VP parameters as its scheduler last wrote them (given
    /// only to models that ask, [`Workload::reads_params`]).
    pub params: Option<&'a Params>,
}

/// A bounded queue of items between pipeline stages, with its statistics.
#[derive(Clone, Debug)]
pub struct Queue {
    /// Name from the hierarchy file.
    pub name: String,
    /// Capacity, items.
    pub size: u64,
    /// Items in it now.
    pub fill: u64,
    /// Items put in and taken out so far.
    pub pushed: u64,
    /// Items taken out so far.
    pub popped: u64,
    /// Smallest and largest fill seen.
    pub min: u64,
    /// Largest fill seen.
    pub max: u64,
    /// ∫ fill dt (item·ns), up to `since`.
    area: u128,
    since: u64,
    /// Threads waiting for an item, and for space.
    readers: Vec<u32>,
    writers: Vec<u32>,
}

impl Queue {
    fn new(q: &QueueSpec) -> Self {
        Queue {
            name: q.name.clone(),
            size: q.size,
            fill: q.initial,
            pushed: 0,
            popped: 0,
            min: q.initial,
            max: q.initial,
            area: 0,
            since: 0,
            readers: Vec::new(),
            writers: Vec::new(),
        }
    }

    fn settle(&mut self, now: u64) {
        self.area += self.fill as u128 * now.saturating_sub(self.since) as u128;
        self.since = self.since.max(now);
    }

    /// Time-weighted mean fill over [0, `now`], items.
    pub fn mean_fill(&self, now: u64) -> f64 {
        let area = self.area + self.fill as u128 * now.saturating_sub(self.since) as u128;
        if now == 0 {
            self.fill as f64
        } else {
            area as f64 / now as f64
        }
    }
}

/// What the workloads of one run share (see the module docs).
#[derive(Clone, Debug, Default)]
pub struct Shared {
    /// The pipeline queues, in file order.
    pub queues: Vec<Queue>,
    /// Threads whose waits may be over, in order.
    pub pokes: Vec<u32>,
    /// Messages from the current callback to its thread's scheduler.
    pub msgs: Vec<Msg>,
    /// Per thread: messages delivered and refused.
    pub sent: Vec<(u64, u64)>,
}

impl Shared {
    /// State for `threads` threads and the queues of a hierarchy file.
    pub fn new(queues: &[QueueSpec], threads: usize) -> Self {
        Shared {
            queues: queues.iter().map(Queue::new).collect(),
            pokes: Vec::new(),
            msgs: Vec::new(),
            sent: vec![(0, 0); threads],
        }
    }

    fn pop(&mut self, k: usize, now: u64) -> bool {
        let q = &mut self.queues[k];
        if q.fill == 0 {
            return false;
        }
        q.settle(now);
        q.fill -= 1;
        q.popped += 1;
        q.min = q.min.min(q.fill);
        self.pokes.append(&mut q.writers);
        true
    }

    fn push(&mut self, k: usize, now: u64) -> bool {
        let q = &mut self.queues[k];
        if q.fill >= q.size {
            return false;
        }
        q.settle(now);
        q.fill += 1;
        q.pushed += 1;
        q.max = q.max.max(q.fill);
        self.pokes.append(&mut q.readers);
        true
    }

    fn wait(list: &mut Vec<u32>, me: u32) {
        if !list.contains(&me) {
            list.push(me);
        }
    }
}

impl WCtx<'_> {
    pub(crate) fn arm(&mut self, at: u64) {
        self.arm = Some(at.max(self.now));
    }

    pub(crate) fn job_with_deadline(&mut self, deadline: u64) {
        let l = self.now as i128 - deadline as i128;
        let l = l.clamp(i64::MIN as i128, i64::MAX as i128) as i64;
        self.stats.job_with_deadline(l);
        if l > 0 {
            self.missed += 1;
        }
    }

    /// [`job_with_deadline`](Self::job_with_deadline) for a job released
    /// at `release`, with its per-job record when they are kept.
    #[inline]
    pub(crate) fn job_done(&mut self, release: u64, deadline: u64) {
        self.job_with_deadline(deadline);
        if let Some(log) = self.stats.log.as_deref_mut() {
            log.rows.push(JobRow {
                release,
                deadline,
                completion: Some(self.now),
                missed: self.now > deadline,
            });
        }
    }

    /// Records a job abandoned at its deadline (a missed job with no
    /// completion), when per-job records are kept.
    fn job_dropped(&mut self, release: u64, deadline: u64) {
        if let Some(log) = self.stats.log.as_deref_mut() {
            log.rows.push(JobRow {
                release,
                deadline,
                completion: None,
                missed: true,
            });
        }
    }
}

/// A sequence of arrival times `a_{k+1} = a_k + U[min, max]`. Two copies
/// with the same seed let a sporadic task know the arrival time of its
/// oldest pending job without storing the backlog.
#[derive(Clone, Debug)]
struct Arrivals {
    rng: Rng,
    last: u64,
    min: u64,
    max: u64,
}

impl Arrivals {
    /// The next arrival (inlined: it is on the path of every sporadic
    /// release and completion).
    #[inline]
    fn next(&mut self) -> u64 {
        self.last = self
            .last
            .saturating_add(self.rng.between(self.min, self.max));
        self.last
    }
}

/// The state of one thread's workload model.
#[derive(Clone, Debug)]
pub enum Workload {
    /// Always runnable.
    CpuBound,
    /// Periodic jobs with release jitter.
    Periodic {
        /// Release period.
        period: u64,
        /// CPU per job.
        exec: u64,
        /// Relative deadline.
        deadline: u64,
        /// Maximum release jitter.
        jitter: u64,
        /// First nominal release, relative to creation.
        offset: u64,
        /// Absolute time of nominal release 0.
        origin: u64,
        /// Jobs released so far.
        released: u64,
        /// Jobs finished so far.
        done: u64,
    },
    /// Sporadic jobs.
    Sporadic {
        /// CPU per job.
        exec: u64,
        /// Relative deadline.
        deadline: u64,
        /// Arrival generator for releases.
        releases: Box<ArrivalPair>,
        /// Jobs released so far.
        released: u64,
        /// Jobs finished so far.
        done: u64,
        /// Absolute deadline of the job in progress.
        current_deadline: u64,
    },
    /// Think (blocked) then burst, both exponential.
    Interactive {
        /// Mean think time.
        think: u64,
        /// Mean burst.
        burst: u64,
    },
    /// Compute, then wait for I/O, repeatedly.
    BlockingIo {
        /// CPU per round.
        compute: u64,
        /// I/O wait.
        io: u64,
    },
    /// The `srtsim` of Banachowski 2002.
    Video(Box<Video>),
    /// The self-monitoring renderer of Regehr 2001, §10.5.2.
    Renderer {
        /// CPU per frame.
        work: u64,
        /// Longest acceptable gap between frame completions.
        miss_gap: u64,
        /// Last frame completion (creation time at first).
        last: u64,
    },
    /// A program of steps (rt-app tasks).
    Program(Box<Prog>),
    /// A pipeline stage (Steere et al. 1998, §4).
    Stage(Box<Stage>),
    /// The adaptive video player of Sinha 2007.
    Player(Box<PlayerWorkload>),
}

/// What a stage is doing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum StageState {
    /// Spending CPU on an item.
    Working,
    /// Blocked on an empty input queue.
    WaitInput,
    /// Blocked on a full output queue, holding a finished item.
    WaitOutput,
    /// A paced source waiting for its next item.
    WaitPace,
}

/// Pipeline stage state (Steere et al. 1998, §4, Figs 6 and 7).
#[derive(Clone, Debug)]
pub struct Stage {
    input: Option<usize>,
    output: Option<usize>,
    cost: u64,
    rate: Option<f64>,
    /// (start, end, factor) in ns.
    pulses: Vec<(u64, u64, f64)>,
    report: Option<u64>,
    state: StageState,
    next_report: u64,
    /// When a paced source's next item is ready.
    next_item: u64,
    /// The time the thread's timer is armed for (`u64::MAX`: none).
    armed: u64,
}

impl Stage {
    /// Product of the factors of the pulses active at `now`.
    fn factor(&self, now: u64) -> f64 {
        self.pulses
            .iter()
            .filter(|p| now >= p.0 && now < p.1)
            .map(|p| p.2)
            .product()
    }

    /// Begins the next item if it can, else waits.
    fn step(&mut self, cx: &mut WCtx<'_>) -> Next {
        let now = cx.now;
        if let Some(k) = self.input {
            if !cx.shared.pop(k, now) {
                Shared::wait(&mut cx.shared.queues[k].readers, cx.me);
                self.state = StageState::WaitInput;
                return Next::Block;
            }
        } else if let Some(rate) = self.rate {
            if now < self.next_item {
                self.state = StageState::WaitPace;
                return Next::Block;
            }
            // Items are offered on a fixed grid: a source that fell behind
            // catches up (its data waited for it).
            let gap = 1e9 / (rate * self.factor(now));
            self.next_item = self.next_item.saturating_add(to_u64(gap).max(1));
        }
        self.state = StageState::Working;
        let c = if self.rate.is_none() && self.input.is_none() {
            to_u64(self.cost as f64 / self.factor(now)).max(1)
        } else {
            self.cost
        };
        Next::Run(c)
    }

    /// The item in hand is finished (or waiting for space): deliver it.
    fn deliver(&mut self, cx: &mut WCtx<'_>) -> Next {
        if let Some(k) = self.output {
            if !cx.shared.push(k, cx.now) {
                Shared::wait(&mut cx.shared.queues[k].writers, cx.me);
                self.state = StageState::WaitOutput;
                return Next::Block;
            }
        }
        cx.stats.job();
        self.step(cx)
    }

    /// Sends the progress metrics of Steere et al. 1998, §3.2 for both queues.
    fn send_progress(&self, cx: &mut WCtx<'_>) {
        for (k, role) in [(self.input, "consumer"), (self.output, "producer")] {
            let Some(k) = k else { continue };
            let q = &cx.shared.queues[k];
            let params = Params::new()
                .with("queue", ParamValue::Str(q.name.clone()))
                .with("fill", ParamValue::Float(q.fill as f64))
                .with("size", ParamValue::Float(q.size as f64))
                .with("role", ParamValue::Str(role.into()));
            cx.shared.msgs.push(Msg::App {
                kind: "progress".into(),
                params,
            });
        }
    }

    /// Reports if due, then re-arms the timer for the next report or item.
    fn timers(&mut self, cx: &mut WCtx<'_>) {
        if let Some(r) = self.report {
            if cx.now >= self.next_report {
                self.send_progress(cx);
                self.next_report = cx.now.saturating_add(r);
            }
        }
        let mut at = if self.report.is_some() {
            self.next_report
        } else {
            u64::MAX
        };
        if self.state == StageState::WaitPace {
            at = at.min(self.next_item);
        }
        if at != self.armed && at != u64::MAX {
            self.armed = at;
            cx.arm(at);
        }
    }
}

/// Releases and deadlines of a sporadic task, drawn from one sequence.
#[derive(Clone, Debug)]
pub struct ArrivalPair {
    release: Arrivals,
    due: Arrivals,
}

/// Frame types of an MPEG group of pictures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameType {
    /// Intra-coded.
    I,
    /// Predicted.
    P,
    /// Bidirectional.
    B,
}

/// `srtsim` state (Banachowski 2002, §2.2).
#[derive(Clone, Debug)]
pub struct Video {
    period: u64,
    constant: Option<u64>,
    /// Mean CPU of I, P and B frames.
    means: [u64; 3],
    gop: Vec<FrameType>,
    on_miss: MissPolicy,
    /// Frames begun so far (the GOP position).
    index: u64,
    /// Deadline of the frame in progress, or start of the next period.
    deadline: u64,
    /// Working on a frame (else sleeping until `deadline`).
    busy: bool,
}

impl Video {
    /// The frame type of frame `k` (MPEG mode).
    pub fn frame_type(&self, k: u64) -> Option<FrameType> {
        (!self.gop.is_empty()).then(|| self.gop[(k % self.gop.len() as u64) as usize])
    }

    /// CPU needed by frame `k`: constant, or the type's mean with normal
    /// noise of 10 % (Banachowski 2002, Table 2.4), at least 1 ns.
    fn cost(&self, k: u64, rng: &mut Rng) -> u64 {
        if let Some(c) = self.constant {
            return c;
        }
        let mean = match self.frame_type(k) {
            Some(FrameType::I) => self.means[0],
            Some(FrameType::P) => self.means[1],
            _ => self.means[2],
        };
        let v = mean as f64 * (1.0 + MPEG_REL_STDDEV * rng.normal());
        to_u64(v).max(1)
    }

    /// Starts frame `index` at `now`.
    fn begin(&mut self, cx: &mut WCtx<'_>) -> Next {
        self.busy = true;
        self.deadline = cx.now.saturating_add(self.period);
        let c = self.cost(self.index, cx.rng);
        self.index += 1;
        if self.on_miss == MissPolicy::Skip {
            cx.arm(self.deadline);
        }
        Next::Run(c)
    }
}

/// Program state.
#[derive(Clone, Debug)]
pub struct Prog {
    steps: Vec<Step>,
    loops: Option<u64>,
    delay: u64,
    pc: usize,
    iterations: u64,
    has_timer: bool,
    /// Timer origin (start after the delay).
    origin: u64,
    /// What the next timer step adds its period to, once a timer step
    /// has run ([`timer_turn`]'s `base`).
    timer_base: Option<u64>,
    started: bool,
    /// In a `Runtime` step: its end is the armed timer.
    in_runtime: bool,
}

/// Most loop turns a program may make at one instant.
const MAX_TURNS_AT_ONE_INSTANT: u64 = 100_000;

impl Prog {
    /// The deadline of the job in progress: the expiry its next `timer`
    /// step will check, once the program has started and has timers.
    fn pending_deadline(&self) -> Option<u64> {
        if !self.started || !self.has_timer {
            return None;
        }
        let (passed, next) = self.steps.split_at(self.pc.min(self.steps.len()));
        let period = next.iter().chain(passed).find_map(|s| match s {
            Step::Timer { period, .. } => Some(period.as_nanos()),
            _ => None,
        })?;
        Some(
            self.timer_base
                .unwrap_or(self.origin)
                .saturating_add(period),
        )
    }

    /// Runs steps until one takes time.
    fn advance(&mut self, cx: &mut WCtx<'_>) -> Next {
        let mut turns = 0;
        loop {
            if self.pc >= self.steps.len() {
                self.pc = 0;
                self.iterations += 1;
                if !self.has_timer {
                    cx.stats.job();
                }
                if self.loops.is_some_and(|n| self.iterations >= n) {
                    return Next::Exit;
                }
                turns += 1;
                if turns > MAX_TURNS_AT_ONE_INSTANT {
                    return Next::Stuck;
                }
            }
            let step = self.steps[self.pc].clone();
            self.pc += 1;
            match step {
                Step::Run(d) if d.as_nanos() > 0 => return Next::Run(d.as_nanos()),
                Step::Sleep(d) if d.as_nanos() > 0 => {
                    cx.arm(cx.now.saturating_add(d.as_nanos()));
                    return Next::Block;
                }
                Step::Runtime(d) if d.as_nanos() > 0 => {
                    // Busy until wall time has passed, CPU or not.
                    self.in_runtime = true;
                    cx.arm(cx.now.saturating_add(d.as_nanos()));
                    return Next::Run(u64::MAX);
                }
                Step::Run(_) | Step::Sleep(_) | Step::Runtime(_) => {}
                Step::Timer { period, absolute } => {
                    let t = timer_turn(
                        self.timer_base,
                        self.origin,
                        period.as_nanos(),
                        absolute,
                        cx.now,
                    );
                    cx.job_done(self.timer_base.unwrap_or(self.origin), t.expiry);
                    self.timer_base = Some(t.base);
                    if t.wait {
                        cx.arm(t.expiry);
                        return Next::Block;
                    }
                }
            }
        }
    }
}

fn positive(v: u64, what: &str) -> Result<u64, String> {
    if v == 0 {
        Err(format!("{what} must be positive"))
    } else {
        Ok(v)
    }
}

impl Workload {
    /// Builds the model of `spec` for a thread whose random stream is
    /// `rng`.
    ///
    /// # Errors
    /// Parameters that would make the model meaningless or stall time
    /// (a zero period, no work, min > max, an unknown frame type).
    pub fn new(spec: &WorkloadSpec, rng: &Rng) -> Result<Workload, String> {
        Ok(match spec {
            WorkloadSpec::CpuBound => Workload::CpuBound,
            WorkloadSpec::Periodic {
                period,
                exec,
                deadline,
                jitter,
                offset,
            } => Workload::Periodic {
                period: positive(period.as_nanos(), "periodic: `period`")?,
                exec: positive(exec.as_nanos(), "periodic: `exec`")?,
                deadline: deadline.as_nanos(),
                jitter: jitter.as_nanos(),
                offset: offset.as_nanos(),
                origin: 0,
                released: 0,
                done: 0,
            },
            WorkloadSpec::Sporadic {
                min_interarrival,
                max_interarrival,
                exec,
                deadline,
            } => {
                let min = positive(min_interarrival.as_nanos(), "sporadic: `min_interarrival`")?;
                let max = max_interarrival.as_nanos();
                if max < min {
                    return Err(format!("sporadic: `max_interarrival` ({max_interarrival}) is below `min_interarrival` ({min_interarrival})"));
                }
                let a = Arrivals {
                    rng: rng.clone(),
                    last: 0,
                    min,
                    max,
                };
                Workload::Sporadic {
                    exec: positive(exec.as_nanos(), "sporadic: `exec`")?,
                    deadline: deadline.as_nanos(),
                    releases: Box::new(ArrivalPair {
                        release: a.clone(),
                        due: a,
                    }),
                    released: 0,
                    done: 0,
                    current_deadline: 0,
                }
            }
            WorkloadSpec::Interactive { think, burst } => Workload::Interactive {
                think: think.as_nanos(),
                burst: positive(burst.as_nanos(), "interactive: `burst`")?,
            },
            WorkloadSpec::BlockingIo { compute, io } => {
                if compute.as_nanos() == 0 && io.as_nanos() == 0 {
                    return Err("io: `compute` and `io` are both zero".into());
                }
                Workload::BlockingIo {
                    compute: compute.as_nanos(),
                    io: io.as_nanos(),
                }
            }
            WorkloadSpec::Video(v) => Workload::Video(Box::new(video(v)?)),
            WorkloadSpec::FrameRenderer { work, miss_gap } => Workload::Renderer {
                work: positive(work.as_nanos(), "frame_renderer: `work`")?,
                miss_gap: positive(miss_gap.as_nanos(), "frame_renderer: `miss_gap`")?,
                last: 0,
            },
            WorkloadSpec::Program(p) => Workload::Program(Box::new(program(p)?)),
            WorkloadSpec::Stage(_) => {
                return Err("stage: the pipeline queues are not known here".into())
            }
            WorkloadSpec::Player(p) => Workload::Player(Box::new(PlayerWorkload::new(p, rng)?)),
        })
    }

    /// As [`Workload::new`], resolving a stage's queue names against
    /// `queues` (the hierarchy file's `[[queue]]` tables, in order).
    ///
    /// # Errors
    /// As [`Workload::new`], and a queue name that is not declared.
    pub fn with_queues(
        spec: &WorkloadSpec,
        rng: &Rng,
        queues: &[QueueSpec],
    ) -> Result<Workload, String> {
        let WorkloadSpec::Stage(st) = spec else {
            return Workload::new(spec, rng);
        };
        Ok(Workload::Stage(Box::new(stage(st, queues)?)))
    }

    /// Whether the model reads its VP parameters ([`WCtx::params`]).
    pub fn reads_params(&self) -> bool {
        matches!(self, Workload::Player(p) if p.cooperative())
    }

    /// Short name of the model, for reports.
    pub fn kind(&self) -> &'static str {
        match self {
            Workload::CpuBound => "cpu_bound",
            Workload::Periodic { .. } => "periodic",
            Workload::Sporadic { .. } => "sporadic",
            Workload::Interactive { .. } => "interactive",
            Workload::BlockingIo { .. } => "io",
            Workload::Video(_) => "video",
            Workload::Renderer { .. } => "frame_renderer",
            Workload::Program(_) => "program",
            Workload::Stage(_) => "stage",
            Workload::Player(_) => "player",
        }
    }

    /// Whether the model produces frames (reported as FPS).
    pub fn has_frames(&self) -> bool {
        matches!(
            self,
            Workload::Video(_) | Workload::Renderer { .. } | Workload::Player(_)
        )
    }

    /// The thread was created at `cx.now` (blocked).
    pub fn start(&mut self, cx: &mut WCtx<'_>) -> Next {
        let now = cx.now;
        match self {
            Workload::CpuBound => Next::Run(u64::MAX),
            Workload::Periodic {
                offset,
                origin,
                jitter,
                ..
            } => {
                *origin = now.saturating_add(*offset);
                let j = cx.rng.between(0, *jitter);
                cx.arm(origin.saturating_add(j));
                Next::Block
            }
            Workload::Sporadic { releases, .. } => {
                releases.release.last = now;
                releases.due.last = now;
                let a = releases.release.next();
                cx.arm(a);
                Next::Block
            }
            Workload::Interactive { think, .. } => {
                let t = cx.rng.exp(*think);
                cx.arm(now.saturating_add(t));
                Next::Block
            }
            Workload::BlockingIo { compute, io } => {
                if *compute > 0 {
                    Next::Run(*compute)
                } else {
                    cx.arm(now.saturating_add(*io));
                    Next::Block
                }
            }
            Workload::Video(v) => v.begin(cx),
            Workload::Renderer { work, last, .. } => {
                *last = now;
                Next::Run(*work)
            }
            Workload::Program(p) => {
                if p.loops == Some(0) {
                    return Next::Exit;
                }
                if p.delay > 0 {
                    cx.arm(now.saturating_add(p.delay));
                    Next::Block
                } else {
                    p.started = true;
                    p.origin = now;
                    p.advance(cx)
                }
            }
            Workload::Stage(st) => {
                st.next_report = now;
                st.next_item = now;
                let n = st.step(cx);
                st.timers(cx);
                n
            }
            Workload::Player(p) => p.start(cx),
        }
    }

    /// A queue this thread waits on changed (pipeline stages only).
    pub fn poke(&mut self, cx: &mut WCtx<'_>) -> Next {
        let Workload::Stage(st) = self else {
            return Next::Same;
        };
        let n = match st.state {
            StageState::WaitInput => st.step(cx),
            StageState::WaitOutput => st.deliver(cx),
            StageState::Working | StageState::WaitPace => Next::Same,
        };
        st.timers(cx);
        n
    }

    /// The work asked for with [`Next::Run`] is finished at `cx.now`.
    ///
    /// Inlined into the engine's loop, its one caller there: for the simple
    /// models a call and its frame cost about as much as their work.
    #[inline(always)]
    pub fn done(&mut self, cx: &mut WCtx<'_>) -> Next {
        let now = cx.now;
        match self {
            Workload::CpuBound => Next::Run(u64::MAX),
            Workload::Periodic {
                period,
                exec,
                deadline,
                origin,
                released,
                done,
                ..
            } => {
                let due = origin
                    .saturating_add(done.saturating_mul(*period))
                    .saturating_add(*deadline);
                *done += 1;
                if let Some(log) = cx.stats.log.as_deref_mut() {
                    let release = log.pending.pop_front().unwrap_or(due);
                    cx.job_done(release, due);
                } else {
                    cx.job_with_deadline(due);
                }
                if *done < *released {
                    Next::Run(*exec)
                } else {
                    Next::Block
                }
            }
            Workload::Sporadic {
                exec,
                deadline,
                releases,
                released,
                done,
                current_deadline,
            } => {
                *done += 1;
                cx.job_done(releases.due.last, *current_deadline);
                if *done < *released {
                    *current_deadline = releases.due.next().saturating_add(*deadline);
                    Next::Run(*exec)
                } else {
                    Next::Block
                }
            }
            Workload::Interactive { think, .. } => {
                cx.stats.job();
                let t = cx.rng.exp(*think);
                cx.arm(now.saturating_add(t));
                Next::Block
            }
            Workload::BlockingIo { io, .. } => {
                cx.stats.job();
                cx.arm(now.saturating_add(*io));
                Next::Block
            }
            Workload::Video(v) => {
                cx.job_done(v.deadline.saturating_sub(v.period), v.deadline);
                v.busy = false;
                if now <= v.deadline {
                    // On time: sleep until the next period begins.
                    cx.arm(v.deadline);
                    Next::Block
                } else {
                    // Late (only in Continue mode): the next period starts
                    // now, its deadline relative to this start (Banachowski 2002, §2.2.1).
                    v.begin(cx)
                }
            }
            Workload::Renderer {
                work,
                miss_gap,
                last,
            } => {
                let gap = now - *last;
                let lateness = now as i128 - (*last as i128 + *miss_gap as i128);
                let missed = if gap == 0 { 0 } else { (gap - 1) / *miss_gap };
                cx.stats.jobs += 1;
                cx.stats
                    .lateness
                    .record(lateness.clamp(i64::MIN as i128, i64::MAX as i128) as i64);
                if missed == 0 {
                    cx.stats.hits += 1;
                }
                cx.stats.misses += missed;
                cx.missed += missed;
                *last = now;
                Next::Run(*work)
            }
            Workload::Program(p) => p.advance(cx),
            Workload::Stage(st) => {
                let n = st.deliver(cx);
                st.timers(cx);
                n
            }
            Workload::Player(p) => p.done(cx),
        }
    }

    /// The armed timer expired at `cx.now`.
    ///
    /// Inlined into the engine's loop, as [`done`](Self::done).
    #[inline(always)]
    pub fn timer(&mut self, cx: &mut WCtx<'_>) -> Next {
        let now = cx.now;
        match self {
            Workload::CpuBound | Workload::Renderer { .. } => Next::Same,
            Workload::Periodic {
                period,
                exec,
                jitter,
                origin,
                released,
                done,
                ..
            } => {
                let idle = *done == *released;
                *released += 1;
                if let Some(log) = cx.stats.log.as_deref_mut() {
                    log.pending.push_back(now);
                }
                let nominal = origin.saturating_add(released.saturating_mul(*period));
                let j = cx.rng.between(0, *jitter);
                cx.arm(nominal.saturating_add(j));
                if idle {
                    Next::Run(*exec)
                } else {
                    Next::Same
                }
            }
            Workload::Sporadic {
                exec,
                deadline,
                releases,
                released,
                done,
                current_deadline,
            } => {
                let idle = *done == *released;
                *released += 1;
                let a = releases.release.next();
                cx.arm(a);
                if idle {
                    *current_deadline = releases.due.next().saturating_add(*deadline);
                    Next::Run(*exec)
                } else {
                    Next::Same
                }
            }
            Workload::Interactive { burst, .. } => Next::Run(cx.rng.exp(*burst).max(1)),
            Workload::BlockingIo { compute, io } => {
                if *compute > 0 {
                    Next::Run(*compute)
                } else {
                    // Nothing to compute: each I/O completion is a round.
                    cx.stats.job();
                    cx.arm(now.saturating_add(*io));
                    Next::Same
                }
            }
            Workload::Video(v) => {
                if v.busy {
                    // Skip mode: the deadline passed with the frame unfinished.
                    cx.stats.misses += 1;
                    cx.stats.dropped += 1;
                    cx.missed += 1;
                    cx.job_dropped(v.deadline.saturating_sub(v.period), v.deadline);
                }
                v.begin(cx)
            }
            Workload::Program(p) => {
                if !p.started {
                    p.started = true;
                    p.origin = now;
                }
                p.in_runtime = false;
                p.advance(cx)
            }
            Workload::Stage(st) => {
                st.armed = u64::MAX;
                let n = if st.state == StageState::WaitPace && now >= st.next_item {
                    st.step(cx)
                } else {
                    Next::Same
                };
                st.timers(cx);
                n
            }
            Workload::Player(p) => p.timer(cx),
        }
    }

    /// The run ends, or the thread is made to exit, at `end`: a job still
    /// unfinished then whose deadline has passed is a miss (a starved
    /// thread must not look punctual). It has no finish time, so no
    /// lateness sample.
    ///
    /// With per-job records, each job released and not finished by `end`
    /// gets its row then: no completion, missed when its deadline is
    /// before `end` (the jobs the count above adds).
    pub fn finish(&mut self, end: u64, stats: &mut ThreadStats) {
        if let Some(log) = stats.log.as_deref_mut() {
            self.log_unfinished(end, log);
        }
        stats.misses += match self {
            Workload::Renderer { miss_gap, last, .. } if end > *last => {
                (end - *last - 1) / *miss_gap
            }
            Workload::Periodic {
                period,
                deadline,
                origin,
                released,
                done,
                ..
            } => {
                // Job k is due at origin + k·period + deadline, so the jobs
                // due before `end` are those with k < ⌈x / period⌉.
                let x = end.saturating_sub(origin.saturating_add(*deadline));
                (*released).min(x.div_ceil(*period)).saturating_sub(*done)
            }
            Workload::Sporadic {
                deadline,
                releases,
                released,
                done,
                current_deadline,
                ..
            } if *done < *released => {
                // The job in progress, then the backlog in arrival order
                // (their deadlines only grow).
                let mut due = releases.due.clone();
                let mut d = *current_deadline;
                let mut n = 0;
                while d < end {
                    n += 1;
                    if *done + n == *released {
                        break;
                    }
                    d = due.next().saturating_add(*deadline);
                }
                n
            }
            Workload::Video(v) if v.busy && v.deadline < end => 1,
            Workload::Program(p) => u64::from(p.pending_deadline().is_some_and(|d| d < end)),
            _ => 0,
        };
    }
}

impl Workload {
    /// The rows of the jobs released and not finished at `end`, in
    /// release order (see [`Workload::finish`]).
    fn log_unfinished(&self, end: u64, log: &mut JobLog) {
        let pending = std::mem::take(&mut log.pending);
        // A job released at `end` or later (a program waiting for its
        // next period) is not one of the run's.
        let mut row = |release: u64, deadline: u64| {
            if release < end {
                log.rows.push(JobRow {
                    release,
                    deadline,
                    completion: None,
                    missed: deadline < end,
                });
            }
        };
        match self {
            Workload::Periodic {
                period,
                deadline,
                origin,
                done,
                ..
            } => {
                for (k, release) in (*done..).zip(pending) {
                    let due = origin
                        .saturating_add(k.saturating_mul(*period))
                        .saturating_add(*deadline);
                    row(release, due);
                }
            }
            Workload::Sporadic {
                deadline,
                releases,
                released,
                done,
                current_deadline,
                ..
            } if *done < *released => {
                row(releases.due.last, *current_deadline);
                let mut due = releases.due.clone();
                for _ in *done + 1..*released {
                    let a = due.next();
                    row(a, a.saturating_add(*deadline));
                }
            }
            Workload::Video(v) if v.busy => row(v.deadline.saturating_sub(v.period), v.deadline),
            Workload::Program(p) => {
                if let Some(d) = p.pending_deadline() {
                    row(p.timer_base.unwrap_or(p.origin), d);
                }
            }
            _ => {}
        }
    }
}

fn stage(st: &StageSpec, queues: &[QueueSpec]) -> Result<Stage, String> {
    let find = |name: &Option<String>, key: &str| -> Result<Option<usize>, String> {
        match name {
            None => Ok(None),
            Some(n) => queues
                .iter()
                .position(|q| &q.name == n)
                .map(Some)
                .ok_or_else(|| format!("stage: `{key}` queue `{n}` is not declared")),
        }
    };
    let input = find(&st.input, "input")?;
    let output = find(&st.output, "output")?;
    if input.is_none() && output.is_none() {
        return Err("stage: neither `input` nor `output`".into());
    }
    if input.is_some() && input == output {
        return Err("stage: `input` and `output` are the same queue".into());
    }
    let mut pulses = Vec::with_capacity(st.pulses.len());
    for p in &st.pulses {
        if !(p.factor > 0.0 && p.factor.is_finite()) {
            return Err(format!("stage: pulse factor {} is not positive", p.factor));
        }
        let a = p.start.as_nanos();
        pulses.push((a, a.saturating_add(p.length.as_nanos()), p.factor));
    }
    if let Some(r) = st.rate {
        if !(r > 0.0 && r.is_finite()) {
            return Err(format!("stage: `rate` {r} is not positive"));
        }
    }
    Ok(Stage {
        input,
        output,
        cost: positive(st.cost.as_nanos(), "stage: `cost`")?,
        rate: st.rate.filter(|_| input.is_none()),
        pulses,
        report: st.report.map(|d| d.as_nanos()).filter(|&d| d > 0),
        state: StageState::Working,
        next_report: 0,
        next_item: 0,
        armed: u64::MAX,
    })
}

fn video(v: &VideoSpec) -> Result<Video, String> {
    let period = positive(v.period.as_nanos(), "video: `period`")?;
    let (constant, means, gop) = match &v.mode {
        VideoMode::Constant { exec } => (
            Some(positive(exec.as_nanos(), "video: `exec`")?),
            [0; 3],
            Vec::new(),
        ),
        VideoMode::Mpeg { i, p, b, gop } => {
            let mut types = Vec::with_capacity(gop.len());
            for (k, c) in gop.chars().enumerate() {
                types.push(match c.to_ascii_uppercase() {
                    'I' => FrameType::I,
                    'P' => FrameType::P,
                    'B' => FrameType::B,
                    other => {
                        return Err(format!(
                        "video: `gop` \"{gop}\" has `{other}` at position {}; use only I, P and B",
                        k + 1
                    ))
                    }
                });
            }
            if types.is_empty() {
                return Err(
                    "video: `gop` is empty; give a pattern such as \"IBBPBBPBBPBB\"".into(),
                );
            }
            for (t, d, name) in [
                (FrameType::I, i, "i"),
                (FrameType::P, p, "p"),
                (FrameType::B, b, "b"),
            ] {
                if types.contains(&t) {
                    positive(d.as_nanos(), &format!("video: `{name}`"))?;
                }
            }
            (None, [i.as_nanos(), p.as_nanos(), b.as_nanos()], types)
        }
    };
    Ok(Video {
        period,
        constant,
        means,
        gop,
        on_miss: v.on_miss,
        index: 0,
        deadline: 0,
        busy: false,
    })
}

fn program(p: &Program) -> Result<Prog, String> {
    let mut takes_time = false;
    let mut has_timer = false;
    for (k, s) in p.steps.iter().enumerate() {
        match s {
            Step::Run(d) | Step::Sleep(d) | Step::Runtime(d) => takes_time |= d.as_nanos() > 0,
            Step::Timer { period, .. } => {
                positive(
                    period.as_nanos(),
                    &format!("program step {}: timer `period`", k + 1),
                )?;
                takes_time = true;
                has_timer = true;
            }
        }
    }
    if p.steps.is_empty() {
        return Err("program has no steps".into());
    }
    if !takes_time && p.loops.is_none() {
        return Err("program loops forever without any step that takes time".into());
    }
    Ok(Prog {
        steps: p.steps.clone(),
        loops: p.loops,
        delay: p.delay.as_nanos(),
        pc: 0,
        iterations: 0,
        has_timer,
        origin: 0,
        timer_base: None,
        started: false,
        in_runtime: false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use hsched_core::Duration as D;

    /// Calls one callback at `now` and returns what it asked for.
    fn call(
        w: &mut Workload,
        rng: &mut Rng,
        stats: &mut ThreadStats,
        now: u64,
        f: fn(&mut Workload, &mut WCtx<'_>) -> Next,
    ) -> (Next, Option<u64>, u64) {
        let mut shared = Shared::new(&[], 1);
        let mut cx = WCtx {
            now,
            rng,
            stats,
            arm: None,
            missed: 0,
            me: 0,
            shared: &mut shared,
            params: None,
        };
        let n = f(w, &mut cx);
        (n, cx.arm, cx.missed)
    }

    fn start(w: &mut Workload, cx: &mut WCtx<'_>) -> Next {
        w.start(cx)
    }
    fn done(w: &mut Workload, cx: &mut WCtx<'_>) -> Next {
        w.done(cx)
    }
    fn timer(w: &mut Workload, cx: &mut WCtx<'_>) -> Next {
        w.timer(cx)
    }

    const MS: u64 = 1_000_000;

    #[test]
    fn periodic_releases_stay_within_the_jitter_window() {
        let spec = WorkloadSpec::Periodic {
            period: D(10 * MS),
            exec: D(MS),
            deadline: D(10 * MS),
            jitter: D(2 * MS),
            offset: D(5 * MS),
        };
        let mut rng = Rng::new(9, 1);
        let mut w = Workload::new(&spec, &rng.clone()).unwrap();
        let mut st = ThreadStats::default();
        let (n, arm, _) = call(&mut w, &mut rng, &mut st, 0, start);
        assert_eq!(n, Next::Block);
        let mut at = arm.unwrap();
        let mut offsets = Vec::new();
        for k in 0..2000u64 {
            let nominal = 5 * MS + k * 10 * MS;
            assert!(
                at >= nominal && at <= nominal + 2 * MS,
                "release {k} at {at}"
            );
            offsets.push(at - nominal);
            let (n, arm, _) = call(&mut w, &mut rng, &mut st, at, timer);
            assert_eq!(n, Next::Run(MS));
            // The job finishes 1 ms later, before the next release.
            let (n, _, _) = call(&mut w, &mut rng, &mut st, at + MS, done);
            assert_eq!(n, Next::Block);
            at = arm.unwrap();
        }
        // The jitter is spread over the window, not stuck at one end.
        let mean = offsets.iter().sum::<u64>() as f64 / offsets.len() as f64;
        assert!(
            (mean - MS as f64).abs() < 0.1 * MS as f64,
            "mean jitter {mean}"
        );
        assert!(offsets.iter().any(|&o| o < MS / 10) && offsets.iter().any(|&o| o > 19 * MS / 10));
        assert_eq!(st.jobs, 2000);
        assert_eq!(st.misses, 0);
    }

    #[test]
    fn periodic_backlog_keeps_the_thread_running() {
        let spec = WorkloadSpec::Periodic {
            period: D(10 * MS),
            exec: D(15 * MS),
            deadline: D(10 * MS),
            jitter: D(0),
            offset: D(0),
        };
        let mut rng = Rng::new(0, 0);
        let mut w = Workload::new(&spec, &rng.clone()).unwrap();
        let mut st = ThreadStats::default();
        call(&mut w, &mut rng, &mut st, 0, start);
        assert_eq!(
            call(&mut w, &mut rng, &mut st, 0, timer).0,
            Next::Run(15 * MS)
        );
        // Second release while the first job still runs: nothing changes.
        assert_eq!(
            call(&mut w, &mut rng, &mut st, 10 * MS, timer).0,
            Next::Same
        );
        // First job done at 15 ms, 5 ms late; the second starts at once.
        assert_eq!(
            call(&mut w, &mut rng, &mut st, 15 * MS, done).0,
            Next::Run(15 * MS)
        );
        assert_eq!(st.lateness.max(), Some(5 * MS as i64));
        // Second done at 30 ms: due at 20 ms.
        call(&mut w, &mut rng, &mut st, 20 * MS, timer);
        call(&mut w, &mut rng, &mut st, 30 * MS, done);
        assert_eq!(st.lateness.max(), Some(10 * MS as i64));
        assert_eq!(st.misses, 2);
    }

    #[test]
    fn mpeg_frames_follow_the_gop_with_ten_percent_noise() {
        let spec = WorkloadSpec::Video(VideoSpec {
            period: D(40 * MS),
            mode: VideoMode::Mpeg {
                i: D(15 * MS),
                p: D(12 * MS),
                b: D(8 * MS),
                gop: "IBBPBB".into(),
            },
            on_miss: MissPolicy::Continue,
        });
        let mut rng = Rng::new(5, 5);
        let mut w = Workload::new(&spec, &rng.clone()).unwrap();
        let mut st = ThreadStats::default();
        let mut sums = [0f64; 3];
        let mut sq = [0f64; 3];
        let mut n = [0f64; 3];
        let (mut next, _, _) = call(&mut w, &mut rng, &mut st, 0, start);
        let mut now = 0;
        for k in 0..6000u64 {
            let Next::Run(c) = next else {
                panic!("frame {k}: {next:?}")
            };
            let ty = match k % 6 {
                0 => 0,
                3 => 1,
                _ => 2,
            };
            sums[ty] += c as f64;
            sq[ty] += (c as f64) * (c as f64);
            n[ty] += 1.0;
            // Finish on time, then sleep to the next period.
            now += c;
            let (nx, arm, _) = call(&mut w, &mut rng, &mut st, now, done);
            assert_eq!(nx, Next::Block);
            now = arm.unwrap();
            next = call(&mut w, &mut rng, &mut st, now, timer).0;
        }
        for (t, mean) in [(0, 15.0), (1, 12.0), (2, 8.0)] {
            let m = sums[t] / n[t] / MS as f64;
            let sd = (sq[t] / n[t] - (sums[t] / n[t]).powi(2)).sqrt() / MS as f64;
            assert!(
                (m - mean).abs() < 0.02 * mean,
                "type {t}: mean {m} ms, expected {mean}"
            );
            assert!(
                (sd - 0.1 * mean).abs() < 0.015 * mean,
                "type {t}: sd {sd} ms"
            );
        }
        assert_eq!(st.misses, 0);
        assert_eq!(st.jobs, 6000);
    }

    #[test]
    fn late_video_frames_continue_or_skip() {
        let cont = VideoSpec {
            period: D(10 * MS),
            mode: VideoMode::Constant { exec: D(4 * MS) },
            on_miss: MissPolicy::Continue,
        };
        let mut rng = Rng::new(0, 0);
        let mut w = Workload::new(&WorkloadSpec::Video(cont.clone()), &rng.clone()).unwrap();
        let mut st = ThreadStats::default();
        assert_eq!(
            call(&mut w, &mut rng, &mut st, 0, start),
            (Next::Run(4 * MS), None, 0)
        );
        // Done at 13 ms, 3 ms late: the next frame starts now, due at 23 ms.
        assert_eq!(
            call(&mut w, &mut rng, &mut st, 13 * MS, done),
            (Next::Run(4 * MS), None, 1)
        );
        assert_eq!(
            call(&mut w, &mut rng, &mut st, 17 * MS, done),
            (Next::Block, Some(23 * MS), 0)
        );

        let skip = VideoSpec {
            on_miss: MissPolicy::Skip,
            ..cont
        };
        let mut w = Workload::new(&WorkloadSpec::Video(skip), &rng.clone()).unwrap();
        let mut st = ThreadStats::default();
        assert_eq!(
            call(&mut w, &mut rng, &mut st, 0, start),
            (Next::Run(4 * MS), Some(10 * MS), 0)
        );
        // Deadline at 10 ms with the frame unfinished: dropped, next frame.
        assert_eq!(
            call(&mut w, &mut rng, &mut st, 10 * MS, timer),
            (Next::Run(4 * MS), Some(20 * MS), 1)
        );
        assert_eq!((st.dropped, st.misses, st.jobs), (1, 1, 0));
    }

    #[test]
    fn the_renderer_counts_every_missed_33ms_deadline() {
        let spec = WorkloadSpec::FrameRenderer {
            work: D(10 * MS),
            miss_gap: D(33 * MS),
        };
        let mut rng = Rng::new(0, 0);
        let mut w = Workload::new(&spec, &rng.clone()).unwrap();
        let mut st = ThreadStats::default();
        assert_eq!(
            call(&mut w, &mut rng, &mut st, 0, start).0,
            Next::Run(10 * MS)
        );
        // Gaps: 33 ms (on time), 33 ms + 1 ns (one miss), 100 ms (three).
        for (t, missed) in [(33 * MS, 0), (66 * MS + 1, 1), (166 * MS + 1, 3)] {
            let (n, _, m) = call(&mut w, &mut rng, &mut st, t, done);
            assert_eq!((n, m), (Next::Run(10 * MS), missed));
        }
        assert_eq!((st.jobs, st.hits, st.misses), (3, 1, 4));
        assert_eq!(st.lateness.max(), Some(67 * MS as i64));
        // 70 ms without a frame at the end of the run: two more misses.
        w.finish(236 * MS + 1, &mut st);
        assert_eq!(st.misses, 6);
    }

    /// rt-app adds each timer event's own period when the event comes, so
    /// one timer's steps of 20 ms then 5 ms expire at 20 and 25 ms (the
    /// real rt-app's log agrees: 213 periods in 2 s of 2 × 15 ms every
    /// 20 ms then 5 × 1 ms every 5 ms, none missed; adding each step's
    /// period for the next step gave 185 jobs and 26 misses).
    #[test]
    fn a_timer_step_adds_its_own_period() {
        let prog = Program {
            steps: vec![
                Step::Run(D(MS)),
                Step::Timer {
                    period: D(20 * MS),
                    absolute: false,
                },
                Step::Run(D(MS)),
                Step::Timer {
                    period: D(5 * MS),
                    absolute: false,
                },
            ],
            loops: None,
            delay: D(0),
        };
        let mut rng = Rng::new(0, 0);
        let mut w = Workload::new(&WorkloadSpec::Program(prog), &rng.clone()).unwrap();
        let mut st = ThreadStats::default();
        assert_eq!(call(&mut w, &mut rng, &mut st, 0, start).0, Next::Run(MS));
        let (n, arm, _) = call(&mut w, &mut rng, &mut st, MS, done);
        assert_eq!((n, arm), (Next::Block, Some(20 * MS)));
        assert_eq!(
            call(&mut w, &mut rng, &mut st, 20 * MS, timer).0,
            Next::Run(MS)
        );
        let (n, arm, _) = call(&mut w, &mut rng, &mut st, 21 * MS, done);
        assert_eq!((n, arm), (Next::Block, Some(25 * MS)));
        assert_eq!(
            call(&mut w, &mut rng, &mut st, 25 * MS, timer).0,
            Next::Run(MS)
        );
        // The loop comes round to the 20 ms step: 45 ms.
        let (n, arm, _) = call(&mut w, &mut rng, &mut st, 26 * MS, done);
        assert_eq!((n, arm), (Next::Block, Some(45 * MS)));
        // The job in progress is due at the next step's expiry, 45 + 5 ms
        // (not 45 + 20): a run cut off just after 50 ms misses it.
        assert_eq!(
            call(&mut w, &mut rng, &mut st, 45 * MS, timer).0,
            Next::Run(MS)
        );
        w.finish(50 * MS + 1, &mut st);
        assert_eq!((st.jobs, st.misses), (3, 1));
    }

    #[test]
    fn programs_follow_rtapp_timer_modes() {
        let prog = |absolute| Program {
            steps: vec![
                Step::Run(D(3 * MS)),
                Step::Timer {
                    period: D(10 * MS),
                    absolute,
                },
            ],
            loops: Some(3),
            delay: D(0),
        };
        for absolute in [true, false] {
            let mut rng = Rng::new(0, 0);
            let mut w =
                Workload::new(&WorkloadSpec::Program(prog(absolute)), &rng.clone()).unwrap();
            let mut st = ThreadStats::default();
            assert_eq!(
                call(&mut w, &mut rng, &mut st, 0, start).0,
                Next::Run(3 * MS)
            );
            // First run overruns: it ends at 14 ms, past the 10 ms expiry.
            let (n, arm, m) = call(&mut w, &mut rng, &mut st, 14 * MS, done);
            assert_eq!((n, arm, m), (Next::Run(3 * MS), None, 1));
            // Second run ends at 17 ms: absolute expiry 20 ms, relative 24 ms.
            let (n, arm, _) = call(&mut w, &mut rng, &mut st, 17 * MS, done);
            assert_eq!(n, Next::Block);
            assert_eq!(arm, Some(if absolute { 20 * MS } else { 24 * MS }));
            let t = arm.unwrap();
            assert_eq!(
                call(&mut w, &mut rng, &mut st, t, timer).0,
                Next::Run(3 * MS)
            );
            // Third loop reaches its timer, then the program exits.
            let (n, _, _) = call(&mut w, &mut rng, &mut st, t + 3 * MS, done);
            assert_eq!(n, Next::Block);
            let t2 = if absolute { 30 * MS } else { 34 * MS };
            assert_eq!(call(&mut w, &mut rng, &mut st, t2, timer).0, Next::Exit);
            assert_eq!((st.jobs, st.misses), (3, 1));
        }
    }

    #[test]
    fn unfinished_jobs_past_their_deadline_are_misses_at_the_end() {
        type Cb = fn(&mut Workload, &mut WCtx<'_>) -> Next;
        const T: Cb = timer;
        const DONE: Cb = done;
        let end_misses = |spec: &WorkloadSpec, events: &[(u64, Cb)], end: u64| {
            let mut rng = Rng::new(3, 3);
            let mut w = Workload::new(spec, &rng.clone()).unwrap();
            let mut st = ThreadStats::default();
            call(&mut w, &mut rng, &mut st, 0, start);
            for &(t, f) in events {
                call(&mut w, &mut rng, &mut st, t, f);
            }
            let before = st.misses;
            w.finish(end, &mut st);
            st.misses - before
        };
        // Periodic, 10 ms: jobs released at 0..=40 ms, the first done late
        // at 12 ms. At 45 ms the jobs due at 20, 30 and 40 ms are overdue;
        // the one due at 50 ms is not.
        let periodic = WorkloadSpec::Periodic {
            period: D(10 * MS),
            exec: D(12 * MS),
            deadline: D(10 * MS),
            jitter: D(0),
            offset: D(0),
        };
        let releases = [
            (0, T),
            (10 * MS, T),
            (12 * MS, DONE),
            (20 * MS, T),
            (30 * MS, T),
            (40 * MS, T),
        ];
        assert_eq!(end_misses(&periodic, &releases, 45 * MS), 3);
        // Ending exactly at a deadline does not miss it.
        assert_eq!(end_misses(&periodic, &releases, 40 * MS), 2);
        // Never run: every job due before the end.
        let starved = [(0, T), (10 * MS, T), (20 * MS, T)];
        assert_eq!(end_misses(&periodic, &starved, 25 * MS), 2);
        // Sporadic, arrivals every 5 to 6 ms, deadline 1 ms, never run:
        // all three released jobs are overdue by 20 ms.
        let sporadic = WorkloadSpec::Sporadic {
            min_interarrival: D(5 * MS),
            max_interarrival: D(6 * MS),
            exec: D(MS),
            deadline: D(MS),
        };
        let mut rng = Rng::new(3, 3);
        let mut w = Workload::new(&sporadic, &rng.clone()).unwrap();
        let mut st = ThreadStats::default();
        let mut at = call(&mut w, &mut rng, &mut st, 0, start).1.unwrap();
        let mut arrivals: Vec<(u64, Cb)> = Vec::new();
        for _ in 0..3 {
            arrivals.push((at, T));
            at = call(&mut w, &mut rng, &mut st, at, timer).1.unwrap();
        }
        assert_eq!(end_misses(&sporadic, &arrivals, 20 * MS), 3);
        // The last arrival is at 15 ms at the earliest, due 1 ms later.
        assert_eq!(end_misses(&sporadic, &arrivals, arrivals[2].0 + MS), 2);
        // Video in continue mode: a frame still decoding past its deadline.
        let video = WorkloadSpec::Video(VideoSpec {
            period: D(10 * MS),
            mode: VideoMode::Constant { exec: D(4 * MS) },
            on_miss: MissPolicy::Continue,
        });
        assert_eq!(end_misses(&video, &[], 11 * MS), 1);
        assert_eq!(end_misses(&video, &[], 10 * MS), 0);
        // A program that has not reached its first timer step by its expiry.
        let prog = WorkloadSpec::Program(Program {
            steps: vec![
                Step::Run(D(3 * MS)),
                Step::Timer {
                    period: D(10 * MS),
                    absolute: true,
                },
            ],
            loops: None,
            delay: D(0),
        });
        assert_eq!(end_misses(&prog, &[], 11 * MS), 1);
        assert_eq!(end_misses(&prog, &[(3 * MS, DONE)], 11 * MS), 0);
        // Models without deadlines add none.
        assert_eq!(end_misses(&WorkloadSpec::CpuBound, &[], 11 * MS), 0);
    }

    #[test]
    fn runtime_steps_end_on_the_wall_clock() {
        let p = Program {
            steps: vec![Step::Runtime(D(5 * MS)), Step::Sleep(D(5 * MS))],
            loops: None,
            delay: D(2 * MS),
        };
        let mut rng = Rng::new(0, 0);
        let mut w = Workload::new(&WorkloadSpec::Program(p), &rng.clone()).unwrap();
        let mut st = ThreadStats::default();
        assert_eq!(
            call(&mut w, &mut rng, &mut st, 0, start),
            (Next::Block, Some(2 * MS), 0)
        );
        assert_eq!(
            call(&mut w, &mut rng, &mut st, 2 * MS, timer),
            (Next::Run(u64::MAX), Some(7 * MS), 0)
        );
        assert_eq!(
            call(&mut w, &mut rng, &mut st, 7 * MS, timer),
            (Next::Block, Some(12 * MS), 0)
        );
        assert_eq!(
            call(&mut w, &mut rng, &mut st, 12 * MS, timer),
            (Next::Run(u64::MAX), Some(17 * MS), 0)
        );
        assert_eq!(st.jobs, 1);
    }

    #[test]
    fn stages_wait_on_queues_and_pokes_follow_the_waiting_order() {
        let q = QueueSpec {
            name: "q".into(),
            size: 1,
            initial: 0,
            span: Default::default(),
        };
        let stage_spec = |input: Option<&str>, output: Option<&str>| {
            WorkloadSpec::Stage(StageSpec {
                input: input.map(String::from),
                output: output.map(String::from),
                cost: D(MS),
                rate: None,
                pulses: vec![hsched_config::Pulse {
                    start: D(10 * MS),
                    length: D(10 * MS),
                    factor: 4.0,
                }],
                report: None,
            })
        };
        let rng = Rng::new(0, 0);
        let qs = std::slice::from_ref(&q);
        let mut src = Workload::with_queues(&stage_spec(None, Some("q")), &rng, qs).unwrap();
        let mut a = Workload::with_queues(&stage_spec(Some("q"), None), &rng, qs).unwrap();
        let mut b = Workload::with_queues(&stage_spec(Some("q"), None), &rng, qs).unwrap();
        let mut shared = Shared::new(qs, 3);
        let mut st = ThreadStats::default();
        let mut r = rng.clone();
        let mut go = |w: &mut Workload, me: u32, now: u64, shared: &mut Shared, cb: u8| {
            let mut cx = WCtx {
                now,
                rng: &mut r,
                stats: &mut st,
                arm: None,
                missed: 0,
                me,
                shared,
                params: None,
            };
            match cb {
                0 => w.start(&mut cx),
                1 => w.done(&mut cx),
                _ => w.poke(&mut cx),
            }
        };
        // Both consumers find the queue empty and wait, b after a.
        assert_eq!(go(&mut b, 2, 0, &mut shared, 0), Next::Block);
        assert_eq!(go(&mut a, 1, 0, &mut shared, 0), Next::Block);
        // The source's first item costs 1 ms; inside the pulse, 0.25 ms.
        assert_eq!(go(&mut src, 0, 0, &mut shared, 0), Next::Run(MS));
        assert_eq!(go(&mut src, 0, 10 * MS, &mut shared, 1), Next::Run(MS / 4));
        assert_eq!(shared.pokes, vec![2, 1]);
        // The first poked takes the item; the second waits again.
        assert_eq!(go(&mut b, 2, 10 * MS, &mut shared, 2), Next::Run(MS));
        assert_eq!(go(&mut a, 1, 10 * MS, &mut shared, 2), Next::Block);
        // The source's next item fills the queue; the one after waits for
        // space, holding the finished item, and is poked by the next pop.
        shared.pokes.clear();
        assert_eq!(go(&mut src, 0, 11 * MS, &mut shared, 1), Next::Run(MS / 4));
        assert_eq!(shared.pokes, vec![1]);
        assert_eq!(go(&mut src, 0, 12 * MS, &mut shared, 1), Next::Block);
        assert_eq!(go(&mut a, 1, 12 * MS, &mut shared, 2), Next::Run(MS));
        assert_eq!(shared.pokes, vec![1, 0]);
        assert_eq!(go(&mut src, 0, 12 * MS, &mut shared, 2), Next::Run(MS / 4));
        let q = &shared.queues[0];
        assert_eq!((q.fill, q.pushed, q.popped, q.max), (1, 3, 2, 1));
        // The fill was 1 over [10, 10) ms, [11, 12) ms and from 12 ms.
        assert!((q.mean_fill(14 * MS) - 3.0 / 14.0).abs() < 1e-9);
    }

    #[test]
    fn meaningless_parameters_are_refused() {
        let rng = Rng::new(0, 0);
        let bad = [
            WorkloadSpec::Periodic {
                period: D(0),
                exec: D(1),
                deadline: D(1),
                jitter: D(0),
                offset: D(0),
            },
            WorkloadSpec::Sporadic {
                min_interarrival: D(5),
                max_interarrival: D(4),
                exec: D(1),
                deadline: D(1),
            },
            WorkloadSpec::FrameRenderer {
                work: D(1),
                miss_gap: D(0),
            },
            WorkloadSpec::Video(VideoSpec {
                period: D(10),
                mode: VideoMode::Mpeg {
                    i: D(1),
                    p: D(1),
                    b: D(1),
                    gop: "IBX".into(),
                },
                on_miss: MissPolicy::Skip,
            }),
            WorkloadSpec::Program(Program {
                steps: vec![Step::Run(D(0)), Step::Sleep(D(0))],
                loops: None,
                delay: D(0),
            }),
        ];
        for b in &bad {
            assert!(Workload::new(b, &rng).is_err(), "{b:?} accepted");
        }
    }
}
