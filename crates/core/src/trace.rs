//! Events the HSI records when tracing is on, for backends to turn into
//! traces (Perfetto, Gantt charts) and metrics.

use crate::ids::{CpuId, InstanceId, Node, VpId};
use crate::policy::RevokeReason;
use crate::time::{Duration, Instant};

/// Something a policy reports about one of its child VPs.
#[derive(Clone, Debug, PartialEq)]
pub enum PolicyEvent {
    /// A budget was replenished at a period start.
    Replenish {
        /// The child VP.
        vp: VpId,
        /// The new budget.
        budget: Duration,
    },
    /// A child used up its budget for this period.
    BudgetExhausted {
        /// The child VP.
        vp: VpId,
    },
    /// A child's deadline passed with work left (as the policy sees it).
    DeadlineMiss {
        /// The child VP.
        vp: VpId,
    },
    /// Anything else worth a line in a trace.
    Note(String),
}

/// One traced event.
#[derive(Clone, Debug, PartialEq)]
pub struct TraceEvent {
    /// When it happened.
    pub at: Instant,
    /// What happened.
    pub kind: TraceKind,
}

/// What happened.
#[derive(Clone, Debug, PartialEq)]
pub enum TraceKind {
    /// `parent` granted `cpu` to `child` through `vp`.
    Grant {
        /// The VP.
        vp: VpId,
        /// The granting side.
        parent: Node,
        /// The receiving side.
        child: Node,
        /// The processor.
        cpu: CpuId,
    },
    /// `parent` revoked `cpu` from `child`.
    Revoke {
        /// The VP.
        vp: VpId,
        /// The revoking side.
        parent: Node,
        /// The losing side.
        child: Node,
        /// The processor.
        cpu: CpuId,
        /// Why.
        reason: RevokeReason,
    },
    /// `child` asked `parent` for a processor.
    Request {
        /// The VP.
        vp: VpId,
        /// The parent.
        parent: Node,
        /// The requesting side.
        child: Node,
    },
    /// `child` gave up its processor or its request.
    Release {
        /// The VP.
        vp: VpId,
        /// The parent.
        parent: Node,
        /// The releasing side.
        child: Node,
    },
    /// An instance's timer fired.
    Timer {
        /// The instance.
        instance: InstanceId,
    },
    /// A policy reported an event.
    Policy {
        /// The reporting instance.
        instance: InstanceId,
        /// The event.
        event: PolicyEvent,
    },
}
