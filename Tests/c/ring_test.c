/*
 * ring_test.c - unit test of the header-only task ring (Sources/CLanePool/ring.h):
 * capacity and EAGAIN, FIFO across wraps, CLOSED and OWN_ONLY, the third task word, many
 * producers (single pushes and batches) with one consumer, a claimed-but-unpublished
 * cell waited for by ring_wait_cell, and an owner with thieves on a mixed ring.
 * Prints "ok - name" / "FAIL - name: why" per test, then "N passed, M failed".
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "ring.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int passed, failed;

/* Each test returns NULL on success or a static message naming what broke. */
static void report(const char *name, const char *why) {
  if (why == NULL) {
    passed++;
    printf("ok - %s\n", name);
  } else {
    failed++;
    printf("FAIL - %s: %s\n", name, why);
  }
  fflush(stdout);
}
#define REQUIRE(cond, why)                                                                         \
  do {                                                                                             \
    if (!(cond)) return (why);                                                                     \
  } while (0)

static void task_fn(void *ctx) { (void)ctx; }

static void *as_ctx(uint64_t v) { return (void *)(uintptr_t)v; }
static uint64_t from_ctx(void *p) { return (uint64_t)(uintptr_t)p; }

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * UINT64_C(1000000000) + (uint64_t)ts.tv_nsec;
}

/* A ring on its own cache lines, with `capacity` slots; NULL if out of memory. */
static lanepool__ring *ring_new(uint64_t capacity) {
  lanepool__ring *r = aligned_alloc(LANEPOOL__CACHE_LINE, sizeof *r);
  lanepool__slot *slots = calloc(capacity, sizeof *slots);
  if (r == NULL || slots == NULL) {
    free(r);
    free(slots);
    return NULL;
  }
  lanepool__ring_init(r, slots, capacity);
  return r;
}

static void ring_free(lanepool__ring *r) {
  if (r == NULL) return;
  free(r->slots);
  free(r);
}

/* Pops one task and checks it is (task_fn, expect). */
static bool pop_is(lanepool__ring *r, uint64_t expect) {
  lanepool__ring_task t;
  return lanepool__ring_pop(r, &t) && t.fn == task_fn && from_ctx(t.ctx) == expect && !t.arg;
}

static const char *capacity_then_eagain_body(lanepool__ring *r) {
  for (uint64_t i = 0; i < 8; i++)
    REQUIRE(lanepool__ring_push(r, task_fn, as_ctx(i), NULL, false) == 0,
            "push below capacity failed");
  REQUIRE(lanepool__ring_depth(r) == 8, "depth is not 8 after 8 pushes");
  REQUIRE(lanepool__ring_push(r, task_fn, as_ctx(99), NULL, false) == EAGAIN,
          "9th push not EAGAIN");
  REQUIRE(lanepool__ring_depth(r) == 8, "EAGAIN changed the depth");
  REQUIRE(lanepool__ring_tail(r, memory_order_seq_cst) == 8, "EAGAIN moved the tail");
  REQUIRE(pop_is(r, 0), "first pop is not item 0");
  REQUIRE(lanepool__ring_depth(r) == 7, "depth is not 7 after a pop");
  REQUIRE(lanepool__ring_push(r, task_fn, as_ctx(8), NULL, false) == 0, "push after a pop failed");
  REQUIRE(lanepool__ring_push(r, task_fn, as_ctx(99), NULL, false) == EAGAIN,
          "full again: not EAGAIN");
  for (uint64_t i = 1; i <= 8; i++) REQUIRE(pop_is(r, i), "drain out of order");
  lanepool__ring_task t;
  REQUIRE(!lanepool__ring_pop(r, &t), "pop from an empty ring succeeded");
  REQUIRE(lanepool__ring_depth(r) == 0, "depth is not 0 when empty");
  return NULL;
}

static const char *fifo_across_wraps_body(lanepool__ring *r) {
  uint64_t next_push = 0, next_pop = 0, batch = 0;
  const uint64_t total = 10000;
  while (next_pop < total) {
    uint64_t n = batch++ % 4 + 1; /* 1, 2, 3, 4, 1, ... */
    uint64_t pushed = 0;
    for (; pushed < n && next_push < total; pushed++, next_push++)
      REQUIRE(lanepool__ring_push(r, task_fn, as_ctx(next_push), NULL, false) == 0, "push failed");
    REQUIRE(lanepool__ring_depth(r) == pushed, "depth differs from the batch size");
    for (uint64_t i = 0; i < pushed; i++, next_pop++)
      REQUIRE(pop_is(r, next_pop), "popped value is not the next expected one");
    lanepool__ring_task t;
    REQUIRE(!lanepool__ring_pop(r, &t), "pop after the batch succeeded");
  }
  REQUIRE(lanepool__ring_tail(r, memory_order_seq_cst) == total, "tail is not the push count");
  return NULL;
}

