/*
 * vm_test.c - placement checks that need a real kernel with a chosen topology: run as
 * part of the init of a QEMU guest by scripts/vm-test (docs/vm-testing.md). Every
 * answer about where a thread may run or where memory lies comes from the kernel
 * (sched_getaffinity on the lane's tid, sched_getcpu in a task, move_pages and
 * get_mempolicy on addresses) or from sysfs, never from LanePool's own bookkeeping;
 * lane info is what is being checked.
 *
 * White-box: includes internal.h to reach a lane's ring slots and allocation sizes
 * (the lane pointer lanepool_get_lane returns is the lane's state itself).
 *
 * Build (scripts/vm-test does both, statically):
 *   cc -std=gnu11 -O2 -pthread -DLANEPOOL_HAVE_NUMA -Iinclude -ISources/CLanePool -ITests/c \
 *      Tests/vm/vm_test.c Sources/CLanePool/(all).c -lnuma -o vm_test_numa
 *   the same without -DLANEPOOL_HAVE_NUMA and -lnuma: vm_test_plain
 * Usage: vm_test TEST [CPU]; TEST is one of
 *   topology          (NUMA build) sysfs matches lanepool.nodes= on the kernel command
 *                     line; libnuma sees the same; lanepool_plan_placement(NULL topology)
 *   numa              (NUMA build) NUMA pools: apportionment, affinity, memory nodes;
 *                     prints the lane table (LANE lines)
 *   cores             `cores` placement over every CPU, and wrapping past them
 *   holes             the process restricted to CPUs 1,3,5,6 (those that exist) first
 *   offline CPU       CPU taken offline through sysfs before the pool starts
 *   numa-unavailable  (NUMA build) numa_available() < 0, made so with seccomp
 *   nonuma            (plain build) what the build without libnuma documents
 * Last line: "<test>: N passed, M failed"; exit status 1 if M > 0.
 */
#define _GNU_SOURCE
#include "lanepool.h"
#include "internal.h"
#include "check.h"

#include <dirent.h>
#include <errno.h>
#include <linux/filter.h>
#include <linux/mempolicy.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#ifdef LANEPOOL_HAVE_NUMA
#include <numa.h>
#endif

#define MAX_NODES 16
#define PAGE      4096u

static const lanepool_qos_t qos_of_band[LANEPOOL_BAND_COUNT] = {
    LANEPOOL_QOS_USER_INTERACTIVE, LANEPOOL_QOS_USER_INITIATED, LANEPOOL_QOS_DEFAULT,
    LANEPOOL_QOS_UTILITY, LANEPOOL_QOS_BACKGROUND};

/* ---- CPU sets and sysfs --------------------------------------------------------- */

static int parse_cpulist(const char *s, cpu_set_t *set) {
  CPU_ZERO(set);
  while (*s && *s != '\n') {
    char *end;
    long a = strtol(s, &end, 10);
    if (end == s || a < 0 || a >= CPU_SETSIZE) return -1;
    long b = a;
    s = end;
    if (*s == '-') {
      b = strtol(s + 1, &end, 10);
      if (end == s + 1 || b < a || b >= CPU_SETSIZE) return -1;
      s = end;
    }
    for (long c = a; c <= b; c++) CPU_SET((int)c, set);
    if (*s == ',')
      s++;
    else if (*s && *s != '\n' && *s != '/' && *s != ' ')
      return -1;
    if (*s == '/' || *s == ' ') break;
  }
  return 0;
}

static int read_file(const char *path, char *buf, size_t len) {
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  size_t n = fread(buf, 1, len - 1, f);
  fclose(f);
  buf[n] = 0;
  return 0;
}

static int read_cpulist(const char *path, cpu_set_t *set) {
  char buf[1024];
  if (read_file(path, buf, sizeof buf)) return -1;
  return parse_cpulist(buf, set);
}

static const char *set_str(const cpu_set_t *set, char *buf, size_t len) {
  size_t o = 0;
  buf[0] = 0;
  for (int c = 0; c < CPU_SETSIZE; c++) {
    if (!CPU_ISSET(c, set)) continue;
    int e = c;
    while (e + 1 < CPU_SETSIZE && CPU_ISSET(e + 1, set)) e++;
    int n = e == c ? snprintf(buf + o, len - o, "%s%d", o ? "," : "", c)
                   : snprintf(buf + o, len - o, "%s%d-%d", o ? "," : "", c, e);
    if (n < 0 || (size_t)n >= len - o) break;
    o += (size_t)n;
    c = e;
  }
  if (!o) snprintf(buf, len, "(none)");
  return buf;
}

