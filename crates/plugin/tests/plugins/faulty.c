/*
 * faulty.c: a one-processor FIFO plug-in that misbehaves on purpose, for
 * the fault tests. Built with -DMODE=n; from its TRIGGER-th hs_request on
 * it: 1 loops forever, 2 traps, 3 grows memory until refused and then
 * writes past it, 4 passes a VP that is not its own, 5 keeps a granted
 * processor (breaks the protocol), 6 revokes with a reason that does not
 * exist, 7 passes a string whose length runs past its memory, 8 sends its
 * parent a NaN, 9 sets its timer to the current time in every hs_timer
 * (time would never advance), 10 answers hs_register_vp with 42, which is
 * no hs_result; 0 never misbehaves.
 */
#include "hsched_policy.h"

#ifndef MODE
#define MODE 0
#endif
#define TRIGGER 5
#define MAXQ 64

HS_PLUGIN("{\"abi\":1,\"name\":\"faulty\",\"multiprocessor\":false,"
          "\"summary\":\"FIFO that misbehaves on purpose\"}")

static hs_vp queue[MAXQ];
static hs_u32 head, len;
static hs_vp running = HS_NONE;
static int requests;

static int bad(void) { return MODE != 0 && requests >= TRIGGER; }

static void settle(void) {
  hs_vp p = hsched_parent_vp(0);
  hs_cpu cpu = hsched_vp_cpu(p);
  if (cpu != HS_NONE && running == HS_NONE) {
    if (MODE == 5 && bad())
      return; /* keeps the processor: HeldCpuNotPassedOn */
    if (len) {
      running = queue[head];
      head = (head + 1) % MAXQ;
      len--;
      hsched_grant(running, cpu);
    } else {
      hsched_release(p);
      return;
    }
  }
  hsched_set_parent_demand(len || running != HS_NONE);
}

HS_EXPORT(hs_register_vp) hs_i32 hs_register_vp(hs_vp vp) {
  (void)vp;
  if (MODE == 10)
    return 42;
  return HS_OK;
}
HS_EXPORT(hs_unregister_vp) void hs_unregister_vp(hs_vp vp) { (void)vp; }

HS_EXPORT(hs_request) void hs_request(hs_vp vp) {
  requests++;
  if (bad()) {
    if (MODE == 1)
      for (volatile int i = 0;; i++) {
      }
    if (MODE == 2)
      __builtin_trap();
    if (MODE == 3) {
      while (__builtin_wasm_memory_grow(0, 16) != (__SIZE_TYPE__)-1) {
      }
      *(volatile int *)(__builtin_wasm_memory_size(0) * 65536 - 2) = 1;
    }
    if (MODE == 4)
      hsched_grant(vp + 1000, 0);
    if (MODE == 6)
      hsched_revoke(vp, 99);
    if (MODE == 7)
      hsched_error((const char *)16, 0xffffff00u);
    if (MODE == 9)
      hsched_set_timer(hsched_now());
    if (MODE == 8) {
      hsched_out_f64(HS_STR("priority"), __builtin_nan(""));
      hsched_send_msg(hsched_parent_vp(0), 0, 0);
    }
  }
  queue[(head + len) % MAXQ] = vp;
  len++;
  settle();
}

HS_EXPORT(hs_release) void hs_release(hs_vp vp) {
  if (running == vp) {
    running = HS_NONE;
  } else {
    for (hs_u32 i = 0; i < len; i++)
      if (queue[(head + i) % MAXQ] == vp) {
        for (hs_u32 j = i; j + 1 < len; j++)
          queue[(head + j) % MAXQ] = queue[(head + j + 1) % MAXQ];
        len--;
        break;
      }
  }
  settle();
}

HS_EXPORT(hs_grant) void hs_grant(hs_vp parent, hs_cpu cpu) {
  (void)parent;
  (void)cpu;
  settle();
}

HS_EXPORT(hs_revoke) void hs_revoke(hs_vp parent, hs_i32 reason) {
  if (running != HS_NONE) {
    if (hsched_vp_cpu(running) == hsched_vp_last_cpu(parent))
      hsched_revoke(running, reason);
    head = (head + MAXQ - 1) % MAXQ;
    queue[head] = running;
    len++;
    running = HS_NONE;
  }
  settle();
}

#if MODE == 9
HS_EXPORT(hs_timer) void hs_timer(void) { hsched_set_timer(hsched_now()); }
#endif
