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
 *
 * `sleeping` has a third value, LENT: a lanepool_lane_sync caller found the lane
 * parked with nothing queued and took the lane's right to run (CAS PARKED -> LENT), so
 * it runs its closure inline, on its own thread. While LENT, producers do not wake the
 * lane; the caller gives the right back with a seq_cst store of PARKED followed by the
 * same emptiness check a parking lane makes, and wakes the lane if work arrived. The
 * lane itself never leaves its wait loop until the word is AWAKE again.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
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

__thread lanepool_lane_t *lanepool__current;
__thread lanepool_t *lanepool__pool_thread;
__thread lanepool_t *lanepool__in_callback;

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

uint64_t lanepool__add_sat(uint64_t a, uint64_t b) {
  return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

void lanepool__futex_wait(_Atomic uint32_t *word, uint32_t expected) {
  LANEPOOL_INJECT_ON(LANEPOOL__AT_BLOCK, word);
  int saved = errno;
  syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT_PRIVATE, expected, NULL, NULL, 0);
  errno = saved; /* EAGAIN / EINTR are fine: every caller re-checks in a loop */
  LANEPOOL_INJECT(LANEPOOL__AT_RESUME);
}

bool lanepool__futex_wait_for(_Atomic uint32_t *word, uint32_t expected, uint64_t ns) {
  LANEPOOL_INJECT_ON(LANEPOOL__AT_BLOCK, word);
  int saved = errno;
  struct timespec ts = {.tv_sec = (time_t)(ns / 1000000000u), .tv_nsec = (long)(ns % 1000000000u)};
  bool timed_out =
      syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT_PRIVATE, expected, &ts, NULL, 0) == -1 &&
      errno == ETIMEDOUT;
  errno = saved;
  LANEPOOL_INJECT(LANEPOOL__AT_RESUME);
  return timed_out;
}

void lanepool__futex_wake(_Atomic uint32_t *word, int count) {
  int saved = errno;
  long woken = syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE_PRIVATE, count, NULL, NULL, 0);
  errno = saved;
  if (woken > 0) LANEPOOL_INJECT_ON(LANEPOOL__AT_UNBLOCK, word); /* the count: test builds only */
}

lanepool_lane_t *lanepool__lane_new(lanepool_t *pool, uint32_t band, uint32_t index,
                                    const lanepool_config_t *cfg, lanepool_lane_placement_t where,
                                    int *rc) {
  size_t lane_bytes =
      (sizeof(lanepool_lane_t) + LANEPOOL__CACHE_LINE - 1) & ~(size_t)(LANEPOOL__CACHE_LINE - 1);
  bool lane_numa = false, slots_numa = false;
  lanepool_lane_t *lane = lanepool__alloc_on_node(lane_bytes, where.node, &lane_numa);
  if (!lane) {
    *rc = ENOMEM;
    return NULL;
  }
  memset(lane, 0, sizeof *lane);
  uint32_t cap = cfg->ring_capacity ? cfg->ring_capacity : LANEPOOL_DEFAULT_RING_CAPACITY;
  /* The cells, then their stamps (ring.h, "Stamps"). */
  size_t bytes = (size_t)cap * (sizeof(lanepool__slot) + sizeof(uint64_t));
  bytes = (bytes + LANEPOOL__CACHE_LINE - 1) & ~(size_t)(LANEPOOL__CACHE_LINE - 1);
  lanepool__slot *slots = lanepool__alloc_on_node(bytes, where.node, &slots_numa);
  if (!slots) {
    *rc = ENOMEM;
    goto fail_lane;
  }
  if ((*rc = pthread_mutex_init(&lane->spill_lock, NULL))) goto fail_slots;
  if ((*rc = pthread_mutex_init(&lane->thread_lock, NULL))) goto fail_spill;
  if ((*rc = pthread_mutex_init(&lane->boost_lock, NULL))) goto fail_thread;
  lanepool__ring_init(&lane->ring, slots, cap);
  lanepool__ring_set_stamps(&lane->ring, (_Atomic uint64_t *)(void *)(slots + cap));
  lane->fifo_look = lanepool__stamp() - LANEPOOL__FIFO_LOOK; /* the first look is due */
  lane->lane_bytes = lane_bytes;
  lane->slots_bytes = bytes;
  lane->lane_numa_owned = lane_numa;
  lane->slots_numa_owned = slots_numa;
  lane->pool = pool;
  lane->band = band;
  lane->index = index;
  lane->low_latency = band == 0 && cfg->interactive_spin_ns != 0;
  lane->spin_ns = lane->low_latency ? cfg->interactive_spin_ns : cfg->spin_ns[band];
  lane->spin_now = lane->spin_ns;
  lane->fixed_spin = lane->low_latency || cfg->fixed_spin;
  lane->hard_capacity = cfg->hard_capacity;
  lane->stack_size = cfg->stack_size;
  lane->cpu = where.cpu;
  lane->node = where.node;
  lane->policy = cfg->policy[band];
  lane->generation = pool->generation;
  lane->spill_intake = LANEPOOL__OPEN;
  atomic_init(&lane->started_tasks, 0);
  atomic_init(&lane->stalled_since, 0);
  atomic_init(&lane->stalls, 0);
  atomic_init(&lane->executed, 0);
  atomic_init(&lane->busy_ns, 0);
  atomic_init(&lane->tid, 0);
  atomic_init(&lane->running, 0);
  atomic_init(&lane->sleeping, 0);
  atomic_init(&lane->lent_in, 0);
  atomic_init(&lane->lent_out, 0);
  atomic_init(&lane->borrowers, 0);
  atomic_init(&lane->spill_count, 0);
  atomic_init(&lane->spill_in, 0);
  atomic_init(&lane->overflowed, 0);
  atomic_init(&lane->batch_left, 0);
  atomic_init(&lane->stolen, 0);
  atomic_init(&lane->userdata, NULL);
  for (uint32_t b = 0; b < LANEPOOL_BAND_COUNT; b++) atomic_init(&lane->boost_waiting[b], 0);
  atomic_init(&lane->boost_band, band);

  /* "<pool>-<band>-<i>" within the kernel's 15 visible bytes; "<pool>-<band>-r" for the
   * band's rescue lane (index lanes_per_band). */
  lane->spare = index == pool->lanes_per_band;
  char suffix[16];
  if (lane->spare)
    snprintf(suffix, sizeof suffix, "-%s-r", lanepool__band_short_names[band]);
  else
    snprintf(suffix, sizeof suffix, "-%s-%u", lanepool__band_short_names[band], index);
  lanepool__thread_name(pool->name, suffix, lane->name);
  if (lane->spare) {
    lane->rescue_seen = malloc(2 * (size_t)index * sizeof(uint64_t));
    if (!lane->rescue_seen) {
      lanepool__lane_free(lane);
      *rc = ENOMEM;
      return NULL;
    }
    for (uint32_t i = 0; i < index; i++) lane->rescue_seen[2 * i] = UINT64_MAX; /* unseen */
  }
  *rc = 0;
  return lane;

fail_thread:
  pthread_mutex_destroy(&lane->thread_lock);
fail_spill:
  pthread_mutex_destroy(&lane->spill_lock);
fail_slots:
  lanepool__free_on_node(slots, bytes, slots_numa);
fail_lane:
  lanepool__free_on_node(lane, lane_bytes, lane_numa);
  return NULL;
}

void lanepool__lane_free(lanepool_lane_t *lane) {
  if (!lane) return;
  free(lane->rescue_seen);
  pthread_mutex_destroy(&lane->spill_lock);
  pthread_mutex_destroy(&lane->thread_lock);
  pthread_mutex_destroy(&lane->boost_lock);
  free(lane->spill);
  lanepool__free_on_node(lane->ring.slots, lane->slots_bytes, lane->slots_numa_owned);
  lanepool__free_on_node(lane, lane->lane_bytes, lane->lane_numa_owned);
}

/* ---- the overflow list ------------------------------------------------------ */

/* Appends {fn, ctxs[i], args[i]} (args NULL: every arg NULL) for i in 0..n-1, in order,
 * in one critical section. 0, ENOMEM, ESHUTDOWN, LANEPOOL__RING_OWN_ONLY (all or
 * nothing). Keeps FIFO: once the list is non-empty every producer appends here until the
 * lane has emptied it (see lanepool__lane_push). */
static int spill_push_n(lanepool_lane_t *lane, lanepool_fn fn, void *const *ctxs, void *const *args,
                        uint64_t n, bool own) {
  pthread_mutex_lock(&lane->spill_lock);
  int refused = lane->spill_intake == LANEPOOL__INTAKE_CLOSED             ? ESHUTDOWN
                : lane->spill_intake == LANEPOOL__INTAKE_OWN_ONLY && !own ? LANEPOOL__RING_OWN_ONLY
                                                                          : 0;
  if (refused) {
    pthread_mutex_unlock(&lane->spill_lock);
    return refused;
  }
  uint64_t len = atomic_load_explicit(&lane->spill_count, memory_order_relaxed);
  if (len + n > lane->spill_cap) {
    uint64_t ncap = lane->spill_cap ? lane->spill_cap : 256;
    while (ncap < len + n) ncap *= 2;
    lanepool__task *nb = malloc(ncap * sizeof *nb);
    if (!nb) {
      pthread_mutex_unlock(&lane->spill_lock);
      return ENOMEM;
    }
    for (uint64_t i = 0; i < len; i++)
      nb[i] = lane->spill[(lane->spill_head + i) % lane->spill_cap];
    free(lane->spill);
    lane->spill = nb;
    lane->spill_cap = ncap;
    lane->spill_head = 0;
  }
  for (uint64_t i = 0; i < n; i++)
    lane->spill[(lane->spill_head + len + i) % lane->spill_cap] =
        (lanepool__task){fn, ctxs[i], args ? args[i] : NULL};
  LANEPOOL_INJECT(LANEPOOL__AT_SPILL);
  /* The three counters are written only under spill_lock: stores, not read-modify-writes.
   * release: pairs with the drain scan's acquire (lanepool__lane_accepted). */
  atomic_store_explicit(&lane->spill_in,
                        atomic_load_explicit(&lane->spill_in, memory_order_relaxed) + n,
                        memory_order_release);
  atomic_store_explicit(&lane->overflowed,
                        atomic_load_explicit(&lane->overflowed, memory_order_relaxed) + n,
                        memory_order_relaxed);
  /* seq_cst: ordered before the `sleeping` load in lanepool__lane_push. */
  atomic_store_explicit(&lane->spill_count, len + n, memory_order_seq_cst);
  pthread_mutex_unlock(&lane->spill_lock);
  return 0;
}

static int spill_push(lanepool_lane_t *lane, lanepool_fn fn, void *ctx, void *arg, bool own) {
  return spill_push_n(lane, fn, &ctx, &arg, 1, own);
}

typedef enum { SPILL_EMPTY, SPILL_TOOK, SPILL_RING_FIRST } spill_result;

