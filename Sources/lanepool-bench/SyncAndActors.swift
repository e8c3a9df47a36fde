// W8 (sync round trips) and W9 (actor ping-pong): what Swift server code that uses
// serial queues as locks, or actors on lanes, pays per call.
import CLanePool
import Dispatch
import Foundation
import LanePool
import Synchronization

/// Unsynchronised on purpose: only ever touched inside a sync closure (a lane or a
/// serial queue), which is what makes it safe.
final class PlainCounter: @unchecked Sendable { var n = 0 }

let cBump: @convention(c) (UnsafeMutableRawPointer?) -> Void = { ctx in
  Unmanaged<PlainCounter>.fromOpaque(ctx!).takeUnretainedValue().n &+= 1
}

/// Runs `body(threadIndex)` on `threads` threads at once; wall-clock ns of the slowest.
func timeThreads(_ threads: Int, _ body: @escaping @Sendable (Int) -> Void) -> UInt64 {
  let start = DispatchSemaphore(value: 0)
  let done = DispatchGroup()
  for t in 0..<threads {
    done.enter()
    Thread.detachNewThread {
      start.wait()
      body(t)
      done.leave()
    }
  }
  usleep(2_000)
  let t0 = now()
  for _ in 0..<threads { start.signal() }
  done.wait()
  return now() - t0
}

struct SyncRow: @unchecked Sendable {
  // @unchecked: the closures drive thread-safe lanes and queues.
  let name: String
  /// Runs `calls` sync round trips that each add 1 to the counter.
  let calls: (Int, PlainCounter) -> Void
  /// Fewer calls for the slow (hand-off) rows, so a run stays short.
  let divisor: Int
}

func runW8(calls: Int, rounds: Int) -> [String: W8Result] {
  let queue = DispatchQueue(label: "bench.w8.serial", qos: .userInitiated)
  let lane = lanePool.queue(for: .userInitiated, key: "w8")
  var cLane: OpaquePointer?
  _ = lanepool_get_lane(cPool, LANEPOOL_QOS_USER_INITIATED, 0, &cLane)
  let rows: [SyncRow] = [
    SyncRow(name: "GCD serial queue .sync", calls: { n, c in for _ in 0..<n { queue.sync { c.n &+= 1 } } }, divisor: 1),
    SyncRow(name: "LanePool lane.sync", calls: { n, c in for _ in 0..<n { try! lane.sync { c.n &+= 1 } } }, divisor: 1),
    SyncRow(
      name: "LanePool C lane_sync",
      calls: { n, c in
        let ctx = Unmanaged.passUnretained(c).toOpaque()
        for _ in 0..<n { _ = lanepool_lane_sync(cLane, cBump, ctx) }
      }, divisor: 1),
    SyncRow(
      name: "LanePool, lane thread",
      calls: { n, c in for _ in 0..<n { try! lane.sync(onLaneThread: true) { c.n &+= 1 } } },
      divisor: 10),
  ]
  var out: [String: W8Result] = [:]
  for r in rows {
    let n = max(calls / r.divisor, 100)
    r.calls(n / 10, PlainCounter())  // warm-up
    var idle: [Double] = []
    var contended: [Double] = []
    for _ in 0..<rounds {
      let c = PlainCounter()
      usleep(5_000)  // let the lane park: "idle" means the first call finds it parked
      let t0 = now()
      r.calls(n, c)
      idle.append(Double(now() - t0) / Double(n))
      if c.n != n { fatalError("W8: \(r.name) lost calls") }
      // Contended: two threads sync onto the same lane / queue at once.
      let c2 = PlainCounter()
      let ns = timeThreads(2) { _ in r.calls(n / 2, c2) }
      contended.append(Double(ns) / Double(n / 2 * 2))
      if c2.n != n / 2 * 2 { fatalError("W8: \(r.name) lost calls under contention (not exclusive)") }
    }
    out[r.name] = W8Result(idleNsPerCall: median(idle), contendedNsPerCall: median(contended))
  }
  return out
}

// MARK: - W9: actor ping-pong

