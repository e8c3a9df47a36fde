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
  public func run<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
    try await bridge(work) { (task, onDiscard) throws(LanePoolError) in
      try self.async(task, onDiscard: onDiscard)
    }
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
