/*
 * band.c - a band's OS treatment for threads LanePool does not own
 * (lanepool_thread_enter_band / lanepool_thread_restore), and escalation: a lane runs
 * at the band of the highest caller waiting on it (docs/priorities.md, "Escalation").
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "internal.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Set by lanepool_thread_enter_band, put back by lanepool_thread_restore. */
__thread int lanepool__thread_band;
/* The tid this thread had when it last entered a band: in a fork child, the copy of the
 * forking thread still has its parent's here, and may restore the tokens it holds. */
static __thread pid_t entered_as;

#ifdef LANEPOOL_TEST_HOOKS
_Atomic(lanepool__test_point_fn) lanepool__test_point;
#endif

static bool is_rt(int policy) { return policy == SCHED_FIFO || policy == SCHED_RR; }

/* The first error of several steps. */
static void keep(int *first, int e) {
  if (e && !*first) *first = e;
}

static int record(lanepool_applied_t *a, int64_t requested, int64_t got, int error) {
  a->requested = requested;
  a->got = got;
  a->error = error;
  return error;
}

int lanepool_thread_enter_band_sized(lanepool_qos_t qos, unsigned flags,
                                     lanepool_band_token_t *out) {
  int b = lanepool_band_index(qos);
  if (b < 0 || !out || (flags & ~LANEPOOL_BAND_STRICT) ||
      !lanepool__size_accepted(out->struct_size, sizeof *out))
    return EINVAL;
  pid_t tid = (pid_t)syscall(SYS_gettid);
  lanepool_lane_t *cur = lanepool__current;
  if (cur && atomic_load_explicit(&cur->tid, memory_order_relaxed) == (int)tid) return EBUSY;
  int saved_errno = errno;
  lanepool_band_policy_t p = {.struct_size = sizeof p};
  (void)lanepool_default_policy_sized(qos, &p);

  lanepool_band_token_t t;
  memset(&t, 0, sizeof t); /* padding too: the caller gets these bytes */
  t.struct_size = out->struct_size;
  t.tid = tid;
  t.qos = qos;
  /* What restore puts back. */
  int policy = sched_getscheduler(0);
  struct sched_param sp = {0};
  (void)sched_getparam(0, &sp);
  t.saved_sched = policy; /* with SCHED_RESET_ON_FORK, which every request below keeps */
  const int keep = policy & SCHED_RESET_ON_FORK;
  entered_as = tid;
  t.saved_rt_priority = sp.sched_priority;
  t.saved_nice = lanepool__get_nice(0);
  t.saved_ioprio = lanepool__get_ioprio(tid);
  t.saved_timer_slack = lanepool__get_slack();
  lanepool__sched_attr attr;
  t.saved_slice = lanepool__get_attr(0, &attr) == 0 ? attr.sched_runtime : 0;
  t.saved_band = lanepool__thread_band;

  /* The undo rule (see the header): may this thread lower its nice back to now? */
  bool may_come_back = t.saved_nice >= lanepool__nice_floor() || lanepool__has_cap_sys_nice();
  int refused = 0;

  /* 1. Policy. SCHED_IDLE is left only under the nice rule: withheld (BATCH instead)
   *    when the thread could not leave it again. Real-time is not in the default table. */
  int want_sched = (int)p.sched;
  int err = 0;
  if (want_sched == LANEPOOL_SCHED_IDLE && (policy & ~keep) != SCHED_IDLE && !may_come_back) {
    err = EPERM;
    want_sched = LANEPOOL_SCHED_BATCH;
  }
  if (want_sched != (policy & ~keep) || p.rt_priority != t.saved_rt_priority) {
    int e = lanepool__set_sched(0, want_sched | keep, p.rt_priority);
    if (!err) err = e;
  }
  refused |= record(&t.sched, p.sched, sched_getscheduler(0) & ~SCHED_RESET_ON_FORK, err);

  /* 2. Nice. Raising it is withheld when the thread could not come back; lowering it,
   *    when refused, goes as low as permitted (never below the request). */
  err = 0;
  if (p.nice > t.saved_nice && !may_come_back) {
    err = EPERM;
  } else if (p.nice != t.saved_nice) {
    err = lanepool__set_nice(0, p.nice);
    if (err) lanepool__nice_as_permitted(0, p.nice, t.saved_nice);
  }
  refused |= record(&t.nice, p.nice, lanepool__get_nice(0), err);

  /* 3. I/O priority: best-effort levels are open to every thread both ways. */
  if (p.ioprio_class == LANEPOOL_IOPRIO_NONE) {
    record(&t.ioprio, -1, t.saved_ioprio, 0);
  } else {
    int value = lanepool__ioprio_value((int)p.ioprio_class, p.ioprio_level);
    err = lanepool__set_ioprio(0, value);
    refused |= record(&t.ioprio, value, lanepool__get_ioprio(tid), err);
  }

  /* 4. Timer slack. */
  if (p.timer_slack_ns == 0) {
    record(&t.timer_slack, -1, (int64_t)t.saved_timer_slack, 0);
  } else {
    err = lanepool__set_slack(p.timer_slack_ns);
    refused |=
        record(&t.timer_slack, (int64_t)p.timer_slack_ns, (int64_t)lanepool__get_slack(), err);
  }

  /* 5. Slice, after nice (sched_setattr carries the policy and nice it reads). */
  if (p.slice_ns == 0) {
    record(&t.slice, -1, (int64_t)t.saved_slice, 0);
  } else {
    err = lanepool__set_slice(0, p.slice_ns);
    refused |= record(&t.slice, (int64_t)p.slice_ns,
                      lanepool__get_attr(0, &attr) == 0 ? (int64_t)attr.sched_runtime : -1, err);
  }
  t.saved_flags = flags;

  if (refused && (flags & LANEPOOL_BAND_STRICT)) {
    (void)lanepool_thread_restore(&t);
    errno = saved_errno;
    return EPERM;
  }
  lanepool__thread_band = b + 1;
  memcpy(out, &t, t.struct_size);
  errno = saved_errno;
  return 0;
}

