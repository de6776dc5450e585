#pragma once
/// \file
/// IterPipe<T>: the value handle users hold. It shares ownership of an IterDataPipe<T> node, is an
/// input range (range-for, std::views and range-v3 views compose with it), and offers torchdata's
/// functional form as methods (`from(v).shuffle().sharding_filter().map(f).batch(32)`). The same
/// nodes are available as `|` adaptors in dpipe::iter (`src | dpipe::iter::map(f)`).
///
/// The composition methods are defined in the node headers; include <dpipe/dpipe.hpp>.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <iterator>
#include <memory>
#include <optional>
#include <ranges>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <dpipe/core/adaptor.hpp>
#include <dpipe/core/capabilities.hpp>
#include <dpipe/core/concepts.hpp>
#include <dpipe/core/detail/collate.hpp>
#include <dpipe/core/detail/lazy_iterator.hpp>
#include <dpipe/core/error_policy.hpp>
#include <dpipe/core/iter_datapipe.hpp>

namespace dpipe {

namespace detail {
template <class T>
struct NodeReader;
}  // namespace detail

/// A handle to a stream node. Copies share the node: iterating one copy invalidates iterators of
/// the others, as iterating the same torchdata DataPipe twice does.
/// Thread-safety: as the node's (one thread iterates at a time).
template <class T>
class IterPipe : public std::ranges::view_base {
 public:
  using value_type = T;
  using node_type = IterDataPipe<T>;
  /// See detail::LazyIterator: reads lazily; a new iterator makes the previous one stale.
  using iterator = detail::LazyIterator<T, detail::NodeReader<T>>;

  /// An empty handle; only assignment and destruction are valid on it.
  IterPipe() = default;
  /// Wraps `node`, which must not be null.
  explicit IterPipe(std::shared_ptr<IterDataPipe<T>> node) : node_(std::move(node)) {
    if (!node_) DPIPE_THROW(InvalidArgument, "IterPipe<{}>: the node is null", type_name<T>());
  }

  /// The node (shared).
  [[nodiscard]] const std::shared_ptr<IterDataPipe<T>>& ptr() const noexcept { return node_; }
  /// The node; throws UsageError on an empty handle.
  [[nodiscard]] IterDataPipe<T>& node() const {
    if (!node_) DPIPE_THROW(UsageError, "IterPipe<{}>: the handle is empty", type_name<T>());
    return *node_;
  }
  [[nodiscard]] explicit operator bool() const noexcept { return node_ != nullptr; }

  /// Starts a new iteration of the node and returns an iterator at its first element.
  [[nodiscard]] iterator begin() const;
  [[nodiscard]] std::default_sentinel_t end() const noexcept { return {}; }

  /// Tags the node (DataPipe::set_tag) and returns this handle, for use in chains:
  /// `src.map(decode).tag("expensive")`.
  const IterPipe& tag(std::string tag) const {
    node().set_tag(std::move(tag));
    return *this;
  }

  /// The number of elements one iteration yields, when known.
  [[nodiscard]] std::optional<std::size_t> length() const { return node().length(); }
  /// Like length(); throws LengthError when unknown.
  [[nodiscard]] std::size_t len() const { return node().len(); }

  // --- composition: torchdata's functional names -----------------------------------------------

