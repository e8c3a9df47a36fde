internal import CLanePool
import Dispatch
import Foundation
import Synchronization

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

  public static func == (a: Self, b: Self) -> Bool { a.core === b.core && a.id == b.id }
  public func hash(into h: inout Hasher) {
    h.combine(ObjectIdentifier(core))
    h.combine(id)
  }
}

extension Lane {
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
    let ctx = TaskBox.retain(work)
    var id: UInt64 = 0
    let rc = lanepool_lane_async_after(
      raw, min(deadlineNanoseconds, farFutureNanoseconds), taskTrampoline, ctx, &id)
    if rc != 0 {
      TaskBox.release(ctx)
      throw LanePoolError(errno: rc, context: .threads("starting the timer thread"))
    }
    return TimerHandle(core: core, id: id)
  }
}

/// The latest deadline handed to C: Int64.max ns of CLOCK_MONOTONIC (about 292 years
/// of uptime), so that no C arithmetic on it can wrap.
let farFutureNanoseconds = UInt64(Int64.max)

/// Now plus `delay`, saturating at ``farFutureNanoseconds``.
func farFuture(afterNanoseconds delay: UInt64) -> UInt64 {
  let (sum, overflow) = lanepool_now_ns().addingReportingOverflow(delay)
  return overflow ? farFutureNanoseconds : min(sum, farFutureNanoseconds)
}

extension LanePool {
  /// Runs `work` on a lane of the band once `deadline` has passed (the lane is picked
  /// when the timer fires).
  @discardableResult
  public func asyncAfter(
    deadline: DispatchTime, qos: QoS, _ work: @escaping @Sendable () -> Void
  ) throws(LanePoolError) -> TimerHandle {
    let ctx = TaskBox.retain(work)
    var id: UInt64 = 0
    let rc = lanepool_async_after(
      core.raw, qos.c, min(deadline.uptimeNanoseconds, farFutureNanoseconds), taskTrampoline, ctx, &id)
    if rc != 0 {
      TaskBox.release(ctx)
      throw LanePoolError(errno: rc, context: .threads("starting the timer thread"))
    }
    return TimerHandle(core: core, id: id)
  }
}

// MARK: - Groups

/// Tracks a set of tasks, like `DispatchGroup`: `enter`/`leave` (or
/// `Lane.async(group:)`), `notify` on a lane when the count reaches zero, `wait`.
///
/// Each `notify` fires exactly once, after every member that entered before the count
/// last reached zero has left. Thread-safe.
public final class LaneGroup: @unchecked Sendable {
  // @unchecked: all state is guarded by `condition`.
  private let condition = NSCondition()
  private var count = 0
  private var waiters: [(Lane, @Sendable () -> Void)] = []

  public init() {}

  public func enter() {
    condition.lock()
    count += 1
    condition.unlock()
  }

  /// Leaves the group; more leaves than enters stop the program (as GCD does).
  public func leave() {
    condition.lock()
    if count <= 0 {
      condition.unlock()
      misuse("LaneGroup.leave() called more often than enter()")
    }
    count -= 1
    var fire: [(Lane, @Sendable () -> Void)] = []
    if count == 0 {
      fire = waiters
      waiters = []
      condition.broadcast()
    }
    condition.unlock()
    for (lane, work) in fire { submitNotify(lane, work) }
  }

  /// Runs `work` on `lane` when the group is empty: at once if it is empty now.
  public func notify(on lane: Lane, _ work: @escaping @Sendable () -> Void) {
    condition.lock()
    if count == 0 {
      condition.unlock()
      submitNotify(lane, work)
      return
    }
    waiters.append((lane, work))
    condition.unlock()
  }

  /// Blocks until the group is empty.
  public func wait() {
    condition.lock()
    while count > 0 { condition.wait() }
    condition.unlock()
  }

  /// Blocks until the group is empty or `timeout` passes; true if it emptied. A huge
  /// timeout waits as long as needed (it saturates, never traps).
  public func wait(timeout: Duration) -> Bool {
    // At most ~31 years: NSCondition turns the date into nanoseconds since 1970 and
    // traps beyond Int64 (Date.distantFuture is too far).
    let seconds = min(Double(timeout.nanosecondsClamped) / 1e9, 1e9)
    let deadline = Date().addingTimeInterval(seconds)
    condition.lock()
    defer { condition.unlock() }
    while count > 0 {
      if !condition.wait(until: deadline) { return count == 0 }
    }
    return true
  }

  /// A notification always runs: on its lane, or, when the lane's pool has shut down
  /// (or a cancelling shutdown discards it), on the pool's fallback serial queue.
  private func submitNotify(_ lane: Lane, _ work: @escaping @Sendable () -> Void) {
    do {
      try lane.async(work, onDiscard: { lane.core.fallback.refused(.work(work)) })
    } catch where error.code == .shutDown || error.code == .forked {
      lane.core.fallback.refused(.work(work), threadsGone: error.code == .forked)
    } catch {
      misuse("LaneGroup.notify: \(lane) refused the notification: \(error)")
    }
  }
}

extension Lane {
  /// Submits `work` as a member of `group`: enter now, leave when it has run (or at
  /// once, if the lane refuses it, before this throws; or when a cancelling shutdown
  /// discards it, so that `wait` and `notify` never hang on a stopped pool).
  public func async(group: LaneGroup, _ work: @escaping @Sendable () -> Void) throws(LanePoolError) {
    group.enter()
    do {
      try async(
        {
          work()
          group.leave()
        }, onDiscard: { group.leave() })
    } catch {
      group.leave()
      throw error
    }
  }
}

// MARK: - Parallel for

extension LanePool {
  /// Calls `body(i)` for every `i` in `0..<iterations`, spread over the band's lanes
  /// (and the calling thread, which takes part), and returns when all have run, like
  /// `DispatchQueue.concurrentPerform`. Indices are handed out dynamically, one atomic
  /// add each. Safe to call from a lane of the same band: that lane is not waited on.
  public func concurrentPerform(
    iterations: Int, qos: QoS = .userInitiated, _ body: @escaping @Sendable (Int) -> Void
  ) {
    guard iterations > 0 else { return }
    let shared = ParallelFor(iterations: iterations, body: body)
    let current = Lane.current
    let helpers = lanes(for: qos).filter { $0 !== current }.prefix(max(0, iterations - 1))
    for lane in helpers {
      shared.group.enter()
      do {
        // A helper discarded by a cancelling shutdown leaves too; the caller's own
        // drain covers its indices.
        try lane.async(
          {
            shared.drain()
            shared.group.leave()
          }, onDiscard: { shared.group.leave() })
      } catch {
        shared.group.leave()  // a refused helper is fine: the others and the caller cover it
      }
    }
    shared.drain()
    shared.group.wait()
  }
}

final class ParallelFor: Sendable {
  let next = Atomic<Int>(0)
  let iterations: Int
  let body: @Sendable (Int) -> Void
  let group = LaneGroup()
  init(iterations: Int, body: @escaping @Sendable (Int) -> Void) {
    self.iterations = iterations
    self.body = body
  }
  func drain() {
    while true {
      let i = next.add(1, ordering: .relaxed).oldValue
      if i >= iterations { return }
      body(i)
    }
  }
}

