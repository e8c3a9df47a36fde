/*
 * bandq.pml - the scheduler's wake-ups (Sources/CLanePool/park.c: the two wake-up pairs
 * of its header; worker.c: lane_loop and the rescue thread; sync.c: a lane's exclusion),
 * for spin. No lost wake-up, no stranded work: once every producer is done and nothing
 * in the system can move any more, nothing is left queued. Every atomic of the C code
 * is seq_cst, so Promela's interleavings are the executions to consider.
 *
 * One band of two lanes, 0 and 1. Each lane: its exclusion excl[] (0 free, else the
 * holder) and its queue of lane-bound work q[] (a count); its thread: sleeping[]
 * (AWAKE/PARKED) and away[]. The band: its queue bq (a count), idle and spinning, and
 * the jobs left to their pushers (bandq.c's `next`: a job a lane's thread pushed into
 * its own ring from a task, while it is the ring's only one) nq[], with old[] (a
 * watcher's look saw it: past its grace at the next look), watching (band->watching)
 * and pushes (lanepool__bandq_accepted). Its rescue thread: rescue_idle and its untimed
 * park. Processes, all concurrent:
 *   - lane_thread(me), lane_loop in order: (1) its own lane if free with work: excl CAS,
 *     come_back, run the queue until it is empty, or give the lane up with work queued
 *     while band work waits (the fair break, every LANEPOOL__FAIR_EVERY tasks: here at
 *     any time), then excl_release (store excl = 0, then if work is queued lane_kick:
 *     wake the lane's thread by CAS, else if it is away band_wake); after a fair break,
 *     the fair turn: one band job even with its own lane's work queued, announced by a
 *     band_wake; (2) one band job (run_band_job): go_away (store away = 1, then look at
 *     its own lane: free with work, run that first), take, if more wait band_wake
 *     (wakep), run it (in SCEN 5 it may push a job left to its thread: nq[me]++, then
 *     band_wake for it, pair 3); (3) adopt the sibling lane if it is orphaned (away, free, with
 *     work): go_away, excl CAS, run, release (on the fair turn too, when it found no
 *     band job; go_away's look then announces its lane as in (2)); (4) come_back, spin
 *     (spinning++, each yield uncounted: spinning--, spinning++; then spinning--, then
 *     one look:
 *     work_for), park (store PARKED, idle++, one look: work_for; else wait until
 *     AWAKE, or, while band work is queued, watch: CAS watching, timed parks, each
 *     followed by a look: work_for (then AWAKE), else stop watching if the queue is
 *     empty and no push came since the last look (watching = false, then the loop's
 *     look again); idle--). work_for: its own lane free with work; band work it may
 *     take (TAKEABLE: not the sibling's job left to it, unless old); the sibling
 *     orphaned.
 *   - rescue: park_rescue (rescue_idle = 1, then one look: band work or an orphaned
 *     lane; untimed if none, else timed), then rescue_look: the queue of a lane whose
 *     thread is away, else a band job.
 *   - band_producer: NB band jobs, each lanepool__band_push: push, then band_wake (if
 *     spinning == 0 && idle > 0, and for a job left to its pusher no watcher: wake one
 *     PARKED lane thread by CAS, trying each lane, from either end; if rescue_idle:
 *     wake the rescue thread).
 *   - lane_producer(l): NW tasks onto lane l (lane 0; SCEN 4 lane 1 too), each lane_push:
 *     push; if excl == 0: wake the lane's thread by CAS, and if that woke nobody and the
 *     thread is away: band_wake.
 *   - syncer (SCEN 3): a lanepool_lane_sync caller from outside the pool onto lane 0:
 *     take_for_inline takes the exclusion if it is free (then runs its closure, or finds
 *     work queued), finish_inline gives it up (excl_release): a holder that does not
 *     loop back to look at the lane, as a lane thread does.
 * A band job may never return (stuck: the thread stays AWAKE and away): why adoption and
 * the rescue thread exist.
 *
 * Scenarios (SCEN), each checked by a monitor that asserts at `timeout` (no statement of
 * any process executable: the producers done, every thread parked untimed or stuck; a
 * timed park always ends, so a rescue thread in one is never blocked) that nothing is
 * queued anywhere unless every thread that could take it is stuck:
 *   1 rescue: lane 0's thread and the rescue thread; lane 1's thread is stuck in a band
 *     job from the start. NB = 2, NW = 2: lane 0's thread may get stuck too, and the
 *     rescue thread alone must then take the rest (lane 0's queue, a band job).
 *   2 lanes: both lane threads, no rescue thread. NB = 2, NW = 2. A stricter check of the
 *     lane threads' own wake-ups, which the rescue thread's timed parks would otherwise
 *     cover (100 ms late): work may stay queued only if both lane threads are stuck.
 *   3 sync: as 1 with the syncer, NB = 1, NW = 1.
 *   4 adopt: lane 0's thread alone (lane 1's stuck, no rescue thread), NB = 1, and
 *     NW = 1 onto each lane: lane 1 is orphaned once its task is queued, and lane 0's
 *     thread must adopt it, after its own lane, or on the fair turn (the only scenario
 *     that reaches lane 0's thread adopting, and the fair turn's adoption).
 *   5 next: both lane threads, no rescue thread (as 2), NB = 1, NW = 1, and band jobs
 *     push NN = 2 jobs left to their pushers: a pusher that then blocks leaves its job
 *     to the other thread, woken by the push or watching (pair 3).
 * Every process blocked at that point must be at an end label (spin's invalid end states
 * catch a model that blocks anywhere else).
 *
 * Steps: each store, CAS and load of the pairs is its own step. Merged into one step: a
 * conjunction of loads that lets a thread go on only if all hold (excl == 0 && queued;
 * away && excl == 0 && queued; spinning == 0 && idle != 0; rescue_idle && PARKED): each
 * outcome `false` of the loads in turn is the outcome of the one step at the moment the
 * failing load read, and `false` is the outcome that lets a thread sleep or a pusher
 * wake nobody. wake_thread's load and CAS: one CAS. A holder runs its lane's queue in
 * one step (while a lane is held, no look reads its count: every look asks excl == 0).
 *
 * Left out: the pool's life (closing, draining, cancelling: cancel_pass, the cancel in
 * excl_release, lifecycle's wakes); claimed but unpublished ring cells (a push is one
 * step; run_lane's `pending` wait only delays); the overflow lists (a queue is a count);
 * lane-bound work for lane 1 but in SCEN 4, and for the rescue lane (never orphaned);
 * the helping sync waiter (sync.c, help_until_answered: helpers, help_seq, and
 * lane_kick's and sync_answer's wake of it): a thread stuck in a band job stays inert
 * here; spinner slots, budgets, `warm` and the spinner's looks before its last (a
 * thread spins or not, freely; a look that finds work ends the spin as the last look
 * would); the rescue thread's measure of progress, its first look and its calm
 * (rescue_calm_until): a timed park ends at once here and the thread acts whenever it
 * is scheduled, since a slower rescue thread is an interleaving the model already has;
 * the waker's note and yield_to_waker; the next job's grace clock, which in C any look
 * starts and time ends (here only a watcher's look marks a job old, and nothing else
 * ends a grace: fewer takes, never more); jobs left to their pushers where a rescue
 * thread runs (SCEN 1, 3, 4: NN = 0). Lane tasks return, unless LANE_BLOCKS is defined.
 *
 * BROKEN selects a wrong variant, to see the checker catch it:
 *   1: a lane push does not look at `away` (no band_wake for a lane whose thread is away)
 *   2: park does not look at the work once more after PARKED and idle++
 *   3: a spinner does not look once more after spinning--. NOT a defect, and not caught:
 *      a spinner that found nothing parks, and park_begin's look (after PARKED, idle++)
 *      is the same work_for after the same spinning--; check-bandq --all requires it to pass
 *   4: excl_release does not look at the lane's queue after storing excl = 0
 *   5: go_away does not look at its own lane after storing away = 1
 *   6: the fair turn does not announce its lane (no band_wake when go_away finds it
 *      free with work). Caught before variant 7's wake existed; NOT a defect with it
 *      (the push's own wake and the wake as a thread starts its lane cover the fair
 *      turn): check-bandq --all requires it to pass
 *   7: a thread about to run its own lane's queue does not wake another for band work
 *      queued (the wake it was counted on)
 *   8: a push of a job left to its pusher wakes no lane thread (watcher or not)
 *   9: a watcher's look after a timed park takes nothing (the assertion in the watch
 *      loop: a watcher that saw no push since its last look, with work queued)
 *  10: a watcher that stops watching parks untimed with no look after watching = false
 *  11: a watcher woken for other work leaves without waking another for work queued.
 *      NOT caught with two lane threads (the one left is the blocked pusher); shown in C
 *      by steal_test's watcher_hands_the_watch_on (three lanes)
 *
 * LANE_BLOCKS: a task of lane 0 may block forever, holding the lane (its queue then
 * waits by design: exempt). A band push counts on a thread (one it woke, or a spinner it
 * saw); if that thread takes its own lane's work first and the task blocks, the band job
 * must not wait for the rescue thread's timeout: the thread wakes another as it starts
 * its lane (variant 7 leaves that out, and SCEN 2, with no rescue thread, catches it).
 */
