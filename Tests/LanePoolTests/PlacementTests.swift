import CLanePool
import Foundation
import LanePoolTestSupport
import Testing

@testable import LanePool

func allowedCPUs() -> [Int] {
  var buf = [Int32](repeating: 0, count: 1024)
  var n: UInt32 = 0
  _ = lanepool_allowed_cpus(&buf, 1024, &n)
  return buf.prefix(Int(min(n, 1024))).map(Int.init)
}

/// Plans with the C rule against an injected topology; returns the node of each lane.
func planNUMA(lanes: Int, topology: [Int: [Int]], allowed: [Int]) -> (rc: Int32, nodes: [Int]) {
  let sorted = topology.sorted { $0.key < $1.key }
  let cpuArrays = sorted.map { $0.value.map { Int32($0) } }
  var out = [lanepool_lane_placement_t](repeating: .init(), count: lanes)
  let allowed32 = allowed.map { Int32($0) }
  let rc: Int32 = cpuArrays.withUnsafeFlattenedPointers { cpuPointers in
    var nodes = zip(sorted, cpuPointers).map { entry, ptr in
      lanepool_topology_node_t(node: Int32(entry.key), cpu_count: UInt32(entry.value.count), cpus: ptr)
    }
    return nodes.withUnsafeMutableBufferPointer { nb in
      var topo = lanepool_topology_t(node_count: UInt32(nb.count), nodes: nb.baseAddress)
      return allowed32.withUnsafeBufferPointer { ab in
        lanepool_plan_placement(
          LANEPOOL_PLACEMENT_NUMA, UInt32(lanes), nil, 0, &topo, ab.baseAddress, UInt32(ab.count),
          &out, UInt32(lanes))
      }
    }
  }
  return (rc, out.map { Int($0.node) })
}

extension Array where Element == [Int32] {
  /// Pointers to each inner array's storage, valid inside `body`.
  func withUnsafeFlattenedPointers<R>(_ body: ([UnsafePointer<Int32>?]) -> R) -> R {
    let flat = self.flatMap { $0 }
    return flat.withUnsafeBufferPointer { buf in
      var offset = 0
      var ptrs: [UnsafePointer<Int32>?] = []
      for inner in self {
        ptrs.append(inner.isEmpty ? nil : buf.baseAddress! + offset)
        offset += inner.count
      }
      return body(ptrs)
    }
  }
}

@Suite("Placement: pinning, restricted affinity, CPU lists, NUMA")
struct PlacementTests {
  @Test("cores: lane i runs on the i-th allowed CPU, with a one-CPU affinity mask")
  func pinnedToCores() throws {
    let cpus = allowedCPUs()
    let pool = try LanePool(name: uniqueName("pin"), lanesPerBand: 2, placement: .cores)
    defer { _ = try? pool.shutdown(discardingQueued: false) }
    for lane in pool.allLanes {
      let want = cpus[lane.index % cpus.count]
      let ran = try lane.sync(onLaneThread: true) { Int(lp_test_current_cpu()) }
      #expect(ran == want, "\(lane)")
      var first: Int32 = -1
      #expect(lp_test_affinity(lane.info.threadID, &first) == 1, "\(lane)")
      #expect(Int(first) == want)
      #expect(lane.info.cpu == want)
      #expect(lane.info.placementError == nil)
    }
  }

  @Test("none: lanes float over every allowed CPU")
  func floating() throws {
    let pool = try LanePool(name: uniqueName("flt"), lanesPerBand: 1)
    defer { _ = try? pool.shutdown(discardingQueued: false) }
    for lane in pool.allLanes {
      var first: Int32 = -1
      #expect(Int(lp_test_affinity(lane.info.threadID, &first)) == allowedCPUs().count)
      #expect(lane.info.cpu == nil)
    }
  }

  @Test("a CPU list pins lane i to cpus[i % count]; a CPU outside the allowed set is refused")
  func cpuList() throws {
    let last = allowedCPUs().last!
    let pool = try LanePool(name: uniqueName("lst"), lanesPerBand: 2, placement: .cpus([last]))
    defer { _ = try? pool.shutdown(discardingQueued: false) }
    for lane in pool.allLanes {
      #expect(try lane.sync(onLaneThread: true) { Int(lp_test_current_cpu()) } == last)
      #expect(lane.info.cpu == last)
    }
    #expect(throws: LanePoolError.self) { try LanePool(lanesPerBand: 1, placement: .cpus([4095])) }
    #expect(throws: LanePoolError.self) { try LanePool(lanesPerBand: 1, placement: .cpus([])) }
  }