static const char *closed_refuses_body(lanepool__ring *r) {
  for (uint64_t i = 0; i < 5; i++)
    REQUIRE(lanepool__ring_push(r, task_fn, as_ctx(i), NULL, false) == 0,
            "push before close failed");
  REQUIRE(pop_is(r, 0) && pop_is(r, 1), "pops before close out of order");
  REQUIRE(lanepool__ring_close(r, LANEPOOL__CLOSED) == 5, "close did not return the push count");
  REQUIRE(lanepool__ring_closed(r), "ring_closed is false after close");
  REQUIRE(lanepool__ring_push(r, task_fn, as_ctx(50), NULL, false) == ESHUTDOWN,
          "push not ESHUTDOWN");
  REQUIRE(lanepool__ring_push(r, task_fn, as_ctx(51), NULL, true) == ESHUTDOWN,
          "own push not ESHUTDOWN");
  REQUIRE(lanepool__ring_close(r, LANEPOOL__CLOSED) == 5, "second close moved the count");
  for (uint64_t i = 2; i < 5; i++) {
    REQUIRE(pop_is(r, i), "item queued before close lost or out of order");
    REQUIRE(lanepool__ring_push(r, task_fn, as_ctx(60), NULL, true) == ESHUTDOWN, "push after pop");
  }
  lanepool__ring_task t;
  REQUIRE(!lanepool__ring_pop(r, &t), "pop past the closed tail succeeded");
  REQUIRE(lanepool__ring_tail(r, memory_order_seq_cst) == 5, "tail moved after CLOSED");
  REQUIRE(lanepool__ring_depth(r) == 0, "depth not 0 after draining");
  return NULL;
}

static const char *own_only_admits_own_body(lanepool__ring *r) {
  for (uint64_t i = 0; i < 3; i++)
    REQUIRE(lanepool__ring_push(r, task_fn, as_ctx(i), NULL, false) == 0,
            "push before OWN_ONLY failed");
  REQUIRE(lanepool__ring_close(r, LANEPOOL__OWN_ONLY) == 3, "OWN_ONLY close: wrong claim count");
  REQUIRE(!lanepool__ring_closed(r), "OWN_ONLY reads as CLOSED");
  REQUIRE(lanepool__ring_push(r, task_fn, as_ctx(90), NULL, false) == ESHUTDOWN,
          "foreign push not refused with ESHUTDOWN under OWN_ONLY");
  REQUIRE(lanepool__ring_tail(r, memory_order_seq_cst) == 3, "refused push moved the tail");
  REQUIRE(lanepool__ring_push(r, task_fn, as_ctx(3), NULL, true) == 0, "own push refused");
  REQUIRE(lanepool__ring_depth(r) == 4, "depth is not 4");
  REQUIRE(lanepool__ring_tail(r, memory_order_seq_cst) == 4, "own push did not move the tail");
  for (uint64_t i = 0; i < 4; i++) REQUIRE(pop_is(r, i), "own item not in FIFO order");
  REQUIRE(lanepool__ring_close(r, LANEPOOL__CLOSED) == 4, "CLOSED: wrong claim count");
  REQUIRE(lanepool__ring_push(r, task_fn, as_ctx(91), NULL, false) == ESHUTDOWN,
          "foreign not ESHUTDOWN");
  REQUIRE(lanepool__ring_push(r, task_fn, as_ctx(92), NULL, true) == ESHUTDOWN,
          "own not ESHUTDOWN");
  REQUIRE(lanepool__ring_tail(r, memory_order_seq_cst) == 4, "tail moved after CLOSED");
  return NULL;
}

/* ---- multi_producer_sum ---- */
enum { PRODUCERS = 8, PER_PRODUCER = 200000, MP_CAPACITY = 1024, SEQ_BITS = 24 };

struct mp_producer {
  lanepool__ring *r;
  uint64_t id;
  bool batches; /* push with lanepool__ring_push_n, batches of 1...37 */
  const char *err;
};

