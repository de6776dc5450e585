// Writing your own nodes: an IterDataPipe (a running sum, with checkpoint support), a node template
// over any element type (every n-th element), and a MapDataPipe (squares of the keys), used by
// construction and in | chains through adaptors defined exactly like the built-in ones.

#include <cstdio>
#include <vector>

#include <dpipe/dpipe.hpp>

// [iter_node]
/// Yields the running sum of its input.
class RunningSum final : public dpipe::IterDataPipe<long> {
 public:
  explicit RunningSum(const dpipe::IterPipe<long>& source) : IterDataPipe("running_sum"), source_(source.ptr()) {}
  void for_each_input(const dpipe::InputVisitor& visit) override { visit(source_); }
  dpipe::DataPipePtr clone_self() const override { return std::make_shared<RunningSum>(*this); }
  bool save_state(dpipe::StateWriter& writer) const override {
    writer.write("sum", sum_);
    return true;
  }
  void load_state(const dpipe::StateReader& reader) override { sum_ = reader.read<long>("sum"); }

 protected:
  void reset_impl() override {
    sum_ = 0;
    source_.reset();
  }
  std::optional<long> next_impl() override {
    auto value = source_.next();
    if (!value) return std::nullopt;
    return sum_ += *value;
  }

 private:
  dpipe::Input<long> source_;
  long sum_ = 0;
};
// [iter_node]

// [template_node]
/// Keeps every `stride`-th element of any element type; stateless.
template <class T>
class Strided final : public dpipe::IterDataPipe<T> {
 public:
  Strided(const dpipe::IterPipe<T>& source, std::size_t stride)
      : dpipe::IterDataPipe<T>("strided"), source_(source.ptr()), stride_(stride) {}
  void for_each_input(const dpipe::InputVisitor& visit) override { visit(source_); }
  dpipe::DataPipePtr clone_self() const override { return std::make_shared<Strided>(*this); }
  bool stateless() const noexcept override { return true; }
  // A checkpoint records it: one saved with another stride is refused at load_state_dict().
  dpipe::NodeSettings settings() const override { return {{"stride", std::to_string(stride_)}}; }

 protected:
  std::optional<T> next_impl() override {
    auto element = source_.next();
    for (std::size_t skip = 1; element && skip < stride_; ++skip) {
      if (!source_.next()) break;
    }
    return element;
  }

 private:
  dpipe::Input<T> source_;
  std::size_t stride_;
};
// [template_node]

// [adaptors]
// The | adaptors: `src | running_sum()` builds RunningSum(src); `src | strided(n)` builds
// Strided<T>(src, n) for the element type T of src.
inline constexpr auto running_sum = dpipe::iter::adaptor<RunningSum>;
inline constexpr auto strided = dpipe::iter::adaptor_of<Strided>;
// [adaptors]

// [map_node]
/// Maps key k to k * k, for keys 0 .. size-1.
class Squares final : public dpipe::MapDataPipe<std::size_t, long> {
 public:
  explicit Squares(std::size_t size) : MapDataPipe("squares"), size_(size) {}
  void for_each_input(const dpipe::InputVisitor&) override {}
  dpipe::DataPipePtr clone_self() const override { return std::make_shared<Squares>(*this); }

 protected:
  long get_impl(const std::size_t& key) override {
    if (key >= size_) throw dpipe::KeyError("squares: no key " + std::to_string(key));
    return static_cast<long>(key * key);
  }
  std::size_t size_impl() const override { return size_; }

 private:
  std::size_t size_;
};
// [map_node]

int main() {
  // [use]
  auto squares = dpipe::make_map<Squares>(std::size_t{6});
  auto sums = dpipe::make_iter<RunningSum>(squares.to_iter());  // by construction
  auto piped = squares.to_iter() | running_sum()                // through the adaptors
               | dpipe::iter::filter([](long x) { return x % 2 == 1; }) | strided(std::size_t{2});
  // [use]
  std::printf("running sums of squares:");
  for (long x : sums) std::printf(" %ld", x);
  std::printf("\nevery other odd running sum:");
  for (long x : piped) std::printf(" %ld", x);
  std::printf("\n");

  // The node supports checkpoints: stop after three sums, restore into a fresh pipeline.
  auto it = sums.begin();
  for (int i = 0; i < 3; ++i) ++it;
  const auto checkpoint = dpipe::graph::save_state(sums);
  auto fresh = dpipe::make_iter<RunningSum>(dpipe::make_map<Squares>(std::size_t{6}).to_iter());
  dpipe::graph::load_state(fresh, checkpoint);
  std::printf("restored after three:");
  for (long x : fresh) std::printf(" %ld", x);
  std::printf("\n");
}
