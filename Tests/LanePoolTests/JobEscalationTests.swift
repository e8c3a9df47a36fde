import CLanePool
import Dispatch
import Foundation
import LanePoolTestSupport
import Testing

@testable import LanePool

@Suite("Escalation of Swift waits: jobs above their lane's band, Lane.run, a run caller escalated")
struct JobEscalationTests {
  @Test("as root: a busy background lane runs at userInitiated while such a job or run caller waits, restored after")
  func privileged() async {
    let result = await #expect(processExitsWith: .success, observing: [\.standardErrorContent]) {
      reportVerdictAndExit(jobEscalationCheck(privileged: true))
    }
    recordChildVerdict(result)
  }

  @Test("unprivileged (uid 65534, RLIMIT_NICE 0): nice 10 and SCHED_BATCH kept, I/O priority raised, restored after")
  func unprivileged() async {
    let result = await #expect(processExitsWith: .success, observing: [\.standardErrorContent]) {
      guard lp_test_set_own_nice(0) == 0 else { reportVerdictAndExit("could not reset nice") }
      let rc = lp_test_drop_privileges(65534, 65534)
      guard rc == 0, geteuid() == 65534 else { reportVerdictAndExit("cannot drop privileges: errno \(rc)") }
      reportVerdictAndExit(jobEscalationCheck(privileged: false))
    }
    recordChildVerdict(result)
  }

  @Test("LANEPOOL_ESCALATION=0: a high-priority job on a busy background lane leaves it at its band")
  func disabled() async {
    let result = await #expect(processExitsWith: .success, observing: [\.standardErrorContent]) {
      setenv("LANEPOOL_ESCALATION", "0", 1)
      reportVerdictAndExit(jobEscalationDisabledCheck())
    }
    recordChildVerdict(result)
  }
}

/// An actor on a lane, reporting the lane thread's nice and policy from inside its jobs.
private actor LaneActor {
  let lane: LanePool.Lane
  let tid: Int32
  let order: Locked<[Int]>
  init(lane: LanePool.Lane, order: Locked<[Int]>) {
    self.lane = lane
    self.tid = lane.info.threadID
    self.order = order
  }
  nonisolated var unownedExecutor: UnownedSerialExecutor { lane.asUnownedSerialExecutor() }
  func seen(note: Int? = nil) -> SchedState? {
    if let note { order.withLock { $0.append(note) } }
    return schedState(tid: tid)
  }
}

/// Waits for a task from synchronous code (a background waiter: awaiting never escalates
/// the awaited task); nil if it has not finished after 10 s.
private func wait<T: Sendable, F: Error>(_ task: Task<T, F>) -> Result<T, F>? {
  let done = DispatchSemaphore(value: 0)
  let out = Locked<Result<T, F>?>(nil)
  Task.detached(priority: .background) {
    let r = await task.result
    out.withLock { $0 = r }
    done.signal()
  }
  guard done.wait(timeout: .now() + .seconds(60)) == .success else { return nil }
  return out.withLock { $0 }
}

/// Polls (1 ms steps, at most 60 s) until `condition` holds.
private func eventually(_ condition: () -> Bool) -> Bool {
  for _ in 0..<60_000 {
    if condition() { return true }
    usleep(1000)
  }
  return condition()
}