/* The lane's (or, after the join, the discard pass's) next task from the batch. */
static inline bool batch_pop(lanepool_lane_t *lane, lanepool__task *out) {
  if (lane->batch_next == lane->batch_end) return false;
  *out = lane->batch[lane->batch_next++];
  atomic_store_explicit(&lane->batch_left, lane->batch_end - lane->batch_next,
                        memory_order_relaxed);
  return true;
}

/* Moves up to LANEPOOL__SPILL_BATCH tasks, the oldest, from the overflow list into the
 * lane's batch (which must be empty) in one critical section: one lock per batch, not
 * per task, while producers keep appending. The batch runs before anything else: the
 * ring was empty when it was taken (checked under the lock), so every ring claim since
 * is newer, and a producer appends to the list as long as it is not empty. */
static spill_result spill_take(lanepool_lane_t *lane) {
  if (atomic_load_explicit(&lane->spill_count, memory_order_acquire) == 0) return SPILL_EMPTY;
  pthread_mutex_lock(&lane->spill_lock);
  uint64_t len = atomic_load_explicit(&lane->spill_count, memory_order_relaxed);
  if (len == 0) {
    pthread_mutex_unlock(&lane->spill_lock);
    return SPILL_EMPTY;
  }
  /* Holding the lock, we now see every ring claim made before any listed task was
   * appended. If the ring is not empty, those claims are older: run them first. */
  if (lanepool__ring_tail(&lane->ring, memory_order_seq_cst) != lanepool__ring_head(&lane->ring)) {
    pthread_mutex_unlock(&lane->spill_lock);
    return SPILL_RING_FIRST;
  }
  uint32_t k = len < LANEPOOL__SPILL_BATCH ? (uint32_t)len : LANEPOOL__SPILL_BATCH;
  for (uint32_t i = 0; i < k; i++) {
    lane->batch[i] = lane->spill[lane->spill_head];
    lane->spill_head = (lane->spill_head + 1) % lane->spill_cap;
  }
  lane->batch_next = 0;
  lane->batch_end = k;
  /* Test builds: widen the take (producers wait on the lock meanwhile). */
  LANEPOOL_INJECT(LANEPOOL__AT_SPILL);
  /* Counted in the batch before it leaves the list: depth may count it twice for a
   * moment, never zero times. */
  atomic_store_explicit(&lane->batch_left, k, memory_order_relaxed);
  atomic_store_explicit(&lane->spill_count, len - k, memory_order_seq_cst);
  pthread_mutex_unlock(&lane->spill_lock);
  return SPILL_TOOK;
}

/* ---- producers -------------------------------------------------------------- */


/* A lane woken from inside a running task of another lane of its pool: which, that
 * task, and where it ran (for yield_to_waker; park_begin cleared the note). Nothing for
 * a waker outside the pool or between its tasks, or with no CPU number to give. */
static inline void note_waker(lanepool_lane_t *lane) {
  lanepool_lane_t *cur = lanepool__current;
  if (!cur || cur == lane || cur->pool != lane->pool) return;
  uint64_t task = atomic_load_explicit(&cur->started_tasks, memory_order_relaxed);
  if (atomic_load_explicit(&cur->executed, memory_order_relaxed) == task) return;
  int cpu = sched_getcpu();
  if (cpu < 0) return;
  atomic_store_explicit(&lane->woken_by_task, task, memory_order_relaxed);
  atomic_store_explicit(&lane->woken_on_cpu, cpu, memory_order_relaxed);
  atomic_store_explicit(&lane->woken_by, cur, memory_order_relaxed);
}

/* true if this call woke the lane; `note`: tell it who woke it (note_waker). */
static inline bool wake_lane(lanepool_lane_t *lane, bool note) {
  LANEPOOL_INJECT(LANEPOOL__AT_WAKE);
  /* seq_cst load: see the header comment; the CAS makes exactly one producer pay for
   * the syscall, and leaves a LENT lane alone (its borrower wakes it on return). */
  uint32_t parked = LANE_PARKED;
  if (atomic_load_explicit(&lane->sleeping, memory_order_seq_cst) == LANE_PARKED &&
      atomic_compare_exchange_strong_explicit(&lane->sleeping, &parked, LANE_AWAKE,
                                              memory_order_seq_cst, memory_order_relaxed)) {
    if (note) note_waker(lane);
    LANEPOOL__TRACE(WAKE, lane, 0, NULL, NULL);
    lanepool__futex_wake(&lane->sleeping, 1);
    return true;
  }
  return false;
}

static inline bool wake_if_parked(lanepool_lane_t *lane) { return wake_lane(lane, true); }

void lanepool__lane_wake(lanepool_lane_t *lane) { (void)wake_if_parked(lane); }

/* ---- stealing ----------------------------------------------------------------
 *
 * A task submitted to a band (not to a lane) is pushed into one lane's ring marked
 * stealable (ring.h). If that lane is busy with a long or blocked task, an idle lane of
 * the band takes the marked task at the head of its ring: the lane that watches it
 * (stuck_sibling) sees its queue not move for LANEPOOL__SIBLING_STARVED_NS.
 * Who watches: a spinning lane, between its polls; and the band's lookout, one lane
 * parked with a timeout (LANEPOOL__WATCH_POLL_NS) while a sibling is awake. Parked
 * lanes without a timeout count as `idle`. A producer whose stealable task landed
 * behind a lane that is not parked (so the push woke no one), when the band has no
 * lookout but an idle lane, wakes that lane (nudge_band): it looks, then parks as the
 * lookout. The Dekker pair: producer: CAS(tail) ; load(watching, idle)    parking lane:
 * add(idle) ; load(siblings' sleeping and tails)  (all seq_cst): either the lane sees
 * the sibling awake or its work queued and becomes the lookout, or the producer sees it
 * idle and wakes it. */

/* Wakes a parked lane of `lane`'s band other than `lane` if the band has no lookout and
 * an idle lane. */
static void nudge_band(lanepool_lane_t *lane) {
  lanepool_t *pool = lane->pool;
  uint32_t n = pool->lanes_per_band;
  if (n < 2) return;
  lanepool__band_watch *w = &pool->watch[lane->band];
  if (atomic_load_explicit(&w->watching, memory_order_seq_cst) != 0 ||
      atomic_load_explicit(&w->idle, memory_order_seq_cst) == 0)
    return;
  lanepool_lane_t **lanes = &pool->lanes[lane->band * n];
  for (uint32_t k = 1; k < n; k++)
    if (wake_if_parked(lanes[(lane->index + k) % n])) return;
}

/* Tasks a lane has finished, inline syncs included: its queue moves when this does. */
static inline uint64_t lane_progress(const lanepool_lane_t *lane) {
  return atomic_load_explicit(&((lanepool_lane_t *)lane)->executed, memory_order_relaxed) +
         atomic_load_explicit(&((lanepool_lane_t *)lane)->lent_out, memory_order_relaxed);
}

/* A sibling that is not parked and has work queued: its queue waits for its current
 * task (or for its borrower). */
static inline bool sibling_blocked(const lanepool_lane_t *s) {
  return atomic_load_explicit(&((lanepool_lane_t *)s)->sleeping, memory_order_relaxed) !=
             LANE_PARKED &&
         lanepool__lane_depth(s) != 0;
}

/* The sibling of the band whose queue has not moved for LANEPOOL__SIBLING_STARVED_NS
 * while it was not parked, or NULL. Watches one sibling at a time; looks for another
 * (a few per call, in turn) when the watched one moves on or has nothing queued. */
static lanepool_lane_t *stuck_sibling(lanepool_lane_t *lane, uint64_t now) {
  uint32_t n = lane->pool->lanes_per_band;
  if (n < 2) return NULL;
  lanepool_lane_t **lanes = &lane->pool->lanes[lane->band * n];
  if (lane->steal_victim) {
    lanepool_lane_t *s = lanes[lane->steal_victim - 1];
    if (sibling_blocked(s)) {
      uint64_t p = lane_progress(s);
      if (p == lane->steal_progress)
        return now - lane->steal_since >= LANEPOOL__SIBLING_STARVED_NS ? s : NULL;
      lane->steal_progress = p;
      lane->steal_since = now;
      return NULL;
    }
    lane->steal_victim = 0;
  }
  uint32_t looks = n - 1 < 4 ? n - 1 : 4;
  for (uint32_t k = 0; k < looks; k++) {
    uint32_t i = ++lane->steal_next % n;
    if (i == lane->index) i = ++lane->steal_next % n;
    if (sibling_blocked(lanes[i])) {
      lane->steal_victim = i + 1;
      lane->steal_progress = lane_progress(lanes[i]);
      lane->steal_since = now;
      break;
    }
  }
  return NULL;
}

/* The watched sibling, stuck, with a stealable task at its head: NULL if none. */
static inline lanepool_lane_t *stuck_with_stealable(lanepool_lane_t *lane, uint64_t now) {
  lanepool_lane_t *s = stuck_sibling(lane, now);
  return s && lanepool__ring_head_stealable(&s->ring) ? s : NULL;
}

/* Takes the stealable head task of the watched sibling if it is stuck. */
/* Takes the head task of the sibling a spin or the lookout has just found stuck (they
 * set steal_now; the lane loop's fast path costs one test of it). */
static bool steal_stuck(lanepool_lane_t *lane, lanepool__task *out) {
  lane->steal_now = false;
  if (!lane->steal_victim) return false;
  uint32_t n = lane->pool->lanes_per_band;
  lanepool_lane_t *s = lane->pool->lanes[lane->band * n + lane->steal_victim - 1];
  if (!lanepool__ring_steal(&s->ring, out)) return false;
  atomic_fetch_add_explicit(&lane->stolen, 1, memory_order_relaxed);
  /* More may wait behind it: if no lane watches, wake an idle one to look. */
  if (lanepool__ring_head_stealable(&s->ring)) nudge_band(s);
  return true;
}

/* Older band work first. Band work a lane pushes (the executors' jobs, async from a
 * task) carries the pushing lane's clock (lanepool__stamp). A lane whose next task is
 * such a job looks at its siblings that are not parked: a stamped head at least
 * LANEPOOL__FIFO_LOOK older than its own (the sibling is held up: a long task, or its
 * thread preempted) runs here first, the oldest of up to four siblings. After a look
 * that took nothing, the next waits for an own head LANEPOOL__FIFO_LOOK newer. Swift's
 * global executor is one FIFO for all its threads; this keeps band work near that
 * order without a shared queue, and without the 20 us of stuck_sibling. Work from
 * threads outside the pool carries no stamp and is never looked at here (stuck_sibling
 * still covers it); a sync closure run inline on a lane pushes as that lane. The steal
 * is of the very cell whose stamp was compared (ring_steal_at). */
