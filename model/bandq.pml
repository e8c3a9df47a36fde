/*
 * bandq.pml - the scheduler's wake-ups (Sources/CLanePool/park.c, the two wake-up pairs
 * in its header; worker.c's lane_loop; sync.c's exclusion), for spin. No lost wake-up,
 * no stranded work: when every producer is done and nothing in the system can move any
 * more, nothing is left queued. Every step is a seq_cst operation of the C code (each
 * load its own step), so Promela's interleavings are the executions to consider.
 *
 * One band of two lanes, 0 and 1, each with its thread (lane_thread): the lane's excl
 * word and queue (q[], a count), the thread's sleeping (AWAKE/PARKED) and away flag.
 * The band: its queue (bq, a count), idle and spinning. The band's rescue thread
 * (rescue): rescue_idle, its untimed park and its timed one (a timed park always ends:
 * the thread wakes itself). Producers, concurrent with everything:
 *   - band_producer: NB band jobs, each lanepool__band_push: push, then band_wake;
 *   - lane_producer: NW tasks onto lane 0, each lane_push: push; if excl == 0: wake the
 *     lane's thread by CAS, else if it is away, band_wake;
 *   - syncer: a lanepool_lane_sync caller from outside the pool onto lane 0: it takes
 *     the lane's exclusion if it is free (take_for_inline), runs its closure or finds
 *     work queued, and gives it up (finish_inline: excl_release).
 * A lane thread runs lane_loop: its own lane (excl CAS, run the queue, excl_release:
 * store 0, then if work is queued lane_kick); one band job (go_away: store away, look
 * at its own lane; take; wake another if more wait; run it); adopt a sibling lane
 * (away, free, with work queued); else come back, spin (spinning++, looks, spinning--,
 * one more look), park (PARKED, idle++, one more look, else wait for AWAKE, idle--).
 * A band job may block forever (stuck; the thread stays away and AWAKE): why adoption
 * and the rescue thread exist. NB = 2 band jobs, so at most two threads are stuck.
 *
 * Checked (run model/check-bandq): a monitor asserts, at `timeout` (no statement of any
 * process executable: every thread parked untimed or stuck, the rescue thread parked
 * untimed or stuck, the producers done), that
 *   SCEN 1 (the band as built, with its rescue thread): nothing is queued anywhere;
 *   SCEN 2 (no rescue thread: a stricter check of the lane threads' own wake-ups, which
 *     the rescue thread's 100 ms timed parks would otherwise cover): nothing is queued,
 *     unless both lane threads are stuck.
 * Every process blocked at that point must be at an end label (spin's invalid end
 * states catch a model that blocks anywhere else).
 *
 * Left out: the pool's life (closing, draining, cancelling); fairness (run_lane's break
 * every LANEPOOL__FAIR_EVERY tasks: at most NW tasks here); the ring's claimed but
 * unpublished cells (a push is one step; run_lane's `pending` wait only delays); the
 * overflow lists (a queue is a count); lane-bound work for lane 1 and the rescue lane's
 * own queue (empty); the rescue thread's measure of progress (after each park it may
 * act or not, freely); spinner slots, spin budgets and `warm` (a thread may spin or
 * not); lane tasks that block (they hold their lane: its queue then waits by design);
 * the note of the waker and yield_to_waker.
 *
 * BROKEN selects a wrong variant, to see the checker catch it:
 *   1: a lane push does not look at `away` (no band_wake for a lane whose thread is away)
 *   2: park does not look at the work once more after PARKED and idle++
 *   3: a spinner does not look once more after spinning-- (the thread then parks, and
 *      park_begin's look covers it: see check-bandq)
 *   4: excl_release does not look at the lane's queue after storing 0
 *   5: go_away does not look at its own lane after storing away = 1
 */
#ifndef BROKEN
#define BROKEN 0
#endif
#ifndef SCEN
#define SCEN 1
#endif

#define AWAKE  0
#define PARKED 1
#define NL 2        /* lanes (and lane threads) of the band */
#define R  2        /* the rescue thread's index in sleeping[] and away[] */
#define NB 2        /* band jobs pushed */
#define NW 2        /* lane-bound tasks pushed onto lane 0 */
#define SYNC_ID 4   /* excl holders: lane thread i is i + 1, the rescue thread 3 */
#if SCEN == 1
#define NPROD 3     /* band_producer, lane_producer, syncer */
#else
#define NPROD 3
#endif

byte sleeping[NL + 1];  /* lane->sleeping */
bool away[NL + 1];      /* lane->away */
byte excl[NL];          /* lane->excl: 0 free, else its holder */
byte q[NL];             /* the lane's queue: tasks queued */
byte bq = 0;            /* the band's queue: jobs queued */
byte idle = 0;          /* band->idle */
byte spinning = 0;      /* band->spinning */
bool rescue_idle = false; /* band->rescue_idle */
byte stuck = 0;         /* threads in a band job that never returns */
byte done = 0;          /* producers finished */

