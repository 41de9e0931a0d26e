//! The dispatcher, its queues and the cooperative yield (Sinha 2007, Figs
//! 2.3–2.4).

use std::cmp::Reverse;
use std::collections::BTreeSet;

/// A source of monotonic time in nanoseconds that can also wait.
pub trait Clock {
    /// The current time, nanoseconds.
    fn now_ns(&self) -> u64;
    /// Waits until `t` (returns at once when `t` has passed).
    fn sleep_until(&mut self, t: u64);
}

/// A clock that only moves when told: sleeping jumps to the wake-up time.
/// For tests and simulations.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ManualClock {
    now: u64,
}

impl ManualClock {
    /// A clock reading `now`.
    pub fn new(now: u64) -> Self {
        ManualClock { now }
    }
    /// Moves the clock forward by `ns`.
    pub fn advance(&mut self, ns: u64) {
        self.now = self.now.saturating_add(ns);
    }
}

impl Clock for ManualClock {
    fn now_ns(&self) -> u64 {
        self.now
    }
    fn sleep_until(&mut self, t: u64) {
        self.now = self.now.max(t);
    }
}

/// The process's monotonic clock (`std::time::Instant`), sleeping with
/// `std::thread::sleep`.
#[derive(Clone, Copy, Debug)]
pub struct SystemClock {
    origin: std::time::Instant,
}

impl Default for SystemClock {
    fn default() -> Self {
        SystemClock {
            origin: std::time::Instant::now(),
        }
    }
}

impl Clock for SystemClock {
    fn now_ns(&self) -> u64 {
        u64::try_from(self.origin.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }
    fn sleep_until(&mut self, t: u64) {
        let now = self.now_ns();
        if t > now {
            std::thread::sleep(std::time::Duration::from_nanos(t - now));
        }
    }
}

/// When an event becomes eligible and how it is ordered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum When {
    /// A deadline event: not eligible before this absolute time (ns); once
    /// eligible it runs before any best-effort event.
    Deadline(u64),
    /// A best-effort event.
    BestEffort(BestEffortKey),
}

/// The order of a best-effort event: larger `priority` first, then earlier
/// `timestamp`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BestEffortKey {
    /// Importance; larger is more important.
    pub priority: i64,
    /// Secondary key (the thesis overloads the event's time); earlier first.
    pub timestamp: u64,
}

/// The IN parameter of `coop_poll` (Sinha 2007, §2.1.3): the caller's own most
/// important pending events, proxies excluded.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PollIn {
    /// Release time of the earliest own deadline event.
    pub deadline: Option<u64>,
    /// The most important own best-effort event.
    pub best_effort: Option<BestEffortKey>,
}

/// The OUT parameter of `coop_poll`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PollOut {
    /// The time by which the caller must yield again (the end of the slice
    /// the scheduler granted; §2.3.2). `None`: no limit.
    pub deadline: Option<u64>,
    /// The most important best-effort event of the *other* members of the
    /// caller's domain.
    pub best_effort: Option<BestEffortKey>,
}

/// The scheduler side of cooperative polling: gives up the processor and
/// returns when the caller should run again.
pub trait CoopPoll {
    /// Called by the cooperative yield with the caller's events. Returns
    /// when the caller is to run again; may sleep on `clock` (cooperative
    /// sleep until `input.deadline` when `input.best_effort` is `None`).
    fn coop_poll(&mut self, clock: &mut dyn Clock, input: &PollIn) -> PollOut;
}

/// An event's identity, valid for the loop that made it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EventId(pub usize);

/// What runs when an event is dispatched.
pub type Handler = Box<dyn FnMut(&mut Handle<'_>) + Send>;

/// Counters of one loop.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RunStats {
    /// Events whose handlers ran.
    pub dispatched: u64,
    /// Calls to `coop_poll`.
    pub polls: u64,
    /// Sleeps until the next deadline event (non-cooperative mode, or a
    /// cooperative sleep the poller left to the loop).
    pub sleeps: u64,
}

/// Deadline queue key: (release time, submission sequence, event).
type DKey = (u64, u64, usize);
/// Best-effort queue key: (priority, larger first; timestamp; sequence; event).
type BKey = (Reverse<i64>, u64, u64, usize);

#[derive(Clone, Copy, Debug)]
enum Queued {
    D(DKey),
    B(BKey),
}

struct Slot {
    handler: Option<Handler>,
    queued: Option<Queued>,
    proxy: bool,
}

