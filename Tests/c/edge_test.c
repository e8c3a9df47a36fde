/*
 * edge_test.c - the second review's edge defects (issue 23, defects 8-10): fork from a
 * stall log callback, CPU sets beyond 64 (and 1024) CPUs on a fake machine, a sweep of
 * every configuration field with extreme values, every placement fixture (empty NUMA
 * nodes included), shutdown escalation (drain -> cancel, with timers, with sync
 * waiters), and nested lanepool_lane_sync chains that come back to a lane they hold.
 * Meant to run under ASan+UBSan too: every check is about behaviour, and a sanitizer
 * report stops the run.
 *
 * Build (as .ci/run does; LANEPOOL_TEST_HOOKS lets the test fake the allowed CPUs):
 *   cc -std=gnu11 -O2 -g -pthread -DLANEPOOL_TEST_HOOKS -Iinclude -ISources/CLanePool \
 *      Tests/c/edge_test.c Sources/CLanePool/(all).c -o edge_test
 *   ./edge_test [test]   (one test by name; default: all)
 * A watchdog turns a hang into a failure naming the test. Last line: "N passed, M failed".
 */
#define _GNU_SOURCE
#include "lanepool.h"
#include "check.h"
#include "procfs.h"
#include "internal.h"

#include <dirent.h>
#include <linux/membarrier.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ---- watchdog and helpers ------------------------------------------------------ */

static void on_alarm(int sig) {
  (void)sig;
  char msg[160];
  int n = snprintf(msg, sizeof msg, "edge_test: HANG in %s (watchdog)\n", current_test);
  ssize_t ignored = write(2, msg, (size_t)n);
  (void)ignored;
  _exit(3);
}

static void begin(const char *name, unsigned seconds) {
  current_test = name;
  alarm(seconds);
}

static void sleep_ms(unsigned ms) {
  struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {}
}

/* Polls `flag` until it is non-zero, for at most `seconds`: true if it became so. */
static bool wait_flag(atomic_int *flag, unsigned seconds) {
  for (unsigned i = 0; i < seconds * 1000u; i++) {
    if (atomic_load(flag)) return true;
    sleep_ms(1);
  }
  return atomic_load(flag) != 0;
}

/* Waits for a child for at most `seconds` (then kills it): true if it exited 0. */
static bool child_exits_cleanly(pid_t pid, unsigned seconds) {
  int st = 0;
  pid_t got = 0;
  for (unsigned i = 0; i < seconds * 100u && (got = waitpid(pid, &st, WNOHANG)) == 0; i++)
    sleep_ms(10);
  if (got == 0) {
    fprintf(stderr, "[%s] child %d still runs after %u s: killed\n", current_test, (int)pid,
            seconds);
    kill(pid, SIGKILL);
    waitpid(pid, &st, 0);
    return false;
  }
  if (got != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
    fprintf(stderr, "[%s] child status %#x\n", current_test, st);
    return false;
  }
  return true;
}

static lanepool_t *make_pool(const char *name, uint32_t lanes) {
  lanepool_config_t cfg;
  lanepool_config_init(&cfg);
  cfg.name = name;
  cfg.lanes_per_band = lanes;
  cfg.ring_capacity = 64;
  lanepool_t *p = NULL;
  int rc = lanepool_create(&cfg, &p);
  if (rc) {
    fprintf(stderr, "lanepool_create(%s): %s\n", name, strerror(rc));
    exit(1);
  }
  return p;
}

static lanepool_lane_t *lane_of(lanepool_t *p, lanepool_qos_t qos, uint32_t i) {
  lanepool_lane_t *l = NULL;
  if (lanepool_get_lane(p, qos, i, &l)) abort();
  return l;
}

static void noop(void *ctx) { (void)ctx; }
static atomic_long ran, discarded;
static void count_task(void *ctx) {
  (void)ctx;
  atomic_fetch_add(&ran, 1);
}
static void count_discard(lanepool_fn fn, void *ctx, void *arg) {
  (void)fn;
  (void)ctx;
  (void)arg;
  atomic_fetch_add(&discarded, 1);
}

/* A task that holds its lane until `gate` opens. */
static atomic_int gate, held;
static void wait_gate(void *ctx) {
  (void)ctx;
  atomic_store(&held, 1);
  while (!atomic_load(&gate)) sleep_ms(1);
}

/* ================================================================================
 * Defect 8: fork() inside the stall log callback.
 * ================================================================================ */

static atomic_int stall_forked, stall_child;
static void fork_in_log(lanepool_log_level_t level, const char *msg, void *arg) {
  (void)level;
  (void)msg;
  (void)arg;
  int expected = 0;
  if (!atomic_compare_exchange_strong(&stall_forked, &expected, 1)) return;
  pid_t pid = fork();
  if (pid > 0) atomic_store(&stall_child, pid);
  /* in the child: return to the library, which must end the child */
}

static void test_fork_in_stall_log_callback_child_exits(void) {
  begin("fork_in_stall_log_callback_child_exits", 60);
  atomic_store(&stall_forked, 0);
  atomic_store(&stall_child, 0);
  atomic_store(&gate, 0);
  lanepool_config_t cfg;
  lanepool_config_init(&cfg);
  cfg.name = "stallfork";
  cfg.lanes_per_band = 1;
  cfg.stall_threshold_ns = 1000000; /* 1 ms: the shortest */
  cfg.log = fork_in_log;
  lanepool_t *p = NULL;
  CHECK_RC(lanepool_create(&cfg, &p), 0);
  if (!p) return;
  CHECK_RC(lanepool_lane_async(lane_of(p, LANEPOOL_QOS_DEFAULT, 0), wait_gate, NULL), 0);
  CHECK(wait_flag(&stall_child, 30)); /* the stall was logged and the callback forked */
  atomic_store(&gate, 1);
  pid_t child = atomic_load(&stall_child);
  if (child > 0) CHECK(child_exits_cleanly(child, 30));
  CHECK_RC(lanepool_destroy(p), 0);
}

/* ================================================================================
 * Defect 9: every CPU set sized dynamically; a fake machine of 300 CPUs.
 * ================================================================================ */

static int fake_cpus[2048];

