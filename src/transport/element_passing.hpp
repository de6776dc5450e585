#pragma once
// ElementPassing: how the elements of a graph's node leave the child (process or thread) that
// makes them and enter the reader, over the transport's rings. Between processes they are encoded
// with their Serializer into the records; between the threads of one process the records hold
// handles to the elements themselves (<dpipe/core/element_handoff.hpp>). These are the two
// implementations; a service picks one for its children and its merge, and nothing else asks which.
// Private to the library.

#include <memory>
#include <string>

#include <dpipe/core/datapipe.hpp>

namespace dpipe {
class ElementEncoder;
class ElementHandoff;
class RecordSource;
}  // namespace dpipe

namespace dpipe::detail::transport {

/// Thread-safety: const and stateless.
class ElementPassing {
 public:
  virtual ~ElementPassing() = default;

  /// An encoder reading `node` that writes each element into a record of the child's ring.
  [[nodiscard]] virtual std::unique_ptr<ElementEncoder> encoder(const DataPipePtr& node) const = 0;
  /// A node named `name` yielding `node`'s element type from the records `source` returns: what
  /// stands for `node` where its elements arrive.
  [[nodiscard]] virtual DataPipePtr receiver(const DataPipePtr& node, std::shared_ptr<RecordSource> source,
                                             std::string name) const = 0;
  /// The handles of `node`'s element type when the records hold handles, which whoever drops a
  /// record must discard; null when they hold encoded elements.
  [[nodiscard]] virtual const ElementHandoff* handoff(const DataPipePtr& node) const = 0;

 protected:
  ElementPassing() = default;
  ElementPassing(const ElementPassing&) = default;
  ElementPassing& operator=(const ElementPassing&) = default;
};

/// Elements encoded with their Serializer (ops::Encode, ops::Decode): between processes.
[[nodiscard]] const ElementPassing& encoded_elements() noexcept;
/// Elements handed over as handles (ops::Handoff): between the threads of one process.
[[nodiscard]] const ElementPassing& element_handles() noexcept;

}  // namespace dpipe::detail::transport
