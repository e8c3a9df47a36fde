/*
 * pool.c - pools: configuration, creation, lane picking, shutdown, the registry of
 * live pools (so destroy can tell a live pool from a stale pointer) and the default
 * pool.
 */
#define _GNU_SOURCE
#include "internal.h"

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const lanepool__band_short_names[LANEPOOL_BAND_COUNT] = {"ui", "in", "df", "ut",
                                                                     "bg"};
const lanepool_qos_t lanepool__qos_of_band[LANEPOOL_BAND_COUNT] = {
    LANEPOOL_QOS_USER_INTERACTIVE, LANEPOOL_QOS_USER_INITIATED, LANEPOOL_QOS_DEFAULT,
    LANEPOOL_QOS_UTILITY, LANEPOOL_QOS_BACKGROUND};

/* ---- registry of live pools ------------------------------------------------- */

/* Not static: fork.c holds it across fork(). */
pthread_mutex_t lanepool__registry_lock = PTHREAD_MUTEX_INITIALIZER;
#define registry_lock lanepool__registry_lock
static lanepool_t **registry;       /* [registry_lock] */
static size_t registry_len, registry_cap;

static int registry_add(lanepool_t *pool) {
  pthread_mutex_lock(&registry_lock);
  if (registry_len == registry_cap) {
    size_t ncap = registry_cap ? registry_cap * 2 : 16;
    lanepool_t **n = realloc(registry, ncap * sizeof *n);
    if (!n) {
      pthread_mutex_unlock(&registry_lock);
      return ENOMEM;
    }
    registry = n;
    registry_cap = ncap;
  }
  registry[registry_len++] = pool;
  pthread_mutex_unlock(&registry_lock);
  return 0;
}

/* Removes the pool if it is live. true if it was. */
static bool registry_take(lanepool_t *pool) {
  bool found = false;
  pthread_mutex_lock(&registry_lock);
  for (size_t i = 0; i < registry_len; i++) {
    if (registry[i] == pool) {
      registry[i] = registry[--registry_len];
      found = true;
      break;
    }
  }
  pthread_mutex_unlock(&registry_lock);
  return found;
}

/* ---- configuration ---------------------------------------------------------- */

int lanepool_config_init(lanepool_config_t *cfg) {
  if (!cfg) return EINVAL;
  memset(cfg, 0, sizeof *cfg);
  cfg->name = NULL;
  cfg->lanes_per_band = LANEPOOL_LANES_PER_CPU;
  cfg->ring_capacity = 0;
  /* Spin budgets: interactive lanes stay warm the longest; background never spins
   * (it must not steal a core from anyone). Tuned by lanepool-bench. */
  static const uint32_t spin[LANEPOOL_BAND_COUNT] = {50000, 30000, 20000, 5000, 0};
  memcpy(cfg->spin_ns, spin, sizeof spin);
  lanepool__default_policies(cfg->policy);
  cfg->placement = LANEPOOL_PLACEMENT_NONE;
  return 0;
}

int lanepool_band_index(lanepool_qos_t qos) {
  switch (qos) {
  case LANEPOOL_QOS_USER_INTERACTIVE: return 0;
  case LANEPOOL_QOS_USER_INITIATED: return 1;
  case LANEPOOL_QOS_DEFAULT: return 2;
  case LANEPOOL_QOS_UTILITY: return 3;
  case LANEPOOL_QOS_BACKGROUND: return 4;
  }
  return -1;
}

static uint32_t allowed_cpu_count(void) {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return 1;
  int n = CPU_COUNT(&set);
  return n > 0 ? (uint32_t)n : 1;
}

