#pragma once
/// \file
/// `filter(pred)` (torchdata's Filter): keeps the elements for which pred is true. The length is
/// unknown.
///
/// The bulk path reads ahead by an estimate of how many source elements it needs (from the pass
/// ratio seen so far, at most kMaxReadAhead per read), so that a selective filter does not call its
/// source once per missing element. Matches read ahead wait in a buffer that is part of the
/// checkpoint state; the element path never reads ahead.

#include <algorithm>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include <dpipe/core/compact.hpp>
#include <dpipe/core/iter_datapipe.hpp>
#include <dpipe/core/iter_pipe.hpp>
#include <dpipe/core/pending.hpp>

namespace dpipe::iter {

template <class T, filter_fn<T> F>
class Filter final : public IterDataPipe<T> {
 public:
  static constexpr std::string_view kName = "filter";

  /// The most source elements one bulk read asks for.
  static constexpr std::size_t kMaxReadAhead = 4096;

  Filter(const IterPipe<T>& source, F pred)
      : IterDataPipe<T>(std::string(kName)), source_(source.ptr()), pred_(std::move(pred)) {}

  void for_each_input(const InputVisitor& visit) override { visit(source_); }
  [[nodiscard]] DataPipePtr clone_self() const override { return std::make_shared<Filter>(*this); }

  [[nodiscard]] bool save_state(StateWriter& writer) const override {
    pending_.save(writer, *this);
    return true;
  }
  void load_state(StateReader& reader) override { pending_.load(reader, *this); }

 protected:
  void reset_impl() override {
    pending_.clear();
    source_.reset();
  }

  std::optional<T> next_impl() override {
    if (!pending_.empty()) return pending_.take();
    while (auto element = source_.next()) {
      if (pred_(std::as_const(*element))) return element;
    }
    return std::nullopt;
  }

  std::size_t pull_impl(std::vector<T>& out, std::size_t n) override {
    std::size_t produced = pending_.take_into(out, n);
    while (produced < n) {
      const std::size_t wanted = n - produced;
      const std::size_t to_read = estimate_reads(wanted);
      // Read into `out` when it has room; else into the (empty) pending queue, so that reading
      // ahead never reallocates the caller's vector.
      const bool in_place = out.capacity() - out.size() >= to_read;
      auto& target = in_place ? out : pending_.refill();
      const std::size_t start = target.size();
      const std::size_t got = source_.pull(target, to_read);
      const std::size_t kept = detail::compact(target, start, pred_);
      read_ += got;
      kept_ += kept;
      if (!in_place) {
        produced += pending_.take_into(out, wanted);
      } else if (kept > wanted) {
        // Matches beyond the request wait for the next call.
        const auto surplus = out.begin() + static_cast<std::ptrdiff_t>(start + wanted);
        pending_.refill().assign(std::make_move_iterator(surplus), std::make_move_iterator(out.end()));
        out.erase(surplus, out.end());
        produced += wanted;
      } else {
        produced += kept;
      }
      if (got < to_read) break;
    }
    return produced;
  }

 private:
  /// Source elements to read for `wanted` matches: the observed pass ratio, rounded up.
  [[nodiscard]] std::size_t estimate_reads(std::size_t wanted) const {
    if (kept_ == 0) return wanted;
    const std::size_t estimate = (wanted * read_ + kept_ - 1) / kept_;
    return std::clamp(estimate, wanted, std::max(wanted, kMaxReadAhead));
  }

  Input<T> source_;
  F pred_;
  detail::Pending<T> pending_;  // matches read ahead by the bulk path
  std::size_t read_ = 0;        // elements read and kept by bulk reads so far: the pass ratio
  std::size_t kept_ = 0;
};

}  // namespace dpipe::iter

namespace dpipe {

template <class T>
template <filter_fn<T> F>
IterPipe<T> IterPipe<T>::filter(F pred) const {
  return make_iter<iter::Filter<T, F>>(*this, std::move(pred));
}

}  // namespace dpipe

namespace dpipe::iter {

/// `src | iter::filter(pred)`.
template <class F>
[[nodiscard]] auto filter(F pred) {
  return PipeAdaptor{[pred = std::move(pred)](const auto& source) { return source.filter(pred); }};
}

}  // namespace dpipe::iter
