#pragma once
/// \file
/// `map(fn)` (torchdata's Mapper): applies fn to each element. Stateless; the length is the
/// source's.

#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include <dpipe/core/input.hpp>
#include <dpipe/core/iter_pipe.hpp>

namespace dpipe::iter {

template <class T, map_fn<T> F>
class Mapper final : public IterDataPipe<map_result_t<F, T>> {
  using U = map_result_t<F, T>;

 public:
  static constexpr std::string_view kName = "map";

  Mapper(const IterPipe<T>& source, F fn)
      : IterDataPipe<U>(std::string(kName)), source_(source.ptr()), fn_(std::move(fn)) {}

  void for_each_input(const InputVisitor& visit) override { visit(source_); }
  [[nodiscard]] DataPipePtr clone_self() const override { return std::make_shared<Mapper>(*this); }
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

}  // namespace dpipe

namespace dpipe::iter {

/// `src | iter::map(fn)`.
template <class F>
[[nodiscard]] auto map(F fn) {
  return PipeAdaptor{[fn = std::move(fn)](const auto& source) { return source.map(fn); }};
}

}  // namespace dpipe::iter
