import CLanePool
import Foundation
import LanePoolTestSupport
import Synchronization
import Testing

@testable import LanePool

/// The default pool's configuration: `configureDefault`, `makeDefault` and the
/// LANEPOOL_DEFAULT_* environment. Anything that could create or size the default pool
/// runs in an exit-test child, so this process's default pool stays as other tests
/// expect it.
@Suite("Default pool configuration")
struct DefaultPoolTests {
  @Test("configureDefault rejects bad settings, naming them, and keeps nothing")
  func rejectsBadSettings() {
    func message(_ edit: (inout LanePool.Configuration) -> Void) -> String? {
      var c = LanePool.Configuration()
      edit(&c)
      do throws(LanePoolError) {
        try LanePool.configureDefault(c)
        return nil
      } catch {
        #expect(error.code == .invalidArgument)
        return error.message
      }
    }
    let cases: [(String, (inout LanePool.Configuration) -> Void)] = [
      ("lanesPerBand", { $0.lanesPerBand = 0 }),
      ("lanesPerBand", { $0.lanesPerBand = 65 }),
      ("ringCapacity", { $0.ringCapacity = 3 }),
      ("ringCapacity", { $0.ringCapacity = 0 }),
      ("name", { $0.name = "" }),
      ("stackSize", { $0.stackSize = 100 }),
      (
        "policies[.utility].nice",
        {
          var p = BandPolicy.default(for: .utility)
          p.nice = 40
          $0.policies[.utility] = p
        }
      ),
      ("placement .numaTopology", { $0.placement = .numaTopology([0: [0]]) }),
    ]
    for (setting, edit) in cases {
      let m = message(edit)
      #expect(m?.contains(setting) == true, "\(setting): \(m ?? "accepted")")
    }
  }

  @Test("configureDefault(lanesPerBand: 3) before first use: the default pool has 3 lanes per band")
  func configuredLanes() async {
    let result = await #expect(processExitsWith: .success, observing: [\.standardErrorContent]) {
      unsetenv("LANEPOOL_DEFAULT_LANES")
      var c = LanePool.Configuration()
      c.lanesPerBand = 3
      c.ringCapacity = 64
      do throws(LanePoolError) {
        try LanePool.configureDefault(c)
      } catch {
        reportVerdictAndExit("configureDefault threw \(error)")
      }
      let pool = LanePool.default
      guard pool.lanesPerBand == 3 else { reportVerdictAndExit("lanesPerBand \(pool.lanesPerBand)") }
      guard pool.isDefault else { reportVerdictAndExit("not the default pool") }
      guard (try? LanePool.makeDefault()) === pool else { reportVerdictAndExit("makeDefault is another pool") }
      guard defaultRingCapacity() == 64 else { reportVerdictAndExit("ring capacity \(defaultRingCapacity())") }
      // Once it exists: refused, nothing changes.
      c.lanesPerBand = 5
      do throws(LanePoolError) {
        try LanePool.configureDefault(c)
        reportVerdictAndExit("configureDefault after first use did not throw")
      } catch {
        guard error.code == .notPermitted, error.message.contains("already exists") else {
          reportVerdictAndExit("configureDefault after first use threw \(error)")
        }
      }
      guard LanePool.default.lanesPerBand == 3 else { reportVerdictAndExit("resized") }
      reportVerdictAndExit(nil)
    }
    recordChildVerdict(result)
  }

  @Test("LANEPOOL_DEFAULT_LANES=abc: makeDefault throws, naming the variable; then it can start")
  func badEnvironment() async {
    let result = await #expect(processExitsWith: .success, observing: [\.standardErrorContent]) {
      setenv("LANEPOOL_DEFAULT_LANES", "abc", 1)
      do throws(LanePoolError) {
        let pool = try LanePool.makeDefault()
        reportVerdictAndExit("makeDefault returned a pool with \(pool.lanesPerBand) lanes per band")
      } catch {
        guard error.code == .invalidArgument, error.message.contains("LANEPOOL_DEFAULT_LANES"),
          error.message.contains("abc")
        else { reportVerdictAndExit("makeDefault threw \(error)") }
      }
      // Nothing was created: fixed, a later call starts it.
      setenv("LANEPOOL_DEFAULT_LANES", "2", 1)
      guard let pool = try? LanePool.makeDefault(), pool.lanesPerBand == 2 else {
        reportVerdictAndExit("makeDefault after fixing the environment")
      }
      reportVerdictAndExit(nil)
    }
    recordChildVerdict(result)
  }

  @Test("LANEPOOL_DEFAULT_PLACEMENT, _RING and _NICE are checked and named")
  func otherVariables() async {
    let result = await #expect(processExitsWith: .success, observing: [\.standardErrorContent]) {
      setenv("LANEPOOL_DEFAULT_PLACEMENT", "numa", 1)
      do throws(LanePoolError) {
        _ = try LanePool.makeDefault()
        reportVerdictAndExit("placement numa accepted")
      } catch {
        guard error.message.contains("LANEPOOL_DEFAULT_PLACEMENT") else { reportVerdictAndExit("\(error)") }
      }
      setenv("LANEPOOL_DEFAULT_PLACEMENT", "cores", 1)
      setenv("LANEPOOL_DEFAULT_RING", "1000", 1)
      do throws(LanePoolError) {
        _ = try LanePool.makeDefault()
        reportVerdictAndExit("ring 1000 accepted")
      } catch {
        guard error.message.contains("LANEPOOL_DEFAULT_RING") else { reportVerdictAndExit("\(error)") }
      }
      setenv("LANEPOOL_DEFAULT_RING", "256", 1)
      setenv("LANEPOOL_DEFAULT_NICE", "up", 1)
      do throws(LanePoolError) {
        _ = try LanePool.makeDefault()
        reportVerdictAndExit("nice 'up' accepted")
      } catch {
        guard error.message.contains("LANEPOOL_DEFAULT_NICE") else { reportVerdictAndExit("\(error)") }
      }
      setenv("LANEPOOL_DEFAULT_NICE", "shift", 1)
      setenv("LANEPOOL_DEFAULT_LANES", "1", 1)
      // Unprivileged, so that the shift shows: the default band at nice 0 + 5.
      guard lp_test_set_own_nice(0) == 0, lp_test_drop_privileges(65534, 65534) == 0 else {
        reportVerdictAndExit("cannot drop privileges")
      }
      guard let pool = try? LanePool.makeDefault(), pool.lanesPerBand == 1,
        defaultRingCapacity() == 256,
        procSchedFields(tid: pool.lanes(for: .default)[0].info.threadID)?.nice == 5
      else { reportVerdictAndExit("valid variables not applied") }
      reportVerdictAndExit(nil)
    }
    recordChildVerdict(result)
  }

  @Test("LanePool.default with a bad environment stops with a message naming it and makeDefault()")
  func defaultStops() async {
    let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
      setenv("LANEPOOL_DEFAULT_LANES", "0", 1)
      _ = LanePool.default
    }
    let stderr = String(decoding: result?.standardErrorContent ?? [], as: UTF8.self)
    #expect(stderr.contains("LANEPOOL_DEFAULT_LANES"), "\(stderr)")
    #expect(stderr.contains("makeDefault()"), "\(stderr)")
  }

  @Test("the log handler of configureDefault may use the default pool while LanePool.default creates it (issue 23, 7)")
  func logHandlerUsesTheDefaultPool() async {
    let result = await #expect(processExitsWith: .success, observing: [\.standardErrorContent]) {
      logHandlerUsesTheDefaultPoolChild(throughMakeDefault: false)
    }
    recordChildVerdict(result)
  }

  @Test("the log handler of configureDefault may use the default pool while makeDefault() creates it (issue 23, 7)")
  func logHandlerUsesTheDefaultPoolMakeDefault() async {
    let result = await #expect(processExitsWith: .success, observing: [\.standardErrorContent]) {
      logHandlerUsesTheDefaultPoolChild(throughMakeDefault: true)
    }
    recordChildVerdict(result)
  }

  @Test("the unconfigured default is min(allowed CPUs, CPU quota) lanes per band")
  func quotaSizing() async {
    let result = await #expect(processExitsWith: .success, observing: [\.standardErrorContent]) {
      unsetenv("LANEPOOL_DEFAULT_LANES")
      var quota: UInt32 = 0
      let rc = lanepool_cpu_quota(&quota)
      guard rc == 0 || rc == ENOENT else { reportVerdictAndExit("lanepool_cpu_quota: \(rc)") }
      var count: UInt32 = 0
      var buf = [Int32](repeating: 0, count: 1)
      guard lanepool_allowed_cpus(&buf, 0, &count) == 0 else { reportVerdictAndExit("allowed CPUs") }
      var want = Int(count)
      if rc == 0 { want = min(want, Int(quota)) }
      want = max(1, min(want, 64))
      let got = LanePool.default.lanesPerBand
      reportVerdictAndExit(got == want ? nil : "lanesPerBand \(got), want \(want)")
    }
    recordChildVerdict(result)
  }
}

