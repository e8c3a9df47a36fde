/*
 * w2_placement - W2 (two producers, lane-bound tiny tasks, round-robin over the two lanes
 * of the userInitiated band) with the threads' CPUs chosen, to tell LanePool's cost
 * apart from where the kernel happens to put four busy threads on two CPUs (the bench's
 * W2 rows move 2x between runs with the same binary). Prints tasks per second per round.
 *
 *   w2_placement float|shared|split [rounds, default 12] [tasks per producer, 500000]
 *     float:  nothing pinned (what lanepool-bench does)
 *     shared: producer i and lane i on CPU i (each CPU runs a producer and a lane)
 *     split:  both producers on the first allowed CPU, both lanes on the second
 * Environment: W2_BAND_FIRST=1 runs a round of band work (lanepool_async) on the same
 * pool before each lane-bound round, as the bench's C band row precedes its C fn row.
 * W2_PRODUCERS=1: one producer of all the tasks (W1's shape; pinned as producer 0).
 * W2_BAND=1: band work only (the bench's C band row), its rounds printed.
 * Needs 2 allowed CPUs. scripts/w2-placement builds it against two revisions.
 */
#define _GNU_SOURCE
#include "lanepool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { FLOAT, SHARED, SPLIT };
static lanepool_t *pool;
static int placement, cpus[2];
static bool band_work;
static _Atomic long done;
static long target;

static void tick(void *ctx) {
  (void)ctx;
  atomic_fetch_add_explicit(&done, 1, memory_order_relaxed);
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

typedef struct {
  long tasks;
  int index;
} producer_t;

static void *produce(void *arg) {
  producer_t *p = arg;
  if (placement != FLOAT) pin(placement == SHARED ? cpus[p->index] : cpus[0]);
  for (long i = 0; i < p->tasks; i++) {
    int rc;
    if (band_work) {
      rc = lanepool_async(pool, LANEPOOL_QOS_USER_INITIATED, tick, NULL);
    } else {
      lanepool_lane_t *lane;
      lanepool_next_lane(pool, LANEPOOL_QOS_USER_INITIATED, &lane);
      rc = lanepool_lane_async(lane, tick, NULL);
    }
    if (rc) {
      fprintf(stderr, "w2_placement: submit refused (%d)\n", rc);
      exit(1);
    }
  }
  return NULL;
}

static bool one_producer; /* W2_PRODUCERS=1: W1's shape */

/* Tasks per second (millions) for two producers of `tasks` each (or one of 2 * tasks). */
static double round_mps(long tasks, bool band) {
  band_work = band;
  atomic_store(&done, 0);
  target = 2 * tasks;
  producer_t a = {one_producer ? 2 * tasks : tasks, 0}, b = {tasks, 1};
  pthread_t other;
  double t0 = now_s();
  if (!one_producer) pthread_create(&other, NULL, produce, &b);
  produce(&a);
  if (!one_producer) pthread_join(other, NULL);
  while (atomic_load(&done) < target) sched_yield();
  return (double)target / (now_s() - t0) / 1e6;
}

int main(int argc, char **argv) {
  const char *how = argc > 1 ? argv[1] : "float";
  placement = !strcmp(how, "shared") ? SHARED : !strcmp(how, "split") ? SPLIT : FLOAT;
  if (placement == FLOAT && strcmp(how, "float")) {
    fprintf(stderr, "usage: w2_placement float|shared|split [rounds] [tasks per producer]\n");
    return 2;
  }
  int rounds = argc > 2 ? atoi(argv[2]) : 12;
  long tasks = argc > 3 ? atol(argv[3]) : 500000;
  int allowed[64];
  uint32_t n = 0;
  if (lanepool_allowed_cpus(allowed, 64, &n) || n < 2) {
    fprintf(stderr, "w2_placement: needs 2 allowed CPUs\n");
    return 2;
  }
  cpus[0] = allowed[0];
  cpus[1] = allowed[1];
  lanepool_config_t cfg;
  lanepool_config_init(&cfg);
  cfg.name = "w2p";
  cfg.lanes_per_band = 2;
  int lane_cpus[2] = {cpus[1], cpus[1]};
  if (placement == SHARED) {
    cfg.placement = LANEPOOL_PLACEMENT_CPU_LIST; /* lane i on CPU i */
    cfg.cpus = cpus;
    cfg.cpu_count = 2;
  } else if (placement == SPLIT) {
    cfg.placement = LANEPOOL_PLACEMENT_CPU_LIST;
    cfg.cpus = lane_cpus;
    cfg.cpu_count = 2;
  }
  int rc = lanepool_create(&cfg, &pool);
  if (rc) {
    fprintf(stderr, "w2_placement: lanepool_create: %d\n", rc);
    return 1;
  }
  const char *np = getenv("W2_PRODUCERS");
  one_producer = np && !strcmp(np, "1");
  const char *bf = getenv("W2_BAND_FIRST"), *bo = getenv("W2_BAND");
  bool band_first = bf && !strcmp(bf, "1"), band_only = bo && !strcmp(bo, "1");
  printf("w2_placement %s: M tasks/s per round:", how);
  for (int r = 0; r < rounds; r++) {
    if (band_first && !band_only) (void)round_mps(tasks, true);
    printf(" %.1f", round_mps(tasks, band_only));
    fflush(stdout);
  }
  printf("\n");
  lanepool_destroy(pool);
  return 0;
}
