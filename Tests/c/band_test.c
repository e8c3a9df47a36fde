/*
 * band_test.c - bands for threads LanePool does not own (lanepool_thread_enter_band /
 * lanepool_thread_restore) and escalation (a lane runs at the band of the highest
 * caller waiting on it), checked from /proc/self/task/<tid>/stat. Runs three times:
 * as the caller (root in CI), and in child processes dropped to uid 65534 with
 * RLIMIT_NICE 0 and with RLIMIT_NICE 20.
 * Build (LANEPOOL_TEST_HOOKS: the test sees every boost's target thread;
 * LANEPOOL_TEST_INJECT: it sets the rescue threads' delay):
 *   cc -std=gnu11 -O2 -pthread -DLANEPOOL_TEST_HOOKS -DLANEPOOL_TEST_INJECT -Iinclude
 *      -ISources/CLanePool Tests/c/band_test.c Sources/CLanePool/(all).c
 */
#define _GNU_SOURCE
#include "lanepool.h"
#include "check.h"
#include "internal.h" /* the lanes' escalation counts, to check that nothing is left */

#include <errno.h>
#include <grp.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* What the process may do with nice: root (CAP_SYS_NICE), or unprivileged with an
 * RLIMIT_NICE of 0 (raise only) or 20 (down to nice 0). */
typedef enum { MODE_ROOT, MODE_UNPRIV, MODE_UNPRIV_RLIMIT20, MODE_UNPRIV_RLIMIT15 } mode_t_;
static mode_t_ mode;
static const char *mode_name[] = {"root", "uid 65534, RLIMIT_NICE 0", "uid 65534, RLIMIT_NICE 20",
                                  "uid 65534, RLIMIT_NICE 15"};

/* Sleeps `us` microseconds: the polls below, each for a condition, 10 s at most. */
static void nap_us(long us) {
  struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
  nanosleep(&ts, NULL);
}
/* Polls every 1 ms while `cond` holds, 10 s at most (the caller checks the condition). */
#define POLL_WHILE(cond)                                                                           \
  for (int poll_ = 0; poll_ < 10000 && (cond); poll_++) nap_us(1000)
/* In a task: holds its thread until `flag` is set. */
static void hold_until(_Atomic int *flag) {
  while (!atomic_load(flag)) nap_us(200);
}

static pid_t gettid_(void) { return (pid_t)syscall(SYS_gettid); }

/* nice and policy of a thread, from /proc (after the last ')': 17th and 39th fields). */
static int proc_sched(pid_t tid, int *nice, int *policy) {
  char path[64], buf[1024];
  snprintf(path, sizeof path, "/proc/self/task/%d/stat", (int)tid);
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  char *p = strrchr(buf, ')');
  if (!p) return -1;
  p += 2;
  for (int field = 1; field <= 39 && p; field++) {
    if (field == 17) *nice = atoi(p);
    if (field == 39) *policy = atoi(p);
    p = strchr(p, ' ');
    if (p) p++;
  }
  return 0;
}

static int nice_of(pid_t tid) {
  int n = 99, pol = -1;
  proc_sched(tid, &n, &pol);
  return n;
}

static int policy_of(pid_t tid) {
  int n = 99, pol = -1;
  proc_sched(tid, &n, &pol);
  return pol;
}

static long slack_now(void) { return (long)prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0); }

/* ---- lanepool_thread_enter_band ------------------------------------------------ */

static void test_enter_restore(void) {
  current_test = "enter_restore";
  pid_t me = gettid_();
  CHECK(nice_of(me) == 0 && policy_of(me) == SCHED_OTHER);

  /* Up: userInteractive, nice -5. Root gets it; RLIMIT_NICE 20 goes as low as 0 (here);
   * RLIMIT_NICE 0 keeps 0. Either way restore puts nice 0 back. */
  lanepool_band_token_t t;
  CHECK_RC(lanepool_thread_enter_band(LANEPOOL_QOS_USER_INTERACTIVE, 0, &t), 0);
  CHECK(t.tid == me && t.qos == LANEPOOL_QOS_USER_INTERACTIVE);
  CHECK(t.nice.requested == -5);
  if (mode == MODE_ROOT) {
    CHECK(nice_of(me) == -5 && t.nice.got == -5 && t.nice.error == 0);
  } else {
    CHECK(nice_of(me) == 0 && t.nice.got == 0);
    CHECK(t.nice.error == EPERM || t.nice.error == EACCES);
  }
  CHECK(policy_of(me) == SCHED_OTHER);
  CHECK_RC(lanepool_thread_restore(&t), 0);
  CHECK(nice_of(me) == 0 && policy_of(me) == SCHED_OTHER);

  /* Down: background, nice 10, SCHED_BATCH, I/O best-effort 7, 10 ms timer slack.
   * RLIMIT_NICE below 20 could never come back to nice 0: nice is withheld (the undo
   * rule). */
  long slack0 = slack_now();
  CHECK_RC(lanepool_thread_enter_band(LANEPOOL_QOS_BACKGROUND, 0, &t), 0);
  CHECK(policy_of(me) == SCHED_BATCH && t.sched.got == SCHED_BATCH && t.sched.error == 0);
  CHECK(t.ioprio.got == ((2 << 13) | 7));
  CHECK(slack_now() == 10000000);
  bool no_way_back = mode == MODE_UNPRIV || mode == MODE_UNPRIV_RLIMIT15; /* floor above 0 */
  if (no_way_back) {
    CHECK(nice_of(me) == 0 && t.nice.error == EPERM);
  } else {
    CHECK(nice_of(me) == 10 && t.nice.got == 10 && t.nice.error == 0);
  }
  /* Nested: userInitiated inside background, then back to background, then out. */
  lanepool_band_token_t inner;
  CHECK_RC(lanepool_thread_enter_band(LANEPOOL_QOS_USER_INITIATED, 0, &inner), 0);
  CHECK(policy_of(me) == SCHED_OTHER);
  if (mode == MODE_ROOT) CHECK(nice_of(me) == -3);
  CHECK_RC(lanepool_thread_restore(&inner), 0);
  CHECK(policy_of(me) == SCHED_BATCH);
  CHECK(nice_of(me) == (no_way_back ? 0 : 10));
  CHECK_RC(lanepool_thread_restore(&t), 0);
  CHECK(nice_of(me) == 0 && policy_of(me) == SCHED_OTHER);
  CHECK(slack_now() == slack0);
  CHECK_RC(lanepool_thread_restore(&t), 0); /* twice: harmless */
  CHECK(nice_of(me) == 0 && policy_of(me) == SCHED_OTHER);

  /* STRICT: anything refused or withheld is EPERM and changes nothing. */
  int want = mode == MODE_ROOT ? 0 : EPERM;
  CHECK_RC(lanepool_thread_enter_band(LANEPOOL_QOS_USER_INTERACTIVE, LANEPOOL_BAND_STRICT, &t),
           want);
  if (want == 0) CHECK_RC(lanepool_thread_restore(&t), 0);
  CHECK(nice_of(me) == 0 && policy_of(me) == SCHED_OTHER);
}

static void *restore_elsewhere(void *arg) { return (void *)(intptr_t)lanepool_thread_restore(arg); }

static void on_lane(void *ctx) {
  lanepool_band_token_t t;
  *(int *)ctx = lanepool_thread_enter_band(LANEPOOL_QOS_USER_INITIATED, 0, &t);
}

static void test_enter_bad_input(void) {
  current_test = "enter_bad_input";
  lanepool_band_token_t t;
  CHECK_RC(lanepool_thread_enter_band((lanepool_qos_t)0x42, 0, &t), EINVAL);
  CHECK_RC(lanepool_thread_enter_band(LANEPOOL_QOS_DEFAULT, 0x80, &t), EINVAL);
  CHECK_RC(lanepool_thread_enter_band(LANEPOOL_QOS_DEFAULT, 0, NULL), EINVAL);
  t.struct_size = 3;
  CHECK_RC(lanepool_thread_enter_band_sized(LANEPOOL_QOS_DEFAULT, 0, &t), EINVAL);
  CHECK_RC(lanepool_thread_restore(NULL), EINVAL);
  /* Another thread's token. */
  CHECK_RC(lanepool_thread_enter_band(LANEPOOL_QOS_UTILITY, 0, &t), 0);
  pthread_t th;
  void *res = NULL;
  pthread_create(&th, NULL, restore_elsewhere, &t);
  pthread_join(th, &res);
  CHECK((intptr_t)res == EINVAL);
  CHECK_RC(lanepool_thread_restore(&t), 0);
  CHECK(nice_of(gettid_()) == 0 && policy_of(gettid_()) == SCHED_OTHER);
  /* A lane's own thread has its band. */
  lanepool_t *pool = NULL;
  lanepool_config_t cfg;
  lanepool_config_init(&cfg);
  cfg.name = "bandbad";
  cfg.lanes_per_band = 1;
  CHECK_RC(lanepool_create(&cfg, &pool), 0);
  lanepool_lane_t *lane;
  CHECK_RC(lanepool_get_lane(pool, LANEPOOL_QOS_DEFAULT, 0, &lane), 0);
  int rc = -1;
  CHECK_RC(lanepool_lane_sync_flags(lane, on_lane, &rc, LANEPOOL_SYNC_QUEUED), 0);
  CHECK(rc == EBUSY);
  CHECK_RC(lanepool_destroy(pool), 0);
}


/* ---- the one nice rule (policy.c) agrees with the kernel: from nice 19, a thread
 * without CAP_SYS_NICE may go down to lanepool__nice_floor() and not below ---- */

static void *nice_floor_thread(void *arg) {
  int *result = arg;
  pid_t me = gettid_();
  int floor = lanepool__nice_floor();
  int below = (floor > 19 ? 19 : floor) - 1;
  result[0] = setpriority(PRIO_PROCESS, (id_t)me, 19) == 0;
  result[1] = floor > 19 || setpriority(PRIO_PROCESS, (id_t)me, floor) == 0;
  (void)setpriority(PRIO_PROCESS, (id_t)me, 19);
  result[2] = below < -20 || setpriority(PRIO_PROCESS, (id_t)me, below) != 0;
  result[3] = lanepool__lowest_permitted_nice(19) == (floor < 19 ? floor : 19);
  return NULL;
}

static void test_nice_floor(void) {
  current_test = "nice_floor";
  struct rlimit rl;
  CHECK(getrlimit(RLIMIT_NICE, &rl) == 0);
  int expected = rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= 40 ? -20 : 20 - (int)rl.rlim_cur;
  CHECK(lanepool__nice_floor() == expected);
  if (mode == MODE_ROOT) return; /* CAP_SYS_NICE: any nice */
  int result[4] = {0, 0, 0, 0};
  pthread_t th;
  pthread_create(&th, NULL, nice_floor_thread, result);
  pthread_join(th, NULL);
  CHECK(result[0] && result[1] && result[2] && result[3]);
}

/* ---- escalation ---------------------------------------------------------------- */

static const int table_nice[LANEPOOL_BAND_COUNT] = {-5, -3, 0, 4, 10};

/* The nice a background lane (nice 10) gets when boosted to band `b`. */
static int boosted_nice(int b) {
  switch (mode) {
  case MODE_ROOT:
    return table_nice[b];
  case MODE_UNPRIV:
    return 10; /* RLIMIT_NICE 0: nice stays, and so do the policy and slice (below) */
  case MODE_UNPRIV_RLIMIT20:
    return table_nice[b] > 0 ? table_nice[b] : 0;
  case MODE_UNPRIV_RLIMIT15:
    return table_nice[b] > 5 ? table_nice[b] : 5;
  }
  return 99;
}

/* The policy a background lane (SCHED_BATCH) gets when boosted to band `b`: the band's
 * (utility is BATCH too), unless nice cannot go below the lane's own (RLIMIT_NICE 0), when
 * the lane keeps its policy and slice: the band's policy and 100 us slice at nice 10 made
 * the awaited work slower (lanepool-bench --workloads inversion as uid 65534: p50 25.2 ms
 * boosted against 15.1 ms not). */
static int boosted_policy(int b) {
  /* RLIMIT_NICE 15 (nice 5 at best): some weight, not a default thread's: only the nice
   * drops; the band's short slice at nice 5 would trade the lane's batch runs for
   * preemptions it cannot win against nice-0 load. */
  if (mode == MODE_UNPRIV || mode == MODE_UNPRIV_RLIMIT15) return SCHED_BATCH;
  return b == 3 ? SCHED_BATCH : SCHED_OTHER;
}

static _Atomic int log_lines;
static char last_log[400];
static void count_log(lanepool_log_level_t level, const char *msg, void *arg) {
  (void)level;
  (void)arg;
  if (strstr(msg, "escalation")) {
    snprintf(last_log, sizeof last_log, "%s", msg);
    atomic_fetch_add(&log_lines, 1);
  }
}

static lanepool_t *escalation_pool(const char *name) {
  lanepool_config_t cfg;
  lanepool_config_init(&cfg);
  cfg.name = name;
  cfg.lanes_per_band = 1;
  cfg.log = count_log;
  lanepool_t *pool = NULL;
  if (lanepool_create(&cfg, &pool) != 0) {
    fprintf(stderr, "cannot create pool %s\n", name);
    exit(1);
  }
  return pool;
}

static lanepool_lane_t *lane_of(lanepool_t *pool, lanepool_qos_t qos) {
  lanepool_lane_t *lane = NULL;
  lanepool_get_lane(pool, qos, 0, &lane);
  return lane;
}

static pid_t tid_of(lanepool_lane_t *lane) {
  lanepool_lane_info_t info;
  lanepool_lane_info(lane, &info);
  return info.tid;
}

/* Nothing counted, and the lane's thread at its own band: what every test ends with. */
static bool unboosted(lanepool_lane_t *lane) {
  for (int b = 0; b < LANEPOOL_BAND_COUNT; b++)
    if (atomic_load(&lane->boost_waiting[b])) return false;
  return atomic_load(&lane->boost_band) == lane->band;
}

/* Checked right after the waits: the lane leaves a sync's boost before it answers. */
static bool bg_at_own_band(lanepool_lane_t *bg) {
  pid_t tid = tid_of(bg);
  return nice_of(tid) == 10 && policy_of(tid) == SCHED_BATCH && unboosted(bg);
}

/* true once `lane`'s thread `tid` runs boosted to band `b`: the lane says so (boost_band,
 * stored after the settings were applied) and /proc shows the settings. With RLIMIT_NICE
 * 0 the CPU settings do not change (boosted_policy), so /proc alone cannot tell. */
static bool wait_for_boost(lanepool_lane_t *lane, int b, pid_t tid) {
  for (int i = 0; i < 10000; i++) {
    if (atomic_load(&lane->boost_band) == (uint32_t)b && tid_of(lane) == tid &&
        nice_of(tid) == boosted_nice(b) && policy_of(tid) == boosted_policy(b))
      return true;
    nap_us(1000);
  }
  return false;
}

/* true once the lane holds `n` queued tasks (the blocker running is not queued); a cap
 * of 10 s. A waiter's boost comes before its push, so seeing the boost does not mean
 * its task is queued yet. */
static bool wait_for_depth(lanepool_lane_t *lane, uint64_t n) {
  for (int i = 0; i < 10000; i++) {
    lanepool_lane_info_t info;
    if (lanepool_lane_info(lane, &info) == 0 && info.depth == n) return true;
    nap_us(1000);
  }
  return false;
}

typedef struct {
  int nice, policy, tid; /* the settings of the thread that ran it, and its tid */
} seen_t;

static void see_own(void *ctx) {
  seen_t *s = ctx;
  s->tid = gettid_();
  proc_sched(s->tid, &s->nice, &s->policy);
}

typedef struct {
  lanepool_lane_t *target;
  unsigned flags;
  seen_t seen;
  int rc;
} sync_from_lane_t;

