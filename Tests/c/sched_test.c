/*
 * sched_test.c - the life cycle of the real C core under the controlled scheduler
 * (ctlsched.h): every pair of life-cycle operations, and a few triples, each on its own
 * thread, run under thousands of schedules chosen by PCT and by a random walk.
 *
 * Operations: async (an outside submit), sync (lanepool_lane_sync: inline on a
 * borrowed lane or queued), after (a timer due at once), follow (a task whose run
 * submits a follow-up to another lane, which submits one more), timer-from-task (a
 * task that sets a timer from its lane), drain and cancel (lanepool_shutdown), destroy
 * (lanepool_destroy; it waits until every other thread of the scenario is inside its
 * call, so that each call is in flight as destroy starts: a destroy racing a call that
 * has not begun would be the caller's error), stuck (band work that queues band work
 * and waits for it while its band's one thread is held by it: only the band's rescue
 * thread, whose delay this test cuts to 1 ms, can run it), orphan (band work that queues
 * lane-bound work on the lane whose thread runs it and waits: only the rescue thread can
 * take that lane's exclusion and run its queue). Pool: one lane per band and its rescue
 * thread, rings of 2 (a third queued task goes to an overflow list; the band queue's
 * ring is as small), no spinning.
 * Escalation's chain (band.c, "the chain"; sync.c, rewalk): lane B is the utility lane,
 * C the background one, A the default one. chain: a gate task on C that passes the turn
 * twice, then a task on B that makes a queued sync onto C (it boosts C to utility and is
 * listed on B). chain2: a task on B whose queued sync onto C runs a closure that makes a
 * queued sync onto A (listed on C and on B: two hops). boost-b: lanepool_lane_boost_begin
 * (B, userInteractive), two points, lanepool_lane_boost_end. sync-b: a queued sync onto B
 * from the (default-band) scenario thread. help-b: a task on A whose sync onto B waits
 * behind the chain's task: A's thread boosts B and runs B's queue up to its sync once B
 * is free (sync.c, help_until_answered). Either changes B's band while the chain waits:
 * the waiter is told and moves its boost, racing C's answer and a stop. Every run checks,
 * right before its pool is freed (the AT_FREE point; every lane joined, every call out),
 * that every lane's boost_waiting counts are 0, its boost_band its own band, its
 * chain_waiters list empty, and no carrier recorded (carried 0, carrier.band 0).
 * The carrier (band.c, "The carrier"; docs/priorities.md, "Which thread"): a thread
 * that holds C's exclusion from outside while C is boosted runs at the boost and puts
 * itself back when it gives C up. borrow: a thread enters the background band
 * (lanepool_thread_enter_band) and runs a closure inline on the idle C
 * (lanepool_lane_sync; queued, and run by C's thread, when C is busy) that passes the
 * turn twice. borrow-late: the same once a boost has begun (the boost before the take).
 * borrow-next: a second borrower, once the first one's closure has ended (it takes C
 * right after the first gives it up, or queues if the first still holds it). boost-c:
 * lanepool_lane_boost_begin(C, userInteractive), two points, lanepool_lane_boost_end.
 * boost-in: begins once the first closure runs, one point, ends (racing the closure's
 * end); boost-inend: the same, and the closure waits until it has ended (the carrier
 * stays raised with no waiter left); boost-out: begins once the closure runs, ends once
 * every borrower's sync has returned. wait-c: a queued sync onto C from a
 * userInteractive-band thread (it boosts C while queued); wait-in: the same once the
 * first closure runs (queued behind it, as a rule). Each borrower checks, once its sync
 * has returned, that it has exactly what it had before it (nice, policy, the
 * sched_getattr fields, I/O priority, timer slack: the background band's, nice 10);
 * each closure checks, at each of its points, that if its thread holds C from outside
 * while C is boosted and no other carrier is recorded or being looked for, it is C's
 * recorded carrier and (where the pool's userInteractive lane got that nice: root) runs
 * at the userInteractive nice. The report counts the schedules in which a borrower ran
 * its closure raised.
 * band.c has no injection point, so a boost, a tell and a rewalk each run within one
 * turn (the waiter, woken by a tell, resumes at its futex's AT_RESUME). Built with
 * -DSCHED_WRAP_BOOST_LOCK -Wl,--wrap=pthread_mutex_lock -Wl,--wrap=pthread_mutex_unlock,
 * a point precedes every take of a lane's boost_lock by a thread that holds no other
 * lock: between a sync's answer leaving its boost and storing its state, a rewalk's
 * ticket swap and its drop of the old count, a boost count's change and its update, a
 * listing and the band read. (Not between rewalk's read of its ticket and its CAS: that
 * window, the CAS that loses to the answer, only real concurrency reaches.)
 * Nor does the plain build split the carrier's Dekker pair (an update's store of
 * carried = LOOK and its look at excl, against a holder's store of excl = 0 and its
 * look at carried): both halves run within one turn. Built with -DSCHED_WRAP_SYSCALL
 * -Wl,--wrap=syscall, a point follows every sched_getattr and sched_setattr that names
 * a thread by id: inside carrier_raise, under boost_lock, between the update's look at
 * excl and its store of carried, where the holder may then give C up (it waits for the
 * watchdog if it needs that boost_lock). Breaking the pair (no LOOK store) fails
 * borrow scenarios there, not in the plain build. Both wraps may be combined.
 * Each run checks: every accepted task ran or was handed to the discard callback,
 * exactly once, a refused one neither; a sync that returned 0 ran once, one that
 * returned an error never; every return code is one the API documents; the run ends
 * (an alarm turns a hang into a failure that names the seed). Build it with ASan too.
 *
 * Build (as .ci/run does):
 *   cc -std=gnu11 -O1 -g -pthread -DLANEPOOL_TEST_INJECT -Iinclude -ISources/CLanePool \
 *      Tests/c/sched_test.c Tests/c/ctlsched.c Sources/CLanePool/(all).c -o sched_test
 *   ./sched_test [--runs N] [--scenario NAME] [--strategy pct|random] [--seed S] [--fork]
 *                [--pct-steps N] [--list]
 * --runs: schedules per scenario and strategy (default 500), seeds S, S+1, ...
 * (default S = 1). --fork runs each schedule in a child process and goes on after a
 * failure (a hang, a sanitizer report): it counts the failing seeds, for a survey.
 * --pct-steps: PCT's length estimate, fixed (by default it starts at 64 and grows to the
 * longest run so far, which depends on timing: a replay must give the value the run had).
 * A failure prints the line that replays it, and the seed range that finds it again:
 *   ./sched_test --scenario NAME --strategy pct --seed S --runs 1 --pct-steps N
 * Environment: LANEPOOL_SCHED_CAP_S (a run's cap, default 30 s), LANEPOOL_SCHED_TRACE,
 * LANEPOOL_SCHED_PATIENCE_US, LANEPOOL_SCHED_WATCHDOG_US (default 4000),
 * LANEPOOL_SCHED_STARVE_STEPS (default 1000, 0 off: see ctlsched.c, starve_steps),
 * LANEPOOL_SCHED_HANG_WAIT (a hang waits for a debugger instead of exiting).
 * Scenarios that reveal a defect not fixed yet are marked in the table and skipped
 * unless LANEPOOL_SCHED_KNOWN=1 (or named with --scenario); none is marked today.
 * Last line: "N passed, M failed".
 */
#define _GNU_SOURCE
#include "lanepool.h"
#include "inject.h"
#include "internal.h"
#include "ctlsched.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include "wrap_syscall.h"

