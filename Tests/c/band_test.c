/*
 * band_test.c - bands for threads LanePool does not own (lanepool_thread_enter_band /
 * lanepool_thread_restore) and escalation (a lane runs at the band of the highest
 * caller waiting on it), checked from /proc/self/task/<tid>/stat. Runs three times:
 * as the caller (root in CI), and in child processes dropped to uid 65534 with
 * RLIMIT_NICE 0 and with RLIMIT_NICE 20.
 * Build: cc -std=gnu11 -O2 -pthread -Iinclude Tests/c/band_test.c Sources/CLanePool/(all).c
 */
#define _GNU_SOURCE
#include "lanepool.h"
#include "check.h"

#include <errno.h>
#include <grp.h>
#include <pthread.h>
#include <sched.h>
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
typedef enum { MODE_ROOT, MODE_UNPRIV, MODE_UNPRIV_RLIMIT20 } mode_t_;
static mode_t_ mode;
static const char *mode_name[] = {"root", "uid 65534, RLIMIT_NICE 0", "uid 65534, RLIMIT_NICE 20"};

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
   * RLIMIT_NICE 0 could never come back to nice 0: nice is withheld (the undo rule). */
  long slack0 = slack_now();
  CHECK_RC(lanepool_thread_enter_band(LANEPOOL_QOS_BACKGROUND, 0, &t), 0);
  CHECK(policy_of(me) == SCHED_BATCH && t.sched.got == SCHED_BATCH && t.sched.error == 0);
  CHECK(t.ioprio.got == ((2 << 13) | 7));
  CHECK(slack_now() == 10000000);
  if (mode == MODE_UNPRIV) {
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
  CHECK(nice_of(me) == (mode == MODE_UNPRIV ? 0 : 10));
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

static void run_suite(void) {
  test_enter_restore();
  test_enter_bad_input();
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

int main(void) {
  if (setpriority(PRIO_PROCESS, 0, 0) != 0) {
    fprintf(stderr, "cannot start at nice 0\n");
    return 1;
  }
  mode = geteuid() == 0 ? MODE_ROOT : MODE_UNPRIV;
  run_suite();
  printf("  %s: %d passed, %d failed\n", geteuid() == 0 ? "root" : "this user", passed, failed);
  if (geteuid() == 0) {
    int a = run_unprivileged(MODE_UNPRIV, 0);
    if (a == 3 || a == 4) printf("cannot drop to uid 65534 with RLIMIT_NICE 0\n");
    if (a) failed++;
    /* Raising RLIMIT_NICE's hard limit needs CAP_SYS_RESOURCE, which containers drop. */
    int b = run_unprivileged(MODE_UNPRIV_RLIMIT20, 20);
    if (b == 3)
      printf("skip - uid 65534 with RLIMIT_NICE 20: this root may not raise RLIMIT_NICE\n");
    else if (b)
      failed++;
  } else {
    printf("skip - the unprivileged children need root to drop from\n");
  }
  printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