  /// Applies `fn` to each element. Returns an IterPipe of fn's result (a handle that remembers the
  /// run of maps and filters it ends, so that the run pulls as one loop: see iter/detail/fusion.hpp).
  /// Under OnError::skip() the elements fn throws on are dropped, logged and counted (see
  /// <dpipe/core/error_policy.hpp>), and the length is unknown.
  template <map_fn<T> F>
  [[nodiscard]] auto map(F fn, OnError on_error = OnError::raise()) const;
  /// Keeps the elements for which `pred` is true, with an error policy as map's. Returns an
  /// IterPipe<T> (as map does).
  template <filter_fn<T> F>
  [[nodiscard]] auto filter(F pred, OnError on_error = OnError::raise()) const;
  /// Applies `fn` to each element and yields the elements of the range it returns, with an error
  /// policy as map's.
  template <flatmap_fn<T> F>
  [[nodiscard]] IterPipe<flatmap_result_t<F, T>> flatmap(F fn, OnError on_error = OnError::raise()) const;
  /// Groups consecutive elements into vectors of `batch_size`; the last one may be shorter
  /// unless `drop_last`.
  [[nodiscard]] IterPipe<std::vector<T>> batch(std::size_t batch_size, bool drop_last = false) const;
  /// Yields the elements of each range element (one level).
  template <class U = T>
  requires source_range<U>
  [[nodiscard]] IterPipe<range_element_t<U>> unbatch() const;
  /// Shuffles through a buffer of `buffer_size` elements (torchdata's algorithm, seeded by the
  /// loader each epoch).
  [[nodiscard]] IterPipe<T> shuffle(std::size_t buffer_size = 10000) const;
  /// Keeps every element whose index i satisfies `i % num_instances == instance_id`, once sharding
  /// is applied (graph::apply_sharding, or a reading service).
  [[nodiscard]] IterPipe<T> sharding_filter(std::optional<ShardingPriority> group_filter = std::nullopt) const;
  /// Marks the end of a branch that MultiProcessingReadingService runs once, in a dispatching
  /// process that deals elements round-robin to the workers. Outside it, an identity.
  [[nodiscard]] IterPipe<T> sharding_round_robin_dispatch(ShardingPriority group) const;
  /// Yields at most `limit` elements.
  [[nodiscard]] IterPipe<T> header(std::size_t limit = 10) const;
  /// Pairs each element with its index, counting from `start`.
  [[nodiscard]] IterPipe<std::pair<std::int64_t, T>> enumerate(std::int64_t start = 0) const;
  /// Yields tuples of one element from this pipe and from each of `others`; stops with the
  /// shortest.
  template <class... Us>
  [[nodiscard]] IterPipe<std::tuple<T, Us...>> zip(const IterPipe<Us>&... others) const;
  /// Yields this pipe's elements, then each of `others`'.
  template <std::convertible_to<IterPipe<T>>... Ps>
  [[nodiscard]] IterPipe<T> concat(const Ps&... others) const;
  /// Yields one element from each input in turn; stops when the shortest is exhausted, dropping
  /// a partly collected round.
  template <std::convertible_to<IterPipe<T>>... Ps>
  [[nodiscard]] IterPipe<T> mux(const Ps&... others) const;
  /// `n` pipes that each yield every element; a child may run ahead of the slowest by at most
  /// `buffer_size` elements.
  template <class U = T>
  requires copyable_element<U>
  [[nodiscard]] std::vector<IterPipe<T>> fork(std::size_t n, std::size_t buffer_size = 1000) const;
  /// `n` pipes; element x goes to pipe `classifier(x)` (or is dropped when the classifier returns
  /// std::nullopt and `drop_none`).
  template <classifier_fn<T> F>
  [[nodiscard]] std::vector<IterPipe<T>> demux(std::size_t n, F classifier, bool drop_none = false,
                                               std::size_t buffer_size = 1000) const;
  /// Repeats the whole stream `count` times, or forever when std::nullopt.
  [[nodiscard]] IterPipe<T> cycle(std::optional<std::size_t> count = std::nullopt) const;
  /// Reads ahead up to `buffer_size` elements on a background thread.
  [[nodiscard]] IterPipe<T> prefetch(std::size_t buffer_size = 10) const;
  /// Applies `fn` to each batch (torchdata's Collator); `collate()` turns a vector of tuples
  /// (or pairs) into a tuple (or pair) of vectors, and a vector of a DPIPE_FIELDS struct S into a
  /// Columns<S> (a vector per field).
  template <map_fn<T> F>
  [[nodiscard]] IterPipe<map_result_t<F, T>> collate(F fn, OnError on_error = OnError::raise()) const;
  template <class U = T>
  requires requires(U batch) { detail::DefaultCollate{}(std::move(batch)); }
  [[nodiscard]] auto collate(OnError on_error = OnError::raise()) const;
  /// Calls `fn` on vectors of `batch_size` elements and yields the elements of what it returns.
  template <batch_fn<T> F>
  [[nodiscard]] IterPipe<batch_fn_result_t<F, T>> map_batches(F fn, std::size_t batch_size) const;
  /// `n` pipes; pipe i yields elements i, i+n, i+2n, ...
  [[nodiscard]] std::vector<IterPipe<T>> round_robin_demux(std::size_t n, std::size_t buffer_size = 1000) const;
  /// Tuples of one element per input until all are exhausted; exhausted inputs give std::nullopt.
  template <class... Us>
  [[nodiscard]] IterPipe<std::tuple<std::optional<T>, std::optional<Us>...>> zip_longest(
      const IterPipe<Us>&... others) const;
  /// Like zip_longest(others...), filling exhausted inputs with copies of the matching element of
  /// `fill`.
  template <class... Us>
  requires(copyable_element<T>&&...&& copyable_element<Us>)
      [[nodiscard]] IterPipe<std::tuple<T, Us...>> zip_longest(std::tuple<T, Us...> fill,
                                                               const IterPipe<Us>&... others) const;
  /// One element from each input in turn, skipping exhausted inputs, until all are exhausted.
  template <std::convertible_to<IterPipe<T>>... Ps>
  [[nodiscard]] IterPipe<T> mux_longest(const Ps&... others) const;
  /// One pipe per tuple element (torchdata's UnZipper over a fork buffer).
  template <class U = T>
  requires(is_tuple_like<U>&& copyable_element<U>) [[nodiscard]] auto unzip(std::size_t buffer_size = 1000) const;
  /// `n` pipes; pipe i yields element i of each sequence, leaving out `columns_to_skip`.
  template <class U = T>
  requires((is_vector<U> || is_std_array<U>)&&copyable_element<U>)
      [[nodiscard]] std::vector<IterPipe<range_element_t<U>>> unzip(
          std::size_t n, std::size_t buffer_size = 1000, const std::vector<std::size_t>& columns_to_skip = {}) const;
  /// Yields each element `times` times in a row.
  template <class U = T>
  requires copyable_element<U>
  [[nodiscard]] IterPipe<T> repeat(std::size_t times) const;
  /// Keeps the first complete iteration in memory (at most `capacity` elements) and replays it.
  template <class U = T>
  requires copyable_element<U>
  [[nodiscard]] IterPipe<T> in_memory_cache(std::optional<std::size_t> capacity = std::nullopt) const;
  /// Groups elements by `key_fn`, as `options` (a dpipe::GroupByOptions, <dpipe/iter/groupby.hpp>)
  /// say.
  template <key_fn<T> F, class Options>
  [[nodiscard]] IterPipe<std::vector<T>> groupby(F key_fn, const Options& options) const;
  /// Like groupby, yielding (key, group) pairs.
  template <key_fn<T> F, class Options>
  [[nodiscard]] IterPipe<std::pair<key_fn_result_t<F, T>, std::vector<T>>> groupby_keyed(F key_fn,
                                                                                         const Options& options) const;
  /// Shuffles the elements inside each batch (seeded like shuffle).
  template <class U = T>
  requires is_vector<U>
  [[nodiscard]] IterPipe<T> in_batch_shuffle() const;
  /// Batches of `batch_size` drawn from shuffled buckets (torchdata's BucketBatcher); `sort_key`
  /// orders each bucket.
  [[nodiscard]] IterPipe<std::vector<T>> bucketbatch(std::size_t batch_size, bool drop_last = false,
                                                     std::size_t batch_num = 100, std::size_t bucket_num = 1,
                                                     std::function<std::vector<T>(std::vector<T>)> sort_key = nullptr,
                                                     bool use_in_batch_shuffle = true) const;
  /// One pipe per key of `weights`, ordered (key, weight) pairs (dpipe::SplitWeights), splitting the
  /// elements at random with their own seed.
  [[nodiscard]] std::vector<IterPipe<T>> random_split(const std::vector<std::pair<std::string, double>>& weights,
                                                      std::uint64_t seed,
                                                      std::optional<std::size_t> total_length = std::nullopt) const;
  /// The pipe of random_split for key `target`.
  [[nodiscard]] IterPipe<T> random_split(const std::vector<std::pair<std::string, double>>& weights, std::uint64_t seed,
                                         std::optional<std::size_t> total_length, const std::string& target) const;
  /// Keeps the ranks of a distributed job in step; not replicable. A pass-through in one process.
  [[nodiscard]] IterPipe<T> fullsync(std::chrono::milliseconds timeout = std::chrono::seconds(1800)) const;
  /// Applies `fn` on a pool of `threads` threads, in order, with at most `max_in_flight` elements
  /// taken and not yet handed out (defaults: hardware threads, 4 per thread). An exception from fn
  /// is an ElementError at that element's position, or, under OnError::skip(), a skipped element.
  template <map_fn<T> F>
  [[nodiscard]] IterPipe<map_result_t<F, T>> threadpool_map(F fn, std::optional<std::size_t> threads = std::nullopt,
                                                            std::optional<std::size_t> max_in_flight = std::nullopt,
                                                            OnError on_error = OnError::raise()) const;

