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

#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#define LANEPOOL__CACHE_LINE 64
#define LANEPOOL__MAX_NODES 1024 /* libnuma's default MAX_NUMNODES is 1024 at most */

/* Bit 63 of a lane's tail: set once by shutdown; a producer whose CAS sees it
 * refuses the task, so after the bit is set the tail can never move again. */
#define LANEPOOL__CLOSED (UINT64_C(1) << 63)

/* A ring cell (Vyukov's bounded queue): seq == pos means free for the producer
 * that claims position pos; seq == pos + 1 means full for the consumer at pos. */
typedef struct lanepool__slot {
  _Atomic uint64_t seq; /* [atomic: release by the writer, acquire by the reader] */
  lanepool_fn fn;       /* [written by the side that owns the cell per seq] */
  void *ctx;
} lanepool__slot;

typedef struct lanepool__task {
  lanepool_fn fn;
  void *ctx;
} lanepool__task;

/* What a lane asked the kernel for and got: written by the lane thread before it
 * signals `started`, read-only after (the creator's acquire of `started` pairs). */
typedef struct lanepool__applied {
  lanepool_applied_t sched, nice, ioprio, timer_slack, slice;
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

typedef struct lanepool__timer_entry {
  uint64_t deadline;
  uint64_t seq; /* ties fire in the order they were set */
  lanepool_timer_t id;
  lanepool_lane_t *lane; /* NULL: any lane of `band` */
  int band;
  lanepool_fn fn;
  void *ctx;
} lanepool__timer_entry;

/* The pool's timer facility. Every field: [lock]. */
typedef struct lanepool__timers {
  pthread_mutex_t lock;
  pthread_cond_t cond; /* CLOCK_MONOTONIC */
  lanepool__timer_entry *heap;
  size_t len, cap;
  uint64_t next_id;
  bool started, closed, draining, stop;
  pthread_t thread;
} lanepool__timers;

struct lanepool_lane {
  /* ---- [once] ---- */
  lanepool_t *pool;
  lanepool__slot *slots;
  uint64_t mask;      /* capacity - 1 */
  uint32_t band;      /* 0...4 */
  uint32_t index;     /* within the band */
  uint32_t spin_ns;         /* the band's maximum spin budget */
  int fixed_spin;
  int hard_capacity;
  char name[16];
  pthread_t thread;
  _Atomic(void *) userdata; /* [atomic: release/acquire] for the embedding layer */
  uint64_t generation;      /* the fork generation the pool was created in */
  int cpu;                  /* pinned CPU or -1 */
  int node;                 /* NUMA node (NUMA placement) or -1 */
  bool lane_numa_owned;     /* this struct came from numa_alloc_onnode */
  bool slots_numa_owned;
  size_t lane_bytes, slots_bytes;
  lanepool_band_policy_t policy;
  lanepool__applied applied; /* [cons before `started`, read-only after] */

  /* ---- producers ---- */
  /* [atomic: seq_cst CAS by producers; the CAS is what the parking protocol
   *  orders against `sleeping`; seq_cst fetch_or(CLOSED) by shutdown] */
  alignas(LANEPOOL__CACHE_LINE) _Atomic uint64_t tail;

  /* ---- consumer (the lane thread) ---- */
  alignas(LANEPOOL__CACHE_LINE) uint64_t head; /* [cons] private */
  uint32_t spin_now;          /* [cons] private: the adaptive spin budget */
  _Atomic uint64_t head_pub;  /* [cons, atomic: relaxed] copy of head, for depth */
  _Atomic uint64_t executed;  /* [cons, atomic: relaxed] */
  _Atomic uint64_t started_tasks; /* [cons, atomic: relaxed] started != executed: mid-task */
  _Atomic uint64_t busy_ns;   /* [cons, atomic: relaxed] */
  _Atomic int tid;            /* [cons, atomic: release at start, acquire in create] */
  _Atomic int running;        /* [cons, atomic: relaxed] */

  /* ---- parking ---- */
  /* 1 while the lane is (about to be) parked on the futex. [atomic: seq_cst store
   * by the lane before its last emptiness check; seq_cst load + exchange by
   * producers after their seq_cst CAS / fetch_add] */
  alignas(LANEPOOL__CACHE_LINE) _Atomic uint32_t sleeping;

  /* ---- stall detector state: [the timer thread only], `stalled*` atomic for info ---- */
  uint64_t watch_started;      /* started_tasks at the last check */
  uint64_t watch_since;        /* when that task was first seen running */
  _Atomic uint64_t stalled_since; /* 0, or when the stalled task was first seen */
  _Atomic uint64_t stalls;

  /* ---- overflow list, used when the ring is full (not with hard capacity) ---- */
  alignas(LANEPOOL__CACHE_LINE) pthread_mutex_t spill_lock;
  _Atomic uint64_t spill_count; /* [spill_lock for writes; atomic seq_cst so the
                                   unlocked fast-path checks can read it] */
  lanepool__task *spill;        /* [spill_lock] circular buffer */
  uint64_t spill_cap;           /* [spill_lock] */
  uint64_t spill_head;          /* [spill_lock] */
  int spill_closed;             /* [spill_lock] set by shutdown */
  _Atomic uint64_t overflowed;  /* [atomic: relaxed] statistics */
};

enum {
  LANEPOOL__RUNNING = 0,
  LANEPOOL__STOPPING = 1,
  LANEPOOL__STOPPED = 2,
};

typedef struct lanepool__counter {
  alignas(LANEPOOL__CACHE_LINE) _Atomic uint32_t value;
} lanepool__counter;

struct lanepool {
  /* ---- [once] ---- */
  char name[LANEPOOL_MAX_NAME + 1];
  uint32_t lanes_per_band;
  uint32_t ring_capacity;
  int hard_capacity;
  int is_default;
  lanepool_placement_t placement;
  lanepool__topology topology; /* NUMA placement: nodes -> allowed CPUs */
  int allowed_cpus[64];        /* the creator's allowed CPUs (first 64), for the timer */
  uint64_t generation;         /* fork generation at creation */
  uint64_t stall_threshold_ns;
  lanepool_log_fn log;
  void *log_arg;
  uint32_t allowed_count;
  lanepool_lane_t **lanes; /* [band * lanes_per_band + i] */

  /* [atomic: relaxed] read by each lane between tasks; set before CLOSED */
  alignas(LANEPOOL__CACHE_LINE) _Atomic int cancel;
  _Atomic int state; /* [atomic: acq_rel; transitions under `lifecycle`] */

  pthread_mutex_t lifecycle; /* serialises shutdown and destroy */
  lanepool__timers timers;

  /* lanes spinning now, and the cap. [atomic: relaxed; a soft limit] */
  alignas(LANEPOOL__CACHE_LINE) _Atomic uint32_t spinners;
  uint32_t max_spinners; /* [once] */

  /* round-robin counters, one cache line each. [atomic: relaxed] */
  lanepool__counter rr[LANEPOOL_BAND_COUNT];

  /* start-up handshake: lanes count up, the creator waits. [atomic: release/acquire] */
  alignas(LANEPOOL__CACHE_LINE) _Atomic uint32_t started;
};

/* lane.c */
lanepool_lane_t *lanepool__lane_new(lanepool_t *pool, uint32_t band, uint32_t index,
                                    const lanepool_config_t *cfg,
                                    lanepool_lane_placement_t where, int *rc);
void lanepool__lane_free(lanepool_lane_t *lane);
void *lanepool__lane_main(void *arg);
void lanepool__lane_close(lanepool_lane_t *lane);
void lanepool__lane_discard_all(lanepool_lane_t *lane, lanepool_discard_fn discard,
                                void *discard_arg);
int lanepool__lane_push(lanepool_lane_t *lane, lanepool_fn fn, void *ctx);
uint64_t lanepool__lane_depth(const lanepool_lane_t *lane);
void lanepool__futex_wait(_Atomic uint32_t *word, uint32_t expected);
void lanepool__futex_wake(_Atomic uint32_t *word, int count);
uint64_t lanepool__now_ns(void);

/* policy.c */
void lanepool__default_policies(lanepool_band_policy_t out[LANEPOOL_BAND_COUNT]);
int lanepool__validate_policy(const lanepool_band_policy_t *p, int allow_realtime);
void lanepool__apply_policy(lanepool__applied *a, pid_t tid, const lanepool_band_policy_t *p);
int lanepool__get_ioprio(pid_t tid);
int lanepool__describe_refusals(lanepool_t *pool, char *buf, size_t len);

/* fork.c */
extern _Atomic uint64_t lanepool__fork_generation;
void lanepool__fork_init(void);
static inline bool lanepool__forked(uint64_t generation) {
  return __builtin_expect(
      atomic_load_explicit(&lanepool__fork_generation, memory_order_relaxed) != generation, 0);
}

/* timer.c */
int lanepool__timers_start(lanepool_t *pool);
int lanepool__timers_init(lanepool__timers *t);
void lanepool__timers_destroy(lanepool__timers *t);
int lanepool__timers_close(lanepool_t *pool, bool cancel, lanepool__timer_entry **cancelled,
                           size_t *count);

/* placement.c */
uint32_t lanepool__allowed_cpus(int *out, uint32_t max);
int lanepool__machine_topology(lanepool__topology *out);
int lanepool__topology_copy(const lanepool_topology_t *in, lanepool__topology *out);
void lanepool__topology_free(lanepool__topology *t);
const lanepool__topo_node *lanepool__topology_node(const lanepool__topology *t, int node);
int lanepool__plan(lanepool_placement_t placement, uint32_t lanes, const int *cpus,
                   uint32_t cpu_count, lanepool__topology *topo, const int *allowed,
                   uint32_t allowed_count, lanepool_lane_placement_t *out);
int lanepool__apply_placement(lanepool_lane_t *lane);
bool lanepool__numa_node_exists(int node);
void *lanepool__alloc_on_node(size_t bytes, int node, bool *numa_owned);
void lanepool__free_on_node(void *p, size_t bytes, bool numa_owned);
int lanepool__node_of_cpu(int cpu);

extern const char *const lanepool__band_short_names[LANEPOOL_BAND_COUNT];
extern const lanepool_qos_t lanepool__qos_of_band[LANEPOOL_BAND_COUNT];

#endif /* LANEPOOL_INTERNAL_H */