actor DefaultPonger {
  var n = 0
  func pong() { n &+= 1 }
}

// Each pinger touches its own state after every await: without that, the optimiser
// drops the hop back to the pinger (nothing isolated follows it) and the "ping-pong"
// runs entirely on the ponger's executor.
actor DefaultPinger {
  var received = 0
  func run(_ calls: Int, _ other: DefaultPonger) async {
    for _ in 0..<calls {
      await other.pong()
      received &+= 1
    }
  }
}

/// Blocks the calling (non-async) thread until `body` finished in a new task.
func blockOn(_ body: @escaping @Sendable () async -> Void) {
  let done = DispatchSemaphore(value: 0)
  Task {
    await body()
    done.signal()
  }
  done.wait()
}

func blockOn(preferring executor: any TaskExecutor, _ body: @escaping @Sendable () async -> Void) {
  let done = DispatchSemaphore(value: 0)
  Task(executorPreference: executor) {
    await body()
    done.signal()
  }
  done.wait()
}

/// The natural peer of a task that prefers the pool: a task executor over one serial
/// `DispatchQueue` (no thread hand-off: every job runs on the queue's one thread in turn).
/// With any task executor preference, each actor hop goes through the runtime's
/// default-actor enqueue; this row shows what that costs without LanePool in it.
final class DispatchQueueTaskExecutor: TaskExecutor, @unchecked Sendable {
  let queue = DispatchQueue(label: "bench-w9-task-executor")
  func enqueue(_ job: consuming ExecutorJob) {
    let job = UnownedJob(job)
    queue.async { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
  }
}

func laneJobs(_ pool: LanePool) -> UInt64 {
  (pool.allLanes + pool.rescueLanes).reduce(0) { $0 + $1.info.tasksExecuted }
}

/// The ping-pong rows: `calls` awaited calls from one actor to another, median of
/// `rounds`. `extra` adds rows measured elsewhere (the default-executor child process).
func runW9(calls: Int, rounds: Int) -> [(String, W9Result)] {
  let pool = try! LanePool(name: "bench-w9", lanesPerBand: 2, policies: benchPolicies)
  defer { _ = try? pool.shutdown(discardingQueued: false) }
  let laneA = pool.lanes(for: .userInitiated)[0]
  let laneB = pool.lanes(for: .userInitiated)[1]
  let queueExecutor = DispatchQueueTaskExecutor()
  var cLane: OpaquePointer?
  _ = lanepool_get_lane(cPool, LANEPOOL_QOS_USER_INITIATED, 0, &cLane)
  let references = HopReferences(cLane!)
  defer { references.shutdown() }
  var variants: [W9Variant] = [
    (
      "default executor", false,
      { n in
        let a = DefaultPinger(), b = DefaultPonger()
        blockOn { await a.run(n, b) }
      }, 1
    ),
    (
      "both actors on one lane", true,
      { n in pingPong(n, laneA.asUnownedSerialExecutor(), laneA.asUnownedSerialExecutor()) }, 1
    ),
    (
      "actors on two lanes", true,
      { n in pingPong(n, laneA.asUnownedSerialExecutor(), laneB.asUnownedSerialExecutor()) }, 1
    ),
  ]
  variants += references.handOffRows
  variants += [
    (
      "default actors, task prefers the pool", true,
      { n in
        let a = DefaultPinger(), b = DefaultPonger()
        blockOn(preferring: pool) { await a.run(n, b) }
      }, 1
    ),
    (
      "default actors, task prefers a DispatchQueue executor", false,
      { n in
        let a = DefaultPinger(), b = DefaultPonger()
        blockOn(preferring: queueExecutor) { await a.run(n, b) }
      }, 1
    ),
    (
      "default actors, task prefers one lane", true,
      { n in
        let a = DefaultPinger(), b = DefaultPonger()
        blockOn(preferring: laneA) { await a.run(n, b) }
      }, 1
    ),
  ]
  variants += references.taskRows
  var out: [(String, W9Result)] = []
  for v in variants {
    let n = max(calls / v.divisor, 100)
    v.run(max(n / 10, 100))  // warm-up
    var ns: [Double] = []
    var jobs: [Double] = []
    var cpu: [Double] = []
    for _ in 0..<rounds {
      let j0 = laneJobs(pool)
      let c0 = processCPUNanoseconds()
      let t0 = now()
      v.run(n)
      ns.append(Double(now() - t0) / Double(n))
      cpu.append(Double(processCPUNanoseconds() - c0) / Double(n))
      jobs.append(Double(laneJobs(pool) - j0) / Double(n))
    }
    out.append(
      (
        v.name,
        W9Result(
          nsPerCall: median(ns), laneJobsPerCall: v.usesLanes ? median(jobs) : nil, cpuNsPerCall: median(cpu)
        )
      ))
  }
  return out
}

/// CPU time of the whole process (every thread, user + system), in nanoseconds.
func processCPUNanoseconds() -> UInt64 {
  var ts = timespec()
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts)
  return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
}

