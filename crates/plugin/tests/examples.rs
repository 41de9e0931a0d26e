//! Every example plug-in of sdk/examples, built with clang-14 and run in
//! the simulator under the protocol checker, against a result known from
//! its source: lottery against the binomial law of its draws (Waldspurger
//! and Weihl 1994), stride against its one-quantum error bound (Waldspurger
//! and Weihl 1995), EEVDF against the worked example of Regehr 2001,
//! §5.3.3.2, plain EDF against the built-in reservation scheduler `rez`
//! and the true-period EDF reference, and RESCS against its definition
//! (§5.2.2.2) and the worked SFQ chain of §5.3.3.1, which
//! sdk/examples/sfq-worked-example.toml runs; fp against the built-in fp.
//!
//! Received CPU time over arbitrary intervals is read from the simulator's
//! trace: one slice per stretch a thread ran on a processor.

mod common;

use common::{example, read, repo, scratch};
use hsched_core::Duration;
use hsched_sim::{Report, SimOptions, ThreadReport};
use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

const MS: u64 = 1_000_000;

/// [`common::simulate`], failing if a plug-in was unloaded for a fault:
/// its threads would have gone on under another scheduler.
fn simulate(toml: &Path, opts: SimOptions) -> Report {
    let r = common::simulate(toml, opts);
    assert!(
        r.unloaded.is_empty(),
        "{}: {:?}",
        toml.display(),
        r.unloaded
    );
    r
}

/// Writes `text` as `dir/NAME.toml`.
fn write_toml(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(format!("{name}.toml"));
    std::fs::write(&p, text).unwrap();
    p
}

fn opts(duration_ns: u64, seed: u64) -> SimOptions {
    SimOptions {
        duration: Some(Duration::from_nanos(duration_ns)),
        seed: Some(seed),
        ..Default::default()
    }
}

fn thread<'a>(r: &'a Report, name: &str) -> &'a ThreadReport {
    r.threads
        .iter()
        .find(|t| t.name == name)
        .unwrap_or_else(|| panic!("no thread {name} in the report"))
}

/// The trace bytes the simulator streams, kept in memory.
#[derive(Clone, Default)]
struct Shared(Arc<Mutex<Vec<u8>>>);

impl Write for Shared {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The stretches `[start, end)` ns each thread ran, in time order.
type Runs = HashMap<String, Vec<(u64, u64)>>;

/// Simulates `toml` for `duration_ns` with a trace; the report and the
/// stretches each thread ran.
fn traced(toml: &Path, duration_ns: u64) -> (Report, Runs) {
    let buf = Shared::default();
    let report = simulate(
        toml,
        SimOptions {
            trace: Some(Box::new(buf.clone())),
            ..opts(duration_ns, 1)
        },
    );
    let bytes = buf.0.lock().unwrap().clone();
    let v: serde_json::Value = serde_json::from_slice(&bytes).expect("the trace is JSON");
    // Timestamps are microseconds with three decimals: whole nanoseconds.
    let ns = |x: &serde_json::Value| (x.as_f64().unwrap() * 1000.0).round() as u64;
    let mut runs = Runs::new();
    for e in v["traceEvents"].as_array().unwrap() {
        // Process 1, tracks below 1000: what ran on each processor.
        if e["ph"] == "X" && e["pid"] == 1 && e["tid"].as_u64().unwrap() < 1000 {
            let start = ns(&e["ts"]);
            let end = start + ns(&e["dur"]);
            if end > start {
                runs.entry(e["name"].as_str().unwrap().to_string())
                    .or_default()
                    .push((start, end));
            }
        }
    }
    for r in runs.values_mut() {
        r.sort_unstable();
    }
    (report, runs)
}

/// The stretches of thread `name`, checked against the report's total.
fn runs_of<'a>(runs: &'a Runs, report: &Report, name: &str) -> &'a [(u64, u64)] {
    let r = runs.get(name).map_or(&[][..], |v| &v[..]);
    let total: u64 = r.iter().map(|(a, b)| b - a).sum();
    assert_eq!(
        total,
        thread(report, name).cpu_ns,
        "{name}: the trace and the report disagree"
    );
    r
}

