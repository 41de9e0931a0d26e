//! The fixed-priority analysis against an oracle that shares none of its
//! code: a unit-step simulation of preemptive fixed priorities on one
//! processor, written here from the scheduling rule alone.
//!
//! * Distinct priorities, no jitter, utilization at most 1: from the
//!   synchronous release (the critical instant) until every job released in
//!   a hyperperiod has finished, the largest response of each task is its
//!   exact worst case. The analysis must give exactly that, and say "can
//!   miss" exactly when some job misses.
//! * Shared priorities served first come, first served, release jitter and
//!   random phasings: the simulated responses must never exceed the
//!   analysis' bound.
//!
//! Seeded; replay a failure with `HSCHED_SEED=N`.

mod common;

use common::{rng_from_env, Rng};
use hsched_guarantee::rta::Task;
use hsched_guarantee::sbf::{fp_response_times_at_levels, Supply};
use hsched_guarantee::Duration;

/// One task of the oracle, in whole time units.
#[derive(Clone, Copy, Debug)]
struct Spec {
    c: u64,
    t: u64,
    d: u64,
    j: u64,
    offset: u64,
    level: i64,
}

/// A time unit of the oracle, in the analysis' durations.
const UNIT: u64 = 1_000;

fn task(s: &Spec) -> Task {
    let us = |v: u64| Duration::from_nanos(v * UNIT);
    Task::periodic(us(s.c), us(s.t))
        .with_deadline(us(s.d))
        .with_jitter(us(s.j))
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// Simulates until every job released before `until` has finished (or
/// `cap` units pass) and returns each task's largest response, measured
/// from the nominal release. Each job's jitter is drawn from `rng`.
/// Among equal levels the job that became ready first runs; ties by task
/// index (the order is the oracle's, not the analysis').
fn simulate(specs: &[Spec], until: u64, cap: u64, rng: &mut Rng) -> Vec<u64> {
    struct Job {
        task: usize,
        release: u64,
        ready: u64,
        left: u64,
    }
    let n = specs.len();
    // Every job, by ready time.
    let mut jobs: Vec<Job> = Vec::new();
    for (k, s) in specs.iter().enumerate() {
        let mut r = s.offset;
        while r < until {
            let jit = if s.j == 0 { 0 } else { rng.range(0, s.j) };
            jobs.push(Job {
                task: k,
                release: r,
                ready: r + jit,
                left: s.c,
            });
            r += s.t;
        }
    }
    // A thread runs its jobs in release order: a job is eligible once ready
    // and once the previous job of its task is done.
    jobs.sort_by_key(|j| (j.task, j.release));
    let mut worst = vec![0u64; n];
    let mut next_of: Vec<usize> = vec![usize::MAX; n];
    for (i, j) in jobs.iter().enumerate().rev() {
        next_of[j.task] = i;
    }
    // The time each task's current job became eligible: its FIFO position.
    let mut queued_at: Vec<Option<u64>> = vec![None; n];
    let mut done = 0;
    let mut now = 0;
    while done < jobs.len() && now < cap {
        for k in 0..n {
            let i = next_of[k];
            if i < jobs.len() && jobs[i].task == k && jobs[i].ready <= now && queued_at[k].is_none()
            {
                queued_at[k] = Some(now);
            }
        }
        let pick = (0..n)
            .filter(|&k| queued_at[k].is_some())
            .min_by_key(|&k| (std::cmp::Reverse(specs[k].level), queued_at[k], k));
        now += 1;
        if let Some(k) = pick {
            let i = next_of[k];
            jobs[i].left -= 1;
            if jobs[i].left == 0 {
                worst[k] = worst[k].max(now - jobs[i].release);
                done += 1;
                queued_at[k] = None;
                next_of[k] = if i + 1 < jobs.len() && jobs[i + 1].task == k {
                    i + 1
                } else {
                    usize::MAX
                };
            }
        }
    }
    if done < jobs.len() {
        // Unfinished work: its responses are at least what has elapsed.
        for j in &jobs {
            if j.left > 0 {
                worst[j.task] = worst[j.task].max(now.saturating_sub(j.release));
            }
        }
    }
    worst
}

fn random_set(rng: &mut Rng, n: usize, ties: bool, jitter: bool) -> Vec<Spec> {
    let periods = [4u64, 5, 6, 8, 10, 12, 15, 20, 24, 30];
    (0..n)
        .map(|k| {
            let t = periods[rng.range(0, periods.len() as u64 - 1) as usize];
            let c = rng.range(1, t.min(8));
            // Deadlines on both sides of the period.
            let d = rng.range(c.max(2), 3 * t);
            let j = if jitter {
                rng.range(0, d.min(4) - 1)
            } else {
                0
            };
            Spec {
                c,
                t,
                d,
                j,
                offset: 0,
                level: if ties {
                    rng.range(0, 2) as i64
                } else {
                    (n - k) as i64
                },
            }
        })
        .collect()
}

fn hyperperiod(specs: &[Spec]) -> u64 {
    specs.iter().fold(1, |l, s| l / gcd(l, s.t) * s.t)
}

fn utilization(specs: &[Spec]) -> f64 {
    specs.iter().map(|s| s.c as f64 / s.t as f64).sum()
}

/// The analysis' bounds in units. A busy period that never ends (full
/// utilization with jitter) is the one set it may leave undecided.
fn analyse(specs: &[Spec]) -> Option<Vec<Option<u64>>> {
    let tasks: Vec<Task> = specs.iter().map(task).collect();
    let levels: Vec<i64> = specs.iter().map(|s| s.level).collect();
    match fp_response_times_at_levels(&tasks, &levels, &Supply::Full, Duration::from_secs(10)) {
        Ok(r) => Some(
            r.into_iter()
                .map(|r| r.map(|d| d.as_nanos() / UNIT))
                .collect(),
        ),
        Err(e) => {
            assert!(
                (utilization(specs) - 1.0).abs() < 1e-9,
                "{specs:?} not decided below full utilization: {e}"
            );
            None
        }
    }
}

#[test]
fn distinct_priorities_match_the_critical_instant_exactly() {
    let mut rng = rng_from_env(0x0e5a_c1e0);
    let mut compared = 0;
    let mut misses = 0;
    let mut past_period = 0;
    for case in 0..3000 {
        let n = rng.range(1, 4) as usize;
        let specs = random_set(&mut rng, n, false, false);
        if utilization(&specs) > 1.0 {
            continue;
        }
        let h = hyperperiod(&specs);
        let sim = simulate(&specs, h, 100 * h, &mut rng);
        let got = analyse(&specs).expect("no jitter: every busy period ends");
        for (k, s) in specs.iter().enumerate() {
            let shown =
                format!("case {case}, task {k} of {specs:?}: simulated {sim:?}, analysed {got:?}");
            match got[k] {
                Some(r) => {
                    assert_eq!(r, sim[k], "{shown}");
                    past_period += usize::from(r > s.t);
                }
                None => {
                    assert!(sim[k] > s.d, "{shown}");
                    misses += 1;
                }
            }
            compared += 1;
        }
    }
    assert!(compared > 3000, "{compared}");
    assert!(misses > 100 && past_period > 100, "{misses} {past_period}");
}

#[test]
fn shared_priorities_jitter_and_phasings_stay_within_the_bound() {
    let mut rng = rng_from_env(0x0e5a_c1e1);
    let mut certified = 0;
    for case in 0..1500 {
        let n = rng.range(2, 4) as usize;
        let specs = random_set(&mut rng, n, true, true);
        if utilization(&specs) > 1.0 {
            continue;
        }
        let Some(got) = analyse(&specs) else {
            continue;
        };
        let h = hyperperiod(&specs);
        for trial in 0..4 {
            let mut phased = specs.clone();
            if trial > 0 {
                for s in &mut phased {
                    s.offset = rng.range(0, s.t - 1);
                }
            }
            let sim = simulate(&phased, 2 * h + 40, 200 * h, &mut rng);
            for (k, r) in got.iter().enumerate() {
                if let Some(r) = r {
                    assert!(
                        sim[k] <= *r,
                        "case {case}, trial {trial}, task {k} of {phased:?}: simulated {sim:?} past the bound {got:?}"
                    );
                    certified += 1;
                }
            }
        }
    }
    assert!(certified > 2000, "{certified}");
}
