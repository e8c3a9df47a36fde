/*
 * inject.h - fault-injection points for deterministic interleaving tests.
 *
 * In a normal build LANEPOOL_INJECT(point) compiles to nothing. A test build
 * (-DLANEPOOL_TEST_INJECT, as Tests/c/lifecycle_test.c is built) turns each point
 * into a call that, driven by a seed, does nothing, yields, or sleeps briefly, so the
 * narrow windows (a producer preempted between claiming a cell and publishing it, a
 * lane between its last emptiness check and its futex wait...) are hit on purpose and
 * reproducibly: the same seed gives the same decision sequence per thread.
 *
 * A test may instead install a scheduler (lanepool__inject_set_scheduler): every point
 * then calls it (after the observer hook, lanepool__inject_set_hook, if one is set)
 * instead of the seeded yields. Tests/c/ctlsched.c is such a controlled scheduler: the
 * threads of a scenario run one at a time and, at each point, a seeded strategy picks
 * who runs next. The points from LANEPOOL__AT_STATE on exist for it: shared-state
 * accesses of the life cycle, and the marks around blocking calls (a thread about to
 * block cannot reach a point, so it gives the turn up first). The seeded-yield mode
 * ignores them (its yields stay where they were).
 */
#ifndef LANEPOOL_INJECT_H
#define LANEPOOL_INJECT_H

#include <stdint.h>

enum {
  LANEPOOL__AT_CLAIM_PUBLISH = 0, /* ring: between the tail CAS and the publish */
  LANEPOOL__AT_CLOSE_DISCARD,     /* lifecycle: between closing intake and discarding */
  LANEPOOL__AT_PARK,              /* lane: between sleeping = 1 and the last check */
  LANEPOOL__AT_WAKE,              /* producer: before the sleeping check */
  LANEPOOL__AT_TIMER_FIRE,        /* timer thread: before pushing a due timer */
  LANEPOOL__AT_FORK,              /* atfork handlers */
  LANEPOOL__AT_DRAIN_SCAN,        /* lifecycle: between the two drain scans */
  LANEPOOL__AT_CANCEL,            /* lane: on seeing cancel, before its sync walk */
  LANEPOOL__AT_SPILL,             /* overflow list: between append (or take) and count */
  LANEPOOL__AT_LEND,              /* inline sync: after borrowing, before giving back */
  LANEPOOL__AT_ESCALATE,          /* lifecycle: a cancel claimed the escalation of a drain */
  LANEPOOL__AT_QUIESCENT,         /* lifecycle: the drain's driver found quiescence */
  LANEPOOL__AT_JOIN_WAIT,         /* lifecycle: a shutdown waiter woke, before its re-check */
  LANEPOOL__AT_CALLS_SCAN,        /* destroy: between two callers' records */
  LANEPOOL__AT_STATE,             /* before a read or a change of the pool's state word */
  LANEPOOL__AT_COUNTER,           /* before a drain counter or drain_events moves */
  LANEPOOL__AT_JOIN,              /* before a join, or a wait for JOINED */
  LANEPOOL__AT_TIMER_HEAP,        /* before the timer lock is taken */
  LANEPOOL__AT_DEFAULT,           /* before the default pool's lock is taken */
  LANEPOOL__AT_INTAKE,            /* before an intake change (rings, overflow, timers) */
  LANEPOOL__AT_FREE,              /* destroy: before the pool is freed */
  /* Marks around blocking and spinning: */
  LANEPOOL__AT_SPIN,    /* in a loop waiting for another thread: pass the turn on */
  LANEPOOL__AT_BLOCK,   /* right before a call that may block (futex, join, condvar) */
  LANEPOOL__AT_RESUME,  /* right after such a call returns */
  LANEPOOL__AT_EXIT,    /* a pool thread about to end */
  LANEPOOL__AT_UNBLOCK, /* right after a call that may wake a blocked thread */
  LANEPOOL__AT_COUNT
};

#ifdef LANEPOOL_TEST_INJECT
/* seed 0 turns every point off. `sleep_us` bounds the sleeps. Call before the threads
 * under test start (the decision streams are per thread, seeded from `seed`). */
void lanepool__inject_configure(uint64_t seed, uint32_t sleep_us);
/* How many times each point was reached with injection on (for the test's report). */
uint64_t lanepool__inject_hits(int point);
void lanepool__inject(int point);
/* A test's own hook, called first at every point reached (by any thread) while set;
 * NULL removes it. For scenarios that must stop one thread at one point until another
 * has done something (the hook decides by point and by its own thread-local state). */
typedef void (*lanepool__inject_hook_fn)(int point, void *arg);
void lanepool__inject_set_hook(lanepool__inject_hook_fn hook, void *arg);
/* A point about a futex word or a condition variable (the marks around blocking). */
void lanepool__inject_on(int point, const void *word);
/* NULL: the seeded-yield mode. Otherwise every point calls hook(point, word) instead of it
 * (word NULL but for LANEPOOL_INJECT_ON). */
typedef void (*lanepool__inject_scheduler_fn)(int point, const void *word);
void lanepool__inject_set_scheduler(lanepool__inject_scheduler_fn hook);
#define LANEPOOL_INJECT(point)          lanepool__inject(point)
#define LANEPOOL_INJECT_ON(point, word) lanepool__inject_on(point, (const void *)(word))
#else
#define LANEPOOL_INJECT(point)          ((void)0)
#define LANEPOOL_INJECT_ON(point, word) ((void)0)
#endif

#endif /* LANEPOOL_INJECT_H */
