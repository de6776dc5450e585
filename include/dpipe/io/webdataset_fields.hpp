#pragma once
/// \file
/// WebDataset's own helpers on samples (webdataset's rename, decode and to_tuple) as callables
/// for `iter::map`: `rename_fields` gives fields other suffixes, `decode_fields` makes each
/// field's bytes a value by its suffix, `to_tuple` takes fields out as a std::tuple. A missing
/// field is a KeyError naming the sample and the suffix, so `map(fn, OnError::skip())` skips the
/// sample. Thread-safety: each callable may be called from several threads at once (its decoders
/// too, for decode_fields).

#include <algorithm>
#include <array>
#include <concepts>
#include <cstddef>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include <dpipe/core/type_name.hpp>
#include <dpipe/io/webdataset.hpp>

namespace dpipe::io {
namespace detail {

/// Throws InvalidArgument: the field `suffix` of the sample `key` holds another type than `type`.
[[noreturn]] void throw_field_type(std::string_view key, std::string_view suffix, std::string_view type);

template <class T>
struct is_variant : std::false_type {};
template <class... Ts>
struct is_variant<std::variant<Ts...>> : std::true_type {};

/// `value` as a T: itself, or the T a std::variant holds.
template <class T, class Value>
T field_as(Value&& value, std::string_view key, std::string_view suffix) {
  if constexpr (std::is_same_v<T, Value>) {
    return std::move(value);
  } else {
    static_assert(is_variant<Value>::value, "to_tuple<T...>: each T is the fields' type or one of its alternatives");
    if (auto* held = std::get_if<T>(&value)) return std::move(*held);
    throw_field_type(key, suffix, type_name<T>());
  }
}

template <class Value, std::size_t>
using Repeat = Value;

/// The value of the field `suffixes` names in `sample`; KeyError when there is none.
template <class Value>
Value* field_of(BasicWebDatasetSample<Value>& sample, std::string_view suffixes) {
  if (auto* value = sample.find(suffixes)) return value;
  throw_missing_field(sample.key, suffixes, sample.suffix_list());
}

/// The value `values[i]` points at: moved out, or copied when another entry points at it too.
template <class Pointers>
auto take(const Pointers& values, std::size_t i) {
  using Value = std::remove_pointer_t<typename Pointers::value_type>;
  if (std::count(values.begin(), values.end(), values[i]) > 1) return Value(*values[i]);
  return Value(std::move(*values[i]));
}

}  // namespace detail

/// Renames fields as webdataset's rename(image="jpg;png") does: each alias (".image") takes the
/// first field its suffixes name (".jpg;.png"), a KeyError when there is none. The fields the
/// aliases name leave the sample (so do fields already called like an alias); the others keep
/// their order, and the aliases follow in the order given.
class RenameFields {
 public:
  /// (alias, suffixes) pairs; InvalidArgument when a suffix does not start with '.'.
  explicit RenameFields(std::vector<std::pair<std::string, std::string>> aliases) : aliases_(std::move(aliases)) {
    for (const auto& [alias, suffixes] : aliases_) {
      detail::check_suffixes("rename_fields", alias, false);
      detail::check_suffixes("rename_fields", suffixes);
    }
  }

  template <class Value>
  BasicWebDatasetSample<Value> operator()(BasicWebDatasetSample<Value> sample) const {
    std::vector<Value*> values;
    for (const auto& alias : aliases_) values.push_back(detail::field_of(sample, alias.second));
    BasicWebDatasetSample<Value> renamed{std::move(sample.key), {}};
    for (auto& field : sample.fields)
      if (!named(field.first)) renamed.fields.push_back(std::move(field));
    for (std::size_t i = 0; i < values.size(); ++i)
      renamed.fields.emplace_back(aliases_[i].first, detail::take(values, i));
    return renamed;
  }

 private:
  /// Whether an alias or one of the aliases' suffixes is `suffix`.
  [[nodiscard]] bool named(std::string_view suffix) const;

