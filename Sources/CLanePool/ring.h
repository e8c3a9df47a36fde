/*
 * ring.h - a bounded FIFO of tasks (Vyukov's bounded queue with per-cell sequence
 * numbers). Header-only: every operation is static inline. Two users:
 *  - a lane's ring: many producers, one consumer at a time (whoever holds the lane's
 *    exclusion, sync.c), which takes with lanepool__ring_pop;
 *  - a band's queue (bandq.c): many producers, many consumers (every thread of the
 *    band), which take with lanepool__ring_take, a CAS on head.
 * A ring is used one way or the other, never both.
 *
 * Legend: [once] set by lanepool__ring_init, read-only after; [prod] written by
 * producers (any thread), with the ordering named; [cons] written by the consumer(s).
 *
 * Memory ordering: docs/architecture.md, "The submit path" (each release and its
 * acquire). close: the tail it returns bounds every claim ever made, so the consumer (or
 * the discarder) waits for each claimed cell below it: none is ever abandoned.
 *
 * Tail flags: CLOSED refuses every producer. OWN_ONLY refuses producers that did not
 * say `own` (a draining pool takes work only from its own threads).
 */
#ifndef LANEPOOL_RING_H
#define LANEPOOL_RING_H

#include <errno.h>
#include <sched.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "inject.h"

#define LANEPOOL__CACHE_LINE 64

#define LANEPOOL__CLOSED     (UINT64_C(1) << 63)
#define LANEPOOL__OWN_ONLY   (UINT64_C(1) << 62)
#define LANEPOOL__TAIL_FLAGS (LANEPOOL__CLOSED | LANEPOOL__OWN_ONLY)
/* Push flags: OWN, the producer may add while OWN_ONLY is set (`true` converts to it). */
#define LANEPOOL__PUSH_OWN   1u
/* park.c only (the ring ignores it): the pusher waits, blocked, until the task has run
 * (a queued sync), so the lane it wakes has no running waker to yield to. */
#define LANEPOOL__PUSH_WAITS 8u

typedef void (*lanepool__ring_fn)(void *);

/* A task is three words. The ring only carries them; lane.c gives them their meaning:
 * arg == NULL: fn(ctx) (lanepool_lane_async and the internal tasks); arg != NULL:
 * ((lanepool_fn2)fn)(ctx, arg) (lanepool_lane_async2, which refuses a NULL second
 * argument, so the two kinds cannot be confused). */
typedef struct lanepool__slot {
  _Atomic uint64_t seq; /* [atomic: release by the writer, acquire by the reader] */
  lanepool__ring_fn fn; /* [written by the side that owns the cell per seq] */
  void *ctx;
  void *arg;
} lanepool__slot;

typedef struct lanepool__ring_task {
  lanepool__ring_fn fn;
  void *ctx;
  void *arg;
} lanepool__ring_task, lanepool__task;

/* A cell is the sequence number and the three task words, 32 bytes: two cells per cache
 * line, never one straddling two (the slot array is line-aligned). */
_Static_assert(sizeof(void *) != 8 || sizeof(lanepool__slot) == 32, "a cell is 32 bytes");
_Static_assert(sizeof(void *) != 8 || LANEPOOL__CACHE_LINE % sizeof(lanepool__slot) == 0,
               "cells tile a cache line");

typedef struct lanepool__ring {
  /* ---- [once] ---- */
  lanepool__slot *slots;
  uint64_t mask; /* capacity - 1 */
  /* ---- [prod] claims: seq_cst CAS; flags: seq_cst fetch_or ---- */
  alignas(LANEPOOL__CACHE_LINE) _Atomic uint64_t tail;
  /* ---- [cons] the next cell to take: a release store by the one consumer (ring_pop),
   * a seq_cst CAS by one of many (ring_take); read by the depth and emptiness checks ---- */
  alignas(LANEPOOL__CACHE_LINE) _Atomic uint64_t head;
} lanepool__ring;

/* The layout the performance argument rests on: producers' tail and the consumer's
 * head never share a cache line with each other or with the read-only fields. */
_Static_assert(offsetof(lanepool__ring, tail) % LANEPOOL__CACHE_LINE == 0, "tail on its own line");
_Static_assert(offsetof(lanepool__ring, head) % LANEPOOL__CACHE_LINE == 0, "head on its own line");
_Static_assert(offsetof(lanepool__ring, head) - offsetof(lanepool__ring, tail) >=
                   LANEPOOL__CACHE_LINE,
               "tail and head on different lines");
