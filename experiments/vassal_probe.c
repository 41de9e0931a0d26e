/*
 * vassal_probe.c: the test programs of experiments/vassal_tables_1_2.py
 * (Candea and Jones 1998, Tables 1 and 2), which writes every sample to a
 * file so that the experiment can give the tables' median, mean and
 * standard deviation. The experiment compiles it with the system's C
 * compiler:
 *
 *   vassal_probe poll THREADS SECONDS OUT [CPU]
 *       THREADS threads poll CLOCK_MONOTONIC for SECONDS (pinned to CPU if
 *       given) and each records every gap between two readings longer than
 *       500 ns as "THREAD START END" (ns), i.e. the last reading before it
 *       lost the CPU and the first after it got it back: the probe of
 *       hsched-live's `probe poll` (crates/linux/src/probe.rs, poll_gaps),
 *       with the raw gaps kept.
 *   vassal_probe wake PERIOD_NS SECONDS OUT [CPU]
 *       one thread sleeps to absolute CLOCK_MONOTONIC times PERIOD_NS apart
 *       (clock_nanosleep, TIMER_ABSTIME) and records "IDEAL ACTUAL" (ns)
 *       for every wake-up: the instant it asked for and the first clock
 *       reading after it returned (pinned to CPU if given).
 *   vassal_probe hog SECONDS [CPU]
 *       burns CPU for SECONDS (pinned to CPU if given).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define GAP_NS 500
#define MAX_GAPS (1u << 18)

static uint64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static void pin(const char *cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(atoi(cpu), &set);
  if (sched_setaffinity(0, sizeof set, &set) != 0) {
    perror("vassal_probe: sched_setaffinity");
    exit(2);
  }
}

struct poller {
  pthread_t id;
  uint64_t end;
  uint64_t (*gaps)[2];
  size_t n;
};

static void *poll_thread(void *arg) {
  struct poller *p = arg;
  uint64_t last = now_ns();
  while (last < p->end) {
    uint64_t t = now_ns();
    if (t - last > GAP_NS && p->n < MAX_GAPS) {
      p->gaps[p->n][0] = last;
      p->gaps[p->n][1] = t;
      p->n++;
    }
    last = t;
  }
  return NULL;
}

static int poll_main(int threads, double secs, FILE *out) {
  struct poller *ps = calloc((size_t)threads, sizeof *ps);
  if (!ps)
    return 2;
  uint64_t end = now_ns() + (uint64_t)(secs * 1e9);
  for (int i = 0; i < threads; i++) {
    ps[i].end = end;
    ps[i].gaps = malloc(MAX_GAPS * sizeof *ps[i].gaps);
    if (!ps[i].gaps || pthread_create(&ps[i].id, NULL, poll_thread, &ps[i]) != 0) {
      fprintf(stderr, "vassal_probe: cannot start thread %d\n", i);
      return 2;
    }
  }
  for (int i = 0; i < threads; i++)
    pthread_join(ps[i].id, NULL);
  for (int i = 0; i < threads; i++)
    for (size_t k = 0; k < ps[i].n; k++)
      fprintf(out, "%d %llu %llu\n", i, (unsigned long long)ps[i].gaps[k][0],
              (unsigned long long)ps[i].gaps[k][1]);
  return 0;
}

static int wake_main(uint64_t period, double secs, FILE *out) {
  size_t n = (size_t)(secs * 1e9 / (double)period);
  uint64_t(*w)[2] = malloc((n + 1) * sizeof *w);
  if (!w)
    return 2;
  uint64_t ideal = now_ns() + period;
  for (size_t k = 0; k < n; k++) {
    struct timespec t = {(time_t)(ideal / 1000000000u), (long)(ideal % 1000000000u)};
    int e;
    while ((e = clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &t, NULL)) == EINTR)
      ;
    if (e != 0) {
      fprintf(stderr, "vassal_probe: clock_nanosleep: %s\n", strerror(e));
      return 2;
    }
    w[k][0] = ideal;
    w[k][1] = now_ns();
    ideal += period;
  }
  for (size_t k = 0; k < n; k++)
    fprintf(out, "%llu %llu\n", (unsigned long long)w[k][0], (unsigned long long)w[k][1]);
  return 0;
}

int main(int argc, char **argv) {
  const char *usage = "usage: vassal_probe poll THREADS SECONDS OUT [CPU] | "
                      "wake PERIOD_NS SECONDS OUT [CPU] | hog SECONDS [CPU]\n";
  if (argc >= 3 && strcmp(argv[1], "hog") == 0) {
    if (argc > 3)
      pin(argv[3]);
    uint64_t end = now_ns() + (uint64_t)(atof(argv[2]) * 1e9);
    volatile uint64_t x = 0;
    while (now_ns() < end)
      for (int i = 0; i < 10000; i++)
        x = x + (uint64_t)i;
    return x == 1 ? 1 : 0;
  }
  if (argc < 5 || (strcmp(argv[1], "poll") != 0 && strcmp(argv[1], "wake") != 0)) {
    fputs(usage, stderr);
    return 2;
  }
  FILE *out = fopen(argv[4], "w");
  if (!out) {
    perror(argv[4]);
    return 2;
  }
  int rc;
  if (strcmp(argv[1], "poll") == 0) {
    if (argc > 5)
      pin(argv[5]);
    rc = poll_main(atoi(argv[2]), atof(argv[3]), out);
  } else {
    if (argc > 5)
      pin(argv[5]);
    rc = wake_main(strtoull(argv[2], NULL, 10), atof(argv[3]), out);
  }
  if (fclose(out) != 0)
    rc = 2;
  return rc;
}
