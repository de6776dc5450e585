#pragma once
/// \file
/// The implementations of the element operations (<dpipe/core/element_ops.hpp>) for element type
/// T, registered by every IterDataPipe<T> when it is built. <dpipe/core/iter_datapipe.hpp>
/// includes it after the classes (<dpipe/core/detail/iter_datapipe_classes.hpp>) it needs.

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <dpipe/core/detail/element_channel.hpp>
#include <dpipe/core/detail/element_handoff.hpp>
#include <dpipe/core/detail/iter_datapipe_classes.hpp>
#include <dpipe/core/detail/placeholder.hpp>
#include <dpipe/core/element_ops.hpp>
#include <dpipe/core/element_type.hpp>
#include <dpipe/core/typed_op.hpp>

namespace dpipe::detail {

template <class T>
DataPipePtr make_placeholder(const DataPipePtr& /*node*/) {
  return std::make_shared<Placeholder<T>>();
}

template <serializable T>
std::unique_ptr<ElementEncoder> make_encoder(const DataPipePtr& node) {
  return std::make_unique<ElementEncoderOf<T>>(std::static_pointer_cast<IterDataPipe<T>>(node));
}

template <serializable T>
DataPipePtr make_decoder(const DataPipePtr& /*node*/, std::shared_ptr<RecordSource> source, std::string name) {
  return std::make_shared<Decoder<T>>(std::move(name), std::move(source));
}

template <class T>
void register_element_ops() {
  register_typed_op_once<ops::Placeholder, T, &make_placeholder<T>>();
  register_typed_op_once<ops::Handoff, T, &handoff_of<T>>();
  if constexpr (serializable<T>) {
    register_typed_op_once<ops::Encode, T, &make_encoder<T>>();
    register_typed_op_once<ops::Decode, T, &make_decoder<T>>();
  }
}

}  // namespace dpipe::detail

/// The element types whose machinery libdpipe compiles once (src/core/element_types.cpp), so that
/// a user's translation unit does not (see <dpipe/core/element_type.hpp>).
#define DPIPE_LIBRARY_ELEMENT_TYPES(X) \
  X(int);                              \
  X(std::int64_t);                     \
  X(float);                            \
  X(double);                           \
  X(std::string);                      \
  X(std::vector<int>);                 \
  X(std::vector<std::int64_t>);        \
  X(std::vector<float>);               \
  X(std::vector<double>);              \
  X(std::vector<std::string>)

DPIPE_LIBRARY_ELEMENT_TYPES(DPIPE_EXTERN_ELEMENT_TYPE);