static int set_list(const cpu_set_t *set, int *out, int max) {
  int n = 0;
  for (int c = 0; c < CPU_SETSIZE && n < max; c++)
    if (CPU_ISSET(c, set)) out[n++] = c;
  return n;
}

/* The machine as sysfs tells it: nodes with CPUs (online ones), in node order. */
typedef struct machine {
  int node_count;
  int node_id[MAX_NODES];
  cpu_set_t node_cpus[MAX_NODES];
  cpu_set_t online;
} machine;

static int read_machine(machine *m) {
  memset(m, 0, sizeof *m);
  if (read_cpulist("/sys/devices/system/cpu/online", &m->online)) return -1;
  for (int node = 0; node < 64 && m->node_count < MAX_NODES; node++) {
    char path[128];
    snprintf(path, sizeof path, "/sys/devices/system/node/node%d/cpulist", node);
    cpu_set_t set;
    if (read_cpulist(path, &set)) continue;
    m->node_id[m->node_count] = node;
    m->node_cpus[m->node_count] = set;
    m->node_count++;
  }
  return m->node_count ? 0 : -1;
}

/* sysfs's node of a CPU, or -1. */
static int node_of(const machine *m, int cpu) {
  for (int i = 0; i < m->node_count; i++)
    if (CPU_ISSET(cpu, &m->node_cpus[i])) return m->node_id[i];
  return -1;
}

__attribute__((unused)) static const cpu_set_t *cpus_of_node(const machine *m, int node) {
  for (int i = 0; i < m->node_count; i++)
    if (m->node_id[i] == node) return &m->node_cpus[i];
  return NULL;
}

/* The topology scripts/vm-test asked QEMU for: lanepool.nodes=0-2/3-7 on the kernel
 * command line (node i's CPUs, '/' between nodes). -1 when absent. */
static int expected_nodes(cpu_set_t *out, int max) {
  char buf[2048];
  if (read_file("/proc/cmdline", buf, sizeof buf)) return -1;
  const char *p = strstr(buf, "lanepool.nodes=");
  if (!p) return -1;
  p += strlen("lanepool.nodes=");
  int n = 0;
  while (n < max) {
    if (parse_cpulist(p, &out[n])) return -1;
    n++;
    const char *slash = strchr(p, '/'), *space = strpbrk(p, " \n");
    if (!slash || (space && slash > space)) break;
    p = slash + 1;
  }
  return n;
}

/* ---- what the kernel says about a thread and about memory --------------------------- */

static int thread_affinity(pid_t tid, cpu_set_t *set) {
  CPU_ZERO(set);
  return sched_getaffinity(tid, sizeof *set, set) == 0 ? 0 : errno;
}

/* The node of every page of [addr, addr+len), through move_pages with no target
 * nodes (status only). Returns the node when all pages agree, -2 when they differ,
 * or the negative status of the first page the kernel could not place. */
static int pages_node(const void *addr, size_t len, int *pages_out) {
  uintptr_t first = (uintptr_t)addr & ~(uintptr_t)(PAGE - 1);
  uintptr_t last = ((uintptr_t)addr + len - 1) & ~(uintptr_t)(PAGE - 1);
  unsigned long count = (unsigned long)((last - first) / PAGE + 1);
  void **pages = calloc(count, sizeof *pages);
  int *status = calloc(count, sizeof *status);
  if (!pages || !status) abort();
  for (unsigned long i = 0; i < count; i++) pages[i] = (void *)(first + i * PAGE);
  long rc = syscall(SYS_move_pages, 0, count, pages, NULL, status, 0);
  int node = rc < 0 ? -errno : status[0];
  for (unsigned long i = 0; rc >= 0 && i < count; i++) {
    if (status[i] < 0) {
      node = status[i];
      break;
    }
    if (status[i] != status[0]) node = -2;
  }
  if (pages_out) *pages_out = (int)count;
  free(pages);
  free(status);
  return node;
}

/* get_mempolicy(MPOL_F_NODE | MPOL_F_ADDR): the node of the page at addr. */
__attribute__((unused)) static int addr_node(const void *addr) {
  int node = -1;
  if (syscall(SYS_get_mempolicy, &node, NULL, 0, addr, MPOL_F_NODE | MPOL_F_ADDR) != 0)
    return -errno;
  return node;
}

/* What a task sees on the lane that runs it. */
typedef struct on_lane {
  int cpu;  /* sched_getcpu() */
  int mode; /* the thread's memory policy */
  unsigned long nodemask;
  int fresh_node; /* the node of fresh memory the task touched (pages_node) */
} on_lane;

