// Top-level names for the public types nested in `LanePool`.
//
// The module and its main type are both named `LanePool`, so a module-qualified
// `LanePool.QoS` would name a member of the type: the types live in the type
// (`LanePool.QoS`, `LanePool.Lane`, ...), which is the spelling that always resolves,
// even next to another module's `QoS` or `Placement`. These aliases keep code written
// with the bare names compiling.

/// Shorthand for ``LanePool/Lane``.
public typealias Lane = LanePool.Lane
/// Shorthand for ``LanePool/LaneInfo``.
public typealias LaneInfo = LanePool.LaneInfo
/// Shorthand for ``LanePool/LanePoolError``.
public typealias LanePoolError = LanePool.LanePoolError
/// Shorthand for ``LanePool/QoS``.
public typealias QoS = LanePool.QoS
/// Shorthand for ``LanePool/PriorityClass``.
public typealias PriorityClass = LanePool.PriorityClass
/// Shorthand for ``LanePool/BandPolicy``.
public typealias BandPolicy = LanePool.BandPolicy
/// Shorthand for ``LanePool/Placement``.
public typealias Placement = LanePool.Placement
/// Shorthand for ``LanePool/AppliedSetting``.
public typealias AppliedSetting = LanePool.AppliedSetting
/// Shorthand for ``LanePool/AppliedPolicy``.
public typealias AppliedPolicy = LanePool.AppliedPolicy
/// Shorthand for ``LanePool/LogLevel``.
public typealias LogLevel = LanePool.LogLevel
/// Shorthand for ``LanePool/TimerHandle``.
public typealias TimerHandle = LanePool.TimerHandle
/// Shorthand for ``LanePool/LaneGroup``.
public typealias LaneGroup = LanePool.LaneGroup
