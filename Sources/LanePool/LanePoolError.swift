/// Why LanePool refused a request. Every case maps one errno value of the C core.
public enum LanePoolError: Error, Equatable, Sendable, CustomStringConvertible {
  /// The pool has shut down (or is shutting down); the task was not accepted. `ESHUTDOWN`.
  case shutDown
  /// The pool has a hard ring capacity and the lane is full; the task was not accepted. `EAGAIN`.
  case full
  /// An argument was out of range; the message says which. `EINVAL`.
  case invalidArgument(String)
  /// The call would wait for the lane it is running on. `EDEADLK`.
  case wouldDeadlock
  /// The process-wide default pool cannot be shut down. `EPERM`.
  case notPermitted
  /// A cancelling shutdown removed the task before it ran. `ECANCELED`.
  case cancelled
  /// The feature is not in this build or on this machine (NUMA placement without
  /// libnuma); the message says what. `ENOTSUP`.
  case unsupported(String)
  /// The pool was created before this process forked; its threads exist only in the
  /// parent. Create a new pool in the child. `EOWNERDEAD`.
  case forked
  /// A bounded-wait submit found no room before its timeout. `ETIMEDOUT`.
  case timedOut
  /// Any other errno from the system (for example `ENOMEM`, or `EAGAIN` from thread creation).
  case system(errno: Int32)

  public var description: String {
    switch self {
    case .shutDown: "LanePool: the pool has shut down; the task was not accepted"
    case .full: "LanePool: the lane is full (hard ring capacity); the task was not accepted"
    case .invalidArgument(let what): "LanePool: invalid argument: \(what)"
    case .wouldDeadlock: "LanePool: the call would wait for the lane it runs on"
    case .notPermitted: "LanePool: the default pool cannot be shut down"
    case .cancelled: "LanePool: the task was cancelled by a shutdown before it ran"
    case .unsupported(let what): "LanePool: not supported: \(what)"
    case .forked: "LanePool: the pool belongs to the parent process (used after fork()); create a new pool in the child"
    case .timedOut: "LanePool: no room in the lane before the timeout; the task was not accepted"
    case .system(let e): "LanePool: system error \(e)"
    }
  }
}

// errno values of Linux, spelled out so the mapping does not depend on Glibc's overlay.
enum Errno {
  static let EPERM: Int32 = 1
  static let EAGAIN: Int32 = 11
  static let EINVAL: Int32 = 22
  static let EDEADLK: Int32 = 35
  static let EALREADY: Int32 = 114
  static let ESHUTDOWN: Int32 = 108
  static let ECANCELED: Int32 = 125
  static let ENOTSUP: Int32 = 95
  static let EOWNERDEAD: Int32 = 130
  static let ETIMEDOUT: Int32 = 110
}

extension LanePoolError {
  /// Maps a C return code to an error, `what` naming the argument for EINVAL.
  init(code: Int32, what: @autoclosure () -> String = "see the C API's documentation") {
    switch code {
    case Errno.ESHUTDOWN: self = .shutDown
    case Errno.EAGAIN: self = .full
    case Errno.EINVAL: self = .invalidArgument(what())
    case Errno.EDEADLK: self = .wouldDeadlock
    case Errno.EPERM: self = .notPermitted
    case Errno.ECANCELED: self = .cancelled
    case Errno.ENOTSUP: self = .unsupported(what())
    case Errno.EOWNERDEAD: self = .forked
    case Errno.ETIMEDOUT: self = .timedOut
    default: self = .system(errno: code)
    }
  }
}
