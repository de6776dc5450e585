#include "io/hold_back.hpp"

#include <algorithm>
#include <cstring>
#include <utility>

#include <dpipe/core/error.hpp>

namespace dpipe::io::detail {
namespace {

constexpr std::size_t kBlock = std::size_t{256} << 10;

}  // namespace

HoldBackSource::HoldBackSource(std::unique_ptr<CheckedSource> inner, std::uint64_t hold_back)
    : inner_(std::move(inner)), hold_back_(hold_back) {}

bool HoldBackSource::fill() {
  if (begin_ == end_) begin_ = end_ = 0;
  if (held_.size() - end_ < kBlock && begin_ > 0) {
    std::memmove(held_.data(), held_.data() + begin_, end_ - begin_);
    end_ -= std::exchange(begin_, 0);
  }
  if (held_.size() - end_ < kBlock)  // doubling, up to what hold_back needs
    held_.resize(std::max(end_ + kBlock, static_cast<std::size_t>(std::min<std::uint64_t>(
                                             std::uint64_t{held_.size()} * 2, hold_back_ + kBlock))));
  const std::size_t got = read_source(held_.data() + end_, kBlock);
  end_ += got;
  return got > 0;
}

std::size_t HoldBackSource::read_source(char* data, std::size_t size) {
  try {
    return inner_->read(data, size);
  } catch (const SourceFailure& failure) {
    const std::uint64_t checked = inner_->checked();
    if (passed_on_ <= checked) throw;
    throw SourceFailure(
        fmt::format("{} ({} bytes of this {} from offset {} were passed on unchecked: it is longer "
                    "than hold_back, {} bytes)",
                    failure.what(), passed_on_ - checked, inner_->unit(), checked, hold_back_));
  }
}

std::size_t HoldBackSource::read(char* data, std::size_t size) {
  if (hold_back_ == 0) {
    const std::size_t got = read_source(data, size);
    passed_on_ += got;
    return got;
  }
  std::size_t ready = 0;  // held bytes that may be passed on
  while (ready == 0) {
    const std::uint64_t checked = ended_ ? passed_on_ + (end_ - begin_) : inner_->checked();
    ready = static_cast<std::size_t>(std::min<std::uint64_t>(end_ - begin_, checked - std::min(checked, passed_on_)));
    if (ready > 0) break;
    if (ended_) return 0;
    if (end_ - begin_ >= hold_back_) {
      ready = end_ - begin_;  // the unit is longer than hold_back: its bytes go on unchecked
      break;
    }
    ended_ = !fill();
  }
  const std::size_t count = std::min(size, ready);
  std::memcpy(data, held_.data() + begin_, count);
  begin_ += count;
  passed_on_ += count;
  return count;
}

}  // namespace dpipe::io::detail
