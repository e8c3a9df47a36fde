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
  var json: String? = nil

  static func parse(_ args: [String]) -> Options {
    var o = Options()
    var it = args.dropFirst().makeIterator()
    while let a = it.next() {
      switch a {
      case "--quick":
        o.tasks = 100_000
        o.rounds = 3
        o.fifoTasks = 40_000
      case "--tasks": o.tasks = Int(it.next() ?? "") ?? o.tasks
      case "--rounds": o.rounds = max(1, Int(it.next() ?? "") ?? o.rounds)
      case "--json": o.json = it.next()
      case "-h", "--help":
        print("usage: lanepool-bench [--quick] [--tasks N] [--rounds N] [--json FILE]")
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
let pool = try LanePool(name: "bench", lanesPerBand: lanes)
nonisolated(unsafe) let cPool: OpaquePointer = {
  var cfg = lanepool_config_t()
  lanepool_config_init(&cfg)
  cfg.lanes_per_band = UInt32(lanes)
  var p: OpaquePointer?
  let rc = "benchc".withCString { name in
    cfg.name = name
    return lanepool_create(&cfg, &p)
  }
  guard rc == 0, let p else { fatalError("lanepool_create: \(rc)") }
  return p
}()

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
  Subject(name: "LanePool C fn") { n, c in
    // A pool driven through the C API only: round-robin lane, function pointer task.
    let raw = Unmanaged.passUnretained(c).toOpaque()
    for _ in 0..<n {
      var lane: OpaquePointer?
      _ = lanepool_next_lane(cPool, LANEPOOL_QOS_USER_INITIATED, &lane)
      if lanepool_lane_async(lane, cTick, raw) != 0 { fatalError("C submit refused") }
    }
  },
]

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

// MARK: - Run

let machine = "nproc \(shell("nproc")), kernel \(shell("uname -r")), \(shell("uname -m"))"
print("lanepool-bench: \(machine); \(lanes) lanes per band / YY queues; W1 \(options.tasks) tasks, median of \(options.rounds) after a warm-up")

var w1: [String: Double] = [:]
for s in subjects { _ = throughput(s, tasks: max(options.tasks / 10, 1000)) }  // warm-up
var samples: [String: [Double]] = [:]
for _ in 0..<options.rounds {
  for s in subjects { samples[s.name, default: []].append(throughput(s, tasks: options.tasks)) }
}
for s in subjects { w1[s.name] = median(samples[s.name]!) }

var fifoResults: [String: (Int, Int)] = [:]
for name in ["GCD YY pool", "LanePool Swift"] {
  let r = fifo(name, tasks: options.fifoTasks)
  fifoResults[name] = r
}

let base = w1["GCD YY pool"]!
func fmt(_ x: Double) -> String { String(format: "%.2fM/s", x / 1e6) }
func pad(_ s: String, _ n: Int) -> String { s.count >= n ? s : s + String(repeating: " ", count: n - s.count) }

print("")
print("| subject        | W1 1-producer throughput | vs GCD YY pool | W6 per-lane FIFO |")
print("|----------------|--------------------------|----------------|------------------|")
for s in subjects {
  let f = fifoResults[s.name].map { $0.0 == 0 && $0.1 == options.fifoTasks ? "ok (\($0.1) tasks)" : "FAILED: \($0.0) out of order, \($0.1) ran" } ?? "(same lanes as Swift)"
  print("| \(pad(s.name, 14)) | \(pad(fmt(w1[s.name]!), 24)) | \(pad(String(format: "%.2fx", w1[s.name]! / base), 14)) | \(pad(f, 16)) |")
}

if let path = options.json {
  var obj: [String: Any] = ["machine": machine, "tasks": options.tasks, "rounds": options.rounds]
  var rows: [[String: Any]] = []
  for s in subjects {
    var row: [String: Any] = ["subject": s.name, "w1_tasks_per_s": w1[s.name]!, "w1_ratio_vs_gcd": w1[s.name]! / base]
    if let f = fifoResults[s.name] { row["w6_out_of_order"] = f.0; row["w6_ran"] = f.1 }
    rows.append(row)
  }
  obj["results"] = rows
  let data = try JSONSerialization.data(withJSONObject: obj, options: [.prettyPrinted, .sortedKeys])
  try data.write(to: URL(fileURLWithPath: path))
}

try pool.shutdown(discardingQueued: false)
_ = lanepool_destroy(cPool)
let failed = fifoResults.values.contains { $0.0 != 0 || $0.1 != options.fifoTasks }
exit(failed ? 1 : 0)
