/*
 * pool.c - the public entry points on top of the core (the highest layer; see
 * scripts/layering-check): configuration, creation, lane lookup (lanepool_next_lane,
 * lanepool_get_lane), band submits, info, and the default pool with its fork handlers.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- configuration ---------------------------------------------------------- */

static void config_defaults(lanepool_config_t *cfg) {
  memset(cfg, 0, sizeof *cfg); /* the default of the fields not set here */
  cfg->struct_size = (uint32_t)sizeof *cfg;
  cfg->lanes_per_band = LANEPOOL_LANES_PER_CPU;
  /* Spin budgets: interactive lanes stay warm the longest; background never spins
   * (it must not steal a core from anyone). Tuned by lanepool-bench. */
  static const uint32_t spin[LANEPOOL_BAND_COUNT] = {50000, 30000, 20000, 5000, 0};
  memcpy(cfg->spin_ns, spin, sizeof spin);
  memcpy(cfg->policy, lanepool__default_policy, sizeof cfg->policy);
}

int lanepool_config_init_sized(lanepool_config_t *cfg, uint32_t struct_size) {
  if (!cfg || !lanepool__size_accepted(struct_size, sizeof *cfg)) return EINVAL;
  lanepool_config_t full;
  config_defaults(&full);
  memcpy(cfg, &full, struct_size);
  cfg->struct_size = struct_size;
  return 0;
}

/* The caller's config as this library's layout: its struct_size checked, its bytes
 * copied, anything an older (smaller) layout lacks left at the defaults. 0 or EINVAL. */
static int config_normalize(const lanepool_config_t *cfg, lanepool_config_t *full) {
  if (!lanepool__size_accepted(cfg->struct_size, sizeof *full)) return EINVAL;
  config_defaults(full);
  memcpy(full, cfg, cfg->struct_size);
  full->struct_size = (uint32_t)sizeof *full;
  return 0;
}

static int check_config(const lanepool_config_t *cfg, const char **field) {
#define BAD(f)                                                                                     \
  do {                                                                                             \
    *field = (f);                                                                                  \
    return EINVAL;                                                                                 \
  } while (0)
  if (cfg->name && cfg->name[0] == '\0') BAD("name");
  if (cfg->lanes_per_band == 0 || (cfg->lanes_per_band > LANEPOOL_MAX_LANES_PER_BAND &&
                                   cfg->lanes_per_band != LANEPOOL_LANES_PER_CPU))
    BAD("lanes_per_band");
  uint32_t cap = cfg->ring_capacity;
  if (cap != 0 && (cap < LANEPOOL_MIN_RING_CAPACITY || cap > LANEPOOL_MAX_RING_CAPACITY ||
                   (cap & (cap - 1)) != 0))
    BAD("ring_capacity");
  if (cfg->hard_capacity != 0 && cfg->hard_capacity != 1) BAD("hard_capacity");
  if (cfg->fixed_spin != 0 && cfg->fixed_spin != 1) BAD("fixed_spin");
  if (cfg->allow_realtime != 0 && cfg->allow_realtime != 1) BAD("allow_realtime");
  if (cfg->stall_threshold_ns != 0 && cfg->stall_threshold_ns < 1000000) BAD("stall_threshold_ns");
  if (cfg->interactive_spin_ns > LANEPOOL_MAX_INTERACTIVE_SPIN_NS) BAD("interactive_spin_ns");
  if (cfg->unprivileged_nice != LANEPOOL_NICE_CLAMP &&
      cfg->unprivileged_nice != LANEPOOL_NICE_SHIFT)
    BAD("unprivileged_nice");
  /* 0: the pthread default. Below PTHREAD_STACK_MIN (16 KiB on Linux) pthread refuses;
   * above the maximum, pthread_create would fail late with EAGAIN or EINVAL. */
  if (cfg->stack_size != 0 &&
      (cfg->stack_size < 16384 || cfg->stack_size > LANEPOOL_MAX_STACK_SIZE))
    BAD("stack_size");
  for (int b = 0; b < LANEPOOL_BAND_COUNT; b++)
    if (lanepool__validate_policy(&cfg->policy[b], b, cfg->allow_realtime, field)) return EINVAL;
  switch (cfg->placement) {
  case LANEPOOL_PLACEMENT_NONE:
  case LANEPOOL_PLACEMENT_CORES:
    break;
  case LANEPOOL_PLACEMENT_CPU_LIST: { /* each CPU allowed (the planner's rule) */
    lanepool_lane_placement_t one;
    if (lanepool_plan_placement(cfg->placement, 1, cfg->cpus, cfg->cpu_count, NULL, NULL, 0, &one,
                                1))
      BAD("cpus");
    break;
  }
  case LANEPOOL_PLACEMENT_NUMA:
    /* Node-local memory and node binding need libnuma in the build. */
    if (!lanepool_numa_supported()) {
      *field = "placement";
      return ENOTSUP;
    }
    break;
  default:
    BAD("placement");
  }
#undef BAD
  return 0;
}

