/*
 * lanepool.h - LanePool's public C API.
 *
 * A pool has five QoS bands; a band has N lanes; a lane is one pthread that runs
 * the tasks of one FIFO ring, one at a time, in submission order.
 *
 * fork(): a pool's threads exist only in the process that created it. In a child,
 * every call on such a pool or its lanes returns EOWNERDEAD without taking any lock
 * (nothing blocks, nothing is freed); the child may create new pools, and
 * lanepool_default() gives it a new default pool. A task that calls fork() gets a
 * child that is a copy of the lane thread alone: when that task returns in the child,
 * the child writes one line to stderr and _exit(0)s; it never runs the lane's queue.
 * So does a child forked inside a stall log callback (on the timer thread) when the
 * callback returns in the child.
 *
 * A task that ends its own thread (pthread_exit, or cancellation at a cancellation
 * point) counts as run; the lane starts a successor thread that runs the rest of its
 * queue (its thread id changes; it applies the band's policy and placement again). Run
 * by a sync's waiter (lanepool_lane_sync), it ends the waiter's thread: that sync is
 * never answered (its caller is gone) and its closure never runs; the lanes that thread
 * held are given back and their tasks counted as run.
 *
 * Conventions, for every function below:
 *  - The return value is 0 on success or a positive errno value. errno itself is
 *    never used to report an error and is preserved across calls.
 *  - When a submit function returns non-zero the task was NOT accepted: the caller
 *    still owns `ctx` and must free it if needed. When it returns 0 the task will
 *    either run exactly once or, after a cancelling shutdown, be handed exactly once
 *    to the discard callback.
 *  - All functions are thread-safe unless stated otherwise. Pointers to a pool or
 *    lane must not be used after lanepool_destroy() of that pool has started.
 *  - Structs the caller allocates and passes in by pointer (lanepool_config_t,
 *    lanepool_info_t, lanepool_lane_info_t, lanepool_band_policy_t,
 *    lanepool_band_token_t) start with `uint32_t struct_size`: sizeof the struct as the
 *    caller's header defines it, so a later library can tell an older caller's smaller
 *    struct from its own and add fields without breaking it. It is set for you: by
 *    lanepool_config_init() for a config, and by the inline wrappers lanepool_info(),
 *    lanepool_lane_info(), lanepool_default_policy() and lanepool_thread_enter_band()
 *    for the structs they fill (each calls its exported *_sized function). A size the
 *    library does not accept is EINVAL, before anything else is read or written. This
 *    library accepts exactly its own sizes; the rule for later ones is in
 *    docs/c-library.md. Element types of arrays and structs only ever embedded
 *    (lanepool_topology_t, lanepool_topology_node_t, lanepool_lane_placement_t,
 *    lanepool_applied_t), and lanepool_boost_t, have no size field: they are frozen, and
 *    a release that needs more adds a new type.
 */
#ifndef LANEPOOL_H
#define LANEPOOL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/** The library's version; lanepool_version() returns the run-time library's. */
#define LANEPOOL_VERSION_MAJOR 0
#define LANEPOOL_VERSION_MINOR 4
#define LANEPOOL_VERSION_PATCH 0
/** The version as one integer, major * 10000 + minor * 100 + patch (0.4.0 is 400), for
 *  `#if LANEPOOL_VERSION >= ...`. */
#define LANEPOOL_VERSION                                                                           \
  (LANEPOOL_VERSION_MAJOR * 10000 + LANEPOOL_VERSION_MINOR * 100 + LANEPOOL_VERSION_PATCH)
#define LANEPOOL_STRINGIFY_(x)  #x
#define LANEPOOL_XSTRINGIFY_(x) LANEPOOL_STRINGIFY_(x)
/** The version as a string, "0.4.0". */
#define LANEPOOL_VERSION_STRING                                                                    \
  LANEPOOL_XSTRINGIFY_(LANEPOOL_VERSION_MAJOR)                                                     \
  "." LANEPOOL_XSTRINGIFY_(LANEPOOL_VERSION_MINOR) "." LANEPOOL_XSTRINGIFY_(LANEPOOL_VERSION_PATCH)

/** Marks the public API: the only symbols a shared build of the library exports (it is
 *  compiled with -fvisibility=hidden). */
#if defined(__GNUC__) || defined(__clang__)
#define LANEPOOL_API __attribute__((visibility("default")))
#else
#define LANEPOOL_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/** The library's version string, "MAJOR.MINOR.PATCH" (LANEPOOL_VERSION_STRING of the
 *  library that is linked, which may be newer than the header a caller was built with). */
LANEPOOL_API const char *lanepool_version(void);

/** QoS classes, with the raw values of Apple's qos_class_t. */
typedef enum lanepool_qos {
  LANEPOOL_QOS_USER_INTERACTIVE = 0x21,
  LANEPOOL_QOS_USER_INITIATED = 0x19,
  LANEPOOL_QOS_DEFAULT = 0x15,
  LANEPOOL_QOS_UTILITY = 0x11,
  LANEPOOL_QOS_BACKGROUND = 0x09,
} lanepool_qos_t;

/** Number of QoS bands in every pool. */
#define LANEPOOL_BAND_COUNT            5
/** Largest number of lanes per band. */
#define LANEPOOL_MAX_LANES_PER_BAND    64
/** max_spinning_lanes value meaning "no limit". */
#define LANEPOOL_SPIN_UNLIMITED        0xFFFFFFFFu
/** lanes_per_band value meaning "one lane per CPU the process may run on". */
#define LANEPOOL_LANES_PER_CPU         0xFFFFFFFFu
/** Smallest and largest ring capacity (slots per lane; a power of two). */
#define LANEPOOL_MIN_RING_CAPACITY     2u
#define LANEPOOL_MAX_RING_CAPACITY     (1u << 20)
/** Ring capacity used when the config says 0. */
#define LANEPOOL_DEFAULT_RING_CAPACITY 1024u
/** Longest pool name kept (longer names are truncated; thread names shorter still). */
#define LANEPOOL_MAX_NAME              31

typedef struct lanepool lanepool_t;
typedef struct lanepool_lane lanepool_lane_t;

/** A task: a plain function pointer and its context. It must return, or end its
 *  thread (pthread_exit and cancellation are handled: the lane goes on). A C++
 *  exception that leaves it on a lane's thread ends the process (std::terminate), as
 *  from any thread's start routine; a longjmp out of it is undefined. For a function
 *  run inline by lanepool_lane_sync, see there. */
typedef void (*lanepool_fn)(void *ctx);

/** A two-argument task (lanepool_lane_async2): a function and the two words it is called
 *  with, fn(a, b). A member function and its object, or a closure's code and context,
 *  travel without a separate allocation. */
typedef void (*lanepool_fn2)(void *a, void *b);

/** What the discard callback's `ctx` points to for a two-argument task: its two words,
 *  as submitted. */
typedef struct lanepool_task2 {
  void *a;
  void *b;
} lanepool_task2_t;

/**
 * Receives each task that a cancelling shutdown removed from a ring without running
 * it, and each pending timer's task, so that its owner can release `ctx`. Called on
 * the thread that drives the shutdown (the one whose lanepool_shutdown call started
 * it; for a cancel that escalated a drain, the draining caller's thread), after every
 * lane and the timer thread have exited: lane by lane in FIFO order, then timers in
 * deadline order. No library lock is held: the callback may submit to other pools; a
 * lanepool_shutdown() of this pool from it returns EALREADY at once, a
 * lanepool_destroy() EDEADLK.
 *
 * A two-argument task (lanepool_lane_async2, lanepool_async2) arrives with `fn` its
 * lanepool_fn2 converted to lanepool_fn (convert it back before calling it; never call
 * it as a lanepool_fn) and `ctx` pointing to a lanepool_task2_t holding its `a` and `b`.
 * That struct lives only during the call: copy what you need out of it, do not keep
 * the pointer. The callback tells the two kinds apart by `fn` alone, so a function
 * submitted both ways (lanepool_lane_async and lanepool_lane_async2) cannot be told
 * apart here: submit each function one way only if you cancel pools.
 */
