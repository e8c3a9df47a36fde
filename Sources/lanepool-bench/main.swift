// lanepool-bench: LanePool side by side with a YYDispatchQueuePool port over GCD, in
// one process, on the same workloads. Run: swift run -c release lanepool-bench
import CLanePool
import Dispatch
import Foundation
import LanePool
import Synchronization

// MARK: - Options

struct Options {
  var tasks = 1_000_000
  var rounds = 5
  var fifoTasks = 400_000
  var probes = 2_000
  var json: String? = nil
  var workloads: Set<String> = ["w1", "w4", "w6"]

  static func parse(_ args: [String]) -> Options {
    var o = Options()
    var it = args.dropFirst().makeIterator()
    while let a = it.next() {
      switch a {
      case "--quick":
        o.tasks = 100_000
        o.rounds = 3
        o.fifoTasks = 40_000
        o.probes = 300
      case "--tasks": o.tasks = Int(it.next() ?? "") ?? o.tasks
      case "--rounds": o.rounds = max(1, Int(it.next() ?? "") ?? o.rounds)
      case "--json": o.json = it.next()
      case "--workloads": o.workloads = Set((it.next() ?? "").split(separator: ",").map(String.init))
      case "--compare-spin": break  // read where the extra subject is built
      case "--probes": o.probes = max(10, Int(it.next() ?? "") ?? o.probes)
      case "-h", "--help":
        print("usage: lanepool-bench [--quick] [--tasks N] [--rounds N] [--json FILE] [--compare-spin]")
        exit(0)
      default:
        FileHandle.standardError.write("unknown option \(a)\n".data(using: .utf8)!)
        exit(2)
      }
    }
    return o
  }
}

let options = Options.parse(CommandLine.arguments)

// MARK: - Helpers

func now() -> UInt64 { DispatchTime.now().uptimeNanoseconds }

func median(_ xs: [Double]) -> Double {
  let s = xs.sorted()
  return s.count % 2 == 1 ? s[s.count / 2] : (s[s.count / 2 - 1] + s[s.count / 2]) / 2
}

func shell(_ cmd: String) -> String {
  let p = Process()
  p.executableURL = URL(fileURLWithPath: "/bin/sh")
  p.arguments = ["-c", cmd]
  let pipe = Pipe()
  p.standardOutput = pipe
  try? p.run()
  p.waitUntilExit()
  let data = pipe.fileHandleForReading.readDataToEndOfFile()
  return String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
}

/// Counts finished tasks; the one that finishes the last signals the waiter.
final class Completion: Sendable {
  let done = Atomic<Int>(0)
  let target: Int
  let sem = DispatchSemaphore(value: 0)
  init(target: Int) { self.target = target }
  @inline(__always) func tick() {
    if done.wrappingAdd(1, ordering: .acquiringAndReleasing).newValue == target { sem.signal() }
  }
}

// For the C function-pointer subject: a plain C-callable function, context = Completion.
let cTick: @convention(c) (UnsafeMutableRawPointer?) -> Void = { ctx in
  Unmanaged<Completion>.fromOpaque(ctx!).takeUnretainedValue().tick()
}

// MARK: - Subjects

let lanes = YYDispatchQueuePool.defaultQueueCount()
let yy = YYDispatchQueuePool(name: "bench.yy", queueCount: lanes, qos: .userInitiated)
// Experiments behind docs/priorities.md (the defaults are the library's table):
//   LANEPOOL_BENCH_BG=idle|other|batch  scheduler of the background band
//   LANEPOOL_BENCH_UI_SLICE_US=N        EEVDF slice of userInteractive (0: none)
let benchPolicies: [QoS: BandPolicy] = {
  let env = ProcessInfo.processInfo.environment
  var p: [QoS: BandPolicy] = [:]
  if let sched = env["LANEPOOL_BENCH_BG"] {
    var bg = BandPolicy.default(for: .background)
    bg.scheduler = sched == "idle" ? .idle : sched == "other" ? .other : .batch
    p[.background] = bg
  }
  if let us = env["LANEPOOL_BENCH_UI_SLICE_US"].flatMap(Int.init) {
    var ui = BandPolicy.default(for: .userInteractive)
    ui.slice = us == 0 ? nil : .microseconds(us)
    p[.userInteractive] = ui
  }
  return p
}()
let pool = try LanePool(name: "bench", lanesPerBand: lanes, policies: benchPolicies)
func makeCPool(_ name: String, maxSpinning: UInt32 = 0) -> OpaquePointer {
  var cfg = lanepool_config_t()
  lanepool_config_init(&cfg)
  cfg.lanes_per_band = UInt32(lanes)
  cfg.max_spinning_lanes = maxSpinning
  var p: OpaquePointer?
  let rc = name.withCString { name in
    cfg.name = name
    return lanepool_create(&cfg, &p)
  }
  guard rc == 0, let p else { fatalError("lanepool_create: \(rc)") }
  return p
}
nonisolated(unsafe) let cPool = makeCPool("benchc")
// Only with --compare-spin: the same engine with no cap on spinning lanes.
nonisolated(unsafe) let cPoolUnlimited: OpaquePointer? =
  CommandLine.arguments.contains("--compare-spin") ? makeCPool("benchu", maxSpinning: LANEPOOL_SPIN_UNLIMITED) : nil

