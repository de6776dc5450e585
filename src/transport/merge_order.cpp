// CyclicOrder: the merge order of MultiProcessingReadingService's workers.

#include "transport/merge_order.hpp"

#include <algorithm>
#include <cstdint>
#include <utility>

#include <dpipe/core/error.hpp>
#include <dpipe/core/state.hpp>

namespace dpipe::detail::transport {

void CyclicOrder::reset() noexcept {
  std::fill(ended_.begin(), ended_.end(), false);
  cursor_ = 0;
  live_ = ended_.size();
}

void CyclicOrder::save_state(StateWriter& writer) const {
  writer.write("cursor", std::uint64_t{cursor_});
  writer.write("exhausted", ended_);
}

void CyclicOrder::load_state(const StateReader& reader) {
  const auto cursor = reader.read<std::uint64_t>("cursor");
  auto ended = reader.read<std::vector<bool>>("exhausted");
  if (ended.size() != ended_.size()) {
    DPIPE_THROW(StateError, "{}: the checkpoint merges {} processes, this one {}", reader.name(), ended.size(),
                ended_.size());
  }
  if (cursor >= ended_.size()) DPIPE_THROW(StateError, "{}: merge position {} out of range", reader.name(), cursor);
  ended_ = std::move(ended);
  cursor_ = static_cast<std::size_t>(cursor);
  live_ = static_cast<std::size_t>(std::count(ended_.begin(), ended_.end(), false));
}

}  // namespace dpipe::detail::transport
