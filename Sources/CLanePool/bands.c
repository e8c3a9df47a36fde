/*
 * bands.c - the QoS bands as data: a band's index for a QoS class, and the rule for the
 * sizes of the structs a caller allocates. The lowest layer of the C core: it knows no
 * other file (scripts/layering-check).
 */
#include "internal.h"

const char *const lanepool__band_short_names[LANEPOOL_BAND_COUNT] = {"ui", "in", "df", "ut", "bg"};
const lanepool_qos_t lanepool__qos_of_band[LANEPOOL_BAND_COUNT] = {
    LANEPOOL_QOS_USER_INTERACTIVE, LANEPOOL_QOS_USER_INITIATED, LANEPOOL_QOS_DEFAULT,
    LANEPOOL_QOS_UTILITY, LANEPOOL_QOS_BACKGROUND};

int lanepool_band_index(lanepool_qos_t qos) {
  for (int b = 0; b < LANEPOOL_BAND_COUNT; b++)
    if (lanepool__qos_of_band[b] == qos) return b;
  return -1;
}

/* The struct_size values this library accepts for each caller-allocated struct: its
 * own sizeof. When a release appends fields, it adds the previous release's size here
 * (each older layout is a prefix of the newer one); what an older caller's struct
 * lacks is then taken from the defaults (a config) or not written (the info structs).
 * docs/c-library.md has the rule. */
int lanepool__size_accepted(uint32_t struct_size, size_t current) { return struct_size == current; }
