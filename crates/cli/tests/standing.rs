//! The standing check that proof and simulation agree: random hierarchies
//! (fp, every rez variant, ps, ts, join, limit; one to four processors;
//! periodic and sporadic threads with offsets, jitter and deadlines on both
//! sides of the period; a context-switch cost), analysed with `hsched
//! analyze --json`, then simulated from the critical instant and from
//! random phasings under several seeds. Every thread the analysis certifies
//! must show no miss:
//!
//! * the threads of an application whose verdict is `met`;
//! * a periodic thread directly under `rez` whose request (`RESBH x y`,
//!   period `y`, no jitter, `exec ≤ x`) the composition grants: its jobs
//!   are released at the starts of its reservation's periods, so the
//!   reservation alone meets them (without a context-switch cost, which
//!   the composition does not charge).
//!
//! A failure prints the case's seed and the file it wrote; replay one case
//! with `HSCHED_STANDING_SEED=N cargo test -p hsched-cli --test standing`,
//! run more or fewer with `HSCHED_STANDING_CASES=N` (default 2000), and keep every
//! case's file with `HSCHED_STANDING_KEEP=1`.

use hsched_core::testing::SplitMix as Rng;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn hsched(args: &[&str]) -> (serde_json::Value, i32, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_hsched"))
        .current_dir(root())
        .args(args)
        .output()
        .expect("hsched runs");
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    let doc = serde_json::from_slice(&o.stdout).unwrap_or(serde_json::Value::Null);
    (doc, o.status.code().unwrap_or(-1), err)
}

/// A random hierarchy, as text, with offsets either all zero (the
/// critical instant) or drawn from `phase` when given.
struct Case {
    /// Scheduler and thread tables, with `{offset:NAME}` placeholders.
    body: String,
    /// Periodic threads and their periods (µs), to fill the offsets.
    periodic: Vec<(String, u64)>,
    cpus: u64,
    switch_us: u64,
    /// Threads certified by their own request (see the module docs).
    requested: Vec<String>,
}

impl Case {
    fn text(&self, phase: Option<&mut Rng>) -> String {
        let mut body = self.body.clone();
        let mut phase = phase;
        for (name, period) in &self.periodic {
            let off = match phase.as_deref_mut() {
                Some(r) => r.range(0, period - 1),
                None => 0,
            };
            body = body.replace(&format!("{{offset:{name}}}"), &format!("{off}us"));
        }
        format!(
            "[machine]\ncpus = {}\ncontext_switch = \"{}us\"\n\n{body}",
            self.cpus, self.switch_us
        )
    }
}

const PERIODS_MS: &[u64] = &[4, 5, 8, 10, 20, 25, 40, 50];

struct Gen {
    rng: Rng,
    out: String,
    periodic: Vec<(String, u64)>,
    requested: Vec<String>,
    threads: usize,
    schedulers: usize,
}

impl Gen {
    fn name(&mut self, prefix: &str) -> String {
        self.schedulers += 1;
        format!("{prefix}{}", self.schedulers)
    }

    fn scheduler(&mut self, name: &str, policy: &str, parent: Option<(&str, String)>, extra: &str) {
        let _ = writeln!(
            self.out,
            "[[scheduler]]\nname = \"{name}\"\npolicy = \"{policy}\""
        );
        if let Some((p, params)) = parent {
            let _ = writeln!(self.out, "parent = \"{p}\"\nparams = {{ {params} }}");
        }
        self.out.push_str(extra);
        self.out.push('\n');
    }

    /// A periodic or sporadic task: (workload, exec µs, period µs).
    fn task(&mut self, name: &str, max_util: f64) -> (String, u64, u64) {
        let r = &mut self.rng;
        let t = PERIODS_MS[r.range(0, PERIODS_MS.len() as u64 - 1) as usize] * 1000;
        let c = ((t as f64 * max_util * r.range(10, 100) as f64 / 100.0) as u64).max(50);
        let d = if r.chance(50) {
            t
        } else {
            r.range(c + 100, 2 * t)
        };
        if r.chance(20) {
            let max = t + r.range(0, t);
            return (
                format!("{{ kind = \"sporadic\", min_interarrival = \"{t}us\", max_interarrival = \"{max}us\", exec = \"{c}us\", deadline = \"{d}us\" }}"),
                c,
                t,
            );
        }
        let j = if r.chance(30) {
            r.range(0, (d / 4).max(1))
        } else {
            0
        };
        self.periodic.push((name.to_string(), t));
        (
            format!("{{ kind = \"periodic\", period = \"{t}us\", exec = \"{c}us\", deadline = \"{d}us\", jitter = \"{j}us\", offset = \"{{offset:{name}}}\" }}"),
            c,
            t,
        )
    }

