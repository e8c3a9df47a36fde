import CLanePool
import Dispatch
import Foundation
import LanePoolTestSupport
import Synchronization
import Testing

@testable import LanePool
@testable import LanePoolDispatch

/// An actor on a lane that notices if two of its jobs ever overlap, or if one runs
/// where the lane would not say it is isolated.
actor GuardedCounter {
  let lane: Lane
  private(set) var value = 0
  private let inside = Atomic<Int>(0)
  let overlaps = Atomic<Int>(0)
  let notIsolated = Atomic<Int>(0)
  init(lane: Lane) { self.lane = lane }
  nonisolated var unownedExecutor: UnownedSerialExecutor { lane.asUnownedSerialExecutor() }

  func bump() {
    if inside.add(1, ordering: .acquiringAndReleasing).oldValue != 0 { overlaps.add(1, ordering: .relaxed) }
    if lane.isIsolatingCurrentContext() != true { notIsolated.add(1, ordering: .relaxed) }
    preconditionIsolated()  // the runtime asks the lane (or knows its executor)
    value += 1
    inside.subtract(1, ordering: .acquiringAndReleasing)
  }
}

/// As `eventually`, for async tests: polls with `Task.sleep`, so the cooperative
/// threads stay free for the tasks the condition waits on (there may be only two).
func eventuallyAsync(seconds: Double = 60, _ condition: () -> Bool) async -> Bool {
  let deadline = Date().addingTimeInterval(seconds)
  while !condition() {
    if Date() > deadline { return false }
    try? await Task.sleep(for: .milliseconds(1))
  }
  return true
}

/// A cancelling shutdown started on another thread (it blocks until the lanes are
/// joined).
final class BackgroundShutdown: @unchecked Sendable {
  private let done = DispatchSemaphore(value: 0)
  private let result = Locked<Int?>(nil)
  init(_ pool: LanePool, discardingQueued: Bool = true) {
    Thread {
      let n = (try? pool.shutdown(discardingQueued: discardingQueued)) ?? -1
      self.result.withLock { $0 = n }
      self.done.signal()
    }.start()
  }
  /// Waits (bounded, against a hang) for the shutdown to return; its discard count.
  func wait() -> Int? {
    guard done.wait(timeout: .now() + 60) == .success else { return nil }
    return result.withLock { $0 }
  }
  /// As `wait()`, without holding a cooperative thread.
  func value() async -> Int? {
    await withCheckedContinuation { c in Thread { c.resume(returning: self.wait()) }.start() }
  }
}

/// Waits for `body` (bounded: a hang becomes a failure, not a stuck test run).
func finishes(_ body: @escaping @Sendable () async -> Void) async -> Bool {
  let done = DispatchSemaphore(value: 0)
  Task {
    await body()
    done.signal()
  }
  return await withCheckedContinuation { c in
    Thread { c.resume(returning: done.wait(timeout: .now() + 60) == .success) }.start()
  }
}

@Suite("Life cycle, Swift layer: exactly once, never hang (issue 10)")
struct LifecycleSwiftTests {
  // MARK: (4) Swift jobs are never dropped

