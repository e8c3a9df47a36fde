/*
 * ring.h - a lane's task ring: a bounded multi-producer, single-consumer FIFO
 * (Vyukov's bounded queue with per-cell sequence numbers, specialised to one
 * consumer). Header-only: every operation is static inline.
 *
 * Legend:
 *  [once]   set by lanepool__ring_init, read-only after.
 *  [prod]   written by producers (any thread), with the ordering named.
 *  [cons]   written only by the one consumer (the lane thread, or the thread that
 *           discards after the lane thread was joined).
 *
 * Memory ordering (every release names its acquire):
 *  - producer: store(cell.seq, pos + 1, release) after writing fn/ctx/arg
 *      pairs with consumer: load(cell.seq, acquire) in ring_pop / ring_wait_cell.
 *  - consumer: store(cell.seq, pos + capacity, release) after reading fn/ctx/arg
 *      pairs with the producer's load(cell.seq, acquire) that claims pos + capacity.
 *  - producers claim with a seq_cst CAS on tail; lane.c orders that CAS against the
 *    lane's `sleeping` word (the parking Dekker pair, docs/architecture.md).
 *  - close: fetch_or(tail, flag, seq_cst). After CLOSED is set the tail never moves
 *    again, so the value it returns bounds every claim ever made: the consumer (or the
 *    discarder) waits for each claimed cell below it to be published. No claimed cell
 *    is ever abandoned.
 *
 * Tail flags: CLOSED refuses every producer. OWN_ONLY refuses producers that did not
 * say `own` (a draining pool takes work only from its own threads); they get
 * LANEPOOL__RING_OWN_ONLY and decide for themselves.
 *
 * Stealing. A cell published with LANEPOOL__PUSH_STEAL carries LANEPOOL__SEQ_STEAL in
 * its published sequence number: a task bound to no lane (submitted to a band), which
 * another lane of the band may run. The owner pops every cell in order; a thief takes
 * only the head cell, and only when it is published and marked. Owner and thieves
 * claim a marked head cell with a CAS, so each cell is taken once (the owner takes a
 * lane-bound head cell with plain stores: no thief can claim it); a thief's acquire load of the
 * marked seq pairs with the producer's release publish, and nothing can reuse the cell
 * before the CAS winner frees it, so the thief's CAS on `head` validates what it read.
 * Lane-bound cells are never stolen, so a lane's own work keeps its FIFO order.
 *
 * Rescue out of order. The band's rescue lane may also take a marked cell that is not
 * at the head (lanepool__ring_rescue_at: band work queued behind a lane-bound task
 * behind a task that blocks). It claims the cell itself with a CAS on its seq
 * (marked -> marked | TAKEN), reads the task, then stores marked | TAKEN | READ
 * (release). While it looks (`rescuing` set), every taker of a marked cell claims it
 * on its seq: the owner and the head thieves, after their CAS on head, free the cell
 * with a CAS from the marked value (lanepool__ring_take); one that finds TAKEN instead
 * does not run the task, waits for READ and frees the cell. Otherwise they free it with
 * a store, as before the rescue lane took out of order (a CAS there cost W1's band
 * work 20%): the Dekker pair
 *     head taker:   CAS(head, pos -> pos + 1) ; load(rescuing)
 *     rescue lane:  store(rescuing = 1) ; load(head) -> claim pos only if head <= pos
 * (seq_cst) makes a taker that read 0 one whose CAS on head the rescue lane sees, so it
 * leaves that cell alone; and if the 0 it read was the end of an earlier look, that
 * look's claims are in the cells' seqs, so the taker reads its cell's seq once more
 * and frees it with a store only if it is still marked (model/take.pml found the taker
 * that trusted the 0 alone). The owner, finding a TAKEN cell at its head, moves head past
 * it the same way. A cell is freed by whoever moved head past it, never while the
 * rescuer reads it; not always in order (a head taker frees its cell after reading it,
 * and the owner may free the cells behind it first), which is why push_n checks each
 * cell it claims. Positions stay below 2^61 (TAKEN and READ are bits 62 and 61 of a
 * seq).
 *
 * Stamps. A ring may carry a parallel array of stamps (lanepool__ring_set_stamps): a
 * marked cell pushed with a nonzero stamp (the pushing lane's clock, lane.c "older band
 * work first") keeps it there until the cell is taken, which clears it before freeing
 * the cell. Stamps are hints for ordering between lanes, read with relaxed loads after
 * the cell's acquire; a stale or torn-by-reuse reading makes a steal happen or not,
 * never takes a cell twice (the CAS on head does that).
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

#ifndef LANEPOOL__CACHE_LINE
#define LANEPOOL__CACHE_LINE 64
#endif

#define LANEPOOL__CLOSED        (UINT64_C(1) << 63)
#define LANEPOOL__OWN_ONLY      (UINT64_C(1) << 62)
#define LANEPOOL__TAIL_FLAGS    (LANEPOOL__CLOSED | LANEPOOL__OWN_ONLY)
/* ring_push's answer to a producer that is not `own` while OWN_ONLY is set. */
#define LANEPOOL__RING_OWN_ONLY (-1)
/* Push flags: OWN, the producer may add while OWN_ONLY is set (`true` converts to it);
 * STEAL, the task is bound to no lane (see "Stealing" above). */