/// The queues and flags a handler can reach through [`Handle`].
struct Queues {
    slots: Vec<Slot>,
    deadline: BTreeSet<DKey>,
    best: BTreeSet<BKey>,
    seq: u64,
    stop: bool,
    now: u64,
}

/// The deadline proxy (Fig 2.4 `coop_deadline_event`).
const PROXY_DEADLINE: usize = 0;
/// The best-effort proxy (Fig 2.4 `coop_best_effort_event`).
const PROXY_BEST: usize = 1;

impl Queues {
    fn new() -> Self {
        let proxy = || Slot {
            handler: None,
            queued: None,
            proxy: true,
        };
        Queues {
            slots: vec![proxy(), proxy()],
            deadline: BTreeSet::new(),
            best: BTreeSet::new(),
            seq: 0,
            stop: false,
            now: 0,
        }
    }

    fn event(&mut self, handler: Handler) -> EventId {
        self.slots.push(Slot {
            handler: Some(handler),
            queued: None,
            proxy: false,
        });
        EventId(self.slots.len() - 1)
    }

    fn submit(&mut self, id: usize, when: When) -> bool {
        let seq = self.seq;
        let Some(slot) = self.slots.get_mut(id) else {
            return false;
        };
        if slot.queued.is_some() {
            return false;
        }
        self.seq += 1;
        match when {
            When::Deadline(at) => {
                let k = (at, seq, id);
                slot.queued = Some(Queued::D(k));
                self.deadline.insert(k);
            }
            When::BestEffort(b) => {
                let k = (Reverse(b.priority), b.timestamp, seq, id);
                slot.queued = Some(Queued::B(k));
                self.best.insert(k);
            }
        }
        true
    }

    fn cancel(&mut self, id: usize) -> bool {
        let Some(q) = self.slots.get_mut(id).and_then(|s| s.queued.take()) else {
            return false;
        };
        match q {
            Queued::D(k) => self.deadline.remove(&k),
            Queued::B(k) => self.best.remove(&k),
        }
    }

    /// The next event to dispatch at `now` (Fig 2.3): an expired deadline
    /// event first, else the head best-effort event.
    fn head(&self, now: u64) -> Option<usize> {
        match self.deadline.first() {
            Some(&(at, _, id)) if at <= now => Some(id),
            _ => self.best.first().map(|k| k.3),
        }
    }
}

/// What an event handler can do: read the time, submit and cancel events,
/// create events, stop the loop.
pub struct Handle<'a> {
    q: &'a mut Queues,
    me: EventId,
}

impl Handle<'_> {
    /// The time the event was dispatched at.
    pub fn now(&self) -> u64 {
        self.q.now
    }
    /// The event being dispatched.
    pub fn me(&self) -> EventId {
        self.me
    }
    /// Creates an event (not yet submitted).
    pub fn event(&mut self, handler: impl FnMut(&mut Handle<'_>) + Send + 'static) -> EventId {
        self.q.event(Box::new(handler))
    }
    /// As [`EventLoop::submit`].
    pub fn submit(&mut self, id: EventId, when: When) -> bool {
        user(id) && self.q.submit(id.0, when)
    }
    /// As [`EventLoop::cancel`].
    pub fn cancel(&mut self, id: EventId) -> bool {
        user(id) && self.q.cancel(id.0)
    }
    /// Ends `run` once this handler returns (Fig 2.1 `stop`).
    pub fn stop(&mut self) {
        self.q.stop = true;
    }
}

/// Proxy slots are not reachable through the public API.
fn user(id: EventId) -> bool {
    id.0 > PROXY_BEST
}

/// A per-thread event dispatcher (Sinha 2007, Fig 2.1).
pub struct EventLoop<C: Clock> {
    q: Queues,
    clock: C,
    coop: Option<Box<dyn CoopPoll + Send>>,
    stats: RunStats,
}

impl<C: Clock> EventLoop<C> {
    /// A non-cooperative loop (Fig 2.3) on `clock`.
    pub fn new(clock: C) -> Self {
        EventLoop {
            q: Queues::new(),
            clock,
            coop: None,
            stats: RunStats::default(),
        }
    }

    /// A cooperative loop (Fig 2.4): yields through `poller`.
    pub fn cooperative(clock: C, poller: Box<dyn CoopPoll + Send>) -> Self {
        let mut l = Self::new(clock);
        l.coop = Some(poller);
        l
    }

    /// The clock.
    pub fn clock(&self) -> &C {
        &self.clock
    }

    /// The clock, mutably (tests move a [`ManualClock`]).
    pub fn clock_mut(&mut self) -> &mut C {
        &mut self.clock
    }