int lanepool_thread_restore(const lanepool_band_token_t *token) {
  if (!token || !lanepool__size_accepted(token->struct_size, sizeof *token)) return EINVAL;
  /* The thread that entered, or its copy in a fork child (the forking thread's copy has
   * its thread-locals, and another tid). */
  if (token->tid != (pid_t)syscall(SYS_gettid) && token->tid != entered_as) return EINVAL;
  int saved_errno = errno;
  int first = 0; /* the first error */
  /* The order of entering: policy (which resets a custom slice), nice, I/O priority,
   * timer slack, slice. Only what entering asked for is put back. */
  int policy = sched_getscheduler(0);
  struct sched_param sp = {0};
  (void)sched_getparam(0, &sp);
  if (policy != token->saved_sched || sp.sched_priority != token->saved_rt_priority)
    keep(&first, lanepool__set_sched(0, token->saved_sched, token->saved_rt_priority));
  if (lanepool__get_nice(0) != token->saved_nice)
    keep(&first, lanepool__set_nice(0, token->saved_nice));
  if (token->ioprio.requested != -1 && lanepool__get_ioprio(0) != token->saved_ioprio)
    keep(&first, lanepool__set_ioprio(0, token->saved_ioprio));
  if (lanepool__get_slack() != token->saved_timer_slack)
    keep(&first, lanepool__set_slack(token->saved_timer_slack));
  if (token->slice.requested != -1 && token->saved_slice != 0) {
    lanepool__sched_attr attr;
    int e = lanepool__get_attr(0, &attr);
    if (!e && attr.sched_runtime != token->saved_slice)
      e = lanepool__set_slice(0, token->saved_slice);
    keep(&first, e);
  }
  lanepool__thread_band = token->saved_band;
  errno = saved_errno;
  return first;
}

/* ---- escalation (docs/priorities.md, "The protocol"): a waiter counts itself in
 * boost_waiting[its band] and the lane's thread is set to the highest band counted. */

/* 0 unknown, 1 on, 2 off (LANEPOOL_ESCALATION=0). */
static _Atomic int escalation;

bool lanepool__escalation_on(void) {
  int e = atomic_load_explicit(&escalation, memory_order_relaxed);
  if (e == 0) {
    const char *v = getenv("LANEPOOL_ESCALATION");
    e = v && strcmp(v, "0") == 0 ? 2 : 1;
    atomic_store_explicit(&escalation, e, memory_order_relaxed);
  }
  return e == 1;
}

bool lanepool__boost_join(lanepool_lane_t *lane, int band, _Atomic uint32_t *ticket) {
  if (band < 0 || (uint32_t)band >= lane->band || !lanepool__escalation_on()) return false;
  atomic_fetch_add_explicit(&lane->boost_waiting[band], 1, memory_order_relaxed);
  atomic_store_explicit(ticket, (uint32_t)band + 1, memory_order_relaxed);
  return true;
}

void lanepool__boost_drop(lanepool_lane_t *lane, uint32_t band) {
  /* A fork child (a task forked and its closure returned in the child): the lane's
   * thread id is the parent's thread; never touch it, nor a lock a parent thread held. */
  if (lanepool__forked(lane->generation)) return;
  atomic_fetch_sub_explicit(&lane->boost_waiting[band], 1, memory_order_relaxed);
  lanepool__boost_update(lane);
}