static void test_timer_affinity_keeps_every_allowed_cpu(void) {
  begin("timer_affinity_keeps_every_allowed_cpu", 60);
  cpu_set_t real;
  CPU_ZERO(&real);
  CHECK(sched_getaffinity(0, sizeof real, &real) == 0);
  int real_count = CPU_COUNT(&real);
  /* The fake machine: 300 CPUs the kernel does not have (past this machine's), then
   * the real allowed ones, so that only the CPUs past the 300th are real. */
  uint32_t n = 0;
  for (int c = 0; c < 300; c++) fake_cpus[n++] = 700 + c;
  for (int c = 0; c < CPU_SETSIZE; c++)
    if (CPU_ISSET(c, &real)) fake_cpus[n++] = c;
  lanepool__test_allowed = fake_cpus;
  lanepool__test_allowed_count = n;

  uint32_t count = 0;
  int few[4];
  CHECK_RC(lanepool_allowed_cpus(few, 4, &count), 0);
  CHECK(count == n); /* the total, not what fits */

  /* The timer thread starts pinned to one real CPU (it inherits its creator's
   * affinity); it must take every allowed CPU, the real ones among them. */
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(fake_cpus[300], &one);
  CHECK(sched_setaffinity(0, sizeof one, &one) == 0);
  lanepool_config_t cfg;
  lanepool_config_init(&cfg);
  cfg.name = "wide";
  cfg.lanes_per_band = 1;
  cfg.stall_threshold_ns = 1000000000; /* starts the timer thread */
  lanepool_t *p = NULL;
  CHECK_RC(lanepool_create(&cfg, &p), 0);
  CHECK(sched_setaffinity(0, sizeof real, &real) == 0);
  lanepool__test_allowed = NULL;
  if (!p) return;
  CHECK(p->allowed_count == n);
  bool same = p->allowed_count == n;
  for (uint32_t i = 0; same && i < n; i++) same = p->allowed_cpus[i] == fake_cpus[i];
  CHECK(same);
  size_t size = 0;
  cpu_set_t *set = lanepool__cpu_set_of(p->allowed_cpus, p->allowed_count, &size);
  CHECK(set != NULL);
  if (set) {
    CHECK(CPU_COUNT_S(size, set) == (int)n);
    CHECK(CPU_ISSET_S(999, size, set));
    CPU_FREE(set);
  }
  /* The timer thread's affinity, as the kernel has it: every real allowed CPU. */
  pid_t tid = 0;
  for (int i = 0; i < 5000 && !(tid = thread_named("wide-tm")); i++) sleep_ms(1);
  CHECK(tid != 0);
  cpu_set_t got;
  bool all_real = false;
  for (int i = 0; tid && i < 5000 && !all_real; i++) { /* it sets it once it runs */
    CPU_ZERO(&got);
    if (sched_getaffinity(tid, sizeof got, &got) != 0) break;
    all_real = CPU_COUNT(&got) == real_count;
    if (!all_real) sleep_ms(1);
  }
  CHECK(all_real);
  CHECK_RC(lanepool_destroy(p), 0);
}

/* Pools placed on CORES and on a CPU list from the fake 300-CPU machine plan their
 * lanes over all of it (the planner sees every allowed CPU, not the first 64). */
static void test_plan_over_a_wide_machine(void) {
  begin("plan_over_a_wide_machine", 30);
  int allowed[300];
  for (int c = 0; c < 300; c++) allowed[c] = c;
  lanepool_lane_placement_t out[64];
  int list[3] = {5, 150, 299};
  CHECK_RC(
      lanepool_plan_placement(LANEPOOL_PLACEMENT_CPU_LIST, 3, list, 3, NULL, allowed, 300, out, 64),
      0);
  CHECK(out[2].cpu == 299);
  /* 4 nodes of 64 CPUs and one empty one. */
  static int node_cpus[4][64];
  lanepool_topology_node_t nodes[5];
  for (int nd = 0; nd < 4; nd++) {
    for (int c = 0; c < 64; c++) node_cpus[nd][c] = nd * 64 + c;
    nodes[nd] = (lanepool_topology_node_t){nd, 64, node_cpus[nd]};
  }
  nodes[4] = (lanepool_topology_node_t){4, 0, NULL};
  lanepool_topology_t topo = {5, nodes};
  CHECK_RC(
      lanepool_plan_placement(LANEPOOL_PLACEMENT_NUMA, 8, NULL, 0, &topo, allowed, 300, out, 64),
      0);
  int per_node[5] = {0};
  for (int i = 0; i < 8; i++)
    if (out[i].node >= 0 && out[i].node < 5) per_node[out[i].node]++;
  CHECK(per_node[0] == 2 && per_node[1] == 2 && per_node[2] == 2 && per_node[3] == 2);
  CHECK(per_node[4] == 0);
}

/* ================================================================================
 * Defect 10a: nested syncs that come back to a lane the chain holds are EDEADLK.
 * ================================================================================ */

/* One step of a chain: sync onto lanes[at] (with flags), whose closure goes on with
 * at + 1; the last step records the answer it gets. */
typedef struct {
  lanepool_lane_t *lanes[4];
  int count;          /* steps */
  unsigned flags;     /* 0 (inline when idle) or LANEPOOL_SYNC_QUEUED */
  atomic_int last_rc; /* the innermost sync's answer, +1000 until known */
  atomic_int outer_ok;
  atomic_int done;
} chain_arg;
typedef struct {
  chain_arg *c;
  int at;
} chain_step;

static void chain_next(void *ctx);
static int chain_sync(chain_arg *c, int at) {
  chain_step next = {c, at};
  return lanepool_lane_sync_flags(c->lanes[at], chain_next, &next, c->flags);
}
static void chain_next(void *ctx) {
  chain_step *s = ctx;
  int at = s->at + 1;
  if (at >= s->c->count) return; /* the innermost closure */
  int rc = chain_sync(s->c, at);
  if (at == s->c->count - 1)
    atomic_store(&s->c->last_rc, rc);
  else if (rc != 0)
    atomic_store(&s->c->outer_ok, 0);
}
/* The chain started from a task on lanes[0]'s own thread: the task is step 0's closure. */
static void chain_task(void *ctx) {
  chain_arg *c = ctx;
  chain_step first = {c, 0};
  chain_next(&first);
  atomic_store(&c->done, 1);
}
static void *chain_thread(void *ctx) {
  chain_arg *c = ctx;
  if (chain_sync(c, 0) != 0) atomic_store(&c->outer_ok, 0);
  atomic_store(&c->done, 1);
  return NULL;
}

/* Runs one chain; returns the innermost answer. A hang fails loudly (and the pool is
 * stuck, so the test stops here). */
static int run_chain(lanepool_lane_t *const *lanes, int count, unsigned flags, bool from_task) {
  chain_arg c = {.count = count, .flags = flags};
  for (int i = 0; i < count; i++) c.lanes[i] = lanes[i];
  atomic_init(&c.last_rc, 1000);
  atomic_init(&c.outer_ok, 1);
  atomic_init(&c.done, 0);
  pthread_t t;
  if (from_task) {
    CHECK_RC(lanepool_lane_async(lanes[0], chain_task, &c), 0);
  } else {
    pthread_create(&t, NULL, chain_thread, &c);
  }
  if (!wait_flag(&c.done, 20)) {
    fprintf(stderr, "[%s] a sync chain of %d (flags %u, from %s) hangs\n", current_test, count,
            flags, from_task ? "a task" : "a thread");
    _exit(3);
  }
  if (!from_task) pthread_join(t, NULL);
  CHECK(atomic_load(&c.outer_ok) == 1);
  return atomic_load(&c.last_rc);
}

