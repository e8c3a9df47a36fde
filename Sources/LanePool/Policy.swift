internal import CLanePool

/// GCD's priority classes, from the seeds' QoS table.
public enum PriorityClass: Int, Sendable, Hashable {
  case high = 2
  case `default` = 0
  case low = -2
  case background = -32768
}

extension QoS {
  /// The seeds' table: userInteractive, userInitiated -> high; default -> default;
  /// utility -> low; background -> background.
  public var priorityClass: PriorityClass {
    var out = lanepool_priority_class_t(rawValue: 0)
    _ = lanepool_priority_class(c, &out)
    return PriorityClass(rawValue: Int(out.rawValue)) ?? .default
  }
}

/// What a band's lanes ask the kernel for. Each lane applies it from inside its own
/// thread before its first task; see docs/priorities.md for the table and the
/// fallback when the kernel refuses a setting.
public struct BandPolicy: Sendable, Hashable {
  public enum Scheduler: Sendable, Hashable {
    case other
    case batch
    /// Runs only when nothing else wants the CPU. Opt-in; an unprivileged thread can
    /// enter it but never leave it.
    case idle
    /// Real-time; needs `Configuration.allowRealtime` and, in practice, CAP_SYS_NICE.
    case fifo(priority: Int)
    /// Real-time; as `fifo`.
    case roundRobin(priority: Int)
  }

  public enum IOPriority: Sendable, Hashable {
    /// Leave the inherited I/O priority.
    case unchanged
    case realtime(level: Int)
    /// Level 0 (highest) ... 7.
    case bestEffort(level: Int)
    case idle
  }

  public var scheduler: Scheduler
  /// -20 ... 19.
  public var nice: Int
  public var ioPriority: IOPriority
  /// nil leaves the inherited timer slack (50 us by default on Linux).
  public var timerSlack: Duration?
  /// EEVDF time slice (Linux 6.12+, 100 us ... 100 ms): a waking lane with a shorter
  /// slice may preempt the running thread at once. nil leaves the kernel default.
  public var slice: Duration?

  public init(
    scheduler: Scheduler, nice: Int, ioPriority: IOPriority, timerSlack: Duration? = nil,
    slice: Duration? = nil
  ) {
    self.scheduler = scheduler
    self.nice = nice
    self.ioPriority = ioPriority
    self.timerSlack = timerSlack
    self.slice = slice
  }

  /// LanePool's default policy for a band (docs/priorities.md).
  public static func `default`(for qos: QoS) -> BandPolicy {
    var p = lanepool_band_policy_t()
    _ = lanepool_default_policy(qos.c, &p)
    return BandPolicy(p)
  }

  init(_ p: lanepool_band_policy_t) {
    switch p.sched {
    case LANEPOOL_SCHED_BATCH: scheduler = .batch
    case LANEPOOL_SCHED_IDLE: scheduler = .idle
    case LANEPOOL_SCHED_FIFO: scheduler = .fifo(priority: Int(p.rt_priority))
    case LANEPOOL_SCHED_RR: scheduler = .roundRobin(priority: Int(p.rt_priority))
    default: scheduler = .other
    }
    nice = Int(p.nice)
    switch p.ioprio_class {
    case LANEPOOL_IOPRIO_RT: ioPriority = .realtime(level: Int(p.ioprio_level))
    case LANEPOOL_IOPRIO_BE: ioPriority = .bestEffort(level: Int(p.ioprio_level))
    case LANEPOOL_IOPRIO_IDLE: ioPriority = .idle
    default: ioPriority = .unchanged
    }
    timerSlack = p.timer_slack_ns == 0 ? nil : .nanoseconds(Int64(clamping: p.timer_slack_ns))
    slice = p.slice_ns == 0 ? nil : .nanoseconds(Int64(clamping: p.slice_ns))
  }

