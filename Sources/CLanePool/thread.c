/*
 * thread.c - the one way LanePool starts a thread (lanes, their replacements, the
 * timer thread): the same signal mask, stack size and naming for all; and futex waits.
 *
 * Signal mask: every asynchronous signal is blocked, so signals reach the
 * application's own threads and never a library thread in the middle of a task or a
 * callback; the synchronous ones (a fault raised by the code the thread runs) stay
 * unblocked, so the application's crash handler sees them.
 *
 * Fork: a child has none of its parent's threads. pool.c's child handler bumps
 * lanepool__fork_generation, which every pool and lane compares with the one it was born
 * in (one relaxed load on the submit path): a pre-fork pool then answers EOWNERDEAD, and
 * touches none of its locks, which a thread that does not exist there may have held.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "internal.h"

#include <linux/futex.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

_Atomic uint64_t lanepool__fork_generation = 0;

/* `msg` on stderr, then _exit(0) (a fork child, a copy of a pool thread back from a task
 * or a log callback, alone in its process) or abort() (async-signal-safe calls only). */
_Noreturn void lanepool__die(const char *msg, bool child) {
  ssize_t ignored = write(2, msg, strlen(msg));
  (void)ignored;
  if (child) _exit(0);
  abort();
}

int lanepool__thread_start(pthread_t *out, size_t stack_size, void *(*fn)(void *), void *arg) {
  pthread_attr_t attr;
  int rc = pthread_attr_init(&attr);
  if (rc) return rc;
  if (stack_size && (rc = pthread_attr_setstacksize(&attr, stack_size))) {
    pthread_attr_destroy(&attr);
    return rc;
  }
  sigset_t all, old;
  sigfillset(&all);
  static const int synchronous[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGABRT, SIGSYS};
  for (size_t i = 0; i < sizeof synchronous / sizeof synchronous[0]; i++)
    sigdelset(&all, synchronous[i]);
  pthread_sigmask(SIG_SETMASK, &all, &old); /* the new thread inherits this mask */
  rc = pthread_create(out, &attr, fn, arg);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  pthread_attr_destroy(&attr);
  return rc;
}

void lanepool__thread_name(const char *pool_name, const char *suffix, char out[16]) {
  size_t slen = strlen(suffix);
  if (slen > 15) slen = 15;
  size_t keep = strnlen(pool_name, 15 - slen);
  memcpy(out, pool_name, keep);
  memcpy(out + keep, suffix, slen);
  out[keep + slen] = '\0';
}

/* true if the time (ts NULL: none) ran out. */
static inline bool futex_wait(_Atomic uint32_t *word, uint32_t expected, struct timespec *ts) {
  LANEPOOL_INJECT_ON(LANEPOOL__AT_BLOCK, word);
  int saved = errno;
  bool timed_out =
      syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT_PRIVATE, expected, ts, NULL, 0) == -1 &&
      errno == ETIMEDOUT;
  errno = saved; /* EAGAIN / EINTR are fine: every caller re-checks in a loop */
  LANEPOOL_INJECT(LANEPOOL__AT_RESUME);
  return timed_out;
}

void lanepool__futex_wait(_Atomic uint32_t *word, uint32_t expected) {
  (void)futex_wait(word, expected, NULL);
}

bool lanepool__futex_wait_for(_Atomic uint32_t *word, uint32_t expected, uint64_t ns) {
  struct timespec ts = {.tv_sec = (time_t)(ns / 1000000000u), .tv_nsec = (long)(ns % 1000000000u)};
  return futex_wait(word, expected, &ts);
}

void lanepool__futex_wake(_Atomic uint32_t *word, int count) {
  int saved = errno;
  long woken = syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE_PRIVATE, count, NULL, NULL, 0);
  errno = saved;
  if (woken > 0) LANEPOOL_INJECT_ON(LANEPOOL__AT_UNBLOCK, word); /* the count: test builds only */
}
