internal import CLanePool

/// Shared by a `run` caller and the task it submitted: whichever of "started" and
/// "cancelled" happens first wins, and the continuation is resumed exactly once.
final class RunState<T: Sendable>: @unchecked Sendable {
  // @unchecked: every field is guarded by `lock`.
  private let lock = PthreadLock()
  private var continuation: CheckedContinuation<T, any Error>?
  private var phase = Phase.pending
  enum Phase { case pending, started, cancelled }

  /// Called with the continuation; false if the caller was cancelled already (then
  /// the continuation has been resumed with CancellationError).
  func install(_ c: CheckedContinuation<T, any Error>) -> Bool {
    lock.lock()
    defer { lock.unlock() }
    if phase == .cancelled {
      c.resume(throwing: CancellationError())
      return false
    }
    continuation = c
    return true
  }

  func cancel() {
    lock.lock()
    defer { lock.unlock() }
    guard phase == .pending else { return }
    phase = .cancelled
    continuation?.resume(throwing: CancellationError())
    continuation = nil
  }

  /// true if the task may run (the caller has not been cancelled).
  func start() -> Bool {
    lock.lock()
    defer { lock.unlock() }
    guard phase == .pending else { return false }
    phase = .started
    return true
  }

  func finish(_ result: Result<T, any Error>) {
    lock.lock()
    let c = continuation
    continuation = nil
    lock.unlock()
    c?.resume(with: result)
  }

  func refuse(_ error: any Error) {
    lock.lock()
    guard phase == .pending else {
      lock.unlock()
      return
    }
    phase = .cancelled
    let c = continuation
    continuation = nil
    lock.unlock()
    c?.resume(throwing: error)
  }
}

/// `submit` gets the task and what to do if a cancelling shutdown discards it (resume
/// the caller with CancellationError).
func bridge<T: Sendable>(
  _ work: @escaping @Sendable () throws -> T,
  submit: (_ task: @escaping @Sendable () -> Void, _ onDiscard: @escaping @Sendable () -> Void)
    throws(LanePoolError) -> Void
) async throws -> T {
  try Task.checkCancellation()
  let state = RunState<T>()
  return try await withTaskCancellationHandler {
    try await withCheckedThrowingContinuation { (c: CheckedContinuation<T, any Error>) in
      guard state.install(c) else { return }
      do {
        try submit(
          {
            guard state.start() else { return }  // cancelled before it started: skip
            state.finish(Result { try work() })
          },
          { state.refuse(CancellationError()) })
      } catch {
        state.refuse(error)
      }
    }
  } onCancel: {
    state.cancel()
  }
}

extension LanePool.Lane {
  /// Runs `work` on this lane (after the tasks queued before it) and returns its value
  /// or rethrows its error. If the calling task is cancelled before `work` starts,
  /// `work` never runs and this throws `CancellationError`; once started it runs to
  /// completion. Throws ``LanePoolError`` if the lane refuses the task, and
  /// `CancellationError` if a cancelling shutdown discards it before it starts.
  ///
  /// Escalation: when the calling task's priority (`Task.currentPriority`) names a band
  /// above the lane's and the lane is busy (running a task, or with tasks queued), the
  /// lane's thread runs at that band until `work` returns, the tasks ahead of it
  /// included, in their order; if the runtime escalates the caller while it waits (a
  /// higher-priority task awaits it), the boost follows, up to the new band. The lane
  /// leaves the boost itself when `work` returns; a caller that leaves earlier
  /// (cancelled, refused) ends it then (docs/priorities.md, "Escalation").
  public func run<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
    let boost = RunBoost(lane: self)
    boost.raise(to: Task.currentPriority)
    defer { boost.end() }
    return try await withTaskPriorityEscalationHandler {
      try await bridge({
        defer { boost.end() }
        return try work()
      }) { (task, onDiscard) throws(LanePoolError) in
        try self.async(task, onDiscard: onDiscard)
      }
    } onPriorityEscalated: { _, new in
      boost.raise(to: new)
    }
  }
}

/// The boost a ``LanePool/Lane/run(_:)`` caller holds on the lane while it waits: begun
/// (and raised on escalation) on the caller's side or the escalating thread, ended once
/// by whichever comes first, the lane after `work` or the caller leaving.
final class RunBoost: @unchecked Sendable {
  // @unchecked: `held` and `ended` are guarded by `lock`; `lane` is a let.
  private let lock = PthreadLock()
  private let lane: LanePool.Lane
  private var held = lanepool_boost_t()
  private var ended = false

  init(lane: LanePool.Lane) { self.lane = lane }

  /// Boosts the lane to `priority`'s band if that is above the lane's and above what is
  /// held, and the lane is busy; the boost held before ends after the new one began.
  func raise(to priority: TaskPriority) {
    guard priority.rawValue != 0 else { return }
    let qos = LanePool.QoS(priority)
    guard qos.bandIndex < lane.qos.bandIndex else { return }  // the common case: nothing
    lock.lock()
    defer { lock.unlock() }
    let heldBand = held.band_plus_one == 0 ? Int.max : Int(held.band_plus_one) - 1
    guard !ended, qos.bandIndex < heldBand else { return }
    var next = lanepool_boost_t()
    guard lanepool_lane_boost_begin_flags(lane.raw, qos.c, UInt32(LANEPOOL_BOOST_IF_BUSY), &next) == 0,
      next.band_plus_one != 0
    else { return }
    _ = lanepool_lane_boost_end(&held)
    held = next
  }

  /// Ends the boost; later calls, and later escalations, do nothing.
  func end() {
    lock.lock()
    defer { lock.unlock() }
    ended = true
    _ = lanepool_lane_boost_end(&held)
  }
}

extension LanePool {
  /// As ``Lane/run(_:)``, on the less loaded of two lanes of the band.
  public func run<T: Sendable>(qos: QoS, _ work: @escaping @Sendable () throws -> T) async throws -> T {
    try await bridge(work) { (task, onDiscard) throws(LanePoolError) in
      try self.async(qos: qos, task, onDiscard: onDiscard)
    }
  }
}
