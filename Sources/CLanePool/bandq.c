/*
 * bandq.c - a band's queue of band work: the work submitted to a band rather than to a
 * lane (lanepool_async, the Swift executors' jobs, band timers). It has no order and
 * no exclusion; it needs a thread of its band, any one. So it lives where every thread
 * of the band can take it, at every moment: bounded rings that many threads take from
 * (ring.h, lanepool__ring_take), one per lane of the band, and behind them an overflow
 * list (spill.c) that any of them takes from too once the rings are empty. A producer
 * pushes into one ring (a lane's thread into its own lane's, others each into one of
 * their own), a thread takes from its own lane's ring first and then from the others:
 * the shards keep producers and takers off one shared head and tail, and none is
 * private. This is Go's run queues without their owners: see docs/architecture.md, "The
 * scheduler". Who takes from it, and who is woken for it: park.c and worker.c.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

int lanepool__bandq_init(lanepool__band *band, uint32_t shards, uint32_t capacity) {
  memset(band, 0, sizeof *band);
  size_t bytes = (size_t)shards * capacity * sizeof(lanepool__slot);
  bytes = (bytes + LANEPOOL__CACHE_LINE - 1) & ~(size_t)(LANEPOOL__CACHE_LINE - 1);
  lanepool__slot *slots = lanepool__alloc_on_node(bytes, -1, &band->slots_numa_owned);
  band->rings = aligned_alloc(LANEPOOL__CACHE_LINE, shards * sizeof *band->rings);
  int rc = slots && band->rings ? lanepool__spill_init(&band->spill) : ENOMEM;
  if (rc) {
    if (slots) lanepool__free_on_node(slots, bytes, band->slots_numa_owned);
    free(band->rings);
    band->rings = NULL;
    return rc;
  }
  band->slots_bytes = bytes;
  band->shards = shards;
  for (uint32_t i = 0; i < shards; i++)
    lanepool__ring_init(&band->rings[i], slots + (size_t)i * capacity, capacity);
  atomic_init(&band->idle, 0);
  atomic_init(&band->spinning, 0);
  atomic_init(&band->rescue_idle, 0);
  return 0;
}

void lanepool__bandq_free(lanepool__band *band) {
  if (!band->rings) return;
  lanepool__spill_destroy(&band->spill);
  lanepool__free_on_node(band->rings[0].slots, band->slots_bytes, band->slots_numa_owned);
  free(band->rings);
  band->rings = NULL;
}

int lanepool__bandq_push(lanepool__band *band, uint32_t shard, lanepool_fn fn, void *ctx, void *arg,
                         bool own, bool hard) {
  if (hard || lanepool__spill_count(&band->spill, memory_order_acquire) == 0) {
    int rc = lanepool__ring_push(&band->rings[shard % band->shards], fn, ctx, arg,
                                 own ? LANEPOOL__PUSH_OWN : 0);
    if (rc != EAGAIN || hard) return rc;
  }
  /* Full (or the list holds tasks already: they go first, so the list empties). */
  return lanepool__spill_push_n(&band->spill, fn, &ctx, &arg, 1, own);
}

bool lanepool__bandq_take(lanepool__band *band, uint32_t first, lanepool__task *out) {
  for (uint32_t k = 0; k < band->shards; k++)
    if (lanepool__ring_take(&band->rings[(first + k) % band->shards], out)) return true;
  return lanepool__spill_take(&band->spill, NULL, out, NULL);
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

/* Band jobs ever accepted: ring claims plus list appends. Monotonic. */
uint64_t lanepool__bandq_accepted(lanepool__band *band) {
  uint64_t n = atomic_load_explicit(&band->spill.in, memory_order_acquire);
  for (uint32_t i = 0; i < band->shards; i++)
    n += lanepool__ring_tail(&band->rings[i], memory_order_seq_cst);
  return n;
}

/* The list first, then the rings' tail flags: a thread that sees a ring CLOSED knows
 * that nothing can be added to the list any more. */
void lanepool__bandq_set_intake(lanepool__band *band, int intake) {
  LANEPOOL_INJECT(LANEPOOL__AT_INTAKE);
  lanepool__spill_set_intake(&band->spill, intake);
  for (uint32_t i = 0; i < band->shards; i++)
    lanepool__ring_close(&band->rings[i],
                         intake == LANEPOOL__INTAKE_CLOSED ? LANEPOOL__CLOSED : LANEPOOL__OWN_ONLY);
}

/* After every thread of the band was joined: each queued job to `discard`. A claimed
 * cell not yet published is waited for (its producer got 0). */
void lanepool__bandq_discard_all(lanepool__band *band, lanepool_discard_fn discard,
                                 void *discard_arg) {
  lanepool__task task;
  for (uint32_t i = 0; i < band->shards; i++) {
    lanepool__ring *r = &band->rings[i];
    uint64_t end = lanepool__ring_tail(r, memory_order_seq_cst); /* CLOSED: final */
    for (uint64_t pos; (pos = lanepool__ring_head(r)) < end;) {
      (void)lanepool__ring_wait_cell(r, pos);
      if (lanepool__ring_take(r, &task)) lanepool__discard_plain(&task, discard, discard_arg);
    }
  }
  while (lanepool__spill_take(&band->spill, NULL, &task, NULL))
    lanepool__discard_plain(&task, discard, discard_arg);
}
