/// Stops the program for a misuse of LanePool's API, with a message that survives
/// optimised builds.
///
/// `precondition` and `preconditionFailure` drop their message under `-O` (the
/// program stops with a bare "precondition failure"); `fatalError` keeps it. Every
/// stop for misuse in LanePool goes through here, so it prints
/// "LanePool: <message>" on stderr in debug and release builds alike.
package func misuse(
  _ message: @autoclosure () -> String, file: StaticString = #fileID, line: UInt = #line
) -> Never {
  fatalError("LanePool: \(message())", file: file, line: line)
}
