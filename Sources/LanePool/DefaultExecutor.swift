internal import CLanePool
import Dispatch
@_spi(ExperimentalCustomExecutors) @_spi(ExperimentalScheduling) import _Concurrency

// MARK: - LanePool as the process's default executor (experimental)

extension LanePool {
  /// **Experimental.** Makes the default pool (``LanePool/default``) the process's
  /// default executor: after this call every `Task {}`, `Task.detached {}`, child
  /// task, nonisolated async function and default actor runs on its lanes, the job's
  /// priority choosing the band (`TaskPriority.high` / `.userInitiated` ->
  /// userInitiated, `.medium` -> default, `.low` / `.utility` -> utility,
  /// `.background` -> background, unspecified -> default). The main actor stays on
  /// the platform's main executor.
  ///
  /// Call it once, as the first statement of `main` (top-level code, or the start of
  /// an `@main` type's synchronous `main()`), so that every task runs on lanes. A later
  /// call works too, for what is enqueued after it: jobs already queued on Swift's
  /// own global executor finish there. `configuration` sizes and places the default
  /// pool as ``configureDefault(_:)`` does (nil: as configured before, or the
  /// environment, or min(allowed CPUs, CPU quota) lanes per band); it is refused
  /// once the default pool exists. (In top-level code, `Task {}` inherits the main
  /// actor and runs there; `Task.detached {}` and tasks started from other code run
  /// on lanes.)
  ///
  /// ```swift
  /// import LanePool
  /// try LanePool.installAsDefaultExecutor()
  /// // from here on, Task { } runs on lanes
  /// ```
  ///
  /// Built on the Swift runtime's experimental SPI `_createExecutors(factory:)`
  /// (`@_spi(ExperimentalCustomExecutors)`, Swift 6.3): it may change or go away in a
  /// later toolchain, and this call with it. The pool is the default pool: it never
  /// shuts down, so no job is ever refused.
  ///
  /// - Throws: what ``configureDefault(_:)`` and ``makeDefault()`` throw (then
  ///   nothing changed); ``LanePoolError`` with code ``LanePoolError/Code/notPermitted``
  ///   (errno EALREADY) when this was called before.
  public static func installAsDefaultExecutor(configuration: Configuration? = nil) throws(LanePoolError) {
    try DefaultExecutorInstall.shared.install(configuration)
  }

  /// True once ``installAsDefaultExecutor(configuration:)`` succeeded.
  public static var isDefaultExecutor: Bool { DefaultExecutorInstall.shared.installed }
}

/// The one-time installation: guarded by a lock, so two callers cannot both install.
/// Installed means the factory has its executor (set only here, once).
private final class DefaultExecutorInstall: Sendable {
  static let shared = DefaultExecutorInstall()
  private let lock = PthreadLock()  // pthreads, not Mutex: ThreadSanitizer sees it

  var installed: Bool { LanePoolExecutorFactory.executor != nil }

  func install(_ configuration: LanePool.Configuration?) throws(LanePoolError) {
    let outcome: Result<Void, LanePoolError> = lock.withLock {
      if installed {
        return .failure(
          LanePoolError(code: .notPermitted, errno: Errno.EALREADY, message: "LanePool is already the default executor")
        )
      }
      do throws(LanePoolError) {
        if let configuration { try LanePool.configureDefault(configuration) }
        let pool = try LanePool.makeDefault()
        LanePoolExecutorFactory.executor = DefaultLaneExecutor(pool: pool)
      } catch {
        return .failure(error)
      }
      _createExecutors(factory: LanePoolExecutorFactory.self)
      return .success(())
    }
    try outcome.get()
  }
}

/// The factory handed to the runtime. Its executor is set (under the lock) before the
/// factory is handed over; the runtime reads it through the same lock.
enum LanePoolExecutorFactory: ExecutorFactory {
  private static let lock = PthreadLock()
  nonisolated(unsafe) private static var _executor: DefaultLaneExecutor? = nil
  static var executor: DefaultLaneExecutor? {
    get { lock.withLock { _executor } }
    set { lock.withLock { _executor = newValue } }
  }

