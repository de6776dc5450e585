// The worker context: per thread, which makes it per worker for worker threads and worker processes alike.

#include <dpipe/reading_service/worker.hpp>

#include "reading_service/worker_context.hpp"

namespace dpipe {
namespace {

struct Context {
  PythonRandom engine;
  std::uint64_t seed = 0;
  std::optional<WorkerInfo> info;
};

Context& context() noexcept {
  thread_local Context instance;  // a worker thread has its own; a worker process has one thread
  return instance;
}

}  // namespace

PythonRandom& worker_random() noexcept { return context().engine; }
std::uint64_t worker_seed() noexcept { return context().seed; }
std::optional<WorkerInfo> current_worker() noexcept { return context().info; }

namespace detail::mp {

void enter_worker(const WorkerInfo& info) noexcept { context().info = info; }

void seed_worker(std::uint64_t first, std::uint64_t second) noexcept {
  context().engine.seed(first);
  context().seed = second;
}

WorkerRandomState worker_random_state() noexcept { return WorkerRandomState{context().engine, context().seed}; }

void set_worker_random_state(const WorkerRandomState& state) noexcept {
  context().engine = state.engine;
  context().seed = state.seed;
}

}  // namespace detail::mp
}  // namespace dpipe