enum {
  OP_ASYNC,
  OP_SYNC,
  OP_AFTER,
  OP_FOLLOW,
  OP_FOLLOW_AFTER,
  OP_DRAIN,
  OP_CANCEL,
  OP_DESTROY,
  OP_STUCK,
  OP_ORPHAN,
  OP_CHAIN,
  OP_CHAIN2,
  OP_BOOST_B,
  OP_SYNC_B,
  OP_HELP_B,
  OP_BORROW,
  OP_BORROW_LATE,
  OP_BORROW_NEXT,
  OP_BOOST_C,
  OP_BOOST_IN,
  OP_BOOST_INEND,
  OP_BOOST_OUT,
  OP_WAIT_C,
  OP_WAIT_IN,
  OP_NONE = -1
};
static const char *const op_names[] = {
    "async",   "sync",     "after",       "follow",    "timer-from-task", "drain",
    "cancel",  "destroy",  "stuck",       "orphan",    "chain",           "chain2",
    "boost-b", "sync-b",   "help-b",      "borrow",    "borrow-late",     "borrow-next",
    "boost-c", "boost-in", "boost-inend", "boost-out", "wait-c",          "wait-in"};
_Static_assert(sizeof op_names / sizeof op_names[0] == OP_WAIT_IN + 1, "op names");

typedef struct {
  int ops[3];
  /* Non-NULL: a defect this scenario shows that is not fixed yet (issue 23's number):
   * skipped unless LANEPOOL_SCHED_KNOWN=1 or named with --scenario. */
  const char *known;
} scenario;

/* Every submit kind against every stop, every pair of stops, then triples. */
static const scenario scenarios[] = {
    {{OP_ASYNC, OP_DRAIN, OP_NONE}, NULL},
    {{OP_ASYNC, OP_CANCEL, OP_NONE}, NULL},
    {{OP_ASYNC, OP_DESTROY, OP_NONE}, NULL},
    {{OP_SYNC, OP_DRAIN, OP_NONE}, NULL},
    {{OP_SYNC, OP_CANCEL, OP_NONE}, NULL},
    {{OP_SYNC, OP_DESTROY, OP_NONE}, NULL},
    {{OP_AFTER, OP_DRAIN, OP_NONE}, NULL},
    {{OP_AFTER, OP_CANCEL, OP_NONE}, NULL},
    {{OP_AFTER, OP_DESTROY, OP_NONE}, NULL},
    {{OP_FOLLOW, OP_DRAIN, OP_NONE}, NULL},
    {{OP_FOLLOW, OP_CANCEL, OP_NONE}, NULL},
    {{OP_FOLLOW, OP_DESTROY, OP_NONE}, NULL},
    {{OP_FOLLOW_AFTER, OP_DRAIN, OP_NONE}, NULL},
    {{OP_FOLLOW_AFTER, OP_CANCEL, OP_NONE}, NULL},
    {{OP_FOLLOW_AFTER, OP_DESTROY, OP_NONE}, NULL},
    {{OP_DRAIN, OP_DRAIN, OP_NONE}, NULL},
    {{OP_DRAIN, OP_CANCEL, OP_NONE}, NULL},
    {{OP_CANCEL, OP_CANCEL, OP_NONE}, NULL},
    {{OP_DRAIN, OP_DESTROY, OP_NONE}, NULL},
    {{OP_CANCEL, OP_DESTROY, OP_NONE}, NULL},
    {{OP_DESTROY, OP_DESTROY, OP_NONE}, NULL},
    {{OP_FOLLOW, OP_DRAIN, OP_CANCEL}, NULL},
    {{OP_AFTER, OP_DRAIN, OP_CANCEL}, NULL},
    {{OP_SYNC, OP_DRAIN, OP_CANCEL}, NULL},
    {{OP_ASYNC, OP_SYNC, OP_CANCEL}, NULL},
    {{OP_FOLLOW, OP_AFTER, OP_DRAIN}, NULL},
    {{OP_ASYNC, OP_DRAIN, OP_DESTROY}, NULL},
    /* The rescue lane: a band stuck behind its one lane, against every stop. */
    {{OP_STUCK, OP_DRAIN, OP_NONE}, NULL},
    {{OP_STUCK, OP_CANCEL, OP_NONE}, NULL},
    {{OP_STUCK, OP_DESTROY, OP_NONE}, NULL},
    {{OP_STUCK, OP_DRAIN, OP_CANCEL}, NULL},
    {{OP_STUCK, OP_ASYNC, OP_DRAIN}, NULL},
    {{OP_STUCK, OP_ASYNC, OP_CANCEL}, NULL},
    /* The band queue and a lane's exclusion: a band job that waits for lane-bound work
     * on the lane whose thread runs it (only the rescue thread can run that lane's
     * queue), a sync taking the exclusion from the lane's thread, and both at once. */
    {{OP_ORPHAN, OP_DRAIN, OP_NONE}, NULL},
    {{OP_ORPHAN, OP_CANCEL, OP_NONE}, NULL},
    {{OP_ORPHAN, OP_DESTROY, OP_NONE}, NULL},
    {{OP_ORPHAN, OP_SYNC, OP_DRAIN}, NULL},
    {{OP_ORPHAN, OP_ASYNC, OP_DRAIN}, NULL},
    {{OP_SYNC, OP_FOLLOW, OP_DRAIN}, NULL},
    {{OP_SYNC, OP_SYNC, OP_CANCEL}, NULL},
    /* Escalation's chain re-walked: a task on B waits on C while B's band changes, against
     * C's answer and every stop (no destroy with boost-b: an end after destroy returned
     * would be the caller's error). */
    {{OP_CHAIN, OP_BOOST_B, OP_NONE}, NULL},
    {{OP_CHAIN, OP_SYNC_B, OP_NONE}, NULL},
    {{OP_CHAIN, OP_CANCEL, OP_NONE}, NULL},
    {{OP_CHAIN, OP_DESTROY, OP_NONE}, NULL},
    {{OP_CHAIN, OP_BOOST_B, OP_SYNC_B}, NULL},
    {{OP_CHAIN, OP_BOOST_B, OP_DRAIN}, NULL},
    {{OP_CHAIN, OP_BOOST_B, OP_CANCEL}, NULL},
    {{OP_CHAIN, OP_SYNC_B, OP_DRAIN}, NULL},
    {{OP_CHAIN, OP_SYNC_B, OP_CANCEL}, NULL},
    {{OP_CHAIN, OP_SYNC_B, OP_DESTROY}, NULL},
    /* A waiter of the pool on the chain: a task on A whose sync onto B waits behind the
     * chain's task (which waits on C) boosts B, so C through the chain, and runs B's
     * queue up to its sync once B is free (sync.c, help_until_answered), against C's
     * answer, a boost of B and every stop. Not with chain2, whose closure on C syncs
     * onto A: with help-b holding A that is a real cycle. */
    {{OP_CHAIN, OP_HELP_B, OP_NONE}, NULL},
    {{OP_CHAIN, OP_HELP_B, OP_DRAIN}, NULL},
    {{OP_CHAIN, OP_HELP_B, OP_CANCEL}, NULL},
    {{OP_CHAIN, OP_HELP_B, OP_DESTROY}, NULL},
    {{OP_CHAIN, OP_HELP_B, OP_BOOST_B}, NULL},
    {{OP_CHAIN2, OP_BOOST_B, OP_NONE}, NULL},
    {{OP_CHAIN2, OP_SYNC_B, OP_NONE}, NULL},
    {{OP_CHAIN2, OP_BOOST_B, OP_CANCEL}, NULL},
    {{OP_CHAIN2, OP_SYNC_B, OP_DESTROY}, NULL},
    /* The carrier (band.c, "The carrier"): a background-band thread runs a closure inline
     * on the idle background lane C while C is boosted to userInteractive, by
     * boost_begin/end at various moments or by a userInteractive waiter queued behind the
     * closure; a second borrower right after the first; the stops (no destroy with a
     * boost_begin/end: an end after destroy returned would be the caller's error). */
    {{OP_BORROW, OP_BOOST_C, OP_NONE}, NULL},
    {{OP_BORROW_LATE, OP_BOOST_C, OP_NONE}, NULL},
    {{OP_BORROW, OP_BOOST_IN, OP_NONE}, NULL},
    {{OP_BORROW, OP_BOOST_INEND, OP_NONE}, NULL},
    {{OP_BORROW, OP_BOOST_OUT, OP_NONE}, NULL},
    {{OP_BORROW, OP_WAIT_C, OP_NONE}, NULL},
    {{OP_BORROW, OP_WAIT_IN, OP_NONE}, NULL},
    {{OP_BORROW, OP_BORROW_NEXT, OP_BOOST_C}, NULL},
    {{OP_BORROW, OP_BORROW_NEXT, OP_BOOST_OUT}, NULL},
    {{OP_BORROW, OP_BORROW_NEXT, OP_WAIT_IN}, NULL},
    {{OP_BORROW, OP_BOOST_C, OP_DRAIN}, NULL},
    {{OP_BORROW, OP_BOOST_IN, OP_CANCEL}, NULL},
    {{OP_BORROW, OP_WAIT_IN, OP_DRAIN}, NULL},
    {{OP_BORROW, OP_WAIT_IN, OP_CANCEL}, NULL},
    {{OP_BORROW, OP_WAIT_C, OP_DESTROY}, NULL},
    {{OP_BORROW, OP_WAIT_IN, OP_DESTROY}, NULL},
};
#define SCENARIO_COUNT (sizeof scenarios / sizeof scenarios[0])