static bool take_older(lanepool_lane_t *lane, lanepool__task *out) {
  uint64_t at, victim_at = 0;
  uint64_t mine = lanepool__ring_head_stamp(&lane->ring, &at);
  if (!mine || (int64_t)(mine - lane->fifo_look) < (int64_t)LANEPOOL__FIFO_LOOK) return false;
  uint32_t n = lane->pool->lanes_per_band;
  lanepool_lane_t **lanes = &lane->pool->lanes[lane->band * n];
  uint32_t looks = n - 1 < 4 ? n - 1 : 4;
  uint64_t oldest = mine - LANEPOOL__FIFO_LOOK;
  lanepool_lane_t *victim = NULL;
  for (uint32_t k = 0; k < looks; k++) {
    uint32_t i = ++lane->fifo_next % n;
    if (i == lane->index) i = ++lane->fifo_next % n;
    lanepool_lane_t *s = lanes[i];
    if (atomic_load_explicit(&s->sleeping, memory_order_relaxed) == LANE_PARKED) continue;
    uint64_t t = lanepool__ring_head_stamp(&s->ring, &at);
    if (t && (int64_t)(oldest - t) >= 0) {
      oldest = t;
      victim = s;
      victim_at = at;
    }
  }
  /* That cell only: if the sibling took it meanwhile, its next head may be newer. A
   * look that takes nothing waits for a head LANEPOOL__FIFO_LOOK newer; one that takes
   * a task looks again before the lane's own head (more may be older than it). */
  if (!victim || !lanepool__ring_steal_at(&victim->ring, victim_at, out)) {
    lane->fifo_look = mine;
    return false;
  }
  atomic_fetch_add_explicit(&lane->stolen, 1, memory_order_relaxed);
  return true;
}

/* A sibling not parked with a stealable task at its head: band work waiting for it. */
static bool band_work_waits(lanepool_lane_t *lane) {
  uint32_t n = lane->pool->lanes_per_band;
  lanepool_lane_t **lanes = &lane->pool->lanes[lane->band * n];
  for (uint32_t k = 1; k < n; k++) {
    lanepool_lane_t *s = lanes[(lane->index + k) % n];
    if (sibling_blocked(s) && lanepool__ring_head_stealable(&s->ring)) return true;
  }
  return false;
}

/* No sibling has a task in its ring (where band work queues; overflow holds none); for
 * a rescue lane, no lane of its band. Its loads are seq_cst: the lookout's side of the
 * Dekker pair with a band push, which CASes a tail and then reads the band's mark, and
 * the rescue lane's side of its pair (park_spare; the push then reads rescue_idle). */
static bool band_rings_empty(const lanepool_lane_t *lane) {
  uint32_t n = lane->pool->lanes_per_band;
  lanepool_lane_t **lanes = &lane->pool->lanes[lane->band * n];
  for (uint32_t i = 0; i < n; i++) {
    if (i == lane->index) continue; /* its own (a rescue lane's index is n: none) */
    lanepool__ring *r = &lanes[i]->ring;
    if (lanepool__ring_tail(r, memory_order_seq_cst) >
        atomic_load_explicit(&r->head, memory_order_seq_cst))
      return false;
  }
  return true;
}

/* Any sibling not parked (busy, spinning or lent): work pushed behind it may get stuck. */
static bool sibling_awake(lanepool_lane_t *lane) {
  uint32_t n = lane->pool->lanes_per_band;
  lanepool_lane_t **lanes = &lane->pool->lanes[lane->band * n];
  for (uint32_t k = 1; k < n; k++) {
    lanepool_lane_t *s = lanes[(lane->index + k) % n];
    if (atomic_load_explicit(&s->sleeping, memory_order_seq_cst) != LANE_PARKED ||
        lanepool__lane_depth(s) != 0)
      return true;
  }
  return false;
}

/* ---- picking a lane of a band: by key, or for band work (async, timers) ------- */

static inline uint64_t mix64(uint64_t x) { /* splitmix64's finaliser */
  x ^= x >> 30;
  x *= UINT64_C(0xbf58476d1ce4e5b9);
  x ^= x >> 27;
  x *= UINT64_C(0x94d049bb133111eb);
  x ^= x >> 31;
  return x;
}

int lanepool_lane_for_key(lanepool_t *pool, lanepool_qos_t qos, uint64_t key,
                          lanepool_lane_t **out) {
  int b = lanepool_band_index(qos);
  if (!pool || !out || b < 0) return EINVAL;
  if (lanepool__forked(pool->generation)) return EOWNERDEAD;
  uint32_t n = pool->lanes_per_band;
  /* Multiply-shift range reduction on the hash's high 32 bits (plain C11, no __int128). */
  uint32_t i = (uint32_t)(((mix64(key) >> 32) * (uint64_t)n) >> 32);
  *out = pool->lanes[(uint32_t)b * n + i];
  return 0;
}

static __thread uint64_t rng_state;

static inline uint64_t next_random(void) {
  uint64_t x = rng_state;
  if (x == 0) x = mix64((uint64_t)(uintptr_t)&rng_state ^ lanepool__now_ns()) | 1;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  rng_state = x;
  return x;
}

/* A lane of the band spinning idle, if any; else the less loaded of two distinct random
 * lanes (power of two choices), a parked one on a tie (an awake lane with nothing
 * queued is most likely running a task). */
lanepool_lane_t *lanepool__pick(lanepool_t *pool, int band) {
  uint32_t n = pool->lanes_per_band;
  lanepool_lane_t **lanes = &pool->lanes[(uint32_t)band * n];
  if (n == 1) return lanes[0];
  uint32_t w = lanepool__take_warm(pool, band); /* a lane spinning idle first: no wake */
  if (w) return lanes[w - 1];
  uint64_t r = next_random();
  uint32_t i = (uint32_t)((r & 0xffffffffu) % n);
  uint32_t j = (uint32_t)((r >> 32) % (n - 1));
  if (j >= i) j++;
  uint64_t di = lanepool__lane_depth(lanes[i]), dj = lanepool__lane_depth(lanes[j]);
  if (di != dj) return dj < di ? lanes[j] : lanes[i];
  return atomic_load_explicit(&lanes[i]->sleeping, memory_order_relaxed) == LANE_AWAKE ? lanes[j]
                                                                                       : lanes[i];
}

static inline int push_once(lanepool_lane_t *lane, lanepool_fn fn, void *ctx, void *arg,
                            unsigned flags) {
  uint64_t stamp = (flags & LANEPOOL__PUSH_STAMP) ? lanepool__stamp() : 0;
  if (lane->hard_capacity)
    return lanepool__ring_push_stamped(&lane->ring, fn, ctx, arg, flags, stamp);
  if (atomic_load_explicit(&lane->spill_count, memory_order_acquire) == 0) {
    int rc = lanepool__ring_push_stamped(&lane->ring, fn, ctx, arg, flags, stamp);
    if (rc != EAGAIN) return rc;
  }
  return spill_push(lane, fn, ctx, arg, flags & LANEPOOL__PUSH_OWN);
}

static int lane_push(lanepool_lane_t *lane, lanepool_fn fn, void *ctx, void *arg, unsigned flags) {
  LANEPOOL__TRACE(PUSH, lane, 0, fn, ctx);
  int rc = push_once(lane, fn, ctx, arg, flags);
  if (__builtin_expect(rc == LANEPOOL__RING_OWN_ONLY, 0))
    /* The pool drains: only its own lanes may still add work (the drain's tail). */
    rc = lanepool__is_own_lane(lane->pool)
             ? push_once(lane, fn, ctx, arg, flags | LANEPOOL__PUSH_OWN)
             : ESHUTDOWN;
  if (rc) return rc;
  /* A stealable task behind a lane that is not parked: make sure a sibling looks out. */
  if (flags & LANEPOOL__PUSH_STEAL) {
    /* The band takes band work: its parked lanes look out (park()) until a lookout
     * finds the band's rings empty (lookout()). A read first (seq_cst: after the tail
     * CAS, the Dekker pair with that lookout), so the line is written only when a
     * lookout has cleared it, not per push. */
    _Atomic uint32_t *seen = &lane->pool->watch[lane->band].band_work;
    if (!atomic_load_explicit(seen, memory_order_seq_cst))
      atomic_store_explicit(seen, 1, memory_order_seq_cst);
    if (!wake_if_parked(lane)) nudge_band(lane);
    /* The band's rescue lane, parked without a timeout, must tick while this task may
     * get stuck (the Dekker pair with park_spare: tail CAS, then this seq_cst load). */
    if (__builtin_expect(
            atomic_load_explicit(&lane->pool->watch[lane->band].rescue_idle, memory_order_seq_cst),
            0))
      (void)wake_lane(lanepool__rescue_lane(lane->pool, lane->band), false); /* never yields */
  } else {
    (void)wake_lane(lane, !(flags & LANEPOOL__PUSH_WAITS));
  }
  lanepool_lane_t *cur = lanepool__current;
  if (cur && cur != lane && cur->pool == lane->pool) cur->handed_off = true;
  return 0;
}

/* A call under way from before the task is published to after its wake: destroy
 * waits for it (calls.c), since the task may run and its owner destroy the pool
 * before this thread is out. */
int lanepool__lane_push(lanepool_lane_t *lane, lanepool_fn fn, void *ctx, void *arg,
                        unsigned flags) {
  if (lanepool__forked(lane->generation)) return EOWNERDEAD;
  const void *outer = lanepool__call_enter(lane);
  int rc = lane_push(lane, fn, ctx, arg, flags);
  lanepool__call_leave(outer);
  return rc;
}

/* A batch: ring cells claimed with one CAS per run of free cells, the rest appended to
 * the overflow list in one critical section, one wake check at the end. */
static int lane_push_many(lanepool_lane_t *lane, lanepool_fn fn, void *const *ctxs,
                          void *const *args, uint64_t n, bool own, uint64_t *accepted) {
  uint64_t done = 0;
  int rc = 0;
  while (done < n) {
    if (lane->hard_capacity ||
        atomic_load_explicit(&lane->spill_count, memory_order_acquire) == 0) {
      uint64_t k = 0;
      rc = lanepool__ring_push_n(&lane->ring, fn, ctxs + done, args ? args + done : NULL, n - done,
                                 own, &k);
      if (rc == 0) {
        done += k;
        continue;
      }
      if (rc != EAGAIN || lane->hard_capacity) break;
    }
    rc = spill_push_n(lane, fn, ctxs + done, args ? args + done : NULL, n - done, own);
    if (rc == 0) done = n;
    break;
  }
  *accepted = done;
  return done == n ? 0 : rc;
}

uint64_t lanepool__lane_depth(const lanepool_lane_t *lane) {
  lanepool_lane_t *l = (lanepool_lane_t *)lane;
  return lanepool__ring_depth(&lane->ring) +
         atomic_load_explicit(&l->spill_count, memory_order_relaxed) +
         atomic_load_explicit(&l->batch_left, memory_order_relaxed);
}

/* Tasks ever accepted: ring claims plus overflow appends. Monotonic. */
uint64_t lanepool__lane_accepted(lanepool_lane_t *lane) {
  return lanepool__ring_tail(&lane->ring, memory_order_seq_cst) +
         atomic_load_explicit(&lane->spill_in, memory_order_acquire) +
         atomic_load_explicit(&lane->lent_in, memory_order_seq_cst);
}

