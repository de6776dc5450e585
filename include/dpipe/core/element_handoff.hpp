#pragma once
/// \file
/// How elements move between threads of one process without being encoded: as handles, each the
/// address of a heap box holding one element (8 bytes). The typed operation ops::Handoff
/// (<dpipe/core/element_ops.hpp>) gives the ElementHandoff of a node's element type, for every
/// element type, move-only ones included. MultiProcessingReadingService's worker threads pass
/// handles through the same records as its worker processes pass encoded elements; a reading
/// service of your own can do the same over any transport of bytes.
///
/// A handle owns its element until a receiver takes it or discard() frees it: whoever drops a
/// record holding a handle must discard it, exactly once.

#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <dpipe/core/datapipe.hpp>

namespace dpipe {

class ElementEncoder;
class RecordSource;

/// The handles of one element type. Thread-safety: const and stateless; a handle may be written
/// in one thread and taken, discarded or encoded in another that acquired it after.
class ElementHandoff {
 public:
  virtual ~ElementHandoff() = default;

  /// An encoder reading `node` (of this element type) that writes each element as a handle.
  [[nodiscard]] virtual std::unique_ptr<ElementEncoder> encoder(const DataPipePtr& node) const = 0;
  /// A node named `name` yielding the elements whose handles `source` returns, taking them.
  [[nodiscard]] virtual DataPipePtr receiver(std::shared_ptr<RecordSource> source, std::string name) const = 0;
  /// Frees the element a handle holds.
  virtual void discard(std::span<const std::byte> handle) const noexcept = 0;
  /// The element's dpipe::Serializer encoding, for a checkpoint (the handle keeps its element).
  /// Throws StateNotSupportedError for an element type without a Serializer.
  [[nodiscard]] virtual std::vector<std::byte> encode(std::span<const std::byte> handle) const = 0;
  /// A new handle holding the element that `bytes` encode. Throws SerializationError when they do
  /// not decode as this element type, StateNotSupportedError without a Serializer.
  [[nodiscard]] virtual std::vector<std::byte> adopt(std::span<const std::byte> bytes) const = 0;

 protected:
  ElementHandoff() = default;
  ElementHandoff(const ElementHandoff&) = default;
  ElementHandoff& operator=(const ElementHandoff&) = default;
};

}  // namespace dpipe
