//! The ten experiments of Banachowski 2002 (Tables 3.1 and 4.1), simulated for 100 s
//! each: a CPU hog (*best-effort*) beside one to three `srtsim` video
//! tasks, under `best`, `best-rate`, the Linux 2.4 baseline (`linux24`)
//! and rate monotonic (`fp` with priorities by true period, shortest
//! highest, the hog lowest). docs/best.md puts the results next to the
//! report's and explains the differences.
//!
//! Workload (Banachowski 2002, §2.2). Experiments 1–6 use `srtsim`'s video mode:
//! each frame's type is drawn at random (I 1/6, P 1/6, B 2/3) and its time
//! from a normal law around 1.5, 1.25 or 0.85 × the mean frame time with a
//! 10% spread. The simulator's video model takes the three means and a
//! group-of-pictures string, so each task gets a string of random types
//! as long as its run (a fixed `IBBPBB` would repeat I frames in lockstep).
//! Experiments 7–10 use the constant mode: the report's Chapter 4 numbers
//! cannot come from video mode (Exp. 9 at 2/3 load would make half of the
//! I frames longer than the period, so every scheduler, RM included, would
//! miss about 8%; the report has 0% for BEST and BEST-RATE), and Exp. 10's
//! 1.6% for BEST at 100% periodic demand needs exact demand. A late frame
//! is finished and the next one starts at once, its deadline relative to
//! its own start (§2.2.1). The machine ticks at 800 Hz (§3.3.3).
//!
//! Each experiment runs with seeds 1, 2 and 3 (frame types and times
//! differ); the checks use the mean. A fifth column, "EDF", is a reference
//! that is not in the report: earliest deadline first told every task's
//! true period (`hsched_sim::reference`), i.e. what BEST would do if
//! its period detection were perfect and it had no budgets. Print the table with
//! `cargo test -p hsched-sim --release --test best_report -- --nocapture`.

use hsched_core::Duration;
use hsched_policies::PolicyInfo;
use hsched_sim::reference::{self, EDF_TRUE_PERIODS};
use hsched_sim::{run_with_policies, Report, SimOptions};

/// The schedulers compared.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Sched {
    Linux,
    Best,
    BestRate,
    Rm,
    /// Reference: EDF with the true periods (not in the report).
    Edf,
}

impl Sched {
    const ALL: [Sched; 5] = [
        Sched::Linux,
        Sched::Best,
        Sched::BestRate,
        Sched::Rm,
        Sched::Edf,
    ];

    fn policy(self) -> &'static str {
        match self {
            Sched::Linux => "linux24",
            Sched::Best => "best",
            Sched::BestRate => "best-rate",
            Sched::Rm => "fp",
            Sched::Edf => EDF_TRUE_PERIODS,
        }
    }

    fn label(self) -> &'static str {
        match self {
            Sched::Linux => "Linux",
            Sched::Best => "BEST",
            Sched::BestRate => "BEST-RATE",
            Sched::Rm => "RM",
            Sched::Edf => "EDF",
        }
    }
}

/// How `srtsim` chooses the CPU time of a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Work {
    /// Random I/P/B frames (Table 2.4).
    Video,
    /// The mean every frame.
    Constant,
}

/// One `srtsim` task: frames per second and mean CPU fraction.
#[derive(Clone, Copy, Debug)]
struct Srt {
    fps: f64,
    util: f64,
    label: &'static str,
}

const fn srt(fps: f64, util: f64, label: &'static str) -> Srt {
    Srt { fps, util, label }
}

/// One experiment of the report, with its miss percentages per task (in
/// task order) for the schedulers it ran.
struct Exp {
    id: u32,
    hogs: usize,
    hog_nice: i64,
    work: Work,
    srts: &'static [Srt],
    report: &'static [(Sched, &'static [f64])],
}

