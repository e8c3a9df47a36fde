/*
 * steal_test.c - tasks submitted to a band never wait behind a busy lane while another
 * lane of the band is idle; band work pushed from lanes runs oldest first across the
 * band's lanes; lane-bound tasks are never taken by another lane; a lane woken on the
 * CPU of its waker's running task lets it go first; nothing is lost or run twice when
 * lanes steal, drain or cancel.
 *
 * Every wait is for a condition, with a cap (WAIT_CAP_NS) that only a hang reaches:
 * the verdicts never depend on timing.
 *
 * Usage: steal_test [rounds]   (default 20)
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "check.h"
#include "procfs.h"
#include "lanepool.h"
/* The core's internal push, for band work placed on a lane of the test's choosing. */
#include "../../Sources/CLanePool/internal.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#ifndef WAIT_CAP_NS
#define WAIT_CAP_NS (30ull * 1000000000ull)
#endif

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* true once *flag != 0; false if the cap ran out (a hang). */
static bool wait_flag(_Atomic int *flag) {
  uint64_t end = now_ns() + WAIT_CAP_NS;
  while (!atomic_load(flag)) {
    if (now_ns() > end) return false;
    sched_yield();
  }
  return true;
}

static lanepool_t *make_pool(const char *name, uint32_t lanes) {
  lanepool_config_t cfg;
  lanepool_config_init(&cfg);
  cfg.name = name;
  cfg.lanes_per_band = lanes;
  lanepool_t *p = NULL;
  int rc = lanepool_create(&cfg, &p);
  if (rc) {
    fprintf(stderr, "lanepool_create(%s): %s\n", name, strerror(rc));
    exit(2);
  }
  return p;
}

static lanepool_lane_t *current(void) {
  lanepool_lane_t *l = NULL;
  return lanepool_current_lane(&l) == 0 ? l : NULL;
}

/* ---- the hang's shape: a task waits for a task it submitted to its own band -------- */

typedef struct {
  lanepool_t *pool;
  unsigned flags;
  _Atomic int child_ran, parent_done, parent_saw_child, submit_rc;
  lanepool_lane_t *_Atomic parent_lane, *_Atomic child_lane;
} fanout;

static void child_task(void *arg) {
  fanout *f = arg;
  atomic_store(&f->child_lane, current());
  atomic_store(&f->child_ran, 1);
}

static void parent_task(void *arg) {
  fanout *f = arg;
  atomic_store(&f->parent_lane, current());
  /* (No CHECK on a lane: the counters belong to the main thread.) */
  atomic_store(&f->submit_rc,
               lanepool_async_flags(f->pool, LANEPOOL_QOS_DEFAULT, child_task, f, f->flags));
  /* The parent keeps its lane until the child has run: only another lane can run it. */
  atomic_store(&f->parent_saw_child, wait_flag(&f->child_ran));
  atomic_store(&f->parent_done, 1);
}

static void test_job_waiting_for_its_own_submit(unsigned flags) {
  current_test = flags ? "a task waits for a LOCAL submit of its own" : "a task waits for a submit";
  lanepool_t *pool = make_pool("steal-hang", 2);
  fanout f = {.pool = pool, .flags = flags};
  CHECK_RC(lanepool_async(pool, LANEPOOL_QOS_DEFAULT, parent_task, &f), 0);
  CHECK(wait_flag(&f.parent_done));
  CHECK_RC(atomic_load(&f.submit_rc), 0);
  CHECK(atomic_load(&f.parent_saw_child));
  CHECK(atomic_load(&f.child_lane) != NULL);
  CHECK(atomic_load(&f.child_lane) != atomic_load(&f.parent_lane));
  /* LOCAL: the child was queued on the parent's lane, so the lane that ran it stole it. */
  if (flags & LANEPOOL_SUBMIT_LOCAL) {
    lanepool_lane_info_t info;
    CHECK_RC(lanepool_lane_info(atomic_load(&f.child_lane), &info), 0);
    CHECK(info.tasks_stolen >= 1);
  }
  CHECK_RC(lanepool_destroy(pool), 0);
}

/* ---- older band work first: band work pushed from lanes keeps its order ---------- */

/* Lane A blocks with band work X queued behind it; lane B, busy meanwhile, pushes band
 * work Y (LOCAL: on B, whose ring is empty) and returns. B's next task must be X, the
 * older: taken from A's head before B's own Y. Without the order between lanes B runs Y
 * first and takes X only when it finds A stuck, 20 us into its idle spin. No timing in
 * the verdicts: B's millisecond only makes Y's stamp later than X's by more than the
 * look's margin on any clock.
 * Two ways X gets there: A's task pushes it (LOCAL: it stays on A, whose ring is empty),
 * or the test pushes X and, a millisecond later, X2 onto A with the core's internal
 * push; then B takes both before its Y (a look that took a task looks again). */
typedef struct older_run older_run;
typedef struct {
  older_run *o;
  int tag; /* 1 X, 2 X2, 3 Y */
} older_task;

struct older_run {
  lanepool_t *pool;
  lanepool_lane_t *a, *b;
  older_task x, x2, y;
  bool a_pushes_x;
  _Atomic int a_started, x_pushed, release, x_rc, y_rc, ran;
  _Atomic int order[3]; /* tags, in the order the tasks ran */
  lanepool_lane_t *_Atomic x_lane;
};

static void older_ran(void *arg) {
  older_task *t = arg;
  if (t->tag == 1) atomic_store(&t->o->x_lane, current());
  int i = atomic_fetch_add(&t->o->ran, 1);
  if (i < 3) atomic_store(&t->o->order[i], t->tag);
}

static void older_a(void *arg) {
  older_run *o = arg;
  if (o->a_pushes_x) {
    atomic_store(&o->x_rc, lanepool_async_flags(o->pool, LANEPOOL_QOS_DEFAULT, older_ran, &o->x,
                                                LANEPOOL_SUBMIT_LOCAL));
    atomic_store(&o->x_pushed, 1);
  }
  atomic_store(&o->a_started, 1);
  (void)wait_flag(&o->release); /* A holds its lane: what is queued on it waits */
}

static void older_b(void *arg) {
  older_run *o = arg;
  (void)wait_flag(&o->x_pushed);
  struct timespec ms = {0, 1000000};
  nanosleep(&ms, NULL);
  atomic_store(&o->y_rc, lanepool_async_flags(o->pool, LANEPOOL_QOS_DEFAULT, older_ran, &o->y,
                                              LANEPOOL_SUBMIT_LOCAL));
}

