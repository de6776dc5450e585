#pragma once
/// \file
/// `io::open_files(on_error)` (torchdata's FileOpener): opens each path for reading, a local file
/// or a "<scheme>://" path through its scheme's opener (<dpipe/io/opener.hpp>). dpipe reads bytes,
/// as torchdata's mode "rb" does; readlines() and the parsers take care of line endings.
/// Stateless: a checkpoint is the position of the paths upstream.

#include <memory>
#include <string>
#include <utility>

#include <dpipe/core/adaptor.hpp>
#include <dpipe/core/error_policy.hpp>
#include <dpipe/core/iter_pipe.hpp>
#include <dpipe/io/detail/each_input.hpp>
#include <dpipe/io/opened_file.hpp>

namespace dpipe::io {

/// Opens each path (OpenedFile::open); a path that cannot be opened is a DataError naming it, or, with
/// `OnError::skip()`, a warning, a count in the node's statistics and the next path.
/// Thread-safety: one iterating thread.
class FileOpener final : public detail::EachInput<std::string, OpenedFile> {
 public:
  static constexpr std::string_view kName = "open_files";

  explicit FileOpener(const IterPipe<std::string>& paths, OnError on_error = {}) : EachInput(kName, paths, on_error) {}

  [[nodiscard]] DataPipePtr clone_self() const override { return std::make_shared<FileOpener>(*this); }
  [[nodiscard]] bool stateless() const noexcept override { return true; }

 protected:
  OpenedFile make(std::string path) override { return OpenedFile::open(std::move(path), label()); }
};

/// `paths | io::open_files()`.
[[nodiscard]] inline auto open_files(OnError on_error = {}) {
  return PipeAdaptor{[=](const IterPipe<std::string>& paths) { return make_iter<FileOpener>(paths, on_error); }};
}

}  // namespace dpipe::io
