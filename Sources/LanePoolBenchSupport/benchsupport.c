#define _GNU_SOURCE
#include "benchsupport.h"

#include <errno.h>
#include <sched.h>

int lpb_set_affinity(const int *cpus, int count) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int i = 0; i < count; i++) CPU_SET(cpus[i], &set);
  return sched_setaffinity(0, sizeof set, &set) == 0 ? 0 : errno;
}