static void probe_task(void *ctx) {
  on_lane *o = ctx;
  o->cpu = sched_getcpu();
  o->mode = -1;
  o->nodemask = 0;
  if (syscall(SYS_get_mempolicy, &o->mode, &o->nodemask, 8 * sizeof o->nodemask, NULL, 0))
    o->mode = -errno;
  size_t len = 16 * PAGE;
  char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    o->fresh_node = -ENOMEM;
    return;
  }
  memset(p, 1, len);
  o->fresh_node = pages_node(p, len, NULL);
  munmap(p, len);
}

static int probe(lanepool_lane_t *lane, on_lane *o) {
  memset(o, 0, sizeof *o);
  /* QUEUED: on the lane's own thread, never inline on the caller's. */
  return lanepool_lane_sync_flags(lane, probe_task, o, LANEPOOL_SYNC_QUEUED);
}

static int count_threads(void) {
  DIR *d = opendir("/proc/self/task");
  int n = 0;
  struct dirent *e;
  if (!d) return -1;
  while ((e = readdir(d)))
    if (e->d_name[0] != '.') n++;
  closedir(d);
  return n;
}

static lanepool_lane_t *lane_at(lanepool_t *p, int band, uint32_t i) {
  lanepool_lane_t *l = NULL;
  if (lanepool_get_lane(p, qos_of_band[band], i, &l)) abort();
  return l;
}

static lanepool_t *create(const char *name, lanepool_placement_t placement, uint32_t lanes) {
  lanepool_config_t cfg;
  lanepool_config_init(&cfg);
  cfg.name = name;
  cfg.placement = placement;
  cfg.lanes_per_band = lanes;
  lanepool_t *p = NULL;
  int rc = lanepool_create(&cfg, &p);
  CHECK_RC(rc, 0);
  return rc ? NULL : p;
}

static cpu_set_t allowed_set(void) {
  cpu_set_t set;
  thread_affinity(0, &set);
  return set;
}

/* ---- the largest-remainder rule, computed here from sysfs on its own --------------- */

/* Expected node of each lane index: nodes restricted to `allowed`, empty ones dropped,
 * shares floor(lanes * cpus / total) plus one each for the largest remainders (ties to
 * the lower node), lanes handed out in node order. Returns the node count used. */
static int expected_plan(const machine *m, const cpu_set_t *allowed, uint32_t lanes,
                         int *node_out) {
  int ids[MAX_NODES], cpus[MAX_NODES], n = 0, total = 0;
  for (int i = 0; i < m->node_count; i++) {
    cpu_set_t s;
    CPU_AND(&s, &m->node_cpus[i], allowed);
    if (CPU_COUNT(&s) == 0) continue;
    ids[n] = m->node_id[i];
    cpus[n] = CPU_COUNT(&s);
    total += cpus[n];
    n++;
  }
  if (!total) return 0;
  uint32_t share[MAX_NODES], given = 0;
  for (int i = 0; i < n; i++) given += share[i] = (uint32_t)((uint64_t)lanes * cpus[i] / total);
  int extra[MAX_NODES] = {0};
  while (given < lanes) {
    int best = -1;
    uint64_t best_rem = 0;
    for (int i = 0; i < n; i++) {
      uint64_t rem = (uint64_t)lanes * cpus[i] % total;
      if (!extra[i] && (best < 0 || rem > best_rem)) best = i, best_rem = rem;
    }
    extra[best] = 1;
    share[best]++;
    given++;
  }
  uint32_t lane = 0;
  for (int i = 0; i < n; i++)
    for (uint32_t k = 0; k < share[i]; k++) node_out[lane++] = ids[i];
  return n;
}

/* ---- checks shared by the tests ------------------------------------------------- */

/* A NUMA pool of `lanes` lanes per band, created by the calling thread (whose affinity
 * is `allowed`): each lane's node follows the rule, its thread may run exactly on its
 * node's allowed CPUs and does, its state and ring pages lie on its node, its thread
 * prefers its node, and memory a task touches lands there. `table` prints LANE lines. */
