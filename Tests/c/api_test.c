/*
 * api_test.c - proves the C API is usable from plain C, without Swift.
 * Build: cc -std=c11 -O2 -pthread -Iinclude Tests/c/api_test.c Sources/CLanePool/(all).c
 * (.ci/run does this, also under valgrind and with sanitizers). Prints
 * "N passed, 0 failed" and exits 0 when every check holds.
 */
#define _GNU_SOURCE
#include "lanepool.h"
#include "check.h"
#include "procfs.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>


static const lanepool_qos_t all_qos[LANEPOOL_BAND_COUNT] = {
    LANEPOOL_QOS_USER_INTERACTIVE, LANEPOOL_QOS_USER_INITIATED, LANEPOOL_QOS_DEFAULT,
    LANEPOOL_QOS_UTILITY, LANEPOOL_QOS_BACKGROUND};

/* spin: false, no lane spins idle (it parks at once when its queue is empty). */
static lanepool_t *make_pool_spin(const char *name, uint32_t lanes, uint32_t ring, bool spin) {
  lanepool_config_t cfg;
  lanepool_config_init(&cfg);
  cfg.name = name;
  cfg.lanes_per_band = lanes;
  cfg.ring_capacity = ring;
  if (!spin)
    for (int b = 0; b < LANEPOOL_BAND_COUNT; b++) cfg.spin_ns[b] = 0;
  lanepool_t *p = NULL;
  int rc = lanepool_create(&cfg, &p);
  if (rc) {
    fprintf(stderr, "lanepool_create(%s): %s\n", name, strerror(rc));
    exit(1);
  }
  return p;
}

static lanepool_t *make_pool(const char *name, uint32_t lanes, uint32_t ring) {
  return make_pool_spin(name, lanes, ring, true);
}

/* Threads of this process whose name starts with `prefix`. */
static int count_threads(const char *prefix) {
  DIR *d = opendir("/proc/self/task");
  if (!d) return -1;
  int n = 0;
  pid_t tid;
  char comm[32];
  while (next_thread(d, &tid, comm, sizeof comm))
    if (strncmp(comm, prefix, strlen(prefix)) == 0) n++;
  closedir(d);
  return n;
}

/* ---- FIFO per lane with 4 producers ---------------------------------------- */

enum { PRODUCERS = 4, PER_PRODUCER = 100000 };

typedef struct {
  uint32_t last[PRODUCERS]; /* touched only by the one lane: no synchronisation */
  uint64_t ran;
  uint64_t out_of_order;
} fifo_state;

static fifo_state fifo;
static _Atomic uint32_t fifo_slots[PRODUCERS * PER_PRODUCER];

static void fifo_task(void *ctx) {
  uintptr_t v = (uintptr_t)ctx;
  uint32_t producer = (uint32_t)(v >> 32), seq = (uint32_t)v;
  if (seq != fifo.last[producer] + 1) fifo.out_of_order++;
  fifo.last[producer] = seq;
  fifo.ran++;
  atomic_fetch_add(&fifo_slots[producer * PER_PRODUCER + seq - 1], 1);
}

typedef struct {
  lanepool_lane_t *lane;
  uint32_t producer;
} producer_arg;

static void *fifo_producer(void *arg) {
  producer_arg *a = arg;
  for (uint32_t i = 1; i <= PER_PRODUCER; i++) {
    uintptr_t v = ((uintptr_t)a->producer << 32) | i;
    if (lanepool_lane_async(a->lane, fifo_task, (void *)v) != 0) abort();
  }
  return NULL;
}

static void test_fifo(void) {
  /* A small ring forces the overflow list into play, which is where order is hard. */
  lanepool_t *p = make_pool("cfifo", 1, 64);
  lanepool_lane_t *lane;
  CHECK_RC(lanepool_get_lane(p, LANEPOOL_QOS_DEFAULT, 0, &lane), 0);
  pthread_t t[PRODUCERS];
  producer_arg args[PRODUCERS];
  for (uint32_t i = 0; i < PRODUCERS; i++) {
    args[i] = (producer_arg){lane, i};
    pthread_create(&t[i], NULL, fifo_producer, &args[i]);
  }
  for (int i = 0; i < PRODUCERS; i++) pthread_join(t[i], NULL);
  lanepool_lane_info_t info;
  CHECK_RC(lanepool_destroy(p), 0); /* drains */
  (void)info;
  CHECK(fifo.ran == (uint64_t)PRODUCERS * PER_PRODUCER);
  CHECK(fifo.out_of_order == 0);
  int once = 1;
  for (size_t i = 0; i < PRODUCERS * PER_PRODUCER; i++)
    if (atomic_load(&fifo_slots[i]) != 1) once = 0;
  CHECK(once);
}

/* ---- no loss across the pool ------------------------------------------------ */

static _Atomic uint64_t counted;
static void count_task(void *ctx) {
  (void)ctx;
  atomic_fetch_add_explicit(&counted, 1, memory_order_relaxed);
}

typedef struct {
  lanepool_t *pool;
  uint64_t accepted;
  uint32_t seed;
} spread_arg;

static void *spread_producer(void *arg) {
  spread_arg *a = arg;
  for (int i = 0; i < 250000; i++) {
    a->seed = a->seed * 1103515245u + 12345u;
    lanepool_qos_t q = all_qos[(a->seed >> 16) % LANEPOOL_BAND_COUNT];
    int rc;
    switch ((a->seed >> 8) % 3) {
    case 0:
      rc = lanepool_async(a->pool, q, count_task, NULL);
      break;
    case 1: {
      lanepool_lane_t *l;
      lanepool_next_lane(a->pool, q, &l);
      rc = lanepool_lane_async(l, count_task, NULL);
      break;
    }
    default: {
      lanepool_lane_t *l;
      lanepool_lane_for_key(a->pool, q, a->seed, &l);
      rc = lanepool_lane_async(l, count_task, NULL);
    }
    }
    if (rc == 0) a->accepted++;
  }
  return NULL;
}

