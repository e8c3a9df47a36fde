import Foundation
import Synchronization
import Testing

@testable import LanePool

@Suite("Lane engine: ordering, no loss, threads, shutdown")
struct EngineTests {
  @Test("4 producers x 100,000 tasks into one lane: each ran once, each producer's in order")
  func perLaneFIFO() async throws {
    // A 64-slot ring makes the producers overflow constantly: the FIFO-with-overflow
    // path is the one most likely to reorder.
    let pool = try LanePool(name: uniqueName("fifo"), lanesPerBand: 1, ringCapacity: 64)
    let lane = pool.queue(for: .default)
    let producers = 4
    let perProducer = 100_000
    struct State {
      var last: [Int]
      var seen: [UInt8]
      var outOfOrder = 0
    }
    let state = LaneLocal(
      State(last: Array(repeating: -1, count: producers), seen: Array(repeating: 0, count: producers * perProducer)))
    await withTaskGroup(of: Void.self) { group in
      for p in 0..<producers {
        group.addTask {
          for i in 0..<perProducer {
            try! lane.async {
              if state.value.last[p] != i - 1 { state.value.outOfOrder += 1 }
              state.value.last[p] = i
              state.value.seen[p * perProducer + i] &+= 1
            }
          }
        }
      }
    }
    try barrier(lane)
    #expect(state.value.outOfOrder == 0)
    #expect(state.value.seen.allSatisfy { $0 == 1 })
    #expect(state.value.last == Array(repeating: perProducer - 1, count: producers))
    #expect(lane.info.overflowed > 0, "the test meant to exercise the overflow list")
    try await pool.shutdownGracefully()
  }

  @Test("4 producers, 1,000,000 tasks over every band: executed == accepted")
  func noLossAcrossPool() async throws {
    let pool = try LanePool(name: uniqueName("loss"), lanesPerBand: 2, ringCapacity: 256)
    let ran = Counter()
    let accepted = Counter()
    await withTaskGroup(of: Void.self) { group in
      for p in 0..<4 {
        group.addTask {
          var rng = SplitMix(seed: UInt64(p + 1))
          for i in 0..<250_000 {
            let qos = QoS.allCases[Int(rng.next() % 5)]
            do {
              switch rng.next() % 3 {
              case 0: try pool.async(qos: qos) { ran.bump() }
              case 1: try pool.queue(for: qos).async { ran.bump() }
              default: try pool.queue(for: qos, key: i).async { ran.bump() }
              }
              accepted.bump()
            } catch {
              Issue.record("submit refused: \(error)")
            }
          }
        }
      }
    }
    try await pool.shutdownGracefully()  // drains
    #expect(accepted.count == 1_000_000)
    #expect(ran.count == accepted.count)
    // Band work a held-up lane gave up ran on a rescue lane: counted there.
    let executed = (pool.allLanes + pool.rescueLanes).reduce(0) { $0 + $1.info.tasksExecuted }
    #expect(executed == 1_000_000)
  }

  @Test("the pool runs exactly 5 x (lanesPerBand + 1) named threads (the rescue lanes too), all gone after shutdown")
  func threadsAndNames() async throws {
    let name = uniqueName("thr")
    let pool = try LanePool(name: name, lanesPerBand: 3)
    #expect(threadCount(prefix: "\(name)-") == 20)
    let names = Set(threadNames().filter { $0.hasPrefix("\(name)-") })
    var expected: Set<String> = []
    for band in ["ui", "in", "df", "ut", "bg"] {
      for i in 0..<3 { expected.insert("\(name)-\(band)-\(i)") }
      expected.insert("\(name)-\(band)-r")
    }
    #expect(names == expected)
    #expect(pool.rescueLanes.map(\.qos) == QoS.allCases)
    #expect(pool.rescueLanes.allSatisfy { $0.index == 3 && $0.name.hasSuffix("-r") })
    for lane in pool.allLanes + pool.rescueLanes {
      let info = lane.info
      #expect(info.isRunning)
      let comm = try String(contentsOfFile: "/proc/self/task/\(info.threadID)/comm", encoding: .utf8)
      #expect(comm.trimmingCharacters(in: .whitespacesAndNewlines) == info.threadName)
    }
    try await pool.shutdownGracefully()
    // Joined threads may stay listed in /proc/self/task for a moment: wait, bounded.
    #expect(await eventuallyAsync { threadCount(prefix: "\(name)-") == 0 }, "the pool's lane threads are still listed")
    #expect((pool.allLanes + pool.rescueLanes).allSatisfy { !$0.info.isRunning })
  }

