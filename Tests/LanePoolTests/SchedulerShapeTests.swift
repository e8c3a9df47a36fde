import Dispatch
import LanePool
import Synchronization
import Testing

// The scheduler's shapes that hung before band work got its own queue and a lane's
// exclusion stopped being its thread (docs/architecture.md, "The scheduler"). Each
// runs with LanePool as the process's default executor, in a child process (an exit
// test): tasks then run as band jobs on the lanes' threads. Each used to stop or hang
// (the C core of c3f6dd3); no verdict depends on timing: a 120 s cap turns a hang into a
// failure.

/// Runs `body` in a task with LanePool as the default executor (two lanes per band
/// unless `lanes` says otherwise) and waits for it from the main thread.
private func onLanePool(lanes: Int = 2, _ body: @escaping @Sendable () async throws -> Void) throws {
  try LanePool.installAsDefaultExecutor(
    configuration: {
      var c = LanePool.Configuration()
      c.lanesPerBand = lanes
      return c
    }())
  let done = DispatchSemaphore(value: 0)
  let failure = Mutex<String?>(nil)
  Task {
    do { try await body() } catch { failure.withLock { $0 = "\(error)" } }
    done.signal()
  }
  // A cap only a hang reaches (the shapes used to hang): the child then fails.
  if done.wait(timeout: .now() + 120) == .timedOut {
    Issue.record("hung: the task did not finish within 120 s")
    return
  }
  if let f = failure.withLock({ $0 }) { Issue.record(Comment(rawValue: f)) }
}

@Suite("Scheduler shapes that used to hang")
struct SchedulerShapeTests {
  @Test("a nested sync from a task: queue(for:).sync { queue(for:).sync {} } returns")
  func nestedSyncFromATask() async {
    await #expect(processExitsWith: .success) {
      try onLanePool {
        #expect(Lane.current != nil)  // a band job on a lane's thread
        let inner = try LanePool.queue(for: .default).sync {
          try LanePool.queue(for: .default).sync { 42 }
        }
        #expect(inner == 42)
        // One lane per band too: the task holds no lane, so a sync onto the lane whose
        // thread runs it does not wait for itself.
        let here = try #require(Lane.current)
        #expect(try here.sync { 7 } == 7)
      }
    }
  }

  @Test("two tasks that each sync 5,000 times onto queue(for:) both finish")
  func crossedSyncs() async {
    await #expect(processExitsWith: .success) {
      try onLanePool {
        let total = Counter()
        await withTaskGroup(of: Void.self) { g in
          for _ in 0..<2 {
            g.addTask {
              for _ in 0..<5_000 {
                _ = try? LanePool.queue(for: .default).sync { total.bump() }
              }
            }
          }
        }
        #expect(total.count == 10_000)
      }
    }
  }

  @Test("a task waits for a LaneGroup with a member on every lane of its band, its own included")
  func groupIncludingTheCallersLane() async {
    await #expect(processExitsWith: .success) {
      try onLanePool {
        let ran = Counter()
        let group = LaneGroup()
        let lanes = LanePool.default.lanes(for: .default)
        #expect(lanes.contains { $0 == Lane.current } || Lane.current?.qos != .default)
        for lane in lanes { try lane.async(group: group) { ran.bump() } }
        group.wait()  // untimed: it used to hang
        #expect(ran.count == lanes.count)
        #expect(group.wait(timeout: .seconds(30)))
      }
    }
  }

  @Test("the same with one lane per band: the band's rescue thread runs the caller's lane")
  func groupOnAOneLaneBand() async {
    await #expect(processExitsWith: .success) {
      try onLanePool(lanes: 1) {
        let ran = Counter()
        let group = LaneGroup()
        let lane = try #require(LanePool.default.lanes(for: .default).first)
        try lane.async(group: group) { ran.bump() }
        group.wait()
        #expect(ran.count == 1)
      }
    }
  }

  @Test("band work holds no lane: Lane.current names its thread's lane, isCurrent is false; a lane's task holds it")
  func bandWorkHoldsNoLane() throws {
    let pool = try LanePool(name: uniqueName("hold"), lanesPerBand: 2)
    let done = DispatchSemaphore(value: 0)
    let seen = Mutex<(Bool, Bool, Bool)>((false, true, false))
    try pool.async(qos: .utility) {
      let lane = Lane.current
      seen.withLock {
        $0.0 = lane != nil; $0.1 = lane?.isCurrent ?? true
      }
      done.signal()
    }
    #expect(done.wait(timeout: .now() + 30) == .success)
    let lane = pool.lanes(for: .utility)[1]
    try lane.async {
      seen.withLock { $0.2 = lane.isCurrent && Lane.current === lane }
      done.signal()
    }
    #expect(done.wait(timeout: .now() + 30) == .success)
    #expect(seen.withLock { $0 } == (true, false, true))
    try pool.shutdown(discardingQueued: false)
  }
}
