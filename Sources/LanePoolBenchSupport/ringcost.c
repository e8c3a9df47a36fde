/*
 * ringcost.c - lanepool-bench's `limit` row: the bare ring's own CPU cost on this
 * machine. One thread, no sharing, no lane threads: it fills a ring of a lane's size
 * through the core's own lanepool__ring_push (one CAS, three stores, a release publish),
 * then empties it through lanepool__ring_pop and calls each task (one acquire load, the
 * call, a release store), and times the two phases apart. The ring code is the core's
 * header, included as is (static inline), so this is the code a lane runs, minus the
 * lane: no wake check, no overflow list, no cross-core cache traffic.
 * lpb_ring_cross_core is the same ring with the two sides on two pinned threads, both
 * spinning (a full ring: the producer retries; an empty one: the consumer polls): what a
 * task costs once its cell and the ring's tail and head lines move between cores, still
 * with no wakes.
 */
#define _GNU_SOURCE
#include "benchsupport.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include "../CLanePool/ring.h"

static uint64_t lpb_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* A ring of `capacity` cells (a power of two), cache-line aligned; NULL on ENOMEM. */
static lanepool__ring *lpb_ring_new(uint32_t capacity) {
  lanepool__slot *slots = aligned_alloc(LANEPOOL__CACHE_LINE, sizeof(lanepool__slot) * capacity);
  lanepool__ring *ring = aligned_alloc(LANEPOOL__CACHE_LINE, sizeof(lanepool__ring));
  if (!slots || !ring) {
    free(slots);
    free(ring);
    return NULL;
  }
  lanepool__ring_init(ring, slots, capacity);
  return ring;
}

static void lpb_ring_free(lanepool__ring *ring) {
  free(ring->slots);
  free(ring);
}

/* The tiny task: what W1's C subject runs, less the completion check. */
__attribute__((noinline)) static void lpb_tiny(void *ctx) { ++*(volatile uint64_t *)ctx; }

int lpb_ring_cost(uint64_t tasks, uint32_t capacity, double *push_ns, double *pop_ns) {
  if (!push_ns || !pop_ns || tasks == 0 || capacity < 2 || (capacity & (capacity - 1)) != 0)
    return EINVAL;
  lanepool__ring *ring = lpb_ring_new(capacity);
  if (!ring) return ENOMEM;
  uint64_t counter = 0, push_total = 0, pop_total = 0;
  int rc = 0;
  for (uint64_t done = 0; done < tasks && rc == 0;) {
    uint64_t batch = tasks - done < capacity ? tasks - done : capacity;
    uint64_t t0 = lpb_now_ns();
    for (uint64_t i = 0; i < batch; i++) {
      if (lanepool__ring_push(ring, lpb_tiny, &counter, NULL, false) != 0) {
        rc = EIO;
        break;
      }
    }
    uint64_t t1 = lpb_now_ns();
    for (uint64_t i = 0; i < batch && rc == 0; i++) {
      lanepool__ring_task task;
      if (!lanepool__ring_pop(ring, &task)) {
        rc = EIO;
        break;
      }
      task.fn(task.ctx);
    }
    uint64_t t2 = lpb_now_ns();
    push_total += t1 - t0;
    pop_total += t2 - t1;
    done += batch;
  }
  if (rc == 0 && counter != tasks) rc = EIO;
  lpb_ring_free(ring);
  if (rc) return rc;
  *push_ns = (double)push_total / (double)tasks;
  *pop_ns = (double)pop_total / (double)tasks;
  return 0;
}

/* ---- the same ring across two cores ---------------------------------------------- */

typedef struct {
  lanepool__ring *ring;
  uint64_t tasks;
  int cpu;
  uint64_t counter;
  _Atomic int *go;
  int rc;
} lpb_side;

static void lpb_pin(int cpu) {
  if (cpu >= 0) (void)lpb_set_affinity(&cpu, 1);
}

static void *lpb_producer(void *arg) {
  lpb_side *s = arg;
  lpb_pin(s->cpu);
  while (!atomic_load_explicit(s->go, memory_order_acquire)) {}
  for (uint64_t i = 0; i < s->tasks;) {
    int rc = lanepool__ring_push(s->ring, lpb_tiny, &s->counter, NULL, false);
    if (rc == 0)
      i++;
    else if (rc != EAGAIN) {
      s->rc = EIO;
      break;
    }
  }
  return NULL;
}

static void *lpb_consumer(void *arg) {
  lpb_side *s = arg;
  lpb_pin(s->cpu);
  while (!atomic_load_explicit(s->go, memory_order_acquire)) {}
  for (uint64_t i = 0; i < s->tasks;) {
    lanepool__ring_task task;
    if (lanepool__ring_pop(s->ring, &task)) {
      task.fn(task.ctx);
      i++;
    }
  }
  return NULL;
}

int lpb_ring_cross_core(uint64_t tasks, uint32_t capacity, int producer_cpu, int consumer_cpu,
                        double *ns_per_task) {
  if (!ns_per_task || tasks == 0 || capacity < 2 || (capacity & (capacity - 1)) != 0) return EINVAL;
  lanepool__ring *ring = lpb_ring_new(capacity);
  if (!ring) return ENOMEM;
  _Atomic int go = 0;
  lpb_side prod = {ring, tasks, producer_cpu, 0, &go, 0};
  lpb_side cons = {ring, tasks, consumer_cpu, 0, &go, 0};
  pthread_t tp, tc;
  int rc = pthread_create(&tc, NULL, lpb_consumer, &cons);
  if (rc == 0 && (rc = pthread_create(&tp, NULL, lpb_producer, &prod)) != 0) {
    atomic_store(&go, 1); /* the consumer would wait forever: give it nothing to do */
    cons.tasks = 0;
    pthread_join(tc, NULL);
  }
  if (rc == 0) {
    struct timespec pause = {0, 10000000}; /* both threads pinned and spinning */
    nanosleep(&pause, NULL);
    uint64_t t0 = lpb_now_ns();
    atomic_store_explicit(&go, 1, memory_order_release);
    pthread_join(tp, NULL);
    pthread_join(tc, NULL);
    uint64_t t1 = lpb_now_ns();
    if (prod.rc || prod.counter != tasks)
      rc = EIO;
    else
      *ns_per_task = (double)(t1 - t0) / (double)tasks;
  }
  lpb_ring_free(ring);
  return rc;
}