static void sync_from_lane(void *ctx) {
  sync_from_lane_t *c = ctx;
  c->rc = lanepool_lane_sync_flags(c->target, see_own, &c->seen, c->flags);
}

/* A lane of a higher band syncs onto the background lane (LANEPOOL_SYNC_QUEUED): the
 * closure runs on the background lane's thread (queued syncs are never run by a waiter of
 * another band) at the caller's band; the lane is back at its own after. */
static void test_escalate_from_lanes(void) {
  current_test = "escalate_from_lanes";
  lanepool_t *pool = escalation_pool("esc1");
  lanepool_lane_t *bg = lane_of(pool, LANEPOOL_QOS_BACKGROUND);
  CHECK(bg_at_own_band(bg));
  for (int b = 0; b < 4; b++) {
    sync_from_lane_t c = {bg, LANEPOOL_SYNC_QUEUED, {99, -1, 0}, -1};
    lanepool_lane_t *from =
        lane_of(pool, (lanepool_qos_t[]){LANEPOOL_QOS_USER_INTERACTIVE, LANEPOOL_QOS_USER_INITIATED,
                                         LANEPOOL_QOS_DEFAULT, LANEPOOL_QOS_UTILITY}[b]);
    /* This thread (default) does not boost `from`: its band is the lane's own. */
    unsigned outer = LANEPOOL_SYNC_QUEUED | LANEPOOL_SYNC_NO_ESCALATION;
    CHECK_RC(lanepool_lane_sync_flags(from, sync_from_lane, &c, outer), 0);
    CHECK_RC(c.rc, 0);
    CHECK(c.seen.tid == tid_of(bg));
    CHECK(c.seen.nice == boosted_nice(b));
    CHECK(c.seen.policy == boosted_policy(b));
    CHECK(bg_at_own_band(bg));
    /* Not asked for: the lane keeps its band. */
    c.flags = LANEPOOL_SYNC_QUEUED | LANEPOOL_SYNC_NO_ESCALATION;
    CHECK_RC(lanepool_lane_sync_flags(from, sync_from_lane, &c, outer), 0);
    CHECK(c.seen.nice == 10 && c.seen.policy == SCHED_BATCH && c.seen.tid == tid_of(bg));
  }
  /* A waiter of a lower band than the lane's does not touch it. */
  sync_from_lane_t down = {
      lane_of(pool, LANEPOOL_QOS_USER_INITIATED), LANEPOOL_SYNC_QUEUED, {99, -1, 0}, -1};
  CHECK_RC(lanepool_lane_sync_flags(bg, sync_from_lane, &down,
                                    LANEPOOL_SYNC_QUEUED | LANEPOOL_SYNC_NO_ESCALATION),
           0);
  CHECK(down.seen.nice == (mode == MODE_ROOT ? -3 : 0));
  /* Transitive: this thread (default) waits on the utility lane, whose task waits on the
   * background lane: both run at default meanwhile. */
  sync_from_lane_t chain = {bg, LANEPOOL_SYNC_QUEUED, {99, -1, 0}, -1};
  CHECK_RC(lanepool_lane_sync_flags(lane_of(pool, LANEPOOL_QOS_UTILITY), sync_from_lane, &chain,
                                    LANEPOOL_SYNC_QUEUED),
           0);
  CHECK(chain.seen.tid == tid_of(bg) && chain.seen.nice == boosted_nice(2) &&
        chain.seen.policy == boosted_policy(2));
  CHECK(bg_at_own_band(bg));
  CHECK(unboosted(lane_of(pool, LANEPOOL_QOS_UTILITY)));
  /* A plain thread counts as default; inside lanepool_thread_enter_band, as that band. */
  seen_t seen = {99, -1, 0};
  CHECK_RC(lanepool_lane_sync_flags(bg, see_own, &seen, LANEPOOL_SYNC_QUEUED), 0);
  CHECK(seen.nice == boosted_nice(2) && seen.policy == boosted_policy(2));
  lanepool_qos_t q;
  CHECK_RC(lanepool_thread_qos(&q), 0);
  CHECK(q == LANEPOOL_QOS_DEFAULT);
  lanepool_band_token_t t;
  CHECK_RC(lanepool_thread_enter_band(LANEPOOL_QOS_USER_INITIATED, 0, &t), 0);
  CHECK_RC(lanepool_thread_qos(&q), 0);
  CHECK(q == LANEPOOL_QOS_USER_INITIATED);
  CHECK_RC(lanepool_lane_sync_flags(bg, see_own, &seen, LANEPOOL_SYNC_QUEUED), 0);
  CHECK(seen.nice == boosted_nice(1) && seen.policy == boosted_policy(1));
  CHECK_RC(lanepool_thread_restore(&t), 0);
  CHECK(bg_at_own_band(bg));
  /* One log line per pool when the kernel limits a boost, none with privilege. */
  CHECK(atomic_load(&log_lines) == (mode == MODE_ROOT ? 0 : 1));
  if (mode != MODE_ROOT) CHECK(strstr(last_log, "esc1") != NULL);
  atomic_store(&log_lines, 0);
  CHECK_RC(lanepool_destroy(pool), 0);
}

/* ---- a busy lane: boost during the wait, FIFO kept ---- */

enum { BEFORE = 20, AFTER = 20 };
static _Atomic int gate; /* the blocker runs until this is 1 */
static _Atomic int order[BEFORE + AFTER + 2];
static _Atomic int order_len;

static void blocker(void *ctx) {
  (void)ctx;
  hold_until(&gate);
}

static void note(void *ctx) { order[atomic_fetch_add(&order_len, 1)] = (int)(intptr_t)ctx; }

typedef struct {
  lanepool_lane_t *lane;
  lanepool_qos_t qos;
  int rc;
  seen_t seen;
} waiter_t;

static void note_and_see(void *ctx) {
  waiter_t *w = ctx;
  note((void *)(intptr_t)1000);
  see_own(&w->seen);
}

static void *waiter_thread(void *arg) {
  waiter_t *w = arg;
  lanepool_band_token_t t;
  lanepool_thread_enter_band(w->qos, 0, &t);
  w->rc = lanepool_lane_sync(w->lane, note_and_see, w);
  lanepool_thread_restore(&t);
  return NULL;
}

/* ---- a waiter runs the queue it waits for: a userInteractive lane's task queues work
 * on the background lane, whose thread is away in a band job (blocked), then syncs onto
 * it. Its own thread runs that work and then its closure, in order, at its own band, and
 * returns while the background thread is still away (before: the band's rescue thread ran
 * them, 100 ms later, at the background band). ---- */

static struct {
  _Atomic int away_tid, release;
  lanepool_lane_t *bg;
  _Atomic int work_tid, order_work, order_closure, next, cycle_rc;
  seen_t seen;
  int rc;
} wq;

static void wq_away(void *ctx) {
  (void)ctx;
  atomic_store(&wq.away_tid, gettid_());
  hold_until(&wq.release);
}

static void wq_work(void *ctx) {
  (void)ctx;
  atomic_store(&wq.work_tid, gettid_());
  atomic_store(&wq.order_work, atomic_fetch_add(&wq.next, 1) + 1);
}

static void wq_closure(void *ctx) {
  see_own(ctx);
  atomic_store(&wq.order_closure, atomic_fetch_add(&wq.next, 1) + 1);
}

static void wq_cycle_inner(void *ctx) { (void)ctx; }

static void wq_cycle(void *ctx) {
  lanepool_lane_t *ui = ctx;
  atomic_store(&wq.cycle_rc, lanepool_lane_sync(ui, wq_cycle_inner, NULL));
}

static void wq_cycle_task(void *ctx) {
  (void)ctx;
  lanepool_lane_t *ui = NULL;
  lanepool_current_lane(&ui);
  atomic_store(&wq.cycle_rc, -1);
  wq.rc = lanepool_lane_async(wq.bg, wq_cycle, ui);
  if (wq.rc == 0) wq.rc = lanepool_lane_sync(wq.bg, see_own, &wq.seen);
}

static void wq_task(void *ctx) {
  (void)ctx;
  wq.rc = lanepool_lane_async(wq.bg, wq_work, NULL);
  if (wq.rc == 0) wq.rc = lanepool_lane_sync(wq.bg, wq_closure, &wq.seen);
}

static void test_waiter_runs_the_queue(void) {
  current_test = "waiter_runs_the_queue";
  lanepool_t *pool = escalation_pool("esc20");
  memset(&wq, 0, sizeof wq);
  wq.rc = -1;
  wq.bg = lane_of(pool, LANEPOOL_QOS_BACKGROUND);
  lanepool_lane_t *ui = lane_of(pool, LANEPOOL_QOS_USER_INTERACTIVE);
  CHECK_RC(lanepool_async(pool, LANEPOOL_QOS_BACKGROUND, wq_away, NULL), 0);
  POLL_WHILE(!atomic_load(&wq.away_tid));
  CHECK(atomic_load(&wq.away_tid) == tid_of(wq.bg));
  int ui_nice = 99, ui_policy = -1;
  proc_sched(tid_of(ui), &ui_nice, &ui_policy);
  CHECK_RC(lanepool_lane_sync_flags(ui, wq_task, NULL, LANEPOOL_SYNC_QUEUED), 0);
  CHECK_RC(wq.rc, 0);
  CHECK(atomic_load(&wq.release) == 0); /* the background thread is still away */
  CHECK(atomic_load(&wq.work_tid) == tid_of(ui) && wq.seen.tid == tid_of(ui));
  CHECK(atomic_load(&wq.order_work) == 1 && atomic_load(&wq.order_closure) == 2);
  CHECK(wq.seen.nice == ui_nice && wq.seen.policy == ui_policy);
  /* The ui lane's thread ran two tasks nested in its own: once that ended, it is idle to
   * the stall detector (started == executed), not still running one. */
  POLL_WHILE(atomic_load(&ui->started_tasks) != atomic_load(&ui->executed));
  CHECK(atomic_load(&ui->started_tasks) == atomic_load(&ui->executed));
  /* A task the waiter runs there that syncs onto a lane the waiter holds: a real cycle
   * (the waiter's task holds the ui lane and waits for this one), refused. */
  atomic_store(&wq.work_tid, 0);
  wq.seen.tid = 0;
  CHECK_RC(lanepool_lane_sync_flags(ui, wq_cycle_task, NULL, LANEPOOL_SYNC_QUEUED), 0);
  CHECK_RC(wq.rc, 0);
  CHECK_RC(atomic_load(&wq.cycle_rc), EDEADLK);
  CHECK(wq.seen.tid == tid_of(ui));
  atomic_store(&wq.release, 1);
  CHECK_RC(lanepool_shutdown(pool, LANEPOOL_SHUTDOWN_DRAIN, NULL, NULL), 0);
  CHECK(unboosted(wq.bg));
  CHECK_RC(lanepool_destroy(pool), 0);
}

/* ---- two levels of helping: the waiter's own task still counts as running after both
 * (the stall detector's started / executed) ---- */

static struct {
  lanepool_lane_t *bg, *df, *ui;
  _Atomic int gap, inner_tid;
} nest2;

static void nest2_noop(void *ctx) { (void)ctx; }

static void nest2_t1(void *ctx) { /* on the bg lane, run by the ui thread */
  (void)ctx;
  atomic_store(&nest2.inner_tid, gettid_());
  if (lanepool_lane_async(nest2.df, nest2_noop, NULL) == 0)
    (void)lanepool_lane_sync(nest2.df, nest2_noop, NULL);
}

static void nest2_outer(void *ctx) {
  (void)ctx;
  if (lanepool_lane_async(nest2.bg, nest2_t1, NULL) == 0)
    (void)lanepool_lane_sync(nest2.bg, nest2_noop, NULL);
  atomic_store(&nest2.gap,
               (int)(atomic_load(&nest2.ui->started_tasks) - atomic_load(&nest2.ui->executed)));
}

static void test_helper_nested_counts(void) {
  current_test = "helper_nested_counts";
  lanepool_t *pool = escalation_pool("esc22");
  memset(&wq, 0, sizeof wq);
  nest2.bg = lane_of(pool, LANEPOOL_QOS_BACKGROUND);
  nest2.df = lane_of(pool, LANEPOOL_QOS_DEFAULT);
  nest2.ui = lane_of(pool, LANEPOOL_QOS_USER_INTERACTIVE);
  atomic_store(&nest2.gap, -1);
  CHECK_RC(lanepool_async(pool, LANEPOOL_QOS_BACKGROUND, wq_away, NULL), 0);
  CHECK_RC(lanepool_async(pool, LANEPOOL_QOS_DEFAULT, wq_away, NULL), 0);
  POLL_WHILE(!(atomic_load(&nest2.bg->away) && atomic_load(&nest2.df->away)));
  CHECK_RC(lanepool_lane_sync_flags(nest2.ui, nest2_outer, NULL, LANEPOOL_SYNC_QUEUED), 0);
  CHECK(atomic_load(&nest2.inner_tid) == tid_of(nest2.ui));
  CHECK(atomic_load(&nest2.gap) == 1); /* its own task, still running */
  atomic_store(&wq.release, 1);
  CHECK_RC(lanepool_shutdown(pool, LANEPOOL_SHUTDOWN_DRAIN, NULL, NULL), 0);
  CHECK_RC(lanepool_destroy(pool), 0);
}

static void test_escalate_busy_lane(void) {
  current_test = "escalate_busy_lane";
  lanepool_t *pool = escalation_pool("esc2");
  lanepool_lane_t *bg = lane_of(pool, LANEPOOL_QOS_BACKGROUND);
  pid_t tid = tid_of(bg);
  atomic_store(&gate, 0);
  atomic_store(&order_len, 0);
  CHECK_RC(lanepool_lane_async(bg, blocker, NULL), 0);
  for (int i = 0; i < BEFORE; i++) CHECK_RC(lanepool_lane_async(bg, note, (void *)(intptr_t)i), 0);
  waiter_t w = {bg, LANEPOOL_QOS_USER_INTERACTIVE, -1, {99, -1, 0}};
  pthread_t th;
  pthread_create(&th, NULL, waiter_thread, &w);
  /* While the waiter waits behind the blocker: the lane runs at its band (/proc). */
  CHECK(wait_for_boost(bg, 0, tid));
  CHECK(atomic_load(&bg->boost_waiting[0]) == 1);
  CHECK(wait_for_depth(bg, BEFORE + 1)); /* the sync's task is queued behind BEFORE */
  /* Work queued after the sync: FIFO is unchanged (it runs after, at the lane's band). */
  for (int i = 0; i < AFTER; i++)
    CHECK_RC(lanepool_lane_async(bg, note, (void *)(intptr_t)(BEFORE + i)), 0);
  atomic_store(&gate, 1);
  pthread_join(th, NULL);
  CHECK_RC(w.rc, 0);
  CHECK(w.seen.nice == boosted_nice(0) && w.seen.policy == boosted_policy(0));
  /* The lane left the boost with the awaited task, before it answered. */
  CHECK(bg_at_own_band(bg));
  CHECK_RC(lanepool_shutdown(pool, LANEPOOL_SHUTDOWN_DRAIN, NULL, NULL), 0);
  int n = atomic_load(&order_len);
  CHECK(n == BEFORE + AFTER + 1);
  int k = 0, in_order = 1;
  for (int i = 0; i < BEFORE; i++) in_order &= order[k++] == i;
  in_order &= order[k++] == 1000;
  for (int i = 0; i < AFTER; i++) in_order &= order[k++] == BEFORE + i;
  CHECK(in_order);
  CHECK_RC(lanepool_destroy(pool), 0);
}

/* ---- boosts held by waits LanePool does not see; one that times out ---- */

