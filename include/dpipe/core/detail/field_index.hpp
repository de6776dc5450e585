#pragma once
/// \file
/// field_index: which of S's DPIPE_FIELDS a member pointer names, and field_name: what the field is
/// called (from DPIPE_FIELDS' own text).

#include <cstddef>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>

#include <dpipe/core/fields.hpp>

namespace dpipe::detail {

inline constexpr std::size_t kNoField = static_cast<std::size_t>(-1);

/// The index in S's DPIPE_FIELDS of the field `member` names, found by where the member lies in a
/// default-constructed S; kNoField when it is not one of them.
template <has_fields S, class M>
std::size_t field_index(M S::*member) {
  static const S probe{};
  const auto fields = probe.dpipe_fields();
  const void* const target = &(probe.*member);
  std::size_t index = kNoField;
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    ((static_cast<const void*>(&std::get<I>(fields)) == target ? (void)(index = I) : (void)0), ...);
  }
  (std::make_index_sequence<std::tuple_size_v<decltype(fields)>>{});
  return index;
}

/// The name of field `index` of S: "label" for DPIPE_FIELDS(image, label) and index 1; "field 1"
/// for a type that spells dpipe_fields() out by hand.
template <has_fields S>
std::string field_name(std::size_t index) {
  if constexpr (requires { S::dpipe_field_names(); }) {
    std::string_view names = S::dpipe_field_names();
    for (std::size_t at = 0; at < index; ++at) {
      const auto comma = names.find(',');
      if (comma == std::string_view::npos) return "field " + std::to_string(index);
      names.remove_prefix(comma + 1);
    }
    names = names.substr(0, names.find(','));
    while (!names.empty() && names.front() == ' ') names.remove_prefix(1);
    while (!names.empty() && names.back() == ' ') names.remove_suffix(1);
    return std::string(names);
  } else {
    return "field " + std::to_string(index);
  }
}

}  // namespace dpipe::detail