/* A pool of two lanes per band; A and B are the default band's. */
static void older_start(older_run *o, const char *name, bool a_pushes_x) {
  o->pool = make_pool(name, 2);
  CHECK_RC(lanepool_get_lane(o->pool, LANEPOOL_QOS_DEFAULT, 0, &o->a), 0);
  CHECK_RC(lanepool_get_lane(o->pool, LANEPOOL_QOS_DEFAULT, 1, &o->b), 0);
  o->x = (older_task){o, 1};
  o->x2 = (older_task){o, 2};
  o->y = (older_task){o, 3};
  o->a_pushes_x = a_pushes_x;
}

/* Waits (capped: only a hang reaches the cap) until `n` tasks ran, then checks exactly
 * `n` did and lets A go. */
static void older_end(older_run *o, int n) {
  uint64_t end = now_ns() + WAIT_CAP_NS;
  while (atomic_load(&o->ran) < n && now_ns() < end) sched_yield();
  CHECK(atomic_load(&o->ran) == n);
  CHECK_RC(atomic_load(&o->y_rc), 0);
}

static void older_finish(older_run *o) {
  atomic_store(&o->release, 1);
  CHECK_RC(lanepool_destroy(o->pool), 0);
}

static void test_older_band_work_first(void) {
  current_test = "band work pushed from a lane runs before newer band work of a sibling";
  older_run o = {0};
  older_start(&o, "steal-older", true);
  CHECK_RC(lanepool_lane_async(o.b, older_b, &o), 0);
  CHECK_RC(lanepool_lane_async(o.a, older_a, &o), 0);
  older_end(&o, 2); /* B ran X (stolen) and Y, while A still blocks */
  CHECK_RC(atomic_load(&o.x_rc), 0);
  CHECK(atomic_load(&o.order[0]) == 1);
  CHECK(atomic_load(&o.order[1]) == 3);
  CHECK(atomic_load(&o.x_lane) == o.b);
  older_finish(&o);
}

static void test_older_band_work_first_twice(void) {
  current_test = "a lane takes two older tasks of a sibling before its own newer one";
  older_run o = {0};
  older_start(&o, "steal-older2", false);
  CHECK_RC(lanepool_lane_async(o.a, older_a, &o), 0);
  CHECK(wait_flag(&o.a_started));
  CHECK_RC(lanepool_lane_async(o.b, older_b, &o), 0);
  struct timespec ms = {0, 1000000};
  unsigned band = LANEPOOL__PUSH_STEAL | LANEPOOL__PUSH_STAMP;
  CHECK_RC(lanepool__lane_push(o.a, older_ran, &o.x, NULL, band), 0);
  nanosleep(&ms, NULL); /* X2's stamp later than X's: only their order is checked */
  CHECK_RC(lanepool__lane_push(o.a, older_ran, &o.x2, NULL, band), 0);
  atomic_store(&o.x_pushed, 1);
  older_end(&o, 3);
  CHECK(atomic_load(&o.order[0]) == 1);
  CHECK(atomic_load(&o.order[1]) == 2);
  CHECK(atomic_load(&o.order[2]) == 3);
  older_finish(&o);
}

/* ---- the rescue lane: band work stuck behind lanes that all wait for it ----------- */

/* Every lane of the band is held by a task that waits for band work queued behind one
 * of them; no lane of the band is free to take it. The band's rescue lane takes it
 * (LANEPOOL__RESCUE_NS after the held lane last finished a task): the waits end by
 * their condition, never by the cap. Two shapes:
 *  - one lane per band: X pushes T2 (LOCAL: on its own lane) and waits for it;
 *  - two lanes (a hostile review's shape): X on A pushes T1 (LOCAL, on A) and waits
 *    for it; Y on B, a millisecond later, pushes T2 (LOCAL, on B) and returns; B takes
 *    T1 first (older band work first), and T1 waits for T2, queued behind it on B.
 * Without the rescue lane, T2's or T1's wait reaches the cap. With `drain`, the pool is
 * drained while the band is stuck: the drain waits for the rescue, nothing is lost. */
typedef struct rescue_run {
  lanepool_t *pool;
  bool two_lanes;
  _Atomic int x_pushed, t1_done, t2_done, x_done;
  _Atomic int x_ok, t1_ok; /* their waits ended by their condition */
  _Atomic int t1_runs, t2_runs, x_rc, y_rc, stop_rc, destroy_rc;
  lanepool_lane_t *_Atomic t1_lane, *_Atomic t2_lane;
  lanepool_lane_info_t t2_info;
} rescue_run;

static void rescue_t2(void *arg) {
  rescue_run *r = arg;
  atomic_store(&r->t2_lane, current());
  r->t2_info.struct_size = 0;
  if (current()) (void)lanepool_lane_info(current(), &r->t2_info);
  /* A rescued task is on one of the pool's threads: ending the pool from here would
   * wait for itself. */
  atomic_store(&r->stop_rc, lanepool_shutdown(r->pool, LANEPOOL_SHUTDOWN_DRAIN, NULL, NULL));
  atomic_store(&r->destroy_rc, lanepool_destroy(r->pool));
  atomic_fetch_add(&r->t2_runs, 1);
  atomic_store(&r->t2_done, 1);
}

static void rescue_t1(void *arg) {
  rescue_run *r = arg;
  atomic_store(&r->t1_lane, current());
  atomic_fetch_add(&r->t1_runs, 1);
  atomic_store(&r->t1_ok, wait_flag(&r->t2_done));
  atomic_store(&r->t1_done, 1);
}

static void rescue_x(void *arg) {
  rescue_run *r = arg;
  lanepool_fn first = r->two_lanes ? rescue_t1 : rescue_t2;
  atomic_store(&r->x_rc, lanepool_async_flags(r->pool, LANEPOOL_QOS_DEFAULT, first, r,
                                              LANEPOOL_SUBMIT_LOCAL));
  atomic_store(&r->x_pushed, 1);
  atomic_store(&r->x_ok, wait_flag(r->two_lanes ? &r->t1_done : &r->t2_done));
  atomic_store(&r->x_done, 1);
}

static void rescue_y(void *arg) {
  rescue_run *r = arg;
  (void)wait_flag(&r->x_pushed);
  struct timespec ms = {0, 1000000};
  nanosleep(&ms, NULL); /* T2's stamp later than T1's: B takes T1 first */
  atomic_store(&r->y_rc, lanepool_async_flags(r->pool, LANEPOOL_QOS_DEFAULT, rescue_t2, r,
                                              LANEPOOL_SUBMIT_LOCAL));
}

/* A drain on its own thread, so that a drain that never ends fails the wait's cap
 * instead of hanging the test. */
typedef struct {
  lanepool_t *pool;
  _Atomic int rc, done;
} drain_call;
static void *drain_thread(void *arg) {
  drain_call *d = arg;
  atomic_store(&d->rc, lanepool_shutdown(d->pool, LANEPOOL_SHUTDOWN_DRAIN, NULL, NULL));
  atomic_store(&d->done, 1);
  return NULL;
}

