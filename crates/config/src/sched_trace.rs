//! Linux scheduler traces of real programs, turned into rt-app tasks that
//! the simulator and live mode run.
//!
//! A trace of the `sched_switch` and `sched_wakeup` tracepoints says, for
//! every thread, when it became runnable, when it ran and when it blocked.
//! [`parse_sched_trace`] reads one and cuts each thread's history into
//! *bursts*: the CPU time it used from a wake-up to the block that ended it
//! (summed over the slices it ran, preemptions included), and the time it
//! then slept until its next wake-up. [`SchedTrace::to_rtapp`] writes
//! chosen threads as rt-app tasks (`run`/`sleep` events, in microseconds,
//! with the first wake-up as the task's `delay`), so the same demand can be
//! replayed under any hierarchy: `hsched sim FILE --workload app.json`,
//! `hsched run`, or rt-app itself.
//!
//! What a replay keeps and what it cannot know: the CPU each burst used
//! and the sleeps between bursts are the recorded ones, so a thread that
//! the replaying hierarchy delays sleeps as long as it did, and its later
//! bursts drift later, as a program that sleeps for fixed intervals would.
//! A thread that waited for a timer, another thread or a device in the
//! recording is replayed as sleeping for the time it waited then; its
//! dependencies are not. Time stolen from the thread while it ran
//! (interrupts) is counted as its CPU time, as the trace cannot tell.
//!
//! Accepted line formats, mixed freely (lines of other events, comments and
//! headers are skipped):
//! - ftrace's own (`/sys/kernel/tracing/trace`, `trace_pipe`,
//!   `trace-cmd report -R`): `TASK-PID [CPU] FLAGS TIMESTAMP: sched_switch:
//!   prev_comm=… prev_pid=… prev_prio=… prev_state=S ==> next_comm=…
//!   next_pid=… next_prio=…` and `sched_wakeup: comm=… pid=… prio=…`;
//! - `perf script` (`sched:sched_switch:` with the same fields);
//! - `trace-cmd report`'s default form: `sched_switch: COMM:PID [PRIO]
//!   STATE ==> COMM:PID [PRIO]` and `sched_wakeup: COMM:PID [PRIO] …`.

use crate::error::{closest, ConfigError, ConfigErrors};
use crate::read::printable;
use hsched_core::time::MAX_PARSED;
use hsched_core::Duration;
use std::collections::BTreeMap;

/// A parsed trace: every thread that appears in it, by pid.
#[derive(Clone, Debug, PartialEq)]
pub struct SchedTrace {
    /// The file, for diagnostics.
    pub file: String,
    /// First and last timestamp in the trace, in nanoseconds of the trace
    /// clock.
    pub start_ns: u64,
    /// See `start_ns`.
    pub end_ns: u64,
    /// The threads (pid 0, the idle task, is left out).
    pub threads: BTreeMap<u32, TracedThread>,
    /// Lines of other events that were skipped.
    pub skipped: usize,
    /// Skipped lines whose event name looks like one of those read,
    /// misspelled (`sched_swtich`): how many, and the first one's line and
    /// name (`hsched import` warns about them).
    pub misnamed: Option<(usize, u32, String)>,
    /// The longest stretch with no event at all, `None` with a single
    /// event (see [`SchedTrace::clock_jump`]).
    pub longest_silence: Option<Silence>,
    /// Lines whose time is more than `BACKWARDS_MAX` (1 ms) before a line above
    /// them (the trace is read in time order): how many, and the first
    /// one's line and how far back it goes (`hsched import` warns).
    pub backwards: Option<(usize, u32, Duration)>,
}

/// How far a line's time may go back before the trace is taken for
/// edited or joined: merged per-processor buffers print a few
/// microseconds out of order.
pub const BACKWARDS_MAX: Duration = Duration::from_millis(1);

/// A stretch of a trace with no `sched_switch` or `sched_wakeup` event.
#[derive(Clone, Debug, PartialEq)]
pub struct Silence {
    /// Line (1-based) of the event before it.
    pub from_line: u32,
    /// Line (1-based) of the event after it.
    pub to_line: u32,
    /// How long it lasts.
    pub length: Duration,
    /// The mean time between the trace's other events (`None` with only
    /// two events).
    pub usual: Option<Duration>,
    /// The threads (pids) charged CPU time across it: running, or
    /// runnable until a switch-out whose switch-in the trace lacks.
    pub charged: Vec<u32>,
}

/// One thread's recorded history.
#[derive(Clone, Debug, PartialEq)]
pub struct TracedThread {
    /// Thread id.
    pub pid: u32,
    /// Its name, as last seen in the trace (a program's name changes at
    /// `exec`), each control or invisible formatting character replaced
    /// by `?`: it is printed, and becomes a task name.
    pub comm: String,
    /// Time from the start of the trace to its first recorded wake-up (or
    /// first slice on a processor).
    pub first_wake: Duration,
    /// Its bursts, in order.
    pub bursts: Vec<Burst>,
    /// Whether the trace saw it exit.
    pub exited: bool,
    /// Slices whose start the trace did not show (a switch-out with no
    /// switch-in before it, which some kernels do not trace when a
    /// processor leaves its idle task): each was taken to start when the
    /// thread last became runnable, an upper bound, exact when it ran at
    /// once on an idle processor.
    pub estimated: usize,
    /// Switch-outs that could not be placed in any burst (no wake-up or
    /// switch-in traced since it last blocked): CPU time the replay lacks.
    pub lost: usize,
}