  std::vector<std::pair<std::string, std::string>> aliases_;
};

/// `map(io::rename_fields({{".image", ".jpg;.png"}, {".label", ".cls"}}))`.
[[nodiscard]] inline RenameFields rename_fields(std::vector<std::pair<std::string, std::string>> aliases) {
  return RenameFields(std::move(aliases));
}

/// Decoders by suffix: {".cls", [](const std::string& bytes) { return std::stoi(bytes); }}.
template <class Value>
using FieldDecoders = std::map<std::string, std::function<Value(const std::string& bytes)>, std::less<>>;

/// Decodes a sample's fields by suffix: each field with a decoder becomes what its decoder
/// returns, in archive order; fields without a decoder are left out. A decoder's exception passes
/// through (`map` names the element). Value is the decoded fields' type, a std::variant when
/// they differ: to_tuple<T...> takes the alternatives out.
template <class Value>
class DecodeFields {
 public:
  /// InvalidArgument when a suffix does not start with '.'.
  explicit DecodeFields(FieldDecoders<Value> decoders) : decoders_(std::move(decoders)) {
    for (const auto& decoder : decoders_) detail::check_suffixes("decode_fields", decoder.first, false);
  }

  BasicWebDatasetSample<Value> operator()(const WebDatasetSample& sample) const {
    BasicWebDatasetSample<Value> decoded{sample.key, {}};
    for (const auto& [suffix, bytes] : sample.fields)
      if (const auto decoder = decoders_.find(suffix); decoder != decoders_.end())
        decoded.fields.emplace_back(suffix, decoder->second(bytes));
    return decoded;
  }

 private:
  FieldDecoders<Value> decoders_;
};

/// `map(io::decode_fields<Field>({{".txt", decode_text}, {".cls", decode_label}}))`.
template <class Value>
[[nodiscard]] DecodeFields<Value> decode_fields(FieldDecoders<Value> decoders) {
  return DecodeFields<Value>(std::move(decoders));
}

/// Takes N fields out of a sample as a std::tuple, in the order of their suffixes (each may list
/// alternatives, ".jpg;.png"); a KeyError names a missing one. Without types the tuple holds the
/// fields' values; with types `Ts` (one per suffix) each value is taken as its T: the value
/// itself, or the T its std::variant holds (InvalidArgument naming the field when it holds
/// another).
template <std::size_t N, class... Ts>
class ToTuple {
  static_assert(sizeof...(Ts) == 0 || sizeof...(Ts) == N, "to_tuple<T...>: one type per suffix");

 public:
  /// InvalidArgument when a suffix does not start with '.'.
  explicit ToTuple(std::array<std::string, N> suffixes) : suffixes_(std::move(suffixes)) {
    for (const auto& suffix : suffixes_) detail::check_suffixes("to_tuple", suffix);
  }

  template <class Value>
  auto operator()(BasicWebDatasetSample<Value> sample) const {
    std::array<Value*, N> values{};
    for (std::size_t i = 0; i < N; ++i) values[i] = detail::field_of(sample, suffixes_[i]);
    return tuple_of(sample.key, values, std::make_index_sequence<N>());
  }

 private:
  /// The tuple of the values `values` point at (see detail::take).
  template <class Value, std::size_t... I>
  auto tuple_of(const std::string& key, const std::array<Value*, N>& values, std::index_sequence<I...>) const {
    if constexpr (sizeof...(Ts) == 0) {
      return std::tuple<detail::Repeat<Value, I>...>(detail::take(values, I)...);
    } else {
      return std::tuple<Ts...>(detail::field_as<Ts>(detail::take(values, I), key, suffixes_[I])...);
    }
  }

  std::array<std::string, N> suffixes_;
};

/// `map(io::to_tuple(".jpg;.png", ".cls"))` (the fields' values), or
/// `map(io::to_tuple<Image, int>(".image", ".cls"))` (after decode_fields into a std::variant).
template <class... Ts, std::convertible_to<std::string_view>... Suffixes>
[[nodiscard]] ToTuple<sizeof...(Suffixes), Ts...> to_tuple(const Suffixes&... suffixes) {
  return ToTuple<sizeof...(Suffixes), Ts...>({std::string(std::string_view(suffixes))...});
}

}  // namespace dpipe::io
