//! What control requests do under the kernel backend: `move`,
//! `begin-reservation`, `end-reservation` and `set-params` change a
//! thread's kernel mechanism to the one its new place in the compiled
//! hierarchy maps to; `attach` and `detach` take programs in and give them
//! back; `show` is the mapped tree with each thread's mechanism. Peers are
//! authorized as under the user backend ([`crate::authz`]). A request
//! that would need the hierarchy itself to change (`create`, `destroy`,
//! `set-default`, `set-share`) or the resource manager (`request`) is
//! refused naming `--enforce user`, which runs the daemon's HSI.
//!
//! A new deadline server, or new parameters for one, is admitted by
//! hsched first — its reservation scheduler's `cap`, the kernel's limit
//! and the global-EDF bound of [`compile::admit_servers`] over every
//! server of the run — and then by the kernel's own admission, which
//! `sched_setattr` applies atomically: a refusal by either changes
//! nothing and names the thread, the load and the limit.

use super::apply;
use super::compile::{self, Mechanism, Node, NodeMap};
use super::run::{Kernel, Managed};
use crate::authz;
use crate::control::{params_from_json, params_to_json, Fail, Peer, PROTOCOL_VERSION};
use crate::enforce::{self, Original};
use crate::sys;
use hsched_core::{Duration, Params};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;

/// The operations the kernel backend serves.
pub const KERNEL_OPERATIONS: &[&str] = &[
    "hello",
    "show",
    "move",
    "begin-reservation",
    "end-reservation",
    "set-params",
    "attach",
    "detach",
    "shutdown",
];

fn fail(code: &'static str, message: impl Into<String>) -> Fail {
    Fail {
        code,
        message: message.into(),
    }
}

fn str_arg<'a>(req: &'a Value, key: &str) -> Result<&'a str, Fail> {
    req.get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| fail("bad-request", format!("`{key}` (a string) is required")))
}

fn ratio(a: Duration, p: Duration) -> f64 {
    a.as_nanos() as f64 / p.as_nanos().max(1) as f64
}