static int op_count(const scenario *sc) {
  int n = 0;
  while (n < 3 && sc->ops[n] != OP_NONE) n++;
  return n;
}

static void scenario_name(const scenario *sc, char *out, size_t cap) {
  out[0] = '\0';
  for (int i = 0; i < op_count(sc); i++) {
    size_t len = strlen(out);
    snprintf(out + len, cap - len, "%s%s", i ? "+" : "", op_names[sc->ops[i]]);
  }
}

/* ---- one run's books ---------------------------------------------------------- */

#define IDS_PER_OP 3 /* follow: the task, its follow-up, the follow-up's */
#define MAX_IDS    (3 * IDS_PER_OP)

static _Atomic int ran[MAX_IDS], discarded[MAX_IDS], accepted[MAX_IDS];
static int sync_rc[MAX_IDS];
static bool is_sync[MAX_IDS];
static _Atomic int entered[3];
static int op_rc[3], op_rc2[3];
static lanepool_t *pool;
static lanepool_lane_t *lane_a, *lane_b, *lane_c;
static const scenario *running;
/* What the check before the pool's free found (escalation left behind), or "". */
static char boost_fail[200];

static void *id_ctx(int id) { return (void *)(intptr_t)(id + 1); }
static int ctx_id(void *ctx) { return (int)(intptr_t)ctx - 1; }

static void task_fn(void *ctx) { atomic_fetch_add(&ran[ctx_id(ctx)], 1); }

/* The follow-up's follow-up, back on the first lane. */
static void follow2_fn(void *ctx) {
  int id = ctx_id(ctx);
  atomic_fetch_add(&ran[id], 1);
  if (lanepool_lane_async(lane_a, task_fn, id_ctx(id + 1)) == 0) atomic_store(&accepted[id + 1], 1);
}

static void follow_fn(void *ctx) {
  int id = ctx_id(ctx);
  atomic_fetch_add(&ran[id], 1);
  if (lanepool_lane_async(lane_b, follow2_fn, id_ctx(id + 1)) == 0)
    atomic_store(&accepted[id + 1], 1);
}

/* A task that sets a timer due at once, from its lane (an own submit: a draining pool
 * takes it). */
static void follow_after_fn(void *ctx) {
  int id = ctx_id(ctx);
  atomic_fetch_add(&ran[id], 1);
  if (lanepool_lane_async_after(lane_b, lanepool_now_ns(), task_fn, id_ctx(id + 1), NULL) == 0)
    atomic_store(&accepted[id + 1], 1);
}

/* OP_STUCK: band work (lanepool_async on the default band, whose one lane is lane_a)
 * that queues band work behind itself on its own lane and waits until that has run:
 * only the band's rescue lane can take it. It stops waiting once a cancel has begun
 * (the queued task is then discarded, or ran first) or the follow-up was refused. */
static _Atomic int cancel_begun;

static void stuck_fn(void *ctx) {
  int id = ctx_id(ctx);
  atomic_fetch_add(&ran[id], 1);
  if (lanepool_async(pool, LANEPOOL_QOS_DEFAULT, task_fn, id_ctx(id + 1)) != 0) return;
  atomic_store(&accepted[id + 1], 1);
  while (!atomic_load(&ran[id + 1]) && !atomic_load(&cancel_begun)) sched_point(LANEPOOL__AT_SPIN);
}

/* OP_ORPHAN: band work that queues lane-bound work on lane_a, the lane whose thread runs
 * it (the band's one lane), and waits for it: the lane is free, its thread away, so
 * only the band's rescue thread can run its queue. Stops waiting as OP_STUCK does. */
static void orphan_fn(void *ctx) {
  int id = ctx_id(ctx);
  atomic_fetch_add(&ran[id], 1);
  if (lanepool_lane_async(lane_a, task_fn, id_ctx(id + 1)) != 0) return;
  atomic_store(&accepted[id + 1], 1);
  while (!atomic_load(&ran[id + 1]) && !atomic_load(&cancel_begun)) sched_point(LANEPOOL__AT_SPIN);
}

/* ---- escalation's chain: B = lane_b (utility), C = lane_c (background), A = lane_a ---- */

/* A task (or a sync's closure) that passes the turn twice: the lane it runs on is busy. */
static void busy_fn(void *ctx) {
  atomic_fetch_add(&ran[ctx_id(ctx)], 1);
  sched_point(LANEPOOL__AT_STATE);
  sched_point(LANEPOOL__AT_STATE);
}

/* OP_CHAIN: the task on B; its queued sync onto C (behind the gate) boosts C to B's band
 * and lists the waiter on B. A refused or cancelled sync never ran its closure. */
static void chain_fn(void *ctx) {
  int id = ctx_id(ctx);
  atomic_fetch_add(&ran[id], 1);
  sched_point(LANEPOOL__AT_STATE);
  is_sync[id + 1] = true;
  sync_rc[id + 1] = lanepool_lane_sync_flags(lane_c, busy_fn, id_ctx(id + 1), LANEPOOL_SYNC_QUEUED);
}

/* OP_CHAIN2's closure on C: it holds C and, through its caller's record, B; its queued
 * sync onto A boosts A only once B (hence C) runs above A's band. */
static void chain2_mid_fn(void *ctx) {
  int id = ctx_id(ctx);
  atomic_fetch_add(&ran[id], 1);
  sched_point(LANEPOOL__AT_STATE);
  is_sync[id + 1] = true;
  sync_rc[id + 1] = lanepool_lane_sync_flags(lane_a, busy_fn, id_ctx(id + 1), LANEPOOL_SYNC_QUEUED);
}

static void chain2_fn(void *ctx) {
  int id = ctx_id(ctx);
  atomic_fetch_add(&ran[id], 1);
  sched_point(LANEPOOL__AT_STATE);
  is_sync[id + 1] = true;
  sync_rc[id + 1] =
      lanepool_lane_sync_flags(lane_c, chain2_mid_fn, id_ctx(id + 1), LANEPOOL_SYNC_QUEUED);
}

/* OP_HELP_B: a task on A whose sync onto B (queued behind the chain's task, as a rule)
 * makes A's thread a helping waiter of B (and B's boost to A's band walk the chain). */
static void help_b_fn(void *ctx) {
  int id = ctx_id(ctx);
  atomic_fetch_add(&ran[id], 1);
  is_sync[id + 1] = true;
  sync_rc[id + 1] = lanepool_lane_sync(lane_b, task_fn, id_ctx(id + 1));
}