static void test_boost_begin_end(void) {
  current_test = "boost_begin_end";
  lanepool_t *pool = escalation_pool("esc3");
  lanepool_lane_t *bg = lane_of(pool, LANEPOOL_QOS_BACKGROUND);
  pid_t tid = tid_of(bg);
  atomic_store(&gate, 0);
  CHECK_RC(lanepool_lane_async(bg, blocker, NULL), 0);
  lanepool_boost_t ui, in, low;
  CHECK_RC(lanepool_lane_boost_begin(bg, LANEPOOL_QOS_USER_INITIATED, &in), 0);
  CHECK(nice_of(tid) == boosted_nice(1) && policy_of(tid) == boosted_policy(1));
  CHECK_RC(lanepool_lane_boost_begin(bg, LANEPOOL_QOS_USER_INTERACTIVE, &ui), 0);
  CHECK(nice_of(tid) == boosted_nice(0) && policy_of(tid) == boosted_policy(0));
  CHECK_RC(lanepool_lane_boost_begin(bg, LANEPOOL_QOS_BACKGROUND, &low), 0); /* holds nothing */
  CHECK(low.band_plus_one == 0);
  /* The userInteractive waiter times out: the lane goes down to the next waiter's band. */
  nap_us(5000);
  CHECK_RC(lanepool_lane_boost_end(&ui), 0);
  CHECK(nice_of(tid) == boosted_nice(1) && policy_of(tid) == boosted_policy(1));
  CHECK_RC(lanepool_lane_boost_end(&ui), 0); /* twice: harmless */
  CHECK_RC(lanepool_lane_boost_end(&low), 0);
  CHECK(nice_of(tid) == boosted_nice(1));
  CHECK_RC(lanepool_lane_boost_end(&in), 0);
  CHECK(bg_at_own_band(bg));
  CHECK_RC(lanepool_lane_boost_begin(NULL, LANEPOOL_QOS_DEFAULT, &in), EINVAL);
  CHECK_RC(lanepool_lane_boost_begin(bg, (lanepool_qos_t)3, &in), EINVAL);
  CHECK_RC(lanepool_lane_boost_end(NULL), EINVAL);
  atomic_store(&gate, 1);
  CHECK_RC(lanepool_destroy(pool), 0);
}

/* ---- LANEPOOL_NICE_SHIFT: without privilege the table moves up, keeping its gaps ---- */

static _Atomic int shift_log_lines;
static void shift_log(lanepool_log_level_t level, const char *msg, void *arg) {
  (void)arg;
  if (level == LANEPOOL_LOG_INFO && strstr(msg, "unprivileged_nice = shift"))
    atomic_fetch_add(&shift_log_lines, 1);
}

static void test_nice_shift(void) {
  current_test = "nice_shift";
  lanepool_config_t cfg;
  lanepool_config_init(&cfg);
  const char *field = NULL;
  cfg.unprivileged_nice = 2;
  CHECK_RC(lanepool_config_check(&cfg, &field), EINVAL);
  CHECK(field && strcmp(field, "unprivileged_nice") == 0);
  lanepool_t *pool = NULL;
  CHECK_RC(lanepool_create(&cfg, &pool), EINVAL);
  CHECK(pool == NULL);

  cfg.unprivileged_nice = LANEPOOL_NICE_SHIFT;
  cfg.name = "shift";
  cfg.lanes_per_band = 1;
  cfg.log = shift_log;
  cfg.policy[4].nice = 17; /* shifted past 19: capped there */
  atomic_store(&shift_log_lines, 0);
  CHECK_RC(lanepool_create(&cfg, &pool), 0);
  /* This process starts at nice 0. Root may set any nice: nothing moves. Unprivileged
   * the lowest it may set is 0 (RLIMIT_NICE 0, 15, 20 alike): every band 5 higher. */
  static const int root[LANEPOOL_BAND_COUNT] = {-5, -3, 0, 4, 17};
  static const int shifted[LANEPOOL_BAND_COUNT] = {0, 2, 5, 9, 19};
  static const lanepool_qos_t qos[LANEPOOL_BAND_COUNT] = {
      LANEPOOL_QOS_USER_INTERACTIVE, LANEPOOL_QOS_USER_INITIATED, LANEPOOL_QOS_DEFAULT,
      LANEPOOL_QOS_UTILITY, LANEPOOL_QOS_BACKGROUND};
  for (int b = 0; b < LANEPOOL_BAND_COUNT; b++) {
    lanepool_lane_t *lane = lane_of(pool, qos[b]);
    lanepool_lane_info_t info;
    lanepool_lane_info(lane, &info);
    int want = mode == MODE_ROOT ? root[b] : shifted[b];
    CHECK(nice_of(info.tid) == want);
    CHECK(info.nice.requested == want && info.nice.error == 0);
  }
  CHECK(atomic_load(&shift_log_lines) == (mode == MODE_ROOT ? 0 : 1));
  /* A boost asks for the shifted band: as low as permitted, never below it (userInitiated,
   * shifted to 2, is above RLIMIT_NICE 20's floor of 0: an unshifted target would give 0). */
  lanepool_lane_t *bg = lane_of(pool, LANEPOOL_QOS_BACKGROUND);
  pid_t tid = tid_of(bg);
  atomic_store(&gate, 0);
  CHECK_RC(lanepool_lane_async(bg, blocker, NULL), 0);
  lanepool_boost_t ui, in;
  CHECK_RC(lanepool_lane_boost_begin(bg, LANEPOOL_QOS_USER_INITIATED, &in), 0);
  static const int boosted_in[] = {
      [MODE_ROOT] = -3, [MODE_UNPRIV] = 19, [MODE_UNPRIV_RLIMIT20] = 2, [MODE_UNPRIV_RLIMIT15] = 5};
  CHECK(nice_of(tid) == boosted_in[mode]);
  CHECK_RC(lanepool_lane_boost_begin(bg, LANEPOOL_QOS_USER_INTERACTIVE, &ui), 0);
  static const int boosted[] = {
      [MODE_ROOT] = -5, [MODE_UNPRIV] = 19, [MODE_UNPRIV_RLIMIT20] = 0, [MODE_UNPRIV_RLIMIT15] = 5};
  CHECK(nice_of(tid) == boosted[mode]);
  CHECK_RC(lanepool_lane_boost_end(&ui), 0);
  CHECK_RC(lanepool_lane_boost_end(&in), 0);
  CHECK(nice_of(tid) == (mode == MODE_ROOT ? 17 : 19));
  atomic_store(&gate, 1);
  CHECK_RC(lanepool_destroy(pool), 0);
}

/* A default band weaker than the table's (nice 8): a boost whose permitted nice is
 * stronger than that default thread gets the band's policy, not only the nice (the test
 * compares with the default band's nice, not with 0). RLIMIT_NICE 15: nice 5 at best. */
static void test_nice_drops_vs_custom_default(void) {
  current_test = "nice_drops_vs_custom_default";
  lanepool_config_t cfg;
  lanepool_config_init(&cfg);
  cfg.name = "dflt8";
  cfg.lanes_per_band = 1;
  cfg.log = count_log;
  cfg.policy[2].nice = 8;
  lanepool_t *pool = NULL;
  CHECK_RC(lanepool_create(&cfg, &pool), 0);
  lanepool_lane_t *bg = lane_of(pool, LANEPOOL_QOS_BACKGROUND);
  pid_t tid = tid_of(bg);
  atomic_store(&gate, 0);
  CHECK_RC(lanepool_lane_async(bg, blocker, NULL), 0);
  lanepool_boost_t in;
  CHECK_RC(lanepool_lane_boost_begin(bg, LANEPOOL_QOS_USER_INITIATED, &in), 0);
  static const int nice[] = {
      [MODE_ROOT] = -3, [MODE_UNPRIV] = 10, [MODE_UNPRIV_RLIMIT20] = 0, [MODE_UNPRIV_RLIMIT15] = 5};
  CHECK(nice_of(tid) == nice[mode]);
  /* Unprivileged with no room (RLIMIT_NICE 0), the lane keeps its own policy. */
  CHECK(policy_of(tid) == (mode == MODE_UNPRIV ? SCHED_BATCH : SCHED_OTHER));
  CHECK_RC(lanepool_lane_boost_end(&in), 0);
  CHECK(nice_of(tid) == 10 && policy_of(tid) == SCHED_BATCH);
  atomic_store(&gate, 1);
  CHECK_RC(lanepool_destroy(pool), 0);
}

static void noop_task(void *ctx) { (void)ctx; }

/* ---- LANEPOOL_BOOST_IF_BUSY: an idle lane holds nothing, a busy one is boosted ---- */

static void test_boost_if_busy(void) {
  current_test = "boost_if_busy";
  lanepool_t *pool = escalation_pool("esc6");
  lanepool_lane_t *bg = lane_of(pool, LANEPOOL_QOS_BACKGROUND);
  pid_t tid = tid_of(bg);
  lanepool_boost_t b;
  /* Idle (nothing queued, nothing running): nothing held, the lane untouched. */
  POLL_WHILE(lanepool__lane_depth(bg) != 0);
  CHECK_RC(lanepool_lane_boost_begin_flags(bg, LANEPOOL_QOS_USER_INTERACTIVE,
                                           LANEPOOL_BOOST_IF_BUSY, &b),
           0);
  CHECK(b.band_plus_one == 0 && bg_at_own_band(bg));
  CHECK_RC(lanepool_lane_boost_end(&b), 0);
  /* Busy with a task: held, the lane boosted; ended, back at its band. */
  atomic_store(&gate, 0);
  CHECK_RC(lanepool_lane_async(bg, blocker, NULL), 0);
  CHECK_RC(
      lanepool_lane_boost_begin_flags(bg, LANEPOOL_QOS_USER_INITIATED, LANEPOOL_BOOST_IF_BUSY, &b),
      0);
  CHECK(b.band_plus_one == 2);
  CHECK(nice_of(tid) == boosted_nice(1) && policy_of(tid) == boosted_policy(1));
  CHECK_RC(lanepool_lane_boost_end(&b), 0);
  CHECK(bg_at_own_band(bg));
  /* A band not above the lane's holds nothing, busy or not; an unknown flag is EINVAL. */
  CHECK_RC(lanepool_lane_boost_begin_flags(bg, LANEPOOL_QOS_BACKGROUND, LANEPOOL_BOOST_IF_BUSY, &b),
           0);
  CHECK(b.band_plus_one == 0);
  CHECK_RC(lanepool_lane_boost_begin_flags(bg, LANEPOOL_QOS_USER_INITIATED, 2u, &b), EINVAL);
  atomic_store(&gate, 1);
  CHECK_RC(lanepool_destroy(pool), 0);
}

/* A task on `lane` asks for a boost of its own lane: with nothing queued, nothing is
 * held (the task itself is what runs); with a task queued behind it, the boost holds. */
typedef struct {
  lanepool_lane_t *lane;
  uint32_t alone, behind;
} own_lane_t;

static void boost_own_lane(void *ctx) {
  own_lane_t *o = ctx;
  lanepool_boost_t b;
  lanepool_lane_boost_begin_flags(o->lane, LANEPOOL_QOS_USER_INITIATED, LANEPOOL_BOOST_IF_BUSY, &b);
  o->alone = b.band_plus_one;
  lanepool_lane_boost_end(&b);
  lanepool_lane_async(o->lane, noop_task, NULL);
  lanepool_lane_boost_begin_flags(o->lane, LANEPOOL_QOS_USER_INITIATED, LANEPOOL_BOOST_IF_BUSY, &b);
  o->behind = b.band_plus_one;
  lanepool_lane_boost_end(&b);
}

static void test_boost_if_busy_own_lane(void) {
  current_test = "boost_if_busy_own_lane";
  lanepool_t *pool = escalation_pool("esc7");
  lanepool_lane_t *bg = lane_of(pool, LANEPOOL_QOS_BACKGROUND);
  own_lane_t o = {bg, 99, 99};
  CHECK_RC(lanepool_lane_sync_flags(bg, boost_own_lane, &o, LANEPOOL_SYNC_QUEUED), 0);
  CHECK(o.alone == 0);
  CHECK(o.behind == 2);
  CHECK(bg_at_own_band(bg));
  CHECK_RC(lanepool_destroy(pool), 0);
}

/* ---- a cancelling shutdown answers a boosted sync and leaves nothing counted ---- */

/* A thread that sets *flag once the pool's shutdown has begun (after a cancel: the pool
 * CANCELLING, its lanes start no task). */
typedef struct {
  lanepool_t *pool;
  _Atomic int *flag;
} set_on_shutdown_t;

static void *set_once_shut_down(void *arg) {
  set_on_shutdown_t *s = arg;
  lanepool_info_t info;
  POLL_WHILE(lanepool_info(s->pool, &info) == 0 && !info.shut_down);
  atomic_store(s->flag, 1);
  return NULL;
}

static void discard_none(lanepool_fn fn, void *ctx, void *arg) {
  (void)fn;
  (void)ctx;
  (void)arg;
}

static void test_escalate_cancelled(void) {
  current_test = "escalate_cancelled";
  lanepool_t *pool = escalation_pool("esc4");
  lanepool_lane_t *bg = lane_of(pool, LANEPOOL_QOS_BACKGROUND);
  pid_t tid = tid_of(bg);
  atomic_store(&gate, 0);
  CHECK_RC(lanepool_lane_async(bg, blocker, NULL), 0);
  waiter_t w = {bg, LANEPOOL_QOS_USER_INITIATED, -1, {99, -1, 0}};
  pthread_t th, opener;
  pthread_create(&th, NULL, waiter_thread, &w);
  CHECK(wait_for_boost(bg, 1, tid));
  CHECK(wait_for_depth(bg, 1)); /* the sync's task queued: the cancel answers it */
  /* The shutdown waits for the blocker, which a second thread ends once it has begun. */
  set_on_shutdown_t open = {pool, &gate};
  pthread_create(&opener, NULL, set_once_shut_down, &open);
  CHECK_RC(lanepool_shutdown(pool, LANEPOOL_SHUTDOWN_CANCEL, discard_none, NULL), 0);
  pthread_join(opener, NULL);
  pthread_join(th, NULL);
  CHECK_RC(w.rc, ECANCELED);
  CHECK(unboosted(bg));
  CHECK_RC(lanepool_destroy(pool), 0);
}

/* ---- a task that ends its thread while boosted: the successor is boosted only while
 * a waiter still waits, and back at its band after ---- */

static void end_thread(void *ctx) {
  (void)ctx;
  pthread_exit(NULL);
}

/* A thread's EEVDF slice (sched_getattr's runtime), -1 if unreadable. */
static long long slice_of(pid_t tid) {
  lanepool__sched_attr attr;
  memset(&attr, 0, sizeof attr);
  if (syscall(SYS_sched_getattr, tid, &attr, sizeof attr, 0) != 0) return -1;
  return (long long)attr.sched_runtime;
}

/* ---- a task that ends its thread while a waiter of another lane runs it: the waiter's
 * own lane, held by the task the thread was running, and the lane it ran get their
 * work done all the same, and nothing runs the dead waiter's queued sync ---- */

static _Atomic int ended_closure_ran;

static void ended_closure(void *ctx) {
  (void)ctx;
  atomic_fetch_add(&ended_closure_ran, 1);
}

static void ended_task(void *ctx) {
  (void)ctx;
  if (lanepool_lane_async(wq.bg, end_thread, NULL) == 0)
    (void)lanepool_lane_sync(wq.bg, ended_closure, NULL); /* its thread ends in there */
  wq.rc = -2;                                             /* not reached */
}

static _Atomic int discards;
static void count_discards(lanepool_fn fn, void *ctx, void *arg) {
  (void)fn;
  (void)ctx;
  (void)arg;
  atomic_fetch_add(&discards, 1);
}

