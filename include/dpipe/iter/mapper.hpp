#pragma once
/// \file
/// Mapper<T, F>, the node behind `map(fn)` and `collate(fn)`: applies fn to each element, under an
/// error policy (OnError). Under OnError::raise() it is stateless and its length is the source's;
/// under OnError::skip() it drops the elements fn throws on (see <dpipe/core/error_policy.hpp>),
/// its length is unknown, and its checkpoint state is the epoch's element index and skip count.
/// See <dpipe/iter/map.hpp>.

#include <exception>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <dpipe/core/detail/buffered_elements.hpp>
#include <dpipe/core/detail/user_function.hpp>
#include <dpipe/core/error_policy.hpp>
#include <dpipe/core/iter_datapipe.hpp>
#include <dpipe/core/iter_pipe.hpp>
#include <dpipe/core/state.hpp>
#include <dpipe/core/typed_op.hpp>
#include <dpipe/iter/detail/element_policy.hpp>
#include <dpipe/iter/detail/fused_run.hpp>
#include <dpipe/iter/threadpool_map.hpp>

namespace dpipe::iter {

template <class T, map_fn<T> F>
class Mapper final : public IterDataPipe<map_result_t<F, T>> {
  using U = map_result_t<F, T>;

 public:
  static constexpr std::string_view kName = "map";
  /// The name of the Mapper that collate() makes (torchdata's Collator is a Mapper).
  static constexpr std::string_view kCollateName = "collate";

  Mapper(const IterPipe<T>& source, F fn, OnError on_error = OnError::raise(), std::string name = std::string(kName))
      : IterDataPipe<U>(std::move(name)), source_(source.ptr()), fn_(std::move(fn)), policy_(on_error) {
    register_typed_op_once<ops::ToThreadPoolMap, Mapper, &to_threadpool_map>();
  }
  /// Copies the configuration (and the run it is the last node of, unbound).
  Mapper(const Mapper& other)
      : IterDataPipe<U>(other),
        source_(other.source_),
        fn_(other.fn_),
        policy_(other.policy_),
        fused_(detail::clone_run(other.fused_)) {}

  /// Makes this node the last of a fused run of element-wise nodes (see fusion.hpp).
  void fuse(std::unique_ptr<detail::FusedRun<U>> run) { fused_ = std::move(run); }

  void for_each_input(const InputVisitor& visit) override { visit(source_); }
  [[nodiscard]] DataPipePtr clone_self() const override { return std::make_shared<Mapper>(*this); }
  /// Under OnError::raise() (so that a checkpoint survives an added map); not when it skips.
  [[nodiscard]] bool stateless() const noexcept override { return !policy_.skips(); }

  [[nodiscard]] bool save_state(StateWriter& writer) const override {
    if (policy_.skips()) {
      policy_.save_state(writer);
      // Outputs not yet handed out: a map hands out all it makes, so none; the field is the one
      // every skipping node writes, which checkpoints of skipping maps have always held.
      detail::write_elements<U>(writer, "pending", *this, std::span<const U>());
    }
    return true;
  }
  void load_state(const StateReader& reader) override {
    if (!policy_.skips()) return;
    policy_.load_state(reader);
    (void)detail::read_elements<U>(reader, "pending", *this);
  }

 protected:
  void reset_impl() override {
    policy_.reset();
    source_.reset();
  }

  std::optional<U> next_impl() override {
    if (!policy_.skips()) {
      auto element = source_.next();
      if (!element) return std::nullopt;
      return std::optional<U>(std::in_place, detail::call_user_function(*this, fn_, std::move(*element)));
    }
    while (auto element = source_.next()) {
      if (auto mapped = try_map(std::move(*element))) return mapped;
    }
    return std::nullopt;
  }

  std::size_t pull_impl(std::vector<U>& out, std::size_t n) override {
    if (fused_) {
      const std::size_t produced = fused_->pull(*this, out, n);
      if (produced != detail::FusedRun<U>::kNotHeld) return produced;
    }
    return policy_.skips() ? pull_mapped<true>(out, n) : pull_mapped<false>(out, n);
  }

  /// The source's, unless the policy may skip elements.
  [[nodiscard]] std::optional<std::size_t> length_impl() const override {
    if (policy_.skips()) return std::nullopt;
    return source_.length();
  }

 private:
  template <class, class, bool, class...>
  friend class detail::FusedRunOf;

