//! An adaptive video player like QStream (Sinha 2007, §3.2–3.4) and the
//! experiment of Sinha 2007, Table 3.1: N players under CPU saturation on one
//! processor, scheduled by cooperative polling (`coop` with `coop_poll`),
//! by the same fair-share policy without cooperation at a 1 ms or 20 ms
//! period, or by plain time sharing (`ts`).
//!
//! # The player
//! Each player is an event-driven process (Sinha 2007, §2.1.1) playing one
//! video at 24 fps:
//! - frame `k` is displayed at `D_k = start + k·T`; its data arrives
//!   `window` frames ahead, at `D_k − window·T`, and from then on its
//!   decode work is pending;
//! - decoding is *best-effort* work, run in events of at most `event`
//!   (1 ms, QStream's worst event granularity), ordered by frame
//!   importance (I = 2, P = 1, B = 0 in a GOP of 12 with a P every 3) and
//!   then by display time. Under overload the least important frames are
//!   left undecoded: *priority-progress* adaptation;
//! - the display of frame `k` is a *deadline* event (a release time) of
//!   cost `display`; it runs as soon as it is eligible, shows the frame if
//!   it was fully decoded by `D_k` and otherwise drops it with its
//!   remaining work (a late display buys no decoding time, so lateness
//!   cannot pass for throughput). Its tardiness is dispatch time − `D_k`;
//! - decode cost per frame varies: a per-player scale in [0.8, 1.2] (the
//!   players play different sections) times a per-frame factor uniform in
//!   `1 ± spread`, times 1.5 for I frames and 0.75 for B frames.
//!
//! With cooperative polling a player calls `coop_poll` (a
//! `Msg::App { kind: "coop_poll" }` through `Hsi::thread_msg`) at informed
//! points, exactly where the event loop of Fig 2.4 would: at an event
//! boundary once the OUT deadline has passed, when the OUT best-effort
//! event of the other players outranks its own next one, and before its
//! cooperative sleep until its next deadline event. Without cooperation it
//! simply runs its events and sleeps until its next deadline event when
//! idle.
//!
//! # The machine
//! A fixed-step driver (10 µs) on one processor. Every change of the
//! running thread costs `switch_cost` of processor time before the new
//! thread makes progress, standing for the cache and TLB refill the thesis
//! holds responsible for its throughput losses (§3.7.2: 9,500 more
//! switches per second cost about 20%, so about 20 µs each).
//!
//! # Metrics (§3.4)
//! Measured after `warmup`: worst display tardiness (overall and the mean
//! over one-second intervals of each interval's worst, the thesis's
//! measure), context switches per second, frames displayed per second
//! (throughput, also relative to one process playing all the videos, the
//! thesis's "single player"), per-player frame rates and their Jain
//! fairness index, `coop_poll` calls per second and policing events.
//!
//! # As a workload of the hierarchy file
//! [`PlayerWorkload`] is the same player (one video) as a thread's model in
//! the discrete-event engine (`workload = { kind = "player" }`). Its event
//! loop runs at event boundaries, which are the completions of its own
//! events: a `coop_poll` is a message to its own scheduler sent while it
//! runs, and OUT is read from its VP parameters at every boundary. A poll
//! that leaves work to do, and a return from cooperative sleep, cost
//! [`POLL_COST`] of CPU before the loop picks its next event again (a
//! system call; it also lets the scheduler switch away before the loop
//! commits to an event). Shown frames are its jobs (their lateness is the
//! display tardiness), undecoded frames are `dropped`. Under a scheduler
//! that refuses `coop_poll` the player turns non-cooperative at once.

use crate::rng::Rng;
use crate::workload::{Next, WCtx};
use hsched_core::{
    CpuId, Hsi, Instant, Msg, ParamValue, Params, ParentLink, ParentRef, PolicyEvent, ThreadId,
    TraceKind,
};
use std::collections::BTreeMap;

const DT: u64 = 10_000;

/// Parameters of one player's video and event loop.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PlayerSpec {
    /// Frame period (24 fps).
    pub frame: u64,
    /// Mean decode cost per frame, ns.
    pub mean_cost: u64,
    /// Relative spread of the per-frame cost, in [0, 1).
    pub spread: f64,
    /// Longest decode event, ns.
    pub event: u64,
    /// Cost of a display event, ns.
    pub display: u64,
    /// Frames of work-ahead (data arrives this many frames early).
    pub window: u64,
}

