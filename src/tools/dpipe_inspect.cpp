// dpipe-inspect: prints what a dpipe checkpoint holds. Usage: dpipe-inspect <checkpoint file>
//
// The summary (format, size, epoch, position, worker and rank counts), then every node of every
// process with its element type, its size and its scalar fields (positions, counts, flags), then
// the fields that belong to no node (the loader's, the reading services').

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <sys/stat.h>
#include <vector>

#include <fmt/format.h>

#include <dpipe/core/checkpoint_schema.hpp>
#include <dpipe/core/error.hpp>
#include <dpipe/core/state.hpp>
#include <dpipe/graph/pipeline_record.hpp>
#include <dpipe/graph/state.hpp>

namespace {

namespace schema = dpipe::checkpoint_schema;

/// "loader:epoch": the key of the loader's field `name`.
std::string loader_key(std::string_view name) { return fmt::format("{}:{}", schema::kLoader, name); }

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

/// `text` with control characters escaped: keys and strings come from a file.
std::string printable(const std::string& text) {
  std::string out;
  for (const char c : text) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      out += fmt::format("\\x{:02x}", static_cast<unsigned char>(c));
    } else {
      out += c;
    }
  }
  return out;
}

/// The value of the reading-service field named `name` (the services write their worker count and
/// world size under "service", at whatever depth they are composed) that holds a 64-bit count.
std::optional<std::uint64_t> service_count(const std::vector<const dpipe::StateField*>& service_fields,
                                           std::string_view name) {
  for (const auto* field : service_fields) {
    if (field->key.substr(field->key.rfind(':') + 1) != name) continue;
    if (field->kind == dpipe::FieldKind::kUnsigned && field->value.size() == sizeof(std::uint64_t)) {
      std::uint64_t value = 0;
      std::memcpy(&value, field->value.data(), sizeof(value));
      return value;
    }
  }
  return std::nullopt;
}

/// The loader's field `name`, shown.
std::string loader_value(const dpipe::StateStore& store, std::string_view name) {
  const auto* field = store.find(loader_key(name));
  return field == nullptr ? std::string("-") : printable(show(*field));
}

/// The node record that owns a field: the longest scope of the field's key, cut at '/', that is a
/// record ("graph/merge_workers/input0:stored" belongs to "graph/merge_workers"); empty when none.
std::string owner_of(const dpipe::StateStore& store, const std::string& key) {
  std::string scope = key.substr(0, key.find(':'));
  while (!scope.empty()) {
    if (store.find(scope) != nullptr) return scope;
    const auto slash = scope.rfind('/');
    scope.resize(slash == std::string::npos ? 0 : slash);
  }
  return scope;
}

/// A field that belongs to no node: the loader's pipeline (printed above, readably) and the
/// elements it read ahead with their count, the rest as show() has it.
std::string show_other(const dpipe::StateField& field) {
  if (field.key == loader_key(schema::loader::kPipeline)) return fmt::format("<{} bytes, above>", field.value.size());
  if (field.key == loader_key(schema::loader::kReadAhead) && field.value.size() >= sizeof(std::uint64_t)) {
    std::uint64_t count = 0;
    std::memcpy(&count, field.value.data(), sizeof(count));
    return fmt::format("<{} bytes: {} elements>", field.value.size(), count);
  }
  return show(field);
}

/// The pipeline the loader was built from, as its checkpoint records it (the stateful nodes and
/// those with settings), one node a line; nothing when the checkpoint has no loader.
void print_pipeline(const dpipe::StateStore& store) {
  const auto* field = store.find(loader_key(schema::loader::kPipeline));
  if (field == nullptr) return;
  std::vector<dpipe::graph::PipelineNode> nodes;
  try {
    nodes = dpipe::from_bytes<std::vector<dpipe::graph::PipelineNode>>(field->value);
  } catch (const dpipe::SerializationError& error) {
    std::printf("pipeline: <%zu bytes that do not decode: %s>\n", field->value.size(), error.what());
    return;
  }
  std::printf("pipeline (%zu nodes with state or settings):\n", nodes.size());
  const std::string text = dpipe::graph::describe_pipeline(nodes);
  std::size_t start = 0;
  for (std::size_t end = text.find('\n'); end != std::string::npos; start = end + 1, end = text.find('\n', start)) {
    std::printf("  %s\n", printable(text.substr(start, end - start)).c_str());
  }
}