  /// The step of this node, here and in a fused run: hands fn(element) to `emit`. When fn throws
  /// and the policy skips the element, logs and counts it and emits nothing. kMaySkip false
  /// compiles the raise path alone, with no check of the policy.
  template <bool kMaySkip, class X, class Emit>
  void apply(X&& element, Emit&& emit) {
    if constexpr (kMaySkip) {
      if (policy_.skips()) {
        if (auto mapped = try_map(std::forward<X>(element))) emit(std::move(*mapped));
        return;
      }
    }
    emit(detail::call_user_function(*this, fn_, std::forward<X>(element)));
  }

  /// fn(element), or std::nullopt when fn throws and the policy skips the element (logged and
  /// counted). REQUIRES: the policy skips.
  template <class X>
  std::optional<U> try_map(X&& element) {
    std::optional<U> mapped;
    if (!policy_.attempt(*this, [&] { mapped.emplace(fn_(std::forward<X>(element))); })) this->count_skipped();
    return mapped;
  }

  /// Maps the elements of one pull of up to `n` source elements into `out`; under kMaySkip, pulls
  /// again for the room skipped elements left, until `n` outputs or the end of the source.
  template <bool kMaySkip>
  std::size_t pull_mapped(std::vector<U>& out, std::size_t n) {
    const std::size_t first = out.size();
    for (std::size_t wanted = n;;) {
      std::size_t got = 0;
      if constexpr (std::same_as<T, U>) {
        // Transforms in place what the source appended to `out`.
        const std::size_t start = out.size();
        got = pull_then(out, wanted, [&] { apply_in_place<kMaySkip>(out, start); });
        apply_in_place<kMaySkip>(out, start);
      } else {
        staging_.clear();
        got = pull_then(staging_, wanted, [&] { append_mapped<kMaySkip>(out); });
        append_mapped<kMaySkip>(out);
      }
      const std::size_t produced = out.size() - first;
      if (!kMaySkip || produced == n || got < wanted) return produced;
      wanted = n - produced;
    }
  }

  /// Pulls from the source into `into`; if the source throws, first runs `keep_appended` (which
  /// maps what it appended before failing, so that those elements precede the failure) and then
  /// rethrows, unless mapping failed first.
  template <class KeepAppended>
  std::size_t pull_then(std::vector<T>& into, std::size_t n, KeepAppended&& keep_appended) {
    try {
      return source_.pull(into, n);
    } catch (...) {
      const std::exception_ptr failure = std::current_exception();
      keep_appended();
      std::rethrow_exception(failure);
    }
  }

  /// Maps out[first, end) in place, dropping the elements skipped; if the step throws, the
  /// elements from the failing one are dropped.
  template <bool kMaySkip>
  void apply_in_place(std::vector<U>& out, std::size_t first) {
    T* const data = out.data();
    std::size_t kept = first;
    try {
      for (std::size_t i = first; i < out.size(); ++i) {
        apply<kMaySkip>(std::move(data[i]), [&](U&& mapped) { data[kept++] = std::move(mapped); });
      }
    } catch (...) {
      out.erase(out.begin() + static_cast<std::ptrdiff_t>(kept), out.end());
      throw;
    }
    out.erase(out.begin() + static_cast<std::ptrdiff_t>(kept), out.end());
  }

  /// Appends the step's outputs for each staged element to `out`, then clears the staging area.
  template <bool kMaySkip>
  void append_mapped(std::vector<U>& out) {
    out.reserve(out.size() + staging_.size());
    try {
      for (auto& element : staging_)
        apply<kMaySkip>(std::move(element), [&](U&& mapped) { out.push_back(std::move(mapped)); });
    } catch (...) {
      staging_.clear();
      throw;
    }
    staging_.clear();
  }

  /// ops::ToThreadPoolMap: a threadpool_map node reading this node's input with its function and
  /// its error policy.
  static DataPipePtr to_threadpool_map(const DataPipePtr& node, std::size_t threads, std::size_t max_in_flight) {
    const auto& self = static_cast<const Mapper&>(*node);
    auto parallel = std::make_shared<ThreadPoolMapper<T, F>>(IterPipe<T>(self.source_.shared()), self.fn_, threads,
                                                             max_in_flight, self.policy_.policy());
    parallel->set_tag(self.tag());
    return parallel;
  }

  Input<T> source_;
  F fn_;
  detail::ElementPolicy policy_;
  std::vector<T> staging_;  // reused between pulls when T and U differ; empty between calls
  std::unique_ptr<detail::FusedRun<U>> fused_;
};

}  // namespace dpipe::iter
