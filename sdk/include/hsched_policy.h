/*
 * hsched_policy.h: the hsched loadable-policy ABI, version 1.
 *
 * A plug-in policy is a WebAssembly module (wasm32) that hsched loads from
 * a hierarchy file and runs as one scheduler instance per [[scheduler]]
 * that names it. This header declares everything a plug-in written in C
 * uses: the functions hsched offers (imported from module "hsched") and
 * the functions a plug-in defines (exports). docs/plugin-abi.md documents
 * every call as Regehr 2001, appendix B documents the HSI: when it comes,
 * what a plug-in may do in it.
 *
 * Model. Each scheduler instance is its own module instance with its own
 * linear memory, so a plug-in keeps its state in ordinary globals. hsched
 * calls one hook at a time when something happens to a virtual processor
 * (VP) the instance shares; the hook reads state and queues actions
 * (grant, revoke, request, release, messages) through the functions below.
 * hsched applies the actions in order after the hook returns and checks
 * each against the protocol (Regehr 2001, §4.3.4). A plug-in that traps,
 * runs out of fuel, grows its memory past the cap or breaks the protocol
 * is unloaded and its children move to the default scheduler.
 *
 * Build (clang-14 and lld-14):
 *   clang-14 --target=wasm32 -O2 -nostdlib -ffreestanding \
 *     -I sdk/include -Wl,--no-entry -Wl,--export-dynamic \
 *     -fuse-ld=lld -o fifo.wasm fifo.c
 * (the wasm-ld binary is wasm-ld-14; sdk/Makefile finds it.)
 *
 * Stability: within ABI version 1 names, argument lists and numeric
 * constants below do not change; later revisions only add.
 */
#ifndef HSCHED_POLICY_H
#define HSCHED_POLICY_H

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- types */

typedef signed char hs_i8;
typedef int hs_i32;
typedef unsigned int hs_u32;
typedef long long hs_i64;
typedef unsigned long long hs_u64;

/* A virtual processor: an index into hsched's dense VP table. Slots are
 * reused after a VP is unregistered, so forget a VP in hs_unregister_vp. */
typedef hs_u32 hs_vp;
/* A physical processor, numbered 0 .. hsched_cpu_count() - 1. */
typedef hs_u32 hs_cpu;
/* Time since the epoch, in nanoseconds. */
typedef hs_u64 hs_time;
/* A length of time, in nanoseconds. */
typedef hs_u64 hs_duration;

/* The ABI version this header describes; hs_abi_version() returns it. */
#define HSCHED_ABI_VERSION 1

/* "No VP" / "no processor", as the functions below return them. */
#define HS_NONE 0xFFFFFFFFu
/* A time that never comes (a disarmed timer). */
#define HS_NEVER 0xFFFFFFFFFFFFFFFFull
/* The value hsched_child_tag / hsched_parent_tag return when unset. */
#define HS_NO_TAG 0xFFFFFFFFu

/* VP states (hsched_vp_state). */
enum hs_vp_state {
  HS_WAITING = 0, /* registered, not asking for a processor */
  HS_READY = 1,   /* asking for a processor */
  HS_RUNNING = 2  /* holding a physical processor (hsched_vp_cpu) */
};

/* Why a processor was taken back (hs_revoke, hsched_revoke). */
enum hs_revoke_reason {
  HS_PREEMPTED = 0,        /* a more important VP needed it, or a quantum ended */
  HS_BUDGET_EXHAUSTED = 1, /* the child's budget for this period is used up */
  HS_INFRASTRUCTURE = 2    /* hsched itself took it (moving a thread, ...) */
};

/* Message kinds (hs_msg). */
enum hs_msg_kind {
  HS_MSG_SET_PARAMS = 0, /* change the parent-side parameters of a child */
  HS_MSG_APP = 1         /* application-defined: a kind name and parameters */
};

/* What the other side of a VP is (hsched_vp_child_kind). */
enum hs_node_kind {
  HS_NODE_TOP = 0,      /* the top scheduler (one VP per processor) */
  HS_NODE_INSTANCE = 1, /* a scheduler instance */
  HS_NODE_THREAD = 2    /* a thread */
};

/* Results of hooks that may refuse (hs_create, hs_register_vp, hs_msg,
 * hs_check_invariants). A refusal may carry a reason: call hsched_error
 * before returning. */