/// "LanePool as default executor" needs a process of its own (the default executor is
/// chosen once per process): this re-runs the bench binary with
/// `--w9-default-executor-child`, which installs LanePool first thing and runs the
/// default-actor ping-pong there.
func defaultExecutorPingPong(calls: Int, rounds: Int) -> W9Result? {
  guard
    let f = childFigures(
      ["--w9-default-executor-child", "\(calls)", "\(rounds)"], marker: "W9CHILD",
      what: "W9: the default-executor child", count: 3)
  else { return nil }
  return W9Result(nsPerCall: f[0], laneJobsPerCall: f[1], cpuNsPerCall: f[2])
}

/// Runs this binary again with `arguments` (a workload that needs a process of its own)
/// and returns the `count` numbers on the line of its output that starts with `marker`;
/// nil, with the child's output on stderr, if it failed.
func childFigures(_ arguments: [String], marker: String, what: String, count: Int) -> [Double]? {
  let p = Process()
  p.executableURL = URL(fileURLWithPath: "/proc/self/exe")
  p.arguments = arguments
  let pipe = Pipe()
  p.standardOutput = pipe
  do { try p.run() } catch { return nil }
  let out = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
  p.waitUntilExit()
  guard p.terminationStatus == 0,
    let line = out.split(separator: "\n").first(where: { $0.hasPrefix(marker + " ") })
  else {
    FileHandle.standardError.write(Data("\(what) failed:\n\(out)\n".utf8))
    return nil
  }
  let f = line.split(separator: " ").dropFirst().compactMap { Double($0) }
  return f.count == count ? f : nil
}

/// The child's side: LanePool is already the default executor (main.swift installs it
/// before anything else when it sees the flag).
func defaultExecutorChild(calls: Int, rounds: Int) -> Never {
  let pool = LanePool.default
  // Check that tasks really run on lanes, of the band their priority names.
  let onLane = DispatchSemaphore(value: 0)
  nonisolated(unsafe) var band: QoS? = nil
  Task(priority: .utility) {
    band = Lane.current?.qos
    onLane.signal()
  }
  onLane.wait()
  guard band == .utility else {
    print("W9CHILD-ERROR a Task(priority: .utility) ran on \(band.map { "\($0)" } ?? "no lane")")
    exit(1)
  }
  let run = { (n: Int) in
    let a = DefaultPinger(), b = DefaultPonger()
    blockOn { await a.run(n, b) }
  }
  run(max(calls / 10, 100))
  var ns: [Double] = []
  var jobs: [Double] = []
  var cpu: [Double] = []
  for _ in 0..<rounds {
    let j0 = laneJobs(pool)
    let c0 = processCPUNanoseconds()
    let t0 = now()
    run(calls)
    ns.append(Double(now() - t0) / Double(calls))
    cpu.append(Double(processCPUNanoseconds() - c0) / Double(calls))
    jobs.append(Double(laneJobs(pool) - j0) / Double(calls))
  }
  print("W9CHILD \(median(ns)) \(median(jobs)) \(median(cpu))")
  exit(0)
}
