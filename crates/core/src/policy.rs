//! The loadable-scheduler interface (Regehr 2001, Table 4.1 and appendix B).
//!
//! A [`Policy`] is a passive state machine. The HSI calls one of its hooks
//! when something happens to a virtual processor it shares; the policy reacts
//! by asking for actions through its [`Ctx`]: grant or revoke a child VP,
//! request or release a parent VP, set its timer, send a message to a parent.
//! The HSI applies the actions in order once the hook returns, checks each
//! against the protocol of §4.3.4 and delivers the resulting notifications,
//! depth first. Policies never call each other or the backend.

use crate::ctx::Ctx;
use crate::ids::{CpuId, VpId};
use crate::params::{ParamError, Params};
use crate::time::Instant;
use std::fmt;

/// Why a parent took a processor back from a child.
///
/// Passed down the hierarchy so that, for example, a probabilistic
/// reservation built from Join (Regehr 2001, §6.2.2) can tell a preemption from
/// an exhausted budget.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RevokeReason {
    /// A more important VP needed the processor (or the quantum ended).
    Preempted,
    /// The child's budget for this period is used up.
    BudgetExhausted,
    /// The HSI itself took the processor (an operation such as moving a
    /// thread or destroying an instance).
    Infrastructure,
}

/// A message from a child to its parent, or from the control interface to a
/// scheduler about one of its child VPs (Regehr 2001, §4.3.1.2). Messages have no
/// intrinsic meaning beyond these shapes; each policy documents what it
/// accepts.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Msg {
    /// Change the parent-side parameters of the VP the message is about:
    /// priority under FP, share and warp under PS, amount and period under
    /// Rez (a reservation change), and so on.
    SetParams(Params),
    /// An application-defined message (cooperative polling, progress
    /// metrics, ...): a kind and its parameters.
    App {
        /// What kind of message, e.g. `"coop_poll"`.
        kind: String,
        /// Its fields.
        params: Params,
    },
}

/// A policy refused a request (a registration, a message, parameters).
#[derive(Clone, Debug, PartialEq)]
pub enum PolicyError {
    /// A parameter was missing or malformed.
    Param(ParamError),
    /// Admission control refused the request; `load` is the utilization the
    /// scheduler would have reached and `cap` its limit.
    AdmissionRefused {
        /// Utilization after the request, in [0, ∞).
        load: f64,
        /// The configured admission cap.
        cap: f64,
        /// The part of `load` held only until the next period start
        /// settles it (a reservation change not yet in force, a Rez-FB
        /// correction for stolen time); 0 when none. A file checker counts
        /// what each child asked for, so it cannot foresee this part.
        held: f64,
    },
    /// The policy does not accept this kind of message or request.
    Unsupported(String),
    /// Any other refusal, with its reason.
    Refused(String),
}

impl fmt::Display for PolicyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PolicyError::Param(e) => write!(f, "{e}"),
            PolicyError::AdmissionRefused { load, cap, held } => {
                write!(
                    f,
                    "admission refused: the load would reach {:.1}% against a cap of {:.1}%",
                    load * 100.0,
                    cap * 100.0
                )?;
                if *held > 0.0 {
                    write!(
                        f,
                        ", {:.1}% of it held until the next period start puts pending changes in force",
                        held * 100.0
                    )?;
                }
                Ok(())
            }
            PolicyError::Unsupported(what) => write!(f, "unsupported: {what}"),
            PolicyError::Refused(why) => write!(f, "refused: {why}"),
        }
    }
}
impl std::error::Error for PolicyError {}

impl From<ParamError> for PolicyError {
    fn from(e: ParamError) -> Self {
        PolicyError::Param(e)
    }
}

