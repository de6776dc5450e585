#pragma once
/// \file
/// The serialization customization point: how element types and node state become bytes, for
/// checkpoints (and, in the multiprocessing reading service, for crossing a process boundary).
///
/// Covered without user code: arithmetic types and enums, std::string, std::vector, std::array,
/// std::pair, std::tuple, std::optional, std::unique_ptr, std::variant, std::map,
/// std::unordered_map, std::set, and trivially copyable structs (copied byte for byte: do not
/// rely on this for structs holding pointers). A user type opts in with one declaration inside the type,
///
///     struct Sample { std::string path; std::vector<float> pixels; int label;
///                     DPIPE_FIELDS(path, pixels, label) };
///
/// or with a full specialization of dpipe::Serializer<T> providing `static void write(ByteWriter&,
/// const T&)` and `static T read(ByteReader&)`. The encoding is native-endian and not meant to be
/// read on another architecture.

#include <array>
#include <bit>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include <dpipe/core/error.hpp>
#include <dpipe/core/fields.hpp>
#include <dpipe/core/type_name.hpp>

namespace dpipe {

class ByteWriter;
class ByteReader;

/// Customization point: specialize for a type, or give the type a DPIPE_FIELDS(...) declaration.
template <class T>
struct Serializer;

/// Types dpipe can encode with Serializer<T>.
template <class T>
concept serializable = requires(ByteWriter& writer, ByteReader& reader, const T& value) {
  Serializer<T>::write(writer, value);
  { Serializer<T>::read(reader) } -> std::same_as<T>;
};

/// Where a ByteWriter puts bytes when it does not append to a vector: the multiprocessing reading
/// service encodes elements straight into shared memory through one.
class ByteSink {
 public:
  /// Takes `size` (> 0) bytes.
  virtual void write(const void* data, std::size_t size) = 0;

 protected:
  ByteSink() = default;
  ByteSink(const ByteSink&) = default;
  ByteSink& operator=(const ByteSink&) = default;
  ~ByteSink() = default;
};

/// Appends encoded values to a byte vector or a ByteSink. Thread-safety: none (one writer per
/// buffer).
class ByteWriter {
 public:
  explicit ByteWriter(std::vector<std::byte>& out) noexcept : out_(&out) {}
  explicit ByteWriter(ByteSink& sink) noexcept : sink_(&sink) {}

  /// Appends `size` raw bytes.
  void write_bytes(const void* data, std::size_t size) {
    if (size == 0) return;
    if (out_ == nullptr) {
      sink_->write(data, size);
      return;
    }
    append(data, size);
  }

  /// Appends the encoding of `value`.
  template <serializable T>
  void write(const T& value) {
    Serializer<T>::write(*this, value);
  }

  /// Appends a length or count.
  void write_size(std::size_t size);

 private:
  // Out of line: inlined into large callers, GCC 12 at -O3 reports false buffer overflows in
  // vector::resize (-Wstringop-overflow).
  [[gnu::noinline]] void append(const void* data, std::size_t size) {
    const std::size_t offset = out_->size();
    out_->resize(offset + size);
    std::memcpy(out_->data() + offset, data, size);
  }

  std::vector<std::byte>* out_ = nullptr;
  ByteSink* sink_ = nullptr;
};

/// Decodes values from a byte span. Every read is bounds-checked: running past the end, or a count
/// the remaining bytes cannot hold, throws SerializationError and never reads out of bounds.
/// Thread-safety: none.
class ByteReader {
 public:
  explicit ByteReader(std::span<const std::byte> data) noexcept : data_(data) {}

  /// Copies the next `size` bytes to `out`.
  void read_bytes(void* out, std::size_t size) {
    const auto bytes = take(size);
    if (size != 0) std::memcpy(out, bytes.data(), size);  // an empty vector's data() may be null
  }

  /// Returns a view of the next `size` bytes and skips them.
  std::span<const std::byte> take(std::size_t size) {
    if (size > remaining()) {
      DPIPE_THROW(SerializationError, "truncated input: needed {} bytes, {} left", size, remaining());
    }
    auto view = data_.subspan(pos_, size);
    pos_ += size;
    return view;
  }

  /// Decodes the next value of type T.
  template <serializable T>
  T read() {
    return Serializer<T>::read(*this);
  }

  /// Reads a count of elements that follow, each encoded in at least `min_element_size` bytes, and
  /// rejects counts the remaining input cannot hold.
  std::size_t read_count(std::size_t min_element_size);