/// In an exit-test child: the default pool is created (through `LanePool.default` or
/// `makeDefault()`) with a log handler that uses it, and a line to log.
private func logHandlerUsesTheDefaultPoolChild(throughMakeDefault: Bool) -> Never {
  // A deadlock ends the child (SIGALRM): a failure, not a hung test run.
  alarm(60)
  for v in ["LANEPOOL_DEFAULT_LANES", "LANEPOOL_DEFAULT_PLACEMENT", "LANEPOOL_DEFAULT_RING"] { unsetenv(v) }
  // A log line during creation: nice -20 is refused without privilege.
  if getuid() == 0, setuid(65534) != 0 { reportVerdictAndExit("setuid") }
  final class Seen: Sendable {
    let lines = Atomic<Int>(0)
    let same = Atomic<Int>(0)
  }
  let seen = Seen()
  var c = LanePool.Configuration()
  c.lanesPerBand = 1
  var p = BandPolicy.default(for: .utility)
  p.nice = -20
  c.policies[.utility] = p
  c.logHandler = { _, _ in
    let a = LanePool.default
    let b = try? LanePool.makeDefault()
    if a === b { seen.same.add(1, ordering: .relaxed) }
    seen.lines.add(1, ordering: .relaxed)
  }
  do throws(LanePoolError) {
    try LanePool.configureDefault(c)
  } catch {
    reportVerdictAndExit("configureDefault threw \(error)")
  }
  let pool: LanePool
  if throughMakeDefault {
    guard let made = try? LanePool.makeDefault() else { reportVerdictAndExit("makeDefault threw") }
    pool = made
  } else {
    pool = LanePool.default
  }
  let lines = seen.lines.load(ordering: .relaxed)
  guard lines > 0 else { reportVerdictAndExit("no log line (nice -20 was not refused?)") }
  guard seen.same.load(ordering: .relaxed) == lines else { reportVerdictAndExit("another pool in the handler") }
  guard pool === LanePool.default, pool.isDefault else { reportVerdictAndExit("not the default pool") }
  reportVerdictAndExit(nil)
}

/// The ring capacity of the default pool, from the C core.
private func defaultRingCapacity() -> UInt32 {
  var raw: OpaquePointer?
  guard lanepool_default(&raw) == 0 else { return 0 }
  var info = lanepool_info_t()
  guard lanepool_info(raw, &info) == 0 else { return 0 }
  return info.ring_capacity
}
