#pragma once
// Writes a DataPipeGraph as text, "root(input1(...),input2)", naming nodes by test-chosen names.

#include <map>
#include <string>

#include <dpipe/graph/graph.hpp>

namespace dpipe::testing {

class GraphNames {
 public:
  GraphNames& add(const std::string& name, const DataPipePtr& node) {
    names_[node->id()] = name;
    return *this;
  }
  template <class Handle>
  GraphNames& add(const std::string& name, const Handle& handle) {
    return add(name, DataPipePtr(handle.ptr()));
  }

  [[nodiscard]] std::string name(const DataPipePtr& node) const {
    const auto it = names_.find(node->id());
    return it == names_.end() ? std::string(node->name()) : it->second;
  }

  [[nodiscard]] std::string text(const graph::DataPipeGraph& graph) const {
    std::string out;
    for (const auto& entry : graph.entries) {
      if (!out.empty()) out += ",";
      out += name(entry.node);
      if (!entry.inputs.empty()) out += "(" + text(entry.inputs) + ")";
    }
    return out;
  }

  template <class Nodes>
  [[nodiscard]] std::string list(const Nodes& nodes) const {
    std::string out;
    for (const auto& node : nodes) out += (out.empty() ? "" : ",") + name(node);
    return out;
  }

 private:
  std::map<std::uint64_t, std::string> names_;
};

}  // namespace dpipe::testing