struct mp_consumer {
  lanepool__ring *r;
  uint64_t count[PRODUCERS], sum[PRODUCERS], next[PRODUCERS];
  const char *err;
};

static void *mp_produce(void *arg) {
  struct mp_producer *p = arg;
  if (p->batches) {
    void *ctxs[37];
    for (uint64_t s = 0; s < PER_PRODUCER;) {
      uint64_t n = s % 37 + 1;
      if (n > PER_PRODUCER - s) n = PER_PRODUCER - s;
      for (uint64_t i = 0; i < n; i++) ctxs[i] = as_ctx(p->id << SEQ_BITS | (s + i));
      uint64_t pushed = 0;
      int rc = lanepool__ring_push_n(p->r, task_fn, ctxs, NULL, n, false, &pushed);
      if (rc == EAGAIN) {
        sched_yield();
        continue;
      }
      if (rc != 0 || pushed == 0 || pushed > n) {
        p->err = "push_n returned neither a prefix nor EAGAIN";
        return NULL;
      }
      s += pushed; /* the rest of the batch goes next, in order */
    }
    return NULL;
  }
  for (uint64_t s = 0; s < PER_PRODUCER; s++) {
    int rc;
    while ((rc = lanepool__ring_push(p->r, task_fn, as_ctx(p->id << SEQ_BITS | s), NULL, false)) ==
           EAGAIN)
      sched_yield();
    if (rc != 0) {
      p->err = "push returned neither 0 nor EAGAIN";
      return NULL;
    }
  }
  return NULL;
}

static void *mp_consume(void *arg) {
  struct mp_consumer *c = arg;
  const uint64_t total = (uint64_t)PRODUCERS * PER_PRODUCER;
  uint64_t received = 0;
  uint64_t deadline = now_ns() + UINT64_C(120) * 1000000000u;
  lanepool__ring_task t;
  while (received < total) {
    if (!lanepool__ring_pop(c->r, &t)) {
      if (now_ns() > deadline) {
        c->err = "consumer timed out (items lost?)";
        return NULL;
      }
      sched_yield();
      continue;
    }
    /* On a bad item, note it and keep draining so no producer is left spinning. */
    uint64_t v = from_ctx(t.ctx), id = v >> SEQ_BITS, s = v & ((UINT64_C(1) << SEQ_BITS) - 1);
    received++;
    if (t.fn != task_fn || id >= PRODUCERS) {
      if (c->err == NULL) c->err = "popped a task no producer pushed";
      continue;
    }
    if (s != c->next[id] && c->err == NULL)
      c->err = "per-producer order broken (lost, duplicated or reordered item)";
    c->next[id] = s + 1;
    c->count[id]++;
    c->sum[id] += s;
  }
  if (lanepool__ring_pop(c->r, &t)) c->err = "an extra item after all were received";
  return NULL;
}

static bool mp_batches;

static const char *multi_producer_sum_body(lanepool__ring *r) {
  static struct mp_producer prod[PRODUCERS];
  static struct mp_consumer cons;
  memset(&cons, 0, sizeof cons);
  cons.r = r;
  pthread_t ct, pt[PRODUCERS];
  REQUIRE(pthread_create(&ct, NULL, mp_consume, &cons) == 0, "pthread_create (consumer) failed");
  int started = 0;
  for (; started < PRODUCERS; started++) {
    /* with mp_batches, every other producer pushes batches, beside single pushes */
    prod[started] = (struct mp_producer){
        .r = r, .id = (uint64_t)started, .batches = mp_batches && started % 2 == 1, .err = NULL};
    if (pthread_create(&pt[started], NULL, mp_produce, &prod[started]) != 0) break;
  }
  for (int i = 0; i < started; i++) pthread_join(pt[i], NULL);
  pthread_join(ct, NULL); /* if a producer did not start, the consumer times out */
  REQUIRE(started == PRODUCERS, "pthread_create (producer) failed");
  for (int i = 0; i < PRODUCERS; i++) REQUIRE(prod[i].err == NULL, prod[i].err);
  REQUIRE(cons.err == NULL, cons.err);
  const uint64_t want_sum = (uint64_t)PER_PRODUCER * (PER_PRODUCER - 1) / 2;
  for (int i = 0; i < PRODUCERS; i++) {
    REQUIRE(cons.count[i] == PER_PRODUCER, "a producer's item count is wrong");
    REQUIRE(cons.sum[i] == want_sum, "a producer's sequence sum is wrong");
  }
  REQUIRE(lanepool__ring_tail(r, memory_order_seq_cst) == (uint64_t)PRODUCERS * PER_PRODUCER,
          "tail is not the total push count");
  REQUIRE(lanepool__ring_depth(r) == 0, "depth not 0 at the end");
  return NULL;
}

