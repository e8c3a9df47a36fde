#if Server  // see ServerTrait.swift
  import Foundation
  import LanePool
  import Logging
  import ServiceLifecycle
  import Synchronization

  extension LanePool.Configuration {
    /// Sends the pool's own log lines to `logger`, with the pool's name in the metadata
    /// key `lanepool.pool`: the priority settings the kernel refused and a lane that could
    /// not be placed (one warning each per pool, at creation), and a pool released
    /// without a shutdown. These lines are written by the C core (or the Swift facade) as
    /// finished sentences, so their text is the message.
    ///
    /// Stalls are not among them: ``LanePoolService`` reports each stall twice, a
    /// warning when it starts and a notice when it ends, with the lane, its band and the
    /// durations in metadata. The core's own stall line is left out here, so that a
    /// stall is not warned twice; without a running ``LanePoolService`` a stall shows only
    /// in `LaneInfo.stalledFor` and `LaneInfo.stalls`. Never called on the hot path.
    public mutating func log(to logger: Logger) {
      let name = self.name
      logHandler = { level, message in
        if message.contains(coreStallPhrase) { return }
        logger.log(
          level: level == .warning ? .warning : .info, "\(message)",
          metadata: ["lanepool.pool": "\(name)"])
      }
    }
  }

  /// Part of the C core's stall line (Sources/CLanePool/timer.c, check_stalls), which
  /// ``LanePool/Configuration/log(to:)`` leaves to ``LanePoolService``. The server tests
  /// run a real stall through both, so a change of that text fails them.
  let coreStallPhrase = " has been running one task for over "

  /// A pool as a swift-service-lifecycle `Service`: `run()` waits for graceful shutdown,
  /// then drains the pool (every accepted task runs, the lanes are joined) and returns;
  /// if its task is cancelled instead, it cancels the pool (queued tasks are discarded
  /// without running) and throws `CancellationError`. If its task is cancelled while it
  /// drains (say ServiceGroup's `maximumGracefulShutdownDuration` ran out), the drain
  /// escalates to a cancel: the lanes finish the tasks they are running, the rest is
  /// discarded, and `run()` throws `CancellationError` promptly, so a
  /// `maximumCancellationDuration` is kept. Either way it logs one summary, with the
  /// counts in metadata:
  ///
  /// | message | level | metadata |
  /// |---|---|---|
  /// | `lanepool shut down gracefully` | info | `lanepool.pool`, `lanepool.tasks_run`, `lanepool.tasks_discarded` (0) |
  /// | `lanepool cancelled` | notice | the same |
  /// | `lanepool cancelled while draining` | notice | the same |
  /// | `lanepool lane stalled` | warning | `lanepool.pool`, `lanepool.lane`, `lanepool.qos`, `lanepool.running_seconds` |
  /// | `lanepool lane stall ended` | notice | `lanepool.pool`, `lanepool.lane`, `lanepool.qos`, `lanepool.stalled_seconds` |
  ///
  /// While it runs (draining included) it watches the pool's stall detector (a pool
  /// made with `LanePool.Configuration.stallThreshold`): every `stallCheckInterval`, on a
  /// thread of its own (so a busy cooperative pool cannot hide a stall), it reads each
  /// lane's `LaneInfo`, and logs a stall once when it is first seen and once
  /// when the stalled task has returned. `lanepool.running_seconds` is how long the task
  /// had run when seen; `lanepool.stalled_seconds` how long it ran in all, to within one
  /// check interval. A stall that started and ended between two checks is logged as one
  /// such pair with `lanepool.stalls` saying how many it stands for. `tasks_run` counts
  /// every task the lanes ran, a ``LanePoolMetrics`` probe included.
  ///
  /// ```swift
  /// let pool = try LanePool(configuration: config)
  /// let group = ServiceGroup(services: [LanePoolService(pool: pool, logger: logger), server],
  ///                          gracefulShutdownSignals: [.sigterm], logger: logger)
  /// try await group.run()
  /// ```
  public struct LanePoolService: Service {
    /// The pool this service drains or cancels.
    public let pool: LanePool
    let logger: Logger
    /// Time between two looks at the lanes' stall state; nil: stalls are not logged.
    public let stallCheckInterval: Duration?

    /// A service for `pool` that logs its summary and stalls to `logger`. The pool must
    /// not be shut down by anyone else while the service runs.
    public init(pool: LanePool, logger: Logger, stallCheckInterval: Duration? = .milliseconds(250)) {
      self.pool = pool
      self.logger = logger
      self.stallCheckInterval = stallCheckInterval
    }

    /// Runs until graceful shutdown (then drains the pool and returns) or cancellation
    /// (then cancels the pool and throws `CancellationError`); see ``LanePoolService``.
    public func run() async throws {
      let watch = StallWatch(pool: pool, logger: logger)
      if let every = stallCheckInterval { watch.start(every: every) }
      do {
        try await lifecycle()
      } catch {
        watch.stop()
        watch.check()  // a stall the shutdown ended
        throw error
      }
      watch.stop()
      watch.check()
    }

    private func lifecycle() async throws {
      do {
        try await gracefulShutdown()
      } catch {
        // Cancelled: stop at once, hand back what was queued.
        let discarded = await Self.cancel(pool)
        logger.notice("lanepool cancelled", metadata: summary(discarded: discarded))
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
      switch await escalation.result() {
      case .some((let discarded, true)):
        logger.notice("lanepool cancelled while draining", metadata: summary(discarded: discarded))
        throw CancellationError()
      case .some((_, false)):
        // The cancel came after the drain had committed: everything ran.
        logger.info("lanepool shut down gracefully", metadata: summary(discarded: 0))
        throw CancellationError()
      case nil:
        break
      }
      logger.info("lanepool shut down gracefully", metadata: summary(discarded: 0))
    }

    private func summary(discarded: Int) -> Logger.Metadata {
      let run = (pool.allLanes + pool.rescueLanes).reduce(0) { $0 + $1.info.tasksExecuted }
      return [
        "lanepool.pool": "\(pool.name)",
        "lanepool.tasks_run": .stringConvertible(run),
        "lanepool.tasks_discarded": .stringConvertible(discarded),
      ]
    }

    /// A cancelling shutdown, on a fresh thread: it blocks until the lanes are joined,
    /// which must not hold a thread of the cooperative pool.
    static func cancel(_ pool: LanePool) async -> Int {
      await withCheckedContinuation { (c: CheckedContinuation<Int, Never>) in
        Thread { c.resume(returning: (try? pool.shutdown(discardingQueued: true)) ?? 0) }.start()
      }
    }
  }

  /// Turns the stall detector's per-lane state into two log lines per stall. It looks on
  /// a thread of its own, not on a task: a stall often comes with blocked threads, and
  /// a cooperative pool kept busy (by callers waiting for the stalled lane, say) must
  /// not keep the stall from being reported.
  final class StallWatch: Sendable {
    private struct Seen {
      var stalls: UInt64 = 0  // stalls accounted for
      // The stall warned about and not yet ended: the lane's executed count then (it
      // moves when the stalled task returns) and when the task started.
      var open: (executed: UInt64, since: ContinuousClock.Instant)?
    }

    private let pool: LanePool
    private let logger: Logger
    private let lanes: [Lane]
    private let seen: Mutex<[Seen]>
    private let stopped = Atomic<Bool>(false)

    init(pool: LanePool, logger: Logger) {
      self.pool = pool
      self.logger = logger
      self.lanes = pool.allLanes + pool.rescueLanes
      // Stalls that ended before the service started are history; one under way now is
      // not seen yet, so the first look reports it.
      self.seen = Mutex(
        lanes.map { lane in
          let info = lane.info
          return Seen(stalls: info.stalls &- (info.isStalled ? 1 : 0))
        })
    }

    /// Looks every `every` on a new thread until ``stop()``.
    func start(every: Duration) {
      let (secs, atto) = every.components
      let pause = max(0.001, Double(secs) + Double(atto) / 1e18)
      let thread = Thread { [self] in
        while !stopped.load(ordering: .acquiring) {
          check()
          Thread.sleep(forTimeInterval: pause)
        }
      }
      thread.name = "lanepool-stalls"
      thread.start()
    }

    /// The thread ends at its next wake-up (it may look once more).
    func stop() { stopped.store(true, ordering: .releasing) }

    /// One look at every lane. Calls run one at a time.
    func check() {
      seen.withLock { seen in
        for (k, lane) in lanes.enumerated() {
          let info = lane.info
          let now = ContinuousClock.now
          if let open = seen[k].open, info.tasksExecuted != open.executed || info.stalls != seen[k].stalls {
            logger.notice(
              "lanepool lane stall ended",
              metadata: metadata(lane, ["lanepool.stalled_seconds": seconds(now - open.since)]))
            seen[k].open = nil
          }
          guard info.stalls != seen[k].stalls else { continue }
          let current: UInt64 = info.isStalled ? 1 : 0
          let missed = info.stalls &- seen[k].stalls &- current
          if missed > 0 && missed < UInt64.max / 2 {
            // Started and ended between two looks: one pair for them all.
            logger.warning(
              "lanepool lane stalled", metadata: metadata(lane, ["lanepool.stalls": .stringConvertible(missed)]))
            logger.notice(
              "lanepool lane stall ended", metadata: metadata(lane, ["lanepool.stalls": .stringConvertible(missed)]))
          }
          if let running = info.stalledFor {
            logger.warning(
              "lanepool lane stalled", metadata: metadata(lane, ["lanepool.running_seconds": seconds(running)]))
            seen[k].open = (info.tasksExecuted, now - running)
          }
          seen[k].stalls = info.stalls
        }
      }
    }

    private func metadata(_ lane: Lane, _ extra: Logger.Metadata) -> Logger.Metadata {
      var m: Logger.Metadata = [
        "lanepool.pool": "\(pool.name)", "lanepool.lane": "\(lane.name)", "lanepool.qos": "\(lane.qos)",
      ]
      m.merge(extra) { _, new in new }
      return m
    }
  }

  private func seconds(_ d: Duration) -> Logger.MetadataValue {
    let (s, atto) = d.components
    return .stringConvertible(Double(s) + Double(atto) / 1e18)
  }

  /// The cancelling shutdown a cancelled drain starts: at most one, its count once done.
  private final class Escalation: @unchecked Sendable {
    // @unchecked: every field is guarded by `lock`.
    private let lock = NSLock()
    private var started = false
    private var outcome: (discarded: Int, cancelled: Bool)?
    private var waiter: CheckedContinuation<(discarded: Int, cancelled: Bool)?, Never>?

    func start(_ pool: LanePool) {
      lock.lock()
      guard !started else {
        lock.unlock()
        return
      }
      started = true
      lock.unlock()
      Thread {
        let r = (try? pool.cancelUnlessDrained()) ?? (0, true)
        self.lock.lock()
        self.outcome = r
        let w = self.waiter
        self.waiter = nil
        self.lock.unlock()
        w?.resume(returning: r)
      }.start()
    }

    /// nil if no escalation started; otherwise waits for it and returns its count, and
    /// whether it cancelled (false: the drain had committed and ran everything).
    func result() async -> (discarded: Int, cancelled: Bool)? {
      await withCheckedContinuation { (c: CheckedContinuation<(discarded: Int, cancelled: Bool)?, Never>) in
        lock.lock()
        if !started || outcome != nil {
          let r = outcome
          lock.unlock()
          c.resume(returning: r)
          return
        }
        waiter = c
        lock.unlock()
      }
    }
  }
#endif  // Server
