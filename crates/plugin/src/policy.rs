//! A plug-in instance as an `hsched_core::Policy`: each hook calls the
//! module's export under a fuel budget, checks the actions it asked for
//! and applies them; a fault unloads the instance (docs/plugin-abi.md,
//! "Sandbox and fallback").

use crate::host::{Act, Host, CHILD, PARENT};
use crate::load::{instantiate, Module};
use crate::rt::{Instance, Store, TypedFunc};
use crate::{verify, Fault, FaultLog};
use hsched_core::{
    CpuId, Ctx, Instant, Msg, ParamError, Params, Policy, PolicyError, RevokeReason, VpId,
};
use std::sync::Arc;

/// The module's hooks; `None` for an optional one it does not define.
pub(crate) struct Funcs {
    create: Option<TypedFunc<(), i32>>,
    init: Option<TypedFunc<(), ()>>,
    deinit: Option<TypedFunc<(), ()>>,
    register_vp: TypedFunc<u32, i32>,
    unregister_vp: TypedFunc<u32, ()>,
    request: TypedFunc<u32, ()>,
    release: TypedFunc<u32, ()>,
    grant: TypedFunc<(u32, u32), ()>,
    revoke: TypedFunc<(u32, i32), ()>,
    msg: Option<TypedFunc<(u32, i32), i32>>,
    timer: Option<TypedFunc<(), ()>>,
    describe: Option<TypedFunc<(), u32>>,
}

impl Funcs {
    /// The hooks of `inst`, each with the signature the ABI gives it.
    pub(crate) fn get(store: &mut Store<Host>, inst: &Instance) -> Result<Funcs, String> {
        fn need<P: crate::rt::WasmParams, R: crate::rt::WasmResults>(
            store: &mut Store<Host>,
            inst: &Instance,
            name: &str,
        ) -> Result<TypedFunc<P, R>, String> {
            inst.get_typed_func::<P, R>(&mut *store, name)
                .map_err(|e| format!("export `{name}` has the wrong signature ({e}); sdk/include/hsched_policy.h declares it"))
        }
        fn opt<P: crate::rt::WasmParams, R: crate::rt::WasmResults>(
            store: &mut Store<Host>,
            inst: &Instance,
            name: &str,
        ) -> Result<Option<TypedFunc<P, R>>, String> {
            if inst.get_export(&mut *store, name).is_none() {
                return Ok(None);
            }
            need(store, inst, name).map(Some)
        }
        // Signatures of hooks this host does not call (docs/plugin-abi.md).
        opt::<(), i32>(store, inst, "hs_check_invariants")?;
        opt::<u32, u64>(store, inst, "hs_child_deadline")?;
        Ok(Funcs {
            create: opt(store, inst, "hs_create")?,
            init: opt(store, inst, "hs_init")?,
            deinit: opt(store, inst, "hs_deinit")?,
            register_vp: need(store, inst, "hs_register_vp")?,
            unregister_vp: need(store, inst, "hs_unregister_vp")?,
            request: need(store, inst, "hs_request")?,
            release: need(store, inst, "hs_release")?,
            grant: need(store, inst, "hs_grant")?,
            revoke: need(store, inst, "hs_revoke")?,
            msg: opt(store, inst, "hs_msg")?,
            timer: opt(store, inst, "hs_timer")?,
            describe: opt(store, inst, "hs_describe")?,
        })
    }
}

/// The live part of an instance; dropped when it faults.
struct Live {
    store: Store<Host>,
    f: Funcs,
}

/// One scheduler instance run by a plug-in.
pub struct WasmPolicy {
    module: Arc<Module>,
    name: &'static str,
    live: Option<Live>,
    /// The parent VPs last marked in `known`.
    parents: Vec<VpId>,
    faults: FaultLog,
    describe: String,
    /// The instant of the last `hs_timer` and how many came at it in a
    /// row, to unload a plug-in whose timer keeps time from advancing.
    timer_at: Instant,
    timer_repeats: u32,
}

/// Most `hs_timer` calls at one instant before the plug-in is unloaded:
/// far above what a policy needs (one per child whose deadline falls
/// there), far below the HSI's own bound, which stops the run.
const TIMER_REPEATS: u32 = 10_000;

impl std::fmt::Debug for WasmPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WasmPolicy")
            .field("plugin", &self.module.path)
            .field("live", &self.live.is_some())
            .finish()
    }
}

