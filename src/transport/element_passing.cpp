// The two ways elements pass over the transport: encoded, or as handles.

#include "transport/element_passing.hpp"

#include <utility>

#include <dpipe/core/element_codec.hpp>
#include <dpipe/core/element_handoff.hpp>
#include <dpipe/core/element_ops.hpp>
#include <dpipe/core/typed_op.hpp>

namespace dpipe::detail::transport {
namespace {

class EncodedElements final : public ElementPassing {
 public:
  [[nodiscard]] std::unique_ptr<ElementEncoder> encoder(const DataPipePtr& node) const override {
    return apply_typed_op<ops::Encode>(node);
  }
  [[nodiscard]] DataPipePtr receiver(const DataPipePtr& node, std::shared_ptr<RecordSource> source,
                                     std::string name) const override {
    return apply_typed_op<ops::Decode>(node, std::move(source), std::move(name));
  }
  [[nodiscard]] const ElementHandoff* handoff(const DataPipePtr& /*node*/) const override { return nullptr; }
};

class ElementHandles final : public ElementPassing {
 public:
  [[nodiscard]] std::unique_ptr<ElementEncoder> encoder(const DataPipePtr& node) const override {
    return apply_typed_op<ops::Handoff>(node).encoder(node);
  }
  [[nodiscard]] DataPipePtr receiver(const DataPipePtr& node, std::shared_ptr<RecordSource> source,
                                     std::string name) const override {
    return apply_typed_op<ops::Handoff>(node).receiver(std::move(source), std::move(name));
  }
  [[nodiscard]] const ElementHandoff* handoff(const DataPipePtr& node) const override {
    return &apply_typed_op<ops::Handoff>(node);
  }
};

// Constant-initialized, not function-local statics: a child forked while another thread of its
// parent ran a static's guarded initializer would wait on that guard forever (a loader per rank
// thread, each forking workers, hung so under AddressSanitizer).
constinit const EncodedElements kEncodedElements{};
constinit const ElementHandles kElementHandles{};

}  // namespace

const ElementPassing& encoded_elements() noexcept { return kEncodedElements; }

const ElementPassing& element_handles() noexcept { return kElementHandles; }

}  // namespace dpipe::detail::transport
