import Dispatch
import LanePoolDispatch
import Testing

@testable import LanePool

// Issue 23, defect 14: with LanePool as the default executor, `queue(for:).sync` from
// async code could pick the caller's own lane and stopped the process as misuse.

/// In a child process: installs LanePool as the default executor with `lanesPerBand`
/// lanes, then, from async code on a lane, syncs 200 times onto `queue(for:)` of the
/// task's own band (Lane.sync and LaneQueue.sync). Returns a failure text or nil.
func ownBandSyncFromAsyncCode(lanesPerBand: Int) -> String? {
  do {
    var c = LanePool.Configuration()
    c.lanesPerBand = lanesPerBand
    try LanePool.installAsDefaultExecutor(configuration: c)
  } catch { return "install: \(error)" }
  let done = DispatchSemaphore(value: 0)
  let failure = Locked<String?>(nil)
  Task.detached(priority: .utility) {
    guard let own = Lane.current, own.qos == .utility else {
      failure.withLock { $0 = "the task is not on a utility lane" }
      done.signal()
      return
    }
    var sum = 0
    for _ in 0..<100 {
      await Task.yield()
      do { sum += try LanePool.queue(for: .utility).sync { 1 } } catch {
        failure.withLock { $0 = "Lane.sync threw \(error)" }
      }
      sum += LaneQueue(LanePool.queue(for: .utility)).sync { 1 }
    }
    if sum != 200 { failure.withLock { $0 = $0 ?? "ran \(sum) of 200 closures" } }
    done.signal()
  }
  // A sync that waited for itself: fail, never hang.
  guard done.wait(timeout: .now() + 60) == .success else { return "a sync from async code hung" }
  return failure.withLock { $0 }
}

@Suite("sync onto the lane the caller holds never waits for itself (issue 23 defect 14)")
struct OwnLaneSyncTests {
  @Test(
    "defect 14: with LanePool as the default executor (one lane per band), queue(for:).sync from async code returns"
  )
  func queueSyncFromAsyncCodeReturnsOneLane() async {
    let result = await #expect(processExitsWith: .success, observing: [\.standardErrorContent]) {
      reportVerdictAndExit(ownBandSyncFromAsyncCode(lanesPerBand: 1))
    }
    recordChildVerdict(result)
  }

  @Test(
    "defect 14: with LanePool as the default executor (two lanes per band), queue(for:).sync from async code returns"
  )
  func queueSyncFromAsyncCodeReturnsTwoLanes() async {
    let result = await #expect(processExitsWith: .success, observing: [\.standardErrorContent]) {
      reportVerdictAndExit(ownBandSyncFromAsyncCode(lanesPerBand: 2))
    }
    recordChildVerdict(result)
  }

  @Test("queue(for:) never returns the caller's own lane when its band has another")
  func queueForSkipsOwnLane() throws {
    let pool = try LanePool(name: uniqueName("ownq"), lanesPerBand: 3)
    let lane = pool.lanes(for: .utility)[1]
    let picks = try lane.sync(onLaneThread: true) {
      (0..<300).map { _ in pool.queue(for: .utility) }
    }
    #expect(!picks.contains(lane))
    #expect(Set(picks).count == 2)  // the other two, both used
    try pool.shutdown(discardingQueued: false)
  }

  @Test("a sync onto the lane the caller holds runs inline, at once, with the lane still held")
  func nestedSyncOnHeldLaneRunsInline() throws {
    let pool = try LanePool(name: uniqueName("ownn"), lanesPerBand: 1)
    let lane = pool.queue(for: .utility)
    // From a task on the lane's own thread, and from an inline sync on another thread.
    for onLaneThread in [true, false] {
      let value = try lane.sync(onLaneThread: onLaneThread) { () -> Int in
        let inner = try? lane.sync { () -> Int in
          #expect(lane.isCurrent)
          return 7
        }
        return inner ?? -1
      }
      #expect(value == 7)
    }
    // Tasks queued on the lane before the nested sync still run after the holder.
    let order = Locked<[Int]>([])
    let done = DispatchSemaphore(value: 0)
    try lane.async {
      try? lane.async { order.withLock { $0.append(2) } }
      try? lane.sync { order.withLock { $0.append(1) } }
      try? lane.async { done.signal() }
    }
    #expect(done.wait(timeout: .now() + 60) == .success)
    #expect(order.withLock { $0 } == [1, 2])
    try pool.shutdown(discardingQueued: false)
  }
}
