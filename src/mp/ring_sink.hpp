#pragma once
// RingSink: writes records into a ring, blocking (with liveness checks) while the ring is full, and
// encodes elements straight into the shared memory: one copy in. Private to the library.

#include <cstddef>
#include <span>
#include <string>

#include <dpipe/core/element_codec.hpp>

#include "endpoint.hpp"
#include "ring.hpp"

namespace dpipe::detail::mp {

/// Thread-safety: one producer thread.
class RingSink final : public ElementSink, private ByteSink {
 public:
  /// Writes into `memory`; waits through `endpoint`; rings `reader_bell` when it publishes.
  /// `reader` names the reading process in messages ("the main process").
  RingSink(RingMemory memory, Endpoint endpoint, Bell* reader_bell, std::string reader);
  RingSink(const RingSink&) = delete;
  RingSink& operator=(const RingSink&) = delete;

  ByteWriter& begin() override;
  void end() override;

  /// Writes a whole record, in several parts when it is longer than one record holds.
  void write_record(RecordKind kind, std::span<const std::byte> payload);
  /// Publishes what was written and wakes the reader if it sleeps. Elements end() published are
  /// left to the reader's batching: it is woken once it has the elements it asked for.
  void flush();
  /// flush(), and wakes the reader for elements published without a wake-up: call it before this
  /// writer waits, since nothing else would wake a reader that asked for more than it got.
  void wake_reader_before_waiting();

  [[nodiscard]] RingWriter& writer() noexcept { return writer_; }
  [[nodiscard]] const RingWriter& writer() const noexcept { return writer_; }

 private:
  void write(const void* data, std::size_t size) override;
  /// Claims room for at least `min_payload` bytes, waiting for the reader when needed.
  void claim(std::size_t min_payload);
  void commit(bool more);

  RingWriter writer_;
  Endpoint endpoint_;
  Bell* reader_bell_;
  std::string reader_;
  ByteWriter bytes_;
  RecordKind kind_ = RecordKind::kElement;
  std::span<std::byte> room_;
  std::size_t used_ = 0;
  std::size_t last_element_ = 0;   // the size of the previous element: claim that much next time
  bool reader_owed_ring_ = false;  // elements were published without waking the reader
};

}  // namespace dpipe::detail::mp
