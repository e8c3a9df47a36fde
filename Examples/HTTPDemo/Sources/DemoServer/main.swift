// demo-server --offload lanepool|gcd|executor|task [--loops-band userInitiated|...] [--port N]
//             [--heavy-us N] [--heavy-sleep-us N] [--background idle|short]
//             [--interactive-spin-us N] [--default-slice-us N (0: the kernel's)]
//             [--interactive-inline]
//   GET /interactive  small work (about 20 us of hashing) at userInteractive
//   GET /heavy        CPU-bound work (about 20 ms) at background
// The HTTP side is Hummingbird on SwiftNIO's event loops in every variant; only the
// offload differs: LanePool bands (lane.run), DispatchQueue.global(qos:), or
// `executor`: LanePool installed as the process's default executor (experimental), the
// work in a Task whose priority picks the band, and Hummingbird's own handler tasks on
// lanes too; `task`: the same code as `executor` on Swift's own executor (its natural
// peer). `--loops-band` gives SwiftNIO's event-loop threads (Hummingbird's, the
// singleton group) a LanePool band's treatment (LanePool.ThreadBand: nice, policy, I/O
// priority, timer slack), since the HTTP path waits for those threads.
// `--interactive-inline`: /interactive does its work in the handler itself, no offload
// (what the offload's hops cost: with executor and task, the handler's own executor).
import Dispatch
import Foundation
import Hummingbird
import LanePool
import NIOPosix

// Before anything touches Swift concurrency (see LanePool.installAsDefaultExecutor).

enum Offload: String, Sendable { case lanepool, gcd, executor, task }

enum Options {
  static let parsed:
    (
      offload: Offload, port: Int, loopsBand: LanePool.QoS?, heavyUs: Int, heavySleepUs: Int,
      background: LanePool.BandPolicy?, interactiveSpin: Duration?, defaultSlice: Duration??,
      interactiveInline: Bool, heavyOneLane: Bool
    ) = {
      var background: LanePool.BandPolicy? = nil
      var interactiveSpin: Duration? = nil
      var defaultSlice: Duration?? = nil  // nil: the table's; .some(nil): the kernel's
      var offload = Offload.lanepool
      var port = 8080
      var heavyUs = 20_000
      var heavySleepUs = 0
      var loopsBand: LanePool.QoS? = nil
      var interactiveInline = false
      var heavyOneLane = false
      var args = CommandLine.arguments.dropFirst().makeIterator()
      while let a = args.next() {
        switch a {
        case "--offload":
          let name = args.next() ?? ""
          guard let o = Offload(rawValue: name) else {
            print("demo-server: unknown offload '\(name)' (lanepool, gcd, executor, task)")
            exit(2)
          }
          offload = o
        case "--port": port = Int(args.next() ?? "") ?? port
        case "--heavy-us":  // the CPU work of one /heavy request; 0: none (the floor run)
          guard let us = Int(args.next() ?? ""), us >= 0, us <= 10_000_000 else {
            print("demo-server: --heavy-us wants microseconds from 0 to 10,000,000")
            exit(2)
          }
          heavyUs = us
        case "--heavy-sleep-us":  // /heavy also sleeps this long before it answers (the floor run)
          guard let us = Int(args.next() ?? ""), us >= 0, us <= 10_000_000 else {
            print("demo-server: --heavy-sleep-us wants microseconds from 0 to 10,000,000")
            exit(2)
          }
          heavySleepUs = us
        case "--background":  // the background band's policy: idle (SCHED_IDLE) or short (100 us slice)
          var p = LanePool.BandPolicy.default(for: .background)
          switch args.next() ?? "" {
          case "idle": p.scheduler = .idle
          case "short": p.slice = .microseconds(100)
          default:
            print("demo-server: --background wants idle (SCHED_IDLE) or short (the 100 us EEVDF slice)")
            exit(2)
          }
          background = p
        case "--interactive-spin-us":  // Configuration.interactiveSpin of the default pool
          guard let us = Int(args.next() ?? ""), us > 0, us <= 100_000 else {
            print("demo-server: --interactive-spin-us wants microseconds from 1 to 100,000")
            exit(2)
          }
          interactiveSpin = .microseconds(us)
        case "--default-slice-us":  // the default band's EEVDF slice (executor: Hummingbird's handlers)
          guard let us = Int(args.next() ?? ""), us == 0 || (100...100_000).contains(us) else {
            print("demo-server: --default-slice-us wants 0 (the kernel's) or microseconds from 100 to 100,000")
            exit(2)
          }
          defaultSlice = .some(us == 0 ? nil : .microseconds(us))
        case "--interactive-inline": interactiveInline = true
        case "--heavy-one-lane": heavyOneLane = true  // /heavy on one background lane (gcd: a serial queue)
        case "--loops-band":
          let name = args.next() ?? ""
          guard let qos = LanePool.QoS.allCases.first(where: { "\($0)" == name }) else {
            print("demo-server: --loops-band wants one of \(LanePool.QoS.allCases.map { "\($0)" })")
            exit(2)
          }
          loopsBand = qos
        default:
          print(
            "usage: demo-server --offload lanepool|gcd|executor|task [--loops-band QOS] [--port N] [--heavy-us N] [--heavy-sleep-us N] [--background idle|short] [--interactive-spin-us N] [--default-slice-us N] [--interactive-inline]"
          )
          exit(2)
        }
      }
      return (
        offload, port, loopsBand, heavyUs, heavySleepUs, background, interactiveSpin, defaultSlice,
        interactiveInline, heavyOneLane
      )
    }()
}