void lanepool__boost_leave(lanepool_lane_t *lane, _Atomic uint32_t *ticket) {
  uint32_t b = atomic_exchange_explicit(ticket, 0, memory_order_relaxed);
  if (b) lanepool__boost_drop(lane, b - 1);
}

/* Sets policy, nice and slice of the lane's thread `tid` in one sched_setattr, skipped
 * when band.c last gave it these very settings (lane->boost_now). [boost_lock] */
static int boost_set_sched(lanepool_lane_t *lane, pid_t tid, int policy, int rt_priority, int nice,
                           uint64_t slice_ns) {
  lanepool__boost_now *now = &lane->boost_now;
  if (is_rt(policy))
    slice_ns = 0;
  else
    rt_priority = 0;
  if (now->sched_known && now->policy == policy && now->rt_priority == rt_priority &&
      now->nice == nice && now->slice_ns == slice_ns)
    return 0;
  lanepool__sched_attr attr = {.sched_policy = (uint32_t)policy,
                               .sched_priority = (uint32_t)rt_priority,
                               .sched_nice = nice,
                               .sched_runtime = slice_ns};
  int err = lanepool__set_attr(tid, &attr);
  if (!err && is_rt(policy))
    atomic_store_explicit(&lane->reslack, 1, memory_order_relaxed);
  else if (!err && atomic_load_explicit(&lane->reslack, memory_order_relaxed) == 1)
    atomic_store_explicit(&lane->reslack, 2, memory_order_relaxed); /* out of real time */
  now->sched_known = err == 0;
  now->policy = policy;
  now->rt_priority = rt_priority;
  now->nice = nice;
  now->slice_ns = slice_ns;
  return err;
}

/* As lanepool__set_ioprio for the lane's thread, skipped likewise. [boost_lock] */
static int boost_set_ioprio(lanepool_lane_t *lane, pid_t tid, int value) {
  lanepool__boost_now *now = &lane->boost_now;
  if (now->ioprio_known && now->ioprio == value) return 0;
  int err = lanepool__set_ioprio(tid, value);
  now->ioprio_known = err == 0;
  now->ioprio = value;
  return err;
}

/* A permitted `nice` that stays weaker than a default thread of the pool (the nice its
 * default band's first lane got: the table's, shifted or clamped) and than the band
 * asked for: then only the nice drops, the thread's own policy and slice stay (never
 * worse: docs/priorities.md). */
static bool only_nice_drops(const lanepool_t *pool, int nice, int band_nice) {
  const lanepool_lane_t *dflt =
      lanepool__band_lane(pool, (uint32_t)lanepool_band_index(LANEPOOL_QOS_DEFAULT), 0);
  return nice > (int)dflt->applied.nice.got && nice > band_nice;
}

/* Without privilege, a thread at nice `cur` goes as low as RLIMIT_NICE allows (the
 * pool's lanepool__nice_floor, read once per pool), not below the band's; or stays. */
static int permitted_nice(lanepool_t *pool, int band_nice, int cur) {
  int f = atomic_load_explicit(&pool->boost_nice_floor, memory_order_relaxed);
  if (f == 0) {
    f = lanepool__nice_floor() + 64; /* 0 stays "not read yet" */
    atomic_store_explicit(&pool->boost_nice_floor, f, memory_order_relaxed);
  }
  f -= 64;
  return f < cur ? (band_nice > f ? band_nice : f) : cur;
}

/* The lane's own CPU settings (what it recorded at start: policy, nice, slice). */
static void set_own_sched(lanepool_lane_t *lane, pid_t tid) {
  (void)boost_set_sched(lane, tid, (int)lane->applied.sched.got, lane->policy.rt_priority,
                        (int)lane->applied.nice.got, lane->policy.slice_ns);
}

/* Runs the lane's thread at band `band` of its pool: the pool's policy for that band,
 * or, for the lane's own band, what the lane got when it started (its fallbacks
 * included). Without the privilege to lower nice that far: the band's policy and as low
 * a nice as permitted (never below the band's), logged once per pool.
 * A call that would change nothing is skipped (lane->boost_now, pool->boost_refused:
 * docs/priorities.md, "How long"). */
