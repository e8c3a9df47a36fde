/*
 * take.pml - who takes a marked (stealable) ring cell (Sources/CLanePool/ring.h,
 * "Stealing" and "Rescue out of order"), for spin. One cell, published marked, at the
 * head of its ring. Three takers race for it:
 *   - the owner (lanepool__ring_pop): reads the cell's seq; marked: CAS head past it,
 *     then lanepool__ring_take; claimed by the rescuer: CAS head past it, wait for READ,
 *     free it;
 *   - a thief (lanepool__ring_steal): claimed by the rescuer: CAS head past it, wait
 *     for READ and free it (lanepool__ring_pass_rescued); marked: CAS head past it,
 *     then ring_take;
 *   - the rescue lane (lanepool__ring_rescue_at): CAS seq marked -> TAKEN, read the
 *     task, store TAKEN | READ; it never moves head.
 * ring_take reads the task; if the rescue lane is looking (`rescuing`, read after the
 * CAS on head), it claims the task with a CAS of seq from marked to free, and if that
 * fails (the rescuer claimed it) waits for READ and frees the cell without running the
 * task; if not, it reads seq once more (a look that has ended may have claimed the
 * cell) and frees the cell with a store if it is still marked. The rescue lane sets `rescuing` before
 * it reads head, and claims the cell only if head has not moved past it. Once the cell
 * is free, the next lap's producer writes a new task into it. Every step is one atomic
 * operation of the C code (all seq_cst where the Dekker pair needs it).
 *
 * Checked (model/check-take):
 *   - the task runs exactly once (runs == 1 once everyone is done);
 *   - the one who runs it read it before anyone wrote the next lap's task into the cell;
 *   - nobody waits forever (no invalid end state) and the cell ends up free.
 *
 * Left out: other cells and laps (that frees can come out of order, which a batch push
 * must allow for, is ring_test's "push_n_claims_only_free_cells"), the producer's own
 * seq store (the next lap is only its write of the task), memory order (spin runs every
 * step in one global order; the C code's release/acquire pairs are named in ring.h),
 * and busy waits: the owner's look at a claimed cell repeats while the rescuer has not
 * read it, which a safety run does not report if it never ends.
 *
 * BROKEN selects a wrong variant, to see the checker catch it:
 *   1: ring_take frees a marked cell with a plain store, not a CAS from marked
 *   2: the rescuer stores READ before it reads the task
 *   3: the owner frees a cell the rescuer claimed without waiting for READ
 *   4: the rescuer checks for marked, then stores TAKEN (no CAS)
 *   5: the rescuer does not look at head after setting `rescuing`
 *   6: a head taker reads `rescuing` before its CAS on head
 *   7: a head taker that reads `rescuing` 0 frees the cell without looking at seq again
 *      (the first version of the C code: this model found it)
 */
#ifndef BROKEN
#define BROKEN 0
#endif

#define MARKED 1   /* (pos + 1) | SEQ_STEAL: published, stealable */
#define TAKEN  2   /* ... | SEQ_TAKEN: the rescuer claimed it */
#define READ   3   /* ... | SEQ_TAKEN | SEQ_READ: and has read it */
#define FREE   4   /* pos + capacity: free for the next lap */

byte seq = MARKED;
bit head = 0;      /* 0: the cell is the head; 1: head has moved past it */
bit content = 0;   /* 0: this lap's task; 1: the next lap's producer wrote the cell */
byte runs = 0;     /* times the task ran */
byte done = 0;     /* takers that finished */
bit rescuing = 0;  /* ring->rescuing */

/* ring_take after a won CAS on head (`looking`: rescuing as read by a broken variant
 * before that CAS): read; with the rescuer looking, claim by CAS from MARKED to FREE. */
inline take(looking) {
  got = content;                                  /* out->fn, ctx, arg = slot->... */
  if
  :: BROKEN == 6 -> r = looking
  :: else -> r = rescuing                         /* after the CAS on head */
  fi;
  if
  :: BROKEN == 1 -> atomic { seq = FREE; claimed = true }
  :: BROKEN != 1 && r == 0 ->                     /* a load, then a store: no claim */
     if
     :: BROKEN != 7 && seq != MARKED -> claimed = false   /* a look that has ended claimed it */
     :: else -> seq = FREE; claimed = true
     fi
  :: BROKEN != 1 && r == 1 -> atomic { if :: seq == MARKED -> seq = FREE; claimed = true
                                        :: else -> claimed = false fi }
  fi;
  if
  :: claimed -> assert(got == 0); runs++
  :: else -> seq == READ; seq = FREE              /* lanepool__ring_free_rescued */
  fi
}

proctype owner() {
  byte s; bit got, r, early; bool won, claimed;
  do
  :: head == 1 -> break                           /* a thief took it: nothing here */
  :: else ->
     s = seq;
     if
     :: s == MARKED ->
        early = rescuing;
        atomic { if :: head == 0 -> head = 1; won = true :: else -> won = false fi };
        if :: won -> take(early); break :: else -> skip fi
     :: s == TAKEN || s == READ ->                /* the rescue lane took it */
        atomic { if :: head == 0 -> head = 1; won = true :: else -> won = false fi };
        if
        :: won ->
           if :: BROKEN != 3 -> seq == READ :: else -> skip fi;
           seq = FREE; break
        :: else -> skip
        fi
     :: else -> skip                              /* FREE: someone else moved past it */
     fi
  od;
  done++
}

proctype thief() {
  byte s; bit got, r, early; bool won = false, claimed;
  if
  :: head == 0 ->
     s = seq;
     if
     :: s == MARKED ->
        early = rescuing;
        atomic { if :: head == 0 -> head = 1; won = true :: else -> skip fi };
        if :: won -> take(early) :: else -> skip fi
     :: s == TAKEN || s == READ ->                /* lanepool__ring_pass_rescued */
        atomic { if :: head == 0 -> head = 1; won = true :: else -> skip fi };
        if :: won -> seq == READ; seq = FREE :: else -> skip fi
     :: else -> skip
     fi
  :: else -> skip
  fi;
  done++
}

proctype rescuer() {
  bit got; bool claimed = false, behind = true;
  rescuing = 1;                                   /* lanepool__ring_rescue_begin */
  if :: BROKEN != 5 -> behind = head == 0 :: else -> skip fi;
  if
  :: !behind -> skip                              /* head moved past it: not the rescuer's */
  :: behind && BROKEN == 4 -> if :: seq == MARKED -> seq = TAKEN; claimed = true :: else -> skip fi
  :: behind && BROKEN != 4 -> atomic { if :: seq == MARKED -> seq = TAKEN; claimed = true :: else -> skip fi }
  fi;
  if
  :: claimed ->
     if
     :: BROKEN == 2 -> seq = READ; got = content
     :: BROKEN != 2 -> got = content; seq = READ
     fi;
     assert(got == 0); runs++
  :: else -> skip
  fi;
  rescuing = 0;                                   /* lanepool__ring_rescue_end */
  done++
}

/* The next lap: a producer writes the cell once it is free. */
proctype producer() {
  seq == FREE;
  content = 1
}

init {
  atomic { run owner(); run thief(); run rescuer(); run producer() };
  done == 3;
  seq == FREE;                                    /* the producer may or may not have written */
  assert(runs == 1)
}