/* ---- the carrier: C = lane_c (background), borrowed inline by background-band threads ---- */

/* This run's carrier books: the first borrower's progress (borrow, borrow-late), how many
 * borrowers there are and how many returned, whether a boost has begun (borrow-late
 * waits for it), and the closure's hold (boost-inend opens it once its boost ended). */
static _Atomic int cr_in_closure, cr_closure_done, cr_first_done, cr_boost_on, cr_hold_open;
static _Atomic int cr_borrowers, cr_returned;
/* A borrower ran its closure inline, raised, in this run (for the report's count). */
static _Atomic int cr_raised_seen;
/* The band the boosts name (userInteractive): its nice, what a raised carrier runs at
 * (root only: -1000 when the raise cannot reach it, then only the restore is checked). */
static int cr_raised_nice = -1000;
/* What a carrier check found, or "" (first failure only). */
static char carrier_fail[240];
static _Atomic int carrier_failed;

static pid_t own_tid(void) { return (pid_t)syscall(SYS_gettid); }

static void carrier_failf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void carrier_failf(const char *fmt, ...) {
  if (atomic_exchange(&carrier_failed, 1)) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(carrier_fail, sizeof carrier_fail, fmt, ap);
  va_end(ap);
}

/* A thread's scheduling settings as the carrier saves and puts them back. */
typedef struct {
  int nice, policy, ioprio;
  long slack;
  lanepool__sched_attr attr;
} attrs_t;

static void own_attrs(attrs_t *a) {
  memset(a, 0, sizeof *a);
  errno = 0;
  a->nice = getpriority(PRIO_PROCESS, (id_t)own_tid());
  a->policy = sched_getscheduler(0);
  a->ioprio = lanepool__get_ioprio(own_tid());
  a->slack = (long)prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
  (void)lanepool__get_attr(0, &a->attr);
}

static bool attrs_equal(const attrs_t *a, const attrs_t *b) {
  return a->nice == b->nice && a->policy == b->policy && a->ioprio == b->ioprio &&
         a->slack == b->slack && a->attr.sched_policy == b->attr.sched_policy &&
         a->attr.sched_flags == b->attr.sched_flags && a->attr.sched_nice == b->attr.sched_nice &&
         a->attr.sched_priority == b->attr.sched_priority &&
         a->attr.sched_runtime == b->attr.sched_runtime;
}

/* In a closure on C: if this thread holds C from outside (inline) while C is boosted, it
 * is C's recorded carrier and runs at the boost's nice. Not while another carrier is
 * recorded or an update looks (carried another tid, or LOOK): the last carrier raises
 * this one once it has put itself back (band.c, lanepool__carrier_give). A closure run
 * by C's own thread (a queued sync) is no carrier. */
static void carrier_look(const char *where) {
  lanepool_lane_t *l = lane_c;
  uint32_t me = (uint32_t)own_tid();
  if (me == (uint32_t)atomic_load(&l->tid) || atomic_load(&l->excl) != me) return;
  uint32_t band = atomic_load(&l->boost_band), carried = atomic_load(&l->carried);
  errno = 0;
  int nice = getpriority(PRIO_PROCESS, (id_t)me);
  if (cr_raised_nice != -1000 && nice == cr_raised_nice) atomic_store(&cr_raised_seen, 1);
  if (band == l->band || (carried != 0 && carried != me)) return;
  if (carried != me || (cr_raised_nice != -1000 && nice != cr_raised_nice))
    carrier_failf("borrower %u holds C boosted to band %u %s at nice %d (want %d), carried %u", me,
                  band, where, nice, cr_raised_nice, carried);
}

/* borrow's closure, inline on C (or run by C's thread if the sync queued): passes the
 * turn twice, then waits while boost-inend holds it. */
static void borrow_fn(void *ctx) {
  atomic_fetch_add(&ran[ctx_id(ctx)], 1);
  atomic_store(&cr_in_closure, 1);
  carrier_look("at the closure's start");
  sched_point(LANEPOOL__AT_STATE);
  carrier_look("in the closure");
  sched_point(LANEPOOL__AT_STATE);
  carrier_look("in the closure");
  while (!atomic_load(&cr_hold_open)) sched_point(LANEPOOL__AT_SPIN);
  carrier_look("at the closure's end");
  atomic_store(&cr_closure_done, 1);
}

/* borrow-next's closure: one turn passed. */
static void borrow_next_fn(void *ctx) {
  atomic_fetch_add(&ran[ctx_id(ctx)], 1);
  carrier_look("at the closure's start (second borrower)");
  sched_point(LANEPOOL__AT_STATE);
  carrier_look("at the closure's end (second borrower)");
}

/* A borrower: a thread in the background band syncs onto C (inline when C is idle).
 * Once its sync has returned it has exactly the settings it had before. */
static void borrow_op(int op, int idx, int id) {
  lanepool_band_token_t tok;
  int erc = lanepool_thread_enter_band(LANEPOOL_QOS_BACKGROUND, 0, &tok);
  if (erc) carrier_failf("lanepool_thread_enter_band(background): %d", erc);
  if (op == OP_BORROW_LATE) /* the boost begins before the take */
    while (!atomic_load(&cr_boost_on)) sched_point(LANEPOOL__AT_SPIN);
  if (op == OP_BORROW_NEXT) /* right after the first borrower's closure */
    while (!atomic_load(&cr_closure_done) && !atomic_load(&cr_first_done))
      sched_point(LANEPOOL__AT_SPIN);
  attrs_t before, after;
  own_attrs(&before);
  is_sync[id] = true;
  atomic_store(&entered[idx], 1);
  op_rc[idx] = sync_rc[id] =
      lanepool_lane_sync(lane_c, op == OP_BORROW_NEXT ? borrow_next_fn : borrow_fn, id_ctx(id));
  own_attrs(&after);
  if (!attrs_equal(&before, &after))
    carrier_failf("borrower %d (%s, sync %d) not put back: nice %d policy %d io %d slice %llu, "
                  "before nice %d policy %d io %d slice %llu",
                  (int)own_tid(), op_names[op], op_rc[idx], after.nice, after.policy, after.ioprio,
                  (unsigned long long)after.attr.sched_runtime, before.nice, before.policy,
                  before.ioprio, (unsigned long long)before.attr.sched_runtime);
  if (op != OP_BORROW_NEXT) atomic_store(&cr_first_done, 1);
  atomic_fetch_add(&cr_returned, 1);
  if (!erc) (void)lanepool_thread_restore(&tok);
}

/* boost-c and its variants: lanepool_lane_boost_begin(C, userInteractive) ... _end.
 *  boost-c      begins and ends whenever the schedule says (two turns passed between).
 *  boost-in     begins once the first borrower's closure runs (or it returned), ends after
 *               a turn: racing the closure's end.
 *  boost-inend  the same, and holds the closure until it ended: the carrier stays raised
 *               with no waiter left, until it gives C up.
 *  boost-out    begins as boost-in, ends once every borrower's sync returned. */
static void boost_c_op(int op, int idx) {
  lanepool_boost_t b;
  atomic_store(&entered[idx], 1);
  if (op != OP_BOOST_C)
    while (!atomic_load(&cr_in_closure) && !atomic_load(&cr_first_done))
      sched_point(LANEPOOL__AT_SPIN);
  op_rc[idx] = lanepool_lane_boost_begin(lane_c, LANEPOOL_QOS_USER_INTERACTIVE, &b);
  atomic_store(&cr_boost_on, 1);
  sched_point(LANEPOOL__AT_STATE);
  if (op == OP_BOOST_C) sched_point(LANEPOOL__AT_STATE);
  if (op == OP_BOOST_OUT)
    while (atomic_load(&cr_returned) < atomic_load(&cr_borrowers)) sched_point(LANEPOOL__AT_SPIN);
  op_rc2[idx] = op_rc[idx] ? 0 : lanepool_lane_boost_end(&b);
  if (op == OP_BOOST_INEND) atomic_store(&cr_hold_open, 1);
}

