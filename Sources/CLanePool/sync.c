/*
 * sync.c - a lane's exclusion, and the sync calls.
 *
 * A lane's exclusion is not its thread: `excl` names the one thread (tid) that may run
 * the lane's queue now, or nobody (0). Who takes it, and why a sync never waits for
 * itself: docs/architecture.md, "Who runs a lane's queue". Only a real cycle of
 * exclusions is refused (EDEADLK).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "internal.h"

#include <sys/syscall.h>
#include <unistd.h>

static __thread uint32_t my_tid;
static __thread uint64_t my_tid_generation;

/* This thread's id, nonzero (cached; a fork child asks again). */
static inline uint32_t self_id(void) {
  uint64_t g = atomic_load_explicit(&lanepool__fork_generation, memory_order_relaxed);
  if (__builtin_expect(my_tid == 0 || my_tid_generation != g, 0)) {
    my_tid = (uint32_t)syscall(SYS_gettid);
    my_tid_generation = g;
  }
  return my_tid;
}

bool lanepool__excl_try(lanepool_lane_t *lane) {
  uint32_t free_ = 0;
  return atomic_load_explicit(&lane->excl, memory_order_relaxed) == 0 &&
         atomic_compare_exchange_strong_explicit(&lane->excl, &free_, self_id(),
                                                 memory_order_seq_cst, memory_order_relaxed);
}

/* Taken from outside while the lane is boosted: this thread is raised too (band.c, the
 * carrier). The Dekker pair with an update: CAS(excl) ; load(boost_band) against
 * store(boost_band) ; load(excl). */
static void carry_boost(lanepool_lane_t *lane) {
  if (__builtin_expect(atomic_load_explicit(&lane->boost_band, memory_order_seq_cst) != lane->band,
                       0))
    lanepool__boost_update(lane);
}

bool lanepool__excl_take(lanepool_lane_t *lane) {
  if (!lanepool__excl_try(lane)) return false;
  carry_boost(lane);
  return true;
}

void lanepool__excl_release(lanepool_lane_t *lane) {
  LANEPOOL_INJECT(LANEPOOL__AT_LEND);
  /* Cancel: the holder answers every sync queued here (worker.c, cancel_pass). */
  if (__builtin_expect(lanepool__life_cancelling(lane->pool), 0)) lanepool__lane_cancel_syncs(lane);
  /* seq_cst (a release too: what the holder ran happens before the next holder's
   * tasks), then the look at the queue of the wake-up pair with a producer. */
  atomic_store_explicit(&lane->excl, 0, memory_order_seq_cst);
  /* A raised carrier puts itself back (band.c; the pair with carrier_sync's look). */
  if (__builtin_expect(atomic_load_explicit(&lane->carried, memory_order_seq_cst) != 0 ||
                           lanepool__carrier_owed.band != 0,
                       0))
    lanepool__carrier_give(lane, self_id(), lanepool__held_now != NULL);
  if (lanepool__lane_has_work(lane)) {
    lanepool__lane_kick(lane, true);
    /* Free with work: the one moment a waiter asleep on help_seq may take the lane (it
     * sleeps only while the lane is held; its own sync keeps the queue non-empty). */
    lanepool__wake_helpers(lane);
  }
}

/* ---- running a lane's queue ------------------------------------------------------ */

__thread lanepool_lane_t *lanepool__running_lane;
__thread bool lanepool__band_job_running;