int lanepool_config_check(const lanepool_config_t *cfg, const char **field) {
  const char *ignored;
  if (!field) field = &ignored;
  if (!cfg) {
    *field = "cfg";
    return EINVAL;
  }
  lanepool_config_t full;
  if (config_normalize(cfg, &full)) {
    *field = "struct_size";
    return EINVAL;
  }
  return check_config(&full, field);
}

/* ---- creation and teardown -------------------------------------------------- */

/* Step 1: the pool struct and its scalar settings. NULL on ENOMEM. */
static lanepool_t *pool_alloc(const lanepool_config_t *cfg, int is_default, uint32_t per_band,
                              uint32_t cpus, int *rc) {
  lanepool_t *pool = aligned_alloc(LANEPOOL__CACHE_LINE, LANEPOOL__LINES(sizeof(lanepool_t)));
  if (!pool) {
    *rc = ENOMEM;
    return NULL;
  }
  memset(pool, 0, sizeof *pool); /* every counter and word 0: OPEN, no spinner, no hint */
  if ((*rc = lanepool__timers_init(&pool->timers))) {
    free(pool);
    return NULL;
  }
  snprintf(pool->name, sizeof pool->name, "%s", cfg->name ? cfg->name : "lanepool");
  pool->lanes_per_band = per_band;
  pool->ring_capacity = cfg->ring_capacity ? cfg->ring_capacity : LANEPOOL_DEFAULT_RING_CAPACITY;
  pool->hard_capacity = cfg->hard_capacity;
  pool->is_default = is_default;
  pool->generation = atomic_load_explicit(&lanepool__fork_generation, memory_order_relaxed);
  pool->stall_threshold_ns = cfg->stall_threshold_ns;
  pool->log = cfg->log;
  pool->log_arg = cfg->log_arg;
  if (cfg->unprivileged_nice == LANEPOOL_NICE_SHIFT)
    pool->nice_shift = lanepool__nice_shift(cfg->policy);
  pool->max_spinners = cfg->max_spinning_lanes ? cfg->max_spinning_lanes : cpus > 1 ? cpus / 2 : 1;
  return pool;
}

/* Adds `cpu` to pool->rescue_cpus (room for `cap`) unless there already. */
static void rescue_cpu_add(lanepool_t *pool, int cpu, uint32_t cap) {
  if (!lanepool__contains(pool->rescue_cpus, pool->rescue_cpu_count, cpu) &&
      pool->rescue_cpu_count < cap)
    pool->rescue_cpus[pool->rescue_cpu_count++] = cpu;
}

/* Every planned CPU is an allowed one (lists are checked, cores and nodes come from the
 * allowed set), so allowed_count bounds the union. */
static int rescue_cpus(lanepool_t *pool, const lanepool_lane_placement_t *plan, uint32_t n) {
  uint32_t cap = pool->allowed_count ? pool->allowed_count : 1;
  if (!(pool->rescue_cpus = calloc(cap, sizeof *pool->rescue_cpus))) return ENOMEM;
  for (uint32_t i = 0; i < n; i++) {
    if (plan[i].cpu >= 0) {
      rescue_cpu_add(pool, plan[i].cpu, cap);
    } else if (plan[i].node >= 0) {
      const lanepool__topo_node *node = lanepool__topology_node(&pool->topology, plan[i].node);
      for (uint32_t k = 0; node && k < node->cpu_count; k++)
        rescue_cpu_add(pool, node->cpus[k], cap);
    }
  }
  return 0;
}

