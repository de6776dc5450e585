#pragma once
/// \file
/// Record indexes: where each record of a file starts and how long it is, for TFRecord files,
/// text and JSON lines, CSV files without multi-line rows, and tar archives (members, and
/// WebDataset samples made of them). An index is built in one sequential pass over its file,
/// stored beside it (`<file>.dpipe-idx`) or in a cache directory, and reused while the file keeps
/// its size and modification time. `io::indexed_records` (<dpipe/io/indexed_records.hpp>) reads
/// records through indexes in any order.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dpipe::io {

/// How a file is cut into records.
enum class IndexKind : std::uint32_t {
  kTFRecord = 1,  ///< TFRecord frames; a span is a whole frame (length, its CRC, data, data CRC)
  kLines = 2,     ///< lines ending at "\n" (the last may lack it); a span holds its line end
  kCsv = 3,       ///< CSV rows, each on one line; a span holds its line end ("\n", "\r\n" or "\r")
  kTar = 4,       ///< the regular members of a plain tar; a span is a member's data
};

/// The name of `kind` in messages: "TFRecord", "lines", "CSV", "tar".
[[nodiscard]] std::string_view index_kind_name(IndexKind kind) noexcept;

/// What an index is built for: its kind and, for kCsv, the dialect that decides where rows end.
/// An index built for another spec is stale.
struct IndexSpec {
  IndexKind kind = IndexKind::kTFRecord;
  /// kCsv: the field delimiter (a quote opens a quoted field only at the start of a field).
  char delimiter = ',';
  /// kCsv: the quote character.
  char quotechar = '"';
  /// kCsv: lines skipped at the start of the file before the first row (as parse_csv skips them).
  std::uint64_t skip_lines = 0;

  friend bool operator==(const IndexSpec&, const IndexSpec&) = default;
};

/// What happens when a file's index exists but no longer matches the file (its size or
/// modification time changed, or it was built for another IndexSpec).
enum class StaleIndex : std::uint8_t {
  kRebuild,  ///< the file is indexed again and the index file replaced (the default)
  kRefuse,   ///< a DataError naming the file, its index and what differs
};

/// Where indexes live and how they are read.
struct IndexOptions {
  /// The directory index files are kept in, created when missing; empty: beside each file, as
  /// `<file>.dpipe-idx`. In a cache directory an index is named after a hash of the file's
  /// absolute path (`<hash>-<file name>.dpipe-idx`) and holds that path, so that two files of one
  /// name do not share an index.
  std::string cache_dir{};
  /// What a stale index does. A missing index is built either way; a corrupt one is rebuilt with
  /// kRebuild and a DataError with kRefuse.
  StaleIndex on_stale = StaleIndex::kRebuild;
  /// indexed_records: the most a read of a record also reads of the records after it, in one
  /// pread, once reads go through the records in order (random reads read one record each). 0
  /// turns read-ahead off.
  std::size_t read_ahead_bytes = std::size_t{64} << 10;
  /// indexed_records: read records by copying them out of a read-only map of each file instead of
  /// with pread. A random record in the page cache then costs about a quarter of a pread, but a
  /// record not in the page cache waits for the disk alone, without the batched reads of hinted
  /// records: for files that sit in the page cache (or on tmpfs). A file cut short under its map
  /// is the same DataError as with pread: a copy catches the SIGBUS of a page the file no longer
  /// has (dpipe's handler, installed when a file is mapped, passes other SIGBUS signals on to the
  /// handler it replaced), and vouches for its bytes only when the file still holds the page after
  /// them; the records of a file's last page are read with pread.
  bool memory_map = false;
};

/// Where a record's bytes are in its file.
struct RecordSpan {
  std::uint64_t offset = 0;  ///< the byte offset of its first byte
  std::uint64_t size = 0;    ///< its bytes (see IndexKind for what they include)

  friend bool operator==(const RecordSpan&, const RecordSpan&) = default;
};

/// The index of one file: its records in file order and the state of the file they describe.
/// Thread-safety: a value.
struct RecordIndex {
  std::string path;                      ///< the file, as given
  IndexSpec spec;                        ///< what it was built for
  std::uint64_t file_size = 0;           ///< the file's size when it was indexed
  std::int64_t file_mtime_ns = 0;        ///< its modification time then, in ns since the epoch
  std::vector<RecordSpan> spans;         ///< the records, in file order
  std::vector<std::uint64_t> blank;      ///< kLines: the lines (0-based) holding only JSON whitespace
  std::string names;                     ///< kTar: the members' names, back to back
  std::vector<std::uint64_t> name_ends;  ///< kTar: where member i's name ends in `names`
  bool built = false;                    ///< this call scanned the file (rather than load its index file)

  /// The number of records.
  [[nodiscard]] std::size_t size() const noexcept { return spans.size(); }
  /// kTar: the name of member `i` in the archive ("dir/000017.jpg"). REQUIRES: i < size().
  [[nodiscard]] std::string_view member_name(std::size_t i) const noexcept {
    const std::uint64_t begin = i == 0 ? 0 : name_ends[i - 1];
    return std::string_view(names).substr(begin, name_ends[i] - begin);
  }
};

/// The path of the index file of `path` under `options` (beside it, or in options.cache_dir).
/// Thread-safe.
[[nodiscard]] std::string index_path(const std::string& path, const IndexOptions& options = {});

/// The index of the local file `path` for `spec`: read from its index file when that matches the
/// file's size and modification time (ns) and `spec`; else built in one pass of 1 MiB reads and
/// written to the index file (a temporary file renamed over it, so readers never see half of
/// one; a directory that cannot be written is logged as a warning and the index used from
/// memory). A stale index is rebuilt or refused, as options.on_stale says. A file modified less
/// than a clock tick before it is indexed is indexed once that tick has passed (a later change
/// then always shows in its modification time). Errors are DataErrors naming `node` and the
/// file: a file that cannot be read, a record that cannot be indexed (with its byte offset: a
/// truncated TFRecord or a length whose CRC does not match, a CSV row with a line end inside
/// quotes, a compressed tar, a tar header whose checksum does not match, a sparse or hard-link
/// member), a refused stale or corrupt index. Thread-safe; processes may index the same file at
/// once (each writes its own temporary file).
[[nodiscard]] RecordIndex index_file(const std::string& path, const IndexSpec& spec, const IndexOptions& options = {},
                                     std::string_view node = "index_file");

namespace detail {

/// How many files this process has indexed by scanning them (not loading their index files):
/// for tests. Thread-safe.
[[nodiscard]] std::uint64_t index_builds() noexcept;

}  // namespace detail
}  // namespace dpipe::io
