// swift-tools-version: 6.1
// The HTTP demo: a Hummingbird 2 server whose endpoints offload work either to
// LanePool bands or to DispatchQueue.global(qos:). Its own package, so the main
// package's `swift test` never builds it. Run ./run-demo.sh from this folder.
import PackageDescription

let package = Package(
  name: "HTTPDemo",
  platforms: [.macOS(.v15)],
  dependencies: [
    // With the NIOPeer trait: .ci/run builds lanepool-bench's SwiftNIO rows (W9) here, on
    // the SwiftNIO this package builds anyway. DemoServer itself does not use it.
    .package(name: "LanePool", path: "../..", traits: [.defaults, "NIOPeer"]),
    .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1"),
    // Hummingbird's own SwiftNIO, named for the server's event loop group.
    .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
  ],
  targets: [
    .executableTarget(
      name: "DemoServer",
      dependencies: [
        .product(name: "Hummingbird", package: "hummingbird"),
        .product(name: "LanePool", package: "LanePool"),
        .product(name: "NIOPosix", package: "swift-nio"),
      ],
      swiftSettings: [.swiftLanguageMode(.v6)]
    ),
  ]
)
