// open_files() with read-ahead: the next URLs open on threads of their own while the current
// stream is read.

#include <future>
#include <utility>

#include <dpipe/core/error.hpp>
#include <dpipe/core/state.hpp>
#include <dpipe/io/open_files.hpp>

#include "io/opener_registry.hpp"

namespace dpipe::io {

struct AheadFileOpener::Opening {
  std::string path;
  std::future<OpenedFile> file;  // std::launch::deferred for a local path; not valid() until launched
};

AheadFileOpener::AheadFileOpener(const IterPipe<std::string>& paths, OpenFilesOptions options)
    : IterDataPipe<OpenedFile>(std::string(kName)), paths_(paths.ptr()), options_(options), skipper_(options.on_error) {
  if (options_.read_ahead == 0) DPIPE_THROW(InvalidArgument, "open_files: read_ahead must be positive here");
}

AheadFileOpener::AheadFileOpener(const AheadFileOpener& other)
    : IterDataPipe<OpenedFile>(other),
      paths_(other.paths_),
      options_(other.options_),
      skipper_(other.options_.on_error) {}

AheadFileOpener::~AheadFileOpener() = default;  // waits for the openings in flight (bounded by their timeouts)

NodeSettings AheadFileOpener::settings() const {
  return {{"read_ahead", std::to_string(options_.read_ahead)},
          {"read_ahead_bytes", std::to_string(options_.read_ahead_bytes)}};
}

void AheadFileOpener::launch(Opening& opening) const {
  const std::size_t head = options_.read_ahead_bytes / options_.read_ahead;
  auto open = [path = opening.path, head, node = label()] {
    auto file = OpenedFile::open(path, node);
    file.prefetch(head, node);
    return file;
  };
  const auto policy = detail::names_scheme(opening.path) ? std::launch::async : std::launch::deferred;
  opening.file = std::async(policy, std::move(open));
}

void AheadFileOpener::reset_impl() {
  pending_.clear();
  skipper_.reset();
  paths_.reset();
}

std::optional<OpenedFile> AheadFileOpener::next_impl() {
  for (;;) {
    while (pending_.size() <= options_.read_ahead) {
      auto path = paths_.next();
      if (!path) break;
      pending_.push_back(std::make_unique<Opening>(Opening{std::move(*path), {}}));
    }
    // Launched here, not at a restore: a restore may come before the fork of a worker.
    for (const auto& opening : pending_)
      if (!opening->file.valid()) launch(*opening);
    if (pending_.empty()) return std::nullopt;
    const auto opening = std::move(pending_.front());
    pending_.pop_front();
    try {
      return opening->file.get();
    } catch (const DataError& error) {
      skipper_.skip_bad_data(error);
      count_skipped();
    }
  }
}

bool AheadFileOpener::save_state(StateWriter& writer) const {
  std::vector<std::string> ahead;
  ahead.reserve(pending_.size());
  for (const auto& opening : pending_) ahead.push_back(opening->path);
  writer.write("ahead", ahead);
  skipper_.save_state(writer);
  return true;
}

void AheadFileOpener::load_state(const StateReader& reader) {
  const auto ahead = reader.read<std::vector<std::string>>("ahead");
  skipper_.load_state(reader);
  pending_.clear();
  for (const auto& path : ahead) pending_.push_back(std::make_unique<Opening>(Opening{path, {}}));
}

}  // namespace dpipe::io
