/*
 * worker.c - a lane's thread: what it runs, in which order, and its life (start,
 * replacement after a task ended it, join). Each band also has a rescue thread (its
 * "rescue lane", lanepool_rescue_lane): see "The rescue thread" below.
 *
 * The loop (lane_loop) takes work from, in this order (docs/architecture.md, "The loop"):
 *  1. its own lane's queue, if the lane is free, in order (run_lane); every
 *     LANEPOOL__FAIR_EVERY tasks it gives its lane up for work waiting for the band;
 *  2. its band's queue (bandq.c): one band job, holding no lane;
 *  3. a sibling lane whose thread is away, with work queued and free, in order, for up
 *     to LANEPOOL__FAIR_EVERY tasks;
 *  4. a higher band's job its tasks pushed, run lifted to that band (run_band_job);
 *  5. nothing: spin (park.c), then park.
 * Before 2, 3 or 4 the thread says it is away (seq_cst) and looks at its own queue again.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "internal.h"

#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Away, then one look at its own queue (pair 1, park.c; see the top). true if its lane
 * has work and is free: the caller runs that first instead; on the band's fair turn
 * (`fair`) that lane is announced to the band instead (a sibling may take it). */
static bool go_away(lanepool_lane_t *me, bool fair) {
  if (!atomic_load_explicit(&me->away, memory_order_relaxed))
    atomic_store_explicit(&me->away, 1, memory_order_seq_cst);
  bool mine =
      atomic_load_explicit(&me->excl, memory_order_seq_cst) == 0 && lanepool__lane_has_work(me);
  if (mine && fair) lanepool__band_wake(me->pool, me->band, false);
  return mine && !fair;
}

static void come_back(lanepool_lane_t *me) {
  if (atomic_load_explicit(&me->away, memory_order_relaxed))
    atomic_store_explicit(&me->away, 0, memory_order_seq_cst);
}

/* Step 3: a sibling's queue that waits for any thread of the band. Its own lane first,
 * unless this is the fair turn (as for a band job, below). */
static bool adopt_sibling(lanepool_lane_t *me, bool fair, unsigned source) {
  uint32_t n = me->pool->lanes_per_band;
  for (uint32_t k = 1; k <= n; k++) { /* the band's lanes, then its rescue lane */
    lanepool_lane_t *s = lanepool__band_lane(me->pool, me->band, (me->index + k) % (n + 1));
    if (!atomic_load_explicit(&s->away, memory_order_relaxed) ||
        atomic_load_explicit(&s->excl, memory_order_relaxed) != 0 || !lanepool__lane_has_work(s))
      continue;
    if (go_away(me, fair)) return true; /* its own lane first */
    if (!lanepool__excl_take(s)) continue;
    /* (A thread of the pool: the lane is freed only after every thread was joined.) */
    uint32_t ran = lanepool__run_lane(me, s, LANEPOOL__FAIR_EVERY, source, NULL, NULL);
    atomic_fetch_add_explicit(&me->adopted, ran, memory_order_relaxed);
    return true;
  }
  return false;
}

/* This thread to band b's settings for a lifted job (up), or back to its own band's: a
 * boost (band.c), and the timer slack, which only the thread itself can set. */
static void lift(lanepool_lane_t *me, uint32_t b, bool up) {
  atomic_store_explicit(&me->lift, up ? b : LANEPOOL_BAND_COUNT, memory_order_relaxed);
  lanepool__boost_update(me);
  int64_t job = me->pool->lanes[b * me->pool->lanes_per_band]->applied.timer_slack.got,
          own = me->applied.timer_slack.got;
  if (job != own) (void)lanepool__set_slack((uint64_t)(up ? job : own));
}

/* Step 2 (and the rescue thread's band step): one band job, holding no lane. Its own
 * lane first, unless this is the band's fair turn: then its lane, left with work queued
 * while its thread is away, is announced to the band (a sibling may take it). Step 4, a
 * higher band b's job its tasks pushed (lanepool__lift_waits): run lifted, this thread
 * raised to b for the run (band.c, boost_set), as GCD sets a thread's QoS per item. */
