import CLanePool
import Dispatch
import Foundation
import LanePool
import LanePoolBenchSupport
import Synchronization

// MARK: - Statistics (latency percentiles: Percentiles in Results.swift)

/// The median of per-round figures.
func median(_ xs: [Double]) -> Double {
  let s = xs.sorted()
  return s.count % 2 == 1 ? s[s.count / 2] : (s[s.count / 2 - 1] + s[s.count / 2]) / 2
}

/// Busy-waits until `until` (for sub-microsecond pacing that usleep cannot do).
@inline(__always) func spinUntil(_ until: UInt64) { while now() < until {} }

/// Busy-spins for `ns` of wall time: CPU-bound work.
@inline(never) func burn(ns: UInt64) {
  let end = now() + ns
  var x: UInt64 = 0
  while now() < end { x &+= 1 }
  if x == 42 { print("") }
}

// MARK: - limit: the bare ring

/// The core's ring (Sources/CLanePool/ring.h, through LanePoolBenchSupport), alone on
/// this thread: `tasks` tiny tasks pushed into a lane-sized ring and popped (each one
/// called), in batches of a full ring, `rounds` times after a warm-up. No lane threads,
/// no wake checks, no sharing between cores: what the ring itself costs.
func ringLimit(tasks: Int, rounds: Int) -> LimitResult {
  let capacity = LANEPOOL_DEFAULT_RING_CAPACITY
  func once(_ n: Int) -> (push: Double, pop: Double) {
    var push = 0.0, pop = 0.0
    let rc = lpb_ring_cost(UInt64(n), capacity, &push, &pop)
    if rc != 0 { fatalError("lpb_ring_cost: \(rc)") }
    return (push, pop)
  }
  _ = once(max(tasks / 10, Int(capacity)))  // warm-up
  var push: [Double] = []
  var pop: [Double] = []
  for _ in 0..<rounds {
    let r = once(tasks)
    push.append(r.push)
    pop.append(r.pop)
  }
  // The same ring across two cores, pinned, both sides spinning (no wakes).
  var cross: [Double]? = nil
  let cpus = allowedCPUs()
  if cpus.count >= 2 {
    cross = (0..<rounds).map { _ in
      var ns = 0.0
      let rc = lpb_ring_cross_core(UInt64(tasks), capacity, Int32(cpus[0]), Int32(cpus[1]), &ns)
      if rc != 0 { fatalError("lpb_ring_cross_core: \(rc)") }
      return ns
    }
  }
  return LimitResult(
    ringCapacity: Int(capacity), tasks: tasks, nproc: ProcessInfo.processInfo.activeProcessorCount,
    pushNsRounds: push, popNsRounds: pop, crossCoreNsRounds: cross)
}

// MARK: - W1, W2: throughput

/// `producers` threads submit `perProducer` tiny tasks each at `qos`; tasks per second
/// from the first submit until the last task ran.
func throughput(_ s: Subject, producers: Int, perProducer: Int, qos: QoS = .userInitiated) -> Double {
  let c = Completion(target: producers * perProducer)
  let start = DispatchSemaphore(value: 0)
  let ready = DispatchGroup()
  for _ in 0..<producers - 1 {
    ready.enter()
    Thread.detachNewThread {
      ready.leave()
      start.wait()
      s.submitMany(perProducer, qos, c)
    }
  }
  ready.wait()
  let t0 = now()
  for _ in 0..<producers - 1 { start.signal() }
  s.submitMany(perProducer, qos, c)
  c.sem.wait()
  return Double(producers * perProducer) / (Double(now() - t0) / 1e9)
}

// MARK: - W3: wake latency

/// `samples` probes, `gapNs` apart, at most `inFlight` outstanding: submit -> start.
/// `blocking`: the producer sleeps `gapNs` between probes (as an event loop blocks in
/// epoll_wait) instead of busy-waiting, leaving its CPU free meanwhile; the probes are
/// then `gapNs` plus the sleep's own overshoot apart.
func wakeLatency(
  _ s: Subject, samples: Int, gapNs: UInt64 = 20_000, inFlight: Int = 64, qos: QoS = .userInitiated,
  blocking: Bool = false
) -> Percentiles {
  let slots = UnsafeMutablePointer<ProbeSlot>.allocate(capacity: samples)
  defer { slots.deallocate() }
  let c = Completion(target: samples)
  let unmanaged = Unmanaged.passUnretained(c)
  slots.initialize(repeating: ProbeSlot(completion: unmanaged), count: samples)
  var next = now()
  for i in 0..<samples {
    while i - c.count >= inFlight {}
    if blocking {
      lpb_sleep_ns(gapNs)  // the gap after the last probe, plus the wake-up's own delay
    } else {
      spinUntil(next)
      next += gapNs
    }
    slots[i].t0 = now()
    s.probe(qos, slots + i)
  }
  c.sem.wait()
  return Percentiles(ns: (0..<samples).map { slots[$0].t1 &- slots[$0].t0 })
}

