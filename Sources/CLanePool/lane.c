/*
 * lane.c - one lane: its ring, its overflow list, its thread's run loop, parking.
 *
 * Producers (any thread) and the one consumer (the lane thread) meet at:
 *  - slot.seq: producer's release store (publish) pairs with the consumer's acquire
 *    load in ring_pop; the consumer's release store (free the cell) pairs with the
 *    next producer's acquire load in ring_push.
 *  - tail: producers claim with a seq_cst CAS; the consumer reads it seq_cst before
 *    parking. With `sleeping` this forms the Dekker pair that makes wake-ups exact:
 *    producer: CAS(tail) ; load(sleeping)     consumer: store(sleeping=1) ; load(tail)
 *    In the single total order of seq_cst operations one of the two loads must see
 *    the other side's write, so either the producer wakes the lane or the lane sees
 *    the claim and does not park. The overflow list uses spill_count the same way.
 * See docs/architecture.md for the full argument, including FIFO with overflow.
 */
#define _GNU_SOURCE
#include "internal.h"

#include <errno.h>
#include <linux/futex.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static __thread lanepool_lane_t *lanepool__current;

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield" ::: "memory");
#else
  atomic_signal_fence(memory_order_seq_cst);
#endif
}

uint64_t lanepool__now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void lanepool__futex_wait(_Atomic uint32_t *word, uint32_t expected) {
  int saved = errno;
  syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT_PRIVATE, expected, NULL, NULL, 0);
  errno = saved; /* EAGAIN / EINTR are fine: every caller re-checks in a loop */
}

void lanepool__futex_wake(_Atomic uint32_t *word, int count) {
  int saved = errno;
  syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE_PRIVATE, count, NULL, NULL, 0);
  errno = saved;
}

lanepool_lane_t *lanepool__lane_new(lanepool_t *pool, uint32_t band, uint32_t index,
                                    const lanepool_config_t *cfg,
                                    lanepool_lane_placement_t where, int *rc) {
  size_t lane_bytes = (sizeof(lanepool_lane_t) + LANEPOOL__CACHE_LINE - 1) &
                      ~(size_t)(LANEPOOL__CACHE_LINE - 1);
  bool lane_numa = false, slots_numa = false;
  lanepool_lane_t *lane = lanepool__alloc_on_node(lane_bytes, where.node, &lane_numa);
  if (!lane) {
    *rc = ENOMEM;
    return NULL;
  }
  uint32_t cap = cfg->ring_capacity ? cfg->ring_capacity : LANEPOOL_DEFAULT_RING_CAPACITY;
  size_t bytes = (size_t)cap * sizeof(lanepool__slot);
  bytes = (bytes + LANEPOOL__CACHE_LINE - 1) & ~(size_t)(LANEPOOL__CACHE_LINE - 1);
  lane->slots = lanepool__alloc_on_node(bytes, where.node, &slots_numa);
  if (!lane->slots) {
    lanepool__free_on_node(lane, lane_bytes, lane_numa);
    *rc = ENOMEM;
    return NULL;
  }
  lane->lane_bytes = lane_bytes;
  lane->slots_bytes = bytes;
  lane->lane_numa_owned = lane_numa;
  lane->slots_numa_owned = slots_numa;
  for (uint32_t i = 0; i < cap; i++) {
    atomic_init(&lane->slots[i].seq, i);
    lane->slots[i].fn = NULL;
    lane->slots[i].ctx = NULL;
  }
  if ((*rc = pthread_mutex_init(&lane->spill_lock, NULL))) {
    lanepool__free_on_node(lane->slots, bytes, slots_numa);
    lanepool__free_on_node(lane, lane_bytes, lane_numa);
    return NULL;
  }
  lane->pool = pool;
  lane->mask = cap - 1;
  lane->band = band;
  lane->index = index;
  lane->spin_ns = cfg->spin_ns[band];
  lane->spin_now = cfg->spin_ns[band];
  lane->fixed_spin = cfg->fixed_spin;
  lane->hard_capacity = cfg->hard_capacity;
  lane->cpu = where.cpu;
  lane->node = where.node;
  lane->policy = cfg->policy[band];
  lane->generation = pool->generation;
  atomic_init(&lane->started_tasks, 0);
  atomic_init(&lane->stalled_since, 0);
  atomic_init(&lane->stalls, 0);
  atomic_init(&lane->tail, 0);
  atomic_init(&lane->head_pub, 0);
  atomic_init(&lane->executed, 0);
  atomic_init(&lane->busy_ns, 0);
  atomic_init(&lane->tid, 0);
  atomic_init(&lane->running, 0);
  atomic_init(&lane->sleeping, 0);
  atomic_init(&lane->spill_count, 0);
  atomic_init(&lane->overflowed, 0);
  atomic_init(&lane->userdata, NULL);

  /* "<pool>-<band>-<i>" within the kernel's 15 visible bytes. */
  char suffix[16];
  int slen = snprintf(suffix, sizeof suffix, "-%s-%u", lanepool__band_short_names[band], index);
  size_t keep = strnlen(pool->name, (size_t)(15 - slen));
  memcpy(lane->name, pool->name, keep);
  memcpy(lane->name + keep, suffix, (size_t)slen + 1);
  *rc = 0;
  return lane;
}