  @Test("case 4: a cancelling shutdown still runs every executor job, serially, isolated to its lane")
  func cancelRunsEveryExecutorJob() async throws {
    let pool = try LanePool(name: uniqueName("cjob"), lanesPerBand: 1)
    let lane = pool.queue(for: .utility)
    let counter = GuardedCounter(lane: lane)
    let gate = DispatchSemaphore(value: 0)
    try lane.async { gate.wait() }
    // 50 tasks, each with a job queued on the blocked lane.
    let jobs = 50
    let tasks = (0..<jobs).map { _ in Task { await counter.bump() } }
    #expect(await eventuallyAsync { lane.info.depth >= UInt64(jobs) })
    // And a task that prefers the pool, queued behind a blocked lane of its band.
    let defaultGate = DispatchSemaphore(value: 0)
    try pool.queue(for: .default).async { defaultGate.wait() }
    // The band's rescue thread would take the job 100 ms on (band work while no thread
    // of the band finishes anything): held too, so the job stays queued for the cancel.
    try pool.rescueLanes[QoS.default.bandIndex].async { defaultGate.wait() }
    let poolTask = Task(executorPreference: pool, priority: .medium) { 42 }
    #expect(await eventuallyAsync { pool.bandDepth(for: .default) >= 1 })  // band work

    let shutdown = BackgroundShutdown(pool)
    #expect(await eventuallyAsync { pool.isShutDown })
    gate.signal()
    defaultGate.signal()
    defaultGate.signal()
    let discarded = await shutdown.value()
    #expect((discarded ?? 0) >= jobs + 1, "the queued jobs were handed to discard")

    let allDone = await finishes {
      for t in tasks { await t.value }
      _ = await poolTask.value
    }
    #expect(allDone, "a task whose job was discarded never resumed")
    #expect(await counter.value == jobs)
    // After shutdown, new jobs for the actor are refused by the lane and run on the fallback.
    #expect(await finishes { for _ in 0..<10 { await counter.bump() } })
    #expect(await counter.value == jobs + 10)
    #expect(await finishes { _ = await Task(executorPreference: pool) { 1 }.value })
    #expect(counter.overlaps.load(ordering: .acquiring) == 0, "two jobs of one actor ran at once")
    #expect(counter.notIsolated.load(ordering: .acquiring) == 0)
    #expect(!lane.isIsolatingCurrentContext()!)  // not here, outside the fallback
  }

  @Test("case 4: a run caller whose task is discarded gets CancellationError; the closure never runs")
  func runCallerGetsCancellationErrorOnDiscard() async throws {
    let pool = try LanePool(name: uniqueName("rdis"), lanesPerBand: 1)
    let lane = pool.queue(for: .background)
    let gate = DispatchSemaphore(value: 0)
    let ran = Counter(), began = Counter()
    try lane.async {
      began.bump()
      gate.wait()
    }
    // The band's rescue thread would take the band job 100 ms on (no progress): held
    // too, so both jobs stay queued for the cancel.
    try pool.rescueLanes[QoS.background.bandIndex].async {
      began.bump()
      gate.wait()
    }
    // Both holders running (a holder still queued would be discarded with the two jobs).
    #expect(await eventuallyAsync { began.count == 2 })
    let onLane = Task { try await lane.run { ran.bump() } }
    let onBand = Task { try await pool.run(qos: .background) { ran.bump() } }
    #expect(await eventuallyAsync { lane.info.depth >= 1 && pool.bandDepth(for: .background) >= 1 })
    let shutdown = BackgroundShutdown(pool)
    #expect(await eventuallyAsync { pool.isShutDown })
    gate.signal()
    gate.signal()
    #expect(await shutdown.value() == 2)
    let resumed = await finishes {
      await #expect(throws: CancellationError.self) { try await onLane.value }
      await #expect(throws: CancellationError.self) { try await onBand.value }
    }
    #expect(resumed, "a run caller stayed suspended")
    #expect(ran.count == 0)
  }

