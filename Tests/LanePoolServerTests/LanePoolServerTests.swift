import Foundation
import LanePool
import LanePoolServer
import Logging
import Metrics
import MetricsTestKit
import ServiceLifecycle
import ServiceLifecycleTestKit
import Synchronization
import Testing

/// Captures log records in memory.
final class CapturedLogs: @unchecked Sendable {
  // @unchecked: `records` is guarded by `lock`.
  private let lock = NSLock()
  private var records: [(Logger.Level, String)] = []
  func append(_ level: Logger.Level, _ message: String) {
    lock.lock()
    records.append((level, message))
    lock.unlock()
  }
  var all: [(Logger.Level, String)] {
    lock.lock()
    defer { lock.unlock() }
    return records
  }
}

struct CapturingHandler: LogHandler {
  let sink: CapturedLogs
  var metadata: Logger.Metadata = [:]
  var logLevel: Logger.Level = .trace
  subscript(metadataKey key: String) -> Logger.Metadata.Value? {
    get { metadata[key] }
    set { metadata[key] = newValue }
  }
  func log(event: LogEvent) { sink.append(event.level, event.message.description) }
}

func capturingLogger() -> (Logger, CapturedLogs) {
  let sink = CapturedLogs()
  return (Logger(label: "test") { _ in CapturingHandler(sink: sink) }, sink)
}

final class Count: Sendable {
  let value = Atomic<Int>(0)
  func bump() { value.add(1, ordering: .relaxed) }
  var n: Int { value.load(ordering: .acquiring) }
}

func waitUntil(_ seconds: Double = 30, _ cond: () -> Bool) -> Bool {
  let end = Date().addingTimeInterval(seconds)
  while !cond() {
    if Date() > end { return false }
    usleep(1000)
  }
  return true
}

@Suite("LanePoolServer: lifecycle, logging, metrics")
struct LanePoolServerTests {
  @Test("graceful shutdown drains the pool and run() returns, with a summary log")
  func gracefulShutdownDrains() async throws {
    let (logger, logs) = capturingLogger()
    let pool = try LanePool(name: "svc1", lanesPerBand: 1)
    let ran = Count()
    for _ in 0..<500 { try pool.async(qos: .utility) { usleep(100); ran.bump() } }
    try await testGracefulShutdown { trigger in
      try await withThrowingTaskGroup(of: Void.self) { group in
        group.addTask { try await LanePoolService(pool: pool, logger: logger).run() }
        trigger.triggerGracefulShutdown()
        try await group.waitForAll()
      }
    }
    #expect(ran.n == 500)
    #expect(pool.isShutDown)
    #expect(logs.all.contains { $0.0 == .info && $0.1.contains("shut down gracefully") && $0.1.contains("500 tasks run") })
  }

  @Test("cancellation cancels the pool: queued tasks are released without running")
  func cancellationCancels() async throws {
    let (logger, logs) = capturingLogger()
    let pool = try LanePool(name: "svc2", lanesPerBand: 1)
    let gate = DispatchSemaphore(value: 0)
    let ran = Count()
    let lane = pool.queue(for: .background)
    try lane.async { gate.wait() }
    for _ in 0..<100 { try lane.async { ran.bump() } }
    let task = Task { try await LanePoolService(pool: pool, logger: logger).run() }
    try await Task.sleep(for: .milliseconds(20))
    task.cancel()
    #expect(waitUntil { pool.isShutDown })  // the cancelling shutdown has begun
    gate.signal()  // the running task finishes; the 100 behind it are discarded
    await #expect(throws: CancellationError.self) { try await task.value }
    #expect(ran.n == 0)
    #expect(pool.isShutDown)
    #expect(logs.all.contains { $0.0 == .notice && $0.1.contains("100 queued tasks discarded") })
  }

  @Test("priority refusals and stalls reach the Logger")
  func loggerBridge() async throws {
    let (logger, logs) = capturingLogger()
    var c = LanePool.Configuration()
    c.name = "svc3"
    c.lanesPerBand = 1
    c.stallThreshold = .milliseconds(10)
    c.log(to: logger)
    let pool = try LanePool(configuration: c)
    let gate = DispatchSemaphore(value: 0)
    try pool.queue(for: .utility).async { gate.wait() }
    #expect(waitUntil { logs.all.contains { $0.0 == .warning && $0.1.contains("svc3-ut-0") } })
    gate.signal()
    try await pool.shutdownGracefully()
  }