static const char *multi_producer_batches_sum_body(lanepool__ring *r) {
  mp_batches = true;
  const char *err = multi_producer_sum_body(r);
  mp_batches = false;
  return err;
}

/* ---- push_n: a prefix when the ring has less room, FIFO with single pushes ---- */
static const char *push_n_takes_a_prefix_body(lanepool__ring *r) {
  void *ctxs[12];
  for (uint64_t i = 0; i < 12; i++) ctxs[i] = as_ctx(100 + i);
  uint64_t pushed = 99;
  REQUIRE(lanepool__ring_push_n(r, task_fn, ctxs, NULL, 0, false, &pushed) == 0 && pushed == 0,
          "an empty batch is not 0 with 0 pushed");
  for (uint64_t i = 0; i < 5; i++)
    REQUIRE(lanepool__ring_push(r, task_fn, as_ctx(i), NULL, false) == 0, "setup push failed");
  REQUIRE(lanepool__ring_push_n(r, task_fn, ctxs, NULL, 12, false, &pushed) == 0 && pushed == 3,
          "push_n into 3 free cells of 8 did not take exactly 3");
  REQUIRE(lanepool__ring_push_n(r, task_fn, ctxs + 3, NULL, 9, false, &pushed) == EAGAIN &&
              pushed == 0,
          "push_n into a full ring is not EAGAIN");
  REQUIRE(pop_is(r, 0) && pop_is(r, 1), "pops failed");
  REQUIRE(lanepool__ring_push_n(r, task_fn, ctxs + 3, NULL, 9, false, &pushed) == 0 && pushed == 2,
          "push_n after two pops did not take 2");
  REQUIRE(lanepool__ring_push(r, task_fn, as_ctx(7), NULL, false) == EAGAIN, "ring should be full");
  for (uint64_t i = 2; i < 5; i++) REQUIRE(pop_is(r, i), "single pushes out of order");
  for (uint64_t i = 0; i < 5; i++) REQUIRE(pop_is(r, 100 + i), "batch out of order");
  /* wraps: a batch across the end of the slot array */
  REQUIRE(lanepool__ring_push_n(r, task_fn, ctxs, NULL, 8, false, &pushed) == 0 && pushed == 8,
          "a full-capacity batch across the wrap was not taken whole");
  for (uint64_t i = 0; i < 8; i++) REQUIRE(pop_is(r, 100 + i), "wrapped batch out of order");
  lanepool__ring_close(r, LANEPOOL__OWN_ONLY);
  REQUIRE(lanepool__ring_push_n(r, task_fn, ctxs, NULL, 2, false, &pushed) == ESHUTDOWN,
          "OWN_ONLY did not refuse a batch from outside");
  REQUIRE(lanepool__ring_push_n(r, task_fn, ctxs, NULL, 2, true, &pushed) == 0 && pushed == 2,
          "OWN_ONLY refused an own batch");
  lanepool__ring_close(r, LANEPOOL__CLOSED);
  REQUIRE(lanepool__ring_push_n(r, task_fn, ctxs, NULL, 2, true, &pushed) == ESHUTDOWN &&
              pushed == 0,
          "CLOSED did not refuse a batch");
  return NULL;
}

/* ---- push_n_claims_only_free_cells ----
 * Cells need not be freed in order: a thief that won the CAS on head frees its cell when
 * it has read it, and the owner may pop and free the cells behind it first (so may a
 * head taker that waits for the rescue lane's READ). The interleaving, step by step on
 * one thread (a hostile review's): in a ring of 4, a marked task B at position 4, two
 * lane-bound ones behind it; a thief moves head past B (its CAS) and stops there; the
 * owner pops 5 and 6; a batch of 4 then finds positions 7, 9 and 10 free but 8 (B's
 * cell, index 0) not: it may claim 7 only. The thief then takes B intact. (The batch
 * used to binary-search for its last free cell, assuming free cells form a prefix
 * from the tail: it claimed 7 to 10 and wrote over B.) */
