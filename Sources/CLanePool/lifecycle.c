/*
 * lifecycle.c - a pool's life after creation: the registry of live pools, shutdown
 * (drain or cancel, and a cancel that escalates a drain), join, destroy.
 *
 * The state machine (docs/architecture.md, "Life cycle", draws it; model/lifecycle.pml
 * checks it). This file is the only writer of pool->state, and every write is a CAS
 * from the state the writer expects to a larger one (advance()), so the word never
 * moves back and a late writer fails instead of undoing a later state:
 *
 *   OPEN --shutdown(DRAIN)--> DRAINING --balanced twice, CAS--> CLOSING --joined--> JOINED
 *   OPEN --shutdown(CANCEL)-> CANCELLING ------------------------------joined--> JOINED
 *   DRAINING --shutdown(CANCEL), CAS--> CANCELLING   (escalation; fails once CLOSING)
 *   JOINED --destroy, after every call on the pool returned--> DESTROYED, then freed
 *
 * The thread whose CAS leaves OPEN is the driver: it alone closes intake, joins and
 * discards, and its CAS to JOINED ends the shutdown. Every other shutdown caller waits
 * on the futex of `state` until JOINED. A cancel that finds DRAINING claims the
 * escalation (one claimant), leaves its discard callback, then CASes DRAINING ->
 * CANCELLING: if the drain committed (CLOSING) first, the CAS fails and the cancel
 * only waits (EALREADY); if the cancel's CAS wins, the driver's commit CAS fails and
 * it goes on as a cancel, so whatever was accepted is run or discarded, never lost.
 * Lower layers never write the state: they ask and report (internal.h's event port).
 *
 * destroy waits, after JOINED, for every call still under way on the pool (calls.c):
 * shutdown callers on their way out of the join wait, a submitter between its publish
 * and the end of its wake, a timer set or cancel after its unlock. No library lock is
 * held while user code runs (tasks, discard callback, log callback), so any of them
 * may call back into the library:
 *  - a lane or the timer thread calling shutdown/destroy on its own pool, or a closure
 *    that one of the pool's lanes waits for through a chain of syncs: EDEADLK;
 *  - a callback run inside a call on the pool (a sync's escalation log line) calling
 *    destroy: EDEADLK;
 *  - the discard callback calling shutdown on its pool: EALREADY at once (the
 *    shutdown it is part of is under way), destroy: EDEADLK.
 *
 * DRAIN. Intake becomes OWN_ONLY (rings, overflow lists, timers): outside submits get
 * ESHUTDOWN, the pool's own lanes (and continuations, LANEPOOL_SUBMIT_CONTINUATION)
 * still get in, so work that tasks fan out while the pool drains is part of the drain.
 * The driver then waits for quiescence: every unit of work accepted (ring claims,
 * overflow appends, timers added) finished (tasks returned, timers fired or
 * cancelled). It reads the "finished" counters first, then, after a seq_cst fence,
 * the "accepted" ones: each counter is monotonic and a unit is accepted before it
 * finishes, so if the two sums are equal there was an instant between the scans with
 * nothing in flight (the finished side can only have been read low, the accepted side
 * only high). A task's own submits are ordered before its finish (release store of
 * `executed`, acquire in the scan), so work it fanned out is seen. At that instant no
 * task runs, so no own-lane submit can follow (a continuation still can: below);
 * then intake CLOSES and every thread is joined. Every change that can complete the
 * balance bumps `drain_events` (after a seq_cst fence that pairs with the one after the
 * driver's state change): a lane that goes idle, the timer thread after each fire (its
 * `done` count moves after the lane accepted the task, and the lane may already have run
 * it and gone idle), a timer cancel. So the driver sleeps between scans and never misses
 * the last change. (The seeded interleaving test found the timer case: a timer thread
 * preempted between its push and its count left the driver asleep with the books balanced.)
 * A continuation (LANEPOOL_SUBMIT_CONTINUATION, from any thread) may still come after
 * the balance, and its task may set a timer: so at the first balance the timers close
 * (a timer set after is refused, ESHUTDOWN), and only a second balance (timers
 * accepted before the close fired or were cancelled) commits the drain, DRAINING ->
 * CLOSING by CAS. A continuation accepted after that is in a ring before its CLOSED
 * bit: its lane runs it before it exits (what it submits after the close is refused).
 *
 * CANCEL. From the CAS (OPEN or DRAINING -> CANCELLING) that makes the pool CANCELLING,
 * no lane starts another task: each checks the state between tasks (acquire). The
 * driver then CLOSES intake everywhere (timers: the pending ones are taken out of the
 * heap; rings: CLOSED bit, after which the tail is final; overflow lists) and wakes
 * parked lanes. Each lane finishes the task it runs, waits for its CLOSED bit, answers
 * every queued `sync` with ECANCELED itself (so a task of another lane waiting on it
 * returns and that lane can exit), and exits. Only then are the timer thread and the
 * lanes joined, and every task still queued (ring cells claimed but unpublished are
 * waited for, never skipped) and every pending timer is handed to the discard callback,
 * on the driver's thread, lane by lane in FIFO order, timers last in deadline order.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "internal.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* ---- registry of live pools ------------------------------------------------- */

pthread_mutex_t lanepool__registry_lock = PTHREAD_MUTEX_INITIALIZER;
static lanepool_t **registry; /* [registry_lock] */
static size_t registry_len, registry_cap;

