/*
 * hostile_membarrier.c - issue 23's hostile review (third pass): calls.c's fallback when
 * membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) fails at destroy after the registration
 * succeeded (ENOMEM: the kernel allocates a cpumask per call; EPERM/ENOSYS: a seccomp
 * filter installed after the library's first call). lanepool__calls_wait then issues only
 * a local seq_cst fence, while every caller still enters with a relaxed store and a
 * compiler-only fence (lanepool__calls_cheap stays true). A local fence orders nothing
 * on the callers' CPUs: the store-buffer pattern.
 *
 * Part 1 (litmus, no library): the exact fences of the two sides, on two threads.
 *   caller:  inside = 1 (relaxed); atomic_signal_fence(seq_cst); r1 = closed (relaxed)
 *   destroy: closed = 1 (seq_cst); atomic_thread_fence(seq_cst); r2 = inside (seq_cst)
 * r1 == 0 && r2 == 0 is the outcome calls.c relies on never happening: the caller goes
 * on into a pool it saw open while destroy saw no call and frees it. Counted over N
 * rounds.
 * Part 2 (library): with syscall wrapped at link time, the destroy-time membarrier fails
 * (ENOMEM). FAIL if destroy then goes on (returns 0) on a local fence only, callers still
 * on the cheap path (14a7fcc); PASS if it issues MEMBARRIER_CMD_GLOBAL instead (or stops).
 *
 * Build (from the repository root):
 *   cc -std=gnu11 -O2 -g -pthread -Iinclude -ISources/CLanePool -Wl,--wrap=syscall
 *      Tests/c/hostile_membarrier.c Sources/CLanePool/(every .c) -o /tmp/hostile_membarrier
 *   /tmp/hostile_membarrier [rounds, default 2000000]
 * Seen here (2 CPUs, loaded): 91 of 1000000 rounds in part 1, about 5 s.
 */
#define _GNU_SOURCE
#include "lanepool.h"
#include "internal.h"

#include <errno.h>
#include <linux/membarrier.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include "wrap_syscall.h"

long __real_syscall(long n, ...);
static _Atomic int fail_membarrier, membarrier_failed, global_barriers;

long __wrap_syscall(long n, ...) {
  WRAP_SYSCALL_ARGS(n, a);
  if (n == SYS_membarrier && a[0] == MEMBARRIER_CMD_GLOBAL) atomic_fetch_add(&global_barriers, 1);
  if (n == SYS_membarrier && a[0] == MEMBARRIER_CMD_PRIVATE_EXPEDITED &&
      atomic_load(&fail_membarrier)) {
    atomic_fetch_add(&membarrier_failed, 1);
    errno = ENOMEM;
    return -1;
  }
  return __real_syscall(n, a[0], a[1], a[2], a[3], a[4], a[5]);
}

/* ---- part 1 ---------------------------------------------------------------------- */

static _Atomic long go, done_a;      /* spinning starts: both sides within a few ns */
static _Atomic(const void *) inside; /* a caller record's word */
static _Atomic uint32_t closed;      /* what the caller reads to decide it may go on */
static _Atomic int r1;
static long rounds;

static void *caller_side(void *arg) {
  (void)arg;
  for (long i = 1; i <= rounds; i++) {
    while (atomic_load_explicit(&go, memory_order_acquire) != i) {}
    atomic_store_explicit(&inside, (const void *)&closed, memory_order_relaxed);
    atomic_signal_fence(memory_order_seq_cst); /* lanepool__call_enter, cheap path */
    atomic_store_explicit(&r1, (int)atomic_load_explicit(&closed, memory_order_relaxed),
                          memory_order_relaxed);
    atomic_store_explicit(&done_a, i, memory_order_release);
  }
  return NULL;
}

/* Also the coordinator: it starts each round, then after a short varying delay (so
 * that the two sides overlap in some rounds) plays destroy's part. */
static void *destroy_side(void *arg) {
  long *both_zero = arg;
  for (long i = 1; i <= rounds; i++) {
    atomic_store(&inside, NULL);
    atomic_store(&closed, 0);
    atomic_store_explicit(&go, i, memory_order_release);
    for (volatile long d = (i * 7919) % 64; d > 0; d--) {}
    atomic_store_explicit(&closed, 1, memory_order_seq_cst);
    atomic_thread_fence(memory_order_seq_cst); /* lanepool__calls_wait's fallback */
    int seen = atomic_load_explicit(&inside, memory_order_seq_cst) != NULL;
    while (atomic_load_explicit(&done_a, memory_order_acquire) != i) {}
    if (!seen && atomic_load(&r1) == 0) (*both_zero)++;
  }
  return NULL;
}

int main(int argc, char **argv) {
  rounds = argc > 1 ? atol(argv[1]) : 2000000;
  long both_zero = 0;
  pthread_t a, b;
  pthread_create(&a, NULL, caller_side, NULL);
  pthread_create(&b, NULL, destroy_side, &both_zero);
  pthread_join(a, NULL);
  pthread_join(b, NULL);
  printf("part 1: %ld of %ld rounds: the caller saw the pool open AND destroy saw no call "
         "in flight\n",
         both_zero, rounds);

  /* part 2 */
  lanepool_config_t cfg;
  lanepool_config_init(&cfg);
  cfg.lanes_per_band = 1;
  lanepool_t *pool;
  if (lanepool_create(&cfg, &pool)) return 2;
  lanepool_lane_t *lane;
  if (lanepool_get_lane(pool, LANEPOOL_QOS_DEFAULT, 0, &lane)) return 2;
  (void)lanepool_lane_async(lane, (lanepool_fn)free, NULL); /* registers this thread */
  printf("part 2: membarrier registered: %d\n", (int)lanepool__calls_cheap);
  atomic_store(&fail_membarrier, 1);
  int rc = lanepool_destroy(pool);
  printf("part 2: destroy with the membarrier failing (%d times): %d; calls still cheap: %d\n",
         atomic_load(&membarrier_failed), rc, (int)lanepool__calls_cheap);
  printf("part 2: MEMBARRIER_CMD_GLOBAL issued instead: %d\n", atomic_load(&global_barriers));
  /* Sound: a global barrier instead (or a stop). Unsound: a local fence only. */
  bool bad = lanepool__calls_cheap && atomic_load(&membarrier_failed) > 0 && rc == 0 &&
             atomic_load(&global_barriers) == 0;
  printf("%s\n", bad ? (both_zero ? "FAIL: destroy relied on a local fence that this machine "
                                    "shows does not order the callers' relaxed stores"
                                  : "FAIL (part 2): destroy went on on a local fence")
                     : "PASS");
  return bad ? 1 : 0;
}
