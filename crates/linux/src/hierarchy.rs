//! From the validated hierarchy model to a running [`Hsi`], and the control
//! operations of §4.3.9 (HLSCtl) applied to it. Shared by timed `[[at]]`
//! operations and the control socket.

use crate::LiveError;
use hsched_config::{Hierarchy, OpSpec, SchedulerSpec};
use hsched_core::{CpuId, Hsi, InstanceId, Instant, Msg, Params, ParentLink, ParentRef, ThreadId};

/// Builds the instances of `h` on an HSI with `cpus` processors (the
/// managed Linux CPUs, in order) and sets the default scheduler.
///
/// # Errors
/// An unknown policy, a bad parameter, an unknown parent, or a root naming
/// a processor beyond `cpus`.
pub fn build_hsi(h: &Hierarchy, cpus: usize) -> Result<Hsi, LiveError> {
    let mut hsi = Hsi::new(cpus);
    for s in &h.schedulers {
        create_scheduler(&mut hsi, Instant(0), s)?;
    }
    if let Some(d) = &h.default_scheduler {
        let id = instance(&hsi, d)?;
        hsi.set_default(Instant(0), id, false)
            .map_err(|e| LiveError::Hierarchy(format!("default scheduler `{d}`: {e}")))?;
    }
    Ok(hsi)
}

/// The instance named `name`.
///
/// # Errors
/// No such instance.
pub fn instance(hsi: &Hsi, name: &str) -> Result<InstanceId, LiveError> {
    hsi.instance(name)
        .ok_or_else(|| LiveError::Hierarchy(format!("no scheduler named `{name}`")))
}

/// Creates one scheduler instance from its spec.
///
/// # Errors
/// As [`build_hsi`].
pub fn create_scheduler(
    hsi: &mut Hsi,
    now: Instant,
    s: &SchedulerSpec,
) -> Result<InstanceId, LiveError> {
    let policy = hsched_policies::build(&s.policy, &s.params)
        .map_err(|e| LiveError::Hierarchy(format!("scheduler `{}`: {e}", s.name)))?;
    let links = if s.parents.is_empty() {
        let cpus: Vec<CpuId> = if s.cpus.is_empty() {
            (0..hsi.cpu_count()).map(|c| CpuId(c as u32)).collect()
        } else {
            s.cpus.iter().map(|&c| CpuId(c as u32)).collect()
        };
        if let Some(c) = cpus.iter().find(|c| c.index() >= hsi.cpu_count()) {
            return Err(LiveError::Hierarchy(format!(
                "scheduler `{}` names processor {} but live mode manages {} processor(s) (see --cpus)",
                s.name,
                c.0,
                hsi.cpu_count()
            )));
        }
        vec![ParentLink {
            parent: ParentRef::Top { cpus },
            params: Params::new(),
        }]
    } else {
        let mut v = Vec::new();
        for p in &s.parents {
            v.push(ParentLink {
                parent: ParentRef::Instance(instance(hsi, &p.name)?),
                params: p.params.clone(),
            });
        }
        v
    };
    hsi.create_instance(now, &s.name, policy, links)
        .map_err(|e| LiveError::Hierarchy(format!("scheduler `{}`: {e}", s.name)))
}

/// Applies one control operation. `thread` resolves a thread name.
///
/// # Errors
/// Unknown names, or the HSI or a policy refused (the message says why).
pub fn apply_op(
    hsi: &mut Hsi,
    now: Instant,
    op: &OpSpec,
    thread: &dyn Fn(&str) -> Option<ThreadId>,
) -> Result<(), LiveError> {
    let th = |name: &str| {
        thread(name).ok_or_else(|| LiveError::Hierarchy(format!("no thread named `{name}`")))
    };
    let refused = |what: &str, e: hsched_core::HsiError| LiveError::Refused(format!("{what}: {e}"));
    match op {
        OpSpec::BeginReservation {
            thread,
            scheduler,
            params,
        } => {
            let (t, to) = (th(thread)?, instance(hsi, scheduler)?);
            hsi.begin_reservation(now, t, to, params.clone())
                .map_err(|e| refused("begin-reservation", e))
        }
        OpSpec::EndReservation { thread } => {
            let t = th(thread)?;
            hsi.end_reservation(now, t)
                .map_err(|e| refused("end-reservation", e))
        }
        OpSpec::SetParams { thread, params } => {
            let t = th(thread)?;
            hsi.thread_msg(now, t, &Msg::SetParams(params.clone()))
                .map_err(|e| refused("set-params", e))
        }
        OpSpec::MoveThread { thread, to, params } => {
            let (t, to) = (th(thread)?, instance(hsi, to)?);
            hsi.move_thread(now, t, to, params.clone())
                .map_err(|e| refused("move-thread", e))
        }
        OpSpec::CreateScheduler(s) => create_scheduler(hsi, now, s).map(|_| ()),
        OpSpec::DestroyScheduler { name } => {
            let id = instance(hsi, name)?;
            hsi.destroy_instance(now, id)
                .map_err(|e| refused("destroy-scheduler", e))
        }
        OpSpec::SetDefault { name, move_threads } => {
            let id = instance(hsi, name)?;
            hsi.set_default(now, id, *move_threads)
                .map_err(|e| refused("set-default", e))
        }
    }
}
