import Dispatch
import LanePool

#if canImport(Glibc)
  import Glibc
#endif

/// Installs LanePool as the executor, then checks that a task really runs on a lane and
/// says so on stderr (the script looks for the line).
@_cdecl("lanepool_suite_shim_install")
public func install() {
  do {
    try LanePool.installAsDefaultExecutor()
  } catch {
    say("lanepool-suite-shim: install failed: \(error)\n")
    return
  }
  let done = DispatchSemaphore(value: 0)
  nonisolated(unsafe) var lane: String? = nil
  Task {
    lane = Lane.current?.name
    done.signal()
  }
  done.wait()
  say("lanepool-suite-shim: installed in pid \(getpid()); a task ran on lane \(lane ?? "none")\n")
}

private func say(_ line: String) {
  var bytes = Array(line.utf8)
  _ = write(2, &bytes, bytes.count)
}
