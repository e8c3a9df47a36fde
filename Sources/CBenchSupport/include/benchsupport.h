/* lanepool-bench's shim for the GNU-only affinity calls Swift's Glibc module hides. */
#ifndef LANEPOOL_BENCHSUPPORT_H
#define LANEPOOL_BENCHSUPPORT_H
/** The calling thread's allowed CPUs, ascending; returns how many (at most max). */
int lpb_allowed_cpus(int *out, int max);
/** Restricts the calling thread to the given CPUs. 0 or errno. */
int lpb_set_affinity(const int *cpus, int count);
#endif