@MainActor func cSubmit(_ p: OpaquePointer, _ n: Int, _ c: Completion) {
  let raw = Unmanaged.passUnretained(c).toOpaque()
  for _ in 0..<n {
    var lane: OpaquePointer?
    _ = lanepool_next_lane(p, LANEPOOL_QOS_USER_INITIATED, &lane)
    if lanepool_lane_async(lane, cTick, raw) != 0 { fatalError("C submit refused") }
  }
}

struct Subject {
  let name: String
  /// Submits `n` tasks that each call `c.tick()`.
  let submit: (_ n: Int, _ c: Completion) -> Void
}

let subjects: [Subject] = [
  Subject(name: "GCD YY pool") { n, c in
    for _ in 0..<n { yy.queue().async { c.tick() } }
  },
  Subject(name: "LanePool Swift") { n, c in
    for _ in 0..<n { try! pool.queue(for: .userInitiated).async { c.tick() } }
  },
  // A pool driven through the C API only: round-robin lane, function pointer task.
  Subject(name: "LanePool C fn") { n, c in cSubmit(cPool, n, c) },
] + (cPoolUnlimited.map { p in [Subject(name: "C fn, spin uncapped") { n, c in cSubmit(p, n, c) }] } ?? [])

// MARK: - W1: throughput, one producer

func throughput(_ s: Subject, tasks: Int) -> Double {
  let c = Completion(target: tasks)
  let t0 = now()
  s.submit(tasks, c)
  c.sem.wait()
  let t1 = now()
  return Double(tasks) / (Double(t1 - t0) / 1e9)
}

// MARK: - W6: per-lane FIFO

/// Submits numbered tasks round-robin; each lane checks its numbers only increase.
/// Returns the number of tasks that ran out of order (must be 0) and how many ran.
final class FifoCheck: @unchecked Sendable {
  // @unchecked: slot i is touched only by tasks of queue i, which run one at a time.
  let last: UnsafeMutablePointer<Int>
  let violations = Atomic<Int>(0)
  let ran = Atomic<Int>(0)
  init(queues: Int) {
    last = .allocate(capacity: queues)
    last.initialize(repeating: -1, count: queues)
  }
  deinit { last.deallocate() }
  func check(queue: Int, seq: Int) {
    if seq <= last[queue] { violations.add(1, ordering: .relaxed) }
    last[queue] = seq
    ran.add(1, ordering: .relaxed)
  }
}

func fifo(_ name: String, tasks: Int) -> (violations: Int, ran: Int) {
  let check = FifoCheck(queues: lanes)
  let c = Completion(target: tasks)
  for seq in 0..<tasks {
    switch name {
    case "GCD YY pool":
      let q = yy.queue()
      let qi = yy.queues.firstIndex { $0 === q }!
      q.async {
        check.check(queue: qi, seq: seq)
        c.tick()
      }
    default:
      let lane = pool.queue(for: .userInitiated)
      let qi = lane.index
      try! lane.async {
        check.check(queue: qi, seq: seq)
        c.tick()
      }
    }
  }
  c.sem.wait()
  return (check.violations.load(ordering: .relaxed), check.ran.load(ordering: .relaxed))
}

// MARK: - W4: priority isolation

/// Busy-spins for `ns` nanoseconds of wall time: the CPU-bound background work.
@inline(never) func spin(ns: UInt64) {
  let end = now() + ns
  var x: UInt64 = 0
  while now() < end { x &+= 1 }
  if x == 42 { print("") }
}