/// The platform's floor: a raw pthread condition-variable wake between two threads on
/// different cores (or the same core), same cadence as W3.
func conditionVariableFloor(samples: Int, sameCore: Bool) -> Percentiles {
  final class Shared: @unchecked Sendable {
    var mutex = pthread_mutex_t()
    var cond = pthread_cond_t()
    var posted = 0
    var t0: UInt64 = 0
    var lat: [UInt64] = []
    var done = false
  }
  let sh = Shared()
  pthread_mutex_init(&sh.mutex, nil)
  pthread_cond_init(&sh.cond, nil)
  sh.lat.reserveCapacity(samples)
  let cpus = allowedCPUs()
  let waiterCPU = cpus[0]
  let wakerCPU = sameCore || cpus.count < 2 ? cpus[0] : cpus[1]
  let finished = DispatchSemaphore(value: 0)
  Thread.detachNewThread {
    pinCurrentThread(to: waiterCPU)
    pthread_mutex_lock(&sh.mutex)
    var seen = 0
    while sh.lat.count < samples {
      while sh.posted == seen { pthread_cond_wait(&sh.cond, &sh.mutex) }
      sh.lat.append(now() - sh.t0)
      seen = sh.posted
    }
    pthread_mutex_unlock(&sh.mutex)
    finished.signal()
  }
  let old = allowedCPUs()
  pinCurrentThread(to: wakerCPU)
  usleep(10_000)
  var next = now()
  for _ in 0..<samples {
    next += 20_000
    spinUntil(next)
    pthread_mutex_lock(&sh.mutex)
    sh.t0 = now()
    sh.posted += 1
    pthread_cond_signal(&sh.cond)
    pthread_mutex_unlock(&sh.mutex)
    // Wait until the waiter took it (keeps one sample in flight, like a wake).
    while true {
      pthread_mutex_lock(&sh.mutex)
      let taken = sh.lat.count
      pthread_mutex_unlock(&sh.mutex)
      if taken >= sh.posted { break }
      if sameCore { sched_yield() }
    }
  }
  finished.wait()
  restoreAffinity(old)
  return Percentiles(ns: sh.lat)
}

func allowedCPUs() -> [Int] {
  var buf = [Int32](repeating: 0, count: 1024)
  var n: UInt32 = 0
  _ = lanepool_allowed_cpus(&buf, 1024, &n)
  return buf.prefix(Int(min(n, 1024))).map(Int.init)
}

func restoreAffinity(_ cpus: [Int]) {
  let c = cpus.map { Int32($0) }
  _ = lpb_set_affinity(c, Int32(c.count))
}

func pinCurrentThread(to cpu: Int) {
  let c = [Int32(cpu)]
  _ = lpb_set_affinity(c, 1)
}

// MARK: - W4: priority isolation

/// Keeps `4 x lanes` background tasks of 2 ms queued while `probes` userInteractive
/// tasks are submitted 1 ms apart; submit -> start of the probes, idle and loaded.
func priorityIsolation(_ s: Subject, probes: Int) -> IsolationResult {
  func measure(loaded: Bool) -> (Percentiles, Double) {
    final class Load: Sendable {
      let running = Atomic<Bool>(true)
      let live = Atomic<Int>(0)
      let completed = Atomic<Int>(0)
    }
    let load = Load()
    if loaded {
      let chains = 4 * lanesPerBand
      load.live.store(chains, ordering: .relaxed)
      @Sendable func chain() {
        burn(ns: 2_000_000)
        load.completed.add(1, ordering: .relaxed)
        if load.running.load(ordering: .relaxed) {
          s.run(.background, chain)
        } else {
          load.live.subtract(1, ordering: .relaxed)
        }
      }
      for _ in 0..<chains { s.run(.background, chain) }
      usleep(20_000)
    }
    let slots = UnsafeMutablePointer<ProbeSlot>.allocate(capacity: probes)
    defer { slots.deallocate() }
    let c = Completion(target: probes)
    slots.initialize(repeating: ProbeSlot(completion: Unmanaged.passUnretained(c)), count: probes)
    let bgBefore = load.completed.load(ordering: .relaxed)
    let t0 = now()
    for i in 0..<probes {
      slots[i].t0 = now()
      s.probe(.userInteractive, slots + i)
      usleep(1000)
    }
    c.sem.wait()
    let bg = Double(load.completed.load(ordering: .relaxed) - bgBefore) / (Double(now() - t0) / 1e9)
    load.running.store(false, ordering: .relaxed)
    while load.live.load(ordering: .relaxed) > 0 { usleep(1000) }
    return (Percentiles(ns: (0..<probes).map { slots[$0].t1 &- slots[$0].t0 }), bg)
  }
  let idle = measure(loaded: false).0
  let (loaded, bg) = measure(loaded: true)
  return IsolationResult(idle: idle, loaded: loaded, backgroundTasksPerSecond: bg)
}