static void boost_apply(lanepool_lane_t *lane, pid_t tid, uint32_t band, char *log_line,
                        size_t log_len) {
  lanepool_t *pool = lane->pool;
  int saved_errno = errno;
  LANEPOOL__TEST_POINT("boost_apply", lane, tid);
  if (band == lane->band) {
    const lanepool__applied *own = &lane->applied;
    set_own_sched(lane, tid);
    if (own->ioprio.got >= 0) (void)boost_set_ioprio(lane, tid, (int)own->ioprio.got);
    errno = saved_errno;
    return;
  }
  const lanepool_band_policy_t *p = &pool->lanes[band * pool->lanes_per_band]->policy;
  uint32_t refused = atomic_load_explicit(&pool->boost_refused[band], memory_order_relaxed);
  int err = 0;
  if (!(refused & LANEPOOL__REFUSED_SCHED)) {
    err = boost_set_sched(lane, tid, (int)p->sched, p->rt_priority, p->nice, p->slice_ns);
    if (err == EPERM || err == EACCES)
      atomic_fetch_or_explicit(&pool->boost_refused[band], LANEPOOL__REFUSED_SCHED,
                               memory_order_relaxed);
  }
  if ((refused & LANEPOOL__REFUSED_SCHED) || err == EPERM || err == EACCES) {
    /* Unprivileged: a real-time policy becomes SCHED_OTHER; nice as permitted_nice. */
    int policy = is_rt((int)p->sched) ? SCHED_OTHER : (int)p->sched;
    int cur = lane->boost_now.sched_known ? lane->boost_now.nice : lanepool__get_nice(tid);
    int nice = permitted_nice(pool, p->nice, cur);
    if (nice >= (int)lane->applied.nice.got) {
      /* No room under RLIMIT_NICE: the lane's CPU weight cannot grow. Its own policy and
       * slice stay (the band's policy and short slice at the lane's nice made the awaited
       * work slower, not faster: docs/priorities.md, "Without privilege"); the I/O
       * priority below still applies. */
      set_own_sched(lane, tid);
    } else if (only_nice_drops(pool, nice, p->nice)) {
      int own = (int)lane->applied.sched.got;
      (void)boost_set_sched(lane, tid, own == SCHED_IDLE ? SCHED_BATCH : own, 0, nice,
                            lane->policy.slice_ns);
    } else if (boost_set_sched(lane, tid, policy, 0, nice, p->slice_ns) != 0) {
      (void)boost_set_sched(lane, tid, sched_getscheduler(tid) & ~SCHED_RESET_ON_FORK, 0, cur,
                            p->slice_ns);
    }
    uint32_t none = 0;
    if (err && pool->log &&
        atomic_compare_exchange_strong_explicit(&pool->boost_logged, &none, 1, memory_order_relaxed,
                                                memory_order_relaxed)) {
      snprintf(log_line, log_len,
               "lanepool '%s': escalation is limited: the kernel refused nice %d for lane %s "
               "(%s); boosted lanes run at nice %d, %s (RLIMIT_NICE; docs/priorities.md, "
               "Escalation)",
               pool->name, p->nice, lane->name, strerror(err), lanepool__get_nice(tid),
               lanepool__sched_name(sched_getscheduler(tid) & ~SCHED_RESET_ON_FORK));
    }
  }
  if (p->ioprio_class != LANEPOOL_IOPRIO_NONE) {
    int value = lanepool__ioprio_value((int)p->ioprio_class, p->ioprio_level);
    int be = lanepool__ioprio_value(LANEPOOL_IOPRIO_BE, p->ioprio_level);
    if (p->ioprio_class == LANEPOOL_IOPRIO_RT && (refused & LANEPOOL__REFUSED_IOPRIO)) {
      (void)boost_set_ioprio(lane, tid, be);
    } else if (boost_set_ioprio(lane, tid, value) != 0 && p->ioprio_class == LANEPOOL_IOPRIO_RT) {
      atomic_fetch_or_explicit(&pool->boost_refused[band], LANEPOOL__REFUSED_IOPRIO,
                               memory_order_relaxed);
      (void)boost_set_ioprio(lane, tid, be);
    }
  }
  errno = saved_errno;
}

/* The highest band counted, or the lane's own. [boost_lock] */
static uint32_t wanted_band(lanepool_lane_t *lane) {
  for (uint32_t b = 0; b < lane->band; b++)
    if (atomic_load_explicit(&lane->boost_waiting[b], memory_order_relaxed)) return b;
  return lane->band;
}

/* ---- the chain (docs/priorities.md, "When the chain changes") ------------------
 * A waiter on lane C that holds lane B is listed on B (under B's boost_lock, left before
 * its frame ends); a change of B's band tells it (state LANEPOOL__SYNC_REWALK unless
 * answered), and it moves its boost of C itself (sync.c, rewalk): hop by hop, with no
 * lock held across lanes. */

