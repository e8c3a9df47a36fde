// lanepool-bench: LanePool side by side with GCD and Swift's default executor, in one
// process, on the same workloads. Run: swift run -c release lanepool-bench
import CLanePool
import Dispatch
import Foundation
import LanePool
import LanePoolServer

// W9's "LanePool as default executor" row runs in a child process of its own: the
// default executor must be installed before anything else touches concurrency.
if CommandLine.arguments.count == 4, CommandLine.arguments[1] == "--w9-default-executor-child" {
  try LanePool.installAsDefaultExecutor()
  defaultExecutorChild(calls: Int(CommandLine.arguments[2])!, rounds: Int(CommandLine.arguments[3])!)
}

struct Options {
  var quick = false
  var tasks = 1_000_000
  var rounds = 5
  var latencySamples = 20_000
  var probes = 2_000
  var fifoTasks = 400_000
  var json: String? = nil
  var workloads: Set<String> = ["w1", "w2", "w3", "w4", "w5", "w6", "w7", "w8", "w9", "floor"]
  var syncCalls = 200_000
  var pingPongCalls = 200_000
  var compareSpin = false
  var compareMetrics = false

  static func parse(_ args: [String]) -> Options {
    var o = Options()
    var it = args.dropFirst().makeIterator()
    while let a = it.next() {
      switch a {
      case "--quick":
        o.quick = true
        o.tasks = 100_000
        o.rounds = 3
        o.latencySamples = 2_000
        o.probes = 300
        o.fifoTasks = 40_000
        o.syncCalls = 20_000
        o.pingPongCalls = 20_000
      case "--tasks": o.tasks = Int(it.next() ?? "") ?? o.tasks
      case "--rounds": o.rounds = max(1, Int(it.next() ?? "") ?? o.rounds)
      case "--probes": o.probes = max(10, Int(it.next() ?? "") ?? o.probes)
      case "--json": o.json = it.next()
      case "--workloads": o.workloads = Set((it.next() ?? "").split(separator: ",").map(String.init))
      case "--compare-spin": o.compareSpin = true
      case "--compare-metrics": o.compareMetrics = true
      case "-h", "--help":
        print(
          """
          usage: lanepool-bench [--quick] [--workloads w1,w2,w3,w4,w5,w6,w7,w8,w9,floor] [--json FILE]
                                [--tasks N] [--rounds N] [--probes N] [--compare-spin] [--compare-metrics]
          """)
        exit(0)
      default:
        FileHandle.standardError.write(Data("unknown option \(a)\n".utf8))
        exit(2)
      }
    }
    return o
  }
}

let options = Options.parse(CommandLine.arguments)
let run = options.workloads

func shell(_ cmd: String) -> String {
  let p = Process()
  p.executableURL = URL(fileURLWithPath: "/bin/sh")
  p.arguments = ["-c", cmd]
  let pipe = Pipe()
  p.standardOutput = pipe
  try? p.run()
  p.waitUntilExit()
  return String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    .trimmingCharacters(in: .whitespacesAndNewlines)
}

func pad(_ s: String, _ n: Int) -> String { s.count >= n ? s : s + String(repeating: " ", count: n - s.count) }
func row(_ cells: [String], _ widths: [Int]) -> String {
  "| " + zip(cells, widths).map { pad($0, $1) }.joined(separator: " | ") + " |"
}
func header(_ cells: [String], _ widths: [Int]) {
  print(row(cells, widths))
  print("|" + widths.map { String(repeating: "-", count: $0 + 2) }.joined(separator: "|") + "|")
}
func f1(_ x: Double) -> String { String(format: "%.1f", x) }
func ratio(_ x: Double, _ base: Double) -> String { String(format: "%.2fx", x / base) }
func mps(_ x: Double) -> String { String(format: "%.2fM/s", x / 1e6) }

