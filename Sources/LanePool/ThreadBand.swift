internal import CLanePool

extension LanePool {
  /// A band's OS treatment on a thread LanePool does not own (an event loop, a thread of
  /// your own), and what puts the thread back as it was: `lanepool_thread_enter_band`.
  ///
  /// Entering applies the band's default policy (``BandPolicy/default(for:)``):
  /// scheduler, nice, I/O priority, timer slack and slice, each read back from the
  /// kernel into ``applied``. A setting is applied only if the thread may put it back
  /// afterwards: without CAP_SYS_NICE, a band of higher nice than the thread's is
  /// entered without its nice unless RLIMIT_NICE lets the thread come back (recorded
  /// as refused). While entered, the thread counts as of this band for escalation: a
  /// `sync` from it onto a lane of a lower band boosts that lane (docs/priorities.md).
  /// Not Sendable: restore it on the thread that entered.
  public struct ThreadBand {
    /// The band entered.
    public let qos: QoS
    /// What each setting asked for and what the thread got.
    public let applied: AppliedPolicy
    let token: lanepool_band_token_t

    /// Gives the calling thread `qos`'s treatment. With `strict`, any setting refused
    /// or withheld throws ``LanePoolError/notPermitted`` and leaves the thread as it was.
    /// Throws ``LanePoolError/system(errno:)`` (EBUSY) on a lane's own thread,
    /// which has its band.
    public static func enter(_ qos: QoS, strict: Bool = false) throws(LanePoolError) -> ThreadBand {
      var t = lanepool_band_token_t()
      let rc = lanepool_thread_enter_band(qos.c, strict ? UInt32(LANEPOOL_BAND_STRICT) : 0, &t)
      if rc != 0 { throw LanePoolError(errno: rc) }
      return ThreadBand(qos: qos, token: t)
    }

    init(qos: QoS, token: lanepool_band_token_t) {
      self.qos = qos
      self.token = token
      applied = AppliedPolicy(
        scheduler: AppliedSetting(token.sched), nice: AppliedSetting(token.nice),
        ioPriority: AppliedSetting(token.ioprio), timerSlack: AppliedSetting(token.timer_slack),
        slice: AppliedSetting(token.slice))
    }

    /// Puts back what ``enter(_:strict:)`` changed. Call it on the thread that entered
    /// (another thread's token is a misuse); restoring twice is harmless. Throws the
    /// errno of a setting the kernel refused to put back (the others are put back).
    public func restore() throws(LanePoolError) {
      var t = token
      let rc = lanepool_thread_restore(&t)
      if rc == Errno.EINVAL { misuse("ThreadBand.restore() called on a thread other than the one that entered") }
      if rc != 0 { throw LanePoolError(errno: rc) }
    }
  }

  /// Runs `body` with the calling thread in `qos`'s band (``ThreadBand``), then puts the
  /// thread back as it was, also when `body` throws. Calling it from a task on a lane
  /// is a misuse: a lane's thread has its band.
  public static func withBand<R, E: Error>(_ qos: QoS, _ body: () throws(E) -> R) throws(E) -> R {
    let band: ThreadBand
    do {
      band = try ThreadBand.enter(qos)
    } catch {
      misuse("LanePool.withBand(\(qos)) cannot enter the band: \(error) (called from a lane's own thread?)")
    }
    defer { try? band.restore() }
    return try body()
  }
}

extension LanePool.Lane {
  /// Runs `body`, a wait for work of this lane that LanePool does not see (a semaphore,
  /// a condition, a group), with the lane's thread at band `qos` (nil: the calling
  /// thread's band, as `sync` uses) until `body` returns, however the wait ends: done,
  /// timed out, thrown. A band not above the lane's changes nothing. The boost is the
  /// one `sync` applies (docs/priorities.md, "Escalation").
  public func withEscalation<R, E: Error>(to qos: LanePool.QoS? = nil, _ body: () throws(E) -> R) throws(E) -> R {
    var band = qos?.c ?? LANEPOOL_QOS_DEFAULT
    if qos == nil { _ = lanepool_thread_qos(&band) }
    var boost = lanepool_boost_t()
    _ = lanepool_lane_boost_begin(raw, band, &boost)
    defer { _ = lanepool_lane_boost_end(&boost) }
    return try body()
  }
}
