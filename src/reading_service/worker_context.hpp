#pragma once
// Setting what <dpipe/reading_service/worker.hpp> reports, in a child process. Private.

#include <cstdint>

#include <dpipe/random/python_random.hpp>
#include <dpipe/reading_service/reading_service.hpp>

namespace dpipe::detail::mp {

/// The per-process random state a checkpoint carries.
struct WorkerRandomState {
  PythonRandom engine;
  std::uint64_t seed = 0;
  DPIPE_FIELDS(engine, seed)
};

/// Marks this process as worker `info`.
void enter_worker(const WorkerInfo& info) noexcept;
/// Seeds worker_random() with `first` and sets worker_seed() to `second`.
void seed_worker(std::uint64_t first, std::uint64_t second) noexcept;
[[nodiscard]] WorkerRandomState worker_random_state() noexcept;
void set_worker_random_state(const WorkerRandomState& state) noexcept;

}  // namespace dpipe::detail::mp
