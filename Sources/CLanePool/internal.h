/*
 * internal.h - LanePool's private structures. Not installed, not seen by Swift.
 *
 * Legend for every shared field: [once] written before the lane thread starts and
 * read-only after; [prod] written by producers; [cons] written only by the lane
 * thread; [lock] protected by the named mutex; [atomic:<order>] the ordering used.
 * The memory-ordering argument as a whole is in docs/architecture.md.
 */
#ifndef LANEPOOL_INTERNAL_H
#define LANEPOOL_INTERNAL_H

#include "lanepool.h"

#include <pthread.h> /* (ring.h: errno.h, sched.h, the atomics, bool and integer types) */

#define LANEPOOL__MAX_NODES 1024 /* libnuma's default MAX_NUMNODES is 1024 at most */

#include "inject.h"
#include "ring.h"

/* n bytes rounded up to whole cache lines. */
#define LANEPOOL__LINES(n) (((n) + LANEPOOL__CACHE_LINE - 1) & ~(size_t)(LANEPOOL__CACHE_LINE - 1))

/* What a lane asked the kernel for and got: written by the lane thread before it
 * signals `started`, read-only after (the creator's acquire of `started` pairs). */
typedef struct lanepool__applied {
  union { /* named, or in that order (describe_refusals) */
    struct {
      lanepool_applied_t sched, nice, ioprio, timer_slack, slice;
    };
    lanepool_applied_t setting[5];
  };
  int placement_error;
} lanepool__applied;

typedef struct lanepool__topo_node {
  int node;
  uint32_t cpu_count;
  int *cpus;
} lanepool__topo_node;

typedef struct lanepool__topology {
  uint32_t node_count;
  lanepool__topo_node *nodes;
} lanepool__topology;

/* struct sched_attr (sched_setattr(2)); declared here because glibc 2.36 lacks it. */
typedef struct lanepool__sched_attr {
  uint32_t size;
  uint32_t sched_policy;
  uint64_t sched_flags;
  int32_t sched_nice;
  uint32_t sched_priority;
  uint64_t sched_runtime;
  uint64_t sched_deadline;
  uint64_t sched_period;
} lanepool__sched_attr;
#define LANEPOOL__SCHED_FLAG_RESET_ON_FORK 1u /* sched_attr.sched_flags */

/* A lane's carrier (band.c, "The carrier"): a thread that is not the lane's own, holds
 * its exclusion, and was boosted for it. `band` + 1 it was raised to (0: none yet);
 * `home` its own lane (a thread of the pool running this lane's queue), whose band it
 * takes back, else `saved`, what it had; `rt`: raised to a real-time policy, so its
 * timer slack (`saved_slack`) is set again too. */
typedef struct lanepool__carrier {
  uint32_t band;
  struct lanepool_lane *home;
  bool rt, sched_set, ioprio_set; /* sched_set, ioprio_set: what a raise changed (put back) */
  int saved_ioprio;
  uint64_t saved_slack;
  lanepool__sched_attr saved;
} lanepool__carrier;

/* What band.c last gave a lane's thread (escalation), so that a system call that would
 * change nothing is skipped. A `*_known` false: unknown (a new thread, a failed call). */
typedef struct lanepool__boost_now {
  bool sched_known, ioprio_known;
  int policy, rt_priority, nice, ioprio;
  uint64_t slice_ns;
} lanepool__boost_now;

typedef struct lanepool__timer_entry {
  uint64_t deadline;
  lanepool_timer_t id;   /* ascending: ties fire in the order they were set */
  lanepool_lane_t *lane; /* NULL: any lane of `band` */
  int band;
  lanepool_fn fn;
  void *ctx;
} lanepool__timer_entry;

/* Intake modes, shared by the overflow lists and the timer facility. */
/* Ordered: a push is refused when intake > (it comes from a lane of the pool). */
enum { LANEPOOL__OPEN = 0, LANEPOOL__INTAKE_OWN_ONLY = 1, LANEPOOL__INTAKE_CLOSED = 2 };

/* The pool's timer facility (timer.c). Every field: [lock], except the two counters,
 * which are written under the lock and read without it by the drain scan [atomic:
 * release stores, acquire loads]. */
typedef struct lanepool__timers {
  pthread_mutex_t lock;
  pthread_cond_t cond; /* CLOCK_MONOTONIC */
  lanepool__timer_entry *heap;
  size_t len, cap;
  uint64_t next_id;
  int intake; /* LANEPOOL__OPEN / INTAKE_OWN_ONLY / INTAKE_CLOSED */
  bool started, stop;
  pthread_t thread;
  _Atomic uint64_t added; /* timers accepted */
  _Atomic uint64_t done;  /* timers pushed into a lane, or cancelled by their owner */
} lanepool__timers;

/* An overflow list (spill.c), a growing circular buffer under a mutex. Every field
 * [lock], except the counters, which are written under the lock and read without it:
 * count [atomic: seq_cst store, so the unlocked checks of the wake-up pairs can read
 * it], in [release; acquire by the drain scan], overflowed [relaxed; statistics]. */
typedef struct lanepool__spill {
  pthread_mutex_t lock;
  _Atomic uint64_t count;      /* tasks in the list */
  _Atomic uint64_t in;         /* tasks appended, less those moved into a ring since */
  _Atomic uint64_t overflowed; /* the same, for info */
  lanepool__task *buf;
  uint64_t cap, head;
  int intake; /* LANEPOOL__OPEN / INTAKE_OWN_ONLY / INTAKE_CLOSED */
} lanepool__spill;

