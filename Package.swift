// swift-tools-version: 6.1
import PackageDescription

// The library targets and the bench are Swift 6 mode. With LANEPOOL_WERROR=1 in the
// environment (CI's test build) a warning in them is an error; never for a dependent,
// which has no reason to set it (unsafe flags in a fetched package are refused).
let strict = Context.environment["LANEPOOL_WERROR"] == "1"
let librarySettings: [SwiftSetting] =
  [.swiftLanguageMode(.v6)] + (strict ? [.unsafeFlags(["-warnings-as-errors"])] : [])

let package = Package(
  name: "LanePool",
  products: [
    .library(name: "LanePool", targets: ["LanePool"]),
    // YYDispatchQueuePool, LaneQueue and the GCD/Foundation QoS conversions, kept out of
    // LanePool so that it imports no Foundation. Re-exports LanePool.
    .library(name: "LanePoolDispatch", targets: ["LanePoolDispatch"]),
    // The C core alone, for C/C++ targets (and the micro-benchmarks) built with SwiftPM.
    .library(name: "CLanePool", targets: ["CLanePool"]),
    .executable(name: "lanepool-bench", targets: ["lanepool-bench"]),
    // For servers: a pool as a swift-service-lifecycle Service, swift-log and
    // swift-metrics. A separate product behind the Server trait, so `LanePool` itself
    // depends on nothing.
    .library(name: "LanePoolServer", targets: ["LanePoolServer"]),
  ],
  // Server (on by default) gates the three server packages, Bench (on by default) the
  // benchmark's two, NIOPeer (off) the benchmark's SwiftNIO rows: a dependent that uses
  // only LanePool or CLanePool says `traits: []` (or `["NUMA"]`) on its `.package` line
  // and SwiftPM neither fetches nor builds them; a server says `traits: ["Server"]`. A
  // root build that names traits keeps these with `default` (`--traits default,NUMA`).
  traits: [
    .default(enabledTraits: ["Server", "Bench"]),
    .trait(
      name: "Server",
      description: "The LanePoolServer product: swift-service-lifecycle, swift-log and swift-metrics. On by default."
    ),
    .trait(
      name: "Bench",
      description: "lanepool-bench's packages: swift-argument-parser and hdrhistogram-swift. On by default; lanepool-bench needs it and Server."
    ),
    .trait(
      name: "NIOPeer",
      description: "lanepool-bench's W9 adds actors on two SwiftNIO event loops, the natural peer of actors on lanes (swift-nio). Off by default: `swift run -c release --traits default,NIOPeer lanepool-bench`."
    ),
    .trait(
      name: "NUMA",
      description: "NUMA placement through libnuma (Debian: libnuma-dev). Off by default so the package builds without it."
    )
  ],
  dependencies: [
    .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
    .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
    .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
    // Tests only: LanePoolServerTests check the documented Prometheus buckets with it.
    .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
    // lanepool-bench only (the Bench trait): flags and latency histograms.
    .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
    .package(url: "https://github.com/HdrHistogram/hdrhistogram-swift.git", from: "0.2.0"),
    // lanepool-bench's W9 peer only (the NIOPeer trait, off by default).
    .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
  ],
  targets: [
    // The C core. Its one public header is the top-level include/lanepool.h, reached
    // through the symlink Sources/CLanePool/include -> ../../include.
    .target(
      name: "CLanePool",
      path: "Sources/CLanePool",
      cSettings: [.define("LANEPOOL_HAVE_NUMA", .when(traits: ["NUMA"]))],
      linkerSettings: [
        .linkedLibrary("pthread"),
        .linkedLibrary("numa", .when(traits: ["NUMA"])),
      ]
    ),
    .target(
      name: "LanePool",
      dependencies: ["CLanePool"],
      swiftSettings: librarySettings
    ),
    .target(
      name: "LanePoolDispatch",
      dependencies: ["LanePool"],
      swiftSettings: librarySettings
    ),
    // lanepool-bench's C shim. Named after the package: target names are global across a
    // package graph, so a generic name would clash with a dependent's own target.
    .target(name: "LanePoolBenchSupport", path: "Sources/LanePoolBenchSupport"),
    .executableTarget(
      name: "lanepool-bench",
      dependencies: [
        "LanePool", "LanePoolServer", "CLanePool", "LanePoolBenchSupport",
        .product(name: "ArgumentParser", package: "swift-argument-parser", condition: .when(traits: ["Bench"])),
        .product(name: "Histogram", package: "hdrhistogram-swift", condition: .when(traits: ["Bench"])),
        .product(name: "NIOCore", package: "swift-nio", condition: .when(traits: ["NIOPeer"])),
        .product(name: "NIOPosix", package: "swift-nio", condition: .when(traits: ["NIOPeer"])),
      ],
      swiftSettings: librarySettings
    ),
    .target(
      name: "LanePoolServer",
      dependencies: [
        "LanePool",
        .product(name: "ServiceLifecycle", package: "swift-service-lifecycle", condition: .when(traits: ["Server"])),
        .product(name: "Logging", package: "swift-log", condition: .when(traits: ["Server"])),
        .product(name: "Metrics", package: "swift-metrics", condition: .when(traits: ["Server"])),
      ],
      swiftSettings: librarySettings
    ),
    .testTarget(
      name: "LanePoolServerTests",
      // Without the Server trait (`swift test --disable-default-traits`) these tests build
      // empty, and no server package is built (CI's ASan run).
      dependencies: [
        "LanePool", "LanePoolTestSupport",
        .target(name: "LanePoolServer", condition: .when(traits: ["Server"])),
        .product(name: "ServiceLifecycle", package: "swift-service-lifecycle", condition: .when(traits: ["Server"])),
        .product(
          name: "ServiceLifecycleTestKit", package: "swift-service-lifecycle", condition: .when(traits: ["Server"])),
        .product(name: "Logging", package: "swift-log", condition: .when(traits: ["Server"])),
        .product(name: "Metrics", package: "swift-metrics", condition: .when(traits: ["Server"])),
        .product(name: "MetricsTestKit", package: "swift-metrics", condition: .when(traits: ["Server"])),
        .product(name: "Prometheus", package: "swift-prometheus", condition: .when(traits: ["Server"])),
      ],
      swiftSettings: [.swiftLanguageMode(.v6)]
    ),
    // Raw syscalls the tests use to check LanePool independently of its own code.
    .target(name: "LanePoolTestSupport", dependencies: ["CLanePool"], path: "Tests/LanePoolTestSupport"),
    .testTarget(
      name: "LanePoolTests",
      dependencies: ["LanePool", "LanePoolDispatch", "CLanePool", "LanePoolTestSupport"],
      swiftSettings: [.swiftLanguageMode(.v6)]
    ),
  ]
)
