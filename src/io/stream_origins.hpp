#pragma once
/// \file
/// How OpenedFile::reopen() opens the streams other I/O nodes make, by their origin's scheme.

#include <optional>
#include <string>
#include <string_view>

#include <dpipe/io/opened_file.hpp>

namespace dpipe::io::detail {

/// The decompressed stream `origin` names ("gzip:file:/data/a.gz"), opened at its start, or
/// std::nullopt when `origin` is not one. DataError naming `node` when it cannot be opened.
std::optional<OpenedFile> reopen_decompressed(const std::string& origin, std::string_view node);

/// The HTTP stream `origin` names ("http[length=..,...]:https://host/a.txt"), not requested yet:
/// its first seek() or read() sends the request. std::nullopt when `origin` is not one.
std::optional<OpenedFile> reopen_http(const std::string& origin);

}  // namespace dpipe::io::detail
