//! Write hsched scheduler plug-ins in Rust.
//!
//! hsched loads a scheduler policy from a WebAssembly module that follows
//! its plug-in ABI, version 1 (docs/plugin-abi.md in the hsched
//! repository; `sdk/include/hsched_policy.h` is the same ABI for C). This
//! crate is that ABI for a `#![no_std]` Rust `cdylib` built for
//! `wasm32-unknown-unknown`:
//!
//! - [`sys`]: every host function, type and constant of the header, one
//!   for one, imported from module `hsched` under the header's names;
//! - safe wrappers at the crate root: [`now`], [`parent_vps`],
//!   [`vp_state`], [`grant`], [`revoke`], [`set_timer`], [`param_i64`],
//!   [`vp_param_duration`], [`note`], [`error`], the outgoing message
//!   functions ([`out_i64`], ..., [`send_msg`]) and the rest;
//! - the [`Policy`] trait, one method per hook, and [`export_policy!`],
//!   which exports `hs_abi_version`, `hs_descriptor`, the required hooks
//!   and the optional hooks you name, under the header's export names;
//! - with the default feature `panic-handler`, a `#[panic_handler]` that
//!   traps: hsched then unloads the plug-in and moves its children to the
//!   default scheduler, as for any other trap.
//!
//! Each scheduler instance that names the plug-in is its own module
//! instance with its own memory, so the policy's state is one value that
//! [`export_policy!`] keeps in a static. hsched calls one hook at a time
//! and no host function calls back into the module.
//!
//! ```ignore
//! #![no_std]
//! use hsched_guest::{Cpu, Policy, Refusal, Vp};
//!
//! struct Fifo { /* ... */ }
//! impl Fifo {
//!     const fn new() -> Fifo { Fifo { /* ... */ } }
//! }
//! impl Policy for Fifo {
//!     fn register_vp(&mut self, vp: Vp) -> Result<(), Refusal> { /* ... */ Ok(()) }
//!     fn unregister_vp(&mut self, vp: Vp) { /* ... */ }
//!     fn request(&mut self, vp: Vp) { /* ... */ }
//!     fn release(&mut self, vp: Vp) { /* ... */ }
//!     fn grant(&mut self, parent: Vp, cpu: Cpu) { /* ... */ }
//!     fn revoke(&mut self, parent: Vp, reason: hsched_guest::RevokeReason) { /* ... */ }
//! }
//!
//! hsched_guest::export_policy! {
//!     policy: Fifo = Fifo::new(),
//!     descriptor: c"{\"abi\":1,\"name\":\"fifo\"}",
//!     optional: [timer],
//! }
//! ```
//!
//! `examples/rr.rs` is a whole plug-in: the round robin of
//! `sdk/tutorial/rr.c`. The crate's tests check [`sys`] and
//! [`export_policy!`] against the header, so neither can drift from it;
//! see README.md for how to build a plug-in and where hsched's own checks
//! stop (its CI has no wasm32 target, so it type-checks this crate on the
//! host and does not build or run a Rust plug-in).

#![cfg_attr(not(test), no_std)]
#![warn(missing_docs)]

use core::cell::UnsafeCell;
use core::ffi::CStr;

pub mod sys;

#[cfg(test)]
mod header_test;

/// A virtual processor (`hs_vp`): an index into hsched's VP table, reused
/// after the VP is unregistered.
pub type Vp = sys::hs_vp;
/// A physical processor (`hs_cpu`), `0 .. cpu_count() - 1`.
pub type Cpu = sys::hs_cpu;
/// Time since the epoch, in nanoseconds (`hs_time`).
pub type Time = sys::hs_time;
/// A length of time, in nanoseconds (`hs_duration`).
pub type Duration = sys::hs_duration;

/// "No VP" / "no processor" (`HS_NONE`), for tables of VPs.
pub const NONE: u32 = sys::HS_NONE;
/// A time that never comes (`HS_NEVER`).
pub const NEVER: Time = sys::HS_NEVER;
/// The ABI version this crate speaks (`HSCHED_ABI_VERSION`).
pub const ABI_VERSION: i32 = sys::HSCHED_ABI_VERSION;

fn some_unless(v: u32, none: u32) -> Option<u32> {
    if v == none {
        None
    } else {
        Some(v)
    }
}

fn len32(s: &[u8]) -> u32 {
    // A wasm32 memory holds less than 4 GiB, so a slice in it always fits.
    s.len() as u32
}

// ------------------------------------------------------------- enums

/// The state of a VP (`enum hs_vp_state`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VpState {
    /// Registered, not asking for a processor (`HS_WAITING`).
    Waiting,
    /// Asking for a processor (`HS_READY`).
    Ready,
    /// Holding a physical processor (`HS_RUNNING`), see [`vp_cpu`].
    Running,
}

