import CLanePool
import Foundation
import Synchronization
import Testing

@testable import LanePool

/// Every bad input gets its documented error, and the caller keeps what was refused.
@Suite("Bad input: clear errors, nothing lost")
struct BadInputTests {
  // MARK: C API

  private func makeCPool(lanes: UInt32 = 1) throws -> OpaquePointer {
    var cfg = lanepool_config_t()
    lanepool_config_init(&cfg)
    cfg.lanes_per_band = lanes
    var p: OpaquePointer?
    let rc = uniqueName("cbad").withCString { name in
      cfg.name = name
      return lanepool_create(&cfg, &p)
    }
    try #require(rc == 0)
    return p!
  }

  private static let noop: @convention(c) (UnsafeMutableRawPointer?) -> Void = { _ in }

  @Test("C: a NULL function is EINVAL")
  func cNullFunction() throws {
    let p = try makeCPool()
    defer { _ = lanepool_destroy(p) }
    var lane: OpaquePointer?
    #expect(lanepool_get_lane(p, LANEPOOL_QOS_DEFAULT, 0, &lane) == 0)
    #expect(lanepool_lane_async(lane, nil, nil) == EINVAL)
    #expect(lanepool_async(p, LANEPOOL_QOS_DEFAULT, nil, nil) == EINVAL)
    #expect(lanepool_lane_sync(lane, nil, nil) == EINVAL)
  }

  @Test("C: an unknown QoS value is EINVAL")
  func cUnknownQoS() throws {
    let p = try makeCPool()
    defer { _ = lanepool_destroy(p) }
    var lane: OpaquePointer?
    for bad: UInt32 in [0, 0x42, 0x20, 0xFFFF_FFFF] {
      let q = lanepool_qos_t(rawValue: bad)
      #expect(lanepool_next_lane(p, q, &lane) == EINVAL)
      #expect(lanepool_get_lane(p, q, 0, &lane) == EINVAL)
      #expect(lanepool_lane_for_key(p, q, 1, &lane) == EINVAL)
      #expect(lanepool_async(p, q, Self.noop, nil) == EINVAL)
      #expect(lanepool_band_index(q) == -1)
    }
  }

  @Test("C: lane counts of 0 and above 64 are EINVAL, and so is a bad ring capacity")
  func cBadConfig() {
    var cfg = lanepool_config_t()
    lanepool_config_init(&cfg)
    var p: OpaquePointer?
    for bad: UInt32 in [0, 65, 1000] {
      cfg.lanes_per_band = bad
      #expect(lanepool_create(&cfg, &p) == EINVAL)
    }
    cfg.lanes_per_band = 1
    for bad: UInt32 in [1, 3, 1000, 1 << 21] {
      cfg.ring_capacity = bad
      #expect(lanepool_create(&cfg, &p) == EINVAL)
    }
    cfg.ring_capacity = 0
    cfg.hard_capacity = 2
    #expect(lanepool_create(&cfg, &p) == EINVAL)
    #expect(p == nil)
    #expect(lanepool_create(nil, &p) == EINVAL)
    #expect(lanepool_config_init(nil) == EINVAL)
  }

  @Test("C: a NULL pool is EINVAL everywhere")
  func cNullPool() {
    var lane: OpaquePointer?
    #expect(lanepool_next_lane(nil, LANEPOOL_QOS_DEFAULT, &lane) == EINVAL)
    #expect(lanepool_get_lane(nil, LANEPOOL_QOS_DEFAULT, 0, &lane) == EINVAL)
    #expect(lanepool_lane_for_key(nil, LANEPOOL_QOS_DEFAULT, 0, &lane) == EINVAL)
    #expect(lanepool_async(nil, LANEPOOL_QOS_DEFAULT, Self.noop, nil) == EINVAL)
    #expect(lanepool_shutdown(nil, LANEPOOL_SHUTDOWN_DRAIN, nil, nil) == EINVAL)
    #expect(lanepool_destroy(nil) == EINVAL)
    #expect(lanepool_lane_async(nil, Self.noop, nil) == EINVAL)
    var info = lanepool_info_t()
    #expect(lanepool_info(nil, &info) == EINVAL)
  }

