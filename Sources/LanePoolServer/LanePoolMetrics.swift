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
  /// Names follow Prometheus' conventions (snake case, the base unit in the name, `_total`
  /// on counters); every metric has the dimensions `pool` and `qos`:
  ///
  /// | label | type | what |
  /// |---|---|---|
  /// | `lanepool_tasks_executed_total` | `Counter` | tasks run to completion; the sampler's own probes are not counted |
  /// | `lanepool_queue_depth` | `Gauge` | tasks queued now, summed over the band's lanes |
  /// | `lanepool_queue_wait_seconds` | `Timer` | submit to start of a sampling probe, one per lane per pass |
  /// | `lanepool_busy_seconds_total` | `FloatingPointCounter` | time the band's lanes spent running tasks |
  /// | `lanepool_busy_ratio` | `Gauge` | share of the last interval the band's lanes were busy, 0...1 |
  ///
  /// A `Timer` records nanoseconds and the backend converts: swift-prometheus exports it
  /// as a histogram in seconds. Its default buckets start at 5 ms, while an idle lane
  /// picks a task up in tens of microseconds, so give this timer
  /// ``queueWaitBuckets`` (see <doc:PrometheusSetup>). Mean run time per task is
  /// `rate(lanepool_busy_seconds_total) / rate(lanepool_tasks_executed_total)`.
  ///
  /// Run it as a `Service` (it stops at graceful shutdown or cancellation), or call
  /// ``sample()`` yourself.
  public final class LanePoolMetrics: Service, Sendable {
    /// The metric labels, as they reach the `MetricsFactory`.
    public enum Label {
      /// `Counter`: tasks run to completion, sampler probes excluded.
      public static let tasksExecuted = "lanepool_tasks_executed_total"
      /// `Gauge`: tasks queued now, over the band's lanes (a lane's one pending sampler
      /// probe included).
      public static let queueDepth = "lanepool_queue_depth"
      /// `Timer`: how long a sampling probe waited from submit to start.
      public static let queueWait = "lanepool_queue_wait_seconds"
      /// `FloatingPointCounter`, seconds: time the band's lanes spent running tasks
      /// (the probes' few hundred nanoseconds each included).
      public static let busyTime = "lanepool_busy_seconds_total"
      /// `Gauge`, 0...1: share of the last sampling interval the band's lanes were busy.
      public static let busyRatio = "lanepool_busy_ratio"
    }

    /// Histogram buckets for ``Label/queueWait``, 10 µs to 10 s: an idle lane wakes in
    /// about 20 µs (p99 about 35 µs on the development VM), a loaded one in
    /// milliseconds. For swift-prometheus:
    /// `factory.durationHistogramBuckets[LanePoolMetrics.Label.queueWait] = LanePoolMetrics.queueWaitBuckets`.
    public static let queueWaitBuckets: [Duration] = [
      .microseconds(10), .microseconds(25), .microseconds(50), .microseconds(100),
      .microseconds(250), .microseconds(500), .milliseconds(1), .microseconds(2500),
      .milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50),
      .milliseconds(100), .milliseconds(250), .milliseconds(500), .seconds(1),
      .milliseconds(2500), .seconds(5), .seconds(10),
    ]

    /// The pool sampled.
    public let pool: LanePool
    /// Time between two sampling passes when run as a `Service`.
    public let interval: Duration
    private let bands: [BandMetrics]

    /// A collector for `pool`'s five bands. It creates its metrics now, from `factory`
    /// (by default the one `MetricsSystem` was bootstrapped with, so bootstrap first),
    /// and counts only what runs from now on.
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

    /// One sampling pass over every lane. Safe to call from any thread; passes run one
    /// at a time per band.
    public func sample() {
      for band in bands { band.sample() }
    }
  }

  /// One lane's sampling probe. At most one is queued or running per lane, so a stalled
  /// lane does not collect probes, and at most one has started without the lane having
  /// counted it yet.
  private final class Probe: Sendable {
    /// Probes that began running on the lane.
    let started = Atomic<UInt64>(0)
    /// A probe is queued or running.
    let pending = Atomic<Bool>(false)
  }

  /// What the previous pass saw of one lane.
  private struct LaneSample {
    var busyNs: UInt64
    var at: UInt64  // uptime ns
  }

  /// What the previous pass saw of the band: its lanes, and the tasks its lanes' threads
  /// and its rescue lane's thread executed, probes excluded. Counted for the band, not per
  /// lane: a lane's thread may run another lane's queue, probe included (that lane's
  /// thread away), and counts what it ran; so does the rescue thread, for band jobs and
  /// lanes' queues it runs while the band is stuck.
  private struct BandSample {
    var lanes: [LaneSample]
    var tasks: UInt64
  }

  private final class BandMetrics: Sendable {
    let qos: QoS
    let lanes: [Lane]
    /// The band's lanes and its rescue lane: whose threads' task counts make the band's.
    let counted: [Lane]
    let probes: [Probe]
    let executed: Counter
    let depth: Gauge
    let wait: Metrics.Timer
    let busyTime: FloatingPointCounter
    let busyRatio: Gauge
    // Touched by sample() only; the Mutex makes that safe to call from anywhere.
    let previous: Mutex<BandSample>

    init(pool: LanePool, qos: QoS, factory: any MetricsFactory) {
      typealias L = LanePoolMetrics.Label
      self.qos = qos
      self.lanes = pool.lanes(for: qos)
      self.counted = lanes + pool.rescueLanes.filter { $0.qos == qos }
      self.probes = lanes.map { _ in Probe() }
      let dims = [("pool", pool.name), ("qos", "\(qos)")]
      executed = Counter(label: L.tasksExecuted, dimensions: dims, factory: factory)
      depth = Gauge(label: L.queueDepth, dimensions: dims, factory: factory)
      wait = Metrics.Timer(label: L.queueWait, dimensions: dims, preferredDisplayUnit: .seconds, factory: factory)
      busyTime = FloatingPointCounter(label: L.busyTime, dimensions: dims, factory: factory)
      busyRatio = Gauge(label: L.busyRatio, dimensions: dims, factory: factory)
      let now = DispatchTime.now().uptimeNanoseconds
      let infos = lanes.map { $0.info }
      previous = Mutex(
        BandSample(
          lanes: infos.map { LaneSample(busyNs: nanoseconds($0.busyTime), at: now) },
          tasks: counted.reduce(0) { $0 + $1.info.tasksExecuted }))
    }

    func sample() {
      let now = DispatchTime.now().uptimeNanoseconds
      var totalDepth: UInt64 = 0
      var busy: UInt64 = 0
      var span: UInt64 = 0
      previous.withLock { prev in
        let infos = counted.map { $0.info }  // the band's lanes, then its rescue lane
        // A lane's thread counts a task after it returns, with a release store that the
        // info reads above load; this fence makes every probe start that happened before
        // a counted probe's end visible below. So `started` covers every probe in the
        // lanes' counts, and at most one more per lane (those running now): the
        // difference is a lower bound of the other tasks run, exact once they are counted.
        atomicMemoryFence(ordering: .acquiring)
        let probesStarted = probes.reduce(0) { $0 + $1.started.load(ordering: .relaxed) }
        let executedAll = infos.reduce(0) { $0 + $1.tasksExecuted }
        let tasks = executedAll >= probesStarted ? executedAll - probesStarted : 0
        if tasks > prev.tasks {
          executed.increment(by: Int64(clamping: tasks - prev.tasks))
          prev.tasks = tasks
        }
        for (k, lane) in lanes.enumerated() {
          let info = infos[k]
          let busyNs = nanoseconds(info.busyTime)
          let busyDelta = busyNs &- prev.lanes[k].busyNs
          if busyDelta > 0 { busyTime.increment(by: Double(busyDelta) / 1e9) }
          busy += busyDelta
          span += now &- prev.lanes[k].at
          totalDepth += info.depth
          prev.lanes[k].busyNs = busyNs
          prev.lanes[k].at = now
          sendProbe(lane, probes[k])
        }
      }
      depth.record(Int64(clamping: totalDepth))
      if span > 0 { busyRatio.record(min(1, Double(busy) / Double(span))) }
    }

    /// Queue wait, sampled: a probe that records how long it waited, unless the lane's
    /// previous probe is still queued or running.
    private func sendProbe(_ lane: Lane, _ probe: Probe) {
      guard probe.pending.compareExchange(expected: false, desired: true, ordering: .relaxed).exchanged else {
        return
      }
      let waitTimer = wait
      let submitted = DispatchTime.now().uptimeNanoseconds
      do {
        try lane.async {
          probe.started.add(1, ordering: .relaxed)
          let waited = DispatchTime.now().uptimeNanoseconds &- submitted
          // Free for the next pass before the value is out: a pass that follows the
          // recorded value (a test's, a scrape's) must not find this probe still pending
          // and skip its lane (the band then lagged one probe behind for good).
          probe.pending.store(false, ordering: .releasing)
          waitTimer.recordNanoseconds(Int64(clamping: waited))
        }
      } catch {
        probe.pending.store(false, ordering: .relaxed)  // shut down: nothing to measure
      }
    }
  }

  private func nanoseconds(_ d: Duration) -> UInt64 {
    let (s, atto) = d.components
    return UInt64(max(0, s)) * 1_000_000_000 + UInt64(max(0, atto) / 1_000_000_000)
  }
#endif  // Server