#define LANEPOOL__PUSH_OWN      1u
#define LANEPOOL__PUSH_STEAL    2u
/* lane.c only (the ring ignores it): stamp the marked cell with the pushing lane's clock. */
#define LANEPOOL__PUSH_STAMP    4u
/* lane.c only: the pusher waits, blocked, until the task has run (a queued sync), so the
 * lane it wakes has no running waker to yield to (lane.c, yield_to_waker). */
#define LANEPOOL__PUSH_WAITS    8u
/* In a published cell's seq: the cell may be stolen. Positions stay below 2^61. */
#define LANEPOOL__SEQ_STEAL     (UINT64_C(1) << 63)
/* In a marked cell's seq: the rescue lane claimed it out of order ("Rescue out of
 * order"), and then has read it (the cell may be freed). */
#define LANEPOOL__SEQ_TAKEN     (UINT64_C(1) << 62)
#define LANEPOOL__SEQ_READ      (UINT64_C(1) << 61)
#define LANEPOOL__SEQ_FLAGS     (LANEPOOL__SEQ_STEAL | LANEPOOL__SEQ_TAKEN | LANEPOOL__SEQ_READ)

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
} lanepool__ring_task;

/* A cell is the sequence number and the three task words, 32 bytes: two cells per cache
 * line, never one straddling two (the slot array is line-aligned). */
_Static_assert(sizeof(void *) != 8 || sizeof(lanepool__slot) == 32, "a cell is 32 bytes");
_Static_assert(sizeof(void *) != 8 || LANEPOOL__CACHE_LINE % sizeof(lanepool__slot) == 0,
               "cells tile a cache line");

typedef struct lanepool__ring {
  /* ---- [once] ---- */
  lanepool__slot *slots;
  uint64_t mask;            /* capacity - 1 */
  _Atomic uint64_t *stamps; /* NULL, or `capacity` stamps (see "Stamps") */
  /* [the band's rescue lane, atomic: seq_cst stores of 1 before it looks for a cell to
   * take out of order and of 0 after; seq_cst load by a head taker after its CAS on head]
   * ("Rescue out of order"). Written only then: the line stays read-mostly. A flag, not
   * a count: one looker per ring (its band's one rescue lane). Two looks overlapping
   * would let one's 0 end the other's, and a taker trusting that 0 run a task twice. */
  _Atomic uint32_t rescuing;
  /* ---- [prod] claims: seq_cst CAS; flags: seq_cst fetch_or ---- */
  alignas(LANEPOOL__CACHE_LINE) _Atomic uint64_t tail;
  /* ---- [cons] the next cell to take: advanced past a marked cell by a CAS of the
   * owner or of a thief (seq_cst), past a cell the rescue lane took by a CAS of the
   * owner, a thief or the rescue lane (pass_at), past a lane-bound cell by the owner's
   * release store; read by the depth and emptiness checks ---- */
  alignas(LANEPOOL__CACHE_LINE) _Atomic uint64_t head;
} lanepool__ring;

/* The layout the performance argument rests on: producers' tail and the consumer's
 * head never share a cache line with each other or with the read-only fields. */
_Static_assert(offsetof(lanepool__ring, tail) % LANEPOOL__CACHE_LINE == 0, "tail on its own line");
_Static_assert(offsetof(lanepool__ring, head) % LANEPOOL__CACHE_LINE == 0, "head on its own line");
_Static_assert(offsetof(lanepool__ring, head) - offsetof(lanepool__ring, tail) >=
                   LANEPOOL__CACHE_LINE,
               "tail and head on different lines");
