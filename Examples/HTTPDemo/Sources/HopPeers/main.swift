// HopPeers: lanepool-bench's W9 actor ping-pong beside its natural peer, actors whose
// executors are SwiftNIO event loops, in one process and one run. It lives in the demo
// package (which already depends on SwiftNIO through Hummingbird) so that the main
// package's benchmark stays free of SwiftNIO.
//
// Run from Examples/HTTPDemo: swift run -c release HopPeers [calls] [rounds]
// Prints, per variant, the median ns per awaited call and the process's CPU ns per call
// (above the wall time while waiting threads spin), rounds interleaved across variants.
import Dispatch
import Foundation
import LanePool
import NIOCore
import NIOPosix

actor ExecutorPinger {
  let executor: UnownedSerialExecutor
  var received = 0
  init(executor: UnownedSerialExecutor) { self.executor = executor }
  nonisolated var unownedExecutor: UnownedSerialExecutor { executor }
  func run(_ calls: Int, _ other: ExecutorPonger) async {
    for _ in 0..<calls {
      await other.pong()
      received &+= 1  // state touched after each await: the hop back is not optimised away
    }
  }
}

actor ExecutorPonger {
  let executor: UnownedSerialExecutor
  var n = 0
  init(executor: UnownedSerialExecutor) { self.executor = executor }
  nonisolated var unownedExecutor: UnownedSerialExecutor { executor }
  func pong() { n &+= 1 }
}

actor DefaultPonger {
  var n = 0
  func pong() { n &+= 1 }
}

actor DefaultPinger {
  var received = 0
  func run(_ calls: Int, _ other: DefaultPonger) async {
    for _ in 0..<calls {
      await other.pong()
      received &+= 1
    }
  }
}

func now() -> UInt64 { DispatchTime.now().uptimeNanoseconds }

func cpuNanoseconds() -> UInt64 {
  var ts = timespec()
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts)
  return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
}

func median(_ xs: [Double]) -> Double {
  let s = xs.sorted()
  return s.count % 2 == 1 ? s[s.count / 2] : (s[s.count / 2 - 1] + s[s.count / 2]) / 2
}

/// Runs `body` from a detached task and blocks until it ends.
func blockOn(_ body: @escaping @Sendable () async -> Void) {
  let done = DispatchSemaphore(value: 0)
  Task.detached {
    await body()
    done.signal()
  }
  done.wait()
}

let args = CommandLine.arguments
let calls = args.count > 1 ? Int(args[1]) ?? 200_000 : 200_000
let rounds = args.count > 2 ? Int(args[2]) ?? 5 : 5

let group = MultiThreadedEventLoopGroup(numberOfThreads: 2)
let loops = Array(group.makeIterator())
let pool = try LanePool(name: "hops", lanesPerBand: 2)
let lanes = pool.lanes(for: .userInitiated)

typealias Variant = (name: String, run: @Sendable (Int) -> Void)
let variants: [Variant] = [
  (
    "default executor",
    { n in
      let a = DefaultPinger(), b = DefaultPonger()
      blockOn { await a.run(n, b) }
    }
  ),
  (
    "two NIO event loops",
    { n in
      let a = ExecutorPinger(executor: loops[0].executor.asUnownedSerialExecutor())
      let b = ExecutorPonger(executor: loops[1].executor.asUnownedSerialExecutor())
      blockOn { await a.run(n, b) }
    }
  ),
  (
    "two LanePool lanes",
    { n in
      let a = ExecutorPinger(executor: lanes[0].asUnownedSerialExecutor())
      let b = ExecutorPonger(executor: lanes[1].asUnownedSerialExecutor())
      blockOn { await a.run(n, b) }
    }
  ),
  (
    "one NIO event loop",
    { n in
      let a = ExecutorPinger(executor: loops[0].executor.asUnownedSerialExecutor())
      let b = ExecutorPonger(executor: loops[0].executor.asUnownedSerialExecutor())
      blockOn { await a.run(n, b) }
    }
  ),
  (
    "one LanePool lane",
    { n in
      let a = ExecutorPinger(executor: lanes[0].asUnownedSerialExecutor())
      let b = ExecutorPonger(executor: lanes[0].asUnownedSerialExecutor())
      blockOn { await a.run(n, b) }
    }
  ),
]

for v in variants { v.run(max(calls / 10, 100)) }  // warm-up
var wall: [String: [Double]] = [:]
var cpu: [String: [Double]] = [:]
for _ in 0..<rounds {
  for v in variants {
    let c0 = cpuNanoseconds()
    let t0 = now()
    v.run(calls)
    wall[v.name, default: []].append(Double(now() - t0) / Double(calls))
    cpu[v.name, default: []].append(Double(cpuNanoseconds() - c0) / Double(calls))
  }
}
let info = ProcessInfo.processInfo
print("HopPeers: \(calls) awaited calls from one actor to another, median of \(rounds) interleaved rounds")
var uts = utsname()
uname(&uts)
let kernel = withUnsafeBytes(of: &uts.release) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
print("nproc \(info.activeProcessorCount), kernel \(kernel)")
let base = median(wall["default executor"]!)
print("| variant | ns/call | vs default executor | CPU ns/call |")
print("|---|---|---|---|")
for v in variants {
  let w = median(wall[v.name]!)
  print(
    "| \(v.name) | \(String(format: "%.1f", w)) | \(String(format: "%.2fx", w / base)) | "
      + "\(String(format: "%.1f", median(cpu[v.name]!))) |")
}
try pool.shutdown(discardingQueued: false)
try group.syncShutdownGracefully()
