internal import CLanePool

extension LanePool {
  /// One lane: a thread that runs the tasks submitted to it one at a time, in order.
  ///
  /// What ``LanePool/queue(for:)-method`` returns, like a serial `DispatchQueue` of
  /// YYDispatchQueuePool. All methods are thread-safe. A lane object lives as long as
  /// you hold it; after its pool shut down, submissions throw ``LanePoolError/shutDown``,
  /// while jobs of actors that use the lane as their executor keep running on the
  /// pool's fallback serial queue (see ``Lane/enqueue(_:)``), so no task hangs.
  public final class Lane: @unchecked Sendable {
    // @unchecked: every stored property is a `let`; the C lane is thread-safe.
    let raw: OpaquePointer
    let core: PoolCore
    /// The lane's QoS band.
    public let qos: QoS
    /// The lane's index within its band.
    public let index: Int
    /// The thread name, `<pool>-<band>-<index>` (at most 15 bytes).
    public let name: String
    /// The pool this lane belongs to. Unowned: valid while the pool object lives
    /// (a lane object may outlive it; then only its own methods may be used). Read per
    /// job of a task that prefers the pool (poolJobTrampoline), which is safe because
    /// the runtime retains the preferred executor of `Task(executorPreference:)` and
    /// `Task.detached(executorPreference:)` until the task ends, and
    /// `withTaskExecutorPreference` holds it for its scope (tested: "a task preferring a
    /// pool keeps it alive after its creator lets go").
    unowned(unsafe) var pool: LanePool! = nil

    init(raw: OpaquePointer, core: PoolCore, qos: QoS, index: Int) {
      self.raw = raw
      self.core = core
      self.qos = qos
      self.index = index
      var c = lanepool_lane_info_t()
      _ = lanepool_lane_info(raw, &c)
      self.name = threadName(c)
    }

    /// Runs `work` on this lane after every task submitted before it.
    ///
    /// Never blocks. Cost: no allocation beyond the closure's own context (the closure
    /// travels through C as its two words), and, only if the lane is parked, one futex
    /// wake.
    /// - Throws: ``LanePoolError/shutDown`` after the pool has shut down,
    ///   ``LanePoolError/full`` when the pool has a hard capacity and this lane is full.
    ///   When it throws, `work` was not accepted and will never run.
    public func async(_ work: consuming @escaping @Sendable () -> Void) throws(LanePoolError) {
      try async(work, onDiscard: nil)
    }

    /// As ``async(_:)``; `onDiscard` runs instead of `work` if a cancelling shutdown
    /// discards the task (on the thread that called shutdown, after the lanes exited).
    /// (Package-visible: LanePoolDispatch's `LaneQueue.async(group:execute:)` uses it.)
    package func async(
      _ work: consuming @escaping @Sendable () -> Void, onDiscard: (@Sendable () -> Void)?
    ) throws(LanePoolError) {
      if let onDiscard {
        try submitTask(work, onDiscard: onDiscard) { lanepool_lane_async(raw, $0, $1) }
      } else {
        try submitClosure(work) { lanepool_lane_async2(raw, $0, $1, $2) }
      }
    }

    /// As ``async(_:)``, but when the lane is full (a pool with hard capacity) waits up
    /// to `timeout` for room (polling, 1 us to 1 ms backoff) instead of failing at once.
    /// Timeouts beyond about 292 years are clamped to that (they never trap).
    /// - Throws: ``LanePoolError/timedOut`` if there was no room in time (the closure is
    ///   released, never run), or as ``async(_:)``.
    public func async(
      waitingUpTo timeout: Duration, _ work: @escaping @Sendable () -> Void
    ) throws(LanePoolError) {
      try submitTask(work) { lanepool_lane_async_wait(raw, $0, $1, timeout.nanosecondsForTimeout) }
    }

