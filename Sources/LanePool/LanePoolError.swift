#if canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#endif

extension LanePool {
  /// Why LanePool refused a request: a ``Code`` saying what kind of refusal it is, the
  /// errno value of the C core behind it, and a message for people.
  ///
  /// A struct rather than an enum, so that new codes can be added without breaking
  /// code that switches over them (as swift-service-lifecycle's `ServiceGroupError` and
  /// SwiftNIO's errors do). Match on ``code``:
  ///
  /// ```swift
  /// do { try lane.async(work) } catch {
  ///   switch error.code {
  ///   case .shutDown: dropIt()
  ///   case .full: retryLater()
  ///   default: throw error
  ///   }
  /// }
  /// ```
  ///
  /// Two errors are equal when their code and errno are equal; the message is not
  /// compared, so `#expect(throws: LanePoolError.shutDown)` and
  /// `error == .invalidArgument("")` work as before.
  public struct LanePoolError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The kind of refusal. Compare with the static members; more may be added.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
      enum Base: Hashable, Sendable {
        case shutDown, full, invalidArgument, wouldDeadlock, notPermitted, cancelled
        case unsupported, forked, timedOut, system
      }
      let base: Base
      private init(_ base: Base) { self.base = base }

      /// The pool has shut down (or is shutting down); the task was not accepted. `ESHUTDOWN`.
      public static let shutDown = Code(.shutDown)
      /// The pool has a hard ring capacity and the lane is full; the task was not accepted. `EAGAIN`.
      public static let full = Code(.full)
      /// An argument or setting was out of range; the message names it. `EINVAL`.
      public static let invalidArgument = Code(.invalidArgument)
      /// The call would wait for the lane it is running on. `EDEADLK`.
      public static let wouldDeadlock = Code(.wouldDeadlock)
      /// The process-wide default pool cannot be shut down. `EPERM`.
      public static let notPermitted = Code(.notPermitted)
      /// A cancelling shutdown removed the task before it ran. `ECANCELED`.
      public static let cancelled = Code(.cancelled)
      /// The feature is not in this build or on this machine (NUMA placement without
      /// libnuma); the message says what. `ENOTSUP`.
      public static let unsupported = Code(.unsupported)
      /// The pool was created before this process forked; its threads exist only in the
      /// parent. Create a new pool in the child. `EOWNERDEAD`.
      public static let forked = Code(.forked)
      /// A bounded-wait submit found no room before its timeout. `ETIMEDOUT`.
      public static let timedOut = Code(.timedOut)
      /// Any other error from the system (for example `ENOMEM`, or `EAGAIN` when no more
      /// threads can be created); ``LanePoolError/errno`` says which.
      public static let system = Code(.system)

