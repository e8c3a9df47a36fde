/*
 * w3_probe.c - lanepool-bench's W3 in plain C, instrumented, for scripts/w3-trace:
 * one producer busy-waits 20 us between probes (at most 64 in flight), each probe a
 * lanepool_next_lane + lanepool_lane_async of a task that stamps when it starts. It
 * prints how many probes took over 500 us, how many of those were picked while a lane
 * offered itself (the warm path) and how many went to a lane whose parking word said
 * awake; for the slowest probe, which lane it was sent to and ran on, the lane's parking
 * word just before and after the submit (0 awake, 1 parked: a wake was needed) and how
 * long the submit took; then p50 / p99 / p99.9 / max. Reads the core's internal.h (the
 * parking word, the warm word); not part of the library or of CI.
 *
 *   cc -O2 -pthread -Iinclude -ISources/CLanePool Tests/perf/w3_probe.c \
 *      Sources/CLanePool/(all).c -o w3_probe
 *   ./w3_probe [samples] [qos] [interactive_spin_ns] [the band's spin_ns] [fifo priority]
 *   (20000, 25 = userInitiated, 0, -1 = the default budget, 0 = the default policy;
 *   N > 0: the band under SCHED_FIFO N, as lanepool-bench's real-time subject)
 * Environment: W3_NICE=N sets the band's nice; W3_PIN=1 pins lane i to the i-th CPU
 * (LANEPOOL_PLACEMENT_CORES). scripts/w3-neighbour runs it beside a neighbour process.
 * After the summary line of the slow probes, a second one says how many of them ran on
 * the CPU the producer was on when it submitted them.
 */
#define _GNU_SOURCE
#include "lanepool.h"
#include "internal.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static inline uint64_t now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

typedef struct {
  uint64_t t0, t1, submitted;
  lanepool_lane_t *sent_to, *ran_on;
  uint32_t before, after;
  uint32_t offered; /* a lane of the band offered itself (warm) when this probe was picked */
  int producer_cpu, ran_cpu; /* the producer's CPU at the submit; the probe's */
} probe_slot;

static atomic_long done;

static void probe(void *ctx) {
  probe_slot *s = ctx;
  s->t1 = now();
  s->ran_cpu = sched_getcpu();
  (void)lanepool_current_lane(&s->ran_on);
  atomic_fetch_add(&done, 1);
}

static int by_value(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 20000;
  lanepool_qos_t qos = argc > 2 ? (lanepool_qos_t)atoi(argv[2]) : LANEPOOL_QOS_USER_INITIATED;
  lanepool_config_t cfg;
  lanepool_config_init(&cfg);
  cfg.name = "w3";
  cfg.lanes_per_band = 2;
  cfg.interactive_spin_ns = argc > 3 ? (uint32_t)atol(argv[3]) : 0;
  int band = lanepool_band_index(qos);
  if (band < 0) {
    fprintf(stderr, "w3_probe: unknown qos %d\n", (int)qos);
    return 1;
  }
  lanepool_band_policy_t *policy = &cfg.policy[band];
  if (argc > 4 && atol(argv[4]) >= 0) cfg.spin_ns[band] = (uint32_t)atol(argv[4]);
  if (getenv("W3_PIN")) cfg.placement = LANEPOOL_PLACEMENT_CORES;
  if (getenv("W3_NICE")) policy->nice = atoi(getenv("W3_NICE"));
  if (argc > 5 && atoi(argv[5]) > 0) { /* the band under SCHED_FIFO at that priority */
    policy->sched = LANEPOOL_SCHED_FIFO;
    policy->rt_priority = atoi(argv[5]);
    policy->nice = 0;
    policy->slice_ns = 0;
    cfg.allow_realtime = 1;
  }
  lanepool_t *p = NULL;
  int rc = lanepool_create(&cfg, &p);
  if (rc || n < 1000) {
    fprintf(stderr, "w3_probe: lanepool_create: %d (or fewer than 1000 samples)\n", rc);
    return 1;
  }
  probe_slot *s = calloc((size_t)n, sizeof *s);
  uint64_t *lat = malloc((size_t)n * sizeof *lat);
  uint64_t next = now();
  for (int i = 0; i < n; i++) {
    while (i - atomic_load(&done) >= 64) {}
    while (now() < next) {}
    next += 20000;
    lanepool_lane_t *l = NULL;
    s[i].offered = atomic_load(&p->warm[band].value) != 0;
    lanepool_next_lane(p, qos, &l);
    s[i].sent_to = l;
    s[i].before = atomic_load(&l->sleeping);
    s[i].producer_cpu = sched_getcpu();
    s[i].t0 = now();
    if (lanepool_lane_async(l, probe, &s[i])) return 1;
    s[i].submitted = now();
    s[i].after = atomic_load(&l->sleeping);
  }
  while (atomic_load(&done) < n) {}
  int worst = 0, over_1ms = 0;
  for (int i = 0; i < n; i++) {
    lat[i] = s[i].t1 - s[i].t0;
    if (lat[i] > lat[worst]) worst = i;
    if (lat[i] > 1000000) over_1ms++;
  }
  int slow = 0, slow_offered = 0, slow_awake = 0, slow_ran_shared = 0;
  for (int i = 0; i < n; i++)
    if (s[i].t1 - s[i].t0 > 500000) {
      slow++;
      slow_offered += s[i].offered != 0;
      slow_awake += s[i].before == 0;
      slow_ran_shared += s[i].ran_cpu == s[i].producer_cpu;
    }
  printf("probes over 500 us: %d; picked while a lane offered itself: %d; sent to a lane whose "
         "parking word said awake: %d\n",
         slow, slow_offered, slow_awake);
  printf("of those, ran on the producer's CPU (at its submit): %d\n", slow_ran_shared);
  lanepool_lane_t *lane0 = NULL;
  lanepool_get_lane(p, qos, 0, &lane0);
  probe_slot *w = &s[worst];
  printf("slowest probe #%d: t0 %.6f s (CLOCK_MONOTONIC), %.1f us; sent to lane %d, ran on lane "
         "%d; parking word before/after the submit %u/%u; the submit took %.0f ns\n",
         worst, (double)w->t0 / 1e9, (double)lat[worst] / 1e3, w->sent_to == lane0 ? 0 : 1,
         w->ran_on == lane0 ? 0 : 1, w->before, w->after, (double)(w->submitted - w->t0));
  qsort(lat, (size_t)n, sizeof *lat, by_value);
  printf("%d samples: p50 %.1f p99 %.1f p99.9 %.1f max %.1f us; %d over 1 ms\n", n,
         (double)lat[n / 2] / 1e3, (double)lat[n * 99 / 100] / 1e3,
         (double)lat[n * 999 / 1000] / 1e3, (double)lat[n - 1] / 1e3, over_1ms);
  lanepool_shutdown(p, LANEPOOL_SHUTDOWN_DRAIN, NULL, NULL);
  lanepool_destroy(p);
  free(s);
  free(lat);
  return 0;
}