static bool run_band_job(lanepool_lane_t *me, uint32_t b, unsigned source, bool fair) {
  lanepool__band *band = &me->pool->bands[b];
  if (!lanepool__bandq_nonempty(band)) return false;
  if (go_away(me, fair)) return true;
  lanepool__task task;
  if (!lanepool__bandq_take(band, me->index, true, &task)) return false;
  /* More waiting: wake another thread if none spins (Go's wakep), so that band work
   * spreads over the band's threads and never waits behind this job alone. */
  if (lanepool__bandq_nonempty(band)) lanepool__band_wake(me->pool, b, false);
  if (b != me->band) {
    me->lift_hint &= ~(1u << b); /* one job for the work its tasks handed off */
    lift(me, b, true);
  }
  lanepool__run_counted(me, NULL, &task, source);
  if (b != me->band) return lift(me, b, false), true;
  /* Then more of them, up to LANEPOOL__FAIR_EVERY, while its own lane has nothing
   * queued (a relaxed look: a producer that finds this thread away wakes the band, and
   * the next turn of the loop looks properly): one look at the rest per batch. */
  if (source != LANEPOOL__FROM_RESCUE)
    for (uint32_t k = 1; k < LANEPOOL__FAIR_EVERY && lanepool__ring_depth(&me->ring) == 0 &&
                         !lanepool__life_cancelling(me->pool) &&
                         lanepool__bandq_take(band, me->index, false, &task);
         k++)
      lanepool__run_counted(me, NULL, &task, source);
  return true;
}

/* ---- the rescue thread (docs/architecture.md, "The rescue thread"): one more thread
 * per band, Go's sysmon in miniature, for when all of the band's threads block. */

/* After a park: if the band is stuck (no progress for LANEPOOL__RESCUE_NS with work
 * waiting), run one piece of that work. true if it ran something. */
static bool rescue_look(lanepool_lane_t *me) {
  uint32_t n = me->pool->lanes_per_band;
  uint64_t now = lanepool__now_ns(), p = 0; /* progress: tasks the lanes' threads finished */
  for (uint32_t i = 0; i < n; i++)
    p += atomic_load_explicit(&me->pool->lanes[me->band * n + i]->executed, memory_order_relaxed);
  uint64_t *seen = me->rescue_seen; /* [0]: progress, [1]: since when */
  if (p != seen[0]) {
    seen[0] = p;
    seen[1] = now;
    return false;
  }
  if (now - seen[1] < LANEPOOL__RESCUE_NS) return false;
  /* Lanes first: a thread stuck in a band job most often waits for a lane's work (short
   * lane-bound tasks), while a band job it would take may block in turn. */
  return adopt_sibling(me, false, LANEPOOL__FROM_RESCUE) ||
         run_band_job(me, me->band, LANEPOOL__FROM_RESCUE, false);
}

/* ---- the loop ------------------------------------------------------------------------ */

/* Cancel: each thread, leaving, takes each free lane of its band (its own first) and
 * gives it up, which answers the syncs queued there ECANCELED (docs/architecture.md). */
static void cancel_pass(lanepool_lane_t *me) {
  lanepool_t *pool = me->pool;
  uint32_t n = pool->lanes_per_band;
  for (uint32_t k = 0; k <= n; k++) { /* the rescue lane's index is n */
    lanepool_lane_t *l = lanepool__band_lane(pool, me->band, (me->index + k) % (n + 1));
    if (lanepool__excl_try(l)) lanepool__excl_release(l);
  }
}

/* The lane's thread leaves: nobody takes its lane's exclusion from now on (a sync that
 * comes later is refused with the lane's ESHUTDOWN; one that holds the lane now is
 * waited for), so nothing touches the lane's queue beside the discard pass. */
static void close_exclusion(lanepool_lane_t *me) {
  /* Free, or still held by this very thread (its queue is empty and closed by now: the
   * loop left only after that look). An ASan run of ReliabilityTests' 1,000 pools found a
   * thread spinning here on its own tid once; how it kept the lane is not known yet. */
  uint32_t own = (uint32_t)atomic_load_explicit(&me->tid, memory_order_relaxed), x = 0;
  while (!atomic_compare_exchange_weak_explicit(&me->excl, &x, LANEPOOL__EXCL_CLOSED,
                                                memory_order_seq_cst, memory_order_relaxed)) {
    if (x == own) continue; /* held by this thread: close it all the same */
    x = 0;
    lanepool__spin_yield();
  }
}

