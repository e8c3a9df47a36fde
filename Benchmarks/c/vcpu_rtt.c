/*
 * vcpu_rtt.c - the round trip of one cache line between two CPUs: two threads, pinned to
 * CPU a and CPU b, bounce a counter N times; prints the mean round trip in ns. On a VM it
 * says where the host has put the two vCPUs now: on one core's SMT siblings (65 to 140 ns
 * on the development VM) or on two cores (390 to 540 ns), which it changes while a process
 * runs. W3's pickup p50 follows it (docs/bench/set-ab/README.md, "Where W3's two modes come
 * from"): run it between W3 rounds to tell the host's mode from a core's.
 *   cc -O2 -pthread Benchmarks/c/vcpu_rtt.c -o vcpu_rtt && ./vcpu_rtt [N] [a] [b]
 * (N default 200000, CPUs 0 and 1.)
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static _Alignas(64) _Atomic uint64_t ball;
static _Atomic int ready; /* 1: the answering thread is on CPU b; -1: it could not get there */
static uint64_t rounds = 200000;
static int cpu_b = 1;

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

static void *answer(void *arg) {
  (void)arg;
  if (pin(cpu_b)) {
    atomic_store(&ready, -1);
    return NULL;
  }
  atomic_store(&ready, 1);
  for (uint64_t i = 1; i < 2 * rounds; i += 2) {
    while (atomic_load_explicit(&ball, memory_order_acquire) != i) {}
    atomic_store_explicit(&ball, i + 1, memory_order_release);
  }
  return NULL;
}

int main(int argc, char **argv) {
  char *end[3] = {"", "", ""}; /* each argument must be a number and nothing more */
  if (argc > 1) rounds = argv[1][0] == '-' ? 0 : strtoull(argv[1], &end[0], 10);
  int cpu_a = argc > 2 ? (int)strtol(argv[2], &end[1], 10) : 0;
  if (argc > 3) cpu_b = (int)strtol(argv[3], &end[2], 10);
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  (void)sched_getaffinity(0, sizeof allowed, &allowed);
  if (*end[0] || *end[1] || *end[2] || rounds == 0 || rounds > (UINT64_C(1) << 40) || cpu_a == cpu_b || cpu_b < 0 ||
      cpu_b >= CPU_SETSIZE || !CPU_ISSET(cpu_b, &allowed) || pin(cpu_a)) {
    fprintf(stderr, "usage: vcpu_rtt [N, 1 to 2^40] [cpu a] [cpu b, not a]; both CPUs allowed\n");
    return 2;
  }
  pthread_t t;
  if (pthread_create(&t, NULL, answer, NULL)) return 1;
  while (!atomic_load(&ready)) {}
  if (atomic_load(&ready) < 0) {
    fprintf(stderr, "vcpu_rtt: cannot run on CPU %d\n", cpu_b);
    return 1;
  }
  uint64_t t0 = now_ns();
  for (uint64_t i = 0; i < 2 * rounds; i += 2) {
    atomic_store_explicit(&ball, i + 1, memory_order_release);
    while (atomic_load_explicit(&ball, memory_order_acquire) != i + 2) {}
  }
  uint64_t t1 = now_ns();
  pthread_join(t, NULL);
  printf("rtt %.1f ns (CPUs %d and %d, %llu round trips)\n", (double)(t1 - t0) / (double)rounds,
         cpu_a, cpu_b, (unsigned long long)rounds);
  return 0;
}