/// CPU used from one wake-up to the next block, and the sleep after it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Burst {
    /// CPU time used.
    pub run: Duration,
    /// Time blocked after it, until the next wake-up (or the end of the
    /// trace); `None` for the last burst of a thread that exited or was
    /// still runnable when the trace ended.
    pub sleep: Option<Duration>,
}

impl TracedThread {
    /// Total CPU time of its bursts.
    pub fn cpu(&self) -> Duration {
        self.bursts
            .iter()
            .fold(Duration::ZERO, |a, b| a.saturating_add(b.run))
    }
}

/// One scheduler event of a line.
#[derive(Clone, Debug, PartialEq)]
enum Event {
    Switch {
        prev_pid: u32,
        prev_comm: String,
        /// Still runnable (state `R` or `R+`): preempted, not blocked.
        prev_runnable: bool,
        /// Exited (state `X` or `Z`).
        prev_dead: bool,
        next_pid: u32,
        next_comm: String,
    },
    Wakeup {
        pid: u32,
        comm: String,
    },
}

/// Where a thread stands while the trace is replayed into bursts.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Phase {
    Blocked {
        since: u64,
    },
    /// Runnable since `since` (woken, or preempted), not running.
    Runnable {
        since: u64,
    },
    Running {
        since: u64,
    },
}

struct Builder {
    thread: TracedThread,
    phase: Phase,
    /// CPU of the burst in progress (one is, unless `phase` is `Blocked`).
    used: u64,
    /// Whether CPU time across the trace's longest silence was charged to
    /// this thread.
    across: bool,
}

/// Bad lines reported one by one; the rest are counted.
const MAX_ERRORS: usize = 20;

/// Reads a scheduler trace (see the module documentation for the formats).
///
/// # Errors
/// A line of a `sched_switch` or `sched_wakeup` event whose fields cannot
/// be read (with its line and column), or a trace with no such event.
pub fn parse_sched_trace(text: &str, file: &str) -> Result<SchedTrace, ConfigErrors> {
    let mut events = Vec::new();
    let mut errors = Vec::new();
    let mut skipped = 0;
    let mut misnamed: Option<(usize, u32, String)> = None;
    let mut backwards: Option<(usize, u32, Duration)> = None;
    let mut latest = 0;
    for (k, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        match parse_line(line) {
            Ok(Some((at, ev))) => {
                if latest - at.min(latest) > BACKWARDS_MAX.as_nanos() {
                    let first = backwards.get_or_insert((0, k as u32 + 1, Duration(latest - at)));
                    first.0 += 1;
                }
                latest = latest.max(at);
                events.push((at, k, ev));
            }
            Ok(None) => {
                skipped += 1;
                if let Some(name) = misnamed_event(line) {
                    let first = misnamed.get_or_insert((0, k as u32 + 1, name.to_string()));
                    first.0 += 1;
                }
            }
            Err((col, message, expected)) => {
                // Byte offset to 1-based character column (an offset that is
                // not on a character boundary counts up to the line's end).
                let col = line.get(..col).unwrap_or(line).chars().count() as u32 + 1;
                let mut e = ConfigError::new(file, k as u32 + 1, col, message).expected(expected);
                e.source_line = Some(line.to_string());
                errors.push(e);
            }
        }
    }
    if !errors.is_empty() {
        if errors.len() > MAX_ERRORS {
            let more = errors.len() - MAX_ERRORS;
            errors.truncate(MAX_ERRORS);
            errors.push(ConfigError::new(
                file,
                0,
                0,
                format!("and {more} more event lines that cannot be read"),
            ));
        }
        return Err(ConfigErrors(errors));
    }
    if events.is_empty() {
        return Err(ConfigErrors::one(
            ConfigError::new(
                file,
                0,
                0,
                "no sched_switch or sched_wakeup event in the trace",
            )
            .expected("a trace of the sched:sched_switch and sched:sched_wakeup tracepoints")
            .hint("see docs/trace-replay.md for how to record one"),
        ));
    }
    // Per-CPU buffers are merged by time, but not always in order (two
    // events can be printed out of order across processors); the sort is
    // stable, so equal times keep the file's order.
    events.sort_by_key(|&(at, k, _)| (at, k));
    let start_ns = events[0].0;
    let end_ns = events[events.len() - 1].0;
    let mut silence = longest_silence(&events, end_ns - start_ns);
    let bounds = silence.as_ref().map_or((0, u64::MAX), |s| s.1);
    let mut threads: BTreeMap<u32, Builder> = BTreeMap::new();
    for (at, _, ev) in events {
        match ev {
            Event::Wakeup { pid, comm } => {
                if let Some(b) = builder(&mut threads, pid, &comm, at) {
                    b.wake(at, start_ns);
                }
            }
            Event::Switch {
                prev_pid,
                prev_comm,
                prev_runnable,
                prev_dead,
                next_pid,
                next_comm,
            } => {
                if let Some(b) = builder(&mut threads, prev_pid, &prev_comm, at) {
                    b.switch_out(at, prev_runnable, prev_dead, bounds);
                }
                if let Some(b) = builder(&mut threads, next_pid, &next_comm, at) {
                    b.switch_in(at, start_ns);
                }
            }
        }
    }
    let threads = threads
        .into_iter()
        .filter_map(|(pid, mut b)| {
            b.finish(end_ns, bounds);
            if let Some(s) = silence.as_mut().filter(|_| b.across) {
                s.0.charged.push(pid);
            }
            (!b.thread.bursts.is_empty()).then_some((pid, b.thread))
        })
        .collect();
    Ok(SchedTrace {
        file: file.to_string(),
        start_ns,
        end_ns,
        threads,
        skipped,
        misnamed,
        longest_silence: silence.map(|s| s.0),
        backwards,
    })
}