static void lane_loop(lanepool_lane_t *me) {
  lanepool_t *pool = me->pool;
  lanepool__band *band = &pool->bands[me->band];
  /* busy since (after a spin: its last clock read), and `executed` when it last idled */
  uint64_t busy_since = 0, busy_from = atomic_load_explicit(&me->executed, memory_order_relaxed);
  bool fair_turn = false; /* its lane gave way to one band job */
  /* Its own lane's exclusion, kept while its queue is empty and the thread has nothing
   * else to do (it spins holding it): given up before anything else runs and before it
   * parks. A queue that empties between two pushes then costs no CAS and no store on
   * the line producers read. */
  bool holding = false;
  for (;;) {
    /* acquire: pairs with the CAS that made the pool CANCELLING. Whoever saw CANCELLING
     * before this load cannot see this thread start another task. */
    LANEPOOL_INJECT(LANEPOOL__AT_STATE);
    if (lanepool__life_cancelling(pool)) {
      if (holding) lanepool__excl_release(me); /* answers its queued syncs */
      cancel_pass(me);
      break;
    }
    bool got = false;
    if (!busy_since) busy_since = lanepool__now_ns();
    if (fair_turn) {
      fair_turn = false;
      got = !me->spare && (run_band_job(me, me->band, LANEPOOL__FROM_BAND, true) ||
                           adopt_sibling(me, true, LANEPOOL__FROM_ADOPTED));
    }
    if (!got && (holding || (lanepool__lane_has_work(me) && lanepool__excl_try(me)))) {
      if (!holding) come_back(me);
      /* Band work pushed meanwhile may have counted on this thread (a spinner, or the
       * thread its push woke): busy with its lane now, it wakes another (Go's wakep;
       * model/bandq.pml, LANE_BLOCKS, found band jobs waiting for the rescue thread). */
      if (!me->spare && lanepool__bandq_nonempty(band)) lanepool__band_wake(pool, me->band, false);
      bool emptied = false;
      uint32_t ran = lanepool__run_lane(me, me, UINT32_MAX, LANEPOOL__FROM_OWN, NULL, &emptied);
      holding = emptied; /* otherwise run_lane gave it up */
      fair_turn = !emptied && ran && ran % LANEPOOL__FAIR_EVERY == 0;
      got = ran != 0;
    }
    if (!got && !me->spare && lanepool__band_waits(me)) {
      if (holding) lanepool__excl_release(me);
      holding = false;
      got = run_band_job(me, me->band, LANEPOOL__FROM_BAND, false) ||
            adopt_sibling(me, false, LANEPOOL__FROM_ADOPTED);
      /* A claim not yet published: a yield, not ring.h's back-off (W1 0.78x, set U). */
      if (!got) lanepool__spin_yield();
    }
    int lift = got || me->spare ? -1 : lanepool__lift_waits(me);
    if (lift >= 0) {
      if (holding) lanepool__excl_release(me);
      holding = false;
      got = run_band_job(me, (uint32_t)lift, LANEPOOL__FROM_BAND, false);
      if (!got) lanepool__spin_yield(); /* a claim not yet published, as above */
    }
    if (got) continue;
    /* Nothing to take. */
    uint64_t ran = atomic_load_explicit(&me->executed, memory_order_relaxed);
    if (ran != busy_from)
      lanepool__add_owned(&me->busy_ns, lanepool__now_ns() - busy_since, memory_order_relaxed);
    busy_since = 0;
    busy_from = ran;
    come_back(me);
    if (lanepool__ring_closed(&me->ring) || me->spare) {
      if (holding) lanepool__excl_release(me);
      holding = false;
    }
    if (lanepool__ring_closed(&me->ring)) {
      /* CLOSED was set after the band queue's and the overflow list's intake closed, so
       * nothing can arrive any more; one last look for what arrived before. */
      if (lanepool__lane_has_work(me) || (!me->spare && lanepool__bandq_nonempty(band))) {
        sched_yield(); /* held by a sync caller, or a claim not yet published */
        continue;
      }
      /* A lane whose thread is away (in a band job that waits for it, say) with work that
       * came before CLOSED: run it before leaving, the rescue thread too. */
      if (adopt_sibling(me, false, me->spare ? LANEPOOL__FROM_RESCUE : LANEPOOL__FROM_ADOPTED))
        continue;
      break;
    }
    if (me->spare) {
      lanepool__park_rescue(me);
      (void)rescue_look(me);
      continue;
    }
    if (lanepool__spin_for_work(me, holding, &busy_since)) continue;
    if (holding) lanepool__excl_release(me); /* then park's look finds what came since */
    holding = false;
    lanepool__park(me);
  }
  close_exclusion(me);
}

