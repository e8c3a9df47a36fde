import Dispatch
import Foundation
import LanePoolTestSupport
import Synchronization
import Testing

@testable import LanePool

// Issue 23, item 4: the Swift layer's life-cycle paths (concurrentPerform during a
// shutdown, a custom pool shut down under LanePool as the default executor; the
// Service's drain and cancel are in LanePoolServerTests) run once per seed.
//
// Seeds: in a test build with the C core's seeded-yield mode
// (`swift test -Xcc -DLANEPOOL_TEST_INJECT --scratch-path .build-inject --filter Scenario`)
// each seed also drives the core's inject points (ring publish, park, wake, drain scan,
// close/discard, cancel...). In a plain build the points are compiled out; then only the
// scenario's own seeded yields, placed in its Swift closures, vary the schedule.
// LANEPOOL_SCENARIO_SEEDS sets the number of seeds (default 40).

let scenarioSeeds: Int = Int(ProcessInfo.processInfo.environment["LANEPOOL_SCENARIO_SEEDS"] ?? "") ?? 40

/// Seeded yields placed in a scenario's Swift code: at each call, from a stream derived
/// from the seed and a shared counter, nothing, a yield, or a short sleep.
final class SwiftYields: Sendable {
  let seed: UInt64
  private let calls = Atomic<UInt64>(0)
  init(seed: UInt64) { self.seed = seed }
  /// A number from the seed's stream (splitmix64 of seed and call count).
  func next() -> UInt64 {
    var z = seed &+ calls.wrappingAdd(1, ordering: .relaxed).newValue &* 0x9E37_79B9_7F4A_7C15
    z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
    z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
    return z ^ (z >> 31)
  }
  func point() {
    let r = next()
    switch r % 16 {
    case 0, 1, 2: sched_yield()
    case 3: usleep(UInt32(1 + (r >> 8) % 200))
    default: break
    }
  }
}

/// Runs `body` once per seed (1...scenarioSeeds), with the core's seeded yields on for
/// that seed when the build has them. Returns the first failure, naming the seed.
func forEachSeed(_ name: String, _ body: (UInt64, SwiftYields) -> String?) -> String? {
  let injected = lp_test_inject_configure(0, 200) == 1
  defer { _ = lp_test_inject_configure(0, 200) }
  var hits: UInt64 = 0
  for seed in 1...UInt64(scenarioSeeds) {
    _ = lp_test_inject_configure(seed, 200)
    if let failure = body(seed, SwiftYields(seed: seed)) {
      return "\(name), seed \(seed) (core injection \(injected ? "on" : "not built in")): \(failure)"
    }
    hits += lp_test_inject_hits_total()
  }
  let injection = injected ? "on, \(hits) points reached" : "not built in"
  print("\(name): \(scenarioSeeds) seeds passed; core injection \(injection)")
  return nil
}

/// Runs `body` on a thread of its own; true if it returned within `seconds`.
func finishes(within seconds: Int = 60, _ body: @escaping @Sendable () -> Void) -> Bool {
  let done = DispatchSemaphore(value: 0)
  startThread {
    body()
    done.signal()
  }
  return done.wait(timeout: .now() + .seconds(seconds)) == .success
}

func startThread(_ body: @escaping @Sendable () -> Void) { Thread { body() }.start() }

/// One concurrentPerform call whose indices are counted: true if every index ran once.
func countedConcurrentPerform(_ pool: LanePool, _ n: Int, _ yields: SwiftYields) -> Bool {
  let hits = (0..<n).map { _ in Counter() }
  pool.concurrentPerform(iterations: n, qos: .utility) { i in
    yields.point()
    hits[i].bump()
  }
  return hits.allSatisfy { $0.count == 1 }
}