const EXPS: &[Exp] = &[
    Exp {
        id: 1,
        hogs: 1,
        hog_nice: 0,
        work: Work::Video,
        srts: &[srt(25.0, 0.50, "25fps 50%")],
        report: &[
            (Sched::Linux, &[7.8]),
            (Sched::Best, &[0.1]),
            (Sched::Rm, &[0.0]),
        ],
    },
    Exp {
        id: 2,
        hogs: 1,
        hog_nice: 0,
        work: Work::Video,
        srts: &[srt(25.0, 0.31, "25fps 31%"), srt(33.0, 0.28, "33fps 28%")],
        report: &[
            (Sched::Linux, &[1.7, 0.1]),
            (Sched::Best, &[0.0, 0.0]),
            (Sched::Rm, &[0.5, 0.0]),
        ],
    },
    Exp {
        id: 3,
        hogs: 1,
        hog_nice: 0,
        work: Work::Video,
        srts: &[srt(25.0, 0.625, "25fps 62.5%")],
        report: &[
            (Sched::Linux, &[26.7]),
            (Sched::Best, &[4.8]),
            (Sched::Rm, &[4.8]),
        ],
    },
    Exp {
        id: 4,
        hogs: 1,
        hog_nice: 0,
        work: Work::Video,
        srts: &[srt(25.0, 0.41, "25fps 41%"), srt(33.0, 0.40, "33fps 40%")],
        report: &[
            (Sched::Linux, &[26.8, 24.4]),
            (Sched::Best, &[4.6, 3.3]),
            (Sched::Rm, &[16.7, 0.0]),
        ],
    },
    Exp {
        id: 5,
        hogs: 1,
        hog_nice: 0,
        work: Work::Video,
        srts: &[
            srt(13.0, 0.30, "13fps 30%"),
            srt(19.0, 0.30, "19fps 30%"),
            srt(62.0, 0.31, "62fps 31%"),
        ],
        report: &[
            (Sched::Linux, &[40.7, 37.1, 20.1]),
            (Sched::Best, &[0.1, 0.1, 0.0]),
            (Sched::Rm, &[7.7, 0.0, 0.0]),
        ],
    },
    Exp {
        id: 6,
        hogs: 1,
        hog_nice: 0,
        work: Work::Video,
        srts: &[
            srt(25.0, 0.625, "25fps 62.5%"),
            srt(33.0, 0.625, "33fps 62.5%"),
        ],
        report: &[
            (Sched::Linux, &[52.4, 44.0]),
            (Sched::Best, &[51.3, 16.7]),
            (Sched::Rm, &[83.4, 5.6]),
        ],
    },
    Exp {
        id: 7,
        hogs: 1,
        hog_nice: 0,
        work: Work::Constant,
        srts: &[srt(25.0, 0.50, "25fps 50%")],
        report: &[
            (Sched::Linux, &[7.8]),
            (Sched::Best, &[0.0]),
            (Sched::BestRate, &[0.0]),
        ],
    },
    Exp {
        id: 8,
        hogs: 3,
        hog_nice: 0,
        work: Work::Constant,
        srts: &[srt(25.0, 0.25, "25fps 25%")],
        report: &[
            (Sched::Linux, &[5.6]),
            (Sched::Best, &[0.0]),
            (Sched::BestRate, &[0.0]),
        ],
    },
    Exp {
        id: 9,
        hogs: 1,
        hog_nice: 10,
        work: Work::Constant,
        // "requires an average of 2/3 of the CPU" (§4.1); labelled 67%.
        srts: &[srt(33.0, 2.0 / 3.0, "33fps 67%")],
        report: &[
            (Sched::Linux, &[11.0]),
            (Sched::Best, &[0.0]),
            (Sched::BestRate, &[0.0]),
        ],
    },
    Exp {
        id: 10,
        hogs: 1,
        hog_nice: 0,
        work: Work::Constant,
        srts: &[srt(25.0, 0.50, "25fps 50%"), srt(50.0, 0.50, "50fps 50%")],
        report: &[
            (Sched::Linux, &[32.0, 21.0]),
            (Sched::Best, &[1.6, 1.6]),
            (Sched::BestRate, &[25.0, 14.3]),
        ],
    },
];

const SEEDS: [u64; 3] = [1, 2, 3];
const SECONDS: u64 = 100;

/// Report differences smaller than this many points are not an ordering.
const TIE: f64 = 2.0;

/// Orderings the model does not reproduce: (experiment, task, the
/// scheduler the report has ahead, the one it has behind). See
/// docs/best.md, "Experiment 9".
const KNOWN_DIVERGENCES: &[(u32, usize, Sched, Sched)] = &[
    (9, 0, Sched::Best, Sched::Linux),
    (9, 0, Sched::BestRate, Sched::Linux),
];

fn ns(d: f64) -> String {
    format!("{}ns", d.round() as u64)
}

/// `n` frame types drawn as `srtsim` does (§2.2.1): I and P with
/// probability 1/6 each, B with 2/3; SplitMix64 seeded with `seed`.
fn random_gop(seed: u64, n: usize) -> String {
    let mut rng = hsched_core::testing::SplitMix(seed);
    (0..n)
        .map(|_| match rng.below(6) {
            0 => 'I',
            1 => 'P',
            _ => 'B',
        })
        .collect()
}

