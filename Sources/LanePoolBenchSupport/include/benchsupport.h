/* lanepool-bench's shim for the GNU-only affinity calls Swift's Glibc module hides. */
#ifndef LANEPOOL_BENCHSUPPORT_H
#define LANEPOOL_BENCHSUPPORT_H
/** Restricts the calling thread to the given CPUs. 0 or errno. */
int lpb_set_affinity(const int *cpus, int count);
#endif
