// RingSink.

#include "ring_sink.hpp"

#include <algorithm>
#include <cstring>
#include <utility>

namespace dpipe::detail::transport {
namespace {

/// The smallest room worth claiming for the next part of a long payload.
constexpr std::size_t kPartBytes = std::size_t{64} << 10;

}  // namespace

RingSink::RingSink(RingMemory memory, Endpoint endpoint, Bell* reader_bell, std::string reader, Mode mode,
                   std::uint64_t element_budget, const ElementHandoff* handoff)
    : writer_(memory),
      endpoint_(endpoint),
      reader_bell_(reader_bell),
      reader_(std::move(reader)),
      mode_(mode),
      element_budget_(element_budget),
      handoff_(handoff),
      bytes_(static_cast<ByteSink&>(*this)) {}

RingSink::~RingSink() { drop_spilled(); }

bool RingSink::claim(std::size_t min_payload) {
  min_payload = std::clamp<std::size_t>(min_payload, 8, writer_.max_payload());
  room_ = writer_.claim(min_payload);
  used_ = 0;
  if (!room_.empty()) return true;
  if (mode_ == Mode::kSpilling) return false;
  wake_reader_before_waiting();
  endpoint_.wait(
      [&] {
        writer_.request_wake_for_room(min_payload);
        room_ = writer_.claim(min_payload);
        return !room_.empty();
      },
      [&] { return "waiting for " + reader_ + " to read"; }, Activity::kWaitingForRoom);
  writer_.clear_wake();
  return true;
}

void RingSink::commit(bool more) {
  writer_.commit(kind_, used_, more);
  room_ = {};
  used_ = 0;
}

void RingSink::spill(bool continued) {
  spilling_ = true;
  spilled_.push_back(Spilled{kind_, {}, 0, continued});
}

bool RingSink::has_room() const { return spilled_.empty() && writer_.elements_in_flight() < element_budget_; }

ByteWriter& RingSink::begin() {
  kind_ = RecordKind::kElement;
  spilling_ = false;
  if (!has_room() || !claim(last_element_)) spill(false);
  last_element_ = 0;
  return bytes_;
}

void RingSink::end() {
  ++elements_ended_;
  if (spilling_) {
    spilling_ = false;
    if (!spilled_.back().continued) ++spilled_elements_;
    return;
  }
  last_element_ += used_;
  commit(false);
  // Each element is visible as soon as it is complete; the reader is woken when it asked to be,
  // and at the latest when this writer is about to wait.
  writer_.publish();
  reader_owed_ring_ = !writer_.reader_wants_wake();
  if (!reader_owed_ring_) reader_bell_->ring();
}

void RingSink::end_handle(std::uint64_t held_bytes) {
  end();
  count_held(held_bytes);
}

void RingSink::end_referencing(std::uint64_t referenced_bytes) {
  end();
  count_held(held_record_bytes(last_element_) + referenced_bytes);  // end() totalled the element's parts
}

void RingSink::count_held(std::uint64_t held_bytes) {
  if (!counting_held_) return;
  held_.push_back(held_bytes);
  held_total_ += held_bytes;
}

std::uint64_t RingSink::bytes_in_flight() {
  if (!counting_held_) return writer_.bytes_in_flight();
  // The reader releases elements in the order they were written: the oldest counts go first.
  const std::uint64_t in_flight = writer_.elements_in_flight();
  while (held_.size() > in_flight) {
    held_total_ -= held_.front();
    held_.pop_front();
  }
  return held_total_;
}

void RingSink::write(const void* data, std::size_t size) {
  const auto* bytes = static_cast<const std::byte*>(data);
  while (size > 0) {
    if (spilling_) {
      auto& spilled = spilled_.back().bytes;
      spilled.insert(spilled.end(), bytes, bytes + size);
      return;
    }
    if (used_ == room_.size()) {
      last_element_ += used_;
      commit(true);
      publish_and_ring();
      if (!claim(std::min(size, kPartBytes))) {
        spill(true);
        continue;
      }
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
  spilling_ = false;
  if (!spilled_.empty() || !claim(std::min(payload.size(), kPartBytes))) spill(false);
  if (!payload.empty()) write(payload.data(), payload.size());
  if (spilling_) {
    spilling_ = false;
  } else {
    commit(false);
  }
  flush();
}

bool RingSink::front_may_start() const {
  const Spilled& front = spilled_.front();
  return front.kind != RecordKind::kElement || front.continued || front.sent > 0 ||
         writer_.elements_in_flight() < element_budget_;
}

std::size_t RingSink::front_part_bytes() const {
  const Spilled& front = spilled_.front();
  return std::min(std::max<std::size_t>(front.bytes.size() - front.sent, 1), writer_.max_payload());
}

void RingSink::flush() {
  bool wrote = false;
  while (!spilled_.empty() && front_may_start()) {
    Spilled& record = spilled_.front();
    const auto room = writer_.claim(front_part_bytes());
    if (room.empty()) break;
    const std::size_t part = std::min(record.bytes.size() - record.sent, room.size());
    if (part != 0) std::memcpy(room.data(), record.bytes.data() + record.sent, part);
    record.sent += part;
    const bool more = record.sent < record.bytes.size();
    writer_.commit(record.kind, part, more);
    wrote = true;
    if (!more) {
      if (record.kind == RecordKind::kElement && !record.continued) --spilled_elements_;
      spilled_.pop_front();
    }
  }
  if (wrote || writer_.unpublished() != 0) publish_and_ring();
}

void RingSink::publish_and_ring() {
  if (writer_.unpublished() == 0) return;
  writer_.publish();
  reader_owed_ring_ = false;
  reader_bell_->ring();
}

bool RingSink::can_flush() {
  return !spilled_.empty() && front_may_start() && !writer_.claim(front_part_bytes()).empty();
}

void RingSink::wake_reader_before_waiting() {
  flush();
  if (!reader_owed_ring_) return;
  reader_owed_ring_ = false;
  // The bell may be shared with other writers: ring it only for a reader waiting on this ring.
  if (writer_.reader_starving()) reader_bell_->ring();
}

void RingSink::request_wake_when_unblocked() {
  if (writer_.elements_in_flight() >= element_budget_) {
    writer_.request_wake_for_elements(element_budget_ - 1);
  } else if (!spilled_.empty()) {
    writer_.request_wake_for_room(front_part_bytes());
  } else {
    writer_.clear_wake();  // nothing blocks it
  }
}

void RingSink::drop_spilled() {
  while (spilled_.size() > 1 || (spilled_.size() == 1 && spilled_.front().sent == 0 && !spilled_.front().continued)) {
    const Spilled& last = spilled_.back();
    if (last.kind == RecordKind::kElement && !last.continued) {
      --spilled_elements_;
      if (handoff_ != nullptr) handoff_->discard(last.bytes);
    }
    spilled_.pop_back();
  }
}

}  // namespace dpipe::detail::transport
