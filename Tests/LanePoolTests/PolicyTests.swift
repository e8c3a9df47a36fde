import CLanePool
import Foundation
import LanePoolTestSupport
import Testing

@testable import LanePool

/// Nice (17th field after the last ')') and policy (39th) of a thread, from /proc.
func procSchedFields(tid: Int32) -> (nice: Int, policy: Int)? {
  guard let stat = try? String(contentsOfFile: "/proc/self/task/\(tid)/stat", encoding: .utf8),
    let paren = stat.range(of: ")", options: .backwards)
  else { return nil }
  let fields = stat[paren.upperBound...].split(separator: " ")
  guard fields.count > 38, let nice = Int(fields[16]), let policy = Int(fields[38]) else { return nil }
  return (nice, policy)
}

/// A thread's nice, policy (/proc) and I/O priority (ioprio_get): what a boost changes.
/// Without privilege (RLIMIT_NICE 0) a boost of a lower lane changes only the I/O
/// priority, so tests of escalation compare all three.
struct SchedState: Equatable, Sendable, CustomStringConvertible {
  var nice: Int
  var policy: Int
  var ioprio: Int
  var description: String { "nice \(nice), policy \(policy), ioprio \(ioprio)" }
}

func schedState(tid: Int32) -> SchedState? {
  guard let f = procSchedFields(tid: tid) else { return nil }
  return SchedState(nice: f.nice, policy: f.policy, ioprio: Int(lp_test_ioprio_get(tid)))
}

let SCHED_OTHER_ = 0
let SCHED_BATCH_ = 3
let SCHED_IDLE_ = 5
let EPERM_: Int32 = 1
let EACCES_: Int32 = 13

func ioprioValue(_ cls: Int, _ level: Int) -> Int { cls << 13 | level }

@Suite("QoS -> OS policy: the table, applied per lane, verified from /proc")
struct PolicyTests {
  @Test("the seeds' priority classes")
  func priorityClasses() {
    #expect(QoS.userInteractive.priorityClass == .high)
    #expect(QoS.userInitiated.priorityClass == .high)
    #expect(QoS.default.priorityClass == .default)
    #expect(QoS.utility.priorityClass == .low)
    #expect(QoS.background.priorityClass == .background)
    #expect(PriorityClass.background.rawValue == Int(Int16.min))
  }

  @Test("the default table (docs/priorities.md)")
  func defaultTable() {
    let t = QoS.allCases.map { BandPolicy.default(for: $0) }
    #expect(t.map(\.nice) == [-5, -3, 0, 4, 10])
    #expect(t.map(\.scheduler) == [.other, .other, .other, .batch, .batch])
    #expect(t.map(\.ioPriority) == [0, 2, 4, 6, 7].map { .bestEffort(level: $0) })
    #expect(t.map(\.timerSlack) == [nil, nil, nil, .milliseconds(1), .milliseconds(10)])
    #expect(t.map(\.slice) == [.microseconds(100), .microseconds(100), .microseconds(300), nil, nil])
  }

  @Test("every lane got its band's policy: /proc stat, ioprio_get, timer slack from a task")
  func appliedAsRoot() throws {
    let pool = try LanePool(name: uniqueName("pol"), lanesPerBand: 2)
    defer { _ = try? pool.shutdown(discardingQueued: false) }
    let inheritedSlack = lp_test_timer_slack()
    for lane in pool.allLanes {
      let want = BandPolicy.default(for: lane.qos)
      let info = lane.info
      let proc = try #require(procSchedFields(tid: info.threadID))
      let slack = try lane.sync(onLaneThread: true) { lp_test_timer_slack() }
      let ioprio = lp_test_ioprio_get(info.threadID)
      // The lane's own record matches what the kernel says from outside.
      #expect(Int64(proc.nice) == info.policy.nice.got)
      #expect(Int64(proc.policy) == info.policy.scheduler.got)
      #expect(Int64(ioprio) == info.policy.ioPriority.got)
      #expect(Int64(slack) == info.policy.timerSlack.got)
      let wantSlice = want.slice.map { Int64($0.nanosecondsClamped) }
      if let wantSlice, info.policy.slice.error == nil, info.policy.slice.got != 0 {
        #expect(info.policy.slice.got == wantSlice, "\(lane)")  // kernel 6.12+ reads it back
      }
      if geteuid() == 0 {
        // Privileged (as in CI): everything was granted, exactly as the table says.
        #expect(!info.policy.hasRefusals, "\(lane): \(info.policy)")
        #expect(proc.nice == want.nice, "\(lane)")
        #expect(proc.policy == (want.scheduler == .batch ? SCHED_BATCH_ : SCHED_OTHER_), "\(lane)")
        guard case .bestEffort(let level) = want.ioPriority else { Issue.record("table changed"); continue }
        #expect(Int(ioprio) == ioprioValue(2, level), "\(lane)")
        let wantSlack = want.timerSlack.map {
          Int($0.components.attoseconds / 1_000_000_000 + $0.components.seconds * 1_000_000_000)
        }
        #expect(slack == wantSlack ?? inheritedSlack, "\(lane)")
      }
    }
  }

