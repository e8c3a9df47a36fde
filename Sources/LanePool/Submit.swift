// Carrying closures through C: the box, the trampolines, and the one submit helper
// every closure-taking entry point (Lane.async, LanePool.async, the timers) goes through.

/// Carries one `async` closure through the C ring: one allocation per submit.
final class TaskBox {
  let work: @Sendable () -> Void
  /// Called by the discard callback when a cancelling shutdown removes the task
  /// before it ran: resumes a waiting `run` caller, leaves a group.
  let onDiscard: (@Sendable () -> Void)?
  init(_ work: @escaping @Sendable () -> Void, onDiscard: (@Sendable () -> Void)? = nil) {
    self.work = work
    self.onDiscard = onDiscard
  }

  static func retain(
    _ work: @escaping @Sendable () -> Void, onDiscard: (@Sendable () -> Void)? = nil
  ) -> UnsafeMutableRawPointer {
    Unmanaged.passRetained(TaskBox(work, onDiscard: onDiscard)).toOpaque()
  }
  static func release(_ ctx: UnsafeMutableRawPointer) {
    Unmanaged<TaskBox>.fromOpaque(ctx).release()
  }
}

/// The C function every Swift `async` task runs through.
let taskTrampoline: @convention(c) (UnsafeMutableRawPointer?) -> Void = { ctx in
  Unmanaged<TaskBox>.fromOpaque(ctx!).takeRetainedValue().work()
}

/// Calls the `sync` closure whose address C passes through (see
/// ``LanePool/Lane/sync(onLaneThread:_:)``).
let syncTrampoline: @convention(c) (UnsafeMutableRawPointer?) -> Void = { ctx in
  ctx!.assumingMemoryBound(to: (() -> Void).self).pointee()
}

/// Hands `work` to C: boxes it (with `onDiscard`, which a cancelling shutdown calls
/// instead of `work`), calls `submit` with ``taskTrampoline`` and the box (a C submit
/// function's return code), and, when C refuses the task, releases the box, so `work`
/// never runs, and throws the refusal; `context` says what EAGAIN means for that call.
@inline(__always)
func submitTask(
  _ work: @escaping @Sendable () -> Void, onDiscard: (@Sendable () -> Void)? = nil,
  context: @autoclosure () -> LanePoolError.Context = .submit,
  _ submit: (
    _ trampoline: @convention(c) (UnsafeMutableRawPointer?) -> Void, _ ctx: UnsafeMutableRawPointer
  ) -> Int32
) throws(LanePoolError) {
  let ctx = TaskBox.retain(work, onDiscard: onDiscard)
  let rc = submit(taskTrampoline, ctx)
  if rc != 0 {
    TaskBox.release(ctx)
    throw LanePoolError(errno: rc, context: context())
  }
}
