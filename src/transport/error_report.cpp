// Exception reports.

#include "error_report.hpp"

#include <exception>

#include <fmt/format.h>

#include <dpipe/core/detail/user_function.hpp>
#include <dpipe/core/error.hpp>
#include <dpipe/core/type_name.hpp>

namespace dpipe::detail::transport {

ErrorReport report_current_exception(const std::string& where) {
  try {
    throw;
  } catch (const WorkerError& error) {
    return ErrorReport{error.where(), error.original_type(), error.original_message(),
                       error.node(),  error.element(),       std::current_exception()};  // relayed
  } catch (...) {
    const ExceptionDescription description = describe_current_exception();
    std::exception_ptr original = std::current_exception();
    std::string node = take_failing_node(original);
    return ErrorReport{where,           description.type, description.message,
                       std::move(node), std::nullopt,     std::move(original)};
  }
}

namespace {

/// The message's last line: which node's function raised the exception and at which element.
std::string raised_at(const ErrorReport& report) {
  const std::string by = report.node.empty() ? std::string() : fmt::format(" by {}'s function", report.node);
  if (!report.element) return by.empty() ? std::string() : fmt::format("\nRaised{}.", by);
  return fmt::format("\nRaised{} while {} produced element {} of its stream in this epoch (counting from 0).", by,
                     report.where, *report.element);
}

}  // namespace

void throw_worker_error(const ErrorReport& report) {
  if (report.original) std::rethrow_exception(report.original);
  throw WorkerError(report.where, report.type, report.message,
                    fmt::format("Caught {} in {}.\nOriginal message: {}{}", report.type, report.where, report.message,
                                raised_at(report)),
                    report.node, report.element);
}

}  // namespace dpipe::detail::transport