/// Runs in a child process.
func jobEscalationCheck(privileged: Bool) -> String? {
  let pool: LanePool
  do {
    pool = try LanePool(name: "jesc", lanesPerBand: 1)
  } catch {
    return "pool did not start: \(error)"
  }
  let bg = pool.queue(for: .background)
  let tid = bg.info.threadID
  let own = SchedState(nice: 10, policy: SCHED_BATCH_, ioprio: ioprioValue(2, 7))
  // userInitiated (TaskPriority.high, 25); without privilege only the I/O priority moves
  // (nice cannot go below 10, and the lane keeps its policy and slice: priorities.md).
  let boosted = SchedState(
    nice: privileged ? -3 : 10, policy: privileged ? SCHED_OTHER_ : SCHED_BATCH_, ioprio: ioprioValue(2, 2))
  func at(_ want: SchedState) -> Bool { schedState(tid: tid) == want }
  guard at(own) else { return "background lane not at 10 BATCH" }
  let order = Locked<[Int]>([])
  let actor = LaneActor(lane: bg, order: order)
  let gate = DispatchSemaphore(value: 0)
  let started = DispatchSemaphore(value: 0)
  func holdLane() -> String? {
    do {
      try bg.async {
        started.signal()
        gate.wait()
      }
    } catch {
      return "async threw \(error)"
    }
    started.wait()
    return nil
  }

  // 1. An idle lane starts a high-priority job at once: not boosted, no system call.
  guard case .success(let idle)? = wait(Task.detached(priority: .high) { await actor.seen() }),
    let idle, idle == own
  else { return "a high-priority job on an idle lane was boosted (or /proc unreadable)" }

  // 2. A busy lane: a high-priority actor job queued behind a closure boosts the lane
  //    (the closure ahead runs boosted too); FIFO holds: 1, the job (2), 3.
  if let e = holdLane() { return e }
  do { try bg.async { order.withLock { $0.append(1) } } } catch { return "async threw \(error)" }
  let job = Task.detached(priority: .high) { await actor.seen(note: 2) }
  guard eventually({ bg.info.depth == 2 }) else { return "the actor's job never reached the lane" }
  do { try bg.async { order.withLock { $0.append(3) } } } catch { return "async threw \(error)" }
  guard eventually({ at(boosted) }) else {
    return "busy lane with a high-priority job queued: \(String(describing: schedState(tid: tid)))"
  }
  gate.signal()
  guard case .success(let inJob)? = wait(job), let inJob, inJob == boosted else {
    return "the boosted job did not see the boost"
  }
  guard eventually({ at(own) && bg.info.depth == 0 }) else { return "not restored after the job ran" }
  guard order.withLock({ $0 }) == [1, 2, 3] else { return "FIFO broken: \(order.withLock { $0 })" }

  // 3. Lane.run from a high-priority task while the lane is busy: boosted until the
  //    closure has run, restored by the lane.
  if let e = holdLane() { return e }
  let run = Task.detached(priority: .high) { try await bg.run { schedState(tid: tid) } }
  guard eventually({ at(boosted) }) else { return "Lane.run on a busy lane did not boost it" }
  gate.signal()
  guard case .success(let inRun)? = wait(run), let inRun, inRun == boosted else {
    return "the run closure did not see the boost"
  }
  guard eventually({ at(own) }) else { return "not restored after Lane.run" }

  // 4. A run caller cancelled while it waits leaves the boost at once, the lane still busy.
  if let e = holdLane() { return e }
  let cancelled = Task.detached(priority: .high) { try await bg.run { 1 } }
  guard eventually({ at(boosted) }) else { return "Lane.run (to be cancelled) did not boost" }
  cancelled.cancel()
  guard case .failure(let error)? = wait(cancelled), error is CancellationError else {
    return "the cancelled run did not throw CancellationError"
  }
  guard at(own) else { return "a cancelled run caller left the lane boosted" }
  gate.signal()

  // 5. A background run caller (the lane's band: no boost) escalated while it waits
  //    (as when a higher-priority task awaits it): the boost follows the escalation.
  if let e = holdLane() { return e }
  let low = Task.detached(priority: .background) { try await bg.run { schedState(tid: tid) } }
  guard eventually({ bg.info.depth == 1 }) else { return "the low run closure never reached the lane" }
  guard at(own) else { return "a background run caller boosted a background lane" }
  low.escalatePriority(to: .high)
  guard eventually({ at(boosted) }) else { return "escalating the run caller did not boost the lane" }
  gate.signal()
  guard case .success(let inLow)? = wait(low), let inLow, inLow == boosted else {
    return "the escalated run closure did not see the boost"
  }
  guard eventually({ at(own) }) else { return "not restored after the escalated run" }

  // 6. A cancelling shutdown discards a boosted job: its boost ends there and the job
  //    still runs (on the fallback), so its caller finishes; the discard counts it.
  if let e = holdLane() { return e }
  let discarded = Task.detached(priority: .high) { await actor.seen(note: 6) }
  guard eventually({ bg.info.depth == 1 && at(boosted) }) else { return "the job to discard did not boost" }
  let count = Locked<Int?>(nil)
  let stopper = Thread { count.withLock { $0 = try? pool.shutdown(discardingQueued: true) } }
  stopper.start()
  guard eventually({ pool.isShutDown }) else { return "the shutdown did not start" }
  gate.signal()
  guard case .success? = wait(discarded) else { return "the discarded job's caller did not finish" }
  guard eventually({ count.withLock { $0 } != nil }), count.withLock({ $0 }) == 1 else {
    return "shutdown discarded \(String(describing: count.withLock { $0 })) tasks, expected the job"
  }
  guard order.withLock({ $0 }) == [1, 2, 3, 6] else { return "order after the discard: \(order.withLock { $0 })" }
  return nil
}

/// Runs in a child process with LANEPOOL_ESCALATION=0.
func jobEscalationDisabledCheck() -> String? {
  let pool: LanePool
  do {
    pool = try LanePool(name: "jesc0", lanesPerBand: 1)
  } catch {
    return "pool did not start: \(error)"
  }
  let bg = pool.queue(for: .background)
  let tid = bg.info.threadID
  let actor = LaneActor(lane: bg, order: Locked([]))
  let gate = DispatchSemaphore(value: 0)
  let started = DispatchSemaphore(value: 0)
  do {
    try bg.async {
      started.signal()
      gate.wait()
    }
  } catch {
    return "async threw \(error)"
  }
  started.wait()
  let job = Task.detached(priority: .high) { await actor.seen() }
  let run = Task.detached(priority: .high) { try await bg.run { schedState(tid: tid) } }
  guard eventually({ bg.info.depth == 2 }) else { return "the job and run closure never reached the lane" }
  gate.signal()
  let own = SchedState(nice: 10, policy: SCHED_BATCH_, ioprio: ioprioValue(2, 7))
  guard case .success(let a)? = wait(job), let a, a == own,
    case .success(let b)? = wait(run), let b, b == own
  else { return "boosted with LANEPOOL_ESCALATION=0" }
  return nil
}
