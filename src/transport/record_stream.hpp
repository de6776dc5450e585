#pragma once
// RecordStream: the reading side of one ring, with the rules every reader of a child's ring follows.
// It waits through an Endpoint (liveness, timeout), joins a record's parts, follows the epoch
// markers (kResetAck) so that the records of an epoch the reader has left are dropped, keeps what
// it reads ahead while draining for a checkpoint, and reads replies. RecordMerge reads the workers'
// rings with it; the main process reads the dispatching process's replies with it. Private to the
// library.

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <dpipe/core/element_handoff.hpp>
#include <dpipe/core/state.hpp>

#include "transport/endpoint.hpp"
#include "transport/error_report.hpp"
#include "transport/ring.hpp"

namespace dpipe::detail::transport {

/// The payload of a marker record: kResetAck carries the generation its sender started, kPaused
/// the pause request it answers.
[[nodiscard]] std::vector<std::byte> marker_payload(std::uint64_t value);
/// The value a marker record carries; SerializationError when the payload is not one.
[[nodiscard]] std::uint64_t marker_value(std::span<const std::byte> payload);

/// One ring a reader reads, and who writes it.
struct StreamLink {
  using DescribeStall = std::function<std::string(std::chrono::nanoseconds waited, bool timed_out)>;

  StreamLink(RingMemory ring_memory, Bell* writer, Bell* feeder, std::string writer_name,
             Activity waits = Activity::kWaitingForDispatcher, DescribeStall describe = {},
             const ElementHandoff* element_handoff = nullptr, const ExceptionSlot* writer_exception = nullptr)
      : ring(ring_memory),
        writer_bell(writer),
        feeder_bell(feeder),
        name(std::move(writer_name)),
        reader_waits(waits),
        describe_stall(std::move(describe)),
        handoff(element_handoff),
        exception(writer_exception) {}

  RingMemory ring;
  Bell* writer_bell = nullptr;  // rung after a release when the writer asked for it
  Bell* feeder_bell = nullptr;  // if set, rung when this reader starts waiting (it is starving)
  std::string name;             // the writing process: "worker process 1"
  /// What a reading child publishes while it waits on this stream (a worker's feed).
  Activity reader_waits = Activity::kWaitingForDispatcher;
  /// The text of a stall of `waited` on this stream (the TimeoutError's when `timed_out`, else a
  /// warning's); empty: "<name> sent nothing for <waited>".
  DescribeStall describe_stall;
  /// Worker threads: the elements are handles of this type, and the writer leaves the exception
  /// its kError records report here. Null for processes.
  const ElementHandoff* handoff = nullptr;
  const ExceptionSlot* exception = nullptr;
  /// Whether the elements the reader stores (drained for a checkpoint, or restored) count against
  /// the writer's budget until taken (RingReader::hold()). False for a worker's feed: the
  /// dispatching process deals in strict turn and bounds what lags with its spill limit, and
  /// counting there stalls its deal (the dispatching restore sweep hangs).
  bool count_stored = true;
  /// A worker process with a tensor arena: its elements may hold references to the arena's
  /// blocks, each of which must be decoded exactly once (see src/tensor/tensor_arena.hpp). The
  /// reader decodes, with this type's handles, the elements it drops, and turns those it stores
  /// into plain encodings. Null otherwise.
  const ElementHandoff* arena_elements = nullptr;
};

/// Thread-safety: one reading thread.
class RecordStream {
 public:
  /// A record for the consumer: in the ring (release it with release_piece), or joined from parts
  /// or stored, in the caller's buffer.
  struct Piece {
    RecordKind kind = RecordKind::kEnd;
    std::span<const std::byte> bytes;
    bool in_ring = false;
    RingReader::Record record;
  };

  explicit RecordStream(StreamLink link) : link_(std::move(link)), reader_(link_.ring) {}

