/*
 * rescue_wakes.c - what the rescue lanes (lane.c, "The rescue lane") cost in wake-ups:
 * the voluntary context switches of a pool's five `<pool>-<band>-r` threads, read from
 * /proc, over three windows of `seconds` each:
 *   idle:  after a burst of band work, nothing submitted (they should not wake);
 *   busy:  one outside thread keeps the default band's rings non-empty (band work,
 *          lanepool_async, 1,000 tasks of ~50 us a round) - the rescue lane ticks;
 *   stuck: every default lane blocked on a semaphore with band work queued behind it:
 *          the rescue lane runs it (tasks rescued are counted too).
 * Prints one line per window. Not part of the library or of CI (it takes 3 x seconds).
 *
 *   cc -O2 -pthread -Iinclude Tests/perf/rescue_wakes.c Sources/CLanePool/(all).c \
 *      -o rescue_wakes && ./rescue_wakes [seconds]      (default 5)
 */
#define _GNU_SOURCE
#include "../c/procfs.h"
#include "lanepool.h"

#include <dirent.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Voluntary context switches summed over this process's threads named *-r. */
static long rescue_switches(void) {
  DIR *d = opendir("/proc/self/task");
  if (!d) return -1;
  long sum = 0;
  pid_t tid;
  char comm[32], path[300], line[256];
  while (next_thread(d, &tid, comm, sizeof comm)) {
    size_t n = strlen(comm);
    if (n < 2 || strcmp(comm + n - 2, "-r") != 0) continue;
    snprintf(path, sizeof path, "/proc/self/task/%d/status", (int)tid);
    FILE *f = fopen(path, "r");
    if (!f) continue;
    while (fgets(line, sizeof line, f))
      if (strncmp(line, "voluntary_ctxt_switches:", 24) == 0) sum += atol(line + 24);
    fclose(f);
  }
  closedir(d);
  return sum;
}

static _Atomic uint64_t ran;
static void spin_50us(void *ctx) {
  (void)ctx;
  uint64_t end = now_ns() + 50000;
  while (now_ns() < end) {}
  atomic_fetch_add(&ran, 1);
}
static void count(void *ctx) {
  (void)ctx;
  atomic_fetch_add(&ran, 1);
}
static sem_t gate;
static void block(void *ctx) {
  (void)ctx;
  sem_wait(&gate);
}

int main(int argc, char **argv) {
  int seconds = argc > 1 ? atoi(argv[1]) : 5;
  lanepool_config_t cfg;
  lanepool_config_init(&cfg);
  cfg.name = "rw";
  lanepool_t *pool = NULL;
  if (lanepool_create(&cfg, &pool)) return 2;
  lanepool_info_t info;
  lanepool_info(pool, &info);
  uint32_t n = info.lanes_per_band;

  /* idle, after a burst */
  for (int i = 0; i < 100000; i++) lanepool_async(pool, LANEPOOL_QOS_DEFAULT, count, NULL);
  while (atomic_load(&ran) < 100000) usleep(1000);
  usleep(300000); /* past the calm period after the burst's wake */
  long a = rescue_switches();
  sleep((unsigned)seconds);
  long b = rescue_switches();
  printf("idle:  %ld rescue-lane wake-ups in %d s (%.1f/s)\n", b - a, seconds,
         (double)(b - a) / seconds);

  /* busy: the band's rings keep work */
  atomic_store(&ran, 0);
  uint64_t end = now_ns() + (uint64_t)seconds * 1000000000u, sent = 0;
  a = rescue_switches();
  while (now_ns() < end) {
    for (int i = 0; i < 1000; i++, sent++)
      lanepool_async(pool, LANEPOOL_QOS_DEFAULT, spin_50us, NULL);
    while (atomic_load(&ran) + 200 < sent) usleep(100);
  }
  b = rescue_switches();
  while (atomic_load(&ran) < sent) usleep(1000);
  printf("busy:  %ld rescue-lane wake-ups in %d s (%.1f/s), %llu tasks\n", b - a, seconds,
         (double)(b - a) / seconds, (unsigned long long)sent);

  /* stuck: every default lane blocked, band work queued behind them */
  sem_init(&gate, 0, 0);
  atomic_store(&ran, 0);
  lanepool_lane_t *rescue = NULL;
  lanepool_rescue_lane(pool, LANEPOOL_QOS_DEFAULT, &rescue);
  lanepool_lane_info_t li;
  lanepool_lane_info(rescue, &li);
  uint64_t stolen0 = li.tasks_stolen;
  a = rescue_switches();
  uint64_t t0 = now_ns();
  for (uint32_t i = 0; i < n; i++) {
    lanepool_lane_t *lane = NULL;
    lanepool_get_lane(pool, LANEPOOL_QOS_DEFAULT, i, &lane);
    lanepool_lane_async(lane, block, NULL);
  }
  for (int i = 0; i < 100; i++) lanepool_async(pool, LANEPOOL_QOS_DEFAULT, count, NULL);
  while (atomic_load(&ran) < 100) usleep(1000);
  uint64_t took = now_ns() - t0;
  b = rescue_switches();
  lanepool_lane_info(rescue, &li);
  printf("stuck: 100 band tasks behind %u blocked lanes ran in %.0f ms, %llu on the rescue lane, "
         "%ld rescue-lane wake-ups\n",
         n, took / 1e6, (unsigned long long)(li.tasks_stolen - stolen0), b - a);
  for (uint32_t i = 0; i < n; i++) sem_post(&gate);
  lanepool_shutdown(pool, LANEPOOL_SHUTDOWN_DRAIN, NULL, NULL);
  lanepool_destroy(pool);
  return 0;
}
