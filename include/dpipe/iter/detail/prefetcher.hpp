#pragma once
/// \file
/// Prefetcher<T>, the node behind `prefetch(buffer_size)` (see <dpipe/iter/prefetch.hpp>), and
/// IterDataPipe<T>::make_prefetch. It depends only on the core, because iter_datapipe.hpp includes
/// it: every instantiation of an iter node needs make_prefetch's definition.

#include <algorithm>
#include <atomic>
#include <deque>
#include <exception>
#include <memory>
#include <optional>
#include <ranges>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <dpipe/core/iter_datapipe.hpp>
#include <dpipe/core/state.hpp>
#include <dpipe/detail/concurrentqueue.hpp>

namespace dpipe::iter {

/// Thread-safety: the consumer side (next, pull, reset, pause, resume, state) is used by one
/// thread; the node owns one producer thread, which alone touches the upstream graph while it runs.

template <class T>
class Prefetcher final : public IterDataPipe<T> {
 public:
  static constexpr std::string_view kName = "prefetch";

  Prefetcher(std::shared_ptr<IterDataPipe<T>> source, std::size_t buffer_size)
      : IterDataPipe<T>(std::string(kName)), source_(std::move(source)), buffer_size_(buffer_size) {
    if (buffer_size == 0) DPIPE_THROW(InvalidArgument, "'buffer_size' is required to be a positive integer.");
  }

  /// Copies the configuration only; the copy has no thread and nothing buffered.
  Prefetcher(const Prefetcher& other)
      : IterDataPipe<T>(other), source_(other.source_), buffer_size_(other.buffer_size_) {}

  ~Prefetcher() override { stop(); }

  void for_each_input(const InputVisitor& visit) override { visit(source_); }
  [[nodiscard]] DataPipePtr clone_self() const override { return std::make_shared<Prefetcher>(*this); }

  /// Stops the thread after its current read; what it read stays buffered.
  void pause() override { stop(); }
  /// Restarts the thread if the source is not exhausted.
  void resume() override { start(); }

  [[nodiscard]] bool save_state(StateWriter& writer) const override {
    detail::require_paused(thread_.joinable(), *this);
    writer.write(finished_);
    // The elements read ahead, then whether the end of the source was among them.
    const bool ended =
        detail::write_outcome_values<T>(writer, *this, stash_, [](const Item& item) -> const Item& { return item; });
    writer.write(ended);
    return true;
  }

  void load_state(StateReader& reader) override {
    stop();
    finished_ = reader.read<bool>();
    auto values = detail::read_elements<T>(reader, *this);
    const bool ended = reader.read<bool>();
    if (values.size() + (ended ? 1 : 0) > buffer_size_) {
      DPIPE_THROW(StateError, "{}: the saved buffer exceeds buffer_size {}", this->label(), buffer_size_);
    }
    stash_.clear();
    for (auto& value : values) stash_.push_back(Item{std::move(value), nullptr});
    if (ended) stash_.push_back(Item{});
    channel_ = std::make_unique<Channel>(free_slots(), ended);
    unreleased_ = 0;
  }

 protected:
  void reset_impl() override {
    stop();
    stash_.clear();
    finished_ = false;
    channel_ = std::make_unique<Channel>(buffer_size_, false);
    unreleased_ = 0;
    source_.reset();
    start();
  }

  std::optional<T> next_impl() override {
    if (finished_ || !channel_) return std::nullopt;
    Item item = take_one();
    return accept(std::move(item));
  }

  std::size_t pull_impl(std::vector<T>& out, std::size_t n) override {
    std::size_t produced = 0;
    while (produced < n && !finished_ && channel_) {
      if (!stash_.empty()) {
        if (auto value = accept(take_one())) {
          out.push_back(std::move(*value));
          ++produced;
        }
        continue;
      }
      start();
      received_.resize(std::min(n - produced, kMaxChunk));
      std::size_t count = channel_->queue.try_dequeue_bulk(received_.begin(), received_.size());
      if (count == 0) {
        release(0, /*blocking=*/true);
        count = channel_->queue.wait_dequeue_bulk(received_.begin(), received_.size());
      }
      release(count, /*blocking=*/false);
      for (std::size_t i = 0; i < count; ++i) {
        if (auto value = accept(std::move(received_[i]))) {
          out.push_back(std::move(*value));
          ++produced;
        }
      }
      received_.clear();
    }
    return produced;
  }

  [[nodiscard]] std::optional<std::size_t> length_impl() const override { return source_.length(); }

 private:
  static constexpr std::size_t kMaxChunk = 256;

  /// An element, an exception, or (neither) the end of the source.
  using Item = detail::Outcome<T>;