static void test_nested_sync_back_to_a_held_lane_is_edeadlk(void) {
  begin("nested_sync_back_to_a_held_lane_is_edeadlk", 120);
  lanepool_t *p = make_pool("nest", 1);
  lanepool_lane_t *a = lane_of(p, LANEPOOL_QOS_DEFAULT, 0);
  lanepool_lane_t *b = lane_of(p, LANEPOOL_QOS_UTILITY, 0);
  lanepool_lane_t *c = lane_of(p, LANEPOOL_QOS_BACKGROUND, 0);
  lanepool_lane_t *ab_a[3] = {a, b, a}, *abc_a[4] = {a, b, c, a}, *abc[3] = {a, b, c};
  lanepool_lane_t *abc_b[4] = {a, b, c, b};
  for (int queued = 0; queued < 2; queued++) {
    unsigned f = queued ? LANEPOOL_SYNC_QUEUED : 0;
    for (int from_task = 0; from_task < 2; from_task++) {
      /* A -> B -> A, A -> B -> C -> A, A -> B -> C -> B: each would wait for itself. */
      CHECK_RC(run_chain(ab_a, 3, f, from_task), EDEADLK);
      CHECK_RC(run_chain(abc_a, 4, f, from_task), EDEADLK);
      CHECK_RC(run_chain(abc_b, 4, f, from_task), EDEADLK);
      /* A -> B -> C: no cycle, it runs. */
      CHECK_RC(run_chain(abc, 3, f, from_task), 0);
    }
  }
  /* Nothing stays held once a chain returned. */
  CHECK_RC(lanepool_lane_sync(a, noop, NULL), 0);
  CHECK_RC(lanepool_lane_sync_flags(b, noop, NULL, LANEPOOL_SYNC_QUEUED), 0);
  CHECK_RC(lanepool_destroy(p), 0);
}

/* Shutting down or destroying pool A from a closure one of A's lanes waits for (A's
 * task syncs onto B's lane, whose closure stops A): EDEADLK, as from A's lane itself
 * (before: a hang; the third hostile review's hostile_chain_shutdown). */
typedef struct {
  lanepool_t *a;
  lanepool_lane_t *b;
  int how; /* 0 drain, 1 cancel, 2 destroy */
  _Atomic int closure_rc, sync_rc, done;
} chain_stop;

static void chain_discard(lanepool_fn fn, void *ctx, void *arg) {
  (void)fn;
  (void)ctx;
  (void)arg;
}

static void chain_stop_closure(void *ctx) {
  chain_stop *c = ctx;
  atomic_store(&c->closure_rc, c->how == 2 ? lanepool_destroy(c->a)
                                           : lanepool_shutdown(c->a,
                                                               c->how ? LANEPOOL_SHUTDOWN_CANCEL
                                                                      : LANEPOOL_SHUTDOWN_DRAIN,
                                                               chain_discard, NULL));
}

static void chain_stop_task(void *ctx) {
  chain_stop *c = ctx;
  atomic_store(&c->sync_rc, lanepool_lane_sync(c->b, chain_stop_closure, c));
  atomic_store(&c->done, 1);
}

static void test_stopping_a_pool_its_sync_chain_waits_for_is_edeadlk(void) {
  begin("stopping_a_pool_its_sync_chain_waits_for_is_edeadlk", 60);
  for (int how = 0; how < 3; how++) {
    lanepool_t *a = make_pool("chainA", 1), *b = make_pool("chainB", 1);
    chain_stop c = {.a = a, .b = lane_of(b, LANEPOOL_QOS_DEFAULT, 0), .how = how};
    atomic_init(&c.closure_rc, -1);
    atomic_init(&c.sync_rc, -1);
    atomic_init(&c.done, 0);
    CHECK_RC(lanepool_lane_async(lane_of(a, LANEPOOL_QOS_DEFAULT, 0), chain_stop_task, &c), 0);
    while (!atomic_load(&c.done)) sleep_ms(1); /* a hang ends at the watchdog */
    CHECK_RC(atomic_load(&c.closure_rc), EDEADLK);
    CHECK_RC(atomic_load(&c.sync_rc), 0);
    CHECK_RC(lanepool_destroy(a), 0);
    CHECK_RC(lanepool_destroy(b), 0);
  }
}

/* ================================================================================
 * Defect 10b: every configuration field with extreme values: 0 or a clear errno
 * naming the field, never a crash or a hang.
 * ================================================================================ */

typedef struct {
  const char *what;
  void (*edit)(lanepool_config_t *c, int64_t v);
  int64_t value;
  const char *field; /* NULL: must be accepted (and the pool works) */
} sweep_case;

#define EDIT(name, stmt)                                                                           \
  static void edit_##name(lanepool_config_t *c, int64_t v) {                                       \
    (void)v;                                                                                       \
    stmt;                                                                                          \
  }
static char long_name[4096];
static int sweep_cpu[1];
EDIT(name_empty, c->name = "")
EDIT(name_long, c->name = long_name)
EDIT(lanes, c->lanes_per_band = (uint32_t)v)
EDIT(ring, c->ring_capacity = (uint32_t)v)
EDIT(hard, c->hard_capacity = (int)v)
EDIT(stack, c->stack_size = (size_t)v)
EDIT(spin, for (int b = 0; b < LANEPOOL_BAND_COUNT; b++) c->spin_ns[b] = (uint32_t)v)
EDIT(max_spin, c->max_spinning_lanes = (uint32_t)v)
EDIT(fixed, c->fixed_spin = (int)v)
EDIT(sched, c->policy[2].sched = (lanepool_sched_t)v)
EDIT(rt_prio, c->policy[2].rt_priority = (int)v)
EDIT(nice, c->policy[2].nice = (int)v)
EDIT(ioclass, c->policy[2].ioprio_class = (lanepool_ioprio_class_t)v)
EDIT(iolevel, c->policy[2].ioprio_level = (int)v)
EDIT(slack, c->policy[2].timer_slack_ns = (uint64_t)v)
EDIT(slice, c->policy[2].slice_ns = (uint64_t)v)
EDIT(policy_size, c->policy[2].struct_size = (uint32_t)v)
EDIT(realtime, c->allow_realtime = (int)v)
EDIT(placement, c->placement = (lanepool_placement_t)v)
EDIT(cpus_null, c->placement = LANEPOOL_PLACEMENT_CPU_LIST; c->cpus = NULL; c->cpu_count = 1)
EDIT(cpus_empty, c->placement = LANEPOOL_PLACEMENT_CPU_LIST; c->cpus = sweep_cpu; c->cpu_count = 0)
EDIT(cpus_value, c->placement = LANEPOOL_PLACEMENT_CPU_LIST; sweep_cpu[0] = (int)v;
     c->cpus = sweep_cpu; c->cpu_count = 1)
EDIT(stall, c->stall_threshold_ns = (uint64_t)v)
EDIT(interactive, c->interactive_spin_ns = (uint32_t)v)
EDIT(unpriv_nice, c->unprivileged_nice = (int)v)
EDIT(size, c->struct_size = (uint32_t)v)
#undef EDIT

