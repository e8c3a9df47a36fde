internal import CLanePool

extension LanePool {
  /// The five quality-of-service classes, with the raw values of Apple's `qos_class_t`.
  ///
  /// Each class is a band of lanes in a ``LanePool``. A task or job priority maps to a
  /// band with ``init(jobPriority:)`` and ``init(_:)``; the `LanePoolDispatch` module
  /// adds conversions from GCD's `DispatchQoS.QoSClass` and Foundation's
  /// `QualityOfService`, so code moving from GCD or YYDispatchQueuePool changes one line.
  public enum QoS: UInt32, CaseIterable, Sendable, Hashable, CustomStringConvertible {
    /// Work the user is waiting on right now (GCD HIGH; by default nice -5, a 100 us slice).
    case userInteractive = 0x21
    /// Work the user started and waits for (GCD HIGH; by default nice -3, a 100 us slice).
    case userInitiated = 0x19
    /// The default band (GCD DEFAULT; nice 0, a 300 us slice).
    case `default` = 0x15
    /// Long-running work the user knows about (GCD LOW; by default nice 4, SCHED_BATCH).
    case utility = 0x11
    /// Work the user does not see (GCD BACKGROUND; by default nice 10, SCHED_BATCH, I/O
    /// best-effort 7).
    case background = 0x09

    /// The band a job priority (a `qos_class_t` value) maps to: at least 33 ->
    /// userInteractive, 25 -> userInitiated, 21 -> default, 17 -> utility, below ->
    /// background; 0 (unspecified) -> default.
    public init(jobPriority raw: UInt8) {
      switch raw {
      case 0: self = .default
      case 33...: self = .userInteractive
      case 25..<33: self = .userInitiated
      case 21..<25: self = .default
      case 17..<21: self = .utility
      default: self = .background
      }
    }

    /// The band a task priority maps to (as ``init(jobPriority:)``).
    public init(_ priority: TaskPriority) { self.init(jobPriority: priority.rawValue) }

    /// Band index: 0 for userInteractive ... 4 for background.
    package var bandIndex: Int {
      switch self {
      case .userInteractive: 0
      case .userInitiated: 1
      case .default: 2
      case .utility: 3
      case .background: 4
      }
    }

    /// The band's name, as in `.userInitiated`.
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
}

extension LanePool.QoS {
  /// The C core's band value.
  var c: lanepool_qos_t { lanepool_qos_t(rawValue: rawValue) }
}
