// Bad samples: skip them with an error policy, catch a failure the same way with and without
// worker processes, and resume from a checkpoint saved after a failure.

#include <cstdio>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include <dpipe/dpipe.hpp>

namespace {

std::vector<int> ids(int n) {
  std::vector<int> values(static_cast<std::size_t>(n));
  std::iota(values.begin(), values.end(), 0);
  return values;
}

/// Decodes sample `id`; every sample whose id ends in 7 is corrupt.
int decode(int id) {
  if (id % 10 == 7) throw std::invalid_argument("sample " + std::to_string(id) + " is corrupt");
  return id;
}

// [catch]
/// Trains on every sample of an epoch; returns how many arrived. A failure of `decode` is the
/// same std::invalid_argument in process and, with workers, a WorkerError that names it.
template <class Loader>
int train_one_epoch(Loader& loader) {
  int received = 0;
  try {
    for (int sample : loader) {
      (void)sample;
      ++received;
    }
  } catch (const dpipe::WorkerError& error) {  // with worker processes
    if (error.original_type() != "std::invalid_argument") throw;
    std::printf("bad sample after %d: %s\n", received, error.original_message().c_str());
  } catch (const std::invalid_argument& error) {  // in process: the exception itself
    std::printf("bad sample after %d: %s\n", received, error.what());
  }
  return received;
}
// [catch]

}  // namespace

int main() {
  // The skipped samples are logged as warnings; keep this demonstration's output short.
  dpipe::logger()->set_level(spdlog::level::err);
  {
    dpipe::DataLoader2<int> in_process(dpipe::iter::from(ids(100)).sharding_filter().map(decode));
    dpipe::DataLoader2<int> with_workers(dpipe::iter::from(ids(100)).sharding_filter().map(decode),
                                         dpipe::MultiProcessingReadingService({.num_workers = 2}));
    (void)train_one_epoch(in_process);
    (void)train_one_epoch(with_workers);
  }
  {
    // [skip]
    // Skip (and log) the samples decode throws on; more than 20 in one epoch is an ElementError.
    auto pipeline = dpipe::iter::from(ids(100)).shuffle().sharding_filter().map(decode, dpipe::OnError::skip(20));
    dpipe::DataLoader2<int> loader(pipeline, dpipe::MultiProcessingReadingService({.num_workers = 2}));
    std::printf("skipping: %d of 100 samples\n", train_one_epoch(loader));
    // [skip]
  }
  {
    // [resume]
    // A job that stopped at a bad sample saves the position of the last sample it received ...
    dpipe::DataLoader2<int> strict(dpipe::iter::from(ids(100)).map(decode));
    (void)train_one_epoch(strict);
    const std::vector<std::byte> checkpoint = strict.state_dict();
    // ... and resumes there with a policy that skips bad samples.
    dpipe::DataLoader2<int> tolerant(dpipe::iter::from(ids(100)).map(decode, dpipe::OnError::skip()));
    tolerant.load_state_dict(checkpoint);
    const auto restored_position = static_cast<unsigned long long>(tolerant.elements_in_epoch());
    std::printf("resumed after %llu samples: %d more\n", restored_position, train_one_epoch(tolerant));
    // [resume]
  }
  return 0;
}
