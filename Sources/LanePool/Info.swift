internal import CLanePool

extension LanePool {
  /// A snapshot of one lane.
  public struct LaneInfo: Sendable, Hashable {
    /// The lane's band.
    public var qos: QoS
    /// The lane's index within its band.
    public var index: Int
    /// Kernel thread id, as in `/proc/self/task/<tid>`; 0 once the lane's thread ended.
    public var threadID: Int32
    /// The thread name, `<pool>-<band>-<index>` (at most 15 bytes).
    public var threadName: String
    /// Tasks run to completion.
    public var tasksExecuted: UInt64
    /// Tasks queued now (ring and overflow).
    public var depth: UInt64
    /// Tasks that found the ring full and went to the overflow list, since start.
    public var overflowed: UInt64
    /// Time spent running tasks: from the first task found to the ring being empty (a task
    /// a spinning thread found counts from the spin's last clock read, at most one spin
    /// round earlier).
    public var busyTime: Duration
    /// False once the lane thread has exited (after shutdown).
    public var isRunning: Bool
    /// The OS policy the lane asked for and what it got.
    public var policy: AppliedPolicy
    /// The CPU the lane is pinned to; nil when it floats or is bound to a whole node.
    public var cpu: Int?
    /// The lane's NUMA node; nil when unknown (no libnuma, or not pinned).
    public var numaNode: Int?
    /// The errno of a failed pin/bind (the lane then floats); nil if none.
    public var placementError: Int32?
    /// With a stall detector: how long the current task has run, while it overruns the
    /// threshold; nil otherwise.
    public var stalledFor: Duration?
    /// Stalls detected on this lane so far.
    public var stalls: UInt64
    /// Tasks of another lane's queue this lane's thread ran, because that lane's own
    /// thread was away running band work (a sibling's thread, or the band's rescue
    /// thread); counted in ``tasksExecuted`` too.
    public var tasksStolen: UInt64
    /// Wake-ups on the CPU of the sibling lane's task that woke this lane, while that
    /// task still ran: this lane let it go on first (one `sched_yield`) rather than
    /// preempt it.
    public var yieldsToWaker: UInt64
    /// True while the stall detector sees the current task overrun.
    public var isStalled: Bool { stalledFor != nil }
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
    /// Scheduling policy (SCHED_OTHER 0, SCHED_FIFO 1, SCHED_RR 2, SCHED_BATCH 3,
    /// SCHED_IDLE 5; an RT priority is not included).
    public var scheduler: AppliedSetting
    /// Nice value, -20 ... 19.
    public var nice: AppliedSetting
    /// I/O priority, `(class << 13) | level` as ioprio_get(2) returns it.
    public var ioPriority: AppliedSetting
    /// Timer slack in nanoseconds (PR_GET_TIMERSLACK).
    public var timerSlack: AppliedSetting
    /// EEVDF slice in ns (0 read back: the kernel has no custom slices).
    public var slice: AppliedSetting
    /// True if the kernel refused any setting.
    public var hasRefusals: Bool {
      [scheduler, nice, ioPriority, timerSlack, slice].contains { $0.error != nil }
    }
  }
}

extension LanePool.Lane {
  /// A snapshot of the lane's counters. Cheap (no lock); values are approximate while
  /// the lane runs.
  public var info: LaneInfo {
    var c = lanepool_lane_info_t()
    _ = lanepool_lane_info(raw, &c)
    return LaneInfo(
      qos: qos, index: index, threadID: c.tid, threadName: name,
      tasksExecuted: c.tasks_executed, depth: c.depth, overflowed: c.overflowed,
      busyTime: .nanoseconds(Int64(clamping: c.busy_ns)), isRunning: c.running != 0,
      policy: AppliedPolicy(
        scheduler: AppliedSetting(c.sched), nice: AppliedSetting(c.nice),
        ioPriority: AppliedSetting(c.ioprio), timerSlack: AppliedSetting(c.timer_slack),
        slice: AppliedSetting(c.slice)),
      cpu: c.cpu >= 0 ? Int(c.cpu) : nil, numaNode: c.node >= 0 ? Int(c.node) : nil,
      placementError: c.placement_error == 0 ? nil : c.placement_error,
      stalledFor: c.stalled != 0 ? .nanoseconds(Int64(clamping: c.stalled_ns)) : nil,
      stalls: c.stalls, tasksStolen: c.tasks_stolen, yieldsToWaker: c.yields_to_waker)
  }
}
