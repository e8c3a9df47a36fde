/*
 * lifecycle.c - a pool's life after creation: the registry of live pools, shutdown
 * (drain or cancel, and a cancel that escalates a drain), join, destroy.
 *
 * The state machine and each of its rules (the driver, when a drain commits, cancel's
 * escalation, what destroy waits for, each call back into the library) are stated once,
 * in docs/architecture.md, "Life cycle"; model/lifecycle.pml checks them. This file is
 * the only writer of pool->state, always by a CAS to a larger state (advance()).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "internal.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* ---- registry of live pools ------------------------------------------------- */

pthread_mutex_t lanepool__registry_lock = PTHREAD_MUTEX_INITIALIZER;
static lanepool_t *registry; /* [registry_lock] live pools, linked by registry_next */

void lanepool__registry_add(lanepool_t *pool) {
  pthread_mutex_lock(&lanepool__registry_lock);
  pool->registry_next = registry;
  registry = pool;
  pthread_mutex_unlock(&lanepool__registry_lock);
}

/* ---- shared steps ----------------------------------------------------------- */

/* The band queues first: a thread that sees its lane's ring CLOSED knows that nothing
 * can be added to its band's queue either. */
static void lanes_set_intake(lanepool_t *pool, int intake) {
  for (uint32_t b = 0; b < LANEPOOL_BAND_COUNT; b++)
    lanepool__queue_set_intake(&pool->bands[b].spill, pool->bands[b].rings, pool->bands[b].shards,
                               intake);
  for (uint32_t i = 0; i < lanepool__lane_total(pool); i++) {
    lanepool__queue_set_intake(&pool->lanes[i]->spill, &pool->lanes[i]->ring, 1, intake);
    lanepool__wake_thread(pool->lanes[i], false); /* to see it: run the rest, or end */
  }
}

/* The end of every shutdown, and of creation's unwind path: timers stopped (the pending
 * ones into *timers, or freed when timers is NULL; their number returned), every queue
 * CLOSED (its threads woken to see it: to run the rest, or end), then the timer thread
 * and the first `started_lanes` lanes joined. */
size_t lanepool__close_and_join(lanepool_t *pool, uint32_t started_lanes,
                                lanepool__timer_entry **timers) {
  lanepool__timer_entry *left;
  size_t n;
  LANEPOOL_INJECT(LANEPOOL__AT_INTAKE);
  lanepool__timers_stop(pool, &left, &n);
  if (timers)
    *timers = left;
  else
    free(left);
  lanes_set_intake(pool, LANEPOOL__INTAKE_CLOSED);
  LANEPOOL_INJECT(LANEPOOL__AT_JOIN);
  lanepool__timers_join(pool);
  for (uint32_t i = 0; i < started_lanes; i++) lanepool__lane_join(pool->lanes[i]);
  return n;
}

/* ---- the state word: the only writer ------------------------------------------ */

/* The one transition primitive: `from` -> `to` (to > from) by CAS, or nothing. */
static bool advance(lanepool_t *pool, uint32_t from, uint32_t to) {
  LANEPOOL_INJECT(LANEPOOL__AT_STATE);
  return atomic_compare_exchange_strong_explicit(&pool->state, &from, to, memory_order_seq_cst,
                                                 memory_order_seq_cst);
}

static uint32_t life(const lanepool_t *pool) {
  return atomic_load_explicit(&((lanepool_t *)pool)->state, memory_order_acquire);
}

/* The drain's balance: the "finished" counters, a seq_cst fence, the "accepted" ones. A
 * unit is accepted before it finishes, so equal sums mean an instant between the scans
 * with nothing in flight (architecture.md, "Drain: when is it done?"). */
static bool quiescent(lanepool_t *pool) {
  LANEPOOL_INJECT(LANEPOOL__AT_COUNTER);
  /* Timers: ever done (fired or cancelled), then ever accepted. */
  uint64_t finished = atomic_load_explicit(&pool->timers.done, memory_order_acquire);
  for (uint32_t i = 0; i < lanepool__lane_total(pool); i++)
    finished += lanepool__lane_finished(pool->lanes[i]);
  LANEPOOL_INJECT(LANEPOOL__AT_DRAIN_SCAN);
  atomic_thread_fence(memory_order_seq_cst);
  uint64_t accepted = atomic_load_explicit(&pool->timers.added, memory_order_acquire);
  for (uint32_t i = 0; i < lanepool__lane_total(pool); i++)
    accepted += lanepool__lane_accepted(pool->lanes[i]);
  for (uint32_t b = 0; b < LANEPOOL_BAND_COUNT; b++)
    accepted += lanepool__bandq_accepted(&pool->bands[b]);
  return accepted == finished;
}

/* The driver's last step: CLOSING or CANCELLING -> JOINED. */
static void set_joined(lanepool_t *pool, uint32_t from) {
  if (!advance(pool, from, LANEPOOL__LIFE_JOINED)) abort(); /* only the driver leaves these */
  lanepool__futex_wake(&pool->state, INT_MAX);
}

