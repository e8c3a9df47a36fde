internal import CLanePool
import Dispatch

extension LanePool {
  /// A pending timer, from `asyncAfter`. Cancel it to stop its closure from running.
  public struct TimerHandle: Sendable, Hashable {
    let core: PoolCore
    let id: UInt64

    /// Cancels the timer. Returns true if it had not fired: its closure will never run
    /// (and is released now). False if it has fired already (the closure is queued or
    /// has run). Thread-safe; cost: a mutex and a linear search of the pending timers.
    @discardableResult
    public func cancel() -> Bool {
      var ctx: UnsafeMutableRawPointer?
      guard lanepool_timer_cancel(core.raw, id, &ctx) == 0 else { return false }
      if let ctx { TaskBox.release(ctx) }
      return true
    }

    /// Two handles are equal when they name the same timer of the same pool.
    public static func == (a: Self, b: Self) -> Bool { a.core === b.core && a.id == b.id }
    /// Hashes the pool and the timer id, consistently with `==`.
    public func hash(into h: inout Hasher) {
      h.combine(ObjectIdentifier(core))
      h.combine(id)
    }
  }
}

extension LanePool.Lane {
  /// Runs `work` on this lane once `deadline` has passed: never before. The pool's one
  /// timer thread submits it at its deadline; timers due together fire in the order
  /// they were set. Deadlines beyond about 292 years of uptime (`.distantFuture`) are
  /// clamped to that far future. Throws ``LanePoolError/shutDown`` after shutdown.
  @discardableResult
  public func asyncAfter(
    deadline: DispatchTime, _ work: @escaping @Sendable () -> Void
  ) throws(LanePoolError) -> TimerHandle {
    try asyncAfter(deadlineNanoseconds: deadline.uptimeNanoseconds, work)
  }

  /// As ``asyncAfter(deadline:_:)``, `delay` from now. A huge delay (say
  /// `.seconds(20_000_000_000)`) saturates to the far future instead of trapping.
  @discardableResult
  public func asyncAfter(
    _ delay: Duration, _ work: @escaping @Sendable () -> Void
  ) throws(LanePoolError) -> TimerHandle {
    try asyncAfter(deadlineNanoseconds: farFuture(afterNanoseconds: delay.nanosecondsClamped), work)
  }

  private func asyncAfter(
    deadlineNanoseconds: UInt64, _ work: @escaping @Sendable () -> Void
  ) throws(LanePoolError) -> TimerHandle {
    var id: UInt64 = 0
    try submitTask(work, context: .threads("starting the timer thread")) {
      lanepool_lane_async_after(raw, min(deadlineNanoseconds, farFutureNanoseconds), $0, $1, &id)
    }
    return TimerHandle(core: core, id: id)
  }
}

extension LanePool {
  /// Runs `work` on a lane of the band once `deadline` has passed (the lane is picked
  /// when the timer fires).
  @discardableResult
  public func asyncAfter(
    deadline: DispatchTime, qos: QoS, _ work: @escaping @Sendable () -> Void
  ) throws(LanePoolError) -> TimerHandle {
    var id: UInt64 = 0
    try submitTask(work, context: .threads("starting the timer thread")) {
      lanepool_async_after(core.raw, qos.c, min(deadline.uptimeNanoseconds, farFutureNanoseconds), $0, $1, &id)
    }
    return TimerHandle(core: core, id: id)
  }
}