/* lanepool__wake_thread: load, then CAS PARKED -> AWAKE. */
inline wake_thread(l, woke) {
  if
  :: sleeping[l] == PARKED ->
     atomic { if :: sleeping[l] == PARKED -> sleeping[l] = AWAKE; woke = true
                 :: else -> woke = false fi }
  :: else -> woke = false
  fi
}

/* lanepool__band_wake: one parked lane thread if none spins and some are idle, starting
 * anywhere (wake_turn); the rescue thread if it is parked untimed. */
inline band_wake(k, woke, t) {
  t = (spinning == 0);
  if :: t -> t = (idle != 0) :: else -> skip fi;
  if
  :: t ->
     if :: k = 0 :: k = 1 fi;
     wake_thread(k, woke);
     if :: !woke -> k = 1 - k; wake_thread(k, woke) :: else -> skip fi;
     k = 0
  :: else -> skip
  fi;
  t = rescue_idle;
  if :: t -> wake_thread(R, woke) :: else -> skip fi;
  t = false; woke = false
}

/* lanepool__lane_kick: wake the lane's thread; else, if it is away, the band. */
inline lane_kick(l, k, woke, t) {
  wake_thread(l, woke);
  if
  :: !woke ->
     t = away[l];
     if :: t -> band_wake(k, woke, t) :: else -> skip fi
  :: else -> skip
  fi;
  woke = false; t = false
}

/* lanepool__excl_try: CAS 0 -> id. */
inline excl_try(l, id, r) {
  atomic { if :: excl[l] == 0 -> excl[l] = id; r = true :: else -> r = false fi }
}

/* lanepool__excl_release: store 0, then look at the queue. */
inline excl_release(l, k, woke, t) {
  excl[l] = 0;
  if
  :: BROKEN != 4 && q[l] > 0 -> lane_kick(l, k, woke, t)
  :: else -> skip
  fi
}

/* run_lane: the holder runs the queue until it is empty (a lane task returns). */
inline run_lane(l) {
  do
  :: q[l] > 0 -> q[l]--
  :: else -> break
  od
}

/* orphaned(s): away, free, with work queued (three loads). */
inline orphaned(s, r) {
  r = away[s];
  if :: r -> r = (excl[s] == 0) :: else -> skip fi;
  if :: r -> r = (q[s] > 0) :: else -> skip fi
}

/* lanepool__work_for (a lane thread): its own lane free with work, band work, or an
 * orphaned sibling. */
inline work_for(me, sib, r) {
  r = (excl[me] == 0);
  if :: r -> r = (q[me] > 0) :: else -> skip fi;
  if :: !r -> r = (bq > 0) :: else -> skip fi;
  if :: !r -> orphaned(sib, r) :: else -> skip fi
}

/* go_away: away = 1, then one look at its own lane (true: it has work and is free). */
inline go_away(me, r) {
  away[me] = true;
  if
  :: BROKEN != 5 ->
     r = (excl[me] == 0);
     if :: r -> r = (q[me] > 0) :: else -> skip fi
  :: else -> r = false
  fi
}

/* band_has_waiting_work (the rescue thread): band work, or an orphaned lane. */
inline waiting(r, i) {
  r = (bq > 0);
  i = 0;
  do
  :: !r && i < NL -> orphaned(i, r); i++
  :: else -> break
  od;
  i = 0
}

proctype lane_thread(byte me) {
  byte sib = 1 - me, k = 0;
  bool r = false, t = false, woke = false;
loop:
  /* 1. its own lane's queue, if the lane is free */
  if
  :: q[me] > 0 ->
     excl_try(me, me + 1, r);
     if
     :: r ->
        r = false;
        away[me] = false;                        /* come_back */
        run_lane(me);
        excl_release(me, k, woke, t);
        goto loop
     :: else -> skip
     fi
  :: else -> skip
  fi;
  /* 2. one band job */
  if
  :: bq > 0 ->
     go_away(me, r);
     if :: r -> r = false; goto loop :: else -> skip fi;   /* its own lane first */
     atomic { if :: bq > 0 -> bq--; r = true :: else -> r = false fi };  /* bandq_take */
     if
     :: r ->
        r = false;
        if :: bq > 0 -> band_wake(k, woke, t) :: else -> skip fi;   /* more waiting */
        if
        :: true -> skip                          /* the job returns */
        :: stuck++;
end_stuck:  false                                /* ... or never */
        fi;
        goto loop
     :: else -> skip
     fi
  :: else -> skip
  fi;
  /* 3. adopt a sibling lane (relaxed loads: then go_away, then the CAS) */
  orphaned(sib, r);
  if
  :: r ->
     go_away(me, r);
     if :: r -> r = false; goto loop :: else -> skip fi;
     excl_try(sib, me + 1, r);
     if
     :: r ->
        r = false;
        run_lane(sib);
        excl_release(sib, k, woke, t);
        goto loop
     :: else -> skip
     fi
  :: else -> skip
  fi;
  /* 4. nothing to take: come back, spin, park */
  away[me] = false;
  if
  :: true -> skip                                /* no budget, or no spinner slot */
  :: true ->
     spinning++;
     if :: true -> work_for(me, sib, r) :: true -> skip fi;   /* a look while spinning */
     spinning--;
     if :: BROKEN != 3 && !r -> work_for(me, sib, r) :: else -> skip fi;
     if :: r -> r = false; goto loop :: else -> skip fi
  fi;
  /* lanepool__park: park_begin, then wait */
  sleeping[me] = PARKED;
  idle++;
  if :: BROKEN != 2 -> work_for(me, sib, r) :: else -> skip fi;
  if
  :: r ->
     r = false;
     atomic { if :: sleeping[me] == PARKED -> sleeping[me] = AWAKE :: else -> skip fi };
     idle--;
     goto loop
  :: else -> skip
  fi;
end_park:
  sleeping[me] == AWAKE;
  idle--;
  goto loop
}

