/*
 * install_client.c - a C11 client of an installed liblanepool (scripts/c-install-test
 * builds it with `pkg-config --cflags --libs lanepool`, shared and static): creates a
 * pool, submits tasks to a lane and to a band, syncs, checks the version, destroys.
 */
#include <lanepool.h>

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

_Static_assert(LANEPOOL_VERSION == LANEPOOL_VERSION_MAJOR * 10000 + LANEPOOL_VERSION_MINOR * 100 +
                                       LANEPOOL_VERSION_PATCH,
               "LANEPOOL_VERSION");

enum { LANE_TASKS = 100, BAND_TASKS = 20 };

static int next_in_order; /* touched only by the one lane's thread, then read after sync */
static int out_of_order;
static atomic_int band_ran;

static void ordered(void *ctx) {
  int i = *(const int *)ctx;
  if (i != next_in_order) out_of_order++;
  next_in_order = i + 1;
}

static void counted(void *ctx) {
  (void)ctx;
  atomic_fetch_add(&band_ran, 1);
}

static int seen_at_sync = -1;
static void at_sync(void *ctx) {
  (void)ctx;
  seen_at_sync = next_in_order;
}

#define CHECK(expr)                                                                                \
  do {                                                                                             \
    int rc_ = (expr);                                                                              \
    if (rc_ != 0) {                                                                                \
      fprintf(stderr, "install_client (C): %s returned %d\n", #expr, rc_);                         \
      return 1;                                                                                    \
    }                                                                                              \
  } while (0)

int main(void) {
  const char *v = lanepool_version();
  if (v == NULL || strcmp(v, LANEPOOL_VERSION_STRING) != 0) {
    fprintf(stderr, "install_client (C): lanepool_version() is \"%s\", header says \"%s\"\n",
            v ? v : "(null)", LANEPOOL_VERSION_STRING);
    return 1;
  }

  lanepool_config_t cfg;
  CHECK(lanepool_config_init(&cfg));
  cfg.name = "install-c";
  cfg.lanes_per_band = 1;
  lanepool_t *pool = NULL;
  CHECK(lanepool_create(&cfg, &pool));

  /* The struct_size fields: set by lanepool_config_init and the lanepool_info wrapper
   * (inline, from this header), checked by the installed library. */
  if (cfg.struct_size != sizeof cfg) {
    fprintf(stderr, "install_client (C): cfg.struct_size %u, want %zu\n", cfg.struct_size,
            sizeof cfg);
    return 1;
  }
  lanepool_info_t info;
  info.struct_size = 3;
  if (lanepool_info_sized(pool, &info) != EINVAL) {
    fprintf(stderr, "install_client (C): lanepool_info_sized took struct_size 3\n");
    return 1;
  }
  CHECK(lanepool_info(pool, &info));
  if (strcmp(info.name, "install-c") != 0 || info.lanes_per_band != 1 ||
      info.struct_size != sizeof info) {
    fprintf(stderr, "install_client (C): info says \"%s\", %u lanes\n", info.name,
            info.lanes_per_band);
    return 1;
  }

  static int ids[LANE_TASKS];
  lanepool_lane_t *lane = NULL;
  CHECK(lanepool_next_lane(pool, LANEPOOL_QOS_USER_INITIATED, &lane));
  for (int i = 0; i < LANE_TASKS; i++) {
    ids[i] = i;
    CHECK(lanepool_lane_async(lane, ordered, &ids[i]));
  }
  CHECK(lanepool_lane_sync(lane, at_sync, NULL));
  for (int i = 0; i < BAND_TASKS; i++) {
    CHECK(lanepool_async(pool, LANEPOOL_QOS_UTILITY, counted, NULL));
  }
  CHECK(lanepool_destroy(pool)); /* drains: every band task has run */

  if (seen_at_sync != LANE_TASKS || out_of_order != 0 || atomic_load(&band_ran) != BAND_TASKS) {
    fprintf(stderr, "install_client (C): sync saw %d of %d, %d out of order, band ran %d of %d\n",
            seen_at_sync, LANE_TASKS, out_of_order, atomic_load(&band_ran), BAND_TASKS);
    return 1;
  }
  printf("install_client (C): lanepool %s (LANEPOOL_VERSION %d), %d lane tasks in order "
         "before sync, %d band tasks, numa %d\n",
         v, LANEPOOL_VERSION, LANE_TASKS, BAND_TASKS, lanepool_numa_supported());
  return 0;
}