_Static_assert(offsetof(lanepool__ring, tail) >= sizeof(lanepool__slot *) + sizeof(uint64_t),
               "read-only fields before tail");
_Static_assert(sizeof(lanepool__ring) % LANEPOOL__CACHE_LINE == 0, "the ring ends on a line");

/* `slots` holds `capacity` cells (a power of two >= 2). */
static inline void lanepool__ring_init(lanepool__ring *r, lanepool__slot *slots,
                                       uint64_t capacity) {
  r->slots = slots;
  r->mask = capacity - 1;
  r->stamps = NULL;
  atomic_init(&r->rescuing, 0);
  for (uint64_t i = 0; i < capacity; i++) {
    atomic_init(&slots[i].seq, i);
    slots[i].fn = NULL;
    slots[i].ctx = NULL;
    slots[i].arg = NULL;
  }
  atomic_init(&r->tail, 0);
  atomic_init(&r->head, 0);
}

/* Gives the ring `capacity` stamps, all zero (before any push). */
static inline void lanepool__ring_set_stamps(lanepool__ring *r, _Atomic uint64_t *stamps) {
  for (uint64_t i = 0; i <= r->mask; i++) atomic_init(&stamps[i], 0);
  r->stamps = stamps;
}

/* The published seq of the cell at `pos`, for push flags `flags`. */
static inline uint64_t lanepool__ring_published(uint64_t pos, unsigned flags) {
  return (pos + 1) | ((flags & LANEPOOL__PUSH_STEAL) ? LANEPOOL__SEQ_STEAL : 0);
}

/* 0; EAGAIN (full: the caller keeps its task); ESHUTDOWN (CLOSED);
 * LANEPOOL__RING_OWN_ONLY (OWN_ONLY and not LANEPOOL__PUSH_OWN). A nonzero `stamp` on a
 * marked push is kept beside the cell (the ring must have stamps). */
static inline int lanepool__ring_push_stamped(lanepool__ring *r, lanepool__ring_fn fn, void *ctx,
                                              void *arg, unsigned flags, uint64_t stamp) {
  const bool own = flags & LANEPOOL__PUSH_OWN;
  uint64_t t = atomic_load_explicit(&r->tail, memory_order_relaxed);
  for (;;) {
    if (t & LANEPOOL__CLOSED) return ESHUTDOWN;
    if ((t & LANEPOOL__OWN_ONLY) && !own) return LANEPOOL__RING_OWN_ONLY;
    uint64_t pos = t & ~LANEPOOL__TAIL_FLAGS;
    lanepool__slot *slot = &r->slots[pos & r->mask];
    uint64_t seq = atomic_load_explicit(&slot->seq, memory_order_acquire) & ~LANEPOOL__SEQ_FLAGS;
    int64_t diff = (int64_t)(seq - pos);
    if (diff == 0) {
      /* seq_cst: ordered before the `sleeping` load of the parking protocol. The
       * flags ride along unchanged (t + 1 touches the position bits only). */
      if (atomic_compare_exchange_weak_explicit(&r->tail, &t, t + 1, memory_order_seq_cst,
                                                memory_order_relaxed)) {
        LANEPOOL_INJECT(LANEPOOL__AT_CLAIM_PUBLISH); /* claimed, not yet published */
        slot->fn = fn;
        slot->ctx = ctx;
        slot->arg = arg;
        if (stamp) atomic_store_explicit(&r->stamps[pos & r->mask], stamp, memory_order_relaxed);
        atomic_store_explicit(&slot->seq, lanepool__ring_published(pos, flags),
                              memory_order_release);
        return 0;
      }
    } else if (diff < 0) {
      return EAGAIN; /* the consumer has not freed this cell yet */
    } else {
      t = atomic_load_explicit(&r->tail, memory_order_relaxed);
    }
  }
}

static inline int lanepool__ring_push(lanepool__ring *r, lanepool__ring_fn fn, void *ctx, void *arg,
                                      unsigned flags) {
  return lanepool__ring_push_stamped(r, fn, ctx, arg, flags, 0);
}

/* Claims up to `n` consecutive cells with one CAS and publishes {fn, ctxs[i], args[i]}
 * (args NULL: every arg NULL) in them, in order. *pushed = how many (a prefix of ctxs);
 * 0 is returned whenever *pushed > 0, and the caller decides what to do with the rest.
 * Otherwise as lanepool__ring_push: EAGAIN (no free cell), ESHUTDOWN,
 * LANEPOOL__RING_OWN_ONLY. It claims the run of free cells from the tail on, each one
 * checked (free cells need not form a prefix: see below). */