void lanepool__lane_free(lanepool_lane_t *lane) {
  if (!lane) return;
  pthread_mutex_destroy(&lane->spill_lock);
  free(lane->spill);
  lanepool__free_on_node(lane->slots, lane->slots_bytes, lane->slots_numa_owned);
  lanepool__free_on_node(lane, lane->lane_bytes, lane->lane_numa_owned);
}

/* ---- the ring --------------------------------------------------------------- */

/* 0, EAGAIN (full), ESHUTDOWN (closed). */
static int ring_push(lanepool_lane_t *lane, lanepool_fn fn, void *ctx) {
  uint64_t pos = atomic_load_explicit(&lane->tail, memory_order_relaxed);
  for (;;) {
    if (pos & LANEPOOL__CLOSED) return ESHUTDOWN;
    lanepool__slot *slot = &lane->slots[pos & lane->mask];
    uint64_t seq = atomic_load_explicit(&slot->seq, memory_order_acquire);
    int64_t diff = (int64_t)(seq - pos);
    if (diff == 0) {
      /* seq_cst: ordered before the `sleeping` load in lanepool__lane_push. */
      if (atomic_compare_exchange_weak_explicit(&lane->tail, &pos, pos + 1,
                                                memory_order_seq_cst,
                                                memory_order_relaxed)) {
        slot->fn = fn;
        slot->ctx = ctx;
        /* release: pairs with the acquire in ring_pop. */
        atomic_store_explicit(&slot->seq, pos + 1, memory_order_release);
        return 0;
      }
    } else if (diff < 0) {
      return EAGAIN; /* the consumer has not freed this cell yet: full */
    } else {
      pos = atomic_load_explicit(&lane->tail, memory_order_relaxed);
    }
  }
}

static bool ring_pop(lanepool_lane_t *lane, lanepool__task *out) {
  uint64_t pos = lane->head;
  lanepool__slot *slot = &lane->slots[pos & lane->mask];
  /* acquire: pairs with the producer's release of seq = pos + 1. */
  uint64_t seq = atomic_load_explicit(&slot->seq, memory_order_acquire);
  if (seq != pos + 1) return false;
  out->fn = slot->fn;
  out->ctx = slot->ctx;
  /* release: pairs with the acquire of the producer that claims pos + capacity. */
  atomic_store_explicit(&slot->seq, pos + lane->mask + 1, memory_order_release);
  lane->head = pos + 1;
  atomic_store_explicit(&lane->head_pub, pos + 1, memory_order_relaxed);
  return true;
}

static inline uint64_t tail_pos(const lanepool_lane_t *lane, memory_order order) {
  return atomic_load_explicit(&((lanepool_lane_t *)lane)->tail, order) & ~LANEPOOL__CLOSED;
}

/* ---- the overflow list ------------------------------------------------------ */

/* 0, ENOMEM, ESHUTDOWN. Keeps FIFO: once the list is non-empty every producer
 * appends here until the lane has emptied it (see lanepool__lane_push). */
