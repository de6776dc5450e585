#pragma once
// RingSink: writes records into a ring and encodes elements straight into the shared memory (one
// copy in). A blocking sink (a worker's) waits, with liveness checks, while the ring is full; a
// spilling sink (the dispatching process's, which must never block on one slow worker while
// another starves) keeps what does not fit in a spill queue and moves it into the ring as room
// appears. Private to the library.

#include <cstddef>
#include <cstdint>
#include <deque>
#include <span>
#include <string>
#include <vector>

#include <dpipe/core/element_codec.hpp>
#include <dpipe/core/element_handoff.hpp>

#include "transport/endpoint.hpp"
#include "transport/ring.hpp"

namespace dpipe::detail::transport {

/// Thread-safety: one producer thread.
class RingSink final : public ElementSink, private ByteSink {
 public:
  enum class Mode { kBlocking, kSpilling };

  /// Writes into `memory`; waits through `endpoint`; rings `reader_bell` when it publishes.
  /// `reader` names the reading process in messages ("the main process"). A spilling sink starts
  /// an element in the ring only while fewer than `element_budget` elements are in flight. With
  /// `handoff`, elements are handles (worker threads): a spilled one that is dropped is discarded.
  RingSink(RingMemory memory, Endpoint endpoint, Bell* reader_bell, std::string reader, Mode mode = Mode::kBlocking,
           std::uint64_t element_budget = UINT64_MAX, const ElementHandoff* handoff = nullptr);
  RingSink(const RingSink&) = delete;
  RingSink& operator=(const RingSink&) = delete;
  /// Drops what is spilled (drop_spilled()).
  ~RingSink();

  ByteWriter& begin() override;
  void end() override;
  /// end(), counting `held_bytes` for the element while it is in flight once count_held_bytes()
  /// was called.
  void end_handle(std::uint64_t held_bytes) override;
  /// end(), counting the element's record and `referenced_bytes` (the memory it refers to outside
  /// the ring, a tensor arena's blocks) while it is in flight once count_held_bytes() was called.
  void end_referencing(std::uint64_t referenced_bytes);

  /// From now on, counts what the handed-over elements in flight hold, by their end_handle()
  /// counts: a sink of handles, whose ring says nothing of the elements' size.
  void count_held_bytes() noexcept { counting_held_ = true; }
  [[nodiscard]] bool counts_held_bytes() const noexcept { return counting_held_; }
  /// What the elements in flight take: what they hold once count_held_bytes() was called, else
  /// their records in the ring.
  [[nodiscard]] std::uint64_t bytes_in_flight();

  /// Writes a whole record, in several parts when it is longer than one record holds.
  void write_record(RecordKind kind, std::span<const std::byte> payload);
  /// Publishes what was written and wakes the reader if it sleeps; a spilling sink first moves
  /// what it spilled into the ring as far as there is room (and element budget). Elements end()
  /// published are left to the reader's batching: it is woken once it has the elements it asked
  /// for.
  void flush();
  /// flush(), and wakes the reader for elements published without a wake-up: call it before this
  /// writer waits, since nothing else would wake a reader that asked for more than it got.
  void wake_reader_before_waiting();

  /// Whether an element written now goes straight into the ring: nothing is spilled and the
  /// element budget allows another.
  [[nodiscard]] bool has_room() const;
  /// Whether flush() would move a spilled record into the ring now.
  [[nodiscard]] bool can_flush();
  /// Whether records wait in the spill queue, and how many of them are elements.
  [[nodiscard]] bool has_spilled() const noexcept { return !spilled_.empty(); }
  [[nodiscard]] std::size_t spilled_elements() const noexcept { return spilled_elements_; }
  /// Asks the reader to ring this writer's bell when what keeps spilled records out of the ring
  /// clears (room, or the element budget); clear_wake() after the wait.
  void request_wake_when_unblocked();
  /// Drops the spilled records, but a record partly in the ring, which must be finished (its
  /// reader drops a record only whole).
  void drop_spilled();

  [[nodiscard]] RingWriter& writer() noexcept { return writer_; }
  /// The elements ended (end() or end_handle()) since this sink was made.
  [[nodiscard]] std::uint64_t elements_ended() const noexcept { return elements_ended_; }

 private:
  /// A record, or the rest of one, waiting for room; `sent` bytes of it are in the ring already.
  struct Spilled {
    RecordKind kind = RecordKind::kElement;
    std::vector<std::byte> bytes;
    std::size_t sent = 0;
    bool continued = false;  // its first part is in the ring: no element budget applies
  };

  void write(const void* data, std::size_t size) override;
  /// Counts `held_bytes` for the element just ended, once count_held_bytes() was called.
  void count_held(std::uint64_t held_bytes);
  /// Claims room for at least `min_payload` bytes: waiting for the reader when blocking; false
  /// when a spilling sink has no room now.
  bool claim(std::size_t min_payload);
  void commit(bool more);
  /// Starts spilling the current record (the rest of it when `continued`).
  void spill(bool continued);
  /// Whether the spilled record at the front may move into the ring now (the flush gate).
  [[nodiscard]] bool front_may_start() const;
  /// The room the next part of the spilled record at the front takes: all of the rest when one
  /// record holds it (at least one byte, for an empty record).
  [[nodiscard]] std::size_t front_part_bytes() const;
  void publish_and_ring();

  RingWriter writer_;
  Endpoint endpoint_;
  Bell* reader_bell_;
  std::string reader_;
  Mode mode_;
  std::uint64_t element_budget_;
  const ElementHandoff* handoff_;
  ByteWriter bytes_;
  RecordKind kind_ = RecordKind::kElement;
  std::span<std::byte> room_;
  std::size_t used_ = 0;
  std::size_t last_element_ = 0;   // the size of the previous element: claim that much next time
  bool reader_owed_ring_ = false;  // elements were published without waking the reader
  bool spilling_ = false;          // the current record goes to the spill queue
  std::deque<Spilled> spilled_;
  std::size_t spilled_elements_ = 0;
  bool counting_held_ = false;
  std::deque<std::uint64_t> held_;  // per element written and maybe in flight, oldest first
  std::uint64_t held_total_ = 0;    // their sum
  std::uint64_t elements_ended_ = 0;
};

}  // namespace dpipe::detail::transport
