/*
 * w3_probe.c - W3 (wake latency) in C, at nanosecond resolution: a producer busy-waits
 * 20 us between probes and submits each, at most 64 in flight; a probe records the time
 * from its submit to its start. Modes: "band" (lanepool_async) and "lane"
 * (lanepool_next_lane + lanepool_lane_async, as lanepool-bench's "C fn"). Prints, per
 * round, p10 / p50 / p90 / p99 in ns and the submit call's own p50. It uses only API that
 * c3f6dd3 had, so two revisions' cores can be put side by side (docs/bench/set-w) without
 * the Swift bench's other pools and runtime in the process:
 *   cc -O2 -std=gnu11 -pthread -Iinclude Benchmarks/c/w3_probe.c Sources/CLanePool/[a-z]*.c
 *     -o w3_probe && ./w3_probe band 5 20000
 */
#define _GNU_SOURCE
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lanepool.h"

typedef struct {
  _Alignas(64) uint64_t t0, t1; /* submit, start; a line each: no false sharing */
} slot_t;

static _Atomic uint64_t done;

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void probe(void *arg) {
  slot_t *s = arg;
  s->t1 = now_ns();
  atomic_fetch_add_explicit(&done, 1, memory_order_release);
}

static int cmp(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "band";
  int rounds = argc > 2 ? atoi(argv[2]) : 5;
  int samples = argc > 3 ? atoi(argv[3]) : 20000;
  int lane_mode = strcmp(mode, "lane") == 0;
  if ((!lane_mode && strcmp(mode, "band") != 0) || rounds < 1 || samples < 100) {
    fprintf(stderr, "usage: w3_probe band|lane [rounds] [samples >= 100]\n");
    return 2;
  }
  lanepool_config_t cfg;
  lanepool_config_init(&cfg);
  lanepool_t *pool;
  int rc = lanepool_create(&cfg, &pool);
  if (rc) {
    fprintf(stderr, "lanepool_create: %s\n", strerror(rc));
    return 1;
  }
  slot_t *slots = aligned_alloc(64, (size_t)samples * sizeof *slots);
  uint64_t *lat = calloc((size_t)samples, sizeof *lat);
  uint64_t *sub = calloc((size_t)samples, sizeof *sub);
  if (!slots || !lat || !sub) return 1;
  for (int r = 0; r < rounds; r++) {
    atomic_store(&done, 0);
    uint64_t next = now_ns();
    for (int i = 0; i < samples; i++) {
      while ((uint64_t)i - atomic_load_explicit(&done, memory_order_acquire) >= 64) {}
      while (now_ns() < next) {}
      next += 20000;
      slots[i].t0 = now_ns();
      if (lane_mode) {
        lanepool_lane_t *lane;
        rc = lanepool_next_lane(pool, LANEPOOL_QOS_USER_INITIATED, &lane);
        if (!rc) rc = lanepool_lane_async(lane, probe, slots + i);
      } else {
        rc = lanepool_async(pool, LANEPOOL_QOS_USER_INITIATED, probe, slots + i);
      }
      sub[i] = now_ns() - slots[i].t0; /* (not in the slot: the task writes there) */
      if (rc) {
        fprintf(stderr, "submit: %s\n", strerror(rc));
        return 1;
      }
    }
    while (atomic_load_explicit(&done, memory_order_acquire) < (uint64_t)samples) {}
    for (int i = 0; i < samples; i++) lat[i] = sub[i];
    qsort(lat, (size_t)samples, sizeof *lat, cmp);
    unsigned long long sub50 = lat[samples / 2];
    for (int i = 0; i < samples; i++) lat[i] = slots[i].t1 - slots[i].t0;
    qsort(lat, (size_t)samples, sizeof *lat, cmp);
    printf("%s round %d: p10 %llu p50 %llu p90 %llu p99 %llu ns; submit call p50 %llu ns\n", mode,
           r, (unsigned long long)lat[samples / 10], (unsigned long long)lat[samples / 2],
           (unsigned long long)lat[samples * 9 / 10], (unsigned long long)lat[samples * 99 / 100],
           sub50);
  }
  lanepool_destroy(pool);
  free(slots);
  free(lat);
  free(sub);
  return 0;
}
