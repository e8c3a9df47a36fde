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

struct lanepool_lane {
  /* ---- [once] ---- */
  lanepool_t *pool;
  lanepool__slot *slots;
  uint64_t mask;      /* capacity - 1 */
  uint32_t band;      /* 0...4 */
  uint32_t index;     /* within the band */
  uint32_t spin_ns;
  int hard_capacity;
  char name[16];
  pthread_t thread;
  _Atomic(void *) userdata; /* [atomic: release/acquire] for the embedding layer */

  /* ---- producers ---- */
  /* [atomic: seq_cst CAS by producers; the CAS is what the parking protocol
   *  orders against `sleeping`; seq_cst fetch_or(CLOSED) by shutdown] */
  alignas(LANEPOOL__CACHE_LINE) _Atomic uint64_t tail;

  /* ---- consumer (the lane thread) ---- */
  alignas(LANEPOOL__CACHE_LINE) uint64_t head; /* [cons] private */
  _Atomic uint64_t head_pub;  /* [cons, atomic: relaxed] copy of head, for depth */
  _Atomic uint64_t executed;  /* [cons, atomic: relaxed] */
  _Atomic uint64_t busy_ns;   /* [cons, atomic: relaxed] */
  _Atomic int tid;            /* [cons, atomic: release at start, acquire in create] */
  _Atomic int running;        /* [cons, atomic: relaxed] */

  /* ---- parking ---- */
  /* 1 while the lane is (about to be) parked on the futex. [atomic: seq_cst store
   * by the lane before its last emptiness check; seq_cst load + exchange by
   * producers after their seq_cst CAS / fetch_add] */
  alignas(LANEPOOL__CACHE_LINE) _Atomic uint32_t sleeping;

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
  lanepool_lane_t **lanes; /* [band * lanes_per_band + i] */

  /* [atomic: relaxed] read by each lane between tasks; set before CLOSED */
  alignas(LANEPOOL__CACHE_LINE) _Atomic int cancel;
  _Atomic int state; /* [atomic: acq_rel; transitions under `lifecycle`] */

  pthread_mutex_t lifecycle; /* serialises shutdown and destroy */

  /* round-robin counters, one cache line each. [atomic: relaxed] */
  lanepool__counter rr[LANEPOOL_BAND_COUNT];

  /* start-up handshake: lanes count up, the creator waits. [atomic: release/acquire] */
  alignas(LANEPOOL__CACHE_LINE) _Atomic uint32_t started;
};

/* lane.c */
int lanepool__lane_init(lanepool_lane_t *lane, lanepool_t *pool, uint32_t band,
                        uint32_t index, const lanepool_config_t *cfg);
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

extern const char *const lanepool__band_short_names[LANEPOOL_BAND_COUNT];
extern const lanepool_qos_t lanepool__qos_of_band[LANEPOOL_BAND_COUNT];

#endif /* LANEPOOL_INTERNAL_H */
