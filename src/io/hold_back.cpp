#include "io/hold_back.hpp"

#include <algorithm>
#include <cstring>
#include <memory>
#include <utility>

#include <dpipe/core/error.hpp>

namespace dpipe::io::detail {
namespace {

constexpr std::size_t kBlock = std::size_t{256} << 10;

}  // namespace

HoldBackSource::HoldBackSource(std::unique_ptr<CheckedSource> inner, std::uint64_t hold_back)
    : inner_(std::move(inner)), hold_back_(hold_back) {}

bool HoldBackSource::fill() {
  if (chunks_.empty() || chunks_.back().size == kBlock) {
    Chunk chunk;
    if (spare_.empty()) {
      chunk.bytes = std::make_unique_for_overwrite<char[]>(kBlock);
    } else {
      chunk.bytes = std::move(spare_.back());
      spare_.pop_back();
    }
    chunks_.push_back(std::move(chunk));
  }
  auto& back = chunks_.back();
  const std::size_t got = read_source(back.bytes.get() + back.size, kBlock - back.size);
  back.size += got;
  held_ += got;
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
  std::uint64_t ready = 0;  // held bytes that may be passed on
  while (ready == 0) {
    const std::uint64_t checked = ended_ ? passed_on_ + held_ : inner_->checked();
    ready = std::min(held_, checked - std::min(checked, passed_on_));
    if (ready > 0) break;
    if (ended_) return 0;
    if (held_ >= hold_back_) {
      ready = held_;  // the unit is longer than hold_back: its bytes go on unchecked
      break;
    }
    ended_ = !fill();
  }
  const auto count = static_cast<std::size_t>(std::min<std::uint64_t>(size, ready));
  for (std::size_t copied = 0; copied < count;) {
    auto& front = chunks_.front();
    const std::size_t piece = std::min(count - copied, front.size - begin_);
    std::memcpy(data + copied, front.bytes.get() + begin_, piece);
    copied += piece;
    begin_ += piece;
    if (begin_ < front.size) continue;
    begin_ = 0;
    if (chunks_.size() == 1) {
      front.size = 0;
    } else {
      spare_.push_back(std::move(front.bytes));
      chunks_.pop_front();
    }
  }
  held_ -= count;
  passed_on_ += count;
  return count;
}

}  // namespace dpipe::io::detail