 private:
  std::shared_ptr<IterDataPipe<T>> node_;
};

namespace detail {

/// How an IterPipe iterator reads: the node's next(), after checking that the node's iteration is
/// still the one the iterator started.
template <class T>
struct NodeReader {
  std::shared_ptr<IterDataPipe<T>> node;
  std::uint64_t iteration;

  std::optional<T> read() {
    if (node->iteration() != iteration) [[unlikely]]
      throw_stale_iterator(*node);
    return node->next();
  }
  [[nodiscard]] static bool end_is_final() noexcept { return true; }
};

}  // namespace detail

template <class T>
typename IterPipe<T>::iterator IterPipe<T>::begin() const {
  node().reset();
  return iterator(detail::NodeReader<T>{node_, node_->iteration()});
}

/// Builds a node of type `Node` from `args` and returns a handle to it.
template <class Node, class... Args>
[[nodiscard]] IterPipe<typename Node::value_type> make_iter(Args&&... args) {
  return IterPipe<typename Node::value_type>(std::make_shared<Node>(std::forward<Args>(args)...));
}

/// Appends a `Node<T>(node, args...)` to `node`, an erased iter node of element type T: the
/// implementation of typed operations such as ops::AppendPrefetch and ops::AppendShuffle
/// (`register_typed_op_once<ops::AppendPrefetch, T, &append_node<iter::Prefetcher, T, std::size_t>>()`).
template <template <class> class Node, class T, class... Args>
DataPipePtr append_node(const DataPipePtr& node, Args... args) {
  return std::make_shared<Node<T>>(IterPipe<T>(std::static_pointer_cast<IterDataPipe<T>>(node)), std::move(args)...);
}

namespace iter {

/// The `|` adaptor of a node class: `inline constexpr auto running_sum = iter::adaptor<RunningSum>;`
/// makes `src | running_sum(args...)` build `RunningSum(src, args...)`, as built-in adaptors do.
template <class Node>
inline constexpr Adaptor adaptor{
    [](const auto& source, const auto&... args) { return make_iter<Node>(source, args...); }};

/// The `|` adaptor of a node class template over its element type: for
/// `template <class T> class Strided : public IterDataPipe<T>`,
/// `inline constexpr auto strided = iter::adaptor_of<Strided>;` makes `src | strided(args...)`
/// build `Strided<T>(src, args...)`, T being the element type of `src`.
template <template <class> class Node>
inline constexpr Adaptor adaptor_of{[](const auto& source, const auto&... args) {
  return make_iter<Node<typename std::remove_cvref_t<decltype(source)>::value_type>>(source, args...);
}};

/// `src | iter::make<Node>(args...)` builds `Node(src, args...)`: adaptor<Node>, called at once.
template <class Node, class... Args>
[[nodiscard]] auto make(Args... args) {
  return adaptor<Node>(std::move(args)...);
}

}  // namespace iter
}  // namespace dpipe
