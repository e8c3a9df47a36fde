internal import CLanePool
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
  /// Each band's rescue lane, in band order (userInteractive first): one more lane per
  /// band, which no pick returns and whose thread runs the band's waiting work (band
  /// jobs, the queues of lanes whose threads are away) once no thread of the band has
  /// finished a task for 100 ms (see docs/architecture.md, "The scheduler"). Work you
  /// queue on it yourself runs there and holds its thread meanwhile. Its
  /// `index` is ``lanesPerBand``, its thread `<name>-<band>-r`. Listed for accounting
  /// (its `info` counts the tasks it ran): ``allLanes`` does not include it.
  public let rescueLanes: [Lane]
  let lanesRetained = Atomic<Bool>(true)

  /// The name given at creation; lane threads are named `<name>-<band>-<i>`.
  public let name: String
  /// Lanes in each band.
  public let lanesPerBand: Int
  /// True for the process-wide default pool.
  public let isDefault: Bool

  /// Starts a pool; returns once its 5 × (lanesPerBand + 1) threads run (each band's lanes
  /// and its rescue lane, ``rescueLanes``).
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
        "NUMA placement needs libnuma: build with the NUMA trait (swift build --traits NUMA) on a machine where numa_available() works"
      )
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

  init(raw: OpaquePointer, isDefault: Bool, logBox: LogBox? = nil) {
    let core = PoolCore(raw: raw, isDefault: isDefault, logBox: logBox)
    var info = lanepool_info_t()
    _ = lanepool_info(raw, &info)
    let perBand = Int(info.lanes_per_band)
    // The Swift object of C lane `index` of band `qos` (lanesPerBand: the band's rescue
    // lane, C's lanepool_rescue_lane, whose jobs find their pool through Lane.current
    // like any lane's). The C lane holds its Swift object (+1) until the pool has shut
    // down, so Lane.current works from any task for as long as lanes run.
    func makeLane(_ qos: QoS, _ index: Int) -> Lane {
      var c: OpaquePointer?
      if index < perBand {
        _ = lanepool_get_lane(raw, qos.c, UInt32(index), &c)
      } else {
        _ = lanepool_rescue_lane(raw, qos.c, &c)
      }
      let l = Lane(raw: c!, core: core, qos: qos, index: index)
      _ = lanepool_lane_set_userdata(c, Unmanaged.passRetained(l).toOpaque())
      return l
    }
    let bands = QoS.allCases.map { qos in (0..<perBand).map { makeLane(qos, $0) } }
    let rescueLanes = QoS.allCases.map { makeLane($0, perBand) }
    self.core = core
    self.bands = bands
    self.rescueLanes = rescueLanes
    self.lanesPerBand = perBand
    self.isDefault = isDefault
    self.name = withUnsafeBytes(of: info.name) { b in
      String(decoding: b.prefix(while: { $0 != 0 }), as: UTF8.self)
    }
    for lane in bands.joined() { lane.pool = self }
    for lane in rescueLanes { lane.pool = self }
  }

  // MARK: Picking lanes

  /// The next lane of the band, round-robin: YYDispatchQueuePool's `-queue`. Each thread
  /// rotates on its own from a starting point the pool gives it, and a lane spinning idle
  /// (awake, nothing queued) goes first, to one caller, so work sent there starts
  /// without a thread wake. Lock-free.
  ///
  /// Never the caller's own lane when the band has another: a task running on a lane of
  /// this band (with LanePool as the default executor, any async code may be one) gets
  /// a different lane, so `queue(for:).sync { ... }` waits for another lane, never for
  /// itself. (With one lane per band the caller's lane is the only answer; a `sync` onto
  /// it then runs inline, see ``Lane/sync(onLaneThread:_:)``.)
  public func queue(for qos: QoS) -> Lane {
    var lane: OpaquePointer?
    var object: UnsafeMutableRawPointer?
    // One call picks (the C core skips the caller's lane); the C lane holds its Swift
    // object until the pool has shut down, and `bands` holds it for the pool's life.
    if lanepool_next_other_lane(core.raw, qos.c, &lane) == 0,
      lanepool_lane_userdata(lane, &object) == 0, let object
    {
      return Unmanaged<Lane>.fromOpaque(object).takeUnretainedValue()
    }
    return swiftLane(lane, qos)  // after shutdown, or in a fork child (lane 0: its calls throw)
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

  /// Every lane of the pool, band by band (not the ``rescueLanes``).
  public var allLanes: [Lane] { bands.flatMap { $0 } }

  // MARK: Submitting

  /// Runs `work` on some lane of the band: one spinning idle if there is one, else the
  /// less loaded of two picked at random.
  /// For unordered work; use ``queue(for:)-method`` or a keyed lane when order matters.
  /// - Throws: as ``Lane/async(_:)``.
  public func async(qos: QoS, _ work: consuming @escaping @Sendable () -> Void) throws(LanePoolError) {
    try async(qos: qos, work, onDiscard: nil)
  }

  /// As ``async(qos:_:)``; `onDiscard` runs instead of `work` if a cancelling shutdown
  /// discards the task.
  func async(
    qos: QoS, _ work: consuming @escaping @Sendable () -> Void, onDiscard: (@Sendable () -> Void)?
  ) throws(LanePoolError) {
    if let onDiscard {
      try submitTask(work, onDiscard: onDiscard) { lanepool_async(core.raw, qos.c, $0, $1) }
    } else {
      try submitClosure(work) { lanepool_async2(core.raw, qos.c, $0, $1, $2) }
    }
  }

  deinit {
    guard !isDefault else { return }
    var info = lanepool_info_t()
    guard lanepool_info(core.raw, &info) == 0, info.shut_down == 0 else { return }
    let message =
      "LanePool: pool '\(name)' was released without shutdown; its \(5 * (lanesPerBand + 1)) lane threads keep running until the process exits. Call shutdownGracefully() or shutdown(discardingQueued:) before releasing it."
    if let log = core.logBox {
      log.handler(.warning, message)
    } else if !releasedWithoutShutdownWarned.exchange(true, ordering: .relaxed) {
      writeStandardError(message)
    }
  }
}