impl VpState {
    /// The state of an `hs_vp_state` value, `None` for any other.
    pub const fn from_raw(v: i32) -> Option<VpState> {
        match v {
            sys::HS_WAITING => Some(VpState::Waiting),
            sys::HS_READY => Some(VpState::Ready),
            sys::HS_RUNNING => Some(VpState::Running),
            _ => None,
        }
    }
    /// Its `hs_vp_state` value.
    pub const fn raw(self) -> i32 {
        match self {
            VpState::Waiting => sys::HS_WAITING,
            VpState::Ready => sys::HS_READY,
            VpState::Running => sys::HS_RUNNING,
        }
    }
}

/// Why a processor was taken back (`enum hs_revoke_reason`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RevokeReason {
    /// A more important VP needed it, or a quantum ended (`HS_PREEMPTED`).
    Preempted,
    /// The child's budget for this period is used up (`HS_BUDGET_EXHAUSTED`).
    BudgetExhausted,
    /// hsched itself took it (`HS_INFRASTRUCTURE`).
    Infrastructure,
}

impl RevokeReason {
    /// The reason of an `hs_revoke_reason` value, `None` for any other.
    pub const fn from_raw(v: i32) -> Option<RevokeReason> {
        match v {
            sys::HS_PREEMPTED => Some(RevokeReason::Preempted),
            sys::HS_BUDGET_EXHAUSTED => Some(RevokeReason::BudgetExhausted),
            sys::HS_INFRASTRUCTURE => Some(RevokeReason::Infrastructure),
            _ => None,
        }
    }
    /// Its `hs_revoke_reason` value.
    pub const fn raw(self) -> i32 {
        match self {
            RevokeReason::Preempted => sys::HS_PREEMPTED,
            RevokeReason::BudgetExhausted => sys::HS_BUDGET_EXHAUSTED,
            RevokeReason::Infrastructure => sys::HS_INFRASTRUCTURE,
        }
    }
}

/// What the child side of a VP is (`enum hs_node_kind`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeKind {
    /// The top scheduler, one VP per processor (`HS_NODE_TOP`).
    Top,
    /// A scheduler instance (`HS_NODE_INSTANCE`).
    Instance,
    /// A thread (`HS_NODE_THREAD`).
    Thread,
}

impl NodeKind {
    /// The kind of an `hs_node_kind` value, `None` for any other.
    pub const fn from_raw(v: i32) -> Option<NodeKind> {
        match v {
            sys::HS_NODE_TOP => Some(NodeKind::Top),
            sys::HS_NODE_INSTANCE => Some(NodeKind::Instance),
            sys::HS_NODE_THREAD => Some(NodeKind::Thread),
            _ => None,
        }
    }
}

/// The kind of a message about a child (`enum hs_msg_kind`), as
/// [`Policy::msg`] receives it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MsgKind {
    /// Change the child's parent-side parameters (`HS_MSG_SET_PARAMS`);
    /// accepted, hsched merges them into the child's.
    SetParams,
    /// Application-defined (`HS_MSG_APP`): [`msg_kind`] reads its name.
    App,
}

impl MsgKind {
    /// The kind of an `hs_msg_kind` value, `None` for any other.
    pub const fn from_raw(v: i32) -> Option<MsgKind> {
        match v {
            sys::HS_MSG_SET_PARAMS => Some(MsgKind::SetParams),
            sys::HS_MSG_APP => Some(MsgKind::App),
            _ => None,
        }
    }
}

/// A refusal a hook returns (`enum hs_result` other than `HS_OK`). Give
/// the reason with [`error`] first, or build it with [`refuse`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// Any refusal, with its reason (`HS_ERR_REFUSED`).
    Refused,
    /// This kind of message or request is not accepted (`HS_ERR_UNSUPPORTED`).
    Unsupported,
    /// A parameter is missing or malformed (`HS_ERR_PARAM`); hsched takes
    /// the first word of the reason as the key.
    Param,
    /// Admission control refused (`HS_ERR_ADMISSION`); see [`admission`].
    Admission,
}

impl Refusal {
    /// Its `hs_result` value.
    pub const fn raw(self) -> i32 {
        match self {
            Refusal::Refused => sys::HS_ERR_REFUSED,
            Refusal::Unsupported => sys::HS_ERR_UNSUPPORTED,
            Refusal::Param => sys::HS_ERR_PARAM,
            Refusal::Admission => sys::HS_ERR_ADMISSION,
        }
    }
}

/// The `hs_result` of a hook's result: `HS_OK` or the refusal's code.
pub const fn result_code(r: Result<(), Refusal>) -> i32 {
    match r {
        Ok(()) => sys::HS_OK,
        Err(e) => e.raw(),
    }
}

/// Sets the reason of the refusal (see [`error`]) and returns it, for
/// `return Err(refuse(Refusal::Param, "quantum must be positive"))`.
pub fn refuse(kind: Refusal, why: &str) -> Refusal {
    error(why);
    kind
}