typedef void (*lanepool_discard_fn)(lanepool_fn fn, void *ctx, void *discard_arg);

/* ---- QoS -> priority table --------------------------------------------------- */

/** GCD's priority classes (dispatch_queue_priority_t values), from the QoS table:
 *  userInteractive, userInitiated -> HIGH; default -> DEFAULT; utility -> LOW;
 *  background -> BACKGROUND. */
typedef enum lanepool_priority_class {
  LANEPOOL_PRIORITY_HIGH = 2,
  LANEPOOL_PRIORITY_DEFAULT = 0,
  LANEPOOL_PRIORITY_LOW = -2,
  LANEPOOL_PRIORITY_BACKGROUND = -32768,
} lanepool_priority_class_t;

/** Scheduling policies (Linux's SCHED_* values). FIFO and RR need
 *  lanepool_config_t.allow_realtime = 1. */
typedef enum lanepool_sched {
  LANEPOOL_SCHED_OTHER = 0,
  LANEPOOL_SCHED_FIFO = 1,
  LANEPOOL_SCHED_RR = 2,
  LANEPOOL_SCHED_BATCH = 3,
  LANEPOOL_SCHED_IDLE = 5,
} lanepool_sched_t;

/** I/O priority classes (ioprio_set(2)); NONE leaves the thread's I/O priority alone. */
typedef enum lanepool_ioprio_class {
  LANEPOOL_IOPRIO_NONE = 0,
  LANEPOOL_IOPRIO_RT = 1,
  LANEPOOL_IOPRIO_BE = 2,
  LANEPOOL_IOPRIO_IDLE = 3,
} lanepool_ioprio_class_t;

/** What a band's lanes ask the kernel for. Applied by each lane from inside its own
 *  thread before its first task. See docs/priorities.md. */
typedef struct lanepool_band_policy {
  /** sizeof(lanepool_band_policy_t) of the caller's header (see the top of this file).
   *  Read by lanepool_default_policy_sized(); inside a lanepool_config_t the config's
   *  struct_size decides and this one is not read. */
  uint32_t struct_size;
  lanepool_sched_t sched; /* scheduling policy */
  int rt_priority;        /* 1...99 for FIFO/RR; must be 0 otherwise */
  int nice;               /* -20...19 */
  lanepool_ioprio_class_t ioprio_class;
  int ioprio_level;        /* 0 (highest)...7 for RT and BE; 0 otherwise */
  uint64_t timer_slack_ns; /* 0 leaves the inherited slack; at most
                              LANEPOOL_MAX_TIMER_SLACK_NS */
  /* EEVDF time slice (sched_setattr's sched_runtime for SCHED_OTHER/BATCH, Linux
   * 6.12+; 100000...100000000 ns): a waking thread with a shorter slice may preempt
   * the running one. 0 leaves the kernel's default. Older kernels ignore it. */
  uint64_t slice_ns;
} lanepool_band_policy_t;

/** The largest timer_slack_ns a band policy may ask for: 1 s (the kernel takes more, up
 *  to ULONG_MAX, and a thread's sleeps then last that long). */
#define LANEPOOL_MAX_TIMER_SLACK_NS 1000000000u

/** The priority class of a QoS (the seeds' table). 0 or EINVAL. */
LANEPOOL_API int lanepool_priority_class(lanepool_qos_t qos, lanepool_priority_class_t *out);

/** LanePool's default OS policy for a QoS (docs/priorities.md) into *out, whose
 *  struct_size must be one this library accepts. 0 or EINVAL (bad qos, NULL out, a
 *  struct_size not accepted: then *out is unchanged). */
LANEPOOL_API int lanepool_default_policy_sized(lanepool_qos_t qos, lanepool_band_policy_t *out);

/** lanepool_default_policy_sized() with out->struct_size set to this header's size. */
static inline int lanepool_default_policy(lanepool_qos_t qos, lanepool_band_policy_t *out) {
  if (out) out->struct_size = (uint32_t)sizeof(lanepool_band_policy_t);
  return lanepool_default_policy_sized(qos, out);
}

/* ---- placement ---------------------------------------------------------------- */

typedef enum lanepool_placement {
  /** Lanes float over the CPUs the process may use. */
  LANEPOOL_PLACEMENT_NONE = 0,
  /** Lane i of every band is pinned to the i-th CPU (mod count) of the creating
   *  thread's allowed set (sched_getaffinity: taskset and cpusets are honoured). */
  LANEPOOL_PLACEMENT_CORES = 1,
  /** Lane i of every band is pinned to cpus[i % cpu_count]; every CPU must be in the
   *  allowed set. */
  LANEPOOL_PLACEMENT_CPU_LIST = 2,
  /** Lanes are spread over NUMA nodes in proportion to each node's allowed CPUs; a
   *  lane is bound to its node's CPUs and its ring and state live in its node's
   *  memory. Needs libnuma at run time (a build with LANEPOOL_HAVE_NUMA where
   *  numa_available() works), also with an injected topology; lanepool_plan_placement
   *  plans it from an injected topology without libnuma. */
  LANEPOOL_PLACEMENT_NUMA = 3,
} lanepool_placement_t;

/** One NUMA node: its id and CPUs. */
typedef struct lanepool_topology_node {
  int node;
  uint32_t cpu_count;
  const int *cpus;
} lanepool_topology_node_t;

/** A machine's NUMA topology, for tests and tools to inject (see topology in
 *  lanepool_config_t). */
typedef struct lanepool_topology {
  uint32_t node_count;
  const lanepool_topology_node_t *nodes;
} lanepool_topology_t;

/** Where one lane index goes (the same for every band). */
typedef struct lanepool_lane_placement {
  int node; /* NUMA node, or -1 when not placed per node */
  int cpu;  /* the one CPU it is pinned to, or -1 (floating, or bound to its node) */
} lanepool_lane_placement_t;

/**
 * Computes where each lane index goes, without starting anything: the rule that
 * lanepool_create applies. For NUMA, lanes are apportioned to nodes by the largest
 * remainder method on the nodes' CPU counts (ties to the lower node), in node order;
 * `topology` NULL means the machine's, through libnuma (ENOTSUP without it, or when
 * numa_available() < 0). `allowed` (count CPUs) restricts the CPUs considered; NULL
 * means the calling thread's sched_getaffinity set.
 * Returns 0; EINVAL (bad placement, NULL out, count < lanes_per_band, a CPU list
 * entry outside the allowed set, a topology with no allowed CPU); ENOTSUP.
 */
LANEPOOL_API int lanepool_plan_placement(lanepool_placement_t placement, uint32_t lanes_per_band,
                                         const int *cpus, uint32_t cpu_count,
                                         const lanepool_topology_t *topology, const int *allowed,
                                         uint32_t allowed_count, lanepool_lane_placement_t *out,
                                         uint32_t out_count);

/** The calling thread's allowed CPUs (sched_getaffinity), ascending: up to `max` of
 *  them in `out`, their total in *count. 0, EINVAL (NULL out or count), or the errno
 *  of sched_getaffinity. */
LANEPOOL_API int lanepool_allowed_cpus(int *out, uint32_t max, uint32_t *count);

/** 1 if this build has libnuma support and numa_available() says yes, else 0. */
LANEPOOL_API int lanepool_numa_supported(void);

/* ---- logging ------------------------------------------------------------------ */

typedef enum lanepool_log_level {
  LANEPOOL_LOG_INFO = 0,
  LANEPOOL_LOG_WARNING = 1,
} lanepool_log_level_t;

