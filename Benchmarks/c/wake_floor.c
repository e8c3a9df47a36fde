/*
 * wake_floor.c - how long a woken thread waits for a CPU on this machine, idle and with
 * every CPU busy: the floor under escalation's loaded figures (docs/priorities.md).
 *
 * A waiter thread at nice -5 (the userInteractive band's nice) sleeps on a futex; the
 * main thread, also at nice -5, stamps the time and wakes it, 2 ms apart, SAMPLES times;
 * the waiter records stamp -> running. First with nothing else running, then beside one
 * busy loop per CPU: nice 0 (the inversion bench's load), nice 10 SCHED_BATCH (the
 * background band's), SCHED_IDLE. Prints p50 / p99 / p99.9 / max in us and how many waits passed 1 ms. Needs root for nice -5.
 *   cc -O2 -pthread Benchmarks/c/wake_floor.c -o wake_floor && ./wake_floor [samples] [waiter nice]
 */
#define _GNU_SOURCE
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static _Atomic uint32_t word;
static _Atomic uint64_t stamp;
static _Atomic int stop_hogs;
static int hog_kind; /* 0: SCHED_OTHER nice 0; 1: SCHED_BATCH nice 10; 2: SCHED_IDLE */
static int waiter_nice = -5;
static uint64_t *lat;
static int samples;

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void *waiter(void *arg) {
  (void)arg;
  setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), waiter_nice);
  for (int i = 0; i < samples; i++) {
    while (atomic_load(&word) == 0) syscall(SYS_futex, &word, FUTEX_WAIT_PRIVATE, 0, NULL, NULL, 0);
    lat[i] = now_ns() - atomic_load(&stamp);
    atomic_store(&word, 0);
  }
  return NULL;
}


static void *hog(void *arg) {
  (void)arg;
  struct sched_param sp = {0};
  if (hog_kind == 1) pthread_setschedparam(pthread_self(), SCHED_BATCH, &sp);
  if (hog_kind == 2) pthread_setschedparam(pthread_self(), SCHED_IDLE, &sp);
  setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), hog_kind == 1 ? 10 : 0);
  while (!atomic_load_explicit(&stop_hogs, memory_order_relaxed)) {
  }
  return NULL;
}

static int cmp(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

static void run(const char *name) {
  pthread_t w;
  atomic_store(&word, 0);
  pthread_create(&w, NULL, waiter, NULL);
  struct timespec gap = {0, 2000000};
  nanosleep(&gap, NULL);
  for (int i = 0; i < samples; i++) {
    nanosleep(&gap, NULL);
    atomic_store(&stamp, now_ns());
    atomic_store(&word, 1);
    syscall(SYS_futex, &word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
    while (atomic_load(&word) != 0) nanosleep(&(struct timespec){0, 100000}, NULL);
  }
  pthread_join(w, NULL);
  qsort(lat, (size_t)samples, sizeof *lat, cmp);
  int over = 0;
  for (int i = 0; i < samples; i++) over += lat[i] > 1000000;
  printf("%-42s p50 %6.1f us  p99 %6.1f us  p99.9 %7.1f us  max %7.1f us  over 1 ms: %d\n",
         name, lat[samples / 2] / 1e3, lat[samples * 99 / 100] / 1e3,
         lat[samples * 999 / 1000] / 1e3, lat[samples - 1] / 1e3, over);
}

int main(int argc, char **argv) {
  samples = argc > 1 ? atoi(argv[1]) : 500;
  if (samples < 10) samples = 10;
  if (argc > 2) waiter_nice = atoi(argv[2]);
  lat = calloc((size_t)samples, sizeof *lat);
  if (setpriority(PRIO_PROCESS, 0, -5) != 0) {
    perror("setpriority -5 (needs root)");
    return 1;
  }
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  printf("wake_floor: nproc %ld, %d samples each; a nice %d thread's futex wake -> running\n",
         cpus, samples, waiter_nice);
  run("idle");
  static const char *const names[] = {"beside a nice-0 busy loop per CPU",
                                      "beside a nice-10 SCHED_BATCH loop per CPU",
                                      "beside a SCHED_IDLE busy loop per CPU"};
  for (hog_kind = 0; hog_kind < 3; hog_kind++) {
    pthread_t h[64];
    atomic_store(&stop_hogs, 0);
    for (long i = 0; i < cpus && i < 64; i++) pthread_create(&h[i], NULL, hog, NULL);
    run(names[hog_kind]);
    atomic_store(&stop_hogs, 1);
    for (long i = 0; i < cpus && i < 64; i++) pthread_join(h[i], NULL);
  }
  return 0;
}
