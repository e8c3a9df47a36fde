internal import CLanePool

extension LanePool {
  /// Configuration of a custom pool.
  public struct Configuration: Sendable {
    /// Used in thread names `<name>-<band>-<i>`, truncated to fit 15 bytes.
    public var name: String = "lanepool"
    /// Lanes per band, 1...64; nil for one per CPU the process may run on
    /// (`sched_getaffinity`, so `taskset` and cgroup cpusets are honoured).
    public var lanesPerBand: Int? = nil
    /// Ring slots per lane, a power of two in 2...1,048,576; nil for 1,024.
    public var ringCapacity: Int? = nil
    /// false (default): a full ring spills to an overflow list that keeps FIFO order,
    /// so `async` never blocks or fails for lack of room. true: the ring capacity is a
    /// hard limit and `async` on a full lane throws ``LanePoolError/full``.
    public var hardCapacity: Bool = false
    /// Stack size of lane threads in bytes; nil for the system default.
    public var stackSize: Int? = nil
    /// Per-band OS policy overrides; bands not listed use ``BandPolicy/default(for:)``.
    public var policies: [QoS: BandPolicy] = [:]
    /// Permits `.fifo` / `.roundRobin` schedulers in `policies`; off by default.
    public var allowRealtime: Bool = false
    /// Where lanes run.
    public var placement: Placement = .none
    /// Receives the pool's rare log lines (priority refusals, once per pool; failed
    /// pinning), on the creating thread, during init. Never on the hot path.
    public var logHandler: (@Sendable (LogLevel, String) -> Void)? = nil
    /// Stall detector: a lane running one task longer than this is reported in its
    /// ``LaneInfo`` and once through `logHandler`. At least 1 ms; nil (default): off.
    /// Costs one timer thread per pool, waking every threshold/2.
    public var stallThreshold: Duration? = nil
    /// The low-latency setting of the userInteractive band; nil (default): off. One
    /// userInteractive lane at a time stays awake this long after its last task,
    /// watching for work (a fixed budget with a spinner slot of its own), and
    /// `queue(for:)` and `async(qos:_:)` hand that lane out first,
    /// so interactive work that comes at least this often starts without a thread
    /// wake. Cost: one CPU while it spins; nothing once the band has been idle this
    /// long. At most 100 ms. docs/benchmarks.md has the measured latency and CPU cost.
    public var interactiveSpin: Duration? = nil
    /// What the bands' nice values become where the kernel refuses the lowest of them
    /// (no `CAP_SYS_NICE` and a low `RLIMIT_NICE`, a container's usual case).
    public var unprivilegedNice: UnprivilegedNice = .clamp

    /// The defaults: pool name "lanepool", one lane per allowed CPU per band (at most 64),
    /// the default ring, LanePool's priority table, no placement, no log handler, no stall
    /// detector.
    public init() {}
  }
}

extension LanePool {
  /// ``Configuration/unprivilegedNice``'s choices.
  public enum UnprivilegedNice: Sendable, Hashable {
    /// Each refused nice goes as low as permitted, so the bands above that floor tie
    /// there (unprivileged, with the default table and a starting nice of 0: 0, 0, 0, 4,
    /// 10).
    case clamp
    /// Every band's nice moves up by one amount, read once when the pool starts, so that
    /// the lowest of them is the lowest the creating thread may set (capped at 19): the
    /// bands keep their order and gaps (unprivileged, by default: 0, 2, 5, 9, 15), at the
    /// cost of the pool's default band running below other processes' nice-0 threads.
    /// With the privilege to lower nice that far, nothing moves. ``LaneInfo`` reports the
    /// shifted values as requested.
    case shift
  }
}

extension LanePool {
  /// What C cannot see: C strings end at a NUL, and C reads 0 as "the default" or
  /// "off" where Swift has nil for that.
  static func checkSwiftOnly(_ c: Configuration) throws(LanePoolError) {
    if c.name.utf8.contains(0) { throw .invalidArgument("name must contain no NUL byte") }
    if let r = c.ringCapacity, r <= 0 {
      throw .invalidArgument("ringCapacity = \(r) is not accepted (nil means the default)")
    }
    if let s = c.stackSize, s <= 0 {  // size_t in C: a negative value would wrap
      throw .invalidArgument("stackSize = \(s) is not accepted (nil means the default)")
    }
    if let t = c.interactiveSpin, t.nanosecondsClamped == 0 {
      throw .invalidArgument("interactiveSpin = \(t) is not accepted (nil turns the low-latency setting off)")
    }
    if let t = c.stallThreshold, t.nanosecondsClamped == 0 {
      throw .invalidArgument("stallThreshold = \(t) is not accepted (nil turns the stall detector off)")
    }
    for (qos, p) in c.policies.sorted(by: { $0.key.bandIndex < $1.key.bandIndex }) {
      if let slice = p.slice, slice.nanosecondsClamped == 0 {
        throw .invalidArgument("policies[.\(qos)].slice = \(slice) is not accepted (nil leaves the kernel default)")
      }
    }
  }

