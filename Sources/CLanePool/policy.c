/*
 * policy.c - the QoS -> priority table, and applying a band's OS policy from inside a
 * lane thread: scheduling policy, nice, I/O priority, timer slack. Every setting is
 * read back from the kernel after it is applied, and a refusal is recorded, never
 * fatal. The fallback rules are in docs/priorities.md.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "internal.h"

#include <linux/capability.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#define IOPRIO_WHO_PROCESS 1

/* The table, in band order. Priority classes are the seeds'; policies are LanePool's
 * (docs/priorities.md explains each column). */
static const lanepool_priority_class_t class_of_band[LANEPOOL_BAND_COUNT] = {
    LANEPOOL_PRIORITY_HIGH, LANEPOOL_PRIORITY_HIGH, LANEPOOL_PRIORITY_DEFAULT,
    LANEPOOL_PRIORITY_LOW, LANEPOOL_PRIORITY_BACKGROUND};

#define SIZE ((uint32_t)sizeof(lanepool_band_policy_t))
const lanepool_band_policy_t lanepool__default_policy[LANEPOOL_BAND_COUNT] = {
    /* struct_size, sched, rt, nice, ioprio class, level, timer slack, EEVDF slice */
    {SIZE, LANEPOOL_SCHED_OTHER, 0, -5, LANEPOOL_IOPRIO_BE, 0, 0, 100000},
    {SIZE, LANEPOOL_SCHED_OTHER, 0, -3, LANEPOOL_IOPRIO_BE, 2, 0, 100000},
    {SIZE, LANEPOOL_SCHED_OTHER, 0, 0, LANEPOOL_IOPRIO_BE, 4, 0, 300000},
    {SIZE, LANEPOOL_SCHED_BATCH, 0, 4, LANEPOOL_IOPRIO_BE, 6, 1000000, 0},
    {SIZE, LANEPOOL_SCHED_BATCH, 0, 10, LANEPOOL_IOPRIO_BE, 7, 10000000, 0},
};
#undef SIZE

int lanepool_priority_class(lanepool_qos_t qos, lanepool_priority_class_t *out) {
  int b = lanepool_band_index(qos);
  if (b < 0 || !out) return EINVAL;
  *out = class_of_band[b];
  return 0;
}

int lanepool_default_policy_sized(lanepool_qos_t qos, lanepool_band_policy_t *out) {
  int b = lanepool_band_index(qos);
  if (b < 0 || !out || !lanepool__size_accepted(out->struct_size, sizeof *out)) return EINVAL;
  uint32_t size = out->struct_size;
  memcpy(out, &lanepool__default_policy[b], size); /* an older caller's prefix */
  out->struct_size = size;
  return 0;
}