  @Test("a pool can override a band: SCHED_IDLE and idle I/O for background")
  func overrideBand() throws {
    var background = BandPolicy.default(for: .background)
    background.scheduler = .idle
    background.ioPriority = .idle
    background.nice = 19
    let pool = try LanePool(name: uniqueName("ovr"), lanesPerBand: 1, policies: [.background: background])
    defer { _ = try? pool.shutdown(discardingQueued: false) }
    let lane = pool.queue(for: .background)
    let proc = try #require(procSchedFields(tid: lane.info.threadID))
    #expect(proc.policy == SCHED_IDLE_)
    #expect(proc.nice == 19)
    #expect(lp_test_ioprio_get(lane.info.threadID) == Int32(ioprioValue(3, 0)))
    // Other bands keep the default table.
    let ui = try #require(procSchedFields(tid: pool.queue(for: .userInteractive).info.threadID))
    if geteuid() == 0 { #expect(ui.nice == -5) }
  }

  @Test("bad policies are refused up front with a clear message")
  func badPolicies() {
    var rt = BandPolicy.default(for: .userInteractive)
    rt.scheduler = .fifo(priority: 10)
    #expect(throws: LanePoolError.self) { try LanePool(lanesPerBand: 1, policies: [.userInteractive: rt]) }
    var nice = BandPolicy.default(for: .utility)
    nice.nice = 25
    #expect(throws: LanePoolError.self) { try LanePool(lanesPerBand: 1, policies: [.utility: nice]) }
    var io = BandPolicy.default(for: .utility)
    io.ioPriority = .bestEffort(level: 9)
    #expect(throws: LanePoolError.self) { try LanePool(lanesPerBand: 1, policies: [.utility: io]) }
    // The C layer checks too.
    var cfg = lanepool_config_t()
    lanepool_config_init(&cfg)
    cfg.lanes_per_band = 1
    cfg.policy.0.sched = LANEPOOL_SCHED_FIFO
    cfg.policy.0.rt_priority = 10
    var p: OpaquePointer?
    #expect(lanepool_create(&cfg, &p) == EINVAL)  // real-time without allow_realtime
    cfg.allow_realtime = 1
    cfg.policy.0.rt_priority = 100
    #expect(lanepool_create(&cfg, &p) == EINVAL)  // priority out of range
  }

  @Test("real-time on explicit opt-in: SCHED_FIFO applied (or refused and recorded)")
  func realtimeOptIn() throws {
    var c = LanePool.Configuration()
    c.name = uniqueName("rt")
    c.lanesPerBand = 1
    c.allowRealtime = true
    var ui = BandPolicy.default(for: .userInteractive)
    ui.scheduler = .fifo(priority: 1)
    #expect(throws: LanePoolError.self) {  // the default's EEVDF slice does not apply to FIFO
      var bad = c
      bad.policies = [.userInteractive: ui]
      _ = try LanePool(configuration: bad)
    }
    ui.slice = nil
    c.policies = [.userInteractive: ui]
    let pool = try LanePool(configuration: c)
    defer { _ = try? pool.shutdown(discardingQueued: false) }
    let info = pool.queue(for: .userInteractive).info
    let proc = try #require(procSchedFields(tid: info.threadID))
    if info.policy.scheduler.error == nil {
      #expect(proc.policy == 1)  // SCHED_FIFO
    } else {
      #expect(proc.policy == SCHED_OTHER_)  // documented fallback
    }
  }

  @Test("unprivileged: the pool starts, refusals are recorded and logged once, band order holds")
  func unprivileged() async {
    let result = await #expect(processExitsWith: .success, observing: [\.standardErrorContent]) {
      reportVerdictAndExit(unprivilegedPoolCheck())
    }
    recordChildVerdict(result)
  }

  @Test("unprivileged, unprivilegedNice .shift: every band 5 higher, the gaps kept, no refusal")
  func unprivilegedShift() async {
    let result = await #expect(processExitsWith: .success, observing: [\.standardErrorContent]) {
      reportVerdictAndExit(unprivilegedShiftCheck())
    }
    recordChildVerdict(result)
  }
}

