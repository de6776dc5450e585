#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <limits>
#include <optional>
#include <sys/stat.h>
#include <unistd.h>
#include <utility>

#include <dpipe/core/error.hpp>
#include <dpipe/io/byte_source.hpp>
#include <dpipe/io/detail/csv_cursor.hpp>
#include <dpipe/io/indexed_records.hpp>

#include "io/batch_read.hpp"
#include "io/crc32c.hpp"
#include "io/file_mapping.hpp"
#include "io/index_scan.hpp"

namespace dpipe::io {
namespace detail {
namespace {

constexpr std::size_t kNone = std::numeric_limits<std::size_t>::max();
/// The first read-ahead once reads go in order; it doubles up to IndexOptions::read_ahead_bytes.
constexpr std::size_t kFirstReadAhead = std::size_t{16} << 10;
/// The most bytes a batch of hinted records holds; the records past it are read alone.
constexpr std::uint64_t kMaxBatchBytes = std::uint64_t{8} << 20;
static_assert(IndexedReader::kMaxHints <= BatchReader::kMaxReads);

std::atomic<std::uint64_t> batched_record_count{0};
std::atomic<std::uint64_t> mapped_record_count{0};

std::string member_path(const std::string& archive, std::string_view member) {
  return (std::filesystem::path(archive) / member).lexically_normal().string();
}

IndexKind kind_of(IndexedFormat format) noexcept {
  switch (format) {
    case IndexedFormat::kTFRecord:
    case IndexedFormat::kTFExample:
      return IndexKind::kTFRecord;
    case IndexedFormat::kLines:
    case IndexedFormat::kJsonLines:
      return IndexKind::kLines;
    case IndexedFormat::kCsv:
      return IndexKind::kCsv;
    case IndexedFormat::kTar:
    case IndexedFormat::kWebDataset:
      break;
  }
  return IndexKind::kTar;
}

/// The bytes of one span of the file being parsed, at their offset in it: what the CSV cursor
/// reads a row from, so that its errors name the row's real offset.
class SpanSource final : public ByteSource {
 public:
  SpanSource(const char* data, std::size_t size, std::uint64_t offset) noexcept
      : data_(data), size_(size), offset_(offset) {}

  std::size_t read(char* data, std::size_t size) override {
    const std::size_t count = std::min(size, size_ - position_);
    std::memcpy(data, data_ + position_, count);
    position_ += count;
    return count;
  }
  bool seek(std::uint64_t offset) override {
    if (offset < offset_ || offset - offset_ > size_) throw SourceFailure("seek outside the record");
    position_ = static_cast<std::size_t>(offset - offset_);
    return true;
  }

 private:
  const char* data_;
  std::size_t size_;
  std::uint64_t offset_;
  std::size_t position_ = 0;
};

}  // namespace

// --- the records a format reads ----------------------------------------------------------------

struct IndexedFiles {
  struct File {
    std::string path;
    RecordIndex index;
    std::uint64_t first = 0;                                       // kLines: the first line read (after skip_lines)
    std::optional<std::vector<std::uint64_t>> lines;               // kJsonLines with blank lines: the others
    std::vector<std::pair<std::uint64_t, std::uint64_t>> samples;  // kWebDataset: [first, end) members
    std::uint64_t records = 0;
  };

  IndexedReadRules rules;
  std::vector<std::string> paths;
  std::vector<File> files;
  std::vector<std::uint64_t> ends;  // the records up to and including each file
  std::uint64_t total = 0;