/* Once *stuck is set (the band is stuck), drains the pool on a thread of its own and
 * checks that the drain returned 0 within the cap (else the test stops: a hang). */
static void drain_while_stuck(lanepool_t *pool, _Atomic int *stuck) {
  drain_call d = {.pool = pool};
  pthread_t drainer;
  CHECK(wait_flag(stuck));
  CHECK_RC(pthread_create(&drainer, NULL, drain_thread, &d), 0);
  if (!wait_flag(&d.done)) {
    fprintf(stderr, "%s: the drain did not end within the cap\n", current_test);
    exit(1);
  }
  pthread_join(drainer, NULL);
  CHECK_RC(atomic_load(&d.rc), 0);
}

/* Two lanes: the rescue lane first runs this lane-bound task, which holds it until B
 * has taken T1, so that a B preempted for 100 ms cannot leave T1 to the rescue lane:
 * the shape is reached in every round. */
static void rescue_hold_until_t1(void *arg) {
  rescue_run *r = arg;
  uint64_t end = now_ns() + WAIT_CAP_NS;
  while (!atomic_load(&r->t1_lane) && now_ns() < end) sched_yield();
}

static void test_rescue_lane(bool two_lanes, bool drain) {
  current_test = two_lanes ? (drain ? "rescue lane: two blocked lanes, drained meanwhile"
                                    : "rescue lane: two lanes each blocked on band work queued "
                                      "behind the other's task")
                           : (drain ? "rescue lane: one blocked lane, drained meanwhile"
                                    : "rescue lane: a band's only lane blocked on band work "
                                      "queued behind it");
  rescue_run r = {0};
  r.two_lanes = two_lanes;
  r.pool = make_pool(two_lanes ? "rescue2" : "rescue1", two_lanes ? 2 : 1);
  lanepool_lane_t *a = NULL, *b = NULL;
  CHECK_RC(lanepool_get_lane(r.pool, LANEPOOL_QOS_DEFAULT, 0, &a), 0);
  lanepool_lane_t *rescue = NULL;
  CHECK_RC(lanepool_rescue_lane(r.pool, LANEPOOL_QOS_DEFAULT, &rescue), 0);
  if (two_lanes) {
    CHECK_RC(lanepool_get_lane(r.pool, LANEPOOL_QOS_DEFAULT, 1, &b), 0);
    CHECK_RC(lanepool_lane_async(rescue, rescue_hold_until_t1, &r), 0);
    CHECK_RC(lanepool_lane_async(b, rescue_y, &r), 0);
  }
  CHECK_RC(lanepool_lane_async(a, rescue_x, &r), 0);
  if (drain) drain_while_stuck(r.pool, &r.x_pushed);
  CHECK(wait_flag(&r.x_done));
  CHECK_RC(atomic_load(&r.x_rc), 0);
  CHECK_RC(atomic_load(&r.y_rc), 0);
  CHECK(atomic_load(&r.x_ok));
  CHECK(atomic_load(&r.t2_runs) == 1);
  if (two_lanes) {
    CHECK(atomic_load(&r.t1_ok));
    CHECK(atomic_load(&r.t1_runs) == 1);
    CHECK(atomic_load(&r.t1_lane) == b); /* the shape: B took the older T1 */
  }
  /* T2 ran on the band's rescue lane: a lane of the pool no band pick reaches. */
  lanepool_lane_t *t2 = atomic_load(&r.t2_lane);
  CHECK(t2 == rescue && t2 != a && t2 != b);
  CHECK(r.t2_info.struct_size != 0);
  CHECK(r.t2_info.qos == LANEPOOL_QOS_DEFAULT);
  CHECK(r.t2_info.index == (two_lanes ? 2u : 1u));
  CHECK(r.t2_info.tasks_stolen >= 1);
  size_t len = strlen(r.t2_info.thread_name);
  CHECK(len >= 2 && strcmp(r.t2_info.thread_name + len - 2, "-r") == 0);
  CHECK_RC(atomic_load(&r.stop_rc), EDEADLK);
  CHECK_RC(atomic_load(&r.destroy_rc), EDEADLK);
  if (!drain) CHECK_RC(lanepool_shutdown(r.pool, LANEPOOL_SHUTDOWN_DRAIN, NULL, NULL), 0);
  CHECK_RC(lanepool_destroy(r.pool), 0);
}

/* Band work behind a lane-bound task behind a task that waits for it: X, on a band's
 * only lane A, queues a lane-bound T on A (an actor's job on its lane, say), then band
 * work Y (LOCAL: on A, behind T), and waits for Y. T may run only on A, after X; the
 * rescue lane takes Y from behind T, out of order (ring.h, "Rescue out of order"), and
 * T runs on A once X returns. Before the out-of-order take, the rescue lane took only a
 * stealable head, and X's wait reached the cap. With `drain`, the pool is drained
 * while A is stuck. (Found by sched_test's stuck+async+drain.) */
static struct {
  lanepool_t *pool;
  lanepool_lane_t *a;
  bool then_z; /* T in turn queues band work Z behind Y's rescued cell and waits for it */
  _Atomic int pushed, x_ok, x_done, t_runs, t_done, t_after_x, t_rc, y_rc, z_rc, t_ok;
  lanepool_lane_t *_Atomic t_lane;
  struct rb_band { /* Y's or Z's run: where, how often, done */
    lanepool_lane_t *_Atomic lane;
    _Atomic int runs, done;
  } y, z;
} rb;

/* Y and Z: band work that records its run (arg: its struct rb_band). */
static void rb_band_task(void *arg) {
  struct rb_band *b = arg;
  atomic_store(&b->lane, current());
  atomic_fetch_add(&b->runs, 1);
  atomic_store(&b->done, 1);
}

static void rb_t(void *arg) {
  (void)arg;
  atomic_store(&rb.t_lane, current());
  atomic_store(&rb.t_after_x, atomic_load(&rb.x_done));
  atomic_fetch_add(&rb.t_runs, 1);
  if (rb.then_z) {
    atomic_store(&rb.z_rc, lanepool_async_flags(rb.pool, LANEPOOL_QOS_DEFAULT, rb_band_task, &rb.z,
                                                LANEPOOL_SUBMIT_LOCAL));
    atomic_store(&rb.t_ok, wait_flag(&rb.z.done));
  }
  atomic_store(&rb.t_done, 1);
}

