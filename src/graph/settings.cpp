// Graph-wide settings: sharding, random seeds, shuffle switches.

#include <algorithm>
#include <functional>

#include <dpipe/core/capabilities.hpp>
#include <dpipe/core/error.hpp>
#include <dpipe/core/iter_datapipe.hpp>
#include <dpipe/graph/graph.hpp>
#include <dpipe/graph/settings.hpp>

#include "graph_internal.hpp"

namespace dpipe::graph {

using detail::IdSet;
using detail::is_a;

void apply_sharding(const DataPipePtr& root, std::size_t num_instances, std::size_t instance_id,
                    ShardingPriority group) {
  const std::function<void(const DataPipeGraph&, const DataPipePtr&)> apply =
      [&](const DataPipeGraph& graph, const DataPipePtr& applied_downstream) {
        for (const auto& entry : graph.entries) {
          DataPipePtr applied = applied_downstream;
          if (auto* sharding = dynamic_cast<ShardingDataPipe*>(entry.node.get())) {
            if (applied_downstream) {
              DPIPE_THROW(UsageError,
                          "Sharding twice on a single pipeline is likely unintended and will cause "
                          "data loss. Sharding already applied to {} while trying to apply to {}",
                          applied_downstream->label(), entry.node->label());
            }
            sharding->apply_sharding(num_instances, instance_id, group);
            applied = entry.node;
          }
          apply(entry.inputs, applied);
        }
      };
  apply(traverse_dps(root), nullptr);
}

bool sharded_for(const DataPipePtr& root, ShardingPriority group) {
  const auto nodes = list_dps(traverse_dps(root));
  return std::ranges::any_of(nodes, [group](const DataPipePtr& node) {
    const auto* sharding = dynamic_cast<const ShardingDataPipe*>(node.get());
    return sharding != nullptr && sharding->sharded_for(group);
  });
}

std::optional<std::size_t> sharded_length(const DataPipePtr& root, std::size_t num_instances, std::size_t instance_id,
                                          ShardingPriority group) {
  const DataPipePtr copy = clone(root);
  apply_sharding(copy, num_instances, instance_id, group);
  const auto* stream = dynamic_cast<const IterDataPipeBase*>(copy.get());
  if (stream == nullptr) DPIPE_THROW(InvalidArgument, "sharded_length: {} is not an iter node", root->label());
  return stream->length();
}

void set_datapipes_seed(const std::vector<DataPipePtr>& nodes, SeedGenerator& seeds, bool shared) {
  for (const auto& node : nodes) {
    if (auto* random = dynamic_cast<RandomDataPipe*>(node.get())) {
      random->set_seed(shared ? seeds.generate_shared_seed() : seeds.generate_seed());
    }
  }
}

void set_graph_random_seed(const DataPipePtr& root, SeedGenerator& seeds) {
  const DataPipeGraph graph = traverse_dps(root);
  std::vector<DataPipePtr> sharding_nodes;
  for (const auto& node : detail::preorder(graph)) {
    if (is_a<ShardingDataPipe>(node)) sharding_nodes.push_back(node);
  }
  std::vector<DataPipePtr> before;
  IdSet seen;
  for (const auto& sharding : sharding_nodes) {
    for (const auto& node : list_dps(traverse_dps(sharding))) {
      if (seen.insert(node->id()).second) before.push_back(node);
    }
  }
  set_datapipes_seed(before, seeds, /*shared=*/true);
  set_datapipes_seed(list_dps(graph, sharding_nodes), seeds, /*shared=*/false);
}

std::size_t apply_shuffle_settings(const DataPipePtr& root, std::optional<bool> enabled) {
  if (!enabled) return 0;
  std::size_t count = 0;
  for (const auto& node : list_dps(traverse_dps(root))) {
    if (auto* shuffling = dynamic_cast<ShufflingDataPipe*>(node.get())) {
      shuffling->set_shuffle(*enabled);
      ++count;
    }
  }
  return count;
}

}  // namespace dpipe::graph