    fn thread(
        &mut self,
        sched: &str,
        params: &str,
        workload: &str,
        guarantee: Option<&str>,
    ) -> String {
        self.threads += 1;
        let name = format!("t{}", self.threads);
        let _ = writeln!(
            self.out,
            "[[thread]]\nname = \"{name}\"\nscheduler = \"{sched}\""
        );
        if !params.is_empty() {
            let _ = writeln!(self.out, "params = {{ {params} }}");
        }
        if let Some(g) = guarantee {
            let _ = writeln!(self.out, "guarantee = \"{g}\"");
        }
        let _ = writeln!(self.out, "workload = {workload}\n");
        name
    }

    /// An fp application of 1–4 periodic or sporadic threads; its total
    /// utilization.
    fn application(&mut self, name: &str, budget: f64) -> f64 {
        let n = self.rng.range(1, 4);
        let mut u = 0.0;
        for k in 0..n {
            self.threads += 1;
            let tname = format!("t{}", self.threads);
            let (w, c, t) = self.task(&tname, budget / n as f64);
            u += c as f64 / t as f64;
            let prio = if self.rng.chance(20) { 1 } else { 10 - k };
            let _ = writeln!(
                self.out,
                "[[thread]]\nname = \"{tname}\"\nscheduler = \"{name}\"\nparams = {{ priority = {prio} }}\nworkload = {w}\n"
            );
        }
        u
    }

    fn noise(&mut self, sched: &str, params: &str) {
        let w = if self.rng.chance(50) {
            "{ kind = \"cpu-bound\" }".to_string()
        } else {
            "{ kind = \"interactive\", think = \"30ms\", burst = \"5ms\" }".to_string()
        };
        self.thread(sched, params, &w, None);
    }

    /// A rez instance with reservations for applications, threads and a
    /// join, under `parent`.
    fn rez(&mut self, parent: &str, prio: i64, ts: &str) {
        let variant = ["basic", "catch-up", "feedback"][self.rng.range(0, 2) as usize];
        let rez = self.name("rez");
        self.scheduler(
            &rez,
            "rez",
            Some((parent, format!("priority = {prio}"))),
            &format!("cap = 0.9\nvariant = \"{variant}\"\n"),
        );
        for _ in 0..self.rng.range(1, 3) {
            match self.rng.range(0, 3) {
                0 | 1 => {
                    // An application in a reservation sized around its need.
                    let app = self.name("app");
                    let y = [1000u64, 2000, 5000][self.rng.range(0, 2) as usize];
                    let mut body = std::mem::take(&mut self.out);
                    let u = self.application(&app, 0.25);
                    let threads = std::mem::take(&mut self.out);
                    let x = ((y as f64 * u * self.rng.range(100, 250) as f64 / 100.0) as u64)
                        .clamp(50, y * 6 / 10);
                    self.out = std::mem::take(&mut body);
                    self.scheduler(
                        &app,
                        "fp",
                        Some((&rez, format!("amount = \"{x}us\", period = \"{y}us\""))),
                        "",
                    );
                    self.out.push_str(&threads);
                }
                2 => {
                    // A thread asking for the reservation its jobs need.
                    let y = PERIODS_MS[self.rng.range(0, 4) as usize] * 1000;
                    let c = y * self.rng.range(5, 20) / 100;
                    let x = c + c * self.rng.range(0, 50) / 100;
                    let name = self.thread(
                        &rez,
                        &format!("amount = \"{x}us\", period = \"{y}us\""),
                        &format!("{{ kind = \"periodic\", period = \"{y}us\", exec = \"{c}us\" }}"),
                        Some(&format!(
                            "RESBH {} {}",
                            c as f64 / 1000.0,
                            y as f64 / 1000.0
                        )),
                    );
                    self.requested.push(name);
                }
                _ => {
                    // A join of a reservation and time sharing (§6.2).
                    let join = self.name("join");
                    let y = [20_000u64, 40_000][self.rng.range(0, 1) as usize];
                    let x = y * self.rng.range(5, 20) / 100;
                    let _ = writeln!(
                        self.out,
                        "[[scheduler]]\nname = \"{join}\"\npolicy = \"join\"\nparents = [ {{ name = \"{rez}\", amount = \"{x}us\", period = \"{y}us\" }}, {{ name = \"{ts}\" }} ]\n"
                    );
                    let w = if self.rng.chance(50) {
                        "{ kind = \"video\", fps = 25, i = \"12ms\", p = \"7ms\", b = \"4ms\" }"
                            .to_string()
                    } else {
                        "{ kind = \"cpu-bound\" }".to_string()
                    };
                    self.thread(&join, "", &w, None);
                }
            }
        }
    }
}

