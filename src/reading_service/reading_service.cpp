// The defaults of the reading-service interfaces.

#include <typeinfo>

#include <dpipe/core/error.hpp>
#include <dpipe/core/type_name.hpp>
#include <dpipe/reading_service/reading_service.hpp>

namespace dpipe {
namespace {

[[noreturn]] void throw_unsupported(const char* hook) {
  DPIPE_THROW(NotSupportedError, "this reading service does not support `{}`", hook);
}

}  // namespace

std::string ReadingServiceInterface::describe() const { return detail::demangle(typeid(*this).name()); }

std::optional<std::size_t> ReadingServiceInterface::epoch_length(const DataPipePtr& /*graph*/) const {
  return std::nullopt;
}

std::optional<std::size_t> ReadingServiceInterface::epoch_length_before(const DataPipePtr& /*graph*/,
                                                                        const EpochLengthFunction& /*rest*/) const {
  return std::nullopt;
}

GraphFunction ReadingServiceInterface::initialize_iteration(SeedGenerator& /*seeds*/, GraphFunction /*iter_reset_fn*/) {
  return {};
}
GraphFunction ReadingServiceInterface::pause(GraphFunction /*pause_fn*/) { throw_unsupported("pause"); }
GraphFunction ReadingServiceInterface::resume(GraphFunction /*resume_fn*/) { throw_unsupported("resume"); }
GraphFunction ReadingServiceInterface::limit(std::optional<std::size_t> /*num_batches*/, GraphFunction /*limit_fn*/) {
  throw_unsupported("limit");
}

}  // namespace dpipe