static void rb_x(void *arg) {
  (void)arg;
  atomic_store(&rb.t_rc, lanepool_lane_async(rb.a, rb_t, NULL));
  atomic_store(&rb.y_rc, lanepool_async_flags(rb.pool, LANEPOOL_QOS_DEFAULT, rb_band_task, &rb.y,
                                              LANEPOOL_SUBMIT_LOCAL));
  atomic_store(&rb.pushed, 1);
  atomic_store(&rb.x_ok, wait_flag(&rb.y.done));
  atomic_store(&rb.x_done, 1);
}

static void test_rescue_behind_lane_bound(bool drain, bool then_z) {
  current_test = then_z  ? "rescue lane: then band work behind the rescued cell, at the head"
                 : drain ? "rescue lane: band work behind a lane-bound task, drained meanwhile"
                         : "rescue lane: band work behind a lane-bound task behind a task that "
                           "waits for it";
  memset(&rb, 0, sizeof rb);
  rb.then_z = then_z;
  rb.pool = make_pool("rescueb", 1);
  CHECK_RC(lanepool_get_lane(rb.pool, LANEPOOL_QOS_DEFAULT, 0, &rb.a), 0);
  lanepool_lane_t *rescue = NULL;
  CHECK_RC(lanepool_rescue_lane(rb.pool, LANEPOOL_QOS_DEFAULT, &rescue), 0);
  CHECK_RC(lanepool_lane_async(rb.a, rb_x, NULL), 0);
  if (drain) drain_while_stuck(rb.pool, &rb.pushed);
  CHECK(wait_flag(&rb.x_done));
  CHECK(wait_flag(&rb.t_done));
  if (!drain) CHECK_RC(lanepool_shutdown(rb.pool, LANEPOOL_SHUTDOWN_DRAIN, NULL, NULL), 0);
  CHECK_RC(atomic_load(&rb.t_rc), 0);
  CHECK_RC(atomic_load(&rb.y_rc), 0);
  CHECK(atomic_load(&rb.x_ok)); /* X's wait ended by Y, not by the cap */
  CHECK(atomic_load(&rb.y.runs) == 1);
  CHECK(atomic_load(&rb.y.lane) == rescue);
  CHECK(atomic_load(&rb.t_runs) == 1); /* T ran once, on its lane, after X */
  CHECK(atomic_load(&rb.t_lane) == rb.a);
  CHECK(atomic_load(&rb.t_after_x));
  if (then_z) { /* Z, behind Y's rescued cell at A's head while T waits: rescued too */
    CHECK_RC(atomic_load(&rb.z_rc), 0);
    CHECK(atomic_load(&rb.t_ok));
    CHECK(atomic_load(&rb.z.runs) == 1);
    CHECK(atomic_load(&rb.z.lane) == rescue);
  }
  lanepool_lane_info_t info;
  CHECK_RC(lanepool_lane_info(rescue, &info), 0);
  CHECK(info.tasks_stolen >= 1);
  CHECK_RC(lanepool_destroy(rb.pool), 0);
}

/* A rescued task that submits LOCAL and waits for it (what a Swift job does with any
 * task it starts): the work goes to a band lane, never onto the rescue lane's own ring,
 * which nothing steals from. Both band lanes are held while W is rescued and let go
 * once W has submitted X; X then runs on one of them and W's wait ends. (The build
 * before this test queued X behind W on the rescue lane: W waited for its cap.) */
static struct {
  lanepool_t *pool;
  _Atomic int w_pushed, release, x_done, w_ok, w_rc, held;
  lanepool_lane_t *_Atomic w_lane, *_Atomic x_lane;
} rl_run;

static void rl_hold(void *arg) {
  (void)arg;
  atomic_fetch_add(&rl_run.held, 1);
  (void)wait_flag(&rl_run.release);
}
static void rl_x(void *arg) {
  (void)arg;
  atomic_store(&rl_run.x_lane, current());
  atomic_store(&rl_run.x_done, 1);
}
static void rl_w(void *arg) {
  (void)arg;
  atomic_store(&rl_run.w_lane, current());
  atomic_store(&rl_run.w_rc, lanepool_async_flags(rl_run.pool, LANEPOOL_QOS_DEFAULT, rl_x, NULL,
                                                  LANEPOOL_SUBMIT_LOCAL));
  atomic_store(&rl_run.w_pushed, 1);
  atomic_store(&rl_run.w_ok, wait_flag(&rl_run.x_done));
}

static void test_rescued_task_submits_local(void) {
  current_test = "rescue lane: what a rescued task submits LOCAL goes to a band lane";
  memset(&rl_run, 0, sizeof rl_run);
  rl_run.pool = make_pool("rescuel", 2);
  lanepool_lane_t *a = NULL, *b = NULL, *rescue = NULL;
  CHECK_RC(lanepool_get_lane(rl_run.pool, LANEPOOL_QOS_DEFAULT, 0, &a), 0);
  CHECK_RC(lanepool_get_lane(rl_run.pool, LANEPOOL_QOS_DEFAULT, 1, &b), 0);
  CHECK_RC(lanepool_rescue_lane(rl_run.pool, LANEPOOL_QOS_DEFAULT, &rescue), 0);
  CHECK_RC(lanepool_lane_async(a, rl_hold, NULL), 0);
  CHECK_RC(lanepool_lane_async(b, rl_hold, NULL), 0);
  uint64_t end = now_ns() + WAIT_CAP_NS;
  while (atomic_load(&rl_run.held) < 2 && now_ns() < end) sched_yield();
  CHECK(atomic_load(&rl_run.held) == 2);
  CHECK_RC(lanepool__lane_push(a, rl_w, NULL, NULL, LANEPOOL__PUSH_STEAL), 0);
  CHECK(wait_flag(&rl_run.w_pushed));
  atomic_store(&rl_run.release, 1);
  end = now_ns() + WAIT_CAP_NS;
  while (!atomic_load(&rl_run.w_ok) && now_ns() < end) sched_yield();
  CHECK(atomic_load(&rl_run.w_ok));
  CHECK_RC(atomic_load(&rl_run.w_rc), 0);
  CHECK(atomic_load(&rl_run.w_lane) == rescue);
  lanepool_lane_t *x = atomic_load(&rl_run.x_lane);
  CHECK(x == a || x == b);
  CHECK_RC(lanepool_shutdown(rl_run.pool, LANEPOOL_SHUTDOWN_DRAIN, NULL, NULL), 0);
  CHECK_RC(lanepool_destroy(rl_run.pool), 0);
}

/* A sync onto a rescue lane runs on its thread, never inline on the caller's: lent, a
 * rescue lane parked without a timeout would swallow the wake of the band push it
 * waits for (a lent lane's give-back looks at its own ring only). After the sync, band
 * work behind a blocked lane is still rescued. */