/* `cancel`: the pool is cancelled while the dead waiter's sync is still queued. */
static void test_helper_thread_ended(bool cancel) {
  current_test = cancel ? "helper_thread_ended_then_cancel" : "helper_thread_ended";
  lanepool_t *pool = escalation_pool("esc21");
  memset(&wq, 0, sizeof wq);
  atomic_store(&ended_closure_ran, 0);
  wq.rc = 0;
  wq.bg = lane_of(pool, LANEPOOL_QOS_BACKGROUND);
  lanepool_lane_t *ui = lane_of(pool, LANEPOOL_QOS_USER_INTERACTIVE);
  CHECK_RC(lanepool_async(pool, LANEPOOL_QOS_BACKGROUND, wq_away, NULL), 0);
  POLL_WHILE(!atomic_load(&wq.away_tid));
  pid_t first = tid_of(ui);
  /* The queued sync whose closure ended the thread is answered (its unwinding). */
  CHECK_RC(lanepool_lane_sync_flags(ui, ended_task, NULL, LANEPOOL_SYNC_QUEUED), 0);
  CHECK(wq.rc == 0);
  /* The ui lane runs again, on a successor thread. */
  seen_t seen = {99, -1, 0};
  CHECK_RC(lanepool_lane_sync_flags(ui, see_own, &seen, LANEPOOL_SYNC_QUEUED), 0);
  CHECK(seen.tid != 0 && seen.tid != first);
  if (cancel) {
    /* Its cell runs nothing and reaches no discard callback (it reached it once, as an
     * internal function), the only thing queued. */
    atomic_store(&discards, 0);
    /* Still queued: the lane's thread is away, and the band's rescue thread waits 30 s
     * (main). */
    uint64_t done = atomic_load(&wq.bg->bound_done); /* first: a run after it shows */
    bool queued = lanepool__lane_has_work(wq.bg);
    pthread_t th;
    set_on_shutdown_t release = {pool, &wq.release};
    pthread_create(&th, NULL, set_once_shut_down, &release);
    CHECK_RC(lanepool_shutdown(pool, LANEPOOL_SHUTDOWN_CANCEL, count_discards, NULL), 0);
    pthread_join(th, NULL);
    CHECK(atomic_load(&discards) == 0);
    CHECK(queued && atomic_load(&wq.bg->bound_done) == done);
    CHECK(atomic_load(&ended_closure_ran) == 0);
    CHECK_RC(lanepool_destroy(pool), 0);
    return;
  }
  /* The background lane, its thread back: the dead waiter's sync does not run. */
  atomic_store(&wq.release, 1);
  seen_t bgseen = {99, -1, 0};
  CHECK_RC(lanepool_lane_sync_flags(wq.bg, see_own, &bgseen, LANEPOOL_SYNC_QUEUED), 0);
  CHECK(bgseen.tid == tid_of(wq.bg));
  CHECK(atomic_load(&ended_closure_ran) == 0);
  CHECK_RC(lanepool_shutdown(pool, LANEPOOL_SHUTDOWN_DRAIN, NULL, NULL), 0);
  CHECK_RC(lanepool_destroy(pool), 0);
}

static void test_escalate_thread_replaced(void) {
  current_test = "escalate_thread_replaced";
  lanepool_t *pool = escalation_pool("esc5");
  lanepool_lane_t *bg = lane_of(pool, LANEPOOL_QOS_BACKGROUND);
  pid_t first = tid_of(bg);
  atomic_store(&gate, 0);
  CHECK_RC(lanepool_lane_async(bg, blocker, NULL), 0);
  CHECK_RC(lanepool_lane_async(bg, end_thread, NULL), 0);
  atomic_store(&order_len, 0);
  waiter_t w = {bg, LANEPOOL_QOS_USER_INTERACTIVE, -1, {99, -1, 0}};
  pthread_t th;
  pthread_create(&th, NULL, waiter_thread, &w);
  CHECK(wait_for_boost(bg, 0, first));
  atomic_store(&gate, 1);
  pthread_join(th, NULL);
  CHECK_RC(w.rc, 0);
  /* The closure ran on the successor, boosted (re-applied when it started). */
  CHECK(tid_of(bg) != first);
  CHECK(w.seen.nice == boosted_nice(0) && w.seen.policy == boosted_policy(0));
  CHECK(bg_at_own_band(bg));
  CHECK_RC(lanepool_destroy(pool), 0);
}

/* ---- whose band: inside an inline closure the calling thread's own band counts ---- */

static struct {
  lanepool_lane_t *lane, *inner;
  _Atomic int rc;
  seen_t during;
} lent;

/* Case 2: a default thread syncs inline onto an idle utility lane; the closure syncs onto
 * a busy background lane: that lane runs at default (the caller's band), not utility. */
static void sync_inner(void *ctx) {
  (void)ctx;
  atomic_store(&lent.rc, lanepool_lane_sync(lent.inner, see_own, &lent.during));
}

static void *chain_thread(void *arg) {
  (void)arg;
  lanepool_band_token_t t;
  lanepool_thread_enter_band(LANEPOOL_QOS_DEFAULT, 0, &t);
  int rc = lanepool_lane_sync(lent.lane, sync_inner, NULL);
  if (rc) atomic_store(&lent.rc, rc);
  lanepool_thread_restore(&t);
  return NULL;
}

static void test_inline_chain_counts_the_callers_band(void) {
  current_test = "inline_chain_counts_the_callers_band";
  lanepool_t *pool = escalation_pool("esc13");
  lanepool_lane_t *ut = lane_of(pool, LANEPOOL_QOS_UTILITY),
                  *bg = lane_of(pool, LANEPOOL_QOS_BACKGROUND);
  memset(&lent, 0, sizeof lent);
  lent.lane = ut;
  lent.inner = bg;
  atomic_store(&lent.rc, -1);
  atomic_store(&gate, 0);
  CHECK_RC(lanepool_lane_async(bg, blocker, NULL), 0); /* busy: the inner sync queues */
  pthread_t th;
  CHECK_RC(pthread_create(&th, NULL, chain_thread, NULL), 0);
  CHECK(wait_for_boost(bg, 2, tid_of(bg))); /* default, not utility (3) */
  atomic_store(&gate, 1);
  pthread_join(th, NULL);
  CHECK_RC(atomic_load(&lent.rc), 0);
  CHECK(lent.during.nice == boosted_nice(2) && lent.during.policy == boosted_policy(2));
  CHECK(bg_at_own_band(bg) && unboosted(ut));
  CHECK_RC(lanepool_destroy(pool), 0);
}

/* ---- the thread that runs the awaited work is boosted, whichever it is (case 1): a
 * background thread runs a closure inline on the idle background lane; a
 * userInteractive waiter then queues behind that closure. The borrower runs at the
 * waiter's band until it gives the lane up, then has exactly what it had ---- */

typedef struct {
  int nice, policy, ioprio;
  lanepool__sched_attr attr;
} attrs_t;

static void attrs_of(pid_t tid, attrs_t *a) {
  proc_sched(tid, &a->nice, &a->policy);
  a->ioprio = lanepool__get_ioprio(tid);
  lanepool__get_attr(tid, &a->attr);
}

static bool attrs_equal(const attrs_t *a, const attrs_t *b) {
  return a->nice == b->nice && a->policy == b->policy && a->ioprio == b->ioprio &&
         a->attr.sched_policy == b->attr.sched_policy &&
         a->attr.sched_flags == b->attr.sched_flags && a->attr.sched_nice == b->attr.sched_nice &&
         a->attr.sched_runtime == b->attr.sched_runtime;
}

static struct {
  lanepool_lane_t *lane;
  _Atomic int in_closure, tid, rc;
  attrs_t before, after;
} borrow;

/* Scheduling calls the borrower's thread makes while it gives the lane up (from the end
 * of its closure to its sync's return): counted while `giving_back` is set there. */
static __thread bool giving_back;
static _Atomic int giveback_calls;
static void count_giveback(const char *point, lanepool_lane_t *lane, long arg) {
  (void)lane;
  (void)arg;
  if (giving_back && strcmp(point, "sched_syscall") == 0) atomic_fetch_add(&giveback_calls, 1);
}

static void borrowed_closure(void *ctx) {
  (void)ctx;
  atomic_store(&borrow.in_closure, 1);
  hold_until(&gate);
  note((void *)(intptr_t)1); /* before the waiter's closure */
  giving_back = true;
}

static void *borrower_thread(void *arg) {
  (void)arg;
  lanepool_band_token_t t;
  lanepool_thread_enter_band(LANEPOOL_QOS_BACKGROUND, 0, &t);
  atomic_store(&borrow.tid, gettid_());
  attrs_of(gettid_(), &borrow.before);
  atomic_store(&borrow.rc, lanepool_lane_sync(borrow.lane, borrowed_closure, NULL));
  giving_back = false;
  attrs_of(gettid_(), &borrow.after);
  lanepool_thread_restore(&t);
  return NULL;
}

/* ---- a carrier raised to a band whose I/O class is real-time, where the kernel refuses
 * it (unprivileged): the best-effort fallback never lowers what the carrier has (here
 * best-effort 0, above the fallback's 4); as root it gets real-time 4. Put back exactly
 * either way ---- */

static void *io_borrower_thread(void *arg) {
  (void)arg;
  (void)lanepool__set_ioprio(0, lanepool__ioprio_value(LANEPOOL_IOPRIO_BE, 0));
  atomic_store(&borrow.tid, gettid_());
  attrs_of(gettid_(), &borrow.before);
  atomic_store(&borrow.rc, lanepool_lane_sync(borrow.lane, borrowed_closure, NULL));
  giving_back = false;
  attrs_of(gettid_(), &borrow.after);
  return NULL;
}

static void test_carrier_io_fallback_never_lowers(void) {
  current_test = "carrier_io_fallback_never_lowers";
  lanepool_config_t cfg;
  lanepool_config_init(&cfg);
  cfg.name = "esc-iort";
  cfg.lanes_per_band = 1;
  cfg.log = count_log;
  cfg.policy[0].ioprio_class = LANEPOOL_IOPRIO_RT;
  cfg.policy[0].ioprio_level = 4;
  lanepool_t *pool = NULL;
  CHECK_RC(lanepool_create(&cfg, &pool), 0);
  if (!pool) return;
  lanepool_lane_t *bg = lane_of(pool, LANEPOOL_QOS_BACKGROUND);
  memset(&borrow, 0, sizeof borrow);
  borrow.lane = bg;
  atomic_store(&borrow.rc, -1);
  atomic_store(&gate, 0);
  atomic_store(&order_len, 0);
  pthread_t b, w_th;
  CHECK_RC(pthread_create(&b, NULL, io_borrower_thread, NULL), 0);
  POLL_WHILE(!atomic_load(&borrow.in_closure));
  pid_t bt = (pid_t)atomic_load(&borrow.tid);
  waiter_t w = {bg, LANEPOOL_QOS_USER_INTERACTIVE, -1, {99, -1, 0}};
  CHECK_RC(pthread_create(&w_th, NULL, waiter_thread, &w), 0);
  POLL_WHILE(atomic_load(&bg->carried) != (uint32_t)bt); /* the raise recorded */
  CHECK(atomic_load(&bg->carried) == (uint32_t)bt);
  int io = lanepool__get_ioprio(bt);
  int want = mode == MODE_ROOT ? lanepool__ioprio_value(LANEPOOL_IOPRIO_RT, 4)
                               : lanepool__ioprio_value(LANEPOOL_IOPRIO_BE, 0);
  CHECK(io == want);
  if (io != want)
    fprintf(stderr, "[%s] carrier I/O priority %#x, expected %#x\n", current_test, io, want);
  atomic_store(&gate, 1);
  pthread_join(b, NULL);
  pthread_join(w_th, NULL);
  CHECK_RC(atomic_load(&borrow.rc), 0);
  CHECK_RC(w.rc, 0);
  CHECK(attrs_equal(&borrow.before, &borrow.after));
  CHECK(atomic_load(&bg->carried) == 0 && unboosted(bg));
  CHECK_RC(lanepool_destroy(pool), 0);
}

static void test_inline_borrower_boosted(void) {
  current_test = "inline_borrower_boosted";
  lanepool_t *pool = escalation_pool("esc17");
  lanepool_lane_t *bg = lane_of(pool, LANEPOOL_QOS_BACKGROUND);
  memset(&borrow, 0, sizeof borrow);
  borrow.lane = bg;
  atomic_store(&borrow.rc, -1);
  atomic_store(&gate, 0);
  atomic_store(&order_len, 0);
  pthread_t b, w_th;
  CHECK_RC(pthread_create(&b, NULL, borrower_thread, NULL), 0);
  POLL_WHILE(!atomic_load(&borrow.in_closure));
  CHECK(atomic_load(&borrow.in_closure) == 1);
  pid_t bt = (pid_t)atomic_load(&borrow.tid);
  CHECK(bt != tid_of(bg)); /* inline: the borrower's own thread */
  waiter_t w = {bg, LANEPOOL_QOS_USER_INTERACTIVE, -1, {99, -1, 0}};
  CHECK_RC(pthread_create(&w_th, NULL, waiter_thread, &w), 0);
  /* The lane's count, then the borrower itself at the waiter's band (/proc). */
  bool raised = false;
  /* Unprivileged: its nice drops as far as RLIMIT_NICE lets, if that is lower (with the
   * band's policy once it reaches nice 0), else it keeps its own (enter_band did not
   * raise a nice it could not lower again). */
  int want_nice = boosted_nice(0), want_policy = boosted_policy(0);
  if (mode != MODE_ROOT) {
    want_policy =
        want_nice < borrow.before.nice && want_nice <= 0 ? SCHED_OTHER : borrow.before.policy;
    if (want_nice >= borrow.before.nice) want_nice = borrow.before.nice;
  }
  for (int i = 0; i < 10000 && !raised; i++) {
    raised = atomic_load(&bg->boost_band) == 0 && nice_of(bt) == want_nice &&
             policy_of(bt) == want_policy;
    if (!raised) nap_us(1000);
  }
  CHECK(raised);
  if (!raised)
    fprintf(stderr, "[%s] borrower nice %d (before %d) policy %d, lane band %u\n", current_test,
            nice_of(bt), borrow.before.nice, policy_of(bt), atomic_load(&bg->boost_band));
  /* A raise that could change no CPU setting (no privilege, no room under RLIMIT_NICE)
   * is not undone with scheduling calls when the lane is given up: only the I/O priority,
   * if the raise changed it. */
  bool cpu_unchanged = mode != MODE_ROOT && want_nice >= borrow.before.nice;
  if (cpu_unchanged) POLL_WHILE(atomic_load(&bg->carried) != (uint32_t)bt); /* raise recorded */
  int io_raised = lanepool__get_ioprio(bt) != borrow.before.ioprio;
  atomic_store(&giveback_calls, 0);
  atomic_store(&lanepool__test_point, count_giveback);
  atomic_store(&gate, 1);
  pthread_join(b, NULL);
  atomic_store(&lanepool__test_point, NULL);
  if (cpu_unchanged) {
    CHECK(atomic_load(&giveback_calls) == io_raised);
    if (atomic_load(&giveback_calls) != io_raised)
      fprintf(stderr, "[%s] %d scheduling calls to give the lane back (I/O priority raised: %d)\n",
              current_test, atomic_load(&giveback_calls), io_raised);
  }
  pthread_join(w_th, NULL);
  CHECK_RC(atomic_load(&borrow.rc), 0);
  CHECK_RC(w.rc, 0);
  /* Given the lane up: exactly what it had (policy word, nice, slice, I/O priority). */
  CHECK(attrs_equal(&borrow.before, &borrow.after));
  if (!attrs_equal(&borrow.before, &borrow.after))
    fprintf(stderr,
            "[%s] before nice %d pol %d io %d slice %llu, after nice %d pol %d io %d slice %llu\n",
            current_test, borrow.before.nice, borrow.before.policy, borrow.before.ioprio,
            (unsigned long long)borrow.before.attr.sched_runtime, borrow.after.nice,
            borrow.after.policy, borrow.after.ioprio,
            (unsigned long long)borrow.after.attr.sched_runtime);
  CHECK(atomic_load(&order_len) == 2 && order[0] == 1 && order[1] == 1000); /* FIFO */
  CHECK(atomic_load(&bg->carried) == 0 && unboosted(bg) && bg_at_own_band(bg));
  CHECK_RC(lanepool_destroy(pool), 0);
}

