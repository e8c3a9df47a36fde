/*
 * w1_band.c - W1 for band work in C: one producer submits N jobs with lanepool_async
 * (userInitiated, the pool's defaults) as fast as it can, then blocks on a semaphore the
 * last job posts; prints M tasks/s per round. No Swift, no other pool in the process.
 * Uses only API that c3f6dd3 had (docs/bench/set-w puts revisions side by side):
 *   cc -O2 -std=gnu11 -pthread -Iinclude Benchmarks/c/w1_band.c Sources/CLanePool/[a-z]*.c
 *     -o w1_band && ./w1_band 5 2000000
 */
#define _GNU_SOURCE
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <semaphore.h>
#include "lanepool.h"
static sem_t sem;
static uint64_t target;
static _Atomic uint64_t done;
static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}
static void tick(void *c) {
  (void)c;
  if (atomic_fetch_add_explicit(&done, 1, memory_order_relaxed) + 1 == target) sem_post(&sem);
}
int main(int argc, char **argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 5;
  long n = argc > 2 ? atol(argv[2]) : 2000000;
  lanepool_config_t cfg;
  lanepool_config_init(&cfg);
  lanepool_t *pool;
  if (lanepool_create(&cfg, &pool)) return 1;
  for (int r = 0; r < rounds; r++) {
    atomic_store(&done, 0);
    target = (uint64_t)n;
    sem_init(&sem, 0, 0);
    uint64_t t0 = now_ns();
    for (long i = 0; i < n; i++)
      if (lanepool_async(pool, LANEPOOL_QOS_USER_INITIATED, tick, NULL)) {
        fprintf(stderr, "lanepool_async refused a job\n");
        return 1;
      }
    sem_wait(&sem);
    printf("round %d: %.2f M/s\n", r, n / ((now_ns() - t0) / 1e3));
    sem_destroy(&sem);
  }
  lanepool_destroy(pool);
  return 0;
}
