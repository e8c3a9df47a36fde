internal import CLanePool

/// Owns the C pool; frees it when the last pool or lane object goes.
final class PoolCore: @unchecked Sendable {
  let raw: OpaquePointer
  let isDefault: Bool
  /// The C pool may log (stalls) for as long as it lives: keep the handler alive.
  let logBox: LogBox?
  /// Runs the Swift jobs of the pool's lanes once they cannot run on the lanes.
  let fallback: Fallback
  init(raw: OpaquePointer, isDefault: Bool, logBox: LogBox?) {
    self.raw = raw
    self.isDefault = isDefault
    self.logBox = logBox
    var info = lanepool_info_t()
    _ = lanepool_info(raw, &info)
    let name = withUnsafeBytes(of: info.name) { b in
      String(decoding: b.prefix(while: { $0 != 0 }), as: UTF8.self)
    }
    self.fallback = Fallback(poolName: name)
  }
  deinit {
    // Reached only after shutdown (until then each C lane retains its Lane, which
    // retains this core), so no lane thread is left to deadlock with.
    if !isDefault { _ = lanepool_destroy(raw) }
  }
}
