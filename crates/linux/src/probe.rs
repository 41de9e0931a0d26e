//! Real programs that behave like the simulator's workload models, so a
//! hierarchy file written for `hsched sim` also runs live: a thread without
//! `exec` runs its `workload` as a forked process of its own. They burn CPU
//! time measured on their own thread clock (`CLOCK_THREAD_CPUTIME_ID`), so
//! "10 ms of work" is 10 ms of CPU whatever the scheduler does, and they
//! sleep with absolute one-shot timers.
//!
//! The same loops serve the `hsched-live probe` commands used by the tests
//! and the measurements in docs/measurements/live-mode.md.

use crate::sys::{self, ProbeSlot};
use hsched_config::{
    timer_turn, MissPolicy, Program, Step, VideoMode, VideoSpec, WorkloadSpec, MPEG_REL_STDDEV,
};
use std::sync::atomic::Ordering;

/// Burns `ns` of this thread's CPU time.
pub fn spin_cpu(ns: u64) {
    let start = sys::thread_cpu_ns();
    while sys::thread_cpu_ns().wrapping_sub(start) < ns {
        std::hint::spin_loop();
    }
}

/// Burns `ns` of this thread's CPU time, or less if the clock reaches
/// `until` (absolute `CLOCK_MONOTONIC`) first; returns whether all of it
/// was burnt.
fn spin_cpu_until(ns: u64, until: u64) -> bool {
    let start = sys::thread_cpu_ns();
    while sys::thread_cpu_ns().wrapping_sub(start) < ns {
        if sys::now_ns() >= until {
            return false;
        }
        std::hint::spin_loop();
    }
    true
}

/// Records one job without a deadline (no lateness, as in the simulator's
/// report).
fn job_without_deadline(slot: Option<&ProbeSlot>) {
    if let Some(s) = slot {
        s.jobs.fetch_add(1, Ordering::Relaxed);
    }
}

/// Publishes the deadline of the job in progress or next, and the
/// interval of the deadlines after it (0: none counted), so that the
/// daemon counts those passed unmet at the end of the run
/// ([`ProbeSlot::misses_at`]). Set for the next job as soon as one is done.
fn pending(slot: Option<&ProbeSlot>, due: u64, every: u64) {
    if let Some(s) = slot {
        s.pending_every.store(every, Ordering::Relaxed);
        s.pending_due.store(due, Ordering::Relaxed);
    }
}

/// Records one job's outcome: a miss if it was late.
fn job(slot: Option<&ProbeSlot>, lateness: i64) {
    job_missing(slot, lateness, u64::from(lateness > 0));
}

/// Records one job that missed `missed` deadlines (the frame renderer's
/// can miss several).
fn job_missing(slot: Option<&ProbeSlot>, lateness: i64, missed: u64) {
    if let Some(s) = slot {
        s.jobs.fetch_add(1, Ordering::Relaxed);
        s.misses.fetch_add(missed, Ordering::Relaxed);
        s.max_lateness.fetch_max(lateness, Ordering::Relaxed);
    }
}

/// A tiny deterministic generator for the random workload models.
struct XorShift(u64);
impl XorShift {
    fn next_f64(&mut self) -> f64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
    fn exp(&mut self, mean: u64) -> u64 {
        (-(1.0 - self.next_f64()).ln() * mean as f64) as u64
    }
    /// Uniform in `[lo, hi]`.
    fn between(&mut self, lo: u64, hi: u64) -> u64 {
        lo + (self.next_f64() * hi.saturating_sub(lo) as f64) as u64
    }
    /// Standard normal (Marsaglia's polar method).
    fn normal(&mut self) -> f64 {
        loop {
            let u = 2.0 * self.next_f64() - 1.0;
            let v = 2.0 * self.next_f64() - 1.0;
            let s = u * u + v * v;
            if s > 0.0 && s < 1.0 {
                return u * (-2.0 * s.ln() / s).sqrt();
            }
        }
    }
}

