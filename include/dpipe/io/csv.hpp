#pragma once
/// \file
/// `io::parse_csv(options)` (torchdata's CSVParser) and `io::parse_csv_as_dict(options)`
/// (CSVDictParser): the rows of each opened CSV file, as vectors of strings, as typed tuples
/// (`io::parse_csv_as<std::tuple<...>>`, the typed rendering of as_tuple) or as records keyed by
/// the file's header row. Python's csv "excel" dialect with a choice of delimiter and quote.
/// Checkpoint state: the file being read, the byte offset of its next row and its line count (and
/// the file's header for parse_csv_as_dict); a restore reopens that one file there and reads
/// nothing before it.

#include <charconv>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <dpipe/core/adaptor.hpp>
#include <dpipe/core/error.hpp>
#include <dpipe/core/error_policy.hpp>
#include <dpipe/core/iter_pipe.hpp>
#include <dpipe/io/csv_block.hpp>
#include <dpipe/io/detail/csv_cursor.hpp>
#include <dpipe/io/file_reader.hpp>
#include <dpipe/io/in_blocks.hpp>
#include <dpipe/io/opened_file.hpp>
#include <dpipe/io/with_path.hpp>
#include <dpipe/serialization/serializer.hpp>

namespace dpipe::io {

struct CsvOptions {
  /// The byte between fields (',' ';' '\t' ...); not '\n', '\r' or the quotechar.
  char delimiter = ',';
  /// The byte that quotes a field holding delimiters, line ends or (doubled) quotes.
  char quotechar = '"';
  /// Lines skipped at the start of each file before parsing (lines end at "\n", "\r\n" or "\r").
  std::size_t skip_lines = 0;
  /// A longer row (its line end excluded) is a DataError (or skipped, with OnError::skip): a file
  /// with an unclosed quote does not fill the memory.
  std::size_t max_row_bytes = std::size_t{64} << 20;
  /// A read error or an unclosed quote skips the rest of its file; another bad row (overlong, a
  /// field that does not convert, a wrong field count) skips that row.
  OnError on_error = {};
};

/// A row's fields: what parse_csv() yields.
using CsvRow = std::vector<std::string>;

/// A row and the path of its file: what the CSV nodes yield with io::with_path.
template <class Row>
using PathRow = std::pair<std::string, Row>;

/// A row of a CSV file with a header: the header's names in order, with the row's values. The
/// names are shared by the records of one file. Lookups by name are linear in the number of
/// columns; with a name twice in the header, the last column of that name answers (as Python's
/// dict). Thread-safety: immutable; copies may be used from any thread.
class CsvRecord {
 public:
  /// One column: its name and the row's value.
  struct Field {
    const std::string& name;
    const std::string& value;
  };

  /// Iterates the columns in header order.
  class Iterator {
   public:
    using value_type = Field;
    using difference_type = std::ptrdiff_t;
    Iterator() = default;
    Iterator(const CsvRecord* record, std::size_t index) noexcept : record_(record), index_(index) {}
    Field operator*() const { return {record_->names()[index_], record_->values()[index_]}; }
    Iterator& operator++() noexcept {
      ++index_;
      return *this;
    }
    Iterator operator++(int) noexcept {
      auto before = *this;
      ++index_;
      return before;
    }
    bool operator==(const Iterator& other) const noexcept { return index_ == other.index_; }

   private:
    const CsvRecord* record_ = nullptr;
    std::size_t index_ = 0;
  };

  /// A record of no columns.
  CsvRecord();
  /// The record of `values` under `names`; InvalidArgument when the counts differ.
  CsvRecord(std::shared_ptr<const std::vector<std::string>> names, std::vector<std::string> values);

  /// The value of column `name`; KeyError naming it and the header when there is none.
  [[nodiscard]] const std::string& at(std::string_view name) const;
  /// Same as at(name).
  [[nodiscard]] const std::string& operator[](std::string_view name) const { return at(name); }
  /// The value of column `name`, or nullptr.
  [[nodiscard]] const std::string* find(std::string_view name) const noexcept;
  [[nodiscard]] bool contains(std::string_view name) const noexcept { return find(name) != nullptr; }

  /// The number of columns.
  [[nodiscard]] std::size_t size() const noexcept { return values_.size(); }
  [[nodiscard]] bool empty() const noexcept { return values_.empty(); }
  /// The header's names, in order.
  [[nodiscard]] const std::vector<std::string>& names() const noexcept { return *names_; }
  /// The row's values, in header order.
  [[nodiscard]] const std::vector<std::string>& values() const noexcept { return values_; }
  /// The shared header (the same object for the records of one file).
  [[nodiscard]] const std::shared_ptr<const std::vector<std::string>>& shared_names() const noexcept { return names_; }