static void check_numa_pool(const machine *m, uint32_t lanes, int table) {
#ifdef LANEPOOL_HAVE_NUMA
  cpu_set_t allowed = allowed_set();
  int want[LANEPOOL_MAX_LANES_PER_BAND];
  CHECK(expected_plan(m, &allowed, lanes, want) > 0);
  lanepool_t *p = create("vmnuma", LANEPOOL_PLACEMENT_NUMA, lanes);
  if (!p) return;
  int per_node[64] = {0};
  for (int b = 0; b < LANEPOOL_BAND_COUNT; b++) {
    for (uint32_t i = 0; i < lanes; i++) {
      lanepool_lane_t *lane = lane_at(p, b, i);
      lanepool_lane_info_t info;
      CHECK_RC(lanepool_lane_info(lane, &info), 0);
      CHECK(info.node == want[i]);
      CHECK(info.cpu == -1);
      CHECK(info.placement_error == 0);
      if (b == 0 && info.node >= 0 && info.node < 64) per_node[info.node]++;
      cpu_set_t aff, node_allowed;
      CHECK_RC(thread_affinity(info.tid, &aff), 0);
      const cpu_set_t *nc = cpus_of_node(m, want[i]);
      CHECK(nc != NULL);
      if (!nc) continue;
      CPU_AND(&node_allowed, nc, &allowed);
      CHECK(CPU_EQUAL(&aff, &node_allowed));
      if (!CPU_EQUAL(&aff, &node_allowed)) {
        char x[256], y[256];
        fprintf(stderr, "  lane %s (node %d): affinity %s, node's allowed cpus %s\n",
                info.thread_name, want[i], set_str(&aff, x, sizeof x),
                set_str(&node_allowed, y, sizeof y));
      }
      /* The lane's state (the struct lanepool_get_lane points at) and its ring. */
      int state_pages = 0, ring_pages = 0;
      int state_node = pages_node(lane, lane->lane_bytes, &state_pages);
      int ring_node = pages_node(lane->ring.slots, lane->slots_bytes, &ring_pages);
      CHECK(state_node == want[i]);
      CHECK(ring_node == want[i]);
      CHECK(addr_node(lane) == want[i]);
      CHECK(addr_node(lane->ring.slots) == want[i]);
      on_lane o;
      CHECK_RC(probe(lane, &o), 0);
      CHECK(o.cpu >= 0 && CPU_ISSET(o.cpu, &node_allowed));
      CHECK(o.mode == MPOL_PREFERRED);
      CHECK(o.nodemask == 1ul << want[i]);
      CHECK(o.fresh_node == want[i]);
      if (table) {
        char a[256], nb[256];
        printf("LANE %-15s node %d  cpus %-7s (node %d: %s)  state %d (%d pages)  ring %d "
               "(%d pages)  task on cpu %d, fresh memory on %d\n",
               info.thread_name, info.node, set_str(&aff, a, sizeof a), want[i],
               set_str(nc, nb, sizeof nb), state_node, state_pages, ring_node, ring_pages, o.cpu,
               o.fresh_node);
      }
    }
  }
  char summary[256];
  size_t off = 0;
  for (int i = 0; i < m->node_count; i++) {
    int n = m->node_id[i];
    off += (size_t)snprintf(summary + off, sizeof summary - off, " node%d:%d", n,
                            n < 64 ? per_node[n] : 0);
  }
  char a[256];
  printf("numa pool: %u lanes per band, allowed %s ->%s\n", lanes, set_str(&allowed, a, sizeof a),
         summary);
  CHECK_RC(lanepool_destroy(p), 0);
#else
  (void)m;
  (void)lanes;
  (void)table;
#endif
}

/* A `cores` pool of `lanes` lanes: lane i of every band is pinned to the i-th allowed
 * CPU (mod count), the kernel agrees, a task runs there, and lane info names the CPU
 * and (NUMA build) its sysfs node, -1 without libnuma. */
static void check_cores_pool(const machine *m, uint32_t lanes, int table) {
  cpu_set_t allowed = allowed_set();
  int list[CPU_SETSIZE];
  int n = set_list(&allowed, list, CPU_SETSIZE);
  lanepool_t *p = create("vmcores", LANEPOOL_PLACEMENT_CORES, lanes);
  if (!p) return;
  if (lanes == LANEPOOL_LANES_PER_CPU) {
    lanepool_info_t pi;
    CHECK_RC(lanepool_info(p, &pi), 0);
    CHECK(pi.lanes_per_band == (uint32_t)n);
    lanes = pi.lanes_per_band;
  }
  for (int b = 0; b < LANEPOOL_BAND_COUNT; b++) {
    for (uint32_t i = 0; i < lanes; i++) {
      lanepool_lane_t *lane = lane_at(p, b, i);
      lanepool_lane_info_t info;
      CHECK_RC(lanepool_lane_info(lane, &info), 0);
      int want = list[i % (uint32_t)n];
      CHECK(info.cpu == want);
      CHECK(info.placement_error == 0);
#ifdef LANEPOOL_HAVE_NUMA
      CHECK(info.node == node_of(m, want));
      if (info.node != node_of(m, want))
        fprintf(stderr, "  lane %s pinned to cpu %d: lane info says node %d, sysfs %d\n",
                info.thread_name, want, info.node, node_of(m, want));
#else
      CHECK(info.node == -1);
#endif
      cpu_set_t aff;
      CHECK_RC(thread_affinity(info.tid, &aff), 0);
      CHECK(CPU_COUNT(&aff) == 1 && CPU_ISSET(want, &aff));
      on_lane o;
      CHECK_RC(probe(lane, &o), 0);
      CHECK(o.cpu == want);
      if (o.cpu != want)
        fprintf(stderr, "  lane %s: pinned %d, affinity count %d, task ran on %d\n",
                info.thread_name, want, CPU_COUNT(&aff), o.cpu);
      if (table && b == 0)
        printf("LANE %-15s cpu %d  node %d (sysfs %d)  affinity %d cpu(s), task on cpu %d\n",
               info.thread_name, info.cpu, info.node, node_of(m, want), CPU_COUNT(&aff), o.cpu);
    }
  }
  CHECK_RC(lanepool_destroy(p), 0);
}

