import Synchronization

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
