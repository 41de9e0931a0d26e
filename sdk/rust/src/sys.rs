//! The raw ABI: every type, constant and host function of
//! `sdk/include/hsched_policy.h`, one for one, under the header's names.
//!
//! The functions are imported from WebAssembly module `hsched` under the
//! header's import names (`now`, `grant`, ...); the Rust names are the C
//! ones (`hsched_now`, `hsched_grant`, ...). docs/plugin-abi.md documents
//! each. Pointers are addresses in the plug-in's linear memory and lengths
//! are in bytes; a VP that is not one of the instance's own, a processor
//! that does not exist or a pointer outside memory is garbage, and hsched
//! unloads the plug-in. The safe wrappers at the crate root pass only
//! valid pointers. The crate's tests compare this file with the header.

#![allow(non_camel_case_types)]

/// `signed char`.
pub type hs_i8 = i8;
/// `int`.
pub type hs_i32 = i32;
/// `unsigned int`.
pub type hs_u32 = u32;
/// `long long`.
pub type hs_i64 = i64;
/// `unsigned long long`.
pub type hs_u64 = u64;

/// A virtual processor: an index into hsched's dense VP table. Slots are
/// reused after a VP is unregistered, so forget a VP in `hs_unregister_vp`.
pub type hs_vp = hs_u32;
/// A physical processor, numbered `0 .. hsched_cpu_count() - 1`.
pub type hs_cpu = hs_u32;
/// Time since the epoch, in nanoseconds.
pub type hs_time = hs_u64;
/// A length of time, in nanoseconds.
pub type hs_duration = hs_u64;