void lanepool__run_counted(lanepool_lane_t *me, lanepool_lane_t *lane, const lanepool__task *task,
                           unsigned source) {
  /* started != executed while a task runs: what the stall detector watches. (A sync's
   * waiter that runs a lane's queue nests tasks in its own: run_lane.) */
  atomic_store_explicit(&me->started_tasks,
                        atomic_load_explicit(&me->executed, memory_order_relaxed) + 1,
                        memory_order_relaxed);
  bool outer_band_job = lanepool__band_job_running;
  if (!lane) lanepool__band_job_running = true;
  /* Back from a real-time boost: its timer slack as its band sets it (only it can). */
  uint32_t due = 2;
  if (__builtin_expect(atomic_load_explicit(&me->reslack, memory_order_relaxed) == 2, 0) &&
      atomic_compare_exchange_strong_explicit(&me->reslack, &due, 0, memory_order_relaxed,
                                              memory_order_relaxed) &&
      me->applied.timer_slack.requested != -1)
    (void)lanepool__set_slack((uint64_t)me->applied.timer_slack.got);
  LANEPOOL__TRACE(RUN, lane ? lane : me, source, task->fn, task->ctx);
  if (task->arg) /* a two-argument task */
    ((lanepool_fn2)(void (*)(void))task->fn)(task->ctx, task->arg);
  else
    task->fn(task->ctx);
  LANEPOOL__TRACE(END, lane ? lane : me, 0, NULL, NULL);
  /* A child forked in the task must not go on running the pool's queues (the parent does). */
  if (lanepool__forked(me->generation))
    lanepool__die("lanepool: a process forked inside a task returned to its lane "
                  "loop; the child exits (status 0)\n",
                  true);
  lanepool__band_job_running = outer_band_job;
  /* release: pairs with the drain scan's acquire (lanepool__lane_finished). */
  LANEPOOL_INJECT(LANEPOOL__AT_COUNTER);
  _Atomic uint64_t *done = lane ? &lane->bound_done : &me->band_done;
  lanepool__add_owned(done, 1, memory_order_release);
  lanepool__add_owned(&me->executed, 1, memory_order_release);
}

uint32_t lanepool__run_lane(lanepool_lane_t *me, lanepool_lane_t *lane, uint32_t most,
                            unsigned source, _Atomic uint32_t *stop, bool *keep_if_empty) {
  /* Over the chain the thread holds already (a sync's waiter inside a lane's task). */
  const lanepool__held *outer = lanepool__held_now;
  lanepool__held held = {lane, outer};
  /* Inside a task of its own (a sync's waiter): that task still runs after these. */
  bool in_task = atomic_load_explicit(&me->started_tasks, memory_order_relaxed) !=
                 atomic_load_explicit(&me->executed, memory_order_relaxed);
  lanepool_lane_t *saved_current = lanepool__current, *saved_running = lanepool__running_lane;
  lanepool__held_now = &held;
  lanepool__current = lane;
  lanepool__running_lane = lane;
  uint32_t ran = 0, waited = 0; /* waited: back-off rounds for an unpublished head */
  for (;;) {
    if (lanepool__life_cancelling(me->pool)) break;
    if (stop && atomic_load_explicit(stop, memory_order_acquire)) break;
    if (ran && ran % LANEPOOL__FAIR_EVERY == 0 &&
        (ran >= most || (!me->spare && lanepool__band_waits(me))))
      break;
    lanepool__task task;
    bool pending;
    if (lanepool__lane_pop(lane, &task, &pending)) {
      waited = 0;
      lanepool__run_counted(me, lane, &task, source);
      ran++;
      continue;
    }
    if (!pending) {
      if (keep_if_empty) *keep_if_empty = true; /* empty: the caller keeps the lane */
      break;
    }
    lanepool__ring_backoff(&waited); /* a producer claimed the head cell: it publishes */
  }
  lanepool__running_lane = saved_running;
  lanepool__current = saved_current;
  lanepool__held_now = outer;
  if (in_task) /* before the release: a thread it wakes sees that task still running */
    atomic_store_explicit(&me->started_tasks,
                          atomic_load_explicit(&me->executed, memory_order_relaxed) + 1,
                          memory_order_relaxed);
  if (!keep_if_empty || !*keep_if_empty) lanepool__excl_release(lane);
  return ran;
}

/* ---- sync chains: a sync back onto a lane the chain holds is EDEADLK ------------ */

bool lanepool__chain_holds_pool(const lanepool_t *pool) {
  for (const lanepool__held *h = lanepool__held_now; h; h = h->up)
    if (h->lane && h->lane->pool == pool) return true;
  return false;
}

int lanepool_lane_held_here(const lanepool_lane_t *lane, int *held) {
  if (!lane || !held) return EINVAL;
  *held = lanepool__held_now && lanepool__held_now->lane == lane;
  return 0;
}

/* ---- whose band a waiter has (docs/priorities.md, "Whose band") ------------------ */

/* The highest of: the thread's own band (a lane's thread: its lane's; a thread that
 * entered a band: that one; any other: default), and the band each lane it holds runs
 * at now (its own, or a waiter's): the lanes of its chain of syncs, a closure's lane
 * included, and through a queued sync's record the lanes its caller holds. */