/* wait-c: a userInteractive-band thread's queued sync onto C: it boosts C while queued,
 * behind a borrower's closure or not. wait-in: the same once the first borrower's
 * closure runs (or it returned): queued behind it, as a rule. */
static void wait_c_op(int op, int idx, int id) {
  lanepool_band_token_t tok;
  int erc = lanepool_thread_enter_band(LANEPOOL_QOS_USER_INTERACTIVE, 0, &tok);
  if (op == OP_WAIT_IN)
    while (!atomic_load(&cr_in_closure) && !atomic_load(&cr_first_done))
      sched_point(LANEPOOL__AT_SPIN);
  is_sync[id] = true;
  atomic_store(&entered[idx], 1);
  op_rc[idx] = sync_rc[id] =
      lanepool_lane_sync_flags(lane_c, task_fn, id_ctx(id), LANEPOOL_SYNC_QUEUED);
  if (!erc) (void)lanepool_thread_restore(&tok);
}

/* The check before the pool is freed (the AT_FREE point, reached by whoever destroys it:
 * every lane joined, every call out): no escalation is left on any lane. */
static void free_hook(int point, void *arg) {
  (void)arg;
  if (point != LANEPOOL__AT_FREE || !pool || boost_fail[0]) return;
  uint32_t total = lanepool__lane_total(pool);
  for (uint32_t i = 0; i < total; i++) {
    lanepool_lane_t *l = pool->lanes[i];
    uint32_t held = 0;
    for (int b = 0; b < LANEPOOL_BAND_COUNT; b++) held += atomic_load(&l->boost_waiting[b]);
    uint32_t band = atomic_load(&l->boost_band);
    uint32_t helpers = atomic_load(&l->helpers);
    if (held || band != l->band || l->chain_waiters || helpers) {
      snprintf(boost_fail, sizeof boost_fail,
               "escalation left on lane %s: %u waiting, band %u (own %u), chain_waiters %p, "
               "%u helpers",
               l->name, held, band, l->band, (void *)l->chain_waiters, helpers);
      return;
    }
    /* No carrier recorded: every one put itself back when it gave the lane up. */
    uint32_t carried = atomic_load(&l->carried);
    if (carried || l->carrier.band) {
      snprintf(boost_fail, sizeof boost_fail,
               "a carrier left on lane %s: carried %u, carrier band %u (home %p)", l->name, carried,
               l->carrier.band, (void *)l->carrier.home);
      return;
    }
  }
}

#ifdef SCHED_WRAP_BOOST_LOCK
/* A point before every take of a lane's boost_lock (see the top), by a thread that holds
 * no other lock taken through pthread_mutex_lock (the count is this thread's). */
static pthread_mutex_t *_Atomic boost_locks[4 * LANEPOOL_BAND_COUNT];
static _Atomic uint32_t boost_lock_count;
static __thread int locks_held;
int __real_pthread_mutex_lock(pthread_mutex_t *mu);
int __real_pthread_mutex_unlock(pthread_mutex_t *mu);

static bool is_boost_lock(pthread_mutex_t *mu) {
  uint32_t n = atomic_load(&boost_lock_count);
  for (uint32_t i = 0; i < n; i++)
    if (atomic_load(&boost_locks[i]) == mu) return true;
  return false;
}

int __wrap_pthread_mutex_lock(pthread_mutex_t *mu) {
  if (locks_held == 0 && is_boost_lock(mu)) sched_point(LANEPOOL__AT_STATE);
  int rc = __real_pthread_mutex_lock(mu);
  if (rc == 0) locks_held++;
  return rc;
}

int __wrap_pthread_mutex_unlock(pthread_mutex_t *mu) {
  locks_held--;
  return __real_pthread_mutex_unlock(mu);
}

static void note_boost_locks(lanepool_t *p) {
  atomic_store(&boost_lock_count, 0);
  uint32_t total = lanepool__lane_total(p);
  for (uint32_t i = 0; i < total && i < 4 * LANEPOOL_BAND_COUNT; i++) {
    atomic_store(&boost_locks[i], &p->lanes[i]->boost_lock);
    atomic_store(&boost_lock_count, i + 1);
  }
}
#else
static void note_boost_locks(lanepool_t *p) { (void)p; }
#endif

#ifdef SCHED_WRAP_SYSCALL
/* A point right after every sched_getattr and sched_setattr that names a thread by id
 * (see the top): inside a carrier's raise (band.c, carrier_raise reads the holder's
 * settings, then sets them), under boost_lock, between the update's look at `excl` and
 * its store of `carried`; and inside a boost of a lane's thread. A thread that then
 * needs that boost_lock waits for the watchdog. */
long __real_syscall(long n, ...);
long __wrap_syscall(long n, ...) {
  WRAP_SYSCALL_ARGS(n, a);
  long r = __real_syscall(n, a[0], a[1], a[2], a[3], a[4], a[5]);
  if ((n == SYS_sched_getattr || n == SYS_sched_setattr) && a[0] != 0) {
    int e = errno;
    sched_point(LANEPOOL__AT_STATE);
    errno = e;
  }
  return r;
}
#endif

static void discard_fn(lanepool_fn fn, void *ctx, void *arg) {
  (void)fn;
  (void)arg;
  atomic_fetch_add(&discarded[ctx_id(ctx)], 1);
}

