internal import CLanePool
import Synchronization

extension LanePool {
  /// The process-wide default pool, created on first use and never shut down.
  ///
  /// Lanes per band: the smaller of the CPUs the process may run on
  /// (`sched_getaffinity`) and its cgroup CPU quota (v2 `cpu.max`, v1
  /// `cpu.cfs_quota_us`, rounded up), at most 64; or as set by ``configureDefault(_:)``
  /// and the environment (`LANEPOOL_DEFAULT_LANES`, `LANEPOOL_DEFAULT_PLACEMENT`,
  /// `LANEPOOL_DEFAULT_NICE`, `LANEPOOL_DEFAULT_RING`; see the README).
  ///
  /// If the pool cannot start (a bad environment value, no threads to be had), this
  /// stops the program with a message naming the cause. Use ``makeDefault()`` to
  /// handle that as an error instead.
  ///
  /// The log handler given to ``configureDefault(_:)`` may use the default pool, also
  /// while it is being created (the kernel refused a priority setting: the handler
  /// runs on the creating thread): it gets this pool.
  public static var `default`: LanePool {
    if let cached = cachedDefault() { return cached }
    do throws(LanePoolError) {
      return try makeDefault()
    } catch {
      misuse(
        "cannot start the default pool: \(error.message). Call LanePool.makeDefault() (it throws) to handle this instead of stopping"
      )
    }
  }

  /// The default pool once made, read without a lock: its address (0 until then),
  /// retained for the life of the process.
  private static let defaultAddress = Atomic<UInt>(0)
  private static func cachedDefault() -> LanePool? {
    guard let p = UnsafeRawPointer(bitPattern: defaultAddress.load(ordering: .acquiring)) else { return nil }
    return Unmanaged<LanePool>.fromOpaque(p).takeUnretainedValue()
  }

  /// The default pool once made, and the log handler given to ``configureDefault(_:)``
  /// (kept for the life of the process). A pthread lock rather than Mutex:
  /// ThreadSanitizer sees it.
  private final class DefaultState: @unchecked Sendable {
    let lock = PthreadLock()
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
  ///   `LANEPOOL_DEFAULT_PLACEMENT` not `none` or `cores`, `LANEPOOL_DEFAULT_NICE` not
  ///   `clamp` or `shift`, `LANEPOOL_DEFAULT_RING` not a power of two in 2...1,048,576) or the setting of ``configureDefault(_:)`` the
  ///   core refused; ``LanePoolError/system(errno:)`` when threads or memory cannot be had.
  public static func makeDefault() throws(LanePoolError) -> LanePool {
    if let cached = cachedDefault() { return cached }
    // Outside defaultState's lock: the C core calls the default pool's log handler
    // inside lanepool_default (after publishing the pool, with no lock of its own held),
    // and the handler may come back here; it then gets the pool and wraps it first.
    var raw: OpaquePointer?
    let rc = lanepool_default(&raw)
    guard rc == 0, let raw else {
      if rc == Errno.EINVAL, let bad = badDefaultEnvironment() {
        throw .invalidArgument(bad)
      }
      throw LanePoolError(
        errno: rc, context: .threads("starting the default pool"),
        what: "default pool configuration (set by LanePool.configureDefault or LANEPOOL_DEFAULT_* variables)")
    }
    return defaultState.withLock { state in
      if let cached = state.pool { return cached }
      let pool = LanePool(raw: raw, isDefault: true, logBox: state.logBox)
      state.pool = pool
      let address = UInt(bitPattern: Unmanaged.passRetained(pool).toOpaque())
      defaultAddress.store(address, ordering: .releasing)
      return pool
    }
  }

  /// Configures the default pool before its first use (``default``, ``makeDefault()``,
  /// ``queue(for:)-type.method`` and the executors that run on it).
  ///
  /// The settings are checked as ``init(configuration:)`` checks them and kept; the
  /// default pool is created from them on first use. A second call before then
  /// replaces the first. The environment variables `LANEPOOL_DEFAULT_LANES`,
  /// `LANEPOOL_DEFAULT_PLACEMENT`, `LANEPOOL_DEFAULT_NICE` and `LANEPOOL_DEFAULT_RING`
  /// still override what is
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
        message:
          "the default pool already exists: LanePool.configureDefault must be called before its first use (LanePool.default, makeDefault(), queue(for:), the executors)"
      )
    case Errno.ENOTSUP:
      throw .unsupported(
        "NUMA placement needs libnuma: build with the NUMA trait (swift build --traits NUMA) on a machine where numa_available() works"
      )
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
    func digits(_ s: String) -> Int? {
      guard !s.isEmpty, s.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
      return Int(s)
    }
    if let v = environmentValue("LANEPOOL_DEFAULT_LANES"), !v.isEmpty {
      guard let n = digits(v), (1...64).contains(n) else {
        return "LANEPOOL_DEFAULT_LANES = \"\(v)\" is not accepted (lanes per band of the default pool: 1...64)"
      }
    }
    if let v = environmentValue("LANEPOOL_DEFAULT_PLACEMENT"), !v.isEmpty, v != "none", v != "cores" {
      return "LANEPOOL_DEFAULT_PLACEMENT = \"\(v)\" is not accepted (none or cores)"
    }
    if let v = environmentValue("LANEPOOL_DEFAULT_NICE"), !v.isEmpty, v != "clamp", v != "shift" {
      return "LANEPOOL_DEFAULT_NICE = \"\(v)\" is not accepted (clamp or shift)"
    }
    if let v = environmentValue("LANEPOOL_DEFAULT_RING"), !v.isEmpty {
      guard let n = digits(v), (2...(1 << 20)).contains(n), n & (n - 1) == 0 else {
        return "LANEPOOL_DEFAULT_RING = \"\(v)\" is not accepted (a power of two in 2...1048576)"
      }
    }
    return nil
  }
}