// Start every pool now: they are lazy globals, and W5 counts threads created mid-run.
_ = (lanePool.name, cPool, yyPools.count)
var subjects = allSubjects
let uncappedPool: OpaquePointer? = options.compareSpin ? makeCPool("benchu", maxSpinning: LANEPOOL_SPIN_UNLIMITED) : nil
let noSpinPool: OpaquePointer? = options.compareSpin ? makeCPool("benchn", spin: false) : nil
let fixedSpinPool: OpaquePointer? = options.compareSpin ? makeCPool("benchf", fixedSpin: true) : nil
for (name, p) in [("C fn, spin uncapped", uncappedPool), ("C fn, no spin", noSpinPool), ("C fn, fixed spin", fixedSpinPool)] {
  guard let p else { continue }
  subjects.append(
    Subject(
      name: name, submitMany: { n, q, c in cSubmitMany(p, n, q, c) },
      probe: { qos, slot in
        var lane: OpaquePointer?
        _ = lanepool_next_lane(p, qos.c, &lane)
        _ = lanepool_lane_async(lane, cProbe, UnsafeMutableRawPointer(slot))
      },
      run: laneC.run, serialLanes: true))
}
// --compare-metrics: the same pool shape, with LanePoolServer's collector sampling it
// every millisecond (swift-metrics' default no-op backend: LanePool's side of the cost).
var metricsTask: Task<Void, any Error>? = nil
if options.compareMetrics {
  let metered = try LanePool(name: "benchm", lanesPerBand: lanesPerBand, policies: benchPolicies)
  let collector = LanePoolMetrics(pool: metered, interval: .milliseconds(1))
  metricsTask = Task.detached { try await collector.run() }
  subjects.append(
    Subject(
      name: "Swift + metrics 1 ms",
      submitMany: { n, qos, c in for _ in 0..<n { try! metered.queue(for: qos).async { c.tick() } } },
      probe: { qos, slot in
        let bits = UInt(bitPattern: slot)
        try! metered.queue(for: qos).async { stamp(bits) }
      },
      run: { qos, work in try! metered.queue(for: qos).async(work) }, serialLanes: true))
}
let base = gcdYY.name
var json: [String: Any] = [:]

let machine = "nproc \(shell("nproc")), kernel \(shell("uname -r")), \(shell("uname -m"))"
print("lanepool-bench: \(machine); \(lanesPerBand) lanes per band / YY queues per QoS")
print("ratios are LanePool (or any subject) / \(base); for latencies lower is better")
json["machine"] = machine
json["lanes_per_band"] = lanesPerBand
json["quick"] = options.quick

// MARK: W1, W2

for (key, producers) in [("w1", 1), ("w2", 2)] where run.contains(key) {
  let per = options.tasks / producers
  for s in subjects { _ = throughput(s, producers: producers, perProducer: max(per / 10, 1000)) }  // warm-up
  var samples: [String: [Double]] = [:]
  for _ in 0..<options.rounds {
    for s in subjects { samples[s.name, default: []].append(throughput(s, producers: producers, perProducer: per)) }
  }
  let med = samples.mapValues(median)
  print("")
  print("\(key.uppercased()) throughput: \(producers) producer(s) x \(per) tiny tasks to userInitiated, round-robin; median of \(options.rounds) after a warm-up")
  let w = [22, 12, 10, 22]
  header(["subject", "tasks/s", "vs GCD YY", "all rounds (M/s)"], w)
  for s in subjects {
    print(row([s.name, mps(med[s.name]!), ratio(med[s.name]!, med[base]!), samples[s.name]!.map { String(format: "%.2f", $0 / 1e6) }.joined(separator: " ")], w))
  }
  json[key] = Dictionary(uniqueKeysWithValues: subjects.map { ($0.name, ["median_tasks_per_s": med[$0.name]!, "rounds": samples[$0.name]!, "ratio_vs_gcd_yy": med[$0.name]! / med[base]!]) })
}

// MARK: W3 and the floor

if run.contains("floor") {
  let cross = conditionVariableFloor(samples: options.latencySamples, sameCore: false)
  let same = conditionVariableFloor(samples: options.latencySamples, sameCore: true)
  print("")
  print("Platform floor: raw pthread condition-variable wake, \(options.latencySamples) samples 20 us apart (us)")
  let w = [22, 8, 8, 8]
  header(["threads", "p50", "p99", "p99.9"], w)
  print(row(["waiter and waker: 2 cores", f1(cross.p50), f1(cross.p99), f1(cross.p999)], w))
  print(row(["waiter and waker: 1 core", f1(same.p50), f1(same.p99), f1(same.p999)], w))
  json["floor"] = ["cross_core": ["p50_us": cross.p50, "p99_us": cross.p99, "p999_us": cross.p999], "same_core": ["p50_us": same.p50, "p99_us": same.p99, "p999_us": same.p999]]
}