  @Test("case 4: group members leave when discarded: LaneGroup, concurrentPerform, LaneQueue with DispatchGroup")
  func groupMembersLeaveOnDiscard() throws {
    let pool = try LanePool(name: uniqueName("gdis"), lanesPerBand: 2)
    let gates = pool.lanes(for: .userInitiated).map { _ in DispatchSemaphore(value: 0) }
    for (lane, gate) in zip(pool.lanes(for: .userInitiated), gates) { try lane.async { gate.wait() } }
    let lane = pool.lanes(for: .userInitiated)[0]
    let ran = Counter()
    // LaneGroup members, and a notification on a lane of the same pool.
    let group = LaneGroup()
    for _ in 0..<10 { try lane.async(group: group) { ran.bump() } }
    let notified = DispatchSemaphore(value: 0)
    group.notify(on: lane) { notified.signal() }
    // GCD group through the YY-shaped queue.
    let dispatchGroup = DispatchGroup()
    for _ in 0..<10 { LaneQueue(lane).async(group: dispatchGroup) { ran.bump() } }
    // concurrentPerform from another thread: its helpers queue behind the blocked lanes,
    // the caller does every index itself, then waits for the helpers to leave.
    let hits = (0..<200).map { _ in Counter() }
    let performed = DispatchSemaphore(value: 0)
    Thread {
      pool.concurrentPerform(iterations: 200, qos: .userInitiated) { i in hits[i].bump() }
      performed.signal()
    }.start()
    #expect(eventually { hits.allSatisfy { $0.count == 1 } })
    #expect(eventually { pool.lanes(for: .userInitiated).allSatisfy { $0.info.depth >= 1 } })

    let shutdown = BackgroundShutdown(pool)
    #expect(eventually { pool.isShutDown })
    for g in gates { g.signal() }
    #expect((shutdown.wait() ?? 0) >= 21)
    #expect(group.wait(timeout: .seconds(60)), "LaneGroup members never left")
    #expect(notified.wait(timeout: .now() + 60) == .success, "the group's notification never ran")
    #expect(dispatchGroup.wait(timeout: .now() + 60) == .success, "DispatchGroup members never left")
    #expect(performed.wait(timeout: .now() + 60) == .success, "concurrentPerform never returned")
    #expect(hits.allSatisfy { $0.count == 1 })
    #expect(ran.count == 0)
  }

  // MARK: (10) Saturating arithmetic

