/*
 * placement.c - where lanes run: floating, pinned per core, pinned from a CPU list, or
 * spread over NUMA nodes. Planning is a pure function of (placement, lane count, CPU
 * list, topology, allowed CPUs) so tests can check it against any topology; applying
 * happens inside each lane thread. libnuma is used only when built with
 * LANEPOOL_HAVE_NUMA.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "internal.h"

#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef LANEPOOL_HAVE_NUMA
#include <numa.h>
#endif

int lanepool_numa_supported(void) {
#ifdef LANEPOOL_HAVE_NUMA
  return numa_available() >= 0;
#else
  return 0;
#endif
}

#ifdef LANEPOOL_TEST_HOOKS
const int *lanepool__test_allowed;
uint32_t lanepool__test_allowed_count;
#endif

int lanepool__affinity_cpus(int **out, uint32_t *count) {
  *out = NULL;
  *count = 0;
#ifdef LANEPOOL_TEST_HOOKS
  if (lanepool__test_allowed) {
    uint32_t n = lanepool__test_allowed_count;
    if (!(*out = malloc((n ? n : 1) * sizeof **out))) return ENOMEM;
    if (n) memcpy(*out, lanepool__test_allowed, n * sizeof **out);
    *count = n;
    return 0;
  }
#endif
  /* A CPU_ALLOC set, grown until sched_getaffinity takes its size (internal.h). */
  cpu_set_t *set = NULL;
  size_t size = 0;
  for (int n = CPU_SETSIZE; !set; n *= 2) {
    if (n > (1 << 22)) return EINVAL;
    if (!(set = CPU_ALLOC(n))) return ENOMEM;
    size = CPU_ALLOC_SIZE(n);
    CPU_ZERO_S(size, set);
    if (sched_getaffinity(0, size, set) != 0) {
      int e = errno;
      CPU_FREE(set);
      set = NULL;
      if (e != EINVAL) return e;
    }
  }
  uint32_t total = (uint32_t)CPU_COUNT_S(size, set), n = 0;
  int *cpus = malloc((total ? total : 1) * sizeof *cpus);
  if (!cpus) {
    CPU_FREE(set);
    return ENOMEM;
  }
  for (size_t cpu = 0; cpu < size * 8 && n < total; cpu++)
    if (CPU_ISSET_S(cpu, size, set)) cpus[n++] = (int)cpu;
  CPU_FREE(set);
  *out = cpus;
  *count = n;
  return 0;
}

void *lanepool__cpu_set_of(const int *cpus, uint32_t n, size_t *size) {
  int max = -1;
  for (uint32_t i = 0; i < n; i++)
    if (cpus[i] > max) max = cpus[i];
  if (max < 0) return NULL;
  cpu_set_t *set = CPU_ALLOC(max + 1);
  if (!set) return NULL;
  *size = CPU_ALLOC_SIZE(max + 1);
  CPU_ZERO_S(*size, set);
  for (uint32_t i = 0; i < n; i++)
    if (cpus[i] >= 0) CPU_SET_S((size_t)cpus[i], *size, set);
  return set;
}

int lanepool_allowed_cpus(int *out, uint32_t max, uint32_t *count) {
  if (!out || !count) return EINVAL;
  int *all;
  uint32_t total;
  int rc = lanepool__affinity_cpus(&all, &total);
  if (rc) return rc;
  memcpy(out, all, (total < max ? total : max) * sizeof *out);
  free(all);
  *count = total;
  return 0;
}

bool lanepool__contains(const int *xs, uint32_t n, int x) {
  for (uint32_t i = 0; i < n; i++)
    if (xs[i] == x) return true;
  return false;
}

#ifdef LANEPOOL_HAVE_NUMA
static bool numa_node_exists(int node) {
  return numa_available() >= 0 && node >= 0 && node <= numa_max_node() &&
         numa_bitmask_isbitset(numa_all_nodes_ptr, (unsigned)node);
}

/* Parses a sysfs CPU list ("0-2,5") into a malloc'd array (*out, caller frees);
 * returns how many CPUs, or -1 (a malformed list, no memory). */