/// CPU time received in `[0, t)`, from stretches in time order.
fn received(r: &[(u64, u64)], t: u64) -> u64 {
    r.iter()
        .take_while(|(a, _)| *a < t)
        .map(|&(a, b)| b.min(t) - a)
        .sum()
}

/// The instants where received time changes slope, within `[0, horizon]`.
fn breakpoints(r: &[(u64, u64)], horizon: u64) -> Vec<u64> {
    let mut pts = vec![0, horizon];
    for &(a, b) in r {
        pts.extend([a.min(horizon), b.min(horizon)]);
    }
    pts.sort_unstable();
    pts.dedup();
    pts
}

/// The worst shortfall against PSBE `share`: the largest, over all
/// intervals `[a, b)` within `[0, horizon]`, of `share·(b − a)` minus
/// what was received in the interval, ns. `f(t) = R(t) − share·t` is
/// piecewise linear, so its worst fall happens between breakpoints.
fn worst_shortfall(r: &[(u64, u64)], share: f64, horizon: u64) -> f64 {
    let mut best_high = f64::NEG_INFINITY;
    let mut worst = 0.0f64;
    for t in breakpoints(r, horizon) {
        let f = received(r, t) as f64 - share * t as f64;
        best_high = best_high.max(f);
        worst = worst.max(best_high - f);
    }
    worst
}

/// The largest `|R(t) − share·t|` over `[0, horizon]`, ns (the lag when
/// the thread asks all along).
fn worst_lag(r: &[(u64, u64)], share: f64, horizon: u64) -> f64 {
    breakpoints(r, horizon)
        .into_iter()
        .map(|t| (received(r, t) as f64 - share * t as f64).abs())
        .fold(0.0, f64::max)
}

/// The least CPU time received in any window `[a, a + len)` within
/// `[from, to]`: at a minimum, `a` or `a + len` is a breakpoint.
fn min_window(r: &[(u64, u64)], len: u64, from: u64, to: u64) -> (u64, u64) {
    let mut cands = vec![from, to - len];
    for &(a, b) in r {
        for p in [a, b] {
            cands.push(p);
            cands.push(p.saturating_sub(len));
        }
    }
    cands
        .into_iter()
        .filter(|&a| a >= from && a + len <= to)
        .map(|a| (received(r, a + len) - received(r, a), a))
        .min()
        .unwrap()
}

/// A root plug-in `wasm` over CPU-bound threads `name = params`, its
/// instance parameters `inst` (TOML lines).
fn flat(wasm: &Path, inst: &str, threads: &[(&str, String)]) -> String {
    let mut s = format!(
        "[machine]\ncpus = 1\n\n[[scheduler]]\nname = \"root\"\npolicy = \"{}\"\n{inst}\n",
        wasm.display()
    );
    for (name, params) in threads {
        s += &format!(
            "\n[[thread]]\nname = \"{name}\"\nscheduler = \"root\"\nparams = {{ {params} }}\n\
             workload = {{ kind = \"cpu-bound\" }}\n"
        );
    }
    s
}

#[test]
fn lottery_shares_follow_the_binomial_law_and_repeat_under_a_seed() {
    let Some(wasm) = example("lottery") else {
        return;
    };
    let dir = scratch("lottery");
    let tickets = [("A", 1u64), ("B", 2), ("C", 3)];
    let file = |seed: u64| {
        let ts: Vec<_> = tickets
            .iter()
            .map(|(n, t)| (*n, format!("tickets = {t}")))
            .collect();
        flat(&wasm, &format!("quantum = \"10ms\"\nseed = {seed}"), &ts)
    };
    let q = 10 * MS;
    let dur = 30_000 * MS;
    let toml = write_toml(&dir, "lottery", &file(7));
    let r = simulate(&toml, opts(dur, 1));
    // Each quantum is one lottery among all three (CPU-bound, always
    // ready): n draws, and each thread's count of wins is binomial.
    let n = r.machine.busy_ns.div_ceil(q) as f64;
    assert!(n >= 2900.0, "only {n} lotteries");
    for (name, t) in tickets {
        let p = t as f64 / 6.0;
        let sigma = (n * p * (1.0 - p)).sqrt();
        let wins = thread(&r, name).cpu_ns as f64 / q as f64;
        let z = (wins - n * p) / sigma;
        eprintln!(
            "lottery {name} ({t} tickets): {wins:.1} of {n} quanta, expected {:.1} ± {sigma:.1} (z = {z:+.2})",
            n * p
        );
        assert!(z.abs() <= 4.0, "{name}: {wins} wins, z = {z}");
    }
    // The same seed draws the same tickets; another seed others.
    let again = simulate(&toml, opts(dur, 1));
    let other = simulate(&write_toml(&dir, "lottery2", &file(8)), opts(dur, 1));
    let cpu =
        |r: &Report| -> Vec<u64> { tickets.iter().map(|(n, _)| thread(r, n).cpu_ns).collect() };
    assert_eq!(cpu(&r), cpu(&again), "same seed, another draw");
    assert_ne!(cpu(&r), cpu(&other), "the seed does not change the draws");
}

