/*
 * fork.c - fork() safety. A child process has none of its parent's lane threads, so
 * pools created before the fork must refuse work there instead of queueing tasks no
 * thread will run (or joining threads that do not exist). The child handler bumps a
 * generation counter that every pool and lane compares with the one it was born in
 * (one relaxed load on the submit path). It calls no one: the library's global locks
 * (the registry's and the default pool's) are held across fork() by pool.c's own
 * handlers, so the child never inherits one locked by a thread that does not exist
 * there. A pool's own locks (timers, overflow lists, lane threads) are not held:
 * instead every entry point that takes one checks the generation first and answers
 * EOWNERDEAD, so in a child no call on a pre-fork pool touches a lock that may have
 * been held at fork time.
 */
#include "internal.h"

#include <pthread.h>
#include <string.h>
#include <unistd.h>

_Atomic uint64_t lanepool__fork_generation = 0;

static void child(void) {
  atomic_fetch_add_explicit(&lanepool__fork_generation, 1, memory_order_relaxed);
}

static pthread_once_t once = PTHREAD_ONCE_INIT;
static void install(void) { pthread_atfork(NULL, NULL, child); }

void lanepool__fork_init(void) { pthread_once(&once, install); }

/* A fork child, a copy of a pool thread back from a task or a log callback, is alone in its
 * process: it ends, `msg` on stderr, then _exit(0) (async-signal-safe calls only). */
void lanepool__forked_child_exit(const char *msg) {
  ssize_t ignored = write(2, msg, strlen(msg));
  (void)ignored;
  _exit(0);
}