impl Default for PlayerSpec {
    fn default() -> Self {
        PlayerSpec {
            frame: 41_666_667,
            // 5.5 ms per frame at 24 fps is 13%: the CPU saturates between
            // seven and eight players (the thesis: adaptation starts at 8).
            mean_cost: 5_500_000,
            spread: 0.4,
            event: 1_000_000,
            display: 50_000,
            window: 3,
        }
    }
}

/// How the players are scheduled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlayerSched {
    /// `coop` with this period; players call `coop_poll`.
    Coop {
        /// Fair-share period, ns.
        period: u64,
    },
    /// `coop` with this period; players never call `coop_poll`: the pure
    /// fair-share scheduler of §3.7.2.
    FairShare {
        /// Fair-share period, ns.
        period: u64,
    },
    /// `ts` with its defaults (plain time sharing).
    Ts,
    /// One process plays every video in one event loop (the thesis's
    /// single-player base case), under `coop` without polling.
    Single,
}

impl PlayerSched {
    /// Short label for tables.
    pub fn label(&self) -> String {
        match self {
            PlayerSched::Coop { period } => format!("coop {}ms", period / 1_000_000),
            PlayerSched::FairShare { period } => format!("fair share {}ms", period / 1_000_000),
            PlayerSched::Ts => "ts".into(),
            PlayerSched::Single => "single process".into(),
        }
    }
}

/// One run of the experiment.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PlayerExperiment {
    /// Number of players (videos).
    pub players: usize,
    /// The scheduler.
    pub sched: PlayerSched,
    /// Simulated time, ns.
    pub duration: u64,
    /// Start of the measured interval, ns.
    pub warmup: u64,
    /// Processor time lost at each change of the running thread, ns.
    pub switch_cost: u64,
    /// Random seed.
    pub seed: u64,
    /// The player model.
    pub spec: PlayerSpec,
}

impl PlayerExperiment {
    /// `players` players under `sched` for 20 s (5 s warm-up), 20 µs per
    /// switch, seed 1.
    pub fn new(players: usize, sched: PlayerSched) -> Self {
        PlayerExperiment {
            players,
            sched,
            duration: 20_000_000_000,
            warmup: 5_000_000_000,
            switch_cost: 20_000,
            seed: 1,
            spec: PlayerSpec::default(),
        }
    }
}

/// What a run measured (after the warm-up).
#[derive(Clone, Debug, PartialEq)]
pub struct PlayerReport {
    /// Worst display tardiness, ms.
    pub worst_tardiness_ms: f64,
    /// Mean over one-second intervals of each interval's worst, ms.
    pub mean_interval_worst_ms: f64,
    /// Context switches per second.
    pub switches_per_s: f64,
    /// Frames displayed per second, all players.
    pub fps_total: f64,
    /// Frames displayed per second, per player (video).
    pub fps: Vec<f64>,
    /// Jain's fairness index of `fps` (1 = uniform).
    pub jain: f64,
    /// `coop_poll` calls per second.
    pub polls_per_s: f64,
    /// Frames dropped per second.
    pub dropped_per_s: f64,
    /// Demotions by the `coop` policy (policing), whole run.
    pub policed: u64,
}

#[derive(Clone, Copy, Debug)]
struct Frame {
    left: u64,
    /// When its decoding finished.
    done_at: Option<u64>,
    importance: i64,
    display: u64,
}

#[derive(Clone)]
struct Video {
    start: u64,
    scale: f64,
    /// Next frame index whose data has not arrived.
    next_arrival: u64,
    /// Arrived, undisplayed frames by index.
    frames: BTreeMap<u64, Frame>,
    shown: u64,
    dropped: u64,
}

#[derive(Clone, Copy, Debug)]
enum Ev {
    Display { v: usize, k: u64 },
    Decode { v: usize, k: u64 },
}

#[derive(Clone)]
struct Player {
    id: ThreadId,
    videos: Vec<Video>,
    /// The event in progress, its remaining and total cost.
    current: Option<(Ev, u64, u64)>,
    blocked_until: Option<u64>,
    polls: u64,
}

fn importance(k: u64) -> i64 {
    if k.is_multiple_of(12) {
        2
    } else if k.is_multiple_of(3) {
        1
    } else {
        0
    }
}