static int spill_push(lanepool_lane_t *lane, lanepool_fn fn, void *ctx) {
  pthread_mutex_lock(&lane->spill_lock);
  if (lane->spill_closed) {
    pthread_mutex_unlock(&lane->spill_lock);
    return ESHUTDOWN;
  }
  uint64_t len = atomic_load_explicit(&lane->spill_count, memory_order_relaxed);
  if (len == lane->spill_cap) {
    uint64_t ncap = lane->spill_cap ? lane->spill_cap * 2 : 256;
    lanepool__task *n = malloc(ncap * sizeof *n);
    if (!n) {
      pthread_mutex_unlock(&lane->spill_lock);
      return ENOMEM;
    }
    for (uint64_t i = 0; i < len; i++)
      n[i] = lane->spill[(lane->spill_head + i) % lane->spill_cap];
    free(lane->spill);
    lane->spill = n;
    lane->spill_cap = ncap;
    lane->spill_head = 0;
  }
  lane->spill[(lane->spill_head + len) % lane->spill_cap] = (lanepool__task){fn, ctx};
  /* seq_cst: ordered before the `sleeping` load in lanepool__lane_push. */
  atomic_fetch_add_explicit(&lane->spill_count, 1, memory_order_seq_cst);
  pthread_mutex_unlock(&lane->spill_lock);
  atomic_fetch_add_explicit(&lane->overflowed, 1, memory_order_relaxed);
  return 0;
}

typedef enum { SPILL_EMPTY, SPILL_TOOK, SPILL_RING_FIRST } spill_result;

static spill_result spill_pop(lanepool_lane_t *lane, lanepool__task *out) {
  if (atomic_load_explicit(&lane->spill_count, memory_order_acquire) == 0) return SPILL_EMPTY;
  pthread_mutex_lock(&lane->spill_lock);
  uint64_t len = atomic_load_explicit(&lane->spill_count, memory_order_relaxed);
  if (len == 0) {
    pthread_mutex_unlock(&lane->spill_lock);
    return SPILL_EMPTY;
  }
  /* Holding the lock, we now see every ring claim made before any listed task was
   * appended. If the ring is not empty, those claims are older: run them first. */
  if (tail_pos(lane, memory_order_seq_cst) != lane->head) {
    pthread_mutex_unlock(&lane->spill_lock);
    return SPILL_RING_FIRST;
  }
  *out = lane->spill[lane->spill_head];
  lane->spill_head = (lane->spill_head + 1) % lane->spill_cap;
  atomic_store_explicit(&lane->spill_count, len - 1, memory_order_seq_cst);
  pthread_mutex_unlock(&lane->spill_lock);
  return SPILL_TOOK;
}

/* ---- producers -------------------------------------------------------------- */

static inline void wake_if_parked(lanepool_lane_t *lane) {
  /* seq_cst load: see the header comment; the exchange makes exactly one producer
   * pay for the syscall. */
  if (atomic_load_explicit(&lane->sleeping, memory_order_seq_cst) &&
      atomic_exchange_explicit(&lane->sleeping, 0, memory_order_seq_cst))
    lanepool__futex_wake(&lane->sleeping, 1);
}

int lanepool__lane_push(lanepool_lane_t *lane, lanepool_fn fn, void *ctx) {
  if (lanepool__forked(lane->generation)) return EOWNERDEAD;
  int rc;
  if (lane->hard_capacity) {
    rc = ring_push(lane, fn, ctx);
  } else if (atomic_load_explicit(&lane->spill_count, memory_order_acquire) == 0) {
    rc = ring_push(lane, fn, ctx);
    if (rc == EAGAIN) rc = spill_push(lane, fn, ctx);
  } else {
    rc = spill_push(lane, fn, ctx);
  }
  if (rc == 0) wake_if_parked(lane);
  return rc;
}

uint64_t lanepool__lane_depth(const lanepool_lane_t *lane) {
  uint64_t t = tail_pos(lane, memory_order_relaxed);
  uint64_t h = atomic_load_explicit(&((lanepool_lane_t *)lane)->head_pub, memory_order_relaxed);
  uint64_t d = t > h ? t - h : 0;
  return d + atomic_load_explicit(&((lanepool_lane_t *)lane)->spill_count, memory_order_relaxed);
}

