#pragma once
/// \file
/// The classes of <dpipe/core/iter_datapipe.hpp> (IterDataPipe<T>, Input<T>), without the element
/// operations every IterDataPipe<T> registers when it is built: the headers that implement those
/// operations include this one, and <dpipe/core/iter_datapipe.hpp> includes both, so that the
/// two include each other in no order. Include <dpipe/core/iter_datapipe.hpp>.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <typeindex>
#include <utility>
#include <vector>

#include <dpipe/core/concepts.hpp>
#include <dpipe/core/datapipe.hpp>
#include <dpipe/core/error.hpp>
#include <dpipe/core/type_name.hpp>

namespace dpipe {

namespace detail {
template <class T>
void register_element_ops();
}  // namespace detail

/// What every stream node has regardless of its element type: starting iterations and the
/// length. Thread-safety: one thread iterates a node at a time.
class IterDataPipeBase : public DataPipe {
 public:
  [[nodiscard]] PipeKind kind() const noexcept final { return PipeKind::kIter; }

  /// Starts a new iteration (and a new iteration of the inputs). Iterators and edges bound to the
  /// previous iteration become stale. After a checkpoint restore, the first reset continues the
  /// restored iteration instead.
  void reset() {
    ++iteration_;
    if (std::exchange(continue_restored_, false)) return;
    reset_impl();
  }

  /// Counts resets; iterators and edges compare it to detect that they went stale.
  [[nodiscard]] std::uint64_t iteration() const noexcept { return iteration_; }

  /// Makes the next reset() continue the current (restored) iteration instead of starting anew.
  void continue_on_next_reset() noexcept { continue_restored_ = true; }

  /// What next() and pull() have done since counting was switched on (graph::enable_statistics).
  struct Counters {
    std::uint64_t calls = 0;
    std::uint64_t elements = 0;
    std::uint64_t nanoseconds = 0;  // inside next() / pull(), upstream work included
    std::uint64_t skipped = 0;      // input elements dropped by an OnError::skip() policy
  };
  /// Switches counting on (fresh counters) or off.
  void set_counting(bool enabled) { counters_ = enabled ? std::make_unique<Counters>() : nullptr; }
  /// The counters, or nullptr when counting is off.
  [[nodiscard]] const Counters* counters() const noexcept { return counters_.get(); }

  /// The number of elements one iteration yields, when the node knows it.
  [[nodiscard]] std::optional<std::size_t> length() const { return length_impl(); }

  /// Like length(), but throws LengthError when the length is not known.
  [[nodiscard]] std::size_t len() const {
    if (auto n = length_impl()) return *n;
    throw LengthError(no_length_reason());
  }

 protected:
  explicit IterDataPipeBase(std::string name) : DataPipe(std::move(name)) {}
  /// Copies the configuration; a copy does not count, and its next reset() starts a fresh
  /// iteration even when the original was about to continue a restored one.
  IterDataPipeBase(const IterDataPipeBase& other) : DataPipe(other), iteration_(other.iteration_) {}

  /// Adds one call's work to the counters (when counting).
  void count(std::uint64_t elements, std::chrono::steady_clock::time_point start) noexcept {
    counters_->calls += 1;
    counters_->elements += elements;
    counters_->nanoseconds += static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count());
  }

  /// Counts an input element its error policy skipped (when counting).
  void count_skipped() noexcept {
    if (counters_) ++counters_->skipped;
  }

  /// Resets per-iteration state. The default resets every input edge; override it to clear the
  /// node's own state too (and call the base or reset the edges yourself).
  virtual void reset_impl() {
    for_each_input([](InputSlot& input) { input.reset(); });
  }

  /// The length of one iteration, if known. The default is unknown.
  [[nodiscard]] virtual std::optional<std::size_t> length_impl() const { return std::nullopt; }

  /// The message of the LengthError len() throws when length_impl() is unknown.
  [[nodiscard]] virtual std::string no_length_reason() const { return label() + " instance doesn't have valid length"; }

 private:
  std::uint64_t iteration_ = 0;
  bool continue_restored_ = false;
  std::unique_ptr<Counters> counters_;
};

/// A node producing a stream of T. The public functions are non-virtual wrappers over the
/// protected *_impl hooks. Thread-safety: one thread iterates a node at a time.
template <class T>
class IterDataPipe : public IterDataPipeBase {
  static_assert(element<T>, "dpipe elements must be movable objects (see dpipe::element)");

