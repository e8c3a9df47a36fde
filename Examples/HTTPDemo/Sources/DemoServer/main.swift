// demo-server --offload lanepool|gcd|executor [--port N]
//   GET /interactive  small work (about 20 us of hashing) at userInteractive
//   GET /heavy        CPU-bound work (about 20 ms) at background
// The HTTP side is Hummingbird on SwiftNIO's event loops in every variant; only the
// offload differs: LanePool bands (lane.run), DispatchQueue.global(qos:), or
// `executor`: LanePool installed as the process's default executor (experimental), the
// work in a Task whose priority picks the band, and Hummingbird's own handler tasks on
// lanes too.
import Dispatch
import Foundation
import Hummingbird
import LanePool

// Before anything touches Swift concurrency (see LanePool.installAsDefaultExecutor).
if CommandLine.arguments.contains("executor") { try LanePool.installAsDefaultExecutor() }

enum Offload: String, Sendable { case lanepool, gcd, executor }

enum Options {
  static let parsed: (offload: Offload, port: Int) = {
    var offload = Offload.lanepool
    var port = 8080
    var args = CommandLine.arguments.dropFirst().makeIterator()
    while let a = args.next() {
      switch a {
      case "--offload": offload = Offload(rawValue: args.next() ?? "") ?? .lanepool
      case "--port": port = Int(args.next() ?? "") ?? port
      default:
        print("usage: demo-server --offload lanepool|gcd|executor [--port N]")
        exit(2)
      }
    }
    return (offload, port)
  }()
}
let offload = Options.parsed.offload
let port = Options.parsed.port

/// FNV-1a over a buffer, `rounds` times: deterministic CPU work.
@inline(never) func work(rounds: Int) -> UInt64 {
  var h: UInt64 = 0xcbf2_9ce4_8422_2325
  for r in 0..<rounds {
    for i in 0..<1024 {
      h ^= UInt64(truncatingIfNeeded: i &+ r)
      h = h &* 0x100_0000_01b3
    }
  }
  return h
}

/// Calibrated once: rounds per microsecond of this machine.
let roundsPerMicrosecond: Double = {
  let t0 = DispatchTime.now().uptimeNanoseconds
  _ = work(rounds: 2_000)
  let ns = Double(DispatchTime.now().uptimeNanoseconds - t0)
  return 2_000 / (ns / 1000)
}()
let interactiveRounds = max(1, Int(20 * roundsPerMicrosecond))  // about 20 us
let heavyRounds = max(1, Int(20_000 * roundsPerMicrosecond))  // about 20 ms

func onGCD<T: Sendable>(_ qos: DispatchQoS.QoSClass, _ body: @escaping @Sendable () -> T) async -> T {
  await withCheckedContinuation { c in DispatchQueue.global(qos: qos).async { c.resume(returning: body()) } }
}

func offloaded(_ qos: QoS, rounds: Int) async throws -> String {
  let h: UInt64
  switch Options.parsed.offload {
  case .lanepool: h = try await LanePool.default.run(qos: qos) { work(rounds: rounds) }
  case .gcd: h = await onGCD(qos == .userInteractive ? .userInteractive : .background) { work(rounds: rounds) }
  case .executor:
    // 33: userInteractive (TaskPriority has no name for it on Linux)
    let priority = qos == .userInteractive ? TaskPriority(rawValue: 33) : .background
    h = await Task(priority: priority) { work(rounds: rounds) }.value
  }
  return String(h, radix: 16)
}

let router = Router()
router.get("interactive") { _, _ -> String in try await offloaded(.userInteractive, rounds: interactiveRounds) }
router.get("heavy") { _, _ -> String in try await offloaded(.background, rounds: heavyRounds) }
let app = Application(
  router: router, configuration: .init(address: .hostname("127.0.0.1", port: port)))
print(
  "demo-server: offload \(offload.rawValue), port \(port), interactive \(interactiveRounds) rounds, heavy \(heavyRounds) rounds"
)
try await app.runService()
