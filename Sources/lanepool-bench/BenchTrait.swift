// lanepool-bench's flags (swift-argument-parser) and latency histograms (hdrhistogram-swift)
// come in with the Bench package trait, on by default, so that a dependent that turns
// the default traits off resolves neither. A root build that names its traits keeps it
// with `default` (`swift build --traits default,NUMA`).
#if !Bench
  #error(
    "lanepool-bench needs the Bench trait (on by default): keep `default` when naming traits, e.g. --traits default,NUMA"
  )
#endif
