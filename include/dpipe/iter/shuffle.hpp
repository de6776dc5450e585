#pragma once
/// \file
/// `shuffle(buffer_size)` (torchdata's Shuffler): torchdata's buffer algorithm over CPython's
/// random.Random, so a pipeline seeded like torchdata's yields the same order. Each iteration
/// uses the seed given by set_seed() (the loader does this every epoch), or one from the OS
/// entropy source; set_shuffle(false) makes it a pass-through. Checkpoint state: the buffer and
/// the generator.

#include <memory>
#include <optional>
#include <ranges>
#include <utility>
#include <vector>

#include <dpipe/core/capabilities.hpp>
#include <dpipe/core/detail/buffered_elements.hpp>
#include <dpipe/core/detail/iteration_local.hpp>
#include <dpipe/core/iter_datapipe.hpp>
#include <dpipe/core/iter_pipe.hpp>
#include <dpipe/core/typed_op.hpp>
#include <dpipe/iter/detail/shuffle_state.hpp>

namespace dpipe::iter {

template <class T>
class Shuffler final : public IterDataPipe<T>, public ShufflingDataPipe {
 public:
  static constexpr std::string_view kName = "shuffle";

  Shuffler(const IterPipe<T>& source, std::size_t buffer_size)
      : IterDataPipe<T>(std::string(kName)), source_(source.ptr()), state_(buffer_size) {}

  void for_each_input(const InputVisitor& visit) override { visit(source_); }
  [[nodiscard]] DataPipePtr clone_self() const override { return std::make_shared<Shuffler>(*this); }
  [[nodiscard]] NodeSettings settings() const override {
    return {{"buffer_size", std::to_string(state_.buffer_size())}};
  }

  void set_seed(std::uint64_t seed) override { state_.set_seed(seed); }
  void set_shuffle(bool enabled) override { state_.set_enabled(enabled); }
  [[nodiscard]] bool shuffle_enabled() const noexcept { return state_.enabled(); }
  /// The seed the next iteration will use, if one was set.
  [[nodiscard]] std::optional<std::uint64_t> pending_seed() const noexcept { return state_.pending_seed(); }
  [[nodiscard]] std::size_t buffer_size() const noexcept { return state_.buffer_size(); }

  [[nodiscard]] bool save_state(StateWriter& writer) const override {
    const std::vector<std::size_t> kept = state_.save_state(writer, buffer_->size());
    detail::write_elements<T>(writer, "buffer", *this,
                              std::views::transform(kept, [this](std::size_t i) -> const T& { return (*buffer_)[i]; }));
    return true;
  }
  void load_state(const StateReader& reader) override {
    state_.load_state(reader);
    buffer_ = detail::read_elements<T>(reader, "buffer", *this);
    state_.loaded_buffer(buffer_->size(), *this);
  }

 protected:
  void reset_impl() override {
    buffer_->clear();
    state_.reset();
    source_.reset();
  }

  std::optional<T> next_impl() override {
    if (!state_.enabled()) return source_.next();
    while (!state_.draining()) {
      auto element = source_.next();
      if (!element) {
        state_.start_draining(buffer_->size());
        break;
      }
      if (buffer_->size() == state_.buffer_size()) return exchange(std::move(*element));
      buffer_->push_back(std::move(*element));
    }
    return drain_one();
  }

  std::size_t pull_impl(std::vector<T>& out, std::size_t n) override {
    if (!state_.enabled()) return source_.pull(out, n);
    std::size_t produced = 0;
    while (produced < n) {
      if (state_.draining()) {
        auto element = drain_one();
        if (!element) break;
        out.push_back(std::move(*element));
        ++produced;
      } else if (buffer_->size() < state_.buffer_size()) {
        // Filling: these reads produce no output, so they cannot read ahead of it.
        const std::size_t wanted = state_.buffer_size() - buffer_->size();
        if (source_.pull(*buffer_, wanted) < wanted) state_.start_draining(buffer_->size());
      } else {
        // Full: each element read yields exactly one element, so read only what is still wanted.
        staging_->clear();
        const std::size_t wanted = n - produced;
        const std::size_t got = source_.pull(*staging_, wanted);
        for (auto& element : *staging_) out.push_back(exchange(std::move(element)));
        produced += got;
        staging_->clear();
        if (got < wanted) state_.start_draining(buffer_->size());
      }
    }
    return produced;
  }

  [[nodiscard]] std::optional<std::size_t> length_impl() const override { return source_.length(); }

 private:
  T exchange(T incoming) {
    const std::size_t index = state_.exchange_position(buffer_->size());
    T outgoing = std::move((*buffer_)[index]);
    (*buffer_)[index] = std::move(incoming);
    return outgoing;
  }

  std::optional<T> drain_one() {
    const std::optional<std::size_t> position = state_.drain_position();
    if (!position) {
      buffer_->clear();
      return std::nullopt;
    }
    return std::optional<T>(std::in_place, std::move((*buffer_)[*position]));
  }

  Input<T> source_;
  detail::ShuffleState state_;
  detail::IterationLocal<std::vector<T>> buffer_;
  detail::IterationLocal<std::vector<T>> staging_;
};

}  // namespace dpipe::iter

namespace dpipe {

template <class T>
IterPipe<T> IterPipe<T>::shuffle(std::size_t buffer_size) const {
  return make_iter<iter::Shuffler<T>>(*this, buffer_size);
}

}  // namespace dpipe

namespace dpipe::iter {

/// `src | iter::shuffle(buffer_size)`.
[[nodiscard]] inline auto shuffle(std::size_t buffer_size = 10000) {
  return PipeAdaptor{[=](const auto& source) { return source.shuffle(buffer_size); }};
}

}  // namespace dpipe::iter