/* Step 2: where each lane index goes (the same plan for every band), then the lanes. */
static int lanes_alloc(lanepool_t *pool, const lanepool_config_t *cfg) {
  uint32_t per_band = pool->lanes_per_band;
  int rc = 0;
  pool->lanes = calloc(lanepool__lane_total(pool), sizeof *pool->lanes);
  lanepool_lane_placement_t *plan = calloc(per_band, sizeof *plan);
  if (!pool->lanes || !plan) {
    rc = ENOMEM;
    goto out;
  }
  rc = lanepool__plan(cfg->placement, per_band, cfg->cpus, cfg->cpu_count, cfg->topology,
                      &pool->topology, pool->allowed_cpus, pool->allowed_count, plan);
  /* Each band's queue: a ring per lane, as large as a lane's. */
  for (uint32_t b = 0; !rc && b < LANEPOOL_BAND_COUNT; b++)
    rc = lanepool__bandq_init(&pool->bands[b], per_band, pool->ring_capacity);
  for (uint32_t b = 0; !rc && b < LANEPOOL_BAND_COUNT; b++)
    for (uint32_t i = 0; !rc && i < per_band; i++)
      pool->lanes[b * per_band + i] = lanepool__lane_new(pool, b, i, cfg, plan[i], &rc);
  /* Where the rescue lanes run: with placement, on the union of the band lanes' CPUs
   * (a CPU or a node's CPUs each), so they keep to the CPUs the pool was given. */
  if (!rc && cfg->placement != LANEPOOL_PLACEMENT_NONE) rc = rescue_cpus(pool, plan, per_band);
  /* Each band's rescue lane: its band's policy, on no NUMA node. */
  for (uint32_t b = 0; !rc && b < LANEPOOL_BAND_COUNT; b++)
    pool->lanes[LANEPOOL_BAND_COUNT * per_band + b] =
        lanepool__lane_new(pool, b, per_band, cfg, (lanepool_lane_placement_t){-1, -1}, &rc);
out:
  free(plan);
  return rc;
}

/* Step 3: start every lane thread and wait until each has applied its policy. On
 * error the ones started are closed and joined. */
static int lanes_start(lanepool_t *pool) {
  uint32_t total = lanepool__lane_total(pool);
  uint32_t created = 0;
  int rc = 0;
  for (; created < total; created++)
    if ((rc = lanepool__lane_start(pool->lanes[created]))) break;
  if (rc) {
    (void)lanepool__close_and_join(pool, created, NULL);
    return rc;
  }
  uint32_t seen;
  while ((seen = atomic_load_explicit(&pool->started, memory_order_acquire)) < total)
    lanepool__futex_wait((_Atomic uint32_t *)&pool->started, seen);
  return 0;
}

static void log_refusals(lanepool_t *pool) {
  if (!pool->log) return;
  uint32_t total = lanepool__lane_total(pool);
  char msg[2048];
  if (lanepool__describe_refusals(pool, msg, sizeof msg) > 0)
    pool->log(LANEPOOL_LOG_WARNING, msg, pool->log_arg);
  if (pool->nice_shift) {
    snprintf(msg, sizeof msg,
             "lanepool '%s': this thread may not lower its nice that far; every band's nice is "
             "%d higher than its policy's (unprivileged_nice = shift)",
             pool->name, pool->nice_shift);
    pool->log(LANEPOOL_LOG_INFO, msg, pool->log_arg);
  }
  for (uint32_t i = 0; i < total; i++) {
    if (pool->lanes[i]->applied.placement_error) {
      snprintf(msg, sizeof msg, "lanepool '%s': lane %s could not be pinned/bound (%s); it floats",
               pool->name, pool->lanes[i]->name, strerror(pool->lanes[i]->applied.placement_error));
      pool->log(LANEPOOL_LOG_WARNING, msg, pool->log_arg);
      break;
    }
  }
}

