// Whole-graph checkpoints: fingerprint, save_state, load_state.

#include <array>
#include <cstring>
#include <string_view>
#include <unordered_map>

#include <dpipe/core/error.hpp>
#include <dpipe/core/iter_datapipe.hpp>
#include <dpipe/graph/graph.hpp>
#include <dpipe/graph/state.hpp>

namespace dpipe::graph {
namespace {

constexpr std::array<char, 8> kMagic = {'D', 'P', 'I', 'P', 'E', 'G', 'R', 'F'};
constexpr std::uint32_t kFormatVersion = 1;
constexpr std::size_t kHeaderSize = kMagic.size() + sizeof(std::uint32_t) + 2 * sizeof(std::uint64_t);
constexpr std::size_t kTrailerSize = sizeof(std::uint64_t);

/// FNV-1a, 64 bits.
class Hasher {
 public:
  void add(std::span<const std::byte> bytes) noexcept {
    for (const auto byte : bytes) {
      hash_ ^= static_cast<std::uint64_t>(byte);
      hash_ *= 0x100000001b3ULL;
    }
  }
  void add(std::string_view text) noexcept { add(std::as_bytes(std::span(text.data(), text.size()))); }
  void add(std::uint64_t value) noexcept { add(std::as_bytes(std::span(&value, 1))); }
  [[nodiscard]] std::uint64_t value() const noexcept { return hash_; }

 private:
  std::uint64_t hash_ = 0xcbf29ce484222325ULL;
};

std::uint64_t checksum(std::span<const std::byte> bytes) {
  Hasher hasher;
  hasher.add(bytes);
  return hasher.value();
}

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
  Hasher hasher;
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
  writer.write_bytes(kMagic.data(), kMagic.size());
  writer.write(kFormatVersion);
  writer.write(fingerprint_of(nodes));
  writer.write_size(nodes.size());
  {
    const PausedGraph paused(nodes);
    std::vector<std::byte> section;
    for (const auto& node : nodes) {
      section.clear();
      ByteWriter node_writer(section);
      if (!node->save_state(node_writer)) {
        DPIPE_THROW(StateError,
                    "{} ({}) does not support checkpoints: override save_state and load_state to "
                    "checkpoint this pipeline",
                    node->label(), node->element_type());
      }
      writer.write_size(section.size());
      writer.write_bytes(section.data(), section.size());
    }
  }
  writer.write(checksum(blob));
  return blob;
}

void load_state(const DataPipePtr& root, std::span<const std::byte> blob) {
  if (blob.size() < kHeaderSize + kTrailerSize) {
    DPIPE_THROW(StateError, "the checkpoint is truncated: {} bytes, fewer than the {}-byte header and trailer",
                blob.size(), kHeaderSize + kTrailerSize);
  }
  if (std::memcmp(blob.data(), kMagic.data(), kMagic.size()) != 0) {
    DPIPE_THROW(StateError, "the bytes are not a dpipe graph checkpoint (bad magic)");
  }
  const auto body = blob.first(blob.size() - kTrailerSize);
  std::uint64_t stored_checksum = 0;
  std::memcpy(&stored_checksum, blob.data() + body.size(), sizeof(stored_checksum));
  ByteReader reader(body.subspan(kMagic.size()));
  const auto version = reader.read<std::uint32_t>();
  if (version != kFormatVersion) {
    DPIPE_THROW(StateError, "the checkpoint has format version {}, this dpipe reads version {}", version,
                kFormatVersion);
  }
  if (checksum(body) != stored_checksum) {
    DPIPE_THROW(StateError, "the checkpoint is corrupted: its checksum does not match its contents");
  }
  const auto nodes = list_dps(traverse_dps(root));
  const auto saved_fingerprint = reader.read<std::uint64_t>();
  const auto expected_fingerprint = fingerprint_of(nodes);
  if (saved_fingerprint != expected_fingerprint) {
    DPIPE_THROW(StateError,
                "the checkpoint was saved from a different pipeline (graph fingerprint {:016x}, this "
                "pipeline's is {:016x}); restore it into a pipeline built by the same code",
                saved_fingerprint, expected_fingerprint);
  }
  const auto count = reader.read<std::uint64_t>();
  if (count != nodes.size()) {
    DPIPE_THROW(StateError, "the checkpoint holds {} nodes, the pipeline has {}", count, nodes.size());
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
  if (!reader.at_end()) DPIPE_THROW(StateError, "the checkpoint has {} trailing bytes", reader.remaining());
  for (const auto& node : nodes) {
    node->for_each_input([](InputSlot& input) { input.rebind(); });
  }
  if (auto* iter_root = dynamic_cast<IterDataPipeBase*>(root.get())) iter_root->continue_on_next_reset();
}

}  // namespace dpipe::graph
