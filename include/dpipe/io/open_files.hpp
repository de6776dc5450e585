#pragma once
/// \file
/// `io::open_files(on_error)` (torchdata's FileOpener): opens each path for reading, a local file
/// or a "<scheme>://" path through its scheme's opener (<dpipe/io/opener.hpp>). dpipe reads bytes,
/// as torchdata's mode "rb" does; readlines() and the parsers take care of line endings.
/// Stateless: a checkpoint is the position of the paths upstream.
///
/// `io::open_files({.read_ahead = k})` also opens the next k URLs ("s3://", "https://") while the
/// current stream is read, so that a reader never waits a round trip at a stream's boundary.

#include <cstddef>
#include <cstdint>
#include <deque>
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

/// How open_files() opens its paths.
struct OpenFilesOptions {
  /// A path that cannot be opened: raise, or skip it.
  OnError on_error = {};
  /// URLs (paths that name a scheme: "s3://", "https://") opened ahead of the stream being read,
  /// each on a thread of its own, in the order they come; 0 for none. Local paths open when
  /// their turn comes.
  std::size_t read_ahead = 0;
  /// The bytes fetched ahead, shared by the streams opened ahead: each gets read_ahead_bytes /
  /// read_ahead of its first bytes into memory.
  std::size_t read_ahead_bytes = std::size_t{16} << 20;
};

/// open_files() with read-ahead: keeps `read_ahead` URLs opening (and fetching their first bytes)
/// ahead of the stream it yielded last. An error opening one is raised (or skipped) at its turn,
/// in order. Checkpoint state: the paths opened ahead (opened again at a restore) and the skips.
/// Thread-safety: one iterating thread; the opening threads touch nothing of the graph.
class AheadFileOpener final : public IterDataPipe<OpenedFile> {
 public:
  static constexpr std::string_view kName = "open_files_ahead";

  /// InvalidArgument when read_ahead is 0.
  AheadFileOpener(const IterPipe<std::string>& paths, OpenFilesOptions options);
  /// Copies the configuration; the copy has nothing opened ahead.
  AheadFileOpener(const AheadFileOpener& other);
  AheadFileOpener& operator=(const AheadFileOpener&) = delete;
  ~AheadFileOpener() override;

  void for_each_input(const InputVisitor& visit) override { visit(paths_); }
  [[nodiscard]] DataPipePtr clone_self() const override { return std::make_shared<AheadFileOpener>(*this); }
  [[nodiscard]] NodeSettings settings() const override;
  [[nodiscard]] bool save_state(StateWriter& writer) const override;
  void load_state(const StateReader& reader) override;

  /// The paths skipped in this epoch.
  [[nodiscard]] std::uint64_t skipped() const noexcept { return skipper_.skipped(); }

 protected:
  void reset_impl() override;
  std::optional<OpenedFile> next_impl() override;

 private:
  /// A path pulled from upstream and its opening (on a thread of its own for a URL).
  struct Opening;

  /// Starts opening `opening`'s path.
  void launch(Opening& opening) const;

  Input<std::string> paths_;
  OpenFilesOptions options_;
  dpipe::detail::ElementSkipper skipper_;
  std::deque<std::unique_ptr<Opening>> pending_;  // pulled from upstream, not yielded yet, in order
};

/// `paths | io::open_files()`.
[[nodiscard]] inline auto open_files(OnError on_error = {}) {
  return PipeAdaptor{[=](const IterPipe<std::string>& paths) { return make_iter<FileOpener>(paths, on_error); }};
}

/// `paths | io::open_files({.read_ahead = 4})`: with read-ahead when `options.read_ahead` > 0.
[[nodiscard]] inline auto open_files(OpenFilesOptions options) {
  return PipeAdaptor{[=](const IterPipe<std::string>& paths) -> IterPipe<OpenedFile> {
    if (options.read_ahead == 0) return make_iter<FileOpener>(paths, options.on_error);
    return make_iter<AheadFileOpener>(paths, options);
  }};
}

}  // namespace dpipe::io