/* ---- the lane thread -------------------------------------------------------- */

static inline bool has_work(lanepool_lane_t *lane, memory_order order) {
  return tail_pos(lane, order) != lane->head ||
         atomic_load_explicit(&lane->spill_count, order) != 0;
}

static inline bool is_closed(lanepool_lane_t *lane) {
  return atomic_load_explicit(&lane->tail, memory_order_seq_cst) & LANEPOOL__CLOSED;
}

/* Spins up to lane->spin_ns waiting for work. true if work (or close) showed up. */
static bool spin_for_work(lanepool_lane_t *lane) {
  uint32_t budget = lane->fixed_spin ? lane->spin_ns : lane->spin_now;
  if (budget == 0) return false;
  /* Take a spinner slot, or park at once: spinning lanes must leave cores to the
   * producers (a soft cap: a relaxed counter, no ordering needed). */
  _Atomic uint32_t *spinners = &lane->pool->spinners;
  if (atomic_fetch_add_explicit(spinners, 1, memory_order_relaxed) >= lane->pool->max_spinners) {
    atomic_fetch_sub_explicit(spinners, 1, memory_order_relaxed);
    return false;
  }
  bool found = false;
  uint64_t deadline = lanepool__now_ns() + budget;
  while (!found) {
    for (int i = 0; i < 64; i++) {
      if (has_work(lane, memory_order_relaxed) ||
          (atomic_load_explicit(&lane->tail, memory_order_relaxed) & LANEPOOL__CLOSED)) {
        found = true;
        break;
      }
      cpu_relax();
    }
    if (!found && lanepool__now_ns() >= deadline) break;
    if (!found) sched_yield(); /* cede the core to a runnable producer, if any */
  }
  atomic_fetch_sub_explicit(spinners, 1, memory_order_relaxed);
  /* A spin that timed out burned CPU for nothing: halve the budget (below 1 us: 0). */
  if (!found) lane->spin_now = budget / 2 >= 1000 ? budget / 2 : 0;
  return found;
}

/* After a park: if the lane was woken sooner than its maximum budget, spinning would
 * have caught that work: grow the budget back (doubling, at least 1 us). */
static void adapt_after_park(lanepool_lane_t *lane, uint64_t parked_ns) {
  if (lane->fixed_spin || lane->spin_ns == 0 || parked_ns >= lane->spin_ns) return;
  uint32_t grown = lane->spin_now ? lane->spin_now * 2 : 1000;
  lane->spin_now = grown < lane->spin_ns ? grown : lane->spin_ns;
}

static void park(lanepool_lane_t *lane) {
  atomic_store_explicit(&lane->sleeping, 1, memory_order_seq_cst);
  if (has_work(lane, memory_order_seq_cst) || is_closed(lane)) {
    atomic_store_explicit(&lane->sleeping, 0, memory_order_relaxed);
    return;
  }
  uint64_t t0 = lanepool__now_ns();
  while (atomic_load_explicit(&lane->sleeping, memory_order_acquire) == 1) {
    lanepool__futex_wait(&lane->sleeping, 1);
  }
  adapt_after_park(lane, lanepool__now_ns() - t0);
}

