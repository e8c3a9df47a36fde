import Dispatch
import Foundation
import Synchronization
import Testing

@testable import LanePool

/// An actor whose jobs all run on one lane.
actor LaneCounter {
  let lane: Lane
  private(set) var value = 0
  private(set) var offLane = 0
  init(lane: Lane) { self.lane = lane }
  nonisolated var unownedExecutor: UnownedSerialExecutor { lane.asUnownedSerialExecutor() }

  func bump() {
    if !lane.isCurrent { offLane += 1 }
    value += 1  // a data race here would be reported by ThreadSanitizer
  }
}

@Suite("Swift concurrency: actors on lanes, tasks on pools, run, timers, groups")
struct ConcurrencyTests {
  @Test("an actor on a lane: 100,000 calls from 8 tasks are serialised on that lane's thread")
  func actorOnLane() async throws {
    let pool = try LanePool(name: uniqueName("act"), lanesPerBand: 2)
    let lane = pool.queue(for: .utility)
    let counter = LaneCounter(lane: lane)
    await withTaskGroup(of: Void.self) { group in
      for _ in 0..<8 {
        group.addTask { for _ in 0..<12_500 { await counter.bump() } }
      }
    }
    #expect(await counter.value == 100_000)
    #expect(await counter.offLane == 0)
    // Isolation checks: the runtime asks the lane whether the caller is isolated.
    let checked = try lane.sync {
      counter.assertIsolated()
      counter.preconditionIsolated()
      return counter.assumeIsolated { $0.value }
    }
    #expect(checked == 100_000)
    #expect(lane.isIsolatingCurrentContext() == false)
    #expect(try lane.sync { lane.isIsolatingCurrentContext() } == true)
    try await pool.shutdownGracefully()
  }

  @Test(
    "Task(executorPreference: pool) runs on a lane of the band its priority names",
    arguments: [
      (TaskPriority.userInitiated, QoS.userInitiated), (.high, .userInitiated), (.medium, .default),
      (.utility, .utility), (.low, .utility), (.background, .background),
      (TaskPriority(rawValue: 33), .userInteractive),
    ])
  func taskExecutorPicksBand(priority: TaskPriority, band: QoS) async throws {
    let pool = try LanePool(name: uniqueName("tex"), lanesPerBand: 2)
    let seen = await Task(executorPreference: pool, priority: priority) { () -> (QoS?, Bool) in
      let lane = Lane.current
      return (lane?.qos, lane?.pool === pool)
    }.value
    #expect(seen.0 == band)
    #expect(seen.1)
    // And nested work under withTaskExecutorPreference stays on the pool.
    let nested = await withTaskExecutorPreference(pool) { Lane.current?.pool === pool }
    #expect(nested)
    try await pool.shutdownGracefully()
  }

  @Test("job priorities map to bands by qos_class_t value")
  func jobPriorityMapping() {
    #expect(QoS(jobPriority: 0) == .default)
    #expect(QoS(jobPriority: 33) == .userInteractive)
    #expect(QoS(jobPriority: 25) == .userInitiated)
    #expect(QoS(jobPriority: 21) == .default)
    #expect(QoS(jobPriority: 17) == .utility)
    #expect(QoS(jobPriority: 9) == .background)
    #expect(QoS(TaskPriority.high) == .userInitiated)
  }

  @Test("run returns the value, rethrows the error, and runs on the lane")
  func runBridge() async throws {
    let lane = LanePool.queue(for: .userInitiated)
    #expect(try await lane.run { Lane.current === lane } == true)
    struct Boom: Error, Equatable {}
    await #expect(throws: Boom()) { try await lane.run { throw Boom() } }
    #expect(try await LanePool.default.run(qos: .background) { Lane.current?.qos } == .background)
  }

  @Test("a caller cancelled before the closure starts gets CancellationError; the closure never runs")
  func runCancelledBeforeStart() async throws {
    let pool = try LanePool(name: uniqueName("can"), lanesPerBand: 1)
    let lane = pool.queue(for: .default)
    let gate = DispatchSemaphore(value: 0)
    let ran = Counter()
    try lane.async { gate.wait() }  // the lane is busy until we say so
    let task = Task { try await lane.run { ran.bump() } }
    task.cancel()
    await #expect(throws: CancellationError.self) { try await task.value }
    gate.signal()
    try barrier(lane)
    #expect(ran.count == 0)
    // Already cancelled before calling run: nothing is even submitted.
    let early = Task {
      withUnsafeCurrentTask { $0?.cancel() }
      return try await lane.run { ran.bump() }
    }
    await #expect(throws: CancellationError.self) { try await early.value }
    try barrier(lane)
    #expect(ran.count == 0)
    try await pool.shutdownGracefully()
  }

