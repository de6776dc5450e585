#pragma once
/// \file
/// Fused element-wise runs. A chain `from(range).map(f).filter(g).map(h)` builds one node per stage
/// as usual, and the handle it returns (ElementwisePipe) remembers the static types of the run, so
/// that its last node gets a FusedRunOf: when pulled in bulk, it runs every stage of the run in one
/// loop over the elements, reading a range source directly, instead of one pass per node. The graph
/// keeps every node; the run is used only while it holds:
///
/// - every edge of the run still reads the node it was built with (graph surgery breaks a run);
/// - no node of the run counts statistics;
/// - no filter but the last one holds elements it read ahead (after a restore, until they drain).
///
/// Otherwise the last node pulls on its own, node by node. Both ways leave the same state behind:
/// matches read ahead wait in the last filter's buffer, positions advance in the source, so a
/// checkpoint taken either way restores either way.
///
/// The run calls each node's own step (Mapper::apply, Filter::keeps), so a stage whose error
/// policy skips (OnError::skip()) skips, logs and counts in the run as on its own. Whether some
/// stage skips is known when the run is built, and is part of its type: a run where none does is
/// the loop with no check of a policy that it was before policies were members of the nodes
/// (laid out alike: B1 as fast), and does not hold if graph surgery brings a skipping node into
/// it; a run where one does reads from a node no more than it needs, as a skipping node does on
/// its own.

#include <algorithm>
#include <cstddef>
#include <exception>
#include <memory>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <dpipe/core/concepts.hpp>
#include <dpipe/core/error_policy.hpp>
#include <dpipe/core/iter_pipe.hpp>
#include <dpipe/iter/detail/fused_run.hpp>
#include <dpipe/iter/filter_node.hpp>
#include <dpipe/iter/mapper.hpp>

namespace dpipe::detail {

/// Whether a stage filters.
template <class Stage>
inline constexpr bool is_filter_stage = false;
template <class G>
inline constexpr bool is_filter_stage<FilterStage<G>> = true;

/// The node a stage is when it reads elements of type In, and what it yields.
template <class In, class Stage>
struct StageNode;
template <class In, class F>
struct StageNode<In, MapStage<F>> {
  using type = iter::Mapper<In, F>;
  using out = map_result_t<F, In>;
};
template <class In, class G>
struct StageNode<In, FilterStage<G>> {
  using type = iter::Filter<In, G>;
  using out = In;
};

/// The nodes of a run whose first stage reads In (a tuple of pointers, first stage first), and
/// what its last stage yields.
template <class In, class... Stages>
struct RunTypes {
  using nodes = std::tuple<>;
  using out = In;
};
template <class In, class Stage, class... Rest>
struct RunTypes<In, Stage, Rest...> {
  using first = StageNode<In, Stage>;
  using rest = RunTypes<typename first::out, Rest...>;
  using nodes =
      decltype(std::tuple_cat(std::declval<std::tuple<typename first::type*>>(), std::declval<typename rest::nodes>()));
  using out = typename rest::out;
};

/// The fused run of Stages fed by Head (a range source, or void for any node) with elements of In.
/// kMaySkip: whether a stage's error policy may skip elements, known when the run is built; a run
/// built without finds its nodes only while none skips (after graph surgery: else it is not held).
template <class Head, class In, bool kMaySkip, class... Stages>
class FusedRunOf final : public FusedRun<typename RunTypes<In, Stages...>::out> {
  using Out = typename RunTypes<In, Stages...>::out;
  using Nodes = typename RunTypes<In, Stages...>::nodes;
  static constexpr std::size_t kStages = sizeof...(Stages);
  static constexpr bool kFilters[] = {is_filter_stage<Stages>...};
  /// The last stage that filters, or kStages when none does.
  static constexpr std::size_t kLastFilter = [] {
    std::size_t last = kStages;
    for (std::size_t i = 0; i < kStages; ++i) {
      if (kFilters[i]) last = i;
    }
    return last;
  }();
  static constexpr bool kHasFilter = kLastFilter < kStages;
  /// The most elements one bulk read of a node source asks for (as a filter's own pull).
  static constexpr std::size_t kMaxReadAhead = 4096;

