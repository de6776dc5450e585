#include <algorithm>
#include <cstring>
#include <utility>

#include <dpipe/core/error.hpp>
#include <dpipe/io/file_cursor.hpp>

namespace dpipe::io {

void FileCursor::start(OpenedFile file) {
  file_.emplace(std::move(file));
  begin_ = end_ = 0;
  count_ = 0;
  at_end_ = false;
}

void FileCursor::close() noexcept {
  file_.reset();
  begin_ = end_ = 0;
  count_ = 0;
  at_end_ = false;
}

std::size_t FileCursor::read_more(std::string_view node, std::size_t room) {
  if (at_end_) return 0;
  if (buffer_.size() - end_ < room && begin_ > 0) {  // keep the unfinished unit at the front
    std::memmove(buffer_.data(), buffer_.data() + begin_, end_ - begin_);
    end_ -= begin_;
    begin_ = 0;
  }
  if (buffer_.size() - end_ < room) buffer_.resize(std::max(buffer_.size() * 2, end_ + room));
  const std::size_t got = read_direct(buffer_.data() + end_, buffer_.size() - end_, node);
  end_ += got;
  at_end_ = got == 0;
  return got;
}

std::size_t FileCursor::read_direct(char* data, std::size_t size, std::string_view node) {
  try {
    return file_->read(data, size, node);
  } catch (const DataError&) {
    close();  // a read error: nothing more comes from this file
    throw;
  }
}

void FileCursor::save_state(StateWriter& writer) const {
  FilePosition position;
  if (reading()) position = {true, file_->origin(), next_offset(), count_};
  writer.write("position", position);
}

bool FileCursor::load_state(const StateReader& reader, std::string_view node) {
  close();
  const auto position = reader.read<FilePosition>("position");
  if (!position.reading) return false;
  try {
    start(OpenedFile::reopen(position.origin, position.offset, node));
  } catch (const DataError& error) {
    DPIPE_THROW(StateError, "{}: cannot continue the file the checkpoint was reading: {}", node, error.what());
  }
  count_ = position.count;
  return true;
}

}  // namespace dpipe::io
