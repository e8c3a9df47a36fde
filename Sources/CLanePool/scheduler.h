/*
 * scheduler.h - the scheduler's files and what they offer each other, bottom up: overflow
 * lists (spill.c), a band's queue (bandq.c), a lane's queue (lane.c), submitting and
 * waking, spinning and parking (park.c), a lane's exclusion and running its queue
 * (sync.c), a lane's thread (worker.c). docs/architecture.md, "The scheduler", draws
 * them. Included at the end of internal.h, whose structs they use.
 */
#ifndef LANEPOOL_SCHEDULER_H
#define LANEPOOL_SCHEDULER_H

/* spill.c: overflow lists */
void lanepool__spill_destroy(lanepool__spill *l);
/* Appends {fn, ctxs[i], args[i]} (args NULL: every arg NULL), in order, all or nothing:
 * 0, ENOMEM, ESHUTDOWN. */
int lanepool__spill_push_n(lanepool__spill *l, lanepool_fn fn, void *const *ctxs, void *const *args,
                           uint64_t n, bool own);
/* The oldest task, and 1/`shares` of the rest (at most half a ring) moved with it into
 * ring `into` (NULL: none), in order, while it has room. `fifo` (a lane's list): only
 * while `into` is empty, *ring_first set when it is not (its claims are older). */
bool lanepool__spill_take(lanepool__spill *l, lanepool__ring *into, uint32_t shares, bool fifo,
                          lanepool__task *out, bool *ring_first);
/* A queue's intake (OWN_ONLY or CLOSED, never back): its list's, then its `n` rings' (a
 * thread that sees its ring CLOSED knows nothing can be added to the list either). */
void lanepool__queue_set_intake(lanepool__spill *l, lanepool__ring *rings, uint32_t n, int intake);
static inline uint64_t lanepool__spill_count(const lanepool__spill *l, memory_order order) {
  return atomic_load_explicit(&((lanepool__spill *)l)->count, order);
}

/* bandq.c: a band's queue of band work: `shards` rings of `capacity` cells, and a list */
int lanepool__bandq_init(lanepool__band *band, uint32_t shards, uint32_t capacity);
void lanepool__bandq_free(lanepool__band *band);
/* Into shard `shard` (any number: taken modulo), else another ring, else the list (when
 * every ring is full); *next: the pusher is shard's lane's thread, in a task (cleared if
 * the job went elsewhere). 0, EAGAIN (hard capacity, that ring full), ESHUTDOWN, ENOMEM. */
int lanepool__bandq_push(lanepool__band *band, uint32_t shard, lanepool_fn fn, void *ctx, void *arg,
                         bool own, bool hard, bool *next);
/* A job, from shard `first` (modulo) on, then the list (a batch of it moved into ring
 * `first`); `list_first`: the list before the rings (so that it empties while
 * producers keep the rings full). */
bool lanepool__bandq_take(lanepool__band *band, uint32_t first, bool list_first,
                          lanepool__task *out);
/* Band work queued (seq_cst loads: a side of the wake-up pairs). */
bool lanepool__bandq_nonempty(const lanepool__band *band);
/* Band work a thread of lane `first` may take now: as nonempty, less another lane's
 * next job still left to its thread (the spin's look). */
bool lanepool__bandq_takeable(lanepool__band *band, uint32_t first);
uint64_t lanepool__bandq_depth(const lanepool__band *band);
uint64_t lanepool__bandq_accepted(lanepool__band *band);

/* lane.c: a lane and its queue of lane-bound work */
/* index lanes_per_band makes the band's rescue lane (worker.c, "The rescue thread"). */
lanepool_lane_t *lanepool__lane_new(lanepool_t *pool, uint32_t band, uint32_t index,
                                    const lanepool_config_t *cfg, lanepool_lane_placement_t where,
                                    int *rc);
void lanepool__lane_free(lanepool_lane_t *lane);
/* The lane's next task, for the holder of its exclusion; *pending set when a producer
 * has claimed a cell it has not published yet. */
