// threadpool_map's error for an element its function failed on.

#include <exception>

#include <fmt/format.h>

#include <dpipe/core/error.hpp>
#include <dpipe/core/type_name.hpp>
#include <dpipe/iter/threadpool_map.hpp>

namespace dpipe::detail {

void throw_element_error(const DataPipe& node, std::uint64_t index, std::exception_ptr error) {
  const std::string message = fmt::format("{}: fn threw on element {}: {}", node.label(), index, describe(error));
  try {
    std::rethrow_exception(error);
  } catch (...) {
    std::throw_with_nested(ElementError(message));
  }
}

}  // namespace dpipe::detail
