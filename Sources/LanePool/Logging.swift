internal import CLanePool
import Synchronization

extension LanePool {
  /// Severity of a log line from the pool.
  public enum LogLevel: Sendable, Hashable {
    /// Informational: the one line per pool describing what each band got.
    case info
    /// Something did not go as asked (a refused priority, a stall).
    case warning
  }
}

/// Carries the log handler through C during lanepool_create.
final class LogBox: Sendable {
  let handler: @Sendable (LogLevel, String) -> Void
  init(_ handler: @escaping @Sendable (LogLevel, String) -> Void) { self.handler = handler }
}

let logTrampoline: @convention(c) (lanepool_log_level_t, UnsafePointer<CChar>?, UnsafeMutableRawPointer?) -> Void = {
  level, message, arg in
  guard let arg, let message else { return }
  Unmanaged<LogBox>.fromOpaque(arg).takeUnretainedValue().handler(
    level == LANEPOOL_LOG_WARNING ? .warning : .info, String(cString: message))
}

/// One line on stderr per process for pools released without shutdown (pools with a
/// log handler say it there instead, each).
let releasedWithoutShutdownWarned = Atomic<Bool>(false)
