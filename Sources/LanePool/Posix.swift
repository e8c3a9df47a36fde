#if canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#endif

/// A mutex over `pthread_mutex_t`, for the module's few slow-path locks.
///
/// Not `Synchronization.Mutex`: on Linux that is built on raw futexes, which
/// ThreadSanitizer does not intercept, so it would not see the ordering these locks
/// give (and report races on the state they guard). pthread mutexes it sees.
final class PthreadLock: @unchecked Sendable {
  // @unchecked: the mutex is what makes it safe; it lives at a stable address.
  fileprivate let mutex: UnsafeMutablePointer<pthread_mutex_t>

  init() {
    mutex = .allocate(capacity: 1)
    mutex.initialize(to: pthread_mutex_t())
    let rc = pthread_mutex_init(mutex, nil)
    if rc != 0 { misuse("pthread_mutex_init failed: \(errnoText(rc))") }
  }

  deinit {
    pthread_mutex_destroy(mutex)
    mutex.deinitialize(count: 1)
    mutex.deallocate()
  }

  func lock() { pthread_mutex_lock(mutex) }
  func unlock() { pthread_mutex_unlock(mutex) }

  func withLock<R>(_ body: () throws -> R) rethrows -> R {
    lock()
    defer { unlock() }
    return try body()
  }
}

/// A lock with a condition variable on CLOCK_MONOTONIC (so timed waits do not move
/// with the wall clock), over pthreads for the same reason as ``PthreadLock``.
final class PthreadCondition: @unchecked Sendable {
  // @unchecked: as PthreadLock.
  private let lockObject = PthreadLock()
  private let cond: UnsafeMutablePointer<pthread_cond_t>

  init() {
    cond = .allocate(capacity: 1)
    cond.initialize(to: pthread_cond_t())
    var attr = pthread_condattr_t()
    pthread_condattr_init(&attr)
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC)
    let rc = pthread_cond_init(cond, &attr)
    pthread_condattr_destroy(&attr)
    if rc != 0 { misuse("pthread_cond_init failed: \(errnoText(rc))") }
  }

  deinit {
    pthread_cond_destroy(cond)
    cond.deinitialize(count: 1)
    cond.deallocate()
  }

  func lock() { lockObject.lock() }
  func unlock() { lockObject.unlock() }

  /// Wakes every waiter. Call with the lock held.
  func broadcast() { pthread_cond_broadcast(cond) }

  /// Waits for a broadcast (or a spurious wake-up). Call with the lock held.
  func wait() { pthread_cond_wait(cond, lockObject.mutex) }

  /// As ``wait()``, until CLOCK_MONOTONIC reaches `deadline` nanoseconds; false once it
  /// has. Call with the lock held.
  func wait(untilMonotonicNanoseconds deadline: UInt64) -> Bool {
    var ts = timespec(
      tv_sec: Int(deadline / 1_000_000_000), tv_nsec: Int(deadline % 1_000_000_000))
    return pthread_cond_timedwait(cond, lockObject.mutex, &ts) != ETIMEDOUT
  }
}

/// Starts a detached thread that runs `body` (Foundation's `Thread { }.start()`, on
/// pthreads). Stops the program if no thread can be had, as `Thread.start()` does.
func startDetachedThread(_ body: @escaping @Sendable () -> Void) {
  final class Box {
    let body: @Sendable () -> Void
    init(_ body: @escaping @Sendable () -> Void) { self.body = body }
  }
  let arg = Unmanaged.passRetained(Box(body)).toOpaque()
  var attr = pthread_attr_t()
  pthread_attr_init(&attr)
  pthread_attr_setdetachstate(&attr, Int32(PTHREAD_CREATE_DETACHED))
  var thread = pthread_t()
  let rc = pthread_create(
    &thread, &attr,
    { arg in
      Unmanaged<Box>.fromOpaque(arg!).takeRetainedValue().body()
      return nil
    }, arg)
  pthread_attr_destroy(&attr)
  if rc != 0 {
    Unmanaged<Box>.fromOpaque(arg).release()
    misuse("cannot start a thread: pthread_create failed with errno \(rc) (\(errnoText(rc)))")
  }
}

/// Writes one line on stderr (write(2), unbuffered, as FileHandle.standardError does).
func writeStandardError(_ line: String) {
  var text = line + "\n"
  text.withUTF8 { bytes in
    var rest = UnsafeRawBufferPointer(bytes)
    while !rest.isEmpty {
      let n = write(2, rest.baseAddress, rest.count)
      if n < 0 {
        if errno == EINTR { continue }
        return
      }
      rest = UnsafeRawBufferPointer(rebasing: rest[n...])
    }
  }
}

/// The value of an environment variable, as ProcessInfo's environment gives it (nil
/// when unset).
func environmentValue(_ name: String) -> String? {
  guard let value = getenv(name) else { return nil }
  return String(cString: value)
}
