internal import CLanePool

/// A lane is a serial executor: an actor whose `unownedExecutor` returns
/// `lane.asUnownedSerialExecutor()` runs every job on that lane's thread, in FIFO
/// order, at the lane's priority.
///
/// ```swift
/// actor Cache {
///   let lane = LanePool.queue(for: .utility)
///   nonisolated var unownedExecutor: UnownedSerialExecutor { lane.asUnownedSerialExecutor() }
/// }
/// ```
/// Enqueueing costs no allocation: the job's own pointer is the C task context (except
/// for a job that boosts the lane, see ``enqueue(_:)``: a small record with its boost).
///
/// Jobs are continuations of work the pool already accepted: while the pool drains
/// (``LanePool/shutdownGracefully()``) the lane still takes them, from any thread, so
/// the drain runs them on the lane.
///
/// No job is ever dropped, so no task hangs on a stopped pool: after shutdown, jobs of
/// actors on this lane run on a fallback serial queue (one per pool, created on first
/// use), and so do the jobs a cancelling shutdown took off the lane. The fallback
/// keeps the executor's promises: it runs one job at a time, in the order the jobs
/// reached it (those the shutdown discarded first, then those refused after it
/// began), and only once every lane thread of the pool has exited, so a job never
/// runs beside one still running on the lane. While it runs them, `checkIsolated()`
/// and `isIsolatingCurrentContext()` answer as on the lane.
///
/// With a hard ring capacity (``LanePool/Configuration/hardCapacity``), enqueueing on
/// a full lane waits for room, since a job cannot be refused; enqueueing on a full lane
/// from a task on that same lane would wait for itself and stops the program with a
/// message instead.
extension LanePool.Lane: SerialExecutor, TaskExecutor {
  /// Enqueues a job on this lane: an actor's job (the lane as its serial executor) or
  /// the job of a task that prefers the lane (`Task(executorPreference: lane)`). Both
  /// run as serial-executor jobs of the lane, so the runtime sees an actor's hop onto
  /// its own lane as no switch at all (no re-enqueue, no job overtaking the actor's own
  /// synchronous code). (The two roles cannot be split into two objects here: for an
  /// owned task-executor preference the runtime retains the `Lane` it is given and
  /// releases whatever `asUnownedTaskExecutor()` returns, so that must be the lane.)
  ///
  /// Escalation: a job whose priority names a band above the lane's, enqueued while the
  /// lane is busy (running a task, or with tasks queued), boosts the lane's thread to
  /// that band until the job has run, the tasks ahead of it included, in their order
  /// (docs/priorities.md, "Escalation"). A job of the lane's band or below, one with no
  /// priority, and one an idle lane starts at once cost one comparison, no system call.
  public func enqueue(_ job: consuming ExecutorJob) {
    let priority = job.priority.rawValue
    let unownedJob = UnownedJob(job)
    var fn = serialJobTrampoline
    var ctx = unsafeBitCast(unownedJob, to: UnsafeMutableRawPointer.self)
    var boosted: UnsafeMutablePointer<BoostedJob>? = nil
    if priority != 0, LanePool.QoS(jobPriority: priority).bandIndex < qos.bandIndex {
      boosted = BoostedJob.begin(unownedJob, on: self, qos: LanePool.QoS(jobPriority: priority))
      if let boosted {
        fn = boostedJobTrampoline
        ctx = UnsafeMutableRawPointer(boosted)
      }
    }
    var rc = lanepool_lane_async_flags(raw, fn, ctx, UInt32(LANEPOOL_SUBMIT_CONTINUATION))
    if rc == Errno.EAGAIN {
      if isCurrent {
        misuse(
          "a Swift concurrency job was enqueued on lane \(name), which is full (hard ring capacity), from a task on that same lane: it would wait for itself forever. Give actors a pool without hardCapacity."
        )
      }
      // A job cannot be refused: wait for room (the lane is running, it will make some).
      // (This wait has no continuation flag: while draining it ends in ESHUTDOWN, and
      // the job goes to the fallback.)
      repeat {
        rc = lanepool_lane_async_wait(raw, fn, ctx, 1_000_000_000)
      } while rc == Errno.ETIMEDOUT
    }
    if rc != 0 {
      // Shut down (or, in a fork child, never running here): run it on the fallback. A
      // boost ends here: the waiter's job is no longer on the lane.
      if let boosted { _ = BoostedJob.end(boosted) }
      core.fallback.refused(.lane(unownedJob, self), threadsGone: rc == Errno.EOWNERDEAD)
    }
  }

