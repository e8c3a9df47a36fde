// swift-tools-version: 6.1
import PackageDescription

let package = Package(
  name: "LanePool",
  products: [
    .library(name: "LanePool", targets: ["LanePool"]),
    // The C core alone, for C/C++ targets (and the micro-benchmarks) built with SwiftPM.
    .library(name: "CLanePool", targets: ["CLanePool"]),
    .executable(name: "lanepool-bench", targets: ["lanepool-bench"]),
    // For servers: a pool as a swift-service-lifecycle Service, swift-log and
    // swift-metrics. A separate product, so `LanePool` itself depends on nothing.
    .library(name: "LanePoolServer", targets: ["LanePoolServer"]),
  ],
  traits: [
    .trait(
      name: "NUMA",
      description: "NUMA placement through libnuma (Debian: libnuma-dev). Off by default so the package builds without it."
    )
  ],
  dependencies: [
    .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
    .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
    .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
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
      swiftSettings: [.swiftLanguageMode(.v6)]
    ),
    .target(name: "CBenchSupport", path: "Sources/CBenchSupport"),
    .executableTarget(
      name: "lanepool-bench",
      dependencies: ["LanePool", "LanePoolServer", "CLanePool", "CBenchSupport"],
      swiftSettings: [.swiftLanguageMode(.v6)]
    ),
    .target(
      name: "LanePoolServer",
      dependencies: [
        "LanePool",
        .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
        .product(name: "Logging", package: "swift-log"),
        .product(name: "Metrics", package: "swift-metrics"),
      ],
      swiftSettings: [.swiftLanguageMode(.v6)]
    ),
    .testTarget(
      name: "LanePoolServerTests",
      dependencies: [
        "LanePoolServer", "LanePool",
        .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
        .product(name: "ServiceLifecycleTestKit", package: "swift-service-lifecycle"),
        .product(name: "Logging", package: "swift-log"),
        .product(name: "Metrics", package: "swift-metrics"),
        .product(name: "MetricsTestKit", package: "swift-metrics"),
      ],
      swiftSettings: [.swiftLanguageMode(.v6)]
    ),
    // Raw syscalls the tests use to check LanePool independently of its own code.
    .target(name: "CTestSupport", path: "Tests/CTestSupport"),
    .testTarget(
      name: "LanePoolTests",
      dependencies: ["LanePool", "CLanePool", "CTestSupport"],
      swiftSettings: [.swiftLanguageMode(.v6)]
    ),
  ]
)