/// Prints what one loader's checkpoint holds: its position, pipeline, nodes and other fields.
void print_loader(const dpipe::StateStore& store) {
  namespace loader = schema::loader;
  if (store.find(loader_key(loader::kEpoch)) != nullptr) {
    std::printf("epoch: %s, elements taken in it: %s, epoch ended: %s, paused: %s\n",
                loader_value(store, loader::kEpoch).c_str(), loader_value(store, loader::kTaken).c_str(),
                loader_value(store, loader::kEpochEnded).c_str(), loader_value(store, loader::kPaused).c_str());
  }
  if (store.find(loader_key(loader::kGlobalStep)) != nullptr) {
    std::printf("global order: step %s, elements of it delivered: %s (restores onto any worker count and world size)\n",
                loader_value(store, loader::kGlobalStep).c_str(), loader_value(store, loader::kGlobalOffset).c_str());
  }
  print_pipeline(store);

  // Node records are keys without a field name; a node's fields are "<record>:<name>", or
  // "<record>/<part>:<name>" for a part of it.
  std::vector<const dpipe::StateField*> records;
  for (const auto& field : store.fields()) {
    if (field.key.find(':') == std::string::npos) records.push_back(&field);
  }
  std::map<std::string, std::vector<const dpipe::StateField*>> owned;
  std::vector<const dpipe::StateField*> others;
  for (const auto& field : store.fields()) {
    if (field.key.find(':') == std::string::npos) continue;
    const std::string owner = owner_of(store, field.key);
    if (owner.empty()) {
      others.push_back(&field);
    } else {
      owned[owner].push_back(&field);
    }
  }
  std::vector<const dpipe::StateField*> service_fields;
  for (const auto* field : others) {
    if (field->key.starts_with(schema::kService)) service_fields.push_back(field);
  }
  const auto workers = service_count(service_fields, schema::workers::kWorkers);
  const auto ranks = service_count(service_fields, schema::ranks::kWorldSize);
  std::printf("worker processes: %s, ranks: %s\n", workers ? fmt::format("{}", *workers).c_str() : "0 (in process)",
              ranks ? fmt::format("{}", *ranks).c_str() : "1");

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
    std::printf("  %s (%s), %zu bytes:%s\n", printable(record->key).c_str(), printable(element_type).c_str(), bytes,
                printable(fields).c_str());
  }
  std::printf("other fields (%zu):\n", others.size());
  for (const auto* field : others) {
    std::printf("  %s = %s\n", printable(field->key).c_str(), printable(show_other(*field)).c_str());
  }
}

/// Prints what the checkpoint `blob` holds: one loader's, or each rank's of a job's checkpoint
/// (DataLoader2::save_job_checkpoint) in turn.
int inspect(const std::vector<std::byte>& blob) {
  const dpipe::StateStore store = dpipe::StateStore::from_blob(blob);
  std::printf("dpipe checkpoint: format %u, %zu bytes, %zu fields\n", unsigned{dpipe::StateStore::kFormatVersion},
              blob.size(), store.fields().size());
  const dpipe::StateReader job(store, std::string(schema::job::kScope));
  if (!job.has(schema::job::kWorldSize)) {
    print_loader(store);
    return 0;
  }
  const auto ranks = job.read<std::uint64_t>(schema::job::kWorldSize);
  std::printf("a job's checkpoint: %llu rank%s, each restored by DataLoader2::load_job_checkpoint\n",
              static_cast<unsigned long long>(ranks), ranks == 1 ? "" : "s");
  for (std::uint64_t rank = 0; rank < ranks; ++rank) {
    std::printf("== rank %llu\n", static_cast<unsigned long long>(rank));
    print_loader(store.subset(schema::job::rank(rank)));
  }
  return 0;
}

/// The bytes of the regular file at `path`; throws std::runtime_error saying why it cannot.
std::vector<std::byte> read_file(const char* path) {
  struct stat info {};
  if (::stat(path, &info) != 0) throw std::runtime_error(fmt::format("cannot open it: {}", std::strerror(errno)));
  if (!S_ISREG(info.st_mode)) throw std::runtime_error("not a regular file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(fmt::format("cannot open it: {}", std::strerror(errno)));
  std::vector<char> text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw std::runtime_error("cannot read it");
  std::vector<std::byte> blob(text.size());
  if (!text.empty()) std::memcpy(blob.data(), text.data(), text.size());
  return blob;
}

}  // namespace

int main(int argc, char** argv) {
  constexpr const char* kUsage = "usage: dpipe-inspect <checkpoint file>\n  prints what a dpipe checkpoint holds\n";
  if (argc == 2 && std::strcmp(argv[1], "--help") == 0) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (argc != 2) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  try {
    return inspect(read_file(argv[1]));
  } catch (const std::exception& error) {
    std::fprintf(stderr, "dpipe-inspect: %s: %s\n", argv[1], error.what());
    return 1;
  }
}
