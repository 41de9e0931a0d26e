//! The random protocol test's generator and driver (Regehr 2001, §9.4.1),
//! generic over the policies it mixes: crates/policies/tests/protocol_random.rs
//! runs it over the built-in policies and crates/plugin/tests/conformance.rs
//! over the example plug-ins, with the same seeds, steps and checker.
#![allow(dead_code)] // each test binary uses a part

use hsched_core::testing::SplitMix as Rng;
use hsched_core::{
    CpuId, Hsi, HsiError, InstanceId, Instant, Msg, ParamSpec, ParamValue, Params, ParentLink,
    ParentRef, ThreadId,
};
use hsched_policies::PolicyInfo;

fn ms(x: u64) -> ParamValue {
    ParamValue::Str(format!("{x}ms"))
}

/// A plausible random value for a parameter, chosen by its key.
pub fn random_value(rng: &mut Rng, spec: &ParamSpec, period_ms: u64) -> Option<ParamValue> {
    Some(match spec.key {
        "priority" => ParamValue::Int(rng.range(0, 12) as i64),
        // Keys only plug-ins declare (sdk/examples); no built-in reads them,
        // so the built-ins draw the same values as before.
        "tickets" => ParamValue::Int(rng.range(1, 100) as i64),
        "seed" => ParamValue::Int(rng.range(1, 1000) as i64),
        "deadline" => ms(rng.range(1, period_ms)),
        "frame" => ms(period_ms),
        "share" => ParamValue::Int(rng.range(1, 5) as i64),
        "warp" => ms(rng.range(0, 5)),
        "nice" => ParamValue::Int(rng.range(0, 10) as i64 - 5),
        "period" => ms(period_ms),
        "amount" => ms(rng.range(1, (period_ms / 4).max(1))),
        "quantum" => ms(rng.range(1, 30)),
        "cap" => ParamValue::Float(0.85),
        "mode" => ParamValue::Str(if rng.chance(50) { "rr" } else { "fp" }.into()),
        "domain" => ParamValue::Int(rng.range(0, 3) as i64),
        // dl's: processors of its root domain, and its budget-check tick
        // (best's `tick`, default 1.25ms, keeps its default as before).
        "processors" => ParamValue::Int(rng.range(1, 5) as i64),
        "tick" if spec.default == "0" => ms(rng.range(0, 5)),
        _ => return None,
    })
}

pub fn random_params(rng: &mut Rng, specs: &[ParamSpec]) -> Params {
    let period = rng.range(5, 60);
    let mut p = Params::new();
    for s in specs {
        // Required parameters always; optional ones half the time.
        if s.default == "required" || rng.chance(50) {
            if let Some(v) = random_value(rng, s, period) {
                p.insert(s.key, v);
            }
        }
    }
    p
}

struct World {
    hsi: Hsi,
    /// (instance, its policy info)
    instances: Vec<(InstanceId, &'static PolicyInfo)>,
    threads: Vec<ThreadId>,
    now: u64,
}

impl World {
    fn info_of(&self, id: InstanceId) -> &'static PolicyInfo {
        self.instances
            .iter()
            .find(|(i, _)| *i == id)
            .map(|(_, p)| *p)
            .expect("known instance")
    }

    fn child_params(&self, rng: &mut Rng, parent: InstanceId) -> Params {
        random_params(rng, self.info_of(parent).child_params)
    }
}

/// Errors an operation may legitimately return (refusals); protocol
/// violations are failures.
pub fn tolerate(r: Result<(), HsiError>) -> Result<(), String> {
    match r {
        Ok(()) | Err(HsiError::Op(_)) => Ok(()),
        Err(e @ HsiError::Protocol(_)) => Err(e.to_string()),
    }
}

