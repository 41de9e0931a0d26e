//! Bad input never panics (DESIGN.md §4.7): random text, hand-built invalid
//! guarantees, degenerate task sets and random hierarchies go through every
//! entry point. Seeded; replay with `HSCHED_SEED=N`.

mod common;

use common::{random_guarantee, rng_from_env, Rng};
use hsched_guarantee::compose::{
    compose, Hierarchy, ParentRef, ParentSpec, SchedulerSpec, ThreadSpec,
};
use hsched_guarantee::ghost::{
    min_amount, parameter_space, schedulable_in_reservation, search_reservation, Grid, SearchConfig,
};
use hsched_guarantee::mapping::{EdgeParams, InstanceParams, RateClass};
use hsched_guarantee::rta::{self, Task};
use hsched_guarantee::sbf::{edf_schedulable, fp_response_times, Supply};
use hsched_guarantee::{convert, satisfies, ConvertParams, Duration, Guarantee, GuaranteeKind};

const WORDS: &[&str] = &[
    "ALL",
    "RESU",
    "RESBH",
    "RESBS",
    "RESCH",
    "RESCS",
    "RESPS",
    "RESNH",
    "RESSH",
    "PSBE",
    "PS",
    "NULL",
    "10",
    "0",
    "-1",
    "1.5ms",
    "20",
    "0.25",
    "2s",
    "nan",
    "inf",
    "1e400",
    "25%",
    "150%",
    "ms",
    "",
    "x",
    "ünï",
    "33 33",
    "\t",
    "0.000000001",
];

fn weird_duration(rng: &mut Rng) -> Duration {
    Duration::from_nanos(*rng.pick(&[0, 1, 7, 1_000_000, 33_000_000, u64::MAX / 3, u64::MAX]))
}

fn weird_share(rng: &mut Rng) -> f64 {
    *rng.pick(&[0.0, -0.5, 0.5, 1.0, 1.5, f64::NAN, f64::INFINITY, 1e-300])
}

fn weird_guarantee(rng: &mut Rng) -> Guarantee {
    let (a, p, z) = (
        weird_duration(rng),
        weird_duration(rng),
        weird_duration(rng),
    );
    let s = weird_share(rng);
    match rng.range(0, 11) {
        0 => Guarantee::All,
        1 => Guarantee::ResU { rate: s },
        2 => Guarantee::ResBH {
            amount: a,
            period: p,
        },
        3 => Guarantee::ResBS {
            amount: a,
            period: p,
        },
        4 => Guarantee::ResCH {
            amount: a,
            period: p,
        },
        5 => Guarantee::ResCS {
            amount: a,
            period: p,
        },
        6 => Guarantee::ResPS {
            amount: a,
            period: p,
            overrun: z,
        },
        7 => Guarantee::ResNH {
            amount: a,
            period: p,
        },
        8 => Guarantee::ResSH {
            amount: a,
            period: p,
            sync: z,
        },
        9 => Guarantee::Psbe { share: s, error: z },
        10 => Guarantee::Ps { share: s },
        _ => Guarantee::Null,
    }
}

#[test]
fn random_text_never_panics() {
    let mut rng = rng_from_env(0xbad_0001);
    for _ in 0..20_000 {
        let n = rng.range(0, 5);
        let text: Vec<&str> = (0..n).map(|_| *rng.pick(WORDS)).collect();
        let text = text.join(if rng.chance(20) { "  " } else { " " });
        match text.parse::<Guarantee>() {
            Ok(g) => assert!(g.validate().is_ok(), "{text:?} parsed into invalid {g:?}"),
            Err(e) => {
                assert!(!e.to_string().is_empty());
                assert!(e.offset <= text.len(), "{text:?}: {e:?}");
            }
        }
        let _ = text.parse::<GuaranteeKind>();
    }
}

#[test]
fn invalid_guarantees_never_panic() {
    let mut rng = rng_from_env(0xbad_0002);
    for _ in 0..20_000 {
        let g = weird_guarantee(&mut rng);
        let _ = g.to_string();
        let _ = (g.rate(), g.max_gap(), g.softened(), g.validate());
        let s = Supply::of(&g);
        let t = weird_duration(&mut rng);
        let _ = (s.sbf(t), s.sbf_inverse(t), s.linear_bound());
        let to = *rng.pick(&GuaranteeKind::ALL_KINDS);
        let params = ConvertParams {
            period: rng.chance(50).then(|| weird_duration(&mut rng)),
            slack: weird_duration(&mut rng),
        };
        if let Ok(out) = convert(&g, to, &params) {
            assert!(g.validate().is_ok(), "converted invalid {g:?}");
            assert!(out.validate().is_ok(), "{g} → {out:?}");
        }
        let other = if rng.chance(50) {
            weird_guarantee(&mut rng)
        } else {
            random_guarantee(&mut rng, to)
        };
        let _ = satisfies(&g, &other).map_err(|e| e.to_string());
    }
}

fn weird_task(rng: &mut Rng) -> Task {
    Task {
        wcet: weird_duration(rng),
        period: weird_duration(rng),
        deadline: weird_duration(rng),
        jitter: weird_duration(rng),
    }
}

