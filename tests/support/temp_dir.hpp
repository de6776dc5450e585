#pragma once
// TempDir: a fresh directory for a test's files, removed with everything in it at the end; and
// TextFiles and BadCsvFiles, small files in one.

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>
#include <vector>

#include <catch2/catch.hpp>

namespace dpipe::testing {

/// A fresh directory under the system's temporary directory, removed at the end of the test.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "dpipe-io-XXXXXX").string();
    REQUIRE(::mkdtemp(pattern.data()) != nullptr);
    path_ = pattern;
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  /// Writes `bytes` to `name` (directories created) and returns its path.
  [[nodiscard]] std::string write(const std::string& name, const std::string& bytes) const {
    const auto file = path_ / name;
    std::filesystem::create_directories(file.parent_path());
    std::ofstream(file, std::ios::binary) << bytes;
    return file.string();
  }
  [[nodiscard]] std::string operator/(const std::string& name) const { return (path_ / name).string(); }
  [[nodiscard]] std::string str() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

/// Three files: a header and lines, a file with "\r\n" endings and no final newline, an empty one.
struct TextFiles {
  TempDir dir;
  std::string a = dir.write("a.txt", "header\none\ntwo\n\nthree\n");
  std::string b = dir.write("b.txt", "header\r\nfour\r\nfive");
  std::string c = dir.write("c.txt", "");
};

/// Two CSV files: one row, then rows that span lines before an unclosed quote on line 6.
struct MultiLineCsvFiles {
  TempDir dir;
  std::string first = dir.write("first.csv", "0\n");
  std::string multi = dir.write("multi.csv",
                                "h1,h2\n"                // line 1, bytes 0-5
                                "\"a\nb\r\nc\",1\n"      // lines 2-4, bytes 6-16
                                "\"x\"\"y\",2\n"         // line 5, bytes 17-25
                                "bad,\"never\nends\n");  // line 6, byte 26
};

/// Three CSV files: an unclosed quote on line 3, a two-line row longer than 10 bytes on line 2
/// among shorter rows, and a good file.
struct BadCsvFiles {
  TempDir dir;
  std::string unclosed = dir.write("unclosed.csv", "id,text\n1,ok\n2,\"never\nclosed,3\n");
  std::string long_rows = dir.write("long.csv", "short,row\n\"0123456789\nabc\",x\n0123456789\nafter");
  std::string good = dir.write("good.csv", "g\n");

  /// Checks what parse_csv({.max_row_bytes = 10, .on_error = OnError::skip()}) over unclosed,
  /// long_rows and good reports: the statistics `rows` (the parser's first) and the warnings logged.
  template <class StatisticsRows>
  void check_skip_reports(const StatisticsRows& rows, const std::vector<std::string>& messages) const {
    REQUIRE_FALSE(rows.empty());
    CHECK(rows[0].label.starts_with("parse_csv#"));
    CHECK(rows[0].skipped == 2);
    REQUIRE(messages.size() == 2);
    CHECK_THAT(messages[1], Catch::Matches("parse_csv#[0-9]+: '" + long_rows +
                                           "' line 2 byte offset 10: the row is longer than max_row_bytes \\(10\\); "
                                           "skipped \\(2 in this epoch\\)"));
  }
};

}  // namespace dpipe::testing