/** Receives LanePool's rare log lines (never on the hot path): the priority settings
 *  the kernel refused, once per pool, on the creating thread during lanepool_create;
 *  stalled lanes, on the pool's timer thread, with no library lock held; an escalation
 *  the kernel limited (see lanepool_lane_sync), once per pool, on the thread that
 *  applied it (a waiter, or a lane of the pool), with no library lock held. The timer
 *  thread is one of the pool's threads: lanepool_shutdown / lanepool_destroy of the
 *  pool from the callback return EDEADLK. lanepool_destroy of the pool from a line a
 *  waiter logs (inside its lanepool_lane_sync on the pool) returns EDEADLK too. */
typedef void (*lanepool_log_fn)(lanepool_log_level_t level, const char *message, void *arg);

/** Pool configuration. Always initialise with lanepool_config_init(). */
typedef struct lanepool_config {
  /** sizeof(lanepool_config_t) of the caller's header, set by lanepool_config_init();
   *  lanepool_create(), lanepool_config_check() and lanepool_default_configure() refuse
   *  a size this library does not accept (EINVAL, field "struct_size"). */
  uint32_t struct_size;
  /** Pool name, used for thread names "<name>-<band>-<i>" (15 bytes, truncated).
   *  NULL means "lanepool". Must not be empty. Copied. */
  const char *name;
  /** Lanes per band: 1...LANEPOOL_MAX_LANES_PER_BAND, or LANEPOOL_LANES_PER_CPU (the
   *  default) for one lane per CPU the process may run on (sched_getaffinity, so
   *  taskset and cpusets are honoured), capped at the maximum. 0 is EINVAL. */
  uint32_t lanes_per_band;
  /** Ring slots per lane: a power of two in [LANEPOOL_MIN_RING_CAPACITY,
   *  LANEPOOL_MAX_RING_CAPACITY], or 0 for LANEPOOL_DEFAULT_RING_CAPACITY. */
  uint32_t ring_capacity;
  /** 0 (default): when a ring is full, tasks go to the lane's overflow list, which
   *  keeps FIFO order and grows as needed, so submission never blocks.
   *  1: the ring capacity is a hard limit; a submit to a full lane returns EAGAIN. */
  int hard_capacity;
  /** Stack size of lane threads in bytes: 0 for the pthread default, or 16384
   *  (PTHREAD_STACK_MIN) ... LANEPOOL_MAX_STACK_SIZE; anything else is EINVAL. */
  size_t stack_size;
  /** Spin budget in nanoseconds per band (index: lanepool_band_index()) before an
   *  idle lane parks on its futex. lanepool_config_init() sets per-band defaults. */
  uint32_t spin_ns[LANEPOOL_BAND_COUNT];
  /** At most this many lanes of the pool spin at once; the others park at once.
   *  0 (default): half of the allowed CPUs or of the cgroup's CPU quota
   *  (lanepool_cpu_quota), whichever is fewer, at least 1, so spinning lanes (which may
   *  run at a higher priority than their producers) never take every core.
   *  LANEPOOL_SPIN_UNLIMITED: no limit. */
  uint32_t max_spinning_lanes;
  /** 0 (default): each lane adapts its spin budget between 0 and spin_ns: a spin that
   *  times out halves it (that CPU was wasted, and the kernel charges it to the lane),
   *  a park that ended sooner than spin_ns grows it to twice that park (at least
   *  doubling it). 1: always spin spin_ns. A spinning lane is handed out first by
   *  lanepool_next_lane and lanepool_async, and parks as soon as it finds no CPU is
   *  idle (see interactive_spin_ns). Any other value is EINVAL. */
  int fixed_spin;
  /** OS policy per band (index: lanepool_band_index()); lanepool_config_init() fills
   *  LanePool's default table. */
  lanepool_band_policy_t policy[LANEPOOL_BAND_COUNT];
  /** 1 to permit SCHED_FIFO / SCHED_RR in `policy`; 0 (default) makes them EINVAL. */
  int allow_realtime;
  /** Where lanes run. LANEPOOL_PLACEMENT_NONE by default. */
  lanepool_placement_t placement;
  /** For LANEPOOL_PLACEMENT_CPU_LIST: the CPUs (copied). */
  const int *cpus;
  uint32_t cpu_count;
  /** For LANEPOOL_PLACEMENT_NUMA: a topology to use instead of libnuma's (copied);
   *  NULL for the machine's. */
  const lanepool_topology_t *topology;
  /** Log sink; NULL for none. */
  lanepool_log_fn log;
  void *log_arg;
  /** Stall detector: a lane running one task longer than this is reported stalled
   *  (lane info, and once per stall through `log`, which must then stay valid for
   *  the pool's life). Checked by the timer thread every threshold/2, so a stall is
   *  seen between 1x and 1.5x the threshold after its task started. 0 (default): off. */
  uint64_t stall_threshold_ns;
  /** The low-latency setting of the userInteractive band. 0 (default): off, that band
   *  spins like the others (spin_ns, fixed_spin, max_spinning_lanes). Otherwise, in
   *  nanoseconds, at most LANEPOOL_MAX_INTERACTIVE_SPIN_NS: one userInteractive lane at
   *  a time stays awake this long after its last task, watching for work, with a budget
   *  that never adapts down and a spinner slot of its own (not counted against
   *  max_spinning_lanes). lanepool_next_lane and lanepool_async hand that lane out
   *  first, so interactive work that comes at least once per this period starts
   *  without a wake. Cost: while it spins, one CPU, at the band's priority; none once
   *  the band has been idle this long. In every band a spinner parks at once when it
   *  finds no CPU is idle: it was preempted (50 us between two polls), or a sibling of
   *  its band has had work queued, awake, without finishing a task for 20 us (it waits
   *  for a CPU, maybe the spinner's: the kernel need not run it when the spinner
   *  yields, since spinning counts against the spinner's share), or the pool's lanes
   *  running tasks are at least the CPUs its lanes may use (at most the cgroup's CPU
   *  quota, which spinning would spend; a lane blocked inside a
   *  task, in read() or a sleep, counts as running: the pool cannot tell). */
  uint32_t interactive_spin_ns;
  /** What the bands' nice values become where the kernel refuses the lowest of them (no
   *  CAP_SYS_NICE, RLIMIT_NICE too low: a container's usual case).
   *  LANEPOOL_NICE_CLAMP (0, default): each refused nice goes as low as permitted, so
   *  the bands above that floor tie there (unprivileged, by default: 0, 0, 0, 4, 10).
   *  LANEPOOL_NICE_SHIFT: every band's nice moves up by one amount, read once at
   *  creation, so that the lowest of them is the lowest the creating thread may set,
   *  capped at 19: the bands keep their order and gaps (unprivileged, by default: 0, 2,
   *  5, 9, 15), at the cost of the pool's default band running below other processes'
   *  nice-0 threads. With the privilege to lower nice that far, no change. Lane info
   *  reports the shifted values as requested. Any other value is EINVAL. */
  int unprivileged_nice;
} lanepool_config_t;

/** lanepool_config_t.unprivileged_nice values. */
#define LANEPOOL_NICE_CLAMP 0
#define LANEPOOL_NICE_SHIFT 1

/** The largest stack_size: 1 GiB. */
#define LANEPOOL_MAX_STACK_SIZE ((size_t)1 << 30)

/** The largest interactive_spin_ns: 100 ms. */
#define LANEPOOL_MAX_INTERACTIVE_SPIN_NS 100000000u

/** Fills the first `struct_size` bytes of `cfg` with defaults and sets
 *  cfg->struct_size. Returns EINVAL (NULL cfg, or a struct_size this library does not
 *  accept: then nothing is written). Call it through lanepool_config_init(). */
