#include <dpipe/core/error.hpp>
#include <dpipe/io/open_files.hpp>

namespace dpipe::io {

FileOpener::FileOpener(const IterPipe<std::string>& paths, OnError on_error)
    : IterDataPipe<OpenedFile>(std::string(kName)), paths_(paths.ptr()), skipper_(on_error) {}

void FileOpener::reset_impl() {
  skipper_.reset();
  paths_.reset();
}

std::optional<OpenedFile> FileOpener::next_impl() {
  while (auto path = paths_.next()) {
    try {
      return OpenedFile::open(std::move(*path), label());
    } catch (const DataError& error) {
      skipper_.skip_bad_data(error);
      count_skipped();
    }
  }
  return std::nullopt;
}

}  // namespace dpipe::io