    /// Counters so far.
    pub fn stats(&self) -> RunStats {
        self.stats
    }

    /// Creates an event with its handler; submit it with [`Self::submit`].
    pub fn event(&mut self, handler: impl FnMut(&mut Handle<'_>) + Send + 'static) -> EventId {
        self.q.event(Box::new(handler))
    }

    /// Inserts the event into its queue. Idempotent: returns `false`, with
    /// no effect, when the event is already submitted or unknown.
    pub fn submit(&mut self, id: EventId, when: When) -> bool {
        user(id) && self.q.submit(id.0, when)
    }

    /// Removes the event from its queue. Idempotent: returns `false`, with
    /// no effect, when it is not submitted or unknown.
    pub fn cancel(&mut self, id: EventId) -> bool {
        user(id) && self.q.cancel(id.0)
    }

    /// Whether the event is submitted.
    pub fn is_submitted(&self, id: EventId) -> bool {
        user(id) && self.q.slots.get(id.0).is_some_and(|s| s.queued.is_some())
    }

    /// Number of submitted events, proxies excluded.
    pub fn pending(&self) -> usize {
        let proxies = [PROXY_DEADLINE, PROXY_BEST]
            .iter()
            .filter(|&&p| self.q.slots[p].queued.is_some())
            .count();
        self.q.deadline.len() + self.q.best.len() - proxies
    }

    /// Asks `run` to return before the next dispatch (callable between runs
    /// too: the next `run` clears it).
    pub fn stop(&mut self) {
        self.q.stop = true;
    }

    /// Dispatches events until a handler calls [`Handle::stop`] or, when
    /// nothing is pending, the yield stops the loop (Fig 2.3). An event is
    /// taken off its queue before its handler runs, so a handler may
    /// resubmit its own event.
    pub fn run(&mut self) -> RunStats {
        self.q.stop = false;
        while !self.q.stop {
            let now = self.clock.now_ns();
            self.q.now = now;
            match self.q.head(now) {
                Some(id) => {
                    self.q.cancel(id);
                    if self.q.slots[id].proxy {
                        self.yield_now();
                    } else {
                        self.dispatch(id);
                    }
                }
                None => self.yield_now(),
            }
        }
        self.stats
    }

    fn dispatch(&mut self, id: usize) {
        let Some(mut h) = self.q.slots[id].handler.take() else {
            return;
        };
        self.stats.dispatched += 1;
        h(&mut Handle {
            q: &mut self.q,
            me: EventId(id),
        });
        self.q.slots[id].handler = Some(h);
    }

    /// The yield of Fig 2.3 (non-cooperative: sleep until the next
    /// deadline event) or Fig 2.4 (cooperative: `coop_poll` and the proxy
    /// events). `run` calls it when nothing is eligible or a proxy reaches
    /// the head; an application may call it before `run` to learn OUT
    /// first. With nothing pending it stops the loop.
    pub fn yield_now(&mut self) {
        // Proxies first: the IN parameter carries only own events, so a
        // process can never be told to yield to itself.
        self.q.cancel(PROXY_DEADLINE);
        self.q.cancel(PROXY_BEST);
        let head_deadline = self.q.deadline.first().map(|k| k.0);
        let head_best = self.q.best.first().map(|k| BestEffortKey {
            priority: k.0 .0,
            timestamp: k.1,
        });
        if head_deadline.is_none() && head_best.is_none() {
            self.q.stop = true;
            return;
        }
        let Some(poller) = self.coop.as_mut() else {
            if let Some(at) = head_deadline {
                if head_best.is_none() {
                    self.stats.sleeps += 1;
                    self.clock.sleep_until(at);
                }
            }
            return;
        };
        let input = PollIn {
            deadline: head_deadline,
            best_effort: head_best,
        };
        self.stats.polls += 1;
        let out = poller.coop_poll(&mut self.clock, &input);
        if let Some(d) = out.deadline {
            self.q.submit(PROXY_DEADLINE, When::Deadline(d));
        }
        match (out.best_effort, head_best) {
            // Without own best-effort work the proxy would only send the
            // process straight back into coop_poll (decision; Fig 2.4
            // submits it unconditionally).
            (Some(b), Some(_)) => {
                self.q.submit(PROXY_BEST, When::BestEffort(b));
            }
            (_, None) => {
                if let Some(at) = head_deadline {
                    // Cooperative sleep the poller did not perform itself.
                    if self.clock.now_ns() < at {
                        self.stats.sleeps += 1;
                        self.clock.sleep_until(at);
                    }
                }
            }
            (None, Some(_)) => {}
        }
    }
}