 public:
  using value_type = T;

  [[nodiscard]] std::string element_type() const final { return type_name<T>(); }

  /// The next element, or std::nullopt at the end of the stream (and on every call after it).
  std::optional<T> next() {
    if (counters() == nullptr) [[likely]]
      return next_impl();
    const auto start = std::chrono::steady_clock::now();
    auto element = next_impl();
    count(element ? 1 : 0, start);
    return element;
  }

  /// Appends up to `n` elements to `out`; returns how many. Fewer than `n` means the stream ended.
  /// When it throws, the elements it appended before throwing precede the failure in the stream.
  std::size_t pull(std::vector<T>& out, std::size_t n) {
    if (counters() == nullptr) [[likely]]
      return pull_impl(out, n);
    const auto start = std::chrono::steady_clock::now();
    const std::size_t produced = pull_impl(out, n);
    count(produced, start);
    return produced;
  }

  [[nodiscard]] std::type_index element_type_index() const noexcept final { return typeid(T); }

 protected:
  /// Also registers the element operations (<dpipe/core/element_ops.hpp>) for T.
  explicit IterDataPipe(std::string name) : IterDataPipeBase(std::move(name)) { detail::register_element_ops<T>(); }
  IterDataPipe(const IterDataPipe&) = default;

  /// Produces the next element or std::nullopt at the end; after the end it keeps returning
  /// std::nullopt.
  virtual std::optional<T> next_impl() = 0;

  /// Bulk form of next_impl(); the default calls next_impl() up to `n` times.
  virtual std::size_t pull_impl(std::vector<T>& out, std::size_t n) {
    std::size_t produced = 0;
    while (produced < n) {
      auto element = next_impl();
      if (!element) break;
      out.push_back(std::move(*element));
      ++produced;
    }
    return produced;
  }
};

/// A typed input edge. Thread-safety: used by the thread iterating the owning node.
template <class T>
class Input final : public InputSlot {
 public:
  Input() = default;
  explicit Input(std::shared_ptr<IterDataPipe<T>> node) : node_(std::move(node)) {
    if (!node_)
      DPIPE_THROW(InvalidArgument, "an input pipe of {} is empty (a default-constructed handle)", type_name<T>());
    iteration_ = node_->iteration();
  }
  Input(const Input&) = default;
  Input& operator=(const Input&) = default;

  /// The next upstream element, or std::nullopt at its end.
  std::optional<T> next() {
    ensure_current();
    return node_->next();
  }

  /// Appends up to `n` upstream elements to `out`; fewer means the upstream ended.
  std::size_t pull(std::vector<T>& out, std::size_t n) {
    ensure_current();
    return node_->pull(out, n);
  }

  /// Throws UsageError when the upstream node started an iteration this edge did not (torchdata's
  /// single-iterator rule). Reading through the edge checks it; code that reads the upstream node
  /// by other means (a fused run of element-wise nodes) calls it itself.
  void ensure_current() const {
    if (iteration_ != node_->iteration()) [[unlikely]]
      detail::throw_stale_iterator(*node_);
  }

  /// The upstream length, if known.
  [[nodiscard]] std::optional<std::size_t> length() const { return node_->length(); }

  /// The upstream node.
  [[nodiscard]] IterDataPipe<T>& node() const noexcept { return *node_; }
  /// The upstream node, shared.
  [[nodiscard]] const std::shared_ptr<IterDataPipe<T>>& shared() const noexcept { return node_; }

  [[nodiscard]] DataPipePtr target() const override { return node_; }

  [[nodiscard]] bool try_assign(const DataPipePtr& replacement) override {
    auto typed = std::dynamic_pointer_cast<IterDataPipe<T>>(replacement);
    if (!typed) return false;
    node_ = std::move(typed);
    rebind();
    return true;
  }

  [[nodiscard]] std::string expected_type() const override { return "an iter pipe of " + type_name<T>(); }

  void reset() override {
    node_->reset();
    iteration_ = node_->iteration();
  }

  void rebind() noexcept override { iteration_ = node_->iteration(); }

 private:
  std::shared_ptr<IterDataPipe<T>> node_;
  std::uint64_t iteration_ = 0;
};

/// Iter pipes of any element type.
template <class P>
concept iter_datapipe = std::derived_from<P, IterDataPipe<typename P::value_type>>;

}  // namespace dpipe
