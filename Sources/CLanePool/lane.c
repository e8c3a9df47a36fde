/*
 * lane.c - a lane: its queue of lane-bound work (a ring, ring.h, and an overflow list,
 * spill.c), what a queued sync leaves in it, and the lane's public calls that are not
 * about threads. Lane-bound work runs in order, one task at a time, by whoever holds the
 * lane's exclusion (sync.c); normally the lane's own thread (worker.c).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "internal.h"

#include <stdio.h>
#include <string.h>

__thread lanepool_lane_t *lanepool__current;
__thread lanepool_lane_t *lanepool__thread_lane;
__thread lanepool_t *lanepool__pool_thread;
__thread lanepool_t *lanepool__in_callback;
__thread const lanepool__held *lanepool__held_now;

uint64_t lanepool__now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t lanepool__add_sat(uint64_t a, uint64_t b) {
  return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

lanepool_lane_t *lanepool__lane_new(lanepool_t *pool, uint32_t band, uint32_t index,
                                    const lanepool_config_t *cfg, lanepool_lane_placement_t where,
                                    int *rc) {
  size_t lane_bytes = LANEPOOL__LINES(sizeof(lanepool_lane_t));
  bool lane_numa = false, slots_numa = false;
  lanepool_lane_t *lane = lanepool__alloc_on_node(lane_bytes, where.node, &lane_numa);
  if (!lane) {
    *rc = ENOMEM;
    return NULL;
  }
  memset(lane, 0, sizeof *lane); /* every counter and word 0 (AWAKE, free), every pointer NULL */
  uint32_t cap = pool->ring_capacity;
  size_t bytes = LANEPOOL__LINES((size_t)cap * sizeof(lanepool__slot));
  lanepool__slot *slots = lanepool__alloc_on_node(bytes, where.node, &slots_numa);
  if (!slots) {
    *rc = ENOMEM;
    goto fail_lane;
  }
  if ((*rc = pthread_mutex_init(&lane->spill.lock, NULL))) goto fail_slots;
  if ((*rc = pthread_mutex_init(&lane->thread_lock, NULL))) goto fail_spill;
  if ((*rc = pthread_mutex_init(&lane->boost_lock, NULL))) goto fail_thread;
  lanepool__ring_init(&lane->ring, slots, cap);
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
  int nice = lane->policy.nice + pool->nice_shift; /* LANEPOOL_NICE_SHIFT's, capped */
  lane->policy.nice = nice > 19 ? 19 : nice;
  lane->generation = pool->generation;
  atomic_init(&lane->boost_band, band);
  atomic_init(&lane->lift, LANEPOOL_BAND_COUNT);
  lane->run_band = band;

  /* "<pool>-<band>-<i>" within the kernel's 15 visible bytes; "<pool>-<band>-r" for the
   * band's rescue lane (index lanes_per_band). */
  lane->spare = index == pool->lanes_per_band;
  char suffix[16];
  if (lane->spare)
    snprintf(suffix, sizeof suffix, "-%s-r", lanepool__band_short_names[band]);
  else
    snprintf(suffix, sizeof suffix, "-%s-%u", lanepool__band_short_names[band], index);
  lanepool__thread_name(pool->name, suffix, lane->name);
  lane->rescue_seen[0] = UINT64_MAX; /* no progress seen yet */
  *rc = 0;
  return lane;

fail_thread:
  pthread_mutex_destroy(&lane->thread_lock);
fail_spill:
  lanepool__spill_destroy(&lane->spill);
fail_slots:
  lanepool__free_on_node(slots, bytes, slots_numa);
fail_lane:
  lanepool__free_on_node(lane, lane_bytes, lane_numa);
  return NULL;
}

void lanepool__lane_free(lanepool_lane_t *lane) {
  if (!lane) return;
  lanepool__spill_destroy(&lane->spill);
  pthread_mutex_destroy(&lane->thread_lock);
  pthread_mutex_destroy(&lane->boost_lock);
  lanepool__free_on_node(lane->ring.slots, lane->slots_bytes, lane->slots_numa_owned);
  lanepool__free_on_node(lane, lane->lane_bytes, lane->lane_numa_owned);
}

/* ---- the queue of lane-bound work ---------------------------------------------- */

