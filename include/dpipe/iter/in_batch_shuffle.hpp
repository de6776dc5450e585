#pragma once
/// \file
/// `in_batch_shuffle()` (torchdata's InBatchShuffler): shuffles the elements inside each batch with
/// CPython's random.sample, seeded like `shuffle` (set_seed per iteration, else the OS entropy
/// source); set_shuffle(false) passes batches through. Checkpoint state: the generator.

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <dpipe/core/iter_datapipe.hpp>
#include <dpipe/core/iter_pipe.hpp>
#include <dpipe/random/python_random.hpp>
#include <dpipe/random/seed_generator.hpp>

namespace dpipe::iter {

template <class E>
class InBatchShuffler final : public IterDataPipe<std::vector<E>>, public ShufflingDataPipe {
 public:
  static constexpr std::string_view kName = "in_batch_shuffle";

  explicit InBatchShuffler(const IterPipe<std::vector<E>>& source)
      : IterDataPipe<std::vector<E>>(std::string(kName)), source_(source.ptr()) {}

  void for_each_input(const InputVisitor& visit) override { visit(source_); }
  [[nodiscard]] DataPipePtr clone_self() const override { return std::make_shared<InBatchShuffler>(*this); }

  void set_seed(std::uint64_t seed) override { pending_seed_ = seed; }
  void set_shuffle(bool enabled) override { enabled_ = enabled; }
  /// The seed the next iteration will use, if one was set.
  [[nodiscard]] std::optional<std::uint64_t> pending_seed() const noexcept { return pending_seed_; }

  [[nodiscard]] bool save_state(StateWriter& writer) const override {
    writer.write("enabled", enabled_);
    writer.write("pending_seed", pending_seed_);
    writer.write("rng", rng_);
    return true;
  }
  void load_state(const StateReader& reader) override {
    enabled_ = reader.read<bool>("enabled");
    pending_seed_ = reader.read<std::optional<std::uint64_t>>("pending_seed");
    rng_ = reader.read<PythonRandom>("rng");
  }

 protected:
  void reset_impl() override {
    if (enabled_) {
      rng_.seed(pending_seed_ ? *pending_seed_ : entropy_seed());
      pending_seed_.reset();
    }
    source_.reset();
  }

  std::optional<std::vector<E>> next_impl() override {
    auto batch = source_.next();
    if (!batch || !enabled_) return batch;
    // random.sample(batch, len(batch)), moving the elements instead of copying them.
    std::vector<E> shuffled;
    shuffled.reserve(batch->size());
    for (const std::size_t i : rng_.sample_indices(batch->size(), batch->size())) {
      shuffled.push_back(std::move((*batch)[i]));
    }
    return shuffled;
  }

  [[nodiscard]] std::optional<std::size_t> length_impl() const override { return source_.length(); }

 private:
  Input<std::vector<E>> source_;
  bool enabled_ = true;
  std::optional<std::uint64_t> pending_seed_;
  PythonRandom rng_;
};

}  // namespace dpipe::iter

namespace dpipe {

template <class T>
template <class U>
requires is_vector<U> IterPipe<T> IterPipe<T>::in_batch_shuffle()
const { return make_iter<iter::InBatchShuffler<typename U::value_type>>(*this); }

}  // namespace dpipe

namespace dpipe::iter {

/// `src | iter::in_batch_shuffle()`.
[[nodiscard]] inline auto in_batch_shuffle() {
  return PipeAdaptor{[](const auto& source) { return source.in_batch_shuffle(); }};
}

}  // namespace dpipe::iter