  @Test("C: submitting after shutdown began is ESHUTDOWN and the task is not taken")
  func cSubmitAfterShutdown() throws {
    let p = try makeCPool()
    defer { _ = lanepool_destroy(p) }
    #expect(lanepool_shutdown(p, LANEPOOL_SHUTDOWN_DRAIN, nil, nil) == 0)
    var lane: OpaquePointer?
    #expect(lanepool_next_lane(p, LANEPOOL_QOS_DEFAULT, &lane) == 0)
    #expect(lanepool_lane_async(lane, Self.noop, nil) == ESHUTDOWN)
    #expect(lanepool_async(p, LANEPOOL_QOS_BACKGROUND, Self.noop, nil) == ESHUTDOWN)
    #expect(lanepool_lane_sync(lane, Self.noop, nil) == ESHUTDOWN)
    #expect(lanepool_shutdown(p, LANEPOOL_SHUTDOWN_DRAIN, nil, nil) == EALREADY)
  }

  @Test("C: destroying (or shutting down) a pool from one of its own lanes is EDEADLK")
  func cDestroyFromOwnLane() throws {
    let p = try makeCPool()
    var lane: OpaquePointer?
    #expect(lanepool_get_lane(p, LANEPOOL_QOS_UTILITY, 0, &lane) == 0)
    final class Box: @unchecked Sendable {
      var pool: OpaquePointer?
      var rcs: [Int32] = []
    }
    let box = Box()
    box.pool = p
    let body: @convention(c) (UnsafeMutableRawPointer?) -> Void = { ctx in
      let box = Unmanaged<Box>.fromOpaque(ctx!).takeUnretainedValue()
      box.rcs.append(lanepool_destroy(box.pool))
      box.rcs.append(lanepool_shutdown(box.pool, LANEPOOL_SHUTDOWN_DRAIN, nil, nil))
      var me: OpaquePointer?
      _ = lanepool_current_lane(&me)
      box.rcs.append(lanepool_lane_sync(me, { _ in }, nil))
    }
    #expect(lanepool_lane_sync(lane, body, Unmanaged.passUnretained(box).toOpaque()) == 0)
    #expect(box.rcs == [EDEADLK, EDEADLK, EDEADLK])
    #expect(lanepool_destroy(p) == 0)  // the pool was left intact
  }

  @Test("C: destroying twice is EINVAL, and the default pool cannot be destroyed")
  func cDestroyTwice() throws {
    let p = try makeCPool()
    #expect(lanepool_destroy(p) == 0)
    #expect(lanepool_destroy(p) == EINVAL)
    var def: OpaquePointer?
    #expect(lanepool_default(&def) == 0)
    #expect(lanepool_destroy(def) == EPERM)
    #expect(lanepool_shutdown(def, LANEPOOL_SHUTDOWN_DRAIN, nil, nil) == EPERM)
  }

  @Test("C: a cancelling shutdown needs a discard callback; a bad mode is EINVAL")
  func cShutdownArguments() throws {
    let p = try makeCPool()
    defer { _ = lanepool_destroy(p) }
    #expect(lanepool_shutdown(p, LANEPOOL_SHUTDOWN_CANCEL, nil, nil) == EINVAL)
    #expect(lanepool_shutdown(p, lanepool_shutdown_mode_t(rawValue: 9), nil, nil) == EINVAL)
    var info = lanepool_info_t()
    #expect(lanepool_info(p, &info) == 0)
    #expect(info.shut_down == 0)  // refused calls changed nothing
  }

  @Test("C: allowed CPUs: NULL arguments are EINVAL; the count matches what the process may use")
  func cAllowedCPUs() {
    var n: UInt32 = 0
    var buf = [Int32](repeating: -1, count: 4)
    #expect(lanepool_allowed_cpus(nil, 4, &n) == EINVAL)
    #expect(lanepool_allowed_cpus(&buf, 4, nil) == EINVAL)
    #expect(lanepool_allowed_cpus(&buf, 0, &n) == 0)  // just the count
    #expect(Int(n) == ProcessInfo.processInfo.activeProcessorCount)
    #expect(lanepool_allowed_cpus(&buf, 4, &n) == 0)
    #expect(buf.prefix(Int(min(n, 4))).allSatisfy { $0 >= 0 })
  }

  @Test("C: current lane outside a lane is ESRCH")
  func cCurrentLaneOutside() {
    var lane: OpaquePointer?
    #expect(lanepool_current_lane(&lane) == ESRCH)
    #expect(lanepool_current_lane(nil) == EINVAL)
  }

