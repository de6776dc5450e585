#pragma once
/// \file
/// Mapper<T, F>, the node behind `map(fn)` and `collate(fn)`: applies fn to each element.
/// Stateless; the length is the source's. See <dpipe/iter/map.hpp>.

#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <dpipe/core/iter_datapipe.hpp>
#include <dpipe/core/iter_pipe.hpp>
#include <dpipe/core/typed_op.hpp>
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

  Mapper(const IterPipe<T>& source, F fn, std::string name = std::string(kName))
      : IterDataPipe<U>(std::move(name)), source_(source.ptr()), fn_(std::move(fn)) {
    register_typed_op_once<ops::ToThreadPoolMap, Mapper, &to_threadpool_map>();
  }
  /// Copies the configuration (and the run it is the last node of, unbound).
  Mapper(const Mapper& other)
      : IterDataPipe<U>(other), source_(other.source_), fn_(other.fn_), fused_(detail::clone_run(other.fused_)) {}

  /// Makes this node the last of a fused run of element-wise nodes (see fusion.hpp).
  void fuse(std::unique_ptr<detail::FusedRun<U>> run) { fused_ = std::move(run); }

  void for_each_input(const InputVisitor& visit) override { visit(source_); }
  [[nodiscard]] DataPipePtr clone_self() const override { return std::make_shared<Mapper>(*this); }
  [[nodiscard]] bool stateless() const noexcept override { return true; }

 protected:
  std::optional<U> next_impl() override {
    auto element = source_.next();
    if (!element) return std::nullopt;
    return std::optional<U>(std::in_place, fn_(std::move(*element)));
  }

  std::size_t pull_impl(std::vector<U>& out, std::size_t n) override {
    if (fused_) {
      const std::size_t produced = fused_->pull(*this, out, n);
      if (produced != detail::FusedRun<U>::kNotHeld) return produced;
    }
    if constexpr (std::same_as<T, U>) {
      // Transforms in place what the source appended to `out`.
      const std::size_t first = out.size();
      const std::size_t produced = pull_then(out, n, [&] { apply_in_place(out, first); });
      apply_in_place(out, first);
      return produced;
    } else {
      staging_.clear();
      const std::size_t produced = pull_then(staging_, n, [&] { append_mapped(out); });
      append_mapped(out);
      return produced;
    }
  }

  [[nodiscard]] std::optional<std::size_t> length_impl() const override { return source_.length(); }

 private:
  template <class, class, class...>
  friend class detail::FusedRunOf;

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

  /// Maps out[first, end) in place; if fn throws, the elements from the failing one are dropped.
  void apply_in_place(std::vector<U>& out, std::size_t first) {
    T* const data = out.data();
    std::size_t i = first;
    try {
      for (; i < out.size(); ++i) data[i] = fn_(std::move(data[i]));
    } catch (...) {
      out.erase(out.begin() + static_cast<std::ptrdiff_t>(i), out.end());
      throw;
    }
  }

  /// Appends fn of each staged element to `out`, then clears the staging area.
  void append_mapped(std::vector<U>& out) {
    out.reserve(out.size() + staging_.size());
    try {
      for (auto& element : staging_) out.push_back(fn_(std::move(element)));
    } catch (...) {
      staging_.clear();
      throw;
    }
    staging_.clear();
  }

  /// ops::ToThreadPoolMap: a threadpool_map node reading this node's input with its function.
  static DataPipePtr to_threadpool_map(const DataPipePtr& node, std::size_t threads, std::size_t max_in_flight) {
    const auto& self = static_cast<const Mapper&>(*node);
    auto parallel =
        std::make_shared<ThreadPoolMapper<T, F>>(IterPipe<T>(self.source_.shared()), self.fn_, threads, max_in_flight);
    parallel->set_tag(self.tag());
    return parallel;
  }

  Input<T> source_;
  F fn_;
  std::vector<T> staging_;  // reused between pulls when T and U differ; empty between calls
  std::unique_ptr<detail::FusedRun<U>> fused_;
};

}  // namespace dpipe::iter
