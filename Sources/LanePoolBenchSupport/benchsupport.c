#define _GNU_SOURCE
#include "benchsupport.h"

#include <errno.h>
#include <sched.h>
#include <sys/prctl.h>
#include <time.h>

int lpb_set_affinity(const int *cpus, int count) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int i = 0; i < count; i++) CPU_SET(cpus[i], &set);
  return sched_setaffinity(0, sizeof set, &set) == 0 ? 0 : errno;
}

long lpb_set_timer_slack(unsigned long ns) {
  long old = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
  if (old < 0 || prctl(PR_SET_TIMERSLACK, ns, 0, 0, 0) != 0) return -1;
  return old;
}

void lpb_sleep_ns(uint64_t ns) {
  struct timespec t = {(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)}, rest;
  while (clock_nanosleep(CLOCK_MONOTONIC, 0, &t, &rest) == EINTR) t = rest;
}
