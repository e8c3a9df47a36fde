// LanePoolDispatch: LanePool for code moving from GCD and YYDispatchQueuePool.
//
// - `YYDispatchQueuePool`, `YYDispatchQueueGetForQOS` and `LaneQueue`: YY's API with
//   GCD's method shapes, on LanePool lanes, so YY call sites change only their import.
// - `LanePool.QoS.init(_:)` from GCD's `DispatchQoS.QoSClass` and Foundation's
//   `QualityOfService`.
//
// Kept out of the `LanePool` module so that it imports no Foundation. This module
// re-exports LanePool: `import LanePoolDispatch` is enough at a YY call site.
