// RingWriter and RingReader.

#include "ring.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>

#include <dpipe/core/error.hpp>

namespace dpipe::detail::transport {
namespace {

std::int64_t now_ns() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void write_header(std::byte* at, RecordKind kind, std::size_t size, bool more) noexcept {
  const RecordHeader header{static_cast<std::uint32_t>(size), kind, static_cast<std::uint8_t>(more ? 1 : 0), 0};
  std::memcpy(at, &header, sizeof(header));
}

}  // namespace

std::span<std::byte> RingWriter::claim(std::size_t min_payload) noexcept {
  const std::size_t capacity = memory_.capacity;
  const std::size_t need = sizeof(RecordHeader) + padded(std::max<std::size_t>(min_payload, 1));
  for (;;) {
    std::size_t free = capacity - static_cast<std::size_t>(head_ - tail_seen_);
    const std::size_t offset = static_cast<std::size_t>(head_ & (capacity - 1));
    const std::size_t contiguous = capacity - offset;
    const std::size_t wanted = contiguous >= need ? need : contiguous + need;
    if (free < wanted) {
      tail_seen_ = memory_.header->tail.load(std::memory_order_acquire);
      free = capacity - static_cast<std::size_t>(head_ - tail_seen_);
      if (free < wanted) return {};
    }
    if (contiguous < need) {
      // Pad to the end of the data area; the record starts over at offset 0.
      write_header(memory_.data + offset, RecordKind::kPad, contiguous - sizeof(RecordHeader), false);
      head_ += contiguous;
      continue;
    }
    claimed_ = head_;
    const std::size_t room = std::min({contiguous, free, max_payload() + sizeof(RecordHeader)}) - sizeof(RecordHeader);
    return {memory_.data + offset + sizeof(RecordHeader), room};
  }
}

void RingWriter::commit(RecordKind kind, std::size_t size, bool more) noexcept {
  write_header(memory_.data + (claimed_ & (memory_.capacity - 1)), kind, size, more);
  head_ = claimed_ + sizeof(RecordHeader) + padded(size);
  if (kind == RecordKind::kElement && !more) ++elements_written_;
}

bool RingWriter::try_write(RecordKind kind, std::span<const std::byte> payload) noexcept {
  const auto room = claim(payload.size());
  if (room.size() < payload.size() || room.empty()) return false;
  if (!payload.empty()) std::memcpy(room.data(), payload.data(), payload.size());
  commit(kind, payload.size(), false);
  publish();
  return true;
}

void RingWriter::request_wake_for_room(std::size_t min_payload) noexcept {
  // Claiming `need` bytes may take a padding run up to the end of the area as well.
  const std::size_t need = sizeof(RecordHeader) + padded(std::max<std::size_t>(min_payload, 1));
  const std::uint64_t free_wanted = std::min<std::uint64_t>(need * 2, memory_.capacity);
  // free = capacity - (head - tail) reaches free_wanted when tail reaches head + free_wanted - capacity.
  const std::uint64_t at_tail = head_ + free_wanted > memory_.capacity ? head_ + free_wanted - memory_.capacity : 0;
  memory_.header->wake_writer_at_tail.store(at_tail, std::memory_order_relaxed);
  memory_.header->wake_writer_for.store(0, std::memory_order_relaxed);
}

void RingWriter::request_wake_for_elements(std::uint64_t elements, std::uint64_t bytes) noexcept {
  // At most `elements` in flight once released - held reaches written - elements, and at most
  // `bytes` once tail - held bytes reaches head - bytes; modular: the reader may hold more than
  // it released (restored elements).
  memory_.header->wake_writer_at_tail.store(UINT64_MAX, std::memory_order_relaxed);
  memory_.header->wake_writer_at_elements.store(elements_written_ - elements, std::memory_order_relaxed);
  memory_.header->wake_writer_at_unheld_tail.store(head_ - bytes, std::memory_order_relaxed);
  memory_.header->wake_writer_for.store(kWakeForElements | (bytes == UINT64_MAX ? 0 : kWakeForBytes),
                                        std::memory_order_release);
}

void RingWriter::clear_wake() noexcept {
  memory_.header->wake_writer_at_tail.store(UINT64_MAX, std::memory_order_relaxed);
  memory_.header->wake_writer_for.store(0, std::memory_order_relaxed);
}

bool RingWriter::reader_wants_wake() const noexcept {
  std::atomic_thread_fence(std::memory_order_seq_cst);  // orders the publication before the checks
  const RingHeader& header = *memory_.header;
  if (header.reader_starving.load(std::memory_order_relaxed) == 0) return false;
  const std::uint64_t wanted = reader_batch_ != 0
                                   ? header.reader_waits_from.load(std::memory_order_relaxed) + reader_batch_
                                   : header.wake_reader_at_elements.load(std::memory_order_relaxed);
  return elements_written_ >= wanted || head_ - header.tail.load(std::memory_order_relaxed) >= memory_.capacity / 4 ||
         now_ns() - header.reader_waits_since.load(std::memory_order_relaxed) >= kReaderBatchWait.count();
}

void RingReader::start_waiting(std::uint64_t elements) noexcept {
  RingHeader& header = *memory_.header;
  header.reader_waits_from.store(released_elements_, std::memory_order_relaxed);
  header.wake_reader_at_elements.store(released_elements_ + elements, std::memory_order_relaxed);
  header.reader_waits_since.store(now_ns(), std::memory_order_relaxed);
  header.reader_starving.store(1, std::memory_order_release);
}

std::optional<RingReader::Record> RingReader::peek() {
  const std::size_t capacity = memory_.capacity;
  for (;;) {
    if (tail_ == head_seen_) {
      head_seen_ = memory_.header->head.load(std::memory_order_acquire);
      if (tail_ == head_seen_) return std::nullopt;
    }
    const std::size_t offset = static_cast<std::size_t>(tail_ & (capacity - 1));
    RecordHeader header{};
    std::memcpy(&header, memory_.data + offset, sizeof(header));
    if (header.size > capacity - offset - sizeof(RecordHeader) || header.kind > RecordKind::kRestored) {
      DPIPE_THROW(Error, "dpipe internal error: a shared-memory queue is corrupt (record of {} bytes, kind {})",
                  header.size, static_cast<int>(header.kind));
    }
    if (header.kind == RecordKind::kPad) {
      tail_ += sizeof(RecordHeader) + header.size;
      memory_.header->tail.store(tail_, std::memory_order_release);
      continue;
    }
    return Record{header.kind,
                  header.more != 0,
                  {memory_.data + offset + sizeof(RecordHeader), static_cast<std::size_t>(header.size)}};
  }
}

bool RingReader::release(const Record& record) noexcept {
  tail_ += sizeof(RecordHeader) + padded(record.payload.size());
  if (record.kind == RecordKind::kElement && !record.more) {
    memory_.header->released_elements.store(++released_elements_, std::memory_order_release);
  }
  memory_.header->tail.store(tail_, std::memory_order_release);
  return writer_wants_wake();
}

void RingReader::hold(std::size_t payload) noexcept {
  held_bytes_ += held_record_bytes(payload);
  memory_.header->held_bytes.store(held_bytes_, std::memory_order_release);
  memory_.header->held_elements.store(++held_elements_, std::memory_order_release);
}

bool RingReader::let_go(std::size_t payload) noexcept {
  memory_.header->held_elements.store(--held_elements_, std::memory_order_release);
  held_bytes_ -= held_record_bytes(payload);
  memory_.header->held_bytes.store(held_bytes_, std::memory_order_release);
  return writer_wants_wake();
}

bool RingReader::writer_wants_wake() const noexcept {
  std::atomic_thread_fence(std::memory_order_seq_cst);  // orders the stores before the checks
  const RingHeader& header = *memory_.header;
  if (tail_ >= header.wake_writer_at_tail.load(std::memory_order_relaxed)) return true;
  const std::uint32_t wanted = header.wake_writer_for.load(std::memory_order_acquire);
  // `value` reached `at`, in modular arithmetic.
  const auto reached = [](std::uint64_t value, const std::atomic<std::uint64_t>& at) {
    return static_cast<std::int64_t>(value - at.load(std::memory_order_relaxed)) >= 0;
  };
  return ((wanted & kWakeForElements) != 0 &&
          reached(released_elements_ - held_elements_, header.wake_writer_at_elements)) ||
         ((wanted & kWakeForBytes) != 0 && reached(tail_ - held_bytes_, header.wake_writer_at_unheld_tail));
}

}  // namespace dpipe::detail::transport
