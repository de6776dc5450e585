#pragma once
// RecordMerge: the RecordSource behind a receiving node: it reads the rings of the children that
// feed it, in the order its Order parameter (merge_order.hpp) says. MultiProcessingReadingService's
// main process merges its workers' data rings in CyclicOrder; a worker reads the one ring its
// dispatching child feeds. Private to the library.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <dpipe/core/element_codec.hpp>

#include "transport/endpoint.hpp"
#include "transport/error_report.hpp"
#include "transport/merge_order.hpp"
#include "transport/record_stream.hpp"

namespace dpipe::detail::transport {

/// Where a process that feeds a merge stands in its restored epoch, as it says itself.
struct RestoredInput {
  bool ended = false;   // it wrote the end of its stream
  bool failed = false;  // it wrote an error
};

/// Merges its inputs in the order `Order` (merge_order.hpp) gives. Compiled for CyclicOrder.
/// Thread-safety: one thread (the one iterating the receiving node, or the main thread while that
/// node is paused).
template <class Order>
class RecordMerge final : public RecordSource {
 public:
  /// `generation` tells reset() which epoch's records to expect (the kResetAck markers); `owner` keeps
  /// alive what the rings and the endpoint live in.
  RecordMerge(std::vector<StreamLink> inputs, Endpoint endpoint, std::function<std::uint64_t()> generation,
              std::shared_ptr<const void> owner = nullptr);
  RecordMerge(const RecordMerge&) = delete;
  RecordMerge& operator=(const RecordMerge&) = delete;
  /// Discards the handles still in the inputs (worker threads): the writers must have ended.
  ~RecordMerge() override;

  std::optional<std::span<const std::byte>> next() override;
  void reset() override;
  /// Requires drain_until_paused() (or load_state()) since the last read from a ring.
  void save_state(StateWriter& writer) const override;
  /// Refuses (StateError) stored records of unknown kinds, error reports that do not decode, and
  /// a state that disagrees with what the inputs said of themselves (expect_restored()).
  void load_state(const StateReader& reader) override;
  /// What the inputs' processes restored, which the next load_state() checks: an input that
  /// ended has its end stored or was exhausted; one that failed has its error stored.
  void expect_restored(std::vector<RestoredInput> inputs) { expected_inputs_ = std::move(inputs); }
  void for_each_restored_element(const std::function<void(std::span<const std::byte>)>& visit) const override;

  /// Reads every ring up to the kPaused(request) marker, keeping what precedes it for next().
  /// Afterwards save_state() may run.
  void drain_until_paused(std::uint64_t request);
  /// The next whole record of input `input`: a reply (kState, kRestored or kError), after a drain
  /// or before the first element.
  RecordKind read_reply(std::size_t input, std::vector<std::byte>& payload);

 private:
  void release_held();
  /// Throws StateError when the loaded state disagrees with expected_inputs_ (then cleared).
  void check_restored_inputs(const std::string& scope);

  std::shared_ptr<const void> owner_;
  std::vector<RecordStream> inputs_;
  Order order_;
  Endpoint endpoint_;
  std::function<std::uint64_t()> generation_;
  std::uint64_t expected_ = 0;
  RecordStream* held_ = nullptr;  // whose ring record next() returned; released at the next call
  RecordStream::Piece held_piece_;
  std::vector<std::byte> buffer_;  // an element joined from parts or taken from what was stored
  std::optional<ErrorReport> failure_;
  bool drained_ = false;
  std::vector<RestoredInput> expected_inputs_;  // for the next load_state(), if any
};

}  // namespace dpipe::detail::transport