/// The hierarchy file of experiment `e` under `sched` with `seed`.
fn hierarchy(e: &Exp, sched: Sched, seed: u64) -> String {
    let mut t = String::from("[machine]\ncpus = 1\ntimer = \"800hz\"\n\n");
    t += &format!(
        "[[scheduler]]\nname = \"root\"\npolicy = \"{}\"\n\n",
        sched.policy()
    );
    // RM ranks by frame rate: the shortest period gets the highest priority.
    let mut by_rate: Vec<usize> = (0..e.srts.len()).collect();
    by_rate.sort_by(|&a, &b| e.srts[b].fps.total_cmp(&e.srts[a].fps));
    for k in 0..e.hogs {
        let params = match sched {
            Sched::Rm => "{ priority = 0 }".to_string(),
            Sched::Edf => "{}".to_string(),
            _ => format!("{{ nice = {} }}", e.hog_nice),
        };
        t += &format!(
            "[[thread]]\nname = \"hog{k}\"\nscheduler = \"root\"\nparams = {params}\n\
             workload = {{ kind = \"cpu-bound\" }}\n\n"
        );
    }
    for (k, s) in e.srts.iter().enumerate() {
        let period = 1e9 / s.fps;
        let mean = period * s.util;
        let params = match sched {
            Sched::Rm => {
                let rank = by_rate
                    .iter()
                    .position(|&x| x == k)
                    .expect("every task is ranked");
                format!("{{ priority = {} }}", e.srts.len() - rank)
            }
            Sched::Edf => format!("{{ period = \"{}\" }}", ns(period)),
            _ => "{}".to_string(),
        };
        let work = match e.work {
            Work::Constant => format!("exec = \"{}\"", ns(mean)),
            Work::Video => {
                let frames = (SECONDS as f64 * s.fps) as usize + 1;
                let gop = random_gop(seed * 1000 + u64::from(e.id) * 16 + k as u64, frames);
                format!(
                    "i = \"{}\", p = \"{}\", b = \"{}\", gop = \"{gop}\"",
                    ns(1.5 * mean),
                    ns(1.25 * mean),
                    ns(0.85 * mean)
                )
            }
        };
        t += &format!(
            "[[thread]]\nname = \"srt{k}\"\nscheduler = \"root\"\nparams = {params}\n\
             workload = {{ kind = \"video\", period = \"{}\", {work}, on_miss = \"continue\" }}\n\n",
            ns(period),
        );
    }
    t
}

/// Miss percentages per task and CPU shares (%, hogs then tasks) of one
/// experiment under one scheduler, averaged over the seeds.
#[derive(Clone, Debug)]
struct Outcome {
    misses: Vec<f64>,
    misses_range: Vec<(f64, f64)>,
    shares: Vec<f64>,
}

fn simulate(e: &Exp, sched: Sched, policies: &[PolicyInfo]) -> Outcome {
    let mut runs = Vec::new();
    for seed in SEEDS {
        let text = hierarchy(e, sched, seed);
        let name = format!("exp{}-{}.toml", e.id, sched.policy());
        let h = hsched_config::parse_str_with_policies(&text, &name, policies)
            .unwrap_or_else(|err| panic!("exp {} under {}: {err:?}", e.id, sched.label()));
        let opts = SimOptions {
            duration: Some(Duration::from_secs(SECONDS)),
            seed: Some(seed),
            ..Default::default()
        };
        let r: Report = run_with_policies(&h, opts, policies)
            .unwrap_or_else(|err| panic!("exp {} under {}: {err}", e.id, sched.label()));
        let misses: Vec<f64> = (0..e.srts.len())
            .map(|k| {
                let t = r.thread(&format!("srt{k}")).expect("task in report");
                100.0 * t.deadline_misses as f64 / t.jobs.max(1) as f64
            })
            .collect();
        let names = (0..e.hogs)
            .map(|k| format!("hog{k}"))
            .chain((0..e.srts.len()).map(|k| format!("srt{k}")));
        let shares: Vec<f64> = names
            .map(|n| 100.0 * r.thread(&n).expect("thread in report").share)
            .collect();
        runs.push((misses, shares));
    }
    let n = runs.len() as f64;
    let column_means = |rows: Vec<&Vec<f64>>| -> Vec<f64> {
        (0..rows[0].len())
            .map(|i| rows.iter().map(|r| r[i]).sum::<f64>() / n)
            .collect()
    };
    let misses = column_means(runs.iter().map(|r| &r.0).collect());
    let shares = column_means(runs.iter().map(|r| &r.1).collect());
    let misses_range = (0..e.srts.len())
        .map(|i| {
            let v = runs.iter().map(|r| r.0[i]);
            (
                v.clone().fold(f64::INFINITY, f64::min),
                v.fold(0.0, f64::max),
            )
        })
        .collect();
    Outcome {
        misses,
        misses_range,
        shares,
    }
}

fn all_outcomes() -> Vec<Vec<Outcome>> {
    let policies = reference::policies();
    EXPS.iter()
        .map(|e| {
            Sched::ALL
                .iter()
                .map(|&s| simulate(e, s, &policies))
                .collect()
        })
        .collect()
}