_Static_assert(sizeof(lanepool__ring) % LANEPOOL__CACHE_LINE == 0, "the ring ends on a line");

/* `slots` holds `capacity` cells (a power of two >= 2). */
static inline void lanepool__ring_init(lanepool__ring *r, lanepool__slot *slots,
                                       uint64_t capacity) {
  r->slots = slots;
  r->mask = capacity - 1;
  for (uint64_t i = 0; i < capacity; i++) /* (a cell's fields are read once it is published) */
    atomic_init(&slots[i].seq, i);
  atomic_init(&r->tail, 0);
  atomic_init(&r->head, 0);
}

/* Claims up to `n` consecutive free cells with one CAS and publishes {fn, ctxs[i],
 * args[i]} (args NULL: every arg NULL) in them, in order. *pushed = how many (a prefix
 * of ctxs); 0 is returned whenever *pushed > 0, and the caller decides what to do with
 * the rest. Otherwise EAGAIN (full: the caller keeps its tasks); ESHUTDOWN (CLOSED, or
 * OWN_ONLY and not LANEPOOL__PUSH_OWN). Each cell is checked
 * (with many consumers cells are freed out of order). */
static inline int lanepool__ring_push_n(lanepool__ring *r, lanepool__ring_fn fn, void *const *ctxs,
                                        void *const *args, uint64_t n, unsigned flags,
                                        uint64_t *pushed) {
  const bool own = flags & LANEPOOL__PUSH_OWN;
  *pushed = 0;
  if (n == 0) return 0;
  uint64_t t = atomic_load_explicit(&r->tail, memory_order_relaxed);
  for (;;) {
    if ((t & LANEPOOL__CLOSED) || ((t & LANEPOOL__OWN_ONLY) && !own)) return ESHUTDOWN;
    uint64_t pos = t & ~LANEPOOL__TAIL_FLAGS;
    int64_t first =
        (int64_t)(atomic_load_explicit(&r->slots[pos & r->mask].seq, memory_order_acquire) - pos);
    if (first < 0) return EAGAIN; /* the consumer has not freed this cell yet */
    if (first > 0) {              /* another producer claimed pos: look again */
      t = atomic_load_explicit(&r->tail, memory_order_relaxed);
      continue;
    }
    uint64_t k = 1, most = n < r->mask + 1 ? n : r->mask + 1;
    while (k < most && atomic_load_explicit(&r->slots[(pos + k) & r->mask].seq,
                                            memory_order_acquire) == pos + k)
      k++;
    /* seq_cst: ordered before the users' wake-up loads. The flags ride along unchanged
     * (t + k touches the position bits only). */
    if (!atomic_compare_exchange_weak_explicit(&r->tail, &t, t + k, memory_order_seq_cst,
                                               memory_order_relaxed))
      continue;
    LANEPOOL_INJECT(LANEPOOL__AT_CLAIM_PUBLISH); /* claimed, not yet published */
    for (uint64_t i = 0; i < k; i++) {
      lanepool__slot *slot = &r->slots[(pos + i) & r->mask];
      slot->fn = fn;
      slot->ctx = ctxs[i];
      slot->arg = args ? args[i] : NULL;
      atomic_store_explicit(&slot->seq, pos + i + 1, memory_order_release);
    }
    *pushed = k;
    return 0;
  }
}

/* One task: as lanepool__ring_push_n with n = 1. */
static inline int lanepool__ring_push(lanepool__ring *r, lanepool__ring_fn fn, void *ctx, void *arg,
                                      unsigned flags) {
  uint64_t pushed;
  return lanepool__ring_push_n(r, fn, &ctx, &arg, 1, flags, &pushed);
}

/* The one consumer: the head task if published. false if the ring is empty or the head
 * cell is claimed but not yet published (compare tail and head to tell them apart). */
static inline bool lanepool__ring_pop(lanepool__ring *r, lanepool__ring_task *out) {
  uint64_t pos = atomic_load_explicit(&r->head, memory_order_relaxed);
  lanepool__slot *slot = &r->slots[pos & r->mask];
  if (atomic_load_explicit(&slot->seq, memory_order_acquire) != pos + 1) return false;
  *out = (lanepool__ring_task){slot->fn, slot->ctx, slot->arg};
  atomic_store_explicit(&slot->seq, pos + r->mask + 1, memory_order_release);
  atomic_store_explicit(&r->head, pos + 1, memory_order_release);
  return true;
}

