import CLanePool
import Dispatch
import Foundation
import LanePool
import Synchronization

@inline(__always) func now() -> UInt64 { DispatchTime.now().uptimeNanoseconds }

/// Counts finished tasks; the one that finishes the last signals the waiter.
final class Completion: Sendable {
  let done = Atomic<Int>(0)
  let target: Int
  let sem = DispatchSemaphore(value: 0)
  init(target: Int) { self.target = target }
  @inline(__always) func tick() {
    if done.wrappingAdd(1, ordering: .acquiringAndReleasing).newValue == target { sem.signal() }
  }
  var count: Int { done.load(ordering: .acquiring) }
}

/// One latency sample: the submitter writes `t0`, the task writes `t1`.
struct ProbeSlot {
  var t0: UInt64 = 0
  var t1: UInt64 = 0
  var completion: Unmanaged<Completion>? = nil
}

/// A probe task's body: stamps the start time into the slot (passed as an integer so
/// closures stay Sendable) and ticks its completion.
@inline(__always) func stamp(_ bits: UInt) {
  let slot = UnsafeMutablePointer<ProbeSlot>(bitPattern: bits)!
  slot.pointee.t1 = now()
  slot.pointee.completion!.takeUnretainedValue().tick()
}

/// C-callable tasks for the C function-pointer subject (context, no captures).
let cTick: @convention(c) (UnsafeMutableRawPointer?) -> Void = { ctx in
  Unmanaged<Completion>.fromOpaque(ctx!).takeUnretainedValue().tick()
}
let cProbe: @convention(c) (UnsafeMutableRawPointer?) -> Void = { ctx in
  let slot = ctx!.assumingMemoryBound(to: ProbeSlot.self)
  slot.pointee.t1 = now()
  slot.pointee.completion!.takeUnretainedValue().tick()
}

/// A way to run work: what every workload drives, with the same calls for all.
struct Subject: @unchecked Sendable {
  // @unchecked: the closures only touch thread-safe pools and queues.
  let name: String
  /// Submits `n` tasks at `qos` that each call `c.tick()`, the subject's own way.
  let submitMany: (_ n: Int, _ qos: QoS, _ c: Completion) -> Void
  /// Submits one task at `qos` that stamps `slot.t1` and ticks its completion.
  let probe: (_ qos: QoS, _ slot: UnsafeMutablePointer<ProbeSlot>) -> Void
  /// Submits one arbitrary closure at `qos`.
  let run: (_ qos: QoS, _ work: @escaping @Sendable () -> Void) -> Void
  /// True for subjects whose unit is a serial queue/lane (W6 applies).
  let serialLanes: Bool
}

let lanesPerBand = GCDYYPool.defaultQueueCount()

// The subjects' pools, created once.
let lanePool: LanePool = {
  var c = LanePool.Configuration()
  c.name = "bench"
  c.lanesPerBand = lanesPerBand
  c.policies = benchPolicies
  c.unprivilegedNice = options.unprivilegedNice == "shift" ? .shift : .clamp
  return try! LanePool(configuration: c)
}()
nonisolated(unsafe) let cPool: OpaquePointer = makeCPool("benchc")
nonisolated(unsafe) var yyPools: [QoS: GCDYYPool] = {
  var d: [QoS: GCDYYPool] = [:]
  for q in QoS.allCases {
    d[q] = GCDYYPool(name: "bench.yy.\(q)", queueCount: lanesPerBand, qos: q.foundation)
  }
  return d
}()

func makeCPool(
  _ name: String, maxSpinning: UInt32 = 0, spin: Bool = true, fixedSpin: Bool = false,
  lanes: Int = lanesPerBand, ringCapacity: Int = 0
) -> OpaquePointer {
  var cfg = lanepool_config_t()
  lanepool_config_init(&cfg)
  if !spin { cfg.spin_ns = (0, 0, 0, 0, 0) }
  cfg.fixed_spin = fixedSpin ? 1 : 0
  cfg.lanes_per_band = UInt32(lanes)
  cfg.ring_capacity = UInt32(ringCapacity)
  cfg.max_spinning_lanes = maxSpinning
  cfg.unprivileged_nice = options.unprivilegedNice == "shift" ? LANEPOOL_NICE_SHIFT : LANEPOOL_NICE_CLAMP
  var p: OpaquePointer?
  let rc = name.withCString { n in
    cfg.name = n
    return lanepool_create(&cfg, &p)
  }
  guard rc == 0, let p else { fatalError("lanepool_create: \(rc)") }
  return p
}

extension QoS {
  var c: lanepool_qos_t { lanepool_qos_t(rawValue: rawValue) }
  var dispatch: DispatchQoS.QoSClass {
    switch self {
    case .userInteractive: .userInteractive
    case .userInitiated: .userInitiated
    case .default: .default
    case .utility: .utility
    case .background: .background
    }
  }
  var foundation: QualityOfService {
    switch self {
    case .userInteractive: .userInteractive
    case .userInitiated: .userInitiated
    case .default: .default
    case .utility: .utility
    case .background: .background
    }
  }
  var taskPriority: TaskPriority { TaskPriority(rawValue: UInt8(rawValue)) }
}

func cSubmitMany(_ p: OpaquePointer, _ n: Int, _ qos: QoS, _ c: Completion) {
  let raw = Unmanaged.passUnretained(c).toOpaque()
  for _ in 0..<n {
    var lane: OpaquePointer?
    _ = lanepool_next_lane(p, qos.c, &lane)
    if lanepool_lane_async(lane, cTick, raw) != 0 { fatalError("C submit refused") }
  }
}

