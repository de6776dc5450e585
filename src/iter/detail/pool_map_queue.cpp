// PoolMapQueue: the element-type-independent half of threadpool_map.

#include <utility>

#include <dpipe/core/detail/buffered_elements.hpp>
#include <dpipe/core/error.hpp>
#include <dpipe/core/type_name.hpp>
#include <dpipe/iter/detail/pool_map_queue.hpp>

namespace dpipe::detail {

std::string MapTask::failure() const { return error ? describe(error) : restored_failure; }

PoolMapQueue::PoolMapQueue(std::size_t threads, std::size_t max_in_flight, OnError on_error)
    : threads_(threads), max_in_flight_(max_in_flight), skipper_(on_error) {
  if (threads == 0) DPIPE_THROW(InvalidArgument, "'max_workers' is required to be a positive integer.");
  if (max_in_flight == 0) DPIPE_THROW(InvalidArgument, "'scheduled_tasks' is required to be a positive integer.");
}

PoolMapQueue::PoolMapQueue(const PoolMapQueue& other)
    : threads_(other.threads_), max_in_flight_(other.max_in_flight_), skipper_(other.skipper_.policy()) {}

PoolMapQueue::~PoolMapQueue() { stop(); }

std::unique_ptr<MapTask> PoolMapQueue::next(Hooks& hooks, const DataPipe& node) {
  for (;;) {
    submit(hooks);
    if (tasks_.empty()) return nullptr;
    std::unique_ptr<MapTask> task = std::move(tasks_.front());
    tasks_.pop_front();
    if (task->submitted) pool_->wait(*task);
    if (task->has_output()) return task;
    if (task->error) {
      try {
        std::rethrow_exception(task->error);
      } catch (...) {
        skipper_.skip_current_or_throw(node, task->index);
      }
    } else {
      skipper_.skip_or_throw(node, task->index, task->restored_failure);
    }
    hooks.count_skipped();
  }
}

void PoolMapQueue::submit(Hooks& hooks) {
  while (!source_ended_ && tasks_.size() < max_in_flight_) {
    std::unique_ptr<MapTask> task = hooks.take(next_index_);
    if (!task) {
      source_ended_ = true;
      break;
    }
    if (!pool_) pool_ = std::make_unique<ThreadPool>(threads_);
    if (!pool_->running()) hooks.copy_functions(threads_);
    ++next_index_;
    task->submitted = true;
    tasks_.push_back(std::move(task));
    pool_->submit(*tasks_.back());
  }
}

void PoolMapQueue::settle() {
  for (auto& task : tasks_) {
    if (!task->submitted) continue;
    pool_->wait(*task);
    task->submitted = false;
  }
}

void PoolMapQueue::stop() {
  settle();
  if (pool_) pool_->stop();
}

void PoolMapQueue::reset() {
  settle();
  tasks_.clear();
  skipper_.reset();
  next_index_ = 0;
  source_ended_ = false;
}

bool PoolMapQueue::running() const noexcept { return pool_ && pool_->running(); }

std::vector<const MapTask*> PoolMapQueue::save_state(StateWriter& writer, const DataPipe& node) const {
  require_stopped(running(), node);
  writer.write("next_index", next_index_);
  writer.write("source_ended", source_ended_);
  std::vector<const MapTask*> results;
  std::vector<std::uint64_t> failed;  // under OnError::skip: the indices fn threw on, and what it threw
  std::vector<std::string> failures;
  for (const auto& task : tasks_) {
    if (task->has_output()) {
      results.push_back(task.get());
      continue;
    }
    if (!skipper_.policy().skips()) {
      DPIPE_THROW(StateError, "{} holds a pending exception; a failed pipeline cannot be checkpointed", node.label());
    }
    failed.push_back(task->index);
    failures.push_back(task->failure());
  }
  if (skipper_.policy().skips()) {
    skipper_.save_state(writer);
    writer.write("failed", failed);
    writer.write("failures", failures);
  }
  return results;
}

std::vector<MapTask*> PoolMapQueue::load_state(const StateReader& reader, const DataPipe& node, std::size_t results,
                                         Hooks& hooks) {
  stop();
  // Read and checked aside: the queue changes only once the whole state was accepted.
  const auto next_index = reader.read<std::uint64_t>("next_index");
  const bool source_ended = reader.read<bool>("source_ended");
  ElementSkipper skipper(skipper_.policy());
  std::vector<std::uint64_t> failed;
  std::vector<std::string> failures;
  if (skipper.policy().skips()) {
    skipper.load_state(reader);
    failed = reader.read<std::vector<std::uint64_t>>("failed");
    failures = reader.read<std::vector<std::string>>("failures");
    if (failures.size() != failed.size()) {
      DPIPE_THROW(StateError, "{}: the checkpoint holds {} failed elements and {} failures", node.label(),
                  failed.size(), failures.size());
    }
  }
  const std::size_t pending = results + failed.size();
  if (pending > max_in_flight_) {
    DPIPE_THROW(StateError, "{}: {} saved results exceed max_in_flight {}", node.label(), pending, max_in_flight_);
  }
  if (pending > next_index) DPIPE_THROW(StateError, "{}: more saved results than elements read", node.label());
  std::deque<std::unique_ptr<MapTask>> restored;
  std::vector<MapTask*> to_fill;
  std::size_t failure = 0;
  for (std::uint64_t index = next_index - pending; index < next_index; ++index) {
    restored.push_back(hooks.restored(index));
    if (failure < failed.size() && failed[failure] == index) {
      restored.back()->restored_failure = std::move(failures[failure++]);
    } else if (to_fill.size() < results) {
      to_fill.push_back(restored.back().get());
    } else {
      DPIPE_THROW(StateError, "{}: the checkpoint's failed elements are out of order", node.label());
    }
  }
  if (failure != failed.size()) {
    DPIPE_THROW(StateError, "{}: the checkpoint's failed elements are out of order", node.label());
  }
  next_index_ = next_index;
  source_ended_ = source_ended;
  skipper_ = skipper;
  tasks_ = std::move(restored);
  return to_fill;
}

}  // namespace dpipe::detail
