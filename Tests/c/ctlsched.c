/*
 * ctlsched.c - the controlled scheduler (see ctlsched.h). Test builds only: it is linked
 * into Tests/c/sched_test.c, never into the library; the library's side is the hook
 * in inject.c.
 */
#define _GNU_SOURCE
#include "ctlsched.h"
#include "inject.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_THREADS 64
#define MAX_DEPTH   8

enum { RUNNABLE = 1, FREE, GONE };

typedef struct {
  int state;
  int last_point;   /* for sched_dump */
  bool spinning;    /* spun since the last step of a thread that does not spin */
  bool waited;      /* FREE, and a decision already waited for it in vain since the last wake */
  bool joining;     /* FREE in a join: only a thread's exit brings it back */
  const void *word; /* FREE in a futex or condvar wait on this: a wake of it brings it back */
  bool scenario;
  char name[16];
  int64_t prio;
  uint64_t key; /* from the seed and the thread's name: the order of candidates */
  pthread_cond_t cv;
} slot_t;

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wd_cv;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static _Atomic bool active;
static uint64_t run_id; /* [m] every field below too */
static sched_strategy strategy;
static uint64_t rng, run_seed;
static uint32_t spawned_count;
static uint32_t depth;
static uint64_t change[MAX_DEPTH];
static slot_t slots[MAX_THREADS];
static uint32_t nslots, expected, arrived, overflow;
static bool open_gate;
static int current = -1;
static uint64_t step, fallbacks, turn_since_ns, watchdog_ns;
/* The thread given the turn has woken and runs: only then does the watchdog time it (a
 * thread the kernel has not woken yet on a loaded machine must not lose its turn). */
static bool taken;
static bool trace; /* LANEPOOL_SCHED_TRACE=1: every decision to stderr */
/* A decision put off for a free thread that may come back (see hand_on). */
static bool pending;
static int pending_exclude;
static uint64_t pending_deadline, patience_ns, waits, vain;
/* Wakes of a word no known thread waits on: threads that blocked before the run began
 * (parked lanes) and will show up for the first time. */
static uint32_t strangers;
/* Fairness: a thread picked `starve_steps` times in a row while another runnable thread
 * that does not spin was passed over is preempted once, as if at a spin (a real
 * kernel would run the other one). A busy-wait without a LANEPOOL__AT_SPIN mark (a lane
 * looping on a band queue whose head cell is claimed but not yet published) would
 * otherwise keep the turn forever once PCT's change points have passed, starving the
 * producer it waits for: an unfair schedule no OS makes. Runs that do not busy-wait
 * never pass anyone over more than ~70 times in a row.
 * LANEPOOL_SCHED_STARVE_STEPS (default 1000; 0: off). */
static uint64_t starve_steps, starve_len, preempts;
static int starve_owner;
static const char *point_name(int p);

static __thread uint64_t my_run;
static __thread int my_slot;
static __thread bool my_scenario;

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t next_random(void) { /* splitmix64 */
  uint64_t z = (rng += UINT64_C(0x9E3779B97F4A7C15));
  z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
  z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
  return z ^ (z >> 31);
}

const char *sched_strategy_name(sched_strategy s) { return s == SCHED_PCT ? "pct" : "random"; }

/* The runnable thread to run next: PCT's highest priority, or a uniform pick. Threads
 * that have spun (they wait for another) since the last step of a thread that does
 * not spin come only when no other can run, and the one that has just spun
 * (`exclude`) last: with two spinners above the thread they wait for, passing the
 * turn between them would go on forever. -1: nobody. */
/* Candidates in the order of their keys, not of their arrival (which the kernel
 * decides): a replay then makes the same choices among the same threads. */
static void add_sorted(int *cand, int *n, int i) {
  int at = (*n)++;
  while (at > 0 && slots[cand[at - 1]].key > slots[i].key) {
    cand[at] = cand[at - 1];
    at--;
  }
  cand[at] = i;
}

static int pick(int exclude) {
  int cand[MAX_THREADS], n = 0;
  for (int pass = 0; pass < 2 && n == 0; pass++)
    for (uint32_t i = 0; i < nslots; i++)
      if (slots[i].state == RUNNABLE && (int)i != exclude && slots[i].spinning == (pass == 1))
        add_sorted(cand, &n, (int)i);
  if (n == 0) return exclude >= 0 && slots[exclude].state == RUNNABLE ? exclude : -1;
  if (strategy == SCHED_RANDOM) return cand[next_random() % (uint64_t)n];
  int best = cand[0];
  for (int i = 1; i < n; i++)
    if (slots[cand[i]].prio > slots[best].prio) best = cand[i];
  return best;
}

