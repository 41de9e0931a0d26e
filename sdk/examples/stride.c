/*
 * stride.c: stride scheduling (Waldspurger and Weihl 1995) as an hsched
 * plug-in, on one processor.
 *
 * Each child holds `tickets`; its stride is STRIDE1 / tickets. A child's
 * pass advances by its stride for every quantum of CPU time it receives
 * (in proportion for part of a quantum), and the ready child with the
 * lowest pass runs next, for one quantum. Children that keep asking
 * therefore receive CPU time in the ratio of their tickets, and for any
 * two of them the error against that ratio stays within one quantum
 * (Waldspurger's bound on the relative error of stride scheduling).
 *
 * A child that wakes joins at the global pass (the pass of the ready
 * children's aggregate, which advances by STRIDE1 / the ready tickets per
 * quantum), keeping the `remain` it had when it left, as in the paper's
 * dynamic-client operations: sleeping neither banks nor loses service.
 */
#define MAX_KIDS 1024
#define KID_EXTRA                                                          \
  hs_u64 tickets;                                                          \
  hs_u64 pass;                                                             \
  long long remain; /* pass - global pass when it left */

#include "uniproc.h"

HS_PLUGIN("{\"abi\":1,\"name\":\"stride\","
          "\"summary\":\"stride scheduling: the ready child with the lowest "
          "pass runs for a quantum; CPU time in the ratio of tickets "
          "(one processor)\","
          "\"source\":\"Waldspurger and Weihl 1995\","
          "\"multiprocessor\":false,\"instance_params\":["
          "{\"key\":\"quantum\",\"kind\":\"duration\",\"default\":\"10ms\","
          "\"doc\":\"how long the chosen child runs before the next choice\"}],"
          "\"child_params\":[{\"key\":\"tickets\",\"kind\":\"integer\","
          "\"default\":\"1\",\"min\":1,\"max\":1000000,"
          "\"doc\":\"tickets held, 1 to 10^6\"}]}")

/* Pass is kept in units of STRIDE1 per quantum; with tickets up to 10^6 a
 * stride keeps at least 20 bits. */
#define STRIDE1 (1ull << 40)

static hs_duration quantum = 10000000; /* 10 ms */
static hs_u64 global_pass;
static hs_u64 global_tickets; /* tickets of the ready and running children */

/* STRIDE1 * used / (quantum * tickets), without overflow for any used up to
 * hours: used / quantum quanta and the rest apart. */
static hs_u64 advance(hs_duration used, hs_u64 tickets) {
  hs_u64 stride = STRIDE1 / tickets;
  hs_u64 whole = used / quantum, part = used % quantum;
  return whole * stride + (hs_u64)((double)part / (double)quantum * (double)stride);
}

static hs_i32 pol_create(void) {
  if (!uni_duration(HS_STR("quantum"), &quantum) || quantum == 0) {
    static const char msg[] = "quantum must be a positive duration";
    hsched_error(HS_STR(msg));
    return HS_ERR_PARAM;
  }
  return HS_OK;
}

static hs_i32 read_tickets(hs_u64 *out) {
  hs_i64 t = 1;
  if (hsched_param_i64(HS_STR("tickets"), &t) == HS_PARAM_WRONG || t < 1 ||
      t > 1000000) {
    static const char msg[] = "tickets must be an integer from 1 to 10^6";
    hsched_error(HS_STR(msg));
    return HS_ERR_PARAM;
  }
  *out = (hs_u64)t;
  return HS_OK;
}

static hs_i32 pol_admit(struct kid *k) { return read_tickets(&k->tickets); }

static void pol_gone(struct kid *k) { (void)k; }

static void pol_wake(struct kid *k) {
  long long p = (long long)global_pass + k->remain;
  k->pass = p < 0 ? 0 : (hs_u64)p;
  global_tickets += k->tickets;
}

static void pol_sleep(struct kid *k) {
  k->remain = (long long)(k->pass - global_pass);
  global_tickets -= k->tickets;
}

static void pol_charge(struct kid *k, hs_duration used) {
  k->pass += advance(used, k->tickets);
  global_pass += advance(used, global_tickets);
}

static struct kid *pol_pick(void) {
  struct kid *best = 0;
  UNI_FOR_EACH(k) {
    if (k->state == K_READY &&
        (!best || k->pass < best->pass ||
         (k->pass == best->pass && k->order < best->order)))
      best = k;
  }
  return best;
}

static int pol_preempts(struct kid *c, struct kid *running) {
  (void)c;
  (void)running;
  return 0;
}

static hs_duration pol_slice(struct kid *k) {
  (void)k;
  return quantum;
}

static hs_time pol_next_event(void) { return HS_NEVER; }

HS_EXPORT(hs_msg) hs_i32 hs_msg(hs_vp vp, hs_i32 kind) {
  if (kind != HS_MSG_SET_PARAMS)
    return HS_ERR_UNSUPPORTED;
  struct kid *k = uni_kid(vp);
  hs_u64 t;
  hs_i32 r = read_tickets(&t);
  if (r != HS_OK)
    return r;
  if (k->state != K_WAITING) {
    /* Keep the pass still to go, scaled to the new stride (the paper's
     * modify operation). */
    long long rem = (long long)(k->pass - global_pass);
    rem = (long long)((double)rem * (double)k->tickets / (double)t);
    global_tickets = global_tickets - k->tickets + t;
    k->pass = (hs_u64)((long long)global_pass + rem);
  }
  k->tickets = t;
  return HS_OK;
}
