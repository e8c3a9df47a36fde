internal import CLanePool

extension LanePool {
  /// GCD's priority classes, from the seeds' QoS table.
  public enum PriorityClass: Int, Sendable, Hashable {
    /// DISPATCH_QUEUE_PRIORITY_HIGH (userInteractive, userInitiated).
    case high = 2
    /// DISPATCH_QUEUE_PRIORITY_DEFAULT.
    case `default` = 0
    /// DISPATCH_QUEUE_PRIORITY_LOW (utility).
    case low = -2
    /// DISPATCH_QUEUE_PRIORITY_BACKGROUND.
    case background = -32768
  }

  /// What a band's lanes ask the kernel for. Each lane applies it from inside its own
  /// thread before its first task; see docs/priorities.md for the table and the
  /// fallback when the kernel refuses a setting.
  public struct BandPolicy: Sendable, Hashable {
    /// The Linux scheduling policy a band's lanes ask for.
    public enum Scheduler: Sendable, Hashable {
      /// SCHED_OTHER: the normal time-sharing policy (EEVDF), weighted by `nice`.
      case other
      /// SCHED_BATCH: as `other`, but treated as CPU-bound (no wake-up preference).
      case batch
      /// Runs only when nothing else wants the CPU. Opt-in; an unprivileged thread can
      /// enter it but never leave it.
      case idle
      /// Real-time; needs `Configuration.allowRealtime` and, in practice, CAP_SYS_NICE.
      case fifo(priority: Int)
      /// Real-time; as `fifo`.
      case roundRobin(priority: Int)
    }

    /// The I/O priority (ioprio_set(2)) a band's lanes ask for.
    public enum IOPriority: Sendable, Hashable {
      /// Leave the inherited I/O priority.
      case unchanged
      /// IOPRIO_CLASS_RT, level 0 (highest) ... 7; needs CAP_SYS_ADMIN.
      case realtime(level: Int)
      /// Level 0 (highest) ... 7.
      case bestEffort(level: Int)
      /// IOPRIO_CLASS_IDLE: disk time only when nobody else wants it.
      case idle
    }

    /// The scheduling policy.
    public var scheduler: Scheduler
    /// -20 ... 19.
    public var nice: Int
    /// The I/O priority.
    public var ioPriority: IOPriority
    /// nil leaves the inherited timer slack (50 us by default on Linux).
    public var timerSlack: Duration?
    /// EEVDF time slice (Linux 6.12+, 100 us ... 100 ms): a waking lane with a shorter
    /// slice may preempt the running thread at once. nil leaves the kernel default.
    public var slice: Duration?

    /// A policy; timer slack and slice default to the inherited values.
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
}

extension LanePool.QoS {
  /// The seeds' table: userInteractive, userInitiated -> high; default -> default;
  /// utility -> low; background -> background.
  public var priorityClass: PriorityClass {
    var out = lanepool_priority_class_t(rawValue: 0)
    _ = lanepool_priority_class(c, &out)
    return PriorityClass(rawValue: Int(out.rawValue)) ?? .default
  }
}