/* A floating pool: every lane may run on exactly the creator's allowed CPUs. */
static void check_floating_pool(void) {
  cpu_set_t allowed = allowed_set();
  lanepool_t *p = create("vmfloat", LANEPOOL_PLACEMENT_NONE, LANEPOOL_LANES_PER_CPU);
  if (!p) return;
  lanepool_info_t pi;
  CHECK_RC(lanepool_info(p, &pi), 0);
  CHECK(pi.lanes_per_band == (uint32_t)CPU_COUNT(&allowed));
  for (int b = 0; b < LANEPOOL_BAND_COUNT; b++) {
    for (uint32_t i = 0; i < pi.lanes_per_band; i++) {
      lanepool_lane_info_t info;
      CHECK_RC(lanepool_lane_info(lane_at(p, b, i), &info), 0);
      CHECK(info.cpu == -1);
      cpu_set_t aff;
      CHECK_RC(thread_affinity(info.tid, &aff), 0);
      CHECK(CPU_EQUAL(&aff, &allowed));
      on_lane o;
      CHECK_RC(probe(lane_at(p, b, i), &o), 0);
      CHECK(o.cpu >= 0 && CPU_ISSET(o.cpu, &allowed));
    }
  }
  CHECK_RC(lanepool_destroy(p), 0);
}

/* lanepool_allowed_cpus agrees with the kernel's sched_getaffinity. */
static void check_allowed_matches(const cpu_set_t *want) {
  int cpus[CPU_SETSIZE];
  uint32_t count = 0;
  CHECK_RC(lanepool_allowed_cpus(cpus, CPU_SETSIZE, &count), 0);
  CHECK(count == (uint32_t)CPU_COUNT(want));
  for (uint32_t i = 0; i < count && i < CPU_SETSIZE; i++) CHECK(CPU_ISSET(cpus[i], want));
}

/* ---- tests ------------------------------------------------------------------------ */

static void test_topology(const machine *m) {
  cpu_set_t want[MAX_NODES];
  int n = expected_nodes(want, MAX_NODES);
  CHECK(n > 0); /* scripts/vm-test always says which topology it asked for */
  CHECK(n == m->node_count);
  for (int i = 0; i < n && i < m->node_count; i++) {
    CHECK(m->node_id[i] == i);
    CHECK(CPU_EQUAL(&want[i], &m->node_cpus[i]));
  }
  char a[256];
  for (int i = 0; i < m->node_count; i++)
    printf("sysfs node%d: cpus %s\n", m->node_id[i], set_str(&m->node_cpus[i], a, sizeof a));
  printf("online cpus %s; nproc %ld\n", set_str(&m->online, a, sizeof a),
         sysconf(_SC_NPROCESSORS_ONLN));
#ifdef LANEPOOL_HAVE_NUMA
  CHECK(numa_available() == 0);
  CHECK(lanepool_numa_supported() == 1);
  CHECK(numa_max_node() == m->node_id[m->node_count - 1]);
  for (int c = 0; c < CPU_SETSIZE; c++)
    if (CPU_ISSET(c, &m->online)) CHECK(numa_node_of_cpu(c) == node_of(m, c));
  /* The plan from the machine's topology (libnuma) equals the rule over sysfs. */
  cpu_set_t allowed = allowed_set();
  uint32_t total = (uint32_t)CPU_COUNT(&allowed);
  for (uint32_t lanes = 1; lanes <= total + 3; lanes++) {
    lanepool_lane_placement_t out[LANEPOOL_MAX_LANES_PER_BAND];
    int exp[LANEPOOL_MAX_LANES_PER_BAND];
    expected_plan(m, &allowed, lanes, exp);
    CHECK_RC(lanepool_plan_placement(LANEPOOL_PLACEMENT_NUMA, lanes, NULL, 0, NULL, NULL, 0, out,
                                     LANEPOOL_MAX_LANES_PER_BAND),
             0);
    for (uint32_t i = 0; i < lanes; i++) CHECK(out[i].node == exp[i] && out[i].cpu == -1);
  }
#endif
}