// Before the default pool's first use: its background band's policy, then (executor) the
// pool as the process's executor.
if Options.parsed.background != nil || Options.parsed.interactiveSpin != nil || Options.parsed.defaultSlice != nil {
  var config = LanePool.Configuration()
  if let p = Options.parsed.background { config.policies[.background] = p }
  if let slice = Options.parsed.defaultSlice {
    var p = LanePool.BandPolicy.default(for: .default)
    p.slice = slice
    config.policies[.default] = p
  }
  config.interactiveSpin = Options.parsed.interactiveSpin
  try LanePool.configureDefault(config)
}
if Options.parsed.offload == .executor { try LanePool.installAsDefaultExecutor() }
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
// About 20 ms by default (--heavy-us); 0 rounds: no CPU work at all (the floor run).
let heavyRounds =
  Options.parsed.heavyUs == 0 ? 0 : max(1, Int(Double(Options.parsed.heavyUs) * roundsPerMicrosecond))

func onGCD<T: Sendable>(_ qos: DispatchQoS.QoSClass, _ body: @escaping @Sendable () -> T) async -> T {
  await withCheckedContinuation { c in DispatchQueue.global(qos: qos).async { c.resume(returning: body()) } }
}

/// gcd with --heavy-one-lane: /heavy on one serial queue, as lanepool's on one lane.
let heavySerialQueue = DispatchQueue(label: "heavy", qos: .background)

func offloaded(_ qos: QoS, rounds: Int) async throws -> String {
  let h: UInt64
  switch Options.parsed.offload {
  case .lanepool where Options.parsed.heavyOneLane && qos == .background:
    // One lane of the band, not the band: the other CPUs never run /heavy.
    h = try await LanePool.default.queue(for: .background, key: 0).run { work(rounds: rounds) }
  case .lanepool: h = try await LanePool.default.run(qos: qos) { work(rounds: rounds) }
  case .gcd where Options.parsed.heavyOneLane && qos == .background:
    h = await withCheckedContinuation { c in heavySerialQueue.async { c.resume(returning: work(rounds: rounds)) } }
  case .gcd: h = await onGCD(qos == .userInteractive ? .userInteractive : .background) { work(rounds: rounds) }
  case .executor, .task:  // the same code; only the executor under it differs
    // 33: userInteractive (TaskPriority has no name for it on Linux)
    let priority = qos == .userInteractive ? TaskPriority(rawValue: 33) : .background
    h = await Task(priority: priority) { work(rounds: rounds) }.value
  }
  return String(h, radix: 16)
}

let router = Router()
router.get("interactive") { _, _ -> String in
  if Options.parsed.interactiveInline { return String(work(rounds: interactiveRounds), radix: 16) }
  return try await offloaded(.userInteractive, rounds: interactiveRounds)
}
router.get("heavy") { _, _ -> String in
  if Options.parsed.heavySleepUs > 0 { try await Task.sleep(for: .microseconds(Options.parsed.heavySleepUs)) }
  return try await offloaded(.background, rounds: heavyRounds)
}
/// Each event loop of the group Hummingbird uses enters `qos`'s band on its own thread
/// (for the rest of the process); prints what each got.
func giveEventLoops(_ qos: LanePool.QoS) async throws {
  for loop in MultiThreadedEventLoopGroup.singleton.makeIterator() {
    let got = try await loop.submit { () throws -> String in
      let band = try LanePool.ThreadBand.enter(qos)
      return "nice \(band.applied.nice), scheduler \(band.applied.scheduler)"
    }.get()
    print("demo-server: event loop \(loop) in band \(qos): \(got)")
  }
}
if let qos = Options.parsed.loopsBand { try await giveEventLoops(qos) }

let app = Application(
  router: router, configuration: .init(address: .hostname("127.0.0.1", port: port)),
  eventLoopGroupProvider: .shared(MultiThreadedEventLoopGroup.singleton))
print(
  "demo-server: offload \(offload.rawValue), port \(port), interactive \(interactiveRounds) rounds, heavy \(heavyRounds) rounds"
)
try await app.runService()