fn generate(seed: u64) -> Case {
    let mut g = Gen {
        rng: Rng(seed),
        out: String::new(),
        periodic: Vec::new(),
        requested: Vec::new(),
        threads: 0,
        schedulers: 0,
    };
    let cpus = g.rng.range(1, 4);
    let switch_us = if g.rng.chance(25) {
        g.rng.range(1, 20)
    } else {
        0
    };
    g.scheduler("root", "fp", None, "");
    g.scheduler("fair", "ts", Some(("root", "priority = 1".into())), "");
    g.noise("fair", "");
    let mut prio = 20;
    for _ in 0..g.rng.range(1, 3) {
        prio -= if g.rng.chance(15) { 0 } else { 1 };
        match g.rng.range(0, 4) {
            0 | 1 => g.rez("root", prio, "fair"),
            2 => {
                // An application on a processor of its own, when fp's rank
                // gives it one.
                let app = g.name("app");
                g.scheduler(&app, "fp", Some(("root", format!("priority = {prio}"))), "");
                g.application(&app, 0.6);
            }
            3 => {
                // Proportional share: an application with a share of it.
                let ps = g.name("ps");
                g.scheduler(
                    &ps,
                    "ps",
                    Some(("root", format!("priority = {prio}"))),
                    "quantum = \"1ms\"\n",
                );
                let app = g.name("app");
                g.scheduler(&app, "fp", Some((&ps, "share = 3".into())), "");
                g.application(&app, 0.3);
                g.noise(&ps, "share = 1");
            }
            _ => {
                // A limit capping an application inside a reservation.
                let rez = g.name("rez");
                g.scheduler(
                    &rez,
                    "rez",
                    Some(("root", format!("priority = {prio}"))),
                    "",
                );
                let lim = g.name("limit");
                g.scheduler(
                    &lim,
                    "limit",
                    Some((&rez, "amount = \"3ms\", period = \"10ms\"".into())),
                    "amount = \"3ms\"\nperiod = \"10ms\"\n",
                );
                let app = g.name("app");
                g.scheduler(&app, "fp", Some((&lim, String::new())), "");
                g.application(&app, 0.1);
            }
        }
    }
    Case {
        body: g.out,
        periodic: g.periodic,
        cpus,
        switch_us,
        requested: g.requested,
    }
}

/// The threads `analyze` certifies, or `None` when the file is not one the
/// simulator takes (the generator's rare invalid combinations).
fn certified(case: &Case, path: &str) -> Option<Vec<String>> {
    let (doc, code, err) = hsched(&["analyze", path, "--json"]);
    if doc.is_null() {
        assert_eq!(code, 2, "analyze crashed on {path}: {err}");
        return None;
    }
    let mut out = Vec::new();
    for app in doc["applications"].as_array().unwrap() {
        if app["verdict"] == "met" {
            for t in app["threads"].as_array().unwrap() {
                out.push(t["thread"].as_str().unwrap().to_string());
            }
        }
    }
    if case.switch_us == 0 {
        for t in doc["threads"].as_array().unwrap() {
            let name = t["name"].as_str().unwrap();
            if t["status"] == "ok" && case.requested.iter().any(|r| r == name) {
                out.push(name.to_string());
            }
        }
    }
    Some(out)
}