void lanepool__chain_listen(lanepool__sync *s) { /* (links_used is 0) */
  for (const lanepool__held *h = s->chain; h && s->links_used < LANEPOOL__CHAIN_LINKS; h = h->up) {
    /* (A fork child's copy of a lane: its lock may be a parent thread's, held.) */
    if (!h->lane || lanepool__forked(h->lane->generation)) continue;
    lanepool__chain_link *k = &s->links[s->links_used++];
    k->sync = s;
    k->lane = (lanepool_lane_t *)h->lane;
    pthread_mutex_lock(&k->lane->boost_lock);
    k->next = k->lane->chain_waiters;
    k->lane->chain_waiters = k;
    pthread_mutex_unlock(&k->lane->boost_lock);
  }
}

void lanepool__chain_unlisten(lanepool__sync *s) {
  for (uint32_t i = 0; i < s->links_used; i++) {
    lanepool__chain_link *k = &s->links[i], **p;
    pthread_mutex_lock(&k->lane->boost_lock);
    for (p = &k->lane->chain_waiters; *p != k; p = &(*p)->next) {}
    *p = k->next;
    pthread_mutex_unlock(&k->lane->boost_lock);
  }
}

/* [boost_lock] The waiters listed on `lane`: their chain's band changed. */
static void tell_chain(lanepool_lane_t *lane) {
  for (lanepool__chain_link *k = lane->chain_waiters; k; k = k->next) {
    lanepool__sync *s = k->sync;
    uint32_t pending = 0;
    /* seq_cst both ways: against the boost_band store before it and the waiter's CAS back
     * to 0 and its loads of boost_band (else a tell that saw a tell's 3 could be lost). */
    if (atomic_compare_exchange_strong_explicit(&s->state, &pending, LANEPOOL__SYNC_REWALK,
                                                memory_order_seq_cst, memory_order_seq_cst)) {
      lanepool__futex_wake(&s->state, 1);
      lanepool__wake_helpers(s->lane); /* it may be running or helping on its lane's queue */
    }
  }
}

/* ---- the carrier (docs/priorities.md, "Which thread"): a thread that holds the lane's
 * exclusion from outside is raised to the lane's band and puts itself back on giving
 * the lane up (lanepool__carrier_give). */

/* The lane of `pool` whose thread is `tid`, or NULL. */
static lanepool_lane_t *home_of(lanepool_t *pool, uint32_t tid) {
  for (uint32_t i = 0; i < lanepool__lane_total(pool); i++)
    if (pool->lanes[i] &&
        (uint32_t)atomic_load_explicit(&pool->lanes[i]->tid, memory_order_relaxed) == tid)
      return pool->lanes[i];
  return NULL;
}

/* Thread `tid`'s timer slack (/proc/<tid>/timerslack_ns; another thread's needs
 * CAP_SYS_NICE); 0 if unknown. Raw system calls: no cancellation point under a lock. */
static uint64_t slack_of(uint32_t tid) {
  char path[48], buf[32];
  snprintf(path, sizeof path, "/proc/%u/timerslack_ns", tid);
  long fd = syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  long n = syscall(SYS_read, (int)fd, buf, sizeof buf - 1);
  (void)syscall(SYS_close, (int)fd);
  if (n <= 0) return 0;
  buf[n] = '\0';
  return strtoull(buf, NULL, 10);
}

/* How strongly a thread with these settings runs: real-time above all (by priority),
 * SCHED_IDLE below all, else by nice, SCHED_OTHER above SCHED_BATCH at one nice. */
static int strength(uint32_t policy, uint32_t rt_priority, int nice) {
  if (is_rt((int)policy)) return 1000 + (int)rt_priority;
  if (policy == SCHED_IDLE) return 0;
  return (20 - nice) * 2 + (policy == SCHED_BATCH ? 1 : 2);
}

/* An I/O priority value, lower is higher: "none" is best-effort at the nice's level. */
static int ioprio_rank(int value, int nice) {
  return (value >> 13) ? value : lanepool__ioprio_value(LANEPOOL_IOPRIO_BE, (nice + 20) / 5);
}

/* Raises carrier `tid` of `lane` to band `band`, where that is above what it runs at
 * (its own lane's band, or the settings it had: a real-time policy above a normal one,
 * then a lower nice), and records it. Unprivileged: only its nice, as low as RLIMIT_NICE
 * lets (not below the band's). [boost_lock] */
