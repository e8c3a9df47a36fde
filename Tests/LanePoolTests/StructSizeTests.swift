import CLanePool
import Foundation
import Testing

@testable import LanePool

/// The struct_size field of every caller-allocated C struct: set by the header's init
/// function and inline wrappers, refused by the library (EINVAL) when it is not a size
/// the library accepts, before anything is read or written.
@Suite("C structs carry their size")
struct StructSizeTests {
  private static let wrongSizes: [UInt32] = [0, 4, 8, 1_000_000]

  @Test("config: lanepool_config_init sets struct_size; a wrong one is EINVAL everywhere it is read")
  func configSize() throws {
    var cfg = lanepool_config_t()
    #expect(lanepool_config_init(&cfg) == 0)
    #expect(cfg.struct_size == UInt32(MemoryLayout<lanepool_config_t>.size))
    for size in Self.wrongSizes {
      var fresh = lanepool_config_t()
      fresh.lanes_per_band = 77  // untouched by a refused init
      #expect(lanepool_config_init_sized(&fresh, size) == EINVAL)
      #expect(fresh.lanes_per_band == 77 && fresh.struct_size == 0)
    }
    cfg.lanes_per_band = 1
    var field: UnsafePointer<CChar>?
    #expect(lanepool_config_check(&cfg, &field) == 0)
    for size in Self.wrongSizes {
      cfg.struct_size = size
      #expect(lanepool_config_check(&cfg, &field) == EINVAL)
      #expect(field.map { String(cString: $0) } == "struct_size")
      var pool: OpaquePointer?
      #expect(lanepool_create(&cfg, &pool) == EINVAL)
      #expect(pool == nil)
      #expect(lanepool_default_configure(&cfg) == EINVAL)
    }
  }

  @Test("info structs: the wrappers set struct_size; the *_sized functions refuse a wrong one and write nothing")
  func infoSizes() throws {
    var cfg = lanepool_config_t()
    lanepool_config_init(&cfg)
    cfg.lanes_per_band = 1
    var created: OpaquePointer?
    try #require(lanepool_create(&cfg, &created) == 0)
    let pool = try #require(created)
    defer { _ = lanepool_destroy(pool) }
    var lane: OpaquePointer?
    try #require(lanepool_get_lane(pool, LANEPOOL_QOS_UTILITY, 0, &lane) == 0)

    var info = lanepool_info_t()
    #expect(lanepool_info(pool, &info) == 0)
    #expect(info.struct_size == UInt32(MemoryLayout<lanepool_info_t>.size) && info.lanes_per_band == 1)
    var laneInfo = lanepool_lane_info_t()
    #expect(lanepool_lane_info(lane, &laneInfo) == 0)
    #expect(laneInfo.struct_size == UInt32(MemoryLayout<lanepool_lane_info_t>.size))
    #expect(laneInfo.qos == LANEPOOL_QOS_UTILITY && laneInfo.running == 1 && laneInfo.tid > 0)
    var policy = lanepool_band_policy_t()
    #expect(lanepool_default_policy(LANEPOOL_QOS_BACKGROUND, &policy) == 0)
    #expect(policy.struct_size == UInt32(MemoryLayout<lanepool_band_policy_t>.size) && policy.nice == 10)

    for size in Self.wrongSizes {
      var i = lanepool_info_t()
      i.struct_size = size
      i.lanes_per_band = 99
      #expect(lanepool_info_sized(pool, &i) == EINVAL)
      #expect(i.lanes_per_band == 99)
      var l = lanepool_lane_info_t()
      l.struct_size = size
      l.tasks_executed = 99
      #expect(lanepool_lane_info_sized(lane, &l) == EINVAL)
      #expect(l.tasks_executed == 99)
      var p = lanepool_band_policy_t()
      p.struct_size = size
      p.nice = 99
      #expect(lanepool_default_policy_sized(LANEPOOL_QOS_BACKGROUND, &p) == EINVAL)
      #expect(p.nice == 99)
    }
  }

  @Test("the Swift API builds its C structs through them: a pool's lane info is real")
  func swiftFacade() throws {
    let pool = try LanePool(name: uniqueName("size"), lanesPerBand: 1)
    defer { _ = try? pool.shutdown(discardingQueued: false) }
    let lane = pool.queue(for: .utility)
    for _ in 0..<3 { try lane.async {} }
    try lane.sync(onLaneThread: true) {}
    #expect(lane.info.threadID > 0)
    #expect(lane.info.isRunning)
    #expect(lane.info.tasksExecuted >= 3)
  }
}