static void *op_thread(void *p) {
  int idx = (int)(intptr_t)p, n = op_count(running);
  int op = running->ops[idx], id = idx * IDS_PER_OP;
  if (op == OP_DESTROY) { /* every other call in flight first */
    atomic_store(&entered[idx], 1);
    for (int j = 0; j < n; j++)
      while (!atomic_load(&entered[j])) sched_point(LANEPOOL__AT_SPIN);
  }
  /* From `entered` to the call no point intervenes: the thread keeps the turn until it
   * is inside the library. */
  switch (op) {
  case OP_ASYNC:
    atomic_store(&entered[idx], 1);
    op_rc[idx] = lanepool_lane_async(lane_a, task_fn, id_ctx(id));
    if (op_rc[idx] == 0) atomic_store(&accepted[id], 1);
    break;
  case OP_SYNC:
    is_sync[id] = true;
    atomic_store(&entered[idx], 1);
    op_rc[idx] = sync_rc[id] = lanepool_lane_sync(lane_a, task_fn, id_ctx(id));
    break;
  case OP_AFTER:
    atomic_store(&entered[idx], 1);
    op_rc[idx] = lanepool_lane_async_after(lane_a, lanepool_now_ns(), task_fn, id_ctx(id), NULL);
    if (op_rc[idx] == 0) atomic_store(&accepted[id], 1);
    break;
  case OP_FOLLOW:
    atomic_store(&entered[idx], 1);
    op_rc[idx] = lanepool_lane_async(lane_a, follow_fn, id_ctx(id));
    if (op_rc[idx] == 0) atomic_store(&accepted[id], 1);
    break;
  case OP_FOLLOW_AFTER:
    atomic_store(&entered[idx], 1);
    op_rc[idx] = lanepool_lane_async(lane_a, follow_after_fn, id_ctx(id));
    if (op_rc[idx] == 0) atomic_store(&accepted[id], 1);
    break;
  case OP_DRAIN:
    atomic_store(&entered[idx], 1);
    op_rc[idx] = lanepool_shutdown(pool, LANEPOOL_SHUTDOWN_DRAIN, NULL, NULL);
    break;
  case OP_CANCEL:
    atomic_store(&entered[idx], 1);
    atomic_store(&cancel_begun, 1);
    op_rc[idx] = lanepool_shutdown(pool, LANEPOOL_SHUTDOWN_CANCEL, discard_fn, NULL);
    break;
  case OP_STUCK:
    atomic_store(&entered[idx], 1);
    op_rc[idx] = lanepool_async(pool, LANEPOOL_QOS_DEFAULT, stuck_fn, id_ctx(id));
    if (op_rc[idx] == 0) atomic_store(&accepted[id], 1);
    break;
  case OP_ORPHAN:
    atomic_store(&entered[idx], 1);
    op_rc[idx] = lanepool_async(pool, LANEPOOL_QOS_DEFAULT, orphan_fn, id_ctx(id));
    if (op_rc[idx] == 0) atomic_store(&accepted[id], 1);
    break;
  case OP_CHAIN: /* the gate on C first, so that the chain's sync finds C busy */
    if (lanepool_lane_async(lane_c, busy_fn, id_ctx(id + 2)) == 0)
      atomic_store(&accepted[id + 2], 1);
    atomic_store(&entered[idx], 1);
    op_rc[idx] = lanepool_lane_async(lane_b, chain_fn, id_ctx(id));
    if (op_rc[idx] == 0) atomic_store(&accepted[id], 1);
    break;
  case OP_CHAIN2:
    atomic_store(&entered[idx], 1);
    op_rc[idx] = lanepool_lane_async(lane_b, chain2_fn, id_ctx(id));
    if (op_rc[idx] == 0) atomic_store(&accepted[id], 1);
    break;
  case OP_HELP_B:
    atomic_store(&entered[idx], 1);
    op_rc[idx] = lanepool_lane_async(lane_a, help_b_fn, id_ctx(id));
    if (op_rc[idx] == 0) atomic_store(&accepted[id], 1);
    break;
  case OP_BOOST_B: {
    lanepool_boost_t b;
    atomic_store(&entered[idx], 1);
    op_rc[idx] = lanepool_lane_boost_begin(lane_b, LANEPOOL_QOS_USER_INTERACTIVE, &b);
    sched_point(LANEPOOL__AT_STATE);
    sched_point(LANEPOOL__AT_STATE);
    op_rc2[idx] = op_rc[idx] ? 0 : lanepool_lane_boost_end(&b);
    break;
  }
  case OP_SYNC_B:
    is_sync[id] = true;
    atomic_store(&entered[idx], 1);
    op_rc[idx] = sync_rc[id] =
        lanepool_lane_sync_flags(lane_b, task_fn, id_ctx(id), LANEPOOL_SYNC_QUEUED);
    break;
  case OP_BORROW:
  case OP_BORROW_LATE:
  case OP_BORROW_NEXT:
    borrow_op(op, idx, id);
    break;
  case OP_BOOST_C:
  case OP_BOOST_IN:
  case OP_BOOST_INEND:
  case OP_BOOST_OUT:
    boost_c_op(op, idx);
    break;
  case OP_WAIT_C:
  case OP_WAIT_IN:
    wait_c_op(op, idx, id);
    break;
  case OP_DESTROY:
    op_rc[idx] = lanepool_destroy(pool);
    break;
  }
  return NULL;
}

/* ---- failure reports -------------------------------------------------------------- */

static const char *argv0 = "sched_test";
static char run_desc[256]; /* what runs now, for the alarm and the sanitizers */
/* The seeds of this scenario and strategy so far: a replay of one seed is exact only
 * if the woken threads come back in time as they did (see ctlsched.h); this reruns the
 * whole range, which finds the failure again in the same proportion. */
static char range_desc[256];
static uint64_t range_first;

static void say_run(void) {
  char line[600];
  int len =
      snprintf(line, sizeof line, "sched_test: in %s\n  replay: %s %s\n  or the range: %s %s\n",
               run_desc, argv0, run_desc, argv0, range_desc);
  ssize_t ignored = write(2, line, len > 0 ? (size_t)len : 0);
  (void)ignored;
}

static void on_alarm(int sig) {
  (void)sig;
  static const char msg[] = "sched_test: HANG (the run did not end within its cap)\n";
  ssize_t ignored = write(2, msg, sizeof msg - 1);
  (void)ignored;
  sched_dump(2);
  say_run();
  if (getenv("LANEPOOL_SCHED_HANG_WAIT")) pause(); /* attach a debugger */
  _exit(3);
}

static void on_fatal(int sig) {
  say_run();
  signal(sig, SIG_DFL);
  raise(sig);
}

/* The sanitizers call this before they end the process. */
extern void __sanitizer_set_death_callback(void (*callback)(void)) __attribute__((weak));

/* ---- one run -------------------------------------------------------------------- */

static int passed, failed;
static unsigned hang_cap_s = 30;
static bool fork_mode;
static uint32_t watchdog_us = 4000; /* LANEPOOL_SCHED_WATCHDOG_US */
static uint32_t fixed_pct_steps;    /* --pct-steps; 0: adaptive */

static lanepool_t *make_pool(void) {
  lanepool_config_t cfg;
  lanepool_config_init(&cfg);
  cfg.name = "sched";
  cfg.lanes_per_band = 1;
  cfg.ring_capacity = 2; /* a third queued task goes to the overflow list */
  /* No spinning: a lane holding the turn would spin for work nobody can send. */
  for (int b = 0; b < LANEPOOL_BAND_COUNT; b++) cfg.spin_ns[b] = 0;
  lanepool_t *p = NULL;
  int rc = lanepool_create(&cfg, &p);
  if (rc) {
    fprintf(stderr, "lanepool_create: %s\n", strerror(rc));
    exit(1);
  }
  return p;
}

/* Every lane parked in the kernel (its word PARKED, its thread sleeping), so that no
 * lane is still on its way to its first park when the scheduler starts: the threads
 * that show up are the same in every replay of a seed. */
static void wait_pool_quiet(lanepool_t *p) {
  uint32_t total = lanepool__lane_total(p); /* the rescue lanes too */
  for (int tries = 0; tries < 20000; tries++) {
    uint32_t quiet = 0;
    for (uint32_t i = 0; i < total; i++) {
      lanepool_lane_t *l = p->lanes[i];
      if (atomic_load(&l->sleeping) != LANE_PARKED) break;
      char path[64], stat[256];
      snprintf(path, sizeof path, "/proc/self/task/%d/stat", atomic_load(&l->tid));
      FILE *f = fopen(path, "r");
      if (!f) break;
      size_t n = fread(stat, 1, sizeof stat - 1, f);
      fclose(f);
      stat[n] = '\0';
      const char *end = strrchr(stat, ')'); /* "tid (name) S ..." */
      if (!end || end[1] != ' ' || end[2] != 'S') break;
      quiet++;
    }
    if (quiet == total) return;
    struct timespec ts = {0, 100000};
    nanosleep(&ts, NULL);
  }
  /* Not quiet within 2 s (a loaded machine): the run goes on, only less replayable. */
}

static bool rc_in(int rc, int a, int b, int c) { return rc == a || rc == b || rc == c; }