  /// The lane as an actor's serial executor: return it from an actor's
  /// `nonisolated var unownedExecutor`.
  public func asUnownedSerialExecutor() -> UnownedSerialExecutor {
    UnownedSerialExecutor(ordinary: self)
  }

  /// The lane as a task executor: the jobs of tasks that prefer it arrive at
  /// ``enqueue(_:)`` too.
  public func asUnownedTaskExecutor() -> UnownedTaskExecutor {
    UnownedTaskExecutor(ordinary: self)
  }

  /// Two lanes are the same execution context only when they are the same lane.
  public func isSameExclusiveExecutionContext(other: LanePool.Lane) -> Bool { self === other }

  /// Stops the program with a message unless the caller runs on this lane (its thread, an
  /// inline ``sync(onLaneThread:_:)`` closure, or its pool's fallback queue).
  public func checkIsolated() {
    if !isIsolating {
      misuse("expected to run on lane \(name) (or its pool's fallback queue), but the caller is on another thread")
    }
  }

  /// True when the caller runs on this lane (as ``checkIsolated()`` decides); never nil.
  public func isIsolatingCurrentContext() -> Bool? { isIsolating }

  /// On this lane's thread, or on its pool's fallback queue (which runs the lane's jobs
  /// once the lane has exited).
  private var isIsolating: Bool { isCurrent || core.fallback.isCurrent }
}

/// Runs an actor's job on its lane, as a serial-executor job: the runtime records the
/// lane as the current serial executor and no task executor, as it would on a
/// DispatchSerialQueue.
let serialJobTrampoline: @convention(c) (UnsafeMutableRawPointer?) -> Void = { ctx in
  let job = unsafeBitCast(ctx!, to: UnownedJob.self)
  // No retain of the lane per job: see Lane.currentUnmanaged.
  job.runSynchronously(on: Lane.currentUnmanaged!._withUnsafeGuaranteedRef { $0.asUnownedSerialExecutor() })
}

/// A job that boosts its lane while it waits there (see ``LanePool/Lane/enqueue(_:)``):
/// the job and the boost it holds, allocated only for such a job. The lane ends the
/// boost when the job has run; a job that never runs there (refused, or discarded by a
/// cancelling shutdown) ends it where it leaves.
struct BoostedJob {
  let job: UnownedJob
  var boost: lanepool_boost_t

  /// Begins the boost of `lane` to `qos` if the lane is busy; nil (nothing allocated,
  /// nothing held) when it is idle or escalation is off.
  static func begin(_ job: UnownedJob, on lane: LanePool.Lane, qos: LanePool.QoS) -> UnsafeMutablePointer<BoostedJob>? {
    var boost = lanepool_boost_t()
    guard lanepool_lane_boost_begin_flags(lane.raw, qos.c, UInt32(LANEPOOL_BOOST_IF_BUSY), &boost) == 0,
      boost.band_plus_one != 0
    else { return nil }
    let p = UnsafeMutablePointer<BoostedJob>.allocate(capacity: 1)
    p.initialize(to: BoostedJob(job: job, boost: boost))
    return p
  }

  /// Ends the boost, frees the record, returns the job.
  static func end(_ p: UnsafeMutablePointer<BoostedJob>) -> UnownedJob {
    _ = lanepool_lane_boost_end(&p.pointee.boost)
    let job = p.pointee.job
    p.deinitialize(count: 1)
    p.deallocate()
    return job
  }
}

/// Runs a boosted job on its lane as ``serialJobTrampoline`` does, then ends its boost:
/// the lane returns to its own band (or the next waiter's) with the job done.
let boostedJobTrampoline: @convention(c) (UnsafeMutableRawPointer?) -> Void = { ctx in
  let p = ctx!.assumingMemoryBound(to: BoostedJob.self)
  p.pointee.job.runSynchronously(
    on: Lane.currentUnmanaged!._withUnsafeGuaranteedRef { $0.asUnownedSerialExecutor() })
  _ = BoostedJob.end(p)
}
