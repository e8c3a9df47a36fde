/*
 * check.h - the C tests' checks, shared by api_test.c, lifecycle_test.c and
 * quota_test.c: count passes and failures and say where (and, when the test file sets
 * `current_test`, in which test) a check failed. Each test ends by printing
 * "N passed, M failed".
 */
#ifndef LANEPOOL_TEST_CHECK_H
#define LANEPOOL_TEST_CHECK_H

#include <stdio.h>
#include <string.h>

static int passed, failed;
/* The running test's name, for failure messages; "" when a file does not name them. */
static const char *current_test __attribute__((unused)) = "";

#define CHECK(cond)                                                                                \
  do {                                                                                             \
    if (cond) {                                                                                    \
      passed++;                                                                                    \
    } else {                                                                                       \
      failed++;                                                                                    \
      fprintf(stderr, "%s:%d: [%s] check failed: %s\n", __FILE__, __LINE__, current_test, #cond);  \
    }                                                                                              \
  } while (0)

#define CHECK_RC(expr, want)                                                                       \
  do {                                                                                             \
    int rc_ = (expr);                                                                              \
    if (rc_ == (want)) {                                                                           \
      passed++;                                                                                    \
    } else {                                                                                       \
      failed++;                                                                                    \
      fprintf(stderr, "%s:%d: [%s] %s returned %d (%s), want %d\n", __FILE__, __LINE__,            \
              current_test, #expr, rc_, strerror(rc_), (want));                                    \
    }                                                                                              \
  } while (0)

#endif /* LANEPOOL_TEST_CHECK_H */
