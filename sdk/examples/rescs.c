/*
 * rescs.c: continuous soft CPU reservations (RESCS, Regehr 2001, §5.2.2.2)
 * from a static time partition, as an hsched plug-in on one processor.
 *
 * The instance divides time into frames of `frame` (aligned with time 0).
 * Each child asks for `amount` per `period`, its period equal to the
 * frame, and is given a fixed slot of `amount` at the same offset in every
 * frame (the first gap that fits, in registration order). Because the
 * pattern repeats every frame, every interval of one frame's length holds
 * one whole slot's worth of the child's slot: the child receives at least
 * `amount` in every interval of `period`, not only in each period of a
 * grid. That is a continuous reservation, RESCS amount period; a basic one
 * (Rez, RESBH x y) only gives RESCS x (2y - x) (Theorem 5.2).
 *
 * In its slot a ready child runs, preempting any other. Time outside the
 * slots, and a slot whose owner is not asking, go to the ready child
 * registered first: the reservations are soft. The guarantee needs the
 * whole processor (ALL): a parent that takes the processor away during a
 * slot takes the child's time with it.
 */
#define UNI_PREEMPTIVE 1
#define MAX_KIDS 256
#define KID_EXTRA                                                          \
  hs_duration offset; /* slot start within the frame */                    \
  hs_duration amount;

#include "uniproc.h"

HS_PLUGIN("{\"abi\":1,\"name\":\"rescs\","
          "\"summary\":\"continuous soft CPU reservations from a static "
          "partition of each frame into slots (one processor)\","
          "\"source\":\"Regehr 2001, §5.2.2.2 and §5.3.3.1\","
          "\"multiprocessor\":false,\"max_children\":256,"
          "\"instance_params\":["
          "{\"key\":\"frame\",\"kind\":\"duration\",\"default\":\"required\","
          "\"doc\":\"the length of a frame, every child's period\"}],"
          "\"child_params\":["
          "{\"key\":\"amount\",\"kind\":\"duration\",\"default\":\"required\","
          "\"doc\":\"CPU time in every interval of one period\"},"
          "{\"key\":\"period\",\"kind\":\"duration\",\"default\":\"required\","
          "\"doc\":\"equal to the instance's frame\"}],"
          "\"guarantee\":{\"needs\":\"ALL\",\"gives\":\"RESCS {amount} {period}\"}}")

static hs_duration frame;
static hs_duration reserved;

static hs_i32 pol_create(void) {
  if (hsched_param_duration(HS_STR("frame"), &frame) != HS_PARAM_OK ||
      frame == 0) {
    static const char msg[] = "frame must be a positive duration";
    hsched_error(HS_STR(msg));
    return HS_ERR_PARAM;
  }
  return HS_OK;
}

/* The lowest offset where a slot of `amount` overlaps no other slot, or
 * HS_NEVER. Candidates are 0 and the end of every slot. */
static hs_duration find_gap(hs_duration amount, const struct kid *self) {
  hs_duration best = HS_NEVER;
  for (hs_u32 c = 0; c <= nkids; c++) {
    hs_duration at = 0;
    if (c < nkids) {
      if (kids[c].state == K_FREE || &kids[c] == self)
        continue;
      at = kids[c].offset + kids[c].amount;
    }
    if (at + amount > frame || at >= best)
      continue;
    int clash = 0;
    UNI_FOR_EACH(k) {
      if (k->state == K_FREE || k == self)
        continue;
      if (at < k->offset + k->amount && k->offset < at + amount)
        clash = 1;
    }
    if (!clash)
      best = at;
  }
  return best;
}

/* Reads a key of the current parameters, else (in a change that leaves
 * it out) the child's own. */
static hs_i32 read_key(struct kid *k, const char *key, hs_u32 len, hs_duration *out) {
  hs_i32 r = hsched_param_duration(key, len, out);
  if (r == HS_PARAM_ABSENT && k->amount)
    r = hsched_vp_param_duration(k->vp, key, len, out);
  return r;
}

/* Gives child k a slot for the amount in the current parameters; k keeps
 * its old slot (if any) when none fits. */
static hs_i32 place(struct kid *k) {
  hs_duration amount = 0, period = 0;
  if (read_key(k, HS_STR("amount"), &amount) != HS_PARAM_OK || amount == 0) {
    static const char msg[] = "amount must be a positive duration";
    hsched_error(HS_STR(msg));
    return HS_ERR_PARAM;
  }
  if (read_key(k, HS_STR("period"), &period) != HS_PARAM_OK || period != frame) {
    static const char msg[] = "period must equal the instance's frame";
    hsched_error(HS_STR(msg));
    return HS_ERR_PARAM;
  }
  hs_duration at = find_gap(amount, k);
  if (at == HS_NEVER) {
    static const char msg[] = "no gap in the frame holds the slot";
    hsched_error(HS_STR(msg));
    hsched_admission((double)(reserved - k->amount + amount) / (double)frame, 1.0);
    return HS_ERR_ADMISSION;
  }
  reserved = reserved - k->amount + amount;
  k->offset = at;
  k->amount = amount;
  return HS_OK;
}

static hs_i32 pol_admit(struct kid *k) { return place(k); }

static void pol_gone(struct kid *k) { reserved -= k->amount; }
static void pol_wake(struct kid *k) { (void)k; }
static void pol_sleep(struct kid *k) { (void)k; }
static void pol_charge(struct kid *k, hs_duration used) {
  (void)k;
  (void)used;
}

/* The child whose slot holds time `now`, or 0. */
static struct kid *owner(hs_time now) {
  hs_duration t = now % frame;
  UNI_FOR_EACH(k) {
    if (k->state != K_FREE && k->offset <= t && t < k->offset + k->amount)
      return k;
  }
  return 0;
}

/* The ready child registered first (slots are reused, so the table's
 * order is not the registration order). */
static struct kid *oldest_ready(void) {
  struct kid *best = 0;
  UNI_FOR_EACH(k) if (k->state == K_READY && (!best || k->order < best->order)) best = k;
  return best;
}

static struct kid *pol_pick(void) {
  struct kid *o = owner(hsched_now());
  if (o && o->state == K_READY)
    return o;
  return oldest_ready();
}

/* The owner of the current slot takes the processor at once; outside a
 * slot the child registered first does, so that a child whose slot just
 * ended does not keep the unreserved time that belongs to it. */
static int pol_preempts(struct kid *c, struct kid *running) {
  struct kid *o = owner(hsched_now());
  if (c == running || running == o)
    return 0;
  return c == o || c->order < running->order;
}

static hs_duration pol_slice(struct kid *k) {
  (void)k;
  return HS_NEVER;
}

/* The next slot boundary, while some child asks for the processor. */
static hs_time pol_next_event(void) {
  if (!cur && nready == 0)
    return HS_NEVER;
  hs_time now = hsched_now();
  hs_duration t = now % frame, next = frame;
  UNI_FOR_EACH(k) {
    if (k->state == K_FREE)
      continue;
    if (k->offset > t && k->offset < next)
      next = k->offset;
    if (k->offset + k->amount > t && k->offset + k->amount < next)
      next = k->offset + k->amount;
  }
  return now - t + next;
}

HS_EXPORT(hs_msg) hs_i32 hs_msg(hs_vp vp, hs_i32 kind) {
  if (kind != HS_MSG_SET_PARAMS)
    return HS_ERR_UNSUPPORTED;
  /* A new amount moves the slot to the first gap that holds it. */
  return place(uni_kid(vp));
}