  /// Calls `body` with the C configuration of `c`, valid only during the call (it
  /// points into Swift storage); `logBox` must outlive the pool that logs through it.
  static func withCConfig(
    _ c: Configuration, logBox: LogBox?, _ body: (UnsafeMutablePointer<lanepool_config_t>) -> Int32
  ) -> Int32 {
    var cfg = lanepool_config_t()
    lanepool_config_init(&cfg)
    if let n = c.lanesPerBand {
      // Clamped, never onto the "one per CPU" value: C refuses what is out of range.
      cfg.lanes_per_band = min(UInt32(clamping: n), LANEPOOL_LANES_PER_CPU - 1)
    } else {
      cfg.lanes_per_band = LANEPOOL_LANES_PER_CPU
    }
    cfg.ring_capacity = UInt32(clamping: c.ringCapacity ?? 0)
    cfg.hard_capacity = c.hardCapacity ? 1 : 0
    cfg.stack_size = c.stackSize ?? 0
    cfg.allow_realtime = c.allowRealtime ? 1 : 0
    if let t = c.stallThreshold { cfg.stall_threshold_ns = t.nanosecondsForTimeout }
    if let t = c.interactiveSpin { cfg.interactive_spin_ns = UInt32(clamping: t.nanosecondsClamped) }
    cfg.unprivileged_nice = c.unprivilegedNice == .shift ? LANEPOOL_NICE_SHIFT : LANEPOOL_NICE_CLAMP
    withUnsafeMutableBytes(of: &cfg.policy) { raw in
      let table = raw.bindMemory(to: lanepool_band_policy_t.self)
      for (qos, p) in c.policies { table[qos.bandIndex] = p.c }
    }
    // Flattened inputs the C config points into while body runs.
    var cpuList: [Int32] = []
    var topoCPUs: [[Int32]] = []
    var topoNodes: [Int32] = []
    switch c.placement {
    case .none: cfg.placement = LANEPOOL_PLACEMENT_NONE
    case .cores: cfg.placement = LANEPOOL_PLACEMENT_CORES
    case .cpus(let list):
      cfg.placement = LANEPOOL_PLACEMENT_CPU_LIST
      cpuList = list.map { Int32(clamping: $0) }
    case .numa: cfg.placement = LANEPOOL_PLACEMENT_NUMA
    case .numaTopology(let topo):
      cfg.placement = LANEPOOL_PLACEMENT_NUMA
      for (node, cpus) in topo.sorted(by: { $0.key < $1.key }) {
        topoNodes.append(Int32(clamping: node))
        topoCPUs.append(cpus.map { Int32(clamping: $0) })
      }
    }
    return withExtendedLifetime(logBox) {
      if let logBox {
        cfg.log = logTrampoline
        cfg.log_arg = Unmanaged.passUnretained(logBox).toOpaque()
      }
      return cpuList.withUnsafeBufferPointer { cpus in
        cfg.cpus = cpus.baseAddress
        cfg.cpu_count = UInt32(cpus.count)
        return withTopology(nodes: topoNodes, cpus: topoCPUs) { topology in
          cfg.topology = topology
          return c.name.withCString { name in
            cfg.name = name
            return body(&cfg)
          }
        }
      }
    }
  }
}