if run.contains("w3") {
  var res: [String: Percentiles] = [:]
  for s in subjects { _ = wakeLatency(s, samples: 500) }  // warm-up
  for s in subjects { res[s.name] = wakeLatency(s, samples: options.latencySamples) }
  print("")
  print("W3 wake latency: \(options.latencySamples) samples of submit -> start, 20 us apart, at most 64 in flight, userInitiated (us)")
  let w = [22, 8, 8, 8, 12, 12]
  header(["subject", "p50", "p99", "p99.9", "p50 vs YY", "p99 vs YY"], w)
  for s in subjects {
    let r = res[s.name]!
    print(row([s.name, f1(r.p50), f1(r.p99), f1(r.p999), ratio(r.p50, res[base]!.p50), ratio(r.p99, res[base]!.p99)], w))
  }
  json["w3"] = Dictionary(uniqueKeysWithValues: subjects.map { ($0.name, ["p50_us": res[$0.name]!.p50, "p99_us": res[$0.name]!.p99, "p999_us": res[$0.name]!.p999]) })
}

// MARK: W4

if run.contains("w4") {
  // The same table without the EEVDF slice (what kernels before 6.12 get), side by side.
  var ui = BandPolicy.default(for: .userInteractive)
  ui.slice = nil
  var noSlicePolicies = benchPolicies
  noSlicePolicies[.userInteractive] = ui
  let noSlicePool = try LanePool(name: "bench-ns", lanesPerBand: lanesPerBand, policies: noSlicePolicies)
  let noSlice = Subject(
    name: "LanePool, no slice", submitMany: { _, _, _ in },
    probe: { qos, slot in
      let bits = UInt(bitPattern: slot)
      try! noSlicePool.queue(for: qos).async { stamp(bits) }
    },
    run: { qos, work in try! noSlicePool.queue(for: qos).async(work) }, serialLanes: true)
  let w4Subjects = [gcdYY, gcdGlobal, swiftTask, laneSwift, noSlice]
  var res: [String: IsolationResult] = [:]
  for s in w4Subjects { res[s.name] = priorityIsolation(s, probes: options.probes) }
  try noSlicePool.shutdown(discardingQueued: false)
  print("")
  print("W4 priority isolation: \(options.probes) userInteractive probes 1 ms apart, submit -> start (us); loaded: the background")
  print("band kept saturated by 2 ms CPU-bound tasks, \(4 * lanesPerBand) queued; bg/s: background tasks done per second (max \(lanesPerBand * 500))")
  let w = [22, 9, 9, 10, 10, 13, 12, 6]
  header(["subject", "idle p50", "idle p99", "load p50", "load p99", "load/idle p99", "p99 vs YY", "bg/s"], w)
  for s in w4Subjects {
    let r = res[s.name]!
    print(row([s.name, f1(r.idle.p50), f1(r.idle.p99), f1(r.loaded.p50), f1(r.loaded.p99), ratio(r.loaded.p99, r.idle.p99), ratio(r.loaded.p99, res[base]!.loaded.p99), String(format: "%.0f", r.backgroundTasksPerSecond)], w))
  }
  json["w4"] = Dictionary(uniqueKeysWithValues: w4Subjects.map { s in
    let r = res[s.name]!
    return (s.name, ["idle_p50_us": r.idle.p50, "idle_p99_us": r.idle.p99, "loaded_p50_us": r.loaded.p50, "loaded_p99_us": r.loaded.p99, "background_per_s": r.backgroundTasksPerSecond])
  })
}

// MARK: W5

if run.contains("w5") {
  var res: [String: BlockingResult] = [:]
  for s in subjects { res[s.name] = blocking(s) }
  print("")
  print("W5 blocking work: 256 tasks that each sleep 20 ms at utility")
  let w = [22, 14, 10]
  header(["subject", "extra threads", "wall (s)"], w)
  for s in subjects {
    let r = res[s.name]!
    print(row([s.name, "\(r.extraThreads)", String(format: "%.2f", r.wallSeconds)], w))
  }
  json["w5"] = Dictionary(uniqueKeysWithValues: subjects.map { ($0.name, ["extra_threads": res[$0.name]!.extraThreads, "wall_s": res[$0.name]!.wallSeconds]) })
}

// MARK: W6

