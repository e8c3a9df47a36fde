import Dispatch
import Foundation
import Testing

@testable import LanePool

/// Spins (bounded) until `count` reaches `target`: makes sure several threads are
/// inside a region at once. After 10 s it gives up and goes on, so that a schedule
/// that did not line up makes the test weaker, never stuck.
func rendezvous(_ count: Counter, _ target: Int) {
  let deadline = DispatchTime.now() + 10
  while count.count < target && DispatchTime.now() < deadline { sched_yield() }
}

/// Runs `body` on a thread of its own and waits for it, bounded: a deadlock becomes a
/// failure (the stuck thread is left behind), never a stuck test run.
func returnsWithin(_ seconds: Int = 60, _ body: @escaping @Sendable () -> Void) -> Bool {
  let done = DispatchSemaphore(value: 0)
  Thread {
    body()
    done.signal()
  }.start()
  return done.wait(timeout: .now() + .seconds(seconds)) == .success
}

@Suite("concurrentPerform: the caller never waits for a helper that has not started (issue 23)")
struct ParallelForTests {
  @Test("defect 11: concurrentPerform inside a concurrentPerform iteration returns; every index runs once")
  func nestedConcurrentPerform() throws {
    let pool = try LanePool(name: uniqueName("pfnest"), lanesPerBand: 2)
    // Three outer indices, held at once by the caller and both lanes of the band (the
    // rendezvous): then each calls an inner concurrentPerform whose helpers queue on
    // lanes that are busy with an outer index. Before the fix each inner caller waited
    // for a helper queued behind the other's wait: a deadlock, every time.
    let outer = 3
    let inner = 8
    let hits = (0..<outer * inner).map { _ in Counter() }
    let arrived = Counter()
    let returned = returnsWithin {
      pool.concurrentPerform(iterations: outer, qos: .userInitiated) { i in
        arrived.bump()
        rendezvous(arrived, outer)
        pool.concurrentPerform(iterations: inner, qos: .userInitiated) { j in hits[i * inner + j].bump() }
      }
    }
    #expect(returned, "a nested concurrentPerform deadlocked")
    guard returned else { return }  // the pool's lanes are stuck: leave it
    #expect(hits.allSatisfy { $0.count == 1 })
    try pool.shutdown(discardingQueued: false)
  }

  @Test("defect 12: two lanes of one band calling concurrentPerform at once both return")
  func twoLanesAtOnce() throws {
    let pool = try LanePool(name: uniqueName("pftwo"), lanesPerBand: 2)
    let lanes = pool.lanes(for: .userInitiated)
    let callers = Counter()
    let iterations = 16
    let hits = (0..<lanes.count * iterations).map { _ in Counter() }
    let group = LaneGroup()
    for (k, lane) in lanes.enumerated() {
      try lane.async(group: group) {
        // Both callers run before either calls: each one's helper then queues on the
        // other caller's lane, behind that caller. Before the fix both waited for a
        // helper that could not start until the other returned: a deadlock, every time.
        callers.bump()
        rendezvous(callers, lanes.count)
        pool.concurrentPerform(iterations: iterations, qos: .userInitiated) { i in hits[k * iterations + i].bump() }
      }
    }
    let returned = group.wait(timeout: .seconds(60))
    #expect(returned, "two concurrentPerform calls from lanes of one band deadlocked")
    guard returned else { return }  // the lanes are stuck: a drain would wait for them forever
    guard hits.allSatisfy({ $0.count == 1 }) else {
      Issue.record("indices ran \(hits.map(\.count)) times")
      return
    }
    try pool.shutdown(discardingQueued: false)
  }

  @Test("a caller on a lane whose band's other lanes are all blocked does every index itself")
  func callerDoesEverythingWhenHelpersCannotStart() throws {
    let pool = try LanePool(name: uniqueName("pfblk"), lanesPerBand: 3)
    let lanes = pool.lanes(for: .utility)
    let gate = DispatchSemaphore(value: 0)
    for lane in lanes.dropFirst() { try lane.async { gate.wait() } }
    let ranOn = Locked<Set<String>>([])
    let finished = DispatchSemaphore(value: 0)
    try lanes[0].async {
      pool.concurrentPerform(iterations: 100, qos: .utility) { _ in
        ranOn.withLock { _ = $0.insert(Lane.current?.name ?? "?") }
      }
      finished.signal()
    }
    let returned = finished.wait(timeout: .now() + 60) == .success
    #expect(returned, "the caller waited for helpers queued behind blocked lanes")
    #expect(ranOn.withLock { $0 } == [lanes[0].name])
    for _ in lanes.dropFirst() { gate.signal() }
    // The late helpers find nothing left and leave; the drain runs them.
    if returned { try pool.shutdown(discardingQueued: false) }
  }
}
