// Whole-graph checkpoints: fingerprint, save_state, load_state.

#include <array>
#include <cstring>
#include <string_view>
#include <unordered_map>

#include <dpipe/core/error.hpp>
#include <dpipe/core/iter_datapipe.hpp>
#include <dpipe/graph/graph.hpp>
#include <dpipe/graph/state.hpp>

#include "blob.hpp"

namespace dpipe::graph {
namespace {

constexpr ::dpipe::detail::Magic kMagic = {'D', 'P', 'I', 'P', 'E', 'G', 'R', 'F'};
constexpr std::uint32_t kFormatVersion = 1;
constexpr const char* kWhat = "graph checkpoint";

/// Pauses every node (root first) and resumes them (sources first) when destroyed.
class PausedGraph {
 public:
  explicit PausedGraph(const std::vector<DataPipePtr>& nodes) : nodes_(nodes) {
    for (const auto& node : nodes_) node->pause();
  }
  ~PausedGraph() {
    for (auto it = nodes_.rbegin(); it != nodes_.rend(); ++it) (*it)->resume();
  }
  PausedGraph(const PausedGraph&) = delete;
  PausedGraph& operator=(const PausedGraph&) = delete;

 private:
  const std::vector<DataPipePtr>& nodes_;
};

std::uint64_t fingerprint_of(const std::vector<DataPipePtr>& nodes) {
  std::unordered_map<const DataPipe*, std::uint64_t> position;
  for (std::size_t i = 0; i < nodes.size(); ++i) position.emplace(nodes[i].get(), i);
  ::dpipe::detail::Fnv1a hasher;
  hasher.add(static_cast<std::uint64_t>(nodes.size()));
  for (const auto& node : nodes) {
    hasher.add(node->name());
    hasher.add(static_cast<std::uint64_t>(node->kind()));
    hasher.add(node->element_type());
    for (const auto& input : node->inputs()) hasher.add(position.at(input.get()));
    hasher.add(~std::uint64_t{0});
  }
  return hasher.value();
}

}  // namespace

std::uint64_t fingerprint(const DataPipePtr& root) { return fingerprint_of(list_dps(traverse_dps(root))); }

std::vector<std::byte> save_state(const DataPipePtr& root) {
  const auto nodes = list_dps(traverse_dps(root));
  std::vector<std::byte> blob;
  ByteWriter writer(blob);
  ::dpipe::detail::begin_blob(writer, kMagic, kFormatVersion);
  writer.write(fingerprint_of(nodes));
  writer.write_size(nodes.size());
  {
    const PausedGraph paused(nodes);
    std::vector<std::byte> section;
    for (const auto& node : nodes) {
      section.clear();
      ByteWriter node_writer(section);
      if (!node->save_state(node_writer)) {
        DPIPE_THROW(StateNotSupportedError,
                    "{} ({}) does not support checkpoints: override save_state and load_state to "
                    "checkpoint this pipeline",
                    node->label(), node->element_type());
      }
      writer.write_size(section.size());
      writer.write_bytes(section.data(), section.size());
    }
  }
  ::dpipe::detail::seal_blob(blob);
  return blob;
}

void load_state(const DataPipePtr& root, std::span<const std::byte> blob) {
  ByteReader reader = ::dpipe::detail::open_blob(blob, kMagic, kFormatVersion, kWhat);
  const auto nodes = list_dps(traverse_dps(root));
  std::uint64_t saved_fingerprint = 0;
  std::uint64_t count = 0;
  try {
    saved_fingerprint = reader.read<std::uint64_t>();
    count = reader.read<std::uint64_t>();
  } catch (const SerializationError& error) {
    DPIPE_THROW(StateError, "the {} is corrupt: {}", kWhat, error.what());
  }
  const auto expected_fingerprint = fingerprint_of(nodes);
  if (saved_fingerprint != expected_fingerprint) {
    DPIPE_THROW(StateError,
                "the graph checkpoint was saved from a different pipeline (graph fingerprint {:016x}, this "
                "pipeline's is {:016x}); restore it into a pipeline built by the same code",
                saved_fingerprint, expected_fingerprint);
  }
  if (count != nodes.size()) {
    DPIPE_THROW(StateError, "the graph checkpoint holds {} nodes, the pipeline has {}", count, nodes.size());
  }
  for (auto& node : nodes) node->pause();
  for (const auto& node : nodes) {
    try {
      const auto size = reader.read_count(1);
      ByteReader node_reader(reader.take(size));
      node->load_state(node_reader);
      if (!node_reader.at_end()) {
        DPIPE_THROW(StateError, "{}: {} bytes of its saved state were not read", node->label(),
                    node_reader.remaining());
      }
    } catch (const SerializationError& error) {
      DPIPE_THROW(StateError, "the saved state of {} is corrupt: {}", node->label(), error.what());
    }
  }
  if (!reader.at_end()) DPIPE_THROW(StateError, "the graph checkpoint has {} trailing bytes", reader.remaining());
  for (const auto& node : nodes) {
    node->for_each_input([](InputSlot& input) { input.rebind(); });
  }
  if (auto* iter_root = dynamic_cast<IterDataPipeBase*>(root.get())) iter_root->continue_on_next_reset();
}

}  // namespace dpipe::graph
