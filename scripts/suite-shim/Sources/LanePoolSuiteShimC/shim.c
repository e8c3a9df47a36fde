/*
 * Runs when the library is loaded (LD_PRELOAD), before the test binary's main: installs
 * LanePool as the process's executor. It then takes itself out of LD_PRELOAD, so the
 * processes a suite spawns (a shell, /bin/cat) run as they would without the shim.
 */
#include "shim.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

void lanepool_suite_shim_install(void);

static atomic_int installed;

/* Drops every LD_PRELOAD entry that names this library. */
static void forget_preload(void) {
  const char *old = getenv("LD_PRELOAD");
  if (!old) return;
  size_t n = strlen(old);
  char *kept = calloc(n + 1, 1), *copy = strdup(old);
  if (!kept || !copy) {
    free(kept);
    free(copy);
    return;
  }
  char *save = NULL;
  for (char *tok = strtok_r(copy, " :", &save); tok; tok = strtok_r(NULL, " :", &save)) {
    if (strstr(tok, "libLanePoolSuiteShim")) continue;
    if (kept[0]) strcat(kept, ":");
    strcat(kept, tok);
  }
  if (kept[0])
    setenv("LD_PRELOAD", kept, 1);
  else
    unsetenv("LD_PRELOAD");
  free(kept);
  free(copy);
}

__attribute__((constructor)) static void lanepool_suite_shim_load(void) {
  if (atomic_exchange(&installed, 1)) return;
  forget_preload();
  lanepool_suite_shim_install();
}