static void test_numa(const machine *m) {
  cpu_set_t allowed = allowed_set();
  uint32_t total = (uint32_t)CPU_COUNT(&allowed);
  CHECK(m->node_count >= 2);
  /* One lane per CPU: each node gets exactly as many lanes as it has CPUs. */
  check_numa_pool(m, total, 1);
  /* Fewer lanes than CPUs, and more: the largest remainder decides. */
  check_numa_pool(m, 3, 0);
  check_numa_pool(m, total + 1, 0);
  /* The creator restricted to one node: every lane goes there. */
  for (int i = 0; i < m->node_count; i++) {
    pid_t pid = fork();
    if (pid == 0) {
      passed = failed = 0;
      if (sched_setaffinity(0, sizeof m->node_cpus[i], &m->node_cpus[i])) _exit(99);
      check_numa_pool(m, 2, 0);
      _exit(failed ? 1 : 0);
    }
    int st = 0;
    CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
  }
}

static void test_cores(const machine *m) {
  cpu_set_t allowed = allowed_set();
  CHECK(CPU_EQUAL(&allowed, &m->online));
  check_allowed_matches(&allowed);
  check_cores_pool(m, LANEPOOL_LANES_PER_CPU, 1);            /* one lane per CPU */
  check_cores_pool(m, (uint32_t)CPU_COUNT(&allowed) + 3, 0); /* wraps past the last */
  check_floating_pool();
}

static void test_holes(const machine *m) {
  /* CPUs 1, 3, 5, 6 (as `taskset -c 1,3,5-6`), those of them that exist. */
  static const int holes[] = {1, 3, 5, 6};
  cpu_set_t set;
  CPU_ZERO(&set);
  for (size_t i = 0; i < sizeof holes / sizeof holes[0]; i++)
    if (CPU_ISSET(holes[i], &m->online)) CPU_SET(holes[i], &set);
  CHECK(CPU_COUNT(&set) >= 2);
  CHECK(sched_setaffinity(0, sizeof set, &set) == 0);
  cpu_set_t now = allowed_set();
  CHECK(CPU_EQUAL(&now, &set));
  char a[256];
  printf("process restricted to cpus %s\n", set_str(&set, a, sizeof a));
  check_allowed_matches(&set);
  check_cores_pool(m, LANEPOOL_LANES_PER_CPU, 1);
  check_cores_pool(m, 6, 0);
  check_floating_pool();
  /* A CPU list naming a CPU outside the set is refused, and says which field. */
  int outside = 0;
  while (CPU_ISSET(outside, &set)) outside++;
  lanepool_config_t cfg;
  lanepool_config_init(&cfg);
  cfg.placement = LANEPOOL_PLACEMENT_CPU_LIST;
  int cpus[2] = {1, outside};
  cfg.cpus = cpus;
  cfg.cpu_count = 2;
  const char *field = NULL;
  CHECK_RC(lanepool_config_check(&cfg, &field), EINVAL);
  CHECK(field && strcmp(field, "cpus") == 0);
  lanepool_t *p = NULL;
  CHECK_RC(lanepool_create(&cfg, &p), EINVAL);
#ifdef LANEPOOL_HAVE_NUMA
  check_numa_pool(m, (uint32_t)CPU_COUNT(&set), 1);
#endif
}

static int set_online(int cpu, int on) {
  char path[128];
  snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/online", cpu);
  FILE *f = fopen(path, "w");
  if (!f) return errno;
  int rc = fprintf(f, "%d\n", on) < 0 ? EIO : 0;
  if (fclose(f) != 0 && !rc) rc = errno;
  return rc;
}

