// The skip bookkeeping of the OnError policy.

#include <exception>

#include <fmt/format.h>

#include <dpipe/core/detail/element_skipper.hpp>
#include <dpipe/core/error.hpp>
#include <dpipe/core/logging.hpp>
#include <dpipe/core/type_name.hpp>

namespace dpipe::detail {

namespace {

/// Throws `error`, nesting the exception being handled when there is one.
[[noreturn]] void throw_nesting_current(ElementError error) {
  if (std::current_exception()) std::throw_with_nested(std::move(error));
  throw std::move(error);
}

}  // namespace

void ElementSkipper::skip_or_throw(const DataPipe& node, std::uint64_t index, const std::string& description) {
  const std::string failure = fmt::format("{}: fn threw on element {}: {}", node.label(), index, description);
  if (!policy_.skips()) throw_nesting_current(ElementError(failure));
  count_or_throw(failure);
}

void ElementSkipper::skip_bad_data(const DataError& error) {
  if (!policy_.skips()) throw;  // the DataError itself, as it was thrown
  count_or_throw(error.what());
}

void ElementSkipper::count_or_throw(const std::string& failure) {
  if (policy_.budget && skipped_ >= *policy_.budget) {
    throw_nesting_current(
        ElementError(fmt::format("{}; that is {} failed elements in this epoch, more than the error "
                                 "budget of {} (OnError::skip)",
                                 failure, skipped_ + 1, *policy_.budget)));
  }
  ++skipped_;
  if (policy_.budget) {
    log_warning("{}; skipped ({} of the budget of {} in this epoch)", failure, skipped_, *policy_.budget);
  } else {
    log_warning("{}; skipped ({} in this epoch)", failure, skipped_);
  }
}

void ElementSkipper::skip_current_or_throw(const DataPipe& node, std::uint64_t index) {
  skip_or_throw(node, index, describe(std::current_exception()));
}

void ElementSkipper::load_state(const StateReader& reader) {
  const auto skipped = reader.read<std::uint64_t>("skipped");
  if (policy_.budget && skipped > *policy_.budget) {
    DPIPE_THROW(StateError, "{}: the checkpoint skipped {} elements, more than the error budget of {}", reader.name(),
                skipped, *policy_.budget);
  }
  skipped_ = skipped;
}

}  // namespace dpipe::detail
