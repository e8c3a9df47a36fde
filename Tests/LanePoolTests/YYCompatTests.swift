import Dispatch
import Foundation
import LanePool
import LanePoolDispatch
import Testing

/// Written the way YYDispatchQueuePool call sites are (YYKit's YYAsyncLayer,
/// YYWebImage...): the same calls, with `import LanePoolDispatch` instead of YYKit.
@Suite("YYDispatchQueuePool-shaped API")
struct YYCompatTests {
  @Test("YYDispatchQueueGetForQOS and defaultPool(for:) hand out lanes round-robin")
  func defaultPools() {
    let q1 = YYDispatchQueueGetForQOS(.userInitiated)
    let q2 = YYDispatchQueueGetForQOS(.userInitiated)
    #expect(q1.lane.qos == .userInitiated)
    if LanePool.default.lanesPerBand > 1 { #expect(q1 != q2) }
    let pool = YYDispatchQueuePool.defaultPool(for: .background)
    #expect(pool === YYDispatchQueuePool.defaultPool(for: .background))
    #expect(pool.queue().lane.qos == .background)
  }

  @Test("a custom pool: init(name:queueCount:qos:), queue(), async, sync, asyncAfter, groups")
  func customPool() throws {
    #expect(YYDispatchQueuePool(name: "bad", queueCount: 0, qos: .utility) == nil)
    #expect(YYDispatchQueuePool(name: "bad", queueCount: 33, qos: .utility) == nil)
    let pool = try #require(YYDispatchQueuePool(name: "com.example.render", queueCount: 3, qos: .userInitiated))
    #expect(pool.queueCount == 3)
    let queues = (0..<6).map { _ in pool.queue() }
    #expect(Set(queues).count == 3)  // round-robin over the 3 queues
    #expect(queues[0] == queues[3])

    let log = Locked<[Int]>([])
    let queue = pool.queue()
    for i in 0..<100 { queue.async { log.withLock { $0.append(i) } } }
    let snapshot = queue.sync { log.withLock { $0 } }  // FIFO: all 100, in order
    #expect(snapshot == Array(0..<100))
    struct Boom: Error {}
    #expect(throws: Boom.self) { try queue.sync { throw Boom() } }

    let group = DispatchGroup()
    let count = Counter()
    for _ in 0..<50 { pool.queue().async(group: group) { count.bump() } }
    #expect(group.wait(timeout: .now() + 30) == .success)
    #expect(count.count == 50)

    let fired = DispatchSemaphore(value: 0)
    let deadline = DispatchTime.now() + .milliseconds(5)
    queue.asyncAfter(deadline: deadline) {
      #expect(DispatchTime.now() >= deadline)
      fired.signal()
    }
    #expect(fired.wait(timeout: .now() + 30) == .success)
  }

  @Test("QoS converts from GCD and Foundation classes")
  func qosConversions() {
    #expect(QoS(DispatchQoS.QoSClass.userInteractive) == .userInteractive)
    #expect(QoS(DispatchQoS.QoSClass.userInitiated) == .userInitiated)
    #expect(QoS(DispatchQoS.QoSClass.default) == .default)
    #expect(QoS(DispatchQoS.QoSClass.unspecified) == .default)
    #expect(QoS(DispatchQoS.QoSClass.utility) == .utility)
    #expect(QoS(DispatchQoS.QoSClass.background) == .background)
    #expect(QoS(QualityOfService.userInteractive) == .userInteractive)
    #expect(QoS(QualityOfService.userInitiated) == .userInitiated)
    #expect(QoS(QualityOfService.default) == .default)
    #expect(QoS(QualityOfService.utility) == .utility)
    #expect(QoS(QualityOfService.background) == .background)
    #expect(QoS.allCases.map(\.rawValue) == [0x21, 0x19, 0x15, 0x11, 0x09])
  }
}
