#pragma once
/// \file
/// ElementEncoderOf<T> and Decoder<T>, the typed ends of a process boundary (see
/// <dpipe/core/element_codec.hpp>), which the element operations ops::Encode and ops::Decode make,
/// and RecordReaderNode<T>, what Decoder shares with the receiving end of worker threads.

#include <memory>
#include <optional>
#include <string>
#include <utility>

#include <dpipe/core/detail/iter_datapipe_classes.hpp>
#include <dpipe/core/element_codec.hpp>
#include <dpipe/core/state.hpp>
#include <dpipe/serialization/serializer.hpp>

namespace dpipe::detail {

/// Encodes the elements of one typed node, each as soon as the node produced it. Thread-safety:
/// the thread iterating the node.
template <serializable T>
class ElementEncoderOf final : public ElementEncoder {
 public:
  explicit ElementEncoderOf(std::shared_ptr<IterDataPipe<T>> node) : node_(std::move(node)) {}

  std::size_t encode(std::size_t max, ElementSink& sink) override {
    for (std::size_t produced = 0; produced < max; ++produced) {
      auto element = node_->next();
      if (!element) return produced;
      sink.begin().write(*element);
      sink.end();
    }
    return max;
  }

 private:
  std::shared_ptr<IterDataPipe<T>> node_;
};

/// What every node reading a RecordSource is, whatever its records hold (Decoder: encoded
/// elements; Receiver, <dpipe/core/detail/element_handoff.hpp>: handles): a node without inputs
/// whose state is the source's, and which resets the source. Copies share the source.
template <class T>
class RecordReaderNode : public IterDataPipe<T> {
 public:
  void for_each_input(const InputVisitor& /*visit*/) override {}

  [[nodiscard]] bool save_state(StateWriter& writer) const override {
    source_->save_state(writer);
    return true;
  }
  void load_state(const StateReader& reader) override { source_->load_state(reader); }

 protected:
  RecordReaderNode(std::string name, std::shared_ptr<RecordSource> source)
      : IterDataPipe<T>(std::move(name)), source_(std::move(source)) {}

  void reset_impl() override { source_->reset(); }

  std::shared_ptr<RecordSource> source_;
};

/// Yields the elements a RecordSource holds, decoded. It stands where the part of the graph that
/// runs in another process was (MultiProcessingReadingService's merge of the workers, a worker's
/// feed from the dispatching process).
template <serializable T>
class Decoder final : public RecordReaderNode<T> {
 public:
  Decoder(std::string name, std::shared_ptr<RecordSource> source)
      : RecordReaderNode<T>(std::move(name), std::move(source)) {}

  [[nodiscard]] DataPipePtr clone_self() const override { return std::make_shared<Decoder>(*this); }

  /// Refuses (StateError) a checkpoint holding an element that does not decode as T.
  void load_state(const StateReader& reader) override {
    RecordReaderNode<T>::load_state(reader);
    this->source_->for_each_restored_element([this](std::span<const std::byte> bytes) {
      try {
        (void)from_bytes<T>(bytes);
      } catch (const SerializationError& error) {
        DPIPE_THROW(StateError, "{}: the checkpoint holds an element that does not decode as {} ({})", this->label(),
                    type_name<T>(), error.what());
      }
    });
  }

 protected:
  std::optional<T> next_impl() override {
    const auto bytes = this->source_->next();
    if (!bytes) return std::nullopt;
    try {
      return from_bytes<T>(*bytes);
    } catch (const SerializationError& error) {
      DPIPE_THROW(SerializationError,
                  "{}: an element does not decode as {} ({}); its Serializer must read exactly what it writes",
                  this->label(), type_name<T>(), error.what());
    }
  }
};

}  // namespace dpipe::detail
