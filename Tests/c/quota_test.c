/*
 * quota_test.c - the default pool's sizing: the cgroup CPU quota parser on fixture
 * files (lanepool__cpu_quota over a temporary cgroup tree), and the default pool's
 * configuration (lanepool_default_configure, LANEPOOL_DEFAULT_* environment) in forked
 * children, so each child creates its own default pool.
 * Build: cc -std=gnu11 -O2 -Wall -Wextra -Werror -pthread -Iinclude -ISources/CLanePool \
 *          Tests/c/quota_test.c Sources/CLanePool/(all).c
 * Prints "N passed, M failed"; exits 0 when every check holds.
 */
#define _GNU_SOURCE
#include "lanepool.h"
#include "check.h"
#include "internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>


static char root[256];

static void mkdirs(const char *rel) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", root, rel);
  for (char *p = path + strlen(root) + 1; *p; p++) {
    if (*p == '/') {
      *p = '\0';
      mkdir(path, 0700);
      *p = '/';
    }
  }
  mkdir(path, 0700);
}

static void put(const char *rel, const char *text) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", root, rel);
  char *slash = strrchr(path, '/');
  if ((size_t)(slash - path) > strlen(root)) {
    *slash = '\0';
    mkdirs(path + strlen(root) + 1);
    *slash = '/';
  }
  FILE *f = fopen(path, "w");
  if (!f) {
    perror(path);
    exit(2);
  }
  fputs(text, f);
  fclose(f);
}

/* A fresh fixture tree: root/proc_cgroup and root/sys (the cgroup mount point). */
static void fresh(const char *proc_cgroup) {
  char cmd[512];
  if (root[0]) {
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    if (system(cmd) != 0) exit(2);
  }
  snprintf(root, sizeof root, "/tmp/lanepool-quota-XXXXXX");
  if (!mkdtemp(root)) {
    perror("mkdtemp");
    exit(2);
  }
  mkdirs("sys");
  if (proc_cgroup) put("proc_cgroup", proc_cgroup);
}

/* lanepool__cpu_quota on the current fixture; -1 for ENOENT, -2 for another error. */
static long quota(void) {
  char sys[300], proc[300];
  snprintf(sys, sizeof sys, "%s/sys", root);
  snprintf(proc, sizeof proc, "%s/proc_cgroup", root);
  uint32_t n = 12345;
  int rc = lanepool__cpu_quota(sys, proc, &n);
  if (rc == ENOENT) return n == 12345 ? -1 : -3; /* untouched on ENOENT */
  if (rc) return -2;
  return (long)n;
}

