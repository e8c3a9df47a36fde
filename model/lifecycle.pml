/*
 * lifecycle.pml - the pool's life cycle (Sources/CLanePool/lifecycle.c), for spin.
 * One lane (its ring, park and wake), the timer thread (heap, fire into the lane),
 * submitters of every kind, shutdown callers of both modes (the first drives, a
 * cancel escalates a drain), and destroy. Every step is one seq_cst operation of the
 * C code, or a critical section under the lock that guards it there.
 *
 * Abstractions: the drain's balance (lifecycle.c, quiescent: finished side, fence,
 * accepted side over monotonic counters) is one atomic comparison of the totals; a
 * ring never fills (the overflow list behaves as the ring here); futex waits are
 * waits for the word to change; deadlines are nondeterministic (a timer may fire at
 * any moment).
 *
 * Checked (run model/check-lifecycle):
 *   - exactly once: every task accepted (into the ring, or the timer heap) runs, is
 *     discarded (handed back), or is cancelled by its owner, once (asserted at every
 *     step of a task, and for every task once everything has ended);
 *   - the state word only grows (asserted at every write);
 *   - nothing touched after free: every access to the pool by a call asserts that
 *     destroy has not freed it. A call begins before destroy does (a call that
 *     begins after is the caller's own use after free, as in C);
 *   - no deadlock: every process ends (spin's invalid end states).
 *
 * BROKEN selects a wrong variant, to see the checker catch it:
 *   1: a cancel escalates by a plain store of CANCELLING (no CAS from DRAINING)
 *   2: the drain does not commit (no CAS DRAINING -> CLOSING) before it closes
 *   3: the drain closes the timers without a second balance
 *   4: destroy does not wait for the calls under way
 *   5: the timer thread does not report the fire to a draining driver
 *   6: a queued sync's escalation touches the lane outside its call (the boost dropped
 *      after the answer, or after a refused push, with no call under way)
 */
#ifndef BROKEN
#define BROKEN 0
#endif

/* The pool's states: internal.h's enum (model/check-lifecycle compares the two). */
#define OPEN       0
#define DRAINING   1
#define CLOSING    2
#define CANCELLING 3
#define JOINED     4
#define DESTROYED  5

/* intake of the lane and of the timers (internal.h: LANEPOOL__OPEN, OWN_ONLY, CLOSED) */
#define I_OPEN   0
#define I_OWN    1
#define I_CLOSED 2

/* a task's life */
#define T_NONE      0 /* not accepted (or refused: its submitter keeps it) */
#define T_QUEUED    1 /* in the lane's ring */
#define T_TIMER     2 /* in the timer heap */
#define T_RUNNING   3
#define T_RAN       4
#define T_DISCARDED 5 /* handed back by the cancel's discard pass */
#define T_CANCELLED 6 /* taken back by its owner (lanepool_timer_cancel) */

/* what a task does when it runs */
#define K_NOTHING   0
#define K_FOLLOW_UP 1 /* submits one more task to the lane (own work) */
#define K_TIMER     2 /* sets a timer (own) */

#define DRAIN  0
#define CANCEL 1

#ifndef SCEN
#define SCEN 1
#endif
/* The scenarios (each small enough to explore exhaustively in seconds). Every one has
 * the lane; the timer thread runs where a timer can be set.
 *   1: a drain, a cancel that may escalate it, a continuation whose task sets a timer
 *      (defects 1 and 3 of issue 23);
 *   2: a drain, a cancel, an outside submit whose task fans out a follow-up;
 *   3: destroy against submitters still in their calls (async, queued sync) and a
 *      cancel (defect 5);
 *   4: destroy against two more shutdown callers (drain, cancel: defects 2 and 4)
 *      and a continuation whose task fans out;
 *   5: two drains (one drives, one waits) and a timer set from outside that its
 *      owner may cancel (no cancel to wake a driver that missed an event). */
#if SCEN == 1
#define NCALL 3 /* call records: every process but the lane, the timer and the checker */
#define TIMERS 1
#elif SCEN == 2
#define NCALL 3
#define TIMERS 0
#elif SCEN == 3
#define NCALL 4
#define TIMERS 0
#elif SCEN == 4
#define NCALL 4
#define TIMERS 0
#else
#define NCALL 3
#define TIMERS 1
#endif
#define NPROC (NCALL + 1 + TIMERS) /* processes that end (all but the checker) */
#define MAXT 6 /* task ids */

