#include <utility>

#include <dpipe/core/error.hpp>
#include <dpipe/io/detail/csv_cursor.hpp>

#include "io/csv_scan.hpp"

namespace dpipe::io::detail {
namespace {

constexpr std::size_t kBlock = std::size_t{64} << 10;

/// Where the parser is in a row (the states of Python's csv reader that the excel dialect uses).
enum class State : std::uint8_t {
  kStartRecord,    // nothing of the row read yet
  kStartField,     // at the start of a field, after a delimiter
  kInField,        // in an unquoted field
  kInQuoted,       // inside the quotes of a quoted field
  kQuoteInQuoted,  // a quote inside a quoted field: it closes the quotes, or a second one follows
};

}  // namespace

CsvCursor::CsvCursor(CsvRules rules)
    : rules_(rules), unquoted_(stops_at(rules.delimiter, '\n', '\r')), quoted_(stops_at(rules.quotechar, '\n', '\r')) {}

void CsvCursor::start(OpenedFile file) {
  FileCursor::start(std::move(file));
  lines_skipped_ = false;
}

bool CsvCursor::fill(std::string_view node) { return read_more(node, kBlock) > 0; }

void CsvCursor::consume_line_end(std::size_t at, std::string_view node) {
  const char ending = buffer_[at];
  begin_ = at + 1;
  ++count_;
  if (ending != '\r') return;
  if (begin_ == end_ && !fill(node)) return;
  if (buffer_[begin_] == '\n') ++begin_;  // "\r\n" is one line end
}

void CsvCursor::skip_lines(std::string_view node) {
  for (std::size_t skipped = 0; skipped < rules_.skip_lines;) {
    if (begin_ == end_ && !fill(node)) return;  // a file shorter than the lines to skip
    const char* base = buffer_.data();
    const char* stop = scan(base + begin_, base + end_, kLineEnds);
    if (stop == base + end_) {
      begin_ = end_;
      continue;
    }
    consume_line_end(static_cast<std::size_t>(stop - base), node);
    ++skipped;
  }
}

DataError CsvCursor::row_error(std::string_view node, std::string_view reason) const {
  return {node, {.path = file_->path(), .line = row_line_, .byte_offset = row_offset_}, reason};
}

template <class Sink>
bool CsvCursor::next(Sink& row, std::string_view node) {
  if (!lines_skipped_) {
    skip_lines(node);
    lines_skipped_ = true;
  }
  if (begin_ == end_ && !fill(node)) {
    close();
    return false;
  }
  row.reserve(width_);
  row_offset_ = next_offset();
  row_line_ = count_ + 1;
  const char delimiter = rules_.delimiter;
  const char quote = rules_.quotechar;
  auto state = State::kStartRecord;
  bool after_cr = false;  // inside quotes, the last byte was a '\r' (a '\n' now ends no new line)
  const auto too_long = [&] { return row.discarding() || next_offset() - row_offset_ > rules_.max_row_bytes; };
  for (;;) {
    if (begin_ == end_) {
      if (!row.discarding() && too_long()) row.discard();  // keep reading to the row's end, keep nothing
      if (!fill(node)) break;
    }
    const char* const base = buffer_.data();
    const char* at = base + begin_;
    const char* const end = base + end_;
    const char* line_end = nullptr;
    while (at != end && line_end == nullptr) {
      switch (state) {
        case State::kStartRecord:
          if (*at == '\n' || *at == '\r') {  // a blank line: a row of no fields
            line_end = at;
            break;
          }
          state = State::kStartField;
          [[fallthrough]];
        case State::kStartField:
          row.new_field();
          if (*at == quote) {
            ++at;
            state = State::kInQuoted;
            after_cr = false;
            break;
          }
          if (*at == delimiter) {  // an empty field
            ++at;
            break;
          }
          if (*at == '\n' || *at == '\r') {  // an empty last field
            line_end = at;
            break;
          }
          state = State::kInField;
          [[fallthrough]];
        case State::kInField: {
          const char* stop = scan(at, end, unquoted_);
          row.append(at, stop);
          at = stop;
          if (at == end) break;
          if (*at == delimiter) {
            ++at;
            state = State::kStartField;
          } else {
            line_end = at;
          }
          break;
        }
        case State::kInQuoted: {
          const char* stop = scan(at, end, quoted_);
          if (stop != at) {
            row.append(at, stop);
            after_cr = false;
          }
          at = stop;
          if (at == end) break;
          if (*at == quote) {
            ++at;
            state = State::kQuoteInQuoted;
            break;
          }
          // A line end inside the quotes belongs to the field; "\r\n" counts as one line.
          if (*at == '\r' || !after_cr) ++count_;
          after_cr = *at == '\r';
          row.append(*at);
          ++at;
          break;
        }
        case State::kQuoteInQuoted:
          if (*at == quote) {  // a doubled quote stands for one
            row.append(*at);
            ++at;
            state = State::kInQuoted;
            after_cr = false;
          } else if (*at == delimiter) {
            ++at;
            state = State::kStartField;
          } else if (*at == '\n' || *at == '\r') {
            line_end = at;
          } else {
            state = State::kInField;  // text after the closing quote is kept (Python's non-strict rule)
          }
          break;
      }
    }
    if (line_end != nullptr) {
      begin_ = static_cast<std::size_t>(line_end - base);
      const bool rejected = too_long();
      consume_line_end(begin_, node);
      if (rejected)
        throw row_error(node, fmt::format("the row is longer than max_row_bytes ({})", rules_.max_row_bytes));
      width_ = row.size();
      return true;
    }
    begin_ = end_;
  }
  // The file ends without a line end after the row.
  if (state == State::kInQuoted) {
    auto error = row_error(node, "a quoted field of this row never ends (the file ends inside its quotes)");
    close();
    throw error;
  }
  if (state == State::kStartField) row.new_field();  // "a," ends with an empty field
  if (too_long()) throw row_error(node, fmt::format("the row is longer than max_row_bytes ({})", rules_.max_row_bytes));
  width_ = row.size();
  return true;
}

template bool CsvCursor::next(CsvFieldsSink& row, std::string_view node);
template bool CsvCursor::next(CsvBlockSink& row, std::string_view node);

void CsvCursor::load_state(const StateReader& reader, std::string_view node) {
  // A checkpoint is taken between rows, after the skipped lines.
  lines_skipped_ = FileCursor::load_state(reader, node);
}

}  // namespace dpipe::io::detail
