/*
 * bandq.c - a band's queue of band work: the work submitted to a band rather than to a
 * lane (lanepool_async, the Swift executors' jobs, band timers): one ring per lane that
 * every thread of the band takes from, then an overflow list (docs/architecture.md,
 * "The scheduler"). Who takes from it, and who is woken for it: park.c and worker.c.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

int lanepool__bandq_init(lanepool__band *band, uint32_t shards, uint32_t capacity) {
  memset(band, 0, sizeof *band);
  size_t bytes = LANEPOOL__LINES((size_t)shards * capacity * sizeof(lanepool__slot));
  lanepool__slot *slots = aligned_alloc(LANEPOOL__CACHE_LINE, bytes); /* on no node */
  band->rings = aligned_alloc(LANEPOOL__CACHE_LINE, shards * sizeof *band->rings);
  band->next = aligned_alloc(LANEPOOL__CACHE_LINE, shards * sizeof *band->next);
  int rc =
      slots && band->rings && band->next ? pthread_mutex_init(&band->spill.lock, NULL) : ENOMEM;
  if (rc) {
    free(slots);
    free(band->next);
    free(band->rings);
    band->rings = NULL;
    return rc;
  }
  band->shards = shards;
  memset(band->next, 0xff, shards * sizeof *band->next); /* every field: none (UINT64_MAX) */
  for (uint32_t i = 0; i < shards; i++)
    lanepool__ring_init(&band->rings[i], slots + (size_t)i * capacity, capacity);
  return 0;
}

void lanepool__bandq_free(lanepool__band *band) {
  if (!band->rings) return;
  lanepool__spill_destroy(&band->spill);
  free(band->rings[0].slots);
  free(band->next);
  free(band->rings);
  band->rings = NULL;
}

int lanepool__bandq_push(lanepool__band *band, uint32_t shard, lanepool_fn fn, void *ctx, void *arg,
                         bool own, bool hard, bool *next) {
  int rc = EAGAIN;
  uint32_t k = 0;
  for (; k < band->shards && rc == EAGAIN; k++)
    rc = lanepool__ring_push(&band->rings[(shard + k) % band->shards], fn, ctx, arg,
                             own ? LANEPOOL__PUSH_OWN : 0);
  *next = *next && rc == 0 && k == 1; /* in its own ring */
  if (*next) {
    uint32_t i = shard % band->shards;
    uint64_t tail = lanepool__ring_tail(&band->rings[i], memory_order_relaxed);
    atomic_store_explicit(&band->next[i].value, tail, memory_order_relaxed);
  }
  if (rc != EAGAIN || hard) return rc;
  return lanepool__spill_push_n(&band->spill, fn, &ctx, &arg, 1, own); /* every ring full */
}

/* Ring k's only job is the one its lane's thread pushed last, from a task: left to that
 * thread until LANEPOOL__NEXT_GRACE_NS after a taker first saw it there (a thread that
 * blocks after its push loses its job to the band within microseconds). */
static bool leave_to_its_thread(lanepool__band *band, uint32_t k) {
  lanepool__ring *r = &band->rings[k];
  lanepool__next *n = &band->next[k];
  uint64_t h = atomic_load_explicit(&r->head, memory_order_relaxed);
  /* next[k] first: the tail's line is the one producers CAS at every push. */
  if (atomic_load_explicit(&n->value, memory_order_relaxed) != h + 1 ||
      lanepool__ring_tail(r, memory_order_relaxed) != h + 1)
    return false;
  uint64_t now = lanepool__now_ns();
  if (atomic_load_explicit(&n->seen_head, memory_order_acquire) != h) {
    atomic_store_explicit(&n->seen_ns, now, memory_order_relaxed);
    atomic_store_explicit(&n->seen_head, h, memory_order_release);
    return true;
  }
  return now - atomic_load_explicit(&n->seen_ns, memory_order_relaxed) < LANEPOOL__NEXT_GRACE_NS;
}

bool lanepool__bandq_take(lanepool__band *band, uint32_t first, bool list_first,
                          lanepool__task *out) {
  lanepool__ring *own = &band->rings[first % band->shards];
  if (list_first && lanepool__spill_take(&band->spill, own, band->shards, false, out, NULL))
    return true;
  if (lanepool__ring_take(own, out)) return true;
  for (uint32_t k = 1; k < band->shards; k++) {
    uint32_t i = (first + k) % band->shards;
    if (!leave_to_its_thread(band, i) && lanepool__ring_take(&band->rings[i], out)) return true;
  }
  return lanepool__spill_take(&band->spill, own, band->shards, false, out, NULL);
}

bool lanepool__bandq_takeable(lanepool__band *band, uint32_t first) {
  if (lanepool__spill_count(&band->spill, memory_order_seq_cst)) return true;
  for (uint32_t k = 0; k < band->shards; k++) {
    uint32_t i = (first + k) % band->shards;
    if (lanepool__ring_nonempty(&band->rings[i]) && (k == 0 || !leave_to_its_thread(band, i)))
      return true;
  }
  return false;
}

bool lanepool__bandq_nonempty(const lanepool__band *band) {
  for (uint32_t i = 0; i < band->shards; i++)
    if (lanepool__ring_nonempty(&band->rings[i])) return true;
  return lanepool__spill_count(&band->spill, memory_order_seq_cst) != 0;
}

uint64_t lanepool__bandq_depth(const lanepool__band *band) {
  uint64_t d = lanepool__spill_count(&band->spill, memory_order_relaxed);
  for (uint32_t i = 0; i < band->shards; i++) d += lanepool__ring_depth(&band->rings[i]);
  return d;
}

/* Band jobs ever accepted: ring claims plus the list's appends not moved into a ring.
 * Read in this order, it never misses a moved job (it may count one twice meanwhile). */
uint64_t lanepool__bandq_accepted(lanepool__band *band) {
  uint64_t n = atomic_load_explicit(&band->spill.in, memory_order_acquire);
  for (uint32_t i = 0; i < band->shards; i++)
    n += lanepool__ring_tail(&band->rings[i], memory_order_seq_cst);
  return n;
}
