/*
 * jobid.c - the task id of a job, for LanePool's event trace (Sources/CLanePool/trace.c,
 * only in a library built with LANEPOOL_TRACE; otherwise nothing calls it). Every task
 * the shim's executor pushes is a Swift job.
 */
#include <stdint.h>

extern uint64_t swift_task_getJobTaskId(void *job);

uint64_t lanepool_trace_job_id(void *fn, void *ctx);
uint64_t lanepool_trace_job_id(void *fn, void *ctx) {
  (void)fn;
  return ctx ? swift_task_getJobTaskId(ctx) : 0;
}