struct Stats {
    worst: u64,
    per_second: BTreeMap<u64, u64>,
    switches: u64,
}

impl Player {
    fn arrive(&mut self, now: u64, spec: &PlayerSpec, rng: &mut Rng) {
        for v in &mut self.videos {
            loop {
                let k = v.next_arrival;
                let display = v.start + k * spec.frame;
                if display.saturating_sub(spec.window * spec.frame) > now {
                    break;
                }
                let imp = importance(k);
                let kind = match imp {
                    2 => 1.5,
                    1 => 1.0,
                    _ => 0.75,
                };
                let f = 1.0 + spec.spread * (2.0 * rng.unit_open() - 1.0);
                let cost = (spec.mean_cost as f64 * v.scale * f * kind).max(1.0) as u64;
                v.frames.insert(
                    k,
                    Frame {
                        left: cost,
                        done_at: None,
                        importance: imp,
                        display,
                    },
                );
                v.next_arrival += 1;
            }
        }
    }

    /// Earliest display time among pending frames.
    fn next_display(&self) -> Option<(u64, usize, u64)> {
        self.videos
            .iter()
            .enumerate()
            .filter_map(|(i, v)| v.frames.iter().next().map(|(&k, f)| (f.display, i, k)))
            .min()
    }

    /// The next own deadline event: a display or an arrival.
    fn next_deadline(&self, spec: &PlayerSpec) -> u64 {
        let arrival = self
            .videos
            .iter()
            .map(|v| {
                (v.start + v.next_arrival * spec.frame).saturating_sub(spec.window * spec.frame)
            })
            .min()
            .unwrap_or(u64::MAX);
        self.next_display().map_or(arrival, |d| d.0.min(arrival))
    }

    /// The most important decode work still worth doing at `now`:
    /// (importance, display time, video, frame). A frame that could not
    /// be finished by its display time even if decoded alone from now on
    /// is skipped (it will be dropped): priority-progress adaptation
    /// cancels work that can no longer pay off, instead of the domino
    /// effect of decoding frames that all miss.
    fn head_be(&self, now: u64) -> Option<(i64, u64, usize, u64)> {
        let mut best: Option<(i64, u64, usize, u64)> = None;
        for (i, v) in self.videos.iter().enumerate() {
            for (&k, f) in &v.frames {
                if f.left == 0 || now.saturating_add(f.left) > f.display {
                    continue;
                }
                let better = best.is_none_or(|b| {
                    (f.importance, std::cmp::Reverse(f.display)) > (b.0, std::cmp::Reverse(b.1))
                });
                if better {
                    best = Some((f.importance, f.display, i, k));
                }
            }
        }
        best
    }

    /// Fig 2.3: an expired display first, else the best decode work.
    fn pick(&self, now: u64, spec: &PlayerSpec) -> Option<(Ev, u64)> {
        if let Some((d, v, k)) = self.next_display() {
            if d <= now {
                return Some((Ev::Display { v, k }, spec.display));
            }
        }
        self.head_be(now).map(|(_, _, v, k)| {
            let left = self.videos[v].frames[&k].left;
            (Ev::Decode { v, k }, left.min(spec.event))
        })
    }

    /// Completes the current event at `now`.
    fn finish(&mut self, now: u64, warmup: u64) {
        let Some((ev, _, total)) = self.current.take() else {
            return;
        };
        match ev {
            Ev::Decode { v, k } => {
                if let Some(f) = self.videos[v].frames.get_mut(&k) {
                    f.left = f.left.saturating_sub(total);
                    if f.left == 0 {
                        f.done_at = Some(now);
                    }
                }
            }
            Ev::Display { v, k } => {
                let video = &mut self.videos[v];
                if let Some(f) = video.frames.remove(&k) {
                    if f.display >= warmup {
                        // Shown only when decoded by its display time: a
                        // late display does not buy decoding time.
                        if f.done_at.is_some_and(|d| d <= f.display) {
                            video.shown += 1;
                        } else {
                            video.dropped += 1;
                        }
                    }
                }
            }
        }
    }
}

fn coop_poll(
    hsi: &mut Hsi,
    now: u64,
    t: ThreadId,
    deadline: u64,
    be: Option<(i64, u64)>,
) -> Result<(), String> {
    let msg = poll_msg(deadline, be);
    hsi.thread_msg(Instant(now), t, &msg)
        .map_err(|e| e.to_string())
}

