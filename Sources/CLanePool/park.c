/*
 * park.c - submitting work with the wake it needs, spinning, parking.
 *
 * The wake-up pairs, all seq_cst (model/bandq.pml checks them):
 *  1. lane push:  CAS(tail) ; load(excl), load(sleeping), load(away)
 *     the holder giving the lane up:  store(excl = 0) ; load(tail)
 *     the lane's thread parking:      store(sleeping = PARKED) ; load(tail)
 *     the lane's thread going away:   store(away = 1) ; load(tail)
 *     so either the pusher sees the lane held (its holder sees the work), its thread
 *     parked (it wakes it), or away (it wakes the band), or that side sees the work.
 *  2. band push:  CAS(tail) ; load(spinning), load(idle), load(rescue_idle)
 *     a parking thread:     store(sleeping = PARKED) ; add(idle) ; load(band queue)
 *     a spinner stopping:   sub(spinning) ; load(band queue)
 *     the rescue thread:    store(rescue_idle = 1) ; load(band queue, orphans)
 *     so either the pusher wakes a thread (or sees a spinner that will look once more)
 *     or the thread sees the job.
 *  3. a job left to its pusher (bandq.c's `next`):  CAS(tail) ; load(watching) too
 *     the watcher:           exchange(watching, 1) was 0 ; a look after each timed park
 *     a watcher stopping:    store(watching = 0) ; load(band queue) (woken: band_wake)
 *     so a push that saw a watcher, and woke no lane thread for it, is seen by a look.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "internal.h"

/* ---- waking -------------------------------------------------------------------- */

/* A thread woken from inside a running task of another thread of its pool: which, that
 * task, and where it ran (for yield_to_waker; park cleared the note). Nothing for a
 * waker outside the pool or between its tasks, or with no CPU number to give. */
static inline void note_waker(lanepool_lane_t *lane) {
  lanepool_lane_t *cur = lanepool__thread_lane;
  if (!cur || cur == lane || cur->pool != lane->pool) return;
  uint64_t task = atomic_load_explicit(&cur->started_tasks, memory_order_relaxed);
  if (atomic_load_explicit(&cur->executed, memory_order_relaxed) == task) return;
  int cpu = sched_getcpu();
  if (cpu < 0) return;
  atomic_store_explicit(&lane->woken_by_task, task, memory_order_relaxed);
  atomic_store_explicit(&lane->woken_on_cpu, cpu, memory_order_relaxed);
  atomic_store_explicit(&lane->woken_by, cur, memory_order_relaxed);
}

