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

#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <ranges>
#include <string>
#include <utility>
#include <vector>

#include <dpipe/core/detail/buffered_elements.hpp>
#include <dpipe/core/error_policy.hpp>
#include <dpipe/core/iter_datapipe.hpp>
#include <dpipe/core/iter_pipe.hpp>
#include <dpipe/core/typed_op.hpp>
#include <dpipe/iter/detail/pool_map_queue.hpp>
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
class ThreadPoolMapper final : public IterDataPipe<map_result_t<F, T>>, private detail::PoolMapQueue::Hooks {
  using U = map_result_t<F, T>;

 public:
  static constexpr std::string_view kName = "threadpool_map";

  ThreadPoolMapper(const IterPipe<T>& source, F fn, std::size_t threads, std::size_t max_in_flight,
                   OnError on_error = OnError::raise())
      : IterDataPipe<U>(std::string(kName)),
        source_(source.ptr()),
        fn_(std::move(fn)),
        queue_(threads, max_in_flight, on_error) {}

  /// Copies the configuration only: no threads, nothing in flight.
  ThreadPoolMapper(const ThreadPoolMapper& other)
      : IterDataPipe<U>(other), source_(other.source_), fn_(other.fn_), queue_(other.queue_) {}

  void for_each_input(const InputVisitor& visit) override { visit(source_); }
  [[nodiscard]] DataPipePtr clone_self() const override { return std::make_shared<ThreadPoolMapper>(*this); }

  /// Waits for the elements in flight and stops the threads; the results stay.
  void stop_background() override { queue_.stop(); }

  [[nodiscard]] bool save_state(StateWriter& writer) const override {
    const std::vector<const detail::MapTask*> ready = queue_.save_state(writer, *this);
    detail::write_elements<U>(writer, "results", *this,
                              std::views::transform(ready, [](const detail::MapTask* task) -> const U& {
                                return *static_cast<const Task*>(task)->output;
                              }));
    return true;
  }

  void load_state(const StateReader& reader) override {
    auto results = detail::read_elements<U>(reader, "results", *this);
    const std::vector<detail::MapTask*> to_fill = queue_.load_state(reader, *this, results.size(), *this);
    for (std::size_t i = 0; i < to_fill.size(); ++i)
      static_cast<Task*>(to_fill[i])->output.emplace(std::move(results[i]));
  }

 protected:
  void reset_impl() override {
    queue_.reset();
    source_.reset();
  }

  std::optional<U> next_impl() override {
    std::unique_ptr<detail::MapTask> task = queue_.next(*this, *this);
    if (!task) return std::nullopt;
    return std::move(static_cast<Task&>(*task).output);
  }

  /// The source's, unless the policy may skip elements.
  [[nodiscard]] std::optional<std::size_t> length_impl() const override {
    if (queue_.policy().skips()) return std::nullopt;
    return source_.length();
  }

 private:
  /// One element and its result (a restored task never runs and has no element).
  struct Task final : detail::MapTask {
    Task(const std::vector<F>& fns, std::uint64_t position, std::optional<T> element)
        : MapTask(position), functions(&fns), input(std::move(element)) {}
    void run(std::size_t thread) noexcept override {
      try {
        output.emplace((*functions)[thread](std::move(*input)));
      } catch (...) {
        error = std::current_exception();
      }
      input.reset();
    }
    [[nodiscard]] bool has_output() const noexcept override { return output.has_value(); }

    const std::vector<F>* functions;
    std::optional<T> input;
    std::optional<U> output;
  };

  std::unique_ptr<detail::MapTask> take(std::uint64_t index) override {
    auto element = source_.next();
    if (!element) return nullptr;
    return std::make_unique<Task>(fns_, index, std::move(element));
  }
  std::unique_ptr<detail::MapTask> restored(std::uint64_t index) override {
    return std::make_unique<Task>(fns_, index, std::nullopt);
  }
  void copy_functions(std::size_t threads) override {  // each thread calls its own copy of fn
    fns_.clear();
    for (std::size_t i = 0; i < threads; ++i) fns_.push_back(fn_);
  }
  void count_skipped() noexcept override { this->IterDataPipe<U>::count_skipped(); }

  Input<T> source_;
  F fn_;
  std::vector<F> fns_;          // one copy of fn_ per pool thread, made before the threads start
  detail::PoolMapQueue queue_;  // last, so that it stops the threads before the functions go
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
