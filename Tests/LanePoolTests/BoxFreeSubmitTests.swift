import Foundation
import Synchronization
import Testing

@testable import LanePool

// Issue 14, item 3: a Swift closure travels through C as its own two words (code,
// context) with a +1 on the context, no box. Exactly once, per-lane FIFO, and the
// context released exactly once whether the task ran, was refused or was discarded.

/// Per-producer next sequence number and run counts, touched only by tasks of one lane:
/// deliberately unsynchronised, so ThreadSanitizer reports any overlap.
private final class Order: @unchecked Sendable {
  var next: [Int]
  var outOfOrder = 0
  var ran = 0
  var bad = 0
  init(producers: Int) { next = [Int](repeating: 0, count: producers) }
}

/// A capture larger than a closure's inline storage: 16 words, each checked.
private struct Wide: Sendable {
  var words: (Int, Int, Int, Int, Int, Int, Int, Int, Int, Int, Int, Int, Int, Int, Int, Int) =
    (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
  init(_ s: Int) {
    withUnsafeMutableBytes(of: &words) { raw in
      for k in 0..<16 { raw.storeBytes(of: s &* 31 &+ k, toByteOffset: k * 8, as: Int.self) }
    }
  }
  func holds(_ s: Int) -> Bool {
    withUnsafeBytes(of: words) { raw in
      (0..<16).allSatisfy { raw.load(fromByteOffset: $0 * 8, as: Int.self) == s &* 31 &+ $0 }
    }
  }
}

/// Bumped by closures that capture nothing (their context is nil).
private let bareRuns = Atomic<Int>(0)
/// Bumped by the discard test's closure that captures nothing (it must never run).
private let bareDiscardedRuns = Atomic<Int>(0)

@Suite("Box-free closure submit")
struct BoxFreeSubmitTests {
  @Test("a closure value is two words, code and context, read without reabstraction")
  func closureIsTwoWords() {
    #expect(MemoryLayout<@Sendable () -> Void>.size == MemoryLayout<ClosureWords>.size)
    #expect(MemoryLayout<ClosureValue>.size == MemoryLayout<ClosureWords>.size)
    let bare: @Sendable () -> Void = { bareRuns.add(0, ordering: .relaxed) }
    let counter = Counter()
    let one: @Sendable () -> Void = { counter.bump() }
    let two: @Sendable () -> Void = { counter.bump() }
    // Computed outside #expect, whose expansion passes arguments through generics.
    let (b, c1, c2) = (closureWords(bare), closureWords(one), closureWords(two))
    #expect(b.context == nil)  // a thunk around it would have a context
    #expect(c1.context != nil)
    #expect(c1.code != c2.code)  // a reabstraction thunk would be one code for all
    #expect(c1.code != b.code)
  }

  @Test("8 producers, closures capturing nothing, one class ref, a wide struct: per-lane FIFO, each runs once")
  func fifoFromEightProducers() throws {
    // ring 64: most submits find it full and take the overflow list
    let pool = try LanePool(name: uniqueName("bfree"), lanesPerBand: 1, ringCapacity: 64)
    let lane = pool.queue(for: .default)
    let producers = 8
    let per = runningUnderSanitizer ? 2_000 : 10_000
    let order = Order(producers: producers)
    let classRuns = Counter()
    let bareBefore = bareRuns.load(ordering: .relaxed)
    let failures = Atomic<Int>(0)
    let group = DispatchGroup()
    for id in 0..<producers {
      group.enter()
      Thread.detachNewThread {
        defer { group.leave() }
        for s in 0..<per {
          let work: @Sendable () -> Void
          switch s % 4 {
          case 0:  // captures the producer's state: a context with several fields
            work = {
              if order.next[id] != s { order.outOfOrder += 1 }
              order.next[id] = s + 1
              order.ran += 1
            }
          case 1:  // captures one wide struct and an Int (and the order object)
            let wide = Wide(s)
            work = {
              if !wide.holds(s) { order.bad += 1 }
              if order.next[id] != s { order.outOfOrder += 1 }
              order.next[id] = s + 1
              order.ran += 1
            }
          case 2:  // captures one class reference, nothing else
            let counter = classRuns
            do { try lane.async { counter.bump() } } catch { failures.add(1, ordering: .relaxed) }
            work = {
              if order.next[id] != s { order.outOfOrder += 1 }
              order.next[id] = s + 1
              order.ran += 1
            }
          default:  // captures nothing
            do { try lane.async { bareRuns.add(1, ordering: .relaxed) } } catch {
              failures.add(1, ordering: .relaxed)
            }
            work = {
              if order.next[id] != s { order.outOfOrder += 1 }
              order.next[id] = s + 1
              order.ran += 1
            }
          }
          do { try lane.async(work) } catch { failures.add(1, ordering: .relaxed) }
        }
      }
    }
    group.wait()
    try pool.shutdown(discardingQueued: false)
    #expect(failures.load(ordering: .relaxed) == 0)
    #expect(order.outOfOrder == 0)
    #expect(order.bad == 0)
    #expect(order.ran == producers * per)
    #expect(classRuns.count == producers * per / 4)
    #expect(bareRuns.load(ordering: .relaxed) - bareBefore == producers * per / 4)
    #expect(lane.info.overflowed > 0)  // the overflow list carried some of them
  }