// ------------------------------------------------- time and the machine

/// The current time (`HLSGetCurrentTime`).
#[inline]
pub fn now() -> Time {
    // SAFETY: no arguments; the host only reads its clock.
    unsafe { sys::hsched_now() }
}

/// Number of physical processors.
#[inline]
pub fn cpu_count() -> u32 {
    // SAFETY: no arguments.
    unsafe { sys::hsched_cpu_count() }
}

// ------------------------------------------------------ this instance's VPs

/// How many VPs this instance registered with its parent(s).
#[inline]
pub fn parent_vp_count() -> u32 {
    // SAFETY: no arguments.
    unsafe { sys::hsched_parent_vp_count() }
}

/// Parent VP `i` in registration order, `None` out of range.
#[inline]
pub fn parent_vp(i: u32) -> Option<Vp> {
    // SAFETY: any index is valid; out of range returns HS_NONE.
    some_unless(unsafe { sys::hsched_parent_vp(i) }, sys::HS_NONE)
}

/// The parent VPs, in registration order.
pub fn parent_vps() -> impl Iterator<Item = Vp> {
    (0..parent_vp_count()).filter_map(parent_vp)
}

/// How many VPs children registered with this instance.
#[inline]
pub fn child_vp_count() -> u32 {
    // SAFETY: no arguments.
    unsafe { sys::hsched_child_vp_count() }
}

/// Child VP `i` (in no particular order), `None` out of range.
#[inline]
pub fn child_vp(i: u32) -> Option<Vp> {
    // SAFETY: any index is valid; out of range returns HS_NONE.
    some_unless(unsafe { sys::hsched_child_vp(i) }, sys::HS_NONE)
}

/// The child VPs, in no particular order. Do not register or unregister
/// while iterating (only hsched does, between hooks).
pub fn child_vps() -> impl Iterator<Item = Vp> {
    (0..child_vp_count()).filter_map(child_vp)
}

/// How many notifications for this instance wait to be delivered after
/// the current hook.
#[inline]
pub fn notifications_waiting() -> u32 {
    // SAFETY: no arguments.
    unsafe { sys::hsched_notifications_waiting() }
}

// ----------------------------------------------------------------- one VP
//
// `vp` must be one of the instance's parent or child VPs; any other makes
// hsched unload the plug-in (it is not undefined behaviour in the module).

/// The state of parent or child VP `vp`.
pub fn vp_state(vp: Vp) -> VpState {
    // SAFETY: a bad VP unloads the plug-in; no memory is passed.
    let raw = unsafe { sys::hsched_vp_state(vp) };
    match VpState::from_raw(raw) {
        Some(s) => s,
        None => panic!("hsched_vp_state returned an unknown state"),
    }
}

/// The processor `vp` runs on, `None` when it does not run.
#[inline]
pub fn vp_cpu(vp: Vp) -> Option<Cpu> {
    // SAFETY: as for vp_state.
    some_unless(unsafe { sys::hsched_vp_cpu(vp) }, sys::HS_NONE)
}

/// The processor `vp` ran on most recently (inside [`Policy::revoke`], for
/// the revoked parent VP, the one the revocation took), `None` if never.
#[inline]
pub fn vp_last_cpu(vp: Vp) -> Option<Cpu> {
    // SAFETY: as for vp_state.
    some_unless(unsafe { sys::hsched_vp_last_cpu(vp) }, sys::HS_NONE)
}

/// CPU time `vp` has received, net of stolen time, including the segment
/// it runs now.
#[inline]
pub fn vp_received(vp: Vp) -> Duration {
    // SAFETY: as for vp_state.
    unsafe { sys::hsched_vp_received(vp) }
}

/// What the child side of `vp` is.
pub fn vp_child_kind(vp: Vp) -> NodeKind {
    // SAFETY: as for vp_state.
    let raw = unsafe { sys::hsched_vp_child_kind(vp) };
    match NodeKind::from_raw(raw) {
        Some(k) => k,
        None => panic!("hsched_vp_child_kind returned an unknown kind"),
    }
}

/// The thread or instance number on `vp`'s child side, equal for the VPs
/// one multiprocessor child registers; `None` for the top scheduler.
#[inline]
pub fn vp_child_id(vp: Vp) -> Option<u32> {
    // SAFETY: as for vp_state.
    some_unless(unsafe { sys::hsched_vp_child_id(vp) }, sys::HS_NONE)
}

// ------------------------------------------------------------------- tags

/// The tag this instance keeps on child VP `child`, `None` when unset.
#[inline]
pub fn child_tag(child: Vp) -> Option<u32> {
    // SAFETY: as for vp_state.
    some_unless(unsafe { sys::hsched_child_tag(child) }, sys::HS_NO_TAG)
}

/// Sets the tag of child VP `child` (typically an index into the
/// policy's own table).
#[inline]
pub fn set_child_tag(child: Vp, tag: u32) {
    // SAFETY: as for vp_state.
    unsafe { sys::hsched_set_child_tag(child, tag) }
}

