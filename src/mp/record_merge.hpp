#pragma once
// RecordMerge: the RecordSource behind a decoding node. In the main process it merges the workers'
// data rings, strictly cyclic over the live workers in worker-id order (torchdata v0.6.1's order:
// an exhausted worker is skipped, so shards of any sizes merge without loss). In a worker it reads
// the one ring the dispatching process feeds. Private to the library.

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <dpipe/core/element_codec.hpp>

#include "endpoint.hpp"
#include "protocol.hpp"
#include "ring.hpp"

namespace dpipe::detail::mp {

/// One ring a RecordMerge reads.
struct MergeInput {
  RingMemory ring;
  Bell* writer_bell = nullptr;  // rung after a release when the writer asked for it
  Bell* feeder_bell = nullptr;  // if set, rung when this reader starts waiting (it is starving)
  std::string name;             // the writing process: "worker process 1"
};

/// Thread-safety: one thread (the one iterating the decoding node, or the main thread while that
/// node is paused).
class RecordMerge final : public RecordSource {
 public:
  /// `generation` tells reset() which generation's records to expect (see protocol.hpp); `owner`
  /// keeps alive what the rings and the endpoint live in.
  RecordMerge(std::vector<MergeInput> inputs, Endpoint endpoint, std::function<std::uint64_t()> generation,
              std::shared_ptr<const void> owner = nullptr);
  RecordMerge(const RecordMerge&) = delete;
  RecordMerge& operator=(const RecordMerge&) = delete;

  std::optional<std::span<const std::byte>> next() override;
  void reset() override;
  /// Requires drain_until_paused() (or load_state()) since the last read from a ring.
  void save_state(ByteWriter& writer) const override;
  /// Refuses (SerializationError) a stored error record whose report does not decode.
  void load_state(ByteReader& reader) override;
  void for_each_restored_element(const std::function<void(std::span<const std::byte>)>& visit) const override;

  /// Reads every ring up to the kPaused(request) marker, keeping what precedes it for next().
  /// Afterwards save_state() may run.
  void drain_until_paused(std::uint64_t request);
  /// The next whole record of input `input` after a drain: a kState or kError reply.
  RecordKind read_reply(std::size_t input, std::vector<std::byte>& payload);

 private:
  struct Stored {
    RecordKind kind = RecordKind::kElement;
    std::vector<std::byte> bytes;
  };
  struct Input {
    MergeInput link;
    RingReader reader;
    std::deque<Stored> stored;  // read from the ring ahead of the consumer
    bool exhausted = false;
    bool synced = false;  // has seen kResetAck of the expected generation
  };
  /// The next record of an input for the consumer.
  struct Piece {
    RecordKind kind = RecordKind::kEnd;
    std::span<const std::byte> bytes;
    bool in_ring = false;  // `bytes` is the ring record `record`, not yet released
    RingReader::Record record;
  };

  Piece take(Input& input);
  RingReader::Record wait_record(Input& input);
  void release(Input& input, const RingReader::Record& record);
  /// Joins `first` and the parts after it into `out`, releasing them.
  void assemble(Input& input, RingReader::Record first, std::vector<std::byte>& out);
  /// Follows kResetAck markers; returns true when `record` was consumed as one, or as a stale
  /// record of an older generation.
  bool skip_out_of_sync(Input& input, const RingReader::Record& record);
  void release_held();
  void advance() noexcept { cursor_ = (cursor_ + 1) % inputs_.size(); }
  [[noreturn]] void throw_failure() const;

  std::shared_ptr<const void> owner_;
  std::vector<Input> inputs_;
  Endpoint endpoint_;
  std::function<std::uint64_t()> generation_;
  std::uint64_t expected_ = 0;
  std::size_t cursor_ = 0;
  std::size_t live_ = 0;
  Input* held_ = nullptr;  // whose ring record next() returned; released at the next call
  RingReader::Record held_record_;
  std::vector<std::byte> buffer_;  // an element joined from parts or taken from `stored`
  std::optional<ErrorReport> failure_;
  bool drained_ = false;
};

}  // namespace dpipe::detail::mp
