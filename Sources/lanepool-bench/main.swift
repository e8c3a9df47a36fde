// lanepool-bench: LanePool side by side with GCD and Swift's default executor, in one
// process, on the same workloads. Run: swift run -c release lanepool-bench
import CLanePool
import Dispatch
import Foundation
import LanePool
import LanePoolBenchSupport
import LanePoolServer

// W9's "LanePool as default executor" row runs in a child process of its own: the
// default executor must be installed before anything else touches concurrency.
if CommandLine.arguments.count == 4, CommandLine.arguments[1] == "--w9-default-executor-child" {
  try LanePool.installAsDefaultExecutor()
  defaultExecutorChild(calls: Int(CommandLine.arguments[2])!, rounds: Int(CommandLine.arguments[3])!)
}

// The fan-out rows' children (FanOut.swift): one executor per process.
if CommandLine.arguments.count == 5, CommandLine.arguments[1] == "--fanout-child" {
  fanOutChild(
    executor: CommandLine.arguments[2], rounds: Int(CommandLine.arguments[3])!,
    children: Int(CommandLine.arguments[4])!)
}

// Flags (Options.swift): an unknown flag or a bad value exits with the usage.
let options = Options(BenchCommand.parseOrExit())

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
/// A ratio with 3 significant digits or so (fractions of the limit bound are small).
func ratioValue(_ x: Double) -> String { String(format: x >= 10 ? "%.1f" : x >= 0.1 ? "%.2f" : "%.4f", x) }
func mps(_ x: Double) -> String { String(format: "%.2fM/s", x / 1e6) }

