import Dispatch
import Foundation
@_exported import LanePool
import Synchronization

/// A drop-in for YYKit's `YYDispatchQueuePool`, on LanePool lanes instead of GCD
/// serial queues: same initialiser, `queue()`, `defaultPool(for:)`, and the
/// `YYDispatchQueueGetForQOS` free function, so call sites change only their import.
///
/// `queue()` returns a ``LaneQueue``, whose `async`/`sync`/`asyncAfter` have GCD's
/// shapes (they do not throw: YY pools are never shut down while in use).
public final class YYDispatchQueuePool: @unchecked Sendable {
  // @unchecked: `lanes` and `pool` are immutable; `counter` is atomic.
  /// YY's limit on `queueCount`.
  public static let maxQueueCount = 32

  /// The pool's name (YY's `name`); also the lanes' thread-name prefix.
  public let name: String
  /// How many serial queues (lanes) it hands out round-robin.
  public let queueCount: Int
  /// The QoS its queues run at.
  public let qos: QualityOfService
  private let lanes: [LaneQueue]
  private let pool: LanePool
  /// Round-robin position: unsigned and wrapping, so it never traps, however many
  /// calls (YY's Int32 counter negated `Int32.min` after 2^31 of them).
  let counter = Atomic<UInt>(0)

  /// A pool of `queueCount` (1...32) serial lanes at `qos`, as YY's
  /// `-initWithName:queueCount:qos:`; nil for a count out of range, as YY returns nil.
  /// (The backing LanePool starts every band; only `qos`'s lanes are used.)
  public init?(name: String?, queueCount: Int, qos: QualityOfService) {
    guard (1...Self.maxQueueCount).contains(queueCount) else { return nil }
    guard let pool = try? LanePool(name: name ?? "yypool", lanesPerBand: queueCount) else { return nil }
    self.name = name ?? "yypool"
    self.queueCount = queueCount
    self.qos = qos
    self.pool = pool
    self.lanes = pool.lanes(for: QoS(qos)).map(LaneQueue.init)
  }

  private init(defaultFor qos: QualityOfService) {
    pool = LanePool.default
    name = "lanepool.default.\(QoS(qos))"
    self.qos = qos
    lanes = pool.lanes(for: QoS(qos)).map(LaneQueue.init)
    queueCount = lanes.count
  }

  /// The next lane, round-robin (YY's `-queue`).
  public func queue() -> LaneQueue {
    let c = counter.wrappingAdd(1, ordering: .relaxed).oldValue
    return lanes[Int(c % UInt(lanes.count))]
  }

  /// The process-wide pool for a QoS (YY's `+defaultPoolForQOS:`), on LanePool's
  /// default pool.
  public static func defaultPool(for qos: QualityOfService) -> YYDispatchQueuePool {
    defaults[QoS(qos).bandIndex]
  }

  private static let defaults: [YYDispatchQueuePool] = QoS.allCases.map { qos in
    let fq: QualityOfService =
      switch qos {
      case .userInteractive: .userInteractive
      case .userInitiated: .userInitiated
      case .default: .default
      case .utility: .utility
      case .background: .background
      }
    return YYDispatchQueuePool(defaultFor: fq)
  }

  /// Drains and stops the backing pool's threads. When the last reference goes on one
  /// of the pool's own lanes (a task that captured the pool), the lane cannot wait for
  /// itself: a fresh thread finishes the shutdown once that task has returned.
  deinit {
    guard !pool.isDefault else { return }
    let pool = self.pool
    do {
      try pool.shutdown(discardingQueued: false)
    } catch  where error.code == .wouldDeadlock {
      Thread { _ = try? pool.shutdown(discardingQueued: false) }.start()
    } catch {
      // .forked: the threads are the parent's; nothing to stop here.
    }
  }
}

/// YY's `YYDispatchQueueGetForQOS(qos)`: a lane of the default pool, round-robin.
public func YYDispatchQueueGetForQOS(_ qos: QualityOfService) -> LaneQueue {
  YYDispatchQueuePool.defaultPool(for: qos).queue()
}
