#pragma once
/// \file
/// How elements cross a process boundary, in the terms the type-erased graph can use: the typed
/// operation ops::Encode (<dpipe/core/element_ops.hpp>, run with apply_typed_op) reads a typed node
/// and encodes its elements with dpipe::Serializer; ops::Decode builds a node of the same element
/// type that decodes them from a RecordSource. MultiProcessingReadingService moves the bytes in between; a reading
/// service of your own can use the same pair over another transport.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>

#include <dpipe/serialization/serializer.hpp>

namespace dpipe {

class StateWriter;
class StateReader;

/// Receives encoded elements, one begin()/end() pair each. Thread-safety: one thread.
class ElementSink {
 public:
  virtual ~ElementSink() = default;
  /// Starts an element; the encoder writes it through the returned writer.
  virtual ByteWriter& begin() = 0;
  /// Ends the element begin() started.
  virtual void end() = 0;
  /// Ends the element begin() started when what it wrote is a handle to an element held elsewhere
  /// (ops::Handoff, worker threads): `held_bytes` estimates the memory that element holds, for a
  /// sink that bounds what its elements in flight take. The default ignores it.
  virtual void end_handle(std::uint64_t held_bytes) {
    (void)held_bytes;
    end();
  }
};

/// Reads a typed node and encodes its elements. Thread-safety: the thread iterating the node.
class ElementEncoder {
 public:
  virtual ~ElementEncoder() = default;
  /// Reads up to `max` elements from the node and writes each to `sink` as soon as it is produced;
  /// returns how many. Fewer than `max` means the node's stream ended. An exception from the node
  /// propagates after the elements before it were written.
  virtual std::size_t encode(std::size_t max, ElementSink& sink) = 0;
};

/// The encoded elements a decoding node reads. Thread-safety: used by the thread iterating that
/// node.
class RecordSource {
 public:
  virtual ~RecordSource() = default;
  /// The encoding of the next element (valid until the next call), or std::nullopt at the end of
  /// the stream.
  virtual std::optional<std::span<const std::byte>> next() = 0;
  /// Starts the stream of a new iteration.
  virtual void reset() = 0;
  /// Checkpoints: what the source holds that the decoding node has not read yet, as fields of the
  /// decoding node.
  virtual void save_state(StateWriter& writer) const = 0;
  virtual void load_state(const StateReader& reader) = 0;
  /// Calls `visit` with the encoding of each element the last load_state() restored, so that the
  /// decoding node can refuse a checkpoint whose elements do not decode.
  virtual void for_each_restored_element(const std::function<void(std::span<const std::byte>)>& visit) const = 0;
};

}  // namespace dpipe
