/*
 * uniproc.h: the bookkeeping every one-processor example plug-in shares.
 *
 * lottery.c, stride.c, eevdf.c, edf.c, rescs.c and misbehaving.c differ
 * only in which ready child runs next, when a running child is preempted
 * and how CPU time is charged. This file does the rest once: the child
 * table (indexed by the child tag), the hooks of the ABI, the quantum
 * timer, charging from hsched_vp_received, and the rules of
 * docs/plugin-abi.md for a view that may lag behind hsched's (a grant may
 * be dropped as stale; a revocation or release may still be on its way).
 *
 * The instance schedules one processor: its first parent VP. It asks for
 * it while any child is ready and gives it back when none is.
 *
 * Before including this file a policy defines
 *   MAX_KIDS          the most child VPs it takes
 *   KID_EXTRA         its own fields of struct kid, e.g. `hs_u64 tickets;`
 * and after it (static functions, any order):
 *   hs_i32 pol_create(void)                 instance parameters; HS_OK or a refusal
 *   hs_i32 pol_admit(struct kid *k)         child parameters (current); HS_OK or a refusal
 *   void pol_gone(struct kid *k)            the child unregistered
 *   void pol_wake(struct kid *k)            the child became ready
 *   void pol_sleep(struct kid *k)           the child stopped asking (charged already)
 *   void pol_charge(struct kid *k, hs_duration used)  the child ran `used` more
 *   struct kid *pol_pick(void)              the ready child to run next, or 0
 *   int pol_preempts(struct kid *c, struct kid *cur)  ready c should take cur's processor now
 *                                           (asked only when UNI_PREEMPTIVE is 1; the
 *                                           quantum-based policies leave it 0)
 *   hs_duration pol_slice(struct kid *k)    how long k runs before it is preempted
 *                                           in favour of the next pick (HS_NEVER: no quantum)
 *   hs_time pol_next_event(void)            the next time the policy wants to decide
 *                                           again (HS_NEVER: none)
 * Optionally, UNI_HOOK() is a statement run first in every hook that may
 * queue actions (misbehaving.c breaks the rules there).
 * The policy calls uni_resched() whenever its own state changes outside a
 * hook this file runs (it does not need to: every hook ends with one).
 */
#ifndef HSCHED_UNIPROC_H
#define HSCHED_UNIPROC_H

#include "hsched_policy.h"

#ifndef UNI_HOOK
#define UNI_HOOK() ((void)0)
#endif
#ifndef UNI_PREEMPTIVE
#define UNI_PREEMPTIVE 0
#endif

enum { K_FREE, K_WAITING, K_READY, K_RUNNING };

struct kid {
  hs_vp vp;
  int state;
  hs_u32 next_free; /* free-list link while K_FREE */
  hs_duration mark; /* hsched_vp_received when last charged */
  hs_u32 order;     /* registration order: ties go to the older child */
  KID_EXTRA
};

static hs_i32 pol_create(void);
static hs_i32 pol_admit(struct kid *k);
static void pol_gone(struct kid *k);
static void pol_wake(struct kid *k);
static void pol_sleep(struct kid *k);
static void pol_charge(struct kid *k, hs_duration used);
static struct kid *pol_pick(void);
static int pol_preempts(struct kid *c, struct kid *cur);
static hs_duration pol_slice(struct kid *k);
static hs_time pol_next_event(void);

static struct kid kids[MAX_KIDS];
static hs_u32 nkids; /* slots in use lie below nkids */
static hs_u32 free_head = HS_NONE;
static hs_u32 registered; /* for `order` */
static hs_u32 nready;     /* children in K_READY */
static struct kid *cur;   /* the child planned on the processor */
static hs_cpu cur_cpu;
static hs_time slice_end = HS_NEVER;

#define UNI_FOR_EACH(k) for (struct kid *k = kids; k < kids + nkids; k++)

static void uni_fail(const char *msg, hs_u32 len) { hsched_error(msg, len); }

static struct kid *uni_kid(hs_vp vp) {
  hs_u32 t = hsched_child_tag(vp);
  if (t >= nkids || kids[t].state == K_FREE || kids[t].vp != vp)
    __builtin_trap(); /* hsched's tags and ours disagree: a bug here */
  return &kids[t];
}

/* The processor this instance holds now, or HS_NONE. */
static hs_cpu uni_held_cpu(void) {
  if (hsched_parent_vp_count() == 0)
    return HS_NONE;
  return hsched_vp_cpu(hsched_parent_vp(0));
}

/* Charges the planned child for what it received since the last charge. */
static void uni_charge(void) {
  if (!cur)
    return;
  hs_duration r = hsched_vp_received(cur->vp);
  if (r > cur->mark) {
    pol_charge(cur, r - cur->mark);
    cur->mark = r;
  }
}

/* Takes the processor back in our view from the planned child, which stays
 * ready; revokes it if it really runs there (a grant may have been dropped). */
static void uni_unplan(hs_i32 reason) {
  struct kid *k = cur;
  if (!k)
    return;
  uni_charge();
  cur = 0;
  k->state = K_READY;
  nready++;
  if (hsched_vp_cpu(k->vp) == cur_cpu)
    hsched_revoke(k->vp, reason);
}

static void uni_plan(struct kid *k, hs_cpu cpu) {
  k->state = K_RUNNING;
  nready--;
  k->mark = hsched_vp_received(k->vp);
  cur = k;
  cur_cpu = cpu;
  hs_duration s = pol_slice(k);
  slice_end = s == HS_NEVER ? HS_NEVER : hsched_now() + s;
  hsched_grant(k->vp, cpu);
}

