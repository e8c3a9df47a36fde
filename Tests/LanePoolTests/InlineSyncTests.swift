import Foundation
import LanePool
import Synchronization
import Testing

// Issue 11, item 2: `sync` onto an idle lane runs inline on the caller's thread, as
// `DispatchQueue.sync` does on an idle serial queue, while staying mutually exclusive
// with the lane's own tasks and FIFO with what was queued before it.

/// Deliberately unsynchronised: only ever touched from the lane (its tasks, or a sync
/// closure that holds the lane). ThreadSanitizer reports any overlap.
private final class PlainCounter: @unchecked Sendable {
  var value = 0
}

private actor OnLane {
  let lane: Lane
  var value = 0
  init(lane: Lane) { self.lane = lane }
  nonisolated var unownedExecutor: UnownedSerialExecutor { lane.asUnownedSerialExecutor() }
}

/// Calls `lane.sync` until one call runs on the calling thread (the lane was parked),
/// letting the lane idle between tries. Returns that call's result, or nil if none
/// did within the tries.
private func syncInline<T>(_ lane: Lane, tries: Int = 200, _ body: () -> T) throws -> T? {
  let me = pthread_self()
  for _ in 0..<tries {
    usleep(10_000)  // past the lane's spin budget: it parks
    var ranHere = false
    let value = try lane.sync { () -> T in
      ranHere = pthread_equal(pthread_self(), me) != 0
      return body()
    }
    if ranHere { return value }
  }
  return nil
}

@Suite("Inline sync")
struct InlineSyncTests {
  @Test("sync onto an idle lane runs on the caller's thread, as the lane")
  func idleSyncRunsInlineAsTheLane() throws {
    let pool = try LanePool(name: "inl", lanesPerBand: 1)
    defer { _ = try? pool.shutdown(discardingQueued: false) }
    let lane = pool.queue(for: .utility)
    let actor = OnLane(lane: lane)
    let seen = try syncInline(lane) { () -> (Bool, Bool, Int) in
      // Isolation checks hold inside, as on the lane's thread.
      let bumped = actor.assumeIsolated { a -> Int in
        a.value += 1
        return a.value
      }
      return (lane.isCurrent, Lane.current === lane, bumped)
    }
    let (isCurrent, current, bumped) = try #require(seen)
    #expect(isCurrent)
    #expect(current)
    #expect(bumped == 1)
    #expect(!lane.isCurrent)  // restored afterwards
    #expect(Lane.current == nil)
    #expect(lane.info.tasksExecuted == 0)  // the lane's thread ran nothing
  }

  @Test("sync(onLaneThread: true) always runs on the lane's thread")
  func onLaneThreadIsTheLaneThread() throws {
    let pool = try LanePool(name: "inlq", lanesPerBand: 1)
    defer { _ = try? pool.shutdown(discardingQueued: false) }
    let lane = pool.queue(for: .utility)
    let me = pthread_self()
    for _ in 0..<20 {
      usleep(2_000)
      let (here, name) = try lane.sync(onLaneThread: true) { () -> (Bool, String?) in
        (pthread_equal(pthread_self(), me) != 0, Lane.current?.name)
      }
      #expect(!here)
      #expect(name == lane.name)
    }
    // The lane counts a task just after it returned: one more hand-off orders that.
    try lane.sync(onLaneThread: true) {}
    #expect(lane.info.tasksExecuted >= 20)
  }

