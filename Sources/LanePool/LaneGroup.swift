extension LanePool {
  /// Tracks a set of tasks, like `DispatchGroup`: `enter`/`leave` (or
  /// `Lane.async(group:)`), `notify` on a lane when the count reaches zero, `wait`.
  ///
  /// Each `notify` fires exactly once, after every member that entered before the count
  /// last reached zero has left. Thread-safe.
  public final class LaneGroup: @unchecked Sendable {
    // @unchecked: all state is guarded by `condition`.
    private let condition = PthreadCondition()
    private var count = 0
    private var waiters: [(Lane, @Sendable () -> Void)] = []

    /// An empty group: ``wait()`` returns at once until someone enters.
    public init() {}

    /// Counts one more piece of work in the group (as `DispatchGroup.enter`).
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
      // A CLOCK_MONOTONIC deadline, saturating at about 292 years of uptime.
      let deadline = farFuture(afterNanoseconds: timeout.nanosecondsClamped)
      condition.lock()
      defer { condition.unlock() }
      while count > 0 {
        if !condition.wait(untilMonotonicNanoseconds: deadline) { return count == 0 }
      }
      return true
    }

    /// A notification always runs: on its lane, or, when the lane's pool has shut down
    /// (or a cancelling shutdown discards it), on the pool's fallback serial queue.
    private func submitNotify(_ lane: Lane, _ work: @escaping @Sendable () -> Void) {
      do {
        try lane.async(work, onDiscard: { lane.core.fallback.refused(.work(work)) })
      } catch  where error.code == .shutDown || error.code == .forked {
        lane.core.fallback.refused(.work(work), threadsGone: error.code == .forked)
      } catch {
        misuse("LaneGroup.notify: \(lane) refused the notification: \(error)")
      }
    }
  }
}

extension LanePool.Lane {
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