static void wait_joined(lanepool_t *pool) {
  uint32_t s;
  LANEPOOL_INJECT(LANEPOOL__AT_JOIN);
  while ((s = life(pool)) < LANEPOOL__LIFE_JOINED) {
    lanepool__futex_wait(&pool->state, s);
    LANEPOOL_INJECT(LANEPOOL__AT_JOIN_WAIT);
  }
}

/* DRAIN, driven to the end. Returns false if a cancel escalated it first (the state
 * is then CANCELLING and pool->discard is set); true once the drain committed
 * (CLOSING) and every thread was joined. */
static bool drive_drain(lanepool_t *pool) {
  LANEPOOL_INJECT(LANEPOOL__AT_INTAKE);
  lanepool__timers_set_intake(pool, LANEPOOL__INTAKE_OWN_ONLY);
  lanes_set_intake(pool, LANEPOOL__INTAKE_OWN_ONLY);
  atomic_thread_fence(memory_order_seq_cst); /* pairs with lanepool__drain_idle */
  bool timers_closed = false;
  for (;;) {
    uint32_t ev = atomic_load_explicit(&pool->drain_events, memory_order_seq_cst);
    LANEPOOL_INJECT(LANEPOOL__AT_STATE);
    if (life(pool) == LANEPOOL__LIFE_CANCELLING) return false;
    if (quiescent(pool)) {
      LANEPOOL_INJECT(LANEPOOL__AT_QUIESCENT);
      if (timers_closed) break;
      /* A continuation may still come and set a timer (see the top): timers close now,
       * and a second balance proves none was accepted before (one in between fires). */
      LANEPOOL_INJECT(LANEPOOL__AT_INTAKE);
      lanepool__timers_set_intake(pool, LANEPOOL__INTAKE_CLOSED);
      timers_closed = true;
      continue;
    }
    lanepool__futex_wait(&pool->drain_events, ev);
  }
  /* Commit: from here a cancel no longer escalates (it waits, EALREADY). If one got in
   * first, its CAS won: go on as a cancel, and what the balance saw is discarded. */
  if (!advance(pool, LANEPOOL__LIFE_DRAINING, LANEPOOL__LIFE_CLOSING)) return false;
  /* No timer: none was at the second balance, and none could be added since. */
  if (lanepool__close_and_join(pool, lanepool__lane_total(pool), NULL)) abort();
  return true;
}

static void drive_cancel(lanepool_t *pool, lanepool_discard_fn discard, void *discard_arg) {
  lanepool__timer_entry *timers;
  /* Lanes already start no task; each waits for the CLOSED bit to answer its syncs. */
  size_t timer_count = lanepool__close_and_join(pool, lanepool__lane_total(pool), &timers);
  LANEPOOL_INJECT(LANEPOOL__AT_CLOSE_DISCARD);
  lanepool_t *outer = lanepool__in_callback;
  lanepool__in_callback = pool;
  for (uint32_t i = 0; i < lanepool__lane_total(pool); i++)
    lanepool__discard_queue(&pool->lanes[i]->ring, &pool->lanes[i]->spill, discard, discard_arg);
  for (lanepool__band *bd = pool->bands; bd < pool->bands + LANEPOOL_BAND_COUNT; bd++)
    for (uint32_t i = 0; i < bd->shards; i++) /* the band's overflow list after its last ring */
      lanepool__discard_queue(&bd->rings[i], i + 1 == bd->shards ? &bd->spill : NULL, discard,
                              discard_arg);
  for (size_t i = 0; i < timer_count; i++) discard(timers[i].fn, timers[i].ctx, discard_arg);
  lanepool__in_callback = outer;
  free(timers);
}

/* ---- public ----------------------------------------------------------------- */

