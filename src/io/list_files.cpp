#include <algorithm>
#include <filesystem>
#include <fnmatch.h>
#include <system_error>

#include <fmt/format.h>

#include <dpipe/core/error.hpp>
#include <dpipe/core/logging.hpp>
#include <dpipe/io/list_files.hpp>

#include "io/opener_registry.hpp"

namespace dpipe::io {
namespace {

namespace fs = std::filesystem;

using detail::matches_masks;

/// `directory` joined with `name` as Python's os.path.join does (no doubled separator).
std::string join(const std::string& directory, const std::string& name) {
  if (directory.empty() || directory.back() == '/') return directory + name;
  return directory + '/' + name;
}

std::string absolute(const std::string& path) {
  std::string normal = fs::absolute(fs::path(path)).lexically_normal().string();
  if (normal.size() > 1 && normal.back() == '/') normal.pop_back();
  return normal;
}

[[noreturn]] void fail(const std::string& label, const std::string& path, const std::error_code& error) {
  throw DataError(label, {.path = path}, fmt::format("cannot list: {}", error.message()));
}

/// Appends the matching files of `directory` (written as `shown`), sorted, then those of its
/// subdirectories in sorted order when `recursive`: os.walk's top-down order with sorted lists.
void walk(const std::string& label, const std::string& shown, const std::vector<std::string>& masks, bool recursive,
          std::vector<std::string>& out) {
  std::error_code error;
  fs::directory_iterator entries(shown, error);
  if (error) fail(label, shown, error);
  std::vector<std::string> files;
  std::vector<std::string> directories;
  for (const auto& entry : entries) {
    const std::string name = entry.path().filename().string();
    std::error_code kind_error;
    if (entry.is_directory(kind_error)) {
      // os.walk lists a link to a directory among the directories and does not descend into it.
      if (!entry.is_symlink(kind_error)) directories.push_back(name);
    } else {
      files.push_back(name);
    }
  }
  std::sort(files.begin(), files.end());
  for (const auto& name : files) {
    if (matches_masks(name, masks)) out.push_back(join(shown, name));
  }
  if (!recursive) return;
  std::sort(directories.begin(), directories.end());
  for (const auto& name : directories) walk(label, join(shown, name), masks, recursive, out);
}

/// Says that `root` lists no file matching `masks`: a warning, or a DataError when `is_error`.
void report_empty(const std::string& label, const std::string& root, const std::vector<std::string>& masks,
                  bool is_error) {
  const std::string reason = masks.empty() ? std::string("no files found")
                                           : fmt::format("no files matched the masks ['{}']", fmt::join(masks, "', '"));
  const DataError error(label, {.path = root}, reason);
  if (is_error) throw error;
  log_warning("{}", error.what());
}

}  // namespace

namespace detail {

bool matches_masks(const std::string& name, const std::vector<std::string>& masks) {
  if (masks.empty()) return true;
  // Python's fnmatch: no escapes, '*' matches a leading '.' and '/'.
  return std::any_of(masks.begin(), masks.end(),
                     [&](const std::string& mask) { return ::fnmatch(mask.c_str(), name.c_str(), FNM_NOESCAPE) == 0; });
}

}  // namespace detail

FileLister::FileLister(std::vector<std::string> roots, std::vector<std::string> masks, ListFilesOptions options)
    : IterDataPipe<std::string>(std::string(kName)),
      roots_(std::move(roots)),
      masks_(std::move(masks)),
      options_(options) {
  if (roots_.empty()) DPIPE_THROW(InvalidArgument, "list_files: no root given");
}

void FileLister::for_each_input(const InputVisitor& /*visit*/) {}

DataPipePtr FileLister::clone_self() const { return std::make_shared<FileLister>(*this); }

NodeSettings FileLister::settings() const {
  const auto joined = [](const std::vector<std::string>& parts) {
    std::string text;
    for (const auto& part : parts) text += (text.empty() ? "" : "\n") + part;
    return text;
  };
  return {{"roots", joined(roots_)},
          {"masks", joined(masks_)},
          {"recursive", options_.recursive ? "true" : "false"},
          {"abspath", options_.abspath ? "true" : "false"}};
}

void FileLister::reset_impl() {
  paths_.clear();
  position_ = 0;
  for (const auto& root : roots_) {
    if (detail::names_scheme(root)) {  // an object store's prefix ("s3://bucket/data/")
      auto listed = detail::list_with_scheme(root, masks_, options_.recursive, label());
      if (listed.empty()) report_empty(label(), root, masks_, options_.empty_is_error);
      paths_.insert(paths_.end(), std::make_move_iterator(listed.begin()), std::make_move_iterator(listed.end()));
      continue;
    }
    std::error_code error;
    const auto status = fs::status(root, error);
    if (error || !fs::exists(status)) {
      fail(label(), root, error ? error : std::make_error_code(std::errc::no_such_file_or_directory));
    }
    const std::string shown = options_.abspath ? absolute(root) : root;
    const std::size_t before = paths_.size();
    if (fs::is_directory(status)) {
      walk(label(), shown, masks_, options_.recursive, paths_);
    } else if (matches_masks(fs::path(shown).filename().string(), masks_)) {
      paths_.push_back(shown);
    }
    if (paths_.size() == before) report_empty(label(), root, masks_, options_.empty_is_error);
  }
}

std::optional<std::string> FileLister::next_impl() {
  if (position_ >= paths_.size()) return std::nullopt;
  return paths_[position_++];
}

bool FileLister::save_state(StateWriter& writer) const {
  writer.write("position", position_);
  writer.write("last", position_ == 0 ? std::string() : paths_[position_ - 1]);
  return true;
}

void FileLister::load_state(const StateReader& reader) {
  const auto position = reader.read<std::uint64_t>("position");
  const auto last = reader.read<std::string>("last");
  reset_impl();  // the listing of today
  if (position > paths_.size() || (position > 0 && paths_[position - 1] != last)) {
    DPIPE_THROW(StateError,
                "{}: the files changed since the checkpoint: it had yielded {} paths, the last '{}', and the listing "
                "now has {} paths{}",
                label(), position, last, paths_.size(),
                position > 0 && position <= paths_.size()
                    ? fmt::format(", path {} being '{}'", position, paths_[position - 1])
                    : std::string());
  }
  position_ = position;
}

}  // namespace dpipe::io