static const sweep_case sweep[] = {
    {"name \"\"", edit_name_empty, 0, "name"},
    {"name of 4095 bytes", edit_name_long, 0, NULL},
    {"lanes_per_band 0", edit_lanes, 0, "lanes_per_band"},
    {"lanes_per_band 1", edit_lanes, 1, NULL},
    {"lanes_per_band 64", edit_lanes, 64, NULL},
    {"lanes_per_band 65", edit_lanes, 65, "lanes_per_band"},
    {"lanes_per_band UINT32_MAX - 1", edit_lanes, UINT32_MAX - 1, "lanes_per_band"},
    {"ring_capacity 1", edit_ring, 1, "ring_capacity"},
    {"ring_capacity 2", edit_ring, 2, NULL},
    {"ring_capacity 3", edit_ring, 3, "ring_capacity"},
    {"ring_capacity 2^20", edit_ring, 1 << 20, NULL},
    {"ring_capacity 2^21", edit_ring, 1 << 21, "ring_capacity"},
    {"ring_capacity 2^31", edit_ring, INT64_C(1) << 31, "ring_capacity"},
    {"ring_capacity UINT32_MAX", edit_ring, UINT32_MAX, "ring_capacity"},
    {"hard_capacity -1", edit_hard, -1, "hard_capacity"},
    {"hard_capacity 2", edit_hard, 2, "hard_capacity"},
    {"hard_capacity INT_MIN", edit_hard, INT_MIN, "hard_capacity"},
    {"stack_size 1", edit_stack, 1, "stack_size"},
    {"stack_size 16383", edit_stack, 16383, "stack_size"},
    {"stack_size 16384", edit_stack, 16384, NULL},
    {"stack_size 16385", edit_stack, 16385, NULL},
    {"stack_size 2^62", edit_stack, INT64_C(1) << 62, "stack_size"},
    {"stack_size SIZE_MAX", edit_stack, -1, "stack_size"},
    {"spin_ns 0", edit_spin, 0, NULL},
    {"spin_ns UINT32_MAX", edit_spin, UINT32_MAX, NULL},
    {"max_spinning_lanes 1", edit_max_spin, 1, NULL},
    {"max_spinning_lanes UINT32_MAX", edit_max_spin, UINT32_MAX, NULL},
    {"fixed_spin 1", edit_fixed, 1, NULL},
    {"fixed_spin -1", edit_fixed, -1, "fixed_spin"},
    {"fixed_spin 2", edit_fixed, 2, "fixed_spin"},
    {"policy sched -1", edit_sched, -1, "policy[2].sched"},
    {"policy sched 4", edit_sched, 4, "policy[2].sched"},
    {"policy sched INT_MAX", edit_sched, INT_MAX, "policy[2].sched"},
    {"policy sched FIFO without allow_realtime", edit_sched, 1, "policy[2].sched"},
    {"policy rt_priority 1 (OTHER)", edit_rt_prio, 1, "policy[2].rt_priority"},
    {"policy rt_priority INT_MIN", edit_rt_prio, INT_MIN, "policy[2].rt_priority"},
    {"policy nice -21", edit_nice, -21, "policy[2].nice"},
    {"policy nice 20", edit_nice, 20, "policy[2].nice"},
    {"policy nice INT_MIN", edit_nice, INT_MIN, "policy[2].nice"},
    {"policy nice INT_MAX", edit_nice, INT_MAX, "policy[2].nice"},
    {"policy ioprio_class -1", edit_ioclass, -1, "policy[2].ioprio_class"},
    {"policy ioprio_class 4", edit_ioclass, 4, "policy[2].ioprio_class"},
    {"policy ioprio_level -1", edit_iolevel, -1, "policy[2].ioprio_level"},
    {"policy ioprio_level 8", edit_iolevel, 8, "policy[2].ioprio_level"},
    {"policy ioprio_level INT_MAX", edit_iolevel, INT_MAX, "policy[2].ioprio_level"},
    {"policy timer_slack_ns 1", edit_slack, 1, NULL},
    {"policy timer_slack_ns 1 s (LANEPOOL_MAX_TIMER_SLACK_NS)", edit_slack, 1000000000, NULL},
    {"policy timer_slack_ns 1 s + 1", edit_slack, 1000000001, "policy[2].timer_slack_ns"},
    {"policy timer_slack_ns UINT64_MAX", edit_slack, -1, "policy[2].timer_slack_ns"},
    {"policy slice_ns 1", edit_slice, 1, "policy[2].slice_ns"},
    {"policy slice_ns 100000", edit_slice, 100000, NULL},
    {"policy slice_ns UINT64_MAX", edit_slice, -1, "policy[2].slice_ns"},
    {"policy struct_size 0 (inside a config: not read)", edit_policy_size, 0, NULL},
    {"allow_realtime -1", edit_realtime, -1, "allow_realtime"},
    {"allow_realtime 2", edit_realtime, 2, "allow_realtime"},
    {"placement -1", edit_placement, -1, "placement"},
    {"placement 4", edit_placement, 4, "placement"},
    {"placement INT_MAX", edit_placement, INT_MAX, "placement"},
    {"cpus NULL", edit_cpus_null, 0, "cpus"},
    {"cpus empty", edit_cpus_empty, 0, "cpus"},
    {"cpus [-1]", edit_cpus_value, -1, "cpus"},
    {"cpus [INT_MIN]", edit_cpus_value, INT_MIN, "cpus"},
    {"cpus [1024]", edit_cpus_value, 1024, "cpus"},
    {"cpus [INT_MAX]", edit_cpus_value, INT_MAX, "cpus"},
    {"cpus [0]", edit_cpus_value, 0, NULL},
    {"stall_threshold_ns 1", edit_stall, 1, "stall_threshold_ns"},
    {"stall_threshold_ns 999999", edit_stall, 999999, "stall_threshold_ns"},
    {"stall_threshold_ns 1 ms", edit_stall, 1000000, NULL},
    {"stall_threshold_ns UINT64_MAX", edit_stall, -1, NULL},
    {"interactive_spin_ns max", edit_interactive, LANEPOOL_MAX_INTERACTIVE_SPIN_NS, NULL},
    {"interactive_spin_ns max + 1", edit_interactive, LANEPOOL_MAX_INTERACTIVE_SPIN_NS + 1,
     "interactive_spin_ns"},
    {"interactive_spin_ns UINT32_MAX", edit_interactive, UINT32_MAX, "interactive_spin_ns"},
    {"unprivileged_nice shift", edit_unpriv_nice, LANEPOOL_NICE_SHIFT, NULL},
    {"unprivileged_nice -1", edit_unpriv_nice, -1, "unprivileged_nice"},
    {"unprivileged_nice 2", edit_unpriv_nice, 2, "unprivileged_nice"},
    {"struct_size 0", edit_size, 0, "struct_size"},
    {"struct_size UINT32_MAX", edit_size, UINT32_MAX, "struct_size"},
};

