#pragma once
// ErrorReport: an exception caught on the writing side of a ring, as a kError record carries it, and
// the WorkerError it becomes on the reading side. Private to the library.

#include <string>

#include <dpipe/serialization/serializer.hpp>

namespace dpipe::detail::mp {

struct ErrorReport {
  std::string where;  // "worker process 1", "dispatching process"
  std::string type;   // the exception's type name
  std::string message;
  DPIPE_FIELDS(where, type, message)
};

/// Describes the exception being handled (call inside a catch block) as happening in `where`; a
/// WorkerError relayed from another process keeps the place it names.
ErrorReport report_current_exception(const std::string& where);

/// Throws the WorkerError that `report` describes.
[[noreturn]] void throw_worker_error(const ErrorReport& report);

}  // namespace dpipe::detail::mp
