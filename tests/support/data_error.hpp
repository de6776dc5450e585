#pragma once
// data_error_of: the message of the DataError a pipeline or a step throws, for the I/O tests'
// exact-message checks.

#include <concepts>
#include <string>

#include <dpipe/dpipe.hpp>

#include "support/battery.hpp"

namespace dpipe::testing {

/// The message of the DataError `run()` throws, or "no DataError" when it returns.
template <class Run>
requires std::invocable<Run&> std::string data_error_of(Run run) {
  try {
    run();
  } catch (const DataError& error) {
    return error.what();
  }
  return "no DataError";
}

/// The message of the DataError reading `pipe` throws: a whole iteration, or with `from_start`
/// false the rest of the current one; "no DataError" when it ends without one.
template <class T>
std::string data_error_of(const IterPipe<T>& pipe, bool from_start = true) {
  return data_error_of([&] { (void)(from_start ? collect(pipe) : rest(pipe)); });
}

}  // namespace dpipe::testing