  [[nodiscard]] std::size_t remaining() const noexcept { return data_.size() - pos_; }
  [[nodiscard]] bool at_end() const noexcept { return pos_ == data_.size(); }
  [[nodiscard]] std::size_t position() const noexcept { return pos_; }

 private:
  static constexpr std::uint64_t kMaxEmptyElements = std::uint64_t{1} << 24;
  std::span<const std::byte> data_;
  std::size_t pos_ = 0;
};

namespace detail {

template <class T>
struct is_std_serialized : std::false_type {};
template <class T, std::size_t N>
struct is_std_serialized<std::array<T, N>> : std::true_type {};
template <class A, class B>
struct is_std_serialized<std::pair<A, B>> : std::true_type {};
template <class... Ts>
struct is_std_serialized<std::tuple<Ts...>> : std::true_type {};
template <class T>
struct is_std_serialized<std::optional<T>> : std::true_type {};
template <class... Ts>
struct is_std_serialized<std::variant<Ts...>> : std::true_type {};

/// Smallest number of bytes an encoded T can take (used to reject impossible counts).
template <class T>
constexpr std::size_t min_encoded_size() {
  if constexpr (requires { Serializer<T>::kMinSize; }) {
    return Serializer<T>::kMinSize;
  } else {
    return 1;
  }
}

/// Element types whose vectors are copied as one block (the encoding is the same as one by one).
template <class T>
constexpr bool bulk_copyable = (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) || std::is_same_v<T, std::byte>;

template <class Tuple, std::size_t... I>
void write_tuple(ByteWriter& writer, const Tuple& tuple, std::index_sequence<I...>) {
  (writer.write(std::get<I>(tuple)), ...);
}

template <class Refs, std::size_t... I>
void read_into(ByteReader& reader, Refs refs, std::index_sequence<I...>) {
  ((std::get<I>(refs) = reader.read<std::remove_cvref_t<std::tuple_element_t<I, Refs>>>()), ...);
}

}  // namespace detail

// --- scalars ---------------------------------------------------------------------------------

template <class T>
requires(std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) struct Serializer<T> {
  static constexpr std::size_t kMinSize = sizeof(T);
  static void write(ByteWriter& writer, T value) { writer.write_bytes(&value, sizeof(T)); }
  static T read(ByteReader& reader) {
    T value;
    reader.read_bytes(&value, sizeof(T));
    return value;
  }
};

template <>
struct Serializer<bool> {
  static constexpr std::size_t kMinSize = 1;
  static void write(ByteWriter& writer, bool value) { writer.write<std::uint8_t>(value ? 1 : 0); }
  static bool read(ByteReader& reader) {
    const auto byte = reader.read<std::uint8_t>();
    if (byte > 1) DPIPE_THROW(SerializationError, "corrupt input: {} is not a bool", byte);
    return byte == 1;
  }
};

template <class T>
requires std::is_enum_v<T>
struct Serializer<T> {
  using Underlying = std::underlying_type_t<T>;
  static constexpr std::size_t kMinSize = sizeof(Underlying);
  static void write(ByteWriter& writer, T value) { writer.write(static_cast<Underlying>(value)); }
  static T read(ByteReader& reader) { return static_cast<T>(reader.read<Underlying>()); }
};

inline void ByteWriter::write_size(std::size_t size) { write(static_cast<std::uint64_t>(size)); }

inline std::size_t ByteReader::read_count(std::size_t min_element_size) {
  const auto count = read<std::uint64_t>();
  const std::uint64_t limit = min_element_size == 0 ? kMaxEmptyElements : remaining() / min_element_size;
  if (count > limit) {
    DPIPE_THROW(SerializationError, "corrupt input: a count of {} elements exceeds the {} bytes left", count,
                remaining());
  }
  return static_cast<std::size_t>(count);
}

// --- strings and sequences -------------------------------------------------------------------

template <>
struct Serializer<std::string> {
  static constexpr std::size_t kMinSize = 8;
  static void write(ByteWriter& writer, const std::string& value) {
    writer.write_size(value.size());
    writer.write_bytes(value.data(), value.size());
  }
  static std::string read(ByteReader& reader) {
    const auto size = reader.read_count(1);
    const auto bytes = reader.take(size);
    return std::string(reinterpret_cast<const char*>(bytes.data()), size);
  }
};

template <serializable T, class Alloc>
struct Serializer<std::vector<T, Alloc>> {
  static constexpr std::size_t kMinSize = 8;
  static void write(ByteWriter& writer, const std::vector<T, Alloc>& value) {
    writer.write_size(value.size());
    if constexpr (detail::bulk_copyable<T>) {
      writer.write_bytes(value.data(), value.size() * sizeof(T));
    } else {
      for (const auto& element : value) writer.write(static_cast<const T&>(element));
    }
  }
  static std::vector<T, Alloc> read(ByteReader& reader) {
    const auto size = reader.read_count(detail::min_encoded_size<T>());
    std::vector<T, Alloc> value;
    if constexpr (detail::bulk_copyable<T>) {
      value.resize(size);
      reader.read_bytes(value.data(), size * sizeof(T));
    } else {
      value.reserve(size);
      for (std::size_t i = 0; i < size; ++i) value.push_back(reader.read<T>());
    }
    return value;
  }
};

template <serializable T, std::size_t N>
struct Serializer<std::array<T, N>> {
  static constexpr std::size_t kMinSize = N * detail::min_encoded_size<T>();
  static void write(ByteWriter& writer, const std::array<T, N>& value) {
    if constexpr (detail::bulk_copyable<T>) {
      writer.write_bytes(value.data(), sizeof(T) * N);
    } else {
      for (const auto& element : value) writer.write(element);
    }
  }
  static std::array<T, N> read(ByteReader& reader) {
    if constexpr (detail::bulk_copyable<T>) {
      std::array<T, N> value;
      reader.read_bytes(value.data(), sizeof(T) * N);
      return value;
    } else if constexpr (std::is_default_constructible_v<T>) {
      std::array<T, N> value;
      for (auto& element : value) element = reader.read<T>();
      return value;
    } else {
      return read_all(reader, std::make_index_sequence<N>{});
    }
  }