/// What a refused hook returned, as a `PolicyError`.
fn refusal(code: i32, host: &mut Host) -> Result<PolicyError, String> {
    let why = host
        .error
        .take()
        .unwrap_or_else(|| "no reason given".into());
    Ok(match code {
        1 => PolicyError::Refused(why),
        2 => PolicyError::Unsupported(why),
        3 => PolicyError::Param(ParamError {
            key: why
                .split_whitespace()
                .next()
                .unwrap_or("parameter")
                .to_string(),
            message: why,
        }),
        4 => {
            let (load, cap) = host.admission.take().unwrap_or((f64::NAN, f64::NAN));
            PolicyError::AdmissionRefused {
                load,
                cap,
                held: 0.0,
            }
        }
        c => return Err(format!("returned {c}, which is not an hs_result")),
    })
}

impl WasmPolicy {
    /// A new instance of `module` with instance parameters `params`
    /// (already checked against the descriptor).
    ///
    /// # Errors
    /// The module cannot be instantiated, or `hs_create` refuses the
    /// parameters (or faults).
    pub fn new(
        module: Arc<Module>,
        name: &'static str,
        params: &Params,
        faults: FaultLog,
    ) -> Result<WasmPolicy, PolicyError> {
        let (mut store, inst) = instantiate(&module).map_err(PolicyError::Refused)?;
        let f = Funcs::get(&mut store, &inst).map_err(PolicyError::Refused)?;
        if let Some(create) = &f.create {
            store.data_mut().params = Some(params.clone());
            store
                .set_fuel(module.limits.fuel_per_hook)
                .map_err(|e| PolicyError::Refused(e.to_string()))?;
            let code = create.call(&mut store, ()).map_err(|e| {
                PolicyError::Refused(format!("the plug-in's hs_create failed: {e}"))
            })?;
            store.data_mut().params = None;
            if code != 0 {
                return Err(refusal(code, store.data_mut()).unwrap_or_else(PolicyError::Refused));
            }
        }
        let describe = match &f.describe {
            None => String::new(),
            Some(d) => {
                let ptr = d.call(&mut store, ()).unwrap_or(u32::MAX);
                crate::load::c_string(&mut store, &inst, ptr).unwrap_or_default()
            }
        };
        Ok(WasmPolicy {
            module,
            name,
            live: Some(Live { store, f }),
            parents: Vec::new(),
            faults,
            describe,
            timer_at: Instant::NEVER,
            timer_repeats: 0,
        })
    }

    /// Whether the plug-in still runs this instance (no fault yet).
    pub fn is_live(&self) -> bool {
        self.live.is_some()
    }

    /// Unloads the instance after a fault in `hook`.
    fn fail(&mut self, ctx: &mut Ctx<'_>, hook: &'static str, what: String) {
        self.live = None;
        let fault = Fault {
            scheduler: ctx.name().to_string(),
            plugin: self.module.path.clone(),
            at: ctx.now(),
            hook,
            what,
        };
        // The HSI drops this hook's actions and its caller unloads the
        // instance (Hsi::unload): children go to the default scheduler.
        ctx.fault(format!(
            "plug-in {} {hook} {}",
            self.module.path.display(),
            fault.what
        ));
        if let Ok(mut log) = self.faults.lock() {
            log.push(fault);
        }
    }

    /// Marks the instance's current parent VPs in the host's table.
    fn sync_parents(&mut self, ctx: &Ctx<'_>) {
        if self.parents.as_slice() == ctx.parent_vps() {
            return;
        }
        let Some(live) = self.live.as_mut() else {
            return;
        };
        let known = &mut live.store.data_mut().known;
        for p in self.parents.drain(..) {
            if let Some(k) = known.get_mut(p.index()) {
                *k &= !PARENT;
            }
        }
        for &p in ctx.parent_vps() {
            mark(known, p, PARENT, true);
            self.parents.push(p);
        }
    }

    /// Calls a hook; `Some(result)` when it returned without a fault (its
    /// actions not yet applied), `None` when the instance is (now) unloaded.
    fn call<P, R>(
        &mut self,
        ctx: &mut Ctx<'_>,
        hook: &'static str,
        pick: impl FnOnce(&Funcs) -> Option<TypedFunc<P, R>>,
        args: P,
        may_act: bool,
    ) -> Option<Option<R>>
    where
        P: crate::rt::WasmParams,
        R: crate::rt::WasmResults,
    {
        self.sync_parents(ctx);
        let fuel = self.module.limits.fuel_per_hook;
        let live = self.live.as_mut()?;
        let Some(func) = pick(&live.f) else {
            return Some(None);
        };
        live.store.data_mut().enter(ctx, may_act);
        let fueled = live.store.set_fuel(fuel);
        let out = fueled.map_err(|e| e.to_string()).and_then(|()| {
            func.call(&mut live.store, args).map_err(|e| {
                if live.store.get_fuel().unwrap_or(1) == 0 || e.to_string().contains("fuel") {
                    format!("ran out of fuel ({fuel} units for one hook): it may loop forever")
                } else {
                    format!("trapped: {e}")
                }
            })
        });
        let host = live.store.data_mut();
        host.leave();
        let garbage = host.fault.take();
        match (out, garbage) {
            (Ok(r), None) => Some(Some(r)),
            (_, Some(g)) | (Err(g), None) => {
                self.fail(ctx, hook, g);
                None
            }
        }
    }