#ifndef BROKEN
#define BROKEN 0
#endif
#ifndef SCEN
#define SCEN 1
#endif

#define AWAKE  0
#define PARKED 1
#define NL 2          /* lanes (and lane threads) of the band */
#define R  2          /* the rescue thread's index in sleeping[] */
#define RESCUE_ID 3   /* excl holders: lane thread i is i + 1 */
#define SYNC_ID   4

#if SCEN == 1
#define NB 2          /* band jobs pushed */
#define NW 2          /* lane-bound tasks pushed onto lane 0 */
#define NPROD 2       /* processes that count themselves done */
#define THREADS 3     /* threads that may take work (lane threads, rescue thread) */
#elif SCEN == 2
#define NB 2
#define NW 2
#define NPROD 2
#define THREADS 2
#elif SCEN == 3
#define NB 1
#define NW 1
#define NPROD 3
#define THREADS 3
#elif SCEN == 4
#define NB 1
#define NW 1          /* onto each lane */
#define NPROD 3
#define THREADS 2     /* lane 0's, and lane 1's (stuck) */
#else
#define NB 1
#define NW 1
#define NPROD 2
#define THREADS 2
#define NN 2          /* jobs left to their pushers, pushed by band jobs */
#endif
#ifndef NN
#define NN 0
#endif

