/*
 * procfs.h - the C tests' look-ups in /proc/self/task, shared by api_test.c,
 * edge_test.c, lifecycle_test.c, steal_test.c and Tests/perf/rescue_wakes.c.
 */
#ifndef LANEPOOL_TEST_PROCFS_H
#define LANEPOOL_TEST_PROCFS_H

#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

/* The next thread listed in `d` (an opendir of /proc/self/task): its id and its name
 * (comm, without the newline). false at the end. A thread that ended meanwhile is
 * skipped. */
static bool __attribute__((unused)) next_thread(DIR *d, pid_t *tid, char *comm, size_t size) {
  struct dirent *e;
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.') continue;
    char path[300];
    snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
    FILE *f = fopen(path, "r");
    if (!f) continue;
    bool named = fgets(comm, (int)size, f) != NULL;
    fclose(f);
    if (!named) continue;
    comm[strcspn(comm, "\n")] = 0;
    *tid = (pid_t)atoi(e->d_name);
    return true;
  }
  return false;
}

/* The kernel thread id of this process's (first) thread named exactly `name`, or 0. */
static pid_t __attribute__((unused)) thread_named(const char *name) {
  DIR *d = opendir("/proc/self/task");
  if (!d) return 0;
  pid_t tid, found = 0;
  char comm[32];
  while (!found && next_thread(d, &tid, comm, sizeof comm))
    if (strcmp(comm, name) == 0) found = tid;
  closedir(d);
  return found;
}

/* Thread `tid` of this process is asleep (state S in its stat: blocked in a wait). */
static bool __attribute__((unused)) thread_blocked(pid_t tid) {
  char path[64], buf[512];
  snprintf(path, sizeof path, "/proc/self/task/%d/stat", (int)tid);
  FILE *f = fopen(path, "r");
  if (!f) return false;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = 0;
  char *close = strrchr(buf, ')');
  return close && close[1] == ' ' && close[2] == 'S';
}

#endif /* LANEPOOL_TEST_PROCFS_H */