/// OUT of the last `coop_poll`: (yield-by time, others' best event).
fn read_out(hsi: &Hsi, t: ThreadId) -> (u64, Option<(i64, u64)>) {
    read_params(hsi.vp_params(hsi.thread_vp(t)))
}

/// Runs one experiment.
///
/// # Errors
/// A scheduler refused to build or reported a protocol violation, or the
/// experiment is empty.
pub fn run_players(e: &PlayerExperiment) -> Result<PlayerReport, String> {
    if e.players == 0 || e.duration <= e.warmup {
        return Err("need at least one player and a duration beyond the warm-up".into());
    }
    let spec = e.spec;
    let (policy, params, cooperative) = match e.sched {
        PlayerSched::Coop { period } => ("coop", Params::new().with("period", dur(period)), true),
        PlayerSched::FairShare { period } => {
            ("coop", Params::new().with("period", dur(period)), false)
        }
        PlayerSched::Ts => ("ts", Params::new(), false),
        PlayerSched::Single => ("coop", Params::new(), false),
    };
    let mut hsi = Hsi::new(1);
    hsi.set_tracing(true);
    let mut trace = Vec::new();
    let mut policed = 0u64;
    let built = hsched_policies::build(policy, &params).map_err(|x| x.to_string())?;
    let root = hsi
        .create_instance(
            Instant(0),
            "root",
            built,
            vec![ParentLink {
                parent: ParentRef::Top {
                    cpus: vec![CpuId(0)],
                },
                params: Params::new(),
            }],
        )
        .map_err(|x| x.to_string())?;
    let mut rng = Rng::new(e.seed, 0x9a7e);
    let mut videos: Vec<Video> = (0..e.players)
        .map(|i| Video {
            // Players start a little apart, as launched by a script.
            start: 100_000_000 + i as u64 * 7_000_000,
            scale: 0.8 + 0.4 * rng.unit_open(),
            next_arrival: 0,
            frames: BTreeMap::new(),
            shown: 0,
            dropped: 0,
        })
        .collect();
    let mut players = Vec::new();
    let groups: Vec<Vec<Video>> = if e.sched == PlayerSched::Single {
        vec![std::mem::take(&mut videos)]
    } else {
        videos.into_iter().map(|v| vec![v]).collect()
    };
    for (i, g) in groups.into_iter().enumerate() {
        let id = hsi
            .create_thread(Instant(0), &format!("player{i}"), root, Params::new())
            .map_err(|x| x.to_string())?;
        players.push(Player {
            id,
            videos: g,
            current: None,
            blocked_until: Some(0),
            polls: 0,
        });
    }
    let mut st = Stats {
        worst: 0,
        per_second: BTreeMap::new(),
        switches: 0,
    };
    let mut last_running: Option<ThreadId> = None;
    let mut overhead = 0u64;
    let mut polls_measured = 0u64;
    let mut now = 0u64;
    while now < e.duration {
        // Wake-ups at their deadline event.
        for p in players.iter_mut() {
            if p.blocked_until.is_some_and(|w| w <= now) {
                p.blocked_until = None;
                hsi.wake(Instant(now), p.id).map_err(|x| x.to_string())?;
            }
        }
        hsi.fire_timers(Instant(now)).map_err(|x| x.to_string())?;
        hsi.drain_trace(&mut trace);
        policed += trace
            .drain(..)
            .filter(|ev| {
                matches!(&ev.kind, TraceKind::Policy { event: PolicyEvent::Note(n), .. } if n.starts_with("coop: policed"))
            })
            .count() as u64;
        let running = hsi.running(CpuId(0));
        if running != last_running {
            if now >= e.warmup {
                st.switches += 1;
            }
            if running.is_some() {
                overhead = e.switch_cost;
            }
            last_running = running;
        }
        now += DT;
        let Some(t) = running else {
            continue;
        };
        if overhead > 0 {
            overhead = overhead.saturating_sub(DT);
            continue;
        }
        let Some(pi) = players.iter().position(|p| p.id == t) else {
            continue;
        };
        let p = &mut players[pi];
        // Progress on the current event, or start one.
        let mut budget = DT;
        while budget > 0 {
            if let Some((_, left, _)) = p.current.as_mut() {
                let used = (*left).min(budget);
                *left -= used;
                budget -= used;
                if *left > 0 {
                    break;
                }
                p.finish(now - budget, e.warmup);
            }
            // Event boundary: the informed point.
            let at = now - budget;
            p.arrive(at, &spec, &mut rng);
            let next = p.pick(at, &spec);
            if cooperative {
                let (out_deadline, out_be) = read_out(&hsi, t);
                let own_be = p.head_be(at).map(|b| (b.0, b.1));
                // The first boundary polls too (joining the domain), as an
                // event loop yields once before running.
                let must = p.polls == 0
                    || at >= out_deadline
                    || match (next, out_be, own_be) {
                        (Some((Ev::Decode { .. }, _)), Some(o), Some(m)) => {
                            (o.0, std::cmp::Reverse(o.1)) > (m.0, std::cmp::Reverse(m.1))
                        }
                        _ => false,
                    };
                if must || next.is_none() {
                    let dl = p.next_deadline(&spec);
                    coop_poll(
                        &mut hsi,
                        at,
                        t,
                        dl,
                        if next.is_none() { None } else { own_be },
                    )?;
                    p.polls += 1;
                    if at >= e.warmup {
                        polls_measured += 1;
                    }
                    if next.is_none() {
                        // Cooperative sleep until the next deadline event.
                        p.blocked_until = Some(dl.max(at + DT));
                        hsi.block(Instant(at), t).map_err(|x| x.to_string())?;
                        break;
                    }
                    if hsi.running(CpuId(0)) != Some(t) {
                        break;
                    }
                }
            }
            match next {
                Some((ev, cost)) => {
                    if let Ev::Display { v, k } = ev {
                        let d = p.videos[v].frames[&k].display;
                        if d >= e.warmup {
                            let tard = at.saturating_sub(d);
                            st.worst = st.worst.max(tard);
                            let w = st.per_second.entry(d / 1_000_000_000).or_insert(0);
                            *w = (*w).max(tard);
                        }
                    }
                    p.current = Some((ev, cost.max(1), cost.max(1)));
                }
                None => {
                    let dl = p.next_deadline(&spec);
                    p.blocked_until = Some(dl.max(at + DT));
                    hsi.block(Instant(at), t).map_err(|x| x.to_string())?;
                    break;
                }
            }
        }
    }
    let secs = (e.duration - e.warmup) as f64 / 1e9;
    let fps: Vec<f64> = players
        .iter()
        .flat_map(|p| p.videos.iter().map(|v| v.shown as f64 / secs))
        .collect();
    let dropped: u64 = players
        .iter()
        .flat_map(|p| p.videos.iter().map(|v| v.dropped))
        .sum();
    let sum: f64 = fps.iter().sum();
    let sq: f64 = fps.iter().map(|x| x * x).sum();
    let jain = if sq > 0.0 {
        sum * sum / (fps.len() as f64 * sq)
    } else {
        0.0
    };
    let intervals: Vec<u64> = st.per_second.values().copied().collect();
    let mean_worst = if intervals.is_empty() {
        0.0
    } else {
        intervals.iter().sum::<u64>() as f64 / intervals.len() as f64 / 1e6
    };
    Ok(PlayerReport {
        worst_tardiness_ms: st.worst as f64 / 1e6,
        mean_interval_worst_ms: mean_worst,
        switches_per_s: st.switches as f64 / secs,
        fps_total: sum,
        fps,
        jain,
        polls_per_s: polls_measured as f64 / secs,
        dropped_per_s: dropped as f64 / secs,
        policed,
    })
}