static _Atomic int sync_tid, sync_rc, sync_done, sync_caller_tid;
static void record_tid(void *arg) {
  (void)arg;
  atomic_store(&sync_tid, (int)syscall(SYS_gettid));
}
static void *sync_thread(void *arg) {
  atomic_store(&sync_caller_tid, (int)syscall(SYS_gettid));
  atomic_store(&sync_rc, lanepool_lane_sync(arg, record_tid, NULL));
  atomic_store(&sync_done, 1);
  return NULL;
}

static void test_rescue_lane_is_never_lent(void) {
  current_test = "rescue lane: a sync onto it runs on its thread, and it still rescues after";
  rescue_run r = {0};
  r.pool = make_pool("rescues", 1);
  lanepool_lane_t *a = NULL, *rescue = NULL;
  CHECK_RC(lanepool_get_lane(r.pool, LANEPOOL_QOS_DEFAULT, 0, &a), 0);
  CHECK_RC(lanepool_rescue_lane(r.pool, LANEPOOL_QOS_DEFAULT, &rescue), 0);
  struct timespec ms = {0, 2000000};
  nanosleep(&ms, NULL); /* parked by now, most likely (either way the check holds) */
  atomic_store(&sync_done, 0);
  pthread_t t;
  CHECK_RC(pthread_create(&t, NULL, sync_thread, rescue), 0);
  if (!wait_flag(&sync_done)) { /* a queued sync that never woke the rescue lane */
    fprintf(stderr, "%s: the sync did not return within the cap\n", current_test);
    exit(1);
  }
  pthread_join(t, NULL);
  CHECK_RC(atomic_load(&sync_rc), 0);
  lanepool_lane_info_t info;
  CHECK_RC(lanepool_lane_info(rescue, &info), 0);
  CHECK(atomic_load(&sync_tid) == (int)info.tid);
  CHECK(atomic_load(&sync_tid) != atomic_load(&sync_caller_tid));
  CHECK_RC(lanepool_lane_async(a, rescue_x, &r), 0);
  CHECK(wait_flag(&r.x_done));
  CHECK(atomic_load(&r.x_ok));
  CHECK(atomic_load(&r.t2_lane) == rescue);
  CHECK_RC(lanepool_shutdown(r.pool, LANEPOOL_SHUTDOWN_DRAIN, NULL, NULL), 0);
  CHECK_RC(lanepool_destroy(r.pool), 0);
}

/* A cancel while the rescue lane runs a rescued task that blocks: the cancel waits for
 * it (each lane finishes its current task), and band work queued behind the blocked
 * lane meanwhile (the rescue lane busy) reaches the discard callback once, never runs. */
static struct {
  lanepool_t *pool;
  _Atomic int x_pushed, t2_started, release, t2_done, t3_ran, t3_discarded, others;
  _Atomic int x_ok, x_rc, cancel_rc;
  lanepool_lane_t *_Atomic t2_lane;
} rc_run;

static void rc_t3(void *arg) {
  (void)arg;
  atomic_fetch_add(&rc_run.t3_ran, 1);
}
static void rc_t2(void *arg) {
  (void)arg;
  atomic_store(&rc_run.t2_lane, current());
  atomic_store(&rc_run.t2_started, 1);
  (void)wait_flag(&rc_run.release);
  atomic_store(&rc_run.t2_done, 1);
}
static void rc_x(void *arg) {
  (void)arg;
  atomic_store(&rc_run.x_rc, lanepool_async_flags(rc_run.pool, LANEPOOL_QOS_DEFAULT, rc_t2, NULL,
                                                  LANEPOOL_SUBMIT_LOCAL));
  atomic_store(&rc_run.x_pushed, 1);
  atomic_store(&rc_run.x_ok, wait_flag(&rc_run.t2_done));
}
static void rc_discard(lanepool_fn fn, void *ctx, void *arg) {
  (void)ctx;
  (void)arg;
  if (fn == rc_t3)
    atomic_fetch_add(&rc_run.t3_discarded, 1);
  else
    atomic_fetch_add(&rc_run.others, 1);
}
static _Atomic int rc_cancel_done;
static void *rc_cancel(void *arg) {
  (void)arg;
  atomic_store(&rc_run.cancel_rc,
               lanepool_shutdown(rc_run.pool, LANEPOOL_SHUTDOWN_CANCEL, rc_discard, NULL));
  atomic_store(&rc_cancel_done, 1);
  return NULL;
}

static void test_rescue_lane_cancelled(void) {
  current_test = "rescue lane: a cancel waits for its rescued task, discards what waits";
  memset(&rc_run, 0, sizeof rc_run);
  rc_run.pool = make_pool("rescuec", 1);
  lanepool_lane_t *a = NULL;
  CHECK_RC(lanepool_get_lane(rc_run.pool, LANEPOOL_QOS_DEFAULT, 0, &a), 0);
  CHECK_RC(lanepool_lane_async(a, rc_x, NULL), 0);
  CHECK(wait_flag(&rc_run.t2_started)); /* rescued, and blocked */
  /* Band work behind A, while the rescue lane is held by T2: nobody can take it. */
  CHECK_RC(lanepool__lane_push(a, rc_t3, NULL, NULL, LANEPOOL__PUSH_STEAL), 0);
  pthread_t t;
  atomic_store(&rc_cancel_done, 0);
  CHECK_RC(pthread_create(&t, NULL, rc_cancel, NULL), 0);
  uint64_t end = now_ns() + WAIT_CAP_NS;
  for (;;) { /* the cancel has begun: lanes start no more tasks */
    lanepool_info_t info;
    CHECK_RC(lanepool_info(rc_run.pool, &info), 0);
    if (info.shut_down) break;
    if (now_ns() > end) {
      fprintf(stderr, "%s: the cancel did not begin within the cap\n", current_test);
      exit(1);
    }
    sched_yield();
  }
  atomic_store(&rc_run.release, 1);
  if (!wait_flag(&rc_cancel_done)) {
    fprintf(stderr, "%s: the cancel did not end within the cap\n", current_test);
    exit(1);
  }
  pthread_join(t, NULL);
  CHECK_RC(atomic_load(&rc_run.cancel_rc), 0);
  CHECK_RC(atomic_load(&rc_run.x_rc), 0);
  CHECK(atomic_load(&rc_run.x_ok));
  lanepool_lane_t *t2 = atomic_load(&rc_run.t2_lane);
  CHECK(t2 != NULL && t2 != a);
  CHECK(atomic_load(&rc_run.t3_ran) == 0);
  CHECK(atomic_load(&rc_run.t3_discarded) == 1);
  CHECK(atomic_load(&rc_run.others) == 0);
  CHECK_RC(lanepool_destroy(rc_run.pool), 0);
}

/* ---- lane-bound tasks stay on their lane, in order --------------------------------- */

