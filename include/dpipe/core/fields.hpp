#pragma once
/// \file
/// has_fields: the types that list their fields with DPIPE_FIELDS (the macro is in
/// <dpipe/serialization/serializer.hpp>), which dpipe serializes and collates field by field.

namespace dpipe {

/// A type whose definition declares DPIPE_FIELDS(...).
template <class T>
concept has_fields = requires(T& value, const T& constant) {
  value.dpipe_fields();
  constant.dpipe_fields();
};

}  // namespace dpipe