static void test_no_loss(void) {
  lanepool_t *p = make_pool("closs", 2, 0);
  pthread_t t[4];
  spread_arg args[4];
  for (int i = 0; i < 4; i++) {
    args[i] = (spread_arg){p, 0, (uint32_t)i * 7919u + 1};
    pthread_create(&t[i], NULL, spread_producer, &args[i]);
  }
  uint64_t accepted = 0;
  for (int i = 0; i < 4; i++) {
    pthread_join(t[i], NULL);
    accepted += args[i].accepted;
  }
  CHECK_RC(lanepool_destroy(p), 0);
  CHECK(accepted == 1000000);
  CHECK(atomic_load(&counted) == accepted);
}

/* ---- threads: count, names, gone after shutdown ------------------------------ */

/* Three lanes per band and each band's rescue lane (lane.c, "The rescue lane"), which
 * runs at its band's nice like the band's lanes. */
static void test_threads(void) {
  lanepool_t *p = make_pool("cthreads", 3, 0);
  CHECK(count_threads("cthreads-") == 20);
  CHECK(count_threads("cthreads-ui-") == 4);
  CHECK(count_threads("cthreads-bg-2") == 1);
  static const char *const bands[] = {"ui", "in", "df", "ut", "bg"};
  static const lanepool_qos_t qos[] = {LANEPOOL_QOS_USER_INTERACTIVE, LANEPOOL_QOS_USER_INITIATED,
                                       LANEPOOL_QOS_DEFAULT, LANEPOOL_QOS_UTILITY,
                                       LANEPOOL_QOS_BACKGROUND};
  for (int b = 0; b < 5; b++) {
    char name[32];
    snprintf(name, sizeof name, "cthreads-%s-r", bands[b]);
    pid_t tid = thread_named(name);
    CHECK(tid > 0);
    lanepool_lane_t *lane = NULL;
    lanepool_lane_info_t info;
    CHECK_RC(lanepool_get_lane(p, qos[b], 0, &lane), 0);
    CHECK_RC(lanepool_lane_info(lane, &info), 0);
    errno = 0;
    int nice = getpriority(PRIO_PROCESS, (id_t)tid);
    CHECK(errno == 0 && nice == info.nice.got);
  }
  CHECK_RC(lanepool_shutdown(p, LANEPOOL_SHUTDOWN_DRAIN, NULL, NULL), 0);
  /* Joined; a joined thread may stay listed in /proc/self/task a moment longer. */
  for (int i = 0; i < 5000 && count_threads("cthreads-") != 0; i++) usleep(1000);
  CHECK(count_threads("cthreads-") == 0);
  CHECK_RC(lanepool_destroy(p), 0);
}

/* The rescue lanes keep to the pool's CPUs: with CPU_LIST placement, the listed CPUs;
 * with none, the creating thread's allowed set, as the band lanes. */
static int affinity_of(pid_t tid, cpu_set_t *set) {
  CPU_ZERO(set);
  return sched_getaffinity(tid, sizeof *set, set);
}

static void test_rescue_lane_placement(void) {
  cpu_set_t mine, set;
  CHECK(sched_getaffinity(0, sizeof mine, &mine) == 0);
  int first = -1;
  for (int c = 0; c < CPU_SETSIZE && first < 0; c++)
    if (CPU_ISSET(c, &mine)) first = c;
  CHECK(first >= 0);
  lanepool_config_t cfg;
  lanepool_config_init(&cfg);
  cfg.name = "crplace";
  cfg.lanes_per_band = 2;
  cfg.placement = LANEPOOL_PLACEMENT_CPU_LIST;
  int cpus[1] = {first};
  cfg.cpus = cpus;
  cfg.cpu_count = 1;
  lanepool_t *p = NULL;
  CHECK_RC(lanepool_create(&cfg, &p), 0);
  static const char *const bands[] = {"ui", "in", "df", "ut", "bg"};
  for (int b = 0; b < 5; b++) {
    char name[32];
    snprintf(name, sizeof name, "crplace-%s-r", bands[b]);
    pid_t tid = thread_named(name);
    CHECK(tid > 0 && affinity_of(tid, &set) == 0);
    CHECK(CPU_COUNT(&set) == 1 && CPU_ISSET(first, &set));
  }
  CHECK_RC(lanepool_shutdown(p, LANEPOOL_SHUTDOWN_DRAIN, NULL, NULL), 0);
  CHECK_RC(lanepool_destroy(p), 0);
  p = make_pool("crfloat", 1, 0);
  pid_t tid = thread_named("crfloat-df-r");
  CHECK(tid > 0 && affinity_of(tid, &set) == 0);
  CHECK(CPU_EQUAL(&set, &mine));
  CHECK_RC(lanepool_shutdown(p, LANEPOOL_SHUTDOWN_DRAIN, NULL, NULL), 0);
  CHECK_RC(lanepool_destroy(p), 0);
}

/* ---- drain vs cancel --------------------------------------------------------- */

static _Atomic uint64_t ran_slow, discarded;
static void slow_task(void *ctx) {
  (void)ctx;
  usleep(50);
  atomic_fetch_add(&ran_slow, 1);
}
static void on_discard(lanepool_fn fn, void *ctx, void *arg) {
  (void)ctx;
  if (fn == slow_task && arg == (void *)&discarded) atomic_fetch_add(&discarded, 1);
}