static pthread_mutex_t default_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic(lanepool_t *) default_pool;

/* fork(): the library's global locks (the registry's, the default pool's) are held across
 * it, taken in a fixed order, the default pool's first, so a child never inherits one
 * held by a thread it does not have. In a child the generation (thread.c) moves before
 * they are released. */
static void locks_prepare(void) {
  LANEPOOL_INJECT(LANEPOOL__AT_FORK);
  pthread_mutex_lock(&default_lock);
  pthread_mutex_lock(&lanepool__registry_lock);
}

static void locks_parent(void) {
  LANEPOOL_INJECT(LANEPOOL__AT_FORK);
  pthread_mutex_unlock(&lanepool__registry_lock);
  pthread_mutex_unlock(&default_lock);
}

static void locks_child(void) {
  atomic_fetch_add_explicit(&lanepool__fork_generation, 1, memory_order_relaxed);
  /* The parent's default pool has no threads here: forget it, a fresh one comes on demand
   * (its memory is leaked on purpose: freeing could race nothing, but its lanes' state is
   * the parent's). */
  atomic_store_explicit(&default_pool, NULL, memory_order_relaxed);
  pthread_mutex_unlock(&lanepool__registry_lock);
  pthread_mutex_unlock(&default_lock);
}

static pthread_once_t fork_once = PTHREAD_ONCE_INIT;
static void fork_install(void) { pthread_atfork(locks_prepare, locks_parent, locks_child); }

/* The default pool's caller calls log_refusals itself once it holds no lock (the default
 * pool is created under default_lock; its log callback may call lanepool_default). */
static int create_pool(const lanepool_config_t *cfg, int is_default, lanepool_t **out) {
  pthread_once(&fork_once, fork_install);
  const char *field;
  int rc = check_config(cfg, &field);
  if (rc) return rc;
  /* The CPUs the process may use (the pool keeps the list for its placement and its timer
   * thread; a failed sched_getaffinity leaves none: no pinning of the timer, CORES placement
   * EINVAL), and within its cgroup's quota (none, or none readable: 0), which spinning
   * would spend. */
  int *cpus;
  uint32_t ncpus;
  if (lanepool__affinity_cpus(&cpus, &ncpus) == ENOMEM) return ENOMEM;
  uint32_t per_band = cfg->lanes_per_band, allowed = ncpus ? ncpus : 1, quota = 0;
  if (lanepool_cpu_quota(&quota) != 0 || quota > allowed) quota = allowed;
  if (per_band == LANEPOOL_LANES_PER_CPU) {
    /* One lane per CPU the process may use (the default pool: within its cgroup's quota). */
    per_band = is_default ? quota : allowed;
    if (per_band > LANEPOOL_MAX_LANES_PER_BAND) per_band = LANEPOOL_MAX_LANES_PER_BAND;
  }
  lanepool_t *pool = pool_alloc(cfg, is_default, per_band, quota, &rc);
  if (!pool) {
    free(cpus);
    return rc;
  }
  pool->allowed_cpus = cpus;
  pool->allowed_count = ncpus;
  if ((rc = lanes_alloc(pool, cfg))) goto fail_free;
  uint32_t placed = pool->rescue_cpu_count ? pool->rescue_cpu_count : pool->allowed_count;
  pool->spin_cpus = placed < quota ? placed : quota;
  if ((rc = lanes_start(pool))) goto fail_free;
  atomic_store_explicit(&pool->lift_ok, lanepool__lift_bands(pool), memory_order_relaxed);
  if (cfg->stall_threshold_ns && (rc = lanepool__timers_start(pool))) goto fail_join;
  lanepool__registry_add(pool);
  if (!is_default) log_refusals(pool);
  *out = pool;
  return 0;

fail_join:
  (void)lanepool__close_and_join(pool, lanepool__lane_total(pool), NULL);
fail_free:
  lanepool__pool_free(pool);
  return rc;
}