typedef struct {
  _Atomic int release, started;
  lanepool_lane_t *lane;
  _Atomic int next, wrong_lane, out_of_order;
} bound_run;

static void nothing(void *arg) { (void)arg; }

static void blocker(void *arg) {
  bound_run *b = arg;
  atomic_store(&b->started, 1);
  (void)wait_flag(&b->release);
}

typedef struct {
  bound_run *b;
  int index;
} bound_item;

static void bound_task(void *arg) {
  bound_item *it = arg;
  if (current() != it->b->lane) atomic_fetch_add(&it->b->wrong_lane, 1);
  if (atomic_fetch_add(&it->b->next, 1) != it->index) atomic_fetch_add(&it->b->out_of_order, 1);
}

static void test_bound_tasks_are_never_stolen(void) {
  current_test = "lane-bound tasks behind a blocked task are not taken by an idle lane";
  lanepool_t *pool = make_pool("steal-bound", 2);
  bound_run b = {0};
  CHECK_RC(lanepool_get_lane(pool, LANEPOOL_QOS_DEFAULT, 0, &b.lane), 0);
  CHECK_RC(lanepool_lane_async(b.lane, blocker, &b), 0);
  CHECK(wait_flag(&b.started));
  enum { N = 200 };
  static bound_item items[N];
  for (int i = 0; i < N; i++) {
    items[i] = (bound_item){&b, i};
    CHECK_RC(lanepool_lane_async(b.lane, bound_task, &items[i]), 0);
  }
  /* A stealable task on the same band: it must run (on the other lane) while the bound
   * ones wait. It proves a lookout was there to take work; the bound ones stay. */
  fanout f = {.pool = pool};
  CHECK_RC(lanepool_async(pool, LANEPOOL_QOS_DEFAULT, child_task, &f), 0);
  CHECK(wait_flag(&f.child_ran));
  CHECK(atomic_load(&b.next) == 0); /* none of the bound tasks ran elsewhere */
  atomic_store(&b.release, 1);
  CHECK_RC(lanepool_shutdown(pool, LANEPOOL_SHUTDOWN_DRAIN, NULL, NULL), 0);
  CHECK(atomic_load(&b.next) == N);
  CHECK(atomic_load(&b.wrong_lane) == 0);
  CHECK(atomic_load(&b.out_of_order) == 0);
  CHECK_RC(lanepool_destroy(pool), 0);
}

/* ---- no idle lane: a busy sibling takes what waits behind a blocked lane ------------ */

/* Lane 1 never runs out of work (tasks that resubmit themselves, two in flight), so it
 * never spins or parks; lane 0 runs a task that waits for band work it queued on its
 * own lane. Every lane of the band is taken, none idle: the busy lane must take the
 * blocked lane's band work between its own tasks. (Seen in swift-async-algorithms'
 * suite: a job blocking its lane in XCTWaiter.wait while the other lane iterates.) */
typedef struct {
  lanepool_lane_t *lane;
  _Atomic int stop, refused;
  _Atomic uint64_t runs;
} churn;

static void churn_task(void *arg) {
  churn *c = arg;
  atomic_fetch_add(&c->runs, 1);
  if (!atomic_load(&c->stop) && lanepool_lane_async(c->lane, churn_task, c) != 0)
    atomic_store(&c->refused, 1);
}

static void test_busy_sibling_takes_blocked_band_work(void) {
  current_test = "with no lane idle, a busy lane takes band work from a blocked one";
  lanepool_t *pool = make_pool("steal-busy", 2);
  lanepool_lane_t *lane0, *lane1;
  CHECK_RC(lanepool_get_lane(pool, LANEPOOL_QOS_DEFAULT, 0, &lane0), 0);
  CHECK_RC(lanepool_get_lane(pool, LANEPOOL_QOS_DEFAULT, 1, &lane1), 0);
  churn c = {.lane = lane1};
  CHECK_RC(lanepool_lane_async(lane1, churn_task, &c), 0);
  CHECK_RC(lanepool_lane_async(lane1, churn_task, &c), 0);
  fanout f = {.pool = pool, .flags = LANEPOOL_SUBMIT_LOCAL};
  CHECK_RC(lanepool_lane_async(lane0, parent_task, &f), 0);
  CHECK(wait_flag(&f.parent_done));
  CHECK(atomic_load(&f.parent_saw_child));
  CHECK(atomic_load(&f.parent_lane) == lane0);
  CHECK(atomic_load(&f.child_lane) == lane1);
  atomic_store(&c.stop, 1);
  CHECK_RC(lanepool_shutdown(pool, LANEPOOL_SHUTDOWN_DRAIN, NULL, NULL), 0);
  CHECK(atomic_load(&c.refused) == 0);
  CHECK_RC(lanepool_destroy(pool), 0);
}

/* ---- band work comes back after the band's mark was cleared ------------------------ */

/* The band's lookout clears the band-work mark when it finds every sibling's ring empty
 * while a sibling is awake (lane.c, lookout()); lanes then park untimed. Band work that
 * comes later must still be taken from a lane that blocks: each round here runs the
 * hang's shape, then holds lane 0 busy with an empty ring for a few of the lookout's
 * polls (the test cannot see the mark; the model, model/steal.pml BROKEN=5, checks the
 * clear's protocol), then the hang's shape again on the same pool. */
static void test_band_work_after_the_mark_cleared(void) {
  current_test = "band work is stolen again after the band's rings ran empty";
  lanepool_t *pool = make_pool("steal-again", 2);
  lanepool_lane_t *lane0;
  CHECK_RC(lanepool_get_lane(pool, LANEPOOL_QOS_DEFAULT, 0, &lane0), 0);
  for (int round = 0; round < 4; round++) {
    fanout f = {.pool = pool, .flags = LANEPOOL_SUBMIT_LOCAL};
    CHECK_RC(lanepool_async(pool, LANEPOOL_QOS_DEFAULT, parent_task, &f), 0);
    CHECK(wait_flag(&f.parent_done));
    CHECK(atomic_load(&f.parent_saw_child));
    bound_run b = {0};
    CHECK_RC(lanepool_lane_async(lane0, blocker, &b), 0);
    CHECK(wait_flag(&b.started));
    struct timespec polls = {.tv_sec = 0, .tv_nsec = 5 * 1000 * 1000};
    nanosleep(&polls, NULL); /* a few lookout polls see lane 0 awake, rings empty */
    atomic_store(&b.release, 1);
    /* b lives in this iteration: the blocker must be out of it first (a sync runs after
     * it, FIFO; before, a blocker preempted past the sleep below read b out of scope). */
    CHECK_RC(lanepool_lane_sync(lane0, nothing, NULL), 0);
    nanosleep(&polls, NULL); /* and the lanes park */
  }
  CHECK_RC(lanepool_destroy(pool), 0);
}