proctype rescue() {
  byte k = 0, i = 0;
  bool r = false, t = false, woke = false, timed = false, calm = false;
loop:
  /* lanepool__park_rescue. park_begin: PARKED, no idle; its look finds nothing (its own
   * queue is left out, and the rescue thread takes band work only when stuck). */
  sleeping[R] = PARKED;
  if
  :: calm -> timed = true                        /* within a timeout of its last wake */
  :: true -> waiting(timed, i)                   /* (or the calm is over) */
  fi;
  if
  :: !timed ->
     rescue_idle = true;
     waiting(r, i);
     if :: r -> r = false; rescue_idle = false; timed = true :: else -> skip fi
  :: else -> skip
  fi;
  if
  :: timed ->
     sleeping[R] = AWAKE;                        /* a wake, or the timeout's CAS */
     timed = false;
     calm = false
  :: else ->
end_rpark:
     sleeping[R] == AWAKE;
     rescue_idle = false;
     calm = true
  fi;
  /* rescue_look: acts only when no lane thread finished a task over a whole timeout */
  if
  :: true -> goto loop                           /* progress seen, or not long enough */
  :: true -> skip
  fi;
  /* run_band_job (go_away: its own lane is empty) */
  if
  :: bq > 0 ->
     away[R] = true;
     atomic { if :: bq > 0 -> bq--; r = true :: else -> r = false fi };
     if
     :: r ->
        r = false;
        if :: bq > 0 -> band_wake(k, woke, t) :: else -> skip fi;
        if
        :: true -> skip
        :: stuck++;
end_rstuck: false
        fi;
        goto loop
     :: else -> skip
     fi
  :: else -> skip
  fi;
  /* a lane whose thread is away, with work queued */
  do
  :: i < NL ->
     r = away[i];
     if :: r -> r = (q[i] > 0) :: else -> skip fi;
     if :: r -> excl_try(i, 3, r) :: else -> skip fi;
     if
     :: r ->
        r = false;
        run_lane(i);
        excl_release(i, k, woke, t);
        i = 0;
        goto loop
     :: else -> i++
     fi
  :: else -> i = 0; goto loop
  od
}

proctype band_producer() {
  byte n = 0, k = 0;
  bool woke = false, t = false;
  do
  :: n < NB -> bq++; n++; band_wake(k, woke, t)  /* lanepool__band_push */
  :: else -> break
  od;
  done++
}

proctype lane_producer() {
  byte n = 0, k = 0;
  bool woke = false, t = false;
  do
  :: n < NW ->                                   /* lane_push onto lane 0 */
     q[0]++; n++;
     t = (excl[0] == 0);
     if
     :: t ->
        wake_thread(0, woke);
        if
        :: !woke && BROKEN != 1 ->
           t = away[0];
           if :: t -> band_wake(k, woke, t) :: else -> skip fi
        :: else -> skip
        fi;
        woke = false; t = false
     :: else -> skip                             /* held: its holder looks */
     fi
  :: else -> break
  od;
  done++
}

proctype syncer() {
  byte k = 0;
  bool r = false, woke = false, t = false;
  excl_try(0, SYNC_ID, r);                       /* take_for_inline */
  if
  :: r -> excl_release(0, k, woke, t)           /* ran its closure, or found work: finish_inline */
  :: else -> skip                                /* (a queued sync: a push, left out) */
  fi;
  done++
}

/* The verdict, when nothing can move any more. */
proctype monitor() {
  timeout ->
  assert(done == NPROD);
#if SCEN == 1
  assert(bq == 0 && q[0] == 0 && q[1] == 0)
#else
  assert(stuck == NL || (bq == 0 && q[0] == 0 && q[1] == 0))
#endif
}

init {
  atomic {
    sleeping[0] = AWAKE;
    sleeping[1] = AWAKE;
    sleeping[R] = AWAKE;
    run lane_thread(0);
    run lane_thread(1);
#if SCEN == 1
    run rescue();
#endif
    run band_producer();
    run lane_producer();
    run syncer();
    run monitor()
  }
}