  var c: lanepool_band_policy_t {
    var p = lanepool_band_policy_t()
    switch scheduler {
    case .other: p.sched = LANEPOOL_SCHED_OTHER
    case .batch: p.sched = LANEPOOL_SCHED_BATCH
    case .idle: p.sched = LANEPOOL_SCHED_IDLE
    case .fifo(let prio):
      p.sched = LANEPOOL_SCHED_FIFO
      p.rt_priority = Int32(clamping: prio)
    case .roundRobin(let prio):
      p.sched = LANEPOOL_SCHED_RR
      p.rt_priority = Int32(clamping: prio)
    }
    p.nice = Int32(clamping: nice)
    switch ioPriority {
    case .unchanged: p.ioprio_class = LANEPOOL_IOPRIO_NONE
    case .realtime(let level):
      p.ioprio_class = LANEPOOL_IOPRIO_RT
      p.ioprio_level = Int32(clamping: level)
    case .bestEffort(let level):
      p.ioprio_class = LANEPOOL_IOPRIO_BE
      p.ioprio_level = Int32(clamping: level)
    case .idle: p.ioprio_class = LANEPOOL_IOPRIO_IDLE
    }
    if let slack = timerSlack { p.timer_slack_ns = slack.nanosecondsClamped }
    if let slice { p.slice_ns = slice.nanosecondsClamped }
    return p
  }
}

extension Duration {
  /// Whole nanoseconds, saturating: negative durations give 0, durations beyond
  /// UInt64.max nanoseconds (about 584 years) give UInt64.max. Never traps.
  var nanosecondsClamped: UInt64 {
    let (s, atto) = components
    if s < 0 || (s == 0 && atto <= 0) { return 0 }
    let (whole, overflow) = UInt64(s).multipliedReportingOverflow(by: 1_000_000_000)
    if overflow { return .max }
    let (sum, carry) = whole.addingReportingOverflow(UInt64(max(0, atto) / 1_000_000_000))
    return carry ? .max : sum
  }

  /// As ``nanosecondsClamped``, at most Int64.max (about 292 years): "the far future"
  /// for timeouts and deadlines handed to C, which adds them to a clock reading.
  var nanosecondsForTimeout: UInt64 { Swift.min(nanosecondsClamped, UInt64(Int64.max)) }
}

/// Where a pool's lanes run.
public enum Placement: Sendable, Hashable {
  /// Lanes float over the CPUs the process may use.
  case none
  /// Lane i of every band is pinned to the i-th CPU (mod count) of the process's
  /// allowed set, so `taskset` and cgroup cpusets are honoured.
  case cores
  /// Lane i of every band is pinned to `cpus[i % cpus.count]`; each must be allowed.
  case cpus([Int])
  /// Lanes spread over the machine's NUMA nodes in proportion to their CPUs, each bound
  /// to its node with its ring in the node's memory. Needs the `NUMA` package trait
  /// (libnuma) and a machine where libnuma works; otherwise creating such a pool
  /// throws ``LanePoolError/unsupported(_:)``.
  case numa
  /// As `numa`, with a topology (node -> CPUs) given instead of read from libnuma.
  case numaTopology([Int: [Int]])
}

/// One OS setting a lane asked for and what it got, read back from the kernel.
public struct AppliedSetting: Sendable, Hashable {
  /// What was asked for; nil when the setting was left alone.
  public var requested: Int64?
  /// What the thread has now.
  public var got: Int64
  /// The errno of a refusal; nil when the kernel accepted.
  public var error: Int32?

  init(_ a: lanepool_applied_t) {
    requested = a.requested == -1 ? nil : a.requested
    got = a.got
    error = a.error == 0 ? nil : a.error
  }
}

/// The OS policy a lane asked for and got. Scheduler values are Linux's SCHED_*
/// numbers; I/O priority is `(class << 13) | level` as ioprio_get(2) returns it;
/// timer slack is in nanoseconds.
public struct AppliedPolicy: Sendable, Hashable {
  public var scheduler: AppliedSetting
  public var nice: AppliedSetting
  public var ioPriority: AppliedSetting
  public var timerSlack: AppliedSetting
  /// EEVDF slice in ns (0 read back: the kernel has no custom slices).
  public var slice: AppliedSetting
  /// True if the kernel refused any setting.
  public var hasRefusals: Bool {
    [scheduler, nice, ioPriority, timerSlack, slice].contains { $0.error != nil }
  }
}

/// Severity of a log line from the pool.
public enum LogLevel: Sendable, Hashable {
  case info
  case warning
}