static int waiter_band(void) {
  lanepool_lane_t *home = lanepool__thread_lane;
  uint32_t b = home ? home->band : lanepool__thread_band ? (uint32_t)lanepool__thread_band - 1 : 2;
  uint32_t lift = home ? atomic_load_explicit(&home->lift, memory_order_relaxed) : b;
  if (lift < b) b = lift; /* a lifted job's band (worker.c, step 4) */
  for (const lanepool__held *h = lanepool__held_now; h; h = h->up) {
    if (!h->lane) continue;
    uint32_t lb = atomic_load_explicit(&((lanepool_lane_t *)h->lane)->boost_band,
                                       memory_order_seq_cst); /* (band.c, tell_chain) */
    if (h->lane->band < lb) lb = h->lane->band;
    if (lb < b) b = lb;
  }
  return (int)b;
}

int lanepool_thread_qos(lanepool_qos_t *out) {
  if (!out) return EINVAL;
  *out = lanepool__qos_of_band[waiter_band()];
  return 0;
}

/* ---- inline sync: running the closure under the lane's exclusion ----------------- */

/* Ends an inline run: counted as finished (release: what the closure did, its submits
 * included, happens before a drain scan that sees the count), the exclusion given up,
 * and a draining pool's driver told. */
static void finish_inline(lanepool_lane_t *lane) {
  lanepool_t *pool = lane->pool;
  lanepool__excl_release(lane);
  atomic_fetch_add_explicit(&lane->lent_out, 1, memory_order_release);
  lanepool__drain_idle(pool);
  /* release, and the last access: once given up the lane may exit and be joined;
   * lanepool__lane_join waits for this before anything can be freed. */
  LANEPOOL_INJECT(LANEPOOL__AT_COUNTER);
  atomic_fetch_sub_explicit(&lane->borrowers, 1, memory_order_release);
}

/* true if the caller now holds the lane to run a closure inline: the lane was free,
 * nothing is queued, the pool is open. */
static bool take_for_inline(lanepool_lane_t *lane) {
  if (!lanepool__excl_try(lane)) return false;
  /* Held, the lane's thread cannot exit before this is counted (it ends only with its
   * lane free and empty). */
  atomic_fetch_add_explicit(&lane->borrowers, 1, memory_order_relaxed);
  LANEPOOL_INJECT(LANEPOOL__AT_LEND);
  /* Counted as accepted before the state check (both seq_cst): a drain whose state
   * change this check does not see has not scanned yet, and its scan counts this run,
   * so the drain waits for it (and for what its closure submits) like for a task. */
  atomic_fetch_add_explicit(&lane->lent_in, 1, memory_order_seq_cst);
  LANEPOOL_INJECT(LANEPOOL__AT_STATE);
  if (!lanepool__lane_has_work(lane) && !lanepool__ring_closed(&lane->ring) &&
      lanepool__life_open(lane->pool)) {
    carry_boost(lane); /* (only now: a boosted lane mostly has a sync queued) */
    return true;
  }
  finish_inline(lane); /* queued work runs first (FIFO), or the pool is stopping */
  return false;
}

typedef struct lanepool__inline_frame {
  lanepool_lane_t *lane, *saved_lane;
  lanepool_t *saved_pool;
  lanepool__held held; /* this lane over the caller's chain, while the closure runs */
  const lanepool__held *saved_held;
} lanepool__inline_frame;

/* The end of an inline run. A closure that ends the caller's thread (pthread_exit,
 * cancellation) still gives the lane up, or the lane would stay held forever. */
static void inline_unwound(void *arg) {
  lanepool__inline_frame *f = arg;
  lanepool__current = f->saved_lane;
  lanepool__pool_thread = f->saved_pool;
  lanepool__held_now = f->saved_held;
  finish_inline(f->lane);
}

static void run_inline(lanepool_lane_t *lane, lanepool_fn fn, void *ctx) {
  lanepool__inline_frame f = {lane,
                              lanepool__current,
                              lanepool__pool_thread,
                              {lane, lanepool__held_now},
                              lanepool__held_now};
  lanepool__held_now = &f.held;
  /* Inside, the caller is the lane: lanepool_current_lane() answers it, a sync onto it
   * is EDEADLK, and shutting its pool down from here is EDEADLK (it would wait for
   * this very closure). */
  lanepool__current = lane;
  lanepool__pool_thread = lane->pool;
  pthread_cleanup_push(inline_unwound, &f);
  fn(ctx);
  pthread_cleanup_pop(1); /* the same way out whether the closure returned or unwound */
}

