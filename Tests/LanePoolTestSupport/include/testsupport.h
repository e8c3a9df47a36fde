/* Test-only helpers: raw syscalls Swift cannot call (variadic or macro-based), used to
 * check what LanePool claims through code paths independent of the library's own. */
#ifndef LANEPOOL_TESTSUPPORT_H
#define LANEPOOL_TESTSUPPORT_H
#include <stddef.h>
#include <stdint.h>

/** ioprio_get(IOPRIO_WHO_PROCESS, tid): (class << 13) | level, or -1. */
int lp_test_ioprio_get(int tid);
/** prctl(PR_GET_TIMERSLACK) for the calling thread, in ns. */
long lp_test_timer_slack(void);
/** sched_getcpu() of the calling thread. */
int lp_test_current_cpu(void);
/** Number of CPUs in the affinity mask of thread `tid`; `first` gets the lowest. */
int lp_test_affinity(int tid, int *first);
/** Restricts the calling thread's affinity to one CPU. 0 or errno. */
int lp_test_pin_self(int cpu);
/** Drops the whole process to uid/gid (RLIMIT_NICE 0, setgroups, setgid, setuid). 0 or
 *  errno. */
int lp_test_drop_privileges(unsigned uid, unsigned gid);
/** setpriority(PRIO_PROCESS, 0 = calling thread, nice). 0 or errno. */
int lp_test_set_own_nice(int nice);
/** Bytes malloc has handed out and not had back (mallinfo2: uordblks + hblkhd). */
size_t lp_test_heap_in_use(void);
/** The calling thread's kernel thread id (gettid). */
int lp_test_gettid(void);
/** The C core's seeded-yield mode (Sources/CLanePool/inject.h), reachable only in a
 * build with `-Xcc -DLANEPOOL_TEST_INJECT` (every C target then has the points and
 * this shim calls them). Sets `seed` (0: off) and the sleep cap; returns 1 if the mode
 * is built in, 0 if not (then it does nothing). */
int lp_test_inject_configure(uint64_t seed, uint32_t sleep_us);
/** Points reached with injection on since the last configure (0 when not built in). */
uint64_t lp_test_inject_hits_total(void);
/** The core's inject points a Swift hook can stop a thread at (inject.h's numbers). */
enum { LP_TEST_AT_WAKE = 3, LP_TEST_AT_QUIESCENT = 11 };
/** A test hook on the core's inject points (lanepool__inject_set_hook): `hook` is called
 * by every thread that reaches a point while it is set; NULL removes it. Returns 1 if the
 * points are built in (-DLANEPOOL_TEST_INJECT), 0 if not (then it does nothing). */
int lp_test_inject_set_hook(void (*hook)(int point));
/** 1 when `pool` (a lanepool_t *) is CANCELLING: a cancel started it or escalated its
 * drain, and the drain has not ended (test builds only; 0 when not built in). */
int lp_test_pool_cancelling(const void *pool);
/** 1 when `lane` (a lanepool_lane_t *) is parked on its futex: its word says PARKED and
 * its thread `tid` is blocked (test builds only; 0 when not built in). */
int lp_test_lane_parked(const void *lane, int tid);
#endif
