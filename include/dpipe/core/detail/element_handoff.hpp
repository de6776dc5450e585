#pragma once
/// \file
/// HandoffOf<T>, the ElementHandoff of element type T (<dpipe/core/element_handoff.hpp>), with its
/// encoder and its receiving node, which the element operation ops::Handoff gives.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include <dpipe/core/detail/element_channel.hpp>
#include <dpipe/core/detail/iter_datapipe_classes.hpp>
#include <dpipe/core/element_codec.hpp>
#include <dpipe/core/element_handoff.hpp>
#include <dpipe/core/error.hpp>
#include <dpipe/core/state.hpp>
#include <dpipe/core/type_name.hpp>
#include <dpipe/serialization/serializer.hpp>

namespace dpipe::detail {

/// The handle of a box, and the box a handle names.
[[nodiscard]] inline std::uint64_t handle_of(const void* box) noexcept { return reinterpret_cast<std::uintptr_t>(box); }
template <class T>
[[nodiscard]] T* box_of(std::span<const std::byte> handle) {
  return reinterpret_cast<T*>(static_cast<std::uintptr_t>(from_bytes<std::uint64_t>(handle)));
}

/// Counts the bytes an encoding takes, without keeping them.
class ByteCounter final : public ByteSink {
 public:
  void write(const void* /*data*/, std::size_t size) override { bytes += size; }
  std::uint64_t bytes = 0;
};

/// What held_bytes() says of an element type without a Serializer: more than any allowance for
/// small elements, so that such elements keep to the prefetch counts.
inline constexpr std::uint64_t kUnknownHeldBytes = std::uint64_t{1} << 32;

/// The memory a handed-over element takes while in flight, about: its record (a header and a
/// handle), its box, and its encoded size for what it holds beyond the box (a string's or a
/// vector's contents). kUnknownHeldBytes without a Serializer.
template <class T>
[[nodiscard]] std::uint64_t held_bytes(const T& element) {
  if constexpr (serializable<T>) {
    ByteCounter counter;
    ByteWriter writer(counter);
    writer.write(element);
    return 2 * sizeof(std::uint64_t) + sizeof(T) + counter.bytes;
  } else {
    (void)element;
    return kUnknownHeldBytes;
  }
}

/// Writes each element of one typed node as a handle to a box holding it (the element is moved
/// in, never copied), with what it holds (held_bytes()). Thread-safety: the thread iterating the
/// node.
template <class T>
class HandoffEncoder final : public ElementEncoder {
 public:
  explicit HandoffEncoder(std::shared_ptr<IterDataPipe<T>> node) : node_(std::move(node)) {}

  std::size_t encode(std::size_t max, ElementSink& sink) override {
    for (std::size_t produced = 0; produced < max; ++produced) {
      auto element = node_->next();
      if (!element) return produced;
      auto box = std::make_unique<T>(std::move(*element));
      const std::uint64_t held = held_bytes(*box);
      sink.begin().write(handle_of(box.get()));
      sink.end_handle(held);
      (void)box.release();  // the record owns it now
    }
    return max;
  }

 private:
  std::shared_ptr<IterDataPipe<T>> node_;
};

/// Yields the elements whose handles a RecordSource returns, moving each out of its box.
template <class T>
class Receiver final : public RecordReaderNode<T> {
 public:
  Receiver(std::string name, std::shared_ptr<RecordSource> source)
      : RecordReaderNode<T>(std::move(name), std::move(source)) {}

  [[nodiscard]] DataPipePtr clone_self() const override { return std::make_shared<Receiver>(*this); }

 protected:
  std::optional<T> next_impl() override {
    const auto handle = this->source_->next();
    if (!handle) return std::nullopt;
    const std::unique_ptr<T> box(box_of<T>(*handle));
    return std::optional<T>(std::move(*box));
  }
};

template <class T>
class HandoffOf final : public ElementHandoff {
 public:
  [[nodiscard]] std::unique_ptr<ElementEncoder> encoder(const DataPipePtr& node) const override {
    return std::make_unique<HandoffEncoder<T>>(std::static_pointer_cast<IterDataPipe<T>>(node));
  }
  [[nodiscard]] DataPipePtr receiver(std::shared_ptr<RecordSource> source, std::string name) const override {
    return std::make_shared<Receiver<T>>(std::move(name), std::move(source));
  }
  void discard(std::span<const std::byte> handle) const noexcept override {
    delete box_of<T>(handle);  // NOLINT(cppcoreguidelines-owning-memory): a handle owns its box
  }
  [[nodiscard]] std::vector<std::byte> encode(std::span<const std::byte> handle) const override {
    if constexpr (serializable<T>) {
      return to_bytes(*box_of<T>(handle));
    } else {
      throw_unserializable();
    }
  }
  [[nodiscard]] std::vector<std::byte> adopt(std::span<const std::byte> bytes) const override {
    if constexpr (serializable<T>) {
      auto box = std::make_unique<T>(from_bytes<T>(bytes));
      auto handle = to_bytes(handle_of(box.get()));
      (void)box.release();  // the handle owns it now
      return handle;
    } else {
      throw_unserializable();
    }
  }

  static const HandoffOf& instance() {
    static const HandoffOf handoff;
    return handoff;
  }

 private:
  [[noreturn]] static void throw_unserializable() {
    DPIPE_THROW(StateNotSupportedError,
                "the elements in flight between worker threads are {}, which has no dpipe::Serializer: a checkpoint "
                "holds them as bytes (declare DPIPE_FIELDS(...) or specialize dpipe::Serializer)",
                type_name<T>());
  }
};

template <class T>
const ElementHandoff& handoff_of(const DataPipePtr& /*node*/) {
  return HandoffOf<T>::instance();
}

}  // namespace dpipe::detail