LANEPOOL_API int lanepool_config_init_sized(lanepool_config_t *cfg, uint32_t struct_size);

/** Fills `cfg` with defaults, struct_size with this header's sizeof(lanepool_config_t).
 *  Returns EINVAL if cfg is NULL. */
static inline int lanepool_config_init(lanepool_config_t *cfg) {
  return lanepool_config_init_sized(cfg, (uint32_t)sizeof(lanepool_config_t));
}

/**
 * Checks a configuration without creating anything: the same checks, in the same
 * order, that lanepool_create makes before it starts a thread. Returns 0; EINVAL
 * (NULL cfg, or a bad setting); ENOTSUP (NUMA placement without libnuma support, an
 * injected topology too). On error, if `field` is not NULL, *field is set to a static
 * string naming the first offending member as spelled in this struct: "name",
 * "lanes_per_band", "ring_capacity", "hard_capacity", "fixed_spin", "allow_realtime",
 * "stack_size", "stall_threshold_ns", "interactive_spin_ns", "unprivileged_nice",
 * "policy[B].sched",
 * "policy[B].rt_priority", "policy[B].nice",
 * "policy[B].ioprio_class", "policy[B].ioprio_level", "policy[B].slice_ns",
 * "policy[B].timer_slack_ns" (B the band
 * index 0...4), "placement", "cpus" (NULL, empty, or an entry that is negative or
 * outside the calling thread's allowed CPUs), "topology". Thread-safe; never blocks.
 */
LANEPOOL_API int lanepool_config_check(const lanepool_config_t *cfg, const char **field);

/**
 * Creates a pool and starts its 5 x (lanes_per_band + 1) lane threads (each band's
 * lanes and its rescue lane, lanepool_rescue_lane). Returns once every
 * lane is running and parked or ready for tasks.
 * Returns 0, EINVAL (NULL cfg/out, empty name, bad lane count or ring capacity, a
 * policy out of range, FIFO/RR without allow_realtime, a bad placement or CPU list),
 * ENOTSUP (NUMA placement without libnuma support, an injected topology too),
 * ENOMEM, or the error of pthread_create (EAGAIN when out of threads); on error no
 * thread is left running and *out is unchanged. Blocks while threads start.
 * Priority settings the kernel refuses do NOT fail creation: each lane falls back
 * (docs/priorities.md), records the refusal in its info, and the pool logs one
 * summary line through cfg->log.
 */
LANEPOOL_API int lanepool_create(const lanepool_config_t *cfg, lanepool_t **out);

/**
 * The process-wide default pool, created on first call and never torn down: name
 * "lanepool", min(allowed CPUs, cgroup CPU quota) lanes per band (at most
 * LANEPOOL_MAX_LANES_PER_BAND), or as set by lanepool_default_configure() and the
 * environment (LANEPOOL_DEFAULT_LANES, LANEPOOL_DEFAULT_PLACEMENT, LANEPOOL_DEFAULT_NICE,
 * LANEPOOL_DEFAULT_RING; README). Returns 0, EINVAL (NULL out, or a bad environment value: then no pool is
 * created and nothing is logged) or the error of its creation (a later call tries
 * again).
 */
LANEPOOL_API int lanepool_default(lanepool_t **out);

/**
 * Configures the default pool before its first use: lanepool_default() then creates it
 * from a copy of *cfg instead of lanepool_config_init()'s defaults. The name string and
 * a LANEPOOL_PLACEMENT_CPU_LIST list are copied; log and log_arg are kept as given (log_arg
 * must outlive the process's use of the default pool). A NUMA `topology` is not
 * accepted (EINVAL; use LANEPOOL_PLACEMENT_NUMA without one). lanes_per_band =
 * LANEPOOL_LANES_PER_CPU sizes it as the unconfigured default does: min(allowed CPUs,
 * CPU quota). A later call before first use replaces the earlier one. The
 * environment (LANEPOOL_DEFAULT_LANES, LANEPOOL_DEFAULT_PLACEMENT,
 * LANEPOOL_DEFAULT_NICE, LANEPOOL_DEFAULT_RING, README) still overrides what it sets.
 * Returns 0; EINVAL (NULL cfg, a setting lanepool_config_check refuses, a topology);
 * ENOTSUP (NUMA without libnuma); ENOMEM; EALREADY (the default pool exists: nothing
 * changes). Thread-safe.
 */
LANEPOOL_API int lanepool_default_configure(const lanepool_config_t *cfg);

/**
 * The CPU quota of the calling process's cgroup in whole CPUs, rounded up (at least 1):
 * cgroup v2 cpu.max ("200000 100000" is 2) or v1 cpu.cfs_quota_us / cpu.cfs_period_us,
 * the smallest over the cgroup and its ancestors, read from /proc/self/cgroup and
 * /sys/fs/cgroup. The default pool has min(allowed CPUs, this) lanes per band.
 * Returns 0 with *cpus set; ENOENT (no quota: "max", -1, no cgroup files, or files it
 * cannot parse); EINVAL (NULL cpus). Reads a few small files; no cache.
 */
LANEPOOL_API int lanepool_cpu_quota(uint32_t *cpus);

typedef enum lanepool_shutdown_mode {
  /** A graceful shutdown. Outside submits are refused (ESHUTDOWN) from the moment it
   *  starts; submits from the pool's own lanes (work that its tasks fan out, timers
   *  they set) and continuations (LANEPOOL_SUBMIT_CONTINUATION) are still accepted
   *  and are part of the drain. It ends when nothing is queued, running or pending
   *  (timers included): then intake closes for good and every thread is joined. A
   *  pool whose tasks keep resubmitting themselves never finishes draining: cancel it
   *  (a CANCEL call escalates a drain under way). */
  LANEPOOL_SHUTDOWN_DRAIN = 0,
  /** Stop intake everywhere (own lanes too), let each lane finish its current task,
   *  answer every queued lanepool_lane_sync with ECANCELED, join every thread, then
   *  hand every task still queued and every pending timer to the discard callback. */
  LANEPOOL_SHUTDOWN_CANCEL = 1,
} lanepool_shutdown_mode_t;

/**
 * Stops a pool (see lanepool_shutdown_mode_t for DRAIN and CANCEL). Blocks until
 * every lane thread and the timer thread have been joined. Timers: DRAIN waits for
 * every pending timer to fire (cancel them first if you do not want to wait); CANCEL
 * hands pending timers' tasks to `discard` along with the queued ones. The pool's
 * memory stays valid (info and submit calls keep working, submits return ESHUTDOWN)
 * until lanepool_destroy(). docs/architecture.md draws the state machine.
 * Returns 0; EINVAL (NULL pool, bad mode, CANCEL with NULL discard); EPERM (the
 * default pool); EDEADLK (called from one of this pool's threads: a lane, or the
 * timer thread, where the log callback runs; or from a closure that one of this pool's
 * lanes waits for through lanepool_lane_sync); EOWNERDEAD (a pre-fork pool);
 * EALREADY (a shutdown already happened or is under way: this call waits for it to
 * finish, except from that shutdown's own discard callback, where it returns at once).
 * A CANCEL called while a DRAIN is under way escalates it: the drain stops waiting,
 * the queued tasks go to this call's `discard` (called on the draining thread), and
 * both calls return once everything is joined; this call returns 0.
 */
LANEPOOL_API int lanepool_shutdown(lanepool_t *pool, lanepool_shutdown_mode_t mode,
                                   lanepool_discard_fn discard, void *discard_arg);