bool lanepool__lane_pop(lanepool_lane_t *lane, lanepool__task *out, bool *pending);
/* Lane-bound work queued (seq_cst: a side of the wake-up pairs). */
bool lanepool__lane_has_work(const lanepool_lane_t *lane);
uint64_t lanepool__lane_depth(const lanepool_lane_t *lane);
uint64_t lanepool__lane_accepted(lanepool_lane_t *lane);
uint64_t lanepool__lane_finished(lanepool_lane_t *lane);
/* After the threads that take from it were joined: every task of a queue (a ring, then a
 * list; l may be NULL), FIFO, to `discard` (a queued sync is answered ECANCELED instead).
 * A cell claimed but not yet published is waited for (its producer got 0). */
void lanepool__discard_queue(lanepool__ring *r, lanepool__spill *l, lanepool_discard_fn discard,
                             void *discard_arg);
/* Cancel: answers every sync queued on the lane ECANCELED (its cell then skipped). */
void lanepool__lane_cancel_syncs(lanepool_lane_t *lane);
typedef struct lanepool__held { /* a node of lanepool__held_now's chain (below) */
  const lanepool_lane_t *lane;
  const struct lanepool__held *up;
} lanepool__held;
/* The lanes whose exclusion this thread holds now, innermost first, each node in the
 * frame of the code that holds it (worker.c's drain, an inline sync, a queued sync's
 * closure, which holds its caller's chain too). [this thread] (Why a cleanup handler
 * reads lanepool__running_lane instead: below.) */
extern __thread const lanepool__held *lanepool__held_now;
/* A queued sync's waiter, listed on a lane of its chain (band.c, "the chain"). */
typedef struct lanepool__chain_link {
  struct lanepool__sync *sync;
  lanepool_lane_t *lane;
  struct lanepool__chain_link *next; /* [that lane's boost_lock] */
} lanepool__chain_link;
#define LANEPOOL__CHAIN_LINKS 8 /* the innermost lanes of a chain a waiter is listed on */
/* A sync's state while its waiter is asked to walk the chain again (band.c). */
#define LANEPOOL__SYNC_REWALK 3u
/* A queued sync (sync.c): its record lives in the caller's frame while it waits. */
typedef struct lanepool__sync {
  lanepool_fn fn;
  void *ctx;
  _Atomic uint32_t state;      /* 0 pending, 1 ran, 2 discarded, LANEPOOL__SYNC_REWALK */
  const lanepool__held *chain; /* the caller's held chain (in its frame while it waits) */
  lanepool__held node;         /* this lane over that chain, while the closure runs */
  const lanepool__held *above; /* the running thread's own chain, restored after */
  /* Escalation: the waiter's band + 1 while it boosts `lane` (0: no boost). */
  _Atomic uint32_t boost;
  lanepool_lane_t *lane;
  uint32_t links_used;
  lanepool__chain_link links[LANEPOOL__CHAIN_LINKS];
} lanepool__sync;
/* band.c: a waiter listed on the lanes it holds, told when their band changes. */
void lanepool__chain_listen(lanepool__sync *s);
void lanepool__chain_unlisten(lanepool__sync *s);
void lanepool__sync_trampoline(void *arg);
/* The lane's queued cell of sync `s` runs nothing (its waiter's thread ended; caller holds it). */
void lanepool__lane_forget_sync(lanepool_lane_t *lane, const lanepool__sync *s);
uint64_t lanepool__now_ns(void);
uint64_t lanepool__add_sat(uint64_t a, uint64_t b);

/* sync.c: a lane's exclusion, and the sync calls */
/* Takes the lane's exclusion if it is free (seq_cst CAS). */
bool lanepool__excl_try(lanepool_lane_t *lane);
/* As lanepool__excl_try, for a thread that is not the lane's own: when the lane is
 * boosted, that thread is raised to its band too (band.c, the carrier). */
bool lanepool__excl_take(lanepool_lane_t *lane);
/* Gives it up; if work is queued then, makes sure a thread comes for it. On a cancel,
 * answers the lane's queued syncs first. */
void lanepool__excl_release(lanepool_lane_t *lane);
/* The lane whose queue this thread runs now (its exclusion held), or NULL: what a
 * thread a task ends counts and gives back (worker.c, thread_lost; a sync's waiter that
 * ran another lane's queue inside it gives that one back first, sync.c, sync_unwound).
 * Not held_now's innermost lane: that node lives in run_lane's frame, which a thread's
 * end has unwound before these cleanup handlers run (ASan: stack-use-after-return). */