/* ---- a thread about to idle runs the higher band's job its task pushed, raised to that
 * band for the job (worker.c, run_band_job: lifted), and is at its own band again after.
 * A utility thread here (nice 4, SCHED_BATCH, timer slack 1 ms), two lanes per band (one
 * lane per band never lifts). Only where it can come back down: as root; unprivileged
 * the job waits for its band ---- */

static struct {
  lanepool_t *pool;
  _Atomic int ui_busy, pusher, ran_on, done, after_on;
  attrs_t job, after;
  long job_slack, after_slack;
  lanepool_qos_t job_qos;
} lift;

static void lift_hold(void *ctx) {
  (void)ctx;
  atomic_fetch_add(&lift.ui_busy, 1);
  hold_until(&gate);
}

static void lift_job(void *ctx) {
  (void)ctx;
  attrs_of(gettid_(), &lift.job);
  lift.job_slack = slack_now();
  lanepool_thread_qos(&lift.job_qos);
  atomic_store(&lift.ran_on, gettid_());
  atomic_store(&lift.done, 1);
}

static void lift_push(void *ctx) {
  (void)ctx;
  atomic_store(&lift.pusher, gettid_());
  if (lanepool_async(lift.pool, LANEPOOL_QOS_USER_INTERACTIVE, lift_job, NULL) != 0)
    atomic_store(&lift.done, -1);
}

static void lift_after(void *ctx) {
  (void)ctx;
  attrs_of(gettid_(), &lift.after);
  lift.after_slack = slack_now();
  atomic_store(&lift.after_on, gettid_());
}

/* A pool of two lanes per band (one lane per band never lifts), the shared state reset. */
static lanepool_t *lift_pool(const char *name) {
  lanepool_config_t cfg;
  lanepool_config_init(&cfg);
  cfg.name = name;
  cfg.lanes_per_band = 2;
  cfg.log = count_log;
  lanepool_t *pool = NULL;
  CHECK_RC(lanepool_create(&cfg, &pool), 0);
  memset(&lift, 0, sizeof lift);
  lift.pool = pool;
  atomic_store(&gate, 0);
  return pool;
}

static void test_lifted_job_runs_at_its_band(void) {
  current_test = "lifted_job_runs_at_its_band";
  lanepool_t *pool = lift_pool("lift1");
  if (!pool) return;
  lanepool_lane_t *ui[2], *ut[2];
  for (uint32_t i = 0; i < 2; i++) {
    lanepool_get_lane(pool, LANEPOOL_QOS_USER_INTERACTIVE, i, &ui[i]);
    lanepool_get_lane(pool, LANEPOOL_QOS_UTILITY, i, &ut[i]);
  }
  attrs_t ui_own, ut_own;
  attrs_of(tid_of(ui[0]), &ui_own);
  attrs_of(tid_of(ut[0]), &ut_own);
  lanepool_lane_info_t ui_info = {.struct_size = sizeof ui_info}, ut_info = ui_info;
  lanepool_lane_info(ui[0], &ui_info);
  lanepool_lane_info(ut[0], &ut_info);
  /* Root may lower a utility thread to userInteractive's nice -5; unprivileged it could
   * not come back, and the pool's userInteractive lanes did not get theirs either. */
  bool may = mode == MODE_ROOT;
  CHECK(((atomic_load(&pool->lift_ok) & 1u) != 0) == may);
  /* The band's threads held: nothing but a lifter can run its job (its rescue thread only
   * after 30 s without progress: main). */
  for (int i = 0; i < 2; i++) CHECK_RC(lanepool_lane_async(ui[i], lift_hold, NULL), 0);
  POLL_WHILE(atomic_load(&lift.ui_busy) < 2);
  /* The band below the lifter's parked (a new pool's background threads have not yet made
   * their first trip to park): no lift while it runs work (no_lift_beside_lower_work). */
  POLL_WHILE(atomic_load(&pool->bands[LANEPOOL_BAND_COUNT - 1].idle) < 2);
  CHECK_RC(lanepool_async(pool, LANEPOOL_QOS_UTILITY, lift_push, NULL), 0);
  if (may) {
    POLL_WHILE(!atomic_load(&lift.done));
  } else {
    POLL_WHILE(!atomic_load(&lift.pusher));
  }
  atomic_store(&gate, 1);
  POLL_WHILE(!atomic_load(&lift.done));
  CHECK(atomic_load(&lift.done) == 1);
  /* Run by the utility thread that pushed it (lifted), else by a thread of its band:
   * either way at userInteractive's settings, and it counts as of that band. */
  pid_t ran = (pid_t)atomic_load(&lift.ran_on), pusher = (pid_t)atomic_load(&lift.pusher);
  if (may)
    CHECK(ran == pusher);
  else
    CHECK(ran != pusher && (ran == tid_of(ui[0]) || ran == tid_of(ui[1])));
  if (may != (ran == pusher))
    fprintf(stderr, "[%s] ran on %d, pushed by %d, the band's threads %d %d\n", current_test,
            (int)ran, (int)pusher, tid_of(ui[0]), tid_of(ui[1]));
  CHECK(attrs_equal(&lift.job, &ui_own) && lift.job_slack == ui_info.timer_slack.got);
  if (!attrs_equal(&lift.job, &ui_own) || lift.job_slack != ui_info.timer_slack.got)
    fprintf(stderr,
            "[%s] job nice %d pol %d io %d slice %llu slack %ld, the band's nice %d pol %d io %d "
            "slice %llu slack %lld\n",
            current_test, lift.job.nice, lift.job.policy, lift.job.ioprio,
            (unsigned long long)lift.job.attr.sched_runtime, lift.job_slack, ui_own.nice,
            ui_own.policy, ui_own.ioprio, (unsigned long long)ui_own.attr.sched_runtime,
            (long long)ui_info.timer_slack.got);
  CHECK(lift.job_qos == LANEPOOL_QOS_USER_INTERACTIVE);
  /* The lifter afterwards (a utility job runs on one of the band's two threads): its own
   * band's settings again, timer slack included. */
  CHECK_RC(lanepool_async(pool, LANEPOOL_QOS_UTILITY, lift_after, NULL), 0);
  POLL_WHILE(!atomic_load(&lift.after_on));
  pid_t after = (pid_t)atomic_load(&lift.after_on);
  CHECK(after == tid_of(ut[0]) || after == tid_of(ut[1]));
  CHECK(attrs_equal(&lift.after, &ut_own) && lift.after_slack == ut_info.timer_slack.got);
  for (int i = 0; i < 2; i++)
    CHECK(atomic_load(&ut[i]->lift) == LANEPOOL_BAND_COUNT && unboosted(ut[i]));
  CHECK_RC(lanepool_destroy(pool), 0);
}

/* ---- not while a lower band runs work: with both background threads busy, the utility
 * thread leaves the userInteractive job to its band (the CPUs are busy with preemptible
 * work, where that band's woken thread gets one at once) ---- */

static void test_no_lift_beside_lower_work(void) {
  current_test = "no_lift_beside_lower_work";
  if (mode != MODE_ROOT) return; /* nothing is lifted unprivileged (above) */
  lanepool_t *pool = lift_pool("lift3");
  if (!pool) return;
  lanepool_lane_t *ui[2];
  for (uint32_t i = 0; i < 2; i++) {
    lanepool_lane_t *bg = NULL;
    lanepool_get_lane(pool, LANEPOOL_QOS_USER_INTERACTIVE, i, &ui[i]);
    lanepool_get_lane(pool, LANEPOOL_QOS_BACKGROUND, i, &bg);
    CHECK_RC(lanepool_lane_async(ui[i], lift_hold, NULL), 0);
    CHECK_RC(lanepool_lane_async(bg, lift_hold, NULL), 0);
  }
  POLL_WHILE(atomic_load(&lift.ui_busy) < 4);
  CHECK_RC(lanepool_async(pool, LANEPOOL_QOS_UTILITY, lift_push, NULL), 0);
  POLL_WHILE(!atomic_load(&lift.pusher));
  /* The pusher's thread looks for a lift right after its task (it has nothing else), and
   * before or after a utility job pushed now. */
  CHECK_RC(lanepool_async(pool, LANEPOOL_QOS_UTILITY, lift_after, NULL), 0);
  POLL_WHILE(!atomic_load(&lift.after_on));
  /* Both utility threads parked: each has made its idle look while the background band
   * ran work, so none lifts once the gate lets that work end. */
  POLL_WHILE(atomic_load(&pool->bands[lanepool_band_index(LANEPOOL_QOS_UTILITY)].idle) < 2);
  CHECK(atomic_load(&pool->bands[lanepool_band_index(LANEPOOL_QOS_UTILITY)].idle) == 2);
  atomic_store(&gate, 1);
  POLL_WHILE(!atomic_load(&lift.done));
  /* Run by a thread of its band, not lifted. */
  pid_t ran = (pid_t)atomic_load(&lift.ran_on);
  CHECK(ran != (pid_t)atomic_load(&lift.pusher));
  CHECK(ran == tid_of(ui[0]) || ran == tid_of(ui[1]));
  CHECK_RC(lanepool_destroy(pool), 0);
}

/* ---- a lifted job that runs a closure inline on an idle background lane, where a
 * userInitiated waiter then queues: the carrier is already higher (userInteractive, the
 * job's band), so it is not touched (before, it was lowered to nice -3 for the wait) ---- */

static _Atomic int lift_gate, lift_in_bg;
static lanepool_lane_t *lift_bg;

static void lift_bg_closure(void *ctx) {
  (void)ctx;
  atomic_store(&lift_in_bg, 1);
  hold_until(&lift_gate);
}

static void lift_carrier_job(void *ctx) {
  (void)ctx;
  atomic_store(&lift.ran_on, gettid_());
  lanepool_lane_sync(lift_bg, lift_bg_closure, NULL);
  atomic_store(&lift.done, 1);
}

static void lift_carrier_push(void *ctx) {
  (void)ctx;
  atomic_store(&lift.pusher, gettid_());
  if (lanepool_async(lift.pool, LANEPOOL_QOS_USER_INTERACTIVE, lift_carrier_job, NULL) != 0)
    atomic_store(&lift.done, -1);
}

static void test_lifted_carrier_not_lowered(void) {
  current_test = "lifted_carrier_not_lowered";
  if (mode != MODE_ROOT) return; /* nothing is lifted unprivileged (above) */
  lanepool_t *pool = lift_pool("lift2");
  if (!pool) return;
  atomic_store(&lift_gate, 0);
  atomic_store(&lift_in_bg, 0);
  lanepool_get_lane(pool, LANEPOOL_QOS_BACKGROUND, 0, &lift_bg);
  for (uint32_t i = 0; i < 2; i++) {
    lanepool_lane_t *ui = NULL;
    lanepool_get_lane(pool, LANEPOOL_QOS_USER_INTERACTIVE, i, &ui);
    CHECK_RC(lanepool_lane_async(ui, lift_hold, NULL), 0);
  }
  POLL_WHILE(atomic_load(&lift.ui_busy) < 2);
  POLL_WHILE(atomic_load(&pool->bands[LANEPOOL_BAND_COUNT - 1].idle) < 2); /* (as above) */
  CHECK_RC(lanepool_async(pool, LANEPOOL_QOS_UTILITY, lift_carrier_push, NULL), 0);
  POLL_WHILE(!atomic_load(&lift_in_bg));
  pid_t d = (pid_t)atomic_load(&lift.ran_on);
  CHECK(d == (pid_t)atomic_load(&lift.pusher)); /* lifted, and running the closure inline */
  CHECK(nice_of(d) == -5);
  pthread_t w_th;
  waiter_t w = {lift_bg, LANEPOOL_QOS_USER_INITIATED, -1, {99, -1, 0}};
  CHECK_RC(pthread_create(&w_th, NULL, waiter_thread, &w), 0);
  POLL_WHILE(atomic_load(&lift_bg->boost_band) != 1);
  pthread_mutex_lock(&lift_bg->boost_lock); /* the waiter's update (and carrier look) done */
  pthread_mutex_unlock(&lift_bg->boost_lock);
  CHECK(atomic_load(&lift_bg->boost_band) == 1);
  CHECK(nice_of(d) == -5); /* still its job's band, not the waiter's lower one */
  if (nice_of(d) != -5) fprintf(stderr, "[%s] carrier nice %d\n", current_test, nice_of(d));
  atomic_store(&lift_gate, 1);
  pthread_join(w_th, NULL);
  CHECK_RC(w.rc, 0);
  POLL_WHILE(!atomic_load(&lift.done));
  atomic_store(&gate, 1);
  CHECK(atomic_load(&lift.done) == 1 && unboosted(lift_bg));
  CHECK_RC(lanepool_destroy(pool), 0);
}

/* ---- nested: the borrower runs a closure inline on an idle utility lane, and inside it
 * one inline on the idle background lane; a default waiter boosts the inner lane first,
 * a userInteractive one the outer lane then. The borrower ends with what it had before
 * the first raise, not with what the inner raise gave it ---- */

static struct {
  lanepool_lane_t *outer, *inner;
  _Atomic int in_inner, tid;
  attrs_t before, after;
} nest;

static void nest_inner(void *ctx) {
  (void)ctx;
  atomic_store(&nest.in_inner, 1);
  hold_until(&gate);
}

static void nest_outer(void *ctx) {
  (void)ctx;
  lanepool_lane_sync(nest.inner, nest_inner, NULL);
}

static void *nest_thread(void *arg) {
  (void)arg;
  lanepool_band_token_t t;
  lanepool_thread_enter_band(LANEPOOL_QOS_BACKGROUND, 0, &t);
  atomic_store(&nest.tid, gettid_());
  attrs_of(gettid_(), &nest.before);
  lanepool_lane_sync(nest.outer, nest_outer, NULL);
  attrs_of(gettid_(), &nest.after);
  lanepool_thread_restore(&t);
  return NULL;
}

static bool wait_nice(pid_t tid, int nice) {
  for (int i = 0; i < 10000; i++) {
    if (nice_of(tid) == nice) return true;
    nap_us(1000);
  }
  return false;
}

static void test_nested_borrower_restored(void) {
  current_test = "nested_borrower_restored";
  if (mode != MODE_ROOT) return; /* the nices below need the privilege */
  lanepool_t *pool = escalation_pool("esc19");
  memset(&nest, 0, sizeof nest);
  nest.outer = lane_of(pool, LANEPOOL_QOS_UTILITY);
  nest.inner = lane_of(pool, LANEPOOL_QOS_BACKGROUND);
  atomic_store(&gate, 0);
  pthread_t t, w1, w2;
  CHECK_RC(pthread_create(&t, NULL, nest_thread, NULL), 0);
  POLL_WHILE(!atomic_load(&nest.in_inner));
  pid_t bt = (pid_t)atomic_load(&nest.tid);
  CHECK(atomic_load(&nest.in_inner) && nest.before.nice == 10);
  waiter_t a = {nest.inner, LANEPOOL_QOS_DEFAULT, -1, {99, -1, 0}};
  CHECK_RC(pthread_create(&w1, NULL, waiter_thread, &a), 0);
  CHECK(wait_nice(bt, 0)); /* raised for the inner lane */
  waiter_t b = {nest.outer, LANEPOOL_QOS_USER_INTERACTIVE, -1, {99, -1, 0}};
  CHECK_RC(pthread_create(&w2, NULL, waiter_thread, &b), 0);
  CHECK(wait_nice(bt, -5)); /* and for the outer one */
  atomic_store(&gate, 1);
  pthread_join(t, NULL);
  pthread_join(w1, NULL);
  pthread_join(w2, NULL);
  CHECK_RC(a.rc, 0);
  CHECK_RC(b.rc, 0);
  CHECK(attrs_equal(&nest.before, &nest.after));
  if (!attrs_equal(&nest.before, &nest.after))
    fprintf(stderr, "[%s] after: nice %d policy %d (before %d %d)\n", current_test, nest.after.nice,
            nest.after.policy, nest.before.nice, nest.before.policy);
  CHECK(unboosted(nest.outer) && unboosted(nest.inner));
  CHECK(atomic_load(&nest.outer->carried) == 0 && atomic_load(&nest.inner->carried) == 0);
  CHECK_RC(lanepool_destroy(pool), 0);
}

