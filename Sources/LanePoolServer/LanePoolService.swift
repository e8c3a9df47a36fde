#if Server  // see ServerTrait.swift
import Foundation
import LanePool
import Logging
import ServiceLifecycle

extension LanePool.Configuration {
  /// Sends the pool's log lines to `logger`: the priority settings the kernel refused
  /// (one warning per pool, at creation) and stalled lanes (one warning per stall).
  /// Never called on the hot path.
  public mutating func log(to logger: Logger) {
    let name = self.name
    logHandler = { level, message in
      logger.log(
        level: level == .warning ? .warning : .info, "\(message)",
        metadata: ["lanepool.pool": "\(name)"])
    }
  }
}

/// A pool as a swift-service-lifecycle `Service`: `run()` waits for graceful shutdown,
/// then drains the pool (every accepted task runs, the lanes are joined) and returns;
/// if its task is cancelled instead, it cancels the pool (queued tasks are discarded
/// without running) and throws `CancellationError`. If its task is cancelled while it
/// drains (say ServiceGroup's `maximumGracefulShutdownDuration` ran out), the drain
/// escalates to a cancel: the lanes finish the tasks they are running, the rest is
/// discarded, and `run()` throws `CancellationError` promptly, so a
/// `maximumCancellationDuration` is kept. Either way it logs one summary.
///
/// ```swift
/// let pool = try LanePool(configuration: config)
/// let group = ServiceGroup(services: [LanePoolService(pool: pool, logger: logger), server],
///                          gracefulShutdownSignals: [.sigterm], logger: logger)
/// try await group.run()
/// ```
public struct LanePoolService: Service {
  public let pool: LanePool
  let logger: Logger

  public init(pool: LanePool, logger: Logger) {
    self.pool = pool
    self.logger = logger
  }

  public func run() async throws {
    do {
      try await gracefulShutdown()
    } catch {
      // Cancelled: stop at once, hand back what was queued.
      let discarded = await Self.cancel(pool)
      logger.notice(
        "lanepool '\(pool.name)' cancelled: \(tasksRun) tasks run, \(discarded) queued tasks discarded",
        metadata: ["lanepool.pool": "\(pool.name)"])
      throw CancellationError()
    }
    // Drain; if this task is cancelled meanwhile, a cancelling shutdown started from
    // another thread turns the drain under way into a cancel (the C core escalates a
    // running drain), and both calls return once the lanes are joined.
    let escalation = Escalation()
    try await withTaskCancellationHandler {
      try await pool.shutdownGracefully()
    } onCancel: {
      escalation.start(pool)
    }
    if let discarded = await escalation.result() {
      logger.notice(
        "lanepool '\(pool.name)' cancelled while draining: \(tasksRun) tasks run, \(discarded) queued tasks discarded",
        metadata: ["lanepool.pool": "\(pool.name)"])
      throw CancellationError()
    }
    logger.info(
      "lanepool '\(pool.name)' shut down gracefully: \(tasksRun) tasks run, none discarded",
      metadata: ["lanepool.pool": "\(pool.name)"])
  }

  private var tasksRun: UInt64 { pool.allLanes.reduce(0) { $0 + $1.info.tasksExecuted } }

  /// A cancelling shutdown, on a fresh thread: it blocks until the lanes are joined,
  /// which must not hold a thread of the cooperative pool.
  static func cancel(_ pool: LanePool) async -> Int {
    await withCheckedContinuation { (c: CheckedContinuation<Int, Never>) in
      Thread { c.resume(returning: (try? pool.shutdown(discardingQueued: true)) ?? 0) }.start()
    }
  }
}

/// The cancelling shutdown a cancelled drain starts: at most one, its count once done.
private final class Escalation: @unchecked Sendable {
  // @unchecked: every field is guarded by `lock`.
  private let lock = NSLock()
  private var started = false
  private var discarded: Int?
  private var waiter: CheckedContinuation<Int?, Never>?

  func start(_ pool: LanePool) {
    lock.lock()
    guard !started else {
      lock.unlock()
      return
    }
    started = true
    lock.unlock()
    Thread {
      let n = (try? pool.shutdown(discardingQueued: true)) ?? 0
      self.lock.lock()
      self.discarded = n
      let w = self.waiter
      self.waiter = nil
      self.lock.unlock()
      w?.resume(returning: n)
    }.start()
  }

  /// nil if no escalation started; otherwise waits for it and returns its count.
  func result() async -> Int? {
    await withCheckedContinuation { (c: CheckedContinuation<Int?, Never>) in
      lock.lock()
      if !started || discarded != nil {
        let n = discarded
        lock.unlock()
        c.resume(returning: n)
        return
      }
      waiter = c
      lock.unlock()
    }
  }
}
#endif  // Server
