internal import CLanePool

extension LanePool {
  /// Tracks a set of tasks, like `DispatchGroup`: `enter`/`leave` (or
  /// `Lane.async(group:)`), `notify` on a lane when the count reaches zero, `wait`.
  ///
  /// Each `notify` fires exactly once, after every member that entered before the count
  /// last reached zero has left. Thread-safe.
  ///
  /// `wait` escalates: while it blocks, each lane with a member queued or running by
  /// ``Lane/async(group:_:)`` runs at the waiting thread's band if that is higher (as
  /// ``Lane/sync(onLaneThread:_:)`` does; docs/priorities.md, "Escalation"), until the
  /// wait ends, emptied or timed out. Members that entered with `enter()` have no lane.
  public final class LaneGroup: @unchecked Sendable {
    // @unchecked: all state is guarded by `condition`.
    private let condition = PthreadCondition()
    private var count = 0
    private var waiters: [(Lane, @Sendable () -> Void)] = []
    /// Members of ``Lane/async(group:_:)`` not yet left, per lane: what `wait` boosts.
    private var lanes: [ObjectIdentifier: (lane: Lane, members: Int)] = [:]

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

    /// A member submitted to `lane` (``Lane/async(group:_:)``).
    func enter(on lane: Lane) {
      condition.lock()
      count += 1
      lanes[ObjectIdentifier(lane), default: (lane, 0)].members += 1
      condition.unlock()
    }

    /// That member leaves.
    func leave(from lane: Lane) {
      condition.lock()
      let id = ObjectIdentifier(lane)
      if let entry = lanes[id] {
        lanes[id] = entry.members > 1 ? (entry.lane, entry.members - 1) : nil
      }
      condition.unlock()
      leave()
    }

    /// Boosts the lanes that have members now to the calling thread's band (outside the
    /// lock: system calls), the boosts to end when the wait is over. Takes the lock
    /// unlocked and returns with it held. Each boost keeps its Lane (and so the C pool)
    /// alive until it ends.
    private func lockAndEscalate() -> [(Lane, lanepool_boost_t)] {
      condition.lock()
      if count == 0 || lanes.isEmpty { return [] }
      let members = lanes.values.map(\.lane)
      condition.unlock()
      var band = LANEPOOL_QOS_DEFAULT
      _ = lanepool_thread_qos(&band)
      let boosts = members.map { lane in
        var boost = lanepool_boost_t()
        _ = lanepool_lane_boost_begin(lane.raw, band, &boost)
        return (lane, boost)
      }
      condition.lock()
      return boosts
    }

    private func endBoosts(_ boosts: [(Lane, lanepool_boost_t)]) {
      for (lane, var b) in boosts {
        _ = lanepool_lane_boost_end(&b)
        withExtendedLifetime(lane) {}
      }
    }

    /// Blocks until the group is empty.
    public func wait() {
      let boosts = lockAndEscalate()
      while count > 0 { condition.wait() }
      condition.unlock()
      endBoosts(boosts)
    }

    /// Blocks until the group is empty or `timeout` passes; true if it emptied. A huge
    /// timeout waits as long as needed (it saturates, never traps).
    public func wait(timeout: Duration) -> Bool {
      // A CLOCK_MONOTONIC deadline, saturating at about 292 years of uptime.
      let deadline = farFuture(afterNanoseconds: timeout.nanosecondsClamped)
      let boosts = lockAndEscalate()
      var emptied = true
      while count > 0 {
        if !condition.wait(untilMonotonicNanoseconds: deadline) {
          emptied = count == 0
          break
        }
      }
      condition.unlock()
      endBoosts(boosts)
      return emptied
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
    group.enter(on: self)
    do {
      try async(
        {
          work()
          group.leave(from: self)
        }, onDiscard: { group.leave(from: self) })
    } catch {
      group.leave(from: self)
      throw error
    }
  }
}
