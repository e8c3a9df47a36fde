import Dispatch
import LanePool

/// A lane with `DispatchQueue`'s method shapes, for code moving from GCD line by line.
/// The methods stop the program if the lane refuses work (its pool was shut down):
/// use ``Lane`` directly where that can happen.
public struct LaneQueue: Sendable, Hashable {
  /// The lane underneath.
  public let lane: Lane

  /// A YY-shaped queue over `lane`.
  public init(_ lane: Lane) { self.lane = lane }

  /// Runs `work` on the lane after everything queued before it (`DispatchQueue.async`).
  /// A refusal stops the program with a message: YY pools never shut down.
  public func async(execute work: consuming @escaping @Sendable () -> Void) {
    do { try lane.async(work) } catch { refused(error) }
  }

  /// As `DispatchQueue.async(group:execute:)`, with a GCD `DispatchGroup`. If a
  /// cancelling shutdown discards the work, it leaves the group all the same.
  public func async(group: DispatchGroup, execute work: @escaping @Sendable () -> Void) {
    group.enter()
    do {
      try lane.async(
        {
          work()
          group.leave()
        }, onDiscard: { group.leave() })
    } catch {
      group.leave()
      refused(error)
    }
  }

  /// As `DispatchQueue.sync(execute:)`: returns the closure's value, rethrows its error.
  public func sync<T>(execute work: () throws -> T) rethrows -> T {
    try syncHelper(work, rescue: { throw $0 })
  }

  // Lane.sync throws both the closure's errors and its own; keep the first kind.
  private func syncHelper<T>(_ work: () throws -> T, rescue: (any Error) throws -> T) rethrows -> T {
    var closureError: (any Error)?
    let value: T?
    do {
      value = try lane.sync { () -> T? in
        do { return try work() } catch {
          closureError = error
          return nil
        }
      }
    } catch {
      refused(error)
    }
    if let closureError { return try rescue(closureError) }
    return value!
  }

  /// Runs `work` on the lane once `deadline` has passed (`DispatchQueue.asyncAfter`).
  public func asyncAfter(deadline: DispatchTime, execute work: @escaping @Sendable () -> Void) {
    do { try lane.asyncAfter(deadline: deadline, work) } catch { refused(error) }
  }

  private func refused(_ error: any Error) -> Never {
    misuse("\(lane) refused work (\(error)); was its pool shut down?")
  }
}