  [[nodiscard]] Iterator begin() const noexcept { return {this, 0}; }
  [[nodiscard]] Iterator end() const noexcept { return {this, values_.size()}; }

  /// Same names and values.
  friend bool operator==(const CsvRecord& a, const CsvRecord& b) {
    return a.values_ == b.values_ && (a.names_ == b.names_ || *a.names_ == *b.names_);
  }

 private:
  std::shared_ptr<const std::vector<std::string>> names_;
  std::vector<std::string> values_;
};

namespace detail {

/// A type a CSV field converts to: kept as a string, or read with std::from_chars.
template <class T>
concept csv_field =
    std::same_as<T, std::string> ||(std::integral<T> && !std::same_as<T, bool>) || std::floating_point<T>;

template <class T>
struct is_csv_tuple : std::false_type {};
template <csv_field... Ts>
struct is_csv_tuple<std::tuple<Ts...>> : std::true_type {};

/// "a 32-bit signed integer", "a double": what a field failed to be.
template <class T>
std::string csv_type_description() {
  if constexpr (std::integral<T>) {
    return fmt::format("a {}-bit {} integer", sizeof(T) * 8, std::is_signed_v<T> ? "signed" : "unsigned");
  } else if constexpr (std::same_as<T, float>) {
    return "a float";
  } else if constexpr (std::same_as<T, double>) {
    return "a double";
  } else {
    return "a long double";
  }
}

/// The DataError of field `column` (0-based), `text`, that is not `expected` ("out of range for"
/// when `out_of_range`).
[[nodiscard]] DataError csv_field_error(std::string_view node, DataError::Where where, std::size_t column,
                                        std::string_view text, const std::string& expected, bool out_of_range);

/// Field `column` of a row converted to T; DataError (csv_field_error) when it does not convert
/// in full.
template <csv_field T>
T csv_convert(std::string& text, std::size_t column, std::string_view node, const DataError::Where& where) {
  if constexpr (std::same_as<T, std::string>) {
    return std::move(text);
  } else {
    T value{};
    const char* end = text.data() + text.size();
    const auto [stop, error] = std::from_chars(text.data(), end, value);
    if (error == std::errc() && stop == end) return value;
    throw csv_field_error(node, where, column, text, csv_type_description<T>(),
                          error == std::errc::result_out_of_range);
  }
}

/// `fields` converted to Tuple, field by field.
template <class Tuple, std::size_t... I>
Tuple csv_convert_row(std::vector<std::string>& fields, std::string_view node, const DataError::Where& where,
                      std::index_sequence<I...> /*columns*/) {
  // Braced initialization converts the fields left to right, so the first bad one is reported.
  return Tuple{csv_convert<std::tuple_element_t<I, Tuple>>(fields[I], I, node, where)...};
}

/// What a CSV node makes of its output type: the row type and whether a path comes with it.
template <class Out>
struct CsvOutput {
  using Row = Out;
  static constexpr bool kWithPath = false;
};
template <class Row_>
struct CsvOutput<std::pair<std::string, Row_>> {
  using Row = Row_;
  static constexpr bool kWithPath = true;
};

/// The row types a CSV node yields.
template <class Row>
concept csv_row = std::same_as<Row, CsvRow> || std::same_as<Row, CsvRecord> || is_csv_tuple<Row>::value;

/// Throws InvalidArgument naming `node` for options no file can be parsed with.
void check_csv_options(const CsvOptions& options, std::string_view node);

/// What the CSV nodes share: the options, their check and their settings.
template <class Out>
class CsvReaderBase : public FileReader<Out, CsvCursor> {
 public:
  [[nodiscard]] NodeSettings settings() const override {
    return {{"delimiter", std::string(1, options_.delimiter)},
            {"quotechar", std::string(1, options_.quotechar)},
            {"skip_lines", std::to_string(options_.skip_lines)},
            {"max_row_bytes", std::to_string(options_.max_row_bytes)}};
  }

 protected:
  CsvReaderBase(std::string_view name, const IterPipe<OpenedFile>& files, CsvOptions options)
      : FileReader<Out, CsvCursor>(
            name, files, CsvCursor({options.delimiter, options.quotechar, options.skip_lines, options.max_row_bytes}),
            options.on_error),
        options_(options) {
    check_csv_options(options, name);
  }