impl Kernel<'_> {
    /// Answers every complete request line waiting on the socket.
    pub(super) fn serve(&mut self) {
        let Some(mut clients) = self.clients.take() else {
            return;
        };
        for line in clients.read() {
            let resp = self.answer(line.request, &line.peer);
            self.stats.operations += 1;
            clients.reply(line.conn, &resp);
        }
        clients.expire();
        self.clients = Some(clients);
    }

    fn answer(&mut self, req: Result<Value, String>, peer: &Peer) -> String {
        let req = match req {
            Ok(v) => v,
            Err(message) => {
                return json!({"v": PROTOCOL_VERSION, "id": null, "ok": false, "error": {"code": "bad-request", "message": message}}).to_string();
            }
        };
        let id = req.get("id").cloned().unwrap_or(Value::Null);
        let res = match req.get("v") {
            None => self.dispatch(&req, peer),
            Some(v) if v.is_u64() && v.as_u64() == Some(PROTOCOL_VERSION) => {
                self.dispatch(&req, peer)
            }
            Some(v) => Err(fail(
                "version",
                format!("protocol version {v} is not supported; `v` is the integer {PROTOCOL_VERSION} (or absent)"),
            )),
        };
        match res {
            Ok(result) => json!({"v": PROTOCOL_VERSION, "id": id, "ok": true, "result": result}),
            Err(f) => {
                json!({"v": PROTOCOL_VERSION, "id": id, "ok": false, "error": {"code": f.code, "message": f.message}})
            }
        }
        .to_string()
    }

    fn dispatch(&mut self, req: &Value, peer: &Peer) -> Result<Value, Fail> {
        let op = str_arg(req, "op")?;
        match op {
            "hello" => Ok(json!({"protocol": PROTOCOL_VERSION, "pid": sys::getpid(), "cpus": self.cpus,
                "operations": KERNEL_OPERATIONS, "privileged": peer.privileged, "enforce": "kernel"})),
            "show" => Ok(self.show()),
            "move" | "begin-reservation" | "end-reservation" | "set-params" => {
                self.thread_op(op, req, peer)
            }
            "attach" => self.attach(req, peer),
            "detach" => self.detach(req, peer),
            "shutdown" => {
                if !peer.privileged {
                    return Err(fail("unauthorized", "`shutdown` needs root or the control group"));
                }
                self.stats.ended_by = "control shutdown".into();
                self.shutdown = true;
                Ok(json!({}))
            }
            "create" | "destroy" | "set-default" | "set-share" | "request" | "release"
            | "requests" | "load" | "unload" | "replace" => Err(fail(
                "unsupported",
                format!("`{op}` changes the hierarchy or asks its resource manager, which only the daemon's HSI runs: this run enforces the compiled hierarchy with the kernel (--enforce kernel); use --enforce user for `{op}`"),
            )),
            other => Err(fail(
                "unknown-op",
                format!("unknown operation `{other}`; the kernel backend serves: {}", KERNEL_OPERATIONS.join(", ")),
            )),
        }
    }

    fn thread_op(&mut self, op: &str, req: &Value, peer: &Peer) -> Result<Value, Fail> {
        let tid = self.thread_ref(req)?;
        self.may_touch(peer, tid)?;
        let params = params_from_json(req.get("params"))?;
        let m = &self.threads[&tid];
        let (target, params) = match op {
            "move" => (str_arg(req, "to")?.to_string(), params),
            "begin-reservation" => {
                if m.saved.is_some() {
                    return Err(fail(
                        "refused",
                        format!(
                            "thread `{}` holds a reservation already: end it first",
                            m.name
                        ),
                    ));
                }
                (str_arg(req, "scheduler")?.to_string(), params)
            }
            "end-reservation" => {
                let Some((_, sched, p)) = &m.saved else {
                    return Err(fail(
                        "refused",
                        format!(
                            "thread `{}` holds no reservation begun with `begin-reservation`",
                            m.name
                        ),
                    ));
                };
                (sched.clone(), p.clone())
            }
            // set-params: the same place, the given parameters merged
            // over the thread's own as its policy merges them (a
            // `realrate` child turning adaptive leaves its proportion).
            _ => {
                let policy = self
                    .h
                    .schedulers
                    .iter()
                    .find(|s| s.name == m.scheduler)
                    .map(|s| s.policy.as_str());
                let merge = policy.and_then(hsched_policies::registry::lookup).map_or(
                    hsched_policies::registry::merge_change as fn(&Params, &Params) -> Params,
                    |i| i.merge_change,
                );
                (m.scheduler.clone(), merge(&m.params, &params))
            }
        };
        let gives = match op {
            "end-reservation" => false,
            "move" => {
                !params.is_empty() || self.h.default_scheduler.as_deref() != Some(target.as_str())
            }
            _ => true,
        };
        if gives {
            if !peer.privileged && self.h.rm.enabled {
                return Err(fail(
                    "unauthorized",
                    format!("`{op}` needs root or the control group: with a resource manager ([rm] in the hierarchy file) other users ask with `request` (Regehr 2001, §8.3), which `--enforce user` serves"),
                ));
            }
            self.authorize(peer, &params, &format!("`{op}` to `{target}`"), tid)?;
        }
        let node = self
            .target(tid, &target, &params)
            .map_err(|e| fail("refused", e))?;
        let before = (m.node.clone(), m.scheduler.clone(), m.params.clone());
        self.place(tid, node, &target, params)?;
        if let Some(m) = self.threads.get_mut(&tid) {
            match op {
                "begin-reservation" => m.saved = Some(before),
                "end-reservation" => m.saved = None,
                _ => {}
            }
        }
        let m = &self.threads[&tid];
        Ok(
            json!({"thread": m.name, "scheduler": m.scheduler, "mechanism": m.node.mechanism.to_string()}),
        )
    }

    fn thread_ref(&self, req: &Value) -> Result<i32, Fail> {
        let v = req
            .get("thread")
            .ok_or_else(|| fail("bad-request", "`thread` (a thread name or tid) is required"))?;
        let live = |m: &&Managed| m.exited_ns.is_none();
        match v {
            Value::Number(n) => n
                .as_i64()
                .and_then(|t| i32::try_from(t).ok())
                .filter(|t| self.threads.get(t).is_some_and(|m| live(&m)))
                .ok_or_else(|| fail("not-found", format!("no managed thread {v}"))),
            Value::String(s) => {
                let named: Vec<i32> = self
                    .threads
                    .iter()
                    .filter(|(_, m)| &m.name == s && live(m))
                    .map(|(&t, _)| t)
                    .collect();
                match named[..] {
                    [t] => Ok(t),
                    [] => Err(fail("not-found", format!("no managed thread {v}"))),
                    _ => Err(fail(
                        "bad-request",
                        format!("several managed threads are named {s:?}: give a tid"),
                    )),
                }
            }
            _ => Err(fail("bad-request", "`thread` must be a thread name or tid")),
        }
    }

    fn may_touch(&self, peer: &Peer, tid: i32) -> Result<(), Fail> {
        if peer.privileged || enforce::proc_uid(tid) == Some(peer.uid) {
            Ok(())
        } else {
            Err(fail(
                "unauthorized",
                format!("thread {tid} is not yours (uid {})", peer.uid),
            ))
        }
    }

    /// The user backend's rules ([`authz`]) for a request giving `params`
    /// to `peer`'s thread `tid`.
    fn authorize(&self, peer: &Peer, params: &Params, what: &str, tid: i32) -> Result<(), Fail> {
        authz::check_minimums(&self.limits, params).map_err(|e| fail("refused", e))?;
        if peer.privileged {
            return Ok(());
        }
        authz::check_capacity(peer.uid, authz::rtprio_limit(peer.pid), params, what)
            .map_err(|e| fail("unauthorized", e))?;
        let Some(asked) = authz::reservation(params).map_err(|e| fail("bad-request", e))? else {
            return Ok(());
        };
        let held: Vec<(Duration, Duration)> = self
            .threads
            .iter()
            .filter(|(&t, m)| {
                t != tid && m.exited_ns.is_none() && enforce::proc_uid(t) == Some(peer.uid)
            })
            .filter_map(|(_, m)| match m.node.mechanism {
                Mechanism::Deadline {
                    runtime, period, ..
                } => Some((runtime, period)),
                _ => None,
            })
            .collect();
        authz::check_user_utilization(&self.limits, peer.uid, &held, asked)
            .map_err(|e| fail("unauthorized", e))
    }

    /// The mechanism thread `tid` gets under scheduler `sched` with
    /// parent-side `params`, as the compiler maps the file's threads; or
    /// why none does exactly.
    pub(super) fn target(&self, tid: i32, sched: &str, params: &Params) -> Result<NodeMap, String> {
        let spec = self
            .h
            .schedulers
            .iter()
            .find(|s| s.name == sched)
            .ok_or_else(|| format!("no scheduler `{sched}` in {}", self.h.file))?;
        let mapped = self
            .plan
            .node(&Node::Scheduler(sched.to_string()))
            .ok_or_else(|| format!("scheduler `{sched}` is not mapped to a kernel mechanism"))?;
        let name = self
            .threads
            .get(&tid)
            .map_or_else(|| format!("{tid}"), |m| m.name.clone());
        // Partitioned, a thread goes into its new root's cpuset, pinned
        // to its CPUs.
        let partition = mapped.partition;
        let part_cpus = partition
            .and_then(|k| self.plan.partitions.get(k))
            .map(|p| p.cpus.clone());
        let mut node = NodeMap {
            node: Node::Thread(name.clone()),
            mechanism: Mechanism::DeadlineClass,
            cpus: part_cpus.clone().unwrap_or_else(|| self.cpus.clone()),
            partition,
            guarantee: hsched_guarantee::Guarantee::Null,
            note: None,
        };
        let duration = |k: &str| params.duration(k).map_err(|e| e.to_string());
        match &mapped.mechanism {
            Mechanism::DeadlineClass | Mechanism::ReclaimingJoin => {
                let (Some(a), Some(p)) = (duration("amount")?, duration("period")?) else {
                    return Err(format!(
                        "a thread under `{sched}` is a deadline server: give `amount` and `period`"
                    ));
                };
                if a.as_nanos() == 0 || a > p {
                    return Err(format!(
                        "a deadline server needs 0 < amount ≤ period, not {a} every {p}"
                    ));
                }
                let reclaim = matches!(mapped.mechanism, Mechanism::ReclaimingJoin);
                if reclaim && self.threads.get(&tid).is_none_or(|m| m.scheduler != sched) {
                    return Err(format!("`{sched}` is a join over one thread (a reclaiming server); another thread cannot join it: give it a reservation of its own"));
                }
                node.mechanism = Mechanism::Deadline {
                    runtime: a,
                    deadline: p,
                    period: p,
                    reclaim,
                };
                node.cpus = part_cpus.unwrap_or_default();
            }
            Mechanism::FifoBand { .. } => {
                // Its children's real-time priorities were fixed when the
                // hierarchy was compiled: a thread takes a sibling's.
                let prio = |p: &Params| p.i64("priority").ok().flatten().unwrap_or(0);
                let want = prio(params);
                let from_file = self
                    .h
                    .threads
                    .iter()
                    .filter(|t| t.scheduler == sched)
                    .filter_map(|t| match self.plan.thread(&t.name).map(|n| &n.mechanism) {
                        Some(Mechanism::Fifo { priority }) => Some((prio(&t.params), *priority)),
                        _ => None,
                    });
                let live = self
                    .threads
                    .values()
                    .filter(|m| m.scheduler == sched)
                    .filter_map(|m| match m.node.mechanism {
                        Mechanism::Fifo { priority } => Some((prio(&m.params), priority)),
                        _ => None,
                    });
                let known: Vec<(i64, u32)> = from_file.chain(live).collect();
                let Some(&(_, fifo)) = known.iter().find(|k| k.0 == want) else {
                    let mut have: Vec<i64> = known.iter().map(|k| k.0).collect();
                    have.sort_unstable();
                    have.dedup();
                    return Err(format!(
                        "under `{sched}` no thread has priority {want}: its order among the real-time priorities was fixed when the hierarchy was compiled; what would work: a priority one of its threads has ({}), or --enforce user",
                        have.iter().map(i64::to_string).collect::<Vec<_>>().join(", ")
                    ));
                };
                node.mechanism = Mechanism::Fifo { priority: fifo };
            }
            Mechanism::FairGroup { cgroup, .. } => {
                if spec.policy == "ps" {
                    return Err(format!("a thread under the `ps` scheduler `{sched}` is a cgroup of its own whose weight is its share among its siblings, fixed when the hierarchy was compiled; what would work: a `ts` or `limit` scheduler, or --enforce user"));
                }
                let nice = if spec.policy == "ts" || spec.policy == "linux24" {
                    let p = params
                        .i64("priority")
                        .map_err(|e| e.to_string())?
                        .unwrap_or(8);
                    (8 - p).clamp(-20, 19) as i32
                } else {
                    0
                };
                node.mechanism = Mechanism::Fair {
                    nice,
                    cgroup: cgroup.clone(),
                };
            }
            Mechanism::AdaptiveClass { .. } => {
                let cfg = hsched_policies::realrate::RealRateConfig::from_params(&spec.params)
                    .map_err(|e| e.to_string())?;
                let child = hsched_policies::realrate::child_spec(&cfg, params)
                    .map_err(|e| e.to_string())?;
                // Real-rate's own admission (§3.3): the real-time
                // proportions and a floor for every adaptive child within
                // the overload threshold, this thread counted as it asks.
                let siblings = self
                    .threads
                    .values()
                    .filter(|m| m.scheduler == sched && m.exited_ns.is_none() && m.orig.tid != tid)
                    .map(|m| &m.params);
                let (fixed, adaptive) =
                    compile::realrate_tally(&cfg, siblings.chain(std::iter::once(params)));
                let load = fixed + adaptive as f64 * cfg.floor;
                if load > cfg.overload + 1e-9 {
                    return Err(format!(
                        "admission refused: `{sched}` would hold {:.1}% (its real-time proportions and a floor of {:.1}% for each of {adaptive} adaptive children), above its overload threshold of {:.1}%",
                        load * 100.0,
                        cfg.floor * 100.0,
                        cfg.overload * 100.0
                    ));
                }
                let p = child.proportion.unwrap_or(cfg.initial.max(cfg.floor));
                let runtime = compile::proportion_of(p, child.period);
                node.mechanism = Mechanism::Deadline {
                    runtime,
                    deadline: child.period,
                    period: child.period,
                    reclaim: false,
                };
                node.cpus = part_cpus.unwrap_or_default();
            }
            other => {
                return Err(format!(
                    "threads cannot be placed directly under `{sched}` ({other})"
                ));
            }
        }
        Ok(node)
    }

    /// The reservation scheduler a thread under `sched` is admitted to
    /// (a join's first parent).
    fn rez_of<'s>(&'s self, sched: &'s str) -> &'s str {
        match self.h.schedulers.iter().find(|s| s.name == sched) {
            Some(s) if s.policy == "join" => s.parents.first().map_or(sched, |p| p.name.as_str()),
            _ => sched,
        }
    }

    /// hsched's admission of a server `(a, p)` for thread `name` (`tid`,
    /// whose present server it replaces) under `sched`: the reservation
    /// scheduler's cap, then the kernel's limit and the global-EDF bound
    /// over every server of the run, those of threads not started yet
    /// included.
    pub(super) fn admit(
        &self,
        tid: i32,
        name: &str,
        sched: &str,
        (a, p): (Duration, Duration),
        params: &Params,
    ) -> Result<(), String> {
        let rez = self.rez_of(sched);
        // Partitioned, a server is admitted in its root domain only.
        let partition = self
            .plan
            .node(&Node::Scheduler(rez.to_string()))
            .and_then(|n| n.partition);
        let mut servers: Vec<(Duration, Duration, &str)> = self
            .threads
            .iter()
            .filter(|(&t, m)| t != tid && m.exited_ns.is_none() && m.node.partition == partition)
            .filter_map(|(_, m)| match m.node.mechanism {
                Mechanism::Deadline {
                    runtime, period, ..
                } => Some((runtime, period, self.rez_of(&m.scheduler))),
                _ => None,
            })
            .collect();
        // A `realrate`'s servers hold what its controller may hand out,
        // its whole overload threshold, however it is shared out now.
        let adaptive = |s: &str| {
            matches!(
                self.plan
                    .node(&Node::Scheduler(s.to_string()))
                    .map(|n| &n.mechanism),
                Some(Mechanism::AdaptiveClass { .. })
            )
        };
        for (i, t) in self.h.threads.iter().enumerate() {
            if self.programs.iter().any(|g| g.spec == Some(i)) {
                continue;
            }
            if let Some(NodeMap {
                mechanism:
                    Mechanism::Deadline {
                        runtime, period, ..
                    },
                ..
            }) = self
                .plan
                .thread(&t.name)
                .filter(|n| n.partition == partition)
            {
                servers.push((*runtime, *period, self.rez_of(&t.scheduler)));
            }
        }
        let mut blocks: BTreeMap<&str, (usize, Duration)> = BTreeMap::new();
        for s in servers.iter().filter(|s| adaptive(s.2)) {
            let b = blocks.entry(s.2).or_insert((0, s.1));
            b.0 += 1;
            b.1 = b.1.min(s.1);
        }
        if adaptive(rez) {
            let b = blocks.entry(rez).or_insert((0, p));
            b.0 += 1;
            b.1 = b.1.min(p);
        }
        servers.retain(|s| !adaptive(s.2));
        // The overrun test applies where a server promises something: any
        // but a `realrate`'s adaptive ones.
        let promising = !servers.is_empty()
            || !adaptive(rez)
            || self.realrate_promises(rez, params)
            || self
                .threads
                .iter()
                .filter(|(&t, m)| {
                    t != tid
                        && m.exited_ns.is_none()
                        && m.node.partition == partition
                        && adaptive(&m.scheduler)
                })
                .any(|(_, m)| self.realrate_promises(&m.scheduler, &m.params))
            || self.h.threads.iter().enumerate().any(|(i, t)| {
                adaptive(&t.scheduler)
                    && !self.programs.iter().any(|g| g.spec == Some(i))
                    && self
                        .plan
                        .thread(&t.name)
                        .is_some_and(|n| n.partition == partition)
                    && self.realrate_promises(&t.scheduler, &t.params)
            });
        for (r, (n, period)) in blocks {
            let overload = self
                .h
                .schedulers
                .iter()
                .find(|s| s.name == r)
                .map_or(0.9, compile::reservation_cap);
            let share = compile::proportion_of(overload / n as f64, period);
            servers.extend(std::iter::repeat_n((share, period, r), n));
        }
        let u = ratio(a, p);
        if adaptive(rez) {
            // Real-rate's own admission was `target`'s; the new server is
            // one of the instance's block above.
            let all: Vec<(Duration, Duration)> = servers.iter().map(|s| (s.0, s.1)).collect();
            return self
                .admit_all(&all, partition, promising)
                .map_err(|why| format!("thread `{name}` under `{rez}`: {why}"));
        }
        let cap = self.h.schedulers.iter().find(|s| s.name == rez).map_or(
            hsched_guarantee::mapping::DEFAULT_REZ_CAP,
            compile::reservation_cap,
        );
        let in_rez = u + servers
            .iter()
            .filter(|s| s.2 == rez)
            .map(|s| ratio(s.0, s.1))
            .sum::<f64>();
        if in_rez > cap + 1e-9 {
            return Err(format!(
                "admission refused: thread `{name}` ({a} every {p}, {:.1}%) would bring reservation scheduler `{rez}` to {:.1}%, above its cap of {:.1}%",
                u * 100.0,
                in_rez * 100.0,
                cap * 100.0
            ));
        }
        let mut all: Vec<(Duration, Duration)> = servers.iter().map(|s| (s.0, s.1)).collect();
        all.push((a, p));
        self.admit_all(&all, partition, true)
            .map_err(|why| format!("thread `{name}` ({a} every {p}, {:.1}%): {why}", u * 100.0))
    }

    /// Whether a child with `params` under `realrate` instance `sched` is
    /// a reservation (`real-time`, `aperiodic`), which promises a
    /// guarantee, rather than an adaptive child.
    fn realrate_promises(&self, sched: &str, params: &Params) -> bool {
        compile::realrate_child(self.h, sched, params).is_some_and(|(_, c)| !c.class.adaptive())
    }

    /// The kernel's limit and the EDF bound on `servers` in `partition`'s
    /// root domain (the machine's without one); see
    /// [`compile::admit_servers`] for `promising`.
    fn admit_all(
        &self,
        servers: &[(Duration, Duration)],
        partition: Option<usize>,
        promising: bool,
    ) -> Result<(), String> {
        let mut model = super::machine_model();
        let mut others = self.plan.admission.others;
        if let Some(p) = partition.and_then(|k| self.plan.partitions.get(k)) {
            model = model.with_root_domain(p.cpus.len());
            others = p.others;
        }
        compile::admit_servers(&model, servers, others, promising)
    }

    /// Sets `node` on thread `tid` and records it under `sched` with
    /// `params`, a deadline server after hsched's admission; the kernel's
    /// refusal (`EBUSY`) leaves the thread as it was.
    pub(super) fn place(
        &mut self,
        tid: i32,
        node: NodeMap,
        sched: &str,
        params: Params,
    ) -> Result<(), Fail> {
        let m = &self.threads[&tid];
        let name = m.name.clone();
        let joins = m.scheduler != sched;
        if let Mechanism::Deadline {
            runtime, period, ..
        } = node.mechanism
        {
            self.admit(tid, &name, sched, (runtime, period), &params)
                .map_err(|e| fail("refused", e))?;
        }
        let was_dl = matches!(m.node.mechanism, Mechanism::Deadline { .. });
        let now_dl = matches!(node.mechanism, Mechanism::Deadline { .. });
        let rt = matches!(
            node.mechanism,
            Mechanism::Deadline { .. } | Mechanism::Fifo { .. }
        );
        // A real-time or deadline thread leaves the run's cgroups, which
        // have no real-time runtime on an RT_GROUP_SCHED kernel.
        if let (true, Some(cg)) = (rt, self.cg.as_ref()) {
            if let Mechanism::Fair { cgroup, .. } = &m.node.mechanism {
                if !cgroup.is_empty() {
                    cg.attach(tid, "").map_err(|e| {
                        fail("internal", format!("thread `{name}`: cpu cgroup: {e}"))
                    })?;
                }
            }
        }
        // A deadline server's affinity must be the root domain, and a
        // real-time thread cannot enter a cgroup without real-time
        // runtime: leave the class first.
        let was_rt = was_dl || matches!(m.node.mechanism, Mechanism::Fifo { .. });
        if (was_dl && !now_dl) || (was_rt && !rt) {
            sys::sched_setattr(tid, &sys::SchedAttr::other())
                .map_err(|e| fail("internal", format!("thread `{name}`: sched_setattr: {e}")))?;
        }
        let before = m.node.clone();
        // A new child of a `realrate`, or one that asks for more, takes
        // what it adds from its siblings' share.
        if let Mechanism::Deadline {
            runtime, period, ..
        } = node.mechanism
        {
            let held = match before.mechanism {
                Mechanism::Deadline {
                    runtime: r,
                    period: p,
                    ..
                } if !joins => ratio(r, p),
                _ => 0.0,
            };
            let more = ratio(runtime, period) - held;
            if more > 0.0 {
                self.adapt.make_room(sched, more, &mut self.threads);
            }
        }
        let result = apply::apply(tid, &node, self.cg.as_ref(), self.cs.as_ref());
        if result.is_err() {
            // The cgroup, cpuset or affinity may have changed before the
            // kernel refused: put back the mechanism it had.
            let _ = apply::apply(tid, &before, self.cg.as_ref(), self.cs.as_ref());
        }
        match result {
            Ok(()) => {}
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
                let held = super::run::others_bandwidth();
                return Err(fail(
                    "refused",
                    format!(
                        "the kernel's deadline admission refused thread `{name}` ({}): the machine's deadline tasks hold {:.1}% against the kernel's limit of {:.1}%; nothing was changed",
                        node.mechanism,
                        held * 100.0,
                        self.plan.admission.kernel_limit * 100.0
                    ),
                ));
            }
            Err(e) => {
                return Err(fail(
                    "internal",
                    format!("thread `{name}`: {}: {e}", node.mechanism),
                ))
            }
        }
        if let Some(m) = self.threads.get_mut(&tid) {
            m.node = node;
            m.scheduler = sched.to_string();
            m.params = params;
        }
        Ok(())
    }

    fn attach(&mut self, req: &Value, peer: &Peer) -> Result<Value, Fail> {
        let (id, whole) = match (
            req.get("pid").and_then(Value::as_i64),
            req.get("tid").and_then(Value::as_i64),
        ) {
            (Some(p), _) => (p, true),
            (None, Some(t)) => (t, false),
            _ => {
                return Err(fail(
                    "bad-request",
                    "`pid` or `tid` (an integer) is required",
                ))
            }
        };
        let id = i32::try_from(id)
            .ok()
            .filter(|&p| p > 0)
            .ok_or_else(|| fail("bad-request", "bad pid"))?;
        if id == sys::getpid() || self.wd.as_ref().is_some_and(|w| w.pid() == id) {
            return Err(fail(
                "refused",
                "the daemon and its watchdog cannot be managed",
            ));
        }
        let tids = if whole {
            enforce::proc_threads(id).map_err(|_| fail("not-found", format!("no process {id}")))?
        } else {
            vec![id]
        };
        for &t in &tids {
            self.may_touch(peer, t)?;
        }
        if !peer.privileged {
            let held = self
                .threads
                .iter()
                .filter(|(&t, m)| m.exited_ns.is_none() && enforce::proc_uid(t) == Some(peer.uid))
                .count();
            if held + tids.len() > authz::MAX_USER_THREADS {
                return Err(fail(
                    "refused",
                    format!(
                        "uid {} would manage {} threads; an unprivileged user may have at most {}",
                        peer.uid,
                        held + tids.len(),
                        authz::MAX_USER_THREADS
                    ),
                ));
            }
        }
        let sched = match req.get("scheduler").and_then(Value::as_str) {
            Some(s) => s.to_string(),
            None => self
                .h
                .default_scheduler
                .clone()
                .ok_or_else(|| fail("bad-request", "no default scheduler: give `scheduler`"))?,
        };
        let params = params_from_json(req.get("params"))?;
        if !params.is_empty() || self.h.default_scheduler.as_deref() != Some(sched.as_str()) {
            if !peer.privileged && self.h.rm.enabled {
                return Err(fail("unauthorized", "`attach` to a scheduler other than the default needs root or the control group: with a resource manager ([rm] in the hierarchy file) other users ask with `request`, which `--enforce user` serves"));
            }
            self.authorize(peer, &params, &format!("`attach` to `{sched}`"), 0)?;
        }
        let comm = enforce::proc_comm(id).unwrap_or_else(|| format!("pid{id}"));
        let base = match req.get("name") {
            None | Some(Value::Null) => {
                let comm: String = comm.chars().filter(|c| !c.is_control()).collect();
                if self.threads.values().any(|m| m.name == comm) {
                    format!("{comm}-{id}")
                } else {
                    comm
                }
            }
            Some(Value::String(n)) => {
                authz::check_name(n).map_err(|e| fail("bad-request", e))?;
                if self.threads.values().any(|m| &m.name == n) {
                    return Err(fail(
                        "refused",
                        format!(
                            "a managed thread is already named {n:?}; names are unique per daemon"
                        ),
                    ));
                }
                n.clone()
            }
            Some(_) => return Err(fail("bad-request", "`name` must be a string")),
        };
        // Checked on its first thread before anything changes: every thread
        // of a program gets its mechanism, except that only the first is a
        // deadline server (as for launched programs).
        let node = self
            .target(tids[0], &sched, &params)
            .map_err(|e| fail("refused", e))?;
        for &t in &tids {
            let o =
                Original::capture(t).map_err(|e| fail("not-found", format!("thread {t}: {e}")))?;
            if o.attr.policy == apply::SCHED_DEADLINE {
                return Err(fail("refused", format!("thread {t} uses SCHED_DEADLINE; hsched does not take over deadline threads")));
            }
        }
        let tgid = if whole {
            id
        } else {
            Original::capture(id).map_or(id, |o| o.tgid)
        };
        let g = self.add_program(base.clone(), tgid, node.clone(), &sched);
        self.programs[g].whole = whole;
        let mut attached = Vec::new();
        for (k, &t) in tids.iter().enumerate() {
            if self.threads.contains_key(&t) {
                continue;
            }
            let name = if k == 0 {
                base.clone()
            } else {
                format!("{base}/{t}")
            };
            let mut n = node.clone();
            if k > 0 && matches!(n.mechanism, Mechanism::Deadline { .. }) {
                n = self.fair_fallback();
            }
            n.node = Node::Thread(name.clone());
            self.record(t, name, g)
                .map_err(|e| fail("refused", e.to_string()))?;
            let (s, p) = if k == 0 {
                (sched.clone(), params.clone())
            } else {
                (String::new(), Params::new())
            };
            let s = if s.is_empty() {
                self.programs[g].scheduler.clone()
            } else {
                s
            };
            if let Err(f) = self.place(t, n, &s, p) {
                self.release(t);
                return Err(f);
            }
            if let Some(m) = self.threads.get_mut(&t) {
                m.comm = enforce::proc_comm(t).unwrap_or_default();
            }
            attached.push(t);
        }
        Ok(json!({"attached": attached}))
    }

    fn detach(&mut self, req: &Value, peer: &Peer) -> Result<Value, Fail> {
        let pid = req
            .get("pid")
            .or_else(|| req.get("tid"))
            .and_then(Value::as_i64)
            .and_then(|p| i32::try_from(p).ok())
            .ok_or_else(|| fail("bad-request", "`pid` or `tid` (an integer) is required"))?;
        let tids: Vec<i32> = self
            .threads
            .iter()
            .filter(|(&t, m)| m.exited_ns.is_none() && (t == pid || m.orig.tgid == pid))
            .map(|(&t, _)| t)
            .collect();
        if tids.is_empty() {
            return Err(fail(
                "not-found",
                format!("no managed thread or process {pid}"),
            ));
        }
        for &t in &tids {
            self.may_touch(peer, t)?;
        }
        for &t in &tids {
            self.release(t);
        }
        Ok(json!({"released": tids}))
    }

    /// The mapped tree: each scheduler with its mechanism and the CPU its
    /// threads used, each thread with its mechanism, the kernel's view of
    /// its parameters and its CPU time.
    pub(super) fn show(&self) -> Value {
        let now = sys::now_ns();
        let instances: Vec<Value> = self
            .h
            .schedulers
            .iter()
            .map(|s| {
                let mech = self.plan.node(&Node::Scheduler(s.name.clone())).map(|n| n.mechanism.to_string());
                let supply: u64 = self
                    .threads
                    .iter()
                    .filter(|(_, m)| super::run::below(self.h, &s.name, &m.scheduler))
                    .map(|(&t, m)| if m.exited_ns.is_none() { enforce::proc_cpu_ns(t).unwrap_or(m.cpu_ns) } else { m.cpu_ns })
                    .sum();
                let parents: Vec<Value> = s.parents.iter().map(|p| json!({"parent": p.name, "state": "", "params": params_to_json(&p.params)})).collect();
                json!({"name": s.name, "policy": s.policy, "describe": mech.unwrap_or_default(), "supply_ns": supply,
                    "parents": parents, "children": self.threads.values().filter(|m| m.exited_ns.is_none() && m.scheduler == s.name).count()})
            })
            .collect();
        let threads: Vec<Value> = self
            .threads
            .iter()
            .filter(|(_, m)| m.exited_ns.is_none())
            .map(|(&t, m)| {
                let attr = sys::sched_getattr(t).ok();
                let state = enforce::proc_state(t);
                let probe = self.programs[m.group].spec.filter(|&i| self.h.threads[i].exec.is_none()).and_then(|i| self.slots.get(i));
                let cpu_ns = enforce::proc_cpu_ns(t).unwrap_or(m.cpu_ns);
                json!({"name": m.name, "tid": t, "pid": m.orig.tgid, "scheduler": m.scheduler, "params": params_to_json(&m.params),
                    "mechanism": m.node.mechanism.to_string(), "policy": attr.map(|a| a.policy),
                    "runtime_ns": attr.filter(|a| a.policy == apply::SCHED_DEADLINE).map(|a| a.runtime),
                    "period_ns": attr.filter(|a| a.policy == apply::SCHED_DEADLINE).map(|a| a.period),
                    "runnable": state == Some('R'), "cpu": Value::Null, "frozen": false,
                    "received_ns": cpu_ns, "cpu_ns": cpu_ns, "deadline_ns": Value::Null,
                    "jobs": probe.map(|p| p.jobs.load(Ordering::Relaxed)), "deadline_misses": probe.map(|p| p.misses_at(now)),
                    "reservation_begun": m.saved.is_some()})
            })
            .collect();
        json!({
            "enforce": "kernel",
            "now_ns": now.saturating_sub(self.epoch),
            "cpus": self.cpus,
            "default": self.h.default_scheduler,
            "instances": instances,
            "threads": threads,
            "stats": {"operations": self.stats.operations, "rule_moves": self.stats.rule_moves, "creates": self.stats.creates, "exits": self.stats.exits},
        })
    }
}