byte state = OPEN;
byte lane_intake = I_OPEN;
byte timer_intake = I_OPEN;
chan ring = [MAXT] of { byte };
chan heap = [MAXT] of { byte };
chan taken = [MAXT] of { byte }; /* timers a cancel took out of the heap */
byte status[MAXT];
byte kind[MAXT];
byte next_id = 0;
/* The drain's balance: accepted - finished over the ring and the timers (ring claims
 * and timers added, less tasks finished and timers fired or cancelled). */
byte pending = 0;
bool sleeping = false;
byte events = 0;    /* pool->drain_events */
bool escalation = false;
bool esc_discard = false; /* the escalator's callback, left for the driver */
bool tlock = false; /* the timer lock */
bool timer_stop = false;
bool lane_exited = false;
bool timer_exited = false;
bool freed = false;
bit inside[NCALL];  /* calls.c: the call records */
byte entered = 0;   /* calls begun */
byte ended = 0;     /* processes ended */

#define TOUCH assert(!freed)
/* Every write of the state word: it only grows. */
#define SET_STATE(v) assert((v) > state); state = (v)

inline new_task(id, k) {
  atomic { id = next_id; next_id++; kind[id] = k }
}

inline lane_push(id, own, ok) {
  atomic {
    TOUCH;
    if
    :: lane_intake == I_OPEN || (lane_intake == I_OWN && own) ->
       assert(status[id] == T_NONE || status[id] == T_TIMER);
       status[id] = T_QUEUED; ring!id; pending++; ok = true
    :: else -> ok = false
    fi
  }
}

/* wake_if_parked: after the publish, the submitter still touches the lane */
inline wake() {
  atomic { TOUCH; if :: sleeping -> sleeping = false :: else -> skip fi }
}

/* lanepool__drain_idle: an event for a draining driver */
inline drain_idle() {
  atomic { TOUCH; if :: state == DRAINING -> events++ :: else -> skip fi }
}

inline add_timer(id, own, ok) {
  atomic { !tlock -> tlock = true };
  TOUCH;
  if
  :: timer_intake == I_OPEN || (timer_intake == I_OWN && own) ->
     assert(status[id] == T_NONE); status[id] = T_TIMER; heap!id; pending++; ok = true
  :: else -> ok = false
  fi;
  tlock = false;
  TOUCH /* pthread_cond_signal after the unlock */
}

inline enter(me) {
  atomic { TOUCH; inside[me] = 1; entered++ }
}
inline leave(me) {
  inside[me] = 0
}

/* ---- the lane --------------------------------------------------------------- */

proctype Lane() {
  byte id, nid;
  bool ok;
  do
  :: state == CANCELLING ->
     (lane_intake == I_CLOSED); /* cancel_queued_syncs waits for the CLOSED bit */
     break
  :: state != CANCELLING ->
     if
     :: len(ring) > 0 ->
        /* a task that submits nothing runs in one step (nothing else sees its inside) */
        atomic {
          ring?id;
          assert(status[id] == T_QUEUED); status[id] = T_RUNNING;
          if :: kind[id] == K_NOTHING -> status[id] = T_RAN; pending-- :: else -> skip fi
        }
        if :: status[id] == T_RAN -> goto next :: else -> skip fi;
        if
        :: kind[id] == K_FOLLOW_UP -> new_task(nid, K_NOTHING); lane_push(nid, true, ok)
        :: kind[id] == K_TIMER -> new_task(nid, K_NOTHING); add_timer(nid, true, ok)
        :: else -> skip
        fi;
        atomic { status[id] = T_RAN; pending-- };
next:   skip
     :: len(ring) == 0 && lane_intake == I_CLOSED -> break
     :: len(ring) == 0 && lane_intake != I_CLOSED ->
        sleeping = true; /* park: PARKED first, then the last look */
        if
        :: len(ring) > 0 || lane_intake == I_CLOSED -> sleeping = false
        :: else -> drain_idle(); (!sleeping)
        fi
     fi
  od;
  lane_exited = true;
  ended++
}

/* ---- the timer thread -------------------------------------------------------- */

