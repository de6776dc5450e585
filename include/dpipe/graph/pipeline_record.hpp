#pragma once
/// \file
/// What a checkpoint records of the pipeline it was saved from, and the rule for restoring it into
/// another one: the pipeline's stateful nodes and its nodes with settings (DataPipe::settings(),
/// such as a batch_size or a shuffle's buffer size), by path. Stateless nodes without settings may
/// come and go (a `map` added for augmentation); a stateful node added, removed or retyped, or a
/// setting changed, refuses the checkpoint with a StateError naming each difference. DataLoader2
/// saves the record in its checkpoints (field `loader:pipeline`) and applies the rule at
/// load_state_dict(); `dpipe-inspect` prints the record.

#include <string>
#include <vector>

#include <dpipe/core/datapipe.hpp>
#include <dpipe/serialization/serializer.hpp>

namespace dpipe::graph {

/// A node of a pipeline as a checkpoint records it.
struct PipelineNode {
  std::string path;             ///< NodePath::settings_path: "batch/shuffle/from"
  std::string configured_path;  ///< NodePath::configured_path: "batch/shuffle"
  std::string element_type;     ///< what the node yields
  NodeSettings settings;        ///< its settings, "batch_size" = "32"
  DPIPE_FIELDS(path, configured_path, element_type, settings)
};

/// The record of the pipeline at `root`: every node that is stateful or has settings, in the order
/// of node_paths().
[[nodiscard]] std::vector<PipelineNode> record_pipeline(const DataPipePtr& root);

/// One line per node: "batch/shuffle/from (int) batch_size=32", for people reading a checkpoint.
[[nodiscard]] std::string describe_pipeline(const std::vector<PipelineNode>& nodes);

/// How check_pipeline compares a saved record with this pipeline's.
struct PipelineMatch {
  /// Compare only the nodes with settings, by configured_path: for a checkpoint that restores no
  /// node state (it replays its epoch), so a node that only keeps state may come or go.
  bool settings_only = false;
  /// Accept a source whose length changed (a dataset that grew or shrank on purpose).
  bool accept_changed_source_length = false;
};

/// Throws StateError unless the pipeline recorded as `here` may restore a checkpoint of `saved`:
/// it names the nodes only the checkpoint has, those only this pipeline has, those whose element
/// type changed, and then the settings that changed.
void check_pipeline(const std::vector<PipelineNode>& saved, const std::vector<PipelineNode>& here,
                    const PipelineMatch& match);

}  // namespace dpipe::graph
