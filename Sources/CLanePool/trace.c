/*
 * trace.c - an event trace of the lanes, for finding out why a job ran when it did.
 *
 * Built with LANEPOOL_TRACE only; written at exit to LANEPOOL_TRACE_FILE
 * (docs/reliability.md, "Tracing a schedule"). One line per event:
 *
 *   <CLOCK_REALTIME ns> <event> <lane> <calling lane> <source> <ctx> <id> <cpu> <fn>
 *   <thread> <tid>
 *
 * lanes as `band.index` (index `r`: the band's rescue lane), `-` for a thread that is
 * no lane (and for a push of band work, whose band is its source, `b0` to `b4`); source,
 * for `run`: own (its lane's queue), band (a job of its band's queue), adopted (the queue
 * of a lane whose thread was away), rescue (the rescue thread's); for `unpark`, yield if
 * it yielded to its waker (park.c, yield_to_waker); id, for `push`: what the optional hook
 * lanepool_trace_job_id(fn, ctx) returned (0 without one; a Swift shim can return the
 * job's task id); fn, the task's function (hex; `# exe` and `# base` at the top name the
 * executable and where it is mapped, to name it: scripts/trace-export); thread, the
 * lane of the thread the event happened on (`-`: a thread of no pool) and tid its
 * kernel thread id. The wall clock, not the TSC, so that lines can be matched with a
 * program's own timestamped output.
 */
#define _GNU_SOURCE /* sched_getcpu */
#include "internal.h"

#ifdef LANEPOOL_TRACE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define LANEPOOL__TRACE_CAP (1u << 22)

typedef struct {
  _Atomic uint64_t ns; /* stored last (release): 0 while the event is being written */
  uint64_t ctx;
  uint64_t id;
  uint64_t fn;
  int32_t tid;
  int16_t thread; /* lane_id of the calling thread's own lane */
  uint8_t kind, source;
  int16_t lane, from; /* band * 256 + index; -1: no lane; index 255: the rescue lane */
  int16_t cpu;        /* where the calling thread ran (sched_getcpu) */
} trace_event;

static trace_event *events;
static _Atomic uint64_t next_event;
static pthread_once_t trace_once = PTHREAD_ONCE_INIT;
static pid_t trace_pid; /* a forked child that exits does not write the parent's events */

__attribute__((weak)) uint64_t lanepool_trace_job_id(void *fn, void *ctx);

static const char *const kind_names[] = {"push", "run", "end", "park", "unpark", "wake", "boost"};
static const char *const source_names[] = {"own", "band", "adopted", "rescue"};
static const char *const band_names[] = {"b0", "b1", "b2", "b3", "b4"};

static void lane_name(char *buf, size_t size, int16_t id) {
  if (id < 0)
    snprintf(buf, size, "-");
  else if ((id & 255) == 255)
    snprintf(buf, size, "%d.r", id >> 8);
  else
    snprintf(buf, size, "%d.%d", id >> 8, id & 255);
}

static void trace_dump(void) {
  const char *pattern = getenv("LANEPOOL_TRACE_FILE");
  if (!pattern || !events || getpid() != trace_pid) return;
  char path[4096];
  const char *p = strstr(pattern, "%p");
  if (p)
    snprintf(path, sizeof path, "%.*s%d%s", (int)(p - pattern), pattern, (int)getpid(), p + 2);
  else
    snprintf(path, sizeof path, "%s", pattern);
  FILE *f = fopen(path, "w");
  if (!f) return;
  /* Where the executable is mapped, so that a task's fn can be named. */
  char exe[4096];
  ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (len > 0) {
    exe[len] = '\0';
    fprintf(f, "# exe %s\n", exe);
    FILE *maps = fopen("/proc/self/maps", "r");
    char line[4600];
    while (maps && fgets(line, sizeof line, maps)) {
      unsigned long lo, off;
      char perms[8];
      if (sscanf(line, "%lx-%*x %7s %lx", &lo, perms, &off) == 3 && strstr(line, exe)) {
        fprintf(f, "# base %lx\n", lo - off);
        break;
      }
    }
    if (maps) fclose(maps);
  }
  uint64_t n = atomic_load(&next_event);
  if (n > LANEPOOL__TRACE_CAP) {
    fprintf(f, "# %llu events dropped\n", (unsigned long long)(n - LANEPOOL__TRACE_CAP));
    n = LANEPOOL__TRACE_CAP;
  }
  for (uint64_t i = 0; i < n; i++) {
    trace_event *e = &events[i];
    uint64_t ns = atomic_load_explicit(&e->ns, memory_order_acquire);
    if (!ns) continue; /* claimed, not yet written (the lanes run on during the dump) */
    char lane[16], from[16], thread[16];
    lane_name(lane, sizeof lane, e->lane);
    lane_name(from, sizeof from, e->from);
    lane_name(thread, sizeof thread, e->thread);
    fprintf(f, "%llu %s %s %s %s %llx %llu %d %llx %s %d\n", (unsigned long long)ns,
            kind_names[e->kind], lane, from,
            e->kind == LANEPOOL__TRACE_RUN      ? source_names[e->source & 3]
            : e->kind == LANEPOOL__TRACE_UNPARK ? (e->source ? "yield" : "-")
            : (e->kind == LANEPOOL__TRACE_PUSH && e->lane < 0) || e->kind == LANEPOOL__TRACE_BOOST
                ? band_names[e->source % 5]
                : "-",
            (unsigned long long)e->ctx, (unsigned long long)e->id, e->cpu,
            (unsigned long long)e->fn, thread, (int)e->tid);
  }
  fclose(f);
}

static void trace_init(void) {
  if (!getenv("LANEPOOL_TRACE_FILE")) return;
  trace_pid = getpid();
  events = calloc(LANEPOOL__TRACE_CAP, sizeof *events);
  if (events) atexit(trace_dump);
}

static int16_t lane_id(const lanepool_lane_t *lane) {
  if (!lane) return -1;
  return (int16_t)(lane->band * 256 + (lane->spare ? 255 : lane->index));
}

void lanepool__trace(unsigned kind, const lanepool_lane_t *lane, unsigned source, void *fn,
                     void *ctx) {
  pthread_once(&trace_once, trace_init);
  if (!events) return;
  uint64_t i = atomic_fetch_add_explicit(&next_event, 1, memory_order_relaxed);
  if (i >= LANEPOOL__TRACE_CAP) return;
  trace_event *e = &events[i];
  e->ctx = (uint64_t)(uintptr_t)ctx;
  e->id =
      kind == LANEPOOL__TRACE_PUSH && lanepool_trace_job_id ? lanepool_trace_job_id(fn, ctx) : 0;
  e->kind = (uint8_t)kind;
  e->source = (uint8_t)source;
  e->lane = lane_id(lane);
  e->from = lane_id(lanepool__current);
  e->thread = lane_id(lanepool__thread_lane);
  e->fn = (uint64_t)(uintptr_t)fn;
  static __thread int32_t tid;
  if (!tid) tid = (int32_t)syscall(SYS_gettid);
  e->tid = tid;
  e->cpu = (int16_t)sched_getcpu();
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  atomic_store_explicit(&e->ns, (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec,
                        memory_order_release);
}
#endif
