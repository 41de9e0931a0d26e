//! Random hierarchy files run end to end: the whole path from TOML text
//! through `hsched_config`'s checker to the simulator, under the protocol
//! checker. `protocol_random` (hsched-policies) feeds random inputs straight
//! into the HSI and `determinism.rs` runs one fixed hierarchy; this test
//! covers what neither does: random machines (1 to 4 processors, switch
//! costs, ticks, stolen time), random trees of every registered policy with
//! Join DAGs and space-shared roots, every workload model, and `[[at]]`
//! operations, all as a user would write them.
//!
//! The generator keeps within every documented limit, admission control
//! included: the sum of every reservation a `rez` or `realrate` instance is
//! ever asked for stays below its cap (a Rez-FB instance, whose corrected
//! amounts grow into that headroom, takes children at time 0 only), and
//! Join and Limit get at most one child ever. So every file should be
//! accepted (refusals are counted and the first is shown; more than a
//! fifth fails the test) and every run must succeed. Each report must then
//! satisfy the identities of docs/metrics.md and what the protocol implies
//! (no scheduler passes on more supply than it receives, and exactly that
//! where no thread moved and no Join shares it; Limit and hard
//! reservations never exceed their amount per period, give or take a
//! tick), and end with each thread where the operations put it. A share
//! of the seeds are run again: a rerun, and a run without the protocol
//! checker but with a trace, must give the same report.
//!
//! `HSCHED_SEEDS=N` runs N seeds (default 400) from `HSCHED_FIRST_SEED`
//! (default 0); `HSCHED_SEED=N` runs one seed and prints its file. A
//! failure prints the seed and the file, which is also written to
//! `target/tmp/random-run-SEED.toml`; replay it with
//! `hsched sim target/tmp/random-run-SEED.toml --check-protocol`.

use hsched_core::testing::SplitMix as Rng;
use hsched_core::{ParamValue, Params};
use hsched_policies::{registry, PolicyInfo};
use hsched_sim::{Report, SimOptions};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// Uniform in `[lo, hi)`, rounded to three decimals.
fn float(r: &mut Rng, lo: f64, hi: f64) -> f64 {
    ((lo + (hi - lo) * r.unit()) * 1000.0).floor() / 1000.0
}

/// A duration in microseconds, as the file writes it.
fn d(us: u64) -> String {
    match us {
        0 => "0s".into(),
        _ if us.is_multiple_of(1000) => format!("{}ms", us / 1000),
        _ => format!("{us}us"),
    }
}

/// An inline table with `body` inside.
fn table(body: &str) -> String {
    match body {
        "" => "{}".into(),
        _ => format!("{{ {body} }}"),
    }
}

/// [`d`] in quotes, a TOML string.
fn dq(us: u64) -> String {
    format!("\"{}\"", d(us))
}

const MS: u64 = 1000;

/// Every registered policy this generator knows how to parameterize; the
/// test fails when the registry gains one it does not.
const KNOWN: &[&str] = &[
    "fp",
    "ts",
    "rez",
    "ps",
    "join",
    "limit",
    "best",
    "best-rate",
    "linux24",
    "coop",
    "realrate",
    "dl",
];

/// Policies whose children need no parameters and that take any number
/// of them: the default scheduler, which threads join with `{}`.
const DEFAULT_CAPABLE: &[&str] = &["fp", "ts", "ps", "best", "best-rate", "linux24", "coop"];

/// At most `amount` (+ `extra`) per `period`, all in µs.
#[derive(Clone, Copy)]
struct Budget {
    amount: u64,
    period: u64,
    extra: u64,
}

/// One scheduler instance of the generated file.
struct Inst {
    name: String,
    policy: &'static PolicyInfo,
    /// Parents and the parent-side parameters registered with each; empty
    /// for a root.
    parents: Vec<(usize, String)>,
    /// A root's processors (empty: all).
    cpus: Vec<usize>,
    /// Instance parameters, key and TOML value.
    keys: Vec<(&'static str, String)>,
    destroyed: bool,
    /// Join and Limit take one child; the generator never gives them a
    /// second, even after the first left.
    taken: bool,
    /// `rez`: the cap; `realrate`: the overload threshold. Every
    /// reservation ever asked of the instance counts in `load` for good, so
    /// the load admission control sees never exceeds it.
    cap: f64,
    load: f64,
    /// `realrate`: what an adaptive child costs at admission.
    floor: f64,
    /// `fp` with `unique_priorities`: hand out each priority once.
    unique: bool,
    /// An operation moved a thread in or out: what its threads received
    /// need not add up to its supply.
    churn: bool,
    /// Rez-C: a child may receive up to 1 µs more than its amount per
    /// period (docs/policies/rez.md).
    catch_up: bool,
    /// A hard cap on its supply: its own (Limit) or its reservation under
    /// a Rez parent.
    cap_on_supply: Option<Budget>,
    /// Processors a dl instance offers: a child instance may register a VP,
    /// and a load, for each.
    vps: u64,
    /// Creation time (µs).
    born: u64,
    next_priority: u64,
    /// Rez-FB: corrected amounts grow into the headroom below the cap
    /// (docs/policies/rez.md), so a reservation asked for after time 0
    /// may be refused; such an instance takes children at time 0 only.
    feedback: bool,
}

/// One thread (a `count` expands into several).
struct Th {
    name: String,
    start: u64,
    exit: Option<u64>,
    /// The scheduler it names (`None`: the default at its start).
    named: Option<usize>,
    /// A program with `loops` exits by itself, at a time the generator does
    /// not know, so no operation names it.
    finite: bool,
    /// Where it is, once started, in the generator's timeline.
    at: Option<usize>,
    params: String,
    /// Where `end-reservation` takes it back, with which parameters.
    before: Option<(usize, String)>,
    /// An operation moved it: its received time came from several
    /// schedulers.
    moved: bool,
    /// The hard reservation it starts with, until an operation moves it or
    /// changes its parameters.
    reservation: Option<Budget>,
    principal: Option<usize>,
}

struct Gen {
    rng: Rng,
    cpus: usize,
    dur: u64,
    context_switch: u64,
    stolen_cpus: Vec<usize>,
    insts: Vec<Inst>,
    threads: Vec<Th>,
    /// When the children being placed register (µs).
    now: u64,
    /// The hard reservation the last [`Gen::child_params`] made, if any.
    granted: Option<Budget>,
    /// Parameters are for `set-params`, which merges them into the old
    /// ones: `realrate` gets an explicit class, or an old class could
    /// contradict a new proportion.
    changing: bool,
    /// Parameters are for a child instance, which registers one VP per
    /// processor its parent offers it.
    instance_child: bool,
    default: Option<usize>,
    principals: usize,
    queues: Vec<(String, u64, u64)>,
    /// `[[thread]]` tables and `[[at]]` tables, as text.
    thread_text: String,
    ops_text: String,
}

impl Gen {
    /// An operation moves thread `k` under `to` with `params`.
    fn relocate(&mut self, k: usize, to: usize, params: String) {
        let th = &mut self.threads[k];
        self.insts[th.at.unwrap()].churn = true;
        self.insts[to].churn = true;
        (th.at, th.params, th.moved, th.reservation) = (Some(to), params, true, None);
    }