static void test_offline(machine *m, int cpu) {
  char path[128];
  snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/online", cpu);
  if (access(path, W_OK) != 0) {
    printf("offline: %s is missing: this kernel cannot take cpu%d offline\n", path, cpu);
    CHECK(access(path, W_OK) == 0);
    return;
  }
  CHECK(CPU_ISSET(cpu, &m->online));
  /* A pool pinned to every CPU before, and one lane of it pinned to the victim. */
  lanepool_t *before = create("vmbefore", LANEPOOL_PLACEMENT_CORES, LANEPOOL_LANES_PER_CPU);
  int victim_index = 0;
  for (int c = 0; c < cpu; c++)
    if (CPU_ISSET(c, &m->online)) victim_index++;

  CHECK_RC(set_online(cpu, 0), 0);
  machine after;
  CHECK(read_machine(&after) == 0);
  CHECK(!CPU_ISSET(cpu, &after.online));
  CHECK(CPU_COUNT(&after.online) == CPU_COUNT(&m->online) - 1);
  cpu_set_t allowed = allowed_set();
  CHECK(!CPU_ISSET(cpu, &allowed));
  CHECK(CPU_EQUAL(&allowed, &after.online));
  char a[256], b[256];
  printf("cpu%d offline: online %s, allowed %s\n", cpu, set_str(&after.online, a, sizeof a),
         set_str(&allowed, b, sizeof b));
  check_allowed_matches(&after.online);
  /* New pools leave the offline CPU out. */
  check_cores_pool(&after, LANEPOOL_LANES_PER_CPU, 1);
  check_floating_pool();
#ifdef LANEPOOL_HAVE_NUMA
  check_numa_pool(&after, (uint32_t)CPU_COUNT(&allowed), 1);
#endif
  /* The lane that was pinned to it still runs tasks (the kernel moved its thread). */
  if (before) {
    on_lane o;
    CHECK_RC(probe(lane_at(before, 0, (uint32_t)victim_index), &o), 0);
    CHECK(o.cpu >= 0 && o.cpu != cpu);
  }
  CHECK_RC(set_online(cpu, 1), 0);
  CHECK(read_machine(&after) == 0);
  CHECK(CPU_ISSET(cpu, &after.online));
  allowed = allowed_set();
  CHECK(CPU_ISSET(cpu, &allowed));
  /* Back in the set, for pinning and for NUMA placement alike (the node's CPU list
   * is read again: libnuma's cached one would still lack the CPU). */
  check_cores_pool(m, LANEPOOL_LANES_PER_CPU, 0);
#ifdef LANEPOOL_HAVE_NUMA
  check_numa_pool(m, (uint32_t)CPU_COUNT(&allowed), 0);
#endif
  if (before) CHECK_RC(lanepool_destroy(before), 0);
}

/* NUMA build, numa_available() < 0: a seccomp filter makes get_mempolicy fail with
 * ENOSYS, as on a kernel without NUMA, in a child process. */
__attribute__((unused)) static int numa_unavailable_child(const machine *m) {
#ifdef LANEPOOL_HAVE_NUMA
  struct sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_get_mempolicy, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (ENOSYS & SECCOMP_RET_DATA)),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  struct sock_fprog prog = {.len = sizeof filter / sizeof filter[0], .filter = filter};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog)) {
    fprintf(stderr, "seccomp: %s\n", strerror(errno));
    return 1;
  }
  passed = failed = 0;
  CHECK(numa_available() < 0);
  CHECK(lanepool_numa_supported() == 0);
  lanepool_config_t cfg;
  lanepool_config_init(&cfg);
  cfg.placement = LANEPOOL_PLACEMENT_NUMA;
  cfg.lanes_per_band = 2;
  const char *field = NULL;
  CHECK_RC(lanepool_config_check(&cfg, &field), ENOTSUP);
  CHECK(field && strcmp(field, "placement") == 0);
  int threads = count_threads();
  lanepool_t *p = NULL;
  CHECK_RC(lanepool_create(&cfg, &p), ENOTSUP);
  CHECK(p == NULL);
  CHECK(count_threads() == threads);
  lanepool_lane_placement_t out[8];
  CHECK_RC(lanepool_plan_placement(LANEPOOL_PLACEMENT_NUMA, 2, NULL, 0, NULL, NULL, 0, out, 8),
           ENOTSUP);
  /* Lanes pinned per core still work; their node is unknown (-1). */
  lanepool_t *c = create("vmnonuma", LANEPOOL_PLACEMENT_CORES, 2);
  if (c) {
    lanepool_lane_info_t info;
    CHECK_RC(lanepool_lane_info(lane_at(c, 0, 1), &info), 0);
    CHECK(info.cpu >= 0 && info.node == -1);
    on_lane o;
    CHECK_RC(probe(lane_at(c, 0, 1), &o), 0);
    CHECK(o.cpu == info.cpu);
    CHECK_RC(lanepool_destroy(c), 0);
  }
  (void)m;
  printf("numa-unavailable child: %d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
#else
  (void)m;
  return 1;
#endif
}