let gcdYY = Subject(
  name: "GCD YY pool",
  submitMany: { n, qos, c in
    let pool = yyPools[qos]!
    for _ in 0..<n { pool.queue().async { c.tick() } }
  },
  probe: { qos, slot in
    let bits = UInt(bitPattern: slot)
    yyPools[qos]!.queue().async { stamp(bits) }
  },
  run: { qos, work in yyPools[qos]!.queue().async(execute: work) },
  serialLanes: true)

let gcdGlobal = Subject(
  name: "GCD global queue",
  submitMany: { n, qos, c in
    let q = DispatchQueue.global(qos: qos.dispatch)
    for _ in 0..<n { q.async { c.tick() } }
  },
  probe: { qos, slot in
    let bits = UInt(bitPattern: slot)
    DispatchQueue.global(qos: qos.dispatch).async { stamp(bits) }
  },
  run: { qos, work in DispatchQueue.global(qos: qos.dispatch).async(execute: work) },
  serialLanes: false)

let swiftTask = Subject(
  name: "Task(priority:)",
  submitMany: { n, qos, c in
    let p = qos.taskPriority
    for _ in 0..<n { Task(priority: p) { c.tick() } }
  },
  probe: { qos, slot in
    let bits = UInt(bitPattern: slot)
    Task(priority: qos.taskPriority) { stamp(bits) }
  },
  run: { qos, work in Task(priority: qos.taskPriority) { work() } },
  serialLanes: false)

/// `pool.queue(for:).async { }` with Swift closures: LanePool Swift, and the same on
/// pools with other settings. `pool` is read when the subject first runs (the bench's
/// extra pools are created only for the workloads that use them).
func swiftLaneSubject(_ name: String, _ pool: @escaping @Sendable () -> LanePool) -> Subject {
  Subject(
    name: name,
    submitMany: { n, qos, c in
      let p = pool()
      for _ in 0..<n { try! p.queue(for: qos).async { c.tick() } }
    },
    probe: { qos, slot in
      let bits = UInt(bitPattern: slot)
      try! pool().queue(for: qos).async { stamp(bits) }
    },
    run: { qos, work in try! pool().queue(for: qos).async(work) },
    serialLanes: true)
}

let laneSwift = swiftLaneSubject("LanePool Swift") { lanePool }

/// The completion the capture-free subject's closures tick (one W1/W2 round at a time).
let noCaptureCompletion = Atomic<UInt>(0)
@inline(never) func tickNoCapture() {
  let bits = noCaptureCompletion.load(ordering: .relaxed)  // the ring's publish orders it
  Unmanaged<Completion>.fromOpaque(UnsafeRawPointer(bitPattern: bits)!).takeUnretainedValue().tick()
}

/// As LanePool Swift, with a closure that captures nothing, so it has no context to
/// allocate: what a Swift submit costs without the caller's own allocation (W1, W2 only).
let laneSwiftNoCapture = Subject(
  name: "LanePool Swift, no capture",
  submitMany: { n, qos, c in
    noCaptureCompletion.store(UInt(bitPattern: Unmanaged.passUnretained(c).toOpaque()), ordering: .relaxed)
    for _ in 0..<n { try! lanePool.queue(for: qos).async { tickNoCapture() } }
  },
  probe: { qos, slot in
    let bits = UInt(bitPattern: slot)
    try! lanePool.queue(for: qos).async { stamp(bits) }
  },
  run: { qos, work in try! lanePool.queue(for: qos).async(work) },
  serialLanes: true)

let laneC = Subject(
  name: "LanePool C fn",
  submitMany: { n, qos, c in cSubmitMany(cPool, n, qos, c) },
  probe: { qos, slot in
    var lane: OpaquePointer?
    _ = lanepool_next_lane(cPool, qos.c, &lane)
    if lanepool_lane_async(lane, cProbe, UnsafeMutableRawPointer(slot)) != 0 { fatalError("C submit refused") }
  },
  run: { qos, work in try! lanePool.queue(for: qos).async(work) },  // closures: same engine
  serialLanes: true)

/// Band work through the C API (lanepool_async): no lane is named, so an idle lane of
/// the band takes a task held up behind a busy or descheduled one.
let laneBand = Subject(
  name: "LanePool C band",
  submitMany: { n, qos, c in
    let raw = Unmanaged.passUnretained(c).toOpaque()
    for _ in 0..<n where lanepool_async(cPool, qos.c, cTick, raw) != 0 { fatalError("C submit refused") }
  },
  probe: { qos, slot in
    if lanepool_async(cPool, qos.c, cProbe, UnsafeMutableRawPointer(slot)) != 0 { fatalError("C submit refused") }
  },
  run: { qos, work in try! lanePool.async(qos: qos, work) },
  serialLanes: false)

let allSubjects = [gcdYY, gcdGlobal, swiftTask, laneSwift, laneC, laneBand]

// Experiments behind docs/priorities.md (the defaults are the library's table):
//   LANEPOOL_BENCH_BG=idle|other|batch  scheduler of the background band
//   LANEPOOL_BENCH_UI_SLICE_US=N        EEVDF slice of userInteractive (0: none)
let benchPolicies: [QoS: BandPolicy] = {
  let env = ProcessInfo.processInfo.environment
  var p: [QoS: BandPolicy] = [:]
  if let sched = env["LANEPOOL_BENCH_BG"] {
    var bg = BandPolicy.default(for: .background)
    bg.scheduler = sched == "idle" ? .idle : sched == "other" ? .other : .batch
    p[.background] = bg
  }
  if let us = env["LANEPOOL_BENCH_UI_SLICE_US"].flatMap(Int.init) {
    var ui = BandPolicy.default(for: .userInteractive)
    ui.slice = us == 0 ? nil : .microseconds(us)
    p[.userInteractive] = ui
  }
  return p
}()