/* Tasks finished. Monotonic; acquire: a task's own submits happen before. */
uint64_t lanepool__lane_finished(lanepool_lane_t *lane) {
  return atomic_load_explicit(&lane->executed, memory_order_acquire) +
         atomic_load_explicit(&lane->lent_out, memory_order_acquire);
}

/* Sets the intake of the overflow list and of the ring (OWN_ONLY or CLOSED). */
void lanepool__lane_set_intake(lanepool_lane_t *lane, int intake) {
  LANEPOOL_INJECT(LANEPOOL__AT_INTAKE);
  pthread_mutex_lock(&lane->spill_lock);
  if (intake > lane->spill_intake) lane->spill_intake = intake;
  pthread_mutex_unlock(&lane->spill_lock);
  lanepool__ring_close(&lane->ring,
                       intake == LANEPOOL__INTAKE_CLOSED ? LANEPOOL__CLOSED : LANEPOOL__OWN_ONLY);
  wake_if_parked(lane);
}

/* ---- the lane thread -------------------------------------------------------- */

static inline bool has_work(lanepool_lane_t *lane, memory_order order) {
  return lanepool__ring_tail(&lane->ring, order) != atomic_load_explicit(&lane->ring.head, order) ||
         atomic_load_explicit(&lane->spill_count, order) != 0;
}

/* Spins up to lane->spin_ns waiting for work. true if work (or close) showed up. */
static bool spin_for_work(lanepool_lane_t *lane) {
  uint32_t budget = lane->fixed_spin ? lane->spin_ns : lane->spin_now;
  bool handed_off = lane->handed_off; /* see below */
  lane->handed_off = false;
  if (budget == 0) return false;
  /* Take a spinner slot, or park at once: spinning lanes must leave cores to the
   * producers (a soft cap: a relaxed counter, no ordering needed). The low-latency
   * interactive band has one slot of its own. */
  _Atomic uint32_t *spinners =
      lane->low_latency ? &lane->pool->interactive_spinner : &lane->pool->spinners;
  uint32_t slots = lane->low_latency ? 1 : lane->pool->max_spinners;
  /* Just handed work to another lane: its answer (an actor's reply, the next step of a
   * chain) tends to come back within microseconds, and the receiver, busy now, may be
   * the spinner that holds the slot. Spin past the cap, on the adaptive budget: a
   * hand-off whose answer does not come halves it, as any spin that finds nothing. */
  if (atomic_fetch_add_explicit(spinners, 1, memory_order_relaxed) >= slots && !handed_off) {
    atomic_fetch_sub_explicit(spinners, 1, memory_order_relaxed);
    return false;
  }
  /* Offer this lane to the pickers while it spins (pool->warm: a hint, relaxed): a
   * picker that claims it sends its work here instead of waking a parked sibling. The
   * offer is renewed after a claim whose work never came (a queue(for:) that was not
   * used), and withdrawn at the end unless a picker holds it. */
  _Atomic uint32_t *warm = &lane->pool->warm[lane->band].value;
  /* 0 (nothing to offer): a band of one lane, which every pick returns anyway. */
  const uint32_t me = lane->pool->lanes_per_band > 1 ? lane->index + 1 : 0;
  if (me) atomic_store_explicit(warm, me, memory_order_relaxed);
  bool found = false;
  uint64_t last = lanepool__now_ns();
  uint64_t deadline = last + budget;
  lane->steal_victim = 0; /* each spin watches afresh: a sibling is stuck after 20 us of it */
  while (!found) {
    for (int i = 0; i < 64; i++) {
      if (has_work(lane, memory_order_relaxed) ||
          (atomic_load_explicit(&lane->ring.tail, memory_order_relaxed) & LANEPOOL__CLOSED)) {
        found = true;
        break;
      }
      cpu_relax();
    }
    if (found) break;
    uint64_t t = lanepool__now_ns();
    /* Past the budget; or preempted: a thread that needed this CPU got it, so there
     * is no idle CPU to spin on, and work sent here would wait for this lane to be
     * scheduled again. Either way, park (work then wakes it: the kernel can place a
     * woken thread where a CPU is free). */
    if (t >= deadline || t - last >= LANEPOOL__SPIN_PREEMPTED_NS) break;
    /* A sibling's queue has not moved: take its stealable head task (the loop steals
     * it); with a lane-bound task there, it may wait for a CPU, maybe this one: free it
     * (parking lets the kernel run it here, or pull it here from a busy CPU). */
    lanepool_lane_t *stuck = stuck_sibling(lane, t);
    if (stuck) {
      found = lane->steal_now = lanepool__ring_head_stealable(&stuck->ring);
      break;
    }
    last = t;
    sched_yield(); /* cede the core to a runnable producer, if any */
    if (me && atomic_load_explicit(warm, memory_order_relaxed) == 0)
      atomic_store_explicit(warm, me, memory_order_relaxed);
  }
  uint32_t offered = me;
  if (me)
    atomic_compare_exchange_strong_explicit(warm, &offered, 0, memory_order_relaxed,
                                            memory_order_relaxed);
  atomic_fetch_sub_explicit(spinners, 1, memory_order_relaxed);
  /* A spin that timed out burned CPU for nothing: halve the budget (below 1 us: 0). */
  if (!found) lane->spin_now = budget / 2 >= 1000 ? budget / 2 : 0;
  return found;
}

/* After a park: if the lane was woken sooner than its maximum budget, spinning would
 * have caught that work: grow the budget to what would have caught it with room to
 * spare (twice the park), at least doubling it, at least 1 us, at most spin_ns.
 * (Doubling alone never recovers from a steady gap: a 1 us budget against work every
 * 20 us times out, halves to 0, and the next park only doubles it back to 1 us.) */
static void adapt_after_park(lanepool_lane_t *lane, uint64_t parked_ns) {
  if (lane->fixed_spin || lane->spin_ns == 0 || parked_ns >= lane->spin_ns) return;
  uint64_t grown = lane->spin_now ? (uint64_t)lane->spin_now * 2 : 1000;
  if (grown < 2 * parked_ns) grown = 2 * parked_ns;
  lane->spin_now = grown < lane->spin_ns ? (uint32_t)grown : lane->spin_ns;
}

/* Parked with a timeout as the band's lookout: true if it is time to go and steal (the
 * lane is AWAKE again, by its own CAS). Gives the lookout up (to park without a timeout)
 * once no sibling is awake or the band's work is over (its mark cleared). */
static bool lookout(lanepool_lane_t *lane, bool *watching) {
  lanepool__band_watch *w = &lane->pool->watch[lane->band];
  uint64_t now = lanepool__now_ns();
  if (stuck_with_stealable(lane, now)) {
    uint32_t parked = LANE_PARKED;
    /* AWAKE by this CAS: no borrower can take the lane while it runs a stolen task. */
    lane->steal_now = atomic_compare_exchange_strong_explicit(
        &lane->sleeping, &parked, LANE_AWAKE, memory_order_seq_cst, memory_order_relaxed);
    return lane->steal_now;
  }
  /* Band work comes and goes: once every sibling's ring is empty the band's mark is
   * cleared, so that lanes park untimed again (a timed park costs a timer per park,
   * and on a VM a timer can cost an exit) until the next band push marks it. Cleared,
   * then a second look: a push the first look missed either read the mark before the
   * clear (this look sees its task and marks again) or after (it marks itself). */
  if (atomic_load_explicit(&w->band_work, memory_order_relaxed) && band_rings_empty(lane)) {
    atomic_store_explicit(&w->band_work, 0, memory_order_seq_cst);
    if (!band_rings_empty(lane)) atomic_store_explicit(&w->band_work, 1, memory_order_seq_cst);
  }
  if (atomic_load_explicit(&w->band_work, memory_order_seq_cst) && sibling_awake(lane))
    return false;
  /* Band work over (the mark clear), or every sibling parked: idle first, then no
   * longer the lookout (an untimed park from now on), then look once more (the Dekker
   * pair with a band push, which sets the mark and then reads watching and idle in
   * nudge_band). model/steal.pml checks this. */
  atomic_fetch_add_explicit(&w->idle, 1, memory_order_seq_cst);
  atomic_store_explicit(&w->watching, 0, memory_order_seq_cst);
  *watching = false;
  uint32_t none = 0;
  if (atomic_load_explicit(&w->band_work, memory_order_seq_cst) && sibling_awake(lane) &&
      atomic_compare_exchange_strong_explicit(&w->watching, &none, 1, memory_order_seq_cst,
                                              memory_order_relaxed)) {
    atomic_fetch_sub_explicit(&w->idle, 1, memory_order_seq_cst);
    *watching = true;
  }
  return false;
}

/* Woken by a lane's task that is still running, on the CPU that task ran on: the
 * kernel found no idle CPU and put this lane beside its waker, whose task it would
 * preempt (EEVDF's wake-up preemption). Both are the band's, so this gains no
 * parallelism; it only stops the waker in mid-task, until this lane parks again or
 * its slice ends, and work the waker's task was about to make (a reply, a job) waits
 * behind everything this lane runs meanwhile. One sched_yield lets the waker go on
 * first (the kernel may still pick this lane: a hint, as a sync wake-up is). Not for
 * a lane on a CPU of its own, nor after its waker's task ended, nor for a waker that
 * blocks until the pushed task ran (a queued sync: LANEPOOL__PUSH_WAITS). The note is
 * the waker's, written after its CAS; park_begin clears it before the lane's next
 * PARKED, so a note never outlives its park. Returns 1 if it yielded (for the trace). */
static unsigned yield_to_waker(lanepool_lane_t *lane) {
  lanepool_lane_t *w = atomic_load_explicit(&lane->woken_by, memory_order_relaxed);
  if (!w || atomic_load_explicit(&lane->woken_on_cpu, memory_order_relaxed) != sched_getcpu() ||
      atomic_load_explicit(&w->executed, memory_order_relaxed) >=
          atomic_load_explicit(&lane->woken_by_task, memory_order_relaxed))
    return 0;
  sched_yield();
  atomic_fetch_add_explicit(&lane->yields, 1, memory_order_relaxed);
  return 1;
}

/* A park's first step, for park() and park_spare(): PARKED, then one more look at the
 * lane's own queue and closed bit (the lane's side of the wake-up pair with a
 * producer: CAS(tail) ; load(sleeping)). true if work came and the lane is AWAKE again
 * by its own CAS; false if it parks on, the drain's driver told that it is idle. */
static bool park_begin(lanepool_lane_t *lane) {
  /* Before PARKED (release): a waker's note, after its CAS, comes later. */
  atomic_store_explicit(&lane->woken_by, NULL, memory_order_relaxed);
  atomic_store_explicit(&lane->sleeping, LANE_PARKED, memory_order_seq_cst);
  LANEPOOL_INJECT(LANEPOOL__AT_PARK);
  if (has_work(lane, memory_order_seq_cst) || lanepool__ring_closed(&lane->ring)) {
    uint32_t parked = LANE_PARKED;
    if (atomic_compare_exchange_strong_explicit(&lane->sleeping, &parked, LANE_AWAKE,
                                                memory_order_seq_cst, memory_order_relaxed))
      return true;
    /* LENT meanwhile: the borrower sees this work too when it gives the lane back,
     * and wakes it then. Until then the lane must not run. */
  }
  /* Idle: if the pool drains, its driver may be waiting for this moment. */
  lanepool__drain_idle(lane->pool);
  return false;
}