byte sleeping[NL + 1];    /* lane->sleeping */
bool away[NL];            /* lane->away */
byte excl[NL];            /* lane->excl */
byte q[NL];               /* the lane's queue: tasks queued */
byte bq = 0;              /* the band's queue: jobs queued */
byte idle = 0;            /* band->idle */
byte spinning = 0;        /* band->spinning */
bool rescue_idle = false; /* band->rescue_idle */
byte nq[NL];              /* jobs in lane l's ring left to its thread (bandq.c's next) */
bool old[NL];             /* nq[l]'s job was seen by a watcher's look: past its grace */
bool watching = false;    /* band->watching */
byte pushes = 0;          /* band jobs ever pushed (lanepool__bandq_accepted) */
byte nn = 0;              /* jobs left to their pushers pushed so far */
byte stuck = 0;           /* threads in a task that never returns */
byte done = 0;            /* producers finished */

/* lanepool__wake_thread: CAS PARKED -> AWAKE. */
inline wake_thread(l, woke) {
  atomic { if :: sleeping[l] == PARKED -> sleeping[l] = AWAKE; woke = true
              :: else -> woke = false fi }
}

/* lanepool__band_wake: one parked lane thread if none spins and some are idle (from
 * either end: wake_turn), and, for a job left to its pusher (nx), none watches; the
 * rescue thread if it parked untimed. */
inline band_wake_n(woke, t, nx) {
  if
  :: BROKEN == 8 -> t = (spinning == 0 && idle != 0 && !nx)
  :: else -> t = (spinning == 0 && idle != 0 && !(nx && watching))
  fi;
  if
  :: t ->
     if
     :: true -> wake_thread(0, woke); if :: !woke -> wake_thread(1, woke) :: else -> skip fi
     :: true -> wake_thread(1, woke); if :: !woke -> wake_thread(0, woke) :: else -> skip fi
     fi
  :: else -> skip
  fi;
  atomic { if :: rescue_idle && sleeping[R] == PARKED -> sleeping[R] = AWAKE
              :: else -> skip fi };
  t = false; woke = false
}
#define band_wake(woke, t) band_wake_n(woke, t, false)

