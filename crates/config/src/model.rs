//! The validated data model of a hierarchy file: what the simulator, live
//! mode and the analysis consume. Parsing and validation produce it; nothing
//! here does I/O.

use hsched_core::{Duration, Params};

/// The shortest interval a file may ask something to recur at: a
/// scheduler's quantum or period, a workload's period or loop, a slice of
/// stolen time. Durations that set how often the model does something are
/// zero (where that means "off") or at least this long, so that a run
/// takes at most about a million events per simulated second for each of
/// them instead of running for hours on a 1 ns period.
pub const MIN_INTERVAL: Duration = Duration::from_micros(1);

/// A whole hierarchy file, validated.
#[derive(Clone, Debug, PartialEq)]
pub struct Hierarchy {
    /// The machine.
    pub machine: Machine,
    /// Scheduler instances, parents before children (topological order).
    pub schedulers: Vec<SchedulerSpec>,
    /// Threads (after expanding `count`), in file order.
    pub threads: Vec<ThreadSpec>,
    /// Principals (users or domains whose total CPU use is reported).
    pub principals: Vec<PrincipalSpec>,
    /// Bounded queues joining `stage` workloads (`[[queue]]`), in file
    /// order.
    pub queues: Vec<QueueSpec>,
    /// The scheduler new threads join when nothing else says where.
    pub default_scheduler: Option<String>,
    /// Timed operations, in time order (stable for equal times).
    pub operations: Vec<TimedOp>,
    /// Defaults for `hsched sim` (overridden by the command line).
    pub sim: SimDefaults,
    /// rt-app tasks imported by the file (`[workload] rtapp = "file.json"`)
    /// or given on the command line, each mapped onto a thread.
    pub rtapp: Option<RtAppWorkload>,
    /// The `[workload]` section: the rt-app file named by the hierarchy
    /// file and the rules that map rt-app tasks onto schedulers.
    pub workload: WorkloadConfig,
    /// `[[rule]]`s placing the threads that managed programs create in
    /// live mode, in file order: the first that matches wins; a thread no
    /// rule matches joins its creator's scheduler.
    pub rules: Vec<ThreadRule>,
    /// The resource manager's rules, delegations and timed requests
    /// (`[rm]`, Regehr 2001, ch. 8).
    pub rm: crate::rm::RmConfig,
    /// Name of the file this hierarchy was read from, for diagnostics.
    pub file: String,
}

/// The `[workload]` section of a hierarchy file.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct WorkloadConfig {
    /// The rt-app file as written (relative to the hierarchy file);
    /// [`crate::load`] reads it, [`crate::parse_str`] only records it.
    pub rtapp_file: Option<String>,
    /// Where `rtapp` is written in the hierarchy file.
    pub rtapp_span: Option<Span>,
    /// `[[workload.map]]` rules for rt-app tasks that no `[[thread]]`
    /// names, in file order: the first matching rule wins; tasks that no
    /// rule matches go to the default scheduler.
    pub rules: Vec<MapRule>,
}

/// One `[[workload.map]]` rule.
#[derive(Clone, Debug, PartialEq)]
pub struct MapRule {
    /// Glob on the task name (`*` any run of characters, `?` one).
    pub task: String,
    /// The scheduler the matching tasks join.
    pub scheduler: String,
    /// Parent-side parameters; when given they replace the scheduling
    /// fields of the task (`priority`, `dl-runtime`, ...).
    pub params: Option<Params>,
    /// Where it was declared.
    pub span: Span,
}

/// One `[[rule]]`: where live mode puts a thread that a managed program
/// creates, instead of its creator's scheduler. Checked when the thread is
/// created, and again when it is renamed or calls `execve`.
#[derive(Clone, Debug, PartialEq)]
pub struct ThreadRule {
    /// Glob on the thread's name (Linux's `comm`, at most 15 bytes), when
    /// given.
    pub thread: Option<String>,
    /// Glob on the name of the thread's process (its leader's `comm`),
    /// when given. At least one of the two is.
    pub program: Option<String>,
    /// The scheduler the matching threads join.
    pub scheduler: String,
    /// Their parent-side parameters (none given: the scheduler's defaults).
    pub params: Params,
    /// A guarantee the resource manager is asked for on the thread's
    /// behalf, at `scheduler`, instead of placing it there (Regehr 2001,
    /// §8.5.2); the thread stays where it would be until granted.
    pub guarantee: Option<String>,
    /// Where it was declared.
    pub span: Span,
}

