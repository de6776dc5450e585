#pragma once
/// \file
/// `threadpool_map(fn, threads, max_in_flight)` (torchdata's ThreadPoolMapper): applies fn on a
/// pool of threads, output in input order. At most `max_in_flight` elements are taken from the
/// source and not yet handed out, so memory stays bounded. An exception from fn reaches the
/// consumer at that element's position as dpipe::ElementError, which names the element's index and
/// the original exception (nested, see std::rethrow_if_nested); under OnError::skip() the element
/// is skipped there instead. Each thread calls its own copy of fn. The source is read on the
/// consumer's thread; the pool only runs fn.
///
/// The threads start on first use and stop on stop_background() and on destruction; a new
/// iteration or a stop waits for the elements in flight. Checkpoint state: the results computed
/// and not yet handed out (saving stops the node's threads first, which waits for the elements in
/// flight).

#include <algorithm>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <ranges>
#include <string>
#include <utility>
#include <vector>

#include <dpipe/core/detail/buffered_elements.hpp>
#include <dpipe/core/detail/element_skipper.hpp>
#include <dpipe/core/error_policy.hpp>
#include <dpipe/core/iter_datapipe.hpp>
#include <dpipe/core/iter_pipe.hpp>
#include <dpipe/core/typed_op.hpp>
#include <dpipe/iter/detail/thread_pool.hpp>

namespace dpipe {
namespace ops {
/// A threadpool_map node with the function and the input of a map node (a reading service may
/// parallelize the expensive maps of a graph it is given).
struct ToThreadPoolMap {
  using Function = DataPipePtr(const DataPipePtr& map_node, std::size_t threads, std::size_t max_in_flight);
  static constexpr std::string_view kOperation = "to_threadpool_map";
};
}  // namespace ops

namespace iter {

template <class T, map_fn<T> F>
class ThreadPoolMapper final : public IterDataPipe<map_result_t<F, T>> {
  using U = map_result_t<F, T>;

 public:
  static constexpr std::string_view kName = "threadpool_map";

  ThreadPoolMapper(const IterPipe<T>& source, F fn, std::size_t threads, std::size_t max_in_flight,
                   OnError on_error = OnError::raise())
      : IterDataPipe<U>(std::string(kName)),
        source_(source.ptr()),
        fn_(std::move(fn)),
        threads_(threads),
        max_in_flight_(max_in_flight),
        skipper_(on_error) {
    if (threads == 0) DPIPE_THROW(InvalidArgument, "'max_workers' is required to be a positive integer.");
    if (max_in_flight == 0) DPIPE_THROW(InvalidArgument, "'scheduled_tasks' is required to be a positive integer.");
  }

  /// Copies the configuration only: no threads, nothing in flight.
  ThreadPoolMapper(const ThreadPoolMapper& other)
      : IterDataPipe<U>(other),
        source_(other.source_),
        fn_(other.fn_),
        threads_(other.threads_),
        max_in_flight_(other.max_in_flight_),
        skipper_(other.skipper_.policy()) {}

  ~ThreadPoolMapper() override { stop_background(); }

  void for_each_input(const InputVisitor& visit) override { visit(source_); }
  [[nodiscard]] DataPipePtr clone_self() const override { return std::make_shared<ThreadPoolMapper>(*this); }

  /// Waits for the elements in flight and stops the threads; the results stay.
  void stop_background() override {
    settle();
    if (pool_) pool_->stop();
  }

  [[nodiscard]] bool save_state(StateWriter& writer) const override {
    detail::require_stopped(pool_ && pool_->running(), *this);
    writer.write("next_index", next_index_);
    writer.write("source_ended", source_ended_);
    std::vector<std::reference_wrapper<const U>> results;
    std::vector<std::uint64_t> failed;  // under OnError::skip: the indices fn threw on, and what it threw
    std::vector<std::string> failures;
    for (const auto& task : tasks_) {
      if (task->output) {
        results.emplace_back(*task->output);
        continue;
      }
      if (!skipper_.policy().skips()) {
        DPIPE_THROW(StateError, "{} holds a pending exception; a failed pipeline cannot be checkpointed",
                    this->label());
      }
      failed.push_back(task->index);
      failures.push_back(task->failure());
    }
    if (skipper_.policy().skips()) {
      skipper_.save(writer);
      writer.write("failed", failed);
      writer.write("failures", failures);
    }
    detail::write_elements<U>(writer, "results", *this, results);
    return true;
  }

