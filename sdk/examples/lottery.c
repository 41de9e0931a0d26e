/*
 * lottery.c: lottery scheduling (Waldspurger and Weihl 1994) as an hsched
 * plug-in, on one processor.
 *
 * Each child holds `tickets`. At the end of every quantum, and whenever the
 * processor is free, the instance draws a ticket at random among the ready
 * children; its holder runs for the next quantum. Over n quanta a child
 * holding a fraction p of the ready tickets wins a binomial(n, p) number of
 * them: its expected share is p and the standard deviation of its count of
 * wins is sqrt(n p (1 - p)).
 *
 * The random numbers come from a xorshift64* generator seeded by the
 * instance parameter `seed`, so a simulation stays deterministic.
 * Compensation tickets (a child that used a fraction f of its quantum
 * gets 1/f times its tickets until it next wins) are not implemented: a
 * child that blocks early gets less than its ticket share.
 */
#define MAX_KIDS 1024
#define KID_EXTRA hs_u64 tickets;

#include "uniproc.h"

HS_PLUGIN("{\"abi\":1,\"name\":\"lottery\","
          "\"summary\":\"lottery scheduling: each quantum goes to the holder of "
          "a ticket drawn at random among the ready children (one processor)\","
          "\"source\":\"Waldspurger and Weihl 1994\","
          "\"multiprocessor\":false,\"instance_params\":["
          "{\"key\":\"quantum\",\"kind\":\"duration\",\"default\":\"10ms\","
          "\"doc\":\"how long a winner runs before the next draw\"},"
          "{\"key\":\"seed\",\"kind\":\"integer\",\"default\":\"1\","
          "\"doc\":\"seed of the ticket draws\"}],"
          "\"child_params\":[{\"key\":\"tickets\",\"kind\":\"integer\","
          "\"default\":\"1\",\"min\":1,\"max\":1000000000,"
          "\"doc\":\"tickets held, 1 to 10^9\"}]}")

static hs_duration quantum = 10000000; /* 10 ms */
static hs_u64 rng;

/* xorshift64* (Vigna 2016): small, fast and good enough for draws. */
static hs_u64 next_random(void) {
  rng ^= rng >> 12;
  rng ^= rng << 25;
  rng ^= rng >> 27;
  return rng * 2685821657736338717ull;
}

static hs_i32 pol_create(void) {
  hs_i64 seed = 1;
  if (!uni_duration(HS_STR("quantum"), &quantum) || quantum == 0) {
    static const char msg[] = "quantum must be a positive duration";
    hsched_error(HS_STR(msg));
    return HS_ERR_PARAM;
  }
  if (hsched_param_i64(HS_STR("seed"), &seed) == HS_PARAM_WRONG) {
    static const char msg[] = "seed must be an integer";
    hsched_error(HS_STR(msg));
    return HS_ERR_PARAM;
  }
  /* Any seed, 0 included, gives a non-zero state. */
  rng = (hs_u64)seed * 0x9E3779B97F4A7C15ull + 0x2545F4914F6CDD1Dull;
  if (rng == 0)
    rng = 1;
  return HS_OK;
}

static hs_i32 pol_admit(struct kid *k) {
  hs_i64 t = 1;
  if (hsched_param_i64(HS_STR("tickets"), &t) == HS_PARAM_WRONG || t < 1 ||
      t > 1000000000) {
    static const char msg[] = "tickets must be an integer from 1 to 10^9";
    hsched_error(HS_STR(msg));
    return HS_ERR_PARAM;
  }
  k->tickets = (hs_u64)t;
  return HS_OK;
}

static void pol_gone(struct kid *k) { (void)k; }
static void pol_wake(struct kid *k) { (void)k; }
static void pol_sleep(struct kid *k) { (void)k; }
static void pol_charge(struct kid *k, hs_duration used) {
  (void)k;
  (void)used;
}

/* Draws a ticket among the ready children (the running one is not ready:
 * at the end of its quantum it has been put back before the draw). */
static struct kid *pol_pick(void) {
  hs_u64 total = 0;
  UNI_FOR_EACH(k) if (k->state == K_READY) total += k->tickets;
  if (total == 0)
    return 0;
  hs_u64 draw = next_random() % total;
  UNI_FOR_EACH(k) {
    if (k->state != K_READY)
      continue;
    if (draw < k->tickets)
      return k;
    draw -= k->tickets;
  }
  return 0;
}

/* A wake-up waits for the next draw. */
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
  hs_u64 old = k->tickets;
  hs_i32 r = pol_admit(k);
  if (r != HS_OK)
    k->tickets = old;
  return r;
}