/* lanepool__lane_kick: wake the lane's thread; else, if it is away, the band. */
inline lane_kick(l, woke, t) {
  wake_thread(l, woke);
  if
  :: !woke ->
     t = away[l];
     if :: t -> band_wake(woke, t) :: else -> skip fi
  :: else -> skip
  fi;
  woke = false; t = false
}

/* lanepool__excl_try: CAS 0 -> id. */
inline excl_try(l, id, r) {
  atomic { if :: excl[l] == 0 -> excl[l] = id; r = true :: else -> r = false fi }
}

/* lanepool__excl_release: store 0, then look at the queue. */
inline excl_release(l, r, woke, t) {
  excl[l] = 0;
  if
  :: BROKEN != 4 -> r = (q[l] > 0)
  :: else -> r = false
  fi;
  if :: r -> r = false; lane_kick(l, woke, t) :: else -> skip fi
}

/* run_lane: the holder runs the queue until it finds it empty (one step: see above).
 * With LANE_BLOCKS a task of lane 0 may never return (the lane stays held). */
#ifdef LANE_BLOCKS
#define RUN_LANE(l, blocked) \
  q[l] = 0; \
  if :: true -> skip :: l == 0 -> stuck++; blocked: false fi
#else
#define RUN_LANE(l, blocked) q[l] = 0
#endif

/* A lane free with work queued (park.c's work_for's first look, go_away's look). */
#define FREE_WITH_WORK(l) (excl[l] == 0 && q[l] > 0)
/* orphaned(s): away, free, with work queued. */
#define ORPHANED(s) (away[s] && excl[s] == 0 && q[s] > 0)

/* Band work queued (bandq_nonempty), and band work thread me may take now
 * (bandq_takeable: its own ring's next job, not another's still in its grace). */
#define NONEMPTY (bq > 0 || nq[0] > 0 || nq[1] > 0)
#define TAKEABLE(me) (bq > 0 || nq[me] > 0 || nq[1 - me] > 1 || (nq[1 - me] == 1 && old[1 - me]))

/* park.c's work_for (a lane thread): its own lane free with work, band work it may take,
 * or an orphaned sibling: three looks, in this order. */
inline work_for(me, r) {
  r = FREE_WITH_WORK(me);
  if :: !r -> r = TAKEABLE(me) :: else -> skip fi;
  if :: !r -> r = ORPHANED(1 - me) :: else -> skip fi
}

/* go_away: away = 1, then one look at its own lane: free with work, r true (run it
 * first), unless this is the fair turn: then its lane is announced (band_wake), r false. */
inline go_away(me, fair, r, woke, t) {
  away[me] = true;
  if
  :: BROKEN != 5 -> r = FREE_WITH_WORK(me)
  :: else -> r = false
  fi;
  if
  :: r && fair -> r = false; if :: BROKEN != 6 -> band_wake(woke, t) :: else -> skip fi
  :: else -> skip
  fi
}