 private:
  template <std::size_t... I>
  static std::array<T, N> read_all(ByteReader& reader, std::index_sequence<I...>) {
    // Braced initialization evaluates the reads left to right.
    return std::array<T, N>{((void)I, reader.read<T>())...};
  }
};

template <serializable A, serializable B>
struct Serializer<std::pair<A, B>> {
  static constexpr std::size_t kMinSize = detail::min_encoded_size<A>() + detail::min_encoded_size<B>();
  static void write(ByteWriter& writer, const std::pair<A, B>& value) {
    writer.write(value.first);
    writer.write(value.second);
  }
  static std::pair<A, B> read(ByteReader& reader) {
    A first = reader.read<A>();
    return std::pair<A, B>(std::move(first), reader.read<B>());
  }
};

template <serializable... Ts>
struct Serializer<std::tuple<Ts...>> {
  static constexpr std::size_t kMinSize = (std::size_t{0} + ... + detail::min_encoded_size<Ts>());
  static void write(ByteWriter& writer, const std::tuple<Ts...>& value) {
    detail::write_tuple(writer, value, std::index_sequence_for<Ts...>{});
  }
  static std::tuple<Ts...> read(ByteReader& reader) {
    // Braced initialization evaluates the reads left to right.
    return std::tuple<Ts...>{reader.read<Ts>()...};
  }
};

template <serializable T>
struct Serializer<std::optional<T>> {
  static constexpr std::size_t kMinSize = 1;
  static void write(ByteWriter& writer, const std::optional<T>& value) {
    writer.write(value.has_value());
    if (value) writer.write(*value);
  }
  static std::optional<T> read(ByteReader& reader) {
    if (!reader.read<bool>()) return std::nullopt;
    return reader.read<T>();
  }
};

/// An owned object, or null. The pointee is encoded as a T: a pointer to a polymorphic base would
/// lose its derived part, so those need a Serializer of their own.
template <serializable T>
requires(!std::is_polymorphic_v<T> || std::is_final_v<T>) struct Serializer<std::unique_ptr<T>> {
  static constexpr std::size_t kMinSize = 1;
  static void write(ByteWriter& writer, const std::unique_ptr<T>& value) {
    writer.write(value != nullptr);
    if (value) writer.write(*value);
  }
  static std::unique_ptr<T> read(ByteReader& reader) {
    if (!reader.read<bool>()) return nullptr;
    return std::make_unique<T>(reader.read<T>());
  }
};

template <serializable... Ts>
struct Serializer<std::variant<Ts...>> {
  static constexpr std::size_t kMinSize = 4;
  static void write(ByteWriter& writer, const std::variant<Ts...>& value) {
    writer.write(static_cast<std::uint32_t>(value.index()));
    std::visit([&](const auto& alternative) { writer.write(alternative); }, value);
  }
  static std::variant<Ts...> read(ByteReader& reader) {
    const auto index = reader.read<std::uint32_t>();
    if (index >= sizeof...(Ts)) {
      DPIPE_THROW(SerializationError, "corrupt input: variant index {} of {} alternatives", index, sizeof...(Ts));
    }
    return read_alternative(reader, index, std::index_sequence_for<Ts...>{});
  }

