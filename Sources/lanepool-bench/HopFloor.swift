// W9's reference rows: what a hop between actors costs with no executor machinery worth
// the name, so that the lane rows can be read against a floor measured in the same run.
//
// - Two executors on one lane: each actor has its own serial executor, so every awaited
//   call is two jobs through the runtime (enqueue, then run), but both executors put
//   their jobs on the same C lane: the runtime's and the ring's cost of two hops, no
//   hand-off to another thread.
// - Two mailbox threads: each actor's executor is a thread of its own spinning on a
//   one-job mailbox (an atomic word). No executor can hand a job to another thread with
//   less: what is left is the runtime's two jobs and the cache lines the task's state
//   crosses between the CPUs, twice per call.
// - A one-thread ring task executor: default actors in a task that prefers it, the least
//   a task executor can add to the runtime's own enqueue of every such hop.
// - Two SwiftNIO event loops (the NIOPeer trait): the natural peer of actors on lanes.
import CLanePool
import Dispatch
import LanePool
import Synchronization

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

#if NIOPeer
  import NIOCore
  import NIOPosix
#endif

/// A serial executor over one C lane: its jobs run on the lane under this executor's own
/// identity (lanepool_lane_async2: the job and the executor). Two of them over the same
/// lane are two executors to the runtime, one thread to the kernel.
final class CLaneExecutor: SerialExecutor, @unchecked Sendable {
  let lane: OpaquePointer
  init(_ lane: OpaquePointer) { self.lane = lane }
  func enqueue(_ job: consuming ExecutorJob) {
    let job = unsafeBitCast(UnownedJob(job), to: UnsafeMutableRawPointer.self)
    let me = Unmanaged.passUnretained(self).toOpaque()
    if lanepool_lane_async2(lane, cLaneJobTrampoline, job, me) != 0 { fatalError("W9: C lane refused a job") }
  }
  func asUnownedSerialExecutor() -> UnownedSerialExecutor { UnownedSerialExecutor(ordinary: self) }
}

let cLaneJobTrampoline: @convention(c) (UnsafeMutableRawPointer?, UnsafeMutableRawPointer?) -> Void = { job, me in
  let executor = Unmanaged<CLaneExecutor>.fromOpaque(me!).takeUnretainedValue()
  unsafeBitCast(job!, to: UnownedJob.self).runSynchronously(on: executor.asUnownedSerialExecutor())
}

/// A mailbox of one job: `post` waits while it is full, `take` empties it. Enough for a
/// ping-pong, where one job is in flight at a time.
final class Mailbox: @unchecked Sendable {
  private let word = Atomic<UInt>(0)
  func post(_ job: UnownedJob) {
    let bits = unsafeBitCast(job, to: UInt.self)
    while !word.compareExchange(expected: 0, desired: bits, ordering: .releasing).exchanged {}
  }
  func take() -> UnownedJob? {
    let bits = word.load(ordering: .acquiring)
    if bits == 0 { return nil }
    word.store(0, ordering: .relaxed)
    return unsafeBitCast(bits, to: UnownedJob.self)
  }
}

/// A thread of its own that calls `step` (run a job if there is one; true if it ran
/// one) without ever sleeping, until `stop()` and a step that found nothing.
final class SpinningThread: @unchecked Sendable {
  private let stopping = Atomic<Bool>(false)
  private let started = DispatchSemaphore(value: 0)
  private let exited = DispatchSemaphore(value: 0)
  private var step: () -> Bool = { false }
  private var thread = pthread_t()

  init() {}

  /// Starts the thread; returns once it runs.
  func start(_ step: @escaping () -> Bool) {
    self.step = step
    let context = Unmanaged.passRetained(self).toOpaque()
    var t = pthread_t()
    let rc = pthread_create(
      &t, nil,
      { context in
        Unmanaged<SpinningThread>.fromOpaque(context!).takeRetainedValue().loop()
        return nil
      }, context)
    // fatalError, not precondition: the message must survive -O (the bench runs in release).
    if rc != 0 { fatalError("W9: pthread_create failed (\(rc))") }
    pthread_detach(t)
    started.wait()
  }

  private func loop() {
    thread = pthread_self()
    started.signal()
    while step() || !stopping.load(ordering: .relaxed) {}
    step = { false }  // the executor it ran for holds this thread: no cycle left behind
    exited.signal()
  }

  /// True on this thread.
  var isCurrent: Bool { pthread_equal(pthread_self(), thread) != 0 }

  /// Ends the thread once a step finds nothing to run, and waits for it.
  func stop() {
    stopping.store(true, ordering: .relaxed)
    exited.wait()
  }
}

/// A serial executor of one spinning thread and a one-job mailbox: the least an
/// executor can do to run a job on a thread of its own. Not a general executor (see
/// Mailbox).
final class MailboxExecutor: SerialExecutor, @unchecked Sendable {
  private let mailbox = Mailbox()
  private let thread = SpinningThread()

  init() {
    thread.start { [mailbox] in
      guard let job = mailbox.take() else { return false }
      job.runSynchronously(on: self.asUnownedSerialExecutor())
      return true
    }
  }

