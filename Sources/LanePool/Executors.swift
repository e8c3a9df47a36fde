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
///
/// Jobs are continuations of work the pool already accepted: while the pool drains
/// (``LanePool/shutdownGracefully()``) the lane still takes them, from any thread, so
/// the drain runs them on the lane.
///
/// No job is ever dropped, so no task hangs on a stopped pool: after shutdown, jobs of
/// actors on this lane run on a fallback serial queue (one per pool, created on first
/// use), and so do the jobs a cancelling shutdown took off the lane. The fallback
/// keeps the executor's promises: it runs one job at a time, in the order the jobs
/// reached it (those the shutdown discarded first, then those refused after it
/// began), and only once every lane thread of the pool has exited, so a job never
/// runs beside one still running on the lane. While it runs them, `checkIsolated()`
/// and `isIsolatingCurrentContext()` answer as on the lane.
///
/// With a hard ring capacity (``LanePool/Configuration/hardCapacity``), enqueueing on
/// a full lane waits for room, since a job cannot be refused; enqueueing on a full lane
/// from a task on that same lane would wait for itself and stops the program with a
/// message instead.
extension Lane: SerialExecutor, TaskExecutor {
  /// Enqueues a job on this lane: an actor's job (the lane as its serial executor) or
  /// the job of a task that prefers the lane (`Task(executorPreference: lane)`). Both
  /// run as serial-executor jobs of the lane, so the runtime sees an actor's hop onto
  /// its own lane as no switch at all (no re-enqueue, no job overtaking the actor's own
  /// synchronous code). (The two roles cannot be split into two objects here: for an
  /// owned task-executor preference the runtime retains the `Lane` it is given and
  /// releases whatever `asUnownedTaskExecutor()` returns, so that must be the lane.)
  public func enqueue(_ job: consuming ExecutorJob) {
    let unownedJob = UnownedJob(job)
    let ctx = unsafeBitCast(unownedJob, to: UnsafeMutableRawPointer.self)
    var rc = lanepool_lane_async_flags(raw, serialJobTrampoline, ctx, UInt32(LANEPOOL_SUBMIT_CONTINUATION))
    if rc == Errno.EAGAIN {
      if isCurrent {
        misuse(
          "a Swift concurrency job was enqueued on lane \(name), which is full (hard ring capacity), from a task on that same lane: it would wait for itself forever. Give actors a pool without hardCapacity."
        )
      }
      // A job cannot be refused: wait for room (the lane is running, it will make some).
      // (This wait has no continuation flag: while draining it ends in ESHUTDOWN, and
      // the job goes to the fallback.)
      repeat {
        rc = lanepool_lane_async_wait(raw, serialJobTrampoline, ctx, 1_000_000_000)
      } while rc == Errno.ETIMEDOUT
    }
    if rc != 0 {
      // Shut down (or, in a fork child, never running here): run it on the fallback.
      core.fallback.refused(.lane(unownedJob, self), threadsGone: rc == Errno.EOWNERDEAD)
    }
  }

  public func asUnownedSerialExecutor() -> UnownedSerialExecutor {
    UnownedSerialExecutor(ordinary: self)
  }

  /// The lane as a task executor: the jobs of tasks that prefer it arrive at
  /// ``enqueue(_:)`` too.
  public func asUnownedTaskExecutor() -> UnownedTaskExecutor {
    UnownedTaskExecutor(ordinary: self)
  }

  public func isSameExclusiveExecutionContext(other: Lane) -> Bool { self === other }

  public func checkIsolated() {
    if !isIsolating {
      misuse("expected to run on lane \(name) (or its pool's fallback queue), but the caller is on another thread")
    }
  }

  public func isIsolatingCurrentContext() -> Bool? { isIsolating }

  /// On this lane's thread, or on its pool's fallback queue (which runs the lane's jobs
  /// once the lane has exited).
  private var isIsolating: Bool { isCurrent || core.fallback.isCurrent }
}

/// Runs an actor's job on its lane, as a serial-executor job: the runtime records the
/// lane as the current serial executor and no task executor, as it would on a
/// DispatchSerialQueue.
let serialJobTrampoline: @convention(c) (UnsafeMutableRawPointer?) -> Void = { ctx in
  let job = unsafeBitCast(ctx!, to: UnownedJob.self)
  job.runSynchronously(on: Lane.current!.asUnownedSerialExecutor())
}



// MARK: - Tasks on a pool

/// A pool is a task executor: `Task(executorPreference: pool) { ... }` and
/// `withTaskExecutorPreference(pool) { ... }` run on its lanes. Each job goes to the
/// band its priority names (TaskPriority raw values are `qos_class_t` values:
/// 33 userInteractive, 25 userInitiated/high, 21 medium, 17 utility/low, 9 background;
/// unspecified -> default). A job enqueued from a lane of that band stays on it while
/// nothing is queued there (a task's consecutive jobs keep one thread); others go to
/// the less loaded of two lanes. No allocation per job.
/// Keep the pool object alive while tasks prefer it.
///
/// Jobs are continuations: a draining pool still takes them and runs them. No job is
/// dropped: a job the pool refuses (after shutdown, or both picked lanes
/// full with a hard capacity) or that a cancelling shutdown discards runs on
/// Dispatch's global concurrent queue instead, so the task goes on (off the pool).
extension LanePool: TaskExecutor {
  public func enqueue(_ job: consuming ExecutorJob) {
    let qos = QoS(jobPriority: job.priority.rawValue)
    let unownedJob = UnownedJob(job)
    let ctx = unsafeBitCast(unownedJob, to: UnsafeMutableRawPointer.self)
    // Local: a job enqueued from a lane of its band stays there while that lane has
    // nothing queued, so a task's consecutive jobs do not hop between threads.
    let rc = lanepool_async_flags(
      core.raw, qos.c, poolJobTrampoline, ctx,
      UInt32(LANEPOOL_SUBMIT_CONTINUATION | LANEPOOL_SUBMIT_LOCAL))
    if rc != 0 { Fallback.runElsewhere(unownedJob, preferring: self) }
  }

  public func asUnownedTaskExecutor() -> UnownedTaskExecutor {
    UnownedTaskExecutor(ordinary: self)
  }
}

/// Runs a job enqueued on a pool as its task executor.
/// (The discard callback recognises the three job and task trampolines by address.)
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

extension Lane {
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