#[test]
fn stride_stays_within_one_quantum_of_the_ticket_ratio() {
    let Some(wasm) = example("stride") else {
        return;
    };
    let dir = scratch("stride");
    let tickets = [("A", 1u64), ("B", 2), ("C", 3)];
    let ts: Vec<_> = tickets
        .iter()
        .map(|(n, t)| (*n, format!("tickets = {t}")))
        .collect();
    let q = 10 * MS;
    let toml = write_toml(&dir, "stride", &flat(&wasm, "quantum = \"10ms\"", &ts));
    // Waldspurger and Weihl 1995 bound the relative error of any pair of
    // clients by one quantum; the absolute error |r_i − p_i·t| of basic
    // stride may grow with the number of clients (O(n_c)), so with three
    // clients one quantum (the constant 1) is the bound we hold it to.
    // Round robin or FIFO break it within a second.
    let bound = |_p: f64| q as f64;
    // At every instant of a 6 s trace...
    let dur = 6_000 * MS;
    let (r, runs) = traced(&toml, dur);
    for (name, t) in tickets {
        let p = t as f64 / 6.0;
        let lag = worst_lag(runs_of(&runs, &r, name), p, dur);
        eprintln!(
            "stride {name} ({t} tickets): worst |received − {p:.3}·t| = {:.3} ms (bound {:.3} ms)",
            lag / MS as f64,
            bound(p) / MS as f64
        );
        assert!(lag <= bound(p) + 1.0, "{name}: {lag} ns off its share");
    }
    // ...and at the end of runs of other lengths, ending mid-quantum too.
    for dur_ms in [35, 600, 1_234, 5_005] {
        let r = simulate(&toml, opts(dur_ms * MS, 1));
        let busy = r.machine.busy_ns as f64;
        for (name, t) in tickets {
            let p = t as f64 / 6.0;
            let err = (thread(&r, name).cpu_ns as f64 - p * busy).abs();
            assert!(
                err <= bound(p) + 1.0,
                "{name} after {dur_ms} ms: {err} ns off its share"
            );
        }
    }
}

