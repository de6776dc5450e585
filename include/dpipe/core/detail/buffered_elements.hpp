#pragma once
/// \file
/// Helpers for nodes that checkpoint buffered elements (shuffle, fork, mux, prefetch, ...) in one
/// field. Elements of a type without a Serializer can be checkpointed only while no element is
/// buffered.

#include <cstddef>
#include <exception>
#include <optional>
#include <ranges>
#include <string_view>
#include <vector>

#include <dpipe/core/datapipe.hpp>
#include <dpipe/core/state.hpp>
#include <dpipe/serialization/serializer.hpp>

namespace dpipe::detail {

/// Writes `elements` (any sized range of T) as field `field`: a count followed by the elements,
/// the encoding of a std::vector<T>.
template <class T, class Range>
void write_elements(StateWriter& writer, std::string_view field, const DataPipe& node, const Range& elements) {
  ByteWriter out = writer.field(field);
  if constexpr (serializable<T>) {
    out.write_size(std::size(elements));
    for (const auto& element : elements) out.write(static_cast<const T&>(element));
  } else {
    if (std::size(elements) != 0) {
      DPIPE_THROW(StateError,
                  "{} holds {} buffered elements of type {}, which has no dpipe::Serializer: declare "
                  "DPIPE_FIELDS(...) in the type or specialize dpipe::Serializer to checkpoint it",
                  node.label(), std::size(elements), type_name<T>());
    }
    out.write_size(0);
  }
}

/// Reads what write_elements wrote.
template <class T>
std::vector<T> read_elements(const StateReader& reader, std::string_view field, const DataPipe& node) {
  if constexpr (serializable<T>) {
    return reader.read<std::vector<T>>(field);
  } else {
    if (reader.read<std::uint64_t>(field) != 0) {
      DPIPE_THROW(StateError, "{}: the state holds elements of type {}, which has no dpipe::Serializer", node.label(),
                  type_name<T>());
    }
    return {};
  }
}

/// A produced element, or the exception that took its place. Neither marks the end of a stream.
template <class T>
struct Outcome {
  std::optional<T> value;
  std::exception_ptr error;
};

/// Writes, as write_elements does, the values of the Outcomes `project` finds in `items` (end
/// markers are skipped); returns whether an end marker was seen. A pending exception cannot be
/// checkpointed: StateError.
template <class T, class Range, class Project>
bool write_outcome_values(StateWriter& writer, std::string_view field, const DataPipe& node, const Range& items,
                          Project project) {
  std::vector<const T*> values;
  bool ended = false;
  for (const auto& item : items) {
    const Outcome<T>& outcome = project(item);
    if (outcome.error) {
      DPIPE_THROW(StateError, "{} holds a pending exception; a failed pipeline cannot be checkpointed", node.label());
    }
    if (outcome.value) {
      values.push_back(&*outcome.value);
    } else {
      ended = true;
    }
  }
  write_elements<T>(writer, field, node,
                    std::views::transform(values, [](const T* value) -> const T& { return *value; }));
  return ended;
}

/// Throws StateError unless the node's background work is stopped (graph::save_state stops it).
inline void require_stopped(bool running, const DataPipe& node) {
  if (running)
    DPIPE_THROW(StateError, "{} is running: stop its background work (graph::BackgroundStop) before saving its state",
                node.label());
}

}  // namespace dpipe::detail
