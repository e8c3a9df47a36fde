/*
 * wake_yield.c - what yield_to_waker (lane.c, "Park and wake") does to a hand-off
 * between two lanes: one task at a time ping-pongs between lane 0 and lane 1 of the
 * default band (each task pushes the next onto the other lane, which is often parked and
 * woken), `hops` times. Prints the nanoseconds per hop and how many wake-ups yielded to
 * their waker (lane info yields_to_waker). For a before/after, build the same tree with
 * yield_to_waker returning 0 at once. Not part of the library or of CI.
 *
 *   cc -O2 -pthread -Iinclude Tests/perf/wake_yield.c Sources/CLanePool/(all).c \
 *      -o wake_yield && ./wake_yield [hops]      (default 200000)
 */
#define _GNU_SOURCE
#include "lanepool.h"

#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static lanepool_lane_t *lanes[2];
static _Atomic long left;
static _Atomic int done;

/* arg: the index of the lane the next hop goes to. */
static void hop(void *arg) {
  uintptr_t to = (uintptr_t)arg;
  if (atomic_fetch_sub(&left, 1) <= 1) {
    atomic_store(&done, 1);
    return;
  }
  if (lanepool_lane_async(lanes[to], hop, (void *)(1 - to)) != 0) {
    fprintf(stderr, "wake_yield: a push failed\n");
    exit(1);
  }
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
  long hops = argc > 1 ? atol(argv[1]) : 200000;
  lanepool_config_t cfg;
  lanepool_config_init(&cfg);
  cfg.name = "wy";
  cfg.lanes_per_band = 2;
  lanepool_t *pool = NULL;
  if (lanepool_create(&cfg, &pool) != 0) return 2;
  for (uint32_t i = 0; i < 2; i++)
    if (lanepool_get_lane(pool, LANEPOOL_QOS_DEFAULT, i, &lanes[i]) != 0) return 2;
  atomic_store(&left, hops);
  double t0 = now_s();
  if (lanepool_lane_async(lanes[0], hop, (void *)1) != 0) return 2;
  while (!atomic_load(&done)) sched_yield();
  double took = now_s() - t0;
  uint64_t yields = 0;
  for (int i = 0; i < 2; i++) {
    lanepool_lane_info_t info;
    if (lanepool_lane_info(lanes[i], &info) != 0) return 2;
    yields += info.yields_to_waker;
  }
  printf("%.0f ns per hop, %llu of %ld wake-ups or fewer yielded to their waker\n",
         took / (double)hops * 1e9, (unsigned long long)yields, hops);
  return lanepool_destroy(pool) == 0 ? 0 : 1;
}