static inline int lanepool__ring_push_n(lanepool__ring *r, lanepool__ring_fn fn, void *const *ctxs,
                                        void *const *args, uint64_t n, unsigned flags,
                                        uint64_t *pushed) {
  const bool own = flags & LANEPOOL__PUSH_OWN;
  *pushed = 0;
  if (n == 0) return 0;
  uint64_t t = atomic_load_explicit(&r->tail, memory_order_relaxed);
  for (;;) {
    if (t & LANEPOOL__CLOSED) return ESHUTDOWN;
    if ((t & LANEPOOL__OWN_ONLY) && !own) return LANEPOOL__RING_OWN_ONLY;
    uint64_t pos = t & ~LANEPOOL__TAIL_FLAGS;
    int64_t first =
        (int64_t)((atomic_load_explicit(&r->slots[pos & r->mask].seq, memory_order_acquire) &
                   ~LANEPOOL__SEQ_FLAGS) -
                  pos);
    if (first < 0) return EAGAIN;
    if (first > 0) { /* another producer claimed pos: look again */
      t = atomic_load_explicit(&r->tail, memory_order_relaxed);
      continue;
    }
    /* Cell pos is free; the batch takes the free cells that follow it, up to min(n,
     * capacity), each one checked: cells are not always freed in order (a thief that won
     * the CAS on head frees its cell after reading it, and the owner may pop and free
     * the cells behind it first; so may a taker waiting for the rescue lane's READ). */
    uint64_t k = 1, most = n < r->mask + 1 ? n : r->mask + 1;
    while (k < most && atomic_load_explicit(&r->slots[(pos + k) & r->mask].seq,
                                            memory_order_acquire) == pos + k)
      k++;
    /* seq_cst, as in ring_push; the flags ride along unchanged. */
    if (!atomic_compare_exchange_weak_explicit(&r->tail, &t, t + k, memory_order_seq_cst,
                                               memory_order_relaxed))
      continue;
    LANEPOOL_INJECT(LANEPOOL__AT_CLAIM_PUBLISH); /* claimed, not yet published */
    for (uint64_t i = 0; i < k; i++) {
      lanepool__slot *slot = &r->slots[(pos + i) & r->mask];
      slot->fn = fn;
      slot->ctx = ctxs[i];
      slot->arg = args ? args[i] : NULL;
      atomic_store_explicit(&slot->seq, lanepool__ring_published(pos + i, flags),
                            memory_order_release);
    }
    *pushed = k;
    return 0;
  }
}

/* Waits until the rescuer that claimed the cell at `pos` has read it. It reads three
 * words right after its claim, so this waits only while that thread is preempted. */
static inline void lanepool__ring_wait_read(lanepool__slot *slot) {
  for (int spins = 0;
       !(atomic_load_explicit(&slot->seq, memory_order_acquire) & LANEPOOL__SEQ_READ); spins++) {
    LANEPOOL_INJECT(LANEPOOL__AT_SPIN);
    if (spins >= 64) sched_yield();
  }
}

/* Frees the cell at `pos`, whose task the rescue lane took (head has moved past it):
 * once the rescuer has read it. A marked cell's stamp is cleared first. */
static inline void lanepool__ring_free_rescued(lanepool__ring *r, uint64_t pos) {
  lanepool__slot *slot = &r->slots[pos & r->mask];
  lanepool__ring_wait_read(slot);
  if (r->stamps) atomic_store_explicit(&r->stamps[pos & r->mask], 0, memory_order_relaxed);
  atomic_store_explicit(&slot->seq, pos + r->mask + 1, memory_order_release);
}

/* true if `seq`, of the cell at `pos`, says the rescue lane took it out of order. */
static inline bool lanepool__ring_rescued(uint64_t seq, uint64_t pos) {
  return (seq & ~LANEPOOL__SEQ_READ) == ((pos + 1) | LANEPOOL__SEQ_STEAL | LANEPOOL__SEQ_TAKEN);
}

/* Moves head from *pos past the rescued cell there and frees it; *pos is then the new
 * head either way. The CAS fails if another taker moved head first (a thief that read
 * the marked seq before the rescue lane's claim, or another pass): that one frees it. */
