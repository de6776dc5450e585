// ShardingSettings: torchdata's ShardingFilter.apply_sharding rules.

#include <dpipe/iter/sharding.hpp>

namespace dpipe::detail {

void ShardingSettings::apply(std::size_t num_instances, std::size_t instance_id, ShardingPriority group) {
  if (instance_id >= num_instances) {
    DPIPE_THROW(InvalidArgument, "instance_id({}) should be smaller than num_of_instances({})", instance_id,
                num_instances);
  }
  const bool has_default = groups_.contains(ShardingPriority::kDefault);
  const bool mixes = group == ShardingPriority::kDefault ? !groups_.empty() && !has_default : has_default;
  if (mixes) DPIPE_THROW(UsageError, "ShardingFilter cannot mix DEFAULT and non DEFAULT groups");
  groups_[group] = {num_instances, instance_id};

  // Highest priority first: MULTIPROCESSING varies fastest, so instance = worker + workers * rank.
  num_instances_ = 1;
  instance_id_ = 0;
  for (auto it = groups_.rbegin(); it != groups_.rend(); ++it) {
    if (group_filter_ && it->first != *group_filter_) continue;
    instance_id_ += num_instances_ * it->second.second;
    num_instances_ *= it->second.first;
  }
}

}  // namespace dpipe::detail