macro_rules! constants {
    ($($(#[$m:meta])* $name:ident: $ty:ty = $value:expr;)*) => {
        $($(#[$m])* pub const $name: $ty = $value;)*
        /// Every constant above with its value, for the header test.
        #[cfg(test)]
        pub(crate) const ALL_CONSTANTS: &[(&str, i128)] =
            &[$((stringify!($name), $name as i128)),*];
    };
}

constants! {
    /// The ABI version this crate describes; `hs_abi_version` returns it.
    HSCHED_ABI_VERSION: hs_i32 = 1;

    /// "No VP" / "no processor", as the host functions return them.
    HS_NONE: hs_u32 = 0xFFFF_FFFF;
    /// A time that never comes (a disarmed timer).
    HS_NEVER: hs_time = 0xFFFF_FFFF_FFFF_FFFF;
    /// The value `hsched_child_tag` / `hsched_parent_tag` return when unset.
    HS_NO_TAG: hs_u32 = 0xFFFF_FFFF;

    /// `enum hs_vp_state`: registered, not asking for a processor.
    HS_WAITING: hs_i32 = 0;
    /// `enum hs_vp_state`: asking for a processor.
    HS_READY: hs_i32 = 1;
    /// `enum hs_vp_state`: holding a physical processor (`hsched_vp_cpu`).
    HS_RUNNING: hs_i32 = 2;

    /// `enum hs_revoke_reason`: a more important VP needed it, or a quantum ended.
    HS_PREEMPTED: hs_i32 = 0;
    /// `enum hs_revoke_reason`: the child's budget for this period is used up.
    HS_BUDGET_EXHAUSTED: hs_i32 = 1;
    /// `enum hs_revoke_reason`: hsched itself took it (moving a thread, ...).
    HS_INFRASTRUCTURE: hs_i32 = 2;

    /// `enum hs_msg_kind`: change the parent-side parameters of a child.
    HS_MSG_SET_PARAMS: hs_i32 = 0;
    /// `enum hs_msg_kind`: application-defined, a kind name and parameters.
    HS_MSG_APP: hs_i32 = 1;

    /// `enum hs_node_kind`: the top scheduler (one VP per processor).
    HS_NODE_TOP: hs_i32 = 0;
    /// `enum hs_node_kind`: a scheduler instance.
    HS_NODE_INSTANCE: hs_i32 = 1;
    /// `enum hs_node_kind`: a thread.
    HS_NODE_THREAD: hs_i32 = 2;

    /// `enum hs_result`: accepted.
    HS_OK: hs_i32 = 0;
    /// `enum hs_result`: any refusal, with its reason.
    HS_ERR_REFUSED: hs_i32 = 1;
    /// `enum hs_result`: this kind of message or request is not accepted.
    HS_ERR_UNSUPPORTED: hs_i32 = 2;
    /// `enum hs_result`: a parameter is missing or malformed.
    HS_ERR_PARAM: hs_i32 = 3;
    /// `enum hs_result`: admission control refused (see `hsched_admission`).
    HS_ERR_ADMISSION: hs_i32 = 4;

    /// `enum hs_param_result`: the key is not there; `*out` is unchanged.
    HS_PARAM_ABSENT: hs_i32 = 0;
    /// `enum hs_param_result`: `*out` holds the value.
    HS_PARAM_OK: hs_i32 = 1;
    /// `enum hs_param_result`: the key is there with another kind of value.
    HS_PARAM_WRONG: hs_i32 = -1;
}

#[link(wasm_import_module = "hsched")]
extern "C" {
    // -- time and the machine

    /// The current time (`HLSGetCurrentTime`).
    #[link_name = "now"]
    pub fn hsched_now() -> hs_time;
    /// Number of physical processors.
    #[link_name = "cpu_count"]
    pub fn hsched_cpu_count() -> hs_u32;

    // -- this instance's VPs

    /// How many VPs this instance registered with its parent(s).
    #[link_name = "parent_vp_count"]
    pub fn hsched_parent_vp_count() -> hs_u32;
    /// Parent VP `i`, in registration order; `HS_NONE` out of range.
    #[link_name = "parent_vp"]
    pub fn hsched_parent_vp(i: hs_u32) -> hs_vp;
    /// How many VPs children registered with this instance.
    #[link_name = "child_vp_count"]
    pub fn hsched_child_vp_count() -> hs_u32;
    /// Child VP `i`, in no particular order; `HS_NONE` out of range.
    #[link_name = "child_vp"]
    pub fn hsched_child_vp(i: hs_u32) -> hs_vp;
    /// How many notifications for this instance wait to be delivered after
    /// the current hook.
    #[link_name = "notifications_waiting"]
    pub fn hsched_notifications_waiting() -> hs_u32;

    // -- one VP

    /// `enum hs_vp_state` of the VP.
    #[link_name = "vp_state"]
    pub fn hsched_vp_state(vp: hs_vp) -> hs_i32;
    /// The processor the VP runs on, or `HS_NONE`.
    #[link_name = "vp_cpu"]
    pub fn hsched_vp_cpu(vp: hs_vp) -> hs_cpu;
    /// The processor it ran on most recently, or `HS_NONE`; inside
    /// `hs_revoke`, for the revoked parent VP, the one the revocation took.
    #[link_name = "vp_last_cpu"]
    pub fn hsched_vp_last_cpu(vp: hs_vp) -> hs_cpu;
    /// CPU time the VP has received, net of stolen time, including the
    /// segment it runs now.
    #[link_name = "vp_received"]
    pub fn hsched_vp_received(vp: hs_vp) -> hs_duration;
    /// `enum hs_node_kind` of the VP's child side.
    #[link_name = "vp_child_kind"]
    pub fn hsched_vp_child_kind(vp: hs_vp) -> hs_i32;
    /// An id of the VP's child side (thread or instance number).
    #[link_name = "vp_child_id"]
    pub fn hsched_vp_child_id(vp: hs_vp) -> hs_u32;

    // -- tags

    /// The tag this instance keeps on child VP `child` (`HS_NO_TAG` unset).
    #[link_name = "child_tag"]
    pub fn hsched_child_tag(child: hs_vp) -> hs_u32;
    /// Sets the tag of child VP `child`.
    #[link_name = "set_child_tag"]
    pub fn hsched_set_child_tag(child: hs_vp, tag: hs_u32);
    /// The tag this instance keeps on parent VP `parent` (`HS_NO_TAG` unset).
    #[link_name = "parent_tag"]
    pub fn hsched_parent_tag(parent: hs_vp) -> hs_u32;
    /// Sets the tag of parent VP `parent`.
    #[link_name = "set_parent_tag"]
    pub fn hsched_set_parent_tag(parent: hs_vp, tag: hs_u32);

    // -- actions (queued; applied in order after the hook returns)

    /// Grants processor `cpu`, which this instance holds, to ready `child`.
    #[link_name = "grant"]
    pub fn hsched_grant(child: hs_vp, cpu: hs_cpu);
    /// Takes the processor back from running `child`; `reason` is an
    /// `enum hs_revoke_reason`.
    #[link_name = "revoke"]
    pub fn hsched_revoke(child: hs_vp, reason: hs_i32);
    /// Asks the parent of waiting parent VP `parent` for a processor.
    #[link_name = "request"]
    pub fn hsched_request(parent: hs_vp);
    /// Gives back parent VP `parent`'s processor, or cancels its request.
    #[link_name = "release"]
    pub fn hsched_release(parent: hs_vp);
    /// Requests or releases parent VPs so that `want` of them ask for or
    /// hold a processor (running ones are never released here).
    #[link_name = "set_parent_demand"]
    pub fn hsched_set_parent_demand(want: hs_u32);

    // -- the timer

    /// Arms the timer, replacing an earlier setting; `HS_NEVER` disarms it.
    #[link_name = "set_timer"]
    pub fn hsched_set_timer(at: hs_time);
    /// Disarms the timer.
    #[link_name = "cancel_timer"]
    pub fn hsched_cancel_timer();
    /// When the timer fires next, or `HS_NEVER`.
    #[link_name = "timer"]
    pub fn hsched_timer() -> hs_time;

    // -- parameters (each returns an enum hs_param_result)

    /// Reads integer `key` of the current parameters.
    #[link_name = "param_i64"]
    pub fn hsched_param_i64(key: *const u8, key_len: hs_u32, out: *mut hs_i64) -> hs_i32;
    /// Reads number `key` of the current parameters.
    #[link_name = "param_f64"]
    pub fn hsched_param_f64(key: *const u8, key_len: hs_u32, out: *mut f64) -> hs_i32;
    /// Reads duration `key` of the current parameters, in nanoseconds.
    #[link_name = "param_duration"]
    pub fn hsched_param_duration(key: *const u8, key_len: hs_u32, out: *mut hs_duration) -> hs_i32;
    /// Reads bool `key` of the current parameters (0 or 1).
    #[link_name = "param_bool"]
    pub fn hsched_param_bool(key: *const u8, key_len: hs_u32, out: *mut hs_i32) -> hs_i32;
    /// Copies at most `cap` bytes of string `key` to `buf` (not
    /// NUL-terminated) and stores its full length in `*len`.
    #[link_name = "param_str"]
    pub fn hsched_param_str(
        key: *const u8,
        key_len: hs_u32,
        buf: *mut u8,
        cap: hs_u32,
        len: *mut hs_u32,
    ) -> hs_i32;

    /// Reads integer `key` of child VP `child`'s parameters.
    #[link_name = "vp_param_i64"]
    pub fn hsched_vp_param_i64(
        child: hs_vp,
        key: *const u8,
        key_len: hs_u32,
        out: *mut hs_i64,
    ) -> hs_i32;
    /// Reads number `key` of child VP `child`'s parameters.
    #[link_name = "vp_param_f64"]
    pub fn hsched_vp_param_f64(
        child: hs_vp,
        key: *const u8,
        key_len: hs_u32,
        out: *mut f64,
    ) -> hs_i32;
    /// Reads duration `key` of child VP `child`'s parameters.
    #[link_name = "vp_param_duration"]
    pub fn hsched_vp_param_duration(
        child: hs_vp,
        key: *const u8,
        key_len: hs_u32,
        out: *mut hs_duration,
    ) -> hs_i32;
    /// Reads bool `key` of child VP `child`'s parameters.
    #[link_name = "vp_param_bool"]
    pub fn hsched_vp_param_bool(
        child: hs_vp,
        key: *const u8,
        key_len: hs_u32,
        out: *mut hs_i32,
    ) -> hs_i32;

    // -- messages to a parent

    /// Adds integer `key` to the outgoing parameters.
    #[link_name = "out_i64"]
    pub fn hsched_out_i64(key: *const u8, key_len: hs_u32, v: hs_i64);
    /// Adds number `key` to the outgoing parameters (finite only).
    #[link_name = "out_f64"]
    pub fn hsched_out_f64(key: *const u8, key_len: hs_u32, v: f64);
    /// Adds duration `key` (nanoseconds) to the outgoing parameters.
    #[link_name = "out_duration"]
    pub fn hsched_out_duration(key: *const u8, key_len: hs_u32, v: hs_duration);
    /// Adds bool `key` (0 or not) to the outgoing parameters.
    #[link_name = "out_bool"]
    pub fn hsched_out_bool(key: *const u8, key_len: hs_u32, v: hs_i32);
    /// Adds string `key` to the outgoing parameters.
    #[link_name = "out_str"]
    pub fn hsched_out_str(key: *const u8, key_len: hs_u32, v: *const u8, v_len: hs_u32);
    /// Sends the outgoing parameters to the parent of parent VP `parent`:
    /// `HS_MSG_SET_PARAMS` when `kind_len` is 0, else an application
    /// message of that kind. Clears the outgoing parameters.
    #[link_name = "send_msg"]
    pub fn hsched_send_msg(parent: hs_vp, kind: *const u8, kind_len: hs_u32);

    /// In `hs_msg` for an `HS_MSG_APP` message: copies at most `cap` bytes
    /// of its kind name to `buf` and returns the full length.
    #[link_name = "msg_kind"]
    pub fn hsched_msg_kind(buf: *mut u8, cap: hs_u32) -> hs_u32;

    // -- refusals and notes

    /// Sets the reason of the refusal the current hook is about to return.
    #[link_name = "error"]
    pub fn hsched_error(msg: *const u8, len: hs_u32);
    /// For an `HS_ERR_ADMISSION` refusal: the load the instance would reach
    /// and its cap, as fractions of one processor.
    #[link_name = "admission"]
    pub fn hsched_admission(load: f64, cap: f64);
    /// Records a note in the trace (when tracing is on).
    #[link_name = "note"]
    pub fn hsched_note(msg: *const u8, len: hs_u32);
    /// Whether the run is being traced (0 or 1).
    #[link_name = "tracing"]
    pub fn hsched_tracing() -> hs_i32;
}