  static var mainExecutor: any MainExecutor { PlatformExecutorFactory.mainExecutor }
  static var defaultExecutor: any TaskExecutor { executor! }
}

/// The default executor's role over the default pool: jobs run as the generic
/// executor's jobs (as on Swift's own global executor), not as task-executor jobs, so
/// default actors keep the runtime's cheap actor-to-actor switching and tasks get no
/// executor preference they did not ask for.
final class DefaultLaneExecutor: TaskExecutor, @unchecked Sendable {
  // @unchecked: `pool` is a let and thread-safe.
  let pool: LanePool
  init(pool: LanePool) { self.pool = pool }

  func enqueue(_ job: consuming ExecutorJob) {
    let qos = QoS(jobPriority: job.priority.rawValue)
    let unownedJob = UnownedJob(job)
    let ctx = unsafeBitCast(unownedJob, to: UnsafeMutableRawPointer.self)
    // As LanePool's own TaskExecutor role: a job enqueued from a lane of its band stays
    // there while that lane has nothing queued.
    let rc = lanepool_async_flags(
      pool.core.raw, qos.c, genericJobTrampoline, ctx,
      UInt32(LANEPOOL_SUBMIT_CONTINUATION | LANEPOOL_SUBMIT_LOCAL))
    if rc != 0 {
      // The default pool never shuts down; a refusal means a hard-capacity ring was
      // full on both picks. Run it on Dispatch's global queue rather than drop it.
      DispatchQueue.global().async { unownedJob.runSynchronously(on: genericExecutor) }
    }
  }
}

/// Delayed jobs: the runtime sends `Task.sleep`, and every other job it wants run after a
/// delay, to the default executor's scheduling side (and stops the program if it has
/// none). They go through the pool's timer thread, to the band of their priority, never
/// early. Clocks whose durations are not `Duration` go to the platform's executor.
extension DefaultLaneExecutor: SchedulingExecutor {
  func enqueue<C: Clock>(
    _ job: consuming ExecutorJob, after delay: C.Duration, tolerance: C.Duration?, clock: C
  ) {
    guard let d = delay as? Duration else {
      Self.platformScheduling(job, after: delay, tolerance: tolerance, clock: clock)
      return
    }
    let qos = QoS(jobPriority: job.priority.rawValue)
    let unownedJob = UnownedJob(job)
    let ctx = unsafeBitCast(unownedJob, to: UnsafeMutableRawPointer.self)
    let deadline = lanepool_now_ns().addingReportingOverflow(d.nanosecondsForTimeout)
    let rc = lanepool_async_after(
      pool.core.raw, qos.c, deadline.overflow ? UInt64.max : deadline.partialValue,
      genericJobTrampoline, ctx, nil)
    if rc != 0 {
      // Out of memory, or no timer thread to be had: let the platform's executor wait.
      Self.platformScheduling(ExecutorJob(unownedJob), after: delay, tolerance: tolerance, clock: clock)
    }
  }

  private static func platformScheduling<C: Clock>(
    _ job: consuming ExecutorJob, after delay: C.Duration, tolerance: C.Duration?, clock: C
  ) {
    guard let platform = PlatformExecutorFactory.defaultExecutor as? any SchedulingExecutor else {
      misuse("LanePool's default executor got a delayed job it cannot schedule (clock \(C.self))")
    }
    platform.enqueue(job, after: delay, tolerance: tolerance, clock: clock)
  }
}

/// The generic executor (no isolation), the executor the runtime's global executor
/// runs jobs on: an executor reference of all zeroes.
let genericExecutor: UnownedSerialExecutor = {
  if MemoryLayout<UnownedSerialExecutor>.size != 2 * MemoryLayout<UInt>.size {
    misuse(
      "this toolchain's UnownedSerialExecutor is not two words: the default executor cannot name the generic executor")
  }
  return unsafeBitCast((UInt(0), UInt(0)), to: UnownedSerialExecutor.self)
}()

/// Runs a default-executor job on its lane, as a generic-executor job.
let genericJobTrampoline: @convention(c) (UnsafeMutableRawPointer?) -> Void = { ctx in
  let job = unsafeBitCast(ctx!, to: UnownedJob.self)
  job.runSynchronously(on: genericExecutor)
}