/* ---- the same nesting raised outer lane first, from a plain thread (nice 0) at I/O
 * best-effort 7: a userInitiated waiter on the outer lane (I/O 7 -> 2), then a
 * userInteractive one on the inner lane (2 -> 0). The borrower ends with the I/O priority
 * it had before the first raise, the weakest of its records', not the inner record's:
 * unprivileged neither raise can change its CPU settings, so both records hold the same
 * ones, which decided it before ---- */

static void *nest_io_thread(void *arg) {
  (void)arg;
  (void)lanepool__set_ioprio(0, lanepool__ioprio_value(LANEPOOL_IOPRIO_BE, 7));
  atomic_store(&nest.tid, gettid_());
  attrs_of(gettid_(), &nest.before);
  lanepool_lane_sync(nest.outer, nest_outer, NULL);
  attrs_of(gettid_(), &nest.after);
  return NULL;
}

static bool wait_ioprio(pid_t tid, int value) {
  for (int i = 0; i < 10000; i++) {
    if (lanepool__get_ioprio(tid) == value) return true;
    nap_us(1000);
  }
  return false;
}

static void test_nested_borrower_io_restored(void) {
  current_test = "nested_borrower_io_restored";
  lanepool_t *pool = escalation_pool("esc19io");
  memset(&nest, 0, sizeof nest);
  nest.outer = lane_of(pool, LANEPOOL_QOS_UTILITY);
  nest.inner = lane_of(pool, LANEPOOL_QOS_BACKGROUND);
  atomic_store(&gate, 0);
  pthread_t t, w1, w2;
  CHECK_RC(pthread_create(&t, NULL, nest_io_thread, NULL), 0);
  POLL_WHILE(!atomic_load(&nest.in_inner));
  pid_t bt = (pid_t)atomic_load(&nest.tid);
  CHECK(atomic_load(&nest.in_inner) && nest.before.ioprio == lanepool__ioprio_value(2, 7));
  waiter_t a = {nest.outer, LANEPOOL_QOS_USER_INITIATED, -1, {99, -1, 0}};
  CHECK_RC(pthread_create(&w1, NULL, waiter_thread, &a), 0);
  CHECK(wait_ioprio(bt, lanepool__ioprio_value(2, 2))); /* raised for the outer lane */
  waiter_t b = {nest.inner, LANEPOOL_QOS_USER_INTERACTIVE, -1, {99, -1, 0}};
  CHECK_RC(pthread_create(&w2, NULL, waiter_thread, &b), 0);
  CHECK(wait_ioprio(bt, lanepool__ioprio_value(2, 0))); /* and for the inner one */
  atomic_store(&gate, 1);
  pthread_join(t, NULL);
  pthread_join(w1, NULL);
  pthread_join(w2, NULL);
  CHECK_RC(a.rc, 0);
  CHECK_RC(b.rc, 0);
  CHECK(attrs_equal(&nest.before, &nest.after));
  if (!attrs_equal(&nest.before, &nest.after))
    fprintf(stderr, "[%s] after: nice %d policy %d io %d (before %d %d %d)\n", current_test,
            nest.after.nice, nest.after.policy, nest.after.ioprio, nest.before.nice,
            nest.before.policy, nest.before.ioprio);
  CHECK(unboosted(nest.outer) && unboosted(nest.inner));
  CHECK(atomic_load(&nest.outer->carried) == 0 && atomic_load(&nest.inner->carried) == 0);
  CHECK_RC(lanepool_destroy(pool), 0);
}

/* ---- a thread of the band running another lane's queue is boosted with it, and goes
 * back to its own lane's band when it gives that lane up (case 1, the carrier) ---- */

static struct { _Atomic int away_tid, carrier_tid, gate1, gate2; } adopt;

static void away_job(void *ctx) { /* a band job: its lane's thread holds no lane */
  (void)ctx;
  atomic_store(&adopt.away_tid, gettid_());
  hold_until(&adopt.gate1);
}

static void adopted_task(void *ctx) {
  (void)ctx;
  atomic_store(&adopt.carrier_tid, gettid_());
  hold_until(&adopt.gate2);
}

static void test_adopting_thread_boosted(void) {
  current_test = "adopting_thread_boosted";
  lanepool_config_t cfg;
  lanepool_config_init(&cfg);
  cfg.name = "esc18";
  cfg.lanes_per_band = 2;
  lanepool_t *pool = NULL;
  CHECK_RC(lanepool_create(&cfg, &pool), 0);
  memset(&adopt, 0, sizeof adopt);
  CHECK_RC(lanepool_async(pool, LANEPOOL_QOS_BACKGROUND, away_job, NULL), 0);
  POLL_WHILE(!atomic_load(&adopt.away_tid));
  lanepool_lane_t *a = NULL, *l0 = NULL, *l1 = NULL;
  lanepool_get_lane(pool, LANEPOOL_QOS_BACKGROUND, 0, &l0);
  lanepool_get_lane(pool, LANEPOOL_QOS_BACKGROUND, 1, &l1);
  pid_t away = (pid_t)atomic_load(&adopt.away_tid);
  a = tid_of(l0) == away ? l0 : tid_of(l1) == away ? l1 : NULL;
  CHECK(a != NULL); /* the job runs on a lane's thread: the rescue thread waits 30 s */
  if (!a) {
    atomic_store(&adopt.gate1, 1);
    lanepool_destroy(pool);
    return;
  }
  /* Lane-bound work on the lane whose thread is away: another thread of the band runs it. */
  CHECK_RC(lanepool_lane_async(a, adopted_task, NULL), 0);
  POLL_WHILE(!atomic_load(&adopt.carrier_tid));
  pid_t carrier = (pid_t)atomic_load(&adopt.carrier_tid);
  CHECK(carrier != 0 && carrier != away);
  attrs_t before;
  attrs_of(carrier, &before);
  CHECK(before.nice == 10 && before.policy == SCHED_BATCH);
  waiter_t w = {a, LANEPOOL_QOS_USER_INTERACTIVE, -1, {99, -1, 0}};
  pthread_t w_th;
  CHECK_RC(pthread_create(&w_th, NULL, waiter_thread, &w), 0);
  bool raised = false;
  for (int i = 0; i < 10000 && !raised; i++) {
    raised = atomic_load(&a->boost_band) == 0 && nice_of(carrier) == boosted_nice(0) &&
             policy_of(carrier) == boosted_policy(0);
    if (!raised) nap_us(1000);
  }
  CHECK(raised);
  if (!raised)
    fprintf(stderr, "[%s] carrier nice %d policy %d, lane band %u\n", current_test,
            nice_of(carrier), policy_of(carrier), atomic_load(&a->boost_band));
  atomic_store(&adopt.gate2, 1);
  pthread_join(w_th, NULL);
  CHECK_RC(w.rc, 0);
  /* Once it gave the lane up: its own lane's band again, exactly. */
  bool back = false;
  attrs_t after;
  for (int i = 0; i < 10000 && !back; i++) {
    attrs_of(carrier, &after);
    back = attrs_equal(&before, &after) && atomic_load(&a->carried) == 0;
    if (!back) nap_us(1000);
  }
  CHECK(back);
  if (!back)
    fprintf(stderr,
            "[%s] carrier after: nice %d policy %d io %d slice %llu (before %d %d %d %llu)\n",
            current_test, after.nice, after.policy, after.ioprio,
            (unsigned long long)after.attr.sched_runtime, before.nice, before.policy, before.ioprio,
            (unsigned long long)before.attr.sched_runtime);
  atomic_store(&adopt.gate1, 1);
  CHECK_RC(lanepool_shutdown(pool, LANEPOOL_SHUTDOWN_DRAIN, NULL, NULL), 0);
  CHECK(unboosted(a));
  CHECK_RC(lanepool_destroy(pool), 0);
}

/* ---- the chain is walked again when a band on it changes (cases 3 and 4): a utility
 * lane's task waits on a busy background lane; a userInteractive waiter then arrives on
 * the utility lane, later than that wait began ---- */

static struct {
  lanepool_lane_t *inner;
  _Atomic int rc;
  seen_t seen;
} mid;

static void mid_task(void *ctx) {
  (void)ctx;
  atomic_store(&mid.rc, lanepool_lane_sync(mid.inner, see_own, &mid.seen));
}

/* The utility lane at band `b`: /proc checked as root (unprivileged, what a utility lane
 * keeps is not the background lane's, which boosted_nice describes). */
static bool wait_for_band(lanepool_lane_t *lane, int b) {
  if (mode == MODE_ROOT) return wait_for_boost(lane, b, tid_of(lane));
  POLL_WHILE(atomic_load(&lane->boost_band) != (uint32_t)b);
  return atomic_load(&lane->boost_band) == (uint32_t)b;
}

static void test_chain_rewalked(bool by_sync) {
  current_test = by_sync ? "chain_rewalked_by_a_later_sync" : "chain_rewalked_by_boost_begin_end";
  lanepool_t *pool = escalation_pool(by_sync ? "esc14" : "esc15");
  lanepool_lane_t *ut = lane_of(pool, LANEPOOL_QOS_UTILITY),
                  *bg = lane_of(pool, LANEPOOL_QOS_BACKGROUND);
  memset(&mid, 0, sizeof mid);
  mid.inner = bg;
  atomic_store(&mid.rc, -1);
  atomic_store(&gate, 0);
  atomic_store(&order_len, 0);
  CHECK_RC(lanepool_lane_async(bg, blocker, NULL), 0);
  /* The blocker on the background lane's own thread: a utility task that found the lane
   * free would run the blocker itself, as a waiter that runs the queue it waits for. */
  POLL_WHILE(atomic_load(&bg->excl) != (uint32_t)tid_of(bg));
  CHECK(atomic_load(&bg->excl) == (uint32_t)tid_of(bg));
  CHECK_RC(lanepool_lane_async(ut, mid_task, NULL), 0);
  /* The utility task waits on the background lane: that lane runs at utility. */
  CHECK(wait_for_boost(bg, 3, tid_of(bg)));
  waiter_t w = {ut, LANEPOOL_QOS_USER_INTERACTIVE, -1, {99, -1, 0}};
  pthread_t th;
  lanepool_boost_t b;
  if (by_sync) { /* case 3: a later waiter reaches down the chain */
    CHECK_RC(pthread_create(&th, NULL, waiter_thread, &w), 0);
    CHECK(wait_for_band(ut, 0));
    CHECK(wait_for_boost(bg, 0, tid_of(bg)));
  } else { /* case 4: and its leaving does too */
    CHECK_RC(lanepool_lane_boost_begin(ut, LANEPOOL_QOS_USER_INTERACTIVE, &b), 0);
    CHECK(wait_for_boost(bg, 0, tid_of(bg)));
    CHECK_RC(lanepool_lane_boost_end(&b), 0);
    CHECK(wait_for_band(ut, 3));
    CHECK(wait_for_boost(bg, 3, tid_of(bg))); /* back to the band still waiting */
  }
  atomic_store(&gate, 1);
  if (by_sync) {
    pthread_join(th, NULL);
    CHECK_RC(w.rc, 0);
  }
  CHECK_RC(lanepool_shutdown(pool, LANEPOOL_SHUTDOWN_DRAIN, NULL, NULL), 0);
  CHECK_RC(atomic_load(&mid.rc), 0);
  if (by_sync) CHECK(mid.seen.nice == boosted_nice(0) && mid.seen.policy == boosted_policy(0));
  CHECK(unboosted(bg) && unboosted(ut) && bg->chain_waiters == NULL && ut->chain_waiters == NULL);
  CHECK_RC(lanepool_destroy(pool), 0);
}

/* ---- a fork child's queued sync from a task: the chain it holds is the parent's, whose
 * boost_lock a parent thread may hold at the fork; the child never takes it ---- */

static struct {
  lanepool_lane_t *ut;
  _Atomic int armed, holding, release;
  int status;
} fk;

static void hold_at_boost_apply(const char *point, lanepool_lane_t *lane, long arg) {
  (void)arg;
  if (strcmp(point, "boost_apply") || lane != fk.ut || !atomic_exchange(&fk.armed, 0)) return;
  atomic_store(&fk.holding, 1); /* under the lane's boost_lock */
  while (!atomic_load(&fk.release)) usleep(1000);
}

static void *boost_once(void *arg) {
  (void)arg;
  lanepool_boost_t b;
  lanepool_lane_boost_begin(fk.ut, LANEPOOL_QOS_USER_INTERACTIVE, &b);
  lanepool_lane_boost_end(&b);
  return NULL;
}

static void child_task(void *ctx) { (void)ctx; }

static void fork_and_sync(void *ctx) {
  (void)ctx;
  while (!atomic_load(&fk.holding)) usleep(1000);
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGALRM);
    pthread_sigmask(SIG_UNBLOCK, &set, NULL); /* a lane thread's copy blocks it */
    alarm(60);
    lanepool_config_t cfg;
    lanepool_config_init(&cfg);
    cfg.name = "esc17c";
    cfg.lanes_per_band = 1;
    lanepool_t *p2 = NULL;
    if (lanepool_create(&cfg, &p2)) _exit(20);
    int rc = lanepool_lane_sync_flags(lane_of(p2, LANEPOOL_QOS_BACKGROUND), child_task, NULL,
                                      LANEPOOL_SYNC_QUEUED);
    _exit(rc == 0 ? 0 : 21);
  }
  waitpid(pid, &fk.status, 0);
  atomic_store(&fk.release, 1);
}

/* ThreadSanitizer cannot start threads in the child of a multi-threaded fork. */
#if defined(__SANITIZE_THREAD__)
#define UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define UNDER_TSAN 1
#endif
#endif

static void test_chain_in_fork_child(void) {
  current_test = "chain_in_fork_child";
#ifdef UNDER_TSAN
  return;
#endif
  lanepool_t *pool = escalation_pool("esc17");
  fk.ut = lane_of(pool, LANEPOOL_QOS_UTILITY);
  atomic_store(&fk.armed, 1);
  atomic_store(&fk.holding, 0);
  atomic_store(&fk.release, 0);
  fk.status = -1;
  atomic_store(&lanepool__test_point, hold_at_boost_apply);
  pthread_t th;
  CHECK_RC(pthread_create(&th, NULL, boost_once, NULL), 0);
  CHECK_RC(lanepool_lane_async(fk.ut, fork_and_sync, NULL), 0);
  pthread_join(th, NULL);
  CHECK_RC(lanepool_shutdown(pool, LANEPOOL_SHUTDOWN_DRAIN, NULL, NULL), 0);
  atomic_store(&lanepool__test_point, NULL);
  CHECK(WIFEXITED(fk.status) && WEXITSTATUS(fk.status) == 0); /* not SIGALRM: no hang */
  CHECK_RC(lanepool_destroy(pool), 0);
}

/* ---- case 6: a real-time boost leaves the lane's timer slack as its band set it (Linux
 * zeroes it on entering SCHED_FIFO and gives the thread's default back on leaving) ---- */

static void read_slack(void *ctx) { *(long *)ctx = slack_now(); }
/* On the lane's thread, and not boosted by this default caller. */
#define UNBOOSTED_QUEUED (LANEPOOL_SYNC_QUEUED | LANEPOOL_SYNC_NO_ESCALATION)

