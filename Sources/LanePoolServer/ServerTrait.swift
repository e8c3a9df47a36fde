// The LanePoolServer target's three package dependencies are conditional on the package
// trait Server (on by default), so that a dependent using only LanePool fetches none of
// them. Built without the trait, this target would fail on its imports; say why instead.
#if !Server
  #error(
    "LanePoolServer needs LanePool's package trait Server: drop `traits: []` from the .package line, or list \"Server\" in it (a root build: --traits default,...)"
  )
#endif