/// The longest gap between consecutive events (time order; the first of
/// equal gaps), with the mean of the others, and its start and end.
fn longest_silence(events: &[(u64, usize, Event)], span: u64) -> Option<(Silence, (u64, u64))> {
    let (k, length) = events
        .windows(2)
        .enumerate()
        .map(|(k, w)| (k, w[1].0 - w[0].0))
        .fold(None, |best: Option<(usize, u64)>, (k, gap)| match best {
            Some((_, g)) if g >= gap => best,
            _ => Some((k, gap)),
        })?;
    let others = events.len() as u64 - 2;
    let usual = (span - length).checked_div(others).map(Duration);
    let silence = Silence {
        from_line: events[k].1 as u32 + 1,
        to_line: events[k + 1].1 as u32 + 1,
        length: Duration(length),
        usual,
        charged: Vec::new(),
    };
    Some((silence, (events[k].0, events[k + 1].0)))
}

/// The history of thread `pid` (first seen at `at`), its name brought up
/// to date; `None` for the idle task.
fn builder<'a>(
    threads: &'a mut BTreeMap<u32, Builder>,
    pid: u32,
    comm: &str,
    at: u64,
) -> Option<&'a mut Builder> {
    if pid == 0 {
        return None;
    }
    let comm = printable(comm);
    let b = threads.entry(pid).or_insert_with(|| Builder {
        thread: TracedThread {
            pid,
            comm: comm.clone(),
            first_wake: Duration::ZERO,
            bursts: Vec::new(),
            exited: false,
            estimated: 0,
            lost: 0,
        },
        phase: Phase::Blocked { since: at },
        used: 0,
        across: false,
    });
    if b.thread.comm != comm && !comm.is_empty() {
        b.thread.comm = comm;
    }
    Some(b)
}

impl Builder {
    fn wake(&mut self, at: u64, start: u64) {
        if let Phase::Blocked { since } = self.phase {
            self.begin(at, since, start);
            self.phase = Phase::Runnable { since: at };
        }
    }

    /// A burst begins at `at`: the sleep since `since` ends the previous
    /// one, or this is the first.
    fn begin(&mut self, at: u64, since: u64, start: u64) {
        if let Some(last) = self.thread.bursts.last_mut() {
            last.sleep = Some(Duration(at.saturating_sub(since)));
        } else {
            self.thread.first_wake = Duration(at.saturating_sub(start));
        }
        self.used = 0;
    }

    fn switch_in(&mut self, at: u64, start: u64) {
        match self.phase {
            // Woken before the trace began, or the wake-up was not traced.
            Phase::Blocked { since } => self.begin(at, since, start),
            Phase::Runnable { .. } => {}
            // Two switch-ins in a row (a lost event): keep the first.
            Phase::Running { .. } => return,
        }
        self.phase = Phase::Running { since: at };
    }

    /// `silence`: start and end of the trace's longest silence.
    fn switch_out(&mut self, at: u64, runnable: bool, dead: bool, silence: (u64, u64)) {
        let since = match self.phase {
            Phase::Running { since } => since,
            Phase::Runnable { since } => {
                self.thread.estimated += 1;
                since
            }
            Phase::Blocked { .. } => {
                // Running since before the trace began (its slice so far is
                // unknown; before the first burst nothing is missing yet), or
                // a wake-up and a switch-in were both lost: no burst is
                // opened until it wakes again.
                if !self.thread.bursts.is_empty() {
                    self.thread.lost += 1;
                }
                if !runnable {
                    self.phase = Phase::Blocked { since: at };
                }
                self.thread.exited |= dead;
                return;
            }
        };
        self.charge(since, at, silence);
        if runnable {
            self.phase = Phase::Runnable { since: at };
            return;
        }
        self.close();
        self.phase = Phase::Blocked { since: at };
        self.thread.exited |= dead;
    }

    /// CPU time from `since` to `at`; `silence` as for `switch_out`.
    fn charge(&mut self, since: u64, at: u64, silence: (u64, u64)) {
        self.used += at.saturating_sub(since);
        self.across |= since <= silence.0 && at >= silence.1;
    }

    /// Ends the burst in progress (its sleep is filled in at the next
    /// wake-up).
    fn close(&mut self) {
        self.thread.bursts.push(Burst {
            run: Duration(self.used),
            sleep: None,
        });
        self.used = 0;
    }

    /// The trace ended: a running thread's slice ends there; a sleeping
    /// one's last sleep lasts to the end (so that a replay run over and
    /// over keeps the recorded pace).
    fn finish(&mut self, end: u64, silence: (u64, u64)) {
        match self.phase {
            Phase::Running { since } => {
                self.charge(since, end, silence);
                self.close();
            }
            Phase::Runnable { .. } => self.close(),
            Phase::Blocked { since } if !self.thread.exited && end > since => {
                if let Some(last) = self.thread.bursts.last_mut() {
                    if last.sleep.is_none() {
                        last.sleep = Some(Duration(end.saturating_sub(since)));
                    }
                }
            }
            _ => {}
        }
    }
}

type LineError = (usize, String, String);

/// The event of one line with its time in nanoseconds; `None` for a line
/// of another event.
fn parse_line(line: &str) -> Result<Option<(u64, Event)>, LineError> {
    let Some((name, at_name, fields_at)) = find_event(line) else {
        return Ok(None);
    };
    let at = timestamp(line, at_name)?;
    let fields = &line[fields_at..];
    let ev = match name {
        "sched_switch" => parse_switch(fields, fields_at)?,
        _ => parse_wakeup(fields, fields_at)?,
    };
    Ok(Some((at, ev)))
}

