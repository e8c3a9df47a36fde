/*
 * thread.c - the one way LanePool starts a thread (lanes, their replacements, the
 * timer thread): the same signal mask, stack size and naming for all of them.
 *
 * Signal mask: every asynchronous signal is blocked, so signals reach the
 * application's own threads and never a library thread in the middle of a task or a
 * callback; the synchronous ones (a fault raised by the code the thread runs) stay
 * unblocked, so the application's crash handler sees them.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "internal.h"

#include <signal.h>
#include <string.h>

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