  func enqueue(_ job: consuming ExecutorJob) { mailbox.post(UnownedJob(job)) }
  func asUnownedSerialExecutor() -> UnownedSerialExecutor { UnownedSerialExecutor(ordinary: self) }
  func stop() { thread.stop() }
}

/// A task executor of one spinning thread: jobs enqueued from that thread go to a plain
/// ring only it touches (no atomic operation at all), jobs from elsewhere through a
/// one-job mailbox. The least a task executor can do per job: what a hop of a task that
/// prefers it costs beyond that is the runtime's.
final class RingTaskExecutor: TaskExecutor, @unchecked Sendable {
  private static let capacity = 4096
  private let mailbox = Mailbox()
  private let thread = SpinningThread()
  private let ring = UnsafeMutablePointer<UnownedJob>.allocate(capacity: RingTaskExecutor.capacity)
  private var head = 0, tail = 0  // the executor's thread only

  init() {
    thread.start {
      if self.head != self.tail {
        let job = self.ring[self.head % RingTaskExecutor.capacity]
        self.head += 1
        job.runSynchronously(on: self.asUnownedTaskExecutor())
        return true
      }
      guard let job = self.mailbox.take() else { return false }
      job.runSynchronously(on: self.asUnownedTaskExecutor())
      return true
    }
  }

  deinit { ring.deallocate() }

  func enqueue(_ job: consuming ExecutorJob) {
    let job = UnownedJob(job)
    guard thread.isCurrent else { return mailbox.post(job) }
    if tail - head == RingTaskExecutor.capacity { fatalError("W9: the ring task executor is full") }
    ring[tail % RingTaskExecutor.capacity] = job
    tail += 1
  }

  func asUnownedTaskExecutor() -> UnownedTaskExecutor { UnownedTaskExecutor(ordinary: self) }
  func stop() { thread.stop() }
}

/// An actor whose executor is given (a lane's, or a reference row's): W9's pinger.
actor ExecutorPinger {
  let executor: UnownedSerialExecutor
  var received = 0
  init(_ executor: UnownedSerialExecutor) { self.executor = executor }
  nonisolated var unownedExecutor: UnownedSerialExecutor { executor }
  func run(_ calls: Int, _ other: ExecutorPonger) async {
    for _ in 0..<calls {
      await other.pong()
      received &+= 1  // touched after each await: the hop back is not optimised away
    }
  }
}

/// W9's ponger, on a given executor.
actor ExecutorPonger {
  let executor: UnownedSerialExecutor
  var n = 0
  init(_ executor: UnownedSerialExecutor) { self.executor = executor }
  nonisolated var unownedExecutor: UnownedSerialExecutor { executor }
  func pong() { n &+= 1 }
}

/// Runs `calls` awaited calls between an actor on `a` and one on `b`.
func pingPong(_ calls: Int, _ a: UnownedSerialExecutor, _ b: UnownedSerialExecutor) {
  let pinger = ExecutorPinger(a), ponger = ExecutorPonger(b)
  blockOn { await pinger.run(calls, ponger) }
}

/// One W9 variant: `run(n)` makes n awaited calls; a slow variant runs calls / divisor.
typealias W9Variant = (name: String, usesLanes: Bool, run: (Int) -> Void, divisor: Int)

/// W9's reference rows, and what they hold for the whole workload (the event loops).
final class HopReferences {
  /// Beside "actors on two lanes".
  private(set) var handOffRows: [W9Variant] = []
  /// Beside the rows of a task that prefers an executor.
  private(set) var taskRows: [W9Variant] = []
  #if NIOPeer
    private let group = MultiThreadedEventLoopGroup(numberOfThreads: 2)
  #endif

  init(_ cLane: OpaquePointer) {
    let a = CLaneExecutor(cLane), b = CLaneExecutor(cLane)
    handOffRows = [
      (
        "two executors on one lane (no hand-off)", false,
        { n in pingPong(n, a.asUnownedSerialExecutor(), b.asUnownedSerialExecutor()) }, 1
      ),
      (
        "two spinning mailbox threads (floor)", false,
        { n in
          let a = MailboxExecutor(), b = MailboxExecutor()
          pingPong(n, a.asUnownedSerialExecutor(), b.asUnownedSerialExecutor())
          a.stop()
          b.stop()
        }, 1
      ),
    ]
    taskRows.append(
      (
        "default actors, task prefers a one-thread ring executor (floor)", false,
        { n in
          let executor = RingTaskExecutor()
          let a = DefaultPinger(), b = DefaultPonger()
          blockOn(preferring: executor) { await a.run(n, b) }
          executor.stop()
        }, 1
      ))
    #if NIOPeer
      // An event loop that runs out of work blocks in epoll_wait, and each hop wakes it
      // (tens of microseconds here): a twentieth of the calls keeps the row short.
      let loops = Array(group.makeIterator())
      handOffRows.append(
        (
          "two SwiftNIO event loops", false,
          { n in
            pingPong(n, loops[0].executor.asUnownedSerialExecutor(), loops[1].executor.asUnownedSerialExecutor())
          }, 20
        ))
    #endif
  }

  func shutdown() {
    #if NIOPeer
      try? group.syncShutdownGracefully()
    #endif
  }
}