proctype lane_thread(byte me) {
  bool r = false, t = false, woke = false, fair = false, w = false;
  byte seenp = 255;
loop:
  /* 1. its own lane's queue, if the lane is free (has_work, then excl_try: one step) */
  if
  :: atomic { FREE_WITH_WORK(me) -> excl[me] = me + 1 } ->
     away[me] = false;                                 /* come_back */
     /* band work pushed meanwhile may have counted on this thread: wake another */
     if :: BROKEN != 7 && NONEMPTY -> band_wake(woke, t) :: else -> skip fi;
     if
     :: true -> RUN_LANE(me, end_own_task)             /* until the queue is empty */
     :: TAKEABLE(me) || ORPHANED(1 - me) -> fair = true  /* or, work waiting for the band
                  (band_waits) at a LANEPOOL__FAIR_EVERY-th task, it gives the lane up
                  with work queued */
     fi;
     excl_release(me, r, woke, t);
     if :: fair -> goto band :: else -> goto loop fi   /* the fair turn: one band job */
  :: else -> skip
  fi;
  /* 2. one band job (run_band_job) */
band:
  if
  :: (fair && NONEMPTY) || TAKEABLE(me) ->             /* (band_waits; the fair turn) */
     go_away(me, fair, r, woke, t);
     if :: r -> r = false; goto loop :: else -> skip fi;  /* its own lane first */
     atomic {                                          /* bandq_take */
       if
       :: bq > 0 -> bq--; r = true
       :: nq[me] > 0 -> nq[me]--; old[me] = false; r = true
       :: nq[1 - me] > 1 || (nq[1 - me] == 1 && old[1 - me]) ->
          nq[1 - me]--; old[1 - me] = false; r = true
       :: else -> r = false
       fi
     };
     if
     :: r ->
        fair = false;
        r = NONEMPTY;                                  /* more waiting: wake another */
        if :: r -> r = false; band_wake(woke, t) :: else -> skip fi;
        /* the job may push its next job, into its thread's ring (SCEN 5) */
        if
        :: nn < NN -> atomic { nq[me]++; old[me] = false; nn++; pushes++ };
           band_wake_n(woke, t, true)
        :: true -> skip
        fi;
        if
        :: true -> goto loop                           /* the job returns */
        :: stuck++;
end_stuck:  false                                      /* ... or never */
        fi
     :: else -> skip
     fi
  :: else -> skip
  fi;
  /* 3. adopt the sibling lane: orphaned (relaxed loads), then go_away, then the CAS; on
   * the fair turn too, when it found no band job (worker.c: run_band_job || adopt_sibling),
   * its own lane then announced as for a band job */
  if
  :: ORPHANED(1 - me) ->
     go_away(me, fair, r, woke, t);
     if :: r -> r = false; goto loop :: else -> skip fi;  /* its own lane first */
     excl_try(1 - me, me + 1, r);
     if
     :: r ->
        r = false;
        fair = false;
        RUN_LANE(1 - me, end_adopted_task);
        excl_release(1 - me, r, woke, t);
        goto loop
     :: else -> skip
     fi
  :: else -> skip
  fi;
  if :: fair -> fair = false; goto loop :: else -> skip fi  /* a fair turn that took
                                                    nothing: back to its own lane */
  /* 4. nothing to take: come back, spin, park */
  away[me] = false;
  if
  :: true -> skip                                      /* no budget, or no spinner slot */
  :: true ->
     spinning++;
     /* sched_yield between looks, not counted meanwhile: a push then wakes a parked
      * thread (the next look, after spinning++ again, is one of those left out) */
     do :: spinning--; spinning++ :: break od;
     spinning--;
     if :: BROKEN != 3 -> work_for(me, r) :: else -> skip fi;
     if :: r -> r = false; goto loop :: else -> skip fi
  fi;
  /* lanepool__park: park_begin, then wait */
  sleeping[me] = PARKED;
  idle++;
  if :: BROKEN != 2 -> work_for(me, r) :: else -> skip fi;
  if
  :: r ->
     r = false;
     atomic { if :: sleeping[me] == PARKED -> sleeping[me] = AWAKE :: else -> skip fi };
     idle--;
     goto loop
  :: else -> skip
  fi;
watch:   /* the wait: untimed, or, watching jobs left to their pushers, timed parks */
  if
  :: sleeping[me] == AWAKE -> goto unparked
  :: else -> skip
  fi;
  if
  :: NN > 0 && !w && NONEMPTY ->
     atomic { if :: !watching -> watching = true; w = true :: else -> skip fi }
  :: else -> skip
  fi;
  if
  :: !w ->
end_park:
     sleeping[me] == AWAKE; goto unparked
  :: w ->
     if
     :: sleeping[me] == AWAKE -> goto unparked      /* woken */
     :: true ->                                      /* the timeout, then a look */
        if :: BROKEN != 9 -> work_for(me, r) :: else -> skip fi;
        if
        :: r ->
           r = false;
           atomic { if :: sleeping[me] == PARKED -> sleeping[me] = AWAKE :: else -> skip fi };
           goto unparked
        :: else -> skip
        fi;
        /* A watcher that keeps watching a queue no push changed since its last look
         * would watch it forever: the job it saw then is past its grace now. */
        assert(!(pushes == seenp && NONEMPTY));
        if
        :: pushes == seenp && !NONEMPTY ->
           watching = false; w = false;              /* then the look at watch's top */
           if :: BROKEN == 10 -> goto end_park2 :: else -> skip fi
        :: else -> seenp = pushes
        fi;
        /* what it sees now is past its grace at its next look */
        atomic { old[0] = old[0] || nq[0] > 0; old[1] = old[1] || nq[1] > 0 }
     fi;
     goto watch
  fi;
end_park2:
  sleeping[me] == AWAKE;
unparked:
  seenp = 255;                                         /* (park's local) */
  idle--;
  if
  :: w ->                /* a watcher leaving hands the watch on if work is queued */
     watching = false; w = false;
     if :: BROKEN != 11 && NONEMPTY -> band_wake(woke, t) :: else -> skip fi
  :: else -> skip
  fi;
  goto loop
}