impl ThreadRule {
    /// Whether a thread named `thread` of a process named `program`
    /// matches (every glob the rule gives does).
    pub fn matches(&self, thread: &str, program: &str) -> bool {
        self.thread
            .as_deref()
            .is_none_or(|g| crate::glob_match(g, thread))
            && self
                .program
                .as_deref()
                .is_none_or(|g| crate::glob_match(g, program))
    }
}

/// The simulated (or, in live mode, managed) machine.
#[derive(Clone, Debug, PartialEq)]
pub struct Machine {
    /// Number of processors.
    pub cpus: usize,
    /// Cost of one context switch, charged to nobody (the CPU is busy
    /// switching). Zero by default.
    pub context_switch: Duration,
    /// When timers can fire.
    pub timer: TimerModel,
    /// Interference that steals time from whatever runs on a processor.
    pub stolen: Vec<StolenSpec>,
}

/// Timer granularity (Regehr 2001, §10.4; the 800 Hz clock of Banachowski 2002).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum TimerModel {
    /// Timers fire exactly when asked.
    Precise,
    /// Timers fire at the next tick of a periodic clock of this frequency.
    Tick {
        /// Ticks per second.
        hz: u32,
    },
}

/// Time stolen on one processor (Regehr 2001, ch. 11).
#[derive(Clone, Debug, PartialEq)]
pub struct StolenSpec {
    /// The processor.
    pub cpu: usize,
    /// When and how much.
    pub pattern: StolenPattern,
}

/// Shapes of stolen time.
#[derive(Clone, Debug, PartialEq)]
pub enum StolenPattern {
    /// `amount` every `every`, starting at `start`.
    Periodic {
        /// Interval between steals.
        every: Duration,
        /// Length of each steal.
        amount: Duration,
        /// First steal.
        start: Duration,
    },
    /// From `start` for `length`, steal `fraction` of the processor in
    /// slices of `slice`.
    Burst {
        /// Start of the burst.
        start: Duration,
        /// Length of the burst.
        length: Duration,
        /// Fraction of time stolen during the burst, in (0, 1).
        fraction: f64,
        /// Granularity of the steals.
        slice: Duration,
    },
    /// Explicit (start, length) pairs, e.g. measured on a real machine.
    Trace {
        /// (start, length), sorted by start.
        steals: Vec<(Duration, Duration)>,
    },
}

/// One scheduler instance.
#[derive(Clone, Debug, PartialEq)]
pub struct SchedulerSpec {
    /// Unique name.
    pub name: String,
    /// Policy name (a key of `hsched_policies::registry`).
    pub policy: String,
    /// Instance parameters (validated against the policy's spec).
    pub params: Params,
    /// Parents; empty for a root.
    pub parents: Vec<ParentSpec>,
    /// For a root: its processors (all by default).
    pub cpus: Vec<usize>,
    /// Guarantee this instance requests from its parent, as written
    /// (`"RESBH 10 33"`), for the analysis.
    pub guarantee: Option<String>,
    /// Where it was declared (for later diagnostics).
    pub span: Span,
}

/// One parent of an instance, with the parent-side parameters (FP
/// priority, PS share, Rez amount and period, ...).
#[derive(Clone, Debug, PartialEq)]
pub struct ParentSpec {
    /// The parent's name.
    pub name: String,
    /// Parent-side parameters.
    pub params: Params,
}