/// The tag this instance keeps on parent VP `parent`, `None` when unset.
#[inline]
pub fn parent_tag(parent: Vp) -> Option<u32> {
    // SAFETY: as for vp_state.
    some_unless(unsafe { sys::hsched_parent_tag(parent) }, sys::HS_NO_TAG)
}

/// Sets the tag of parent VP `parent`.
#[inline]
pub fn set_parent_tag(parent: Vp, tag: u32) {
    // SAFETY: as for vp_state.
    unsafe { sys::hsched_set_parent_tag(parent, tag) }
}

// ---------------------------------------------------------------- actions
//
// Queued, and applied in order after the hook returns; hsched checks each
// against the protocol (Regehr 2001, §4.3.4).

/// Grants processor `cpu`, which this instance holds, to ready `child`.
#[inline]
pub fn grant(child: Vp, cpu: Cpu) {
    // SAFETY: as for vp_state; a bad processor also unloads the plug-in.
    unsafe { sys::hsched_grant(child, cpu) }
}

/// Takes the processor back from running `child`, for `reason`.
#[inline]
pub fn revoke(child: Vp, reason: RevokeReason) {
    // SAFETY: as for vp_state.
    unsafe { sys::hsched_revoke(child, reason.raw()) }
}

/// Asks the parent of waiting parent VP `parent` for a processor.
#[inline]
pub fn request(parent: Vp) {
    // SAFETY: as for vp_state.
    unsafe { sys::hsched_request(parent) }
}

/// Gives back parent VP `parent`'s processor, or cancels its request.
#[inline]
pub fn release(parent: Vp) {
    // SAFETY: as for vp_state.
    unsafe { sys::hsched_release(parent) }
}

/// Requests or releases parent VPs so that `want` of them ask for or hold
/// a processor (waiting ones requested in order, surplus ready ones
/// released from the back; running ones are never released here).
#[inline]
pub fn set_parent_demand(want: u32) {
    // SAFETY: any number is valid.
    unsafe { sys::hsched_set_parent_demand(want) }
}

// -------------------------------------------------------------- the timer

/// Arms the instance's one timer for `at`, replacing an earlier setting
/// ([`NEVER`] disarms it; a time in the past fires at the next timer
/// input); [`Policy::timer`] runs at or after `at`.
#[inline]
pub fn set_timer(at: Time) {
    // SAFETY: any time is valid.
    unsafe { sys::hsched_set_timer(at) }
}

/// Disarms the timer.
#[inline]
pub fn cancel_timer() {
    // SAFETY: no arguments.
    unsafe { sys::hsched_cancel_timer() }
}

/// When the timer fires next, `None` when it is disarmed.
#[inline]
pub fn timer() -> Option<Time> {
    // SAFETY: no arguments.
    let t = unsafe { sys::hsched_timer() };
    if t == NEVER {
        None
    } else {
        Some(t)
    }
}

// ------------------------------------------------------------- parameters

/// What reading a parameter found (`enum hs_param_result` and the value).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ParamRead<T> {
    /// The key is not there (`HS_PARAM_ABSENT`): apply your default.
    Absent,
    /// The key holds this value (`HS_PARAM_OK`).
    Ok(T),
    /// The key is there with another kind of value (`HS_PARAM_WRONG`).
    /// hsched checks the kind of every key the descriptor declares, so this
    /// comes only for an undeclared key or another kind than declared.
    Wrong,
}

impl<T> ParamRead<T> {
    /// The value, `None` when absent or of another kind.
    pub fn ok(self) -> Option<T> {
        match self {
            ParamRead::Ok(v) => Some(v),
            _ => None,
        }
    }
    fn from_raw(code: i32, v: T) -> ParamRead<T> {
        match code {
            sys::HS_PARAM_OK => ParamRead::Ok(v),
            sys::HS_PARAM_ABSENT => ParamRead::Absent,
            _ => ParamRead::Wrong,
        }
    }
}

/// A kind of parameter value the numeric readers return: `i64`
/// (integer), `f64` (number), [`Dur`] (duration, nanoseconds) and `bool`.
/// Sealed: these four are the ABI's.
pub trait ParamType: Sized + sealed::Sealed {
    /// Reads `key` of the current parameters.
    fn read(key: &str) -> ParamRead<Self>;
    /// Reads `key` of child VP `child`'s parameters.
    fn read_vp(child: Vp, key: &str) -> ParamRead<Self>;
}

/// A duration in nanoseconds, as [`param`] and [`vp_param`] read one
/// (plain [`Duration`] is a `u64` and would not say which reader to use).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Dur(pub Duration);

mod sealed {
    pub trait Sealed {}
    impl Sealed for i64 {}
    impl Sealed for f64 {}
    impl Sealed for super::Dur {}
    impl Sealed for bool {}
}