bool lanepool__wake_thread(lanepool_lane_t *lane, bool note) {
  LANEPOOL_INJECT(LANEPOOL__AT_WAKE);
  /* seq_cst load: see the pairs above; the CAS makes one waker alone pay for the syscall. */
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

static __thread uint32_t wake_turn; /* where a band wake starts looking: spreads wakes */

void lanepool__band_wake(lanepool_t *pool, uint32_t b, bool next) {
  lanepool__band *band = &pool->bands[b];
  if (atomic_load_explicit(&band->spinning, memory_order_seq_cst) == 0 &&
      atomic_load_explicit(&band->idle, memory_order_seq_cst) != 0 &&
      !(next && atomic_load_explicit(&band->watching, memory_order_seq_cst))) {
    uint32_t n = pool->lanes_per_band;
    lanepool_lane_t **lanes = &pool->lanes[b * n];
    uint32_t start = wake_turn++;
    for (uint32_t k = 0; k < n; k++)
      if (lanepool__wake_thread(lanes[(start + k) % n], true)) break;
  }
  /* The rescue thread, parked untimed, must tick while this work may get stuck. */
  if (__builtin_expect(atomic_load_explicit(&band->rescue_idle, memory_order_seq_cst), 0))
    (void)lanepool__wake_thread(lanepool__rescue_lane(pool, b), false);
}

void lanepool__lane_kick(lanepool_lane_t *lane, bool note) {
  if (lanepool__wake_thread(lane, note)) return;
  /* Awake and not away: its thread looks at its lane before it goes away or parks. */
  if (!atomic_load_explicit(&lane->away, memory_order_seq_cst)) return;
  lanepool__band_wake(lane->pool, lane->band, false);
}

/* ---- submitting ------------------------------------------------------------------- */

/* Ring cells claimed with one CAS per run of free cells, the rest appended to the lane's
 * overflow list in one critical section (once the list holds tasks, FIFO: behind them).
 * A call under way from before the tasks are published to after the wake: destroy
 * waits for it (calls.c), since a task may run and its owner destroy the pool before
 * this thread is out. Inlined in both pushes: with n = 1 it folds to a single push. */
static inline __attribute__((always_inline)) int lane_push(lanepool_lane_t *lane, lanepool_fn fn,
                                                           void *const *ctxs, void *const *args,
                                                           uint64_t n, unsigned flags,
                                                           uint64_t *accepted) {
  *accepted = 0;
  if (lanepool__forked(lane->generation)) return EOWNERDEAD;
  const void *outer = lanepool__call_enter(lane);
  for (uint64_t i = 0; i < n; i++) LANEPOOL__TRACE(PUSH, lane, 0, fn, ctxs[i]);
  /* A draining pool takes work only from its own threads (the drain's tail). */
  bool own = (flags & LANEPOOL__PUSH_OWN) || lanepool__is_own_lane(lane->pool);
  int rc = 0;
  while (*accepted < n) {
    uint64_t done = *accepted;
    if (lane->hard_capacity || lanepool__spill_count(&lane->spill, memory_order_acquire) == 0) {
      uint64_t k = 0;
      rc = lanepool__ring_push_n(&lane->ring, fn, ctxs + done, args ? args + done : NULL, n - done,
                                 own ? LANEPOOL__PUSH_OWN : 0, &k);
      *accepted += rc ? 0 : k;
      if (rc == 0) continue;
      if (rc != EAGAIN || lane->hard_capacity) break;
    }
    rc = lanepool__spill_push_n(&lane->spill, fn, ctxs + done, args ? args + done : NULL, n - done,
                                own);
    if (rc == 0) *accepted = n;
    break;
  }
  if (*accepted == n) rc = 0;
  if (*accepted) {
    /* Held: its holder looks at the queue when it gives the lane up (pair 1). */
    if (atomic_load_explicit(&lane->excl, memory_order_seq_cst) == 0)
      lanepool__lane_kick(lane, !(flags & LANEPOOL__PUSH_WAITS));
    lanepool_lane_t *cur = lanepool__thread_lane;
    if (cur && cur != lane && cur->pool == lane->pool) cur->handed_off = true;
  }
  lanepool__call_leave(outer);
  return rc;
}

int lanepool__lane_push(lanepool_lane_t *lane, lanepool_fn fn, void *ctx, void *arg,
                        unsigned flags) {
  uint64_t accepted;
  return lane_push(lane, fn, &ctx, &arg, 1, flags, &accepted);
}

int lanepool__lane_push_n(lanepool_lane_t *lane, lanepool_fn fn, void *const *ctxs,
                          void *const *args, uint64_t n, uint64_t *accepted) {
  return lane_push(lane, fn, ctxs, args, n, 0, accepted);
}

/* Which ring of a band's queue a producer pushes into: a lane's thread its own lane's (it
 * takes from there first, so a task's next job stays with it unless a free thread comes
 * first); any other thread the rings in turn, from a start of its own (threads are
 * numbered as they first push), so that the band's threads each find work in their own
 * ring and two producers seldom meet on one tail. */
static __thread uint32_t producer_turn = UINT32_MAX;
static _Atomic uint32_t next_producer;

static inline uint32_t shard_of_caller(lanepool_t *pool, uint32_t b, bool *mine) {
  lanepool_lane_t *me = lanepool__thread_lane;
  *mine = me && me->pool == pool && me->band == b;
  if (*mine) return me->index;
  /* A thread of the band spins: its ring, where it looks at every turn (W3). */
  uint32_t warm = atomic_load_explicit(&pool->warm[b].value, memory_order_relaxed);
  if (warm) return warm - 1;
  if (__builtin_expect(producer_turn == UINT32_MAX, 0))
    producer_turn = atomic_fetch_add_explicit(&next_producer, 1, memory_order_relaxed);
  return producer_turn++;
}

int lanepool__band_push(lanepool_t *pool, uint32_t b, lanepool_fn fn, void *ctx, void *arg,
                        unsigned flags) {
  lanepool__band *band = &pool->bands[b];
  LANEPOOL__TRACE(PUSH, NULL, b, fn, ctx);
  bool mine;
  uint32_t shard = shard_of_caller(pool, b, &mine);
  /* From its own lane's thread, in a task (not the rescue thread's: it has no ring). */
  bool next = mine && lanepool__thread_lane->index < band->shards;
  /* A draining pool takes work only from its own threads (the drain's tail). */
  bool own = (flags & LANEPOOL__PUSH_OWN) || lanepool__is_own_lane(pool);
  int rc = lanepool__bandq_push(band, shard, fn, ctx, arg, own, pool->hard_capacity, &next);
  if (rc) return rc;
  lanepool__band_wake(pool, b, next); /* pairs 2 and 3 */
  lanepool_lane_t *cur = lanepool__thread_lane;
  if (cur && cur->pool == pool) {
    cur->handed_off = true;
    if (b < cur->band) cur->lift_hint |= 1u << b;
  }
  return 0;
}

/* ---- what a thread may take --------------------------------------------------------- */

/* A sibling lane whose queue waits for any thread of the band: its own thread away
 * running something else, the lane free, work queued. */
static bool orphan_waits(lanepool_lane_t *me) {
  uint32_t n = me->pool->lanes_per_band;
  for (uint32_t k = 1; k <= n; k++) {
    lanepool_lane_t *s = lanepool__band_lane(me->pool, me->band, (me->index + k) % (n + 1));
    if (atomic_load_explicit(&s->away, memory_order_seq_cst) &&
        atomic_load_explicit(&s->excl, memory_order_seq_cst) == 0 && lanepool__lane_has_work(s))
      return true;
  }
  return false;
}

/* Any band work, jobs left to their pushers too (the rescue thread ticks while any waits). */
static bool band_has_work(lanepool_lane_t *me) {
  return lanepool__bandq_nonempty(&me->pool->bands[me->band]) || orphan_waits(me);
}

bool lanepool__band_waits(lanepool_lane_t *me) {
  return lanepool__bandq_takeable(&me->pool->bands[me->band], me->index) || orphan_waits(me);
}

int lanepool__lift_waits(lanepool_lane_t *me) {
  if (!me->lift_hint) return -1; /* (each idle turn and spin round: nothing to read) */
  uint32_t ok = me->lift_hint & atomic_load_explicit(&me->pool->lift_ok, memory_order_relaxed);
  /* Not while a band below runs work: its CPUs then take the job's band's thread at once
   * (preempting), and the two run side by side where a lifted job would wait its turn. */
  for (uint32_t b = me->band + 1; ok && b < LANEPOOL_BAND_COUNT; b++) {
    lanepool__band *low = &me->pool->bands[b];
    if (atomic_load_explicit(&low->idle, memory_order_relaxed) +
            atomic_load_explicit(&low->spinning, memory_order_relaxed) <
        me->pool->lanes_per_band)
      ok = 0;
  }
  for (uint32_t b = 0; ok && b < me->band; b++) {
    lanepool__band *band = &me->pool->bands[b];
    if ((ok >> b & 1u) && atomic_load_explicit(&band->spinning, memory_order_relaxed) == 0 &&
        lanepool__bandq_takeable(band, me->index))
      return (int)b;
  }
  me->lift_hint = 0;
  return -1;
}

/* Work this thread may take: its lane's (free), the band's, a lane whose thread is away. */
static bool work_for(lanepool_lane_t *lane) {
  if (lanepool__ring_closed(&lane->ring)) return true; /* time to end */
  if (atomic_load_explicit(&lane->excl, memory_order_seq_cst) == 0 && lanepool__lane_has_work(lane))
    return true;
  if (lane->spare) return false; /* the rescue thread takes band work only when stuck */
  return lanepool__band_waits(lane);
}

/* ---- spinning ------------------------------------------------------------------------ */

bool lanepool__cpus_taken(const lanepool_t *pool) {
  if (pool->spin_cpus == 0) return false;
  uint32_t awake = 0;
  for (uint32_t b = 0; b < LANEPOOL_BAND_COUNT; b++) {
    uint32_t idle = atomic_load_explicit(&pool->bands[b].idle, memory_order_relaxed);
    if (idle < pool->lanes_per_band) awake += pool->lanes_per_band - idle;
  }
  uint32_t spinning = atomic_load_explicit(&pool->spinners, memory_order_relaxed) +
                      atomic_load_explicit(&pool->interactive_spinner, memory_order_relaxed);
  return awake > spinning && awake - spinning >= pool->spin_cpus;
}

bool lanepool__spin_for_work(lanepool_lane_t *lane, bool holding, uint64_t *since) {
  uint32_t budget = lane->fixed_spin ? lane->spin_ns : lane->spin_now;
  bool handed_off = lane->handed_off; /* see below */
  lane->handed_off = false;
  if (budget == 0) return false;
  /* Take a spinner slot, or park at once: spinning threads must leave cores to the
   * producers (a soft cap: a relaxed counter). The low-latency interactive band has one
   * slot of its own. Just handed work to another thread: its answer tends to come back
   * within microseconds, so spin past the cap, on the adaptive budget. */
  _Atomic uint32_t *spinners =
      lane->low_latency ? &lane->pool->interactive_spinner : &lane->pool->spinners;
  uint32_t slots = lane->low_latency ? 1 : lane->pool->max_spinners;
  if (atomic_fetch_add_explicit(spinners, 1, memory_order_relaxed) >= slots && !handed_off) {
    atomic_fetch_sub_explicit(spinners, 1, memory_order_relaxed);
    return false;
  }
  lanepool__band *band = &lane->pool->bands[lane->band];
  atomic_fetch_add_explicit(&band->spinning, 1, memory_order_seq_cst);
  /* Offer this lane while it spins (pool->warm: to lanepool_next_lane, band pushes). */
  _Atomic uint32_t *warm = &lane->pool->warm[lane->band].value;
  const uint32_t me = lane->pool->lanes_per_band > 1 ? lane->index + 1 : 0;
  if (me) atomic_store_explicit(warm, me, memory_order_relaxed);
  lanepool__ring *own_ring = lane->index < band->shards ? &band->rings[lane->index] : NULL;
  bool found = false;
  uint64_t last = lanepool__now_ns();
  uint64_t deadline = last + budget;
  while (!found) {
    /* Its lane's queue and its own ring of the band's queue at every turn, the rest once a
     * round: a spinner that reads the lines a busy sibling writes at each push and take
     * slows it (W9's task preferring the pool: 640 -> 516 ns a hop). */
    for (int i = 0; i < 64 && !found; i++) {
      found = (lanepool__lane_has_work(lane) &&
               (holding || atomic_load_explicit(&lane->excl, memory_order_relaxed) == 0)) ||
              (own_ring && lanepool__ring_nonempty(own_ring));
      if (!found) lanepool__cpu_relax();
    }
    if (found || lanepool__ring_closed(&lane->ring) ||
        lanepool__bandq_takeable(band, lane->index) || orphan_waits(lane) ||
        lanepool__cpus_taken(lane->pool) || (found = lanepool__lift_waits(lane) >= 0))
      break;
    /* Cede the core to a runnable producer, if any, not counted as spinning meanwhile:
     * a yielded spinner may wait milliseconds behind another band's thread, and a push
     * that saw it counted would wake no one (pair 2 holds: the next turn looks again). */
    atomic_fetch_sub_explicit(&band->spinning, 1, memory_order_seq_cst);
    sched_yield();
    atomic_fetch_add_explicit(&band->spinning, 1, memory_order_seq_cst);
    if (me && atomic_load_explicit(warm, memory_order_relaxed) == 0)
      atomic_store_explicit(warm, me, memory_order_relaxed);
    /* Past the budget, or preempted (no CPU idle: work sent here would wait): park. Read
     * after the yield: a task found next counts as busy from here on (*since). */
    uint64_t t = lanepool__now_ns(), was = last;
    last = t;
    if (t >= deadline || t - was >= LANEPOOL__SPIN_PREEMPTED_NS) break;
  }
  uint32_t offered = me;
  if (me)
    atomic_compare_exchange_strong_explicit(warm, &offered, 0, memory_order_relaxed,
                                            memory_order_relaxed);
  /* No longer a spinner, then one more look (pair 2): a push that saw it woke no one. */
  atomic_fetch_sub_explicit(&band->spinning, 1, memory_order_seq_cst);
  atomic_fetch_sub_explicit(spinners, 1, memory_order_relaxed);
  found = found || (holding && lanepool__lane_has_work(lane)) || work_for(lane);
  /* A spin that found nothing burned CPU for nothing: halve the budget (below 1 us: 0). */
  if (!found) lane->spin_now = budget / 2 >= 1000 ? budget / 2 : 0;
  *since = found ? last : 0;
  return found;
}

/* After a park: if the thread was woken sooner than its maximum budget, spinning would
 * have caught that work: grow the budget to what would have caught it with room to
 * spare (twice the park), at least doubling it, at least 1 us, at most spin_ns. */
static void adapt_after_park(lanepool_lane_t *lane, uint64_t parked_ns) {
  if (lane->fixed_spin || lane->spin_ns == 0 || parked_ns >= lane->spin_ns) return;
  uint64_t grown = lane->spin_now ? (uint64_t)lane->spin_now * 2 : 1000;
  if (grown < 2 * parked_ns) grown = 2 * parked_ns;
  lane->spin_now = grown < lane->spin_ns ? (uint32_t)grown : lane->spin_ns;
}

/* ---- parking -------------------------------------------------------------------------- */

/* Woken by a thread's task that is still running, on the CPU that task ran on: the
 * kernel found no idle CPU and put this thread beside its waker, whose task it would
 * preempt (EEVDF's wake-up preemption). One sched_yield lets the waker go on first. Not
 * for a thread on a CPU of its own, nor after its waker's task ended, nor for a waker
 * that blocks until the pushed task ran (a queued sync: LANEPOOL__PUSH_WAITS). Returns
 * 1 if it yielded (for the trace). */
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

/* PARKED, counted idle (not for the rescue thread), then one more look at what the
 * thread may take (pairs 1 and 2). true if work came and the thread is AWAKE again. */
static bool park_begin(lanepool_lane_t *lane, _Atomic uint32_t *idle) {
  /* Before PARKED: a waker's note, after its CAS, comes later. */
  atomic_store_explicit(&lane->woken_by, NULL, memory_order_relaxed);
  atomic_store_explicit(&lane->sleeping, LANE_PARKED, memory_order_seq_cst);
  if (idle) atomic_fetch_add_explicit(idle, 1, memory_order_seq_cst);
  LANEPOOL_INJECT(LANEPOOL__AT_PARK);
  if (work_for(lane)) {
    uint32_t parked = LANE_PARKED;
    /* Fails if a waker's CAS came first: awake either way. */
    atomic_compare_exchange_strong_explicit(&lane->sleeping, &parked, LANE_AWAKE,
                                            memory_order_seq_cst, memory_order_relaxed);
    if (idle) atomic_fetch_sub_explicit(idle, 1, memory_order_seq_cst);
    return true;
  }
  /* Idle: if the pool drains, its driver may be waiting for this moment. */
  lanepool__drain_idle(lane->pool);
  return false;
}

/* While the band's queue holds jobs left to their pushers (bandq.c), one parked thread
 * watches them (pair 3): a look after each timed park; a job still left a grace later
 * is the band's, and it wakes to take it; it stops once a look finds no job, none
 * pushed since the last. */
void lanepool__park(lanepool_lane_t *lane) {
  lanepool__band *band = &lane->pool->bands[lane->band];
  if (park_begin(lane, &band->idle)) return;
  LANEPOOL__TRACE(PARK, lane, 0, NULL, NULL);
  uint64_t t0 = lanepool__now_ns(), pushed = UINT64_MAX;
  uint32_t v;
  bool watching = false;
  /* acquire: pairs with the waker's CAS to AWAKE. */
  while ((v = atomic_load_explicit(&lane->sleeping, memory_order_acquire)) != LANE_AWAKE) {
    watching = watching || (lanepool__bandq_nonempty(band) &&
                            !atomic_exchange_explicit(&band->watching, 1, memory_order_seq_cst));
    if (!watching) {
      lanepool__futex_wait(&lane->sleeping, v);
    } else if (lanepool__futex_wait_for(&lane->sleeping, v, LANEPOOL__WATCH_NS)) {
      uint64_t seen = pushed;
      pushed = lanepool__bandq_accepted(band);
      if (work_for(lane)) { /* (fails if a waker's CAS came first: awake either way) */
        atomic_compare_exchange_strong_explicit(&lane->sleeping, &v, LANE_AWAKE,
                                                memory_order_seq_cst, memory_order_relaxed);
      } else if (pushed == seen && !lanepool__bandq_nonempty(band)) {
        atomic_store_explicit(&band->watching, 0, memory_order_seq_cst); /* then a look */
        watching = false;
      }
    }
  }
  atomic_fetch_sub_explicit(&band->idle, 1, memory_order_seq_cst);
  if (watching) { /* hands the watch on (pushes that saw it woke no one), as Go's wakep */
    atomic_store_explicit(&band->watching, 0, memory_order_seq_cst);
    if (lanepool__bandq_nonempty(band)) lanepool__band_wake(lane->pool, lane->band, false);
  }
  /* (Woken for work another thread took first, a lifter say: no reason to spin longer.) */
  if (work_for(lane)) adapt_after_park(lane, lanepool__now_ns() - t0);
  unsigned yielded = yield_to_waker(lane);
  LANEPOOL__TRACE(UNPARK, lane, yielded, NULL, NULL);
}

/* The rescue thread parks with a timeout (LANEPOOL__RESCUE_NS) while its band has work
 * waiting, or for one timeout after a wake; untimed otherwise, and then a push that
 * announces work wakes it (rescue_idle, pair 2). Returns after a wake or a timeout. */
void lanepool__park_rescue(lanepool_lane_t *lane) {
  if (park_begin(lane, NULL)) return;
  LANEPOOL__TRACE(PARK, lane, 0, NULL, NULL);
  _Atomic uint32_t *idle = &lane->pool->bands[lane->band].rescue_idle;
  bool timed = lanepool__now_ns() < lane->rescue_calm_until || band_has_work(lane);
  if (!timed) {
    atomic_store_explicit(idle, 1, memory_order_seq_cst);
    if (band_has_work(lane)) {
      atomic_store_explicit(idle, 0, memory_order_relaxed);
      timed = true;
    }
  }
  uint32_t v;
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
