/*
 * inject.c - the test build's injection points (see inject.h). Empty otherwise.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "inject.h"

#ifdef LANEPOOL_TEST_INJECT
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <time.h>

/* internal.h's LANEPOOL__RESCUE_NS in test builds: 100 ms, as in the library, until a
 * test sets it (declared there, with the library's other tunables). */
_Atomic uint64_t lanepool__rescue_ns = 100000000u;

static _Atomic uint64_t inject_seed;
static _Atomic uint32_t inject_sleep_us = 200;
static _Atomic uint64_t inject_threads; /* gives each thread its own stream */
static _Atomic uint64_t inject_hits[LANEPOOL__AT_COUNT];
static __thread uint64_t stream;
static __thread uint64_t stream_seed;
static _Atomic(lanepool__inject_hook_fn) inject_hook;
static _Atomic(void *) inject_hook_arg;

void lanepool__inject_set_hook(lanepool__inject_hook_fn hook, void *arg) {
  atomic_store(&inject_hook, NULL);
  atomic_store(&inject_hook_arg, arg);
  atomic_store(&inject_hook, hook);
}

static _Atomic(lanepool__inject_scheduler_fn) inject_scheduler;

void lanepool__inject_set_scheduler(lanepool__inject_scheduler_fn hook) {
  atomic_store(&inject_scheduler, hook);
}

void lanepool__inject_configure(uint64_t seed, uint32_t sleep_us) {
  atomic_store(&inject_threads, 0);
  for (int i = 0; i < LANEPOOL__AT_COUNT; i++) atomic_store(&inject_hits[i], 0);
  atomic_store(&inject_sleep_us, sleep_us ? sleep_us : 1);
  atomic_store(&inject_seed, seed);
}

uint64_t lanepool__inject_hits(int point) {
  return point >= 0 && point < LANEPOOL__AT_COUNT ? atomic_load(&inject_hits[point]) : 0;
}

static uint64_t next(void) { /* xorshift64* */
  uint64_t x = stream;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  stream = x;
  return x * UINT64_C(0x2545F4914F6CDD1D);
}

/* Hands the point to the test's scheduler, if one is set: true then. */
static bool to_scheduler(int point, const void *word) {
  lanepool__inject_scheduler_fn hook =
      atomic_load_explicit(&inject_scheduler, memory_order_acquire);
  if (!hook) return false;
  atomic_fetch_add_explicit(&inject_hits[point], 1, memory_order_relaxed);
  hook(point, word);
  return true;
}

void lanepool__inject_on(int point, const void *word) {
  if (!to_scheduler(point, word)) lanepool__inject(point);
}

void lanepool__inject(int point) {
  lanepool__inject_hook_fn hook = atomic_load(&inject_hook);
  if (hook) hook(point, atomic_load(&inject_hook_arg));
  if (to_scheduler(point, NULL)) return;
  /* The scheduler's access points and marks: the seeded yields stay where they were
   * (their cost in the interleaving run, and its seeds' meaning, unchanged). */
  if (point >= LANEPOOL__AT_STATE) return;
  uint64_t seed = atomic_load_explicit(&inject_seed, memory_order_relaxed);
  if (seed == 0) return;
  if (stream_seed != seed || stream == 0) {
    stream_seed = seed;
    uint64_t n = atomic_fetch_add(&inject_threads, 1) + 1;
    stream = (seed * UINT64_C(0x9E3779B97F4A7C15)) ^ (n * UINT64_C(0xBF58476D1CE4E5B9)) ^
             ((uint64_t)point << 32) ^ 1;
  }
  atomic_fetch_add_explicit(&inject_hits[point], 1, memory_order_relaxed);
  uint64_t r = next() ^ ((uint64_t)point * UINT64_C(0x94D049BB133111EB));
  if (r % 16 < 4) {
    sched_yield();
  } else if (r % 16 == 4) {
    uint32_t cap = atomic_load_explicit(&inject_sleep_us, memory_order_relaxed);
    uint64_t us = 1 + (r >> 8) % cap;
    struct timespec ts = {.tv_sec = 0, .tv_nsec = (long)(us * 1000)};
    nanosleep(&ts, NULL);
  }
}
#endif
