#pragma once
/// \file
/// `random_split(weights, seed, total_length)` (torchdata's RandomSplitter): one pipe per key of
/// `weights`; each element of the source goes to one of them, drawn with CPython's
/// random.choices from weights renormalized to `total_length` and decreased as elements are
/// dealt, so that the splits have the weighted sizes. The splits keep their own seed (the loader
/// does not reseed them): every epoch gives the same split until override_seed(). There is no
/// buffer: a split reads the whole source and keeps its share, so only one split can be iterated
/// at a time; starting another invalidates the first (torchdata's single-iterator error on the
/// source). Checkpoint state: the generator and the weights.

#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <dpipe/core/iter_datapipe.hpp>
#include <dpipe/core/iter_pipe.hpp>
#include <dpipe/iter/detail/shared_buffer.hpp>
#include <dpipe/random/python_random.hpp>

namespace dpipe {

/// Ordered (key, weight) pairs for random_split.
using SplitWeights = std::vector<std::pair<std::string, double>>;

namespace iter {

/// The container behind random_split()'s pipes.
template <class T>
class RandomSplitter final : public DataPipe {
 public:
  static constexpr std::string_view kName = "random_split";

  RandomSplitter(const IterPipe<T>& source, const SplitWeights& weights, std::uint64_t seed,
                 std::optional<std::size_t> total_length)
      : DataPipe(std::string(kName)), source_(source.ptr()), seed_(seed) {
    if (weights.empty()) DPIPE_THROW(InvalidArgument, "random_split needs at least one weight");
    for (const auto& [key, weight] : weights) {
      if (!(weight >= 0.0) || !std::isfinite(weight)) {
        DPIPE_THROW(InvalidArgument, "random_split: the weight of `{}` must be finite and >= 0, got {}", key, weight);
      }
      keys_.push_back(key);
      initial_weights_.push_back(weight);
    }
    if (total_length) {
      total_length_ = *total_length;
    } else if (const auto length = source.length()) {
      total_length_ = *length;
    } else {
      DPIPE_THROW(InvalidArgument,
                  "RandomSplitter needs `total_length`, but it is unable to infer it from the `source_datapipe`: {}.",
                  source.node().label());
    }
    initial_weights_ = normalize(initial_weights_, total_length_);
    restart();
    child_runs_.assign(keys_.size(), 0);
  }

  [[nodiscard]] PipeKind kind() const noexcept override { return PipeKind::kSharedBuffer; }
  [[nodiscard]] std::string element_type() const override { return type_name<T>(); }
  void for_each_input(const InputVisitor& visit) override { visit(source_); }
  [[nodiscard]] DataPipePtr clone_self() const override { return std::make_shared<RandomSplitter>(*this); }
  [[nodiscard]] NodeSettings settings() const override {
    NodeSettings settings{{"seed", std::to_string(seed_)}, {"total_length", std::to_string(total_length_)}};
    for (std::size_t i = 0; i < keys_.size(); ++i)
      settings.emplace_back("weight " + keys_[i], std::to_string(initial_weights_[i]));
    return settings;
  }

  [[nodiscard]] std::size_t num_children() const noexcept { return keys_.size(); }
  [[nodiscard]] const std::vector<std::string>& keys() const noexcept { return keys_; }

  /// Uses `seed` from the next iteration of any split on.
  void override_seed(std::uint64_t seed) noexcept { seed_ = seed; }

  /// Split `child` starts an iteration: the source starts over and the generator is reseeded.
  void start_child(std::size_t child) {
    restart();
    source_.reset();
    child_runs_[child] = ++run_;
  }

  /// The next element of split `child`.
  std::optional<T> next_for(std::size_t child) {
    if (child_runs_[child] != run_) dpipe::detail::throw_stale_iterator(source_.node());
    while (auto element = source_.next()) {
      if (draw() == child) return element;
    }
    return std::nullopt;
  }

  /// A split's length is known when the normalized weights are integers summing to total_length.
  [[nodiscard]] std::optional<std::size_t> child_length(std::size_t child) const {
    double sum = 0.0;
    for (const double weight : initial_weights_) {
      if (weight != std::floor(weight)) return std::nullopt;
      sum += weight;
    }
    if (sum != static_cast<double>(total_length_)) return std::nullopt;
    return static_cast<std::size_t>(initial_weights_[child]);
  }

  [[nodiscard]] std::string child_no_length_reason() const {
    return "Lengths of the split cannot be known in advance. Please supply integer `weights` that sum up to "
           "`total_length`.\nAlternatively, use `datapipe.set_length(LENGTH)` to manually set the desired length.";
  }

