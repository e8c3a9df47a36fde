// What a run measured, as Codable structs (one per workload result), the latency
// percentiles through HdrHistogram, and the ratios `--repeat` summarises.
import Foundation
import Histogram

// MARK: - Latency percentiles

/// p50 / p99 / p99.9 of nanosecond latency samples, read from an HdrHistogram with 3
/// significant digits (a reported value is the highest one equivalent to the sample at
/// that percentile, within 0.1%). The `_us` fields are the same values in microseconds.
struct Percentiles: Codable {
  var count: UInt64
  var p50Ns: UInt64
  var p99Ns: UInt64
  var p999Ns: UInt64
  var maxNs: UInt64
  var p50: Double
  var p99: Double
  var p999: Double

  /// Longer samples are recorded as this (an hour): none is dropped.
  static let highestTrackableNs: UInt64 = 3_600_000_000_000

  init(ns samples: some Sequence<UInt64>) {
    var h = Histogram<UInt64>(
      lowestDiscernibleValue: 1, highestTrackableValue: Self.highestTrackableNs,
      numberOfSignificantValueDigits: .three)
    for v in samples { h.record(min(v, Self.highestTrackableNs)) }
    count = h.totalCount
    p50Ns = h.valueAtPercentile(50)
    p99Ns = h.valueAtPercentile(99)
    p999Ns = h.valueAtPercentile(99.9)
    maxNs = h.maxRecorded
    p50 = Double(p50Ns) / 1000
    p99 = Double(p99Ns) / 1000
    p999 = Double(p999Ns) / 1000
  }

  enum CodingKeys: String, CodingKey {
    case count
    case p50Ns = "p50_ns", p99Ns = "p99_ns", p999Ns = "p999_ns", maxNs = "max_ns"
    case p50 = "p50_us", p99 = "p99_us", p999 = "p999_us"
  }
}

// MARK: - Per-workload results

/// `limit`: the bare ring's cost on this machine and the throughput bounds it implies.
struct LimitResult: Codable {
  var ringCapacity: Int
  var tasks: Int
  var nproc: Int
  /// Medians over the rounds, ns per task.
  var pushNs: Double
  var popNs: Double
  var pushNsRounds: [Double]
  var popNsRounds: [Double]
  /// Tasks/s if one core did both sides: 1 / (push + pop).
  var oneCoreBound: Double
  /// Tasks/s with every core busy pushing or popping: nproc / (push + pop).
  var allCoresBound: Double
  /// bound(producers: 1) and bound(producers: 2): W1's and W2's.
  var oneProducerBound: Double
  var twoProducersBound: Double
  /// The ring across two cores (a pinned producer and a pinned consumer, both spinning):
  /// ns per task, median and rounds; nil with fewer than 2 allowed CPUs.
  var crossCoreNs: Double?
  var crossCoreNsRounds: [Double]?
  /// Tasks/s through one such pair: 1 / crossCoreNs. Both threads are busy for every
  /// task, so on 2 cores this bounds W1 and W2 alike, cache-line transfers included.
  var crossCoreBound: Double? { crossCoreNs.map { 1e9 / $0 } }

  init(
    ringCapacity: Int, tasks: Int, nproc: Int, pushNsRounds: [Double], popNsRounds: [Double],
    crossCoreNsRounds: [Double]? = nil
  ) {
    self.crossCoreNsRounds = crossCoreNsRounds
    crossCoreNs = crossCoreNsRounds.map(median)
    self.ringCapacity = ringCapacity
    self.tasks = tasks
    self.nproc = nproc
    self.pushNsRounds = pushNsRounds
    self.popNsRounds = popNsRounds
    pushNs = median(pushNsRounds)
    popNs = median(popNsRounds)
    oneCoreBound = 1e9 / (pushNs + popNs)
    allCoresBound = Double(nproc) * 1e9 / (pushNs + popNs)
    oneProducerBound = min(1e9 / pushNs, allCoresBound)
    twoProducersBound = min(2e9 / pushNs, allCoresBound)
  }

  /// What `producers` producer threads can reach on nproc cores: they cannot push
  /// faster than producers / push, and all cores together not faster than
  /// nproc / (push + pop). On 2 cores, 2 producers' bound is nproc / (push + pop).
  func bound(producers: Int) -> Double {
    min(Double(producers) * 1e9 / pushNs, allCoresBound)
  }

  enum CodingKeys: String, CodingKey {
    case ringCapacity = "ring_capacity", tasks, nproc
    case pushNs = "push_ns", popNs = "pop_ns"
    case pushNsRounds = "push_ns_rounds", popNsRounds = "pop_ns_rounds"
    case oneCoreBound = "bound_1_core_tasks_per_s"
    case allCoresBound = "bound_all_cores_tasks_per_s"
    case oneProducerBound = "bound_1_producer_tasks_per_s"
    case twoProducersBound = "bound_2_producers_tasks_per_s"
    case crossCoreNs = "cross_core_ns", crossCoreNsRounds = "cross_core_ns_rounds"
  }
}

/// W1, W2: one subject.
struct ThroughputResult: Codable {
  var medianTasksPerS: Double
  var rounds: [Double]
  var ratioVsGcdYY: Double
  /// median / the limit row's bound for this many producers (nil: no limit row).
  var fractionOfBound: Double?

  enum CodingKeys: String, CodingKey {
    case medianTasksPerS = "median_tasks_per_s", rounds
    case ratioVsGcdYY = "ratio_vs_gcd_yy"
    case fractionOfBound = "fraction_of_bound"
  }
}

