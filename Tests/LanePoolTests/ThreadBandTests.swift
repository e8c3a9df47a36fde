import CLanePool
import Foundation
import LanePoolTestSupport
import Testing

@testable import LanePool

@Suite("Bands for threads LanePool does not own: LanePool.withBand, ThreadBand")
struct ThreadBandTests {
  @Test("as root: the band's nice and policy in /proc inside, the thread's own after (also after a throw)")
  func privileged() async {
    let result = await #expect(processExitsWith: .success, observing: [\.standardErrorContent]) {
      reportVerdictAndExit(threadBandCheck(privileged: true))
    }
    recordChildVerdict(result)
  }

  @Test("unprivileged (uid 65534, RLIMIT_NICE 0): what may be undone is applied, all of it restored")
  func unprivileged() async {
    let result = await #expect(processExitsWith: .success, observing: [\.standardErrorContent]) {
      guard lp_test_set_own_nice(0) == 0 else { reportVerdictAndExit("could not reset nice") }
      let rc = lp_test_drop_privileges(65534, 65534)
      guard rc == 0, geteuid() == 65534 else { reportVerdictAndExit("cannot drop privileges: errno \(rc)") }
      reportVerdictAndExit(threadBandCheck(privileged: false))
    }
    recordChildVerdict(result)
  }
}

@Suite("Escalation: a lane runs at the band of a caller waiting on it (Lane.sync)")
struct EscalationTests {
  @Test("as root: a userInteractive caller's sync boosts a background lane, /proc shows it, restored after")
  func privileged() async {
    let result = await #expect(processExitsWith: .success, observing: [\.standardErrorContent]) {
      reportVerdictAndExit(syncEscalationCheck(privileged: true))
    }
    recordChildVerdict(result)
  }

  @Test("unprivileged: nice, policy, slice kept (RLIMIT_NICE 0), I/O priority raised, one log line, restored after")
  func unprivileged() async {
    let result = await #expect(processExitsWith: .success, observing: [\.standardErrorContent]) {
      guard lp_test_set_own_nice(0) == 0 else { reportVerdictAndExit("could not reset nice") }
      let rc = lp_test_drop_privileges(65534, 65534)
      guard rc == 0, geteuid() == 65534 else { reportVerdictAndExit("cannot drop privileges: errno \(rc)") }
      reportVerdictAndExit(syncEscalationCheck(privileged: false))
    }
    recordChildVerdict(result)
  }
}

/// Runs in a child process.
func syncEscalationCheck(privileged: Bool) -> String? {
  let logs = Locked<[String]>([])
  let pool: LanePool
  do {
    pool = try LanePool(name: "esc", lanesPerBand: 1) { _, line in logs.withLock { $0.append(line) } }
  } catch {
    return "pool did not start: \(error)"
  }
  let bg = pool.queue(for: .background)
  let tid = bg.info.threadID
  let own = SchedState(nice: 10, policy: SCHED_BATCH_, ioprio: ioprioValue(2, 7))
  guard schedState(tid: tid) == own else { return "background lane not at 10 BATCH, BE 7" }
  // Boosted: the band's nice and policy as root; without privilege (RLIMIT_NICE 0) nice
  // cannot go below 10 and the lane keeps its policy and slice: the I/O priority moves.
  func boosted(_ nice: Int, _ level: Int) -> SchedState {
    SchedState(
      nice: privileged ? nice : 10, policy: privileged ? SCHED_OTHER_ : SCHED_BATCH_, ioprio: ioprioValue(2, level))
  }
  let seen: SchedState?
  do {
    seen = try LanePool.withBand(.userInteractive) {
      try bg.sync(onLaneThread: true) { schedState(tid: tid) }
    }
  } catch {
    return "sync threw \(error)"
  }
  guard seen == boosted(-5, 0) else {
    return "inside the sync the lane ran at \(String(describing: seen))"
  }
  // The lane leaves the boost before it answers the sync.
  func restored() -> Bool { schedState(tid: tid) == own }
  guard restored() else { return "not restored" }
  // A wait LanePool does not see, that times out: boosted during it, restored after.
  let gate = DispatchSemaphore(value: 0)
  let busy = DispatchSemaphore(value: 0)
  do {
    try bg.async {
      busy.signal()
      gate.wait()
    }
  } catch {
    return "async threw \(error)"
  }
  busy.wait()
  let during = bg.withEscalation(to: .userInitiated) { () -> SchedState? in
    _ = gate.wait(timeout: .now() + .milliseconds(5))  // times out: the lane is held up
    return schedState(tid: tid)
  }
  gate.signal()
  guard during == boosted(-3, 2) else {
    return "withEscalation: the lane ran at \(String(describing: during))"
  }
  guard restored() else { return "not restored after withEscalation" }
  // A group wait: the lane with a member is boosted while the wait blocks, restored
  // when it ends; a wait that times out too.
  let group = LanePool.LaneGroup()
  let hold = DispatchSemaphore(value: 0)
  let started = DispatchSemaphore(value: 0)
  do {
    try bg.async(group: group) {
      started.signal()
      hold.wait()
    }
  } catch {
    return "async(group:) threw \(error)"
  }
  started.wait()
  let timedOut = LanePool.withBand(.userInitiated) { group.wait(timeout: .milliseconds(5)) }
  guard !timedOut else { return "the group emptied while its member was held" }
  guard restored() else { return "not restored after a group wait that timed out" }
  let waited = DispatchSemaphore(value: 0)
  let waiter = Thread {
    LanePool.withBand(.userInteractive) { group.wait() }
    waited.signal()
  }
  waiter.start()
  var boostedSeen = false
  for _ in 0..<60_000 {
    if schedState(tid: tid) == boosted(-5, 0) {
      boostedSeen = true
      break
    }
    usleep(1000)
  }
  hold.signal()
  waited.wait()
  guard boostedSeen else { return "a group wait did not boost the member's lane" }
  guard restored() else { return "not restored after a group wait" }
  let limited = logs.withLock { $0 }.filter { $0.contains("escalation") }
  guard limited.count == (privileged ? 0 : 1) else { return "escalation log lines: \(limited)" }
  return nil
}