/* 0 or EINVAL with *field naming the bad field of config.policy[band]. */
int lanepool__validate_policy(const lanepool_band_policy_t *p, int band, int allow_realtime,
                              const char **field) {
  static const char *const fields[LANEPOOL_BAND_COUNT][7] = {
#define BAND_FIELDS(b)                                                                             \
  {"policy[" #b "].sched",         "policy[" #b "].rt_priority",  "policy[" #b "].nice",           \
   "policy[" #b "].ioprio_class",  "policy[" #b "].ioprio_level", "policy[" #b "].slice_ns",       \
   "policy[" #b "].timer_slack_ns"}
      BAND_FIELDS(0), BAND_FIELDS(1), BAND_FIELDS(2), BAND_FIELDS(3), BAND_FIELDS(4)
#undef BAND_FIELDS
  };
  lanepool_sched_t s = p->sched;
  bool rt = s == LANEPOOL_SCHED_FIFO || s == LANEPOOL_SCHED_RR;
  bool known =
      rt || s == LANEPOOL_SCHED_OTHER || s == LANEPOOL_SCHED_BATCH || s == LANEPOOL_SCHED_IDLE;
  int k = -1; /* the field's index in a row of `fields` */
  if (!known || (rt && !allow_realtime))
    k = 0;
  else if (rt ? p->rt_priority < 1 || p->rt_priority > 99 : p->rt_priority != 0)
    k = 1;
  else if (p->nice < -20 || p->nice > 19)
    k = 2;
  else if ((int)p->ioprio_class < LANEPOOL_IOPRIO_NONE || p->ioprio_class > LANEPOOL_IOPRIO_IDLE)
    k = 3;
  else if (p->ioprio_level < 0 || p->ioprio_level > 7)
    k = 4;
  else if (p->slice_ns != 0 && (rt || p->slice_ns < 100000 || p->slice_ns > 100000000))
    k = 5;
  /* The kernel takes any slack up to ULONG_MAX, and then a 1 ms sleep never returns. */
  else if (p->timer_slack_ns > LANEPOOL_MAX_TIMER_SLACK_NS)
    k = 6;
  if (k >= 0) *field = fields[band][k];
  return k >= 0 ? EINVAL : 0;
}

int lanepool__set_sched(pid_t tid, int policy, int rt_priority) {
  LANEPOOL__TEST_POINT("sched_syscall", NULL, tid);
  struct sched_param sp = {.sched_priority = rt_priority};
  return sched_setscheduler(tid, policy, &sp) == 0 ? 0 : errno;
}

int lanepool__set_nice(pid_t tid, int nice) {
  LANEPOOL__TEST_POINT("sched_syscall", NULL, tid);
  return setpriority(PRIO_PROCESS, (id_t)tid, nice) == 0 ? 0 : errno;
}

int lanepool__get_nice(pid_t tid) {
  LANEPOOL__TEST_POINT("sched_syscall", NULL, tid);
  errno = 0;
  return getpriority(PRIO_PROCESS, (id_t)tid);
}

int lanepool__set_ioprio(pid_t tid, int value) {
  LANEPOOL__TEST_POINT("sched_syscall", NULL, tid);
  return syscall(SYS_ioprio_set, IOPRIO_WHO_PROCESS, tid, value) == 0 ? 0 : errno;
}

int lanepool__get_attr(pid_t tid, lanepool__sched_attr *attr) {
  LANEPOOL__TEST_POINT("sched_syscall", NULL, tid);
  memset(attr, 0, sizeof *attr);
  return syscall(SYS_sched_getattr, tid, attr, sizeof *attr, 0) == 0 ? 0 : errno;
}

int lanepool__set_attr(pid_t tid, lanepool__sched_attr *attr) {
  LANEPOOL__TEST_POINT("sched_syscall", NULL, tid);
  attr->size = sizeof *attr;
  /* Of the flags only RESET_ON_FORK, which an unprivileged thread may not clear. */
  attr->sched_flags &= LANEPOOL__SCHED_FLAG_RESET_ON_FORK;
  return syscall(SYS_sched_setattr, tid, attr, 0) == 0 ? 0 : errno;
}

int lanepool__set_slice(pid_t tid, uint64_t slice_ns) {
  lanepool__sched_attr attr;
  int rc = lanepool__get_attr(tid, &attr);
  if (rc) return rc;
  attr.sched_runtime = slice_ns;
  return lanepool__set_attr(tid, &attr);
}

int lanepool__set_slack(uint64_t ns) {
  return prctl(PR_SET_TIMERSLACK, (unsigned long)ns, 0, 0, 0) == 0 ? 0 : errno;
}

uint64_t lanepool__get_slack(void) { return (uint64_t)prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0); }

int lanepool__get_ioprio(pid_t tid) {
  return (int)syscall(SYS_ioprio_get, IOPRIO_WHO_PROCESS, tid);
}

int lanepool__ioprio_value(int ioprio_class, int level) {
  return (ioprio_class << 13) | (ioprio_class == LANEPOOL_IOPRIO_IDLE ? 0 : level);
}

int lanepool__nice_floor(void) {
  LANEPOOL__TEST_POINT("sched_syscall", NULL, 0);
  struct rlimit rl;
  if (getrlimit(RLIMIT_NICE, &rl) != 0) return 20;
  if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= 40) return -20;
  return 20 - (int)rl.rlim_cur;
}