static int validate(const lanepool_config_t *cfg) {
  if (cfg->name && cfg->name[0] == '\0') return EINVAL;
  if (cfg->lanes_per_band == 0 || (cfg->lanes_per_band > LANEPOOL_MAX_LANES_PER_BAND &&
                                   cfg->lanes_per_band != LANEPOOL_LANES_PER_CPU))
    return EINVAL;
  uint32_t cap = cfg->ring_capacity;
  if (cap != 0 && (cap < LANEPOOL_MIN_RING_CAPACITY || cap > LANEPOOL_MAX_RING_CAPACITY ||
                   (cap & (cap - 1)) != 0))
    return EINVAL;
  if (cfg->hard_capacity != 0 && cfg->hard_capacity != 1) return EINVAL;
  if (cfg->allow_realtime != 0 && cfg->allow_realtime != 1) return EINVAL;
  if (cfg->stall_threshold_ns != 0 && cfg->stall_threshold_ns < 1000000) return EINVAL;
  for (int b = 0; b < LANEPOOL_BAND_COUNT; b++) {
    int rc = lanepool__validate_policy(&cfg->policy[b], cfg->allow_realtime);
    if (rc) return rc;
  }
  switch (cfg->placement) {
  case LANEPOOL_PLACEMENT_NONE:
  case LANEPOOL_PLACEMENT_CORES: break;
  case LANEPOOL_PLACEMENT_CPU_LIST:
    if (!cfg->cpus || cfg->cpu_count == 0) return EINVAL;
    break;
  case LANEPOOL_PLACEMENT_NUMA:
    /* Node-local memory and node binding need libnuma in the build. */
    if (!lanepool_numa_supported()) return ENOTSUP;
    break;
  default: return EINVAL;
  }
  return 0;
}

/* ---- creation and teardown -------------------------------------------------- */

static void free_pool(lanepool_t *pool) {
  uint32_t total = pool->lanes_per_band * LANEPOOL_BAND_COUNT;
  if (pool->lanes)
    for (uint32_t i = 0; i < total; i++) lanepool__lane_free(pool->lanes[i]);
  free(pool->lanes);
  lanepool__topology_free(&pool->topology);
  lanepool__timers_destroy(&pool->timers);
  pthread_mutex_destroy(&pool->lifecycle);
  free(pool);
}

/* Closes every lane (no new task accepted), then joins the first `count` threads. */
static void close_and_join(lanepool_t *pool, uint32_t count) {
  uint32_t total = pool->lanes_per_band * LANEPOOL_BAND_COUNT;
  for (uint32_t i = 0; i < total; i++) lanepool__lane_close(pool->lanes[i]);
  for (uint32_t i = 0; i < count; i++) pthread_join(pool->lanes[i]->thread, NULL);
}

