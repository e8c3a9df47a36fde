internal import CLanePool

// Batch submit: many closures onto one lane with one claim on its ring and one wake
// check (lanepool_lane_async_many).

extension LanePool.Lane {
  /// Runs every closure of `works` on this lane, in order, after every task submitted
  /// before this call: one batch, so one claim on the lane's ring for as many as fit
  /// (the rest go to its overflow list in one step) and at most one wake of the lane.
  /// Tasks submitted after this call returns run after the whole batch.
  ///
  /// Cost: no allocation per closure beyond its own context (each travels as its two
  /// words, as with ``async(_:)``), and at most one for the batch (its word buffer, on
  /// the stack when small).
  ///
  /// - Returns: how many were accepted, always the first ones: all of them, unless the
  ///   pool has a hard capacity and the lane filled up, or the pool began shutting down
  ///   during the call. The ones not accepted are released, never run.
  /// - Throws: ``LanePoolError/shutDown`` or ``LanePoolError/full`` (as ``async(_:)``)
  ///   when `works` is not empty and not one was accepted.
  @discardableResult
  public func async(contentsOf works: some Collection<@Sendable () -> Void>) throws(LanePoolError) -> Int {
    let count = works.count
    if count == 0 { return 0 }
    // One buffer: the contexts (a) in the first half, the code pointers (b) in the second.
    var accepted = 0
    var rc: Int32 = 0
    withUnsafeTemporaryAllocation(of: UnsafeMutableRawPointer?.self, capacity: 2 * count) { words in
      var i = 0
      for work in works where i < count {
        let closure = retainedClosure(work)
        words[i] = closure.context
        words[count + i] = UnsafeMutableRawPointer(mutating: closure.code)
        i += 1
      }
      rc = lanepool_lane_async2_many(
        raw, closureTrampoline, words.baseAddress, words.baseAddress! + count, i, &accepted)
      for j in accepted..<i { releaseClosure(context: words[j]) }
    }
    if accepted == 0 && rc != 0 { throw LanePoolError(errno: rc, context: .submit) }
    return accepted
  }
}
