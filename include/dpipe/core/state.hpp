#pragma once
/// \file
/// Checkpoint state, keyed like tf.data's iterator checkpoints: every value is a named field under
/// the path of what saved it, "graph/shuffle/from:position", "loader:epoch",
/// "service/worker1/graph/shuffle:buffer". A whole checkpoint is one flat list of such
/// fields in one envelope with one checksum (StateStore::to_blob), which `dpipe-inspect` prints.
///
/// Nodes write their fields through a StateWriter in DataPipe::save_state and read them back
/// through a StateReader in DataPipe::load_state; a reader refuses a missing field, a field that
/// does not decode, and (after the node's load_state) a field the node did not read, each with a
/// StateError naming the field's key.

#include <cstddef>
#include <cstdint>
#include <deque>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include <dpipe/core/error.hpp>
#include <dpipe/serialization/serializer.hpp>

namespace dpipe {

/// What a field holds, so that tools can print scalars without knowing the node.
enum class FieldKind : std::uint8_t {
  kOther = 0,     ///< anything else: printed as its size
  kBool = 1,      ///< a bool
  kUnsigned = 2,  ///< an unsigned integer of 1, 2, 4 or 8 bytes
  kSigned = 3,    ///< a signed integer of 1, 2, 4 or 8 bytes
  kFloat = 4,     ///< a float or a double
  kString = 5,    ///< a std::string (length-prefixed)
};

/// The FieldKind of values of type T.
template <class T>
constexpr FieldKind field_kind() noexcept {
  if constexpr (std::is_same_v<T, bool>) {
    return FieldKind::kBool;
  } else if constexpr (std::is_integral_v<T> && std::is_unsigned_v<T>) {
    return FieldKind::kUnsigned;
  } else if constexpr (std::is_integral_v<T>) {
    return FieldKind::kSigned;
  } else if constexpr (std::is_floating_point_v<T>) {
    return FieldKind::kFloat;
  } else if constexpr (std::is_same_v<T, std::string>) {
    return FieldKind::kString;
  } else {
    return FieldKind::kOther;
  }
}

/// One field of a checkpoint.
struct StateField {
  std::string key;  ///< "<scope>/<path>:<name>", or "<scope>/<path>" for a node's record
  FieldKind kind = FieldKind::kOther;
  std::vector<std::byte> value;  ///< the Serializer encoding of the value
};

/// A checkpoint's fields, in the order they were written. Thread-safety: none.
class StateStore {
 public:
  /// The checkpoint format this dpipe writes and reads (to_blob, from_blob).
  static constexpr std::uint32_t kFormatVersion = 4;

  StateStore() = default;
  StateStore(StateStore&&) noexcept = default;
  StateStore& operator=(StateStore&&) noexcept = default;

  /// Adds a field; throws StateError when `key` is already there.
  StateField& add(std::string key, FieldKind kind);
  /// The field with `key`, or nullptr.
  [[nodiscard]] const StateField* find(std::string_view key) const;
  [[nodiscard]] const std::deque<StateField>& fields() const noexcept { return fields_; }
  [[nodiscard]] bool empty() const noexcept { return fields_.empty(); }

  /// Marks a field as read (StateReader does); unread() lists the fields under `prefix` nobody
  /// read.
  void mark_read(const StateField& field) const;
  [[nodiscard]] std::vector<std::string> unread(std::string_view prefix) const;

  /// A copy of the fields under scope `scope` ("worker1"), without the scope ("worker1/shuffle:buffer"
  /// becomes "shuffle:buffer"), which counts as reading them here.
  [[nodiscard]] StateStore subset(std::string_view scope) const;
  /// Adds every field of `other` under scope `scope` (as they are for an empty scope).
  void merge(const StateStore& other, std::string_view scope);

  /// The checkpoint blob: a magic tag, the format version, the fields, and one checksum.
  [[nodiscard]] std::vector<std::byte> to_blob() const;
  /// Reads a blob written by to_blob. Throws StateError for anything else: a truncated or
  /// corrupted blob, another format version, a blob of an earlier dpipe, or bytes that are not a
  /// dpipe checkpoint.
  [[nodiscard]] static StateStore from_blob(std::span<const std::byte> blob);
  /// The fields alone, for one process to hand them to another (no envelope, no checksum).
  [[nodiscard]] std::vector<std::byte> to_bytes() const;
  [[nodiscard]] static StateStore from_bytes(std::span<const std::byte> bytes);