 private:
  CsvOptions options_;
};

}  // namespace detail

/// A tuple of CSV field types (std::string, integers but bool, floating point): what
/// parse_csv_as<Tuple>() converts each row to.
template <class Tuple>
concept csv_tuple = detail::is_csv_tuple<Tuple>::value;

/// Yields the rows of each file its source opens, file after file (Out: CsvRow, a csv_tuple or
/// CsvRecord, alone or as PathRow<...>). A file's lines are numbered from 1 in errors, skipped
/// lines included; an error names the line and byte offset where its row starts. CsvRow: a blank
/// line is a row of no fields (Python's []). A tuple or a record: blank lines are skipped, and a
/// row with another field count than the tuple's or the header's is a DataError. CsvRecord: the
/// first row of each file (after skip_lines and blank lines) is its header. Thread-safety: one
/// iterating thread.
template <class Out>
class CsvParser final : public detail::CsvReaderBase<Out> {
  using Row = typename detail::CsvOutput<Out>::Row;
  using Base = detail::CsvReaderBase<Out>;
  static constexpr bool kWithPath = detail::CsvOutput<Out>::kWithPath;
  static constexpr bool kRecord = std::is_same_v<Row, CsvRecord>;
  static_assert(detail::csv_row<Row>);

 public:
  static constexpr std::string_view kRowsName = "parse_csv";
  static constexpr std::string_view kTupleName = "parse_csv_as";
  static constexpr std::string_view kDictName = "parse_csv_as_dict";
  /// The name of the function that makes the node: parse_csv_as_dict for CsvRecord rows,
  /// parse_csv_as for tuples, parse_csv for CsvRow.
  static constexpr std::string_view kName =
      kRecord ? kDictName : (detail::is_csv_tuple<Row>::value ? kTupleName : kRowsName);

  CsvParser(const IterPipe<OpenedFile>& files, CsvOptions options) : Base(kName, files, options) {}

  [[nodiscard]] DataPipePtr clone_self() const override { return std::make_shared<CsvParser>(*this); }
  [[nodiscard]] NodeSettings settings() const override {
    NodeSettings settings = Base::settings();
    if constexpr (detail::is_csv_tuple<Row>::value) settings.emplace_back("columns", std::to_string(kColumns));
    if constexpr (kWithPath) settings.emplace_back("return_path", "true");
    return settings;
  }

 protected:
  std::optional<Out> read_next() override {
    while (this->cursor_.next(fields_, this->label())) {
      if constexpr (std::is_same_v<Row, CsvRow>) {
        return output(std::move(fields_));
      } else {
        if (fields_.empty()) continue;  // a blank line
        if constexpr (kRecord) {
          if (!header_) {
            header_ = std::make_shared<const std::vector<std::string>>(std::move(fields_));
            continue;
          }
          check_width(header_->size(), "the header has");
          return output(CsvRecord(header_, std::move(fields_)));
        } else {
          check_width(kColumns, "expected");
          return output(
              detail::csv_convert_row<Row>(fields_, this->label(), where(), std::make_index_sequence<kColumns>{}));
        }
      }
    }
    return std::nullopt;
  }

  void forget_file() override { header_.reset(); }

  void save_more(StateWriter& writer) const override {
    if constexpr (kRecord) writer.write("header", header_ ? std::optional(*header_) : std::nullopt);
  }
  void load_more(const StateReader& reader) override {
    if constexpr (kRecord) {
      auto header = reader.read<std::optional<std::vector<std::string>>>("header");
      header_.reset();
      if (header) header_ = std::make_shared<const std::vector<std::string>>(std::move(*header));
    }
  }

 private:
  static constexpr std::size_t kColumns = [] {
    if constexpr (detail::is_csv_tuple<Row>::value) {
      return std::tuple_size_v<Row>;
    } else {
      return std::size_t{0};
    }
  }();

  Out output(Row row) const {
    if constexpr (kWithPath) {
      return Out{this->cursor_.path(), std::move(row)};
    } else {
      return row;
    }
  }

  [[nodiscard]] DataError::Where where() const {
    return {.path = this->cursor_.path(), .line = this->cursor_.row_line(), .byte_offset = this->cursor_.row_offset()};
  }

  /// DataError unless the row has `width` fields.
  void check_width(std::size_t width, std::string_view what) const {
    if (fields_.size() != width)
      throw DataError(this->label(), where(), fmt::format("the row has {} fields, {} {}", fields_.size(), what, width));
  }

  std::vector<std::string> fields_;                         // the row being read
  std::shared_ptr<const std::vector<std::string>> header_;  // the current file's (parse_csv_as_dict)
};

/// Yields the rows of each file its source opens as CsvBlocks of up to `rows_per_block` rows, the
/// rows and errors of parse_csv, with one allocation per block instead of one per row and per
/// long field. A block ends early at the end of its file, and after a bad row that OnError::skip
/// skipped; with the raise policy a bad row raises and the rows read into its block before it are
/// lost, as with a batch. Checkpoint state: parse_csv's, taken between blocks. Thread-safety: one
/// iterating thread.
class CsvBlockParser final : public detail::CsvReaderBase<CsvBlock> {
  using Base = detail::CsvReaderBase<CsvBlock>;

