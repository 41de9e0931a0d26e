//! Faults of contained policies and what unloading them did.
//!
//! A policy that runs foreign code (a WebAssembly plug-in) can fail in
//! ways a built-in cannot: it traps, runs out of its work bound, or breaks
//! the protocol. Such a policy reports the failure with [`crate::Ctx::fault`],
//! or declares with [`crate::Policy::unload_on_fault`] that its protocol
//! violations count as faults; the HSI keeps the faults for its caller,
//! which unloads the instance ([`crate::Hsi::unload`]) and goes on, as
//! Vassal and sched_ext fall back to the native scheduler.

use crate::ids::{InstanceId, ThreadId};
use crate::time::Instant;
use std::fmt;

/// A contained policy failed.
#[derive(Clone, Debug, PartialEq)]
pub struct Fault {
    /// The instance.
    pub instance: InstanceId,
    /// Its name.
    pub name: String,
    /// When.
    pub at: Instant,
    /// What happened, in words.
    pub what: String,
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "scheduler '{}' failed at {}: {}",
            self.name, self.at, self.what
        )
    }
}

/// What [`crate::Hsi::unload`] did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Unloaded {
    /// The instances destroyed, the failed one last (its descendants go
    /// first: an instance is destroyed once it has no children).
    pub destroyed: Vec<String>,
    /// Threads moved to the fallback scheduler, in the order moved.
    pub moved: Vec<ThreadId>,
    /// Threads the fallback refused with their parameters and took without
    /// them (its defaults), with the refusal.
    pub reset: Vec<(ThreadId, String)>,
    /// The fallback scheduler: the default, or the failed instance's
    /// parent when no default lies outside what was unloaded.
    pub fallback: String,
}

/// One failed instance and what [`crate::Hsi::unload_faulted`] did.
#[derive(Clone, Debug, PartialEq)]
pub struct Unloading {
    /// The fault.
    pub fault: Fault,
    /// The failed instance's policy name.
    pub policy: String,
    /// What unloading did, or why the instance stays.
    pub result: Result<Unloaded, UnloadError>,
}

/// Why [`crate::Hsi::unload`] could not unload an instance.
#[derive(Clone, Debug, PartialEq)]
pub enum UnloadError {
    /// The instance is not live.
    Dead(InstanceId),
    /// Neither a default scheduler nor a parent instance lies outside the
    /// instances to unload, so their threads would have nowhere to go.
    NoFallback {
        /// The failed instance.
        name: String,
    },
    /// The fallback refused a thread even without parameters; it and the
    /// threads not yet moved stay, and nothing is destroyed.
    Refused {
        /// The thread's name.
        thread: String,
        /// The fallback's refusal.
        error: String,
    },
}

impl fmt::Display for UnloadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UnloadError::Dead(i) => write!(f, "instance {i:?} is not live"),
            UnloadError::NoFallback { name } => write!(
                f,
                "neither a default scheduler nor a parent scheduler outside '{name}' and the schedulers below it can take their threads"
            ),
            UnloadError::Refused { thread, error } => {
                write!(f, "the default scheduler refused thread '{thread}': {error}")
            }
        }
    }
}
impl std::error::Error for UnloadError {}

/// What [`crate::Hsi::replace`] did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Replaced {
    /// Threads moved to the new policy, in the order moved.
    pub moved: Vec<ThreadId>,
    /// Threads the new policy refused with their parameters and took
    /// without them (its defaults), with the refusal.
    pub reset: Vec<(ThreadId, String)>,
}

/// Why [`crate::Hsi::replace`] left an instance as it was.
#[derive(Clone, Debug, PartialEq)]
pub enum ReplaceError {
    /// The instance is not live.
    Dead(InstanceId),
    /// The instance holds processors directly (a root): the new policy
    /// could not be registered beside it.
    Root {
        /// The instance.
        name: String,
    },
    /// The instance schedules other schedulers, which cannot change
    /// parents; only a scheduler of threads is replaced in place.
    Schedulers {
        /// The instance.
        name: String,
        /// Its child schedulers.
        children: Vec<String>,
    },
    /// The new policy could not be placed under the instance's parents.
    Create(String),
    /// The new policy refused a thread even without parameters; every
    /// thread went back and the new instance was destroyed.
    Refused {
        /// The thread's name.
        thread: String,
        /// The new policy's refusal.
        error: String,
    },
}

impl fmt::Display for ReplaceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReplaceError::Dead(i) => write!(f, "instance {i:?} is not live"),
            ReplaceError::Root { name } => write!(
                f,
                "'{name}' holds processors directly (a root scheduler): only a scheduler with parent schedulers can be replaced while it runs"
            ),
            ReplaceError::Schedulers { name, children } => write!(
                f,
                "'{name}' schedules other schedulers ({}), which cannot change parents: only a scheduler of threads can be replaced",
                children.join(", ")
            ),
            ReplaceError::Create(e) => write!(f, "the new policy cannot take its place: {e}"),
            ReplaceError::Refused { thread, error } => write!(
                f,
                "the new policy refused thread '{thread}' even without parameters ({error}); nothing changed"
            ),
        }
    }
}
impl std::error::Error for ReplaceError {}