#[test]
fn eevdf_gives_the_share_of_section_5_3_3_2_within_one_quantum() {
    let Some(wasm) = example("eevdf") else {
        return;
    };
    let dir = scratch("eevdf");
    // What the tests below measure is what the plug-in declares: a share
    // within one quantum over every interval.
    let m = hsched_plugin::load(&wasm, hsched_plugin::Limits::default()).unwrap();
    let g = m.descriptor.guarantee.expect("eevdf declares a guarantee");
    assert_eq!(
        (g.needs.as_str(), g.gives.as_str()),
        ("ALL", "PSBE {share} {quantum}")
    );
    // §5.3.3.2: a video thread needing 5 ms every 33 ms gets s = (5 +
    // 10)/33 ≈ 0.45 from EEVDF with a 10 ms quantum, or s = 1.1·5/33 with a
    // 0.5 ms quantum; and s = 0.45 with 0.5 ms. A CPU-bound competitor
    // takes the rest, so both always ask and W = 1.
    for (share, q_us) in [
        (15.0 / 33.0, 10_000u64),
        (0.45, 500),
        (1.1 * 5.0 / 33.0, 500),
    ] {
        let q = q_us * 1000;
        let text = flat(
            &wasm,
            &format!("quantum = \"{q_us}us\""),
            &[
                ("hog", format!("share = {}", 1.0 - share)),
                ("video", format!("share = {share}")),
            ],
        );
        let toml = write_toml(&dir, &format!("eevdf-{q_us}"), &text);
        let dur = 3_000 * MS;
        let (r, runs) = traced(&toml, dur);
        // Both threads: the lag within one quantum (Stoica et al. 1996),
        // and share·t − q received in every interval (PSBE s q). Round
        // robin, fair but blind to shares, breaks both within a second.
        for (name, s) in [("video", share), ("hog", 1.0 - share)] {
            let t = runs_of(&runs, &r, name);
            let lag = worst_lag(t, s, dur);
            let short = worst_shortfall(t, s, dur);
            eprintln!(
                "eevdf {name} s = {s:.4}, q = {q_us} us: worst lag {:.3} ms, worst shortfall over an \
                 interval {:.3} ms; share {:.4}",
                lag / MS as f64,
                short / MS as f64,
                thread(&r, name).cpu_ns as f64 / r.machine.busy_ns as f64
            );
            assert!(
                lag <= q as f64 + 1.0,
                "{name}: lag {lag} ns over the quantum {q}"
            );
            assert!(
                short <= q as f64 + 1.0,
                "{name}: short by {short} ns, quantum {q}"
            );
        }
        let video = runs_of(&runs, &r, "video");
        let (w33, at) = min_window(video, 33 * MS, 0, dur);
        eprintln!(
            "eevdf video: least in any 33 ms {:.3} ms (at {:.3} ms)",
            w33 as f64 / MS as f64,
            at as f64 / MS as f64
        );
        // Theorem 5.7: RESCS (33·s − q) 33, 5 ms where s was sized for it.
        let promised = 33.0 * MS as f64 * share - q as f64;
        assert!(
            w33 as f64 + 1.0 >= promised,
            "{w33} ns in the 33 ms from {at} ns; promised {promised}"
        );
        // The 5 ms / 33 ms the shares were sized for.
        assert!(w33 + 1 >= 5 * MS, "{w33} ns in some 33 ms");
    }
}

/// A task of an EDF test: WCET and period, ms.
#[derive(Clone, Copy, Debug)]
struct Task {
    exec: u64,
    period: u64,
}

fn util(ts: &[Task]) -> f64 {
    ts.iter().map(|t| t.exec as f64 / t.period as f64).sum()
}

/// Task sets from a fixed generator (a 64-bit LCG, so the sets are the
/// same everywhere): periods from a harmonic-free menu, WCETs so that the
/// utilization lands near `target`.
fn task_set(seed: u64, n: usize, target: f64) -> Vec<Task> {
    let mut x = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    let mut next = || {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        x >> 33
    };
    let periods = [10u64, 14, 20, 25, 35, 40, 50, 70];
    // Random weights split the utilization (close to UUniFast).
    let w: Vec<f64> = (0..n)
        .map(|_| 1.0 + (next() % 1000) as f64 / 250.0)
        .collect();
    let sum: f64 = w.iter().sum();
    w.iter()
        .map(|wi| {
            let period = periods[(next() % periods.len() as u64) as usize];
            let exec = ((target * wi / sum * period as f64).round() as u64).clamp(1, period);
            Task { exec, period }
        })
        .collect()
}

/// The task set under root policy `policy` (with instance lines `inst`),
/// each thread with params from `params`.
fn edf_file(policy: &str, inst: &str, ts: &[Task], params: impl Fn(&Task) -> String) -> String {
    let mut s = format!(
        "[machine]\ncpus = 1\n\n[[scheduler]]\nname = \"root\"\npolicy = \"{policy}\"\n{inst}\n"
    );
    for (i, t) in ts.iter().enumerate() {
        s += &format!(
            "\n[[thread]]\nname = \"t{i}\"\nscheduler = \"root\"\nparams = {{ {} }}\n\
             workload = {{ kind = \"periodic\", period = \"{}ms\", exec = \"{}ms\" }}\n",
            params(t),
            t.period,
            t.exec
        );
    }
    s
}

/// Jobs and misses per thread.
fn counts(r: &Report, n: usize) -> Vec<(u64, u64)> {
    (0..n)
        .map(|i| {
            let t = thread(r, &format!("t{i}"));
            (t.jobs, t.deadline_misses)
        })
        .collect()
}

