/*
 * ctlsched.h - a controlled scheduler for the C core's test build (-DLANEPOOL_TEST_INJECT).
 * (Not named sched.h: with -ITests/c that would hide the system's <sched.h>.)
 *
 * Installed as the inject scheduler (lanepool__inject_set_scheduler, inject.h), it makes
 * every thread that reaches an injection point while a run is on (the scenario's own
 * threads and the pool's: lanes, the timer thread) wait for its turn: one thread runs
 * at a time, and at each point a seeded strategy picks the next one.
 *  - SCHED_PCT: probabilistic concurrency testing. Each thread gets a random priority
 *    (from the seed and its name, so not from the order in which threads show up);
 *    `depth - 1` change points at random step numbers in 1..steps drop the running
 *    thread's priority below every initial one; the runnable thread of highest
 *    priority runs.
 *  - SCHED_RANDOM: a random walk, every step a runnable thread chosen uniformly.
 * The marks: LANEPOOL__AT_BLOCK (a call that may block follows) gives the turn up and
 * leaves the thread free until its next point; LANEPOOL__AT_SPIN (a wait loop) passes
 * the turn on, and spinners run only when no other thread can until another thread
 * has taken a step; LANEPOOL__AT_EXIT gives it up for good; LANEPOOL__AT_UNBLOCK (a
 * futex wake that woke someone, a condvar signal; with its word) says the threads
 * blocked on that word may come back (an exit says it of joiners): the next decision
 * waits for one of them up to LANEPOOL_SCHED_PATIENCE_US (default 300) if the strategy
 * prefers it, or for a thread not seen yet if the word is nobody's known (a lane that
 * parked before the run). A thread that keeps the turn without reaching a point for
 * `watchdog_us` (blocked on a lock held by a waiting thread, or slow on a loaded
 * machine) loses it: counted as a fallback, it runs free until its next point.
 *
 * Fairness: a thread picked LANEPOOL_SCHED_STARVE_STEPS (default 1000) times in a row
 * while another runnable thread that does not spin is passed over is preempted once, as
 * a kernel would (a busy-wait with no spin point would otherwise starve, under PCT, the
 * thread it waits for: a schedule no fair OS makes).
 *
 * Points reached inside a lock (LANEPOOL__AT_SPILL, LANEPOOL__AT_TIMER_FIRE) never
 * switch, so that the next thread does not block on that lock.
 *
 * Replays: the same seed, strategy and scenario give the same decisions as long as
 * woken threads come back within the wait and no fallback happens; on a loaded
 * machine a replay can differ, which is why a run reports its waits in vain and its
 * fallbacks, and a failure also names the seed range that finds it again.
 *
 * LANEPOOL_SCHED_TRACE=1 prints every decision, wait, change point and fallback.
 */
#ifndef LANEPOOL_TEST_SCHED_H
#define LANEPOOL_TEST_SCHED_H

#include <pthread.h>
#include <stdint.h>

typedef enum { SCHED_PCT, SCHED_RANDOM } sched_strategy;

typedef struct {
  uint64_t steps;     /* scheduling decisions */
  uint64_t fallbacks; /* turns the watchdog took back */
  uint64_t waits;     /* decisions put off for a thread that might come back */
  uint64_t vain;      /* ... that it did not come back for (patience ran out) */
  uint32_t threads;   /* threads that showed up */
  uint32_t overflow;  /* threads beyond the table: ran free */
} sched_stats;

/* Starts a run: `expected` scenario threads (started with sched_spawn) must have
 * shown up before anyone gets the first turn. pct_steps: PCT's estimate of the run's
 * length in steps (change points are drawn in 1..pct_steps). */
void sched_begin(uint64_t seed, sched_strategy strategy, uint32_t pct_depth, uint32_t pct_steps,
                 uint32_t expected, uint32_t watchdog_us);
/* Ends the run: every waiting thread runs free from now on; the hook is removed. */
void sched_end(sched_stats *out);
/* A scenario thread: it registers before fn runs and gives its turn up after. */
int sched_spawn(pthread_t *thread, void *(*fn)(void *), void *arg);
/* A point of the scenario's own code (e.g. LANEPOOL__AT_SPIN in a wait loop). */
void sched_point(int point);
/* The hook itself: a point, with the futex word or condvar of a blocking mark. */
void sched_point_on(int point, const void *word);
const char *sched_strategy_name(sched_strategy s);
/* Every thread's state and last point, to fd (for a hang report; takes no lock). */
void sched_dump(int fd);

#endif /* LANEPOOL_TEST_SCHED_H */
