internal import CLanePool

// Durations and deadlines as the C core takes them: nanoseconds, saturating, never trapping.

extension Duration {
  /// Whole nanoseconds, saturating: negative durations give 0, durations beyond
  /// UInt64.max nanoseconds (about 584 years) give UInt64.max. Never traps.
  var nanosecondsClamped: UInt64 {
    let (s, atto) = components
    if s < 0 || (s == 0 && atto <= 0) { return 0 }
    let (whole, overflow) = UInt64(s).multipliedReportingOverflow(by: 1_000_000_000)
    if overflow { return .max }
    let (sum, carry) = whole.addingReportingOverflow(UInt64(max(0, atto) / 1_000_000_000))
    return carry ? .max : sum
  }

  /// As ``nanosecondsClamped``, at most Int64.max (about 292 years): "the far future"
  /// for timeouts and deadlines handed to C, which adds them to a clock reading.
  var nanosecondsForTimeout: UInt64 { Swift.min(nanosecondsClamped, UInt64(Int64.max)) }
}

/// The latest deadline handed to C: Int64.max ns of CLOCK_MONOTONIC (about 292 years
/// of uptime), so that no C arithmetic on it can wrap.
let farFutureNanoseconds = UInt64(Int64.max)

/// Now plus `delay`, saturating at ``farFutureNanoseconds``.
func farFuture(afterNanoseconds delay: UInt64) -> UInt64 {
  let (sum, overflow) = lanepool_now_ns().addingReportingOverflow(delay)
  return overflow ? farFutureNanoseconds : min(sum, farFutureNanoseconds)
}