static int parse_cpulist(const char *s, int **out) {
  int n = 0, cap = 0;
  int *cpus = NULL;
  while (*s && *s != '\n') {
    char *end;
    long a = strtol(s, &end, 10), b;
    if (end == s || a < 0 || a > INT_MAX) goto bad;
    b = a;
    s = end;
    if (*s == '-') {
      b = strtol(s + 1, &end, 10);
      if (end == s + 1 || b < a || b > INT_MAX) goto bad;
      s = end;
    }
    for (long c = a; c <= b; c++) {
      if (n == cap) {
        int ncap = cap ? cap * 2 : 64;
        int *grown = realloc(cpus, (size_t)ncap * sizeof *grown);
        if (!grown) goto bad;
        cpus = grown;
        cap = ncap;
      }
      cpus[n++] = (int)c;
    }
    if (*s == ',')
      s++;
    else if (*s && *s != '\n')
      goto bad;
  }
  *out = cpus;
  return n;
bad:
  free(cpus);
  return -1;
}

/* A node's online CPUs as sysfs tells them now. libnuma's numa_node_to_cpus (and so
 * numa_node_of_cpu) caches each node's CPU mask on first use and never reads it again:
 * a CPU that was offline then and came back later is missing from it for the life of
 * the process (seen on a real kernel: scripts/vm-test, offline step). */
static int node_cpus_now(int node, int **out) {
  char path[64], buf[65536];
  snprintf(path, sizeof path, "/sys/devices/system/node/node%d/cpulist", node);
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  size_t len = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[len] = 0;
  return parse_cpulist(buf, out);
}
#endif

/* The machine's topology: the nodes libnuma lets us allocate on, each with the CPUs
 * sysfs lists for it now (online ones). Caller frees with lanepool__topology_free.
 * ENOTSUP without libnuma. */
static int machine_topology(lanepool__topology *out) {
#ifdef LANEPOOL_HAVE_NUMA
  if (numa_available() < 0) return ENOTSUP;
  int max_node = numa_max_node();
  if (max_node < 0) return ENOTSUP;
  out->node_count = 0;
  out->nodes = calloc((size_t)max_node + 1, sizeof *out->nodes);
  if (!out->nodes) return ENOMEM;
  for (int node = 0; node <= max_node; node++) {
    if (!numa_bitmask_isbitset(numa_all_nodes_ptr, (unsigned)node)) continue;
    int *cpus = NULL; /* stays NULL without a CPU list: a node without CPUs (the plan drops it) */
    int n = node_cpus_now(node, &cpus);
    out->nodes[out->node_count++] = (lanepool__topo_node){node, n > 0 ? (uint32_t)n : 0, cpus};
  }
  return 0;
#else
  (void)out;
  return ENOTSUP;
#endif
}

static int topology_copy(const lanepool_topology_t *in, lanepool__topology *out) {
  out->node_count = 0;
  out->nodes = NULL;
  if (in->node_count > LANEPOOL__MAX_NODES || (in->node_count && !in->nodes)) return EINVAL;
  out->nodes = calloc(in->node_count ? in->node_count : 1, sizeof *out->nodes);
  if (!out->nodes) return ENOMEM;
  for (uint32_t i = 0; i < in->node_count; i++) {
    const lanepool_topology_node_t *src = &in->nodes[i];
    if (src->node < 0 || (src->cpu_count && !src->cpus)) {
      lanepool__topology_free(out);
      return EINVAL;
    }
    lanepool__topo_node *tn = &out->nodes[out->node_count++];
    tn->node = src->node;
    tn->cpus = calloc(src->cpu_count ? src->cpu_count : 1, sizeof(int));
    if (!tn->cpus) {
      lanepool__topology_free(out);
      return ENOMEM;
    }
    if (src->cpu_count) /* an empty node may come with cpus NULL: memcpy's never is */
      memcpy(tn->cpus, src->cpus, src->cpu_count * sizeof(int));
    tn->cpu_count = src->cpu_count;
  }
  return 0;
}

void lanepool__topology_free(lanepool__topology *t) {
  for (uint32_t i = 0; i < t->node_count; i++) free(t->nodes[i].cpus);
  free(t->nodes);
  t->nodes = NULL;
  t->node_count = 0;
}

/* Keeps only allowed CPUs in every node; drops nodes left empty. */
static void restrict_topology(lanepool__topology *t, const int *allowed, uint32_t n) {
  uint32_t kept = 0;
  for (uint32_t i = 0; i < t->node_count; i++) {
    lanepool__topo_node node = t->nodes[i];
    uint32_t c = 0;
    for (uint32_t j = 0; j < node.cpu_count; j++)
      if (lanepool__contains(allowed, n, node.cpus[j])) node.cpus[c++] = node.cpus[j];
    node.cpu_count = c;
    if (c == 0) {
      free(node.cpus);
      continue;
    }
    t->nodes[kept++] = node;
  }
  t->node_count = kept;
}