  @Test("restricted affinity (like taskset -c N): cores placement uses only the allowed CPU")
  func restrictedAffinity() async {
    let result = await #expect(processExitsWith: .success, observing: [\.standardErrorContent]) {
      reportVerdictAndExit(restrictedAffinityCheck())
    }
    recordChildVerdict(result)
  }

  @Test("NUMA plan, 2 nodes x 4 CPUs: lanes split evenly, ties to the lower node")
  func numaTwoNodes() {
    let topo = [0: [0, 1, 2, 3], 1: [4, 5, 6, 7]]
    let all = Array(0..<8)
    #expect(planNUMA(lanes: 4, topology: topo, allowed: all) == (0, [0, 0, 1, 1]))
    #expect(planNUMA(lanes: 3, topology: topo, allowed: all) == (0, [0, 0, 1]))
    #expect(planNUMA(lanes: 1, topology: topo, allowed: all) == (0, [0]))
    #expect(planNUMA(lanes: 8, topology: topo, allowed: all) == (0, [0, 0, 0, 0, 1, 1, 1, 1]))
    // Restricted to 0, 1 and 4 (taskset): node 0 has 2 allowed CPUs, node 1 has 1.
    #expect(planNUMA(lanes: 3, topology: topo, allowed: [0, 1, 4]) == (0, [0, 0, 1]))
    // Restricted to node 1's CPUs only: node 0 gets nothing.
    #expect(planNUMA(lanes: 2, topology: topo, allowed: [5, 6]) == (0, [1, 1]))
    // No allowed CPU in any node: EINVAL.
    #expect(planNUMA(lanes: 2, topology: topo, allowed: [9]).rc == EINVAL)
  }

  @Test("NUMA plan, 4 uneven nodes: largest remainder on CPU counts")
  func numaFourNodes() {
    let topo = [0: Array(0..<6), 1: [6, 7], 2: Array(8..<12), 3: Array(12..<16)]
    let all = Array(0..<16)
    // Quotas 3, 1, 2, 2.
    #expect(planNUMA(lanes: 8, topology: topo, allowed: all) == (0, [0, 0, 0, 1, 2, 2, 3, 3]))
    // Quotas 1.875, 0.625, 1.25, 1.25: floors 1, 0, 1, 1; remainders go to nodes 0 and 1.
    #expect(planNUMA(lanes: 5, topology: topo, allowed: all) == (0, [0, 0, 1, 2, 3]))
    // Quotas 0.75, 0.25, 0.5, 0.5: the two lanes go to node 0, then node 2 (tie with 3).
    #expect(planNUMA(lanes: 2, topology: topo, allowed: all) == (0, [0, 2]))
  }

  @Test("cores and CPU-list plans through the same C rule")
  func corePlans() {
    var out = [lanepool_lane_placement_t](repeating: .init(), count: 4)
    let allowed: [Int32] = [2, 5, 7]
    #expect(lanepool_plan_placement(LANEPOOL_PLACEMENT_CORES, 4, nil, 0, nil, allowed, 3, &out, 4) == 0)
    #expect(out.map(\.cpu) == [2, 5, 7, 2])
    let list: [Int32] = [7, 5]
    #expect(lanepool_plan_placement(LANEPOOL_PLACEMENT_CPU_LIST, 4, list, 2, nil, allowed, 3, &out, 4) == 0)
    #expect(out.map(\.cpu) == [7, 5, 7, 5])
    let outside: [Int32] = [3]
    #expect(lanepool_plan_placement(LANEPOOL_PLACEMENT_CPU_LIST, 4, outside, 1, nil, allowed, 3, &out, 4) == EINVAL)
    #expect(lanepool_plan_placement(LANEPOOL_PLACEMENT_NONE, 4, nil, 0, nil, allowed, 3, &out, 4) == 0)
    #expect(out.allSatisfy { $0.cpu == -1 && $0.node == -1 })
    #expect(lanepool_plan_placement(LANEPOOL_PLACEMENT_NONE, 4, nil, 0, nil, allowed, 3, &out, 3) == EINVAL)
  }

  @Test("a numa pool on this machine: node 0 for every lane with libnuma; a clear error without")
  func numaPoolHere() throws {
    if lanepool_numa_supported() == 1 {
      let pool = try LanePool(name: uniqueName("numa"), lanesPerBand: 2, placement: .numa)
      defer { _ = try? pool.shutdown(discardingQueued: false) }
      for lane in pool.allLanes {
        #expect(lane.info.numaNode == 0, "\(lane)")
        #expect(lane.info.placementError == nil)
        #expect(try lane.sync { 1 } == 1)
      }
    } else {
      do {
        _ = try LanePool(lanesPerBand: 1, placement: .numa)
        Issue.record("a NUMA pool started without libnuma support")
      } catch {
        #expect(error.code == .unsupported, "expected .unsupported, got \(error)")
        #expect(error.message.contains("libnuma"))
      }
    }
  }

  @Test("an injected 2-node topology over this machine's CPUs binds each lane to its node")
  func numaInjectedTopology() throws {
    let cpus = allowedCPUs()
    guard lanepool_numa_supported() == 1, cpus.count >= 2 else {
      // Without libnuma the pool is refused (tested above); with one CPU there is
      // no second node to bind to.
      return
    }
    let topo = [0: [cpus[0]], 1: [cpus[1]]]
    let pool = try LanePool(name: uniqueName("nmi"), lanesPerBand: 2, placement: .numaTopology(topo))
    defer { _ = try? pool.shutdown(discardingQueued: false) }
    for lane in pool.allLanes {
      let node = lane.index  // 2 lanes over 2 equal nodes: lane 0 -> node 0, lane 1 -> node 1
      #expect(lane.info.numaNode == node)
      #expect(try lane.sync(onLaneThread: true) { Int(lp_test_current_cpu()) } == cpus[node])
      var first: Int32 = -1
      #expect(lp_test_affinity(lane.info.threadID, &first) == 1)
      #expect(Int(first) == cpus[node])
    }
  }
}

