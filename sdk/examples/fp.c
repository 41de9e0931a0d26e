/*
 * fp.c: preemptive fixed priority as an hsched plug-in (Regehr 2001,
 * §5.3.1.1), the example of docs/plugin-abi.md.
 *
 * Each child VP has an integer `priority`; higher runs first, equal
 * priorities first come, first served by the time they asked. With k
 * processors held the k most important ready children run. A child that
 * loses its processor keeps its place. A revoked processor is revoked
 * from the child on it with the parent's reason.
 *
 * The plug-in keeps its own view of its children (waiting, ready, or
 * planned on a processor) and of which processor each child is planned
 * on; hsched's VP states may lag behind the actions this instance queued,
 * so before revoking a child it checks that the child really runs there
 * (a grant may have been dropped as stale).
 */
#include "hsched_policy.h"

#define MAX_KIDS 1024
#define MAX_CPUS 256

HS_PLUGIN("{\"abi\":1,\"name\":\"fp-wasm\","
          "\"summary\":\"preemptive fixed priority over child VPs (plug-in), "
          "multiprocessor, FIFO among equal priorities\","
          "\"source\":\"Regehr 2001, §5.3.1.1\","
          "\"instance_params\":[],"
          "\"child_params\":[{\"key\":\"priority\",\"kind\":\"integer\","
          "\"default\":\"0\",\"doc\":\"higher runs first\"}],"
          "\"guarantee\":{\"needs\":\"any\",\"gives\":\"top:priority\"}}")

enum { K_FREE, K_WAITING, K_READY, K_RUNNING };

struct kid {
  hs_vp vp;
  hs_i64 prio;
  hs_u64 since; /* when it asked; its place among equal priorities */
  hs_u32 cpu;   /* planned processor while K_RUNNING */
  int state;
};

static struct kid kids[MAX_KIDS];
static hs_u32 nkids; /* slots in use are below nkids */
static hs_u32 free_head = HS_NONE;
static hs_u32 on_cpu[MAX_CPUS]; /* slot + 1 of the child planned there */
static hs_u64 seq;
static hs_u32 ready, running;

static hs_u32 alloc_slot(void) {
  if (free_head != HS_NONE) {
    hs_u32 s = free_head;
    free_head = (hs_u32)kids[s].since;
    return s;
  }
  if (nkids == MAX_KIDS)
    return HS_NONE;
  return nkids++;
}

static struct kid *kid_of(hs_vp vp) {
  hs_u32 t = hsched_child_tag(vp);
  if (t >= nkids || kids[t].state == K_FREE || kids[t].vp != vp)
    __builtin_trap(); /* hsched's tags and ours disagree: a bug here */
  return &kids[t];
}

/* a outranks b: higher priority, or equal and asked earlier. */
static int outranks(const struct kid *a, const struct kid *b) {
  return a->prio > b->prio || (a->prio == b->prio && a->since < b->since);
}

static struct kid *best_ready(void) {
  struct kid *best = 0;
  for (hs_u32 i = 0; i < nkids; i++)
    if (kids[i].state == K_READY && (!best || outranks(&kids[i], best)))
      best = &kids[i];
  return best;
}

static struct kid *worst_running(void) {
  struct kid *worst = 0;
  for (hs_u32 i = 0; i < nkids; i++)
    if (kids[i].state == K_RUNNING && (!worst || outranks(worst, &kids[i])))
      worst = &kids[i];
  return worst;
}

static void plan(struct kid *k, hs_u32 cpu) {
  k->state = K_RUNNING;
  k->cpu = cpu;
  on_cpu[cpu] = (hs_u32)(k - kids) + 1;
  ready--;
  running++;
  hsched_grant(k->vp, cpu);
}

/* Takes `cpu` back in the view from the child planned there, which goes
 * back to ready with its place; revokes it if it really runs there. */
static struct kid *unplan(hs_u32 cpu, hs_i32 reason) {
  if (cpu >= MAX_CPUS || !on_cpu[cpu])
    return 0;
  struct kid *k = &kids[on_cpu[cpu] - 1];
  on_cpu[cpu] = 0;
  k->state = K_READY;
  running--;
  ready++;
  if (hsched_vp_cpu(k->vp) == cpu)
    hsched_revoke(k->vp, reason);
  return k;
}

/* Gives every held processor without a child to the best ready child (or
 * releases it), preempts while a ready child outranks a running one, and
 * asks the parent for as many processors as children want. */