/* A free thread the strategy would rather run than `n` (a runnable one, or -1), and
 * that may be about to come back: -1 if none. PCT: the free thread of highest
 * priority above n's; random walk: a uniform pick over runnable and free threads
 * that falls on a free one. Only threads not yet waited for in vain since the last
 * wake-up (LANEPOOL__AT_UNBLOCK, a thread's exit) count. */
static int free_rather(int n) {
  int cand[MAX_THREADS], k = 0, runnable = 0;
  for (uint32_t i = 0; i < nslots; i++) {
    runnable += slots[i].state == RUNNABLE;
    if (slots[i].state == FREE && !slots[i].waited) add_sorted(cand, &k, (int)i);
  }
  if (k == 0) return -1;
  if (strategy == SCHED_RANDOM) {
    uint64_t r = next_random() % (uint64_t)(runnable + k);
    return r < (uint64_t)runnable ? -1 : cand[r - (uint64_t)runnable];
  }
  int best = -1;
  for (int i = 0; i < k; i++)
    if ((n < 0 || slots[cand[i]].prio > slots[n].prio) &&
        (best < 0 || slots[cand[i]].prio > slots[best].prio))
      best = cand[i];
  return best;
}

/* Caller holds m and has just given the turn up (or nobody had it). A thread that
 * blocked in the kernel runs free and comes back at its next point: if the strategy
 * prefers one that may come back (a wake-up happened since it blocked), the decision
 * waits for it up to patience_ns (the watchdog then decides without it): without
 * this, a thread woken from a join or a futex would always lose to whatever was
 * runnable at that instant, and the low-priority side of a race would always win. */
static void hand_on_now(int exclude, bool patient) {
  current = -1;
  pending = false;
  if (!open_gate) return;
  int n = pick(exclude);
  /* A thread not seen yet was woken (strangers): any decision before it shows up
   * would depend on when the kernel runs it. */
  bool newcomer = patient && patience_ns && strangers > 0;
  int w = patient && patience_ns && !newcomer ? free_rather(n) : -1;
  if (w >= 0 || newcomer) {
    if (trace)
      fprintf(stderr, "sched: waiting for %s\n", w >= 0 ? slots[w].name : "a woken newcomer");
    pending = true;
    pending_exclude = exclude;
    pending_deadline = now_ns() + patience_ns;
    waits++;
    pthread_cond_signal(&wd_cv);
    return;
  }
  if (n < 0) return;
  step++;
  bool passed_over = false;
  for (uint32_t i = 0; i < nslots && !passed_over; i++)
    passed_over = (int)i != n && slots[i].state == RUNNABLE && !slots[i].spinning;
  if (n == starve_owner && passed_over) {
    starve_len++;
  } else {
    starve_owner = n;
    starve_len = 0;
  }
  current = n;
  taken = false;
  if (trace)
    fprintf(stderr, "sched: step %llu: thread %d (%s) at %s\n", (unsigned long long)step, n,
            slots[n].name, point_name(slots[n].last_point));
  pthread_cond_signal(&slots[n].cv);
}

static void hand_on(int exclude) { hand_on_now(exclude, true); }

/* A wake-up (a futex wake that woke someone, a condvar signal; or a thread's exit):
 * the free threads it may bring back are worth waiting for again. */
static void woken(bool exit, const void *word) {
  bool known = false;
  for (uint32_t i = 0; i < nslots; i++)
    if (exit ? slots[i].joining : slots[i].state == FREE && slots[i].word == word) {
      slots[i].waited = false;
      known = true;
    }
  if (!exit && !known) strangers++;
}

/* This thread's slot in the current run, registering it on its first point. */
static int self(void) {
  if (my_run == run_id) return my_slot;
  if (nslots == MAX_THREADS) {
    overflow++;
    return -1;
  }
  int i = (int)nslots++;
  slots[i].state = FREE;
  slots[i].spinning = false;
  slots[i].scenario = my_scenario;
  pthread_getname_np(pthread_self(), slots[i].name, sizeof slots[i].name);
  /* Initial PCT priorities are above every change point's (which are 0..depth-2). */
  /* The priority and the key come from the seed and the name (lanes and the timer
   * thread are named by the pool, scenario threads by sched_spawn), not from the
   * order in which threads show up. */
  uint64_t h = run_seed ^ UINT64_C(0xcbf29ce484222325);
  for (const char *c = slots[i].name; *c; c++) h = (h ^ (uint8_t)*c) * UINT64_C(0x100000001b3);
  h ^= h >> 29;
  h *= UINT64_C(0xBF58476D1CE4E5B9);
  h ^= h >> 32;
  slots[i].key = h;
  slots[i].prio = (int64_t)(depth + 1 + (h >> 8));
  my_run = run_id;
  my_slot = i;
  if (my_scenario && ++arrived == expected) open_gate = true;
  if (strangers) strangers--;
  return i;
}

void sched_point(int point) { sched_point_on(point, NULL); }

