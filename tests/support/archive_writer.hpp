#pragma once
// Writes the archives and compressed files the I/O tests and benchmark B5 read, with libarchive's
// writer (an independent code path from the reader under test). Without Catch: a failure throws.

#include <archive.h>
#include <archive_entry.h>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace dpipe::testing {

/// Throws, naming libarchive's reason, unless `status` is ARCHIVE_OK (or `expected`).
inline void check_written(archive* out, la_ssize_t status, la_ssize_t expected = ARCHIVE_OK) {
  if (status != expected) {
    const char* reason = archive_error_string(out);
    throw std::runtime_error(std::string("libarchive cannot write: ") + (reason != nullptr ? reason : "no reason"));
  }
}

/// A member to write: a name and its bytes; a name ending in '/' is a directory.
using ArchiveEntry = std::pair<std::string, std::string>;

/// Writes `entries` to `path` in libarchive's `format` ("ustar", "gnutar", "pax", "zip") through
/// `filter` ("none", "gzip", "bzip2", "xz", "lzma", "zstd"), with libarchive's writer `options`
/// ("zip:zip64") when given.
inline void write_archive(const std::string& path, const std::string& format, const std::string& filter,
                          const std::vector<ArchiveEntry>& entries, const std::string& options = "") {
  archive* out = archive_write_new();
  check_written(out, archive_write_set_format_by_name(out, format.c_str()));
  if (!options.empty()) check_written(out, archive_write_set_options(out, options.c_str()));
  if (filter != "none") check_written(out, archive_write_add_filter_by_name(out, filter.c_str()));
  check_written(out, archive_write_open_filename(out, path.c_str()));
  for (const auto& [name, bytes] : entries) {
    archive_entry* entry = archive_entry_new();
    archive_entry_set_pathname(entry, name.c_str());
    const bool directory = !name.empty() && name.back() == '/';
    archive_entry_set_filetype(entry, directory ? AE_IFDIR : AE_IFREG);
    archive_entry_set_perm(entry, directory ? 0755 : 0644);
    archive_entry_set_size(entry, directory ? 0 : static_cast<la_int64_t>(bytes.size()));
    check_written(out, archive_write_header(out, entry));
    if (!directory && !bytes.empty())
      check_written(out, archive_write_data(out, bytes.data(), bytes.size()), static_cast<la_ssize_t>(bytes.size()));
    archive_entry_free(entry);
  }
  check_written(out, archive_write_close(out));
  archive_write_free(out);
}

/// Writes `bytes` to `path` compressed with `filter` ("gzip", "bzip2", "xz", "lzma", "zstd").
inline void write_compressed(const std::string& path, const std::string& filter, const std::string& bytes) {
  archive* out = archive_write_new();
  check_written(out, archive_write_set_format_raw(out));
  check_written(out, archive_write_add_filter_by_name(out, filter.c_str()));
  check_written(out, archive_write_open_filename(out, path.c_str()));
  archive_entry* entry = archive_entry_new();
  archive_entry_set_filetype(entry, AE_IFREG);
  check_written(out, archive_write_header(out, entry));
  if (!bytes.empty())
    check_written(out, archive_write_data(out, bytes.data(), bytes.size()), static_cast<la_ssize_t>(bytes.size()));
  archive_entry_free(entry);
  check_written(out, archive_write_close(out));
  archive_write_free(out);
}

/// Writes `shards` WebDataset shards "shard-<n>.tar" (pax) into `directory` for the benchmarks:
/// each holds `samples` samples "<key>.jpg" of `sample_bytes` bytes (a pattern that differs per
/// sample) and "<key>.cls" of 3 bytes, keys numbered across the shards. Returns their paths.
inline std::vector<std::string> write_sample_shards(const std::string& directory, std::size_t shards,
                                                    std::size_t samples, std::size_t sample_bytes) {
  std::vector<std::string> paths;
  std::string bytes(sample_bytes, '\0');
  for (std::size_t shard = 0; shard < shards; ++shard) {
    paths.push_back(directory + "/shard-" + std::to_string(shard) + ".tar");
    std::vector<ArchiveEntry> members;
    for (std::size_t sample = 0; sample < samples; ++sample) {
      for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>((i * 31 + sample + shard) & 0xff);
      const auto key = std::to_string(1000000 + shard * samples + sample).substr(1);
      members.emplace_back(key + ".jpg", bytes);
      members.emplace_back(key + ".cls", bytes.substr(0, 3));
    }
    write_archive(paths.back(), "paxr", "none", members);
  }
  return paths;
}

}  // namespace dpipe::testing