static void test_config_sweep_of_extreme_values(void) {
  begin("config_sweep_of_extreme_values", 120);
  memset(long_name, 'n', sizeof long_name - 1);
  cpu_set_t real;
  CPU_ZERO(&real);
  sched_getaffinity(0, sizeof real, &real);
  for (size_t i = 0; i < sizeof sweep / sizeof sweep[0]; i++) {
    const sweep_case *k = &sweep[i];
    lanepool_config_t cfg;
    lanepool_config_init(&cfg);
    cfg.name = "sweep";
    cfg.lanes_per_band = 1;
    k->edit(&cfg, k->value);
    if (k->edit == edit_cpus_value && k->field == NULL && !CPU_ISSET(0, &real)) continue;
    const char *field = NULL;
    int check = lanepool_config_check(&cfg, &field);
    lanepool_t *p = NULL;
    int create = lanepool_create(&cfg, &p);
    bool ok;
    if (k->field) {
      ok = check == EINVAL && field && strcmp(field, k->field) == 0 && create == EINVAL && !p;
    } else {
      ok = check == 0 && create == 0 && p;
    }
    if (!ok)
      fprintf(stderr, "[%s] %s: check %d (field %s), create %d; want %s\n", current_test, k->what,
              check, field ? field : "-", create, k->field ? k->field : "accepted");
    CHECK(ok);
    if (p) { /* an accepted pool works and shuts down */
      atomic_store(&ran, 0);
      CHECK_RC(lanepool_async(p, LANEPOOL_QOS_DEFAULT, count_task, NULL), 0);
      CHECK_RC(lanepool_lane_sync(lane_of(p, LANEPOOL_QOS_USER_INTERACTIVE, 0), count_task, NULL),
               0);
      CHECK_RC(lanepool_destroy(p), 0);
      CHECK(atomic_load(&ran) == 2);
    }
  }
  /* lanepool_default_configure makes the same checks. */
  lanepool_config_t cfg;
  lanepool_config_init(&cfg);
  cfg.fixed_spin = 7;
  CHECK_RC(lanepool_default_configure(&cfg), EINVAL);
}

/* Huge timeouts and deadlines: saturate, never wrap. */
static void test_huge_timeouts_and_deadlines(void) {
  begin("huge_timeouts_and_deadlines", 60);
  lanepool_t *p = make_pool("huge", 1);
  lanepool_lane_t *l = lane_of(p, LANEPOOL_QOS_DEFAULT, 0);
  lanepool_timer_t id = 0;
  CHECK_RC(lanepool_lane_async_after(l, UINT64_MAX, count_task, NULL, &id), 0);
  void *ctx = (void *)1;
  CHECK_RC(lanepool_timer_cancel(p, id, &ctx), 0);
  CHECK(ctx == NULL);
  CHECK_RC(lanepool_timer_cancel(p, id, NULL), EALREADY);
  CHECK_RC(lanepool_timer_cancel(p, UINT64_MAX, NULL), EINVAL);
  CHECK_RC(lanepool_timer_cancel(p, 0, NULL), EINVAL);
  CHECK_RC(lanepool_lane_async_wait(l, noop, NULL, UINT64_MAX), 0);
  CHECK_RC(lanepool_lane_sync_flags(l, noop, NULL, LANEPOOL_SYNC_QUEUED), 0); /* it ran */
  CHECK_RC(lanepool_async_after(p, LANEPOOL_QOS_DEFAULT, UINT64_MAX, count_task, NULL, NULL), 0);
  /* A cancel takes the pending timer to the discard callback. */
  atomic_store(&discarded, 0);
  CHECK_RC(lanepool_shutdown(p, LANEPOOL_SHUTDOWN_CANCEL, count_discard, NULL), 0);
  CHECK(atomic_load(&discarded) == 1);
  CHECK_RC(lanepool_destroy(p), 0);
}

/* ================================================================================
 * Defect 10c: placement fixtures (lanepool_plan_placement), empty nodes included.
 * ================================================================================ */

