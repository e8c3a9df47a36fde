import Dispatch
import LanePool
import Testing

// Issue 11, item 4: LanePool as the process's default executor (experimental SPI).
// Each check runs in a child process (an exit test): the default executor is a
// process-wide choice.

private actor Plain {
  func where_() -> String? { Lane.current?.name }
}

private func laneBand(of priority: TaskPriority?) -> QoS? {
  let done = DispatchSemaphore(value: 0)
  nonisolated(unsafe) var band: QoS? = nil
  Task.detached(priority: priority) {
    band = Lane.current?.qos
    done.signal()
  }
  done.wait()
  return band
}

@Suite("LanePool as the default executor")
struct DefaultExecutorTests {
  @Test("after installing, Task(priority:) runs on a lane of the band its priority names")
  func tasksRunOnTheirBand() async {
    await #expect(processExitsWith: .success) {
      #expect(!LanePool.isDefaultExecutor)
      #expect(laneBand(of: .low) == nil)  // before: Swift's own executor
      try LanePool.installAsDefaultExecutor(
        configuration: {
          var c = LanePool.Configuration()
          c.lanesPerBand = 1
          return c
        }())
      #expect(LanePool.isDefaultExecutor)
      #expect(laneBand(of: .high) == .userInitiated)
      #expect(laneBand(of: .userInitiated) == .userInitiated)
      #expect(laneBand(of: .medium) == .default)
      #expect(laneBand(of: nil) == .default)
      #expect(laneBand(of: .low) == .utility)
      #expect(laneBand(of: .utility) == .utility)
      #expect(laneBand(of: .background) == .background)
      #expect(laneBand(of: TaskPriority(rawValue: 33)) == .userInteractive)
      #expect(LanePool.default.lanes(for: .utility).count == 1)  // the configuration took
      // Default actors and child tasks run on lanes too.
      let done = DispatchSemaphore(value: 0)
      nonisolated(unsafe) var names: [String?] = []
      Task.detached(priority: .utility) {
        let actorLane = await Plain().where_()
        let childLane = await withTaskGroup(of: String?.self) { g in
          g.addTask { Lane.current?.name }
          return await g.next()!
        }
        names = [actorLane, childLane]
        done.signal()
      }
      done.wait()
      #expect(names.count == 2 && names.allSatisfy { $0 != nil })
      // Task.sleep: the runtime hands the delayed job to the default executor's
      // scheduling side; it resumes on a lane of the task's band, never early.
      nonisolated(unsafe) var slept: (ns: UInt64, band: QoS?) = (0, nil)
      Task.detached(priority: .background) {
        let t0 = DispatchTime.now().uptimeNanoseconds
        try? await Task.sleep(for: .milliseconds(30))
        slept = (DispatchTime.now().uptimeNanoseconds - t0, Lane.current?.qos)
        done.signal()
      }
      done.wait()
      #expect(slept.ns >= 30_000_000)
      #expect(slept.band == .background)
      // A second install is refused.
      #expect(throws: LanePoolError.self) { try LanePool.installAsDefaultExecutor() }
    }
  }
}
