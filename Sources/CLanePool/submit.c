/*
 * submit.c - the public calls that submit lane-bound work: one task, two-argument
 * tasks, batches, and a submit that waits for room (hard capacity).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "internal.h"

#include <time.h>

int lanepool_lane_async_flags(lanepool_lane_t *lane, lanepool_fn fn, void *ctx, unsigned flags) {
  if (!lane || !fn || (flags & ~LANEPOOL_SUBMIT_CONTINUATION)) return EINVAL;
  return lanepool__lane_push(lane, fn, ctx, NULL, (flags & LANEPOOL_SUBMIT_CONTINUATION) != 0);
}

int lanepool_lane_async(lanepool_lane_t *lane, lanepool_fn fn, void *ctx) {
  return lanepool_lane_async_flags(lane, fn, ctx, 0);
}

/* A two-argument task is stored as {fn, a, b}; b != NULL is what marks it (ring.h). */
int lanepool_lane_async2_flags(lanepool_lane_t *lane, lanepool_fn2 fn, void *a, void *b,
                               unsigned flags) {
  if (!lane || !fn || !b || (flags & ~LANEPOOL_SUBMIT_CONTINUATION)) return EINVAL;
  return lanepool__lane_push(lane, (lanepool_fn)(void (*)(void))fn, a, b,
                             (flags & LANEPOOL_SUBMIT_CONTINUATION) != 0);
}

int lanepool_lane_async2(lanepool_lane_t *lane, lanepool_fn2 fn, void *a, void *b) {
  return lanepool_lane_async2_flags(lane, fn, a, b, 0);
}

/* The batch submits: args NULL for one-argument tasks. */
static int lane_async_many(lanepool_lane_t *lane, lanepool_fn fn, void *const *ctxs,
                           void *const *args, size_t count, size_t *accepted) {
  uint64_t done;
  int rc = lanepool__lane_push_n(lane, fn, ctxs, args, count, &done);
  if (accepted) *accepted = (size_t)done;
  return rc;
}

int lanepool_lane_async_many(lanepool_lane_t *lane, lanepool_fn fn, void *const *ctxs, size_t count,
                             size_t *accepted) {
  if (accepted) *accepted = 0;
  if (!lane || !fn || (!ctxs && count)) return EINVAL;
  return lane_async_many(lane, fn, ctxs, NULL, count, accepted);
}

int lanepool_lane_async2_many(lanepool_lane_t *lane, lanepool_fn2 fn, void *const *as,
                              void *const *bs, size_t count, size_t *accepted) {
  if (accepted) *accepted = 0;
  if (!lane || !fn || (count && (!as || !bs))) return EINVAL;
  for (size_t i = 0; i < count; i++)
    if (!bs[i]) return EINVAL; /* checked first: nothing is accepted */
  return lane_async_many(lane, (lanepool_fn)(void (*)(void))fn, as, bs, count, accepted);
}

static int lane_async_wait(lanepool_lane_t *lane, lanepool_fn fn, void *ctx, uint64_t timeout_ns) {
  int rc = lanepool__lane_push(lane, fn, ctx, NULL, false);
  if (rc != EAGAIN) return rc;
  uint64_t deadline = lanepool__add_sat(lanepool__now_ns(), timeout_ns); /* UINT64_MAX: no end */
  uint64_t pause_ns = 1000;
  for (;;) {
    uint64_t now = lanepool__now_ns();
    if (now >= deadline) return ETIMEDOUT;
    uint64_t left = deadline - now;
    uint64_t nap = pause_ns < left ? pause_ns : left;
    struct timespec ts = {.tv_sec = (time_t)(nap / 1000000000u),
                          .tv_nsec = (long)(nap % 1000000000u)};
    nanosleep(&ts, NULL);
    if ((rc = lanepool__lane_push(lane, fn, ctx, NULL, false)) != EAGAIN) return rc;
    if (pause_ns < 1000000) pause_ns *= 2;
  }
}

int lanepool_lane_async_wait(lanepool_lane_t *lane, lanepool_fn fn, void *ctx,
                             uint64_t timeout_ns) {
  if (!lane || !fn) return EINVAL;
  /* One call under way across its retries: a destroy meanwhile waits for it (the
   * pushes then answer ESHUTDOWN), instead of freeing the lane between two of them. */
  const void *outer = lanepool__call_enter(lane);
  int rc = lane_async_wait(lane, fn, ctx, timeout_ns);
  lanepool__call_leave(outer);
  return rc;
}
