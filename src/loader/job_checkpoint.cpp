// A job's checkpoint (LoaderCore::save_job_checkpoint / load_job_checkpoint): every rank's
// checkpoint in one file that rank 0 writes and reads, each under its rank's scope.

#include <string>

#include <dpipe/core/checkpoint_schema.hpp>
#include <dpipe/core/error.hpp>
#include <dpipe/core/state.hpp>
#include <dpipe/loader/checkpoint_file.hpp>
#include <dpipe/loader/loader_core.hpp>
#include <dpipe/reading_service/distributed.hpp>

namespace dpipe::detail {
namespace {

namespace job = checkpoint_schema::job;
using RankStates = DistributedReadingService::RankStates;

/// The job's checkpoint of `states`, rank 0's first.
std::vector<std::byte> job_blob(const RankStates& states) {
  StateStore store;
  StateWriter(store, std::string(job::kScope)).write(job::kWorldSize, std::uint64_t{states.size()});
  for (std::size_t rank = 0; rank < states.size(); ++rank)
    store.merge(StateStore::from_blob(states[rank]), job::rank(rank));
  return store.to_blob();
}

/// Every rank's checkpoint from the job's checkpoint file at `path`, for a job of `world_size`.
RankStates rank_states(const std::filesystem::path& path, std::size_t world_size) {
  const auto blob = load_checkpoint_file(path);
  StateStore store;
  try {
    store = StateStore::from_blob(blob);
  } catch (const StateError& error) {
    DPIPE_THROW(StateError, "checkpoint file {}: {}", path.string(), error.what());
  }
  const StateReader reader(store, std::string(job::kScope));
  if (!reader.has(job::kWorldSize)) {
    DPIPE_THROW(StateError,
                "checkpoint file {}: it holds the state of one loader, not a job's: restore it with "
                "load_state_dict(load_checkpoint_file(path))",
                path.string());
  }
  const auto saved = reader.read<std::uint64_t>(job::kWorldSize);
  if (saved != world_size) {
    DPIPE_THROW(StateError,
                "checkpoint file {}: it holds the states of a job of {} ranks, this job has {}: resume the job on {} "
                "ranks",
                path.string(), saved, world_size, saved);
  }
  RankStates states;
  for (std::size_t rank = 0; rank < world_size; ++rank) states.push_back(store.subset(job::rank(rank)).to_blob());
  return states;
}

}  // namespace

void LoaderCore::save_job_checkpoint(const std::filesystem::path& path, std::span<const std::byte> state) {
  const auto write = [&path](const RankStates& states) { save_checkpoint_file(path, job_blob(states)); };
  if (auto* distributed = find_distributed_service(service_.get())) {
    distributed->gather_states(before_service_, state, write);
  } else {
    write(RankStates{std::vector<std::byte>(state.begin(), state.end())});
  }
}

void LoaderCore::load_job_checkpoint(const std::filesystem::path& path, const RestoreOptions& options,
                                     const std::function<void(ByteReader&)>& adopt_read_ahead) {
  require_not_iterated();
  auto service = fresh_service_ ? fresh_service_->clone() : nullptr;
  const auto read = [&path](std::size_t world_size) { return rank_states(path, world_size); };
  auto* distributed = find_distributed_service(service.get());
  const auto state = distributed != nullptr ? distributed->scatter_states(before_service_, read) : read(1).at(0);
  restore(state, options, adopt_read_ahead, std::move(service));
}

}  // namespace dpipe::detail
