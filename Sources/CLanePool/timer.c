/*
 * timer.c - one timer thread per pool, started on the first timer: a min-heap of
 * (deadline, seq) under a mutex, a condition variable on CLOCK_MONOTONIC. A due timer
 * is submitted to its lane's ring, so it runs after its deadline and in FIFO order with
 * the lane's other tasks.
 *
 * Why a timer is always in the heap or in its lane's queue, never in between:
 * docs/architecture.md, "Timers".
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "internal.h"

#include <stdio.h>
#include <sys/syscall.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

uint64_t lanepool_now_ns(void) { return lanepool__now_ns(); }

static bool before(const lanepool__timer_entry *a, const lanepool__timer_entry *b) {
  return a->deadline < b->deadline || (a->deadline == b->deadline && a->id < b->id);
}

static int compare_entries(const void *a, const void *b) {
  const lanepool__timer_entry *x = a, *y = b;
  return before(x, y) ? -1 : before(y, x) ? 1 : 0;
}

static void sift_up(lanepool__timer_entry *h, size_t i) {
  while (i > 0) {
    size_t parent = (i - 1) / 2;
    if (!before(&h[i], &h[parent])) break;
    lanepool__timer_entry t = h[i];
    h[i] = h[parent];
    h[parent] = t;
    i = parent;
  }
}

static void sift_down(lanepool__timer_entry *h, size_t len, size_t i) {
  for (;;) {
    size_t l = 2 * i + 1, r = l + 1, m = i;
    if (l < len && before(&h[l], &h[m])) m = l;
    if (r < len && before(&h[r], &h[m])) m = r;
    if (m == i) return;
    lanepool__timer_entry t = h[i];
    h[i] = h[m];
    h[m] = t;
    i = m;
  }
}

static void heap_remove(lanepool__timers *t, size_t i) {
  t->heap[i] = t->heap[--t->len];
  if (i < t->len) {
    sift_down(t->heap, t->len, i);
    sift_up(t->heap, i);
  }
}

static void heap_lock(lanepool__timers *t) {
  LANEPOOL_INJECT(LANEPOOL__AT_TIMER_HEAP);
  pthread_mutex_lock(&t->lock);
}

int lanepool__timers_init(lanepool__timers *t) {
  memset(t, 0, sizeof *t);
  pthread_condattr_t ca;
  int rc = pthread_condattr_init(&ca);
  if (rc) return rc;
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  rc = pthread_cond_init(&t->cond, &ca);
  pthread_condattr_destroy(&ca);
  if (rc) return rc;
  if ((rc = pthread_mutex_init(&t->lock, NULL))) {
    pthread_cond_destroy(&t->cond);
    return rc;
  }
  t->next_id = 1; /* the rest as memset left it: empty, OPEN */
  return 0;
}

void lanepool__timers_destroy(lanepool__timers *t) {
  pthread_mutex_destroy(&t->lock);
  pthread_cond_destroy(&t->cond);
  free(t->heap);
}

/* Caller holds t->lock. Pushes the heap's top into its lane: 0 (then it is gone from
 * the heap), or the push's error (then it stays, to be retried or taken by shutdown). */
static int fire_top_locked(lanepool_t *pool) {
  lanepool__timers *t = &pool->timers;
  const lanepool__timer_entry *e = &t->heap[0];
  LANEPOOL_INJECT(LANEPOOL__AT_TIMER_FIRE);
  /* own: the timer thread is the pool's; a draining pool still takes its timers. A
   * timer set for a band is band work, as a band submit is. */
  int rc = e->lane ? lanepool__lane_push(e->lane, e->fn, e->ctx, NULL, LANEPOOL__PUSH_OWN)
                   : lanepool__band_push(pool, (uint32_t)e->band, e->fn, e->ctx, NULL,
                                         LANEPOOL__PUSH_OWN);
  if (rc == 0) {
    heap_remove(t, 0);
    /* release: pairs with the drain scan's acquire. After the lane's accept, never
     * before: a scan must never see the timer gone and its task not yet accepted. */
    atomic_fetch_add_explicit(&t->done, 1, memory_order_release);
    /* Maybe the last change a draining driver waits for (lifecycle.c, the timer case). */
    lanepool__drain_idle(pool);
  }
  return rc;
}

/* The stall detector: a lane whose current task (started != executed) is the same
 * one seen at least stall_threshold_ns ago is stalled. Logs once per stall. Runs
 * without any lock held (the log callback is user code). */