 public:
  static constexpr std::string_view kName = "parse_csv";

  CsvBlockParser(const IterPipe<OpenedFile>& files, CsvOptions options, std::size_t rows_per_block)
      : Base(kName, files, options), rows_per_block_(rows_per_block) {
    if (rows_per_block == 0) DPIPE_THROW(InvalidArgument, "parse_csv: in_blocks needs at least 1 row per block");
  }

  [[nodiscard]] DataPipePtr clone_self() const override { return std::make_shared<CsvBlockParser>(*this); }
  [[nodiscard]] NodeSettings settings() const override {
    NodeSettings settings = Base::settings();
    settings.emplace_back("rows_per_block", std::to_string(rows_per_block_));
    return settings;
  }

 protected:
  std::optional<CsvBlock> read_next() override {
    CsvBlock block(cursor_.path(), 0);
    {
      detail::CsvBlockSink first(block);
      if (!cursor_.next(first, label())) return std::nullopt;
      first.commit(cursor_.row_line());
    }
    try {
      while (block.size() < rows_per_block_) {
        detail::CsvBlockSink row(block);
        if (!cursor_.next(row, label())) break;
        row.commit(cursor_.row_line());
      }
    } catch (const DataError& error) {
      skip_bad_data(error);
    }
    return block;
  }

 private:
  std::size_t rows_per_block_;
};

/// `files | io::parse_csv(options)`: each row as a vector of strings.
[[nodiscard]] inline auto parse_csv(CsvOptions options = {}) {
  return PipeAdaptor{[=](const IterPipe<OpenedFile>& files) { return make_iter<CsvParser<CsvRow>>(files, options); }};
}

/// `files | io::parse_csv(options, io::in_blocks(n))`: CsvBlocks of up to n rows.
[[nodiscard]] inline auto parse_csv(CsvOptions options, InBlocks blocks) {
  return PipeAdaptor{
      [=](const IterPipe<OpenedFile>& files) { return make_iter<CsvBlockParser>(files, options, blocks.units); }};
}

/// `files | io::parse_csv(options, io::with_path)`: (path, row) pairs.
[[nodiscard]] inline auto parse_csv(CsvOptions options, WithPath /*tag*/) {
  return PipeAdaptor{
      [=](const IterPipe<OpenedFile>& files) { return make_iter<CsvParser<PathRow<CsvRow>>>(files, options); }};
}

/// `files | io::parse_csv_as<std::tuple<int, std::string, double>>(options)`: each row converted
/// field by field with std::from_chars (whole field, no spaces, no '+') or kept as a string.
template <csv_tuple Tuple>
[[nodiscard]] auto parse_csv_as(CsvOptions options = {}) {
  return PipeAdaptor{[=](const IterPipe<OpenedFile>& files) { return make_iter<CsvParser<Tuple>>(files, options); }};
}

/// `files | io::parse_csv_as<Tuple>(options, io::with_path)`: (path, tuple) pairs.
template <csv_tuple Tuple>
[[nodiscard]] auto parse_csv_as(CsvOptions options, WithPath /*tag*/) {
  return PipeAdaptor{
      [=](const IterPipe<OpenedFile>& files) { return make_iter<CsvParser<PathRow<Tuple>>>(files, options); }};
}

/// `files | io::parse_csv_as_dict(options)`: each row as a CsvRecord under its file's header.
[[nodiscard]] inline auto parse_csv_as_dict(CsvOptions options = {}) {
  return PipeAdaptor{
      [=](const IterPipe<OpenedFile>& files) { return make_iter<CsvParser<CsvRecord>>(files, options); }};
}

/// `files | io::parse_csv_as_dict(options, io::with_path)`: (path, record) pairs.
[[nodiscard]] inline auto parse_csv_as_dict(CsvOptions options, WithPath /*tag*/) {
  return PipeAdaptor{
      [=](const IterPipe<OpenedFile>& files) { return make_iter<CsvParser<PathRow<CsvRecord>>>(files, options); }};
}

}  // namespace dpipe::io

namespace dpipe {

/// A CsvRecord crosses to and from worker processes as its names and values; records decoded one
/// after the other on a thread share their names again when they are the same.
template <>
struct Serializer<io::CsvRecord> {
  static constexpr std::size_t kMinSize = 16;
  static void write(ByteWriter& writer, const io::CsvRecord& record) {
    writer.write(record.names());
    writer.write(record.values());
  }
  static io::CsvRecord read(ByteReader& reader);
};

}  // namespace dpipe
