// SequentialReadingService.

#include <algorithm>
#include <iterator>

#include <dpipe/core/checkpoint_schema.hpp>
#include <dpipe/core/error.hpp>
#include <dpipe/core/logging.hpp>
#include <dpipe/reading_service/sequential.hpp>

namespace dpipe {

SequentialReadingService::SequentialReadingService(const SequentialReadingService& other)
    : ReadingService<SequentialReadingService, CheckpointableReadingServiceInterface>(other) {
  for (const auto& service : other.services_) services_.push_back(service->clone());
}

DataPipePtr SequentialReadingService::initialize(DataPipePtr graph) {
  for (auto& service : services_) graph = service->initialize(std::move(graph));
  return graph;
}

GraphFunction SequentialReadingService::initialize_iteration(SeedGenerator& seeds, GraphFunction iter_reset_fn) {
  for (auto& service : services_) iter_reset_fn = service->initialize_iteration(seeds, std::move(iter_reset_fn));
  return iter_reset_fn;
}

std::optional<std::size_t> SequentialReadingService::epoch_length(const DataPipePtr& graph) const {
  if (services_.empty()) return std::nullopt;
  const ReadingServiceInterface* last = services_.back().get();
  EpochLengthFunction rest = [last](const DataPipePtr& handed_on) { return last->epoch_length(handed_on); };
  for (auto it = std::next(services_.rbegin()); it != services_.rend(); ++it) {
    rest = [service = it->get(), after = std::move(rest)](const DataPipePtr& handed_on) {
      return service->epoch_length_before(handed_on, after);
    };
  }
  return rest(graph);
}

void SequentialReadingService::finalize_iteration() {
  for (auto it = services_.rbegin(); it != services_.rend(); ++it) (*it)->finalize_iteration();
}

void SequentialReadingService::finalize() {
  for (auto it = services_.rbegin(); it != services_.rend(); ++it) (*it)->finalize();
}

void SequentialReadingService::checkpoint(StateWriter& writer) {
  writer.write(checkpoint_schema::sequence::kServices, std::uint64_t{services_.size()});
  for (std::size_t i = 0; i < services_.size(); ++i) {
    if (auto* checkpointable = dynamic_cast<CheckpointableReadingServiceInterface*>(services_[i].get())) {
      StateWriter service = writer.scope(std::to_string(i));
      checkpointable->checkpoint(service);
    } else {
      log_warning("SequentialReadingService: service {} doesn't support `checkpoint`, skipping...", i);
    }
  }
}

void SequentialReadingService::resume_after_checkpoint() {
  for (auto it = services_.rbegin(); it != services_.rend(); ++it) {
    if (auto* checkpointable = dynamic_cast<CheckpointableReadingServiceInterface*>(it->get())) {
      checkpointable->resume_after_checkpoint();
    }
  }
}

DataPipePtr SequentialReadingService::restore(DataPipePtr graph, const StateReader& reader) {
  const auto saved = reader.read<std::uint64_t>(checkpoint_schema::sequence::kServices);
  if (saved != services_.size()) {
    DPIPE_THROW(StateError, "SequentialReadingService: the checkpoint has {} services, this one {}", saved,
                services_.size());
  }
  for (std::size_t i = 0; i < services_.size(); ++i) {
    if (auto* checkpointable = dynamic_cast<CheckpointableReadingServiceInterface*>(services_[i].get())) {
      graph = checkpointable->restore(std::move(graph), reader.scope(std::to_string(i)));
    } else {
      log_warning("SequentialReadingService: service {} doesn't support `restore` from state, initialize from scratch",
                  i);
      graph = services_[i]->initialize(std::move(graph));
    }
  }
  return graph;
}

bool SequentialReadingService::supports_pause() const {
  return std::ranges::all_of(services_, [](const auto& service) { return service->supports_pause(); });
}

GraphFunction SequentialReadingService::pause(GraphFunction pause_fn) {
  for (auto& service : services_) pause_fn = service->pause(std::move(pause_fn));
  return pause_fn;
}

GraphFunction SequentialReadingService::resume(GraphFunction resume_fn) {
  for (auto& service : services_) resume_fn = service->resume(std::move(resume_fn));
  return resume_fn;
}

bool SequentialReadingService::supports_limit() const {
  return std::ranges::all_of(services_, [](const auto& service) { return service->supports_limit(); });
}

GraphFunction SequentialReadingService::limit(std::optional<std::size_t> num_batches, GraphFunction limit_fn) {
  for (auto& service : services_) limit_fn = service->limit(num_batches, std::move(limit_fn));
  return limit_fn;
}

}  // namespace dpipe