enum hs_result {
  HS_OK = 0,
  HS_ERR_REFUSED = 1,     /* any refusal, with its reason */
  HS_ERR_UNSUPPORTED = 2, /* this kind of message or request is not accepted */
  HS_ERR_PARAM = 3,       /* a parameter is missing or malformed */
  HS_ERR_ADMISSION = 4    /* admission control refused (see hsched_admission) */
};

/* Results of the parameter readers (hsched_param_*). */
enum hs_param_result {
  HS_PARAM_ABSENT = 0,   /* the key is not there; *out is unchanged */
  HS_PARAM_OK = 1,       /* *out holds the value */
  HS_PARAM_WRONG = -1    /* the key is there with another kind of value */
};

/* ------------------------------------------------------ host functions */

#define HS_IMPORT(name) \
  __attribute__((import_module("hsched"), import_name(name)))

/* -- time and the machine */

/* The current time (HLSGetCurrentTime). */
HS_IMPORT("now") hs_time hsched_now(void);
/* Number of physical processors. */
HS_IMPORT("cpu_count") hs_u32 hsched_cpu_count(void);

/* -- this instance's VPs */

/* The VPs this instance registered with its parent(s), in registration
 * order; i in 0 .. count - 1. HS_NONE for an index out of range. */
HS_IMPORT("parent_vp_count") hs_u32 hsched_parent_vp_count(void);
HS_IMPORT("parent_vp") hs_vp hsched_parent_vp(hs_u32 i);
/* The VPs children registered with this instance, in no particular order
 * (a child's removal moves the last one into its place). */
HS_IMPORT("child_vp_count") hs_u32 hsched_child_vp_count(void);
HS_IMPORT("child_vp") hs_vp hsched_child_vp(hs_u32 i);
/* How many notifications for this instance wait to be delivered after
 * the current hook (0: every VP is as this instance's own actions and the
 * notifications it saw left it). */
HS_IMPORT("notifications_waiting") hs_u32 hsched_notifications_waiting(void);

/* -- one VP (a parent or child VP of this instance; any other is an error
 *    that unloads the plug-in) */

/* enum hs_vp_state. */
HS_IMPORT("vp_state") hs_i32 hsched_vp_state(hs_vp vp);
/* The processor the VP runs on, or HS_NONE. */
HS_IMPORT("vp_cpu") hs_cpu hsched_vp_cpu(hs_vp vp);
/* The processor it ran on most recently, or HS_NONE. Inside hs_revoke,
 * for the revoked parent VP, the processor the revocation took. */
HS_IMPORT("vp_last_cpu") hs_cpu hsched_vp_last_cpu(hs_vp vp);
/* CPU time the VP has received, net of stolen time, including the
 * segment it runs now. */
HS_IMPORT("vp_received") hs_duration hsched_vp_received(hs_vp vp);
/* enum hs_node_kind of the VP's child side. */
HS_IMPORT("vp_child_kind") hs_i32 hsched_vp_child_kind(hs_vp vp);
/* An id of the VP's child side (thread or instance number), equal for the
 * VPs one multiprocessor child registers. */
HS_IMPORT("vp_child_id") hs_u32 hsched_vp_child_id(hs_vp vp);

/* -- tags: one 32-bit value this instance keeps on each of its VPs,
 *    typically an index into its own tables (HS_NO_TAG when unset) */

HS_IMPORT("child_tag") hs_u32 hsched_child_tag(hs_vp child);
HS_IMPORT("set_child_tag") void hsched_set_child_tag(hs_vp child, hs_u32 tag);
HS_IMPORT("parent_tag") hs_u32 hsched_parent_tag(hs_vp parent);
HS_IMPORT("set_parent_tag") void hsched_set_parent_tag(hs_vp parent, hs_u32 tag);

/* -- actions (queued; applied in order after the hook returns) */

/* Grants processor `cpu`, which this instance holds, to ready child `vp`. */
HS_IMPORT("grant") void hsched_grant(hs_vp child, hs_cpu cpu);
/* Takes the processor back from running child `vp`; reason is an
 * enum hs_revoke_reason. */
HS_IMPORT("revoke") void hsched_revoke(hs_vp child, hs_i32 reason);
/* Asks the parent of waiting parent VP `vp` for a processor. */
HS_IMPORT("request") void hsched_request(hs_vp parent);
/* Gives back parent VP `vp`'s processor, or cancels its request. */
HS_IMPORT("release") void hsched_release(hs_vp parent);
/* Requests or releases parent VPs so that `want` of them ask for or hold
 * a processor (waiting ones requested in order, surplus ready ones
 * released from the back; running ones are never released here). */
