#pragma once
/// \file
/// dpipe::io::FileReader: the base of a node that reads a format file by file: readlines,
/// parse_csv and its kin, parse_jsonl, tfrecord_records, load_from_tfrecord, and a user's own
/// format (docs/writing-nodes.md#a-format-node).

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include <dpipe/core/detail/element_skipper.hpp>
#include <dpipe/core/error.hpp>
#include <dpipe/core/error_policy.hpp>
#include <dpipe/core/iter_datapipe.hpp>
#include <dpipe/core/iter_pipe.hpp>
#include <dpipe/io/opened_file.hpp>

namespace dpipe::io {

/// Takes the files of its source one after the other and reads each through a Cursor (a class
/// derived from FileCursor, which reads the format's units); the derived node makes its elements
/// in read_next() and implements clone_self() (and settings() when it has options). A DataError
/// from read_next() raises, or with OnError::skip is logged and counted, and only the bad unit is
/// lost (a read error loses the rest of its file: the cursor closed it). Checkpoint state: the
/// cursor's position (the file's origin and the offset of its next unit), the derived node's own
/// fields (save_more), the skipped count; a restore reopens that one file there.
/// Thread-safety: one iterating thread.
template <class Out, class Cursor>
class FileReader : public IterDataPipe<Out> {
 public:
  void for_each_input(const InputVisitor& visit) override { visit(files_); }

  /// The bad units and unreadable file ends skipped in this epoch.
  [[nodiscard]] std::uint64_t skipped() const noexcept { return skipper_.skipped(); }

  [[nodiscard]] bool save_state(StateWriter& writer) const final {
    cursor_.save_state(writer);
    save_more(writer);
    skipper_.save_state(writer);
    return true;
  }
  void load_state(const StateReader& reader) final {
    cursor_.load_state(reader, this->label());
    load_more(reader);
    skipper_.load_state(reader);
  }

 protected:
  FileReader(std::string_view name, const IterPipe<OpenedFile>& files, Cursor cursor, OnError on_error)
      : IterDataPipe<Out>(std::string(name)), cursor_(std::move(cursor)), files_(files.ptr()), skipper_(on_error) {}

  /// The next element of the file cursor_ reads, or std::nullopt when that file ended (the cursor
  /// closed it). Throws DataError for a bad unit, with the cursor past it or closed: the next call
  /// must not meet the same bytes again.
  virtual std::optional<Out> read_next() = 0;
  /// Forgets what the node kept of the file it read last: a new file starts, or a new epoch.
  virtual void forget_file() {}
  /// The derived node's own checkpoint fields, after the cursor's.
  virtual void save_more(StateWriter& /*writer*/) const {}
  virtual void load_more(const StateReader& /*reader*/) {}

  void reset_impl() final {
    cursor_.close();
    forget_file();
    skipper_.reset();
    files_.reset();
  }

  std::optional<Out> next_impl() final {
    for (;;) {
      if (!cursor_.reading()) {
        auto file = files_.next();
        if (!file) return std::nullopt;
        cursor_.start(std::move(*file));
        forget_file();
      }
      try {
        if (auto element = read_next()) return element;
      } catch (const DataError& error) {
        skip_bad_data(error);
      }
    }
  }

  /// In the catch block of `error`: rethrows it when the policy raises; otherwise logs it and
  /// counts it as skipped (ElementError past the budget).
  void skip_bad_data(const DataError& error) {
    skipper_.skip_bad_data(error);
    this->count_skipped();
  }

  Cursor cursor_;

 private:
  Input<OpenedFile> files_;
  dpipe::detail::ElementSkipper skipper_;
};

}  // namespace dpipe::io