  @Test("band-level async runs each box-free closure once")
  func bandLevelExactlyOnce() throws {
    let pool = try LanePool(name: uniqueName("bband"), lanesPerBand: 2)
    let runs = Locked([Int](repeating: 0, count: 4_000))
    for i in 0..<4_000 {
      try pool.async(qos: .utility) { runs.withLock { $0[i] += 1 } }
    }
    try pool.shutdown(discardingQueued: false)
    #expect(runs.withLock { $0.allSatisfy { $0 == 1 } })
  }

  @Test("a captured object is released exactly once when the closure ran")
  func releasedAfterRunning() throws {
    let pool = try LanePool(name: uniqueName("brun"), lanesPerBand: 1)
    defer { _ = try? pool.shutdown(discardingQueued: false) }
    let lane = pool.queue(for: .default)
    let released = Counter(), ran = Counter()
    func submit(_ i: Int) throws {
      let token = ReleaseToken(released)
      let wide = Wide(i)
      if i % 2 == 0 {
        try lane.async {
          _ = token
          if wide.holds(i) { ran.bump() }
        }
      } else {
        try pool.async(qos: .default) {
          _ = token
          if wide.holds(i) { ran.bump() }
        }
      }
    }
    for i in 0..<1_000 { try submit(i) }
    try pool.shutdown(discardingQueued: false)
    #expect(ran.count == 1_000)
    #expect(released.count == 1_000)
  }

  @Test("a refused closure never runs and its capture is released exactly once")
  func releasedWhenRefused() throws {
    let pool = try LanePool(name: uniqueName("bref"), lanesPerBand: 1, ringCapacity: 2, hardCapacity: true)
    let lane = pool.queue(for: .default)
    let released = Counter(), ran = Counter()
    // Full (EAGAIN): the lane is held by a blocker, its 2 cells taken.
    let started = DispatchSemaphore(value: 0), release = DispatchSemaphore(value: 0)
    try lane.async {
      started.signal()
      release.wait()
    }
    started.wait()
    func submitOne() throws(LanePoolError) {
      let token = ReleaseToken(released)
      try lane.async {
        _ = token
        ran.bump()
      }
    }
    try submitOne()
    try submitOne()
    #expect(throws: LanePoolError.full) { try submitOne() }
    #expect(released.count == 1)  // the refused one, at once
    release.signal()
    #expect(eventually { released.count == 3 })  // a sync could find the 2 cells full still
    #expect(ran.count == 2)
    // Shut down (ESHUTDOWN), lane-level and band-level.
    try pool.shutdown(discardingQueued: false)
    #expect(throws: LanePoolError.shutDown) { try submitOne() }
    func submitToBand() throws(LanePoolError) {
      let token = ReleaseToken(released)
      try pool.async(qos: .default) {
        _ = token
        ran.bump()
      }
    }
    #expect(throws: LanePoolError.shutDown) { try submitToBand() }
    #expect(ran.count == 2)
    #expect(released.count == 5)
  }

  @Test("a cancelling shutdown releases each queued closure's capture once, without running it, and counts it")
  func releasedWhenDiscarded() throws {
    // 4 cells: most of the queue is in the overflow list
    let pool = try LanePool(name: uniqueName("bdisc"), lanesPerBand: 1, ringCapacity: 4)
    let lane = pool.queue(for: .default)
    let released = Counter(), ran = Counter()
    let started = DispatchSemaphore(value: 0)
    try lane.async {
      started.signal()
      while !pool.isShutDown { usleep(200) }  // holds the lane until the cancel began
    }
    started.wait()
    func submit(_ i: Int) throws {
      let token = ReleaseToken(released)
      switch i % 3 {
      case 0:
        try lane.async {
          _ = token
          ran.bump()
        }
      case 1:
        let wide = Wide(i)
        try lane.async {
          _ = (token, wide)
          ran.bump()
        }
      default:
        let work: @Sendable () -> Void = {
          _ = token
          ran.bump()
        }
        #expect(try lane.async(contentsOf: [work]) == 1)
      }
    }
    for i in 0..<300 { try submit(i) }
    try lane.async { bareDiscardedRuns.add(1, ordering: .relaxed) }  // no context to release
    #expect(released.count == 0)
    let discarded = try pool.shutdown(discardingQueued: true)
    #expect(discarded == 301)
    #expect(ran.count == 0)
    #expect(bareDiscardedRuns.load(ordering: .relaxed) == 0)
    #expect(released.count == 300)
  }
}
