internal import CLanePool

/// One lane: a thread that runs the tasks submitted to it one at a time, in order.
///
/// What ``LanePool/queue(for:)-method`` returns, like a serial `DispatchQueue` of
/// YYDispatchQueuePool. All methods are thread-safe. A lane object lives as long as
/// you hold it; after its pool shut down, submissions throw ``LanePoolError/shutDown``,
/// while jobs of actors that use the lane as their executor keep running on the
/// pool's fallback serial queue (see ``Lane/enqueue(_:)``), so no task hangs.
public final class Lane: @unchecked Sendable {
  // @unchecked: every stored property is a `let`; the C lane is thread-safe.
  let raw: OpaquePointer
  let core: PoolCore
  /// The lane's QoS band.
  public let qos: QoS
  /// The lane's index within its band.
  public let index: Int
  /// The thread name, `<pool>-<band>-<index>` (at most 15 bytes).
  public let name: String
  /// The pool this lane belongs to. Unowned: valid while the pool object lives
  /// (a lane object may outlive it; then only its own methods may be used).
  unowned(unsafe) var pool: LanePool! = nil

  init(raw: OpaquePointer, core: PoolCore, qos: QoS, index: Int) {
    self.raw = raw
    self.core = core
    self.qos = qos
    self.index = index
    var c = lanepool_lane_info_t()
    _ = lanepool_lane_info(raw, &c)
    self.name = threadName(c)
  }

  /// Runs `work` on this lane after every task submitted before it.
  ///
  /// Never blocks. Cost: one allocation (the box that carries the closure through C)
  /// and, only if the lane is parked, one futex wake.
  /// - Throws: ``LanePoolError/shutDown`` after the pool has shut down,
  ///   ``LanePoolError/full`` when the pool has a hard capacity and this lane is full.
  ///   When it throws, `work` was not accepted and will never run.
  public func async(_ work: @escaping @Sendable () -> Void) throws(LanePoolError) {
    try async(work, onDiscard: nil)
  }

  /// As ``async(_:)``; `onDiscard` runs instead of `work` if a cancelling shutdown
  /// discards the task (on the thread that called shutdown, after the lanes exited).
  func async(
    _ work: @escaping @Sendable () -> Void, onDiscard: (@Sendable () -> Void)?
  ) throws(LanePoolError) {
    let ctx = TaskBox.retain(work, onDiscard: onDiscard)
    let rc = lanepool_lane_async(raw, taskTrampoline, ctx)
    if rc != 0 {
      TaskBox.release(ctx)
      throw LanePoolError(errno: rc)
    }
  }

  /// As ``async(_:)``, but when the lane is full (a pool with hard capacity) waits up
  /// to `timeout` for room (polling, 1 us to 1 ms backoff) instead of failing at once.
  /// Timeouts beyond about 292 years are clamped to that (they never trap).
  /// - Throws: ``LanePoolError/timedOut`` if there was no room in time (the closure is
  ///   released, never run), or as ``async(_:)``.
  public func async(
    waitingUpTo timeout: Duration, _ work: @escaping @Sendable () -> Void
  ) throws(LanePoolError) {
    let ctx = TaskBox.retain(work)
    let rc = lanepool_lane_async_wait(raw, taskTrampoline, ctx, timeout.nanosecondsForTimeout)
    if rc != 0 {
      TaskBox.release(ctx)
      throw LanePoolError(errno: rc)
    }
  }

  /// Runs `work` on this lane, after every task submitted before it, and returns its
  /// value; blocks the caller until then.
  ///
  /// When the lane is idle (parked, nothing queued), `work` runs inline on the calling
  /// thread, as `DispatchQueue.sync` does on an idle serial queue: the caller takes the
  /// lane's right to run, so the lane runs nothing else meanwhile, and inside `work`
  /// ``isCurrent``, ``current`` and an actor's `assumeIsolated` on this lane hold as on
  /// the lane's thread. Work submitted meanwhile runs after `work` returns. What differs
  /// from the lane's thread: the thread id and name, the OS priority and CPU placement
  /// (the caller's), and the stall detector does not watch it. Pass
  /// `onLaneThread: true` to always run on the lane's own thread (a hand-off, and a
  /// wake if the lane is parked). No allocation either way.
  ///
  /// Calling it from a task running on this same lane would wait forever: that stops
  /// the program with a message instead (use `async`, or a different lane).
  /// - Throws: what `work` throws; or ``LanePoolError/shutDown``, ``LanePoolError/full``,
  ///   ``LanePoolError/cancelled`` when the lane did not run it. (It throws rather than
  ///   rethrows because a shut-down pool refuses the task.)
  @inlinable
  public func sync<T>(onLaneThread: Bool = false, _ work: () throws -> T) throws -> T {
    // Inlinable, so the generic part is specialised in the caller (no generic metadata
    // look-ups per call); the lane call itself is not generic.
    var value: T? = nil
    var failure: (any Error)? = nil
    try _runSync(onLaneThread: onLaneThread) {
      do { value = try work() } catch { failure = error }
    }
    if let failure { throw failure }
    return value!
  }

