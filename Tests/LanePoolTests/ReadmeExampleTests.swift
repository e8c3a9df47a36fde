import Testing

@testable import LanePool

/// The README's Swift quick start, kept compiling and running here.
@Suite("README example")
struct ReadmeExampleTests {
  @Test("the quick start runs as the README says")
  func quickStart() async throws {
    let log = Locked<[String]>([])
    // --- README begins ---
    try LanePool.queue(for: .userInitiated).async { print("default pool") }  // YYDispatchQueueGetForQOS
    let pool = try LanePool(name: "db", lanesPerBand: 2)  // 5 bands x 2 lanes
    let lane = pool.queue(for: .utility)  // round-robin, like YY's -queue
    for i in 1...3 { try lane.async { log.withLock { $0.append("task \(i)") } } }  // FIFO on this lane
    let answer = try lane.sync { 6 * 7 }  // after the three tasks
    try pool.queue(for: .default, key: "user-42").async {}  // same key, same lane
    print(answer, lane.info.threadName)  // "42 db-ut-0", say
    try await pool.shutdownGracefully()  // drain, then join
    // --- README ends ---
    #expect(answer == 42)
    #expect(lane.info.threadName.hasPrefix("db-ut-"))
    #expect(log.withLock { $0 } == ["task 1", "task 2", "task 3"])
  }
}