/// One thread (a leaf).
#[derive(Clone, Debug, PartialEq)]
pub struct ThreadSpec {
    /// Unique name (`base.k` when expanded from `count`).
    pub name: String,
    /// The scheduler it starts under.
    pub scheduler: String,
    /// Parent-side parameters.
    pub params: Params,
    /// What it does (simulator). `None` for a live-mode thread that only
    /// gives `exec`, and for a thread whose rt-app task is not attached
    /// yet; [`Hierarchy::check_simulatable`] reports both.
    pub workload: Option<WorkloadSpec>,
    /// The rt-app task this thread runs, if it comes from an rt-app file.
    pub rtapp: Option<RtAppBinding>,
    /// Its principal, if any.
    pub principal: Option<String>,
    /// Guarantee it requests, as written (`"RESBH 10 33"`).
    pub guarantee: Option<String>,
    /// When it is created (zero: at the start).
    pub start: Duration,
    /// When it exits, if before the end.
    pub exit: Option<Duration>,
    /// Live mode: the command to run (`exec = ["prog", "arg"]`).
    pub exec: Option<Vec<String>>,
    /// Where it was declared.
    pub span: Span,
}

impl ThreadSpec {
    /// A thread under `scheduler` started at time zero, with no
    /// parameters, principal, guarantee, exit or program to execute.
    pub fn new(name: &str, scheduler: &str, workload: WorkloadSpec) -> Self {
        ThreadSpec {
            name: name.to_string(),
            scheduler: scheduler.to_string(),
            params: Params::new(),
            workload: Some(workload),
            rtapp: None,
            principal: None,
            guarantee: None,
            start: Duration::ZERO,
            exit: None,
            exec: None,
            span: Span::default(),
        }
    }
}

/// How a thread is tied to an rt-app task.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RtAppBinding {
    /// The task name (after expanding `instance`).
    pub task: String,
    /// `true` when a `[[thread]]` names the task (`rtapp = "task"`);
    /// `false` when a `[[workload.map]]` rule or the default scheduler
    /// placed it. [`crate::attach_rtapp`] replaces the latter when another
    /// workload is attached.
    pub declared: bool,
}

/// A bounded queue of items joining pipeline stages (`[[queue]]`; Steere et al. 1998,
/// §3.2's "symbiotic interfaces").
#[derive(Clone, Debug, PartialEq)]
pub struct QueueSpec {
    /// Unique name, used by stages' `input` and `output`.
    pub name: String,
    /// Capacity in items (at least 1).
    pub size: u64,
    /// Items in the queue at the start (at most `size`).
    pub initial: u64,
    /// Where it was declared.
    pub span: Span,
}

/// A principal: a user or domain whose total CPU share is reported, and
/// which the resource manager accounts requests to.
#[derive(Clone, Debug, PartialEq)]
pub struct PrincipalSpec {
    /// Name.
    pub name: String,
    /// What the resource manager knows of it (user or group, uid, groups).
    pub rm: crate::rm::PrincipalRm,
}

/// What a simulated thread does: threads as programmable state machines
/// (Regehr 2001, §9.4.1).
#[derive(Clone, Debug, PartialEq)]
pub enum WorkloadSpec {
    /// Always runnable.
    CpuBound,
    /// Periodic jobs: released every `period` (plus up to `jitter` of
    /// random delay), each needing `exec` of CPU, due `deadline` after the
    /// release. The first release is at `offset`.
    Periodic {
        /// Release period.
        period: Duration,
        /// CPU time per job.
        exec: Duration,
        /// Relative deadline (the period by default).
        deadline: Duration,
        /// Maximum release jitter.
        jitter: Duration,
        /// First release.
        offset: Duration,
    },
    /// Sporadic jobs: inter-arrival uniformly in [min, max].
    Sporadic {
        /// Shortest inter-arrival time.
        min_interarrival: Duration,
        /// Longest inter-arrival time.
        max_interarrival: Duration,
        /// CPU time per job.
        exec: Duration,
        /// Relative deadline.
        deadline: Duration,
    },
    /// Interactive: thinks (blocked) for an exponentially distributed time
    /// of mean `think`, then runs a burst of mean `burst`.
    Interactive {
        /// Mean think time.
        think: Duration,
        /// Mean CPU burst.
        burst: Duration,
    },
    /// Blocking I/O: computes `compute`, then waits `io`, repeatedly.
    BlockingIo {
        /// CPU time between I/Os.
        compute: Duration,
        /// I/O wait.
        io: Duration,
    },
    /// The `srtsim` video decoder of Banachowski 2002: one frame per period, work per
    /// frame constant or by MPEG frame type.
    Video(VideoSpec),
    /// Regehr 2001, §10.5.2: renders frames back to back, each needing `work`
    /// of CPU; a gap of more than `miss_gap` between two frame completions
    /// is a miss.
    FrameRenderer {
        /// CPU time per frame (10 ms in the dissertation).
        work: Duration,
        /// Longest acceptable gap between frames (33 ms).
        miss_gap: Duration,
    },
    /// A program of steps, looped (what rt-app phases become).
    Program(Program),
    /// One stage of a producer / consumer pipeline joined by bounded
    /// queues (Steere et al. 1998, §4, Figs 6 and 7).
    Stage(StageSpec),
    /// The adaptive video player of Sinha 2007, §3.2–3.4 (QStream-like).
    Player(PlayerSpec),
}