static void test_cancel(void) {
  lanepool_t *p = make_pool("ccancel", 2, 16);
  uint64_t accepted = 0;
  for (int i = 0; i < 5000; i++)
    if (lanepool_async(p, all_qos[i % 5], slow_task, NULL) == 0) accepted++;
  CHECK_RC(lanepool_shutdown(p, LANEPOOL_SHUTDOWN_CANCEL, NULL, NULL), EINVAL);
  CHECK_RC(lanepool_shutdown(p, LANEPOOL_SHUTDOWN_CANCEL, on_discard, &discarded), 0);
  CHECK(accepted == 5000);
  CHECK(atomic_load(&ran_slow) + atomic_load(&discarded) == accepted);
  CHECK(atomic_load(&discarded) > 0); /* 5000 x 50 us cannot all have run yet */
  CHECK_RC(lanepool_async(p, LANEPOOL_QOS_DEFAULT, slow_task, NULL), ESHUTDOWN);
  CHECK_RC(lanepool_shutdown(p, LANEPOOL_SHUTDOWN_DRAIN, NULL, NULL), EALREADY);
  CHECK_RC(lanepool_destroy(p), 0);

  atomic_store(&ran_slow, 0);
  p = make_pool("cdrain", 2, 16);
  for (int i = 0; i < 2000; i++) lanepool_async(p, all_qos[i % 5], slow_task, NULL);
  CHECK_RC(lanepool_shutdown(p, LANEPOOL_SHUTDOWN_DRAIN, NULL, NULL), 0);
  CHECK(atomic_load(&ran_slow) == 2000);
  CHECK_RC(lanepool_destroy(p), 0);
}

/* ---- two-argument tasks (lanepool_lane_async2) -------------------------------- */

/* 4 producers, each interleaving single and batch submits of both kinds onto one lane
 * with a 64-cell ring (so most go through the overflow list): one FIFO per producer,
 * every task exactly once, and each two-argument task gets the a and b it was given. */
enum { MIX_PRODUCERS = 4, MIX_PER_PRODUCER = 60000 };

static struct {
  uint32_t last[MIX_PRODUCERS]; /* touched only by the one lane */
  uint64_t ran, ran2, out_of_order, bad_b;
} mix;
static _Atomic uint32_t mix_slots[MIX_PRODUCERS * MIX_PER_PRODUCER];
static char mix_b[MIX_PRODUCERS]; /* b of producer i's tasks is &mix_b[i] */

static void mix_record(uintptr_t v) {
  uint32_t producer = (uint32_t)(v >> 32), seq = (uint32_t)v;
  if (seq != mix.last[producer] + 1) mix.out_of_order++;
  mix.last[producer] = seq;
  mix.ran++;
  atomic_fetch_add(&mix_slots[producer * MIX_PER_PRODUCER + seq - 1], 1);
}
static void mix_task(void *ctx) { mix_record((uintptr_t)ctx); }
static void mix_task2(void *a, void *b) {
  uintptr_t v = (uintptr_t)a;
  if (b != &mix_b[v >> 32]) mix.bad_b++;
  mix.ran2++;
  mix_record(v);
}

static void *mix_producer(void *arg) {
  producer_arg *pa = arg;
  uint32_t i = 1;
  while (i <= MIX_PER_PRODUCER) {
    uintptr_t base = (uintptr_t)pa->producer << 32;
    void *b = &mix_b[pa->producer];
    int rc = 0;
    switch (i % 4) {
    case 0:
      rc = lanepool_lane_async(pa->lane, mix_task, (void *)(base | i));
      i++;
      break;
    case 1:
      rc = lanepool_lane_async2(pa->lane, mix_task2, (void *)(base | i), b);
      i++;
      break;
    case 2:
      rc = lanepool_lane_async2_flags(pa->lane, mix_task2, (void *)(base | i), b, 0);
      i++;
      break;
    default: { /* a batch of up to 3 two-argument tasks, then one of up to 2 classic ones */
      void *as[3], *bs[3], *cs[2];
      size_t n = 0, got = 0;
      for (; n < 3 && i + n <= MIX_PER_PRODUCER; n++) {
        as[n] = (void *)(base | (i + n));
        bs[n] = b;
      }
      rc = lanepool_lane_async2_many(pa->lane, mix_task2, as, bs, n, &got);
      if (rc || got != n) abort();
      i += (uint32_t)n;
      for (n = 0; n < 2 && i + n <= MIX_PER_PRODUCER; n++) cs[n] = (void *)(base | (i + n));
      rc = lanepool_lane_async_many(pa->lane, mix_task, cs, n, &got);
      if (got != n) abort();
      i += (uint32_t)n;
    }
    }
    if (rc) abort();
  }
  return NULL;
}

static void test_async2_fifo(void) {
  current_test = "async2_fifo";
  lanepool_t *p = make_pool("cmix", 1, 64);
  lanepool_lane_t *lane;
  CHECK_RC(lanepool_get_lane(p, LANEPOOL_QOS_DEFAULT, 0, &lane), 0);
  pthread_t t[MIX_PRODUCERS];
  producer_arg args[MIX_PRODUCERS];
  for (uint32_t i = 0; i < MIX_PRODUCERS; i++) {
    args[i] = (producer_arg){lane, i};
    pthread_create(&t[i], NULL, mix_producer, &args[i]);
  }
  for (int i = 0; i < MIX_PRODUCERS; i++) pthread_join(t[i], NULL);
  lanepool_lane_info_t info;
  CHECK_RC(lanepool_lane_info(lane, &info), 0);
  CHECK(info.overflowed > 0);       /* the overflow list carried some of them */
  CHECK_RC(lanepool_destroy(p), 0); /* drains */
  CHECK(mix.ran == (uint64_t)MIX_PRODUCERS * MIX_PER_PRODUCER);
  CHECK(mix.ran2 > mix.ran / 3); /* both kinds were in the mix */
  CHECK(mix.out_of_order == 0);
  CHECK(mix.bad_b == 0);
  int once = 1;
  for (size_t i = 0; i < MIX_PRODUCERS * MIX_PER_PRODUCER; i++)
    if (atomic_load(&mix_slots[i]) != 1) once = 0;
  CHECK(once);
  current_test = "";
}

