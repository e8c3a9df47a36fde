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
// Two more shapes of the same wait (docs/priorities.md, "Whose band"):
//  - chain: the interactive task queues a task on a utility lane that queues 1 ms on the
//    background lane and syncs onto it for 1 ms, then, once that task waits (and 300 us
//    more), syncs onto the utility lane behind it: the boost reaches the background lane
//    only if the chain is walked again.
//  - inline borrow: a thread of the background band syncs onto an idle utility lane and
//    runs its 1 ms closure inline, on its own thread; the interactive task then syncs
//    onto that lane and waits for the closure.

/// One shape's figures.
struct InversionShape: Codable {
  var idle: Percentiles
  var loadedWithout: Percentiles
  var loadedWith: Percentiles
  enum CodingKeys: String, CodingKey {
    case idle
    case loadedWithout = "loaded_without_escalation"
    case loadedWith = "loaded_with_escalation"
  }
}

/// The inversion row's figures: the direct shape at the top level (as before), the
/// others by name.
struct InversionResult: Codable {
  /// No load, escalation on (the figure to compare against).
  var idle: Percentiles
  /// Every CPU busy with default-band work, the sync with LANEPOOL_SYNC_NO_ESCALATION.
  var loadedWithout: Percentiles
  /// The same load, escalation on.
  var loadedWith: Percentiles
  /// "chain", "inline borrow".
  var shapes: [String: InversionShape]
  /// Default-band load tasks (2 ms each) done per second during the loaded samples.
  var defaultTasksPerSecond: Double
  enum CodingKeys: String, CodingKey {
    case idle, shapes
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
  var utility: OpaquePointer?
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

private let chainMiddleWaits = Atomic<Int>(0)

/// The chain's utility task: the direct shape's wait, from the utility lane.
private let inversionChainMiddle: lanepool_fn = { ctx in
  let p = ctx!.assumingMemoryBound(to: InversionProbe.self)
  _ = lanepool_lane_async(p.pointee.background, inversionWork, nil)
  chainMiddleWaits.add(1, ordering: .releasing)
  _ = lanepool_lane_sync_flags(p.pointee.background, inversionWork, nil, p.pointee.flags)
}

private let inversionNothing: lanepool_fn = { _ in }

/// Runs on the userInteractive lane: the utility task queued, then a sync behind it.
private let inversionChainSample: lanepool_fn = { ctx in
  let p = ctx!.assumingMemoryBound(to: InversionProbe.self)
  let t0 = now()
  let before = chainMiddleWaits.load(ordering: .acquiring)
  _ = lanepool_lane_async(p.pointee.utility, inversionChainMiddle, ctx)
  // Arrive once the utility task waits on the background lane (its sync is queued within
  // microseconds of the count), so the boost must walk the chain again to reach it.
  while chainMiddleWaits.load(ordering: .acquiring) == before {}
  usleep(300)
  _ = lanepool_lane_sync_flags(p.pointee.utility, inversionNothing, nil, p.pointee.flags)
  p.pointee.waitedNs = now() - t0
}

/// The inline borrower: a thread entered in the background band that, on each signal,
/// syncs onto the (idle) utility lane with a 1 ms closure, which runs on this thread.
private final class Borrower: @unchecked Sendable {
  let lane: OpaquePointer?
  let go = DispatchSemaphore(value: 0)
  let started = Atomic<Int>(0)
  let finished = Atomic<Int>(0)
  let stop = Atomic<Bool>(false)
  init(lane: OpaquePointer?) { self.lane = lane }
  func run() {
    var token = lanepool_band_token_t()
    token.struct_size = UInt32(MemoryLayout<lanepool_band_token_t>.size)
    _ = lanepool_thread_enter_band(LANEPOOL_QOS_BACKGROUND, 0, &token)
    while true {
      go.wait()
      if stop.load(ordering: .acquiring) { break }
      _ = lanepool_lane_sync(lane, borrowedWork, Unmanaged.passUnretained(self).toOpaque())
      finished.add(1, ordering: .releasing)
    }
    _ = lanepool_thread_restore(&token)
  }
}

private let borrowedWork: lanepool_fn = { ctx in
  let b = Unmanaged<Borrower>.fromOpaque(ctx!).takeUnretainedValue()
  b.started.add(1, ordering: .releasing)
  // The waiter's sync queued behind this closure first (100 ms at most), so that every
  // sample waits for all of the 1 ms: a waiter preempted for longer than the closure ran
  // found the lane idle again, and its sample read 0.
  var info = lanepool_lane_info_t()
  info.struct_size = UInt32(MemoryLayout<lanepool_lane_info_t>.size)
  let end = now() + 100_000_000
  while now() < end, lanepool_lane_info(b.lane, &info) == 0, info.depth == 0 {}
  burnCPU(ns: 1_000_000)
}

private struct BorrowProbe {
  var borrower: Unmanaged<Borrower>
  var flags: UInt32
  var waitedNs: UInt64
}

/// Runs on the userInteractive lane: once the borrower's closure runs, a sync behind it.
private let inversionBorrowSample: lanepool_fn = { ctx in
  let p = ctx!.assumingMemoryBound(to: BorrowProbe.self)
  let b = p.pointee.borrower.takeUnretainedValue()
  let before = b.started.load(ordering: .acquiring)
  b.go.signal()
  while b.started.load(ordering: .acquiring) == before {}
  let t0 = now()
  _ = lanepool_lane_sync_flags(b.lane, inversionNothing, nil, p.pointee.flags)
  p.pointee.waitedNs = now() - t0
  while b.finished.load(ordering: .acquiring) == before {}  // the next sample starts idle
}

func runInversion(samples: Int) -> InversionResult {
  let pool = makeCPool("benchinv")
  defer { _ = lanepool_destroy(pool) }
  var ui: OpaquePointer?
  var bg: OpaquePointer?
  var ut: OpaquePointer?
  _ = lanepool_get_lane(pool, LANEPOOL_QOS_USER_INTERACTIVE, 0, &ui)
  _ = lanepool_get_lane(pool, LANEPOOL_QOS_BACKGROUND, 0, &bg)
  _ = lanepool_get_lane(pool, LANEPOOL_QOS_UTILITY, 0, &ut)
  let borrower = Borrower(lane: ut)
  let borrowerDone = DispatchSemaphore(value: 0)
  Thread.detachNewThread {
    borrower.run()
    borrowerDone.signal()
  }
  var probe = InversionProbe(background: bg, utility: ut, flags: 0, waitedNs: 0)
  var borrow = BorrowProbe(borrower: Unmanaged.passUnretained(borrower), flags: 0, waitedNs: 0)
  /// One sample of a shape; the outer sync runs on the interactive lane's own thread.
  func sample(_ shape: Int, escalate: Bool) -> UInt64 {
    let flags = escalate ? 0 : UInt32(LANEPOOL_SYNC_NO_ESCALATION)
    switch shape {
    case 0, 1:
      probe.flags = flags
      _ = lanepool_lane_sync_flags(
        ui, shape == 0 ? inversionSample : inversionChainSample, &probe, UInt32(LANEPOOL_SYNC_QUEUED))
      usleep(1000)
      return probe.waitedNs
    default:
      borrow.flags = flags
      _ = lanepool_lane_sync_flags(ui, inversionBorrowSample, &borrow, UInt32(LANEPOOL_SYNC_QUEUED))
      usleep(1000)
      return borrow.waitedNs
    }
  }
  let shapes = 0..<3
  for s in shapes { for _ in 0..<10 { _ = sample(s, escalate: true) } }  // warm-up
  let idle = shapes.map { s in (0..<samples).map { _ in sample(s, escalate: true) } }

  // Load: one chain per default lane, one lane per CPU: every CPU busy at nice 0.
  inversionLoadRunning.store(true, ordering: .relaxed)
  inversionLoadLive.store(lanesPerBand, ordering: .relaxed)
  for i in 0..<lanesPerBand {
    var lane: OpaquePointer?
    _ = lanepool_get_lane(pool, LANEPOOL_QOS_DEFAULT, UInt32(i), &lane)
    if lanepool_lane_async(lane, inversionLoad, nil) != 0 { inversionLoadLive.subtract(1, ordering: .relaxed) }
  }
  usleep(20_000)
  var without: [[UInt64]] = [[], [], []]
  var with: [[UInt64]] = [[], [], []]
  let doneBefore = inversionLoadDone.load(ordering: .relaxed)
  let t0 = now()
  // Shape by shape: a boosted sample leaves the kernel's lag of the boosted thread scaled
  // to its weight then, which a following sample of another shape would inherit.
  for s in shapes {
    for i in 0..<(2 * samples) {
      if i % 2 == 0 { without[s].append(sample(s, escalate: false)) } else { with[s].append(sample(s, escalate: true)) }
    }
  }
  let perSecond = Double(inversionLoadDone.load(ordering: .relaxed) - doneBefore) / (Double(now() - t0) / 1e9)
  inversionLoadRunning.store(false, ordering: .relaxed)
  while inversionLoadLive.load(ordering: .relaxed) > 0 { usleep(1000) }
  borrower.stop.store(true, ordering: .releasing)
  borrower.go.signal()
  borrowerDone.wait()
  func shape(_ s: Int) -> InversionShape {
    InversionShape(
      idle: Percentiles(ns: idle[s]), loadedWithout: Percentiles(ns: without[s]), loadedWith: Percentiles(ns: with[s]))
  }
  return InversionResult(
    idle: Percentiles(ns: idle[0]), loadedWithout: Percentiles(ns: without[0]), loadedWith: Percentiles(ns: with[0]),
    shapes: ["chain": shape(1), "inline borrow": shape(2)], defaultTasksPerSecond: perSecond)
}
