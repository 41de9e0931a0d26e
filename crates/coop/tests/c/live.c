/* live.c: a C program using the live coop_poll functions of
 * hsched_coop.h under a real daemon (`hsched-live run`). Run by the live
 * test `live_c_program_polls_the_daemon` of crates/linux/tests/live.rs,
 * which compiles it against the header and libhsched_coop.a.
 *
 * Usage: live OUTFILE [WAIT_MS]
 *
 * It waits WAIT_MS (default 400; the test moves it under a `coop`
 * scheduler created at run time meanwhile), then:
 *  1. with its own loop and a handle from hsched_coop_live_open: 60
 *     frames of 10 ms, each 2 ms of best-effort work in 250 us events,
 *     calling hsched_coop_live_poll whenever OUT's yield-by time has
 *     passed, then a cooperative sleep until the next frame (a poll with
 *     only a future deadline), which must not return early;
 *  2. spins 150 ms without polling (policed for overrun), then polls
 *     again, which re-admits it and reports the demotion;
 *  2b. starts a second thread (it joins the same scheduler) that joins
 *     the domain with a less important best-effort event; the main
 *     thread's answers must then report that event as the other members'
 *     best (OUT priority and timestamp), three times; then it sleeps
 *     cooperatively so that the second thread gets its answer and ends;
 *  3. runs an hsched_coop_new_live event loop: deadline events 5 ms apart
 *     (never run early) and best-effort events between them.
 * It writes one line of key=value counts to OUTFILE and exits 0, or 2
 * when there is no channel. */
#define _POSIX_C_SOURCE 200809L
#include "hsched_coop.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define MS 1000000ULL
#define US 1000ULL

static void spin_until(uint64_t t) {
    while (hsched_coop_mono_now() < t) {
    }
}

