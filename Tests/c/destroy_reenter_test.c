/*
 * destroy_reenter_test.c - lanepool_destroy called back from inside a destroy under way
 * (issue 23's hostile review): from a lane of the pool while destroy drains it, and from
 * the discard callback of a cancel that escalated destroy's drain. The header promises
 * EDEADLK for both ("called from one of this pool's threads, or from its discard
 * callback; the pool is left as it was"); the registry lookup came first and answered
 * EINVAL ("not a live pool"), since the destroy under way had taken the pool out.
 *
 * Build and run (from the repository root; about 0.1 s):
 *   cc -std=gnu11 -O1 -g -Wall -Wextra -Werror -pthread -Iinclude -ISources/CLanePool
 *      Tests/c/destroy_reenter_test.c Sources/CLanePool/(every .c) -o /tmp/destroy_reenter
 *   /tmp/destroy_reenter
 */
#define _GNU_SOURCE
#include "lanepool.h"
#include "internal.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static lanepool_t *pool;
static lanepool_lane_t *lane;
static _Atomic int lane_destroy_rc = -1, cb_destroy_rc = -1, cb_shutdown_rc = -1;
static _Atomic int discarded, blocker_started;
static int failures;

static uint32_t state(void) { return atomic_load(&pool->state); }

/* Polls (never sleeps a fixed time) with a generous cap that fails loudly. */
static void wait_state(uint32_t want, const char *what) {
  for (long i = 0; state() != want; i++) {
    if (i > 100000000L) {
      fprintf(stderr, "FAIL: pool never reached %s (state %u)\n", what, state());
      exit(1);
    }
    sched_yield();
  }
}

static void check(const char *what, int got, int want) {
  printf("%-58s %d (%s)%s\n", what, got, strerror(got), got == want ? "" : "  <- FAIL");
  if (got != want) failures++;
}

/* Runs on the lane: once destroy's drain is under way, destroy from here, then (case 2)
 * hold the lane until a cancel escalated the drain. */
static _Atomic int hold_for_cancel;
static void blocker(void *ctx) {
  (void)ctx;
  atomic_store(&blocker_started, 1);
  wait_state(LANEPOOL__LIFE_DRAINING, "DRAINING");
  atomic_store(&lane_destroy_rc, lanepool_destroy(pool));
  if (atomic_load(&hold_for_cancel)) wait_state(LANEPOOL__LIFE_CANCELLING, "CANCELLING");
}

static void task(void *ctx) { (void)ctx; }

static void discard(lanepool_fn fn, void *ctx, void *arg) {
  (void)fn;
  (void)ctx;
  (void)arg;
  if (atomic_fetch_add(&discarded, 1) == 0) {
    atomic_store(&cb_destroy_rc, lanepool_destroy(pool));
    atomic_store(&cb_shutdown_rc, lanepool_shutdown(pool, LANEPOOL_SHUTDOWN_DRAIN, NULL, NULL));
  }
}

static void *destroyer(void *arg) {
  (void)arg;
  int rc = lanepool_destroy(pool);
  if (rc) {
    fprintf(stderr, "FAIL: the destroy under way returned %d\n", rc);
    exit(1);
  }
  return NULL;
}

static void run(bool escalate) {
  lanepool_config_t cfg;
  lanepool_config_init(&cfg);
  cfg.name = "reenter";
  cfg.lanes_per_band = 1;
  if (lanepool_create(&cfg, &pool) || lanepool_get_lane(pool, LANEPOOL_QOS_DEFAULT, 0, &lane))
    abort();
  atomic_store(&hold_for_cancel, escalate);
  atomic_store(&blocker_started, 0);
  atomic_store(&discarded, 0);
  atomic_store(&lane_destroy_rc, -1);
  if (lanepool_lane_async(lane, blocker, NULL)) abort();
  while (!atomic_load(&blocker_started)) sched_yield();
  if (lanepool_lane_async(lane, task, NULL)) abort(); /* queued behind: the discard's */
  pthread_t d;
  if (pthread_create(&d, NULL, destroyer, NULL)) abort();
  if (escalate) {
    /* The lane has made its own destroy call (it sees DRAINING): then escalate. */
    for (long i = 0; atomic_load(&lane_destroy_rc) == -1; i++) {
      if (i > 100000000L) {
        fprintf(stderr, "FAIL: the lane never called destroy\n");
        exit(1);
      }
      sched_yield();
    }
    int rc = lanepool_shutdown(pool, LANEPOOL_SHUTDOWN_CANCEL, discard, NULL);
    /* Escalated (0), or, had the drain committed first, EALREADY: the callback is
     * then never called, and this case proves nothing. */
    if (rc != 0 || atomic_load(&discarded) != 1) {
      fprintf(stderr, "FAIL: the cancel did not escalate the drain (rc %d, discarded %d)\n", rc,
              atomic_load(&discarded));
      exit(1);
    }
  }
  pthread_join(d, NULL);
}

int main(void) {
  run(false);
  check("lane of a pool being destroyed: lanepool_destroy", atomic_load(&lane_destroy_rc), EDEADLK);
  run(true);
  check("discard callback, cancel escalating destroy: lanepool_destroy",
        atomic_load(&cb_destroy_rc), EDEADLK);
  check("discard callback, cancel escalating destroy: lanepool_shutdown",
        atomic_load(&cb_shutdown_rc), EALREADY);
  printf("%s\n", failures ? "FAILED" : "ok");
  return failures ? 1 : 0;
}
