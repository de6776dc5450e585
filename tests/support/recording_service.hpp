#pragma once
// A reading service that records each call it receives, to test the order of the protocol.

#include <memory>
#include <string>
#include <vector>

#include <dpipe/dpipe.hpp>

namespace dpipe::testing {

using CallLog = std::shared_ptr<std::vector<std::string>>;

class RecordingService final : public ReadingService<RecordingService, CheckpointableReadingServiceInterface> {
 public:
  RecordingService(std::string name, CallLog log) : name_(std::move(name)), log_(std::move(log)) {}

  DataPipePtr initialize(DataPipePtr graph) override {
    record("initialize");
    return graph;
  }
  GraphFunction initialize_iteration(SeedGenerator& /*seeds*/, GraphFunction iter_reset_fn) override {
    record(iter_reset_fn ? "initialize_iteration(fn)" : "initialize_iteration");
    return [](DataPipePtr graph) { return graph; };
  }
  void finalize_iteration() override { record("finalize_iteration"); }
  void finalize() override { record("finalize"); }
  void checkpoint(StateWriter& writer) override {
    record("checkpoint");
    writer.write("name", name_);
  }
  DataPipePtr restore(DataPipePtr graph, const StateReader& reader) override {
    record("restore(" + reader.read<std::string>("name") + ")");
    return graph;
  }

 private:
  void record(const std::string& call) { log_->push_back(name_ + "." + call); }

  std::string name_;
  CallLog log_;
};

}  // namespace dpipe::testing