/* A cancelling shutdown hands queued two-argument tasks to the discard callback as the
 * header says: fn converted to lanepool_fn, ctx -> lanepool_task2_t {a, b}, in FIFO
 * order with the one-argument tasks, through the ring and the overflow list alike. */
enum { CANCEL2_TASKS = 40 };
static lanepool_t *cancel2_pool;
static _Atomic int cancel2_ran, cancel2_blocking;
static int cancel2_seen, cancel2_bad;
static int cancel2_order[CANCEL2_TASKS];
static char cancel2_b;

static void cancel2_block(void *ctx) { /* runs until the pool is shutting down */
  (void)ctx;
  atomic_store(&cancel2_blocking, 1);
  lanepool_info_t info;
  do {
    usleep(100);
    lanepool_info(cancel2_pool, &info);
  } while (!info.shut_down);
}
static void cancel2_task(void *ctx) {
  (void)ctx;
  atomic_fetch_add(&cancel2_ran, 1);
}
static void cancel2_task2(void *a, void *b) {
  (void)a, (void)b;
  atomic_fetch_add(&cancel2_ran, 1);
}
static void cancel2_discard(lanepool_fn fn, void *ctx, void *arg) {
  if (arg != &cancel2_seen || cancel2_seen >= CANCEL2_TASKS) {
    cancel2_bad++;
    return;
  }
  int i = -1;
  if (fn == (lanepool_fn)(void (*)(void))cancel2_task2) {
    const lanepool_task2_t *t = ctx;
    i = (int)(uintptr_t)t->a;
    if (t->b != &cancel2_b || i % 2 == 0 || (void *)t == t->a) cancel2_bad++;
  } else if (fn == cancel2_task) {
    i = (int)(uintptr_t)ctx;
    if (i % 2 != 0) cancel2_bad++;
  } else {
    cancel2_bad++;
  }
  cancel2_order[cancel2_seen++] = i;
}

static void test_async2_cancel(void) {
  current_test = "async2_cancel";
  cancel2_pool = make_pool("ccancel2", 1, 4); /* 4 cells: the rest overflows */
  lanepool_lane_t *lane;
  CHECK_RC(lanepool_get_lane(cancel2_pool, LANEPOOL_QOS_DEFAULT, 0, &lane), 0);
  CHECK_RC(lanepool_lane_async(lane, cancel2_block, NULL), 0);
  while (!atomic_load(&cancel2_blocking)) usleep(100); /* the lane is in it: nothing else runs */
  for (int i = 0; i < CANCEL2_TASKS; i++) {
    if (i % 2)
      CHECK_RC(lanepool_lane_async2(lane, cancel2_task2, (void *)(uintptr_t)i, &cancel2_b), 0);
    else
      CHECK_RC(lanepool_lane_async(lane, cancel2_task, (void *)(uintptr_t)i), 0);
  }
  CHECK_RC(
      lanepool_shutdown(cancel2_pool, LANEPOOL_SHUTDOWN_CANCEL, cancel2_discard, &cancel2_seen), 0);
  CHECK(atomic_load(&cancel2_ran) == 0);
  CHECK(cancel2_seen == CANCEL2_TASKS);
  CHECK(cancel2_bad == 0);
  int in_order = 1;
  for (int i = 0; i < CANCEL2_TASKS; i++)
    if (cancel2_order[i] != i) in_order = 0;
  CHECK(in_order);
  CHECK_RC(lanepool_lane_async2(lane, cancel2_task2, NULL, &cancel2_b), ESHUTDOWN);
  CHECK_RC(lanepool_async2(cancel2_pool, LANEPOOL_QOS_DEFAULT, cancel2_task2, NULL, &cancel2_b),
           ESHUTDOWN);
  CHECK_RC(lanepool_destroy(cancel2_pool), 0);
  current_test = "";
}

static _Atomic int pool2_ran;
static void pool2_task(void *a, void *b) {
  if (a == NULL && b == &pool2_ran) atomic_fetch_add(&pool2_ran, 1);
}
static void test_async2_bad_input(void) {
  current_test = "async2_bad_input";
  lanepool_t *p = make_pool("cbad2", 1, 0);
  lanepool_lane_t *lane;
  CHECK_RC(lanepool_get_lane(p, LANEPOOL_QOS_DEFAULT, 0, &lane), 0);
  char b;
  CHECK_RC(lanepool_lane_async2(NULL, pool2_task, NULL, &b), EINVAL);
  CHECK_RC(lanepool_lane_async2(lane, NULL, NULL, &b), EINVAL);
  CHECK_RC(lanepool_lane_async2(lane, pool2_task, &b, NULL), EINVAL); /* b NULL */
  CHECK_RC(lanepool_lane_async2_flags(lane, pool2_task, NULL, &b, 0x80), EINVAL);
  CHECK_RC(lanepool_lane_async2_flags(lane, pool2_task, NULL, NULL, 0), EINVAL);
  CHECK_RC(lanepool_async2(NULL, LANEPOOL_QOS_DEFAULT, pool2_task, NULL, &b), EINVAL);
  CHECK_RC(lanepool_async2(p, (lanepool_qos_t)0, pool2_task, NULL, &b), EINVAL);
  CHECK_RC(lanepool_async2(p, LANEPOOL_QOS_DEFAULT, NULL, NULL, &b), EINVAL);
  CHECK_RC(lanepool_async2(p, LANEPOOL_QOS_DEFAULT, pool2_task, &b, NULL), EINVAL);
  void *as[3] = {NULL, NULL, NULL}, *bs[3] = {&pool2_ran, NULL, &pool2_ran};
  size_t got = 7;
  CHECK_RC(lanepool_lane_async2_many(lane, pool2_task, as, bs, 3, &got), EINVAL);
  CHECK(got == 0); /* a NULL b anywhere: nothing accepted */
  CHECK_RC(lanepool_lane_async2_many(lane, pool2_task, NULL, bs, 1, &got), EINVAL);
  CHECK_RC(lanepool_lane_async2_many(lane, pool2_task, as, NULL, 1, &got), EINVAL);
  CHECK_RC(lanepool_lane_async2_many(lane, NULL, as, bs, 1, &got), EINVAL);
  CHECK_RC(lanepool_lane_async2_many(lane, pool2_task, NULL, NULL, 0, &got), 0);
  CHECK(got == 0);
  /* a may be NULL; the band-level submit runs it too */
  CHECK_RC(lanepool_async2(p, LANEPOOL_QOS_DEFAULT, pool2_task, NULL, &pool2_ran), 0);
  CHECK_RC(lanepool_lane_async2(lane, pool2_task, NULL, &pool2_ran), 0);
  CHECK_RC(lanepool_destroy(p), 0);
  CHECK(atomic_load(&pool2_ran) == 2); /* the refused ones never ran */
  current_test = "";
}

