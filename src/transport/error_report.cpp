// Exception reports.

#include "error_report.hpp"

#include <exception>

#include <fmt/format.h>

#include <dpipe/core/error.hpp>
#include <dpipe/core/type_name.hpp>

namespace dpipe::detail::transport {

ErrorReport report_current_exception(const std::string& where) {
  try {
    throw;
  } catch (const WorkerError& error) {
    return ErrorReport{error.where(), error.original_type(), error.original_message(),
                       std::current_exception()};  // relayed
  } catch (...) {
    const ExceptionDescription description = describe_current_exception();
    return ErrorReport{where, description.type, description.message, std::current_exception()};
  }
}

void throw_worker_error(const ErrorReport& report) {
  if (report.original) std::rethrow_exception(report.original);
  throw WorkerError(report.where, report.type, report.message,
                    fmt::format("Caught {} in {}.\nOriginal message: {}", report.type, report.where, report.message));
}

}  // namespace dpipe::detail::transport