  @Test("metrics: tasks executed, queue depth, queue wait, run time and busy ratio per band")
  func metricsSampled() async throws {
    let metrics = TestMetrics()
    let pool = try LanePool(name: "svc4", lanesPerBand: 2)
    let collector = LanePoolMetrics(pool: pool, interval: .milliseconds(10), factory: metrics)
    for _ in 0..<1_000 { try pool.async(qos: .userInitiated) {} }
    for lane in pool.lanes(for: .userInitiated) { try lane.sync {} }
    collector.sample()
    let dims = [("pool", "svc4"), ("qos", "userInitiated")]
    // 1,000 tasks plus the two syncs, counted once. A lane counts a task after it
    // returns, and a sync's caller may wake (and sample) before that: sample again
    // until the count is in.
    #expect(waitUntil {
      collector.sample()
      return (try? metrics.expectCounter("lanepool_tasks_executed_total", dims).totalValue) ?? 0 >= 1_002
    })
    collector.sample()  // the probes of the first pass have run by now
    let wait = try metrics.expectTimer("lanepool_queue_wait", dims)
    #expect(waitUntil { wait.values.count >= 2 })
    #expect(try metrics.expectTimer("lanepool_task_run_time", dims).values.count >= 1)
    #expect(try metrics.expectGauge("lanepool_queue_depth", dims).lastValue != nil)
    #expect(try metrics.expectGauge("lanepool_busy_ratio", dims).lastValue != nil)
    // As a Service: stops at graceful shutdown.
    try await testGracefulShutdown { trigger in
      try await withThrowingTaskGroup(of: Void.self) { group in
        group.addTask { try await collector.run() }
        try await Task.sleep(for: .milliseconds(30))
        trigger.triggerGracefulShutdown()
        try await group.waitForAll()
      }
    }
    try await pool.shutdownGracefully()
  }

  @Test(
    "case 14: a drain cancelled by ServiceGroup's deadline escalates to cancel; the process is not killed"
  )
  func drainEscalatesToCancelUnderDeadline() async {
    let result = await #expect(processExitsWith: .success, observing: [\.standardErrorContent]) {
      let verdict = await escalationCheck()
      FileHandle.standardError.write(Data((verdict.map { "FAIL: \($0)" } ?? "OK").utf8))
      _exit(0)
    }
    guard let result else {
      Issue.record("the child was killed or failed (ServiceGroup: cancellation took longer than allowed?)")
      return
    }
    let said = String(decoding: result.standardErrorContent, as: UTF8.self)
    #expect(said.hasSuffix("OK"), "child said: \(said)")
  }
}

/// Child process: 40 x 100 ms tasks queued on one lane, graceful shutdown with a
/// 100 ms graceful budget and a 2 s cancellation budget. Draining takes 4 s, so the
/// group cancels the service; the drain must turn into a cancel in time.
func escalationCheck() async -> String? {
  let (logger, logs) = capturingLogger()
  let pool: LanePool
  do {
    pool = try LanePool(name: "svcesc", lanesPerBand: 1)
    let lane = pool.queue(for: .utility)
    for _ in 0..<40 { try lane.async { usleep(100_000) } }
  } catch { return "setup: \(error)" }
  var config = ServiceGroupConfiguration(
    services: [.init(service: LanePoolService(pool: pool, logger: logger))],
    logger: Logger(label: "group") { _ in SwiftLogNoOpLogHandler() })
  config.maximumGracefulShutdownDuration = .milliseconds(100)
  config.maximumCancellationDuration = .seconds(2)
  let group = ServiceGroup(configuration: config)
  let run = Task { try await group.run() }
  try? await Task.sleep(for: .milliseconds(20))
  await group.triggerGracefulShutdown()
  _ = try? await run.value  // CancellationError from the escalated service is expected
  guard pool.isShutDown else { return "the pool is not shut down" }
  let lines = logs.all.map(\.1)
  guard let line = lines.first(where: { $0.contains("cancelled while draining") }) else {
    return "no escalation logged: \(lines)"
  }
  // "... N tasks run, M queued tasks discarded"
  let words = line.split(separator: " ")
  guard let at = words.firstIndex(of: "queued"), at > 0, let discarded = Int(words[at - 1]) else {
    return "cannot read the discarded count: \(line)"
  }
  guard discarded > 0 else { return "nothing was discarded: \(line)" }
  return nil
}
