#pragma once
// ErrorReport: an exception caught on the writing side of a ring, as a kError record carries it, and
// the WorkerError it becomes on the reading side. Private to the library.

#include <cstdint>
#include <exception>
#include <mutex>
#include <optional>
#include <string>

#include <dpipe/serialization/serializer.hpp>

namespace dpipe::detail::transport {

struct ErrorReport {
  std::string where;  // "worker process 1", "dispatching process"
  std::string type;   // the exception's type name
  std::string message;
  std::string node;                      // the node whose function raised it, or ""
  std::optional<std::uint64_t> element;  // the element of the epoch `where` was producing
  std::exception_ptr original{};         // the exception itself, where it cannot have crossed a process
  DPIPE_FIELDS(where, type, message, node, element)
};

/// Where a child thread leaves the exception a kError record reports, for the reader to rethrow
/// it as it was. Thread-safety: any thread.
class ExceptionSlot {
 public:
  void set(std::exception_ptr exception) {
    const std::lock_guard lock(mutex_);
    exception_ = std::move(exception);
  }
  [[nodiscard]] std::exception_ptr get() const {
    const std::lock_guard lock(mutex_);
    return exception_;
  }

 private:
  mutable std::mutex mutex_;
  std::exception_ptr exception_;
};

/// Describes the exception being handled (call inside a catch block) as happening in `where`, with
/// the node whose function raised it, if one did (detail::call_user_function). A WorkerError
/// relayed from another process keeps the place, node and element it names.
ErrorReport report_current_exception(const std::string& where);

/// Throws the exception `report` carries, or else the WorkerError it describes.
[[noreturn]] void throw_worker_error(const ErrorReport& report);

}  // namespace dpipe::detail::transport