impl WorkloadSpec {
    /// The kind name of a workload that only the simulator can run
    /// (`"stage"`, `"player"`), `None` for those live mode can imitate.
    pub fn simulated_only(&self) -> Option<&'static str> {
        match self {
            WorkloadSpec::Stage(_) => Some("stage"),
            WorkloadSpec::Player(_) => Some("player"),
            _ => None,
        }
    }
}

/// A pipeline stage: takes an item from `input` (if any), spends `cost`
/// of CPU on it, puts it into `output` (if any). It blocks while its input
/// is empty or its output full. A stage without input is a source: it has
/// an item ready whenever its pacing allows (`rate` items per second, or
/// as fast as its CPU allows without `rate`).
#[derive(Clone, Debug, PartialEq)]
pub struct StageSpec {
    /// Queue it consumes from.
    pub input: Option<String>,
    /// Queue it produces into.
    pub output: Option<String>,
    /// CPU time per item.
    pub cost: Duration,
    /// Items per second a source may make (`None`: unpaced). Only for a
    /// stage without `input`.
    pub rate: Option<f64>,
    /// Changes of speed over time; overlapping pulses multiply.
    pub pulses: Vec<Pulse>,
    /// How often the stage reports its queues' fill levels to its
    /// scheduler as `progress` messages (`None`: never).
    pub report: Option<Duration>,
}

/// A change of a stage's speed from `start` for `length`: with `rate`, the
/// rate is multiplied by `factor`; without, the cost per item is divided
/// by it (the stage makes `factor` times as many items per CPU second, as
/// the producer of Steere et al. 1998, Fig 6, does under a fixed reservation). Only
/// sources (stages without `input`) have pulses.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Pulse {
    /// When it begins, from the start of the run.
    pub start: Duration,
    /// How long it lasts.
    pub length: Duration,
    /// Speed multiplier, > 0.
    pub factor: f64,
}

/// The simulated adaptive video player of Sinha 2007 (see `hsched_sim::player`).
#[derive(Clone, Debug, PartialEq)]
pub struct PlayerSpec {
    /// Frame period (1 / fps).
    pub frame: Duration,
    /// Mean decode cost of a frame.
    pub decode: Duration,
    /// Relative spread of the per-frame cost, in [0, 1).
    pub spread: f64,
    /// Longest decode event.
    pub event: Duration,
    /// Cost of a display event.
    pub display: Duration,
    /// Frames of work-ahead.
    pub window: u64,
    /// Call `coop_poll` at informed points (Sinha 2007, §2.3); a refused call
    /// (a scheduler other than `coop`) turns the player non-cooperative.
    pub cooperative: bool,
}

/// The `srtsim` parameters of Banachowski 2002, §2.
#[derive(Clone, Debug, PartialEq)]
pub struct VideoSpec {
    /// Frame period (1 / frame rate).
    pub period: Duration,
    /// Work per frame.
    pub mode: VideoMode,
    /// What a late frame does.
    pub on_miss: MissPolicy,
}