static int create_pool(const lanepool_config_t *cfg, int is_default, lanepool_t **out) {
  lanepool__fork_init();
  int rc = validate(cfg);
  if (rc) return rc;
  uint32_t per_band = cfg->lanes_per_band;
  if (per_band == LANEPOOL_LANES_PER_CPU) {
    per_band = allowed_cpu_count();
    if (per_band > LANEPOOL_MAX_LANES_PER_BAND) per_band = LANEPOOL_MAX_LANES_PER_BAND;
  }
  uint32_t total = per_band * LANEPOOL_BAND_COUNT;

  lanepool_t *pool = aligned_alloc(LANEPOOL__CACHE_LINE,
                                   (sizeof(lanepool_t) + LANEPOOL__CACHE_LINE - 1) &
                                       ~(size_t)(LANEPOOL__CACHE_LINE - 1));
  if (!pool) return ENOMEM;
  memset(pool, 0, sizeof *pool);
  snprintf(pool->name, sizeof pool->name, "%s", cfg->name ? cfg->name : "lanepool");
  pool->lanes_per_band = per_band;
  pool->ring_capacity = cfg->ring_capacity ? cfg->ring_capacity : LANEPOOL_DEFAULT_RING_CAPACITY;
  pool->hard_capacity = cfg->hard_capacity;
  pool->is_default = is_default;
  atomic_init(&pool->cancel, 0);
  atomic_init(&pool->state, LANEPOOL__RUNNING);
  atomic_init(&pool->started, 0);
  for (int b = 0; b < LANEPOOL_BAND_COUNT; b++) atomic_init(&pool->rr[b].value, 0);
  if ((rc = lanepool__timers_init(&pool->timers))) {
    free(pool);
    return rc;
  }
  if ((rc = pthread_mutex_init(&pool->lifecycle, NULL))) {
    lanepool__timers_destroy(&pool->timers);
    free(pool);
    return rc;
  }
  pool->placement = cfg->placement;
  pool->generation = atomic_load_explicit(&lanepool__fork_generation, memory_order_relaxed);
  pool->stall_threshold_ns = cfg->stall_threshold_ns;
  pool->log = cfg->log;
  pool->log_arg = cfg->log_arg;
  atomic_init(&pool->spinners, 0);
  if (cfg->max_spinning_lanes == 0) {
    uint32_t half = allowed_cpu_count() / 2;
    pool->max_spinners = half ? half : 1;
  } else {
    pool->max_spinners = cfg->max_spinning_lanes;
  }
  pool->lanes = calloc(total, sizeof *pool->lanes);
  lanepool_lane_placement_t *plan = calloc(per_band, sizeof *plan);
  int *allowed = calloc(CPU_SETSIZE, sizeof *allowed);
  if (!pool->lanes || !plan || !allowed) {
    free(plan);
    free(allowed);
    free_pool(pool);
    return ENOMEM;
  }
  /* Where each lane index goes; the same plan for every band. */
  uint32_t allowed_count = lanepool__allowed_cpus(allowed, CPU_SETSIZE);
  pool->allowed_count = allowed_count < 64 ? allowed_count : 64;
  memcpy(pool->allowed_cpus, allowed, pool->allowed_count * sizeof(int));
  if (cfg->placement == LANEPOOL_PLACEMENT_NUMA)
    rc = cfg->topology ? lanepool__topology_copy(cfg->topology, &pool->topology)
                       : lanepool__machine_topology(&pool->topology);
  if (!rc)
    rc = lanepool__plan(cfg->placement, per_band, cfg->cpus, cfg->cpu_count, &pool->topology,
                        allowed, allowed_count, plan);
  free(allowed);
  if (rc) {
    free(plan);
    free_pool(pool);
    return rc;
  }
  for (uint32_t b = 0; b < LANEPOOL_BAND_COUNT; b++) {
    for (uint32_t i = 0; i < per_band; i++) {
      lanepool_lane_t *lane = lanepool__lane_new(pool, b, i, cfg, plan[i], &rc);
      if (!lane) {
        free(plan);
        free_pool(pool);
        return rc;
      }
      pool->lanes[b * per_band + i] = lane;
    }
  }
  free(plan);

  pthread_attr_t attr;
  if ((rc = pthread_attr_init(&attr))) {
    free_pool(pool);
    return rc;
  }
  if (cfg->stack_size && (rc = pthread_attr_setstacksize(&attr, cfg->stack_size))) {
    pthread_attr_destroy(&attr);
    free_pool(pool);
    return rc;
  }
  /* Lanes inherit this mask: asynchronous signals go to the application's own
   * threads, never to a lane in the middle of a task. */
  sigset_t all, old;
  sigfillset(&all);
  sigdelset(&all, SIGSEGV);
  sigdelset(&all, SIGBUS);
  sigdelset(&all, SIGFPE);
  sigdelset(&all, SIGILL);
  sigdelset(&all, SIGTRAP);
  sigdelset(&all, SIGABRT);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  uint32_t created = 0;
  for (; created < total; created++) {
    lanepool_lane_t *lane = pool->lanes[created];
    if ((rc = pthread_create(&lane->thread, &attr, lanepool__lane_main, lane))) break;
  }
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  pthread_attr_destroy(&attr);
  if (rc) {
    close_and_join(pool, created);
    free_pool(pool);
    return rc;
  }
  uint32_t seen;
  while ((seen = atomic_load_explicit(&pool->started, memory_order_acquire)) < total)
    lanepool__futex_wait((_Atomic uint32_t *)&pool->started, seen);

  if ((rc = registry_add(pool))) {
    close_and_join(pool, total);
    free_pool(pool);
    return rc;
  }
  if (cfg->stall_threshold_ns && (rc = lanepool__timers_start(pool))) {
    registry_take(pool);
    close_and_join(pool, total);
    free_pool(pool);
    return rc;
  }
  if (cfg->log) {
    char msg[2048];
    if (lanepool__describe_refusals(pool, msg, sizeof msg) > 0)
      cfg->log(LANEPOOL_LOG_WARNING, msg, cfg->log_arg);
    for (uint32_t i = 0; i < total; i++) {
      if (pool->lanes[i]->applied.placement_error) {
        snprintf(msg, sizeof msg, "lanepool '%s': lane %s could not be pinned/bound (%s); it floats",
                 pool->name, pool->lanes[i]->name,
                 strerror(pool->lanes[i]->applied.placement_error));
        cfg->log(LANEPOOL_LOG_WARNING, msg, cfg->log_arg);
        break;
      }
    }
  }
  *out = pool;
  return 0;
}

