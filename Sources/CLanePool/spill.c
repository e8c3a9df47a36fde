/*
 * spill.c - an overflow list: where a full ring's producers go (not with hard capacity).
 * A lane's keeps its FIFO, a band's has no order (docs/architecture.md, "When a ring is
 * full"); a taker moves a batch back into a ring with the task it takes.
 */
#include "internal.h"

#include <stdlib.h>

void lanepool__spill_destroy(lanepool__spill *l) {
  pthread_mutex_destroy(&l->lock);
  free(l->buf);
}

int lanepool__spill_push_n(lanepool__spill *l, lanepool_fn fn, void *const *ctxs, void *const *args,
                           uint64_t n, bool own) {
  pthread_mutex_lock(&l->lock);
  int refused = l->intake > (int)own ? ESHUTDOWN : 0;
  uint64_t len = atomic_load_explicit(&l->count, memory_order_relaxed);
  if (!refused && len + n > l->cap) {
    uint64_t ncap = l->cap ? l->cap : 256;
    while (ncap < len + n) ncap *= 2;
    lanepool__task *nb = malloc(ncap * sizeof *nb);
    if (!nb) {
      refused = ENOMEM;
    } else {
      for (uint64_t i = 0; i < len; i++) nb[i] = l->buf[(l->head + i) % l->cap];
      free(l->buf);
      l->buf = nb;
      l->cap = ncap;
      l->head = 0;
    }
  }
  if (refused) {
    pthread_mutex_unlock(&l->lock);
    return refused;
  }
  for (uint64_t i = 0; i < n; i++)
    l->buf[(l->head + len + i) % l->cap] = (lanepool__task){fn, ctxs[i], args ? args[i] : NULL};
  LANEPOOL_INJECT(LANEPOOL__AT_SPILL);
  /* Written only under the lock: stores, not read-modify-writes. `in` before `count`
   * (release: pairs with the drain scan's acquire); count seq_cst: ordered before the
   * pusher's wake-up loads. */
  lanepool__add_owned(&l->in, n, memory_order_release);
  lanepool__add_owned(&l->overflowed, n, memory_order_relaxed);
  atomic_store_explicit(&l->count, len + n, memory_order_seq_cst);
  pthread_mutex_unlock(&l->lock);
  return 0;
}

bool lanepool__spill_take(lanepool__spill *l, lanepool__ring *into, uint32_t shares, bool fifo,
                          lanepool__task *out, bool *ring_first) {
  if (ring_first) *ring_first = false;
  if (atomic_load_explicit(&l->count, memory_order_acquire) == 0) return false;
  pthread_mutex_lock(&l->lock);
  uint64_t len = atomic_load_explicit(&l->count, memory_order_relaxed), moved = 0;
  /* Holding the lock, the taker sees every ring claim made before any listed task was
   * appended: if the ring is not empty, those claims are older. */
  if (len && fifo && lanepool__ring_nonempty(into)) {
    *ring_first = true;
    len = 0;
  }
  if (len) {
    *out = l->buf[l->head];
    uint64_t most = into ? (len - 1) / shares : 0;
    if (into && most > (into->mask + 1) / 2) most = (into->mask + 1) / 2;
    for (; moved < most; moved++) {
      lanepool__task *t = &l->buf[(l->head + 1 + moved) % l->cap];
      if (lanepool__ring_push(into, t->fn, t->ctx, t->arg, LANEPOOL__PUSH_OWN)) break;
    }
    l->head = (l->head + 1 + moved) % l->cap;
    LANEPOOL_INJECT(LANEPOOL__AT_SPILL);
    /* In the ring before they leave the list (count seq_cst: always in view of the
     * wake-up loads); `in` after the ring's claims (release: a drain scan that reads it
     * and then the ring's tail counts a moved task once or twice, never not at all). */
    lanepool__add_owned(&l->in, -moved, memory_order_release);
    atomic_store_explicit(&l->count, len - 1 - moved, memory_order_seq_cst);
  }
  pthread_mutex_unlock(&l->lock);
  return len != 0;
}

void lanepool__queue_set_intake(lanepool__spill *l, lanepool__ring *rings, uint32_t n, int intake) {
  LANEPOOL_INJECT(LANEPOOL__AT_INTAKE);
  pthread_mutex_lock(&l->lock);
  if (intake > l->intake) l->intake = intake;
  pthread_mutex_unlock(&l->lock);
  for (uint32_t i = 0; i < n; i++)
    lanepool__ring_close(&rings[i],
                         intake == LANEPOOL__INTAKE_CLOSED ? LANEPOOL__CLOSED : LANEPOOL__OWN_ONLY);
}
