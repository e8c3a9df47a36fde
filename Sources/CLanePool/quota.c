/*
 * quota.c - the CPU quota of the process's cgroup (cgroup v2 cpu.max, cgroup v1
 * cpu.cfs_quota_us / cpu.cfs_period_us), which sizes the default pool together with
 * the affinity mask. Pure functions over an injectable cgroup mount point and
 * /proc/self/cgroup path, so tests run them on fixture files.
 *
 * The process's cgroup comes from /proc/self/cgroup: "0::/path" (v2) and the line
 * whose controller list holds "cpu" (v1, usually "N:cpu,cpuacct:/path"). Each level
 * from that cgroup up to the mount point is read (a nested cgroup cannot use more than
 * its parent's quota, so the smallest quota wins); a level whose file is missing or
 * unreadable is skipped, which also covers a container whose /proc/self/cgroup names a
 * host path while its own cgroup is mounted at the root. v2 is looked for at
 * <root>/<path>/cpu.max and, for hybrid hosts, <root>/unified/<path>/cpu.max; v1 at
 * <root>/cpu,cpuacct/<path>, <root>/cpu/<path> and <root>/cpuacct,cpu/<path>. Quotas
 * found in both are combined (the smallest wins). CPUs = ceil(quota / period).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define QUOTA_PATH_MAX 4096

/* Reads at most cap-1 bytes of a small file into buf (NUL-terminated). 0 or errno. */
static int read_small(const char *path, char *buf, size_t cap) {
  FILE *f = fopen(path, "re");
  if (!f) return errno ? errno : ENOENT;
  size_t n = fread(buf, 1, cap - 1, f);
  int err = ferror(f);
  fclose(f);
  if (err) return EIO;
  buf[n] = '\0';
  return 0;
}

/* A decimal number (none is negative: v1's -1 for "no quota" is refused as garbage
 * is); the rest must be end, space or newline. Returns a pointer past it, or NULL. */
static const char *parse_num(const char *s, int64_t *out) {
  if (*s < '0' || *s > '9') return NULL;
  uint64_t v = 0;
  while (*s >= '0' && *s <= '9') {
    if (v > (UINT64_C(1) << 62) / 10) return NULL; /* absurdly large: garbage */
    v = v * 10 + (uint64_t)(*s - '0');
    s++;
  }
  if (*s != '\0' && *s != ' ' && *s != '\n' && *s != '\t') return NULL;
  *out = (int64_t)v;
  return s;
}

static uint32_t cpus_of(int64_t quota, int64_t period) {
  uint64_t q = (uint64_t)quota, p = (uint64_t)period;
  uint64_t n = q / p + (q % p != 0);
  if (n == 0) n = 1;
  return n > UINT32_MAX ? UINT32_MAX : (uint32_t)n;
}

/* Scratch space, on the heap: every pool's creation reads the quota, maybe on a lane
 * whose stack is PTHREAD_STACK_MIN. */
typedef struct {
  char cgroup[8192], base[QUOTA_PATH_MAX], dir[QUOTA_PATH_MAX], path[QUOTA_PATH_MAX];
} quota_scratch;

/* v2 cpu.max: "max PERIOD" (no quota) or "QUOTA PERIOD". 0 with *cpus, or ENOENT. */
static int read_cpu_max(const char *dir, char *path, uint32_t *cpus) {
  char buf[128];
  if ((size_t)snprintf(path, QUOTA_PATH_MAX, "%s/cpu.max", dir) >= QUOTA_PATH_MAX) return ENOENT;
  if (read_small(path, buf, sizeof buf)) return ENOENT;
  int64_t quota, period;
  const char *p = parse_num(buf, &quota);
  if (!p || *p != ' ') return ENOENT;
  p = parse_num(p + 1, &period);
  if (!p || quota <= 0 || period <= 0) return ENOENT;
  *cpus = cpus_of(quota, period);
  return 0;
}

/* v1 cpu.cfs_quota_us (-1: no quota) and cpu.cfs_period_us. */
static int read_cfs(const char *dir, char *path, uint32_t *cpus) {
  char buf[64];
  int64_t quota, period;
  if ((size_t)snprintf(path, QUOTA_PATH_MAX, "%s/cpu.cfs_quota_us", dir) >= QUOTA_PATH_MAX)
    return ENOENT;
  if (read_small(path, buf, sizeof buf) || !parse_num(buf, &quota) || quota <= 0) return ENOENT;
  if ((size_t)snprintf(path, QUOTA_PATH_MAX, "%s/cpu.cfs_period_us", dir) >= QUOTA_PATH_MAX)
    return ENOENT;
  if (read_small(path, buf, sizeof buf) || !parse_num(buf, &period) || period <= 0) return ENOENT;
  *cpus = cpus_of(quota, period);
  return 0;
}