/// Names the setting `lanepool_config_check` refused (its C field name) as spelled in
/// ``LanePool/Configuration``, with the value given.
func describeBadSetting(_ field: String?, in c: LanePool.Configuration) -> String {
  guard let field else { return "pool configuration" }
  func band(_ b: Int) -> QoS? { QoS.allCases.first { $0.bandIndex == b } }
  // "policy[B].member"
  if field.hasPrefix("policy["), let close = field.firstIndex(of: "]"),
    let b = Int(field[field.index(field.startIndex, offsetBy: 7)..<close]), let qos = band(b)
  {
    let member = field[field.index(after: close)...].drop(while: { $0 == "." })
    let p = c.policies[qos] ?? BandPolicy.default(for: qos)
    let setting = "policies[.\(qos)]"
    switch member {
    case "sched":
      return "\(setting).scheduler = .\(p.scheduler) is not accepted"
        + (c.allowRealtime ? "" : " (real-time schedulers need allowRealtime = true)")
    case "rt_priority": return "\(setting).scheduler priority is out of range: .\(p.scheduler)"
    case "nice": return "\(setting).nice = \(p.nice) is out of range"
    case "ioprio_class", "ioprio_level": return "\(setting).ioPriority = .\(p.ioPriority) is out of range"
    case "slice_ns":
      return "\(setting).slice = \(p.slice.map { "\($0)" } ?? "nil") is not accepted"
        + " (out of range, or set with a real-time scheduler; nil leaves the kernel default)"
    case "timer_slack_ns": return "\(setting).timerSlack = \(p.timerSlack.map { "\($0)" } ?? "nil") is out of range"
    default: return "\(setting) (\(field)) is not accepted"
    }
  }
  switch field {
  case "name": return "name = \"\(c.name)\" is not accepted (it must not be empty)"
  case "lanes_per_band": return "lanesPerBand = \(c.lanesPerBand.map(String.init) ?? "nil") is out of range"
  case "ring_capacity":
    return
      "ringCapacity = \(c.ringCapacity.map(String.init) ?? "nil") is not accepted (a power of two within the documented range)"
  case "hard_capacity": return "hardCapacity is not accepted"
  case "allow_realtime": return "allowRealtime is not accepted"
  case "unprivileged_nice": return "unprivilegedNice is not accepted"
  case "interactive_spin_ns":
    return "interactiveSpin = \(c.interactiveSpin.map { "\($0)" } ?? "nil") is out of range (at most 100 ms)"
  case "stall_threshold_ns": return "stallThreshold = \(c.stallThreshold.map { "\($0)" } ?? "nil") is out of range"
  case "stack_size":
    return
      "stackSize must be 16384 bytes (PTHREAD_STACK_MIN) to 1 GiB, got \(c.stackSize.map(String.init) ?? "nil")"
  case "placement": return "placement = .\(c.placement) is not accepted"
  case "cpus":
    var list: [Int] = []
    if case .cpus(let l) = c.placement { list = l }
    return
      "placement .cpus(\(list)) is not accepted: it needs at least one CPU, and each must be one this process may run on (allowed: \(allowedCPUList()))"
  case "topology": return "placement .numaTopology is not accepted (no node with an allowed CPU, or a bad node)"
  default: return "pool configuration (\(field))"
  }
}

/// The calling thread's allowed CPUs, for messages.
private func allowedCPUList() -> [Int] {
  var buf = [Int32](repeating: 0, count: 1024)
  var n: UInt32 = 0
  guard lanepool_allowed_cpus(&buf, UInt32(buf.count), &n) == 0 else { return [] }
  return buf.prefix(Int(min(n, UInt32(buf.count)))).map(Int.init)
}

/// Calls `body` with a C topology built from parallel arrays (nil when there are no nodes).
private func withTopology<R>(
  nodes: [Int32], cpus: [[Int32]], _ body: (UnsafePointer<lanepool_topology_t>?) -> R
) -> R {
  if nodes.isEmpty { return body(nil) }
  // Keep every CPU array alive in one flat buffer while body runs.
  let flat = cpus.flatMap { $0 }
  return flat.withUnsafeBufferPointer { flatBuf in
    var offset = 0
    var cNodes: [lanepool_topology_node_t] = []
    for (i, node) in nodes.enumerated() {
      cNodes.append(
        lanepool_topology_node_t(
          node: node, cpu_count: UInt32(cpus[i].count),
          cpus: cpus[i].isEmpty ? nil : flatBuf.baseAddress! + offset))
      offset += cpus[i].count
    }
    return cNodes.withUnsafeBufferPointer { nodeBuf in
      var topo = lanepool_topology_t(node_count: UInt32(nodeBuf.count), nodes: nodeBuf.baseAddress)
      return withUnsafePointer(to: &topo) { body($0) }
    }
  }
}