static void settle(void) {
  hs_u32 n = hsched_parent_vp_count();
  for (hs_u32 i = 0; i < n; i++) {
    hs_vp p = hsched_parent_vp(i);
    hs_u32 cpu = hsched_vp_cpu(p);
    if (cpu == HS_NONE || cpu >= MAX_CPUS || on_cpu[cpu])
      continue;
    struct kid *b = best_ready();
    if (b)
      plan(b, cpu);
    else
      hsched_release(p);
  }
  for (;;) {
    struct kid *b = best_ready(), *w = worst_running();
    if (!b || !w || !outranks(b, w) || b->prio == w->prio)
      break;
    hs_u32 cpu = w->cpu;
    unplan(cpu, HS_PREEMPTED);
    plan(b, cpu);
  }
  hsched_set_parent_demand(ready + running);
}

HS_EXPORT(hs_create) hs_i32 hs_create(void) {
  if (hsched_cpu_count() > MAX_CPUS) {
    static const char msg[] = "this plug-in handles at most 256 processors";
    hsched_error(HS_STR(msg));
    return HS_ERR_REFUSED;
  }
  return HS_OK;
}

HS_EXPORT(hs_register_vp) hs_i32 hs_register_vp(hs_vp vp) {
  hs_i64 prio = 0;
  if (hsched_param_i64(HS_STR("priority"), &prio) == HS_PARAM_WRONG) {
    static const char msg[] = "expected an integer";
    hsched_error(HS_STR(msg));
    return HS_ERR_PARAM;
  }
  hs_u32 s = alloc_slot();
  if (s == HS_NONE) {
    static const char msg[] = "this plug-in takes at most 1024 child VPs";
    hsched_error(HS_STR(msg));
    return HS_ERR_REFUSED;
  }
  kids[s].vp = vp;
  kids[s].prio = prio;
  kids[s].state = K_WAITING;
  kids[s].since = 0;
  hsched_set_child_tag(vp, s);
  return HS_OK;
}

HS_EXPORT(hs_unregister_vp) void hs_unregister_vp(hs_vp vp) {
  struct kid *k = kid_of(vp);
  if (k->state == K_READY)
    ready--;
  k->state = K_FREE;
  k->since = free_head;
  free_head = (hs_u32)(k - kids);
}

HS_EXPORT(hs_request) void hs_request(hs_vp vp) {
  struct kid *k = kid_of(vp);
  if (k->state == K_WAITING) {
    k->state = K_READY;
    k->since = ++seq;
    ready++;
  }
  settle();
}

HS_EXPORT(hs_release) void hs_release(hs_vp vp) {
  struct kid *k = kid_of(vp);
  if (k->state == K_RUNNING) {
    on_cpu[k->cpu] = 0;
    running--;
  } else if (k->state == K_READY) {
    ready--;
  }
  k->state = K_WAITING;
  settle();
}

HS_EXPORT(hs_grant) void hs_grant(hs_vp parent, hs_cpu cpu) {
  (void)parent;
  (void)cpu;
  settle();
}

HS_EXPORT(hs_revoke) void hs_revoke(hs_vp parent, hs_i32 reason) {
  unplan(hsched_vp_last_cpu(parent), reason);
  settle();
}

HS_EXPORT(hs_msg) hs_i32 hs_msg(hs_vp vp, hs_i32 kind) {
  if (kind != HS_MSG_SET_PARAMS)
    return HS_ERR_UNSUPPORTED;
  hs_i64 prio;
  switch (hsched_param_i64(HS_STR("priority"), &prio)) {
  case HS_PARAM_WRONG: {
    static const char msg[] = "expected an integer";
    hsched_error(HS_STR(msg));
    return HS_ERR_PARAM;
  }
  case HS_PARAM_OK:
    kid_of(vp)->prio = prio;
    settle();
  }
  return HS_OK;
}

HS_EXPORT(hs_check_invariants) hs_i32 hs_check_invariants(void) {
  for (hs_u32 i = 0; i < nkids; i++) {
    if (kids[i].state == K_RUNNING && hsched_vp_cpu(kids[i].vp) != kids[i].cpu) {
      static const char msg[] = "a child planned on a processor does not run there";
      hsched_error(HS_STR(msg));
      return HS_ERR_REFUSED;
    }
  }
  return HS_OK;
}
