/*
 * fuzz_api.c - drives the C API with random sequences of create / submit / keyed
 * submit / band submit / sync / timers / info / shutdown / destroy, with valid and
 * invalid arguments, and checks every return code against a small model of what the
 * API promises; at each pool's end, tasks run + discarded == tasks accepted.
 *
 * Two builds:
 *   standalone (fixed seed, what CI runs under ASan+UBSan):
 *     clang -fsanitize=address,undefined ... Tests/c/fuzz_api.c Sources/CLanePool/(all).c
 *     ./fuzz_api [seed] [rounds]
 *   libFuzzer (coverage-guided):
 *     clang -DLANEPOOL_LIBFUZZER -fsanitize=fuzzer,address,undefined ...
 *     ./fuzz_api_lf -runs=N
 */
#define _GNU_SOURCE
#include "lanepool.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SLOTS 3

typedef struct {
  lanepool_t *pool;
  int live, shut, hard;
  uint32_t lanes;
  uint64_t accepted;
  _Atomic uint64_t ran;
  _Atomic uint64_t discarded;
} slot_t;

static slot_t slots[SLOTS];
static long checks, failures;

#define EXPECT(cond, ...)                                                                          \
  do {                                                                                             \
    checks++;                                                                                      \
    if (!(cond)) {                                                                                 \
      failures++;                                                                                  \
      fprintf(stderr, "fuzz_api: %s:%d: ", __FILE__, __LINE__);                                    \
      fprintf(stderr, __VA_ARGS__);                                                                \
      fputc('\n', stderr);                                                                         \
      abort(); /* libFuzzer keeps the input that got here */                                       \
    }                                                                                              \
  } while (0)

static void run_task(void *ctx) { atomic_fetch_add(&((slot_t *)ctx)->ran, 1); }
static void on_discard(lanepool_fn fn, void *ctx, void *arg) {
  (void)fn;
  (void)arg;
  atomic_fetch_add(&((slot_t *)ctx)->discarded, 1);
}

typedef struct {
  const uint8_t *p;
  size_t n;
} input_t;

static uint32_t take(input_t *in) {
  uint32_t v = 0;
  for (int i = 0; i < 4 && in->n; i++, in->n--) v = (v << 8) | *in->p++;
  return v;
}

static const lanepool_qos_t qos_values[] = {
    LANEPOOL_QOS_USER_INTERACTIVE, LANEPOOL_QOS_USER_INITIATED, LANEPOOL_QOS_DEFAULT,
    LANEPOOL_QOS_UTILITY,          LANEPOOL_QOS_BACKGROUND,     (lanepool_qos_t)0,
    (lanepool_qos_t)0x42};

static lanepool_qos_t pick_qos(uint32_t r, int *valid) {
  lanepool_qos_t q = qos_values[r % 7];
  *valid = lanepool_band_index(q) >= 0;
  return q;
}

static void finish(slot_t *s) {
  EXPECT(atomic_load(&s->ran) + atomic_load(&s->discarded) == s->accepted,
         "ran %llu + discarded %llu != accepted %llu", (unsigned long long)atomic_load(&s->ran),
         (unsigned long long)atomic_load(&s->discarded), (unsigned long long)s->accepted);
  memset(s, 0, sizeof *s);
}

