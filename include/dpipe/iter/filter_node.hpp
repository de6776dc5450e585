#pragma once
/// \file
/// Filter<T, F>, the node behind `filter(pred)`, under an error policy (OnError): under
/// OnError::skip() the elements pred throws on are dropped, logged and counted (see
/// <dpipe/core/error_policy.hpp>), and the checkpoint state holds the epoch's element index and
/// skip count besides the matches read ahead. See <dpipe/iter/filter.hpp>.

#include <algorithm>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <dpipe/core/detail/compact.hpp>
#include <dpipe/core/detail/pending.hpp>
#include <dpipe/core/detail/user_function.hpp>
#include <dpipe/core/error_policy.hpp>
#include <dpipe/core/iter_datapipe.hpp>
#include <dpipe/core/iter_pipe.hpp>
#include <dpipe/core/state.hpp>
#include <dpipe/iter/detail/element_policy.hpp>
#include <dpipe/iter/detail/fused_run.hpp>

namespace dpipe::iter {

template <class T, filter_fn<T> F>
class Filter final : public IterDataPipe<T> {
 public:
  static constexpr std::string_view kName = "filter";

  /// The most source elements one bulk read asks for. A filter whose policy skips reads no more
  /// than it needs (as many as it has still to yield), so that an ElementError past the budget
  /// comes after every match before it has been handed out.
  static constexpr std::size_t kMaxReadAhead = 4096;

  Filter(const IterPipe<T>& source, F pred, OnError on_error = OnError::raise())
      : IterDataPipe<T>(std::string(kName)), source_(source.ptr()), pred_(std::move(pred)), policy_(on_error) {}
  /// Copies the configuration (and the run it is the last node of, unbound).
  Filter(const Filter& other)
      : IterDataPipe<T>(other),
        source_(other.source_),
        pred_(other.pred_),
        policy_(other.policy_),
        fused_(detail::clone_run(other.fused_)) {}

  /// Makes this node the last of a fused run of element-wise nodes (see fusion.hpp).
  void fuse(std::unique_ptr<detail::FusedRun<T>> run) { fused_ = std::move(run); }

  void for_each_input(const InputVisitor& visit) override { visit(source_); }
  [[nodiscard]] DataPipePtr clone_self() const override { return std::make_shared<Filter>(*this); }

  [[nodiscard]] bool save_state(StateWriter& writer) const override {
    if (policy_.skips()) policy_.save_state(writer);
    pending_.save_state(writer, "pending", *this);
    return true;
  }
  void load_state(const StateReader& reader) override {
    if (policy_.skips()) policy_.load_state(reader);
    pending_.load_state(reader, "pending", *this);
  }

 protected:
  void reset_impl() override {
    policy_.reset();
    pending_.clear();
    source_.reset();
  }

  std::optional<T> next_impl() override {
    if (!pending_.empty()) return pending_.take();
    return policy_.skips() ? next_match<true>() : next_match<false>();
  }

  std::size_t pull_impl(std::vector<T>& out, std::size_t n) override {
    if (fused_) {
      const std::size_t produced = fused_->pull(*this, out, n);
      if (produced != detail::FusedRun<T>::kNotHeld) return produced;
    }
    return policy_.skips() ? pull_matches<true>(out, n) : pull_matches<false>(out, n);
  }

 private:
  template <class, class, bool, class...>
  friend class detail::FusedRunOf;

  /// The step of this node, here and in a fused run: pred(element). When pred throws and the
  /// policy skips the element, logs and counts it and returns false. kMaySkip false compiles the
  /// raise path alone, with no check of the policy.
  template <bool kMaySkip>
  bool keeps(const T& element) {
    if constexpr (kMaySkip) {
      if (policy_.skips()) {
        bool kept = false;
        if (!policy_.attempt(*this, [&] { kept = pred_(element); })) this->count_skipped();
        return kept;
      }
    }
    return detail::call_user_function(*this, pred_, element);
  }

  /// The next source element the step keeps.
  template <bool kMaySkip>
  std::optional<T> next_match() {
    while (auto element = source_.next()) {
      if (keeps<kMaySkip>(*element)) return element;
    }
    return std::nullopt;
  }

  /// The bulk path: matches read ahead first, then source elements read in blocks and compacted.
  template <bool kMaySkip>
  std::size_t pull_matches(std::vector<T>& out, std::size_t n) {
    const auto keep = [this](const T& element) { return keeps<kMaySkip>(element); };
    std::size_t produced = pending_.take_into(out, n);
    while (produced < n) {
      const std::size_t wanted = n - produced;
      const std::size_t to_read = kMaySkip ? wanted : estimate_reads(wanted);
      // Read into `out` when it has room; else into the (empty) pending queue, so that reading
      // ahead never reallocates the caller's vector.
      const bool in_place = out.capacity() - out.size() >= to_read;
      auto& target = in_place ? out : pending_.refill();
      const std::size_t start = target.size();
      // A failure of the source, or of the step (which comes first: it failed on an element the
      // source appended before failing). The matches before it precede it: they are handed out.
      std::exception_ptr failure;
      std::size_t got = 0;
      std::size_t kept = 0;
      try {
        got = source_.pull(target, to_read);
      } catch (...) {
        failure = std::current_exception();
      }
      try {
        kept = detail::compact(target, start, keep);
      } catch (...) {
        failure = std::current_exception();
      }
      if (failure) {
        if (!in_place) (void)pending_.take_into(out, wanted);
        std::rethrow_exception(failure);
      }
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

  /// Source elements to read for `wanted` matches: the observed pass ratio, rounded up.
  [[nodiscard]] std::size_t estimate_reads(std::size_t wanted) const {
    if (kept_ == 0) return wanted;
    const std::size_t estimate = (wanted * read_ + kept_ - 1) / kept_;
    return std::clamp(estimate, wanted, std::max(wanted, kMaxReadAhead));
  }

  Input<T> source_;
  F pred_;
  detail::ElementPolicy policy_;
  detail::Pending<T> pending_;  // matches read ahead by the bulk path
  std::size_t read_ = 0;        // elements read and kept by bulk reads so far: the pass ratio
  std::size_t kept_ = 0;
  std::unique_ptr<detail::FusedRun<T>> fused_;
};

}  // namespace dpipe::iter