/// Runs `w` until `end_ns` (absolute `CLOCK_MONOTONIC`; `u64::MAX`: for
/// ever), publishing jobs and misses in `slot`.
pub fn run_workload(w: &WorkloadSpec, slot: Option<&ProbeSlot>, end_ns: u64, seed: u64) {
    if let Some(s) = slot {
        s.max_lateness.store(i64::MIN, Ordering::Relaxed);
        s.used.store(1, Ordering::Relaxed);
    }
    let t0 = sys::now_ns();
    let mut rng = XorShift(seed | 1);
    let before_end = || sys::now_ns() < end_ns;
    match w {
        WorkloadSpec::CpuBound => {
            while before_end() {
                spin_cpu(1_000_000);
            }
        }
        WorkloadSpec::FrameRenderer { work, miss_gap } => {
            frame_renderer(work.as_nanos(), miss_gap.as_nanos(), slot, end_ns);
        }
        WorkloadSpec::Periodic {
            period,
            exec,
            deadline,
            jitter,
            offset,
        } => {
            // As the simulator: job k is released up to `jitter` after its
            // nominal release, and due `deadline` after the nominal one.
            let (period, deadline) = (period.as_nanos().max(1), deadline.as_nanos());
            let mut nominal = t0 + offset.as_nanos();
            pending(slot, nominal + deadline, period);
            while nominal < end_ns {
                sys::sleep_until(nominal + rng.between(0, jitter.as_nanos()));
                spin_cpu(exec.as_nanos());
                job(slot, sys::now_ns() as i64 - (nominal + deadline) as i64);
                nominal += period;
                pending(slot, nominal + deadline, period);
            }
        }
        WorkloadSpec::Video(v) => video(v, slot, end_ns, &mut rng),
        WorkloadSpec::Sporadic {
            min_interarrival,
            max_interarrival,
            exec,
            deadline,
        } => {
            // As the simulator: the first job arrives one inter-arrival
            // time after the start.
            let (min, max) = (
                min_interarrival.as_nanos().max(1),
                max_interarrival.as_nanos(),
            );
            // The jobs behind a pending one arrive at most `max` apart, so
            // counting their deadlines `max` apart at the end of the run
            // misses none that surely passed (exact when min = max).
            let deadline = deadline.as_nanos();
            let mut release = t0 + rng.between(min, max);
            pending(slot, release + deadline, max);
            while release < end_ns {
                sys::sleep_until(release);
                spin_cpu(exec.as_nanos());
                job(slot, sys::now_ns() as i64 - (release + deadline) as i64);
                release += rng.between(min, max);
                pending(slot, release + deadline, max);
            }
        }
        WorkloadSpec::Interactive { think, burst } => {
            while before_end() {
                sys::sleep_until(sys::now_ns() + rng.exp(think.as_nanos()));
                spin_cpu(rng.exp(burst.as_nanos()));
                job_without_deadline(slot);
            }
        }
        WorkloadSpec::BlockingIo { compute, io } => {
            while before_end() {
                spin_cpu(compute.as_nanos());
                job_without_deadline(slot);
                sys::sleep_until(sys::now_ns() + io.as_nanos());
            }
        }
        WorkloadSpec::Program(p) => program(p, slot, end_ns),
        // Simulated only (`Hierarchy::check_live` names such threads before
        // a run): their queues and coop_poll calls have no real counterpart.
        WorkloadSpec::Stage(_) | WorkloadSpec::Player(_) => {
            let kind = w.simulated_only().unwrap_or("simulated");
            crate::diag!(
                "hsched: the `{kind}` workload runs only in the simulator; give the thread `exec`"
            );
        }
    }
}

fn program(p: &Program, slot: Option<&ProbeSlot>, end_ns: u64) {
    let origin = sys::now_ns() + p.delay.as_nanos();
    sys::sleep_until(origin);
    let mut timer_base: Option<u64> = None;
    // The timer steps' periods in program order: the job pending after the
    // k-th timer step waits for the next one's (the program loops).
    let periods: Vec<u64> = p
        .steps
        .iter()
        .filter_map(|s| match s {
            Step::Timer { period, .. } => Some(period.as_nanos()),
            _ => None,
        })
        .collect();
    // As in the simulator: a timer step ends a job (due at its expiry);
    // without one, each turn of the loop is a job with no deadline.
    let has_timer = !periods.is_empty();
    if let Some(per) = periods.first() {
        pending(slot, origin + per, 0);
    }
    let mut timer_steps = 0;
    let mut done = 0u64;
    while sys::now_ns() < end_ns && p.loops.is_none_or(|l| done < l) {
        for s in &p.steps {
            match s {
                Step::Run(d) => spin_cpu(d.as_nanos()),
                Step::Runtime(d) => {
                    let until = sys::now_ns() + d.as_nanos();
                    while sys::now_ns() < until {
                        std::hint::spin_loop();
                    }
                }
                Step::Sleep(d) => sys::sleep_until(sys::now_ns() + d.as_nanos()),
                Step::Timer { period, absolute } => {
                    let now = sys::now_ns();
                    let t = timer_turn(timer_base, origin, period.as_nanos(), *absolute, now);
                    job(slot, now as i64 - t.expiry as i64);
                    timer_base = Some(t.base);
                    timer_steps += 1;
                    let next_period = periods[timer_steps % periods.len()];
                    pending(slot, t.base.saturating_add(next_period), 0);
                    if t.wait {
                        sys::sleep_until(t.expiry);
                    }
                }
            }
        }
        if !has_timer {
            job_without_deadline(slot);
        }
        done += 1;
    }
    if p.loops.is_some_and(|l| done >= l) {
        // The program ended: nothing is pending (as in the simulator,
        // where a thread whose program ended has no job left).
        pending(slot, 0, 0);
    }
}