    /// Instance parameters for a new instance of `policy`, and the
    /// admission figures they imply.
    fn instance(&mut self, name: String, policy: &'static PolicyInfo) -> Inst {
        let r = &mut self.rng;
        let mut keys: Vec<(&'static str, String)> = Vec::new();
        let mut inst = Inst {
            name,
            policy,
            parents: Vec::new(),
            cpus: Vec::new(),
            keys: Vec::new(),
            destroyed: false,
            taken: false,
            cap: 0.0,
            load: 0.0,
            floor: 0.0,
            unique: false,
            churn: false,
            catch_up: false,
            cap_on_supply: None,
            vps: 1,
            born: self.now,
            next_priority: 0,
            feedback: false,
        };
        let q = |s: &&str| format!("\"{s}\"");
        match policy.name {
            "fp" => {
                if r.chance(15) {
                    keys.push(("unique_priorities", "true".into()));
                    inst.unique = true;
                }
            }
            "ts" => {
                if r.chance(25) {
                    keys.push(("mode", q(&"fp")));
                } else {
                    if r.chance(30) {
                        keys.push(("mode", q(&"rr")));
                    }
                    if r.chance(50) {
                        keys.push(("quantum", dq(r.range(500, 50 * MS))));
                    }
                    if r.chance(40) {
                        let s = if r.chance(20) {
                            0
                        } else {
                            r.range(20 * MS, 500 * MS)
                        };
                        keys.push(("starvation", dq(s)));
                    }
                }
            }
            "rez" => {
                inst.cap = 0.85;
                if r.chance(40) {
                    inst.cap = float(r, 0.3, 1.0);
                    keys.push(("cap", format!("{:.3}", inst.cap)));
                }
                match r.range(0, 3) {
                    0 => keys.push(("variant", q(&"basic"))),
                    1 => {
                        keys.push(("variant", q(&"catch-up")));
                        inst.catch_up = true;
                    }
                    2 => {
                        keys.push(("variant", q(&"feedback")));
                        inst.feedback = true;
                        if r.chance(50) {
                            keys.push(("gain", format!("{:.3}", float(r, 0.05, 1.0))));
                        }
                    }
                    _ => {}
                }
            }
            "ps" => {
                if r.chance(50) {
                    keys.push(("quantum", dq(r.range(200, 20 * MS))));
                }
            }
            "dl" => {
                let processors = r.range(1, 4);
                if processors > 1 || r.chance(50) {
                    keys.push(("processors", processors.to_string()));
                }
                let mut cap = 0.95;
                if r.chance(40) {
                    cap = float(r, 0.3, 1.0);
                    keys.push(("cap", format!("{cap:.3}")));
                }
                inst.cap = processors as f64 * cap;
                inst.vps = processors;
                if r.chance(50) {
                    keys.push(("tick", dq(*r.pick(&[0, MS, 4 * MS, 10 * MS]))));
                }
            }
            "join" => {
                if r.chance(50) {
                    let m = if r.chance(50) { "or" } else { "overrun" };
                    keys.push(("mode", q(&m)));
                }
            }
            "limit" => {
                let period = r.range(MS, 50 * MS);
                let amount = r.range(period / 20, period).max(1);
                keys.push(("amount", dq(amount)));
                keys.push(("period", dq(period)));
                inst.cap_on_supply = Some(Budget {
                    amount,
                    period,
                    extra: 0,
                });
            }
            "best" => {
                if r.chance(30) {
                    keys.push(("quantum", dq(r.range(5 * MS, 150 * MS))));
                }
                if r.chance(30) {
                    let t = if r.chance(50) {
                        0
                    } else {
                        r.range(100, 5 * MS)
                    };
                    keys.push(("tick", dq(t)));
                }
                if r.chance(30) {
                    keys.push(("max_period", dq(r.range(20 * MS, 2560 * MS))));
                }
                if r.chance(30) {
                    keys.push(("cpu_bound_offset", dq(r.range(MS, 200 * MS))));
                }
                if r.chance(30) {
                    keys.push(("confidence_threshold", r.range(0, 16).to_string()));
                }
                if r.chance(30) {
                    let w = r.pick(&["\"1/3\"", "\"1/2\"", "0.25", "2", "0"]);
                    keys.push(("period_weight", w.to_string()));
                }
                if r.chance(30) {
                    keys.push(("confidence_period", q(r.pick(&["updated", "previous"]))));
                }
                if r.chance(30) {
                    keys.push(("no_preempt_window", dq(r.range(0, 20 * MS))));
                }
                if r.chance(30) {
                    keys.push(("best_effort_deadline", q(r.pick(&["period", "max-period"]))));
                }
                if r.chance(30) {
                    keys.push(("initial_period", dq(r.range(0, 50 * MS))));
                }
            }
            "best-rate" => {
                if r.chance(30) {
                    let w = r.pick(&["\"1/3\"", "\"2/3\"", "0.5", "1"]);
                    keys.push(("usage_weight", w.to_string()));
                }
                if r.chance(30) {
                    keys.push(("quantum", dq(r.range(5 * MS, 150 * MS))));
                }
                if r.chance(30) {
                    keys.push(("no_preempt_window", dq(r.range(0, 20 * MS))));
                }
                if r.chance(30) {
                    keys.push(("initial_usage", dq(r.range(0, 20 * MS))));
                }
                if r.chance(30) {
                    keys.push(("load", q(r.pick(&["all", "runnable"]))));
                }
            }
            "linux24" => {
                if r.chance(30) {
                    keys.push(("quantum", dq(r.range(5 * MS, 200 * MS))));
                }
                if r.chance(30) {
                    keys.push(("hz", r.range(100, 1000).to_string()));
                }
                if r.chance(30) {
                    keys.push(("proc_change_penalty", r.range(0, 30).to_string()));
                }
                if r.chance(30) {
                    keys.push(("accounting", q(r.pick(&["exact", "tick"]))));
                }
            }
            "coop" => {
                let period = r.range(2 * MS, 40 * MS);
                if r.chance(40) {
                    keys.push(("period", dq(period)));
                }
                if r.chance(40) {
                    let most = if keys.is_empty() { 20 * MS } else { period };
                    keys.push(("min_slice", dq(r.range(20, most.min(2 * MS)))));
                }
                if r.chance(40) {
                    keys.push(("grace", dq(r.range(100, 3 * MS))));
                }
            }
            "realrate" => {
                inst.cap = 0.9;
                inst.floor = 0.01;
                if r.chance(40) {
                    inst.cap = float(r, 0.5, 0.95);
                    keys.push(("overload", format!("{:.3}", inst.cap)));
                }
                if r.chance(30) {
                    inst.floor = float(r, 0.005, 0.05);
                    keys.push(("floor", format!("{:.3}", inst.floor)));
                }
                if r.chance(30) {
                    keys.push(("control_period", dq(r.range(2 * MS, 30 * MS))));
                }
                if r.chance(30) {
                    keys.push(("default_period", dq(r.range(5 * MS, 60 * MS))));
                }
                for (key, lo, hi) in [
                    ("kp", 0.0, 10.0),
                    ("ki", 0.0, 2.0),
                    ("kd", 0.0, 2.0),
                    ("filter", 0.1, 1.0),
                    ("generous", 0.1, 0.9),
                    ("shrink", 0.05, 0.5),
                    ("misc_pressure", 0.0, 0.3),
                    ("initial", 0.01, 0.2),
                    ("integral_limit", 0.0, 2.0),
                    ("qex_level", 0.1, 1.0),
                ] {
                    if r.chance(15) {
                        keys.push((key, format!("{:.3}", float(r, lo, hi))));
                    }
                }
            }
            other => panic!("no instance parameters for policy `{other}`"),
        }
        inst.keys = keys;
        inst
    }

    /// Parent-side parameters for `copies` new children of instance `i`
    /// (the body of a `{ ... }` table), or `None` when the instance has no
    /// room left for them.
    fn child_params(&mut self, i: usize, copies: u64) -> Option<String> {
        self.granted = None;
        let r = &mut self.rng;
        let inst = &mut self.insts[i];
        if inst.destroyed || (inst.feedback && self.now > 0) {
            return None;
        }
        // Admission: what `copies` children of utilization `u` need.
        let room = |inst: &Inst, u: f64| inst.load + copies as f64 * u <= inst.cap - 0.01;
        Some(match inst.policy.name {
            "fp" if inst.unique => {
                if copies > 1 {
                    return None;
                }
                inst.next_priority += 1;
                format!("priority = {}", inst.next_priority)
            }
            "fp" => match r.chance(80) {
                true => format!("priority = {}", r.range(0, 20)),
                false => String::new(),
            },
            "ts" => match r.chance(80) {
                true => format!("priority = {}", r.range(1, 31)),
                false => String::new(),
            },
            "rez" => {
                let period = r.range(2 * MS, 100 * MS);
                let amount = (float(r, 0.01, 0.3) * period as f64).max(1.0) as u64;
                let u = amount as f64 / period as f64;
                if !room(inst, u) {
                    return None;
                }
                inst.load += copies as f64 * u;
                if !inst.feedback {
                    self.granted = Some(Budget {
                        amount,
                        period,
                        extra: if inst.catch_up { 1 } else { 0 },
                    });
                }
                format!("amount = \"{}\", period = \"{}\"", d(amount), d(period))
            }
            "dl" => {
                // Servers get no budget check: a wake-up with a fresh
                // deadline and a tick's overrun both give more than
                // `amount` in some window of `period`.
                let period = r.range(2 * MS, 100 * MS);
                let amount = (float(r, 0.01, 0.3) * period as f64).max(1.0) as u64;
                let u = amount as f64 / period as f64;
                let u = if self.instance_child {
                    u * inst.vps as f64
                } else {
                    u
                };
                if !room(inst, u) {
                    return None;
                }
                inst.load += copies as f64 * u;
                format!("amount = \"{}\", period = \"{}\"", d(amount), d(period))
            }
            "ps" => {
                let mut p = Vec::new();
                if r.chance(80) {
                    p.push(match r.chance(70) {
                        true => format!("share = {}", r.range(1, 8)),
                        false => format!("share = {:.3}", float(r, 0.01, 4.0).max(0.001)),
                    });
                }
                if r.chance(30) {
                    p.push(format!("warp = \"{}\"", d(r.range(0, 10 * MS))));
                }
                p.join(", ")
            }
            "join" | "limit" => {
                if inst.taken || copies > 1 {
                    return None;
                }
                inst.taken = true;
                String::new()
            }
            "best" | "best-rate" | "linux24" => match r.chance(70) {
                true => format!("nice = {}", r.range(0, 39) as i64 - 20),
                false => String::new(),
            },
            "coop" => match r.chance(70) {
                true => format!("domain = {}", r.range(0, 2)),
                false => String::new(),
            },
            "realrate" => {
                let mut p = Vec::new();
                let cost = match r.range(0, 4) {
                    0 => {
                        let x = float(r, 0.01, 0.3);
                        if self.changing || r.chance(50) {
                            p.push("class = \"real-time\"".to_string());
                        }
                        p.push(format!("proportion = {x:.3}"));
                        p.push(format!("period = \"{}\"", d(r.range(2 * MS, 50 * MS))));
                        x
                    }
                    1 => {
                        let x = float(r, 0.01, 0.3);
                        if self.changing || r.chance(50) {
                            p.push("class = \"aperiodic\"".to_string());
                        }
                        p.push(format!("proportion = {x:.3}"));
                        x
                    }
                    2 => {
                        p.push("class = \"real-rate\"".to_string());
                        if r.chance(50) {
                            p.push(format!("period = \"{}\"", d(r.range(2 * MS, 50 * MS))));
                        }
                        inst.floor
                    }
                    _ => {
                        if self.changing || r.chance(50) {
                            p.push("class = \"misc\"".to_string());
                        }
                        inst.floor
                    }
                };
                if r.chance(30) {
                    p.push(format!("importance = {:.3}", float(r, 0.1, 4.0)));
                }
                if !room(inst, cost) {
                    return None;
                }
                inst.load += copies as f64 * cost;
                p.join(", ")
            }
            other => panic!("no child parameters for policy `{other}`"),
        })
    }

    /// Some instance that takes `copies` new children, with their
    /// parameters; instances in `avoid` are not tried.
    fn place(&mut self, copies: u64, avoid: &[usize]) -> Option<(usize, String)> {
        let mut order: Vec<usize> = (0..self.insts.len())
            .filter(|i| !avoid.contains(i))
            .collect();
        self.rng.shuffle(&mut order);
        for i in order.into_iter().take(6) {
            if let Some(p) = self.child_params(i, copies) {
                return Some((i, p));
            }
        }
        None
    }

    /// A new instance under live parents, or `None` when none has room.
    fn new_instance(&mut self, name: String) -> Option<Inst> {
        let policy = self.rng.pick(registry());
        let mut inst = self.instance(name, policy);
        let want = self
            .rng
            .range(policy.min_parents as u64, policy.max_parents.min(3) as u64)
            as usize;
        while inst.parents.len() < want {
            let avoid: Vec<usize> = inst.parents.iter().map(|p| p.0).collect();
            self.instance_child = true;
            let link = self.place(1, &avoid);
            self.instance_child = false;
            let Some(link) = link else {
                break;
            };
            if policy.max_parents == 1 && self.granted.is_some() {
                inst.cap_on_supply = self.granted;
            }
            inst.parents.push(link);
        }
        (inst.parents.len() >= policy.min_parents.max(1)).then_some(inst)
    }

    fn scheduler_text(&self, inst: &Inst, inline: bool) -> String {
        let mut kv: Vec<(String, String)> = vec![
            ("name".into(), format!("\"{}\"", inst.name)),
            ("policy".into(), format!("\"{}\"", inst.policy.name)),
        ];
        match &inst.parents[..] {
            [] if !inst.cpus.is_empty() => {
                let cpus: Vec<String> = inst.cpus.iter().map(usize::to_string).collect();
                kv.push(("cpus".into(), format!("[{}]", cpus.join(", "))));
            }
            [] => {}
            [(p, params)] if inst.policy.max_parents == 1 => {
                kv.push(("parent".into(), format!("\"{}\"", self.insts[*p].name)));
                kv.push(("params".into(), table(params)));
            }
            links => {
                let tables: Vec<String> = links
                    .iter()
                    .map(|(p, params)| {
                        let name = format!("name = \"{}\"", self.insts[*p].name);
                        match params.is_empty() {
                            true => format!("{{ {name} }}"),
                            false => format!("{{ {name}, {params} }}"),
                        }
                    })
                    .collect();
                kv.push(("parents".into(), format!("[{}]", tables.join(", "))));
            }
        }
        for (k, v) in &inst.keys {
            kv.push((k.to_string(), v.clone()));
        }
        let pairs: Vec<String> = kv.iter().map(|(k, v)| format!("{k} = {v}")).collect();
        if inline {
            format!("{{ {} }}", pairs.join(", "))
        } else {
            format!("[[scheduler]]\n{}\n", pairs.join("\n"))
        }
    }

    fn workload(&mut self) -> (String, bool) {
        let r = &mut self.rng;
        let mut kinds = vec![
            ("cpu-bound", 12),
            ("periodic", 20),
            ("sporadic", 10),
            ("interactive", 10),
            ("io", 10),
            ("video", 8),
            ("frame-renderer", 5),
            ("program", 10),
            ("player", 6),
        ];
        if !self.queues.is_empty() {
            kinds.push(("stage", 15));
        }
        let total: u64 = kinds.iter().map(|k| k.1).sum();
        let mut x = r.range(0, total - 1);
        let kind = kinds
            .iter()
            .find(|k| {
                let hit = x < k.1;
                x = x.saturating_sub(k.1);
                hit
            })
            .unwrap()
            .0;
        let mut kv = vec![format!("kind = \"{kind}\"")];
        let mut put = |k: &str, v: String| kv.push(format!("{k} = {v}"));
        let mut finite = false;
        match kind {
            "cpu-bound" => {}
            "periodic" => {
                let period = r.range(MS, 100 * MS);
                put("period", dq(period));
                let exec = r.range(period / 100, period * 7 / 10).max(1);
                put("exec", dq(exec));
                if r.chance(30) {
                    put("deadline", dq(r.range(exec, 2 * period)));
                }
                if r.chance(30) {
                    put("jitter", dq(r.range(0, period / 2)));
                }
                if r.chance(30) {
                    put("offset", dq(r.range(0, period)));
                }
            }
            "sporadic" => {
                let min = r.range(2 * MS, 50 * MS);
                put("min_interarrival", dq(min));
                if r.chance(70) {
                    put("max_interarrival", dq(min + r.range(0, 50 * MS)));
                }
                let exec = r.range(min / 100, min / 2).max(1);
                put("exec", dq(exec));
                if r.chance(40) {
                    put("deadline", dq(r.range(exec, 2 * min)));
                }
            }
            "interactive" => {
                put("think", dq(r.range(MS, 100 * MS)));
                put("burst", dq(r.range(100, 10 * MS)));
            }
            "io" => {
                let compute = if r.chance(10) { 0 } else { r.range(50, 5 * MS) };
                put("compute", dq(compute));
                put("io", dq(r.range(100, 20 * MS)));
            }
            "video" => {
                let period = r.range(10 * MS, 50 * MS);
                if r.chance(50) {
                    put("period", dq(period));
                } else {
                    put("fps", format!("{}", 1_000_000 / period));
                }
                if r.chance(50) {
                    let exec = r.range(period / 5, period * 9 / 10);
                    put("exec", dq(exec));
                } else {
                    let b = r.range(period / 10, period / 3);
                    let p = b + r.range(0, period / 3);
                    let i = p + r.range(0, period / 2);
                    put("i", dq(i));
                    put("p", dq(p));
                    put("b", dq(b));
                    if r.chance(60) {
                        let gop = r.pick(&["IBBPBBPBBPBB", "IPPP", "IBBPBB", "I", "IB"]);
                        put("gop", format!("\"{gop}\""));
                    }
                }
                if r.chance(60) {
                    put("on_miss", format!("\"{}\"", r.pick(&["continue", "skip"])));
                }
            }
            "frame-renderer" => {
                if r.chance(60) {
                    put("work", dq(r.range(MS, 20 * MS)));
                }
                if r.chance(60) {
                    put("miss_gap", dq(r.range(5 * MS, 50 * MS)));
                }
            }
            "program" => {
                let mut steps = Vec::new();
                let mut timer = false;
                for _ in 0..r.range(1, 4) {
                    steps.push(match r.range(0, 3) {
                        0 => format!("{{ run = \"{}\" }}", d(r.range(10, 10 * MS))),
                        1 => format!("{{ runtime = \"{}\" }}", d(r.range(10, 10 * MS))),
                        2 => format!("{{ sleep = \"{}\" }}", d(r.range(10, 20 * MS))),
                        _ if timer => format!("{{ run = \"{}\" }}", d(r.range(10, 5 * MS))),
                        _ => {
                            timer = true;
                            let abs = if r.chance(50) {
                                ", absolute = true"
                            } else {
                                ""
                            };
                            format!("{{ timer = \"{}\"{abs} }}", d(r.range(MS, 50 * MS)))
                        }
                    });
                }
                // A step that takes time, whatever the others are.
                steps.push(format!("{{ run = \"{}\" }}", d(r.range(10, 2 * MS))));
                r.shuffle(&mut steps);
                put("steps", format!("[{}]", steps.join(", ")));
                if r.chance(30) {
                    put("loops", r.range(1, 50).to_string());
                    finite = true;
                }
                if r.chance(30) {
                    put("delay", dq(r.range(0, 20 * MS)));
                }
            }
            "stage" => {
                let n = self.queues.len();
                let a = r.range(0, n as u64 - 1) as usize;
                let role = if n > 1 { r.range(0, 2) } else { r.range(0, 1) };
                let source = role == 0;
                match role {
                    0 => put("output", format!("\"{}\"", self.queues[a].0)),
                    1 => put("input", format!("\"{}\"", self.queues[a].0)),
                    _ => {
                        put("input", format!("\"{}\"", self.queues[a].0));
                        put("output", format!("\"{}\"", self.queues[(a + 1) % n].0));
                    }
                }
                put("cost", dq(r.range(50, 3 * MS)));
                if source && r.chance(40) {
                    put("rate", r.range(20, 2000).to_string());
                }
                if source && r.chance(30) {
                    let mut pulses = Vec::new();
                    for _ in 0..r.range(1, 3) {
                        pulses.push(format!(
                            "{{ start = \"{}\", length = \"{}\", factor = {:.3} }}",
                            d(r.range(0, self.dur)),
                            d(r.range(MS, self.dur)),
                            float(r, 0.1, 4.0).max(0.001)
                        ));
                    }
                    put("pulses", format!("[{}]", pulses.join(", ")));
                }
                if r.chance(60) {
                    let every = if r.chance(15) {
                        0
                    } else {
                        r.range(2 * MS, 30 * MS)
                    };
                    put("report", dq(every));
                }
            }
            "player" => {
                if r.chance(60) {
                    put("fps", r.range(10, 60).to_string());
                }
                if r.chance(50) {
                    put("decode", dq(r.range(500, 10 * MS)));
                }
                if r.chance(30) {
                    put("spread", format!("{:.3}", float(r, 0.0, 0.6)));
                }
                if r.chance(30) {
                    put("event", dq(r.range(100, 3 * MS)));
                }
                if r.chance(30) {
                    put("display", dq(r.range(10, 200)));
                }
                if r.chance(30) {
                    put("window", r.range(1, 6).to_string());
                }
                if r.chance(40) {
                    put("cooperative", r.chance(60).to_string());
                }
            }
            other => unreachable!("{other}"),
        }
        (format!("{{ {} }}", kv.join(", ")), finite)
    }
}

/// The `key = value` pairs of a parameter table's body.
fn pairs(body: &str) -> Vec<(&str, &str)> {
    body.split(", ")
        .filter_map(|kv| kv.split_once(" = "))
        .collect()
}

/// A thread's parameters after a `set-params` of `change` under `policy`,
/// as the policies merge them: the keys of `change` replace the old ones,
/// and realrate drops the proportion of a child changing to an adaptive
/// class.
fn merged(policy: &PolicyInfo, old: &str, change: &str) -> String {
    let new = pairs(change);
    let adaptive = policy.name == "realrate"
        && new
            .iter()
            .any(|&(k, v)| k == "class" && (v == "\"real-rate\"" || v == "\"misc\""));
    let mut out: Vec<(&str, &str)> = pairs(old)
        .into_iter()
        .filter(|&(k, _)| !(adaptive && k == "proportion") && new.iter().all(|&(n, _)| n != k))
        .collect();
    out.extend(new);
    let out: Vec<String> = out.iter().map(|(k, v)| format!("{k} = {v}")).collect();
    out.join(", ")
}

/// Whether a child of `policy` may have the parameters `body`: keys it
/// takes, with values it accepts.
fn suits(policy: &PolicyInfo, body: &str) -> bool {
    let mut params = Params::new();
    for (k, v) in pairs(body) {
        if policy.child_params.iter().all(|s| s.key != k) {
            return false;
        }
        let value = match (v.strip_prefix('"'), v.parse::<i64>()) {
            (Some(s), _) => ParamValue::Str(s.trim_end_matches('"').to_string()),
            (None, Ok(n)) => ParamValue::Int(n),
            (None, Err(_)) => ParamValue::Float(v.parse().expect("a number")),
        };
        params.insert(k, value);
    }
    (policy.check_child)(&params).is_ok()
}

/// Threads that exist at `t` and that operations may name: started (a
/// thread starting at `t` is created before the operations of that
/// instant), not exited (one exiting at `t` exits after them).
fn alive(g: &Gen, t: u64) -> Vec<usize> {
    (0..g.threads.len())
        .filter(|&k| {
            let th = &g.threads[k];
            th.at.is_some() && th.start <= t && th.exit.is_none_or(|e| t <= e)
        })
        .collect()
}

/// Brings the timeline to `t`: threads that start by then join the
/// scheduler they name or the default in force.
fn start_threads(g: &mut Gen, t: u64) {
    for th in g.threads.iter_mut() {
        if th.at.is_none() && th.start <= t {
            th.at = Some(th.named.or(g.default).expect("a default"));
        }
    }
}

/// One `[[at]]` operation at `t`, if some kind finds something to do.
fn operation(g: &mut Gen, t: u64, created: &mut usize) {
    start_threads(g, t);
    g.now = t;
    let mut kinds = [0, 0, 0, 1, 1, 1, 2, 2, 3, 3, 4, 4, 5, 6];
    g.rng.shuffle(&mut kinds);
    let live = alive(g, t);
    let movable: Vec<usize> = live
        .iter()
        .copied()
        .filter(|&k| !g.threads[k].finite)
        .collect();
    let mut text = None;
    for kind in kinds {
        let pick = |g: &mut Gen, from: &[usize]| (!from.is_empty()).then(|| *g.rng.pick(from));
        text = match kind {
            // set-params where the thread is.
            0 => pick(g, &movable).and_then(|k| {
                let at = g.threads[k].at.unwrap();
                if g.insts[at].policy.name == "limit" {
                    // A new cap for the instance: its supply is no longer
                    // one cap's.
                    let period = g.rng.range(MS, 50 * MS);
                    let amount = g.rng.range(period / 20, period).max(1);
                    g.insts[at].cap_on_supply = None;
                    return Some(format!(
                        "op = \"set-params\"\nthread = \"{}\"\nparams = {{ amount = {}, period = {} }}",
                        g.threads[k].name,
                        dq(amount),
                        dq(period)
                    ));
                }
                if g.insts[at].policy.child_params.is_empty() {
                    return None;
                }
                g.changing = true;
                let p = g.child_params(at, 1);
                g.changing = false;
                let p = p?;
                let th = &mut g.threads[k];
                th.params = merged(g.insts[at].policy, &th.params, &p);
                th.reservation = None;
                Some(format!(
                    "op = \"set-params\"\nthread = \"{}\"\nparams = {}",
                    g.threads[k].name,
                    table(&p)
                ))
            }),
            // move-thread elsewhere.
            1 => pick(g, &movable).and_then(|k| {
                let at = g.threads[k].at.unwrap();
                let (to, p) = g.place(1, &[at])?;
                g.relocate(k, to, p.clone());
                Some(format!(
                    "op = \"move-thread\"\nthread = \"{}\"\nto = \"{}\"\nparams = {}",
                    g.threads[k].name,
                    g.insts[to].name,
                    table(&p)
                ))
            }),
            // begin-reservation under a `rez`.
            2 => pick(g, &movable).and_then(|k| {
                let at = g.threads[k].at.unwrap();
                let rez: Vec<usize> = (0..g.insts.len())
                    .filter(|&i| i != at && g.insts[i].policy.name == "rez")
                    .collect();
                let to = pick(g, &rez)?;
                let p = g.child_params(to, 1)?;
                let th = &mut g.threads[k];
                if th.before.is_none() {
                    th.before = Some((at, th.params.clone()));
                }
                g.relocate(k, to, p.clone());
                Some(format!(
                    "op = \"begin-reservation\"\nthread = \"{}\"\nscheduler = \"{}\"\nparams = {}",
                    g.threads[k].name,
                    g.insts[to].name,
                    table(&p)
                ))
            }),
            // end-reservation: back where it began.
            3 => {
                let reserved: Vec<usize> = movable
                    .iter()
                    .copied()
                    .filter(|&k| {
                        // Going back registers again: not with Rez-FB.
                        g.threads[k]
                            .before
                            .as_ref()
                            .is_some_and(|b| !g.insts[b.0].feedback)
                    })
                    .collect();
                pick(g, &reserved).map(|k| {
                    let (back, p) = g.threads[k].before.take().unwrap();
                    g.relocate(k, back, p);
                    format!(
                        "op = \"end-reservation\"\nthread = \"{}\"",
                        g.threads[k].name
                    )
                })
            }
            // create-scheduler.
            4 if *created < 4 => {
                let name = format!("new{created}");
                g.new_instance(name).map(|inst| {
                    let text = format!(
                        "op = \"create-scheduler\"\nscheduler = {}",
                        g.scheduler_text(&inst, true)
                    );
                    g.insts.push(inst);
                    *created += 1;
                    text
                })
            }
            // destroy-scheduler: an instance nothing is under, will start
            // under, or will return to.
            5 => {
                let empty: Vec<usize> = (0..g.insts.len())
                    .filter(|&i| {
                        let th = &g.threads;
                        !g.insts[i].destroyed
                            && g.default != Some(i)
                            && !live.iter().any(|&k| {
                                th[k].at == Some(i)
                                    || th[k].before.as_ref().is_some_and(|b| b.0 == i)
                            })
                            && !th.iter().any(|x| x.start > t && x.named == Some(i))
                            && !g
                                .insts
                                .iter()
                                .any(|c| !c.destroyed && c.parents.iter().any(|p| p.0 == i))
                    })
                    .collect();
                pick(g, &empty).map(|i| {
                    g.insts[i].destroyed = true;
                    format!("op = \"destroy-scheduler\"\nname = \"{}\"", g.insts[i].name)
                })
            }
            // set-default: the old default's threads move along only when
            // the parameters they have now suit the new one.
            6 => g.default.and_then(|old| {
                let other: Vec<usize> = (0..g.insts.len())
                    .filter(|&i| {
                        let s = &g.insts[i];
                        i != old
                            && !s.destroyed
                            && !s.unique
                            && DEFAULT_CAPABLE.contains(&s.policy.name)
                    })
                    .collect();
                let new = pick(g, &other)?;
                let to = g.insts[new].policy;
                let fit = live
                    .iter()
                    .filter(|&&k| g.threads[k].at == Some(old))
                    .all(|&k| suits(to, &g.threads[k].params));
                let carry = fit && g.rng.chance(60);
                if carry {
                    for &k in &live {
                        if g.threads[k].at == Some(old) {
                            let p = g.threads[k].params.clone();
                            g.relocate(k, new, p);
                        }
                    }
                }
                g.default = Some(new);
                Some(format!(
                    "op = \"set-default\"\nname = \"{}\"\nmove_threads = {carry}",
                    g.insts[new].name
                ))
            }),
            _ => None,
        };
        if text.is_some() {
            break;
        }
    }
    if let Some(text) = text {
        let _ = write!(g.ops_text, "\n[[at]]\ntime = \"{}\"\n{text}\n", d(t));
    }
}

/// What the generator knows the run must show, besides the file.
struct Expect {
    seed: u64,
    duration_ns: u64,
    cpus: usize,
    context_switch_ns: u64,
    stolen_cpus: Vec<usize>,
    /// Scheduler names in creation order, with whether they end destroyed.
    schedulers: Vec<(String, bool)>,
    /// Per thread, in file order.
    threads: Vec<ThreadExpect>,
    /// Each instance's parents (by name).
    parents: BTreeMap<String, Vec<String>>,
    /// Longest wait for a scheduler timer (the tick), ns.
    tick_ns: u64,
    /// Hard caps: a thread's received time (`true`) or an instance's
    /// supply, by name, from a creation time (µs).
    caps: Vec<(bool, String, Budget, u64)>,
    /// Roots and the processors they own.
    roots: Vec<(String, Vec<usize>)>,
    /// Instances that pass on exactly what they receive to children whose
    /// share is known: no thread moved in or out, no Join below.
    settled: Vec<String>,
    queues: Vec<(String, u64, u64)>,
}

struct ThreadExpect {
    name: String,
    start_ns: u64,
    exit_ns: Option<u64>,
    /// May exit before `exit_ns` (a program with `loops`).
    finite: bool,
    /// Where the operations leave it (`None`: it never starts).
    scheduler: Option<String>,
    /// The one scheduler it ever had, when no operation moved it.
    stayed_under: Option<String>,
    principal: Option<String>,
}

/// A random valid hierarchy file for `seed`, and what its run must show.
fn generate(seed: u64) -> (String, Expect) {
    let mut g = Gen {
        rng: Rng(seed ^ 0x005E_ED0F_F11E),
        cpus: 0,
        dur: 0,
        context_switch: 0,
        stolen_cpus: Vec::new(),
        insts: Vec::new(),
        threads: Vec::new(),
        now: 0,
        granted: None,
        changing: false,
        instance_child: false,
        default: None,
        principals: 0,
        queues: Vec::new(),
        thread_text: String::new(),
        ops_text: String::new(),
    };
    let r = &mut g.rng;
    g.cpus = r.range(1, 4) as usize;
    g.dur = r.range(300, 1000) * MS;
    let mut machine = format!("[machine]\ncpus = {}\n", g.cpus);
    if r.chance(50) {
        g.context_switch = r.range(1, 50);
        let _ = writeln!(machine, "context_switch = \"{}\"", d(g.context_switch));
    }
    let mut tick_ns = 0;
    if r.chance(40) {
        let hz = *r.pick(&[100, 250, 300, 800, 1000]);
        let hz = if r.chance(30) { r.range(100, 1000) } else { hz };
        let _ = writeln!(machine, "timer = \"{hz}hz\"");
        tick_ns = 1_000_000_000u64.div_ceil(hz);
    }
    for _ in 0..if r.chance(40) { r.range(1, 3) } else { 0 } {
        let cpu = r.range(0, g.cpus as u64 - 1) as usize;
        g.stolen_cpus.push(cpu);
        let _ = write!(machine, "\n[[machine.stolen]]\ncpu = {cpu}\n");
        let start = if r.chance(40) { r.range(0, g.dur) } else { 0 };
        match r.range(0, 2) {
            0 => {
                let every = r.range(MS, 20 * MS);
                let amount = r.range(10, every * 3 / 10).max(1);
                let _ = writeln!(
                    machine,
                    "every = \"{}\"\namount = \"{}\"",
                    d(every),
                    d(amount)
                );
                if start > 0 {
                    let _ = writeln!(machine, "start = \"{}\"", d(start));
                }
            }
            1 => {
                let length = r.range(10 * MS, 300 * MS);
                let _ = writeln!(
                    machine,
                    "length = \"{}\"\nfraction = {:.3}",
                    d(length),
                    float(r, 0.05, 0.6).max(0.01)
                );
                if start > 0 {
                    let _ = writeln!(machine, "start = \"{}\"", d(start));
                }
                if r.chance(60) {
                    let slice = r.range(100, (5 * MS).min(length));
                    let _ = writeln!(machine, "slice = \"{}\"", d(slice));
                }
            }
            _ => {
                let mut at = 0;
                let mut pairs = Vec::new();
                for _ in 0..r.range(1, 4) {
                    at += r.range(0, g.dur / 4);
                    let len = r.range(10, 20 * MS);
                    pairs.push(format!("[\"{}\", \"{}\"]", d(at), d(len)));
                    at += len + 1;
                }
                let _ = writeln!(machine, "trace = [{}]", pairs.join(", "));
            }
        }
    }

    // Roots: one over every processor, or two sharing the machine in space.
    let split = if g.cpus > 1 && r.chance(30) {
        r.range(1, g.cpus as u64 - 1) as usize
    } else {
        g.cpus
    };
    let single: Vec<&'static PolicyInfo> =
        registry().iter().filter(|p| p.min_parents <= 1).collect();
    let mut sets = vec![(0..split).collect::<Vec<_>>()];
    if split < g.cpus {
        sets.push((split..g.cpus).collect());
    }
    let explicit = sets.len() > 1 || g.rng.chance(20);
    for (k, set) in sets.into_iter().enumerate() {
        let policy = *g.rng.pick(&single);
        let mut inst = g.instance(format!("root{k}"), policy);
        if explicit {
            inst.cpus = set;
        }
        g.insts.push(inst);
    }
    let more = g.rng.range(0, 8 - g.insts.len() as u64);
    for k in 0..more {
        if let Some(inst) = g.new_instance(format!("s{k}")) {
            g.insts.push(inst);
        }
    }
    let capable: Vec<usize> = (0..g.insts.len())
        .filter(|&i| !g.insts[i].unique && DEFAULT_CAPABLE.contains(&g.insts[i].policy.name))
        .collect();
    if !capable.is_empty() && g.rng.chance(50) {
        g.default = Some(*g.rng.pick(&capable));
    }
    // The one in force before any `set-default`: what the file declares.
    let first_default = g.default;

    if g.rng.chance(25) {
        for k in 0..g.rng.range(1, 2) {
            let size = g.rng.range(1, 64);
            let initial = g.rng.range(0, size);
            g.queues.push((format!("q{k}"), size, initial));
        }
    }
    g.principals = g.rng.range(0, 2) as usize;

    let target = g.rng.range(1, 20) as usize;
    let mut block = 0;
    while g.threads.len() < target {
        let copies = if g.rng.chance(20) {
            g.rng.range(2, 3)
        } else {
            1
        };
        let copies = copies.min((target - g.threads.len()) as u64);
        let r = &mut g.rng;
        let start = if r.chance(20) { r.range(0, g.dur) } else { 0 };
        let exit = r.chance(15).then(|| start + r.range(MS, g.dur));
        g.now = start;
        let (named, params, reservation) = if g.default.is_some() && g.rng.chance(25) {
            (None, String::new(), None)
        } else {
            match g.place(copies, &[]) {
                Some((i, p)) => (Some(i), p, g.granted),
                None => break,
            }
        };
        let (workload, finite) = g.workload();
        let r = &mut g.rng;
        let principal = (g.principals > 0 && r.chance(50))
            .then(|| r.range(0, g.principals as u64 - 1) as usize);
        let name = format!("t{block}");
        block += 1;
        let t = &mut g.thread_text;
        let _ = write!(t, "\n[[thread]]\nname = \"{name}\"\n");
        if copies > 1 {
            let _ = writeln!(t, "count = {copies}");
        }
        if let Some(i) = named {
            let _ = writeln!(t, "scheduler = \"{}\"", g.insts[i].name);
        }
        if !params.is_empty() {
            let _ = writeln!(t, "params = {}", table(&params));
        }
        if let Some(p) = principal {
            let _ = writeln!(t, "principal = \"p{p}\"");
        }
        if start > 0 {
            let _ = writeln!(t, "start = \"{}\"", d(start));
        }
        if let Some(e) = exit {
            let _ = writeln!(t, "exit = \"{}\"", d(e));
        }
        let _ = writeln!(t, "workload = {workload}");
        for c in 0..copies {
            g.threads.push(Th {
                name: match copies {
                    1 => name.clone(),
                    _ => format!("{name}.{c}"),
                },
                start,
                exit,
                named,
                finite,
                at: None,
                params: params.clone(),
                before: None,
                moved: false,
                reservation,
                principal,
            });
        }
    }

    let declared = g.insts.len();
    if !g.threads.is_empty() && g.rng.chance(50) {
        let n = g.rng.range(1, 8);
        let mut times: Vec<u64> = (0..n)
            .map(|_| {
                // Now and then at a thread's start or exit, where the order
                // of one instant matters.
                let k = g.rng.range(0, g.threads.len() as u64 - 1) as usize;
                match g.rng.range(0, 5) {
                    0 if g.threads[k].start > 0 => g.threads[k].start,
                    1 if g.threads[k].exit.is_some_and(|e| e < g.dur) => g.threads[k].exit.unwrap(),
                    _ => g.rng.range(MS, g.dur - 1),
                }
            })
            .collect();
        times.sort_unstable();
        let mut created = 0;
        for t in times {
            operation(&mut g, t, &mut created);
        }
    }
    let last = g.dur - 1;
    start_threads(&mut g, last);

    let mut text = format!("# random hierarchy, seed {seed}\n");
    if let Some(i) = first_default {
        let _ = writeln!(text, "default = \"{}\"", g.insts[i].name);
    }
    let _ = writeln!(text, "\n[sim]\nduration = \"{}\"\nseed = {seed}", d(g.dur));
    let _ = write!(text, "\n{machine}");
    for p in 0..g.principals {
        let _ = write!(text, "\n[[principal]]\nname = \"p{p}\"\n");
    }
    for (name, size, initial) in &g.queues {
        let _ = write!(
            text,
            "\n[[queue]]\nname = \"{name}\"\nsize = {size}\ninitial = {initial}\n"
        );
    }
    for inst in &g.insts[..declared] {
        let _ = write!(text, "\n{}", g.scheduler_text(inst, false));
    }
    text.push_str(&g.thread_text);
    text.push_str(&g.ops_text);

    let us_ns = |us: u64| us * 1000;
    let expect = Expect {
        seed,
        duration_ns: us_ns(g.dur),
        cpus: g.cpus,
        context_switch_ns: us_ns(g.context_switch),
        stolen_cpus: g.stolen_cpus.clone(),
        schedulers: g
            .insts
            .iter()
            .map(|s| (s.name.clone(), s.destroyed))
            .collect(),
        threads: g
            .threads
            .iter()
            .map(|th| {
                let at = th.at.map(|i| g.insts[i].name.clone());
                ThreadExpect {
                    name: th.name.clone(),
                    start_ns: us_ns(th.start),
                    exit_ns: th.exit.map(us_ns),
                    finite: th.finite,
                    stayed_under: at.clone().filter(|_| !th.moved),
                    scheduler: at,
                    principal: th.principal.map(|p| format!("p{p}")),
                }
            })
            .collect(),
        parents: g
            .insts
            .iter()
            .map(|s| {
                let ps = s.parents.iter().map(|p| g.insts[p.0].name.clone());
                (s.name.clone(), ps.collect())
            })
            .collect(),
        queues: g.queues.clone(),
        tick_ns,
        caps: g
            .threads
            .iter()
            .filter_map(|th| Some((true, th.name.clone(), th.reservation?, th.start)))
            .chain(
                g.insts
                    .iter()
                    .filter_map(|s| Some((false, s.name.clone(), s.cap_on_supply?, s.born))),
            )
            .collect(),
        roots: g
            .insts
            .iter()
            .filter(|s| s.parents.is_empty() && !s.destroyed)
            .map(|s| {
                let all = (0..g.cpus).collect();
                (
                    s.name.clone(),
                    if s.cpus.is_empty() {
                        all
                    } else {
                        s.cpus.clone()
                    },
                )
            })
            .collect(),
        settled: (0..g.insts.len())
            .filter(|&i| {
                !g.insts[i].churn
                    && !g
                        .insts
                        .iter()
                        .any(|c| c.parents.len() > 1 && c.parents.iter().any(|p| p.0 == i))
            })
            .map(|i| g.insts[i].name.clone())
            .collect(),
    };
    (text, expect)
}

macro_rules! ensure {
    ($cond:expr, $($msg:tt)+) => {
        if !$cond {
            return Err(format!($($msg)+));
        }
    };
}

/// `part / whole` as the report computes shares, to float precision.
fn share_ok(share: f64, part: u64, whole: u64) -> bool {
    (share - part as f64 / whole as f64).abs() <= 1e-12 && (0.0..=1.0).contains(&share)
}

/// The identities of docs/metrics.md, and what the generator's timeline
/// says about each thread and instance.
fn check(r: &Report, e: &Expect) -> Result<(), String> {
    let (dur, cpus) = (e.duration_ns, e.cpus);
    let capacity = dur * cpus as u64;
    ensure!(
        (r.duration_ns, r.cpus, r.seed, r.interrupted) == (dur, cpus, e.seed, false),
        "report header: {} ns, {} cpus, seed {}",
        r.duration_ns,
        r.cpus,
        r.seed
    );
    ensure!(
        r.events == r.event_counts.total(),
        "events {} but the counts add up to {}",
        r.events,
        r.event_counts.total()
    );
    serde_json::from_str::<serde_json::Value>(&r.to_json())
        .map_err(|err| format!("the JSON report does not read back: {err}"))?;

    // Every processor accounts for all its time.
    let m = &r.machine;
    ensure!(
        m.per_cpu.len() == cpus,
        "{} processors reported",
        m.per_cpu.len()
    );
    let mut sum = [0u64; 5];
    for (k, c) in m.per_cpu.iter().enumerate() {
        ensure!(c.cpu == k, "processor {k} reported as {}", c.cpu);
        let total = c.busy_ns + c.idle_ns + c.stolen_ns + c.context_switch_ns;
        ensure!(
            total == dur,
            "cpu{k}: busy + idle + stolen + switching = {total}: {c:?}"
        );
        ensure!(
            c.stolen_ns == 0 || e.stolen_cpus.contains(&k),
            "cpu{k} has no stolen-time source but lost {} ns",
            c.stolen_ns
        );
        ensure!(
            c.context_switch_ns <= c.context_switches * e.context_switch_ns,
            "cpu{k}: {} ns switching in {} switches of {} ns",
            c.context_switch_ns,
            c.context_switches,
            e.context_switch_ns
        );
        for (s, x) in sum.iter_mut().zip([
            c.busy_ns,
            c.idle_ns,
            c.stolen_ns,
            c.context_switch_ns,
            c.context_switches,
        ]) {
            *s += x;
        }
    }
    ensure!(
        sum == [
            m.busy_ns,
            m.idle_ns,
            m.stolen_ns,
            m.context_switch_ns,
            m.context_switches
        ],
        "machine totals {m:?} are not the sums of the processors' {sum:?}"
    );

    // Threads.
    let names: Vec<&str> = r.threads.iter().map(|t| t.name.as_str()).collect();
    let want: Vec<&str> = e.threads.iter().map(|t| t.name.as_str()).collect();
    ensure!(names == want, "threads {names:?}, expected {want:?}");
    let total = |f: fn(&hsched_sim::ThreadReport) -> u64| r.threads.iter().map(f).sum::<u64>();
    ensure!(
        total(|t| t.cpu_ns) == m.busy_ns,
        "threads' cpu_ns add up to {}, the machine was busy {}",
        total(|t| t.cpu_ns),
        m.busy_ns
    );
    ensure!(
        total(|t| t.received_ns) == m.busy_ns + m.context_switch_ns,
        "threads received {} ns, the machine was busy {} and switching {}",
        total(|t| t.received_ns),
        m.busy_ns,
        m.context_switch_ns
    );
    ensure!(
        total(|t| t.stolen_ns) <= m.stolen_ns,
        "threads lost {} ns to stolen time, the machine {}",
        total(|t| t.stolen_ns),
        m.stolen_ns
    );
    ensure!(
        total(|t| t.context_switches) >= m.context_switches,
        "threads were dispatched {} times, the processors switched {} times",
        total(|t| t.context_switches),
        m.context_switches
    );
    ensure!(
        total(|t| t.messages_sent + t.messages_refused) == r.event_counts.thread_msg,
        "threads' messages (taken + refused) {} but {} thread_msg inputs",
        total(|t| t.messages_sent + t.messages_refused),
        r.event_counts.thread_msg
    );
    for (t, x) in r.threads.iter().zip(&e.threads) {
        let name = &t.name;
        let started = x.start_ns < dur;
        ensure!(
            t.created_ns == started.then_some(x.start_ns),
            "{name}: created at {:?}, starts at {}",
            t.created_ns,
            x.start_ns
        );
        let exit = x.exit_ns.filter(|&e| e < dur);
        match (x.finite, t.exited_ns) {
            (true, Some(at)) => ensure!(
                at <= exit.unwrap_or(dur) && Some(at) >= t.created_ns,
                "{name}: exited at {at}, declared exit {exit:?}"
            ),
            _ => ensure!(
                t.exited_ns == exit.filter(|_| started),
                "{name}: exited at {:?}, declared exit {exit:?}",
                t.exited_ns
            ),
        }
        let life = t.created_ns.map_or(0, |c| t.exited_ns.unwrap_or(dur) - c);
        ensure!(
            t.cpu_ns <= t.received_ns && t.received_ns + t.stolen_ns <= life,
            "{name}: cpu {} received {} stolen {} in a life of {life} ns",
            t.cpu_ns,
            t.received_ns,
            t.stolen_ns
        );
        ensure!(
            share_ok(t.share, t.cpu_ns, capacity),
            "{name}: share {} for {} ns",
            t.share,
            t.cpu_ns
        );
        // A dropped frame (video or player) is a missed deadline.
        ensure!(
            t.deadline_hits <= t.jobs && t.dropped <= t.deadline_misses,
            "{name}: {} jobs, {} hits, {} misses, {} dropped",
            t.jobs,
            t.deadline_hits,
            t.deadline_misses,
            t.dropped
        );
        ensure!(
            t.preemptions <= t.context_switches,
            "{name}: preempted {} times in {} dispatches",
            t.preemptions,
            t.context_switches
        );
        ensure!(
            t.max_runnable_gap_ns <= life,
            "{name}: runnable gap {} in a life of {life}",
            t.max_runnable_gap_ns
        );
        match &t.lateness_ns {
            Some(l) => {
                dist_ok(l).map_err(|m| format!("{name}: lateness {m}"))?;
                ensure!(
                    t.deadline_hits <= l.count && l.count <= t.jobs,
                    "{name}: {} lateness samples, {} hits, {} jobs",
                    l.count,
                    t.deadline_hits,
                    t.jobs
                );
                ensure!(
                    (l.max > 0 || t.deadline_hits == l.count)
                        && (l.min <= 0 || t.deadline_hits == 0),
                    "{name}: lateness {}..{} but {} hits of {}",
                    l.min,
                    l.max,
                    t.deadline_hits,
                    l.count
                );
                let tardy = l.max.max(0);
                ensure!(
                    t.max_lateness_ns == Some(l.max)
                        && t.max_tardiness_ns == Some(tardy as u64)
                        && t.mean_tardiness_ns
                            .is_some_and(|m| (0.0..=tardy as f64).contains(&m)),
                    "{name}: max lateness {:?}, max tardiness {:?}, mean tardiness {:?}, lateness max {}",
                    t.max_lateness_ns,
                    t.max_tardiness_ns,
                    t.mean_tardiness_ns,
                    l.max
                );
            }
            None => ensure!(
                t.max_lateness_ns.is_none()
                    && t.max_tardiness_ns.is_none()
                    && t.mean_tardiness_ns.is_none()
                    && t.deadline_hits == 0,
                "{name}: deadline figures without lateness samples"
            ),
        }
        if let Some(l) = &t.dispatch_latency_ns {
            dist_ok(l).map_err(|m| format!("{name}: dispatch latency {m}"))?;
            ensure!(
                l.min >= 0 && l.count <= t.wakeups && l.max as u64 <= t.max_runnable_gap_ns,
                "{name}: {} latencies up to {} for {} wake-ups, longest gap {}",
                l.count,
                l.max,
                t.wakeups,
                t.max_runnable_gap_ns
            );
        }
        if started && !x.finite {
            ensure!(
                x.scheduler.as_deref() == Some(t.scheduler.as_str()),
                "{name}: ends under `{}`, the operations put it under {:?}",
                t.scheduler,
                x.scheduler
            );
        }
        ensure!(
            t.principal == x.principal,
            "{name}: principal {:?}, expected {:?}",
            t.principal,
            x.principal
        );
    }

    // Instances, in creation order.
    let names: Vec<(&str, bool)> = r
        .schedulers
        .iter()
        .map(|s| (s.name.as_str(), !s.live))
        .collect();
    let want: Vec<(&str, bool)> = e.schedulers.iter().map(|(n, d)| (n.as_str(), *d)).collect();
    ensure!(
        names == want,
        "schedulers (name, destroyed) {names:?}, expected {want:?}"
    );
    let supply: BTreeMap<&str, u64> = r
        .schedulers
        .iter()
        .map(|s| (s.name.as_str(), s.supply_ns))
        .collect();
    for s in &r.schedulers {
        ensure!(
            s.supply_ns <= capacity && share_ok(s.share, s.supply_ns, capacity),
            "{}: supply {} share {} on a machine of {capacity} ns",
            s.name,
            s.supply_ns,
            s.share
        );
        // What an instance receives comes from its parents' supply, and
        // what it passes down (to child instances and to the threads that
        // never left it) adds up to no more than it received.
        let parents = &e.parents[&s.name];
        let from: u64 = parents.iter().map(|p| supply[p.as_str()]).sum();
        ensure!(
            parents.is_empty() || s.supply_ns <= from,
            "{}: supply {} but its parents {parents:?} received {from}",
            s.name,
            s.supply_ns
        );
        let kids: u64 = r
            .schedulers
            .iter()
            .filter(|c| e.parents[&c.name] == [s.name.clone()])
            .map(|c| c.supply_ns)
            .sum();
        let threads: u64 = r
            .threads
            .iter()
            .zip(&e.threads)
            .filter(|(_, x)| x.stayed_under.as_deref() == Some(s.name.as_str()))
            .map(|(t, _)| t.received_ns)
            .sum();
        if e.settled.contains(&s.name) {
            ensure!(
                kids + threads == s.supply_ns,
                "{}: supply {} but its child instances received {kids} and its threads {threads}",
                s.name,
                s.supply_ns
            );
        }
        ensure!(
            kids + threads <= s.supply_ns,
            "{}: supply {} but its child instances received {kids} and its threads {threads}",
            s.name,
            s.supply_ns
        );
    }

    // Hard reservations and Limit: at most the amount in each period
    // (begun at the creation or later), plus a tick where timers wait
    // for one.
    for (thread, name, b, from) in &e.caps {
        let from = from * 1000;
        let got = match thread {
            true => r.thread(name).map(|t| t.received_ns),
            false => r.scheduler(name).map(|s| s.supply_ns),
        };
        let periods = dur.saturating_sub(from).div_ceil(b.period * 1000);
        let most = periods * ((b.amount + b.extra) * 1000 + e.tick_ns);
        ensure!(
            got.is_some_and(|got| got <= most),
            "{name}: received {got:?} ns, over {} per {} µs from {from} ns: at most {most}",
            b.amount,
            b.period
        );
    }
    for (root, set) in &e.roots {
        let held: u64 = set
            .iter()
            .map(|&c| m.per_cpu[c].busy_ns + m.per_cpu[c].context_switch_ns)
            .sum();
        ensure!(
            supply[root.as_str()] == held,
            "root {root}: supply {} but its processors {set:?} ran threads for {held}",
            supply[root.as_str()]
        );
    }
    for (k, p) in r.principals.iter().enumerate() {
        let mine: Vec<_> = r
            .threads
            .iter()
            .filter(|t| t.principal.as_deref() == Some(p.name.as_str()))
            .collect();
        let cpu: u64 = mine.iter().map(|t| t.cpu_ns).sum();
        ensure!(
            p.name == format!("p{k}")
                && p.threads == mine.len()
                && p.cpu_ns == cpu
                && share_ok(p.share, cpu, capacity),
            "principal {p:?}: its threads have {cpu} ns"
        );
    }

    let names: Vec<&str> = r.queues.iter().map(|q| q.name.as_str()).collect();
    let want: Vec<&str> = e.queues.iter().map(|q| q.0.as_str()).collect();
    ensure!(names == want, "queues {names:?}, expected {want:?}");
    for (q, (_, size, initial)) in r.queues.iter().zip(&e.queues) {
        let lo = q.min_fill as f64 / q.size as f64 - 1e-9;
        let hi = q.max_fill as f64 / q.size as f64 + 1e-9;
        ensure!(
            q.size == *size
                && q.fill + q.popped == initial + q.pushed
                && q.min_fill <= q.fill.min(*initial)
                && q.fill.max(*initial) <= q.max_fill
                && q.max_fill <= q.size
                && (lo..=hi).contains(&q.mean_fill),
            "queue {q:?} (initially {initial} of {size})"
        );
    }
    Ok(())
}

fn dist_ok(l: &hsched_sim::Dist) -> Result<(), String> {
    let order = [l.min, l.p50, l.p90, l.p99, l.p999, l.max];
    ensure!(
        l.count > 0 && order.windows(2).all(|w| w[0] <= w[1]),
        "{l:?}: percentiles out of order"
    );
    ensure!(
        l.min as f64 <= l.mean + 1e-6 && l.mean <= l.max as f64 + 1e-6,
        "{l:?}: mean outside min..max"
    );
    Ok(())
}

fn options(check_protocol: bool) -> SimOptions {
    // Duration and seed come from the file's [sim] section, as for
    // `hsched sim FILE`.
    SimOptions {
        check_protocol,
        ..Default::default()
    }
}

/// Runs one seed: `Ok(false)` when the checker refused the file (the
/// message goes to `refusal`), `Ok(true)` when it ran and passed.
fn run_seed(seed: u64, print: bool, refusal: &mut Option<String>) -> Result<bool, String> {
    let (text, expect) = generate(seed);
    if print {
        println!("{text}");
    }
    let file = format!("random-run-{seed}.toml");
    let h = match hsched_config::parse_str(&text, &file) {
        Ok(h) => h,
        Err(err) => {
            refusal.get_or_insert_with(|| format!("seed {seed}: {err}\n{text}"));
            return Ok(false);
        }
    };
    let outcome = std::panic::catch_unwind(|| -> Result<(), String> {
        let report = hsched_sim::run(&h, options(true)).map_err(|e| format!("run failed: {e}"))?;
        check(&report, &expect)?;
        // A rerun gives the same report; so does one without the protocol
        // checker and with a trace, which only observe.
        let again = match seed % 3 {
            0 => options(true),
            1 => SimOptions {
                trace: Some(Box::new(std::io::sink())),
                ..options(false)
            },
            _ => return Ok(()),
        };
        let b = hsched_sim::run(&h, again).map_err(|e| format!("rerun failed: {e}"))?;
        ensure!(
            report.to_json() == b.to_json(),
            "the rerun (seed % 3 = {}) gave another report",
            seed % 3
        );
        Ok(())
    })
    .unwrap_or_else(|panic| {
        let msg = panic
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default();
        Err(format!("panicked: {msg}"))
    });
    outcome.map(|()| true).map_err(|e| {
        let path = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(&file);
        let _ = std::fs::write(&path, &text);
        format!(
            "seed {seed}: {e}\n  repro: hsched sim {} --check-protocol\n{text}",
            path.display()
        )
    })
}

#[test]
fn random_hierarchies_run_and_account_for_all_time() {
    for p in registry() {
        assert!(
            KNOWN.contains(&p.name),
            "policy `{}` is registered but the generator does not parameterize it",
            p.name
        );
    }
    let one = std::env::var("HSCHED_SEED")
        .ok()
        .map(|s| s.parse::<u64>().expect("HSCHED_SEED is a number"));
    let number = |var: &str, default: u64| {
        std::env::var(var)
            .ok()
            .map_or(default, |s| s.parse().expect("a number of seeds"))
    };
    let seeds: Vec<u64> = match one {
        Some(seed) => vec![seed],
        None => {
            let first = number("HSCHED_FIRST_SEED", 0);
            (first..first + number("HSCHED_SEEDS", 400)).collect()
        }
    };
    let (mut ran, mut refused, mut refusal) = (0, 0, None);
    let mut failures = Vec::new();
    for &seed in &seeds {
        match run_seed(seed, one.is_some(), &mut refusal) {
            Ok(true) => ran += 1,
            Ok(false) => refused += 1,
            Err(e) => {
                failures.push(e);
                if failures.len() >= 3 {
                    break;
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    println!("{ran} runs, {refused} files refused");
    if let Some(first) = &refusal {
        println!("the first refusal: {first}");
    }
    // Every file is valid: a refusal is a generator bug, or the checker
    // refusing what the simulator runs.
    assert!(
        refused == 0,
        "{refused} of {} files refused; the first:\n{}",
        seeds.len(),
        refusal.unwrap_or_default()
    );
}

/// Runs `text` for `ms` milliseconds with `seed` under the protocol
/// checker.
fn run_text(text: &str, ms: u64, seed: u64) -> Result<Report, String> {
    let h = hsched_config::parse_str(text, "regression.toml").map_err(|e| e.to_string())?;
    let opts = SimOptions {
        duration: Some(hsched_core::Duration::from_millis(ms)),
        seed: Some(seed),
        ..options(true)
    };
    hsched_sim::run(&h, opts).map_err(|e| e.to_string())
}

// What the random runs found, cut down to the smallest files that show it.

/// `initial` below `floor`: a new adaptive child started below the floor,
/// which realrate's own invariant forbids (a protocol violation).
#[test]
fn realrate_starts_adaptive_children_at_the_floor_at_least() {
    let r = run_text(
        r#"
        [[scheduler]]
        name = "rr"
        policy = "realrate"
        floor = 0.05
        initial = 0.02
        [[thread]]
        name = "t"
        scheduler = "rr"
        workload = { kind = "cpu-bound" }
        "#,
        300,
        0,
    )
    .unwrap();
    assert!(r.thread("t").unwrap().cpu_ns > 0);
}

/// A multiprocessor child registers a VP per processor, all with its one
/// priority: a unique-priority FP refused the second as a second child.
#[test]
fn unique_priority_fp_takes_a_multiprocessor_child() {
    let r = run_text(
        r#"
        [machine]
        cpus = 2
        [[scheduler]]
        name = "fp"
        policy = "fp"
        unique_priorities = true
        [[scheduler]]
        name = "ts"
        policy = "ts"
        parent = "fp"
        params = { priority = 1 }
        [[thread]]
        name = "t"
        count = 2
        scheduler = "ts"
        workload = { kind = "cpu-bound" }
        "#,
        300,
        0,
    )
    .unwrap();
    assert_eq!(r.thread("t.0").unwrap().cpu_ns, 300_000_000);
    assert_eq!(r.thread("t.1").unwrap().cpu_ns, 300_000_000);
}

/// A real-time child handed to the controller: realrate merged the old
/// proportion into the change and refused it ("give no proportion").
#[test]
fn realrate_hands_a_real_time_child_to_the_controller() {
    let r = run_text(
        r#"
        [[scheduler]]
        name = "rr"
        policy = "realrate"
        [[thread]]
        name = "t"
        scheduler = "rr"
        params = { proportion = 0.2, period = "10ms" }
        workload = { kind = "cpu-bound" }
        [[at]]
        time = "100ms"
        op = "set-params"
        thread = "t"
        params = { class = "real-rate" }
        "#,
        300,
        0,
    )
    .unwrap();
    assert!(r.thread("t").unwrap().cpu_ns > 20_000_000);
}

/// Join over parents that lie below one another: its grant to the child
/// was still queued when the parent took the processor back, the HSI
/// dropped it as stale, and Join, seeing a child that was not running,
/// ignored the revocation and went on believing it ran.
#[test]
fn join_forgets_a_grant_that_never_took_effect() {
    run_text(
        r#"
        [machine]
        cpus = 2
        [[scheduler]]
        name = "root"
        policy = "best"
        [[scheduler]]
        name = "ps"
        policy = "ps"
        parent = "root"
        [[scheduler]]
        name = "rr"
        policy = "realrate"
        parent = "root"
        [[scheduler]]
        name = "br"
        policy = "best-rate"
        parent = "ps"
        [[scheduler]]
        name = "ps2"
        policy = "ps"
        parent = "ps"
        [[scheduler]]
        name = "j1"
        policy = "join"
        parents = [{ name = "br", nice = 15 }, { name = "ps2", share = 1.189 }]
        [[scheduler]]
        name = "j2"
        policy = "join"
        parents = [{ name = "br", nice = 11 }, { name = "rr", class = "misc" }, { name = "j1" }]
        [[scheduler]]
        name = "ts"
        policy = "ts"
        parent = "j2"
        [[thread]]
        name = "typist"
        scheduler = "ts"
        workload = { kind = "interactive", think = "15254us", burst = "285us" }
        [[thread]]
        name = "tick"
        count = 2
        scheduler = "br"
        workload = { kind = "periodic", period = "14834us", exec = "5085us", jitter = "3872us", offset = "3141us" }
        "#,
        100,
        0,
    )
    .unwrap();
}

/// A multiprocessor child that asks for a processor, gives the request
/// back and asks again within one instant: by the time Linux 2.4 (and
/// BEST-RATE, BEST: the same code) read the first request, the VP was
/// ready again, so it was granted; the release that followed was taken
/// as news, and the processor, still busy, was granted a second time.
#[test]
fn linux24_and_best_rate_drop_stale_requests_and_releases() {
    let file = |root: &str| {
        format!(
            r#"
            [machine]
            cpus = 3
            timer = "408hz"
            [[scheduler]]
            name = "root"
            policy = "{root}"
            [[scheduler]]
            name = "fp"
            policy = "fp"
            parent = "root"
            [[scheduler]]
            name = "fp2"
            policy = "fp"
            parent = "fp"
            params = {{ priority = 13 }}
            [[scheduler]]
            name = "best"
            policy = "best"
            parent = "fp"
            [[scheduler]]
            name = "j1"
            policy = "join"
            parents = [{{ name = "fp", priority = 21 }}, {{ name = "best", nice = -3 }}, {{ name = "fp2", priority = 9 }}]
            [[scheduler]]
            name = "ps"
            policy = "ps"
            parent = "root"
            [[scheduler]]
            name = "j2"
            policy = "join"
            parents = [{{ name = "j1" }}, {{ name = "root" }}]
            [[scheduler]]
            name = "rr"
            policy = "realrate"
            parent = "best"
            [[thread]]
            name = "a"
            scheduler = "rr"
            params = {{ class = "real-rate" }}
            workload = {{ kind = "periodic", period = "74788us", exec = "34101us" }}
            [[thread]]
            name = "b"
            scheduler = "fp"
            workload = {{ kind = "periodic", period = "42248us", exec = "22742us", jitter = "11143us", offset = "4058us" }}
            [[thread]]
            name = "c"
            scheduler = "j2"
            workload = {{ kind = "periodic", period = "45374us", exec = "19805us", deadline = "80079us", jitter = "7599us", offset = "6284us" }}
            [[thread]]
            name = "d"
            scheduler = "ps"
            workload = {{ kind = "sporadic", min_interarrival = "34847us", exec = "1667us", deadline = "62922us" }}
            "#
        )
    };
    // Both failed at 1.742 s with these seeds.
    run_text(&file("linux24"), 1800, 2).unwrap();
    run_text(&file("best-rate"), 1800, 0).unwrap();
}

/// A coop member carried to another default: the keys coop wrote into its
/// parameters (`out_deadline`, ...) went along, and `ts` refused them.
/// Both ways round a reservation, too.
#[test]
fn threads_leave_coop_without_the_keys_it_wrote() {
    let r = run_text(
        r#"
        default = "co"
        [[scheduler]]
        name = "root"
        policy = "ps"
        [[scheduler]]
        name = "co"
        policy = "coop"
        parent = "root"
        [[scheduler]]
        name = "rez"
        policy = "rez"
        parent = "root"
        [[scheduler]]
        name = "t"
        policy = "ts"
        parent = "root"
        [[thread]]
        name = "p"
        workload = { kind = "player" }
        [[thread]]
        name = "q"
        workload = { kind = "player" }
        [[at]]
        time = "400ms"
        op = "begin-reservation"
        thread = "q"
        scheduler = "rez"
        params = { amount = "5ms", period = "40ms" }
        [[at]]
        time = "500ms"
        op = "set-default"
        name = "t"
        move_threads = true
        [[at]]
        time = "600ms"
        op = "destroy-scheduler"
        name = "co"
        [[at]]
        time = "700ms"
        op = "end-reservation"
        thread = "q"
        "#,
        1000,
        0,
    )
    .unwrap();
    for t in ["p", "q"] {
        assert!(r.thread(t).unwrap().messages_sent > 0, "{t} polled in coop");
    }
}

/// A random value for a parameter of `kind` (as `ParamSpec::kind` writes
/// it), often out of range or of the wrong kind.
fn hostile_value(r: &mut Rng, kind: &str) -> String {
    let quoted: Vec<&str> = kind
        .split('"')
        .skip(1)
        .step_by(2)
        .filter(|w| !w.is_empty() && !w.contains('/'))
        .collect();
    match r.range(0, 9) {
        0 => format!("{}", r.range(0, 40) as i64 - 20),
        1 => format!("{}", r.range(0, 100_000)),
        2 => format!("{:.3}", float(r, -1.0, 3.0)),
        3 => "\"bogus\"".into(),
        4 => "true".into(),
        _ if kind.starts_with("duration") => dq(r.range(0, 80 * MS)),
        _ if kind.starts_with("integer") => format!("{}", r.range(0, 40)),
        _ if kind.starts_with("number") => format!("{:.3}", float(r, 0.0, 2.0)),
        _ if !quoted.is_empty() => format!("\"{}\"", r.pick(&quoted)),
        _ => format!("{}", r.range(0, 5)),
    }
}

/// 0 to 2 parameters, keys from every policy's child and change
/// parameters, so often ones the scheduler does not take.
fn hostile_params(r: &mut Rng) -> String {
    let specs: Vec<_> = registry()
        .iter()
        .flat_map(|p| p.child_params.iter().chain(p.change_params))
        .collect();
    let mut keys: Vec<String> = Vec::new();
    let mut body = Vec::new();
    for _ in 0..r.range(0, 2) {
        let s = *r.pick(&specs);
        if !keys.contains(&s.key.to_string()) {
            keys.push(s.key.to_string());
            body.push(format!("{} = {}", s.key, hostile_value(r, s.kind)));
        }
    }
    table(&body.join(", "))
}

/// Whether a run's failure is one the checker does not foresee: a refusal
/// that depends on the state of the run (rez's admission control while a
/// change is pending, a thread whose finite workload has ended). Any other
/// admission refusal is one the checker should have made.
fn refused_for_its_state(message: &str) -> bool {
    ["held until the next period start", "when its program ended"]
        .iter()
        .any(|m| message.contains(m))
}

/// `hsched_config` accepts only what runs: random operations, often
/// invalid (unknown keys, values out of range or of the wrong kind,
/// schedulers of other policies), are added to a valid file; the checker
/// refuses the file, or the run applies them. A run may refuse an
/// operation for its state (admission control), never for what the file
/// says. `HSCHED_SEEDS` and `HSCHED_FIRST_SEED` as above.
#[test]
fn what_the_checker_accepts_runs() {
    let number = |var: &str, default: u64| {
        std::env::var(var)
            .ok()
            .map_or(default, |s| s.parse().expect("a number of seeds"))
    };
    let first = number("HSCHED_FIRST_SEED", 0);
    let (mut refused, mut ran, mut state) = (0, 0, 0);
    for seed in first..first + number("HSCHED_SEEDS", 400) {
        let (mut text, _) = generate(seed);
        let h = hsched_config::parse_str(&text, "valid.toml").expect("a valid file");
        let threads: Vec<&str> = h.threads.iter().map(|t| t.name.as_str()).collect();
        let mut scheds: Vec<&str> = h.schedulers.iter().map(|s| s.name.as_str()).collect();
        for op in &h.operations {
            if let hsched_config::OpSpec::CreateScheduler(s) = &op.op {
                scheds.push(&s.name);
            }
        }
        let dur = h.sim.duration.map_or(1000, |d| d.as_nanos() / 1000);
        let mut r = Rng(seed ^ 0x0057_11E0);
        if threads.is_empty() {
            continue;
        }
        for _ in 0..r.range(1, 4) {
            let at = dq(r.range(0, dur));
            let t = *r.pick(&threads);
            let s = *r.pick(&scheds);
            let op = match r.range(0, 4) {
                0 => format!(
                    "op = \"set-params\"\nthread = \"{t}\"\nparams = {}",
                    hostile_params(&mut r)
                ),
                1 => format!(
                    "op = \"move-thread\"\nthread = \"{t}\"\nto = \"{s}\"\nparams = {}",
                    hostile_params(&mut r)
                ),
                2 => format!(
                    "op = \"set-default\"\nname = \"{s}\"\nmove_threads = {}",
                    r.chance(70)
                ),
                3 => format!(
                    "op = \"begin-reservation\"\nthread = \"{t}\"\nscheduler = \"{s}\"\nparams = {}",
                    hostile_params(&mut r)
                ),
                _ => format!("op = \"end-reservation\"\nthread = \"{t}\""),
            };
            let _ = write!(text, "\n[[at]]\ntime = {at}\n{op}\n");
        }
        let Ok(h) = hsched_config::parse_str(&text, "hostile.toml") else {
            refused += 1;
            continue;
        };
        match hsched_sim::run(&h, options(true)) {
            Ok(_) => ran += 1,
            Err(e) if refused_for_its_state(&e.to_string()) => state += 1,
            Err(e) => panic!("seed {seed}: the checker accepted a file that fails: {e}\n{text}"),
        }
    }
    println!(
        "{refused} files refused, {ran} ran, {state} stopped by a refusal for the run's state"
    );
}
