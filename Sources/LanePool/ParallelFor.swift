import Synchronization

extension LanePool {
  /// Calls `body(i)` for every `i` in `0..<iterations`, spread over the band's lanes
  /// (and the calling thread, which takes part), and returns when all have run, like
  /// `DispatchQueue.concurrentPerform`. Indices are handed out dynamically, one atomic
  /// add each.
  ///
  /// As with `dispatch_apply`, the caller never waits for a helper that has not
  /// started: it claims indices itself until none is left, then waits only for the
  /// indices that helpers already running have claimed. A helper that starts late
  /// finds nothing left and returns at once. So a call from a lane of the same band,
  /// from several lanes of one band at once, or from inside another
  /// `concurrentPerform` iteration never deadlocks: at worst the caller runs every
  /// index itself.
  public func concurrentPerform(
    iterations: Int, qos: QoS = .userInitiated, _ body: @escaping @Sendable (Int) -> Void
  ) {
    guard iterations > 0 else { return }
    let shared = ParallelFor(iterations: iterations, body: body)
    let current = Lane.current
    let helpers = lanes(for: qos).filter { $0 !== current }.prefix(max(0, iterations - 1))
    for lane in helpers {
      // A helper refused (shut-down pool, full lane) or discarded by a cancelling
      // shutdown claimed nothing: the caller's own loop covers its indices.
      try? lane.async { shared.run() }
    }
    shared.run()
    shared.waitForClaimed()
  }
}

/// The state one `concurrentPerform` call shares with its helpers. Nobody waits for a
/// helper: each index is claimed (`next`) and, once run, counted (`finished`); the
/// caller, having found no index left to claim, waits until every claimed index is
/// counted. Only threads that are running an index can hold that wait up.
final class ParallelFor: Sendable {
  let next = Atomic<Int>(0)
  let finished = Atomic<Int>(0)
  let iterations: Int
  let body: @Sendable (Int) -> Void
  /// Guards nothing but the sleep of the caller in ``waitForClaimed()``; the last
  /// index to finish broadcasts under it, so the wake cannot be missed.
  let condition = PthreadCondition()

  init(iterations: Int, body: @escaping @Sendable (Int) -> Void) {
    self.iterations = iterations
    self.body = body
  }

  /// Claims and runs indices until none is left.
  func run() {
    while true {
      // Wrapping: late helpers keep adding after the last index; with `iterations`
      // near Int.max the count may wrap to negative, which is as good as done.
      let i = next.wrappingAdd(1, ordering: .relaxed).oldValue
      if i < 0 || i >= iterations { return }
      body(i)
      // Releasing: the caller that sees the count reach `iterations` (acquiring) sees
      // every effect of every body.
      if finished.add(1, ordering: .acquiringAndReleasing).newValue == iterations {
        condition.lock()
        condition.broadcast()
        condition.unlock()
      }
    }
  }

  /// Returns once every index has run. Called after ``run()`` returned, so every index
  /// is claimed, by the caller or by a helper that is running it now.
  func waitForClaimed() {
    if finished.load(ordering: .acquiring) == iterations { return }
    condition.lock()
    while finished.load(ordering: .acquiring) < iterations { condition.wait() }
    condition.unlock()
  }
}