static void park(lanepool_lane_t *lane) {
  if (park_begin(lane)) return;
  LANEPOOL__TRACE(PARK, lane, 0, NULL, NULL);
  /* Idle first, then look at the siblings (the Dekker pair with nudge_band): the band's
   * lookout if the band takes band work, a sibling is awake and nobody else looks out.
   * (A band that only ever had lane-bound work parks without a timeout: a timed wait
   * costs a timer per park, and nothing of it could be stolen. Its first band task
   * comes with a nudge, or with a wake of its lane.) */
  lanepool__band_watch *w = &lane->pool->watch[lane->band];
  atomic_fetch_add_explicit(&w->idle, 1, memory_order_seq_cst);
  bool watching = false;
  uint32_t none = 0;
  if (lane->pool->lanes_per_band > 1 && atomic_load_explicit(&w->band_work, memory_order_seq_cst) &&
      sibling_awake(lane) &&
      atomic_compare_exchange_strong_explicit(&w->watching, &none, 1, memory_order_seq_cst,
                                              memory_order_relaxed)) {
    atomic_fetch_sub_explicit(&w->idle, 1, memory_order_seq_cst);
    watching = true;
  }
  uint64_t t0 = lanepool__now_ns();
  bool stealing = false;
  uint32_t v;
  /* acquire: pairs with the waker's CAS to AWAKE (a release sequence that starts at a
   * borrower's release store of PARKED, so the inline closure happens before). */
  while ((v = atomic_load_explicit(&lane->sleeping, memory_order_acquire)) != LANE_AWAKE) {
    /* The lookout waits with a timeout whatever the word holds: lent to a sync caller
     * and given back, it must go on looking (a give-back wakes no one when nothing was
     * queued). Its steal CAS fails while the lane is lent. */
    if (!watching)
      lanepool__futex_wait(&lane->sleeping, v);
    else if (lanepool__futex_wait_for(&lane->sleeping, v, LANEPOOL__WATCH_POLL_NS) &&
             lookout(lane, &watching))
      stealing = true;
  }
  if (watching) {
    atomic_store_explicit(&w->watching, 0, memory_order_seq_cst);
    /* Woken for work of its own while band work waits behind a sibling: pass the
     * lookout on (only then: a wake per hand-over would cost lane-bound traffic a
     * futex call each time). */
    if (!stealing && lane->pool->lanes_per_band > 2 && band_work_waits(lane)) nudge_band(lane);
  } else {
    atomic_fetch_sub_explicit(&w->idle, 1, memory_order_seq_cst);
  }
  if (!stealing) adapt_after_park(lane, lanepool__now_ns() - t0);
  unsigned yielded = yield_to_waker(lane);
  LANEPOOL__TRACE(UNPARK, lane, yielded, NULL, NULL);
}

static void sync_trampoline(void *arg);
static void sync_discard(void *arg);

/* A queued `sync` (a ring cell's or a task's fn, ctx, arg) is answered ECANCELED and
 * marked (fn NULL) so the discard pass skips it. */
static inline void cancel_if_sync(lanepool__ring_fn *fn, void *ctx, void *arg) {
  if (*fn == sync_trampoline && !arg) {
    sync_discard(ctx);
    *fn = NULL;
  }
}

/* Cancel: the driver closes intake everywhere right after the pool became CANCELLING;
 * wait for this ring's CLOSED bit, after which the claims are final.
 * Every `sync` still queued is answered ECANCELED now, by the lane itself, so that a
 * task of another lane waiting on it returns and that lane can be joined; its cell is
 * marked (fn NULL) so the discard pass skips it. Everything else stays queued for the
 * discard pass, which runs on the shutdown thread after every lane was joined. */
static void cancel_queued_syncs(lanepool_lane_t *lane) {
  LANEPOOL_INJECT(LANEPOOL__AT_CANCEL);
  lanepool__ring *r = &lane->ring;
  uint64_t t;
  while (!((t = atomic_load_explicit(&r->tail, memory_order_seq_cst)) & LANEPOOL__CLOSED)) {
    LANEPOOL_INJECT(LANEPOOL__AT_SPIN);
    sched_yield(); /* the driver is closing the lanes one by one: a short wait */
  }
  uint64_t end = t & ~LANEPOOL__TAIL_FLAGS;
  /* A thief that looked at the state before the cancel may still take a stealable
   * head cell (never a sync): wait_cell skips what it took. */
  for (uint64_t pos = lanepool__ring_head(r); pos < end; pos++) {
    lanepool__slot *slot = lanepool__ring_wait_cell(r, pos);
    if (slot && !lanepool__ring_stealable(slot)) cancel_if_sync(&slot->fn, slot->ctx, slot->arg);
  }
  pthread_mutex_lock(&lane->spill_lock);
  uint64_t len = atomic_load_explicit(&lane->spill_count, memory_order_relaxed);
  for (uint64_t i = 0; i < len; i++) {
    lanepool__task *task = &lane->spill[(lane->spill_head + i) % lane->spill_cap];
    cancel_if_sync(&task->fn, task->ctx, task->arg);
  }
  pthread_mutex_unlock(&lane->spill_lock);
  for (uint32_t i = lane->batch_next; i < lane->batch_end; i++)
    cancel_if_sync(&lane->batch[i].fn, lane->batch[i].ctx, lane->batch[i].arg);
}

/* A forked child that was made by a task (fork() inside a task) is a copy of this lane
 * thread, alone in its process, with none of the pool's other threads. It must not go
 * on running the lane's queue (the parent runs it). Once the task returns to the lane
 * loop, the child ends: a note on stderr, then _exit(0) (only async-signal-safe calls
 * are allowed in such a child). A child that wants to live on must not return. */
static void forked_child_returned(lanepool_lane_t *lane) {
  static const char msg[] =
      "lanepool: a process forked inside a task returned to its lane loop; the child exits "
      "(status 0)\n";
  (void)lane;
  ssize_t ignored = write(2, msg, sizeof msg - 1);
  (void)ignored;
  _exit(0);
}

/* Runs one task: fn(ctx), or fn(ctx, arg) for a two-argument task (arg != NULL; see
 * ring.h). fn was stored as lanepool__ring_fn and is called through the type it was
 * submitted with (a function pointer converted and converted back compares equal). */
static inline void run_task(const lanepool__task *task) {
  if (task->arg)
    ((lanepool_fn2)(void (*)(void))task->fn)(task->ctx, task->arg);
  else
    task->fn(task->ctx);
}

/* ---- the rescue lane ------------------------------------------------------------
 *
 * Stealing needs a free lane of the band. When every lane of a band is held by a task
 * that does not end (blocked on a lock, a semaphore or a sync, waiting for band work
 * that is queued behind one of them), nobody takes that work, and without more
 * threads the band stays stuck. Swift's executor on Linux (libdispatch's workqueue
 * monitor, once a second) starts another thread in that case; LanePool keeps one
 * more lane per band for it, its rescue lane: a lane like the others (its band's
 * policy, its own ring for what its tasks push locally, joined, drained and cancelled
 * with them) that no band pick reaches. Its own queue empty, it looks at its band's
 * lanes: one awake with work queued that has finished no task for LANEPOOL__RESCUE_NS
 * gives up its stealable head task to it, the same steal an idle sibling makes, or,
 * behind a lane-bound head, its oldest band task further back (rescue_behind_head),
 * and the lane looks again after each task it ran. It parks with that timeout while any
 * ring of its band holds work (or for one timeout after a wake), and without one
 * otherwise: a band push then wakes it (rescue_idle; seq_cst on both sides: it stores
 * the flag, then reads the rings; a push CASes a tail, then reads the flag). So an idle
 * pool's rescue lanes do not wake, and a busy band's wakes its own at most once per
 * timeout. It adds one thread, for one stuck task at a time: a rescued task that
 * blocks in turn waits for its own band lane to finish. */

/* The oldest band task queued behind a lane-bound head of a held lane's ring (ring.h,
 * "Rescue out of order"); a stealable head is the steal's, and a head not published yet
 * is looked at again next time. Work in the lane's overflow list is out of reach (only
 * its lane takes it). */
static bool rescue_behind_head(lanepool__ring *r, lanepool__task *out) {
  uint64_t head;
  if (!lanepool__ring_bound_head(r, &head)) return false; /* band work first: the steal's */
  bool took = false;
  lanepool__ring_rescue_begin(r);
  uint64_t tail = lanepool__ring_tail(r, memory_order_acquire);
  for (uint64_t pos = head + 1; pos < tail && !took; pos++)
    took = lanepool__ring_rescue_at(r, pos, out);
  lanepool__ring_rescue_end(r);
  return took;
}

/* Takes the stealable head task (or, behind a lane-bound head, the oldest band task) of
 * a band lane that has work queued now and has been awake, finishing nothing, for
 * LANEPOOL__RESCUE_NS (with an empty queue for some of
 * that time too: a job that a rescued task hands on to a held lane is taken back at the
 * next look, not after another timeout). */
static bool rescue_take(lanepool_lane_t *spare, lanepool__task *out) {
  uint32_t n = spare->pool->lanes_per_band;
  lanepool_lane_t **lanes = &spare->pool->lanes[spare->band * n];
  uint64_t now = lanepool__now_ns();
  for (uint32_t i = 0; i < n; i++) {
    lanepool_lane_t *s = lanes[i];
    uint64_t *seen = &spare->rescue_seen[2 * i];
    uint64_t p = lane_progress(s);
    if (p != seen[0] || atomic_load_explicit(&s->sleeping, memory_order_relaxed) == LANE_PARKED) {
      seen[0] = p;
      seen[1] = now;
      continue;
    }
    /* ring_steal takes only a published, stealable head: nothing queued, nothing taken.
     * Behind a lane-bound head (which only its lane may run, after the task that does not
     * end), the oldest band task further back is taken out of order. */
    if (now - seen[1] >= LANEPOOL__RESCUE_NS &&
        (lanepool__ring_steal(&s->ring, out) || rescue_behind_head(&s->ring, out))) {
      atomic_fetch_add_explicit(&spare->stolen, 1, memory_order_relaxed);
      return true;
    }
  }
  return false;
}