  @Test("case 10: huge durations clamp to the far future instead of trapping")
  func hugeDurationsClamp() async throws {
    let huge = Duration.seconds(20_000_000_000)
    #expect(huge.nanosecondsClamped == .max)
    #expect(Duration.seconds(Int64.max).nanosecondsClamped == .max)
    #expect(Duration.seconds(-5).nanosecondsClamped == 0)
    #expect(Duration.milliseconds(3).nanosecondsClamped == 3_000_000)

    let pool = try LanePool(name: uniqueName("huge"), lanesPerBand: 1, ringCapacity: 4, hardCapacity: true)
    let lane = pool.queue(for: .utility)
    let ran = Counter()
    try lane.async(waitingUpTo: huge) { ran.bump() }
    try barrier(lane)
    #expect(ran.count == 1)
    // Timers: accepted, pending (far future), cancellable.
    let t1 = try lane.asyncAfter(huge) { ran.bump() }
    let t2 = try pool.asyncAfter(deadline: .distantFuture, qos: .utility) { ran.bump() }
    #expect(t1.cancel())
    #expect(t2.cancel())
    // Groups: a huge timeout waits as long as needed.
    let group = LaneGroup()
    #expect(group.wait(timeout: huge))
    try lane.async(group: group) { usleep(1_000) }
    #expect(group.wait(timeout: huge))
    try await pool.shutdownGracefully()
    #expect(ran.count == 1)

    // Settings: the C core decides whether they are in range; Swift never traps.
    var c = LanePool.Configuration()
    c.name = uniqueName("hugs")
    c.lanesPerBand = 1
    c.stallThreshold = huge
    if let p = try? LanePool(configuration: c) { try p.shutdown(discardingQueued: false) }
    var policy = BandPolicy.default(for: .utility)
    policy.slice = huge
    #expect(throws: LanePoolError.invalidArgument("")) {
      try LanePool(name: uniqueName("hugp"), lanesPerBand: 1, policies: [.utility: policy])
    }
    policy.slice = nil
    policy.timerSlack = huge
    if let p = try? LanePool(name: uniqueName("hugt"), lanesPerBand: 1, policies: [.utility: policy]) {
      try p.shutdown(discardingQueued: false)
    }
  }

  @Test("case 10: the YY round-robin counter never traps, past 2^31 calls or its own wrap")
  func yyCounterNeverTraps() throws {
    let yy = try #require(YYDispatchQueuePool(name: uniqueName("yyc"), queueCount: 3, qos: .utility))
    for start in [UInt(Int32.max) - 3, UInt(UInt32.max) - 3, UInt.max - 3] {
      yy.counter.store(start, ordering: .relaxed)
      let lanes = (0..<9).map { _ in yy.queue().lane }
      #expect(lanes.allSatisfy { $0.qos == .utility })
      #expect(Set(lanes).count == 3)
    }
    // Just past Int32.max: consecutive calls still rotate over all the lanes.
    yy.counter.store(UInt(Int32.max), ordering: .relaxed)
    #expect(Set((0..<3).map { _ in yy.queue() }).count == 3)
  }

  // MARK: (11) Leaks

  @Test("case 11: a YY pool whose last reference goes on one of its own lanes still stops its threads")
  func yyPoolDroppedOnOwnLaneStopsThreads() throws {
    let name = uniqueName("yydr")
    let gate = DispatchSemaphore(value: 0)
    do {
      let holder = Locked<YYDispatchQueuePool?>(YYDispatchQueuePool(name: name, queueCount: 1, qos: .utility))
      let queue = try #require(holder.withLock { $0 }).queue()
      #expect(threadCount(prefix: "\(name)-") == 10)  // 5 lanes and 5 rescue lanes
      queue.async {
        gate.wait()
        holder.withLock { $0 = nil }  // the last reference goes here, on the pool's own lane
      }
    }
    gate.signal()
    #expect(eventually { threadCount(prefix: "\(name)-") == 0 }, "the pool's lane threads leaked")
  }

  @Test("case 11: a pool released without shutdown says so, through its log handler")
  func poolReleasedWithoutShutdownWarns() throws {
    let name = uniqueName("rel")
    let lines = Locked<[String]>([])
    var lane: Lane?
    do {
      let pool = try LanePool(name: name, lanesPerBand: 1) { _, line in lines.withLock { $0.append(line) } }
      lane = pool.queue(for: .utility)
      let shutDownPool = try LanePool(name: uniqueName("rels"), lanesPerBand: 1) { _, line in
        lines.withLock { $0.append(line) }
      }
      try shutDownPool.shutdown(discardingQueued: false)
    }
    let said = lines.withLock { $0 }
    #expect(said.count == 1)
    #expect(said.first?.contains("'\(name)'") == true)
    #expect(said.first?.contains("shutdownGracefully()") == true)
    // Its threads do keep running (the documented choice); stop them through C.
    #expect(threadCount(prefix: "\(name)-") == 10)  // 5 lanes and 5 rescue lanes
    #expect(lanepool_shutdown(lane!.core.raw, LANEPOOL_SHUTDOWN_DRAIN, nil, nil) == 0)
    // Joined threads may stay listed in /proc/self/task for a moment: wait, bounded.
    #expect(eventually { threadCount(prefix: "\(name)-") == 0 }, "the pool's lane threads are still listed")
  }

  @Test(
    "case 11: a task preferring a pool keeps it alive after its creator lets go",
    arguments: [false, true]
  )
  func taskPreferenceKeepsPoolAlive(detached: Bool) async throws {
    // A lane reaches its pool without a reference count (Lane.pool is unowned(unsafe),
    // read by every job of a task that prefers the pool). That is safe because the
    // runtime retains the executor of Task(executorPreference:) until the task ends:
    // this checks it, and ASan would see a job touch a freed pool.
    let name = uniqueName("pref")
    let lines = Locked<[String]>([])
    var pool: LanePool? = try LanePool(name: name, lanesPerBand: 1) { _, line in
      lines.withLock { $0.append(line) }
    }
    weak let weakPool = pool
    let lane = pool!.queue(for: .utility)  // to stop the threads through C at the end
    let resume = Locked<CheckedContinuation<Void, Never>?>(nil)
    let body: @Sendable () async -> String? = {
      await withCheckedContinuation { c in resume.withLock { $0 = c } }
      return Lane.current?.name  // a job of this task, run by poolJobTrampoline
    }
    var task: Task<String?, Never>? =
      detached
      ? Task.detached(executorPreference: pool!, priority: .low, operation: body)
      : Task(executorPreference: pool!, priority: .low, operation: body)
    pool = nil
    #expect(weakPool != nil, "the task holds the pool")
    #expect(lines.withLock { $0.isEmpty }, "no deinit yet")
    #expect(eventually { resume.withLock { $0 != nil } })
    resume.withLock { $0!.resume() }
    let ranOn = await task!.value
    #expect(ranOn?.hasPrefix("\(name)-") == true, "ran on \(ranOn ?? "no lane")")
    task = nil
    // The finished task lets go of its preference: the pool is released (without a
    // shutdown, so it says so) and its lanes keep running until stopped here.
    #expect(eventually { weakPool == nil })
    #expect(eventually { lines.withLock { $0.count } == 1 })
    #expect(lines.withLock { $0.first?.contains("'\(name)'") } == true)
    #expect(lanepool_shutdown(lane.core.raw, LANEPOOL_SHUTDOWN_DRAIN, nil, nil) == 0)
    // pthread_join returns when the kernel clears the thread's tid, which can be before
    // its /proc/self/task entry goes (seen in CI on a loaded machine): wait, bounded.
    #expect(await eventuallyAsync { threadCount(prefix: "\(name)-") == 0 }, "the pool's lane threads are still listed")
  }

  @Test("case 11: without a log handler, released pools warn once per process on stderr")
  func releasedPoolsWarnOnceOnStderr() async {
    let result = await #expect(processExitsWith: .success, observing: [\.standardErrorContent]) {
      for i in 0..<3 { _ = try? LanePool(name: "leak\(i)", lanesPerBand: 1) }
      _exit(0)
    }
    let said = String(decoding: result?.standardErrorContent ?? [], as: UTF8.self)
    #expect(said.components(separatedBy: "released without shutdown").count - 1 == 1, "stderr: \(said)")
    #expect(said.contains("'leak0'") && said.contains("shutdownGracefully()"))
  }

  // MARK: (12) Errors

  @Test("case 12: thread-limit EAGAIN at creation is a system error with its strerror text")
  func threadLimitIsSystemErrorWithText() async {
    let result = await #expect(processExitsWith: .success, observing: [\.standardErrorContent]) {
      reportVerdictAndExit(threadLimitCheck())
    }
    recordChildVerdict(result)
  }

  @Test("case 12: errors are structs with codes, equal by code and errno, with strerror text")
  func errorsAreExtensibleStructs() {
    let nomem = LanePoolError.system(errno: 12)
    #expect(nomem.code == .system)
    #expect(nomem.errno == 12)
    #expect(nomem.description.contains("system error 12 (Cannot allocate memory)"))
    #expect(nomem == .system(errno: 12))
    #expect(nomem != .system(errno: 11))
    #expect(LanePoolError.invalidArgument("a") == .invalidArgument("b"))
    #expect(LanePoolError.shutDown != .full)
    #expect(LanePoolError(errno: EAGAIN) == .full)  // a submit's EAGAIN: the lane is full
    let threads = LanePoolError(errno: EAGAIN, context: .threads("starting lanes"))
    #expect(threads.code == .system && threads.errno == EAGAIN)
    #expect(threads.message.contains("Resource temporarily unavailable"))
    // A switch over codes needs a default: new codes can come without breaking it.
    func kind(_ e: LanePoolError) -> String {
      switch e.code {
      case .shutDown: "shutDown"
      case .full: "full"
      default: "other"
      }
    }
    #expect(kind(.shutDown) == "shutDown" && kind(.forked) == "other")
  }

  @Test("case 12: bad CPU lists and other bad settings name the setting, as spelled in Swift")
  func badCPUListNamesTheSetting() throws {
    let outside = (allowedCPUs().max() ?? 0) + 1
    for list in [[99999], [-1], [outside], [], [Int.max]] {
      do {
        let p = try LanePool(name: uniqueName("cpul"), lanesPerBand: 1, placement: .cpus(list))
        try p.shutdown(discardingQueued: false)
        Issue.record("placement .cpus(\(list)) was accepted")
      } catch {
        #expect(error.code == .invalidArgument)
        #expect(error.message.contains("placement .cpus"), "\(list): \(error)")
      }
    }
    func message(_ body: () throws(LanePoolError) -> LanePool) -> String {
      do {
        let p = try body()
        _ = try? p.shutdown(discardingQueued: false)
        return "accepted"
      } catch { return error.code == .invalidArgument ? error.message : "\(error)" }
    }
    #expect(message { () throws(LanePoolError) in try LanePool(lanesPerBand: 0) }.contains("lanesPerBand"))
    #expect(message { () throws(LanePoolError) in try LanePool(lanesPerBand: -3) }.contains("lanesPerBand"))
    #expect(
      message { () throws(LanePoolError) in try LanePool(lanesPerBand: Int(UInt32.max)) }.contains("lanesPerBand"))
    #expect(
      message { () throws(LanePoolError) in try LanePool(lanesPerBand: 1, ringCapacity: 1000) }.contains("ringCapacity")
    )
    #expect(
      message { () throws(LanePoolError) in try LanePool(lanesPerBand: 1, ringCapacity: 0) }.contains("ringCapacity"))
    #expect(message { () throws(LanePoolError) in try LanePool(name: "") }.contains("name"))
    #expect(
      message { () throws(LanePoolError) in try LanePool(lanesPerBand: 1, stackSize: 4096) }.contains("stackSize"))
    #expect(message { () throws(LanePoolError) in try LanePool(lanesPerBand: 1, stackSize: -1) }.contains("stackSize"))
    #expect(message { () throws(LanePoolError) in try LanePool(name: "a\u{0}b") }.contains("name"))
    var nice = BandPolicy.default(for: .utility)
    nice.nice = 40
    #expect(
      message { () throws(LanePoolError) in try LanePool(lanesPerBand: 1, policies: [.utility: nice]) }.contains(
        "policies[.utility].nice"))
    let rt = BandPolicy(scheduler: .fifo(priority: 10), nice: 0, ioPriority: .unchanged)
    #expect(
      message { () throws(LanePoolError) in try LanePool(lanesPerBand: 1, policies: [.background: rt]) }.contains(
        "policies[.background]"))
  }

  // MARK: (13) Misuse stops speak in release builds

  @Test("case 13: Lane.sync(onLaneThread: true) onto a lane the caller holds stops with the message on stderr")
  func sameLaneSyncStopsWithMessage() async {
    let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
      let lane = LanePool.queue(for: .default)
      try? lane.sync { _ = try? lane.sync(onLaneThread: true) { 1 } }
    }
    let said = String(decoding: result?.standardErrorContent ?? [], as: UTF8.self)
    #expect(
      said.contains("LanePool: Lane.sync(onLaneThread: true) called from a task already holding lane"),
      "stderr: \(said)")
  }

  @Test("case 13: LaneGroup.leave() once too often stops with the message on stderr")
  func extraLeaveStopsWithMessage() async {
    let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
      LaneGroup().leave()
    }
    let said = String(decoding: result?.standardErrorContent ?? [], as: UTF8.self)
    #expect(said.contains("LanePool: LaneGroup.leave() called more often than enter()"), "stderr: \(said)")
  }
}