/* Checks one run's books; prints what broke (first line only per run). */
static bool books_balance(const scenario *sc, char *why, size_t cap) {
  int n = op_count(sc), destroyers = 0, destroyed = 0;
  for (int i = 0; i < n; i++) {
    int rc = op_rc[i];
    bool ok = true;
    switch (sc->ops[i]) {
    case OP_ASYNC:
    case OP_AFTER:
    case OP_FOLLOW:
    case OP_FOLLOW_AFTER:
    case OP_STUCK:
    case OP_CHAIN:
    case OP_CHAIN2:
    case OP_HELP_B:
      ok = rc_in(rc, 0, ESHUTDOWN, 0);
      break;
    case OP_SYNC:
    case OP_SYNC_B:
    case OP_BORROW:
    case OP_BORROW_LATE:
    case OP_BORROW_NEXT:
    case OP_WAIT_C:
    case OP_WAIT_IN:
      ok = rc_in(rc, 0, ESHUTDOWN, ECANCELED);
      break;
    case OP_BOOST_B:
    case OP_BOOST_C:
    case OP_BOOST_IN:
    case OP_BOOST_INEND:
    case OP_BOOST_OUT:
      ok = rc == 0 && op_rc2[i] == 0;
      break;
    case OP_DRAIN:
    case OP_CANCEL:
      ok = rc_in(rc, 0, EALREADY, 0);
      break;
    case OP_DESTROY:
      destroyers++;
      destroyed += rc == 0;
      ok = rc_in(rc, 0, EINVAL, 0);
      break;
    }
    if (!ok) {
      snprintf(why, cap, "thread %d (%s) returned %d (%s)", i, op_names[sc->ops[i]], rc,
               strerror(rc));
      return false;
    }
  }
  if (destroyers && destroyed != 1) {
    snprintf(why, cap, "%d of %d destroy calls returned 0", destroyed, destroyers);
    return false;
  }
  for (int id = 0; id < MAX_IDS; id++) {
    int r = atomic_load(&ran[id]), d = atomic_load(&discarded[id]), a = atomic_load(&accepted[id]);
    const char *bad = NULL;
    if (is_sync[id]) {
      if (!rc_in(sync_rc[id], 0, ESHUTDOWN, ECANCELED)) bad = "a sync with an undocumented code";
      if (sync_rc[id] == 0 && (r != 1 || d != 0)) bad = "a sync that returned 0";
      if (sync_rc[id] != 0 && (r != 0 || d != 0)) bad = "a sync that returned an error";
    } else if (a && r + d != 1) {
      bad = "an accepted task";
    } else if (!a && r + d != 0) {
      bad = "a refused task";
    }
    if (bad) {
      snprintf(why, cap, "%s (id %d, thread %d) ran %d and was discarded %d times", bad, id,
               id / IDS_PER_OP, r, d);
      return false;
    }
  }
  if (boost_fail[0] || atomic_load(&carrier_failed)) {
    snprintf(why, cap, "%s%s%s", carrier_fail, carrier_fail[0] && boost_fail[0] ? "; " : "",
             boost_fail);
    return false;
  }
  return true;
}

/* One schedule. true if its books balance; *stats for the report. */
static bool run_one(const scenario *sc, sched_strategy st, uint64_t seed, uint32_t pct_steps,
                    sched_stats *stats, char *why, size_t cap) {
  char name[64];
  scenario_name(sc, name, sizeof name);
  /* PCT's change points depend on pct_steps: the replay gives it. */
  char steps_arg[32] = "";
  if (st == SCHED_PCT) snprintf(steps_arg, sizeof steps_arg, " --pct-steps %u", pct_steps);
  snprintf(run_desc, sizeof run_desc, "--scenario %s --strategy %s --seed %llu --runs 1%s", name,
           sched_strategy_name(st), (unsigned long long)seed, steps_arg);
  snprintf(range_desc, sizeof range_desc,
           "--scenario %s --strategy %s --seed %llu --runs %llu --fork", name,
           sched_strategy_name(st), (unsigned long long)range_first,
           (unsigned long long)(seed - range_first + 1));
  int n = op_count(sc);
  for (int i = 0; i < MAX_IDS; i++) {
    atomic_store(&ran[i], 0);
    atomic_store(&discarded[i], 0);
    atomic_store(&accepted[i], 0);
    sync_rc[i] = 0;
    is_sync[i] = false;
  }
  for (int i = 0; i < 3; i++) {
    atomic_store(&entered[i], 0);
    op_rc[i] = op_rc2[i] = 0;
  }
  atomic_store(&cancel_begun, 0);
  boost_fail[0] = '\0';
  int borrowers = 0;
  bool holds = false;
  for (int i = 0; i < n; i++) {
    borrowers +=
        sc->ops[i] == OP_BORROW || sc->ops[i] == OP_BORROW_LATE || sc->ops[i] == OP_BORROW_NEXT;
    holds |= sc->ops[i] == OP_BOOST_INEND;
  }
  atomic_store(&cr_in_closure, 0);
  atomic_store(&cr_closure_done, 0);
  atomic_store(&cr_first_done, 0);
  atomic_store(&cr_boost_on, 0);
  atomic_store(&cr_hold_open, !holds);
  atomic_store(&cr_borrowers, borrowers);
  atomic_store(&cr_returned, 0);
  atomic_store(&cr_raised_seen, 0);
  atomic_store(&carrier_failed, 0);
  carrier_fail[0] = '\0';
  running = sc;
  alarm(hang_cap_s);
  pool = make_pool();
  if (lanepool_get_lane(pool, LANEPOOL_QOS_DEFAULT, 0, &lane_a) ||
      lanepool_get_lane(pool, LANEPOOL_QOS_UTILITY, 0, &lane_b) ||
      lanepool_get_lane(pool, LANEPOOL_QOS_BACKGROUND, 0, &lane_c))
    abort();
  /* The nice a raised carrier runs at: the userInteractive band's, where the pool's own
   * lane got it (privilege); else only the restore is checked. */
  lanepool_lane_t *ui = NULL;
  if (lanepool_get_lane(pool, LANEPOOL_QOS_USER_INTERACTIVE, 0, &ui)) abort();
  cr_raised_nice = ui->applied.nice.got == ui->policy.nice ? ui->policy.nice : -1000;
  note_boost_locks(pool);
  wait_pool_quiet(pool);
  sched_begin(seed, st, 3, pct_steps, (uint32_t)n, watchdog_us);
  pthread_t t[3];
  for (int i = 0; i < n; i++)
    if (sched_spawn(&t[i], op_thread, (void *)(intptr_t)i)) abort();
  for (int i = 0; i < n; i++) pthread_join(t[i], NULL);
  sched_end(stats);
  bool destroyed = false;
  for (int i = 0; i < n; i++) destroyed |= running->ops[i] == OP_DESTROY && op_rc[i] == 0;
  if (!destroyed) { /* the rest, unscheduled: it must end too */
    int rc = lanepool_shutdown(pool, LANEPOOL_SHUTDOWN_DRAIN, NULL, NULL);
    if (rc != 0 && rc != EALREADY) fprintf(stderr, "cleanup shutdown: %d\n", rc);
    rc = lanepool_destroy(pool);
    if (rc) fprintf(stderr, "cleanup destroy: %d\n", rc);
  }
  alarm(0);
  return books_balance(sc, why, cap);
}

/* What a forked schedule hands back: its scheduler's numbers and cr_raised_seen. */
typedef struct {
  sched_stats stats;
  int raised;
} run_shared;

/* --fork: the schedule runs in a child, so that a hang or a sanitizer report ends that
 * schedule only. 0: it passed; 1: books; 2: hang; 3: anything else. */