/// Simulates `text` with the reference policies (true-period EDF) besides
/// the built-in ones and the plug-ins it names.
fn simulate_ref(dir: &Path, name: &str, text: &str, dur: u64) -> Report {
    let toml = write_toml(dir, name, text);
    let mut policies = hsched_plugin::policies_for(Some(&toml), text).unwrap();
    for p in hsched_sim::reference::policies() {
        if !policies.iter().any(|q| q.name == p.name) {
            policies.push(p);
        }
    }
    let h = hsched_config::load_with_policies(&toml, &policies).unwrap();
    let r = hsched_sim::run_with_policies(
        &h,
        SimOptions {
            check_protocol: true,
            ..opts(dur, 1)
        },
        &policies,
    )
    .unwrap_or_else(|e| panic!("sim {}: {e}", toml.display()));
    assert!(
        r.unloaded.is_empty(),
        "{}: {:?}",
        toml.display(),
        r.unloaded
    );
    r
}

#[test]
fn edf_meets_what_rez_and_true_period_edf_meet_and_rm_does_not() {
    let Some(wasm) = example("edf") else {
        return;
    };
    let dir = scratch("edf");
    // Every period below divides 1400 ms. At 2800 ms every job due by then
    // has finished under any EDF (U ≤ 1) and none released later can have
    // (each needs 1 ms or more), so the counts do not depend on how EDF
    // breaks ties between equal deadlines.
    let dur = 2_800 * MS + MS / 2;
    let w = wasm.display().to_string();
    let period = |t: &Task| format!("period = \"{}ms\"", t.period);
    let mut sets: Vec<Vec<Task>> = Vec::new();
    for (seed, n, u) in [
        (1, 3, 0.7),
        (2, 4, 0.85),
        (3, 5, 0.95),
        (4, 4, 1.0),
        (5, 3, 1.15),
        (6, 5, 1.3),
    ] {
        sets.push(task_set(seed, n, u));
    }
    // Liu and Layland 1973's classic pair: U = 0.5 + 0.5 = 1, where RM
    // (the shorter period first) misses the longer task's deadline and
    // EDF meets every deadline.
    let classic = vec![
        Task { exec: 2, period: 4 },
        Task {
            exec: 5,
            period: 10,
        },
    ];
    sets.push(classic.clone());
    for (k, ts) in sets.iter().enumerate() {
        let u = util(ts);
        let n = ts.len();
        let edf = simulate_ref(&dir, &format!("edf{k}"), &edf_file(&w, "", ts, period), dur);
        let reference = simulate_ref(
            &dir,
            &format!("ref{k}"),
            &edf_file("edf-true-periods", "", ts, period),
            dur,
        );
        let (e, rf) = (counts(&edf, n), counts(&reference, n));
        let misses: u64 = e.iter().map(|c| c.1).sum();
        eprintln!("edf set {k} U = {u:.3} {ts:?}: edf {e:?}, true-period EDF {rf:?}");
        assert_eq!(e, rf, "set {k}: the plug-in and the EDF reference differ");
        if u <= 1.0 + 1e-9 {
            // Rez is EDF over reservations: with amount = WCET it runs the
            // same jobs, and EDF meets every deadline at U ≤ 1.
            let rez = simulate_ref(
                &dir,
                &format!("rez{k}"),
                &edf_file("rez", "cap = 1.0", ts, |t| {
                    format!("amount = \"{}ms\", period = \"{}ms\"", t.exec, t.period)
                }),
                dur,
            );
            let z = counts(&rez, n);
            eprintln!("  rez {z:?}");
            assert_eq!(e, z, "set {k}: the plug-in and rez differ");
            assert_eq!(misses, 0, "set {k}: EDF missed at U = {u}");
        } else {
            assert!(misses > 0, "set {k}: no miss at U = {u}");
        }
    }
    // RM: fp with priority by rate (shorter period, higher priority).
    let rm = simulate_ref(
        &dir,
        "rm",
        &edf_file("fp", "", &classic, |t| {
            format!("priority = {}", 1000 - t.period)
        }),
        dur,
    );
    let rm_misses: u64 = counts(&rm, 2).iter().map(|c| c.1).sum();
    let edf = simulate_ref(
        &dir,
        "edf-classic",
        &edf_file(&w, "", &classic, period),
        dur,
    );
    let edf_misses: u64 = counts(&edf, 2).iter().map(|c| c.1).sum();
    eprintln!("classic pair: RM misses {rm_misses}, EDF misses {edf_misses}");
    assert!(rm_misses > 0, "RM met every deadline at U = 1");
    assert_eq!(edf_misses, 0);
}