/// Child process: restrict the creating thread to the last allowed CPU, then check
/// that pinned and floating pools both stay on it.
func restrictedAffinityCheck() -> String? {
  let cpus = allowedCPUs()
  let only = cpus.last!
  guard lp_test_pin_self(Int32(only)) == 0 else { return "cannot restrict affinity" }
  guard allowedCPUs() == [only] else { return "restriction did not take" }
  do {
    let pinned = try LanePool(name: "rstp", lanesPerBand: 2, placement: .cores)
    for lane in pinned.allLanes {
      guard lane.info.cpu == only else { return "\(lane) pinned to \(String(describing: lane.info.cpu)), not \(only)" }
      let ran = try lane.sync(onLaneThread: true) { Int(lp_test_current_cpu()) }
      guard ran == only else { return "\(lane) ran on CPU \(ran)" }
    }
    try pinned.shutdown(discardingQueued: false)
    let floating = try LanePool(name: "rstf", lanesPerBand: 2)
    for lane in floating.allLanes {
      var first: Int32 = -1
      let n = lp_test_affinity(lane.info.threadID, &first)
      guard n == 1, first == Int32(only) else { return "\(lane) may run on \(n) CPUs from \(first)" }
    }
    try floating.shutdown(discardingQueued: false)
    // lanesPerBand defaults to the allowed CPU count: 1 here.
    let auto = try LanePool(name: "rsta")
    guard auto.lanesPerBand == 1 else { return "default lanes per band \(auto.lanesPerBand), want 1" }
    try auto.shutdown(discardingQueued: false)
  } catch {
    return "error: \(error)"
  }
  return nil
}

extension lanepool_lane_placement_t: @retroactive Equatable {
  public static func == (a: Self, b: Self) -> Bool { a.node == b.node && a.cpu == b.cpu }
}

@Suite("Build configuration")
struct BuildConfigurationTests {
  @Test("the NUMA package trait switches libnuma support on, and only it does")
  func numaTrait() {
    #if NUMA
      // Built with --traits NUMA on a machine with libnuma (CI installs libnuma-dev).
      #expect(lanepool_numa_supported() == 1)
    #else
      #expect(lanepool_numa_supported() == 0)
    #endif
  }
}