var fifoFailed = false
if run.contains("w6") {
  print("")
  print("W6 per-lane FIFO: \(options.fifoTasks) numbered tasks round-robin over the serial lanes/queues")
  let w = [22, 30]
  header(["subject", "result"], w)
  var out: [String: Any] = [:]
  for s in [gcdYY, laneSwift] {
    let r = fifo(s, tasks: options.fifoTasks)
    let ok = r.violations == 0 && r.ran == options.fifoTasks
    fifoFailed = fifoFailed || !ok
    print(row([s.name, ok ? "ok (\(r.ran) tasks in order)" : "FAILED: \(r.violations) out of order, \(r.ran) ran"], w))
    out[s.name] = ["out_of_order": r.violations, "ran": r.ran]
  }
  print(row(["GCD global queue", "n/a (concurrent queue)"], w))
  print(row(["Task(priority:)", "n/a (no lanes)"], w))
  json["w6"] = out
}

// MARK: W7

if run.contains("w7") {
  var res: [String: Double] = [:]
  for s in subjects { res[s.name] = idleCost(s) }
  print("")
  print("W7 idle cost: after a burst of 100,000 tasks, the process idles 1 s: CPU its threads used (% of one core;")
  print("every pool in the process counts, LanePool's default pool and the bench's five-band pools included)")
  let w = [22, 10]
  header(["after a burst of", "CPU %"], w)
  for s in subjects { print(row([s.name, String(format: "%.3f", res[s.name]!)], w)) }
  json["w7"] = res.mapValues { ["idle_cpu_percent": $0] }
}

// MARK: W8, W9

if run.contains("w8") {
  let res = runW8(calls: options.syncCalls, rounds: options.rounds)
  let gcd = res["GCD serial queue .sync"]!
  print("")
  print("W8 sync round trip: \(options.syncCalls) calls that add 1 to a plain counter, median of \(options.rounds) rounds (ns per call);")
  print("idle: one caller, the lane parked; contended: two threads sync onto the same lane / queue at once")
  let w = [26, 10, 12, 14, 16]
  header(["subject", "idle ns", "idle vs GCD", "contended ns", "contended vs GCD"], w)
  for name in ["GCD serial queue .sync", "LanePool lane.sync", "LanePool C lane_sync", "LanePool, lane thread"] {
    let r = res[name]!
    print(row([name, f1(r.idleNsPerCall), ratio(r.idleNsPerCall, gcd.idleNsPerCall), f1(r.contendedNsPerCall), ratio(r.contendedNsPerCall, gcd.contendedNsPerCall)], w))
  }
  json["w8"] = Dictionary(uniqueKeysWithValues: res.map { ($0.key, ["idle_ns_per_call": $0.value.idleNsPerCall, "contended_ns_per_call": $0.value.contendedNsPerCall]) })
}

if run.contains("w9") {
  var res = runW9(calls: options.pingPongCalls, rounds: options.rounds)
  if let child = defaultExecutorPingPong(calls: options.pingPongCalls, rounds: options.rounds) {
    res.append(("LanePool as default executor", child))
  }
  let base9 = res.first { $0.0 == "default executor" }!.1.nsPerCall
  print("")
  print("W9 actor ping-pong: \(options.pingPongCalls) awaited calls from one actor to another, median of \(options.rounds) rounds")
  let w = [40, 10, 18, 16]
  header(["variant", "ns/call", "vs default executor", "lane jobs/call"], w)
  for (name, r) in res {
    print(row([name, f1(r.nsPerCall), ratio(r.nsPerCall, base9), r.laneJobsPerCall.map { String(format: "%.2f", $0) } ?? "-"], w))
  }
  json["w9"] = Dictionary(uniqueKeysWithValues: res.map { ($0.0, ["ns_per_call": $0.1.nsPerCall, "lane_jobs_per_call": $0.1.laneJobsPerCall ?? -1]) })
}

if let path = options.json {
  let data = try JSONSerialization.data(withJSONObject: json, options: [.prettyPrinted, .sortedKeys])
  try data.write(to: URL(fileURLWithPath: path))
  print("\nwrote \(path)")
}

metricsTask?.cancel()
try lanePool.shutdown(discardingQueued: false)
_ = lanepool_destroy(cPool)
if let p = uncappedPool { _ = lanepool_destroy(p) }
if let p = noSpinPool { _ = lanepool_destroy(p) }
if let p = fixedSpinPool { _ = lanepool_destroy(p) }
if fifoFailed { print("W6 FAILED: a lane ran tasks out of order or lost some") }
exit(fifoFailed ? 1 : 0)
