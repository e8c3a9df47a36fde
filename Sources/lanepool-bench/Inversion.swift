import CLanePool
import Foundation
import Synchronization

// The inversion row (issue 25): a task on a userInteractive lane queues 1 ms of CPU work
// on a background lane, then syncs onto that lane for 1 ms more. Its wait (from the
// queue to the sync's return) is 2 ms on an idle machine; while the default band keeps
// every CPU busy, the background lane (nice 10, SCHED_BATCH) gets little CPU and the
// interactive task waits behind it: priority inversion. With escalation the lane runs
// at the caller's band while it waits. Loaded samples alternate escalation on and off
// (LANEPOOL_SYNC_NO_ESCALATION) so both halves see the same load.

/// The inversion row's figures.
struct InversionResult: Codable {
  /// No load, escalation on (the figure to compare against).
  var idle: Percentiles
  /// Every CPU busy with default-band work, the sync with LANEPOOL_SYNC_NO_ESCALATION.
  var loadedWithout: Percentiles
  /// The same load, escalation on.
  var loadedWith: Percentiles
  /// Default-band load tasks (2 ms each) done per second during the loaded samples.
  var defaultTasksPerSecond: Double
  enum CodingKeys: String, CodingKey {
    case idle
    case loadedWithout = "loaded_without_escalation"
    case loadedWith = "loaded_with_escalation"
    case defaultTasksPerSecond = "default_per_s"
  }
}

/// The calling thread's CPU time (ns).
private func threadCPUNow() -> UInt64 {
  var ts = timespec()
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts)
  return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
}

/// Burns `ns` of this thread's CPU time (not wall time: preemption does not shorten it).
private func burnCPU(ns: UInt64) {
  let end = threadCPUNow() + ns
  while threadCPUNow() < end {}
}

private let inversionLoadRunning = Atomic<Bool>(false)
private let inversionLoadLive = Atomic<Int>(0)
private let inversionLoadDone = Atomic<Int>(0)

/// 1 ms of CPU work, the unit the caller waits for.
private let inversionWork: lanepool_fn = { _ in burnCPU(ns: 1_000_000) }

/// One default-band load chain: 2 ms of CPU, then again on the same lane until stopped.
private let inversionLoad: lanepool_fn = { _ in
  burnCPU(ns: 2_000_000)
  inversionLoadDone.add(1, ordering: .relaxed)
  var lane: OpaquePointer?
  if inversionLoadRunning.load(ordering: .relaxed), lanepool_current_lane(&lane) == 0,
    lanepool_lane_async(lane, inversionLoad, nil) == 0
  {
    return
  }
  inversionLoadLive.subtract(1, ordering: .relaxed)
}

private struct InversionProbe {
  var background: OpaquePointer?
  var flags: UInt32
  var waitedNs: UInt64
}

/// Runs on the userInteractive lane: queue 1 ms, sync 1 ms, record the wait.
private let inversionSample: lanepool_fn = { ctx in
  let p = ctx!.assumingMemoryBound(to: InversionProbe.self)
  let t0 = now()
  _ = lanepool_lane_async(p.pointee.background, inversionWork, nil)
  _ = lanepool_lane_sync_flags(p.pointee.background, inversionWork, nil, p.pointee.flags)
  p.pointee.waitedNs = now() - t0
}

func runInversion(samples: Int) -> InversionResult {
  let pool = makeCPool("benchinv")
  defer { _ = lanepool_destroy(pool) }
  var ui: OpaquePointer?
  var bg: OpaquePointer?
  _ = lanepool_get_lane(pool, LANEPOOL_QOS_USER_INTERACTIVE, 0, &ui)
  _ = lanepool_get_lane(pool, LANEPOOL_QOS_BACKGROUND, 0, &bg)
  var probe = InversionProbe(background: bg, flags: 0, waitedNs: 0)
  /// One sample; the outer sync runs on the interactive lane's own thread.
  func sample(escalate: Bool) -> UInt64 {
    probe.flags = escalate ? 0 : UInt32(LANEPOOL_SYNC_NO_ESCALATION)
    _ = lanepool_lane_sync_flags(ui, inversionSample, &probe, UInt32(LANEPOOL_SYNC_QUEUED))
    usleep(1000)
    return probe.waitedNs
  }
  for _ in 0..<10 { _ = sample(escalate: true) }  // warm-up
  let idle = (0..<samples).map { _ in sample(escalate: true) }

  // Load: one chain per default lane, one lane per CPU: every CPU busy at nice 0.
  inversionLoadRunning.store(true, ordering: .relaxed)
  inversionLoadLive.store(lanesPerBand, ordering: .relaxed)
  for i in 0..<lanesPerBand {
    var lane: OpaquePointer?
    _ = lanepool_get_lane(pool, LANEPOOL_QOS_DEFAULT, UInt32(i), &lane)
    if lanepool_lane_async(lane, inversionLoad, nil) != 0 { inversionLoadLive.subtract(1, ordering: .relaxed) }
  }
  usleep(20_000)
  var without: [UInt64] = []
  var with: [UInt64] = []
  let doneBefore = inversionLoadDone.load(ordering: .relaxed)
  let t0 = now()
  for i in 0..<(2 * samples) {
    if i % 2 == 0 { without.append(sample(escalate: false)) } else { with.append(sample(escalate: true)) }
  }
  let perSecond = Double(inversionLoadDone.load(ordering: .relaxed) - doneBefore) / (Double(now() - t0) / 1e9)
  inversionLoadRunning.store(false, ordering: .relaxed)
  while inversionLoadLive.load(ordering: .relaxed) > 0 { usleep(1000) }
  return InversionResult(
    idle: Percentiles(ns: idle), loadedWithout: Percentiles(ns: without), loadedWith: Percentiles(ns: with),
    defaultTasksPerSecond: perSecond)
}
