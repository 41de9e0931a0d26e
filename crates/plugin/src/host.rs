//! The functions hsched offers a plug-in (wasm import module `hsched`,
//! docs/plugin-abi.md, "Host functions"), over the context of the hook
//! that is running.
//!
//! Reads go to the hook's [`Ctx`]; actions are collected in [`Host::acts`]
//! and reach the context only once the hook has returned and they have
//! passed the checks of `crate::verify`, so a plug-in that faults half-way
//! through a hook leaves nothing behind. A host function given garbage (a
//! VP that is not the instance's, a pointer outside its memory) records a
//! fault and returns a harmless value; the hook's result is then dropped.

use crate::rt::{Caller, Extern, Linker, StoreLimits};
use hsched_core::{CpuId, Ctx, Instant, Msg, ParamValue, Params, RevokeReason, VpId, VpState};

/// An action a hook asked for.
#[derive(Clone, Debug)]
pub(crate) enum Act {
    Grant(VpId, CpuId),
    Revoke(VpId, RevokeReason),
    Request(VpId),
    Release(VpId),
    Demand(usize),
    Timer(Instant),
    Send(VpId, Msg),
}

/// What a VP id is to this instance.
pub(crate) const CHILD: u8 = 1;
/// See [`CHILD`].
pub(crate) const PARENT: u8 = 2;

/// The store data of one plug-in instance.
pub(crate) struct Host {
    /// The running hook's context; null between hooks.
    ctx: *mut Ctx<'static>,
    /// The current parameters (instance, child or message), if any.
    pub(crate) params: Option<Params>,
    /// Whether the running hook may queue actions.
    pub(crate) may_act: bool,
    pub(crate) acts: Vec<Act>,
    out: Params,
    pub(crate) error: Option<String>,
    pub(crate) admission: Option<(f64, f64)>,
    /// The first garbage a host function was given in this hook.
    pub(crate) fault: Option<String>,
    /// [`CHILD`] or [`PARENT`] per VP id.
    pub(crate) known: Vec<u8>,
    pub(crate) msg_kind: String,
    pub(crate) limits: StoreLimits,
}

// SAFETY: `ctx` is only non-null while a hook runs on the thread that
// holds the policy (`Host::enter` .. `Host::leave`), never shared.
unsafe impl Send for Host {}

impl Host {
    pub(crate) fn new(limits: StoreLimits) -> Host {
        Host {
            ctx: std::ptr::null_mut(),
            params: None,
            may_act: false,
            acts: Vec::new(),
            out: Params::new(),
            error: None,
            admission: None,
            fault: None,
            known: Vec::new(),
            msg_kind: String::new(),
            limits,
        }
    }

    /// Makes `ctx` the context of the hook about to run.
    pub(crate) fn enter(&mut self, ctx: &mut Ctx<'_>, may_act: bool) {
        self.ctx = (ctx as *mut Ctx<'_>).cast();
        self.may_act = may_act;
        self.acts.clear();
        self.error = None;
        self.admission = None;
        self.fault = None;
    }

    /// Ends the hook: the context is no longer reachable.
    pub(crate) fn leave(&mut self) {
        self.ctx = std::ptr::null_mut();
        self.out = Params::new();
    }

    fn ctx(&self) -> Option<&Ctx<'static>> {
        // SAFETY: non-null only between `enter` and `leave`, while the
        // `&mut Ctx` it came from is borrowed by the hook call.
        unsafe { self.ctx.as_ref() }
    }

    fn ctx_mut(&mut self) -> Option<&mut Ctx<'static>> {
        // SAFETY: as in `ctx`.
        unsafe { self.ctx.as_mut() }
    }

    fn garbage(&mut self, what: String) {
        if self.fault.is_none() {
            self.fault = Some(what);
        }
    }

    /// `vp` if it is one of this instance's VPs of kind `want` (a mask of
    /// [`CHILD`] and [`PARENT`]).
    fn vp(&mut self, fun: &str, vp: u32, want: u8) -> Option<VpId> {
        let k = self.known.get(vp as usize).copied().unwrap_or(0);
        if k & want != 0 && !self.ctx.is_null() {
            return Some(VpId(vp));
        }
        let whose = match want {
            CHILD => "a child VP",
            PARENT => "a parent VP",
            _ => "a VP",
        };
        self.garbage(format!(
            "{fun}({vp}): vp{vp} is not {whose} of this instance"
        ));
        None
    }

    fn act(&mut self, fun: &str, a: Act) {
        if self.may_act {
            self.acts.push(a);
        } else {
            self.garbage(format!("{fun} called from a hook that may not act"));
        }
    }
}