static void sleep_ms(unsigned ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Part 2b: the other member. */
static uint64_t OTHER_TS;
static int OTHER_JOINED, OTHER_STOP, OTHER_REFUSED;

static void *other_member(void *arg) {
    (void)arg;
    HschedCoopLive *h = hsched_coop_live_open();
    if (!h) {
        __atomic_store_n(&OTHER_REFUSED, 1, __ATOMIC_SEQ_CST);
        return NULL;
    }
    HschedCoopPollParam in = {0, 0, 1, 0, OTHER_TS}, o;
    uint64_t yield_by = 0;
    while (!__atomic_load_n(&OTHER_STOP, __ATOMIC_SEQ_CST)) {
        if (hsched_coop_mono_now() >= yield_by) {
            if (hsched_coop_live_poll(h, &in, &o) != 0) {
                __atomic_store_n(&OTHER_REFUSED, 1, __ATOMIC_SEQ_CST);
                break;
            }
            __atomic_store_n(&OTHER_JOINED, 1, __ATOMIC_SEQ_CST);
            yield_by = o.has_deadline ? o.deadline : UINT64_MAX;
        }
        spin_until(hsched_coop_mono_now() + 250 * US);
    }
    hsched_coop_live_close(h);
    return NULL;
}

/* Part 3: the event loop. */
struct loop_state {
    uint64_t due[8];
    int deadline_runs;
    int early;
    int be_runs;
};
static struct loop_state LS;

static void on_deadline(HschedCoopLoop *l, uint64_t ev, void *data) {
    uint64_t i = (uint64_t)(uintptr_t)data;
    (void)ev;
    if (hsched_coop_now(l) < LS.due[i]) {
        LS.early++;
    }
    LS.deadline_runs++;
}

static void on_best_effort(HschedCoopLoop *l, uint64_t ev, void *data) {
    (void)ev;
    (void)data;
    spin_until(hsched_coop_now(l) + 300 * US);
    LS.be_runs++;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: live OUTFILE [WAIT_MS]\n");
        return 1;
    }
    FILE *out = fopen(argv[1], "w");
    if (!out) {
        perror(argv[1]);
        return 1;
    }
    sleep_ms(argc > 2 ? (unsigned)atoi(argv[2]) : 400);

    HschedCoopLive *h = hsched_coop_live_open();
    if (!h) {
        fprintf(out, "open=0\n");
        fclose(out);
        return 2;
    }
    int polls = 0, out_deadlines = 0, refused = 0, sleeps = 0, early = 0;
    uint64_t worst_wake_late = 0;
    HschedCoopPollParam in, o;
    uint64_t start = hsched_coop_mono_now() + 10 * MS;
    uint64_t yield_by = 0;
    for (int k = 0; k < 60; k++) {
        uint64_t frame = start + (uint64_t)k * 10 * MS;
        uint64_t next = frame + 10 * MS;
        for (int e = 0; e < 8; e++) {
            spin_until(hsched_coop_mono_now() + 250 * US);
            if (hsched_coop_mono_now() >= yield_by) {
                in.has_deadline = 1;
                in.deadline = next;
                in.has_best_effort = 1;
                in.priority = 1;
                in.timestamp = frame;
                if (hsched_coop_live_poll(h, &in, &o) != 0) {
                    refused++;
                    break;
                }
                polls++;
                if (o.has_deadline) {
                    out_deadlines++;
                    yield_by = o.deadline;
                } else {
                    yield_by = UINT64_MAX;
                }
            }
        }
        /* Cooperative sleep: no best-effort work, a future deadline. */
        in.has_deadline = 1;
        in.deadline = next;
        in.has_best_effort = 0;
        if (hsched_coop_live_poll(h, &in, &o) != 0) {
            refused++;
            break;
        }
        polls++;
        sleeps++;
        if (o.has_deadline) {
            out_deadlines++;
            yield_by = o.deadline;
        }
        uint64_t now = hsched_coop_mono_now();
        if (now < next) {
            early++;
        } else if (now - next > worst_wake_late) {
            worst_wake_late = now - next;
        }
    }
    uint64_t policed_before = hsched_coop_live_policed(h);

    /* Misbehave: spin far past the slice without polling. */
    spin_until(hsched_coop_mono_now() + 150 * MS);
    in.has_deadline = 0;
    in.has_best_effort = 1;
    in.priority = 1;
    in.timestamp = hsched_coop_mono_now();
    int after = hsched_coop_live_poll(h, &in, &o);
    if (after == 0) {
        polls++;
        out_deadlines += o.has_deadline ? 1 : 0;
    } else {
        refused++;
    }
    uint64_t policed_after = hsched_coop_live_policed(h);

    /* A second member with a best-effort event of priority 0 (below the
     * main thread's 1): it runs when the main thread sleeps or its slice
     * ends, and OUT tells the main thread about its event. */
    int other_seen = 0, other_polls = 0;
    OTHER_TS = hsched_coop_mono_now();
    pthread_t other;
    int started = pthread_create(&other, NULL, other_member, NULL) == 0;
    uint64_t give_up = hsched_coop_mono_now() + 500 * MS;
    yield_by = 0;
    while (started && other_seen < 3 && hsched_coop_mono_now() < give_up &&
           !__atomic_load_n(&OTHER_REFUSED, __ATOMIC_SEQ_CST)) {
        spin_until(hsched_coop_mono_now() + 250 * US);
        if (hsched_coop_mono_now() < yield_by) {
            continue;
        }
        in.has_deadline = 0;
        in.has_best_effort = 1;
        in.priority = 1;
        in.timestamp = hsched_coop_mono_now();
        if (hsched_coop_live_poll(h, &in, &o) != 0) {
            refused++;
            break;
        }
        other_polls++;
        yield_by = o.has_deadline ? o.deadline : UINT64_MAX;
        /* The other thread waits in its first call (the main thread's
         * event is more important) but is a member from that call on. */
        if (o.has_best_effort && o.priority == 0 && o.timestamp == OTHER_TS) {
            other_seen++;
        }
    }
    __atomic_store_n(&OTHER_STOP, 1, __ATOMIC_SEQ_CST);
    /* Sleep cooperatively so the other thread runs, sees the flag, ends. */
    in.has_deadline = 1;
    in.deadline = hsched_coop_mono_now() + 20 * MS;
    in.has_best_effort = 0;
    if (hsched_coop_live_poll(h, &in, &o) != 0) {
        refused++;
    }
    hsched_coop_live_close(h);
    if (started) {
        pthread_join(other, NULL);
    }

    /* The event loop polls the daemon by itself. */
    HschedCoopLoop *l = hsched_coop_new_live();
    uint64_t t0 = hsched_coop_now(l) + 5 * MS;
    for (uintptr_t i = 0; i < 8; i++) {
        LS.due[i] = t0 + i * 5 * MS;
        uint64_t d = hsched_coop_event(l, on_deadline, (void *)i);
        hsched_coop_submit_deadline(l, d, LS.due[i]);
        uint64_t b = hsched_coop_event(l, on_best_effort, NULL);
        hsched_coop_submit_best_effort(l, b, (int64_t)i, LS.due[i]);
    }
    int64_t ran = hsched_coop_run(l);
    hsched_coop_free(l);

    fprintf(out,
            "open=1 polls=%d out_deadlines=%d refused=%d sleeps=%d early=%d "
            "worst_wake_late_us=%llu policed_before=%llu policed_after=%llu "
            "other_started=%d other_refused=%d other_polls=%d other_seen=%d other_joined=%d loop_ran=%lld loop_deadlines=%d loop_early=%d loop_best_effort=%d\n",
            polls, out_deadlines, refused, sleeps, early,
            (unsigned long long)(worst_wake_late / US),
            (unsigned long long)policed_before, (unsigned long long)policed_after,
            started, OTHER_REFUSED, other_polls, other_seen, OTHER_JOINED,
            (long long)ran, LS.deadline_runs, LS.early, LS.be_runs);
    fclose(out);
    return 0;
}