fn reported(e: &Exp, s: Sched) -> Option<&'static [f64]> {
    e.report.iter().find(|(x, _)| *x == s).map(|(_, m)| *m)
}

/// Prints the Markdown table of docs/best.md.
fn print_table(out: &[Vec<Outcome>]) {
    println!("| exp | task | scheduler | misses % (report) | misses % (here, mean) | range over seeds | CPU % (hogs; tasks) |");
    println!("|---|---|---|---|---|---|---|");
    for (e, row) in EXPS.iter().zip(out) {
        for (&s, o) in Sched::ALL.iter().zip(row) {
            for (k, t) in e.srts.iter().enumerate() {
                let rep = reported(e, s).map_or("–".to_string(), |m| format!("{:.1}", m[k]));
                let (lo, hi) = o.misses_range[k];
                let shares = if k == 0 {
                    let (h, t) = o.shares.split_at(e.hogs);
                    let f = |v: &[f64]| {
                        v.iter()
                            .map(|x| format!("{x:.1}"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    };
                    format!("{}; {}", f(h), f(t))
                } else {
                    String::new()
                };
                println!(
                    "| {} | {} | {} | {rep} | {:.1} | {lo:.1}–{hi:.1} | {shares} |",
                    e.id,
                    t.label,
                    s.label(),
                    o.misses[k]
                );
            }
        }
    }
}

#[test]
fn the_ten_experiments_rank_the_schedulers_as_the_report_does() {
    let out = all_outcomes();
    print_table(&out);
    let mut diverging = Vec::new();
    for (e, row) in EXPS.iter().zip(&out) {
        let ours = |s: Sched| {
            &row[Sched::ALL
                .iter()
                .position(|&x| x == s)
                .expect("known scheduler")]
        };
        for (a, ra) in e.report {
            for (b, rb) in e.report {
                for k in 0..e.srts.len() {
                    // The report has `a` clearly ahead of `b` on task k.
                    if ra[k] + TIE < rb[k] && ours(*a).misses[k] >= ours(*b).misses[k] {
                        diverging.push((e.id, k, *a, *b));
                    }
                }
            }
        }
    }
    assert_eq!(
        diverging, KNOWN_DIVERGENCES,
        "orderings that differ from the report's"
    );

    let get = |id: u32, s: Sched| {
        let i = EXPS.iter().position(|e| e.id == id).expect("experiment");
        &out[i][Sched::ALL.iter().position(|&x| x == s).expect("scheduler")]
    };
    // Exp. 1: BEST gives both processes the same share, almost no misses.
    let o = get(1, Sched::Best);
    assert!(
        o.misses[0] < 1.0 && (o.shares[0] - 50.0).abs() < 3.0,
        "{o:?}"
    );
    // Exp. 3: BEST, like RM, gives the task its 62.5% and misses little
    // more than the impossible frames; Linux splits the processor evenly.
    let (best, rm, linux) = (get(3, Sched::Best), get(3, Sched::Rm), get(3, Sched::Linux));
    assert!(
        best.misses[0] < rm.misses[0] + 4.0,
        "BEST {best:?} RM {rm:?}"
    );
    assert!(best.shares[1] > 58.0 && (linux.shares[1] - 50.0).abs() < 5.0);
    // Exp. 6 (125%): RM starves the hog, Linux gives it a third, BEST some
    // 15%.
    assert!(get(6, Sched::Rm).shares[0] < 2.0);
    assert!((get(6, Sched::Linux).shares[0] - 33.3).abs() < 3.0);
    let h = get(6, Sched::Best).shares[0];
    assert!((10.0..25.0).contains(&h), "BEST hog share {h}");
    // Below saturation, BEST stays within a few points of EDF told the true
    // periods: the price of inferring them.
    for id in [1, 2, 3, 4, 5, 7, 8, 9, 10] {
        let (b, r) = (get(id, Sched::Best), get(id, Sched::Edf));
        for (k, (x, y)) in b.misses.iter().zip(&r.misses).enumerate() {
            assert!(x - y < 4.0, "exp {id} task {k}: BEST {x:.1} vs EDF {y:.1}");
        }
    }
    // Exp. 8: a quarter each under Linux and BEST-RATE.
    for s in [Sched::Linux, Sched::BestRate] {
        assert!(
            get(8, s).shares.iter().all(|x| (x - 25.0).abs() < 4.0),
            "{s:?}"
        );
    }
    // Exp. 10: BEST leaves the hog under 4%; BEST-RATE gives everyone about
    // a third and misses more than BEST but less than Linux.
    assert!(get(10, Sched::Best).shares[0] < 4.0);
    assert!(get(10, Sched::BestRate)
        .shares
        .iter()
        .all(|x| (x - 33.3).abs() < 6.0));
}
