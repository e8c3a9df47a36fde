/*
 * version.c - the library's version, from the header's LANEPOOL_VERSION_* macros
 * (the one source of truth: the Makefile reads them too).
 */
#include "lanepool.h"

const char *lanepool_version(void) { return LANEPOOL_VERSION_STRING; }