/* With many consumers (ring_take) cells are freed out of order: a taker that won the
 * CAS on head frees its cell after reading it, and a second taker may take and free the
 * cells behind it first. A batch may claim only free cells. */
static const char *push_n_claims_only_free_cells_body(lanepool__ring *r) {
  lanepool__ring_task t;
  for (uint64_t i = 0; i < 4; i++) /* a lap: positions 0 to 3 */
    REQUIRE(lanepool__ring_push(r, task_fn, as_ctx(i), NULL, 0) == 0, "setup push failed");
  for (uint64_t i = 0; i < 4; i++) REQUIRE(pop_is(r, i), "setup pop failed");
  REQUIRE(lanepool__ring_push(r, task_fn, as_ctx(42), NULL, 0) == 0, "B's push failed");
  REQUIRE(lanepool__ring_push(r, task_fn, as_ctx(5), NULL, 0) == 0, "push 5 failed");
  REQUIRE(lanepool__ring_push(r, task_fn, as_ctx(6), NULL, 0) == 0, "push 6 failed");
  uint64_t b = 4; /* taker A's CAS on head, its cell not freed yet */
  REQUIRE(atomic_compare_exchange_strong(&r->head, &b, 5), "A's CAS on head failed");
  REQUIRE(lanepool__ring_take(r, &t) && from_ctx(t.ctx) == 5, "taker B did not get 5");
  REQUIRE(lanepool__ring_take(r, &t) && from_ctx(t.ctx) == 6, "taker B did not get 6");
  void *ctxs[4] = {as_ctx(7), as_ctx(8), as_ctx(9), as_ctx(10)};
  uint64_t pushed = 99;
  REQUIRE(lanepool__ring_push_n(r, task_fn, ctxs, NULL, 4, 0, &pushed) == 0 && pushed == 1,
          "a batch claimed a cell taker A had not freed yet");
  /* A's other half: its task intact, then the cell freed. */
  lanepool__slot *cell = &r->slots[4 & r->mask];
  REQUIRE(from_ctx(cell->ctx) == 42, "A's task was overwritten");
  atomic_store_explicit(&cell->seq, 4 + r->mask + 1, memory_order_release);
  REQUIRE(lanepool__ring_take(r, &t) && from_ctx(t.ctx) == 7, "the batch's one cell");
  REQUIRE(lanepool__ring_push_n(r, task_fn, ctxs + 1, NULL, 3, 0, &pushed) == 0 && pushed == 3,
          "once freed, the cells did not take the rest of the batch");
  for (uint64_t i = 8; i <= 10; i++)
    REQUIRE(lanepool__ring_take(r, &t) && from_ctx(t.ctx) == i, "the rest out of order");
  REQUIRE(!lanepool__ring_take(r, &t), "a cell after the batch");
  return NULL;
}

static const char *arg_travels_body(lanepool__ring *r) {
  void *ctxs[4], *args[4];
  for (uint64_t round = 0; round < 5; round++) { /* 5 x 6 cells through 8: wraps */
    for (uint64_t i = 0; i < 4; i++) {
      ctxs[i] = as_ctx(round * 10 + i);
      args[i] = as_ctx(1000 + round * 10 + i);
    }
    uint64_t pushed = 0;
    REQUIRE(lanepool__ring_push(r, task_fn, as_ctx(round), as_ctx(2000 + round), false) == 0,
            "push with an arg failed");
    REQUIRE(lanepool__ring_push_n(r, task_fn, ctxs, args, 4, false, &pushed) == 0 && pushed == 4,
            "push_n with args failed");
    REQUIRE(lanepool__ring_push(r, task_fn, as_ctx(round), NULL, false) == 0, "push failed");
    lanepool__ring_task t;
    REQUIRE(lanepool__ring_pop(r, &t) && from_ctx(t.ctx) == round &&
                from_ctx(t.arg) == 2000 + round,
            "push's arg did not arrive");
    for (uint64_t i = 0; i < 4; i++)
      REQUIRE(lanepool__ring_pop(r, &t) && t.ctx == ctxs[i] && t.arg == args[i],
              "push_n's args did not arrive in order");
    REQUIRE(pop_is(r, round), "a NULL arg did not stay NULL");
  }
  return NULL;
}