/// Probe latencies (submit -> start), written by one task each.
final class Samples: @unchecked Sendable {
  // @unchecked: slot i is written by probe task i only, read after all have run.
  let ns: UnsafeMutablePointer<UInt64>
  let count: Int
  init(count: Int) {
    self.count = count
    ns = .allocate(capacity: count)
    ns.initialize(repeating: 0, count: count)
  }
  deinit { ns.deallocate() }
  func percentile(_ p: Double) -> Double {
    let s = (0..<count).map { ns[$0] }.sorted()
    return Double(s[min(count - 1, Int(Double(count) * p))]) / 1000
  }
}

struct PrioritySubject: Sendable {
  let name: String
  /// Submits one userInteractive probe task.
  let probe: @Sendable (@escaping @Sendable () -> Void) -> Void
  /// Submits one background task.
  let background: @Sendable (@escaping @Sendable () -> Void) -> Void
}

// The same table without the EEVDF slice (what kernels before 6.12 get): the
// before/after of that lever, side by side in one run.
let noSlicePool: LanePool = {
  var ui = BandPolicy.default(for: .userInteractive)
  ui.slice = nil
  var p = benchPolicies
  p[.userInteractive] = ui
  return try! LanePool(name: "bench-ns", lanesPerBand: lanes, policies: p)
}()

let yyInteractive = YYDispatchQueuePool(name: "bench.yy.ui", queueCount: lanes, qos: .userInteractive)
let yyBackground = YYDispatchQueuePool(name: "bench.yy.bg", queueCount: lanes, qos: .background)

let prioritySubjects: [PrioritySubject] = [
  PrioritySubject(
    name: "GCD YY pool", probe: { yyInteractive.queue().async(execute: $0) },
    background: { yyBackground.queue().async(execute: $0) }),
  PrioritySubject(
    name: "LanePool Swift", probe: { try! pool.queue(for: .userInteractive).async($0) },
    background: { try! pool.queue(for: .background).async($0) }),
  PrioritySubject(
    name: "LanePool, no slice", probe: { try! noSlicePool.queue(for: .userInteractive).async($0) },
    background: { try! noSlicePool.queue(for: .background).async($0) }),
]

/// Keeps `4 x lanes` background tasks of 2 ms queued while `probes` userInteractive
/// tasks are submitted 1 ms apart; returns the probes' submit -> start latencies.
func priorityIsolation(_ s: PrioritySubject, probes: Int, loaded: Bool) -> (Samples, bgPerSecond: Double) {
  let samples = Samples(count: probes)
  final class Load: Sendable {
    let running = Atomic<Bool>(true)
    let live = Atomic<Int>(0)
    let completed = Atomic<Int>(0)
  }
  let load = Load()
  if loaded {
    let chains = 4 * lanes
    load.live.store(chains, ordering: .relaxed)
    @Sendable func chain() {
      spin(ns: 2_000_000)
      load.completed.add(1, ordering: .relaxed)
      if load.running.load(ordering: .relaxed) {
        s.background(chain)
      } else {
        load.live.subtract(1, ordering: .relaxed)
      }
    }
    for _ in 0..<chains { s.background(chain) }
    usleep(20_000)  // let the load settle on every core
  }
  let done = Completion(target: probes)
  let bgBefore = load.completed.load(ordering: .relaxed)
  let start = now()
  for i in 0..<probes {
    let t0 = now()
    s.probe {
      samples.ns[i] = now() - t0
      done.tick()
    }
    usleep(1000)
  }
  done.sem.wait()
  let bgDone = load.completed.load(ordering: .relaxed) - bgBefore
  let seconds = Double(now() - start) / 1e9
  load.running.store(false, ordering: .relaxed)
  while load.live.load(ordering: .relaxed) > 0 { usleep(1000) }
  return (samples, Double(bgDone) / seconds)
}

// MARK: - Run

let machine = "nproc \(shell("nproc")), kernel \(shell("uname -r")), \(shell("uname -m"))"
print("lanepool-bench: \(machine); \(lanes) lanes per band / YY queues; W1 \(options.tasks) tasks, median of \(options.rounds) after a warm-up")

let run = options.workloads
func fmt(_ x: Double) -> String { String(format: "%.2fM/s", x / 1e6) }
func pad(_ s: String, _ n: Int) -> String { s.count >= n ? s : s + String(repeating: " ", count: n - s.count) }

var w1: [String: Double] = [:]
if run.contains("w1") {
  for s in subjects { _ = throughput(s, tasks: max(options.tasks / 10, 1000)) }  // warm-up
  var samples: [String: [Double]] = [:]
  for _ in 0..<options.rounds {
    for s in subjects { samples[s.name, default: []].append(throughput(s, tasks: options.tasks)) }
  }
  for s in subjects { w1[s.name] = median(samples[s.name]!) }
}