macro_rules! param_type {
    ($ty:ty, $raw:ty, $init:expr, $get:ident, $get_vp:ident, |$v:ident| $conv:expr) => {
        impl ParamType for $ty {
            fn read(key: &str) -> ParamRead<Self> {
                let mut $v: $raw = $init;
                // SAFETY: key is a live slice; the out pointer points at a
                // local of the header's type.
                let code = unsafe { sys::$get(key.as_ptr(), len32(key.as_bytes()), &mut $v) };
                ParamRead::from_raw(code, $conv)
            }
            fn read_vp(child: Vp, key: &str) -> ParamRead<Self> {
                let mut $v: $raw = $init;
                // SAFETY: as in read; a bad VP unloads the plug-in.
                let code =
                    unsafe { sys::$get_vp(child, key.as_ptr(), len32(key.as_bytes()), &mut $v) };
                ParamRead::from_raw(code, $conv)
            }
        }
    };
}

param_type!(
    i64,
    sys::hs_i64,
    0,
    hsched_param_i64,
    hsched_vp_param_i64,
    |v| v
);
param_type!(f64, f64, 0.0, hsched_param_f64, hsched_vp_param_f64, |v| v);
param_type!(
    Dur,
    sys::hs_duration,
    0,
    hsched_param_duration,
    hsched_vp_param_duration,
    |v| Dur(v)
);
param_type!(
    bool,
    sys::hs_i32,
    0,
    hsched_param_bool,
    hsched_vp_param_bool,
    |v| v != 0
);

/// Reads `key` of the current parameters: the instance's in
/// [`Policy::create`], the child's in [`Policy::register_vp`], the
/// message's in [`Policy::msg`]. `param::<Dur>("quantum")`.
pub fn param<T: ParamType>(key: &str) -> ParamRead<T> {
    T::read(key)
}

/// Reads `key` of the parameters child VP `child` registered with (or
/// last changed to by an accepted `SetParams`), at any time.
pub fn vp_param<T: ParamType>(child: Vp, key: &str) -> ParamRead<T> {
    T::read_vp(child, key)
}

/// Integer `key` of the current parameters; `None` when absent (or of
/// another kind: see [`param`] to tell the two apart).
pub fn param_i64(key: &str) -> Option<i64> {
    param::<i64>(key).ok()
}

/// Number `key` of the current parameters.
pub fn param_f64(key: &str) -> Option<f64> {
    param::<f64>(key).ok()
}

/// Duration `key` of the current parameters, in nanoseconds.
pub fn param_duration(key: &str) -> Option<Duration> {
    param::<Dur>(key).ok().map(|d| d.0)
}

/// Bool `key` of the current parameters.
pub fn param_bool(key: &str) -> Option<bool> {
    param::<bool>(key).ok()
}

/// Integer `key` of child VP `child`'s parameters.
pub fn vp_param_i64(child: Vp, key: &str) -> Option<i64> {
    vp_param::<i64>(child, key).ok()
}

/// Number `key` of child VP `child`'s parameters.
pub fn vp_param_f64(child: Vp, key: &str) -> Option<f64> {
    vp_param::<f64>(child, key).ok()
}

/// Duration `key` of child VP `child`'s parameters, in nanoseconds.
pub fn vp_param_duration(child: Vp, key: &str) -> Option<Duration> {
    vp_param::<Dur>(child, key).ok().map(|d| d.0)
}

/// Bool `key` of child VP `child`'s parameters.
pub fn vp_param_bool(child: Vp, key: &str) -> Option<bool> {
    vp_param::<bool>(child, key).ok()
}

/// A string the host copied into a buffer of yours: the bytes that fit and
/// the full length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Copied<'a> {
    /// The bytes copied (at most the buffer's length).
    pub bytes: &'a [u8],
    /// The whole string's length in bytes.
    pub full_len: usize,
}

impl<'a> Copied<'a> {
    /// Whether the buffer was too short for the whole string.
    pub fn truncated(&self) -> bool {
        self.full_len > self.bytes.len()
    }
    /// The whole string, `None` when truncated (or not UTF-8, which hsched
    /// never sends).
    pub fn as_str(&self) -> Option<&'a str> {
        if self.truncated() {
            return None;
        }
        core::str::from_utf8(self.bytes).ok()
    }
}

/// String `key` of the current parameters, copied into `buf`.
pub fn param_str<'a>(key: &str, buf: &'a mut [u8]) -> ParamRead<Copied<'a>> {
    let mut len: u32 = 0;
    // SAFETY: key and buf are live slices, cap is buf's length, len a local.
    let code = unsafe {
        sys::hsched_param_str(
            key.as_ptr(),
            len32(key.as_bytes()),
            buf.as_mut_ptr(),
            len32(buf),
            &mut len,
        )
    };
    let full_len = len as usize;
    let n = full_len.min(buf.len());
    ParamRead::from_raw(
        code,
        Copied {
            bytes: &buf[..n],
            full_len,
        },
    )
}

