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
/// if its task is cancelled instead, it cancels the pool (queued tasks are released
/// without running) and throws `CancellationError`. Either way it logs one summary.
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
      let discarded = (try? pool.shutdown(discardingQueued: true)) ?? 0
      logger.notice(
        "lanepool '\(pool.name)' cancelled: \(tasksRun) tasks run, \(discarded) queued tasks discarded",
        metadata: ["lanepool.pool": "\(pool.name)"])
      throw CancellationError()
    }
    try await pool.shutdownGracefully()
    logger.info(
      "lanepool '\(pool.name)' shut down gracefully: \(tasksRun) tasks run, none discarded",
      metadata: ["lanepool.pool": "\(pool.name)"])
  }

  private var tasksRun: UInt64 { pool.allLanes.reduce(0) { $0 + $1.info.tasksExecuted } }
}
