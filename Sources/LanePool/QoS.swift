import Dispatch
import Foundation

/// The five quality-of-service classes, with the raw values of Apple's `qos_class_t`.
///
/// Each class is a band of lanes in a ``LanePool``. Convert from GCD's
/// `DispatchQoS.QoSClass` or Foundation's `QualityOfService` with the initialisers,
/// so code moving from GCD or YYDispatchQueuePool changes one line.
public enum QoS: UInt32, CaseIterable, Sendable, Hashable, CustomStringConvertible {
  case userInteractive = 0x21
  case userInitiated = 0x19
  case `default` = 0x15
  case utility = 0x11
  case background = 0x09

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

  /// Band index: 0 for userInteractive ... 4 for background.
  var bandIndex: Int {
    switch self {
    case .userInteractive: 0
    case .userInitiated: 1
    case .default: 2
    case .utility: 3
    case .background: 4
    }
  }

  public var description: String {
    switch self {
    case .userInteractive: "userInteractive"
    case .userInitiated: "userInitiated"
    case .default: "default"
    case .utility: "utility"
    case .background: "background"
    }
  }
}
