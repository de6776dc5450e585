#pragma once
/// \file
/// `io::indexed_records<format>(files, index_options, format_options)`: the records of local
/// files in random access, a `MapPipe<std::size_t, Record>` keyed by the record's number across
/// the files in the order given, read through record indexes (<dpipe/io/record_index.hpp>). The
/// records are what the format's sequential reader yields, so a global shuffle over the records of
/// many files (`.shuffle()`, `.to_iter(order)`) reads the same records as `open_files() |
/// tfrecord_records()` and its kin, in another order.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <dpipe/core/error.hpp>
#include <dpipe/core/map_datapipe.hpp>
#include <dpipe/core/map_pipe.hpp>
#include <dpipe/io/csv.hpp>
#include <dpipe/io/json.hpp>
#include <dpipe/io/load_from_archive.hpp>
#include <dpipe/io/parse_json.hpp>
#include <dpipe/io/readlines.hpp>
#include <dpipe/io/record_index.hpp>
#include <dpipe/io/tfrecord.hpp>
#include <dpipe/io/webdataset.hpp>

namespace dpipe::io {

/// The formats indexed_records reads, each with the record type and the options of its sequential
/// reader (IndexedRecord<F>, IndexedFormatOptions<F>).
enum class IndexedFormat : std::uint8_t {
  kTFRecord,    ///< std::string, TFRecordOptions: each record's bytes (tfrecord_records)
  kTFExample,   ///< TFExample, TFRecordOptions: each record decoded (load_from_tfrecord)
  kLines,       ///< std::string, ReadLinesOptions: each line (readlines(options, lines_only))
  kJsonLines,   ///< Json, ParseJsonlOptions: each non-blank line's value (parse_jsonl)
  kCsv,         ///< CsvRow, CsvOptions: each row, with no row spanning lines (parse_csv)
  kTar,         ///< PathBytes, ArchiveOptions: each regular member of a plain tar (load_from_tar)
  kWebDataset,  ///< WebDatasetSample, ArchiveOptions: each sample of a plain tar (load_from_tar | webdataset)
};

/// The record type and the options of format F.
template <IndexedFormat F>
struct IndexedFormatTraits;
template <>
struct IndexedFormatTraits<IndexedFormat::kTFRecord> {
  using Record = std::string;
  using Options = TFRecordOptions;
};
template <>
struct IndexedFormatTraits<IndexedFormat::kTFExample> {
  using Record = TFExample;
  using Options = TFRecordOptions;
};
template <>
struct IndexedFormatTraits<IndexedFormat::kLines> {
  using Record = std::string;
  using Options = ReadLinesOptions;
};
template <>
struct IndexedFormatTraits<IndexedFormat::kJsonLines> {
  using Record = Json;
  using Options = ParseJsonlOptions;
};
template <>
struct IndexedFormatTraits<IndexedFormat::kCsv> {
  using Record = CsvRow;
  using Options = CsvOptions;
};
template <>
struct IndexedFormatTraits<IndexedFormat::kTar> {
  using Record = PathBytes;
  using Options = ArchiveOptions;
};
template <>
struct IndexedFormatTraits<IndexedFormat::kWebDataset> {
  using Record = WebDatasetSample;
  using Options = ArchiveOptions;
};

/// What indexed_records<F> yields.
template <IndexedFormat F>
using IndexedRecord = typename IndexedFormatTraits<F>::Record;
/// The options indexed_records<F> reads records with: its sequential reader's.
template <IndexedFormat F>
using IndexedFormatOptions = typename IndexedFormatTraits<F>::Options;

/// "tfrecord", "tfexample", "lines", "jsonl", "csv", "tar", "webdataset".
[[nodiscard]] std::string_view indexed_format_name(IndexedFormat format) noexcept;

/// Where a record of indexed_records is: for a global order that wants to know which records
/// share a file, or lie close together in one.
struct RecordLocation {
  std::size_t file = 0;      ///< its file's position in the list of files
  std::uint64_t record = 0;  ///< its number among the records of that file (from 0)
  RecordSpan span;  ///< its bytes in the file (a WebDataset sample: from its first member's data to its last's)