static void park_spare(lanepool_lane_t *lane) {
  if (park_begin(lane)) return;
  LANEPOOL__TRACE(PARK, lane, 0, NULL, NULL);
  _Atomic uint32_t *idle = &lane->pool->watch[lane->band].rescue_idle;
  bool timed = lanepool__now_ns() < lane->rescue_calm_until || !band_rings_empty(lane);
  if (!timed) {
    atomic_store_explicit(idle, 1, memory_order_seq_cst);
    if (!band_rings_empty(lane)) {
      atomic_store_explicit(idle, 0, memory_order_relaxed);
      timed = true;
    }
  }
  uint32_t v;
  /* acquire: pairs with a waker's CAS to AWAKE, as in park() (a rescue lane is never
   * lent: lane_borrow). */
  while ((v = atomic_load_explicit(&lane->sleeping, memory_order_acquire)) != LANE_AWAKE) {
    if (!timed) {
      lanepool__futex_wait(&lane->sleeping, v);
    } else if (lanepool__futex_wait_for(&lane->sleeping, v, LANEPOOL__RESCUE_NS)) {
      uint32_t parked = LANE_PARKED; /* time to look (fails if a waker's CAS came first) */
      if (atomic_compare_exchange_strong_explicit(&lane->sleeping, &parked, LANE_AWAKE,
                                                  memory_order_seq_cst, memory_order_relaxed))
        break;
    }
  }
  if (!timed) {
    atomic_store_explicit(idle, 0, memory_order_relaxed);
    lane->rescue_calm_until = lanepool__now_ns() + LANEPOOL__RESCUE_NS;
  }
  LANEPOOL__TRACE(UNPARK, lane, 0, NULL, NULL);
}

static void lane_loop(lanepool_lane_t *lane) {
  lanepool_t *pool = lane->pool;
  uint64_t executed = atomic_load_explicit(&lane->executed, memory_order_relaxed);
  uint64_t busy_since = 0;
  for (;;) {
    /* acquire: pairs with the CAS (OPEN or DRAINING -> CANCELLING) that made the
     * pool CANCELLING. Whoever saw CANCELLING before this load cannot see this lane
     * start another task. */
    LANEPOOL_INJECT(LANEPOOL__AT_STATE);
    if (lanepool__life_cancelling(pool)) {
      cancel_queued_syncs(lane);
      break;
    }
    lanepool__task task;
    /* A sibling found stuck with band work at its head: that task first (it is older
     * than anything of this lane's own that arrived since). */
    bool got = __builtin_expect(lane->steal_now, 0) && steal_stuck(lane, &task);
    unsigned source = got ? LANEPOOL__FROM_STUCK : LANEPOOL__FROM_OLDER;
    /* (Nothing pushes a stamped or marked cell to a rescue lane, only lane-bound work
     * reaches its ring: take_older returns at once there.) */
    if (!got && pool->lanes_per_band > 1 && lane->batch_next == lane->batch_end)
      got = take_older(lane, &task);
    if (!got) {
      source = LANEPOOL__FROM_OWN;
      got = batch_pop(lane, &task) || lanepool__ring_pop(&lane->ring, &task);
    }
    if (!got) {
      if (lanepool__ring_tail(&lane->ring, memory_order_acquire) !=
          atomic_load_explicit(&lane->ring.head, memory_order_acquire)) {
        LANEPOOL_INJECT(LANEPOOL__AT_SPIN);
        cpu_relax(); /* a producer claimed a cell and is about to publish it */
        continue;
      }
      spill_result sr = spill_take(lane);
      if (sr == SPILL_RING_FIRST) continue;
      got = sr == SPILL_TOOK && batch_pop(lane, &task);
    }
    /* The rescue lane, its own queue empty: a band lane's task stuck behind a task
     * that does not end. Not once its ring is closed: the pool cancels, or the drain's
     * balance held (a continuation accepted after it that gets stuck behind a band
     * lane is not rescued then; it waits for that lane, as before rescue lanes). */
    if (!got && __builtin_expect(lane->spare, 0) && !lanepool__ring_closed(&lane->ring)) {
      source = LANEPOOL__FROM_RESCUE;
      got = rescue_take(lane, &task);
    }
    if (got) {
      if (!busy_since) busy_since = lanepool__now_ns();
      /* started != executed while a task runs: what the stall detector watches. */
      atomic_store_explicit(&lane->started_tasks, executed + 1, memory_order_relaxed);
      LANEPOOL__TRACE(RUN, lane, source, task.fn, task.ctx);
      run_task(&task);
      LANEPOOL__TRACE(END, lane, 0, NULL, NULL);
      if (lanepool__forked(lane->generation)) forked_child_returned(lane);
      /* release: pairs with the drain scan's acquire (lanepool__lane_finished). */
      LANEPOOL_INJECT(LANEPOOL__AT_COUNTER);
      atomic_store_explicit(&lane->executed, ++executed, memory_order_release);
      /* Busy with work of its own: every LANEPOOL__BUSY_LOOK tasks, a look at the
       * watched sibling. Stuck with band work at its head (a job blocked waiting for
       * what it queued), one task is taken from it before the next of this lane's own:
       * band work does not wait behind a blocked lane even when no lane of its band
       * is idle. (Spins and the lookout cover the idle case.) Only while the band
       * carries band work (its mark, a relaxed read): lane-bound work alone, as from a
       * producer feeding lanes, never pays the clock read and the sibling's lines. */
      if ((executed & (LANEPOOL__BUSY_LOOK - 1)) == 0 && pool->lanes_per_band > 1 && !lane->spare &&
          atomic_load_explicit(&pool->watch[lane->band].band_work, memory_order_relaxed) &&
          stuck_with_stealable(lane, lanepool__now_ns()))
        lane->steal_now = true;
      continue;
    }
    /* Empty. */
    if (busy_since) {
      atomic_fetch_add_explicit(&lane->busy_ns, lanepool__now_ns() - busy_since,
                                memory_order_relaxed);
      busy_since = 0;
    }
    if (lanepool__ring_closed(&lane->ring)) {
      /* CLOSED was set after the overflow list was closed, so nothing can arrive any
       * more; one last look for what arrived before. */
      if (has_work(lane, memory_order_seq_cst)) continue;
      break;
    }
    if (lane->spare) {
      park_spare(lane);
      continue;
    }
    if (spin_for_work(lane)) continue;
    park(lane);
  }
  if (busy_since)
    atomic_fetch_add_explicit(&lane->busy_ns, lanepool__now_ns() - busy_since,
                              memory_order_relaxed);
}

static void *lane_resume(void *arg);

/* A task ended the lane's thread (pthread_exit, or pthread_cancel at a cancellation
 * point): the unwinding runs this. The task counts as finished (it ran, once); a
 * successor thread takes the lane over and runs the rest of its queue, so nothing
 * accepted is lost and shutdown can still join the lane. */
static void thread_lost(void *arg) {
  lanepool_lane_t *lane = arg;
  atomic_store_explicit(&lane->executed,
                        atomic_load_explicit(&lane->started_tasks, memory_order_relaxed),
                        memory_order_release);
  lanepool__current = NULL;
  lanepool__pool_thread = NULL;
  if (lanepool__forked(lane->generation)) return; /* a forked child's copy: let it end */
  lanepool__lane_thread_leaving(lane);
  pthread_mutex_lock(&lane->thread_lock);
  pthread_t next;
  int rc = lanepool__thread_start(&next, lane->stack_size, lane_resume, lane);
  if (rc) {
    char msg[200];
    int n = snprintf(msg, sizeof msg,
                     "lanepool: a task ended the thread of lane %s and no successor thread "
                     "could be started (%s); stopping, since its queued tasks could never run\n",
                     lane->name, strerror(rc));
    ssize_t ignored = write(2, msg, n > 0 ? (size_t)n : 0);
    (void)ignored;
    abort();
  }
  /* This thread is the lane's current one, of generation thread_gen: a successor may
   * already run tasks, but its own thread_lost takes thread_lock, so it reads thread_gen
   * only after this update. */
  uint64_t mine = lane->thread_gen;
  lane->thread = next; /* the joiner follows the chain (lanepool__lane_join) */
  lane->thread_gen = mine + 1;
  /* Nobody will join this thread unless the joiner already took it (it read `thread`
   * before this update): otherwise it detaches itself, so its stack and descriptor are
   * freed when it ends instead of kept until the process exits. Its last touch of the
   * lane is the unlock below. */
  if (lane->join_claim != mine + 1) pthread_detach(pthread_self());
  pthread_mutex_unlock(&lane->thread_lock);
}

static void lane_enter(lanepool_lane_t *lane, lanepool__applied *applied) {
  lanepool__current = lane;
  lanepool__pool_thread = lane->pool;
  pthread_setname_np(pthread_self(), lane->name);
  pid_t tid = (pid_t)syscall(SYS_gettid);
  /* Placement and OS policy are applied here, by the lane itself, before it runs any
   * task: nice, I/O priority and timer slack are per thread and only some of them can
   * be set from outside. */
  applied->placement_error = lanepool__apply_placement(lane);
  lanepool__apply_policy(applied, tid, &lane->policy);
  atomic_store_explicit(&lane->running, 1, memory_order_relaxed);
  atomic_store_explicit(&lane->tid, (int)tid, memory_order_release);
  lanepool__boost_thread_started(lane); /* waiters may hold a boost for this lane */
}

static void lane_run(lanepool_lane_t *lane) {
  pthread_cleanup_push(thread_lost, lane);
  lane_loop(lane);
  pthread_cleanup_pop(0);
  lanepool__lane_thread_leaving(lane);
  atomic_store_explicit(&lane->running, 0, memory_order_relaxed);
  lanepool__current = NULL;
  lanepool__pool_thread = NULL;
  LANEPOOL_INJECT(LANEPOOL__AT_EXIT);
}

static void *lane_main(void *arg) {
  lanepool_lane_t *lane = arg;
  lane_enter(lane, &lane->applied);
  atomic_fetch_add_explicit(&lane->pool->started, 1, memory_order_release);
  lanepool__futex_wake((_Atomic uint32_t *)&lane->pool->started, 1);
  lane_run(lane);
  return NULL;
}

static void *lane_resume(void *arg) {
  lanepool_lane_t *lane = arg;
  lanepool__applied applied; /* the first thread's record stays what info reports */
  lane_enter(lane, &applied);
  lane_run(lane);
  return NULL;
}

int lanepool__lane_start(lanepool_lane_t *lane) {
  pthread_mutex_lock(&lane->thread_lock);
  int rc = lanepool__thread_start(&lane->thread, lane->stack_size, lane_main, lane);
  pthread_mutex_unlock(&lane->thread_lock);
  return rc;
}

/* Joins the lane's thread and every successor it had (a thread a task ended before this
 * join read it has detached itself: see thread_lost). */