static void test_realtime_boost_keeps_slack(void) {
  current_test = "realtime_boost_keeps_slack";
  if (mode != MODE_ROOT) return; /* SCHED_FIFO needs the privilege */
  lanepool_config_t cfg;
  lanepool_config_init(&cfg);
  cfg.name = "esc16";
  cfg.lanes_per_band = 1;
  cfg.allow_realtime = 1;
  cfg.policy[1].sched = LANEPOOL_SCHED_FIFO;
  cfg.policy[1].rt_priority = 1;
  cfg.policy[1].nice = 0;
  cfg.policy[1].slice_ns = 0;
  lanepool_t *pool = NULL;
  CHECK_RC(lanepool_create(&cfg, &pool), 0);
  lanepool_lane_t *bg = lane_of(pool, LANEPOOL_QOS_BACKGROUND);
  long before = -1, after = -1;
  CHECK_RC(lanepool_lane_sync_flags(bg, read_slack, &before, UNBOOSTED_QUEUED), 0);
  CHECK(before == 10000000);
  lanepool_boost_t b;
  CHECK_RC(lanepool_lane_boost_begin(bg, LANEPOOL_QOS_USER_INITIATED, &b), 0);
  CHECK(policy_of(tid_of(bg)) == SCHED_FIFO);
  CHECK_RC(lanepool_lane_boost_end(&b), 0);
  CHECK(policy_of(tid_of(bg)) == SCHED_BATCH && unboosted(bg));
  CHECK_RC(lanepool_lane_sync_flags(bg, read_slack, &after, UNBOOSTED_QUEUED), 0);
  CHECK(after == 10000000);
  if (after != 10000000) fprintf(stderr, "[%s] slack %ld after the boost\n", current_test, after);
  /* A thread that entered a band and was moved to a real-time policy meanwhile gets its
   * own slack back from restore too. */
  lanepool_band_token_t t;
  long mine = slack_now();
  CHECK_RC(lanepool_thread_enter_band(LANEPOOL_QOS_DEFAULT, 0, &t), 0);
  struct sched_param sp = {.sched_priority = 1};
  CHECK_RC(sched_setscheduler(0, SCHED_FIFO, &sp), 0);
  CHECK_RC(lanepool_thread_restore(&t), 0);
  CHECK(slack_now() == mine && policy_of(gettid_()) == SCHED_OTHER);
  CHECK_RC(lanepool_destroy(pool), 0);
}

/* ---- restore puts back every attribute: SCHED_RESET_ON_FORK kept (unprivileged, a
 * request that dropped it was refused), and a fork child's copy of the thread that
 * entered may restore ---- */

static void *reset_on_fork_thread(void *arg) {
  int *ok = arg;
  struct sched_param sp = {0};
  *ok = sched_setscheduler(0, SCHED_OTHER | SCHED_RESET_ON_FORK, &sp) == 0;
  lanepool_band_token_t t;
  *ok = *ok && lanepool_thread_enter_band(LANEPOOL_QOS_BACKGROUND, 0, &t) == 0;
  *ok = *ok && t.sched.error == 0 && policy_of(gettid_()) == SCHED_BATCH;
  *ok = *ok && sched_getscheduler(0) == (SCHED_BATCH | SCHED_RESET_ON_FORK);
  *ok = *ok && lanepool_thread_restore(&t) == 0;
  *ok = *ok && sched_getscheduler(0) == (SCHED_OTHER | SCHED_RESET_ON_FORK);
  return NULL;
}

static void test_restore_keeps_reset_on_fork(void) {
  current_test = "restore_keeps_reset_on_fork";
  int ok = 0;
  pthread_t th;
  CHECK_RC(pthread_create(&th, NULL, reset_on_fork_thread, &ok), 0);
  pthread_join(th, NULL);
  CHECK(ok);
}

static void test_restore_in_fork_child(void) {
  current_test = "restore_in_fork_child";
  lanepool_band_token_t t;
  CHECK_RC(lanepool_thread_enter_band(LANEPOOL_QOS_BACKGROUND, 0, &t), 0);
  long slack0 = (long)t.saved_timer_slack;
  fflush(NULL);
  pid_t child = fork();
  if (child == 0) {
    /* The copy of the thread that entered: it restores what it inherited. */
    int rc = lanepool_thread_restore(&t);
    bool back =
        policy_of(gettid_()) == SCHED_OTHER && nice_of(gettid_()) == 0 && slack_now() == slack0;
    _exit(rc == 0 && back ? 0 : 1);
  }
  int status = -1;
  CHECK(child > 0 && waitpid(child, &status, 0) == child);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  /* Another thread of this process still may not. */
  pthread_t th;
  void *rc = NULL;
  CHECK_RC(pthread_create(&th, NULL, restore_elsewhere, &t), 0);
  pthread_join(th, &rc);
  CHECK((intptr_t)rc == EINVAL);
  CHECK_RC(lanepool_thread_restore(&t), 0);
  CHECK(policy_of(gettid_()) == SCHED_OTHER && nice_of(gettid_()) == 0);
}


/* ---- a lane's thread id is 0 once its thread left: no boost reaches an exited (maybe
 * reused) thread id (test hooks: every boost's target tid is recorded) ---- */

enum { MAX_APPLIED = 64 };
static _Atomic int applied_tids[MAX_APPLIED];
static _Atomic int applied_count;
static _Atomic int hold_successor; /* 1: armed; 2: a successor is held; 0: released */
static _Atomic int held_tid;
static const char *held_name;

static void record_point(const char *point, lanepool_lane_t *lane, long arg) {
  (void)lane;
  if (strcmp(point, "boost_apply") == 0) {
    int k = atomic_fetch_add(&applied_count, 1);
    if (k < MAX_APPLIED) atomic_store(&applied_tids[k], (int)arg);
  } else if (strcmp(point, "apply_policy") == 0 && atomic_load(&hold_successor) == 1) {
    char name[16] = "";
    prctl(PR_GET_NAME, name, 0, 0, 0);
    int armed = 1;
    if (strcmp(name, held_name) != 0 || !atomic_compare_exchange_strong(&hold_successor, &armed, 2))
      return;
    atomic_store(&held_tid, (int)arg);
    while (atomic_load(&hold_successor) == 2) {
      nap_us(1000);
    }
  }
}

/* true if some boost went to thread `tid` since applied_count was reset. */
static bool boosted_tid(pid_t tid) {
  int n = atomic_load(&applied_count);
  for (int k = 0; k < n && k < MAX_APPLIED; k++)
    if (atomic_load(&applied_tids[k]) == (int)tid) return true;
  return false;
}

static bool task_exists(pid_t tid) {
  char path[64];
  snprintf(path, sizeof path, "/proc/self/task/%d", (int)tid);
  return access(path, F_OK) == 0;
}

static void test_boost_after_the_thread_left(void) {
  current_test = "boost_after_the_thread_left";
  atomic_store(&lanepool__test_point, record_point);
  /* 1. The lane's thread exited at shutdown: a boost has no thread to touch. */
  lanepool_t *pool = escalation_pool("esc8");
  lanepool_lane_t *bg = lane_of(pool, LANEPOOL_QOS_BACKGROUND);
  pid_t first = tid_of(bg);
  CHECK(first > 0);
  CHECK_RC(lanepool_shutdown(pool, LANEPOOL_SHUTDOWN_DRAIN, NULL, NULL), 0);
  CHECK(tid_of(bg) == 0);
  atomic_store(&applied_count, 0);
  lanepool_boost_t b;
  CHECK_RC(lanepool_lane_boost_begin(bg, LANEPOOL_QOS_USER_INTERACTIVE, &b), 0);
  CHECK(!boosted_tid(first) && atomic_load(&applied_count) == 0);
  CHECK_RC(lanepool_lane_boost_end(&b), 0);
  CHECK(unboosted(bg));
  CHECK_RC(lanepool_destroy(pool), 0);

  /* 2. A task ended the thread; its successor is held before it applies its band (and
   *    before it publishes its tid) until the old thread is gone: a boost then touches
   *    neither, and the successor takes it up when it starts. */
  pool = escalation_pool("esc9");
  bg = lane_of(pool, LANEPOOL_QOS_BACKGROUND);
  first = tid_of(bg);
  held_name = bg->name;
  atomic_store(&held_tid, 0);
  atomic_store(&hold_successor, 1);
  CHECK_RC(lanepool_lane_async(bg, end_thread, NULL), 0);
  bool gone = false;
  for (int i = 0; i < 10000 && !gone; i++) {
    gone = atomic_load(&held_tid) != 0 && !task_exists(first);
    if (!gone) nap_us(1000);
  }
  CHECK(gone);
  pid_t next = (pid_t)atomic_load(&held_tid);
  atomic_store(&applied_count, 0);
  CHECK_RC(lanepool_lane_boost_begin(bg, LANEPOOL_QOS_USER_INTERACTIVE, &b), 0);
  CHECK(!boosted_tid(first));
  if (boosted_tid(first)) fprintf(stderr, "[%s] boosted exited thread %d\n", current_test, first);
  atomic_store(&hold_successor, 0);
  /* The successor applied the boost when it started (with RLIMIT_NICE 0 it sees no CPU
   * change: the test hook's record of the target says it). */
  POLL_WHILE(!boosted_tid(next));
  CHECK(wait_for_boost(bg, 0, next));
  CHECK(tid_of(bg) == next && boosted_tid(next) && !boosted_tid(first));
  CHECK_RC(lanepool_lane_boost_end(&b), 0);
  CHECK(bg_at_own_band(bg));
  CHECK_RC(lanepool_destroy(pool), 0);

  /* 3. The boost ends while the successor is held: the successor, started by the boosted
   *    thread, comes up with its own band's settings, the slice too (it kept the
   *    userInteractive 100 us slice before). */
  pool = escalation_pool("esc9b");
  bg = lane_of(pool, LANEPOOL_QOS_BACKGROUND);
  first = tid_of(bg);
  long long own_slice = slice_of(first);
  CHECK_RC(lanepool_lane_boost_begin(bg, LANEPOOL_QOS_USER_INTERACTIVE, &b), 0);
  CHECK(wait_for_boost(bg, 0, first));
  held_name = bg->name;
  atomic_store(&held_tid, 0);
  atomic_store(&hold_successor, 1);
  CHECK_RC(lanepool_lane_async(bg, end_thread, NULL), 0);
  POLL_WHILE(!atomic_load(&held_tid));
  next = (pid_t)atomic_load(&held_tid);
  CHECK(next != 0);
  CHECK_RC(lanepool_lane_boost_end(&b), 0);
  atomic_store(&hold_successor, 0);
  POLL_WHILE(tid_of(bg) != next);
  CHECK(bg_at_own_band(bg));
  /* (A kernel without EEVDF custom slices, before 6.12, reports 0 for both.) */
  CHECK(own_slice >= 0 && slice_of(next) == own_slice);
  if (slice_of(next) != own_slice)
    fprintf(stderr, "[%s] successor's slice %lld, the lane's own %lld\n", current_test,
            slice_of(next), own_slice);
  atomic_store(&lanepool__test_point, NULL);
  CHECK_RC(lanepool_destroy(pool), 0);
}

/* ---- lanepool_destroy waits for a lanepool_lane_boost_end under way on its lane (a
 * use after free before: the end was no registered call) ---- */

static _Atomic int end_inside;    /* the end reached its test point */
static _Atomic int end_release;   /* the end may go on */
static _Atomic int destroy_waits; /* destroy found a call under way */

static void end_point(const char *point, lanepool_lane_t *lane, long arg) {
  (void)lane;
  (void)arg;
  if (strcmp(point, "boost_end") == 0) {
    atomic_store(&end_inside, 1);
    while (!atomic_load(&end_release)) {
      nap_us(1000);
    }
  } else if (strcmp(point, "calls_wait") == 0) {
    atomic_store(&destroy_waits, 1);
  }
}

static void *end_boost_thread(void *arg) {
  lanepool_lane_boost_end(arg);
  return NULL;
}

typedef struct {
  lanepool_t *pool;
  _Atomic int done;
  int rc;
} destroy_arg;

static void *destroy_pool_thread(void *arg) {
  destroy_arg *d = arg;
  d->rc = lanepool_destroy(d->pool);
  atomic_store(&d->done, 1);
  return NULL;
}

/* Starts `holder` on a thread (it enters a call on `pool` and stops at a test point,
 * setting *inside), then destroy on another: destroy must wait for the held call
 * (reach calls_wait, not return); then lets the holder go (*release) and joins both.
 * Returns destroy's answer. */
static int destroy_while_held(lanepool_t *pool, void *(*holder)(void *), void *arg,
                              _Atomic int *inside, _Atomic int *release) {
  pthread_t held, destroyer;
  pthread_create(&held, NULL, holder, arg);
  bool in = false;
  POLL_WHILE(!(in = atomic_load(inside)));
  CHECK(in);
  destroy_arg d = {pool, 0, -1};
  pthread_create(&destroyer, NULL, destroy_pool_thread, &d);
  /* Either destroy waits for the call (right), or it returns and freed the lane under
   * it (wrong: the call then touches freed memory, which ASan reports). */
  POLL_WHILE(!atomic_load(&destroy_waits) && !atomic_load(&d.done));
  CHECK(atomic_load(&destroy_waits) && !atomic_load(&d.done));
  atomic_store(release, 1);
  pthread_join(held, NULL);
  pthread_join(destroyer, NULL);
  atomic_store(&lanepool__test_point, NULL);
  return d.rc;
}

static void test_boost_end_racing_destroy(void) {
  current_test = "boost_end_racing_destroy";
  atomic_store(&end_inside, 0);
  atomic_store(&end_release, 0);
  atomic_store(&destroy_waits, 0);
  lanepool_t *pool = escalation_pool("esc10");
  lanepool_lane_t *bg = lane_of(pool, LANEPOOL_QOS_BACKGROUND);
  lanepool_boost_t b;
  CHECK_RC(lanepool_lane_boost_begin(bg, LANEPOOL_QOS_USER_INTERACTIVE, &b), 0);
  CHECK(b.band_plus_one != 0);
  atomic_store(&lanepool__test_point, end_point);
  CHECK_RC(destroy_while_held(pool, end_boost_thread, &b, &end_inside, &end_release), 0);
}

/* ---- lanepool_destroy waits for a refused sync that still holds its escalation (a use
 * after free before: the sync touched the lane's boost counts outside any registered
 * call, after its push was refused) ---- */

static _Atomic int refused_inside, refused_release;

static void refused_point(const char *point, lanepool_lane_t *lane, long arg) {
  (void)lane;
  (void)arg;
  if (strcmp(point, "sync_refused") == 0) {
    atomic_store(&refused_inside, 1);
    while (!atomic_load(&refused_release)) {
      nap_us(1000);
    }
  } else if (strcmp(point, "calls_wait") == 0) {
    atomic_store(&destroy_waits, 1);
  }
}

static void nothing(void *ctx) { (void)ctx; }

typedef struct {
  lanepool_lane_t *lane;
  int rc, entered;
} refused_sync_arg;

static void *refused_sync_thread(void *arg) {
  refused_sync_arg *a = arg;
  lanepool_band_token_t t;
  a->entered = lanepool_thread_enter_band(LANEPOOL_QOS_USER_INTERACTIVE, 0, &t);
  a->rc = lanepool_lane_sync_flags(a->lane, nothing, NULL, LANEPOOL_SYNC_QUEUED);
  if (a->entered == 0) (void)lanepool_thread_restore(&t);
  return NULL;
}

static void test_refused_sync_racing_destroy(void) {
  current_test = "refused_sync_racing_destroy";
  atomic_store(&refused_inside, 0);
  atomic_store(&refused_release, 0);
  atomic_store(&destroy_waits, 0);
  lanepool_t *pool = escalation_pool("esc12");
  lanepool_lane_t *bg = lane_of(pool, LANEPOOL_QOS_BACKGROUND);
  CHECK_RC(lanepool_shutdown(pool, LANEPOOL_SHUTDOWN_DRAIN, NULL, NULL), 0);
  atomic_store(&lanepool__test_point, refused_point);
  refused_sync_arg a = {bg, -1, -1};
  CHECK_RC(destroy_while_held(pool, refused_sync_thread, &a, &refused_inside, &refused_release), 0);
  CHECK_RC(a.rc, ESHUTDOWN);
}