bool lanepool__lane_pop(lanepool_lane_t *lane, lanepool__task *out, bool *pending) {
  *pending = false;
  if (lanepool__ring_pop(&lane->ring, out)) return true;
  if (lanepool__ring_tail(&lane->ring, memory_order_acquire) !=
      atomic_load_explicit(&lane->ring.head, memory_order_relaxed)) {
    *pending = true; /* a producer claimed a cell and is about to publish it */
    return false;
  }
  bool ring_first;
  if (lanepool__spill_take(&lane->spill, &lane->ring, 1, true, out, &ring_first)) return true;
  *pending = ring_first;
  return false;
}

bool lanepool__lane_has_work(const lanepool_lane_t *lane) {
  return lanepool__ring_nonempty(&lane->ring) ||
         lanepool__spill_count(&lane->spill, memory_order_seq_cst) != 0;
}

uint64_t lanepool__lane_depth(const lanepool_lane_t *lane) {
  return lanepool__ring_depth(&lane->ring) +
         lanepool__spill_count(&lane->spill, memory_order_relaxed);
}

/* Lane-bound tasks ever accepted: ring claims, overflow appends (the list's count first:
 * see lanepool__spill_take), inline runs. */
uint64_t lanepool__lane_accepted(lanepool_lane_t *lane) {
  uint64_t n = atomic_load_explicit(&lane->spill.in, memory_order_acquire);
  return n + lanepool__ring_tail(&lane->ring, memory_order_seq_cst) +
         atomic_load_explicit(&lane->lent_in, memory_order_seq_cst);
}

/* Finished, whoever ran them: lane-bound tasks, inline runs, and the band jobs this
 * lane's thread ran (the band's accepted side is bandq.c's). Monotonic; acquire: a
 * task's own submits happen before. */
uint64_t lanepool__lane_finished(lanepool_lane_t *lane) {
  return atomic_load_explicit(&lane->bound_done, memory_order_acquire) +
         atomic_load_explicit(&lane->lent_out, memory_order_acquire) +
         atomic_load_explicit(&lane->band_done, memory_order_acquire);
}

/* ---- queued syncs ------------------------------------------------------------------ */

/* The waiter of a queued sync told: state 1 (ran) or 2 (discarded), its boost left first.
 * seq_cst: the pair with a helping waiter (sync.c), which counts itself in `helpers` and
 * then reads the state; the waiter may return (and its frame be reused) as soon as it sees
 * it, so the lane is read first. A stray wake is harmless: every futex waiter loops. */
static void sync_answer(lanepool__sync *s, uint32_t state) {
  lanepool_lane_t *lane = s->lane;
  if (atomic_load_explicit(&s->boost, memory_order_relaxed)) lanepool__boost_leave(lane, &s->boost);
  atomic_store_explicit(&s->state, state, memory_order_seq_cst);
  lanepool__futex_wake(&s->state, 1);
  lanepool__wake_helpers(lane);
}

static void sync_ran(void *arg) {
  lanepool__sync *s = arg;
  lanepool__held_now = s->above; /* the running thread's own chain again */
  sync_answer(s, 1);
}

/* The closure holds this lane and its caller's chain. A function that ends the thread
 * (pthread_exit) still ran: its caller is answered on the way out (the cleanup handler). */
void lanepool__sync_trampoline(void *arg) {
  lanepool__sync *s = arg;
  s->above = lanepool__held_now;
  s->node = (lanepool__held){s->lane, s->chain};
  lanepool__held_now = &s->node;
  pthread_cleanup_push(sync_ran, s);
  s->fn(s->ctx);
  pthread_cleanup_pop(1);
}

/* A queued sync whose waiter's thread ended while it ran the lane's queue (sync.c,
 * sync_unwound): its record was in that thread's frame, so its cell runs nothing. */
static void sync_forgotten(void *arg) { (void)arg; }

/* A queued cell, if a sync's: with `s` NULL (cancel), its waiter answered ECANCELED and
 * the cell marked (fn NULL) for the discard pass to skip; else only the cell of `s`,
 * made to run nothing. true once that cell was found. */
static bool mark_sync(lanepool__ring_fn *fn, void *ctx, void *arg, const lanepool__sync *s) {
  if (*fn != lanepool__sync_trampoline || arg || (s && ctx != s)) return false;
  if (!s) sync_answer(ctx, 2);
  *fn = s ? sync_forgotten : NULL;
  return s != NULL;
}

