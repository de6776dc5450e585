// SharedBuffer: torchdata's _ChildDataPipe generation rules.

#include <algorithm>

#include <dpipe/core/logging.hpp>
#include <dpipe/iter/detail/shared_buffer.hpp>

namespace dpipe::detail {

SharedBuffer::SharedBuffer(std::string name, std::size_t num_children)
    : DataPipe(std::move(name)), child_generation_(num_children, 0) {}

void SharedBuffer::start_child(std::size_t child) {
  if (generation_ == 0) {
    generation_ = 1;
    restart();
  } else if (child_generation_[child] == generation_) {
    ++generation_;
    if (!all_exhausted()) {
      log_warning(
          "Some child DataPipes are not exhausted when __iter__ is called. We are resetting the "
          "buffer and each child DataPipe will read from the start again. ({})",
          label());
    }
    restart();
  }
  child_generation_[child] = generation_;
}

void SharedBuffer::check_child(std::size_t child) const {
  if (child_generation_[child] != generation_) {
    DPIPE_THROW(UsageError,
                "This iterator has been invalidated, because a new iterator has been created from "
                "one of the ChildDataPipes of {}.\nFor feedback regarding this single iterator per "
                "IterDataPipe constraint, feel free to comment on this issue: "
                "https://github.com/pytorch/data/issues/45.",
                label());
  }
}

void SharedBuffer::save_generations(StateWriter& writer) const {
  writer.write("started", generation_ != 0);
  std::vector<bool> joined;
  for (const auto child : child_generation_) joined.push_back(child == generation_);
  writer.write("children_started", joined);
}

void SharedBuffer::load_generations(const StateReader& reader) {
  generation_ = reader.read<bool>("started") ? 1 : 0;
  const auto joined = reader.read<std::vector<bool>>("children_started");
  if (joined.size() != child_generation_.size()) {
    DPIPE_THROW(StateError, "{}: the state is for {} children, this node has {}", label(), joined.size(),
                child_generation_.size());
  }
  for (std::size_t i = 0; i < joined.size(); ++i) child_generation_[i] = joined[i] ? generation_ : 0;
}

}  // namespace dpipe::detail