int lanepool__lowest_permitted_nice(int current) {
  int floor = lanepool__nice_floor();
  return floor < current ? floor : current;
}

void lanepool__nice_as_permitted(pid_t tid, int want, int start) {
  if (want >= start) return; /* a refused raise: nothing to retry */
  int floor = lanepool__nice_floor();
  if (floor < start) (void)lanepool__set_nice(tid, want > floor ? want : floor);
}

/* The kernel honours CAP_SYS_NICE for nice and policy only in the initial user namespace
 * (capable(), not ns_capable()): a container's root with a full effective set may still
 * be refused. Its namespace is the initial one when /proc says so (PROC_USER_INIT_INO);
 * without /proc, the set alone decides. */
bool lanepool__has_cap_sys_nice(void) {
  struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
  struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3];
  memset(data, 0, sizeof data);
  if (syscall(SYS_capget, &hdr, data) != 0) return false;
  if (!((data[CAP_SYS_NICE / 32].effective >> (CAP_SYS_NICE % 32)) & 1u)) return false;
  char ns[64];
  ssize_t n = readlink("/proc/self/ns/user", ns, sizeof ns - 1);
  if (n <= 0) return true;
  ns[n] = '\0';
  return strcmp(ns, "user:[4026531837]") == 0;
}

int lanepool__nice_shift(const lanepool_band_policy_t policy[LANEPOOL_BAND_COUNT]) {
  int least = policy[0].nice;
  for (int b = 1; b < LANEPOOL_BAND_COUNT; b++)
    if (policy[b].nice < least) least = policy[b].nice;
  if (lanepool__has_cap_sys_nice()) return 0;
  /* The nice the lanes start at: this thread's, or 0 for a negative one it does not pass
   * on (SCHED_RESET_ON_FORK). */
  int start = lanepool__get_nice((pid_t)syscall(SYS_gettid));
  if (start < 0 && (sched_getscheduler(0) & SCHED_RESET_ON_FORK)) start = 0;
  int lowest = lanepool__lowest_permitted_nice(start);
  return lowest > least ? lowest - least : 0;
}

void lanepool__apply_policy(lanepool__applied *a, pid_t tid, const lanepool_band_policy_t *p) {
  LANEPOOL__TEST_POINT("apply_policy", NULL, tid);
  int saved = errno;

  /* 1. Scheduling policy. Fallbacks: a refused real-time policy becomes SCHED_OTHER;
   *    a refused SCHED_IDLE becomes SCHED_BATCH (both keep the band's direction). */
  a->sched.requested = p->sched;
  a->sched.error = lanepool__set_sched(tid, p->sched, p->rt_priority);
  bool rt = p->sched == LANEPOOL_SCHED_FIFO || p->sched == LANEPOOL_SCHED_RR;
  if (a->sched.error && (rt || p->sched == LANEPOOL_SCHED_IDLE))
    (void)lanepool__set_sched(tid, rt ? LANEPOOL_SCHED_OTHER : LANEPOOL_SCHED_BATCH, 0);
  a->sched.got = sched_getscheduler(tid) & ~SCHED_RESET_ON_FORK;

  /* 2. Nice. Raising nice is always allowed; lowering it needs CAP_SYS_NICE or
   *    RLIMIT_NICE. When refused, go as low as permitted, never below the request:
   *    the bands keep their order (bands clamped together tie). */
  int start = lanepool__get_nice(tid);
  a->nice.requested = p->nice;
  a->nice.error = lanepool__set_nice(tid, p->nice);
  if (a->nice.error) lanepool__nice_as_permitted(tid, p->nice, start);
  a->nice.got = lanepool__get_nice(tid);

  /* 3. I/O priority. A refused RT class becomes best-effort at the same level; a
   *    refused IDLE class becomes best-effort 7. */
  a->ioprio = (lanepool_applied_t){.requested = -1};
  if (p->ioprio_class != LANEPOOL_IOPRIO_NONE) {
    int value = lanepool__ioprio_value((int)p->ioprio_class, p->ioprio_level);
    a->ioprio.requested = value;
    a->ioprio.error = lanepool__set_ioprio(tid, value);
    int level = p->ioprio_class == LANEPOOL_IOPRIO_RT ? p->ioprio_level : 7; /* else IDLE's */
    if (a->ioprio.error && p->ioprio_class != LANEPOOL_IOPRIO_BE)
      (void)lanepool__set_ioprio(tid, lanepool__ioprio_value(LANEPOOL_IOPRIO_BE, level));
  }
  a->ioprio.got = lanepool__get_ioprio(tid);

  /* 4. Timer slack (this thread only; prctl acts on the caller). */
  a->timer_slack =
      (lanepool_applied_t){.requested = p->timer_slack_ns ? (int64_t)p->timer_slack_ns : -1,
                           .error = p->timer_slack_ns ? lanepool__set_slack(p->timer_slack_ns) : 0};
  a->timer_slack.got = (int64_t)lanepool__get_slack(); /* after the set */

  /* 5. EEVDF slice, after nice (sched_setattr carries the nice it read). Not asked for:
   * the kernel's default (runtime 0), not what the creating thread had (a thread that
   * replaces one a task ended is started by that thread, boosted maybe). */
  lanepool__sched_attr attr;
  int slice_error = lanepool__set_slice(tid, p->slice_ns);
  a->slice = (lanepool_applied_t){.requested = p->slice_ns ? (int64_t)p->slice_ns : -1,
                                  .error = p->slice_ns ? slice_error : 0};
  a->slice.got = lanepool__get_attr(tid, &attr) == 0 ? (int64_t)attr.sched_runtime : -1;

  errno = saved;
}

