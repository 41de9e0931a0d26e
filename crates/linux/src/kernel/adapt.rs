//! Adaptive reservations: a `realrate` instance under the kernel backend.
//! The kernel enforces each child's reservation as a `SCHED_DEADLINE`
//! server; the daemon runs real-rate's controller (Steere et al. 1998,
//! §3.3; [`hsched_policies::rate_control`]) every `control_period` and
//! writes the proportions it returns into the servers' runtimes.
//!
//! What the controller learns, and from where:
//! - **progress**: the fill levels of the pipes, FIFOs, sockets and
//!   shared-memory queues between managed processes, from the same
//!   monitor the user backend uses ([`crate::progress`]), delivered here
//!   instead of to an HSI;
//! - **unused allocation** (the too-generous test): the policy counts the
//!   budget a child left unused while blocked; here each tick counts the
//!   allocation of the tick less the CPU time the kernel charged the
//!   thread (`/proc/TID/schedstat`). Under admission a runnable server
//!   gets its budget, so what it did not use it did not ask for; a tick
//!   of overrun shows as a little more than the allocation, which takes
//!   back as much.
//!
//! The controller's room is the instance's overload threshold less its
//! real-time and aperiodic children's proportions, as in the policy; the
//! compiler admitted the whole threshold, so no change of the proportions
//! can make another server miss. A runtime change that the kernel refuses
//! (another program took deadline bandwidth since) keeps the old runtime
//! and is counted and said once.

use super::apply;
use super::compile::{self, Mechanism, Plan};
use super::run::Managed;
use crate::progress::{ProgressMonitor, Sink};
use crate::report::AdaptStats;
use crate::sys;
use hsched_config::Hierarchy;
use hsched_core::{Duration, Instant, Msg, ThreadId};
use hsched_policies::rate_control::{self, Feedback};
use hsched_policies::realrate::{child_spec, learned_class, Class, RealRateConfig};
use std::collections::BTreeMap;

/// The controllers of a run's `realrate` instances.
pub(super) struct Adapt {
    instances: Vec<Instance>,
    monitor: ProgressMonitor,
    /// Its counters; the monitor's are added by [`Adapt::stats`].
    counts: AdaptStats,
    /// Something to say once (the first refusal).
    pub(super) warning: Option<String>,
}

struct Instance {
    name: String,
    cfg: RealRateConfig,
    /// Daemon clock of the last tick and the next.
    last_ns: u64,
    next_ns: u64,
    children: BTreeMap<i32, Child>,
}

struct Child {
    /// The parameters it was taken in with (a `set-params` changes them).
    params: hsched_core::Params,
    class: Class,
    explicit: bool,
    importance: f64,
    proportion: f64,
    period: Duration,
    fb: Feedback,
    /// The thread's CPU time at the last tick.
    cpu_ns: u64,
    /// Daemon clock when it was taken in: its first tick counts its
    /// allocation from then, not from the tick before.
    since_ns: u64,
}

impl Adapt {
    /// The controllers of `plan`'s `realrate` instances (none: a run that
    /// never ticks).
    pub(super) fn new(h: &Hierarchy, plan: &Plan) -> Adapt {
        let instances = h
            .schedulers
            .iter()
            .filter(|s| {
                matches!(
                    plan.node(&compile::Node::Scheduler(s.name.clone()))
                        .map(|n| &n.mechanism),
                    Some(Mechanism::AdaptiveClass { .. })
                )
            })
            .filter_map(|s| {
                Some(Instance {
                    name: s.name.clone(),
                    cfg: RealRateConfig::from_params(&s.params).ok()?,
                    last_ns: 0,
                    next_ns: 0,
                    children: BTreeMap::new(),
                })
            })
            .collect();
        Adapt {
            instances,
            monitor: ProgressMonitor::from_env(h),
            counts: AdaptStats::default(),
            warning: None,
        }
    }

    /// When the daemon must next call [`Adapt::tick`], if ever.
    pub(super) fn due(&self) -> Option<u64> {
        let ticks = self.instances.iter().map(|i| i.next_ns).min()?;
        Some(self.monitor.due_if(true).map_or(ticks, |m| m.min(ticks)))
    }