void lanepool__lane_join(lanepool_lane_t *lane) {
  for (;;) {
    pthread_mutex_lock(&lane->thread_lock);
    pthread_t t = lane->thread;
    uint64_t gen = lane->thread_gen;
    lane->join_claim = gen + 1; /* t, if a task ends it, leaves itself to this join */
    pthread_mutex_unlock(&lane->thread_lock);
    LANEPOOL_INJECT(LANEPOOL__AT_JOIN);
    LANEPOOL_INJECT(LANEPOOL__AT_BLOCK);
    pthread_join(t, NULL);
    LANEPOOL_INJECT(LANEPOOL__AT_RESUME);
    pthread_mutex_lock(&lane->thread_lock);
    lane->join_claim = 0;
    /* By generation: a successor started since may have t's pthread_t (glibc reuses
     * the descriptor of a joined thread), and must still be joined. */
    bool same = lane->thread_gen == gen;
    pthread_mutex_unlock(&lane->thread_lock);
    if (same) break;
  }
  /* A sync caller that gave the lane back may still be on its way out of the library
   * (its give-back woke the lane, which then exited): wait for its last access. */
  while (atomic_load_explicit(&lane->borrowers, memory_order_acquire) != 0) {
    LANEPOOL_INJECT(LANEPOOL__AT_SPIN);
    sched_yield();
  }
}

/* One queued task to the discard pass: a sync the lane already answered (fn NULL) is
 * skipped, a queued sync is answered ECANCELED, a two-argument task is handed over as
 * the header documents (fn cast to lanepool_fn, ctx pointing at a lanepool_task2_t {a,
 * b} that lives during the call), any other as it was submitted. */
static void discard_task(const lanepool__task *task, lanepool_discard_fn discard,
                         void *discard_arg) {
  if (!task->fn) return;
  if (task->arg) {
    lanepool_task2_t pair = {task->ctx, task->arg};
    discard(task->fn, &pair, discard_arg);
  } else if (task->fn == sync_trampoline) {
    sync_discard(task->ctx);
  } else {
    discard(task->fn, task->ctx, discard_arg);
  }
}

/* After the lane thread was joined: hands every queued task, FIFO, to discard. A cell
 * claimed but not yet published is waited for (its producer got 0: it must reach the
 * discard callback like any other). */
void lanepool__lane_discard_all(lanepool_lane_t *lane, lanepool_discard_fn discard,
                                void *discard_arg) {
  lanepool__task task;
  /* The batch first: it is older than the ring's tasks (see spill_take). */
  while (batch_pop(lane, &task)) discard_task(&task, discard, discard_arg);
  lanepool__ring *r = &lane->ring;
  uint64_t end = lanepool__ring_tail(r, memory_order_seq_cst); /* CLOSED: final */
  for (uint64_t pos; (pos = lanepool__ring_head(r)) < end;) {
    (void)lanepool__ring_wait_cell(r, pos);
    task = (lanepool__task){NULL, NULL, NULL};
    if (lanepool__ring_pop(r, &task)) discard_task(&task, discard, discard_arg);
  }
  while (spill_take(lane) == SPILL_TOOK)
    while (batch_pop(lane, &task)) discard_task(&task, discard, discard_arg);
}

/* ---- public lane API -------------------------------------------------------- */

int lanepool_lane_async(lanepool_lane_t *lane, lanepool_fn fn, void *ctx) {
  if (!lane || !fn) return EINVAL;
  return lanepool__lane_push(lane, fn, ctx, NULL, false);
}

int lanepool_lane_async_flags(lanepool_lane_t *lane, lanepool_fn fn, void *ctx, unsigned flags) {
  if (!lane || !fn || (flags & ~LANEPOOL_SUBMIT_CONTINUATION)) return EINVAL;
  return lanepool__lane_push(lane, fn, ctx, NULL, (flags & LANEPOOL_SUBMIT_CONTINUATION) != 0);
}

/* A two-argument task is stored as {fn, a, b}; b != NULL is what marks it (ring.h). */
int lanepool_lane_async2(lanepool_lane_t *lane, lanepool_fn2 fn, void *a, void *b) {
  if (!lane || !fn || !b) return EINVAL;
  return lanepool__lane_push(lane, (lanepool_fn)(void (*)(void))fn, a, b, false);
}

int lanepool_lane_async2_flags(lanepool_lane_t *lane, lanepool_fn2 fn, void *a, void *b,
                               unsigned flags) {
  if (!lane || !fn || !b || (flags & ~LANEPOOL_SUBMIT_CONTINUATION)) return EINVAL;
  return lanepool__lane_push(lane, (lanepool_fn)(void (*)(void))fn, a, b,
                             (flags & LANEPOOL_SUBMIT_CONTINUATION) != 0);
}

/* The batch submits: args NULL for one-argument tasks. */
static int lane_async_many(lanepool_lane_t *lane, lanepool_fn fn, void *const *ctxs,
                           void *const *args, size_t count, size_t *accepted) {
  if (lanepool__forked(lane->generation)) return EOWNERDEAD;
  const void *outer = lanepool__call_enter(lane); /* as in lanepool__lane_push */
  uint64_t done = 0;
  int rc = lane_push_many(lane, fn, ctxs, args, count, false, &done);
  if (__builtin_expect(rc == LANEPOOL__RING_OWN_ONLY, 0)) {
    /* The pool drains: only its own lanes may still add work. */
    uint64_t more = 0;
    rc = lanepool__is_own_lane(lane->pool)
             ? lane_push_many(lane, fn, ctxs + done, args ? args + done : NULL, count - done, true,
                              &more)
             : ESHUTDOWN;
    done += more;
  }
  if (done) wake_if_parked(lane);
  lanepool__call_leave(outer);
  if (accepted) *accepted = (size_t)done;
  return rc;
}

int lanepool_lane_async_many(lanepool_lane_t *lane, lanepool_fn fn, void *const *ctxs, size_t count,
                             size_t *accepted) {
  if (accepted) *accepted = 0;
  if (!lane || !fn || (!ctxs && count)) return EINVAL;
  return lane_async_many(lane, fn, ctxs, NULL, count, accepted);
}

int lanepool_lane_async2_many(lanepool_lane_t *lane, lanepool_fn2 fn, void *const *as,
                              void *const *bs, size_t count, size_t *accepted) {
  if (accepted) *accepted = 0;
  if (!lane || !fn || (count && (!as || !bs))) return EINVAL;
  for (size_t i = 0; i < count; i++)
    if (!bs[i]) return EINVAL; /* checked first: nothing is accepted */
  return lane_async_many(lane, (lanepool_fn)(void (*)(void))fn, as, bs, count, accepted);
}

static int lane_async_wait(lanepool_lane_t *lane, lanepool_fn fn, void *ctx, uint64_t timeout_ns) {
  int rc = lanepool__lane_push(lane, fn, ctx, NULL, false);
  if (rc != EAGAIN) return rc;
  uint64_t deadline = lanepool__add_sat(lanepool__now_ns(), timeout_ns); /* UINT64_MAX: no end */
  uint64_t pause_ns = 1000;
  for (;;) {
    uint64_t now = lanepool__now_ns();
    if (now >= deadline) return ETIMEDOUT;
    uint64_t left = deadline - now;
    uint64_t nap = pause_ns < left ? pause_ns : left;
    struct timespec ts = {.tv_sec = (time_t)(nap / 1000000000u),
                          .tv_nsec = (long)(nap % 1000000000u)};
    nanosleep(&ts, NULL);
    if ((rc = lanepool__lane_push(lane, fn, ctx, NULL, false)) != EAGAIN) return rc;
    if (pause_ns < 1000000) pause_ns *= 2;
  }
}

int lanepool_lane_async_wait(lanepool_lane_t *lane, lanepool_fn fn, void *ctx,
                             uint64_t timeout_ns) {
  if (!lane || !fn) return EINVAL;
  /* One call under way across its retries: a destroy meanwhile waits for it (the
   * pushes then answer ESHUTDOWN), instead of freeing the lane between two of them. */
  const void *outer = lanepool__call_enter(lane);
  int rc = lane_async_wait(lane, fn, ctx, timeout_ns);
  lanepool__call_leave(outer);
  return rc;
}

int lanepool_current_lane(lanepool_lane_t **out) {
  if (!out) return EINVAL;
  if (!lanepool__current) return ESRCH;
  *out = lanepool__current;
  return 0;
}

/* ---- sync chains: a sync back onto a lane the chain holds is EDEADLK ------------ */

/* The lanes a chain of syncs holds besides lanepool__current: a sync's closure holds
 * its lane, and every lane that the waiting callers up the chain hold (A's task syncs
 * onto B, B's closure syncs onto C: C's closure holds C, B and A). Each node lives in
 * the frame of a caller that waits until the closure below it returns. [this thread] */
typedef struct lanepool__held {
  const lanepool_lane_t *lane;
  const struct lanepool__held *up;
} lanepool__held;
static __thread const lanepool__held *held_above;

/* true if a sync onto `lane` from here would wait for itself. */
static bool chain_holds(const lanepool_lane_t *lane) {
  if (lanepool__current == lane) return true;
  for (const lanepool__held *h = held_above; h; h = h->up)
    if (h->lane == lane) return true;
  return false;
}

bool lanepool__chain_holds_pool(const lanepool_t *pool) {
  for (const lanepool__held *h = held_above; h; h = h->up)
    if (h->lane && h->lane->pool == pool) return true;
  return false;
}

typedef struct lanepool__sync {
  lanepool_fn fn;
  void *ctx;
  _Atomic uint32_t state;      /* 0 pending, 1 ran, 2 discarded */
  const lanepool__held *chain; /* the caller's chain (in its frame while it waits) */
  const lanepool__held *above; /* the lane thread's own chain, while the closure runs */
  /* Escalation: the waiter's band + 1 while it boosts `lane` (0: no boost). Set before
   * the push; the lane swaps it to 0 when the task ends (or is answered ECANCELED) and
   * drops the boost before it answers: when lanepool_lane_sync returns, the lane is back
   * at its own band (or the next waiter's). */
  _Atomic uint32_t boost;
  lanepool_lane_t *lane;
} lanepool__sync;

static void sync_ran(void *arg) {
  lanepool__sync *s = arg;
  held_above = s->above; /* the lane's own chain again */
  if (atomic_load_explicit(&s->boost, memory_order_relaxed))
    lanepool__boost_leave(s->lane, &s->boost);
  atomic_store_explicit(&s->state, 1, memory_order_release);
  /* The waiter may return (and its frame be reused) as soon as it sees state 1; a
   * stray wake on that address is harmless because every futex waiter loops. */
  lanepool__futex_wake(&s->state, 1);
}

/* A function that ends the lane's thread (pthread_exit) still ran: its caller is
 * answered on the way out (the cleanup handler), then the lane goes on in a successor
 * thread (thread_lost). */
static void sync_trampoline(void *arg) {
  lanepool__sync *s = arg;
  s->above = held_above;
  held_above = s->chain; /* the closure holds this lane and its caller's chain */
  pthread_cleanup_push(sync_ran, s);
  s->fn(s->ctx);
  pthread_cleanup_pop(1);
}

/* Called by shutdown(CANCEL) for each discarded sync task: wakes its waiter. */
static void sync_discard(void *arg) {
  lanepool__sync *s = arg;
  if (atomic_load_explicit(&s->boost, memory_order_relaxed))
    lanepool__boost_leave(s->lane, &s->boost);
  atomic_store_explicit(&s->state, 2, memory_order_release);
  lanepool__futex_wake(&s->state, 1);
}

