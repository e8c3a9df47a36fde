/* lanepool-bench's shim for the GNU-only affinity calls Swift's Glibc module hides,
 * and the bare-ring cost of the `limit` row. */
#ifndef LANEPOOL_BENCHSUPPORT_H
#define LANEPOOL_BENCHSUPPORT_H
#include <stdint.h>
/** Restricts the calling thread to the given CPUs. 0 or errno. */
int lpb_set_affinity(const int *cpus, int count);

/* The calling thread's timer slack (prctl PR_SET_TIMERSLACK): sets it to `ns` (0 restores
 * the thread's default) and returns the previous value, or -1 with errno. */
long lpb_set_timer_slack(unsigned long ns);

/* Sleeps `ns` nanoseconds (clock_nanosleep on CLOCK_MONOTONIC, resumed after a signal). */
void lpb_sleep_ns(uint64_t ns);
/** Single-threaded push then pop (calling each task) of `tasks` tiny tasks through the
 *  core's ring (Sources/CLanePool/ring.h) of `capacity` cells, in batches of a full
 *  ring: *push_ns and *pop_ns per task. 0, EINVAL, ENOMEM, or EIO (the ring refused a
 *  push or a pop, or a task did not run: a bug). */
int lpb_ring_cost(uint64_t tasks, uint32_t capacity, double *push_ns, double *pop_ns);
/** The same ring across two cores: a producer thread pinned to `producer_cpu` pushes
 *  `tasks` tiny tasks (retrying while the ring is full), a consumer thread pinned to
 *  `consumer_cpu` pops and calls them (polling while it is empty); *ns_per_task is the
 *  wall time from the start signal until both are done, per task. A CPU < 0 is not
 *  pinned. 0, EINVAL, ENOMEM, EIO (a task lost: a bug), or pthread_create's error. */
int lpb_ring_cross_core(uint64_t tasks, uint32_t capacity, int producer_cpu, int consumer_cpu,
                        double *ns_per_task);
#endif