/* ---- the lookout gives its role up when band work ends ----------------------------- */

static void raise_flag(void *arg) { atomic_store((_Atomic int *)arg, 1); }

/* voluntary_ctxt_switches of a thread of this process, or -1. */
static long voluntary_switches(pid_t tid) {
  char path[64], line[128];
  snprintf(path, sizeof path, "/proc/self/task/%d/status", (int)tid);
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  long v = -1;
  while (fgets(line, sizeof line, f))
    if (sscanf(line, "voluntary_ctxt_switches: %ld", &v) == 1) break;
  fclose(f);
  return v;
}

/* Lane 0 is busy with a lane-bound task and an empty ring; one band task runs on lane 1,
 * which then parks as the band's lookout (band work marked, a sibling awake) and polls.
 * Its first polls find every ring empty and clear the mark: from then on it must park
 * untimed (a timed park costs a timer and a wake per poll, forever, while lane 0 stays
 * busy). Seen from outside: lane 1's thread stops switching. The check waits for a
 * quiet spell of 100 ms (lookout polls come every few ms) with a 20 s cap. */
static void test_lookout_gives_up_when_band_work_ends(void) {
  current_test = "the lookout parks untimed once the band's work is over";
  lanepool_t *pool = make_pool("lookout-ends", 2);
  lanepool_lane_t *lane0, *lane1;
  CHECK_RC(lanepool_get_lane(pool, LANEPOOL_QOS_DEFAULT, 0, &lane0), 0);
  CHECK_RC(lanepool_get_lane(pool, LANEPOOL_QOS_DEFAULT, 1, &lane1), 0);
  bound_run b = {0};
  CHECK_RC(lanepool_lane_async(lane0, blocker, &b), 0);
  CHECK(wait_flag(&b.started));
  _Atomic int ran = 0;
  CHECK_RC(lanepool_async(pool, LANEPOOL_QOS_DEFAULT, raise_flag, (void *)&ran), 0);
  CHECK(wait_flag(&ran));
  lanepool_lane_info_t info;
  CHECK_RC(lanepool_lane_info(lane1, &info), 0);
  bool quiet = false;
  long last = -2;
  uint64_t since = now_ns(), end = since + 20ull * 1000000000ull;
  struct timespec step = {.tv_sec = 0, .tv_nsec = 5 * 1000 * 1000};
  while (now_ns() < end) {
    long v = voluntary_switches(info.tid);
    CHECK(v >= 0);
    if (v != last) {
      last = v;
      since = now_ns();
    } else if (now_ns() - since >= 100ull * 1000000ull) {
      quiet = true;
      break;
    }
    nanosleep(&step, NULL);
  }
  CHECK(quiet);
  atomic_store(&b.release, 1);
  CHECK_RC(lanepool_destroy(pool), 0);
}

/* ---- exactly once: stealing under load, with drain and cancel ----------------------- */

#define SLOTS 20000

typedef struct {
  lanepool_t *pool;
  _Atomic uint8_t ran[SLOTS];
  _Atomic uint8_t discarded[SLOTS];
  _Atomic uint32_t next_id;
  _Atomic uint32_t accepted;
  _Atomic int twice;
} ledger;

static ledger book;

static void counted(void *arg);

/* Each task spins a little now and then (so that lanes get stuck and siblings steal)
 * and submits a follow-up from its lane, LOCAL, the Swift executor's way. */
static void submit_one(unsigned flags) {
  uint32_t id = atomic_fetch_add(&book.next_id, 1);
  if (id >= SLOTS) return;
  if (lanepool_async_flags(book.pool, LANEPOOL_QOS_DEFAULT, counted, (void *)(uintptr_t)id,
                           flags) == 0)
    atomic_fetch_add(&book.accepted, 1);
}

static void counted(void *arg) {
  uint32_t id = (uint32_t)(uintptr_t)arg;
  if (atomic_fetch_add(&book.ran[id], 1) != 0) atomic_store(&book.twice, 1);
  if (id % 64 == 0) { /* a long task: its queue waits */
    uint64_t end = now_ns() + 200000;
    while (now_ns() < end) {}
  }
  if (id % 3 == 0) submit_one(LANEPOOL_SUBMIT_LOCAL | LANEPOOL_SUBMIT_CONTINUATION);
}

static void discard_counted(lanepool_fn fn, void *ctx, void *arg) {
  (void)arg;
  if (fn != counted) return;
  uint32_t id = (uint32_t)(uintptr_t)ctx;
  if (atomic_fetch_add(&book.discarded[id], 1) != 0) atomic_store(&book.twice, 1);
}

static void *producer(void *arg) {
  (void)arg;
  while (atomic_load(&book.next_id) < SLOTS / 2) submit_one(0);
  return NULL;
}

static void test_exactly_once(int round, lanepool_shutdown_mode_t mode) {
  current_test = mode == LANEPOOL_SHUTDOWN_DRAIN ? "exactly once with stealing, drain"
                                                 : "exactly once with stealing, cancel";
  memset(&book, 0, sizeof book);
  book.pool = make_pool("steal-once", 2);
  pthread_t th[3];
  for (int i = 0; i < 3; i++) pthread_create(&th[i], NULL, producer, NULL);
  for (int i = 0; i < 3; i++) pthread_join(th[i], NULL);
  if (round % 2) sched_yield();
  CHECK_RC(lanepool_shutdown(book.pool, mode, discard_counted, NULL), 0);
  uint32_t issued = atomic_load(&book.next_id);
  if (issued > SLOTS) issued = SLOTS;
  uint32_t ran = 0, discarded = 0, both = 0;
  for (uint32_t i = 0; i < SLOTS; i++) {
    ran += atomic_load(&book.ran[i]) != 0;
    discarded += atomic_load(&book.discarded[i]) != 0;
    both += atomic_load(&book.ran[i]) && atomic_load(&book.discarded[i]);
  }
  CHECK(!atomic_load(&book.twice));
  CHECK(both == 0);
  /* Every accepted task ran or came back, once; a drain runs them all. */
  CHECK(ran + discarded == atomic_load(&book.accepted));
  if (mode == LANEPOOL_SHUTDOWN_DRAIN) CHECK(discarded == 0);
  CHECK_RC(lanepool_destroy(book.pool), 0);
}

/* ---- wake-ups: a lane woken beside its waker's running task lets it go first ------- */

typedef struct {
  lanepool_lane_t *other;
  _Atomic int pushed_rc, woken_ran, waker_saw, waker_done;
} waking;

static void woken_task(void *arg) { atomic_store(&((waking *)arg)->woken_ran, 1); }

