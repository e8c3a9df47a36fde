/*
 * neighbour.c - a neighbour process of known shape for scripts/w3-neighbour: it busy-
 * loops `on_ms`, sleeps `off_ms`, and repeats for `seconds`, as a service that wakes up,
 * works a few milliseconds and sleeps again. Not part of the library or of CI.
 *
 *   cc -O2 Tests/perf/neighbour.c -o neighbour && ./neighbour on_ms off_ms seconds
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
  if (argc != 4 || atof(argv[1]) <= 0 || atof(argv[2]) <= 0 || atof(argv[3]) <= 0) {
    fprintf(stderr, "usage: neighbour on_ms off_ms seconds (each > 0)\n");
    return 64;
  }
  double on = atof(argv[1]) / 1e3, off = atof(argv[2]) / 1e3;
  double end = now_s() + atof(argv[3]);
  struct timespec pause = {(time_t)off, (long)((off - (double)(time_t)off) * 1e9)};
  while (now_s() < end) {
    double until = now_s() + on;
    while (now_s() < until) {}
    nanosleep(&pause, NULL);
  }
  return 0;
}
