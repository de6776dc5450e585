#pragma once
/// \file
/// `fullsync(timeout)` (torchdata's FullSync): keeps every rank of a distributed job in step so
/// that all ranks stop after the same number of elements. It is not replicable: under a
/// multiprocessing reading service it stays in the main process. With a world of one (no
/// distributed reading service) it is a pass-through. Stateless.

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <dpipe/core/iter_datapipe.hpp>
#include <dpipe/core/iter_pipe.hpp>

namespace dpipe::iter {

template <class T>
class FullSync final : public IterDataPipe<T> {
 public:
  static constexpr std::string_view kName = "fullsync";

  FullSync(const IterPipe<T>& source, std::chrono::seconds timeout)
      : IterDataPipe<T>(std::string(kName)), source_(source.ptr()), timeout_(timeout) {
    this->set_replicable(false);
  }

  void for_each_input(const InputVisitor& visit) override { visit(source_); }
  [[nodiscard]] DataPipePtr clone_self() const override { return std::make_shared<FullSync>(*this); }
  [[nodiscard]] bool stateless() const noexcept override { return true; }

  /// How long a rank waits for the others before failing.
  [[nodiscard]] std::chrono::seconds timeout() const noexcept { return timeout_; }

 protected:
  std::optional<T> next_impl() override { return source_.next(); }
  std::size_t pull_impl(std::vector<T>& out, std::size_t n) override { return source_.pull(out, n); }

 private:
  Input<T> source_;
  std::chrono::seconds timeout_;
};

}  // namespace dpipe::iter

namespace dpipe {

template <class T>
IterPipe<T> IterPipe<T>::fullsync(std::chrono::seconds timeout) const {
  return make_iter<iter::FullSync<T>>(*this, timeout);
}

}  // namespace dpipe

namespace dpipe::iter {

/// `src | iter::fullsync(timeout)`.
[[nodiscard]] inline auto fullsync(std::chrono::seconds timeout = std::chrono::seconds(1800)) {
  return PipeAdaptor{[=](const auto& source) { return source.fullsync(timeout); }};
}

}  // namespace dpipe::iter