/// The event name of a line (`sched_wakeup_new` counts as a wake-up; a
/// `sched_waking` line, the start of a wake-up, is skipped), where it
/// begins and where its fields begin.
fn find_event(line: &str) -> Option<(&'static str, usize, usize)> {
    for (name, token) in [
        ("sched_switch", "sched_switch:"),
        ("sched_wakeup", "sched_wakeup:"),
        ("sched_wakeup", "sched_wakeup_new:"),
    ] {
        let mut from = 0;
        while let Some(k) = line[from..].find(token) {
            let at = from + k;
            // A name on its own (` sched_switch:`) or after perf's
            // subsystem (`sched:sched_switch:`), not inside a task name.
            let before = line[..at].chars().next_back();
            if matches!(before, Some(' ') | Some('\t') | Some(':')) {
                let start = if line[..at].ends_with("sched:") {
                    at - "sched:".len()
                } else {
                    at
                };
                return Some((name, start, at + token.len()));
            }
            from = at + token.len();
        }
    }
    None
}

/// The event name of a line that [`find_event`] does not read, when it is
/// close to one it reads (a misspelling, or a variant this reader does
/// not know). Clearly unrelated events (`irq_handler_entry`, and
/// `sched_waking`, the start of a wake-up) are not: a trace of more events
/// than these has them on most lines.
fn misnamed_event(line: &str) -> Option<&str> {
    let mut words = line.split_whitespace();
    // The word after the timestamp (`15355.137243:`).
    words.find(|w| {
        w.strip_suffix(':')
            .is_some_and(|t| t.contains('.') && t.bytes().all(|b| b.is_ascii_digit() || b == b'.'))
    })?;
    let word = words.next()?.strip_suffix(':')?;
    let name = word.strip_prefix("sched:").unwrap_or(word);
    let known = ["sched_switch", "sched_wakeup", "sched_wakeup_new"];
    (name != "sched_waking" && closest(name, known).is_some()).then_some(name)
}

/// The timestamp before the event name: the last word ending in `:`,
/// seconds with a fraction.
fn timestamp(line: &str, event_at: usize) -> Result<u64, LineError> {
    let head = line[..event_at].trim_end();
    let word_at = head
        .rfind(|c: char| c.is_ascii_whitespace())
        .map_or(0, |k| k + 1);
    let word = &head[word_at..];
    let bad = || {
        (
            word_at,
            format!("`{word}` is not a timestamp"),
            "the time in seconds before the event name, e.g. `15355.137243:`".to_string(),
        )
    };
    let secs = word.strip_suffix(':').ok_or_else(bad)?;
    let (whole, frac) = secs.split_once('.').unwrap_or((secs, ""));
    if whole.is_empty()
        || !whole.bytes().all(|b| b.is_ascii_digit())
        || !frac.bytes().all(|b| b.is_ascii_digit())
        || frac.len() > 9
    {
        return Err(bad());
    }
    let whole: u64 = whole.parse().map_err(|_| bad())?;
    let frac_ns: u64 = if frac.is_empty() {
        0
    } else {
        frac.parse::<u64>().map_err(|_| bad())? * 10u64.pow(9 - frac.len() as u32)
    };
    // At most the longest duration, so that every time between two events
    // can be written as an rt-app time hsched reads back.
    whole
        .checked_mul(1_000_000_000)
        .and_then(|n| n.checked_add(frac_ns))
        .filter(|&n| n <= MAX_PARSED.as_nanos())
        .ok_or_else(|| {
            (
                word_at,
                format!("`{word}` is later than the latest time a trace may hold"),
                format!(
                    "a time of at most {}.{:09} s",
                    MAX_PARSED.as_nanos() / 1_000_000_000,
                    MAX_PARSED.as_nanos() % 1_000_000_000
                ),
            )
        })
}

/// The text between `key=` and the next ` next_key=` (a name may hold
/// spaces), or to the next space when `until` is `None`.
fn field<'a>(
    fields: &'a str,
    at: usize,
    key: &str,
    until: Option<&str>,
) -> Result<(&'a str, usize), LineError> {
    let missing = || {
        (
            at,
            format!("no `{key}` field"),
            format!("a `{key}…` field, as the tracepoint prints it"),
        )
    };
    let k = find_key(fields, key).ok_or_else(missing)?;
    let from = k + key.len();
    let rest = &fields[from..];
    let end = match until {
        Some(u) => rest.find(u).ok_or_else(missing)?,
        None => rest.find(char::is_whitespace).unwrap_or(rest.len()),
    };
    Ok((&rest[..end], at + from))
}

/// Where `key` starts in `fields` at a word boundary.
fn find_key(fields: &str, key: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(k) = fields[from..].find(key) {
        let at = from + k;
        if at == 0 || fields[..at].ends_with(char::is_whitespace) {
            return Some(at);
        }
        from = at + key.len();
    }
    None
}

fn pid_of(text: &str, at: usize) -> Result<u32, LineError> {
    text.parse().map_err(|_| {
        (
            at,
            format!("`{text}` is not a thread id"),
            "a whole number".to_string(),
        )
    })
}

