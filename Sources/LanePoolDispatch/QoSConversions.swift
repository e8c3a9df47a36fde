import Dispatch
import Foundation
import LanePool

extension LanePool.QoS {
  /// GCD's class; `.unspecified` maps to `.default`, as GCD itself does.
  public init(_ qos: DispatchQoS.QoSClass) {
    switch qos {
    case .userInteractive: self = .userInteractive
    case .userInitiated: self = .userInitiated
    case .utility: self = .utility
    case .background: self = .background
    default: self = .default
    }
  }

  /// Foundation's class (YYDispatchQueuePool's parameter type).
  public init(_ qos: QualityOfService) {
    switch qos {
    case .userInteractive: self = .userInteractive
    case .userInitiated: self = .userInitiated
    case .utility: self = .utility
    case .background: self = .background
    default: self = .default
    }
  }
}