static void check_stalls(lanepool_t *pool, uint64_t now) {
  uint32_t total = lanepool__lane_total(pool);
  for (uint32_t i = 0; i < total; i++) {
    lanepool_lane_t *l = pool->lanes[i];
    uint64_t started = atomic_load_explicit(&l->started_tasks, memory_order_relaxed);
    uint64_t executed = atomic_load_explicit(&l->executed, memory_order_relaxed);
    if (started == executed || started != l->watch_started) { /* between tasks, or a new one */
      if (started != executed) l->watch_since = now;
      l->watch_started = started;
      atomic_store_explicit(&l->stalled_since, 0, memory_order_relaxed);
      continue;
    }
    if (now - l->watch_since >= pool->stall_threshold_ns &&
        atomic_load_explicit(&l->stalled_since, memory_order_relaxed) == 0) {
      atomic_store_explicit(&l->stalled_since, l->watch_since, memory_order_relaxed);
      atomic_fetch_add_explicit(&l->stalls, 1, memory_order_relaxed);
      if (pool->log) {
        char msg[256];
        snprintf(msg, sizeof msg,
                 "lanepool '%s': lane %s has been running one task for over %llu ms; its "
                 "queue waits (the pool's other lanes are unaffected)",
                 pool->name, l->name, (unsigned long long)(pool->stall_threshold_ns / 1000000));
        pool->log(LANEPOOL_LOG_WARNING, msg, pool->log_arg);
        /* A child forked in the callback would wait on the parent's timers forever (and
         * on a lock a parent thread may have held at fork time). */
        if (lanepool__forked(pool->generation))
          lanepool__die("lanepool: a process forked inside a log callback "
                        "returned to the timer thread; the child exits (status 0)\n",
                        true);
      }
    }
  }
}

static void *timer_main(void *arg) {
  lanepool_t *pool = arg;
  lanepool__timers *t = &pool->timers;
  lanepool__pool_thread = pool; /* a pool thread: shutdown/destroy from here is EDEADLK */
  char name[16];
  lanepool__thread_name(pool->name, "-tm", name);
  pthread_setname_np(pthread_self(), name);
  /* It inherited whatever thread set the first timer (maybe a pinned background
   * lane): take the pool's allowed CPUs and its most urgent band's policy, since
   * every band's timers wait on this thread. */
  size_t size = 0;
  cpu_set_t *set = lanepool__cpu_set_of(pool->allowed_cpus, pool->allowed_count, &size);
  if (set) {
    (void)sched_setaffinity(0, size, set);
    CPU_FREE(set);
  }
  lanepool__applied ignored;
  lanepool__apply_policy(&ignored, (pid_t)syscall(SYS_gettid), &pool->lanes[0]->policy);
  /* Its own sleeps are the timers' deadlines: no slack (1 ns is prctl's minimum). */
  (void)lanepool__set_slack(1);

  uint64_t check_every = pool->stall_threshold_ns / 2;
  uint64_t next_check = check_every ? lanepool__now_ns() + check_every : UINT64_MAX;
  heap_lock(t);
  while (!t->stop) {
    uint64_t now = lanepool__now_ns();
    if (now >= next_check) {
      pthread_mutex_unlock(&t->lock);
      check_stalls(pool, now);
      heap_lock(t);
      next_check = lanepool__add_sat(now, check_every);
      continue;
    }
    if (t->len > 0 && t->heap[0].deadline <= now) {
      if (fire_top_locked(pool) == 0) continue;
      /* Refused (no room or memory): it stays in the heap (see the top); retry unlocked. */
      pthread_mutex_unlock(&t->lock);
      LANEPOOL_INJECT(LANEPOOL__AT_SPIN); /* waits for the lane: pass the turn on */
      usleep(100);
      heap_lock(t);
      continue;
    }
    uint64_t wake = next_check;
    if (t->len > 0 && t->heap[0].deadline < wake) wake = t->heap[0].deadline;
    LANEPOOL_INJECT_ON(LANEPOOL__AT_BLOCK, &t->cond); /* lock held: no RESUME mark after */
    if (wake == UINT64_MAX) {
      pthread_cond_wait(&t->cond, &t->lock);
    } else {
      struct timespec ts = {.tv_sec = (time_t)(wake / 1000000000u),
                            .tv_nsec = (long)(wake % 1000000000u)};
      pthread_cond_timedwait(&t->cond, &t->lock, &ts);
    }
  }
  pthread_mutex_unlock(&t->lock);
  lanepool__pool_thread = NULL;
  LANEPOOL_INJECT(LANEPOOL__AT_EXIT);
  return NULL;
}

/* Caller holds t->lock. */
static int start_locked(lanepool_t *pool) {
  lanepool__timers *t = &pool->timers;
  if (t->started) return 0;
  int rc = lanepool__thread_start(&t->thread, 0, timer_main, pool);
  if (rc == 0) t->started = true;
  return rc;
}

int lanepool__timers_start(lanepool_t *pool) {
  pthread_mutex_lock(&pool->timers.lock);
  int rc = start_locked(pool);
  pthread_mutex_unlock(&pool->timers.lock);
  return rc;
}