      /// The code's name, as in `shutDown`.
      public var description: String {
        switch base {
        case .shutDown: "shutDown"
        case .full: "full"
        case .invalidArgument: "invalidArgument"
        case .wouldDeadlock: "wouldDeadlock"
        case .notPermitted: "notPermitted"
        case .cancelled: "cancelled"
        case .unsupported: "unsupported"
        case .forked: "forked"
        case .timedOut: "timedOut"
        case .system: "system"
        }
      }
    }

    /// What kind of refusal this is.
    public let code: Code
    /// The errno value the C core returned (0 if none was involved).
    public let errno: Int32
    /// What happened, for people; for ``Code/invalidArgument`` it names the setting.
    public let message: String

    /// An error with the given code, errno and message.
    public init(code: Code, errno: Int32, message: String) {
      self.code = code
      self.errno = errno
      self.message = message
    }

    /// `LanePool: <message>`.
    public var description: String { "LanePool: \(message)" }

    /// Errors are equal when code and errno are; the message is for people and does not count.
    public static func == (a: Self, b: Self) -> Bool { a.code == b.code && a.errno == b.errno }
    /// Hashes code and errno, consistently with `==`.
    public func hash(into hasher: inout Hasher) {
      hasher.combine(code)
      hasher.combine(errno)
    }

    // MARK: The former enum cases, as values

    /// The pool has shut down; the task was not accepted.
    public static let shutDown = LanePoolError(
      code: .shutDown, errno: Errno.ESHUTDOWN, message: "the pool has shut down; the task was not accepted")
    /// The lane is full (hard ring capacity); the task was not accepted.
    public static let full = LanePoolError(
      code: .full, errno: Errno.EAGAIN,
      message: "the lane is full (hard ring capacity); the task was not accepted")
    /// An argument or setting was out of range; `what` names it.
    public static func invalidArgument(_ what: String) -> LanePoolError {
      LanePoolError(code: .invalidArgument, errno: Errno.EINVAL, message: "invalid argument: \(what)")
    }
    /// The call would wait for the lane it runs on.
    public static let wouldDeadlock = LanePoolError(
      code: .wouldDeadlock, errno: Errno.EDEADLK, message: "the call would wait for the lane it runs on")
    /// The default pool cannot be shut down.
    public static let notPermitted = LanePoolError(
      code: .notPermitted, errno: Errno.EPERM, message: "the default pool cannot be shut down")
    /// A cancelling shutdown removed the task before it ran.
    public static let cancelled = LanePoolError(
      code: .cancelled, errno: Errno.ECANCELED, message: "the task was cancelled by a shutdown before it ran")
    /// Not supported in this build or on this machine; `what` says what.
    public static func unsupported(_ what: String) -> LanePoolError {
      LanePoolError(code: .unsupported, errno: Errno.ENOTSUP, message: "not supported: \(what)")
    }
    /// The pool belongs to the parent process (used after `fork()`).
    public static let forked = LanePoolError(
      code: .forked, errno: Errno.EOWNERDEAD,
      message: "the pool belongs to the parent process (used after fork()); create a new pool in the child")
    /// A bounded-wait submit found no room before its timeout.
    public static let timedOut = LanePoolError(
      code: .timedOut, errno: Errno.ETIMEDOUT,
      message: "no room in the lane before the timeout; the task was not accepted")
    /// Any other errno from the system; the message carries its `strerror` text, as in
    /// "system error 12 (Cannot allocate memory)".
    public static func system(errno e: Int32) -> LanePoolError {
      LanePoolError(code: .system, errno: e, message: "system error \(e) (\(errnoText(e)))")
    }
    /// As ``system(errno:)``, saying what failed: "<what>: system error 11 (...)".
    static func system(errno e: Int32, during what: String) -> LanePoolError {
      LanePoolError(code: .system, errno: e, message: "\(what): system error \(e) (\(errnoText(e)))")
    }
  }
}

/// strerror's text for an errno value.
func errnoText(_ e: Int32) -> String {
  guard let s = strerror(e) else { return "unknown error" }
  return String(cString: s)
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

extension LanePool.LanePoolError {
  /// What EAGAIN meant for the call that returned it.
  enum Context {
    /// A submit to a lane: EAGAIN is a full lane (hard capacity).
    case submit
    /// Something that starts threads (pool creation, the first timer): EAGAIN is the
    /// system's thread limit.
    case threads(String)
  }

  /// Maps a C return code to an error, `what` naming the argument for EINVAL/ENOTSUP.
  init(
    errno code: Int32, context: Context = .submit,
    what: @autoclosure () -> String = "see the C API's documentation"
  ) {
    switch code {
    case Errno.ESHUTDOWN: self = .shutDown
    case Errno.EAGAIN:
      switch context {
      case .submit: self = .full
      case .threads(let during): self = .system(errno: code, during: during)
      }
    case Errno.EINVAL: self = .invalidArgument(what())
    case Errno.EDEADLK: self = .wouldDeadlock
    case Errno.EPERM: self = .notPermitted
    case Errno.ECANCELED: self = .cancelled
    case Errno.ENOTSUP: self = .unsupported(what())
    case Errno.EOWNERDEAD: self = .forked
    case Errno.ETIMEDOUT: self = .timedOut
    default:
      if case .threads(let during) = context {
        self = .system(errno: code, during: during)
      } else {
        self = .system(errno: code)
      }
    }
  }
}