/* ---- bad input --------------------------------------------------------------- */

static void noop(void *ctx) { (void)ctx; }

static lanepool_t *self_pool;
static _Atomic int self_rc[3];
static void destroy_self(void *ctx) {
  (void)ctx;
  lanepool_lane_t *me;
  atomic_store(&self_rc[0], lanepool_destroy(self_pool));
  atomic_store(&self_rc[1], lanepool_shutdown(self_pool, LANEPOOL_SHUTDOWN_DRAIN, NULL, NULL));
  lanepool_current_lane(&me);
  atomic_store(&self_rc[2], lanepool_lane_sync(me, noop, NULL));
}

static void test_bad_input(void) {
  lanepool_config_t cfg;
  lanepool_t *p = NULL;
  lanepool_lane_t *lane = NULL;
  CHECK_RC(lanepool_config_init(NULL), EINVAL);
  lanepool_config_init(&cfg);
  CHECK_RC(lanepool_create(NULL, &p), EINVAL);
  CHECK_RC(lanepool_create(&cfg, NULL), EINVAL);
  cfg.lanes_per_band = 0;
  CHECK_RC(lanepool_create(&cfg, &p), EINVAL);
  cfg.lanes_per_band = LANEPOOL_MAX_LANES_PER_BAND + 1;
  CHECK_RC(lanepool_create(&cfg, &p), EINVAL);
  cfg.lanes_per_band = 1;
  cfg.ring_capacity = 1000; /* not a power of two */
  CHECK_RC(lanepool_create(&cfg, &p), EINVAL);
  cfg.ring_capacity = 0;
  cfg.name = "";
  CHECK_RC(lanepool_create(&cfg, &p), EINVAL);
  CHECK(p == NULL);

  p = make_pool("cbad", 1, 0);
  CHECK_RC(lanepool_get_lane(p, (lanepool_qos_t)0x42, 0, &lane), EINVAL);
  CHECK_RC(lanepool_get_lane(p, LANEPOOL_QOS_DEFAULT, 1, &lane), EINVAL);
  CHECK_RC(lanepool_next_lane(NULL, LANEPOOL_QOS_DEFAULT, &lane), EINVAL);
  CHECK_RC(lanepool_async(p, (lanepool_qos_t)0, noop, NULL), EINVAL);
  CHECK_RC(lanepool_async(NULL, LANEPOOL_QOS_DEFAULT, noop, NULL), EINVAL);
  CHECK_RC(lanepool_async(p, LANEPOOL_QOS_DEFAULT, NULL, NULL), EINVAL);
  CHECK_RC(lanepool_get_lane(p, LANEPOOL_QOS_DEFAULT, 0, &lane), 0);
  CHECK_RC(lanepool_lane_async(lane, NULL, NULL), EINVAL);
  CHECK_RC(lanepool_lane_async(NULL, noop, NULL), EINVAL);
  CHECK_RC(lanepool_current_lane(&lane), ESRCH);

  self_pool = p;
  CHECK_RC(lanepool_get_lane(p, LANEPOOL_QOS_DEFAULT, 0, &lane), 0);
  CHECK_RC(lanepool_lane_sync(lane, destroy_self, NULL), 0);
  CHECK(atomic_load(&self_rc[0]) == EDEADLK);
  CHECK(atomic_load(&self_rc[1]) == EDEADLK);
  CHECK(atomic_load(&self_rc[2]) == EDEADLK);

  lanepool_t *def = NULL;
  CHECK_RC(lanepool_default(&def), 0);
  CHECK_RC(lanepool_destroy(def), EPERM);
  CHECK_RC(lanepool_shutdown(def, LANEPOOL_SHUTDOWN_DRAIN, NULL, NULL), EPERM);

  CHECK_RC(lanepool_shutdown(p, 7, NULL, NULL), EINVAL);
  CHECK_RC(lanepool_destroy(p), 0);
  CHECK_RC(lanepool_destroy(p), EINVAL); /* twice */
  CHECK_RC(lanepool_destroy(NULL), EINVAL);
}

/* Every caller-allocated struct starts with struct_size; a size the library does not
 * accept is EINVAL before anything is read or written. */
