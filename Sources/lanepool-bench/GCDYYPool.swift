import Dispatch
import Foundation
import Synchronization

/// GCDYYPool: a faithful port of YYKit's YYDispatchQueuePool over GCD serial queues, the anchor
/// LanePool is measured against: per QoS, `queueCount` serial queues (default: the
/// active processor count, capped at 32) created with the QoS class, handed out
/// round-robin by an atomic counter (YY: OSAtomicIncrement32, negative values
/// negated, modulo the count).
final class GCDYYPool: Sendable {
  static let maxQueueCount = 32
  let name: String
  let queues: [DispatchQueue]
  private let counter = Atomic<Int32>(0)

  init(name: String, queueCount: Int, qos: QualityOfService) {
    // fatalError, not precondition: the message must survive -O (the bench runs in release).
    if !(1...Self.maxQueueCount).contains(queueCount) {
      fatalError("GCDYYPool: queueCount must be 1...\(Self.maxQueueCount), got \(queueCount)")
    }
    self.name = name
    let dq = DispatchQoS(qosClass: Self.qosClass(qos), relativePriority: 0)
    self.queues = (0..<queueCount).map { DispatchQueue(label: "\(name).\($0)", qos: dq) }
  }

  /// YYDispatchContextGetQueue.
  func queue() -> DispatchQueue {
    var c = counter.wrappingAdd(1, ordering: .relaxed).newValue
    if c < 0 { c = -c }
    return queues[Int(c) % queues.count]
  }

  static func defaultQueueCount() -> Int {
    min(max(ProcessInfo.processInfo.activeProcessorCount, 1), maxQueueCount)
  }

  /// NSQualityOfServiceToQOSClass.
  static func qosClass(_ qos: QualityOfService) -> DispatchQoS.QoSClass {
    switch qos {
    case .userInteractive: .userInteractive
    case .userInitiated: .userInitiated
    case .utility: .utility
    case .background: .background
    default: .default
    }
  }
}