/// Reads `len` bytes at `ptr` of the caller's memory as UTF-8.
fn text(caller: &mut Caller<'_, Host>, fun: &str, ptr: u32, len: u32) -> Option<String> {
    let mem = match caller.get_export("memory") {
        Some(Extern::Memory(m)) => m,
        _ => {
            caller
                .data_mut()
                .garbage(format!("{fun}: the module exports no memory"));
            return None;
        }
    };
    let (data, host) = mem.data_and_store_mut(&mut *caller);
    let bytes = data.get(ptr as usize..(ptr as usize).saturating_add(len as usize));
    match bytes.map(std::str::from_utf8) {
        Some(Ok(s)) => Some(s.to_string()),
        Some(Err(_)) => {
            host.garbage(format!("{fun}: the string at {ptr} is not UTF-8"));
            None
        }
        None => {
            host.garbage(format!("{fun}: {len} bytes at {ptr} lie outside memory"));
            None
        }
    }
}

/// Writes `bytes` at `ptr` of the caller's memory.
fn write(caller: &mut Caller<'_, Host>, fun: &str, ptr: u32, bytes: &[u8]) -> bool {
    let Some(Extern::Memory(mem)) = caller.get_export("memory") else {
        caller
            .data_mut()
            .garbage(format!("{fun}: the module exports no memory"));
        return false;
    };
    let (data, host) = mem.data_and_store_mut(&mut *caller);
    match data.get_mut(ptr as usize..(ptr as usize).saturating_add(bytes.len())) {
        Some(d) => {
            d.copy_from_slice(bytes);
            true
        }
        None => {
            host.garbage(format!(
                "{fun}: {} bytes at {ptr} lie outside memory",
                bytes.len()
            ));
            false
        }
    }
}

fn state_code(s: VpState) -> i32 {
    match s {
        VpState::Waiting => 0,
        VpState::Ready => 1,
        VpState::Running(_) => 2,
    }
}

fn reason(code: i32) -> Option<RevokeReason> {
    Some(match code {
        0 => RevokeReason::Preempted,
        1 => RevokeReason::BudgetExhausted,
        2 => RevokeReason::Infrastructure,
        _ => return None,
    })
}

const NONE: u32 = u32::MAX;

/// A typed read of the current parameters (`vp` = `None`) or a child's.
#[derive(Clone, Copy)]
enum Kind {
    I64,
    F64,
    Dur,
    Bool,
}

/// Looks `key` up and stores it at `out`; an `hs_param_result`.
fn read_param(
    caller: &mut Caller<'_, Host>,
    fun: &str,
    vp: Option<u32>,
    key: (u32, u32),
    out: u32,
    kind: Kind,
) -> i32 {
    let Some(key) = text(caller, fun, key.0, key.1) else {
        return -1;
    };
    let host = caller.data_mut();
    let params = match vp {
        None => host.params.as_ref(),
        Some(v) => match host.vp(fun, v, CHILD) {
            Some(vp) => host.ctx().map(|c| c.vp_params(vp)),
            None => return -1,
        },
    };
    let Some(params) = params else {
        return 0;
    };
    let bytes: Result<Option<[u8; 8]>, _> = match kind {
        Kind::I64 => params.i64(&key).map(|v| v.map(i64::to_le_bytes)),
        Kind::F64 => params.f64(&key).map(|v| v.map(f64::to_le_bytes)),
        Kind::Dur => params.duration(&key).map(|v| v.map(|d| d.0.to_le_bytes())),
        Kind::Bool => params
            .bool(&key)
            .map(|v| v.map(|b| u64::from(b).to_le_bytes())),
    };
    match bytes {
        Err(_) => -1,
        Ok(None) => 0,
        Ok(Some(b)) => {
            let n = if matches!(kind, Kind::Bool) { 4 } else { 8 };
            if write(caller, fun, out, &b[..n]) {
                1
            } else {
                -1
            }
        }
    }
}