static void fixture_tests(void) {
  /* v2, no quota. */
  fresh("0::/app\n");
  put("sys/app/cpu.max", "max 100000\n");
  CHECK(quota() == -1);
  /* v2, 1.5 CPUs rounds up to 2. */
  fresh("0::/app\n");
  put("sys/app/cpu.max", "150000 100000\n");
  CHECK(quota() == 2);
  /* v2, exactly 2. */
  fresh("0::/app\n");
  put("sys/app/cpu.max", "200000 100000\n");
  CHECK(quota() == 2);
  /* v2, half a CPU: at least 1. */
  fresh("0::/app\n");
  put("sys/app/cpu.max", "50000 100000\n");
  CHECK(quota() == 1);
  /* v2 nested: the parent's smaller quota wins; a "max" level in between is skipped. */
  fresh("0::/kubepods/pod1/ctr\n");
  put("sys/kubepods/cpu.max", "300000 100000\n");
  put("sys/kubepods/pod1/cpu.max", "max 100000\n");
  put("sys/kubepods/pod1/ctr/cpu.max", "800000 100000\n");
  CHECK(quota() == 3);
  /* v2 nested: the child's smaller quota wins. */
  fresh("0::/a/b\n");
  put("sys/a/cpu.max", "400000 100000\n");
  put("sys/a/b/cpu.max", "100000 100000\n");
  CHECK(quota() == 1);
  /* v2 in a container: /proc/self/cgroup names a host path; the mount root has the file. */
  fresh("0::/system.slice/docker-abc.scope\n");
  put("sys/cpu.max", "200000 100000\n");
  CHECK(quota() == 2);
  /* v2 on a hybrid host: <root>/unified. */
  fresh("1:cpu,cpuacct:/\n0::/svc\n");
  put("sys/unified/svc/cpu.max", "250000 100000\n");
  CHECK(quota() == 3);
  /* v1: quota / period = 2.5 -> 3. */
  fresh("12:memory:/x\n4:cpu,cpuacct:/docker/abc\n1:name=systemd:/docker/abc\n");
  put("sys/cpu,cpuacct/docker/abc/cpu.cfs_quota_us", "250000\n");
  put("sys/cpu,cpuacct/docker/abc/cpu.cfs_period_us", "100000\n");
  CHECK(quota() == 3);
  /* v1 with the controller mounted alone at <root>/cpu, controllers listed the other way. */
  fresh("3:cpuacct,cpu:/job\n");
  put("sys/cpu/job/cpu.cfs_quota_us", "300000\n");
  put("sys/cpu/job/cpu.cfs_period_us", "100000\n");
  CHECK(quota() == 3);
  /* v1, -1: no quota. */
  fresh("4:cpu,cpuacct:/\n");
  put("sys/cpu,cpuacct/cpu.cfs_quota_us", "-1\n");
  put("sys/cpu,cpuacct/cpu.cfs_period_us", "100000\n");
  CHECK(quota() == -1);
  /* v1: "cpuacct" alone is not the cpu controller. */
  fresh("2:cpuacct:/x\n");
  put("sys/cpuacct/x/cpu.cfs_quota_us", "100000\n");
  put("sys/cpuacct/x/cpu.cfs_period_us", "100000\n");
  CHECK(quota() == -1);
  /* Missing: no /proc/self/cgroup; no cgroup files; quota without period. */
  fresh(NULL);
  CHECK(quota() == -1);
  fresh("0::/app\n");
  CHECK(quota() == -1);
  fresh("4:cpu,cpuacct:/\n");
  put("sys/cpu,cpuacct/cpu.cfs_quota_us", "100000\n");
  CHECK(quota() == -1);
  /* Garbage: ENOENT, never a crash or a made-up number. */
  static const char *const bad_max[] = {"",
                                        "\n",
                                        "abc",
                                        "100000",
                                        "100000 ",
                                        "100000 abc",
                                        "-5 100000",
                                        "0 100000",
                                        "100000 0",
                                        " 100000 100000",
                                        "99999999999999999999999 100000",
                                        "1e5 100000",
                                        "max",
                                        "\xff\xfe garbage"};
  for (size_t i = 0; i < sizeof bad_max / sizeof bad_max[0]; i++) {
    fresh("0::/app\n");
    put("sys/app/cpu.max", bad_max[i]);
    long q = quota();
    if (q != -1) fprintf(stderr, "cpu.max \"%s\": %ld\n", bad_max[i], q);
    CHECK(q == -1);
  }
  static const char *const bad_proc[] = {
      "", "garbage", "0:/app", ":::::\n", "0::app\n", "0::/../../etc\n", "4:cpu,cpuacct:\n"};
  for (size_t i = 0; i < sizeof bad_proc / sizeof bad_proc[0]; i++) {
    fresh(bad_proc[i]);
    put("sys/etc/cpu.max", "100000 100000\n");
    put("sys/app/cpu.max", "100000 100000\n");
    long q = quota();
    if (q != -1) fprintf(stderr, "/proc/self/cgroup \"%s\": %ld\n", bad_proc[i], q);
    CHECK(q == -1);
  }
  fresh("4:cpu,cpuacct:/\n");
  put("sys/cpu,cpuacct/cpu.cfs_quota_us", "lots\n");
  put("sys/cpu,cpuacct/cpu.cfs_period_us", "100000\n");
  CHECK(quota() == -1);
  /* NULL arguments. */
  uint32_t n;
  CHECK(lanepool__cpu_quota(NULL, "/proc/self/cgroup", &n) == EINVAL);
  CHECK(lanepool__cpu_quota("/sys/fs/cgroup", "/proc/self/cgroup", NULL) == EINVAL);
  CHECK(lanepool_cpu_quota(NULL) == EINVAL);
  char cmd[512];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", root);
}

/* ---- the default pool, one forked child per case -------------------------------- */

enum { CHILD_OK = 0 };

/* Runs fn in a child; the child's exit status is the number of failed checks (or 100+
 * for a setup failure). Counts one check here. */
static void in_child(const char *what, int (*fn)(void)) {
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0) {
    perror("fork");
    failed++;
    return;
  }
  if (pid == 0) _exit(fn());
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
    passed++;
  } else {
    failed++;
    fprintf(stderr, "child '%s': %s %d\n", what, WIFEXITED(status) ? "exit" : "signal",
            WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
  }
}

