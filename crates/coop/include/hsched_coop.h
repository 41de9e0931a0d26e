/* hsched_coop.h: C interface of the cooperative-polling event loop
 * (Sinha 2007, Figs 2.1-2.4). Link with libhsched_coop.a.
 *
 * Times are nanoseconds of the loop's monotonic clock (hsched_coop_now).
 * A deadline event is a *release time*: it is not run before it and, once
 * due, runs before every best-effort event. Best-effort events run by
 * priority (larger first), then timestamp (earlier first).
 * Return values: 1 acted, 0 no effect (submit/cancel are idempotent),
 * -1 bad argument. Callbacks may call submit/cancel/event/stop/now on the
 * loop they receive, but not run or free. A loop pointer must come from
 * hsched_coop_new* and is invalid after hsched_coop_free; loops are not
 * thread-safe (one thread per loop, as in the thesis's model). */
#ifndef HSCHED_COOP_H
#define HSCHED_COOP_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct HschedCoopLoop HschedCoopLoop;

/* Event callback: (loop, event id, user data). */
typedef void (*hsched_coop_cb)(HschedCoopLoop *loop, uint64_t event, void *data);

/* IN / OUT parameter of coop_poll. */
typedef struct HschedCoopPollParam {
    uint8_t has_deadline;    /* 1: deadline is meaningful */
    uint64_t deadline;       /* IN: earliest own release time; OUT: yield by */
    uint8_t has_best_effort; /* 1: priority/timestamp are meaningful */
    int64_t priority;        /* IN: own best; OUT: best of the other members */
    uint64_t timestamp;
} HschedCoopPollParam;

/* The scheduler side: reads IN, fills OUT, returns when the caller runs. */
typedef void (*hsched_coop_poll_fn)(const HschedCoopPollParam *in,
                                    HschedCoopPollParam *out, void *data);

HschedCoopLoop *hsched_coop_new(void);
HschedCoopLoop *hsched_coop_new_cooperative(hsched_coop_poll_fn poll, void *data);
void hsched_coop_free(HschedCoopLoop *loop);
uint64_t hsched_coop_event(HschedCoopLoop *loop, hsched_coop_cb cb, void *data);
int32_t hsched_coop_submit_deadline(HschedCoopLoop *loop, uint64_t event, uint64_t at_ns);
int32_t hsched_coop_submit_best_effort(HschedCoopLoop *loop, uint64_t event,
                                       int64_t priority, uint64_t timestamp);
int32_t hsched_coop_cancel(HschedCoopLoop *loop, uint64_t event);
void hsched_coop_stop(HschedCoopLoop *loop);
int64_t hsched_coop_run(HschedCoopLoop *loop);
uint64_t hsched_coop_now(HschedCoopLoop *loop);

/* Live coop_poll under `hsched run` (a `coop` scheduler): shared memory
 * and a futex to the daemon, named by the HSCHED_COOP environment
 * variable, which the daemon sets for every program it launches (also
 * when its hierarchy has no `coop` scheduler yet: one may be created at
 * run time). Without it these fall back to non-cooperative mode and say
 * so once on stderr; so does a call the daemon refuses (the thread is not
 * under a `coop` scheduler at that moment). Example:
 * crates/coop/tests/c/live.c. */

/* A loop that yields through the live channel when there is one, and is
 * non-cooperative otherwise. Free with hsched_coop_free. */
HschedCoopLoop *hsched_coop_new_live(void);

/* For a C program with its own event loop: one handle per thread. */
typedef struct HschedCoopLive HschedCoopLive;
/* NULL when there is no usable channel (run non-cooperatively). */
HschedCoopLive *hsched_coop_live_open(void);
/* Times are CLOCK_MONOTONIC ns (hsched_coop_mono_now). Returns 0 with OUT
 * filled when the caller is to run again; -1 on a bad argument, or when
 * the daemon refused or is gone (stop cooperating). */
int32_t hsched_coop_live_poll(HschedCoopLive *h, const HschedCoopPollParam *in,
                              HschedCoopPollParam *out);
/* Times the scheduler policed (demoted) this thread since the handle was
 * opened: a spin past the yield-by time (plus the scheduler's grace) or a
 * block outside coop_poll. Updated with each reply, so a demotion shows
 * once the next hsched_coop_live_poll (which re-admits it) returns. */
uint64_t hsched_coop_live_policed(const HschedCoopLive *h);
void hsched_coop_live_close(HschedCoopLive *h);
uint64_t hsched_coop_mono_now(void);

/* Requests to the daemon's resource manager (Regehr 2001, ch. 8) over its
 * control socket; docs/live-mode.md, "Requests: the resource manager".
 * hsched_rm_open(NULL) connects to /run/hsched.sock; NULL: no daemon.
 * hsched_rm_request asks for a guarantee ("RESBS 1ms 5ms") for thread tid
 * (0: the caller; attached first if the daemon does not manage it) and
 * returns the request number (> 0) with *state HSCHED_RM_GRANTED (in force
 * now) or HSCHED_RM_PENDING (an event follows); -1 bad argument, -2 refused
 * (msg gets the reason, naming the rule), -3 I/O. hsched_rm_wait returns
 * the request an event is about (*event GRANTED, REVOKED or REFUSED), 0
 * when none came within timeout_ms, -3 on I/O. Requests outlive the
 * connection; they end with hsched_rm_release or the thread's exit. */
#include <stddef.h>
#define HSCHED_RM_GRANTED 1
#define HSCHED_RM_PENDING 2
#define HSCHED_RM_REVOKED 3
#define HSCHED_RM_REFUSED 4
typedef struct Rm HschedRm;
HschedRm *hsched_rm_open(const char *socket);
void hsched_rm_close(HschedRm *rm);
int64_t hsched_rm_request(HschedRm *rm, int32_t tid, const char *guarantee,
                          int32_t *state, char *msg, size_t len);
int32_t hsched_rm_release(HschedRm *rm, int64_t request);
int64_t hsched_rm_wait(HschedRm *rm, int32_t timeout_ms, int32_t *event);

#ifdef __cplusplus
}
#endif

#endif /* HSCHED_COOP_H */