static void test_numa_unavailable(const machine *m) {
#ifdef LANEPOOL_HAVE_NUMA
  CHECK(numa_available() == 0); /* before: available */
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    int rc = numa_unavailable_child(m);
    fflush(stdout);
    _exit(rc);
  }
  int st = 0;
  CHECK(waitpid(pid, &st, 0) == pid);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  CHECK(numa_available() == 0); /* the parent is unaffected */
#else
  (void)m;
  CHECK(!"numa-unavailable needs the NUMA build");
#endif
}

/* The build without libnuma on a two-node machine: what the docs promise. */
static void test_nonuma(const machine *m) {
#ifdef LANEPOOL_HAVE_NUMA
  (void)m;
  CHECK(!"nonuma needs the build without LANEPOOL_HAVE_NUMA");
#else
  CHECK(m->node_count >= 2); /* the machine has nodes; the build cannot see them */
  CHECK(lanepool_numa_supported() == 0);
  lanepool_config_t cfg;
  lanepool_config_init(&cfg);
  cfg.placement = LANEPOOL_PLACEMENT_NUMA;
  cfg.lanes_per_band = 2;
  const char *field = NULL;
  CHECK_RC(lanepool_config_check(&cfg, &field), ENOTSUP);
  CHECK(field && strcmp(field, "placement") == 0);
  int threads = count_threads();
  lanepool_t *p = NULL;
  CHECK_RC(lanepool_create(&cfg, &p), ENOTSUP);
  CHECK(count_threads() == threads);
  /* The machine's topology needs libnuma; an injected one can still be planned. */
  lanepool_lane_placement_t out[LANEPOOL_MAX_LANES_PER_BAND];
  CHECK_RC(lanepool_plan_placement(LANEPOOL_PLACEMENT_NUMA, 2, NULL, 0, NULL, NULL, 0, out,
                                   LANEPOOL_MAX_LANES_PER_BAND),
           ENOTSUP);
  lanepool_topology_node_t nodes[MAX_NODES];
  int cpus[MAX_NODES][64];
  for (int i = 0; i < m->node_count; i++) {
    nodes[i].node = m->node_id[i];
    nodes[i].cpu_count = (uint32_t)set_list(&m->node_cpus[i], cpus[i], 64);
    nodes[i].cpus = cpus[i];
  }
  lanepool_topology_t topo = {(uint32_t)m->node_count, nodes};
  cpu_set_t allowed = allowed_set();
  uint32_t lanes = (uint32_t)CPU_COUNT(&allowed);
  int exp[LANEPOOL_MAX_LANES_PER_BAND];
  expected_plan(m, &allowed, lanes, exp);
  CHECK_RC(lanepool_plan_placement(LANEPOOL_PLACEMENT_NUMA, lanes, NULL, 0, &topo, NULL, 0, out,
                                   LANEPOOL_MAX_LANES_PER_BAND),
           0);
  for (uint32_t i = 0; i < lanes; i++) CHECK(out[i].node == exp[i]);
  /* A pool over an injected topology is refused too: binding and node memory need
   * libnuma (docs/priorities.md: "a numa pool fails with ENOTSUP"). */
  cfg.topology = &topo;
  CHECK_RC(lanepool_create(&cfg, &p), ENOTSUP);
  CHECK(count_threads() == threads);
  /* Pinning works without libnuma; the node is unknown (-1) in lane info. */
  check_cores_pool(m, LANEPOOL_LANES_PER_CPU, 1);
  check_floating_pool();
#endif
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc < 2) {
    fprintf(stderr,
            "usage: vm_test topology|numa|cores|holes|offline CPU|numa-unavailable|nonuma\n");
    return 2;
  }
  const char *test = argv[1];
  current_test = test;
  machine m;
  if (read_machine(&m)) {
    fprintf(stderr, "vm_test: cannot read /sys/devices/system/{cpu,node}\n");
    return 2;
  }
  if (strcmp(test, "topology") == 0)
    test_topology(&m);
  else if (strcmp(test, "numa") == 0)
    test_numa(&m);
  else if (strcmp(test, "cores") == 0)
    test_cores(&m);
  else if (strcmp(test, "holes") == 0)
    test_holes(&m);
  else if (strcmp(test, "offline") == 0 && argc > 2)
    test_offline(&m, atoi(argv[2]));
  else if (strcmp(test, "numa-unavailable") == 0)
    test_numa_unavailable(&m);
  else if (strcmp(test, "nonuma") == 0)
    test_nonuma(&m);
  else {
    fprintf(stderr, "vm_test: unknown test %s\n", test);
    return 2;
  }
  printf("%s: %d passed, %d failed\n", test, passed, failed);
  return failed ? 1 : 0;
}
