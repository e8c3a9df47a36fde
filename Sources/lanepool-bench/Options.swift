// lanepool-bench's flags, through swift-argument-parser: an unknown flag, a missing
// value or a bad one is an error with the usage, never ignored. (The hidden child mode
// `--w9-default-executor-child CALLS ROUNDS` is handled in main.swift before this runs.)
import ArgumentParser
import Foundation

/// Every workload, in the order a run measures them.
let allWorkloads = [
  "limit", "w1", "w2", "submit", "floor", "w3", "w3b", "w3i", "w4", "inversion", "w5", "w6", "w7", "w8", "w9", "fanout",
]

struct BenchCommand: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "lanepool-bench",
    abstract:
      "LanePool side by side with a YYDispatchQueuePool port over GCD, GCD's global queue and Task, in one process.",
    discussion: """
      Workloads: limit (the bare ring's cost on this machine, single-threaded), w1 and w2 \
      (throughput, 1 and 2 producers), floor (a raw condition-variable wake), w3 (wake \
      latency), w3i (W3 at \
      userInteractive with the low-latency setting, and its CPU cost), w4 (priority \
      isolation), inversion (a userInteractive task waiting on a background lane while the \
      default band fills every CPU, with escalation off and on), w5 (blocking work), w6 (per-lane FIFO), w7 (idle \
      cost), w8 (sync round trips), w9 (actor ping-pong). Latencies are HdrHistogram \
      percentiles (3 significant digits). Ratios are each subject / the GCD YY pool \
      (W8: / GCD serial queue .sync, W9: / the default executor).
      """)

  @Flag(
    help:
      "A short smoke run: 100,000 tasks, 3 rounds, 2,000 latency samples, 300 probes, 20,000 sync and ping-pong calls.")
  var quick = false

  @Option(
    help: ArgumentHelp(
      "Comma-separated workloads to run (default: all).",
      discussion: "One or more of \(allWorkloads.joined(separator: ",")).",
      valueName: "list"),
    transform: BenchCommand.parseWorkloads)
  var workloads: Set<String>? = nil

  @Option(
    help: ArgumentHelp(
      "Comma-separated subjects for W1, W2, W3 and W3b, in this order (default: all); the GCD YY pool, every ratio's base, always runs first.",
      discussion: "Names as the tables print them, e.g. 'LanePool C fn,LanePool Swift'.",
      valueName: "list"),
    transform: { $0.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) } })
  var subjects: [String]? = nil

  @Flag(help: "Also run the limit row when --workloads leaves it out (the W1/W2 'of bound' column needs it).")
  var limit = false

  @Option(help: ArgumentHelp("Write every run's figures to this file as JSON.", valueName: "file"))
  var json: String? = nil

  @Option(
    help: ArgumentHelp(
      "Tiny tasks per throughput round (W1, W2) and per limit round (default: 1,000,000; --quick: 100,000).",
      valueName: "n"))
  var tasks: Int? = nil

  @Option(
    help: ArgumentHelp(
      "Rounds per throughput, limit, W8 and W9 figure; the median is reported (default: 5; --quick: 3).", valueName: "n"
    ))
  var rounds: Int? = nil

  @Option(help: ArgumentHelp("W4 probes, at least 10 (default: 2,000; --quick: 300).", valueName: "n"))
  var probes: Int? = nil

  @Option(
    name: .customLong("repeat"),
    help: ArgumentHelp(
      "Run the selected workloads N times in this process, then print min / median / max of every ratio; the JSON has every run.",
      valueName: "n"))
  var repeatCount: Int = 1

  @Flag(help: "Add C pools with spinning uncapped, off, and fixed (not adaptive).")
  var compareSpin = false

  @Flag(help: "Add a Swift pool sampled every millisecond by LanePoolServer's metrics collector.")
  var compareMetrics = false

  @Option(
    help: ArgumentHelp(
      "The LanePool pools' unprivileged_nice: clamp (default) or shift (docs/priorities.md, \"Without privilege\").",
      valueName: "clamp|shift"))
  var unprivilegedNice: String = "clamp"

  static func parseWorkloads(_ s: String) throws -> Set<String> {
    let names = s.split(separator: ",", omittingEmptySubsequences: false).map {
      $0.trimmingCharacters(in: .whitespaces).lowercased()
    }
    if let bad = names.first(where: { !allWorkloads.contains($0) }) {
      throw ValidationError(
        "unknown workload '\(bad)' in '\(s)' (known: \(allWorkloads.joined(separator: ",")))")
    }
    return Set(names)
  }

  func validate() throws {
    if let tasks, tasks < 2 { throw ValidationError("--tasks must be at least 2, got \(tasks)") }
    if let rounds, rounds < 1 { throw ValidationError("--rounds must be at least 1, got \(rounds)") }
    if let probes, probes < 10 { throw ValidationError("--probes must be at least 10, got \(probes)") }
    if repeatCount < 1 { throw ValidationError("--repeat must be at least 1, got \(repeatCount)") }
    if unprivilegedNice != "clamp", unprivilegedNice != "shift" {
      throw ValidationError("--unprivileged-nice must be clamp or shift, got '\(unprivilegedNice)'")
    }
  }
}

/// The settings a run uses: the flags, with --quick's or the full run's defaults.
struct Options: Codable {
  var quick: Bool
  var tasks: Int
  var rounds: Int
  var latencySamples: Int
  var probes: Int
  var fifoTasks: Int
  var syncCalls: Int
  var pingPongCalls: Int
  var repeatCount: Int
  var workloads: [String]
  var compareSpin: Bool
  var compareMetrics: Bool
  var unprivilegedNice: String
  var subjects: [String]?
  var json: String?

  init(_ c: BenchCommand) {
    quick = c.quick
    tasks = c.tasks ?? (c.quick ? 100_000 : 1_000_000)
    rounds = c.rounds ?? (c.quick ? 3 : 5)
    latencySamples = c.quick ? 2_000 : 20_000
    probes = c.probes ?? (c.quick ? 300 : 2_000)
    fifoTasks = c.quick ? 40_000 : 400_000
    syncCalls = c.quick ? 20_000 : 200_000
    pingPongCalls = c.quick ? 20_000 : 200_000
    repeatCount = c.repeatCount
    var w = c.workloads ?? Set(allWorkloads)
    if c.limit { w.insert("limit") }
    workloads = allWorkloads.filter(w.contains)
    compareSpin = c.compareSpin
    compareMetrics = c.compareMetrics
    unprivilegedNice = c.unprivilegedNice
    subjects = c.subjects
    json = c.json
  }

  func runs(_ workload: String) -> Bool { workloads.contains(workload) }

  enum CodingKeys: String, CodingKey {
    case quick, tasks, rounds, probes, workloads, subjects, json
    case latencySamples = "latency_samples"
    case fifoTasks = "fifo_tasks"
    case syncCalls = "sync_calls"
    case pingPongCalls = "ping_pong_calls"
    case repeatCount = "repeat"
    case compareSpin = "compare_spin"
    case compareMetrics = "compare_metrics"
    case unprivilegedNice = "unprivileged_nice"
  }
}
