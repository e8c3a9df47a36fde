// Fan-out: async code that spreads CPU work over child tasks, with Swift's executor and
// with LanePool installed as the process's executor. The executor is a process-wide
// choice, so each side runs in a child process of its own (this binary with
// --fanout-child); the parent runs the two alternately and reports the medians.
import Dispatch
import Foundation
import LanePool

/// Busy for `ms` milliseconds of wall time on the calling thread (CPU work that never
/// suspends, as a parser or a hash would).
private func spin(ms: Double) {
  let end = now() + UInt64(ms * 1e6)
  while now() < end {}
}

/// A task keeps its thread busy for 100 ms while a child task does 100 ms of CPU work:
/// with two CPUs, about 100 ms when the child gets the other CPU, 200 ms when it waits
/// behind its parent.
private func fanOutOnce() async -> Double {
  let t0 = now()
  async let child: Void = spin(ms: 100)
  spin(ms: 100)
  await child
  return Double(now() - t0) / 1e6
}

/// A task group of `children` CPU-bound children of `ms` each: about
/// children * ms / CPUs when every CPU takes a share.
private func taskGroupOnce(children: Int, ms: Double) async -> Double {
  let t0 = now()
  await withTaskGroup(of: Void.self) { group in
    for _ in 0..<children { group.addTask { spin(ms: ms) } }
    await group.waitForAll()
  }
  return Double(now() - t0) / 1e6
}

/// The figures of one child process: milliseconds per round.
struct FanOutResult: Codable {
  var fanOutMs: Double
  var taskGroupMs: Double
  enum CodingKeys: String, CodingKey { case fanOutMs = "fan_out_ms", taskGroupMs = "task_group_ms" }
}

/// The child's side: `executor` is "lanepool" (installed first) or "swift".
func fanOutChild(executor: String, rounds: Int, children: Int) -> Never {
  if executor == "lanepool" {
    do { try LanePool.installAsDefaultExecutor() } catch {
      print("FANOUT-ERROR install: \(error)")
      exit(1)
    }
  }
  let done = DispatchSemaphore(value: 0)
  nonisolated(unsafe) var fan: [Double] = []
  nonisolated(unsafe) var group: [Double] = []
  nonisolated(unsafe) var onLane = false
  let cpus = Double(ProcessInfo.processInfo.activeProcessorCount)
  Task {
    onLane = Lane.current != nil
    _ = await fanOutOnce()  // warm-up
    for _ in 0..<rounds {
      fan.append(await fanOutOnce())
      group.append(await taskGroupOnce(children: children, ms: 100 * cpus / Double(children)))
    }
    done.signal()
  }
  done.wait()
  guard onLane == (executor == "lanepool") else {
    print("FANOUT-ERROR tasks ran \(onLane ? "on" : "off") lanes with executor \(executor)")
    exit(1)
  }
  print("FANOUTCHILD \(median(fan)) \(median(group))")
  exit(0)
}

/// Runs the child for `executor` once; nil (and the reason on stderr) if it failed.
private func runFanOutChild(executor: String, rounds: Int, children: Int) -> FanOutResult? {
  guard
    let f = childFigures(
      ["--fanout-child", executor, "\(rounds)", "\(children)"], marker: "FANOUTCHILD",
      what: "fan-out: the \(executor) child", count: 2)
  else { return nil }
  return FanOutResult(fanOutMs: f[0], taskGroupMs: f[1])
}

/// Both executors, alternately, `repeats` child processes each: per executor the median
/// of the children's medians.
func runFanOut(rounds: Int, repeats: Int, children: Int) -> [String: FanOutResult] {
  var seen: [String: [FanOutResult]] = [:]
  for _ in 0..<repeats {
    for executor in ["swift", "lanepool"] {
      if let r = runFanOutChild(executor: executor, rounds: rounds, children: children) {
        seen[executor, default: []].append(r)
      }
    }
  }
  return seen.mapValues { rs in
    FanOutResult(fanOutMs: median(rs.map(\.fanOutMs)), taskGroupMs: median(rs.map(\.taskGroupMs)))
  }
}