/**
 * Shuts the pool down with DRAIN if that has not happened yet, then frees it.
 * Returns 0; EINVAL (NULL, or not a live pool: never created or already destroyed;
 * nothing is touched); EPERM (the default pool); EOWNERDEAD (a pre-fork pool);
 * EDEADLK (called from one of this pool's threads, from its discard callback, from a
 * closure one of its lanes waits for through lanepool_lane_sync, or from a callback
 * run inside a call on the pool, such as a log line of a sync's escalation;
 * the pool is left as it was). If another thread's shutdown is under way, waits for it.
 * A pointer freed and then reused by a new pool is live again: do not destroy twice.
 */
LANEPOOL_API int lanepool_destroy(lanepool_t *pool);

/* ---- Picking lanes ---------------------------------------------------------- */

/** Band index 0...4 of a QoS (userInteractive 0 ... background 4), or -1 if unknown. */
LANEPOOL_API int lanepool_band_index(lanepool_qos_t qos);

/** The next lane of the band (YYDispatchQueueGetForQOS): round-robin, except that a
 *  lane spinning idle (awake, its queue empty, watching for work) goes first, to one
 *  caller: work sent there starts without waking a parked thread; the rotation then
 *  goes on after that lane. Returns 0 or EINVAL (NULL pool/out, unknown qos).
 *  Lock-free: a load and an atomic add (two CASes when a spinning lane is taken). */
LANEPOOL_API int lanepool_next_lane(lanepool_t *pool, lanepool_qos_t qos, lanepool_lane_t **out);

/** As lanepool_next_lane, but never the calling thread's own lane while the band has
 *  another: a task that hands work on, or waits for it with lanepool_lane_sync, gets
 *  another lane of its band, never its own (with one lane per band its own is the only
 *  answer). The rotation moves one step per lane passed over. What Swift's
 *  `queue(for:)` calls. Returns as lanepool_next_lane. */
LANEPOOL_API int lanepool_next_other_lane(lanepool_t *pool, lanepool_qos_t qos,
                                          lanepool_lane_t **out);

/** Lane `index` (0-based) of the band. EINVAL for a bad argument or index. */
LANEPOOL_API int lanepool_get_lane(lanepool_t *pool, lanepool_qos_t qos, uint32_t index,
                                   lanepool_lane_t **out);

/** The band's rescue lane: one more lane per band, whose thread no pick reaches and which
 *  runs band work, and the queues of lanes whose threads are away, once no thread of the
 *  band has finished a task for 100 ms while such work waits (docs/architecture.md,
 *  "The rescue thread"). Tasks may run on it, so lanepool_current_lane() may answer it: a
 *  layer that keeps an object per lane in the userdata word (the Swift facade) sets one
 *  for it too. lanepool_lane_info() and lanepool_lane_position() report it with index
 *  lanes_per_band (lanepool_get_lane() has no such index); its thread is named
 *  `<pool>-<band>-r`. Work queued on it directly (lanepool_lane_async, a sync) runs
 *  there and holds its thread: it rescues nothing meanwhile. 0, EINVAL (bad argument),
 *  EOWNERDEAD (a fork child). */
LANEPOOL_API int lanepool_rescue_lane(lanepool_t *pool, lanepool_qos_t qos, lanepool_lane_t **out);

/** Band work queued now in the band's queue (lanepool_async, band timers): accepted and
 *  not yet started, a snapshot. 0, EINVAL (bad argument), EOWNERDEAD (a fork child). */
LANEPOOL_API int lanepool_band_depth(lanepool_t *pool, lanepool_qos_t qos, uint64_t *out);

/** The lane a key maps to: the same key always gives the same lane of a band, so
 *  tasks submitted with one key run in order. EINVAL for a bad argument. */
LANEPOOL_API int lanepool_lane_for_key(lanepool_t *pool, lanepool_qos_t qos, uint64_t key,
                                       lanepool_lane_t **out);

/** The lane whose task the calling thread runs: the lane whose queue it runs now (its
 *  own, another whose thread is away, or the lane of an inline sync closure), or, while
 *  it runs band work, the lane of its thread (a rescue lane too, lanepool_rescue_lane;
 *  a lane of a lower band for a job it runs lifted, docs/priorities.md), which it does
 *  not hold then: use lanepool_lane_held_here() to ask that. 0, EINVAL
 *  (NULL out) or ESRCH (the caller is not a lane thread, nor in an inline closure). */
LANEPOOL_API int lanepool_current_lane(lanepool_lane_t **out);

/** *held = 1 if the calling thread runs `lane`'s queue now, holding its exclusion (a task
 *  of the lane, or a sync closure run inline or queued there), else 0: what an actor on
 *  the lane may take as its isolation. 0 or EINVAL. */
LANEPOOL_API int lanepool_lane_held_here(const lanepool_lane_t *lane, int *held);

/* ---- Submitting ------------------------------------------------------------- */

/**
 * Appends a task to a lane's ring. Never blocks, never allocates unless the ring is
 * full (then the overflow list may grow), makes a syscall only to wake a parked lane.
 * Returns 0; EINVAL (NULL lane or fn); ESHUTDOWN (the pool is shutting down);
 * EAGAIN (hard capacity and the ring is full).
 */
LANEPOOL_API int lanepool_lane_async(lanepool_lane_t *lane, lanepool_fn fn, void *ctx);

/** Submit flags for lanepool_lane_async_flags / lanepool_async_flags. */
/** The task continues work the pool already accepted (a Swift executor job, the next
 *  step of a callback chain): a draining pool accepts it from any thread, as it
 *  accepts submits from its own lanes, so the drain runs it. Without the flag a
 *  draining pool accepts work only from its own lanes. */
#define LANEPOOL_SUBMIT_CONTINUATION 1u
/** lanepool_async_flags only, a hint kept for source compatibility: band work goes to
 *  the band's queue whatever the flags, and a thread of the band submitting it usually
 *  takes it itself right after its current task (no hand-off), unless a free thread of
 *  the band took it first (see lanepool_async). What the Swift pool executor passes. */
#define LANEPOOL_SUBMIT_LOCAL        2u

/**
 * Submits fn(ctxs[0]) ... fn(ctxs[count - 1]) to `lane`, in that order, as one batch:
 * one claim on the ring per run of free cells (one CAS for the whole batch when it
 * fits), the rest appended to the overflow list in one step, and one wake check for
 * the lane. FIFO holds with single submits: the batch runs after every task submitted
 * to the lane before the call and before every task submitted after it returns.
 * *accepted (if not NULL) is set to how many were accepted: always a prefix of
 * `ctxs`. Returns 0 when all were; otherwise the error for the first refused one:
 * EAGAIN (hard capacity: the ring is full), ESHUTDOWN, ENOMEM, EOWNERDEAD; EINVAL
 * (NULL lane or fn, or NULL ctxs with count > 0). An empty batch returns 0.
 */
LANEPOOL_API int lanepool_lane_async_many(lanepool_lane_t *lane, lanepool_fn fn, void *const *ctxs,
                                          size_t count, size_t *accepted);

/** As lanepool_lane_async, with flags (0 or LANEPOOL_SUBMIT_CONTINUATION). EINVAL for
 *  an unknown flag. */
LANEPOOL_API int lanepool_lane_async_flags(lanepool_lane_t *lane, lanepool_fn fn, void *ctx,
                                           unsigned flags);

/**
 * Appends the two-argument task fn(a, b) to a lane's ring: as lanepool_lane_async in
 * every respect (never blocks, allocates only when the ring is full, the same errors),
 * with one more word carried through the ring instead of a context the caller would
 * have to allocate. `b` must not be NULL: it is what tells the lane that the task takes
 * two arguments (`a` may be NULL). FIFO holds with every other submit to that lane
 * (lanepool_lane_async, batches, syncs, timers): one order, whatever the kind.
 * Returns 0; EINVAL (NULL lane, fn or b; nothing is queued); ESHUTDOWN; EAGAIN (hard
 * capacity and the ring is full); ENOMEM; EOWNERDEAD. On a non-zero return the task
 * was not accepted and the caller still owns what a and b refer to. A cancelling
 * shutdown hands a queued one to the discard callback as lanepool_discard_fn
 * describes: `fn` converted to lanepool_fn, `ctx` pointing to a lanepool_task2_t {a, b}
 * valid during that call.
 */
