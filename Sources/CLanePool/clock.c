/*
 * clock.c - lanepool__ticks(): a clock cheap enough for the lane's path from finding a
 * task to running it, and its conversion to nanoseconds off that path.
 *
 * The lane reads a clock when a busy period starts (the task it found first) and when
 * it ends (the ring empty), for lane info's busy_ns. clock_gettime(CLOCK_MONOTONIC)
 * costs about 24 ns through the vDSO here, and on x86 it orders the TSC read after the
 * loads before it: between finding a task handed over by another lane (a cache miss)
 * and running it, it waited for that miss and held back the loads after it. A bare
 * RDTSC is not ordered and costs about 10 ns (docs/benchmarks.md, "A hand-off between
 * two lanes").
 *
 * Ticks are TSC ticks where the kernel itself keeps time by the TSC (x86 with
 * clocksource "tsc": constant and in step across CPUs), else nanoseconds of
 * CLOCK_MONOTONIC. The ratio is measured at the first pool's creation (200 us between
 * two readings of both clocks), then once more after a second of the process's life,
 * and frozen; a conversion only ever multiplies by it. Intervals only: a tick count is
 * never compared with a clock_gettime reading.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "internal.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

bool lanepool__ticks_tsc;

/* Nanoseconds per tick, Q32 fixed point; 1 << 32 for nanosecond ticks. [atomic:
 * relaxed; written at most twice, each value a good ratio] */
static _Atomic uint64_t ns_per_tick_q32 = UINT64_C(1) << 32;
static _Atomic bool refined; /* the one-second reading was taken */
static uint64_t tsc0, ns0;   /* [once] the first reading, for the refinement */
static uint64_t refine_at;   /* [once] the TSC about a second after tsc0 */

static uint64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static bool kernel_keeps_time_by_tsc(void) {
#if defined(__x86_64__) || defined(__i386__)
  FILE *f = fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "re");
  if (!f) return false;
  char name[32] = {0};
  bool tsc = fgets(name, sizeof name, f) && strcmp(name, "tsc\n") == 0;
  fclose(f);
  return tsc;
#else
  return false;
#endif
}

/* Both clocks at one moment: the TSC read on both sides of clock_gettime, the tightest
 * of five brackets (a thread preempted inside one would tie a late clock reading to an
 * early TSC reading and skew the ratio by the length of the preemption). */
static void reading(uint64_t *tsc, uint64_t *ns) {
  uint64_t best = UINT64_MAX;
  for (int i = 0; i < 5; i++) {
    uint64_t a = lanepool__tsc(), n = mono_ns(), b = lanepool__tsc();
    if (b >= a && b - a < best) {
      best = b - a;
      *tsc = a + (b - a) / 2;
      *ns = n;
    }
  }
}

/* ns / ticks in Q32; 0 if the interval is too short to say. */
static uint64_t ratio(uint64_t ticks, uint64_t ns) {
  if (ticks == 0 || ns < 1000) return 0;
  return (uint64_t)(((double)ns / (double)ticks) * 4294967296.0);
}

static void clock_init(void) {
  if (!kernel_keeps_time_by_tsc()) return; /* ticks are nanoseconds */
  reading(&tsc0, &ns0);
  uint64_t t, n;
  do reading(&t, &n);
  while (n - ns0 < 200000);
  uint64_t q = t > tsc0 ? ratio(t - tsc0, n - ns0) : 0;
  if (!q) return;
  atomic_store_explicit(&ns_per_tick_q32, q, memory_order_relaxed);
  refine_at = tsc0 + (uint64_t)(1e9 * 4294967296.0 / (double)q);
  lanepool__ticks_tsc = true; /* published by pthread_once to its callers; the lanes
                                 start after their pool's creation returned from it */
}

void lanepool__clock_init(void) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, clock_init);
}

uint64_t lanepool__ticks_to_ns(uint64_t ticks) {
  if (!lanepool__ticks_tsc) return ticks;
  if (!atomic_load_explicit(&refined, memory_order_relaxed) && lanepool__tsc() >= refine_at) {
    uint64_t t, n;
    reading(&t, &n);
    /* After a second, the two readings 200 us apart give way to a second's worth: the
     * clocks' own granularity then weighs a 5,000th as much. */
    if (n - ns0 >= 1000000000u && t > tsc0) {
      uint64_t q = ratio(t - tsc0, n - ns0);
      if (q) atomic_store_explicit(&ns_per_tick_q32, q, memory_order_relaxed);
      atomic_store_explicit(&refined, true, memory_order_relaxed);
    }
  }
  uint64_t q = atomic_load_explicit(&ns_per_tick_q32, memory_order_relaxed);
  /* ticks * q >> 32 without overflow: hi * q fits for ticks below 2^63 (hi < 2^31)
   * and q below 2^33 (a TSC above 0.5 GHz). */
  uint64_t hi = ticks >> 32, lo = ticks & 0xffffffffu;
  return hi * q + ((lo * q) >> 32);
}
