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
#include <dpipe/iter/detail/drain_order.hpp>
#include <dpipe/random/python_random.hpp>
#include <dpipe/random/seed_generator.hpp>

namespace dpipe::iter {

template <class T>
class Shuffler final : public IterDataPipe<T>, public ShufflingDataPipe {
 public:
  static constexpr std::string_view kName = "shuffle";

  Shuffler(const IterPipe<T>& source, std::size_t buffer_size)
      : IterDataPipe<T>(std::string(kName)), source_(source.ptr()), buffer_size_(buffer_size) {
    if (buffer_size == 0) DPIPE_THROW(InvalidArgument, "buffer_size should be larger than 0");
  }

  void for_each_input(const InputVisitor& visit) override { visit(source_); }
  [[nodiscard]] DataPipePtr clone_self() const override { return std::make_shared<Shuffler>(*this); }
  [[nodiscard]] NodeSettings settings() const override { return {{"buffer_size", std::to_string(buffer_size_)}}; }

  void set_seed(std::uint64_t seed) override { pending_seed_ = seed; }
  void set_shuffle(bool enabled) override { enabled_ = enabled; }
  [[nodiscard]] bool shuffle_enabled() const noexcept { return enabled_; }
  /// The seed the next iteration will use, if one was set.
  [[nodiscard]] std::optional<std::uint64_t> pending_seed() const noexcept { return pending_seed_; }
  [[nodiscard]] std::size_t buffer_size() const noexcept { return buffer_size_; }

  [[nodiscard]] bool save_state(StateWriter& writer) const override {
    writer.write("enabled", enabled_);
    writer.write("pending_seed", pending_seed_);
    writer.write("draining", draining_);
    writer.write("rng", rng_);
    // The buffer in its current order (without the positions already drained).
    std::vector<std::size_t> kept;
    for (std::size_t i = 0; i < buffer_->size(); ++i) {
      if (!draining_ || !drain_.taken(i)) kept.push_back(i);
    }
    detail::write_elements<T>(writer, "buffer", *this,
                              std::views::transform(kept, [this](std::size_t i) -> const T& { return (*buffer_)[i]; }));
    return true;
  }
  void load_state(const StateReader& reader) override {
    enabled_ = reader.read<bool>("enabled");
    pending_seed_ = reader.read<std::optional<std::uint64_t>>("pending_seed");
    draining_ = reader.read<bool>("draining");
    rng_ = reader.read<PythonRandom>("rng");
    buffer_ = detail::read_elements<T>(reader, "buffer", *this);
    if (buffer_->size() > buffer_size_) {
      DPIPE_THROW(StateError, "{}: the saved buffer holds {} elements, more than buffer_size {}", this->label(),
                  buffer_->size(), buffer_size_);
    }
    if (draining_) drain_.assign(buffer_->size());
  }

 protected:
  void reset_impl() override {
    buffer_->clear();
    draining_ = false;
    drain_.assign(0);
    if (enabled_) {
      rng_.seed(pending_seed_ ? *pending_seed_ : entropy_seed());
      pending_seed_.reset();
    }
    source_.reset();
  }

  std::optional<T> next_impl() override {
    if (!enabled_) return source_.next();
    while (!draining_) {
      auto element = source_.next();
      if (!element) {
        start_draining();
        break;
      }
      if (buffer_->size() == buffer_size_) return exchange(std::move(*element));
      buffer_->push_back(std::move(*element));
    }
    return drain_one();
  }

  std::size_t pull_impl(std::vector<T>& out, std::size_t n) override {
    if (!enabled_) return source_.pull(out, n);
    std::size_t produced = 0;
    while (produced < n) {
      if (draining_) {
        auto element = drain_one();
        if (!element) break;
        out.push_back(std::move(*element));
        ++produced;
      } else if (buffer_->size() < buffer_size_) {
        // Filling: these reads produce no output, so they cannot read ahead of it.
        const std::size_t wanted = buffer_size_ - buffer_->size();
        if (source_.pull(*buffer_, wanted) < wanted) start_draining();
      } else {
        // Full: each element read yields exactly one element, so read only what is still wanted.
        staging_->clear();
        const std::size_t wanted = n - produced;
        const std::size_t got = source_.pull(*staging_, wanted);
        for (auto& element : *staging_) out.push_back(exchange(std::move(element)));
        produced += got;
        staging_->clear();
        if (got < wanted) start_draining();
      }
    }
    return produced;
  }

  [[nodiscard]] std::optional<std::size_t> length_impl() const override { return source_.length(); }

 private:
  T exchange(T incoming) {
    const auto index = static_cast<std::size_t>(rng_.randint(0, static_cast<std::int64_t>(buffer_->size()) - 1));
    T outgoing = std::move((*buffer_)[index]);
    (*buffer_)[index] = std::move(incoming);
    return outgoing;
  }

  void start_draining() {
    draining_ = true;
    drain_.assign(buffer_->size());
  }

  /// torchdata's `buffer.pop(randint(0, len - 1))`, without moving the elements.
  std::optional<T> drain_one() {
    if (drain_.remaining() == 0) {
      buffer_->clear();
      return std::nullopt;
    }
    const auto k = static_cast<std::size_t>(rng_.randint(0, static_cast<std::int64_t>(drain_.remaining()) - 1));
    return std::optional<T>(std::in_place, std::move((*buffer_)[drain_.take(k)]));
  }

  Input<T> source_;
  std::size_t buffer_size_;
  bool enabled_ = true;
  std::optional<std::uint64_t> pending_seed_;
  PythonRandom rng_;
  detail::IterationLocal<std::vector<T>> buffer_;
  bool draining_ = false;     // the source ended: the buffer is being drained
  detail::DrainOrder drain_;  // while draining, which buffer positions are left
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