static void test_placement_fixtures(void) {
  begin("placement_fixtures", 60);
  static int cpus8[8] = {0, 1, 2, 3, 4, 5, 6, 7};
  static int odd[3] = {1, 3, 5};
  static int big[4] = {INT_MAX, 1 << 20, 1023, 1024};
  lanepool_lane_placement_t out[64];
  /* Topologies: an empty node (cpus NULL or not), a node of CPUs outside the allowed
   * set, duplicate node ids, huge node ids and CPU numbers, a node list of 0. */
  lanepool_topology_node_t shapes[][4] = {
      {{0, 4, cpus8}, {1, 4, cpus8 + 4}, {2, 0, NULL}, {3, 0, cpus8}},
      {{0, 0, NULL}, {1, 0, NULL}, {2, 0, NULL}, {3, 8, cpus8}},
      {{5, 3, odd}, {5, 3, odd}, {INT_MAX, 4, big}, {7, 1, cpus8 + 7}},
      {{0, 8, cpus8}, {1, 8, cpus8}, {2, 8, cpus8}, {3, 8, cpus8}},
  };
  int allowed_sets[][8] = {{0, 1, 2, 3, 4, 5, 6, 7}, {1}, {INT_MAX, 1023, 1024}};
  uint32_t allowed_counts[] = {8, 1, 3};
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
    for (uint32_t nodes = 0; nodes <= 4; nodes++)
      for (size_t a = 0; a < 3; a++)
        for (uint32_t lanes = 1; lanes <= 64; lanes = lanes * 3 + 1) {
          lanepool_topology_t topo = {nodes, shapes[s]};
          int rc = lanepool_plan_placement(LANEPOOL_PLACEMENT_NUMA, lanes, NULL, 0, &topo,
                                           allowed_sets[a], allowed_counts[a], out, 64);
          CHECK(rc == 0 || rc == EINVAL);
          bool placed = true;
          for (uint32_t i = 0; rc == 0 && i < lanes; i++) {
            bool in = false;
            for (uint32_t n = 0; n < nodes; n++) in |= shapes[s][n].node == out[i].node;
            placed &= in && out[i].cpu == -1;
          }
          CHECK(placed);
        }
  lanepool_topology_t none = {0, NULL}, bad_nodes = {3, NULL};
  CHECK_RC(lanepool_plan_placement(LANEPOOL_PLACEMENT_NUMA, 4, NULL, 0, &none, cpus8, 8, out, 64),
           EINVAL);
  CHECK_RC(
      lanepool_plan_placement(LANEPOOL_PLACEMENT_NUMA, 4, NULL, 0, &bad_nodes, cpus8, 8, out, 64),
      EINVAL);
  lanepool_topology_node_t neg = {-1, 8, cpus8}, counted_null = {0, 3, NULL};
  lanepool_topology_t tneg = {1, &neg}, tnull = {1, &counted_null};
  CHECK_RC(lanepool_plan_placement(LANEPOOL_PLACEMENT_NUMA, 4, NULL, 0, &tneg, cpus8, 8, out, 64),
           EINVAL);
  CHECK_RC(lanepool_plan_placement(LANEPOOL_PLACEMENT_NUMA, 4, NULL, 0, &tnull, cpus8, 8, out, 64),
           EINVAL);
  lanepool_topology_t too_many = {LANEPOOL__MAX_NODES + 1, shapes[0]};
  CHECK_RC(
      lanepool_plan_placement(LANEPOOL_PLACEMENT_NUMA, 4, NULL, 0, &too_many, cpus8, 8, out, 64),
      EINVAL);
  /* Every placement: CORES, CPU lists (in and outside the allowed set), bad values. */
  CHECK_RC(lanepool_plan_placement(LANEPOOL_PLACEMENT_CORES, 64, NULL, 0, NULL, odd, 3, out, 64),
           0);
  CHECK(out[63].cpu == odd[63 % 3]);
  CHECK_RC(lanepool_plan_placement(LANEPOOL_PLACEMENT_CPU_LIST, 5, odd, 3, NULL, cpus8, 8, out, 64),
           0);
  CHECK_RC(lanepool_plan_placement(LANEPOOL_PLACEMENT_CPU_LIST, 5, big, 4, NULL, cpus8, 8, out, 64),
           EINVAL);
  CHECK_RC(
      lanepool_plan_placement(LANEPOOL_PLACEMENT_CPU_LIST, 5, NULL, 3, NULL, cpus8, 8, out, 64),
      EINVAL);
  CHECK_RC(lanepool_plan_placement(LANEPOOL_PLACEMENT_CPU_LIST, 5, odd, 0, NULL, cpus8, 8, out, 64),
           EINVAL);
  CHECK_RC(lanepool_plan_placement(LANEPOOL_PLACEMENT_NONE, 64, NULL, 0, NULL, NULL, 0, out, 64),
           0);
  CHECK_RC(lanepool_plan_placement((lanepool_placement_t)-1, 4, NULL, 0, NULL, cpus8, 8, out, 64),
           EINVAL);
  CHECK_RC(lanepool_plan_placement((lanepool_placement_t)4, 4, NULL, 0, NULL, cpus8, 8, out, 64),
           EINVAL);
  CHECK_RC(lanepool_plan_placement(LANEPOOL_PLACEMENT_CORES, 4, NULL, 0, NULL, cpus8, 0, out, 64),
           EINVAL);
  CHECK_RC(lanepool_plan_placement(LANEPOOL_PLACEMENT_CORES, 0, NULL, 0, NULL, cpus8, 8, out, 64),
           EINVAL);
  CHECK_RC(lanepool_plan_placement(LANEPOOL_PLACEMENT_CORES, 65, NULL, 0, NULL, cpus8, 8, out, 64),
           EINVAL);
  CHECK_RC(lanepool_plan_placement(LANEPOOL_PLACEMENT_CORES, 4, NULL, 0, NULL, cpus8, 8, NULL, 64),
           EINVAL);
  /* The caller's own allowed set (NULL): CORES works on this machine. */
  CHECK_RC(lanepool_plan_placement(LANEPOOL_PLACEMENT_CORES, 4, NULL, 0, NULL, NULL, 0, out, 64),
           0);
  /* Pools with every placement this build can apply (NUMA: ENOTSUP without libnuma). */
  lanepool_placement_t kinds[] = {LANEPOOL_PLACEMENT_NONE, LANEPOOL_PLACEMENT_CORES,
                                  LANEPOOL_PLACEMENT_CPU_LIST, LANEPOOL_PLACEMENT_NUMA};
  lanepool_topology_t injected = {4, shapes[0]};
  int first = -1;
  lanepool_plan_placement(LANEPOOL_PLACEMENT_CORES, 1, NULL, 0, NULL, NULL, 0, out, 64);
  first = out[0].cpu;
  for (size_t k = 0; k < 4; k++) {
    lanepool_config_t cfg;
    lanepool_config_init(&cfg);
    cfg.name = "place";
    cfg.lanes_per_band = 2;
    cfg.placement = kinds[k];
    cfg.cpus = &first;
    cfg.cpu_count = 1;
    if (kinds[k] == LANEPOOL_PLACEMENT_NUMA) cfg.topology = &injected;
    lanepool_t *p = NULL;
    int rc = lanepool_create(&cfg, &p);
    CHECK(rc == 0 || (kinds[k] == LANEPOOL_PLACEMENT_NUMA && (rc == ENOTSUP || rc == EINVAL)));
    if (p) {
      CHECK_RC(lanepool_lane_sync_flags(lane_of(p, LANEPOOL_QOS_DEFAULT, 1), noop, NULL,
                                        LANEPOOL_SYNC_QUEUED),
               0);
      CHECK_RC(lanepool_destroy(p), 0);
    }
  }
}

/* ================================================================================
 * Defect 10d: shutdown escalation scenarios (drain -> cancel; with timers; with sync
 * waiters; several callers), exactly once, under the sanitizers.
 * ================================================================================ */

typedef struct {
  lanepool_t *pool;
  lanepool_shutdown_mode_t mode;
  int rc;
} shut_arg;
static void *shut_thread(void *arg) {
  shut_arg *a = arg;
  a->rc = lanepool_shutdown(a->pool, a->mode, count_discard, NULL);
  return NULL;
}
typedef struct {
  lanepool_lane_t *lane;
  int rc;
  atomic_int *started;
} sync_arg;
static void *sync_thread(void *arg) {
  sync_arg *a = arg;
  atomic_fetch_add(a->started, 1);
  a->rc = lanepool_lane_sync_flags(a->lane, count_task, NULL, LANEPOOL_SYNC_QUEUED);
  return NULL;
}
/* A task that fans out a follow-up while the pool drains (own-lane submits). */
static void fan_out(void *ctx) {
  lanepool_lane_t *l = ctx;
  atomic_fetch_add(&ran, 1);
  if (lanepool_lane_async(l, count_task, NULL) != 0) {}
}

static bool wait_shut_down(lanepool_t *p) {
  lanepool_info_t info;
  for (int i = 0; i < 20000; i++) {
    if (lanepool_info(p, &info) == 0 && info.shut_down) return true;
    sleep_ms(1);
  }
  return false;
}