proctype Timer() {
  byte id;
  bool ok;
  do
  :: atomic { !tlock -> tlock = true };
     if
     :: timer_stop -> tlock = false; break
     :: !timer_stop && len(heap) > 0 -> /* due (any moment): into its lane, under the lock */
        heap?<id>;
        lane_push(id, true, ok);
        if
        :: ok ->
           wake(); /* inside lanepool__lane_push: the lane may run it at once */
           atomic {
             heap?id; pending--;
#if BROKEN != 5
             drain_idle();
#endif
             tlock = false
           }
        :: else -> tlock = false /* closed: stays in the heap, for the shutdown */
        fi
     :: !timer_stop && len(heap) == 0 -> tlock = false; (len(heap) > 0 || timer_stop)
     fi
  od;
  timer_exited = true;
  ended++
}

/* ---- submitters --------------------------------------------------------------- */

/* lanepool_lane_async (own: LANEPOOL_SUBMIT_CONTINUATION, which a drain still takes) */
proctype Async(byte me; bool cont; byte k) {
  byte id;
  bool ok;
  atomic { enter(me); new_task(id, k) }
  lane_push(id, cont, ok);
  if :: ok -> wake() :: else -> skip fi;
  leave(me);
  ended++
}

/* lanepool_lane_sync, queued: returns once its task ran or was discarded. With
 * escalation it touches the lane before its push (the waiter's band counted, the boost
 * applied) and after the answer or a refused push (the boost dropped): one call spans
 * all of it, so destroy waits for the last touch (BROKEN 6: the call only around the
 * push and its wake, as before the hostile review's third pass). */
proctype Sync(byte me) {
  byte id;
  bool ok;
#if BROKEN == 6
  TOUCH; /* the boost counted before the call began */
  atomic { enter(me); new_task(id, K_NOTHING) }
#else
  atomic { enter(me); new_task(id, K_NOTHING) }
  TOUCH; /* boost_join, boost_update */
#endif
  lane_push(id, false, ok);
  if :: ok -> wake() :: else -> skip fi;
#if BROKEN == 6
  leave(me);
#endif
  if :: ok -> (status[id] == T_RAN || status[id] == T_DISCARDED) :: else -> skip fi;
  TOUCH; /* boost_leave: after the answer, or after a refused push */
#if BROKEN != 6
  leave(me);
#endif
  ended++
}

/* lanepool_lane_async_after, then maybe lanepool_timer_cancel */
proctype After(byte me) {
  byte id;
  bool ok;
  atomic { enter(me); new_task(id, K_NOTHING) }
  add_timer(id, false, ok);
  if
  :: ok ->
     atomic { !tlock -> tlock = true };
     TOUCH;
     if
     :: !timer_stop && status[id] == T_TIMER -> heap??eval(id); status[id] = T_CANCELLED; pending--
     :: else -> skip /* fired already, or taken by a shutdown */
     fi;
     tlock = false;
     drain_idle()
  :: ok -> skip
  :: else -> skip
  fi;
  leave(me);
  ended++
}

/* ---- shutdown ------------------------------------------------------------------ */

inline wait_joined() {
  (state >= JOINED);
  TOUCH /* the futex waiter's re-check after its wake */
}

inline drive_cancel() {
  atomic { !tlock -> tlock = true };
  /* lanepool__timers_stop: closed, stopped, the pending timers taken out */
  timer_intake = I_CLOSED; timer_stop = true;
  do
  :: len(heap) > 0 -> heap?id; taken!id
  :: len(heap) == 0 -> break
  od;
  tlock = false;
  lane_intake = I_CLOSED;
  wake();
  (timer_exited);
  (lane_exited);
  /* the discard pass: the ring, then the timers taken out of the heap */
  do
  :: len(ring) > 0 -> ring?id; assert(status[id] == T_QUEUED); status[id] = T_DISCARDED
  :: len(ring) == 0 -> break
  od;
  do
  :: len(taken) > 0 -> taken?id; assert(status[id] == T_TIMER); status[id] = T_DISCARDED
  :: len(taken) == 0 -> break
  od
}