/// Work per frame.
#[derive(Clone, Debug, PartialEq)]
pub enum VideoMode {
    /// Every frame needs `exec`.
    Constant {
        /// CPU per frame.
        exec: Duration,
    },
    /// Frames follow a group-of-pictures pattern of I, P and B frames.
    Mpeg {
        /// CPU for an I frame.
        i: Duration,
        /// CPU for a P frame.
        p: Duration,
        /// CPU for a B frame.
        b: Duration,
        /// The pattern, e.g. `"IBBPBBPBBPBB"`.
        gop: String,
    },
}

/// Relative standard deviation of an MPEG frame's CPU time around its
/// type's mean (Banachowski 2002, Table 2.4): the simulator and live mode draw each
/// frame as `mean × (1 + 0.10 × N(0, 1))`, at least 1 ns.
pub const MPEG_REL_STDDEV: f64 = 0.10;

/// What happens to a frame that misses its deadline (Banachowski 2002, §2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MissPolicy {
    /// Finish it anyway, then go on with the next frame at once.
    Continue,
    /// Drop the rest of the late frame and skip to the next period.
    Skip,
}

/// A looping program of steps.
#[derive(Clone, Debug, PartialEq)]
pub struct Program {
    /// The steps, in order.
    pub steps: Vec<Step>,
    /// How many times to run the steps; `None` forever.
    pub loops: Option<u64>,
    /// Delay before the first step.
    pub delay: Duration,
}

/// One step of a program (the rt-app events hsched supports).
#[derive(Clone, Debug, PartialEq)]
pub enum Step {
    /// Use this much CPU time (rt-app `run`).
    Run(Duration),
    /// Run until this much time has passed since the step began, whether
    /// or not the thread had the processor all along (rt-app `runtime`,
    /// which spins on the wall clock).
    Runtime(Duration),
    /// Block for this long (rt-app `sleep`).
    Sleep(Duration),
    /// Block until the timer's next expiry, this step's `period` after
    /// the last one (rt-app `timer`, see [`timer_turn`]); a job boundary
    /// with its deadline at that expiry.
    Timer {
        /// Timer period, added to the timer at this step.
        period: Duration,
        /// Absolute (`true`): a late step keeps the expiries on their
        /// grid, so the next steps catch up; relative: a late step starts
        /// the expiries again from now. rt-app makes a timer absolute for
        /// all its events when any of them says so; the reader does the
        /// same.
        absolute: bool,
    },
}

/// What a program's `timer` step does at `now`, in ns: rt-app's timer
/// (`src/rt-app.c`, `rtapp_timer`), the same in the simulator and in live
/// mode.
///
/// `base` is what the previous timer step left (`None` at the first:
/// `origin`, when the program started, after its delay). The step's own
/// `period` is added to it, as rt-app adds each timer event's period when
/// the event comes, so steps of one timer with different periods space
/// their expiries by their own periods. The step waits for that expiry if
/// it has not come. A step that waits, or an absolute one, leaves its
/// expiry as the next base, so the next steps catch up after a late one;
/// a late relative one leaves `now`, starting again from there.
#[must_use]
pub fn timer_turn(
    base: Option<u64>,
    origin: u64,
    period: u64,
    absolute: bool,
    now: u64,
) -> TimerTurn {
    let expiry = base.unwrap_or(origin).saturating_add(period);
    let wait = now < expiry;
    TimerTurn {
        expiry,
        wait,
        base: if wait || absolute { expiry } else { now },
    }
}

/// A `timer` step's outcome (see [`timer_turn`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimerTurn {
    /// The expiry the step is for: the deadline of the job it ends.
    pub expiry: u64,
    /// Whether the step sleeps until `expiry` (it has not come yet).
    pub wait: bool,
    /// What the next timer step adds its own period to.
    pub base: u64,
}

/// rt-app tasks and how they map onto threads.
#[derive(Clone, Debug, PartialEq)]
pub struct RtAppWorkload {
    /// Total run time from `global.duration`, if given.
    pub duration: Option<Duration>,
    /// Tasks after expanding `instance`.
    pub tasks: Vec<RtAppTask>,
    /// The file the tasks were read from, for diagnostics.
    pub file: String,
}