 public:
  [[nodiscard]] std::unique_ptr<FusedRun<Out>> clone() const override { return std::make_unique<FusedRunOf>(); }

  std::size_t pull(IterDataPipeBase& last, std::vector<Out>& out, std::size_t n) override {
    if (!bind(last) || !quiet(std::make_index_sequence<kStages>{})) return FusedRun<Out>::kNotHeld;
    ensure_current(std::make_index_sequence<kStages>{});
    return pull_through(out, n);
  }

 private:
  /// Where the run's outputs go, up to `wanted` of them: straight into `out`'s storage for element
  /// types that cost nothing to default-construct, so that the loop keeps its counts in registers.
  struct Sink {
    static constexpr bool kDirect = std::is_trivially_default_constructible_v<Out>;

    Sink(std::vector<Out>& into, std::size_t n) : out(into), first(into.size()), wanted(n) {
      if constexpr (kDirect) {
        out.resize(first + wanted);
        data = out.data() + first;
      }
    }
    [[nodiscard]] bool full() const noexcept { return produced >= wanted; }
    template <class X>
    void emit(X&& element) {
      if constexpr (kDirect) {
        data[produced] = std::forward<X>(element);
      } else {
        out.push_back(std::forward<X>(element));
      }
      ++produced;
    }
    /// Trims `out` to what was emitted.
    void finish() {
      if constexpr (kDirect) {
        if (produced != wanted) out.resize(first + produced);
      }
    }

    std::vector<Out>& out;
    std::size_t first;
    std::size_t wanted;
    std::size_t produced = 0;
    std::size_t passed = 0;  // elements of blocks that passed every filter
    Out* data = nullptr;
  };

  template <std::size_t I>
  using NodeAt = std::remove_pointer_t<std::tuple_element_t<I, Nodes>>;

  /// Pulls up to `n` elements through the bound run.
  std::size_t pull_through(std::vector<Out>& out, std::size_t n) {
    Sink sink(out, n);
    try {
      if constexpr (kHasFilter) {
        auto& pending = std::get<kLastFilter>(nodes_)->pending_;
        while (!sink.full() && !pending.empty()) {
          push<kLastFilter + 1, Origin::kOneByOne>(pending.take(), sink);
        }
      }
      if (!sink.full()) feed(sink);
    } catch (...) {
      sink.finish();
      throw;
    }
    sink.finish();
    return sink.produced;
  }

  /// Finds the run's nodes from `last` down, unless they are still the ones found before.
  bool bind(IterDataPipeBase& last) {
    if (bound_ && std::get<kStages - 1>(nodes_) == &last && still_bound(std::make_index_sequence<kStages>{})) {
      return true;
    }
    bound_ = false;
    auto* node = dynamic_cast<NodeAt<kStages - 1>*>(&last);
    if (node == nullptr) return false;
    std::get<kStages - 1>(nodes_) = node;
    bound_ = bind_below<kStages - 1>();
    if constexpr (!kMaySkip) bound_ = bound_ && !some_stage_skips(std::make_index_sequence<kStages>{});
    return bound_;
  }

  template <std::size_t... I>
  [[nodiscard]] bool some_stage_skips(std::index_sequence<I...> /*stages*/) const {
    return (std::get<I>(nodes_)->policy_.skips() || ...);
  }

  template <std::size_t I>
  bool bind_below() {
    auto& source = std::get<I>(nodes_)->source_.node();
    if constexpr (I == 0) {
      if constexpr (!std::is_void_v<Head>) head_ = dynamic_cast<Head*>(&source);
      return std::is_void_v<Head> || head_ != nullptr;
    } else {
      auto* below = dynamic_cast<NodeAt<I - 1>*>(&source);
      if (below == nullptr) return false;
      std::get<I - 1>(nodes_) = below;
      return bind_below<I - 1>();
    }
  }

  /// Whether edge I (into stage I) still reads the node bound below it.
  template <std::size_t I>
  [[nodiscard]] bool edge_holds() const {
    const void* target = &std::get<I>(nodes_)->source_.node();
    if constexpr (I > 0) {
      return target == std::get<I - 1>(nodes_);
    } else if constexpr (!std::is_void_v<Head>) {
      return target == head_;
    } else {
      return true;
    }
  }
  template <std::size_t... I>
  [[nodiscard]] bool still_bound(std::index_sequence<I...> /*stages*/) const {
    return (edge_holds<I>() && ...);
  }

