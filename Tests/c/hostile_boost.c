/*
 * hostile_boost.c - hostile review of issue 23 (third pass): escalation (band.c's boost
 * path) against the life cycle. Reproducers, not CI tests: each case prints PASS or
 * FAIL with what it saw; under ASan a use after free ends the process with a report.
 *
 * The window is made deterministic by wrapping syscall(2) at link time
 * (-Wl,--wrap=syscall): band.c renices a lane through syscall(SYS_sched_setattr), so
 * the wrapper can hold the calling thread inside that call, as a preemption there
 * would, until the main thread has done its part. Nothing else is changed.
 *
 * Build (from the repository root):
 *   clang -std=gnu11 -g -O1 -pthread -fsanitize=address,undefined -fno-sanitize-recover=all
 *     -Iinclude -ISources/CLanePool -Wl,--wrap=syscall Tests/c/hostile_boost.c
 *     Sources/CLanePool/(every .c) -o /tmp/hostile_boost
 *   /tmp/hostile_boost CASE     CASE: stale-tid | exit-window | log-destroy | sync-refused-destroy |
 *                               sync-boost-destroy | boost-end-destroy
 *
 * Cases:
 *  stale-tid: a lane's thread has exited (the pool is shut down, not destroyed); its
 *    kernel thread id is reused by another thread of the process (pid_max is 32768
 *    here: the test cycles through thread ids until it gets it). A lanepool_lane_sync
 *    from a default-band thread onto the background lane is refused (ESHUTDOWN), as
 *    documented, but on its way boosts and then "restores" the lane's thread id: the
 *    unrelated thread is left at the background band's policy (SCHED_BATCH, nice 10).
 *    lanepool_lane_boost_begin/end on such a lane does the same.
 *  exit-window: a task ends its lane's thread (pthread_exit); until the successor thread
 *    has stored its own id, the lane still names the ended one: a boost in that window
 *    renices a thread id that no longer exists (or, reused, someone else's).
 *  sync-refused-destroy: a sync (default band onto the background lane) that is refused
 *    because the pool is shut down drops its boost after lanepool__call_leave: a destroy
 *    called while that sync is in flight does not wait for it and frees the lane under
 *    it (ASan: heap-use-after-free in lanepool__boost_update / boost_apply).
 *  sync-boost-destroy: the same sync on an open pool, held in the boost it applies
 *    before the push (before lanepool__call_enter): destroy drains, joins and frees; the
 *    sync then pushes onto the freed lane. (LANEPOOL_SYNC_QUEUED, or any busy lane: an
 *    idle lane would be borrowed inline, without a boost.)
 *  log-destroy: the waiter's thread lacks CAP_SYS_NICE (RLIMIT_NICE 0), so the kernel
 *    limits the boost and the pool logs its one line, on the waiter's thread, inside
 *    lanepool_lane_sync, before its push; the log handler destroys the pool (nothing in
 *    the header forbids it there: only the timer thread's log is EDEADLK). destroy
 *    returns 0 (calls_wait skips the caller's own record), and the sync goes on into
 *    the freed lane.
 *  boost-end-destroy: a waiter ends its lanepool_lane_boost_begin boost (its wait is over:
 *    the task it waited for ran) while the pool's owner destroys the pool (it saw the
 *    same task finish): destroy does not wait for lanepool_lane_boost_end.
 */
#define _GNU_SOURCE
#include "lanepool.h"

#include <errno.h>
#include <linux/capability.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>
#include "wrap_syscall.h"

/* ---- the syscall wrapper ------------------------------------------------------- */

long __real_syscall(long n, ...);

static _Atomic pid_t hold_tid;   /* the thread to hold in its next sched_setattr */
static _Atomic int hold_skip;    /* ... after letting this many through */
static _Atomic int held;         /* 1 while held */
static _Atomic int release_held; /* main: go on */

