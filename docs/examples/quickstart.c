// A C quick start with error reporting (the README's C example, plus strerror). Build and run
// from the repository's top:
//   cc -std=gnu11 -O2 -pthread -Iinclude docs/examples/quickstart.c Sources/CLanePool/*.c -o quickstart && ./quickstart
#include "lanepool.h"
#include <stdio.h>
#include <string.h>

static void work(void *ctx) { printf("task %d\n", *(int *)ctx); }

int main(void) {
  lanepool_config_t cfg;
  lanepool_config_init(&cfg);
  cfg.name = "demo";
  cfg.lanes_per_band = 2;
  lanepool_t *pool;
  int rc = lanepool_create(&cfg, &pool);
  if (rc) {
    fprintf(stderr, "create: %s\n", strerror(rc));
    return 1;
  }
  static int ids[3] = {1, 2, 3};
  lanepool_lane_t *lane;
  lanepool_next_lane(pool, LANEPOOL_QOS_USER_INITIATED, &lane);         /* round-robin, like YY */
  for (int i = 0; i < 3; i++) lanepool_lane_async(lane, work, &ids[i]); /* FIFO: 1 2 3 */
  lanepool_async(pool, LANEPOOL_QOS_BACKGROUND, work, &ids[0]);         /* any lane of a band */
  return lanepool_destroy(pool);                                        /* drains, joins, frees */
}
