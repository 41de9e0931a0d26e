//! Turns a validated [`Hierarchy`] into a running [`Hsi`]: scheduler
//! instances built from the policy registry, threads, and the `[[at]]`
//! operations (Regehr 2001, §4.3.9, the HLSCtl set). Used by the simulator and
//! live mode, which decide *when* each thread and operation happens.

use crate::model::*;
use hsched_core::{
    CpuId, Hsi, HsiError, InstanceId, Instant, Msg, Params, ParentLink, ParentRef, PolicyError,
    ThreadId,
};
use hsched_policies::PolicyInfo;
use std::fmt;

/// Why the HSI could not be built or an operation not applied, with the
/// name of the scheduler or thread concerned.
#[derive(Clone, Debug, PartialEq)]
pub enum BuildError {
    /// A policy could not be built from the scheduler's parameters.
    Policy {
        /// The scheduler.
        scheduler: String,
        /// The policy's reason.
        error: PolicyError,
    },
    /// The HSI refused (a name taken, processors unavailable, a parent
    /// refusing the registration, a protocol violation, ...).
    Hsi {
        /// The scheduler or thread, as `scheduler `x`` or `thread `y``.
        what: String,
        /// The HSI's reason.
        error: HsiError,
    },
    /// A scheduler name that the HSI does not know.
    UnknownScheduler(String),
    /// A thread name that the caller could not resolve.
    UnknownThread(String),
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BuildError::Policy { scheduler, error } => {
                write!(f, "scheduler `{scheduler}`: {error}")
            }
            BuildError::Hsi { what, error } => write!(f, "{what}: {error}"),
            BuildError::UnknownScheduler(n) => write!(f, "no scheduler instance is named `{n}`"),
            BuildError::UnknownThread(n) => write!(f, "no live thread is named `{n}`"),
        }
    }
}

impl std::error::Error for BuildError {}

/// Builds every scheduler of `h` (parents first) at time zero on a machine
/// of `h.machine.cpus` processors and sets the default scheduler. Threads
/// are not created: the caller creates each at its `start` with
/// [`create_thread`].
///
/// # Errors
/// The first scheduler that cannot be built or attached.
pub fn build_hsi(h: &Hierarchy) -> Result<Hsi, BuildError> {
    build_hsi_with(h, hsched_policies::registry())
}

/// [`build_hsi`] against another table of policies.
///
/// # Errors
/// As [`build_hsi`].
pub fn build_hsi_with(h: &Hierarchy, policies: &[PolicyInfo]) -> Result<Hsi, BuildError> {
    let mut hsi = Hsi::new(h.machine.cpus);
    for s in &h.schedulers {
        create_scheduler_with(&mut hsi, s, Instant::ZERO, policies)?;
    }
    if let Some(d) = &h.default_scheduler {
        let id = instance(&hsi, d)?;
        hsi.set_default(Instant::ZERO, id, false)
            .map_err(|error| BuildError::Hsi {
                what: format!("default scheduler `{d}`"),
                error,
            })?;
    }
    Ok(hsi)
}

fn instance(hsi: &Hsi, name: &str) -> Result<InstanceId, BuildError> {
    hsi.instance(name)
        .ok_or_else(|| BuildError::UnknownScheduler(name.to_string()))
}

/// Creates the thread `spec` under its scheduler (blocked until its first
/// wake-up). A thread that names no scheduler goes to the HSI's default.
///
/// # Errors
/// Unknown scheduler, or the scheduler refused the parameters.
pub fn create_thread(
    hsi: &mut Hsi,
    spec: &ThreadSpec,
    now: Instant,
) -> Result<ThreadId, BuildError> {
    let parent = if spec.scheduler.is_empty() {
        hsi.default_instance()
            .ok_or_else(|| BuildError::UnknownScheduler("(default)".into()))?
    } else {
        instance(hsi, &spec.scheduler)?
    };
    hsi.create_thread(now, &spec.name, parent, spec.params.clone())
        .map_err(|error| BuildError::Hsi {
            what: format!("thread `{}`", spec.name),
            error,
        })
}

/// Creates the scheduler instance `spec` with the policies of
/// `hsched_policies`: a root on its processors, or under its parents with
/// the parent-side parameters.
///
/// # Errors
/// The policy cannot be built, a parent is unknown, or the HSI refused.
pub fn create_scheduler(
    hsi: &mut Hsi,
    spec: &SchedulerSpec,
    now: Instant,
) -> Result<InstanceId, BuildError> {
    create_scheduler_with(hsi, spec, now, hsched_policies::registry())
}