  // MARK: Swift facade

  @Test("Swift: bad configuration throws invalidArgument naming the setting")
  func swiftBadConfig() {
    #expect(throws: LanePoolError.self) { try LanePool(lanesPerBand: 0) }
    #expect(throws: LanePoolError.self) { try LanePool(lanesPerBand: 65) }
    #expect(throws: LanePoolError.self) { try LanePool(ringCapacity: 1000) }
    #expect(throws: LanePoolError.self) { try LanePool(name: "") }
    do {
      _ = try LanePool(lanesPerBand: 0)
    } catch {
      #expect(error.code == .invalidArgument)
      #expect(error == .invalidArgument(""))  // equal by code and errno
      #expect(error.message.contains("lanesPerBand"))
    }
  }

  @Test(
    "Swift: the low-latency interactive setting: 0 and over 100 ms are refused by name; a valid one runs every task")
  func swiftInteractiveSpin() throws {
    for bad in [Duration.zero, .milliseconds(101)] {
      var c = LanePool.Configuration()
      c.interactiveSpin = bad
      let error = #expect(throws: LanePoolError.self) { try LanePool(configuration: c) }
      #expect(error?.code == .invalidArgument)
      #expect(error?.message.contains("interactiveSpin") == true)
    }
    var c = LanePool.Configuration()
    c.name = uniqueName("llat")
    c.lanesPerBand = 2
    c.interactiveSpin = .milliseconds(1)
    let pool = try LanePool(configuration: c)
    let ran = Counter()
    for _ in 0..<2_000 { try pool.queue(for: .userInteractive).async { ran.bump() } }
    for lane in pool.lanes(for: .userInteractive) { try lane.sync(onLaneThread: true) {} }
    #expect(ran.count == 2_000)
    _ = try pool.shutdown(discardingQueued: false)
  }

  @Test("Swift: submitting to a shut-down pool throws and the closure is released, not run")
  func swiftSubmitAfterShutdown() async throws {
    let pool = try LanePool(name: uniqueName("sasd"), lanesPerBand: 1)
    let lane = pool.queue(for: .default)
    try await pool.shutdownGracefully()
    #expect(pool.isShutDown)
    let ran = Counter()
    let released = Counter()
    do {
      let t1 = ReleaseToken(released)
      let t2 = ReleaseToken(released)
      #expect(throws: LanePoolError.shutDown) {
        try lane.async {
          _ = t1; ran.bump()
        }
      }
      #expect(throws: LanePoolError.shutDown) {
        try pool.async(qos: .utility) {
          _ = t2; ran.bump()
        }
      }
      #expect(throws: LanePoolError.shutDown) { try lane.sync { ran.bump() } }
    }
    #expect(ran.count == 0)
    #expect(released.count == 2)
    try await pool.shutdownGracefully()  // again: harmless
  }

  @Test("Swift: the default pool refuses shutdown")
  func swiftDefaultPoolShutdown() async {
    await #expect(throws: LanePoolError.notPermitted) { try await LanePool.default.shutdownGracefully() }
    #expect(throws: LanePoolError.notPermitted) { try LanePool.default.shutdown(discardingQueued: true) }
  }

  @Test("Swift: shutting a pool down from its own lane throws wouldDeadlock")
  func swiftShutdownFromOwnLane() throws {
    let pool = try LanePool(name: uniqueName("sown"), lanesPerBand: 1)
    defer { _ = try? pool.shutdown(discardingQueued: false) }
    let result = try pool.queue(for: .default).sync { () -> LanePoolError? in
      do {
        try pool.shutdown(discardingQueued: false)
        return nil
      } catch { return error as? LanePoolError }
    }
    #expect(result == .wouldDeadlock)
    #expect(!pool.isShutDown)
  }

  @Test("Swift: sync(onLaneThread: true) onto the lane you hold stops with a clear message")
  func swiftSyncOntoOwnLane() async {
    // A plain sync onto the lane the caller holds runs inline (OwnLaneSyncTests); one
    // that insists on the lane's thread cannot be honoured by an inline holder.
    await #expect(processExitsWith: .failure) {
      let lane = LanePool.queue(for: .default)
      try? lane.sync { _ = try? lane.sync(onLaneThread: true) { 1 } }
    }
  }
}