int lanepool_create(const lanepool_config_t *cfg, lanepool_t **out) {
  if (!cfg || !out) return EINVAL;
  return create_pool(cfg, 0, out);
}

pthread_mutex_t lanepool__default_lock = PTHREAD_MUTEX_INITIALIZER;
#define default_lock lanepool__default_lock
static _Atomic(lanepool_t *) default_pool;

/* In a fork child: the parent's default pool has no threads here; forget it (its
 * memory is leaked on purpose: freeing could race nothing, but its lanes' state is
 * the parent's). */
void lanepool__forget_default_pool(void) {
  atomic_store_explicit(&default_pool, NULL, memory_order_relaxed);
}

int lanepool_default(lanepool_t **out) {
  if (!out) return EINVAL;
  lanepool_t *p = atomic_load_explicit(&default_pool, memory_order_acquire);
  if (p) {
    *out = p;
    return 0;
  }
  pthread_mutex_lock(&default_lock);
  int rc = 0;
  p = atomic_load_explicit(&default_pool, memory_order_relaxed);
  if (!p) {
    lanepool_config_t cfg;
    lanepool_config_init(&cfg);
    cfg.name = "lanepool";
    rc = create_pool(&cfg, 1, &p);
    if (rc == 0) atomic_store_explicit(&default_pool, p, memory_order_release);
  }
  pthread_mutex_unlock(&default_lock);
  if (rc == 0) *out = p;
  return rc;
}

static bool called_from_own_lane(const lanepool_t *pool) {
  lanepool_lane_t *cur;
  return lanepool_current_lane(&cur) == 0 && cur->pool == pool;
}

int lanepool_shutdown(lanepool_t *pool, lanepool_shutdown_mode_t mode,
                      lanepool_discard_fn discard, void *discard_arg) {
  if (!pool) return EINVAL;
  if (mode != LANEPOOL_SHUTDOWN_DRAIN && mode != LANEPOOL_SHUTDOWN_CANCEL) return EINVAL;
  if (mode == LANEPOOL_SHUTDOWN_CANCEL && !discard) return EINVAL;
  if (lanepool__forked(pool->generation)) return EOWNERDEAD;
  if (pool->is_default) return EPERM;
  if (called_from_own_lane(pool)) return EDEADLK;

  pthread_mutex_lock(&pool->lifecycle);
  if (atomic_load_explicit(&pool->state, memory_order_acquire) != LANEPOOL__RUNNING) {
    pthread_mutex_unlock(&pool->lifecycle);
    return EALREADY;
  }
  atomic_store_explicit(&pool->state, LANEPOOL__STOPPING, memory_order_release);
  if (mode == LANEPOOL_SHUTDOWN_CANCEL)
    atomic_store_explicit(&pool->cancel, 1, memory_order_seq_cst);
  uint32_t total = pool->lanes_per_band * LANEPOOL_BAND_COUNT;
  /* Timers first, while the lanes still take tasks: DRAIN lets them all fire. */
  lanepool__timer_entry *cancelled_timers;
  size_t cancelled_count;
  lanepool__timers_close(pool, mode == LANEPOOL_SHUTDOWN_CANCEL, &cancelled_timers,
                         &cancelled_count);
  close_and_join(pool, total);
  /* Joined: everything still queued is ours now. After DRAIN the rings are empty. */
  if (mode == LANEPOOL_SHUTDOWN_CANCEL) {
    for (uint32_t i = 0; i < total; i++)
      lanepool__lane_discard_all(pool->lanes[i], discard, discard_arg);
    for (size_t i = 0; i < cancelled_count; i++)
      discard(cancelled_timers[i].fn, cancelled_timers[i].ctx, discard_arg);
  }
  free(cancelled_timers);
  atomic_store_explicit(&pool->state, LANEPOOL__STOPPED, memory_order_release);
  pthread_mutex_unlock(&pool->lifecycle);
  return 0;
}