#[test]
fn degenerate_task_sets_are_errors_not_panics() {
    let mut rng = rng_from_env(0xbad_0003);
    for _ in 0..400 {
        let n = rng.range(0, 3) as usize;
        let ts: Vec<Task> = (0..n)
            .map(|_| {
                if rng.chance(50) {
                    weird_task(&mut rng)
                } else {
                    Task::ms(rng.range(0, 5) as f64, rng.range(1, 20) as f64)
                }
            })
            .collect();
        let g = if rng.chance(50) {
            weird_guarantee(&mut rng)
        } else {
            random_guarantee(&mut rng, GuaranteeKind::ResBS)
        };
        let s = Supply::of(&g);
        let _ = rta::response_times(&ts);
        let _ = rta::schedulable(&ts);
        let _ = fp_response_times(&ts, &s);
        let _ = edf_schedulable(&ts, &s);
        let (a, p) = (weird_duration(&mut rng), weird_duration(&mut rng));
        let _ = schedulable_in_reservation(&ts, a, p);
        let _ = min_amount(&ts, p, weird_duration(&mut rng));
        let _ = rta::edf_admission(&[(a, p)], weird_share(&mut rng));
    }
    // The search and the grid on small but odd inputs.
    let ts = [Task::ms(1.0, 10.0)];
    let mut cfg = SearchConfig::for_tasks(&ts);
    cfg.tolerance = f64::NAN;
    assert!(search_reservation(&ts, &cfg).is_err());
    cfg.tolerance = 0.0;
    cfg.max_period = Duration::ZERO;
    assert!(search_reservation(&ts, &cfg).is_err());
    assert!(search_reservation(&[], &SearchConfig::for_tasks(&[])).is_ok());
    let huge = Grid::square(Duration::from_secs(10), Duration::from_micros(1));
    assert!(parameter_space(&ts, &huge).is_err());
}

#[test]
fn random_hierarchies_never_panic() {
    let mut rng = rng_from_env(0xbad_0004);
    let policies = [
        "fp", "ts", "rez", "ps", "sfq", "join", "limit", "best", "edf", "", "realrate", "coop",
        "dl",
    ];
    for _ in 0..1500 {
        let cpus = rng.range(0, 3) as u32;
        let ns = rng.range(0, 12) as usize;
        let nt = rng.range(0, 8) as usize;
        let name = |rng: &mut Rng, n: usize| format!("n{}", rng.range(0, n as u64 + 2));
        let mut h = Hierarchy::new(cpus);
        let edge = |rng: &mut Rng| EdgeParams {
            priority: rng.chance(60).then(|| rng.range(0, 3) as i64),
            share: rng.chance(30).then(|| weird_share(rng)),
            warp: rng.chance(10).then(|| weird_duration(rng)),
            amount: rng
                .chance(40)
                .then(|| Duration::from_millis(rng.range(0, 30))),
            period: rng
                .chance(40)
                .then(|| Duration::from_millis(rng.range(0, 40))),
            proportion: rng.chance(30).then(|| weird_share(rng)),
            class: rng.chance(30).then(|| {
                *rng.pick(&[
                    RateClass::RealTime,
                    RateClass::Aperiodic,
                    RateClass::RealRate,
                    RateClass::Misc,
                ])
            }),
        };
        for i in 0..ns {
            let policy = *rng.pick(&policies);
            let mut s = SchedulerSpec::new(&format!("n{i}"), policy);
            s.params = InstanceParams {
                cap: rng.chance(20).then(|| weird_share(&mut rng)),
                amount: rng.chance(10).then(|| weird_duration(&mut rng)),
                period: rng.chance(10).then(|| weird_duration(&mut rng)),
                quantum: rng.chance(10).then(|| weird_duration(&mut rng)),
                overload: rng.chance(10).then(|| weird_share(&mut rng)),
                floor: rng.chance(10).then(|| weird_share(&mut rng)),
                default_period: rng.chance(10).then(|| weird_duration(&mut rng)),
                processors: rng.chance(10).then(|| *rng.pick(&[0, 1, 2, 64, u64::MAX])),
                tick: rng.chance(10).then(|| weird_duration(&mut rng)),
            };
            for _ in 0..rng.range(0, 3) {
                let parent = if rng.chance(25) {
                    ParentRef::Top {
                        cpu: rng.chance(50).then(|| rng.range(0, 3) as u32),
                    }
                } else {
                    ParentRef::Scheduler(name(&mut rng, ns + nt))
                };
                s.parents.push(ParentSpec {
                    parent,
                    params: edge(&mut rng),
                });
            }
            h.add_scheduler(s);
        }
        for i in 0..nt {
            let parent = ParentSpec {
                parent: ParentRef::Scheduler(name(&mut rng, ns)),
                params: edge(&mut rng),
            };
            let mut t = ThreadSpec::new(&format!("n{}", ns + i), parent);
            if rng.chance(50) {
                let kind = *rng.pick(&GuaranteeKind::ALL_KINDS);
                t.request = Some(random_guarantee(&mut rng, kind));
            }
            h.add_thread(t);
        }
        let c = compose(&h);
        let tree = c.render_tree();
        for d in &c.diagnostics {
            assert!(!d.to_string().is_empty());
        }
        assert!(tree.starts_with("top:"));
        for i in 0..c.nodes.len() {
            let _ = c.path(i);
        }
    }
}