static int add_timer(lanepool_t *pool, lanepool_lane_t *lane, int band, uint64_t deadline,
                     lanepool_fn fn, void *ctx, lanepool_timer_t *out) {
  /* Before any lock: in a fork child the lock may have been held by a parent thread. */
  if (lanepool__forked(pool->generation)) return EOWNERDEAD;
  /* A call under way until its signal: the timer may fire, run, and its owner destroy the
   * pool before this thread is out (calls.c). */
  const void *outer = lanepool__call_enter(pool);
  lanepool__timers *t = &pool->timers;
  heap_lock(t);
  int rc = t->intake > (int)lanepool__is_own_lane(pool) ? ESHUTDOWN : 0;
  if (!rc) rc = start_locked(pool);
  if (!rc && t->len == t->cap) {
    size_t ncap = t->cap ? t->cap * 2 : 64;
    lanepool__timer_entry *n = realloc(t->heap, ncap * sizeof *n);
    if (!n)
      rc = ENOMEM;
    else {
      t->heap = n;
      t->cap = ncap;
    }
  }
  if (rc) {
    pthread_mutex_unlock(&t->lock);
    lanepool__call_leave(outer);
    return rc;
  }
  lanepool_timer_t id = t->next_id++;
  t->heap[t->len] = (lanepool__timer_entry){deadline, id, lane, band, fn, ctx};
  sift_up(t->heap, t->len++);
  /* release: pairs with the drain scan's acquire. */
  atomic_fetch_add_explicit(&t->added, 1, memory_order_release);
  bool earliest = t->heap[0].id == id;
  pthread_mutex_unlock(&t->lock);
  if (earliest) pthread_cond_signal(&t->cond);
  LANEPOOL_INJECT_ON(LANEPOOL__AT_UNBLOCK, &t->cond);
  if (out) *out = id;
  lanepool__call_leave(outer);
  return 0;
}

int lanepool_lane_async_after(lanepool_lane_t *lane, uint64_t deadline_ns, lanepool_fn fn,
                              void *ctx, lanepool_timer_t *out) {
  if (!lane || !fn) return EINVAL;
  return add_timer(lane->pool, lane, (int)lane->band, deadline_ns, fn, ctx, out);
}

int lanepool_async_after(lanepool_t *pool, lanepool_qos_t qos, uint64_t deadline_ns, lanepool_fn fn,
                         void *ctx, lanepool_timer_t *out) {
  int b = lanepool_band_index(qos);
  if (!pool || !fn || b < 0) return EINVAL;
  return add_timer(pool, NULL, b, deadline_ns, fn, ctx, out);
}

int lanepool_timer_cancel(lanepool_t *pool, lanepool_timer_t timer, void **ctx_out) {
  if (!pool) return EINVAL;
  if (lanepool__forked(pool->generation)) return EOWNERDEAD;
  const void *outer = lanepool__call_enter(pool); /* until its event is told (calls.c) */
  lanepool__timers *t = &pool->timers;
  heap_lock(t);
  int rc = timer == 0 || timer >= t->next_id ? EINVAL : EALREADY;
  for (size_t i = 0; rc == EALREADY && i < t->len; i++) {
    if (t->heap[i].id == timer) {
      if (ctx_out) *ctx_out = t->heap[i].ctx;
      heap_remove(t, i);
      atomic_fetch_add_explicit(&t->done, 1, memory_order_release);
      rc = 0;
    }
  }
  pthread_mutex_unlock(&t->lock);
  if (rc == 0) lanepool__drain_idle(pool); /* maybe the last thing a drain waited for */
  lanepool__call_leave(outer);
  return rc;
}

void lanepool__timers_set_intake(lanepool_t *pool, int intake) {
  heap_lock(&pool->timers);
  if (intake > pool->timers.intake) pool->timers.intake = intake;
  pthread_mutex_unlock(&pool->timers.lock);
}

/* Shutdown: refuse new timers, take every pending one out (into *cancelled, deadline
 * order, caller frees; none after a drain, which waited for the heap to empty) and
 * tell the timer thread to stop. lanepool__timers_join waits for it: the caller
 * joins only once every lane is closed too, so that no pool thread is joined while it
 * may wait on a lane (a log callback may call lanepool_lane_sync). */
void lanepool__timers_stop(lanepool_t *pool, lanepool__timer_entry **cancelled, size_t *count) {
  lanepool__timers *t = &pool->timers;
  heap_lock(t);
  t->intake = LANEPOOL__INTAKE_CLOSED;
  *cancelled = t->heap;
  *count = t->len;
  t->heap = NULL;
  t->len = t->cap = 0;
  t->stop = true;
  pthread_mutex_unlock(&t->lock);
  pthread_cond_signal(&t->cond);
  LANEPOOL_INJECT_ON(LANEPOOL__AT_UNBLOCK, &t->cond);
  if (*count > 1) qsort(*cancelled, *count, sizeof **cancelled, compare_entries);
}

void lanepool__timers_join(lanepool_t *pool) {
  pthread_mutex_lock(&pool->timers.lock);
  bool started = pool->timers.started;
  pthread_mutex_unlock(&pool->timers.lock);
  LANEPOOL_INJECT(LANEPOOL__AT_BLOCK);
  if (started) pthread_join(pool->timers.thread, NULL);
  LANEPOOL_INJECT(LANEPOOL__AT_RESUME);
}