int lanepool__registry_add(lanepool_t *pool) {
  pthread_mutex_lock(&lanepool__registry_lock);
  if (registry_len == registry_cap) {
    size_t ncap = registry_cap ? registry_cap * 2 : 16;
    lanepool_t **n = realloc(registry, ncap * sizeof *n);
    if (!n) {
      pthread_mutex_unlock(&lanepool__registry_lock);
      return ENOMEM;
    }
    registry = n;
    registry_cap = ncap;
  }
  registry[registry_len++] = pool;
  pthread_mutex_unlock(&lanepool__registry_lock);
  return 0;
}

/* ---- shared steps ----------------------------------------------------------- */

/* The band queues first: a thread that sees its lane's ring CLOSED knows that nothing
 * can be added to its band's queue either. */
static void lanes_set_intake(lanepool_t *pool, int intake) {
  for (uint32_t b = 0; b < LANEPOOL_BAND_COUNT; b++)
    lanepool__bandq_set_intake(&pool->bands[b], intake);
  for (uint32_t i = 0; i < lanepool__lane_total(pool); i++) {
    lanepool__lane_set_intake(pool->lanes[i], intake);
    lanepool__wake_thread(pool->lanes[i], false); /* to see it: run the rest, or end */
  }
}

/* The timer thread, then the first `count` lanes. */
static void join_threads(lanepool_t *pool, uint32_t count) {
  lanepool__timers_join(pool);
  for (uint32_t i = 0; i < count; i++) lanepool__lane_join(pool->lanes[i]);
}

/* Creation's unwind path: nothing was accepted yet. */
void lanepool__close_and_join(lanepool_t *pool, uint32_t started_lanes) {
  lanepool__timer_entry *none;
  size_t n;
  lanepool__timers_stop(pool, &none, &n);
  free(none);
  lanes_set_intake(pool, LANEPOOL__INTAKE_CLOSED);
  join_threads(pool, started_lanes);
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

static bool quiescent(lanepool_t *pool) {
  LANEPOOL_INJECT(LANEPOOL__AT_COUNTER);
  uint64_t finished = lanepool__timers_pending_scan(pool, false);
  for (uint32_t i = 0; i < lanepool__lane_total(pool); i++)
    finished += lanepool__lane_finished(pool->lanes[i]);
  LANEPOOL_INJECT(LANEPOOL__AT_DRAIN_SCAN);
  atomic_thread_fence(memory_order_seq_cst);
  uint64_t accepted = lanepool__timers_pending_scan(pool, true);
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
  LANEPOOL_INJECT(LANEPOOL__AT_INTAKE);
  lanes_set_intake(pool, LANEPOOL__INTAKE_CLOSED);
  lanepool__timer_entry *left;
  size_t n;
  lanepool__timers_stop(pool, &left, &n);
  if (n) abort(); /* none was at the second balance, and none could be added since */
  free(left);
  LANEPOOL_INJECT(LANEPOOL__AT_JOIN);
  join_threads(pool, lanepool__lane_total(pool));
  return true;
}

static void drive_cancel(lanepool_t *pool, lanepool_discard_fn discard, void *discard_arg) {
  lanepool__timer_entry *timers;
  size_t timer_count;
  LANEPOOL_INJECT(LANEPOOL__AT_INTAKE);
  lanepool__timers_stop(pool, &timers, &timer_count);
  /* Lanes already start no task; each waits for this CLOSED bit to answer its syncs. */
  lanes_set_intake(pool, LANEPOOL__INTAKE_CLOSED); /* wakes parked lanes too */
  LANEPOOL_INJECT(LANEPOOL__AT_JOIN);
  join_threads(pool, lanepool__lane_total(pool));
  LANEPOOL_INJECT(LANEPOOL__AT_CLOSE_DISCARD);
  lanepool_t *outer = lanepool__in_callback;
  lanepool__in_callback = pool;
  for (uint32_t i = 0; i < lanepool__lane_total(pool); i++)
    lanepool__discard_queue(&pool->lanes[i]->ring, &pool->lanes[i]->spill, discard, discard_arg);
  for (uint32_t b = 0; b < LANEPOOL_BAND_COUNT; b++)
    lanepool__bandq_discard_all(&pool->bands[b], discard, discard_arg);
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
  size_t at = registry_len;
  for (size_t i = 0; i < registry_len && at == registry_len; i++)
    if (registry[i] == pool) at = i;
  /* Not listed: never created, destroyed, or being destroyed. A caller that belongs to
   * the pool (its lane, its timer thread, its discard callback) proves the last: its
   * pool is live, and the answer is the documented EDEADLK (a pointer compare only). */
  bool own = lanepool__pool_thread == pool || lanepool__in_callback == pool;
  if (at == registry_len)
    rc = own || lanepool__chain_holds_pool(pool) ? EDEADLK : EINVAL;
  else if (lanepool__forked(pool->generation))
    rc = EOWNERDEAD;
  else if (pool->is_default)
    rc = EPERM;
  else if (own || lanepool__calls_inside(pool) || lanepool__chain_holds_pool(pool))
    rc = EDEADLK; /* its own thread, its callback, or a callback of a call on it */
  else
    registry[at] = registry[--registry_len];
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