int lanepool_create(const lanepool_config_t *cfg, lanepool_t **out) {
  if (!cfg || !out) return EINVAL;
  lanepool_config_t full;
  if (config_normalize(cfg, &full)) return EINVAL;
  return create_pool(&full, 0, out);
}

/* lanepool_default_configure's copy (name and CPU list owned here; struct_size 0 until
 * configured), under default_lock. */
static lanepool_config_t default_cfg;

int lanepool_default_configure(const lanepool_config_t *given) {
  if (!given) return EINVAL;
  int rc = lanepool_config_check(given, NULL);
  if (rc) return rc;
  lanepool_config_t full;
  config_normalize(given, &full); /* accepted: the check above normalized it too */
  if (full.topology) return EINVAL;
  char *name = NULL;
  int *cpus = NULL;
  if (full.name && !(name = strdup(full.name))) return ENOMEM;
  if (full.placement == LANEPOOL_PLACEMENT_CPU_LIST) {
    cpus = malloc(full.cpu_count * sizeof *cpus);
    if (!cpus) {
      free(name);
      return ENOMEM;
    }
    memcpy(cpus, full.cpus, full.cpu_count * sizeof *cpus);
  }
  LANEPOOL_INJECT(LANEPOOL__AT_DEFAULT);
  pthread_mutex_lock(&default_lock);
  if (atomic_load_explicit(&default_pool, memory_order_relaxed)) {
    pthread_mutex_unlock(&default_lock);
    free(name);
    free(cpus);
    return EALREADY;
  }
  free((char *)default_cfg.name);
  free((int *)default_cfg.cpus);
  default_cfg = full;
  default_cfg.name = name;
  default_cfg.cpus = cpus;
  if (!cpus) default_cfg.cpu_count = 0;
  pthread_mutex_unlock(&default_lock);
  return 0;
}

/* Variable `name` as a whole decimal number, digits only, 1...max, into *out; unset or
 * empty: no change. 0 or EINVAL. */
static int env_number(const char *name, uint64_t max, uint32_t *out) {
  const char *s = getenv(name);
  if (!s || !s[0]) return 0;
  uint64_t v = 0;
  for (; *s; s++) {
    if (*s < '0' || *s > '9') return EINVAL;
    v = v * 10 + (uint64_t)(*s - '0');
    if (v > max) return EINVAL;
  }
  if (v == 0) return EINVAL;
  *out = (uint32_t)v;
  return 0;
}

/* Variable `name` as one of two words: *out 0 or 1, -1 when unset or empty; else EINVAL. */
static int env_choice(const char *name, const char *word0, const char *word1, int *out) {
  const char *v = getenv(name);
  *out = !v || !v[0] ? -1 : strcmp(v, word0) == 0 ? 0 : strcmp(v, word1) == 0 ? 1 : -2;
  return *out == -2 ? EINVAL : 0;
}

/* LANEPOOL_DEFAULT_LANES (1...64), LANEPOOL_DEFAULT_PLACEMENT (none|cores),
 * LANEPOOL_DEFAULT_NICE (clamp|shift) and LANEPOOL_DEFAULT_RING (a power of two in the
 * ring range: create checks the rest) over cfg. Unset or empty: no change. 0 or EINVAL
 * (the caller then drops cfg). */
static int default_env(lanepool_config_t *cfg) {
  int c, d;
  if (env_number("LANEPOOL_DEFAULT_LANES", LANEPOOL_MAX_LANES_PER_BAND, &cfg->lanes_per_band) ||
      env_number("LANEPOOL_DEFAULT_RING", LANEPOOL_MAX_RING_CAPACITY, &cfg->ring_capacity) ||
      env_choice("LANEPOOL_DEFAULT_PLACEMENT", "none", "cores", &c) ||
      env_choice("LANEPOOL_DEFAULT_NICE", "clamp", "shift", &d))
    return EINVAL;
  if (c >= 0) cfg->placement = c ? LANEPOOL_PLACEMENT_CORES : LANEPOOL_PLACEMENT_NONE;
  if (d >= 0) cfg->unprivileged_nice = d ? LANEPOOL_NICE_SHIFT : LANEPOOL_NICE_CLAMP;
  return 0;
}