struct lanepool_lane {
  /* ---- [once] ---- */
  lanepool_t *pool;
  uint32_t band;    /* 0...4 */
  uint32_t index;   /* within the band */
  uint32_t spin_ns; /* the band's maximum spin budget */
  int fixed_spin;
  int low_latency; /* the interactive band with interactive_spin_ns set */
  int hard_capacity;
  size_t stack_size;
  char name[16];
  _Atomic(void *) userdata; /* [atomic: release/acquire] for the embedding layer */
  uint64_t generation;      /* the fork generation the pool was created in */
  int cpu;                  /* pinned CPU or -1 */
  int node;                 /* NUMA node (NUMA placement) or -1 */
  bool spare;               /* the band's rescue lane: no band pick reaches it */
  bool lane_numa_owned;     /* this struct came from numa_alloc_onnode */
  bool slots_numa_owned;
  size_t lane_bytes, slots_bytes;
  lanepool_band_policy_t policy;
  lanepool__applied applied; /* [cons before `started`, read-only after] */
  /* The lane's current thread. Replaced when a task ends its thread (pthread_exit):
   * the dying thread starts its successor and stores it here before it exits, so
   * the joiner follows the chain. [thread_lock] */
  pthread_mutex_t thread_lock;
  pthread_t thread;
  /* Threads are told apart by generation, never by pthread_t: glibc hands a joined
   * thread's descriptor (and so its pthread_t) to the next thread it creates.
   * thread_gen counts the replacements of `thread`; join_claim is the generation + 1 of
   * the thread the joiner has read and joins now, 0 for none. A thread a task ends
   * detaches itself unless it is that one, so every thread of the chain is joined or
   * detached exactly once. [thread_lock] */
  uint64_t thread_gen;
  uint64_t join_claim;

  /* ---- the ring: tail (producers) and head (consumer) on their own lines ---- */
  lanepool__ring ring;

  /* ---- the lane's exclusion (sync.c): who may run its queue now ---- */
  /* 0: free; otherwise the tid of the thread that holds it (the lane's own thread, a
   * sibling or the rescue thread running its queue, a sync caller running a closure
   * inline, or a sync's waiter running the queue up to its sync). Whoever holds it runs
   * the lane's tasks, one at a time, in order.
   * [atomic: seq_cst CAS 0 -> tid to take it, seq_cst store of 0 to give it up; the
   * Dekker pair with a producer: push(CAS tail) ; load(excl)  against
   * store(excl = 0) ; load(tail)] */
  alignas(LANEPOOL__CACHE_LINE) _Atomic uint32_t excl;
#define LANEPOOL__EXCL_CLOSED UINT32_MAX /* the lane's thread has left: nobody takes it */
  /* The boosted carrier's tid (band.c, "The carrier"), LANEPOOL__CARRIER_LOOK while an
   * update looks for one, or 0. Nonzero: a holder giving the lane up takes boost_lock.
   * [boost_lock for writes; atomic: the Dekker pair update: store(carried) ; load(excl)
   * against holder: store(excl = 0) ; load(carried), both seq_cst] */
  _Atomic uint32_t carried;
#define LANEPOOL__CARRIER_LOOK UINT32_MAX
  /* Threads waiting for a sync queued here that run the lane's queue themselves once it
   * is free (sync.c, help_until_answered), and the futex word they wait on: bumped when
   * the lane is given up with work queued, when a sync here ends and when a waiter's
   * chain changes. [atomic: seq_cst] */
  _Atomic uint32_t helpers;
  _Atomic uint32_t help_seq;

  /* ---- the lane's thread (worker.c): what it runs, whichever queue it came from ---- */
  alignas(LANEPOOL__CACHE_LINE) uint32_t spin_now; /* [cons] the adaptive spin budget */
  /* [cons] a task this thread ran submitted work to another thread of the pool: the next
   * spin may go past the spinner cap (the reply is likely to come soon). */
  bool handed_off;
  uint32_t lift_hint; /* [cons] bit b: its tasks pushed band b's work since it last looked */
  /* [cons, atomic: release store after each task; acquire by the info and the stall
   * detector] tasks this thread finished (returned, or ended their thread) */
  _Atomic uint64_t executed;
  _Atomic uint64_t started_tasks; /* [cons, atomic: relaxed] started != executed: mid-task */
  /* [cons, atomic: release after each band job; acquire by the drain scan] band jobs
   * this thread finished (bandq.c counts what the band accepted) */
  _Atomic uint64_t band_done;
  /* [excl holder, atomic: release store after each lane-bound task; acquire by the
   * drain scan] lane-bound tasks of this lane finished, whoever ran them. Here, not on
   * excl's line, which every producer reads: a store per task there cost W2 half. */
  _Atomic uint64_t bound_done;
  _Atomic uint64_t busy_ns; /* [cons, atomic: relaxed] */
  /* [cons, atomic: release at start, acquire in create and info; stored 0 under
   * boost_lock when the thread leaves (lanepool__lane_thread_leaving), so a boost never
   * touches an exited, maybe reused, thread id] */
  _Atomic int tid;
  _Atomic int running; /* [cons, atomic: relaxed] */
  /* 1 while the thread may be running something other than its own lane's queue (a
   * band job, another lane's queue): a producer that then finds this lane free with
   * work queued announces it to the band (worker.c, lanepool__lane_kick).
   * [cons, atomic: seq_cst stores; seq_cst loads by producers after their push] */
  _Atomic uint32_t away;
  _Atomic uint64_t adopted; /* [cons, atomic: relaxed] tasks of other lanes' queues it ran */
  _Atomic uint64_t yields;  /* [cons, atomic: relaxed] times it let its waker go first */
  /* The band's rescue thread only (worker.c, "The rescue thread"): the band's progress at
   * its last look and since when it has been that; until when it parks with a timeout
   * whatever it finds. [cons] */
  uint64_t rescue_seen[2];
  uint64_t rescue_calm_until;