static inline void lanepool__ring_pass_at(lanepool__ring *r, uint64_t *pos) {
  if (atomic_compare_exchange_strong_explicit(&r->head, pos, *pos + 1, memory_order_seq_cst,
                                              memory_order_relaxed)) {
    lanepool__ring_free_rescued(r, *pos);
    ++*pos;
  }
}

/* Takes the cell at `pos` (the CAS on head already won it, or the owner's lane-bound
 * head): reads it, frees it. `marked`: a stealable cell, which may carry a stamp, and
 * which the rescue lane may have claimed meanwhile: then false, nothing taken (the
 * cell is freed once the rescuer has read it). */
static inline bool lanepool__ring_take(lanepool__ring *r, uint64_t pos, lanepool__ring_task *out,
                                       bool marked) {
  lanepool__slot *slot = &r->slots[pos & r->mask];
  out->fn = slot->fn;
  out->ctx = slot->ctx;
  out->arg = slot->arg;
  if (!marked) {
    atomic_store_explicit(&slot->seq, pos + r->mask + 1, memory_order_release);
    return true;
  }
  if (r->stamps) { /* cleared before the cell is freed: the next lap stamps anew */
    _Atomic uint64_t *stamp = &r->stamps[pos & r->mask];
    if (atomic_load_explicit(stamp, memory_order_relaxed))
      atomic_store_explicit(stamp, 0, memory_order_relaxed);
  }
  uint64_t marked_seq = (pos + 1) | LANEPOOL__SEQ_STEAL, free_seq = pos + r->mask + 1;
  /* No rescue lane looking (the Dekker pair of "Rescue out of order"; the CAS on head
   * before this was seq_cst): none will claim the cell now, but a look that has ended
   * may have: its claim happened before its end, which this load read, so seq says so.
   * Still marked, the cell is this taker's, freed with a store. A look under way: the
   * claim is a CAS from the marked value to free, which fails only if the rescue lane
   * claimed the cell first. release, either way: the reads above happen before a
   * producer reuses the cell. */
  bool ours;
  if (atomic_load_explicit(&r->rescuing, memory_order_seq_cst)) {
    ours = atomic_compare_exchange_strong_explicit(&slot->seq, &marked_seq, free_seq,
                                                   memory_order_release, memory_order_relaxed);
  } else if ((ours = atomic_load_explicit(&slot->seq, memory_order_acquire) == marked_seq)) {
    atomic_store_explicit(&slot->seq, free_seq, memory_order_release);
  }
  if (!ours) lanepool__ring_free_rescued(r, pos); /* the task is the rescuer's */
  return ours;
}

/* The owner (the lane thread, or the discard pass after the join). true and *out if
 * the head cell is published; a cell a thief took meanwhile is skipped.
 * A lane-bound cell at the head is taken without a CAS: thieves take only marked
 * cells, so while the head is a lane-bound cell nobody but the owner can move `head`
 * (a thief that read an older head finds its cell freed or reused, with a sequence
 * number that is not the marked one it needs, and leaves it). The owner frees the
 * cell, then publishes the new head with a release store. Only a marked cell, which a
 * thief may be claiming at the same moment, costs the owner a CAS. */
static inline bool lanepool__ring_pop(lanepool__ring *r, lanepool__ring_task *out) {
  uint64_t pos = atomic_load_explicit(&r->head, memory_order_relaxed);
  for (;;) {
    uint64_t seq = atomic_load_explicit(&r->slots[pos & r->mask].seq, memory_order_acquire);
    if (seq == pos + 1) { /* published, lane-bound: the owner's alone */
      lanepool__ring_take(r, pos, out, false);
      atomic_store_explicit(&r->head, pos + 1, memory_order_release);
      return true;
    }
    if (seq != ((pos + 1) | LANEPOOL__SEQ_STEAL)) {
      if (lanepool__ring_rescued(seq, pos)) { /* the rescue lane took it out of order */
        lanepool__ring_pass_at(r, &pos);
        continue;
      }
      uint64_t now = atomic_load_explicit(&r->head, memory_order_relaxed);
      if (now == pos) return false; /* not published yet */
      pos = now;                    /* a thief took it: look at the new head */
      continue;
    }
    /* Marked: a thief may be claiming it too; whoever wins the CAS on head takes it,
     * unless the rescue lane claimed the cell meanwhile (then look at the next head). */
    if (atomic_compare_exchange_weak_explicit(&r->head, &pos, pos + 1, memory_order_seq_cst,
                                              memory_order_relaxed)) {
      if (lanepool__ring_take(r, pos, out, true)) return true;
      pos++;
    }
  }
}
/* As lanepool__ring_steal, for the head cell at `pos` only (the one a caller looked at):
 * false if the head has moved on. */