// MARK: - W5: blocking work

func threadCount() -> Int {
  (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task").count) ?? 0
}

/// 256 tasks that each sleep 20 ms at band utility: peak extra threads, wall time.
func blocking(_ s: Subject, tasks: Int = 256) -> BlockingResult {
  let baseline = threadCount()
  let c = Completion(target: tasks)
  let t0 = now()
  for _ in 0..<tasks {
    s.run(.utility) {
      usleep(20_000); c.tick()
    }
  }
  var peak = baseline
  while c.count < tasks {
    peak = max(peak, threadCount())
    usleep(1000)
  }
  c.sem.wait()
  return BlockingResult(extraThreads: peak - baseline, wallSeconds: Double(now() - t0) / 1e9)
}

// MARK: - W6: per-lane FIFO

/// Submits numbered tasks round-robin over the subject's serial lanes at
/// userInitiated; each lane checks its numbers only increase. (violations, ran)
func fifo(_ s: Subject, tasks: Int) -> (violations: Int, ran: Int) {
  final class Check: @unchecked Sendable {
    // @unchecked: `last` is only touched by the current task of each serial lane,
    // keyed by thread-independent lane identity.
    let lock = NSLock()
    var last: [ObjectIdentifier: Int] = [:]
    let violations = Atomic<Int>(0)
    let ran = Atomic<Int>(0)
  }
  let check = Check()
  let c = Completion(target: tasks)
  for seq in 0..<tasks {
    let (key, submit): (ObjectIdentifier, (@escaping @Sendable () -> Void) -> Void) =
      s.name == gcdYY.name
      ? {
        let q = yyPools[.userInitiated]!.queue(); return (ObjectIdentifier(q), { q.async(execute: $0) })
      }()
      : {
        let l = lanePool.queue(for: .userInitiated); return (ObjectIdentifier(l), { try! l.async($0) })
      }()
    submit {
      check.lock.lock()
      if let last = check.last[key], seq <= last { check.violations.add(1, ordering: .relaxed) }
      check.last[key] = seq
      check.lock.unlock()
      check.ran.add(1, ordering: .relaxed)
      c.tick()
    }
  }
  c.sem.wait()
  return (check.violations.load(ordering: .relaxed), check.ran.load(ordering: .relaxed))
}

// MARK: - W7: idle cost

/// CPU time (ns) used so far by each of this process's threads other than `me`, from
/// /proc/self/task/*/schedstat (nanosecond resolution).
func threadCPU(excluding me: Int32) -> [Int32: UInt64] {
  guard let tids = try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task") else { return [:] }
  var out: [Int32: UInt64] = [:]
  for tid in tids {
    guard let t = Int32(tid), t != me,
      let s = try? String(contentsOfFile: "/proc/self/task/\(tid)/schedstat", encoding: .utf8),
      let first = s.split(separator: " ").first, let ns = UInt64(first)
    else { continue }
    out[t] = ns
  }
  return out
}

func currentTID() -> Int32 {
  let target = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/thread-self")) ?? ""
  return Int32(target.split(separator: "/").last ?? "") ?? -1
}

/// After a burst of 100,000 tasks, the process idles for `seconds`: the CPU its other
/// threads used, as a percentage of one core.
func idleCost(_ s: Subject, seconds: Double = 1) -> Double {
  let c = Completion(target: 100_000)
  s.submitMany(100_000, .userInitiated, c)
  c.sem.wait()
  usleep(100_000)  // let spinning lanes finish their budget
  let me = currentTID()
  let before = threadCPU(excluding: me)
  usleep(UInt32(seconds * 1e6))
  // Threads may come and go meanwhile (GCD retires idle workers): count each one's
  // own growth; a thread that exited is missed (its last instants are not counted).
  let used = threadCPU(excluding: me).reduce(UInt64(0)) { sum, e in
    sum + (e.value - min(e.value, before[e.key] ?? 0))
  }
  return Double(used) / (seconds * 1e9) * 100
}
