// dpipe-inspect: prints what a dpipe checkpoint holds. Usage: dpipe-inspect <checkpoint file>
//
// The summary (format, size, epoch, position, worker and rank counts), then every node of every
// process with its element type, its size and its scalar fields (positions, counts, flags), then
// the fields that belong to no node (the loader's, the reading services').

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include <dpipe/core/error.hpp>
#include <dpipe/core/state.hpp>
#include <dpipe/graph/state.hpp>

namespace {

/// A field's value as text: scalars in full, anything else as its size.
std::string show(const dpipe::StateField& field) {
  const auto& bytes = field.value;
  const auto scalar = [&]<class T>(T) {
    T value{};
    std::memcpy(&value, bytes.data(), sizeof(T));
    return fmt::format("{}", value);
  };
  switch (field.kind) {
    case dpipe::FieldKind::kBool:
      if (bytes.size() == 1) return bytes[0] == std::byte{1} ? "true" : "false";
      break;
    case dpipe::FieldKind::kUnsigned:
      if (bytes.size() == 1) return scalar(std::uint8_t{});
      if (bytes.size() == 2) return scalar(std::uint16_t{});
      if (bytes.size() == 4) return scalar(std::uint32_t{});
      if (bytes.size() == 8) return scalar(std::uint64_t{});
      break;
    case dpipe::FieldKind::kSigned:
      if (bytes.size() == 1) return scalar(std::int8_t{});
      if (bytes.size() == 2) return scalar(std::int16_t{});
      if (bytes.size() == 4) return scalar(std::int32_t{});
      if (bytes.size() == 8) return scalar(std::int64_t{});
      break;
    case dpipe::FieldKind::kFloat:
      if (bytes.size() == 4) return scalar(float{});
      if (bytes.size() == 8) return scalar(double{});
      break;
    case dpipe::FieldKind::kString:
      try {
        return fmt::format("\"{}\"", dpipe::from_bytes<std::string>(bytes));
      } catch (const dpipe::SerializationError&) {
      }
      break;
    case dpipe::FieldKind::kOther:
      break;
  }
  return fmt::format("<{} bytes>", bytes.size());
}

/// The value of the first field named `name` (in any scope) that holds an unsigned integer.
std::optional<std::uint64_t> find_count(const dpipe::StateStore& store, const std::string& name) {
  for (const auto& field : store.fields()) {
    const auto colon = field.key.rfind(':');
    if (colon == std::string::npos || field.key.substr(colon + 1) != name) continue;
    if (field.kind == dpipe::FieldKind::kUnsigned && field.value.size() == sizeof(std::uint64_t)) {
      std::uint64_t value = 0;
      std::memcpy(&value, field.value.data(), sizeof(value));
      return value;
    }
  }
  return std::nullopt;
}

std::string field_value(const dpipe::StateStore& store, const std::string& key) {
  const auto* field = store.find(key);
  return field == nullptr ? std::string("-") : show(*field);
}

int inspect(const std::vector<std::byte>& blob) {
  const dpipe::StateStore store = dpipe::StateStore::from_blob(blob);
  std::printf("dpipe checkpoint: format 2, %zu bytes, %zu fields\n", blob.size(), store.fields().size());
  if (store.find("loader:epoch") != nullptr) {
    std::printf("epoch: %s, elements taken in it: %s, epoch ended: %s, paused: %s\n",
                field_value(store, "loader:epoch").c_str(), field_value(store, "loader:taken").c_str(),
                field_value(store, "loader:epoch_ended").c_str(), field_value(store, "loader:paused").c_str());
  }
  const auto workers = find_count(store, "workers");
  const auto ranks = find_count(store, "world_size");
  std::printf("worker processes: %s, ranks: %s\n", workers ? fmt::format("{}", *workers).c_str() : "0 (in process)",
              ranks ? fmt::format("{}", *ranks).c_str() : "1");

  // Node records are keys without a field name; their fields are "<record>:<name>".
  std::map<std::string, std::vector<const dpipe::StateField*>> owned;
  std::vector<const dpipe::StateField*> records;
  for (const auto& field : store.fields()) {
    if (field.key.find(':') == std::string::npos) records.push_back(&field);
  }
  std::vector<const dpipe::StateField*> others;
  for (const auto& field : store.fields()) {
    const auto colon = field.key.find(':');
    if (colon == std::string::npos) continue;
    const auto owner = field.key.substr(0, colon);
    if (store.find(owner) != nullptr) {
      owned[owner].push_back(&field);
    } else {
      others.push_back(&field);
    }
  }
  std::printf("nodes (%zu):\n", records.size());
  for (const auto* record : records) {
    std::string element_type = "?";
    try {
      element_type = dpipe::from_bytes<dpipe::graph::NodeRecord>(record->value).element_type;
    } catch (const dpipe::SerializationError&) {
    }
    std::size_t bytes = 0;
    std::string fields;
    for (const auto* field : owned[record->key]) {
      bytes += field->value.size();
      fields += fmt::format(" {}={}", field->key.substr(record->key.size() + 1), show(*field));
    }
    std::printf("  %s (%s), %zu bytes:%s\n", record->key.c_str(), element_type.c_str(), bytes, fields.c_str());
  }
  std::printf("other fields (%zu):\n", others.size());
  for (const auto* field : others) std::printf("  %s = %s\n", field->key.c_str(), show(*field).c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2 || std::strcmp(argv[1], "--help") == 0) {
    std::fprintf(stderr, "usage: dpipe-inspect <checkpoint file>\n  prints what a dpipe checkpoint holds\n");
    return argc == 2 ? 0 : 2;
  }
  std::ifstream in(argv[1], std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "dpipe-inspect: cannot open %s: %s\n", argv[1], std::strerror(errno));
    return 1;
  }
  std::vector<char> text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::byte> blob(text.size());
  if (!text.empty()) std::memcpy(blob.data(), text.data(), text.size());
  try {
    return inspect(blob);
  } catch (const dpipe::Error& error) {
    std::fprintf(stderr, "dpipe-inspect: %s: %s\n", argv[1], error.what());
    return 1;
  }
}