 private:
  std::deque<StateField> fields_;
  std::unordered_map<std::string, std::size_t> index_;
  mutable std::vector<bool> read_;
};

/// Writes the fields of one scope (a node, a service, the loader). Thread-safety: one thread.
class StateWriter {
 public:
  /// A writer of fields "<scope>:<name>" into `store`.
  StateWriter(StateStore& store, std::string scope) : store_(&store), scope_(std::move(scope)) {}

  /// Writes `value` as field `name` (a short identifier: "position", "buffer").
  template <serializable T>
  void write(std::string_view name, const T& value) {
    ByteWriter writer(store_->add(key(name), field_kind<T>()).value);
    writer.write(value);
  }

  /// Starts field `name` and returns a writer for its encoding; valid until the next call on
  /// this writer or its store.
  [[nodiscard]] ByteWriter field(std::string_view name) {
    return ByteWriter(store_->add(key(name), FieldKind::kOther).value);
  }

  /// A writer for the sub-scope `name`: its fields are "<scope>/<name>:<field>".
  [[nodiscard]] StateWriter scope(std::string_view name) const;
  /// Writes `value` as the record of this scope itself (key "<scope>", no field name): what a
  /// graph checkpoint says about a node.
  template <serializable T>
  void record(const T& value) {
    ByteWriter writer(store_->add(scope_, field_kind<T>()).value);
    writer.write(value);
  }

  [[nodiscard]] const std::string& name() const noexcept { return scope_; }
  [[nodiscard]] StateStore& store() const noexcept { return *store_; }

 private:
  [[nodiscard]] std::string key(std::string_view name) const;

  StateStore* store_;
  std::string scope_;
};

/// Reads the fields of one scope. Thread-safety: one thread.
class StateReader {
 public:
  StateReader(const StateStore& store, std::string scope) : store_(&store), scope_(std::move(scope)) {}

  /// Reads field `name`. Throws StateError when it is missing, when it does not decode as T, or
  /// when it holds more bytes than T's encoding.
  template <serializable T>
  [[nodiscard]] T read(std::string_view name) const {
    ByteReader reader = field(name);
    try {
      T value = reader.read<T>();
      if (!reader.at_end()) throw_trailing(name, reader.remaining());
      return value;
    } catch (const SerializationError& error) {
      throw_corrupt(name, error);
    }
  }

  /// A reader over field `name`'s encoding (StateError when it is missing). SerializationError
  /// from it means a corrupt field: see decode().
  [[nodiscard]] ByteReader field(std::string_view name) const;
  /// Runs `decode` on field `name`'s encoding, turning a SerializationError from it into a
  /// StateError naming the field, and refusing bytes it leaves unread.
  template <class Decode>
  decltype(auto) decode(std::string_view name, Decode&& decode) const {
    ByteReader reader = field(name);
    try {
      if constexpr (std::is_void_v<decltype(decode(reader))>) {
        decode(reader);
        if (!reader.at_end()) throw_trailing(name, reader.remaining());
      } else {
        auto value = decode(reader);
        if (!reader.at_end()) throw_trailing(name, reader.remaining());
        return value;
      }
    } catch (const SerializationError& error) {
      throw_corrupt(name, error);
    }
  }
  [[nodiscard]] bool has(std::string_view name) const;

  /// A reader for the sub-scope `name`.
  [[nodiscard]] StateReader scope(std::string_view name) const;
  /// This scope's record (what StateWriter::record wrote); StateError when there is none or it
  /// does not decode.
  template <serializable T>
  [[nodiscard]] T record() const {
    try {
      return dpipe::from_bytes<T>(record_bytes());
    } catch (const SerializationError& error) {
      throw_corrupt("", error);
    }
  }

  [[nodiscard]] const std::string& name() const noexcept { return scope_; }
  [[nodiscard]] const StateStore& store() const noexcept { return *store_; }

 private:
  [[nodiscard]] std::string key(std::string_view name) const;
  [[nodiscard]] std::span<const std::byte> record_bytes() const;
  [[noreturn]] void throw_corrupt(std::string_view name, const SerializationError& error) const;
  [[noreturn]] void throw_trailing(std::string_view name, std::size_t bytes) const;

  const StateStore* store_;
  std::string scope_;
};

}  // namespace dpipe