void sched_point_on(int point, const void *word) {
  if (!atomic_load_explicit(&active, memory_order_acquire)) return;
  pthread_mutex_lock(&m);
  int me = atomic_load_explicit(&active, memory_order_relaxed) ? self() : -1;
  if (me < 0) {
    pthread_mutex_unlock(&m);
    return;
  }
  slot_t *s = &slots[me];
  int before = s->last_point;
  s->last_point = point;
  bool mine = current == me;
  switch (point) {
  case LANEPOOL__AT_SPILL:
  case LANEPOOL__AT_TIMER_FIRE: /* inside a lock: never switch here */
    if (mine) turn_since_ns = now_ns();
    break;
  case LANEPOOL__AT_UNBLOCK:
    woken(false, word);
    if (mine) turn_since_ns = now_ns();
    break;
  case LANEPOOL__AT_BLOCK:
  case LANEPOOL__AT_EXIT:
    s->state = point == LANEPOOL__AT_EXIT ? GONE : FREE;
    s->waited = true; /* worth waiting for only after a wake-up */
    s->joining = before == LANEPOOL__AT_JOIN;
    s->word = word;
    if (point == LANEPOOL__AT_EXIT) woken(true, NULL); /* a joiner may come back */
    if (mine || current < 0) hand_on(-1);
    break;
  default: {
    int exclude = point == LANEPOOL__AT_SPIN ? me : -1;
    if (exclude < 0 && mine && starve_steps && starve_len >= starve_steps) {
      exclude = me; /* preempted: see starve_steps */
      preempts++;
      if (trace)
        fprintf(stderr, "sched: preempt: thread %d (%s) at %s\n", me, s->name, point_name(point));
    }
    s->state = RUNNABLE;
    if (mine && strategy == SCHED_PCT)
      for (uint32_t j = 0; j + 1 < depth; j++)
        if (change[j] == step) {
          s->prio = (int64_t)(depth - 2 - j); /* below every initial one */
          if (trace)
            fprintf(stderr, "sched: change point: thread %d (%s) at %s drops\n", me, s->name,
                    point_name(point));
        }
    /* A step of a thread that does not spin may be what the spinners wait for: they
     * compete again by priority (a spinner is passed over only until then). */
    if (exclude < 0)
      for (uint32_t i = 0; i < nslots; i++) slots[i].spinning = false;
    s->spinning = exclude >= 0;
    if (mine || current < 0) hand_on(exclude);
    while (atomic_load_explicit(&active, memory_order_relaxed) && current != me)
      pthread_cond_wait(&s->cv, &m);
    if (current == me) {
      taken = true;
      turn_since_ns = now_ns();
    }
  }
  }
  pthread_mutex_unlock(&m);
}

/* The watchdog: a thread holding the turn that reaches no point for watchdog_ns loses it. */
static void *watchdog(void *arg) {
  (void)arg;
  pthread_mutex_lock(&m);
  for (;;) {
    struct timespec ts;
    uint64_t period = watchdog_ns / 4 ? watchdog_ns / 4 : 250000;
    uint64_t at = now_ns() + period;
    if (pending && pending_deadline < at) at = pending_deadline;
    ts.tv_sec = (time_t)(at / 1000000000u);
    ts.tv_nsec = (long)(at % 1000000000u);
    pthread_cond_timedwait(&wd_cv, &m, &ts);
    if (!atomic_load_explicit(&active, memory_order_relaxed) || !open_gate) continue;
    if (pending && current < 0 && now_ns() >= pending_deadline) { /* nobody came back */
      vain++;
      strangers = 0;
      for (uint32_t i = 0; i < nslots; i++)
        if (slots[i].state == FREE) slots[i].waited = true;
      hand_on_now(pending_exclude, false);
      continue;
    }
    if (current >= 0 && taken && now_ns() - turn_since_ns >= watchdog_ns) {
      if (trace)
        fprintf(stderr, "sched: fallback: thread %d (%s) ran %s past %s\n", current,
                slots[current].name, "4 ms", point_name(slots[current].last_point));
      slots[current].state = FREE;
      slots[current].waited = true;
      fallbacks++;
      hand_on(-1);
    }
  }
  return NULL;
}

static void init_once(void) {
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&wd_cv, &ca);
  pthread_condattr_destroy(&ca);
  for (int i = 0; i < MAX_THREADS; i++) pthread_cond_init(&slots[i].cv, NULL);
  pthread_t t;
  if (pthread_create(&t, NULL, watchdog, NULL) != 0) abort();
  pthread_detach(t);
}

