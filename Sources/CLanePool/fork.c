/*
 * fork.c - fork() safety. A child process has none of its parent's lane threads, so
 * pools created before the fork must refuse work there instead of queueing tasks no
 * thread will run (or joining threads that do not exist). The child handler (pool.c,
 * locks_child) bumps a generation counter that every pool and lane compares with the
 * one it was born in (one relaxed load on the submit path), then releases the
 * library's global locks (the registry's and the default pool's), which pool.c's
 * handlers hold across fork() so the child never inherits one locked by a thread that
 * does not exist there. A pool's own locks (timers, overflow lists, lane threads) are not held:
 * instead every entry point that takes one checks the generation first and answers
 * EOWNERDEAD, so in a child no call on a pre-fork pool touches a lock that may have
 * been held at fork time.
 */
#include "internal.h"

#include <pthread.h>
#include <string.h>
#include <unistd.h>

_Atomic uint64_t lanepool__fork_generation = 0;

/* A fork child, a copy of a pool thread back from a task or a log callback, is alone in its
 * process: it ends, `msg` on stderr, then _exit(0) (async-signal-safe calls only). */
void lanepool__forked_child_exit(const char *msg) {
  ssize_t ignored = write(2, msg, strlen(msg));
  (void)ignored;
  _exit(0);
}
