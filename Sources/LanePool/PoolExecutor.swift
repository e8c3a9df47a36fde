internal import CLanePool

/// A pool is a task executor: `Task(executorPreference: pool) { ... }` and
/// `withTaskExecutorPreference(pool) { ... }` run on its lanes. Each job goes to the
/// band its priority names (TaskPriority raw values are `qos_class_t` values:
/// 33 userInteractive, 25 userInitiated/high, 21 medium, 17 utility/low, 9 background;
/// unspecified -> default). A job enqueued from a lane of that band stays on it while
/// nothing is queued there (a task's consecutive jobs keep one thread); others go to
/// the less loaded of two lanes. No allocation per job.
/// A task created with this pool as its preference keeps the pool object alive until
/// it ends (the runtime retains it), so the creator may let go of the pool at once; a
/// pool released without shutdown keeps its lanes running (see ``shutdown(discardingQueued:)``).
///
/// Jobs are continuations: a draining pool still takes them and runs them. No job is
/// dropped: a job the pool refuses (after shutdown, or both picked lanes
/// full with a hard capacity) or that a cancelling shutdown discards runs on
/// Dispatch's global concurrent queue instead, so the task goes on (off the pool).
extension LanePool: TaskExecutor {
  /// Enqueues a job of a task that prefers this pool: on a lane of the band the job's
  /// priority names (see ``QoS/init(jobPriority:)``), staying on the calling lane when it
  /// is of that band and has nothing queued. Never refuses: see the type's discussion.
  public func enqueue(_ job: consuming ExecutorJob) {
    let qos = QoS(jobPriority: job.priority.rawValue)
    let unownedJob = UnownedJob(job)
    let ctx = unsafeBitCast(unownedJob, to: UnsafeMutableRawPointer.self)
    // Local: a job enqueued from a lane of its band stays there while that lane has
    // nothing queued, so a task's consecutive jobs do not hop between threads.
    let rc = lanepool_async_flags(
      core.raw, qos.c, poolJobTrampoline, ctx,
      UInt32(LANEPOOL_SUBMIT_CONTINUATION | LANEPOOL_SUBMIT_LOCAL))
    if rc != 0 { Fallback.runElsewhere(unownedJob, preferring: self) }
  }

  /// The pool as the runtime's task-executor reference.
  public func asUnownedTaskExecutor() -> UnownedTaskExecutor {
    UnownedTaskExecutor(ordinary: self)
  }
}

/// Runs a job enqueued on a pool as its task executor.
/// (The discard callback recognises the three job and task trampolines by address.)
let poolJobTrampoline: @convention(c) (UnsafeMutableRawPointer?) -> Void = { ctx in
  let job = unsafeBitCast(ctx!, to: UnownedJob.self)
  // No retain of the lane per job: see Lane.currentUnmanaged.
  let executor = Lane.currentUnmanaged!._withUnsafeGuaranteedRef { $0.pool.asUnownedTaskExecutor() }
  job.runSynchronously(on: executor)
}