static int lanes_of_default(uint32_t *lanes, uint32_t *ring) {
  lanepool_t *p = NULL;
  int rc = lanepool_default(&p);
  if (rc) return rc;
  lanepool_info_t info;
  if ((rc = lanepool_info(p, &info))) return rc;
  if (!info.is_default) return -1;
  *lanes = info.lanes_per_band;
  if (ring) *ring = info.ring_capacity;
  return 0;
}

static void clear_env(void) {
  unsetenv("LANEPOOL_DEFAULT_LANES");
  unsetenv("LANEPOOL_DEFAULT_PLACEMENT");
  unsetenv("LANEPOOL_DEFAULT_RING");
}

static uint32_t expected_default_lanes(void) {
  uint32_t allowed = 0, quota;
  int cpus[1024];
  if (lanepool_allowed_cpus(cpus, 1024, &allowed)) allowed = 1;
  uint32_t n = allowed;
  if (lanepool_cpu_quota(&quota) == 0 && quota < n) n = quota;
  if (n < 1) n = 1;
  if (n > LANEPOOL_MAX_LANES_PER_BAND) n = LANEPOOL_MAX_LANES_PER_BAND;
  return n;
}

static int child_plain(void) {
  clear_env();
  uint32_t lanes;
  if (lanes_of_default(&lanes, NULL)) return 101;
  return lanes == expected_default_lanes() ? 0 : 1;
}

static int child_env_lanes(void) {
  clear_env();
  setenv("LANEPOOL_DEFAULT_LANES", "3", 1);
  setenv("LANEPOOL_DEFAULT_RING", "64", 1);
  setenv("LANEPOOL_DEFAULT_PLACEMENT", "none", 1);
  uint32_t lanes, ring;
  if (lanes_of_default(&lanes, &ring)) return 101;
  return (lanes == 3) + (ring == 64) == 2 ? 0 : 1;
}

static int child_env_placement_cores(void) {
  clear_env();
  setenv("LANEPOOL_DEFAULT_LANES", "2", 1);
  setenv("LANEPOOL_DEFAULT_PLACEMENT", "cores", 1);
  uint32_t lanes;
  if (lanes_of_default(&lanes, NULL)) return 101;
  return lanes == 2 ? 0 : 1;
}

static int expect_einval_env(const char *name, const char *value) {
  clear_env();
  setenv(name, value, 1);
  lanepool_t *p = NULL;
  int fails = 0;
  if (lanepool_default(&p) != EINVAL) fails++;
  if (p != NULL) fails++;
  /* Still refused on a second call; fixed, it starts. */
  if (lanepool_default(&p) != EINVAL) fails++;
  unsetenv(name);
  uint32_t lanes;
  if (lanes_of_default(&lanes, NULL)) fails++;
  return fails;
}
static int child_env_lanes_0(void) { return expect_einval_env("LANEPOOL_DEFAULT_LANES", "0"); }
static int child_env_lanes_abc(void) { return expect_einval_env("LANEPOOL_DEFAULT_LANES", "abc"); }
static int child_env_lanes_65(void) { return expect_einval_env("LANEPOOL_DEFAULT_LANES", "65"); }
static int child_env_lanes_neg(void) { return expect_einval_env("LANEPOOL_DEFAULT_LANES", "-2"); }
static int child_env_lanes_sp(void) { return expect_einval_env("LANEPOOL_DEFAULT_LANES", " 2"); }
static int child_env_placement(void) {
  return expect_einval_env("LANEPOOL_DEFAULT_PLACEMENT", "numa");
}
static int child_env_ring_3(void) { return expect_einval_env("LANEPOOL_DEFAULT_RING", "1000"); }
static int child_env_ring_1(void) { return expect_einval_env("LANEPOOL_DEFAULT_RING", "1"); }
static int child_env_ring_big(void) {
  return expect_einval_env("LANEPOOL_DEFAULT_RING", "4294967296");
}

static int child_configure(void) {
  clear_env();
  int fails = 0;
  lanepool_config_t cfg;
  lanepool_config_init(&cfg);
  char name[16] = "cfgpool";
  cfg.name = name;
  cfg.lanes_per_band = 5; /* replaced by the second call */
  if (lanepool_default_configure(&cfg) != 0) fails++;
  cfg.lanes_per_band = 3;
  cfg.ring_capacity = 128;
  if (lanepool_default_configure(&cfg) != 0) fails++;
  strcpy(name, "changed"); /* the name was copied */
  lanepool_t *p = NULL;
  if (lanepool_default(&p) != 0) return 101;
  lanepool_info_t info;
  if (lanepool_info(p, &info)) return 102;
  if (info.lanes_per_band != 3) fails++;
  if (info.ring_capacity != 128) fails++;
  if (strcmp(info.name, "cfgpool") != 0) fails++;
  /* Once it exists: EALREADY, and nothing changes. */
  cfg.lanes_per_band = 7;
  if (lanepool_default_configure(&cfg) != EALREADY) fails++;
  lanepool_t *q = NULL;
  if (lanepool_default(&q) != 0 || q != p) fails++;
  if (lanepool_info(q, &info) || info.lanes_per_band != 3) fails++;
  return fails;
}