static int shutdown_call(lanepool_t *pool, lanepool_shutdown_mode_t mode,
                         lanepool_discard_fn discard, void *discard_arg) {
  if (lanepool__forked(pool->generation)) return EOWNERDEAD;
  if (pool->is_default) return EPERM;
  if (lanepool__in_callback == pool) return EALREADY; /* inside this very shutdown */
  /* One of its threads, or a closure one of its lanes waits for (a sync chain). */
  if (lanepool__pool_thread == pool || lanepool__chain_holds_pool(pool)) return EDEADLK;

  bool drain = mode == LANEPOOL_SHUTDOWN_DRAIN;
  /* OPEN -> DRAINING or CANCELLING: this caller drives the shutdown to JOINED. */
  if (advance(pool, LANEPOOL__LIFE_OPEN,
              drain ? LANEPOOL__LIFE_DRAINING : LANEPOOL__LIFE_CANCELLING)) {
    if (drain && drive_drain(pool)) {
      set_joined(pool, LANEPOOL__LIFE_CLOSING);
      return 0;
    }
    if (drain) { /* escalated: the escalator's callback */
      discard = pool->discard;
      discard_arg = pool->discard_arg;
    }
    drive_cancel(pool, discard, discard_arg);
    set_joined(pool, LANEPOOL__LIFE_CANCELLING);
    return 0;
  }
  /* Someone else drives. A cancel escalates a drain that has not committed (see the top). */
  uint32_t none = 0;
  LANEPOOL_INJECT(LANEPOOL__AT_STATE);
  if (!drain && life(pool) == LANEPOOL__LIFE_DRAINING &&
      atomic_compare_exchange_strong_explicit(&pool->escalation, &none, 1, memory_order_seq_cst,
                                              memory_order_seq_cst)) {
    pool->discard = discard;
    pool->discard_arg = discard_arg;
    LANEPOOL_INJECT(LANEPOOL__AT_ESCALATE);
    if (advance(pool, LANEPOOL__LIFE_DRAINING, LANEPOOL__LIFE_CANCELLING)) {
      LANEPOOL_INJECT(LANEPOOL__AT_COUNTER);
      atomic_fetch_add_explicit(&pool->drain_events, 1, memory_order_seq_cst);
      lanepool__futex_wake(&pool->drain_events, INT_MAX);
      wait_joined(pool);
      return 0;
    }
  }
  wait_joined(pool);
  return EALREADY;
}

int lanepool_shutdown(lanepool_t *pool, lanepool_shutdown_mode_t mode, lanepool_discard_fn discard,
                      void *discard_arg) {
  if (!pool) return EINVAL;
  if (mode != LANEPOOL_SHUTDOWN_DRAIN && mode != LANEPOOL_SHUTDOWN_CANCEL) return EINVAL;
  if (mode == LANEPOOL_SHUTDOWN_CANCEL && !discard) return EINVAL;
  const void *outer = lanepool__call_enter(pool);
  int rc = shutdown_call(pool, mode, discard, discard_arg);
  lanepool__call_leave(outer);
  return rc;
}

int lanepool_destroy(lanepool_t *pool) {
  if (!pool) return EINVAL;
  /* One pass under the registry lock: a stale pointer is only compared, never read;
   * a live one is checked and taken out, so a concurrent destroy gets EINVAL. */
  int rc = 0;
  LANEPOOL_INJECT(LANEPOOL__AT_STATE);
  pthread_mutex_lock(&lanepool__registry_lock);
  lanepool_t **at = &registry; /* the live pools' links only are read */
  while (*at && *at != pool) at = &(*at)->registry_next;
  /* Not listed: never created, destroyed, or being destroyed. A caller that belongs to
   * the pool (its lane, its timer thread, its discard callback) proves the last: its
   * pool is live, and the answer is the documented EDEADLK (a pointer compare only). */
  bool own = lanepool__pool_thread == pool || lanepool__in_callback == pool;
  if (!*at)
    rc = own || lanepool__chain_holds_pool(pool) ? EDEADLK : EINVAL;
  else if (lanepool__forked(pool->generation))
    rc = EOWNERDEAD;
  else if (pool->is_default)
    rc = EPERM;
  else if (own || lanepool__calls_inside(pool) || lanepool__chain_holds_pool(pool))
    rc = EDEADLK; /* its own thread, its callback, or a callback of a call on it */
  else
    *at = pool->registry_next;
  pthread_mutex_unlock(&lanepool__registry_lock);
  if (rc) return rc;
  /* 0, or EALREADY after waiting for a shutdown someone else drove: both end JOINED. */
  (void)lanepool_shutdown(pool, LANEPOOL_SHUTDOWN_DRAIN, NULL, NULL);
  wait_joined(pool);
  lanepool__calls_wait(pool); /* calls still under way on the pool (see the top) */
  if (!advance(pool, LANEPOOL__LIFE_JOINED, LANEPOOL__LIFE_DESTROYED)) abort();
  LANEPOOL_INJECT(LANEPOOL__AT_FREE);
  lanepool__pool_free(pool);
  return 0;
}

/* Frees what lanepool_create allocated: after JOINED (every lane joined, the timer
 * thread too), or on create's failure path. */
void lanepool__pool_free(lanepool_t *pool) {
  uint32_t total = lanepool__lane_total(pool);
  if (pool->lanes)
    for (uint32_t i = 0; i < total; i++) lanepool__lane_free(pool->lanes[i]);
  free(pool->lanes);
  for (uint32_t b = 0; b < LANEPOOL_BAND_COUNT; b++) lanepool__bandq_free(&pool->bands[b]);
  lanepool__topology_free(&pool->topology);
  lanepool__timers_destroy(&pool->timers);
  free(pool->allowed_cpus);
  free(pool->rescue_cpus);
#ifdef LANEPOOL_TEST_INJECT
  /* Test builds: a read after the free finds garbage, not a pool that looks joined. */
  memset(pool, 0xA5, sizeof *pool);
#endif
  free(pool);
}