  @Test("thread names stay within 15 bytes for long pool names")
  func longNamesTruncate() throws {
    let pool = try LanePool(name: "averyveryverylongname", lanesPerBand: 1)
    defer { _ = try? pool.shutdown(discardingQueued: false) }
    for lane in pool.allLanes {
      #expect(lane.name.utf8.count <= 15)
      #expect(lane.name.hasSuffix("-\(["ui", "in", "df", "ut", "bg"][lane.qos.bandIndex])-0"))
    }
  }

  @Test("drain runs every accepted task")
  func drainRunsEverything() async throws {
    let pool = try LanePool(name: uniqueName("drain"), lanesPerBand: 2, ringCapacity: 16)
    let ran = Counter()
    for i in 0..<5_000 {
      try pool.async(qos: QoS.allCases[i % 5]) {
        usleep(20)
        ran.bump()
      }
    }
    try await pool.shutdownGracefully()
    #expect(ran.count == 5_000)
  }

  @Test("cancel: every accepted task either ran or was discarded, never both, never neither")
  func cancelAccountsForEverything() throws {
    let pool = try LanePool(name: uniqueName("cncl"), lanesPerBand: 2, ringCapacity: 16)
    let ran = Counter()
    let freed = Counter()
    var accepted = 0
    for i in 0..<5_000 {
      let token = ReleaseToken(freed)
      try pool.async(qos: QoS.allCases[i % 5]) {
        _ = token
        usleep(50)
        ran.bump()
      }
      accepted += 1
    }
    let discarded = try pool.shutdown(discardingQueued: true)
    #expect(ran.count + discarded == accepted)
    #expect(discarded > 0, "5,000 x 50 us cannot all have run before the cancel")
    // Every closure (run or discarded) was released: nothing leaked.
    #expect(eventually { freed.count == accepted })
  }