  /* ---- parking ---- */
  /* The thread: AWAKE, or PARKED on the futex. [atomic: seq_cst store of PARKED by the
   * thread before its last look at its queues; seq_cst load + CAS to AWAKE by wakers] */
  alignas(LANEPOOL__CACHE_LINE) _Atomic uint32_t sleeping;
  /* Inline syncs (a sync caller running its closure under the lane's exclusion) begun
   * and ended, for the drain scan: a lent run counts as accepted before its caller
   * checks that the pool is OPEN, and as finished once its closure returned.
   * [atomic: seq_cst increment of lent_in; release increment of lent_out; the scan's
   * seq_cst / acquire loads] */
  _Atomic uint64_t lent_in, lent_out;
  /* Threads between taking the exclusion of this lane from outside its thread (a sync
   * caller, a sibling) and their last access to this lane: the join waits for 0, so
   * destroy never frees under them. [atomic: relaxed increment; release decrement;
   * acquire by the joiner] */
  _Atomic uint32_t borrowers;
  /* Who woke the thread from its current park: a thread of the pool from inside a running
   * task (its started_tasks then) and the CPU it ran on; NULL for anyone else. Cleared
   * by the thread before it stores PARKED, written by the waker after its CAS, read once
   * after the wake (park.c, yield_to_waker). [atomic: relaxed; a hint only] */
  _Atomic(lanepool_lane_t *) woken_by;
  _Atomic uint64_t woken_by_task;
  _Atomic int woken_on_cpu;

  /* ---- stall detector state: [the timer thread only], `stalled*` atomic for info ---- */
  uint64_t watch_started;         /* started_tasks at the last check */
  uint64_t watch_since;           /* when that task was first seen running */
  _Atomic uint64_t stalled_since; /* 0, or when the stalled task was first seen */
  _Atomic uint64_t stalls;

  /* ---- overflow list, used when the ring is full (not with hard capacity) ---- */
  alignas(LANEPOOL__CACHE_LINE) lanepool__spill spill;

  /* ---- escalation (band.c): the lane runs at the band of the highest waiter ---- */
  /* Serialises applying a band to the lane's thread: held around the syscalls, by
   * waiters (not on any fast path) and by the lane when its awaited task ends. */
  alignas(LANEPOOL__CACHE_LINE) pthread_mutex_t boost_lock;
  /* Callers waiting on this lane while boosting it, per band of theirs. [atomic: relaxed
   * changes, each followed by lanepool__boost_update, which reads them under boost_lock] */
  _Atomic uint32_t boost_waiting[LANEPOOL_BAND_COUNT];
  /* The band the lane's thread runs at now: its own, or a waiter's (lower index).
   * [boost_lock for writes; atomic: relaxed reads] */
  _Atomic uint32_t boost_band;
  /* The band of a job its thread runs lifted (worker.c), else LANEPOOL_BAND_COUNT [its
   * thread, relaxed]; the band the thread was set to, the higher of the two [boost_lock] */
  _Atomic uint32_t lift;
  uint32_t run_band;
  lanepool__boost_now boost_now; /* [boost_lock] */
  /* 1 while a boost holds the thread at a real-time policy, 2 once it left it: Linux
   * zeroes a thread's timer slack on entering one and gives it the default back on
   * leaving, and only the thread can set it again (run_counted, at 2). [atomic] */
  _Atomic uint32_t reslack;
  /* Queued syncs whose caller's chain holds this lane: told when boost_band changes. */
  struct lanepool__chain_link *chain_waiters; /* [boost_lock] */
  lanepool__carrier carrier; /* [boost_lock] the one recorded (band.c, "The carrier") */
};

/* The pool's life: its states, and every transition (a CAS to a larger value: the word
 * never moves back), are lifecycle.c's, drawn there and in docs/architecture.md, "Life
 * cycle". Lower layers only ask (lanepool__life_* below) and report events
 * (lanepool__drain_idle). model/lifecycle.pml models it; model/check-lifecycle-names
 * checks that its names and values agree with these. */
enum {
  LANEPOOL__LIFE_OPEN = 0,
  LANEPOOL__LIFE_DRAINING = 1,
  LANEPOOL__LIFE_CLOSING = 2, /* the drain committed: a cancel no longer escalates it */
  LANEPOOL__LIFE_CANCELLING = 3,
  LANEPOOL__LIFE_JOINED = 4,
  LANEPOOL__LIFE_DESTROYED = 5, /* stored by destroy just before the memory goes */
};

/* Adds n (modulo 2^64) to a counter one thread at a time writes (its owner, or under a
 * lock): a load and a store, no read-modify-write. */
static inline void lanepool__add_owned(_Atomic uint64_t *c, uint64_t n, memory_order order) {
  atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + n, order);
}