static void carrier_raise(lanepool_lane_t *lane, uint32_t tid, uint32_t band) {
  lanepool_t *pool = lane->pool;
  const lanepool_band_policy_t *p = &pool->lanes[band * pool->lanes_per_band]->policy;
  lanepool__carrier *c = &lane->carrier;
  if (c->band && band + 1 >= c->band) return; /* raised that far already */
  if (!c->band) {
    lanepool__carrier fresh = {.home = home_of(pool, tid)};
    if (lanepool__get_attr((pid_t)tid, &fresh.saved) != 0) return;
    if (fresh.home) { /* at the higher of its lane's boost and a lifted job's (worker.c) */
      uint32_t at = atomic_load_explicit(&fresh.home->boost_band, memory_order_relaxed),
               lift = atomic_load_explicit(&fresh.home->lift, memory_order_relaxed);
      if (band >= (lift < at ? lift : at)) return;
    } else if (strength(p->sched, (uint32_t)p->rt_priority, p->nice) <=
               strength(fresh.saved.sched_policy, fresh.saved.sched_priority,
                        fresh.saved.sched_nice)) {
      return; /* it runs as high as the band already */
    }
    fresh.saved_ioprio = lanepool__get_ioprio((pid_t)tid);
    *c = fresh;
  }
  if (is_rt((int)p->sched) && !c->rt) c->saved_slack = slack_of(tid); /* before it is zeroed */
  lanepool__sched_attr attr = {.sched_policy = p->sched,
                               .sched_flags = c->saved.sched_flags,
                               .sched_nice = p->nice,
                               .sched_priority =
                                   is_rt((int)p->sched) ? (uint32_t)p->rt_priority : 0,
                               .sched_runtime = is_rt((int)p->sched) ? 0 : p->slice_ns};
  if (lanepool__set_attr((pid_t)tid, &attr) == 0) {
    c->rt = c->rt || is_rt((int)p->sched);
    c->sched_set = true;
  } else { /* as boost_apply, without privilege: */
    int cur = lanepool__get_nice((pid_t)tid), nice = permitted_nice(pool, p->nice, cur);
    attr.sched_policy = is_rt((int)p->sched) ? SCHED_OTHER : p->sched;
    attr.sched_priority = 0;
    attr.sched_nice = nice;
    attr.sched_runtime = p->slice_ns;
    if (nice < cur && ((!only_nice_drops(pool, nice, p->nice) && !lanepool__set_attr(tid, &attr)) ||
                       !lanepool__set_nice((pid_t)tid, nice))) /* else the nice alone */
      c->sched_set = true;
  }
  if (p->ioprio_class != LANEPOOL_IOPRIO_NONE) {
    int value = lanepool__ioprio_value((int)p->ioprio_class, p->ioprio_level);
    int now = lanepool__get_ioprio((pid_t)tid);
    int be = lanepool__ioprio_value(LANEPOOL_IOPRIO_BE, p->ioprio_level);
    int rank = now >= 0 ? ioprio_rank(now, c->saved.sched_nice) : -1;
    if (ioprio_rank(value, 0) < rank &&
        (!lanepool__set_ioprio(tid, value) ||
         (p->ioprio_class == LANEPOOL_IOPRIO_RT && ioprio_rank(be, 0) < rank &&
          !lanepool__set_ioprio(tid, be))))
      c->ioprio_set = true;
  }
  c->band = band + 1;
}

/* Looks for a carrier to raise to `want`: the holder of the lane's exclusion if that is
 * not the lane's thread. A recorded carrier is only raised, and only while it holds the
 * lane: it puts itself back. [boost_lock] */
static void carrier_sync(lanepool_lane_t *lane, uint32_t want) {
  uint32_t had = atomic_load_explicit(&lane->carried, memory_order_relaxed);
  if (had) {
    if (want < lane->band && atomic_load_explicit(&lane->excl, memory_order_seq_cst) == had)
      carrier_raise(lane, had, want);
    return;
  }
  if (want >= lane->band) return;
  /* The Dekker pair with a holder giving the lane up (lanepool__excl_release): either it
   * sees this and takes the lock to put itself back, or this sees it gone. */
  atomic_store_explicit(&lane->carried, LANEPOOL__CARRIER_LOOK, memory_order_seq_cst);
  uint32_t holder = atomic_load_explicit(&lane->excl, memory_order_seq_cst);
  if (holder && holder != LANEPOOL__EXCL_CLOSED &&
      holder != (uint32_t)atomic_load_explicit(&lane->tid, memory_order_relaxed))
    carrier_raise(lane, holder, want);
  atomic_store_explicit(&lane->carried, lane->carrier.band ? holder : 0, memory_order_seq_cst);
}

/* The lane's thread to the highest band waited for; with `refresh` (a carrier of another
 * lane giving that up), back at the band it has, nothing assumed of what it has. */