// ---------------------------------------------------- messages to a parent

/// Adds integer `key` to the outgoing parameters.
pub fn out_i64(key: &str, v: i64) {
    // SAFETY: key is a live slice.
    unsafe { sys::hsched_out_i64(key.as_ptr(), len32(key.as_bytes()), v) }
}

/// Adds number `key` to the outgoing parameters; a NaN or infinity is
/// garbage and unloads the plug-in.
pub fn out_f64(key: &str, v: f64) {
    // SAFETY: key is a live slice.
    unsafe { sys::hsched_out_f64(key.as_ptr(), len32(key.as_bytes()), v) }
}

/// Adds duration `key` (nanoseconds) to the outgoing parameters.
pub fn out_duration(key: &str, v: Duration) {
    // SAFETY: key is a live slice.
    unsafe { sys::hsched_out_duration(key.as_ptr(), len32(key.as_bytes()), v) }
}

/// Adds bool `key` to the outgoing parameters.
pub fn out_bool(key: &str, v: bool) {
    // SAFETY: key is a live slice.
    unsafe { sys::hsched_out_bool(key.as_ptr(), len32(key.as_bytes()), i32::from(v)) }
}

/// Adds string `key` to the outgoing parameters.
pub fn out_str(key: &str, v: &str) {
    // SAFETY: key and v are live slices.
    unsafe {
        sys::hsched_out_str(
            key.as_ptr(),
            len32(key.as_bytes()),
            v.as_ptr(),
            len32(v.as_bytes()),
        )
    }
}

/// Sends the outgoing parameters to the parent of parent VP `parent`: as
/// `SetParams` when `kind` is empty, else as an application message of
/// that kind. Sending clears the outgoing parameters; a refusal is noted in
/// the trace and the sender is not told (Regehr 2001, §4.3.1.2).
pub fn send_msg(parent: Vp, kind: &str) {
    // SAFETY: kind is a live slice; a bad VP unloads the plug-in.
    unsafe { sys::hsched_send_msg(parent, kind.as_ptr(), len32(kind.as_bytes())) }
}

/// In [`Policy::msg`] for an application message: its kind name, copied
/// into `buf`.
pub fn msg_kind(buf: &mut [u8]) -> Copied<'_> {
    // SAFETY: buf is a live slice and cap its length.
    let full_len = unsafe { sys::hsched_msg_kind(buf.as_mut_ptr(), len32(buf)) } as usize;
    let n = full_len.min(buf.len());
    Copied {
        bytes: &buf[..n],
        full_len,
    }
}

// ------------------------------------------------------ refusals and notes

/// Sets the reason of the refusal the current hook is about to return;
/// the last call wins.
pub fn error(msg: &str) {
    // SAFETY: msg is a live slice.
    unsafe { sys::hsched_error(msg.as_ptr(), len32(msg.as_bytes())) }
}

/// For a [`Refusal::Admission`]: the load the instance would reach and its
/// cap, as fractions of one processor.
pub fn admission(load: f64, cap: f64) {
    // SAFETY: no memory is passed.
    unsafe { sys::hsched_admission(load, cap) }
}

/// Records a note in the trace when tracing is on (cheap when not; check
/// [`tracing`] before building an expensive one).
pub fn note(msg: &str) {
    // SAFETY: msg is a live slice.
    unsafe { sys::hsched_note(msg.as_ptr(), len32(msg.as_bytes())) }
}

/// Whether the run is being traced.
#[inline]
pub fn tracing() -> bool {
    // SAFETY: no arguments.
    unsafe { sys::hsched_tracing() != 0 }
}

// ------------------------------------------------------------------ hooks