/* Every level from base + cgpath up to base itself; the smallest quota into *best. */
static void walk(quota_scratch *q, const char *base, const char *cgpath, int v2, int *found,
                 uint32_t *best) {
  char *dir = q->dir;
  if ((size_t)snprintf(dir, QUOTA_PATH_MAX, "%s%s%s", base, cgpath[0] == '/' ? "" : "/", cgpath) >=
      QUOTA_PATH_MAX)
    return;
  size_t base_len = strlen(base);
  for (;;) {
    /* Drop trailing slashes (but never into base). */
    size_t len = strlen(dir);
    while (len > base_len && dir[len - 1] == '/') dir[--len] = '\0';
    uint32_t n;
    if ((v2 ? read_cpu_max(dir, q->path, &n) : read_cfs(dir, q->path, &n)) == 0) {
      if (!*found || n < *best) *best = n;
      *found = 1;
    }
    if (len <= base_len) break;
    char *slash = strrchr(dir + base_len, '/');
    *(slash ? slash : dir + base_len) = '\0';
  }
}

static int has_cpu_controller(const char *list, size_t len) {
  const char *p = list, *end = list + len;
  while (p < end) {
    const char *comma = memchr(p, ',', (size_t)(end - p));
    size_t n = comma ? (size_t)(comma - p) : (size_t)(end - p);
    if (n == 3 && memcmp(p, "cpu", 3) == 0) return 1;
    if (!comma) break;
    p = comma + 1;
  }
  return 0;
}

int lanepool__cpu_quota(const char *sys_root, const char *proc_cgroup_path, uint32_t *cpus_out) {
  if (!sys_root || !proc_cgroup_path || !cpus_out) return EINVAL;
  quota_scratch *q = malloc(sizeof *q);
  if (!q) return ENOMEM;
  char *buf = q->cgroup, *base = q->base;
  int found = 0;
  uint32_t best = 0;
  if (read_small(proc_cgroup_path, buf, sizeof q->cgroup)) goto out;
  for (char *line = buf, *next; line && *line; line = next) {
    next = strchr(line, '\n');
    if (next) *next++ = '\0';
    /* "ID:CONTROLLERS:PATH" */
    char *c1 = strchr(line, ':');
    if (!c1) continue;
    char *c2 = strchr(c1 + 1, ':');
    if (!c2) continue;
    const char *path = c2 + 1;
    if (path[0] != '/' || strstr(path, "/../") || strcmp(path, "/..") == 0) continue;
    size_t ctl_len = (size_t)(c2 - (c1 + 1));
    if (ctl_len == 0 && strncmp(line, "0:", 2) == 0) {
      walk(q, sys_root, path, 1, &found, &best);
      if ((size_t)snprintf(base, QUOTA_PATH_MAX, "%s/unified", sys_root) < QUOTA_PATH_MAX)
        walk(q, base, path, 1, &found, &best);
    } else if (has_cpu_controller(c1 + 1, ctl_len)) {
      static const char *const mounts[] = {"cpu,cpuacct", "cpu", "cpuacct,cpu"};
      for (size_t m = 0; m < sizeof mounts / sizeof mounts[0]; m++)
        if ((size_t)snprintf(base, QUOTA_PATH_MAX, "%s/%s", sys_root, mounts[m]) < QUOTA_PATH_MAX)
          walk(q, base, path, 0, &found, &best);
    }
  }
out:
  free(q);
  if (!found) return ENOENT;
  *cpus_out = best;
  return 0;
}

#ifdef LANEPOOL_TEST_HOOKS
const char *lanepool__test_cgroup_root, *lanepool__test_proc_cgroup; /* both, or neither */
#endif

int lanepool_cpu_quota(uint32_t *cpus) {
  if (!cpus) return EINVAL;
#ifdef LANEPOOL_TEST_HOOKS
  if (lanepool__test_cgroup_root)
    return lanepool__cpu_quota(lanepool__test_cgroup_root, lanepool__test_proc_cgroup, cpus);
#endif
  return lanepool__cpu_quota("/sys/fs/cgroup", "/proc/self/cgroup", cpus);
}