static void boost_set(lanepool_lane_t *lane, bool refresh) {
  if (lanepool__forked(lane->generation)) return; /* see lanepool__boost_drop */
  char log_line[320] = "";
  pthread_mutex_lock(&lane->boost_lock);
  uint32_t had = atomic_load_explicit(&lane->boost_band, memory_order_relaxed);
  uint32_t want = refresh ? had : wanted_band(lane);
  uint32_t lift = atomic_load_explicit(&lane->lift, memory_order_relaxed);
  uint32_t run = lift < want ? lift : want; /* the thread's: the lane's, or its job's */
  if (refresh) memset(&lane->boost_now, 0, sizeof lane->boost_now);
  if (run != lane->run_band || refresh) {
    pid_t tid = (pid_t)atomic_load_explicit(&lane->tid, memory_order_acquire);
    /* 0: not started yet, or left; a successor re-applies the boost (escalation, above). */
    if (tid) boost_apply(lane, tid, run, log_line, sizeof log_line);
    lane->run_band = run;
  }
  if (want != had) {
    atomic_store_explicit(&lane->boost_band, want, memory_order_seq_cst); /* (tell_chain) */
    LANEPOOL__TRACE(BOOST, lane, want, NULL, NULL);
    tell_chain(lane);
  }
  if (!refresh) carrier_sync(lane, want);
  pthread_mutex_unlock(&lane->boost_lock);
  /* The log line, if any, with no lock held: the callback may use the pool. */
  if (log_line[0]) lane->pool->log(LANEPOOL_LOG_WARNING, log_line, lane->pool->log_arg);
}

void lanepool__boost_update(lanepool_lane_t *lane) { boost_set(lane, false); }

uint32_t lanepool__lift_bands(const lanepool_t *pool) {
  bool cap = lanepool__has_cap_sys_nice();
  int floor = lanepool__nice_floor();
  uint32_t ok = 0;
  /* (With one lane per band, a lifted job that blocks would hold its lifter's whole band.) */
  for (uint32_t b = 0;
       b < LANEPOOL_BAND_COUNT && pool->lanes_per_band > 1 && lanepool__escalation_on(); b++) {
    const lanepool_lane_t *l = pool->lanes[b * pool->lanes_per_band];
    ok |= (uint32_t)(!l->applied.sched.error && !l->applied.nice.error &&
                     (cap || l->policy.nice >= floor))
          << b;
  }
  return ok;
}

/* A thread outside the pool that carried lanes nested (an inline closure inside an
 * inline closure) gets back the weakest settings their records saved: what it had
 * before its first raise, since raises only raise. Put back once it holds no lane. */
__thread lanepool__carrier lanepool__carrier_owed;

void lanepool__carrier_give(lanepool_lane_t *lane, uint32_t self, bool holds_more) {
  if (lanepool__forked(lane->generation)) return; /* see lanepool__boost_drop */
  lanepool__carrier c = {0}, *owed = &lanepool__carrier_owed;
  pthread_mutex_lock(&lane->boost_lock);
  if (atomic_load_explicit(&lane->carried, memory_order_relaxed) == self) {
    c = lane->carrier;
    memset(&lane->carrier, 0, sizeof lane->carrier);
    atomic_store_explicit(&lane->carried, 0, memory_order_relaxed);
    /* A holder that took the lane since was not raised: this one was recorded. */
    carrier_sync(lane, atomic_load_explicit(&lane->boost_band, memory_order_relaxed));
  }
  pthread_mutex_unlock(&lane->boost_lock);
  if (!c.sched_set && !c.ioprio_set) c.band = 0; /* a raise that changed nothing: no undo */
  if (c.band && c.home) {                        /* its own lane's band, as that lane has it now */
    boost_set(c.home, true);
    uint64_t slack = c.home->applied.timer_slack.requested != -1
                         ? (uint64_t)c.home->applied.timer_slack.got
                         : c.saved_slack;
    if (c.rt && slack) (void)lanepool__set_slack(slack);
  } else if (c.band) {
    bool had = owed->band != 0;
    if (!had || ioprio_rank(c.saved_ioprio, c.saved.sched_nice) >
                    ioprio_rank(owed->saved_ioprio, owed->saved.sched_nice))
      owed->saved_ioprio = c.saved_ioprio; /* each the weakest: what it had first */
    if (!had ||
        strength(c.saved.sched_policy, c.saved.sched_priority, c.saved.sched_nice) <
            strength(owed->saved.sched_policy, owed->saved.sched_priority, owed->saved.sched_nice))
      owed->saved = c.saved;
    if (c.rt && (!owed->rt || !owed->saved_slack)) owed->saved_slack = c.saved_slack;
    owed->rt = owed->rt || c.rt;
    owed->sched_set |= c.sched_set;
    owed->ioprio_set |= c.ioprio_set;
    owed->band = 1;
  }
  if (owed->band && !holds_more) { /* what it had: policy, RESET_ON_FORK, nice, slice */
    /* The kernel's default slice first (sched_getattr shows a slice either way): a
     * slice written back would be a custom one, no longer following the default. */
    uint64_t slice = owed->saved.sched_runtime;
    owed->saved.sched_runtime = 0;
    lanepool__sched_attr now;
    if (owed->sched_set && lanepool__set_attr(0, &owed->saved) == 0 &&
        !is_rt((int)owed->saved.sched_policy) && lanepool__get_attr(0, &now) == 0 &&
        now.sched_runtime != slice) {
      owed->saved.sched_runtime = slice;
      (void)lanepool__set_attr(0, &owed->saved);
    }
    if (owed->ioprio_set && owed->saved_ioprio >= 0)
      (void)lanepool__set_ioprio(0, owed->saved_ioprio);
    if (owed->rt && owed->saved_slack) (void)lanepool__set_slack(owed->saved_slack);
    memset(owed, 0, sizeof *owed);
  }
}