pub fn run_seed(seed: u64, policies: &[&'static PolicyInfo], steps: usize) -> Result<(), String> {
    let mut rng = Rng(seed);
    let cpus = rng.range(1, 17) as usize;
    let mut w = World {
        hsi: Hsi::new(cpus),
        instances: Vec::new(),
        threads: Vec::new(),
        now: 0,
    };
    w.hsi.set_checking(true);
    let tracing = std::env::var("HSCHED_TRACE").is_ok();
    w.hsi.set_tracing(tracing);
    let t0 = Instant(0);

    // Roots: one over every processor, or two on disjoint sets.
    let split = if cpus > 1 && rng.chance(30) {
        rng.range(1, cpus as u64 - 1) as usize
    } else {
        cpus
    };
    let single_parent: Vec<_> = policies
        .iter()
        .copied()
        .filter(|p| p.min_parents <= 1)
        .collect();
    let mut roots = vec![(0..split).collect::<Vec<_>>()];
    if split < cpus {
        roots.push((split..cpus).collect());
    }
    for (k, set) in roots.into_iter().enumerate() {
        for _ in 0..8 {
            let info = single_parent[rng.below(single_parent.len() as u64) as usize];
            let Ok(policy) = (info.build)(&random_params(&mut rng, info.instance_params)) else {
                continue;
            };
            let link = ParentLink {
                parent: ParentRef::Top {
                    cpus: set.iter().map(|&c| CpuId(c as u32)).collect(),
                },
                params: Params::new(),
            };
            if let Ok(id) = w
                .hsi
                .create_instance(t0, &format!("root{k}"), policy, vec![link])
            {
                w.instances.push((id, info));
                break;
            }
        }
    }
    if w.instances.is_empty() {
        return Err("no root could be built".into());
    }
    // Inner instances.
    for n in 0..rng.range(0, 10) {
        let info = policies[rng.below(policies.len() as u64) as usize];
        let Ok(policy) = (info.build)(&random_params(&mut rng, info.instance_params)) else {
            continue;
        };
        let nparents = info.min_parents.max(1).min(w.instances.len());
        let mut links = Vec::new();
        for _ in 0..nparents {
            let (p, _) = w.instances[rng.below(w.instances.len() as u64) as usize];
            if links
                .iter()
                .any(|l: &ParentLink| l.parent == ParentRef::Instance(p))
            {
                continue;
            }
            let params = w.child_params(&mut rng, p);
            links.push(ParentLink {
                parent: ParentRef::Instance(p),
                params,
            });
        }
        if links.len() < info.min_parents {
            continue;
        }
        match w.hsi.create_instance(t0, &format!("s{n}"), policy, links) {
            Ok(id) => w.instances.push((id, info)),
            Err(HsiError::Op(_)) => {}
            Err(e) => return Err(format!("creating s{n} ({}): {e}", info.name)),
        }
    }
    let mut next_thread = 0;
    let mut spawn = |w: &mut World, rng: &mut Rng| -> Result<(), String> {
        let (p, _) = w.instances[rng.below(w.instances.len() as u64) as usize];
        let params = w.child_params(rng, p);
        next_thread += 1;
        match w
            .hsi
            .create_thread(Instant(w.now), &format!("t{next_thread}"), p, params)
        {
            Ok(t) => {
                w.threads.push(t);
                Ok(())
            }
            Err(HsiError::Op(_)) => Ok(()),
            Err(e) => Err(e.to_string()),
        }
    };
    for _ in 0..rng.range(1, 3 * cpus as u64 + 4) {
        spawn(&mut w, &mut rng)?;
    }

    let mut events = Vec::new();
    let result = (|| -> Result<(), String> {
        for step in 0..steps {
            // Time passes; timers fire.
            w.now += rng.range(0, 3_000_000);
            let at = Instant(w.now);
            let ctx = |e: String| format!("step {step} at {at}: {e}");
            if let Some(t) = w.hsi.next_timer() {
                if t.as_nanos() <= w.now {
                    tolerate(w.hsi.fire_timers(Instant(w.now))).map_err(ctx)?;
                }
            }
            let now = Instant(w.now);
            let live: Vec<ThreadId> = w
                .threads
                .iter()
                .copied()
                .filter(|&t| w.hsi.thread_live(t))
                .collect();
            let pick = |rng: &mut Rng| live.get(rng.below(live.len() as u64) as usize).copied();
            let r = match rng.below(100) {
                0..=29 => pick(&mut rng).map(|t| w.hsi.wake(now, t)),
                30..=54 => pick(&mut rng).map(|t| w.hsi.block(now, t)),
                55..=59 => pick(&mut rng).map(|t| w.hsi.exit(now, t)),
                60..=69 => {
                    spawn(&mut w, &mut rng).map_err(ctx)?;
                    None
                }
                70..=79 => pick(&mut rng).map(|t| {
                    let (to, _) = w.instances[rng.below(w.instances.len() as u64) as usize];
                    let params = w.child_params(&mut rng, to);
                    w.hsi.move_thread(now, t, to, params)
                }),
                80..=86 => {
                    let rez: Vec<InstanceId> = w
                        .instances
                        .iter()
                        .filter(|(_, p)| p.name.starts_with("rez"))
                        .map(|(i, _)| *i)
                        .collect();
                    match (pick(&mut rng), rez.is_empty()) {
                        (Some(t), false) => {
                            let r = rez[rng.below(rez.len() as u64) as usize];
                            let params = w.child_params(&mut rng, r);
                            Some(w.hsi.begin_reservation(now, t, r, params))
                        }
                        _ => None,
                    }
                }
                87..=91 => pick(&mut rng).map(|t| w.hsi.end_reservation(now, t)),
                92..=97 => pick(&mut rng).map(|t| {
                    let params = w.child_params(&mut rng, w.hsi.thread_parent(t));
                    w.hsi.thread_msg(now, t, &Msg::SetParams(params))
                }),
                _ => {
                    // Destroy a childless, non-root instance now and then.
                    let victim = w
                        .instances
                        .iter()
                        .skip(1)
                        .find(|(i, _)| w.hsi.instance_children(*i).is_empty())
                        .copied();
                    victim.map(|(i, _)| {
                        let r = w.hsi.destroy_instance(now, i);
                        if r.is_ok() {
                            w.instances.retain(|(x, _)| *x != i);
                        }
                        r
                    })
                }
            };
            if let Some(r) = r {
                tolerate(r).map_err(ctx)?;
            }
            if tracing && step % 16 == 0 {
                events.clear();
                w.hsi.drain_trace(&mut events);
            }
        }
        Ok(())
    })();
    let result = result.map_err(|e| {
        let who: Vec<String> = w
            .instances
            .iter()
            .map(|(i, p)| format!("{}={}", w.hsi.instance_name(*i), p.name))
            .collect();
        format!("{e}\n  instances: {}", who.join(" "))
    });
    if result.is_err() && tracing {
        w.hsi.drain_trace(&mut events);
        for ev in events.iter().rev().take(80).rev() {
            eprintln!("{ev:?}");
        }
    }
    result
}

/// Runs `run` over seeds 0..`HSCHED_SEEDS` (default 1 500) at 300 steps,
/// or over the one seed `HSCHED_SEED` at 400, and panics with up to five
/// failures, each with the command (`repro`) that reruns it.
pub fn run_seeds(what: &str, repro: &str, run: impl Fn(u64, usize) -> Result<(), String>) {
    if let Ok(seed) = std::env::var("HSCHED_SEED") {
        let seed: u64 = seed.parse().expect("HSCHED_SEED is a number");
        if let Err(e) = run(seed, 400) {
            panic!("seed {seed} failed with {what}: {e}");
        }
        return;
    }
    let seeds: u64 = std::env::var("HSCHED_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1500);
    let mut failures = Vec::new();
    for seed in 0..seeds {
        if let Err(e) = run(seed, 300) {
            failures.push(format!(
                "seed {seed}: {e}\n  repro: HSCHED_SEED={seed} {repro}"
            ));
            if failures.len() >= 5 {
                break;
            }
        }
    }
    assert!(failures.is_empty(), "{what}\n{}", failures.join("\n"));
}