/* Wakes `other` with a queued sync: blocked until it ran, nothing to yield to. */
static void sync_waker_task(void *arg) {
  waking *w = arg;
  atomic_store(&w->pushed_rc,
               lanepool_lane_sync_flags(w->other, woken_task, w, LANEPOOL_SYNC_QUEUED));
  atomic_store(&w->waker_saw, atomic_load(&w->woken_ran));
  atomic_store(&w->waker_done, 1);
}

/* Wakes `other` and stays in its task until the woken lane has run what it pushed. */
static void waker_task(void *arg) {
  waking *w = arg;
  atomic_store(&w->pushed_rc, lanepool_lane_async(w->other, woken_task, w));
  atomic_store(&w->waker_saw, wait_flag(&w->woken_ran));
  atomic_store(&w->waker_done, 1);
}

static bool pin_thread(pid_t tid, int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return sched_setaffinity(tid, sizeof set, &set) == 0;
}

/* true once the lane is parked: its word PARKED and its thread asleep on the futex (a
 * lane still in its park's first steps could read its note before the waker wrote it);
 * false at the cap. */
static bool wait_parked(lanepool_lane_t *lane) {
  lanepool_lane_info_t info;
  CHECK(lanepool_lane_info(lane, &info) == 0);
  uint64_t end = now_ns() + WAIT_CAP_NS;
  while (atomic_load(&lane->sleeping) != LANE_PARKED || !thread_blocked(info.tid)) {
    if (now_ns() > end) return false;
    sched_yield();
  }
  return true;
}

static uint64_t yields_of(lanepool_lane_t *lane) {
  lanepool_lane_info_t info;
  CHECK(lanepool_lane_info(lane, &info) == 0);
  return info.yields_to_waker;
}

/* Lane A's task wakes lane B and keeps running. B pinned to A's CPU yields to it once
 * per wake (the kernel put it beside its running waker); B on a CPU of its own never
 * does, nor when the waker is a thread outside the pool, nor when A's task waits
 * blocked for what it pushed (a queued sync). */
static void test_woken_lane_yields_to_its_waker(bool same_cpu) {
  current_test = same_cpu ? "a lane woken on its running waker's CPU yields to it"
                          : "a lane woken on a CPU of its own does not yield";
  cpu_set_t allowed;
  CHECK(sched_getaffinity(0, sizeof allowed, &allowed) == 0);
  int cpus[2], found = 0;
  for (int c = 0; c < CPU_SETSIZE && found < 2; c++)
    if (CPU_ISSET(c, &allowed)) cpus[found++] = c;
  if (found < 2 && !same_cpu) return; /* needs two CPUs */
  lanepool_t *p = make_pool("st-yield", 2);
  lanepool_lane_t *a = NULL, *b = NULL;
  CHECK(lanepool_get_lane(p, LANEPOOL_QOS_DEFAULT, 0, &a) == 0);
  CHECK(lanepool_get_lane(p, LANEPOOL_QOS_DEFAULT, 1, &b) == 0);
  lanepool_lane_info_t ia, ib;
  CHECK(lanepool_lane_info(a, &ia) == 0 && lanepool_lane_info(b, &ib) == 0);
  CHECK(pin_thread(ia.tid, cpus[0]));
  CHECK(pin_thread(ib.tid, same_cpu ? cpus[0] : cpus[1]));
  for (int round = 0; round < 3; round++) {
    CHECK(wait_parked(b));
    uint64_t before = yields_of(b);
    waking w = {.other = b};
    CHECK(lanepool_lane_async(a, waker_task, &w) == 0);
    CHECK(wait_flag(&w.waker_done));
    CHECK(atomic_load(&w.pushed_rc) == 0);
    CHECK(atomic_load(&w.waker_saw));
    CHECK(yields_of(b) == before + (same_cpu ? 1 : 0));
  }
  /* A's task blocks in a queued sync onto B: nothing runs that B could let go first. */
  CHECK(wait_parked(b));
  uint64_t before_sync = yields_of(b);
  waking ws = {.other = b};
  CHECK(lanepool_lane_async(a, sync_waker_task, &ws) == 0);
  CHECK(wait_flag(&ws.waker_done));
  CHECK(atomic_load(&ws.pushed_rc) == 0);
  CHECK(atomic_load(&ws.waker_saw));
  CHECK(yields_of(b) == before_sync);
  /* Woken by this thread, no lane: nothing to yield to. */
  CHECK(wait_parked(b));
  uint64_t before = yields_of(b);
  waking w = {.other = b};
  CHECK(lanepool_lane_async(b, woken_task, &w) == 0);
  CHECK(wait_flag(&w.woken_ran));
  CHECK(yields_of(b) == before);
  CHECK_RC(lanepool_destroy(p), 0);
}

int main(int argc, char **argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 20;
  for (int r = 0; r < rounds; r++) {
    test_job_waiting_for_its_own_submit(0);
    test_job_waiting_for_its_own_submit(LANEPOOL_SUBMIT_LOCAL);
    test_job_waiting_for_its_own_submit(LANEPOOL_SUBMIT_LOCAL | LANEPOOL_SUBMIT_CONTINUATION);
  }
  for (int r = 0; r < (rounds + 3) / 4; r++) test_bound_tasks_are_never_stolen();
  for (int r = 0; r < (rounds + 3) / 4; r++) test_band_work_after_the_mark_cleared();
  for (int r = 0; r < rounds; r++) test_busy_sibling_takes_blocked_band_work();
  for (int r = 0; r < rounds; r++) test_older_band_work_first();
  for (int r = 0; r < rounds; r++) test_older_band_work_first_twice();
  test_lookout_gives_up_when_band_work_ends();
  for (int r = 0; r < (rounds + 3) / 4; r++) {
    test_woken_lane_yields_to_its_waker(true);
    test_woken_lane_yields_to_its_waker(false);
  }
  /* Each waits LANEPOOL__RESCUE_NS or two: a few rounds. */
  for (int r = 0; r < (rounds + 9) / 10; r++) {
    test_rescue_lane(false, false);
    test_rescue_lane(true, false);
    test_rescue_lane(false, true);
    test_rescue_lane(true, true);
    test_rescue_lane_cancelled();
    test_rescue_behind_lane_bound(false, false);
    test_rescue_behind_lane_bound(true, false);
    test_rescue_behind_lane_bound(false, true);
    test_rescued_task_submits_local();
    test_rescue_lane_is_never_lent();
  }
  for (int r = 0; r < rounds; r++) {
    test_exactly_once(r, LANEPOOL_SHUTDOWN_DRAIN);
    test_exactly_once(r, LANEPOOL_SHUTDOWN_CANCEL);
  }
  printf("%d passed, %d failed\n", passed, failed);
  return failed != 0;
}
