#pragma once
/// \file
/// SequentialReadingService (torchdata's): composes reading services. initialize,
/// initialize_iteration (chaining the graph functions they return), checkpoint, restore, pause,
/// resume and limit go to the services in the given order; finalize_iteration and finalize in
/// reverse order. The canonical use is (DistributedReadingService, MultiProcessingReadingService).

#include <memory>
#include <vector>

#include <dpipe/reading_service/reading_service.hpp>

namespace dpipe {

class SequentialReadingService final
    : public ReadingService<SequentialReadingService, CheckpointableReadingServiceInterface> {
 public:
  /// Copies each service.
  template <class... Services>
  requires(std::derived_from<Services, ReadingServiceInterface>&&...) explicit SequentialReadingService(
      const Services&... services) {
    (services_.push_back(services.clone()), ...);
  }
  SequentialReadingService(const SequentialReadingService& other);
  SequentialReadingService& operator=(const SequentialReadingService&) = delete;

  [[nodiscard]] std::size_t size() const noexcept { return services_.size(); }
  /// The first of its services' allocators that is not null.
  [[nodiscard]] HostAllocatorPtr host_allocator() const override {
    for (const auto& service : services_) {
      if (auto allocator = service->host_allocator()) return allocator;
    }
    return nullptr;
  }
  /// The copy of service `index` this service owns.
  [[nodiscard]] ReadingServiceInterface& service(std::size_t index) const { return *services_.at(index); }

  DataPipePtr initialize(DataPipePtr graph) override;
  /// The length under the last service, through each service before it (epoch_length_before):
  /// known wherever each service knows its part, such as (DistributedReadingService,
  /// MultiProcessingReadingService) with worker processes or threads.
  [[nodiscard]] std::optional<std::size_t> epoch_length(const DataPipePtr& graph) const override;
  GraphFunction initialize_iteration(SeedGenerator& seeds, GraphFunction iter_reset_fn = {}) override;
  void finalize_iteration() override;
  void finalize() override;

  /// Each checkpointable service writes under its index ("0", "1", ...).
  void checkpoint(StateWriter& writer) override;
  void resume_after_checkpoint() override;
  DataPipePtr restore(DataPipePtr graph, const StateReader& reader) override;

  [[nodiscard]] bool supports_pause() const override;
  GraphFunction pause(GraphFunction pause_fn = {}) override;
  GraphFunction resume(GraphFunction resume_fn = {}) override;
  [[nodiscard]] bool supports_limit() const override;
  GraphFunction limit(std::optional<std::size_t> num_batches, GraphFunction limit_fn = {}) override;

 private:
  std::vector<std::unique_ptr<ReadingServiceInterface>> services_;
};

}  // namespace dpipe
