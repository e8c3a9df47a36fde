import Foundation
import LanePool
import Synchronization
import Testing

// Issue 14, item 4: batch submit. FIFO with single submits, exactly once, a prefix on
// a full hard-capacity lane, the rest released.

/// Per-producer next sequence number, touched only by tasks of one lane (which run one
/// at a time): deliberately unsynchronised, so ThreadSanitizer reports any overlap.
private final class Sequences: @unchecked Sendable {
  var next = [Int](repeating: 0, count: 4)
  var outOfOrder = 0
  var ran = 0
}

/// Deinit counter: a closure that captures one is released with it.
private final class Token: Sendable {
  let released: Counter
  init(_ released: Counter) { self.released = released }
  deinit { released.bump() }
}

@Suite("Batch submit")
struct BatchTests {
  @Test("batches and single submits from 4 threads keep each thread's order; each task runs once")
  func fifoWithSingleSubmits() throws {
    // ring 64: most batches find it full and go on to the overflow list
    let pool = try LanePool(name: "batch", lanesPerBand: 1, ringCapacity: 64)
    let lane = pool.queue(for: .default)
    let seq = Sequences()
    let per = 20_000
    let group = DispatchGroup()
    let failures = Atomic<Int>(0)
    for id in 0..<4 {
      group.enter()
      Thread.detachNewThread {
        defer { group.leave() }
        func task(_ s: Int) -> @Sendable () -> Void {
          {
            if seq.next[id] != s { seq.outOfOrder += 1 }
            seq.next[id] = s + 1
            seq.ran += 1
          }
        }
        var s = 0
        while s < per {
          if id % 2 == 0 {
            if (try? lane.async(task(s))) == nil { failures.add(1, ordering: .relaxed) }
            s += 1
          } else {
            let n = min(s % 50 + 1, per - s)
            let batch = (s..<(s + n)).map(task)
            if (try? lane.async(contentsOf: batch)) != n { failures.add(1, ordering: .relaxed) }
            s += n
          }
        }
      }
    }
    group.wait()
    try pool.shutdown(discardingQueued: false)
    #expect(failures.load(ordering: .relaxed) == 0)
    #expect(seq.outOfOrder == 0)
    #expect(seq.ran == 4 * per)
    #expect(lane.info.overflowed > 0)  // the overflow path was taken too
  }

  @Test("on a full hard-capacity lane a prefix is accepted; the rest is released, never run")
  func prefixOnFullLane() throws {
    let pool = try LanePool(name: "batchh", lanesPerBand: 1, ringCapacity: 8, hardCapacity: true)
    defer { _ = try? pool.shutdown(discardingQueued: false) }
    let lane = pool.queue(for: .default)
    let started = DispatchSemaphore(value: 0)
    let release = DispatchSemaphore(value: 0)
    try lane.async {
      started.signal()
      release.wait()
    }
    started.wait()  // the lane runs the blocker: all 8 cells are free
    let ran = Atomic<Int>(0)
    let released = Counter()
    var works: [@Sendable () -> Void] = []
    for _ in 0..<20 {
      let token = Token(released)
      works.append {
        _ = token
        ran.add(1, ordering: .relaxed)
      }
    }
    #expect(try lane.async(contentsOf: works) == 8)
    works.removeAll()
    #expect(released.count == 12)  // the 12 refused closures are gone
    #expect(throws: LanePoolError.full) { try lane.async(contentsOf: [{} as @Sendable () -> Void]) }
    #expect(try lane.async(contentsOf: [@Sendable () -> Void]()) == 0)
    release.signal()
    // The ring is full until the lane takes from it: wait for the 8, then one more.
    for _ in 0..<5_000 where ran.load(ordering: .relaxed) < 8 { usleep(1_000) }
    try lane.sync(onLaneThread: true) {}
    #expect(ran.load(ordering: .relaxed) == 8)
    try pool.shutdown(discardingQueued: false)
    #expect(throws: LanePoolError.shutDown) { try lane.async(contentsOf: [{} as @Sendable () -> Void]) }
    #expect(released.count == 20)
  }
}