/* Decides who runs: ends an expired quantum, lets a more urgent ready child
 * preempt, fills an empty processor or gives it back, asks for the parent
 * VP while children want it, and arms the timer for the next decision. */
static void uni_resched(void) {
  hs_time now = hsched_now();
  hs_cpu cpu = uni_held_cpu();
  struct kid *next = 0; /* chosen already (a lottery draw is not repeated) */
  uni_charge();
  if (cur && cpu == cur_cpu) {
    if (slice_end != HS_NEVER && now >= slice_end) {
      /* The quantum is over: the next pick may be the same child, which
       * then just starts a new quantum. */
      struct kid *k = cur;
      k->state = K_READY;
      nready++;
      struct kid *c = pol_pick();
      k->state = K_RUNNING;
      nready--;
      if (c && c != k) {
        uni_unplan(HS_PREEMPTED);
        next = c;
      } else {
        hs_duration s = pol_slice(k);
        slice_end = s == HS_NEVER ? HS_NEVER : now + s;
      }
    } else if (UNI_PREEMPTIVE) {
      struct kid *c = pol_pick();
      if (c && pol_preempts(c, cur)) {
        uni_unplan(HS_PREEMPTED);
        next = c;
      }
    }
  }
  int released = 0;
  if (!cur && cpu != HS_NONE) {
    struct kid *c = next ? next : pol_pick();
    if (c) {
      uni_plan(c, cpu);
    } else {
      /* Nothing to run on a processor we hold: give it back at once
       * (set_parent_demand never releases a running parent VP). */
      hsched_release(hsched_parent_vp(0));
      released = 1;
    }
  }
  /* While a child is planned the parent VP is kept: a revocation the
   * parent sent is still on its way and hs_revoke settles it. */
  if (!released)
    hsched_set_parent_demand(cur || nready > 0 ? 1 : 0);
  hs_time at = pol_next_event();
  if (cur && slice_end < at)
    at = slice_end;
  if (at != hsched_timer())
    hsched_set_timer(at);
}

HS_EXPORT(hs_create) hs_i32 hs_create(void) { return pol_create(); }

HS_EXPORT(hs_register_vp) hs_i32 hs_register_vp(hs_vp vp) {
  UNI_HOOK();
  hs_u32 s;
  if (free_head != HS_NONE) {
    s = free_head;
  } else if (nkids < MAX_KIDS) {
    s = nkids;
  } else {
    static const char msg[] = "this plug-in takes no more child VPs";
    uni_fail(HS_STR(msg));
    return HS_ERR_REFUSED;
  }
  struct kid *k = &kids[s];
  struct kid blank = {0};
  hs_u32 link = k->next_free;
  *k = blank;
  k->vp = vp;
  k->state = K_WAITING;
  k->order = registered;
  hs_i32 r = pol_admit(k);
  if (r != HS_OK) {
    k->state = K_FREE;
    k->next_free = link;
    return r;
  }
  if (s == free_head)
    free_head = link;
  else
    nkids++;
  registered++;
  hsched_set_child_tag(vp, s);
  return HS_OK;
}

HS_EXPORT(hs_unregister_vp) void hs_unregister_vp(hs_vp vp) {
  UNI_HOOK();
  struct kid *k = uni_kid(vp);
  if (k->state == K_READY)
    nready--;
  if (k == cur)
    cur = 0;
  pol_gone(k);
  k->state = K_FREE;
  k->next_free = free_head;
  free_head = (hs_u32)(k - kids);
}

HS_EXPORT(hs_request) void hs_request(hs_vp vp) {
  UNI_HOOK();
  struct kid *k = uni_kid(vp);
  if (k->state == K_WAITING) {
    k->state = K_READY;
    nready++;
    pol_wake(k);
  }
  uni_resched();
}

HS_EXPORT(hs_release) void hs_release(hs_vp vp) {
  UNI_HOOK();
  struct kid *k = uni_kid(vp);
  if (k == cur) {
    uni_charge();
    cur = 0;
    slice_end = HS_NEVER;
  } else if (k->state == K_READY) {
    nready--;
  }
  if (k->state != K_WAITING) {
    k->state = K_WAITING;
    pol_sleep(k);
  }
  uni_resched();
}

HS_EXPORT(hs_grant) void hs_grant(hs_vp parent, hs_cpu cpu) {
  UNI_HOOK();
  (void)parent;
  (void)cpu;
  uni_resched();
}

HS_EXPORT(hs_revoke) void hs_revoke(hs_vp parent, hs_i32 reason) {
  UNI_HOOK();
  if (cur && hsched_vp_last_cpu(parent) == cur_cpu)
    uni_unplan(reason);
  slice_end = HS_NEVER;
  uni_resched();
}

HS_EXPORT(hs_timer) void hs_timer(void) {
  UNI_HOOK();
  uni_resched();
}

HS_EXPORT(hs_check_invariants) hs_i32 hs_check_invariants(void) {
  hs_u32 r = 0;
  UNI_FOR_EACH(k) {
    if (k->state == K_READY)
      r++;
    if (k->state == K_RUNNING && k != cur) {
      static const char msg[] = "a child is marked running but not planned";
      uni_fail(HS_STR(msg));
      return HS_ERR_REFUSED;
    }
  }
  if (r != nready) {
    static const char msg[] = "the ready count disagrees with the child table";
    uni_fail(HS_STR(msg));
    return HS_ERR_REFUSED;
  }
  return HS_OK;
}

/* Reads an optional duration parameter, failing on a wrong kind. */
__attribute__((unused)) static int uni_duration(const char *key, hs_u32 len, hs_duration *out) {
  return hsched_param_duration(key, len, out) != HS_PARAM_WRONG;
}

#endif /* HSCHED_UNIPROC_H */
