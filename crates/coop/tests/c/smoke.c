/* Exercises the C ABI: ordering, idempotence, callbacks that submit. */
#include "hsched_coop.h"
#include <stdio.h>
#include <stdlib.h>

static char order[16];
static int n;
static uint64_t again_ev;
static int again_left = 2;

static void rec(HschedCoopLoop *l, uint64_t ev, void *data) {
    (void)l; (void)ev;
    order[n++] = *(const char *)data;
}

static void stop_cb(HschedCoopLoop *l, uint64_t ev, void *data) {
    (void)ev;
    ++*(int *)data;
    hsched_coop_stop(l);
}

/* Live entry points outside `hsched run`: no channel, so the live loop is
 * non-cooperative and still runs; the raw poll refuses bad arguments. */
static int live_fallback(void) {
    if (getenv("HSCHED_COOP") != NULL) return 0;
    if (hsched_coop_live_open() != NULL) return 30;
    HschedCoopPollParam in = {0}, out = {0};
    if (hsched_coop_live_poll(NULL, &in, &out) != -1) return 31;
    if (hsched_coop_mono_now() == 0) return 32;
    HschedCoopLoop *l = hsched_coop_new_live();
    int hit = 0;
    uint64_t e = hsched_coop_event(l, stop_cb, &hit);
    uint64_t t0 = hsched_coop_now(l);
    if (hsched_coop_submit_deadline(l, e, t0 + 1000000) != 1) return 33;
    hsched_coop_run(l);
    uint64_t t1 = hsched_coop_now(l);
    hsched_coop_free(l);
    if (hit != 1) return 34;
    if (t1 - t0 < 1000000) return 35;
    return 0;
}

static void again(HschedCoopLoop *l, uint64_t ev, void *data) {
    (void)data;
    order[n++] = 'x';
    if (--again_left > 0) hsched_coop_submit_best_effort(l, ev, -5, 0);
}

static int polls;
static uint64_t seen_deadline;

static void poll(const HschedCoopPollParam *in, HschedCoopPollParam *out, void *data) {
    (void)data;
    polls++;
    if (in->has_deadline) seen_deadline = in->deadline;
    out->has_deadline = 0;
    out->has_best_effort = 0;
}

/* Cooperative mode: the yield passes the own earliest deadline (IN). */
static int cooperative(void) {
    HschedCoopLoop *l = hsched_coop_new_cooperative(poll, 0);
    static const char c = 'c';
    uint64_t e = hsched_coop_event(l, rec, (void *)&c);
    uint64_t at = hsched_coop_now(l) + 1000000;
    hsched_coop_submit_deadline(l, e, at);
    int64_t ran = hsched_coop_run(l);
    hsched_coop_free(l);
    if (ran != 1 || polls < 1 || seen_deadline != at) return 20;
    return 0;
}

int main(void) {
    HschedCoopLoop *l = hsched_coop_new();
    static const char a = 'a', b = 'b', d = 'd';
    uint64_t ea = hsched_coop_event(l, rec, (void *)&a);
    uint64_t eb = hsched_coop_event(l, rec, (void *)&b);
    uint64_t ed = hsched_coop_event(l, rec, (void *)&d);
    again_ev = hsched_coop_event(l, again, 0);
    if (hsched_coop_submit_best_effort(l, ea, 1, 0) != 1) return 10;
    if (hsched_coop_submit_best_effort(l, ea, 1, 0) != 0) return 11;
    if (hsched_coop_submit_best_effort(l, eb, 2, 0) != 1) return 12;
    if (hsched_coop_submit_deadline(l, ed, hsched_coop_now(l) + 2000000) != 1) return 13;
    if (hsched_coop_submit_best_effort(l, again_ev, -5, 0) != 1) return 14;
    if (hsched_coop_cancel(l, 9999) != 0) return 15;
    uint64_t t0 = hsched_coop_now(l);
    int64_t ran = hsched_coop_run(l);
    uint64_t t1 = hsched_coop_now(l);
    order[n] = 0;
    printf("%s %lld %llu\n", order, (long long)ran, (unsigned long long)(t1 - t0));
    hsched_coop_free(l);
    if (ran != 5) return 16;
    if (t1 - t0 < 2000000) return 17; /* the deadline event never ran early */
    if (!(order[0] == 'b' && order[1] == 'a' && order[2] == 'x' && order[3] == 'x' &&
          order[4] == 'd'))
        return 18;
    int lf = live_fallback();
    if (lf != 0) return lf;
    return cooperative();
}
