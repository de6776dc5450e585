// Extends the I/O wing from outside it: a scheme of its own ("mem://", blobs held in memory,
// opened by a registered opener wherever a path goes) and a format of its own (files of
// little-endian 32-bit integers, read by a node built on io::FileReader and io::FileCursor). A
// checkpoint taken inside a file reopens that stream through the opener at the saved offset; a
// file that ends inside a value is a DataError naming the file and the offset.

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <dpipe/dpipe.hpp>
#include <dpipe/io.hpp>

namespace {

// [scheme]
/// The bytes of one blob. It seeks, so a restore starts at the saved offset at once.
class BlobSource final : public dpipe::io::ByteSource {
 public:
  explicit BlobSource(std::shared_ptr<const std::string> blob) : blob_(std::move(blob)) {}

  std::size_t read(char* data, std::size_t size) override {
    const std::size_t count = std::min(size, blob_->size() - position_);
    std::memcpy(data, blob_->data() + position_, count);
    position_ += count;
    return count;
  }

  bool seek(std::uint64_t offset) override {
    if (offset > blob_->size()) throw dpipe::io::SourceFailure("the blob is shorter than the offset");
    position_ = static_cast<std::size_t>(offset);
    return true;
  }

 private:
  std::shared_ptr<const std::string> blob_;
  std::size_t position_ = 0;
};

/// Blobs by name; filled before the opener is registered, only read after (by any thread).
using BlobStore = std::map<std::string, std::shared_ptr<const std::string>, std::less<>>;

/// "mem://<name>" opens the blob `name` of `store`. The stream's path and origin are the path
/// itself, so a checkpoint reopens it through this same opener.
void register_mem_scheme(std::shared_ptr<const BlobStore> store) {
  dpipe::io::register_opener("mem", [store](const std::string& origin, std::string_view node) {
    constexpr std::string_view kPrefix = "mem://";
    const auto blob = origin.starts_with(kPrefix) ? store->find(origin.substr(kPrefix.size())) : store->end();
    if (blob == store->end()) throw dpipe::DataError(node, {.path = origin}, "cannot open: no such blob");
    return dpipe::io::OpenedFile(origin, origin, std::make_unique<BlobSource>(blob->second));
  });
}
// [scheme]

// [format]
/// Reads the little-endian 32-bit integers of one file at a time. FileCursor holds the file and
/// a buffer of its bytes ([begin_, end_) is read and not consumed yet), and saves the file's
/// origin and the offset of its next value in checkpoints.
class Int32Cursor final : public dpipe::io::FileCursor {
 public:
  /// The next value of the current file, or std::nullopt at its end (the file is closed).
  std::optional<int> next(std::string_view node) {
    while (end_ - begin_ < 4) {
      if (read_more(node, 4) > 0) continue;
      if (end_ == begin_) {
        close();
        return std::nullopt;
      }
      // The file ends inside a value: nothing after it can be read, so the file closes first.
      dpipe::DataError error(node, {.path = path(), .byte_offset = next_offset()},
                             "the file ends inside a value (" + std::to_string(end_ - begin_) + " of 4 bytes)");
      close();
      throw error;
    }
    std::uint32_t value = 0;
    for (std::size_t i = 0; i < 4; ++i)
      value |= std::uint32_t{static_cast<unsigned char>(buffer_[begin_ + i])} << (8 * i);
    begin_ += 4;
    ++count_;
    return static_cast<int>(value);
  }
};

/// The values of each file its source opens, file after file.
class Int32Reader final : public dpipe::io::FileReader<int, Int32Cursor> {
 public:
  explicit Int32Reader(const dpipe::IterPipe<dpipe::io::OpenedFile>& files, dpipe::OnError on_error = {})
      : FileReader("read_int32s", files, Int32Cursor(), on_error) {}
  dpipe::DataPipePtr clone_self() const override { return std::make_shared<Int32Reader>(*this); }

 protected:
  std::optional<int> read_next() override { return cursor_.next(label()); }
};

/// `files | read_int32s()`.
inline constexpr auto read_int32s = dpipe::iter::adaptor<Int32Reader>;
// [format]

/// `values` as little-endian 32-bit integers.
std::string int32s(const std::vector<std::uint32_t>& values) {
  std::string bytes;
  for (const std::uint32_t value : values)
    for (int i = 0; i < 4; ++i) bytes.push_back(static_cast<char>((value >> (8 * i)) & 0xffU));
  return bytes;
}

/// The message of the DataError reading `pipe` raises.
std::string error_of(const dpipe::IterPipe<int>& pipe) {
  try {
    for ([[maybe_unused]] const int value : pipe) {
    }
  } catch (const dpipe::DataError& error) {
    return error.what();
  }
  return "no DataError";
}

}  // namespace

int main() {
  auto store = std::make_shared<BlobStore>();
  store->emplace("a.i32", std::make_shared<const std::string>(int32s({1, 2, 3, 4})));
  store->emplace("b.i32", std::make_shared<const std::string>(int32s({5, 6, 7})));
  store->emplace("bad.i32", std::make_shared<const std::string>(int32s({8}) + std::string(2, '\0')));
  register_mem_scheme(store);  // before a loader forks its worker processes: they inherit it

  // [use]
  const std::vector<std::string> paths{"mem://a.i32", "mem://b.i32"};
  const auto make = [&] { return dpipe::iter::from(paths) | dpipe::io::open_files() | read_int32s(); };
  const auto pipe = make();
  std::string before;
  for (const int value : pipe) {
    before += " " + std::to_string(value);
    if (value == 3) break;  // a checkpoint inside mem://a.i32, at byte 12
  }
  const auto checkpoint = dpipe::graph::save_state(pipe);
  const auto restored = make();
  dpipe::graph::load_state(restored, checkpoint);  // reopens mem://a.i32 through the opener, at byte 12
  std::string after;
  for (const int value : restored) after += " " + std::to_string(value);
  // [use]
  std::printf("read_int32s:%s, checkpoint, then%s\n", before.c_str(), after.c_str());

  const auto from_paths = [](std::vector<std::string> names) {
    return dpipe::iter::from(std::move(names)) | dpipe::io::open_files() | read_int32s();
  };
  std::printf("%s\n%s\n", error_of(from_paths({"mem://bad.i32"})).c_str(),
              error_of(from_paths({"gs://bucket/a.i32"})).c_str());
  return 0;
}
