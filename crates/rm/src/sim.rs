//! The resource manager in the simulator: a file's timed requests
//! (`[[rm.request]]`) go through a [`Manager`] in time order, and its
//! decisions become `begin-reservation` and `end-reservation` operations
//! at the instants they are made.
//!
//! The manager is reactive and has no representation of time (Regehr
//! 2001, §8.1): its decisions depend only on the order of requests and
//! releases, not on what the threads do. So the whole sequence is decided
//! before the run, from the requests' times, their `release` times and the
//! threads' `exit` times, and the simulator runs the resulting operations
//! like any other. A request ends at its `release`, or when its thread
//! exits (at the thread's `exit` time, where its reservation ends just
//! before it exits); a thread whose program ends earlier keeps its request
//! until then. At one instant releases and exits come before new
//! requests, so capacity freed at `t` is there for a request at `t`.

use hsched_config::{Hierarchy as File, OpSpec, Span, TimedOp};
use hsched_core::Duration;
use hsched_guarantee::Guarantee;

use crate::config::{from_config, ConfigError};
use crate::manager::{Manager, NewRequest, Notice, Outcome};
use crate::rules::RequestId;

/// What the manager decided, when.
#[derive(Clone, Debug, PartialEq)]
pub struct Decision {
    /// When.
    pub at: Duration,
    /// The thread.
    pub thread: String,
    /// The request.
    pub id: RequestId,
    /// What happened.
    pub what: Happened,
}

/// The kinds of [`Decision`].
#[derive(Clone, Debug, PartialEq)]
pub enum Happened {
    /// Granted at this scheduler, receiving this guarantee.
    Granted {
        /// Scheduler.
        scheduler: String,
        /// What the thread receives.
        received: Guarantee,
    },
    /// Left pending by this rule.
    Pending {
        /// The rule.
        rule: String,
        /// Why.
        reason: String,
    },
    /// Refused by this rule.
    Refused {
        /// The rule.
        rule: String,
        /// Why.
        reason: String,
    },
    /// Revoked by this rule.
    Revoked {
        /// The rule.
        rule: String,
    },
    /// Ended (released, or its thread exited).
    Ended,
}

impl std::fmt::Display for Decision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} #{} {}: ", self.at, self.id, self.thread)?;
        match &self.what {
            Happened::Granted {
                scheduler,
                received,
            } => write!(f, "granted at {scheduler} ({received})"),
            Happened::Pending { rule, reason } => write!(f, "pending, {rule}: {reason}"),
            Happened::Refused { rule, reason } => write!(f, "refused, {rule}: {reason}"),
            Happened::Revoked { rule } => write!(f, "revoked, {rule}"),
            Happened::Ended => f.write_str("ended"),
        }
    }
}

/// The manager's decisions for a file and the operations they make.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Plan {
    /// Decisions, in the order made.
    pub decisions: Vec<Decision>,
    /// `begin-reservation` and `end-reservation` operations, in time
    /// order.
    pub operations: Vec<TimedOp>,
}

enum Step<'a> {
    End(&'a str),
    Ask(usize),
}