  /// The span (index entry) of record `local` of `file`, for the formats with a record per span.
  [[nodiscard]] std::uint64_t entry(const File& file, std::uint64_t local) const noexcept {
    if (file.lines) return (*file.lines)[local];
    return file.first + local;
  }
  /// Where record `local` of `file` is: one span, or a sample's members.
  [[nodiscard]] RecordSpan extent(const File& file, std::uint64_t local) const noexcept {
    const auto& spans = file.index.spans;
    if (rules.format != IndexedFormat::kWebDataset) return spans[entry(file, local)];
    const auto [first, end] = file.samples[local];
    return {spans[first].offset, spans[end - 1].offset + spans[end - 1].size - spans[first].offset};
  }
};

namespace {

/// Selects the records of `file` that `rules` read from its index.
void select_records(IndexedFiles::File& file, const IndexedReadRules& rules) {
  const auto& index = file.index;
  switch (rules.format) {
    case IndexedFormat::kLines:
      file.first = std::min<std::uint64_t>(rules.skip_lines, index.size());
      file.records = index.size() - file.first;
      return;
    case IndexedFormat::kJsonLines:
      if (!index.blank.empty()) {
        file.lines.emplace();
        file.lines->reserve(index.size() - index.blank.size());
        auto blank = index.blank.begin();
        for (std::uint64_t line = 0; line < index.size(); ++line) {
          if (blank != index.blank.end() && *blank == line) {
            ++blank;
          } else {
            file.lines->push_back(line);
          }
        }
      }
      file.records = index.size() - index.blank.size();
      return;
    case IndexedFormat::kWebDataset: {
      // Consecutive members with a suffix and the same key make a sample; the others are passed
      // over (webdataset()'s rules).
      std::string key;
      for (std::uint64_t member = 0; member < index.size(); ++member) {
        auto [member_key, suffix] = webdataset_split(member_path(file.path, index.member_name(member)));
        if (suffix.empty()) continue;
        if (!file.samples.empty() && member_key == key) {
          file.samples.back().second = member + 1;
        } else {
          file.samples.emplace_back(member, member + 1);
          key = std::move(member_key);
        }
      }
      file.records = file.samples.size();
      return;
    }
    default:
      file.records = index.size();
      return;
  }
}

}  // namespace

// --- reading ---------------------------------------------------------------------------------

/// One record's bytes, as read().
struct Fetched {
  const IndexedFiles::File* file = nullptr;
  std::uint64_t local = 0;  // the record's number in its file (from 0)
  RecordSpan extent;        // where it is
  const char* data = nullptr;
};

/// A hinted record in the batch that read it.
struct BatchSlot {
  std::size_t key = 0;
  std::size_t file = 0;      // its file's number
  std::uint64_t local = 0;   // its number in that file
  RecordSpan extent;         // where it is
  std::size_t position = 0;  // where its bytes are in the batch's block
  std::size_t read = 0;      // the read of the batch that brought them
  std::uint64_t got = 0;     // how many of them came
};

struct IndexedReader::Reading {
  explicit Reading(std::size_t files) : descriptors(files, -1), maps(files), map_tried(files, false) {}
  Reading(const Reading&) = delete;
  Reading& operator=(const Reading&) = delete;
  ~Reading() {
    for (const int descriptor : descriptors)
      if (descriptor >= 0) ::close(descriptor);
  }

  std::vector<int> descriptors;   // per file, -1 until opened
  std::vector<FileMapping> maps;  // per file, with memory_map: mapped on first use
  std::vector<bool> map_tried;    // per file: maps[file] was made (perhaps unmapped)
  std::unique_ptr<char[]> block;
  std::size_t capacity = 0;        // block's bytes (a read's, then JsonDecoder::kPadding)
  std::size_t block_file = kNone;  // the file block holds bytes of
  std::uint64_t block_offset = 0;  // their offset in it
  std::size_t block_size = 0;      // how many
  std::size_t last_key = kNone;    // the record read last
  std::size_t read_ahead = 0;      // what the last read read beyond its record (while in order)
  std::optional<CsvCursor> csv;
  std::optional<JsonDecoder> json;
  // Hinted records: the keys queued, oldest first, and the batch that read the last of them.
  std::array<std::size_t, kMaxHints> hinted{};
  std::size_t hinted_count = 0;
  std::vector<BatchSlot> batch;  // in file and offset order
  std::vector<BatchRead> reads;  // one per run of adjacent records
  std::unique_ptr<char[]> batch_block;
  std::size_t batch_capacity = 0;  // batch_block's bytes
  BatchReader batch_reader;