  @Test("a sync waits behind work queued before it, and work queued inside runs after it")
  func fifoAroundInlineSync() throws {
    let pool = try LanePool(name: "inlf", lanesPerBand: 1)
    defer { _ = try? pool.shutdown(discardingQueued: false) }
    let lane = pool.queue(for: .utility)
    let order = PlainCounter()  // a sequence number, touched on the lane only
    let log = Mutex<[Int]>([])
    let started = DispatchSemaphore(value: 0)
    let release = DispatchSemaphore(value: 0)
    try lane.async {
      started.signal()
      release.wait()
      order.value += 1
      log.withLock { $0.append(1) }
    }
    started.wait()
    DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(20)) { release.signal() }
    try lane.sync {
      order.value += 1
      log.withLock { $0.append(2) }
    }
    #expect(log.withLock { $0 } == [1, 2])
    // Work queued from inside an inline sync runs after it returns; the lane is woken.
    _ = try syncInline(lane) {
      try? lane.async { log.withLock { $0.append(4) } }
      log.withLock { $0.append(3) }
    }
    try lane.sync(onLaneThread: true) {}
    let seq = log.withLock { $0 }
    #expect(seq.suffix(2) == [3, 4])
    #expect(order.value == 2)
  }

  @Test("inline sync is mutually exclusive with the lane's tasks (8 producers, 3 sync callers)")
  func mutualExclusionUnderProducers() throws {
    let pool = try LanePool(name: "inlx", lanesPerBand: 1)
    let lane = pool.queue(for: .default)
    let counter = PlainCounter()
    let producers = 8, syncers = 3, perThread = 5_000
    let inline = Atomic<Int>(0)
    let group = DispatchGroup()
    for t in 0..<(producers + syncers) {
      group.enter()
      Thread.detachNewThread {
        defer { group.leave() }
        let me = pthread_self()
        for i in 0..<perThread {
          if t < producers {
            try! lane.async { counter.value += 1 }
            if i % 500 == 499 { usleep(1_000) }  // let the lane idle now and then
          } else {
            try! lane.sync {
              counter.value += 1
              if pthread_equal(pthread_self(), me) != 0 { inline.add(1, ordering: .relaxed) }
            }
          }
        }
      }
    }
    group.wait()
    // After the producers: the lane idles, so these run inline.
    for _ in 0..<3 {
      _ = try syncInline(lane) {
        counter.value += 1
        inline.add(1, ordering: .relaxed)
      }
    }
    try pool.shutdown(discardingQueued: false)
    #expect(counter.value == (producers + syncers) * perThread + 3)
    #expect(inline.load(ordering: .relaxed) >= 3)
  }

  @Test("a closure run inline may sync onto another lane, and shutting its pool down is refused")
  func nestedInlineSync() throws {
    let pool = try LanePool(name: "inln", lanesPerBand: 2)
    defer { _ = try? pool.shutdown(discardingQueued: false) }
    let a = pool.lanes(for: .utility)[0]
    let b = pool.lanes(for: .utility)[1]
    let out = try syncInline(a) { () -> (String?, String?, LanePoolError?) in
      let inner = try? b.sync { Lane.current?.name }
      let after = Lane.current?.name  // back to lane a
      var refused: LanePoolError? = nil
      do { _ = try pool.shutdown(discardingQueued: false) } catch let e as LanePoolError { refused = e } catch {}
      return (inner, after, refused)
    }
    let (inner, after, refused) = try #require(out)
    #expect(inner == b.name)
    #expect(after == a.name)
    #expect(refused == .wouldDeadlock)
    #expect(!pool.isShutDown)
  }

  @Test("nested syncs that come back to a lane they hold stop with the message, never hang (issue 23, 10)")
  func nestedSyncBackToAHeldLaneStops() async {
    let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
      alarm(60)  // a hang ends the child with SIGALRM, which the message check below rejects
      let pool = try? LanePool(name: "nestsync", lanesPerBand: 1)
      guard let pool else { return }
      let a = pool.queue(for: .default)
      let b = pool.queue(for: .utility)
      try? a.sync(onLaneThread: true) { try? b.sync(onLaneThread: true) { _ = try? a.sync { 1 } } }
    }
    let said = String(decoding: result?.standardErrorContent ?? [], as: UTF8.self)
    #expect(said.contains("from nested syncs that hold it"), "stderr: \(said)")
  }
}
