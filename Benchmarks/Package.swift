// swift-tools-version: 6.1
// Micro-benchmarks for LanePool on ordo-one/benchmark. Run from this folder:
//   swift package benchmark
// CI checks only the deterministic malloc counts against Thresholds/:
//   swift package benchmark thresholds check --metric mallocCountTotal
import PackageDescription

let package = Package(
  name: "LanePoolBenchmarks",
  platforms: [.macOS(.v15)],
  dependencies: [
    .package(name: "LanePool", path: ".."),
    .package(url: "https://github.com/ordo-one/benchmark.git", from: "1.38.1", traits: ["MallocInterposer"]),
  ],
  targets: [
    .executableTarget(
      name: "LanePoolBenchmarks",
      dependencies: [
        .product(name: "Benchmark", package: "benchmark"),
        .product(name: "LanePool", package: "LanePool"),
        .product(name: "CLanePool", package: "LanePool"),
      ],
      path: "Benchmarks/LanePoolBenchmarks",
      plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
    )
  ]
)
