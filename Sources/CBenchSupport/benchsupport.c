#define _GNU_SOURCE
#include "benchsupport.h"

#include <errno.h>
#include <sched.h>

int lpb_allowed_cpus(int *out, int max) {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return 0;
  int n = 0;
  for (int c = 0; c < CPU_SETSIZE && n < max; c++)
    if (CPU_ISSET(c, &set)) out[n++] = c;
  return n;
}

int lpb_set_affinity(const int *cpus, int count) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int i = 0; i < count; i++) CPU_SET(cpus[i], &set);
  return sched_setaffinity(0, sizeof set, &set) == 0 ? 0 : errno;
}
