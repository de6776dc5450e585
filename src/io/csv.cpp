#include <utility>

#include <dpipe/core/error.hpp>
#include <dpipe/io/csv.hpp>

namespace dpipe::io {
namespace {

/// `text` for a message: quoted, and cut after 64 bytes.
std::string quoted(std::string_view text) {
  constexpr std::size_t kShown = 64;
  if (text.size() <= kShown) return fmt::format("'{}'", text);
  return fmt::format("'{}'... ({} bytes)", text.substr(0, kShown), text.size());
}

const std::shared_ptr<const std::vector<std::string>>& no_names() {
  static const auto names = std::make_shared<const std::vector<std::string>>();
  return names;
}

}  // namespace

CsvRecord::CsvRecord() : names_(no_names()) {}

CsvRecord::CsvRecord(std::shared_ptr<const std::vector<std::string>> names, std::vector<std::string> values)
    : names_(names ? std::move(names) : no_names()), values_(std::move(values)) {
  if (names_->size() != values_.size())
    DPIPE_THROW(InvalidArgument, "CsvRecord: {} names for {} values", names_->size(), values_.size());
}

const std::string* CsvRecord::find(std::string_view name) const noexcept {
  const auto& names = *names_;
  for (std::size_t column = names.size(); column-- > 0;)  // the last column of a name answers
    if (names[column] == name) return &values_[column];
  return nullptr;
}

const std::string& CsvRecord::at(std::string_view name) const {
  if (const auto* value = find(name)) return *value;
  std::string header;
  for (const auto& column : *names_) header += (header.empty() ? "" : ", ") + quoted(column);
  DPIPE_THROW(KeyError, "CsvRecord: no column {} (the header is {})", quoted(name), header.empty() ? "empty" : header);
}

namespace detail {

DataError csv_field_error(std::string_view node, DataError::Where where, std::size_t column, std::string_view text,
                          const std::string& expected, bool out_of_range) {
  return {node, std::move(where),
          fmt::format("column {}: {} is {} {}", column + 1, quoted(text), out_of_range ? "out of range for" : "not",
                      expected)};
}

void check_csv_options(const CsvOptions& options, std::string_view node) {
  const auto is_line_end = [](char c) { return c == '\n' || c == '\r'; };
  if (is_line_end(options.delimiter) || is_line_end(options.quotechar))
    DPIPE_THROW(InvalidArgument, "{}: the delimiter and the quotechar cannot be a line end", node);
  if (options.delimiter == options.quotechar)
    DPIPE_THROW(InvalidArgument, "{}: the delimiter and the quotechar must differ", node);
  if (options.max_row_bytes == 0) DPIPE_THROW(InvalidArgument, "{}: max_row_bytes must be > 0", node);
}

}  // namespace detail
}  // namespace dpipe::io

namespace dpipe {

io::CsvRecord Serializer<io::CsvRecord>::read(ByteReader& reader) {
  // The names of the last record decoded on this thread: the records of a file share them again.
  thread_local std::shared_ptr<const std::vector<std::string>> last;
  auto names = reader.read<std::vector<std::string>>();
  auto values = reader.read<std::vector<std::string>>();
  if (!last || *last != names) last = std::make_shared<const std::vector<std::string>>(std::move(names));
  if (last->size() != values.size())
    DPIPE_THROW(SerializationError, "corrupt input: a CsvRecord of {} names and {} values", last->size(),
                values.size());
  return {last, std::move(values)};
}

}  // namespace dpipe