  [[nodiscard]] bool is_hinted(std::size_t key) const noexcept {
    const auto end = hinted.begin() + static_cast<std::ptrdiff_t>(hinted_count);
    return std::find(hinted.begin(), end, key) != end;
  }
  [[nodiscard]] BatchSlot* batched(std::size_t key) noexcept {
    const auto slot = std::find_if(batch.begin(), batch.end(), [&](const BatchSlot& s) { return s.key == key; });
    return slot == batch.end() ? nullptr : &*slot;
  }
};

IndexedReader::IndexedReader(std::vector<std::string> files, IndexedReadRules rules, const IndexOptions& options,
                             std::string_view node) {
  auto shared = std::make_shared<IndexedFiles>();
  shared->rules = rules;
  const IndexSpec spec{.kind = kind_of(rules.format),
                       .delimiter = rules.delimiter,
                       .quotechar = rules.quotechar,
                       .skip_lines = rules.format == IndexedFormat::kCsv ? rules.skip_lines : 0};
  shared->files.reserve(files.size());
  for (const auto& path : files) {
    IndexedFiles::File file;
    file.path = path;
    file.index = index_file(path, spec, options, node);
    select_records(file, rules);
    shared->total += file.records;
    shared->ends.push_back(shared->total);
    shared->files.push_back(std::move(file));
  }
  shared->paths = std::move(files);
  files_ = std::move(shared);
  read_ahead_limit_ = options.read_ahead_bytes;
  memory_map_ = options.memory_map;
  reading_ = std::make_unique<Reading>(files_->files.size());
}

IndexedReader::IndexedReader(const IndexedReader& other)
    : files_(other.files_),
      read_ahead_limit_(other.read_ahead_limit_),
      memory_map_(other.memory_map_),
      reading_(std::make_unique<Reading>(other.files_->files.size())) {}

IndexedReader::~IndexedReader() = default;

std::size_t IndexedReader::size() const noexcept { return static_cast<std::size_t>(files_->total); }
const std::vector<std::string>& IndexedReader::files() const noexcept { return files_->paths; }
const RecordIndex& IndexedReader::index(std::size_t file) const noexcept { return files_->files[file].index; }

RecordLocation IndexedReader::locate(std::size_t key) const noexcept {
  const auto& shared = *files_;
  const auto number =
      static_cast<std::size_t>(std::upper_bound(shared.ends.begin(), shared.ends.end(), key) - shared.ends.begin());
  const std::uint64_t record = key - (number == 0 ? 0 : shared.ends[number - 1]);
  return {number, record, shared.extent(shared.files[number], record)};
}

void IndexedReader::hint(std::size_t key) const noexcept {
  auto& reading = *reading_;  // the reading state, not the reader's value
  if (key >= size()) return;
  if (memory_map_) {  // a map needs no batches: the record's first bytes are brought into the caches
    const RecordLocation location = locate(key);
    if (const FileMapping* map = mapping(location.file); map != nullptr) {
      map->prefetch(location.span.offset, static_cast<std::size_t>(location.span.size));
    }
    return;
  }
  if (reading.is_hinted(key)) return;
  auto& hinted = reading.hinted;
  if (reading.hinted_count == hinted.size()) {
    std::copy(hinted.begin() + 1, hinted.end(), hinted.begin());  // the oldest gives way
    --reading.hinted_count;
  }
  hinted[reading.hinted_count++] = key;
}

int IndexedReader::descriptor(std::size_t number) const noexcept {
  int& opened = reading_->descriptors[number];
  while (opened < 0) {
    opened = ::open(files_->files[number].path.c_str(), O_RDONLY | O_CLOEXEC);
    if (opened < 0 && errno != EINTR) break;
  }
  return opened;
}

const FileMapping* IndexedReader::mapping(std::size_t number) const noexcept {
  auto& reading = *reading_;
  if (!reading.map_tried[number]) {
    reading.map_tried[number] = true;
    struct stat status {};
    const int opened = descriptor(number);
    if (opened >= 0 && ::fstat(opened, &status) == 0 && status.st_size > 0) {
      reading.maps[number] = FileMapping(opened, static_cast<std::uint64_t>(status.st_size));
    }
  }
  const FileMapping& map = reading.maps[number];
  return map.mapped() ? &map : nullptr;
}

bool IndexedReader::copy_mapped(std::size_t key, const RecordLocation& location) {
  auto& reading = *reading_;
  const FileMapping* map = mapping(location.file);
  if (map == nullptr) return false;
  const auto size = static_cast<std::size_t>(location.span.size);
  if (reading.capacity < size + JsonDecoder::kPadding) {
    reading.capacity = std::max(size + JsonDecoder::kPadding, 2 * reading.capacity);
    reading.block = std::make_unique_for_overwrite<char[]>(reading.capacity);
  }
  reading.block_file = kNone;
  if (!map->copy(location.span.offset, size, reading.block.get())) return false;
  reading.block_file = location.file;
  reading.block_offset = location.span.offset;
  reading.block_size = size;
  reading.last_key = key;
  mapped_record_count.fetch_add(1, std::memory_order_relaxed);
  return true;
}

DataError IndexedReader::truncated(const Fetched& fetched, std::uint64_t got, std::string_view node) const {
  return DataError(node, {.path = fetched.file->path, .byte_offset = fetched.extent.offset},
                   fmt::format("{}the file ends after {} of the record's {} bytes (it changed since it was indexed)",
                               record_prefix(fetched), got, fetched.extent.size));
}

/// Reads the queued records at once: sorted by file and offset, each run of adjacent records one
/// read of the batch. A record that does not fit (kMaxBatchBytes) or whose file cannot be opened
/// is left out, to be read alone, and to fail there as a read alone fails.
void IndexedReader::read_hinted() {
  auto& reading = *reading_;
  auto& batch = reading.batch;
  batch.clear();
  std::uint64_t total = 0;
  for (std::size_t i = 0; i < reading.hinted_count; ++i) {
    const std::size_t key = reading.hinted[i];
    const RecordLocation location = locate(key);
    if (location.span.size > kMaxBatchBytes - total || descriptor(location.file) < 0) continue;
    total += location.span.size;
    batch.push_back({.key = key, .file = location.file, .local = location.record, .extent = location.span});
  }
  reading.hinted_count = 0;
  if (batch.empty()) return;
  const auto bytes = static_cast<std::size_t>(total);
  if (reading.batch_capacity < bytes + JsonDecoder::kPadding) {
    reading.batch_capacity = std::max(bytes + JsonDecoder::kPadding, 2 * reading.batch_capacity);
    reading.batch_block = std::make_unique_for_overwrite<char[]>(reading.batch_capacity);
  }
  std::sort(batch.begin(), batch.end(), [](const BatchSlot& a, const BatchSlot& b) {
    return a.file != b.file ? a.file < b.file : a.extent.offset < b.extent.offset;
  });
  auto& reads = reading.reads;
  reads.clear();
  std::size_t position = 0;
  for (std::size_t i = 0; i < batch.size(); ++i) {
    BatchSlot& slot = batch[i];
    const BatchSlot* before = i == 0 ? nullptr : &batch[i - 1];
    const auto size = static_cast<std::size_t>(slot.extent.size);
    if (before != nullptr && before->file == slot.file &&
        before->extent.offset + before->extent.size == slot.extent.offset) {
      reads.back().size += size;  // adjacent: one read brings both
    } else {
      reads.push_back({.descriptor = reading.descriptors[slot.file],
                       .data = reading.batch_block.get() + position,
                       .size = size,
                       .offset = slot.extent.offset});
    }
    slot.position = position;
    slot.read = reads.size() - 1;
    position += size;
  }
  reading.batch_reader.read(reads);
  for (BatchSlot& slot : batch) {
    const BatchRead& read = reads[slot.read];
    const std::uint64_t into = slot.extent.offset - read.offset;  // where the slot starts in its read
    const auto came = static_cast<std::uint64_t>(std::max<std::int64_t>(read.result, 0));
    slot.got = came > into ? std::min(came - into, slot.extent.size) : 0;
  }
}

/// Reads record `key`'s bytes: from the batch of hinted records (read now if `key` is one not
/// read yet), from the buffer when an earlier read brought them, else with one pread (of the
/// records after it too, while reads go in order).
Fetched IndexedReader::fetch(std::size_t key, std::string_view node) {
  auto& reading = *reading_;
  const auto& shared = *files_;
  if (memory_map_) {
    const RecordLocation location = locate(key);
    if (copy_mapped(key, location)) {
      return {&shared.files[location.file], location.record, location.span, reading.block.get()};
    }
  }
  const bool in_order = reading.last_key != kNone && key == reading.last_key + 1;
  reading.last_key = key;
  if (reading.hinted_count > 0 && reading.is_hinted(key)) read_hinted();
  if (BatchSlot* slot = reading.batched(key)) {
    const auto& file = shared.files[slot->file];
    Fetched fetched{&file, slot->local, slot->extent, reading.batch_block.get() + slot->position};
    const auto size = static_cast<std::size_t>(slot->extent.size);
    if (slot->got < size) {  // the batch's read came short or failed: read on, as pread does
      const auto got = static_cast<std::size_t>(slot->got);
      slot->got += read_at(reading.descriptors[slot->file], reading.batch_block.get() + slot->position + got,
                           size - got, slot->extent.offset + got, file.path, node);
      if (slot->got < size) throw truncated(fetched, slot->got, node);
    }
    batched_record_count.fetch_add(1, std::memory_order_relaxed);
    return fetched;
  }
  const RecordLocation location = locate(key);
  const std::size_t number = location.file;
  const auto& file = shared.files[number];
  Fetched fetched{&file, location.record, location.span, nullptr};
  const std::uint64_t offset = fetched.extent.offset;
  const std::uint64_t end = offset + fetched.extent.size;
  if (reading.block_file == number && offset >= reading.block_offset &&
      end <= reading.block_offset + reading.block_size) {
    fetched.data = reading.block.get() + (offset - reading.block_offset);
    return fetched;
  }
  reading.read_ahead = in_order ? std::min(read_ahead_limit_, std::max(2 * reading.read_ahead, kFirstReadAhead)) : 0;
  std::uint64_t read_end = end;
  for (std::uint64_t next = fetched.local + 1; reading.read_ahead > 0 && next < file.records; ++next) {
    const RecordSpan after = shared.extent(file, next);
    if (after.offset + after.size - offset > reading.read_ahead) break;
    read_end = after.offset + after.size;
  }
  const auto bytes = static_cast<std::size_t>(read_end - offset);
  if (reading.capacity < bytes + JsonDecoder::kPadding) {
    reading.capacity = std::max(bytes + JsonDecoder::kPadding, 2 * reading.capacity);
    reading.block = std::make_unique_for_overwrite<char[]>(reading.capacity);
    reading.block_file = kNone;
  }
  const int opened = descriptor(number);
  if (opened < 0) throw DataError(node, {.path = file.path}, fmt::format("cannot open: {}", std::strerror(errno)));
  reading.block_file = kNone;
  reading.block_size = read_at(opened, reading.block.get(), bytes, offset, file.path, node);
  reading.block_file = number;
  reading.block_offset = offset;
  if (reading.block_size < fetched.extent.size) {
    reading.block_file = kNone;
    throw truncated(fetched, reading.block_size, node);
  }
  fetched.data = reading.block.get();
  return fetched;
}

std::string IndexedReader::record_prefix(const Fetched& fetched) const {
  if (kind_of(files_->rules.format) != IndexKind::kTFRecord) return "";
  return fmt::format("record {}: ", files_->entry(*fetched.file, fetched.local) + 1);
}

// --- TFRecord ----------------------------------------------------------------------------------

std::string_view IndexedReader::tfrecord_data(std::size_t key, std::string_view node, Fetched& fetched) {
  fetched = fetch(key, node);
  const auto& rules = files_->rules;
  const auto fail = [&](std::string_view reason) {
    return DataError(node, {.path = fetched.file->path, .byte_offset = fetched.extent.offset},
                     record_prefix(fetched) + std::string(reason));
  };
  const char* frame = fetched.data;
  const std::uint64_t length = load64(frame);
  if (rules.verify_crc) {
    const std::uint32_t stored = load32(frame + 8);
    const std::uint32_t computed = crc32c_mask(crc32c(frame, 8));
    if (stored != computed)
      throw fail(fmt::format("the length's CRC does not match (stored {:#010x}, computed {:#010x})", stored, computed));
  }
  if (length > rules.max_bytes)
    throw fail(fmt::format("the length field says {} bytes, more than max_record_bytes ({})", length, rules.max_bytes));
  const std::uint64_t indexed = fetched.extent.size - kTFRecordHeader - kTFRecordFooter;
  if (length != indexed)
    throw fail(fmt::format("the length field says {} bytes, the index {} (the file changed since it was indexed)",
                           length, indexed));
  const std::string_view data(frame + kTFRecordHeader, static_cast<std::size_t>(length));
  if (rules.verify_crc) {
    const std::uint32_t stored = load32(data.data() + data.size());
    const std::uint32_t computed = crc32c_mask(crc32c(data.data(), data.size()));
    if (stored != computed)
      throw fail(fmt::format("the data's CRC does not match (stored {:#010x}, computed {:#010x})", stored, computed));
  }
  return data;
}

std::string IndexedReader::tfrecord(std::size_t key, std::string_view node) {
  Fetched fetched;
  return std::string(tfrecord_data(key, node, fetched));
}

TFExample IndexedReader::tfexample(std::size_t key, std::string_view node) {
  Fetched fetched;
  const std::string_view data = tfrecord_data(key, node, fetched);
  TFExample example;
  if (auto problem = decode_example(data, example))
    throw DataError(node, {.path = fetched.file->path, .byte_offset = fetched.extent.offset},
                    record_prefix(fetched) + "not a tf.train.Example: " + *problem);
  return example;
}

// --- lines -----------------------------------------------------------------------------------

std::string_view IndexedReader::line_text(std::size_t key, std::string_view node, Fetched& fetched, bool& ended) {
  fetched = fetch(key, node);
  const auto size = static_cast<std::size_t>(fetched.extent.size);
  ended = size > 0 && fetched.data[size - 1] == '\n';
  const std::size_t length = size - (ended ? 1 : 0);  // a '\r' before the '\n' counts, as readlines counts it
  if (length > files_->rules.max_bytes)
    throw DataError(node,
                    {.path = fetched.file->path,
                     .line = files_->entry(*fetched.file, fetched.local) + 1,
                     .byte_offset = fetched.extent.offset},
                    fmt::format("the line is longer than max_line_bytes ({})", files_->rules.max_bytes));
  return {fetched.data, length};
}

std::string IndexedReader::line(std::size_t key, std::string_view node) {
  Fetched fetched;
  bool ended = false;
  const std::string_view text = line_text(key, node, fetched, ended);
  // Python's text mode ends a line at "\n" or "\r\n" and hands "\n" over.
  const bool crlf = ended && !text.empty() && text.back() == '\r';
  if (files_->rules.strip_newline || !ended) return std::string(text.substr(0, text.size() - (crlf ? 1 : 0)));
  std::string line(text.substr(0, text.size() - (crlf ? 1 : 0)));
  line.push_back('\n');
  return line;
}

Json IndexedReader::json_line(std::size_t key, std::string_view node) {
  Fetched fetched;
  bool ended = false;
  std::string_view text = line_text(key, node, fetched, ended);
  if (ended && !text.empty() && text.back() == '\r') text.remove_suffix(1);
  auto& reading = *reading_;
  if (!reading.json) reading.json.emplace();
  auto result = JsonDecoder::Result::kValue;
  Json value = reading.json->decode_padded(text.data(), text.size(), result);  // the block has the padding
  if (result == JsonDecoder::Result::kValue) return value;
  const DataError::Where where{.path = fetched.file->path,
                               .line = files_->entry(*fetched.file, fetched.local) + 1,
                               .byte_offset = fetched.extent.offset};
  if (result == JsonDecoder::Result::kInvalid) throw DataError(node, where, reading.json->reason());
  throw DataError(node, where, "the line is blank (the file changed since it was indexed)");
}

// --- CSV ---------------------------------------------------------------------------------------

CsvRow IndexedReader::csv_row(std::size_t key, std::string_view node) {
  const Fetched fetched = fetch(key, node);
  const auto& rules = files_->rules;
  const auto size = static_cast<std::size_t>(fetched.extent.size);
  std::size_t length = size;  // the row without its line end
  if (length > 0 && fetched.data[length - 1] == '\n') --length;
  if (length > 0 && fetched.data[length - 1] == '\r') --length;
  if (length > rules.max_bytes)
    throw DataError(node,
                    {.path = fetched.file->path,
                     .line = rules.skip_lines + fetched.local + 1,
                     .byte_offset = fetched.extent.offset},
                    fmt::format("the row is longer than max_row_bytes ({})", rules.max_bytes));
  auto& reading = *reading_;
  if (!reading.csv)
    reading.csv.emplace(CsvRules{.delimiter = rules.delimiter,
                                 .quotechar = rules.quotechar,
                                 .skip_lines = 0,
                                 .max_row_bytes = std::numeric_limits<std::size_t>::max()});
  // The row is parsed by parse_csv's own cursor, from a stream of its bytes at their offset.
  OpenedFile row(fetched.file->path, fetched.file->path,
                 std::make_unique<SpanSource>(fetched.data, size, fetched.extent.offset));
  row.seek(fetched.extent.offset, node);
  reading.csv->start(std::move(row));
  CsvRow fields;
  if (!reading.csv->next(fields, node))
    throw DataError(node, {.path = fetched.file->path, .byte_offset = fetched.extent.offset},
                    "the row is gone (the file changed since it was indexed)");
  reading.csv->close();
  return fields;
}

// --- tar ---------------------------------------------------------------------------------------

std::string IndexedReader::member_bytes(const Fetched& fetched, std::uint64_t member, std::string_view node) const {
  const auto& index = fetched.file->index;
  const RecordSpan span = index.spans[member];
  if (span.size > files_->rules.max_bytes)
    throw DataError(
        node,
        {.path = fetched.file->path, .member = std::string(index.member_name(member)), .byte_offset = span.offset},
        fmt::format("the member has {} bytes, more than max_member_bytes ({})", span.size, files_->rules.max_bytes));
  return {fetched.data + (span.offset - fetched.extent.offset), static_cast<std::size_t>(span.size)};
}

PathBytes IndexedReader::member(std::size_t key, std::string_view node) {
  const Fetched fetched = fetch(key, node);
  const std::uint64_t member = files_->entry(*fetched.file, fetched.local);
  return {member_path(fetched.file->path, fetched.file->index.member_name(member)),
          member_bytes(fetched, member, node)};
}

WebDatasetSample IndexedReader::sample(std::size_t key, std::string_view node) {
  const Fetched fetched = fetch(key, node);
  const auto [first, end] = fetched.file->samples[fetched.local];
  WebDatasetSample sample;
  for (std::uint64_t member = first; member < end; ++member) {
    auto [member_key, suffix] =
        webdataset_split(member_path(fetched.file->path, fetched.file->index.member_name(member)));
    if (suffix.empty()) continue;
    if (sample.fields.empty()) sample.key = std::move(member_key);
    std::string bytes = member_bytes(fetched, member, node);
    auto& fields = sample.fields;
    const auto same =
        std::find_if(fields.begin(), fields.end(), [&](const auto& field) { return field.first == suffix; });
    if (same != fields.end()) {
      same->second = std::move(bytes);  // a repeated suffix keeps the last member's bytes
    } else {
      fields.emplace_back(std::move(suffix), std::move(bytes));
    }
  }
  return sample;
}

// --- options -----------------------------------------------------------------------------------

namespace {

/// The rules of `format` with its limit `max_bytes` (named `limit` in messages); InvalidArgument
/// for a limit of 0 and for OnError::skip.
IndexedReadRules checked_rules(IndexedFormat format, const OnError& on_error, std::uint64_t max_bytes,
                               std::string_view limit, std::string_view node) {
  if (on_error.skips())
    DPIPE_THROW(InvalidArgument,
                "{}: a map pipe cannot skip a record (OnError::skip): get() returns the record asked for or throws; "
                "catch the DataError instead",
                node);
  if (max_bytes == 0) DPIPE_THROW(InvalidArgument, "{}: {} must be > 0", node, limit);
  return {.format = format, .max_bytes = max_bytes};
}

}  // namespace

IndexedReadRules read_rules(IndexedFormat format, const TFRecordOptions& options, std::string_view node) {
  auto rules = checked_rules(format, options.on_error, options.max_record_bytes, "max_record_bytes", node);
  rules.verify_crc = options.verify_crc;
  return rules;
}

IndexedReadRules read_rules(IndexedFormat format, const ReadLinesOptions& options, std::string_view node) {
  auto rules = checked_rules(format, options.on_error, options.max_line_bytes, "max_line_bytes", node);
  rules.skip_lines = options.skip_lines;
  rules.strip_newline = options.strip_newline;
  return rules;
}

IndexedReadRules read_rules(IndexedFormat format, const ParseJsonlOptions& options, std::string_view node) {
  return checked_rules(format, options.on_error, options.max_line_bytes, "max_line_bytes", node);
}

IndexedReadRules read_rules(IndexedFormat format, const CsvOptions& options, std::string_view node) {
  auto rules = checked_rules(format, options.on_error, options.max_row_bytes, "max_row_bytes", node);
  check_csv_options(options, node);
  rules.skip_lines = options.skip_lines;
  rules.delimiter = options.delimiter;
  rules.quotechar = options.quotechar;
  return rules;
}

IndexedReadRules read_rules(IndexedFormat format, const ArchiveOptions& options, std::string_view node) {
  return checked_rules(format, options.on_error, options.max_member_bytes, "max_member_bytes", node);
}

std::uint64_t batched_records() noexcept { return batched_record_count.load(std::memory_order_relaxed); }
std::uint64_t mapped_records() noexcept { return mapped_record_count.load(std::memory_order_relaxed); }

}  // namespace detail

std::string_view indexed_format_name(IndexedFormat format) noexcept {
  switch (format) {
    case IndexedFormat::kTFRecord:
      return "tfrecord";
    case IndexedFormat::kTFExample:
      return "tfexample";
    case IndexedFormat::kLines:
      return "lines";
    case IndexedFormat::kJsonLines:
      return "jsonl";
    case IndexedFormat::kCsv:
      return "csv";
    case IndexedFormat::kTar:
      return "tar";
    case IndexedFormat::kWebDataset:
      break;
  }
  return "webdataset";
}

}  // namespace dpipe::io