  @Test("1,000 timers: per lane in deadline order, never early; cancelled ones never fire")
  func timersOrderedNeverEarly() async throws {
    let pool = try LanePool(name: uniqueName("tmr"), lanesPerBand: 2)
    struct Fired { var index: Int; var deadline: UInt64; var at: UInt64 }
    let lanes = pool.lanes(for: .userInteractive)
    let logs = lanes.map { _ in LaneLocal<[Fired]>([]) }
    var rng = SplitMix(seed: 7)
    // 50 ms of head start: normally every timer is set before the first is due.
    let start = DispatchTime.now().uptimeNanoseconds + 50_000_000
    var handles: [(TimerHandle, Int, Int, UInt64)] = []  // handle, index, lane, deadline
    var setBy: [UInt64] = []  // a time at or after each timer was added
    for i in 0..<1_000 {
      let deadline = start + rng.next() % 200_000_000  // within 250 ms
      let l = i % lanes.count
      let log = logs[l]
      let h = try lanes[l].asyncAfter(deadline: DispatchTime(uptimeNanoseconds: deadline)) {
        log.value.append(Fired(index: i, deadline: deadline, at: DispatchTime.now().uptimeNanoseconds))
      }
      setBy.append(DispatchTime.now().uptimeNanoseconds)
      handles.append((h, i, l, deadline))
    }
    // Cancel every 10th; each cancel succeeds unless the timer was due (it may have
    // fired): a cancel refused before its deadline is a defect, a slow run is not.
    var cancelled = Set<Int>()
    for (h, i, _, deadline) in handles where i % 10 == 0 {
      if h.cancel() {
        cancelled.insert(i)
      } else {
        #expect(DispatchTime.now().uptimeNanoseconds >= deadline, "timer \(i)'s cancel refused before it was due")
      }
    }
    #expect(!handles[0].0.cancel())  // cancelling twice: already gone
    try await pool.shutdownGracefully()  // drain: waits for every pending timer
    var lateness: [UInt64] = []
    for log in logs {
      let fired = log.value
      #expect(fired.allSatisfy { $0.at >= $0.deadline }, "a timer fired early")
      #expect(fired.allSatisfy { !cancelled.contains($0.index) }, "a cancelled timer fired")
      // Deadline order among timers pending together: if b ran after a although b comes
      // first by (deadline, order set), b must have been added after a's deadline had
      // passed (so a had already fired); otherwise the heap would have fired b first.
      // (On a slow run, e.g. under TSan, setting 1,000 timers can outlast the head start.)
      var outOfOrder = 0
      for (x, a) in fired.enumerated() {
        for b in fired[(x + 1)...] where (b.deadline, b.index) < (a.deadline, a.index) {
          if setBy[b.index] < a.deadline { outOfOrder += 1 }
        }
      }
      #expect(outOfOrder == 0, "timers pending together fired out of deadline order")
      lateness += fired.map { $0.at - $0.deadline }
    }
    #expect(lateness.count == 1_000 - cancelled.count)
    lateness.sort()
    let p50 = Double(lateness[lateness.count / 2]) / 1000
    let p99 = Double(lateness[lateness.count * 99 / 100]) / 1000
    print("timer lateness over \(lateness.count) timers: p50 \(p50) us, p99 \(p99) us")
  }

  @Test("timers at shutdown: drain waits for them, cancel discards and releases them")
  func timersAtShutdown() async throws {
    let ran = Counter()
    let released = Counter()
    let drainPool = try LanePool(name: uniqueName("tdr"), lanesPerBand: 1)
    try drainPool.asyncAfter(deadline: .now() + .milliseconds(30), qos: .utility) { ran.bump() }
    try await drainPool.shutdownGracefully()
    #expect(ran.count == 1)

    let cancelPool = try LanePool(name: uniqueName("tcn"), lanesPerBand: 1)
    do {
      let token = ReleaseToken(released)
      try cancelPool.queue(for: .default).asyncAfter(.seconds(3600)) {
        _ = token; ran.bump()
      }
    }
    let discarded = try cancelPool.shutdown(discardingQueued: true)
    #expect(discarded == 1)
    #expect(released.count == 1)
    #expect(ran.count == 1)
    #expect(throws: LanePoolError.shutDown) { try cancelPool.queue(for: .default).asyncAfter(.seconds(1)) {} }
  }

  @Test("a group's notify fires exactly once, after every member")
  func groupNotify() throws {
    let pool = try LanePool(name: uniqueName("grp"), lanesPerBand: 2)
    defer { _ = try? pool.shutdown(discardingQueued: false) }
    let group = LaneGroup()
    let members = Counter()
    let notified = Counter()
    let seenAtNotify = Locked<[Int]>([])
    for i in 0..<1_000 {
      try pool.queue(for: QoS.allCases[i % 5]).async(group: group) {
        if i % 7 == 0 { usleep(50) }
        members.bump()
      }
    }
    let done = DispatchSemaphore(value: 0)
    let notifyLane = pool.queue(for: .userInitiated)
    group.notify(on: notifyLane) {
      seenAtNotify.withLock { $0.append(members.count) }
      notified.bump()
      done.signal()
    }
    group.wait()
    #expect(members.count == 1_000)
    done.wait()
    try barrier(notifyLane)
    #expect(notified.count == 1)
    #expect(seenAtNotify.withLock { $0 } == [1_000])
    // An empty group notifies at once; enter/leave by hand works too.
    let g2 = LaneGroup()
    g2.enter()
    #expect(!g2.wait(timeout: .milliseconds(1)))
    g2.leave()
    #expect(g2.wait(timeout: .milliseconds(1)))
  }

  @Test("parallel-for covers every index exactly once, also when called from a lane")
  func parallelFor() throws {
    let pool = try LanePool(name: uniqueName("pfor"), lanesPerBand: 2)
    defer { _ = try? pool.shutdown(discardingQueued: false) }
    let hits = (0..<10_000).map { _ in Counter() }
    pool.concurrentPerform(iterations: 10_000) { i in hits[i].bump() }
    #expect(hits.allSatisfy { $0.count == 1 })
    // From a lane of the same band: no deadlock, still exactly once.
    let fromLane = try pool.queue(for: .userInitiated).sync { () -> Int in
      let c = Counter()
      pool.concurrentPerform(iterations: 500) { _ in c.bump() }
      return c.count
    }
    #expect(fromLane == 500)
    pool.concurrentPerform(iterations: 0) { _ in Issue.record("ran with zero iterations") }
  }
}
