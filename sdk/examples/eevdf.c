/*
 * eevdf.c: earliest eligible virtual deadline first (Stoica et al. 1996)
 * as an hsched plug-in, on one processor.
 *
 * Each child has a `share` of the processor (the shares of one instance
 * add up to at most 1). Virtual time V advances by t / W while the
 * instance runs children for t, W being the sum of the shares of the
 * children that ask for the processor. A child's current request, one
 * quantum long, becomes eligible at virtual time ve and has the virtual
 * deadline vd = ve + quantum / share; each time it receives t, ve advances
 * by t / share. The eligible child (ve <= V) with the earliest vd runs,
 * for one quantum. A child's lag, share * (V - ve), is the service it is
 * owed; EEVDF keeps it above -quantum and below +quantum for every child
 * that keeps asking, the one-quantum allocation error of Regehr 2001,
 * §5.3.3.2, so a child gets PSBE share quantum from an instance that
 * receives ALL.
 *
 * A child that wakes joins with lag 0 (ve = V); a child that stops asking
 * with lag l leaves it to the others (V += l / W'), which keeps the lags
 * of the children asking summing to 0 (the paper's leave rule).
 */
#define MAX_KIDS 1024
#define KID_EXTRA                                                          \
  double share;                                                            \
  double ve; /* virtual eligible time of the current request */            \
  double vd; /* its virtual deadline */

#include "uniproc.h"

HS_PLUGIN("{\"abi\":1,\"name\":\"eevdf\","
          "\"summary\":\"earliest eligible virtual deadline first: "
          "proportional share within one quantum of the ideal "
          "(one processor)\","
          "\"source\":\"Stoica et al. 1996; Regehr 2001, §5.3.3.2\","
          "\"multiprocessor\":false,\"instance_params\":["
          "{\"key\":\"quantum\",\"kind\":\"duration\",\"default\":\"10ms\","
          "\"doc\":\"request length: the allocation error bound\"}],"
          "\"child_params\":[{\"key\":\"share\",\"kind\":\"number\","
          "\"default\":\"required\",\"doc\":\"fraction of the processor, the "
          "children's adding up to at most 1\"}],"
          "\"guarantee\":{\"needs\":\"ALL\",\"gives\":\"PSBE {share} {quantum}\"}}")

static hs_duration quantum = 10000000; /* 10 ms */
static double vtime;      /* V */
static double active;     /* W: shares of the children asking */
static double admitted;   /* shares of all children */

static hs_i32 pol_create(void) {
  if (!uni_duration(HS_STR("quantum"), &quantum) || quantum == 0) {
    static const char msg[] = "quantum must be a positive duration";
    hsched_error(HS_STR(msg));
    return HS_ERR_PARAM;
  }
  return HS_OK;
}

static hs_i32 read_share(double *out) {
  double s = 0;
  if (hsched_param_f64(HS_STR("share"), &s) != HS_PARAM_OK || !(s > 0) ||
      s > 1) {
    static const char msg[] = "share must be a number in (0, 1]";
    hsched_error(HS_STR(msg));
    return HS_ERR_PARAM;
  }
  *out = s;
  return HS_OK;
}

/* Admission: the shares add up to at most the whole processor (with
 * room for rounding in the decimal shares of a file). */
static hs_i32 admit_change(double old, double s) {
  double load = admitted - old + s;
  if (load > 1.0 + 1e-9) {
    static const char msg[] = "the shares would add up to more than 1";
    hsched_error(HS_STR(msg));
    hsched_admission(load, 1.0);
    return HS_ERR_ADMISSION;
  }
  admitted = load;
  return HS_OK;
}

static hs_i32 pol_admit(struct kid *k) {
  hs_i32 r = read_share(&k->share);
  return r != HS_OK ? r : admit_change(0, k->share);
}

static void pol_gone(struct kid *k) { admitted -= k->share; }

static void new_request(struct kid *k) {
  k->vd = k->ve + (double)quantum / k->share;
}

static void pol_wake(struct kid *k) {
  k->ve = vtime;
  new_request(k);
  active += k->share;
}

static void pol_sleep(struct kid *k) {
  double lag = k->share * (vtime - k->ve);
  active -= k->share;
  if (active > 1e-12)
    vtime += lag / active;
  else
    active = 0;
}

static void pol_charge(struct kid *k, hs_duration used) {
  if (active > 0)
    vtime += (double)used / active;
  k->ve += (double)used / k->share;
  new_request(k);
}

static struct kid *pol_pick(void) {
  struct kid *best = 0, *earliest = 0;
  UNI_FOR_EACH(k) {
    if (k->state != K_READY)
      continue;
    if (!earliest || k->ve < earliest->ve)
      earliest = k;
    /* Eligible: lag >= 0, with room for rounding in virtual time. */
    if (k->ve <= vtime + 1e-6 &&
        (!best || k->vd < best->vd ||
         (k->vd == best->vd && k->order < best->order)))
      best = k;
  }
  return best ? best : earliest;
}

/* Requests are not preempted: a wake-up waits for the quantum to end. */
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
  double s;
  hs_i32 r = read_share(&s);
  if (r == HS_OK)
    r = admit_change(k->share, s);
  if (r != HS_OK)
    return r;
  if (k->state != K_WAITING)
    active += s - k->share;
  k->share = s;
  new_request(k);
  return HS_OK;
}