/* Values of lane->sleeping (park.c). */
enum { LANE_AWAKE = 0, LANE_PARKED = 1 };

typedef struct lanepool__counter {
  alignas(LANEPOOL__CACHE_LINE) _Atomic uint32_t value;
} lanepool__counter;
typedef struct lanepool__next { /* bandq.c: a ring's job left to its lane's thread */
  alignas(LANEPOOL__CACHE_LINE) _Atomic uint64_t value; /* the tail after its last such push */
  /* The ring's head when a taker first found that job there, and when: each ring's
   * grace clock, on a line the pusher does not write. */
  alignas(LANEPOOL__CACHE_LINE) _Atomic uint64_t seen_head, seen_ns;
} lanepool__next;

/* A band's shared queue of band work (bandq.c) and who is free to take it (park.c).
 * Every accepted band job is in one of `rings` or in `spill`, where every thread of the
 * band (its lanes' threads and its rescue thread) can take it. */
typedef struct lanepool__band {
  /* [once] one ring per lane of the band (shards: bandq.c), many-producer many-consumer
   * (lanepool__ring_take). */
  lanepool__ring *rings;
  uint32_t shards;
  /* [once] per ring, its lane's thread's next job (bandq.c, Go's runnext). [atomic:
   * relaxed, seen_head release/acquire; a hint only] */
  lanepool__next *next;
  lanepool__spill spill;
  /* Threads of the band parked without a timeout, and spinning now. A band push reads
   * them after its CAS on tail (seq_cst: the Dekker pair with a thread that stores
   * PARKED, counts itself idle and looks at the queue once more; and with a spinner
   * that stops counting itself and looks once more): no spinner and an idle thread,
   * the push wakes one. [atomic: seq_cst] */
  alignas(LANEPOOL__CACHE_LINE) _Atomic uint32_t idle;
  _Atomic uint32_t spinning;
  _Atomic uint32_t watching; /* 1: a parked thread watches `next` jobs (park.c) [seq_cst] */
  /* 1: the band's rescue thread is parked with no timeout; a push that announces work
   * wakes it (park.c, lanepool__band_wake). [atomic: seq_cst] */
  _Atomic uint32_t rescue_idle;
} lanepool__band;

struct lanepool {
  /* ---- [once] ---- */
  char name[LANEPOOL_MAX_NAME + 1];
  uint32_t lanes_per_band;
  uint32_t ring_capacity;
  int hard_capacity;
  int is_default;
  lanepool__topology topology; /* NUMA placement: nodes -> allowed CPUs */
  int *allowed_cpus;           /* the creator's allowed CPUs (all of them), for the timer */
  int *rescue_cpus;            /* pinned or per-node placement: every CPU a band lane may run
                                  on, where the rescue lanes run; NULL: they float */
  uint32_t rescue_cpu_count;
  uint64_t generation; /* fork generation at creation */
  uint64_t stall_threshold_ns;
  lanepool_log_fn log;
  void *log_arg;
  uint32_t allowed_count;
  lanepool_t *registry_next; /* the next live pool (lifecycle.c) [registry_lock] */
  uint32_t spin_cpus;        /* the CPUs its lanes may use (placed, else allowed; at most the
                         cgroup's quota), for lanepool__cpus_taken; 0: unknown [once] */
  /* [band * lanes_per_band + i], then each band's rescue lane at
   * [LANEPOOL_BAND_COUNT * lanes_per_band + band] (lanepool__lane_total of them) */
  lanepool_lane_t **lanes;

  /* LANEPOOL__LIFE_OPEN...DESTROYED. [atomic: seq_cst CAS (lifecycle.c only); futex word
   * for shutdown callers waiting for JOINED; acquire load by each lane between tasks
   * (CANCELLING: start no more tasks)] */
  alignas(LANEPOOL__CACHE_LINE) _Atomic uint32_t state;
  /* A cancel that escalates a drain claims `escalation` (CAS 0 -> 1), leaves its
   * discard callback here for the driver, then tries DRAINING -> CANCELLING.
   * [discard*: written by the claimant before its seq_cst CAS of `state`; read by the
   * driver after its acquire load of CANCELLING] */
  _Atomic uint32_t escalation;
  lanepool_discard_fn discard;
  void *discard_arg;
  lanepool__timers timers;

  /* Bumped by a lane that goes idle while the pool drains, by a timer cancel and by
   * an escalation; the driver waits on it between drain scans. [atomic: seq_cst] */
  alignas(LANEPOOL__CACHE_LINE) _Atomic uint32_t drain_events;

  /* lanes spinning now, and the cap. [atomic: relaxed; a soft limit] */
  alignas(LANEPOOL__CACHE_LINE) _Atomic uint32_t spinners;
  uint32_t max_spinners;    /* [once] */
  _Atomic uint32_t lift_ok; /* bit b: band b's jobs may be lifted (worker.c, step 4) [relaxed] */
  int nice_shift;           /* added to each band's nice (LANEPOOL_NICE_SHIFT) [once] */
  /* The low-latency interactive band's own spinners, counted like `spinners` with a
   * cap of 1. [atomic: relaxed; a soft limit] */
  _Atomic uint32_t interactive_spinner;

