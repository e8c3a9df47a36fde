/*
 * procfs.h - the C tests' look-ups in /proc/self/task, shared by api_test.c and
 * edge_test.c.
 */
#ifndef LANEPOOL_TEST_PROCFS_H
#define LANEPOOL_TEST_PROCFS_H

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

/* The kernel thread id of this process's (first) thread named exactly `name`, or 0. */
static pid_t __attribute__((unused)) thread_named(const char *name) {
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

#endif /* LANEPOOL_TEST_PROCFS_H */
