/*
 * calls.c - the calls under way on each pool, so that lanepool_destroy frees nothing a
 * caller still touches (docs/architecture.md, "Destroy and calls in flight": who is
 * waited for, the per-thread records, membarrier or the fences, the fallback). A call
 * that starts after destroy was called is the caller's use after free, as always.
 * [record.inside: relaxed store + compiler fence (membarrier) or + seq_cst fence
 * (without), on entry; release store on exit; seq_cst loads by the scan after the
 * membarrier or fence]
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "internal.h"

#include <linux/membarrier.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

__thread lanepool__caller *lanepool__self;
bool lanepool__calls_cheap;                 /* [once] membarrier usable (see above) */
_Atomic uint32_t lanepool__calls_anonymous; /* calls by threads without a record */

#ifdef LANEPOOL_TEST_HOOKS
unsigned lanepool__test_membarrier_refused;
#endif

static int membarrier(int cmd) {
#ifdef LANEPOOL_TEST_HOOKS
  if (lanepool__test_membarrier_refused & (unsigned)cmd) return EPERM;
#endif
  return syscall(SYS_membarrier, cmd, 0, 0) == 0 ? 0 : errno;
}

/* true if destroy can rely on MEMBARRIER_CMD_PRIVATE_EXPEDITED in this process. */
static bool membarrier_usable(void) {
  return membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0 &&
         membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0;
}

static _Atomic(lanepool__caller *) callers; /* a list that only grows */
static pthread_key_t exit_key;
static bool have_key;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void thread_exit(void *arg) {
  lanepool__caller *c = arg;
  lanepool__self = NULL; /* a later destructor that calls in takes a record again */
  atomic_store_explicit(&c->inside, NULL, memory_order_release);
  atomic_store_explicit(&c->taken, 0, memory_order_release);
}

/* In a fork child only the forking thread exists: every other record is free. The
 * child is a new process for membarrier: register again (or fall back to fences),
 * alone in it, before any other thread can call in. */
static void fork_child(void) {
  for (lanepool__caller *c = atomic_load(&callers); c; c = c->next) {
    if (c == lanepool__self) continue;
    atomic_store_explicit(&c->inside, NULL, memory_order_relaxed);
    atomic_store_explicit(&c->taken, 0, memory_order_relaxed);
  }
  lanepool__calls_cheap = lanepool__calls_cheap && membarrier_usable();
}

static void init(void) {
  have_key = pthread_key_create(&exit_key, thread_exit) == 0;
  lanepool__calls_cheap = membarrier_usable();
  pthread_atfork(NULL, NULL, fork_child);
}

lanepool__caller *lanepool__caller_register(void) {
  pthread_once(&once, init);
  lanepool__caller *c;
  for (c = atomic_load(&callers); c; c = c->next) {
    int free_ = 0;
    if (atomic_compare_exchange_strong(&c->taken, &free_, 1)) break;
  }
  if (!c) {
    c = aligned_alloc(LANEPOOL__CACHE_LINE, sizeof *c); /* a line of its own */
    if (!c) return NULL; /* this call goes through the anonymous count */
    atomic_init(&c->inside, NULL);
    atomic_init(&c->taken, 1);
    c->next = atomic_load(&callers);
    while (!atomic_compare_exchange_weak(&callers, &c->next, c)) {}
  }
  if (have_key) (void)pthread_setspecific(exit_key, c);
  lanepool__self = c;
  return c;
}

/* true if `p` is the pool or one of its lanes. */
static bool names_pool(const lanepool_t *pool, const void *p) {
  if (!p) return false;
  if (p == pool) return true;
  uint32_t total = lanepool__lane_total(pool);
  for (uint32_t i = 0; i < total; i++)
    if (p == pool->lanes[i]) return true;
  return false;
}

bool lanepool__calls_inside(const lanepool_t *pool) {
  lanepool__caller *c = lanepool__self;
  return c && names_pool(pool, atomic_load_explicit(&c->inside, memory_order_relaxed));
}

void lanepool__calls_wait(const lanepool_t *pool) {
  pthread_once(&once, init);
  if (!lanepool__calls_cheap) {
    atomic_thread_fence(memory_order_seq_cst); /* pairs with each entry's fence */
  } else if (membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) != 0 &&
             membarrier(MEMBARRIER_CMD_GLOBAL) != 0) {
    static const char msg[] = "lanepool: membarrier(2) failed at lanepool_destroy although it "
                              "worked at startup; stopping rather than freeing a pool under "
                              "a caller (calls.c)\n";
    lanepool__die(msg, false);
  }
  for (lanepool__caller *c = atomic_load(&callers); c; c = c->next) {
    if (c == lanepool__self) continue;
    while (names_pool(pool, atomic_load_explicit(&c->inside, memory_order_seq_cst))) {
      LANEPOOL__TEST_POINT("calls_wait", NULL, 0);
      lanepool__spin_yield(); /* a caller between its last access and its return: short */
    }
    LANEPOOL_INJECT(LANEPOOL__AT_CALLS_SCAN);
  }
  while (atomic_load_explicit(&lanepool__calls_anonymous, memory_order_seq_cst) != 0)
    lanepool__spin_yield();
}
