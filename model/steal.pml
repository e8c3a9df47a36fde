/*
 * steal.pml - the wake-up side of stealing (Sources/CLanePool/lane.c, "Stealing"), for
 * spin. One band of three lanes. Lane 0 is woken by a producer, runs a task that
 * submits band work to its own lane (LANEPOOL_SUBMIT_LOCAL) and then blocks forever (a
 * lock, a loop, a wait for that very work). Lanes 1 and 2 go idle at any moment: they
 * park as the band's lookout (timed) or as idle (untimed) by the protocol of park(),
 * lookout() and nudge_band(). Every step is a seq_cst operation of the C code, so
 * Promela's interleavings are the executions to consider.
 *
 * Checked (run model/check-steal):
 *   - liveness, under weak fairness: the work lane 0 queued is eventually stolen
 *     (a timed wait always times out eventually; an untimed one needs a wake);
 *   - safety: the task is taken once, and a thief takes it only while AWAKE by its own
 *     CAS (never while parked or lent);
 *   - no invalid end state but lane 0's final block.
 *
 * BROKEN selects a wrong variant, to see the checker catch it:
 *   1: a parking lane looks at its siblings before it counts itself idle (no Dekker pair)
 *   2: the producer does not nudge
 *   3: a lookout that gives up does not look at the mark and its siblings once more
 *   4: the producer does not mark the band as taking band work (lookouts never start)
 *   5: a lookout that clears the band-work mark (every ring of the band empty) does not
 *      look at the rings once more
 *
 * Band work comes and goes: a lookout that finds every sibling's ring empty clears the
 * band's mark (parked lanes then park untimed), then looks at the rings once more and
 * sets it again if a task arrived meanwhile; a stealable push reads the mark after its
 * tail CAS and sets it if clear. A lookout that finds the mark clear gives the role up
 * (as when every sibling is parked): idle, then not watching, then one more look. Lane 1 may also be woken once for a task of its own
 * (owner1), which ends its lookout: so a cleared mark is seen by lanes that park again.
 */
#ifndef BROKEN
#define BROKEN 0
#endif

#define AWAKE  0
#define PARKED 1
#define N      3

byte sleeping[N];    /* lane.c: lane->sleeping */
byte tail = 0;       /* stealable tasks lane 0 ever queued */
byte head = 0;       /* ... taken (by anyone) */
byte idle = 0;       /* pool->watch[band].idle */
byte watching = 0;   /* pool->watch[band].watching */
byte takes = 0;      /* how many times the one task was taken */
byte band_work = 0;  /* pool->watch[band].band_work: set by a stealable push, cleared
                        by a lookout that finds the band's rings empty */

/* sibling_awake(me): any other lane not parked, or with work queued */
#define OTHERS_AWAKE(me) \
  ((me != 0 && (sleeping[0] != PARKED || tail > head)) || \
   (me != 1 && sleeping[1] != PARKED) || (me != 2 && sleeping[2] != PARKED))

/* wake_if_parked(l): true if it woke it */
inline wake_if_parked(l, woke) {
  atomic { if :: sleeping[l] == PARKED -> sleeping[l] = AWAKE; woke = true :: else -> woke = false fi }
}

/* nudge_band(from lane 0): wake an idle lane when nobody looks out */
inline nudge(w, i, woke) {
  w = watching;
  i = idle;
  if
  :: BROKEN != 2 && w == 0 && i > 0 ->
     wake_if_parked(1, woke);
     if :: !woke -> wake_if_parked(2, woke) :: else -> skip fi
  :: else -> skip
  fi
}

proctype producer() {
  bool woke;
  wake_if_parked(0, woke)   /* a task of lane 0's own arrives */
}

proctype owner1() {
  bool woke;
  wake_if_parked(1, woke)   /* a task of lane 1's own arrives (at most once) */
}

proctype lane0() {
  byte w, i;
  bool woke;
  sleeping[0] == AWAKE;     /* woken: runs the task */
  tail++;                   /* it submits band work to its own lane, LOCAL */
  if :: BROKEN != 4 && band_work == 0 -> band_work = 1 :: else -> skip fi
  nudge(w, i, woke);        /* the push woke no one: lane 0 is not parked */
end_blocked:
  false                     /* ... and blocks forever */
}

proctype idler(byte me) {
  bool watch, bw, must_steal = false;
loop:
  /* lane_loop: own ring empty; steal_stuck (the watched sibling is stuck) */
  if
  :: tail > head && sleeping[me] == AWAKE ->
     atomic { if :: tail > head -> head++; takes++ :: else -> skip fi };
     goto loop
  :: !must_steal -> skip    /* not seen stuck yet: spin, then park */
  :: must_steal && tail == head -> skip
  fi;
  must_steal = false;
  /* park() */
  sleeping[me] = PARKED;
  watch = false;
  if
  :: BROKEN == 1 ->
     if
     :: OTHERS_AWAKE(me) ->
        atomic { if :: watching == 0 -> watching = 1; watch = true :: else -> skip fi }
     :: else -> skip
     fi;
     if :: !watch -> idle++ :: else -> skip fi
  :: else ->
     idle++;
     if
     :: band_work && OTHERS_AWAKE(me) ->
        atomic { if :: watching == 0 -> watching = 1; watch = true :: else -> skip fi };
        if :: watch -> idle-- :: else -> skip fi
     :: else -> skip
     fi
  fi;
wait:
  if
  :: sleeping[me] == AWAKE -> goto woke
  :: watch && sleeping[me] == PARKED ->    /* the timeout fires: lookout() */
     if
     :: tail > head && sleeping[0] != PARKED ->    /* stuck, stealable head */
        atomic {
          if
          :: sleeping[me] == PARKED -> sleeping[me] = AWAKE; must_steal = true
          :: else -> skip
          fi
        }
     :: else ->
        if
        :: band_work && tail == head ->            /* every ring empty: band work ended */
           band_work = 0;
           if :: BROKEN != 5 && tail > head -> band_work = 1 :: else -> skip fi
        :: else -> skip
        fi;
        bw = band_work;
        if
        :: bw && OTHERS_AWAKE(me) -> skip          /* keep looking */
        :: else ->       /* band work over, or every sibling parked: give up */
           idle++;
           watching = 0;
           watch = false;
           bw = band_work;
           if
           :: BROKEN != 3 && bw && OTHERS_AWAKE(me) ->
              atomic { if :: watching == 0 -> watching = 1; watch = true :: else -> skip fi };
              if :: watch -> idle-- :: else -> skip fi
           :: else -> skip
           fi
        fi
     fi;
     goto wait
  fi;
woke:
  if
  :: watch -> watching = 0  /* (its nudge of a replacement is left out: it only adds wakes,
                               and its ping-pong needs the stuck timer to end) */
  :: else -> idle--
  fi;
  goto loop
}

init {
  atomic {
    sleeping[0] = PARKED;
    sleeping[1] = AWAKE;
    sleeping[2] = AWAKE;
    if :: band_work = 1 :: skip fi;  /* the band may have had band work before */
    run producer();
    run owner1();
    run lane0();
    run idler(1);
    run idler(2)
  }
}

ltl stolen { <> (head == 1) }
ltl once { [] (takes <= 1) }
