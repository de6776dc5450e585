#pragma once
// A single-producer single-consumer ring of records in memory shared between two processes (or
// threads): what the element transport is made of. Private to the library.
//
// A record is an 8-byte header and a payload padded to 8 bytes, always contiguous in the data
// area; the writer pads to the end of the area when a record does not fit before it. Payloads
// longer than half the area travel as several records, each but the last marked `more`.
// Positions are byte counters that only grow; the data offset is the counter modulo the capacity.

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

namespace dpipe::detail::transport {

enum class RecordKind : std::uint8_t {
  kPad = 0,       // filler up to the end of the data area
  kElement = 1,   // an encoded element
  kEnd = 2,       // the sender's stream ended for this epoch
  kError = 3,     // an ErrorReport: the sender failed
  kResetAck = 4,  // the sender started generation <u64>
  kPaused = 5,    // the sender paused for request <u64>
  kState = 6,     // the sender's checkpoint
  kControl = 7,   // a command from the main process
  kRestored = 8,  // the sender restored its checkpoint
};

struct RecordHeader {
  std::uint32_t size;  // payload bytes
  RecordKind kind;
  std::uint8_t more;  // 1: the payload continues in the next record
  std::uint16_t reserved;
};
static_assert(sizeof(RecordHeader) == 8);

/// The shared part of a ring; its data area follows elsewhere in the same mapping.
struct RingHeader {
  alignas(64) std::atomic<std::uint64_t> head{0};  // bytes the writer published
  alignas(64) std::atomic<std::uint64_t> tail{0};  // bytes the reader released
  std::atomic<std::uint64_t> released_elements{0};
  // What the reader released from the ring but still holds (elements it read ahead while draining
  // for a checkpoint, or restored from one): they count against the writer's budget until taken.
  // Stored before the release that moves them out of the ring, so the writer never undercounts.
  std::atomic<std::uint64_t> held_elements{0};
  std::atomic<std::uint64_t> held_bytes{0};  // their held_record_bytes()
  // The sleeping writer wants any of these reached: the tail (room in the ring), or, as far as
  // wake_writer_for says, released_elements - held_elements and tail - held_bytes (counting what
  // the reader holds, in modular arithmetic: restored elements are held but were never released).
  alignas(64) std::atomic<std::uint64_t> wake_writer_at_tail{UINT64_MAX};
  std::atomic<std::uint64_t> wake_writer_at_elements{0};
  std::atomic<std::uint64_t> wake_writer_at_unheld_tail{0};
  std::atomic<std::uint32_t> wake_writer_for{0};              // kWakeForElements | kWakeForBytes
  alignas(64) std::atomic<std::uint32_t> reader_starving{0};  // the reader sleeps until a record arrives:
  std::atomic<std::uint64_t> reader_waits_from{0};            // elements it had released when it started,
  std::atomic<std::uint64_t> wake_reader_at_elements{0};      // wake it when this many elements were written,
  std::atomic<std::int64_t> reader_waits_since{0};            // or a while after it started (steady clock, ns)
};

/// The bits of RingHeader::wake_writer_for.
inline constexpr std::uint32_t kWakeForElements = 1;
inline constexpr std::uint32_t kWakeForBytes = 2;

/// Where a ring lives. The capacity is a power of two of at least 4 KiB.
struct RingMemory {
  RingHeader* header = nullptr;
  std::byte* data = nullptr;
  std::size_t capacity = 0;
};

/// How long a starving reader waits for a batch of elements before any element published wakes it.
inline constexpr std::chrono::nanoseconds kReaderBatchWait{std::chrono::milliseconds(1)};
/// The longest a starving reader's first sleep lasts. An element published without a wake-up
/// (within kReaderBatchWait of the reader starting to wait, by a writer that then stalls in user
/// code) waits no longer than this; shorter first sleeps cost wake-ups whenever a writer is
/// descheduled on a busy machine.
inline constexpr std::chrono::nanoseconds kReaderFirstSleep{std::chrono::milliseconds(10)};

[[nodiscard]] constexpr std::size_t padded(std::size_t size) noexcept { return (size + 7) & ~std::size_t{7}; }
/// What an element of `payload` bytes the reader holds outside the ring counts against its
/// writer's bytes: one record's worth, however the writer split it.
[[nodiscard]] constexpr std::uint64_t held_record_bytes(std::size_t payload) noexcept {
  return sizeof(RecordHeader) + padded(payload);
}

/// The producer's side. Thread-safety: one producer thread.
class RingWriter {
 public:
  RingWriter() = default;
  explicit RingWriter(RingMemory memory) noexcept : memory_(memory) {}

  /// The largest payload one record carries.
  [[nodiscard]] std::size_t max_payload() const noexcept { return memory_.capacity / 2 - sizeof(RecordHeader); }

  /// Room for the payload of one record, at least `min_payload` (1 .. max_payload()) bytes and at
  /// most max_payload(), or an empty span when the ring is too full now. commit() ends it.
  std::span<std::byte> claim(std::size_t min_payload) noexcept;
  /// Ends the claimed record with `size` payload bytes; the reader sees it after publish().
  void commit(RecordKind kind, std::size_t size, bool more) noexcept;
  /// Makes the committed records visible to the reader.
  void publish() noexcept {
    if (published_ == head_) return;
    memory_.header->head.store(head_, std::memory_order_release);
    published_ = head_;
  }
  /// Bytes committed but not yet published.
  [[nodiscard]] std::size_t unpublished() const noexcept { return static_cast<std::size_t>(head_ - published_); }

