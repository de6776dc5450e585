#pragma once
/// \file
/// InputList<T>: the input edges of a node that reads several iter pipes of the same type
/// (concat, mux, mux_longest), with the length arithmetic they share.

#include <algorithm>
#include <cstddef>
#include <optional>
#include <tuple>
#include <vector>

#include <dpipe/core/iter_datapipe.hpp>
#include <dpipe/core/iter_pipe.hpp>

namespace dpipe::detail {

template <class T>
class InputList {
 public:
  explicit InputList(const std::vector<IterPipe<T>>& sources) {
    for (const auto& source : sources) inputs_.emplace_back(source.ptr());
  }

  [[nodiscard]] std::size_t size() const noexcept { return inputs_.size(); }
  [[nodiscard]] bool empty() const noexcept { return inputs_.empty(); }
  Input<T>& operator[](std::size_t index) { return inputs_[index]; }
  auto begin() { return inputs_.begin(); }
  auto end() { return inputs_.end(); }

  /// Calls `visit` on each edge (for DataPipe::for_each_input).
  void visit(const InputVisitor& visit) {
    for (auto& input : inputs_) visit(input);
  }

  /// The sum of the inputs' lengths, if all are known.
  [[nodiscard]] std::optional<std::size_t> total_length() const {
    std::size_t total = 0;
    for (const auto& input : inputs_) {
      const auto length = input.length();
      if (!length) return std::nullopt;
      total += *length;
    }
    return total;
  }

  /// The shortest input's length, if all are known (0 without inputs).
  [[nodiscard]] std::optional<std::size_t> shortest_length() const {
    std::optional<std::size_t> shortest;
    for (const auto& input : inputs_) {
      const auto length = input.length();
      if (!length) return std::nullopt;
      shortest = std::min(shortest.value_or(*length), *length);
    }
    return shortest.value_or(0);
  }

 private:
  std::vector<Input<T>> inputs_;
};

/// The lengths of a tuple of inputs, if all are known.
template <class Tuple>
std::optional<std::vector<std::size_t>> lengths_of(const Tuple& inputs) {
  std::vector<std::size_t> lengths;
  bool known = true;
  std::apply(
      [&](const auto&... input) {
        (
            [&] {
              const auto length = input.length();
              known = known && length.has_value();
              lengths.push_back(length.value_or(0));
            }(),
            ...);
      },
      inputs);
  if (!known) return std::nullopt;
  return lengths;
}

/// Calls `visit` on each edge of a tuple of inputs.
template <class Tuple>
void visit_all(Tuple& inputs, const InputVisitor& visit) {
  std::apply([&](auto&... input) { (visit(input), ...); }, inputs);
}

}  // namespace dpipe::detail
