/*
 * rescue.pml - the rescue lane's wake-up (Sources/CLanePool/lane.c, "The rescue lane":
 * park_spare, rescue_take, and the band push in lane_push), for spin. One band lane,
 * lane 0, runs a task that pushes band work onto its own ring (LANEPOOL_SUBMIT_LOCAL)
 * and then blocks forever: only the band's rescue lane can take that work. The rescue
 * lane loops: it takes a stuck lane's stealable head when it is awake (the 100 ms of
 * no progress is abstracted away: lane 0 never progresses), else parks, with a timeout
 * while a band ring holds work or for one timeout after a wake (`calm`), without one
 * otherwise. Every step is a seq_cst operation of the C code.
 *
 * Checked (run model/check-rescue), under weak fairness (a timed wait always times out
 * eventually; an untimed one needs a wake):
 *   - rescued: the work lane 0 queued is eventually taken, whatever the rescue lane was
 *     doing when it was pushed.
 * Left out: LANE_LENT (a rescue lane is never lent: lane_borrow refuses it), pushes from
 * the rescue lane (a LOCAL submit there goes to a band lane), and that a take needs two
 * looks LANEPOOL__RESCUE_NS apart (the C code gets them because a non-empty ring keeps
 * its parks timed). That a cell is taken once is ring.h's CAS (ring_test), not this.
 *
 * BROKEN selects a wrong variant, to see the checker catch it:
 *   1: the rescue lane reads the band's rings before it stores rescue_idle (no Dekker pair)
 *   2: a band push does not read rescue_idle (no wake)
 *   3: the rescue lane parks untimed once its calm is over, whatever is queued
 */
#ifndef BROKEN
#define BROKEN 0
#endif

#define AWAKE  0
#define PARKED 1
#define R      1   /* the rescue lane's index in sleeping[] */

byte sleeping[2];  /* lane.c: lane->sleeping (lane 0's stays AWAKE: it is in its task) */
byte tail = 0;     /* band work lane 0 ever queued */
byte head = 0;     /* ... taken */
bool rescue_idle = false; /* pool->watch[band].rescue_idle */

inline wake_if_parked(l) {
  atomic { if :: sleeping[l] == PARKED -> sleeping[l] = AWAKE :: else -> skip fi }
}

proctype lane0() {
  tail++;                                   /* the push's tail CAS */
  if
  :: BROKEN != 2 && rescue_idle -> wake_if_parked(R)
  :: else -> skip
  fi;
end_blocked:
  false                                     /* its task blocks forever */
}

proctype rescue(bool calm0) {
  bool calm = calm0, timed, queued;
loop:
  /* rescue_take: lane 0 is awake, its queue has not moved */
  atomic { if :: tail > head -> head++; goto loop :: else -> skip fi };
  /* park_spare */
  sleeping[R] = PARKED;
  if
  :: BROKEN == 3 -> timed = calm
  :: else -> timed = calm || tail > head
  fi;
  if
  :: !timed ->
     if
     :: BROKEN == 1 ->
        queued = tail > head;
        rescue_idle = true;
        if :: queued -> rescue_idle = false; timed = true :: else -> skip fi
     :: BROKEN == 3 -> rescue_idle = true
     :: else ->
        rescue_idle = true;
        if :: tail > head -> rescue_idle = false; timed = true :: else -> skip fi
     fi
  :: else -> skip
  fi;
wait:
  if
  :: sleeping[R] == AWAKE -> skip                      /* woken */
  :: timed ->                                          /* the timeout fires */
     atomic { if :: sleeping[R] == PARKED -> sleeping[R] = AWAKE :: else -> skip fi }
  fi;
  if
  :: !timed -> rescue_idle = false; calm = true        /* one timed park from now */
  :: else -> calm = false
  fi;
  goto loop
}

init {
  atomic {
    sleeping[0] = AWAKE;
    sleeping[R] = AWAKE;
    run lane0();
    if :: run rescue(true) :: run rescue(false) fi
  }
}

ltl rescued { <> (head == 1) }
