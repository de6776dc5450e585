#pragma once
/// \file
/// `threadpool_map(fn, threads, max_in_flight)` (torchdata's ThreadPoolMapper): applies fn on a
/// pool of threads, output in input order. At most `max_in_flight` elements are taken from the
/// source and not yet handed out, so memory stays bounded. An exception from fn reaches the
/// consumer at that element's position as dpipe::ElementError, which names the element's index and
/// the original exception (nested, see std::rethrow_if_nested). Each thread calls its own copy of
/// fn. The source is read on the consumer's thread; the pool only runs fn.
///
/// The threads start on first use and stop on pause() and on destruction; a new iteration or a
/// pause waits for the elements in flight. Checkpoint state: the results computed and not yet
/// handed out (saving pauses the node first, which waits for the elements in flight).

#include <algorithm>
#include <cstdint>
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
#include <dpipe/core/iter_pipe.hpp>
#include <dpipe/core/state.hpp>
#include <dpipe/detail/concurrentqueue.hpp>

namespace dpipe {
namespace detail {
/// Throws ElementError for `error`, raised by `node`'s function on element `index`.
[[noreturn]] void throw_element_error(const DataPipe& node, std::uint64_t index, std::exception_ptr error);
}  // namespace detail

namespace iter {

template <class T, map_fn<T> F>
class ThreadPoolMapper final : public IterDataPipe<map_result_t<F, T>> {
  using U = map_result_t<F, T>;

 public:
  static constexpr std::string_view kName = "threadpool_map";

  ThreadPoolMapper(const IterPipe<T>& source, F fn, std::size_t threads, std::size_t max_in_flight)
      : IterDataPipe<U>(std::string(kName)),
        source_(source.ptr()),
        fn_(std::move(fn)),
        threads_(threads),
        max_in_flight_(max_in_flight) {
    if (threads == 0) DPIPE_THROW(InvalidArgument, "'max_workers' is required to be a positive integer.");
    if (max_in_flight == 0) DPIPE_THROW(InvalidArgument, "'scheduled_tasks' is required to be a positive integer.");
  }

  /// Copies the configuration only: no threads, nothing in flight.
  ThreadPoolMapper(const ThreadPoolMapper& other)
      : IterDataPipe<U>(other),
        source_(other.source_),
        fn_(other.fn_),
        threads_(other.threads_),
        max_in_flight_(other.max_in_flight_) {}

  ~ThreadPoolMapper() override { stop_threads(); }

  void for_each_input(const InputVisitor& visit) override { visit(source_); }
  [[nodiscard]] DataPipePtr clone_self() const override { return std::make_shared<ThreadPoolMapper>(*this); }

  /// Waits for the elements in flight and stops the threads; the results stay.
  void pause() override {
    settle();
    stop_threads();
  }

  [[nodiscard]] bool save_state(StateWriter& writer) const override {
    detail::require_paused(in_flight_ != 0 || !workers_.empty(), *this);
    writer.write(next_index_);
    writer.write(source_ended_);
    detail::write_outcome_values<U>(writer, *this, ready_,
                                    [](const Result& result) -> const detail::Outcome<U>& { return result.outcome; });
    return true;
  }

  void load_state(StateReader& reader) override {
    pause();
    next_index_ = reader.read<std::uint64_t>();
    source_ended_ = reader.read<bool>();
    auto values = detail::read_elements<U>(reader, *this);
    if (values.size() > max_in_flight_) {
      DPIPE_THROW(StateError, "{}: {} saved results exceed max_in_flight {}", this->label(), values.size(),
                  max_in_flight_);
    }
    if (values.size() > next_index_)
      DPIPE_THROW(StateError, "{}: more saved results than elements read", this->label());
    ready_.clear();
    std::uint64_t index = next_index_ - values.size();
    for (auto& value : values) ready_.push_back(Result{index++, {std::move(value), nullptr}});
  }

 protected:
  void reset_impl() override {
    settle();
    ready_.clear();
    next_index_ = 0;
    source_ended_ = false;
    source_.reset();
  }