var fifoResults: [String: (Int, Int)] = [:]
if run.contains("w6") {
  for name in ["GCD YY pool", "LanePool Swift"] { fifoResults[name] = fifo(name, tasks: options.fifoTasks) }
}

var w4: [String: (idle50: Double, idle99: Double, load50: Double, load99: Double, bg: Double)] = [:]
if run.contains("w4") {
  for s in prioritySubjects {
    let idle = priorityIsolation(s, probes: options.probes, loaded: false).0
    let (loaded, bg) = priorityIsolation(s, probes: options.probes, loaded: true)
    w4[s.name] = (idle.percentile(0.5), idle.percentile(0.99), loaded.percentile(0.5), loaded.percentile(0.99), bg)
  }
}

let base = w1["GCD YY pool"] ?? .nan
if run.contains("w1") || run.contains("w6") {
  print("")
  print("| subject        | W1 1-producer throughput | vs GCD YY pool | W6 per-lane FIFO |")
  print("|----------------|--------------------------|----------------|------------------|")
  for s in subjects {
    let f = fifoResults[s.name].map { $0.0 == 0 && $0.1 == options.fifoTasks ? "ok (\($0.1) tasks)" : "FAILED: \($0.0) out of order, \($0.1) ran" } ?? (run.contains("w6") ? "(same lanes as Swift)" : "-")
    let t = w1[s.name].map { (fmt($0), String(format: "%.2fx", $0 / base)) } ?? ("-", "-")
    print("| \(pad(s.name, 14)) | \(pad(t.0, 24)) | \(pad(t.1, 14)) | \(pad(f, 16)) |")
  }
}

if run.contains("w4") {
  print("")
  print("W4 priority isolation: \(options.probes) userInteractive probes 1 ms apart, submit -> start (us);")
  print("loaded = background band kept saturated with 2 ms CPU-bound tasks, \(4 * lanes) queued")
  print("bg/s = 2 ms background tasks completed per second while loaded (\(lanes) cores: at most \(lanes * 500)/s)")
  print("| subject        | idle p50 | idle p99 | loaded p50 | loaded p99 | loaded p99 / idle p99 | loaded p99 vs GCD | bg/s  |")
  print("|----------------|----------|----------|------------|------------|-----------------------|-------------------|-------|")
  let gcdLoaded99 = w4["GCD YY pool"]!.load99
  for s in prioritySubjects {
    let r = w4[s.name]!
    func us(_ x: Double) -> String { String(format: "%.1f", x) }
    print("| \(pad(s.name, 14)) | \(pad(us(r.idle50), 8)) | \(pad(us(r.idle99), 8)) | \(pad(us(r.load50), 10)) | \(pad(us(r.load99), 10)) | \(pad(String(format: "%.2fx", r.load99 / r.idle99), 21)) | \(pad(String(format: "%.2fx", r.load99 / gcdLoaded99), 17)) | \(pad(String(format: "%.0f", r.bg), 5)) |")
  }
}

if let path = options.json {
  var obj: [String: Any] = ["machine": machine, "tasks": options.tasks, "rounds": options.rounds]
  var rows: [[String: Any]] = []
  for s in subjects {
    var row: [String: Any] = ["subject": s.name]
    if let t = w1[s.name] { row["w1_tasks_per_s"] = t; row["w1_ratio_vs_gcd"] = t / base }
    if let f = fifoResults[s.name] { row["w6_out_of_order"] = f.0; row["w6_ran"] = f.1 }
    if let r = w4[s.name] {
      row["w4_idle_p50_us"] = r.idle50; row["w4_idle_p99_us"] = r.idle99
      row["w4_loaded_p50_us"] = r.load50; row["w4_loaded_p99_us"] = r.load99
      row["w4_background_tasks_per_s"] = r.bg
    }
    rows.append(row)
  }
  obj["results"] = rows
  let data = try JSONSerialization.data(withJSONObject: obj, options: [.prettyPrinted, .sortedKeys])
  try data.write(to: URL(fileURLWithPath: path))
}

try pool.shutdown(discardingQueued: false)
try noSlicePool.shutdown(discardingQueued: false)
_ = lanepool_destroy(cPool)
if let p = cPoolUnlimited { _ = lanepool_destroy(p) }
let failed = fifoResults.values.contains { $0.0 != 0 || $0.1 != options.fifoTasks }
if failed { print("W6 FAILED: a lane ran tasks out of order or lost some") }
exit(failed ? 1 : 0)
