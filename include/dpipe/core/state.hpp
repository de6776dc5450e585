#pragma once
/// \file
/// Helpers for nodes that checkpoint buffered elements (shuffle, fork, mux, prefetch, ...).
/// Elements of a type without a Serializer can be checkpointed only while no element is buffered.

#include <cstddef>
#include <vector>

#include <dpipe/core/datapipe.hpp>
#include <dpipe/serialization/serializer.hpp>

namespace dpipe::detail {

/// Writes `elements` (any sized range of T) as a count followed by the elements.
template <class T, class Range>
void write_elements(StateWriter& writer, const DataPipe& node, const Range& elements) {
  if constexpr (serializable<T>) {
    writer.write_size(std::size(elements));
    for (const auto& element : elements) writer.write(static_cast<const T&>(element));
  } else {
    if (std::size(elements) != 0) {
      DPIPE_THROW(StateError,
                  "{} holds {} buffered elements of type {}, which has no dpipe::Serializer: declare "
                  "DPIPE_FIELDS(...) in the type or specialize dpipe::Serializer to checkpoint it",
                  node.label(), std::size(elements), type_name<T>());
    }
    writer.write_size(0);
  }
}

/// Reads what write_elements wrote.
template <class T>
std::vector<T> read_elements(StateReader& reader, const DataPipe& node) {
  if constexpr (serializable<T>) {
    return reader.read<std::vector<T>>();
  } else {
    if (reader.read<std::uint64_t>() != 0) {
      DPIPE_THROW(StateError, "{}: the state holds elements of type {}, which has no dpipe::Serializer", node.label(),
                  type_name<T>());
    }
    return {};
  }
}

}  // namespace dpipe::detail
