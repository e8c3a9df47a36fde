internal import CLanePool
import Synchronization

extension LanePool {
  /// Band work queued now for `qos` (``async(qos:_:)``, a task executor's jobs): accepted
  /// and not yet started, a snapshot. Every thread of the band takes from this queue.
  public func bandDepth(for qos: QoS) -> UInt64 {
    var depth: UInt64 = 0
    _ = lanepool_band_depth(core.raw, qos.c, &depth)
    return depth
  }

  /// True once a shutdown has started.
  public var isShutDown: Bool {
    var info = lanepool_info_t()
    _ = lanepool_info(core.raw, &info)
    return info.shut_down != 0
  }

  /// Stops intake, runs every task already accepted, then joins the lanes. Returns
  /// when all lane threads have exited. Calling it again is harmless.
  /// - Throws: ``LanePoolError/notPermitted`` for the default pool,
  ///   ``LanePoolError/wouldDeadlock`` when called from one of this pool's lanes.
  public func shutdownGracefully() async throws(LanePoolError) {
    try await runOffCooperativePool { () throws(LanePoolError) in
      _ = try self.shutdown(discardingQueued: false)
    }
  }

  /// Stops the pool and blocks until every lane thread has exited.
  ///
  /// With `discardingQueued: false` every accepted task runs first (drain). With
  /// `true` each lane finishes the task it is running and every task still queued is
  /// discarded: a closure is released without running, a ``Lane/run(_:)`` or
  /// ``LanePool/run(qos:_:)`` caller waiting for it gets `CancellationError`, a group
  /// member (``Lane/async(group:_:)``) leaves its group, and a Swift concurrency job
  /// still runs, on the fallback (jobs are never dropped). Called while a drain is
  /// under way (from another thread), a cancelling shutdown turns it into a cancel,
  /// and returns when it has finished. Calling it after a shutdown finished returns 0.
  /// - Returns: how many queued tasks were discarded (Swift jobs included).
  /// - Throws: ``LanePoolError/notPermitted`` (default pool),
  ///   ``LanePoolError/wouldDeadlock`` (called from one of this pool's lanes).
  @discardableResult
  public func shutdown(discardingQueued: Bool) throws(LanePoolError) -> Int {
    try stop(discardingQueued: discardingQueued).discarded
  }

  /// A cancelling shutdown that also says whether it cancelled anything: false when a
  /// shutdown already under way could no longer be turned into a cancel (a drain that
  /// had committed, or a shutdown that had finished: everything ran). For
  /// LanePoolService's log line.
  package func cancelUnlessDrained() throws(LanePoolError) -> (discarded: Int, cancelled: Bool) {
    let r = try stop(discardingQueued: true)
    return (r.discarded, r.rc == 0)
  }

  private func stop(discardingQueued: Bool) throws(LanePoolError) -> (discarded: Int, rc: Int32) {
    let discards = Discards(pool: self)
    let rc = withExtendedLifetime(discards) {
      lanepool_shutdown(
        core.raw, discardingQueued ? LANEPOOL_SHUTDOWN_CANCEL : LANEPOOL_SHUTDOWN_DRAIN,
        discardingQueued ? discardTask : nil,
        discardingQueued ? Unmanaged.passUnretained(discards).toOpaque() : nil)
    }
    switch rc {
    case 0, Errno.EALREADY:
      // Every lane thread has exited: the fallback may run the jobs it holds.
      releaseLanes()
      core.fallback.open()
      return (discards.count.load(ordering: .acquiring), rc)
    case Errno.EOWNERDEAD:
      core.fallback.open()  // a fork child: the pool has no threads here
      throw .forked
    default:
      throw LanePoolError(errno: rc)
    }
  }

  /// Drops the +1 each C lane holds on its Swift object, once, after the threads exited.
  func releaseLanes() {
    guard lanesRetained.exchange(false, ordering: .acquiringAndReleasing) else { return }
    for lane in Array(bands.joined()) + rescueLanes {
      var ud: UnsafeMutableRawPointer?
      _ = lanepool_lane_userdata(lane.raw, &ud)
      _ = lanepool_lane_set_userdata(lane.raw, nil)
      if let ud { Unmanaged<Lane>.fromOpaque(ud).release() }
    }
  }
}

/// What a cancelling shutdown's discard callback needs: the pool and a counter.
final class Discards: Sendable {
  let pool: LanePool
  let count = Atomic<Int>(0)
  init(pool: LanePool) { self.pool = pool }
}

/// Takes a task that a cancelling shutdown removed: a closure is released (a box-free
/// one: the +1 on its context; a boxed one: the box, after its on-discard action:
/// resume a `run` caller, leave a group), a Swift job is handed to a fallback so that
/// it still runs. Counts it.
private let discardTask: @convention(c) (lanepool_fn?, UnsafeMutableRawPointer?, UnsafeMutableRawPointer?) -> Void = {
  fn, ctx, arg in
  guard let arg else { return }
  let discards = Unmanaged<Discards>.fromOpaque(arg).takeUnretainedValue()
  discards.count.add(1, ordering: .relaxed)
  guard let fn, let ctx else { return }
  let address = unsafeBitCast(fn, to: UnsafeRawPointer.self)
  if address == unsafeBitCast(closureTrampoline, to: UnsafeRawPointer.self) {
    // A two-argument task: ctx points to its {a, b} (valid during this call); a is the
    // closure's context, b its code (Submit.swift). Released without running.
    releaseClosure(context: ctx.assumingMemoryBound(to: lanepool_task2_t.self).pointee.a)
  } else if address == unsafeBitCast(taskTrampoline, to: UnsafeRawPointer.self) {
    let box = Unmanaged<TaskBox>.fromOpaque(ctx).takeRetainedValue()
    box.onDiscard?()
  } else if address == unsafeBitCast(serialJobTrampoline, to: UnsafeRawPointer.self) {
    discards.pool.core.fallback.discarded(.discardedJob(unsafeBitCast(ctx, to: UnownedJob.self)))
  } else if address == unsafeBitCast(boostedJobTrampoline, to: UnsafeRawPointer.self) {
    // Its waiter's boost ends here: the job leaves the lane for the fallback.
    let job = BoostedJob.end(ctx.assumingMemoryBound(to: BoostedJob.self))
    discards.pool.core.fallback.discarded(.discardedJob(job))
  } else if address == unsafeBitCast(poolJobTrampoline, to: UnsafeRawPointer.self) {
    // A task's job (its lane is not known here): it needs a thread, not exclusion.
    Fallback.runElsewhere(unsafeBitCast(ctx, to: UnownedJob.self), preferring: discards.pool)
  }
}

/// Runs a blocking call on a fresh thread so it does not hold a cooperative-pool thread.
func runOffCooperativePool<T: Sendable>(
  _ body: @escaping @Sendable () throws(LanePoolError) -> T
) async throws(LanePoolError) -> T {
  let result: Result<T, LanePoolError> = await withCheckedContinuation { cont in
    startDetachedThread {
      cont.resume(returning: Result { () throws(LanePoolError) in try body() })
    }
  }
  return try result.get()
}
