#define _GNU_SOURCE
#include "testsupport.h"

#include <errno.h>
#include <grp.h>
#include <malloc.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

int lp_test_ioprio_get(int tid) { return (int)syscall(SYS_ioprio_get, 1 /* WHO_PROCESS */, tid); }

long lp_test_timer_slack(void) { return prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0); }

int lp_test_current_cpu(void) { return sched_getcpu(); }

int lp_test_affinity(int tid, int *first) {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(tid, sizeof set, &set) != 0) return -1;
  *first = -1;
  for (int c = 0; c < CPU_SETSIZE; c++)
    if (CPU_ISSET(c, &set)) {
      *first = c;
      break;
    }
  return CPU_COUNT(&set);
}

int lp_test_pin_self(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return sched_setaffinity(0, sizeof set, &set) == 0 ? 0 : errno;
}

int lp_test_drop_privileges(unsigned uid, unsigned gid) {
  struct rlimit none = {0, 0}; /* RLIMIT_NICE 0: may only raise nice, as the tests expect */
  if (setrlimit(RLIMIT_NICE, &none) != 0) return errno;
  if (setgroups(0, NULL) != 0) return errno;
  if (setgid(gid) != 0) return errno;
  if (setuid(uid) != 0) return errno;
  return 0;
}

int lp_test_set_own_nice(int nice) { return setpriority(PRIO_PROCESS, 0, nice) == 0 ? 0 : errno; }

size_t lp_test_heap_in_use(void) {
  struct mallinfo2 m = mallinfo2();
  return m.uordblks + m.hblkhd;
}

int lp_test_gettid(void) { return (int)syscall(SYS_gettid); }
#ifdef LANEPOOL_TEST_INJECT
/* The core's internals (inject.h's hook, the pool's state word): test builds only. */
#include "../../Sources/CLanePool/internal.h"
_Static_assert(LP_TEST_AT_WAKE == LANEPOOL__AT_WAKE, "inject point numbers moved");
_Static_assert(LP_TEST_AT_QUIESCENT == LANEPOOL__AT_QUIESCENT, "inject point numbers moved");

int lp_test_inject_configure(uint64_t seed, uint32_t sleep_us) {
  lanepool__inject_configure(seed, sleep_us);
  return 1;
}

static void (*swift_hook)(int);
static void call_swift_hook(int point, void *arg) {
  (void)arg;
  swift_hook(point);
}
int lp_test_inject_set_hook(void (*hook)(int point)) {
  lanepool__inject_set_hook(NULL, NULL);
  swift_hook = hook;
  if (hook) lanepool__inject_set_hook(call_swift_hook, NULL);
  return 1;
}

int lp_test_pool_cancelling(const void *pool) {
  return atomic_load(&((const lanepool_t *)pool)->state) == LANEPOOL__LIFE_CANCELLING;
}

int lp_test_lane_parked(const void *lane, int tid) {
  if (atomic_load(&((const lanepool_lane_t *)lane)->sleeping) != 1) return 0; /* PARKED */
  char path[64], buf[512];
  snprintf(path, sizeof path, "/proc/self/task/%d/stat", tid);
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = 0;
  char *close = strrchr(buf, ')');
  return close && close[1] == ' ' && close[2] == 'S';
}

uint64_t lp_test_inject_hits_total(void) {
  uint64_t n = 0;
  for (int i = 0; i < 64; i++) n += lanepool__inject_hits(i); /* 0 past the last point */
  return n;
}
#else
int lp_test_inject_configure(uint64_t seed, uint32_t sleep_us) {
  (void)seed;
  (void)sleep_us;
  return 0;
}

uint64_t lp_test_inject_hits_total(void) { return 0; }

int lp_test_inject_set_hook(void (*hook)(int point)) {
  (void)hook;
  return 0;
}

int lp_test_pool_cancelling(const void *pool) {
  (void)pool;
  return 0;
}

int lp_test_lane_parked(const void *lane, int tid) {
  (void)lane;
  (void)tid;
  return 0;
}
#endif