 private:
  template <std::size_t... I>
  static std::variant<Ts...> read_alternative(ByteReader& reader, std::uint32_t index, std::index_sequence<I...>) {
    using Reader = std::variant<Ts...> (*)(ByteReader&);
    static constexpr Reader kReaders[] = {[](ByteReader& r) {
      return std::variant<Ts...>(std::in_place_index<I>, r.read<std::variant_alternative_t<I, std::variant<Ts...>>>());
    }...};
    return kReaders[index](reader);
  }
};

namespace detail {

/// Shared encoding of associative containers: a count, then the elements in iteration order.
template <class Container, class Element>
struct AssociativeSerializer {
  static constexpr std::size_t kMinSize = 8;
  static void write(ByteWriter& writer, const Container& value) {
    writer.write_size(value.size());
    for (const auto& element : value) writer.write(static_cast<const Element&>(element));
  }
  static Container read(ByteReader& reader) {
    const auto size = reader.read_count(min_encoded_size<Element>());
    Container value;
    for (std::size_t i = 0; i < size; ++i) value.insert(reader.read<Element>());
    return value;
  }
};

}  // namespace detail

template <serializable K, serializable V, class Compare, class Alloc>
struct Serializer<std::map<K, V, Compare, Alloc>>
    : detail::AssociativeSerializer<std::map<K, V, Compare, Alloc>, std::pair<K, V>> {};

template <serializable K, serializable V, class Hash, class Eq, class Alloc>
struct Serializer<std::unordered_map<K, V, Hash, Eq, Alloc>>
    : detail::AssociativeSerializer<std::unordered_map<K, V, Hash, Eq, Alloc>, std::pair<K, V>> {};

template <serializable K, class Compare, class Alloc>
struct Serializer<std::set<K, Compare, Alloc>> : detail::AssociativeSerializer<std::set<K, Compare, Alloc>, K> {};

// --- user types --------------------------------------------------------------------------------

/// Types that declare DPIPE_FIELDS(...): encoded as the tuple of their fields, in order.
template <has_fields T>
requires std::is_default_constructible_v<T>
struct Serializer<T> {
  static void write(ByteWriter& writer, const T& value) {
    const auto fields = value.dpipe_fields();
    detail::write_tuple(writer, fields, std::make_index_sequence<std::tuple_size_v<decltype(fields)>>{});
  }
  static T read(ByteReader& reader) {
    T value{};
    auto fields = value.dpipe_fields();
    detail::read_into(reader, fields, std::make_index_sequence<std::tuple_size_v<decltype(fields)>>{});
    return value;
  }
};

/// Any other trivially copyable type: its object representation, byte for byte.
template <class T>
requires(std::is_trivially_copyable_v<T>&& std::is_class_v<T> && !has_fields<T> &&
         !detail::is_std_serialized<T>::value) struct Serializer<T> {
  static constexpr std::size_t kMinSize = sizeof(T);
  static void write(ByteWriter& writer, const T& value) { writer.write_bytes(&value, sizeof(T)); }
  static T read(ByteReader& reader) {
    std::array<std::byte, sizeof(T)> bytes;
    reader.read_bytes(bytes.data(), sizeof(T));
    return std::bit_cast<T>(bytes);
  }
};

/// Encodes `value` into a fresh byte vector.
template <serializable T>
std::vector<std::byte> to_bytes(const T& value) {
  std::vector<std::byte> bytes;
  ByteWriter(bytes).write(value);
  return bytes;
}

/// Decodes a T from `bytes`, which must hold exactly one encoded T.
template <serializable T>
T from_bytes(std::span<const std::byte> bytes) {
  ByteReader reader(bytes);
  T value = reader.read<T>();
  if (!reader.at_end()) {
    DPIPE_THROW(SerializationError, "{} trailing bytes after a {}", reader.remaining(), type_name<T>());
  }
  return value;
}

}  // namespace dpipe

/// Declares the fields of a user type for dpipe::Serializer, inside the type's definition:
/// `DPIPE_FIELDS(path, pixels, label)`. The type must be default-constructible. The names are kept
/// for messages (tensor_collate's errors name the field).
#define DPIPE_FIELDS(...)                                                        \
  auto dpipe_fields() { return std::tie(__VA_ARGS__); }                          \
  auto dpipe_fields() const { return std::tie(__VA_ARGS__); }                    \
  static constexpr const char* dpipe_field_names() noexcept { return #__VA_ARGS__; }