  friend bool operator==(const RecordLocation&, const RecordLocation&) = default;
};

namespace detail {

/// The options of a format's sequential reader that reading a record needs, in one type.
struct IndexedReadRules {
  IndexedFormat format = IndexedFormat::kTFRecord;
  bool verify_crc = true;        ///< TFRecord
  std::uint64_t max_bytes = 0;   ///< max_record_bytes, max_line_bytes, max_row_bytes, max_member_bytes
  std::uint64_t skip_lines = 0;  ///< lines, CSV
  bool strip_newline = true;     ///< lines
  char delimiter = ',';          ///< CSV
  char quotechar = '"';          ///< CSV
};

/// The rules of `format` read with its sequential reader's `options`; InvalidArgument naming
/// `node` for options a map pipe cannot follow (OnError::skip: get() has no record to return
/// instead) or that the sequential reader refuses.
[[nodiscard]] IndexedReadRules read_rules(IndexedFormat format, const TFRecordOptions& options, std::string_view node);
[[nodiscard]] IndexedReadRules read_rules(IndexedFormat format, const ReadLinesOptions& options, std::string_view node);
[[nodiscard]] IndexedReadRules read_rules(IndexedFormat format, const ParseJsonlOptions& options,
                                          std::string_view node);
[[nodiscard]] IndexedReadRules read_rules(IndexedFormat format, const CsvOptions& options, std::string_view node);
[[nodiscard]] IndexedReadRules read_rules(IndexedFormat format, const ArchiveOptions& options, std::string_view node);

/// The indexes of the files and the records they select, shared by a node and its clones.
struct IndexedFiles;
/// One record's bytes, as IndexedReader read them.
struct Fetched;
/// A read-only map of a file (src/io/file_mapping.hpp).
class FileMapping;

/// Reads records by number through the indexes of its files, with pread on one descriptor per
/// file (opened on first use, with O_CLOEXEC), or with IndexOptions::memory_map by copying each
/// record out of a map of its file (mapped on first use; a hint brings the record's first bytes
/// into the CPU's caches, and nothing is read ahead; a record the map cannot vouch for is read with
/// pread). A read that misses its buffer reads the record
/// alone, or, while reads go through the records in order, also the records after it up to
/// IndexOptions::read_ahead_bytes (doubling from 16 KiB): later reads of those are served from the
/// buffer. Records named by hint() are read together instead: the first read of one of them
/// reads them all (up to kMaxHints records, 8 MiB in all) with one io_uring submission, or one
/// pread each where the kernel has no io_uring, and later reads of them are served from that
/// batch in any order. Bad bytes are a DataError naming the node, the file and the record's byte
/// offset, the same whichever way the record was read. Thread-safety: one thread at a time; a
/// copy shares the indexes and opens descriptors and a ring of its own. After fork() the child
/// keeps using the descriptors it inherited (pread moves no shared file offset) and makes a ring
/// of its own.
class IndexedReader {
 public:
  /// Indexes `files` (index_file) for `rules`; DataError naming `node` as index_file says.
  IndexedReader(std::vector<std::string> files, IndexedReadRules rules, const IndexOptions& options,
                std::string_view node);
  IndexedReader(const IndexedReader& other);
  IndexedReader& operator=(const IndexedReader&) = delete;
  ~IndexedReader();

  /// The number of records.
  [[nodiscard]] std::size_t size() const noexcept;
  /// The files, in key order.
  [[nodiscard]] const std::vector<std::string>& files() const noexcept;
  /// The index of file `file`. REQUIRES: file < files().size().
  [[nodiscard]] const RecordIndex& index(std::size_t file) const noexcept;
  /// Where record `key` is. REQUIRES: key < size().
  [[nodiscard]] RecordLocation locate(std::size_t key) const noexcept;
  /// The most hinted records one batch reads.
  static constexpr std::size_t kMaxHints = 64;
  /// A hint that record `key` is read soon: it joins the records the next read of a hinted record
  /// reads at once. With kMaxHints queued, the oldest gives way; a key queued already or past
  /// size() is passed over. It changes which bytes the reader holds, never what it yields. Never
  /// throws.
  void hint(std::size_t key) const noexcept;

