internal import CLanePool
import Foundation
import Synchronization

/// A pool of lanes: five QoS bands, each with the same number of lanes (by default one
/// per CPU the process may run on), every lane a thread that runs its tasks in order.
///
/// The process-wide ``default`` pool is created on first use and never shut down, as
/// YYDispatchQueuePool's are. A custom pool runs until ``shutdownGracefully()`` or
/// ``shutdown(discardingQueued:)``: like a NIO event loop group, dropping your last
/// reference does not stop its threads (stopping them there could deadlock, when the
/// last reference goes on one of its own lanes, or block for as long as a drain
/// takes). Instead the pool warns once: if it is released without a shutdown, it says
/// so through its ``Configuration/logHandler`` if it has one, otherwise in one line on
/// stderr, once per process, naming the pool and asking for `shutdownGracefully()`.
///
/// Swift concurrency jobs are never dropped: after a shutdown (and for jobs a
/// cancelling shutdown discards), jobs of actors on the pool's lanes run on a
/// fallback serial queue and jobs of tasks that prefer the pool on Dispatch's global
/// queue, so no task hangs (see ``Lane/enqueue(_:)``).
///
/// ```swift
/// LanePool.queue(for: .userInitiated).async { render() }   // YYDispatchQueueGetForQOS
/// let pool = try LanePool(name: "db", lanesPerBand: 4)
/// try pool.queue(for: .utility, key: userID).async { ... } // same key, same lane
/// try await pool.shutdownGracefully()
/// ```
public final class LanePool: @unchecked Sendable {
  // @unchecked: stored properties are `let`s or atomics; the C pool is thread-safe.
  let core: PoolCore
  let bands: [[Lane]]
  private let lanesRetained = Atomic<Bool>(true)

  /// The name given at creation; lane threads are named `<name>-<band>-<i>`.
  public let name: String
  /// Lanes in each band.
  public let lanesPerBand: Int
  /// True for the process-wide default pool.
  public let isDefault: Bool

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