  /// Writes and publishes a record whose payload fits one record, if the ring has room now.
  bool try_write(RecordKind kind, std::span<const std::byte> payload) noexcept;

  /// Element records written (their last part committed) and not yet released by the reader, and
  /// those it released but holds (RingReader::hold()).
  [[nodiscard]] std::uint64_t elements_in_flight() const noexcept {
    const std::uint64_t released = memory_.header->released_elements.load(std::memory_order_acquire);
    return elements_written_ - released + memory_.header->held_elements.load(std::memory_order_acquire);
  }
  /// Asks the reader to ring the writer's bell once `min_payload` bytes can be claimed (and not
  /// on every release before that). Call before Bell::prepare(); clear_wake() after.
  void request_wake_for_room(std::size_t min_payload) noexcept;
  /// Bytes committed and not yet released by the reader, and those of the elements it holds.
  [[nodiscard]] std::uint64_t bytes_in_flight() const noexcept {
    const std::uint64_t tail = memory_.header->tail.load(std::memory_order_acquire);
    return head_ - tail + memory_.header->held_bytes.load(std::memory_order_acquire);
  }
  /// Asks the reader to ring the writer's bell once at most `elements` elements are in flight, or
  /// (unless `bytes` is UINT64_MAX) once at most `bytes` bytes are, as elements_in_flight() and
  /// bytes_in_flight() count them. Call before Bell::prepare(); clear_wake() after.
  void request_wake_for_elements(std::uint64_t elements, std::uint64_t bytes = UINT64_MAX) noexcept;
  void clear_wake() noexcept;

  /// Whether the reader sleeps waiting for a record.
  [[nodiscard]] bool reader_starving() const noexcept {
    return memory_.header->reader_starving.load(std::memory_order_acquire) != 0;
  }
  /// After publishing elements: whether the sleeping reader wants to be woken now, because as many
  /// elements as it asked for are there (or as set_reader_batch() says), a quarter of the ring is
  /// full, or it has waited a while. Ringing per element costs a system call each; the reader's
  /// periodic liveness check bounds what waiting costs.
  [[nodiscard]] bool reader_wants_wake() const noexcept;
  /// How many elements a starving reader is woken for, instead of what it asked: a writer that
  /// knows how far it may run ahead (its prefetch counts, its allowance for small elements) sets
  /// it below that, so that it wakes the reader before it has to wait itself. 0: what the reader asked.
  void set_reader_batch(std::uint64_t elements) noexcept { reader_batch_ = elements; }
  /// Whether the reader has released everything published.
  [[nodiscard]] bool drained() const noexcept {
    return memory_.header->tail.load(std::memory_order_acquire) == published_;
  }

 private:
  RingMemory memory_;
  std::uint64_t head_ = 0;       // committed
  std::uint64_t published_ = 0;  // visible to the reader
  std::uint64_t tail_seen_ = 0;  // the reader's tail when last loaded
  std::uint64_t claimed_ = 0;    // where the claimed record's header goes
  std::uint64_t elements_written_ = 0;
  std::uint64_t reader_batch_ = 0;  // see set_reader_batch()
};

/// The consumer's side. Thread-safety: one consumer thread.
class RingReader {
 public:
  struct Record {
    RecordKind kind = RecordKind::kPad;
    bool more = false;
    std::span<const std::byte> payload;
  };

  RingReader() = default;
  explicit RingReader(RingMemory memory) noexcept : memory_(memory) {}

  /// The next published record (padding skipped), or std::nullopt when there is none yet. The
  /// payload stays valid until release().
  std::optional<Record> peek();
  /// Frees the record peek() returned. Returns true when the writer asked to be woken: ring its
  /// bell.
  [[nodiscard]] bool release(const Record& record) noexcept;
  /// Counts an element of `payload` bytes against the writer's budget while the reader holds it
  /// outside the ring: call before releasing its last record, or when restoring it from a checkpoint.
  void hold(std::size_t payload) noexcept;
  /// The reader took (or dropped) an element it held. Returns true when the writer asked to be
  /// woken: ring its bell.
  [[nodiscard]] bool let_go(std::size_t payload) noexcept;

  /// Marks the reader as sleeping until `elements` more elements are there (or a while passed);
  /// the dispatching process also feeds starving readers first. Call before Bell::prepare().
  void start_waiting(std::uint64_t elements) noexcept;
  void stop_waiting() noexcept { memory_.header->reader_starving.store(0, std::memory_order_release); }

 private:
  /// Whether the writer asked to be woken at what is released and held now.
  [[nodiscard]] bool writer_wants_wake() const noexcept;

  RingMemory memory_;
  std::uint64_t tail_ = 0;
  std::uint64_t head_seen_ = 0;
  std::uint64_t released_elements_ = 0;
  std::uint64_t held_elements_ = 0;
  std::uint64_t held_bytes_ = 0;
};

}  // namespace dpipe::detail::transport