  void load_state(const StateReader& reader) override {
    stop_background();
    next_index_ = reader.read<std::uint64_t>("next_index");
    source_ended_ = reader.read<bool>("source_ended");
    std::vector<std::uint64_t> failed;
    std::vector<std::string> failures;
    if (skipper_.policy().skips()) {
      skipper_.load(reader);
      failed = reader.read<std::vector<std::uint64_t>>("failed");
      failures = reader.read<std::vector<std::string>>("failures");
      if (failures.size() != failed.size()) {
        DPIPE_THROW(StateError, "{}: the checkpoint holds {} failed elements and {} failures", this->label(),
                    failed.size(), failures.size());
      }
    }
    auto values = detail::read_elements<U>(reader, "results", *this);
    const std::size_t pending = values.size() + failed.size();
    if (pending > max_in_flight_) {
      DPIPE_THROW(StateError, "{}: {} saved results exceed max_in_flight {}", this->label(), pending, max_in_flight_);
    }
    if (pending > next_index_) DPIPE_THROW(StateError, "{}: more saved results than elements read", this->label());
    tasks_.clear();
    auto value = values.begin();
    std::size_t failure = 0;
    for (std::uint64_t index = next_index_ - pending; index < next_index_; ++index) {
      tasks_.push_back(std::make_unique<Task>(fns_, index, std::nullopt));
      if (failure < failed.size() && failed[failure] == index) {
        tasks_.back()->restored_failure = std::move(failures[failure++]);
      } else if (value != values.end()) {
        tasks_.back()->output.emplace(std::move(*value++));
      } else {
        DPIPE_THROW(StateError, "{}: the checkpoint's failed elements are out of order", this->label());
      }
    }
    if (failure != failed.size()) {
      DPIPE_THROW(StateError, "{}: the checkpoint's failed elements are out of order", this->label());
    }
  }

 protected:
  void reset_impl() override {
    settle();
    tasks_.clear();
    skipper_.reset();
    next_index_ = 0;
    source_ended_ = false;
    source_.reset();
  }

  std::optional<U> next_impl() override {
    for (;;) {
      submit();
      if (tasks_.empty()) return std::nullopt;
      std::unique_ptr<Task> task = std::move(tasks_.front());
      tasks_.pop_front();
      if (task->submitted) pool_->wait(*task);
      if (task->output) return std::move(task->output);
      if (task->error) {
        try {
          std::rethrow_exception(task->error);
        } catch (...) {
          skipper_.skip_current_or_throw(*this, task->index);
        }
      } else {
        skipper_.skip_or_throw(*this, task->index, task->restored_failure);
      }
      this->count_skipped();
    }
  }

  /// The source's, unless the policy may skip elements.
  [[nodiscard]] std::optional<std::size_t> length_impl() const override {
    if (skipper_.policy().skips()) return std::nullopt;
    return source_.length();
  }

 private:
  /// One element on its way through the pool, then its result (a restored one never ran here).
  struct Task final : detail::PoolTask {
    Task(const std::vector<F>& fns, std::uint64_t position, std::optional<T> element)
        : functions(&fns), index(position), input(std::move(element)) {}
    void run(std::size_t thread) noexcept override {
      try {
        output.emplace((*functions)[thread](std::move(*input)));
      } catch (...) {
        error = std::current_exception();
      }
      input.reset();
    }
    const std::vector<F>* functions;
    std::uint64_t index;
    std::optional<T> input;
    std::optional<U> output;
    std::exception_ptr error;
    std::string restored_failure;  // a failure restored from a checkpoint (OnError::skip)
    bool submitted = false;

    /// What fn threw: "std::runtime_error: bad sample". REQUIRES: no output.
    [[nodiscard]] std::string failure() const { return error ? detail::describe(error) : restored_failure; }
  };

  /// Reads elements from the source and hands them to the pool while there is room.
  void submit() {
    while (!source_ended_ && tasks_.size() < max_in_flight_) {
      auto element = source_.next();
      if (!element) {
        source_ended_ = true;
        break;
      }
      if (!pool_) pool_ = std::make_unique<detail::ThreadPool>(threads_);
      if (!pool_->running()) {  // each thread calls its own copy of fn
        fns_.clear();
        for (std::size_t i = 0; i < threads_; ++i) fns_.push_back(fn_);
      }
      tasks_.push_back(std::make_unique<Task>(fns_, next_index_++, std::move(element)));
      tasks_.back()->submitted = true;
      pool_->submit(*tasks_.back());
    }
  }

  /// Waits for every element in flight: their results stay, in order.
  void settle() {
    for (auto& task : tasks_) {
      if (!task->submitted) continue;
      pool_->wait(*task);
      task->submitted = false;
    }
  }

  Input<T> source_;
  F fn_;
  std::size_t threads_;
  std::size_t max_in_flight_;
  std::vector<F> fns_;  // one copy of fn_ per pool thread, made before the threads start
  std::unique_ptr<detail::ThreadPool> pool_;
  std::deque<std::unique_ptr<Task>> tasks_;  // taken from the source and not handed out, in input order
  detail::ElementSkipper skipper_;
  std::uint64_t next_index_ = 0;
  bool source_ended_ = false;
};

}  // namespace iter

template <class T>
template <map_fn<T> F>
IterPipe<map_result_t<F, T>> IterPipe<T>::threadpool_map(F fn, std::optional<std::size_t> threads,
                                                         std::optional<std::size_t> max_in_flight,
                                                         OnError on_error) const {
  const std::size_t pool = threads.value_or(detail::hardware_threads());
  return make_iter<iter::ThreadPoolMapper<T, F>>(*this, std::move(fn), pool, max_in_flight.value_or(4 * pool),
                                                 on_error);
}

namespace iter {

/// `src | iter::threadpool_map(fn, threads, max_in_flight, on_error)`.
template <class F>
[[nodiscard]] auto threadpool_map(F fn, std::optional<std::size_t> threads = std::nullopt,
                                  std::optional<std::size_t> max_in_flight = std::nullopt,
                                  OnError on_error = OnError::raise()) {
  return PipeAdaptor{[=](const auto& source) { return source.threadpool_map(fn, threads, max_in_flight, on_error); }};
}

}  // namespace iter
}  // namespace dpipe