static inline bool lanepool__ring_steal_at(lanepool__ring *r, uint64_t pos,
                                           lanepool__ring_task *out) {
  uint64_t seq = atomic_load_explicit(&r->slots[pos & r->mask].seq, memory_order_acquire);
  if (seq != ((pos + 1) | LANEPOOL__SEQ_STEAL)) return false;
  if (!atomic_compare_exchange_strong_explicit(&r->head, &pos, pos + 1, memory_order_seq_cst,
                                               memory_order_relaxed))
    return false;
  return lanepool__ring_take(r, pos, out, true); /* false: the rescue lane claimed it */
}

/* The rescue lane, between lanepool__ring_rescue_begin and _end: the marked cell at
 * `pos` (the head or behind it), out of order ("Rescue out of order"). true and *out if
 * it was published and marked and this claim took it; false otherwise (not published,
 * lane-bound, taken by someone else, or head already past it: a taker that moved head
 * past it may have read `rescuing` 0 and free it with a store). The acquire pairs with
 * the producer's publish; the cell cannot be freed between the claim and the READ store
 * (every other taker waits for READ before freeing it). */
static inline bool lanepool__ring_rescue_at(lanepool__ring *r, uint64_t pos,
                                            lanepool__ring_task *out) {
  lanepool__slot *slot = &r->slots[pos & r->mask];
  uint64_t marked = (pos + 1) | LANEPOOL__SEQ_STEAL;
  if (atomic_load_explicit(&r->head, memory_order_seq_cst) > pos ||
      atomic_load_explicit(&slot->seq, memory_order_relaxed) != marked ||
      !atomic_compare_exchange_strong_explicit(&slot->seq, &marked, marked | LANEPOOL__SEQ_TAKEN,
                                               memory_order_acquire, memory_order_relaxed))
    return false;
  LANEPOOL_INJECT(LANEPOOL__AT_RESCUE_READ); /* claimed, not read: takers wait for READ */
  out->fn = slot->fn;
  out->ctx = slot->ctx;
  out->arg = slot->arg;
  /* release: the reads above happen before the owner frees the cell. */
  atomic_store_explicit(&slot->seq, marked | LANEPOOL__SEQ_TAKEN | LANEPOOL__SEQ_READ,
                        memory_order_release);
  return true;
}

/* The rescue lane starts and ends a look for cells to take out of order (the Dekker
 * pair of "Rescue out of order": the start is seq_cst, before its loads of head). */
static inline void lanepool__ring_rescue_begin(lanepool__ring *r) {
  atomic_store_explicit(&r->rescuing, 1, memory_order_seq_cst);
}
static inline void lanepool__ring_rescue_end(lanepool__ring *r) {
  /* seq_cst: a head taker that reads this 0 sees every claim the look made */
  atomic_store_explicit(&r->rescuing, 0, memory_order_seq_cst);
}

/* Moves head past cells at the head that the rescue lane took (the owner does so too,
 * in ring_pop, but it may be held in a task): band work behind such a cell is a head
 * again for the thieves and the rescue lane. Returns the head it stopped at. Whoever
 * wins a CAS frees that cell, once the rescuer has read it. A hostile review found the
 * hang without it: X queued lane-bound T and band Y and waited for Y, rescued; T then
 * queued band Z and waited for it, behind Y's rescued cell at the head, which no taker
 * but the owner passed. */
static inline uint64_t lanepool__ring_pass_rescued(lanepool__ring *r) {
  uint64_t pos = atomic_load_explicit(&r->head, memory_order_acquire);
  while (lanepool__ring_rescued(
      atomic_load_explicit(&r->slots[pos & r->mask].seq, memory_order_acquire), pos))
    lanepool__ring_pass_at(r, &pos);
  return pos;
}

/* A thief (another lane of the band), or the rescue lane. true and *out if the head
 * cell (past any the rescue lane took) is published and marked LANEPOOL__SEQ_STEAL and
 * this CAS took it; false otherwise (nothing there, a lane-bound task first, or another
 * taker won). */