/* A thread of the pool waits for its queued sync by running the lane's queue itself, in
 * order, up to its own sync, whenever the lane is free with work queued (libdispatch's
 * waiter that drains the queue it waits for; which waiters, and why: architecture.md
 * and priorities.md, "Who runs the awaited work"). On a cancel it gives the lane a holder
 * that answers its syncs (lanepool__excl_release). Returns the sync's state, or 0 if the
 * caller is no such thread (it then waits on the state alone). */
static uint32_t help_until_answered(lanepool_lane_t *lane, lanepool__sync *s, bool escalates,
                                    bool *helping) {
  lanepool_lane_t *me = lanepool__thread_lane;
  if (!me || me->pool != lane->pool) return 0;
  if ((me->band != lane->band || lanepool__held_now) &&
      !(escalates && waiter_band() <= (int)lane->band))
    return 0;
  atomic_fetch_add_explicit(&lane->helpers, 1, memory_order_seq_cst);
  *helping = true;
  uint32_t st;
  for (;;) {
    uint32_t seq = atomic_load_explicit(&lane->help_seq, memory_order_seq_cst);
    if ((st = atomic_load_explicit(&s->state, memory_order_seq_cst)) != 0) break;
    if (atomic_load_explicit(&lane->excl, memory_order_seq_cst) == 0 &&
        lanepool__lane_has_work(lane) && lanepool__excl_take(lane)) {
      if (lanepool__life_cancelling(lane->pool))
        lanepool__excl_release(lane); /* answers this sync, and the others queued here */
      else
        (void)lanepool__run_lane(me, lane, UINT32_MAX, LANEPOOL__FROM_ADOPTED, &s->state, NULL);
      continue;
    }
    lanepool__futex_wait(&lane->help_seq, seq);
  }
  *helping = false;
  atomic_fetch_sub_explicit(&lane->helpers, 1, memory_order_seq_cst);
  return st;
}

/* A waiter's frame while it waits, for sync_unwound. */
typedef struct {
  lanepool__sync *s;
  bool escalates, helping;
  lanepool_lane_t *current, *running; /* the thread's, before it helped */
} waiter_frame;

/* The wait's way out, returned from or unwound. Unwound: the waiter's thread ended in a
 * task it ran while helping (pthread_exit, or a cancel at a cancellation point in the
 * task; worker.c's thread_lost then replaces it), and what its frame held goes with it.
 * The task's lane, which this thread holds: the task counted, the sync's cell (still
 * queued unless its closure was what ended the thread) made to run nothing, the lane
 * given up, the thread's own lane and chain back for thread_lost. Either way the
 * waiter's helping count, listing and boost are left (the boost a no-op if the lane's
 * answer took it). */
static void sync_unwound(void *arg) {
  waiter_frame *f = arg;
  lanepool__sync *s = f->s;
  lanepool_lane_t *lane = s->lane;
  if (lanepool__running_lane == lane) {
    if (atomic_load_explicit(&s->state, memory_order_acquire) == 0)
      lanepool__lane_forget_sync(lane, s);
    lanepool__add_owned(&lane->bound_done, 1, memory_order_release);
    lanepool__running_lane = f->running;
    lanepool__current = f->current;
    lanepool__held_now = s->chain;
    lanepool__excl_release(lane);
  }
  if (f->helping) atomic_fetch_sub_explicit(&lane->helpers, 1, memory_order_seq_cst);
  if (f->escalates) lanepool__chain_unlisten(s);
  lanepool__boost_leave(lane, &s->boost);
}

/* The chain moved (band.c): the waiter's band now replaces the one it boosts the lane
 * with, the new count first; if the lane's answer took the old ticket, the new count
 * goes too. */
static void rewalk(lanepool__sync *s) {
  int band = waiter_band();
  uint32_t old = atomic_load_explicit(&s->boost, memory_order_relaxed);
  if (old == (uint32_t)band + 1) return;
  _Atomic uint32_t fresh = 0;
  bool joined = lanepool__boost_join(s->lane, band, &fresh);
  uint32_t now = joined ? (uint32_t)band + 1 : 0;
  if (!atomic_compare_exchange_strong_explicit(&s->boost, &old, now, memory_order_relaxed,
                                               memory_order_relaxed)) {
    if (joined) lanepool__boost_drop(s->lane, (uint32_t)band); /* answered meanwhile */
    return;
  }
  if (old)
    lanepool__boost_drop(s->lane, old - 1); /* and updates, with the new count in */
  else if (joined)
    lanepool__boost_update(s->lane);
}

