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
  writer.write(generation_ != 0);
  for (const auto child : child_generation_) writer.write(child == generation_);
}

void SharedBuffer::load_generations(StateReader& reader) {
  generation_ = reader.read<bool>() ? 1 : 0;
  for (auto& child : child_generation_) child = reader.read<bool>() ? generation_ : 0;
}

}  // namespace dpipe::detail
