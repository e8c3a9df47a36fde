/*
 * hostile_chain_shutdown.c - issue 23's hostile review (third pass): shutdown of a pool
 * from a closure that one of that pool's lanes is waiting for. A task on pool A's lane
 * calls lanepool_lane_sync onto pool B's lane; the closure (on B's lane thread) calls
 * lanepool_shutdown(A) or lanepool_destroy(A). A's shutdown waits for A's lane, whose task
 * waits for the closure: a deadlock. lanepool_lane_sync follows exactly this chain and
 * answers EDEADLK ("a closure of a chain of nested syncs that holds the lane");
 * lanepool_shutdown / lanepool_destroy only check whether the caller is one of A's own
 * threads. Expected: EDEADLK (as from A's lane itself). Observed: a hang (the alarm
 * ends it after 5 s).
 *
 * Build (from the repository root):
 *   cc -std=gnu11 -O1 -g -Wall -Wextra -Werror -pthread -Iinclude
 *      Tests/c/hostile_chain_shutdown.c Sources/CLanePool/(every .c) -o /tmp/hostile_chain
 *   /tmp/hostile_chain [drain|cancel|destroy]
 */
#define _GNU_SOURCE
#include "lanepool.h"

#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static lanepool_t *pool_a, *pool_b;
static lanepool_lane_t *lane_a, *lane_b;
static const char *mode = "drain";
static _Atomic int closure_rc = -1, sync_rc = -1, done;

static void discard(lanepool_fn fn, void *ctx, void *arg) {
  (void)fn;
  (void)ctx;
  (void)arg;
}

static void closure(void *ctx) { /* on B's lane; A's lane waits for it */
  (void)ctx;
  int rc;
  if (!strcmp(mode, "destroy"))
    rc = lanepool_destroy(pool_a);
  else
    rc = lanepool_shutdown(
        pool_a, !strcmp(mode, "cancel") ? LANEPOOL_SHUTDOWN_CANCEL : LANEPOOL_SHUTDOWN_DRAIN,
        discard, NULL);
  atomic_store(&closure_rc, rc);
}

static void task_on_a(void *ctx) {
  (void)ctx;
  atomic_store(&sync_rc, lanepool_lane_sync(lane_b, closure, NULL));
  atomic_store(&done, 1);
}

static void on_alarm(int sig) {
  (void)sig;
  static const char msg[] =
      "FAIL: hang: shutdown of pool A from a closure that A's lane waits for (sync chain)\n";
  ssize_t ignored = write(1, msg, sizeof msg - 1);
  (void)ignored;
  _exit(1);
}

int main(int argc, char **argv) {
  if (argc > 1) mode = argv[1];
  lanepool_config_t cfg;
  lanepool_config_init(&cfg);
  cfg.lanes_per_band = 1;
  cfg.name = "A";
  if (lanepool_create(&cfg, &pool_a)) return 2;
  cfg.name = "B";
  if (lanepool_create(&cfg, &pool_b)) return 2;
  if (lanepool_get_lane(pool_a, LANEPOOL_QOS_DEFAULT, 0, &lane_a) ||
      lanepool_get_lane(pool_b, LANEPOOL_QOS_DEFAULT, 0, &lane_b))
    return 2;
  signal(SIGALRM, on_alarm);
  alarm(5);
  if (lanepool_lane_async(lane_a, task_on_a, NULL)) return 2;
  while (!atomic_load(&done)) usleep(1000); /* capped by the alarm */
  alarm(0);
  int rc = atomic_load(&closure_rc);
  printf("%s of A from the closure: %d (%s); the sync: %d\n", mode, rc, strerror(rc),
         atomic_load(&sync_rc));
  if (rc != EDEADLK) {
    printf("FAIL: expected EDEADLK\n");
    return 1;
  }
  printf("PASS\n");
  return 0;
}