static int run_forked(const scenario *sc, sched_strategy st, uint64_t seed, uint32_t pct_steps,
                      sched_stats *stats) {
  static run_shared *shared;
  if (!shared) {
    shared = mmap(NULL, sizeof *shared, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (shared == MAP_FAILED) abort();
  }
  memset(shared, 0, sizeof *shared);
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid < 0) abort();
  if (pid == 0) {
    char why[600];
    bool ok = run_one(sc, st, seed, pct_steps, &shared->stats, why, sizeof why);
    shared->raised = atomic_load(&cr_raised_seen);
    if (!ok) fprintf(stderr, "FAIL %s: %s\n", run_desc, why);
    _exit(ok ? 0 : 4); /* not 1: the sanitizers' exit status */
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
  *stats = shared->stats;
  atomic_store(&cr_raised_seen, shared->raised);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return 0;
  if (WIFEXITED(status) && WEXITSTATUS(status) == 4) return 1;
  if (WIFEXITED(status) && WEXITSTATUS(status) == 3) return 2;
  return 3;
}

static int usage(void) {
  fprintf(stderr,
          "usage: %s [--runs N] [--scenario NAME] [--strategy pct|random] [--seed S] "
          "[--fork] [--pct-steps N] [--list]\n",
          argv0);
  return 2;
}

int main(int argc, char **argv) {
  argv0 = argv[0];
  uint64_t runs = 500, first_seed = 1;
  const char *only = NULL, *strat = NULL;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--list") == 0) {
      for (size_t s = 0; s < SCENARIO_COUNT; s++) {
        char name[64];
        scenario_name(&scenarios[s], name, sizeof name);
        printf("%s%s%s\n", name, scenarios[s].known ? "  (known: " : "",
               scenarios[s].known ? scenarios[s].known : "");
      }
      return 0;
    }
    if (strcmp(argv[i], "--fork") == 0) {
      fork_mode = true;
      continue;
    }
    if (i + 1 >= argc) return usage();
    if (strcmp(argv[i], "--runs") == 0)
      runs = strtoull(argv[++i], NULL, 10);
    else if (strcmp(argv[i], "--seed") == 0)
      first_seed = strtoull(argv[++i], NULL, 10);
    else if (strcmp(argv[i], "--scenario") == 0)
      only = argv[++i];
    else if (strcmp(argv[i], "--strategy") == 0)
      strat = argv[++i];
    else if (strcmp(argv[i], "--pct-steps") == 0)
      fixed_pct_steps = (uint32_t)strtoul(argv[++i], NULL, 10);
    else
      return usage();
  }
  if (strat && strcmp(strat, "pct") != 0 && strcmp(strat, "random") != 0) return usage();
  const char *cap_env = getenv("LANEPOOL_SCHED_CAP_S");
  if (cap_env && atoi(cap_env) > 0) hang_cap_s = (unsigned)atoi(cap_env);
  const char *wd_env = getenv("LANEPOOL_SCHED_WATCHDOG_US");
  if (wd_env && atoi(wd_env) > 0) watchdog_us = (uint32_t)atoi(wd_env);
  const char *known_env = getenv("LANEPOOL_SCHED_KNOWN");
  bool run_known = known_env && strcmp(known_env, "1") == 0;
  signal(SIGALRM, on_alarm);
  signal(SIGSEGV, on_fatal);
  signal(SIGABRT, on_fatal);
  signal(SIGBUS, on_fatal);
  if (__sanitizer_set_death_callback) __sanitizer_set_death_callback(say_run);

  /* The rescue lane takes a stuck band's task after 1 ms here, not 100 (its timed
   * parks too): a "stuck" run waits for it about twice. */
  atomic_store(&lanepool__rescue_ns, 1000000u);
  /* Warm-up: the library's first call in a process sets things up once (e.g. a
   * membarrier registration): not inside a scheduled run. */
  lanepool_t *warm = make_pool();
  if (lanepool_destroy(warm)) abort();
  lanepool__inject_set_hook(free_hook, NULL); /* after the warm-up: `pool` is a run's */

  int matched = 0;
  uint64_t total_runs = 0, total_fallbacks = 0;
  time_t t0 = time(NULL);
  for (size_t s = 0; s < SCENARIO_COUNT; s++) {
    const scenario *sc = &scenarios[s];
    char name[64];
    scenario_name(sc, name, sizeof name);
    if (only && strcmp(only, name) != 0) continue;
    matched++;
    if (sc->known && !only && !run_known) {
      printf("%-24s skipped: shows %s, not fixed yet (LANEPOOL_SCHED_KNOWN=1 runs it)\n", name,
             sc->known);
      continue;
    }
    for (int k = 0; k < 2; k++) {
      sched_strategy st = k == 0 ? SCHED_PCT : SCHED_RANDOM;
      if (strat && strcmp(strat, sched_strategy_name(st)) != 0) continue;
      uint64_t steps = 0, max_steps = 0, fallbacks = 0, waits = 0, vain = 0, done = 0;
      uint64_t raised = 0; /* schedules where a borrower ran its closure raised */
      /* PCT's length estimate: the longest run seen so far (or --pct-steps) */
      uint32_t pct_steps = fixed_pct_steps ? fixed_pct_steps : 64;
      bool ok = true;
      char why[600];
      range_first = first_seed;
      uint64_t bad[4] = {0}, first_bad[4] = {0}; /* --fork: books, hang, crash/sanitizer */
      uint32_t first_steps[4] = {0};             /* pct_steps of first_bad's run */
      for (uint64_t r = 0; r < runs && (ok || fork_mode); r++) {
        sched_stats st_run;
        if (fork_mode) {
          int kind = run_forked(sc, st, first_seed + r, pct_steps, &st_run);
          if (kind) {
            if (!bad[kind]++) {
              first_bad[kind] = first_seed + r;
              first_steps[kind] = pct_steps;
            }
            ok = false;
          }
        } else {
          ok = run_one(sc, st, first_seed + r, pct_steps, &st_run, why, sizeof why);
        }
        done++;
        raised += atomic_load(&cr_raised_seen) != 0;
        steps += st_run.steps;
        fallbacks += st_run.fallbacks;
        waits += st_run.waits;
        vain += st_run.vain;
        if (st_run.steps > max_steps) max_steps = st_run.steps;
        if (!fixed_pct_steps && st_run.steps > pct_steps) pct_steps = (uint32_t)st_run.steps;
        if (!ok && !fork_mode) {
          fprintf(stderr, "FAIL %s %s seed %llu: %s\n  replay: %s %s\n  or the range: %s %s\n",
                  name, sched_strategy_name(st), (unsigned long long)(first_seed + r), why, argv0,
                  run_desc, argv0, range_desc);
        }
      }
      if (ok)
        passed++;
      else
        failed++;
      total_runs += done;
      total_fallbacks += fallbacks;
      printf("%-24s %-6s %5llu schedules, %6.1f steps avg, %4llu max, %5.1f waits avg (%4.1f in "
             "vain), %llu "
             "fallbacks%s\n",
             name, sched_strategy_name(st), (unsigned long long)done,
             done ? (double)steps / (double)done : 0.0, (unsigned long long)max_steps,
             done ? (double)waits / (double)done : 0.0, done ? (double)vain / (double)done : 0.0,
             (unsigned long long)fallbacks, ok ? "" : "  FAILED");
      bool borrows = false;
      for (int i = 0; i < op_count(sc); i++)
        borrows |= sc->ops[i] == OP_BORROW || sc->ops[i] == OP_BORROW_LATE;
      if (borrows)
        printf("    a borrower ran its closure raised (C's carrier) in %llu of %llu schedules\n",
               (unsigned long long)raised, (unsigned long long)done);
      static const char *const kinds[] = {"", "books", "hang", "crash or sanitizer report"};
      for (int kind = 1; kind < 4; kind++)
        if (bad[kind]) {
          char steps_arg[32] = "";
          if (st == SCHED_PCT)
            snprintf(steps_arg, sizeof steps_arg, " --pct-steps %u", first_steps[kind]);
          printf("    %llu schedules failed (%s), first seed %llu: %s --scenario %s --strategy %s "
                 "--seed %llu --runs 1%s\n",
                 (unsigned long long)bad[kind], kinds[kind], (unsigned long long)first_bad[kind],
                 argv0, name, sched_strategy_name(st), (unsigned long long)first_bad[kind],
                 steps_arg);
        }
      fflush(stdout);
    }
  }
  if (only && !matched) {
    fprintf(stderr, "no scenario named %s (see --list)\n", only);
    return 2;
  }
  printf("%llu schedules in %lld s, %llu watchdog fallbacks\n", (unsigned long long)total_runs,
         (long long)(time(NULL) - t0), (unsigned long long)total_fallbacks);
  printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