static void op_create(slot_t *s, input_t *in) {
  lanepool_config_t cfg;
  lanepool_config_init(&cfg);
  uint32_t r = take(in);
  static const uint32_t lane_choices[] = {1, 1, 2, 3, 0, 65, LANEPOOL_LANES_PER_CPU};
  static const uint32_t ring_choices[] = {0, 2, 4, 64, 3, 1, 1u << 21};
  cfg.lanes_per_band = lane_choices[r % 7];
  cfg.ring_capacity = ring_choices[(r >> 3) % 7];
  cfg.hard_capacity = (r >> 6) % 5 == 0 ? 2 : (int)((r >> 6) & 1);
  cfg.name = (r >> 9) % 11 == 0 ? "" : "fz";
  int valid =
      cfg.lanes_per_band >= 1 &&
      (cfg.lanes_per_band <= 64 || cfg.lanes_per_band == LANEPOOL_LANES_PER_CPU) &&
      (cfg.ring_capacity == 0 || (cfg.ring_capacity >= 2 && cfg.ring_capacity <= (1u << 20) &&
                                  (cfg.ring_capacity & (cfg.ring_capacity - 1)) == 0)) &&
      (cfg.hard_capacity == 0 || cfg.hard_capacity == 1) && cfg.name[0] != '\0';
  lanepool_t *p = NULL;
  int rc = lanepool_create(&cfg, &p);
  EXPECT(valid ? rc == 0 : rc == EINVAL, "create valid=%d rc=%d", valid, rc);
  if (rc == 0) {
    lanepool_info_t info;
    EXPECT(lanepool_info(p, &info) == 0, "info");
    s->pool = p;
    s->live = 1;
    s->hard = cfg.hard_capacity;
    s->lanes = info.lanes_per_band;
  }
}

static void op_submit(slot_t *s, input_t *in) {
  uint32_t r = take(in);
  int qvalid;
  lanepool_qos_t q = pick_qos(r, &qvalid);
  uint32_t index = (r >> 4) % (s->lanes + 1); /* sometimes out of range */
  int rc;
  switch ((r >> 12) % 5) {
  case 0: { /* a given lane */
    lanepool_lane_t *lane = NULL;
    rc = lanepool_get_lane(s->pool, q, index, &lane);
    int ok = qvalid && index < s->lanes;
    EXPECT(ok ? rc == 0 : rc == EINVAL, "get_lane rc=%d", rc);
    if (!ok) return;
    rc = lanepool_lane_async(lane, (r >> 20) % 13 == 0 ? NULL : run_task, s);
    if ((r >> 20) % 13 == 0) {
      EXPECT(rc == EINVAL, "NULL fn rc=%d", rc);
      return;
    }
    break;
  }
  case 1: { /* keyed */
    lanepool_lane_t *lane = NULL;
    rc = lanepool_lane_for_key(s->pool, q, take(in), &lane);
    EXPECT(qvalid ? rc == 0 : rc == EINVAL, "keyed rc=%d", rc);
    if (!qvalid) return;
    rc = lanepool_lane_async(lane, run_task, s);
    break;
  }
  case 2: /* band level */
    rc = lanepool_async(s->pool, q, run_task, s);
    if (!qvalid) {
      EXPECT(rc == EINVAL, "band async bad qos rc=%d", rc);
      return;
    }
    break;
  case 3: { /* sync: runs before returning */
    if (!qvalid) return;
    lanepool_lane_t *lane;
    lanepool_next_lane(s->pool, q, &lane);
    uint64_t before = atomic_load(&s->ran);
    rc = lanepool_lane_sync(lane, run_task, s);
    if (rc == 0) {
      s->accepted++;
      EXPECT(atomic_load(&s->ran) > before, "sync returned before its task ran");
      return;
    }
    break;
  }
  default: { /* a timer, maybe cancelled */
    if (!qvalid) return;
    lanepool_timer_t id = 0;
    rc =
        lanepool_async_after(s->pool, q, lanepool_now_ns() + (r >> 16) % 2000000, run_task, s, &id);
    if (rc == 0 && (r & 1)) {
      void *ctx = NULL;
      int c = lanepool_timer_cancel(s->pool, id, &ctx);
      EXPECT(c == 0 || c == EALREADY, "timer cancel rc=%d", c);
      if (c == 0) {
        EXPECT(ctx == s, "cancel gave back another context");
        return; /* not accepted after all: the caller owns it again */
      }
    }
    break;
  }
  }
  if (rc == 0)
    s->accepted++;
  else if (rc == ESHUTDOWN)
    EXPECT(s->shut, "ESHUTDOWN from a running pool");
  else if (rc == EAGAIN)
    EXPECT(s->hard, "EAGAIN without hard capacity");
  else
    EXPECT(0, "submit rc=%d", rc);
}