int lanepool_default(lanepool_t **out) {
  if (!out) return EINVAL;
  lanepool_t *p = atomic_load_explicit(&default_pool, memory_order_acquire);
  if (p) {
    *out = p;
    return 0;
  }
  LANEPOOL_INJECT(LANEPOOL__AT_DEFAULT);
  pthread_mutex_lock(&default_lock);
  int rc = 0;
  bool created = false;
  p = atomic_load_explicit(&default_pool, memory_order_relaxed);
  if (!p) {
    lanepool_config_t cfg = default_cfg; /* struct_size 0: not configured */
    if (!cfg.struct_size) lanepool_config_init(&cfg);
    if (!cfg.name) cfg.name = "lanepool";
    rc = default_env(&cfg);
    if (rc == 0) rc = create_pool(&cfg, 1, &p);
    if (rc == 0) atomic_store_explicit(&default_pool, p, memory_order_release);
    created = rc == 0;
  }
  pthread_mutex_unlock(&default_lock);
  /* User code never runs under default_lock: the log callback may call lanepool_default
   * (it gets this pool, already published) or configure it (EALREADY). */
  if (created) log_refusals(p);
  if (rc == 0) *out = p;
  return rc;
}

/* ---- picking lanes ---------------------------------------------------------- */

/* Each thread rotates on its own: the pool's counter gives a thread its starting
 * point (the first pick after it last used another pool), and from there the thread
 * counts alone. A single thread sees the pool's round-robin exactly; several threads
 * start apart and do not share a cache line per pick (two producers would otherwise
 * bounce the counter's line between their cores on every submit). A stale entry (its
 * pool destroyed and another allocated at that address) only moves where a rotation
 * starts. */
static __thread struct {
  const lanepool_t *pool;
  uint32_t next[LANEPOOL_BAND_COUNT];
  uint32_t started; /* bit b: next[b] was taken from the pool's counter */
} rotation;

/* The next lane of band b in this thread's rotation (lanepool_next_lane). */
static lanepool_lane_t *next_lane(lanepool_t *pool, int b) {
  uint32_t lanes = pool->lanes_per_band;
  if (lanes == 1) return pool->lanes[b];
  if (rotation.pool != pool) {
    rotation.pool = pool;
    rotation.started = 0;
  }
  if (!(rotation.started & (1u << b))) {
    rotation.next[b] = atomic_fetch_add_explicit(&pool->rr[b].value, 1, memory_order_relaxed);
    rotation.started |= 1u << b;
  } else {
    rotation.next[b]++;
  }
  uint32_t n = rotation.next[b];
  /* A lane spinning idle (`warm`, its index + 1), claimed for this caller alone: it
   * starts the work without a wake. The rotation then goes on after it, so the next
   * pick is another lane, as round-robin's. */
  _Atomic uint32_t *warm = &pool->warm[b].value;
  uint32_t w = atomic_load_explicit(warm, memory_order_relaxed);
  if (w && atomic_compare_exchange_strong_explicit(warm, &w, 0, memory_order_relaxed,
                                                   memory_order_relaxed)) {
    rotation.next[b] = n + (w + lanes - n % lanes) % lanes - 1; /* next: n' = w (mod lanes) */
    return pool->lanes[(uint32_t)b * lanes + w - 1];
  }
  return pool->lanes[(uint32_t)b * lanes + n % lanes];
}

int lanepool_next_lane(lanepool_t *pool, lanepool_qos_t qos, lanepool_lane_t **out) {
  int b = lanepool_band_index(qos);
  if (!pool || !out || b < 0) return EINVAL;
  if (lanepool__forked(pool->generation)) return EOWNERDEAD;
  *out = next_lane(pool, b);
  return 0;
}

int lanepool_next_other_lane(lanepool_t *pool, lanepool_qos_t qos, lanepool_lane_t **out) {
  int rc = lanepool_next_lane(pool, qos, out);
  /* The caller's lane is running (this call), so it is never the spinning one handed
   * out first: the rotation's next step is another lane. */
  for (uint32_t tries = 1; !rc && *out == lanepool__current && tries < pool->lanes_per_band;
       tries++)
    *out = next_lane(pool, lanepool_band_index(qos));
  return rc;
}

