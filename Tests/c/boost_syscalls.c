/*
 * boost_syscalls.c - N queued cross-band syncs from a userInteractive thread onto a
 * background lane, for counting escalation's system calls (scripts/boost-syscalls runs
 * it under strace -c -f; docs/priorities.md, Escalation, has the figures).
 *   ./boost_syscalls N [unpriv [same]]
 * unpriv: uid 65534 with RLIMIT_NICE 0 (run as root); same: onto a default lane, with a
 * userInteractive band that differs from the default band only by nice -5 (unprivileged,
 * a boost that can change nothing).
 */
#define _GNU_SOURCE
#include "lanepool.h"
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>
static void noop(void *ctx) { (void)ctx; }
int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 1000;
  if (argc > 2 && strcmp(argv[2], "unpriv") == 0) {
    struct rlimit rl = {0, 0};
    if (setrlimit(RLIMIT_NICE, &rl) || setgroups(0, NULL) || setgid(65534) || setuid(65534))
      return 4;
  }
  lanepool_config_t cfg;
  lanepool_config_init(&cfg);
  cfg.name = "sc";
  cfg.lanes_per_band = 1;
  lanepool_qos_t target = LANEPOOL_QOS_BACKGROUND;
  if (argc > 3 && strcmp(argv[3], "same") == 0) {
    /* userInteractive = the default band but nice -5: unprivileged, a boost of a
     * default lane to it can change nothing */
    cfg.policy[0] = cfg.policy[2];
    cfg.policy[0].nice = -5;
    target = LANEPOOL_QOS_DEFAULT;
  }
  lanepool_t *pool;
  if (lanepool_create(&cfg, &pool)) return 1;
  lanepool_lane_t *bg;
  lanepool_get_lane(pool, target, 0, &bg);
  lanepool_band_token_t t;
  t.struct_size = sizeof t;
  lanepool_thread_enter_band(LANEPOOL_QOS_USER_INTERACTIVE, 0, &t);
  for (int i = 0; i < n; i++)
    if (lanepool_lane_sync_flags(bg, noop, NULL, LANEPOOL_SYNC_QUEUED)) return 2;
  lanepool_thread_restore(&t);
  lanepool_destroy(pool);
  return 0;
}