static void test_escalation_scenarios(void) {
  begin("escalation_scenarios", 120);
  for (int scenario = 0; scenario < 8; scenario++) {
    bool timers = scenario & 1, syncs = scenario & 2, cancel_first = scenario & 4;
    atomic_store(&ran, 0);
    atomic_store(&discarded, 0);
    atomic_store(&gate, 0);
    atomic_store(&held, 0);
    lanepool_t *p = make_pool("escal", 2);
    lanepool_lane_t *l = lane_of(p, LANEPOOL_QOS_DEFAULT, 0);
    lanepool_lane_t *other = lane_of(p, LANEPOOL_QOS_UTILITY, 1);
    CHECK_RC(lanepool_lane_async(l, wait_gate, NULL), 0);
    long accepted = 0;
    for (int i = 0; i < 50; i++) accepted += lanepool_lane_async(l, fan_out, l) == 0;
    for (int i = 0; i < 20; i++) accepted += lanepool_lane_async(other, count_task, NULL) == 0;
    if (timers) {
      uint64_t now = lanepool_now_ns();
      for (int i = 0; i < 10; i++)
        accepted +=
            lanepool_lane_async_after(l, now + (uint64_t)i * 1000, count_task, NULL, NULL) == 0;
      for (int i = 0; i < 10; i++)
        accepted += lanepool_async_after(p, LANEPOOL_QOS_BACKGROUND, UINT64_MAX, count_task, NULL,
                                         NULL) == 0;
    }
    atomic_int sync_started = 0;
    sync_arg sa[3];
    pthread_t st[3];
    if (syncs)
      for (int i = 0; i < 3; i++) {
        sa[i] = (sync_arg){l, -1, &sync_started};
        pthread_create(&st[i], NULL, sync_thread, &sa[i]);
      }
    while (syncs && atomic_load(&sync_started) < 3) sleep_ms(1);
    CHECK(wait_flag(&held, 20));
    shut_arg first = {p, cancel_first ? LANEPOOL_SHUTDOWN_CANCEL : LANEPOOL_SHUTDOWN_DRAIN, -1};
    shut_arg second = {p, LANEPOOL_SHUTDOWN_CANCEL, -1}, third = {p, LANEPOOL_SHUTDOWN_DRAIN, -1};
    pthread_t t1, t2, t3;
    pthread_create(&t1, NULL, shut_thread, &first);
    CHECK(wait_shut_down(p));
    pthread_create(&t2, NULL, shut_thread, &second); /* escalates a drain */
    pthread_create(&t3, NULL, shut_thread, &third);  /* waits for the end */
    sleep_ms(scenario); /* let them arrive in varying orders (not asserted on) */
    atomic_store(&gate, 1);
    pthread_join(t1, NULL);
    pthread_join(t2, NULL);
    pthread_join(t3, NULL);
    long sync_ran = 0, sync_cancelled = 0;
    if (syncs)
      for (int i = 0; i < 3; i++) {
        pthread_join(st[i], NULL);
        CHECK(sa[i].rc == 0 || sa[i].rc == ECANCELED || sa[i].rc == ESHUTDOWN);
        sync_ran += sa[i].rc == 0;
        sync_cancelled += sa[i].rc == ECANCELED;
      }
    CHECK_RC(first.rc, 0);
    CHECK(second.rc == 0 || second.rc == EALREADY);
    CHECK_RC(third.rc, EALREADY);
    /* Exactly once: every accepted task (follow-ups too) ran or was discarded; the
     * gate task ran; syncs ran or were answered ECANCELED (never discarded). */
    long follow_ups = atomic_load(&ran) + atomic_load(&discarded) - accepted - sync_ran;
    CHECK(follow_ups >= 0 && follow_ups <= 50);
    if (!(follow_ups >= 0 && follow_ups <= 50))
      fprintf(stderr, "[%s] scenario %d: ran %ld, discarded %ld, accepted %ld, syncs %ld/%ld\n",
              current_test, scenario, (long)atomic_load(&ran), (long)atomic_load(&discarded),
              accepted, sync_ran, sync_cancelled);
    CHECK_RC(lanepool_shutdown(p, LANEPOOL_SHUTDOWN_CANCEL, count_discard, NULL), EALREADY);
    CHECK_RC(lanepool_destroy(p), 0);
  }
}

/* destroy() drives a drain; a cancel escalates it. destroy frees the pool once joined:
 * never under the escalator, which may still be inside lanepool_shutdown. */
static void *destroy_thread(void *arg) {
  shut_arg *a = arg;
  a->rc = lanepool_destroy(a->pool);
  return NULL;
}

static void test_cancel_escalating_a_destroy(void) {
  begin("cancel_escalating_a_destroy", 120);
  for (int round = 0; round < 40; round++) {
    atomic_store(&gate, 0);
    atomic_store(&held, 0);
    lanepool_t *p = make_pool("escdes", 1);
    lanepool_lane_t *l = lane_of(p, LANEPOOL_QOS_DEFAULT, 0);
    CHECK_RC(lanepool_lane_async(l, wait_gate, NULL), 0);
    for (int i = 0; i < 10; i++) CHECK_RC(lanepool_lane_async(l, count_task, NULL), 0);
    CHECK(wait_flag(&held, 20));
    shut_arg d = {p, LANEPOOL_SHUTDOWN_DRAIN, -1}, e = {p, LANEPOOL_SHUTDOWN_CANCEL, -1};
    pthread_t td, te;
    pthread_create(&td, NULL, destroy_thread, &d);
    CHECK(wait_shut_down(p));
    pthread_create(&te, NULL, shut_thread, &e);
    /* Continuations get in while the pool drains; once the cancel escalated it, intake
     * closes: the escalator is then inside lanepool_shutdown, before destroy frees. */
    while (lanepool_lane_async_flags(l, count_task, NULL, LANEPOOL_SUBMIT_CONTINUATION) == 0)
      sleep_ms(1);
    sleep_ms((unsigned)(round % 3));
    atomic_store(&gate, 1);
    pthread_join(td, NULL);
    pthread_join(te, NULL);
    CHECK_RC(d.rc, 0);
    CHECK(e.rc == 0 || e.rc == EALREADY);
  }
}

/* lanepool__cpus_taken (park.c): a lane does not spin while the pool's lanes running
 * tasks take every CPU its lanes may use (a spinner would keep a CPU only by preempting
 * one of them, and a yield between its looks could leave it off the CPU until the next
 * tick with a job pushed for it). Lanes blocked in a task, one per CPU, one at a time
 * (background lanes first, then the next band up when a band has fewer lanes than
 * CPUs): taken only once all are; not while a spinner (its pool-wide slot, which it
 * keeps through its yields) is among them; free again once they parked. Then a pool
 * placed on one CPU, and a pool under a cgroup quota of one CPU: one blocked lane takes
 * it. */
static _Atomic int spin_gate, spin_started;
static void spin_blocker(void *ctx) {
  (void)ctx;
  atomic_fetch_add(&spin_started, 1);
  while (!atomic_load(&spin_gate)) sleep_ms(1);
}

static void wait_all_parked(lanepool_t *pool) {
  for (;;) {
    uint32_t parked = 0;
    for (uint32_t b = 0; b < LANEPOOL_BAND_COUNT; b++) parked += atomic_load(&pool->bands[b].idle);
    if (parked == LANEPOOL_BAND_COUNT * pool->lanes_per_band) return;
    sleep_ms(1);
  }
}

