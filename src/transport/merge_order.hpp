#pragma once
// The orders in which a RecordMerge takes elements from its inputs: a parameter of the merge, so
// that another order (by global position, for a service whose children each yield their share of
// one ordered stream) is a class of its own, not a copy of the merge. Private to the library.
//
// An order is a class with:
//   explicit Order(std::size_t inputs);
//   std::size_t live() const;             the inputs that have not ended
//   std::size_t next();                   the live input the next element comes from (live() > 0)
//   void took(std::size_t input);         an element was taken from `input`
//   void ended(std::size_t input);        `input` ended its stream
//   bool has_ended(std::size_t input) const;
//   void reset();                         a new epoch: every input live again
//   void save_state(StateWriter&) const;  its checkpoint fields, beside the merge's
//   void load_state(const StateReader&);  StateError for fields that do not fit its inputs

#include <cstddef>
#include <vector>

namespace dpipe {
class StateWriter;
class StateReader;
}  // namespace dpipe

namespace dpipe::detail::transport {

/// torchdata v0.6.1's order: strictly in turn over the live inputs, in index order; an input that
/// ended is skipped, so inputs of any lengths merge without loss, and the balanced shards of a
/// sharding_filter come out in the source's order. Thread-safety: the merge's thread.
class CyclicOrder {
 public:
  explicit CyclicOrder(std::size_t inputs) : ended_(inputs, false), live_(inputs) {}

  [[nodiscard]] std::size_t live() const noexcept { return live_; }
  [[nodiscard]] std::size_t next() noexcept {
    while (ended_[cursor_]) advance();
    return cursor_;
  }
  void took(std::size_t /*input*/) noexcept { advance(); }
  void ended(std::size_t input) noexcept {
    ended_[input] = true;
    --live_;
    advance();
  }
  [[nodiscard]] bool has_ended(std::size_t input) const noexcept { return ended_[input]; }
  void reset() noexcept;

  /// Fields "cursor" and "exhausted".
  void save_state(StateWriter& writer) const;
  void load_state(const StateReader& reader);

 private:
  void advance() noexcept { cursor_ = (cursor_ + 1) % ended_.size(); }

  std::vector<bool> ended_;
  std::size_t cursor_ = 0;
  std::size_t live_;
};

}  // namespace dpipe::detail::transport