/* One of many consumers: as ring_pop, with a CAS on head; each cell is taken once. */
static inline bool lanepool__ring_take(lanepool__ring *r, lanepool__ring_task *out) {
  uint64_t pos = atomic_load_explicit(&r->head, memory_order_relaxed);
  for (;;) {
    lanepool__slot *slot = &r->slots[pos & r->mask];
    int64_t diff = (int64_t)(atomic_load_explicit(&slot->seq, memory_order_acquire) - (pos + 1));
    if (diff == 0) { /* words read only once the CAS won (see the top) */
      if (atomic_compare_exchange_weak_explicit(&r->head, &pos, pos + 1, memory_order_seq_cst,
                                                memory_order_relaxed)) {
        *out = (lanepool__ring_task){slot->fn, slot->ctx, slot->arg};
        atomic_store_explicit(&slot->seq, pos + r->mask + 1, memory_order_release);
        return true;
      }
    } else if (diff < 0) {
      return false; /* empty, or the head cell not yet published */
    } else {
      pos = atomic_load_explicit(&r->head, memory_order_relaxed); /* taken: look again */
    }
  }
}

/* The head position (seq_cst: the emptiness checks compare it with tail). */
static inline uint64_t lanepool__ring_head(const lanepool__ring *r) {
  return atomic_load_explicit(&((lanepool__ring *)r)->head, memory_order_seq_cst);
}

/* Claims made so far (flags stripped). */
static inline uint64_t lanepool__ring_tail(const lanepool__ring *r, memory_order order) {
  return atomic_load_explicit(&((lanepool__ring *)r)->tail, order) & ~LANEPOOL__TAIL_FLAGS;
}

/* Claimed and not taken (seq_cst loads: one side of the users' Dekker pairs). */
static inline bool lanepool__ring_nonempty(const lanepool__ring *r) {
  return lanepool__ring_tail(r, memory_order_seq_cst) != lanepool__ring_head(r);
}

static inline bool lanepool__ring_closed(const lanepool__ring *r) {
  return atomic_load_explicit(&((lanepool__ring *)r)->tail, memory_order_seq_cst) &
         LANEPOOL__CLOSED;
}

/* Sets `flag` (CLOSED or OWN_ONLY); returns the claims made so far. After CLOSED the
 * result is final. */
static inline uint64_t lanepool__ring_close(lanepool__ring *r, uint64_t flag) {
  return atomic_fetch_or_explicit(&r->tail, flag, memory_order_seq_cst) & ~LANEPOOL__TAIL_FLAGS;
}

/* A spin-wait's pause between two looks. */
static inline void lanepool__cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield" ::: "memory");
#else
  atomic_signal_fence(memory_order_seq_cst);
#endif
}

/* A wait's yield, marked for the interleaving tests. */
static inline void lanepool__spin_yield(void) {
  LANEPOOL_INJECT(LANEPOOL__AT_SPIN);
  sched_yield();
}

/* One wait for a cell a producer has claimed and not yet published; `rounds` counts the
 * waits for one cell (0 to start). Most often the producer runs on another CPU, a few
 * stores from done: the first LANEPOOL__BACKOFF_ROUNDS waits pause without reading its
 * lines (docs/architecture.md, "Why no wake-up is lost"); still unpublished after
 * those, the producer was likely preempted, maybe on this CPU: yield. */
#define LANEPOOL__BACKOFF_PAUSES 128
#define LANEPOOL__BACKOFF_ROUNDS 8u
static inline void lanepool__ring_backoff(uint32_t *rounds) {
  LANEPOOL_INJECT(LANEPOOL__AT_SPIN);
  if (++*rounds > LANEPOOL__BACKOFF_ROUNDS)
    sched_yield();
  else
    for (int i = 0; i < LANEPOOL__BACKOFF_PAUSES; i++) lanepool__cpu_relax();
}

/* The cell at `pos` (head <= pos < a tail read earlier), once its producer has
 * published it. */
static inline lanepool__slot *lanepool__ring_wait_cell(lanepool__ring *r, uint64_t pos) {
  lanepool__slot *slot = &r->slots[pos & r->mask];
  for (uint32_t rounds = 0; atomic_load_explicit(&slot->seq, memory_order_acquire) != pos + 1;)
    lanepool__ring_backoff(&rounds);
  return slot;
}

/* Tasks queued now (approximate while producers and consumers run). */
static inline uint64_t lanepool__ring_depth(const lanepool__ring *r) {
  uint64_t t = lanepool__ring_tail(r, memory_order_relaxed);
  uint64_t h = atomic_load_explicit(&((lanepool__ring *)r)->head, memory_order_relaxed);
  return t > h ? t - h : 0;
}

#endif /* LANEPOOL_RING_H */