#[test]
fn fp_schedules_rate_monotonic_as_the_builtin_fp_does() {
    let Some(wasm) = example("fp") else {
        return;
    };
    let dir = scratch("fp");
    let dur = 2_800 * MS + MS / 2;
    let w = wasm.display().to_string();
    // Priority by rate (shorter period first), distinct within each set.
    let rate = |t: &Task| format!("priority = {}", 1000 - t.period);
    for (k, (seed, n, u)) in [(11, 3, 0.6), (12, 4, 0.9), (13, 4, 1.1)]
        .into_iter()
        .enumerate()
    {
        let mut ts = task_set(seed, n, u);
        // Equal periods would leave the order to FIFO among equals.
        for (i, t) in ts.iter_mut().enumerate() {
            t.period += i as u64;
        }
        let plug = simulate_ref(&dir, &format!("fpw{k}"), &edf_file(&w, "", &ts, rate), dur);
        let builtin = simulate_ref(&dir, &format!("fp{k}"), &edf_file("fp", "", &ts, rate), dur);
        let (a, b) = (counts(&plug, n), counts(&builtin, n));
        eprintln!(
            "fp set {k} U = {:.3}: fp.wasm {a:?}, built-in fp {b:?}",
            util(&ts)
        );
        assert_eq!(a, b, "set {k}: fp.wasm and the built-in fp differ");
        for i in 0..n {
            let name = format!("t{i}");
            assert_eq!(
                thread(&plug, &name).cpu_ns,
                thread(&builtin, &name).cpu_ns,
                "{name}"
            );
        }
    }
    // The classic pair: RM misses under both.
    let classic = [
        Task { exec: 2, period: 4 },
        Task {
            exec: 5,
            period: 10,
        },
    ];
    let plug = simulate_ref(&dir, "fpw-classic", &edf_file(&w, "", &classic, rate), dur);
    assert!(
        counts(&plug, 2)[1].1 > 0,
        "fp.wasm met every deadline of the classic pair"
    );
}

#[test]
fn rescs_gives_each_child_its_amount_in_every_window() {
    let Some(wasm) = example("rescs") else {
        return;
    };
    let dir = scratch("rescs");
    let m = hsched_plugin::load(&wasm, hsched_plugin::Limits::default()).unwrap();
    let g = m.descriptor.guarantee.expect("rescs declares a guarantee");
    assert_eq!(
        (g.needs.as_str(), g.gives.as_str()),
        ("ALL", "RESCS {amount} {period}")
    );
    // "first" is registered first, so it takes all the unreserved time
    // and any other rule than the slots would starve "late" and "mid".
    let kids = [("first", 5u64), ("mid", 3), ("late", 7)];
    let ts: Vec<_> = kids
        .iter()
        .map(|(n, a)| (*n, format!("amount = \"{a}ms\", period = \"20ms\"")))
        .collect();
    let toml = write_toml(&dir, "rescs", &flat(&wasm, "frame = \"20ms\"", &ts));
    let dur = 2_000 * MS;
    let (r, runs) = traced(&toml, dur);
    for (name, amount) in kids {
        let (least, at) = min_window(runs_of(&runs, &r, name), 20 * MS, 0, dur);
        eprintln!(
            "rescs {name} (RESCS {amount} 20): least in any 20 ms {:.3} ms (at {:.3} ms), total {:.1} ms",
            least as f64 / MS as f64,
            at as f64 / MS as f64,
            thread(&r, name).cpu_ns as f64 / MS as f64
        );
        assert!(
            least >= amount * MS,
            "{name}: {least} ns in the 20 ms from {at} ns"
        );
    }
    // The slots are soft: the 5 ms left of each frame goes to "first".
    let late = thread(&r, "late").cpu_ns as f64 / dur as f64;
    assert!((late - 0.35).abs() < 0.01, "late got {late}");
}

