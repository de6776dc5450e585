#pragma once
// TempDir: a fresh directory for a test's files, removed with everything in it at the end; and
// TextFiles, three small text files in one.

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>

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

}  // namespace dpipe::testing