/* ---- a boost that cannot change anything costs no system call: unprivileged, a
 * default lane boosted to a userInteractive band that differs only by a nice it may not
 * have (5 to 7 scheduling calls per sync before, whatever they could achieve) ---- */

static _Atomic int sched_syscalls;
static void count_syscalls(const char *point, lanepool_lane_t *lane, long arg) {
  (void)lane;
  (void)arg;
  if (strcmp(point, "sched_syscall") == 0) atomic_fetch_add(&sched_syscalls, 1);
}

static void test_boost_changing_nothing(void) {
  current_test = "boost_changing_nothing";
  if (mode == MODE_ROOT) return; /* root gets nice -5: the boost changes something */
  lanepool_config_t cfg;
  lanepool_config_init(&cfg);
  cfg.name = "esc11";
  cfg.lanes_per_band = 1;
  cfg.policy[0] = cfg.policy[2];
  cfg.policy[0].nice = -5;
  lanepool_t *pool = NULL;
  CHECK_RC(lanepool_create(&cfg, &pool), 0);
  lanepool_lane_t *def = lane_of(pool, LANEPOOL_QOS_DEFAULT);
  pid_t tid = tid_of(def);
  lanepool_band_token_t t;
  t.struct_size = sizeof t;
  CHECK_RC(lanepool_thread_enter_band(LANEPOOL_QOS_USER_INTERACTIVE, 0, &t), 0);
  seen_t seen = {99, -1, 0};
  CHECK_RC(lanepool_lane_sync_flags(def, see_own, &seen, LANEPOOL_SYNC_QUEUED), 0); /* learns */
  atomic_store(&sched_syscalls, 0);
  atomic_store(&lanepool__test_point, count_syscalls);
  for (int i = 0; i < 50; i++)
    CHECK_RC(lanepool_lane_sync_flags(def, see_own, &seen, LANEPOOL_SYNC_QUEUED), 0);
  atomic_store(&lanepool__test_point, NULL);
  CHECK_RC(lanepool_thread_restore(&t), 0);
  CHECK(atomic_load(&sched_syscalls) == 0);
  if (atomic_load(&sched_syscalls))
    fprintf(stderr, "[%s] %d scheduling system calls for 50 syncs\n", current_test,
            atomic_load(&sched_syscalls));
  CHECK(seen.nice == 0 && seen.policy == SCHED_OTHER);
  CHECK(nice_of(tid) == 0 && policy_of(tid) == SCHED_OTHER && unboosted(def));
  CHECK_RC(lanepool_destroy(pool), 0);
}

/* ---- many waiters of every band at once: syncs, boosts held and ended, waits that
 * time out; afterwards nothing is counted and the lane is at its own band ---- */

enum { STORM_THREADS = 6, STORM_ROUNDS = 300 };

typedef struct {
  lanepool_lane_t *bg;
  unsigned seed;
  int bad;
} storm_t;

static void storm_noop(void *ctx) { (void)ctx; }

static void *storm_thread(void *arg) {
  storm_t *st = arg;
  lanepool_band_token_t t;
  for (int r = 0; r < STORM_ROUNDS; r++) {
    unsigned x = rand_r(&st->seed);
    lanepool_qos_t q = (lanepool_qos_t[]){LANEPOOL_QOS_USER_INTERACTIVE,
                                          LANEPOOL_QOS_USER_INITIATED, LANEPOOL_QOS_DEFAULT,
                                          LANEPOOL_QOS_UTILITY, LANEPOOL_QOS_BACKGROUND}[x % 5];
    switch ((x / 5) % 3) {
    case 0: /* a sync, as a thread of band q */
      if (lanepool_thread_enter_band(q, 0, &t) != 0) st->bad++;
      if (lanepool_lane_sync_flags(st->bg, storm_noop, NULL, (x & 64) ? LANEPOOL_SYNC_QUEUED : 0))
        st->bad++;
      if (lanepool_thread_restore(&t) != 0) st->bad++;
      break;
    case 1: { /* a boost held over a wait that times out */
      lanepool_boost_t b;
      if (lanepool_lane_boost_begin(st->bg, q, &b) != 0) st->bad++;
      struct timespec ts = {0, (long)(x % 200) * 1000};
      nanosleep(&ts, NULL);
      if (lanepool_lane_boost_end(&b) != 0) st->bad++;
      break;
    }
    default: /* plain work on the lane */
      if (lanepool_lane_async(st->bg, storm_noop, NULL) != 0) st->bad++;
      break;
    }
  }
  return NULL;
}

static void test_escalation_storm(void) {
  current_test = "escalation_storm";
  lanepool_t *pool = escalation_pool("esc6");
  lanepool_lane_t *bg = lane_of(pool, LANEPOOL_QOS_BACKGROUND);
  pthread_t th[STORM_THREADS];
  storm_t st[STORM_THREADS];
  for (int i = 0; i < STORM_THREADS; i++) {
    st[i] = (storm_t){bg, 1234u + (unsigned)i, 0};
    pthread_create(&th[i], NULL, storm_thread, &st[i]);
  }
  int bad = 0;
  for (int i = 0; i < STORM_THREADS; i++) {
    pthread_join(th[i], NULL);
    bad += st[i].bad;
  }
  CHECK(bad == 0);
  /* Every sync returned and every boost ended: the lane is back, nothing counted. */
  CHECK(bg_at_own_band(bg));
  seen_t seen = {99, -1, 0};
  CHECK_RC(lanepool_lane_sync_flags(bg, see_own, &seen,
                                    LANEPOOL_SYNC_QUEUED | LANEPOOL_SYNC_NO_ESCALATION),
           0);
  CHECK(seen.nice == 10 && seen.policy == SCHED_BATCH);
  atomic_store(&log_lines, 0);
  CHECK_RC(lanepool_destroy(pool), 0);
}


/* ---- the log callback runs with no lock held: it may boost the very lane it is told
 * about (before, it ran under that lane's escalation lock: a self-deadlock) ---- */

static lanepool_lane_t *log_reentry_lane;
static _Atomic int log_reentries;

static void reentrant_log(lanepool_log_level_t level, const char *msg, void *arg) {
  (void)level;
  (void)arg;
  if (!strstr(msg, "escalation") || !log_reentry_lane) return;
  lanepool_boost_t b;
  if (lanepool_lane_boost_begin(log_reentry_lane, LANEPOOL_QOS_USER_INTERACTIVE, &b) == 0)
    lanepool_lane_boost_end(&b);
  atomic_fetch_add(&log_reentries, 1);
}

static void test_log_callback_reenters(void) {
  current_test = "log_callback_reenters";
  lanepool_config_t cfg;
  lanepool_config_init(&cfg);
  cfg.name = "esc7";
  cfg.lanes_per_band = 1;
  cfg.log = reentrant_log;
  lanepool_t *pool = NULL;
  CHECK_RC(lanepool_create(&cfg, &pool), 0);
  log_reentry_lane = lane_of(pool, LANEPOOL_QOS_BACKGROUND);
  atomic_store(&log_reentries, 0);
  alarm(60); /* a deadlock ends the process (SIGALRM): a failure, not a hang */
  lanepool_boost_t b;
  CHECK_RC(lanepool_lane_boost_begin(log_reentry_lane, LANEPOOL_QOS_USER_INITIATED, &b), 0);
  CHECK_RC(lanepool_lane_boost_end(&b), 0);
  alarm(0);
  /* Only a limited boost logs: without privilege. */
  CHECK(atomic_load(&log_reentries) == (mode == MODE_ROOT ? 0 : 1));
  CHECK(bg_at_own_band(log_reentry_lane));
  log_reentry_lane = NULL;
  CHECK_RC(lanepool_destroy(pool), 0);
}


/* ---- a log callback that destroys the pool while a sync on it logs its limited boost:
 * EDEADLK (before, destroy freed the lane under the sync: ASan use after free) ---- */

static lanepool_t *log_destroy_pool;
static _Atomic int log_destroy_rc = -1;

static void destroying_log(lanepool_log_level_t level, const char *msg, void *arg) {
  (void)level;
  (void)arg;
  if (!strstr(msg, "escalation") || !log_destroy_pool) return;
  atomic_store(&log_destroy_rc, lanepool_destroy(log_destroy_pool));
}

static void test_log_callback_destroys(void) {
  current_test = "log_callback_destroys";
  if (mode == MODE_ROOT) return; /* only a limited boost logs */
  lanepool_config_t cfg;
  lanepool_config_init(&cfg);
  cfg.name = "esc13";
  cfg.lanes_per_band = 1;
  cfg.log = destroying_log;
  lanepool_t *pool = NULL;
  CHECK_RC(lanepool_create(&cfg, &pool), 0);
  log_destroy_pool = pool;
  atomic_store(&log_destroy_rc, -1);
  lanepool_band_token_t t;
  CHECK_RC(lanepool_thread_enter_band(LANEPOOL_QOS_USER_INTERACTIVE, 0, &t), 0);
  CHECK_RC(lanepool_lane_sync_flags(lane_of(pool, LANEPOOL_QOS_BACKGROUND), nothing, NULL,
                                    LANEPOOL_SYNC_QUEUED),
           0);
  CHECK_RC(lanepool_thread_restore(&t), 0);
  log_destroy_pool = NULL;
  CHECK_RC(atomic_load(&log_destroy_rc), EDEADLK);
  CHECK_RC(lanepool_destroy(pool), 0);
}

/* ---- a fork inside a boosted closure: the child (a copy of the lane thread, which
 * exits when the closure returns) never touches the parent's lane: the parent's lane
 * thread is still boosted after the child has gone ---- */

static void fork_inside(void *ctx) {
  seen_t *seen = ctx;
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) return; /* the child: back to the lane loop, which _exits */
  int status = 0;
  waitpid(pid, &status, 0);
  see_own(seen);
}

static void test_fork_in_boosted_closure(void) {
  current_test = "fork_in_boosted_closure";
  lanepool_t *pool = escalation_pool("esc8");
  lanepool_lane_t *bg = lane_of(pool, LANEPOOL_QOS_BACKGROUND);
  lanepool_band_token_t t;
  CHECK_RC(lanepool_thread_enter_band(LANEPOOL_QOS_USER_INTERACTIVE, 0, &t), 0);
  seen_t seen = {99, -1, 0};
  CHECK_RC(lanepool_lane_sync_flags(bg, fork_inside, &seen, LANEPOOL_SYNC_QUEUED), 0);
  CHECK_RC(lanepool_thread_restore(&t), 0);
  CHECK(seen.nice == boosted_nice(0) && seen.policy == boosted_policy(0));
  CHECK(bg_at_own_band(bg));
  CHECK_RC(lanepool_destroy(pool), 0);
}

static void run_suite(void) {
  test_enter_restore();
  test_enter_bad_input();
  test_nice_floor();
  test_escalate_from_lanes();
  test_waiter_runs_the_queue();
  test_helper_nested_counts();
  test_escalate_busy_lane();
  test_boost_begin_end();
  test_nice_shift();
  test_nice_drops_vs_custom_default();
  test_boost_if_busy();
  test_boost_if_busy_own_lane();
  test_escalate_cancelled();
  test_escalate_thread_replaced();
  test_helper_thread_ended(false);
  test_helper_thread_ended(true);
  test_inline_chain_counts_the_callers_band();
  test_inline_borrower_boosted();
  test_carrier_io_fallback_never_lowers();
  test_lifted_job_runs_at_its_band();
  test_lifted_carrier_not_lowered();
  test_no_lift_beside_lower_work();
  test_adopting_thread_boosted();
  test_nested_borrower_restored();
  test_nested_borrower_io_restored();
  test_chain_rewalked(true);
  test_chain_rewalked(false);
  test_realtime_boost_keeps_slack();
  test_chain_in_fork_child();
  test_restore_keeps_reset_on_fork();
  test_restore_in_fork_child();
  test_boost_after_the_thread_left();
  test_boost_end_racing_destroy();
  test_refused_sync_racing_destroy();
  test_boost_changing_nothing();
  test_escalation_storm();
  test_log_callback_reenters();
  test_log_callback_destroys();
  test_fork_in_boosted_closure();
}

/* Runs the suite in a child dropped to uid 65534 with the given RLIMIT_NICE. */
static int run_unprivileged(mode_t_ m, rlim_t rlimit_nice) {
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    struct rlimit rl = {rlimit_nice, rlimit_nice};
    if (setrlimit(RLIMIT_NICE, &rl) != 0) {
      _exit(3);
    }
    if (setgroups(0, NULL) || setgid(65534) || setuid(65534)) _exit(4);
    mode = m;
    passed = failed = 0;
    run_suite();
    printf("  %s: %d passed, %d failed\n", mode_name[m], passed, failed);
    fflush(NULL);
    _exit(failed ? 1 : 0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

/* band_test [all | root | rlimit0 | rlimit20 | rlimit15]: which of the runs (default all).
 * The RLIMIT_NICE 20 and 15 runs need a root that may raise RLIMIT_NICE's hard limit
 * (CAP_SYS_RESOURCE, which containers drop): scripts/vm-test's guest runs them. */
int main(int argc, char **argv) {
  const char *which = argc > 1 ? argv[1] : "all";
  bool all = strcmp(which, "all") == 0;
  if (!all && strcmp(which, "root") && strcmp(which, "rlimit0") && strcmp(which, "rlimit20") &&
      strcmp(which, "rlimit15")) {
    fprintf(stderr, "usage: band_test [all|root|rlimit0|rlimit20|rlimit15]\n");
    return 2;
  }
  if (setpriority(PRIO_PROCESS, 0, 0) != 0) {
    fprintf(stderr, "cannot start at nice 0\n");
    return 1;
  }
  mode = geteuid() == 0 ? MODE_ROOT : MODE_UNPRIV;
  /* The bands' rescue threads wait 30 s, not 100 ms (LANEPOOL__RESCUE_NS), before they
   * take work nobody took: these tests check which thread ran a job (a lifter, a waiter
   * running a lane's queue, a sibling adopting it), and on a loaded machine a thread slow
   * to get a CPU would otherwise lose the job to the rescue thread. No test here needs it;
   * it still ends, 30 s on, a sync that a defect left waiting (longer than POLL_WHILE's
   * 10 s, so every check has run by then). */
  atomic_store(&lanepool__rescue_ns, UINT64_C(30000000000));
  if (all || !strcmp(which, "root")) {
    run_suite();
    printf("  %s: %d passed, %d failed\n", geteuid() == 0 ? "root" : "this user", passed, failed);
  }
  if (geteuid() == 0) {
    if (all || !strcmp(which, "rlimit0")) {
      int a = run_unprivileged(MODE_UNPRIV, 0);
      if (a == 3 || a == 4) printf("cannot drop to uid 65534 with RLIMIT_NICE 0\n");
      if (a) failed++;
    }
    for (int limit = 20; limit >= 15; limit -= 5) {
      char arg[16];
      snprintf(arg, sizeof arg, "rlimit%d", limit);
      if (!all && strcmp(which, arg)) continue;
      int b = run_unprivileged(limit == 20 ? MODE_UNPRIV_RLIMIT20 : MODE_UNPRIV_RLIMIT15,
                               (rlim_t)limit);
      if (b == 3 && all)
        printf("skip - uid 65534 with RLIMIT_NICE %d: this root may not raise RLIMIT_NICE\n",
               limit);
      else if (b == 3) {
        printf("uid 65534 with RLIMIT_NICE %d asked for, but this root may not raise it\n", limit);
        failed++;
      } else if (b)
        failed++;
    }
  } else {
    printf("skip - the unprivileged children need root to drop from\n");
  }
  /* The closing line counts this process's checks; a child alone printed its own. */
  if (all || !strcmp(which, "root") || failed) printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
