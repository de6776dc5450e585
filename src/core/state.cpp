// StateStore, StateWriter, StateReader, and the checkpoint envelope.

#include <array>
#include <cstring>

#include <dpipe/core/state.hpp>

#include "core/fnv.hpp"

namespace dpipe {
namespace {

using Magic = std::array<char, 8>;
constexpr Magic kMagic = {'D', 'P', 'I', 'P', 'E', 'C', 'K', 'P'};
/// The magic tags of format 1 (nested blobs): a loader's, a graph's, a multiprocessing service's.
constexpr std::array<Magic, 3> kFormatOneMagics = {{{'D', 'P', 'I', 'P', 'E', 'D', 'L', '2'},
                                                    {'D', 'P', 'I', 'P', 'E', 'G', 'R', 'F'},
                                                    {'D', 'P', 'I', 'P', 'E', 'M', 'P', 'R'}}};
/// Magic, version, the blob's total size, and (at the end) the checksum.
constexpr std::size_t kHead = sizeof(Magic) + sizeof(std::uint32_t) + sizeof(std::uint64_t);
constexpr std::size_t kEnvelope = kHead + sizeof(std::uint64_t);

void write_fields(ByteWriter& writer, const std::deque<StateField>& fields) {
  writer.write_size(fields.size());
  for (const auto& field : fields) {
    writer.write(field.key);
    writer.write(static_cast<std::uint8_t>(field.kind));
    writer.write(field.value);
  }
}

StateStore read_fields(ByteReader& reader) {
  StateStore store;
  const std::size_t count = reader.read_count(17);
  for (std::size_t i = 0; i < count; ++i) {
    auto key = reader.read<std::string>();
    const auto kind = reader.read<std::uint8_t>();
    if (kind > static_cast<std::uint8_t>(FieldKind::kString)) {
      DPIPE_THROW(StateError, "the checkpoint is corrupt: field {} has an unknown kind {}", key, kind);
    }
    store.add(std::move(key), static_cast<FieldKind>(kind)).value = reader.read<std::vector<std::byte>>();
  }
  if (!reader.at_end())
    DPIPE_THROW(StateError, "the checkpoint is corrupt: {} bytes follow its fields", reader.remaining());
  return store;
}

}  // namespace

// --- StateStore -------------------------------------------------------------------------------------

StateField& StateStore::add(std::string key, FieldKind kind) {
  if (index_.contains(key)) DPIPE_THROW(StateError, "the checkpoint already holds a field {}", key);
  index_.emplace(key, fields_.size());
  read_.push_back(false);
  return fields_.emplace_back(StateField{std::move(key), kind, {}});
}

const StateField* StateStore::find(std::string_view key) const {
  const auto it = index_.find(std::string(key));
  return it == index_.end() ? nullptr : &fields_[it->second];
}

void StateStore::mark_read(const StateField& field) const { read_[index_.at(field.key)] = true; }

std::vector<std::string> StateStore::unread(std::string_view prefix) const {
  std::vector<std::string> keys;
  for (std::size_t i = 0; i < fields_.size(); ++i) {
    if (!read_[i] && std::string_view(fields_[i].key).starts_with(prefix)) keys.push_back(fields_[i].key);
  }
  return keys;
}

StateStore StateStore::subset(std::string_view scope) const {
  const std::string prefix = std::string(scope) + "/";
  StateStore part;
  for (std::size_t i = 0; i < fields_.size(); ++i) {
    if (!fields_[i].key.starts_with(prefix)) continue;
    part.add(fields_[i].key.substr(prefix.size()), fields_[i].kind).value = fields_[i].value;
    read_[i] = true;
  }
  return part;
}

void StateStore::merge(const StateStore& other, std::string_view scope) {
  const std::string prefix = scope.empty() ? std::string() : std::string(scope) + "/";
  for (const auto& field : other.fields_) add(prefix + field.key, field.kind).value = field.value;
}

std::vector<std::byte> StateStore::to_bytes() const {
  std::vector<std::byte> bytes;
  ByteWriter writer(bytes);
  write_fields(writer, fields_);
  return bytes;
}

StateStore StateStore::from_bytes(std::span<const std::byte> bytes) {
  ByteReader reader(bytes);
  try {
    return read_fields(reader);
  } catch (const SerializationError& error) {
    DPIPE_THROW(StateError, "the checkpoint is corrupt: {}", error.what());
  }
}

std::vector<std::byte> StateStore::to_blob() const {
  std::vector<std::byte> blob;
  ByteWriter writer(blob);
  writer.write_bytes(kMagic.data(), kMagic.size());
  writer.write(kFormatVersion);
  writer.write(std::uint64_t{0});  // the total size, known at the end
  write_fields(writer, fields_);
  const std::uint64_t total = blob.size() + sizeof(std::uint64_t);
  std::memcpy(blob.data() + sizeof(Magic) + sizeof(std::uint32_t), &total, sizeof(total));
  writer.write(detail::fnv1a(blob));
  return blob;
}

StateStore StateStore::from_blob(std::span<const std::byte> blob) {
  if (blob.size() >= sizeof(Magic)) {
    for (const Magic& old : kFormatOneMagics) {
      if (std::memcmp(blob.data(), old.data(), old.size()) == 0) {
        DPIPE_THROW(StateError,
                    "the checkpoint was written by an earlier dpipe in format 1 (nested blobs); this dpipe reads "
                    "format {} only: resume the run with the dpipe that wrote it, or start from a new checkpoint",
                    kFormatVersion);
      }
    }
  }
  if (blob.size() < kEnvelope) {
    if (blob.size() >= sizeof(Magic) && std::memcmp(blob.data(), kMagic.data(), kMagic.size()) == 0) {
      DPIPE_THROW(StateError, "the checkpoint is truncated: {} bytes, fewer than its {}-byte envelope", blob.size(),
                  kEnvelope);
    }
    DPIPE_THROW(StateError, "the bytes are not a dpipe checkpoint ({} bytes, too short)", blob.size());
  }
  if (std::memcmp(blob.data(), kMagic.data(), kMagic.size()) != 0) {
    DPIPE_THROW(StateError, "the bytes are not a dpipe checkpoint (bad magic)");
  }
  ByteReader head(blob.subspan(sizeof(Magic)));
  const auto version = head.read<std::uint32_t>();
  if (version != kFormatVersion) {
    DPIPE_THROW(StateError, "the checkpoint has format version {}, this dpipe reads version {}", version,
                kFormatVersion);
  }
  const auto total = head.read<std::uint64_t>();
  if (blob.size() < total) {
    DPIPE_THROW(StateError, "the checkpoint is truncated: it has {} of its {} bytes", blob.size(), total);
  }
  if (blob.size() > total) {
    DPIPE_THROW(StateError, "the checkpoint is followed by {} bytes that are not part of it", blob.size() - total);
  }
  const auto body = blob.first(blob.size() - sizeof(std::uint64_t));
  std::uint64_t stored = 0;
  std::memcpy(&stored, blob.data() + body.size(), sizeof(stored));
  if (detail::fnv1a(body) != stored) {
    DPIPE_THROW(StateError, "the checkpoint is corrupted: its checksum does not match its contents");
  }
  ByteReader reader(body.subspan(kHead));
  try {
    return read_fields(reader);
  } catch (const SerializationError& error) {
    DPIPE_THROW(StateError, "the checkpoint is corrupt: {}", error.what());
  }
}

// --- StateWriter / StateReader ---------------------------------------------------------------------

std::string StateWriter::key(std::string_view name) const { return scope_ + ":" + std::string(name); }

StateWriter StateWriter::scope(std::string_view name) const {
  return StateWriter(*store_, scope_.empty() ? std::string(name) : scope_ + "/" + std::string(name));
}

std::string StateReader::key(std::string_view name) const { return scope_ + ":" + std::string(name); }

StateReader StateReader::scope(std::string_view name) const {
  return StateReader(*store_, scope_.empty() ? std::string(name) : scope_ + "/" + std::string(name));
}

ByteReader StateReader::field(std::string_view name) const {
  const StateField* field = store_->find(key(name));
  if (field == nullptr) DPIPE_THROW(StateError, "the checkpoint has no field {}", key(name));
  store_->mark_read(*field);
  return ByteReader(field->value);
}

bool StateReader::has(std::string_view name) const { return store_->find(key(name)) != nullptr; }

std::span<const std::byte> StateReader::record_bytes() const {
  const StateField* field = store_->find(scope_);
  if (field == nullptr) DPIPE_THROW(StateError, "the checkpoint has no record {}", scope_);
  store_->mark_read(*field);
  return field->value;
}

void StateReader::throw_corrupt(std::string_view name, const SerializationError& error) const {
  DPIPE_THROW(StateError, "the checkpoint's field {} is corrupt: {}", name.empty() ? scope_ : key(name), error.what());
}

void StateReader::throw_trailing(std::string_view name, std::size_t bytes) const {
  DPIPE_THROW(StateError, "the checkpoint's field {} is corrupt: {} bytes follow its value", key(name), bytes);
}

}  // namespace dpipe