void *lanepool__lane_main(void *arg) {
  lanepool_lane_t *lane = arg;
  lanepool_t *pool = lane->pool;
  lanepool__current = lane;
  pthread_setname_np(pthread_self(), lane->name);
  pid_t tid = (pid_t)syscall(SYS_gettid);
  /* Placement and OS policy are applied here, by the lane itself, before it runs any
   * task: nice, I/O priority and timer slack are per thread and only some of them can
   * be set from outside. */
  lane->applied.placement_error = lanepool__apply_placement(lane);
  lanepool__apply_policy(&lane->applied, tid, &lane->policy);
  atomic_store_explicit(&lane->running, 1, memory_order_relaxed);
  atomic_store_explicit(&lane->tid, (int)tid, memory_order_release);
  atomic_fetch_add_explicit(&pool->started, 1, memory_order_release);
  lanepool__futex_wake((_Atomic uint32_t *)&pool->started, 1);

  uint64_t executed = 0;
  uint64_t busy_since = 0;
  for (;;) {
    if (atomic_load_explicit(&pool->cancel, memory_order_relaxed)) break;
    lanepool__task task;
    bool got = ring_pop(lane, &task);
    if (!got) {
      if (tail_pos(lane, memory_order_acquire) != lane->head) {
        cpu_relax(); /* a producer claimed a cell and is about to publish it */
        continue;
      }
      spill_result sr = spill_pop(lane, &task);
      if (sr == SPILL_RING_FIRST) continue;
      got = sr == SPILL_TOOK;
    }
    if (got) {
      if (!busy_since) busy_since = lanepool__now_ns();
      /* started != executed while a task runs: what the stall detector watches. */
      atomic_store_explicit(&lane->started_tasks, executed + 1, memory_order_relaxed);
      task.fn(task.ctx);
      atomic_store_explicit(&lane->executed, ++executed, memory_order_relaxed);
      continue;
    }
    /* Empty. */
    if (busy_since) {
      atomic_fetch_add_explicit(&lane->busy_ns, lanepool__now_ns() - busy_since,
                                memory_order_relaxed);
      busy_since = 0;
    }
    if (is_closed(lane)) {
      /* CLOSED was set after the overflow list was closed (lanepool__lane_close), so
       * nothing can arrive any more; one last look for what arrived before. */
      if (has_work(lane, memory_order_seq_cst)) continue;
      break;
    }
    if (spin_for_work(lane)) continue;
    park(lane);
  }
  if (busy_since)
    atomic_fetch_add_explicit(&lane->busy_ns, lanepool__now_ns() - busy_since,
                              memory_order_relaxed);
  atomic_store_explicit(&lane->running, 0, memory_order_relaxed);
  lanepool__current = NULL;
  return NULL;
}

void lanepool__lane_close(lanepool_lane_t *lane) {
  pthread_mutex_lock(&lane->spill_lock);
  lane->spill_closed = 1;
  pthread_mutex_unlock(&lane->spill_lock);
  atomic_fetch_or_explicit(&lane->tail, LANEPOOL__CLOSED, memory_order_seq_cst);
  wake_if_parked(lane);
}

/* After the lane thread has been joined: hands every queued task, FIFO, to discard. */
static void sync_trampoline(void *arg);
static void sync_discard(void *arg);

void lanepool__lane_discard_all(lanepool_lane_t *lane, lanepool_discard_fn discard,
                                void *discard_arg) {
  lanepool__task task;
  while (ring_pop(lane, &task) || spill_pop(lane, &task) == SPILL_TOOK) {
    if (task.fn == sync_trampoline)
      sync_discard(task.ctx); /* ours: its waiter gets ECANCELED */
    else
      discard(task.fn, task.ctx, discard_arg);
  }
}

/* ---- public lane API -------------------------------------------------------- */

int lanepool_lane_async(lanepool_lane_t *lane, lanepool_fn fn, void *ctx) {
  if (!lane || !fn) return EINVAL;
  return lanepool__lane_push(lane, fn, ctx);
}

int lanepool_lane_async_wait(lanepool_lane_t *lane, lanepool_fn fn, void *ctx,
                             uint64_t timeout_ns) {
  if (!lane || !fn) return EINVAL;
  int rc = lanepool__lane_push(lane, fn, ctx);
  if (rc != EAGAIN) return rc;
  uint64_t deadline = lanepool__now_ns() + timeout_ns;
  uint64_t pause_ns = 1000;
  for (;;) {
    uint64_t now = lanepool__now_ns();
    if (now >= deadline) return ETIMEDOUT;
    uint64_t left = deadline - now;
    uint64_t nap = pause_ns < left ? pause_ns : left;
    struct timespec ts = {.tv_sec = (time_t)(nap / 1000000000u), .tv_nsec = (long)(nap % 1000000000u)};
    nanosleep(&ts, NULL);
    if ((rc = lanepool__lane_push(lane, fn, ctx)) != EAGAIN) return rc;
    if (pause_ns < 1000000) pause_ns *= 2;
  }
}

int lanepool_current_lane(lanepool_lane_t **out) {
  if (!out) return EINVAL;
  if (!lanepool__current) return ESRCH;
  *out = lanepool__current;
  return 0;
}

