#pragma once
/// \file
/// `map(fn)` (torchdata's Mapper) and `collate(fn)` (Collator, a Mapper on batches): applies fn
/// to each element. Stateless; the length is the source's.

#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include <dpipe/core/iter_datapipe.hpp>
#include <dpipe/core/iter_pipe.hpp>
#include <dpipe/iter/threadpool_map.hpp>

namespace dpipe::iter {

template <class T, map_fn<T> F>
class Mapper final : public IterDataPipe<map_result_t<F, T>>, public ParallelizableMap {
  using U = map_result_t<F, T>;

 public:
  static constexpr std::string_view kName = "map";
  /// The name of the Mapper that collate() makes (torchdata's Collator is a Mapper).
  static constexpr std::string_view kCollateName = "collate";

  Mapper(const IterPipe<T>& source, F fn, std::string name = std::string(kName))
      : IterDataPipe<U>(std::move(name)), source_(source.ptr()), fn_(std::move(fn)) {}

  void for_each_input(const InputVisitor& visit) override { visit(source_); }
  [[nodiscard]] DataPipePtr clone_self() const override { return std::make_shared<Mapper>(*this); }
  [[nodiscard]] DataPipePtr to_threadpool_map(std::size_t threads, std::size_t max_in_flight) const override {
    auto parallel =
        std::make_shared<ThreadPoolMapper<T, F>>(IterPipe<T>(source_.shared()), fn_, threads, max_in_flight);
    parallel->set_tag(this->tag());
    return parallel;
  }
  [[nodiscard]] bool save_state(StateWriter& /*writer*/) const override { return true; }
  void load_state(StateReader& /*reader*/) override {}

 protected:
  std::optional<U> next_impl() override {
    auto element = source_.next();
    if (!element) return std::nullopt;
    return std::optional<U>(std::in_place, fn_(std::move(*element)));
  }

  std::size_t pull_impl(std::vector<U>& out, std::size_t n) override {
    if constexpr (std::same_as<T, U>) {
      // Transforms in place what the source appended to `out`.
      const std::size_t first = out.size();
      const std::size_t produced = source_.pull(out, n);
      T* const data = out.data();
      std::size_t i = first;
      try {
        for (; i < first + produced; ++i) data[i] = fn_(std::move(data[i]));
      } catch (...) {
        out.erase(out.begin() + static_cast<std::ptrdiff_t>(i), out.end());  // keep only mapped elements
        throw;
      }
      return produced;
    } else {
      staging_.clear();
      const std::size_t produced = source_.pull(staging_, n);
      out.reserve(out.size() + produced);
      for (auto& element : staging_) out.push_back(fn_(std::move(element)));
      staging_.clear();
      return produced;
    }
  }

  [[nodiscard]] std::optional<std::size_t> length_impl() const override { return source_.length(); }

 private:
  Input<T> source_;
  F fn_;
  std::vector<T> staging_;  // reused between pulls when T and U differ; empty between calls
};

}  // namespace dpipe::iter

namespace dpipe {

template <class T>
template <map_fn<T> F>
IterPipe<map_result_t<F, T>> IterPipe<T>::map(F fn) const {
  return make_iter<iter::Mapper<T, F>>(*this, std::move(fn));
}

template <class T>
template <map_fn<T> F>
IterPipe<map_result_t<F, T>> IterPipe<T>::collate(F fn) const {
  using Collator = iter::Mapper<T, F>;
  return make_iter<Collator>(*this, std::move(fn), std::string(Collator::kCollateName));
}

template <class T>
template <class U>
requires requires(U batch) { detail::DefaultCollate{}(std::move(batch)); }
auto IterPipe<T>::collate() const { return collate(detail::DefaultCollate{}); }

}  // namespace dpipe

namespace dpipe::iter {

/// `src | iter::collate(fn)`.
template <class F>
[[nodiscard]] auto collate(F fn) {
  return PipeAdaptor{[fn = std::move(fn)](const auto& source) { return source.collate(fn); }};
}

/// `src | iter::collate()`: a batch of tuples (or pairs) becomes a tuple (or pair) of vectors.
[[nodiscard]] inline auto collate() {
  return PipeAdaptor{[](const auto& source) { return source.collate(); }};
}

/// `src | iter::map(fn)`.
template <class F>
[[nodiscard]] auto map(F fn) {
  return PipeAdaptor{[fn = std::move(fn)](const auto& source) { return source.map(fn); }};
}

}  // namespace dpipe::iter