    /// At daemon time `now` (`epoch` the run's start): takes in the
    /// threads placed under each instance since the last call and forgets
    /// those gone, samples the queues when due, and runs each controller
    /// whose tick has come.
    pub(super) fn tick(&mut self, now: u64, epoch: u64, threads: &mut BTreeMap<i32, Managed>) {
        if self.instances.is_empty() {
            return;
        }
        for inst in &mut self.instances {
            inst.reconcile(now, epoch, threads);
        }
        let monitored: Vec<(ThreadId, i32, i32)> = self
            .instances
            .iter()
            .flat_map(|i| i.children.keys())
            .filter_map(|&tid| Some((thread_key(tid)?, tid, threads.get(&tid)?.orig.tgid)))
            .collect();
        {
            let mut sink = Children {
                instances: &mut self.instances,
                threads,
            };
            self.monitor.step(now, epoch, &mut sink, &monitored);
        }
        for k in 0..self.instances.len() {
            if now >= self.instances[k].next_ns && !self.instances[k].children.is_empty() {
                self.control(k, now, epoch, threads);
            }
        }
    }

    /// One controller tick of instance `k` (§3.3): the unused allocation
    /// from the kernel's CPU time, pressure, PID, Fig 4, squishing,
    /// quality exceptions, then the new runtimes.
    fn control(&mut self, k: usize, now: u64, epoch: u64, threads: &mut BTreeMap<i32, Managed>) {
        let inst = &mut self.instances[k];
        let cfg = inst.cfg;
        let period_ns = cfg.control_period.as_nanos().max(1);
        let last = inst.last_ns;
        let dt = now.saturating_sub(last) as f64 / 1e9;
        inst.last_ns = now;
        // Stay on the period grid; skip ticks missed while busy.
        inst.next_ns = if now >= inst.next_ns + period_ns {
            now + period_ns
        } else {
            inst.next_ns + period_ns
        };
        self.counts.ticks += 1;
        let at = Instant(now.saturating_sub(epoch));
        // A child that ran nothing since the last tick may have exited (a
        // zombie until its parent reaps it): its share goes back to the
        // others at once, not at the next sample (a shell's short-lived
        // helpers would otherwise hold the room for a second).
        inst.children.retain(|&tid, c| {
            let cpu = crate::enforce::proc_cpu_ns(tid);
            let gone = cpu.is_none_or(|x| x == c.cpu_ns)
                && crate::enforce::proc_state(tid).is_none_or(|s| s == 'Z' || s == 'X');
            if gone {
                if let Some(m) = threads.get_mut(&tid) {
                    m.exited_ns.get_or_insert(now.saturating_sub(epoch));
                }
            }
            !gone
        });
        let mut fixed = 0.0;
        for (&tid, c) in &mut inst.children {
            if !c.class.adaptive() {
                fixed += c.proportion;
                continue;
            }
            let cpu = crate::enforce::proc_cpu_ns(tid).unwrap_or(c.cpu_ns);
            let used = cpu.saturating_sub(c.cpu_ns) as f64 / 1e9;
            c.cpu_ns = cpu;
            let held = now.saturating_sub(last.max(c.since_ns)) as f64 / 1e9;
            c.fb.unused(c.proportion * held - used);
            c.fb.step(&cfg, c.class, c.proportion, c.period, at, dt);
        }
        let room = (cfg.overload - fixed).max(0.0);
        let granted = inst.squished(room, |c| c.fb.wanted);
        for &(tid, g) in &granted {
            if let Some(c) = inst.children.get_mut(&tid) {
                if c.class == Class::RealRate && c.fb.quality(&cfg, g) {
                    self.counts.quality_exceptions += 1;
                }
            }
        }
        self.actuate(k, &granted, threads);
    }