/* exit-window: the successor of a lane thread that ended, held at its gettid (before
 * it stores its thread id in the lane), and the targets of every sched_setattr. */
static char succ_name[16];
static _Atomic pid_t succ_not; /* the exited thread's id: not the successor */
static _Atomic int succ_armed, succ_held, succ_release;
static _Atomic pid_t setattr_target[16];
static _Atomic int setattr_count;

long __wrap_syscall(long n, ...) {
  WRAP_SYSCALL_ARGS(n, a);
  if (n == SYS_sched_setattr) {
    int k = atomic_fetch_add(&setattr_count, 1);
    if (k < 16) atomic_store(&setattr_target[k], (pid_t)a[0]);
  }
  if (n == SYS_gettid && atomic_load(&succ_armed)) {
    char name[16] = "";
    (void)prctl(PR_GET_NAME, name, 0, 0, 0);
    if (!strcmp(name, succ_name) && (pid_t)__real_syscall(SYS_gettid) != atomic_load(&succ_not) &&
        atomic_exchange(&succ_armed, 0)) {
      atomic_store(&succ_held, 1);
      while (!atomic_load(&succ_release)) sched_yield();
    }
  }
  if (n == SYS_sched_setattr && atomic_load(&hold_tid) == (pid_t)__real_syscall(SYS_gettid)) {
    if (atomic_fetch_sub(&hold_skip, 1) <= 0) {
      atomic_store(&hold_tid, 0);
      atomic_store(&held, 1);
      while (!atomic_load(&release_held)) sched_yield();
    }
  }
  return __real_syscall(n, a[0], a[1], a[2], a[3], a[4], a[5]);
}

static pid_t gettid_(void) { return (pid_t)__real_syscall(SYS_gettid); }

static void wait_for(_Atomic int *flag) {
  for (long i = 0; !atomic_load(flag); i++) {
    if (i > 20000000) {
      fprintf(stderr, "FAIL: timed out waiting\n");
      exit(2);
    }
    sched_yield();
  }
}

static lanepool_t *make_pool(void) {
  lanepool_config_t cfg;
  lanepool_config_init(&cfg);
  cfg.name = "hostile";
  cfg.lanes_per_band = 1;
  lanepool_t *p = NULL;
  int rc = lanepool_create(&cfg, &p);
  if (rc) {
    fprintf(stderr, "lanepool_create: %s\n", strerror(rc));
    exit(2);
  }
  return p;
}

static lanepool_lane_t *lane_of(lanepool_t *p, lanepool_qos_t qos) {
  lanepool_lane_t *l = NULL;
  if (lanepool_get_lane(p, qos, 0, &l)) abort();
  return l;
}

static void noop(void *ctx) { (void)ctx; }

/* ---- stale-tid ---------------------------------------------------------------- */

static _Atomic pid_t want_tid;
static _Atomic int victim_got, victim_done;
static _Atomic pid_t last_tid;

static void *probe(void *arg) {
  (void)arg;
  pid_t me = gettid_();
  atomic_store(&last_tid, me);
  if (me == atomic_load(&want_tid)) {
    atomic_store(&victim_got, 1);
    while (!atomic_load(&victim_done)) sched_yield();
  }
  return NULL;
}

static void report_sched(const char *when, pid_t tid) {
  printf("  %s: tid %d policy %d nice %d\n", when, (int)tid, sched_getscheduler(tid),
         getpriority(PRIO_PROCESS, (id_t)tid));
}

