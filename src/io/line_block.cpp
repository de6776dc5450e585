#include <algorithm>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <dpipe/core/error.hpp>
#include <dpipe/io/line_block.hpp>

namespace dpipe::io {
namespace {

/// Why a span of `spans` is not inside a buffer of `size` bytes, or std::nullopt when all are.
std::optional<std::string> span_problem(std::size_t size, const std::vector<LineBlock::Span>& spans) {
  for (std::size_t index = 0; index < spans.size(); ++index)
    if (spans[index].begin > spans[index].end || spans[index].end > size)
      return fmt::format("line {} spans bytes [{}, {}) of a buffer of {}", index, spans[index].begin, spans[index].end,
                         size);
  return std::nullopt;
}

}  // namespace

LineBlock::LineBlock(std::string path, std::uint64_t first_line, std::string buffer, std::vector<Span> spans)
    : path_(std::move(path)), first_line_(first_line), buffer_(std::move(buffer)), spans_(std::move(spans)) {
  if (auto problem = span_problem(buffer_.size(), spans_)) DPIPE_THROW(InvalidArgument, "LineBlock: {}", *problem);
}

std::string_view LineBlock::at(std::size_t index) const {
  if (index >= size()) throw std::out_of_range(fmt::format("LineBlock::at: line {} of a block of {}", index, size()));
  return (*this)[index];
}

std::vector<std::string> LineBlock::strings() const { return {begin(), end()}; }

void LineBlock::append_run(std::span<const std::string_view> lines) {
  if (lines.empty()) return;
  const char* const first = lines.front().data();
  const std::uint64_t base = buffer_.size();
  buffer_.append(first, lines.back().data() + lines.back().size());
  for (const std::string_view line : lines) {
    const auto begin = base + static_cast<std::uint64_t>(line.data() - first);
    spans_.push_back({begin, begin + line.size()});
  }
  buffer_.push_back('\n');
}

bool LineBlock::operator==(const LineBlock& other) const {
  return path_ == other.path_ && first_line_ == other.first_line_ &&
         std::equal(begin(), end(), other.begin(), other.end());
}

}  // namespace dpipe::io

namespace dpipe {

void Serializer<io::LineBlock>::write(ByteWriter& writer, const io::LineBlock& block) {
  writer.write(block.path());
  writer.write(block.first_line());
  writer.write(block.buffer());
  writer.write_size(block.spans().size());
  writer.write_bytes(block.spans().data(), block.spans().size() * sizeof(io::LineBlock::Span));
}

io::LineBlock Serializer<io::LineBlock>::read(ByteReader& reader) {
  auto path = reader.read<std::string>();
  const auto first_line = reader.read<std::uint64_t>();
  auto buffer = reader.read<std::string>();
  std::vector<io::LineBlock::Span> spans(reader.read_count(sizeof(io::LineBlock::Span)));
  reader.read_bytes(spans.data(), spans.size() * sizeof(io::LineBlock::Span));
  if (auto problem = io::span_problem(buffer.size(), spans))
    DPIPE_THROW(SerializationError, "corrupt input: a LineBlock whose {}", *problem);
  return {std::move(path), first_line, std::move(buffer), std::move(spans)};
}

}  // namespace dpipe
