import CLanePool
import Foundation
import LanePool

// W3i: issue 14's low-latency setting of the userInteractive band
// (`Configuration.interactiveSpin`), next to GCD and LanePool's default setting, at
// userInteractive, with what it costs in CPU.

/// The interactive spin budget of the low-latency subject.
let lowLatencySpin: Duration = .milliseconds(1)

/// A pool like the bench's Swift pool, with the low-latency interactive setting.
let lowLatencyPool: LanePool = {
  var c = LanePool.Configuration()
  c.name = "benchll"
  c.lanesPerBand = lanesPerBand
  c.policies = benchPolicies
  c.interactiveSpin = lowLatencySpin
  return try! LanePool(configuration: c)
}()

let laneLowLatency = swiftLaneSubject("LanePool Swift, low-latency") { lowLatencyPool }

/// W3i for one subject.
struct LowLatencyResult: Codable {
  /// Submit -> start at userInteractive, probes 20 us apart (W3's cadence).
  var latency: Percentiles
  /// CPU the process's other threads used during those probes (% of one core): the
  /// subject's own threads, plus whatever else is alive (other pools idle-park).
  var busyCPUPercent: Double
  /// Probes 200 us apart, one at a time: longer than the default interactive budget
  /// (50 us, so those lanes park between probes), shorter than the low-latency one (1 ms).
  var sparseLatency: Percentiles
  /// CPU during the sparse probes (% of one core).
  var sparseCPUPercent: Double
  /// After the probes, the process idles 1 s: CPU its other threads used (% of one core).
  var idleCPUPercent: Double
  enum CodingKeys: String, CodingKey {
    case latency
    case busyCPUPercent = "busy_cpu_percent"
    case sparseLatency = "sparse_latency"
    case sparseCPUPercent = "sparse_cpu_percent"
    case idleCPUPercent = "idle_cpu_percent"
  }
}

/// Runs `body` and returns the CPU the process's other threads used meanwhile, in % of
/// one core over the wall time.
func cpuPercent(during body: () -> Void) -> Double {
  let me = currentTID()
  let before = threadCPU(excluding: me)
  let t0 = now()
  body()
  let wall = Double(now() - t0)
  let used = threadCPU(excluding: me).reduce(UInt64(0)) { sum, e in
    sum + (e.value - min(e.value, before[e.key] ?? 0))
  }
  return Double(used) / wall * 100
}

func runW3i(samples: Int) -> [String: LowLatencyResult] {
  let subjects = [gcdYY, gcdGlobal, laneSwift, laneLowLatency]
  for s in subjects { _ = wakeLatency(s, samples: 500, qos: .userInteractive) }  // warm-up
  var out: [String: LowLatencyResult] = [:]
  for s in subjects {
    usleep(100_000)  // every lane of the others parked
    var busy = Percentiles(ns: [])
    let busyCPU = cpuPercent { busy = wakeLatency(s, samples: samples, qos: .userInteractive) }
    var sparse = Percentiles(ns: [])
    let sparseCPU = cpuPercent {
      sparse = wakeLatency(s, samples: max(samples / 4, 100), gapNs: 200_000, inFlight: 1, qos: .userInteractive)
    }
    usleep(100_000)
    let idleCPU = cpuPercent { usleep(1_000_000) }
    out[s.name] = LowLatencyResult(
      latency: busy, busyCPUPercent: busyCPU, sparseLatency: sparse, sparseCPUPercent: sparseCPU,
      idleCPUPercent: idleCPU)
  }
  return out
}

// W3's real-time subject: the userInitiated band as SCHED_FIFO (priority 1), an opt-in
// policy (`allowRealtime`), to show what the tail is made of. A SCHED_OTHER lane that
// is woken waits for a CPU behind whatever else runs there (here the sandbox's agent,
// for milliseconds at a time); a real-time lane preempts it.

/// A pool like the bench's Swift pool, with userInitiated lanes under SCHED_FIFO 1.
let realtimePool: LanePool = {
  var c = LanePool.Configuration()
  c.name = "benchrt"
  c.lanesPerBand = lanesPerBand
  var policies = benchPolicies
  var ui = BandPolicy.default(for: .userInitiated)
  ui.scheduler = .fifo(priority: 1)
  ui.nice = 0
  ui.slice = nil
  policies[.userInitiated] = ui
  c.policies = policies
  c.allowRealtime = true
  return try! LanePool(configuration: c)
}()

/// What the real-time pool's userInitiated lanes got: "fifo", or the refusal (an
/// unprivileged run falls back to SCHED_OTHER and says so here).
func realtimeApplied() -> String {
  let got = realtimePool.lanes(for: .userInitiated).map { lane -> String in
    let s = lane.info.policy.scheduler
    return s.error == nil && s.got == Int64(LANEPOOL_SCHED_FIFO.rawValue)
      ? "fifo" : "refused (errno \(s.error ?? 0)), runs as scheduler \(s.got)"
  }
  return Set(got).sorted().joined(separator: "; ")
}

let laneRealtime = swiftLaneSubject("LanePool Swift, real-time") { realtimePool }