    /// Applies the actions the last hook asked for, after checking them;
    /// false when they broke the protocol (the instance is then unloaded).
    fn apply(&mut self, ctx: &mut Ctx<'_>, hook: &'static str) -> bool {
        let Some(live) = self.live.as_mut() else {
            return false;
        };
        let acts = std::mem::take(&mut live.store.data_mut().acts);
        let checked = verify::check(ctx, &acts);
        live.store.data_mut().acts = acts;
        match checked {
            Ok(list) => {
                for a in list {
                    match a {
                        Act::Grant(v, c) => ctx.grant(v, c),
                        Act::Revoke(v, r) => ctx.revoke(v, r),
                        Act::Request(v) => ctx.request(v),
                        Act::Release(v) => ctx.release(v),
                        Act::Timer(t) => ctx.set_timer(t),
                        Act::Send(v, m) => ctx.send_msg(v, m),
                        Act::Demand(_) => {}
                    }
                }
                true
            }
            Err(e) => {
                self.fail(ctx, hook, format!("broke the protocol: {e}"));
                false
            }
        }
    }

    /// Runs an action hook; false when the instance is unloaded (the
    /// instance then stays inert until the HSI's caller unloads it).
    fn act<P, R>(
        &mut self,
        ctx: &mut Ctx<'_>,
        hook: &'static str,
        pick: impl FnOnce(&Funcs) -> Option<TypedFunc<P, R>>,
        args: P,
    ) -> bool
    where
        P: crate::rt::WasmParams,
        R: crate::rt::WasmResults,
    {
        self.call(ctx, hook, pick, args, true).is_some() && self.apply(ctx, hook)
    }
}

fn mark(known: &mut Vec<u8>, vp: VpId, bit: u8, on: bool) {
    if known.len() <= vp.index() {
        known.resize(vp.index() + 1, 0);
    }
    if on {
        known[vp.index()] |= bit;
    } else {
        known[vp.index()] &= !bit;
    }
}