inline shutdown(me, mode) {
  drove = false;
  atomic {
    TOUCH;
    if
    :: state == OPEN -> if :: mode == DRAIN -> SET_STATE(DRAINING) :: else -> SET_STATE(CANCELLING) fi; drove = true
    :: else -> skip
    fi
  }
  if
  :: drove && mode == CANCEL ->
     drive_cancel();
     atomic { assert(state == CANCELLING); SET_STATE(JOINED) }
  :: drove && mode == DRAIN ->
     /* drive_drain */
     atomic { if :: lane_intake < I_OWN -> lane_intake = I_OWN :: else -> skip fi }
     atomic { !tlock -> tlock = true };
     if :: timer_intake < I_OWN -> timer_intake = I_OWN :: else -> skip fi;
     tlock = false;
     escalated = false;
     timers_closed = false;
     do
     :: ev = events;
        if
        :: state == CANCELLING -> escalated = true; break
        :: state != CANCELLING ->
           if
           :: pending == 0 ->
              if
              :: timers_closed -> break
              :: !timers_closed ->
                 atomic { !tlock -> tlock = true };
                 timer_intake = I_CLOSED;
                 tlock = false;
                 timers_closed = true
#if BROKEN == 3
                 ; break
#endif
              fi
           :: pending != 0 -> (events != ev) /* futex wait */
           fi
        fi
     od;
#if BROKEN != 2
     if
     :: !escalated -> atomic { if :: state == DRAINING -> SET_STATE(CLOSING) :: else -> escalated = true fi }
     :: else -> skip
     fi;
#endif
     if
     :: escalated ->
        assert(esc_discard); /* the escalator's callback is there */
        drive_cancel();
        atomic { assert(state == CANCELLING); SET_STATE(JOINED) }
     :: !escalated -> /* lanepool__close_and_join, as drive_cancel's first steps */
        atomic { !tlock -> tlock = true };
        assert(len(heap) == 0); /* lifecycle.c: the balance proves the heap empty */
        timer_intake = I_CLOSED; timer_stop = true;
        tlock = false;
        lane_intake = I_CLOSED;
        wake();
        (timer_exited);
        (lane_exited);
        atomic {
#if BROKEN != 2
          assert(state == CLOSING);
#endif
          SET_STATE(JOINED)
        }
     fi
  :: !drove ->
     claimed = false;
     if
     :: mode == CANCEL && state == DRAINING ->
        atomic { if :: !escalation -> escalation = true; claimed = true :: else -> skip fi }
     :: else -> skip
     fi;
     if
     :: claimed ->
        esc_discard = true;
#if BROKEN == 1
        atomic { SET_STATE(CANCELLING) };
        events++
#else
        atomic { if :: state == DRAINING -> SET_STATE(CANCELLING); ok = true :: else -> ok = false fi };
        if :: ok -> events++ :: else -> skip fi
#endif
     :: else -> skip
     fi;
     wait_joined()
  fi
}

proctype Shut(byte me; byte mode) {
  byte id, ev;
  bool drove, escalated, timers_closed, claimed, ok;
  enter(me);
  shutdown(me, mode);
  leave(me);
  ended++
}

proctype Destroy(byte me) {
  byte id, ev, i;
  bool drove, escalated, timers_closed, claimed, ok;
  (entered == NCALL - 1); /* every other call began before destroy did */
  inside[me] = 1;
  entered++;
  shutdown(me, DRAIN);
  wait_joined();
#if BROKEN != 4
  i = 0;
  do /* lanepool__calls_wait */
  :: i < NCALL -> if :: i != me -> (inside[i] == 0) :: else -> skip fi; i++
  :: i == NCALL -> break
  od;
#endif
  atomic { SET_STATE(DESTROYED); freed = true };
  ended++
}

/* Once everything ended: every accepted task ran or came back, once. */
active proctype Checker() {
  byte i;
  (ended == NPROC);
  assert(state >= JOINED);
  i = 0;
  do
  :: i < next_id ->
     assert(status[i] == T_NONE || status[i] == T_RAN || status[i] == T_DISCARDED ||
            status[i] == T_CANCELLED);
     i++
  :: i == next_id -> break
  od
}

init {
  atomic {
    run Lane();
#if TIMERS
    run Timer();
#else
    timer_exited = true;
#endif
#if SCEN == 1
    run Async(0, true, K_TIMER); /* a continuation: a drain still takes it */
    run Shut(1, DRAIN);
    run Shut(2, CANCEL)
#elif SCEN == 2
    run Async(0, false, K_FOLLOW_UP);
    run Shut(1, DRAIN);
    run Shut(2, CANCEL)
#elif SCEN == 3
    run Async(0, false, K_NOTHING);
    run Sync(1);
    run Shut(2, CANCEL);
    run Destroy(3)
#elif SCEN == 4
    run Async(0, true, K_FOLLOW_UP);
    run Shut(1, DRAIN);
    run Shut(2, CANCEL);
    run Destroy(3)
#else
    run After(0);
    run Shut(1, DRAIN);
    run Shut(2, DRAIN)
#endif
  }
}