/// CPU cost of a `coop_poll` that returns to work, and of waking from a
/// cooperative sleep, ns (a system call).
pub const POLL_COST: u64 = 1_000;

/// One player as a thread's workload model (see the module docs).
#[derive(Clone)]
pub struct PlayerWorkload {
    spec: PlayerSpec,
    p: Player,
    cooperative: bool,
    /// The last boundary polled: the next one runs its event.
    just_polled: bool,
    /// Woke from a cooperative sleep and has not polled since: its
    /// best-effort event is unknown to the other members until it does.
    woke: bool,
    /// First display, relative to creation.
    offset: u64,
}

impl std::fmt::Debug for PlayerWorkload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PlayerWorkload")
            .field("spec", &self.spec)
            .field("cooperative", &self.cooperative)
            .field("polls", &self.p.polls)
            .finish()
    }
}

impl PlayerWorkload {
    /// The model of `c` for a thread whose random stream is `rng`: a
    /// per-player cost scale in [0.8, 1.2] and a first display 100 ms
    /// plus up to one frame after creation, both drawn from `rng`.
    ///
    /// # Errors
    /// A zero frame period, decode, event or display cost, or a spread
    /// outside [0, 1).
    pub fn new(c: &hsched_config::PlayerSpec, rng: &Rng) -> Result<Self, String> {
        let pos = |d: hsched_core::Duration, k: &str| {
            if d.as_nanos() == 0 {
                Err(format!("player: `{k}` must be positive"))
            } else {
                Ok(d.as_nanos())
            }
        };
        if !(0.0..1.0).contains(&c.spread) {
            return Err(format!("player: `spread` {} is outside [0, 1)", c.spread));
        }
        let spec = PlayerSpec {
            frame: pos(c.frame, "fps")?,
            mean_cost: pos(c.decode, "decode")?,
            spread: c.spread,
            event: pos(c.event, "event")?,
            display: pos(c.display, "display")?,
            window: c.window,
        };
        let mut r = Rng::new(rng.clone().next_u64(), 0x9a7e);
        let scale = 0.8 + 0.4 * r.unit_open();
        let offset = 100_000_000 + r.below(spec.frame * 3 / 2);
        Ok(PlayerWorkload {
            spec,
            p: Player {
                id: ThreadId(u32::MAX),
                videos: vec![Video {
                    start: 0,
                    scale,
                    next_arrival: 0,
                    frames: BTreeMap::new(),
                    shown: 0,
                    dropped: 0,
                }],
                current: None,
                blocked_until: None,
                polls: 0,
            },
            cooperative: c.cooperative,
            just_polled: false,
            woke: false,
            offset,
        })
    }