int lanepool_destroy(lanepool_t *pool) {
  if (!pool) return EINVAL;
  /* One pass under the registry lock: a stale pointer is only compared, never read;
   * a live one is checked and taken out, so a concurrent destroy gets EINVAL. */
  int rc = 0;
  pthread_mutex_lock(&registry_lock);
  size_t at = registry_len;
  for (size_t i = 0; i < registry_len && at == registry_len; i++)
    if (registry[i] == pool) at = i;
  if (at == registry_len) rc = EINVAL;
  else if (lanepool__forked(pool->generation)) rc = EOWNERDEAD;
  else if (pool->is_default) rc = EPERM;
  else if (called_from_own_lane(pool)) rc = EDEADLK;
  else registry[at] = registry[--registry_len];
  pthread_mutex_unlock(&registry_lock);
  if (rc) return rc;
  rc = lanepool_shutdown(pool, LANEPOOL_SHUTDOWN_DRAIN, NULL, NULL);
  (void)rc; /* 0, or EALREADY: someone shut it down already; both are fine */
  /* Wait for a concurrent shutdown to finish before freeing. */
  pthread_mutex_lock(&pool->lifecycle);
  pthread_mutex_unlock(&pool->lifecycle);
  free_pool(pool);
  return 0;
}

/* ---- picking lanes ---------------------------------------------------------- */

int lanepool_next_lane(lanepool_t *pool, lanepool_qos_t qos, lanepool_lane_t **out) {
  int b = lanepool_band_index(qos);
  if (!pool || !out || b < 0) return EINVAL;
  uint32_t n = atomic_fetch_add_explicit(&pool->rr[b].value, 1, memory_order_relaxed);
  *out = pool->lanes[(uint32_t)b * pool->lanes_per_band + n % pool->lanes_per_band];
  return 0;
}

int lanepool_get_lane(lanepool_t *pool, lanepool_qos_t qos, uint32_t index,
                      lanepool_lane_t **out) {
  int b = lanepool_band_index(qos);
  if (!pool || !out || b < 0 || index >= pool->lanes_per_band) return EINVAL;
  *out = pool->lanes[(uint32_t)b * pool->lanes_per_band + index];
  return 0;
}

static inline uint64_t mix64(uint64_t x) { /* splitmix64's finaliser */
  x ^= x >> 30;
  x *= UINT64_C(0xbf58476d1ce4e5b9);
  x ^= x >> 27;
  x *= UINT64_C(0x94d049bb133111eb);
  x ^= x >> 31;
  return x;
}

int lanepool_lane_for_key(lanepool_t *pool, lanepool_qos_t qos, uint64_t key,
                          lanepool_lane_t **out) {
  int b = lanepool_band_index(qos);
  if (!pool || !out || b < 0) return EINVAL;
  uint32_t n = pool->lanes_per_band;
  uint32_t i = (uint32_t)(((unsigned __int128)mix64(key) * n) >> 64);
  *out = pool->lanes[(uint32_t)b * n + i];
  return 0;
}

static __thread uint64_t rng_state;

static inline uint64_t next_random(void) {
  uint64_t x = rng_state;
  if (x == 0) x = mix64((uint64_t)(uintptr_t)&rng_state ^ lanepool__now_ns()) | 1;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  rng_state = x;
  return x;
}

int lanepool_async(lanepool_t *pool, lanepool_qos_t qos, lanepool_fn fn, void *ctx) {
  int b = lanepool_band_index(qos);
  if (!pool || !fn || b < 0) return EINVAL;
  uint32_t n = pool->lanes_per_band;
  lanepool_lane_t **band = &pool->lanes[(uint32_t)b * n];
  lanepool_lane_t *pick = band[0];
  if (n > 1) {
    uint64_t r = next_random();
    uint32_t i = (uint32_t)((r & 0xffffffffu) % n);
    uint32_t j = (uint32_t)((r >> 32) % (n - 1));
    if (j >= i) j++;
    pick = lanepool__lane_depth(band[j]) < lanepool__lane_depth(band[i]) ? band[j] : band[i];
  }
  return lanepool__lane_push(pick, fn, ctx);
}

int lanepool_info(const lanepool_t *pool, lanepool_info_t *out) {
  if (!pool || !out) return EINVAL;
  memset(out, 0, sizeof *out);
  memcpy(out->name, pool->name, sizeof out->name);
  out->lanes_per_band = pool->lanes_per_band;
  out->ring_capacity = pool->ring_capacity;
  out->hard_capacity = pool->hard_capacity;
  out->shut_down = atomic_load_explicit(&((lanepool_t *)pool)->state, memory_order_acquire) !=
                   LANEPOOL__RUNNING;
  out->is_default = pool->is_default;
  return 0;
}
