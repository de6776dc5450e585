#pragma once
/// \file
/// `demux(n, classifier, drop_none, buffer_size)` (torchdata's Demultiplexer): element x goes to
/// child classifier(x). `round_robin_demux(n, buffer_size)` (RoundRobinDemultiplexer): element j
/// goes to child j % n. Elements waiting for a child that is not being read are buffered, at most
/// `buffer_size` in total; beyond that the read throws BufferOverflowError. Checkpoint state: the
/// buffered elements (and the round-robin position).

#include <algorithm>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <dpipe/core/detail/buffered_elements.hpp>
#include <dpipe/core/detail/iteration_local.hpp>
#include <dpipe/core/iter_datapipe.hpp>
#include <dpipe/core/iter_pipe.hpp>
#include <dpipe/core/logging.hpp>
#include <dpipe/iter/detail/shared_buffer.hpp>

namespace dpipe::iter {

/// demux's routing: a user classifier.
template <class T, classifier_fn<T> F>
class ClassifierRouter {
 public:
  static constexpr std::string_view kName = "demux";

  ClassifierRouter(F classifier, bool drop_none) : classifier_(std::move(classifier)), drop_none_(drop_none) {}

  /// The child for `element` among `n`, or std::nullopt to drop it.
  std::optional<std::size_t> route(const T& element, std::size_t n) {
    const auto result = classifier_(element);
    std::optional<long long> index;
    if constexpr (std::integral<std::remove_cvref_t<decltype(result)>>) {
      index = static_cast<long long>(result);
    } else if (result) {
      index = static_cast<long long>(*result);
    }
    if (!index && drop_none_) return std::nullopt;
    if (!index || *index < 0 || *index >= static_cast<long long>(n)) {
      DPIPE_THROW(InvalidArgument, "Output of the classification fn should be between 0 and {}. {} is returned.", n - 1,
                  index ? std::to_string(*index) : std::string("None"));
    }
    return static_cast<std::size_t>(*index);
  }
  void restart() {}
  void save_state(StateWriter& /*writer*/) const {}
  void load_state(const StateReader& /*reader*/) {}
  [[nodiscard]] std::optional<std::size_t> child_length(std::size_t /*child*/, std::size_t /*n*/,
                                                        std::optional<std::size_t> /*source_length*/) const {
    return std::nullopt;
  }

 private:
  F classifier_;
  bool drop_none_;
};

/// round_robin_demux's routing: element j goes to child j % n.
template <class T>
class RoundRobinRouter {
 public:
  static constexpr std::string_view kName = "round_robin_demux";

  std::optional<std::size_t> route(const T& /*element*/, std::size_t n) {
    return static_cast<std::size_t>(next_++ % n);
  }
  void restart() { next_ = 0; }
  void save_state(StateWriter& writer) const { writer.write("next", next_); }
  void load_state(const StateReader& reader) { next_ = reader.read<std::uint64_t>("next"); }
  [[nodiscard]] std::optional<std::size_t> child_length(std::size_t child, std::size_t n,
                                                        std::optional<std::size_t> source_length) const {
    if (!source_length) return std::nullopt;
    return *source_length / n + (child < *source_length % n ? 1 : 0);
  }

 private:
  std::uint64_t next_ = 0;  // index of the next source element
};

/// The container behind demux() and round_robin_demux() children: the router picks each element's
/// child; elements for children not being read wait in per-child buffers, at most `buffer_size` in
/// total.
template <class T, class Router>
class Demultiplexer final : public detail::SharedBuffer {
 public:
  Demultiplexer(const IterPipe<T>& source, std::size_t num_instances, Router router, std::size_t buffer_size)
      : SharedBuffer(std::string(Router::kName), num_instances),
        source_(source.ptr()),
        router_(std::move(router)),
        buffer_size_(buffer_size),
        buffers_(num_instances) {}

  [[nodiscard]] std::string element_type() const override { return type_name<T>(); }
  void for_each_input(const InputVisitor& visit) override { visit(source_); }
  [[nodiscard]] DataPipePtr clone_self() const override { return std::make_shared<Demultiplexer>(*this); }
  [[nodiscard]] NodeSettings settings() const override {
    return {{"num_instances", std::to_string(buffers_.size())}, {"buffer_size", std::to_string(buffer_size_)}};
  }