static void op_shutdown(slot_t *s, input_t *in) {
  uint32_t r = take(in);
  int cancel = r & 1;
  int rc = lanepool_shutdown(s->pool, cancel ? LANEPOOL_SHUTDOWN_CANCEL : LANEPOOL_SHUTDOWN_DRAIN,
                             (r & 2) ? on_discard : NULL, NULL);
  if (cancel && !(r & 2)) {
    EXPECT(rc == EINVAL, "cancel without discard rc=%d", rc);
    return;
  }
  EXPECT(s->shut ? rc == EALREADY : rc == 0, "shutdown shut=%d rc=%d", s->shut, rc);
  s->shut = 1;
}

static void op_destroy(slot_t *s, input_t *in) {
  uint32_t r = take(in);
  lanepool_t *p = s->pool;
  EXPECT(lanepool_destroy(p) == 0, "destroy");
  finish(s);
  if (r & 1) EXPECT(lanepool_destroy(p) == EINVAL, "destroy twice"); /* before any create */
}

static void op_info(slot_t *s) {
  lanepool_info_t info;
  EXPECT(lanepool_info(s->pool, &info) == 0, "info");
  EXPECT(info.shut_down == s->shut, "info.shut_down");
  lanepool_lane_t *lane;
  lanepool_get_lane(s->pool, LANEPOOL_QOS_DEFAULT, 0, &lane);
  lanepool_lane_info_t li;
  EXPECT(lanepool_lane_info(lane, &li) == 0, "lane info");
  EXPECT(lanepool_lane_info(NULL, &li) == EINVAL, "lane info NULL");
}

static void run_input(const uint8_t *data, size_t size) {
  input_t in = {data, size};
  for (int steps = 0; in.n > 0 && steps < 48; steps++) {
    uint32_t op = take(&in);
    slot_t *s = &slots[op % SLOTS];
    if (!s->live) {
      op_create(s, &in);
      continue;
    }
    switch ((op >> 8) % 10) {
    case 0:
      op_shutdown(s, &in);
      break;
    case 1:
      op_destroy(s, &in);
      break;
    case 2:
      op_info(s);
      break;
    default:
      op_submit(s, &in);
      break;
    }
  }
  for (int i = 0; i < SLOTS; i++)
    if (slots[i].live) {
      EXPECT(lanepool_destroy(slots[i].pool) == 0, "final destroy");
      finish(&slots[i]);
    }
  /* Calls on nothing at all. */
  EXPECT(lanepool_destroy(NULL) == EINVAL, "destroy NULL");
  EXPECT(lanepool_async(NULL, LANEPOOL_QOS_DEFAULT, run_task, NULL) == EINVAL, "async NULL");
  EXPECT(lanepool_timer_cancel(NULL, 1, NULL) == EINVAL, "cancel NULL");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  run_input(data, size);
  return 0;
}

#ifndef LANEPOOL_LIBFUZZER
int main(int argc, char **argv) {
  unsigned long long seed = argc > 1 ? strtoull(argv[1], NULL, 10) : 1;
  int rounds = argc > 2 ? atoi(argv[2]) : 300;
  uint8_t buf[256];
  for (int r = 0; r < rounds; r++) {
    for (size_t i = 0; i < sizeof buf; i++) {
      seed = seed * 6364136223846793005ull + 1442695040888963407ull;
      buf[i] = (uint8_t)(seed >> 56);
    }
    run_input(buf, sizeof buf);
  }
  printf("fuzz_api: %d rounds, %ld checks: %ld passed, %ld failed\n", rounds, checks,
         checks - failures, failures);
  return failures ? 1 : 0;
}
#endif
