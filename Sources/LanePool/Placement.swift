extension LanePool {
  /// Where a pool's lanes run.
  public enum Placement: Sendable, Hashable {
    /// Lanes float over the CPUs the process may use.
    case none
    /// Lane i of every band is pinned to the i-th CPU (mod count) of the process's
    /// allowed set, so `taskset` and cgroup cpusets are honoured.
    case cores
    /// Lane i of every band is pinned to `cpus[i % cpus.count]`; each must be allowed.
    case cpus([Int])
    /// Lanes spread over the machine's NUMA nodes in proportion to their CPUs, each bound
    /// to its node with its ring in the node's memory. Needs the `NUMA` package trait
    /// (libnuma) and a machine where libnuma works; otherwise creating such a pool
    /// throws ``LanePoolError/unsupported(_:)``.
    case numa
    /// As `numa`, with a topology (node -> CPUs) given instead of read from libnuma.
    case numaTopology([Int: [Int]])
  }
}