  /// Runs `body` through lanepool_lane_sync_flags. The closure and its context stay on
  /// the caller's stack (non-escaping): C gets a pointer to the closure value.
  @usableFromInline
  func _runSync(onLaneThread: Bool, _ body: () -> Void) throws(LanePoolError) {
    let flags = onLaneThread ? UInt32(LANEPOOL_SYNC_QUEUED) : 0
    let rc: Int32 = withoutActuallyEscaping(body) { body in
      withUnsafePointer(to: body) { p in
        lanepool_lane_sync_flags(raw, syncTrampoline, UnsafeMutableRawPointer(mutating: p), flags)
      }
    }
    if rc != 0 {
      if rc == Errno.EDEADLK {
        misuse(
          "Lane.sync called from a task already running on lane \(name): it would wait for itself forever. Use async, or sync onto another lane."
        )
      }
      throw LanePoolError(errno: rc)
    }
  }

  /// True when the caller is a task running on this lane.
  public var isCurrent: Bool {
    var current: OpaquePointer?
    return lanepool_current_lane(&current) == 0 && current == raw
  }

  /// The lane the calling task runs on, or nil when the caller is not a lane thread.
  public static var current: Lane? {
    var current: OpaquePointer?
    guard lanepool_current_lane(&current) == 0, let current else { return nil }
    var ud: UnsafeMutableRawPointer?
    guard lanepool_lane_userdata(current, &ud) == 0, let ud else { return nil }
    return Unmanaged<Lane>.fromOpaque(ud).takeUnretainedValue()
  }

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
      stalls: c.stalls)
  }
}

extension Lane: Hashable, CustomStringConvertible {
  public static func == (a: Lane, b: Lane) -> Bool { a === b }
  public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }
  public var description: String { "Lane(\(name))" }
}

private func threadName(_ c: lanepool_lane_info_t) -> String {
  withUnsafeBytes(of: c.thread_name) { bytes in
    String(decoding: bytes.prefix(while: { $0 != 0 }), as: UTF8.self)
  }
}

/// A snapshot of one lane.
public struct LaneInfo: Sendable, Hashable {
  public var qos: QoS
  public var index: Int
  /// Kernel thread id, as in `/proc/self/task/<tid>`.
  public var threadID: Int32
  public var threadName: String
  /// Tasks run to completion.
  public var tasksExecuted: UInt64
  /// Tasks queued now (ring and overflow).
  public var depth: UInt64
  /// Tasks that found the ring full and went to the overflow list, since start.
  public var overflowed: UInt64
  /// Time spent running tasks (from the first task found to the ring being empty).
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
  /// True while the stall detector sees the current task overrun.
  public var isStalled: Bool { stalledFor != nil }
}

// MARK: - Carrying closures through C

/// Carries one `async` closure through the C ring: one allocation per submit.
final class TaskBox {
  let work: @Sendable () -> Void
  /// Called by the discard callback when a cancelling shutdown removes the task
  /// before it ran: resumes a waiting `run` caller, leaves a group.
  let onDiscard: (@Sendable () -> Void)?
  init(_ work: @escaping @Sendable () -> Void, onDiscard: (@Sendable () -> Void)? = nil) {
    self.work = work
    self.onDiscard = onDiscard
  }

  static func retain(
    _ work: @escaping @Sendable () -> Void, onDiscard: (@Sendable () -> Void)? = nil
  ) -> UnsafeMutableRawPointer {
    Unmanaged.passRetained(TaskBox(work, onDiscard: onDiscard)).toOpaque()
  }
  static func release(_ ctx: UnsafeMutableRawPointer) {
    Unmanaged<TaskBox>.fromOpaque(ctx).release()
  }
}

/// The C function every Swift `async` task runs through.
let taskTrampoline: @convention(c) (UnsafeMutableRawPointer?) -> Void = { ctx in
  Unmanaged<TaskBox>.fromOpaque(ctx!).takeRetainedValue().work()
}

/// Calls the `sync` closure whose address C passes through (see ``Lane/sync(onLaneThread:_:)``).
let syncTrampoline: @convention(c) (UnsafeMutableRawPointer?) -> Void = { ctx in
  ctx!.assumingMemoryBound(to: (() -> Void).self).pointee()
}
