//! Protocol violations (Regehr 2001, §4.3.4) and operation errors.

use crate::ids::{CpuId, InstanceId, ThreadId, VpId};
use crate::policy::PolicyError;
use std::fmt;

/// The rule of the HLS protocol that was broken.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Rule {
    /// A VP changed state other than as Fig 4.2 allows.
    IllegalTransition,
    /// An instance acted on a VP it does not own on that side.
    NotOwner,
    /// A processor was granted that the granting instance does not hold.
    CpuNotHeld,
    /// After an input, an instance holds a processor it has not granted to a
    /// child (it must grant or release at once).
    HeldCpuNotPassedOn,
    /// After an input, a VP runs on a processor its parent does not hold
    /// (a revocation was not passed on).
    RunningWithoutParentCpu,
    /// Two VPs of one instance, or two threads, run on the same processor.
    CpuRunsTwo,
    /// A thread's VP state disagrees with whether the thread is runnable.
    ThreadStateMismatch,
    /// A VP was unregistered while not waiting.
    UnregisterNotWaiting,
    /// A policy's own `check_invariants` failed.
    PolicyInvariant,
    /// A timer kept firing at the same instant.
    TimerStorm,
    /// Policies kept notifying each other without end.
    Livelock,
}

impl Rule {
    /// The rule in words, citing §4.3.4.
    pub fn describe(self) -> &'static str {
        match self {
            Rule::IllegalTransition => "every VP transition must be one of Fig 4.2",
            Rule::NotOwner => "only a VP's parent grants and revokes it; only its child requests and releases it",
            Rule::CpuNotHeld => "a scheduler can only grant a processor it was granted",
            Rule::HeldCpuNotPassedOn => {
                "a scheduler granted a processor must immediately grant it to a ready child or release it"
            }
            Rule::RunningWithoutParentCpu => {
                "a scheduler whose processor is revoked must immediately revoke it from its child"
            }
            Rule::CpuRunsTwo => "each physical processor runs exactly one thread or idles",
            Rule::ThreadStateMismatch => "a thread's VP is ready or running exactly while the thread is runnable",
            Rule::UnregisterNotWaiting => "VPs may only be unregistered while waiting",
            Rule::PolicyInvariant => "the scheduler's own invariants (CheckInvar)",
            Rule::TimerStorm => "a timer callback must not re-arm its timer at the current instant forever",
            Rule::Livelock => "an input must settle after finitely many notifications",
        }
    }
}

/// A broken protocol rule, naming the instance, the VP and the rule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// The rule.
    pub rule: Rule,
    /// Who broke it: `instance 'name'`, `thread 'name'` or `top`.
    pub culprit: String,
    /// The VP concerned, if any.
    pub vp: Option<VpId>,
    /// The specifics.
    pub detail: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "protocol violation by {}", self.culprit)?;
        if let Some(vp) = self.vp {
            write!(f, " on {vp}")?;
        }
        write!(f, ": {} (rule: {})", self.detail, self.rule.describe())
    }
}

/// Why a run-time operation (Regehr 2001, §4.3.9) was refused. Nothing changed.
#[derive(Clone, Debug, PartialEq)]
pub enum OpError {
    /// No instance has this name.
    UnknownInstance(String),
    /// No live thread has this id.
    UnknownThread(ThreadId),
    /// An instance with this name exists.
    NameTaken(String),
    /// An instance id that is not live.
    DeadInstance(InstanceId),
    /// Destroying an instance that still has children.
    InstanceNotEmpty {
        /// The instance.
        name: String,
        /// How many VPs are still registered with it.
        children: usize,
    },
    /// A policy refused (bad parameters, admission control, ...).
    Refused {
        /// The refusing instance.
        instance: String,
        /// Its reason.
        error: PolicyError,
    },
    /// A root instance asked for a processor that does not exist or already
    /// belongs to another root.
    CpuUnavailable(CpuId),
    /// An instance was created with no parent.
    NoParent(String),
    /// The operation needs the thread to be in a reservation (or not).
    NotInReservation(ThreadId),
    /// The operation would make the hierarchy cyclic.
    WouldCreateCycle(String),
}

impl fmt::Display for OpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OpError::UnknownInstance(n) => write!(f, "no scheduler instance is named '{n}'"),
            OpError::UnknownThread(t) => write!(f, "{t} is not a live thread"),
            OpError::NameTaken(n) => write!(f, "an instance named '{n}' already exists"),
            OpError::DeadInstance(i) => write!(f, "{i} has been destroyed"),
            OpError::InstanceNotEmpty { name, children } => write!(
                f,
                "instance '{name}' still has {children} child VP(s); move or destroy them first"
            ),
            OpError::Refused { instance, error } => {
                write!(f, "instance '{instance}' refused: {error}")
            }
            OpError::CpuUnavailable(c) => {
                write!(
                    f,
                    "{c} does not exist or already belongs to another root instance"
                )
            }
            OpError::NoParent(n) => write!(f, "instance '{n}' needs at least one parent"),
            OpError::NotInReservation(t) => write!(f, "{t} has no reservation begun by the HSI"),
            OpError::WouldCreateCycle(n) => {
                write!(f, "making '{n}' its own ancestor would create a cycle")
            }
        }
    }
}
impl std::error::Error for OpError {}

/// What an input to the HSI can return.
#[derive(Clone, Debug, PartialEq)]
pub enum HsiError {
    /// The operation was refused; nothing changed.
    Op(OpError),
    /// A policy broke the protocol while handling the input.
    Protocol(Vec<Violation>),
}

impl fmt::Display for HsiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HsiError::Op(e) => write!(f, "{e}"),
            HsiError::Protocol(v) => {
                for (i, x) in v.iter().enumerate() {
                    if i > 0 {
                        writeln!(f)?;
                    }
                    write!(f, "{x}")?;
                }
                Ok(())
            }
        }
    }
}
impl std::error::Error for HsiError {}

impl From<OpError> for HsiError {
    fn from(e: OpError) -> Self {
        HsiError::Op(e)
    }
}