/// A scheduling policy: the code of a loadable scheduler. One value is one
/// scheduler instance (no static data, §4.2).
///
/// Hooks that are about a *child* VP (`register_vp`, `unregister_vp`,
/// `request`, `release`, `msg`) receive the child's VP; hooks about a
/// *parent* VP (`grant`, `revoke`) receive the parent VP. A policy finds its
/// parent VPs with [`Ctx::parent_vps`].
///
/// The protocol (§4.3.4) a policy must follow, checked by the HSI:
/// - granted a processor, grant it at once to a child with a pending
///   request, or release it;
/// - revoked a processor, revoke it at once from the child holding it;
/// - when a child releases a processor, grant it to another ready child or
///   release it;
/// - request a parent VP only while it is waiting; revoke only from a child
///   VP that is running on a processor this instance holds.
pub trait Policy: Send + 'static {
    /// The policy's name as written in hierarchy files (`"fp"`, `"rez"`).
    fn policy_name(&self) -> &'static str;

    /// How many VPs this instance registers with a parent able to offer
    /// `available` processors. Multiprocessor policies take all of them
    /// (the default); uniprocessor policies return 1 (§4.3.11).
    fn parent_vps(&self, available: usize) -> usize {
        available
    }

    /// How many processors this instance can offer each child, given how
    /// many parent VPs it has. Join overrides this to 1.
    fn cpus_offered(&self, parent_vps: usize) -> usize {
        parent_vps
    }

    /// Fired first, once, when the instance is created (`Init`).
    fn init(&mut self, _ctx: &mut Ctx<'_>) {}

    /// Fired last, once, when the instance is destroyed; it has no children
    /// then (`Deinit`).
    fn deinit(&mut self, _ctx: &mut Ctx<'_>) {}

    /// A child registers `vp` with this instance; the VP is waiting.
    /// `params` are the parent-side parameters (priority, share, amount and
    /// period, ...). Refusing leaves nothing registered (`RegisterVP`).
    ///
    /// # Errors
    /// Bad parameters, or admission refused.
    fn register_vp(
        &mut self,
        ctx: &mut Ctx<'_>,
        vp: VpId,
        params: &Params,
    ) -> Result<(), PolicyError>;

    /// A child unregisters `vp`; it is waiting (`UnregisterVP`).
    fn unregister_vp(&mut self, ctx: &mut Ctx<'_>, vp: VpId);

    /// Child VP `vp` went from waiting to ready (`VP_Request`).
    fn request(&mut self, ctx: &mut Ctx<'_>, vp: VpId);

    /// Child VP `vp` went to waiting (`VP_Release`); if it was running, the
    /// processor it held is free again in this instance.
    fn release(&mut self, ctx: &mut Ctx<'_>, vp: VpId);

    /// Parent VP `parent_vp` now runs on `cpu` (`VP_Grant`).
    fn grant(&mut self, ctx: &mut Ctx<'_>, parent_vp: VpId, cpu: CpuId);

    /// Parent VP `parent_vp` lost its processor and is ready again
    /// (`VP_Revoke`). The processor is `ctx.vp_last_cpu(parent_vp)`.
    fn revoke(&mut self, ctx: &mut Ctx<'_>, parent_vp: VpId, reason: RevokeReason);

    /// A message about child VP `vp`, from the child or from the control
    /// interface (`Msg`).
    ///
    /// # Errors
    /// The message is not understood or is refused.
    fn msg(&mut self, _ctx: &mut Ctx<'_>, _vp: VpId, msg: &Msg) -> Result<(), PolicyError> {
        Err(PolicyError::Unsupported(format!(
            "{} does not accept {msg:?}",
            self.policy_name()
        )))
    }

    /// The instance's timer expired (`TimerCallback`).
    fn timer(&mut self, _ctx: &mut Ctx<'_>) {}

    /// Checks internal consistency (`CheckInvar`); run by the protocol
    /// checker after every input when checking is on.
    ///
    /// # Errors
    /// A description of the broken invariant.
    fn check_invariants(&self, _ctx: &Ctx<'_>) -> Result<(), String> {
        Ok(())
    }

    /// Keys this policy writes into its children's parameters itself
    /// (answers a child reads back, such as coop's OUT values), as opposed
    /// to the ones a child is given. A thread that leaves without new
    /// parameters (`Hsi::set_default` moving threads, or the place
    /// `Hsi::begin_reservation` keeps for `end_reservation`) takes the
    /// others along, not these: its next scheduler would refuse them.
    fn written_keys(&self) -> &'static [&'static str] {
        &[]
    }

    /// Whether this instance's protocol violations are faults that unload
    /// it ([`crate::Fault`], [`crate::Hsi::unload`]) rather than errors of
    /// the input: true for sandboxed plug-ins, whose mistakes must not stop
    /// the run. Built-in policies keep the default, false.
    fn unload_on_fault(&self) -> bool {
        false
    }

    /// The instance's parameters in one line, for `hsched tree`.
    fn describe(&self) -> String {
        String::new()
    }

    /// The deadline this instance holds for child VP `vp` now, if it
    /// schedules by deadlines (the end of a reservation's current period, a
    /// BEST job's deadline); `None` otherwise. For displays such as
    /// `hsched ctl show`; it changes nothing.
    fn child_deadline(&self, _ctx: &Ctx<'_>, _vp: VpId) -> Option<Instant> {
        None
    }
}