/* The rescue thread: lane_loop with spare set (its own queue: empty). */
proctype rescue() {
  bool r = false, t = false, woke = false;
loop:
  /* lanepool__park_rescue: park_begin's PARKED (seen by a waker only once rescue_idle is
   * 1), rescue_idle = 1, then band_has_work (lane 1 has no lane-bound work) */
  atomic { sleeping[R] = PARKED; rescue_idle = true };
  r = NONEMPTY;
  if :: !r -> r = ORPHANED(0) :: else -> skip fi;
  if
  :: r -> r = false; atomic { rescue_idle = false; sleeping[R] = AWAKE }  /* timed */
  :: else ->
end_rpark:
     sleeping[R] == AWAKE;                               /* untimed */
     rescue_idle = false
  fi;
  /* rescue_look: a lane whose thread is away, with work queued (away, has_work, then
   * excl_try) first */
  r = (away[0] && q[0] > 0);
  if :: r -> excl_try(0, RESCUE_ID, r) :: else -> skip fi;
  if
  :: r ->
     r = false;
     RUN_LANE(0, end_rescued_task);
     excl_release(0, r, woke, t);
     goto loop
  :: else -> skip
  fi;
  /* ... else run_band_job (its go_away finds its own lane empty; jobs left to their
   * pushers: none in the scenarios with a rescue thread) */
  atomic { if :: bq > 0 -> bq--; r = true :: else -> r = false fi };
  if
  :: r ->
     r = NONEMPTY;
     if :: r -> r = false; band_wake(woke, t) :: else -> skip fi;
     if
     :: true -> skip
     :: stuck++;
end_rstuck: false
     fi
  :: else -> skip
  fi;
  goto loop
}

proctype band_producer() {
  byte n = 0;
  bool woke = false, t = false;
  do
  :: n < NB -> atomic { bq++; pushes++ }; n++; band_wake(woke, t)  /* lanepool__band_push */
  :: else -> break
  od;
  done++
}

proctype lane_producer(byte l) {
  byte n = 0;
  bool woke = false, t = false;
  do
  :: n < NW ->                                          /* lane_push onto lane l */
     q[l]++; n++;
     t = (excl[l] == 0);
     if
     :: t ->                                            /* (held: its holder looks) */
        wake_thread(l, woke);
        if
        :: !woke && BROKEN != 1 ->
           t = away[l];
           if :: t -> band_wake(woke, t) :: else -> skip fi
        :: else -> skip
        fi
     :: else -> skip
     fi;
     woke = false; t = false
  :: else -> break
  od;
  done++
}

proctype syncer() {
  bool r = false, woke = false, t = false;
  excl_try(0, SYNC_ID, r);                              /* take_for_inline */
  if
  :: r -> r = false; excl_release(0, r, woke, t)       /* finish_inline */
  :: else -> skip             /* (refused: it would queue its closure, a lane push) */
  fi;
  done++
}

/* The verdict, when nothing can move any more. */
proctype monitor() {
  timeout ->
  assert(done == NPROD);
#ifdef LANE_BLOCKS
  assert(stuck == THREADS || (!NONEMPTY && (q[0] == 0 || excl[0] != 0) && q[1] == 0))
#else
  assert(stuck == THREADS || (!NONEMPTY && q[0] == 0 && q[1] == 0))
#endif
}

init {
  atomic {
    sleeping[0] = AWAKE;
    sleeping[1] = AWAKE;
    sleeping[R] = AWAKE;
    run lane_thread(0);
#if SCEN == 2 || SCEN == 5
    run lane_thread(1);
#else
    away[1] = true;       /* lane 1's thread: in a band job that never returns */
    stuck = 1;
#if SCEN != 4
    run rescue();
#endif
#endif
#if SCEN == 3
    run syncer();
#endif
    run band_producer();
    run lane_producer(0);
#if SCEN == 4
    run lane_producer(1);
#endif
    run monitor()
  }
}
