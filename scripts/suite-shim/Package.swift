// swift-tools-version: 6.1
// A shared library that installs LanePool as the process's executor when it is loaded
// (LD_PRELOAD), so another package's test binary runs unmodified on LanePool's lanes.
// Used by scripts/async-suites.
import PackageDescription

let package = Package(
  name: "LanePoolSuiteShim",
  products: [.library(name: "LanePoolSuiteShim", type: .dynamic, targets: ["LanePoolSuiteShimC"])],
  dependencies: [.package(name: "LanePool", path: "../..", traits: [])],
  targets: [
    .target(name: "LanePoolSuiteShim", dependencies: [.product(name: "LanePool", package: "LanePool")]),
    // The constructor: a C target, since Swift has none; it calls the Swift side.
    .target(name: "LanePoolSuiteShimC", dependencies: ["LanePoolSuiteShim"]),
  ]
)