  /* round-robin counters, one cache line each. [atomic: relaxed] */
  lanepool__counter rr[LANEPOOL_BAND_COUNT];
  /* Per band, a lane spinning idle, as its index + 1 (0: none). lanepool_next_lane
   * hands it to one caller, who claims it with a CAS to 0: work then goes to a lane that
   * is awake and watching its ring instead of waking a parked one. Published by the
   * spinning lane, withdrawn by it (CAS of its own value to 0) when it stops. [atomic:
   * relaxed; a hint: any lane is a correct pick, a stale one only costs a wake] */
  lanepool__counter warm[LANEPOOL_BAND_COUNT];

  /* Per band, its queue of band work and its idle and spinning threads (bandq.c). */
  lanepool__band bands[LANEPOOL_BAND_COUNT];

  /* start-up handshake: lanes count up, the creator waits. [atomic: release/acquire] */
  alignas(LANEPOOL__CACHE_LINE) _Atomic uint32_t started;

  /* ---- escalation (band.c) ---- */
  /* 1 once a refused escalation was logged (one line per pool). [atomic: CAS] */
  _Atomic uint32_t boost_logged;
  /* Per band, what the kernel refused for a boost to it (LANEPOOL__REFUSED_*): later
   * boosts ask for the fallback at once. [atomic: relaxed fetch_or; a hint] */
  _Atomic uint32_t boost_refused[LANEPOOL_BAND_COUNT];
  /* lanepool__nice_floor() + 64 once read for a boost, 0 before. [atomic: relaxed] */
  _Atomic int boost_nice_floor;
};
enum { LANEPOOL__REFUSED_SCHED = 1u, LANEPOOL__REFUSED_IOPRIO = 2u };

/* A lane starts no task once this is true. [acquire: pairs with the CAS to CANCELLING] */
static inline bool lanepool__life_cancelling(const lanepool_t *pool) {
  return atomic_load_explicit(&((lanepool_t *)pool)->state, memory_order_acquire) ==
         LANEPOOL__LIFE_CANCELLING;
}
/* An inline sync may take a lane only while this is true. [seq_cst: see take_for_inline] */
static inline bool lanepool__life_open(const lanepool_t *pool) {
  return atomic_load_explicit(&((lanepool_t *)pool)->state, memory_order_seq_cst) ==
         LANEPOOL__LIFE_OPEN;
}

/* thread.c: futex waits (return on a wake, a signal or a changed word: callers loop), wakes. */
void lanepool__futex_wait(_Atomic uint32_t *word, uint32_t expected);
/* As lanepool__futex_wait, for at most `ns`; true if the time ran out. */
bool lanepool__futex_wait_for(_Atomic uint32_t *word, uint32_t expected, uint64_t ns);
void lanepool__futex_wake(_Atomic uint32_t *word, int count);
/* Threads waiting for a sync queued on `lane` and helping run its queue (sync.c,
 * help_until_answered): woken to look again. */
static inline void lanepool__wake_helpers(lanepool_lane_t *lane) {
  if (!atomic_load_explicit(&lane->helpers, memory_order_seq_cst)) return;
  atomic_fetch_add_explicit(&lane->help_seq, 1, memory_order_seq_cst);
  lanepool__futex_wake(&lane->help_seq, INT32_MAX);
}

/* What lower layers report to the pool's life (lifecycle.c gives it its meaning): a
 * lane went idle, a lent run ended, a timer fired or was cancelled. It matters only to
 * a drain's driver, which may be waiting for it. Here, not in lifecycle.c, so that lanes
 * and the timer thread call nothing above them. */
static inline void lanepool__drain_idle(lanepool_t *pool) {
  /* Pairs with the fence after the driver's change of state: if this load still sees
   * OPEN, the driver's scans see everything this thread did before the fence. */
  LANEPOOL_INJECT(LANEPOOL__AT_STATE);
  atomic_thread_fence(memory_order_seq_cst);
  if (atomic_load_explicit(&pool->state, memory_order_relaxed) != LANEPOOL__LIFE_DRAINING) return;
  LANEPOOL_INJECT(LANEPOOL__AT_COUNTER);
  atomic_fetch_add_explicit(&pool->drain_events, 1, memory_order_seq_cst);
  lanepool__futex_wake(&pool->drain_events, INT32_MAX);
}

/* A spinning thread parks when preempted (two polls this far apart: no CPU is idle). */
#define LANEPOOL__SPIN_PREEMPTED_NS 50000u

/* A band's rescue thread runs band work, or a lane's queue, that has waited this long
 * with no thread of the band taking any of it (worker.c, "The rescue thread"); it parks
 * with this timeout while its band has such work. Test builds may shorten it (inject.c:
 * Tests/c/sched_test.c runs stuck bands under the controlled scheduler). */
#ifdef LANEPOOL_TEST_INJECT
extern _Atomic uint64_t lanepool__rescue_ns;
#define LANEPOOL__RESCUE_NS atomic_load_explicit(&lanepool__rescue_ns, memory_order_relaxed)
#else
#define LANEPOOL__RESCUE_NS UINT64_C(100000000)
#endif

/* A band job that a lane's thread pushes into its own ring from a task is likely its
 * next (a reply, a continuation): while it is the ring's only job, other threads leave
 * it there this long before they take it (bandq.c; Go's runnext, stolen after ~3 us). */
#define LANEPOOL__NEXT_GRACE_NS 3000u
#define LANEPOOL__WATCH_NS      50000u /* how often the thread watching them looks (park.c) */

