// RecordMerge, compiled for the merge orders services use.

#include "record_merge.hpp"

#include <string>
#include <utility>

#include <dpipe/core/error.hpp>

namespace dpipe::detail::transport {

template <class Order>
RecordMerge<Order>::RecordMerge(std::vector<StreamLink> inputs, Endpoint endpoint,
                                std::function<std::uint64_t()> generation, std::shared_ptr<const void> owner)
    : owner_(std::move(owner)), order_(inputs.size()), endpoint_(endpoint), generation_(std::move(generation)) {
  inputs_.reserve(inputs.size());
  for (auto& link : inputs) inputs_.emplace_back(std::move(link));
}

template <class Order>
RecordMerge<Order>::~RecordMerge() {
  release_held();
  for (auto& input : inputs_) input.discard_remaining();
}

template <class Order>
void RecordMerge<Order>::release_held() {
  if (held_ == nullptr) return;
  held_->release_piece(held_piece_);
  held_ = nullptr;
}

template <class Order>
std::optional<std::span<const std::byte>> RecordMerge<Order>::next() {
  release_held();
  if (failure_) throw_worker_error(*failure_);
  drained_ = false;
  while (order_.live() > 0) {
    const std::size_t index = order_.next();
    RecordStream& input = inputs_[index];
    const auto piece = input.take(endpoint_, expected_, buffer_);
    switch (piece.kind) {
      case RecordKind::kElement:
        if (piece.in_ring) {
          held_ = &input;
          held_piece_ = piece;
        }
        order_.took(index);
        return piece.bytes;
      case RecordKind::kEnd:
        input.release_piece(piece);
        order_.ended(index);
        continue;
      case RecordKind::kError:
        failure_ = from_bytes<ErrorReport>(piece.bytes);
        failure_->original = input.writer_exception();
        input.release_piece(piece);
        throw_worker_error(*failure_);
      default:
        DPIPE_THROW(Error, "dpipe internal error: unexpected record kind {} from {}", static_cast<int>(piece.kind),
                    input.name());
    }
  }
  return std::nullopt;
}

template <class Order>
void RecordMerge<Order>::reset() {
  release_held();
  expected_ = generation_();
  for (auto& input : inputs_) input.reset();
  order_.reset();
  failure_.reset();
  drained_ = false;
}

template <class Order>
void RecordMerge<Order>::drain_until_paused(std::uint64_t request) {
  release_held();
  for (auto& input : inputs_) input.drain_until_paused(endpoint_, expected_, request);
  drained_ = true;
}

template <class Order>
RecordKind RecordMerge<Order>::read_reply(std::size_t input, std::vector<std::byte>& payload) {
  drained_ = true;
  return inputs_.at(input).read_reply(endpoint_, payload);
}

template <class Order>
void RecordMerge<Order>::save_state(StateWriter& writer) const {
  if (!drained_ || held_ != nullptr) {
    DPIPE_THROW(StateError,
                "the merge of the worker processes is running: save a checkpoint through DataLoader2::state_dict(), "
                "which pauses the workers first");
  }
  if (failure_) DPIPE_THROW(StateError, "a worker process failed; a failed pipeline cannot be checkpointed");
  order_.save_state(writer);
  for (std::size_t i = 0; i < inputs_.size(); ++i) {
    StateWriter input = writer.scope("input" + std::to_string(i));
    inputs_[i].save_state(input);
  }
}

template <class Order>
void RecordMerge<Order>::load_state(const StateReader& reader) {
  Order order(inputs_.size());
  order.load_state(reader);
  release_held();
  for (std::size_t i = 0; i < inputs_.size(); ++i) inputs_[i].load_state(reader.scope("input" + std::to_string(i)));
  order_ = std::move(order);
  expected_ = generation_();
  failure_.reset();
  drained_ = true;
  check_restored_inputs(reader.name());
}

template <class Order>
void RecordMerge<Order>::check_restored_inputs(const std::string& scope) {
  const auto expected = std::exchange(expected_inputs_, {});
  for (std::size_t i = 0; i < expected.size() && i < inputs_.size(); ++i) {
    const bool end_known = order_.has_ended(i) || inputs_[i].stores(RecordKind::kEnd);
    const bool error_known = inputs_[i].stores(RecordKind::kError);
    if (expected[i].ended == end_known && expected[i].failed == error_known) continue;
    DPIPE_THROW(StateError,
                "{}: the checkpoint is inconsistent: {} restored {}, but the merge holds {} of it (a blob edited or "
                "put together from several checkpoints?)",
                scope, inputs_[i].name(),
                expected[i].ended ? "an ended epoch" : (expected[i].failed ? "a failed epoch" : "a running epoch"),
                end_known ? "the end" : (error_known ? "an error" : "no end and no error"));
  }
}

template <class Order>
void RecordMerge<Order>::for_each_restored_element(const std::function<void(std::span<const std::byte>)>& visit) const {
  for (const auto& input : inputs_) input.for_each_stored_element(visit);
}

template class RecordMerge<CyclicOrder>;

}  // namespace dpipe::detail::transport
