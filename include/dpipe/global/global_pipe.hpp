#pragma once
/// \file
/// `global_order(source, options)`: a pipeline whose data, for a given seed, is the same whatever
/// the worker count, worker kind or world size, and whose checkpoints restore onto any of them.
/// GlobalPipe<T> is its handle: map, filter, flatmap and map_random keep each element's place in
/// the global stream; batch(n) makes each step of n positions one batch; in_order() (or the
/// conversion to IterPipe) ends it. See docs/determinism.md.
///
/// Example:
///   auto batches = dpipe::global_order(dpipe::map::from(samples)).map(decode).batch(64);
///   dpipe::DataLoader2<std::vector<Decoded>> loader(batches, service);

#include <concepts>
#include <cstddef>
#include <memory>
#include <utility>
#include <vector>

#include <dpipe/core/concepts.hpp>
#include <dpipe/core/error_policy.hpp>
#include <dpipe/core/iter_pipe.hpp>
#include <dpipe/core/map_pipe.hpp>
#include <dpipe/global/global_end.hpp>
#include <dpipe/global/sampled.hpp>
#include <dpipe/global/sampler.hpp>
#include <dpipe/global/step_batch.hpp>
#include <dpipe/iter/filter.hpp>
#include <dpipe/iter/flatmap.hpp>
#include <dpipe/iter/map.hpp>
#include <dpipe/map/from.hpp>

namespace dpipe {

/// A global-order pipeline of elements T. `kBatched`: after batch(), when each element is one
/// step's batch and only map() may follow. Copies share the nodes, as IterPipe's do.
/// Thread-safety: as IterPipe's.
template <class T, bool kBatched = false>
class GlobalPipe {
 public:
  using value_type = T;

  GlobalPipe(IterPipe<Sampled<T>> pipe, std::shared_ptr<GlobalOrderSource> source)
      : pipe_(std::move(pipe)), source_(std::move(source)) {}

  /// Applies `fn` to each element, with map's error policy (OnError::skip() drops the element:
  /// its position then yields nothing).
  template <map_fn<T> F>
  [[nodiscard]] auto map(F fn, OnError on_error = OnError::raise()) const {
    using U = map_result_t<F, T>;
    IterPipe<Sampled<U>> mapped = pipe_.map(
        [fn = std::move(fn)](Sampled<T> element) {
          return Sampled<U>{element.step, element.index, element.seed, fn(std::move(element.value))};
        },
        on_error);
    return GlobalPipe<U, kBatched>(std::move(mapped), source_);
  }

  /// Applies `fn(element, random)` to each element, `random` being a SampleRandom seeded by the
  /// loader's seed, the epoch and the element's source index: the same draws whatever the job's
  /// shape and whatever a filter upstream dropped.
  template <class F>
  requires(!kBatched && std::invocable<F&, T, SampleRandom&>)
      [[nodiscard]] auto map_random(F fn, OnError on_error = OnError::raise()) const {
    using U = std::remove_cvref_t<std::invoke_result_t<F&, T, SampleRandom&>>;
    IterPipe<Sampled<U>> mapped = pipe_.map(
        [fn = std::move(fn)](Sampled<T> element) {
          SampleRandom random(element.seed);
          return Sampled<U>{element.step, element.index, element.seed, fn(std::move(element.value), random)};
        },
        on_error);
    return GlobalPipe<U, kBatched>(std::move(mapped), source_);
  }

  /// Keeps the elements for which `pred` is true. A batch of the step then holds fewer elements.
  template <filter_fn<T> F>
  requires(!kBatched) [[nodiscard]] GlobalPipe filter(F pred, OnError on_error = OnError::raise()) const {
    IterPipe<Sampled<T>> kept =
        pipe_.filter([pred = std::move(pred)](const Sampled<T>& element) { return pred(element.value); }, on_error);
    return GlobalPipe(std::move(kept), source_);
  }

  /// Yields the elements of the range `fn` returns, each in the place of the element it came from.
  template <flatmap_fn<T> F>
  requires(!kBatched) [[nodiscard]] auto flatmap(F fn, OnError on_error = OnError::raise()) const {
    using U = flatmap_result_t<F, T>;
    IterPipe<Sampled<U>> expanded = pipe_.flatmap(
        [fn = std::move(fn)](Sampled<T> element) {
          std::vector<Sampled<U>> out;
          for (auto&& value : fn(std::move(element.value))) {
            out.push_back(
                Sampled<U>{element.step, element.index, element.seed, U(std::forward<decltype(value)>(value))});
          }
          return out;
        },
        on_error);
    return GlobalPipe<U, kBatched>(std::move(expanded), source_);
  }

  /// Each step of `batch_size` positions becomes one batch: the elements of those positions that
  /// passed the filters, in order (possibly fewer than batch_size, possibly none). `drop_last`
  /// drops a short last step. One global order has one batch size.
  [[nodiscard]] GlobalPipe<std::vector<T>, true> batch(std::size_t batch_size, bool drop_last = false) const
      requires(!kBatched) {
    source_->set_step(batch_size, drop_last);
    return GlobalPipe<std::vector<T>, true>(
        IterPipe<Sampled<std::vector<T>>>(std::make_shared<GlobalStepBatcher<T>>(pipe_)), source_);
  }

  /// The end of the global order: an IterPipe yielding the elements (the batches, after batch())
  /// in global order, this rank's steps of it in a distributed job.
  [[nodiscard]] IterPipe<T> in_order() const {
    if constexpr (kBatched) {
      return IterPipe<T>(std::make_shared<GlobalOrderOut<T, false>>(pipe_));
    } else {
      IterPipe<Sampled<std::vector<T>>> steps(std::make_shared<GlobalStepBatcher<T>>(pipe_));
      return IterPipe<T>(std::make_shared<GlobalOrderOut<std::vector<T>, true>>(steps));
    }
  }
  // NOLINTNEXTLINE(google-explicit-constructor): a global pipe is a stream where one is expected
  operator IterPipe<T>() const { return in_order(); }

 private:
  IterPipe<Sampled<T>> pipe_;
  std::shared_ptr<GlobalOrderSource> source_;
};

/// A global order over the map pipe `source` (integral keys 0 .. size()-1).
template <class K, class V>
[[nodiscard]] GlobalPipe<V> global_order(const MapPipe<K, V>& source, GlobalOrderOptions options = {}) {
  auto sampler = std::make_shared<GlobalSampler<K, V>>(source, options);
  return GlobalPipe<V>(IterPipe<Sampled<V>>(sampler), sampler);
}

/// A global order over a sized random-access range (copied, as map::from copies it).
template <std::ranges::random_access_range R>
requires std::ranges::sized_range<R>
[[nodiscard]] auto global_order(R&& range, GlobalOrderOptions options = {}) {
  return global_order(map::from(std::forward<R>(range)), options);
}

}  // namespace dpipe
