/*
 * misbehaving.c: a plug-in that breaks the rules on purpose, to show (and
 * test) what hsched does with a faulty policy: it unloads the instance,
 * moves its children to the default scheduler, reports what happened and
 * when, and the run goes on (docs/plugin-abi.md, "Sandbox and fallback").
 *
 * Until `at` it is a correct first-come, first-served scheduler on one
 * processor: the ready child registered first runs until it stops asking.
 * In the first hook at or after `at` it commits the fault that `fault`
 * names:
 *   "loop"      runs forever (stopped by the fuel bound);
 *   "trap"      executes an unreachable instruction;
 *   "grow"      grows its memory until memory.grow fails at the cap, then
 *               stores past the end, as a C program that ignores a NULL
 *               from malloc would (a trap);
 *   "garbage"   grants a processor to a VP that is not its own;
 *   "protocol"  asks for a parent VP that already asks or runs (or, when
 *               it waits, grants a processor the instance does not hold);
 *   "none"      nothing: the scheduler stays correct.
 */
#define MAX_KIDS 1024
#define KID_EXTRA int unused;
#define UNI_HOOK() misbehave()

static void misbehave(void);

#include "uniproc.h"

HS_PLUGIN("{\"abi\":1,\"name\":\"misbehaving\","
          "\"summary\":\"first come, first served until `at`, then the fault "
          "`fault` names (for fault tests; one processor)\","
          "\"multiprocessor\":false,\"instance_params\":["
          "{\"key\":\"fault\",\"kind\":\"string\",\"default\":\"required\","
          "\"doc\":\"loop, trap, grow, garbage, protocol or none\"},"
          "{\"key\":\"at\",\"kind\":\"duration\",\"default\":\"0s\","
          "\"doc\":\"the fault comes in the first hook at or after this time\"}],"
          "\"child_params\":[]}")

enum fault { F_NONE, F_LOOP, F_TRAP, F_GROW, F_GARBAGE, F_PROTOCOL };

static enum fault fault;
static hs_time fault_at;
static int done;

static int same(const char *a, hs_u32 len, const char *lit) {
  hs_u32 i = 0;
  for (; i < len && lit[i]; i++)
    if (a[i] != lit[i])
      return 0;
  return i == len && !lit[i];
}

static hs_i32 pol_create(void) {
  static const char *const names[] = {"none", "loop", "trap", "grow",
                                      "garbage", "protocol"};
  char buf[16];
  hs_u32 len = 0;
  int found = 0;
  if (hsched_param_str(HS_STR("fault"), buf, sizeof buf, &len) == HS_PARAM_OK &&
      len <= sizeof buf) {
    for (int i = 0; i < 6; i++)
      if (same(buf, len, names[i])) {
        fault = (enum fault)i;
        found = 1;
      }
  }
  if (!found) {
    static const char msg[] =
        "fault must be one of loop, trap, grow, garbage, protocol, none";
    hsched_error(HS_STR(msg));
    return HS_ERR_PARAM;
  }
  if (hsched_param_duration(HS_STR("at"), &fault_at) == HS_PARAM_WRONG) {
    static const char msg[] = "at must be a duration";
    hsched_error(HS_STR(msg));
    return HS_ERR_PARAM;
  }
  return HS_OK;
}

static void misbehave(void) {
  if (done || fault == F_NONE || hsched_now() < fault_at)
    return;
  done = 1;
  switch (fault) {
  case F_LOOP: {
    volatile hs_u64 spin = 0;
    for (;;)
      spin++;
  }
  case F_TRAP:
    __builtin_trap();
  case F_GROW: {
    for (;;) {
      unsigned long old = __builtin_wasm_memory_grow(0, 16); /* 1 MiB */
      if (old == (unsigned long)-1) {
        /* Out of memory: use the "allocation" anyway. */
        volatile char *p = (volatile char *)(__builtin_wasm_memory_size(0) * 65536);
        *p = 1;
        return;
      }
      /* Touch what was given, as an allocator would. */
      ((volatile char *)(old * 65536))[0] = 1;
    }
  }
  case F_GARBAGE:
    hsched_grant(0x7FFFFFF0u, 0);
    return;
  case F_PROTOCOL: {
    hs_vp p = hsched_parent_vp(0);
    if (p != HS_NONE && hsched_vp_state(p) != HS_WAITING)
      hsched_request(p);
    else if (nkids > 0)
      hsched_grant(kids[0].vp, 0);
    return;
  }
  case F_NONE:
    return;
  }
}

static hs_i32 pol_admit(struct kid *k) {
  (void)k;
  return HS_OK;
}
static void pol_gone(struct kid *k) { (void)k; }
static void pol_wake(struct kid *k) { (void)k; }
static void pol_sleep(struct kid *k) { (void)k; }
static void pol_charge(struct kid *k, hs_duration used) {
  (void)k;
  (void)used;
}

static struct kid *pol_pick(void) {
  UNI_FOR_EACH(k) if (k->state == K_READY) return k;
  return 0;
}

static int pol_preempts(struct kid *c, struct kid *running) {
  (void)c;
  (void)running;
  return 0;
}

static hs_duration pol_slice(struct kid *k) {
  (void)k;
  return HS_NEVER;
}

/* Wakes the instance at `at`, so the fault comes then even if nothing
 * else happens. */
static hs_time pol_next_event(void) {
  return done || fault == F_NONE ? HS_NEVER : fault_at;
}