  /// No node counts statistics, and no filter before the last one holds elements read ahead.
  template <std::size_t... I>
  [[nodiscard]] bool quiet(std::index_sequence<I...> /*stages*/) const {
    if constexpr (!std::is_void_v<Head>) {
      if (head_->counters() != nullptr) return false;
    }
    return (stage_quiet<I>() && ...);
  }
  template <std::size_t I>
  [[nodiscard]] bool stage_quiet() const {
    const auto* node = std::get<I>(nodes_);
    if (node->counters() != nullptr) return false;
    if constexpr (kFilters[I] && I < kLastFilter) return node->pending_.empty();
    return true;
  }

  /// Throws, as reading through the edges would, when a node of the run started an iteration the
  /// edge above it did not.
  template <std::size_t... I>
  void ensure_current(std::index_sequence<I...> /*stages*/) const {
    (std::get<I>(nodes_)->source_.ensure_current(), ...);
  }

  /// Where an element pushed into the run comes from. Only elements of a block read ahead from a
  /// node source (kBlock) can pass the last filter once the sink is full: the other callers stop
  /// as soon as it is, so their loops carry neither the check nor the pass count.
  enum class Origin { kOneByOne, kBlock };

  /// Runs `element`, an input of stage I, through stages I and on, each stage by its node's step.
  /// An element of a block that passed the last filter once `sink` is full waits in that filter's
  /// buffer, as its own read-ahead would.
  template <std::size_t I, Origin kOrigin, class X>
  void push(X&& element, Sink& sink) {
    if constexpr (kOrigin == Origin::kBlock && kHasFilter && I == kLastFilter + 1) {
      ++sink.passed;
      if (sink.full()) {
        std::get<kLastFilter>(nodes_)->pending_.push(std::forward<X>(element));
        return;
      }
    }
    if constexpr (I == kStages) {
      sink.emit(std::forward<X>(element));
    } else if constexpr (kFilters[I]) {
      if (std::get<I>(nodes_)->template keeps<kMaySkip>(std::as_const(element))) {
        push<I + 1, kOrigin>(std::forward<X>(element), sink);
      }
    } else {
      std::get<I>(nodes_)->template apply<kMaySkip>(std::forward<X>(element), [&](auto&& mapped) {
        push<I + 1, kOrigin>(std::forward<decltype(mapped)>(mapped), sink);
      });
    }
  }

  /// Feeds the run from its head until `sink` is full or the head ends.
  void feed(Sink& sink) {
    if constexpr (!std::is_void_v<Head>) {
      feed_from_range(sink);
    } else {
      feed_from_node(sink);
    }
  }

  /// Iterates the range source itself, one element at a time: nothing is read past what fills the
  /// sink. The element that fails (if one does) is consumed, as the source's own pull would.
  void feed_from_range(Sink& sink) {
    Head& head = *head_;
    if (!head.it_) return;
    using Access = typename Head::Access;
    const auto start = *head.it_;
    auto it = start;  // a copy the loop keeps in registers; written back however it ends
    const auto end = Access::end(head.range());
    std::size_t consumed = 0;  // counted only where the iterators cannot tell
    const auto write_back = [&] {
      *head.it_ = it;
      if constexpr (Access::kRandomAccess) {
        head.position_ += Access::distance(start, it);
      } else {
        head.position_ += consumed;
      }
    };
    try {
      if constexpr (Access::kRandomAccess && Access::kSizedSentinel) {
        // Four at a time while four remain and fit in the sink: neither end can come between
        // them, so the loop checks both once per four elements. (Only where what remains is one
        // subtraction: an endless or take_while range would be walked to its end.)
        const auto step = [&] {
          In element(*it);
          ++it;
          push<0, Origin::kOneByOne>(std::move(element), sink);
        };
        for (auto left = Access::distance(it, end); left >= 4 && sink.wanted - sink.produced >= 4; left -= 4) {
          step();
          step();
          step();
          step();
        }
      }
      while (!sink.full() && it != end) {
        In element(*it);
        ++it;
        if constexpr (!Access::kRandomAccess) ++consumed;
        push<0, Origin::kOneByOne>(std::move(element), sink);
      }
    } catch (...) {
      write_back();
      throw;
    }
    write_back();
  }