    /// Gives instance `k`'s children `(tid, proportion)` their new
    /// runtimes, the ones that shrink first, so that the kernel's
    /// admission never sees the sum of a tick's changes above the
    /// threshold half way through.
    fn actuate(&mut self, k: usize, granted: &[(i32, f64)], threads: &mut BTreeMap<i32, Managed>) {
        let inst = &mut self.instances[k];
        let mut order: Vec<(i32, f64)> = granted
            .iter()
            .copied()
            .filter(|&(t, g)| {
                inst.children
                    .get(&t)
                    .is_some_and(|c| (g - c.proportion).abs() > 1e-12)
            })
            .collect();
        order.sort_by(|a, b| {
            let d = |x: &(i32, f64)| x.1 - inst.children[&x.0].proportion;
            d(a).total_cmp(&d(b))
        });
        for (tid, g) in order {
            let Some(c) = inst.children.get_mut(&tid) else {
                continue;
            };
            c.proportion = g;
            // The kernel takes runtimes of at least 1 µs.
            let runtime = compile::proportion_of(g, c.period).max(Duration::from_micros(1));
            let Some(m) = threads.get_mut(&tid) else {
                continue;
            };
            let Mechanism::Deadline {
                runtime: old,
                deadline,
                period,
                reclaim,
            } = m.node.mechanism
            else {
                continue;
            };
            if old == runtime {
                continue;
            }
            let new = Mechanism::Deadline {
                runtime,
                deadline,
                period,
                reclaim,
            };
            let Some(attr) = apply::attr_for(&new) else {
                continue;
            };
            match sys::sched_setattr(tid, &attr) {
                Ok(()) => {
                    m.node.mechanism = new;
                    self.counts.runtime_changes += 1;
                }
                // Gone: the next sample marks it exited.
                Err(e) if e.raw_os_error() == Some(libc::ESRCH) => {}
                Err(e) => {
                    self.counts.refused += 1;
                    c.proportion = old.as_nanos() as f64 / period.as_nanos().max(1) as f64;
                    if self.warning.is_none() {
                        self.warning = Some(format!(
                            "--enforce kernel: `{}`: the kernel refused to change `{}`'s runtime from {old} to {runtime} every {period} ({e}); it keeps {old} (further refusals are counted)",
                            inst.name, m.name
                        ));
                    }
                }
            }
        }
    }

    /// Makes room in `sched`'s adaptive children for a new server of
    /// `share` before it is set, squishing their proportions into what the
    /// threshold leaves (§3.3), so that the kernel admits it. Nothing
    /// happens when `sched` is no `realrate` of the run or has room.
    pub(super) fn make_room(
        &mut self,
        sched: &str,
        share: f64,
        threads: &mut BTreeMap<i32, Managed>,
    ) {
        let Some(k) = self.instances.iter().position(|i| i.name == sched) else {
            return;
        };
        let inst = &self.instances[k];
        let cfg = inst.cfg;
        let total: f64 = inst.children.values().map(|c| c.proportion).sum();
        if total + share <= cfg.overload + 1e-9 {
            return;
        }
        let fixed: f64 = inst
            .children
            .values()
            .filter(|c| !c.class.adaptive())
            .map(|c| c.proportion)
            .sum();
        let granted = inst.squished((cfg.overload - fixed - share).max(0.0), |c| c.proportion);
        self.actuate(k, &granted, threads);
    }

    /// The counters for the report, the progress monitor's included.
    pub(super) fn stats(&self) -> AdaptStats {
        AdaptStats {
            queue_samples: self.monitor.stats.samples,
            progress_messages: self.monitor.stats.messages,
            ..self.counts.clone()
        }
    }
}

impl Instance {
    /// The adaptive children's proportions squished into `room` (§3.3),
    /// from what each wants (`wants`): (tid, granted).
    fn squished(&self, room: f64, wants: impl Fn(&Child) -> f64) -> Vec<(i32, f64)> {
        let adaptive: Vec<(i32, &Child)> = self
            .children
            .iter()
            .filter(|(_, c)| c.class.adaptive())
            .map(|(&t, c)| (t, c))
            .collect();
        let wanted: Vec<(usize, f64, f64)> = adaptive
            .iter()
            .enumerate()
            .map(|(i, (_, c))| (i, wants(c), c.importance))
            .collect();
        rate_control::squish(self.cfg.floor, room, &wanted)
            .into_iter()
            .map(|(i, g)| (adaptive[i].0, g))
            .collect()
    }