static int case_stale_tid(void) {
  lanepool_t *pool = make_pool();
  lanepool_lane_t *bg = lane_of(pool, LANEPOOL_QOS_BACKGROUND);
  lanepool_lane_info_t info;
  if (lanepool_lane_info(bg, &info)) abort();
  pid_t stale = info.tid;
  if (lanepool_shutdown(pool, LANEPOOL_SHUTDOWN_DRAIN, NULL, NULL)) abort();
  printf("background lane's thread %d has exited (pool shut down, not destroyed)\n", (int)stale);
  /* Cycle thread ids until one of ours gets the stale one (pid_max permitting). */
  atomic_store(&want_tid, stale);
  pthread_t victim = 0;
  for (long i = 0; i < 200000 && !atomic_load(&victim_got); i++) {
    pthread_t t;
    if (pthread_create(&t, NULL, probe, NULL)) abort();
    for (int k = 0; k < 1000 && !atomic_load(&victim_got) && atomic_load(&last_tid) == 0; k++)
      sched_yield();
    if (atomic_load(&victim_got)) {
      victim = t;
      break;
    }
    pthread_join(t, NULL);
    atomic_store(&last_tid, 0);
  }
  if (!victim) {
    printf("SKIP: thread id %d was not reused by this process (another process took it?)\n",
           (int)stale);
    return 0;
  }
  printf("an unrelated thread of this process now has thread id %d\n", (int)stale);
  report_sched("before", stale);
  int policy0 = sched_getscheduler(stale), nice0 = getpriority(PRIO_PROCESS, (id_t)stale);
  int rc = lanepool_lane_sync(bg, noop, NULL);
  printf("lanepool_lane_sync onto the background lane: %d (%s)\n", rc, strerror(rc));
  report_sched("after", stale);
  int policy1 = sched_getscheduler(stale), nice1 = getpriority(PRIO_PROCESS, (id_t)stale);
  lanepool_boost_t b;
  int rb = lanepool_lane_boost_begin(bg, LANEPOOL_QOS_USER_INTERACTIVE, &b);
  printf("lanepool_lane_boost_begin(userInteractive): %d\n", rb);
  report_sched("while boosted", stale);
  int nice2 = getpriority(PRIO_PROCESS, (id_t)stale);
  (void)lanepool_lane_boost_end(&b);
  report_sched("after boost_end", stale);
  atomic_store(&victim_done, 1);
  pthread_join(victim, NULL);
  if (lanepool_destroy(pool)) abort();
  if (policy1 != policy0 || nice1 != nice0 || nice2 != nice0) {
    printf("FAIL: escalation on a lane whose thread exited changed an unrelated thread "
           "(policy %d -> %d, nice %d -> %d, %d while boosted)\n",
           policy0, policy1, nice0, nice1, nice2);
    return 1;
  }
  printf("PASS\n");
  return 0;
}

/* ---- the destroy races ------------------------------------------------------- */

static lanepool_lane_t *target;
static unsigned sync_flags; /* LANEPOOL_SYNC_QUEUED: never inline on an idle lane */
static _Atomic int waiter_rc = -1;
static _Atomic pid_t waiter_tid;
static lanepool_boost_t waiter_boost;

static void *sync_waiter(void *arg) {
  (void)arg;
  atomic_store(&waiter_tid, gettid_());
  while (atomic_load(&hold_tid) != gettid_()) sched_yield(); /* armed */
  atomic_store(&waiter_rc, lanepool_lane_sync_flags(target, noop, NULL, sync_flags));
  return NULL;
}

static void *boost_waiter(void *arg) {
  (void)arg;
  if (lanepool_lane_boost_begin(target, LANEPOOL_QOS_USER_INTERACTIVE, &waiter_boost)) abort();
  atomic_store(&waiter_tid, gettid_()); /* after begin: only boost_end is held */
  while (atomic_load(&hold_tid) != gettid_()) sched_yield(); /* armed */
  atomic_store(&waiter_rc, lanepool_lane_boost_end(&waiter_boost));
  return NULL;
}

static lanepool_t *race_pool;
static _Atomic int race_destroy_rc = -1;
static void *destroy_thread(void *arg) {
  (void)arg;
  atomic_store(&race_destroy_rc, lanepool_destroy(race_pool));
  return NULL;
}