/// Defines every import of module `hsched`.
///
/// # Errors
/// Only if the runtime refuses a definition (a bug here).
pub(crate) fn link(linker: &mut Linker<Host>) -> Result<(), crate::rt::Error> {
    const M: &str = "hsched";
    linker.func_wrap(M, "now", |c: Caller<'_, Host>| -> u64 {
        c.data().ctx().map_or(0, |x| x.now().0)
    })?;
    linker.func_wrap(M, "cpu_count", |c: Caller<'_, Host>| -> u32 {
        c.data().ctx().map_or(0, |x| x.cpu_count() as u32)
    })?;
    linker.func_wrap(M, "parent_vp_count", |c: Caller<'_, Host>| -> u32 {
        c.data().ctx().map_or(0, |x| x.parent_vps().len() as u32)
    })?;
    linker.func_wrap(M, "parent_vp", |c: Caller<'_, Host>, i: u32| -> u32 {
        c.data()
            .ctx()
            .and_then(|x| x.parent_vps().get(i as usize).map(|v| v.0))
            .unwrap_or(NONE)
    })?;
    linker.func_wrap(M, "child_vp_count", |c: Caller<'_, Host>| -> u32 {
        c.data().ctx().map_or(0, |x| x.child_vps().len() as u32)
    })?;
    linker.func_wrap(M, "child_vp", |c: Caller<'_, Host>, i: u32| -> u32 {
        c.data()
            .ctx()
            .and_then(|x| x.child_vps().get(i as usize).map(|v| v.0))
            .unwrap_or(NONE)
    })?;
    linker.func_wrap(M, "notifications_waiting", |c: Caller<'_, Host>| -> u32 {
        c.data()
            .ctx()
            .map_or(0, |x| x.notifications_waiting() as u32)
    })?;
    linker.func_wrap(M, "vp_state", |mut c: Caller<'_, Host>, vp: u32| -> i32 {
        let h = c.data_mut();
        match h.vp("vp_state", vp, CHILD | PARENT) {
            Some(v) => h.ctx().map_or(0, |x| state_code(x.vp_state(v))),
            None => 0,
        }
    })?;
    linker.func_wrap(M, "vp_cpu", |mut c: Caller<'_, Host>, vp: u32| -> u32 {
        let h = c.data_mut();
        match h.vp("vp_cpu", vp, CHILD | PARENT) {
            Some(v) => h.ctx().and_then(|x| x.vp_cpu(v)).map_or(NONE, |c| c.0),
            None => NONE,
        }
    })?;
    linker.func_wrap(
        M,
        "vp_last_cpu",
        |mut c: Caller<'_, Host>, vp: u32| -> u32 {
            let h = c.data_mut();
            match h.vp("vp_last_cpu", vp, CHILD | PARENT) {
                Some(v) => h.ctx().and_then(|x| x.vp_last_cpu(v)).map_or(NONE, |c| c.0),
                None => NONE,
            }
        },
    )?;
    linker.func_wrap(
        M,
        "vp_received",
        |mut c: Caller<'_, Host>, vp: u32| -> u64 {
            let h = c.data_mut();
            match h.vp("vp_received", vp, CHILD | PARENT) {
                Some(v) => h.ctx().map_or(0, |x| x.vp_received(v).0),
                None => 0,
            }
        },
    )?;
    linker.func_wrap(
        M,
        "vp_child_kind",
        |mut c: Caller<'_, Host>, vp: u32| -> i32 {
            let h = c.data_mut();
            match h.vp("vp_child_kind", vp, CHILD | PARENT) {
                Some(v) => h.ctx().map_or(0, |x| match x.vp_child(v) {
                    hsched_core::Node::Top => 0,
                    hsched_core::Node::Instance(_) => 1,
                    hsched_core::Node::Thread(_) => 2,
                }),
                None => 0,
            }
        },
    )?;
    linker.func_wrap(
        M,
        "vp_child_id",
        |mut c: Caller<'_, Host>, vp: u32| -> u32 {
            let h = c.data_mut();
            match h.vp("vp_child_id", vp, CHILD | PARENT) {
                Some(v) => h.ctx().map_or(NONE, |x| match x.vp_child(v) {
                    hsched_core::Node::Top => NONE,
                    hsched_core::Node::Instance(i) => i.0,
                    hsched_core::Node::Thread(t) => t.0,
                }),
                None => NONE,
            }
        },
    )?;
    linker.func_wrap(M, "child_tag", |mut c: Caller<'_, Host>, vp: u32| -> u32 {
        let h = c.data_mut();
        match h.vp("child_tag", vp, CHILD) {
            Some(v) => h.ctx().map_or(NONE, |x| x.child_tag(v)),
            None => NONE,
        }
    })?;
    linker.func_wrap(
        M,
        "set_child_tag",
        |mut c: Caller<'_, Host>, vp: u32, tag: u32| {
            let h = c.data_mut();
            if let Some(v) = h.vp("set_child_tag", vp, CHILD) {
                if let Some(x) = h.ctx_mut() {
                    x.set_child_tag(v, tag);
                }
            }
        },
    )?;
    linker.func_wrap(M, "parent_tag", |mut c: Caller<'_, Host>, vp: u32| -> u32 {
        let h = c.data_mut();
        match h.vp("parent_tag", vp, PARENT) {
            Some(v) => h.ctx().map_or(NONE, |x| x.parent_tag(v)),
            None => NONE,
        }
    })?;
    linker.func_wrap(
        M,
        "set_parent_tag",
        |mut c: Caller<'_, Host>, vp: u32, tag: u32| {
            let h = c.data_mut();
            if let Some(v) = h.vp("set_parent_tag", vp, PARENT) {
                if let Some(x) = h.ctx_mut() {
                    x.set_parent_tag(v, tag);
                }
            }
        },
    )?;
    linker.func_wrap(M, "grant", |mut c: Caller<'_, Host>, vp: u32, cpu: u32| {
        let h = c.data_mut();
        let ncpu = h.ctx().map_or(0, |x| x.cpu_count());
        if let Some(v) = h.vp("grant", vp, CHILD) {
            if (cpu as usize) < ncpu {
                h.act("grant", Act::Grant(v, CpuId(cpu)));
            } else {
                h.garbage(format!("grant({vp}, {cpu}): there is no cpu{cpu}"));
            }
        }
    })?;
    linker.func_wrap(M, "revoke", |mut c: Caller<'_, Host>, vp: u32, why: i32| {
        let h = c.data_mut();
        if let Some(v) = h.vp("revoke", vp, CHILD) {
            match reason(why) {
                Some(r) => h.act("revoke", Act::Revoke(v, r)),
                None => h.garbage(format!("revoke({vp}, {why}): no revoke reason {why}")),
            }
        }
    })?;
    linker.func_wrap(M, "request", |mut c: Caller<'_, Host>, vp: u32| {
        let h = c.data_mut();
        if let Some(v) = h.vp("request", vp, PARENT) {
            h.act("request", Act::Request(v));
        }
    })?;
    linker.func_wrap(M, "release", |mut c: Caller<'_, Host>, vp: u32| {
        let h = c.data_mut();
        if let Some(v) = h.vp("release", vp, PARENT) {
            h.act("release", Act::Release(v));
        }
    })?;
    linker.func_wrap(M, "set_parent_demand", |mut c: Caller<'_, Host>, n: u32| {
        c.data_mut()
            .act("set_parent_demand", Act::Demand(n as usize));
    })?;
    linker.func_wrap(M, "set_timer", |mut c: Caller<'_, Host>, at: u64| {
        c.data_mut().act("set_timer", Act::Timer(Instant(at)));
    })?;
    linker.func_wrap(M, "cancel_timer", |mut c: Caller<'_, Host>| {
        c.data_mut().act("cancel_timer", Act::Timer(Instant::NEVER));
    })?;
    linker.func_wrap(M, "timer", |c: Caller<'_, Host>| -> u64 {
        let h = c.data();
        // The timer as this hook leaves it.
        let queued = h.acts.iter().rev().find_map(|a| match a {
            Act::Timer(t) => Some(*t),
            _ => None,
        });
        queued
            .or_else(|| h.ctx().map(|x| x.timer().unwrap_or(Instant::NEVER)))
            .unwrap_or(Instant::NEVER)
            .0
    })?;
    linker.func_wrap(
        M,
        "param_i64",
        |mut c: Caller<'_, Host>, k: u32, n: u32, out: u32| -> i32 {
            read_param(&mut c, "param_i64", None, (k, n), out, Kind::I64)
        },
    )?;
    linker.func_wrap(
        M,
        "param_f64",
        |mut c: Caller<'_, Host>, k: u32, n: u32, out: u32| -> i32 {
            read_param(&mut c, "param_f64", None, (k, n), out, Kind::F64)
        },
    )?;
    linker.func_wrap(
        M,
        "param_duration",
        |mut c: Caller<'_, Host>, k: u32, n: u32, out: u32| -> i32 {
            read_param(&mut c, "param_duration", None, (k, n), out, Kind::Dur)
        },
    )?;
    linker.func_wrap(
        M,
        "param_bool",
        |mut c: Caller<'_, Host>, k: u32, n: u32, out: u32| -> i32 {
            read_param(&mut c, "param_bool", None, (k, n), out, Kind::Bool)
        },
    )?;
    linker.func_wrap(
        M,
        "param_str",
        |mut c: Caller<'_, Host>, k: u32, n: u32, buf: u32, cap: u32, len: u32| -> i32 {
            let Some(key) = text(&mut c, "param_str", k, n) else {
                return -1;
            };
            let v = match c.data().params.as_ref().and_then(|p| p.get(&key)) {
                None => return 0,
                Some(ParamValue::Str(s)) => s.clone(),
                Some(_) => return -1,
            };
            let b = v.as_bytes();
            let part = &b[..b.len().min(cap as usize)];
            if write(&mut c, "param_str", buf, part)
                && write(&mut c, "param_str", len, &(b.len() as u32).to_le_bytes())
            {
                1
            } else {
                -1
            }
        },
    )?;
    linker.func_wrap(
        M,
        "vp_param_i64",
        |mut c: Caller<'_, Host>, vp: u32, k: u32, n: u32, out: u32| -> i32 {
            read_param(&mut c, "vp_param_i64", Some(vp), (k, n), out, Kind::I64)
        },
    )?;
    linker.func_wrap(
        M,
        "vp_param_f64",
        |mut c: Caller<'_, Host>, vp: u32, k: u32, n: u32, out: u32| -> i32 {
            read_param(&mut c, "vp_param_f64", Some(vp), (k, n), out, Kind::F64)
        },
    )?;
    linker.func_wrap(
        M,
        "vp_param_duration",
        |mut c: Caller<'_, Host>, vp: u32, k: u32, n: u32, out: u32| -> i32 {
            read_param(
                &mut c,
                "vp_param_duration",
                Some(vp),
                (k, n),
                out,
                Kind::Dur,
            )
        },
    )?;
    linker.func_wrap(
        M,
        "vp_param_bool",
        |mut c: Caller<'_, Host>, vp: u32, k: u32, n: u32, out: u32| -> i32 {
            read_param(&mut c, "vp_param_bool", Some(vp), (k, n), out, Kind::Bool)
        },
    )?;
    fn put(c: &mut Caller<'_, Host>, fun: &str, k: u32, n: u32, v: ParamValue) {
        if let Some(key) = text(c, fun, k, n) {
            c.data_mut().out.insert(&key, v);
        }
    }
    linker.func_wrap(
        M,
        "out_i64",
        |mut c: Caller<'_, Host>, k: u32, n: u32, v: i64| {
            put(&mut c, "out_i64", k, n, ParamValue::Int(v));
        },
    )?;
    linker.func_wrap(
        M,
        "out_f64",
        |mut c: Caller<'_, Host>, k: u32, n: u32, v: f64| {
            // A NaN or infinity would reach the parent policy as a
            // parameter no hierarchy file can write.
            if v.is_finite() {
                put(&mut c, "out_f64", k, n, ParamValue::Float(v));
            } else {
                c.data_mut()
                    .garbage(format!("out_f64: {v} is not a finite number"));
            }
        },
    )?;
    linker.func_wrap(
        M,
        "out_duration",
        |mut c: Caller<'_, Host>, k: u32, n: u32, v: u64| {
            let d = hsched_core::Duration(v);
            put(
                &mut c,
                "out_duration",
                k,
                n,
                ParamValue::Str(format!("{}ns", d.0)),
            );
        },
    )?;
    linker.func_wrap(
        M,
        "out_bool",
        |mut c: Caller<'_, Host>, k: u32, n: u32, v: i32| {
            put(&mut c, "out_bool", k, n, ParamValue::Bool(v != 0));
        },
    )?;
    linker.func_wrap(
        M,
        "out_str",
        |mut c: Caller<'_, Host>, k: u32, n: u32, v: u32, vn: u32| {
            if let Some(s) = text(&mut c, "out_str", v, vn) {
                put(&mut c, "out_str", k, n, ParamValue::Str(s));
            }
        },
    )?;
    linker.func_wrap(
        M,
        "send_msg",
        |mut c: Caller<'_, Host>, vp: u32, k: u32, n: u32| {
            let kind = if n == 0 {
                Some(String::new())
            } else {
                text(&mut c, "send_msg", k, n)
            };
            let h = c.data_mut();
            let params = std::mem::take(&mut h.out);
            if let (Some(kind), Some(v)) = (kind, h.vp("send_msg", vp, PARENT)) {
                let msg = if kind.is_empty() {
                    Msg::SetParams(params)
                } else {
                    Msg::App { kind, params }
                };
                h.act("send_msg", Act::Send(v, msg));
            }
        },
    )?;
    linker.func_wrap(
        M,
        "msg_kind",
        |mut c: Caller<'_, Host>, buf: u32, cap: u32| -> u32 {
            let kind = c.data().msg_kind.clone();
            let b = kind.as_bytes();
            write(&mut c, "msg_kind", buf, &b[..b.len().min(cap as usize)]);
            b.len() as u32
        },
    )?;
    linker.func_wrap(M, "error", |mut c: Caller<'_, Host>, p: u32, n: u32| {
        if let Some(s) = text(&mut c, "error", p, n) {
            c.data_mut().error = Some(s);
        }
    })?;
    linker.func_wrap(
        M,
        "admission",
        |mut c: Caller<'_, Host>, load: f64, cap: f64| {
            c.data_mut().admission = Some((load, cap));
        },
    )?;
    linker.func_wrap(M, "note", |mut c: Caller<'_, Host>, p: u32, n: u32| {
        if c.data().ctx().is_some_and(|x| x.tracing()) {
            if let Some(s) = text(&mut c, "note", p, n) {
                if let Some(x) = c.data_mut().ctx_mut() {
                    x.event(hsched_core::PolicyEvent::Note(s));
                }
            }
        }
    })?;
    linker.func_wrap(M, "tracing", |c: Caller<'_, Host>| -> i32 {
        i32::from(c.data().ctx().is_some_and(|x| x.tracing()))
    })?;
    Ok(())
}

/// The names of every import [`link`] defines, for load-time messages.
pub(crate) const IMPORTS: &[&str] = &[
    "now",
    "cpu_count",
    "parent_vp_count",
    "parent_vp",
    "child_vp_count",
    "child_vp",
    "notifications_waiting",
    "vp_state",
    "vp_cpu",
    "vp_last_cpu",
    "vp_received",
    "vp_child_kind",
    "vp_child_id",
    "child_tag",
    "set_child_tag",
    "parent_tag",
    "set_parent_tag",
    "grant",
    "revoke",
    "request",
    "release",
    "set_parent_demand",
    "set_timer",
    "cancel_timer",
    "timer",
    "param_i64",
    "param_f64",
    "param_duration",
    "param_bool",
    "param_str",
    "vp_param_i64",
    "vp_param_f64",
    "vp_param_duration",
    "vp_param_bool",
    "out_i64",
    "out_f64",
    "out_duration",
    "out_bool",
    "out_str",
    "send_msg",
    "msg_kind",
    "error",
    "admission",
    "note",
    "tracing",
];