/* Blocks `cpus` lanes one by one, checking the count after each; then a spinner's slot. */
static void take_every_cpu(lanepool_t *pool, uint32_t cpus) {
  uint32_t n = pool->lanes_per_band;
  wait_all_parked(pool);
  CHECK(!lanepool__cpus_taken(pool));
  atomic_store(&spin_gate, 0);
  atomic_store(&spin_started, 0);
  for (uint32_t i = 0; i < cpus; i++) {
    lanepool_lane_t *lane = NULL;
    CHECK_RC(lanepool_get_lane(pool, lanepool__qos_of_band[LANEPOOL_BAND_COUNT - 1 - i / n], i % n,
                               &lane),
             0);
    CHECK_RC(lanepool_lane_async(lane, spin_blocker, NULL), 0);
    while (atomic_load(&spin_started) < (int)i + 1) sleep_ms(1);
    CHECK(lanepool__cpus_taken(pool) == (i + 1 == cpus));
  }
  /* A spinner between two looks, yielding: out of band->spinning, in the pool's slots. */
  atomic_fetch_add(&pool->spinners, 1);
  CHECK(!lanepool__cpus_taken(pool));
  atomic_fetch_sub(&pool->spinners, 1);
  atomic_fetch_add(&pool->interactive_spinner, 1);
  CHECK(!lanepool__cpus_taken(pool));
  atomic_fetch_sub(&pool->interactive_spinner, 1);
  CHECK(lanepool__cpus_taken(pool));
  atomic_store(&spin_gate, 1);
  wait_all_parked(pool);
  CHECK(!lanepool__cpus_taken(pool));
}

static void test_no_spin_while_lanes_take_every_cpu(void) {
  begin("no_spin_while_lanes_take_every_cpu", 60);
  lanepool_config_t cfg;
  lanepool_config_init(&cfg);
  cfg.name = "nospin";
  lanepool_t *pool = NULL;
  CHECK_RC(lanepool_create(&cfg, &pool), 0);
  if (!pool) return;
  uint32_t cpus = pool->allowed_count;
  uint32_t quota;
  if (lanepool_cpu_quota(&quota) == 0 && quota < cpus) cpus = quota; /* a limited host */
  int first_cpu = pool->allowed_cpus[0];
  if (cpus <= LANEPOOL_BAND_COUNT * pool->lanes_per_band) take_every_cpu(pool, cpus);
  CHECK_RC(lanepool_destroy(pool), 0);
  /* Placed on one CPU of several: the lanes may use that one only. */
  cfg.placement = LANEPOOL_PLACEMENT_CPU_LIST;
  cfg.cpus = &first_cpu;
  cfg.cpu_count = 1;
  cfg.lanes_per_band = 2;
  pool = NULL;
  CHECK_RC(lanepool_create(&cfg, &pool), 0);
  if (!pool) return;
  CHECK(pool->rescue_cpu_count == 1);
  take_every_cpu(pool, 1);
  CHECK_RC(lanepool_destroy(pool), 0);
  /* A cgroup quota of one CPU (fixture files): a spinner would spend that quota. */
  char root[] = "/tmp/lanepool-quota-XXXXXX", path[sizeof root + 16];
  CHECK(mkdtemp(root) != NULL);
  snprintf(path, sizeof path, "%s/cpu.max", root);
  FILE *f = fopen(path, "w");
  CHECK(f && fputs("100000 100000\n", f) >= 0 && fclose(f) == 0);
  snprintf(path, sizeof path, "%s/cgroup", root);
  f = fopen(path, "w");
  CHECK(f && fputs("0::/\n", f) >= 0 && fclose(f) == 0);
  lanepool__test_cgroup_root = root;
  lanepool__test_proc_cgroup = path;
  lanepool_config_init(&cfg);
  cfg.name = "nospin-q";
  cfg.lanes_per_band = 2;
  pool = NULL;
  CHECK_RC(lanepool_create(&cfg, &pool), 0);
  lanepool__test_cgroup_root = lanepool__test_proc_cgroup = NULL;
  if (pool) {
    CHECK(pool->spin_cpus == 1 && pool->max_spinners == 1);
    take_every_cpu(pool, 1);
    CHECK_RC(lanepool_destroy(pool), 0);
  }
  unlink(path);
  snprintf(path, sizeof path, "%s/cpu.max", root);
  unlink(path);
  rmdir(root);
}

/* Without membarrier(2) (refused at startup, as under a seccomp filter: every command,
 * or only MEMBARRIER_CMD_PRIVATE_EXPEDITED after the registration went through), the
 * library must pick the fence protocol (calls.c), never a cheap entry with no fence to
 * pair with; destroy racing callers must still be safe (ASan build). A new process
 * each, since the choice is made once per process: this binary, run again. */
static int run_membarrier_refused(unsigned refused) {
  lanepool__test_membarrier_refused = refused;
  int before = failed;
  test_cancel_escalating_a_destroy();
  test_escalation_scenarios();
  current_test = "destroy_without_membarrier (child)";
  CHECK(!lanepool__calls_cheap); /* decided at the first call: the fence protocol */
  printf("  membarrier refused (mask %#x): %s\n", refused, failed == before ? "ok" : "FAIL");
  return failed ? 1 : 0;
}

static void test_destroy_without_membarrier(void) {
  begin("destroy_without_membarrier", 300);
  const char *masks[] = {"0xffffffff", "0x8" /* MEMBARRIER_CMD_PRIVATE_EXPEDITED */};
  CHECK(MEMBARRIER_CMD_PRIVATE_EXPEDITED == 8);
  for (size_t i = 0; i < sizeof masks / sizeof masks[0]; i++) {
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
      execl("/proc/self/exe", "edge_test", "--membarrier-refused", masks[i], (char *)NULL);
      _exit(127);
    }
    int status = -1;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
}

int main(int argc, char **argv) {
  const char *only = argc > 1 ? argv[1] : NULL;
  setvbuf(stdout, NULL, _IOLBF, 0);
  signal(SIGALRM, on_alarm);
  signal(SIGPIPE, SIG_IGN);
  if (argc > 2 && strcmp(argv[1], "--membarrier-refused") == 0)
    return run_membarrier_refused((unsigned)strtoul(argv[2], NULL, 0));
  struct {
    const char *name;
    void (*fn)(void);
    bool after_merge; /* TM: run by name only (none today) */
  } tests[] = {
#define T(f) {#f, f, false}
#define TM(f)                                                                                      \
  { #f, f, true }
      T(test_fork_in_stall_log_callback_child_exits),
      T(test_timer_affinity_keeps_every_allowed_cpu),
      T(test_plan_over_a_wide_machine),
      T(test_nested_sync_back_to_a_held_lane_is_edeadlk),
      T(test_stopping_a_pool_its_sync_chain_waits_for_is_edeadlk),
      T(test_config_sweep_of_extreme_values),
      T(test_huge_timeouts_and_deadlines),
      T(test_placement_fixtures),
      T(test_escalation_scenarios),
      /* A use after free under ASan before destroy waited for the calls in flight
       * (calls.c). */
      T(test_cancel_escalating_a_destroy),
      /* Destroy's ordering without membarrier: a local fence and no fence at the
       * callers' entries before (calls.c). */
      T(test_destroy_without_membarrier),
      /* A yielded spinner waited a tick (4 ms) with a job pushed for it (park.c). */
      T(test_no_spin_while_lanes_take_every_cpu),
#undef T
#undef TM
  };
  for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++) {
    if (only ? strcmp(only, tests[i].name + 5) != 0 : tests[i].after_merge) continue;
    int before = failed;
    tests[i].fn();
    alarm(0);
    printf("%s - %s\n", failed == before ? "ok" : "FAIL", tests[i].name + 5);
  }
  alarm(0);
  printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