  // Record `key` (REQUIRES: key < size()), as its format's reader yields it.
  [[nodiscard]] std::string tfrecord(std::size_t key, std::string_view node);
  [[nodiscard]] TFExample tfexample(std::size_t key, std::string_view node);
  [[nodiscard]] std::string line(std::size_t key, std::string_view node);
  [[nodiscard]] Json json_line(std::size_t key, std::string_view node);
  [[nodiscard]] CsvRow csv_row(std::size_t key, std::string_view node);
  [[nodiscard]] PathBytes member(std::size_t key, std::string_view node);
  [[nodiscard]] WebDatasetSample sample(std::size_t key, std::string_view node);

 private:
  struct Reading;  // descriptors, the buffer, the format's decoders

  /// Record `key`'s bytes, from a batch, from the buffer or read into it.
  Fetched fetch(std::size_t key, std::string_view node);
  /// Reads the hinted records, as one batch of reads.
  void read_hinted();
  /// File `number`'s descriptor, opened on first use; -1 (errno set) when it cannot be opened.
  int descriptor(std::size_t number) const noexcept;
  /// File `number`'s map, made on first use (memory_map); null when it cannot be mapped.
  [[nodiscard]] const FileMapping* mapping(std::size_t number) const noexcept;
  /// With memory_map, copies record `key` (at `location`) out of its file's map into the buffer;
  /// false when it cannot (no map, or the file no longer holds it).
  bool copy_mapped(std::size_t key, const RecordLocation& location);
  /// The DataError of a record that the file ends inside of, after `got` of its bytes.
  [[nodiscard]] DataError truncated(const Fetched& fetched, std::uint64_t got, std::string_view node) const;
  /// "record N: " for a TFRecord record (as tfrecord_records' messages start), else "".
  [[nodiscard]] std::string record_prefix(const Fetched& fetched) const;
  /// A TFRecord record's data, its framing checked.
  std::string_view tfrecord_data(std::size_t key, std::string_view node, Fetched& fetched);
  /// A line without its '\n' (`ended`: it had one), its length checked.
  std::string_view line_text(std::size_t key, std::string_view node, Fetched& fetched, bool& ended);
  /// The bytes of tar member `member` in the fetched record, its size checked.
  [[nodiscard]] std::string member_bytes(const Fetched& fetched, std::uint64_t member, std::string_view node) const;

  std::shared_ptr<const IndexedFiles> files_;
  std::size_t read_ahead_limit_ = 0;
  bool memory_map_ = false;
  std::unique_ptr<Reading> reading_;
};

/// For tests: how many records this process's indexed readers have served from batches of
/// hinted records. Thread-safe.
[[nodiscard]] std::uint64_t batched_records() noexcept;
/// For tests: how many records this process's indexed readers have copied out of maps
/// (IndexOptions::memory_map). Thread-safe.
[[nodiscard]] std::uint64_t mapped_records() noexcept;

}  // namespace detail

/// A MapDataPipe over the records of `files` in format F: key k is the k-th record counting
/// through the files in the order given (file 0's records, then file 1's, ...), size() is their
/// total, and get(k) is the record F's sequential reader yields there (IndexedRecord<F>), read
/// with the same options (IndexedFormatOptions<F>): TFRecord CRCs checked with verify_crc, lines
/// after skip_lines, and so on. Each file is indexed when the node is made (index_file: a stored
/// index when it is fresh, a scan otherwise). A record that fails its format's checks (a CRC
/// mismatch, a truncated record, a line over max_line_bytes, JSON that does not parse) is a
/// DataError naming the node, the file and the record's byte offset; a key past size() a
/// KeyError. prefetch(k) queues k, and the first get() of a queued key reads all queued records
/// at once (one io_uring submission): a global order's sampler hints each run of keys before it
/// reads them. With IndexOptions::memory_map, prefetch(k) brings the start of record k's bytes in
/// its file's map into the CPU's caches instead. Map nodes keep no iteration state, so a checkpoint holds nothing for
/// this node. Thread-safety: one thread at a time (a MapDataPipe); clones (graph::clone, worker copies) read with
/// descriptors of their own.
template <IndexedFormat F>
class IndexedRecords final : public MapDataPipe<std::size_t, IndexedRecord<F>> {
  using Record = IndexedRecord<F>;