    /// Whether it (still) calls `coop_poll`.
    pub fn cooperative(&self) -> bool {
        self.cooperative
    }

    /// `coop_poll` calls so far.
    pub fn polls(&self) -> u64 {
        self.p.polls
    }

    /// Created at `cx.now`, blocked: sleep until the first frame's data.
    pub(crate) fn start(&mut self, cx: &mut WCtx<'_>) -> Next {
        self.p.videos[0].start = cx.now.saturating_add(self.offset);
        let dl = self.p.next_deadline(&self.spec);
        cx.arm(dl);
        Next::Block
    }

    /// Woke from sleep at its next deadline event: the cooperative sleep
    /// was a `coop_poll` itself, so the loop runs its event at once, and
    /// polls at its first boundary on a processor (to tell the domain its
    /// best-effort work again).
    pub(crate) fn timer(&mut self, cx: &mut WCtx<'_>) -> Next {
        self.p.current = None;
        self.just_polled = true;
        self.woke = true;
        self.boundary(cx, false)
    }

    /// The current event (or poll) finished: a boundary.
    pub(crate) fn done(&mut self, cx: &mut WCtx<'_>) -> Next {
        self.p.finish(cx.now, 0);
        self.boundary(cx, true)
    }

    /// Fig 2.4's loop at an event boundary; `running`: on a processor
    /// (only then can it call `coop_poll`).
    fn boundary(&mut self, cx: &mut WCtx<'_>, running: bool) -> Next {
        let now = cx.now;
        if self.cooperative && cx.shared.sent[cx.me as usize].1 > 0 {
            // The scheduler does not take coop_poll: plain event loop.
            self.cooperative = false;
        }
        let spec = self.spec;
        self.p.arrive(now, &spec, cx.rng);
        let next = self.p.pick(now, &spec);
        if self.cooperative {
            let polled = std::mem::take(&mut self.just_polled);
            let (out_deadline, out_be) = cx.params.map_or((u64::MAX, None), read_params);
            let own_be = self.p.head_be(now).map(|b| (b.0, b.1));
            let must = !polled
                && (self.woke
                    || self.p.polls == 0
                    || now >= out_deadline
                    || match (next, out_be, own_be) {
                        (Some((Ev::Decode { .. }, _)), Some(o), Some(m)) => {
                            (o.0, std::cmp::Reverse(o.1)) > (m.0, std::cmp::Reverse(m.1))
                        }
                        _ => false,
                    });
            if running && (must || next.is_none()) {
                let dl = self.p.next_deadline(&spec);
                cx.shared
                    .msgs
                    .push(poll_msg(dl, if next.is_none() { None } else { own_be }));
                self.p.polls += 1;
                self.woke = false;
                if next.is_some() {
                    self.just_polled = true;
                    return Next::Run(POLL_COST);
                }
            }
        }
        match next {
            Some((ev, cost)) => {
                if let Ev::Display { v, k } = ev {
                    let f = self.p.videos[v].frames[&k];
                    if f.done_at.is_some_and(|d| d <= f.display) {
                        cx.job_with_deadline(f.display);
                    } else {
                        // Not shown at its display time: a missed deadline,
                        // as a skipped video frame is (docs/metrics.md).
                        cx.stats.dropped += 1;
                        cx.stats.misses += 1;
                        cx.missed += 1;
                    }
                }
                let c = cost.max(1);
                self.p.current = Some((ev, c, c));
                Next::Run(c)
            }
            None => {
                let dl = self.p.next_deadline(&spec);
                cx.arm(dl.max(now + 1));
                Next::Block
            }
        }
    }
}