  /// The next element for child `child`.
  std::optional<T> next_for(std::size_t child) {
    check_child(child);
    auto& own = *buffers_[child];
    if (!own.empty()) {
      std::optional<T> element(std::in_place, std::move(own.front()));
      own.pop_front();
      --buffered_;
      return element;
    }
    while (!source_ended_) {
      auto element = source_.next();
      if (!element) {
        source_ended_ = true;
        break;
      }
      const auto target = router_.route(std::as_const(*element), buffers_.size());
      if (!target) continue;
      if (*target == child) return element;
      if (buffered_ + 1 > buffer_size_) {
        DPIPE_THROW(BufferOverflowError,
                    "DemultiplexerIterDataPipe buffer overflow, buffer size {} is insufficient. ({}: "
                    "child {} is not being read; raise buffer_size or read the children more evenly)",
                    buffer_size_, label(), *target);
      }
      buffers_[*target]->push_back(std::move(*element));
      ++buffered_;
    }
    return std::nullopt;
  }

  [[nodiscard]] std::optional<std::size_t> child_length(std::size_t child) const {
    return router_.child_length(child, buffers_.size(), source_.length());
  }

  [[nodiscard]] bool save_state(StateWriter& writer) const override {
    save_generations(writer);
    writer.write("source_ended", source_ended_);
    router_.save_state(writer);
    for (std::size_t i = 0; i < buffers_.size(); ++i) {
      detail::write_elements<T>(writer, "buffer" + std::to_string(i), *this, *buffers_[i]);
    }
    return true;
  }

  void load_state(const StateReader& reader) override {
    load_generations(reader);
    source_ended_ = reader.read<bool>("source_ended");
    router_.load_state(reader);
    buffered_ = 0;
    for (std::size_t i = 0; i < buffers_.size(); ++i) {
      auto& buffer = *buffers_[i];
      auto elements = detail::read_elements<T>(reader, "buffer" + std::to_string(i), *this);
      buffered_ += elements.size();
      buffer.assign(std::make_move_iterator(elements.begin()), std::make_move_iterator(elements.end()));
    }
    if (buffered_ > buffer_size_)
      DPIPE_THROW(StateError, "{}: the saved buffers exceed buffer_size {}", label(), buffer_size_);
  }

 protected:
  void restart() override {
    for (auto& buffer : buffers_) buffer->clear();
    buffered_ = 0;
    source_ended_ = false;
    router_.restart();
    source_.reset();
  }

  [[nodiscard]] bool all_exhausted() const override { return source_ended_ && buffered_ == 0; }

 private:
  Input<T> source_;
  Router router_;
  std::size_t buffer_size_;
  std::vector<detail::IterationLocal<std::deque<T>>> buffers_;  // one per child
  std::size_t buffered_ = 0;
  bool source_ended_ = false;
};

}  // namespace dpipe::iter

namespace dpipe {

template <class T>
template <classifier_fn<T> F>
std::vector<IterPipe<T>> IterPipe<T>::demux(std::size_t n, F classifier, bool drop_none,
                                            std::size_t buffer_size) const {
  detail::require_instances(n);
  using Router = iter::ClassifierRouter<T, F>;
  return detail::make_children<T>(std::make_shared<iter::Demultiplexer<T, Router>>(
      *this, n, Router(std::move(classifier), drop_none), buffer_size));
}

template <class T>
std::vector<IterPipe<T>> IterPipe<T>::round_robin_demux(std::size_t n, std::size_t buffer_size) const {
  if (n < 1) DPIPE_THROW(InvalidArgument, "Expected `num_instaces` larger than 0, but {} is found", n);
  if (n == 1) {
    log_warning(
        "The operation of `round_robin_demux` with `num_instances=1` is an no-op and returns the provided "
        "`datapipe` in a list directly ({})",
        node().label());
    return {*this};
  }
  using Router = iter::RoundRobinRouter<T>;
  return detail::make_children<T>(std::make_shared<iter::Demultiplexer<T, Router>>(*this, n, Router{}, buffer_size));
}

}  // namespace dpipe

namespace dpipe::iter {

/// `src | iter::round_robin_demux(n, buffer_size)`.
[[nodiscard]] inline auto round_robin_demux(std::size_t n, std::size_t buffer_size = 1000) {
  return PipeAdaptor{[=](const auto& source) { return source.round_robin_demux(n, buffer_size); }};
}

/// `src | iter::demux(n, classifier, drop_none, buffer_size)`.
template <class F>
[[nodiscard]] auto demux(std::size_t n, F classifier, bool drop_none = false, std::size_t buffer_size = 1000) {
  return PipeAdaptor{[=](const auto& source) { return source.demux(n, classifier, drop_none, buffer_size); }};
}

}  // namespace dpipe::iter
