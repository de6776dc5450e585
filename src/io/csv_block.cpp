#include <algorithm>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <dpipe/core/error.hpp>
#include <dpipe/io/csv_block.hpp>

namespace dpipe::io {
namespace {

/// Why `ends` does not cut `size` units into parts that follow one another, or std::nullopt when
/// it does. `what` names the parts ("field", "row").
std::optional<std::string> cut_problem(std::string_view what, const std::vector<std::uint64_t>& ends,
                                       std::uint64_t size, std::string_view of) {
  std::uint64_t before = 0;
  for (std::size_t index = 0; index < ends.size(); ++index) {
    if (ends[index] < before)
      return fmt::format("{} {} ends at {}, before the {} ahead of it ({})", what, index, ends[index], what, before);
    before = ends[index];
  }
  if (before != size) return fmt::format("the {}s end at {} but the {} at {}", what, before, of, size);
  return std::nullopt;
}

/// Why the fields and rows do not cut `buffer_size` bytes, or std::nullopt.
std::optional<std::string> block_problem(std::size_t buffer_size, const std::vector<std::uint64_t>& field_ends,
                                         const std::vector<std::uint64_t>& row_ends) {
  if (auto problem = cut_problem("field", field_ends, buffer_size, "buffer")) return problem;
  return cut_problem("row", row_ends, field_ends.size(), "fields");
}

}  // namespace

std::string_view CsvBlock::Row::at(std::size_t index) const {
  if (index >= count_)
    throw std::out_of_range(fmt::format("CsvBlock::Row::at: field {} of a row of {}", index, count_));
  return (*this)[index];
}

CsvBlock::CsvBlock(std::string path, std::uint64_t first_line, std::string buffer,
                   std::vector<std::uint64_t> field_ends, std::vector<std::uint64_t> row_ends)
    : path_(std::move(path)),
      first_line_(first_line),
      buffer_(std::move(buffer)),
      field_ends_(std::move(field_ends)),
      row_ends_(std::move(row_ends)) {
  if (auto problem = block_problem(buffer_.size(), field_ends_, row_ends_))
    DPIPE_THROW(InvalidArgument, "CsvBlock: {}", *problem);
}

CsvBlock::Row CsvBlock::at(std::size_t index) const {
  if (index >= size()) throw std::out_of_range(fmt::format("CsvBlock::at: row {} of a block of {}", index, size()));
  return (*this)[index];
}

bool CsvBlock::operator==(const CsvBlock& other) const {
  return path_ == other.path_ && first_line_ == other.first_line_ &&
         std::equal(begin(), end(), other.begin(), other.end(),
                    [](const Row& a, const Row& b) { return std::equal(a.begin(), a.end(), b.begin(), b.end()); });
}

}  // namespace dpipe::io

namespace dpipe {

io::CsvBlock Serializer<io::CsvBlock>::read(ByteReader& reader) {
  auto path = reader.read<std::string>();
  const auto first_line = reader.read<std::uint64_t>();
  auto buffer = reader.read<std::string>();
  auto field_ends = reader.read<std::vector<std::uint64_t>>();
  auto row_ends = reader.read<std::vector<std::uint64_t>>();
  if (auto problem = io::block_problem(buffer.size(), field_ends, row_ends))
    DPIPE_THROW(SerializationError, "corrupt input: a CsvBlock whose {}", *problem);
  return {std::move(path), first_line, std::move(buffer), std::move(field_ends), std::move(row_ends)};
}

}  // namespace dpipe
