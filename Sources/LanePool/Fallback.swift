import Dispatch

/// Where a pool's Swift concurrency jobs run when its lanes no longer can: after a
/// shutdown began (the lane refuses them) or when a cancelling shutdown took them off
/// a lane. A job is never dropped, because its task would then wait forever.
///
/// One per pool: a serial Dispatch queue, created on first use, that runs nothing
/// until every lane thread of the pool has exited (``open()``), so a job of an actor
/// never runs beside one still running on its lane. Then it runs the jobs the
/// shutdown discarded (in the lanes' FIFO order), then those refused since shutdown
/// began, in the order they came, one at a time. One queue for all the pool's lanes
/// keeps every lane's mutual exclusion (the discard callback does not say which lane
/// a job came from, so per-lane queues could not be fed correctly).
///
/// It is also a serial executor: discarded jobs run isolated to it (their lane is not
/// known), and a lane answers `checkIsolated` / `isIsolatingCurrentContext` with true
/// while its pool's fallback runs (``isCurrent``).
final class Fallback: SerialExecutor, @unchecked Sendable {
  // @unchecked: the mutable state is guarded by `lock`.
  enum Item: Sendable {
    /// A job enqueued on a lane (an actor's, or a lane-preferring task's) that the
    /// lane refused.
    case lane(UnownedJob, Lane)
    /// A serial job a cancelling shutdown discarded; its lane is not known.
    case discardedJob(UnownedJob)
    /// A closure meant for a lane (a group's notification).
    case work(@Sendable () -> Void)
  }

  private let label: String
  private let lock = PthreadLock()
  private var isOpen = false
  private var discarded: [Item] = []
  private var held: [Item] = []
  private var queue: DispatchQueue?

  init(poolName: String) { label = "lanepool.\(poolName).fallback" }

  private static let key = DispatchSpecificKey<ObjectIdentifier>()

  /// True while the caller runs on this fallback queue.
  var isCurrent: Bool { DispatchQueue.getSpecific(key: Self.key) == ObjectIdentifier(self) }

  /// A job or closure a lane refused. Runs once the pool's lanes have exited;
  /// `threadsGone` (a fork child, where the pool has no threads) opens the fallback now.
  func refused(_ item: Item, threadsGone: Bool = false) {
    lock.lock()
    defer { lock.unlock() }
    if threadsGone { openLocked() }
    if isOpen { submitLocked(item) } else { held.append(item) }
  }

  /// A serial job a cancelling shutdown discarded (from the discard callback).
  func discarded(_ item: Item) {
    lock.lock()
    defer { lock.unlock() }
    if isOpen { submitLocked(item) } else { discarded.append(item) }
  }

  /// Every lane thread of the pool has exited: run what waited, from now on at once.
  func open() {
    lock.lock()
    defer { lock.unlock() }
    openLocked()
  }

  private func openLocked() {
    guard !isOpen else { return }
    isOpen = true
    for item in discarded + held { submitLocked(item) }
    discarded = []
    held = []
  }

  private func submitLocked(_ item: Item) {
    let q: DispatchQueue
    if let queue {
      q = queue
    } else {
      q = DispatchQueue(label: label)
      q.setSpecific(key: Self.key, value: ObjectIdentifier(self))
      queue = q
    }
    q.async { self.run(item) }
  }

  private func run(_ item: Item) {
    switch item {
    case .lane(let job, let lane):
      job.runSynchronously(on: lane.asUnownedSerialExecutor())
    case .discardedJob(let job):
      job.runSynchronously(on: asUnownedSerialExecutor())
    case .work(let work):
      work()
    }
  }

  // MARK: SerialExecutor (for discarded jobs, whose lane is unknown)

  func enqueue(_ job: consuming ExecutorJob) { refused(.discardedJob(UnownedJob(job))) }

  func asUnownedSerialExecutor() -> UnownedSerialExecutor { UnownedSerialExecutor(ordinary: self) }

  func checkIsolated() {
    if !isCurrent { misuse("expected to run on the fallback queue \(label), but the caller is elsewhere") }
  }

  func isIsolatingCurrentContext() -> Bool? { isCurrent }

  // MARK: Pool (task executor) jobs

  /// Runs a job of a task that prefers `pool` on Dispatch's global concurrent queue:
  /// such jobs need no mutual exclusion, only a thread. The task keeps its preference
  /// (its next job tries the pool again).
  static func runElsewhere(_ job: UnownedJob, preferring pool: LanePool) {
    DispatchQueue.global().async { job.runSynchronously(on: pool.asUnownedTaskExecutor()) }
  }
}