fn poll_msg(deadline: u64, be: Option<(i64, u64)>) -> Msg {
    let mut p = Params::new().with(
        "deadline",
        ParamValue::Int(i64::try_from(deadline).unwrap_or(i64::MAX)),
    );
    if let Some((prio, ts)) = be {
        p.insert("be_priority", ParamValue::Int(prio));
        p.insert(
            "be_timestamp",
            ParamValue::Int(i64::try_from(ts).unwrap_or(i64::MAX)),
        );
    }
    Msg::App {
        kind: "coop_poll".into(),
        params: p,
    }
}

/// OUT of the last `coop_poll` from VP parameters: (yield-by time, others'
/// best event).
fn read_params(p: &Params) -> (u64, Option<(i64, u64)>) {
    let int = |k: &str| match p.get(k) {
        Some(ParamValue::Int(v)) => Some(*v),
        _ => None,
    };
    let deadline = int("out_deadline").map_or(u64::MAX, |v| v.max(0) as u64);
    let be =
        int("out_be_priority").map(|pr| (pr, int("out_be_timestamp").unwrap_or(0).max(0) as u64));
    (deadline, be)
}

fn dur(ns: u64) -> ParamValue {
    ParamValue::Str(format!("{}us", ns / 1_000))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn short(players: usize, sched: PlayerSched) -> PlayerReport {
        let mut e = PlayerExperiment::new(players, sched);
        e.duration = 4_000_000_000;
        e.warmup = 1_000_000_000;
        run_players(&e).expect("runs")
    }

    #[test]
    fn cooperative_polling_beats_fair_share_under_saturation() {
        let coop = short(10, PlayerSched::Coop { period: 20_000_000 });
        let fs1 = short(10, PlayerSched::FairShare { period: 1_000_000 });
        // Several times lower tardiness, fewer switches, more frames.
        assert!(
            coop.worst_tardiness_ms * 3.0 < fs1.worst_tardiness_ms,
            "{coop:?} {fs1:?}"
        );
        assert!(coop.worst_tardiness_ms < 3.0, "{coop:?}");
        assert!(
            coop.switches_per_s * 2.0 < fs1.switches_per_s,
            "{coop:?} {fs1:?}"
        );
        assert!(coop.fps_total > fs1.fps_total, "{coop:?} {fs1:?}");
        assert!(coop.polls_per_s > 0.0 && fs1.polls_per_s == 0.0);
        assert_eq!(coop.policed, 0, "well-behaved players are never policed");
        assert!(coop.jain > 0.95, "{coop:?}");
    }

    #[test]
    fn underload_shows_every_frame_and_runs_are_deterministic() {
        let a = short(4, PlayerSched::Coop { period: 20_000_000 });
        assert_eq!(a.fps.len(), 4);
        for f in &a.fps {
            assert!((f - 24.0).abs() < 0.5, "{a:?}");
        }
        let b = short(4, PlayerSched::Coop { period: 20_000_000 });
        assert_eq!(a, b);
    }

    #[test]
    fn empty_experiments_are_refused() {
        assert!(run_players(&PlayerExperiment::new(0, PlayerSched::Ts)).is_err());
    }
}