/* ---- claimed_cell_is_waited_for ---- */
struct late_publisher {
  lanepool__slot *slot;
  uint64_t pos;
  _Atomic int published; /* set just before the publishing store */
};

static void *late_publish(void *arg) {
  struct late_publisher *lp = arg;
  struct timespec ts = {.tv_sec = 0, .tv_nsec = 20 * 1000 * 1000};
  nanosleep(&ts, NULL);
  lp->slot->fn = task_fn;
  lp->slot->ctx = as_ctx(0xC0FFEE);
  atomic_store_explicit(&lp->published, 1, memory_order_relaxed);
  atomic_store_explicit(&lp->slot->seq, lp->pos + 1, memory_order_release);
  return NULL;
}

static const char *claimed_cell_is_waited_for_body(lanepool__ring *r) {
  /* Move the ring off position 0 so the claimed cell is mid-ring. */
  for (uint64_t i = 0; i < 2; i++)
    REQUIRE(lanepool__ring_push(r, task_fn, as_ctx(i), NULL, false) == 0, "setup push failed");
  REQUIRE(pop_is(r, 0) && pop_is(r, 1), "setup pops failed");
  /* A producer preempted between its tail CAS and its publish, by hand. */
  uint64_t pos = lanepool__ring_tail(r, memory_order_seq_cst);
  uint64_t expect = pos;
  REQUIRE(atomic_compare_exchange_strong(&r->tail, &expect, pos + 1), "manual claim CAS failed");
  REQUIRE(lanepool__ring_close(r, LANEPOOL__CLOSED) == pos + 1, "close did not count the claim");
  lanepool__ring_task t;
  REQUIRE(!lanepool__ring_pop(r, &t), "pop returned an unpublished cell");
  static struct late_publisher lp;
  lp.slot = &r->slots[pos & r->mask];
  lp.pos = pos;
  atomic_init(&lp.published, 0);
  pthread_t th;
  uint64_t start = now_ns();
  REQUIRE(pthread_create(&th, NULL, late_publish, &lp) == 0, "pthread_create failed");
  lanepool__slot *slot = lanepool__ring_wait_cell(r, pos);
  uint64_t waited = now_ns() - start;
  int published = atomic_load_explicit(&lp.published, memory_order_relaxed);
  void *ctx = slot->ctx;
  lanepool__ring_fn fn = slot->fn;
  pthread_join(th, NULL);
  REQUIRE(published, "wait_cell returned before the publish");
  REQUIRE(waited >= UINT64_C(15) * 1000000u, "wait_cell returned well under the 20 ms delay");
  REQUIRE(slot == lp.slot, "wait_cell returned the wrong cell");
  REQUIRE(fn == task_fn && from_ctx(ctx) == 0xC0FFEE, "wait_cell's cell has the wrong task");
  REQUIRE(pop_is(r, 0xC0FFEE), "the published cell does not pop");
  REQUIRE(lanepool__ring_tail(r, memory_order_seq_cst) == pos + 1, "tail moved after CLOSED");
  return NULL;
}

/* ---- consumers_take_each_once ----
 * A band's queue: producers push (one of them in batches, lanepool__ring_push_n) into a
 * small ring (many wraps) while several consumers take with lanepool__ring_take. Each
 * cell is taken exactly once, and each consumer sees each producer's cells in the
 * order they were pushed (a consumer takes the head only). */
enum { MC_PRODUCERS = 3, MC_PER_PRODUCER = 60000, MC_CONSUMERS = 3, MC_CAPACITY = 64 };
static _Atomic uint8_t mc_taken[MC_PRODUCERS][MC_PER_PRODUCER];
static _Atomic uint64_t mc_total;

struct mc_arg {
  lanepool__ring *r;
  uint64_t id;
  const char *err;
};

static void *mc_produce(void *arg) {
  struct mc_arg *a = arg;
  uint64_t s = 0;
  while (s < MC_PER_PRODUCER) {
    uint64_t want = a->id == MC_PRODUCERS - 1 ? 1 + s % 8 : 1;
    if (want > MC_PER_PRODUCER - s) want = MC_PER_PRODUCER - s;
    void *ctxs[8];
    for (uint64_t k = 0; k < want; k++) ctxs[k] = as_ctx(a->id << 32 | (s + k));
    uint64_t pushed = 0;
    int rc = want == 1 ? lanepool__ring_push(a->r, task_fn, ctxs[0], NULL, 0)
                       : lanepool__ring_push_n(a->r, task_fn, ctxs, NULL, want, 0, &pushed);
    if (want == 1 && rc == 0) pushed = 1;
    if (rc == EAGAIN) {
      sched_yield();
      continue;
    }
    if (rc) {
      a->err = "a push failed";
      return NULL;
    }
    s += pushed;
  }
  return NULL;
}

