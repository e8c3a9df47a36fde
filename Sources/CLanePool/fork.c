/*
 * fork.c - fork() safety. A child process has none of its parent's lane threads, so
 * pools created before the fork must refuse work there instead of queueing tasks no
 * thread will run (or joining threads that do not exist). The child handler bumps a
 * generation counter that every pool and lane compares with the one it was born in
 * (one relaxed load on the submit path). The prepare/parent/child handlers hold the
 * library's global locks (the registry and the default pool's) across fork(), so the
 * child never inherits one locked by a thread that does not exist there. A pool's own
 * locks (timers, overflow lists, lane threads) are not held: instead every entry point
 * that takes one checks the generation first and answers EOWNERDEAD, so in a child no
 * call on a pre-fork pool touches a lock that may have been held at fork time.
 */
#include "internal.h"

#include <pthread.h>

_Atomic uint64_t lanepool__fork_generation = 0;

extern pthread_mutex_t lanepool__registry_lock;
extern pthread_mutex_t lanepool__default_lock;
void lanepool__forget_default_pool(void);

static void prepare(void) {
  LANEPOOL_INJECT(LANEPOOL__AT_FORK);
  pthread_mutex_lock(&lanepool__default_lock);
  pthread_mutex_lock(&lanepool__registry_lock);
}

static void parent(void) {
  LANEPOOL_INJECT(LANEPOOL__AT_FORK);
  pthread_mutex_unlock(&lanepool__registry_lock);
  pthread_mutex_unlock(&lanepool__default_lock);
}

static void child(void) {
  atomic_fetch_add_explicit(&lanepool__fork_generation, 1, memory_order_relaxed);
  lanepool__forget_default_pool(); /* the child gets a fresh one on demand */
  pthread_mutex_unlock(&lanepool__registry_lock);
  pthread_mutex_unlock(&lanepool__default_lock);
}

static pthread_once_t once = PTHREAD_ONCE_INIT;
static void install(void) { pthread_atfork(prepare, parent, child); }

void lanepool__fork_init(void) { pthread_once(&once, install); }
