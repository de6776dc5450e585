// ShuffleState: shuffle's generator, drain order and checkpoint fields.

#include <dpipe/core/error.hpp>
#include <dpipe/iter/detail/shuffle_state.hpp>
#include <dpipe/random/seed_generator.hpp>

namespace dpipe::detail {

ShuffleState::ShuffleState(std::size_t buffer_size) : buffer_size_(buffer_size) {
  if (buffer_size == 0) DPIPE_THROW(InvalidArgument, "buffer_size should be larger than 0");
}

ShuffleState::ShuffleState(const ShuffleState& other) = default;

ShuffleState::~ShuffleState() = default;

void ShuffleState::reset() {
  draining_ = false;
  drain_.assign(0);
  if (enabled_) {
    rng_.seed(pending_seed_ ? *pending_seed_ : entropy_seed());
    pending_seed_.reset();
  }
}

void ShuffleState::start_draining(std::size_t buffered) {
  draining_ = true;
  drain_.assign(buffered);
}

std::vector<std::size_t> ShuffleState::save_state(StateWriter& writer, std::size_t buffered) const {
  writer.write("enabled", enabled_);
  writer.write("pending_seed", pending_seed_);
  writer.write("draining", draining_);
  writer.write("rng", rng_);
  std::vector<std::size_t> kept;  // the buffer in its current order, without the positions drained
  for (std::size_t i = 0; i < buffered; ++i) {
    if (!draining_ || !drain_.taken(i)) kept.push_back(i);
  }
  return kept;
}

void ShuffleState::load_state(const StateReader& reader) {
  enabled_ = reader.read<bool>("enabled");
  pending_seed_ = reader.read<std::optional<std::uint64_t>>("pending_seed");
  draining_ = reader.read<bool>("draining");
  rng_ = reader.read<PythonRandom>("rng");
}

void ShuffleState::loaded_buffer(std::size_t buffered, const DataPipe& node) {
  if (buffered > buffer_size_) {
    DPIPE_THROW(StateError, "{}: the saved buffer holds {} elements, more than buffer_size {}", node.label(), buffered,
                buffer_size_);
  }
  if (draining_) drain_.assign(buffered);
}

}  // namespace dpipe::detail
