import LanePool
import Testing

/// Every public type of the module, spelled through the type `LanePool` (the module has
/// the same name, so these are the spellings that cannot be ambiguous). Compiling is
/// most of the test; each name also gets a trivial use.
@Suite("Public names are reachable as LanePool.X")
struct NestedNamesTests {
  @Test("each nested name resolves, and the top-level aliases name the same types")
  func nestedNames() throws {
    let qos: LanePool.QoS = .utility
    #expect(qos == QoS.utility)
    #expect(LanePool.QoS(jobPriority: 17) == .utility)

    let lane: LanePool.Lane = LanePool.queue(for: qos)
    #expect(lane.qos == .utility)
    let info: LanePool.LaneInfo = lane.info
    #expect(info.qos == .utility)
    let policy: LanePool.AppliedPolicy = info.policy
    let setting: LanePool.AppliedSetting = policy.nice
    #expect(setting.got == policy.nice.got)

    let band: LanePool.BandPolicy = .default(for: .background)
    #expect(band.scheduler == LanePool.BandPolicy.Scheduler.batch)
    let priority: LanePool.PriorityClass = LanePool.QoS.userInitiated.priorityClass
    #expect(priority == .high)
    let placement: LanePool.Placement = .cpus([0])
    #expect(placement != .none)
    let level: LanePool.LogLevel = .warning
    #expect(level != .info)

    let error: LanePool.LanePoolError = .shutDown
    #expect(error.code == LanePool.LanePoolError.Code.shutDown)
    var configuration = LanePool.Configuration()
    configuration.placement = placement
    #expect(configuration.placement == .cpus([0]))

    let timer: LanePool.TimerHandle = try lane.asyncAfter(.seconds(3600)) {}
    #expect(timer.cancel())

    let group = LanePool.LaneGroup()
    try lane.async(group: group) {}
    #expect(group.wait(timeout: .seconds(30)))

    // The top-level aliases are the same types (existing code keeps compiling).
    let aliased: (QoS, Lane, LaneInfo, LanePoolError, BandPolicy, PriorityClass) = (
      qos, lane, info, error, band, priority
    )
    let aliased2: (Placement, AppliedPolicy, AppliedSetting, LogLevel, TimerHandle, LaneGroup) = (
      placement, policy, setting, level, timer, group
    )
    #expect(aliased.1 === lane && aliased2.5 === group)
  }
}