static int sync_queued(lanepool_lane_t *lane, lanepool_fn fn, void *ctx, unsigned flags) {
  lanepool__sync s = {.fn = fn, .ctx = ctx, .chain = lanepool__held_now, .lane = lane}; /* 0s */
  /* Escalation: a waiter of a higher band boosts the lane before its task is queued
   * (so the lane cannot run it unboosted) until the task has run (band.c). Listed on the
   * lanes it holds first: a change of their band after the band is read here is told. */
  bool escalates = !(flags & LANEPOOL_SYNC_NO_ESCALATION) && lanepool__escalation_on();
  if (escalates) lanepool__chain_listen(&s);
  if (escalates && lanepool__boost_join(lane, waiter_band(), &s.boost))
    lanepool__boost_update(lane);
  int rc = lanepool__lane_push(lane, lanepool__sync_trampoline, &s, NULL, LANEPOOL__PUSH_WAITS);
  uint32_t st = rc ? 2 : 0;
  if (rc) LANEPOOL__TEST_POINT("sync_refused", lane, rc);
  /* LANEPOOL_SYNC_QUEUED asks for the lane's own thread: only that thread helps then. */
  bool may_help = !(flags & LANEPOOL_SYNC_QUEUED) || lanepool__thread_lane == lane;
  waiter_frame f = {&s, escalates, false, lanepool__current, lanepool__running_lane};
  pthread_cleanup_push(sync_unwound, &f);
  while (st != 1 && st != 2) {
    uint32_t told = LANEPOOL__SYNC_REWALK;
    if (st == told) {
      if (atomic_compare_exchange_strong_explicit(&s.state, &told, 0, memory_order_seq_cst,
                                                  memory_order_relaxed))
        rewalk(&s);
    } else if (!(st = may_help ? help_until_answered(lane, &s, escalates, &f.helping) : 0) &&
               !(st = atomic_load_explicit(&s.state, memory_order_acquire))) {
      lanepool__futex_wait(&s.state, 0);
    }
    if (st != 1 && st != 2) st = atomic_load_explicit(&s.state, memory_order_acquire);
  }
  pthread_cleanup_pop(1);
  return rc ? rc : st == 1 ? 0 : ECANCELED;
}

int lanepool_lane_sync(lanepool_lane_t *lane, lanepool_fn fn, void *ctx) {
  return lanepool_lane_sync_flags(lane, fn, ctx, 0);
}

/* A registered call (calls.c), so that destroy waits for it: from the inline take or the
 * queued sync's first touch of the lane to its last. An inline run is no call:
 * the lane, held, cannot exit, and the join waits for its give-back (borrowers); and
 * its closure may unwind, which would leave a call record set. */
int lanepool_lane_sync_flags(lanepool_lane_t *lane, lanepool_fn fn, void *ctx, unsigned flags) {
  if (!lane || !fn || (flags & ~(LANEPOOL_SYNC_QUEUED | LANEPOOL_SYNC_NO_ESCALATION)))
    return EINVAL;
  for (const lanepool__held *h = lanepool__held_now; h; h = h->up)
    if (h->lane == lane) return EDEADLK; /* this sync would wait for itself */
  if (lanepool__forked(lane->generation)) return EOWNERDEAD;
  /* A thread of another pool (its lane, its timer thread) keeps its own identity: run
   * the closure on this lane's thread instead, so that shutting that other pool down
   * from inside the closure is still EDEADLK. */
  bool foreign = lanepool__pool_thread && lanepool__pool_thread != lane->pool;
  const void *outer = lanepool__call_enter(lane);
  if (!(flags & LANEPOOL_SYNC_QUEUED) && !foreign && take_for_inline(lane)) {
    lanepool__call_leave(outer);
    run_inline(lane, fn, ctx);
    return 0;
  }
  int rc = sync_queued(lane, fn, ctx, flags);
  lanepool__call_leave(outer);
  return rc;
}
