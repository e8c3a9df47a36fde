#define _GNU_SOURCE
#include "testsupport.h"

#include <errno.h>
#include <grp.h>
#include <malloc.h>
#include <sched.h>
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
/* Declared in Sources/CLanePool/inject.h, which is not part of the public header. */
void lanepool__inject_configure(uint64_t seed, uint32_t sleep_us);
uint64_t lanepool__inject_hits(int point);

int lp_test_inject_configure(uint64_t seed, uint32_t sleep_us) {
  lanepool__inject_configure(seed, sleep_us);
  return 1;
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
#endif