static void test_struct_size(void) {
  current_test = "struct_size";
  static const uint32_t wrong[] = {0, 4, 8, 1000000};
  /* config: lanepool_config_init sets it; create, check and default_configure read it. */
  lanepool_config_t cfg, blank;
  memset(&cfg, 0xab, sizeof cfg);
  memcpy(&blank, &cfg, sizeof cfg);
  for (unsigned i = 0; i < sizeof wrong / sizeof wrong[0]; i++) {
    CHECK_RC(lanepool_config_init_sized(&cfg, wrong[i]), EINVAL);
    CHECK(memcmp(&cfg, &blank, sizeof cfg) == 0); /* nothing written */
  }
  CHECK_RC(lanepool_config_init_sized(&cfg, (uint32_t)sizeof cfg + 8), EINVAL);
  CHECK_RC(lanepool_config_init_sized(&cfg, (uint32_t)sizeof cfg - 8), EINVAL);
  CHECK_RC(lanepool_config_init(&cfg), 0);
  CHECK(cfg.struct_size == sizeof cfg);
  cfg.lanes_per_band = 1;
  const char *field = NULL;
  CHECK_RC(lanepool_config_check(&cfg, &field), 0);
  lanepool_t *p = NULL;
  for (unsigned i = 0; i < sizeof wrong / sizeof wrong[0]; i++) {
    cfg.struct_size = wrong[i];
    field = NULL;
    CHECK_RC(lanepool_config_check(&cfg, &field), EINVAL);
    CHECK(field && strcmp(field, "struct_size") == 0);
    CHECK_RC(lanepool_create(&cfg, &p), EINVAL);
    CHECK(p == NULL);
    CHECK_RC(lanepool_default_configure(&cfg), EINVAL);
  }
  cfg.struct_size = (uint32_t)sizeof cfg;
  CHECK_RC(lanepool_create(&cfg, &p), 0);

  /* The info structs: the inline wrappers set the size; the *_sized functions read it. */
  lanepool_info_t info;
  memset(&info, 0xcd, sizeof info);
  CHECK_RC(lanepool_info(p, &info), 0);
  CHECK(info.struct_size == sizeof info && info.lanes_per_band == 1);
  lanepool_lane_t *lane;
  CHECK_RC(lanepool_get_lane(p, LANEPOOL_QOS_UTILITY, 0, &lane), 0);
  lanepool_lane_info_t li;
  CHECK_RC(lanepool_lane_info(lane, &li), 0);
  CHECK(li.struct_size == sizeof li && li.qos == LANEPOOL_QOS_UTILITY && li.running == 1);
  lanepool_band_policy_t pol;
  CHECK_RC(lanepool_default_policy(LANEPOOL_QOS_UTILITY, &pol), 0);
  CHECK(pol.struct_size == sizeof pol && pol.sched == LANEPOOL_SCHED_BATCH && pol.nice == 4);
  for (unsigned i = 0; i < sizeof wrong / sizeof wrong[0]; i++) {
    memset(&info, 0xcd, sizeof info);
    info.struct_size = wrong[i];
    lanepool_info_t before = info;
    CHECK_RC(lanepool_info_sized(p, &info), EINVAL);
    CHECK(memcmp(&info, &before, sizeof info) == 0);
    memset(&li, 0xcd, sizeof li);
    li.struct_size = wrong[i];
    lanepool_lane_info_t li_before = li;
    CHECK_RC(lanepool_lane_info_sized(lane, &li), EINVAL);
    CHECK(memcmp(&li, &li_before, sizeof li) == 0);
    memset(&pol, 0xcd, sizeof pol);
    pol.struct_size = wrong[i];
    lanepool_band_policy_t pol_before = pol;
    CHECK_RC(lanepool_default_policy_sized(LANEPOOL_QOS_UTILITY, &pol), EINVAL);
    CHECK(memcmp(&pol, &pol_before, sizeof pol) == 0);
  }
  CHECK_RC(lanepool_info(p, NULL), EINVAL);
  CHECK_RC(lanepool_lane_info(lane, NULL), EINVAL);
  CHECK_RC(lanepool_default_policy(LANEPOOL_QOS_UTILITY, NULL), EINVAL);
  CHECK_RC(lanepool_destroy(p), 0);
  current_test = "";
}

/* ---- the default pool's log callback runs with no library lock held ----------- */

/* The log line comes from a refused priority: nice -20 needs privilege, so the child
 * drops root first. The callback calls lanepool_default: it must get the pool, not
 * wait forever for the default pool's lock (issue 23, defect 7). */
static _Atomic(lanepool_t *) logged_default;
static atomic_int log_calls, log_default_rc = -1;
static void log_calls_default(lanepool_log_level_t level, const char *msg, void *arg) {
  (void)level;
  (void)msg;
  (void)arg;
  lanepool_t *p = NULL;
  atomic_store(&log_default_rc, lanepool_default(&p));
  atomic_store(&logged_default, p);
  atomic_fetch_add(&log_calls, 1);
}

static int default_log_child(void) {
  if (getuid() == 0 && setuid(65534) != 0) return 10;
  lanepool_config_t cfg;
  lanepool_config_init(&cfg);
  cfg.lanes_per_band = 1;
  cfg.policy[2].nice = -20; /* refused without CAP_SYS_NICE: one log line */
  cfg.log = log_calls_default;
  if (lanepool_default_configure(&cfg)) return 11;
  lanepool_t *p = NULL;
  if (lanepool_default(&p)) return 12;
  if (atomic_load(&log_calls) == 0) return 13;      /* no line logged */
  if (atomic_load(&log_default_rc) != 0) return 14; /* lanepool_default failed */
  if (atomic_load(&logged_default) != p) return 15; /* another pool */
  return 0;
}

