internal import CLanePool

// Batch submit: many closures onto one lane with one claim on its ring and one wake
// check (lanepool_lane_async_many).

extension LanePool.Lane {
  /// Runs every closure of `works` on this lane, in order, after every task submitted
  /// before this call: one batch, so one claim on the lane's ring for as many as fit
  /// (the rest go to its overflow list in one step) and at most one wake of the lane.
  /// Tasks submitted after this call returns run after the whole batch.
  ///
  /// Cost: one allocation per closure (its box, as ``async(_:)``), one for the batch.
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
    var contexts = [UnsafeMutableRawPointer?]()
    contexts.reserveCapacity(count)
    for work in works { contexts.append(TaskBox.retain(work)) }
    var accepted = 0
    let rc = contexts.withUnsafeBufferPointer { buffer in
      lanepool_lane_async_many(raw, taskTrampoline, buffer.baseAddress, count, &accepted)
    }
    for ctx in contexts[accepted...] { TaskBox.release(ctx!) }
    if accepted == 0 && rc != 0 { throw LanePoolError(errno: rc, context: .submit) }
    return accepted
  }
}
