import Dispatch
import Synchronization
import Testing

@testable import LanePool

// Band work (a task executor's jobs, async(qos:)) never waits behind a busy lane while
// another lane of its band is idle. Every wait has a cap only a hang reaches; no
// verdict depends on timing.

/// Waits for `semaphore` up to 30 s: false only if the awaited work never ran.
private func waitCapped(_ semaphore: DispatchSemaphore) -> Bool {
  semaphore.wait(timeout: .now() + 30) == .success
}

@Suite("Band work is taken by any free thread of the band")
struct StealingTests {
  @Test("a job that blocks its lane waiting for a task it started: the task runs on the band's other lane")
  func jobBlockedOnItsChild() async throws {
    let pool = try LanePool(name: uniqueName("stl"), lanesPerBand: 2)
    let (ok, parentLane, childLane) = await Task(executorPreference: pool) {
      () -> (Bool, String?, String?) in
      let started = DispatchSemaphore(value: 0)
      let childLane = Mutex<String?>(nil)
      // The child's first job goes to the band's queue, which the other lane's thread
      // takes from while this one blocks.
      let child = Task(executorPreference: pool) {
        childLane.withLock { $0 = Lane.current?.name }
        started.signal()
      }
      let ok = waitCapped(started)  // blocks the lane's thread, as a lock or a loop would
      _ = child
      return (ok, Lane.current?.name, childLane.withLock { $0 })
    }.value
    #expect(ok)
    #expect(childLane != nil && childLane != parentLane)
    try await pool.shutdownGracefully()
  }

  @Test("async(qos:) from a task that then waits for it runs on the band's other lane")
  func bandSubmitFromABlockedLane() throws {
    let pool = try LanePool(name: uniqueName("stl"), lanesPerBand: 2)
    let done = DispatchSemaphore(value: 0)
    let result = Mutex<(Bool, String?, String?)>((false, nil, nil))
    try pool.async(qos: .utility) {
      let ran = DispatchSemaphore(value: 0)
      let inner = Mutex<String?>(nil)
      do {
        try pool.async(qos: .utility) {
          inner.withLock { $0 = Lane.current?.name }
          ran.signal()
        }
      } catch {
        done.signal()
        return
      }
      let ok = waitCapped(ran)
      result.withLock { $0 = (ok, Lane.current?.name, inner.withLock { $0 }) }
      done.signal()
    }
    #expect(waitCapped(done))
    let (ok, outer, inner) = result.withLock { $0 }
    #expect(ok)
    #expect(inner != nil && inner != outer)
    try pool.shutdown(discardingQueued: false)
  }

  @Test("a lane's serial queue is never taken by another lane, even while it is blocked")
  func laneWorkStaysOnItsLane() throws {
    let pool = try LanePool(name: uniqueName("stl"), lanesPerBand: 2)
    let lane = pool.lanes(for: .default)[0]
    let release = DispatchSemaphore(value: 0)
    let blocking = DispatchSemaphore(value: 0)
    try lane.async {
      blocking.signal()
      _ = waitCapped(release)
    }
    #expect(waitCapped(blocking))
    let order = Mutex<[Int]>([])
    let wrongLane = Atomic<Int>(0)
    for i in 0..<100 {
      try lane.async {
        if Lane.current !== lane { wrongLane.add(1, ordering: .relaxed) }
        order.withLock { $0.append(i) }
      }
    }
    // Band work still runs meanwhile (the other lane is there to take it) ...
    let bandRan = DispatchSemaphore(value: 0)
    try pool.async(qos: .default) { bandRan.signal() }
    #expect(waitCapped(bandRan))
    // ... while the lane's own queue waits for it, untouched.
    #expect(order.withLock { $0.isEmpty })
    release.signal()
    try barrier(lane)
    #expect(order.withLock { $0 } == Array(0..<100))
    #expect(wrongLane.load(ordering: .relaxed) == 0)
    try pool.shutdown(discardingQueued: false)
  }
}