void lanepool__lane_thread_leaving(lanepool_lane_t *lane) {
  if (lanepool__forked(lane->generation)) return; /* see lanepool__boost_drop */
  /* Under boost_lock: an update that read the old tid has finished with it. */
  pthread_mutex_lock(&lane->boost_lock);
  atomic_store_explicit(&lane->tid, 0, memory_order_release);
  memset(&lane->boost_now, 0, sizeof lane->boost_now);
  pthread_mutex_unlock(&lane->boost_lock);
}

void lanepool__boost_thread_started(lanepool_lane_t *lane) {
  pthread_mutex_lock(&lane->boost_lock);
  atomic_store_explicit(&lane->boost_band, lane->band, memory_order_relaxed);
  atomic_store_explicit(&lane->lift, LANEPOOL_BAND_COUNT, memory_order_relaxed);
  lane->run_band = lane->band;
  /* A new thread: nothing known of what it has; the first update sets it all. */
  memset(&lane->boost_now, 0, sizeof lane->boost_now);
  pthread_mutex_unlock(&lane->boost_lock);
  lanepool__boost_update(lane);
}

/* Busy: held (its thread, a sibling or a sync caller runs its queue or a closure) unless
 * the caller is what runs (work it queues there waits only for what is queued), or tasks
 * queued: work queued now would wait. A snapshot of relaxed counters, best effort: the
 * lane may go idle, or another producer queue ahead, right after. */
static bool lane_busy(lanepool_lane_t *lane) {
  bool caller_runs_it = lanepool__current == lane;
  return (!caller_runs_it && atomic_load_explicit(&lane->excl, memory_order_relaxed) != 0) ||
         lanepool__ring_depth(&lane->ring) != 0 ||
         atomic_load_explicit(&lane->spill.count, memory_order_relaxed) != 0;
}

int lanepool_lane_boost_begin(lanepool_lane_t *lane, lanepool_qos_t qos, lanepool_boost_t *out) {
  return lanepool_lane_boost_begin_flags(lane, qos, 0, out);
}

int lanepool_lane_boost_begin_flags(lanepool_lane_t *lane, lanepool_qos_t qos, unsigned flags,
                                    lanepool_boost_t *out) {
  int b = lanepool_band_index(qos);
  if (!lane || !out || b < 0 || (flags & ~LANEPOOL_BOOST_IF_BUSY)) return EINVAL;
  out->lane = lane;
  out->band_plus_one = 0;
  if (lanepool__forked(lane->generation)) return EOWNERDEAD;
  const void *outer = lanepool__call_enter(lane);
  _Atomic uint32_t ticket = 0;
  /* Cheap tests first: a band not above the lane's holds nothing, whatever the lane
   * does; nor does an idle lane when only a busy one is to be boosted. */
  if ((uint32_t)b < lane->band && !((flags & LANEPOOL_BOOST_IF_BUSY) && !lane_busy(lane)) &&
      lanepool__boost_join(lane, b, &ticket)) {
    out->band_plus_one = atomic_load_explicit(&ticket, memory_order_relaxed);
    lanepool__boost_update(lane);
  }
  lanepool__call_leave(outer);
  return 0;
}

int lanepool_lane_boost_end(lanepool_boost_t *boost) {
  if (!boost) return EINVAL;
  uint32_t b = boost->band_plus_one;
  boost->band_plus_one = 0;
  lanepool_lane_t *lane = boost->lane;
  if (!b || !lane) return 0; /* held nothing: touches no lane */
  const void *outer = lanepool__call_enter(lane);
  LANEPOOL__TEST_POINT("boost_end", lane, b);
  lanepool__boost_drop(lane, b - 1); /* nothing in a fork child */
  lanepool__call_leave(outer);
  return 0;
}
