//! `hsched run --compare`: a live run beside the simulator's run of the
//! same file for the same length, program by program. The simulator is the
//! model the hierarchy was designed and checked against; the difference is
//! what the machine added (enforcement latency, interrupts, stolen time,
//! the programs' real demand).

use hsched_core::Duration;
use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;

/// What one side measured of one program or thread.
#[derive(Clone, Debug, PartialEq)]
pub struct Side {
    /// CPU time (ns).
    pub cpu_ns: u64,
    /// Share of the managed processors.
    pub share: f64,
    /// Jobs completed, where the workload has jobs.
    pub jobs: Option<u64>,
    /// Deadlines missed, where it has deadlines.
    pub deadline_misses: Option<u64>,
    /// Largest lateness (ns), where it has deadlines.
    pub max_lateness_ns: Option<i64>,
}

/// One `[[thread]]` of the file (or a program only live mode ran, such as
/// a `-- COMMAND`): `None` on the side that did not run it.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    /// Its name.
    pub name: String,
    /// Simulated.
    pub sim: Option<Side>,
    /// Measured live.
    pub live: Option<Side>,
}

/// The comparison of one live run with one simulated run.
#[derive(Clone, Debug, PartialEq)]
pub struct Comparison {
    /// The length both runs cover (ns): the live run's.
    pub duration_ns: u64,
    /// The simulator's random seed.
    pub seed: u64,
    /// The simulator's threads in its order, then programs only live ran.
    pub rows: Vec<Row>,
    /// What the simulated side models when it is not the file as written
    /// (a kernel-backed run: `hsched_linux::kernel::simulate`), one line
    /// each; empty otherwise.
    pub model: Vec<String>,
}

/// How long to simulate: what the live run measured.
pub fn sim_duration(live: &hsched_linux::Report) -> Duration {
    Duration::from_nanos(live.duration_ns)
}

impl Side {
    /// Both reports count 0 jobs and 0 misses for a workload without jobs
    /// or deadlines (CPU-bound, I/O); here it has none, on either side.
    fn new(cpu_ns: u64, share: f64, jobs: u64, misses: u64, late: Option<i64>) -> Side {
        let deadlines = late.is_some() || misses > 0;
        Side {
            cpu_ns,
            share,
            jobs: (jobs > 0 || deadlines).then_some(jobs),
            deadline_misses: deadlines.then_some(misses),
            max_lateness_ns: late,
        }
    }
}

/// Pairs the simulator's threads with the live run's programs by name.
pub fn compare(live: &hsched_linux::Report, sim: &hsched_sim::Report) -> Comparison {
    let live_side = |p: &hsched_linux::ProgramReport| {
        Side::new(
            p.cpu_ns,
            p.share,
            p.jobs.unwrap_or(0),
            p.deadline_misses.unwrap_or(0),
            p.max_lateness_ns,
        )
    };
    // By name both ways: a file may have thousands of threads (`count`).
    let programs: HashMap<&str, &hsched_linux::ProgramReport> =
        live.programs.iter().map(|p| (p.name.as_str(), p)).collect();
    let simulated: HashSet<&str> = sim.threads.iter().map(|t| t.name.as_str()).collect();
    let mut rows: Vec<Row> = sim
        .threads
        .iter()
        .map(|t| Row {
            name: t.name.clone(),
            sim: Some(Side::new(
                t.cpu_ns,
                t.share,
                t.jobs,
                t.deadline_misses,
                t.max_lateness_ns,
            )),
            live: programs.get(t.name.as_str()).map(|p| live_side(p)),
        })
        .collect();
    for p in &live.programs {
        if !simulated.contains(p.name.as_str()) {
            rows.push(Row {
                name: p.name.clone(),
                sim: None,
                live: Some(live_side(p)),
            });
        }
    }
    Comparison {
        duration_ns: live.duration_ns,
        seed: sim.seed,
        rows,
        model: Vec::new(),
    }
}

fn side_json(s: Option<&Side>) -> serde_json::Value {
    s.map_or(serde_json::Value::Null, |s| {
        serde_json::json!({
            "cpu_ns": s.cpu_ns,
            "share": s.share,
            "jobs": s.jobs,
            "deadline_misses": s.deadline_misses,
            "max_lateness_ns": s.max_lateness_ns,
        })
    })
}

impl Comparison {
    /// The `compare` key of `hsched run --compare --json`.
    pub fn to_json(&self) -> serde_json::Value {
        let rows: Vec<serde_json::Value> = self
            .rows
            .iter()
            .map(|r| {
                serde_json::json!({
                    "name": r.name,
                    "sim": side_json(r.sim.as_ref()),
                    "live": side_json(r.live.as_ref()),
                })
            })
            .collect();
        serde_json::json!({
            "duration_ns": self.duration_ns,
            "seed": self.seed,
            "model": self.model,
            "rows": rows,
        })
    }