private struct Boom: Error {}

/// Runs in a child process (its main thread's priority is changed and put back).
func threadBandCheck(privileged: Bool) -> String? {
  guard lp_test_set_own_nice(0) == 0 else { return "could not start at nice 0" }
  let tid = Int32(lp_test_gettid())
  guard let before = procSchedFields(tid: tid), before == (0, SCHED_OTHER_) else { return "not at nice 0 OTHER" }
  // userInteractive: nice -5 as root; kept at 0 (refused) without privilege.
  let inside = LanePool.withBand(.userInteractive) { procSchedFields(tid: tid) }
  guard let inside else { return "no /proc" }
  guard inside.nice == (privileged ? -5 : 0), inside.policy == SCHED_OTHER_ else {
    return "userInteractive inside: \(inside)"
  }
  guard let after = procSchedFields(tid: tid), after == (0, SCHED_OTHER_) else { return "not restored after ui" }
  // background: SCHED_BATCH and nice 10; without privilege nice is withheld (the thread
  // could not come back to 0). Restored also when the body throws.
  do {
    try LanePool.withBand(.background) { () throws(Boom) in
      guard let bg = procSchedFields(tid: tid), bg.policy == SCHED_BATCH_, bg.nice == (privileged ? 10 : 0) else {
        return
      }
      throw Boom()
    }
    return "background: the body did not see SCHED_BATCH at the expected nice"
  } catch {}
  guard let after2 = procSchedFields(tid: tid), after2 == (0, SCHED_OTHER_) else { return "not restored after a throw" }
  // The token's record.
  do {
    let band = try LanePool.ThreadBand.enter(.userInitiated)
    if privileged {
      guard band.applied.nice.got == -3, band.applied.nice.error == nil else { return "record \(band.applied.nice)" }
    } else {
      guard band.applied.nice.got == 0, band.applied.nice.error != nil else { return "record \(band.applied.nice)" }
    }
    try band.restore()
    // Strict: refused without privilege, nothing changed.
    do {
      let strict = try LanePool.ThreadBand.enter(.userInteractive, strict: true)
      guard privileged else { return "strict entered without privilege" }
      try strict.restore()
    } catch {
      guard !privileged, error.code == .notPermitted else { return "strict threw \(error)" }
    }
  } catch {
    return "ThreadBand threw \(error)"
  }
  guard let end = procSchedFields(tid: tid), end == (0, SCHED_OTHER_) else { return "not restored at the end" }
  return nil
}