/* Fairness between the two kinds of work (worker.c, lane_loop): a thread running its
 * lane's queue looks once per this many tasks for work that waits for any thread of the
 * band (a band job, a lane whose thread is away), and takes it before going on (Go's
 * scheduler looks at its global run queue every 61 ticks for the same reason). */
#define LANEPOOL__FAIR_EVERY 61u

/* trace.c: an event trace, compiled in only with LANEPOOL_TRACE defined. */
enum {
  LANEPOOL__TRACE_PUSH,
  LANEPOOL__TRACE_RUN,
  LANEPOOL__TRACE_END,
  LANEPOOL__TRACE_PARK,
  LANEPOOL__TRACE_UNPARK,
  LANEPOOL__TRACE_WAKE,
  LANEPOOL__TRACE_BOOST /* source: the band the lane's thread now runs at */
};
enum { LANEPOOL__FROM_OWN, LANEPOOL__FROM_BAND, LANEPOOL__FROM_ADOPTED, LANEPOOL__FROM_RESCUE };
#ifdef LANEPOOL_TRACE
void lanepool__trace(unsigned kind, const lanepool_lane_t *lane, unsigned source, void *fn,
                     void *ctx);
#define LANEPOOL__TRACE(kind, lane, source, fn, ctx)                                               \
  lanepool__trace(LANEPOOL__TRACE_##kind, lane, source, (void *)(uintptr_t)(fn), ctx)
#else
#define LANEPOOL__TRACE(kind, lane, source, fn, ctx) ((void)(source))
#endif

/* Thread-local identity, for the own-thread checks. */
extern __thread lanepool_lane_t *lanepool__current; /* the lane this thread runs */
/* The lane of the pool thread calling (its own: whose started/executed, spin state and
 * sleeping word are this thread's), NULL for any other thread. */
extern __thread lanepool_lane_t *lanepool__thread_lane;
extern __thread lanepool_t *lanepool__pool_thread; /* pool of any library thread */
extern __thread lanepool_t *lanepool__in_callback; /* pool whose discard runs here */
/* band.c: the band this thread counts as for escalation, as index + 1 (0: none known) */
extern __thread int lanepool__thread_band;

/* Every lane of the pool: the band lanes, then one rescue lane per band. */
static inline uint32_t lanepool__lane_total(const lanepool_t *pool) {
  return (pool->lanes_per_band + 1) * LANEPOOL_BAND_COUNT;
}
static inline lanepool_lane_t *lanepool__rescue_lane(const lanepool_t *pool, uint32_t band) {
  return pool->lanes[LANEPOOL_BAND_COUNT * pool->lanes_per_band + band];
}
/* Lane i of the band, 0...lanes_per_band; index lanes_per_band is its rescue lane. */
static inline lanepool_lane_t *lanepool__band_lane(const lanepool_t *pool, uint32_t band,
                                                   uint32_t i) {
  return i < pool->lanes_per_band ? pool->lanes[band * pool->lanes_per_band + i]
                                  : lanepool__rescue_lane(pool, band);
}

/* true if the calling thread is a lane of `pool` (it may submit while `pool` drains). */
static inline bool lanepool__is_own_lane(const lanepool_t *pool) {
  return lanepool__current && lanepool__current->pool == pool;
}

/* thread.c */
int lanepool__thread_start(pthread_t *out, size_t stack_size, void *(*fn)(void *), void *arg);
void lanepool__thread_name(const char *pool_name, const char *suffix, char out[16]);

/* lifecycle.c */
extern pthread_mutex_t lanepool__registry_lock; /* held across fork() by pool.c */
void lanepool__registry_add(lanepool_t *pool);
size_t lanepool__close_and_join(lanepool_t *pool, uint32_t started_lanes,
                                lanepool__timer_entry **timers);
void lanepool__pool_free(lanepool_t *pool);

/* band.c: escalation. A waiter of band `band` (sync.c, waiter_band) above the
 * lane's counts itself with lanepool__boost_join before its work is queued, calls
 * lanepool__boost_update once it is, and leaves with lanepool__boost_leave (exactly once
 * per join: whoever swaps `*ticket`, band + 1, to 0). */
bool lanepool__boost_join(lanepool_lane_t *lane, int band, _Atomic uint32_t *ticket);
/* false with LANEPOOL_ESCALATION=0 in the environment (read once). */
bool lanepool__escalation_on(void);
void lanepool__boost_update(lanepool_lane_t *lane);
/* pool->lift_ok: escalation on, the band's lanes got its policy and nice, and the
 * process may lower a nice that far (read once, after the lanes started). */
uint32_t lanepool__lift_bands(const lanepool_t *pool);
/* The holder of `lane`'s exclusion, thread `self`, has given it up with a carrier
 * recorded (lane->carried nonzero) or settings owed: if the record is its own, it takes
 * back what it had, at once for a thread of the pool, else once `holds_more` is false
 * (no lane held any more). */
void lanepool__carrier_give(lanepool_lane_t *lane, uint32_t self, bool holds_more);
extern __thread lanepool__carrier lanepool__carrier_owed; /* band.c; `band` nonzero: owed */
void lanepool__boost_leave(lanepool_lane_t *lane, _Atomic uint32_t *ticket);
/* Drops one waiter of `band` (a ticket already swapped to 0) and updates. */
void lanepool__boost_drop(lanepool_lane_t *lane, uint32_t band);
/* A lane's (new) thread has applied its own band: re-apply a boost its waiters hold. */
void lanepool__boost_thread_started(lanepool_lane_t *lane);
/* A lane's thread is about to end (its loop returned, or a task ended it, before its
 * successor starts): its tid goes back to 0, so no boost reaches it any more. */
void lanepool__lane_thread_leaving(lanepool_lane_t *lane);
#ifdef LANEPOOL_TEST_HOOKS
/* Tests only: when set, called at named points: "boost_apply" (under boost_lock, before
 * the system calls for thread `arg`), "boost_end" (lanepool_lane_boost_end, registered),
 * "apply_policy" (a lane's thread before its band, `arg` its tid), "calls_wait" (destroy
 * waiting for a call under way), "sched_syscall" (each scheduling system call of policy.c,
 * getrlimit included), "sync_refused" (a queued sync's push refused, `arg` its error). */
typedef void (*lanepool__test_point_fn)(const char *point, lanepool_lane_t *lane, long arg);
extern _Atomic(lanepool__test_point_fn) lanepool__test_point;
#define LANEPOOL__TEST_POINT(name, lane, arg)                                                      \
  do {                                                                                             \
    lanepool__test_point_fn f_ = atomic_load(&lanepool__test_point);                               \
    if (f_) f_(name, lane, (long)(arg));                                                           \
  } while (0)
#else
#define LANEPOOL__TEST_POINT(name, lane, arg) ((void)0)
#endif

/* policy.c */
extern const lanepool_band_policy_t lanepool__default_policy[LANEPOOL_BAND_COUNT];
int lanepool__validate_policy(const lanepool_band_policy_t *p, int band, int allow_realtime,
                              const char **field);
void lanepool__apply_policy(lanepool__applied *a, pid_t tid, const lanepool_band_policy_t *p);
int lanepool__get_ioprio(pid_t tid);
/* The ioprio_set(2) value of a class and level (the idle class has level 0). */
int lanepool__ioprio_value(int ioprio_class, int level);
/* The nice rule (the kernel's is_nice_reduction), one copy for lanes and band.c: the
 * lowest nice a thread without CAP_SYS_NICE may set, 20 - RLIMIT_NICE (-20 for
 * RLIM_INFINITY; 20 when the rlimit is 0 or unreadable: it may only raise its nice)... */
int lanepool__nice_floor(void);
/* ...and the lowest it may go from `current`: that floor if below, else `current`. */
int lanepool__lowest_permitted_nice(int current);
/* ...and after a refused lowering from `start` to `want`: as low as that, never below
 * `want` (lanes and entered threads alike). */
void lanepool__nice_as_permitted(pid_t tid, int want, int start);
bool lanepool__has_cap_sys_nice(void); /* in the calling thread's effective set */
/* LANEPOOL_NICE_SHIFT's amount for a table, for a pool the calling thread creates (its
 * lanes start at its nice): how far the table's lowest nice is below the lowest this
 * thread may set; 0 with CAP_SYS_NICE or when it may. */
int lanepool__nice_shift(const lanepool_band_policy_t policy[LANEPOOL_BAND_COUNT]);
/* Thin wrappers over the scheduling system calls for thread `tid` (policy.c, also used
 * by band.c): 0 or an errno value; lanepool__get_nice leaves errno 0 unless it failed. */
int lanepool__set_sched(pid_t tid, int policy, int rt_priority);
int lanepool__set_nice(pid_t tid, int nice);
int lanepool__get_nice(pid_t tid);
int lanepool__set_ioprio(pid_t tid, int value);
int lanepool__get_attr(pid_t tid, lanepool__sched_attr *attr);
int lanepool__set_attr(pid_t tid, lanepool__sched_attr *attr); /* sets attr->size */
int lanepool__set_slice(pid_t tid, uint64_t slice_ns);         /* keeps the policy and nice */
int lanepool__set_slack(uint64_t ns); /* the calling thread's timer slack (prctl) */
uint64_t lanepool__get_slack(void);
const char *lanepool__sched_name(int64_t policy); /* "SCHED_BATCH", ... */
int lanepool__describe_refusals(lanepool_t *pool, char *buf, size_t len);

/* calls.c: the calls under way, per thread (see calls.c). A public entry point calls
 * lanepool__call_enter(pool or lane) first and lanepool__call_leave(what it returned)
 * last; lanepool_destroy waits until no thread is inside a call on the pool. */
typedef struct lanepool__caller {
  /* the pool or lane of the call under way, or NULL. Its own cache line: written by
   * its thread on every call. */
  alignas(LANEPOOL__CACHE_LINE) _Atomic(const void *) inside;
  _Atomic int taken;             /* 1 while a live thread owns this record */
  struct lanepool__caller *next; /* [once, before the record is published] */
} lanepool__caller;
extern __thread lanepool__caller *lanepool__self;
extern bool lanepool__calls_cheap; /* destroy can use membarrier(2) (calls.c) */
#ifdef LANEPOOL_TEST_HOOKS
/* Tests only: membarrier commands (MEMBARRIER_CMD_* bits) calls.c is to see refused
 * with EPERM, as under a seccomp filter; set before the first call into the library. */
extern unsigned lanepool__test_membarrier_refused;
#endif
extern _Atomic uint32_t lanepool__calls_anonymous;
lanepool__caller *lanepool__caller_register(void);
void lanepool__calls_wait(const lanepool_t *pool);
/* true if this thread is inside a call on `pool` (or one of its lanes): a callback run
 * by that call (a log line) that destroys the pool would free it under the call. */
bool lanepool__calls_inside(const lanepool_t *pool);
/* sync.c: true if a lane of `pool` waits, through a chain of syncs, for the closure this
 * thread runs: shutting `pool` down from here would wait for itself. */
bool lanepool__chain_holds_pool(const lanepool_t *pool);
#define LANEPOOL__ANONYMOUS ((const void *)1) /* a call by a thread without a record */

static inline const void *lanepool__call_enter(const void *what) {
  lanepool__caller *c = lanepool__self;
  if (__builtin_expect(c == NULL, 0) && !(c = lanepool__caller_register())) {
    atomic_fetch_add_explicit(&lanepool__calls_anonymous, 1, memory_order_seq_cst);
    atomic_thread_fence(memory_order_seq_cst); /* as an entry without membarrier (rare) */
    return LANEPOOL__ANONYMOUS;
  }
  const void *prev = atomic_load_explicit(&c->inside, memory_order_relaxed);
  atomic_store_explicit(&c->inside, what, memory_order_relaxed);
  /* Decided once per process (calls.c): with membarrier, destroy's membarrier does the
   * rest; without, a full fence here pairs with destroy's. */
  if (__builtin_expect(lanepool__calls_cheap, 1))
    atomic_signal_fence(memory_order_seq_cst);
  else
    atomic_thread_fence(memory_order_seq_cst);
  return prev;
}

static inline void lanepool__call_leave(const void *prev) {
  if (__builtin_expect(prev == LANEPOOL__ANONYMOUS, 0)) {
    atomic_fetch_sub_explicit(&lanepool__calls_anonymous, 1, memory_order_release);
    return;
  }
  /* release: every access of the call happens before a destroy that reads this */
  atomic_store_explicit(&lanepool__self->inside, prev, memory_order_release);
}

/* thread.c: fork */
extern _Atomic uint64_t lanepool__fork_generation;
_Noreturn void lanepool__die(const char *msg, bool child);
static inline bool lanepool__forked(uint64_t generation) {
  return __builtin_expect(
      atomic_load_explicit(&lanepool__fork_generation, memory_order_relaxed) != generation, 0);
}

/* timer.c */
int lanepool__timers_start(lanepool_t *pool);
int lanepool__timers_init(lanepool__timers *t);
void lanepool__timers_destroy(lanepool__timers *t);
void lanepool__timers_set_intake(lanepool_t *pool, int intake);
void lanepool__timers_stop(lanepool_t *pool, lanepool__timer_entry **cancelled, size_t *count);
void lanepool__timers_join(lanepool_t *pool);

/* placement.c */
/* The calling thread's allowed CPUs, ascending, however many the kernel's mask holds
 * (CPU sets are CPU_ALLOC'ed, never cpu_set_t's fixed 1024 bits): a malloc'd array in
 * *out (caller frees) and its length. 0, ENOMEM, or sched_getaffinity's errno. */
int lanepool__affinity_cpus(int **out, uint32_t *count);
/* A CPU_ALLOC'ed cpu_set_t (caller CPU_FREEs) of the given CPUs (negative ones
 * skipped), its size in *size; NULL when no CPU is given or on ENOMEM. (void *: this
 * header does not need _GNU_SOURCE.) */
void *lanepool__cpu_set_of(const int *cpus, uint32_t n, size_t *size);
bool lanepool__contains(const int *cpus, uint32_t n, int cpu);
#ifdef LANEPOOL_TEST_HOOKS
/* Tests only: when set, lanepool__affinity_cpus answers this list (a fake machine), and
 * lanepool_cpu_quota reads the cgroup files under these paths (quota.c). */
extern const int *lanepool__test_allowed;
extern uint32_t lanepool__test_allowed_count;
extern const char *lanepool__test_cgroup_root, *lanepool__test_proc_cgroup;
#endif
void lanepool__topology_free(lanepool__topology *t);
const lanepool__topo_node *lanepool__topology_node(const lanepool__topology *t, int node);
/* For NUMA placement, reads `given` (NULL: the machine's) into *topo first. */
int lanepool__plan(lanepool_placement_t placement, uint32_t lanes, const int *cpus,
                   uint32_t cpu_count, const lanepool_topology_t *given, lanepool__topology *topo,
                   const int *allowed, uint32_t allowed_count, lanepool_lane_placement_t *out);
int lanepool__apply_placement(lanepool_lane_t *lane);
void *lanepool__alloc_on_node(size_t bytes, int node, bool *numa_owned);
void lanepool__free_on_node(void *p, size_t bytes, bool numa_owned);
int lanepool__node_of_cpu(int cpu);
/* quota.c: the CPU quota from a cgroup mount point (normally "/sys/fs/cgroup") and a
 * /proc/self/cgroup file; 0 with *cpus_out (ceil, >= 1), ENOENT (none), EINVAL. */
int lanepool__cpu_quota(const char *sys_root, const char *proc_cgroup_path, uint32_t *cpus_out);

/* bands.c */
extern const char *const lanepool__band_short_names[LANEPOOL_BAND_COUNT];
extern const lanepool_qos_t lanepool__qos_of_band[LANEPOOL_BAND_COUNT];
int lanepool__size_accepted(uint32_t struct_size, size_t current); /* 1: accepted (see there) */

#include "scheduler.h"

#endif /* LANEPOOL_INTERNAL_H */
