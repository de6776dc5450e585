#pragma once
/// \file
/// PoolMapQueue: the element-type-independent half of `threadpool_map`, compiled once in the
/// library so that each map of a user's graph (which can become a threadpool_map, see
/// ops::ToThreadPoolMap) instantiates only the typed half: its task and where elements go.

#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include <dpipe/core/datapipe.hpp>
#include <dpipe/core/detail/element_skipper.hpp>
#include <dpipe/core/error_policy.hpp>
#include <dpipe/core/state.hpp>
#include <dpipe/iter/detail/thread_pool.hpp>

namespace dpipe::detail {

/// One element of a threadpool_map on its way through the pool, then its result or its failure.
/// The typed task (in ThreadPoolMapper) holds the element and the result.
class MapTask : public PoolTask {
 public:
  explicit MapTask(std::uint64_t position) noexcept : index(position) {}

  /// Whether the task holds a result (its function returned, or it was restored with one).
  [[nodiscard]] virtual bool has_output() const noexcept = 0;

  /// What the function threw: "std::runtime_error: bad sample". REQUIRES: no output.
  [[nodiscard]] std::string failure() const;

  std::uint64_t index;           // the element's position in the epoch, from 0
  std::exception_ptr error;      // what the function threw here (set by run)
  std::string restored_failure;  // a failure restored from a checkpoint (OnError::skip)
  bool submitted = false;        // handed to the pool and not yet waited for
};

/// The elements a threadpool_map took from its source and has not handed out, in input order; the
/// pool that runs them; the error policy; and their checkpoint state. Thread-safety: the consumer
/// calls every member; the pool's threads only run tasks.
class PoolMapQueue {
 public:
  /// What the typed node provides.
  class Hooks {
   public:
    /// A task for the source's next element, at position `index`; nullptr when the source ended.
    virtual std::unique_ptr<MapTask> take(std::uint64_t index) = 0;
    /// A task with neither element nor result, for a restored position `index`.
    virtual std::unique_ptr<MapTask> restored(std::uint64_t index) = 0;
    /// Makes one copy of the function per pool thread; called before the threads (re)start.
    virtual void copy_functions(std::size_t threads) = 0;
    /// The policy skipped an element (the node counts it).
    virtual void count_skipped() noexcept = 0;

   protected:
    ~Hooks() = default;
  };

  /// Throws InvalidArgument (torchdata's messages) when threads or max_in_flight is 0.
  PoolMapQueue(std::size_t threads, std::size_t max_in_flight, OnError on_error);
  /// Copies the configuration only: no threads, nothing in flight.
  PoolMapQueue(const PoolMapQueue& other);
  PoolMapQueue& operator=(const PoolMapQueue&) = delete;
  /// Stops the threads (stop()).
  ~PoolMapQueue();

  /// The next result in input order, reading from the source while fewer than max_in_flight
  /// elements are taken and not handed out; nullptr when the source ended and every result was
  /// handed out. A failed element is skipped per the policy (counted through `hooks`), or thrown as
  /// ElementError naming `node` and the element's index.
  std::unique_ptr<MapTask> next(Hooks& hooks, const DataPipe& node);

  /// Waits for the elements in flight and stops the threads; the results stay.
  void stop();
  /// A new epoch: waits for the elements in flight, then forgets them and the skipped count.
  void reset();
  /// Whether the pool's threads run.
  [[nodiscard]] bool running() const noexcept;
  [[nodiscard]] const OnError& policy() const noexcept { return skipper_.policy(); }

  /// Writes the position, the source's end and the failures (under OnError::skip) to `writer`;
  /// returns the tasks with a result, in order, whose results the node writes. StateError while
  /// the threads run, or when a failure is pending and the policy raises.
  std::vector<const MapTask*> save_state(StateWriter& writer, const DataPipe& node) const;

  /// Reads what save_state() wrote and rebuilds the queue with `results` saved results, from
  /// `hooks.restored`; returns the tasks the node fills with those results, in order. StateError
  /// when the state does not fit this node (more results than max_in_flight, or than elements
  /// read; failures out of order).
  std::vector<MapTask*> load_state(const StateReader& reader, const DataPipe& node, std::size_t results, Hooks& hooks);

 private:
  /// Reads elements from the source and hands them to the pool while there is room.
  void submit(Hooks& hooks);
  /// Waits for every element in flight: their results stay, in order.
  void settle();

  std::size_t threads_;
  std::size_t max_in_flight_;
  std::unique_ptr<ThreadPool> pool_;
  std::deque<std::unique_ptr<MapTask>> tasks_;  // taken from the source and not handed out, in input order
  ElementSkipper skipper_;
  std::uint64_t next_index_ = 0;
  bool source_ended_ = false;
};

}  // namespace dpipe::detail