/// Child process: under a thread limit as an unprivileged user, pool creation fails
/// with a system error that says what happened.
func threadLimitCheck() -> String? {
  let threadsNow = threadNames().count
  var limit = rlimit(rlim_cur: rlim_t(threadsNow + 3), rlim_max: rlim_t(threadsNow + 3))
  guard setrlimit(__rlimit_resource_t(__RLIMIT_NPROC.rawValue), &limit) == 0 else { return "setrlimit failed" }
  // Root ignores RLIMIT_NPROC: become nobody first.
  if geteuid() == 0 {
    let rc = lp_test_drop_privileges(65534, 65534)
    guard rc == 0 else { return "cannot drop privileges: errno \(rc)" }
  }
  do {
    let pool = try LanePool(name: "nproc", lanesPerBand: 4)
    _ = try? pool.shutdown(discardingQueued: false)
    return "a pool of 20 threads started under a limit of \(threadsNow + 3) processes"
  } catch {
    guard error.code == .system, error.errno == EAGAIN else { return "expected .system EAGAIN, got \(error)" }
    guard error != .full, !error.description.contains("full") else { return "reads as a full lane: \(error)" }
    guard error.description.contains("Resource temporarily unavailable") else { return "no strerror text: \(error)" }
    return nil
  }
}