// wasmi's typed functions are `Copy`, wasmtime's only `Clone`: the hooks
// clone them so that both runtimes build.
#[allow(clippy::clone_on_copy)]
impl Policy for WasmPolicy {
    fn policy_name(&self) -> &'static str {
        self.name
    }

    fn parent_vps(&self, available: usize) -> usize {
        if self.module.descriptor.multiprocessor {
            available
        } else {
            available.min(1)
        }
    }

    fn init(&mut self, ctx: &mut Ctx<'_>) {
        self.act(ctx, "hs_init", |f| f.init.clone(), ());
    }

    fn deinit(&mut self, ctx: &mut Ctx<'_>) {
        self.act(ctx, "hs_deinit", |f| f.deinit.clone(), ());
    }

    fn register_vp(
        &mut self,
        ctx: &mut Ctx<'_>,
        vp: VpId,
        params: &Params,
    ) -> Result<(), PolicyError> {
        if let Some(max) = self.module.descriptor.max_children {
            if ctx.child_vps().len() > max {
                return Err(PolicyError::Refused(format!(
                    "`{}` takes at most {max} children",
                    self.module.descriptor.name
                )));
            }
        }
        let Some(live) = self.live.as_mut() else {
            return Ok(());
        };
        let host = live.store.data_mut();
        mark(&mut host.known, vp, CHILD, true);
        host.params = Some(params.clone());
        let r = self.call(
            ctx,
            "hs_register_vp",
            |f| Some(f.register_vp.clone()),
            vp.0,
            true,
        );
        if let Some(live) = self.live.as_mut() {
            live.store.data_mut().params = None;
        }
        let Some(Some(code)) = r else {
            return Ok(());
        };
        if code == 0 {
            self.apply(ctx, "hs_register_vp");
            return Ok(());
        }
        let Some(live) = self.live.as_mut() else {
            return Ok(());
        };
        let host = live.store.data_mut();
        mark(&mut host.known, vp, CHILD, false);
        host.acts.clear();
        match refusal(code, host) {
            Ok(e) => Err(e),
            Err(g) => {
                self.fail(ctx, "hs_register_vp", g);
                Ok(())
            }
        }
    }

    fn unregister_vp(&mut self, ctx: &mut Ctx<'_>, vp: VpId) {
        self.act(
            ctx,
            "hs_unregister_vp",
            |f| Some(f.unregister_vp.clone()),
            vp.0,
        );
        if let Some(live) = self.live.as_mut() {
            mark(&mut live.store.data_mut().known, vp, CHILD, false);
        }
    }

    fn request(&mut self, ctx: &mut Ctx<'_>, vp: VpId) {
        self.act(ctx, "hs_request", |f| Some(f.request.clone()), vp.0);
    }

    fn release(&mut self, ctx: &mut Ctx<'_>, vp: VpId) {
        self.act(ctx, "hs_release", |f| Some(f.release.clone()), vp.0);
    }

    fn grant(&mut self, ctx: &mut Ctx<'_>, parent_vp: VpId, cpu: CpuId) {
        self.act(
            ctx,
            "hs_grant",
            |f| Some(f.grant.clone()),
            (parent_vp.0, cpu.0),
        );
    }

    fn revoke(&mut self, ctx: &mut Ctx<'_>, parent_vp: VpId, reason: RevokeReason) {
        let code = match reason {
            RevokeReason::Preempted => 0,
            RevokeReason::BudgetExhausted => 1,
            RevokeReason::Infrastructure => 2,
        };
        self.act(
            ctx,
            "hs_revoke",
            |f| Some(f.revoke.clone()),
            (parent_vp.0, code),
        );
    }

    fn msg(&mut self, ctx: &mut Ctx<'_>, vp: VpId, msg: &Msg) -> Result<(), PolicyError> {
        let name = self.name;
        let unsupported = || PolicyError::Unsupported(format!("`{name}` does not accept {msg:?}"));
        let Some(live) = self.live.as_mut() else {
            return Err(unsupported());
        };
        let (kind, params) = match msg {
            Msg::SetParams(p) => (0, p.clone()),
            Msg::App { kind, params } => {
                live.store.data_mut().msg_kind = kind.clone();
                (1, params.clone())
            }
            _ => return Err(unsupported()),
        };
        live.store.data_mut().params = Some(params.clone());
        let r = self.call(ctx, "hs_msg", |f| f.msg.clone(), (vp.0, kind), true);
        if let Some(live) = self.live.as_mut() {
            live.store.data_mut().params = None;
        }
        match r {
            None => Err(PolicyError::Refused(format!(
                "the plug-in `{}` was unloaded",
                self.name
            ))),
            Some(None) => Err(unsupported()),
            Some(Some(0)) => {
                if !self.apply(ctx, "hs_msg") {
                    return Ok(());
                }
                if kind == 0 {
                    let merged =
                        hsched_policies::registry::merge_change(ctx.vp_params(vp), &params);
                    ctx.set_vp_params(vp, merged);
                }
                Ok(())
            }
            Some(Some(code)) => {
                let live = self.live.as_mut().expect("live after a clean call");
                live.store.data_mut().acts.clear();
                match refusal(code, live.store.data_mut()) {
                    Ok(e) => Err(e),
                    Err(g) => {
                        self.fail(ctx, "hs_msg", g);
                        Err(PolicyError::Refused(format!(
                            "the plug-in `{}` was unloaded",
                            self.name
                        )))
                    }
                }
            }
        }
    }

    fn timer(&mut self, ctx: &mut Ctx<'_>) {
        if self.timer_at == ctx.now() {
            self.timer_repeats += 1;
        } else {
            self.timer_at = ctx.now();
            self.timer_repeats = 0;
        }
        if self.timer_repeats >= TIMER_REPEATS && self.live.is_some() {
            let at = ctx.now();
            self.fail(
                ctx,
                "hs_timer",
                format!("re-armed its timer at {at} {TIMER_REPEATS} times in a row: time would never advance"),
            );
            return;
        }
        self.act(ctx, "hs_timer", |f| f.timer.clone(), ());
    }

    fn unload_on_fault(&self) -> bool {
        true
    }

    fn check_invariants(&self, ctx: &Ctx<'_>) -> Result<(), String> {
        // The hook needs the store mutably, which `&self` does not give;
        // the host checks every action of every hook instead (verify.rs).
        let _ = ctx;
        Ok(())
    }

    fn describe(&self) -> String {
        if self.live.is_none() {
            return format!(
                "unloaded after a fault (was {})",
                self.module.path.display()
            );
        }
        self.describe.clone()
    }

    fn child_deadline(&self, _ctx: &Ctx<'_>, _vp: VpId) -> Option<Instant> {
        None
    }
}