/// The platform floor: a raw pthread condition-variable wake.
struct FloorResult: Codable {
  var crossCore: Percentiles
  var sameCore: Percentiles
  enum CodingKeys: String, CodingKey { case crossCore = "cross_core", sameCore = "same_core" }
}

/// W4: one subject.
struct IsolationResult: Codable {
  var idle: Percentiles
  var loaded: Percentiles
  var backgroundTasksPerSecond: Double
  enum CodingKeys: String, CodingKey {
    case idle, loaded
    case backgroundTasksPerSecond = "background_per_s"
  }
}

/// W5: one subject.
struct BlockingResult: Codable {
  var extraThreads: Int
  var wallSeconds: Double
  enum CodingKeys: String, CodingKey { case extraThreads = "extra_threads", wallSeconds = "wall_s" }
}

/// W6: one subject.
struct FifoResult: Codable {
  var outOfOrder: Int
  var ran: Int
  enum CodingKeys: String, CodingKey { case outOfOrder = "out_of_order", ran }
}

/// W7: one subject.
struct IdleResult: Codable {
  var idleCPUPercent: Double
  enum CodingKeys: String, CodingKey { case idleCPUPercent = "idle_cpu_percent" }
}

/// W8: one row.
struct W8Result: Codable {
  var idleNsPerCall: Double
  var contendedNsPerCall: Double
  enum CodingKeys: String, CodingKey {
    case idleNsPerCall = "idle_ns_per_call", contendedNsPerCall = "contended_ns_per_call"
  }
}

/// W9: one variant.
struct W9Result: Codable {
  var nsPerCall: Double
  /// Lane jobs per call (nil, left out of the JSON: the variant runs no lane jobs).
  var laneJobsPerCall: Double?
  /// The process's CPU time (user + system, every thread) per call: above nsPerCall
  /// when threads spin while they wait for the other side's answer.
  var cpuNsPerCall: Double? = nil
  enum CodingKeys: String, CodingKey {
    case nsPerCall = "ns_per_call", laneJobsPerCall = "lane_jobs_per_call", cpuNsPerCall = "cpu_ns_per_call"
  }
}

/// W3b: W3 with a producer that sleeps between probes.
struct BlockingProducerResult: Codable {
  /// The probes' mean spacing (the sleep plus its overshoot), in microseconds.
  var meanGapUs: Double
  var subjects: [String: Percentiles]
  enum CodingKeys: String, CodingKey { case meanGapUs = "mean_gap_us", subjects }
}

/// One run of the selected workloads; a workload that did not run is left out. Subject
/// (or row, or variant) names key the maps.
struct RunResult: Codable {
  var run: Int
  var limit: LimitResult?
  var w1: [String: ThroughputResult]?
  var w2: [String: ThroughputResult]?
  var submit: [String: SubmitCostResult]?
  var floor: FloorResult?
  var w3: [String: Percentiles]?
  var w3b: BlockingProducerResult?
  var w3i: [String: LowLatencyResult]?
  var w4: [String: IsolationResult]?
  var inversion: InversionResult?
  var w5: [String: BlockingResult]?
  var w6: [String: FifoResult]?
  var w7: [String: IdleResult]?
  var w8: [String: W8Result]?
  var w9: [String: W9Result]?
  var fanout: [String: FanOutResult]?
}

/// The whole JSON file.
struct BenchReport: Codable {
  var machine: String
  var lanesPerBand: Int
  var nproc: Int
  var quick: Bool
  var options: Options
  var runs: [RunResult]
  /// min / median / max of every ratio across the runs (one entry per ratio).
  var ratios: [RatioSummary]
  enum CodingKeys: String, CodingKey {
    case machine, nproc, quick, options, runs, ratios
    case lanesPerBand = "lanes_per_band"
  }
}

// MARK: - Ratios across runs

struct RatioSummary: Codable {
  var workload: String
  var metric: String
  var subject: String
  /// What the ratio divides by: a subject's name, or "limit bound".
  var base: String
  var min: Double
  var median: Double
  var max: Double
  /// One value per run that measured it, in run order.
  var values: [Double]
}

/// Every ratio the tables print, per run, keyed by workload, metric and subject; in
/// the order first seen.
struct RatioLog {
  private struct Key: Hashable {
    var workload, metric, subject, base: String
  }
  private var order: [Key] = []
  private var values: [Key: [Double]] = [:]
  private var workloads: [String] = []
  private var metrics: [String] = []

  mutating func add(_ workload: String, _ metric: String, _ subject: String, base: String, _ value: Double) {
    if !workloads.contains(workload) { workloads.append(workload) }
    if !metrics.contains(metric) { metrics.append(metric) }
    // A subject against itself (always 1) is left out; so is 0 / 0.
    guard value.isFinite, subject != base else { return }
    let k = Key(workload: workload, metric: metric, subject: subject, base: base)
    if values[k] == nil { order.append(k) }
    values[k, default: []].append(value)
  }

  /// Grouped by workload, then metric (each in the order first seen), then subject.
  var summaries: [RatioSummary] {
    let sorted = order.enumerated().sorted { a, b in
      let ka = (workloads.firstIndex(of: a.element.workload)!, metrics.firstIndex(of: a.element.metric)!, a.offset)
      let kb = (workloads.firstIndex(of: b.element.workload)!, metrics.firstIndex(of: b.element.metric)!, b.offset)
      return ka < kb
    }.map(\.element)
    return sorted.map { k in
      let v = values[k]!
      return RatioSummary(
        workload: k.workload, metric: k.metric, subject: k.subject, base: k.base,
        min: v.min()!, median: median(v), max: v.max()!, values: v)
    }
  }
}