static void *mc_consume(void *arg) {
  struct mc_arg *a = arg;
  uint64_t last[MC_PRODUCERS];
  for (int i = 0; i < MC_PRODUCERS; i++) last[i] = UINT64_MAX;
  const uint64_t all = (uint64_t)MC_PRODUCERS * MC_PER_PRODUCER;
  lanepool__ring_task t;
  while (atomic_load(&mc_total) < all) {
    if (!lanepool__ring_take(a->r, &t)) {
      sched_yield();
      continue;
    }
    uint64_t v = from_ctx(t.ctx), id = v >> 32, s = v & 0xffffffffu;
    if (id >= MC_PRODUCERS || s >= MC_PER_PRODUCER || t.fn != task_fn) {
      a->err = "a task that was never pushed";
      return NULL;
    }
    if (atomic_exchange(&mc_taken[id][s], 1)) {
      a->err = "a cell taken twice";
      return NULL;
    }
    if (last[id] != UINT64_MAX && s <= last[id]) {
      a->err = "a producer's cells taken out of order";
      return NULL;
    }
    last[id] = s;
    atomic_fetch_add(&mc_total, 1);
  }
  return NULL;
}

static const char *consumers_take_each_once_body(lanepool__ring *r) {
  memset(mc_taken, 0, sizeof mc_taken);
  atomic_store(&mc_total, 0);
  struct mc_arg prod[MC_PRODUCERS], cons[MC_CONSUMERS];
  pthread_t pt[MC_PRODUCERS], ct[MC_CONSUMERS];
  for (int i = 0; i < MC_CONSUMERS; i++) {
    cons[i] = (struct mc_arg){r, (uint64_t)i, NULL};
    REQUIRE(pthread_create(&ct[i], NULL, mc_consume, &cons[i]) == 0, "pthread_create failed");
  }
  for (int i = 0; i < MC_PRODUCERS; i++) {
    prod[i] = (struct mc_arg){r, (uint64_t)i, NULL};
    REQUIRE(pthread_create(&pt[i], NULL, mc_produce, &prod[i]) == 0, "pthread_create failed");
  }
  for (int i = 0; i < MC_PRODUCERS; i++) pthread_join(pt[i], NULL);
  for (int i = 0; i < MC_CONSUMERS; i++) pthread_join(ct[i], NULL);
  for (int i = 0; i < MC_PRODUCERS; i++) REQUIRE(!prod[i].err, prod[i].err);
  for (int i = 0; i < MC_CONSUMERS; i++) REQUIRE(!cons[i].err, cons[i].err);
  for (int i = 0; i < MC_PRODUCERS; i++)
    for (int s = 0; s < MC_PER_PRODUCER; s++) REQUIRE(atomic_load(&mc_taken[i][s]), "a cell lost");
  return NULL;
}

static void run(const char *name, uint64_t capacity, const char *(*body)(lanepool__ring *)) {
  lanepool__ring *r = ring_new(capacity);
  report(name, r == NULL ? "out of memory" : body(r));
  ring_free(r);
}

int main(void) {
  run("capacity_then_eagain", 8, capacity_then_eagain_body);
  run("fifo_across_wraps", 4, fifo_across_wraps_body);
  run("closed_refuses", 8, closed_refuses_body);
  run("own_only_admits_own", 8, own_only_admits_own_body);
  run("multi_producer_sum", MP_CAPACITY, multi_producer_sum_body);
  run("multi_producer_batches_sum", MP_CAPACITY, multi_producer_batches_sum_body);
  run("push_n_takes_a_prefix", 8, push_n_takes_a_prefix_body);
  run("push_n_claims_only_free_cells", 4, push_n_claims_only_free_cells_body);
  run("arg_travels", 8, arg_travels_body);
  run("claimed_cell_is_waited_for", 8, claimed_cell_is_waited_for_body);
  run("consumers_take_each_once", MC_CAPACITY, consumers_take_each_once_body);
  printf("%d passed, %d failed\n", passed, failed);
  return failed > 0;
}