/// A scheduler policy: one method per hook of the ABI (docs/plugin-abi.md,
/// "Hooks"). [`export_policy!`] exports the required ones and the optional
/// ones you name; the defaults here do what hsched does when an optional
/// hook is absent, so naming one you did not write changes nothing.
pub trait Policy {
    /// `hs_create`: the instance is built from its current (instance)
    /// parameters; refuse them with [`Refusal::Param`] or
    /// [`Refusal::Refused`]. No VP exists yet and no action may be queued.
    fn create(&mut self) -> Result<(), Refusal> {
        Ok(())
    }
    /// `hs_init`: the first hook with the hierarchy; actions are allowed.
    fn init(&mut self) {}
    /// `hs_deinit`: the last hook; the instance has no children.
    fn deinit(&mut self) {}
    /// `hs_register_vp`: a child registers `vp`, waiting; its parameters
    /// are current. A refusal leaves nothing registered.
    fn register_vp(&mut self, vp: Vp) -> Result<(), Refusal>;
    /// `hs_unregister_vp`: a child unregisters `vp`, waiting; forget it.
    fn unregister_vp(&mut self, vp: Vp);
    /// `hs_request`: child `vp` went from waiting to ready (`VP_Request`).
    fn request(&mut self, vp: Vp);
    /// `hs_release`: child `vp` went to waiting (`VP_Release`); if it ran,
    /// its processor is free again in this instance.
    fn release(&mut self, vp: Vp);
    /// `hs_grant`: parent VP `parent` now runs on `cpu` (`VP_Grant`): grant
    /// `cpu` to a ready child at once, or release `parent`.
    fn grant(&mut self, parent: Vp, cpu: Cpu);
    /// `hs_revoke`: parent VP `parent` lost its processor, now
    /// [`vp_last_cpu`]`(parent)` (`VP_Revoke`): revoke it at once from the
    /// child on it, passing `reason` on.
    fn revoke(&mut self, parent: Vp, reason: RevokeReason);
    /// `hs_msg`: a message about child `vp`; its parameters are current.
    /// An accepted `SetParams` is merged into the child's parameters by
    /// hsched. Default: [`Refusal::Unsupported`].
    fn msg(&mut self, vp: Vp, kind: MsgKind) -> Result<(), Refusal> {
        let _ = (vp, kind);
        Err(Refusal::Unsupported)
    }
    /// `hs_timer`: the instance's timer expired (`TimerCallback`).
    fn timer(&mut self) {}
    /// `hs_check_invariants`: internal consistency (`CheckInvar`); must not
    /// queue actions. Default: `Ok`.
    fn check_invariants(&mut self) -> Result<(), Refusal> {
        Ok(())
    }
    /// `hs_describe`: a one-line description of the instance's parameters,
    /// for `hsched tree`. Default: empty.
    fn describe(&mut self) -> &CStr {
        c""
    }
    /// `hs_child_deadline`: the deadline the instance holds for child `vp`
    /// now, or [`NEVER`]; for displays. Default: [`NEVER`].
    fn child_deadline(&mut self, vp: Vp) -> Time {
        let _ = vp;
        NEVER
    }
}

/// The one value of a policy's state that [`export_policy!`] keeps in a
/// static.
///
/// A module instance runs one hook at a time on one thread, and no host
/// function calls back into the module, so each hook may hold the only
/// `&mut` to the state for as long as it runs.
pub struct Instance<T>(UnsafeCell<T>);

// SAFETY: only the hooks export_policy! generates reach the value, through
// the unsafe `get`, whose contract is the single-threaded, non-reentrant
// calling of a WebAssembly module instance.
unsafe impl<T> Sync for Instance<T> {}

impl<T> Instance<T> {
    /// A state holding `value`; `const`, for a static.
    pub const fn new(value: T) -> Instance<T> {
        Instance(UnsafeCell::new(value))
    }
    /// The state, mutably.
    ///
    /// # Safety
    ///
    /// No other reference to the value may be alive: call it once per
    /// hook, from the hook hsched called, and not from two threads.
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn get(&self) -> &mut T {
        // SAFETY: the caller guarantees exclusive access.
        unsafe { &mut *self.0.get() }
    }
}