LANEPOOL_API int lanepool_lane_async2(lanepool_lane_t *lane, lanepool_fn2 fn, void *a, void *b);

/** As lanepool_lane_async2, with flags (0 or LANEPOOL_SUBMIT_CONTINUATION). EINVAL for
 *  an unknown flag. */
LANEPOOL_API int lanepool_lane_async2_flags(lanepool_lane_t *lane, lanepool_fn2 fn, void *a,
                                            void *b, unsigned flags);

/**
 * As lanepool_lane_async_many for two-argument tasks: submits fn(as[0], bs[0]) ...
 * fn(as[count - 1], bs[count - 1]) as one batch, with the same claims, FIFO, *accepted
 * and errors. Every bs[i] must be non-NULL: otherwise EINVAL and nothing is accepted
 * (checked before anything is queued); EINVAL too for NULL lane or fn, or NULL as or bs
 * with count > 0.
 */
LANEPOOL_API int lanepool_lane_async2_many(lanepool_lane_t *lane, lanepool_fn2 fn, void *const *as,
                                           void *const *bs, size_t count, size_t *accepted);

/**
 * As lanepool_lane_async, but when the lane is full (hard capacity) waits up to
 * `timeout_ns` for room, polling with a backoff from 1 us to 1 ms. Returns 0;
 * ETIMEDOUT (not accepted; the caller keeps ctx); and lanepool_lane_async's errors.
 * Without hard capacity it never waits. Blocks at most about timeout_ns + 1 ms; the
 * deadline saturates, so UINT64_MAX waits for room (or a shutdown) without end.
 */
LANEPOOL_API int lanepool_lane_async_wait(lanepool_lane_t *lane, lanepool_fn fn, void *ctx,
                                          uint64_t timeout_ns);

/**
 * Band-level submit for unordered work (band work): the task goes into the band's queue,
 * which every thread of the band takes from, in FIFO order (docs/architecture.md, "The
 * scheduler"). If no thread of the band is spinning and one is parked, one is woken.
 * Band work never waits behind a busy or blocked lane: any free thread of the band runs
 * it, and the band's rescue thread (lanepool_rescue_lane) runs it once no thread of the
 * band has finished a task for 100 ms. A thread running band work holds no lane: it may
 * sync onto any lane. Lane-bound work (lanepool_lane_async and the other lane submits,
 * lanepool_lane_sync, timers set on a lane) never goes there: it runs in order on its
 * lane. Same returns as lanepool_lane_async (EAGAIN with hard capacity: the band's queue
 * holds ring_capacity x lanes_per_band tasks), plus EINVAL for a NULL pool or unknown
 * qos. lanepool_lane_info_t.tasks_executed counts a band task on the lane whose thread
 * ran it; lanepool_band_depth tells how many wait.
 */
LANEPOOL_API int lanepool_async(lanepool_t *pool, lanepool_qos_t qos, lanepool_fn fn, void *ctx);

/** As lanepool_async, with flags: LANEPOOL_SUBMIT_CONTINUATION, LANEPOOL_SUBMIT_LOCAL.
 *  EINVAL for an unknown flag. */
LANEPOOL_API int lanepool_async_flags(lanepool_t *pool, lanepool_qos_t qos, lanepool_fn fn,
                                      void *ctx, unsigned flags);

/** As lanepool_async for a two-argument task fn(a, b) (see lanepool_lane_async2: `b`
 *  must not be NULL, EINVAL otherwise; the discard callback gets it as there). */
LANEPOOL_API int lanepool_async2(lanepool_t *pool, lanepool_qos_t qos, lanepool_fn2 fn, void *a,
                                 void *b);

/**
 * Runs fn(ctx) on the lane, after every task queued before it, and waits for it to
 * finish. Returns 0 once it ran; EINVAL; ESHUTDOWN (not run); EAGAIN (hard capacity
 * full, not run); EDEADLK (not run: it would wait for itself. Called from this very
 * lane, or from a closure of a chain of nested syncs that holds the lane: a task of A
 * syncs onto B and B's closure syncs onto A, or onto C whose closure syncs onto A; the
 * chain is followed across threads, inline and queued runs alike, where libdispatch
 * stops such a dispatch_sync with an error); EOWNERDEAD (a pre-fork lane); ECANCELED
 * (a cancelling shutdown removed it before it ran; the discard callback is not called
 * for it). Blocks until the task has run or been cancelled. A cancel answers a queued
 * sync as soon as the lane is free (its current task finished), so a task waiting here
 * returns and its thread can be joined. A thread running band work (a task) holds no
 * lane, so its sync never waits for itself, onto its own thread's lane included. While
 * it waits, a thread of the pool runs the lane's queue itself, in order, whenever the
 * lane is free, up to and including its own closure: a thread of the lane's band that
 * holds no lane; and, unless escalation is off for the call, any thread of the pool
 * whose band is the lane's or higher, also inside a lane's task (the awaited work then
 * runs at once at the waiter's priority; docs/priorities.md, "Who runs the awaited
 * work"). A task it runs there that syncs onto a lane the waiter holds is EDEADLK. With
 * LANEPOOL_SYNC_QUEUED only the lane's own thread runs it. (Two lane-bound tasks, on two
 * lanes, that sync onto each other's lane at the same time still deadlock, as
 * dispatch_sync does: neither call is nested in the other.)
 *
 * Inline: when the lane is free (no thread runs its queue: its own thread parked, or away
 * running band work) with nothing queued, the caller takes the lane's exclusion and
 * calls fn(ctx) on its own thread, as dispatch_sync does on an idle serial queue: no
 * hand-off, no wake. Mutual exclusion and per-lane FIFO hold either way (nothing else
 * runs the lane's queue while the caller holds it; work queued meanwhile runs after fn
 * returns). Inside fn, lanepool_current_lane() gives this lane and shutting its pool
 * down returns EDEADLK, as on the lane's thread. What differs: the thread (its id,
 * name, OS priority, CPU placement and signal mask are the caller's), and the stall
 * detector does not watch it. If fn ends the caller's thread, the lane is given back.
 * So it is when a C++ exception leaves an inline fn, if the core was compiled with
 * -fexceptions (the Makefile's library is): the exception reaches the caller. SwiftPM
 * compiles CLanePool without it; there the lane stays held and every later task on it
 * waits forever, so catch inside fn. Run on the lane's thread (not idle, or
 * LANEPOOL_SYNC_QUEUED), the same exception ends the process. Never longjmp out of fn.
 *
 * Escalation: when the caller's band (lanepool_thread_qos) is above the lane's and fn is
 * queued (the lane is busy, or LANEPOOL_SYNC_QUEUED), the lane's thread runs at the
 * caller's band (its pool's policy for that band: scheduling policy, nice, I/O priority
 * and slice; not timer slack, which only a thread may set on itself) from the moment fn
 * is queued until fn returns: the tasks queued before fn run boosted too, in their
 * order (FIFO never changes). Then the lane returns to the highest band still waiting
 * on it, or its own. A task on the lane sees the boost only in its thread's priority
 * (/proc, getpriority). Without CAP_SYS_NICE the kernel lets a thread lower its nice
 * only as far as RLIMIT_NICE allows: the boost then takes as much nice as permitted,
 * with the waiter's policy and slice only if that nice is below the lane's own (at the
 * lane's own nice they made the awaited work slower), and the waiter's I/O priority;
 * the pool logs one line the first time. Disabled per call by LANEPOOL_SYNC_NO_ESCALATION,
 * for the process by the environment variable LANEPOOL_ESCALATION=0.
 */
