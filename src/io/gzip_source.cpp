#include "io/gzip_source.hpp"

#include <algorithm>
#include <cstring>
#include <utility>
#include <zlib.h>

#include <dpipe/core/error.hpp>

namespace dpipe::io::detail {
namespace {

constexpr std::size_t kInputBlock = std::size_t{256} << 10;
constexpr int kGzipOnly = 15 + 16;  // the largest window, gzip header and trailer (zlib's inflateInit2)

}  // namespace

struct GzipSource::Inflater {
  z_stream stream{};
};

bool starts_as_gzip(std::string_view head) noexcept {
  return head.size() >= 2 && static_cast<unsigned char>(head[0]) == 0x1f && static_cast<unsigned char>(head[1]) == 0x8b;
}

std::size_t read_head(OpenedFile& file, std::vector<char>& buffer, std::string_view node) {
  std::size_t got = 0;
  while (got < 2) {
    const std::size_t more = file.read(buffer.data() + got, buffer.size() - got, node);
    if (more == 0) break;
    got += more;
  }
  return got;
}

GzipSource::GzipSource(OpenedFile file, std::string_view head, std::string_view node)
    : file_(std::move(file)),
      node_(node),
      inflater_(std::make_unique<Inflater>()),
      input_(std::max(kInputBlock, head.size())) {
  std::memcpy(input_.data(), head.data(), head.size());
  auto& stream = inflater_->stream;
  stream.next_in = reinterpret_cast<Bytef*>(input_.data());
  stream.avail_in = static_cast<uInt>(head.size());
  if (inflateInit2(&stream, kGzipOnly) != Z_OK) throw SourceFailure("cannot start zlib: out of memory");
}

GzipSource::~GzipSource() { inflateEnd(&inflater_->stream); }

bool GzipSource::refill() {
  auto& stream = inflater_->stream;
  if (stream.avail_in > 0) return true;
  const std::size_t got = file_.read(input_.data(), input_.size(), node_);
  stream.next_in = reinterpret_cast<Bytef*>(input_.data());
  stream.avail_in = static_cast<uInt>(got);
  return got > 0;
}

std::size_t GzipSource::read(char* data, std::size_t size) {
  if (size == 0) return 0;
  auto& stream = inflater_->stream;
  stream.next_out = reinterpret_cast<Bytef*>(data);
  stream.avail_out = static_cast<uInt>(std::min<std::size_t>(size, uInt{1} << 30));
  const auto wanted = stream.avail_out;
  while (!ended_ && stream.avail_out == wanted) {
    if (between_members_) {  // zero padding, the end, or the next member
      while (refill() && *stream.next_in == 0) {
        ++stream.next_in;
        --stream.avail_in;
      }
      if (stream.avail_in == 0) {
        ended_ = true;
        break;
      }
      inflateReset(&stream);
      between_members_ = false;
    }
    if (!refill()) throw SourceFailure("truncated gzip stream: it ends inside a member");
    const int status = inflate(&stream, Z_NO_FLUSH);
    if (status == Z_STREAM_END) {
      between_members_ = true;
      checked_ = returned_ + (wanted - stream.avail_out);
    } else if (status != Z_OK && status != Z_BUF_ERROR) {
      throw SourceFailure(fmt::format("corrupt gzip stream: {}", stream.msg != nullptr ? stream.msg : zError(status)));
    }
  }
  returned_ += wanted - stream.avail_out;
  return wanted - stream.avail_out;
}

}  // namespace dpipe::io::detail