 public:
  static constexpr std::string_view kName = "indexed_records";

  /// Indexes `files`; InvalidArgument for options a map pipe cannot follow, DataError for a file
  /// that cannot be indexed (see index_file).
  IndexedRecords(std::vector<std::string> files, const IndexOptions& index, const IndexedFormatOptions<F>& options)
      : MapDataPipe<std::size_t, Record>(std::string(kName)),
        reader_(std::move(files), detail::read_rules(F, options, this->label()), index, this->label()) {}

  void for_each_input(const InputVisitor& /*visit*/) override {}
  [[nodiscard]] DataPipePtr clone_self() const override { return std::make_shared<IndexedRecords>(*this); }
  [[nodiscard]] NodeSettings settings() const override {
    return {{"format", std::string(indexed_format_name(F))},
            {"files", std::to_string(reader_.files().size())},
            {"records", std::to_string(reader_.size())}};
  }

  /// The files, in key order.
  [[nodiscard]] const std::vector<std::string>& files() const noexcept { return reader_.files(); }
  /// The index of file `file` (where its records are). REQUIRES: file < files().size().
  [[nodiscard]] const RecordIndex& index(std::size_t file) const noexcept { return reader_.index(file); }
  /// Where record `key` is: its file, its number there and its bytes; KeyError past size().
  [[nodiscard]] RecordLocation locate(std::size_t key) const {
    if (key >= reader_.size())
      DPIPE_THROW(KeyError, "{}: index {} is out of range for {} records", this->label(), key, reader_.size());
    return reader_.locate(key);
  }

 protected:
  Record get_impl(const std::size_t& key) override {
    if (key >= reader_.size())
      DPIPE_THROW(KeyError, "{}: index {} is out of range for {} records", this->label(), key, reader_.size());
    const std::string_view node = this->label();
    if constexpr (F == IndexedFormat::kTFRecord) {
      return reader_.tfrecord(key, node);
    } else if constexpr (F == IndexedFormat::kTFExample) {
      return reader_.tfexample(key, node);
    } else if constexpr (F == IndexedFormat::kLines) {
      return reader_.line(key, node);
    } else if constexpr (F == IndexedFormat::kJsonLines) {
      return reader_.json_line(key, node);
    } else if constexpr (F == IndexedFormat::kCsv) {
      return reader_.csv_row(key, node);
    } else if constexpr (F == IndexedFormat::kTar) {
      return reader_.member(key, node);
    } else {
      return reader_.sample(key, node);
    }
  }
  [[nodiscard]] std::size_t size_impl() const override { return reader_.size(); }
  /// Queues `key` to be read with the other hinted records (IndexedReader::hint).
  void prefetch_impl(const std::size_t& key) const noexcept override { reader_.hint(key); }

 private:
  detail::IndexedReader reader_;
};

/// A map pipe over the records of the local `files` in format F, read through their indexes
/// (stored as `index` says) with F's sequential reader's `options`:
/// `io::indexed_records<io::IndexedFormat::kTFRecord>(paths)`, then `.shuffle()` for an epoch in a
/// random order of all records, or `.to_iter(order)` for an order of your own.
template <IndexedFormat F>
[[nodiscard]] MapPipe<std::size_t, IndexedRecord<F>> indexed_records(std::vector<std::string> files,
                                                                     const IndexOptions& index = {},
                                                                     const IndexedFormatOptions<F>& options = {}) {
  return make_map<IndexedRecords<F>>(std::move(files), index, options);
}

}  // namespace dpipe::io