/* `shut_first`: the pool is shut down before the waiter starts. `skip`: sched_setattr
 * calls of the waiter's to let through before the one that is held. destroy runs on a
 * thread of its own: if it returns while the waiter is held, it did not wait for the
 * call (FAIL, and ASan reports the use after free once the waiter goes on); if it is
 * still waiting after 2 s, the waiter is let go and destroy must then return (PASS). */
static int destroy_race(void *(*waiter)(void *), bool shut_first, int skip, const char *what) {
  lanepool_t *pool = make_pool();
  race_pool = pool;
  target = lane_of(pool, LANEPOOL_QOS_BACKGROUND);
  if (shut_first && lanepool_shutdown(pool, LANEPOOL_SHUTDOWN_DRAIN, NULL, NULL)) abort();
  pthread_t t, d;
  if (pthread_create(&t, NULL, waiter, NULL)) abort();
  while (!atomic_load(&waiter_tid)) sched_yield();
  atomic_store(&hold_skip, skip);
  atomic_store(&hold_tid, atomic_load(&waiter_tid));
  for (long i = 0; !atomic_load(&held); i++) {
    if (i > 2000000) { /* no renice to hold: the call makes no system call there */
      printf("SKIP: %s makes no sched_setattr to hold (nothing to race)\n", what);
      atomic_store(&hold_tid, 0);
      pthread_join(t, NULL);
      return 0;
    }
    sched_yield();
  }
  printf("%s: the waiter is held inside its sched_setattr; destroying the pool\n", what);
  if (pthread_create(&d, NULL, destroy_thread, NULL)) abort();
  struct timespec t0, now;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  do {
    sched_yield();
    clock_gettime(CLOCK_MONOTONIC, &now);
  } while (atomic_load(&race_destroy_rc) == -1 && now.tv_sec - t0.tv_sec < 2);
  int early = atomic_load(&race_destroy_rc);
  atomic_store(&release_held, 1);
  pthread_join(t, NULL);
  pthread_join(d, NULL);
  printf("waiter returned %d, destroy %d\n", atomic_load(&waiter_rc),
         atomic_load(&race_destroy_rc));
  if (early != -1) {
    printf("FAIL: destroy returned (%d) while a call was in flight on its lane\n", early);
    return 1;
  }
  printf("PASS: destroy waited for the call in flight\n");
  return 0;
}

/* ---- log-destroy ------------------------------------------------------------- */

static lanepool_t *log_pool;
static _Atomic int log_destroy_rc = -1;

/* The escalation-limited line arrives on the waiter's thread, inside its
 * lanepool_lane_sync, with no lock held: a log handler that tears the pool down. */
static void log_fn(lanepool_log_level_t level, const char *msg, void *arg) {
  (void)level;
  (void)arg;
  printf("log: %s\n", msg);
  if (atomic_load(&log_destroy_rc) == -1) atomic_store(&log_destroy_rc, lanepool_destroy(log_pool));
}

static void drop_cap_sys_nice(void) { /* this thread only: effective set */
  struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
  struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3];
  memset(data, 0, sizeof data);
  if (__real_syscall(SYS_capget, &hdr, data)) abort();
  data[CAP_SYS_NICE / 32].effective &= ~(1u << (CAP_SYS_NICE % 32));
  if (__real_syscall(SYS_capset, &hdr, data)) abort();
}

static void *log_waiter(void *arg) {
  (void)arg;
  drop_cap_sys_nice();
  atomic_store(&waiter_rc, lanepool_lane_sync_flags(target, noop, NULL, LANEPOOL_SYNC_QUEUED));
  return NULL;
}