/// Runs the file's `[[rm.request]]`s through its resource manager.
///
/// # Errors
/// The manager cannot be built from the file, a request names a thread
/// before it starts, or a request is malformed (its error says why).
pub fn plan(f: &File) -> Result<Plan, ConfigError> {
    let mut m = from_config(f)?;
    let mut steps: Vec<(Duration, u8, Step<'_>)> = Vec::new();
    for (k, q) in f.rm.requests.iter().enumerate() {
        let Some(t) = f.threads.iter().find(|t| t.name == q.thread) else {
            return Err(ConfigError(format!(
                "a request names thread `{}`, which is not declared",
                q.thread
            )));
        };
        if q.time < t.start {
            return Err(ConfigError(format!(
                "the request for `{}` at {} comes before the thread starts ({})",
                q.thread, q.time, t.start
            )));
        }
        steps.push((q.time, 1, Step::Ask(k)));
        if let Some(r) = q.release {
            steps.push((r, 0, Step::End(&q.thread)));
        }
    }
    for t in &f.threads {
        if let Some(x) = t.exit {
            if f.rm.requests.iter().any(|q| q.thread == t.name) {
                steps.push((x, 0, Step::End(&t.name)));
            }
        }
    }
    // Stable: file order among equal times and kinds.
    steps.sort_by_key(|(at, class, _)| (*at, *class));
    let mut out = Plan::default();
    let mut exited: Vec<&str> = Vec::new();
    for (at, _, step) in steps {
        match step {
            Step::End(thread) => {
                let is_exit = f
                    .threads
                    .iter()
                    .any(|t| t.name == thread && t.exit == Some(at));
                let Some(id) = m.request_of(thread) else {
                    if is_exit {
                        exited.push(thread);
                    }
                    continue;
                };
                let was_granted = m.granted().iter().any(|g| g.request.id == id);
                let notices = m
                    .release(crate::SYSTEM, id)
                    .map(|(_, n)| n)
                    .map_err(|e| ConfigError(e.to_string()))?;
                out.decisions.push(Decision {
                    at,
                    thread: thread.to_string(),
                    id,
                    what: Happened::Ended,
                });
                // At an instant the simulator applies operations before
                // exits, so the reservation ends here even for a thread
                // that exits now, and what it frees is free for the
                // grants that follow.
                if was_granted {
                    push_op(
                        &mut out,
                        at,
                        OpSpec::EndReservation {
                            thread: thread.to_string(),
                        },
                    );
                }
                if is_exit {
                    exited.push(thread);
                }
                notify(&mut out, at, notices);
            }
            Step::Ask(k) => {
                let q = &f.rm.requests[k];
                if exited.contains(&q.thread.as_str()) {
                    return Err(ConfigError(format!(
                        "the request for `{}` at {} comes after the thread exits",
                        q.thread, q.time
                    )));
                }
                let g: Guarantee = q
                    .guarantee
                    .parse()
                    .map_err(|e| ConfigError(format!("guarantee \"{}\": {e}", q.guarantee)))?;
                let mut new = NewRequest::new(&q.principal, &q.thread, g).value(q.value);
                new.scheduler.clone_from(&q.scheduler);
                let (id, outcome, notices) = m.request(new).map_err(|e| {
                    ConfigError(format!("the request for `{}` at {}: {e}", q.thread, q.time))
                })?;
                // Revocations made for this request come first.
                notify(&mut out, at, notices);
                let what = match outcome {
                    Outcome::Granted(g) => {
                        push_op(
                            &mut out,
                            at,
                            OpSpec::BeginReservation {
                                thread: q.thread.clone(),
                                scheduler: g.scheduler.clone(),
                                params: g.params(),
                            },
                        );
                        Happened::Granted {
                            scheduler: g.scheduler,
                            received: g.received,
                        }
                    }
                    Outcome::Pending { rule, reason, .. } => Happened::Pending { rule, reason },
                    Outcome::Refused { rule, reason } => Happened::Refused { rule, reason },
                };
                out.decisions.push(Decision {
                    at,
                    thread: q.thread.clone(),
                    id,
                    what,
                });
            }
        }
    }
    Ok(out)
}

fn push_op(out: &mut Plan, at: Duration, op: OpSpec) {
    out.operations.push(TimedOp {
        at,
        op,
        span: Span::default(),
    });
}

fn notify(out: &mut Plan, at: Duration, notices: Vec<Notice>) {
    for n in notices {
        match n {
            Notice::Granted(g) => {
                push_op(
                    out,
                    at,
                    OpSpec::BeginReservation {
                        thread: g.request.thread.clone(),
                        scheduler: g.scheduler.clone(),
                        params: g.params(),
                    },
                );
                out.decisions.push(Decision {
                    at,
                    thread: g.request.thread,
                    id: g.request.id,
                    what: Happened::Granted {
                        scheduler: g.scheduler,
                        received: g.received,
                    },
                });
            }
            Notice::Revoked { request, rule, .. } => {
                push_op(
                    out,
                    at,
                    OpSpec::EndReservation {
                        thread: request.thread.clone(),
                    },
                );
                out.decisions.push(Decision {
                    at,
                    thread: request.thread,
                    id: request.id,
                    what: Happened::Revoked { rule },
                });
            }
            Notice::Refused {
                request,
                rule,
                reason,
            } => out.decisions.push(Decision {
                at,
                thread: request.thread,
                id: request.id,
                what: Happened::Refused { rule, reason },
            }),
        }
    }
}

/// Plans the file's requests ([`plan`]) and adds the operations to its
/// timeline, after the file's own operations at the same instant.
///
/// # Errors
/// As [`plan`].
pub fn apply(f: &mut File) -> Result<Vec<Decision>, ConfigError> {
    let p = plan(f)?;
    f.operations.extend(p.operations);
    f.operations.sort_by_key(|o| o.at);
    Ok(p.decisions)
}

/// A manager for the file, for callers that drive it themselves.
///
/// # Errors
/// As [`from_config`].
pub fn manager(f: &File) -> Result<Manager, ConfigError> {
    from_config(f)
}