    public init() {}
  }

  /// Starts a pool; returns once its 5 × lanesPerBand threads run.
  /// - Throws: ``LanePoolError/invalidArgument(_:)`` naming the bad setting, or
  ///   ``LanePoolError/system(errno:)`` when threads or memory cannot be had.
  public convenience init(
    name: String = "lanepool", lanesPerBand: Int? = nil, ringCapacity: Int? = nil,
    hardCapacity: Bool = false, stackSize: Int? = nil, placement: Placement = .none,
    policies: [QoS: BandPolicy] = [:], logHandler: (@Sendable (LogLevel, String) -> Void)? = nil
  ) throws(LanePoolError) {
    var c = Configuration()
    c.name = name
    c.lanesPerBand = lanesPerBand
    c.ringCapacity = ringCapacity
    c.hardCapacity = hardCapacity
    c.stackSize = stackSize
    c.placement = placement
    c.policies = policies
    c.logHandler = logHandler
    try self.init(configuration: c)
  }

  /// Starts a pool from a configuration. The C core decides which settings are valid
  /// (`lanepool_config_check`); an invalid one throws ``LanePoolError/invalidArgument(_:)``
  /// naming it as spelled here (for example `lanesPerBand`, `policies[.utility].nice`,
  /// `placement .cpus`).
  public convenience init(configuration c: Configuration) throws(LanePoolError) {
    try Self.checkSwiftOnly(c)
    let logBox = c.logHandler.map(LogBox.init)
    var raw: OpaquePointer?
    var badField: UnsafePointer<CChar>?
    var checked = false
    let rc: Int32 = Self.withCConfig(c, logBox: logBox) { cfg in
      let check = lanepool_config_check(cfg, &badField)
      if check != 0 { return check }
      checked = true
      return lanepool_create(cfg, &raw)
    }
    if rc == Errno.ENOTSUP {
      throw .unsupported(
        "NUMA placement needs libnuma: build with the NUMA trait (swift build --traits NUMA) on a machine where numa_available() works")
    }
    if rc == Errno.EINVAL && !checked {
      throw .invalidArgument(describeBadSetting(badField.map { String(cString: $0) }, in: c))
    }
    guard rc == 0, let raw else {
      // Past the check: EAGAIN here is pthread_create's (out of threads), not a full lane.
      throw LanePoolError(
        errno: rc, context: .threads("starting the lanes of pool '\(c.name)'"),
        what: "pool configuration (refused by lanepool_create)")
    }
    self.init(raw: raw, isDefault: false, logBox: logBox)
  }

  /// What C cannot see: C strings end at a NUL, and C reads 0 as "the default" or
  /// "off" where Swift has nil for that.
  private static func checkSwiftOnly(_ c: Configuration) throws(LanePoolError) {
    if c.name.utf8.contains(0) { throw .invalidArgument("name must contain no NUL byte") }
    if let r = c.ringCapacity, r <= 0 {
      throw .invalidArgument("ringCapacity = \(r) is not accepted (nil means the default)")
    }
    if let s = c.stackSize, s <= 0 {  // size_t in C: a negative value would wrap
      throw .invalidArgument("stackSize = \(s) is not accepted (nil means the default)")
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
  private static func withCConfig(
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

  private init(raw: OpaquePointer, isDefault: Bool, logBox: LogBox? = nil) {
    let core = PoolCore(raw: raw, isDefault: isDefault, logBox: logBox)
    var info = lanepool_info_t()
    _ = lanepool_info(raw, &info)
    let perBand = Int(info.lanes_per_band)
    var bands: [[Lane]] = []
    for qos in QoS.allCases {
      var band: [Lane] = []
      for i in 0..<perBand {
        var lane: OpaquePointer?
        _ = lanepool_get_lane(raw, qos.c, UInt32(i), &lane)
        let l = Lane(raw: lane!, core: core, qos: qos, index: i)
        // The C lane holds its Swift object (+1) until the pool has shut down, so
        // Lane.current works from any task for as long as lanes run.
        _ = lanepool_lane_set_userdata(lane, Unmanaged.passRetained(l).toOpaque())
        band.append(l)
      }
      bands.append(band)
    }
    self.core = core
    self.bands = bands
    self.lanesPerBand = perBand
    self.isDefault = isDefault
    self.name = withUnsafeBytes(of: info.name) { b in
      String(decoding: b.prefix(while: { $0 != 0 }), as: UTF8.self)
    }
    for lane in bands.joined() { lane.pool = self }
  }

  /// The process-wide default pool, created on first use and never shut down.
  ///
  /// Lanes per band: the smaller of the CPUs the process may run on
  /// (`sched_getaffinity`) and its cgroup CPU quota (v2 `cpu.max`, v1
  /// `cpu.cfs_quota_us`, rounded up), at most 64; or as set by ``configureDefault(_:)``
  /// and the environment (`LANEPOOL_DEFAULT_LANES`, `LANEPOOL_DEFAULT_PLACEMENT`,
  /// `LANEPOOL_DEFAULT_RING`; see the README).
  ///
  /// If the pool cannot start (a bad environment value, no threads to be had), this
  /// stops the program with a message naming the cause. Use ``makeDefault()`` to
  /// handle that as an error instead.
  public static let `default`: LanePool = {
    do throws(LanePoolError) {
      return try makeDefault()
    } catch {
      misuse(
        "cannot start the default pool: \(error.message). Call LanePool.makeDefault() (it throws) to handle this instead of stopping")
    }
  }()

  /// The default pool once made, and the log handler given to ``configureDefault(_:)``
  /// (kept for the life of the process). NSLock rather than Mutex: ThreadSanitizer
  /// sees it.
  private final class DefaultState: @unchecked Sendable {
    let lock = NSLock()
    var pool: LanePool?
    var logBox: LogBox?
    func withLock<R>(_ body: (DefaultState) -> R) -> R {
      lock.lock()
      defer { lock.unlock() }
      return body(self)
    }
  }
  private static let defaultState = DefaultState()

  /// The process-wide default pool (the same object as ``default``), created on first
  /// use; throws instead of stopping the program when it cannot start.
  ///
  /// A failed start creates nothing, and a later call tries again.
  /// - Throws: ``LanePoolError/invalidArgument(_:)`` naming the environment variable
  ///   with a bad value (`LANEPOOL_DEFAULT_LANES` not in 1...64,
  ///   `LANEPOOL_DEFAULT_PLACEMENT` not `none` or `cores`, `LANEPOOL_DEFAULT_RING` not a
  ///   power of two in 2...1,048,576) or the setting of ``configureDefault(_:)`` the
  ///   core refused; ``LanePoolError/system(errno:)`` when threads or memory cannot be had.
  public static func makeDefault() throws(LanePoolError) -> LanePool {
    let result: Result<LanePool, LanePoolError> = defaultState.withLock { state in
      if let cached = state.pool { return .success(cached) }
      var raw: OpaquePointer?
      let rc = lanepool_default(&raw)
      guard rc == 0, let raw else {
        if rc == Errno.EINVAL, let bad = badDefaultEnvironment() {
          return .failure(.invalidArgument(bad))
        }
        return .failure(
          LanePoolError(
            errno: rc, context: .threads("starting the default pool"),
            what: "default pool configuration (set by LanePool.configureDefault or LANEPOOL_DEFAULT_* variables)"))
      }
      let pool = LanePool(raw: raw, isDefault: true, logBox: state.logBox)
      state.pool = pool
      return .success(pool)
    }
    return try result.get()
  }

  /// Configures the default pool before its first use (``default``, ``makeDefault()``,
  /// ``queue(for:)-type.method`` and the executors that run on it).
  ///
  /// The settings are checked as ``init(configuration:)`` checks them and kept; the
  /// default pool is created from them on first use. A second call before then
  /// replaces the first. The environment variables `LANEPOOL_DEFAULT_LANES`,
  /// `LANEPOOL_DEFAULT_PLACEMENT` and `LANEPOOL_DEFAULT_RING` still override what is
  /// set here, so an operator can resize a deployed program. `lanesPerBand = nil`
  /// sizes it as the unconfigured default: min(allowed CPUs, CPU quota).
  /// - Throws: ``LanePoolError/invalidArgument(_:)`` naming the bad setting (a
  ///   `.numaTopology` placement is not accepted for the default pool; `.numa` is);
  ///   ``LanePoolError/unsupported(_:)`` for NUMA placement without libnuma; an error
  ///   with code ``LanePoolError/Code/notPermitted`` (errno EALREADY) once the default
  ///   pool exists, and then nothing changes.
  public static func configureDefault(_ configuration: Configuration) throws(LanePoolError) {
    let c = configuration
    try checkSwiftOnly(c)
    if case .numaTopology = c.placement {
      throw .invalidArgument(
        "placement .numaTopology is not accepted for the default pool (use .numa, or a pool of your own)")
    }
    let logBox = c.logHandler.map(LogBox.init)
    var badField: UnsafePointer<CChar>?
    var checked = false
    let rc: Int32 = defaultState.withLock { state in
      let rc = withCConfig(c, logBox: logBox) { cfg in
        let check = lanepool_config_check(cfg, &badField)
        if check != 0 { return check }
        checked = true
        return lanepool_default_configure(cfg)
      }
      if rc == 0 { state.logBox = logBox }
      return rc
    }
    switch rc {
    case 0: return
    case Errno.EALREADY:
      throw LanePoolError(
        code: .notPermitted, errno: rc,
        message: "the default pool already exists: LanePool.configureDefault must be called before its first use (LanePool.default, makeDefault(), queue(for:), the executors)")
    case Errno.ENOTSUP:
      throw .unsupported(
        "NUMA placement needs libnuma: build with the NUMA trait (swift build --traits NUMA) on a machine where numa_available() works")
    case Errno.EINVAL where !checked:
      throw .invalidArgument(describeBadSetting(badField.map { String(cString: $0) }, in: c))
    default:
      throw LanePoolError(
        errno: rc, context: .threads("configuring the default pool"),
        what: "default pool configuration (refused by lanepool_default_configure)")
    }
  }

  /// Names the LANEPOOL_DEFAULT_* variable with a value the C core refuses (same rules).
  static func badDefaultEnvironment() -> String? {
    let env = ProcessInfo.processInfo.environment
    func digits(_ s: String) -> Int? {
      guard !s.isEmpty, s.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
      return Int(s)
    }
    if let v = env["LANEPOOL_DEFAULT_LANES"], !v.isEmpty {
      guard let n = digits(v), (1...64).contains(n) else {
        return "LANEPOOL_DEFAULT_LANES = \"\(v)\" is not accepted (lanes per band of the default pool: 1...64)"
      }
    }
    if let v = env["LANEPOOL_DEFAULT_PLACEMENT"], !v.isEmpty, v != "none", v != "cores" {
      return "LANEPOOL_DEFAULT_PLACEMENT = \"\(v)\" is not accepted (none or cores)"
    }
    if let v = env["LANEPOOL_DEFAULT_RING"], !v.isEmpty {
      guard let n = digits(v), (2...(1 << 20)).contains(n), n & (n - 1) == 0 else {
        return "LANEPOOL_DEFAULT_RING = \"\(v)\" is not accepted (a power of two in 2...1048576)"
      }
    }
    return nil
  }

  // MARK: Picking lanes

  /// The next lane of the band, round-robin: YYDispatchQueuePool's `-queue`. One atomic add.
  public func queue(for qos: QoS) -> Lane {
    var lane: OpaquePointer?
    _ = lanepool_next_lane(core.raw, qos.c, &lane)
    return swiftLane(lane, qos)
  }

  /// The Swift object of a C lane of band `qos`.
  private func swiftLane(_ lane: OpaquePointer?, _ qos: QoS) -> Lane {
    var q = lanepool_qos_t(rawValue: 0)
    var index: UInt32 = 0
    _ = lanepool_lane_position(lane, &q, &index)
    return bands[qos.bandIndex][Int(index)]
  }

  /// A lane of the default pool, round-robin: `YYDispatchQueueGetForQOS(qos)`.
  public static func queue(for qos: QoS) -> Lane { LanePool.default.queue(for: qos) }

  /// The lane `key` maps to: the same key always gives the same lane (within this
  /// process), so tasks for one key run in submission order.
  public func queue(for qos: QoS, key: some Hashable) -> Lane {
    var lane: OpaquePointer?
    _ = lanepool_lane_for_key(core.raw, qos.c, UInt64(bitPattern: Int64(key.hashValue)), &lane)
    return swiftLane(lane, qos)
  }

  /// The lanes of a band, by index.
  public func lanes(for qos: QoS) -> [Lane] { bands[qos.bandIndex] }

  /// Every lane of the pool, band by band.
  public var allLanes: [Lane] { bands.flatMap { $0 } }

  // MARK: Submitting

  /// Runs `work` on some lane of the band: the less loaded of two picked at random.
  /// For unordered work; use ``queue(for:)-method`` or a keyed lane when order matters.
  /// - Throws: as ``Lane/async(_:)``.
  public func async(qos: QoS, _ work: @escaping @Sendable () -> Void) throws(LanePoolError) {
    try async(qos: qos, work, onDiscard: nil)
  }

  /// As ``async(qos:_:)``; `onDiscard` runs instead of `work` if a cancelling shutdown
  /// discards the task.
  func async(
    qos: QoS, _ work: @escaping @Sendable () -> Void, onDiscard: (@Sendable () -> Void)?
  ) throws(LanePoolError) {
    let ctx = TaskBox.retain(work, onDiscard: onDiscard)
    let rc = lanepool_async(core.raw, qos.c, taskTrampoline, ctx)
    if rc != 0 {
      TaskBox.release(ctx)
      throw LanePoolError(errno: rc)
    }
  }

  // MARK: Shutdown

  /// True once a shutdown has started.
  public var isShutDown: Bool {
    var info = lanepool_info_t()
    _ = lanepool_info(core.raw, &info)
    return info.shut_down != 0
  }

  /// Stops intake, runs every task already accepted, then joins the lanes. Returns
  /// when all lane threads have exited. Calling it again is harmless.
  /// - Throws: ``LanePoolError/notPermitted`` for the default pool,
  ///   ``LanePoolError/wouldDeadlock`` when called from one of this pool's lanes.
  public func shutdownGracefully() async throws(LanePoolError) {
    try await runOffCooperativePool { () throws(LanePoolError) in
      _ = try self.shutdown(discardingQueued: false)
    }
  }

  /// Stops the pool and blocks until every lane thread has exited.
  ///
  /// With `discardingQueued: false` every accepted task runs first (drain). With
  /// `true` each lane finishes the task it is running and every task still queued is
  /// discarded: a closure is released without running, a ``Lane/run(_:)`` or
  /// ``LanePool/run(qos:_:)`` caller waiting for it gets `CancellationError`, a group
  /// member (``Lane/async(group:_:)``) leaves its group, and a Swift concurrency job
  /// still runs, on the fallback (jobs are never dropped). Called while a drain is
  /// under way (from another thread), a cancelling shutdown turns it into a cancel,
  /// and returns when it has finished. Calling it after a shutdown finished returns 0.
  /// - Returns: how many queued tasks were discarded (Swift jobs included).
  /// - Throws: ``LanePoolError/notPermitted`` (default pool),
  ///   ``LanePoolError/wouldDeadlock`` (called from one of this pool's lanes).
  @discardableResult
  public func shutdown(discardingQueued: Bool) throws(LanePoolError) -> Int {
    let discards = Discards(pool: self)
    let rc = withExtendedLifetime(discards) {
      lanepool_shutdown(
        core.raw, discardingQueued ? LANEPOOL_SHUTDOWN_CANCEL : LANEPOOL_SHUTDOWN_DRAIN,
        discardingQueued ? discardTask : nil,
        discardingQueued ? Unmanaged.passUnretained(discards).toOpaque() : nil)
    }
    switch rc {
    case 0, Errno.EALREADY:
      // Every lane thread has exited: the fallback may run the jobs it holds.
      releaseLanes()
      core.fallback.open()
      return discards.count.load(ordering: .acquiring)
    case Errno.EOWNERDEAD:
      core.fallback.open()  // a fork child: the pool has no threads here
      throw .forked
    default:
      throw LanePoolError(errno: rc)
    }
  }

  deinit {
    guard !isDefault else { return }
    var info = lanepool_info_t()
    guard lanepool_info(core.raw, &info) == 0, info.shut_down == 0 else { return }
    let message =
      "LanePool: pool '\(name)' was released without shutdown; its \(5 * lanesPerBand) lane threads keep running until the process exits. Call shutdownGracefully() or shutdown(discardingQueued:) before releasing it."
    if let log = core.logBox {
      log.handler(.warning, message)
    } else if !releasedWithoutShutdownWarned.exchange(true, ordering: .relaxed) {
      FileHandle.standardError.write(Data((message + "\n").utf8))
    }
  }

  /// Drops the +1 each C lane holds on its Swift object, once, after the threads exited.
  private func releaseLanes() {
    guard lanesRetained.exchange(false, ordering: .acquiringAndReleasing) else { return }
    for lane in bands.joined() {
      var ud: UnsafeMutableRawPointer?
      _ = lanepool_lane_userdata(lane.raw, &ud)
      _ = lanepool_lane_set_userdata(lane.raw, nil)
      if let ud { Unmanaged<Lane>.fromOpaque(ud).release() }
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
    return "ringCapacity = \(c.ringCapacity.map(String.init) ?? "nil") is not accepted (a power of two within the documented range)"
  case "hard_capacity": return "hardCapacity is not accepted"
  case "allow_realtime": return "allowRealtime is not accepted"
  case "stall_threshold_ns": return "stallThreshold = \(c.stallThreshold.map { "\($0)" } ?? "nil") is out of range"
  case "stack_size":
    return "stackSize must be at least 16384 bytes (PTHREAD_STACK_MIN), got \(c.stackSize.map(String.init) ?? "nil")"
  case "placement": return "placement = .\(c.placement) is not accepted"
  case "cpus":
    var list: [Int] = []
    if case .cpus(let l) = c.placement { list = l }
    return "placement .cpus(\(list)) is not accepted: it needs at least one CPU, and each must be one this process may run on (allowed: \(allowedCPUList()))"
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

/// Carries the log handler through C during lanepool_create.
final class LogBox: Sendable {
  let handler: @Sendable (LogLevel, String) -> Void
  init(_ handler: @escaping @Sendable (LogLevel, String) -> Void) { self.handler = handler }
}

private let logTrampoline:
  @convention(c) (lanepool_log_level_t, UnsafePointer<CChar>?, UnsafeMutableRawPointer?) -> Void = {
    level, message, arg in
    guard let arg, let message else { return }
    Unmanaged<LogBox>.fromOpaque(arg).takeUnretainedValue().handler(
      level == LANEPOOL_LOG_WARNING ? .warning : .info, String(cString: message))
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

/// One line on stderr per process for pools released without shutdown (pools with a
/// log handler say it there instead, each).
private let releasedWithoutShutdownWarned = Atomic<Bool>(false)

/// What a cancelling shutdown's discard callback needs: the pool and a counter.
final class Discards: Sendable {
  let pool: LanePool
  let count = Atomic<Int>(0)
  init(pool: LanePool) { self.pool = pool }
}

/// Takes a task that a cancelling shutdown removed: a closure is released (after its
/// on-discard action: resume a `run` caller, leave a group), a Swift job is handed to
/// a fallback so that it still runs. Counts it.
private let discardTask:
  @convention(c) (lanepool_fn?, UnsafeMutableRawPointer?, UnsafeMutableRawPointer?) -> Void = {
    fn, ctx, arg in
    guard let arg else { return }
    let discards = Unmanaged<Discards>.fromOpaque(arg).takeUnretainedValue()
    discards.count.add(1, ordering: .relaxed)
    guard let fn, let ctx else { return }
    let address = unsafeBitCast(fn, to: UnsafeRawPointer.self)
    if address == unsafeBitCast(taskTrampoline, to: UnsafeRawPointer.self) {
      let box = Unmanaged<TaskBox>.fromOpaque(ctx).takeRetainedValue()
      box.onDiscard?()
    } else if address == unsafeBitCast(serialJobTrampoline, to: UnsafeRawPointer.self) {
      discards.pool.core.fallback.discarded(.discardedJob(unsafeBitCast(ctx, to: UnownedJob.self)))
    } else if address == unsafeBitCast(poolJobTrampoline, to: UnsafeRawPointer.self) {
      // A task's job (its lane is not known here): it needs a thread, not exclusion.
      Fallback.runElsewhere(unsafeBitCast(ctx, to: UnownedJob.self), preferring: discards.pool)
    }
  }

/// Runs a blocking call on a fresh thread so it does not hold a cooperative-pool thread.
func runOffCooperativePool<T: Sendable>(
  _ body: @escaping @Sendable () throws(LanePoolError) -> T
) async throws(LanePoolError) -> T {
  let result: Result<T, LanePoolError> = await withCheckedContinuation { cont in
    let thread = Thread {
      cont.resume(returning: Result { () throws(LanePoolError) in try body() })
    }
    thread.start()
  }
  return try result.get()
}

/// Owns the C pool; frees it when the last pool or lane object goes.
final class PoolCore: @unchecked Sendable {
  let raw: OpaquePointer
  let isDefault: Bool
  /// The C pool may log (stalls) for as long as it lives: keep the handler alive.
  let logBox: LogBox?
  /// Runs the Swift jobs of the pool's lanes once they cannot run on the lanes.
  let fallback: Fallback
  init(raw: OpaquePointer, isDefault: Bool, logBox: LogBox?) {
    self.raw = raw
    self.isDefault = isDefault
    self.logBox = logBox
    var info = lanepool_info_t()
    _ = lanepool_info(raw, &info)
    let name = withUnsafeBytes(of: info.name) { b in
      String(decoding: b.prefix(while: { $0 != 0 }), as: UTF8.self)
    }
    self.fallback = Fallback(poolName: name)
  }
  deinit {
    // Reached only after shutdown (until then each C lane retains its Lane, which
    // retains this core), so no lane thread is left to deadlock with.
    if !isDefault { _ = lanepool_destroy(raw) }
  }
}

extension QoS {
  var c: lanepool_qos_t { lanepool_qos_t(rawValue: rawValue) }
}