/// [`create_scheduler`] against another table of policies.
///
/// # Errors
/// As [`create_scheduler`].
pub fn create_scheduler_with(
    hsi: &mut Hsi,
    spec: &SchedulerSpec,
    now: Instant,
    policies: &[PolicyInfo],
) -> Result<InstanceId, BuildError> {
    let policy =
        build_policy(&spec.policy, &spec.params, policies).map_err(|error| BuildError::Policy {
            scheduler: spec.name.clone(),
            error,
        })?;
    let links = if spec.parents.is_empty() {
        let cpus: Vec<CpuId> = if spec.cpus.is_empty() {
            (0..hsi.cpu_count() as u32).map(CpuId).collect()
        } else {
            spec.cpus.iter().map(|&c| CpuId(c as u32)).collect()
        };
        vec![ParentLink {
            parent: ParentRef::Top { cpus },
            params: Params::new(),
        }]
    } else {
        let mut links = Vec::with_capacity(spec.parents.len());
        for p in &spec.parents {
            links.push(ParentLink {
                parent: ParentRef::Instance(instance(hsi, &p.name)?),
                params: p.params.clone(),
            });
        }
        links
    };
    hsi.create_instance(now, &spec.name, policy, links)
        .map_err(|error| BuildError::Hsi {
            what: format!("scheduler `{}`", spec.name),
            error,
        })
}

fn on_thread(name: &str) -> impl Fn(HsiError) -> BuildError + '_ {
    move |error| BuildError::Hsi {
        what: format!("thread `{name}`"),
        error,
    }
}

/// Builds a policy by name from `policies`, checking its parameters as
/// `hsched_policies::build` does.
fn build_policy(
    name: &str,
    params: &Params,
    policies: &[PolicyInfo],
) -> Result<Box<dyn hsched_core::Policy>, PolicyError> {
    let Some(info) = policies.iter().find(|p| p.name == name) else {
        let known: Vec<&str> = policies.iter().map(|p| p.name).collect();
        return Err(PolicyError::Unsupported(format!(
            "unknown policy `{name}`; known policies: {}",
            known.join(", ")
        )));
    };
    let keys: Vec<&str> = info.instance_params.iter().map(|s| s.key).collect();
    if let Some(k) = params.unknown_keys(&keys).next() {
        return Err(PolicyError::Unsupported(format!(
            "policy `{name}` has no parameter `{k}`"
        )));
    }
    (info.build)(params)
}

/// Applies one `[[at]]` operation at `now`; `thread` resolves thread names
/// to the ids the caller created them with.
///
/// # Errors
/// An unknown thread or scheduler, or the HSI refused the operation
/// (admission control, an instance that still has children, ...).
pub fn apply_op(
    hsi: &mut Hsi,
    op: &OpSpec,
    now: Instant,
    thread: &dyn Fn(&str) -> Option<ThreadId>,
) -> Result<(), BuildError> {
    apply_op_with(hsi, op, now, thread, hsched_policies::registry())
}

/// [`apply_op`] against another table of policies (for `create-scheduler`).
///
/// # Errors
/// As [`apply_op`].
pub fn apply_op_with(
    hsi: &mut Hsi,
    op: &OpSpec,
    now: Instant,
    thread: &dyn Fn(&str) -> Option<ThreadId>,
    policies: &[PolicyInfo],
) -> Result<(), BuildError> {
    let tid = |name: &str| thread(name).ok_or_else(|| BuildError::UnknownThread(name.to_string()));
    match op {
        OpSpec::BeginReservation {
            thread,
            scheduler,
            params,
        } => {
            let t = tid(thread)?;
            let rez = instance(hsi, scheduler)?;
            hsi.begin_reservation(now, t, rez, params.clone())
                .map_err(on_thread(thread))
        }
        OpSpec::EndReservation { thread } => {
            let t = tid(thread)?;
            hsi.end_reservation(now, t).map_err(on_thread(thread))
        }
        OpSpec::SetParams { thread, params } => {
            let t = tid(thread)?;
            hsi.thread_msg(now, t, &Msg::SetParams(params.clone()))
                .map_err(on_thread(thread))
        }
        OpSpec::MoveThread { thread, to, params } => {
            let t = tid(thread)?;
            let to_id = instance(hsi, to)?;
            hsi.move_thread(now, t, to_id, params.clone())
                .map_err(on_thread(thread))
        }
        OpSpec::CreateScheduler(spec) => {
            create_scheduler_with(hsi, spec, now, policies).map(|_| ())
        }
        OpSpec::DestroyScheduler { name } => {
            let id = instance(hsi, name)?;
            hsi.destroy_instance(now, id)
                .map_err(|error| BuildError::Hsi {
                    what: format!("scheduler `{name}`"),
                    error,
                })
        }
        OpSpec::SetDefault { name, move_threads } => {
            let id = instance(hsi, name)?;
            hsi.set_default(now, id, *move_threads)
                .map_err(|error| BuildError::Hsi {
                    what: format!("default scheduler `{name}`"),
                    error,
                })
        }
    }
}
