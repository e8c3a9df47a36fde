/*
 * band_hop.c - the HTTP demo's hops between bands, without HTTP: from an idle pool, a
 * default-band job A submits a userInteractive job B (lanepool_async) and returns; B
 * works 20 us and submits a default-band job C. Between rounds the main thread sleeps
 * (200 us by default), so the pool's threads have parked, as between requests of the
 * demo's idle run. Prints, over the rounds (median, 90th, 99th percentile, us):
 *   push:  A's lanepool_async of B (the wake-up it pays, if any);
 *   hop:   A's start to B's start (a parked userInteractive thread's wake-up, or a job
 *          run lifted by A's thread: docs/architecture.md, "The loop", step 4);
 *   round: A's start to C's start, less B's 20 us of work.
 * Uses only API that c3f6dd3 had, so it builds against any core since:
 *   cc -O2 -std=gnu11 -pthread -Iinclude Benchmarks/c/band_hop.c \
 *     Sources/CLanePool/[a-z]*.c -lnuma -o band_hop && ./band_hop 2000 200
 * Needs root (or RLIMIT_NICE 25) for the userInteractive band's nice -5.
 */
#define _GNU_SOURCE
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "lanepool.h"

static lanepool_t *pool;
static _Atomic int done;
static uint64_t t_a, t_pushed, t_b, t_c;

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void job_c(void *ctx) {
  (void)ctx;
  t_c = now_ns();
  atomic_store(&done, 1);
}

static void job_b(void *ctx) {
  (void)ctx;
  t_b = now_ns();
  while (now_ns() < t_b + 20000) {}
  if (lanepool_async(pool, LANEPOOL_QOS_DEFAULT, job_c, NULL) != 0) atomic_store(&done, -1);
}

static void job_a(void *ctx) {
  (void)ctx;
  t_a = now_ns();
  if (lanepool_async(pool, LANEPOOL_QOS_USER_INTERACTIVE, job_b, NULL) != 0)
    atomic_store(&done, -1);
  t_pushed = now_ns();
}

static int cmp(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

static void print_us(const char *name, uint64_t *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp);
  printf("%s p50 %.1f p90 %.1f p99 %.1f us", name, v[n / 2] / 1e3, v[n * 9 / 10] / 1e3,
         v[n * 99 / 100] / 1e3);
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 2000, gap_us = argc > 2 ? atoi(argv[2]) : 200;
  if (n < 100 || gap_us < 0) {
    fprintf(stderr, "usage: band_hop [rounds >= 100] [gap us]\n");
    return 2;
  }
  lanepool_config_t cfg;
  lanepool_config_init(&cfg);
  cfg.name = "hop";
  if (lanepool_create(&cfg, &pool) != 0) return 1;
  uint64_t *push = malloc(sizeof *push * (size_t)n), *hop = malloc(sizeof *hop * (size_t)n),
           *round = malloc(sizeof *round * (size_t)n);
  if (!push || !hop || !round) return 1;
  for (int i = 0; i < n; i++) {
    atomic_store(&done, 0);
    if (lanepool_async(pool, LANEPOOL_QOS_DEFAULT, job_a, NULL) != 0) return 1;
    int d;
    while ((d = atomic_load(&done)) == 0) usleep(20);
    if (d < 0) return 1;
    push[i] = t_pushed - t_a;
    hop[i] = t_b - t_a;
    round[i] = t_c - t_a - 20000;
    usleep((useconds_t)gap_us);
  }
  print_us("push", push, n);
  print_us("; hop", hop, n);
  print_us("; round", round, n);
  printf("\n");
  lanepool_destroy(pool);
  return 0;
}
