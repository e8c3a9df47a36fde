import Foundation
import Synchronization
import Testing

@testable import LanePool

/// Names of this process's threads (from /proc/self/task/*/comm), one per thread.
/// Plain open/read: a thread may exit while its file is read, and Foundation's
/// `String(contentsOfFile:)` leaks its 4 KiB buffer on that error path (LeakSanitizer
/// saw it in CI, Swift 6.3.1).
/// readdir of /proc/self/task is not atomic: while other threads start and exit (tests
/// run in parallel) one pass can skip a live entry (seen once in CI: 14 of a pool's 15
/// threads). Three passes, united by thread id, do not miss a thread that lives through
/// them.
func threadNames() -> [String] {
  let dir = "/proc/self/task"
  var tids: Set<String> = []
  for _ in 0..<3 {
    guard let pass = try? FileManager.default.contentsOfDirectory(atPath: dir) else { continue }
    tids.formUnion(pass)
  }
  return tids.compactMap { tid in procLine("\(dir)/\(tid)/comm") }
}

/// The first line of a small /proc file, or nil if it cannot be read (it vanished).
func procLine(_ path: String) -> String? {
  let fd = open(path, O_RDONLY)
  guard fd >= 0 else { return nil }
  defer { close(fd) }
  var buffer = [UInt8](repeating: 0, count: 256)
  let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
  guard n > 0 else { return nil }
  let text = String(decoding: buffer[0..<n], as: UTF8.self)
  return text.split(separator: "\n", omittingEmptySubsequences: false).first.map(String.init)
}

func threadCount(prefix: String) -> Int { threadNames().filter { $0.hasPrefix(prefix) }.count }

/// A unique short pool name, so tests running in parallel can count their own threads.
func uniqueName(_ stem: String) -> String {
  let n = nameCounter.add(1, ordering: .relaxed).newValue
  return "\(stem.prefix(5))\(n)"
}
private let nameCounter = Atomic<Int>(0)

/// Blocks until every task submitted to `lane` before this call has run.
/// Returns once the lane's own thread has run everything queued before (a queued sync,
/// never inline, so it is counted in tasksExecuted like the tasks before it).
func barrier(_ lane: Lane) throws { try lane.sync(onLaneThread: true) {} }

/// A counter tasks can bump from any lane.
final class Counter: Sendable {
  let value = Atomic<Int>(0)
  func bump() { value.add(1, ordering: .relaxed) }
  var count: Int { value.load(ordering: .acquiring) }
}

/// State touched only by tasks of one lane (so no lock): the lane serialises them.
final class LaneLocal<T>: @unchecked Sendable {
  var value: T
  init(_ value: T) { self.value = value }
}

/// Waits (polling, bounded) until `condition` holds. For correctness checks whose
/// outcome is not in doubt but whose moment is; the bound only guards against a hang.
func eventually(seconds: Double = 60, _ condition: () -> Bool) -> Bool {
  let deadline = Date().addingTimeInterval(seconds)
  while !condition() {
    if Date() > deadline { return false }
    usleep(1000)
  }
  return true
}

/// The kernel thread id of the caller (from the /proc/thread-self link).
func currentThreadID() -> Int32 {
  let target = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/thread-self")) ?? ""
  return Int32(target.split(separator: "/").last ?? "") ?? -1
}

/// A value behind a pthread mutex (NSLock). Tests use this rather than
/// Synchronization.Mutex, whose futex-based lock ThreadSanitizer cannot see on Linux
/// (it reports the protected accesses as races).
final class Locked<T>: @unchecked Sendable {
  private let lock = NSLock()
  private var value: T
  init(_ value: T) { self.value = value }
  func withLock<R>(_ body: (inout T) throws -> R) rethrows -> R {
    lock.lock()
    defer { lock.unlock() }
    return try body(&value)
  }
}

/// Exit-test children exit 0 after writing "OK" or the failure to stderr, because
/// `#expect(processExitsWith:)` returns no result (so no stderr) when the status does
/// not match. This records the child's verdict.
func recordChildVerdict(_ result: ExitTest.Result?, sourceLocation: SourceLocation = #_sourceLocation) {
  guard let result else {
    Issue.record("the child process crashed or exited non-zero", sourceLocation: sourceLocation)
    return
  }
  let said = String(decoding: result.standardErrorContent, as: UTF8.self)
  if !said.hasSuffix("OK") {
    Issue.record("child said: \(said)", sourceLocation: sourceLocation)
  }
}

/// In an exit-test child: reports the check's verdict on stderr, then leaves with
/// `_exit(0)`, skipping at-exit handlers (under ASan, LeakSanitizer's exit-time scan
/// cannot suspend threads in a child that dropped its privileges, and says so).
func reportVerdictAndExit(_ failure: String?) -> Never {
  FileHandle.standardError.write(Data((failure.map { "FAIL: \($0)" } ?? "OK").utf8))
  _exit(0)
}

/// True in a build with AddressSanitizer or ThreadSanitizer (their runtimes export
/// these symbols).
let runningUnderSanitizer: Bool = {
  let all = UnsafeMutableRawPointer(bitPattern: 0)  // RTLD_DEFAULT
  return dlsym(all, "__asan_init") != nil || dlsym(all, "__tsan_init") != nil
}()

/// Bumps `counter` when released: shows a closure that captured it was freed.
final class ReleaseToken: Sendable {
  let counter: Counter
  init(_ counter: Counter) { self.counter = counter }
  deinit { counter.bump() }
}
