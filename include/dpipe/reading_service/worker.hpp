#pragma once
/// \file
/// What code running in a worker of MultiProcessingReadingService (a process or a thread) can ask:
/// which worker it is, and a random engine the service seeds for it. All three are per thread:
/// a worker thread has its own, and so has the one thread a worker process runs its graph on.
///
/// Like torchdata, before seeding its graph each epoch a worker draws two values from its worker
/// seed stream; the first seeds worker_random() (torchdata seeds Python's `random` with it), the
/// second is worker_seed() (torchdata seeds torch's generator with it). User functions that draw
/// from them (random augmentations) are therefore reproducible for a seeded loader, and their
/// state is part of the loader's checkpoints.

#include <cstdint>
#include <optional>

#include <dpipe/random/python_random.hpp>
#include <dpipe/reading_service/reading_service.hpp>

namespace dpipe {

/// This worker's engine for user functions (per thread). Elsewhere it is seeded with 0 and never
/// reseeded. Thread-safety: use it from the thread that runs the graph.
PythonRandom& worker_random() noexcept;

/// The second value this worker drew for the current epoch (0 in the main process): seed other
/// engines with it, e.g. torch::manual_seed(dpipe::worker_seed()).
std::uint64_t worker_seed() noexcept;

/// Which worker this thread runs, or std::nullopt outside the workers.
std::optional<WorkerInfo> current_worker() noexcept;

}  // namespace dpipe