/// Runs in a child process: drops to nobody, starts a pool with the shifted table.
func unprivilegedShiftCheck() -> String? {
  guard lp_test_set_own_nice(0) == 0 else { return "could not reset nice" }
  let rc = lp_test_drop_privileges(65534, 65534)
  guard rc == 0 else { return "cannot drop privileges: errno \(rc)" }
  let logs = Locked<[String]>([])
  var c = LanePool.Configuration()
  c.name = "shift"
  c.lanesPerBand = 1
  c.unprivilegedNice = .shift
  c.logHandler = { _, line in logs.withLock { $0.append(line) } }
  let pool: LanePool
  do { pool = try LanePool(configuration: c) } catch { return "pool did not start: \(error)" }
  var nices: [Int] = []
  for qos in QoS.allCases {
    let info = pool.lanes(for: qos)[0].info
    guard let proc = procSchedFields(tid: info.threadID) else { return "no /proc stat for \(qos)" }
    guard info.policy.nice.error == nil, Int64(proc.nice) == info.policy.nice.got else {
      return "\(qos): \(info.policy.nice), /proc \(proc.nice)"
    }
    nices.append(proc.nice)
  }
  // The default table, -5 -3 0 4 10, from a starting nice of 0 that this user may not go below.
  guard nices == [0, 2, 5, 9, 15] else { return "nice by band: \(nices)" }
  let lines = logs.withLock { $0 }
  guard lines.count == 1, lines[0].contains("5 higher") else { return "log: \(lines)" }
  do { try pool.shutdown(discardingQueued: false) } catch { return "shutdown: \(error)" }
  return nil
}

/// Runs in a child process: drops to nobody, starts a pool, checks the fallback.
/// Returns a failure description, or nil when everything holds.
func unprivilegedPoolCheck() -> String? {
  guard lp_test_set_own_nice(0) == 0 else { return "could not reset nice" }
  let rc = lp_test_drop_privileges(65534, 65534)
  guard rc == 0 else { return "cannot drop privileges: errno \(rc)" }
  guard geteuid() == 65534 else { return "still uid \(geteuid())" }
  let logs = Locked<[String]>([])
  let pool: LanePool
  do {
    pool = try LanePool(name: "unpriv", lanesPerBand: 2) { _, line in logs.withLock { $0.append(line) } }
  } catch {
    return "pool did not start: \(error)"
  }
  var nicesByBand: [Int] = []
  for qos in QoS.allCases {
    for lane in pool.lanes(for: qos) {
      let info = lane.info
      guard let proc = procSchedFields(tid: info.threadID) else { return "no /proc stat for \(lane)" }
      let want = BandPolicy.default(for: qos)
      if want.nice < 0 {
        guard let e = info.policy.nice.error, e == EPERM_ || e == EACCES_ else {
          return "\(lane): lowering nice to \(want.nice) should be refused, got \(info.policy.nice)"
        }
        guard proc.nice == 0 else { return "\(lane): fallback nice should be the starting 0, /proc says \(proc.nice)" }
      } else {
        guard info.policy.nice.error == nil, proc.nice == want.nice else {
          return "\(lane): nice \(want.nice) should be granted, got \(info.policy.nice), /proc \(proc.nice)"
        }
      }
      guard Int64(proc.nice) == info.policy.nice.got else { return "\(lane): record disagrees with /proc" }
      if lane.index == 0 { nicesByBand.append(proc.nice) }
      // And it works.
      guard (try? lane.sync { 1 }) == 1 else { return "\(lane) does not run tasks" }
    }
  }
  guard nicesByBand == nicesByBand.sorted() else { return "band order broken: \(nicesByBand)" }
  guard nicesByBand.last! > nicesByBand.first! else { return "bands not separated: \(nicesByBand)" }
  let lines = logs.withLock { $0 }
  // One line for the refusals. A sync above may also have been queued (the lane was not
  // parked) and escalated a utility or background lane, whose nice this user may not
  // lower back: that is the one escalation line (docs/priorities.md, Escalation).
  let refusals = lines.filter { $0.contains("refused some priority settings") }
  let escalation = lines.filter { $0.contains("escalation is limited") }
  guard refusals.count == 1, escalation.count <= 1, refusals.count + escalation.count == lines.count else {
    return "expected one refusal line (and at most one escalation line) for the pool, got \(lines.count): \(lines)"
  }
  guard refusals[0].contains("ui nice -5 -> 0"), refusals[0].contains("in nice -3 -> 0") else {
    return "log line does not name the refusals: \(refusals[0])"
  }
  do { try pool.shutdown(discardingQueued: false) } catch { return "shutdown: \(error)" }
  return nil
}