/// The `srtsim` video player of Banachowski 2002, as the simulator models it (§2.2):
/// a frame starts at its period's start and is due one period later; its
/// CPU time is constant, or its MPEG type's mean with 10 % noise
/// ([`MPEG_REL_STDDEV`]). A frame finished on time sleeps until the next
/// period. A late one either finishes, and the next period starts then
/// (`continue`), or is dropped at its deadline, a miss that is not a job,
/// and the next frame starts there (`skip`).
fn video(v: &VideoSpec, slot: Option<&ProbeSlot>, end_ns: u64, rng: &mut XorShift) {
    let period = v.period.as_nanos().max(1);
    let cost = |k: usize, rng: &mut XorShift| -> u64 {
        let mean = match &v.mode {
            VideoMode::Constant { exec } => return exec.as_nanos(),
            VideoMode::Mpeg { i, p, b, gop } => match gop.as_bytes()[k % gop.len().max(1)] {
                b'I' | b'i' => i.as_nanos(),
                b'P' | b'p' => p.as_nanos(),
                _ => b.as_nanos(),
            },
        };
        let c = mean as f64 * (1.0 + MPEG_REL_STDDEV * rng.normal());
        ((c.max(0.0) + 0.5) as u64).max(1)
    };
    let mut start = sys::now_ns();
    pending(slot, start + period, 0);
    let mut k = 0;
    while start < end_ns {
        sys::sleep_until(start);
        let due = start + period;
        let work = cost(k, rng);
        k += 1;
        match v.on_miss {
            MissPolicy::Continue => {
                spin_cpu(work);
                let now = sys::now_ns();
                job(slot, now as i64 - due as i64);
                start = due.max(now);
            }
            MissPolicy::Skip => {
                if spin_cpu_until(work, due) {
                    job(slot, sys::now_ns() as i64 - due as i64);
                } else if let Some(s) = slot {
                    s.misses.fetch_add(1, Ordering::Relaxed);
                }
                start = due;
            }
        }
        // The next frame, which a run ending before it starts leaves
        // unmissed.
        pending(slot, start + period, 0);
    }
}

/// Regehr 2001, §10.5.2: renders frames back to back, each `work` ns of CPU;
/// a frame completing `gap` after the previous one missed every deadline
/// `miss_gap`, `2·miss_gap`, … after it that passed before it. Returns
/// (frames, misses, longest gap).
pub fn frame_renderer(
    work: u64,
    miss_gap: u64,
    slot: Option<&ProbeSlot>,
    end_ns: u64,
) -> (u64, u64, u64) {
    let mut last = sys::now_ns();
    let (mut frames, mut misses, mut longest) = (0, 0, 0);
    // HSCHED_LIVE_DEBUG: print each miss with its CLOCK_MONOTONIC time, to
    // line it up with the daemon's debug lines (docs/measurements/live-mode.md).
    let debug = std::env::var_os("HSCHED_LIVE_DEBUG").is_some();
    if let Some(s) = slot {
        s.max_lateness.store(i64::MIN, Ordering::Relaxed);
        s.used.store(1, Ordering::Relaxed);
    }
    pending(slot, last + miss_gap, miss_gap);
    while sys::now_ns() < end_ns {
        spin_cpu(work);
        let now = sys::now_ns();
        let gap = now - last;
        last = now;
        frames += 1;
        longest = longest.max(gap);
        // Every deadline `last + k·miss_gap` passed before this frame is
        // a miss, as the simulator counts them (docs/metrics.md).
        let missed = gap.saturating_sub(1) / miss_gap;
        if missed > 0 {
            misses += missed;
            if debug {
                crate::diag!("[mono {now}] frame miss: gap {gap} ns, {missed} deadlines");
            }
        }
        job_missing(slot, gap as i64 - miss_gap as i64, missed);
        pending(slot, last + miss_gap, miss_gap);
    }
    (frames, misses, longest)
}

