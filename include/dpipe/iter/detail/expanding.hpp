#pragma once
/// \file
/// ExpandingPipe: the machinery of nodes that turn what they read into a run of output elements
/// (flatmap, unbatch, map_batches): the run not yet handed out is a Pending queue, saved with the
/// checkpoint.

#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <dpipe/core/detail/pending.hpp>
#include <dpipe/core/iter_datapipe.hpp>

namespace dpipe::detail {

/// Derived implements `bool expand(std::vector<E>& run)`: reads from its input, puts the next run
/// of outputs (possibly empty) into `run`, and returns false at the end of the input.
template <class E, class Derived>
class ExpandingPipe : public IterDataPipe<E> {
 public:
  [[nodiscard]] bool save_state(StateWriter& writer) const override {
    pending_.save_state(writer, "pending", *this);
    return true;
  }
  void load_state(const StateReader& reader) override { pending_.load_state(reader, "pending", *this); }

 protected:
  using IterDataPipe<E>::IterDataPipe;

  void reset_impl() override {
    pending_.clear();
    IterDataPipe<E>::reset_impl();
  }

  std::optional<E> next_impl() override {
    if (!refill()) return std::nullopt;
    return pending_.take();
  }

  std::size_t pull_impl(std::vector<E>& out, std::size_t n) override {
    std::size_t produced = 0;
    while (produced < n && refill()) produced += pending_.take_into(out, n - produced);
    return produced;
  }

  [[nodiscard]] std::string no_length_reason() const override {
    return this->label() + "'s length relies on the output of its function.";
  }

 private:
  /// Makes an output available; false at the end of the input.
  bool refill() {
    while (pending_.empty()) {
      std::vector<E> run;
      if (!static_cast<Derived&>(*this).expand(run)) return false;
      pending_.assign(std::move(run));
    }
    return true;
  }

  Pending<E> pending_;
};

}  // namespace dpipe::detail
