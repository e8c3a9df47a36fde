/*
 * trace_smoke.c - a small traced run for scripts/trace-export's check in CI: lane-bound
 * tasks on every lane of a band, band jobs, queued syncs, band jobs that sync onto a lane
 * and wait for lane-bound work on the lane whose thread runs them (so that another thread
 * adopts that lane's queue), then a drain. Prints the number of tasks it ran, each of
 * which the trace must show once:
 *
 *   cc -DLANEPOOL_TRACE ... Tests/c/trace_smoke.c Sources/CLanePool/(all).c -o trace_smoke
 *   LANEPOOL_TRACE_FILE=/tmp/t.txt ./trace_smoke   # prints "tasks N"
 *   scripts/trace-export /tmp/t.txt --check --runs N
 */
#include "lanepool.h"

#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

static _Atomic int ran;

static void task(void *ctx) {
  atomic_fetch_add(&ran, 1);
  if (ctx) atomic_store((_Atomic int *)ctx, 1);
}

static lanepool_t *pool;

/* A band job that queues a task on the lane of its own thread and waits for it: another
 * thread of the band runs that lane's queue (adopted). */
static void waits_for_own_lane(void *ctx) {
  lanepool_lane_t *mine = NULL;
  if (lanepool_current_lane(&mine) != 0) abort();
  _Atomic int done = 0;
  if (lanepool_lane_async(mine, task, (void *)&done) != 0) abort();
  while (!atomic_load(&done)) sched_yield();
  task(ctx);
}

int main(void) {
  lanepool_config_t cfg;
  lanepool_config_init(&cfg);
  cfg.name = "trace";
  cfg.lanes_per_band = 2;
  if (lanepool_create(&cfg, &pool)) return 1;
  int want = 0;
  for (uint32_t i = 0; i < 2; i++) {
    lanepool_lane_t *lane;
    if (lanepool_get_lane(pool, LANEPOOL_QOS_DEFAULT, i, &lane)) return 1;
    for (int k = 0; k < 200; k++, want++)
      if (lanepool_lane_async(lane, task, NULL)) return 1;
    for (int k = 0; k < 20; k++, want++)
      if (lanepool_lane_sync_flags(lane, task, NULL, LANEPOOL_SYNC_QUEUED)) return 1;
  }
  for (int k = 0; k < 300; k++, want++)
    if (lanepool_async(pool, LANEPOOL_QOS_UTILITY, task, NULL)) return 1;
  /* One at a time: a band of two lanes and its rescue thread are three threads, and
   * band jobs that each block until work on their own thread's lane ran can take all
   * three (docs/architecture.md, "The rescue thread": one more thread, not a pool). */
  for (int k = 0; k < 10; k++, want += 2) {
    _Atomic int done = 0;
    if (lanepool_async(pool, LANEPOOL_QOS_DEFAULT, waits_for_own_lane, (void *)&done)) return 1;
    while (!atomic_load(&done)) sched_yield();
  }
  if (lanepool_destroy(pool)) return 1;
  if (atomic_load(&ran) != want) {
    fprintf(stderr, "trace_smoke: %d tasks ran, want %d\n", atomic_load(&ran), want);
    return 1;
  }
  printf("tasks %d\n", want);
  return 0;
}
