#pragma once
/// \file
/// The opener registry: each stream scheme ("file", "gzip", "http", a user's own "mem") is opened
/// by the opener registered for it, both when `open_files()` opens a `scheme://...` path and when a
/// checkpoint restore reopens a stream from its origin (OpenedFile::reopen).

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include <dpipe/io/byte_source.hpp>
#include <dpipe/io/opened_file.hpp>

namespace dpipe::io {

/// Opens, at its start, the stream `origin` names: a path of the opener's scheme
/// ("mem://a.txt", as open_files() got it) or the origin() of a stream it opened before (as a
/// checkpoint saved it). The stream's origin() must be a string of the same scheme that opens the
/// same bytes again (the path itself serves). DataError naming `node` and the stream when it
/// cannot be opened. Called from any thread, and from several at once.
using Opener = std::function<OpenedFile(const std::string& origin, std::string_view node)>;

/// Registers `opener` for `scheme`: paths that start with "<scheme>://" and origins that start
/// with "<scheme>:" or "<scheme>[" open through it, in this process and in the worker processes it
/// forks later (register before the loader starts its workers). A scheme is registered once, for
/// the life of the process: InvalidArgument when `scheme` has an opener already (dpipe's own
/// included: bz2, file, gzip, http, https, lzma, s3, xz, zstd), when it is not a scheme (a lowercase
/// letter, then lowercase letters, digits, '+', '-' or '.') or when `opener` is empty.
/// Thread-safe.
void register_opener(std::string_view scheme, Opener opener);

/// The schemes that have an opener, dpipe's own and those registered, in sorted order.
/// Thread-safe.
[[nodiscard]] std::vector<std::string> registered_schemes();

}  // namespace dpipe::io