/// Exports a [`Policy`] as a plug-in: `hs_abi_version`, `hs_descriptor`,
/// the required hooks (`hs_register_vp`, `hs_unregister_vp`, `hs_request`,
/// `hs_release`, `hs_grant`, `hs_revoke`) and the optional hooks named in
/// `optional` (any of `create`, `init`, `deinit`, `msg`, `timer`,
/// `check_invariants`, `describe`, `child_deadline`), each under the
/// header's export name and signature.
///
/// ```ignore
/// hsched_guest::export_policy! {
///     policy: Rr = Rr::new(),            // the type and a const initializer
///     descriptor: DESCRIPTOR,            // a &'static CStr: the JSON
///     optional: [create, timer],         // hooks hsched should call
/// }
/// ```
///
/// Use it once per crate; the state is a static the hooks borrow one at a
/// time. An optional hook left out is absent from the module and hsched
/// does its default (docs/plugin-abi.md, "Hooks").
#[macro_export]
macro_rules! export_policy {
    (
        policy: $ty:ty = $init:expr,
        descriptor: $descriptor:expr
        $(, optional: [$($hook:ident),* $(,)?])?
        $(,)?
    ) => {
        const _: () = {
            static __HSCHED_STATE: $crate::Instance<$ty> = $crate::Instance::new($init);
            const __HSCHED_DESCRIPTOR: &'static ::core::ffi::CStr = $descriptor;

            #[export_name = "hs_abi_version"]
            unsafe extern "C" fn hs_abi_version() -> $crate::sys::hs_i32 {
                $crate::sys::HSCHED_ABI_VERSION
            }
            #[export_name = "hs_descriptor"]
            unsafe extern "C" fn hs_descriptor() -> *const u8 {
                __HSCHED_DESCRIPTOR.as_ptr().cast()
            }
            #[export_name = "hs_register_vp"]
            unsafe extern "C" fn hs_register_vp(vp: $crate::sys::hs_vp) -> $crate::sys::hs_i32 {
                let p = unsafe { __HSCHED_STATE.get() };
                $crate::result_code($crate::Policy::register_vp(p, vp))
            }
            #[export_name = "hs_unregister_vp"]
            unsafe extern "C" fn hs_unregister_vp(vp: $crate::sys::hs_vp) {
                let p = unsafe { __HSCHED_STATE.get() };
                $crate::Policy::unregister_vp(p, vp)
            }
            #[export_name = "hs_request"]
            unsafe extern "C" fn hs_request(vp: $crate::sys::hs_vp) {
                let p = unsafe { __HSCHED_STATE.get() };
                $crate::Policy::request(p, vp)
            }
            #[export_name = "hs_release"]
            unsafe extern "C" fn hs_release(vp: $crate::sys::hs_vp) {
                let p = unsafe { __HSCHED_STATE.get() };
                $crate::Policy::release(p, vp)
            }
            #[export_name = "hs_grant"]
            unsafe extern "C" fn hs_grant(parent: $crate::sys::hs_vp, cpu: $crate::sys::hs_cpu) {
                let p = unsafe { __HSCHED_STATE.get() };
                $crate::Policy::grant(p, parent, cpu)
            }
            #[export_name = "hs_revoke"]
            unsafe extern "C" fn hs_revoke(parent: $crate::sys::hs_vp, reason: $crate::sys::hs_i32) {
                let p = unsafe { __HSCHED_STATE.get() };
                let reason = match $crate::RevokeReason::from_raw(reason) {
                    Some(r) => r,
                    None => panic!("hs_revoke: unknown reason"),
                };
                $crate::Policy::revoke(p, parent, reason)
            }
            $($($crate::__export_hook!($hook, __HSCHED_STATE);)*)?
        };
    };
}

/// One optional hook of [`export_policy!`]; not for direct use.
#[doc(hidden)]
#[macro_export]
macro_rules! __export_hook {
    (create, $state:ident) => {
        #[export_name = "hs_create"]
        unsafe extern "C" fn hs_create() -> $crate::sys::hs_i32 {
            let p = unsafe { $state.get() };
            $crate::result_code($crate::Policy::create(p))
        }
    };
    (init, $state:ident) => {
        #[export_name = "hs_init"]
        unsafe extern "C" fn hs_init() {
            let p = unsafe { $state.get() };
            $crate::Policy::init(p)
        }
    };
    (deinit, $state:ident) => {
        #[export_name = "hs_deinit"]
        unsafe extern "C" fn hs_deinit() {
            let p = unsafe { $state.get() };
            $crate::Policy::deinit(p)
        }
    };
    (msg, $state:ident) => {
        #[export_name = "hs_msg"]
        unsafe extern "C" fn hs_msg(
            vp: $crate::sys::hs_vp,
            kind: $crate::sys::hs_i32,
        ) -> $crate::sys::hs_i32 {
            let p = unsafe { $state.get() };
            match $crate::MsgKind::from_raw(kind) {
                Some(k) => $crate::result_code($crate::Policy::msg(p, vp, k)),
                None => $crate::sys::HS_ERR_UNSUPPORTED,
            }
        }
    };
    (timer, $state:ident) => {
        #[export_name = "hs_timer"]
        unsafe extern "C" fn hs_timer() {
            let p = unsafe { $state.get() };
            $crate::Policy::timer(p)
        }
    };
    (check_invariants, $state:ident) => {
        #[export_name = "hs_check_invariants"]
        unsafe extern "C" fn hs_check_invariants() -> $crate::sys::hs_i32 {
            let p = unsafe { $state.get() };
            $crate::result_code($crate::Policy::check_invariants(p))
        }
    };
    (describe, $state:ident) => {
        #[export_name = "hs_describe"]
        unsafe extern "C" fn hs_describe() -> *const u8 {
            let p = unsafe { $state.get() };
            $crate::Policy::describe(p).as_ptr().cast()
        }
    };
    (child_deadline, $state:ident) => {
        #[export_name = "hs_child_deadline"]
        unsafe extern "C" fn hs_child_deadline(vp: $crate::sys::hs_vp) -> $crate::sys::hs_time {
            let p = unsafe { $state.get() };
            $crate::Policy::child_deadline(p, vp)
        }
    };
}

/// Traps: a panic in a plug-in ends like any other trap, hsched unloads it
/// and moves its children to the default scheduler (docs/plugin-abi.md,
/// "Sandbox and fallback"). Only for wasm32, and only with the default
/// feature `panic-handler`; turn that off to bring your own.
#[cfg(all(feature = "panic-handler", target_arch = "wasm32", not(test)))]
#[panic_handler]
fn panic(_: &core::panic::PanicInfo<'_>) -> ! {
    core::arch::wasm32::unreachable()
}