/* ---- inline sync: borrowing a parked lane ------------------------------------ */

/* Gives a LENT lane back: PARKED again, then the parking lane's own check (see the
 * header comment): if work arrived or the ring was closed meanwhile, wake the lane. */
/* For a lent lane: nothing queued (ring claims up to `head`, empty overflow list) and
 * the ring not closed. One seq_cst load of tail answers both of its parts. */
static inline bool lent_lane_idle(lanepool_lane_t *lane, uint64_t head) {
  uint64_t t = atomic_load_explicit(&lane->ring.tail, memory_order_seq_cst);
  return (t & ~LANEPOOL__TAIL_FLAGS) == head && !(t & LANEPOOL__CLOSED) &&
         atomic_load_explicit(&lane->spill_count, memory_order_seq_cst) == 0;
}

static void lane_give_back(lanepool_lane_t *lane) {
  LANEPOOL_INJECT(LANEPOOL__AT_LEND);
  /* `head` is read while the lane is still lent: once PARKED is stored a producer may
   * wake the lane, which then moves it. (A stale head only costs a spare wake check.) */
  uint64_t head = lanepool__ring_head(&lane->ring);
  /* seq_cst (a release too): the closure's effects happen before the lane's next task. */
  atomic_store_explicit(&lane->sleeping, LANE_PARKED, memory_order_seq_cst);
  if (!lent_lane_idle(lane, head)) wake_if_parked(lane);
}

/* Ends a lent run: counted as finished (release: what the closure did, its submits
 * included, happens before a drain scan that sees the count), the lane given back,
 * and a draining pool's driver told. */
static void lane_finish_lent(lanepool_lane_t *lane) {
  lanepool_t *pool = lane->pool;
  lane_give_back(lane);
  LANEPOOL_INJECT(LANEPOOL__AT_LEND); /* given back: the lane may exit and be joined now */
  atomic_fetch_add_explicit(&lane->lent_out, 1, memory_order_release);
  lanepool__drain_idle(pool);
  /* release, and the last access: once given back the lane may be woken, exit and be
   * joined; lanepool__lane_join waits for this before anything can be freed. */
  LANEPOOL_INJECT(LANEPOOL__AT_COUNTER);
  atomic_fetch_sub_explicit(&lane->borrowers, 1, memory_order_release);
}

/* true if the caller now holds the lane's right to run: the lane was parked, nothing
 * is queued, the ring is open and the pool running. */
static bool lane_borrow(lanepool_lane_t *lane) {
  uint32_t parked = LANE_PARKED;
  /* A rescue lane is never lent: parked without a timeout, it waits for a band push's
   * wake, which a LENT word would swallow (the give-back looks at its own ring only).
   * A sync onto it is queued and run by its thread. */
  if (lane->spare) return false;
  if (atomic_load_explicit(&lane->sleeping, memory_order_relaxed) != LANE_PARKED ||
      !atomic_compare_exchange_strong_explicit(&lane->sleeping, &parked, LANE_LENT,
                                               memory_order_seq_cst, memory_order_relaxed))
    return false;
  /* While LENT the lane cannot exit, so it cannot be joined before this is counted. */
  atomic_fetch_add_explicit(&lane->borrowers, 1, memory_order_relaxed);
  LANEPOOL_INJECT(LANEPOOL__AT_LEND);
  /* Counted as accepted before the state check (both seq_cst): a drain whose state
   * change this check does not see has not scanned yet, and its scan counts this run,
   * so the drain waits for it (and for what its closure submits) like for a task. */
  atomic_fetch_add_explicit(&lane->lent_in, 1, memory_order_seq_cst);
  /* The CAS read the lane's seq_cst store of PARKED: its last task happened before,
   * and `ring.head` is stable until the lane is given back. */
  LANEPOOL_INJECT(LANEPOOL__AT_STATE);
  if (lent_lane_idle(lane, lanepool__ring_head(&lane->ring)) && lanepool__life_open(lane->pool))
    return true;
  lane_finish_lent(lane); /* queued work runs first (FIFO), or the pool is stopping */
  return false;
}

typedef struct lanepool__inline_frame {
  lanepool_lane_t *lane, *saved_lane;
  lanepool_t *saved_pool;
  lanepool__held held; /* the caller's lane, held while the closure runs */
  const lanepool__held *saved_held;
} lanepool__inline_frame;

/* A closure that ends the caller's thread (pthread_exit, cancellation) still gives the
 * lane back, or the lane would stay parked forever. */
static void inline_unwound(void *arg) {
  lanepool__inline_frame *f = arg;
  lanepool__current = f->saved_lane;
  lanepool__pool_thread = f->saved_pool;
  held_above = f->saved_held;
  lane_finish_lent(f->lane);
}

static void run_inline(lanepool_lane_t *lane, lanepool_fn fn, void *ctx) {
  lanepool__inline_frame f = {
      lane, lanepool__current, lanepool__pool_thread, {lanepool__current, held_above}, held_above};
  if (f.saved_lane) held_above = &f.held;
  /* Inside, the caller is the lane: lanepool_current_lane() answers it, a sync onto it
   * is EDEADLK, and shutting its pool down from here is EDEADLK (it would wait for
   * this very closure). */
  lanepool__current = lane;
  lanepool__pool_thread = lane->pool;
  pthread_cleanup_push(inline_unwound, &f);
  fn(ctx);
  pthread_cleanup_pop(0);
  lanepool__current = f.saved_lane;
  lanepool__pool_thread = f.saved_pool;
  held_above = f.saved_held;
  lane_finish_lent(lane);
}

int lanepool_lane_sync(lanepool_lane_t *lane, lanepool_fn fn, void *ctx) {
  return lanepool_lane_sync_flags(lane, fn, ctx, 0);
}

static int sync_queued(lanepool_lane_t *lane, lanepool_fn fn, void *ctx, unsigned flags);

/* Registered calls (calls.c), so that destroy waits for them: the borrow, and a queued
 * sync from its first touch of the lane (its escalation counts) to its last (the
 * boost's drop after the answer or a refused push). A queued sync is answered by the
 * drain or the cancel before destroy waits for calls, so that wait is short. An inline
 * run is no call: the lane, lent, cannot exit, and the join waits for its give-back
 * (the borrowers count); and its closure may unwind (an exception, pthread_exit),
 * which would leave a call record set. */
int lanepool_lane_sync_flags(lanepool_lane_t *lane, lanepool_fn fn, void *ctx, unsigned flags) {
  if (!lane || !fn || (flags & ~(LANEPOOL_SYNC_QUEUED | LANEPOOL_SYNC_NO_ESCALATION)))
    return EINVAL;
  /* This lane, or one the chain of syncs that led here holds: it would wait for itself. */
  if (chain_holds(lane)) return EDEADLK;
  if (lanepool__forked(lane->generation)) return EOWNERDEAD;
  /* A thread of another pool (its lane, its timer thread) keeps its own identity: run
   * the closure on this lane's thread instead, so that shutting that other pool down
   * from inside the closure is still EDEADLK. */
  bool foreign = lanepool__pool_thread && lanepool__pool_thread != lane->pool;
  if (!(flags & LANEPOOL_SYNC_QUEUED) && !foreign) {
    const void *outer = lanepool__call_enter(lane);
    bool lent = lane_borrow(lane);
    lanepool__call_leave(outer);
    if (lent) {
      run_inline(lane, fn, ctx);
      return 0;
    }
  }
  const void *outer = lanepool__call_enter(lane);
  int rc = sync_queued(lane, fn, ctx, flags);
  lanepool__call_leave(outer);
  return rc;
}

static int sync_queued(lanepool_lane_t *lane, lanepool_fn fn, void *ctx, unsigned flags) {
  lanepool__held mine = {lanepool__current, held_above};
  lanepool__sync s = {
      .fn = fn, .ctx = ctx, .chain = lanepool__current ? &mine : held_above, .lane = lane};
  atomic_init(&s.state, 0);
  atomic_init(&s.boost, 0);
  /* Escalation: a waiter of a higher band boosts the lane before its task is queued
   * (so the lane cannot run it unboosted) until the task has run (band.c). */
  bool boosting = !(flags & LANEPOOL_SYNC_NO_ESCALATION) &&
                  lanepool__boost_join(lane, lanepool__waiter_band(), &s.boost);
  if (boosting) lanepool__boost_update(lane);
  int rc = lanepool__lane_push(lane, sync_trampoline, &s, NULL, LANEPOOL__PUSH_WAITS);
  if (rc) {
    LANEPOOL__TEST_POINT("sync_refused", lane, rc);
    if (boosting) lanepool__boost_leave(lane, &s.boost);
    return rc;
  }
  uint32_t st;
  while ((st = atomic_load_explicit(&s.state, memory_order_acquire)) == 0)
    lanepool__futex_wait(&s.state, 0);
  if (boosting) lanepool__boost_leave(lane, &s.boost); /* the lane's swap came first: no-op */
  return st == 1 ? 0 : ECANCELED;
}

int lanepool_lane_info_sized(const lanepool_lane_t *lane, lanepool_lane_info_t *dst) {
  if (!lane || !dst || !lanepool__size_accepted(dst->struct_size, sizeof *dst)) return EINVAL;
  if (lanepool__forked(lane->generation)) return EOWNERDEAD;
  lanepool_lane_t *l = (lanepool_lane_t *)lane;
  lanepool_lane_info_t full, *out = &full;
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
  out->tasks_stolen = atomic_load_explicit(&l->stolen, memory_order_relaxed);
  out->yields_to_waker = atomic_load_explicit(&l->yields, memory_order_relaxed);
  out->struct_size = dst->struct_size;
  memcpy(dst, out, dst->struct_size); /* an older caller's prefix */
  return 0;
}

int lanepool_lane_pool(const lanepool_lane_t *lane, lanepool_t **out) {
  if (!lane || !out) return EINVAL;
  if (lanepool__forked(lane->generation)) return EOWNERDEAD;
  *out = lane->pool;
  return 0;
}

int lanepool_lane_position(const lanepool_lane_t *lane, lanepool_qos_t *qos, uint32_t *index) {
  if (!lane || !qos || !index) return EINVAL;
  if (lanepool__forked(lane->generation)) return EOWNERDEAD;
  *qos = lanepool__qos_of_band[lane->band];
  *index = lane->index;
  return 0;
}

int lanepool_lane_set_userdata(lanepool_lane_t *lane, void *userdata) {
  if (!lane) return EINVAL;
  if (lanepool__forked(lane->generation)) return EOWNERDEAD;
  atomic_store_explicit(&lane->userdata, userdata, memory_order_release);
  return 0;
}

int lanepool_lane_userdata(const lanepool_lane_t *lane, void **out) {
  if (!lane || !out) return EINVAL;
  if (lanepool__forked(lane->generation)) return EOWNERDEAD;
  *out = atomic_load_explicit(&((lanepool_lane_t *)lane)->userdata, memory_order_acquire);
  return 0;
}
