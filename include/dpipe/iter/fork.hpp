#pragma once
/// \file
/// `fork(n, buffer_size)` (torchdata's Forker): n children that each yield every element. A child
/// may run at most `buffer_size` elements ahead of the slowest one; beyond that the read throws
/// BufferOverflowError instead of growing the buffer. Checkpoint state: the buffered elements and
/// each child's position.

#include <algorithm>
#include <deque>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include <dpipe/core/detail/buffered_elements.hpp>
#include <dpipe/core/iter_datapipe.hpp>
#include <dpipe/core/iter_pipe.hpp>
#include <dpipe/iter/detail/shared_buffer.hpp>

namespace dpipe::iter {

/// The container behind fork() children.

template <class T>
class Forker final : public detail::SharedBuffer {
 public:
  static constexpr std::string_view kName = "fork";
  /// The name of the Forker that unzip() makes (torchdata's UnZipper is a Forker).
  static constexpr std::string_view kUnzipName = "unzip";

  Forker(const IterPipe<T>& source, std::size_t num_instances, std::size_t buffer_size,
         std::string name = std::string(kName))
      : SharedBuffer(std::move(name), num_instances),
        source_(source.ptr()),
        buffer_size_(buffer_size),
        positions_(num_instances, 0) {}

  [[nodiscard]] std::string element_type() const override { return type_name<T>(); }
  void for_each_input(const InputVisitor& visit) override { visit(source_); }
  [[nodiscard]] DataPipePtr clone_self() const override { return std::make_shared<Forker>(*this); }
  [[nodiscard]] NodeSettings settings() const override {
    return {{"num_instances", std::to_string(positions_.size())}, {"buffer_size", std::to_string(buffer_size_)}};
  }

  /// The next element for child `child`.
  std::optional<T> next_for(std::size_t child) {
    check_child(child);
    const std::size_t position = positions_[child];
    if (end_ && position >= *end_) return std::nullopt;
    if (position < base_ + buffer_.size()) {
      ++positions_[child];
      if (position == base_ && std::ranges::count(positions_, base_) == 0) {
        // This child was the last to need the oldest element: hand it over instead of copying.
        std::optional<T> element(std::in_place, std::move(buffer_.front()));
        buffer_.pop_front();
        ++base_;
        return element;
      }
      return buffer_[position - base_];
    }
    const std::size_t slowest = std::ranges::min(positions_);
    if (position + 1 - slowest > buffer_size_) {
      DPIPE_THROW(BufferOverflowError,
                  "ForkerIterDataPipe buffer overflow,buffer size {} is insufficient. ({}: child {} "
                  "would run {} elements ahead of the slowest child; raise buffer_size or read the "
                  "children more evenly)",
                  buffer_size_, label(), child, position + 1 - slowest);
    }
    auto element = source_.next();
    if (!element) {
      end_ = position;
      return std::nullopt;
    }
    ++positions_[child];
    buffer_.push_back(*element);
    return element;
  }

  [[nodiscard]] std::optional<std::size_t> child_length(std::size_t /*child*/) const { return source_.length(); }

  [[nodiscard]] bool save_state(StateWriter& writer) const override {
    save_generations(writer);
    writer.write("base", std::uint64_t{base_});
    writer.write("positions", std::vector<std::uint64_t>(positions_.begin(), positions_.end()));
    writer.write("end", end_ ? std::optional<std::uint64_t>(*end_) : std::nullopt);
    detail::write_elements<T>(writer, "buffer", *this, buffer_);
    return true;
  }

  void load_state(const StateReader& reader) override {
    load_generations(reader);
    base_ = reader.read<std::uint64_t>("base");
    const auto positions = reader.read<std::vector<std::uint64_t>>("positions");
    if (positions.size() != positions_.size())
      DPIPE_THROW(StateError, "{}: the state is for another number of children", label());
    std::copy(positions.begin(), positions.end(), positions_.begin());
    const auto end = reader.read<std::optional<std::uint64_t>>("end");
    end_ = end ? std::optional<std::size_t>(*end) : std::nullopt;
    auto elements = detail::read_elements<T>(reader, "buffer", *this);
    buffer_.assign(std::make_move_iterator(elements.begin()), std::make_move_iterator(elements.end()));
    const std::size_t fetched = base_ + buffer_.size();
    for (const auto position : positions_) {
      if (position < base_ || position > fetched)
        DPIPE_THROW(StateError, "{}: a saved child position is outside the buffer", label());
    }
    if (end_ && *end_ != fetched) DPIPE_THROW(StateError, "{}: the saved end does not match the buffer", label());
  }

 protected:
  void restart() override {
    buffer_.clear();
    base_ = 0;
    std::ranges::fill(positions_, 0);
    end_.reset();
    source_.reset();
  }

  [[nodiscard]] bool all_exhausted() const override {
    return end_ && std::ranges::all_of(positions_, [&](std::size_t p) { return p == *end_; });
  }

 private:
  Input<T> source_;
  std::size_t buffer_size_;
  std::deque<T> buffer_;                // elements [base_, base_ + size) read from the source
  std::size_t base_ = 0;                // source index of buffer_.front()
  std::vector<std::size_t> positions_;  // source index of each child's next element
  std::optional<std::size_t> end_;      // the source's length, once it ended
};

}  // namespace dpipe::iter

namespace dpipe {

template <class T>
template <class U>
requires copyable_element<U> std::vector<IterPipe<T>> IterPipe<T>::fork(std::size_t n, std::size_t buffer_size)
const {
  detail::require_instances(n);
  if (n == 1) return {*this};
  return detail::make_children<T>(std::make_shared<iter::Forker<T>>(*this, n, buffer_size));
}

}  // namespace dpipe

namespace dpipe::iter {

/// `src | iter::fork(n, buffer_size)`.
[[nodiscard]] inline auto fork(std::size_t n, std::size_t buffer_size = 1000) {
  return PipeAdaptor{[=](const auto& source) { return source.fork(n, buffer_size); }};
}

}  // namespace dpipe::iter
