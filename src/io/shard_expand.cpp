#include <charconv>
#include <cstdint>

#include <dpipe/core/error.hpp>
#include <dpipe/io/shard_expand.hpp>

namespace dpipe::io {
namespace {

/// A range "{digits..digits}" in a pattern.
struct Range {
  std::size_t begin = 0;  // the '{'
  std::size_t end = 0;    // one past the '}'
  std::string_view low{};
  std::string_view high{};
};

bool is_digit(char c) noexcept { return c >= '0' && c <= '9'; }

std::size_t digits_from(std::string_view text, std::size_t at) noexcept {
  std::size_t end = at;
  while (end < text.size() && is_digit(text[end])) ++end;
  return end;
}

/// The first range in `text` (as the regex \{[0-9]+\.\.[0-9]+\} finds it), or none.
std::optional<Range> find_range(std::string_view text) noexcept {
  for (auto open = text.find('{'); open != std::string_view::npos; open = text.find('{', open + 1)) {
    const auto low_end = digits_from(text, open + 1);
    if (low_end == open + 1 || text.substr(low_end, 2) != "..") continue;
    const auto high_end = digits_from(text, low_end + 2);
    if (high_end == low_end + 2 || high_end >= text.size() || text[high_end] != '}') continue;
    return Range{open, high_end + 1, text.substr(open + 1, low_end - open - 1),
                 text.substr(low_end + 2, high_end - low_end - 2)};
  }
  return std::nullopt;
}

std::uint64_t number(std::string_view digits, std::string_view pattern) {
  std::uint64_t value = 0;
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (error != std::errc{} || end != digits.data() + digits.size())
    DPIPE_THROW(InvalidArgument, "shard_expand: the bound {} in shard spec {} is too large", digits, pattern);
  return value;
}

}  // namespace

std::vector<std::string> expand_shards(std::string_view pattern) {
  const auto range = find_range(pattern);
  if (!range) return {std::string(pattern)};
  const bool padded = range->low.size() == range->high.size() && range->low.front() == '0';
  if (!padded) {
    if (range->low.size() > range->high.size())
      DPIPE_THROW(InvalidArgument, "shard_expand: low bound must be shorter than high bound");
    if (range->low.front() == '0' && range->low != "0")
      DPIPE_THROW(InvalidArgument, "shard_expand: low bound must not start with 0 if low bound is shorter");
  }
  const auto low = number(range->low, pattern);
  const auto high = number(range->high, pattern);
  if (low >= high) DPIPE_THROW(InvalidArgument, "shard_expand: bad range in in shard spec {}.", pattern);
  const auto prefix = pattern.substr(0, range->begin);
  const auto rests = expand_shards(pattern.substr(range->end));
  // high - low < kMaxShardNames before the + 1, so neither the count nor the product can wrap.
  if (high - low >= kMaxShardNames || (high - low + 1) * rests.size() > kMaxShardNames)
    DPIPE_THROW(InvalidArgument, "shard_expand: shard spec {} names more than {} shards", pattern, kMaxShardNames);
  const auto count = high - low + 1;
  std::vector<std::string> paths;
  paths.reserve(static_cast<std::size_t>(count * rests.size()));
  for (std::uint64_t step = 0; step < count; ++step) {
    const auto i = low + step;
    const auto digits = padded ? fmt::format("{:0>{}}", i, range->high.size()) : fmt::format("{}", i);
    for (const auto& rest : rests) paths.push_back(fmt::format("{}{}{}", prefix, digits, rest));
  }
  return paths;
}

}  // namespace dpipe::io