    /// Runs `work` on this lane, after every task submitted before it, and returns its
    /// value; blocks the caller until then.
    ///
    /// When the lane is free (no thread runs its queue) with nothing queued, `work` runs
    /// inline on the calling thread, as `DispatchQueue.sync` does on an idle serial queue:
    /// the caller takes the lane's exclusion, so nothing else runs the lane's queue
    /// meanwhile, and inside `work`
    /// ``isCurrent``, ``current`` and an actor's `assumeIsolated` on this lane hold as on
    /// the lane's thread. Work submitted meanwhile runs after `work` returns. What differs
    /// from the lane's thread: the thread id and name, the OS priority and CPU placement
    /// (the caller's), and the stall detector does not watch it. Pass
    /// `onLaneThread: true` to always run on the lane's own thread (a hand-off, and a
    /// wake if the lane is parked). No allocation either way.
    ///
    /// Escalation: when `work` is queued (the lane is busy, or `onLaneThread: true`) and
    /// the caller's band is above the lane's (a task on a lane of a higher band, or a
    /// thread inside ``LanePool/withBand(_:_:)``; any other thread counts as `.default`),
    /// the lane's thread runs at the caller's band until `work` returns, the tasks queued
    /// before it included, in their order (docs/priorities.md, "Escalation").
    ///
    /// Called by a task that already holds this lane (a task running on it, or a `sync`
    /// closure running inline on it), `work` runs at once, inline, like a recursive
    /// lock: the caller already has the lane's exclusion, so nothing else runs on the
    /// lane meanwhile, and waiting for the lane would wait for itself. Tasks queued on
    /// the lane before still run after the calling task, as they would have. (This is
    /// what `queue(for:).sync { ... }` from async code meets when LanePool is the
    /// default executor and the band has one lane.) Two cases would wait for themselves
    /// and stop the program with a message instead: `onLaneThread: true` from the
    /// lane's holder, and a chain of nested syncs that comes back to a lane an outer
    /// caller holds (`a.sync { b.sync { a.sync {} } }`); use `async`, or another lane.
    /// - Throws: what `work` throws; or ``LanePoolError/shutDown``, ``LanePoolError/full``,
    ///   ``LanePoolError/cancelled`` when the lane did not run it. (It throws rather than
    ///   rethrows because a shut-down pool refuses the task.)
    @inlinable
    public func sync<T>(onLaneThread: Bool = false, _ work: () throws -> T) throws -> T {
      // Inlinable, so the generic part is specialised in the caller (no generic metadata
      // look-ups per call); the lane call itself is not generic.
      var value: T? = nil
      var failure: (any Error)? = nil
      try _runSync(onLaneThread: onLaneThread) {
        do { value = try work() } catch { failure = error }
      }
      if let failure { throw failure }
      return value!
    }

    /// Runs `body` through lanepool_lane_sync_flags. The closure and its context stay on
    /// the caller's stack (non-escaping): C gets a pointer to the closure value.
    @usableFromInline
    func _runSync(onLaneThread: Bool, _ body: () -> Void) throws(LanePoolError) {
      let flags = onLaneThread ? UInt32(LANEPOOL_SYNC_QUEUED) : 0
      let rc: Int32 = withoutActuallyEscaping(body) { body in
        withUnsafePointer(to: body) { p in
          lanepool_lane_sync_flags(raw, syncTrampoline, UnsafeMutableRawPointer(mutating: p), flags)
        }
      }
      if rc != 0 {
        if rc == Errno.EDEADLK {
          // The caller holds this lane (C: it is the current lane): run inline, as a
          // recursive lock would (see `sync`).
          if !onLaneThread && isCurrent {
            body()
            return
          }
          if isCurrent {
            misuse(
              "Lane.sync(onLaneThread: true) called from a task already holding lane \(name): it would wait for itself forever. Use async, or sync onto another lane."
            )
          }
          misuse(
            "Lane.sync onto lane \(name) from nested syncs that hold it (a.sync { b.sync { a.sync {} } }), or from a task of that lane (an actor job on it): it would wait for itself forever. Use async, or sync onto another lane."
          )
        }
        throw LanePoolError(errno: rc)
      }
    }

    /// True when the caller runs this lane's queue now, holding the lane: a task of the
    /// lane (an actor job on it), or a ``sync(onLaneThread:_:)`` closure. False for band
    /// work (``LanePool/async(qos:_:)``, a task's jobs), which holds no lane, even on
    /// the thread of this lane.
    public var isCurrent: Bool {
      var held: Int32 = 0
      return lanepool_lane_held_here(raw, &held) == 0 && held != 0
    }

    /// The lane whose thread runs the caller (during band work, the lane of that thread,
    /// which the caller does not hold: see ``isCurrent``), or nil when the caller is not
    /// a lane thread.
    public static var current: Lane? { currentUnmanaged?.takeUnretainedValue() }

    /// ``current`` without a retain, for the job trampolines: the C lane holds a +1 on
    /// its Lane object until its thread has exited, so the reference stays valid for
    /// as long as the calling job runs.
    static var currentUnmanaged: Unmanaged<Lane>? {
      var current: OpaquePointer?
      guard lanepool_current_lane(&current) == 0, let current else { return nil }
      var ud: UnsafeMutableRawPointer?
      guard lanepool_lane_userdata(current, &ud) == 0, let ud else { return nil }
      return Unmanaged<Lane>.fromOpaque(ud)
    }
  }
}

extension LanePool.Lane: Hashable, CustomStringConvertible {
  /// Lanes are equal when they are the same object (one per lane of a pool).
  public static func == (a: LanePool.Lane, b: LanePool.Lane) -> Bool { a === b }
  /// Hashes the object identity, consistently with `==`.
  public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }
  /// `Lane(<thread name>)`, as in `Lane(db-ut-0)`.
  public var description: String { "Lane(\(name))" }
}

private func threadName(_ c: lanepool_lane_info_t) -> String {
  withUnsafeBytes(of: c.thread_name) { bytes in
    String(decoding: bytes.prefix(while: { $0 != 0 }), as: UTF8.self)
  }
}