/* Largest-remainder apportionment of `lanes` over the nodes by CPU count: each node
 * gets floor(lanes * cpus / total), then the lanes left over go one each to the nodes
 * with the largest remainders (ties to the lower node). */
static void apportion(const lanepool__topology *t, uint32_t lanes, uint32_t *share) {
  uint64_t total = 0;
  for (uint32_t i = 0; i < t->node_count; i++) total += t->nodes[i].cpu_count;
  uint32_t given = 0;
  for (uint32_t i = 0; i < t->node_count; i++) {
    share[i] = (uint32_t)((uint64_t)lanes * t->nodes[i].cpu_count / total);
    given += share[i];
  }
  /* Fewer than node_count lanes are left over, so no node needs two extras. */
  bool extra[LANEPOOL__MAX_NODES] = {false};
  while (given < lanes) {
    uint32_t best = UINT32_MAX;
    uint64_t best_rem = 0;
    for (uint32_t i = 0; i < t->node_count && i < LANEPOOL__MAX_NODES; i++) {
      if (extra[i]) continue;
      uint64_t rem = (uint64_t)lanes * t->nodes[i].cpu_count % total;
      if (best == UINT32_MAX || rem > best_rem) {
        best = i;
        best_rem = rem;
      }
    }
    if (best == UINT32_MAX) best = 0; /* unreachable: leftovers < node count */
    extra[best] = true;
    share[best]++;
    given++;
  }
}

int lanepool__plan(lanepool_placement_t placement, uint32_t lanes, const int *cpus,
                   uint32_t cpu_count, const lanepool_topology_t *given, lanepool__topology *topo,
                   const int *allowed, uint32_t allowed_count, lanepool_lane_placement_t *out) {
  if (placement == LANEPOOL_PLACEMENT_NUMA) {
    int rc = given ? topology_copy(given, topo) : machine_topology(topo);
    if (rc) return rc;
  }
  for (uint32_t i = 0; i < lanes; i++) out[i] = (lanepool_lane_placement_t){-1, -1};
  switch (placement) {
  case LANEPOOL_PLACEMENT_NONE:
    return 0;
  case LANEPOOL_PLACEMENT_CORES:
    if (allowed_count == 0) return EINVAL;
    for (uint32_t i = 0; i < lanes; i++) out[i].cpu = allowed[i % allowed_count];
    return 0;
  case LANEPOOL_PLACEMENT_CPU_LIST:
    if (!cpus || cpu_count == 0) return EINVAL;
    for (uint32_t j = 0; j < cpu_count; j++)
      if (!lanepool__contains(allowed, allowed_count, cpus[j])) return EINVAL;
    for (uint32_t i = 0; i < lanes; i++) out[i].cpu = cpus[i % cpu_count];
    return 0;
  case LANEPOOL_PLACEMENT_NUMA: {
    restrict_topology(topo, allowed, allowed_count);
    if (topo->node_count == 0) return EINVAL;
    uint32_t *share = calloc(topo->node_count, sizeof *share);
    if (!share) return ENOMEM;
    apportion(topo, lanes, share);
    uint32_t lane = 0;
    for (uint32_t n = 0; n < topo->node_count; n++)
      for (uint32_t k = 0; k < share[n]; k++) out[lane++].node = topo->nodes[n].node;
    free(share);
    return 0;
  }
  }
  return EINVAL;
}

int lanepool_plan_placement(lanepool_placement_t placement, uint32_t lanes_per_band,
                            const int *cpus, uint32_t cpu_count,
                            const lanepool_topology_t *topology, const int *allowed,
                            uint32_t allowed_count, lanepool_lane_placement_t *out,
                            uint32_t out_count) {
  if (!out || lanes_per_band == 0 || out_count < lanes_per_band) return EINVAL;
  if (allowed && allowed_count == 0) return EINVAL;
  int *own = NULL;
  if (!allowed) {
    int rc = lanepool__affinity_cpus(&own, &allowed_count);
    if (rc) return rc;
    allowed = own;
  }
  lanepool__topology topo = {0, NULL};
  int rc = lanepool__plan(placement, lanes_per_band, cpus, cpu_count, topology, &topo, allowed,
                          allowed_count, out);
  lanepool__topology_free(&topo);
  free(own);
  return rc;
}