static int case_log_destroy(void) {
  lanepool_config_t cfg;
  lanepool_config_init(&cfg);
  cfg.name = "hostile-log";
  cfg.lanes_per_band = 1;
  cfg.log = log_fn;
  if (lanepool_create(&cfg, &log_pool)) abort();
  target = lane_of(log_pool, LANEPOOL_QOS_BACKGROUND);
  pthread_t t;
  if (pthread_create(&t, NULL, log_waiter, NULL)) abort();
  pthread_join(t, NULL);
  printf("destroy from the log handler: %d; the sync returned %d\n", atomic_load(&log_destroy_rc),
         atomic_load(&waiter_rc));
  if (atomic_load(&log_destroy_rc) == 0) {
    printf("FAIL: destroy freed the pool under the sync that called the handler (ASan: use "
           "after free above, unless the build has no ASan)\n");
    return 1;
  }
  printf("PASS (destroy refused: %d)\n", atomic_load(&log_destroy_rc));
  return 0;
}

/* ---- exit-window ------------------------------------------------------------- */

static void exit_task(void *ctx) {
  (void)ctx;
  pthread_exit(NULL);
}

static bool thread_alive(pid_t tid) {
  char path[64];
  struct stat st;
  snprintf(path, sizeof path, "/proc/self/task/%d", (int)tid);
  return stat(path, &st) == 0;
}

static int case_exit_window(void) {
  lanepool_t *pool = make_pool();
  lanepool_lane_t *bg = lane_of(pool, LANEPOOL_QOS_BACKGROUND);
  lanepool_lane_info_t info;
  if (lanepool_lane_info(bg, &info)) abort();
  pid_t old = info.tid;
  memcpy(succ_name, info.thread_name, sizeof succ_name);
  atomic_store(&succ_not, old);
  atomic_store(&succ_armed, 1);
  if (lanepool_lane_async(bg, exit_task, NULL)) abort();
  wait_for(&succ_held);
  for (long i = 0; thread_alive(old); i++) {
    if (i > 20000000) {
      fprintf(stderr, "FAIL: the lane's first thread never exited\n");
      return 2;
    }
    sched_yield();
  }
  printf("lane thread %d ended (pthread_exit in a task); its successor is not running yet\n",
         (int)old);
  atomic_store(&setattr_count, 0);
  lanepool_boost_t b;
  if (lanepool_lane_boost_begin(bg, LANEPOOL_QOS_USER_INTERACTIVE, &b)) abort();
  int n = atomic_load(&setattr_count);
  bool stale = false;
  for (int k = 0; k < n && k < 16; k++) {
    pid_t t = atomic_load(&setattr_target[k]);
    printf("boost: sched_setattr on tid %d (%s)\n", (int)t,
           t == old ? "the thread that ended" : "other");
    stale |= t == old;
  }
  (void)lanepool_lane_boost_end(&b);
  atomic_store(&succ_release, 1);
  if (lanepool_destroy(pool)) abort();
  if (stale) {
    printf("FAIL: the boost went to the id of a thread that had ended (a reused id would be "
           "reniced: see stale-tid)\n");
    return 1;
  }
  printf("PASS\n");
  return 0;
}

int main(int argc, char **argv) {
  const char *c = argc > 1 ? argv[1] : "";
  if (!strcmp(c, "stale-tid")) return case_stale_tid();
  if (!strcmp(c, "log-destroy")) return case_log_destroy();
  if (!strcmp(c, "exit-window")) return case_exit_window();
  /* refused sync: boost_update (1st setattr, before the push), push ESHUTDOWN, then
   * boost_leave after call_leave: hold the 2nd. */
  if (!strcmp(c, "sync-refused-destroy"))
    return destroy_race(sync_waiter, true, 1, "refused sync, in its boost_leave");
  sync_flags = LANEPOOL_SYNC_QUEUED; /* an idle lane would be borrowed, not boosted */
  if (!strcmp(c, "sync-boost-destroy"))
    return destroy_race(sync_waiter, false, 0, "sync, in the boost before its push");
  if (!strcmp(c, "boost-end-destroy"))
    return destroy_race(boost_waiter, false, 0, "lanepool_lane_boost_end");
  fprintf(stderr, "usage: %s stale-tid|sync-refused-destroy|sync-boost-destroy|boost-end-destroy\n",
          argv[0]);
  return 2;
}