void sched_begin(uint64_t seed, sched_strategy strat, uint32_t pct_depth, uint32_t pct_steps,
                 uint32_t expected_threads, uint32_t watchdog_us) {
  pthread_once(&once, init_once);
  pthread_mutex_lock(&m);
  run_id++;
  strategy = strat;
  rng = seed * UINT64_C(0x2545F4914F6CDD1D) + (strat == SCHED_PCT ? 1 : 2);
  run_seed = rng;
  spawned_count = 0;
  depth = pct_depth < 1 ? 1 : pct_depth > MAX_DEPTH ? MAX_DEPTH : pct_depth;
  for (uint32_t j = 0; j + 1 < depth; j++)
    change[j] = 1 + next_random() % (pct_steps ? pct_steps : 1);
  const char *force = getenv("LANEPOOL_SCHED_CHANGE"); /* debugging: the first change point */
  if (force && depth > 1) change[0] = (uint64_t)atoll(force);
  nslots = arrived = overflow = 0;
  expected = expected_threads;
  open_gate = expected == 0;
  current = -1;
  step = fallbacks = waits = vain = preempts = 0;
  starve_owner = -1;
  starve_len = 0;
  const char *ss = getenv("LANEPOOL_SCHED_STARVE_STEPS");
  starve_steps = ss ? (uint64_t)atoll(ss) : 1000;
  strangers = 0;
  pending = false;
  const char *pe = getenv("LANEPOOL_SCHED_PATIENCE_US");
  patience_ns = (uint64_t)(pe ? atoi(pe) : 300) * 1000u;
  trace = getenv("LANEPOOL_SCHED_TRACE") != NULL;
  watchdog_ns = (uint64_t)(watchdog_us ? watchdog_us : 4000) * 1000u;
  atomic_store(&active, true);
  pthread_mutex_unlock(&m);
  lanepool__inject_set_scheduler(sched_point_on);
}

void sched_end(sched_stats *out) {
  pthread_mutex_lock(&m);
  atomic_store(&active, false);
  for (uint32_t i = 0; i < nslots; i++) pthread_cond_broadcast(&slots[i].cv);
  current = -1;
  pending = false;
  if (out) *out = (sched_stats){step, fallbacks, waits, vain, nslots, overflow};
  pthread_mutex_unlock(&m);
  lanepool__inject_set_scheduler(NULL);
}

static const char *const point_names[] = {
    "claim_publish", "close_discard", "park",  "wake",    "timer_fire", "fork",
    "drain_scan",    "cancel",        "spill", "lend",    "escalate",   "quiescent",
    "join_wait",     "calls_scan",    "state", "counter", "join",       "timer_heap",
    "default",       "intake",        "free",  "spin",    "block",      "resume",
    "exit",          "unblock"};
_Static_assert(sizeof point_names / sizeof point_names[0] == LANEPOOL__AT_COUNT, "point names");

static const char *point_name(int p) {
  return p >= 0 && p < LANEPOOL__AT_COUNT ? point_names[p] : "?";
}

void sched_dump(int fd) { /* from a signal handler at the end: no lock, best effort */
  char line[160];
  int len =
      snprintf(line, sizeof line, "sched: step %llu, turn: %d, fallbacks %llu, preempts %llu\n",
               (unsigned long long)step, current, (unsigned long long)fallbacks,
               (unsigned long long)preempts);
  ssize_t ignored = write(fd, line, (size_t)len);
  static const char *const states[] = {"?", "runnable", "free", "gone"};
  for (uint32_t i = 0; i < nslots && i < MAX_THREADS; i++) {
    int p = slots[i].last_point;
    len = snprintf(line, sizeof line, "  thread %u %-15s %s%s, last point %s\n", i, slots[i].name,
                   states[slots[i].state & 3], slots[i].scenario ? " (scenario)" : "",
                   p >= 0 && p < LANEPOOL__AT_COUNT ? point_names[p] : "?");
    ignored = write(fd, line, (size_t)len);
  }
  (void)ignored;
}

typedef struct {
  void *(*fn)(void *);
  void *arg;
  unsigned index;
} spawn_args;

static void *spawned(void *p) {
  spawn_args a = *(spawn_args *)p;
  free(p);
  char name[16];
  snprintf(name, sizeof name, "scenario-%u", a.index);
  pthread_setname_np(pthread_self(), name);
  my_scenario = true;
  sched_point(LANEPOOL__AT_RESUME); /* registers, waits for the gate and its turn */
  void *r = a.fn(a.arg);
  sched_point(LANEPOOL__AT_EXIT);
  my_scenario = false;
  return r;
}

int sched_spawn(pthread_t *thread, void *(*fn)(void *), void *arg) {
  spawn_args *a = malloc(sizeof *a);
  if (!a) return -1;
  pthread_mutex_lock(&m);
  *a = (spawn_args){fn, arg, spawned_count++};
  pthread_mutex_unlock(&m);
  int rc = pthread_create(thread, NULL, spawned, a);
  if (rc) free(a);
  return rc;
}