fn parse_switch(fields: &str, at: usize) -> Result<Event, LineError> {
    if find_key(fields, "prev_pid=").is_some() {
        let (prev_comm, _) = field(fields, at, "prev_comm=", Some(" prev_pid="))?;
        let (prev_pid, p_at) = field(fields, at, "prev_pid=", None)?;
        let (state, s_at) = field(fields, at, "prev_state=", None)?;
        let (next_comm, _) = field(fields, at, "next_comm=", Some(" next_pid="))?;
        let (next_pid, n_at) = field(fields, at, "next_pid=", None)?;
        let (prev_runnable, prev_dead) = state_of(state, s_at)?;
        return Ok(Event::Switch {
            prev_pid: pid_of(prev_pid, p_at)?,
            prev_comm: prev_comm.to_string(),
            prev_runnable,
            prev_dead,
            next_pid: pid_of(next_pid, n_at)?,
            next_comm: next_comm.to_string(),
        });
    }
    // trace-cmd: `COMM:PID [PRIO] STATE ==> COMM:PID [PRIO]`.
    let bad = || {
        (
            at,
            "a sched_switch whose fields cannot be read".to_string(),
            "`prev_comm=… prev_pid=… prev_state=… ==> next_comm=… next_pid=…`, or trace-cmd's `COMM:PID [PRIO] STATE ==> COMM:PID [PRIO]`".to_string(),
        )
    };
    let (left, right) = fields.split_once("==>").ok_or_else(bad)?;
    let left = left.trim_end();
    let state_at = left
        .rfind(|c: char| c.is_ascii_whitespace())
        .ok_or_else(bad)?;
    let state = &left[state_at + 1..];
    let (prev_comm, prev_pid) = comm_pid(&left[..state_at], at).ok_or_else(bad)?;
    let right_at = at + fields.len() - right.len();
    let (next_comm, next_pid) = comm_pid(right, right_at).ok_or_else(bad)?;
    let (prev_runnable, prev_dead) = state_of(state, at + state_at + 1)?;
    Ok(Event::Switch {
        prev_pid: prev_pid?,
        prev_comm,
        prev_runnable,
        prev_dead,
        next_pid: next_pid?,
        next_comm,
    })
}

/// `COMM:PID [PRIO]…` (trace-cmd), `at` being where `text` starts in the
/// line: the name and the id, if the shape fits.
fn comm_pid(text: &str, at: usize) -> Option<(String, Result<u32, LineError>)> {
    let at = at + text.len() - text.trim_start().len();
    let text = text.trim_start();
    let head = match text.find(" [") {
        Some(k) => &text[..k],
        None => text.split_whitespace().next()?,
    };
    let colon = head.rfind(':')?;
    Some((
        head[..colon].to_string(),
        pid_of(&head[colon + 1..], at + colon + 1),
    ))
}

/// (still runnable, exited) from a `prev_state`.
fn state_of(state: &str, at: usize) -> Result<(bool, bool), LineError> {
    if state.is_empty() {
        return Err((
            at,
            "an empty `prev_state`".into(),
            "a task state such as R, R+, S or D".into(),
        ));
    }
    // The kernel's letters (`__print_flags` in the sched_switch format,
    // old and new kernels): `R`, or blocked states joined by `|`, with
    // `+` when preempted. Any other is refused, not taken as blocked.
    let letters = state.strip_suffix('+').unwrap_or(state);
    let runnable = letters == "R";
    let known = |p: &str| p.len() == 1 && "SDTtXZxKWPNI".contains(p);
    if !runnable && !letters.split('|').all(known) {
        return Err((
            at,
            format!("unknown `prev_state` `{state}`"),
            "a Linux task state: R or R+ (still runnable), or S, D, T, t, X, Z, x, K, W, P, N or I, joined by |".into(),
        ));
    }
    let dead = state.contains('X') || state.contains('Z');
    Ok((runnable, dead))
}

fn parse_wakeup(fields: &str, at: usize) -> Result<Event, LineError> {
    if find_key(fields, "pid=").is_some() {
        let comm = match find_key(fields, "comm=") {
            Some(_) => field(fields, at, "comm=", Some(" pid="))?.0.to_string(),
            None => String::new(),
        };
        let (pid, p_at) = field(fields, at, "pid=", None)?;
        return Ok(Event::Wakeup {
            pid: pid_of(pid, p_at)?,
            comm,
        });
    }
    let (comm, pid) = comm_pid(fields, at).ok_or_else(|| {
        (
            at,
            "a sched_wakeup whose fields cannot be read".to_string(),
            "`comm=… pid=…`, or trace-cmd's `COMM:PID [PRIO]`".to_string(),
        )
    })?;
    Ok(Event::Wakeup { pid: pid?, comm })
}

/// A silence is taken for a jump of the trace's clock when it lasts at
/// least this long…
const JUMP_MIN: Duration = Duration::from_secs(1);
/// …and this many times the mean time between the other events.
const JUMP_RATIO: u64 = 100;

impl SchedTrace {
    /// The longest silence, if it looks like a jump of the trace's clock
    /// (two traces joined, a mistyped timestamp) rather than a pause: at
    /// least a second, and a hundred times the usual time between events.
    /// A thread that runs across a jump is charged all of it as CPU time,
    /// and one that sleeps across it sleeps all of it in a replay; a
    /// program that really paused that long is replayed as it ran.
    pub fn clock_jump(&self) -> Option<&Silence> {
        self.longest_silence.as_ref().filter(|s| {
            s.usual.is_some_and(|u| {
                s.length >= JUMP_MIN && s.length.as_nanos() / JUMP_RATIO >= u.as_nanos()
            })
        })
    }

    /// The threads whose name is `comm`, in pid order (as listed, with
    /// `?` for unprintable characters, or as in the trace).
    pub fn by_comm(&self, comm: &str) -> Vec<u32> {
        let comm = printable(comm);
        self.threads
            .values()
            .filter(|t| t.comm == comm)
            .map(|t| t.pid)
            .collect()
    }