  @Test("keyed lanes: the same key always picks the same lane")
  func keyedPick() throws {
    let pool = try LanePool(name: uniqueName("key"), lanesPerBand: 4)
    defer { _ = try? pool.shutdown(discardingQueued: false) }
    for key in ["alice", "bob", "carol", "dave", "eve"] {
      let first = pool.queue(for: .utility, key: key)
      for _ in 0..<10 { #expect(pool.queue(for: .utility, key: key) === first) }
      #expect(first.qos == .utility)
    }
    // And keys spread: 1,000 keys over 4 lanes touch every lane.
    let used = Set((0..<1_000).map { pool.queue(for: .default, key: $0).index })
    #expect(used == [0, 1, 2, 3])
  }

  @Test("queue(for:) is round-robin over the band, like YYDispatchQueuePool")
  func roundRobin() throws {
    let pool = try LanePool(name: uniqueName("rr"), lanesPerBand: 3)
    defer { _ = try? pool.shutdown(discardingQueued: false) }
    let picks = (0..<9).map { _ in pool.queue(for: .background).index }
    #expect(picks == [0, 1, 2, 0, 1, 2, 0, 1, 2])
    #expect(pool.queue(for: .background).qos == .background)
  }

  @Test("band-level async spreads unordered work over the band's lanes")
  func bandLevelAsync() throws {
    let pool = try LanePool(name: uniqueName("band"), lanesPerBand: 2)
    defer { _ = try? pool.shutdown(discardingQueued: false) }
    let lanesSeen = Locked<Set<Int>>([])
    let ran = Counter(), first = Atomic<Bool>(true)
    for _ in 0..<2_000 {
      try pool.async(qos: .userInitiated) {
        let lane = Lane.current!
        #expect(lane.qos == .userInitiated)
        lanesSeen.withLock { _ = $0.insert(lane.index) }
        // The first job to run holds its thread (a 30 s cap) until both lanes' threads
        // have taken one: a thread slow to get a CPU still gets its turn, the other thread
        // running the rest meanwhile.
        if first.exchange(false, ordering: .relaxed) {
          let cap = ContinuousClock.now + .seconds(30)
          while !lanesSeen.withLock({ $0.isSuperset(of: [0, 1]) }) && ContinuousClock.now < cap {
            usleep(1_000)
          }
        }
        usleep(10)
        ran.bump()
      }
    }
    // Band work holds no lane: a barrier on a lane does not wait for it. Wait for all
    // of it (a cap only a lost task reaches).
    let deadline = ContinuousClock.now + .seconds(30)
    while ran.count < 2_000 && ContinuousClock.now < deadline { usleep(1_000) }
    #expect(ran.count == 2_000)
    // Both threads of the band took some; the band's rescue thread (index lanesPerBand)
    // may have taken some too, when both seemed stuck on a loaded machine.
    let seen = lanesSeen.withLock { $0 }
    #expect(seen.isSuperset(of: [0, 1]) && seen.isSubset(of: [0, 1, 2]), "\(seen.sorted())")
  }

  @Test("sync returns the closure's value, runs after earlier tasks, and rethrows its error")
  func syncSemantics() throws {
    let pool = try LanePool(name: uniqueName("sync"), lanesPerBand: 1)
    defer { _ = try? pool.shutdown(discardingQueued: false) }
    let lane = pool.queue(for: .userInitiated)
    let log = LaneLocal<[Int]>([])
    for i in 0..<100 { try lane.async { log.value.append(i) } }
    let snapshot = try lane.sync { log.value }
    #expect(snapshot == Array(0..<100))
    #expect(try lane.sync { Lane.current === lane })
    struct Boom: Error, Equatable {}
    #expect(throws: Boom()) { try lane.sync { throw Boom() } }
  }

  @Test("lane info: thread id, tasks run, depth")
  func laneInfo() throws {
    let pool = try LanePool(name: uniqueName("info"), lanesPerBand: 1)
    defer { _ = try? pool.shutdown(discardingQueued: false) }
    let lane = pool.queue(for: .default)
    let tid = try lane.sync(onLaneThread: true) { currentThreadID() }
    for _ in 0..<1_000 { try lane.async {} }
    try barrier(lane)
    // Two syncs + 1,000; the last sync's task is counted just after it returned.
    #expect(eventually { lane.info.tasksExecuted == 1_002 })
    let info = lane.info
    #expect(info.threadID == tid)
    #expect(info.depth == 0)
    #expect(info.qos == .default && info.index == 0)
  }

  @Test("the default pool: one lane per allowed CPU per band, and the static queue(for:)")
  func defaultPool() throws {
    let cpus = ProcessInfo.processInfo.activeProcessorCount
    #expect(LanePool.default.lanesPerBand == min(cpus, 64))
    #expect(LanePool.default.isDefault)
    let lane = LanePool.queue(for: .userInitiated)
    #expect(lane.qos == .userInitiated)
    #expect(try lane.sync { Lane.current === lane })
  }

  @Test("hard capacity: a full lane refuses, the task is not run and is released")
  func hardCapacity() throws {
    let pool = try LanePool(name: uniqueName("hard"), lanesPerBand: 1, ringCapacity: 4, hardCapacity: true)
    defer { _ = try? pool.shutdown(discardingQueued: false) }
    let lane = pool.queue(for: .background)
    let gate = DispatchSemaphore(value: 0)
    let ran = Counter()
    try lane.async { gate.wait() }  // holds the lane
    #expect(eventually { lane.info.depth == 0 })  // the blocker was taken off the ring
    for _ in 0..<4 { try lane.async { ran.bump() } }
    let released = Counter()
    do {
      let token = ReleaseToken(released)
      #expect(throws: LanePoolError.full) {
        try lane.async {
          _ = token; ran.bump()
        }
      }
    }
    #expect(released.count == 1)
    gate.signal()
    // (A sync barrier here could itself find the hard-capacity ring still full.)
    #expect(eventually { ran.count == 4 && lane.info.depth == 0 })
    try barrier(lane)
    #expect(ran.count == 4)
  }
}

struct SplitMix {
  var state: UInt64
  init(seed: UInt64) { state = seed }
  mutating func next() -> UInt64 {
    state &+= 0x9E37_79B9_7F4A_7C15
    var z = state
    z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
    z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
    return z ^ (z >> 31)
  }
}