/* mark_sync on each cell of the lane's queue, the ring's up to `end` then the list's.
 * Nothing else takes from the queue meanwhile (the caller holds the lane, or the pool
 * cancels: below). */
static void mark_syncs(lanepool_lane_t *lane, uint64_t end, const lanepool__sync *s) {
  lanepool__ring *r = &lane->ring;
  for (uint64_t pos = lanepool__ring_head(r); pos < end; pos++) {
    lanepool__slot *slot = lanepool__ring_wait_cell(r, pos);
    if (mark_sync(&slot->fn, slot->ctx, slot->arg, s)) return;
  }
  lanepool__spill *l = &lane->spill;
  pthread_mutex_lock(&l->lock);
  uint64_t len = atomic_load_explicit(&l->count, memory_order_relaxed);
  for (uint64_t i = 0; i < len; i++) {
    lanepool__task *task = &l->buf[(l->head + i) % l->cap];
    if (mark_sync(&task->fn, task->ctx, task->arg, s)) break;
  }
  pthread_mutex_unlock(&l->lock);
}

/* Cancel (lifecycle.c): once the driver has set this ring's CLOSED bit its claims are
 * final; each `sync` still queued is answered now. (Nothing else takes from the ring
 * meanwhile: every thread of the pool stops starting tasks once it sees CANCELLING, and
 * a sync caller takes the exclusion only while the pool is open.) */
void lanepool__lane_cancel_syncs(lanepool_lane_t *lane) {
  LANEPOOL_INJECT(LANEPOOL__AT_CANCEL);
  uint64_t t;
  while (!((t = atomic_load_explicit(&lane->ring.tail, memory_order_seq_cst)) & LANEPOOL__CLOSED))
    lanepool__spin_yield(); /* the driver is closing the lanes one by one: a short wait */
  mark_syncs(lane, t & ~LANEPOOL__TAIL_FLAGS, NULL);
}

/* The caller holds the lane; the cell of `s` is older than the tail read here (its
 * waiter pushed it before it helped). */
void lanepool__lane_forget_sync(lanepool_lane_t *lane, const lanepool__sync *s) {
  mark_syncs(lane, lanepool__ring_tail(&lane->ring, memory_order_seq_cst), s);
}

/* One queued task to the discard pass: a sync already answered (fn NULL) or forgotten is
 * skipped, a queued sync is answered ECANCELED; any other goes to `discard` as the header documents
 * (a two-argument task as fn cast to lanepool_fn, ctx pointing at a lanepool_task2_t
 * {a, b} that lives during the call). */
static void discard_task(lanepool__task *task, lanepool_discard_fn discard, void *arg) {
  lanepool_task2_t pair = {task->ctx, task->arg};
  (void)mark_sync(&task->fn, task->ctx, task->arg, NULL);
  if (task->fn && task->fn != sync_forgotten) discard(task->fn, task->arg ? &pair : task->ctx, arg);
}

void lanepool__discard_queue(lanepool__ring *r, lanepool__spill *l, lanepool_discard_fn discard,
                             void *discard_arg) {
  lanepool__task task;
  uint64_t end = lanepool__ring_tail(r, memory_order_seq_cst); /* CLOSED: final */
  for (uint64_t pos; (pos = lanepool__ring_head(r)) < end;) {
    (void)lanepool__ring_wait_cell(r, pos);
    if (lanepool__ring_pop(r, &task)) discard_task(&task, discard, discard_arg);
  }
  while (l && lanepool__spill_take(l, NULL, 1, false, &task, NULL))
    discard_task(&task, discard, discard_arg);
}

/* ---- picking a lane by key --------------------------------------------------------- */

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

/* ---- public lane calls that are not about threads ------------------------------- */

int lanepool_current_lane(lanepool_lane_t **out) {
  if (!out) return EINVAL;
  if (!lanepool__current) return ESRCH;
  *out = lanepool__current;
  return 0;
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
  out->overflowed = atomic_load_explicit(&l->spill.overflowed, memory_order_relaxed);
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
  out->tasks_stolen = atomic_load_explicit(&l->adopted, memory_order_relaxed);
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
