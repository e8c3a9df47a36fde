internal import CLanePool
import Foundation

// MARK: - Actors on a lane

/// A lane is a serial executor: an actor whose `unownedExecutor` returns
/// `lane.asUnownedSerialExecutor()` runs every job on that lane's thread, in FIFO
/// order, at the lane's priority.
///
/// ```swift
/// actor Cache {
///   let lane = LanePool.queue(for: .utility)
///   nonisolated var unownedExecutor: UnownedSerialExecutor { lane.asUnownedSerialExecutor() }
/// }
/// ```
/// Enqueueing costs no allocation: the job's own pointer is the C task context.
/// A job enqueued after the lane's pool shut down stops the program with a message
/// (the job could never run, and its task would wait forever).
extension Lane: SerialExecutor, TaskExecutor {
  public func enqueue(_ job: consuming ExecutorJob) {
    let ctx = unsafeBitCast(UnownedJob(job), to: UnsafeMutableRawPointer.self)
    let rc = lanepool_lane_async(raw, serialJobTrampoline, ctx)
    if rc != 0 { executorRefused(rc, "lane \(name)") }
  }

  public func asUnownedSerialExecutor() -> UnownedSerialExecutor {
    UnownedSerialExecutor(ordinary: self)
  }

  public func asUnownedTaskExecutor() -> UnownedTaskExecutor {
    UnownedTaskExecutor(ordinary: self)
  }

  public func isSameExclusiveExecutionContext(other: Lane) -> Bool { self === other }

  public func checkIsolated() {
    precondition(isCurrent, "LanePool: expected to run on lane \(name), but the caller is on another thread")
  }

  public func isIsolatingCurrentContext() -> Bool? { isCurrent }
}

func executorRefused(_ rc: Int32, _ what: String) -> Never {
  fatalError(
    "LanePool: a Swift concurrency job was enqueued on \(what) but \(LanePoolError(code: rc)). Shut a pool down only after the actors and tasks using it are done."
  )
}

/// Runs a job enqueued on a lane as its serial executor.
let serialJobTrampoline: @convention(c) (UnsafeMutableRawPointer?) -> Void = { ctx in
  let job = unsafeBitCast(ctx!, to: UnownedJob.self)
  let lane = Lane.current!
  job.runSynchronously(isolatedTo: lane.asUnownedSerialExecutor(), taskExecutor: lane.asUnownedTaskExecutor())
}

// MARK: - Tasks on a pool

/// A pool is a task executor: `Task(executorPreference: pool) { ... }` and
/// `withTaskExecutorPreference(pool) { ... }` run on its lanes. Each job goes to the
/// band its priority names (TaskPriority raw values are `qos_class_t` values:
/// 33 userInteractive, 25 userInitiated/high, 21 medium, 17 utility/low, 9 background;
/// unspecified -> default), on the less loaded of two lanes. No allocation per job.
/// Keep the pool alive (and not shut down) while tasks prefer it.
extension LanePool: TaskExecutor {
  public func enqueue(_ job: consuming ExecutorJob) {
    let qos = QoS(jobPriority: job.priority.rawValue)
    let ctx = unsafeBitCast(UnownedJob(job), to: UnsafeMutableRawPointer.self)
    let rc = lanepool_async(core.raw, qos.c, poolJobTrampoline, ctx)
    if rc != 0 { executorRefused(rc, "pool \(name)") }
  }

  public func asUnownedTaskExecutor() -> UnownedTaskExecutor {
    UnownedTaskExecutor(ordinary: self)
  }
}

/// Runs a job enqueued on a pool as its task executor.
let poolJobTrampoline: @convention(c) (UnsafeMutableRawPointer?) -> Void = { ctx in
  let job = unsafeBitCast(ctx!, to: UnownedJob.self)
  let lane = Lane.current!
  job.runSynchronously(on: lane.pool.asUnownedTaskExecutor())
}

extension QoS {
  /// The band a job priority (a `qos_class_t` value) maps to: at least 33 ->
  /// userInteractive, 25 -> userInitiated, 21 -> default, 17 -> utility, below ->
  /// background; 0 (unspecified) -> default.
  public init(jobPriority raw: UInt8) {
    switch raw {
    case 0: self = .default
    case 33...: self = .userInteractive
    case 25..<33: self = .userInitiated
    case 21..<25: self = .default
    case 17..<21: self = .utility
    default: self = .background
    }
  }

  /// The band a task priority maps to (as `init(jobPriority:)`).
  public init(_ priority: TaskPriority) { self.init(jobPriority: priority.rawValue) }
}

// MARK: - async/await bridge

/// Shared by a `run` caller and the task it submitted: whichever of "started" and
/// "cancelled" happens first wins, and the continuation is resumed exactly once.
final class RunState<T: Sendable>: @unchecked Sendable {
  // @unchecked: every field is guarded by `lock`.
  private let lock = NSLock()
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

func bridge<T: Sendable>(
  _ work: @escaping @Sendable () throws -> T,
  submit: (@escaping @Sendable () -> Void) throws(LanePoolError) -> Void
) async throws -> T {
  try Task.checkCancellation()
  let state = RunState<T>()
  return try await withTaskCancellationHandler {
    try await withCheckedThrowingContinuation { (c: CheckedContinuation<T, any Error>) in
      guard state.install(c) else { return }
      do {
        try submit {
          guard state.start() else { return }  // cancelled before it started: skip
          state.finish(Result { try work() })
        }
      } catch {
        state.refuse(error)
      }
    }
  } onCancel: {
    state.cancel()
  }
}

extension Lane {
  /// Runs `work` on this lane (after the tasks queued before it) and returns its value
  /// or rethrows its error. If the calling task is cancelled before `work` starts,
  /// `work` never runs and this throws `CancellationError`; once started it runs to
  /// completion. Throws ``LanePoolError`` if the lane refuses the task.
  public func run<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
    try await bridge(work) { (task) throws(LanePoolError) in try self.async(task) }
  }
}

extension LanePool {
  /// As ``Lane/run(_:)``, on the less loaded of two lanes of the band.
  public func run<T: Sendable>(qos: QoS, _ work: @escaping @Sendable () throws -> T) async throws -> T {
    try await bridge(work) { (task) throws(LanePoolError) in try self.async(qos: qos, task) }
  }
}
