// GroupPlan: how elements leave and enter the children, and what they are called.

#include "plan.hpp"

#include <fmt/format.h>

#include <dpipe/core/element_codec.hpp>
#include <dpipe/core/element_handoff.hpp>
#include <dpipe/core/element_ops.hpp>
#include <dpipe/core/typed_op.hpp>

namespace dpipe::detail::mp {

std::string worker_name(const GroupConfig& config, std::size_t worker_id) {
  return fmt::format("worker {} {}", config.threads ? "thread" : "process", worker_id);
}

std::string dispatcher_name(const GroupConfig& config) {
  return config.threads ? "dispatching thread" : "dispatching process";
}

const ElementHandoff* GroupPlan::handoff(const DataPipePtr& node) const {
  return config.threads ? &apply_typed_op<ops::Handoff>(node) : nullptr;
}

std::unique_ptr<ElementEncoder> GroupPlan::encoder(const DataPipePtr& node) const {
  if (const auto* handles = handoff(node)) return handles->encoder(node);
  return apply_typed_op<ops::Encode>(node);
}

DataPipePtr GroupPlan::receiver(const DataPipePtr& node, std::shared_ptr<RecordSource> source, std::string name) const {
  if (const auto* handles = handoff(node)) return handles->receiver(std::move(source), std::move(name));
  return apply_typed_op<ops::Decode>(node, std::move(source), std::move(name));
}

}  // namespace dpipe::detail::mp