  [[nodiscard]] const std::string& name() const noexcept { return link_.name; }
  /// The exception behind a kError record just taken, if its writer is a thread.
  [[nodiscard]] std::exception_ptr writer_exception() const {
    return link_.exception != nullptr ? link_.exception->get() : nullptr;
  }

  /// The next element, end or error record of epoch `generation`: stored records first, then the
  /// ring's; pause markers and records of older epochs are skipped. A record of a later epoch
  /// (the writer started an epoch this reader has not been reset for) reads as kEnd and stays.
  Piece take(const Endpoint& endpoint, std::uint64_t generation, std::vector<std::byte>& buffer);
  /// Frees a piece's ring record.
  void release_piece(const Piece& piece);

  /// Reads records up to the kPaused(request) marker, storing the elements, ends and errors before
  /// it for take().
  void drain_until_paused(const Endpoint& endpoint, std::uint64_t generation, std::uint64_t request);
  /// The next whole record, joined from its parts: a reply (kState, kRestored or kError).
  RecordKind read_reply(const Endpoint& endpoint, std::vector<std::byte>& payload);

  /// Forgets stored records and the epoch it followed. The stored elements count against the
  /// writer's budget (elements_in_flight(), bytes_in_flight()) until taken or forgotten.
  void reset() noexcept;
  /// Discards the handles in the stored records and in the ring: call when the writer has ended
  /// and nothing will read the stream again. Nothing to do for encoded elements.
  void discard_remaining() noexcept;

  /// Checkpoints: the stored records, elements encoded with their Serializer whether they are
  /// bytes or handles, so that worker processes and worker threads read each other's checkpoints.
  void save_state(StateWriter& writer) const;
  void load_state(const StateReader& reader);
  /// Whether a stored record is of kind `kind`.
  [[nodiscard]] bool stores(RecordKind kind) const noexcept {
    return std::ranges::any_of(stored_, [kind](const Stored& stored) { return stored.kind == kind; });
  }
  /// Calls `visit` with every stored element.
  template <class Visit>
  void for_each_stored_element(Visit&& visit) const {
    for (const auto& stored : stored_) {
      if (stored.kind == RecordKind::kElement) visit(std::span<const std::byte>(stored.bytes));
    }
  }

 private:
  struct Stored {
    RecordKind kind = RecordKind::kElement;
    std::vector<std::byte> bytes;
    DPIPE_FIELDS(kind, bytes)
  };

  RingReader::Record wait_record(const Endpoint& endpoint);
  void release(const RingReader::Record& record);
  /// Joins `first` and the parts after it into `out`, releasing them; with `hold`, an element
  /// keeps counting against the writer's budget (RingReader::hold()) until let_go().
  void assemble(const Endpoint& endpoint, RingReader::Record first, std::vector<std::byte>& out, bool hold = false);
  /// Follows kResetAck markers; returns true when `record` was consumed as one, or as a stale
  /// record of an older epoch.
  bool skip_out_of_sync(const Endpoint& endpoint, std::uint64_t generation, const RingReader::Record& record);
  /// Turns the encoded elements of `records` into handles (all or none); StateError naming `scope`
  /// for one that does not decode.
  void adopt_elements(const std::string& scope, std::vector<Stored>& records) const;
  /// Stops counting a stored element held against the writer's budget.
  void let_go(const Stored& stored) noexcept;
  /// Frees the element a record of `kind` holds, when it is a handle nobody will take, or gives
  /// back the arena blocks it refers to.
  void discard(RecordKind kind, std::span<const std::byte> payload) const noexcept;
  /// A stored element with plain bytes for one that may refer to arena blocks (it is stored for a
  /// checkpoint, whose bytes must stand alone).
  void store_plain(Stored& stored) const;

  StreamLink link_;
  RingReader reader_;
  std::deque<Stored> stored_;  // read from the ring ahead of the consumer
  bool synced_ = false;        // has seen kResetAck of the expected epoch
};

}  // namespace dpipe::detail::transport