@Suite("Swift life-cycle scenarios, one run per seed (issue 23 item 4)", .serialized)
struct LifecycleScenarioTests {
  @Test("scenario: concurrentPerform from outside and from lanes while the pool drains or cancels")
  func concurrentPerformDuringShutdown() {
    let failure = forEachSeed("concurrentPerform during shutdown") { seed, yields in
      let pool: LanePool
      do { pool = try LanePool(name: "scpf\(seed % 100)", lanesPerBand: 2) } catch { return "create: \(error)" }
      let cancel = seed % 2 == 0
      let stop = Atomic<Bool>(false)
      let bad = Counter()
      let calls = Counter()
      // Two outside callers and a stream of lane tasks that call it (nested in a
      // concurrentPerform of their own every other time).
      let outsideDone = DispatchSemaphore(value: 0)
      for _ in 0..<2 {
        startThread {
          while !stop.load(ordering: .acquiring) {
            calls.bump()
            if !countedConcurrentPerform(pool, 16, yields) { bad.bump() }
          }
          outsideDone.signal()
        }
      }
      let laneCallsStarted = Counter()
      let laneCallsDone = Counter()
      startThread {
        var k = 0
        while !stop.load(ordering: .acquiring) {
          k += 1
          let nested = k % 2 == 0
          // A discarded lane task never starts: only started calls are counted.
          try? pool.async(qos: .utility) {
            laneCallsStarted.bump()
            if nested {
              pool.concurrentPerform(iterations: 2, qos: .utility) { _ in
                if !countedConcurrentPerform(pool, 8, yields) { bad.bump() }
              }
            } else if !countedConcurrentPerform(pool, 8, yields) {
              bad.bump()
            }
            laneCallsDone.bump()
          }
          yields.point()
          if pool.isShutDown { usleep(100) }
        }
      }
      // Let the calls get going, then shut down.
      _ = eventually(seconds: 60) { calls.count > 2 && laneCallsStarted.count > 1 }
      for _ in 0..<Int(seed % 8) { yields.point() }
      let shutDown = finishes { _ = try? pool.shutdown(discardingQueued: cancel) }
      guard shutDown else { return "shutdown(discardingQueued: \(cancel)) did not return" }
      stop.store(true, ordering: .releasing)
      for _ in 0..<2 {
        guard outsideDone.wait(timeout: .now() + 60) == .success else {
          return "a concurrentPerform from outside did not return after the shutdown"
        }
      }
      guard laneCallsDone.count == laneCallsStarted.count else {
        return "\(laneCallsStarted.count - laneCallsDone.count) lane-side concurrentPerform calls did not return"
      }
      guard bad.count == 0 else { return "\(bad.count) calls ran an index other than once" }
      return nil
    }
    if let failure { Issue.record("\(failure)") }
  }

  @Test("scenario: LanePool as the default executor, a custom pool with actors drains or cancels")
  func defaultExecutorThenPoolShutdown() async {
    let result = await #expect(processExitsWith: .success, observing: [\.standardErrorContent]) {
      reportVerdictAndExit(defaultExecutorScenario())
    }
    recordChildVerdict(result)
  }
}

/// An actor on a lane of a custom pool.
actor ScenarioCounter {
  let lane: Lane
  var n = 0
  init(lane: Lane) { self.lane = lane }
  nonisolated var unownedExecutor: UnownedSerialExecutor { lane.asUnownedSerialExecutor() }
  func step(_ yields: SwiftYields) {
    yields.point()
    n += 1
  }
}

/// In a child process: LanePool is the default executor; per seed, tasks (on the
/// default pool's lanes) call actors on a custom pool's lanes and tasks that prefer the
/// custom pool, while it drains or cancels. Every task must finish (its jobs run on the
/// lanes or on the fallbacks), and the shutdown must return.
func defaultExecutorScenario() -> String? {
  do {
    var c = LanePool.Configuration()
    c.lanesPerBand = 2
    try LanePool.installAsDefaultExecutor(configuration: c)
  } catch { return "install: \(error)" }
  return forEachSeed("default executor, custom pool shutdown") { seed, yields in
    let pool: LanePool
    do { pool = try LanePool(name: "scde\(seed % 100)", lanesPerBand: 2) } catch { return "create: \(error)" }
    let actors = pool.lanes(for: .utility).map(ScenarioCounter.init)
    let finished = Counter()
    let tasks = 6
    for t in 0..<tasks {
      if t % 2 == 0 {
        Task.detached(priority: .medium) {
          for s in 0..<50 { await actors[(t + s) % actors.count].step(yields) }
          finished.bump()
        }
      } else {
        Task.detached(executorPreference: pool, priority: .low) {
          for s in 0..<50 {
            yields.point()
            if s % 5 == 0 { await actors[s % actors.count].step(yields) } else { await Task.yield() }
          }
          finished.bump()
        }
      }
    }
    for _ in 0..<Int(seed % 16) { yields.point() }
    let cancel = seed % 2 == 0
    guard finishes({ _ = try? pool.shutdown(discardingQueued: cancel) }) else {
      return "shutdown(discardingQueued: \(cancel)) did not return"
    }
    guard eventually(seconds: 60, { finished.count == tasks }) else {
      return "\(tasks - finished.count) of \(tasks) tasks never finished (a job was lost)"
    }
    return nil
  }
}