static int child_configure_env_wins(void) {
  clear_env();
  setenv("LANEPOOL_DEFAULT_LANES", "2", 1);
  lanepool_config_t cfg;
  lanepool_config_init(&cfg);
  cfg.lanes_per_band = 4;
  if (lanepool_default_configure(&cfg) != 0) return 101;
  uint32_t lanes;
  if (lanes_of_default(&lanes, NULL)) return 102;
  return lanes == 2 ? 0 : 1;
}

static int child_configure_bad(void) {
  clear_env();
  int fails = 0;
  lanepool_config_t cfg;
  lanepool_config_init(&cfg);
  if (lanepool_default_configure(NULL) != EINVAL) fails++;
  cfg.lanes_per_band = 0;
  if (lanepool_default_configure(&cfg) != EINVAL) fails++;
  lanepool_config_init(&cfg);
  cfg.ring_capacity = 3;
  if (lanepool_default_configure(&cfg) != EINVAL) fails++;
  lanepool_config_init(&cfg);
  cfg.name = "";
  if (lanepool_default_configure(&cfg) != EINVAL) fails++;
  /* A topology is not accepted (even with no placement that reads it). */
  lanepool_topology_t topo = {0, NULL};
  lanepool_config_init(&cfg);
  cfg.topology = &topo;
  if (lanepool_default_configure(&cfg) != EINVAL) fails++;
  /* A CPU list is copied. */
  int cpus[1];
  uint32_t count = 0;
  if (lanepool_allowed_cpus(cpus, 1, &count) != 0 && count == 0) return 103;
  int list[1] = {cpus[0]};
  lanepool_config_init(&cfg);
  cfg.placement = LANEPOOL_PLACEMENT_CPU_LIST;
  cfg.cpus = list;
  cfg.cpu_count = 1;
  cfg.lanes_per_band = 2;
  if (lanepool_default_configure(&cfg) != 0) fails++;
  list[0] = -5; /* would be refused if it were read now */
  uint32_t lanes;
  if (lanes_of_default(&lanes, NULL) || lanes != 2) fails++;
  return fails;
}

/* After a fork, the child forgets its parent's default pool and may configure its own. */
static int child_fork_then_configure(void) {
  clear_env();
  lanepool_t *p = NULL;
  if (lanepool_default(&p) != 0) return 101;
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    lanepool_config_t cfg;
    lanepool_config_init(&cfg);
    cfg.lanes_per_band = 2;
    if (lanepool_default_configure(&cfg) != 0) _exit(1);
    uint32_t lanes;
    if (lanes_of_default(&lanes, NULL) || lanes != 2) _exit(2);
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}

int main(void) {
  fixture_tests();
  uint32_t q = 0;
  int rc = lanepool_cpu_quota(&q);
  if (rc == 0)
    printf("this machine: CPU quota %u\n", q);
  else
    printf("this machine: no CPU quota (%s)\n", strerror(rc));
  CHECK(rc == 0 || rc == ENOENT);
  printf("this machine: default pool lanes per band %u\n", expected_default_lanes());

  in_child("plain default", child_plain);
  in_child("env lanes 3, ring 64", child_env_lanes);
  in_child("env placement cores", child_env_placement_cores);
  in_child("env lanes 0", child_env_lanes_0);
  in_child("env lanes abc", child_env_lanes_abc);
  in_child("env lanes 65", child_env_lanes_65);
  in_child("env lanes -2", child_env_lanes_neg);
  in_child("env lanes ' 2'", child_env_lanes_sp);
  in_child("env placement numa", child_env_placement);
  in_child("env ring 1000", child_env_ring_3);
  in_child("env ring 1", child_env_ring_1);
  in_child("env ring 2^32", child_env_ring_big);
  in_child("configure", child_configure);
  in_child("configure, env wins", child_configure_env_wins);
  in_child("configure bad", child_configure_bad);
  in_child("fork then configure", child_fork_then_configure);

  printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