static inline bool lanepool__ring_steal(lanepool__ring *r, lanepool__ring_task *out) {
  return lanepool__ring_steal_at(r, lanepool__ring_pass_rescued(r), out);
}

/* true if the head cell is published and stealable, its position in *at (a hint: it
 * may be taken at once). The acquire pairs with the producer's publish, so the cell's
 * stamp can be read after it. */
static inline bool lanepool__ring_marked_head(const lanepool__ring *r, uint64_t *at) {
  uint64_t pos = atomic_load_explicit(&((lanepool__ring *)r)->head, memory_order_acquire);
  *at = pos;
  return atomic_load_explicit(&r->slots[pos & r->mask].seq, memory_order_acquire) ==
         ((pos + 1) | LANEPOOL__SEQ_STEAL);
}

/* true if the head cell is published and lane-bound, its position in *at (a hint). */
static inline bool lanepool__ring_bound_head(const lanepool__ring *r, uint64_t *at) {
  uint64_t pos = atomic_load_explicit(&((lanepool__ring *)r)->head, memory_order_acquire);
  *at = pos;
  return atomic_load_explicit(&r->slots[pos & r->mask].seq, memory_order_acquire) == pos + 1;
}

/* true if the first cell from the head on that the rescue lane has not taken is
 * published and marked (a hint: ring_steal passes the taken ones first). */
static inline bool lanepool__ring_head_stealable(const lanepool__ring *r) {
  uint64_t pos = atomic_load_explicit(&((lanepool__ring *)r)->head, memory_order_acquire);
  for (uint64_t end = pos + r->mask + 1; pos < end; pos++) { /* taken cells were published */
    uint64_t seq = atomic_load_explicit(&r->slots[pos & r->mask].seq, memory_order_acquire);
    if (!lanepool__ring_rescued(seq, pos)) return seq == ((pos + 1) | LANEPOOL__SEQ_STEAL);
  }
  return false;
}

/* The stamp of the head cell if it is published, marked and stamped, and that cell's
 * position in *at; else 0 (a hint). */
static inline uint64_t lanepool__ring_head_stamp(const lanepool__ring *r, uint64_t *at) {
  if (!r->stamps || !lanepool__ring_marked_head(r, at)) return 0;
  return atomic_load_explicit(&r->stamps[*at & r->mask], memory_order_relaxed);
}

/* The head position (seq_cst: the emptiness checks compare it with tail). */
static inline uint64_t lanepool__ring_head(const lanepool__ring *r) {
  return atomic_load_explicit(&((lanepool__ring *)r)->head, memory_order_seq_cst);
}

/* Claims made so far (flags stripped). */
static inline uint64_t lanepool__ring_tail(const lanepool__ring *r, memory_order order) {
  return atomic_load_explicit(&((lanepool__ring *)r)->tail, order) & ~LANEPOOL__TAIL_FLAGS;
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

/* The owner: the cell at `pos` (head <= pos < a tail read earlier), once its producer
 * has published it; NULL if a thief took it meanwhile (head moved past it). A claim is
 * published a few instructions after the CAS unless the producer is preempted there,
 * so wait with a yield. */
static inline lanepool__slot *lanepool__ring_wait_cell(lanepool__ring *r, uint64_t pos) {
  lanepool__slot *slot = &r->slots[pos & r->mask];
  for (int spins = 0;
       (atomic_load_explicit(&slot->seq, memory_order_acquire) & ~LANEPOOL__SEQ_FLAGS) != pos + 1;
       spins++) {
    if (atomic_load_explicit(&r->head, memory_order_acquire) > pos) return NULL;
    LANEPOOL_INJECT(LANEPOOL__AT_SPIN);
    if (spins >= 64) sched_yield();
  }
  return slot;
}

/* true if the published cell `slot` may be stolen. */
static inline bool lanepool__ring_stealable(const lanepool__slot *slot) {
  return atomic_load_explicit(&((lanepool__slot *)slot)->seq, memory_order_relaxed) &
         LANEPOOL__SEQ_STEAL;
}

/* Tasks queued now (approximate while producers and the consumer run). */
static inline uint64_t lanepool__ring_depth(const lanepool__ring *r) {
  uint64_t t = lanepool__ring_tail(r, memory_order_relaxed);
  uint64_t h = atomic_load_explicit(&((lanepool__ring *)r)->head, memory_order_relaxed);
  return t > h ? t - h : 0;
}

#endif /* LANEPOOL_RING_H */
