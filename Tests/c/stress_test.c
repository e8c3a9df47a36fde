/*
 * stress_test.c - the C-level reliability checks .ci/run runs natively:
 *  1. lost wake-up torture: one task submitted and awaited, N times (default
 *     1,000,000), with random pauses so submits land on every point of a lane's
 *     spin -> park transition; a task not started within 10 s fails and prints the
 *     lane's state.
 *  2. fork: in a child, a pool created before fork() refuses every call with
 *     EOWNERDEAD (no hang), a new pool works; the parent's pool is unaffected.
 * Usage: stress_test [iterations]. Prints "N passed, N failed".
 */
#define _GNU_SOURCE
#include "lanepool.h"

#include <errno.h>
#include <linux/futex.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int passed, failed;
#define CHECK(cond)                                                                                \
  do {                                                                                             \
    if (cond)                                                                                      \
      passed++;                                                                                    \
    else {                                                                                         \
      failed++;                                                                                    \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);                     \
    }                                                                                              \
  } while (0)

static _Atomic uint32_t done_word;

static void signal_task(void *ctx) {
  (void)ctx;
  atomic_store_explicit(&done_word, 1, memory_order_release);
  syscall(SYS_futex, &done_word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Waits for the task; false after 10 s. */
static int await_done(void) {
  uint64_t deadline = now_ns() + 10ull * 1000000000u;
  while (atomic_load_explicit(&done_word, memory_order_acquire) == 0) {
    uint64_t now = now_ns();
    if (now >= deadline) return 0;
    struct timespec ts = {.tv_sec = 0, .tv_nsec = 100000000};
    syscall(SYS_futex, &done_word, FUTEX_WAIT_PRIVATE, 0, &ts, NULL, 0);
  }
  return 1;
}

static void print_lane(lanepool_lane_t *lane) {
  lanepool_lane_info_t i;
  lanepool_lane_info(lane, &i);
  fprintf(stderr,
          "lane %s: tid %d, running %d, executed %llu, depth %llu, overflowed %llu, stalled %d\n",
          i.thread_name, i.tid, i.running, (unsigned long long)i.tasks_executed,
          (unsigned long long)i.depth, (unsigned long long)i.overflowed, i.stalled);
}

static void torture(long iterations) {
  lanepool_config_t cfg;
  lanepool_config_init(&cfg);
  cfg.name = "torture";
  cfg.lanes_per_band = 1;
  lanepool_t *pool;
  CHECK(lanepool_create(&cfg, &pool) == 0);
  /* Alternate a spinning band (userInteractive, 50 us budget) and one that never
   * spins (background), so submits hit both the spin and the park paths. */
  lanepool_lane_t *spinning, *parking;
  lanepool_get_lane(pool, LANEPOOL_QOS_USER_INTERACTIVE, 0, &spinning);
  lanepool_get_lane(pool, LANEPOOL_QOS_BACKGROUND, 0, &parking);
  unsigned seed = 12345;
  uint64_t t0 = now_ns();
  long lost = 0;
  for (long n = 0; n < iterations; n++) {
    lanepool_lane_t *lane = (n & 1) ? spinning : parking;
    atomic_store_explicit(&done_word, 0, memory_order_relaxed);
    if (lanepool_lane_async(lane, signal_task, NULL) != 0) {
      failed++;
      break;
    }
    if (!await_done()) {
      fprintf(stderr, "iteration %ld: task not started within 10 s\n", n);
      print_lane(lane);
      lost++;
      break;
    }
    /* A random pause: none, a few spins, past the spin budget, or a yield. */
    seed = seed * 1103515245u + 12345u;
    switch ((seed >> 16) % 4) {
    case 0:
      break;
    case 1: {
      uint64_t until = now_ns() + ((seed >> 8) % 80000);
      while (now_ns() < until) {}
      break;
    }
    case 2:
      sched_yield();
      break;
    default: {
      struct timespec ts = {.tv_sec = 0, .tv_nsec = (long)((seed >> 4) % 100000)};
      nanosleep(&ts, NULL);
    }
    }
  }
  CHECK(lost == 0);
  printf("lost wake-up torture: %ld round trips in %.1f s, %ld lost\n", iterations,
         (double)(now_ns() - t0) / 1e9, lost);
  CHECK(lanepool_destroy(pool) == 0);
}

static void noop(void *ctx) { (void)ctx; }

static void fork_safety(void) {
  lanepool_config_t cfg;
  lanepool_config_init(&cfg);
  cfg.name = "parent";
  cfg.lanes_per_band = 1;
  lanepool_t *pool;
  CHECK(lanepool_create(&cfg, &pool) == 0);
  lanepool_lane_t *lane;
  lanepool_get_lane(pool, LANEPOOL_QOS_DEFAULT, 0, &lane);
  lanepool_t *def;
  CHECK(lanepool_default(&def) == 0);

  pid_t child = fork();
  if (child == 0) {
    int bad = 0;
    if (lanepool_lane_async(lane, noop, NULL) != EOWNERDEAD) bad |= 1;
    if (lanepool_async(pool, LANEPOOL_QOS_DEFAULT, noop, NULL) != EOWNERDEAD) bad |= 2;
    if (lanepool_lane_sync(lane, noop, NULL) != EOWNERDEAD) bad |= 4;
    if (lanepool_lane_async_after(lane, 0, noop, NULL, NULL) != EOWNERDEAD) bad |= 8;
    if (lanepool_shutdown(pool, LANEPOOL_SHUTDOWN_DRAIN, NULL, NULL) != EOWNERDEAD) bad |= 16;
    if (lanepool_destroy(pool) != EOWNERDEAD) bad |= 32;
    lanepool_t *def2;
    if (lanepool_default(&def2) != 0 || def2 == def) bad |= 64; /* a fresh default pool */
    lanepool_lane_t *l2;
    if (lanepool_next_lane(def2, LANEPOOL_QOS_DEFAULT, &l2) != 0 ||
        lanepool_lane_sync(l2, noop, NULL) != 0)
      bad |= 128;
    lanepool_t *fresh;
    cfg.name = "child";
    if (lanepool_create(&cfg, &fresh) != 0)
      bad |= 256;
    else if (lanepool_destroy(fresh) != 0)
      bad |= 512;
    _exit(bad);
  }
  int status = 0;
  CHECK(waitpid(child, &status, 0) == child);
  CHECK(WIFEXITED(status));
  if (WEXITSTATUS(status)) fprintf(stderr, "child failures: mask %d\n", WEXITSTATUS(status));
  CHECK(WEXITSTATUS(status) == 0);
  /* The parent is unaffected. */
  CHECK(lanepool_lane_sync(lane, noop, NULL) == 0);
  CHECK(lanepool_destroy(pool) == 0);
}

int main(int argc, char **argv) {
  long iterations = argc > 1 ? atol(argv[1]) : 1000000;
  fork_safety();
  torture(iterations);
  printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