/// One rt-app task.
#[derive(Clone, Debug, PartialEq)]
pub struct RtAppTask {
    /// Task name (`name-k` for instances beyond the first).
    pub name: String,
    /// The program.
    pub program: Program,
    /// Scheduling hints of the task (`policy`, `priority`, `dl-runtime`,
    /// `dl-period`, `dl-deadline`) as parent-side parameters.
    pub params: Params,
    /// Allowed processors (`cpus`), empty for all.
    pub cpus: Vec<usize>,
    /// Where the task is declared in the rt-app file.
    pub span: Span,
}

/// An operation at a given time (mode changes, §4.3.9).
#[derive(Clone, Debug, PartialEq)]
pub struct TimedOp {
    /// When, from the start.
    pub at: Duration,
    /// What.
    pub op: OpSpec,
    /// Where it was declared.
    pub span: Span,
}

/// A control operation (the HLSCtl set).
#[derive(Clone, Debug, PartialEq)]
pub enum OpSpec {
    /// Move `thread` under reservation scheduler `scheduler` with `params`.
    BeginReservation {
        /// The thread.
        thread: String,
        /// The reservation scheduler.
        scheduler: String,
        /// Amount, period, ...
        params: Params,
    },
    /// Move `thread` back to where its reservation began.
    EndReservation {
        /// The thread.
        thread: String,
    },
    /// Change the parent-side parameters of `thread` (reservation amount,
    /// share and warp, priority).
    SetParams {
        /// The thread.
        thread: String,
        /// New parameters.
        params: Params,
    },
    /// Move `thread` under `to`.
    MoveThread {
        /// The thread.
        thread: String,
        /// The new scheduler.
        to: String,
        /// Parent-side parameters there.
        params: Params,
    },
    /// Create a scheduler instance.
    CreateScheduler(SchedulerSpec),
    /// Destroy a scheduler instance.
    DestroyScheduler {
        /// Its name.
        name: String,
    },
    /// Change the default scheduler, optionally moving its threads.
    SetDefault {
        /// The new default.
        name: String,
        /// Move the old default's threads.
        move_threads: bool,
    },
}

/// Defaults for simulation runs.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct SimDefaults {
    /// Simulated time (10 s when neither the file nor the command line
    /// says).
    pub duration: Option<Duration>,
    /// Random seed (0 by default).
    pub seed: Option<u64>,
}

/// A place in a source file, 1-based.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Span {
    /// Line.
    pub line: u32,
    /// Column.
    pub col: u32,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timer_steps_follow_rt_app() {
        // origin 100, period 10: the first step waits for 110.
        let t = timer_turn(None, 100, 10, false, 103);
        assert_eq!((t.expiry, t.wait, t.base), (110, true, 110));
        // On time (the run fit): the grid holds in both modes.
        for absolute in [false, true] {
            let t = timer_turn(Some(110), 100, 10, absolute, 115);
            assert_eq!((t.expiry, t.wait, t.base), (120, true, 120));
        }
        // Exactly at the expiry: no wait, and the grid holds.
        let t = timer_turn(Some(120), 100, 10, false, 130);
        assert_eq!((t.expiry, t.wait, t.base), (130, false, 130));
        // Late by 7: a relative timer starts again from now, an absolute
        // one keeps its grid and catches up.
        let t = timer_turn(Some(130), 100, 10, false, 147);
        assert_eq!((t.expiry, t.wait, t.base), (140, false, 147));
        let t = timer_turn(Some(130), 100, 10, true, 147);
        assert_eq!((t.expiry, t.wait, t.base), (140, false, 140));
        // Each step adds its own period: 20 after a step of period 5.
        let t = timer_turn(Some(140), 100, 20, false, 141);
        assert_eq!((t.expiry, t.wait, t.base), (160, true, 160));
        // No overflow at the end of time.
        let t = timer_turn(Some(u64::MAX - 1), 0, 10, true, 0);
        assert_eq!((t.expiry, t.wait, t.base), (u64::MAX, true, u64::MAX));
    }
}
