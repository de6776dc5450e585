// What a checkpoint records of a pipeline, and whether another pipeline may restore it.

#include <algorithm>
#include <map>
#include <string>
#include <string_view>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <dpipe/core/error.hpp>
#include <dpipe/core/type_name.hpp>
#include <dpipe/graph/pipeline_record.hpp>
#include <dpipe/graph/state.hpp>

namespace dpipe::graph {
namespace {

/// The nodes with settings of `nodes`, by configured_path: what a checkpoint that replays its
/// epoch must match (it restores no node state, so a node that only keeps state, such as a map
/// that skips failed elements, may come or go).
std::vector<PipelineNode> configured_nodes(const std::vector<PipelineNode>& nodes) {
  std::vector<PipelineNode> configured;
  for (const auto& node : nodes) {
    if (!node.settings.empty()) configured.push_back({node.configured_path, {}, node.element_type, node.settings});
  }
  return configured;
}

/// "a (int), b (long int)", at most four of them.
std::string describe_nodes(const std::vector<const PipelineNode*>& nodes) {
  constexpr std::size_t kShown = 4;
  std::string text;
  for (std::size_t i = 0; i < nodes.size() && i < kShown; ++i) {
    text += fmt::format("{}{} ({})", i == 0 ? "" : ", ", nodes[i]->path, nodes[i]->element_type);
  }
  if (nodes.size() > kShown) text += fmt::format(" and {} more", nodes.size() - kShown);
  return text;
}

/// The setting named `name` of `settings`, or nullptr.
const std::string* find_setting(const NodeSettings& settings, const std::string& name) {
  const auto found = std::ranges::find(settings, name, &NodeSettings::value_type::first);
  return found == settings.end() ? nullptr : &found->second;
}

/// The settings that differ between a checkpoint and this pipeline.
struct SettingChanges {
  std::vector<std::string> texts;  // "batch: batch_size 32 in the checkpoint, 16 here"
  bool length = false;             // a source's length is among them
};

/// Adds each setting of `saved` that `here` does not share to `changes`; a source's length only
/// unless `match` accepts a changed one.
void compare_settings(const PipelineNode& saved, const PipelineNode& here, const PipelineMatch& match,
                      SettingChanges& changes) {
  const std::string none = "(none)";
  const auto add = [&](const std::string& name, const std::string& before, const std::string& now) {
    if (name == "length") {
      if (match.accept_changed_source_length) return;
      changes.length = true;
    }
    changes.texts.push_back(fmt::format("{}: {} {} in the checkpoint, {} here", saved.path, name, before, now));
  };
  for (const auto& [name, value] : saved.settings) {
    const std::string* ours = find_setting(here.settings, name);
    if (ours == nullptr || *ours != value) add(name, value, ours != nullptr ? *ours : none);
  }
  for (const auto& [name, value] : here.settings) {
    if (find_setting(saved.settings, name) == nullptr) add(name, none, value);
  }
}

void check_nodes(const std::vector<PipelineNode>& saved, const std::vector<PipelineNode>& here,
                 const PipelineMatch& match) {
  std::map<std::string_view, const PipelineNode*> here_by_path;
  for (const auto& node : here) here_by_path.emplace(node.path, &node);
  std::vector<const PipelineNode*> only_saved;
  std::vector<std::string> retyped;
  SettingChanges changed_settings;
  for (const auto& node : saved) {
    const auto found = here_by_path.find(node.path);
    if (found == here_by_path.end()) {
      only_saved.push_back(&node);
      continue;
    }
    // An older dpipe may have saved a type's long spelling: compare the names users write.
    const std::string saved_type = dpipe::detail::tidy_type_name(node.element_type);
    if (found->second->element_type != saved_type) {
      retyped.push_back(
          fmt::format("{} yields {} in the checkpoint, {} here", node.path, saved_type, found->second->element_type));
    }
    compare_settings(node, *found->second, match, changed_settings);
    here_by_path.erase(found);
  }
  std::vector<const PipelineNode*> only_here;
  for (const auto& node : here) {
    if (here_by_path.contains(node.path)) only_here.push_back(&node);
  }
  std::vector<std::string> differences;
  if (!only_saved.empty()) differences.push_back("only in the checkpoint: " + describe_nodes(only_saved));
  if (!only_here.empty()) differences.push_back("only in this pipeline: " + describe_nodes(only_here));
  for (auto& change : retyped) differences.push_back(std::move(change));
  if (!differences.empty()) {
    DPIPE_THROW(StateError,
                "the checkpoint was saved from a different pipeline (nodes by path; {}); restore it into a loader "
                "built by the same code",
                fmt::join(differences, "; "));
  }
  if (changed_settings.texts.empty()) return;
  DPIPE_THROW(StateError,
              "the checkpoint was saved from a pipeline with other settings ({}); restore it into a loader built with "
              "the same settings{}",
              fmt::join(changed_settings.texts, "; "),
              changed_settings.length ? ", or accept a source whose length changed on purpose with "
                                        "RestoreOptions::accept_changed_source_length"
                                      : "");
}

}  // namespace

std::vector<PipelineNode> record_pipeline(const DataPipePtr& root) {
  std::vector<PipelineNode> nodes;
  for (const auto& entry : node_paths(root)) {
    auto settings = entry.node->settings();
    if (entry.node->stateless() && settings.empty()) continue;
    nodes.push_back({entry.settings_path, entry.configured_path, entry.node->element_type(), std::move(settings)});
  }
  return nodes;
}

std::string describe_pipeline(const std::vector<PipelineNode>& nodes) {
  std::string text;
  for (const auto& node : nodes) {
    text += fmt::format("{} ({})", node.path, node.element_type);
    for (const auto& [name, value] : node.settings) text += fmt::format(" {}={}", name, value);
    text += '\n';
  }
  return text;
}

void check_pipeline(const std::vector<PipelineNode>& saved, const std::vector<PipelineNode>& here,
                    const PipelineMatch& match) {
  if (match.settings_only) {
    check_nodes(configured_nodes(saved), configured_nodes(here), match);
  } else {
    check_nodes(saved, here, match);
  }
}

}  // namespace dpipe::graph
