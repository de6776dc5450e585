#pragma once
/// \file
/// The typed operations (see <dpipe/core/typed_op.hpp>) every iter node supports for its element
/// type: reading services use them to split a graph across processes. An iter node of element type
/// T registers them for T when it is built; Encode and Decode only when T has a dpipe::Serializer.

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include <dpipe/core/datapipe.hpp>

namespace dpipe {

class ElementEncoder;
class ElementHandoff;
class RecordSource;

namespace ops {

/// A node with the same element type that stands in for `node` during graph surgery (torchdata's
/// _DummyIterDataPipe): MultiProcessingReadingService puts one where the dispatched branch was.
/// Iterating it throws UsageError.
struct Placeholder {
  using Function = DataPipePtr(const DataPipePtr& node);
  static constexpr std::string_view kOperation = "placeholder";
};

/// An encoder reading `node` for another process (see <dpipe/core/element_codec.hpp>).
struct Encode {
  using Function = std::unique_ptr<ElementEncoder>(const DataPipePtr& node);
  static constexpr std::string_view kOperation = "encode";
};

/// A node named `name`, yielding `node`'s element type decoded from `source`: what stands where
/// `node` ran when it runs in another process.
struct Decode {
  using Function = DataPipePtr(const DataPipePtr& node, std::shared_ptr<RecordSource> source, std::string name);
  static constexpr std::string_view kOperation = "decode";
};

/// The handles of `node`'s element type, for moving its elements to another thread without
/// encoding them (see <dpipe/core/element_handoff.hpp>).
struct Handoff {
  using Function = const ElementHandoff&(const DataPipePtr& node);
  static constexpr std::string_view kOperation = "handoff";
};

}  // namespace ops
}  // namespace dpipe
