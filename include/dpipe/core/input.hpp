#pragma once
/// \file
/// Input<T>: a node's typed edge to an upstream IterDataPipe<T>. It checks on every read that the
/// upstream node has not been restarted by another consumer since this edge started it (torchdata's
/// single-iterator rule), so two consumers sharing one node without fork() get a clear error
/// instead of silently splitting the stream.

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <dpipe/core/iter_datapipe.hpp>

namespace dpipe {

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
    check();
    return node_->next();
  }

  /// Appends up to `n` upstream elements to `out`; fewer means the upstream ended.
  std::size_t pull(std::vector<T>& out, std::size_t n) {
    check();
    return node_->pull(out, n);
  }

  /// The upstream length, if known.
  [[nodiscard]] std::optional<std::size_t> length() const { return node_->length(); }

  /// The upstream node.
  [[nodiscard]] IterDataPipe<T>& node() const noexcept { return *node_; }

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
  void check() const {
    if (iteration_ != node_->iteration()) [[unlikely]]
      detail::throw_stale_iterator(*node_);
  }

  std::shared_ptr<IterDataPipe<T>> node_;
  std::uint64_t iteration_ = 0;
};

}  // namespace dpipe
