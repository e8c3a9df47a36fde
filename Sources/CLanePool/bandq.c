/*
 * bandq.c - a band's queue of band work: the work submitted to a band rather than to a
 * lane (lanepool_async, the Swift executors' jobs, band timers). It has no order and
 * no exclusion; it needs a thread of its band, any one. So it lives where every thread
 * of the band can take it, at every moment: a bounded ring that many threads take from
 * (ring.h, lanepool__ring_take), and behind it an overflow list (spill.c) that any of
 * them takes from too once the ring is empty. This is Go's global run queue, and
 * Tokio's inject queue, without their per-thread queues: see docs/architecture.md,
 * "The scheduler", for why one shared queue per band is enough here.
 * Who takes from it, and who is woken for it: park.c and worker.c.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

int lanepool__bandq_init(lanepool__band *band, uint32_t capacity) {
  memset(band, 0, sizeof *band);
  size_t bytes = (size_t)capacity * sizeof(lanepool__slot);
  bytes = (bytes + LANEPOOL__CACHE_LINE - 1) & ~(size_t)(LANEPOOL__CACHE_LINE - 1);
  lanepool__slot *slots = lanepool__alloc_on_node(bytes, -1, &band->slots_numa_owned);
  if (!slots) return ENOMEM;
  int rc = lanepool__spill_init(&band->spill);
  if (rc) {
    lanepool__free_on_node(slots, bytes, band->slots_numa_owned);
    return rc;
  }
  band->slots_bytes = bytes;
  lanepool__ring_init(&band->ring, slots, capacity);
  atomic_init(&band->idle, 0);
  atomic_init(&band->spinning, 0);
  atomic_init(&band->rescue_idle, 0);
  return 0;
}

void lanepool__bandq_free(lanepool__band *band) {
  if (!band->ring.slots) return;
  lanepool__spill_destroy(&band->spill);
  lanepool__free_on_node(band->ring.slots, band->slots_bytes, band->slots_numa_owned);
  band->ring.slots = NULL;
}

int lanepool__bandq_push(lanepool__band *band, lanepool_fn fn, void *ctx, void *arg, bool own,
                         bool hard) {
  if (hard || lanepool__spill_count(&band->spill, memory_order_acquire) == 0) {
    int rc = lanepool__ring_push(&band->ring, fn, ctx, arg, own ? LANEPOOL__PUSH_OWN : 0);
    if (rc != EAGAIN || hard) return rc;
  }
  /* Full (or the list holds tasks already: they go first, so the list empties). */
  return lanepool__spill_push_n(&band->spill, fn, &ctx, &arg, 1, own);
}

bool lanepool__bandq_take(lanepool__band *band, lanepool__task *out) {
  if (lanepool__ring_take(&band->ring, out)) return true;
  return lanepool__spill_take(&band->spill, NULL, out, NULL);
}

bool lanepool__bandq_nonempty(const lanepool__band *band) {
  return lanepool__ring_nonempty(&band->ring) ||
         lanepool__spill_count(&band->spill, memory_order_seq_cst) != 0;
}

uint64_t lanepool__bandq_depth(const lanepool__band *band) {
  return lanepool__ring_depth(&band->ring) +
         lanepool__spill_count(&band->spill, memory_order_relaxed);
}

/* Band jobs ever accepted: ring claims plus list appends. Monotonic. */
uint64_t lanepool__bandq_accepted(lanepool__band *band) {
  return lanepool__ring_tail(&band->ring, memory_order_seq_cst) +
         atomic_load_explicit(&band->spill.in, memory_order_acquire);
}

uint64_t lanepool__bandq_taken(const lanepool__band *band) {
  lanepool__band *b = (lanepool__band *)band;
  return lanepool__ring_head(&b->ring) + atomic_load_explicit(&b->spill.in, memory_order_relaxed) -
         lanepool__spill_count(&b->spill, memory_order_relaxed);
}

/* The list first, then the ring's tail flag: a thread that sees the ring CLOSED knows
 * that nothing can be added anywhere any more. */
void lanepool__bandq_set_intake(lanepool__band *band, int intake) {
  LANEPOOL_INJECT(LANEPOOL__AT_INTAKE);
  lanepool__spill_set_intake(&band->spill, intake);
  lanepool__ring_close(&band->ring,
                       intake == LANEPOOL__INTAKE_CLOSED ? LANEPOOL__CLOSED : LANEPOOL__OWN_ONLY);
}

bool lanepool__bandq_closed(const lanepool__band *band) {
  return lanepool__ring_closed(&band->ring);
}

/* After every thread of the band was joined: each queued job to `discard`. A claimed
 * cell not yet published is waited for (its producer got 0). */
void lanepool__bandq_discard_all(lanepool__band *band, lanepool_discard_fn discard,
                                 void *discard_arg) {
  lanepool__ring *r = &band->ring;
  uint64_t end = lanepool__ring_tail(r, memory_order_seq_cst); /* CLOSED: final */
  lanepool__task task;
  for (uint64_t pos; (pos = lanepool__ring_head(r)) < end;) {
    (void)lanepool__ring_wait_cell(r, pos);
    if (lanepool__ring_take(r, &task)) lanepool__discard_plain(&task, discard, discard_arg);
  }
  while (lanepool__spill_take(&band->spill, NULL, &task, NULL))
    lanepool__discard_plain(&task, discard, discard_arg);
}