  /// What the producer and the consumer share while the thread runs.
  struct Channel {
    Channel(std::size_t free_slots, bool done)
        : free(static_cast<moodycamel::LightweightSemaphore::ssize_t>(free_slots)), producer_done(done) {}
    moodycamel::BlockingConcurrentQueue<Item> queue;
    moodycamel::LightweightSemaphore free;  // slots the producer may fill
    std::atomic<bool> stop{false};
    std::atomic<bool> producer_done;
  };

  [[nodiscard]] std::size_t free_slots() const { return buffer_size_ - std::min(buffer_size_, stash_.size()); }

  /// Starts the producer unless it runs or has finished.
  void start() {
    if (!channel_ || thread_.joinable() || channel_->producer_done.load()) return;
    channel_->stop.store(false);
    thread_ = std::thread([this, channel = channel_.get()] { produce(*channel); });
  }

  /// Stops and joins the producer, then moves what it queued to the stash and rebuilds the channel
  /// so that its free-slot count is exact again.
  void stop() {
    if (!thread_.joinable()) return;
    channel_->stop.store(true);
    channel_->free.signal(1);  // wakes a producer waiting for a slot
    thread_.join();
    Item item;
    while (channel_->queue.try_dequeue(item)) stash_.push_back(std::move(item));
    const bool done = channel_->producer_done.load();
    channel_ = std::make_unique<Channel>(free_slots(), done);
    unreleased_ = 0;
  }

  /// The producer thread: fills free slots with chunks read from upstream.
  void produce(Channel& channel) {
    std::vector<T> chunk;
    std::vector<Item> items;
    while (true) {
      const auto slots = static_cast<std::size_t>(
          channel.free.waitMany(static_cast<moodycamel::LightweightSemaphore::ssize_t>(kMaxChunk)));
      if (channel.stop.load()) return;
      chunk.clear();
      std::exception_ptr error;
      try {
        source_.pull(chunk, slots);
      } catch (...) {
        error = std::current_exception();  // the elements pulled before it still go first
      }
      const bool finished = error || chunk.size() < slots;
      items.clear();
      for (auto& value : chunk) items.push_back(Item{std::move(value), nullptr});
      // The end (or the exception) takes one of the remaining slots. The exception is moved: the
      // consumer holds its only reference and frees it (no release races with its last read).
      if (finished) items.push_back(Item{std::nullopt, std::move(error)});
      channel.queue.enqueue_bulk(std::make_move_iterator(items.begin()), items.size());
      if (finished) {
        channel.producer_done.store(true);
        return;
      }
    }
  }

  /// The next item, from the stash first, else from the queue (starting the producer if needed).
  Item take_one() {
    Item item;
    if (!stash_.empty()) {
      item = std::move(stash_.front());
      stash_.pop_front();
    } else {
      start();
      if (!channel_->queue.try_dequeue(item)) {
        release(0, /*blocking=*/true);
        channel_->queue.wait_dequeue(item);
      }
    }
    release(1, /*blocking=*/false);
    return item;
  }

  /// Returns `count` consumed slots to the producer. Slots are handed back in batches of half the
  /// buffer, so that the producer wakes once per batch instead of once per element; everything
  /// held back is handed back before the consumer blocks, so neither side can wait for the other.
  void release(std::size_t count, bool blocking) {
    unreleased_ += count;
    if (unreleased_ == 0 || (!blocking && unreleased_ < std::max<std::size_t>(1, buffer_size_ / 2))) return;
    channel_->free.signal(static_cast<moodycamel::LightweightSemaphore::ssize_t>(unreleased_));
    unreleased_ = 0;
  }

  /// Turns an item into an element, the end (std::nullopt) or a rethrown exception.
  std::optional<T> accept(Item item) {
    if (item.value) return std::move(item.value);
    finished_ = true;
    if (item.error) std::rethrow_exception(item.error);
    return std::nullopt;
  }

  Input<T> source_;
  std::size_t buffer_size_;
  std::unique_ptr<Channel> channel_;
  std::thread thread_;
  std::deque<Item> stash_;  // items taken out of the queue by stop(), or restored; read first
  bool finished_ = false;   // the consumer has seen the end or an exception
  std::vector<Item> received_;
  std::size_t unreleased_ = 0;  // consumed slots not yet handed back to the producer
};

}  // namespace dpipe::iter

namespace dpipe {

template <class T>
DataPipePtr IterDataPipe<T>::make_prefetch(std::size_t buffer_size) {
  return std::make_shared<iter::Prefetcher<T>>(std::static_pointer_cast<IterDataPipe<T>>(shared_from_this()),
                                               buffer_size);
}

}  // namespace dpipe
