import CLanePool
import Dispatch
import LanePool

// "submit": what a submit costs the producer alone. The lane (or GCD serial queue) is
// held while the producer submits, so no consumer runs meanwhile and nothing contends:
// the figure is the submit path's own instructions and the lines it touches, which W1
// and W2 mix with wakes, consumers and two CPUs' scheduling.

/// Tasks per round: the ring holds them all (no overflow list).
let submitCostTasks = 200_000
let submitCostRing = 262_144

struct SubmitCostResult: Codable {
  var nsPerSubmit: Double
  var rounds: [Double]
  enum CodingKeys: String, CodingKey { case nsPerSubmit = "ns_per_submit", rounds }
}

/// Two lanes per band (the `queue(for:)` row alternates between them) and a ring that
/// holds a whole round, for the Swift rows.
let submitCostPool = try! LanePool(name: "benchsub", lanesPerBand: 2, ringCapacity: submitCostRing)

/// The same for the C row (one lane per band), created through the C API.
nonisolated(unsafe) let submitCostCPool = makeCPool("benchsubc", lanes: 1, ringCapacity: submitCostRing)

/// A C task that waits on the semaphore its context points to (holds the lane).
let cHold: @convention(c) (UnsafeMutableRawPointer?) -> Void = { ctx in
  Unmanaged<DispatchSemaphore>.fromOpaque(ctx!).takeUnretainedValue().wait()
}

/// Times `submit` (n submits); `hold` / `release` keep the consumer away meanwhile.
func timeSubmits(_ c: Completion, hold: () -> Void, release: () -> Void, _ submit: () -> Void) -> Double {
  hold()
  let t0 = now()
  submit()
  let dt = Double(now() - t0) / Double(c.target)
  release()
  c.sem.wait()
  return dt
}

/// ``timeSubmits`` with each of `lanes` held by a task that waits on one gate.
func timeSubmitsOnHeld(_ lanes: [LanePool.Lane], _ c: Completion, _ submit: () -> Void) -> Double {
  let gate = DispatchSemaphore(value: 0)
  return timeSubmits(
    c, hold: { for l in lanes { try! l.async { gate.wait() } } },
    release: { for _ in lanes { gate.signal() } }, submit)
}

func runSubmitCost(rounds: Int) -> [String: SubmitCostResult] {
  let n = submitCostTasks
  var rows: [String: [Double]] = [:]
  let q = DispatchQueue(label: "bench.submit", qos: .userInitiated)
  let lane = submitCostPool.queue(for: .userInitiated)
  var cLane: OpaquePointer?
  _ = lanepool_get_lane(submitCostCPool, QoS.userInitiated.c, 0, &cLane)
  for _ in 0..<(rounds + 1) {  // the first round warms up
    do {
      let c = Completion(target: n)
      rows["GCD serial queue .async", default: []].append(
        timeSubmits(c, hold: { q.suspend() }, release: { q.resume() }) {
          for _ in 0..<n { q.async { c.tick() } }
        })
    }
    do {
      let c = Completion(target: n)
      rows["LanePool Swift lane.async", default: []].append(
        timeSubmitsOnHeld([lane], c) {
          for _ in 0..<n { try! lane.async { c.tick() } }
        })
    }
    do {
      let c = Completion(target: n)
      rows["LanePool Swift queue(for:).async", default: []].append(
        timeSubmitsOnHeld(submitCostPool.lanes(for: .userInitiated), c) {
          for _ in 0..<n { try! submitCostPool.queue(for: .userInitiated).async { c.tick() } }
        })
    }
    do {
      let c = Completion(target: n)
      let gate = DispatchSemaphore(value: 0)
      let raw = Unmanaged.passUnretained(c).toOpaque()
      rows["LanePool C lanepool_lane_async", default: []].append(
        timeSubmits(
          c,
          hold: {
            if lanepool_lane_async(cLane, cHold, Unmanaged.passUnretained(gate).toOpaque()) != 0 {
              fatalError("C submit refused")
            }
          },
          release: { gate.signal() }
        ) {
          for _ in 0..<n where lanepool_lane_async(cLane, cTick, raw) != 0 { fatalError("C submit refused") }
        })
    }
  }
  return rows.mapValues { r in
    let kept = Array(r.dropFirst())
    return SubmitCostResult(nsPerSubmit: median(kept), rounds: kept)
  }
}