    /// An rt-app file (JSON) with one task per thread of `pids`, named
    /// `COMM-PID`: its first wake-up as `delay`, then its bursts as `run`
    /// and `sleep` events in one phase, run once, or over and over when
    /// `repeat` (rt-app `"loop": -1`). Times are rounded to
    /// microseconds on the running total, so a task's CPU time is its
    /// recorded one to the microsecond. `global.duration` covers the trace
    /// (none when `repeat`).
    ///
    /// # Errors
    /// A pid that is not in the trace.
    pub fn to_rtapp(&self, pids: &[u32], repeat: bool) -> Result<String, String> {
        let loops = if repeat { -1 } else { 1 };
        let mut out = String::from("{\n  \"global\": {\n");
        if !repeat {
            let secs = (self.end_ns - self.start_ns).div_ceil(1_000_000_000).max(1);
            if secs > crate::rtapp::MAX_DURATION_S as u64 {
                return Err(format!(
                    "`{}` spans {secs} s, longer than the longest rt-app `global.duration` ({} s)",
                    self.file,
                    crate::rtapp::MAX_DURATION_S
                ));
            }
            out.push_str(&format!("    \"duration\": {secs},\n"));
        }
        out.push_str("    \"default_policy\": \"SCHED_OTHER\"\n  },\n  \"tasks\": {");
        for (n, pid) in pids.iter().enumerate() {
            let t = self
                .threads
                .get(pid)
                .ok_or_else(|| format!("thread {pid} is not in {}", self.file))?;
            let sep = if n == 0 { "\n" } else { ",\n" };
            let name = json_string(&format!("{}-{}", t.comm, t.pid));
            out.push_str(&format!(
                "{sep}    {name}: {{\n      \"loop\": {loops},\n      \"delay\": {},\n      \"phases\": {{\n        \"replay\": {{",
                t.first_wake.0 / 1000
            ));
            let mut events = Vec::new();
            // Running totals, so rounding never accumulates.
            let (mut run_ns, mut run_us, mut sleep_ns, mut sleep_us) = (0u64, 0u64, 0u64, 0u64);
            for b in &t.bursts {
                run_ns += b.run.0;
                let us = (run_ns + 500) / 1000 - run_us;
                run_us += us;
                if us > 0 {
                    events.push(("run", us));
                }
                if let Some(s) = b.sleep {
                    sleep_ns += s.0;
                    let us = (sleep_ns + 500) / 1000 - sleep_us;
                    sleep_us += us;
                    if us > 0 {
                        events.push(("sleep", us));
                    }
                }
            }
            if events.is_empty() {
                events.push(("run", 1));
            }
            for (k, (what, us)) in events.iter().enumerate() {
                let sep = if k == 0 { "\n" } else { ",\n" };
                out.push_str(&format!("{sep}          \"{what}{k}\": {us}"));
            }
            out.push_str("\n        }\n      }\n    }");
        }
        out.push_str("\n  }\n}\n");
        Ok(out)
    }
}

/// `s` as a JSON string.
fn json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const FTRACE: &str = "\
# tracer: nop
#
#           TASK-PID     CPU#  |||||  TIMESTAMP  FUNCTION
          <idle>-0       [000] dNh2.   100.000000: sched_wakeup: comm=app pid=42 prio=120 target_cpu=000
          <idle>-0       [000] d..2.   100.000010: sched_switch: prev_comm=swapper/0 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=app next_pid=42 next_prio=120
             app-42      [000] d..2.   100.002010: sched_switch: prev_comm=app prev_pid=42 prev_prio=120 prev_state=R+ ==> next_comm=Web Content next_pid=7 next_prio=120
     Web Content-7       [000] d..2.   100.003010: sched_switch: prev_comm=Web Content prev_pid=7 prev_prio=120 prev_state=S ==> next_comm=app next_pid=42 next_prio=120
             app-42      [000] d..2.   100.004010: sched_switch: prev_comm=app prev_pid=42 prev_prio=120 prev_state=S ==> next_comm=swapper/0 next_pid=0 next_prio=120
          <idle>-0       [000] dNh2.   100.010000: sched_wakeup: comm=app pid=42 prio=120 target_cpu=000
          <idle>-0       [000] d..2.   100.010005: sched_switch: prev_comm=swapper/0 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=app next_pid=42 next_prio=120
             app-42      [000] d..2.   100.011005: sched_switch: prev_comm=app prev_pid=42 prev_prio=120 prev_state=Z ==> next_comm=swapper/0 next_pid=0 next_prio=120