typedef struct lanepool__sync {
  lanepool_fn fn;
  void *ctx;
  _Atomic uint32_t state; /* 0 pending, 1 ran, 2 discarded */
} lanepool__sync;

static void sync_trampoline(void *arg) {
  lanepool__sync *s = arg;
  s->fn(s->ctx);
  atomic_store_explicit(&s->state, 1, memory_order_release);
  /* The waiter may return (and its frame be reused) as soon as it sees state 1; a
   * stray wake on that address is harmless because every futex waiter loops. */
  lanepool__futex_wake(&s->state, 1);
}

/* Called by shutdown(CANCEL) for each discarded sync task: wakes its waiter. */
static void sync_discard(void *arg) {
  lanepool__sync *s = arg;
  atomic_store_explicit(&s->state, 2, memory_order_release);
  lanepool__futex_wake(&s->state, 1);
}

int lanepool_lane_sync(lanepool_lane_t *lane, lanepool_fn fn, void *ctx) {
  if (!lane || !fn) return EINVAL;
  if (lanepool__current == lane) return EDEADLK;
  lanepool__sync s = {.fn = fn, .ctx = ctx};
  atomic_init(&s.state, 0);
  int rc = lanepool__lane_push(lane, sync_trampoline, &s);
  if (rc) return rc;
  uint32_t st;
  while ((st = atomic_load_explicit(&s.state, memory_order_acquire)) == 0)
    lanepool__futex_wait(&s.state, 0);
  return st == 1 ? 0 : ECANCELED;
}

int lanepool_lane_info(const lanepool_lane_t *lane, lanepool_lane_info_t *out) {
  if (!lane || !out) return EINVAL;
  lanepool_lane_t *l = (lanepool_lane_t *)lane;
  memset(out, 0, sizeof *out);
  out->qos = lanepool__qos_of_band[l->band];
  out->index = l->index;
  out->tid = atomic_load_explicit(&l->tid, memory_order_acquire);
  memcpy(out->thread_name, l->name, sizeof out->thread_name);
  out->tasks_executed = atomic_load_explicit(&l->executed, memory_order_relaxed);
  out->depth = lanepool__lane_depth(l);
  out->overflowed = atomic_load_explicit(&l->overflowed, memory_order_relaxed);
  out->busy_ns = atomic_load_explicit(&l->busy_ns, memory_order_relaxed);
  out->running = atomic_load_explicit(&l->running, memory_order_relaxed);
  out->sched = l->applied.sched;
  out->nice = l->applied.nice;
  out->ioprio = l->applied.ioprio;
  out->timer_slack = l->applied.timer_slack;
  out->slice = l->applied.slice;
  out->cpu = l->applied.placement_error ? -1 : l->cpu;
  out->node = l->node >= 0 ? l->node : lanepool__node_of_cpu(out->cpu);
  out->placement_error = l->applied.placement_error;
  uint64_t since = atomic_load_explicit(&l->stalled_since, memory_order_relaxed);
  out->stalled = since != 0;
  out->stalled_ns = since ? lanepool__now_ns() - since : 0;
  out->stalls = atomic_load_explicit(&l->stalls, memory_order_relaxed);
  return 0;
}

int lanepool_lane_pool(const lanepool_lane_t *lane, lanepool_t **out) {
  if (!lane || !out) return EINVAL;
  *out = lane->pool;
  return 0;
}

int lanepool_lane_position(const lanepool_lane_t *lane, lanepool_qos_t *qos, uint32_t *index) {
  if (!lane || !qos || !index) return EINVAL;
  *qos = lanepool__qos_of_band[lane->band];
  *index = lane->index;
  return 0;
}

int lanepool_lane_set_userdata(lanepool_lane_t *lane, void *userdata) {
  if (!lane) return EINVAL;
  atomic_store_explicit(&lane->userdata, userdata, memory_order_release);
  return 0;
}

int lanepool_lane_userdata(const lanepool_lane_t *lane, void **out) {
  if (!lane || !out) return EINVAL;
  *out = atomic_load_explicit(&((lanepool_lane_t *)lane)->userdata, memory_order_acquire);
  return 0;
}