// Start every pool now: they are lazy globals, and W5 counts threads created mid-run.
_ = (lanePool.name, cPool, yyPools.count)
var subjects = allSubjects
let uncappedPool: OpaquePointer? = options.compareSpin ? makeCPool("benchu", maxSpinning: LANEPOOL_SPIN_UNLIMITED) : nil
let noSpinPool: OpaquePointer? = options.compareSpin ? makeCPool("benchn", spin: false) : nil
let fixedSpinPool: OpaquePointer? = options.compareSpin ? makeCPool("benchf", fixedSpin: true) : nil
for (name, p) in [
  ("C fn, spin uncapped", uncappedPool), ("C fn, no spin", noSpinPool), ("C fn, fixed spin", fixedSpinPool),
] {
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
/// --subjects: the chosen ones of `list`, in the option's order, after the base.
func chosen(_ list: [Subject]) -> [Subject] {
  guard let pieces = options.subjects else { return list }
  let known = list.map(\.name)
  // A name may hold a comma ("LanePool Swift, no capture"): the longest run of pieces that
  // names a subject wins.
  var names: [String] = []
  var i = 0
  while i < pieces.count {
    guard
      let j = (i..<pieces.count).reversed().first(where: {
        known.contains(pieces[i...$0].joined(separator: ", "))
      })
    else {
      FileHandle.standardError.write(
        "lanepool-bench: unknown subject '\(pieces[i])' (known: \(known.joined(separator: "; ")))\n".data(
          using: .utf8)!)
      exit(2)
    }
    names.append(pieces[i...j].joined(separator: ", "))
    i = j + 1
  }
  return [gcdYY] + names.filter { $0 != base }.map { n in list.first { $0.name == n }! }
}
let nproc = ProcessInfo.processInfo.activeProcessorCount
let machine = "nproc \(shell("nproc")), kernel \(shell("uname -r")), \(shell("uname -m"))"
print("lanepool-bench: \(machine); \(lanesPerBand) lanes per band / YY queues per QoS")
print("ratios are LanePool (or any subject) / \(base); for latencies lower is better")
print("latencies: HdrHistogram percentiles of nanosecond samples, 3 significant digits, shown in us")

var runs: [RunResult] = []
var ratios = RatioLog()
var fifoFailed = false

/// W3's table (and W3b's): p50 / p99 / p99.9 per subject and against the base, each
/// ratio logged under `workload`.
@MainActor func latencyTable(_ workload: String, _ subjects: [Subject], _ res: [String: Percentiles]) {
  let b = res[base]!
  let w = [26, 8, 8, 8, 12, 12, 14]
  header(["subject", "p50", "p99", "p99.9", "p50 vs YY", "p99 vs YY", "p99.9 vs YY"], w)
  for s in subjects {
    let r = res[s.name]!
    print(
      row(
        [s.name, f1(r.p50), f1(r.p99), f1(r.p999), ratio(r.p50, b.p50), ratio(r.p99, b.p99), ratio(r.p999, b.p999)], w
      ))
    ratios.add(workload, "p50", s.name, base: base, r.p50 / b.p50)
    ratios.add(workload, "p99", s.name, base: base, r.p99 / b.p99)
    ratios.add(workload, "p99.9", s.name, base: base, r.p999 / b.p999)
  }
}

for runIndex in 1...options.repeatCount {
  var result = RunResult(run: runIndex)
  if options.repeatCount > 1 {
    print("")
    print("=== run \(runIndex) of \(options.repeatCount) ===")
  }

  // MARK: limit

  if options.runs("limit") {
    let l = ringLimit(tasks: options.tasks, rounds: options.rounds)
    result.limit = l
    print("")
    print(
      "Limit: the bare ring (the core's ring.h), one thread, no sharing, no lane threads: \(options.tasks) tiny tasks")
    print(
      "pushed into a \(l.ringCapacity)-cell ring and popped (each one called), a full ring at a time; median of \(options.rounds)"
    )
    let w = [58, 12]
    header(["measure", "value"], w)
    print(row(["ns per push (CAS, two stores, publish)", String(format: "%.2f", l.pushNs)], w))
    print(row(["ns per pop (acquire load, the call, release store)", String(format: "%.2f", l.popNs)], w))
    print(row(["bound, 1 core: 1/(push+pop)", mps(l.oneCoreBound)], w))
    print(row(["bound, \(l.nproc) cores: nproc/(push+pop)", mps(l.allCoresBound)], w))
    print(row(["W1 bound, 1 producer: min(1/push, nproc/(push+pop))", mps(l.oneProducerBound)], w))
    print(row(["W2 bound, 2 producers: min(2/push, nproc/(push+pop))", mps(l.twoProducersBound)], w))
    if let ns = l.crossCoreNs, let b = l.crossCoreBound {
      print(row(["ns per task across two cores (pinned producer, consumer)", String(format: "%.2f", ns)], w))
      print(row(["cross-core bound, W1 and W2 on 2 cores: 1/that", mps(b)], w))
    }
  }

  // MARK: W1, W2

  for (key, producers) in [("w1", 1), ("w2", 2)] where options.runs(key) {
    let per = options.tasks / producers
    let subjects = chosen(subjects + [laneSwiftNoCapture])
    for s in subjects { _ = throughput(s, producers: producers, perProducer: max(per / 10, 1000)) }  // warm-up
    var samples: [String: [Double]] = [:]
    for _ in 0..<options.rounds {
      for s in subjects { samples[s.name, default: []].append(throughput(s, producers: producers, perProducer: per)) }
    }
    let med = samples.mapValues(median)
    let bound = result.limit?.bound(producers: producers)
    print("")
    print(
      "\(key.uppercased()) throughput: \(producers) producer(s) x \(per) tiny tasks to userInitiated, round-robin; median of \(options.rounds) after a warm-up"
    )
    print(
      "of bound: the median / the limit row's \(producers)-producer bound"
        + (bound.map { " (\(mps($0)))" } ?? " (no limit row in this run)"))
    let w = [26, 12, 10, 9, 22]
    header(["subject", "tasks/s", "vs GCD YY", "of bound", "all rounds (M/s)"], w)
    var out: [String: ThroughputResult] = [:]
    for s in subjects {
      let m = med[s.name]!
      let r = ThroughputResult(
        medianTasksPerS: m, rounds: samples[s.name]!, ratioVsGcdYY: m / med[base]!,
        fractionOfBound: bound.map { m / $0 })
      out[s.name] = r
      ratios.add(key, "tasks/s", s.name, base: base, r.ratioVsGcdYY)
      if let f = r.fractionOfBound { ratios.add(key, "tasks/s of bound", s.name, base: "limit bound", f) }
      print(
        row(
          [
            s.name, mps(m), ratio(m, med[base]!), r.fractionOfBound.map { String(format: "%.3f", $0) } ?? "-",
            r.rounds.map { String(format: "%.2f", $0 / 1e6) }.joined(separator: " "),
          ], w))
    }
    if let cross = result.limit?.crossCoreBound {
      print(
        "of the cross-core bound (\(mps(cross))): "
          + subjects.map { "\($0.name) " + String(format: "%.3f", med[$0.name]! / cross) }.joined(separator: ", "))
      for s in subjects {
        ratios.add(key, "tasks/s of cross-core bound", s.name, base: "cross-core bound", med[s.name]! / cross)
      }
    }
    // Issue 14 item 3: a Swift closure submit against the C function pointer, same run.
    for name in [laneSwift.name, laneSwiftNoCapture.name] {
      guard let cFn = med[laneC.name], med[name] != nil else { continue }
      print("\(name) / LanePool C fn: " + String(format: "%.2f", med[name]! / cFn))
      ratios.add(key, "tasks/s vs C fn", name, base: laneC.name, med[name]! / cFn)
    }
    if key == "w1" { result.w1 = out } else { result.w2 = out }
  }

  // MARK: Submit cost

  if options.runs("submit") {
    let res = runSubmitCost(rounds: options.rounds)
    let base0 = "GCD serial queue .async"
    print("")
    print(
      "Submit cost: \(submitCostTasks) tiny tasks submitted to one held lane / suspended serial queue, nothing consuming meanwhile;"
    )
    print("ns per submit, median of \(options.rounds) rounds after a warm-up (the producer's cost alone)")
    let w = [32, 14, 10]
    header(["submit", "ns per submit", "vs GCD"], w)
    for name in [
      base0, "LanePool Swift lane.async", "LanePool Swift queue(for:).async", "LanePool C lanepool_lane_async",
    ] {
      let r = res[name]!
      print(row([name, String(format: "%.1f", r.nsPerSubmit), ratio(r.nsPerSubmit, res[base0]!.nsPerSubmit)], w))
      if name != base0 { ratios.add("submit", "ns/submit", name, base: base0, r.nsPerSubmit / res[base0]!.nsPerSubmit) }
    }
    result.submit = res
  }

  // MARK: W3 and the floor

  if options.runs("floor") {
    let cross = conditionVariableFloor(samples: options.latencySamples, sameCore: false)
    let same = conditionVariableFloor(samples: options.latencySamples, sameCore: true)
    print("")
    print("Platform floor: raw pthread condition-variable wake, \(options.latencySamples) samples 20 us apart (us)")
    let w = [22, 8, 8, 8]
    header(["threads", "p50", "p99", "p99.9"], w)
    print(row(["waiter and waker: 2 cores", f1(cross.p50), f1(cross.p99), f1(cross.p999)], w))
    print(row(["waiter and waker: 1 core", f1(same.p50), f1(same.p99), f1(same.p999)], w))
    result.floor = FloorResult(crossCore: cross, sameCore: same)
  }

  if options.runs("w3") {
    var res: [String: Percentiles] = [:]
    let subjects = chosen(subjects + [laneRealtime])
    for s in subjects { _ = wakeLatency(s, samples: 500) }  // warm-up
    for s in subjects { res[s.name] = wakeLatency(s, samples: options.latencySamples) }
    print("")
    print(
      "W3 wake latency: \(options.latencySamples) samples of submit -> start, 20 us apart, at most 64 in flight, userInitiated (us)"
    )
    print("real-time: userInitiated lanes under SCHED_FIFO 1 (allowRealtime), opt-in; applied: \(realtimeApplied())")
    latencyTable("w3", subjects, res)
    result.w3 = res
  }

  // MARK: W3b (W3 with a blocking producer)

  if options.runs("w3b") {
    let gap: UInt64 = 50_000
    let subjects = chosen(subjects + [laneRealtime])
    let oldSlack = lpb_set_timer_slack(1)  // as an event loop's epoll_wait timeout: no 50 us rounding
    defer { if oldSlack >= 0 { _ = lpb_set_timer_slack(UInt(oldSlack)) } }
    for s in subjects { _ = wakeLatency(s, samples: 500, gapNs: gap, blocking: true) }  // warm-up
    var res: [String: Percentiles] = [:]
    var wall: UInt64 = 0
    for s in subjects {
      let t0 = now()
      res[s.name] = wakeLatency(s, samples: options.latencySamples, gapNs: gap, blocking: true)
      wall += now() - t0
    }
    let meanGap = Double(wall) / Double(options.latencySamples * subjects.count) / 1e3
    print("")
    print(
      "W3b W3 with a blocking producer: it sleeps \(gap / 1000) us between probes (timer slack 1 ns; \(String(format: "%.1f", meanGap)) us apart on average) instead of busy-waiting,"
    )
    print("\(options.latencySamples) samples of submit -> start, at most 64 in flight, userInitiated (us)")
    latencyTable("w3b", subjects, res)
    result.w3b = BlockingProducerResult(meanGapUs: meanGap, subjects: res)
  }

  // MARK: W3i (the low-latency interactive setting)

  if options.runs("w3i") {
    let res = runW3i(samples: options.latencySamples)
    let b = res[base]!.latency
    print("")
    print(
      "W3i the low-latency interactive setting (interactiveSpin \(lowLatencySpin)): W3 at userInteractive, \(options.latencySamples) samples 20 us apart (us);"
    )
    print(
      "then probes 200 us apart, one at a time; CPU: what the process's other threads used meanwhile, % of one core (the producer busy-waits and is not counted)"
    )
    let w = [28, 7, 7, 8, 10, 12, 7, 9, 10, 9]
    header(
      ["subject", "p50", "p99", "p99.9", "p50 vs YY", "p99.9 vs YY", "CPU %", "200us p50", "200us CPU%", "idle CPU%"], w
    )
    for name in [gcdYY.name, gcdGlobal.name, laneSwift.name, laneLowLatency.name] {
      let r = res[name]!
      print(
        row(
          [
            name, f1(r.latency.p50), f1(r.latency.p99), f1(r.latency.p999), ratio(r.latency.p50, b.p50),
            ratio(r.latency.p999, b.p999), String(format: "%.1f", r.busyCPUPercent), f1(r.sparseLatency.p50),
            String(format: "%.1f", r.sparseCPUPercent), String(format: "%.2f", r.idleCPUPercent),
          ], w))
      ratios.add("w3i", "p50", name, base: base, r.latency.p50 / b.p50)
      ratios.add("w3i", "p99.9", name, base: base, r.latency.p999 / b.p999)
    }
    result.w3i = res
  }

  // MARK: W4

  if options.runs("w4") {
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
    let b = res[base]!
    print("")
    print(
      "W4 priority isolation: \(options.probes) userInteractive probes 1 ms apart, submit -> start (us); loaded: the background"
    )
    print(
      "band kept saturated by 2 ms CPU-bound tasks, \(4 * lanesPerBand) queued; bg/s: background tasks done per second (max \(lanesPerBand * 500))"
    )
    let w = [22, 9, 9, 10, 10, 13, 12, 6]
    header(["subject", "idle p50", "idle p99", "load p50", "load p99", "load/idle p99", "p99 vs YY", "bg/s"], w)
    for s in w4Subjects {
      let r = res[s.name]!
      print(
        row(
          [
            s.name, f1(r.idle.p50), f1(r.idle.p99), f1(r.loaded.p50), f1(r.loaded.p99), ratio(r.loaded.p99, r.idle.p99),
            ratio(r.loaded.p99, b.loaded.p99), String(format: "%.0f", r.backgroundTasksPerSecond),
          ], w))
      ratios.add("w4", "idle p50", s.name, base: base, r.idle.p50 / b.idle.p50)
      ratios.add("w4", "idle p99", s.name, base: base, r.idle.p99 / b.idle.p99)
      ratios.add("w4", "loaded p50", s.name, base: base, r.loaded.p50 / b.loaded.p50)
      ratios.add("w4", "loaded p99", s.name, base: base, r.loaded.p99 / b.loaded.p99)
      ratios.add("w4", "bg/s", s.name, base: base, r.backgroundTasksPerSecond / b.backgroundTasksPerSecond)
    }
    result.w4 = res
  }

  // MARK: Inversion

  if options.runs("inversion") {
    let samples = max(options.probes / 10, 30)
    let r = runInversion(samples: samples)
    print("")
    print(
      "Inversion: a userInteractive lane's task queues 1 ms of CPU work on a background lane, then syncs onto it for 1 ms"
    )
    print(
      "more; its wait, queue -> sync returns (ms), \(samples) samples each; loaded: \(lanesPerBand) default-band lanes run 2 ms"
    )
    print(
      "CPU-bound tasks back to back (every CPU; \(String(format: "%.0f", r.defaultTasksPerSecond)) done/s); loaded samples alternate escalation off and on"
    )
    print(
      "chain: the same wait from a utility lane's task, which the interactive task then syncs behind; inline borrow: a"
    )
    print(
      "background-band thread runs a 1 ms closure inline on an idle utility lane, the interactive task syncs behind it")
    let w = [44, 8, 8, 14, 14]
    header(["case", "p50", "p99", "p50 / idle p50", "p99 / idle p99"], w)
    let direct = InversionShape(idle: r.idle, loadedWithout: r.loadedWithout, loadedWith: r.loadedWith)
    for (shape, s) in [
      ("direct", direct), ("chain", r.shapes["chain"]!), ("inline borrow", r.shapes["inline borrow"]!),
    ] {
      for (name, p) in [
        ("idle", s.idle), ("loaded, escalation off", s.loadedWithout), ("loaded, escalation on", s.loadedWith),
      ] {
        let label = shape == "direct" ? name : "\(shape): \(name)"
        print(
          row(
            [
              label, String(format: "%.2f", p.p50 / 1000), String(format: "%.2f", p.p99 / 1000),
              ratio(p.p50, s.idle.p50), ratio(p.p99, s.idle.p99),
            ], w))
        if name != "idle" {
          ratios.add("inversion", "p50 / idle p50", label, base: "idle", p.p50 / s.idle.p50)
          ratios.add("inversion", "p99 / idle p99", label, base: "idle", p.p99 / s.idle.p99)
        }
      }
    }
    if ProcessInfo.processInfo.environment["LANEPOOL_ESCALATION"] == "0" {
      print("(LANEPOOL_ESCALATION=0 is set: escalation is off in both loaded rows)")
    }
    result.inversion = r
  }

  // MARK: W5

  if options.runs("w5") {
    var res: [String: BlockingResult] = [:]
    for s in subjects { res[s.name] = blocking(s) }
    let b = res[base]!
    print("")
    print("W5 blocking work: 256 tasks that each sleep 20 ms at utility")
    let w = [22, 14, 10]
    header(["subject", "extra threads", "wall (s)"], w)
    for s in subjects {
      let r = res[s.name]!
      print(row([s.name, "\(r.extraThreads)", String(format: "%.2f", r.wallSeconds)], w))
      // extra threads: a ratio only where the YY pool made some (0 / 0 says nothing).
      if b.extraThreads > 0 {
        ratios.add("w5", "extra threads", s.name, base: base, Double(r.extraThreads) / Double(b.extraThreads))
      }
      ratios.add("w5", "wall", s.name, base: base, r.wallSeconds / b.wallSeconds)
    }
    result.w5 = res
  }

  // MARK: W6

  if options.runs("w6") {
    print("")
    print("W6 per-lane FIFO: \(options.fifoTasks) numbered tasks round-robin over the serial lanes/queues")
    let w = [22, 30]
    header(["subject", "result"], w)
    var out: [String: FifoResult] = [:]
    for s in [gcdYY, laneSwift] {
      let r = fifo(s, tasks: options.fifoTasks)
      let ok = r.violations == 0 && r.ran == options.fifoTasks
      fifoFailed = fifoFailed || !ok
      print(
        row([s.name, ok ? "ok (\(r.ran) tasks in order)" : "FAILED: \(r.violations) out of order, \(r.ran) ran"], w))
      out[s.name] = FifoResult(outOfOrder: r.violations, ran: r.ran)
    }
    print(row(["GCD global queue", "n/a (concurrent queue)"], w))
    print(row(["Task(priority:)", "n/a (no lanes)"], w))
    result.w6 = out
  }

  // MARK: W7

  if options.runs("w7") {
    var res: [String: Double] = [:]
    for s in subjects { res[s.name] = idleCost(s) }
    print("")
    print("W7 idle cost: after a burst of 100,000 tasks, the process idles 1 s: CPU its threads used (% of one core;")
    print("every pool in the process counts, LanePool's default pool and the bench's five-band pools included)")
    let w = [22, 10]
    header(["after a burst of", "CPU %"], w)
    for s in subjects {
      print(row([s.name, String(format: "%.3f", res[s.name]!)], w))
      ratios.add("w7", "idle CPU", s.name, base: base, res[s.name]! / res[base]!)
    }
    result.w7 = res.mapValues { IdleResult(idleCPUPercent: $0) }
  }

  // MARK: W8, W9

  if options.runs("w8") {
    let res = runW8(calls: options.syncCalls, rounds: options.rounds)
    let base8 = "GCD serial queue .sync"
    let gcd = res[base8]!
    print("")
    print(
      "W8 sync round trip: \(options.syncCalls) calls that add 1 to a plain counter, median of \(options.rounds) rounds (ns per call);"
    )
    print("idle: one caller, the lane parked; contended: two threads sync onto the same lane / queue at once")
    let w = [26, 10, 12, 14, 16]
    header(["subject", "idle ns", "idle vs GCD", "contended ns", "contended vs GCD"], w)
    for name in [base8, "LanePool lane.sync", "LanePool C lane_sync", "LanePool, lane thread"] {
      let r = res[name]!
      print(
        row(
          [
            name, f1(r.idleNsPerCall), ratio(r.idleNsPerCall, gcd.idleNsPerCall), f1(r.contendedNsPerCall),
            ratio(r.contendedNsPerCall, gcd.contendedNsPerCall),
          ], w))
      ratios.add("w8", "idle ns/call", name, base: base8, r.idleNsPerCall / gcd.idleNsPerCall)
      ratios.add("w8", "contended ns/call", name, base: base8, r.contendedNsPerCall / gcd.contendedNsPerCall)
    }
    result.w8 = res
  }

  if options.runs("w9") {
    var res = runW9(calls: options.pingPongCalls, rounds: options.rounds)
    if let child = defaultExecutorPingPong(calls: options.pingPongCalls, rounds: options.rounds) {
      res.append(("LanePool as default executor", child))
    }
    let base9 = "default executor"
    let b = res.first { $0.0 == base9 }!.1.nsPerCall
    print("")
    print(
      "W9 actor ping-pong: \(options.pingPongCalls) awaited calls from one actor to another, median of \(options.rounds) rounds"
    )
    print("  CPU ns/call: the process's CPU time (all threads) per call; above ns/call while waiting threads spin")
    print("  (floor) and (no hand-off) rows: the least an executor can do for the same calls (docs/benchmarks.md, W9)")
    #if !NIOPeer
      print("  two SwiftNIO event loops: build with --traits default,NIOPeer for that row")
    #endif
    let w = [64, 10, 18, 16, 12]
    header(["variant", "ns/call", "vs default executor", "lane jobs/call", "CPU ns/call"], w)
    for (name, r) in res {
      print(
        row(
          [
            name, f1(r.nsPerCall), ratio(r.nsPerCall, b), r.laneJobsPerCall.map { String(format: "%.2f", $0) } ?? "-",
            r.cpuNsPerCall.map(f1) ?? "-",
          ], w
        ))
      ratios.add("w9", "ns/call", name, base: base9, r.nsPerCall / b)
    }
    result.w9 = Dictionary(uniqueKeysWithValues: res.map { ($0.0, $0.1) })
  }

  if options.runs("fanout") {
    let children = 4 * ProcessInfo.processInfo.activeProcessorCount
    let res = runFanOut(rounds: options.rounds, repeats: 3, children: children)
    print("")
    print(
      "Fan-out: async code on Swift's executor and on LanePool installed as the executor, a child process each, alternately 3 times; medians of \(options.rounds) rounds"
    )
    print("  fan-out: a task busy 100 ms while its child (async let) does 100 ms of CPU work")
    print(
      "  task group: \(children) CPU-bound children sharing 100 ms x \(ProcessInfo.processInfo.activeProcessorCount) CPUs"
    )
    let w = [30, 14, 14, 10]
    header(["executor", "fan-out ms", "task group ms", "vs Swift"], w)
    if let swift = res["swift"] {
      for (name, key) in [("Swift's executor", "swift"), ("LanePool as the executor", "lanepool")] {
        guard let r = res[key] else { continue }
        print(
          row(
            [
              name, f1(r.fanOutMs), f1(r.taskGroupMs),
              "\(ratio(r.fanOutMs, swift.fanOutMs)) / \(ratio(r.taskGroupMs, swift.taskGroupMs))",
            ], w))
        ratios.add("fanout", "fan-out ms", name, base: "Swift's executor", r.fanOutMs / swift.fanOutMs)
        ratios.add("fanout", "task group ms", name, base: "Swift's executor", r.taskGroupMs / swift.taskGroupMs)
      }
    }
    result.fanout = res
  }

  runs.append(result)
}

// MARK: Ratios across runs

let summaries = ratios.summaries
if options.repeatCount > 1 {
  print("")
  print(
    "Ratios across \(options.repeatCount) runs, min / median / max: each subject / the GCD YY pool (W8: / GCD serial queue"
  )
  print(
    ".sync, W9: / the default executor; 'of bound': / the limit row's bound); latencies and ns/call: lower is better")
  let w = [6, 18, 38, 8, 8, 8]
  header(["", "metric", "subject", "min", "median", "max"], w)
  for r in summaries {
    print(
      row(
        [r.workload.uppercased(), r.metric, r.subject, ratioValue(r.min), ratioValue(r.median), ratioValue(r.max)], w))
  }
}

if let path = options.json {
  let report = BenchReport(
    machine: machine, lanesPerBand: lanesPerBand, nproc: nproc, quick: options.quick, options: options,
    runs: runs, ratios: summaries)
  let encoder = JSONEncoder()
  encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
  try encoder.encode(report).write(to: URL(fileURLWithPath: path))
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