/// Misses per certified thread in one simulation.
fn misses(path: &str, seed: u64, duration: &str, certified: &[String]) -> Vec<(String, u64)> {
    let seed = seed.to_string();
    let (doc, code, err) = hsched(&[
        "sim",
        path,
        "--duration",
        duration,
        "--seed",
        &seed,
        "--json",
    ]);
    assert_eq!(code, 0, "sim failed on {path}: {err}");
    doc["threads"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| certified.iter().any(|c| t["name"] == c.as_str()))
        .filter_map(|t| {
            let m = t["deadline_misses"].as_u64().unwrap_or(0);
            (m > 0).then(|| (t["name"].as_str().unwrap().to_string(), m))
        })
        .collect()
}

/// Checks one case; `Err` says what disagreed.
fn check(seed: u64, dir: &Path) -> Result<usize, String> {
    let case = generate(seed);
    let path = dir.join(format!("case-{seed}.toml"));
    let p = path.display().to_string();
    std::fs::write(&path, case.text(None)).unwrap();
    let Some(certified) = certified(&case, &p) else {
        return Ok(0);
    };
    if certified.is_empty() {
        if std::env::var_os("HSCHED_STANDING_KEEP").is_none() {
            let _ = std::fs::remove_file(&path);
        }
        return Ok(0);
    }
    let mut phase = Rng(seed ^ 0x9e37_79b9);
    for run in 0..4u64 {
        let file = if run == 0 {
            path.clone()
        } else {
            let f = dir.join(format!("case-{seed}-phase{run}.toml"));
            std::fs::write(&f, case.text(Some(&mut phase))).unwrap();
            f
        };
        let f = file.display().to_string();
        let missed = misses(&f, seed.wrapping_add(run), "4s", &certified);
        if !missed.is_empty() {
            return Err(format!(
                "case seed {seed}: certified {certified:?} but {missed:?} missed in {f} (sim --seed {})",
                seed.wrapping_add(run)
            ));
        }
        if run > 0 {
            let _ = std::fs::remove_file(&file);
        }
    }
    if std::env::var_os("HSCHED_STANDING_KEEP").is_none() {
        let _ = std::fs::remove_file(&path);
    }
    Ok(certified.len())
}

#[test]
fn every_certified_thread_meets_its_deadlines_in_simulation() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("standing");
    std::fs::create_dir_all(&dir).unwrap();
    let env = |k: &str| std::env::var(k).ok().and_then(|v| v.parse::<u64>().ok());
    let seeds: Vec<u64> = match env("HSCHED_STANDING_SEED") {
        Some(s) => vec![s],
        None => {
            let n = env("HSCHED_STANDING_CASES").unwrap_or(2000);
            (0..n).map(|k| 0x57a1_d000 + k).collect()
        }
    };
    let workers = std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .min(4);
    let chunks: Vec<Vec<u64>> = (0..workers)
        .map(|w| seeds.iter().copied().skip(w).step_by(workers).collect())
        .collect();
    let results: Vec<(usize, usize, Vec<String>)> = std::thread::scope(|s| {
        let handles: Vec<_> = chunks
            .iter()
            .map(|chunk| {
                let dir = dir.clone();
                s.spawn(move || {
                    let (mut cases, mut threads, mut failures) = (0, 0, Vec::new());
                    for &seed in chunk {
                        match check(seed, &dir) {
                            Ok(n) => {
                                cases += usize::from(n > 0);
                                threads += n;
                            }
                            Err(e) => failures.push(e),
                        }
                    }
                    (cases, threads, failures)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let cases: usize = results.iter().map(|r| r.0).sum();
    let threads: usize = results.iter().map(|r| r.1).sum();
    let failures: Vec<&String> = results.iter().flat_map(|r| &r.2).collect();
    eprintln!(
        "standing check: {} hierarchies, {cases} with certified threads, {threads} certified threads, 4 simulations of 4 s each",
        seeds.len()
    );
    assert!(
        failures.is_empty(),
        "{} disagreements:\n{}",
        failures.len(),
        failures
            .iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    );
    if seeds.len() > 100 {
        assert!(
            cases * 4 > seeds.len(),
            "too few hierarchies certify anything: {cases}"
        );
    }
}
