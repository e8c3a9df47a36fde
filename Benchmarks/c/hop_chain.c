/*
 * hop_chain.c - W9's "task prefers the pool" in C, without Swift: a band job that submits
 * the next one from inside itself, N times in a chain, as a task's continuation does
 * when it runs on the pool (the Swift TaskExecutor's lanepool_async_flags with
 * CONTINUATION | LOCAL; mode "plain": lanepool_async). One job runs at a time, so the
 * figure is the cost of one submit plus one pickup by the same thread. The main thread
 * waits by polling. Prints the median ns per hop over the rounds, with min and max.
 * Uses only API that c3f6dd3 had (docs/bench/set-z puts the two cores side by side):
 *   cc -O2 -std=gnu11 -pthread -Iinclude Benchmarks/c/hop_chain.c \
 *     Sources/CLanePool/[a-z]*.c -lnuma -o hop_chain && ./hop_chain local 1000000 7
 */
#define _GNU_SOURCE
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lanepool.h"

static lanepool_t *pool;
static unsigned flags;
static long left;
static _Atomic int finished;

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void hop(void *ctx) {
  (void)ctx;
  if (--left == 0) { /* (one job at a time: `left` is never touched by two) */
    atomic_store_explicit(&finished, 1, memory_order_release);
    return;
  }
  if (lanepool_async_flags(pool, LANEPOOL_QOS_USER_INITIATED, hop, NULL, flags) != 0) {
    fprintf(stderr, "hop_chain: submit refused\n");
    abort();
  }
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "local";
  long n = argc > 2 ? atol(argv[2]) : 1000000;
  int rounds = argc > 3 ? atoi(argv[3]) : 7;
  if ((strcmp(mode, "local") != 0 && strcmp(mode, "plain") != 0) || n < 1 || rounds < 1 ||
      rounds > 100) {
    fprintf(stderr, "usage: hop_chain local|plain [hops >= 1] [rounds 1..100]\n");
    return 2;
  }
  flags = strcmp(mode, "local") == 0 ? LANEPOOL_SUBMIT_CONTINUATION | LANEPOOL_SUBMIT_LOCAL : 0;
  lanepool_config_t cfg;
  lanepool_config_init(&cfg);
  int rc = lanepool_create(&cfg, &pool);
  if (rc) {
    fprintf(stderr, "lanepool_create: %s\n", strerror(rc));
    return 1;
  }
  double ns[100];
  for (int r = 0; r < rounds; r++) {
    left = n;
    atomic_store(&finished, 0);
    uint64_t t0 = now_ns();
    if (lanepool_async(pool, LANEPOOL_QOS_USER_INITIATED, hop, NULL) != 0) return 1;
    while (!atomic_load_explicit(&finished, memory_order_acquire)) {}
    ns[r] = (double)(now_ns() - t0) / (double)n;
  }
  qsort(ns, (size_t)rounds, sizeof ns[0], cmp);
  printf("%s: median %.1f ns per hop (min %.1f, max %.1f) over %d rounds of %ld\n", mode,
         ns[rounds / 2], ns[0], ns[rounds - 1], rounds, n);
  lanepool_destroy(pool);
  return 0;
}
