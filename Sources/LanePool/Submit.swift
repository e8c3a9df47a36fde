// Carrying closures through C: the closure itself as a two-word task (no allocation of
// ours), the box for the paths that need more (an on-discard action, a timer), the
// trampolines, and the submit helpers every closure-taking entry point goes through.

internal import CLanePool

// MARK: A closure as a two-word C task

/// A Swift closure value's two words. Swift's ABI represents a thick function value
/// (any non-`@convention` function type, such as `@Sendable () -> Void`) as two
/// pointers: the code, and a reference-counted context (a native Swift heap object, or
/// nil when the closure captures nothing). `@Sendable` and `@escaping` change neither
/// the layout nor the calling convention, and `() -> Void` has no parameters or result
/// to pass indirectly: the code is called with nothing but the context.
typealias ClosureWords = (code: UnsafeRawPointer, context: UnsafeMutableRawPointer?)

/// Holds a closure at its own (natural) abstraction. The bit casts go through this
/// struct, never through the function type itself: handing a function value to a
/// generic parameter (`unsafeBitCast`'s `T` or `U`, a typed pointer's `Pointee`)
/// reabstracts it, wrapping it in a thunk with a freshly allocated context (measured:
/// every closure then shows the same code pointer, and one that captures nothing gets
/// a context), and the words of that wrapper do not call back as the original. A
/// non-generic struct stores its function-typed field at the field's natural
/// abstraction, so the struct's two words are the closure's own.
/// `closureIsTwoWords` (BoxFreeSubmitTests) checks both facts.
struct ClosureValue {
  let work: @Sendable () -> Void
}

/// `work`'s two words, at +0 (see ``ClosureWords``, ``ClosureValue``).
@inline(__always)
func closureWords(_ work: @escaping @Sendable () -> Void) -> ClosureWords {
  unsafeBitCast(ClosureValue(work: work), to: ClosureWords.self)
}

/// Splits `work` into its two words and takes a +1 on its context for the C task to
/// own (balanced by ``closureTrampoline`` after the call, by the discard callback, or
/// by ``releaseClosure(context:)`` when C refuses the task). On Linux there is no
/// Objective-C interop: every context is a native object, which `Unmanaged<AnyObject>`
/// retains and releases with swift_retain / swift_release.
@inline(__always)
func retainedClosure(_ work: @escaping @Sendable () -> Void) -> ClosureWords {
  let words = closureWords(work)
  if let context = words.context { _ = Unmanaged<AnyObject>.fromOpaque(context).retain() }
  return words
}

/// `work`'s two words, taking over the +1 on its context that the caller handed in:
/// no retain here and no release when `work` goes out of scope, where
/// ``retainedClosure(_:)`` pays both (two atomic operations on the context's reference
/// count, a line the lane that runs the task also writes). The closure is moved into
/// the words' own storage and never destroyed there, so its +1 now belongs to the words.
@inline(__always)
func ownedClosureWords(_ work: consuming @escaping @Sendable () -> Void) -> ClosureWords {
  var scratch = ClosureWords(code: UnsafeRawPointer(bitPattern: 1)!, context: nil)  // trivial: may be overwritten
  return moveClosure(ClosureValue(work: consume work), into: &scratch)
}

/// Moves `value` into `storage` (two words of memory that held a trivial value, so
/// initializing over it destroys nothing) and reads its words back through the raw
/// pointer (``ClosureValue`` has their layout, which `closureIsTwoWords` checks). The
/// value is never destroyed: its +1 now belongs to the returned words.
@inline(__always)
private func moveClosure(_ value: consuming ClosureValue, into storage: UnsafeMutableRawPointer) -> ClosureWords {
  storage.initializeMemory(as: ClosureValue.self, to: consume value)
  return storage.load(as: ClosureWords.self)
}

/// Drops the C task's +1 on a closure context (nil: nothing captured, nothing to drop).
@inline(__always)
func releaseClosure(context: UnsafeMutableRawPointer?) {
  if let context { Unmanaged<AnyObject>.fromOpaque(context).release() }
}

/// The C function every box-free closure runs through, as a two-argument task:
/// `a` is the closure's context (may be nil), `b` its code (never nil, which is what
/// marks a two-argument task in C). Rebuilds the closure, calls it, then drops the +1
/// the submit took. The rebuilt value is borrowed for the call: the compiler balances
/// any retain it adds around it, so the task's +1 is released exactly once, here.
let closureTrampoline: @convention(c) (UnsafeMutableRawPointer?, UnsafeMutableRawPointer?) -> Void = {
  context, code in
  let value = unsafeBitCast(
    ClosureWords(code: UnsafeRawPointer(code.unsafelyUnwrapped), context: context),
    to: ClosureValue.self)
  value.work()
  releaseClosure(context: context)
}

/// Hands `work` to C as a two-argument task (no allocation beyond the closure's own
/// context, and the caller's +1 on it handed over, not copied): calls `submit` with
/// ``closureTrampoline``, the context (`a`) and the code (`b`), and when C refuses it
/// drops the +1 on the context, so `work` never runs and nothing leaks, and throws the
/// refusal; `context` says what EAGAIN means for that call.
/// A cancelling shutdown's discard callback (Shutdown.swift) releases a discarded one.
@inline(__always)
func submitClosure(
  _ work: consuming @escaping @Sendable () -> Void,
  context: @autoclosure () -> LanePoolError.Context = .submit,
  _ submit: (
    _ trampoline: lanepool_fn2, _ a: UnsafeMutableRawPointer?, _ b: UnsafeMutableRawPointer
  ) -> Int32
) throws(LanePoolError) {
  let words = ownedClosureWords(work)
  let rc = submit(closureTrampoline, words.context, UnsafeMutableRawPointer(mutating: words.code))
  if rc != 0 {
    releaseClosure(context: words.context)
    throw LanePoolError(errno: rc, context: context())
  }
}

// MARK: The box

/// Carries one closure through the C ring as the context of a one-argument task: one
/// allocation per submit. What still needs it: a task with an on-discard action (`run`,
/// groups), timers (a cancelled timer gives back one context word), and
/// `async(waitingUpTo:)`. Plain `async` closures go box-free (``submitClosure``).
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

/// The C function every boxed Swift task runs through.
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