static void *lane_resume(void *arg);

/* A task ended the lane's thread (pthread_exit, or pthread_cancel at a cancellation
 * point): the unwinding runs this. The task counts as finished (it ran, once); a
 * successor thread takes the lane over and runs the rest of its queue, so nothing
 * accepted is lost and shutdown can still join the lane. (A task of another lane, run by
 * this thread while it waited for a sync there: sync.c's sync_unwound ran first and gave
 * that lane back; what is left here is this thread's own.) */
static void thread_lost(void *arg) {
  lanepool_lane_t *lane = arg;
  /* The task that ended the thread ran, once: counted as run_counted would have, and
   * the lane whose queue it came from given up (its next task waits for a thread). */
  lanepool_lane_t *held = lanepool__running_lane;
  lanepool__running_lane = NULL;
  lanepool__held_now = NULL;
  if (held) lanepool__add_owned(&held->bound_done, 1, memory_order_release);
  if (lanepool__band_job_running) /* the band job, or the one a lane task nested in */
    lanepool__add_owned(&lane->band_done, 1, memory_order_release);
  lanepool__band_job_running = false;
  atomic_store_explicit(&lane->executed,
                        atomic_load_explicit(&lane->started_tasks, memory_order_relaxed),
                        memory_order_release);
  atomic_store_explicit(&lane->away, 0, memory_order_seq_cst);
  if (held && !lanepool__forked(lane->generation)) lanepool__excl_release(held);
  lanepool__current = NULL;
  lanepool__thread_lane = NULL;
  lanepool__pool_thread = NULL;
  if (lanepool__forked(lane->generation)) return; /* a forked child's copy: let it end */
  lanepool__lane_thread_leaving(lane);
  pthread_mutex_lock(&lane->thread_lock);
  pthread_t next;
  int rc = lanepool__thread_start(&next, lane->stack_size, lane_resume, lane);
  if (rc) {
    char msg[200];
    (void)snprintf(msg, sizeof msg,
                   "lanepool: a task ended the thread of lane %s and no successor thread "
                   "could be started (%s); stopping, since its queued tasks could never run\n",
                   lane->name, strerror(rc));
    lanepool__die(msg, false);
  }
  /* thread_gen under thread_lock: a successor's thread_lost reads it after this. */
  uint64_t mine = lane->thread_gen;
  lane->thread = next; /* the joiner follows the chain (lanepool__lane_join) */
  lane->thread_gen = mine + 1;
  /* Detached unless the joiner already took it (internal.h, join_claim). */
  if (lane->join_claim != mine + 1) pthread_detach(pthread_self());
  pthread_mutex_unlock(&lane->thread_lock);
}

/* A lane's thread: its first (applied: the lane's record, which info reports, and the
 * creator waits for it) or a successor (lane_resume). */
static void *lane_thread(lanepool_lane_t *lane, lanepool__applied *applied) {
  lanepool__current = lane;
  lanepool__thread_lane = lane;
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
  if (applied == &lane->applied) {
    atomic_fetch_add_explicit(&lane->pool->started, 1, memory_order_release);
    lanepool__futex_wake((_Atomic uint32_t *)&lane->pool->started, 1);
  }
  pthread_cleanup_push(thread_lost, lane);
  lane_loop(lane);
  pthread_cleanup_pop(0);
  lanepool__lane_thread_leaving(lane);
  atomic_store_explicit(&lane->running, 0, memory_order_relaxed);
  lanepool__current = NULL;
  lanepool__pool_thread = NULL;
  LANEPOOL_INJECT(LANEPOOL__AT_EXIT);
  return NULL;
}

static void *lane_main(void *arg) { return lane_thread(arg, &((lanepool_lane_t *)arg)->applied); }

static void *lane_resume(void *arg) {
  lanepool__applied applied; /* the first thread's record stays what info reports */
  return lane_thread(arg, &applied);
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
    /* By generation, never by pthread_t (internal.h, thread_gen). */
    bool same = lane->thread_gen == gen;
    pthread_mutex_unlock(&lane->thread_lock);
    if (same) break;
  }
  /* A sync caller that gave the lane back may still be on its way out of the library
   * (its give-back woke the lane, which then exited): wait for its last access. */
  while (atomic_load_explicit(&lane->borrowers, memory_order_acquire) != 0) lanepool__spin_yield();
}