HS_IMPORT("set_parent_demand") void hsched_set_parent_demand(hs_u32 want);

/* -- the timer (one per instance; hs_timer fires at or after `at`) */

/* Arms the timer, replacing an earlier setting; HS_NEVER disarms it.
 * A time in the past fires at the next timer input. */
HS_IMPORT("set_timer") void hsched_set_timer(hs_time at);
HS_IMPORT("cancel_timer") void hsched_cancel_timer(void);
/* When the timer fires next, or HS_NEVER. */
HS_IMPORT("timer") hs_time hsched_timer(void);

/* -- parameters
 *
 * The "current" parameters are: in hs_create the instance's (the
 * [[scheduler]] keys besides name, policy and parent); in hs_register_vp
 * the child's parent-side parameters; in hs_msg the message's. The
 * hsched_vp_param_* readers read the parameters a child VP was registered
 * with (or last changed to by an accepted HS_MSG_SET_PARAMS) at any time.
 * Keys are UTF-8, not NUL-terminated: pointer and length. Each returns an
 * enum hs_param_result. Durations are written with a unit in files
 * ("10ms") and read here in nanoseconds. */

HS_IMPORT("param_i64")
hs_i32 hsched_param_i64(const char *key, hs_u32 key_len, hs_i64 *out);
HS_IMPORT("param_f64")
hs_i32 hsched_param_f64(const char *key, hs_u32 key_len, double *out);
HS_IMPORT("param_duration")
hs_i32 hsched_param_duration(const char *key, hs_u32 key_len, hs_duration *out);
HS_IMPORT("param_bool")
hs_i32 hsched_param_bool(const char *key, hs_u32 key_len, hs_i32 *out);
/* A string value: copies at most `cap` bytes to buf (not NUL-terminated)
 * and stores the full length in *len. */
HS_IMPORT("param_str")
hs_i32 hsched_param_str(const char *key, hs_u32 key_len, char *buf, hs_u32 cap,
                        hs_u32 *len);

HS_IMPORT("vp_param_i64")
hs_i32 hsched_vp_param_i64(hs_vp child, const char *key, hs_u32 key_len, hs_i64 *out);
HS_IMPORT("vp_param_f64")
hs_i32 hsched_vp_param_f64(hs_vp child, const char *key, hs_u32 key_len, double *out);
HS_IMPORT("vp_param_duration")
hs_i32 hsched_vp_param_duration(hs_vp child, const char *key, hs_u32 key_len,
                                hs_duration *out);
HS_IMPORT("vp_param_bool")
hs_i32 hsched_vp_param_bool(hs_vp child, const char *key, hs_u32 key_len, hs_i32 *out);

/* -- messages to a parent (Regehr 2001, §4.3.1.2)
 *
 * Build the outgoing parameters with hsched_out_*, then send them: to the
 * parent of parent VP `vp`, as HS_MSG_SET_PARAMS when kind_len is 0, else
 * as an application message of that kind. Sending clears the outgoing
 * parameters. A refusal is noted in the trace; the sender is not told. */

HS_IMPORT("out_i64") void hsched_out_i64(const char *key, hs_u32 key_len, hs_i64 v);
HS_IMPORT("out_f64") void hsched_out_f64(const char *key, hs_u32 key_len, double v);
HS_IMPORT("out_duration")
void hsched_out_duration(const char *key, hs_u32 key_len, hs_duration v);
HS_IMPORT("out_bool") void hsched_out_bool(const char *key, hs_u32 key_len, hs_i32 v);
HS_IMPORT("out_str")
void hsched_out_str(const char *key, hs_u32 key_len, const char *v, hs_u32 v_len);
HS_IMPORT("send_msg")
void hsched_send_msg(hs_vp parent, const char *kind, hs_u32 kind_len);

/* In hs_msg for an HS_MSG_APP message: copies at most `cap` bytes of its
 * kind name to buf and returns the full length. */
HS_IMPORT("msg_kind") hs_u32 hsched_msg_kind(char *buf, hs_u32 cap);

/* -- refusals and notes */

/* Sets the reason of the refusal the current hook is about to return
 * (UTF-8, pointer and length); the last call wins. */
HS_IMPORT("error") void hsched_error(const char *msg, hs_u32 len);
/* For an HS_ERR_ADMISSION refusal: the load the instance would reach and
 * its cap, as fractions of one processor. */