  /// Pulls from the node feeding the run in blocks (as large as the pass ratio so far suggests when
  /// the run filters and no stage skips) and runs each block through the stages in one loop.
  void feed_from_node(Sink& sink) {
    auto& input = std::get<0>(nodes_)->source_;
    while (!sink.full()) {
      const std::size_t wanted = sink.wanted - sink.produced;
      const std::size_t to_read = kHasFilter && !kMaySkip ? estimate_reads(wanted) : wanted;
      staging_.clear();
      std::size_t got = 0;
      try {
        got = input.pull(staging_, to_read);
      } catch (...) {
        // What the source appended before failing precedes the failure.
        const std::exception_ptr failure = std::current_exception();
        for (auto& element : staging_) push<0, Origin::kBlock>(std::move(element), sink);
        std::rethrow_exception(failure);
      }
      read_ += got;
      const std::size_t passed_before = sink.passed;
      for (auto& element : staging_) push<0, Origin::kBlock>(std::move(element), sink);
      passed_ += sink.passed - passed_before;
      if (got < to_read) break;
    }
  }

  /// Source elements to read for `wanted` outputs: the observed pass ratio, rounded up.
  [[nodiscard]] std::size_t estimate_reads(std::size_t wanted) const {
    if (passed_ == 0) return wanted;
    const std::size_t estimate = (wanted * read_ + passed_ - 1) / passed_;
    return std::clamp(estimate, wanted, std::max(wanted, kMaxReadAhead));
  }

  Nodes nodes_{};
  std::conditional_t<std::is_void_v<Head>, std::nullptr_t, Head*> head_ = nullptr;
  bool bound_ = false;
  std::vector<In> staging_;  // a block read from the node feeding the run
  std::size_t read_ = 0;     // elements read from that node, and how many of them passed every
  std::size_t passed_ = 0;   // filter: the pass ratio
};

/// A handle to the last node of an element-wise run, with the run's static types: its map() and
/// filter() extend the run (see the file comment). It is an IterPipe<Out> in every other respect.
template <class Head, class In, class... Stages>
class ElementwisePipe : public IterPipe<typename RunTypes<In, Stages...>::out> {
  using Out = typename RunTypes<In, Stages...>::out;

 public:
  /// `skips`: whether a stage of the run so far skips elements (OnError::skip()).
  explicit ElementwisePipe(const IterPipe<Out>& pipe, bool skips = false) : IterPipe<Out>(pipe), skips_(skips) {}

  /// IterPipe::map, extending the run.
  template <map_fn<Out> F>
  [[nodiscard]] auto map(F fn, OnError on_error = OnError::raise()) const {
    return extend<MapStage<F>>(std::make_shared<iter::Mapper<Out, F>>(*this, std::move(fn), on_error),
                               on_error.skips());
  }
  /// IterPipe::filter, extending the run.
  template <filter_fn<Out> G>
  [[nodiscard]] auto filter(G pred, OnError on_error = OnError::raise()) const {
    return extend<FilterStage<G>>(std::make_shared<iter::Filter<Out, G>>(*this, std::move(pred), on_error),
                                  on_error.skips());
  }

 private:
  /// Makes `node` the last of the run, with a fused run that checks policies only when a stage
  /// skips: a run where none does is compiled with no check of a policy.
  template <class Stage, class Node>
  auto extend(const std::shared_ptr<Node>& node, bool node_skips) const {
    const bool skips = skips_ || node_skips;
    // A run pays off from two stages, or from one stage fed by a range.
    if constexpr (!std::is_void_v<Head> || sizeof...(Stages) >= 1) {
      if (skips) {
        node->fuse(std::make_unique<FusedRunOf<Head, In, true, Stages..., Stage>>());
      } else {
        node->fuse(std::make_unique<FusedRunOf<Head, In, false, Stages..., Stage>>());
      }
    }
    return ElementwisePipe<Head, In, Stages..., Stage>(IterPipe<typename Node::value_type>(node), skips);
  }

  bool skips_;
};

}  // namespace dpipe::detail