  [[nodiscard]] bool save_state(StateWriter& writer) const override {
    writer.write("seed", seed_);
    writer.write("rng", rng_);
    writer.write("weights", weights_);
    writer.write("remaining", std::uint64_t{remaining_});
    std::vector<bool> in_run;
    for (const auto run : child_runs_) in_run.push_back(run == run_ && run_ != 0);
    writer.write("children_in_run", in_run);
    return true;
  }
  void load_state(const StateReader& reader) override {
    seed_ = reader.read<std::uint64_t>("seed");
    rng_ = reader.read<PythonRandom>("rng");
    auto weights = reader.read<std::vector<double>>("weights");
    const auto in_run = reader.read<std::vector<bool>>("children_in_run");
    if (weights.size() != keys_.size() || in_run.size() != child_runs_.size())
      DPIPE_THROW(StateError, "{}: the state is for another number of splits", label());
    weights_ = std::move(weights);
    remaining_ = reader.read<std::uint64_t>("remaining");
    run_ = 1;
    for (std::size_t i = 0; i < child_runs_.size(); ++i) child_runs_[i] = in_run[i] ? 1 : 0;
  }

 private:
  static std::vector<double> normalize(const std::vector<double>& weights, std::size_t total_length) {
    double total_weight = 0.0;
    for (const double weight : weights) total_weight += weight;
    std::vector<double> normalized;
    for (const double weight : weights) normalized.push_back(weight * static_cast<double>(total_length) / total_weight);
    return normalized;
  }

  void restart() {
    rng_.seed(seed_);
    weights_ = initial_weights_;
    remaining_ = total_length_;
  }

  /// torchdata's draw(): a weighted choice; the chosen weight decreases by one.
  std::size_t draw() {
    if (remaining_ == 0) {
      DPIPE_THROW(InvalidArgument, "{}: the source has more than total_length = {} elements", label(), total_length_);
    }
    const std::size_t index = rng_.choose_index(weights_);
    weights_[index] -= 1;
    --remaining_;
    if (weights_[index] < 0) {
      weights_[index] = 0;
      weights_ = normalize(weights_, remaining_);
    }
    return index;
  }

  Input<T> source_;
  std::uint64_t seed_;
  std::vector<std::string> keys_;
  std::vector<double> initial_weights_;  // normalized to total_length_
  std::size_t total_length_ = 0;
  PythonRandom rng_;
  std::vector<double> weights_;
  std::size_t remaining_ = 0;
  std::uint64_t run_ = 0;  // counts split starts; a split whose run is not current is stale
  std::vector<std::uint64_t> child_runs_;
};

/// Sets the seed of the random_split that `split` belongs to, from its next iteration on.
template <class T>
void override_seed(const IterPipe<T>& split, std::uint64_t seed) {
  const auto inputs = split.node().inputs();
  auto* container = inputs.empty() ? nullptr : dynamic_cast<RandomSplitter<T>*>(inputs.front().get());
  if (container == nullptr)
    DPIPE_THROW(InvalidArgument, "override_seed: {} is not a random_split output", split.node().label());
  container->override_seed(seed);
}

/// `src | iter::random_split(weights, seed, total_length)`: the pipes of every key, in the order
/// of `weights`.
[[nodiscard]] inline auto random_split(SplitWeights weights, std::uint64_t seed,
                                       std::optional<std::size_t> total_length = std::nullopt) {
  return PipeAdaptor{[=](const auto& source) { return source.random_split(weights, seed, total_length); }};
}

/// `src | iter::random_split(weights, seed, total_length, target)`: the pipe of key `target`.
[[nodiscard]] inline auto random_split(SplitWeights weights, std::uint64_t seed,
                                       std::optional<std::size_t> total_length, std::string target) {
  return PipeAdaptor{[=](const auto& source) { return source.random_split(weights, seed, total_length, target); }};
}

}  // namespace iter

template <class T>
std::vector<IterPipe<T>> IterPipe<T>::random_split(const SplitWeights& weights, std::uint64_t seed,
                                                   std::optional<std::size_t> total_length) const {
  return detail::make_children<T>(std::make_shared<iter::RandomSplitter<T>>(*this, weights, seed, total_length));
}

template <class T>
IterPipe<T> IterPipe<T>::random_split(const SplitWeights& weights, std::uint64_t seed,
                                      std::optional<std::size_t> total_length, const std::string& target) const {
  const auto found =
      std::find_if(weights.begin(), weights.end(), [&](const auto& entry) { return entry.first == target; });
  if (found == weights.end()) DPIPE_THROW(KeyError, "`target={}` does not match any key in `weights`.", target);
  return random_split(weights, seed, total_length)[static_cast<std::size_t>(found - weights.begin())];
}

}  // namespace dpipe
