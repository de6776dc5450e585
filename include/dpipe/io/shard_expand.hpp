#pragma once
/// \file
/// `io::shard_expand()` (torchdata's ShardExpander): each brace pattern such as
/// "train-{000..127}.tar" becomes the paths it names. Checkpoint state: the expansions of the
/// current pattern not yet handed out.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <dpipe/core/adaptor.hpp>
#include <dpipe/core/iter_datapipe.hpp>
#include <dpipe/core/iter_pipe.hpp>
#include <dpipe/iter/detail/expanding.hpp>

namespace dpipe::io {

/// The most names one pattern may expand to: a larger range is a typo, not a dataset.
inline constexpr std::uint64_t kMaxShardNames = 1'000'000;

/// The strings `pattern` names, as torchdata expands them: every `{lo..hi}` (decimal, lo < hi) is
/// replaced by each number from lo to hi in turn, the leftmost range varying slowest. When both
/// bounds have the same length and lo starts with 0, the numbers are zero-padded to that length
/// ("{08..10}" -> 08 09 10); otherwise they are not ("{8..10}" -> 8 9 10). A pattern without a
/// range is itself. InvalidArgument (torchdata's messages) for lo >= hi, a lo longer than hi, or
/// a shorter lo starting with 0, and for a pattern naming more than kMaxShardNames strings.
/// Thread-safety: a pure function.
[[nodiscard]] std::vector<std::string> expand_shards(std::string_view pattern);

/// Yields the expansions of each pattern its source yields, in order. Thread-safety: one
/// iterating thread.
class ShardExpander final : public dpipe::detail::ExpandingPipe<std::string, ShardExpander> {
  using Base = dpipe::detail::ExpandingPipe<std::string, ShardExpander>;
  friend Base;

 public:
  static constexpr std::string_view kName = "shard_expand";

  explicit ShardExpander(const IterPipe<std::string>& patterns) : Base(std::string(kName)), patterns_(patterns.ptr()) {}

  void for_each_input(const InputVisitor& visit) override { visit(patterns_); }
  [[nodiscard]] DataPipePtr clone_self() const override { return std::make_shared<ShardExpander>(*this); }

 private:
  bool expand(std::vector<std::string>& run) {
    auto pattern = patterns_.next();
    if (!pattern) return false;
    run = expand_shards(*pattern);
    return true;
  }

  Input<std::string> patterns_;
};

/// `patterns | io::shard_expand()`.
[[nodiscard]] inline auto shard_expand() {
  return PipeAdaptor{[](const IterPipe<std::string>& patterns) { return make_iter<ShardExpander>(patterns); }};
}

}  // namespace dpipe::io
