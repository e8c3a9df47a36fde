// swift-tools-version: 6.1
import PackageDescription

let package = Package(
  name: "LanePool",
  products: [
    .library(name: "LanePool", targets: ["LanePool"]),
    .executable(name: "lanepool-bench", targets: ["lanepool-bench"]),
  ],
  targets: [
    // The C core. Its one public header is the top-level include/lanepool.h, reached
    // through the symlink Sources/CLanePool/include -> ../../include.
    .target(
      name: "CLanePool",
      path: "Sources/CLanePool",
      linkerSettings: [.linkedLibrary("pthread")]
    ),
    .target(
      name: "LanePool",
      dependencies: ["CLanePool"],
      swiftSettings: [.swiftLanguageMode(.v6)]
    ),
    .executableTarget(
      name: "lanepool-bench",
      dependencies: ["LanePool", "CLanePool"],
      swiftSettings: [.swiftLanguageMode(.v6)]
    ),
    .testTarget(
      name: "LanePoolTests",
      dependencies: ["LanePool", "CLanePool"],
      swiftSettings: [.swiftLanguageMode(.v6)]
    ),
  ]
)