/* In the lane thread: pins to one CPU, or binds to the node's CPUs. 0 or errno. */
int lanepool__apply_placement(lanepool_lane_t *lane) {
  const lanepool_t *pool = lane->pool;
  if (lane->spare && pool->rescue_cpu_count == 0) return 0; /* floats, as band lanes do */
  if (!lane->spare && lane->cpu < 0 && lane->node < 0) return 0;
  cpu_set_t *set;
  size_t size = 0;
  if (lane->spare) { /* a rescue lane: every CPU of its pool's band lanes */
    set = lanepool__cpu_set_of(pool->rescue_cpus, pool->rescue_cpu_count, &size);
  } else if (lane->cpu >= 0) {
    set = lanepool__cpu_set_of(&lane->cpu, 1, &size);
  } else {
    const lanepool__topo_node *n = lanepool__topology_node(&lane->pool->topology, lane->node);
    if (!n) return EINVAL;
    set = lanepool__cpu_set_of(n->cpus, n->cpu_count, &size);
  }
  if (!set) return ENOMEM;
  int rc = sched_setaffinity(0, size, set) == 0 ? 0 : errno;
  CPU_FREE(set);
#ifdef LANEPOOL_HAVE_NUMA
  if (lane->node >= 0 && numa_node_exists(lane->node)) numa_set_preferred(lane->node);
#endif
  return rc;
}

const lanepool__topo_node *lanepool__topology_node(const lanepool__topology *t, int node) {
  for (uint32_t i = 0; i < t->node_count; i++)
    if (t->nodes[i].node == node) return &t->nodes[i];
  return NULL;
}

/* Memory for a lane's state and ring: on its node when it is a real node. */
void *lanepool__alloc_on_node(size_t bytes, int node, bool *numa_owned) {
  *numa_owned = false;
#ifdef LANEPOOL_HAVE_NUMA
  if (node >= 0 && numa_node_exists(node)) {
    void *p = numa_alloc_onnode(bytes, node); /* page aligned, zeroed */
    if (p) {
      *numa_owned = true;
      return p;
    }
  }
#else
  (void)node;
#endif
  void *p = aligned_alloc(LANEPOOL__CACHE_LINE, bytes);
  if (p) memset(p, 0, bytes);
  return p;
}

void lanepool__free_on_node(void *p, size_t bytes, bool numa_owned) {
  if (!p) return;
#ifdef LANEPOOL_HAVE_NUMA
  if (numa_owned) {
    numa_free(p, bytes);
    return;
  }
#else
  (void)bytes;
  (void)numa_owned;
#endif
  free(p);
}

/* The node a CPU belongs to, for lane info; -1 when unknown. Read from the CPU's
 * sysfs folder (its nodeN entry), which stays while the CPU is offline, and kept: a
 * present CPU never changes node. Not numa_node_of_cpu: its cache loses a CPU that
 * was offline when it was filled (see node_cpus_now). */
#ifdef LANEPOOL_HAVE_NUMA
static _Atomic int cpu_node_cache[CPU_SETSIZE]; /* node + 1; 0: not read yet */

static int node_of_cpu_sysfs(int cpu) {
  char path[64];
  snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d", cpu);
  DIR *d = opendir(path);
  if (!d) return -1;
  int node = -1;
  struct dirent *e;
  while ((e = readdir(d))) {
    char *end;
    if (strncmp(e->d_name, "node", 4) != 0) continue;
    long n = strtol(e->d_name + 4, &end, 10);
    if (end != e->d_name + 4 && *end == 0 && n >= 0 && n < INT_MAX) {
      node = (int)n;
      break;
    }
  }
  closedir(d);
  return node;
}
#endif

int lanepool__node_of_cpu(int cpu) {
#ifdef LANEPOOL_HAVE_NUMA
  if (cpu < 0 || numa_available() < 0) return -1;
  if (cpu >= CPU_SETSIZE) return node_of_cpu_sysfs(cpu);
  int cached = atomic_load_explicit(&cpu_node_cache[cpu], memory_order_relaxed);
  if (cached > 0) return cached - 1;
  int node = node_of_cpu_sysfs(cpu);
  if (node >= 0) atomic_store_explicit(&cpu_node_cache[cpu], node + 1, memory_order_relaxed);
  return node;
#else
  (void)cpu;
  return -1;
#endif
}
