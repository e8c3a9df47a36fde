#if Server  // see ServerTrait.swift
import Dispatch
import LanePool
import Metrics
import ServiceLifecycle
import Synchronization

/// Publishes a pool's per-band metrics through swift-metrics by *sampling*: every
/// `interval` it reads each lane's counters (no lock, no hot-path cost) and sends one
/// probe task per lane to measure queue wait. The submit and run paths pay nothing.
///
/// Metrics, each with dimensions `pool` and `qos`:
/// - `lanepool_tasks_executed_total` (counter): tasks run to completion.
/// - `lanepool_queue_depth` (gauge): tasks queued now, summed over the band's lanes.
/// - `lanepool_queue_wait` (timer): submit -> start of the sampling probe, per lane.
/// - `lanepool_task_run_time` (timer): mean run time per task over the interval (busy
///   time / tasks run), per lane that ran tasks.
/// - `lanepool_busy_ratio` (gauge): share of the interval the band's lanes were busy.
///
/// Run it as a `Service` (it stops at graceful shutdown or cancellation), or call
/// ``sample()`` yourself.
public final class LanePoolMetrics: Service, Sendable {
  public let pool: LanePool
  public let interval: Duration
  private let bands: [BandMetrics]

  public init(pool: LanePool, interval: Duration = .seconds(1), factory: any MetricsFactory = MetricsSystem.factory) {
    self.pool = pool
    self.interval = interval
    self.bands = QoS.allCases.map { BandMetrics(pool: pool, qos: $0, factory: factory) }
  }

  /// Samples every `interval` until graceful shutdown or cancellation, then returns.
  public func run() async throws {
    do {
      try await cancelWhenGracefulShutdown {
        while !Task.isCancelled {
          self.sample()
          try await Task.sleep(for: self.interval)
        }
      }
    } catch is CancellationError {
      return  // stopping is this service's normal end
    }
  }

  /// One sampling pass over every lane.
  public func sample() {
    for band in bands { band.sample() }
  }
}

private final class BandMetrics: Sendable {
  let qos: QoS
  let lanes: [Lane]
  let executed: Counter
  let depth: Gauge
  let wait: Metrics.Timer
  let runTime: Metrics.Timer
  let busyRatio: Gauge
  // Previous sample per lane: (tasks executed, busy ns, when). Touched by sample() only,
  // which runs on one task at a time; the Mutex makes that safe to call from anywhere.
  let previous: Mutex<[(UInt64, UInt64, UInt64)]>

  init(pool: LanePool, qos: QoS, factory: any MetricsFactory) {
    self.qos = qos
    self.lanes = pool.lanes(for: qos)
    let dims = [("pool", pool.name), ("qos", "\(qos)")]
    executed = Counter(label: "lanepool_tasks_executed_total", dimensions: dims, factory: factory)
    depth = Gauge(label: "lanepool_queue_depth", dimensions: dims, factory: factory)
    wait = Metrics.Timer(label: "lanepool_queue_wait", dimensions: dims, factory: factory)
    runTime = Metrics.Timer(label: "lanepool_task_run_time", dimensions: dims, factory: factory)
    busyRatio = Gauge(label: "lanepool_busy_ratio", dimensions: dims, factory: factory)
    let now = DispatchTime.now().uptimeNanoseconds
    previous = Mutex(lanes.map { lane in
      let i = lane.info
      return (i.tasksExecuted, nanoseconds(i.busyTime), now)
    })
  }

  func sample() {
    let now = DispatchTime.now().uptimeNanoseconds
    var totalDepth: UInt64 = 0
    var busy: UInt64 = 0
    var span: UInt64 = 0
    previous.withLock { prev in
      for (k, lane) in lanes.enumerated() {
        let info = lane.info
        let busyNs = nanoseconds(info.busyTime)
        let (lastRun, lastBusy, lastTime) = prev[k]
        let ran = info.tasksExecuted &- lastRun
        let busyDelta = busyNs &- lastBusy
        if ran > 0 {
          executed.increment(by: Int64(clamping: ran))
          runTime.recordNanoseconds(Int64(clamping: busyDelta / ran))
        }
        busy += busyDelta
        span += now &- lastTime
        totalDepth += info.depth
        prev[k] = (info.tasksExecuted, busyNs, now)
        // Queue wait, sampled: one probe per lane per pass.
        let submitted = now
        let waitTimer = wait
        try? lane.async { waitTimer.recordNanoseconds(Int64(clamping: DispatchTime.now().uptimeNanoseconds &- submitted)) }
      }
    }
    depth.record(Int64(clamping: totalDepth))
    if span > 0 { busyRatio.record(Double(busy) / Double(span)) }
  }
}

private func nanoseconds(_ d: Duration) -> UInt64 {
  let (s, atto) = d.components
  return UInt64(max(0, s)) * 1_000_000_000 + UInt64(max(0, atto) / 1_000_000_000)
}
#endif  // Server
