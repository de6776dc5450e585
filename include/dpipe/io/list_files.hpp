#pragma once
/// \file
/// `io::list_files(roots, masks, options)` (torchdata's FileLister): the paths of the files under
/// each root, in a deterministic order. Checkpoint state: how many paths it yielded and the last
/// one, so that a restore into a directory that changed since is refused instead of silently
/// yielding other files.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <dpipe/core/iter_datapipe.hpp>
#include <dpipe/core/iter_pipe.hpp>

namespace dpipe::io {

struct ListFilesOptions {
  /// Descend into subdirectories (in sorted order, each one's files before its subdirectories).
  bool recursive = false;
  /// Yield absolute, normalized paths instead of paths joined to the root as given.
  bool abspath = false;
  /// A root where no file matches the masks is a DataError naming the root and the masks, instead
  /// of a warning (tf.data's list_files raises "No files matched pattern").
  bool empty_is_error = false;
};

/// Lists, for each root in turn, the files whose name matches one of the masks (shell patterns:
/// `*`, `?`, `[...]`; no masks match every file): a root that is a file is yielded itself when it
/// matches; a directory's files come in sorted order, joined to the root as given. Symbolic links
/// to files are listed; links to directories are not followed. The listing is made when an
/// iteration starts. A root "s3://bucket/prefix" lists the objects under the prefix by the same
/// rules, "/" separating directories (<dpipe/io/s3.hpp>). A missing or unreadable root or
/// subdirectory is a DataError naming it. A
/// root where no file matches is logged as a warning at every listing ("list_files#1: 'data':
/// no files matched the masks ['*.tar']"), or is that DataError with `empty_is_error`.
/// Thread-safety: one iterating thread.
class FileLister final : public IterDataPipe<std::string> {
 public:
  static constexpr std::string_view kName = "list_files";

  FileLister(std::vector<std::string> roots, std::vector<std::string> masks, ListFilesOptions options);

  void for_each_input(const InputVisitor& visit) override;
  [[nodiscard]] DataPipePtr clone_self() const override;
  [[nodiscard]] NodeSettings settings() const override;
  [[nodiscard]] bool save_state(StateWriter& writer) const override;
  void load_state(const StateReader& reader) override;

 protected:
  void reset_impl() override;
  std::optional<std::string> next_impl() override;

 private:
  std::vector<std::string> roots_;
  std::vector<std::string> masks_;
  ListFilesOptions options_;
  std::vector<std::string> paths_;  // the listing of this iteration
  std::uint64_t position_ = 0;      // paths yielded
};

/// `io::list_files("data", {"*.txt"}, {.recursive = true})`: a source of file paths.
[[nodiscard]] inline IterPipe<std::string> list_files(std::vector<std::string> roots,
                                                      std::vector<std::string> masks = {},
                                                      ListFilesOptions options = {}) {
  return make_iter<FileLister>(std::move(roots), std::move(masks), options);
}

/// One root.
[[nodiscard]] inline IterPipe<std::string> list_files(std::string root, std::vector<std::string> masks = {},
                                                      ListFilesOptions options = {}) {
  return list_files(std::vector<std::string>{std::move(root)}, std::move(masks), options);
}

}  // namespace dpipe::io
