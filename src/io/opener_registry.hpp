#pragma once
/// \file
/// The opener registry's private side: the lookup OpenedFile::open() and reopen() go through, and
/// dpipe's own openers. The registry adds those when it is first used, so that no registration
/// depends on the order in which the library's static objects are initialised (or on whether the
/// linker keeps an object that only registers something).

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include <dpipe/core/error.hpp>
#include <dpipe/io/opened_file.hpp>
#include <dpipe/io/opener.hpp>

namespace dpipe::io::detail {

/// Whether `path` starts with "<scheme>://" (a URL, opened through its scheme's opener) rather than
/// being a local file's path.
[[nodiscard]] bool names_scheme(std::string_view path) noexcept;

/// Opens `origin`, a "<scheme>://" path or a stream origin, through the opener of its scheme (the
/// text before its first ':' or '['). DataError naming `node` and `origin`, and listing the
/// registered schemes, when it names no scheme or one without an opener. Thread-safe.
[[nodiscard]] OpenedFile open_origin(const std::string& origin, std::string_view node);

/// The DataError of an opener given an origin of its `scheme` that it cannot read.
[[nodiscard]] DataError malformed_origin(const std::string& origin, std::string_view scheme, std::string_view node);

/// The local file `path` as a ByteSource (the S3 cache's copies); SourceFailure when it cannot be
/// opened.
[[nodiscard]] std::unique_ptr<ByteSource> open_file_source(const std::string& path);

/// Lists the objects under `root` (a "<scheme>://" path), as list_files() lists a local root:
/// the matching names in sorted order, each directory's before its subdirectories' (all of them
/// when `recursive`). DataError naming `node` and the root when it cannot.
using Lister = std::function<std::vector<std::string>(const std::string& root, const std::vector<std::string>& masks,
                                                      bool recursive, std::string_view node)>;

/// Lists `root` through the lister of its scheme; DataError naming `node` when the scheme has
/// none. Thread-safe.
[[nodiscard]] std::vector<std::string> list_with_scheme(const std::string& root, const std::vector<std::string>& masks,
                                                        bool recursive, std::string_view node);

/// Whether `name` matches one of `masks` (Python's fnmatch; no masks match every name).
[[nodiscard]] bool matches_masks(const std::string& name, const std::vector<std::string>& masks);

/// Adds an opener to the registry while it is seeded.
using AddOpener = std::function<void(std::string_view scheme, Opener opener)>;

/// "file:<path>" (opened_file.cpp).
void add_file_opener(const AddOpener& add);
/// "<format>[<max_bytes>]:<origin>" (or "[<max_bytes>,<hold_back>]") for gzip, bz2, xz, lzma and zstd (decompress.cpp).
void add_decompressed_openers(const AddOpener& add);
/// "http[<settings>]:<url>" (read_from_http()'s origins) and http:// and https:// URLs, opened with
/// the default HttpOptions (read_from_http.cpp).
void add_http_openers(const AddOpener& add);
/// "s3[<settings>]:s3://..." and s3:// paths (s3_opener.cpp), and the s3 lister.
void add_s3_openers(const AddOpener& add);
/// The lister of "s3://" roots (s3_opener.cpp).
[[nodiscard]] Lister s3_lister();

}  // namespace dpipe::io::detail