/// What §5.3.3.1's chain promises each thread of the SFQ instance: its
/// PSBE share and error, ms.
fn sfq_chain() -> [(&'static str, f64, f64); 6] {
    // Theorem 5.4: RESCS 10 20 → PSBE 0.5 5. Equation 5.2 (q = 10, T = 6):
    // weight r of 1 gets PSBE 0.5·r, r·T·q/0.5 + r·5/0.5 + q.
    let psbe = |r: f64| (0.5 * r, r * 6.0 * 10.0 / 0.5 + r * 5.0 / 0.5 + 10.0);
    let (s1, d1) = psbe(0.5);
    let (s2, d2) = psbe(0.1);
    [
        ("T1", s1, d1),
        ("T2", s2, d2),
        ("T3", s2, d2),
        ("T4", s2, d2),
        ("T5", s2, d2),
        ("T6", s2, d2),
    ]
}

#[test]
fn the_sfq_worked_example_runs_and_keeps_its_promises() {
    let Some(wasm) = example("rescs") else {
        return;
    };
    let src = repo().join("sdk/examples/sfq-worked-example.toml");
    let text = read(&src);
    let named = "policy = \"../build/rescs.wasm\"";
    assert!(text.contains(named), "the example no longer names {named}");
    let dir = scratch("sfq");
    let toml = write_toml(
        &dir,
        "sfq-worked-example",
        &text.replace(named, &format!("policy = \"{}\"", wasm.display())),
    );
    let chain = sfq_chain();
    assert_eq!((chain[0].1, chain[0].2), (0.25, 75.0), "PSBE 0.25 75");
    let dur = 8_000 * MS;
    let (r, runs) = traced(&toml, dur);
    for (name, s, d) in chain {
        let t = runs_of(&runs, &r, name);
        let short = worst_shortfall(t, s, dur) / MS as f64;
        let share = thread(&r, name).cpu_ns as f64 / dur as f64;
        eprintln!(
            "sfq {name}: PSBE {s} {d}: worst shortfall {short:.3} ms (promised at most {d} ms), share {share:.4}"
        );
        assert!(
            short <= d + 1e-6,
            "{name}: short by {short} ms, more than {d}"
        );
        assert!(share >= s - d / (dur / MS) as f64, "{name}: share {share}");
    }
    // Theorem 5.7 at 400 ms: RESCS 25 400 for T1.
    let (least, at) = min_window(runs_of(&runs, &r, "T1"), 400 * MS, 0, dur);
    eprintln!(
        "sfq T1: least in any 400 ms {:.3} ms (RESCS 25 400), at {:.1} ms",
        least as f64 / MS as f64,
        at as f64 / MS as f64
    );
    assert!(
        least >= 25 * MS,
        "T1: {least} ns in the 400 ms from {at} ns"
    );
    // The SFQ instance itself: RESCS 10 20 from the root.
    let sfq: Vec<(u64, u64)> = {
        let mut all: Vec<(u64, u64)> = chain
            .iter()
            .flat_map(|(n, _, _)| runs_of(&runs, &r, n).iter().copied())
            .collect();
        all.sort_unstable();
        all
    };
    let (least, at) = min_window(&sfq, 20 * MS, 0, dur);
    assert!(
        least >= 10 * MS,
        "SFQ: {least} ns in the 20 ms from {at} ns"
    );
}

#[test]
fn the_makefile_rebuilds_every_plugin_when_a_header_changes() {
    // Builds into a scratch OUT, then asks make (-n, nothing runs; -W,
    // as if the file were new, nothing is touched) what a changed header
    // would rebuild.
    if example("stride").is_none() {
        return;
    }
    let out = scratch("make");
    let make = |args: &[&str]| {
        let o = std::process::Command::new("make")
            .arg("-C")
            .arg(repo().join("sdk"))
            .arg(format!("OUT={}", out.display()))
            .args(args)
            .output()
            .expect("make runs");
        assert!(
            o.status.success(),
            "make {args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    make(&[]);
    assert!(
        make(&["-n"]).lines().all(|l| !l.contains("clang")),
        "a fresh build is not up to date"
    );
    let examples = ["edf", "eevdf", "fp", "lottery", "rescs", "stride"];
    for h in ["examples/uniproc.h", "include/hsched_policy.h"] {
        let plan = make(&["-n", "-W", h]);
        for e in examples {
            assert!(
                plan.contains(&format!("{e}.wasm")),
                "a change to {h} would not rebuild {e}.wasm:\n{plan}"
            );
        }
    }
}