const char *lanepool__sched_name(int64_t s) {
  static const char *const names[] = {[LANEPOOL_SCHED_OTHER] = "SCHED_OTHER",
                                      [LANEPOOL_SCHED_FIFO] = "SCHED_FIFO",
                                      [LANEPOOL_SCHED_RR] = "SCHED_RR",
                                      [LANEPOOL_SCHED_BATCH] = "SCHED_BATCH",
                                      [LANEPOOL_SCHED_IDLE] = "SCHED_IDLE"};
  return s >= 0 && s < (int64_t)(sizeof names / sizeof names[0]) && names[s] ? names[s] : "?";
}

/* One line per pool summarising every refused setting, band by band (the first lane
 * that saw each refusal speaks for its band). Returns the number of refusals. */
int lanepool__describe_refusals(lanepool_t *pool, char *buf, size_t len) {
  size_t used = 0;
  int refusals = 0;
  buf[0] = '\0';
#define APPEND(...)                                                                                \
  do {                                                                                             \
    if (used < len) {                                                                              \
      int n_ = snprintf(buf + used, len - used, __VA_ARGS__);                                      \
      if (n_ > 0) used += (size_t)n_;                                                              \
    }                                                                                              \
  } while (0)
  APPEND("lanepool '%s': the kernel refused some priority settings; the lanes run with "
         "the fallback (docs/priorities.md):",
         pool->name);
  /* Setting 0 (the scheduler) is printed by policy name, the others as numbers. */
  static const char *const label[] = {"", "nice", "ioprio", "timer slack", "slice"};
  for (uint32_t b = 0; b < LANEPOOL_BAND_COUNT; b++) {
    const char *band = lanepool__band_short_names[b];
    for (size_t k = 0; k < 5; k++) {
      const lanepool_applied_t *seen = NULL;
      for (uint32_t i = 0; i < pool->lanes_per_band && !seen; i++) {
        const lanepool_applied_t *a = &lanepool__band_lane(pool, b, i)->applied.setting[k];
        if (a->error) seen = a;
      }
      if (!seen) continue;
      refusals++;
      if (k == 0)
        APPEND(" %s %s -> %s (%s);", band, lanepool__sched_name(seen->requested),
               lanepool__sched_name(seen->got), strerror(seen->error));
      else
        APPEND(" %s %s %lld -> %lld (%s);", band, label[k], (long long)seen->requested,
               (long long)seen->got, strerror(seen->error));
    }
  }
#undef APPEND
  return refusals;
}