LANEPOOL_API int lanepool_lane_sync(lanepool_lane_t *lane, lanepool_fn fn, void *ctx);

/** lanepool_lane_sync_flags: run on the lane's own thread even when the lane is idle
 *  (its OS priority, placement, thread name), never inline. */
#define LANEPOOL_SYNC_QUEUED 1u

/** lanepool_lane_sync_flags: do not escalate (see lanepool_lane_sync): the lane keeps
 *  its own band while this caller waits. */
#define LANEPOOL_SYNC_NO_ESCALATION 2u

/** As lanepool_lane_sync, with flags (LANEPOOL_SYNC_QUEUED, LANEPOOL_SYNC_NO_ESCALATION).
 *  EINVAL for an unknown flag. */
LANEPOOL_API int lanepool_lane_sync_flags(lanepool_lane_t *lane, lanepool_fn fn, void *ctx,
                                          unsigned flags);

/* ---- Timers ------------------------------------------------------------------- */

/** Identifies a pending timer; never 0. */
typedef uint64_t lanepool_timer_t;

/** CLOCK_MONOTONIC now, in nanoseconds: the clock timer deadlines use (the same as
 *  DispatchTime.uptimeNanoseconds on Linux). */
LANEPOOL_API uint64_t lanepool_now_ns(void);

/**
 * Submits fn(ctx) to `lane` once CLOCK_MONOTONIC reaches `deadline_ns`: never
 * before. Each pool has one timer thread ("<pool>-tm"), started on the first timer;
 * timers due at the same time fire in the order they were set. Fired timers go
 * through the lane's ring like any task, so per-lane FIFO holds between them.
 * Returns 0 (and the id in *out if out is not NULL); EINVAL; ESHUTDOWN; ENOMEM;
 * the error of pthread_create for the first timer.
 */
LANEPOOL_API int lanepool_lane_async_after(lanepool_lane_t *lane, uint64_t deadline_ns,
                                           lanepool_fn fn, void *ctx, lanepool_timer_t *out);

/** As lanepool_lane_async_after, for any lane of a band (picked when it fires, as
 *  lanepool_async picks). */
LANEPOOL_API int lanepool_async_after(lanepool_t *pool, lanepool_qos_t qos, uint64_t deadline_ns,
                                      lanepool_fn fn, void *ctx, lanepool_timer_t *out);

/**
 * Cancels a pending timer. Returns 0 if it was cancelled before firing: its task
 * will never run and the caller owns `ctx` again (*ctx_out receives it if not NULL).
 * A due timer that waits for room in a full hard-capacity lane has not fired: it can
 * still be cancelled. EALREADY if it has fired (its task is queued in its lane, so a
 * task submitted to that lane after this answer runs after it; or it has run) or a
 * cancelling shutdown took it (to the discard callback); EINVAL for a NULL pool or an
 * id this pool never issued; EOWNERDEAD (a pre-fork pool). Lifetime note:
 * shutdown(DRAIN) waits for every pending timer to fire; shutdown(CANCEL) hands
 * pending timers to the discard callback.
 */
LANEPOOL_API int lanepool_timer_cancel(lanepool_t *pool, lanepool_timer_t timer, void **ctx_out);

/* ---- Introspection ---------------------------------------------------------- */

/** One OS setting a lane asked for, what it got (read back from the kernel), and the
 *  errno of a refusal (0 if none). For sched: a lanepool_sched_t; nice: the nice value;
 *  ioprio: (class << 13) | level, as ioprio_get(2); timer slack: nanoseconds. A
 *  setting left alone has requested == -1 and error 0. */
typedef struct lanepool_applied {
  int64_t requested;
  int64_t got;
  int error;
} lanepool_applied_t;
/* (For slice: nanoseconds, as sched_getattr's sched_runtime; 0 read back means the
 * kernel does not support custom slices.) */

typedef struct lanepool_lane_info {
  uint32_t struct_size; /* sizeof of the caller's header; see lanepool_lane_info() */
  lanepool_qos_t qos;
  uint32_t index; /* index within its band */
  pid_t tid;      /* kernel thread id (as in /proc/self/task); 0 once the lane's thread ended */
  char thread_name[16];
  uint64_t tasks_executed; /* tasks run to completion */
  uint64_t depth;          /* tasks queued now, ring and overflow (approximate) */
  uint64_t overflowed;     /* tasks that went to the overflow list so far */
  /* time spent draining, from the first task found to empty (found by a spinning
   * thread: from the spin's last clock read, at most one spin round earlier) */
  uint64_t busy_ns;
  int running; /* 1 until the lane thread has exited */
  lanepool_applied_t sched;
  lanepool_applied_t nice;
  lanepool_applied_t ioprio;
  lanepool_applied_t timer_slack;
  lanepool_applied_t slice;
  int cpu;               /* pinned CPU, or -1 */
  int node;              /* NUMA node, or -1 when unknown */
  int placement_error;   /* errno of a failed pin/bind (then cpu is -1), or 0 */
  int stalled;           /* 1 while the stall detector sees the current task overrun */
  uint64_t stalled_ns;   /* how long the current task has run, when stalled */
  uint64_t stalls;       /* stalls detected so far */
  uint64_t tasks_stolen; /* tasks of another lane's queue this lane's thread ran while
                            that lane's own thread was away (docs/architecture.md, "The
                            scheduler"); counted in tasks_executed too */
  /* wake-ups on the CPU of the sibling lane's task that woke it, while that task still
   * ran: the lane let it go on first (one sched_yield; docs/architecture.md, "Park and
   * wake") */
  uint64_t yields_to_waker;
} lanepool_lane_info_t;

/** Snapshot of a lane into the first out->struct_size bytes of *out. 0, EINVAL (NULL
 *  lane or out, a struct_size this library does not accept: then *out is unchanged) or
 *  EOWNERDEAD (a fork child). Counters are read without stopping the lane. */
LANEPOOL_API int lanepool_lane_info_sized(const lanepool_lane_t *lane, lanepool_lane_info_t *out);

/** lanepool_lane_info_sized() with out->struct_size set to this header's size. */
static inline int lanepool_lane_info(const lanepool_lane_t *lane, lanepool_lane_info_t *out) {
  if (out) out->struct_size = (uint32_t)sizeof(lanepool_lane_info_t);
  return lanepool_lane_info_sized(lane, out);
}

typedef struct lanepool_info {
  uint32_t struct_size; /* sizeof of the caller's header; see lanepool_info() */
  char name[LANEPOOL_MAX_NAME + 1];
  uint32_t lanes_per_band;
  uint32_t ring_capacity;
  int hard_capacity;
  int shut_down; /* 1 once a shutdown has started */
  int is_default;
} lanepool_info_t;

/** Snapshot of a pool into the first out->struct_size bytes of *out. 0, EINVAL (NULL
 *  pool or out, a struct_size this library does not accept: then *out is unchanged) or
 *  EOWNERDEAD (a fork child). */
LANEPOOL_API int lanepool_info_sized(const lanepool_t *pool, lanepool_info_t *out);

/** lanepool_info_sized() with out->struct_size set to this header's size. */
static inline int lanepool_info(const lanepool_t *pool, lanepool_info_t *out) {
  if (out) out->struct_size = (uint32_t)sizeof(lanepool_info_t);
  return lanepool_info_sized(pool, out);
}

/** The pool a lane belongs to. 0 or EINVAL. */
LANEPOOL_API int lanepool_lane_pool(const lanepool_lane_t *lane, lanepool_t **out);

/** A lane's band and index. 0 or EINVAL. Constant for the lane's life; no locking. */
LANEPOOL_API int lanepool_lane_position(const lanepool_lane_t *lane, lanepool_qos_t *qos,
                                        uint32_t *index);

