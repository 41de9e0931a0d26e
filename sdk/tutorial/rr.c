/*
 * rr.c: round robin on one processor, the plug-in that
 * docs/writing-a-policy.md builds step by step.
 *
 * Ready children wait in one first-in, first-out queue. The child at its
 * head runs for at most `quantum`; when its quantum ends and another child
 * is waiting, it goes to the back of the queue and the next one runs. A
 * child that blocks leaves the queue; when it wakes it joins the back.
 * When the parent takes the processor away, the child that was running
 * goes back to the front: it lost its turn through no fault of its own.
 *
 * Everything the plug-in knows lives in the globals below: hsched gives
 * every scheduler instance its own copy of the module.
 */
#include "hsched_policy.h"

HS_PLUGIN("{\"abi\":1,\"name\":\"rr\","
          "\"summary\":\"round robin with a fixed quantum, one processor\","
          "\"instance_params\":[{\"key\":\"quantum\",\"kind\":\"duration\","
          "\"default\":\"10ms\",\"doc\":\"longest run before the next child's turn\"}],"
          "\"multiprocessor\":false,"
          "\"guarantee\":{\"needs\":\"any\",\"gives\":\"NULL\"}}")

#define MAX_KIDS 256
#define NO_KID 0xFFFFFFFFu

enum { FREE, WAITING, QUEUED, RUNNING };

struct kid {
  hs_vp vp;
  int state;
  hs_u32 next; /* the next child in the queue, or in the free list */
};

static struct kid kids[MAX_KIDS];
static hs_u32 used;              /* slots ever used */
static hs_u32 free_list = NO_KID;
static hs_u32 head = NO_KID, tail = NO_KID;
static hs_u32 cur = NO_KID;      /* the child we gave the processor to */
static hs_cpu cur_cpu;
static hs_time slice_end;
static hs_duration quantum = 10000000; /* 10 ms */

static void fail(const char *msg, hs_u32 len) { hsched_error(msg, len); }

/* The child table slot of a VP: we stored it as the VP's tag. */
static hs_u32 slot(hs_vp vp) {
  hs_u32 s = hsched_child_tag(vp);
  if (s >= used || kids[s].vp != vp)
    __builtin_trap(); /* a bug in this file: hsched unloads the plug-in */
  return s;
}

static void push_back(hs_u32 s) {
  kids[s].state = QUEUED;
  kids[s].next = NO_KID;
  if (tail == NO_KID)
    head = s;
  else
    kids[tail].next = s;
  tail = s;
}

static void push_front(hs_u32 s) {
  kids[s].state = QUEUED;
  kids[s].next = head;
  head = s;
  if (tail == NO_KID)
    tail = s;
}

static hs_u32 pop_front(void) {
  hs_u32 s = head;
  head = kids[s].next;
  if (head == NO_KID)
    tail = NO_KID;
  return s;
}

static void unlink(hs_u32 s) {
  hs_u32 prev = NO_KID;
  for (hs_u32 i = head; i != NO_KID; prev = i, i = kids[i].next) {
    if (i != s)
      continue;
    if (prev == NO_KID)
      head = kids[i].next;
    else
      kids[prev].next = kids[i].next;
    if (tail == s)
      tail = prev;
    return;
  }
}

/* The processor we hold now, or HS_NONE. */
static hs_cpu held_cpu(void) {
  return hsched_vp_cpu(hsched_parent_vp(0));
}

/* Takes the processor back from the running child, which joins the queue
 * at the front or the back. hsched's view may lag behind ours (a grant we
 * queued can be dropped when the processor goes away first), so revoke only
 * if the child really runs there. */
static void take_back(int to_front, hs_i32 reason) {
  hs_u32 s = cur;
  cur = NO_KID;
  if (to_front)
    push_front(s);
  else
    push_back(s);
  if (hsched_vp_cpu(kids[s].vp) == cur_cpu)
    hsched_revoke(kids[s].vp, reason);
}

/* Every hook ends here: end an expired quantum, give a free processor to
 * the head of the queue or give it back, ask for a processor when someone
 * waits, and arm the timer for the end of the quantum. */
static void decide(void) {
  hs_time now = hsched_now();
  hs_cpu cpu = held_cpu();
  if (cur != NO_KID && cpu == cur_cpu && now >= slice_end) {
    if (head != NO_KID)
      take_back(0, HS_PREEMPTED);
    else
      slice_end = now + quantum; /* alone: another quantum */
  }
  if (cur == NO_KID && cpu != HS_NONE) {
    if (head != NO_KID) {
      cur = pop_front();
      cur_cpu = cpu;
      kids[cur].state = RUNNING;
      slice_end = now + quantum;
      hsched_grant(kids[cur].vp, cpu);
    } else {
      hsched_release(hsched_parent_vp(0));
    }
  }
  hsched_set_parent_demand(cur != NO_KID || head != NO_KID ? 1 : 0);
  if (cur != NO_KID)
    hsched_set_timer(slice_end);
  else
    hsched_cancel_timer();
}

HS_EXPORT(hs_create) hs_i32 hs_create(void) {
  if (hsched_param_duration(HS_STR("quantum"), &quantum) == HS_PARAM_WRONG ||
      quantum == 0) {
    static const char msg[] = "quantum must be a positive duration";
    fail(HS_STR(msg));
    return HS_ERR_PARAM;
  }
  return HS_OK;
}

HS_EXPORT(hs_register_vp) hs_i32 hs_register_vp(hs_vp vp) {
  hs_u32 s;
  if (free_list != NO_KID) {
    s = free_list;
    free_list = kids[s].next;
  } else if (used < MAX_KIDS) {
    s = used++;
  } else {
    static const char msg[] = "rr takes at most 256 children";
    fail(HS_STR(msg));
    return HS_ERR_REFUSED;
  }
  kids[s].vp = vp;
  kids[s].state = WAITING;
  hsched_set_child_tag(vp, s);
  return HS_OK;
}

HS_EXPORT(hs_unregister_vp) void hs_unregister_vp(hs_vp vp) {
  hs_u32 s = slot(vp);
  if (kids[s].state == QUEUED)
    unlink(s);
  if (cur == s)
    cur = NO_KID;
  kids[s].state = FREE;
  kids[s].vp = HS_NONE;
  kids[s].next = free_list;
  free_list = s;
  decide();
}

HS_EXPORT(hs_request) void hs_request(hs_vp vp) {
  hs_u32 s = slot(vp);
  if (kids[s].state == WAITING)
    push_back(s);
  decide();
}

HS_EXPORT(hs_release) void hs_release(hs_vp vp) {
  hs_u32 s = slot(vp);
  if (cur == s)
    cur = NO_KID; /* its processor is free again */
  else if (kids[s].state == QUEUED)
    unlink(s);
  kids[s].state = WAITING;
  decide();
}

HS_EXPORT(hs_grant) void hs_grant(hs_vp parent, hs_cpu cpu) {
  (void)parent;
  (void)cpu;
  decide();
}

HS_EXPORT(hs_revoke) void hs_revoke(hs_vp parent, hs_i32 reason) {
  if (cur != NO_KID && hsched_vp_last_cpu(parent) == cur_cpu)
    take_back(1, reason);
  decide();
}

HS_EXPORT(hs_timer) void hs_timer(void) { decide(); }