/// The context-switch probe of Regehr 2001, §10.3 (Fig 10.3): polls the clock
/// and records every gap longer than `threshold` as (start, end), i.e. the
/// last reading before the thread lost the CPU and the first after it got
/// it back.
pub fn poll_gaps(threshold: u64, end_ns: u64, max: usize) -> Vec<(u64, u64)> {
    let mut out = Vec::with_capacity(max);
    let mut last = sys::now_ns();
    while last < end_ns {
        let t = sys::now_ns();
        if t - last > threshold && out.len() < max {
            out.push((last, t));
        }
        last = t;
    }
    out
}

/// Switch gaps from the gap logs of several threads sharing one CPU: for
/// every time a thread got the CPU back, the time since the most recent
/// moment another thread lost it. Gaps over `cap` (the CPU went to
/// something else) are dropped.
pub fn switch_gaps(logs: &[Vec<(u64, u64)>], cap: u64) -> Vec<u64> {
    let mut stops: Vec<(u64, usize)> = Vec::new();
    let mut starts: Vec<(u64, usize)> = Vec::new();
    for (i, l) in logs.iter().enumerate() {
        for &(s, e) in l {
            stops.push((s, i));
            starts.push((e, i));
        }
    }
    stops.sort_unstable();
    starts.sort_unstable();
    let mut out = Vec::new();
    let mut j = 0;
    let mut last_stop: Option<(u64, usize)> = None;
    for &(t, who) in &starts {
        // Strictly before: a thread that stops again at the very instant
        // it restarts must not hide the switch that restarted it.
        while j < stops.len() && stops[j].0 < t {
            last_stop = Some(stops[j]);
            j += 1;
        }
        if let Some((s, by)) = last_stop {
            if by != who && t - s <= cap {
                out.push(t - s);
            }
        }
    }
    out
}

/// Median and 99th percentile of `v` (sorted in place); zeros when empty.
pub fn median_p99(v: &mut [u64]) -> (u64, u64) {
    if v.is_empty() {
        return (0, 0);
    }
    v.sort_unstable();
    (v[v.len() / 2], v[(v.len() * 99 / 100).min(v.len() - 1)])
}

fn flag(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .cloned()
}

fn dur_flag(args: &[String], name: &str, default_ns: u64) -> Result<u64, String> {
    match flag(args, name) {
        None => Ok(default_ns),
        Some(v) => hsched_core::time::parse_duration(&v, None)
            .map(|d| d.as_nanos())
            .map_err(|e| format!("{name}: {}", e.message)),
    }
}

/// The calling thread's cgroups as `/proc` lists them (empty if unreadable).
fn own_cgroup() -> String {
    std::fs::read_to_string("/proc/thread-self/cgroup").unwrap_or_default()
}