/** One pointer per lane for the embedding layer (the Swift facade keeps its lane
 *  object there). Not used by LanePool itself. Reads and writes are atomic
 *  (acquire/release). 0 or EINVAL. */
LANEPOOL_API int lanepool_lane_set_userdata(lanepool_lane_t *lane, void *userdata);
LANEPOOL_API int lanepool_lane_userdata(const lanepool_lane_t *lane, void **out);

/* ---- bands for threads LanePool does not own ----------------------------------- */

/** What lanepool_thread_enter_band() changed on the calling thread, and what
 *  lanepool_thread_restore() puts back. Filled by the library: read the five
 *  lanepool_applied_t records (requested, got read back from the kernel, errno of a
 *  refusal, as in lanepool_lane_info_t; a setting left alone has requested == -1);
 *  the saved_* fields are the library's and must not be changed. */
typedef struct lanepool_band_token {
  uint32_t struct_size; /* sizeof of the caller's header; see lanepool_thread_enter_band() */
  pid_t tid;            /* the thread that entered; only it may restore */
  lanepool_qos_t qos;   /* the band entered */
  lanepool_applied_t sched, nice, ioprio, timer_slack, slice;
  int32_t saved_sched, saved_rt_priority, saved_nice, saved_ioprio, saved_band;
  uint32_t saved_flags;
  uint64_t saved_timer_slack, saved_slice;
} lanepool_band_token_t;

/** lanepool_thread_enter_band flag: return EPERM, changing nothing, when the kernel
 *  refuses (or the undo rule withholds) any setting of the band. Without it, what can be
 *  applied is applied and the rest is recorded in the token. */
#define LANEPOOL_BAND_STRICT 1u

/**
 * Gives the calling thread, which LanePool does not own (an event loop, a thread of
 * your own), the OS treatment of a band, from LanePool's default table
 * (lanepool_default_policy): scheduling policy, nice, I/O priority, timer slack, EEVDF
 * slice, applied in that order and read back, as a lane applies them. Placement is not
 * changed. *out receives the token that lanepool_thread_restore() takes to put every
 * one of these back; tokens nest (restore them in reverse order).
 *
 * The undo rule: a setting is applied only if the thread may put it back afterwards.
 * Without CAP_SYS_NICE a thread may raise its nice but lower it only as far as
 * RLIMIT_NICE allows (20 - rlimit), so entering a band of higher nice than the thread's
 * is withheld unless the thread may come back (nice.error EPERM, nice.got unchanged);
 * SCHED_IDLE likewise (a thread may leave it only under the same rule; falls back to
 * SCHED_BATCH). Lowering nice, when refused, goes as low as permitted (as lanes do).
 * While entered, the thread counts as of that band for escalation (a
 * lanepool_lane_sync from it onto a lower band's lane boosts that lane to this band).
 *
 * Returns 0 (some settings may still be recorded as refused, see
 * LANEPOOL_BAND_STRICT); EINVAL (unknown qos or flag, NULL out, a struct_size not
 * accepted); EBUSY (the caller is a lane's own thread: lanes have their band); EPERM
 * (LANEPOOL_BAND_STRICT and a setting refused or withheld: the thread is as it was).
 */
LANEPOOL_API int lanepool_thread_enter_band_sized(lanepool_qos_t qos, unsigned flags,
                                                  lanepool_band_token_t *out);

/** lanepool_thread_enter_band_sized() with out->struct_size set to this header's size. */
static inline int lanepool_thread_enter_band(lanepool_qos_t qos, unsigned flags,
                                             lanepool_band_token_t *out) {
  if (out) out->struct_size = (uint32_t)sizeof(lanepool_band_token_t);
  return lanepool_thread_enter_band_sized(qos, flags, out);
}

/**
 * Puts back what lanepool_thread_enter_band() changed on this thread: policy (and
 * real-time priority, and SCHED_RESET_ON_FORK, which enter keeps too), nice, I/O
 * priority, timer slack, slice; and the band the thread counts as for escalation.
 * Settings the band left alone are not touched. Call it on the thread that entered, or,
 * in the child of a fork() that thread made, on its copy. Restoring a token twice is
 * harmless.
 * Returns 0; EINVAL (NULL token, a struct_size not accepted, another thread's token);
 * or the errno of the first setting the kernel refused to put back (the others are put
 * back all the same; the undo rule makes this rare: another thread changed this one's
 * priority meanwhile, or its privileges were dropped).
 */
LANEPOOL_API int lanepool_thread_restore(const lanepool_band_token_t *token);

/** The band the calling thread counts as when it waits on a lane (escalation): a lane's
 *  thread (or a caller running a closure inline on a lane), that lane's band, or the
 *  band a waiter boosted it to if higher; a thread inside lanepool_thread_enter_band(),
 *  that band; any other thread, LANEPOOL_QOS_DEFAULT. 0 or EINVAL (NULL out). */
LANEPOOL_API int lanepool_thread_qos(lanepool_qos_t *out);

/** A boost a waiter holds on a lane (lanepool_lane_boost_begin). Frozen; the library's. */
typedef struct lanepool_boost {
  lanepool_lane_t *lane;
  uint32_t band_plus_one; /* 0: holds nothing */
} lanepool_boost_t;

/**
 * For waits LanePool does not see (a semaphore, a condition, a group, a future that a
 * task on `lane` completes): runs the lane at band `qos` until
 * lanepool_lane_boost_end(), as lanepool_lane_sync does for its own waits. Call it
 * before waiting and end it when the wait ends, however it ends (done, timed out,
 * cancelled); a boost held by several waiters lasts until the highest one left ends.
 * A qos not above the lane's band (or escalation disabled) holds nothing and returns 0.
 * Returns 0; EINVAL (NULL lane or out, unknown qos); EOWNERDEAD (a pre-fork lane). End
 * it before the pool is destroyed: lanepool_destroy waits for a begin or an end already
 * under way on one of its lanes (as for every call), but one that starts after destroy
 * was called may find the lane freed. An end that holds nothing touches no lane.
 */
LANEPOOL_API int lanepool_lane_boost_begin(lanepool_lane_t *lane, lanepool_qos_t qos,
                                           lanepool_boost_t *out);

/** lanepool_lane_boost_begin_flags: hold the boost only if the lane is busy now (a task
 *  running, a closure lent to a sync caller, or tasks queued), so that work queued next
 *  would wait behind others. Work that an idle lane starts at once is not boosted: it
 *  waits for no task, only for the lane's wake-up at its own band. Called on the lane
 *  itself (its task, or a closure lent to the caller), only queued tasks count: what
 *  runs is the caller. What Swift jobs and
 *  `Lane.run` use (docs/priorities.md, "Escalation"). The look is a snapshot (the lane
 *  may go idle, or another producer queue ahead, right after): best effort. */
#define LANEPOOL_BOOST_IF_BUSY 1u

/** As lanepool_lane_boost_begin, with flags (LANEPOOL_BOOST_IF_BUSY; 0 is
 *  lanepool_lane_boost_begin). A qos not above the lane's band returns 0 holding nothing
 *  without looking at the lane. EINVAL for an unknown flag. */
LANEPOOL_API int lanepool_lane_boost_begin_flags(lanepool_lane_t *lane, lanepool_qos_t qos,
                                                 unsigned flags, lanepool_boost_t *out);

/** Ends a boost from lanepool_lane_boost_begin(); ending it twice is harmless. Not
 *  thread-safe for one boost: end it once, on the waiter's side or on a thread the boost
 *  was handed to with the work (as Swift's lane jobs do: the lane ends it after the job).
 *  0 or EINVAL (NULL). */
LANEPOOL_API int lanepool_lane_boost_end(lanepool_boost_t *boost);

#ifdef __cplusplus
}
#endif
#endif /* LANEPOOL_H */