  std::optional<U> next_impl() override {
    submit();
    if (ready_.empty() && in_flight_ == 0) return std::nullopt;
    if (ready_.empty()) collect_oldest();
    Result result = std::move(ready_.front());
    ready_.pop_front();
    if (result.outcome.error) detail::throw_element_error(*this, result.index, result.outcome.error);
    return std::move(result.outcome.value);
  }

  [[nodiscard]] std::optional<std::size_t> length_impl() const override { return source_.length(); }

 private:
  /// One element on its way through the pool.
  struct Task {
    std::uint64_t index = 0;
    std::optional<T> input;
    std::optional<U> output;
    std::exception_ptr error;
    moodycamel::LightweightSemaphore done;
  };

  /// A result in order, not yet handed out.
  struct Result {
    std::uint64_t index = 0;
    detail::Outcome<U> outcome;
  };

  /// Reads elements from the source and hands them to the pool while there is room.
  void submit() {
    while (!source_ended_ && in_flight_ + ready_.size() < max_in_flight_) {
      auto element = source_.next();
      if (!element) {
        source_ended_ = true;
        break;
      }
      start_threads();
      auto task = std::make_unique<Task>();
      task->index = next_index_++;
      task->input = std::move(element);
      tasks_.enqueue(task.get());
      flight_.push_back(std::move(task));
      ++in_flight_;
    }
  }

  /// Waits for the oldest element in flight and moves its result to ready_.
  void collect_oldest() {
    std::unique_ptr<Task> task = std::move(flight_.front());
    flight_.pop_front();
    --in_flight_;
    task->done.wait();
    ready_.push_back(Result{task->index, {std::move(task->output), task->error}});
  }

  /// Waits for every element in flight (their results join ready_).
  void settle() {
    while (in_flight_ != 0) collect_oldest();
  }

  void start_threads() {
    if (!workers_.empty()) return;
    for (std::size_t i = 0; i < threads_; ++i) {
      workers_.emplace_back([this, fn = fn_]() mutable {
        while (true) {
          Task* task = nullptr;
          tasks_.wait_dequeue(task);
          if (task == nullptr) return;  // stop
          try {
            task->output.emplace(fn(std::move(*task->input)));
          } catch (...) {
            task->error = std::current_exception();
          }
          task->input.reset();
          task->done.signal();
        }
      });
    }
  }

  /// Stops and joins the threads. REQUIRES: nothing in flight.
  void stop_threads() {
    settle();
    for (std::size_t i = 0; i < workers_.size(); ++i) tasks_.enqueue(nullptr);
    for (auto& worker : workers_) worker.join();
    workers_.clear();
  }

  Input<T> source_;
  F fn_;
  std::size_t threads_;
  std::size_t max_in_flight_;
  std::vector<std::thread> workers_;
  moodycamel::BlockingConcurrentQueue<Task*> tasks_;
  std::deque<std::unique_ptr<Task>> flight_;  // in input order
  std::size_t in_flight_ = 0;
  std::deque<Result> ready_;  // in input order
  std::uint64_t next_index_ = 0;
  bool source_ended_ = false;
};

}  // namespace iter

template <class T>
template <map_fn<T> F>
IterPipe<map_result_t<F, T>> IterPipe<T>::threadpool_map(F fn, std::optional<std::size_t> threads,
                                                         std::optional<std::size_t> max_in_flight) const {
  const std::size_t pool = threads.value_or(std::max<std::size_t>(1, std::thread::hardware_concurrency()));
  return make_iter<iter::ThreadPoolMapper<T, F>>(*this, std::move(fn), pool, max_in_flight.value_or(4 * pool));
}

namespace iter {

/// `src | iter::threadpool_map(fn, threads, max_in_flight)`.
template <class F>
[[nodiscard]] auto threadpool_map(F fn, std::optional<std::size_t> threads = std::nullopt,
                                  std::optional<std::size_t> max_in_flight = std::nullopt) {
  return PipeAdaptor{[=](const auto& source) { return source.threadpool_map(fn, threads, max_in_flight); }};
}

}  // namespace iter
}  // namespace dpipe