";

    #[test]
    fn bursts_sum_the_slices_between_wakeup_and_block() {
        let t = parse_sched_trace(FTRACE, "t.trace").unwrap();
        let app = &t.threads[&42];
        assert_eq!(app.comm, "app");
        assert!(app.exited);
        assert_eq!(app.first_wake, Duration(0));
        // 2 ms, preempted (R+), then 1 ms more: one burst of 3 ms; it
        // blocked at 100.004010 and woke at 100.010000.
        assert_eq!(
            app.bursts,
            vec![
                Burst {
                    run: Duration::from_millis(3),
                    sleep: Some(Duration(5_990_000)),
                },
                Burst {
                    run: Duration::from_millis(1),
                    sleep: None,
                },
            ]
        );
        // A name with a space; it ran before the trace saw it wake, and
        // its last sleep lasts to the end of the trace.
        assert_eq!(t.threads[&7].comm, "Web Content");
        assert_eq!(
            t.threads[&7].bursts,
            vec![Burst {
                run: Duration::from_millis(1),
                sleep: Some(Duration(7_995_000)),
            }]
        );
        assert_eq!(t.by_comm("app"), vec![42]);
        assert_eq!(t.skipped, 0);
    }

    #[test]
    fn trace_cmd_and_perf_forms_read_the_same() {
        let trace_cmd = "\
          <idle>-0     [000]   100.000000: sched_wakeup:         app:42 [120] CPU:000
          <idle>-0     [000]   100.000010: sched_switch:         swapper/0:0 [120] R ==> app:42 [120]
             app-42    [000]   100.002010: sched_switch:         app:42 [120] S ==> swapper/0:0 [120]
";
        let perf = "\
         swapper     0 [000]   100.000000:       sched:sched_wakeup: comm=app pid=42 prio=120 target_cpu=000
         swapper     0 [000]   100.000010:       sched:sched_switch: prev_comm=swapper/0 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=app next_pid=42 next_prio=120
             app    42 [000]   100.002010:       sched:sched_switch: prev_comm=app prev_pid=42 prev_prio=120 prev_state=S ==> next_comm=swapper/0 next_pid=0 next_prio=120
";
        let a = parse_sched_trace(trace_cmd, "a").unwrap();
        let b = parse_sched_trace(perf, "b").unwrap();
        assert_eq!(a.threads, b.threads);
        assert_eq!(a.threads[&42].cpu(), Duration::from_millis(2));
    }

    #[test]
    fn a_slice_whose_switch_in_was_not_traced_starts_at_the_wakeup() {
        // Some kernels do not trace a processor leaving its idle task: the
        // thread wakes, then is seen only switching out.
        let text = "\
          <idle>-0       [001] dNh4.   100.000000: sched_wakeup: comm=app pid=42 prio=120 target_cpu=001
             app-42      [001] d..2.   100.002000: sched_switch: prev_comm=app prev_pid=42 prev_prio=120 prev_state=S ==> next_comm=swapper/1 next_pid=0 next_prio=120
          <idle>-0       [001] dNh4.   100.010000: sched_wakeup: comm=app pid=42 prio=120 target_cpu=001
             app-42      [001] d..2.   100.012500: sched_switch: prev_comm=app prev_pid=42 prev_prio=120 prev_state=S ==> next_comm=swapper/1 next_pid=0 next_prio=120
";
        let t = parse_sched_trace(text, "t").unwrap();
        let app = &t.threads[&42];
        assert_eq!(app.estimated, 2);
        assert_eq!(app.lost, 0);
        assert_eq!(
            app.bursts,
            vec![
                Burst {
                    run: Duration::from_millis(2),
                    sleep: Some(Duration::from_millis(8)),
                },
                Burst {
                    run: Duration::from_micros(2_500),
                    sleep: None,
                },
            ]
        );
    }

    #[test]
    fn out_of_order_lines_are_sorted_by_time() {
        let lines: Vec<&str> = FTRACE.lines().collect();
        let mut swapped = lines.clone();
        swapped.swap(3, 4);
        let a = parse_sched_trace(&lines.join("\n"), "a").unwrap();
        let b = parse_sched_trace(&swapped.join("\n"), "b").unwrap();
        assert_eq!(a.threads, b.threads);
    }

    #[test]
    fn a_clock_jump_is_found_with_its_lines_and_who_ran_across_it() {
        let t = parse_sched_trace(FTRACE, "t").unwrap();
        let s = t.longest_silence.as_ref().unwrap();
        assert_eq!((s.from_line, s.to_line), (8, 9));
        assert_eq!(s.length, Duration(5_990_000));
        assert!(t.clock_jump().is_none());
        // A mistyped last switch-out, 1000 s late: app-42 ran across the
        // silence and is charged 1000 s.
        let typo = FTRACE.replace("100.011005: sched_switch", "1100.011005: sched_switch");
        let t = parse_sched_trace(&typo, "t").unwrap();
        let j = t.clock_jump().expect("a jump");
        assert_eq!((j.from_line, j.to_line), (10, 11));
        assert_eq!(j.charged, vec![42]);
        assert_eq!(j.length, Duration(1_000_001_000_000));
        assert!(t.threads[&42].cpu() > Duration::from_secs(1000));
        // The same typo in the middle of the trace: it sorts to the end.
        let typo = FTRACE.replace("100.002010: sched_switch", "1100.002010: sched_switch");
        let j = parse_sched_trace(&typo, "t").unwrap().clock_jump().cloned();
        assert_eq!(j.map(|j| (j.from_line, j.to_line)), Some((11, 6)));
        // A mistyped first event, long before the others: nobody runs
        // across it, but every thread's first wake-up moves 90 s later.
        let early = FTRACE.replace("100.000000: sched_wakeup", "10.000000: sched_wakeup");
        let t = parse_sched_trace(&early, "t").unwrap();
        let j = t.clock_jump().expect("a jump");
        assert_eq!((j.from_line, j.to_line, j.charged.len()), (4, 5, 0));
    }

    #[test]
    fn a_program_that_pauses_regularly_is_no_clock_jump() {
        // A filtered trace of one thread that runs 1 ms every 2 s.
        let mut text = String::new();
        for k in 0..5u64 {
            let at = 100 + 2 * k;
            text.push_str(&format!(
                "<idle>-0 [000] d..2. {at}.000000: sched_switch: prev_comm=swapper/0 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=app next_pid=42 next_prio=120\n\
                 app-42 [000] d..2. {at}.001000: sched_switch: prev_comm=app prev_pid=42 prev_prio=120 prev_state=S ==> next_comm=swapper/0 next_pid=0 next_prio=120\n"
            ));
        }
        let t = parse_sched_trace(&text, "t").unwrap();
        let s = t.longest_silence.as_ref().unwrap();
        assert_eq!(s.length, Duration(1_999_000_000));
        assert!(t.clock_jump().is_none(), "{s:?}");
        // Two events: no usual gap to compare with.
        let two: String = text.lines().take(2).map(|l| format!("{l}\n")).collect();
        let t = parse_sched_trace(&two.replace("100.001000", "900.0"), "t").unwrap();
        assert!(t.longest_silence.as_ref().unwrap().usual.is_none());
        assert!(t.clock_jump().is_none());
    }

    #[test]
    fn a_broken_event_line_is_an_error_with_its_place() {
        let text = "x-1 [000] d..2. 100.0: sched_switch: prev_comm=x prev_pid=one prev_prio=1 prev_state=S ==> next_comm=y next_pid=2 next_prio=1\n";
        let e = parse_sched_trace(text, "bad.trace").unwrap_err();
        let s = e.to_string();
        assert!(s.contains("bad.trace:1:"), "{s}");
        assert!(s.contains("`one` is not a thread id"), "{s}");
        let e = parse_sched_trace("x-1 [000] d..2. soon: sched_wakeup: comm=x pid=1\n", "t")
            .unwrap_err()
            .to_string();
        assert!(e.contains("`soon:` is not a timestamp"), "{e}");
        // A bad id after a name of several-byte characters: the column
        // counts characters.
        let e = parse_sched_trace(
            "  <idle>-0 [000] 1.0: sched_switch:  \u{e9}\u{e9}:x [120] S ==> b:2 [120]\n",
            "mb.trace",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("mb.trace:1:41"), "{e}");
        assert!(e.contains("`x` is not a thread id"), "{e}");
        // Unicode spaces are not field separators (and split no character).
        let e = parse_sched_trace(
            "  x-1 [000]\u{3000}100.5: sched_wakeup: comm=a pid=1\n",
            "u",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("is not a timestamp"), "{e}");
        let many = "x-1 [000] d..2. 1.0: sched_wakeup: comm=x pid=y\n".repeat(25);
        let e = parse_sched_trace(&many, "many.trace").unwrap_err();
        assert_eq!(e.len(), 21);
        assert!(e.to_string().contains("and 5 more event lines"), "{e}");
        let e = parse_sched_trace("nothing here\n", "empty.trace")
            .unwrap_err()
            .to_string();
        assert!(e.contains("no sched_switch or sched_wakeup event"), "{e}");
    }

    #[test]
    fn an_unknown_prev_state_is_an_error_and_the_kernels_states_are_read() {
        let line = |state: &str| {
            format!("x-1 [000] d..2. 100.0: sched_switch: prev_comm=x prev_pid=1 prev_prio=1 prev_state={state} ==> next_comm=y next_pid=2 next_prio=1\n")
        };
        for state in [
            "R", "R+", "S", "D", "D|K", "S+", "I", "P", "T", "t", "X", "Z",
        ] {
            assert!(parse_sched_trace(&line(state), "t").is_ok(), "{state}");
        }
        for state in ["Q", "SD", "S|", "0x200", "r"] {
            let e = parse_sched_trace(&line(state), "st.trace")
                .unwrap_err()
                .to_string();
            assert!(
                e.contains(&format!("unknown `prev_state` `{state}`")),
                "{e}"
            );
            assert!(e.contains("st.trace:1:"), "{e}");
        }
    }

    #[test]
    fn misspelled_event_names_are_counted_and_unrelated_events_are_not() {
        let t = parse_sched_trace(FTRACE, "t").unwrap();
        assert_eq!(t.misnamed, None);
        let other = "\
          <idle>-0       [000] d..2.   100.000001: sched_swtich: prev_comm=a
          <idle>-0       [000] d..2.   100.000002: sched_waking: comm=app pid=42 prio=120 target_cpu=000
          <idle>-0       [000] d.h2.   100.000003: irq_handler_entry: irq=1 name=x
             app-42      [000] d..2.   100.000004: sched:sched_wakeupp: comm=app pid=42
";
        let t = parse_sched_trace(&format!("{FTRACE}{other}"), "t").unwrap();
        assert_eq!(t.skipped, 4);
        assert_eq!(t.misnamed, Some((2, 12, "sched_swtich".to_string())));
    }

    #[test]
    fn rtapp_output_parses_and_keeps_the_cpu_time() {
        let t = parse_sched_trace(FTRACE, "t.trace").unwrap();
        let json = t.to_rtapp(&[42], false).unwrap();
        let w = crate::parse_rtapp(&json, "out.json").unwrap();
        assert_eq!(w.tasks.len(), 1);
        assert_eq!(w.tasks[0].name, "app-42");
        let steps = &w.tasks[0].program.steps;
        use crate::model::Step;
        assert_eq!(
            steps,
            &vec![
                Step::Run(Duration::from_millis(3)),
                Step::Sleep(Duration::from_micros(5_990)),
                Step::Run(Duration::from_millis(1)),
            ]
        );
        assert_eq!(w.tasks[0].program.loops, Some(1));
        assert!(t.to_rtapp(&[9], false).is_err());
        let forever = crate::parse_rtapp(&t.to_rtapp(&[42], true).unwrap(), "f.json").unwrap();
        assert_eq!(forever.tasks[0].program.loops, None);
        assert_eq!(json_string("a\"b\\c\n"), "\"a\\\"b\\\\c\\u000a\"");
    }
}