static void test_default_log_callback_may_use_the_default_pool(void) {
  current_test = "default_log_callback_may_use_the_default_pool";
  pid_t pid = fork();
  if (pid == 0) _exit(default_log_child());
  CHECK(pid > 0);
  if (pid <= 0) return;
  int st = 0;
  pid_t got = 0;
  for (int i = 0; i < 3000 && (got = waitpid(pid, &st, WNOHANG)) == 0; i++) { /* 30 s cap */
    struct timespec ts = {0, 10000000};
    nanosleep(&ts, NULL);
  }
  if (got == 0) {
    fprintf(stderr, "[%s] the child hangs (deadlock in the log callback)\n", current_test);
    kill(pid, SIGKILL);
    waitpid(pid, &st, 0);
  }
  CHECK(got == pid);
  CHECK(got == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
  if (got == pid && WIFEXITED(st) && WEXITSTATUS(st) != 0)
    fprintf(stderr, "[%s] child status %d\n", current_test, WEXITSTATUS(st));
  current_test = "";
}

/* lanepool_next_other_lane: never the caller's own lane while its band has another;
 * its own with one lane per band; any lane of the band from a thread that is no lane. */
typedef struct {
  lanepool_t *pool;
  lanepool_lane_t *own; /* seen by the task: lanepool_current_lane */
  int own_returned;     /* picks of the own band that gave the caller's lane */
  int other_lanes_seen; /* distinct lanes among those picks */
  int other_band_ok;    /* every pick of another band was a lane of that band */
  atomic_int done;
} other_pick;

static void pick_from_a_lane(void *ctx) {
  other_pick *o = ctx;
  lanepool_current_lane(&o->own);
  lanepool_lane_t *seen[8] = {0};
  o->other_band_ok = 1;
  for (int i = 0; i < 300; i++) {
    lanepool_lane_t *l = NULL;
    if (lanepool_next_other_lane(o->pool, LANEPOOL_QOS_DEFAULT, &l) != 0 || !l) continue;
    if (l == o->own) o->own_returned++;
    int k = 0;
    while (k < 8 && seen[k] && seen[k] != l) k++;
    if (k < 8 && !seen[k]) {
      seen[k] = l;
      o->other_lanes_seen++;
    }
    lanepool_qos_t q;
    uint32_t index;
    if (lanepool_next_other_lane(o->pool, LANEPOOL_QOS_UTILITY, &l) != 0 ||
        lanepool_lane_position(l, &q, &index) != 0 || q != LANEPOOL_QOS_UTILITY)
      o->other_band_ok = 0;
  }
  atomic_store(&o->done, 1);
}

static void run_pick(other_pick *o, lanepool_lane_t *on) {
  CHECK_RC(lanepool_lane_async(on, pick_from_a_lane, o), 0);
  for (int i = 0; i < 30000 && !atomic_load(&o->done); i++) usleep(1000);
  CHECK(atomic_load(&o->done));
}

static void test_next_other_lane(void) {
  /* No lane spins idle: a spinning lane is handed out first, which would bend the
   * rotation these checks count on. */
  lanepool_t *p = make_pool_spin("cnext", 3, 0, false);
  lanepool_lane_t *lane = NULL;
  CHECK_RC(lanepool_next_other_lane(NULL, LANEPOOL_QOS_DEFAULT, &lane), EINVAL);
  CHECK_RC(lanepool_next_other_lane(p, LANEPOOL_QOS_DEFAULT, NULL), EINVAL);
  CHECK_RC(lanepool_next_other_lane(p, (lanepool_qos_t)0x42, &lane), EINVAL);
  /* Not on a lane: any lane of the band, the whole band in turn. */
  int hits[3] = {0, 0, 0};
  for (int i = 0; i < 30; i++) {
    lanepool_qos_t q;
    uint32_t index = 99;
    CHECK_RC(lanepool_next_other_lane(p, LANEPOOL_QOS_DEFAULT, &lane), 0);
    CHECK_RC(lanepool_lane_position(lane, &q, &index), 0);
    CHECK(q == LANEPOOL_QOS_DEFAULT && index < 3);
    if (index < 3) hits[index]++;
  }
  CHECK(hits[0] > 0 && hits[1] > 0 && hits[2] > 0);
  /* From each lane of the band: never itself, both others. */
  for (uint32_t i = 0; i < 3; i++) {
    other_pick o = {.pool = p};
    CHECK_RC(lanepool_get_lane(p, LANEPOOL_QOS_DEFAULT, i, &lane), 0);
    run_pick(&o, lane);
    CHECK(o.own == lane);
    CHECK(o.own_returned == 0);
    CHECK(o.other_lanes_seen == 2);
    CHECK(o.other_band_ok);
  }
  CHECK_RC(lanepool_shutdown(p, LANEPOOL_SHUTDOWN_DRAIN, NULL, NULL), 0);
  CHECK_RC(lanepool_destroy(p), 0);
  /* One lane per band: the caller's own lane is the only answer. */
  p = make_pool("cnext1", 1, 0);
  other_pick o = {.pool = p};
  CHECK_RC(lanepool_get_lane(p, LANEPOOL_QOS_DEFAULT, 0, &lane), 0);
  run_pick(&o, lane);
  CHECK(o.own == lane);
  CHECK(o.own_returned == 300);
  CHECK(o.other_lanes_seen == 1);
  CHECK_RC(lanepool_shutdown(p, LANEPOOL_SHUTDOWN_DRAIN, NULL, NULL), 0);
  CHECK_RC(lanepool_destroy(p), 0);
}

/* ---- busy time: lane info's busy_ns against the wall clock ---------------------- */

static uint64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void sleep_ms_task(void *ctx) {
  struct timespec ts = {0, (long)(uintptr_t)ctx * 1000000L};
  while (nanosleep(&ts, &ts) != 0) {}
}

/* 50 ms of tasks count at least 50 ms of busy_ns, and never more than the wall time
 * around them (a busy period measured in the wrong unit fails one of the two). */
static void test_busy_time(void) {
  lanepool_t *p = make_pool_spin("cbusy", 1, 0, false);
  lanepool_lane_t *lane = NULL;
  CHECK_RC(lanepool_get_lane(p, LANEPOOL_QOS_DEFAULT, 0, &lane), 0);
  lanepool_lane_info_t info;
  CHECK_RC(lanepool_lane_info(lane, &info), 0);
  uint64_t before = info.busy_ns;
  uint64_t t0 = mono_ns();
  CHECK_RC(lanepool_lane_async(lane, sleep_ms_task, (void *)(uintptr_t)30), 0);
  CHECK_RC(lanepool_lane_async(lane, sleep_ms_task, (void *)(uintptr_t)20), 0);
  /* busy_ns grows when the lane runs empty: wait for both tasks and that. */
  for (int i = 0; i < 30000; i++) {
    if (lanepool_lane_info(lane, &info) != 0) break;
    if (info.tasks_executed == 2 && info.busy_ns - before >= 50000000u) break;
    usleep(1000);
  }
  uint64_t wall = mono_ns() - t0;
  uint64_t busy = info.busy_ns - before;
  CHECK(info.tasks_executed == 2);
  CHECK(busy >= 50000000u);
  CHECK(busy <= wall);
  if (busy < 50000000u || busy > wall)
    fprintf(stderr, "busy_ns %llu against 50 ms of tasks in %llu ns of wall time\n",
            (unsigned long long)busy, (unsigned long long)wall);
  CHECK_RC(lanepool_shutdown(p, LANEPOOL_SHUTDOWN_DRAIN, NULL, NULL), 0);
  CHECK_RC(lanepool_destroy(p), 0);
}

/* A task a spinning thread finds counts from the spin's last clock read (no clock read
 * between finding and running it), a task found after a park from the wake: either way a
 * busy period starts after the last one ended, and never counts a park. Checked with
 * bounds no schedule can break: task B's busy time is at least its 20 ms and at most the
 * time since A ended (spinning between them), or since B's submit (the lane seen parked
 * in /proc first). */
static _Atomic uint64_t a_ended;
static void stamp_end_task(void *ctx) {
  sleep_ms_task(ctx);
  atomic_store(&a_ended, mono_ns());
}

static void busy_around(uint32_t spin_ns, bool park_first) {
  lanepool_config_t cfg;
  lanepool_config_init(&cfg);
  cfg.name = park_first ? "cbusyp" : "cbusys";
  cfg.lanes_per_band = 1;
  cfg.fixed_spin = 1;
  for (int b = 0; b < LANEPOOL_BAND_COUNT; b++) cfg.spin_ns[b] = spin_ns;
  lanepool_t *p = NULL;
  CHECK_RC(lanepool_create(&cfg, &p), 0);
  lanepool_lane_t *lane = NULL;
  CHECK_RC(lanepool_get_lane(p, LANEPOOL_QOS_DEFAULT, 0, &lane), 0);
  lanepool_lane_info_t info;
  atomic_store(&a_ended, 0);
  CHECK_RC(lanepool_lane_async(lane, stamp_end_task, (void *)(uintptr_t)5), 0);
  /* A's busy period ends when the lane finds its queue empty: then busy_ns moves. */
  uint64_t before = 0;
  for (int i = 0; i < 30000 && !before; i++) {
    CHECK_RC(lanepool_lane_info(lane, &info), 0);
    if (info.tasks_executed == 1 && info.busy_ns)
      before = info.busy_ns;
    else
      usleep(100);
  }
  CHECK(before != 0);
  if (park_first) { /* a 100 us spin, then parked (polled), and 100 ms more asleep */
    for (int i = 0; i < 30000 && !thread_blocked(info.tid); i++) usleep(1000);
    CHECK(thread_blocked(info.tid));
    usleep(100000); /* (no verdict waits on it: it makes a counted park show) */
  }
  uint64_t submitted = mono_ns();
  CHECK_RC(lanepool_lane_async(lane, sleep_ms_task, (void *)(uintptr_t)20), 0);
  for (int i = 0; i < 30000; i++) {
    CHECK_RC(lanepool_lane_info(lane, &info), 0);
    if (info.tasks_executed == 2 && info.busy_ns != before) break;
    usleep(1000);
  }
  uint64_t now = mono_ns(), busy = info.busy_ns - before;
  uint64_t bound = now - (park_first ? submitted : atomic_load(&a_ended));
  CHECK(info.tasks_executed == 2);
  CHECK(busy >= 20000000u && busy <= bound);
  if (busy < 20000000u || busy > bound)
    fprintf(stderr, "busy_ns %llu for a 20 ms task, bound %llu (%s)\n", (unsigned long long)busy,
            (unsigned long long)bound, park_first ? "after a park" : "found spinning");
  CHECK_RC(lanepool_shutdown(p, LANEPOOL_SHUTDOWN_DRAIN, NULL, NULL), 0);
  CHECK_RC(lanepool_destroy(p), 0);
}

static void test_busy_time_spin(void) {
  busy_around(2000000000u, false); /* spins up to 2 s: B is found spinning */
  busy_around(100000u, true);
}

int main(void) {
  test_struct_size();
  test_bad_input();
  test_fifo();
  test_no_loss();
  test_threads();
  test_rescue_lane_placement();
  test_cancel();
  test_async2_bad_input();
  test_async2_fifo();
  test_async2_cancel();
  test_default_log_callback_may_use_the_default_pool();
  test_next_other_lane();
  test_busy_time();
  test_busy_time_spin();
  printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
