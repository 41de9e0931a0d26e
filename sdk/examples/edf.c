/*
 * edf.c: plain preemptive earliest deadline first as an hsched plug-in,
 * on one processor (Liu and Layland 1973).
 *
 * Each child declares its `period` and, optionally, a relative `deadline`
 * (the period when absent). A child that wakes at or after its current
 * absolute deadline starts a new job due `deadline` after the wake-up; a
 * child that wakes earlier is still in its job. The ready child with the
 * earliest absolute deadline runs and preempts a later one at once.
 *
 * There is no budget and no admission control: EDF meets every deadline
 * of periodic children with deadlines equal to periods exactly when their
 * utilization adds up to at most 1, and under overload a late job keeps
 * its passed deadline and runs first (the domino effect), which is what
 * makes plain EDF a reference rather than a reservation scheduler.
 */
#define UNI_PREEMPTIVE 1
#define MAX_KIDS 1024
#define KID_EXTRA                                                          \
  hs_duration rel;     /* relative deadline */                             \
  hs_time deadline;    /* absolute deadline of the current job */          \
  int has_job;

#include "uniproc.h"

HS_PLUGIN("{\"abi\":1,\"name\":\"edf\","
          "\"summary\":\"preemptive earliest deadline first over periodic "
          "children, no budgets (one processor)\","
          "\"source\":\"Liu and Layland 1973\","
          "\"multiprocessor\":false,\"instance_params\":[],"
          "\"child_params\":["
          "{\"key\":\"period\",\"kind\":\"duration\",\"default\":\"required\","
          "\"doc\":\"the child's period\"},"
          "{\"key\":\"deadline\",\"kind\":\"duration\",\"default\":\"period\","
          "\"doc\":\"relative deadline of each job\"}]}")

static hs_i32 pol_create(void) { return HS_OK; }

static hs_i32 read_deadline(hs_duration *out) {
  hs_duration period = 0, d = 0;
  if (hsched_param_duration(HS_STR("period"), &period) != HS_PARAM_OK ||
      period == 0) {
    static const char msg[] = "period must be a positive duration";
    hsched_error(HS_STR(msg));
    return HS_ERR_PARAM;
  }
  d = period;
  if (!uni_duration(HS_STR("deadline"), &d) || d == 0) {
    static const char msg[] = "deadline must be a positive duration";
    hsched_error(HS_STR(msg));
    return HS_ERR_PARAM;
  }
  *out = d;
  return HS_OK;
}

static hs_i32 pol_admit(struct kid *k) { return read_deadline(&k->rel); }

static void pol_gone(struct kid *k) { (void)k; }

static void pol_wake(struct kid *k) {
  hs_time now = hsched_now();
  if (!k->has_job || now >= k->deadline) {
    k->deadline = now + k->rel;
    k->has_job = 1;
  }
}

static void pol_sleep(struct kid *k) { (void)k; }

static void pol_charge(struct kid *k, hs_duration used) {
  (void)k;
  (void)used;
}

/* a is more urgent than b: earlier deadline, or equal and older. */
static int before(const struct kid *a, const struct kid *b) {
  return a->deadline < b->deadline ||
         (a->deadline == b->deadline && a->order < b->order);
}

static struct kid *pol_pick(void) {
  struct kid *best = 0;
  UNI_FOR_EACH(k) if (k->state == K_READY && (!best || before(k, best))) best = k;
  return best;
}

static int pol_preempts(struct kid *c, struct kid *running) {
  return c->deadline < running->deadline;
}

static hs_duration pol_slice(struct kid *k) {
  (void)k;
  return HS_NEVER;
}

static hs_time pol_next_event(void) { return HS_NEVER; }

HS_EXPORT(hs_child_deadline) hs_time hs_child_deadline(hs_vp vp) {
  struct kid *k = uni_kid(vp);
  return k->state != K_WAITING && k->has_job ? k->deadline : HS_NEVER;
}

HS_EXPORT(hs_msg) hs_i32 hs_msg(hs_vp vp, hs_i32 kind) {
  if (kind != HS_MSG_SET_PARAMS)
    return HS_ERR_UNSUPPORTED;
  /* The new deadline applies from the child's next job. */
  return read_deadline(&uni_kid(vp)->rel);
}
