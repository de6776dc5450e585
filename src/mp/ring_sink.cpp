// RingSink.

#include "ring_sink.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <utility>

namespace dpipe::detail::mp {
namespace {

/// The smallest room worth claiming for the next part of a long payload.
constexpr std::size_t kPartBytes = std::size_t{64} << 10;

}  // namespace

RingSink::RingSink(RingMemory memory, Endpoint endpoint, Bell* reader_bell, std::string reader)
    : writer_(memory),
      endpoint_(endpoint),
      reader_bell_(reader_bell),
      reader_(std::move(reader)),
      bytes_(static_cast<ByteSink&>(*this)) {}

void RingSink::claim(std::size_t min_payload) {
  min_payload = std::clamp<std::size_t>(min_payload, 8, writer_.max_payload());
  room_ = writer_.claim(min_payload);
  used_ = 0;
  if (!room_.empty()) return;
  wake_reader_before_waiting();
  endpoint_.wait(
      [&] {
        writer_.request_wake_for_room(min_payload);
        room_ = writer_.claim(min_payload);
        return !room_.empty();
      },
      [&] { return "waiting for " + reader_ + " to read"; });
  writer_.clear_wake();
}

void RingSink::commit(bool more) {
  writer_.commit(kind_, used_, more);
  room_ = {};
  used_ = 0;
}

ByteWriter& RingSink::begin() {
  kind_ = RecordKind::kElement;
  claim(last_element_);
  last_element_ = 0;
  return bytes_;
}

void RingSink::end() {
  last_element_ += used_;
  commit(false);
  // Each element is visible as soon as it is complete; the reader is woken when it asked to be,
  // and at the latest when this writer is about to wait.
  writer_.publish();
  reader_owed_ring_ = !writer_.reader_wants_wake();
  if (!reader_owed_ring_) reader_bell_->ring();
}

void RingSink::write(const void* data, std::size_t size) {
  const auto* bytes = static_cast<const std::byte*>(data);
  while (size > 0) {
    if (used_ == room_.size()) {
      last_element_ += used_;
      commit(true);
      flush();
      claim(std::min(size, kPartBytes));
    }
    const std::size_t chunk = std::min(size, room_.size() - used_);
    std::memcpy(room_.data() + used_, bytes, chunk);
    used_ += chunk;
    bytes += chunk;
    size -= chunk;
  }
}

void RingSink::write_record(RecordKind kind, std::span<const std::byte> payload) {
  kind_ = kind;
  claim(std::min(payload.size(), kPartBytes));
  if (!payload.empty()) write(payload.data(), payload.size());
  commit(false);
  flush();
}

void RingSink::flush() {
  if (writer_.unpublished() == 0) return;
  writer_.publish();
  reader_owed_ring_ = false;
  reader_bell_->ring();
}

void RingSink::wake_reader_before_waiting() {
  flush();
  if (!reader_owed_ring_) return;
  reader_owed_ring_ = false;
  // The bell may be shared with other writers: ring it only for a reader waiting on this ring.
  if (writer_.reader_starving()) reader_bell_->ring();
}

}  // namespace dpipe::detail::mp