/// `hsched-live probe ...`: the test programs.
///
/// - `hog [--duration D]`: a CPU-bound loop (default 10 s, always bounded);
/// - `frame [--work 10ms] [--gap 33ms] [--duration D]`: the frame renderer,
///   printing `{"frames","misses","longest_gap_ns","fps"}`;
/// - `poll [--threads 10] [--duration D] [--cpu C] [--name NAME]`: threads
///   polling the clock, printing the switch gaps' median and p99; with
///   `--name`, the process takes that name before it starts them (so they
///   are created with it) and thread `i` renames itself `NAME-i` 100 ms
///   after it left its creator's cgroup (placed by the daemon), or 1.1 s
///   after it started when it stays there.
pub fn probe_main(args: &[String]) -> i32 {
    let r = (|| -> Result<String, String> {
        let kind = args.first().map(String::as_str).unwrap_or("");
        let rest = args.get(1..).unwrap_or(&[]);
        let dur = dur_flag(rest, "--duration", 10_000_000_000)?;
        let end = sys::now_ns() + dur;
        match kind {
            "hog" => {
                while sys::now_ns() < end {
                    spin_cpu(1_000_000);
                }
                Ok(format!("{{\"cpu_ns\":{}}}", sys::thread_cpu_ns()))
            }
            "frame" => {
                let work = dur_flag(rest, "--work", 10_000_000)?;
                let gap = dur_flag(rest, "--gap", 33_000_000)?;
                let t0 = sys::now_ns();
                let (frames, misses, longest) = frame_renderer(work, gap, None, end);
                let secs = (sys::now_ns() - t0) as f64 / 1e9;
                Ok(format!("{{\"frames\":{frames},\"misses\":{misses},\"longest_gap_ns\":{longest},\"fps\":{:.2}}}", frames as f64 / secs))
            }
            "poll" => {
                let n: usize = flag(rest, "--threads")
                    .map_or(Ok(10), |v| v.parse())
                    .map_err(|_| "--threads needs a number")?;
                if let Some(c) = flag(rest, "--cpu") {
                    let c: usize = c.parse().map_err(|_| "--cpu needs a number")?;
                    sys::set_affinity(0, &sys::CpuMask::single(c)).map_err(|e| e.to_string())?;
                }
                let name = flag(rest, "--name");
                if let Some(nm) = &name {
                    sys::set_thread_name(nm);
                }
                let creator = own_cgroup();
                let handles: Vec<_> = (0..n)
                    .map(|i| {
                        let own = name.as_ref().map(|nm| format!("{nm}-{i}"));
                        let creator = creator.clone();
                        std::thread::spawn(move || {
                            if let Some(own) = own {
                                // After the daemon has placed this thread
                                // (it leaves its creator's freezer cgroup
                                // then), so the rename is a separate event
                                // however late the daemon reads the
                                // creation (1 s at most: unmanaged, it
                                // never leaves).
                                let t0 = sys::now_ns();
                                while own_cgroup() == creator && sys::now_ns() - t0 < 1_000_000_000
                                {
                                    std::thread::sleep(std::time::Duration::from_millis(2));
                                }
                                std::thread::sleep(std::time::Duration::from_millis(100));
                                sys::set_thread_name(&own);
                            }
                            poll_gaps(500, end, 200_000)
                        })
                    })
                    .collect();
                let logs: Vec<Vec<(u64, u64)>> =
                    handles.into_iter().filter_map(|h| h.join().ok()).collect();
                let mut g = switch_gaps(&logs, 1_000_000);
                let (med, p99) = median_p99(&mut g);
                Ok(format!(
                    "{{\"switches\":{},\"median_ns\":{med},\"p99_ns\":{p99}}}",
                    g.len()
                ))
            }
            other => Err(format!("unknown probe `{other}` (hog, frame, poll)")),
        }
    })();
    match r {
        Ok(s) => crate::out::print_stdout(&format!("{s}\n")),
        Err(e) => {
            crate::diag!("hsched-live probe: {e}");
            2
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn switch_gaps_pairs_stop_and_next_start() {
        // Thread 0 runs until 100, thread 1 starts at 110; 1 stops at 200
        // and 0 resumes at 207.
        let logs = vec![vec![(100, 207)], vec![(0, 110), (200, 300)]];
        let mut g = switch_gaps(&logs, 1_000);
        g.sort_unstable();
        assert_eq!(g, vec![7, 10]);
    }

    #[test]
    fn a_stop_at_the_restart_instant_does_not_hide_the_switch() {
        // Thread 1 restarts at 110 and its next gap starts at that same
        // clock read; the switch 100 -> 110 still counts.
        let logs = vec![vec![(100, 207)], vec![(0, 110), (110, 300)]];
        let mut g = switch_gaps(&logs, 1_000);
        g.sort_unstable();
        assert_eq!(g, vec![10, 97]);
    }

    #[test]
    fn median_and_p99() {
        let mut v: Vec<u64> = (1..=100).rev().collect();
        assert_eq!(median_p99(&mut v), (51, 100));
        assert_eq!(median_p99(&mut []), (0, 0));
    }

    #[test]
    fn spin_burns_cpu_time() {
        let a = sys::thread_cpu_ns();
        spin_cpu(2_000_000);
        assert!(sys::thread_cpu_ns() - a >= 2_000_000);
    }
}