HS_IMPORT("admission")
void hsched_admission(double load, double cap);
/* Records a note in the trace (when tracing is on; cheap when not). */
HS_IMPORT("note") void hsched_note(const char *msg, hs_u32 len);
/* Whether the run is being traced, so a plug-in can skip building notes. */
HS_IMPORT("tracing") hs_i32 hsched_tracing(void);

/* ------------------------------------------------------------- exports
 *
 * Define these with HS_EXPORT(name) before the definition, e.g.
 *   HS_EXPORT(hs_request) void hs_request(hs_vp vp) { ... }
 * Required: hs_abi_version, hs_descriptor, hs_register_vp,
 * hs_unregister_vp, hs_request, hs_release, hs_grant, hs_revoke.
 * Optional (hsched uses the default when absent): the others. */

#define HS_EXPORT(name) __attribute__((export_name(#name)))

/* HSCHED_ABI_VERSION, so hsched refuses a module built for another. */
hs_i32 hs_abi_version(void);
/* A pointer to the plug-in's descriptor: NUL-terminated UTF-8 JSON in
 * linear memory (docs/plugin-abi.md, "Descriptor"): name, summary,
 * parameters, shape and, optionally, the guarantee mapping. Called once
 * when the module is loaded, before any instance is created. */
const char *hs_descriptor(void);

/* The instance is being built from its current (instance) parameters;
 * refuse them with HS_ERR_PARAM or HS_ERR_REFUSED. No VP exists yet and
 * no action may be queued. Default: HS_OK. */
hs_i32 hs_create(void);
/* First hook with the hierarchy (Init); actions are allowed. */
void hs_init(void);
/* Last hook, when the instance is destroyed; it has no children (Deinit). */
void hs_deinit(void);

/* A child registers `vp` (waiting); its parameters are current. Return
 * HS_OK, or refuse (nothing stays registered). */
hs_i32 hs_register_vp(hs_vp vp);
/* A child unregisters `vp` (waiting); forget it. */
void hs_unregister_vp(hs_vp vp);
/* Child `vp` went from waiting to ready (VP_Request). */
void hs_request(hs_vp vp);
/* Child `vp` went to waiting (VP_Release); if it ran, its processor is
 * free again in this instance. */
void hs_release(hs_vp vp);
/* Parent VP `parent` now runs on `cpu` (VP_Grant): grant `cpu` to a
 * ready child at once, or release `parent`. */
void hs_grant(hs_vp parent, hs_cpu cpu);
/* Parent VP `parent` lost its processor (VP_Revoke), now
 * hsched_vp_last_cpu(parent): revoke it at once from the child on it,
 * passing `reason` on. */
void hs_revoke(hs_vp parent, hs_i32 reason);
/* A message about child `vp`; `kind` is an enum hs_msg_kind, its
 * parameters are current. Return HS_OK to accept; an accepted
 * HS_MSG_SET_PARAMS is merged into the child's parameters by hsched.
 * Default: HS_ERR_UNSUPPORTED. */
hs_i32 hs_msg(hs_vp vp, hs_i32 kind);
/* The instance's timer expired (TimerCallback). */
void hs_timer(void);
/* Checks internal consistency when protocol checking is on (CheckInvar);
 * HS_OK, or HS_ERR_REFUSED with the broken invariant in hsched_error.
 * Must not queue actions. Default: HS_OK. */
hs_i32 hs_check_invariants(void);
/* A pointer to a NUL-terminated one-line description of the instance's
 * parameters, for `hsched tree`. Default: empty. */
const char *hs_describe(void);
/* The deadline the instance holds for child `vp` now, or HS_NEVER. For
 * displays; changes nothing. Default: HS_NEVER. */
hs_time hs_child_deadline(hs_vp vp);

/* ------------------------------------------------------------- helpers */

/* A string literal as the (pointer, length) pair the functions above take. */
#define HS_STR(s) (s), (hs_u32)(sizeof(s) - 1)

/* Defines hs_abi_version and hs_descriptor from a JSON string literal. */
#define HS_PLUGIN(descriptor_json)                                      \
  HS_EXPORT(hs_abi_version) hs_i32 hs_abi_version(void) {               \
    return HSCHED_ABI_VERSION;                                          \
  }                                                                     \
  HS_EXPORT(hs_descriptor) const char *hs_descriptor(void) {            \
    return descriptor_json;                                             \
  }

#ifdef __cplusplus
}
#endif

#endif /* HSCHED_POLICY_H */
