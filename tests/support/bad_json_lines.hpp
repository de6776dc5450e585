#pragma once
// The JSON lines file with bad lines that parse_jsonl's tests read, one line at a time and in
// blocks, and what both must report: the same errors, in the file's order.

#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include <dpipe/core/error.hpp>

#include "support/battery.hpp"

namespace dpipe::testing {

/// Good lines 1 ({"ok":3}) and 10 ({"ok":5}) around a blank line and one line of each kind of
/// error simdjson reports, and line 9, 40 spaces: too long for max_line_bytes 32.
inline std::string bad_json_lines() {
  return "{\"ok\":3}\n"              // offset 0
         "{\"a\":1,}\n"              // offset 9: a superfluous comma
         "\n"                        // offset 18
         "{\"a\":tru}\n"             // offset 19: a bad atom
         "{\"a\":[1,2\n"             // offset 29: truncated
         "\"caf\xff\"\n"             // offset 39: not UTF-8
         "[18446744073709551616]\n"  // offset 46: beyond uint64
         "{\"ok\":4} {}\n"           // offset 69: two documents
         + std::string(40, ' ') +
         "\n"           // offset 81: too long, even blank
         "{\"ok\":5}";  // offset 122
}

/// Checks that reading `pipe` raises the DataError of bad_json_lines() at `path` first: line 2's.
template <class Pipe>
void check_first_bad_json_line_raised(const Pipe& pipe, const std::string& path) {
  try {
    (void)collect(pipe);
    FAIL("no DataError");
  } catch (const DataError& error) {
    CHECK_THAT(error.what(), Catch::Matches("parse_jsonl#[0-9]+: '" + path +
                                            "' line 2 byte offset 9: not valid JSON: The JSON document "
                                            "has an improper structure: missing or superfluous commas, braces, "
                                            "missing keys, etc\\."));
    CHECK(error.path() == path);
    CHECK(error.line() == 2);
    CHECK(error.byte_offset() == 9);
  }
}

/// Checks the 7 warnings logged skipping the bad lines of bad_json_lines() at `path` with
/// max_line_bytes 32, first in its epoch.
inline void check_bad_json_lines_skipped(const std::vector<std::string>& messages, const std::string& path) {
  REQUIRE(messages.size() == 7);
  const std::string prefix = "parse_jsonl#[0-9]+: '" + path + "' ";
  const std::string structure = "not valid JSON: The JSON document has an improper structure: .*";
  CHECK_THAT(messages[0],
             Catch::Matches(prefix + "line 2 byte offset 9: " + structure + "; skipped \\(1 in this epoch\\)"));
  CHECK_THAT(messages[1],
             Catch::Matches(prefix + "line 4 byte offset 19: not valid JSON: Problem while parsing "
                                     "an atom starting with the letter 't'; skipped \\(2 in this epoch\\)"));
  CHECK_THAT(messages[2], Catch::Matches(prefix + "line 5 byte offset 29: " + structure));
  CHECK_THAT(messages[3], Catch::Matches(prefix + "line 6 byte offset 39: not valid JSON: The input is not "
                                                  "valid UTF-8; skipped \\(4 in this epoch\\)"));
  CHECK_THAT(messages[4], Catch::Matches(prefix + "line 7 byte offset 46: not valid JSON: Problem while "
                                                  "parsing a number; skipped \\(5 in this epoch\\)"));
  CHECK_THAT(messages[5], Catch::Matches(prefix + "line 8 byte offset 69: " + structure));
  CHECK_THAT(messages[6], Catch::Matches(prefix + "line 9 byte offset 81: the line is longer than max_line_bytes "
                                                  "\\(32\\); skipped \\(7 in this epoch\\)"));
}

}  // namespace dpipe::testing