extern __thread lanepool_lane_t *lanepool__running_lane;
/* This thread runs a band job now (a lane task may run nested in it: sync.c). */
extern __thread bool lanepool__band_job_running;
/* Runs one task on the thread of lane `me` and counts it: the thread's started and
 * executed, and `lane`'s bound_done (a lane-bound task) or `me`'s band_done (lane NULL). */
void lanepool__run_counted(lanepool_lane_t *me, lanepool_lane_t *lane, const lanepool__task *task,
                           unsigned source);
/* Runs `lane`'s queue, whose exclusion the caller (the thread of lane `me`) holds, in
 * order, then gives the lane up (lanepool__excl_release: a queue left with work is
 * announced): once it is empty, once *stop is set (stop non-NULL: a sync waiter's own
 * sync ran), or, every LANEPOOL__FAIR_EVERY tasks, when `most` ran or other work waits
 * for the band (lanepool__band_waits). keep_if_empty non-NULL: when it stops because
 * the queue is empty it keeps the lane and sets *keep_if_empty (the lane's own thread,
 * which spins holding it). The number of tasks run. */
uint32_t lanepool__run_lane(lanepool_lane_t *me, lanepool_lane_t *lane, uint32_t most,
                            unsigned source, _Atomic uint32_t *stop, bool *keep_if_empty);

/* park.c: parking, waking, and submitting work with the wake it needs */
/* true if this call woke the thread of `lane` (it was PARKED). */
bool lanepool__wake_thread(lanepool_lane_t *lane, bool note);
/* Work the band's threads must see was announced: wake an idle thread of the band if
 * none spins (`next`, a job left to its pusher: nor watches), and the band's rescue
 * thread if it parks untimed. */
void lanepool__band_wake(lanepool_t *pool, uint32_t band, bool next);
/* A lane free with work queued: its thread if parked (`note`: tell it who woke it); if
 * its thread is away, the band and the band's threads waiting for a sync there. */
void lanepool__lane_kick(lanepool_lane_t *lane, bool note);
/* flags: LANEPOOL__PUSH_OWN (the caller may submit while the pool drains),
 * LANEPOOL__PUSH_WAITS. arg NULL: fn(ctx); otherwise a two-argument task. 0, EAGAIN,
 * ESHUTDOWN, ENOMEM, EOWNERDEAD. */
int lanepool__lane_push(lanepool_lane_t *lane, lanepool_fn fn, void *ctx, void *arg,
                        unsigned flags);
/* A batch, in order (args NULL: every arg NULL): *accepted of them (a prefix). */
int lanepool__lane_push_n(lanepool_lane_t *lane, lanepool_fn fn, void *const *ctxs,
                          void *const *args, uint64_t n, uint64_t *accepted);
int lanepool__band_push(lanepool_t *pool, uint32_t band, lanepool_fn fn, void *ctx, void *arg,
                        unsigned flags);
/* Spins up to the thread's budget for work (`holding`: it holds its own lane); true if
 * some showed up, then *since: a time at most one round of polls before (no clock read). */
bool lanepool__spin_for_work(lanepool_lane_t *lane, bool holding, uint64_t *since);
/* The pool's lanes running tasks (awake, neither spinning nor parked) are at least the
 * CPUs it may use (none known: never): a thread then parks rather than spin. */
bool lanepool__cpus_taken(const lanepool_t *pool);
void lanepool__park(lanepool_lane_t *lane);
void lanepool__park_rescue(lanepool_lane_t *lane);
/* Work waits for any thread of the band but `me`'s own lane: band jobs it may take now,
 * or a lane (the rescue lane too) whose thread is away with work queued (seq_cst loads). */
bool lanepool__band_waits(lanepool_lane_t *me);
/* A higher band than `me`'s that its tasks pushed work to (lift_hint), with a job waiting
 * and none of its threads spinning (the push woke a parked one), that `me` may run
 * raised (pool->lift_ok): that band; else -1, and the hint cleared. */
int lanepool__lift_waits(lanepool_lane_t *me);

/* worker.c: a lane's thread */
int lanepool__lane_start(lanepool_lane_t *lane);
void lanepool__lane_join(lanepool_lane_t *lane);

#endif /* LANEPOOL_SCHEDULER_H */
