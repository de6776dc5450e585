#pragma once
/// \file
/// `prefetch(buffer_size)` (torchdata's Prefetcher): a background thread reads up to `buffer_size`
/// elements ahead. Exceptions from upstream reach the consumer at their position. The thread stops
/// and is joined when the consumer reaches the end (or the exception), on a new iteration, on
/// stop_background() and on destruction; it never polls (it blocks on condition variables).
/// Checkpoint state: the elements read ahead (saving requires the thread to be stopped, which
/// graph::save_state does).
///
/// InProcessReadingService appends one to a loader's graph with ops::AppendPrefetch
/// (<dpipe/core/root_ops.hpp>), which DataLoader2<T> registers for its element type.

#include <algorithm>
#include <cstddef>
#include <memory>
#include <optional>
#include <ranges>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <dpipe/core/detail/buffered_elements.hpp>
#include <dpipe/core/iter_datapipe.hpp>
#include <dpipe/core/iter_pipe.hpp>
#include <dpipe/core/typed_op.hpp>
#include <dpipe/iter/detail/prefetch_engine.hpp>

namespace dpipe::iter {

/// Thread-safety: the consumer side (next, pull, reset, background control, state) is used by one
/// thread; the node's thread alone touches the upstream graph while it runs.
template <class T>
class Prefetcher final : public IterDataPipe<T> {
 public:
  static constexpr std::string_view kName = "prefetch";

  Prefetcher(const IterPipe<T>& source, std::size_t buffer_size)
      : IterDataPipe<T>(std::string(kName)), source_(source.ptr()), buffer_size_(buffer_size) {
    if (buffer_size == 0) DPIPE_THROW(InvalidArgument, "'buffer_size' is required to be a positive integer.");
  }

  /// Copies the configuration only; the copy has no thread and nothing buffered.
  Prefetcher(const Prefetcher& other)
      : IterDataPipe<T>(other), source_(other.source_), buffer_size_(other.buffer_size_) {}

  void for_each_input(const InputVisitor& visit) override { visit(source_); }
  [[nodiscard]] DataPipePtr clone_self() const override { return std::make_shared<Prefetcher>(*this); }

  [[nodiscard]] std::size_t buffer_size() const noexcept { return buffer_size_; }

  /// Stops the thread after its current read; what it read stays buffered.
  void stop_background() override {
    if (engine_) engine_->stop();
  }
  /// Restarts the thread if the source is not exhausted.
  void start_background() override {
    if (engine_) engine_->start();
  }

  [[nodiscard]] bool save_state(StateWriter& writer) const override {
    detail::require_stopped(engine_ && engine_->running(), *this);
    writer.write("finished", engine_ && engine_->finished());
    std::vector<const T*> values;
    bool ended = false;
    if (engine_) {
      engine_->for_each_held([&](const detail::PrefetchChunk& held, std::size_t from) {
        const auto& chunk = static_cast<const Chunk&>(held);
        if (chunk.error) {
          DPIPE_THROW(StateError, "{} holds a pending exception; a failed pipeline cannot be checkpointed",
                      this->label());
        }
        for (std::size_t i = from; i < chunk.values.size(); ++i) values.push_back(&chunk.values[i]);
        ended = ended || chunk.last;
      });
    }
    detail::write_elements<T>(writer, "read_ahead", *this,
                              std::views::transform(values, [](const T* value) -> const T& { return *value; }));
    writer.write("ended", ended);
    return true;
  }

  void load_state(const StateReader& reader) override {
    const bool finished = reader.read<bool>("finished");
    auto chunk = std::make_unique<Chunk>();
    chunk->values = detail::read_elements<T>(reader, "read_ahead", *this);
    chunk->last = reader.read<bool>("ended");
    if (chunk->values.size() > buffer_size_) {
      DPIPE_THROW(StateError, "{}: the saved buffer exceeds buffer_size {}", this->label(), buffer_size_);
    }
    chunk->count = chunk->values.size();
    const bool ended = chunk->last;
    engine().stop();
    engine().restart(std::move(chunk), ended, finished);
  }

 protected:
  void reset_impl() override {
    engine().stop();
    engine().restart(nullptr, false, false);
    source_.reset();
    engine().start();
  }

  std::optional<T> next_impl() override {
    auto* chunk = static_cast<Chunk*>(engine().current());
    if (chunk == nullptr) return std::nullopt;
    return std::optional<T>(std::in_place, std::move(chunk->values[engine().take(1)]));
  }

  std::size_t pull_impl(std::vector<T>& out, std::size_t n) override {
    std::size_t produced = 0;
    while (produced < n) {
      auto* chunk = static_cast<Chunk*>(engine().current());
      if (chunk == nullptr) break;
      const std::size_t count = std::min(n - produced, engine().available());
      const auto first = chunk->values.begin() + static_cast<std::ptrdiff_t>(engine().take(count));
      out.insert(out.end(), std::make_move_iterator(first),
                 std::make_move_iterator(first + static_cast<std::ptrdiff_t>(count)));
      produced += count;
    }
    return produced;
  }

  [[nodiscard]] std::optional<std::size_t> length_impl() const override { return source_.length(); }

 private:
  struct Chunk final : detail::PrefetchChunk {
    std::vector<T> values;
  };

  static constexpr std::size_t kMaxChunk = 256;

  /// The engine, made on first use; its thread reads chunks of up to half the buffer (the source
  /// ends or fails on a short or failed chunk, whose elements still go first).
  detail::PrefetchEngine& engine() {
    if (!engine_) {
      engine_ = std::make_unique<detail::PrefetchEngine>(
          buffer_size_, std::clamp<std::size_t>(buffer_size_ / 2, 1, kMaxChunk),
          [this](std::size_t max) -> std::unique_ptr<detail::PrefetchChunk> {
            auto chunk = std::make_unique<Chunk>();
            try {
              chunk->last = source_.pull(chunk->values, max) < max;
            } catch (...) {
              chunk->error = std::current_exception();
              chunk->last = true;
            }
            chunk->count = chunk->values.size();
            return chunk;
          });
    }
    return *engine_;
  }

  Input<T> source_;
  std::size_t buffer_size_;
  std::unique_ptr<detail::PrefetchEngine> engine_;
};

}  // namespace dpipe::iter

namespace dpipe {

template <class T>
IterPipe<T> IterPipe<T>::prefetch(std::size_t buffer_size) const {
  return make_iter<iter::Prefetcher<T>>(*this, buffer_size);
}

}  // namespace dpipe

namespace dpipe::iter {

/// `src | iter::prefetch(buffer_size)`.
[[nodiscard]] inline auto prefetch(std::size_t buffer_size = 10) {
  return PipeAdaptor{[=](const auto& source) { return source.prefetch(buffer_size); }};
}

}  // namespace dpipe::iter
