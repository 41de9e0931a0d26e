//! Why a run failed. Every error names what was being done, to which thread
//! or operation, and when.

use hsched_core::{Instant, Violation};
use std::fmt;

/// A failed run.
#[derive(Debug)]
#[non_exhaustive]
pub enum SimError {
    /// The hierarchy could not be built.
    Build {
        /// What went wrong.
        message: String,
    },
    /// The machine description is unusable (e.g. stolen time on a
    /// processor that does not exist).
    Machine {
        /// What went wrong.
        message: String,
    },
    /// A thread's workload parameters are unusable.
    Workload {
        /// The thread.
        thread: String,
        /// What went wrong.
        message: String,
    },
    /// The HSI refused an input about a thread.
    Thread {
        /// The thread.
        thread: String,
        /// What the simulator was doing (`create`, `wake`, ...).
        action: &'static str,
        /// When.
        at: Instant,
        /// The refusal.
        message: String,
    },
    /// A timed control operation failed.
    Op {
        /// The operation, in words.
        op: String,
        /// When.
        at: Instant,
        /// The refusal.
        message: String,
    },
    /// A policy broke the HLS protocol (Regehr 2001, §4.3.4).
    Protocol {
        /// When.
        at: Instant,
        /// The input being handled.
        input: String,
        /// What was broken.
        violations: Vec<Violation>,
        /// The seed, for the replay line.
        seed: u64,
        /// The hierarchy file, if the caller named it.
        source: Option<String>,
    },
    /// A thread's model went round its loop without time passing.
    Stuck {
        /// The thread.
        thread: String,
        /// When.
        at: Instant,
    },
    /// Writing the trace or the Gantt chart failed.
    Io {
        /// Which output.
        what: &'static str,
        /// The error.
        error: std::io::Error,
    },
}

impl SimError {
    /// The one-line replay command for a protocol violation
    /// (`repro: hsched sim FILE --seed N`).
    pub fn repro(&self) -> Option<String> {
        match self {
            SimError::Protocol { seed, source, .. } => Some(format!(
                "repro: hsched sim {} --seed {seed}",
                source.as_deref().unwrap_or("FILE")
            )),
            _ => None,
        }
    }
}

impl fmt::Display for SimError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SimError::Build { message } => write!(f, "cannot build the hierarchy: {message}"),
            SimError::Machine { message } => write!(f, "machine: {message}"),
            SimError::Workload { thread, message } => {
                write!(f, "thread '{thread}': workload {message}")
            }
            SimError::Thread {
                thread,
                action,
                at,
                message,
            } => {
                write!(
                    f,
                    "at {at}: {action} of thread '{thread}' failed: {message}"
                )
            }
            SimError::Op { op, at, message } => {
                write!(f, "at {at}: operation {op} failed: {message}")
            }
            SimError::Protocol {
                at,
                input,
                violations,
                ..
            } => {
                write!(f, "at {at}, while handling {input}:")?;
                for v in violations {
                    write!(f, "\n  {v}")?;
                }
                if let Some(r) = self.repro() {
                    write!(f, "\n{r}")?;
                }
                Ok(())
            }
            SimError::Stuck { thread, at } => {
                write!(f, "at {at}: thread '{thread}' loops without letting time pass (a program of zero-length steps?)")
            }
            SimError::Io { what, error } => write!(f, "writing the {what}: {error}"),
        }
    }
}

/// The I/O error of [`SimError::Io`] is part of its message, so it is not
/// also given as the source (a chain printer would say it twice).
impl std::error::Error for SimError {}