    /// Takes in the live deadline servers placed under this instance
    /// (launched, created by a program, moved, attached, placed by a rule)
    /// and forgets the others.
    fn reconcile(&mut self, now: u64, epoch: u64, threads: &BTreeMap<i32, Managed>) {
        let servers = |m: &Managed| {
            m.scheduler == self.name
                && m.exited_ns.is_none()
                && matches!(m.node.mechanism, Mechanism::Deadline { .. })
        };
        // Gone, or changed by `set-params`: taken in again below.
        self.children.retain(|tid, c| {
            threads
                .get(tid)
                .is_some_and(|m| servers(m) && m.params == c.params)
        });
        let first = self.children.is_empty();
        for (&tid, m) in threads {
            if !servers(m) || self.children.contains_key(&tid) {
                continue;
            }
            let Ok(spec) = child_spec(&self.cfg, &m.params) else {
                continue;
            };
            let Mechanism::Deadline {
                runtime, period, ..
            } = m.node.mechanism
            else {
                continue;
            };
            let proportion = runtime.as_nanos() as f64 / period.as_nanos().max(1) as f64;
            self.children.insert(
                tid,
                Child {
                    params: m.params.clone(),
                    class: spec.class,
                    explicit: spec.explicit,
                    importance: spec.importance,
                    proportion,
                    period: spec.period,
                    fb: Feedback::new(Instant(now.saturating_sub(epoch)), proportion),
                    cpu_ns: crate::enforce::proc_cpu_ns(tid).unwrap_or(0),
                    since_ns: now,
                },
            );
        }
        // The controller starts with its first child, as the policy's;
        // until then the instance looks for one every control period.
        if first {
            self.last_ns = now;
            self.next_ns = now + self.cfg.control_period.as_nanos();
        }
    }
}

/// The monitor's key for thread `tid`.
fn thread_key(tid: i32) -> Option<ThreadId> {
    u32::try_from(tid).ok().map(ThreadId)
}

/// The instances' children, as the progress monitor's sink.
struct Children<'a> {
    instances: &'a mut [Instance],
    threads: &'a BTreeMap<i32, Managed>,
}

impl Children<'_> {
    fn child(&mut self, t: ThreadId) -> Option<&mut Child> {
        let tid = i32::try_from(t.0).ok()?;
        self.instances
            .iter_mut()
            .find_map(|i| i.children.get_mut(&tid))
    }
}

impl Sink for Children<'_> {
    fn progress(&mut self, _at: Instant, t: ThreadId, msg: &Msg) -> Result<(), String> {
        let Msg::App { kind, params } = msg else {
            return Err("only progress messages reach the controller".into());
        };
        if kind != "progress" {
            return Err(format!("a `{kind}` message does not reach the controller"));
        }
        let c = self
            .child(t)
            .ok_or_else(|| format!("thread {} is not under a realrate scheduler", t.0))?;
        c.fb.progress(params).map_err(|e| e.to_string())?;
        c.class = learned_class(c.class, c.explicit, c.fb.reports());
        Ok(())
    }

    fn live(&self, t: ThreadId) -> bool {
        i32::try_from(t.0)
            .ok()
            .and_then(|tid| self.threads.get(&tid))
            .is_some_and(|m| m.exited_ns.is_none())
    }

    fn traced(&self, t: ThreadId) -> (String, f64) {
        let tid = i32::try_from(t.0).unwrap_or(-1);
        let name = self
            .threads
            .get(&tid)
            .map_or_else(|| tid.to_string(), |m| m.name.clone());
        let p = self
            .instances
            .iter()
            .find_map(|i| i.children.get(&tid))
            .map_or(f64::NAN, |c| c.proportion);
        (name, p)
    }
}