    /// A readable table: each figure simulated, then live.
    pub fn to_table(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "\ncompared with the simulator (same file, {:.3} s simulated, seed {}):",
            self.duration_ns as f64 / 1e9,
            self.seed
        );
        for m in &self.model {
            let _ = writeln!(s, "  {m}");
        }
        let _ = writeln!(
            s,
            "{:<16} {:>17} {:>7} {:>13} {:>13} {:>21}",
            "", "share %", "", "jobs", "misses", "max lateness ms"
        );
        let _ = writeln!(
            s,
            "{:<16} {:>8} {:>8} {:>7} {:>6} {:>6} {:>6} {:>6} {:>10} {:>10}",
            "thread", "sim", "live", "diff", "sim", "live", "sim", "live", "sim", "live"
        );
        for r in &self.rows {
            let (sim, live) = (r.sim.as_ref(), r.live.as_ref());
            let share =
                |x: Option<&Side>| x.map_or("-".into(), |x| format!("{:.2}", x.share * 100.0));
            let diff = match (sim, live) {
                // Rounded first, and + 0.0 turns a -0.00 into +0.00.
                (Some(a), Some(b)) => {
                    let d = ((b.share - a.share) * 1e4).round() / 100.0 + 0.0;
                    format!("{d:+.2}")
                }
                _ => "-".into(),
            };
            let count = |v: Option<u64>| v.map_or("-".into(), |v| v.to_string());
            let late = |v: Option<i64>| v.map_or("-".into(), |v| format!("{:.2}", v as f64 / 1e6));
            let _ = writeln!(
                s,
                "{:<16} {:>8} {:>8} {:>7} {:>6} {:>6} {:>6} {:>6} {:>10} {:>10}",
                r.name,
                share(sim),
                share(live),
                diff,
                count(sim.and_then(|x| x.jobs)),
                count(live.and_then(|x| x.jobs)),
                count(sim.and_then(|x| x.deadline_misses)),
                count(live.and_then(|x| x.deadline_misses)),
                late(sim.and_then(|x| x.max_lateness_ns)),
                late(live.and_then(|x| x.max_lateness_ns)),
            );
        }
        let _ = writeln!(
            s,
            "diff: live minus simulated, in points of the managed processors' time; \
             '-': not run, or no jobs or deadlines"
        );
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = include_str!("../tests/compare.toml");

    fn program(
        name: &str,
        share: f64,
        jobs: u64,
        misses: u64,
        late: Option<i64>,
    ) -> hsched_linux::ProgramReport {
        hsched_linux::ProgramReport {
            name: name.into(),
            pid: 1,
            principal: None,
            workload: "x".into(),
            threads: 1,
            cpu_ns: (share * 1e9) as u64,
            share,
            jobs: Some(jobs),
            deadline_misses: Some(misses),
            max_lateness_ns: late,
            exit_status: None,
        }
    }

    #[test]
    fn rows_pair_names_and_keep_what_one_side_lacks() {
        let h = hsched_config::parse_str(FILE, "t.toml").unwrap();
        let live = hsched_linux::Report {
            duration_ns: 1_000_000_000,
            programs: vec![
                program("hog", 0.78, 0, 0, None),
                program("video", 0.2, 99, 2, Some(1_500_000)),
                program("make", 0.02, 0, 0, None),
            ],
            ..Default::default()
        };
        let opts = hsched_sim::SimOptions {
            duration: Some(sim_duration(&live)),
            ..Default::default()
        };
        let sim = hsched_sim::run(&h, opts).unwrap();
        let c = compare(&live, &sim);
        assert_eq!(c.duration_ns, 1_000_000_000);
        let names: Vec<&str> = c.rows.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["video", "hog", "make"]);
        let video = &c.rows[0];
        let (s, l) = (video.sim.as_ref().unwrap(), video.live.as_ref().unwrap());
        assert_eq!((s.jobs, s.deadline_misses), (Some(100), Some(0)));
        assert!((s.share - 0.2).abs() < 1e-3, "{s:?}");
        assert_eq!((l.jobs, l.deadline_misses), (Some(99), Some(2)));
        // A CPU-bound thread has neither jobs nor misses on either side.
        let hog = &c.rows[1];
        assert_eq!(hog.sim.as_ref().unwrap().jobs, None);
        assert_eq!(hog.live.as_ref().unwrap().deadline_misses, None);
        assert!(c.rows[2].sim.is_none());
        let t = c.to_table();
        assert!(
            t.contains("video") && t.contains("+0.00") && t.contains("1.50"),
            "{t}"
        );
        let j = c.to_json();
        assert_eq!(j["rows"][2]["sim"], serde_json::Value::Null);
        assert_eq!(j["rows"][0]["live"]["deadline_misses"], 2);
    }
}