int lanepool_get_lane(lanepool_t *pool, lanepool_qos_t qos, uint32_t index, lanepool_lane_t **out) {
  int b = lanepool_band_index(qos);
  if (!pool || !out || b < 0 || index >= pool->lanes_per_band) return EINVAL;
  if (lanepool__forked(pool->generation)) return EOWNERDEAD;
  *out = pool->lanes[(uint32_t)b * pool->lanes_per_band + index];
  return 0;
}

int lanepool_rescue_lane(lanepool_t *pool, lanepool_qos_t qos, lanepool_lane_t **out) {
  int b = lanepool_band_index(qos);
  if (!pool || !out || b < 0) return EINVAL;
  if (lanepool__forked(pool->generation)) return EOWNERDEAD;
  *out = lanepool__rescue_lane(pool, (uint32_t)b);
  return 0;
}

int lanepool_band_depth(lanepool_t *pool, lanepool_qos_t qos, uint64_t *out) {
  int b = lanepool_band_index(qos);
  if (!pool || !out || b < 0) return EINVAL;
  if (lanepool__forked(pool->generation)) return EOWNERDEAD;
  *out = lanepool__bandq_depth(&pool->bands[b]);
  return 0;
}

/* lanepool_async_flags and lanepool_async2: arg NULL for a one-argument task.
 * Band work goes into the band's queue, where every thread of the band can take it
 * (bandq.c); LANEPOOL_SUBMIT_LOCAL is accepted and means nothing more: the calling
 * thread, if it is the band's, takes the job itself when it is back unless a thread
 * that was free already did. */
static int pool_async(lanepool_t *pool, lanepool_qos_t qos, lanepool_fn fn, void *ctx, void *arg,
                      unsigned flags) {
  int b = lanepool_band_index(qos);
  if (!pool || !fn || b < 0 || (flags & ~(LANEPOOL_SUBMIT_CONTINUATION | LANEPOOL_SUBMIT_LOCAL)))
    return EINVAL;
  if (lanepool__forked(pool->generation)) return EOWNERDEAD;
  const void *outer = lanepool__call_enter(pool);
  int rc = lanepool__band_push(pool, (uint32_t)b, fn, ctx, arg,
                               (flags & LANEPOOL_SUBMIT_CONTINUATION) ? LANEPOOL__PUSH_OWN : 0);
  lanepool__call_leave(outer);
  return rc;
}

int lanepool_async_flags(lanepool_t *pool, lanepool_qos_t qos, lanepool_fn fn, void *ctx,
                         unsigned flags) {
  return pool_async(pool, qos, fn, ctx, NULL, flags);
}

int lanepool_async(lanepool_t *pool, lanepool_qos_t qos, lanepool_fn fn, void *ctx) {
  return pool_async(pool, qos, fn, ctx, NULL, 0);
}

int lanepool_async2(lanepool_t *pool, lanepool_qos_t qos, lanepool_fn2 fn, void *a, void *b) {
  if (!fn || !b) return EINVAL;
  return pool_async(pool, qos, (lanepool_fn)(void (*)(void))fn, a, b, 0);
}

int lanepool_info_sized(const lanepool_t *pool, lanepool_info_t *out) {
  if (!pool || !out || !lanepool__size_accepted(out->struct_size, sizeof *out)) return EINVAL;
  if (lanepool__forked(pool->generation)) return EOWNERDEAD;
  lanepool_info_t full;
  memset(&full, 0, sizeof full);
  memcpy(full.name, pool->name, sizeof full.name);
  full.lanes_per_band = pool->lanes_per_band;
  full.ring_capacity = pool->ring_capacity;
  full.hard_capacity = pool->hard_capacity;
  full.shut_down = !lanepool__life_open(pool);
  full.is_default = pool->is_default;
  full.struct_size = out->struct_size;
  memcpy(out, &full, out->struct_size); /* an older caller's prefix */
  return 0;
}
